import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Scaled dot-product attention in bfloat16: softmax(Q K^T / sqrt(d)) V for
    every (batch, head) pair.  Inputs and output are bfloat16.

    The reference loops over batches and heads in Python, one small matrix
    product at a time.
    """

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        scale = q.shape[-1] ** -0.5
        out = torch.empty_like(q)
        for b in range(q.shape[0]):
            for h in range(q.shape[1]):
                s = torch.matmul(q[b, h], k[b, h].transpose(0, 1)) * scale
                p = torch.softmax(s, dim=-1)
                out[b, h] = torch.matmul(p, v[b, h])
        return out


batch_size = 16
heads = 16
seq_len = 8
head_dim = 16


def get_inputs():
    shape = (batch_size, heads, seq_len, head_dim)
    q = torch.randn(shape).to(torch.bfloat16)
    k = torch.randn(shape).to(torch.bfloat16)
    v = (torch.randn(shape) * 4.0).to(torch.bfloat16)
    return [q, k, v]


def get_init_inputs():
    return []
