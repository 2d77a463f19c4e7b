import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest, fp32 pairwise summation: one thread per output, K in blocks of 32
# terms summed in order, the block sums combined pairwise (a binary counter
# over a stack of partial sums), so the error grows with log2(K / 32)
# rather than K.
SRC = r'''
extern "C" __global__ void mm_pairwise(const float* __restrict__ A, const float* __restrict__ B,
                                       float* __restrict__ C, int M, int K, int N)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    int m = blockIdx.y;
    if (n >= N || m >= M)
        return;
    const float* a = A + (long)m * K;
    float stk[32];
    int top = 0;
    unsigned count = 0;
    for (int k0 = 0; k0 < K; k0 += 32) {
        int k1 = min(K, k0 + 32);
        float s = 0.f;
        for (int k = k0; k < k1; k++)
            s += a[k] * B[(long)k * N + n];
        for (unsigned t = count; t & 1u; t >>= 1)
            s = stk[--top] + s;
        stk[top++] = s;
        count++;
    }
    float r = 0.f;
    while (top > 0)
        r = stk[--top] + r;
    C[(long)m * N + n] = r;
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
        C = torch.empty(M, N, device=A.device, dtype=A.dtype)
        mod.mm_pairwise(grid=((N + 127) // 128, M), block=(128,), args=(A, B, C, M, K, N))
        return C
