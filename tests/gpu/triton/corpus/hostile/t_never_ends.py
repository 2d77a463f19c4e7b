# Hostile: a kernel that never ends (a loop on a value read from memory,
# with a store in it, so the compiler cannot drop it).  Contained: the
# evaluation's deadline, `timeout`.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def spin_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    v = tl.load(x_ptr)
    i = 0
    while v == v:
        i += 1
        tl.store(out_ptr + (i % 2), v)
        v = tl.load(x_ptr + (i % 2))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        spin_kernel[(1,)](x, out, x.numel(), BLOCK=128)
        return out
