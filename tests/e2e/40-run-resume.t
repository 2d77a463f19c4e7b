#!/bin/bash
# 40-run-resume.t -- `stark run` survives kill -9 at any instant.
#
# Resume equivalence: with replayed LLM replies (a replay file, then the mock
# server answering every request alike) and replayed evaluation results, a
# run killed with SIGKILL at 20+ random instants (a few ms apart, so most
# land inside a synced LMDB commit or an LLM call) and resumed each time ends
# with the same tree (`stark show --json` minus timing fields) as a run
# never interrupted, and the mock server saw no request again once its
# response was journaled.  Also: a second process on a run refuses, SIGTERM
# pauses cleanly, a fatal LLM error (401) pauses and resume continues, an
# evaluation that ends in `error` (a broken machine) pauses without being
# charged to the candidate and resume sends it again, show/list/export work,
# an exported replay file reproduces the run.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
B=${STARK_BUILD:-build}
STARK=$ROOT/$B/stark
PY=${PYTHON:-python3}
FIX="$PY $ROOT/tests/helpers/run_fixture.py"
CHK="$PY $ROOT/tests/helpers/run_check.py"
PROBLEM=$ROOT/tests/helpers/run_problem.py
T=$(mktemp -d /tmp/stark-40.XXXXXX)
MOCK_PID=
cleanup() {
	[ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
export STARK_STORE=$T/store
export STARK_PROMPTS=$ROOT/prompts
unset STARK_API_KEY OPENAI_API_KEY ANTHROPIC_API_KEY

n=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
note() { sed 's/^/# /' "$@" | head -n 20; }
ms() { date +%s%3N; }

echo "1..28"

$FIX llm-replay "$PROBLEM" "$T/llm.jsonl"
$FIX eval-replay "$T/eval.jsonl" --nodes 400 --seed 11
$FIX mock-script "$PROBLEM" "$T/mock.json"
BUDGET=60
COMMON=(--budget "$BUDGET" --eval "replay:$T/eval.jsonl" --set seed=5)

# 1-4: the uninterrupted reference run.
t0=$(ms)
"$STARK" run "$PROBLEM" --run-id ref --llm "replay:$T/llm.jsonl" "${COMMON[@]}" >"$T/ref.out" 2>"$T/ref.err"
rc=$?
tref=$(($(ms) - t0))
ok $rc "uninterrupted run with replayed replies finishes (${tref} ms)"
[ "$(head -n 1 "$T/ref.out")" = ref ]
ok $? "the run id is the first line of stdout"
"$STARK" show ref --json >"$T/ref.json" 2>"$T/err"
ok $? "stark show --json"
$CHK fields "$T/ref.json"
ok $? "show --json has run_id, state, budget, attempts, nodes, best, spend"

# Kills a run/resume loop at random instants until it finishes.
#   kill_loop ID MAXKILLS SNAPDIR PORT -- run args...
KILLS=0
kill_loop() {
	local id=$1 max=$2 snap=$3 port=$4 started=0 pid rc d span
	shift 5
	KILLS=0
	# Kills land within the first 1/30 of an uninterrupted run's time, so
	# that 20+ of them come before the run ends even when that time was
	# measured on a busy machine (at 1/12 an ASan run once ended after 7).
	span=$((tref / 30 + 4))
	mkdir -p "$snap"
	for ((round = 0; round < 400; round++)); do
		if [ "$started" -eq 0 ]; then
			"$STARK" run "$@" --run-id "$id" >>"$snap/log" 2>&1 &
		else
			"$STARK" resume "$id" >>"$snap/log" 2>&1 &
		fi
		pid=$!
		if [ "$KILLS" -ge "$max" ]; then
			wait "$pid" 2>/dev/null
			return $?
		fi
		printf -v d '0.%03d' $((RANDOM % span + 1))
		sleep "$d"
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		rc=$?
		if [ "$rc" -eq 0 ]; then
			return 0
		fi
		if [ "$rc" -eq 137 ]; then
			if [ -n "$port" ]; then
				"$STARK" export "$id" --journal -o "$snap/j" 2>/dev/null || : >"$snap/j"
				$CHK answered "$snap/j" >"$snap/answered.$KILLS"
				$CHK stats "$port" | $PY -c 'import json,sys; print(json.load(sys.stdin)["requests"])' >"$snap/mark.$KILLS"
			fi
			KILLS=$((KILLS + 1))
		fi
		if "$STARK" show "$id" --json >/dev/null 2>&1; then started=1; else started=0; fi
	done
	return 1
}

# 5-8: killed 20+ times with replayed replies, resumed each time.
kill_loop k1 30 "$T/k1" "" -- "$PROBLEM" --llm "replay:$T/llm.jsonl" "${COMMON[@]}"
rc=$?
ok $rc "killed run with replayed replies finishes after resumes"
[ "$KILLS" -ge 20 ]
ok $? "it was killed with SIGKILL $KILLS times (20+)"
"$STARK" show k1 --json >"$T/k1.json" 2>"$T/err"
$PY - "$T/k1.json" "$T/ref.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
a["run_id"] = b["run_id"]
json.dump(a, open(sys.argv[1], "w"))
EOF
$CHK same "$T/k1.json" "$T/ref.json"
ok $? "its tree equals the uninterrupted run's"
grep -q '"state": "finished"' "$T/ref.json" && grep -q "\"attempts\": $BUDGET" "$T/ref.json"
ok $? "the reference run is finished with all $BUDGET attempts"

# 9-13: the same against the mock LLM server, which counts requests.
$PY "$ROOT/tests/mock_llm.py" --script "$T/mock.json" --port-file "$T/port" \
	--parent-pid $$ --max-seconds 600 --log-bodies >/dev/null 2>&1 &
MOCK_PID=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
PORT=$(cat "$T/port")
MOCK="openai:http://127.0.0.1:$PORT/v1"
"$STARK" run "$PROBLEM" --run-id mref --llm "$MOCK" --model mock "${COMMON[@]}" >/dev/null 2>"$T/err"
ok $? "uninterrupted run against the mock server finishes"
"$STARK" show mref --json >"$T/mref.json"
$CHK stats "$PORT" >"$T/stats0.json"
before=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$T/stats0.json")
kill_loop k2 30 "$T/k2" "$PORT" -- "$PROBLEM" --llm "$MOCK" --model mock "${COMMON[@]}"
rc=$?
ok $rc "killed run against the mock server finishes after resumes ($KILLS kills)"
"$STARK" show k2 --json >"$T/k2.json"
$PY - "$T/k2.json" "$T/mref.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
a["run_id"] = b["run_id"]
json.dump(a, open(sys.argv[1], "w"))
EOF
$CHK same "$T/k2.json" "$T/mref.json"
ok $? "its tree equals the uninterrupted mock run's"
[ "$KILLS" -ge 20 ]
ok $? "it was killed $KILLS times (20+)"
$CHK stats "$PORT" >"$T/stats.json"
$PY - "$T/stats.json" "$before" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
s["log"] = s["log"][int(sys.argv[2]):]
json.dump(s, open(sys.argv[1], "w"))
EOF
for f in "$T"/k2/mark.*; do
	v=$(cat "$f")
	echo $((v - before)) >"$f"
done
"$STARK" export k2 --journal -o "$T/k2.journal"
$CHK audit "$T/stats.json" "$T/k2.journal" "$T/k2" >"$T/audit" 2>&1
rc=$?
cat "$T/audit"
ok $rc "the mock server saw no request again after its response was journaled"

# 14-16: a second process on the same run refuses; SIGTERM pauses cleanly.
cat >"$T/slow.json" <<EOF
{"default": $($PY -c 'import json,sys; d=json.load(open(sys.argv[1]))["default"]; d["delay"]=3; print(json.dumps(d))' "$T/mock.json")}
EOF
$PY "$ROOT/tests/mock_llm.py" --script "$T/slow.json" --port-file "$T/port2" \
	--parent-pid $$ --max-seconds 600 >/dev/null 2>&1 &
SLOW_PID=$!
for _ in $(seq 100); do [ -s "$T/port2" ] && break; sleep 0.05; done
"$STARK" run "$PROBLEM" --run-id busy --llm "openai:http://127.0.0.1:$(cat "$T/port2")/v1" \
	--model mock "${COMMON[@]}" >"$T/busy.out" 2>"$T/busy.err" &
BUSY=$!
for _ in $(seq 100); do [ -s "$T/busy.out" ] && break; sleep 0.05; done
sleep 0.3
"$STARK" resume busy >"$T/second.out" 2>"$T/second.err"
rc=$?
[ "$rc" -ne 0 ] && grep -q "in use by process $BUSY" "$T/second.err"
ok $? "a second process on the same run refuses (exit $rc: $(head -n 1 "$T/second.err"))"
kill -TERM "$BUSY"
wait "$BUSY"
rc=$?
state=$($PY -c 'import json,sys; print(json.load(sys.stdin)["state"])' < <("$STARK" show busy --json))
[ "$rc" -ne 0 ] && [ "$state" = interrupted ] && grep -q "stark resume busy" "$T/busy.err"
ok $? "SIGTERM stops the run, journaled as interrupted (exit $rc, state $state)"
kill "$SLOW_PID" 2>/dev/null
"$STARK" resume busy --dry-run >"$T/dry.out" 2>&1
grep -q "open attempt 1: plan on node 0" "$T/dry.out" && grep -q "a1.plan.r0: in flight" "$T/dry.out"
ok $? "resume --dry-run shows the open attempt and the request it will send again"
note "$T/dry.out"

# 17-19: a fatal LLM error (401) pauses the run; resume with the key continues.
$PY "$ROOT/tests/mock_llm.py" --script "$T/mock.json" --port-file "$T/port3" --key sekrit-key-123 \
	--parent-pid $$ --max-seconds 600 >/dev/null 2>&1 &
KEY_PID=$!
for _ in $(seq 100); do [ -s "$T/port3" ] && break; sleep 0.05; done
STARK_API_KEY=wrong-key-456 "$STARK" run "$PROBLEM" --run-id auth --budget 4 \
	--llm "openai:http://127.0.0.1:$(cat "$T/port3")/v1" --model mock \
	--eval "replay:$T/eval.jsonl" >"$T/auth.out" 2>"$T/auth.err"
rc=$?
state=$($PY -c 'import json,sys; print(json.load(sys.stdin)["state"])' < <("$STARK" show auth --json))
[ "$rc" -ne 0 ] && [ "$state" = interrupted ] && grep -q "401" "$T/auth.err"
ok $? "a 401 pauses the run with a clear message (exit $rc, state $state)"
note "$T/auth.err"
STARK_API_KEY=sekrit-key-123 "$STARK" resume auth >/dev/null 2>"$T/auth2.err"
rc=$?
state=$($PY -c 'import json,sys; print(json.load(sys.stdin)["state"])' < <("$STARK" show auth --json))
[ "$rc" -eq 0 ] && [ "$state" = finished ]
ok $? "resume with the right key finishes it (exit $rc, state $state)"
! grep -rqa "sekrit-key-123\|wrong-key-456" "$STARK_STORE" "$T"/*.err "$T"/*.out
ok $? "the API key is nowhere in the store or the output"
kill "$KEY_PID" 2>/dev/null

# 20-22: list, show, export.
"$STARK" list >"$T/list" 2>&1
grep -q '^ref .*finished' "$T/list" && grep -q '^busy .*interrupted' "$T/list"
ok $? "stark list shows the runs and their states"
"$STARK" show ref >"$T/show.txt" 2>&1 && grep -q '^tree (' "$T/show.txt" && grep -q '^  plan ' "$T/show.txt"
ok $? "stark show prints the tree and the spend per role"
"$STARK" export ref -o "$T/best.py" 2>/dev/null
rc=$?
best=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["best"]["node"])' "$T/ref.json")
"$STARK" export ref --node "$best" >"$T/node.py"
[ "$rc" -eq 0 ] && cmp -s "$T/best.py" "$T/node.py" && $PY -m py_compile "$T/best.py" &&
	grep -q 'class ModelNew' "$T/best.py"
ok $? "stark export writes the best node's code as a Python solution"

# 23-24: the journal is the recording: its replies replay the run exactly.
"$STARK" export ref --responses -o "$T/rec.jsonl" && "$STARK" export ref --results -o "$T/res.jsonl"
ok $? "stark export --responses / --results"
"$STARK" run "$PROBLEM" --run-id again --llm "replay:$T/rec.jsonl" --budget "$BUDGET" \
	--eval "replay:$T/res.jsonl" --set seed=5 >/dev/null 2>"$T/err"
"$STARK" show again --json >"$T/again.json"
$PY - "$T/again.json" "$T/ref.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for o in (a, b):
    o["run_id"] = "x"
    o.pop("options")
    o.pop("routes")
json.dump(a, open(sys.argv[1], "w")); json.dump(b, open(sys.argv[1] + ".ref", "w"))
EOF
$CHK same "$T/again.json" "$T/again.json.ref"
ok $? "a run replayed from the exported journal has the same tree"

# 25: no evaluator child inherits the API key.  A stand-in evaluator (an
# ELF: the jail execs through a descriptor, which scripts cannot use) prints
# its environment to stderr and exits without a result, an `error` that
# pauses the run; the run journals that stderr with the pause.
STARK_EVALUATOR=$ROOT/$B/tests/env_dump OPENAI_API_KEY=leaky-key-789 "$STARK" run "$PROBLEM" \
	--run-id envleak --budget 1 --llm "$MOCK" --model mock >/dev/null 2>"$T/err"
"$STARK" export envleak --journal -o "$T/envleak.journal" 2>>"$T/err"
grep -q "STARK_ENV_DUMP" "$T/envleak.journal" && grep -q "PATH=" "$T/envleak.journal" &&
	! grep -q "leaky-key-789" "$T/envleak.journal" && ! grep -q "API_KEY" "$T/envleak.journal"
ok $? "an evaluator child's environment holds no API key"

# 26: resume of an unknown run.
"$STARK" resume nosuch >/dev/null 2>"$T/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "no such run" "$T/err"
ok $? "resume of an unknown run is a usage error (exit $rc)"

# 27-28: an evaluation that ends in `error` is not the candidate's outcome:
# the run pauses with the message, node 2 keeps no result, and resume (the
# machine fixed) sends the evaluation again.
printf '%s\n' '{"key": "n2", "status": "error", "message": "this machine cannot build the candidate'"'"'s extension: missing ninja", "log": "Ninja is required to load C++ extensions"}' \
	'{"key": "*", "status": "correct", "speedup": 1.5}' >"$T/everr.jsonl"
"$STARK" run "$PROBLEM" --run-id everr --budget 4 --llm "replay:$T/llm.jsonl" \
	--eval "replay:$T/everr.jsonl" --set seed=5 >/dev/null 2>"$T/everr.err"
rc=$?
"$STARK" show everr --json >"$T/everr.json"
$PY - "$T/everr.json" <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
n2 = [n for n in j["nodes"] if n["id"] == 2]
sys.exit(0 if j["state"] == "interrupted" and j["attempts"] == 1 and n2 and
         n2[0]["status"] == "pending" else 1)
EOF2
ok=$?
[ "$rc" -ne 0 ] && [ "$ok" -eq 0 ] && grep -q "node 2 could not be done (not the candidate's fault): .*missing ninja" "$T/everr.err" &&
	grep -q "stark resume everr" "$T/everr.err"
ok $? "an evaluation error pauses the run, node 2 not charged (exit $rc)"
note "$T/everr.err"
printf '%s\n' '{"key": "*", "status": "correct", "speedup": 1.5}' >"$T/everr.jsonl"
"$STARK" resume everr >/dev/null 2>"$T/everr2.err"
rc=$?
"$STARK" show everr --json >"$T/everr.json"
"$STARK" export everr --journal -o "$T/everr.journal" 2>/dev/null
$PY - "$T/everr.json" <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
n2 = [n for n in j["nodes"] if n["id"] == 2]
sys.exit(0 if j["state"] == "finished" and j["attempts"] == 4 and n2[0]["status"] == "correct" else 1)
EOF2
[ $? -eq 0 ] && [ "$rc" -eq 0 ] && [ "$(grep -c "Ninja is required" "$T/everr.journal")" -eq 1 ]
ok $? "resume sends it again and finishes; the error's log is journaled with the pause (exit $rc)"
