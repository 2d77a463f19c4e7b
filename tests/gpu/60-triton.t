#!/bin/bash
# Triton and the other kernel languages on the GPU: KernelBench's own
# example kernels (from a KernelBench checkout: $KB, default .kb/checkout,
# holding src/kernelbench/prompts/), each against its model_ex_* reference,
# judged jailed: the Triton and CUDA ones `correct` (Triton's with its JIT
# counted apart from the timing), the languages this machine lacks (CuTe
# DSL, TileLang, ThunderKittens) `error` naming the package or headers;
# then a replayed `stark run --language triton` that finishes with a
# correct Triton candidate.  Skips without a GPU, without triton, or without
# the checkout.  About a minute.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
STARK=$BUILD/stark
if ! "$PY" -c 'import triton' >/dev/null 2>&1; then
	echo "1..0 # skip triton is not importable here"
	exit 0
fi
KB=${KB:-.kb/checkout}
EXS=$KB/src/kernelbench/prompts
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-gpu-triton.XXXXXX")
trap 'rm -rf "$T"' EXIT

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
json() { "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }

# case NAME STATUSES PROBLEM SOLUTION CHECK [ARGS...]
case_() {
	local name=$1 want=$2 prob=$3 sol=$4 check=$5 st
	shift 5
	"$STARK" eval "$prob" "$sol" --device cuda --json "$@" >"$T/out.json" 2>"$T/err.txt"
	st=$(json "$T/out.json" 'j["status"]')
	if ! [[ "|$want|" == *"|$st|"* ]]; then
		not_ok "$name: status ${st:-none}, expected $want" \
			"message: $(json "$T/out.json" 'j["message"]' | head -c 600)" \
			"stderr: $(tail -c 400 "$T/err.txt")"
	elif [ "$(json "$T/out.json" "$check")" != "True" ]; then
		not_ok "$name: check failed: $check" "message: $(json "$T/out.json" 'j["message"]' | head -c 400)" \
			"env: $(json "$T/out.json" 'j["env"]' | head -c 800)"
	else
		ok "$name -> $st ($(json "$T/out.json" '"%s; speedup %s; jit %s" % (j["env"].get("language"), j.get("speedup"), j["env"].get("triton_jit"))'))"
	fi
}

if [ -d "$EXS" ]; then
	case_ "KernelBench's Triton example" correct "$EXS/model_ex_add.py" "$EXS/model_new_ex_add_triton.py" \
		'j["env"]["language"].startswith("triton") and "kernels compiled" in j["env"].get("triton_jit", "") and "triton_jit_timed" not in j["env"] and "seccomp" in j["sandbox"] and not j["flags"]'
	case_ "KernelBench's CUDA example" correct "$EXS/model_ex_add.py" "$EXS/model_new_ex_add.py" \
		'j["env"]["language"].startswith("cuda")'
	# (KernelBench ships model_ex_0.py empty and model_ex_2.py as a prompt
	# template with placeholders: only complete pairs are judged)
	for ex in 0 1 2; do
		if [ -s "$EXS/model_new_ex_$ex.py" ] && "$PY" -c 'import ast,sys; ast.parse(open(sys.argv[1]).read()); sys.exit(0 if open(sys.argv[1]).read().strip() else 1)' "$EXS/model_ex_$ex.py" 2>/dev/null; then
			case_ "KernelBench's example $ex" correct "$EXS/model_ex_$ex.py" "$EXS/model_new_ex_$ex.py" 'True'
		else
			ok "# skip KernelBench's example $ex is not a complete pair (an empty file or a template)"
		fi
	done
	if "$PY" -c 'import cutlass' >/dev/null 2>&1; then
		case_ "KernelBench's CuTe example (cutlass here)" correct "$EXS/model_ex_add.py" "$EXS/model_new_ex_add_cute.py" 'True'
	else
		case_ "KernelBench's CuTe example, cutlass absent" error "$EXS/model_ex_add.py" "$EXS/model_new_ex_add_cute.py" \
			"\"package 'cutlass'\" in j['message'] and j['env']['language'].startswith('cute')"
	fi
	if "$PY" -c 'import tilelang' >/dev/null 2>&1; then
		case_ "KernelBench's TileLang example (tilelang here)" correct "$EXS/model_ex_add.py" "$EXS/model_new_ex_add_tilelang.py" 'True'
	else
		case_ "KernelBench's TileLang example, tilelang absent" error "$EXS/model_ex_add.py" "$EXS/model_new_ex_add_tilelang.py" \
			"\"package 'tilelang'\" in j['message']"
	fi
	if [ -n "${THUNDERKITTENS_ROOT:-}" ]; then
		ok "# skip THUNDERKITTENS_ROOT is set: the ThunderKittens example builds for a minute"
	else
		case_ "KernelBench's ThunderKittens example, headers absent" error "$EXS/model_ex_add_thunderkittens.py" \
			"$EXS/model_new_ex_add_thunderkittens.py" "'ThunderKittens headers' in j['message']"
	fi
	# precision: KernelBench's Triton example in bf16 (inputs cast as its harness casts them)
	case_ "KernelBench's Triton example in bf16" correct "$EXS/model_ex_add.py" "$EXS/model_new_ex_add_triton.py" \
		'j["env"]["input_precision"] == "bf16" and "bfloat16" in j["verdicts"]["kernelbench"]["reason"]' --precision bf16
else
	ok "# skip no KernelBench checkout at $KB (set KB): its example kernels are not judged"
fi

# A replayed Triton search: two attempts, both Triton kernels, judged jailed.
if "$STARK" run examples/hardswish_residual/problem.py --language triton --device cuda \
	--llm replay:tests/gpu/triton/replay_hardswish.jsonl --budget 2 --store "$T/store" \
	--run-id triton-replay >"$T/run.txt" 2>&1; then
	"$STARK" show triton-replay --store "$T/store" >"$T/show.txt" 2>&1
	if grep -q 'format triton' "$T/show.txt" && grep -Eq '^best: (node|no candidate beat)' "$T/show.txt" &&
		grep -q 'state: finished' "$T/show.txt"; then
		ok "replayed stark run --language triton finishes: $(grep '^best' "$T/show.txt" | head -1)"
	else
		not_ok "replayed Triton run" "$(head -c 1500 "$T/show.txt")"
	fi
else
	not_ok "replayed stark run --language triton" "$(tail -c 1500 "$T/run.txt")"
fi
echo "1..$n"
exit $failed
