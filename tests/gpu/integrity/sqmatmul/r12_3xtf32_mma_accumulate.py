import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Not a downcast of the operands but a loss all the same: 3xTF32 (every
# operand split into a TF32 head and a TF32 remainder, C += Al Bh + Ah Bl +
# Ah Bh) with the three MMAs of every k-step carried in one tensor-core
# accumulator across the whole K.  That accumulator truncates where float32
# rounds to nearest, so the result drifts by about a float32 ulp of the
# partial sum every step, in the same direction: its error grows as K, not
# sqrt(K).  On the H100 at K = 4096 it lands 961 times the input-rounding
# noise and 50 times the float32 reference's error on the probe, 77 times
# that error on KernelBench's own inputs, where it is less exact than TF32
# operands (cuBLAS with TF32 on); from K near 16384 it is further from the
# exact result than TF32 operands everywhere (stark_rules, the precision
# rule).  h03_3xtf32_wmma is the same kernel with the accumulator promoted
# into float32 registers every k-tile.
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
            wmma::mma_sync(acc[j], al, bh, acc[j]);
            wmma::mma_sync(acc[j], ah, bl, acc[j]);
            wmma::mma_sync(acc[j], ah, bh, acc[j]);
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
