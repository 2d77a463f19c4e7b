import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest: one fused kernel on PyTorch's current stream into a fresh
# torch.empty_like output that it writes in full (the twin of r01_*).
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
        mod.affine_tanh(grid=((n + 255) // 256,), block=(256,),
                        args=(x, self.weight, self.bias, y, x.shape[-1], n))
        return y
