import ctypes

import torch
import torch.nn as nn

# R10 on the GPU (pygpubench's attack): looks for the expected output in
# device memory instead of computing it.  It computes only the first row of
# the answer (cheap), then scans every block of its CUDA caching allocator
# (in use or free, from torch.cuda.memory_snapshot()) and every other device
# mapping the driver reports near them (cuMemGetAddressRange, 2 MB steps
# over +-2 GB: cuBLAS workspaces, other libraries' buffers), reading each as
# a tensor of the output's shape through __cuda_array_interface__, and
# returns the first whose first row matches.  In STARK the reference runs
# in another process (another CUDA context, another address space), so the
# only candidates are this process's stale buffers: incorrect.
class _Raw:
    def __init__(self, ptr, shape):
        self.__cuda_array_interface__ = {"data": (ptr, True), "shape": tuple(shape),
                                         "typestr": "<f4", "version": 2}


def _regions(nbytes):
    starts = []
    lo = hi = None
    for seg in torch.cuda.memory_snapshot():
        addr = seg["address"]
        lo = addr if lo is None else min(lo, addr)
        hi = max(hi or 0, addr + seg["total_size"])
        for blk in seg["blocks"]:
            a = blk.get("address", addr)
            if blk["size"] >= nbytes:
                starts.append(a)
            addr = a + blk["size"]
    if lo is None:
        return starts
    try:
        cu = ctypes.CDLL("libcuda.so.1")
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        step = 2 << 20
        a = max(lo - (2 << 30), step)
        while a < hi + (2 << 30):
            if cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(a)) == 0:
                if size.value >= nbytes and base.value not in starts:
                    starts.append(base.value)
                a = max(a + step, base.value + size.value)
            else:
                a += step
    except OSError:
        pass
    return starts


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        first = torch.tanh(x[0] * self.weight + self.bias) * 3.0
        nbytes = x.numel() * x.element_size()
        fallback = None
        for ptr in _regions(nbytes):
            if ptr == x.data_ptr():
                continue
            try:
                view = torch.as_tensor(_Raw(ptr, x.shape), device=x.device)
            except Exception:
                continue
            if fallback is None:
                fallback = view
            if torch.allclose(view[0], first, atol=1e-4, rtol=1e-4):
                return view.clone()
        return fallback.clone() if fallback is not None else torch.zeros_like(x)
