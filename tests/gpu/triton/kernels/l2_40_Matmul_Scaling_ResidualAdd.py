import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_scale_residual_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, M, N, K, sxm, sxk, swn, swk,
                            som, son, mult, BM: tl.constexpr, BN: tl.constexpr,
                            BK: tl.constexpr, GROUP: tl.constexpr):
    # out = (x @ W^T + b) * (1 + scale), the whole chain in one
    # kernel: W is nn.Linear's (N, K), read as the (K, N) operand through its
    # strides; float32 products (IEEE, no TF32), the epilogue in registers
    # (the reference's scaled copy plus the unscaled one).
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    width = GROUP * grid_n
    first_m = (pid // width) * GROUP
    size_m = tl.minimum(grid_m - first_m, GROUP)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        ka = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * sxm + ka[None, :] * sxk,
                    mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
        w = tl.load(w_ptr + ka[:, None] * swk + rn[None, :] * swn,
                    mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc, input_precision="ieee")
    bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0)
    y = acc + bias[None, :]
    y = y * mult + y
    tl.store(out_ptr + rm[:, None] * som + rn[None, :] * son, y,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        M, K = x.shape
        w = self.matmul.weight
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
        linear_scale_residual_kernel[grid](
            x, w, self.matmul.bias, out, M, N, K, x.stride(0), x.stride(1), w.stride(0),
            w.stride(1), out.stride(0), out.stride(1), float(self.scaling_factor),
            BM=128, BN=128, BK=32, GROUP=8, num_warps=8,
            num_stages=3)
        return out
