import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Wrong by a little: scales the scores by 1/sqrt(1.5 d) instead of
    1/sqrt(d).  A scale of 1/sqrt(d + 1) was within bfloat16's own error:
    where the CPU has no bfloat16 instructions (AVX2 only), torch 1.13's
    reference strays from float64 by 0.11-0.13, and that candidate's exact
    outputs by 1.0-1.7 times as much, which the float64 second opinion
    (within 4 times the reference's own error) rightly cannot tell from
    the reference's; this one strays 11-20 times as much."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        scale = (1.5 * q.shape[-1]) ** -0.5
        s = torch.matmul(q, k.transpose(-2, -1)) * scale
        return torch.matmul(torch.softmax(s, dim=-1), v)
