#!/bin/bash
# The integrity corpus on the GPU (THREATS.md R1-R19): every candidate of
# tests/integrity/EXPECT (the CPU corpus, device-agnostic; rows marked
# cpu_only are TAP skips) and of tests/gpu/integrity/EXPECT (attacks the GPU
# changes: the CUDA caching allocator, side streams, host threads, patched
# CUDA timers, device memory scans, TF32/fp16, persisting L2, uninitialised
# device memory, a second CUDA context) through `stark eval --device cuda`,
# judged as those files say (format: tests/lib/check_expect.py).  Skips
# where no CUDA device is usable.
#
# About 20 s an evaluation, 60-odd evaluations.  STARK_INTEGRITY_ONLY=REGEX
# keeps only the candidates whose path matches (a row compared with another
# -- same_speed_as, not_faster_than -- evaluates that one too).  Like
# tests/gpu/10-gpu-corpus.t it needs the jails' view of the GPU machine set
# in the environment (STARK_SANDBOX_BINDS, STARK_CUDA_ARCH; see docs/USAGE.md,
# "GPU machines").  STARK_GPU_QUICK=1 adds --no-timing (the timing bounds
# are then not checked).
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
extra=()
[ -n "${STARK_GPU_QUICK:-}" ] && extra=(--no-timing)
exec "$PY" tests/lib/check_expect.py "$BUILD/stark" tests/integrity/EXPECT tests/gpu/integrity/EXPECT \
	--device cuda --trials 3 "${extra[@]}"
