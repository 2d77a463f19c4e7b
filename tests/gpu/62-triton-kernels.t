#!/bin/bash
# 31 honest Triton kernels for KernelBench level-1 and level-2 problems
# (tests/gpu/triton/kernels/: elementwise, softmax, norms, reductions, a
# scan, tl.dot matmuls, fused GEMM chains), each judged against
# KernelBench's own problem (from $KB, default .kb/checkout) at reduced
# sizes: all `correct`, language triton, no flags.  The speedups are in the
# TAP lines; tests/gpu/triton/judge.py --real gives KernelBench's sizes.
# Skips without a GPU, triton or the checkout.  Two to four minutes.
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
if ! "$PY" -c 'import triton' >/dev/null 2>&1; then
	echo "1..0 # skip triton is not importable here"
	exit 0
fi
exec "$PY" tests/gpu/triton/judge.py --tap --stark "$BUILD/stark" --jobs "${STARK_GPU_JOBS:-4}"
