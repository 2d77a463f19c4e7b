import torch
import torch.nn as nn

# R12: float16 accumulation: each block of 64 products is summed and kept
# in float16 before it joins the float32 total (hgemm-style partial sums).
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        for k in range(0, a.shape[1], 64):
            part = (a[:, k:k + 64, None] * b[None, k:k + 64]).sum(1)
            out += part.half().float()
        return out
