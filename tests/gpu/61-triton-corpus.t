#!/bin/bash
# The Triton corpus (tests/gpu/triton/EXPECT): cheats written in Triton
# (subsampled programs, a float16 downcast, an output cached between
# calls, work left on a side stream, TF32 and float16 tl.dot operands) with
# honest twins, and hostile Triton candidates (an out-of-bounds store, a
# kernel that never ends, exec of anything but Triton's tools, caches
# planted for other evaluations), through `stark eval --device cuda`
# jailed.  Skips without a GPU or triton.  About two minutes.
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
if ! "$PY" -c 'import triton' >/dev/null 2>&1; then
	echo "1..0 # skip triton is not importable here"
	exit 0
fi
exec "$PY" tests/lib/check_expect.py "$BUILD/stark" tests/gpu/triton/EXPECT --device cuda --trials 3
