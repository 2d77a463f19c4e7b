import torch
import torch.nn as nn
from stark_cuda import CudaModule

# R7 on the GPU with a known cost: on a side stream that the caller's
# stream never waits for, a kernel spins for 2 ms (the GPU's global timer)
# and only then the real kernel writes the output.  An evaluator that
# counts the side stream's work (a device-level guard) measures >= 2 ms;
# one that does not either sees the output unfinished at return (rejected
# or incorrect) or flags the timing.  What must not happen: correct with a
# runtime far below 2 ms.
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
        if self.side is None:
            self.side = torch.cuda.Stream(device=x.device)
        side = self.side
        side.wait_stream(torch.cuda.current_stream(x.device))
        SPIN.spin_ns(grid=(1,), block=(1,), args=(SPIN_NS,), stream=side)
        mod.affine_tanh(grid=((n + 255) // 256,), block=(256,),
                        args=(x, self.weight, self.bias, y, x.shape[-1], n), stream=side)
        return y                # the caller's stream does not wait
