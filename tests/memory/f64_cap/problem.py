# A problem whose reference's float64 runs (the precision statistics, the
# second opinion) need more memory than a small run jail leaves: 96 MiB of
# non-negative input (the precision probe centres it) and as much output.
# Written for STARK's memory plan (tests/e2e/55-memory.t).
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


n = 24 << 20


def get_inputs():
    return [torch.rand(n)]


def get_init_inputs():
    return []
