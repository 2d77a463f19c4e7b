import torch
import torch.nn as nn

# Honest, more precise than the reference: the product computed in float64
# and rounded once to float32.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A.double(), B.double()).to(A.dtype)
