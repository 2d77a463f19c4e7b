# An affine map over a large tensor: y = x * 1.5 + 0.25 (memory bound: one
# read, one write), the ground for the Triton cheats and their honest twins.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 1.5 + 0.25


rows = 4096
cols = 4096


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
