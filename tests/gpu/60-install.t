#!/bin/bash
# 60-install.t -- stark installed (make install into a DESTDIR, the tree
# then moved as a whole) on the GPU machine: `stark version --json` reports
# the CUDA torch was built with and nvcc, and the moved copy judges a
# fast-format kernel of the GPU corpus correct on the GPU.  Skips where
# there is no GPU.
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "1..0 # skip no GPU (nvidia-smi -L failed)"
	exit 0
fi
T=$(mktemp -d /tmp/stark-gpu-60.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
echo "1..4"

"$BUILD/stark" version --json >"$T/v.json" 2>"$T/v.err"
python3 - "$T/v.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
e = v["evaluator"]
assert "error" not in e, e
assert e["torch_cuda"], e
print("# torch %s, CUDA %s, nvcc %s, compiler %s" % (e["torch"], e["torch_cuda"], e["nvcc"], e["cxx"]))
PY
ok $? "stark version --json: the evaluator's torch is a CUDA build"
# make install wants the man pages (scdoc); without scdoc, install by hand.
if make --no-print-directory -s BUILD="$BUILD" install DESTDIR="$T/dest" >"$T/i.out" 2>&1; then
	src=$T/dest/usr/local
else
	src=$T/dest/usr/local
	mkdir -p "$src/bin" "$src/libexec/stark" "$src/share/stark" &&
		cp "$BUILD/stark" "$src/bin/" && cp "$BUILD/stark-eval" "$src/libexec/stark/" &&
		cp -r prompts "$src/share/stark/"
fi
mv "$src" "$T/moved"
[ -x "$T/moved/bin/stark" ] && [ -x "$T/moved/libexec/stark/stark-eval" ]
ok $? "installed and moved"
"$T/moved/bin/stark" --version >"$T/mv.out" 2>&1 && grep -q "^evaluator $T/moved/libexec/stark/stark-eval" "$T/mv.out"
ok $? "the moved copy finds its evaluator"
P=tests/gpu/problems/relu_scale
"$T/moved/bin/stark" eval "$P/problem.py" "$P/fast.py" --device cuda --json >"$T/e.json" 2>"$T/e.err"
rc=$?
[ "$rc" -eq 0 ] && grep -q '"status": *"correct"' "$T/e.json"
ok $? "the moved copy judges relu_scale/fast.py correct on the GPU (exit $rc)"
[ "$rc" -eq 0 ] || sed 's/^/# /' "$T/e.err" | head -n 20
