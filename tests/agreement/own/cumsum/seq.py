import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest, fp32: each row's running sum in order, one thread per row (the
# longest chain of additions any order has).
SRC = r'''
extern "C" __global__ void cumsum_seq(const float* __restrict__ x, float* __restrict__ y,
                                      int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    const float* a = x + (long)r * cols;
    float* o = y + (long)r * cols;
    float acc = 0.f;
    for (int c = 0; c < cols; c++) {
        acc += a[c];
        o[c] = acc;
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
        y = torch.empty_like(x)
        mod.cumsum_seq(grid=((rows + 63) // 64,), block=(64,), args=(x, y, rows, cols))
        return y
