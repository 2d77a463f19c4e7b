import torch
import torch.nn as nn

# KernelBench level1/23 (softmax over rows) at a smaller size (uniform [0, 1) inputs, as there); every output is near 1/65536, under KernelBench's absolute tolerance.
batch, dim = 128, 65536


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.rand(batch, dim)]


def get_init_inputs():
    return []
