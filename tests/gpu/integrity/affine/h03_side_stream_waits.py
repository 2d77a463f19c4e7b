import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest twin of r07_side_stream: the kernel runs on a side stream, which
# first waits for the caller's stream (the inputs are ready), and the
# caller's stream waits for the side stream before forward returns, so
# everything after forward is ordered after the kernel.
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
        mod.affine_tanh(grid=((n + 255) // 256,), block=(256,),
                        args=(x, self.weight, self.bias, y, x.shape[-1], n), stream=side)
        y.record_stream(side)
        cur.wait_stream(side)
        return y
