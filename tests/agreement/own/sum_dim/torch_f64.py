import torch
import torch.nn as nn

# Honest, more precise than the reference: summed in float64, rounded once.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x.double(), dim=1, keepdim=True).to(x.dtype)
