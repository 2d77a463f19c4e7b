import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest, fp32, order varying from run to run: each block sums its slice
# of (p - t)^2 as a tree and adds it to the total with atomicAdd, in
# whatever order the blocks finish; a second kernel divides by n.
SRC = r'''
extern "C" __global__ void mse_atomic(const float* __restrict__ p, const float* __restrict__ t,
                                      float* __restrict__ total, long n)
{
    __shared__ float sh[32];
    float acc = 0.f;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x) {
        float d = p[i] - t[i];
        acc += d * d;
    }
    for (int o = 16; o > 0; o >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0)
        sh[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int w = 0; w < (blockDim.x >> 5); w++)
            s += sh[w];
        atomicAdd(total, s);
    }
}

extern "C" __global__ void div_n(float* __restrict__ total, long n)
{
    total[0] = total[0] / (float)n;
}
'''
mod = CudaModule(SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        p, t = predictions.contiguous(), targets.contiguous()
        n = p.numel()
        out = torch.zeros((), device=p.device, dtype=p.dtype)
        mod.mse_atomic(grid=(2048,), block=(256,), args=(p, t, out, n))
        mod.div_n(grid=(1,), block=(1,), args=(out, n))
        return out
