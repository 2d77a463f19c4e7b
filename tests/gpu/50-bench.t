#!/bin/bash
# `stark bench` on the GPUs: the GPU corpus's problems searched by the
# sampling policy with replayed replies (each problem's honest fast-format
# kernel), every evaluation real, through one pool over every GPU
# (--device all), 4 evaluations per GPU, every run in flight at once.  The
# bench finishes, every problem has a correct candidate, its evaluations
# were timed on the GPU (gpu_seconds), and where the machine has several
# GPUs the evaluations ran on more than one.  Skips where there is no GPU.
# About a minute.
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
STARK=$PWD/$BUILD/stark
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "1..0 # skip no GPU (nvidia-smi -L failed)"
	exit 0
fi
PY=$(scripts/find-python) || { echo "1..0 # skip no python with torch"; exit 0; }
if ! "$PY" -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
	echo "1..0 # skip no GPU (torch.cuda.is_available() is false)"
	exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-gpu-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT
export STARK_STORE=$T/store STARK_PROMPTS=$PWD/prompts
n=0
check() { # NAME EXIT-STATUS DIAGNOSTICS...
	local name=$1 rc=$2
	shift 2
	n=$((n + 1))
	if [ "$rc" -eq 0 ]; then echo "ok $n - $name"; else
		echo "not ok $n - $name"
		for l in "$@"; do echo "# $l"; done
	fi
}
json() { "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }

echo "1..3"

mkdir -p "$T/level1" "$T/replies"
k=0
for d in tests/gpu/problems/*/; do
	name=$(basename "$d")
	[ -f "$d/problem.py" ] && [ -f "$d/fast.py" ] || continue
	k=$((k + 1))
	cp "$d/problem.py" "$T/level1/${k}_$name.py"
	"$PY" -c 'import json,sys; print(json.dumps({"key": "*", "role": "sample", "text": "```python\n" + open(sys.argv[1]).read() + "```\n"}))' \
		"$d/fast.py" >"$T/replies/${k}_$name.jsonl"
done
ngpu=$(nvidia-smi -L | grep -c '^GPU')
"$STARK" bench "$T/level1" --bench-id gpu --policies sampling --budget 2 \
	--llm "replay:$T/replies" --device all --runs-in-flight "$k" --evals-per-device 4 \
	>"$T/out" 2>"$T/err"
rc=$?
"$STARK" show gpu --json >"$T/show.json"
check "a bench of $k problems on $ngpu GPU(s), every run in flight, finishes (exit $rc)" "$rc" "$(tail -n 20 "$T/err")"
[ "$(json "$T/show.json" 'j["table"][0]["success_rate"]')" = 1.0 ] &&
	json "$T/show.json" 'j["table"][0]["gpu_seconds"] > 0' | grep -q True
check "every problem has a correct candidate, judged on the GPU" $? "$(cat "$T/out")"
devs=$(for r in $(json "$T/show.json" '" ".join(p["run_id"] for p in j["problems"])'); do
	"$STARK" export "$r" --journal | "$PY" -c '
import json, sys
for l in sys.stdin:
    e = json.loads(l)
    if e["type"] == "eval_result":
        print((e.get("body") or {}).get("env", {}).get("device", "?"))'
done | sort -u | wc -l)
[ "$ngpu" -lt 2 ] || [ "$devs" -ge 2 ]
check "with $ngpu GPU(s), the evaluations ran on $devs device(s)" $? "$(cat "$T/out")"
