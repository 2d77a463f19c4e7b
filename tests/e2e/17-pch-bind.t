#!/bin/bash
# $STARK_NVCC_PCH, the folder of prepared prefixes stark_nvcc includes, is
# seen read-only in the compile jail (the candidate's top level runs
# there, and must not change what later builds include) and not at all in
# the run jail.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
STARK=$BUILD/stark
PY=$(scripts/find-python 2>/dev/null) || { echo "1..0 # skip no python with torch"; exit 0; }
export STARK_CACHE=${STARK_TEST_CACHE:-$PWD/tests/tmp/cache}
mkdir -p "$STARK_CACHE"
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-e2e-pch.XXXXXX")
trap 'rm -rf "$T"' EXIT
mkdir "$T/pch"
echo keep >"$T/pch/prefix.h"

# A solution whose top level probes the folder in each stage: the compile
# stage writes what it saw into its build folder (its one writable path,
# which the run jail gets read-only), and the run stage stops with both
# reports.
TOKEN=$$-$RANDOM
cat >"$T/sol.py" <<PY
import os

d = os.environ.get("STARK_NVCC_PCH", "")
seen = os.path.isdir(d)
try:
    with open(os.path.join(d, "prefix.h"), "w") as f:
        f.write("poisoned")
    what = "WROTE"
except OSError as e:
    what = "refused (%s)" % e.strerror
note = os.path.join(os.path.dirname(os.environ["STARK_CUDA_CACHE"].split(os.pathsep)[0]),
                    "pchprobe-$TOKEN")
if os.environ.get("STARK_CUDA_MODE") == "compile":
    with open(note, "w") as f:
        f.write("compile: seen=%s write=%s" % (seen, what))
else:
    with open(note) as f:
        raise RuntimeError("PCHPROBE %s; run: seen=%s" % (f.read(), seen))


class ModelNew:
    pass
PY

echo "1..3"
n=0
check() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; echo "# $(head -c 400 "$T/out.json")"; fi; }

STARK_NVCC_PCH=$T/pch "$STARK" eval examples/hardswish_residual/problem.py "$T/sol.py" \
	--stage split --json >"$T/out.json" 2>"$T/err"
check "the compile jail sees the folder read-only" \
	'grep -q "PCHPROBE compile: seen=True write=refused (Read-only file system)" "$T/out.json"'
check "the run jail does not see it" 'grep -q "PCHPROBE .*; run: seen=False" "$T/out.json"'
check "the folder is as it was" '[ "$(cat "$T/pch/prefix.h")" = keep ]'
