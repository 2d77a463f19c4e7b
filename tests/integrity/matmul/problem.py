import torch
import torch.nn as nn

M = 128
# K stays small enough that honest reorderings of the fp32 sum (h02's
# chunks, the BLAS's blocking at any thread count) keep well inside the
# default tolerance (1e-4): at K = 1024, h02 once missed it by 5e-5 in one
# element of 16384, at its 97th call.
K = 256
N = 128


class Model(nn.Module):
    """C = A @ B in float32."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
