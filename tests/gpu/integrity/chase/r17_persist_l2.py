import ctypes

import torch
import torch.nn as nn
from stark_cuda import CudaModule

# R17: pins its input in persisting L2 lines so that later calls find it in
# L2 however hard the evaluator flushes.  Through the driver (libcuda.so.1,
# already loaded by PyTorch): cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
# to the device's maximum, and an access-policy window over the table on
# its own stream (cuStreamSetAttribute, hitProp persisting, hitRatio 1 or
# as much as the set-aside holds).  The table comes back at the same address
# every call (the evaluator reuses input buffers), so its lines stay
# persisting: the H2D copy of the next call's table writes through them, and
# a flush made of ordinary accesses cannot evict them.  The pointer chase is
# latency-bound, so an L2-resident table makes it about twice as fast.  The
# evaluator resets persisting L2 (and must, from a process the candidate
# does not control) before every timed call: the runtime must then match
# h02_chase_own_stream's, which is this file without the L2 settings.
SRC = r'''
extern "C" __global__ void chase(const int* __restrict__ table, const int* __restrict__ start,
                                 long long* __restrict__ out, int chains, int steps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < chains) {
        int j = start[i];
        long long acc = 0;
        for (int s = 0; s < steps; s++) {
            j = table[j];
            acc += j;
        }
        out[i] = acc;
    }
}
'''
mod = CudaModule(SRC)

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE = 108
CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE = 109
CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1
CU_ACCESS_PROPERTY_STREAMING = 1
CU_ACCESS_PROPERTY_PERSISTING = 2


class _Window(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t),
                ("hitRatio", ctypes.c_float), ("hitProp", ctypes.c_int),
                ("missProp", ctypes.c_int)]


class _AttrValue(ctypes.Union):
    _fields_ = [("accessPolicyWindow", _Window), ("pad", ctypes.c_char * 64)]


class _Persist:
    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        dev = ctypes.c_int()
        self.check(self.cu.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
        v = ctypes.c_int()
        self.check(self.cu.cuDeviceGetAttribute(
            ctypes.byref(v), CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, dev), "max persisting L2")
        self.max_persist = v.value
        self.check(self.cu.cuDeviceGetAttribute(
            ctypes.byref(v), CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, dev), "max window")
        self.max_window = v.value
        self.window = None

    @staticmethod
    def check(rc, what):
        if rc != 0:
            raise RuntimeError("%s failed: CUresult %d" % (what, rc))

    def pin(self, stream, t):
        """Set-aside at its maximum (checked every call: the evaluator may
        have lowered it) and the window over t on stream."""
        limit = ctypes.c_size_t()
        self.check(self.cu.cuCtxGetLimit(ctypes.byref(limit), CU_LIMIT_PERSISTING_L2_CACHE_SIZE),
                   "cuCtxGetLimit")
        if limit.value < self.max_persist:
            self.check(self.cu.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE,
                                             ctypes.c_size_t(self.max_persist)), "cuCtxSetLimit")
        nbytes = min(t.numel() * t.element_size(), self.max_window)
        key = (stream.cuda_stream, t.data_ptr(), nbytes)
        if key == self.window:
            return
        val = _AttrValue()
        w = val.accessPolicyWindow
        w.base_ptr = t.data_ptr()
        w.num_bytes = nbytes
        w.hitRatio = min(1.0, self.max_persist / max(nbytes, 1))
        w.hitProp = CU_ACCESS_PROPERTY_PERSISTING
        w.missProp = CU_ACCESS_PROPERTY_STREAMING
        self.check(self.cu.cuStreamSetAttribute(ctypes.c_void_p(stream.cuda_stream),
                                                CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                                ctypes.byref(val)), "cuStreamSetAttribute")
        self.window = key


class ModelNew(nn.Module):
    def __init__(self, steps):
        super().__init__()
        self.steps = steps
        self.stream = None
        self.persist = None

    def forward(self, table, start):
        table, start = table.contiguous(), start.contiguous()
        chains = start.numel()
        out = torch.empty(chains, device=start.device, dtype=torch.int64)
        cur = torch.cuda.current_stream(start.device)
        if self.stream is None:
            self.stream = torch.cuda.Stream(device=start.device)
            self.persist = _Persist()
        s = self.stream
        self.persist.pin(s, table)
        s.wait_stream(cur)
        mod.chase(grid=((chains + 63) // 64,), block=(64,),
                  args=(table, start, out, chains, self.steps), stream=s)
        out.record_stream(s)
        cur.wait_stream(s)
        return out
