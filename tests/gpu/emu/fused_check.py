"""The fused comparison's kernels (evaluator/stark_fused.py) on the CPU:
compiled by NVRTC for sm_90 and run by the kernel emulator (this folder),
under its four thread schedules, against torch's figures
(stark_tensors._torch_figures): the evaluator's own self-test, then
random pieces of every floating dtype at sizes around a block's and the
grid's share, with errors within and beyond tolerance, NaN and
infinities at random places.  The same check as tests/gpu/44-fused-compare.t
makes on a GPU, for a machine without one.

Usage: python3 tests/gpu/emu/fused_check.py [CASES]   (exit 1 on a disagreement)
Needs torch, NVRTC (EMU_NVRTC=0 skips it) and g++.
"""
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(ROOT, "evaluator"))

import torch  # noqa: E402

import stark_cuda as emu  # noqa: E402  (the emulating stand-in)
import stark_fused as F  # noqa: E402
import stark_tensors as T  # noqa: E402

BLOCKS = 3                    # the emulated grid: few blocks, so pieces loop over it


def emulated():
    f = F.Fused.__new__(F.Fused)
    f.device = torch.device("cpu")
    f.mod = emu.CudaModule(F.SOURCE, options=("--fmad=false",), name="stark_compare.cu")
    f.max_blocks = BLOCKS
    return f


def random_cases(f, n_cases, rnd):
    bad, passed = [], 0
    dts = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
    sizes = (1, 31, 255, 256, 257, BLOCKS * F.BLOCK - 1, BLOCKS * F.BLOCK + 5, 5003)
    for k in range(n_cases):
        dt, n = rnd.choice(dts), rnd.choice(sizes)
        ct = torch.float64 if dt == torch.float64 else torch.float32
        scale = 10 ** rnd.uniform(-3, 3)
        g0 = torch.Generator().manual_seed(k)
        want = torch.randn(n, generator=g0, dtype=torch.float64) * scale
        atol, rtol = rnd.choice([(1e-4, 1e-4), (1e-2, 1e-2), (1e-5, 1e-3), (0.0, 1e-4)])
        mult = rnd.choice([0.0, 0.1, 0.5, 0.9, 0.999, 1.001, 1.1, 3.0])
        got = want + torch.randn(n, generator=g0, dtype=torch.float64) * (atol + rtol * want.abs()) * mult
        w, g = want.to(dt), got.to(dt)
        what = rnd.choice(["none"] * 6 + ["nan", "inf", "ninf", "nan_ref", "inf_ref", "one_off"])
        i = rnd.randrange(n)
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
        emu.set_order(k % 4)
        x = f.figures(g, w, atol, rtol)
        y = T._torch_figures(g, w, ct, atol, rtol)
        passed += F._passes(y)
        if x is None or not F._agree(x, y):
            bad.append("%s n=%d %s tol=%s x%s: kernel %s, torch %s" % (dt, n, what, (atol, rtol), mult, x, y))
    return bad, passed


def main():
    n_cases = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    f = emulated()
    why = F.self_test(f)
    print("fused_check: the evaluator's self-test: %s" % (why or "passed"))
    bad, passed = random_cases(f, n_cases, random.Random(20261129))
    print("fused_check: %d random pieces, %d passing by torch's figures, %d disagreements"
          % (n_cases, passed, len(bad)))
    for b in bad[:10]:
        print("  " + b)
    return 1 if why or bad or not 0 < passed < n_cases else 0


if __name__ == "__main__":
    sys.exit(main())
