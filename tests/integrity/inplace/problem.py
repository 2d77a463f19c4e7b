import torch
import torch.nn as nn

batch_size = 64
features = 512


class Model(nn.Module):
    """y = relu(x) * 2, leaving its input rectified: a reference that
    mutates its input in place, which its candidates may then do too."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x.relu_()
        return x * 2.0


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []
