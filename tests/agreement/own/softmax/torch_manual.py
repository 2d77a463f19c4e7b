import torch
import torch.nn as nn

# Honest, fp32: exp(x - max) over its sum, with PyTorch's elementwise ops
# and reductions.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x - x.amax(dim=1, keepdim=True))
        return e / e.sum(dim=1, keepdim=True)
