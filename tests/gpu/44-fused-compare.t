#!/bin/bash
# The fused comparison (STARK_COMPARE_KERNEL=fused, evaluator/stark_fused.py):
# its kernels compiled on this GPU pass their self-test; on pieces of every
# floating dtype and of sizes around a block's and a grid's share, with
# errors within and beyond tolerance, NaN and infinities at random places,
# they decide as torch's figures do and agree with them (maxima equal, sums
# within 1e-9); end to end, 6 GiB outputs are judged correct at 1.00x
# within 2% through them, one wrong element at their end or one NaN in
# their middle incorrect, and a thread writing over the device window after
# the call (32 MiB outputs: torch compares) never correct.  About 4 minutes
# on an H200.  Skips where no CUDA device is usable.
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. tests/gpu/judge.sh
echo "1..6"

got=$("$PY" - <<'PY'
import math, random, sys
sys.path.insert(0, "evaluator")
import torch
import stark_fused as F
import stark_tensors as T

dev = torch.device("cuda", 0)
note = F.enable(dev)
print("good" if note.startswith("fused") else "not enabled: %s" % note)
print("# %s" % note)
fused = F.Fused(dev)
rnd = random.Random(20261129)
bad, cases, passed = [], 0, 0
for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
    ct = torch.float64 if dt == torch.float64 else torch.float32
    for n in (1, 31, 255, 256, 257, 8191, 65537, fused.max_blocks * F.BLOCK + 5, (1 << 24) + 3):
        for k in range(12):
            scale = 10 ** rnd.uniform(-3, 3)
            want = (torch.randn(n, device=dev, dtype=torch.float64) * scale)
            atol, rtol = rnd.choice([(1e-4, 1e-4), (1e-2, 1e-2), (1e-5, 1e-3), (0.0, 1e-4)])
            mult = rnd.choice([0.0, 0.1, 0.5, 0.9, 1.1, 3.0])
            got = want + torch.randn_like(want) * (atol + rtol * want.abs()) * mult
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
            x = fused.figures(g, w, atol, rtol)
            y = T._torch_figures(g, w, ct, atol, rtol)
            cases += 1
            passed += F._passes(y)
            if x is None or not F._agree(x, y):
                bad.append("%s n=%d %s tol=%s x%s: kernel %s torch %s"
                           % (dt, n, what, (atol, rtol), mult, x, y))
print("good" if not bad and 0 < passed < cases else "%d of %d disagree: %s" % (len(bad), cases, bad[:3]))
print("# %d pieces, %d passing by torch's figures, %d disagreements" % (cases, passed, len(bad)))
PY
)
l1=$(sed -n 1p <<<"$got")
l2=$(grep -v '^#' <<<"$got" | sed -n 2p)
if [ "$l1" = good ]; then ok "the fused kernels compile on this GPU and pass their self-test"; else notok "the fused kernels compile and pass their self-test" "$l1"; fi
if [ "$l2" = good ]; then ok "they decide as torch's figures do on random pieces of every floating dtype"; else notok "they decide as torch's figures do" "$l2"; fi
grep '^#' <<<"$got"

export STARK_COMPARE_KERNEL=fused
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
