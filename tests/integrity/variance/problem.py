import torch
import torch.nn as nn

rows = 256
cols = 2048


class Model(nn.Module):
    """Row variances (population) by the one-pass formula E[x^2] - E[x]^2.

    In float32 the formula cancels: with values near 100 the two terms are
    near 10^4 and their difference near 1, so the result keeps only about
    four of float32's seven digits.  A kernel that computes the variance
    properly is closer to the true value than this reference is."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (x * x).mean(dim=1) - x.mean(dim=1) ** 2


def get_inputs():
    return [torch.randn(rows, cols) + 100.0]


def get_init_inputs():
    return []
