import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """All batches and heads in one batched product each.

    The problem's heads are many and small (16x16 of 8x16) so that the
    reference's Python loop, not the products, sets its time: where the CPU
    has no bfloat16 instructions (AVX2 only) torch's bfloat16 products are
    slow enough that at 4x8 heads of 64x32 batching saved only 1.0-1.2x,
    within the noise of a loaded machine."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        scale = q.shape[-1] ** -0.5
        s = torch.matmul(q, k.transpose(-2, -1)) * scale
        return torch.matmul(torch.softmax(s, dim=-1), v)
