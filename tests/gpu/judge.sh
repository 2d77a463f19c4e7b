# Sourced by tests/gpu/*.t after preamble.sh, with TMP a scratch folder:
# TAP counters (ok, notok) and judge, which runs one `stark eval --device
# cuda --json` and checks its verdict.
#
# judge NAME STATUSES CHECK PROBLEM SOLUTION [stark options]: the verdict is
# one of STATUSES (|-separated) and the Python expression CHECK over the
# result `d` (env `e`) holds.  Prints the message and the env notes on
# memory, the output window and timing either way (# lines); the result is
# left in $TMP/last.json.
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }

judge() {
	local name=$1 want=$2 check=$3 prob=$4 sol=$5
	shift 5
	"$BUILD/stark" eval "$prob" "$sol" --device cuda --json "$@" >"$TMP/out.json" 2>"$TMP/err"
	local got
	got=$("$PY" - "$TMP/out.json" "$want" "$check" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError as e:
    print("no JSON result: %s" % e); sys.exit()
e = d.get("env") or {}
notes = "; ".join("%s=%s" % (k, e[k]) for k in sorted(e) if k.startswith(("mem_", "output_window",
                  "reference_repeat", "host_mem", "timing_spin", "l2_flush", "pair_ms", "compare_kernel",
                  "timing_pair")))
ok = d.get("status") in sys.argv[2].split("|") and bool(eval(sys.argv[3]))
print("good" if ok else "status %s (want %s): %s" % (d.get("status"), sys.argv[2],
                                                    (d.get("message") or "")[:400]))
print("# %s: %s" % (d.get("status"), (d.get("message") or "")[:300]))
print("# %s" % notes[:900])
print("# speedup %s, ref %s us, wall %.1f s" % (d.get("speedup"), d.get("ref_runtime_us"),
                                               (d.get("wall_ms") or 0) / 1e3))
PY
)
	if [ "$(head -1 <<<"$got")" = good ]; then ok "$name"; else notok "$name" "$(head -1 <<<"$got")" "$(tail -3 "$TMP/err")"; fi
	tail -n +2 <<<"$got"
	cp "$TMP/out.json" "$TMP/last.json"
}
