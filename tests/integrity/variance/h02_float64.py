import torch
import torch.nn as nn


# Honest: the reference's formula evaluated in float64, rounded to float32
# once at the end.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        z = x.double()
        return ((z * z).mean(dim=1) - z.mean(dim=1) ** 2).to(x.dtype)
