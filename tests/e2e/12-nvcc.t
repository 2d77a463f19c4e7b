#!/bin/bash
# evaluator/stark_nvcc.py, the nvcc that the compile stage gives
# load_inline: its host and device chains run side by side, and what it
# makes must be what nvcc makes.  Needs nvcc (compiling only, no GPU);
# skipped without it.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) ||
	{ echo "1..0 # skip no nvcc"; exit 0; }
PY=$(command -v python3) || { echo "1..0 # skip no python3"; exit 0; }
W=$PWD/evaluator/stark_nvcc.py
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-e2e-nvcc.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
ARCH="-gencode=arch=compute_90,code=sm_90"

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
check() { if eval "$2"; then ok "$1"; else not_ok "$1" "$(tail -c 600 err 2>/dev/null)"; fi; }
# last_stat KEY: that field of the last record in stats.jsonl
last_stat() { "$PY" -c 'import json,sys; print(json.loads(open("stats.jsonl").read().splitlines()[-1]).get(sys.argv[1]))' "$1" 2>/dev/null; }

# A unit with what tends to go wrong when host and device disagree: a
# kernel in an anonymous namespace (its name holds the module id), a
# template, a __device__ variable, and host code that launches them.
cat > a.cu <<'EOF'
#include <cstdio>
namespace { __global__ void anon_k(float *x) { x[threadIdx.x] *= 2.0f; } }
template <typename T> __global__ void tk(T *x) { x[0] += T(1); }
__device__ int counter;
int go(float *x, int *y)
{
	anon_k<<<1, 32>>>(x);
	tk<int><<<1, 1>>>(y);
	return (int)cudaGetLastError();
}
EOF

# 1-4: the same unit through nvcc and through stark_nvcc.
"$NVCC" -c a.cu -o plain.o $ARCH -Xcompiler -fPIC 2>err
"$PY" "$W" "$NVCC" stats.jsonl --generate-dependencies-with-compile \
	--dependency-output par.o.d -c a.cu -o par.o $ARCH -Xcompiler -fPIC 2>err
rc=$?
check "stark_nvcc compiles a unit (exit $rc) in parallel mode" \
	'[ $rc -eq 0 ] && [ -s par.o ] && [ "$(last_stat mode)" = parallel ] && [ "$(last_stat rc)" = 0 ]'
check "the record times both chains and the final step" \
	'"$PY" -c "import json; r=json.loads(open(\"stats.jsonl\").read().splitlines()[-1]); assert all(isinstance(r[k], float) and r[k] >= 0 for k in (\"host_s\",\"device_s\",\"final_s\",\"total_s\"))" 2>>err'
# Host symbols, less the module id that names anonymous namespaces.
syms() { nm --defined-only "$1" | awk '{print $3}' | sed -E 's/_GLOBAL__N__[0-9a-f]{8}_4_a_cu_[0-9a-f]{8}/ANON/g' | sort; }
check "its host object defines what nvcc's defines" 'diff <(syms plain.o) <(syms par.o) > err'
# Every kernel in the device code has the host-side function that
# launches it under the same name (cudafe++ names one, cicc the other):
# a host/device split on the module id would show here.
# (The cubins sit uncompressed in the object: their section names are
# .text.KERNEL.)
kernels() { strings "$1" | grep -E '^\.text\._Z[A-Za-z0-9_]*(anon_k|tk)[A-Za-z0-9_]*$' | sed 's/^\.text\.//' | sort -u; }
check "each device kernel has its host function of the same name" \
	'k=$(kernels par.o); [ "$(echo "$k" | wc -l)" -eq 2 ] && for s in $k; do nm --defined-only par.o | grep -qE " [Tt] $s$" || { echo "no host function: $s" > err; false; }; done'
check "the dependency file names the unit" 'grep -q "^par.o: a.cu$" par.o.d'

# 6: two architectures.
"$PY" "$W" "$NVCC" stats.jsonl -c a.cu -o two.o $ARCH \
	-gencode=arch=compute_80,code=sm_80 2>err
rc=$?
check "two architectures: parallel, both cubins in the object" \
	'[ $rc -eq 0 ] && [ "$(last_stat mode)" = parallel ] && [ "$(strings two.o | grep -c "^\.text\._Z2tkIiEvPT_$")" -eq $((2 * $(strings par.o | grep -c "^\.text\._Z2tkIiEvPT_$"))) ]'

# 7-8: a syntax error fails the host chain; its message comes once.
printf '__global__ void k(float *x) { x[0] = 1 }\n' > bad.cu
"$PY" "$W" "$NVCC" stats.jsonl -c bad.cu -o bad.o $ARCH 2>err
rc=$?
check "a syntax error fails (exit $rc) and leaves no object" '[ $rc -ne 0 ] && [ ! -e bad.o ] && [ "$(last_stat rc)" != 0 ]'
check "its message is nvcc's, once" '[ "$(grep -c "error: expected a \";\"" err)" -eq 1 ]'

# 9: an error only the device side sees (a host function called from a
# kernel) fails through the device chain.
cat > dev.cu <<'EOF'
int host_only(int v) { return v + 1; }
__global__ void k(int *x) { x[0] = host_only(x[0]); }
EOF
"$PY" "$W" "$NVCC" stats.jsonl -c dev.cu -o dev.o $ARCH 2>err
rc=$?
"$NVCC" -c dev.cu -o dev-plain.o $ARCH 2>err-plain
prc=$?
check "a device-only error fails as with nvcc (exits $rc, $prc), naming host_only" \
	'[ $rc -ne 0 ] && [ $prc -ne 0 ] && grep -q host_only err && [ ! -e dev.o ]'

# 10-11: other forms run the real nvcc unchanged.
"$PY" "$W" "$NVCC" stats.jsonl --version > v1 2>err
"$NVCC" --version > v2
check "--version is nvcc's own" 'cmp -s v1 v2 && [ "$(last_stat mode)" = "plain: not a plain compile" ]'
"$PY" "$W" "$NVCC" stats.jsonl -c a.cu bad.cu $ARCH > /dev/null 2>err
check "two units: left to nvcc" '"$PY" -c "import json; r=json.loads(open(\"stats.jsonl\").read().splitlines()[-1]); assert r[\"mode\"].startswith(\"plain\")"'

# 12: nothing left behind in TMPDIR.
mkdir tmp
TMPDIR=$T/tmp "$PY" "$W" "$NVCC" - -c a.cu -o t.o $ARCH 2>err
check "its intermediate files are removed" '[ -s t.o ] && [ -z "$(ls -A tmp)" ]'

echo "1..$n"
exit $failed
