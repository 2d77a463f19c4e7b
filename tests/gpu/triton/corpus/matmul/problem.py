# A float32 matrix product, C = A @ B (2048 x 2048 x 2048, inputs randn):
# the ground for Triton's precision cheats (tl.dot on float32 operands is
# TF32 unless told otherwise) and their honest twin.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


N = 2048


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
