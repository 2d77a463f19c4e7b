import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, out_ptr, nfeat, spatial, eps, BLOCK: tl.constexpr):
    # x is (B, F, S) with S = H * W: a program per (b, BLOCK positions of S),
    # the mean of squares over F, then every feature divided by the RMS.
    b = tl.program_id(0).to(tl.int64)
    pos = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = pos < spatial
    base = x_ptr + b * nfeat * spatial + pos
    obase = out_ptr + b * nfeat * spatial + pos
    acc = tl.zeros((BLOCK,), tl.float32)
    for f in range(0, nfeat):
        x = tl.load(base + f * spatial, mask=mask, other=0.0)
        acc += x * x
    rms = tl.sqrt(acc / nfeat + eps)
    for f in range(0, nfeat):
        x = tl.load(base + f * spatial, mask=mask, other=0.0)
        tl.store(obase + f * spatial, x / rms, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        b, f = x.shape[0], x.shape[1]
        spatial = x.numel() // max(b * f, 1)
        rms_norm_kernel[(b, triton.cdiv(spatial, 1024))](x, out, f, spatial, self.eps,
                                                         BLOCK=1024, num_warps=4)
        return out
