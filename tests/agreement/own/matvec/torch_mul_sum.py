import torch
import torch.nn as nn

# Honest, fp32: y = A x as an elementwise product and a row sum (the
# library's reduction order, not its matrix-vector kernel's).
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return (A * B.reshape(1, -1)).sum(dim=1, keepdim=True)
