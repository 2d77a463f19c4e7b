import torch
import torch.nn as nn

# Honest, fp32: C = (B^T A^T)^T, which the library computes with another
# kernel and another accumulation order.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(B.t(), A.t()).t().contiguous()
