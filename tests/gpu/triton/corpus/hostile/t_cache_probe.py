# Hostile's witness: looks for what t_cache_plant.py planted, in its own
# Triton cache, its /tmp and ~/.triton; finding any raises (another
# evaluation's cache reached this one).  "correct": nothing crossed.
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

MARK = "stark-triton-planted"


def _look():
    tops = [os.environ.get("TRITON_CACHE_DIR", ""), "/tmp", os.path.expanduser("~/.triton"),
            "/dev", "/dev/shm"]
    for top in tops:
        if not top or not os.path.isdir(top):
            continue
        for root, dirs, files in os.walk(top):
            if MARK in dirs or MARK in files:
                raise RuntimeError("found a planted entry in %s" % root)


_look()


@triton.jit
def affine_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 1.5 + 0.25, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        _look()
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        affine_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096, num_warps=8)
        return out
