#!/bin/bash
# Every GPU of the host by its name: `stark eval --device cuda:N` judges an
# honest candidate correct on each GPU nvidia-smi lists, and `stark doctor
# --device cuda:N` finds its device node.  The run jail shows the assigned
# GPU's node alone, so the evaluator inside sees that GPU as its only device
# (on a 4-GPU H200 host every evaluation on cuda:1-3 had ended "invalid
# device ordinal").  A GPU's use is checked from the outside: the
# evaluation's workers appear in that GPU's compute processes, not another's.
# Skips where there is no GPU; one GPU still checks cuda:0.  About 20 s a GPU.
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "1..0 # skip no GPU (nvidia-smi -L failed)"
	exit 0
fi
PY=$(scripts/find-python) || { echo "1..0 # skip no python with torch"; exit 0; }
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-gpu-devices.XXXXXX")
trap 'rm -rf "$T"' EXIT
mapfile -t gpus < <(nvidia-smi --query-gpu=index --format=csv,noheader | tr -d ' ')
echo "1..$((2 * ${#gpus[@]}))"
n=0
failed=0
prob=tests/gpu/problems/cumsum_rows    # fast format (NVRTC): no build to wait for
cand=$prob/fast.py
for i in "${gpus[@]}"; do
	"$BUILD/stark" eval "$prob/problem.py" "$cand" --device "cuda:$i" --json --trials 2 \
		>"$T/out.json" 2>"$T/err.txt" &
	pid=$!
	# The GPUs the evaluation's processes are seen on, while it runs.
	seen=""
	while kill -0 "$pid" 2>/dev/null; do
		seen="$seen $(nvidia-smi --query-compute-apps=gpu_bus_id --format=csv,noheader 2>/dev/null | tr -d ' ' | sort -u | tr '\n' ' ')"
		sleep 0.5
	done
	wait "$pid"
	bus=$(nvidia-smi -i "$i" --query-gpu=pci.bus_id --format=csv,noheader | tr -d ' ')
	st=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$T/out.json" 2>/dev/null)
	others=$(printf '%s\n' $seen | sort -u | grep -vx "$bus" | tr '\n' ' ')
	n=$((n + 1))
	if [ "$st" = correct ] && [[ " $seen " == *" $bus "* ]] && [ -z "$others" ]; then
		echo "ok $n - cuda:$i ($bus): correct, its processes on that GPU alone"
	else
		failed=1
		echo "not ok $n - cuda:$i ($bus): status ${st:-none}, seen on [${seen# }], others [$others]"
		"$PY" -c 'import json,sys; print("# " + json.load(open(sys.argv[1])).get("message", "")[:400])' "$T/out.json" 2>/dev/null
		tail -n 3 "$T/err.txt" | sed 's/^/# /'
	fi
	n=$((n + 1))
	if "$BUILD/stark" doctor --device "cuda:$i" --json 2>/dev/null | "$PY" -c '
import json, sys
checks = json.load(sys.stdin)["checks"]
gpu = [c for c in checks if c.get("name") == "GPU device"]
sys.exit(0 if gpu and gpu[0].get("ok") else 1)'; then
		echo "ok $n - doctor --device cuda:$i finds its device node"
	else
		failed=1
		echo "not ok $n - doctor --device cuda:$i: no device node found"
	fi
done
exit $failed
