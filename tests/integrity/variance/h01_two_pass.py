import torch
import torch.nn as nn


# Honest: the two-pass variance, mean((x - mean(x))^2), in float32.  It is
# exact to float32 rounding, so it differs from the cancelling reference by
# the reference's own error.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        d = x - x.mean(dim=1, keepdim=True)
        return (d * d).mean(dim=1)
