"""stark_referee_baseline -- the compiled baseline (request "baseline" =
"compile"): the reference also timed under torch.compile (default mode),
so that a candidate's speedup is reported against both eager PyTorch and
torch.compile.

The compiled reference is the reference worker's (stark_compiled).  Here:

  - what the run jail may execute: the referee restricts exec with
    Landlock, before any worker is forked, to what inductor runs (the C++
    compiler; Triton's tools and the C compiler on a GPU) and, for a
    Triton candidate, what its JIT runs; the candidate's worker then keeps
    only its own language's share (stark_worker._restrict_exec);
  - compile_reference(): after the reference is built and before the
    candidate's worker loads anything, the reference worker makes inputs
    as for any call (GEN, placement 0) and compiles and warms up the
    compiled model on them (COMPILE_REF), comparing its outputs with the
    eager model's loosely.  Nothing of the candidate has run, so nothing
    of it can be in what inductor writes and loads; inductor's folder is
    gone before the candidate loads.  A compile that outlasts its share of
    the budget, or a reference worker that dies compiling, costs a fresh
    reference worker (built again, uncompiled), not the evaluation;
  - time_compiled(): in the timing phase, once the pairs are timed (so
    that the eager timings are made exactly as without it: interleaved,
    the compiled calls' OpenMP threads were seen to spread the eager
    reference's CPU times), a block of calls of the compiled model on the
    same placements, warmed up on each and stopped by the same rules
    (min_reps, target_rse, max_time_ms, max_reps).  Each call's inputs are
    made for it (GEN, a seed of its own), and it is timed as the eager
    reference is: on CPUs by the referee's clock around the exchange net
    of a no-op round trip, on GPUs between events after the L2 flush and
    the gate, the candidate stopped throughout;
  - compiled_results(): its median and 95% interval (on GPUs at the
    fastest placement, as the eager reference's), and speedup_compile.

Nothing here changes the verdict or the eager fields: where the compiled
baseline cannot be had the result says why (baseline_compile_error) and
the evaluation goes on as with --baseline eager.
"""

import shutil
import tempfile
import time

import _stark
import stark_compiled
import stark_triton
import stark_wire as W
from stark_referee_common import Verdict, cut, derive, fmt_us, number
from stark_referee_readings import claims_from, median_ci, placement_adjusted
from stark_referee_workers import Stopped

COMPILE_SHARE = 0.5       # of the budget left when compiling starts
COMPILE_MIN_S = 30.0      # ... but at least this long (within the deadline)
COMPILE_WARM_MAX = 16     # warm-up calls of the compiled model, at most


class Baseline:
    """The part of Evaluation that makes and times the compiled reference."""

    def baseline_init(self):
        self.compiled_ok = False    # the reference worker holds a compiled model
        self.baseline_error = None  # why there is no compiled baseline
        self.cand_exec = None       # what the candidate's worker may exec (None: as the jail)
        self.compiled_s = 0.0       # the slowest compiled pass (inputs and call), seconds

    def wants_compiled(self):
        return self.req.get("baseline") == "compile" and self.stage != "compile"

    def no_compiled(self, why):
        """The compiled baseline is given up for this evaluation: why, in the
        result (the first reason given is kept)."""
        self.compiled_ok = False
        if self.baseline_error is None:
            self.baseline_error = cut(str(why), 4000)

    # -- the jail ----------------------------------------------------------
    def exec_allowlist(self):
        """What the run jail may execute: the candidate's JIT's tools
        (jit_exec: Triton) and the compiled reference's (baseline
        compile), and what the candidate's worker keeps of it."""
        paths = []
        if self.req.get("jit_exec"):
            paths = list(stark_triton.exec_paths())
        own = list(paths)
        if self.wants_compiled():
            paths += [p for p in stark_compiled.exec_paths() if p not in paths]
            self.cand_exec = own
        return paths

    def restrict_failed(self, err):
        """The Verdict for a run jail whose exec could not be restricted
        (fail closed: no candidate code runs where anything may be
        executed)."""
        if self.req.get("jit_exec"):
            return Verdict("error", "cannot restrict what Triton's JIT may execute in the run "
                           "jail: %s; Triton candidates need Landlock (Linux 5.13 or later, "
                           "with landlock in the kernel's lsm= list)" % err)
        return Verdict("error", "cannot restrict what torch.compile's compiler may execute in "
                       "the run jail: %s; --baseline compile needs Landlock (Linux 5.13 or "
                       "later, with landlock in the kernel's lsm= list); --baseline eager "
                       "judges without it" % err)

    # -- compiling ---------------------------------------------------------
    def compile_reference(self, init_seed):
        """The compiled reference made and warmed up in the reference worker
        (see the module's docstring); sets compiled_ok, or baseline_error."""
        env = self.res["env"]
        t0 = time.monotonic()
        why = stark_compiled.available()
        if why:
            # Said here, without a round trip: the worker's torch is this one.
            self.no_compiled(why)
            env["baseline_compile"] = "unavailable"
            return
        try:
            folder = tempfile.mkdtemp(prefix="stark-compiled-")
        except OSError as e:
            self.no_compiled("cannot make the compiled reference's folder: %s" % e)
            return
        what = "the compiled reference's warm-up"
        try:
            self.gen_ref("compile-warmup", what, 0)
            kind, reply = self.compile_exchange(folder, t0)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if kind is None:
            # Timed out or died: a fresh reference worker, built again.
            self.no_compiled(reply)
            env["baseline_compile"] = "unavailable"
            self.respawn_ref(init_seed)
            return
        if kind == W.ERR:
            reply = {"error": "torch.compile failed: %s: %s" % (
                str(reply.get("type", "Exception"))[:100], str(reply.get("message", ""))[:1500])}
        took = (time.monotonic() - t0) * 1e3
        if reply.get("compiled") is not True:
            self.no_compiled(reply.get("error") or "torch.compile gave no compiled model")
            env["baseline_compile"] = "unavailable (%.0f ms)" % took
            return
        self.compiled_ok = True
        env["baseline_compile"] = (
            "torch.compile (default mode): %d graph(s), %d graph break(s); first call %.0f ms, "
            "%d warm-up calls, %.0f ms in all; outputs within the loose tolerance of eager "
            "PyTorch's" % (int(number(reply.get("graphs")) or 0),
                           int(number(reply.get("graph_breaks")) or 0),
                           number(reply.get("first_ms")), int(number(reply.get("calls")) or 0),
                           took))

    def compile_exchange(self, folder, t0):
        """COMPILE_REF and its reply within the compile's share of the
        budget: (kind, reply), or (None, why) where the reference worker
        timed out or died (it is then killed)."""
        w = self.ref
        budget = max(COMPILE_MIN_S, COMPILE_SHARE * (self.deadline - t0))
        limit = min(self.deadline, t0 + budget)
        try:
            w.chan.send_json(W.COMPILE_REF, {"folder": folder, "warm_max": COMPILE_WARM_MAX},
                             limit)
            return w.chan.recv_json({W.OK: W.CONTROL_MAX, W.ERR: W.CONTROL_MAX}, limit)
        except W.WorkerTimeout:
            w.kill()
            return None, ("torch.compile did not finish within %.0f s (the compiled "
                          "reference's share of the evaluation's budget)" % (limit - t0))
        except W.WorkerGone:
            return None, ("the reference worker %s while torch.compile compiled the "
                          "reference" % w.ending())
        except W.WireError as e:
            w.kill()
            return None, "the reference worker broke the protocol while compiling: %s" % e

    def respawn_ref(self, init_seed):
        """A new reference worker in place of one lost while compiling,
        built again (no candidate code has run yet)."""
        old = self.ref
        old.kill()
        old.release()
        self.workers.remove(old)
        self.ref = self.spawn("ref")
        self.talk(self.ref, "loading", self.ref.chan.send_json, W.LOAD,
                  {"init_seed": init_seed}, self.deadline)
        self.note_mem("ref", "load", self.talk(self.ref, "loading", self.expect_ok, self.ref,
                                               "construction of Model"))

    def gen_ref(self, label, what, slot):
        """The reference worker alone makes a call's inputs (GEN) from a
        seed derived for label, on placement slot."""
        args = {"seed": derive(self.seed, label), "sizes": {}, "variant": False, "slot": slot}
        if self.place_cap is not None:
            args["places"] = self.place_cap
        self.send_gen(self.ref, args, what)
        self.recv_gen(self.ref, what)

    # -- timing ------------------------------------------------------------
    def time_compiled(self, lp, nplace, noop_ns, pairs, base_us):
        """The compiled reference's block (see the module's docstring),
        after `pairs` timed pairs on nplace placements (lp: the phase's
        label prefix; noop_ns: the reference's no-op exchange, taken off
        each wall time on GPUs as for the eager reference).  Returns its
        timed calls ({"walls", "replies", "slots"}), or None where it was
        given up, not asked for or there was no time."""
        if not self.compiled_ok or not pairs:
            return None
        req = self.req
        t0 = time.monotonic()
        for i in range(max(req["warmup"], nplace if nplace > 1 else 0, 1)):
            if not self.compiled_time_left():
                self.no_compiled("no time was left before the deadline to time it")
                return None
            if self.compiled_pass("%scompiled-warmup-%d" % (lp, i),
                                  "warm-up call %d" % (i + 1), i % nplace) is None:
                return None
        comp = {"walls": [], "replies": [], "slots": []}
        t_block = time.monotonic()
        m, stop = 0, "max_reps"
        while m < req["max_reps"]:
            if not self.compiled_time_left():
                stop = "deadline"
                break
            got = self.compiled_pass("%scompiled-%d" % (lp, m), "timed call %d" % (m + 1),
                                     m % nplace, timed=True)
            if got is None:
                return None
            comp["walls"].append(max(got[0] - noop_ns, 0) / 1e3)
            comp["replies"].append(got[1])
            comp["slots"].append(m % nplace)
            m += 1
            if m < req["min_reps"]:
                continue
            if self.compiled_rse(comp["walls"], comp["replies"], comp["slots"],
                                 base_us) <= req["target_rse"]:
                stop = "target_rse"
                break
            if (time.monotonic() - t_block) * 1e3 >= req["max_time_ms"]:
                stop = "max_time_ms"
                break
        if not m:
            self.no_compiled("no time was left before the deadline to time it")
            return None
        self.res["env"]["timing_compile"] = "%d timed calls, stopped by %s, %.0f ms" % (
            m, stop, (time.monotonic() - t0) * 1e3)
        return comp

    def compiled_time_left(self):
        """Whether another compiled call (at the slowest pace seen) fits
        before the deadline with room to report."""
        per = 2.5 * max(self.compiled_s, self.ref_call_max_ns / 1e9)
        return time.monotonic() + per + 2.0 < self.deadline

    def compiled_pass(self, label, what, slot, timed=False):
        """One call of the compiled reference (warm-up or `timed`), the
        candidate stopped: (elapsed ns as call() measures them, the
        reply), or None where the compiled baseline was given up.  A timed
        call's host time is kept as each model's is (note_launch)."""
        if not self.compiled_ok:
            return None
        t0 = time.monotonic()
        what = "%s, compiled reference" % what
        self.gen_ref(label + "-compiled", what, slot)
        args = {"compiled": True}
        if self.cuda:
            with Stopped(self.cand):
                self.command(self.ref, W.FLUSH,
                             {"flush": bool(self.req.get("l2_flush", True))},
                             "an L2 flush (%s)" % what)
            args["gate_us"] = self.spin_us
        with Stopped(self.cand):
            ns, reply, _ = self.call(self.ref, "forward (%s)" % what, None, args,
                                     net=not self.cuda)
        if isinstance(reply.get("error"), str):
            self.no_compiled("%s (%s)" % (reply["error"][:2000], what))
            return None
        self.compiled_s = max(self.compiled_s, time.monotonic() - t0)
        if timed and self.cuda:
            self.note_launch("compiled", reply, self.note_gate(reply))
        return ns, reply

    def compiled_results(self, walls, replies, slots, base_us):
        """The compiled reference's median and interval from its timed
        calls (walls: us by the referee's clock; replies: on GPUs, its
        event readings, trusted as the eager reference's are), at the
        fastest placement; and speedup_compile against the candidate's
        median.  Nothing where it was given up or not timed."""
        if not self.compiled_ok or not walls:
            return
        us = walls
        if self.cuda:
            claims = claims_from(replies, base_us)
            us = [c if c == c else w for c, w in zip(claims, walls)]
        us, places = placement_adjusted(us, slots)
        med, lo, hi, rse = median_ci(us)
        c_med = self.res.get("runtime_us", float("nan"))
        self.res.update({"ref_compile_us": med, "ref_compile_lo_us": lo,
                         "ref_compile_hi_us": hi,
                         "speedup_compile": med / c_med if c_med > 0 else float("nan")})
        env = self.res["env"]
        env["rse_compile"] = "%.4f" % rse
        if len(places) > 1:
            env["timing_placement_compile_us"] = " ".join(
                "%.1f" % m for m in sorted(places.values()))[:300]

    def compiled_rse(self, walls, replies, slots, base_us):
        """The relative standard error of the compiled reference's median so
        far, at the fastest placement (0 before any call)."""
        if not self.compiled_ok or not walls:
            return 0.0
        us = walls
        if self.cuda:
            claims = claims_from(replies, base_us)
            us = [c if c == c else w for c, w in zip(claims, walls)]
        return median_ci(placement_adjusted(us, slots)[0])[3]

    def baseline_fields(self):
        """The result's baseline_compile_error, where one was asked."""
        if self.wants_compiled() and self.baseline_error:
            self.res["baseline_compile_error"] = self.baseline_error
            self.res["env"].setdefault("baseline_compile", "unavailable")

    def baseline_message(self):
        """The message's part for the compiled baseline ("" without one)."""
        r = self.res
        if "speedup_compile" in r:
            return "; against torch.compile: reference %s, speedup %.3gx" % (
                fmt_us(r["ref_compile_us"]), r["speedup_compile"])
        if self.wants_compiled() and self.baseline_error:
            return "; no compiled baseline: %s" % cut(self.baseline_error, 300)
        return ""

    def jailed_restrict(self, paths):
        """_stark.restrict_exec(paths), or the Verdict that fails closed."""
        try:
            _stark.restrict_exec(paths)
        except OSError as e:
            raise self.restrict_failed(e)

