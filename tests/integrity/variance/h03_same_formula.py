import torch
import torch.nn as nn


# Honest: the reference's own one-pass formula with the sums taken in another
# order (halves of each row, then combined), as a blocked kernel would.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.shape[1]
        a, b = x[:, : n // 2], x[:, n // 2:]
        s1 = a.sum(dim=1) + b.sum(dim=1)
        s2 = (a * a).sum(dim=1) + (b * b).sum(dim=1)
        m = s1 / n
        return s2 / n - m * m
