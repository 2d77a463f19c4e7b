#!/bin/bash
# 46-bench.t -- `stark bench`: many runs in one event loop, resumable.
#
# Determinism: each run of a bench (problems x policies, 4 runs and 4 LLM
# calls in flight) has the same tree as the same run alone, given the same
# replayed replies and results; the table's figures are those of its runs.
# Durability: a bench killed with SIGKILL at 20+ random instants and
# resumed each time ends with the same trees and table, against replay
# files and against the mock LLM server, which saw no request again once
# its response was journaled (beyond the calls in flight at each kill).
# Also: a second process on a bench refuses; SIGTERM pauses it; a 429
# holds back every run's calls; a 401 pauses the bench and resume
# continues; --max-dollars stops it before a call could pass the cap; an
# evaluation device that cannot run evaluations is taken out of the pool
# and its work done on another (real evaluations on the CPU); show, list,
# report.  About a minute on two cores.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
B=${STARK_BUILD:-build}
STARK=$ROOT/$B/stark
PY=${PYTHON:-python3}
FIX="$PY $ROOT/tests/helpers/run_fixture.py"
CHK="$PY $ROOT/tests/helpers/run_check.py"
PROBLEM=$ROOT/tests/helpers/run_problem.py
T=$(mktemp -d /tmp/stark-46.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
export STARK_STORE=$T/store
export STARK_PROMPTS=$ROOT/prompts
export STARK_CACHE=$T/cache
unset STARK_API_KEY OPENAI_API_KEY ANTHROPIC_API_KEY STARK_LLM STARK_MODEL

n=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
note() { sed 's/^/# /' "$@" | head -n 20; }
field() { $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
mock() { # SCRIPT PORTFILE [args]: starts the mock server, waits for its port
	local script=$1 pf=$2
	shift 2
	$PY "$ROOT/tests/mock_llm.py" --script "$script" --port-file "$pf" --parent-pid $$ \
		--max-seconds 600 "$@" >/dev/null 2>&1 &
	PIDS+=($!)
	for _ in $(seq 100); do [ -s "$pf" ] && break; sleep 0.05; done
}

echo "1..24"

# Three problems (copies: replay files are per problem), two policies.
mkdir -p "$T/level1" "$T/llm" "$T/ev"
i=0
for p in 1_alpha 2_beta 3_gamma; do
	i=$((i + 1))
	cp "$PROBLEM" "$T/level1/$p.py"
	$FIX llm-replay "$T/level1/$p.py" "$T/llm/$p.jsonl"
	$FIX eval-replay "$T/ev/$p.jsonl" --nodes 40 --seed $((i * 7))
done
BUDGET=8
COMMON=(--budget "$BUDGET" --set seed=5)

# 1-2: every run alone, then the bench.
fail=0
for pol in stark sampling; do
	for p in 1_alpha 2_beta 3_gamma; do
		"$STARK" run "$T/level1/$p.py" --run-id "alone-$pol-$p" --policy "$pol" "${COMMON[@]}" \
			--llm "replay:$T/llm/$p.jsonl" --eval "replay:$T/ev/$p.jsonl" >/dev/null 2>&1 || fail=1
		"$STARK" show "alone-$pol-$p" --json >"$T/alone-$pol-$p.json" || fail=1
	done
done
ok $fail "each run alone, with replayed replies and results"
"$STARK" bench "$T/level1" --bench-id det --policies stark,sampling "${COMMON[@]}" \
	--llm "replay:$T/llm" --eval "replay:$T/ev" --runs-in-flight 4 --llm-in-flight 4 \
	>"$T/det.out" 2>"$T/det.err"
rc=$?
[ "$rc" -eq 0 ] && [ "$(head -n 1 "$T/det.out")" = det ] && grep -q '^1     stark ' "$T/det.out"
ok $? "stark bench of 3 problems x 2 policies, 4 runs in flight, prints its id and table (exit $rc)"
note "$T/det.err"
"$STARK" show det --json >"$T/det.json"

# Compares every run of bench $1 (its show --json) with the runs named $2-POLICY-PROBLEM,
# or with the runs of the bench whose show --json is $2, in order.
same_trees() {
	$PY - "$1" "$2" "$STARK" <<'EOF'
import json, subprocess, sys
bench, prefix, stark = sys.argv[1:]
b = json.load(open(bench))
other = json.load(open(prefix))["problems"] if prefix.endswith(".json") else None
bad = 0
for i, row in enumerate(b["problems"]):
    stem = row["problem"][:-3]
    runs = []
    twin = other[i]["run_id"] if other else "%s-%s-%s" % (prefix, row["policy"], stem)
    for rid in (row["run_id"], twin):
        o = json.loads(subprocess.run([stark, "show", rid, "--json"], capture_output=True,
                                      check=True).stdout)
        for k in ("run_id", "options", "routes", "created"):
            o.pop(k, None)
        for nd in o.get("nodes", []):
            nd.pop("created", None)
        runs.append(o)
    if runs[0] != runs[1]:
        bad += 1
        print("# %s differs from %s" % (row["run_id"], twin))
print("# %d runs compared" % len(b["problems"]))
sys.exit(1 if bad or len(b["problems"]) != 6 else 0)
EOF
}

# 3: determinism.
same_trees "$T/det.json" alone >"$T/cmp" 2>&1
ok $? "every run's tree in the bench equals the same run's alone"
note "$T/cmp"

# 4-5: the table, from the runs.
$PY - "$T/det.json" "$STARK" >"$T/tab" 2>&1 <<'EOF'
import json, math, subprocess, sys
b = json.load(open(sys.argv[1]))
names = ["level", "policy", "problems", "success_rate", "fast_1", "fast_1_5", "fast_2",
         "mean_speedup", "geomean_speedup", "median_speedup", "success_rate_kernelbench",
         "fast_1_kernelbench", "attempts", "llm_calls", "dollars", "gpu_seconds", "spend"]
bad = 0
for row in b["table"]:
    missing = [k for k in names if k not in row]
    if missing:
        print("# row %s lacks %s" % (row.get("policy"), missing)); bad += 1
    best = []
    for p in b["problems"]:
        if p["policy"] != row["policy"]:
            continue
        o = json.loads(subprocess.run([sys.argv[2], "show", p["run_id"], "--json"],
                                      capture_output=True, check=True).stdout)
        s = (o.get("best") or {}).get("speedup")
        best.append(s if s is not None else None)
    vals = [s if s is not None else 1.0 for s in best]
    n = len(vals)
    want = {"problems": n,
            "success_rate": sum(s is not None for s in best) / n,
            "fast_1": sum(s is not None and s > 1 for s in best) / n,
            "fast_2": sum(s is not None and s > 2 for s in best) / n,
            "mean_speedup": sum(vals) / n,
            "geomean_speedup": math.exp(sum(math.log(v) for v in vals) / n),
            "median_speedup": sorted(vals)[n // 2] if n % 2 else sum(sorted(vals)[n // 2 - 1:n // 2 + 1]) / 2}
    for k, v in want.items():
        if abs(row[k] - v) > 1e-5:
            print("# %s %s: %r, want %r" % (row["policy"], k, row[k], v)); bad += 1
    if row["success_rate_kernelbench"] is not None:
        print("# no result carries verdicts.kernelbench, yet the table has a figure"); bad += 1
print("# %d rows checked" % len(b["table"]))
sys.exit(1 if bad or len(b["table"]) != 2 else 0)
EOF
ok $? "show --json: a table row per level x policy with the documented names, its figures those of the runs"
note "$T/tab"
"$STARK" show det --csv >"$T/det.csv"
[ "$(head -n 1 "$T/det.csv")" = "level,policy,problems,success_rate,fast_1,fast_1_5,fast_2,mean_speedup,geomean_speedup,median_speedup,success_rate_kernelbench,fast_1_kernelbench,attempts,llm_calls,dollars,gpu_seconds" ] &&
	[ "$(wc -l <"$T/det.csv")" -eq 3 ]
ok $? "show --csv: the stable header and a line per row"

# Kills a bench/resume loop at random instants until it finishes.
#   kill_loop ID MAXKILLS SNAPDIR PORT -- bench args...
KILLS=0
kill_loop() {
	local id=$1 max=$2 snap=$3 port=$4 pid rc d r
	shift 5
	KILLS=0
	mkdir -p "$snap"
	for ((round = 0; round < 400; round++)); do
		if "$STARK" show "$id" --json >/dev/null 2>&1; then
			"$STARK" resume "$id" >>"$snap/log" 2>&1 &
		else
			"$STARK" bench "$@" --bench-id "$id" >>"$snap/log" 2>&1 &
		fi
		pid=$!
		if [ "$KILLS" -ge "$max" ]; then
			wait "$pid" 2>/dev/null
			return $?
		fi
		printf -v d '0.%03d' $((RANDOM % SPAN + 1))
		sleep "$d"
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		rc=$?
		[ "$rc" -eq 0 ] && return 0
		if [ "$rc" -eq 137 ]; then
			if [ -n "$port" ]; then
				: >"$snap/answered.$KILLS"
				for r in $("$STARK" list --json 2>/dev/null | $PY -c 'import json,sys; print(" ".join(o["run_id"] for o in json.load(sys.stdin) if o["run_id"].startswith(sys.argv[1] + "-")))' "$id"); do
					"$STARK" export "$r" --journal -o "$snap/j" 2>/dev/null || : >"$snap/j"
					$CHK answered "$snap/j" | sed "s|^|$r/|" >>"$snap/answered.$KILLS"
				done
				$CHK stats "$port" | $PY -c 'import json,sys; print(json.load(sys.stdin)["requests"])' >"$snap/mark.$KILLS"
			fi
			KILLS=$((KILLS + 1))
		fi
	done
	return 1
}

# 6-8: killed 20+ times with replayed replies.  Kills land within the first
# 1/30 of an uninterrupted bench's time (as in 40-run-resume.t), so that 20+
# of them come before it ends.
ms() { date +%s%3N; }
LONG=(--budget 40 --set seed=5)
t0=$(ms)
"$STARK" bench "$T/level1" --bench-id long --policies stark,sampling "${LONG[@]}" \
	--llm "replay:$T/llm" --eval "replay:$T/ev" --runs-in-flight 4 >/dev/null 2>&1
tlong=$(($(ms) - t0))
"$STARK" show long --json >"$T/long.json"
SPAN=$((tlong / 30 + 4))
kill_loop k1 24 "$T/k1" "" -- "$T/level1" --policies stark,sampling "${LONG[@]}" \
	--llm "replay:$T/llm" --eval "replay:$T/ev" --runs-in-flight 4 --llm-in-flight 4
rc=$?
ok $rc "a bench killed with SIGKILL $KILLS times and resumed each time finishes"
[ "$KILLS" -ge 20 ]
ok $? "it was killed $KILLS times (20+)"
"$STARK" show k1 --json >"$T/k1.json"
same_trees "$T/k1.json" "$T/long.json" >"$T/cmp" 2>&1 && $CHK bench-same "$T/k1.json" "$T/long.json" >>"$T/cmp"
ok $? "its trees and table equal the uninterrupted bench's (${tlong} ms)"
note "$T/cmp"

# 9-11: the same against the mock server, which counts requests.  Problems
# differ (a comment line), so requests of different runs differ; the
# policies whose agents answer with any code: sampling and reflexion.
mkdir -p "$T/mix" "$T/mixev"
for p in 1_one 2_two 3_three; do
	{ echo "# problem $p"; cat "$PROBLEM"; } >"$T/mix/$p.py"
	$FIX eval-replay "$T/mixev/$p.jsonl" --nodes 40 --seed 3
done
$FIX mock-script "$PROBLEM" "$T/mock.json"
MIX=("$T/mix" --policies sampling,reflexion --budget 12 --set seed=5 --eval "replay:$T/mixev"
	--runs-in-flight 6 --llm-in-flight 4 --model mock)
mock "$T/mock.json" "$T/portA" --log-bodies
t0=$(ms)
"$STARK" bench "${MIX[@]}" --bench-id mref --llm "openai:http://127.0.0.1:$(cat "$T/portA")/v1" \
	>/dev/null 2>"$T/mref.err"
rc=$?
tmix=$(($(ms) - t0))
"$STARK" show mref --json >"$T/mref.json"
mock "$T/mock.json" "$T/portB" --log-bodies
PORT=$(cat "$T/portB")
SPAN=$((tmix / 30 + 4))
kill_loop k2 22 "$T/k2" "$PORT" -- "${MIX[@]}" --llm "openai:http://127.0.0.1:$PORT/v1"
rc2=$?
[ "$rc" -eq 0 ] && [ "$rc2" -eq 0 ] && [ "$KILLS" -ge 20 ]
ok $? "against the mock server: a bench killed $KILLS times finishes (reference exit $rc, ${tmix} ms)"
"$STARK" show k2 --json >"$T/k2.json"
$PY - "$T/k2.json" "$T/mref.json" "$STARK" >"$T/cmp" 2>&1 <<'EOF'
import json, subprocess, sys
a, b, stark = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
def tree(rid):
    o = json.loads(subprocess.run([stark, "show", rid, "--json"], capture_output=True, check=True).stdout)
    for k in ("run_id", "options", "routes", "created"):
        o.pop(k, None)
    return o
bad = sum(tree(x["run_id"]) != tree(y["run_id"]) for x, y in zip(a["problems"], b["problems"]))
sys.exit(1 if bad or len(a["problems"]) != 6 or a["table"] != b["table"] else 0)
EOF
ok $? "its trees and table equal the uninterrupted bench's"
mkdir -p "$T/k2j"
for r in $($PY -c 'import json,sys; print(" ".join(p["run_id"] for p in json.load(open(sys.argv[1]))["problems"]))' "$T/k2.json"); do
	"$STARK" export "$r" --journal -o "$T/k2j/$r.jsonl"
done
$CHK stats "$PORT" >"$T/statsB.json"
$CHK bench-audit "$T/statsB.json" "$T/k2j" "$T/k2" 4 >"$T/audit" 2>&1
ok $? "the mock server saw no request again once its response was journaled"
note "$T/audit"

# 12-13: a second process refuses; SIGTERM pauses the bench.
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); d["default"]["delay"]=3; json.dump(d, open(sys.argv[2], "w"))' \
	"$T/mock.json" "$T/slow.json"
mock "$T/slow.json" "$T/portS"
"$STARK" bench "${MIX[@]}" --bench-id busy --llm "openai:http://127.0.0.1:$(cat "$T/portS")/v1" \
	>"$T/busy.out" 2>"$T/busy.err" &
BUSY=$!
for _ in $(seq 100); do [ -s "$T/busy.out" ] && break; sleep 0.05; done
sleep 0.5
"$STARK" resume busy >"$T/second.out" 2>"$T/second.err"
rc=$?
[ "$rc" -ne 0 ] && grep -q "in use by process $BUSY" "$T/second.err"
ok $? "a second process on the same bench refuses (exit $rc)"
kill -TERM "$BUSY"
wait "$BUSY"
rc=$?
"$STARK" show busy --json >"$T/busy.json"
[ "$rc" -ne 0 ] && [ "$(field "$T/busy.json" 'd["state"]')" = interrupted ] &&
	grep -q "stark resume busy" "$T/busy.err"
ok $? "SIGTERM stops the bench, journaled interrupted (exit $rc)"

# 14: a 429 holds back every run's calls.
cat >"$T/limit.json" <<EOF
{"queue": [{"status": 429, "retry_after": 1}],
 "default": $($PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["default"]))' "$T/mock.json")}
EOF
mock "$T/limit.json" "$T/portL"
"$STARK" bench "$T/mix" --policies sampling --budget 2 --eval "replay:$T/mixev" --model mock \
	--runs-in-flight 3 --llm-in-flight 3 --bench-id limit \
	--llm "openai:http://127.0.0.1:$(cat "$T/portL")/v1" >/dev/null 2>"$T/limit.err"
rc=$?
$CHK stats "$(cat "$T/portL")" >"$T/statsL.json"
$PY - "$T/statsL.json" >"$T/gap" 2>&1 <<'EOF'
import json, sys
log = [e for e in json.load(open(sys.argv[1]))["log"] if e.get("path", "").endswith("/chat/completions")]
t0 = log[0]["t"]
# requests already on their way when the 429 came were in flight; every
# later one must wait out its second
later = [e["t"] - t0 for e in log[1:] if e["t"] - t0 > 0.05]
print("# %d requests; the first ones after the 429 at +%s s" % (len(log), ", ".join("%.2f" % x for x in later[:6])))
sys.exit(1 if any(x < 0.95 for x in later) or len(later) < 3 else 0)
EOF
[ "$?" -eq 0 ] && [ "$rc" -eq 0 ]
ok $? "a 429 with Retry-After 1 holds every run's calls for a second (exit $rc)"
note "$T/gap"

# 15-16: a 401 pauses the bench; resume with the right key finishes it.
mock "$T/mock.json" "$T/portK" --key sekrit-key-123
STARK_API_KEY=wrong-key-456 "$STARK" bench "$T/mix" --policies sampling --budget 2 \
	--eval "replay:$T/mixev" --model mock --bench-id auth \
	--llm "openai:http://127.0.0.1:$(cat "$T/portK")/v1" >/dev/null 2>"$T/auth.err"
rc=$?
"$STARK" show auth --json >"$T/auth.json"
[ "$rc" -ne 0 ] && [ "$(field "$T/auth.json" 'd["state"]')" = interrupted ] && grep -q "401" "$T/auth.err"
ok $? "a 401 pauses the bench with the server's message (exit $rc)"
STARK_API_KEY=sekrit-key-123 "$STARK" resume auth >/dev/null 2>"$T/auth2.err"
rc=$?
"$STARK" show auth --json >"$T/auth.json"
[ "$rc" -eq 0 ] && [ "$(field "$T/auth.json" 'd["state"]')" = finished ]
ok $? "resume with the right key finishes it (exit $rc)"

# 17-18: --max-dollars stops the bench before a call could pass the cap.
"$STARK" bench "$T/mix" --policies sampling --budget 6 --eval "replay:$T/mixev" --model mock \
	--bench-id capped --llm "openai:http://127.0.0.1:$(cat "$T/portA")/v1" \
	--set price_in.sample=1000 --set price_out.sample=1000 --set max_tokens.sample=1000 \
	--max-dollars 6 >/dev/null 2>"$T/cap.err"
rc=$?
"$STARK" show capped --json >"$T/cap.json"
spent=$($PY -c 'import json,sys; print(sum(r["dollars"] for r in json.load(open(sys.argv[1]))["table"]))' "$T/cap.json")
[ "$rc" -ne 0 ] && grep -q "dollar cap reached" "$T/cap.err" && grep -q "the most it can spend is" "$T/cap.err" &&
	$PY -c 'import sys; sys.exit(0 if 0 < float(sys.argv[1]) <= 6 else 1)' "$spent"
ok $? "--max-dollars 6 stops the bench at \$$spent, having said the most it could spend (exit $rc)"
note "$T/cap.err"
"$STARK" resume capped --max-dollars 1000 >/dev/null 2>"$T/cap2.err"
rc=$?
"$STARK" show capped --json >"$T/cap.json"
[ "$rc" -eq 0 ] && [ "$(field "$T/cap.json" 'd["state"]')" = finished ] &&
	[ "$(field "$T/cap.json" 'd["options"]["max_dollars"]')" = 1000.0 ]
ok $? "resume --max-dollars 1000 raises the cap, journaled, and the bench finishes (exit $rc)"

# 19-20: an evaluation device that cannot evaluate is taken out of the pool.
if [ -e /dev/nvidiactl ]; then
	echo "ok 19 # skip this machine has a GPU"
	echo "ok 20 # skip this machine has a GPU"
	n=20
else
	# the demo's softplus problem: its samples are the reference (correct),
	# torch's softplus (correct) and one without the scale (incorrect)
	"$STARK" bench "$ROOT/examples/bench/level1/2_softplus_scale.py" --policies sampling \
		--budget 3 --llm "replay:$ROOT/examples/bench/replies" \
		--device cuda:0,cpu --format kernelbench --evals-per-device 1 --bench-id pool \
		>"$T/pool.out" 2>"$T/pool.err"
	rc=$?
	grep -q "device cuda:0 taken out of the evaluation pool" "$T/pool.err"
	ok $? "real evaluations on cuda:0 and cpu (no GPU here): cuda:0 is taken out with a message"
	note "$T/pool.err"
	"$STARK" show pool --json >"$T/pool.json"
	[ "$rc" -eq 0 ] && [ "$(field "$T/pool.json" 'd["table"][0]["attempts"]')" = 3 ] &&
		[ "$(field "$T/pool.json" 'd["table"][0]["success_rate"]')" = 1.0 ] &&
		[ "$(field "$T/pool.json" 'd["table"][0]["success_rate_kernelbench"]')" = 1.0 ]
	ok $? "its work went to the cpu: every attempt judged (KernelBench's verdict too), the bench finished (exit $rc)"
fi

# 21: --kb-trials 0: stark's verdict alone; KernelBench's columns null.
"$STARK" bench "$ROOT/examples/bench/level1/2_softplus_scale.py" --policies sampling \
	--budget 3 --llm "replay:$ROOT/examples/bench/replies" --device cpu --format kernelbench \
	--evals-per-device 1 --kb-trials 0 --bench-id nokb >"$T/nokb.out" 2>"$T/nokb.err"
rc=$?
"$STARK" show nokb --json >"$T/nokb.json"
[ "$rc" -eq 0 ] && [ "$(field "$T/nokb.json" 'd["options"]["kb_trials"]')" = 0 ] &&
	[ "$(field "$T/nokb.json" 'd["table"][0]["success_rate"]')" = 1.0 ] &&
	[ "$(field "$T/nokb.json" 'd["table"][0]["success_rate_kernelbench"]')" = None ]
ok $? "--kb-trials 0: judged by stark's verdict alone, KernelBench's columns null (exit $rc)"

# 22-24: list, resume of a finished bench, report.
"$STARK" list >"$T/list"
grep -q '^det .*finished .*bench of 6 runs' "$T/list" && grep -q '^det-stark-0000-1_alpha ' "$T/list"
ok $? "stark list shows the bench in one line and its runs"
"$STARK" resume det >/dev/null 2>"$T/again.err"
rc=$?
[ "$rc" -eq 0 ] && grep -q "already finished" "$T/again.err"
ok $? "resume of a finished bench says so (exit $rc)"
"$STARK" report det -o "$T/det.html" 2>"$T/err" && grep -q '"curves":\[{' "$T/det.html"
ok $? "stark report of the bench: its table, problems and curves"
