# Sourced by the tests/gpu/*.t that need torch on a GPU, from the
# repository's root: sets BUILD (STARK_BUILD, else build) and PY (a python
# with torch), or prints a TAP skip and exits 0 where there is no such
# python or no usable CUDA device.
BUILD=${STARK_BUILD:-build}
PY=$(scripts/find-python) || { echo "1..0 # skip no python with torch"; exit 0; }
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
	echo "1..0 # skip no usable CUDA device (torch.cuda.is_available() is false)"
	exit 0
fi
