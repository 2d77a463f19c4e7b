import torch
import torch.nn as nn

# KernelBench level1/89 (cumulative sum over rows) at a smaller size (uniform [0, 1) inputs, as there).
batch, dim = 512, 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cumsum(x, dim=1)


def get_inputs():
    return [torch.rand(batch, dim)]


def get_init_inputs():
    return []
