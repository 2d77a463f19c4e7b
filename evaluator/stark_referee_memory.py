"""stark_referee_memory -- the evaluation's memory on its GPU: planned from
the problem's footprint, admitted through the ledger, re-planned from what
the first trial measured, and whose fault it is when memory runs out.

The steps (stark_memory has the arithmetic and the ledger):
  plan_memory     before anything is loaded (on the CPU too, with the run
                  jail's memory as the budget): the reference worker estimates
                  the footprint on the meta device (PLAN); a problem whose
                  floor (both workers' inputs, outputs and weights) passes
                  the device is an error here, before any candidate code
                  runs; the estimate is reserved in the ledger (the whole
                  budget where there is no estimate), waiting while the
                  evaluations already on the GPU leave too little.
  replan_memory   after the first trial: the reservation follows what both
                  workers' allocators measured (the candidate's figures are
                  its own word), growing as the admission did, by waiting
                  while the others leave too little (stark_memory's
                  Ledger.grow).  A growth that stops short -- at the
                  deadline, or where every evaluation holding memory waits
                  to grow and waiting on would deadlock -- never runs the
                  plan beyond the reservation: the plan is made again
                  within what is reserved, its optional phases reduced
                  (env.mem_reduced), with why in env.mem_overcommit.
  plan_places     before the timing phase: how many memory placements the
                  spare memory affords (stark_worker_gpu._slot), fewer
                  where the growth they need stops short.
  oom_verdict     a worker that ran out of memory: the reference's failure,
                  and the candidate's worker's in our code (making inputs,
                  writing outputs), are the evaluator's ("error", with the
                  figures and the limit); in the candidate's own code
                  (construction, forward) it is the candidate's only beyond
                  its allowance (stark_memory.over_allowance) -- both
                  figures are given either way.
Time spent waiting for memory is the evaluator's: it is reported
(env.mem_wait_ms) and a wait that reaches the deadline is an error.
"""

import json
import time

import stark_memory as M
import stark_plan_cache
import stark_wire as W
from stark_referee_common import Verdict, dict_field, int_field

_fmt = M.fmt_bytes

# The shape probe's own estimate (a second forward on meta, at the grown
# sizes) is skipped where the first one's forward took this long: the
# probe is then planned from its inputs once made (shape_room).  Level 3's
# LSTMs and GRUs (21,000-43,000 operators on meta) took 10-31 s for each
# of the two on an H100 with torch 2.11, whose meta kernels for elementwise
# operators are Python (torch._refs); most problems take milliseconds.
SHAPE_EST_MAX_S = 3.0


def _fp_text(fp):
    return "inputs %s, outputs %s, weights %s, forward peak %s%s" % (
        _fmt(fp.get("in", 0)), _fmt(fp.get("out", 0)), _fmt(fp.get("weights", 0)),
        _fmt(fp.get("fwd", 0)),
        ", allocator holds %.2fx" % fp["factor"] if fp.get("factor") else "")


def _forward_s(st):
    """Seconds the PLAN's forward on meta took, from its marks (the
    worker's started: "built" to "planned"), or None."""
    if not isinstance(st, dict):
        return None
    a, b = st.get("built"), st.get("planned")
    if type(a) is not float or type(b) is not float or b < a:
        return None
    return b - a


class MemoryPlan:
    """The part of Evaluation that plans device memory."""

    def mem_init(self):
        self.ledger = None
        self.dev_total = 0          # the device's bytes, as the reference worker saw
        self.fp = {"ref": None, "cand": None}       # footprints (stark_memory)
        self.fp_estimated = None    # the meta estimate, or None
        self.mem_seen = {"ref": {}, "cand": {}}     # last figures each worker sent
        self.place_cap = None       # placements the plan affords (GEN's "places")
        self.mem_reserved = 0
        self.mplan = None           # stark_memory.Plan: the phases planned and reduced
        self.shape_fp = None        # the footprint at the shape probe's sizes (meta)
        # Why this evaluation ran out of device memory beside others within
        # its plan (the evaluator's estimate fell short, its or theirs):
        # evaluate() then judges it again alone (req["mem_alone"]).
        self.mem_retry = None
        # What the workers' allocators held (note_held): the pair under
        # way (run_pair names it), each one's largest peak and where it was
        # read, each one's last reading, and the most both held at once.
        self.plan_fp = None         # stark_plan_cache's fingerprint
        self.mem_step = "loading"
        self.held_peak = {"ref": (0, ""), "cand": (0, "")}
        self.held_now = {"ref": 0, "cand": 0}
        self.held_both = 0
        # Out-of-memory errors a library caught in each worker (note_ooms).
        self.ooms_seen = {"ref": 0, "cand": 0}

    def note_mem(self, role, what, reply):
        """Keeps a worker's memory figures from a reply (LOAD, GEN, CALL)."""
        mem = dict_field(reply, "mem")
        if not mem:
            return
        seen = self.mem_seen[role]
        seen[what] = {k: int_field(mem, k) for k in ("alloc", "peak", "reserved",
                                                     "peak_reserved", "free", "total")}
        if role == "ref" and int_field(mem, "total"):
            self.dev_total = int_field(mem, "total")
        self.note_held(role, what, seen[what])
        self.note_ooms(role, what, int_field(mem, "ooms"))

    def note_ooms(self, role, what, n):
        """A worker's allocator ran out of device memory and something
        other than the evaluator caught it and went on (stark_worker_memory
        mem_facts' "ooms"): a library inside the forward.  cuDNN, short of
        memory for the workspace of the algorithm it chose, runs another
        and keeps it for the process, with other results and another time:
        on the H100, beside three other evaluations, the honest copy of
        KernelBench level 1's problem 77 (a transposed 3-D convolution) ran
        one algorithm with a 545 MiB workspace and its reference another,
        and 1.05 million of 143 million elements differed by up to 3.3e-4:
        judged incorrect.  Beside other evaluations that is the evaluator's
        doing, whichever worker met it: judged again alone
        (stark_referee._again_alone).  Alone, with the whole budget, it is
        the problem's own need meeting the device: said in env.mem_caught."""
        if n <= self.ooms_seen[role]:
            return
        self.ooms_seen[role] = n
        text = "%s's worker met %d out-of-memory error%s that code inside the forward " \
            "caught and went on from (read at the %s of %s)" % (
                "the reference" if role == "ref" else "the candidate", n,
                "" if n == 1 else "s", what, self.mem_step)
        others, held = 0, 0
        if self.ledger is not None and not self.req.get("mem_alone"):
            held, _, others = self.ledger.others()
        if others > 0:
            text += " beside %d other evaluations reserving %s" % (others, _fmt(held))
            self.res["env"]["mem_caught"] = text[:400]
            self.mem_retry = text
            raise Verdict("error", "%s: a library such as cuDNN then runs another algorithm, "
                          "with other results and another time (the evaluator's limit, not "
                          "the candidate's doing)" % text, ours=True)
        self.res["env"]["mem_caught"] = ("%s, with %s reserved for this evaluation: a library "
                                         "such as cuDNN then runs another algorithm" % (
                                             text, _fmt(self.mem_reserved)))[:400]

    def note_held(self, role, what, fig):
        """env.mem_held: the most each worker's allocator held (its peak of
        reserved bytes since its last reading, read at each untimed reply)
        and the most both held at once (one's peak beside the other's last
        reading), against the reservation.  An allocator keeps what it
        freed for reuse, so each holds about its own largest phase from
        then on, whatever phase the other is in: the figure the plan's
        phases are checked against (a diagnostic; the CUDA contexts are
        not in it)."""
        peak = max(fig.get("peak_reserved", 0), fig.get("reserved", 0))
        if peak > self.held_peak[role][0]:
            self.held_peak[role] = (peak, "%s of %s" % (what, self.mem_step))
        other = "cand" if role == "ref" else "ref"
        self.held_both = max(self.held_both, peak + self.held_now[other])
        self.held_now[role] = fig.get("reserved", 0)
        parts = ["%s at most %s (read at the %s)" % (
            name, _fmt(self.held_peak[r][0]), self.held_peak[r][1])
            for r, name in (("ref", "reference"), ("cand", "candidate"))
            if self.held_peak[r][0]]
        self.res["env"]["mem_held"] = ("%s; both at once at most %s%s" % (
            ", ".join(parts), _fmt(self.held_both),
            ", %s reserved" % _fmt(self.mem_reserved) if self.mem_reserved else ""))[:400]

    def budget(self):
        return M.budget(self.dev_total)

    def note_started(self, st):
        """The reference worker's start, step by step, from its PLAN reply
        (stark_worker.Worker.started: the system's monotonic clock), added
        to env.startup_parts_ms as parts of their own, which spawn and plan
        hold: from the fork to its main (ref_jail), mapping the window
        (ref_window), initializing CUDA (ref_cuda), the rest of its making
        (ref_rest), waiting for PLAN (ref_wait), then the estimate: reading
        the device's memory, where CUDA's context is made (ref_devmem),
        seeding (ref_seed), building the model and inputs on meta (ref_build), the
        forward (ref_forward; ref_estimate where the estimate's own marks
        are missing).  Then how long the threads started beside them took
        from CUDA's initialization to their end, where they ended before
        the estimate did: CUDA's first uses (ref_warm_thread), the fused
        comparison's NVRTC (ref_nvrtc_thread)."""
        t_fork = self.ref.t_fork
        if not isinstance(st, dict) or t_fork is None:
            return

        def at(k):
            return st[k] if type(st.get(k)) is float and st[k] >= t_fork else None
        names = {"main": "jail", "window": "window", "cuda": "cuda", "made": "rest",
                 "plan": "wait", "measured": "devmem", "seeded": "seed", "built": "build",
                 "planned": "forward"}
        if at("seeded") is None or at("built") is None:
            names.update(measured=None, seeded=None, built=None, planned="estimate")
        marks = [("fork", t_fork)] + [(k, at(k)) for k in names
                                      if names[k] and at(k) is not None]
        parts = ["ref_%s %.0f" % (names[b[0]], (b[1] - a[1]) * 1e3)
                 for a, b in zip(marks, marks[1:])]
        if at("cuda") is not None:
            for k, name in (("warmed", "warm_thread"), ("nvrtc", "nvrtc_thread")):
                if at(k) is not None and at(k) >= at("cuda") and \
                        (at("planned") is None or at(k) <= at("planned")):
                    parts.append("ref_%s %.0f" % (name, (at(k) - at("cuda")) * 1e3))
        env = self.res["env"]
        env["startup_parts_ms"] = " ".join([env.get("startup_parts_ms", "")] + parts).strip()[:300]

    # -- before loading ----------------------------------------------------
    def host_budget(self):
        """On the CPU: the bytes of the run jail's memory (the request's
        host_mem_mib, which the orchestrator sets from the jail's limit)
        left to tensors once the three processes' own memory is counted
        (HOST_BASE_BYTES); 0 where no limit is known."""
        mib = self.req.get("host_mem_mib") or 0
        if type(mib) is not int or mib <= 0:
            return 0
        return max((mib << 20) - M.HOST_BASE_BYTES, 1)

    def plan_memory(self):
        """The footprint estimated on the meta device, the plan made from
        it (stark_memory.plan: the largest phase, the optional phases
        reduced where the whole does not fit), and on a GPU the plan's
        bytes reserved in the ledger, waiting for room.  On the CPU the
        budget is the run jail's memory; there is no ledger (each
        evaluation has a jail of its own)."""
        budget = self.budget() if self.cuda else self.host_budget()
        if not self.cuda and not budget:
            return
        t0 = time.monotonic()
        kept, publish = self.plan_kept()
        est = self.command(self.ref, W.PLAN, {"init_seed": 0, "estimate": kept is None},
                           "estimating the footprint")
        self.startup_part("plan", t0)
        self.note_started(est.get("started"))
        fwd_s = _forward_s(est.get("started"))
        if kept is not None:
            est.update(kept)
            fwd_s = kept["fwd_s"]
        elif publish:
            self.plan_publish(est, fwd_s)
        self.note_mem("ref", "plan", est)
        self.note_planned_launch(est)
        if self.cuda:
            budget = self.budget()
        env = self.res["env"]
        keys = ("in", "out", "weights", "fwd")
        if all(type(est.get(k)) is int and est[k] >= 0 for k in keys):
            self.fp_estimated = {k: est[k] for k in keys}
            env["mem_estimate"] = _fp_text(self.fp_estimated)
            if self.cuda:
                # The allocator's rounding until the first trial measures
                # it (stark_memory.ALLOC_FACTOR_EST).
                self.fp_estimated["factor"] = M.ALLOC_FACTOR_EST
        else:
            env["mem_estimate"] = ("none: %s" % str(est.get("error", "?")))[:300]
        total = self.dev_total if self.cuda else budget
        where = "this device" if self.cuda else "the run jail's memory"
        if self.fp_estimated and total:
            floor = M.floor_need(self.fp_estimated)
            if not self.cuda:
                floor -= 2 * M.CONTEXT_BYTES + M.FLUSH_CONTEXT_BYTES
            if floor > budget:
                raise Verdict("error", "the problem cannot be judged on %s: one evaluation "
                              "needs at least %s of its memory (the reference's %s, held in "
                              "both workers%s), and the evaluator allows itself %s there%s" % (
                                  where, _fmt(floor), _fp_text({k: self.fp_estimated[k] for k in keys}),
                                  ", and their CUDA contexts" if self.cuda else "",
                                  _fmt(budget),
                                  " of the device's %s" % _fmt(total) if self.cuda else
                                  " (the run jail's memory limit of %d MiB less %s for its "
                                  "three processes: the evaluator's own limit, which "
                                  "STARK_RUN_MEM_MIB raises)" % (
                                      self.req.get("host_mem_mib") or 0,
                                      _fmt(M.HOST_BASE_BYTES))))
        if self.fp_estimated:
            self.make_plan(self.fp_estimated, None, budget)
            want = self.mplan.need
        else:
            want = budget
        if fwd_s is not None and fwd_s > SHAPE_EST_MAX_S:
            env["shape_estimate"] = ("skipped: the estimate's forward on meta took %.1f s; "
                                     "the shape probe is planned from its inputs" % fwd_s)
        else:
            t = time.monotonic()
            self.shape_fp = self.estimate_shape()
            self.startup_part("shape", t)
        if self.cuda:
            t = time.monotonic()
            self.admit(min(want, budget) if budget else want, budget)
            self.startup_part("admit", t)
        self.res["stage_ms"]["startup_ms"] = self.res["stage_ms"].get("startup_ms", 0.0) + \
            (time.monotonic() - t0) * 1e3

    def plan_kept(self):
        """(the estimate an earlier evaluation of this problem made, which
        the request carries, or None; whether to hand a new one back):
        stark_plan_cache.  env.plan_cache says which and why."""
        env = self.res["env"]
        if not self.req.get("cache_dir"):
            return None, False
        try:
            self.plan_fp = stark_plan_cache.fingerprint()
        except Exception as e:
            env["plan_cache"] = ("unused: %s" % W.exc_text(e))[:200]
            return None, False
        kept, why = stark_plan_cache.kept(self.req.get("plan"), self.plan_fp)
        env["plan_cache"] = "kept from an earlier evaluation" if kept else "made: %s" % why
        return kept, kept is None

    def plan_publish(self, est, fwd_s):
        """The estimate handed to the orchestrator to keep (env
        plan_publish, which it drops from the result)."""
        doc = stark_plan_cache.entry_of(est, fwd_s, self.plan_fp)
        if doc is None:
            return
        text = json.dumps(doc, sort_keys=True)
        if len(text) <= stark_plan_cache.ENTRY_MAX:
            self.res["env"]["plan_publish"] = text

    def make_plan(self, ref, cand, budget, places=1):
        """self.mplan from footprints (never wider than the last plan: a
        phase once reduced stays reduced), with env.mem_plan and
        env.mem_reduced."""
        old = self.mplan
        self.mplan = M.plan(ref, cand, budget, places,
                            f64=old.f64 if old else True, repeat=old.repeat if old else True,
                            contexts=self.cuda)
        if old:
            for k, v in old.reduced.items():
                self.mplan.reduced.setdefault(k, v)
        env = self.res["env"]
        env["mem_plan"] = ("%s%s" % ("" if self.cuda else "host: ", self.mplan.text()))[:600]
        if self.mplan.reduced:
            env["mem_reduced"] = ("%s (the evaluator's limit on %s, not the candidate's "
                                  "doing)" % (self.mplan.reduced_text(),
                                              "the device" if self.cuda else
                                              "the run jail's memory"))[:900]
        if self.mplan.need > budget > 0:
            env["mem_overcommit"] = "the plan needs %s, the evaluator allows itself %s" % (
                _fmt(self.mplan.need), _fmt(budget))

    def f64_skip(self):
        """Why the float64 runs are skipped (the COMPARE header's f64), or
        None where they are planned."""
        if self.mplan is None or self.mplan.f64:
            return None
        return "skipped for the evaluator's memory limit: " + self.mplan.reduced.get(
            "float64", "not planned")

    def repeat_room(self):
        """Whether the repeatability check may keep a second output (None:
        no plan, the worker judges by the device's free memory)."""
        return None if self.mplan is None else self.mplan.repeat

    def estimate_shape(self):
        """The footprint at the shape probe's sizes (shape_sizes), on the
        meta device, or None."""
        sizes = self.shape_sizes()
        if not sizes or not self.fp_estimated:
            return None
        est = self.command(self.ref, W.PLAN, {"init_seed": 0, "sizes": sizes},
                           "estimating the footprint at another shape")
        keys = ("in", "out", "weights", "fwd")
        if all(type(est.get(k)) is int and est[k] >= 0 for k in keys):
            return {k: est[k] for k in keys}
        return None

    def shape_room(self, total_in):
        """Whether the shape probe fits: its need (from its estimate, or
        the measured footprint scaled by its inputs' bytes total_in: the
        inputs by their ratio k, the outputs and the forward's peak by k
        squared, since they may grow faster than the inputs, as attention's
        does) within the reservation, grown without waiting where the
        ledger has room.  Returns (True, None) or (False, why)."""
        budget = self.budget() if self.cuda else self.host_budget()
        ref, cand = self.fp["ref"] or self.fp_estimated, self.fp["cand"]
        if not budget or not ref:
            return True, None
        shp = self.shape_fp
        if shp is None:
            if total_in is None:
                return True, None
            k = max(total_in / max(ref.get("in", 0), 1), 1.0)
            grow = {"in": k, "out": k * k, "weights": 1, "fwd": k * k}
            shp = {key: int(ref.get(key, 0) * g) for key, g in grow.items()}
        ratio = 1.0
        if cand and ref:
            ratio = max(cand.get("fwd", 0), 1) / max(ref.get("fwd", 0), 1)
        want = M.shape_need(shp, ratio, contexts=self.cuda)
        if not self.cuda:
            have = budget
        elif self.ledger is not None:
            have = self.mem_reserved if want <= self.mem_reserved else \
                self.ledger.resize(want, budget)
            self.mem_reserved = max(self.mem_reserved, have)
        else:
            have = budget
        if want <= have:
            return True, None
        return False, ("skipped for the evaluator's memory limit: the call at the grown sizes "
                       "needs %s, and %s is what this evaluation %s" % (
                           _fmt(want), _fmt(have),
                           "could take beside the other evaluations on the GPU"
                           if self.ledger is not None else "allows itself"))

    def admit(self, nbytes, budget):
        """The ledger's reservation of nbytes, waiting while the GPU's other
        evaluations leave too little (where there is a ledger: a GPU lock
        file shared with them)."""
        env = self.res["env"]
        if self.req.get("mem_alone") and budget:
            # Judged again after running out of memory beside others: the
            # whole budget, so that no estimate of anyone's can fail it.
            nbytes = budget
        if self.lock_fd is None or not budget:
            self.mem_reserved = nbytes
            env["mem_reserved"] = "%s (no ledger: one evaluation on this GPU)" % _fmt(nbytes)
            return
        try:
            self.ledger = M.Ledger(self.lock_fd)
            with self.queued():
                ok = self.ledger.reserve(nbytes, budget, lambda: self.time_left_for(4))
        except (M.LedgerError, OSError) as e:
            self.ledger = None
            env["mem_ledger"] = ("unusable: %s" % e)[:200]
            return
        waited = self.ledger.waited_s
        env["mem_wait_ms"] = "%.0f" % (waited * 1e3)
        if not ok:
            held, waiting, n = self.ledger.others()
            raise Verdict("error", "waited %.0f s for device memory without getting it: this "
                          "evaluation needs %s, and %d other evaluations on the GPU hold %s "
                          "and wait for %s of the %s the evaluator allows itself there (its "
                          "own limit: fewer evaluations in flight, or a longer --timeout, "
                          "would let it run)" % (waited, _fmt(nbytes), n, _fmt(held),
                                                 _fmt(waiting), _fmt(budget)))
        self.mem_reserved = nbytes
        env["mem_reserved"] = "%s of %s" % (_fmt(nbytes), _fmt(budget))

    # -- after the first trial ---------------------------------------------
    def measured_fp(self, role):
        """A worker's footprint from its first trial's figures: the inputs'
        and outputs' bytes the referee saw, the weights it held after
        loading, and the forward's peak above what it held before the call.
        None where it sent no figures (CPUs)."""
        seen = self.mem_seen[role]
        load, gen, call = seen.get("load"), seen.get("gen"), seen.get("call")
        if not (load and gen and call):
            return None
        fp = {"in": self.input_bytes, "out": self.output_bytes,
              "weights": load["alloc"],
              "fwd": max(call["peak"] - gen["alloc"], self.output_bytes, 0)}
        factor = M.alloc_factor(call.get("peak", 0), call.get("peak_reserved", 0))
        if factor > M.ALLOC_FACTOR:
            fp["factor"] = factor
        return fp

    def grow_memory(self, nbytes):
        """The reservation made nbytes: shrunk at once, or grown, waiting
        while the GPU's other evaluations leave too little (Ledger.grow:
        it stops short at half the time left, or where waiting would deadlock,
        ledger.gave_up then says which).  env.mem_wait_ms is the whole
        wait, admission's included.  Returns the bytes now reserved."""
        env = self.res["env"]
        budget = self.budget()
        if self.req.get("mem_alone"):
            # Judged again alone (admit): the whole budget stays reserved
            # to the end, never shrunk to a plan.  Shrunk after the first
            # trial, it let the others back in, and on an H100 at --jobs 4
            # level 1's 23_Softmax, whose probes took more than its plan
            # (44 GiB against 36), ran out beside them a second time.
            nbytes = max(nbytes, self.mem_reserved)
        # At most half the time left: the trials and the timing phase after
        # it need theirs, and a plan reduced in time beats none.
        until = time.monotonic() + max(self.deadline - time.monotonic(), 0.0) / 2
        with self.queued():
            self.mem_reserved = self.ledger.grow(
                nbytes, budget, lambda: time.monotonic() < until and self.time_left_for(4))
        env["mem_wait_ms"] = "%.0f" % (self.ledger.waited_s * 1e3)
        env["mem_reserved"] = "%s of %s" % (_fmt(self.mem_reserved), _fmt(budget))
        return self.mem_reserved

    def replan_memory(self):
        """The plan made again from the footprints the first trial
        measured, and the reservation made to follow it (grow_memory).
        Where it cannot grow as far, the plan is made within what is
        reserved: the optional phases reduced rather than run beyond it
        (the others' reservations count on it)."""
        if not self.cuda:
            return
        ref, cand = self.measured_fp("ref"), self.measured_fp("cand")
        if ref is None:
            return
        self.fp = {"ref": ref, "cand": cand}
        env = self.res["env"]
        env["mem_measured"] = "reference %s; candidate %s" % (
            _fp_text(ref), _fp_text(cand) if cand else "no figures")
        budget = self.budget()
        self.make_plan(ref, cand, budget)
        want = min(self.mplan.need, budget)
        if self.ledger is None:
            self.mem_reserved = self.mplan.need
            return
        if self.grow_memory(want) >= want:
            return
        short = "needs %s, %s reserved: the other evaluations on the GPU left no more, and " \
            "%s" % (_fmt(want), _fmt(self.mem_reserved),
                    "waiting longer would have passed the deadline"
                    if self.ledger.gave_up == "deadline" else
                    "the others holding memory were all waiting too, so that waiting on "
                    "would have deadlocked: this one, the last to come of those growing, "
                    "gave up waiting")
        self.make_plan(ref, cand, self.mem_reserved)
        if self.mplan.need <= self.mem_reserved:
            self.grow_memory(self.mplan.need)
            env["mem_overcommit"] = "%s; the plan was made within what is reserved, its " \
                "optional phases reduced (mem_reduced)" % short
        else:
            env["mem_overcommit"] = "%s; even with its optional phases reduced the plan " \
                "needs %s, beyond what is reserved (running out of memory beside others, " \
                "it is judged again alone)" % (short, _fmt(self.mplan.need))

    def plan_places(self):
        """The placements the timing phase may use: as many as the request
        asks, within what the spare memory affords (the ledger's free
        budget, or the device's free memory where there is no ledger); the
        reservation grown for them (grow_memory), and fewer of them where
        it stops short."""
        if not self.cuda or self.fp["ref"] is None or self.req["placements"] <= 1:
            return
        ref, cand = self.fp["ref"], self.fp["cand"]
        # Spare: beyond what the plan's largest phase holds, less what the
        # timing phase's call needs anyway.
        base = self.mplan.need if self.mplan else M.need(ref, cand)

        def need(n):
            return max(base, M.need_by_phase(ref, cand, n)["timing"])

        def fit(n, avail):
            # The most placements, up to n, whose need is within avail.
            while n > 1 and need(n) > avail:
                n -= 1
            return n

        if self.ledger is not None:
            free = self.ledger.free(self.budget())
            spare = free + max(self.mem_reserved - base, 0)
        else:
            free = self.mem_seen["ref"].get("call", {}).get("free", 0)
            spare = max(free - M.BUDGET_MARGIN, 0)
        n = M.places(ref, cand, self.req["placements"], spare)
        if self.ledger is not None and n > 1:
            # As many as what is free now affords (their need counts the
            # allocator's rounding): the growth waits only where another
            # evaluation took some of it meanwhile, and where it stops
            # short, as many as what is held affords.
            n = fit(n, self.mem_reserved + free)
            if n > 1 and self.grow_memory(need(n)) < need(n):
                n = fit(n, self.mem_reserved)
        self.place_cap = n
        self.res["env"]["mem_places"] = "%d (%s spare; each takes %s in each worker)" % (
            n, _fmt(spare), _fmt(M.placement_bytes(ref)))

    def release_memory(self):
        if self.ledger is not None:
            self.ledger.release()
            self.ledger = None

    # -- out of memory -------------------------------------------------------
    def oom_verdict(self, w, err, what, etype, emsg, tb):
        """The verdict of a worker that ran out of memory (see the module's
        docstring), or None when err is no such failure."""
        oom = err.get("oom")
        if not isinstance(oom, dict):
            return None
        phase = err.get("phase")
        device = int_field(oom, "total") > 0
        kind = "device" if device and etype != "MemoryError" else "host"
        have = int_field(oom, "alloc") if kind == "device" else int_field(oom, "hwm")
        tried = int_field(oom, "tried")
        peak = max(int_field(oom, "peak"), have) + tried if kind == "device" else have
        where = ""
        if kind == "device" and int_field(oom, "total"):
            where = "; the device had %s free of %s" % (_fmt(int_field(oom, "free")),
                                                        _fmt(int_field(oom, "total")))
            if self.ledger is not None:
                held, _, n = self.ledger.others()
                where += ", %d other evaluations on it reserved %s" % (n, _fmt(held))
                if n > 0:
                    self.mem_retry = "%s ran out of device memory during %s beside %d other " \
                        "evaluations%s" % ("the reference" if w.role == "ref" else
                                           "the candidate's worker", what, n, where)
            where += ", this one planned %s" % _fmt(self.mem_reserved)
        detail = "%s: %s" % (etype, emsg[:300])
        if w.role == "ref":
            return Verdict("error", "the reference ran out of %s memory during %s, holding "
                           "%s%s (the evaluator's limit, not the candidate's doing): %s"
                           % (kind, what, _fmt(have), where, detail), tb, ours=True)
        ref_have, ref_peak = self.ref_figures(phase, kind)
        slack = M.CAND_SLACK if kind == "device" else M.HOST_SLACK
        if phase in ("inputs", "fetch"):
            # Our code in the candidate's process: its fault only if what
            # it already held is far beyond what the reference held.
            if M.over_allowance(have, ref_have, slack):
                self.mem_retry = None
                return Verdict("runtime_error", "the candidate's worker ran out of %s memory "
                               "while the evaluator %s (%s): the candidate holds %s, far "
                               "beyond the reference's %s%s; %s" % (
                                   kind, "made the inputs" if phase == "inputs" else
                                   "copied its outputs", what, _fmt(have), _fmt(ref_have),
                                   where, detail), tb)
            return Verdict("error", "the device ran out of %s memory while the evaluator %s "
                           "in the candidate's worker (%s): it held %s, the reference %s, "
                           "within the candidate's allowance%s (the evaluator's limit, not "
                           "the candidate's doing); %s" % (
                               kind, "made the inputs" if phase == "inputs" else
                               "copied the outputs", what, _fmt(have), _fmt(ref_have),
                               where, detail), tb, ours=True)
        if M.over_allowance(peak, ref_peak, slack):
            self.mem_retry = None
            return Verdict("runtime_error", "the candidate ran out of %s memory during %s: it "
                           "needed at least %s (it held %s and asked for %s more), far beyond "
                           "the reference's %s at the same point (allowed: %gx + %s)%s; %s"
                           % (kind, what, _fmt(peak), _fmt(have), _fmt(tried),
                              _fmt(ref_peak), M.CAND_FACTOR, _fmt(slack), where,
                              detail), tb)
        return Verdict("error", "%s memory ran out during the candidate's %s while it needed "
                       "%s, within its allowance against the reference's %s%s (the "
                       "evaluator's limit, not the candidate's doing); %s" % (
                           kind.capitalize(), what, _fmt(peak), _fmt(ref_peak), where,
                           detail), tb, ours=True)

    def kill_blame(self, w):
        """Whose fault it would be if the jail's memory limit killed worker
        w (the kernel kills the largest worker first: both raise their
        oom_score_adj): the candidate's when its worker's peak host memory
        is beyond its allowance against the reference's, else the
        evaluator's -- the reference's worker, our code in the
        candidate's, or a candidate within its allowance reached a limit
        of ours."""
        ref = self.host_hwm.get("ref", 0)
        cand = self.host_hwm.get("cand", 0)
        if w.role == "cand" and M.over_allowance(cand, ref, M.HOST_SLACK):
            return "candidate"
        return "evaluator"

    def ref_figures(self, phase, kind):
        """What the reference held and peaked at for the step a candidate's
        worker failed in: after loading for construction, after making
        inputs for our code, the forward's peak for calls."""
        seen = self.mem_seen["ref"]
        if kind == "host":
            h = self.host_hwm.get("ref", 0)
            return h, h
        load = seen.get("load", {}).get("alloc", 0)
        gen = seen.get("gen", {}).get("alloc", 0)
        call = seen.get("call", {}).get("peak", 0)
        if phase in ("load", "construct"):
            return load, load
        if phase in ("inputs", "fetch"):
            return gen or load, gen or load
        return gen or load, max(call, gen, load)
