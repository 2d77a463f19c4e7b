#!/bin/bash
# The output window on the device (the default on GPUs): the reference's worker makes it with CUDA's virtual memory management and
# passes its descriptor, through the referee, to the candidate's, which
# maps it; chunks are then copied on the device, not through host memory.
# 6 GiB outputs stream through it (1 GiB, chunks of 512 MiB) and are judged
# correct at 1.00x within 2%; 32 MiB outputs get a window of their size;
# through an 8 MiB window (two slots of 4) too; a thread writing the answer
# over it after the call returned is rejected or incorrect, never correct;
# the env says the window was used.  STARK_OUTPUT_WINDOW=host keeps the
# window in host memory, where the same race is never correct either.
# About 2 minutes on an H200.  Skips
# where no CUDA device is usable.
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. tests/gpu/judge.sh
echo "1..4"
unset STARK_OUTPUT_WINDOW
M=tests/gpu/memory
A=tests/gpu/integrity/affine

judge "6 GiB outputs through the device window: correct at 1.00x within 2%" correct \
	'e.get("output_window_device", "").startswith("1024 MiB") and "chunks of up to 512 MiB" in e.get("output_window", "") and abs(d["speedup"] - 1) <= 0.02' \
	$M/big/problem.py $M/big/honest.py
STARK_WINDOW_BYTES=$((8 << 20)) judge "through an 8 MiB device window (two slots): correct" correct \
	'e.get("output_window_device", "").startswith("8 MiB") and "two slots" in e.get("output_window", "")' \
	$A/problem.py $A/h01_fast.py
judge "a thread writing the answer over the device window after the call: never correct" \
	'incorrect|rejected' 'e.get("output_window_device", "").startswith("32 MiB")' \
	$A/problem.py $A/r10_race_device_window.py
STARK_OUTPUT_WINDOW=host judge "STARK_OUTPUT_WINDOW=host: a thread writing over the host window after the call: never correct" \
	'incorrect|rejected' '"output_window_device" not in e' \
	$A/problem.py tests/gpu/integrity/affine/r10_race_window.py
