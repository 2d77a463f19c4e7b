"""Self-test of tests/lib/check_expect.py's EXPECT columns, without a GPU or
a build: a stand-in for `stark` answers each evaluation with the JSON result
written in the candidate file's first line, and every case says whether
its row must pass.  Run by validate_cpu.py (or alone: python3 THIS)."""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(os.path.dirname(os.path.dirname(HERE)), "lib", "check_expect.py")

FAKE_STARK = r'''#!/usr/bin/env python3
import sys
# stark eval PROBLEM CANDIDATE --json ...: the candidate's first line is "# " + JSON
line = open(sys.argv[3]).readline()
if "untimed_only" in line and "--no-timing" not in sys.argv:
    line = "timed"          # a row with no_timing must be evaluated without timing
sys.stdout.write(line[2:] if line.startswith("# {") else "garbage")
'''


def res(status="correct", flags=(), runtime=None, speedup=None):
    return {"status": status, "flags": list(flags), "runtime_us": runtime, "speedup": speedup,
            "message": "fake"}


# (candidate, result, EXPECT columns after the candidate, must pass)
CASES = [
    ("p/honest.py", res(runtime=100.0), "correct - ", True),
    ("p/flagged_honest.py", res(flags=["shape_specialized"], runtime=100.0), "correct -", False),
    ("p/wrong_status.py", res("incorrect"), "correct -", False),
    ("p/alt_status.py", res("rejected"), "incorrect|rejected -", True),
    ("p/any_flags.py", res(flags=["x", "y"]), "correct any", True),
    ("p/one_of_present.py", res(flags=["b"]), "correct a,b", True),
    ("p/one_of_missing.py", res(flags=["c"]), "correct a,b", False),
    ("p/min_rt_ok.py", res(runtime=2000.0), "correct - min_runtime_us=1500", True),
    ("p/min_rt_low.py", res(runtime=30.0), "correct - min_runtime_us=1500", False),
    ("p/min_rt_none.py", res(runtime=None), "correct - min_runtime_us=1500", False),
    ("p/min_rt_waived.py", res(flags=["timing_unverified"], runtime=30.0),
     "correct any min_runtime_us=1500 waived_by=timing_unverified", True),
    ("p/min_rt_wrong_waiver.py", res(flags=["other"], runtime=30.0),
     "correct any min_runtime_us=1500 waived_by=timing_unverified", False),
    ("p/min_rt_not_correct.py", res("incorrect", runtime=30.0),
     "correct|incorrect any min_runtime_us=1500", True),
    ("p/speedup_ok.py", res(speedup=1.2), "correct - max_speedup=1.6", True),
    ("p/speedup_high.py", res(speedup=3.0), "correct - max_speedup=1.6", False),
    ("p/same_ok.py", res(runtime=110.0), "correct - same_speed_as=p/honest.py:0.15", True),
    ("p/same_fast.py", res(runtime=50.0), "correct - same_speed_as=p/honest.py:0.15", False),
    ("p/same_slow.py", res(runtime=200.0), "correct - same_speed_as=p/honest.py:0.15", False),
    ("p/nft_slow.py", res(runtime=200.0), "correct - not_faster_than=p/honest.py:0.15", True),
    ("p/nft_fast.py", res(runtime=50.0), "correct - not_faster_than=p/honest.py:0.15", False),
    ("p/nft_waived.py", res(flags=["speedup_beyond_roofline"], runtime=5.0),
     "correct any not_faster_than=p/honest.py:0.15 waived_by=timing_unverified,speedup_beyond_roofline", True),
    ("p/nft_vs_broken.py", res(runtime=100.0), "correct - not_faster_than=p/broken.py:0.15", False),
    ("p/broken.py", None, "correct -", False),
    ("p/cpu_only.py", res("incorrect"), "correct - cpu_only=needs_the_cpu", None),
    ("p/todo.py", res("incorrect"), "correct - todo=not_yet", False),
    ("p/all_of.py", res(flags=["a", "b", "c"]), "correct a+b", True),
    ("p/all_of_missing.py", res(flags=["a", "c"]), "correct a+b", False),
    ("p/exactly.py", res(flags=["a"]), "correct =a", True),
    ("p/exactly_extra.py", res(flags=["a", "b"]), "correct =a", False),
    ("p/exactly_missing.py", res(), "correct =a", False),
    ("p/untimed.py", dict(res(runtime=None), untimed_only=True),
     "correct - min_runtime_us=1500 no_timing=cheap", True),
]


def run(tmp, extra, only=None):
    env = dict(os.environ)
    env.pop("STARK_INTEGRITY_ONLY", None)
    if only:
        env["STARK_INTEGRITY_ONLY"] = only
    p = subprocess.run([sys.executable, CHECK, os.path.join(tmp, "stark"), os.path.join(tmp, "EXPECT")] + extra,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    return p.returncode, p.stdout, p.stderr


def main():
    failures = []
    with tempfile.TemporaryDirectory(prefix="stark-expect-selftest-") as tmp:
        os.makedirs(os.path.join(tmp, "p"))
        open(os.path.join(tmp, "p", "problem.py"), "w").write("# not read by the stand-in\n")
        with open(os.path.join(tmp, "stark"), "w") as f:
            f.write(FAKE_STARK.replace("#!/usr/bin/env python3", "#!" + sys.executable))
        os.chmod(os.path.join(tmp, "stark"), 0o755)
        with open(os.path.join(tmp, "EXPECT"), "w") as f:
            f.write("# self-test\n")
            for cand, r, cols, _ in CASES:
                with open(os.path.join(tmp, cand), "w") as c:
                    c.write("# %s\n" % json.dumps(r) if r is not None else "# nothing\n")
                f.write("%s %s\n" % (cand, cols))
        for extra, device in (([], "cpu"), (["--device", "cuda", "--trials", "3"], "cuda")):
            rc, out, err = run(tmp, extra)
            lines = [ln for ln in out.splitlines() if re.match(r"(not )?ok \d+ ", ln)]
            if not out.startswith("1..%d\n" % len(CASES)) or len(lines) != len(CASES):
                failures.append("%s: bad TAP (exit %d): %s %s" % (device, rc, out[:500], err[-500:]))
                continue
            for (cand, _, cols, must), ln in zip(CASES, lines):
                skipped = "# SKIP" in ln
                if must is None:
                    if skipped != (device != "cpu"):
                        failures.append("%s: %s: skip expected only off the CPU: %s" % (device, cand, ln))
                    if device != "cpu":
                        continue
                    must = False
                ok = ln.startswith("ok ")
                if ok != must:
                    failures.append("%s: %s (%s): %s" % (device, cand, cols, ln))
                if "todo=" in cols and "# TODO not yet" not in ln:
                    failures.append("%s: %s: no TODO directive: %s" % (device, cand, ln))
        # --no-timing: timing bounds are noted, not checked.
        rc, out, _ = run(tmp, ["--no-timing"], only="min_rt_low")
        if "ok 1 " not in out or "not checked" not in out:
            failures.append("--no-timing: %s" % out[:300])
        # A filtered run still evaluates the rows a comparison names.
        rc, out, _ = run(tmp, [], only="nft_fast")
        if not out.startswith("1..1\n") or "not ok 1 " not in out or "p/honest.py 100.0 us" not in out:
            failures.append("filtered comparison: %s" % out[:400])
        # Several EXPECT files: one plan, candidates named by their paths.
        p = subprocess.run([sys.executable, CHECK, os.path.join(tmp, "stark"), os.path.join(tmp, "EXPECT"),
                            os.path.join(tmp, "EXPECT"), "--device", "cpu"],
                           stdout=subprocess.PIPE, text=True, timeout=120,
                           env={k: v for k, v in os.environ.items() if k != "STARK_INTEGRITY_ONLY"})
        if not p.stdout.startswith("1..%d\n" % (2 * len(CASES))) or os.path.join(tmp, "p", "honest.py") not in p.stdout:
            failures.append("two EXPECT files: %s" % p.stdout[:300])
        # A column the reader does not know is an error, not a silent pass.
        with open(os.path.join(tmp, "EXPECT"), "a") as f:
            f.write("p/honest.py correct - min_runtime=5\n")
        rc, out, err = run(tmp, [])
        if rc == 0 or "unknown column" not in err:
            failures.append("unknown column accepted (exit %d): %s" % (rc, err[-300:]))
    if failures:
        print("check_expect self-test FAILED:")
        for f in failures:
            print("  " + f)
        return 1
    print("check_expect self-test: %d cases on cpu and cuda, --no-timing, no_timing rows, "
          "filtering, two files, unknown columns: passed" % len(CASES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
