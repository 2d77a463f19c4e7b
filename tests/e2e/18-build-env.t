#!/bin/bash
# 18-build-env.t -- a machine that lacks what a build needs, then is fixed.
#
# Without ninja (off PATH), without setuptools (hidden in the jails by a
# bind over it that raises ModuleNotFoundError as a missing package does)
# and without torch's C++ headers (an empty folder bound over them), a
# KernelBench build is `error` -- not the candidate's compile_error or
# runtime_error -- with the missing piece and its fix named and `stark
# doctor` pointed at, and nothing is remembered in the build cache; `stark
# doctor` lists the same.  With the machine as it is, the next evaluation
# builds and is correct, with nothing deleted by hand, and the one after
# loads that build from the cache.  A compile error of the candidate's own
# code is remembered, and only for the toolchain it was made with.  Nothing
# is uninstalled: each lack is in the evaluation's view only.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
STARK=$PWD/$BUILD/stark
PY=$(scripts/find-python 2>/dev/null) || { echo "1..0 # skip no python with torch"; exit 0; }
if ! "$BUILD/tests/sbx_run" --stage compile -- /bin/true 2>/dev/null; then
	echo "1..0 # skip this machine cannot build the jail (see sbx_run)"
	exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-e2e-env.XXXXXX")
trap 'rm -rf "$T"' EXIT
export STARK_CACHE=$T/cache
mkdir -p "$STARK_CACHE"
EX=examples/hardswish_residual
P=$EX/problem.py
GOOD=$EX/good.py

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
check() { # NAME COND-EXIT-STATUS [DIAGNOSTICS...]
	local name=$1 rc=$2
	shift 2
	if [ "$rc" -eq 0 ]; then ok "$name"; else not_ok "$name" "$@"; fi
}
json() { "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
# What the build cache holds of builds besides its empty folders (the
# problem's footprint estimate, store/plans, is the reference's and does not
# depend on the build environment: tests/e2e/59-plan-cache.t).
stored() { find "$STARK_CACHE/store" "$STARK_CACHE/scratch" -mindepth 1 -maxdepth 2 | grep -v '/store/builds$\|/store/failed$\|/store/plans\(/[^/]*\)\?$' | head -n 5; }

# The machine's views: without ninja; setuptools and torch's headers hidden.
mkdir -p "$T/bin" "$T/nosetuptools" "$T/empty"
IFS=: read -ra path_dirs <<<"$PATH"
for d in "${path_dirs[@]}"; do
	for f in "$d"/*; do
		b=${f##*/}
		[ "$b" = ninja ] || [ -e "$T/bin/$b" ] || ln -s "$f" "$T/bin/$b"
	done
done
# The operator's binds (a venv, a toolkit outside /usr) stay; ours go on top.
BINDS=${STARK_SANDBOX_BINDS:+$STARK_SANDBOX_BINDS:}
printf 'raise ModuleNotFoundError("No module named %s", name="setuptools")\n' "'setuptools'" \
	>"$T/nosetuptools/__init__.py"
SETUPTOOLS=$("$PY" -c 'import os, setuptools; print(os.path.realpath(os.path.dirname(setuptools.__file__)))')
TORCH_H=$("$PY" -c 'import os, torch; print(os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "include", "torch")))')

echo "1..19"

# lack NAME FIX-PATTERN ENV...: the evaluation is `error` naming the fix.
shopt -s extglob
lack() {
	local name=$1 fix=$2 rc st msg
	shift 2
	env "$@" "$STARK" eval "$P" "$GOOD" --json --no-timing --trials 1 >"$T/out.json" 2>"$T/err.txt"
	rc=$?
	st=$(json "$T/out.json" 'j["status"]')
	msg=$(json "$T/out.json" 'j["message"]')
	[ "$st" = error ] && [ "$rc" -eq 1 ] && [[ "$msg" == *$fix* ]] && [[ "$msg" == *"stark doctor"* ]] &&
		[[ "$msg" == *"not the candidate's fault"* ]]
	check "$name: error naming '$fix' (exit $rc)" $? "status ${st:-none}: ${msg:0:400}" "$(tail -c 300 "$T/err.txt")"
	[ -z "$(stored)" ]
	check "$name: nothing is stored or remembered in the build cache" $? "$(stored)"
}

lack "without ninja" "ninja*@(apt-get install ninja-build|pip install ninja)" PATH="$T/bin" STARK_SANDBOX_BINDS="$BINDS$T/bin"
lack "without setuptools" "@(apt-get install python3-setuptools|pip install setuptools)" STARK_SANDBOX_BINDS="$BINDS$T/nosetuptools=$SETUPTOOLS"
lack "without torch's headers" "torch headers*@(apt-get install libtorch-dev|reinstall torch)" STARK_SANDBOX_BINDS="$BINDS$T/empty=$TORCH_H"

# The human report of an `error` points at stark doctor.
PATH="$T/bin" STARK_SANDBOX_BINDS="$BINDS$T/bin" "$STARK" eval "$P" "$GOOD" --no-timing --trials 1 >"$T/human.txt" 2>&1
grep -q '^error: .*stark doctor' "$T/human.txt"
check "the human report of an error names stark doctor" $? "$(head -c 400 "$T/human.txt")"

# stark doctor says the same, outside and inside the jail.
PATH="$T/bin" STARK_SANDBOX_BINDS="$BINDS$T/bin" "$STARK" doctor --json >"$T/doc.json" 2>"$T/err.txt"
rc=$?
[ "$rc" -eq 1 ] && [ "$(json "$T/doc.json" 'j["ok"]')" = False ] &&
	[ "$(json "$T/doc.json" '"ninja" in [c["name"] for c in j["checks"] if not c["ok"]]')" = True ] &&
	json "$T/doc.json" '[c["fix"] for c in j["checks"] if not c["ok"]]' | grep -q "install ninja"
check "stark doctor without ninja: exit 1, ninja missing with its fix" $? "exit $rc" "$(json "$T/doc.json" '[c for c in j["checks"] if not c["ok"]]')"

# The machine as it is: the same candidate builds, nothing deleted by hand.
"$STARK" eval "$P" "$GOOD" --json --no-timing --trials 1 >"$T/out.json" 2>"$T/err.txt"
rc=$?
[ "$rc" -eq 0 ] && [ "$(json "$T/out.json" 'j["status"]')" = correct ] &&
	[ "$(json "$T/out.json" 'j["env"]["ext_built"]')" = 1 ] &&
	[ "$(json "$T/out.json" 'j["env"]["build_cache"]')" = stored ]
check "fixed: the next evaluation builds, is correct and is stored" $? "exit $rc: $(json "$T/out.json" 'j["status"], j["message"][:300], j["env"].get("build_cache")')"
key=$(json "$T/out.json" 'j["env"]["build_key"]')
[ -f "$STARK_CACHE/store/builds/$key/.stark-entry" ] && [ -z "$(ls "$STARK_CACHE/scratch")" ]
check "its build is in store/builds under its key, and no scratch folder is left" $? "$(ls -R "$STARK_CACHE" | head)"
"$STARK" eval "$P" "$GOOD" --json --no-timing --trials 1 >"$T/out.json" 2>"$T/err.txt"
[ "$(json "$T/out.json" 'j["status"], j["env"]["build_cache"], j["env"].get("ext_built"), j["env"]["ext_cached"]')" = "('correct', 'hit', '0', '1')" ]
check "and the one after loads it from the cache" $? "$(json "$T/out.json" 'j["status"], j["env"]')"

"$STARK" doctor >"$T/doc.txt" 2>&1
rc=$?
[ "$rc" -eq 0 ] && grep -q "everything cpu needs is here" "$T/doc.txt" && ! grep -q MISSING "$T/doc.txt"
check "stark doctor on this machine: everything cpu needs (exit $rc)" $? "$(cat "$T/doc.txt")"
sed 's/^/# /' "$T/doc.txt"
STARK_RUN_MEM_MIB=3000 "$STARK" doctor --json >"$T/doc.json" 2>/dev/null
d=$(json "$T/doc.json" '[c["detail"] for c in j["checks"] if c["name"] == "run jail memory"][0]')
[[ "$d" == "2.9 GiB for one evaluation, 2.9 GiB each with --jobs 4 (STARK_RUN_MEM_MIB;"* ]] &&
	grep -Eq "^  ok +run jail memory +[0-9.]+ GiB for one evaluation, [0-9.]+ GiB each with --jobs 4 \(three quarters" "$T/doc.txt"
check "stark doctor gives the run jail's memory, and says where STARK_RUN_MEM_MIB sets it" $? "$d" "$(grep 'run jail memory' "$T/doc.txt")"

# On a GPU device it names the GPU's lock (the machine's, in STARK_LOCK_DIR)
# and the CPUs kept for that GPU's timings; a lock folder open to others
# without the sticky bit is refused with its fix.
STARK_LOCK_DIR=$T/locks STARK_TIMING_CPUS="0;1" "$STARK" doctor --device cuda:1 --json >"$T/doc.json" 2>/dev/null
d=$(json "$T/doc.json" '[(c["ok"], c["detail"]) for c in j["checks"] if c["name"] in ("GPU lock", "timing CPUs")]')
[ "$d" = "[(True, '$T/locks/stark-gpu-lock-cuda1'), (True, 'GPU 1: 1 (STARK_TIMING_CPUS=0;1)')]" ] &&
	[ "$(stat -c %a "$T/locks")" = 700 ]
check "stark doctor on cuda:1 names its lock file and its timing CPUs" $? "$d"
mkdir -p "$T/open" && chmod 777 "$T/open"
STARK_LOCK_DIR=$T/open "$STARK" doctor --device cuda:1 --json >"$T/doc.json" 2>/dev/null
d=$(json "$T/doc.json" '[(c["ok"], c["detail"], c["fix"]) for c in j["checks"] if c["name"] == "GPU lock"][0]')
[[ "$d" == "(False, 'the lock folder $T/open may be written by others and is not sticky"*"STARK_LOCK_DIR"* ]]
check "a lock folder open to others is refused, with the fix" $? "$d"

# A probe stopped by the jail (a call the compile jail forbids) is reported,
# not waited on: the evaluator stand-in opens an inet socket, then prints a
# report; stark doctor names the call and probes again outside the jail.
cat >"$T/ev.c" <<'EOF'
#include <stdio.h>
#include <sys/socket.h>
int main(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	printf("{\"checks\": [{\"name\": \"python\", \"ok\": true, \"detail\": \"stand-in %s\", \"fix\": \"\"}],"
	       " \"formats\": [\"kernelbench\"], \"languages\": [], \"baselines\": [], \"toolchain\": \"stand-in\"}\n",
	       s >= 0 ? "socket" : "nosocket");
	return 0;
}
EOF
if cc -o "$T/ev" "$T/ev.c" 2>"$T/cc.txt"; then
	STARK_EVALUATOR=$T/ev timeout 60 "$STARK" doctor >"$T/doc.txt" 2>&1
	rc=$?
	[ "$rc" -eq 0 ] && grep -q "outside any jail (in the compile jail: .*seccomp: syscall socket)" "$T/doc.txt" &&
		grep -q "stand-in socket" "$T/doc.txt"
	check "a probe the jail stops is reported with the call, then run outside (exit $rc)" $? "$(cat "$T/doc.txt")"
else
	check "the probe stand-in compiles" 1 "$(cat "$T/cc.txt")"
fi


# The candidate's own compile error is remembered, for its toolchain only.
cat >"$T/broken.py" <<'EOF'
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

mod = load_inline(name="stark_e2e_env_broken", cpp_sources="torch::Tensor f(torch::Tensor x) { return x +; }",
                  functions=["f"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()

    def forward(self, x, residual):
        return mod.f(x)
EOF
"$STARK" eval "$P" "$T/broken.py" --json --no-timing >"$T/out.json" 2>/dev/null
[ "$(json "$T/out.json" 'j["status"], j["env"].get("build_cache")')" = "('compile_error', 'failure remembered')" ] &&
	[ "$(ls "$STARK_CACHE/store/failed" | wc -l)" -eq 1 ]
check "a compile error in the candidate's code is remembered" $? "$(json "$T/out.json" 'j["status"], j["message"][:200], j["env"]')"
"$STARK" eval "$P" "$T/broken.py" --json --no-timing >"$T/out.json" 2>/dev/null
[ "$(json "$T/out.json" 'j["status"], j["env"].get("build_cache")')" = "('compile_error', 'remembered failure')" ] &&
	json "$T/out.json" 'j["log"]' | grep -q "failed to build before with this toolchain"
check "the same sources are not compiled again" $? "$(json "$T/out.json" 'j["status"], j["env"]')"
CXXFLAGS=-O1 "$STARK" eval "$P" "$T/broken.py" --json --no-timing >"$T/out.json" 2>/dev/null
[ "$(json "$T/out.json" 'j["status"], j["env"].get("build_cache")')" = "('compile_error', 'failure remembered')" ] &&
	[ "$(ls "$STARK_CACHE/store/failed" | wc -l)" -eq 2 ]
check "another toolchain (other flags) compiles them again" $? "$(json "$T/out.json" 'j["status"], j["env"]')"
exit 0
