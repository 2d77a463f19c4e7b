import torch
import torch.nn as nn

# R2: each row replaced by its own mean, which is exactly 1/n: a candidate
# that "normalises" without following the inputs.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (x * 0 + 1).div(x.shape[1])
