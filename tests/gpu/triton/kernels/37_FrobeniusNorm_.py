import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sumsq_partial_kernel(x_ptr, part_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    # Each program sums the squares of ITERS * BLOCK consecutive elements.
    start = tl.program_id(0).to(tl.int64) * (BLOCK * ITERS)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(ITERS):
        o = start + i * BLOCK + offs
        x = tl.load(x_ptr + o, mask=o < n, other=0.0)
        acc += x * x
    tl.store(part_ptr + tl.program_id(0), tl.sum(acc, 0))


@triton.jit
def sum_partials_kernel(part_ptr, total_ptr, nparts, BLOCK: tl.constexpr):
    # One program: the partial sums added up.
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, nparts, BLOCK):
        acc += tl.load(part_ptr + start + offs, mask=start + offs < nparts, other=0.0)
    tl.store(total_ptr, tl.sum(acc, 0))


@triton.jit
def scale_by_norm_kernel(x_ptr, total_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    norm = tl.sqrt(tl.load(total_ptr))
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x / norm, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n = x.numel()
        block, iters = 4096, 16
        nparts = triton.cdiv(n, block * iters)
        parts = torch.empty(nparts, device=x.device, dtype=torch.float32)
        total = torch.empty(1, device=x.device, dtype=torch.float32)
        out = torch.empty_like(x)
        sumsq_partial_kernel[(nparts,)](x, parts, n, BLOCK=block, ITERS=iters, num_warps=8)
        sum_partials_kernel[(1,)](parts, total, nparts, BLOCK=1024, num_warps=4)
        scale_by_norm_kernel[(triton.cdiv(n, 4096),)](x, total, out, n, BLOCK=4096, num_warps=8)
        return out
