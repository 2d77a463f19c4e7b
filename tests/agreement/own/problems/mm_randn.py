import torch
import torch.nn as nn

# KernelBench level1/2 (standard matmul) at a smaller size, with the normal inputs of the problem files its public leaderboard was scored on: C = A @ B, fp32.
M, K, N = 1024, 4096, 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
