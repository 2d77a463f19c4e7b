"""Random pieces for the fused comparison's kernels (evaluator/stark_fused.py),
shared by tests/gpu/44-fused-compare.t (on a GPU) and tests/gpu/emu/fused_check.py
(the emulator): pieces of every floating dtype at sizes around a block's
and the grid's share, errors within, at and beyond tolerance, NaN and
infinities at random places, each judged by the kernels and by torch's
figures (stark_tensors._torch_figures), which must decide alike and agree
(stark_fused._agree); and the same for KernelBench's comparison
(run_kb: kb_figures against stark_rules.kb_allclose)."""
import random

import torch

import stark_fused as F
import stark_rules as R
import stark_tensors as T

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
TOLS = [(1e-4, 1e-4), (1e-2, 1e-2), (1e-5, 1e-3), (0.0, 1e-4)]
MULTS = [0.0, 0.1, 0.5, 0.9, 0.999, 1.001, 1.1, 3.0]
WHAT = ["none"] * 6 + ["nan", "inf", "ninf", "nan_ref", "inf_ref", "one_off"]


def _piece(rnd, k, seed, dtypes, n, kb=False):
    """A random (got, want, atol, rtol, label) pair of pieces on the CPU."""
    dt = rnd.choice(dtypes)
    scale = 10 ** rnd.uniform(-3, 3)
    gen = torch.Generator().manual_seed(seed + k)
    want = torch.randn(n, generator=gen, dtype=torch.float64) * scale
    atol, rtol = rnd.choice(TOLS)
    mult = rnd.choice(MULTS)
    got = want + torch.randn(n, generator=gen, dtype=torch.float64) * (atol + rtol * want.abs()) * mult
    w, g = want.to(dt), got.to(dt)
    what, i = rnd.choice(WHAT), rnd.randrange(n)
    if what == "nan":
        g[i] = float("nan")
    elif what == "inf":
        g[i] = float("inf")
    elif what == "ninf":
        g[i] = float("-inf")
    elif what == "nan_ref":
        w[i] = float("nan")
    elif what == "inf_ref":
        w[i] = float("inf")
        g[i] = float("inf")
    elif what == "one_off":
        g[i] = w[i].to(torch.float64) + 10 * (atol + rtol * abs(float(w[i])) + 1e-3)
    return g, w, atol, rtol, "%s n=%d %s tol=%s x%s" % (dt, n, what, (atol, rtol), mult)


def run_kb(fused, n_cases, sizes, seed=20261130, each=None):
    """As run, for KernelBench's comparison: kb_figures against
    stark_rules.kb_allclose (stark_fused._kb_agree), float32 and float64.
    Returns (disagreements, pieces in KernelBench's usual case)."""
    rnd = random.Random(seed)
    bad, usual = [], 0
    for k in range(n_cases):
        g, w, atol, rtol, label = _piece(rnd, k, seed, (torch.float32, torch.float64),
                                         rnd.choice(sizes))
        g, w = g.to(fused.device), w.to(fused.device)
        if each is not None:
            each(k)
        x = fused.kb_figures(g, w, atol, rtol)
        y = F.kb_torch(g, w, atol, rtol)
        usual += F._kb_usual(y)
        if not F._kb_agree(x, y):
            bad.append("%s: kernel %s, torch %s" % (label, x, y))
    return bad, usual


def run(fused, n_cases, sizes, seed=20261129, each=None):
    """n_cases random pieces through fused (a stark_fused.Fused, or one
    standing in for it), sizes drawn from `sizes`.  each(k) is called
    before piece k (the emulator sets its schedule there).  Returns
    (disagreements as text, pieces passing by torch's figures)."""
    rnd = random.Random(seed)
    bad, passed = [], 0
    for k in range(n_cases):
        g, w, atol, rtol, label = _piece(rnd, k, seed, DTYPES, rnd.choice(sizes))
        ct = torch.float64 if w.dtype == torch.float64 else torch.float32
        w, g = w.to(fused.device), g.to(fused.device)
        if each is not None:
            each(k)
        x = fused.figures(g, w, atol, rtol)
        y = T._torch_figures(g, w, ct, atol, rtol)
        passed += F._passes(y)
        if x is None or not F._agree(x, y):
            bad.append("%s: kernel %s, torch %s" % (label, x, y))
    return bad, passed
