"""stark_referee_compare -- the comparison's terms: the tolerances, the
reference worker's statistics checked and put in the verdict's words, and
the float64 second opinion.

The comparison itself runs in the reference worker, on its device
(stark_tensors.compare_tensor, stark_rules); the referee chooses the
tolerances, validates the statistics it gets back (malformed ones are the
evaluator's error, not the candidate's) and writes the message that names
the first element outside them.

Two rules judge every floating output:
  elementwise  |got - want| <= atol + rtol * |want| (stark_tensors);
  scale        the RMS of the error within stark_rules.scale_fraction(rtol)
               of the output's RMS (1% at float32's default rtol): an
               output whose values all sit under atol would otherwise pass
               as zeros, a constant or a scaled-down copy (THREATS R2).
Either, when it fails, gets the float64 second opinion below.
"""

import math

import torch

import stark_rules as R
import stark_wire as W
from stark_referee_common import Verdict, int_field, number

# On scaled inputs the absolute tolerance grows with the outputs' mean
# magnitude (rounding errors do), by at most this factor: 8x inputs into a
# product of two.  Measured need: a row-wise cumsum of 2048 shifted inputs
# drifts far from zero, and an honest scan then misses the plain atol.
VARIANT_ATOL_MAX = 64.0
# An output that fails the comparison gets a second opinion: the reference
# worker runs the reference again in float64 on the same inputs, and the
# candidate passes when it is within the tolerance plus RECHECK_SLACK times
# the reference's own error (stark_tensors.compare_exact).  Honest kernels
# differ from a float32 reference by its rounding (on the H100 a row scan of
# 2048 normals, honest, missed atol=1e-4 by 2.2e-5 where the sum crossed
# zero), and one that is more exact than the reference differs by all of
# it.  A kernel that computes in a narrower type stays out: bfloat16 rounds
# 2^16 times coarser than float32, TF32 2^13.
RECHECK_SLACK = 4.0
# A recheck on scaled inputs may allow for a reference error beyond the
# rounding cap (stark_tensors.RECHECK_MAX_REL) where the float64 run kept
# within it on the problem's own inputs; the message says so.
ILL_NOTE = (": beyond rounding at these scaled inputs, within it on the problem's own: "
            "the problem's conditioning in its dtype")
# The scale rule's second opinion (stark_rules.scale_exact): the candidate
# passes when its RMS error against the float64 run is within this many
# times the float32 reference's own: an output that is mostly the
# reference's rounding noise has no scale of its own to follow.  Honest
# float32 orders measured at most 24 times the reference's RMS error up to
# K = 16384 and 56 at K = 65536 on positive data (scripts/precision-study);
# a zero output passes only where the reference's own error is 1/32 of the
# output's RMS.
SCALE_SLACK = 32.0


def _fmt_num(x):
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        return "%.6g" % x
    return str(x)


def _unravel(flat, shape):
    idx = []
    for d in reversed(shape):
        idx.append(flat % d if d else 0)
        flat = flat // d if d else 0
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"


def _checked_kb(r):
    """A KernelBench comparison's figures (stark_rules.kb_allclose) as the
    referee reads them."""
    if "error" in r:
        return {"error": str(r["error"])[:300]}
    return {"close": r.get("close") is True, "nbad": int_field(r, "nbad"),
            "max_diff": number(r.get("max_diff")), "avg_diff": number(r.get("avg_diff")),
            "used": number(r.get("used"))}


class Comparison:
    """The part of Evaluation that judges outputs."""

    def checked_results(self, reply, nout, what):
        res = reply.get("results")
        if not isinstance(res, list) or not 1 <= len(res) <= nout:
            raise Verdict("error", "the reference worker sent malformed comparison "
                          "results (%s)" % what)
        out = []
        for r in res:
            if isinstance(r, dict) and ("close" in r or ("error" in r and "nbad" not in r)):
                out.append(_checked_kb(r))
                continue
            if not isinstance(r, dict) or type(r.get("nbad")) is not int or r["nbad"] < 0:
                raise Verdict("error", "the reference worker sent malformed comparison "
                              "results (%s)" % what)
            first = r.get("first")
            rc = r.get("recheck")
            if isinstance(rc, dict):
                rc = {"error": str(rc["error"])[:300]} if "error" in rc else {
                    "ref_err": number(rc.get("ref_err")), "nbad": int_field(rc, "nbad"),
                    "max_abs": number(rc.get("max_abs")), "ill": rc.get("ill") is True}
            else:
                rc = None
            raw = r.get("recheck")
            sc = raw.get("scale") if isinstance(raw, dict) else None
            if isinstance(rc, dict) and "error" not in rc:
                rc["scale"] = {k: number(sc.get(k)) for k in ("rms_err", "rms_exact",
                                                             "rms_ref")} \
                    if isinstance(sc, dict) else None
            pr = r.get("precision")
            if isinstance(pr, dict):
                pr = {"error": str(pr["error"])[:300]} if "error" in pr else {
                    k: number(pr.get(k)) for k in ("e_cand", "e_ref", "e_in", "scale")}
            else:
                pr = None
            out.append({"nbad": r["nbad"], "max_abs": number(r.get("max_abs")),
                        "max_rel": number(r.get("max_rel")),
                        "first": first if type(first) is int and first >= 0 else 0,
                        "got": r.get("got"), "want": r.get("want"), "recheck": rc,
                        "scale_bad": r.get("scale_bad") is True,
                        "rms_err": number(r.get("rms_err")),
                        "rms_want": number(r.get("rms_want")),
                        "absmax_want": number(r.get("absmax_want")),
                        "precision": pr})
        return out

    def check_structure(self, got, want, what):
        gk, gs, gd = got
        wk, ws, wd = want

        def desc(k, s):
            return "a tensor" if k == "tensor" else "a sequence of %d tensors" % len(s)
        if gk != wk or len(gs) != len(ws):
            raise Verdict("incorrect", "the candidate returned %s, the reference %s (%s)"
                          % (desc(gk, gs), desc(wk, ws), what))
        for i, (g, x) in enumerate(zip(gs, ws)):
            if g[1] != x[1]:
                raise Verdict("incorrect", "output %d has shape %s, expected %s (%s)"
                              % (i, list(g[1]), list(x[1]), what))
            if g[0] != x[0]:
                raise Verdict("incorrect", "output %d has dtype %s, expected %s (%s)"
                              % (i, W.dtype_name(g[0]), W.dtype_name(x[0]), what))
            if gd[i] != wd[i]:
                raise Verdict("incorrect", "output %d is on device %s, expected %s (%s)"
                              % (i, gd[i], wd[i], what))

    def tolerance(self, dtype):
        if dtype in (torch.float16, torch.bfloat16):
            return self.req["atol16"], self.req["rtol16"]
        return self.req["atol32"], self.req["rtol32"]

    def tolerances(self, ref_meta, mag=None):
        """(atol, rtol) per output.  With mag (the outputs' mean magnitudes
        on scaled inputs), atol grows by the ratio to their magnitudes on
        the problem's own inputs, at most VARIANT_ATOL_MAX times: rounding
        errors scale with the data, and a sum that drifts far from zero (a
        shifted cumulative sum) loses absolute precision honestly.  rtol
        and the plain trials' tolerances stay as requested."""
        tols = []
        for i, (dt, _, _) in enumerate(ref_meta[1]):
            atol, rtol = self.tolerance(dt)
            base = self.plain_mag[i] if i < len(self.plain_mag) else 0.0
            if mag is not None and i < len(mag) and base > 0 and mag[i] > base:
                atol *= min(mag[i] / base, VARIANT_ATOL_MAX)
            tols.append((atol, rtol))
        return tols

    def judge_terms(self, tols):
        """The COMPARE header's terms of the scale rule for outputs with
        tolerances `tols`: its fraction per output and its second
        opinion's slack (stark_worker_outputs._judge)."""
        return {"scale": [R.scale_fraction(rtol) for _, rtol in tols],
                "scale_slack": SCALE_SLACK}

    def compare(self, results, ref_meta, what, tols=None):
        """Turns the reference worker's statistics into the verdict's terms:
        None when all outputs match, else a message."""
        self.compared = True
        tols = tols or self.tolerances(ref_meta)
        for i, r in enumerate(results):
            dt, shape, _ = ref_meta[1][i]
            atol, rtol = tols[i]
            self.max_abs = max(self.max_abs, r["max_abs"])
            self.max_rel = max(self.max_rel, r["max_rel"])
            rc = r["recheck"]
            if r["precision"] is not None:
                self.note_precision(what, i, r["precision"])
            if r["absmax_want"] == r["absmax_want"] and 0 < r["absmax_want"] < atol:
                self.below_tol.setdefault(i, (r["absmax_want"], atol))
            if not r["nbad"] and not r["scale_bad"]:
                if rc is not None and "ref_err" in rc:
                    self.rechecked += 1
                    if rc["ref_err"] == rc["ref_err"]:
                        self.recheck_err = max(self.recheck_err, rc["ref_err"])
                    if rc["ill"]:
                        self.note_ill(what, i, rc["ref_err"], r["absmax_want"])
                continue
            if not r["nbad"]:
                return self.scale_message(i, r, what, rtol)
            idx = _unravel(r["first"], list(shape))
            self.res.setdefault("first_bad", idx)
            msg = ("output %d differs (%s): %d of %d elements outside atol=%g + "
                   "rtol=%g*|expected|; first at %s: got %s, expected %s; max abs "
                   "err %.3g, max rel err %.3g"
                   % (i, what, r["nbad"], math.prod(shape), atol, rtol, idx,
                      _fmt_num(r["got"]), _fmt_num(r["want"]), r["max_abs"],
                      r["max_rel"]))
            if rc is not None and "ref_err" in rc:
                msg += ("; against the reference run in float64, %d elements stay "
                        "outside the tolerance widened by %g times its own error "
                        "(%.3g%s), max abs err %.3g"
                        % (rc["nbad"], RECHECK_SLACK, rc["ref_err"],
                           ILL_NOTE if rc["ill"] else "", rc["max_abs"]))
            elif rc is not None:
                msg += "; no float64 recheck: %s" % rc["error"]
            return msg
        return None

    def note_ill(self, what, i, err, absmax):
        """env.float64_recheck_scaled: a recheck on scaled inputs that
        allowed for a reference error beyond rounding (ILL_NOTE)."""
        env = self.res["env"]
        if "float64_recheck_scaled" in env:
            return
        env["float64_recheck_scaled"] = (
            "%s, output %d: the reference differs from its float64 run by %.3g (largest "
            "magnitude %.3g)%s; judged within %g times that" % (
                what, i, err, absmax, ILL_NOTE, RECHECK_SLACK))

    def scale_message(self, i, r, what, rtol):
        """The message of output i failing the scale rule."""
        frac = R.scale_fraction(rtol)
        rel = r["rms_err"] / r["rms_want"] if r["rms_want"] else float("inf")
        msg = ("output %d differs (%s): its RMS error %.3g is %.3g%% of its RMS %.3g, "
               "over the %.3g%% allowed (the error is judged against the output's own "
               "scale too%s)" % (
                   i, what, r["rms_err"], 100 * rel, r["rms_want"], 100 * frac,
                   "; every expected value is under atol=%g, the largest %.3g, so zeros "
                   "would pass elementwise" % (self.below_tol[i][1], self.below_tol[i][0])
                   if i in self.below_tol else ""))
        rc = r["recheck"]
        sc = rc.get("scale") if isinstance(rc, dict) else None
        if isinstance(sc, dict):
            msg += ("; against the reference run in float64, its RMS error %.3g is %.3g%% "
                    "of the exact RMS %.3g and %.3g times the reference's own (%.3g; at "
                    "most %g allowed)" % (
                        sc["rms_err"], 100 * sc["rms_err"] / sc["rms_exact"]
                        if sc["rms_exact"] else float("inf"), sc["rms_exact"],
                        sc["rms_err"] / sc["rms_ref"] if sc["rms_ref"] else float("inf"),
                        sc["rms_ref"], SCALE_SLACK))
        elif isinstance(rc, dict) and "error" in rc:
            msg += "; no float64 recheck: %s" % rc["error"]
        return msg
