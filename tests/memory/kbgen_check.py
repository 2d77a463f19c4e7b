"""Whose timeout it is when a candidate's worker misses the deadline while
making a KernelBench trial's inputs (evaluator/stark_referee_data.py,
DataPath.kb_gen_late): the candidate's only where it had the reference
worker's time at it 2.5 times over (and at least 10 s); else a limit of
the evaluator's own (`ours`), which leaves KernelBench's verdict "not
reached".  No GPU (torch on the CPU, for the modules the referee
imports).  Prints TAP.
Usage: python3 tests/memory/kbgen_check.py"""
import os
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator"))
sys.path.insert(0, HERE)
sys.modules["_stark"] = types.SimpleNamespace(limits=lambda: {})

from tap import done, ok  # noqa: E402
from stark_referee_common import Verdict  # noqa: E402
import stark_referee_data as D  # noqa: E402


class Evaluation(D.DataPath):
    def __init__(self, left_s):
        self.deadline = time.monotonic() + left_s


def late(left_s, ref_s, cand_started_s_ago=0.0, status="timeout", **kw):
    ev = Evaluation(left_s)
    now = time.monotonic()
    t0 = now - cand_started_s_ago
    v = Verdict(status, "the candidate did not finish KernelBench trial 3 of 5", **kw)
    return ev.kb_gen_late(v, {"ref": t0 + ref_s}, t0, t0)


v = late(left_s=2.0, ref_s=6.0, cand_started_s_ago=6.0)
ok(v.ours and v.status == "timeout" and "8.0 s left" in v.message and "made in 6.0 s" in v.message,
   "8 s for inputs the reference's worker made in 6 s: the evaluator's limit", v.message)
v = late(left_s=8.0, ref_s=6.0, cand_started_s_ago=6.0)
ok(v.ours, "14 s for the same 6 s: short of 2.5 times", v.message)
v = late(left_s=10.0, ref_s=6.0, cand_started_s_ago=6.0)
ok(not v.ours, "16 s for the same 6 s: 2.5 times over, the candidate's", v.message)
v = late(left_s=1.0, ref_s=2.0, cand_started_s_ago=2.0)
ok(v.ours, "less than the 10 s floor: the evaluator's limit", v.message)
v = late(left_s=40.0, ref_s=2.0, cand_started_s_ago=2.0)
ok(not v.ours and v.message.endswith("trial 3 of 5"),
   "42 s for inputs made in 2 s: the candidate's timeout, unchanged", v.message)
v = late(left_s=1.0, ref_s=2.0, status="crashed")
ok(not v.ours and v.status == "crashed", "another status is left as it was")
ev = Evaluation(1.0)
v0 = Verdict("timeout", "the candidate did not finish")
ok(ev.kb_gen_late(v0, {}, time.monotonic(), time.monotonic()) is v0,
   "where the reference's worker had not finished its inputs, the verdict is left as it was")
done()
