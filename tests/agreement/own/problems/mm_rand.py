import torch
import torch.nn as nn

# KernelBench level1/2 (standard matmul) at a smaller size, with the uniform [0, 1) inputs of its current problem files: C = A @ B, fp32.
M, K, N = 1024, 4096, 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
