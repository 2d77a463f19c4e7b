import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_rows_kernel(x_ptr, out_ptr, ncols, BLOCK: tl.constexpr):
    # One program a row: a scan of each BLOCK-wide chunk plus the running
    # total of the chunks before it.
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * ncols
    obase = out_ptr + row * ncols
    cols = tl.arange(0, BLOCK)
    carry = tl.zeros((), tl.float32)
    for start in range(0, ncols, BLOCK):
        mask = start + cols < ncols
        x = tl.load(base + start + cols, mask=mask, other=0.0)
        c = tl.cumsum(x, 0) + carry
        tl.store(obase + start + cols, c, mask=mask)
        carry += tl.sum(x, 0)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        assert x.dim() == 2 and self.dim in (1, -1)
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        cumsum_rows_kernel[(rows,)](x, out, cols, BLOCK=1024, num_warps=4)
        return out
