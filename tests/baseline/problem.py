import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Elementwise chain, unfused in eager PyTorch (six passes over the
    tensor, each with a temporary): torch.compile fuses it into one loop,
    so the compiled reference is clearly faster than the eager one.
    """

    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, x):
        y = x * self.alpha + self.beta
        y = torch.clamp(y, -1.0, 1.0)
        r = torch.relu(x) * 0.5
        y = y - r
        return y * y


batch_size = 64
dim = 2048
alpha = 1.5
beta = 0.25


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [alpha, beta]
