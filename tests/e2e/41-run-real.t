#!/bin/bash
# 41-run-real.t -- a real `stark run`: the LLM is tests/mock_llm.py over
# HTTP (scripted: a plan with anchors, then the coder's fused kernel, then
# replies without anchors), every candidate is judged by stark-eval on the
# CPU, and the exported best solution is accepted by `stark eval`.  Then the
# same attempt by a team of reasoning models in their own dialects (an
# Anthropic planner with extended thinking, an OpenAI reasoning coder),
# with KernelBench's trials left out (--kb-trials 0).
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
B=${STARK_BUILD:-build}
STARK=$ROOT/$B/stark
PY=${PYTHON:-python3}
EX=$ROOT/examples/hardswish_residual
T=$(mktemp -d /tmp/stark-41.XXXXXX)
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
note() { sed 's/^/# /' "$@" | tail -n 20; }

echo "1..11"
if [ ! -x "$ROOT/$B/stark-eval" ]; then
	for i in 1 2 3 4 5 6 7 8 9 10 11; do echo "ok $i # skip stark-eval not built"; done
	exit 0
fi

# The mock answers attempt 1 with the demo's recorded plan and code, and
# every later request with a well-formed reply that has no anchors.
$PY - "$EX/replay.jsonl" "$T/mock.json" <<'PYEOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
first = [l for l in lines if l["key"] in ("a1.plan.r0", "a1.code.r0")]
script = {"queue": [{"text": l["text"], "usage": [l["tokens_in"], l["tokens_out"]]} for l in first],
          "default": {"fault": "no_anchors", "usage": [500, 60]}}
json.dump(script, open(sys.argv[2], "w"))
# The same replies from a team of reasoning models: the planner Anthropic with
# extended thinking, the coder an OpenAI reasoning model.
script["models"] = {"claude-thinker": "anthropic-thinking", "o3-coder": "openai-reasoning"}
json.dump(script, open(sys.argv[2] + ".team", "w"))
PYEOF
$PY "$ROOT/tests/mock_llm.py" --script "$T/mock.json" --port-file "$T/port" \
	--parent-pid $$ --max-seconds 900 --key real-test-key-0001 >/dev/null 2>&1 &
MOCK_PID=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
URL="http://127.0.0.1:$(cat "$T/port")/v1"

STARK_API_KEY=real-test-key-0001 "$STARK" run "$EX/problem.py" --run-id real --budget 2 \
	--llm "openai:$URL" --model mock-coder --device cpu >"$T/run.out" 2>"$T/run.err"
rc=$?
ok $rc "stark run against the mock server with real evaluations finishes (exit $rc)"
[ $rc -eq 0 ] || note "$T/run.err"
"$STARK" show real --json >"$T/show.json"
$PY - "$T/show.json" >"$T/facts" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
n = {x["id"]: x for x in d["nodes"]}
print(d["state"], d["attempts"], n[1]["status"], n[1]["verdict"], n[2]["status"],
      d["best"]["node"] if d["best"] else None, d["spend"]["plan"]["calls"], d["spend"]["code"]["calls"])
PYEOF
read -r state attempts s1 v1 s2 best pcalls ccalls <"$T/facts"
[ "$state" = finished ] && [ "$attempts" = 2 ]
ok $? "the run is finished after its 2 attempts ($state, $attempts)"
[ "$s1" = correct ] && [ "$v1" = correct ] && [ "$best" = 1 ]
ok $? "stark-eval judged the coded kernel correct, and it is the best node ($s1/$v1, best $best)"
[ "$s2" = rejected ] && [ "$pcalls" = 3 ] && [ "$ccalls" = 1 ]
ok $? "plans without anchors were journaled, re-asked once, then rejected ($s2; plan calls $pcalls)"
"$STARK" export real -o "$T/best.py" 2>/dev/null
ok $? "stark export writes the best solution"
"$STARK" eval "$EX/problem.py" "$T/best.py" --device cpu >"$T/eval.out" 2>&1
rc=$?
ok $rc "stark eval accepts the exported solution (exit $rc)"
[ $rc -eq 0 ] || note "$T/eval.out"
! grep -rqa "real-test-key-0001" "$STARK_STORE" "$T/run.out" "$T/run.err"
ok $? "the API key is not in the store or the output"

# 8-9: the same attempt by a team of reasoning models, each in its own
# dialect, configured in one file; real evaluation again.
kill "$MOCK_PID" 2>/dev/null
wait "$MOCK_PID" 2>/dev/null
rm -f "$T/port"
$PY "$ROOT/tests/mock_llm.py" --script "$T/mock.json.team" --port-file "$T/port" \
	--parent-pid $$ --max-seconds 900 --key real-test-key-0001 >/dev/null 2>&1 &
MOCK_PID=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
URL="http://127.0.0.1:$(cat "$T/port")/v1"
cat >"$T/team.cfg" <<EOF
llm.plan = anthropic:$URL
model.plan = claude-thinker
thinking.plan = 4096
max_tokens.plan = 16000
temperature.plan = none
llm.code = openai:$URL
model.code = o3-coder
token_field.code = max_completion_tokens
temperature.code = none
reasoning_effort.code = medium
llm.debug = openai:$URL
model.debug = o3-coder
token_field.debug = max_completion_tokens
temperature.debug = none
price.claude-thinker = 3 15
price.o3-coder = 2 8
EOF
STARK_API_KEY=real-test-key-0001 "$STARK" run "$EX/problem.py" --run-id team --budget 1 \
	--config "$T/team.cfg" --device cpu --kb-trials 0 >"$T/team.out" 2>"$T/team.err"
rc=$?
ok $rc "a team run (Anthropic thinking planner, OpenAI reasoning coder) finishes (exit $rc)"
[ $rc -eq 0 ] || note "$T/team.err"
"$STARK" show team --json >"$T/team.json"
$PY - "$T/team.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
n = {x["id"]: x for x in d["nodes"]}
m = d["spend_models"]
ok = (n[1]["verdict"] == "correct" and d["best"] and d["best"]["node"] == 1 and
      m["claude-thinker"]["calls"] == 1 and m["o3-coder"]["calls"] == 1 and
      m["claude-thinker"]["dollars"] > 0 and m["o3-coder"]["tokens_reasoning"] > 0)
print("# node 1 %s, models %s" % (n[1]["verdict"], json.dumps(m)))
sys.exit(0 if ok else 1)
PYEOF
ok $? "stark-eval judged the team's kernel correct; spend per model, reasoning counted"

# 10-11: --kb-trials is the run's option, in every evaluation's request:
# the first run's evaluations ran KernelBench's 5 trials, the team's none.
"$STARK" show real --node 1 --json >"$T/n1.json"
"$STARK" show team --node 1 --json >"$T/t1.json"
$PY - "$T/show.json" "$T/team.json" "$T/n1.json" "$T/t1.json" <<'PYEOF'
import json, sys
real, team, n1, t1 = (json.load(open(p)) for p in sys.argv[1:])
kb = lambda d: float(d["node"]["result"]["env"].get("kb_ms", "nan"))
print("# kb_trials %s / %s, kb_ms %s / %s" % (real["options"].get("kb_trials"),
      team["options"].get("kb_trials"), kb(n1), kb(t1)))
sys.exit(0 if (real["options"].get("kb_trials") == 5 and team["options"].get("kb_trials") == 0 and
               kb(n1) > 0 and kb(t1) == 0) else 1)
PYEOF
ok $? "--kb-trials 0: the run's option, and its evaluations run none of KernelBench's trials"
"$STARK" run "$EX/problem.py" --run-id bad --kb-trials 1001 --llm "openai:$URL" --model m >/dev/null 2>"$T/bad.err"
rc=$?
[ $rc -eq 2 ] && grep -q "kb-trials must be 0..1000" "$T/bad.err"
ok $? "--kb-trials beyond 1000: a usage error (exit $rc)"
