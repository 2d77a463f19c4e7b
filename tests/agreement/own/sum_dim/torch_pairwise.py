import torch
import torch.nn as nn

# Honest, fp32 pairwise sum over dim 1: the two halves added until one slice
# is left (an odd slice carried over), so each output is a balanced tree.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        while x.shape[1] > 1:
            n = x.shape[1]
            h = n // 2
            y = x[:, :h] + x[:, h:2 * h]
            x = torch.cat([y, x[:, 2 * h:]], dim=1) if n % 2 else y
        return x.contiguous()
