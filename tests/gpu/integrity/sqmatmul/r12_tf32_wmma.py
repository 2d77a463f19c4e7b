import torch
import torch.nn as nn
from stark_cuda import CudaModule

# R12 without the library: a kernel of its own on TF32 tensor cores (wmma,
# m16n16k8, fp32 accumulators), operands converted with __float_to_tf32.
# No reference operator is dispatched, so only the precision rule can
# catch it: on inputs centred to zero mean it lands thousands of times
# further from the float64 result than input rounding does.
SRC = r'''
#include <mma.h>
using namespace nvcuda;

#define BM 64
#define BN 64
#define BK 8

extern "C" __global__ void tf32_gemm(const float* __restrict__ A, const float* __restrict__ B,
                                     float* __restrict__ C, int M, int N, int K)
{
    __shared__ __align__(32) float As[BM][BK + 4];
    __shared__ __align__(32) float Bs[BK][BN + 4];
    const int warp = threadIdx.x / 32;          // 8 warps: 4 x 2 tiles of 16 x 32
    const int wm = (warp / 2) * 16, wn = (warp % 2) * 32;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = threadIdx.x; e < BM * BK; e += blockDim.x) {
            int m = e / BK, k = e % BK;
            int gm = row0 + m, gk = k0 + k;
            As[m][k] = (gm < M && gk < K) ? A[(long)gm * K + gk] : 0.f;
        }
        for (int e = threadIdx.x; e < BK * BN; e += blockDim.x) {
            int k = e / BN, n = e % BN;
            int gk = k0 + k, gn = col0 + n;
            Bs[k][n] = (gk < K && gn < N) ? B[(long)gk * N + gn] : 0.f;
        }
        __syncthreads();
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
        wmma::load_matrix_sync(a, &As[wm][0], BK + 4);
        for (int i = 0; i < a.num_elements; i++)
            a.x[i] = wmma::__float_to_tf32(a.x[i]);
        for (int j = 0; j < 2; j++) {
            wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
            wmma::load_matrix_sync(b, &Bs[0][wn + 16 * j], BN + 4);
            for (int i = 0; i < b.num_elements; i++)
                b.x[i] = wmma::__float_to_tf32(b.x[i]);
            wmma::mma_sync(acc[j], a, b, acc[j]);
        }
        __syncthreads();
    }
    __shared__ __align__(32) float Cs[BM][BN + 4];
    for (int j = 0; j < 2; j++)
        wmma::store_matrix_sync(&Cs[wm][wn + 16 * j], acc[j], BN + 4, wmma::mem_row_major);
    __syncthreads();
    for (int e = threadIdx.x; e < BM * BN; e += blockDim.x) {
        int m = e / BN, n = e % BN;
        int gm = row0 + m, gn = col0 + n;
        if (gm < M && gn < N)
            C[(long)gm * N + gn] = Cs[m][n];
    }
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
        mod.tf32_gemm(grid=((N + 63) // 64, (M + 63) // 64), block=(256,), args=(A, B, C, M, N, K))
        return C
