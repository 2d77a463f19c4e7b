"""The referee's side of the ledger (evaluator/stark_referee_memory.py:
replan_memory, plan_places) with a stand-in ledger whose growth stops
short as Ledger.grow's does (a deadlock avoided, the deadline): the plan is
made again within what is reserved, its optional phases reduced, never run
beyond it; the placements are as many as what is free affords, fewer where
the growth stops short.  No GPU and no torch: the modules the referee
imports for its workers are stood in for.  Prints TAP.
Usage: python3 tests/memory/referee_check.py"""
import os
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator"))
sys.path.insert(0, HERE)
# The C extension (only in the stark binary) and the wire (torch).
sys.modules["_stark"] = types.SimpleNamespace(limits=lambda: {})
sys.modules["stark_wire"] = types.SimpleNamespace(PLAN="plan")

from tap import done, ok  # noqa: E402
import stark_memory as M  # noqa: E402
from stark_referee_lock import GpuLock  # noqa: E402
from stark_referee_common import Verdict  # noqa: E402
from stark_referee_memory import MemoryPlan  # noqa: E402

GIB, MIB = M.GIB, M.MIB


class Ledger:
    """Stands in for stark_memory.Ledger: free() reports `free`; grow()
    grants up to `grant` bytes more, else stops short for `why`."""

    def __init__(self, held, grant, free=0, why="deadlock"):
        self.bytes, self.grant, self.free_bytes, self.why = held, grant, free, why
        self.waited_s = 0.25
        self.gave_up = None
        self.others_held, self.others_n = 0, 0
        self.asked = []

    def grow(self, nbytes, limit, until):
        self.asked.append(nbytes)
        self.gave_up = None
        if nbytes - self.bytes <= self.grant:
            self.grant -= max(nbytes - self.bytes, 0)
            self.bytes = nbytes
        else:
            self.gave_up = self.why
        return self.bytes

    def free(self, limit):
        return self.free_bytes

    def others(self):
        return self.others_held, 0, self.others_n

    def resize(self, nbytes, limit):
        if nbytes > self.bytes:
            nbytes = min(nbytes, self.bytes + self.grant)
        self.bytes = nbytes
        return nbytes


class Evaluation(MemoryPlan, GpuLock):
    """The attributes of stark_referee.Evaluation that the memory plan
    reads, for a footprint fp measured alike in both workers (its
    allocator holding `factor` times its peak)."""

    def __init__(self, fp, ledger, placements=1, factor=1.0):
        self.mem_init()
        self.cuda = True
        self.req = {"placements": placements}
        self.res = {"env": {}}
        self.dev_total = 80 * GIB
        self.ledger = ledger
        self.mem_reserved = ledger.bytes
        self.input_bytes, self.output_bytes = fp["in"], fp["out"]
        peak = fp["weights"] + fp["in"] + fp["fwd"]
        seen = {"load": {"alloc": fp["weights"]},
                "gen": {"alloc": fp["weights"] + fp["in"]},
                "call": {"peak": peak, "peak_reserved": int(peak * factor)}}
        self.mem_seen = {"ref": seen, "cand": seen}
        self.queue_init(time.monotonic() + 60.0)

    def time_left_for(self, pairs):
        return True


def fp(i, o, w, f):
    return {"in": i, "out": o, "weights": w, "fwd": f}


# 512 MiB in and out, 256 MiB of weights: the float64 runs are the peak.
mid = fp(512 * MIB, 512 * MIB, 256 * MIB, 1 * GIB)
budget = M.budget(80 * GIB)
full = M.plan(mid, mid, budget)
lean = M.plan(mid, mid, full.need - 1)
ok(full.f64 and not lean.f64 and lean.need < full.need,
   "the footprint's float64 runs are its largest phase", full.text())

ev = Evaluation(mid, Ledger(lean.need, 10 * GIB))
ev.replan_memory()
env = ev.res["env"]
ok(ev.mem_reserved == full.need == ev.ledger.bytes and "mem_overcommit" not in env and
   env["mem_wait_ms"] == "250",
   "a growth granted: the whole plan reserved, the wait reported", str(env))

ev = Evaluation(mid, Ledger(lean.need + 100 * MIB, 0, why="deadlock"))
ev.replan_memory()
env = ev.res["env"]
ok(ev.ledger.asked[0] == full.need and not ev.mplan.f64 and ev.mplan.need <= ev.mem_reserved,
   "a growth stopped short: the plan made within what is reserved", str(env))
ok("float64" in env.get("mem_reduced", "") and "evaluator's limit" in env["mem_reduced"],
   "the float64 runs skipped, named as the evaluator's limit", env.get("mem_reduced"))
ok(ev.ledger.bytes == ev.mem_reserved == lean.need,
   "what the reduced plan does not need is given back", M.fmt_bytes(ev.ledger.bytes))
ok("deadlocked" in env.get("mem_overcommit", "") and "left no more" in env["mem_overcommit"] and
   "reduced" in env["mem_overcommit"],
   "mem_overcommit says the others left no more and why waiting stopped",
   env.get("mem_overcommit"))

ev = Evaluation(mid, Ledger(1 * GIB, 0, why="deadline"))
ev.replan_memory()
env = ev.res["env"]
ok(ev.mem_reserved == 1 * GIB and "deadline" in env.get("mem_overcommit", "") and
   "beyond what is reserved" in env["mem_overcommit"],
   "a plan that cannot fit even reduced goes on beyond its reservation, said so",
   env.get("mem_overcommit"))


# Judged again alone (req["mem_alone"]): the whole budget reserved at
# admission stays reserved through the replan, whose plan needs less.
ev = Evaluation(mid, Ledger(budget, 0))
ev.req["mem_alone"] = True
ev.replan_memory()
env = ev.res["env"]
ok(ev.mplan.need < budget and ev.ledger.bytes == ev.mem_reserved == budget and
   "mem_overcommit" not in env,
   "judged again alone: the replan keeps the whole budget reserved",
   "%s reserved, plan %s" % (M.fmt_bytes(ev.ledger.bytes), M.fmt_bytes(ev.mplan.need)))
ev = Evaluation(mid, Ledger(budget, 0))
ev.replan_memory()
ok(ev.ledger.bytes == ev.mem_reserved == full.need < budget,
   "not alone: the replan gives back what the plan does not need",
   M.fmt_bytes(ev.ledger.bytes))

# Placements: 64 MiB tensors afford 32 where memory is free.
small = fp(64 * MIB, 64 * MIB, 0, 64 * MIB)
base = M.plan(small, small, budget).need


def timing(k, f=small, b=base):
    return max(b, M.need_by_phase(f, f, k)["timing"])


ev = Evaluation(small, Ledger(base, 40 * GIB, free=40 * GIB), placements=32)
ev.replan_memory()
ev.plan_places()
ok(ev.place_cap == 32 and ev.ledger.bytes == timing(32),
   "32 placements where memory is free, their need reserved", ev.res["env"].get("mem_places"))

# An allocator that holds 1.5x its peak: each placement takes more than
# M.places counts, and the growth asks no more than is free.
held = dict(small, factor=1.5)
hbase = M.plan(held, held, budget).need
spare = 6 * GIB
ev = Evaluation(small, Ledger(hbase, 40 * GIB, free=spare), placements=32, factor=1.5)
ev.replan_memory()
ev.plan_places()
k = ev.place_cap
ok(ev.fp["ref"].get("factor") == 1.5 and 1 < k < M.places(held, held, 32, spare) and
   timing(k, held, hbase) <= hbase + spare < timing(k + 1, held, hbase) and
   ev.ledger.bytes == timing(k, held, hbase),
   "as many placements as what is free affords, counting the allocator's rounding",
   "%d placements, asked %s of %s" % (k, M.fmt_bytes(ev.ledger.asked[-1]),
                                      M.fmt_bytes(hbase + spare)))

four = timing(4)
ev = Evaluation(small, Ledger(four, 0, free=40 * GIB), placements=32)
ev.mplan = M.plan(small, small, budget)
ev.fp = {"ref": small, "cand": small}
ev.plan_places()
ok(ev.place_cap == 4 and ev.ledger.bytes == four,
   "a growth for placements stopped short: as many as what is held affords",
   "%d placements" % ev.place_cap)


# The shape probe's estimate: a second PLAN at the grown sizes, skipped
# where the first one's forward on meta was slow (level 3's LSTMs: 17-31 s
# each on an H100).
class PlanEval(Evaluation):
    """plan_memory's steps with a reference worker that answers PLAN with
    the footprint `est` after a forward of fwd_s seconds."""

    def __init__(self, est, fwd_s):
        super().__init__(est, Ledger(0, 0))
        self.ledger = None
        self.lock_fd = None
        self.res["stage_ms"] = {}
        self.ref = types.SimpleNamespace(t_fork=1.0)
        self.est, self.fwd_s, self.asked = est, fwd_s, []

    def command(self, w, kind, args, what):
        self.asked.append(dict(args))
        return dict(self.est, started={"built": 10.0, "planned": 10.0 + self.fwd_s})

    def shape_sizes(self):
        return {"n": 80}

    def startup_part(self, name, t0):
        pass

    def note_planned_launch(self, est):
        pass


ev = PlanEval(small, 0.2)
ev.plan_memory()
ok(len(ev.asked) == 2 and ev.asked[1].get("sizes") == {"n": 80} and ev.shape_fp == small and
   "shape_estimate" not in ev.res["env"],
   "a quick forward on meta: the shape probe's sizes estimated by a second PLAN", str(ev.asked))
ev = PlanEval(small, 5.0)
ev.plan_memory()
ok(len(ev.asked) == 1 and ev.shape_fp is None and
   "5.0 s" in ev.res["env"].get("shape_estimate", ""),
   "a slow forward on meta: no second PLAN, the probe planned from its inputs",
   ev.res["env"].get("shape_estimate"))

# Planned from its inputs, the probe's outputs and forward grow as the
# square of its inputs' ratio (attention's do): a probe whose need fits
# at that ratio but not at its square is skipped, named as our limit.
big = fp(1 * GIB, 1 * GIB, 0, 8 * GIB)
lin = M.shape_need(fp(2 * GIB, 2 * GIB, 0, 16 * GIB))
sq = M.shape_need(fp(2 * GIB, 4 * GIB, 0, 32 * GIB))
ev = Evaluation(big, Ledger((lin + sq) // 2, 0))
ev.fp = {"ref": big, "cand": big}
fits, why = ev.shape_room(2 * GIB)
ok(lin < sq and not fits and "evaluator's memory limit" in (why or ""),
   "inputs twice as large: the outputs and forward planned at four times", why)
fits, why = ev.shape_room(1 * GIB)
ok(fits, "inputs as large: the probe fits", why)

# An out-of-memory error a library caught inside a forward (the workers'
# "ooms": cuDNN then runs another algorithm): beside other evaluations the
# evaluator's error, judged again alone; alone, said and nothing more.
def ooms_reply(n):
    return {"mem": {"alloc": GIB, "peak": GIB, "reserved": GIB, "peak_reserved": GIB,
                    "free": 10 * GIB, "total": 80 * GIB, "ooms": n}}


ev = Evaluation(small, Ledger(4 * GIB, 0))
ev.ledger.others_held, ev.ledger.others_n = 30 * GIB, 3
ev.mem_step = "trial 1 of 5"
ev.note_mem("cand", "call", ooms_reply(0))
ok(ev.mem_retry is None and "mem_caught" not in ev.res["env"],
   "no caught out-of-memory error: nothing said")
try:
    ev.note_mem("ref", "call", ooms_reply(1))
    raised = None
except Verdict as v:
    raised = v
ok(raised is not None and raised.status == "error" and raised.ours and
   "beside 3 other evaluations" in str(raised.message) and
   "not the candidate's doing" in str(raised.message) and
   ev.mem_retry is not None and "the reference's worker" in ev.mem_retry and
   "trial 1 of 5" in ev.res["env"].get("mem_caught", ""),
   "the reference's forward met one beside others: the evaluator's error, judged again alone",
   raised and raised.message)
ev = Evaluation(small, Ledger(4 * GIB, 0))
ev.req["mem_alone"] = True
ev.ledger.others_held, ev.ledger.others_n = 30 * GIB, 3
raised = None
try:
    ev.note_mem("cand", "call", ooms_reply(2))
    ev.note_mem("cand", "gen", ooms_reply(2))
except Verdict as v:
    raised = v
ok(raised is None and ev.mem_retry is None and
   "the candidate's worker met 2 out-of-memory errors" in ev.res["env"].get("mem_caught", ""),
   "alone on the GPU: said in env.mem_caught, the verdict left to the checks",
   ev.res["env"].get("mem_caught"))

sys.exit(done())
