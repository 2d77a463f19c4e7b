import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest twin of r18_atomic_empty: rows split into chunks of 1024 columns,
# each block sums its chunk and atomically adds it into y[row], which
# starts from torch.zeros.
SRC = r'''
extern "C" __global__ void rowsum_split(const float* __restrict__ x, float* __restrict__ y,
                                        int cols, int chunk)
{
    __shared__ float part[32];
    long row = blockIdx.x;
    int start = blockIdx.y * chunk;
    int end = start + chunk < cols ? start + chunk : cols;
    const float* r = x + row * (long)cols;
    float acc = 0.f;
    for (int c = start + threadIdx.x; c < end; c += blockDim.x)
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
            atomicAdd(&y[row], v);
    }
}
'''
mod = CudaModule(SRC)
CHUNK = 1024


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.zeros(rows, device=x.device, dtype=x.dtype)
        splits = max((cols + CHUNK - 1) // CHUNK, 1)
        mod.rowsum_split(grid=(rows, splits), block=(256,), args=(x, y, cols, CHUNK))
        return y
