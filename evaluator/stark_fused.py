"""stark_fused -- the comparison's usual case in one pass on a GPU.

stark_tensors.compare_tensor first tries a piece of an output as the usual
case: every element within tolerance and every expected value finite, and
then only needs six figures of it (the largest expected magnitude, whether
all passed, the sums of squares of the error and of the expected values in
float64, the largest error and the largest relative error).  In torch
that takes about twenty passes over the piece (13.4 ms a GiB of float32
on an H200: scripts/bench-compare); the kernel here reads each element
once.  Anything but the usual case (an element out of tolerance, NaN, an
infinity) is left to torch's full comparison (stark_tensors._compare_pieces),
which judges the piece again, so the kernel only ever has to answer "all
within tolerance" rightly.

It is used in the reference's worker only, which is trusted; its source is
compiled by NVRTC in memory (no cubin cache that anyone else could write)
and tried on a self-test against torch's figures before its first use; a
kernel that disagrees is not used, and the note says why.  Opt in with
STARK_COMPARE_KERNEL=fused until it is measured end to end; `torch` (the
default) keeps torch's comparison.
"""

import contextlib
import math
import os
import time

import torch

import stark_cuda
import stark_tensors as T

# Outputs of a call smaller than this are left to torch: the kernel's
# making and self-test (NVRTC, once an evaluation) outweigh what it saves
# on them (13 ms a GiB of a comparison, some 40 comparisons an evaluation).
FUSED_MIN = 64 << 20
BLOCK = 256                   # threads a block
BLOCKS_PER_SM = 8             # the grid: this many blocks an SM at most
FIGS = 6                      # a block's figures: e2, w2, bmax, dmax, rel, bad

# The tolerance test is torch's, operation by operation (d = |x - y|,
# t = |y| * rtol, t = t + atol, d <= t, each rounded in the compute type):
# compiled without contracting into fused multiply-adds (--fmad=false) so
# an element at the edge of its tolerance gets torch's answer.  Half
# precisions are widened to float32 as torch's .to(float32) does.
SOURCE = r"""
struct ld_f32 { typedef float T; typedef float CT;
	static __device__ __forceinline__ float at(const float *p, long long i) { return p[i]; } };
struct ld_f64 { typedef double T; typedef double CT;
	static __device__ __forceinline__ double at(const double *p, long long i) { return p[i]; } };
__device__ __forceinline__ float h2f(unsigned short h)
{
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}
struct ld_f16 { typedef unsigned short T; typedef float CT;
	static __device__ __forceinline__ float at(const unsigned short *p, long long i)
	{
		return h2f(p[i]);
	} };
struct ld_bf16 { typedef unsigned short T; typedef float CT;
	static __device__ __forceinline__ float at(const unsigned short *p, long long i)
	{
		return __uint_as_float(((unsigned)p[i]) << 16);
	} };

__device__ __forceinline__ float mag(float x) { return fabsf(x); }
__device__ __forceinline__ double mag(double x) { return fabs(x); }
__device__ __forceinline__ float big(float x, float y) { return fmaxf(x, y); }
__device__ __forceinline__ double big(double x, double y) { return fmax(x, y); }
__device__ __forceinline__ bool fin(float x)
{
	return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u;
}
__device__ __forceinline__ bool fin(double x)
{
	return (__double_as_longlong(x) & 0x7ff0000000000000ll) != 0x7ff0000000000000ll;
}

/* One block's figures into part[block * 6 ...]: e2, w2, bmax, dmax, rel, bad. */
template <typename L>
__device__ void cmp(const typename L::T *a, const typename L::T *b, long long n,
		    double atol, double rtol, double floor_, double *part)
{
	typedef typename L::CT CT;
	__shared__ double s[32][6];
	CT at = (CT)atol, rt = (CT)rtol, fl = (CT)floor_;
	double e2 = 0, w2 = 0;
	CT bmax = 0, dmax = 0, rel = 0;
	int bad = 0;
	long long step = (long long)blockDim.x * gridDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
		CT x = L::at(a, i), y = L::at(b, i);
		CT d = mag(x - y), m = mag(y);
		CT t = m * rt;
		t = t + at;
		if (!(d <= t) || !fin(m))
			bad = 1;
		e2 += (double)d * (double)d;
		w2 += (double)y * (double)y;
		bmax = big(bmax, m);
		dmax = big(dmax, d);
		rel = big(rel, d / big(m, fl));
	}
	for (int o = 16; o > 0; o >>= 1) {
		e2 += __shfl_down_sync(0xffffffffu, e2, o);
		w2 += __shfl_down_sync(0xffffffffu, w2, o);
		bmax = big(bmax, __shfl_down_sync(0xffffffffu, bmax, o));
		dmax = big(dmax, __shfl_down_sync(0xffffffffu, dmax, o));
		rel = big(rel, __shfl_down_sync(0xffffffffu, rel, o));
		bad |= __shfl_down_sync(0xffffffffu, bad, o);
	}
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0) {
		s[warp][0] = e2;
		s[warp][1] = w2;
		s[warp][2] = bmax;
		s[warp][3] = dmax;
		s[warp][4] = rel;
		s[warp][5] = bad;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		double r[6] = {0, 0, 0, 0, 0, 0};
		for (int k = 0; k < (int)(blockDim.x + 31) / 32; k++) {
			r[0] += s[k][0];
			r[1] += s[k][1];
			for (int j = 2; j < 6; j++)
				r[j] = fmax(r[j], s[k][j]);
		}
		for (int j = 0; j < 6; j++)
			part[(long long)blockIdx.x * 6 + j] = r[j];
	}
}

extern "C" __global__ void stark_cmp_f32(const float *a, const float *b, long long n,
	double atol, double rtol, double floor_, double *part)
{
	cmp<ld_f32>(a, b, n, atol, rtol, floor_, part);
}

extern "C" __global__ void stark_cmp_f64(const double *a, const double *b, long long n,
	double atol, double rtol, double floor_, double *part)
{
	cmp<ld_f64>(a, b, n, atol, rtol, floor_, part);
}

extern "C" __global__ void stark_cmp_f16(const unsigned short *a, const unsigned short *b,
	long long n, double atol, double rtol, double floor_, double *part)
{
	cmp<ld_f16>(a, b, n, atol, rtol, floor_, part);
}

extern "C" __global__ void stark_cmp_bf16(const unsigned short *a, const unsigned short *b,
	long long n, double atol, double rtol, double floor_, double *part)
{
	cmp<ld_bf16>(a, b, n, atol, rtol, floor_, part);
}
"""

_KERNELS = {torch.float32: "stark_cmp_f32", torch.float64: "stark_cmp_f64",
            torch.float16: "stark_cmp_f16", torch.bfloat16: "stark_cmp_bf16"}


def wanted(env=None):
    """Whether the fused comparison is asked for ($STARK_COMPARE_KERNEL)."""
    return (os.environ if env is None else env).get("STARK_COMPARE_KERNEL", "") == "fused"


def _on(device):
    """The device current for a launch (none to make current on the CPU,
    where tests/gpu/emu runs the kernels)."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


class Fused:
    """The kernels, compiled for this worker's device."""

    def __init__(self, device):
        d = torch.device(device)
        if d.type == "cuda" and d.index is None:    # "cuda": the current one, by number
            d = torch.device("cuda", torch.cuda.current_device())
        self.device = d
        with torch.cuda.device(self.device):
            self.mod = stark_cuda.CudaModule(SOURCE, options=("--fmad=false",),
                                             name="stark_compare.cu", cache=False)
            sms = torch.cuda.get_device_properties(self.device).multi_processor_count
        self.max_blocks = max(sms, 1) * BLOCKS_PER_SM

    def figures(self, a, b, atol, rtol):
        """[bmax, allok, e2, w2, dmax, rel] of contiguous pieces a (the
        candidate's) and b (the reference's) of one dtype on this device,
        as stark_tensors._pass_figures gives them (allok 1.0 or 0.0; a
        non-finite expected value makes allok 0.0), or None for a dtype or
        device the kernels do not take."""
        name = _KERNELS.get(b.dtype)
        n = b.numel()
        if (name is None or a.dtype != b.dtype or a.numel() != n or n == 0 or
                a.device != self.device or b.device != self.device or
                not a.is_contiguous() or not b.is_contiguous()):
            return None
        blocks = min(max((n + BLOCK - 1) // BLOCK, 1), self.max_blocks)
        part = torch.empty((blocks, FIGS), dtype=torch.float64, device=self.device)
        with _on(self.device):
            getattr(self.mod, name)((blocks,), (BLOCK,),
                                    (a, b, n, float(atol), float(rtol),
                                     max(float(atol), 1e-30), part))
        figs = torch.stack([part[:, 2].max(), (part[:, 5].max() == 0).to(torch.float64),
                            part[:, 0].sum(), part[:, 1].sum(), part[:, 3].max(),
                            part[:, 4].max()])
        return figs.tolist()


def _passes(f):
    """What stark_tensors._pass_piece decides from figures f."""
    return f[1] == 1.0 and math.isfinite(f[0])


def _agree(x, y):
    """The kernel's figures and torch's: the same decision, and where the
    piece passes equal maxima and sums within 1e-9 (their order of
    addition differs)."""
    if _passes(x) != _passes(y):
        return False
    if not _passes(y):
        return True
    for i in (0, 4, 5):
        if x[i] != y[i]:
            return False
    return all(abs(x[i] - y[i]) <= 1e-9 * max(abs(y[i]), 1e-300) for i in (2, 3))


def self_test(fused):
    """The kernels against torch's figures (stark_tensors._torch_figures) on
    each dtype, in the usual case, at the edge of the tolerance (an element
    5% beyond it, one 5% inside) and in each case that must fail: an
    element out of tolerance (the last, past a block's share), NaN
    in the candidate's or the reference's output, an infinity in either.
    Returns None when every case agrees, else what disagreed."""
    gen = torch.Generator().manual_seed(20261129)
    base = torch.randn(70001, generator=gen, dtype=torch.float64)
    noise = torch.randn(70001, generator=gen, dtype=torch.float64)
    for dt in _KERNELS:
        ct = torch.float64 if dt == torch.float64 else torch.float32
        want = base.to(dt).to(fused.device)
        atol, rtol = (1e-2, 1e-2) if dt in (torch.float16, torch.bfloat16) else (1e-4, 1e-4)
        near = (base + noise * 1e-6).to(dt).to(fused.device)
        cases = [("within", near, want)]
        # Elements at the edge of their tolerance, beyond it and inside it.
        for label, where, k in (("just out of tolerance", 40000, 1.05), ("just within", 40001, 0.95)):
            g = near.clone()
            w64 = want[where].to(torch.float64)
            g[where] = w64 + k * (atol + rtol * w64.abs())
            cases.append((label, g, want))
        for label, where, val, on_ref in (("out of tolerance at the end", -1, None, False),
                                          ("NaN", 12345, float("nan"), False),
                                          ("NaN expected", 3, float("nan"), True),
                                          ("an infinity", 0, float("inf"), False),
                                          ("an infinity expected", 777, float("-inf"), True)):
            g, w = near.clone(), want.clone()
            if val is None:
                g[where] = w[where].to(torch.float64) + 1.0
            elif on_ref:
                w[where] = val
            else:
                g[where] = val
            cases.append((label, g, w))
        for label, g, w in cases:
            got = fused.figures(g, w, atol, rtol)
            ref = T._torch_figures(g, w, ct, atol, rtol)
            if got is None or not _agree(got, ref):
                return "%s, %s: kernel %s, torch %s" % (dt, label, got, ref)
    return None


def enable(device):
    """Compiles the kernels for device, tries them (self_test) and, where
    they agree with torch, has stark_tensors use them for the usual case.
    Returns a note for the result's env: how the comparison runs."""
    t0 = time.monotonic()
    try:
        fused = Fused(device)
        t1 = time.monotonic()
        why = self_test(fused)
    except Exception as e:              # NVRTC missing, a compile or launch error
        return "torch (the fused kernel could not be made: %s)" % (str(e).splitlines()[0][:200],)
    if why is not None:
        return "torch (the fused kernel disagreed with torch: %s)" % why[:300]
    T.FUSED = fused.figures
    return "fused (one pass; made in %.0f ms, self-test passed in %.0f ms)" % (
        (t1 - t0) * 1e3, (time.monotonic() - t1) * 1e3)
