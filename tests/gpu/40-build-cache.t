#!/bin/bash
# The build path on a GPU: `stark doctor --device cuda` finds everything the
# CUDA formats need on this machine (or names each missing piece and its
# fix); a KernelBench-format CUDA candidate is built in its compile stage's
# scratch folder, published (its toolchain names nvcc) and judged correct,
# and judged again from the cache without building; with nvcc out of reach
# (CUDA_HOME pointing nowhere) a new candidate is `error` naming nvcc, and
# nothing is stored.  Skips where there is no GPU.  About 2 minutes (one
# CUDA build of a unit that includes torch/extension.h).
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
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-gpu-cache.XXXXXX")
trap 'rm -rf "$T"' EXIT
export STARK_CACHE=$T/cache
mkdir -p "$STARK_CACHE"
D=tests/gpu/problems/relu_scale
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

echo "1..5"

"$STARK" doctor --device cuda >"$T/doc.txt" 2>&1
rc=$?
check "stark doctor --device cuda: everything the CUDA formats need is here (exit $rc)" "$rc" "$(cat "$T/doc.txt")"
sed 's/^/# /' "$T/doc.txt"

"$STARK" eval "$D/problem.py" "$D/kb.py" --device cuda --no-timing --trials 2 --json >"$T/a.json" 2>"$T/err"
[ "$(json "$T/a.json" 'j["status"], j["env"].get("build_cache"), j["env"].get("ext_built")')" = "('correct', 'stored', '1')" ] &&
	json "$T/a.json" 'j["env"]["toolchain"]' | grep -q nvcc
check "a CUDA build is stored and judged correct" $? "$(json "$T/a.json" 'j["status"], j["message"][:300], j["env"]')"

"$STARK" eval "$D/problem.py" "$D/kb.py" --device cuda --no-timing --trials 2 --json >"$T/b.json" 2>"$T/err"
[ "$(json "$T/b.json" 'j["status"], j["env"].get("build_cache"), j["env"].get("ext_cached")')" = "('correct', 'hit', '1')" ] &&
	[ "$(json "$T/a.json" 'j["env"]["build_key"]')" = "$(json "$T/b.json" 'j["env"]["build_key"]')" ]
check "and judged again from the cache, under the same key" $? "$(json "$T/b.json" 'j["status"], j["env"]')"

cp "$D/kb.py" "$T/kb2.py"
echo "# another file" >>"$T/kb2.py"
CUDA_HOME=$T/nowhere "$STARK" eval "$D/problem.py" "$T/kb2.py" --device cuda --no-timing --trials 1 --json >"$T/c.json" 2>"$T/err"
[ "$(json "$T/c.json" 'j["status"]')" = error ] && json "$T/c.json" 'j["message"]' | grep -q "nvcc" &&
	json "$T/c.json" 'j["message"]' | grep -q "stark doctor"
check "without nvcc: error naming nvcc and stark doctor" $? "$(json "$T/c.json" 'j["status"], j["message"][:400]')"
[ "$(ls "$STARK_CACHE/store/builds" | wc -l)" -eq 1 ] && [ -z "$(ls "$STARK_CACHE/store/failed")" ]
check "and nothing of it is stored or remembered" $? "$(ls -R "$STARK_CACHE/store" | head)"
exit 0
