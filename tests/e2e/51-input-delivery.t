#!/bin/bash
# Delivered inputs (STARK_INPUT_DELIVERY=on; evaluator/stark_worker_delivery.py):
# candidates that compute their outputs before their timed exchange, from
# their worker's GEN or from a child that leaves the process group, no longer
# read faster than the reference, the reference's worker catches inputs
# changed in place, and honest candidates pass.  About a minute on 2 cores.
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
PY=$(scripts/find-python) || { echo "1..0 # skip no python with torch"; exit 0; }
STARK_INPUT_DELIVERY=on exec "$PY" tests/lib/check_expect.py "$BUILD/stark" \
	tests/integrity/EXPECT.delivery --trials 3
