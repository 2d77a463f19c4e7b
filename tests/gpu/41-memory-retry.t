#!/bin/bash
# Device memory no plan saw: two evaluations of tests/gpu/memory/hidden (a
# forward that takes a scratch of 30% of the device, made only on CUDA, as a
# library's workspace is) at once, with --jobs 2.  Each evaluation's two
# workers fit the device; two evaluations' four do not, whatever the ledger
# holds.  The evaluation that runs out first is the evaluator's failure: it
# is judged again alone (env.mem_retried) and both end `correct`.  Then a
# batch of four shows the same with more in flight.  About 2 minutes on an
# H100.  Skips where no CUDA device is usable.
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
M=tests/gpu/memory/hidden
n=0
echo "1..2"
for jobs in 2 4; do
	for i in $(seq "$jobs"); do echo "$M/problem.py $M/honest.py"; done >"$TMP/batch"
	t0=$(date +%s)
	"$BUILD/stark" eval --batch "$TMP/batch" --jobs "$jobs" --device cuda --trials 2 --min-reps 4 \
		>"$TMP/batch.jsonl" 2>"$TMP/err"
	t1=$(date +%s)
	n=$((n + 1))
	"$PY" - "$TMP/batch.jsonl" "$jobs" "$n" "$((t1 - t0))" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
jobs, n, secs = int(sys.argv[2]), sys.argv[3], sys.argv[4]
st = [r.get("status") for r in rows]
again = [(r.get("env") or {}).get("mem_retried", "") for r in rows]
good = st == ["correct"] * jobs and any(a.startswith("judged again alone") for a in again)
print("%s %s - %d evaluations of a hidden 30%% scratch with --jobs %d: all correct, one or more "
      "judged again alone (%s s)" % ("ok" if good else "not ok", n, jobs, jobs, secs))
for r, a in zip(rows, again):
    e = r.get("env") or {}
    print("# %s: %s" % (r.get("status"), (r.get("message") or "")[:300]))
    print("#   retried: %s" % (a or "no")[:400])
    print("#   reserved %s, measured %s, wait %s ms" % (e.get("mem_reserved"), e.get("mem_measured"),
                                                      e.get("mem_wait_ms")))
PY
done
