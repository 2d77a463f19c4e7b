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

# 13-17: a precompiled prefix.  A unit that marks the end of its prefix
# (stark_pch_end_) prepares one; a unit with that prefix and the same
# flags uses it and makes the object it makes without; another prefix, or
# other flags, goes without.
pre() { printf '#include <cstdio>\n#include <vector>\n#include <string>\n'; }
{ pre; echo 'int stark_pch_end_ = 0;'; } > canon.cu
{ pre; cat a.cu; } > same.cu
{ printf '#include <cstdio>\n#include <map>\n'; cat a.cu; } > other.cu
mkdir pch
STARK_NVCC_PCH_MAKE=$T/pch "$PY" "$W" "$NVCC" stats.jsonl -c canon.cu -o canon.o $ARCH -Xcompiler -fPIC 2>err
check "a marked unit prepares its prefix ($(last_stat pch))" \
	'[ -s canon.o ] && [[ "$(last_stat pch)" == made* ]] && ls pch/*/prefix.h.gch > /dev/null 2>&1'
chmod -R a-w pch
STARK_NVCC_PCH=$T/pch "$PY" "$W" "$NVCC" stats.jsonl -c same.cu -o same.o $ARCH -Xcompiler -fPIC 2>err
check "a unit with that prefix uses it ($(last_stat pch))" '[ -s same.o ] && [ "$(last_stat pch)" = used ]'
"$PY" "$W" "$NVCC" stats.jsonl -c same.cu -o same-none.o $ARCH -Xcompiler -fPIC 2>err
# Host symbols, less module ids (the unit that used the prefix took the
# prefix's id; cudafe++ names anonymous namespaces after it) and the name
# lengths that mangling puts before them.
syms2() { nm --defined-only "$1" | awk '{print $2, $3}' | sed -E 's/_GLOBAL__N__[0-9a-f]{8}_[0-9]+_[A-Za-z0-9_]*_cu_[0-9a-f]{8}/ANON/g; s/[0-9]+//g' | sort; }
check "its object defines what the whole file's does" 'diff <(syms2 same-none.o) <(syms2 same.o) > err'
STARK_NVCC_PCH=$T/pch "$PY" "$W" "$NVCC" stats.jsonl -c other.cu -o other.o $ARCH -Xcompiler -fPIC 2>err
check "another prefix goes without ($(last_stat pch))" '[ -s other.o ] && [ "$(last_stat pch)" = "another prefix" ]'
STARK_NVCC_PCH=$T/pch "$PY" "$W" "$NVCC" stats.jsonl -c same.cu -o same-o3.o $ARCH -Xcompiler -fPIC -O3 2>err
check "other flags go without ($(last_stat pch))" '[ -s same-o3.o ] && [ "$(last_stat pch)" = "none for this final step" ]'
chmod -R u+w pch

echo "1..$n"
exit $failed
