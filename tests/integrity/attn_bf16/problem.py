import torch
import torch.nn as nn


class Model(nn.Module):
    """Scaled dot-product attention in bfloat16, as KernelBench's bfloat16
    runs pose it: softmax(Q K^T / sqrt(d)) V, inputs and output bfloat16.

    On the variant distribution's scaled inputs (up to 8 times) the logits
    grow up to 64 times, and rounding them to bfloat16 moves the softmax's
    weights by tens of percent: the reference is then far from its own
    float64 run, by its conditioning, not by being another computation."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        s = torch.matmul(q, k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        return torch.matmul(torch.softmax(s, dim=-1), v)


batch_size = 4
heads = 8
seq_len = 32
head_dim = 16


def get_inputs():
    shape = (batch_size, heads, seq_len, head_dim)
    return [torch.randn(shape).to(torch.bfloat16) for _ in range(3)]


def get_init_inputs():
    return []
