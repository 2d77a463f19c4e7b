#!/bin/bash
# The fused comparison (the default on GPUs, evaluator/stark_fused.py):
# its kernels compiled on this GPU pass their self-test; on pieces of every
# floating dtype and of sizes around a block's and a grid's share, with
# errors within and beyond tolerance, NaN and infinities at random places,
# they decide as torch's figures do and agree with them (maxima equal, sums
# within 1e-9), and KernelBench's kernels as its torch.allclose does; end to end, 6 GiB outputs are judged correct at 1.00x
# within 2% through them, one wrong element at their end or one NaN in
# their middle incorrect, and a thread writing over the device window after
# the call (32 MiB outputs: torch compares) never correct.  About 6 minutes
# on an H200.  Skips where no CUDA device is usable.
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. tests/gpu/judge.sh
echo "1..7"

got=$("$PY" - <<'PY'
import sys
sys.path.insert(0, "evaluator")
sys.path.insert(1, "tests/gpu")
import torch
import fused_cases
import stark_fused as F

dev = torch.device("cuda", 0)
note = F.enable(dev)
print("good" if note.startswith("fused") else "not enabled: %s" % note)
print("# %s" % note)
fused = F.Fused(dev)
sizes = (1, 31, 255, 256, 257, 8191, 65537, fused.max_blocks * F.BLOCK + 5, (1 << 24) + 3)
cases = 400
bad, passed = fused_cases.run(fused, cases, sizes)
print("good" if not bad and 0 < passed < cases else "%d of %d disagree: %s" % (len(bad), cases, bad[:3]))
print("# %d pieces, %d passing by torch's figures, %d disagreements" % (cases, passed, len(bad)))
bad, usual = fused_cases.run_kb(fused, cases, sizes)
print("good" if not bad and 0 < usual < cases else "%d of %d disagree: %s" % (len(bad), cases, bad[:3]))
print("# KernelBench's: %d pieces, %d in its usual case, %d disagreements" % (cases, usual, len(bad)))
PY
)
l1=$(sed -n 1p <<<"$got")
l2=$(grep -v '^#' <<<"$got" | sed -n 2p)
l3=$(grep -v '^#' <<<"$got" | sed -n 3p)
if [ "$l1" = good ]; then ok "the fused kernels compile on this GPU and pass their self-test"; else notok "the fused kernels compile and pass their self-test" "$l1"; fi
if [ "$l2" = good ]; then ok "they decide as torch's figures do on random pieces of every floating dtype"; else notok "they decide as torch's figures do" "$l2"; fi
if [ "$l3" = good ]; then ok "KernelBench's kernels answer as its torch.allclose does on random pieces"; else notok "KernelBench's kernels answer as its torch.allclose does" "$l3"; fi
grep '^#' <<<"$got"

unset STARK_COMPARE_KERNEL      # the default: fused
M=tests/gpu/memory
A=tests/gpu/integrity/affine
judge "6 GiB outputs compared by the fused kernel: correct at 1.00x within 2%" correct \
	'e.get("compare_kernel", "").startswith("fused") and abs(d["speedup"] - 1) <= 0.02' \
	$M/big/problem.py $M/big/honest.py
judge "one element wrong at the end of 6 GiB, fused kernel: incorrect" incorrect \
	'e.get("compare_kernel", "").startswith("fused")' \
	$M/big/problem.py $M/big/wrong_tail.py
judge "one NaN halfway through 6 GiB, fused kernel: incorrect" incorrect \
	'e.get("compare_kernel", "").startswith("fused")' \
	$M/big/problem.py $M/big/nan_middle.py
judge "a thread writing over the device window after the call, fused kernel on: never correct" \
	'incorrect|rejected' 'True' \
	$A/problem.py $A/r10_race_device_window.py
