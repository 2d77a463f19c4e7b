# Demo problem (KernelBench format): the sum of squares of each row,
#   out[i] = sum_j x[i, j]^2,
# which PyTorch computes through a temporary the size of x.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (x * x).sum(dim=1)


rows = 2048
cols = 2048


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
