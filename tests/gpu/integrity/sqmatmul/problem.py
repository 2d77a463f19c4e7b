import torch
import torch.nn as nn

# KernelBench's level-1 square matmul (1_Square_matrix_multiplication_.py),
# as it is: N = 4096, A and B uniform in [0, 1).  Every entry of C is near
# N/4, so the default tolerance (1e-4 + 1e-4 * |C|, about 0.1) is wide
# enough for TF32 tensor cores (max abs err 0.063 measured on the H100):
# the elementwise comparison alone passes them.
N = 2048 * 2


class Model(nn.Module):
    """C = A @ B in float32 (TF32 off, PyTorch's default)."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    A = torch.rand(N, N)
    B = torch.rand(N, N)
    return [A, B]


def get_init_inputs():
    return []
