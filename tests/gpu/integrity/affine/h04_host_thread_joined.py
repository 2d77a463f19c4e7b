import ctypes
import threading

import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest twin of r07_host_thread: the kernel is launched from a Python
# thread (on the caller's stream, in the caller's CUDA context), and the
# thread is joined before forward returns.
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
        stream = 0
        if x.is_cuda:
            _driver().cuCtxGetCurrent(ctypes.byref(ctx))
            stream = torch.cuda.current_stream(x.device).cuda_stream
        err = []

        def work():
            try:
                if ctx.value:
                    _driver().cuCtxSetCurrent(ctx)
                mod.affine_tanh(grid=((n + 255) // 256,), block=(256,), args=args, stream=stream)
            except BaseException as e:
                err.append(e)

        t = threading.Thread(target=work)
        t.start()
        t.join()
        if err:
            raise err[0]
        return y
