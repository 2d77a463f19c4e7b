import torch
import torch.nn as nn

# KernelBench's level-1 square matmul at a CPU test's size: A and B uniform
# in [0, 1), so every product is positive and C's entries are near K/4.
# With K = 1024 the default tolerance (1e-4 + 1e-4 * |C|, about 0.026 here)
# is wide enough for TF32 or float16 operands (their error reaches about
# 0.012): the elementwise comparison alone passes them.
M = 128
K = 1024
N = 128


class Model(nn.Module):
    """C = A @ B in float32."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
