import torch
import torch.nn as nn

# Honest, fp32: the sum over dim 1 as 32 chunk sums added together.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        B, D1, D2 = x.shape
        if D1 % 32:
            return torch.sum(x, dim=1, keepdim=True)
        return x.reshape(B, 32, D1 // 32, D2).sum(dim=2).sum(dim=1, keepdim=True)
