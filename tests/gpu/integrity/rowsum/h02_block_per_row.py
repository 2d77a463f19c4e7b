import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest: one block per row, a shuffle tree, every y[row] written once into
# a torch.empty output.
SRC = r'''
extern "C" __global__ void rowsum_block(const float* __restrict__ x, float* __restrict__ y, int cols)
{
    __shared__ float part[32];
    const float* r = x + (long)blockIdx.x * cols;
    float acc = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        acc += r[c];
    for (int o = 16; o > 0; o >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0)
            y[blockIdx.x] = v;
    }
}
'''
mod = CudaModule(SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, device=x.device, dtype=x.dtype)
        mod.rowsum_block(grid=(rows,), block=(256,), args=(x, y, cols))
        return y
