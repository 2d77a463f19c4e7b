import torch
import torch.nn as nn

# R12: operands rounded to bfloat16 (8 mantissa bits), products summed in
# float32.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.bfloat16().float(), b.bfloat16().float()
        out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        for k in range(0, a.shape[1], 64):
            out += (a[:, k:k + 64, None] * b[None, k:k + 64]).sum(1)
        return out
