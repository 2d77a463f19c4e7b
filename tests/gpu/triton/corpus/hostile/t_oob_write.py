# Hostile: a kernel that writes far outside its output (2^40 elements past
# it, unmasked): an illegal address.  Contained: the candidate's own
# runtime_error (or crash); nothing outside its process is touched.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def oob_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs + (1 << 40), x * 1.5 + 0.25)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        oob_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096, num_warps=8)
        torch.cuda.synchronize()
        return out
