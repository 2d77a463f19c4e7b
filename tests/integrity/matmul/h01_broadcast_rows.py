import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        for i in range(0, a.shape[0], 16):
            out[i:i + 16] = (a[i:i + 16, :, None] * b[None]).sum(1)
        return out
