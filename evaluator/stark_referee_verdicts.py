"""stark_referee_verdicts -- the two verdicts every result carries: stark's
own and KernelBench's, computed as its harness computes it, and which of
them decides the status.

stark's verdict is the trials' (stark_referee.check_trials: fresh inputs
from secret seeds, plain and scaled, the elementwise and scale rules with
their float64 second opinion, the integrity checks).  KernelBench's is
replicated from src/kernelbench/eval.py (eval_kernel_against_ref,
run_and_check_correctness) with its defaults, the ones every published
table used: precision fp32, seed_num 42, num_correct_trials 5.
  - trial seeds: torch.manual_seed(42), then torch.randint(0, 2**32 - 1,
    (1,)).item() per trial (stark_rules.kb_trial_seeds);
  - inputs: set_seed(trial seed) (torch.manual_seed, and on a GPU
    torch.cuda.manual_seed), get_inputs() on the CPU, every tensor cast to
    float32 (integer ones too) and moved to the device; the seed set again
    before the models run (stark_worker_inputs._kb_generate);
  - the reference's output and the candidate's must have the same shape
    (else "Output shape mismatch", and the trials stop), then
    torch.allclose(reference, candidate, atol=1e-4, rtol=1e-4); a trial
    that does not pass is counted and the trials go on;
  - an exception in the candidate's forward, or in the comparison (a tuple
    output has no .shape, mismatched dtypes or devices make allclose
    raise), is a runtime error and the trials stop; one in the reference's
    forward is the harness's failure: KernelBench records a runtime error
    for every candidate of that problem.
The candidate runs in its own worker on the same weights as the reference
(stark copies them) where KernelBench builds both models after
set_seed(42); the two agree wherever ModelNew creates its parameters in
the reference's order.  Both workers run the trial on their own copy of
the inputs, each seeded alike.  The integrity checks apply to these
trials as to stark's own.
"""

import time

import stark_rules as R
from stark_referee_common import Verdict, number
from stark_referee_compare import RECHECK_SLACK
from stark_referee_lock import LockNotFree
from stark_referee_workers import Stopped

KB_PRECISION = "fp32"   # --precision's default (the request's "precision")
# A candidate's KernelBench call that reaches the deadline answers for it
# only when it was given at least this long, or this many times the
# reference's call in the same trial.
KB_CALL_FLOOR_S = 10.0
KB_CALL_FACTOR = 20.0


def kb_precision(req):
    """The precision KernelBench's harness runs at for this request."""
    p = req.get("precision") or KB_PRECISION
    return p if p in R.KB_TOLERANCE else KB_PRECISION


class _KbStop(Exception):
    """A KernelBench trial's outcome that ends its trials: (status, why)."""

    def __init__(self, status, why):
        super().__init__(why)
        self.status = status
        self.why = why


def _kb_structure(meta, ref_meta, what):
    """KernelBench's view of the candidate's output header: a tuple has no
    .shape, a shape mismatch fails the trial and ends the trials, and
    torch.allclose raises on mismatched dtypes and devices."""
    gk, gs, gd = meta
    wk, ws, wd = ref_meta
    if gk != "tensor" or wk != "tensor":
        raise _KbStop("runtime_error", "the %s's output is a tuple of %d tensors, and "
                      "KernelBench's harness compares output.shape, which a tuple does not "
                      "have (AttributeError)" % ("candidate" if gk != "tensor" else "reference",
                                                 len(gs if gk != "tensor" else ws)))
    if gs[0][1] != ws[0][1]:
        raise _KbStop("incorrect", "Output shape mismatch: Expected %s, got %s (%s)"
                      % (list(ws[0][1]), list(gs[0][1]), what))
    if gs[0][0] != ws[0][0]:
        raise _KbStop("runtime_error", "torch.allclose raises on the candidate's dtype %s "
                      "against the reference's %s (%s)" % (gs[0][0], ws[0][0], what))
    if gd[0] != wd[0]:
        raise _KbStop("runtime_error", "torch.allclose raises on the candidate's device %s "
                      "against the reference's %s (%s)" % (gd[0], wd[0], what))


class Verdicts:
    """The part of Evaluation that computes KernelBench's verdict and
    combines it with stark's."""

    def kernelbench_trials(self):
        """KernelBench's verdict on this candidate: a dict with status
        (correct, incorrect, runtime_error, crashed or timeout, or error
        where its harness cannot run the reference), reason, trials_run,
        trials_passed and max_diff (the largest difference over the
        trials).  Integrity failures raise, as in stark's trials.  The
        request's kb_trials is KernelBench's num_correct_trials: its first
        that many seeds; with none, the status is "" (not sought)."""
        prec = kb_precision(self.req)
        tol = R.KB_TOLERANCE[prec]
        n = self.req.get("kb_trials", R.KB_TRIALS)
        n = n if type(n) is int and n >= 0 else R.KB_TRIALS
        seeds = R.kb_trial_seeds(n=n)
        kb = {"status": "correct", "reason": "", "trials_run": 0, "trials_passed": 0,
              "max_diff": None}
        if not n:
            kb["status"] = ""
            kb["reason"] = "not sought: the request asked for no KernelBench trials (kb_trials 0)"
            return kb
        fails, worst_used, stop = [], 0.0, None
        for t, seed in enumerate(seeds):
            what = "KernelBench trial %d of %d" % (t + 1, n)
            self.mem_step = what        # named by the memory notes (mem_held, mem_caught)
            try:
                ahead = self.kb_inputs_ahead(seed, prec, what)
                with self.gpu_shared(what, "kb_trials"):
                    r = self._kb_trial(t, seed, what, tol, ahead)
            except _KbStop as s:
                stop = (s.status, "trial %d: %s" % (t + 1, s.why))
                kb["trials_run"] = t + 1
                break
            except LockNotFree as v:
                # The evaluator's queue, after stark's verdict is complete:
                # KernelBench's verdict is left undecided, never blamed.
                stop = ("error", "trial %d not run: %s" % (t + 1, v.message))
                break
            except Verdict as v:
                if v.check is not None:
                    raise
                if v.ours:
                    # A limit of the evaluator's own (its deadline, the run
                    # jail's memory, the device's memory plan): KernelBench's
                    # verdict is left undecided, never blamed on the problem
                    # or the candidate.
                    stop = ("error", "KernelBench's verdict not reached: trial %d of %d "
                            "stopped at a limit of the evaluator's own, not the problem's "
                            "or the candidate's: %s" % (t + 1, n, v.message))
                    kb["trials_run"] = t + 1
                    break
                if v.status in ("crashed", "timeout"):
                    # Its worker is gone: the trials stop, stark's verdict
                    # (complete before them) stands.
                    stop = (v.status, "trial %d: %s" % (t + 1, v.message))
                    kb["trials_run"] = t + 1
                    break
                if v.status not in ("runtime_error", "error"):
                    raise
                if v.status == "error":
                    stop = ("error", "KernelBench's harness cannot run this problem's "
                            "reference on its inputs (every tensor cast to %s): %s; it "
                            "records a runtime error for every candidate"
                            % (R.KB_DTYPE_NAMES[prec], v.message))
                else:
                    stop = ("runtime_error", "trial %d: %s" % (t + 1, v.message))
                kb["trials_run"] = t + 1
                break
            kb["trials_run"] = t + 1
            md, prev = r["max_diff"], kb["max_diff"]
            kb["max_diff"] = md if (prev is None or md != md or prev != prev) else max(prev, md)
            if r["close"]:
                kb["trials_passed"] += 1
                worst_used = max(worst_used, r["used"])
            else:
                fails.append((t + 1, r))
        head = ("%d of %d trials within torch.allclose(atol=rtol=%g) on KernelBench's "
                "inputs (seed %d, cast to %s)" % (kb["trials_passed"], n, tol, R.KB_SEED,
                                                   R.KB_DTYPE_NAMES[prec]))
        if stop is not None:
            kb["status"], kb["reason"] = stop[0], "%s; %s" % (stop[1], head)
            if stop[0] == "error":
                kb["reason"] = stop[1]
        elif fails:
            t1, r = fails[0]
            kb["status"] = "incorrect"
            kb["reason"] = ("%s; trial %d: max difference %.3g, %.3g times the tolerance "
                            "at its worst element (%d elements outside)%s" % (
                                head, t1, r["max_diff"], r["used"], r["nbad"],
                                "" if len(fails) == 1 else "; trials %s fail too" % ", ".join(
                                    str(f[0]) for f in fails[1:])))
        else:
            kb["reason"] = ("%s; largest difference %.3g, %.0f%% of the tolerance at its "
                            "worst element" % (head, number(kb["max_diff"]), 100 * worst_used))
        return kb

    def _kb_trial(self, t, seed, what, tol, ahead=False):
        """One KernelBench trial: both workers make its inputs (or move to
        the device those made ahead, kb_inputs_ahead), each model runs with
        the other stopped, the reference worker applies torch.allclose.
        Returns stark_rules.kb_allclose's figures."""
        extra = {"kb": kb_precision(self.req), "seed": seed}
        if ahead:
            extra["from_host"] = True
        self.gen_inputs("kb-%d" % t, what, extra=extra)
        replies = {}
        t0 = time.monotonic()
        with Stopped(self.cand):
            replies["ref"] = self.call(self.ref, "forward (%s)" % what)[1]
        t1 = time.monotonic()
        given = self.deadline - t1
        try:
            with Stopped(self.ref):
                replies["cand"] = self.call(self.cand, "forward (%s)" % what)[1]
        except Verdict as v:
            due = max(KB_CALL_FLOOR_S, KB_CALL_FACTOR * (t1 - t0))
            if v.status == "timeout" and v.check is None and given < due:
                # The deadline came because of what the evaluator spent
                # before this call (the queue, KernelBench's inputs made on
                # the CPU), not because the candidate ran long.
                raise Verdict("timeout", "%s; it had %.1f s left for a call the reference "
                              "made in %.2f s" % (v.message, given, t1 - t0), v.log,
                              ours=True) from None
            raise
        ref_meta, ref_facts = self.fetch_ref(what)
        if ref_meta[0] != "tensor":
            _kb_structure(ref_meta, ref_meta, what)
        digest = replies["cand"].get("digest", []) if self.cuda else None
        tols = [(tol, tol)] * len(ref_meta[1])
        try:
            results = self.fetch_compare(ref_meta, ref_facts, what, digest, tols,
                                         {"kb": [tol, tol]}, structure=_kb_structure)
        except Verdict as v:
            if v.check is None and v.status == "incorrect":
                # An output that is not a tensor: .shape raises there.
                raise _KbStop("runtime_error", v.message)
            raise
        r = results[0]
        if "error" in r:
            raise _KbStop("runtime_error", "the comparison raised %s (%s)" % (r["error"], what))
        return r

    # -- the two verdicts ------------------------------------------------
    def stark_summary(self):
        """stark's verdict on a candidate that passed its trials, in short."""
        msg = "%d of %d trials match (max abs err %.3g, max rel err %.3g)" % (
            self.res["trials_passed"], self.res["trials_run"], self.max_abs, self.max_rel)
        if self.rechecked:
            msg += ("; %d comparisons passed on the float64 second opinion (within %g times "
                    "the reference's own error, up to %.3g)" % (
                        self.rechecked, RECHECK_SLACK, self.recheck_err))
        return msg

    def decide(self, stark, kb):
        """Records both verdicts in the result and decides which continues:
        stark is None (its trials passed) or a failed Verdict; kb is
        kernelbench_trials()'s.  When the deciding verdict (the request's
        `verdict`) failed and the other did not, the evaluation goes on to
        be timed (lenient: stark's checks of later calls no longer decide)
        and ends with the deciding failure; when both failed, the deciding
        one is raised now."""
        r = self.res
        deciding = "kernelbench" if self.req.get("verdict") == "kernelbench" else "stark"
        r["verdict"] = deciding
        r["stark_status"] = "correct" if stark is None else stark.status
        r["stark_reason"] = self.stark_summary() if stark is None else stark.message
        r["kb_status"] = kb["status"]
        r["kb_reason"] = kb["reason"]
        r["kb_trials_run"] = kb["trials_run"]
        r["kb_trials_passed"] = kb["trials_passed"]
        r["kb_max_diff"] = number(kb["max_diff"])
        self.lenient = stark is not None
        self.kb = kb
        self.stark_failure = stark
        if deciding == "kernelbench" and not kb["status"]:
            raise Verdict("error", "KernelBench's verdict was to decide, and the request "
                          "asked for none of its trials (kb_trials 0)")
        if deciding == "stark" and stark is not None and not kb["status"]:
            raise Verdict(stark.status, stark.message, stark.log)
        if deciding == "stark" and stark is not None and kb["status"] != "correct":
            raise Verdict(stark.status, "%s; kernelbench verdict: %s (%s)" % (
                stark.message, kb["status"], kb["reason"]), stark.log)
        if deciding == "kernelbench" and kb["status"] != "correct" and stark is not None:
            raise Verdict(kb["status"], "kernelbench verdict: %s; stark verdict: %s (%s)" % (
                kb["reason"], stark.status, stark.message), stark.log)
        if deciding == "kernelbench" and kb["status"] != "correct":
            raise Verdict(kb["status"], "kernelbench verdict: %s; stark verdict: correct (%s)"
                          % (kb["reason"], r["stark_reason"]))

    def final_verdict(self):
        """The verdict that ends an evaluation that went through timing:
        the deciding verdict's, with the other's where they differ and the
        flags' reasons."""
        r = self.res
        timing = self.timing_message()
        flags = "".join("; flagged %s: %s" % (f, self.flag_why[f])
                        for f in r["flags"] if f in self.flag_why)
        if r["verdict"] == "kernelbench":
            msg = "kernelbench verdict: %s%s" % (self.kb["reason"], timing)
            if self.stark_failure is not None:
                msg += "; stark verdict: %s (%s)" % (self.stark_failure.status,
                                                      self.stark_failure.message)
            return Verdict("correct", msg + flags)
        if self.stark_failure is not None:
            return Verdict(self.stark_failure.status, "%s; kernelbench verdict: correct (%s)%s%s"
                           % (self.stark_failure.message, self.kb["reason"],
                              "; timed for the kernelbench verdict" + timing if timing else "",
                              flags), self.stark_failure.log)
        msg = self.stark_summary() + timing
        if self.kb["status"] and self.kb["status"] != "correct":
            msg += "; kernelbench verdict: %s (%s)" % (self.kb["status"], self.kb["reason"])
        return Verdict("correct", msg + flags)
