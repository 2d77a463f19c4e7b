#!/bin/bash
# Device memory refused inside a forward and caught there, as cuDNN does
# for an algorithm's workspace (tests/gpu/memory/caught: a scratch of 30% of
# the device, a slower path where it does not fit): two evaluations at once
# with --jobs 2, whose four workers do not all fit.  The one whose worker met
# the refusal beside the other is judged again alone (env.mem_caught names
# the worker and the step, env.mem_retried says so) and both end `correct`;
# one evaluation alone meets no refusal and says nothing.  About a minute on
# an H100.  Skips where no CUDA device is usable.
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
M=tests/gpu/memory/caught
echo "1..2"
n=0
for jobs in 1 2; do
	for i in $(seq "$jobs"); do echo "$M/problem.py $M/honest.py"; done >"$TMP/batch"
	"$BUILD/stark" eval --batch "$TMP/batch" --jobs "$jobs" --device cuda --trials 2 --min-reps 4 \
		>"$TMP/batch.jsonl" 2>"$TMP/err"
	n=$((n + 1))
	"$PY" - "$TMP/batch.jsonl" "$jobs" "$n" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
jobs, n = int(sys.argv[2]), sys.argv[3]
st = [r.get("status") for r in rows]
env = [r.get("env") or {} for r in rows]
again = [e.get("mem_retried", "") for e in env]
if jobs == 1:
    good = st == ["correct"] and "mem_caught" not in env[0] and not again[0]
    what = "alone: correct, no refusal met, nothing said"
else:
    good = st == ["correct"] * jobs and any(
        a.startswith("judged again alone") and "caught" in a for a in again)
    what = "two at once: both correct, the one that met a caught refusal judged again alone"
print("%s %s - %s" % ("ok" if good else "not ok", n, what))
for r, e in zip(rows, env):
    print("# %s: %s" % (r.get("status"), (r.get("message") or "")[:300]))
    print("#   caught: %s" % e.get("mem_caught", "no")[:400])
    print("#   retried: %s" % (e.get("mem_retried") or "no")[:400])
PY
done
