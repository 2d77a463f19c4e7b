"""stark_referee_modes -- the workers' launch modes.

A GPU process draws a launch mode when it starts and keeps it for life:
the GPU's time for back-to-back launches of small kernels follows it, and
so does a launch-bound model's forward.  On an H200 (torch 2.11+cu130),
600 launches of one small kernel read 934-984 us in some processes and
1025-1058 us in others, and the launch-bound model of
tests/gpu/memory/launch 1507-1527 against 1590-1605 us in the same
processes; six copies of the model elsewhere in one process's memory read
within 0.3% of each other, and pinning a process to a CPU changed nothing
(scripts/probe-launch-mode).  The reference and the candidate run in
processes of their own, so a launch-bound honest copy whose worker drew
the other mode read 0.95x or 1.05x (docs/BENCHMARKS.md, 2026-11-29).

Two things are done with that:
  launch_modes   in the timing phase, for a launch-bound reference only
                 (launch_bound): both workers' modes in env.launch_mode_us,
                 a diagnostic.
  match_modes    where the reference's plan says it may be launch-bound
                 (plan_launch_bound; STARK_LAUNCH_MATCH=1 always, =0
                 never), before any candidate code runs: the two
                 workers' modes compared, and the one fewer of the
                 evaluation's readings agree with forked again until
                 they match (env.launch_match).  Read on the reference's
                 own forward, built in each worker from a public seed,
                 where its footprint is small (mode_on_model), else on
                 launches of one small kernel.

The mode is not the CPU's, nor the buffers' places, nor the address
layout's (setarch -R: 5.9% apart across 8 processes on an H100), and not
the stream's alone: six streams of one process read within 1-7% of each
other, and the slow processes were slow on all of them, so choosing a
stream would not match two processes (scripts/probe-launch-mode,
variants streams, noaslr and pick; docs/BENCHMARKS.md, 2026-12-06).
"""

import os
import time

import stark_wire as W
from stark_referee_common import number
from stark_referee_readings import median
from stark_referee_workers import Stopped
from stark_worker_memory import LAUNCH_BOUND_SHARE, plan_launch_bound

LAUNCH_MODE_N = 300           # launches a worker's launch mode is timed on
LAUNCH_MODE_REPS = 5          # ... that many times in the timing phase, the median kept
LAUNCH_MATCH_REPS = 7         # readings a worker at start-up, the least kept
LAUNCH_MATCH_TOL = 0.02       # modes within this of each other match
LAUNCH_MATCH_TRIES = 6        # workers forked again at most
MODEL_MATCH_TOL = 0.01        # ... readings of the reference's own forward within this
MODEL_MATCH_BYTES = 2 << 30   # read on that forward where its footprint is at most this


def modes_match(ref_us, cand_us, tol=LAUNCH_MATCH_TOL):
    """Whether two workers' launch readings are of one mode: within tol
    of each other.  On an H200, of 25 launch-bound honest copies whose
    workers' small-kernel readings at start-up were within 3%, the 15
    within 2% read 0.996-1.008x; of the 10 at 2.3-2.6%, 3 read
    0.947-0.956x (docs/BENCHMARKS.md, 2026-11-29).  Readings of the
    reference's own forward are matched within MODEL_MATCH_TOL."""
    return ref_us > 0 and cand_us > 0 and abs(cand_us / ref_us - 1.0) <= tol


def launch_match_wanted(planned):
    """Whether the workers' launch modes are matched: STARK_LAUNCH_MATCH=1
    always, =0 never, and by default unless the plan says the reference
    is not launch-bound (`planned`: plan_launch_bound; None, no estimate,
    is matched: level 3's 30_SwinTransformerV2 has none on the meta
    device and read 1.077x unmatched on an H100, its workers 8% apart).
    Unconditional matching cost every evaluation on an H200 (startup p50
    1.0 -> 2.6 s on level 2's problems 1-8, none launch-bound; 4.4 s at 8
    evaluations a GPU: docs/BENCHMARKS.md, 2026-11-29)."""
    v = os.environ.get("STARK_LAUNCH_MATCH", "")
    return v == "1" or (v != "0" and planned is not False)


class LaunchModes:
    """The part of Evaluation that reads, and matches, the workers'
    launch modes."""

    planned_launch = None     # plan_launch_bound of the reference's PLAN
    mode_model_error = None   # why a worker could not time the reference's forward
    mode_unmatched = None     # (cand/ref - 1 in %, forks) where the modes stayed apart

    def note_planned_launch(self, est):
        """The PLAN reply's kernel estimate: env.launch_planned, and
        whether the reference may be launch-bound (planned_launch)."""
        if not (self.cuda and isinstance(est, dict)):
            return
        k, g = est.get("kernels"), est.get("gpu_us_least")
        self.planned_launch = plan_launch_bound(k, g)
        if self.planned_launch is not None:
            self.res["env"]["launch_planned"] = "%d kernels, %.0f us of GPU work at the least%s" % (
                k, g, ": may be launch-bound" if self.planned_launch else "")
        else:
            self.res["env"]["launch_planned"] = "no estimate: may be launch-bound"

    def mode_readings(self, w, other, reps):
        """reps readings of worker w's launch mode (us, the GPU's time for
        LAUNCH_MODE_N launches behind its gate: TIMED_NOOP "launches"),
        the other worker stopped; the unusable ones left out."""
        with Stopped(other):
            got = [self.command(w, W.TIMED_NOOP, {"launches": LAUNCH_MODE_N},
                                "timed launches") for _ in range(reps)]
        evs = [number(r.get("ev_us")) if isinstance(r, dict) else float("nan") for r in got]
        return [x for x in evs if x == x and x > 0]

    def model_readings(self, w, other, reps):
        """reps readings of worker w's launch mode on the reference's own
        forward (TIMED_NOOP {"model"}: the least GPU time of the model
        built there from a public seed), the other worker stopped; None
        where the worker could not make them."""
        with Stopped(other):
            r = self.command(w, W.TIMED_NOOP, {"model": True, "reps": reps},
                             "the reference's forward timed")
        evs = [number(x) for x in r.get("model_us") or []] if isinstance(r, dict) else []
        evs = [x for x in evs if x == x and x > 0]
        if not evs:
            self.mode_model_error = (r.get("model_error") if isinstance(r, dict) else None) or "no readings"
        return evs or None

    def mode_on_model(self):
        """Whether match_modes reads the workers on the reference's own
        forward: where its footprint is known and at most
        MODEL_MATCH_BYTES (a launch-bound model is small), unless
        STARK_LAUNCH_MATCH_ON=launches."""
        if os.environ.get("STARK_LAUNCH_MATCH_ON", "") == "launches":
            return False
        fp = getattr(self, "fp_estimated", None)
        if not isinstance(fp, dict):
            return False
        need = sum(fp.get(k, 0) for k in ("in", "out", "weights", "fwd"))
        return 0 < need <= MODEL_MATCH_BYTES

    def launch_bound(self, evs):
        """Whether the reference's forward is launch-bound, by its warm-up
        calls: the host's time to its last launch (note_launch) at least
        LAUNCH_BOUND_SHARE of the GPU's time for the call (the events'
        median) -- where the workers' launch modes matter."""
        evs = [x for x in evs if x == x and x > 0]
        host = self.launch_us["ref"]
        return bool(evs and host) and median(host) >= LAUNCH_BOUND_SHARE * median(evs)

    def launch_modes(self):
        """Both workers' modes in the timing phase (its GPU held alone):
        the median of LAUNCH_MODE_REPS readings each.  Made for a
        launch-bound reference only (launch_bound: 66-137 ms of the
        phase's hold on an H200).  env.launch_mode_us; a diagnostic (the
        candidate's figure is its own word), never part of a verdict."""
        got = {}
        for role, w, other in (("ref", self.ref, self.cand), ("cand", self.cand, self.ref)):
            evs = self.mode_readings(w, other, LAUNCH_MODE_REPS)
            if not evs:
                return
            got[role] = median(evs)
        self.res["env"]["launch_mode_us"] = "ref %.1f, cand %.1f (%+.1f%%), %d launches" % (
            got["ref"], got["cand"], 100.0 * (got["cand"] / got["ref"] - 1), LAUNCH_MODE_N)

    def match_modes(self):
        """On a GPU where launch_match_wanted: once the reference's plan is
        made and before the models are loaded -- so before any candidate
        code runs, and the readings are the evaluator's own (a worker
        forked again has the secret seed wiped, as every worker does:
        _stark.fork_worker) -- each worker's mode is read (the least of
        LAUNCH_MATCH_REPS, under the shared GPU lock: another evaluation's
        work can only slow a reading), and while they differ one worker
        is forked again (respawn_choice), LAUNCH_MATCH_TRIES times at
        most.  Read on the reference's own forward where mode_on_model
        (within MODEL_MATCH_TOL), since launches of one small kernel
        foretell a model's mode only roughly: of 28 honest copies of level
        3's launch-bound models on an H100 so matched, 32_ConvolutionalVision-
        Transformer read 1.044x and 9_ResNet18 1.024x with their workers'
        readings 1.3% and 0.5% apart, while 3_DeepNarrowMLP read 0.998x and
        1.000x with them 8% apart.  env.launch_match says what came of it.
        Returns whether it was asked for."""
        if not (self.cuda and self.ref is not None and
                launch_match_wanted(self.planned_launch)):
            return False
        t0 = time.monotonic()
        forked = []
        on_model = self.mode_on_model()
        tol = MODEL_MATCH_TOL if on_model else LAUNCH_MATCH_TOL
        with self.gpu_shared("reading the workers' launch modes", "modes"):
            read = self.model_readings if on_model else self.mode_readings
            ref = read(self.ref, self.cand, LAUNCH_MATCH_REPS)
            cand = read(self.cand, self.ref, LAUNCH_MATCH_REPS) if ref else None
            if on_model and not (ref and cand):
                # The model could not be timed in a worker: the small
                # kernel's launches, in both.
                on_model, tol, read = False, LAUNCH_MATCH_TOL, self.mode_readings
                ref = read(self.ref, self.cand, LAUNCH_MATCH_REPS)
                cand = read(self.cand, self.ref, LAUNCH_MATCH_REPS)
            trail = [(role, min(x)) for role, x in (("ref", ref), ("cand", cand)) if x]
            seen = [v for _, v in trail]
            while (ref and cand and not modes_match(min(ref), min(cand), tol) and
                   len(forked) < LAUNCH_MATCH_TRIES):
                role = respawn_choice(min(ref), min(cand), seen, tol)
                self.respawn(role)
                forked.append(role)
                again = read(*((self.ref, self.cand) if role == "ref" else
                               (self.cand, self.ref)), LAUNCH_MATCH_REPS)
                if again:
                    seen.append(min(again))
                    trail.append((role, min(again)))
                if role == "ref":
                    ref = again
                else:
                    cand = again
        if not (ref and cand):
            self.res["env"]["launch_match"] = "no readings"
            return True
        r, c = min(ref), min(cand)
        if not modes_match(r, c, tol):
            self.mode_unmatched = (round(100.0 * (c / r - 1), 1), len(forked))
        if forked:
            # Each worker's reading in the order made, forks' included.
            self.res["env"]["launch_match_seen"] = ", ".join(
                "%s %.1f" % x for x in trail)[:300]
        what = "the reference's forward" if on_model else "%d launches" % LAUNCH_MODE_N
        if not on_model and self.mode_model_error:
            what += " (its forward: %s)" % self.mode_model_error[:120]
        self.res["env"]["launch_match"] = "%s on %s: ref %.1f, cand %.1f us (%+.1f%%)%s; %.0f ms" % (
            "matched" if modes_match(r, c, tol) else "unmatched", what, r, c,
            100.0 * (c / r - 1), ", forked again: %s" % " ".join(forked) if forked else "",
            (time.monotonic() - t0) * 1e3)
        return True


def respawn_choice(ref_us, cand_us, seen, tol=LAUNCH_MATCH_TOL):
    """Which worker to fork again when the two modes differ: the one whose
    reading fewer of the evaluation's readings (`seen`, the workers forked
    before included) agree with (modes_match), so the one of the commoner
    mode is kept; then the one further from their median; then the faster
    (on an H200 the faster mode was the rarer: 5 processes of 15).
    Chasing the faster alone left 3 of 12 honest launch-bound copies
    unmatched after 4 forks (0.947-1.048x)."""
    def support(x):
        return sum(1 for y in seen if modes_match(x, y, tol))

    sr, sc = support(ref_us), support(cand_us)
    if sr != sc:
        return "ref" if sr < sc else "cand"
    m = median(seen) if seen else (ref_us + cand_us) / 2.0
    dr, dc = abs(ref_us - m), abs(cand_us - m)
    if abs(dr - dc) > 1e-9 * max(ref_us, cand_us):
        return "ref" if dr > dc else "cand"
    return "cand" if cand_us < ref_us else "ref"
