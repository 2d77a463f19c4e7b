"""A timed pair's stops and continues on a GPU with delivered inputs
(evaluator/stark_referee_data.py run_pair, STARK_INPUT_DELIVERY=on): the
worker not being timed is stopped through the other's call; the
candidate's worker stays stopped from the moment its inputs are written
until its clock starts; and once the pair's calls are made both workers
run again, whichever was timed first (a candidate left stopped after a
reference timed second once made the pair's fetch wait until the
deadline on an H100; such a wait is now the evaluator's error, never the
candidate's timeout).  The workers' I/O is stood in for by a log: this
checks the referee's sequence, tests/gpu/45-input-delivery.t the whole on
a GPU.  Also the delivery's self-test (stark_referee_ipc.ipc_selftest):
on by default on a GPU, and where it runs out of device memory beside
other evaluations, the evaluator's error, judged again alone, not a
silent fallback to undelivered inputs; the reference out of device
memory opening the candidate's buffers, the evaluator's error, not the
candidate's rejection.  Prints TAP.
Usage: python3 tests/helpers/pair_stops.py"""
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator"))
sys.path.insert(0, os.path.join(HERE, "..", "memory"))

from tap import done, ok  # noqa: E402

# The referee's C module is the evaluator's own: what run_pair needs of it
# is nothing.
sys.modules["_stark"] = types.SimpleNamespace(limits=lambda: {})
import stark_wire as W  # noqa: E402
from stark_referee_common import Verdict  # noqa: E402
from stark_referee_data import DataPath  # noqa: E402
from stark_referee_ipc import IpcInputs  # noqa: E402
from stark_referee_workers import Workers  # noqa: E402


class FakeWorker:
    def __init__(self, role, log):
        self.role, self.log, self.stopped = role, log, False

    def kill(self):
        self.log.append(("kill", self.role))

    def stop(self):
        if not self.stopped:
            self.log.append(("stop", self.role))
            self.stopped = True

    def cont(self):
        if self.stopped:
            self.log.append(("cont", self.role))
            self.stopped = False


class Pair(DataPath):
    """run_pair's own sequence; every exchange with a worker logged with
    which workers were stopped at that moment."""

    def __init__(self):
        self.log = []
        self.ref = FakeWorker("ref", self.log)
        self.cand = FakeWorker("cand", self.log)
        self.cuda = True
        self.req = {"l2_flush": True}
        self.spin_us = 0
        self.plain_mag = [1.0]
        self.ref_full_fetches = 0
        self.input_bytes = self.output_bytes = 0
        self.pair_max_s = 0.0

    def stopped(self):
        return tuple(w.role for w in (self.ref, self.cand) if w.stopped)

    def delivery_on(self, timed, kind):
        return False

    def ipc_on(self, timed, kind):
        return True

    def gen_inputs(self, *a):
        self.pair_ipc, self.pair_delivered = True, False
        return 0

    def stop_wait(self, w):
        w.stop()

    def command(self, w, kind, args, what):
        self.log.append(("command", w.role, (args or {}).get("deliver"), self.stopped()))
        return {}

    def call(self, w, what, kind, args, net=False, stopped_start=False, pre_rt=0):
        self.log.append(("clock", w.role, self.stopped()))
        if stopped_start:
            w.cont()
        self.log.append(("call", w.role, self.stopped()))
        return 1, {}, 1

    def spend(self, name, t):
        return t

    def note_mem(self, *a):
        pass

    def note_launch(self, *a):
        pass

    def note_gate(self, *a):
        return None

    def note_jit(self, *a):
        pass

    def fetch_ref(self, what, light=False, inwin=False):
        self.log.append(("fetch", self.stopped()))
        return (None, [(None, None, 0)], None), {"mag": [1.0]}

    def tolerances(self, ref_meta, mag=None):
        return None

    def fetch_compare(self, *a, **k):
        return []

    def compare(self, *a, **k):
        return None


for order in (("ref", "cand"), ("cand", "ref")):
    p = Pair()
    p.run_pair("timed-0", "a timed call", order=order, timed=True)
    log = p.log
    name = "timed %s first" % order[0]
    calls = [e for e in log if e[0] == "call"]
    ok(len(calls) == 2 and all(e[2] == (("cand",) if e[1] == "ref" else ("ref",))
                               for e in calls),
       "%s: each worker's call made with the other stopped" % name, log)
    deliver = [i for i, e in enumerate(log) if e[0] == "command" and e[2] == "cand"]
    clock = [i for i, e in enumerate(log) if e[0] == "clock" and e[1] == "cand"]
    ok(len(deliver) == 1 and len(clock) == 1 and "cand" in log[deliver[0]][3] and
       "cand" in log[clock[0]][2] and
       ("cont", "cand") not in log[deliver[0]:clock[0]],
       "%s: the candidate stopped from its inputs' writing until its clock starts" % name,
       log)
    d_ref = [e for e in log if e[0] == "command" and e[2] == "ref"]
    ok(len(d_ref) == 1 and "cand" in d_ref[0][3],
       "%s: the candidate stopped while the reference's inputs are written" % name, log)
    fetch = [e for e in log if e[0] == "fetch"]
    ok(len(fetch) == 1 and fetch[0][1] == () and p.stopped() == (),
       "%s: both workers running once the calls are made" % name, log)

# A wait on a worker the referee holds stopped is the evaluator's fault:
# an error of its own, never the candidate's timeout.
class Blame(Workers):
    wall_s = 300.0


for stopped in (True, False):
    w = FakeWorker("cand", [])
    w.stopped = stopped
    v = Blame().failed(w, W.WorkerTimeout(), "the pair's fetch")
    if stopped:
        ok(v.status == "error" and v.ours and "held that worker stopped" in v.message,
           "a wait on the candidate's worker held stopped: the evaluator's error",
           v.status, v.message)
    else:
        ok(v.status == "timeout" and not v.ours,
           "a wait on the candidate's worker running: the candidate's timeout",
           v.status, v.message)


# The delivery's self-test, the workers' replies stood in for.
OOM = (W.ERR, {"type": "AcceleratorError", "message": "CUDA error: out of memory",
               "oom": {"tried": 0}})


class SelfTest(IpcInputs):
    def __init__(self, replies, others, alone=False):
        self.cuda, self.cand, self.ref = True, "cand", "ref"
        self.req = {"timing": True, "mem_alone": alone}
        self.res = {"env": {}}
        self.mem_retry = None
        self.asked = []
        self.replies = list(replies)
        self.ledger = None if others is None else types.SimpleNamespace(
            others=lambda: (3 << 30, 0, others))

    def talk(self, w, what, go):
        self.asked.append(w)
        return self.replies.pop(0)


def selftest(replies, others, alone=False):
    t = SelfTest(replies, others, alone)
    try:
        t.ipc_selftest()
    except Verdict as v:
        return t, v
    return t, None


os.environ.pop("STARK_INPUT_DELIVERY", None)
t, v = selftest([(W.OK, {"h": ""}), (W.OK, {}), (W.OK, {"ok": True})], 0)
ok(v is None and t.ipc_state == "on" and t.asked == ["cand", "ref", "cand"],
   "delivery unset: a GPU's self-test runs, and on", t.ipc_state, t.asked)
t, v = selftest([OOM], 3)
ok(v is not None and v.status == "error" and v.ours and "beside 3 other" in v.message and
   t.mem_retry and "3.00 GiB" in t.mem_retry,
   "the self-test out of device memory beside 3 others: the evaluator's error, "
   "judged again alone", v and v.message, t.mem_retry)
for what, replies, others, alone in (("with no other evaluation", [OOM], 0, False),
                                     ("judged alone already", [OOM], 3, True),
                                     ("a failure other than memory",
                                      [(W.ERR, {"type": "x", "message": "no IPC"})], 3,
                                      False)):
    t, v = selftest(replies, others, alone)
    ok(v is None and t.ipc_state == "off" and
       t.res["env"]["inputs_delivered"].startswith("no: CUDA IPC") and t.mem_retry is None,
       "the self-test failed %s: timed without delivery, and says so" % what,
       v and v.message, t.res["env"])
os.environ["STARK_INPUT_DELIVERY"] = "off"
t, v = selftest([], 3)
ok(v is None and t.ipc_state is None and t.asked == [],
   "STARK_INPUT_DELIVERY=off: no self-test, no delivery", t.ipc_state)
del os.environ["STARK_INPUT_DELIVERY"]
t = SelfTest([OOM], 0)
try:
    t._ipc_ask(t.ref, {"open": []}, "opening the candidate's buffers", oom_ours=True)
    v = None
except Verdict as e:
    v = e
ok(v is not None and v.status == "error" and v.ours and t.mem_retry is None,
   "the reference out of device memory opening the candidate's buffers, alone: the "
   "evaluator's error, not the candidate's rejection", v and (v.status, v.message))
sys.exit(done())
