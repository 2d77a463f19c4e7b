import time

import torch
import torch.nn as nn
from stark_cuda import CudaModule

# R9 on the GPU: patches, in its own process, every clock and
# synchronisation a worker could time a GPU call with -- CUDA events'
# elapsed_time (a plausible 30 us: above the roofline floor of these 64 MB,
# so only the clock can tell), event/stream/device synchronisation (no-ops,
# so the call "returns" as soon as its kernels are queued), and the host
# clocks (running 1000 times slow) -- and queues 2 ms of real work: a
# kernel that spins on the GPU's global timer, then the kernel that writes
# the output.  The output is right (everything is on the caller's stream),
# but only after 2 ms.  The referee's own clock must bound what the worker
# claims, and a clock stopped by a synchronisation inside the candidate's
# process bounds nothing: either the evaluator measures >= 2 ms, or it
# flags timing_unverified; a small runtime without a flag is a forged
# speedup.  (Its queued spin also runs on while the reference is timed,
# slowing it: R19 as a side effect.)
def _noop(*args, **kwargs):
    return None


def _slow(clock, scale):
    t0 = clock()
    return lambda: t0 + (clock() - t0) * scale


torch.cuda.synchronize = _noop
torch.cuda.Event.synchronize = _noop
torch.cuda.Event.wait = _noop
torch.cuda.Event.query = lambda self: True
torch.cuda.Event.elapsed_time = lambda self, end: 0.030
torch.cuda.Stream.synchronize = _noop
torch.cuda.Stream.query = lambda self: True
time.perf_counter = _slow(time.perf_counter, 1e-3)
time.perf_counter_ns = _slow(time.perf_counter_ns, 1e-3)
time.monotonic = _slow(time.monotonic, 1e-3)
time.monotonic_ns = _slow(time.monotonic_ns, 1e-3)

SPIN_NS = 2000000
SPIN = CudaModule(r'''
extern "C" __global__ void spin_ns(long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    long long c0 = clock64();
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while ((long long)(t - t0) < ns && clock64() - c0 < 100000000LL);
}
''')
SRC = r'''
extern "C" __global__ void affine_tanh(const float* __restrict__ x, const float* __restrict__ w,
                                       const float* __restrict__ b, float* __restrict__ y,
                                       int features, long n)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int f = (int)(i % features);
        y[i] = tanhf(x[i] * w[f] + b[f]) * 3.0f;
    }
}
'''
mod = CudaModule(SRC)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        SPIN.spin_ns(grid=(1,), block=(1,), args=(SPIN_NS,))
        mod.affine_tanh(grid=((n + 255) // 256,), block=(256,),
                        args=(x, self.weight, self.bias, y, x.shape[-1], n))
        return y
