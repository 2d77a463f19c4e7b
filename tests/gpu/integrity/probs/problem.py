import torch
import torch.nn as nn

# Outputs that all sit under the absolute tolerance, at GPU size: a softmax
# over 262144 values drawn uniform in [0, 1), so every probability lies
# between about 2e-6 and 6e-6, far below atol = 1e-4.  Returning zeros
# passes every elementwise comparison and KernelBench's allclose (issue 18:
# 4.8x on the CPU, 2.2x on the H100, judged correct); the scale rule must
# fail it.
rows = 64
cols = 262144


class Model(nn.Module):
    """Row-wise softmax."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []
