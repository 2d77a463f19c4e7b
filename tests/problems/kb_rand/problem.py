"""A KernelBench-shaped problem whose inputs are torch.rand draws large
enough for the fast engine (stark_rand.MIN_NUMEL), beside a small one and
a float64 one, which go to torch's own: the KernelBench trials' inputs
(tests/e2e/58-kb-inputs.t)."""
import torch
import torch.nn as nn

rows = 512
cols = 384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        return torch.relu(x - 0.5) * 2.0 + y.sum() + z.float().mean()


def get_inputs():
    return [torch.rand(rows, cols), torch.rand(7), torch.rand(rows, 3, dtype=torch.float64)]


def get_init_inputs():
    return []
