import ctypes
import threading
import time

import torch
import torch.nn as nn
from stark_cuda import CudaModule

# R7 on the GPU: forward returns an unwritten output at once; a Python
# thread launches the kernel that fills it 2 ms later (in the caller's CUDA
# context, on the caller's stream), when the timer and any synchronisation
# after forward have long passed.  The output the caller got is not the
# answer when forward returned: rejected (output written after return) or
# incorrect.
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
_cu = []


def _driver():
    if not _cu:
        _cu.append(ctypes.CDLL("libcuda.so.1"))
    return _cu[0]


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        args = (x, self.weight, self.bias, y, x.shape[-1], n)
        ctx = ctypes.c_void_p()
        _driver().cuCtxGetCurrent(ctypes.byref(ctx))
        stream = torch.cuda.current_stream(x.device).cuda_stream

        def late():
            _driver().cuCtxSetCurrent(ctx)
            time.sleep(0.002)
            mod.affine_tanh(grid=((n + 255) // 256,), block=(256,), args=args, stream=stream)

        threading.Thread(target=late, daemon=True).start()
        return y
