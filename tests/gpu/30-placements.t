#!/bin/bash
# `stark eval --placements N` on a GPU: the timed calls' inputs and the
# model's allocations rotate through N memory pools in both workers (over
# 4, through the 4 fastest of N that a scan found), and the times reported
# are the fastest pool's (docs/METHOD.md, "Timing"); the
# verdicts stay what they are with one placement, results cached by data
# pointer included.  Skips where no CUDA device is
# usable.
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
# judge NAME PROBLEM SOLUTION STATUS PLACEMENTS [stark options]: the verdict
# is STATUS and, when timed, env.timing_placements is PLACEMENTS (and
# env.timing_scanned is $SCANNED, when set: that many placements scanned,
# each model's scan times listed in env.timing_scan_us); with more
# than one, env.timing_placement_us lists that many pool medians for each
# model, and each model's time is its fastest pool's median (within the
# calls' own noise, 3%).
judge() {
	local name=$1 prob=$2 sol=$3 want=$4 places=$5
	shift 5
	"$BUILD/stark" eval "$prob" "$sol" --device cuda --json "$@" >"$TMP/out.json" 2>"$TMP/err"
	local got
	got=$(SCANNED=${SCANNED:-} "$PY" - "$TMP/out.json" "$want" "$places" <<'PY'
import json, os, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError as e:
    print("no JSON result: %s" % e); sys.exit()
env = d.get("env") or {}
if d.get("status") != sys.argv[2]:
    print("status %s, want %s: %s" % (d.get("status"), sys.argv[2], (d.get("message") or "")[:300]))
elif sys.argv[3] != "-" and env.get("timing_placements") != sys.argv[3]:
    print("timing_placements %r, want %r" % (env.get("timing_placements"), sys.argv[3]))
elif os.environ["SCANNED"] and (env.get("timing_scanned") != os.environ["SCANNED"] or any(
        len(part.split()) != 1 + int(os.environ["SCANNED"])
        for part in (env.get("timing_scan_us") or "x").split("; "))):
    print("timing_scanned %r, timing_scan_us %r: want %s placements scanned by each model"
          % (env.get("timing_scanned"), env.get("timing_scan_us"), os.environ["SCANNED"]))
elif sys.argv[3] not in ("-", "1"):
    pl = {}
    for part in (env.get("timing_placement_us") or "").split("; "):
        role, _, vals = part.partition(" ")
        pl[role] = [float(v) for v in vals.split()]
    bad = []
    for role, key in (("ref", "ref_runtime_us"), ("cand", "runtime_us")):
        v = pl.get(role, [])
        if len(v) != int(sys.argv[3]):
            bad.append("%s: %d pool medians, want %s" % (role, len(v), sys.argv[3]))
        elif not abs(d.get(key, 0) / min(v) - 1) <= 0.03:
            bad.append("%s: %s %s, fastest pool %s" % (role, key, d.get(key), min(v)))
    print("; ".join(bad) if bad else "good")
else:
    print("good")
PY
)
	if [ "$got" = good ]; then ok "$name"; else notok "$name" "$got" "$(tail -3 "$TMP/err")"; fi
}
echo "1..7"
P=tests/gpu/problems
judge "naive transpose, 4 placements: correct, 4 placements used" \
	$P/transpose2d/problem.py $P/transpose2d/fast_naive.py correct 4 --placements 4
SCANNED=32 judge "naive transpose, default: 32 placements scanned, the fastest 4 timed" \
	$P/transpose2d/problem.py $P/transpose2d/fast_naive.py correct 4
SCANNED=8 judge "layernorm, --placements 8: 8 scanned, 4 timed" \
	$P/layernorm_affine/problem.py $P/layernorm_affine/fast.py correct 4 --placements 8
judge "layernorm, --placements 1: one placement" \
	$P/layernorm_affine/problem.py $P/layernorm_affine/fast.py correct 1 --placements 1
judge "a cache keyed by input pointers is still caught with 32 placements" \
	tests/integrity/affine/problem.py tests/integrity/affine/r05_pointer_cache.py incorrect - --trials 3
judge "outputs stale after the first call are still caught with 32 placements" \
	tests/gpu/integrity/affine/problem.py tests/gpu/integrity/affine/r01_stale_after_first.py incorrect - --trials 3
"$BUILD/stark" eval $P/transpose2d/problem.py $P/transpose2d/fast_naive.py --device cuda --placements 65 >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc = 2 ] && grep -q "placements must be 1..64" "$TMP/err"; then
	ok "--placements 65: usage error"
else
	notok "--placements 65: usage error" "exit $rc: $(cat "$TMP/err")"
fi
