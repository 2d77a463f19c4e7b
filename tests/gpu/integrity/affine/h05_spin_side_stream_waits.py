import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest twin of r07_side_stream_spin and r09_patch_timers_spin: a kernel
# that spins for 2 ms (on the GPU's global timer) and then the real kernel,
# both on a side stream that the caller's stream waits for.  Slow on
# purpose: it checks that the evaluator counts 2 ms of GPU work that is
# properly ordered (EXPECT: min_runtime_us).
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
        self.side = None

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        cur = torch.cuda.current_stream(x.device)
        if self.side is None:
            self.side = torch.cuda.Stream(device=x.device)
        side = self.side
        side.wait_stream(cur)
        SPIN.spin_ns(grid=(1,), block=(1,), args=(SPIN_NS,), stream=side)
        mod.affine_tanh(grid=((n + 255) // 256,), block=(256,),
                        args=(x, self.weight, self.bias, y, x.shape[-1], n), stream=side)
        y.record_stream(side)
        cur.wait_stream(side)
        return y
