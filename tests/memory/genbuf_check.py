"""A call's inputs in the worker (evaluator/stark_worker_inputs.py,
Inputs.cmd_gen and _place): where a GEN's inputs take another shape than
the last call's, the last call's buffer is gone before the new one is made,
so the inputs are held twice at that step (generated and buffered), not
three times; where the shape is the same, the buffer is reused; and a
KernelBench trial's CPU inputs made ahead of the GPU lock are the ones the
trial then uses, made once.  A
worker made in this process on the CPU, the problem a module of our own.
Prints TAP.
Usage: python3 tests/memory/genbuf_check.py"""
import os
import sys
import types
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator"))
sys.path.insert(0, HERE)
sys.modules["_stark"] = types.SimpleNamespace(limits=lambda: {})

import torch  # noqa: E402
from tap import done, ok  # noqa: E402
import stark_worker  # noqa: E402

problem = types.ModuleType("problem")
problem.n = 1 << 16


def get_inputs():
    return [torch.randn(problem.n)]


problem.get_inputs = get_inputs
w = stark_worker.Worker(None, "ref", {"device": "cpu"}, problem)
w.cmd_gen({"seed": 1})
first = w.inputs[0]
ok(tuple(first.shape) == (1 << 16,), "the first GEN's input in a buffer of its shape")
w.cmd_gen({"seed": 2})
ok(w.inputs[0] is first, "the same shape again: the same buffer, filled anew")

# Another shape: when the new buffer is made, the old one must be gone.
old = weakref.ref(first)
del first
seen = []
real_empty = torch.empty


def watching_empty(*args, **kw):
    shape = args[0] if args else kw.get("size")
    if tuple(shape) == (1 << 17,):
        seen.append(old() is None)
    return real_empty(*args, **kw)


torch.empty = watching_empty
try:
    w.cmd_gen({"seed": 3, "sizes": {"n": 1 << 17}})
finally:
    torch.empty = real_empty
ok(seen == [True], "inputs of another shape: the last call's buffer let go before the new one "
   "is made (the inputs twice at that step, not three times)", "seen %r" % seen)
ok(tuple(w.inputs[0].shape) == (1 << 17,) and problem.n == 1 << 16,
   "the new shape's input buffered; the problem's size restored")

# KernelBench's CPU inputs made ahead of the trial's GPU lock (GEN
# host_only), then moved by the trial's GEN (from_host): get_inputs() runs
# once, and the inputs are those a plain KernelBench GEN makes.
calls = []
real_get = problem.get_inputs


def counted():
    calls.append(1)
    return real_get()


problem.get_inputs = counted
problem.n = 1 << 10
r = w.cmd_gen({"seed": 42, "kb": "fp32", "host_only": True})
# (kb_rand: how the draws were made, stark_rand; this stand-in's _stark
# has no engine, so torch's own served, and says why)
ok(r.get("host_bytes") == 4 << 10 and set(r) == {"host_bytes", "kb_rand"} and
   r["kb_rand"].startswith("torch's own") and w.kb_host is not None and len(calls) == 1,
   "GEN host_only: KernelBench's get_inputs() on the CPU, kept, its bytes replied", "reply %r" % r)
w.cmd_gen({"seed": 42, "kb": "fp32", "from_host": True})
ahead = w.inputs[0].clone()
ok(len(calls) == 1 and w.kb_host is None,
   "the trial's GEN (from_host) uses them: get_inputs() not run again, nothing kept",
   "%d calls" % len(calls))
w.cmd_gen({"seed": 42, "kb": "fp32"})
ok(len(calls) == 2 and torch.equal(w.inputs[0], ahead),
   "the same inputs as a KernelBench GEN that makes them itself")
w.cmd_gen({"seed": 42, "kb": "fp32", "host_only": True})
w.cmd_gen({"seed": 7})
ok(w.kb_host is None, "inputs made ahead and not used are let go by the next GEN")
sys.exit(done())
