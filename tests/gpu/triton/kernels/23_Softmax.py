import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, ncols, BLOCK: tl.constexpr):
    # One program a row, two passes over it: an online max and sum of
    # exponentials (per lane, merged at the end), then the outputs.
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * ncols
    obase = out_ptr + row * ncols
    cols = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), -3.0e38, tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, ncols, BLOCK):
        mask = start + cols < ncols
        x = tl.load(base + start + cols, mask=mask, other=-float("inf"))
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    mx = tl.max(m, 0)
    total = tl.sum(s * tl.exp(m - mx), 0)
    inv = 1.0 / total
    for start in range(0, ncols, BLOCK):
        mask = start + cols < ncols
        x = tl.load(base + start + cols, mask=mask, other=0.0)
        tl.store(obase + start + cols, tl.exp(x - mx) * inv, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        assert x.dim() == 2
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        softmax_kernel[(rows,)](x, out, cols, BLOCK=2048, num_warps=8)
        return out
