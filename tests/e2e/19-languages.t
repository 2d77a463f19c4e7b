#!/bin/bash
# `stark eval --language` and `--precision` on the CPU: the language read
# from a solution's imports, decorators and includes (or declared), recorded
# in env.language; a language this machine cannot judge (no GPU, or its
# package or headers absent) is `error` naming what is missing, never the
# candidate's runtime_error or compile_error; --precision casts floating
# inputs and weights (env.input_precision) and KernelBench's verdict casts
# as its harness does; bad values are usage errors.  `stark doctor` lists
# the languages.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
STARK=$BUILD/stark
PY=$(scripts/find-python 2>/dev/null) || { echo "1..0 # skip no python with torch"; exit 0; }
export STARK_CACHE=${STARK_TEST_CACHE:-$PWD/tests/tmp/cache}
mkdir -p "$STARK_CACHE"
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-e2e-lang.XXXXXX")
trap 'rm -rf "$T"' EXIT
EX=examples/hardswish_residual
P=$EX/problem.py

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
json() { "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }

# case NAME EXPECTED-STATUS EXPECTED-EXIT SOLUTION [ARGS...] [-- CHECK-EXPR]
case_() {
	local name=$1 want=$2 want_rc=$3 sol=$4 check="True" rc st
	shift 4
	local args=()
	while [ $# -gt 0 ]; do
		if [ "$1" = "--" ]; then check=$2; break; fi
		args+=("$1"); shift
	done
	"$STARK" eval "$P" "$sol" --json --no-timing "${args[@]}" >"$T/out.json" 2>"$T/err.txt"
	rc=$?
	st=$(json "$T/out.json" 'j["status"]')
	if [ "$st" != "$want" ] || [ "$rc" -ne "$want_rc" ]; then
		not_ok "$name: status ${st:-none} (exit $rc), expected $want (exit $want_rc)" \
			"message: $(json "$T/out.json" 'j["message"]' | head -c 400)" \
			"stderr: $(tail -c 400 "$T/err.txt")"
		return
	fi
	if [ "$(json "$T/out.json" "$check")" != "True" ]; then
		not_ok "$name: check failed: $check" "message: $(json "$T/out.json" 'j["message"]' | head -c 400)" \
			"env: $(json "$T/out.json" 'j["env"]' | head -c 600)"
		return
	fi
	ok "$name -> $st"
}

# A Triton solution: the package is imported at the top; the kernel never runs.
cat >"$T/triton_sol.py" <<'PYEOF'
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
PYEOF
cat >"$T/cute_sol.py" <<'PYEOF'
import torch
import cutlass
import cutlass.cute as cute


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
PYEOF
cat >"$T/tk_sol.py" <<'PYEOF'
import torch
from torch.utils.cpp_extension import load_inline

src = '#include "kittens.cuh"\nusing namespace kittens;\n'


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
PYEOF
# Pure PyTorch, in whatever dtype it is given (the reference's computation).
sed -e 's/class Model(/class ModelNew(/' "$P" >"$T/torch_sol.py"

have() { "$PY" -c "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('$1') else 1)" 2>/dev/null; }

case_ "triton on the cpu" error 1 "$T/triton_sol.py" -- \
	'j["env"]["language"].startswith("triton (imports triton") and "needs a GPU" in j["message"] and "runtime_error" not in j["message"]'
case_ "triton declared, cpu" error 1 "$T/torch_sol.py" --language triton -- \
	'j["env"]["language"] == "triton (declared)" and "needs a GPU" in j["message"]'
if have triton; then
	ok "# skip triton is installed here: its absence is not testable"
else
	case_ "triton absent on cuda" error 1 "$T/triton_sol.py" --device cuda -- \
		"\"package 'triton'\" in j[\"message\"] and 'pip install triton' in j[\"message\"]"
fi
if have cutlass; then
	ok "# skip cutlass is installed here"
else
	case_ "cute absent on cuda" error 1 "$T/cute_sol.py" --device cuda -- \
		"j['env']['language'].startswith('cute') and \"package 'cutlass'\" in j['message']"
fi
if [ -n "${THUNDERKITTENS_ROOT:-}" ]; then
	ok "# skip THUNDERKITTENS_ROOT is set here"
else
	case_ "thunderkittens absent on cuda" error 1 "$T/tk_sol.py" --device cuda -- \
		"j['env']['language'] == 'tk (includes kittens.cuh)' and 'THUNDERKITTENS_ROOT' in j['message']"
fi
case_ "cuda declared over a triton import" error 1 "$T/triton_sol.py" --language cuda -- \
	'j["env"]["language"] == "cuda (declared)" and "triton" in j["message"].lower()'
case_ "a plain solution is cuda" correct 0 "$EX/good.py" -- \
	'j["env"]["language"].startswith("cuda (") and j["env"]["input_precision"] == "fp32"'
case_ "bf16: inputs and weights cast" correct 0 "$T/torch_sol.py" --precision bf16 -- \
	'j["env"]["input_precision"] == "bf16" and "bfloat16" in j["verdicts"]["kernelbench"]["reason"] and "atol=rtol=0.01" in j["verdicts"]["kernelbench"]["reason"]'
case_ "bf16: a float32-only kernel fails as the candidate's" runtime_error 1 "$EX/good.py" --precision bf16 -- \
	'"float32" in j["message"]'

# The C compiler Triton's JIT runs, where it is a wrapper script outside
# /usr (as on hosts with a compiler in /opt): the run jail's exec list holds
# the script's interpreter, the compiler it execs and the programs that
# compiler runs, and the check made before any candidate code runs builds
# a launcher-like shared object with it.
CCW="$T/ccwrap"
mkdir -p "$CCW"
REALCC=$(command -v gcc || command -v cc)
printf '#!/bin/sh\nexec %s -O1 "$@"\n' "$REALCC" >"$CCW/gcc"
chmod +x "$CCW/gcc"
if out=$(PATH="$CCW:$PATH" "$PY" - "$T" <<'PYEOF' 2>&1
import os, sys
sys.path.insert(0, "evaluator")
import stark_triton
cc = stark_triton.compiler()
assert cc == os.path.join(sys.argv[1], "ccwrap", "gcc"), cc
paths = stark_triton.exec_paths()
assert "/bin/sh" in paths, paths
assert any(p.endswith("/cc1") for p in paths), paths
assert any(os.path.basename(p) in ("gcc", "cc") and p != cc for p in paths), paths
folder = os.path.join(sys.argv[1], "probe")
os.mkdir(folder)
assert stark_triton.probe_compiler(folder) is None
os.environ["CC"] = "/nonexistent/cc"
why = stark_triton.probe_compiler(folder)
assert why and "/nonexistent/cc" in why, why
print("ok", len(paths))
PYEOF
); then
	ok "a compiler wrapper script: its interpreter, its compiler and cc1 may run; the check builds with it and names a broken one"
else
	not_ok "a compiler wrapper script's exec list" "$out"
fi

usage_() {
	local name=$1 pat=$2 rc
	shift 2
	"$STARK" eval "$P" "$EX/good.py" "$@" >"$T/out.txt" 2>"$T/err.txt"
	rc=$?
	if [ "$rc" -ne 2 ] || ! grep -q -- "$pat" "$T/err.txt"; then
		not_ok "$name: exit $rc, expected 2 with '$pat'" "stderr: $(tail -c 300 "$T/err.txt")"
	else
		ok "$name: exit 2"
	fi
}
usage_ "unknown language" "--language must be" --language rust
usage_ "unknown precision" "--precision must be" --precision fp8

if "$STARK" doctor --json >"$T/doc.json" 2>"$T/err.txt" || [ $? -eq 1 ]; then
	if [ "$(json "$T/doc.json" 'sorted(l["language"] for l in j["languages"]) == ["cuda", "cute", "tilelang", "tk", "triton"] and [l["ok"] for l in j["languages"] if l["language"] == "cuda"] == [True] and [l["ok"] for l in j["languages"] if l["language"] == "triton"] == [False]')" = True ]; then
		ok "stark doctor lists the languages (cpu: cuda only)"
	else
		not_ok "stark doctor's languages" "$(head -c 600 "$T/doc.json")"
	fi
	# The baselines: eager always; compile exactly where this torch has
	# torch.compile (a C++ compiler is here), and why not where it has not.
	has=$("$PY" -c 'import torch; print(callable(getattr(torch, "compile", None)))')
	if [ "$(json "$T/doc.json" '[b["baseline"] for b in j["baselines"]] == ["eager", "compile"] and j["baselines"][0]["ok"] is True and str(j["baselines"][1]["ok"]) == "'"$has"'" and (j["baselines"][1]["ok"] or "has no torch.compile" in j["baselines"][1]["detail"])')" = True ]; then
		ok "stark doctor lists the baselines (compile: $has, as torch.compile here)"
	else
		not_ok "stark doctor's baselines (torch.compile here: $has)" "$(json "$T/doc.json" 'j.get("baselines")' | head -c 600)"
	fi
else
	not_ok "stark doctor ran" "$(tail -c 300 "$T/err.txt")"
fi
echo "1..$n"
exit $failed
