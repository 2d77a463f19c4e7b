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
within tolerance" rightly.  KernelBench's torch.allclose and its figures
(stark_rules.kb_allclose: float64 differences, about twenty passes too)
get kernels of their own, for float32 and float64, on the same terms.

It is used in the reference's worker only, which is trusted; its source is
compiled by NVRTC in memory (no cubin cache that anyone else could write)
and tried on a self-test against torch's figures before its first use; a
kernel that disagrees is not used, and the note says why.  The default on
GPUs; STARK_COMPARE_KERNEL=torch keeps torch's comparison.
"""

import contextlib
import math
import os
import threading
import time

import torch

import stark_cuda
import stark_rules as R
import stark_tensors as T

# Outputs of a call smaller than this are left to torch: the kernel's
# self-test on the device (35-260 ms on an H200, once an evaluation)
# outweighs what it saves on them (about 11 ms a GiB of a comparison, some
# 40 comparisons an evaluation).
FUSED_MIN = 64 << 20
BLOCK = 256                   # threads a block
BLOCKS_PER_SM = 8             # the grid: this many blocks an SM at most
FIGS = 6                      # a block's figures: e2, w2, bmax, dmax, rel, bad
# How long enable waits for prepare's thread (NVRTC: 0.8-1.3 s on an H200's
# busy host); past it torch compares, and the note says why.
PREPARE_WAIT_S = 30
# The self-tests' pieces: under torch's grain for work on several threads
# (32768 elements), so that making them on the CPU is quick and single-
# threaded (at 70001 elements and every core busy, OpenMP's teams made
# them take seconds).
CASE_N = 20001

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

/* A block's N figures, the first S summed and the others the largest (all
 * of them at least 0), into part[block * N ...]: across a warp's lanes by
 * shuffles, then across its warps through shared memory. */
template <int N, int S>
__device__ void block_figures(double *v, double *part)
{
	__shared__ double s[32][N];
	for (int o = 16; o > 0; o >>= 1)
		for (int j = 0; j < N; j++) {
			double u = __shfl_down_sync(0xffffffffu, v[j], o);
			v[j] = j < S ? v[j] + u : fmax(v[j], u);
		}
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0)
		for (int j = 0; j < N; j++)
			s[warp][j] = v[j];
	__syncthreads();
	if (threadIdx.x == 0)
		for (int j = 0; j < N; j++) {
			double r = 0;
			for (int k = 0; k < (int)(blockDim.x + 31) / 32; k++)
				r = j < S ? r + s[k][j] : fmax(r, s[k][j]);
			part[(long long)blockIdx.x * N + j] = r;
		}
}

/* One block's figures into part[block * 6 ...]: e2, w2, bmax, dmax, rel, bad. */
template <typename L>
__device__ void cmp(const typename L::T *a, const typename L::T *b, long long n,
		    double atol, double rtol, double floor_, double *part)
{
	typedef typename L::CT CT;
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
	double v[6] = {e2, w2, (double)bmax, (double)dmax, (double)rel, (double)bad};
	block_figures<6, 2>(v, part);
}

/* KernelBench's torch.allclose(want, got) (stark_rules.kb_allclose): an
 * element is close where want == got, or where d = |want - got| is finite
 * and d <= atol + |rtol * got| in the dtype; the figures in float64:
 * sum and largest |want - got|, and the largest of it over
 * |got| * rtol + atol (at least 1e-300).  A block's figures into
 * part[block * 4 ...]: sum, dmax, used, bad (an element not close, or a
 * difference not finite). */
template <typename T>
__device__ void kb(const T *g, const T *w, long long n, double atol, double rtol, double *part)
{
	T at = (T)atol, rt = (T)rtol;
	double sum = 0, dmax = 0, used = 0;
	int bad = 0;
	long long step = (long long)blockDim.x * gridDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
		T x = w[i], y = g[i];
		T actual = mag(x - y);
		T allowed = mag(rt * y);
		allowed = at + allowed;
		bool close = x == y || (fin(actual) && actual <= allowed);
		double d = fabs((double)x - (double)y);
		double lim = fabs((double)y) * rtol;
		lim = lim + atol;
		if (!close || !fin(d))
			bad = 1;
		sum += d;
		dmax = fmax(dmax, d);
		used = fmax(used, d / fmax(lim, 1e-300));
	}
	double v[4] = {sum, dmax, used, (double)bad};
	block_figures<4, 1>(v, part);
}

extern "C" __global__ void stark_kb_f32(const float *g, const float *w, long long n,
	double atol, double rtol, double *part)
{
	kb<float>(g, w, n, atol, rtol, part);
}

extern "C" __global__ void stark_kb_f64(const double *g, const double *w, long long n,
	double atol, double rtol, double *part)
{
	kb<double>(g, w, n, atol, rtol, part);
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


_KB_KERNELS = {torch.float32: "stark_kb_f32", torch.float64: "stark_kb_f64"}


def wanted(env=None):
    """Whether the fused comparison is wanted: unless $STARK_COMPARE_KERNEL
    is "torch"."""
    return (os.environ if env is None else env).get("STARK_COMPARE_KERNEL", "") != "torch"


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

    def _run(self, kernels, got, want, nfigs, extra=()):
        """The kernel of `kernels` for want's dtype over contiguous pieces
        got and want of one dtype and size on this device: the per-block
        figures (blocks x nfigs, float64, on the device), or None for a
        piece the kernels do not take."""
        name = kernels.get(want.dtype)
        n = want.numel()
        if (name is None or got.dtype != want.dtype or got.numel() != n or n == 0 or
                got.device != self.device or want.device != self.device or
                not got.is_contiguous() or not want.is_contiguous()):
            return None
        blocks = min(max((n + BLOCK - 1) // BLOCK, 1), self.max_blocks)
        part = torch.empty((blocks, nfigs), dtype=torch.float64, device=self.device)
        with _on(self.device):
            getattr(self.mod, name)((blocks,), (BLOCK,), (got, want, n) + tuple(extra) + (part,))
        return part

    def figures(self, a, b, atol, rtol):
        """[bmax, allok, e2, w2, dmax, rel] of contiguous pieces a (the
        candidate's) and b (the reference's) of one dtype on this device,
        as stark_tensors._torch_figures gives them (allok 1.0 or 0.0; a
        non-finite expected value makes allok 0.0), or None for a dtype or
        device the kernels do not take."""
        part = self._run(_KERNELS, a, b, FIGS,
                         (float(atol), float(rtol), max(float(atol), 1e-30)))
        if part is None:
            return None
        return torch.stack([part[:, 2].max(), (part[:, 5].max() == 0).to(torch.float64),
                            part[:, 0].sum(), part[:, 1].sum(), part[:, 3].max(),
                            part[:, 4].max()]).tolist()

    def kb_figures(self, got, want, atol, rtol):
        """stark_rules.kb_allclose's result for contiguous pieces of one
        float32 or float64 dtype on this device where every element is
        close and every difference finite (KernelBench's usual case), else
        None (kb_allclose judges the piece)."""
        part = self._run(_KB_KERNELS, got, want, 4, (float(atol), float(rtol)))
        if part is None:
            return None
        total, dmax, used, bad = torch.stack([part[:, 0].sum(), part[:, 1].max(),
                                              part[:, 2].max(), part[:, 3].max()]).tolist()
        if bad != 0.0:
            return None
        return {"close": True, "nbad": 0, "first": None, "max_diff": dmax,
                "avg_diff": total / want.numel(), "used": used, "n": want.numel()}

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


def _kb_usual(r):
    """Whether kb_allclose's result r is KernelBench's usual case (every
    element close, every figure finite): what kb_figures answers."""
    return r["close"] and all(math.isfinite(r[k]) for k in ("max_diff", "avg_diff", "used"))


def _kb_agree(x, y):
    """kb_figures's x (None: not the usual case) and kb_allclose's y: the
    same case, and in the usual one equal maxima and sums within 1e-9."""
    if (x is not None) != _kb_usual(y):
        return False
    if x is None:
        return True
    return (x["close"] and x["nbad"] == y["nbad"] == 0 and x["max_diff"] == y["max_diff"] and
            x["used"] == y["used"] and
            abs(x["avg_diff"] - y["avg_diff"]) <= 1e-9 * max(abs(y["avg_diff"]), 1e-300))


def kb_torch(got, want, atol, rtol):
    """stark_rules.kb_allclose by torch alone, whatever FUSED_KB holds."""
    saved, R.FUSED_KB = R.FUSED_KB, None
    try:
        return R.kb_allclose(got, want, atol, rtol)
    finally:
        R.FUSED_KB = saved


def kb_self_cases():
    """kb_self_test's cases, made on the CPU with KernelBench's answer there
    (stark_rules.kb_allclose): (label, got, want, atol, rtol, answer) for
    float32 and float64, within, at the edge of and beyond KernelBench's
    tolerance (|got| times rtol plus atol), NaN on either side, infinities
    equal (close to torch, not finite) and not, and which magnitude the
    tolerance scales: the candidate's (rtol 0.5: 1.9 against 1.0 is close,
    1.0 against 1.9 is not)."""
    gen = torch.Generator().manual_seed(20261130)
    base = torch.randn(CASE_N, generator=gen, dtype=torch.float64)
    noise = torch.randn(CASE_N, generator=gen, dtype=torch.float64)
    out = []
    for dt in _KB_KERNELS:
        for atol, rtol in ((1e-2, 1e-2), (1e-4, 1e-4)):
            want = base.to(dt, copy=True)
            near = (base + noise * 1e-6).to(dt)
            cases = [("within", near, want)]
            for label, where, k in (("just out of tolerance", 15000, 1.05),
                                    ("just within", 15001, 0.95),
                                    ("out of tolerance at the end", -1, 10.0)):
                g = near.clone()
                w64 = want[where].to(torch.float64)
                g[where] = w64 + k * (atol + rtol * w64.abs())
                cases.append((label, g, want))
            for label, where, gv, wv in (("NaN", 12345, float("nan"), None),
                                         ("NaN expected", 3, None, float("nan")),
                                         ("equal infinities", 777, float("inf"), float("inf")),
                                         ("an infinity", 0, float("-inf"), None)):
                g, w = near.clone(), want.clone()
                if gv is not None:
                    g[where] = gv
                if wv is not None:
                    w[where] = wv
                cases.append((label, g, w))
            for label, g, w in cases:
                out.append(("KernelBench's, %s, tolerance %g, %s" % (dt, atol, label),
                            g, w, atol, rtol, kb_torch(g, w, atol, rtol)))
        for label, gv, wv in (("the candidate's magnitude, close", 1.9, 1.0),
                              ("the candidate's magnitude, not close", 1.0, 1.9)):
            g = base.to(dt, copy=True)
            w = g.clone()
            g[17000], w[17000] = gv, wv
            out.append(("KernelBench's, %s, %s" % (dt, label), g, w, 0.0, 0.5,
                        kb_torch(g, w, 0.0, 0.5)))
    return out


def kb_self_test(fused):
    """KernelBench's kernels against stark_rules.kb_allclose on
    kb_self_cases.  Returns None when every case agrees
    (stark_fused._kb_agree), else what disagreed."""
    for label, g, w, atol, rtol, y in kb_self_cases():
        x = fused.kb_figures(g.to(fused.device), w.to(fused.device), atol, rtol)
        if not _kb_agree(x, y):
            return "%s: kernel %s, torch %s" % (label, x, y)
    return None


def self_cases():
    """self_test's cases, made on the CPU with torch's figures there
    (stark_tensors._torch_figures): (label, got, want, atol, rtol, figures)
    for each dtype, in the usual case, at the edge of the tolerance (an
    element 5% beyond it, one 5% inside), which magnitude the tolerance
    scales (the expected value's: rtol 0.5, 1.0 against 1.9 passes, 1.9
    against 1.0 does not) and in each case that must fail: an element out
    of tolerance (the last, past a block's share), NaN in the candidate's
    or the reference's output, an infinity in either."""
    gen = torch.Generator().manual_seed(20261129)
    base = torch.randn(CASE_N, generator=gen, dtype=torch.float64)
    noise = torch.randn(CASE_N, generator=gen, dtype=torch.float64)
    out = []
    for dt in _KERNELS:
        ct = torch.float64 if dt == torch.float64 else torch.float32
        want = base.to(dt, copy=True)
        atol, rtol = (1e-2, 1e-2) if dt in (torch.float16, torch.bfloat16) else (1e-4, 1e-4)
        near = (base + noise * 1e-6).to(dt)
        cases = [("within", near, want, atol, rtol)]
        for label, where, k in (("just out of tolerance", 15000, 1.05), ("just within", 15001, 0.95)):
            g = near.clone()
            w64 = want[where].to(torch.float64)
            g[where] = w64 + k * (atol + rtol * w64.abs())
            cases.append((label, g, want, atol, rtol))
        for label, gv, wv in (("the expected magnitude, within", 1.0, 1.9),
                              ("the expected magnitude, beyond", 1.9, 1.0)):
            g, w = near.clone(), want.clone()
            g[17000], w[17000] = gv, wv
            cases.append((label, g, w, 0.0, 0.5))
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
            cases.append((label, g, w, atol, rtol))
        for label, g, w, at, rt in cases:
            out.append(("%s, %s" % (dt, label), g, w, at, rt, T._torch_figures(g, w, ct, at, rt)))
    return out


def self_test(fused):
    """The kernels against torch's figures on self_cases.  Returns None
    when every case agrees (stark_fused._agree), else what disagreed."""
    for label, g, w, atol, rtol, ref in self_cases():
        got = fused.figures(g.to(fused.device), w.to(fused.device), atol, rtol)
        if got is None or not _agree(got, ref):
            return "%s: kernel %s, torch %s" % (label, got, ref)
    return None


def prepare(device):
    """Starts compiling the kernels (NVRTC, about 1 s of the H200's host)
    in a thread of its own, beside the worker's loading: NVRTC runs
    outside the interpreter's lock, so the thread costs the loading
    nothing.  (The self-tests' cases are made later, in enable: torch work
    in a second thread would contend for that lock with the loading, and
    made so they took 4-5 s and slowed the loading by about as much, with
    four evaluations on an H200's host.)  Returns the handle enable
    takes: (the thread, its box: "fused" or "error", "ms" it took, "end"
    when it ended, time.monotonic)."""
    box = {}

    def make():
        t0 = time.monotonic()
        try:
            box["fused"] = Fused(device)
        except Exception as e:          # NVRTC missing, a compile error
            box["error"] = (str(e).strip() or type(e).__name__).splitlines()[0]
        box["ms"] = (time.monotonic() - t0) * 1e3
        box["end"] = time.monotonic()
    th = threading.Thread(target=make, name="stark-fused", daemon=True)
    th.start()
    return th, box


def enable(device, prep=None):
    """Finishes what prepare started (or starts it now): waits for the
    kernels, tries them on the device against the answers torch gave on
    the CPU (self_test, kb_self_test) and, where they agree, has
    stark_tensors and stark_rules use them for the usual case.
    Returns a note for the result's env: how the comparison runs."""
    t0 = time.monotonic()
    th, box = prep if prep is not None else prepare(device)
    th.join(PREPARE_WAIT_S)
    waited = (time.monotonic() - t0) * 1e3
    if th.is_alive():
        return "torch (the fused kernel was not made within %d s)" % PREPARE_WAIT_S
    if "error" in box:
        return "torch (the fused kernel could not be made: %s)" % box["error"][:200]
    fused = box["fused"]
    t1 = time.monotonic()
    try:
        why = self_test(fused) or kb_self_test(fused)
    except Exception as e:              # a load or launch error
        why = (str(e).strip() or type(e).__name__).splitlines()[0]
        return "torch (the fused kernel could not be made: %s)" % why[:200]
    if why is not None:
        return "torch (the fused kernel disagreed with torch: %s)" % why[:300]
    T.FUSED = fused.figures
    R.FUSED_KB = fused.kb_figures
    return ("fused (one pass; made beside the loading in %.0f ms, waited for %.0f ms; "
            "self-test passed in %.0f ms)" % (box["ms"], waited, (time.monotonic() - t1) * 1e3))
