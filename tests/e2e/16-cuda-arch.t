#!/bin/bash
# The compile jail sees no GPU, so for a "cuda" device stark names the
# target itself: $STARK_CUDA_ARCH and $TORCH_CUDA_ARCH_LIST from nvidia-smi's
# compute capability of the chosen GPU, where they are not set.  A stand-in
# nvidia-smi answers here; a stand-in evaluator (tests/env_dump) prints the
# environment it was given and fails, and the result's log carries that.
# Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
STARK=$BUILD/stark
DUMP=$PWD/$BUILD/tests/env_dump
[ -x "$DUMP" ] || { echo "1..0 # skip $DUMP not built"; exit 0; }
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-e2e-arch.XXXXXX")
trap 'rm -rf "$T"' EXIT
P=examples/hardswish_residual/problem.py
S=examples/hardswish_residual/good.py
mkdir "$T/bin"
printf '#!/bin/sh\necho "0, 9.0"\necho "1, 10.0"\necho "2, garbage"\n' >"$T/bin/nvidia-smi"
chmod +x "$T/bin/nvidia-smi"

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }

# given DIR DEVICE [VAR=VALUE...]: the environment the evaluator got, one
# variable a line, with DIR first on PATH.
given() {
	local dir=$1 dev=$2
	shift 2
	env -u STARK_CUDA_ARCH -u TORCH_CUDA_ARCH_LIST PATH="$dir:$PATH" STARK_EVALUATOR="$DUMP" \
		STARK_ZYGOTE=0 "$@" "$STARK" eval "$P" "$S" --device "$dev" --json \
		>"$T/out.json" 2>"$T/err.txt"
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["log"])' "$T/out.json" 2>/dev/null
}

echo "1..6"

e=$(given "$T/bin" cuda)
if grep -qx "STARK_CUDA_ARCH=sm_90" <<<"$e" && grep -qx "TORCH_CUDA_ARCH_LIST=9.0" <<<"$e"; then
	ok "cuda: GPU 0's capability 9.0 becomes sm_90 and 9.0"
else
	not_ok "cuda: arch not set from nvidia-smi" "$e" "$(tail -c 300 "$T/err.txt")"
fi

e=$(given "$T/bin" cuda:1)
if grep -qx "STARK_CUDA_ARCH=sm_100" <<<"$e" && grep -qx "TORCH_CUDA_ARCH_LIST=10.0" <<<"$e"; then
	ok "cuda:1: GPU 1's capability 10.0 becomes sm_100 and 10.0"
else
	not_ok "cuda:1: arch not set from nvidia-smi" "$e"
fi

e=$(given "$T/bin" cuda:1 STARK_CUDA_ARCH=sm_80 TORCH_CUDA_ARCH_LIST=8.0)
if grep -qx "STARK_CUDA_ARCH=sm_80" <<<"$e" && grep -qx "TORCH_CUDA_ARCH_LIST=8.0" <<<"$e"; then
	ok "values the user set are kept"
else
	not_ok "the user's STARK_CUDA_ARCH was replaced" "$e"
fi

e=$(given "$T/bin" cuda:1 STARK_CUDA_ARCH=sm_86)
if grep -qx "STARK_CUDA_ARCH=sm_86" <<<"$e" && grep -qx "TORCH_CUDA_ARCH_LIST=8.6" <<<"$e"; then
	ok "STARK_CUDA_ARCH alone: TORCH_CUDA_ARCH_LIST follows it"
else
	not_ok "STARK_CUDA_ARCH alone: no matching TORCH_CUDA_ARCH_LIST" "$e"
fi

e=$(given "$T/bin" cuda:2)
if grep -q "^STARK_ENV_DUMP" <<<"$e" && ! grep -q "CUDA_ARCH" <<<"$e"; then
	ok "a malformed line for the GPU sets nothing"
else
	not_ok "a malformed nvidia-smi line set an arch" "$e"
fi

e=$(given "$T/bin" cpu)
if grep -q "^STARK_ENV_DUMP" <<<"$e" && ! grep -q "CUDA_ARCH" <<<"$e"; then
	ok "device cpu: nvidia-smi not asked"
else
	not_ok "device cpu set an arch" "$e"
fi
exit $failed
