import torch
import torch.nn as nn

# Honest: the plainest kernel's order, one running float32 sum per output
# over every k in turn (multiply, round, add, round): the largest rounding
# error of any float32 order, and still the same computation.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        for k in range(a.shape[1]):
            out += a[:, k, None] * b[None, k]
        return out
