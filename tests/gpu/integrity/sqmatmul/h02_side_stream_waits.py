import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest twin of r07_side_stream_matmul: h01_tiled's kernel on a side
# stream that waits for the caller's stream, which waits for it before
# forward returns.
SRC = r'''
#define BM 64
#define BN 64
#define BK 16

extern "C" __global__ void sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B,
                                       float* __restrict__ C, int M, int N, int K)
{
    __shared__ float As[BK][BM + 4];
    __shared__ float Bs[BK][BN + 4];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            acc[i][j] = 0.f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = threadIdx.x; e < BM * BK; e += blockDim.x) {
            int m = e / BK, k = e % BK;
            int gm = row0 + m, gk = k0 + k;
            As[k][m] = (gm < M && gk < K) ? A[(long)gm * K + gk] : 0.f;
        }
        for (int e = threadIdx.x; e < BK * BN; e += blockDim.x) {
            int k = e / BN, n = e % BN;
            int gk = k0 + k, gn = col0 + n;
            Bs[k][n] = (gk < K && gn < N) ? B[(long)gk * N + gn] : 0.f;
        }
        __syncthreads();
        float part[4][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                part[i][j] = 0.f;
        for (int k = 0; k < BK; k++) {
            float a[4], b[4];
            for (int i = 0; i < 4; i++)
                a[i] = As[k][ty + 16 * i];
            for (int j = 0; j < 4; j++)
                b[j] = Bs[k][tx + 16 * j];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    part[i][j] += a[i] * b[j];
        }
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                acc[i][j] += part[i][j];
        __syncthreads();
    }
    for (int i = 0; i < 4; i++) {
        int gm = row0 + ty + 16 * i;
        for (int j = 0; j < 4; j++) {
            int gn = col0 + tx + 16 * j;
            if (gm < M && gn < N)
                C[(long)gm * N + gn] = acc[i][j];
        }
    }
}
'''
mod = CudaModule(SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty(M, N, device=a.device, dtype=a.dtype)
        cur = torch.cuda.current_stream(a.device)
        if self.side is None:
            self.side = torch.cuda.Stream(device=a.device)
        self.side.wait_stream(cur)
        mod.sgemm_tiled(grid=((N + 63) // 64, (M + 63) // 64), block=(256,), args=(a, b, c, M, N, K),
                        stream=self.side)
        c.record_stream(self.side)
        cur.wait_stream(self.side)
        return c
