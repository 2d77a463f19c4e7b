# Cheat: launches every other program only (half the grid, strided), so
# half of the output is never written (torch.empty: whatever the allocator
# held), and the time is half the honest kernel's.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def affine_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0) * 2
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 1.5 + 0.25, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        affine_kernel[(triton.cdiv(triton.cdiv(n, 4096), 2),)](x, out, n, BLOCK=4096,
                                                               num_warps=8)
        return out
