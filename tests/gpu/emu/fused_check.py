"""The fused comparison's kernels (evaluator/stark_fused.py) on the CPU:
compiled by NVRTC for sm_90 and run by the kernel emulator (this folder),
under its four thread schedules, against torch's figures
(stark_tensors._torch_figures): the evaluator's own self-test, then
the random pieces of tests/gpu/fused_cases.py.  The same check as tests/gpu/44-fused-compare.t
makes on a GPU, for a machine without one.

Usage: python3 tests/gpu/emu/fused_check.py [CASES]   (exit 1 on a disagreement)
Needs torch, NVRTC (EMU_NVRTC=0 skips it) and g++.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(ROOT, "evaluator"))
sys.path.insert(2, os.path.dirname(HERE))

import torch  # noqa: E402

import fused_cases  # noqa: E402
import stark_cuda as emu  # noqa: E402  (the emulating stand-in)
import stark_fused as F  # noqa: E402

BLOCKS = 3                    # the emulated grid: few blocks, so pieces loop over it


def emulated():
    f = F.Fused.__new__(F.Fused)
    f.device = torch.device("cpu")
    f.mod = emu.CudaModule(F.SOURCE, options=("--fmad=false",), name="stark_compare.cu")
    f.max_blocks = BLOCKS
    return f


def whole_path(f, n_cases=40):
    """stark_tensors.compare_tensor taking a whole tensor through the
    kernel (its _fused_whole, here on the emulator) against its torch
    steps alone: the usual case, an element out of tolerance at the end,
    NaN in the middle, equal infinities.  Returns how many differ."""
    import stark_tensors as T

    def whole(a, b, atol, rtol, st):
        figs = f.figures(a, b, atol, rtol)
        return figs is not None and T._add_figures(figs, b.numel(), st)

    saved = T.COMPARE_CHUNK, T._fused_whole
    T.COMPARE_CHUNK = 1000          # so that 5003 elements are several steps
    gen = torch.Generator().manual_seed(3)
    differ = 0
    try:
        for k in range(n_cases):
            want = torch.randn(5003, generator=gen)
            got = want + torch.randn(5003, generator=gen) * 1e-6
            if k % 4 == 1:
                got[-1] += 1.0
            elif k % 4 == 2:
                got[2500] = float("nan")
            elif k % 4 == 3:
                want[10] = got[10] = float("inf")
            T._fused_whole = saved[1]
            ref = T.compare_tensor(got, want, 1e-4, 1e-4)
            T._fused_whole = whole
            res = T.compare_tensor(got, want, 1e-4, 1e-4)
            same = all(res[x] == ref[x] for x in ("nbad", "first", "max_abs", "max_rel",
                                                   "absmax_want", "n_fin"))
            for x in ("rms_err", "rms_want"):
                same = same and (res[x] == ref[x] or
                                 abs(res[x] - ref[x]) <= 1e-9 * max(abs(ref[x]), 1e-300))
            differ += not same
    finally:
        T.COMPARE_CHUNK, T._fused_whole = saved
    return differ


def main():
    n_cases = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    f = emulated()
    why = F.self_test(f) or F.kb_self_test(f)
    print("fused_check: the evaluator's self-tests: %s" % (why or "passed"))
    sizes = (1, 31, 255, 256, 257, BLOCKS * F.BLOCK - 1, BLOCKS * F.BLOCK + 5, 5003)
    bad, passed = fused_cases.run(f, n_cases, sizes, each=lambda k: emu.set_order(k % 4))
    print("fused_check: %d random pieces, %d passing by torch's figures, %d disagreements"
          % (n_cases, passed, len(bad)))
    kb_bad, usual = fused_cases.run_kb(f, n_cases, sizes, each=lambda k: emu.set_order(k % 4))
    print("fused_check: %d random pieces for KernelBench's comparison, %d in its usual case, "
          "%d disagreements" % (n_cases, usual, len(kb_bad)))
    differ = whole_path(f)
    print("fused_check: compare_tensor, whole tensors through the kernel: %d of 40 differ "
          "from torch's steps" % differ)
    for b in (bad + kb_bad)[:10]:
        print("  " + b)
    return 1 if why or bad or kb_bad or differ or not 0 < passed < n_cases or not 0 < usual < n_cases else 0


if __name__ == "__main__":
    sys.exit(main())
