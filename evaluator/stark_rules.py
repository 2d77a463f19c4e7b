"""stark_rules -- the rules outputs are judged by, beyond the elementwise
tolerance of stark_tensors.compare_tensor: functions of tensors, shared by the
reference worker (which runs them on its device) and the referee (which
chooses their parameters and reads their results).

  scale_bad        an output judged against its own scale: the RMS of the
                   error within a fraction of the output's RMS, so an
                   output that carries no information (zeros, a constant,
                   a scaled-down copy) fails where every element sits
                   under the absolute tolerance (THREATS R2);
  scale_exact      the same rule's second opinion against the reference
                   run in float64;
  precision_stats  how far the candidate, the float32 reference and a
                   float64 run on jittered inputs are from the float64
                   result (RMS), from which the referee judges a precision
                   downcast (THREATS R12: TF32, float16 or bfloat16
                   operands or accumulators, approximate intrinsics);
  centre_, centre_inputs    the precision probe's inputs: non-negative floating
                   inputs moved to zero mean, where rounding in any
                   float32 summation order stays small and a downcast's
                   per-term rounding does not;
  kb_*             KernelBench's own verdict, replicated: its trial seeds,
                   its input processing and torch.allclose as its harness
                   calls it (src/kernelbench/eval.py,
                   run_and_check_correctness).

Every function works in chunks of stark_tensors.COMPARE_CHUNK elements, so no
temporary is larger than a chunk, and accumulates in float64.
"""

import math

import torch

import stark_tensors as T
import stark_wire as W

U32 = 2.0 ** -24              # float32's unit roundoff

# -- an output judged against its own scale ----------------------------------

# The fraction of an output's RMS its RMS error may reach is SCALE_FACTOR
# times the relative tolerance (1% at float32's default rtol of 1e-4), at
# most SCALE_MAX.  Honest float32 kernels err by about 1e-7 of the output's
# scale times the problem's conditioning; a zero output errs by 100%, a
# constant by the output's variation, a copy scaled by s by |1 - s|.
SCALE_FACTOR = 100.0
SCALE_MAX = 0.25


def scale_fraction(rtol):
    """The fraction of an output's RMS its RMS error may reach."""
    return min(SCALE_FACTOR * rtol, SCALE_MAX)


def scale_bad(res, frac):
    """True when compare_tensor's result `res` (which carries rms_err and
    rms_want) fails the scale rule with fraction `frac`: an error RMS over
    frac times the output's RMS.  An output whose expected values are all
    zero has no scale to follow (the elementwise rule alone judges it), nor
    has an integer output."""
    e, w = res.get("rms_err"), res.get("rms_want")
    if e is None or w is None or not frac or w == 0.0:
        return False
    return not e <= frac * w


def _rms(sq, n):
    return math.sqrt(sq / n) if n else 0.0


def scale_exact(got, want, exact, frac, slack):
    """The scale rule's second opinion: against the reference run in
    float64 (`exact`), the candidate passes when RMS(got - exact) is within
    frac of RMS(exact), or within `slack` times the reference's own RMS
    error RMS(want - exact) -- an output that is mostly the reference's
    rounding noise (a difference of nearly equal sums) has no scale of its
    own to follow.  Over the elements where want and exact are finite.
    Returns {"bad", "rms_err", "rms_exact", "rms_ref"}."""
    s = _sums(got, want, exact)
    n = s["n"]
    e_c, e_r, sc = _rms(s["cand"], n), _rms(s["ref"], n), _rms(s["scale"], n)
    bad = n > 0 and not (e_c <= frac * sc or e_c <= slack * e_r)
    return {"bad": bool(bad), "rms_err": e_c, "rms_exact": sc, "rms_ref": e_r}


# -- precision ---------------------------------------------------------------

def _sums(got, want, exact, jittered=None):
    """Sums of squares over the elements where want and exact are finite
    (and got too: a non-finite candidate element counts as an infinite
    error): of got - exact ("cand"), want - exact ("ref"), exact
    ("scale"), jittered - exact ("in"); and their count ("n")."""
    g, w = got.reshape(-1), want.reshape(-1)
    x = exact.reshape(-1)
    j = jittered.reshape(-1) if jittered is not None else None
    out = {"cand": 0.0, "ref": 0.0, "scale": 0.0, "in": 0.0, "n": 0}
    d64 = torch.float64
    for off in range(0, w.numel(), T.COMPARE_CHUNK):
        sl = slice(off, off + T.COMPARE_CHUNK)
        wc = w[sl].to(d64)
        xc = x[sl].to(device=wc.device, dtype=d64)
        gc = g[sl].to(device=wc.device, dtype=d64)
        fin = wc.isfinite() & xc.isfinite()
        if not bool(fin.all()):
            wc, xc, gc = wc[fin], xc[fin], gc[fin]
            if j is not None:
                jc = j[sl].to(device=wc.device, dtype=d64)[fin]
        elif j is not None:
            jc = j[sl].to(device=wc.device, dtype=d64)
        if not bool(gc.isfinite().all()):
            out["cand"] = float("inf")
        elif out["cand"] != float("inf"):
            out["cand"] += float((gc - xc).pow_(2).sum())
        out["ref"] += float((wc - xc).pow_(2).sum())
        out["scale"] += float(xc.pow(2).sum())
        if j is not None:
            out["in"] += float((jc.to(d64) - xc).pow_(2).sum())
        out["n"] += int(wc.numel())
    return out


def precision_stats(got, want, exact, jittered=None):
    """RMS distances from the float64 result `exact` of: the candidate
    (e_cand), the float32 reference (e_ref) and, when given, the float64
    run on inputs and weights jittered by one float32 rounding (e_in: the
    noise rounding the inputs to float32 puts in the result); with the
    result's RMS (scale) and the elements counted (n).  From these the
    referee judges precision (precision_ratios)."""
    s = _sums(got, want, exact, jittered)
    n = s["n"]
    res = {"e_cand": _rms(s["cand"], n), "e_ref": _rms(s["ref"], n),
           "scale": _rms(s["scale"], n), "n": n}
    if jittered is not None:
        res["e_in"] = _rms(s["in"], n)
    return res


# The precision rule: a judged output is flagged reduced_precision when its
# RMS error against the float64 result is over PRECISION_IN_MAX times e_in
# (the noise that rounding the inputs to float32 puts in that result) and
# over PRECISION_REF_MAX times the float32 reference's own error.  Why these
# limits hold at every K, from the arithmetic (the figures are
# scripts/precision-study's, on zero-mean inputs as the probe makes them,
# and what tests/e2e/52-precision-rule.t checks from K = 1024 to 65536):
#
# - e_in is a sum of K independent terms, each a product's relative
#   perturbation of size u32 = 2^-24; so it grows as sqrt(K) times the
#   products' size, like the result itself on zero-mean inputs.
# - A downcast of the operands (TF32 or float16: 10-bit mantissas, bfloat16:
#   7) perturbs each product by u = 2^-11 (2^-8) relative instead: the same
#   sum of K independent terms, 2^13 (2^16) times larger.  r_in is then a
#   property of the format, not of K: 3.6e3 to 4.9e3 for TF32 and float16,
#   3e4 to 4e4 for bfloat16, at every size (4.4e3 for TF32 on the H100).  A narrower accumulator or result only
#   adds to it.
# - An honest float32 order (sequential, tiled, split-K, pairwise, 3xTF32
#   with its partial sums rounded to nearest) adds one rounding of size u32
#   times a partial sum per step; partial sums of zero-mean terms grow as
#   sqrt(k), so its error grows at most as sqrt(K) times e_in's scale: the
#   sequential order, the worst, measured 9, 18, 35 and 73 times e_in at
#   K = 1024, 4096, 16384 and 65536 (0.3 sqrt(K); 108 on the H100 at
#   K = 131072), and it would reach 256 near K = 750000.
# - In bits: r_in = 2^b means b of float32's 24 bits lost.  256 = 8 bits.
#   TF32 and float16 operands lose 12-13 at every K, bfloat16 15; honest
#   orders lose log2(0.3 sqrt(K)), 6.8 bits at K = 131072.
# - PRECISION_REF_MAX (5 bits worse than the float32 reference) keeps a
#   candidate clear where the reference is itself far from exact (its error
#   is then the scale of what float32 can do here); honest orders measured
#   0.03 to 1.1 times the CPU BLAS's error at every K.  A downcast's r_ref
#   shrinks as the reference's own error grows with K; cuBLAS's split
#   orders keep that error at 10 times e_in at K = 131072 on the H100.
# - A float32 accumulator that truncates instead of rounding to nearest, as
#   tensor cores' does, drifts by about u32 times a partial sum every step
#   in the same direction: its error grows as K, not sqrt(K), one bit lost
#   per doubling of K.  Accumulated across the whole sum (a plain wmma
#   kernel, 3xTF32 included) it loses 10 bits at K = 4096 (961 times e_in
#   and 50 times the reference's error measured on the H100; the model
#   gives 1.2e3 to 1.3e3 and 63 to 69) and from K near 16384 more than TF32 operands do:
#   no limit could pass it and flag them.  It is flagged, rightly: its
#   result holds less than the float32 reference's.  Restarting the MMA
#   accumulator every k-tile and adding it to a float32 register (a
#   rounding add) confines the truncation to one tile's partial sum and
#   brings it back to the honest orders' sqrt(K) (8 times e_in at K = 4096).
PRECISION_IN_MAX = 256.0
PRECISION_REF_MAX = 32.0


def precision_flagged(r_ref, r_in):
    """Whether precision_ratios' figures are over both limits."""
    return r_in > PRECISION_IN_MAX and r_ref > PRECISION_REF_MAX


def precision_ratios(st):
    """(r_ref, r_in) of precision_stats' result: the candidate's RMS error
    over the reference's own and over the input-rounding noise, each
    floored at one float32 rounding of the result (U32 * scale), so that a
    reference that happens to be exact, or a result that does not depend
    on its inputs' low bits, does not make any rounding look large.
    r_in is NaN without e_in."""
    floor = max(U32 * st["scale"], 1e-300)
    r_ref = st["e_cand"] / max(st["e_ref"], floor)
    e_in = st.get("e_in")
    r_in = st["e_cand"] / max(e_in, floor) if e_in is not None else float("nan")
    return r_ref, r_in


def jitter_(t, gen):
    """Moves every element of a float64 tensor by a relative amount drawn
    uniformly in [-U32, U32] (in place; returns t)."""
    noise = torch.empty(t.shape, dtype=torch.float64, device=t.device)
    noise.uniform_(-U32, U32, generator=gen)
    return t.mul_(noise.add_(1.0))


CENTRE_CHUNK = 1 << 22        # elements centred per step (as stark_tensors.COMPARE_CHUNK)


def _centre_mean(x):
    """The mean of a floating tensor in float64, summed piece by piece (no
    float64 copy of the whole), or None where x is not to be centred: not
    floating, under two elements, or holding a negative value."""
    if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 1):
        return None
    if bool((x.min() < 0).item()):
        return None
    flat = x.detach().reshape(-1)
    s = 0.0
    for off in range(0, flat.numel(), CENTRE_CHUNK):
        s += float(flat[off:off + CENTRE_CHUNK].to(torch.float64).sum())
    return s / flat.numel()


def _centre_into(dst, src, m):
    """dst = src - m, computed in float64 and rounded to dst's dtype, piece
    by piece (dst may be src: in place)."""
    a, b = dst.view(-1), src.detach().reshape(-1)
    for off in range(0, b.numel(), CENTRE_CHUNK):
        c = b[off:off + CENTRE_CHUNK].to(torch.float64, copy=True).sub_(m)
        a[off:off + CENTRE_CHUNK].copy_(c)


def centre_(tensors):
    """The precision probe's inputs, made in place: every floating tensor of
    at least two elements whose values are all non-negative (uniform noise,
    positive data) moved to zero mean (x - mean(x), in float64, rounded
    back), piece by piece so that no copy of the whole is made.  Other
    tensors are left alone.  Returns, per tensor, whether it was changed."""
    done = []
    with torch.no_grad():
        for x in tensors:
            m = _centre_mean(x) if isinstance(x, torch.Tensor) and x.is_contiguous() else None
            if m is None:
                done.append(False)
                continue
            _centre_into(x, x, m)
            done.append(True)
    return done


def centre_inputs(items):
    """centre_ on new tensors (for inputs get_inputs() may keep): returns
    (a new list, how many tensors it changed); tensors that already hold
    negative values, other tensors and plain values unchanged."""
    out, n = [], 0
    with torch.no_grad():
        for x in items:
            m = _centre_mean(x) if isinstance(x, torch.Tensor) else None
            if m is None:
                out.append(x)
                continue
            y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
            _centre_into(y, x, m)
            if x.requires_grad:
                y.requires_grad_(True)
            out.append(y)
            n += 1
    return out, n


# -- KernelBench's verdict ---------------------------------------------------

KB_SEED = 42                  # eval_kernel_against_ref's seed_num default
KB_TRIALS = 5                 # num_correct_trials in every KernelBench script
KB_TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}   # atol = rtol
KB_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
KB_DTYPE_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def kb_trial_seeds(seed=KB_SEED, n=KB_TRIALS):
    """The seeds of KernelBench's correctness trials: after
    torch.manual_seed(seed), torch.randint(0, 2**32 - 1, (1,)).item() n
    times (drawn here from a generator of its own, seeded the same)."""
    g = torch.Generator().manual_seed(seed)
    return [int(torch.randint(0, 2 ** 32 - 1, (1,), generator=g).item()) for _ in range(n)]


def kb_process_input(x, device, precision="fp32"):
    """KernelBench's _process_input_tensor: every tensor (integer ones
    included) cast to the precision's dtype, then moved to the device;
    anything else unchanged.  A floating tensor is moved first and cast
    there: the same values (a cast between floating types rounds alike on
    either side), without a second copy of a tensor of gigabytes in host
    memory -- level 1's LeakyReLU at bf16 (6 GiB of fp32 inputs made on
    the CPU, 3 GiB more for the cast) took two workers past the run jail's
    16 GiB on the H200."""
    if not isinstance(x, torch.Tensor):
        return x
    dtype = KB_DTYPES[precision]
    if x.is_floating_point() and x.dtype != dtype:
        return x.to(device=device).to(dtype=dtype)
    return x.to(dtype=dtype).to(device=device)


def kb_merge(acc, r, base):
    """Adds kb_allclose's result r for a piece of an output that starts at
    element `base` to acc, the output's so far (None for the first piece):
    close while every piece is, counts and the sum of differences add up,
    the largest figures carry over (NaN sticks), the first failing element
    is the earliest piece's.  Returns the merged result."""
    if acc is None:
        return dict(r, first=None if r["first"] is None else base + r["first"],
                    n=r.get("n", 0))
    n0, n1 = acc.get("n", 0), r.get("n", 0)

    def worst(a, b):
        return a if a != a else (b if b != b else max(a, b))
    acc["close"] = acc["close"] and r["close"]
    acc["nbad"] += r["nbad"]
    if acc["first"] is None and r["first"] is not None:
        acc["first"] = base + r["first"]
    acc["max_diff"] = worst(acc["max_diff"], r["max_diff"])
    acc["used"] = worst(acc["used"], r["used"])
    acc["avg_diff"] = ((acc["avg_diff"] * n0 + r["avg_diff"] * n1) / (n0 + n1)
                       if n0 + n1 else 0.0)
    acc["n"] = n0 + n1
    return acc


# KernelBench's usual case in one pass on a GPU, where the reference's worker
# has it (stark_fused.enable sets it): fn(got, want, atol, rtol) -> this
# function's result, or None where torch must judge.
FUSED_KB = None


def kb_allclose(got, want, atol, rtol):
    """torch.allclose(want, got, atol=atol, rtol=rtol) as KernelBench calls
    it (the reference's output first, so rtol multiplies the candidate's
    magnitude; NaN is never close), in chunks, with KernelBench's figures:
    the largest and mean |want - got| (max_diff, avg_diff, NaN where a NaN
    is involved) and, as stark's addition, the largest |want - got| over
    atol + rtol * |got| (used: 1 is the edge of the tolerance).  A dtype
    mismatch raises, as torch.allclose does."""
    if got.dtype != want.dtype:
        raise RuntimeError("%s did not match %s" % (W.dtype_name(want.dtype).title(),
                                                     W.dtype_name(got.dtype).title()))
    g, w = got.reshape(-1), want.reshape(-1)
    if FUSED_KB is not None and g.is_cuda:
        r = FUSED_KB(g, w, atol, rtol)
        if r is not None:
            return r
    close, nbad, total, first = True, 0, 0.0, None
    max_diff, used = 0.0, 0.0
    n = w.numel()
    for off in range(0, n, T.COMPARE_CHUNK):
        wc, gc = w[off:off + T.COMPARE_CHUNK], g[off:off + T.COMPARE_CHUNK]
        ok = torch.isclose(wc, gc, rtol=rtol, atol=atol)
        if not bool(ok.all()):
            close = False
            bad = ~ok
            nbad += int(bad.sum())
            if first is None:
                first = off + int(torch.argmax(bad.to(torch.uint8)))
        d = (wc.to(torch.float64) - gc.to(torch.float64)).abs_()
        lim = gc.to(torch.float64).abs().mul_(rtol).add_(atol)
        m = float(d.max()) if d.numel() else 0.0
        max_diff = m if (m != m or max_diff != max_diff) else max(max_diff, m)
        total += float(d.sum())
        u = float(d.div_(lim.clamp_min_(1e-300)).max()) if d.numel() else 0.0
        used = u if (u != u or used != used) else max(used, u)
    avg = total / n if n else 0.0
    return {"close": close, "nbad": nbad, "first": first, "max_diff": max_diff,
            "avg_diff": avg, "used": used, "n": n}
