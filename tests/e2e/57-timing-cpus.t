#!/bin/bash
# CPUs kept for timing phases (STARK_TIMING_CPUS, evaluator/stark_referee_cpus.py):
# the cpulist helpers; with the last CPU kept, an evaluation's workers are on
# it in the timing phase and off it after (as the kernel reports their
# affinity), and the verdict stands; a list that cannot be used (malformed,
# every CPU, none allowed here) leaves the evaluation as it was and says
# why; unset (the default: auto within a quarter of the CPUs) and "off"
# say nothing here; auto on a machine without GPUs keeps nothing and says
# nothing (pool/cpus.c works the lists out where GPUs
# are: test_pool).  Needs 2 CPUs.  About 30 s.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
STARK=$BUILD/stark
PY=$(scripts/find-python 2>/dev/null) || { echo "1..0 # skip no python with torch"; exit 0; }
ncpu=$(nproc)
[ "$ncpu" -ge 2 ] || { echo "1..0 # skip one CPU"; exit 0; }
export STARK_CACHE=${STARK_TEST_CACHE:-$PWD/tests/tmp/cache}
mkdir -p "$STARK_CACHE"
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-e2e-cpus.XXXXXX")
trap 'rm -rf "$T"' EXIT

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
echo "1..7"

out=$("$PY" - <<'EOF' 2>&1
import sys
sys.path.insert(0, "evaluator")
from stark_referee_cpus import cpulist, parse_cpulist, plan
a = frozenset(range(8))
checks = [
    parse_cpulist("0-2,5, 7") == {0, 1, 2, 5, 7},
    cpulist({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8",
    plan("6-7;4-5", 1, a)[:2] == ({4, 5}, {0, 1, 2, 3}),
    plan("", 0, a) == (None, None, ""),
    "none for GPU 2" in plan("6;7", 2, a)[2],
    plan(";6-7", 1, a)[:2] == ({6, 7}, {0, 1, 2, 3, 4, 5}),
    "none for GPU 0" in plan(";6-7", 0, a)[2],
    "not a CPU" in plan("6,x", 0, a)[2],
    "ends before" in plan("7-6", 0, a)[2],
    "every CPU" in plan("0-7", 0, a)[2],
    "allowed here" in plan("9", 0, a)[2],
]
print(checks)
sys.exit(0 if all(checks) else 1)
EOF
)
if [ $? -eq 0 ]; then
	ok "cpulists read and written; a plan per GPU, or why none"
else
	not_ok "cpulist helpers" "$out"
fi

P=tests/problems/elementwise_chain/problem.py
S=tests/problems/elementwise_chain/fast.py
last=$((ncpu - 1))
rest=$("$PY" -c "import sys; sys.path.insert(0, 'evaluator'); from stark_referee_cpus import cpulist; print(cpulist(range($last)))")

# eval SPEC: the result's status and env.timing_cpus ("-" when absent).
eval_with() {
	env ${1:+STARK_TIMING_CPUS="$1"} "$STARK" eval "$P" "$S" --json 2>"$T/err" |
		"$PY" -c 'import json, sys; j = json.load(sys.stdin); print(j["status"], j["env"].get("timing_cpus", "-"))' 2>&1
}

got=$(eval_with "$last")
want="correct list 0, $last; outside timing $rest; workers in timing on $last/$last, after it on $rest/$rest"
if [ "$got" = "$want" ]; then
	ok "the last CPU kept: the workers on it while timed, off it after"
else
	not_ok "timing CPUs: got [$got]" "wanted [$want]" "$(tail -n 5 "$T/err")"
fi

got=$(eval_with "$last-x")
if [[ "$got" == "correct off: STARK_TIMING_CPUS="*"is not a CPU number or range" ]]; then
	ok "a malformed list: judged as without it, and says why"
else
	not_ok "malformed list: got [$got]" "$(tail -n 5 "$T/err")"
fi

got=$(eval_with "0-$last")
if [[ "$got" == "correct off: the lists take every CPU allowed here"* ]]; then
	ok "a list of every CPU: judged as without it, and says why"
else
	not_ok "every CPU: got [$got]" "$(tail -n 5 "$T/err")"
fi

got=$(eval_with "")
if [ "$got" = "correct -" ]; then
	ok "unset: nothing moved, nothing said"
else
	not_ok "unset: got [$got]" "$(tail -n 5 "$T/err")"
fi
got=$(eval_with off)
if [ "$got" = "correct -" ] && ! grep -q "STARK_TIMING_CPUS" "$T/err"; then
	ok "off: nothing moved, nothing said"
else
	not_ok "off: got [$got]" "$(tail -n 5 "$T/err")"
fi
got=$(eval_with auto)
if [ "$got" = "correct -" ] && ! grep -q "STARK_TIMING_CPUS" "$T/err"; then
	ok "auto without GPUs: nothing kept, nothing said"
else
	not_ok "auto: got [$got]" "$(tail -n 5 "$T/err")"
fi
exit $failed
