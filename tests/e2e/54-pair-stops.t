#!/bin/bash
# A timed pair's stops and continues with a GPU's delivered inputs
# (evaluator/stark_referee_data.py run_pair; tests/helpers/pair_stops.py):
# the untimed worker stopped through the other's call, the candidate
# stopped from its inputs' writing until its clock starts, both running
# again after the calls in either order.  The workers' I/O is a log; a
# second or less.
cd "$(dirname "$0")/../.." || exit 1
PY=$(scripts/find-python) || { echo "1..0 # skip no python with torch"; exit 0; }
exec "$PY" tests/helpers/pair_stops.py
