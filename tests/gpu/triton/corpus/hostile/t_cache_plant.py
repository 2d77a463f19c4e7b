# Hostile: plants entries in every Triton cache it can name: its own
# (TRITON_CACHE_DIR, this evaluation's), the user's default (~/.triton),
# and beside its own in /tmp, under names another evaluation would look
# for.  Its own cache and /tmp are private to its jail, so what it plants
# there dies with it, or is published for this very solution's later
# evaluations alone (t_cache_probe.py, judged after it, finds nothing), as
# does what it plants in the jail's own /dev and /dev/shm; a write that
# reaches a shared place raises.
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

MARK = "stark-triton-planted"


def _plant(folder, shared):
    try:
        os.makedirs(os.path.join(folder, MARK), exist_ok=True)
        with open(os.path.join(folder, MARK, "kernel.json"), "w") as f:
            f.write('{"name": "affine_kernel", "planted": true}')
    except OSError:
        return
    if shared:
        raise RuntimeError("planted in a shared cache: %s" % folder)


_plant(os.environ.get("TRITON_CACHE_DIR", "/tmp/none"), False)
_plant(os.path.dirname(os.environ.get("TRITON_CACHE_DIR", "/tmp/none/x")), False)
_plant("/tmp", False)
_plant(os.path.expanduser("~/.triton/cache"), True)
for top in ("/home", "/root", "/var/tmp"):
    _plant(top, True)
# The jail's /dev and /dev/shm are tmpfs of its own (sandbox/mounts.c):
# writable, and gone with it; t_cache_probe looks there too.
_plant("/dev", False)
_plant("/dev/shm", False)


@triton.jit
def affine_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 1.5 + 0.25, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        affine_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096, num_warps=8)
        return out
