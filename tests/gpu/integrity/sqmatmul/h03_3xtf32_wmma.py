import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest twin of r12_tf32_wmma: the same TF32 tensor cores used the way that
# keeps float32 accuracy ("3xTF32"): every operand split into a TF32 head
# and a TF32 remainder, C += Al Bh + Ah Bl + Ah Bh (the Al Bl term, about
# 2^-22 of a product, lies below float32's rounding).  The tensor cores'
# accumulator truncates instead of rounding to nearest, so carried across
# the whole K it drifts by a bit per doubling of K (r12_3xtf32_mma_accumulate);
# here each k-tile's MMAs start from a zeroed fragment and their sum is added
# to float32 registers with a rounding add, which leaves the truncation one
# tile's partial sum to act on: within a few times float32's own error of
# the exact product at any K.
SRC = r'''
#include <mma.h>
using namespace nvcuda;

#define BM 64
#define BN 64
#define BK 8

extern "C" __global__ void gemm_3xtf32(const float* __restrict__ A, const float* __restrict__ B,
                                       float* __restrict__ C, int M, int N, int K)
{
    __shared__ __align__(32) float As[BM][BK + 4];
    __shared__ __align__(32) float Bs[BK][BN + 4];
    const int warp = threadIdx.x / 32;          // 8 warps: 4 x 2 tiles of 16 x 32
    const int wm = (warp / 2) * 16, wn = (warp % 2) * 32;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2], part;
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
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> ah, al;
        wmma::load_matrix_sync(ah, &As[wm][0], BK + 4);
        for (int i = 0; i < ah.num_elements; i++) {
            float v = ah.x[i];
            float h = wmma::__float_to_tf32(v);
            ah.x[i] = h;
            al.x[i] = wmma::__float_to_tf32(v - h);
        }
        for (int j = 0; j < 2; j++) {
            wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> bh, bl;
            wmma::load_matrix_sync(bh, &Bs[0][wn + 16 * j], BN + 4);
            for (int i = 0; i < bh.num_elements; i++) {
                float v = bh.x[i];
                float h = wmma::__float_to_tf32(v);
                bh.x[i] = h;
                bl.x[i] = wmma::__float_to_tf32(v - h);
            }
            wmma::fill_fragment(part, 0.0f);
            wmma::mma_sync(part, al, bh, part);
            wmma::mma_sync(part, ah, bl, part);
            wmma::mma_sync(part, ah, bh, part);
            // accumulator fragments of one shape share their layout
            for (int i = 0; i < part.num_elements; i++)
                acc[j].x[i] = __fadd_rn(acc[j].x[i], part.x[i]);
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
        mod.gemm_3xtf32(grid=((N + 63) // 64, (M + 63) // 64), block=(256,), args=(A, B, C, M, N, K))
        return C
