import torch
import torch.nn as nn

# Outputs that all sit under the absolute tolerance: a softmax over 65536
# values drawn uniform in [0, 1), so every probability lies between about
# 9e-6 and 4e-5, below atol = 1e-4.  A zero output passes every elementwise
# comparison here (THREATS R2); the scale rule must not let it.
rows = 16
cols = 65536


class Model(nn.Module):
    """Row-wise softmax."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []
