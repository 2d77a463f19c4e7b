import torch
import torch.nn as nn

# KernelBench level1/4 (matrix-vector product) at a smaller size (uniform [0, 1) inputs, as there).
M, K = 512, 262144


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, 1)]


def get_init_inputs():
    return []
