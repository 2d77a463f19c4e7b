#!/bin/bash
# 61-upgrade.t -- a store written by stark 0.1.0 (store format 1: the
# fixture tests/fixtures/store-format-1/) opened by this stark.
#
# The store is migrated in place on first open, after a backup that is
# itself the format-1 store; list, show (runs and the bench) and export read
# it; resuming its interrupted run (whose start recorded no prompts) is
# refused with what to do, then with --accept-upgrade continues (journaled
# as an upgrade event) and finishes; resumed again later it keeps the
# prompts it took even when the installed ones change.  A store of a format
# newer than this stark's is refused untouched, naming both versions.  A
# few seconds (replayed replies and results).
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
B=${STARK_BUILD:-build}
STARK=$ROOT/$B/stark
F=$ROOT/tests/fixtures/store-format-1
T=$(mktemp -d /tmp/stark-61.XXXXXX)
# The fixture's runs journaled their replay files here (absolute paths).
FX=/tmp/stark-fixture-format1
cleanup() { rm -rf "$T"; }
trap cleanup EXIT
export STARK_PROMPTS=$T/prompts
cp -r "$ROOT/prompts" "$T/prompts"
unset STARK_STORE

n=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
note() { sed 's/^/# /' "$@" | head -n 20; }

echo "1..15"

S=$T/store
mkdir -p "$S" "$FX"
gunzip -c "$F/data.mdb.gz" >"$S/data.mdb"
# The replies the interrupted run lacked, and the recorded results.
cat "$F/llm.jsonl" "$F/llm-star.jsonl" >"$T/llm.jsonl" && mv -f "$T/llm.jsonl" "$FX/llm.jsonl"
cp "$F/eval.jsonl" "$T/eval.jsonl" && mv -f "$T/eval.jsonl" "$FX/eval.jsonl"

# 1-3: opened, migrated after a backup.
"$STARK" list --store "$S" >"$T/list.out" 2>"$T/list.err"
ok $? "stark list opens the format-1 store"
grep -q "migrated from format 1 to 2; the format-1 store was saved as $S/backups/format-1-" "$T/list.err"
ok $? "it says it migrated, and where the backup is"
[ $? -eq 0 ] || note "$T/list.err"
bk=$(ls -d "$S"/backups/format-1-* 2>/dev/null | head -n 1)
[ -n "$bk" ] && [ -s "$bk/data.mdb" ] && grep -q "fx-paused" "$T/list.out" && grep -q "fx-bench" "$T/list.out"
ok $? "the backup holds a data.mdb; the list shows the runs and the bench"

# 4-6: read as it was written.
"$STARK" show fx-done --store "$S" >"$T/show.out" 2>&1 &&
	grep -q "^stark: before 0.2.0" "$T/show.out" && grep -q "best: node" "$T/show.out"
ok $? "stark show of a finished format-1 run"
"$STARK" show fx-bench --store "$S" --json >"$T/bench.json" 2>&1 &&
	python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); assert b["stark"] is None and len(b["table"]) == 2' "$T/bench.json"
ok $? "stark show --json of a format-1 bench: its table, stark null"
"$STARK" export fx-done --store "$S" -o "$T/best.py" 2>/dev/null && grep -q "class ModelNew" "$T/best.py"
ok $? "stark export of a format-1 run"

# 7-8: resume without --accept-upgrade says what changed and what to do.
ev0=$("$STARK" export fx-paused --store "$S" --journal 2>/dev/null | wc -l)
"$STARK" resume fx-paused --store "$S" >"$T/r1.out" 2>"$T/r1.err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "recorded no version (before 0.2.0).*The run recorded no prompts" "$T/r1.err" &&
	grep -q -- "stark resume fx-paused --accept-upgrade" "$T/r1.err"
ok $? "resume of a run that recorded no prompts asks for --accept-upgrade (exit $rc)"
[ $? -eq 0 ] || note "$T/r1.err"
ev1=$("$STARK" export fx-paused --store "$S" --journal 2>/dev/null | wc -l)
[ "$ev0" -gt 0 ] && [ "$ev0" -eq "$ev1" ] && "$STARK" show fx-paused --store "$S" | grep -q "attempts 2/6"
ok $? "the refused resume journaled nothing ($ev0 events)"

# 9-11: --accept-upgrade continues with this stark's prompts, journaled.
"$STARK" resume fx-paused --store "$S" --accept-upgrade >"$T/r2.out" 2>"$T/r2.err"
ok $? "resume --accept-upgrade finishes the run"
[ $? -eq 0 ] || note "$T/r2.err"
"$STARK" export fx-paused --store "$S" --journal 2>/dev/null >"$T/journal.jsonl"
grep -q '"type": *"upgrade"' "$T/journal.jsonl" || grep -q '"upgrade"' "$T/journal.jsonl"
ok $? "the upgrade is journaled"
"$STARK" show fx-paused --store "$S" --json >"$T/paused.json" &&
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["state"]=="finished" and r["attempts"]==6 and r["stark"]["store"]==2 and len(r["stark"]["prompts"])==16, r["stark"]' "$T/paused.json"
ok $? "the run finished its 6 attempts and names the stark it continued with"

# 12-13: a run keeps its recorded prompts when the installed ones change:
# it stops after 2 attempts when its replies run out, the prompts change,
# then it resumes with more replies.
P=$T/problem.py
cp "$ROOT/examples/bench/level1/1_hardswish_residual.py" "$P"
cp "$F/llm.jsonl" "$T/keep.jsonl"
"$STARK" run "$P" --run-id keep --store "$S" --budget 4 --llm "replay:$T/keep.jsonl" \
	--eval "replay:$F/eval.jsonl" --set seed=24 >/dev/null 2>"$T/k1.err"
cat "$F/llm.jsonl" "$F/llm-star.jsonl" >"$T/keep.jsonl"
h1=$("$STARK" show keep --store "$S" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["stark"]["prompts"])')
echo "# changed by a later installation" >>"$T/prompts/plan.txt"
"$STARK" resume keep --store "$S" >/dev/null 2>"$T/k2.err"
rc=$?
h2=$("$STARK" show keep --store "$S" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["stark"]["prompts"])')
[ "$rc" -eq 0 ] && [ -n "$h1" ] && [ "$h1" = "$h2" ] && ! grep -q "accept-upgrade" "$T/k2.err" &&
	grep -q "attempts 4/4" <("$STARK" show keep --store "$S") && grep -q "interrupted" "$T/k1.err"
ok $? "a run resumed after the prompts changed keeps its own ($h1)"
[ $? -eq 0 ] || note "$T/k2.err"
"$STARK" --version | grep -q "^prompts [0-9a-f]\{16\}" && ! "$STARK" --version | grep -q "^prompts $h1"
ok $? "stark --version shows the changed prompt set's hash"

# 14-15: a store of a newer format is refused, untouched.
N=$T/newer
mkdir -p "$N"
gunzip -c "$F/data.mdb.gz" >"$N/data.mdb"
python3 - "$N/data.mdb" <<'PY'
import sys
p = sys.argv[1]
b = open(p, "rb").read()
i = b.find(b"stark-store 1")
assert i >= 0 and b.count(b"stark-store 1") == 1
open(p, "wb").write(b[:i] + b"stark-store 9" + b[i + 13:])
PY
sum1=$(md5sum <"$N/data.mdb")
"$STARK" list --store "$N" >"$T/n.out" 2>"$T/n.err"
rc=$?
[ "$rc" -eq 3 ] && grep -q "store format 9, newer than this stark's (2)" "$T/n.err" && grep -q -- "--store DIR" "$T/n.err"
ok $? "a store of format 9 is refused, naming both versions and what to do (exit $rc)"
[ $? -eq 0 ] || note "$T/n.err"
[ "$(md5sum <"$N/data.mdb")" = "$sum1" ] && [ ! -e "$N/backups" ]
ok $? "and left untouched"
