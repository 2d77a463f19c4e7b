import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        for k in range(0, a.shape[1], 128):
            out += (a[:, k:k + 128, None] * b[None, k:k + 128]).sum(1)
        return out
