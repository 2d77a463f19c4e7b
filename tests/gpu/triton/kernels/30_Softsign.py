import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softsign_kernel(x_ptr, out_ptr, n, a, BLOCK: tl.constexpr):
    # x / (1 + |x|), one pass: BLOCK elements a program, 64-bit offsets.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = x / (1.0 + tl.abs(x))
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        softsign_kernel[(triton.cdiv(n, 4096),)](x, out, n, 0.0, BLOCK=4096, num_warps=8)
        return out
