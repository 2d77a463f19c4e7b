import torch
import torch.nn as nn

# Honest: plain PyTorch, the columns summed in chunks of 1024 and the
# partial sums added (a different summation order from the reference's).
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        parts = [c.sum(dim=1) for c in x.split(1024, dim=1)]
        return torch.stack(parts, dim=1).sum(dim=1)
