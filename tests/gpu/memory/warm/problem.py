# Weights that fit in the H100's L2 (a 2048 x 2048 float linear layer, 16
# MiB) read by a small batch: flushed before every timed call they come
# from memory, unflushed (--l2-flush off, as KernelBench's published times)
# from the cache.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x):
        return self.lin(x)


width = 2048


def get_inputs():
    return [torch.randn(8, width)]


def get_init_inputs():
    return [width]
