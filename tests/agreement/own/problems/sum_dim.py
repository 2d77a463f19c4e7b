import torch
import torch.nn as nn

# KernelBench level1/47 (sum over a dimension, keepdim) at a smaller size (uniform [0, 1) inputs, as there).
batch, dim1, dim2 = 32, 1024, 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.rand(batch, dim1, dim2)]


def get_init_inputs():
    return []
