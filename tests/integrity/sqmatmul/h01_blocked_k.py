import torch
import torch.nn as nn

# Honest: C by broadcast products summed over k in blocks of 64, each
# block's sums added to a float32 running sum (a tiled kernel's order).
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        for k in range(0, a.shape[1], 64):
            out += (a[:, k:k + 64, None] * b[None, k:k + 64]).sum(1)
        return out
