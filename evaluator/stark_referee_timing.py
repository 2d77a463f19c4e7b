"""stark_referee_timing -- the timing method: how a call is clocked, the L2
flush and the gate before a timed GPU call, memory placements, and the
timing phase, which times both models and reports.

On CPUs a call's time is the referee's own clock around the CALL
exchange, less the median no-op round trip and the worker's run-queue
waits.  On GPUs the worker times each call with CUDA events on its stream
plus a guard event after a device-wide synchronize (work left on side
streams counts), after the reference worker has flushed the L2 (it is
shared by every process on the GPU, and the candidate's process could skip
or patch a flush of its own).  The candidate's claims are bounded by the
referee's clock: a candidate whose wall time, less the overhead the
reference shows, exceeds what it claims by more than the bound's slack is
charged that excess (env timing_wall_clock; flag timing_unverified, and the
whole wall time, only for a claim that cannot be true;
stark_referee_readings.judge_claims).  Clocks and
throttling are read through NVML in the reference worker, never here:
neither CUDA nor NVML may be initialized in a process that forks workers
afterwards.  The timing phase holds the GPU lock exclusively
(stark_referee_lock).
"""

import json
import math
import time

import stark_wire as W
import stark_worker_gpu
from stark_referee_common import Verdict, number
from stark_referee_readings import (beyond_roofline, claims_from, guard_base, guard_extra,
                                    guard_floor, guard_gaps, guard_host_slack, judge_claims, median,
                                    median_ci, placement_adjusted, quantile,
                                    roofline_floor_us)
from stark_referee_workers import Stopped

NOOP_PINGS = 21
CALL_FLOOR_S = 10.0           # a candidate's forward may take at least this,
CALL_FACTOR = 100.0           # or this many times the reference's slowest call
# Claims are disbelieved on medians of wall-clock times, which a few slow
# exchanges can sway when there are few: timing goes on to this many calls
# (time allowing) before claims that do not stand are given up.
JUDGE_MIN_REPS = 30
JIT_WARMUP_MAX = 16           # warm-up calls added while a JIT still compiles


def jit_new(reply):
    """Kernels the candidate's worker says its call compiled (0 if none)."""
    jit = reply.get("jit") if isinstance(reply, dict) else None
    new = jit.get("new") if isinstance(jit, dict) else None
    return new if type(new) is int and new > 0 else 0
# Each timed GPU call queues behind a gate in its worker's own context and
# stream (stark_worker_gpu._timed: a kernel that takes every thread slot of
# every SM) until the worker has launched the call, at most spin_us:
# SPIN_FACTOR times a model's SPIN_QUANTILE of its host times from the
# worker's wake-up to its last launch, plus SPIN_MARGIN_US -- the
# reference's, or the candidate's up to SPIN_CAND_US -- within
# [SPIN_MIN_US, SPIN_CAP_US].  The first calls, before any host time is
# known, get SPIN_START_US.  A model launched by many small kernels (level
# 3's ResNet18 at batch 2: hundreds of launches) takes the host
# milliseconds to launch; a gate that ends before that lets the GPU wait
# for the host inside the timed span, and the host's speed (other
# evaluations in flight, other processes) then moves the time by tens of
# percent.  The host releases the gate once it has launched the call, so
# the gate's length bounds only a call that waits for the GPU inside
# forward; the candidate's own host time moves it only up to SPIN_CAND_US,
# since host work done behind the gate goes unseen (docs/METHOD.md, known
# gaps): a candidate cannot buy itself a longer blind spot by launching
# slowly.  The gate was once a spin in a context of the reference worker's
# own; the GPU timeslices between contexts, so the timed span took in the
# slices of that spin left after the call's work: a one-kernel pointer
# chase (57 us) behind a 5-6 ms spin read 2428 us on the H100, and on an
# H200 the launch-bound model's honest copy read 0.89x, 0.82x and 1.22x.
# Calls whose launching outlasted the gate's length are counted (env
# timing_spin_short).
SPIN_START_US = 400
SPIN_MIN_US = 100
SPIN_CAP_US = 50000
SPIN_CAND_US = 2000
SPIN_FACTOR = 1.5
SPIN_QUANTILE = 0.9
SPIN_MARGIN_US = 300
# With more memory placements than this, each worker first times forward
# on all of them (stark_worker_gpu.cmd_scan) and the timed calls rotate
# through its PLACEMENT_KEEP fastest.
PLACEMENT_KEEP = 4
CALLS_SHOWN = 48            # timed calls listed a model in env timing_calls_us


def _runq_wait_ns(pid):
    """Nanoseconds the worker's main thread has spent runnable but not
    running (preempted by other processes): the second field of
    /proc/PID/schedstat, or None where the kernel does not provide it."""
    try:
        with open("/proc/%d/schedstat" % pid, "rb") as f:
            return int(f.read(256).split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _unqueued(wall_ns, q0, q1):
    """A call's wall time less the time its worker sat preempted: on a busy
    machine a call longer than a scheduling slice otherwise absorbs other
    tenants' slices, and the slower model is penalized the most.  The
    kernel's own accounting, which the worker cannot forge."""
    if q0 is None or q1 is None or q1 < q0:
        return wall_ns
    return max(wall_ns - (q1 - q0), 0)


def calls_text(ref_us, cand_us, most=CALLS_SHOWN):
    """Each timed call's time as reported (before the placements' choice),
    in the order made, for env timing_calls_us: what the medians and their
    intervals hide -- calls in two modes, a drift -- in the result itself.
    At most `most` a model; "+N" says how many more there were."""
    def one(xs):
        shown = " ".join("%.1f" % x for x in xs[:most])
        return shown + (" +%d" % (len(xs) - most) if len(xs) > most else "")
    return ("ref %s; cand %s" % (one(ref_us), one(cand_us)))[:1000]


class Timing:
    """The part of Evaluation that clocks calls and times the models."""

    def note_launch(self, role, reply, spin_us=None):
        """Keeps the model's host time from wake-up to its last launch (the
        first two host_us readings of its CALL reply), counts the call if
        that outlasted the gate it queued behind (spin_us), and sets the
        next spin from the reference's host times, or the candidate's up
        to SPIN_CAND_US."""
        host = reply.get("host_us") if isinstance(reply, dict) else None
        if not (isinstance(host, list) and len(host) >= 2):
            return
        t = number(host[0]) + number(host[1])
        if not (math.isfinite(t) and t >= 0):
            return
        if spin_us is not None and t > spin_us:
            self.spin_short += 1
        self.launch_us[role].append(min(t, 1e6))
        need = {r: SPIN_FACTOR * quantile(v, SPIN_QUANTILE) + SPIN_MARGIN_US
                for r, v in self.launch_us.items() if v}
        spin = max(need.get("ref", 0.0), min(need.get("cand", 0.0), SPIN_CAND_US))
        self.spin_us = int(min(max(spin, SPIN_MIN_US), SPIN_CAP_US))

    def note_gate(self, reply):
        """The gate a timed call's reply says it queued behind (us), kept
        for the result, or None; the first reason given for none."""
        g = reply.get("gate_us") if isinstance(reply, dict) else None
        if type(g) is int and g > 0:
            self.spin_seen.append(g)
            return g
        err = reply.get("gate_error") if isinstance(reply, dict) else None
        if err and self.spin_error is None:
            self.spin_error = str(err)[:200]
        return None

    def call(self, w, what, kind=None, args=None, net=False, stopped_start=False, pre_rt=0):
        """Runs forward on the worker's inputs; returns (elapsed ns as seen
        by the referee from the send of CALL to the reply, less the worker's
        run-queue waits; the reply; the whole exchange in ns).  With `net`
        (timed calls on CPUs), the elapsed ns are also less a no-op round
        trip made just before (see _settle).  A candidate's call gets
        CALL_FLOOR_S or CALL_FACTOR times the reference's slowest call,
        whichever is more (within the deadline).  With `stopped_start` (a
        delivered pair's call: stark_referee_delivery.delivered_call), the
        worker is stopped when the clock starts and continued just after,
        and pre_rt is the round trip to take off (measured the same way)."""
        kind = kind or W.CALL
        payload = json.dumps(args).encode() if args else b""
        deadline = self.deadline
        limit = None
        if w.role == "cand":
            limit = max(CALL_FLOOR_S, CALL_FACTOR * self.ref_call_max_ns / 1e9)
            deadline = min(deadline, time.monotonic() + limit)

        def go():
            if stopped_start:
                rt = pre_rt if net else 0
            else:
                rt = self._settle(w, deadline, True) if net else 0
            q0 = _runq_wait_ns(w.pid)
            t0 = time.perf_counter_ns()
            if stopped_start:
                w.cont()
            w.chan.send(kind, payload, deadline)
            rkind, obj = w.chan.recv_json({W.OK: W.CONTROL_MAX, W.ERR: W.CONTROL_MAX},
                                          deadline)
            t1 = time.perf_counter_ns()
            q1 = _runq_wait_ns(w.pid)
            if rkind != W.OK:
                raise self.worker_error(w, obj, what)
            return max(_unqueued(t1 - t0, q0, q1) - rt, 0), obj, t1 - t0
        try:
            ns, obj, raw = self.talk(w, what, go)
        except Verdict as v:
            if (v.status == "timeout" and limit is not None and
                    time.monotonic() < self.deadline - 0.1):
                raise Verdict("timeout", "the candidate's %s did not return within "
                              "%.1f s (%g times the reference's slowest call, at "
                              "least %g s); its worker was killed"
                              % (what, limit, CALL_FACTOR, CALL_FLOOR_S))
            raise
        if w.role == "ref":
            self.ref_call_max_ns = max(self.ref_call_max_ns, ns)
        self.note_kernels(obj)
        return ns, obj, raw

    def _settle(self, w, deadline, measure=False):
        """A no-op round trip before a measured exchange, so that the
        worker has run and is blocked reading when the exchange starts.

        The kernel adds a wait in the run queue to /proc/PID/schedstat only
        when the task gets the CPU.  A worker still waiting for it when the
        exchange starts (woken by SIGCONT, or finishing its last reply)
        would have that earlier wait taken off the exchange's time: on a
        2-core CPU, 60 us a call from one worker and not the other, so the
        same elementwise ops read 1.5x faster in the candidate.

        With `measure`, a second round trip is timed like a call and its
        ns returned: the overhead of this exchange (which core the worker
        wakes on, how deeply the cores slept), measured under the same
        conditions as the call that follows.  Otherwise 0.

        Used on CPUs, where these exchanges are the measurement; on GPUs
        the wall time only bounds what the events claim, and keeps its
        earlier method."""
        w.chan.send(W.PING, b"", deadline)
        w.chan.recv({W.OK: 0}, deadline)
        return self._round_trip(w, deadline) if measure else 0

    def _round_trip(self, w, deadline):
        """One no-op round trip in ns, less the worker's run-queue waits."""
        q0 = _runq_wait_ns(w.pid)
        t0 = time.perf_counter_ns()
        w.chan.send(W.PING, b"", deadline)
        w.chan.recv({W.OK: 0}, deadline)
        t1 = time.perf_counter_ns()
        return _unqueued(t1 - t0, q0, _runq_wait_ns(w.pid))

    def ping(self, w):
        def go():
            if not self.cuda:
                self._settle(w, self.deadline)
            return self._round_trip(w, self.deadline)
        return self.talk(w, "a no-op round trip", go)

    def note_jit(self, reply, timed):
        """Kernels the candidate's call compiled (Triton's JIT), as its
        worker counted them: env triton_jit, the compile stage of a Triton
        candidate (its first calls, untimed), and triton_jit_timed where a
        timed call still compiled."""
        new = jit_new(reply)
        if not new:
            return
        ms = number(reply["jit"].get("ms"))
        self.jit_seen[0] += new
        self.jit_seen[1] += ms if ms == ms else 0.0
        self.jit_seen[2] += 1
        self.res["env"]["triton_jit"] = "%d kernels compiled in %d calls, %.0f ms" % tuple(
            self.jit_seen)
        if timed:
            self.res["env"]["triton_jit_timed"] = str(
                int(self.res["env"].get("triton_jit_timed", "0")) + new)

    def time_models(self):
        """The timing phase: no-op round trips, warm-up pairs (checked, not
        timed), then timed pairs in alternating order until both medians
        are known to target_rse or the time is up.  Holds the GPU lock
        throughout, on the timing CPUs where there are (stark_referee_cpus).
        What its readings of the GPU's state need was made at loading
        (Evaluation.prepare_device)."""
        self.steps = {}
        if not self.take_lock():
            self.res["env"]["timing_stop"] = "gpu_lock"
            return
        spent0 = dict(self.spent)
        work0 = list(self.cmp_work)
        t0 = time.monotonic()
        try:
            self.cpus_move(True)
            self.step("cpus", t0)
            self.timing_phase()
        finally:
            t1 = time.monotonic()
            self.cpus_move(False)
            self.release_lock()
            self.step("cpus", t1)
            # Where the phase's time went (env timing_pair_ms): its pairs'
            # parts, its own steps (no-op round trips, timed no-ops and
            # the GPU's state, the placement scan, moving the workers),
            # and the rest.
            parts = {k: v - spent0.get(k, 0.0) for k, v in self.spent.items()}
            parts.update(self.steps)
            rest = time.monotonic() - t0 - sum(parts.values())
            self.res["env"]["timing_pair_ms"] = " ".join(
                "%s %.0f" % (k, v * 1e3) for k, v in list(parts.items()) +
                [("other", rest)] if v > 0)[:200]
            work = [a - b for a, b in zip(self.cmp_work, work0)]
            if work[0]:
                self.res["env"]["timing_compare_ms"] = self.work_text(work)

    def step(self, name, t0):
        """Adds the time since t0 to a step of the timing phase outside its
        pairs (env timing_pair_ms); returns now."""
        t = time.monotonic()
        self.steps[name] = self.steps.get(name, 0.0) + (t - t0)
        return t

    def scan_placements(self, nplace):
        """Each worker, the other stopped, times forward on each of its
        memory placements (fresh plain inputs) and keeps the fastest
        PLACEMENT_KEEP for the timed calls (stark_worker_gpu.cmd_scan).
        Returns the placements the timed calls rotate through."""
        t = time.monotonic()
        self.gen_inputs("scan", "the placement scan", slot=0)
        got = {}
        for role, w, other in (("ref", self.ref, self.cand), ("cand", self.cand, self.ref)):
            with Stopped(other):
                got[role] = self.command(w, W.SCAN, {"keep": PLACEMENT_KEEP},
                                         "the placement scan")
        kept = [got[r].get("kept") for r in got]
        if not all(type(k) is int and 1 <= k <= PLACEMENT_KEEP for k in kept):
            return nplace       # no scan made: the calls rotate through all
        self.scanned = nplace
        self.placements = max(kept)
        parts = []
        for role in ("ref", "cand"):
            us = [number(x) for x in got[role].get("us", [])[:64]
                  if isinstance(x, (int, float))]
            if us:
                parts.append("%s %s" % (role, " ".join("%.1f" % x for x in us)))
        env = self.res["env"]
        env["timing_scan_us"] = "; ".join(parts)[:900]
        env["timing_scan_ms"] = "%.0f (ref %.0f, cand %.0f)" % (
            (time.monotonic() - t) * 1e3, number(got["ref"].get("ms")),
            number(got["cand"].get("ms")))
        return self.placements

    def timing_phase(self, retry=True, t_first=None):
        """See time_models.  A candidate whose claims are not believed gets
        one more timing phase, when the deadline allows, before it is
        charged by the wall clock (and flagged where a claim cannot be true):
        a host busy with other work
        can stretch an honest worker's exchanges past the bound (on the
        H100 beside 24 compiler processes, an honest 52 us kernel's
        exchanges once ran 211 us beyond the reference's), while a forged
        timer fails the bound again."""
        req = self.req
        env = self.res["env"]
        t0 = time.monotonic()
        t_first = t0 if t_first is None else t_first
        # Inputs of a second phase come from seeds of their own: outputs a
        # candidate remembered from the first are no use.
        lp = "" if retry else "retry-"
        noop = {}
        ts = time.monotonic()
        for role, w, other in (("ref", self.ref, self.cand), ("cand", self.cand, self.ref)):
            with Stopped(other):
                pings = [self.ping(w) for _ in range(NOOP_PINGS)]
            noop[role] = sorted(pings)[len(pings) // 2]
        ts = self.step("pings", ts)
        sync_us, dev0, slack_c, nops = 0.0, {}, 0.0, []
        if self.cuda:
            # What a device-wide synchronize and a guard event cost by
            # themselves: the reference's timed no-ops.
            with Stopped(self.cand):
                dev0 = self.command(self.ref, W.DEVICE_INFO, {"bandwidth": True},
                                    "reading the GPU's state")
                ts = self.step("state", ts)
                nops = [self.command(self.ref, W.TIMED_NOOP, None, "a timed no-op")
                        for _ in range(NOOP_PINGS)]
            gaps = guard_gaps(nops)
            sync_us = max(median(gaps), 0.0) if gaps else 0.0
            with Stopped(self.ref):
                cnops = [self.command(self.cand, W.TIMED_NOOP, None, "a timed no-op")
                         for _ in range(NOOP_PINGS)]
            slack_c = guard_host_slack(nops, cnops)
            env["timing_guard_slack_us"] = "%.1f" % slack_c
            ts = self.step("nops", ts)
        # Memory placements the timed calls rotate through (the reference
        # worker's count, from its GEN replies); each is warmed up, so
        # that no placement's first timed call makes its allocations.
        self.plan_places()
        nplace = max(self.placements, 1) if self.cuda else 1
        if self.place_cap is not None:
            nplace = min(nplace, self.place_cap)
        if nplace > PLACEMENT_KEEP:
            ts = time.monotonic()
            nplace = self.scan_placements(nplace)
            self.step("scan", ts)
        warm = max(req["warmup"], nplace if nplace > 1 else 0)
        if not self.cuda and W.input_delivery():
            # The first timed pair shows the inputs' layout; from the next
            # on they are delivered (stark_referee_delivery), so it is a
            # warm-up pair.
            warm = max(warm, 1)
        i = extra = 0
        warm_ev = []
        while i < warm:
            if not self.time_left_for(2):
                break
            what = "warm-up call %d" % (i + 1)
            _, replies, _, bad = self.run_pair("%swarmup-%d" % (lp, i), what, timed=True,
                                               slot=i % nplace)
            if bad is not None and not self.lenient:
                raise Verdict("incorrect", bad)
            warm_ev.append(number((replies.get("ref") or {}).get("ev_us")))
            i += 1
            # A JIT (Triton) that still compiled in this call: warm up once
            # more, so compiling and autotuning stay out of the timed calls.
            if jit_new(replies.get("cand")) and extra < JIT_WARMUP_MAX:
                extra += 1
                warm = max(warm, i + 1)
        if self.cuda and self.launch_bound(warm_ev):
            ts = time.monotonic()
            self.launch_modes()
            self.step("modes", ts)
        walls = {"ref": [], "cand": []}
        replies_seen = {"ref": [], "cand": []}

        def all_claims():
            base = guard_base(replies_seen["ref"], sync_us)
            floor = guard_floor(nops, replies_seen["ref"])
            return {"ref": claims_from(replies_seen["ref"], base),
                    "cand": claims_from(replies_seen["cand"], base + slack_c, floor)}

        def settled():
            """Whether what the candidate's times rest on may be judged
            now: its claims stand, and no work off its stream is counted
            -- or JUDGE_MIN_REPS calls are in.  A few slow exchanges or
            guard readings sway the medians of few calls (an honest 55 us
            kernel once read 66 us on the guard gaps of 5 calls)."""
            if not self.cuda or n >= JUDGE_MIN_REPS:
                return True
            base = guard_base(replies_seen["ref"], sync_us)
            return (guard_extra(replies_seen["cand"], base + slack_c) == 0.0 and
                    judge_claims(walls["cand"], claims["cand"], raws_c, walls["ref"],
                                 claims["ref"])["believed"])
        raws_c = []
        slots = []
        t_phase = time.monotonic()
        n = 0
        stop_why = "max_reps"
        while n < req["max_reps"]:
            if not self.time_left_for(2):
                stop_why = "deadline"
                break
            what = "timed call %d" % (n + 1)
            order = ("ref", "cand") if n % 2 == 0 else ("cand", "ref")
            ns, replies, raws, bad = self.run_pair("%stime-%d" % (lp, n), what, order, timed=True,
                                                   slot=n % nplace)
            if bad is not None and not self.lenient:
                raise Verdict("incorrect", bad)
            slots.append(n % nplace)
            for role in ("ref", "cand"):
                # On CPUs each call's ns are net of a round trip of its own.
                walls[role].append(max(ns[role] - (noop[role] if self.cuda else 0), 0) / 1e3)
                if self.cuda:
                    replies_seen[role].append(replies[role])
            raws_c.append(raws["cand"] / 1e3)
            n += 1
            if n < req["min_reps"]:
                continue
            if self.cuda:
                # A claim that cannot be valid is judged by its wall time.
                claims = all_claims()
                conv = {r: [c if math.isfinite(c) else w for c, w in zip(claims[r], walls[r])]
                        for r in claims}
            else:
                conv = walls
            conv = {r: placement_adjusted(conv[r], slots)[0] for r in conv}
            if (median_ci(conv["ref"])[3] <= req["target_rse"] and
                    median_ci(conv["cand"])[3] <= req["target_rse"] and settled()):
                stop_why = "target_rse"
                break
            if (time.monotonic() - t_phase) * 1e3 >= req["max_time_ms"]:
                stop_why = "max_time_ms"
                break
        dev1 = {}
        if self.cuda:
            ts = time.monotonic()
            with Stopped(self.cand):
                dev1 = self.command(self.ref, W.DEVICE_INFO, {}, "reading the GPU's state")
            self.step("state", ts)
            self.gpu_env(dev0, dev1)
        self.res["stage_ms"]["time_ms"] = (time.monotonic() - t_first) * 1e3
        env["timing_stop"] = stop_why
        if n == 0:
            return              # no time was left to measure: no timings
        if self.cuda:
            claims = all_claims()
            j = judge_claims(walls["cand"], claims["cand"], raws_c, walls["ref"], claims["ref"])
            took = time.monotonic() - t0
            if (not j["believed"] and retry and
                    time.monotonic() + 2 * took + 2.0 < self.deadline):
                env["timing_retried"] = ("the first timing's claims were not believed "
                                         "(%s)" % j["why"])[:600]
                return self.timing_phase(retry=False, t_first=t_first)
            cand_us, ref_us = j["cand"], j["ref"]
            if not j["believed"]:
                env["timing_method"] = ("cuda_events; the candidate charged its exchanges' "
                                        "time beyond the bound")
            elif j["why"]:
                env["timing_method"] = "wall_clock (%s)" % j["why"]
            else:
                env["timing_method"] = "cuda_events"
            base = guard_base(replies_seen["ref"], sync_us)
            env["timing_sync_us"] = "%.1f/%.1f/%.1f" % (sync_us, base,
                                                        guard_floor(nops, replies_seen["ref"]))
            off = guard_extra(replies_seen["cand"], base + slack_c,
                              guard_floor(nops, replies_seen["ref"]))
            if off > 0:
                env["timing_off_stream_us"] = "%.1f" % off
            if self.spin_seen:
                env["timing_spin_us"] = "%d-%d" % (min(self.spin_seen), max(self.spin_seen))
                if self.spin_short:
                    env["timing_spin_short"] = (
                        "%d calls' launching outlasted their spin (host time to the last "
                        "launch, median ref %.0f us, cand %.0f us)" % (
                            self.spin_short, median(self.launch_us["ref"] or [0.0]),
                            median(self.launch_us["cand"] or [0.0])))
            else:
                env["timing_spin_us"] = "none (%s)" % (self.spin_error or "not queued")
            env["timing_detail_us"] = "; ".join(
                "%s %s" % (role, self.call_detail(replies_seen[role], walls[role]))
                for role in ("ref", "cand"))[:1000]
            env["timing_overhead_us"] = "%.1f/%.1f" % (j["o_ref"], j["o_cand"])
            env["timing_placements"] = str(nplace)
            if self.scanned:
                env["timing_scanned"] = str(self.scanned)
            if j["forged"]:
                self.flag("timing_unverified")
                env["timing_unverified"] = j["why"][:900]
            elif not j["believed"]:
                # Its events leave out host time that its exchanges took:
                # charged what the referee's clock saw beyond the bound
                # (judge_claims).
                env["timing_wall_clock"] = ("%s; each call charged max(claim, wall - %.1f us "
                                            "overhead - %.1f us slack)" % (
                                                j["why"], j["o_ref"], j["slack"]))[:900]
        else:
            cand_us, ref_us = walls["cand"], walls["ref"]
            env["timing_method"] = "wall_clock"
        env["timing_calls_us"] = calls_text(ref_us, cand_us)
        # The compiled reference (--baseline compile) in a block of its own
        # after the pairs (and after a second timing phase, where one was
        # needed), so that the eager timings are made exactly as without
        # it (stark_referee_baseline.time_compiled).
        base_c = guard_base(replies_seen["ref"], sync_us) if self.cuda else 0.0
        comp = self.time_compiled(lp, nplace, noop["ref"] if self.cuda else 0, n, base_c)
        if comp is not None:
            self.res["stage_ms"]["time_ms"] = (time.monotonic() - t_first) * 1e3
        cand_us, c_place = placement_adjusted(cand_us, slots)
        ref_us, r_place = placement_adjusted(ref_us, slots)
        if nplace > 1:
            # Each role's placements, fastest to slowest median: how much
            # where the buffers sit moved this kernel.
            env["timing_placement_us"] = "; ".join(
                "%s %s" % (role, " ".join("%.1f" % m for m in sorted(pl.values())))
                for role, pl in (("ref", r_place), ("cand", c_place)))[:600]
        c_med, c_lo, c_hi, c_rse = median_ci(cand_us)
        r_med, r_lo, r_hi, r_rse = median_ci(ref_us)
        self.res.update({"runtime_us": c_med, "runtime_lo_us": c_lo,
                         "runtime_hi_us": c_hi, "ref_runtime_us": r_med,
                         "ref_lo_us": r_lo, "ref_hi_us": r_hi, "reps": n,
                         "speedup": r_med / c_med if c_med > 0 else float("nan")})
        env["noop_rt_us"] = "%.1f/%.1f" % (noop["ref"] / 1e3, noop["cand"] / 1e3)
        env["rse"] = "%.4f/%.4f" % (r_rse, c_rse)
        if c_med <= 0:
            self.flag("below_timer_resolution")
        if comp is not None:
            self.compiled_results(comp["walls"], comp["replies"], comp["slots"], base_c)
        self.check_roofline(c_med, dev0)

    @staticmethod
    def call_detail(replies, walls):
        """Medians of a model's GPU call readings, for the result's notes:
        the referee's wall time, the worker's own time from request to reply
        (exch_us), the events (start->end, start->guard) and where the
        worker's host time went (as host_us lists it).  The
        candidate's are its own word: diagnostics, never evidence."""
        ev = median([number(r.get("ev_us")) for r in replies])
        guard = median([number(r.get("guard_us")) for r in replies])
        exch = median([number(r.get("exch_us")) for r in replies])
        host = [r.get("host_us") for r in replies]
        host = [h for h in host if isinstance(h, list) and len(h) == 5]
        parts = ["/".join("%.0f" % median([number(h[i]) for h in host]) for i in range(5))
                 if host else "?"]
        return "wall %.1f in-worker %.1f ev %.1f guard %.1f host %s" % (
            median(walls), exch, ev, guard, parts[0])

    def check_roofline(self, c_med, dev):
        """Flag speedup_beyond_roofline: the candidate's median is below the
        time the device needs to read its inputs and write its outputs
        (roofline_floor_us).  GPUs only: on CPUs caches and the OS blur any
        such floor."""
        bps = number(dev.get("copy_bps"))
        if not (self.cuda and math.isfinite(bps) and bps > 0):
            return
        l2 = dev.get("l2_bytes") if type(dev.get("l2_bytes")) is int else 0
        floor = roofline_floor_us(self.input_bytes, self.output_bytes, l2, bps)
        env = self.res["env"]
        env["gpu_copy_gbps"] = "%.0f" % (bps / 1e9)
        env["roofline_floor_us"] = "%.2f" % floor
        if beyond_roofline(c_med, floor):
            self.flag("speedup_beyond_roofline")

    def gpu_env(self, a, b):
        """The GPU's name, clocks, throttle reasons, temperature and power at
        the start and the end of the timing phase ("start/end"), the L2
        flush, as the reference worker read them."""
        env = self.res["env"]
        l2 = a.get("l2_bytes")
        if not self.req.get("l2_flush", True):
            env["l2_flush"] = ("off (--l2-flush off): no flush before timed calls, so they "
                               "run with what the %s L2 holds, as KernelBench's published "
                               "times do" % ("%d MiB" % (l2 >> 20) if type(l2) is int else
                                             "GPU's"))
        elif type(l2) is int:
            ctx = a.get("flush_context")
            where = "a context of its own" if ctx == "own" else \
                "the reference's context" if ctx == "shared" else \
                "the reference's context, %.200s" % ctx
            env["l2_flush"] = ("%d MiB written from %s; persisting lines reset: %.100s"
                               % (stark_worker_gpu.FLUSH_L2_TIMES * l2 >> 20, where,
                                  a.get("persist_reset")))
        elif a.get("flush_error"):
            env["l2_flush"] = "failed: %.200s" % a.get("flush_error")
        na, nb = a.get("nvml"), b.get("nvml")
        if not isinstance(na, dict):
            env["gpu_clocks"] = "unavailable: %.200s" % (a.get("nvml_error") or "no NVML")
            return
        nb = nb if isinstance(nb, dict) else {}

        def fmt(v):
            return "?" if isinstance(v, bool) or not isinstance(v, (int, float)) else "%g" % v

        env["gpu_name"] = str(na.get("name", "?"))[:100]
        for key, name in (("sm_mhz", "gpu_sm_mhz"), ("mem_mhz", "gpu_mem_mhz"),
                          ("temp_c", "gpu_temp_c"), ("power_w", "gpu_power_w")):
            env[name] = "%s/%s" % (fmt(na.get(key)), fmt(nb.get(key)))
        seen = [x.get("throttle") for x in (na, nb) if isinstance(x.get("throttle"), list)]
        if not seen:
            env["gpu_throttle"] = "unknown"
        else:
            names = sorted({str(r)[:40] for lst in seen for r in lst})
            env["gpu_throttle"] = ",".join(names)[:300] or "none"

    def time_left_for(self, pairs):
        """Whether `pairs` more calls of both models (at the slowest pace
        seen so far) fit before the deadline with room to report."""
        per_pair = 2.5 * max(self.pair_max_s, self.ref_call_max_ns / 1e9)
        return time.monotonic() + pairs * per_pair + 2.0 < self.deadline
