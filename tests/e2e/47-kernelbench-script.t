#!/bin/bash
# scripts/kernelbench on a KernelBench-shaped tree of our own small problems
# (KernelBench itself is never shipped): no checkout is a clean skip; the
# honest copies are judged correct, dealt out to two "devices" (cpu,cpu:
# two batches at once, as cuda:0,cuda:1 are on a GPU host) with every
# problem judged once and its result in the merged results.jsonl in the
# problems' order; --max-seconds reports what it cut off as unjudged and
# exits 1, and --resume judges what was cut off, then only what ended
# `error`, keeping the other verdicts, and the honest copies within 2%
# are counted and the others named; a bare "cuda" in a list is
# refused, and "cuda:0,1" (the usage's form) names cuda:0 and cuda:1; the
# summary says where the startup's and the comparisons' time went, and
# with STARK_PY_PROFILE=1 where each process's wall time went;
# launch matching's outcomes are summed by level;
# scripts/kernelbench-plan picks the launch-bound model for launch-mode
# matching and not a relu on 64 MiB, and --only picks by name; kb-reftime
# says where KernelBench's timing code is missing; the published baseline's
# ratio is printed for an fp32 reference and not for a bf16 one.  About
# 60 s.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
STARK=$BUILD/stark
PY=$(scripts/find-python 2>/dev/null) || { echo "1..0 # skip no python with torch"; exit 0; }
export STARK_CACHE=${STARK_TEST_CACHE:-$PWD/tests/tmp/cache}
mkdir -p "$STARK_CACHE"
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-e2e-kb.XXXXXX")
trap 'rm -rf "$T"' EXIT

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
echo "1..16"

KB=$T/kb/KernelBench/level1
mkdir -p "$KB"
cp tests/problems/elementwise_chain/problem.py "$KB/1_Chain.py"
cp tests/problems/layernorm/problem.py "$KB/2_LayerNorm.py"
cp tests/problems/cumsum_rows/problem.py "$KB/10_Cumsum.py"

out=$("$PY" scripts/kernelbench "$T/nothing-here" --stark "$STARK" 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && [[ "$out" == *"no KernelBench checkout given"* ]]; then
	ok "no checkout: says so, exits 0"
else
	not_ok "no checkout: exit $rc" "$out"
fi

out=$("$PY" scripts/kernelbench "$T/kb" --level 1 --device cpu,cpu --stark "$STARK" \
	--out "$T/o" -- --no-timing --trials 2 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && [[ "$out" == *"level 1: 3 problems: correct 3"* ]] &&
	[[ "$out" == *"level 1, KernelBench's verdict: correct 3"* ]]; then
	ok "two devices: 3 of 3 correct, by both verdicts"
else
	not_ok "two devices: exit $rc" "$(printf '%s\n' "$out" | tail -n 15)"
fi
# Where the time went: the startup's parts (the reference worker's own
# steps among them), the pairs' parts and the comparisons' chunks, from
# the results' env.
if [[ "$out" == *"== where the time went by level"* ]] &&
	grep -Eq '^level 1, startup: before [0-9]+, .*plan [0-9]+, ref_jail [0-9]+' <<<"$out" &&
	grep -Eq '^level 1, the pairs: gen [0-9]+, call [0-9]+, .*compare [0-9]+' <<<"$out" &&
	grep -Eq '^level 1, comparisons: chunks [1-9][0-9]*, copy [0-9]+, judge [0-9]+' <<<"$out"; then
	ok "where the time went: the startup's and the pairs' parts, the comparisons' chunks by level"
else
	not_ok "where the time went" "$(printf '%s\n' "$out" | grep -A4 'where the time')"
fi

# Dealt out in turn: batch 0 has problems 1 and 10 (KernelBench's order:
# 1, 2, 10), batch 1 has problem 2; the merged results keep that order.
b0=$(wc -l <"$T/o/batch-0-cpu.txt" 2>/dev/null)
b1=$(wc -l <"$T/o/batch-1-cpu.txt" 2>/dev/null)
order=$("$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(",".join(r["status"] for r in rows))' "$T/o/results.jsonl" 2>&1)
first=$(head -n 1 "$T/o/batch-0-cpu.txt" 2>/dev/null)
if [ "$b0" = 2 ] && [ "$b1" = 1 ] && [ "$order" = "correct,correct,correct" ] &&
	[[ "$first" == *"1_Chain.py"* ]]; then
	ok "problems dealt in turn to the devices, results merged in order"
else
	not_ok "dealing: batch sizes $b0/$b1, statuses $order" "first: $first"
fi

out=$("$PY" scripts/kernelbench "$T/kb" --level 1 --device cpu --stark "$STARK" \
	--out "$T/cut" --max-seconds 0.2 -- --no-timing 2>&1)
rc=$?
if [ "$rc" -eq 1 ] && [[ "$out" == *"--max-seconds 0.2 reached"* ]] &&
	[[ "$out" == *"unjudged"* ]] && [[ "$out" != *"problems: correct 3"* ]]; then
	ok "--max-seconds: the rest reported unjudged, exit 1"
else
	not_ok "--max-seconds: exit $rc" "$(printf '%s\n' "$out" | tail -n 10)"
fi

# Resumed in the same folder: the three cut off are judged now.
out=$("$PY" scripts/kernelbench "$T/kb" --level 1 --device cpu --stark "$STARK" \
	--out "$T/cut" --resume -- --no-timing --trials 2 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && [[ "$out" == *"0 of 3 problems keep their verdicts"* ]] &&
	[[ "$out" == *"level 1: 3 problems: correct 3"* ]]; then
	ok "--resume judges what --max-seconds cut off"
else
	not_ok "--resume after a cut: exit $rc" "$(printf '%s\n' "$out" | tail -n 10)"
fi

# One verdict turned into the evaluator's error: only that one again.
# The two kept are given speedups (the runs above were not timed): the
# summary counts one honest copy within 2% and names the other.
"$PY" - "$T/cut/results.jsonl" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows[1]["status"] = "error"
rows[0]["speedup"], rows[2]["speedup"] = 1.012, 1.104
# What a GPU's launch matching says (none on the CPU).
rows[0].setdefault("env", {})["launch_match"] = (
    "matched on the reference's forward: ref 1000.0, cand 1003.0 us (+0.3%), forked again: "
    "cand; 1250 ms")
rows[2].setdefault("env", {})["launch_match"] = (
    "unmatched on the reference's forward: ref 1000.0, cand 1300.0 us (+30.0%), forked "
    "again: cand ref cand ref cand ref; 310 ms")
with open(sys.argv[1], "w") as f:
    f.write("".join(json.dumps(r) + "\n" for r in rows))
PYEOF
# --report reads what is there, the error included, and judges nothing.
before=$(cksum <"$T/cut/results.jsonl")
rm -f "$T/cut/batch-0-cpu.txt"
out=$("$PY" scripts/kernelbench "$T/kb" --level 1 --device cpu --stark /nonexistent/stark \
	--out "$T/cut" --report 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && [[ "$out" == *"level 1: 3 problems: correct 2, error 1"* ]] &&
	[ ! -e "$T/cut/batch-0-cpu.txt" ] && [ "$(cksum <"$T/cut/results.jsonl")" = "$before" ] &&
	[[ "$out" != *"throughput"* ]]; then
	ok "--report prints what --out holds, errors included, and judges nothing"
else
	not_ok "--report: exit $rc" "$(printf '%s\n' "$out" | tail -n 10)"
fi
out=$("$PY" scripts/kernelbench "$T/kb" --level 1 --device cpu --stark "$STARK" \
	--out "$T/cut" --resume -- --no-timing --trials 2 2>&1)
rc=$?
lines=$(wc -l <"$T/cut/batch-0-cpu.txt" 2>/dev/null)
kept=$("$PY" -c '
import json, sys
print(",".join(r["kb_problem"] + ":" + r["status"] for r in map(json.loads, open(sys.argv[1]))))' \
	"$T/cut/results.jsonl" 2>&1)
if [ "$rc" -eq 0 ] && [[ "$out" == *"2 of 3 problems keep their verdicts"* ]] && [ "$lines" = 1 ] &&
	[[ "$(head -n 1 "$T/cut/batch-0-cpu.txt")" == *"2_LayerNorm.py"* ]] &&
	[ "$kept" = "level1/1_Chain.py:correct,level1/2_LayerNorm.py:correct,level1/10_Cumsum.py:correct" ] &&
	[[ "$out" == *"honest copies within 2% of 1.00: 1 of 2 correct evaluations"* ]] &&
	grep -Eq '^L1 10_Cumsum\.py +1\.104$' <<<"$out" &&
	grep -Eq '^level 1, launch matching: (unmatched 1, matched 1|matched 1, unmatched 1); 1\.6 s in all, 1\.2 s at most$' <<<"$out"; then
	ok "--resume judges again only what ended error, keeping the rest in order; honest copies within 2% counted; launch matching summed"
else
	not_ok "--resume of an error: exit $rc, batch of $lines, rows $kept" "$(printf '%s\n' "$out" | tail -n 10)"
fi

# The merged results lost (a sitting killed before it wrote them): the
# batches' own outputs keep their verdicts.
rm -f "$T/cut/results.jsonl"
cp "$T/cut/results-0-cpu.jsonl" "$T/one.jsonl"
out=$("$PY" scripts/kernelbench "$T/kb" --level 1 --device cpu --stark "$STARK" \
	--out "$T/cut" --resume -- --no-timing --trials 2 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && [[ "$out" == *"1 of 3 problems keep their verdicts"* ]] &&
	[[ "$out" == *"level 1: 3 problems: correct 3"* ]] &&
	[[ "$(head -n 2 "$T/cut/batch-0-cpu.txt")" != *"2_LayerNorm.py"* ]]; then
	ok "--resume without results.jsonl keeps what the batches' outputs hold"
else
	not_ok "--resume from the batches' outputs: exit $rc" "$(printf '%s\n' "$out" | tail -n 10)" "$(cat "$T/one.jsonl" | head -c 300)"
fi

out=$("$PY" scripts/kernelbench "$T/kb" --level 1 --device cuda,cuda:1 --stark "$STARK" \
	--out "$T/bad" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && [[ "$out" == *"name each device"* ]]; then
	ok "a bare cuda in a list is refused"
else
	not_ok "bare cuda in a list: exit $rc" "$out"
fi
# A stand-in for stark that only records the device each batch was given.
printf '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --device ] && echo "$2" >> "%s"; shift; done\n' \
	"$T/devices" > "$T/fake-stark"
chmod +x "$T/fake-stark"
out=$("$PY" scripts/kernelbench "$T/kb" --level 1 --device cuda:0,1 --stark "$T/fake-stark" \
	--out "$T/short" 2>&1)
devs=$(sort "$T/devices" 2>/dev/null | tr '\n' ' ')
if [ "$devs" = "cuda:0 cuda:1 " ] && [ -f "$T/short/batch-1-cuda_1.txt" ]; then
	ok "cuda:0,1 names cuda:0 and cuda:1"
else
	not_ok "cuda:0,1: devices given [$devs]" "$(printf '%s\n' "$out" | tail -n 5)"
fi

out=$(STARK_PY_PROFILE=1 "$PY" scripts/kernelbench "$T/kb" --level 1 --device cpu \
	--stark "$STARK" --out "$T/prof" -- --no-timing --trials 2 2>&1)
rc=$?
if [ "$rc" -eq 0 ] &&
	grep -q "^== level 1, where the reference worker's wall time went" <<<"$out" &&
	grep -Eq '^ +[0-9]+ +[0-9]+  stark_worker\.py:[0-9]+\(serve\)$' <<<"$out" &&
	grep -Eq '^ +[0-9]+ +[0-9]+  stark_referee\.py:[0-9]+\(evaluate\)$' <<<"$out"; then
	ok "STARK_PY_PROFILE=1: where each process's wall time went"
else
	not_ok "STARK_PY_PROFILE=1: exit $rc" "$(printf '%s\n' "$out" | tail -n 20)"
fi
# The plan's launch-bound estimate: the 120-layer model of small kernels
# is picked, a relu on 64 MiB (28 us of GPU work for one kernel) is not.
P=$T/kbp/KernelBench
mkdir -p "$P/level1" "$P/level3"
cp tests/gpu/memory/launch/problem.py "$P/level3/1_Launch.py"
printf 'import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\ndef get_inputs():\n    return [torch.randn(1 << 24)]\ndef get_init_inputs():\n    return []\n' \
	> "$P/level1/19_ReLU.py"
out=$("$PY" scripts/kernelbench-plan "$T/kbp" 1 3 2>&1)
rc=$?
if [ "$rc" -eq 0 ] &&
	grep -Eq '^L3 1_Launch\.py +kernels +600 .* LB$' <<<"$out" &&
	grep -Eq '^L1 19_ReLU\.py +kernels +1 +GPU at least +28\.0 us +launching +4\.0 us +plan +[0-9]+ ms +$' <<<"$out" &&
	grep -q "^level 1: 1 problems, 0 possibly launch-bound, 0 without an estimate$" <<<"$out" &&
	grep -q "^level 3: 1 problems, 1 possibly launch-bound, 0 without an estimate$" <<<"$out"; then
	ok "kernelbench-plan: the launch-bound model picked, a large relu not"
else
	not_ok "kernelbench-plan: exit $rc" "$(printf '%s\n' "$out" | tail -n 8)"
fi
# --only picks by file name; --profile is taken (its lines come for
# estimates over a second only).
out=$("$PY" scripts/kernelbench-plan "$T/kbp" 1 3 --only '^1_' --profile 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && grep -Eq '^L3 1_Launch\.py +kernels +600 .* LB$' <<<"$out" &&
	grep -q "^level 1: 0 problems, 0 possibly launch-bound, 0 without an estimate$" <<<"$out"; then
	ok "kernelbench-plan --only: by file name"
else
	not_ok "kernelbench-plan --only: exit $rc" "$(printf '%s\n' "$out" | tail -n 8)"
fi
# kb-reftime (KernelBench's own clock beside its published figures) needs
# KernelBench's timing code: none in a checkout of level folders only, and
# no checkout at all, each said, exit 0.
out1=$("$PY" scripts/kb-reftime "$T/nothing-here" 2>&1); rc1=$?
out2=$("$PY" scripts/kb-reftime "$T/kbp" --level 3 2>&1); rc2=$?
if [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] &&
	grep -q "^kb-reftime: no KernelBench checkout at $T/nothing-here" <<<"$out1" &&
	grep -q "^kb-reftime: $T/kbp has no src/kernelbench/timing.py" <<<"$out2"; then
	ok "kb-reftime: no checkout, and no timing code in it, each said"
else
	not_ok "kb-reftime: exits $rc1 $rc2" "$out1" "$out2"
fi
# The published baseline (--baseline: KernelBench's fp32 times): an fp32
# reference gets its ratio; one judged at bf16 is not compared with it.
printf '{"level1": {"1_Chain.py": {"mean": 0.5}}}\n' >"$T/base.json"
o32=$("$PY" scripts/kernelbench "$T/kb" --level 1 --only '^1_' --device cpu --stark "$STARK" \
	--baseline "$T/base.json" --out "$T/p32" -- --trials 2 2>&1); rc1=$?
o16=$("$PY" scripts/kernelbench "$T/kb" --level 1 --only '^1_' --device cpu --stark "$STARK" \
	--baseline "$T/base.json" --out "$T/p16" -- --trials 2 --precision bf16 2>&1); rc2=$?
if [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] &&
	grep -Eq '^L1 1_Chain\.py +stark +[0-9.]+ ms +published +0\.5000 ms +ratio [0-9.]+$' <<<"$o32" &&
	grep -q '^1 judged at bf16: not compared (the published times are fp32)$' <<<"$o16" &&
	! grep -q '^L1 1_Chain\.py .*ratio' <<<"$o16"; then
	ok "published baseline: an fp32 reference's ratio printed, a bf16 one's not compared"
else
	not_ok "published baseline: exits $rc1 $rc2" "$(printf '%s\n' "$o32" | tail -n 4)" "$(printf '%s\n' "$o16" | tail -n 4)"
fi
exit $failed
