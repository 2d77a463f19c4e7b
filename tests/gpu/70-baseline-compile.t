#!/bin/bash
# 70-baseline-compile.t -- `--baseline compile` on the GPU: the reference
# also timed under torch.compile (inductor's Triton kernels, compiled in the
# run jail with exec restricted by Landlock), judged jailed.
#
#  1. gated_chain (a * sigmoid(b) + c: three kernels eager, one compiled)
#     with its fast-format candidate: correct, a compiled reference time by
#     CUDA events, faster than the eager one, and both speedups;
#  2. a Triton candidate with --baseline compile: its own JIT still works
#     (the candidate's worker keeps Triton's tools) beside the compiled
#     reference's;
#  3. the hostile candidate of tests/baseline/ on the device: nothing of the
#     compiled reference's generated code to write, the C++ compiler refused;
#  4-5. a reference torch.compile cannot trace, and one whose compiled
#     outputs disagree: the reason, the verdict unchanged;
#  6. a bench of gated_chain with --baseline compile: the table's compiled
#     columns.
# Skips without a GPU, torch.compile or triton.  About 3-4 minutes on the
# H100 (each evaluation compiles the reference again).  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
ROOT=$PWD
STARK=$ROOT/$BUILD/stark
if ! "$PY" -c 'import sys, torch, triton; sys.exit(0 if callable(getattr(torch, "compile", None)) else 1)' >/dev/null 2>&1; then
	echo "1..0 # skip torch.compile or triton is not importable here"
	exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-gpu-baseline.XXXXXX")
trap 'rm -rf "$T"' EXIT
export STARK_STORE=$T/store
export STARK_PROMPTS=$ROOT/prompts
unset STARK_API_KEY OPENAI_API_KEY ANTHROPIC_API_KEY STARK_LLM STARK_MODEL
GC=tests/gpu/problems/gated_chain
SC=tests/gpu/triton/corpus/scale
B=tests/baseline

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
json() { "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
SUMMARY='"status %s; eager ref %s us, compiled %s us, candidate %s us; speedup %s, vs compile %s; %s; %s" % (j["status"], j["ref_runtime_us"], j["ref_compile_us"], j["runtime_us"], j["speedup"], j["speedup_compile"], j["env"].get("baseline_compile"), j["env"].get("timing_compile"))'

# case NAME PROBLEM SOLUTION CHECK [ARGS...]
case_() {
	local name=$1 prob=$2 sol=$3 check=$4
	shift 4
	"$STARK" eval "$prob" "$sol" --device cuda --json --baseline compile "$@" >"$T/out.json" 2>"$T/err.txt"
	if [ "$(json "$T/out.json" "$check")" = "True" ]; then
		ok "$name"
	else
		not_ok "$name" "check: $check" "message: $(json "$T/out.json" 'j["message"]' | head -c 600)" \
			"baseline_compile_error: $(json "$T/out.json" 'j["baseline_compile_error"]' | head -c 800)" \
			"stderr: $(tail -c 400 "$T/err.txt")"
	fi
	echo "# $(json "$T/out.json" "$SUMMARY")"
}

echo "1..6"

case_ "gated_chain, fast format: a compiled reference by CUDA events, faster than eager, both speedups" \
	$GC/problem.py $GC/fast.py \
	'j["status"] == "correct" and j["env"]["timing_method"] == "cuda_events" and j["baseline_compile_error"] is None and 0 < j["ref_compile_us"] < 0.8 * j["ref_runtime_us"] and abs(j["speedup_compile"] - j["ref_compile_us"] / j["runtime_us"]) <= 1e-6 * j["speedup_compile"] and "ptxas" in j["env"]["exec_allowed"] and "timed calls" in j["env"]["timing_compile"]'
case_ "a Triton candidate beside the compiled reference: its JIT works, both speedups" \
	$SC/problem.py $SC/h01_triton.py \
	'j["status"] == "correct" and j["env"]["language"].startswith("triton") and "kernels compiled" in j["env"].get("triton_jit", "") and j["speedup_compile"] > 0'
case_ "hostile candidate on the device: nothing to write, the compiler refused, the compiled baseline unspoiled" \
	$B/problem.py $B/hostile_cache.py \
	'j["status"] == "correct" and j["speedup_compile"] > 0 and "HOSTILE exec load refused PermissionError" in j["stderr"] and all(" found 0 wrote 0" in l for l in j["stderr"].splitlines() if l.startswith("HOSTILE scan"))'
case_ "a reference torch.compile cannot trace: the reason, the verdict unchanged" \
	$B/custom_op.py $B/fused.py \
	'j["status"] == "correct" and j["speedup"] > 0 and j["speedup_compile"] is None and j["baseline_compile_error"].startswith("torch.compile failed")'
case_ "a compiled reference that disagrees is reported, not used" \
	$B/disagree.py $B/fused.py \
	'j["status"] == "correct" and j["speedup_compile"] is None and "disagrees with the eager one" in j["baseline_compile_error"]'

mkdir -p "$T/level1" "$T/llm" "$T/ev"
cp $GC/problem.py "$T/level1/1_gated.py"
"$PY" tests/helpers/run_fixture.py llm-replay "$T/level1/1_gated.py" "$T/llm/1_gated.jsonl"
"$STARK" bench "$T/level1" --bench-id gbc --budget 1 --llm "replay:$T/llm" --baseline compile \
	--device cuda:0 --format kernelbench >"$T/b.out" 2>"$T/b.err"
rc=$?
"$STARK" show gbc --json >"$T/b.json"
if [ $rc -eq 0 ] && [ "$(json "$T/b.json" 'j["table"][0]["problems_compile"] == 1 and j["table"][0]["compile_unavailable"] == 0 and j["problems"][0]["best_speedup_compile"] > 0')" = True ]; then
	ok "bench --baseline compile on cuda:0: the table's compiled columns"
else
	not_ok "bench --baseline compile (exit $rc)" "$(tail -c 600 "$T/b.err")" "$(head -c 600 "$T/b.json")"
fi
cat "$T/b.out" | sed 's/^/# /'
