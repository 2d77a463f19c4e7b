import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def ln_partial_kernel(x_ptr, sum_ptr, sq_ptr, per_sample, nchunks, CHUNK: tl.constexpr,
                      BLOCK: tl.constexpr):
    # Program (b, c): the sum and the sum of squares of chunk c of sample b,
    # each a CHUNK of the sample's per_sample elements.
    b = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    start = c.to(tl.int64) * CHUNK
    base = x_ptr + b * per_sample
    s = tl.zeros((BLOCK,), tl.float32)
    q = tl.zeros((BLOCK,), tl.float32)
    for i in range(0, CHUNK, BLOCK):
        o = start + i + offs
        x = tl.load(base + o, mask=o < per_sample, other=0.0)
        s += x
        q += x * x
    tl.store(sum_ptr + b * nchunks + c, tl.sum(s, 0))
    tl.store(sq_ptr + b * nchunks + c, tl.sum(q, 0))


@triton.jit
def ln_stats_kernel(sum_ptr, sq_ptr, mean_ptr, rstd_ptr, nchunks, per_sample, eps,
                    BLOCK: tl.constexpr):
    # One program a sample: its mean and 1 / sqrt(var + eps).
    b = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    s = tl.zeros((BLOCK,), tl.float32)
    q = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, nchunks, BLOCK):
        m = start + offs < nchunks
        s += tl.load(sum_ptr + b * nchunks + start + offs, mask=m, other=0.0)
        q += tl.load(sq_ptr + b * nchunks + start + offs, mask=m, other=0.0)
    mean = tl.sum(s, 0) / per_sample
    var = tl.maximum(tl.sum(q, 0) / per_sample - mean * mean, 0.0)
    tl.store(mean_ptr + b, mean)
    tl.store(rstd_ptr + b, 1.0 / tl.sqrt(var + eps))


@triton.jit
def ln_apply_kernel(x_ptr, w_ptr, bias_ptr, mean_ptr, rstd_ptr, out_ptr, per_sample,
                    BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    o = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = o < per_sample
    mean = tl.load(mean_ptr + b)
    rstd = tl.load(rstd_ptr + b)
    x = tl.load(x_ptr + b * per_sample + o, mask=mask, other=0.0)
    w = tl.load(w_ptr + o, mask=mask, other=0.0)
    bb = tl.load(bias_ptr + o, mask=mask, other=0.0)
    tl.store(out_ptr + b * per_sample + o, (x - mean) * rstd * w + bb, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        # The same module, so its weight and bias are the reference's.
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        x = x.contiguous()
        per_sample = self.ln.weight.numel()
        nb = x.numel() // per_sample
        chunk = 65536
        nchunks = triton.cdiv(per_sample, chunk)
        f32 = dict(device=x.device, dtype=torch.float32)
        sums = torch.empty(nb * nchunks, **f32)
        sqs = torch.empty(nb * nchunks, **f32)
        mean = torch.empty(nb, **f32)
        rstd = torch.empty(nb, **f32)
        out = torch.empty_like(x)
        ln_partial_kernel[(nb, nchunks)](x, sums, sqs, per_sample, nchunks, CHUNK=chunk,
                                         BLOCK=2048, num_warps=8)
        ln_stats_kernel[(nb,)](sums, sqs, mean, rstd, nchunks, per_sample, self.ln.eps,
                               BLOCK=256, num_warps=4)
        ln_apply_kernel[(nb, triton.cdiv(per_sample, 4096))](
            x, self.ln.weight, self.ln.bias, mean, rstd, out, per_sample, BLOCK=4096,
            num_warps=8)
        return out
