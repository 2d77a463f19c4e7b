import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest, fp32 split-K: K cut into S slices, each slice summed in order by
# its own thread into a partial product, then the S partials added in order
# by a second kernel.  Any M, K, N.
SRC = r'''
extern "C" __global__ void mm_part(const float* __restrict__ A, const float* __restrict__ B,
                                   float* __restrict__ P, int M, int K, int N, int S)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    int m = blockIdx.y, s = blockIdx.z;
    if (n >= N || m >= M)
        return;
    int len = (K + S - 1) / S;
    int k0 = s * len, k1 = min(K, k0 + len);
    const float* a = A + (long)m * K;
    float acc = 0.f;
    for (int k = k0; k < k1; k++)
        acc += a[k] * B[(long)k * N + n];
    P[((long)s * M + m) * N + n] = acc;
}

extern "C" __global__ void mm_reduce(const float* __restrict__ P, float* __restrict__ C,
                                     long MN, int S)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= MN)
        return;
    float acc = 0.f;
    for (int s = 0; s < S; s++)
        acc += P[s * MN + i];
    C[i] = acc;
}
'''
mod = CudaModule(SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        S = max(1, min(16, K // 256, (1 << 26) // max(1, M * N)))
        P = torch.empty(S, M, N, device=A.device, dtype=A.dtype)
        C = torch.empty(M, N, device=A.device, dtype=A.dtype)
        mod.mm_part(grid=((N + 127) // 128, M, S), block=(128,), args=(A, B, P, M, K, N, S))
        mod.mm_reduce(grid=((M * N + 255) // 256,), block=(256,), args=(P, C, M * N, S))
        return C
