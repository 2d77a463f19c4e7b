# A small problem whose honest candidate needs little host memory.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1.0


def get_inputs():
    return [torch.randn(256, 256)]


def get_init_inputs():
    return []
