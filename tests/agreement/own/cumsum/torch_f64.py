import torch
import torch.nn as nn

# Honest, more precise than the reference: the running sums in float64,
# each rounded once.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cumsum(x.double(), dim=1).to(x.dtype)
