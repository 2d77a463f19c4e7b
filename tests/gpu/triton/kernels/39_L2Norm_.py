import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l2_norm_kernel(x_ptr, out_ptr, ncols, BLOCK: tl.constexpr):
    # One program a row: the Euclidean norm of the row, then every element divided by it.
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * ncols
    obase = out_ptr + row * ncols
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, ncols, BLOCK):
        x = tl.load(base + start + cols, mask=start + cols < ncols, other=0.0)
        acc += x * x
    denom = tl.sqrt(tl.sum(acc, 0))
    for start in range(0, ncols, BLOCK):
        mask = start + cols < ncols
        x = tl.load(base + start + cols, mask=mask, other=0.0)
        tl.store(obase + start + cols, x / denom, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        assert x.dim() == 2
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        l2_norm_kernel[(rows,)](x, out, cols, BLOCK=2048, num_warps=8)
        return out
