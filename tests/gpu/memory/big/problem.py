# KernelBench's level-1 sizes (19_ReLU: 4096 x 393216 floats, 6 GiB in and
# 6 GiB out), written for STARK: outputs far beyond the output window's
# capacity, four of these beyond an H100's memory at once.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


batch_size = 4096
dim = 393216


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
