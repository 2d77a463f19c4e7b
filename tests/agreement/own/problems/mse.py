import torch
import torch.nn as nn

# KernelBench level1/94 (mean squared error) at a smaller size, with its scaled first input: a reduction of 16M terms to one value.
batch, dim = 2048, 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


def get_inputs():
    scale = torch.rand(())
    return [torch.rand(batch, dim) * scale, torch.rand(batch, dim)]


def get_init_inputs():
    return []
