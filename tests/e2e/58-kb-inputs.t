#!/bin/bash
# KernelBench's trials draw their CPU inputs through the fast engine
# (evaluator/stark_rand.py, evaluator/mtrand.c): an honest copy of a problem
# with a large torch.rand input, a small one and a float64 one is judged
# correct by both verdicts, and env.kb_rand says the engine was checked
# against this torch and served the large draw of each of the five trials
# (196,608 numbers each) and left the other two to torch.rand;
# STARK_KB_RAND=torch keeps torch's own, and says so; stark doctor
# --json lists it as checked, with both speeds.  Bit-for-bit agreement
# with torch.rand is the unit tests' (test_evaluator: mt_engine,
# kb_rand_exact).  About 10 s.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
STARK=$BUILD/stark
PY=$(scripts/find-python 2>/dev/null) || { echo "1..0 # skip no python with torch"; exit 0; }
export STARK_CACHE=${STARK_TEST_CACHE:-$PWD/tests/tmp/cache}
mkdir -p "$STARK_CACHE"
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-e2e-kbin.XXXXXX")
trap 'rm -rf "$T"' EXIT
P=tests/problems/kb_rand

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
json() { "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
echo "1..4"

"$STARK" eval "$P/problem.py" "$P/honest.py" --json >"$T/out.json" 2>"$T/err.txt"
rc=$?
got=$(json "$T/out.json" '(j["status"], j["verdicts"]["kernelbench"]["status"], j["verdicts"]["kernelbench"]["trials_passed"])')
if [ "$rc" -eq 0 ] && [ "$got" = "('correct', 'correct', 5)" ]; then
	ok "the honest copy: correct by both verdicts, KernelBench's 5 trials passed"
else
	not_ok "the honest copy: exit $rc, $got" "$(tail -c 600 "$T/err.txt")"
fi

rand=$(json "$T/out.json" 'j["env"].get("kb_rand")')
if [[ "$rand" =~ ^fast\ engine\ \(checked\ bit\ for\ bit\ against\ this\ torch\):\ 5\ calls,\ 983040\ numbers\ in\ [0-9.]+\ s\;\ 10\ calls\ left\ to\ torch.rand$ ]]; then
	ok "env.kb_rand: the large draws served, five of them; the small and the float64 left to torch"
else
	not_ok "env.kb_rand: $rand"
fi

STARK_KB_RAND=torch "$STARK" eval "$P/problem.py" "$P/honest.py" --json >"$T/own.json" 2>"$T/err.txt"
rc=$?
got=$(json "$T/own.json" '(j["status"], j["verdicts"]["kernelbench"]["status"], j["env"].get("kb_rand"))')
if [ "$rc" -eq 0 ] && [ "$got" = "('correct', 'correct', \"torch's own: STARK_KB_RAND=torch\")" ]; then
	ok "STARK_KB_RAND=torch: torch's own draws them, said so; correct by both verdicts"
else
	not_ok "STARK_KB_RAND=torch: exit $rc, $got" "$(tail -c 600 "$T/err.txt")"
fi

"$STARK" doctor --json >"$T/doc.json" 2>"$T/doc.err"
got=$(json "$T/doc.json" '[(x["input"], x["ok"]) for x in j["inputs"]]')
detail=$(json "$T/doc.json" 'j["inputs"][0]["detail"]')
if [ "$got" = "[('torch.rand', True)]" ] &&
	[[ "$detail" =~ ^the\ fast\ engine,\ checked\ bit\ for\ bit\ against\ torch\ .*:\ [0-9.]+\ GB/s\ \(torch\'s\ own\ [0-9.]+\ GB/s,\ 64\ MiB\)$ ]]; then
	ok "stark doctor: the fast engine checked, with both speeds"
else
	not_ok "stark doctor: $got, $detail" "$(tail -c 400 "$T/doc.err")"
fi
exit $failed
