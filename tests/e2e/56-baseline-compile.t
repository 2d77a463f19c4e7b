#!/bin/bash
# 56-baseline-compile.t -- `--baseline compile`: the reference also timed
# under torch.compile (default mode), speedups reported against both.
#
# With a torch that has torch.compile (2.0 or later: a C++ compiler and
# Python's headers let inductor build CPU kernels): a real compiled
# reference time and both speedups in `stark eval --json`, `stark show` and
# the bench table; a reference torch.compile cannot trace (a custom
# operator without a fake kernel) and one whose compiled outputs disagree
# with its eager ones end with the reason and the verdict unchanged.
# Without torch.compile (Debian bookworm's torch 1.13) the same commands
# say why there is no compiled baseline, the eager figures and the verdict
# unchanged, and the cases that need a compiler are skipped with the
# reason.  Either way: a hostile candidate that hunts for the compiled
# reference's generated code in the jail's /tmp and tries to run the C++
# compiler finds nothing to write and is refused the exec, and bad
# --baseline values are usage errors.  About 35 s without torch.compile,
# 70 s with it, on two cores.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
BUILD=${STARK_BUILD:-build}
STARK=$ROOT/$BUILD/stark
PY=$(scripts/find-python 2>/dev/null) || { echo "1..0 # skip no python with torch"; exit 0; }
D=tests/baseline
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-e2e-baseline.XXXXXX")
trap 'rm -rf "$T"' EXIT
export STARK_CACHE=${STARK_TEST_CACHE:-$ROOT/tests/tmp/cache}
export STARK_STORE=$T/store
export STARK_PROMPTS=$ROOT/prompts
mkdir -p "$STARK_CACHE"
unset STARK_API_KEY OPENAI_API_KEY ANTHROPIC_API_KEY STARK_LLM STARK_MODEL

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
json() { "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
# check NAME FILE EXPR: ok when EXPR (over j, the JSON of FILE) is True
check() {
	if [ "$(json "$2" "$3")" = "True" ]; then
		ok "$1"
	else
		not_ok "$1" "check: $3" "status: $(json "$2" 'j.get("status")'), message: $(json "$2" 'j.get("message")' | head -c 500)" \
			"baseline_compile_error: $(json "$2" 'j.get("baseline_compile_error")' | head -c 500)"
	fi
}
EV=(--timeout 240 --trials 3)

echo "1..12"

# 1: an honest candidate, --baseline compile.  Whether this torch has
# torch.compile is the evaluator's own answer.
"$STARK" eval $D/problem.py $D/fused.py --json --baseline compile "${EV[@]}" >"$T/c.json" 2>"$T/c.err"
rc=$?
if [ "$(json "$T/c.json" 'j["baseline_compile_error"] is not None and "has no torch.compile" in j["baseline_compile_error"]')" = "True" ]; then
	HAVE=0
	WHY=$(json "$T/c.json" 'j["baseline_compile_error"]')
else
	HAVE=1
fi
EAGER='j["status"] == "correct" and j["correct"] is True and j["speedup"] > 0 and j["ref_runtime_us"] > 0 and j["runtime_us"] > 0 and j["reps"] >= 5 and j["baseline"] == "compile"'
if [ $HAVE = 1 ]; then
	[ $rc -eq 0 ] && check "eval --baseline compile: a compiled reference time and both speedups" "$T/c.json" \
		"$EAGER"' and j["baseline_compile_error"] is None and j["ref_compile_us"] > 0 and j["ref_compile_ci_us"][0] <= j["ref_compile_us"] <= j["ref_compile_ci_us"][1] and abs(j["speedup_compile"] - j["ref_compile_us"] / j["runtime_us"]) <= 1e-6 * j["speedup_compile"] and j["env"]["baseline_compile"].startswith("torch.compile (default mode)") and "timed calls" in j["env"]["timing_compile"] and "against torch.compile" in j["message"]' ||
		not_ok "eval --baseline compile exited $rc" "$(tail -c 400 "$T/c.err")"
	"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print("# eager reference %.1f us, compiled %.1f us, candidate %.1f us: speedup %.2fx, %.2fx against torch.compile" % (j["ref_runtime_us"], j["ref_compile_us"], j["runtime_us"], j["speedup"], j["speedup_compile"]))' "$T/c.json"
else
	[ $rc -eq 0 ] && check "eval --baseline compile without torch.compile: the reason, the eager figures and verdict unchanged" "$T/c.json" \
		"$EAGER"' and j["speedup_compile"] is None and j["ref_compile_us"] is None and j["env"]["baseline_compile"] == "unavailable" and "no compiled baseline" in j["message"]' ||
		not_ok "eval --baseline compile exited $rc" "$(tail -c 400 "$T/c.err")"
	echo "# $WHY"
fi

# 2: --baseline eager (the default) carries none of it.
"$STARK" eval $D/problem.py $D/fused.py --json --baseline eager "${EV[@]}" >"$T/e.json" 2>/dev/null
check "eval --baseline eager: no compiled fields" "$T/e.json" \
	'j["status"] == "correct" and j["baseline"] == "eager" and j["speedup_compile"] is None and j["baseline_compile_error"] is None and "baseline_compile" not in j["env"]'

# 3-4: a hostile candidate after the compiled reference's generated code.
"$STARK" eval $D/problem.py $D/hostile_cache.py --json --baseline compile "${EV[@]}" >"$T/h.json" 2>/dev/null
check "hostile candidate: correct, and the compiled baseline is $([ $HAVE = 1 ] && echo "timed, unspoiled" || echo "said unavailable")" "$T/h.json" \
	'j["status"] == "correct" and '"$([ $HAVE = 1 ] && echo 'j["speedup_compile"] > 0 and j["ref_compile_us"] < 50000 and j["baseline_compile_error"] is None' || echo 'j["speedup_compile"] is None')"
check "hostile candidate: nothing of the compiled reference's in the jail's /tmp to write, and the C++ compiler refused" "$T/h.json" \
	'"HOSTILE exec load refused PermissionError" in j["stderr"] and "HOSTILE exec forward refused PermissionError" in j["stderr"] and [int(l.split()[4]) for l in j["stderr"].splitlines() if l.startswith("HOSTILE scan load")][0] >= 1 and all(" found 0 wrote 0" in l for l in j["stderr"].splitlines() if l.startswith("HOSTILE scan"))'

# 5-6: references torch.compile rejects or gets wrong.
if [ $HAVE = 1 ]; then
	"$STARK" eval $D/custom_op.py $D/fused.py --json --baseline compile "${EV[@]}" >"$T/op.json" 2>/dev/null
	check "a reference torch.compile cannot trace: the reason, the verdict and eager speedup unchanged" "$T/op.json" \
		'j["status"] == "correct" and j["speedup"] > 0 and j["speedup_compile"] is None and j["baseline_compile_error"].startswith("torch.compile failed") and "fake" in j["baseline_compile_error"]'
	"$STARK" eval $D/disagree.py $D/fused.py --json --baseline compile "${EV[@]}" >"$T/dis.json" 2>/dev/null
	check "a compiled reference that disagrees with the eager one is reported, not used" "$T/dis.json" \
		'j["status"] == "correct" and j["speedup"] > 0 and j["speedup_compile"] is None and "disagrees with the eager one" in j["baseline_compile_error"]'
else
	skip "a reference torch.compile cannot trace" "$WHY"
	skip "a compiled reference that disagrees with the eager one" "$WHY"
fi

# 7: bad values are usage errors.
fail=0
"$STARK" eval $D/problem.py $D/fused.py --baseline max-autotune >/dev/null 2>"$T/u1" && fail=1
[ $? -eq 0 ] || grep -q "eager or compile" "$T/u1" || fail=1
"$STARK" run $D/problem.py --baseline jit --llm replay:/dev/null >/dev/null 2>"$T/u2"
[ $? -eq 2 ] && grep -q "eager or compile" "$T/u2" || fail=1
"$STARK" bench $D/problem.py --baseline jit --llm replay:/dev/null >/dev/null 2>"$T/u3"
[ $? -eq 2 ] && grep -q "eager or compile" "$T/u3" || fail=1
[ $fail = 0 ] && ok "eval, run and bench refuse --baseline other than eager or compile" ||
	not_ok "bad --baseline values" "$(cat "$T/u1" "$T/u2" "$T/u3" | head -c 600)"

# 8-12: a bench with --baseline compile passes it to every evaluation; the
# table, the problem rows, `stark show RUN` and the report carry it.
mkdir -p "$T/level1" "$T/llm"
cp $D/problem.py "$T/level1/1_chain.py"
"$PY" tests/helpers/run_fixture.py llm-replay "$T/level1/1_chain.py" "$T/llm/1_chain.jsonl"
"$STARK" bench "$T/level1" --bench-id bc --budget 1 --llm "replay:$T/llm" --baseline compile \
	--device cpu >"$T/b.out" 2>"$T/b.err"
rc=$?
[ $rc -eq 0 ] && grep -q "against torch.compile" "$T/b.out" && grep -q "baseline compile" <("$STARK" show bc) &&
	ok "bench --baseline compile: its table has the figures against torch.compile" ||
	not_ok "bench --baseline compile (exit $rc)" "$(tail -c 600 "$T/b.err")" "$(cat "$T/b.out")"
"$STARK" show bc --json >"$T/bj.json"
if [ $HAVE = 1 ]; then
	check "bench table: the compiled columns beside the eager ones (stark show --json)" "$T/bj.json" \
		'j["table"][0]["problems"] == 1 and j["table"][0]["problems_compile"] == 1 and j["table"][0]["compile_unavailable"] == 0 and j["problems"][0]["best_speedup_compile"] > 0 and abs(j["table"][0]["geomean_speedup_compile"] - j["problems"][0]["best_speedup_compile"]) <= 1e-9 * j["problems"][0]["best_speedup_compile"] and j["table"][0]["fast_1_compile"] == (1.0 if j["problems"][0]["best_speedup_compile"] > 1 else 0.0) and j["problems"][0]["baseline_compile_error"] is None and j["table"][0]["geomean_speedup"] > 0'
else
	check "bench table: the problem counted as unavailable against torch.compile (stark show --json)" "$T/bj.json" \
		'j["table"][0]["problems"] == 1 and j["table"][0]["problems_compile"] == 0 and j["table"][0]["compile_unavailable"] == 1 and j["problems"][0]["best_speedup_compile"] is None and "torch.compile" in j["problems"][0]["baseline_compile_error"] and j["table"][0]["geomean_speedup"] > 0'
fi
"$STARK" show bc --csv >"$T/b.csv" && "$STARK" show bc --csv --problems >"$T/bp.csv"
head -n 1 "$T/b.csv" | grep -q '^level,policy,problems,success_rate,fast_1,fast_1_5,fast_2,mean_speedup,geomean_speedup,median_speedup,success_rate_kernelbench,fast_1_kernelbench,attempts,llm_calls,dollars,gpu_seconds,problems_compile,compile_unavailable,fast_1_compile,fast_1_5_compile,fast_2_compile,mean_speedup_compile,geomean_speedup_compile,median_speedup_compile$' &&
	head -n 1 "$T/bp.csv" | grep -q ',best_speedup_compile$' && [ "$(wc -l <"$T/b.csv")" -eq 2 ] &&
	ok "show --csv: the existing columns first, unchanged, then the compiled ones" ||
	not_ok "show --csv" "$(cat "$T/b.csv" "$T/bp.csv")"
RUN=$(json "$T/bj.json" 'j["problems"][0]["run_id"]')
"$STARK" show "$RUN" >"$T/r.txt"
"$STARK" show "$RUN" --json >"$T/r.json"
if [ $HAVE = 1 ]; then
	grep -q "baseline compile" "$T/r.txt" && grep -q "vs torch.compile" "$T/r.txt" && grep -q "^best against torch.compile" "$T/r.txt" &&
		[ "$(json "$T/r.json" 'j["nodes"][1]["speedup_compile"] > 0 and j["nodes"][1]["ref_compile_us"] > 0')" = True ] &&
		ok "show RUN: both speedups (text and JSON)" || not_ok "show RUN" "$(head -c 800 "$T/r.txt")"
else
	grep -q "baseline compile" "$T/r.txt" && ! grep -q "vs torch.compile" "$T/r.txt" &&
		[ "$(json "$T/r.json" 'j["options"]["baseline"] == "compile" and j["nodes"][1]["speedup_compile"] is None')" = True ] &&
		ok "show RUN: baseline compile recorded, no compiled speedup without torch.compile" ||
		not_ok "show RUN" "$(head -c 800 "$T/r.txt")"
fi
"$STARK" report bc -o "$T/r.html" >/dev/null 2>"$T/rep.err" && grep -q '"problems_compile"' "$T/r.html" &&
	grep -q "vs torch.compile" "$T/r.html" && ok "report: the bench's compiled figures are in the page" ||
	not_ok "report" "$(cat "$T/rep.err")"
