#!/bin/bash
# Delivered inputs on a GPU (STARK_INPUT_DELIVERY=on; evaluator/stark_worker_ipc.py):
# the rows of tests/integrity/EXPECT.delivery judged on the device -- the
# candidate that computes its outputs in its worker's GEN no longer reads
# faster than the reference (2,112x on KernelBench's square matmul without
# delivery), inputs changed in place are caught by the reference's worker,
# honest candidates pass -- and each result says its inputs were delivered
# through CUDA IPC.  About 3 minutes on an H100.  Skips where no CUDA device
# is usable.
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. tests/gpu/judge.sh
STARK_INPUT_DELIVERY=on STARK_INTEGRITY_ONLY='sqmatmul|affine|inplace' \
	"$PY" tests/lib/check_expect.py "$BUILD/stark" tests/integrity/EXPECT.delivery \
	--device cuda --trials 3 | sed 's/^1\.\./# delivery rows: 1../' > "$TMP/rows"
cat "$TMP/rows"
good=$(grep -c '^ok' "$TMP/rows"); bad=$(grep -c '^not ok' "$TMP/rows")
echo "1..2"
if [ "$bad" -eq 0 ] && [ "$good" -ge 6 ]; then
	ok "the delivery rows on the GPU ($good of them)"
else
	notok "the delivery rows on the GPU ($good ok, $bad not ok)"
fi
STARK_INPUT_DELIVERY=on judge "an honest copy's inputs delivered through CUDA IPC, 1.00x within 2%" correct \
	'e.get("inputs_delivered", "").split()[0].isdigit() and int(e["inputs_delivered"].split()[0]) > 0 and "CUDA IPC" in e["inputs_delivered"] and abs(d["speedup"] - 1) <= 0.02' \
	tests/gpu/memory/launch/problem.py tests/gpu/memory/launch/honest.py
