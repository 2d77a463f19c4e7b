#!/bin/bash
# `stark eval` end to end on the shipped example and on bad input: every
# verdict of the contract (correct, incorrect, compile_error, runtime_error,
# timeout, crashed, rejected, error), the --json fields, the exit status,
# the split stages, output floods, inputs made in each worker (values that
# are not tensors; a candidate that changes the problem's sizes in its own
# worker), KernelBench's trials as many as asked or none (--kb-trials), and
# clear errors for missing, empty and garbage files.  Prints
# TAP.
#
# Builds go to $STARK_TEST_CACHE (default tests/tmp/cache), shared by the
# normal and the sanitizer pass, so only the first run compiles.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
STARK=$BUILD/stark
PY=$(scripts/find-python 2>/dev/null) || { echo "1..0 # skip no python with torch"; exit 0; }
export STARK_CACHE=${STARK_TEST_CACHE:-$PWD/tests/tmp/cache}
mkdir -p "$STARK_CACHE"
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-e2e-eval.XXXXXX")
trap 'rm -rf "$T"' EXIT
EX=examples/hardswish_residual
P=$EX/problem.py

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }

# json FILE EXPR: evaluates a Python expression over the parsed JSON `j`.
json() { "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }

# case NAME EXPECTED-STATUS EXPECTED-EXIT PROBLEM SOLUTION [ARGS...] [-- CHECK-EXPR]
# Runs stark eval --json and checks status, exit status, and an optional
# Python expression over the JSON that must print True.
case_() {
	local name=$1 want=$2 want_rc=$3 prob=$4 sol=$5 check="True" rc st
	shift 5
	local args=()
	while [ $# -gt 0 ]; do
		if [ "$1" = "--" ]; then check=$2; break; fi
		args+=("$1"); shift
	done
	"$STARK" eval "$prob" "$sol" --json "${args[@]}" >"$T/out.json" 2>"$T/err.txt"
	rc=$?
	st=$(json "$T/out.json" 'j["status"]')
	if [ "$st" != "$want" ] || [ "$rc" -ne "$want_rc" ]; then
		not_ok "$name: status ${st:-none} (exit $rc), expected $want (exit $want_rc)" \
			"message: $(json "$T/out.json" 'j["message"]' | head -c 400)" \
			"stderr: $(tail -c 400 "$T/err.txt")"
		return
	fi
	if [ "$(json "$T/out.json" "$check")" != "True" ]; then
		not_ok "$name: check failed: $check" "message: $(json "$T/out.json" 'j["message"]' | head -c 400)"
		return
	fi
	ok "$name -> $st"
}

# usage NAME EXPECTED-EXIT STDERR-PATTERN ARGS...
usage_() {
	local name=$1 want_rc=$2 pat=$3 rc
	shift 3
	"$STARK" eval "$@" >"$T/out.txt" 2>"$T/err.txt"
	rc=$?
	if [ "$rc" -ne "$want_rc" ] || ! grep -q -- "$pat" "$T/err.txt"; then
		not_ok "$name: exit $rc, expected $want_rc with '$pat' on stderr" "stderr: $(tail -c 300 "$T/err.txt")"
	else
		ok "$name: exit $rc, '$pat'"
	fi
}

# Candidate and problem files for the bad cases.
mod() { # file body-of-forward
	cat >"$1" <<EOF
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))

    def forward(self, x, residual):
$2
EOF
}
mod "$T/raises.py" '        raise ValueError("no kernel today")'
mod "$T/segv.py" '        import ctypes
        return ctypes.string_at(0)'
mod "$T/hang.py" '        while True:
            pass'
mod "$T/alias.py" '        return x.view_as(x)'
mod "$T/flood.py" '        import sys
        sys.stdout.write("x" * (100 << 20))
        sys.stdout.flush()
        return x * torch.clamp(x + 3.0, 0.0, 6.0) / 6.0 * self.scale + residual'
cat >"$T/compile_error.py" <<'EOF'
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
torch::Tensor broken(torch::Tensor x) { return x +; }
"""
mod = load_inline(name="stark_e2e_broken", cpp_sources=src, functions=["broken"], verbose=True)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()

    def forward(self, x, residual):
        return mod.broken(x)
EOF
printf 'import torch\nclass Foo:\n    pass\n' >"$T/no_modelnew.py"
printf 'import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x:\n' >"$T/syntax.py"
printf 'import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n' >"$T/no_inputs.py"
mod "$T/meddle.py" '        return x * torch.clamp(x + 3.0, 0.0, 6.0) / 6.0 * self.scale + residual


import gc, types
for _m in gc.get_objects():
    if type(_m) is types.ModuleType and _m.__name__ == "stark_problem":
        _m.batch_size = 3'
cat >"$T/scalars_problem.py" <<'EOF'
import torch
import torch.nn as nn

n = 256


class Model(nn.Module):
    def forward(self, x, k, shift, name):
        return torch.relu(x) * k + sum(shift) + len(name)


def get_inputs():
    return [torch.randn(32, n), 3, (0.5, -1.25), "abc"]


def get_init_inputs():
    return []
EOF
cat >"$T/scalars.py" <<'EOF'
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, k, shift, name):
        return x.clamp(min=0) * float(k) + (shift[0] + shift[1] + len(name))
EOF
head -c 4096 /dev/urandom >"$T/garbage.py"
: >"$T/empty.py"

echo "1..30"

case_ "good solution" correct 0 "$P" "$EX/good.py" \
	-- 'j["correct"] is True and j["speedup"] > 0 and j["runtime_us"] > 0 and j["ref_runtime_us"] > 0 and j["reps"] >= 5 and j["trials_passed"] == 5 and j["max_abs_err"] <= 1e-4 and j["flags"] == [] and all(k in j for k in ("message", "env", "stage_ms", "runtime_ci_us", "first_bad", "log")) and j["env"].get("timing_method") == "wall_clock" and [sum(int(v[1:]) if v[0] == "+" else 1 for v in x.split()[1:]) for x in j["env"]["timing_calls_us"].split("; ")] == [j["reps"], j["reps"]]'
case_ "wrong solution" incorrect 1 "$P" "$EX/wrong.py" --no-timing \
	-- 'j["correct"] is False and j["first_bad"].startswith("[") and j["max_abs_err"] > 1e-4 and "first at" in j["message"] and j["speedup"] is None'
case_ "jailed: compile jail, then run jail loading from the cache" correct 0 "$P" "$EX/good.py" --no-timing \
	-- 'j["env"].get("ext_cached") == "1" and j["env"].get("jailed") == "1" and "seccomp" in j["env"].get("compile_sandbox", "")'
case_ "unjailed all-in-one stage" correct 0 "$P" "$EX/good.py" --sandbox none --insecure-sandbox --stage all --no-timing \
	-- 'j["env"].get("ext_cached") == "1" and j["env"].get("jailed") == "0"'
case_ "trials and seed options" correct 0 "$P" "$EX/good.py" --trials 2 --seed 7 --no-timing \
	-- 'j["trials_run"] == 2'
case_ "compiler error" compile_error 1 "$P" "$T/compile_error.py" --no-timing \
	-- '"error" in j["log"] and "stark_e2e_broken" in j["message"]'
case_ "forward raises" runtime_error 1 "$P" "$T/raises.py" --no-timing \
	-- '"ValueError" in j["message"] and "no kernel today" in j["log"] and "<stark-eval>" not in j["log"]'
case_ "segfault" crashed 1 "$P" "$T/segv.py" --no-timing \
	-- '"SIGSEGV" in j["message"] and " in string_at during forward" in j["message"] and "Segmentation fault" in j["log"] and "segv.py" in j["log"] and "in forward" in j["log"] and "<stark-eval>" not in j["log"]'
case_ "infinite loop" timeout 1 "$P" "$T/hang.py" --no-timing --timeout 8 \
	-- '"killed" in j["message"]'
case_ "output aliases an input" rejected 1 "$P" "$T/alias.py" --no-timing \
	-- '"alias" in j["message"]'
case_ "candidate changing the problem's sizes in its worker" rejected 1 "$P" "$T/meddle.py" --no-timing \
	-- '"integrity check" in j["message"] and "inputs" in j["message"]'
case_ "inputs that are not tensors" correct 0 "$T/scalars_problem.py" "$T/scalars.py" --no-timing --trials 2
case_ "100 MB of stdout" correct 0 "$P" "$T/flood.py" --no-timing --trials 1 \
	-- 'j["stdout_bytes"] >= 100 << 20 and len(j["stdout"]) <= 4096'
case_ "solution without ModelNew" runtime_error 1 "$P" "$T/no_modelnew.py" --no-timing \
	-- '"ModelNew" in j["message"]'
case_ "solution with a syntax error" runtime_error 1 "$P" "$T/syntax.py" --no-timing \
	-- '"SyntaxError" in j["message"]'
case_ "solution of binary garbage" runtime_error 1 "$P" "$T/garbage.py" --no-timing
case_ "problem without get_inputs" error 1 "$T/no_inputs.py" "$EX/good.py" --no-timing \
	-- '"get_inputs" in j["message"]'
case_ "problem with a syntax error" error 1 "$T/syntax.py" "$EX/good.py" --no-timing \
	-- '"SyntaxError" in j["message"]'
case_ "problem of binary garbage" error 1 "$T/garbage.py" "$EX/good.py" --no-timing

# KernelBench's own trials: as many as asked, or none (its verdict not sought).
case_ "two KernelBench trials" correct 0 "$P" "$EX/good.py" --no-timing --trials 1 --kb-trials 2 \
	-- 'j["verdicts"]["kernelbench"]["status"] == "correct" and j["verdicts"]["kernelbench"]["trials_run"] == 2'
case_ "no KernelBench trials: its verdict not sought" correct 0 "$P" "$EX/good.py" --no-timing --trials 1 --kb-trials 0 \
	-- 'j["verdicts"]["kernelbench"]["status"] is None and j["verdicts"]["kernelbench"]["trials_run"] == 0 and "not sought" in j["verdicts"]["kernelbench"]["reason"] and "kernelbench" not in j["message"]'
case_ "no KernelBench trials: a wrong candidate is stark's verdict alone" incorrect 1 "$P" "$EX/wrong.py" --no-timing --kb-trials 0 \
	-- 'j["verdicts"]["kernelbench"]["status"] is None and "kernelbench verdict" not in j["message"]'

usage_ "missing problem file" 2 "does not exist" "$T/nope.py" "$EX/good.py"
usage_ "empty solution file" 2 "is empty" "$P" "$T/empty.py"
usage_ "one file only" 2 "usage" "$P"
usage_ "bad device" 2 "device" "$P" "$EX/good.py" --device tpu
usage_ "bad trials" 2 "trials" "$P" "$EX/good.py" --trials 0
usage_ "bad KernelBench trials" 2 "kb-trials" "$P" "$EX/good.py" --kb-trials 1001
usage_ "KernelBench's verdict without its trials" 2 "needs KernelBench's trials" "$P" "$EX/good.py" --kb-trials 0 --verdict kernelbench

# The human report names the verdict and the speedup.
"$STARK" eval "$P" "$EX/good.py" --trials 2 >"$T/human.txt" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q '^correct' "$T/human.txt" && grep -q 'speedup' "$T/human.txt"; then
	ok "human report"
else
	not_ok "human report (exit $rc)" "$(head -c 400 "$T/human.txt")"
fi
exit 0
