#!/bin/bash
# The problem corpus end to end: every candidate in tests/problems/NAME/
# (fast, slow, wrong_small, wrong_big, compile_error, runtime_error, crash,
# hang; see tests/problems/README.md) goes through `stark eval --json`, and
# its verdict must be the expected one:
#
#   fast           correct, speedup > 1      slow        correct, speedup < 1
#   wrong_small    incorrect                 wrong_big   incorrect
#   compile_error  compile_error             runtime_error  runtime_error
#   crash          crashed                   hang        timeout
#
# plus `correct` true exactly for the correct ones and the exit status of
# cmd_eval.c (0 correct, 1 any other verdict).  Prints TAP, one test per
# candidate.
#
# The candidates that are never timed run first, $STARK_PROBLEMS_JOBS (4) at
# a time; fast and slow run afterwards, $STARK_PROBLEMS_TIMED_JOBS (2) at a
# time: their speedups are 2.7-36x and about 0.5x or under on the development machine,
# margins that a neighbour's evaluation does not move across 1 (one at a
# time is STARK_PROBLEMS_TIMED_JOBS=1).  Builds go to
# $STARK_TEST_CACHE (default tests/tmp/cache, shared with the other e2e
# tests), so only the first run compiles the corpus's few C++ extensions.
# $STARK_PROBLEMS_ONLY=pattern restricts the run to NAME/KIND cases matching
# the (bash glob) pattern, e.g. 'mlp3/*' or '*/hang'.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
STARK=$BUILD/stark
PY=$(scripts/find-python 2>/dev/null) || { echo "1..0 # skip no python with torch"; exit 0; }
export STARK_CACHE=${STARK_TEST_CACHE:-$PWD/tests/tmp/cache}
mkdir -p "$STARK_CACHE"
JOBS=${STARK_PROBLEMS_JOBS:-4}
TIMED_JOBS=${STARK_PROBLEMS_TIMED_JOBS:-2}
HANG_TIMEOUT=${STARK_PROBLEMS_HANG_TIMEOUT:-10}	# --timeout for hang.py, seconds
OUTER_TIMEOUT=600				# a stuck `stark eval` is a failure, not a stuck test
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-e2e-problems.XXXXXX")
trap 'rm -rf "$T"' EXIT

KINDS="fast slow wrong_small wrong_big compile_error runtime_error crash hang"
cases=()
for d in tests/problems/*/; do
	name=$(basename "$d")
	[ -f "$d/problem.py" ] || continue
	for k in $KINDS; do
		[ -f "$d/$k.py" ] || continue
		# shellcheck disable=SC2053
		[ -z "${STARK_PROBLEMS_ONLY:-}" ] || [[ "$name/$k" == ${STARK_PROBLEMS_ONLY} ]] || continue
		cases+=("$name/$k")
	done
done
if [ ${#cases[@]} -eq 0 ]; then
	echo "1..0 # skip no problems found under tests/problems"
	exit 0
fi
echo "1..${#cases[@]}"
if [ ! -x "$STARK" ]; then
	i=0
	for c in "${cases[@]}"; do
		i=$((i + 1))
		echo "not ok $i - $c: $STARK is not built (make BUILD=$BUILD)"
	done
	exit 1
fi

# run_one INDEX CASE: runs stark eval on one candidate; leaves INDEX.json
# (stdout), INDEX.err (stderr), INDEX.rc (exit status) and INDEX.secs in $T.
run_one() {
	local i=$1 c=$2 args=() t0 rc
	[ "${c#*/}" = hang ] && args=(--timeout "$HANG_TIMEOUT")
	t0=$(date +%s.%N)
	timeout -k 10 "$OUTER_TIMEOUT" "$STARK" eval "tests/problems/${c%/*}/problem.py" \
		"tests/problems/$c.py" --json "${args[@]}" >"$T/$i.json" 2>"$T/$i.err"
	rc=$?
	echo "$rc" >"$T/$i.rc"
	echo "$t0 $(date +%s.%N)" | awk '{ printf "%.1f\n", $2 - $1 }' >"$T/$i.secs"
}
export -f run_one
export STARK T HANG_TIMEOUT OUTER_TIMEOUT

start=$(date +%s)
# Phase 1: candidates that are never timed, in parallel.
# shellcheck disable=SC2016 # $0 and $1 are for the inner bash
for i in "${!cases[@]}"; do
	case "${cases[$i]#*/}" in fast | slow) ;; *) printf '%s %s\n' "$i" "${cases[$i]}" ;; esac
done | xargs -r -P "$JOBS" -L 1 bash -c 'run_one "$0" "$1"'
# Phase 2: fast and slow, $TIMED_JOBS at a time.
# shellcheck disable=SC2016 # $0 and $1 are for the inner bash
for i in "${!cases[@]}"; do
	case "${cases[$i]#*/}" in fast | slow) printf '%s %s\n' "$i" "${cases[$i]}" ;; esac
done | xargs -r -P "$TIMED_JOBS" -L 1 bash -c 'run_one "$0" "$1"'
elapsed=$(($(date +%s) - start))

# The verdict check: prints "ok SUMMARY" or "not ok SUMMARY" and then
# diagnostic lines.
read -r -d '' CHECK <<'EOF'
import json, math, sys
path, kind, rc, secs, errpath = sys.argv[1:6]
rc = int(rc)
want = {"fast": "correct", "slow": "correct", "wrong_small": "incorrect",
        "wrong_big": "incorrect", "compile_error": "compile_error",
        "runtime_error": "runtime_error", "crash": "crashed", "hang": "timeout"}[kind]
def tail(s, n):
    s = str(s)
    return s if len(s) <= n else "..." + s[-n:]
def stderr_tail():
    try:
        with open(errpath, errors="replace") as f:
            return tail(f.read().strip(), 400)
    except OSError:
        return ""
try:
    with open(path) as f:
        j = json.load(f)
    if not isinstance(j, dict):
        raise ValueError("not a JSON object")
except (OSError, ValueError) as e:
    print("not ok expected %s, but stark eval printed no JSON object (%s; exit %d, %s s)" % (want, e, rc, secs))
    print("stderr: " + stderr_tail())
    sys.exit(0)
st, correct, sp = j.get("status"), j.get("correct"), j.get("speedup")
problems = []
if st != want:
    problems.append("status %r, expected %r" % (st, want))
if correct is not (want == "correct"):
    problems.append("correct is %r" % (correct,))
if rc != (0 if want == "correct" else 1):
    problems.append("exit status %d" % rc)
sp_ok = isinstance(sp, (int, float)) and not isinstance(sp, bool) and math.isfinite(sp) and sp > 0
if kind == "fast" and not (sp_ok and sp > 1.0):
    problems.append("speedup %r, expected > 1" % (sp,))
if kind == "slow" and not (sp_ok and sp < 1.0):
    problems.append("speedup %r, expected < 1" % (sp,))
summary = "%s" % st
if sp_ok and kind in ("fast", "slow"):
    summary += ", speedup %.2fx (%.0f us vs %.0f us)" % (sp, j.get("runtime_us") or 0, j.get("ref_runtime_us") or 0)
summary += " (exit %d, %s s)" % (rc, secs)
if not problems:
    print("ok " + summary)
    sys.exit(0)
print("not ok " + "; ".join(problems) + " -- got " + summary)
print("message: " + tail(j.get("message"), 600).replace("\n", " | "))
if j.get("log"):
    print("log: " + tail(j.get("log"), 400).replace("\n", " | "))
for key in ("flags", "env", "stage_ms"):
    if j.get(key):
        print("%s: %s" % (key, json.dumps(j[key], sort_keys=True)))
if stderr_tail():
    print("stderr: " + stderr_tail().replace("\n", " | "))
EOF

n=0
failed=0
for i in "${!cases[@]}"; do
	c=${cases[$i]}
	n=$((n + 1))
	out=$("$PY" -c "$CHECK" "$T/$i.json" "${c#*/}" "$(cat "$T/$i.rc" 2>/dev/null || echo 255)" \
		"$(cat "$T/$i.secs" 2>/dev/null || echo '?')" "$T/$i.err" 2>&1)
	first=$(printf '%s\n' "$out" | head -n 1)
	case "$first" in
	"ok "*) echo "ok $n - $c: ${first#ok }" ;;
	"not ok "*)
		failed=1
		echo "not ok $n - $c: ${first#not ok }"
		printf '%s\n' "$out" | tail -n +2 | sed 's/^/# /'
		;;
	*)
		failed=1
		echo "not ok $n - $c: the verdict check itself failed"
		printf '%s\n' "$out" | sed 's/^/# /'
		;;
	esac
done
echo "# ${#cases[@]} evaluations in ${elapsed} s"
exit $failed
