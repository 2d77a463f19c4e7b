#!/bin/bash
# Triton's warm cache: a Triton candidate judged twice with one build
# cache ($T/cache) compiles its kernels the first time (env jit_cache
# "cold", the cache published: jit_store "stored ...") and none the second
# ("warm ...", triton_jit 0 kernels), `correct` both times; the same
# solution with one byte more is cold again (the solution's bytes are in
# the key); a candidate that plants files in its own cache, judged twice,
# gets its plant back only for itself, and the honest one after it is
# unaffected.  The two wall times are in the TAP lines.  Skips without a
# GPU or triton.  About a minute.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/preamble.sh
STARK=$BUILD/stark
if ! "$PY" -c 'import triton' >/dev/null 2>&1; then
	echo "1..0 # skip triton is not importable here"
	exit 0
fi
C=tests/gpu/triton/corpus
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-gpu-jit.XXXXXX")
trap 'rm -rf "$T"' EXIT
export STARK_CACHE=$T/cache

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
json() { "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }

# case NAME PROBLEM SOLUTION CHECK: `correct` and CHECK on the result (j)
case_() {
	local name=$1 prob=$2 sol=$3 check=$4 st
	"$STARK" eval "$prob" "$sol" --device cuda --json >"$T/out.json" 2>"$T/err.txt"
	st=$(json "$T/out.json" 'j["status"]')
	if [ "$st" != correct ]; then
		not_ok "$name: status ${st:-none}" "message: $(json "$T/out.json" 'j["message"]' | head -c 600)" \
			"stderr: $(tail -c 400 "$T/err.txt")"
	elif [ "$(json "$T/out.json" "$check")" != "True" ]; then
		not_ok "$name: check failed: $check" "env: $(json "$T/out.json" 'j["env"]' | head -c 1200)"
	else
		ok "$name ($(json "$T/out.json" '"wall %.1f s; %s; %s; %s" % (j["wall_ms"] / 1e3, j["env"].get("jit_cache"), j["env"].get("triton_jit"), j["env"].get("jit_store"))'))"
	fi
}

case_ "first evaluation: cold, Triton compiles, the cache is published" "$C/scale/problem.py" "$C/scale/h02_autotune.py" \
	'j["env"].get("jit_cache") == "cold" and j["env"].get("jit_store", "").startswith("stored (") and not j["env"].get("triton_jit", "0").startswith("0 ") and "jit_publish" not in j["env"] and "jit_toolchain" not in j["env"]'
case_ "second evaluation: warm, nothing compiled" "$C/scale/problem.py" "$C/scale/h02_autotune.py" \
	'j["env"].get("jit_cache", "").startswith("warm: ") and j["env"].get("triton_jit", "0 ").startswith("0 ") and "jit_store" not in j["env"]'
cp "$C/scale/h02_autotune.py" "$T/h02_changed.py"
echo "# one byte more" >>"$T/h02_changed.py"
case_ "the same solution with a byte more: cold" "$C/scale/problem.py" "$T/h02_changed.py" \
	'j["env"].get("jit_cache") == "cold"'
case_ "a candidate planting in its own cache: published" "$C/hostile/problem.py" "$C/hostile/t_cache_plant.py" \
	'j["env"].get("jit_cache") == "cold" and j["env"].get("jit_store", "").startswith("stored (")'
case_ "the planting candidate again: its own plant, warm" "$C/hostile/problem.py" "$C/hostile/t_cache_plant.py" \
	'j["env"].get("jit_cache", "").startswith("warm: ")'
case_ "the honest twin after it: cold, its own" "$C/hostile/problem.py" "$C/hostile/h01_triton.py" \
	'j["env"].get("jit_cache") == "cold"'
case_ "the cache probe after both: finds nothing planted" "$C/hostile/problem.py" "$C/hostile/t_cache_probe.py" 'True'
entries=$(ls "$STARK_CACHE/jit" | grep -c '^[0-9a-f]\{64\}$')
if [ "$entries" = 5 ]; then
	ok "five entries in jit/ ($(du -sk "$STARK_CACHE/jit" | cut -f1) KiB, $(find "$STARK_CACHE/jit" -type f | wc -l) files)"
else
	not_ok "jit/ holds $entries entries, expected 5" "$(ls -la "$STARK_CACHE/jit")"
fi
echo "1..$n"
exit $failed
