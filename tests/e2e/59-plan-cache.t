#!/bin/bash
# The problem's footprint estimate is kept for its later evaluations
# (evaluator/stark_plan_cache.py, pool/buildcache.c): the first evaluation
# makes it and the orchestrator keeps it in the store; the second is sent
# it and uses it, with the same estimate; an entry made under another
# fingerprint, one that is not JSON, one over the size cap and one that is
# a link are each not used (made again, and said why), and the first two
# are replaced by a good one (the link itself, not its target); another
# problem has an entry of its own, and one without an estimate none.
# The referee's words to the orchestrator (plan_publish) are not in the
# result.  About 15 s.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${STARK_BUILD:-build}
STARK=$BUILD/stark
PY=$(scripts/find-python 2>/dev/null) || { echo "1..0 # skip no python with torch"; exit 0; }
T=$(mktemp -d "${TMPDIR:-/tmp}/stark-e2e-plan.XXXXXX")
trap 'rm -rf "$T"' EXIT
export STARK_CACHE=$T/cache
PLANS=$STARK_CACHE/store/plans
P=tests/problems/softmax_temp

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
json() { "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
ev() { "$STARK" eval "$P/problem.py" "$P/fast.py" --json >"$T/$1.json" 2>"$T/$1.err"; }
seen() { json "$T/$1.json" '(j["status"], j["env"].get("plan_cache"), j["env"].get("mem_estimate"), "plan_publish" in j["env"])'; }
# An entry without its forward's seconds on meta (measured each time).
norm() { json "$1" 'sorted((k, v) for k, v in j.items() if k != "fwd_s")'; }
entries() { find "$PLANS" -maxdepth 1 -type f ! -name '.tmp-*' | wc -l; }
echo "1..8"

ev first
got=$(seen first)
est=$(json "$T/first.json" 'j["env"].get("mem_estimate")')
entry=$(find "$PLANS" -maxdepth 1 -type f 2>/dev/null | head -n 1)
doc=$(json "$entry" 'sorted(j)')
if [[ "$got" == "('correct', 'made: none kept', 'inputs "*", False)" ]] && [ "$(entries)" = 1 ] &&
	[ "$doc" = "['fp', 'fwd', 'fwd_s', 'gpu_us_least', 'in', 'kernels', 'out', 'weights']" ]; then
	ok "the first evaluation makes the estimate; one entry kept, its fields; plan_publish not in the result"
else
	not_ok "first: $got; $(entries) entries: $doc" "$(tail -c 600 "$T/first.err")"
fi
good=$(cat "$entry")
goodn=$(norm "$entry")

ev second
got=$(seen second)
if [ "$got" = "('correct', 'kept from an earlier evaluation', '$est', False)" ]; then
	ok "the second is sent the entry and uses it: the same estimate"
else
	not_ok "second: $got (first: $est)"
fi

# An entry of another torch, Python or estimator (a well-formed one with
# another fingerprint): not used, and replaced by this one's.
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["fp"]="0"*64; d["fwd"]=1; json.dump(d, open(sys.argv[1],"w"))' "$entry"
ev other
got=$(seen other)
if [ "$got" = "('correct', 'made: kept under another torch, Python or estimator', '$est', False)" ] &&
	[ "$(norm "$entry")" = "$goodn" ]; then
	ok "an entry of another fingerprint: made again, said so, and the entry replaced"
else
	not_ok "another fingerprint: $got; entry now $(cat "$entry")"
fi

printf 'not json at all' >"$entry"
ev garbage
got=$(seen garbage)
if [ "$got" = "('correct', 'made: the kept entry is not JSON', '$est', False)" ] &&
	[ "$(norm "$entry")" = "$goodn" ]; then
	ok "an entry that is not JSON: made again, said so, and the entry replaced"
else
	not_ok "not JSON: $got; entry now $(cat "$entry")"
fi

# Over the size cap (PROTO_PLAN_MAX), and a link: the orchestrator sends
# neither.
{ printf '%s' "$good"; head -c 4096 /dev/zero | tr '\0' ' '; } >"$entry"
ev big
got=$(seen big)
big_ok=$([ "$got" = "('correct', 'made: none kept', '$est', False)" ] && echo yes)
cp "$T/first.json" "$T/target"
rm -f "$entry"
ln -s "$T/target" "$entry"
ev link
got2=$(seen link)
if [ "$big_ok" = yes ] && [ "$got2" = "('correct', 'made: none kept', '$est', False)" ] &&
	[ ! -L "$entry" ] && [ "$(norm "$entry")" = "$goodn" ]; then
	ok "an entry over the size cap, and a link: neither sent, made again, the link replaced by an entry"
else
	not_ok "big: $got; link: $got2"
fi

# The link was replaced, not written through: its target is unchanged.
if cmp -s "$T/target" "$T/first.json"; then
	ok "the link's target is not written through"
else
	not_ok "the link's target changed: $(head -c 200 "$T/target")"
fi

"$STARK" eval tests/problems/layernorm/problem.py tests/problems/layernorm/fast.py --json \
	>"$T/ln.json" 2>"$T/ln.err"
got=$(json "$T/ln.json" '(j["status"], j["env"].get("plan_cache"))')
if [ "$got" = "('correct', 'made: none kept')" ] && [ "$(entries)" = 2 ]; then
	ok "another problem makes and keeps an entry of its own"
else
	not_ok "another problem: $got; $(entries) entries" "$(tail -c 600 "$T/ln.err")"
fi

# A problem that does not run on meta (data-dependent code) has no
# estimate: nothing is kept.
"$STARK" eval tests/problems/rowsum_max/problem.py tests/problems/rowsum_max/fast.py --json \
	>"$T/row.json" 2>"$T/row.err"
got=$(json "$T/row.json" '(j["status"], j["env"].get("plan_cache"), j["env"].get("mem_estimate", "")[:6])')
if [ "$got" = "('correct', 'made: none kept', 'none: ')" ] && [ "$(entries)" = 2 ]; then
	ok "no estimate (the problem does not run on meta): nothing kept"
else
	not_ok "no estimate: $got; $(entries) entries" "$(tail -c 600 "$T/row.err")"
fi
exit $failed
