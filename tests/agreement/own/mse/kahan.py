import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest, fp32 compensated: each of 1024 threads of one block sums a
# contiguous slice of (p - t)^2 with Kahan summation, then thread 0 adds
# the 1024 sums with Kahan summation and divides by n.
SRC = r'''
extern "C" __global__ void mse_kahan(const float* __restrict__ p, const float* __restrict__ t,
                                     float* __restrict__ out, long n)
{
    __shared__ float part[1024];
    long len = (n + blockDim.x - 1) / blockDim.x;
    long i0 = threadIdx.x * len, i1 = i0 + len < n ? i0 + len : n;
    float sum = 0.f, c = 0.f;
    for (long i = i0; i < i1; i++) {
        float d = p[i] - t[i];
        float y = __fmul_rn(d, d) - c;
        float s = sum + y;
        c = (s - sum) - y;
        sum = s;
    }
    part[threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        sum = 0.f;
        c = 0.f;
        for (int k = 0; k < blockDim.x; k++) {
            float y = part[k] - c;
            float s = sum + y;
            c = (s - sum) - y;
            sum = s;
        }
        out[0] = sum / (float)n;
    }
}
'''
mod = CudaModule(SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        p, t = predictions.contiguous(), targets.contiguous()
        out = torch.empty((), device=p.device, dtype=p.dtype)
        mod.mse_kahan(grid=(1,), block=(1024,), args=(p, t, out, p.numel()))
        return out
