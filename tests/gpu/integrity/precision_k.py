#!/usr/bin/env python3
"""precision_k.py -- the precision rule on the GPU's own matmul arithmetic
across K, outside stark (TAP; tests/gpu/25-precision-k.t runs it).

For K = 1024, 4096, 16384 and 65536 (C = A @ B, M = N = 512, 256 at the
largest K; A and B uniform and centred to zero mean, the precision probe's
inputs), each candidate's error against the float64 product, over the
noise rounding the inputs to float32 puts there and over the float32
reference's (cuBLAS, TF32 off) own error, judged by stark_rules'
precision_flagged, exactly as the referee judges:

  honest, never flagged: sqmatmul/h01_tiled (fp32 SGEMM),
    sqmatmul/h03_3xtf32_wmma (3xTF32, MMA accumulator promoted every k-tile);
  flagged at every K: cuBLAS with TF32 on, sqmatmul/r12_tf32_wmma;
  flagged from K = 4096: sqmatmul/r12_3xtf32_mma_accumulate (one truncating
    MMA accumulator over the whole K), whose ratio grows about as K.

    python3 tests/gpu/integrity/precision_k.py [--quick]   (--quick: K <= 4096)

Skips (TAP) where no CUDA device is usable.
"""
import math
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "evaluator"))

import torch  # noqa: E402

HONEST = ["sqmatmul/h01_tiled.py", "sqmatmul/h03_3xtf32_wmma.py"]
DOWNCAST = ["cublas_tf32", "sqmatmul/r12_tf32_wmma.py"]
LOSSY = ["sqmatmul/r12_3xtf32_mma_accumulate.py"]


def load(rel):
    path = os.path.join(HERE, rel)
    mod = types.ModuleType("cand_" + os.path.basename(rel)[:-3])
    mod.__file__ = path
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), mod.__dict__)
    return mod.ModelNew()


def cublas_tf32(a, b):
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return a @ b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def main():
    if not torch.cuda.is_available():
        print("1..0 # skip no usable CUDA device (torch.cuda.is_available() is false)")
        return 0
    import stark_rules as R
    torch.backends.cuda.matmul.allow_tf32 = False
    quick = "--quick" in sys.argv[1:]
    dev = torch.device("cuda")
    models = {n: load(n) for n in HONEST + DOWNCAST[1:] + LOSSY}
    models["cublas_tf32"] = cublas_tf32
    sizes = [(1024, 512), (4096, 512)] + ([] if quick else [(16384, 512), (65536, 256)])
    g = torch.Generator(device=dev).manual_seed(3)
    tap, seen = [], {}

    def ok(cond, what):
        tap.append(("ok" if cond else "not ok", what))

    for K, mn in sizes:
        a = torch.rand(mn, K, device=dev, generator=g)
        b = torch.rand(K, mn, device=dev, generator=g)
        (a, b), _ = R.centre_inputs([a, b])
        exact = a.double() @ b.double()
        jit = R.jitter_(a.double(), g) @ R.jitter_(b.double(), g)
        ref = a @ b
        seen[K] = {}
        for name, m in models.items():
            with torch.no_grad():
                got = m(a, b)
            torch.cuda.synchronize()
            seen[K][name] = R.precision_ratios(R.precision_stats(got, ref, exact, jit))
        print("# K=%d: %s" % (K, ", ".join("%s r_in %.3g r_ref %.3g" % (
            os.path.basename(n), v[1], v[0]) for n, v in seen[K].items())), flush=True)
        for n in HONEST:
            r_ref, r_in = seen[K][n]
            ok(not R.precision_flagged(r_ref, r_in),
               "K=%d honest %s not flagged (r_in %.3g, r_ref %.3g)" % (K, n, r_in, r_ref))
        for n in DOWNCAST:
            r_ref, r_in = seen[K][n]
            ok(R.precision_flagged(r_ref, r_in),
               "K=%d downcast %s flagged (r_in %.3g, r_ref %.3g)" % (K, n, r_in, r_ref))
        if K >= 4096:
            r_ref, r_in = seen[K][LOSSY[0]]
            ok(R.precision_flagged(r_ref, r_in),
               "K=%d %s flagged (r_in %.3g, r_ref %.3g)" % (K, LOSSY[0], r_in, r_ref))
    ks = sorted(seen)
    lo, hi = ks[0], ks[-1]
    grow = seen[hi][LOSSY[0]][1] / seen[lo][LOSSY[0]][1]
    ok(grow > 0.5 * hi / lo, "%s: r_in grows about as K (x%.3g from K=%d to %d)"
       % (LOSSY[0], grow, lo, hi))
    h = seen[hi]["sqmatmul/h03_3xtf32_wmma.py"][1]
    ok(h < 0.5 * math.sqrt(hi), "h03 within the honest sqrt(K) law at K=%d (r_in %.3g)" % (hi, h))
    print("1..%d" % len(tap))
    for i, (res, what) in enumerate(tap, 1):
        print("%s %d - %s" % (res, i, what))
    return 0 if all(r == "ok" for r, _ in tap) else 1


if __name__ == "__main__":
    sys.exit(main())
