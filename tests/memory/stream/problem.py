# Several outputs of different dtypes and sizes, for the output window's
# chunks (tests/e2e/55-memory.t runs it with a window of a few KiB): their
# bytes straddle chunk boundaries, and padding separates them.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = torch.tanh(x) * self.scale
        return y, y.sum(dim=1).half(), (x > 0), (x * 1000).to(torch.int64)


rows = 61
cols = 333


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [1.5]
