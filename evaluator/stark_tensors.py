"""stark_tensors -- what the referee's two workers compute on tensors in the
same way: the description of a call's inputs and their variant
distribution, the digests of outputs and inputs, and the elementwise
comparison of an output with the reference's (with its float64 second
opinion).  The protocol that carries the results is stark_wire.

Input distributions: the trials alternate between the problem's own
get_inputs() and a variant of it (vary_inputs): every floating tensor that
holds negative values -- randn-like data -- is scaled by a factor drawn
per call from the call's seed, log-uniform in [0.25, 8], and shifted by up
to half its standard deviation (times the factor), either way.  Tensors
within [0, 1], other non-negative tensors, integer and bool tensors and
plain values stay as generated.  A kernel that only works for unit-scale,
zero-mean data (statistical shortcuts, subsampling, hard-wired ranges)
fails there.  Warm-up, timed, profiled and shape-probe calls use the
problem's own distribution.

What reads a whole tensor reads it in pieces of COMPARE_CHUNK elements, so
no step needs a second copy of an 8 GiB tensor.
"""

import json
import math
import random

import torch

from stark_wire import DTYPE_NAMES, MAX_ITEMS, MAX_TENSORS, describe_tensor


def describe_inputs(items):
    """Inputs as get_inputs() returned them -> (description, [tensors]).
    The description is what the referee compares between the two workers:
    per item its kind and, for tensors, dtype, shape and requires_grad; for
    plain values the value itself.  Raises ValueError for other items."""
    desc, tensors = [], []
    for x in items:
        if isinstance(x, torch.Tensor):
            d = describe_tensor(x)
            d["t"] = "tensor"
            d["requires_grad"] = bool(x.requires_grad)
            desc.append(d)
            tensors.append(x)
        elif x is None or isinstance(x, (bool, int, float, str)):
            desc.append({"t": "value", "v": x})
        elif isinstance(x, (list, tuple)) and all(
                isinstance(v, (bool, int, float)) for v in x):
            desc.append({"t": "list", "v": list(x), "tuple": isinstance(x, tuple)})
        else:
            raise ValueError("get_inputs() returned an unsupported item of type %s"
                             % type(x).__name__)
    if len(tensors) > MAX_TENSORS or len(desc) > MAX_ITEMS:
        raise ValueError("get_inputs() returned more than %d tensors or %d items"
                         % (MAX_TENSORS, MAX_ITEMS))
    return {"items": desc}, tensors


def with_tensors(items, tensors):
    """items (a call's arguments) with its tensors replaced, in order, by
    those of `tensors`; other items as they are."""
    it = iter(tensors)
    return [next(it) if isinstance(x, torch.Tensor) else x for x in items]


def inputs_mismatch(ref, cand):
    """None when two input descriptions (describe_inputs, as parsed JSON)
    agree, else a short account of the first difference.  Compared as
    canonical JSON text, so a NaN value equals itself."""
    def canon(x):
        return json.dumps(x, sort_keys=True)[:2000]
    ri = ref.get("items") if isinstance(ref, dict) else None
    ci = cand.get("items") if isinstance(cand, dict) else None
    if not isinstance(ri, list) or not isinstance(ci, list):
        return "no list of inputs"
    if len(ri) != len(ci):
        return "%d inputs, the reference has %d" % (len(ci), len(ri))
    for i, (r, c) in enumerate(zip(ri, ci)):
        if canon(r) != canon(c):
            return "input %d is %.200s, the reference's is %.200s" % (i, canon(c), canon(r))
    return None


VARIANT_SCALE = (0.25, 8.0)   # range of the variant's scale factor
VARIANT_SHIFT = 0.5           # largest shift, in standard deviations


def variant_params(seed):
    """The scale factor (log-uniform in VARIANT_SCALE) and the shift (a
    fraction of a standard deviation, either sign) of one call's variant
    distribution, drawn from the call's seed."""
    rng = random.Random(seed ^ 0x5A17_C0DE)
    lo, hi = VARIANT_SCALE
    scale = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    shift = rng.uniform(-VARIANT_SHIFT, VARIANT_SHIFT)
    return scale, shift


def vary_inputs(items, seed):
    """The variant distribution: every floating tensor with negative values
    (randn-like) becomes x * scale + shift * std(x) * scale, with one scale
    and shift per call (variant_params).  Tensors within [0, 1]
    (probabilities, masks, uniform noise), other non-negative tensors,
    integer and bool tensors, and plain values are returned unchanged.
    Returns a new list; the tensors it changes are new tensors (made by
    vary_tensors_ on copies)."""
    out = []
    with torch.no_grad():
        for x in items:
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0:
                y = x.detach().clone(memory_format=torch.contiguous_format)
                if vary_tensors_([y], seed)[0]:
                    if x.requires_grad:
                        y.requires_grad_(True)
                    x = y
            out.append(x)
    return out


def _std(x):
    """std(x) as vary_tensors_ uses it: torch's for float32 and float64
    tensors, and for narrower types one computed in float64 piece by piece
    (no float32 copy of the whole tensor); 1.0 where it is not finite or
    undefined."""
    n = x.numel()
    if n < 2:
        return 1.0
    if x.dtype in (torch.float32, torch.float64):
        std = float(x.std())
    else:
        flat, s, s2 = x.reshape(-1), 0.0, 0.0
        for off in range(0, n, COMPARE_CHUNK):
            c = flat[off:off + COMPARE_CHUNK].to(torch.float64)
            s += float(c.sum())
            s2 += float(c.square_().sum())
        var = (s2 - s * s / n) / (n - 1)
        std = math.sqrt(var) if var > 0 else 0.0
    return std if math.isfinite(std) else 1.0


def vary_tensors_(tensors, seed):
    """vary_inputs on contiguous tensors in place (the worker's input
    buffers), piece by piece: x * scale + shift * std(x) * scale computed
    in float32 (float64 for float64 tensors), so the variant of an 8 GiB
    input needs no second copy of it.  Returns, per tensor, whether it was
    changed."""
    scale, shift = variant_params(seed)
    done = []
    with torch.no_grad():
        for x in tensors:
            if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0
                    and x.is_contiguous() and bool((x.min() < 0).item())):
                done.append(False)
                continue
            add = shift * _std(x) * scale
            ct = torch.float64 if x.dtype == torch.float64 else torch.float32
            flat = x.detach().view(-1)
            for off in range(0, flat.numel(), COMPARE_CHUNK):
                c = flat[off:off + COMPARE_CHUNK]
                if c.dtype == ct:
                    c.mul_(scale).add_(add)
                else:
                    c.copy_(c.to(ct).mul_(scale).add_(add))
            done.append(True)
    return done


def output_digest(t):
    """A checksum of a tensor's bytes in logical order: the sum of its 64-bit
    words (32-bit words, or bytes, where their count is not a multiple of 8,
    or 4) as a wrapping int64.  Integer sums do not depend on the order of
    addition, so the same bytes give the same digest on any device.  A GPU worker
    replies to CALL with the digests of its outputs, which it can only know
    once they are finished; the reference worker checks them against the
    bytes it is later sent, so an output completed after the reply (a
    synchronisation patched to return early, a host thread) is caught
    however the candidate's process reports its timings.  None for anything
    but a plain strided tensor of a wire dtype."""
    if type(t) is not torch.Tensor or t.layout is not torch.strided or \
            t.dtype not in DTYPE_NAMES:
        return None
    flat = t.detach().contiguous().reshape(-1)
    if flat.numel() == 0:
        return 0
    b = flat.view(torch.uint8)
    return digest_part(b, b.numel())


def _wrap64(x):
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >= (1 << 63) else x


def digest_part(b, total):
    """output_digest's sum over b, a uint8 tensor holding a piece of an
    output of `total` bytes (that starts at a multiple of 8 bytes): the
    words are those of the whole output (64-bit where total is a multiple
    of 8, else 32-bit or bytes), and the digests of consecutive pieces add
    up, as wrapping int64s (digest_add), to the output's."""
    if b.numel() == 0:
        return 0
    # 64-bit words are summed without a conversion pass (several times
    # faster on a GPU than 32-bit words widened to int64).
    if total % 8 == 0:
        return _wrap64(int(b.view(torch.int64).sum()))
    w = b.view(torch.int32) if total % 4 == 0 else b
    return _wrap64(int(w.sum(dtype=torch.int64)))


def digest_add(a, b):
    """Two pieces' digests (digest_part) added as wrapping int64s."""
    return _wrap64(a + b)


def weighted_digest(t):
    """A checksum of a tensor's bytes that also sees where each word is:
    the sum of its 64-bit words (bytes, where their count is not a
    multiple of 8) times odd weights by position, as a wrapping int64.
    Swapping two elements changes it, as does any single change.  What
    the workers keep of a large input or output instead of a copy of it
    (Worker.check_copy_bytes): an in-place mutation or a late write is
    then seen by this sum rather than byte by byte."""
    if type(t) is not torch.Tensor or t.layout is not torch.strided:
        return None
    b = t.detach().contiguous().reshape(-1).view(torch.uint8)
    w = b.view(torch.int64) if b.numel() % 8 == 0 else b
    if w.numel() == 0:
        return 0
    acc = torch.zeros((), dtype=torch.int64, device=b.device)
    # The weights of a piece at `off` are those of the first piece plus
    # 2 * off (wrapping int64 arithmetic: the same sum), so they are made
    # once: two passes over each piece instead of five.
    k = torch.arange(min(COMPARE_CHUNK, w.numel()), dtype=torch.int64,
                     device=b.device).mul_(2).add_(1)
    for off in range(0, w.numel(), COMPARE_CHUNK):
        c = w[off:off + COMPARE_CHUNK].to(torch.int64)
        acc += c.mul(k[:c.numel()]).sum() + c.sum() * (2 * off)
    return _wrap64(int(acc))


COMPARE_CHUNK = 1 << 22       # elements compared per step
# On a GPU, compare_tensor takes this many elements a step where they all
# pass: one reading of the device per step (bench-compare on an H200: 28
# ms a GiB at 4M elements and seven readings a step, 13-16 at 16M and
# one).  Its temporaries, COMPARE_TEMP_BYTES a step at most (float16
# outputs widened: 8 bytes an element, difference and magnitude 8, the
# test 1, one float64 square 8), are the memory plan's (stark_memory).
COMPARE_STEP_GPU = 1 << 24
COMPARE_TEMP_BYTES = 25 * COMPARE_STEP_GPU


def compare_tensor(got, want, atol, rtol):
    """Compares a candidate tensor with the reference (same shape, dtype and
    device; CPU or CUDA): |got - want| <= atol + rtol * |want| elementwise;
    NaN matches only NaN, an infinity only the same infinity; integers and
    bools must be equal.  Returns a dict: nbad, max_abs, max_rel (relative
    to max(|want|, atol), so near-zero references do not explode it),
    first (flat index of the first bad element, or None), and got/want
    there; for floating outputs also the RMS of the error and of the
    expected values and the largest expected magnitude, over the elements
    where the expected value is finite (rms_err, rms_want, absmax_want:
    the scale rule's figures, stark_rules.scale_bad; rms_err is infinite
    where the candidate is not finite there)."""
    n = want.numel()
    a, b = got.reshape(-1), want.reshape(-1)
    exact = not want.is_floating_point()
    ct = torch.float64 if want.dtype == torch.float64 else torch.float32
    st = {"nbad": 0, "max_abs": 0.0, "max_rel": 0.0, "first": None,
          "sq_err": 0.0, "sq_want": 0.0, "n_fin": 0, "absmax": 0.0}
    step = COMPARE_STEP_GPU if a.is_cuda else COMPARE_CHUNK
    # The fused kernel needs no temporaries: the whole tensor in one
    # launch, its figures taken where it is the usual case; else torch's
    # steps judge it.
    start = n if not exact and n > step and _fused_whole(a, b, atol, rtol, st) else 0
    for lo in range(start, n, step):
        hi = min(lo + step, n)
        if exact or not _pass_piece(a[lo:hi], b[lo:hi], ct, atol, rtol, st):
            _compare_pieces(a, b, lo, hi, exact, ct, atol, rtol, st)
    nbad, max_abs, max_rel, first = st["nbad"], st["max_abs"], st["max_rel"], st["first"]
    sq_err, sq_want, n_fin, absmax = st["sq_err"], st["sq_want"], st["n_fin"], st["absmax"]
    res = {"nbad": nbad, "max_abs": max_abs, "max_rel": max_rel, "first": first}
    if not exact:
        res["rms_err"] = math.sqrt(sq_err / n_fin) if n_fin else 0.0
        res["rms_want"] = math.sqrt(sq_want / n_fin) if n_fin else 0.0
        res["absmax_want"] = absmax
        res["n_fin"] = n_fin
    if first is not None:
        res["got"] = a[first].item()
        res["want"] = b[first].item()
    return res


# The usual case's figures in one pass on a GPU, where the reference's
# worker has them (stark_fused.enable sets it): fn(a, b, atol, rtol) ->
# _torch_figures's list, or None for a piece it does not take.
FUSED = None


def _torch_figures(ca, cb, ct, atol, rtol):
    """The figures _pass_piece needs of a piece, in one reading of the
    device: [largest |want|, 1.0 where every element is within tolerance
    (NaN differences fail) else 0.0, sum of squared errors and of squared
    expected values (float64), largest error, largest relative error]."""
    ca, cb = ca.to(ct), cb.to(ct)
    diff = (ca - cb).abs_()
    bmag = cb.abs()
    ok = diff <= bmag.mul(rtol).add_(atol)        # NaN differences fail
    figs = [bmag.max(), ok.all(), diff.to(torch.float64, copy=True).square_().sum(),
            cb.to(torch.float64, copy=True).square_().sum(), diff.max()]
    del ok
    figs.append(diff.div_(bmag.clamp_min_(max(atol, 1e-30))).max())
    return torch.stack([f.to(torch.float64) for f in figs]).tolist()


def _fused_whole(a, b, atol, rtol, st):
    """_pass_piece by the fused kernel alone (FUSED, where set) on all of a
    and b: True where it took them and they passed, their figures added
    to st; else False, st untouched."""
    if FUSED is None or not a.is_cuda:
        return False
    figs = FUSED(a, b, atol, rtol)
    return figs is not None and _add_figures(figs, b.numel(), st)


def _add_figures(figs, n, st):
    """_pass_piece's figures of n elements added to st where they pass
    (True), else st left alone (False)."""
    bmax, allok, e2, w2, dmax, rel = figs
    if allok != 1.0 or not math.isfinite(bmax):
        return False
    inf = float("inf")
    st["sq_err"] = inf if (e2 != e2 or st["sq_err"] == inf) else st["sq_err"] + e2
    st["sq_want"] += w2
    st["absmax"] = max(st["absmax"], bmax)
    st["n_fin"] += n
    if st["max_abs"] != inf:
        st["max_abs"] = max(st["max_abs"], dmax)
        st["max_rel"] = max(st["max_rel"], rel)
    return True


def _pass_piece(ca, cb, ct, atol, rtol, st):
    """compare_tensor on a piece where every element passes and the
    reference's are finite, the usual case, with one reading of the
    device: adds the piece's figures to st and returns True; else leaves
    st alone and returns False (_compare_pieces judges the piece)."""
    figs = FUSED(ca, cb, atol, rtol) if FUSED is not None and ca.is_cuda else None
    if figs is None:
        figs = _torch_figures(ca, cb, ct, atol, rtol)
    return _add_figures(figs, cb.numel(), st)


def _compare_pieces(a, b, lo, hi, exact, ct, atol, rtol, st):
    """compare_tensor on the elements [lo, hi) of a and b, COMPARE_CHUNK at
    a time, every case (bad elements, infinities, NaN, integers); adds the
    figures to st."""
    nbad, max_abs, max_rel, first = st["nbad"], st["max_abs"], st["max_rel"], st["first"]
    sq_err, sq_want, n_fin, absmax = st["sq_err"], st["sq_want"], st["n_fin"], st["absmax"]
    inf = float("inf")
    for off in range(lo, hi, COMPARE_CHUNK):
        ca, cb = a[off:min(off + COMPARE_CHUNK, hi)], b[off:min(off + COMPARE_CHUNK, hi)]
        if exact:
            bad = ca != cb
            anybad = bool(bad.any())
            if anybad:
                d = (ca.to(torch.float64) - cb.to(torch.float64)).abs_()
                max_abs = max(max_abs, float(d.max()))
                max_rel = max(max_rel, float(d.div_(cb.to(torch.float64).abs().clamp_min_(
                    max(atol, 1.0))).max()))
        else:
            ca, cb = ca.to(ct), cb.to(ct)
            diff = (ca - cb).abs_()
            bmag = cb.abs()
            ok = diff <= bmag.mul(rtol).add_(atol)        # NaN differences fail
            nonfinite = not math.isfinite(float(bmag.max()))
            if nonfinite:
                # Infinities need exact equality, NaN needs NaN.
                same = (ca == cb) | (ca.isnan() & cb.isnan())
                ok = torch.where(cb.isfinite(), ok, same)
            anybad = not bool(ok.all())
            bad = ~ok if anybad else None
            fw = cb.isfinite() if nonfinite else None
            dsel, wsel = (diff, cb) if fw is None else (diff[fw], cb[fw])
            if dsel.numel():
                e2 = float(dsel.to(torch.float64, copy=True).square_().sum())
                sq_err = inf if (e2 != e2 or sq_err == inf) else sq_err + e2
                sq_want += float(wsel.to(torch.float64, copy=True).square_().sum())
                absmax = max(absmax, float(wsel.abs().max()))
                n_fin += dsel.numel()
            if anybad or nonfinite:
                # Errors are measured where both are finite; a bad
                # non-finite element makes them infinite.
                fin = ca.isfinite() & cb.isfinite()
                if anybad and bool((bad & ~fin).any()):
                    max_abs = max_rel = inf
                zero = torch.zeros((), dtype=ct, device=diff.device)
                diff = torch.where(fin, diff, zero)
                bmag = torch.where(fin, bmag, zero + 1)
            if max_abs != inf:
                max_abs = max(max_abs, float(diff.max()))
                max_rel = max(max_rel, float(diff.div_(bmag.clamp_min_(max(atol, 1e-30))).max()))
        if anybad:
            if first is None:
                first = off + int(torch.argmax(bad.to(torch.uint8)))
            nbad += int(bad.sum())
    st.update(nbad=nbad, max_abs=max_abs, max_rel=max_rel, first=first, sq_err=sq_err,
              sq_want=sq_want, n_fin=n_fin, absmax=absmax)


def merge_results(acc, r, base):
    """Adds compare_tensor's result r for a piece of an output that starts
    at element `base` to acc, the output's result so far (None for the
    first piece): counts add up, maxima and the first bad element (with
    its values) carry over; the RMS figures of floating outputs (rms_err,
    rms_want over n_fin elements) combine, and a piece that failed the
    scale rule (scale_bad) marks the output.  Returns the merged result."""
    if acc is None:
        acc = {"nbad": 0, "max_abs": 0.0, "max_rel": 0.0, "first": None}
    acc["nbad"] += r["nbad"]
    acc["max_abs"] = max(acc["max_abs"], r["max_abs"])
    acc["max_rel"] = max(acc["max_rel"], r["max_rel"])
    if r.get("scale_bad"):
        acc["scale_bad"] = True
    if "rms_err" in r and "n_fin" in r:
        n0, n1 = acc.get("n_fin", 0), r["n_fin"]
        n = n0 + n1
        for k in ("rms_err", "rms_want"):
            a, b = acc.get(k, 0.0), r[k]
            acc[k] = (math.sqrt((a * a * n0 + b * b * n1) / n)
                      if n and math.isfinite(a) and math.isfinite(b) else
                      (float("inf") if n else 0.0))
        acc["n_fin"] = n
        acc["absmax_want"] = max(acc.get("absmax_want", 0.0), r.get("absmax_want", 0.0))
    if acc["first"] is None and r.get("first") is not None:
        acc["first"] = base + r["first"]
        acc["got"], acc["want"] = r.get("got"), r.get("want")
    return acc


# The float64 recheck (compare_exact): the reference's own error is trusted
# as a measure of the problem's rounding only while it stays below this
# fraction of the output's largest magnitude.  Beyond it the float64 run
# is not the same computation (a model that draws random numbers, keeps
# state or branches on its dtype), and the recheck says so instead.  In a
# coarse dtype the floor is RECHECK_MAX_EPS of its epsilons: a bfloat16
# attention's reference differed from its float64 run by 1.1% of its
# largest magnitude (1.45 epsilons, rounding alone), which the 1% floor
# took for another computation, and an honest candidate one element off
# went without its second opinion.  The cap holds on the problem's own
# inputs; on the variant distribution's scaled inputs, where the float64
# run stayed within it on the problem's own, an E beyond it is the
# problem's conditioning in its dtype (a bfloat16 softmax of logits scaled
# 64 times: rounding a logit moves its weight by tens of percent), and the
# recheck uses it (stark_worker_outputs._recheck).
RECHECK_MAX_REL = 1e-2
RECHECK_MAX_EPS = 8


def exact_error(want, exact, atol, capped=True):
    """The reference's own error against its float64 run over a whole
    output: E = max |want - exact| where want is finite (compare_exact),
    or {"error": why} where the float64 run cannot serve.  With `capped`
    false, an E beyond the rounding cap (RECHECK_MAX_REL) is returned too:
    for a float64 run known to be the same computation (it stayed within
    the cap on the problem's own inputs), such an E is the problem's
    conditioning at these inputs, not another computation."""
    w = want.reshape(-1)
    x = exact.reshape(-1).to(device=w.device, dtype=torch.float64)
    if x.numel() != w.numel():
        return {"error": "the float64 run made %d elements, not %d" % (x.numel(), w.numel())}
    if x.numel() == 0:
        return {"error": "the output is empty"}
    err, scale = 0.0, 0.0
    for off in range(0, x.numel(), COMPARE_CHUNK):
        wc, xc = w[off:off + COMPARE_CHUNK], x[off:off + COMPARE_CHUNK]
        fin = wc.isfinite()
        if not bool(xc[fin].isfinite().all()):
            return {"error": "the float64 run made a value that is not finite where the "
                             "reference's is"}
        err = max(err, float((wc.to(torch.float64) - xc).abs_().masked_fill_(~fin, 0.0).max()))
        scale = max(scale, float(xc.abs().masked_fill_(~fin, 0.0).max()))
    rel = RECHECK_MAX_REL
    if w.dtype.is_floating_point:
        rel = max(rel, RECHECK_MAX_EPS * torch.finfo(w.dtype).eps)
    if not math.isfinite(err) or (capped and err > rel * max(scale, atol)):
        return {"error": "the reference differs from its float64 run by %.3g (largest "
                         "magnitude %.3g): not rounding alone" % (err, scale)}
    return err


def compare_exact(got, want, exact, atol, rtol, slack, err=None):
    """The second opinion on a floating output that failed compare_tensor:
    `exact` is the reference model run again in float64 on the same inputs.
    The reference's own error is E = max |want - exact| over the elements
    where want is finite; the candidate passes where
    |got - exact| <= atol + slack * E + rtol * |exact|, so it may be off
    the exact result by `slack` times what the reference itself is off
    anywhere in this output.  Where want is not finite (an overflow the
    float64 run does not have), want stays the expected value.  Returns
    compare_tensor's dict plus ref_err (E), or {"error": why} when the
    float64 run cannot serve (E not finite, or beyond RECHECK_MAX_REL of
    the output's magnitude).  With err (exact_error's, over the whole
    output), got, want and exact may be a piece of the output: the
    comparison then uses the whole output's E."""
    if err is None:
        err = exact_error(want, exact, atol)
        if isinstance(err, dict):
            return err
    w = want.reshape(-1)
    x = exact.reshape(-1).to(device=w.device, dtype=torch.float64)
    if x.numel() != w.numel():
        return {"error": "the float64 run made %d elements, not %d" % (x.numel(), w.numel())}
    x = torch.where(w.isfinite(), x, w.to(torch.float64))
    res = compare_tensor(got, x.view(want.shape), atol + slack * err, rtol)
    res["ref_err"] = err
    return res
