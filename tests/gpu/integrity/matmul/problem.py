import torch
import torch.nn as nn

M = 1024
K = 512
N = 1024


class Model(nn.Module):
    """C = A @ B in float32 (full fp32: PyTorch's default leaves TF32 off for
    matrix products; K = 512 keeps honest fp32 kernels of any summation order
    well inside the 1e-4 tolerance, while inputs rounded to TF32 or fp16 are
    far outside it)."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
