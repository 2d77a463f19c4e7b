#!/bin/bash
# 60-install.t -- stark installed with `make install`, run with its source
# tree out of reach.
#
# Installs into a temporary DESTDIR (the prefix the build was made for),
# moves the installed tree as a whole elsewhere, and in a mount namespace
# where the source tree is hidden under an empty tmpfs, runs from the moved
# copy: `stark --version` (its parts found relative to itself), the demo's
# evaluation (`stark eval` of the example's good and wrong solutions, real
# builds on the CPU) and a replayed search (`stark run` of the demo bench's
# first problem with its recorded replies, real evaluations), the man page
# and the bash completion (commands, run ids).  A stark copied without its
# parts fails with an installation error naming the paths it tried (no
# `stark resume` advice).  `make uninstall` removes what install put there.
# Builds come from the build cache (STARK_TEST_CACHE, else
# tests/tmp/cache): under 2 minutes with them cached, about 3 cold.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
B=${STARK_BUILD:-build}
T=$(mktemp -d /tmp/stark-60.XXXXXX)
cleanup() { rm -rf "$T"; }
trap cleanup EXIT
CACHE=${STARK_TEST_CACHE:-$ROOT/tests/tmp/cache}
mkdir -p "$CACHE"
unset STARK_PROMPTS STARK_EVALUATOR STARK_STORE
export STARK_INSTALL_T=$T

n=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
note() { sed 's/^/# /' "$@" | head -n 20; }

echo "1..14"

if ! unshare -m true 2>/dev/null; then
	echo "# no mount namespaces here: cannot hide the source tree"
	for i in $(seq 1 14); do echo "ok $i # SKIP no mount namespaces"; done
	exit 0
fi

# 1-2: install, as a package builder would (DESTDIR), in the FHS layout.
make --no-print-directory -s BUILD="$B" install DESTDIR="$T/dest" >"$T/install.out" 2>&1
rc=$?
ok $rc "make install DESTDIR=..."
[ "$rc" -eq 0 ] || note "$T/install.out"
P=$(make --no-print-directory -s -f Makefile -p 2>/dev/null | sed -n 's/^PREFIX ?= //p;s/^PREFIX := //p' | head -n 1)
P=${P:-/usr/local}
I=$T/dest$P
missing=""
for f in bin/stark libexec/stark/stark-eval share/stark/prompts/plan.txt share/stark/prompts/format_fast.txt \
	share/stark/examples/hardswish_residual/problem.py share/stark/examples/bench/replies/1_hardswish_residual.jsonl \
	share/man/man1/stark.1 share/man/man1/stark-bench.1 share/man/man1/stark-version.1 \
	share/bash-completion/completions/stark; do
	[ -e "$I/$f" ] || missing="$missing $f"
done
[ -z "$missing" ]
ok $? "the FHS layout under $P${missing:+ (missing:$missing)}"

# The installed tree moved as a whole.
mkdir -p "$T/moved"
mv "$I" "$T/moved/prefix"
M=$T/moved/prefix
cat >"$T/inside.sh" <<'INSIDE'
set -u
T=$STARK_INSTALL_T
M=$T/moved/prefix
S=$M/bin/stark
EX=$M/share/stark/examples
cd "$T"
out() { "$@" >"$T/$STEP.out" 2>&1; echo "$?" >"$T/$STEP.rc"; }
[ -e "$ROOT/prompts/plan.txt" ] || [ -e "$ROOT/Makefile" ]
echo "$?" >"$T/hidden.rc"
STEP=version out "$S" --version
STEP=good out "$S" eval "$EX/hardswish_residual/problem.py" "$EX/hardswish_residual/good.py" --json
STEP=wrong out "$S" eval "$EX/hardswish_residual/problem.py" "$EX/hardswish_residual/wrong.py"
STEP=run out "$S" run "$EX/bench/level1/1_hardswish_residual.py" --run-id inst --store "$T/store" --budget 3 \
	--set seed=24 --llm "replay:$EX/bench/replies/1_hardswish_residual.jsonl"
STEP=show out "$S" show inst --store "$T/store"
mkdir -p "$T/lonely" && cp "$S" "$T/lonely/stark"
STEP=lonely out "$T/lonely/stark" run "$EX/bench/level1/1_hardswish_residual.py" --store "$T/store2" \
	--llm "replay:$EX/bench/replies/1_hardswish_residual.jsonl"
INSIDE
# The source tree hidden: an empty tmpfs over it; the build cache bound
# beside the test's folder first, so builds stay cached.
mkdir -p "$T/cache"
t0=$SECONDS
ROOT=$ROOT unshare -m --propagation private bash -c '
	mount --bind "$1" "$2" && mount -t tmpfs -o size=1m,mode=0755 none "$ROOT" &&
	STARK_CACHE=$2 exec bash "$3"' _ "$CACHE" "$T/cache" "$T/inside.sh"
ok $? "ran from the moved copy with the source tree hidden ($((SECONDS - t0)) s)"
[ "$(cat "$T/hidden.rc")" -ne 0 ]
ok $? "the source tree was out of reach"

# 5: --version found every part relative to itself.
grep -q "^stark $(cat VERSION) (commit " "$T/version.out" &&
	grep -q "^prompts [0-9a-f]\{16\} ($M/share/stark/prompts)" "$T/version.out" &&
	grep -q "^evaluator $M/libexec/stark/stark-eval: torch " "$T/version.out"
ok $? "stark --version: the release, prompts and evaluator of the moved copy"
[ $? -eq 0 ] || note "$T/version.out"

# 6-7: the demo's evaluation.
[ "$(cat "$T/good.rc")" -eq 0 ] && grep -q '"status": *"correct"' "$T/good.out" &&
	grep -q "\"release\": *\"$(cat VERSION)\"" "$T/good.out"
ok $? "stark eval good.py: correct, and the result names its stark"
[ $? -eq 0 ] || note "$T/good.out"
[ "$(cat "$T/wrong.rc")" -eq 1 ] && grep -q "incorrect" "$T/wrong.out"
ok $? "stark eval wrong.py: incorrect (exit 1)"

# 8-9: the replayed search, with the installed prompts, recorded in the run.
[ "$(cat "$T/run.rc")" -eq 0 ]
ok $? "stark run with the demo's recorded replies finds a correct kernel"
[ "$(cat "$T/run.rc")" -eq 0 ] || note "$T/run.out"
grep -q "^stark: $(cat VERSION) (commit .*), prompts [0-9a-f]\{16\}" "$T/show.out"
ok $? "stark show names the stark and prompt set that made the run"

# 10: a stark without its parts says what is missing, not "resume".
[ "$(cat "$T/lonely.rc")" -ne 0 ] && grep -q "installation is incomplete" "$T/lonely.out" &&
	grep -q "$P/share/stark/prompts/plan.txt" "$T/lonely.out" && ! grep -q "resume" "$T/lonely.out"
ok $? "a stark copied alone: an installation error naming the paths tried"
[ $? -eq 0 ] || note "$T/lonely.out"

# 11: the man page.
if command -v man >/dev/null; then
	MANPATH=$M/share/man man -P cat stark 2>/dev/null | grep -q "stark-bench" &&
		MANPATH=$M/share/man man -P cat stark-resume 2>/dev/null | grep -q -- "--accept-upgrade"
	ok $? "man stark, man stark-resume"
else
	echo "ok 11 # SKIP man is not installed"
	n=11
fi

# 12: completion of commands and of run ids.
# shellcheck disable=SC1091
words=$(bash -c '
	source "$1/share/bash-completion/completions/stark"
	COMP_WORDS=(stark b); COMP_CWORD=1; _stark; echo "${COMPREPLY[*]}"
	COMP_WORDS=("$1/bin/stark" show --store "$2" in); COMP_CWORD=4; _stark; echo "${COMPREPLY[*]}"
	COMP_WORDS=(stark resume --a); COMP_CWORD=2; _stark; echo "${COMPREPLY[*]}"' _ "$M" "$T/store")
[ "$words" = "$(printf 'bench\ninst\n--accept-upgrade')" ]
ok $? "bash completion: commands, run ids, options"
[ $? -eq 0 ] || echo "# got: $words"

# 13-14: uninstall removes what install put there.
make --no-print-directory -s BUILD="$B" install DESTDIR="$T/dest2" >"$T/install2.out" 2>&1 &&
	make --no-print-directory -s BUILD="$B" uninstall DESTDIR="$T/dest2" >>"$T/install2.out" 2>&1
ok $? "make install then make uninstall"
left=$(find "$T/dest2" -type f | head -n 5)
[ -z "$left" ]
ok $? "nothing left after uninstall${left:+: $left}"
