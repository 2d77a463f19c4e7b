#!/usr/bin/env python3
"""precision_rule.py -- the precision rule (stark_rules.precision_flagged)
on emulated matmul arithmetic across K, on the precision probe's inputs
(uniform values centred to zero mean), as TAP.

Every float32 rounding is emulated in float64 (scripts/precision-study's
functions), so each order is exactly the one named whatever the machine's
BLAS does.  The figures are stark_rules' own (precision_stats,
precision_ratios); the float32 reference is torch's CPU matmul.  Checks:

  - honest float32 orders (sequential FMA, tiled, split-K, pairwise, 3xTF32
    with rounding accumulation, 3xTF32 whose tensor-core accumulator is
    promoted every k-tile) are never flagged, and their error over the
    input-rounding noise stays under 0.5 sqrt(K) (the sqrt(K) law);
  - downcasts (TF32, float16, bfloat16 operands; TF32 on a truncating MMA
    accumulator; float16 accumulation) are flagged at every K, and operand
    downcasts' ratio barely moves with K (a property of the format);
  - 3xTF32 carried in one truncating MMA accumulator across the whole sum
    is flagged from K = 4096 on, its ratio grows about linearly in K, and
    at K = 65536 it is further from the exact result than TF32 operands on
    the same accumulator: what no limit could separate.

    tests/helpers/precision_rule.py [--quick]     (about 30 s; --quick: 10)
"""
import importlib.machinery
import importlib.util
import math
import os
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "evaluator"))
import stark_rules as R  # noqa: E402


def load_study():
    path = os.path.join(ROOT, "scripts", "precision-study")
    loader = importlib.machinery.SourceFileLoader("precision_study", path)
    spec = importlib.util.spec_from_loader("precision_study", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


S = load_study()
D = torch.float64
HONEST = ["seq_fma", "blocked256", "split_k64", "pairwise", "3xtf32", "3xtf32_promoted"]
OPERANDS = ["tf32_rn", "fp16_ops", "bf16_ops"]
DOWNCAST = OPERANDS + ["tf32_mma_rz", "fp16_acc"]
LOSSY = ["3xtf32_mma_rz"]

tap = []


def ok(cond, what):
    tap.append(("ok" if cond else "not ok", what))


def figures(K, rows, g):
    """{candidate: (r_ref, r_in)} at K on centred uniform inputs."""
    a = torch.rand(rows, K, generator=g)
    b = torch.rand(rows, K, generator=g)
    (a, b), _ = R.centre_inputs([a, b])
    a, b = a.to(D), b.to(D)
    exact = (a * b).sum(-1)
    jit = (R.jitter_(a.clone(), g) * R.jitter_(b.clone(), g)).sum(-1)
    ref = torch.bmm(a.float().unsqueeze(1), b.float().unsqueeze(2)).reshape(-1)
    fns = dict(S.HONEST, **S.DOWNCAST, **S.ACCUMULATOR)
    out = {}
    for name in HONEST + DOWNCAST + LOSSY:
        got = fns[name](a, b).float()
        out[name] = R.precision_ratios(R.precision_stats(got, ref, exact, jit))
    return out


def main():
    quick = "--quick" in sys.argv[1:]
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(5)
    sizes = [(1024, 256), (4096, 128), (16384, 64)] + ([] if quick else [(65536, 32)])
    seen = {}
    for K, rows in sizes:
        f = figures(K, rows, g)
        seen[K] = f
        print("# K=%d: %s" % (K, ", ".join("%s r_in %.3g r_ref %.3g" % (n, v[1], v[0])
                                          for n, v in f.items())), flush=True)
        for n in HONEST:
            r_ref, r_in = f[n]
            ok(not R.precision_flagged(r_ref, r_in),
               "K=%d honest %s not flagged (r_in %.3g, r_ref %.3g)" % (K, n, r_in, r_ref))
            ok(r_in < 0.5 * math.sqrt(K),
               "K=%d honest %s within the sqrt(K) law (r_in %.3g < %.3g)"
               % (K, n, r_in, 0.5 * math.sqrt(K)))
        for n in DOWNCAST:
            r_ref, r_in = f[n]
            ok(R.precision_flagged(r_ref, r_in),
               "K=%d downcast %s flagged (r_in %.3g, r_ref %.3g)" % (K, n, r_in, r_ref))
        if K >= 4096:
            r_ref, r_in = f["3xtf32_mma_rz"]
            ok(R.precision_flagged(r_ref, r_in),
               "K=%d 3xTF32 on one truncating accumulator flagged (r_in %.3g, r_ref %.3g)"
               % (K, r_in, r_ref))
    ks = sorted(seen)
    for n in OPERANDS:
        rs = [seen[K][n][1] for K in ks]
        ok(max(rs) < 2 * min(rs) and min(rs) > 16 * R.PRECISION_IN_MAX / 2,
           "operand downcast %s: r_in a property of the format, %s across K=%s"
           % (n, "/".join("%.3g" % r for r in rs), "/".join(map(str, ks))))
    lo, hi = ks[1], ks[-1]
    grow = seen[hi]["3xtf32_mma_rz"][1] / seen[lo]["3xtf32_mma_rz"][1]
    ok(grow > 0.5 * hi / lo,
       "truncating accumulator: r_in grows about as K (x%.3g from K=%d to %d)" % (grow, lo, hi))
    if not quick:
        a, b = seen[hi]["3xtf32_mma_rz"][1], seen[hi]["tf32_mma_rz"][1]
        ok(a > b, "K=%d: 3xTF32 on one truncating accumulator (r_in %.3g) further than TF32 "
           "operands on the same accumulator (%.3g)" % (hi, a, b))
    print("1..%d" % len(tap))
    for i, (res, what) in enumerate(tap, 1):
        print("%s %d - %s" % (res, i, what))
    return 0 if all(r == "ok" for r, _ in tap) else 1


if __name__ == "__main__":
    sys.exit(main())
