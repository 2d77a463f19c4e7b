import torch
import torch.nn as nn

# KernelBench level1/6 (matmul with large K) with M and N halved and K a quarter of its current size (uniform [0, 1) inputs, as there).
M, K, N = 128, 131072, 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
