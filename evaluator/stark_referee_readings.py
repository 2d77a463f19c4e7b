"""stark_referee_readings -- what the timing's readings mean: medians and
their confidence intervals, memory placements brought to the fastest, the
guard gap (work left off the stream), the candidate's claims judged against
the referee's wall clock, and the roofline.

Pure functions of numbers, in microseconds unless named otherwise.  A
worker's readings come in as its CALL replies, untrusted JSON: a value that
is not a number reads as NaN.  stark_referee_timing gathers the readings
and reports what these functions make of them.
"""

import math

from stark_referee_common import number

# A candidate's claimed median may fall short of its wall-clock median (less
# the reference's overhead) by this much before the claims are disbelieved.
# Measured on the H100: honest fast-format candidates' exchanges cost 50-120
# us more than the reference's (their Python launch path runs after the
# last launch, outside the events), so a tighter bound flagged every one of
# them.  A forged time is caught when it hides more than this; the output
# digests in the CALL reply catch outputs finished after the reply whatever
# the claim.
CLAIM_SLACK_US = 150.0
CLAIM_SLACK_FRAC = 0.25
# The bound compares lower quartiles of the wall-clock times, not medians:
# a busy host only ever adds to an exchange, and a forged claim cannot make
# one shorter than the work it hides.  On the H100, with KernelBench
# builds beside it, an honest 50 us candidate's median exchange once ran
# 100 us longer than the reference's (median claim 50.3 us, bound 200 us,
# wall less overhead 208 us): the medians took host load for hidden work.
WALL_QUANTILE = 0.25
CLAIM_EPS_US = 2.0            # event resolution against the host clock
# The reference's guard gap counts as work off its stream beyond this much
# over the timed no-ops' (guard_base).
GUARD_SIDE_US = 20.0
# A candidate's median guard gap beyond the base counts as work off its
# stream when it exceeds this: on the H100 the gaps of honest models in one
# evaluation differ by up to 5 us (a 35 us kernel read 6% slow when any
# excess counted), so work off the stream under this size goes unseen.
GUARD_NOISE_US = 8.0
# The candidate's guard base may exceed the reference's by what its own
# timed no-ops show, up to this: the gap includes the host's wake-up from
# the synchronize and its launch of the guard record, and a worker process
# that landed on a slow or busy core reads slower there (an honest 58 us
# softmax read 75 us when its gaps ran 18 us above the reference's).
GUARD_HOST_SLACK_US = 25.0
# A kernel cannot move its data faster than the device copies memory; a
# tuned streaming kernel may beat a plain copy_ by some percent, so the floor
# is this factor above the measured copy rate.
ROOFLINE_FACTOR = 1.25


def median_ci(xs):
    """Median, 95% order-statistic confidence interval of the median, and
    the relative standard error that interval implies."""
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), float("inf")
    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    if n < 6:
        lo, hi = s[0], s[-1]
    else:
        h = 1.959964 * math.sqrt(n) / 2
        j = max(int(math.floor(n / 2 - h)), 1)
        k = min(int(math.ceil(n / 2 + 1 + h)), n)
        lo, hi = s[j - 1], s[k - 1]
    rse = ((hi - lo) / (2 * 1.959964)) / med if med > 0 else float("inf")
    return med, lo, hi, rse


def quantile(xs, q):
    """The q-quantile of xs, interpolated between order statistics; NaN
    for none."""
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = q * (len(s) - 1)
    i = int(math.floor(pos))
    j = min(i + 1, len(s) - 1)
    return s[i] + (s[j] - s[i]) * (pos - i)


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def placement_adjusted(xs, slots):
    """Timed calls made on several memory placements (the worker's pools,
    see stark_worker_gpu._slot), brought to the level of the fastest.

    A kernel's time can follow the physical pages under its buffers (21%
    between placements for one layernorm on the H100), and which pages an
    evaluation gets is chance; the fastest of several is found again and
    again (that layernorm's fastest of eight pools read 54.6-55.2 us in
    every process).  Each placement's median is taken over its own calls;
    placements with fewer than two calls are not candidates for the
    fastest.  Each call is then scaled by (fastest median / its
    placement's median), so the median of the result is the fastest
    placement's time and its spread is the calls' own noise.  Returns
    (adjusted times, {placement: median}); the times unchanged where fewer
    than two placements have two calls."""
    groups = {}
    for x, k in zip(xs, slots):
        if math.isfinite(x) and x > 0:
            groups.setdefault(k, []).append(x)
    meds = {k: median(v) for k, v in groups.items()}
    eligible = [m for k, m in meds.items() if len(groups[k]) >= 2]
    if len(eligible) < 2:
        return list(xs), meds
    best = min(eligible)
    return [x * best / meds[k] if k in meds and len(groups[k]) >= 2 else x
            for x, k in zip(xs, slots)], meds


def guard_base(replies_r, sync_us):
    """What the device-wide synchronize and the guard event add to a timed
    call with no work off its stream: the reference's median guard gap
    (guard_us - ev_us) in the timed calls themselves, measured in the same
    conditions as the candidate's, unless that gap exceeds the timed no-ops'
    (sync_us) by more than GUARD_SIDE_US: then the reference does work off
    its stream (trusted), and sync_us is the base."""
    gaps = guard_gaps(replies_r)
    if not gaps:
        return sync_us
    gap = median(gaps)
    return sync_us if gap - sync_us > GUARD_SIDE_US else gap


def _readings(reply):
    """(ev_us, guard_us) of a CALL reply, NaN where missing or invalid."""
    if not isinstance(reply, dict):
        return float("nan"), float("nan")
    return number(reply.get("ev_us")), number(reply.get("guard_us"))


def guard_gaps(replies):
    pairs = [_readings(r) for r in replies]
    return [g - e for e, g in pairs if math.isfinite(e) and math.isfinite(g)]


def guard_extra(replies, base_us, floor_us=None):
    """The work a model's calls leave off their stream, in us a call.

    Whether there is any: the median guard gap beyond base_us exceeds
    GUARD_NOISE_US (else 0).  How much, where there is: the median gap
    beyond base_us, or, given floor_us, beyond that floor -- the least a
    guard with no work was ever seen to take (guard_floor).  The base may
    hold a slower host's allowance (guard_host_slack) so that an honest
    model's host latency is not taken for work; once work off the stream
    is found, that allowance would hide as much of the work, so the
    candidate's is charged from the floor (a 48 us Triton kernel left on a
    side stream read 29.6-33 us charged from the base, 2/3 of its honest
    twin)."""
    gaps = guard_gaps(replies)
    if not gaps:
        return 0.0
    gap = median(gaps)
    if gap - base_us <= GUARD_NOISE_US:
        return 0.0
    if floor_us is not None and math.isfinite(floor_us) and floor_us < base_us:
        return gap - floor_us
    return gap - base_us


def guard_floor(*reply_lists):
    """The least guard gap among the given calls (the reference's timed
    no-ops and timed calls): what the synchronize and the guard event cost
    at the least, so a gap beyond it is work or the host's delay, never
    less.  NaN without readings."""
    gaps = [g for replies in reply_lists for g in guard_gaps(replies)]
    return max(min(gaps), 0.0) if gaps else float("nan")


def guard_host_slack(ref_noops, cand_noops):
    """How much longer the candidate's process takes than the reference's
    over a guard with no work (the median gaps of their timed no-ops), in
    [0, GUARD_HOST_SLACK_US]; 0 without readings.  Added to the
    candidate's guard base: its host's latency is not work off its
    stream.  The candidate could inflate its no-ops' readings, so the
    gift is capped; the wall-clock bound stays the check on forged
    readings."""
    r, c = guard_gaps(ref_noops), guard_gaps(cand_noops)
    if not r or not c:
        return 0.0
    return min(max(median(c) - median(r), 0.0), GUARD_HOST_SLACK_US)


def claims_from(replies, base_us, floor_us=None):
    """A model's own timings of its calls (the CALL replies on GPUs): each
    call's stream event time plus the work its calls leave off the stream
    -- side streams, host threads -- taken as the median guard gap beyond
    base_us (guard_base), the same for every call, and counted when it
    exceeds GUARD_NOISE_US: a per-call maximum of the two readings would
    add the guard's noise to every call.  Work the calls do off the stream
    in most calls moves the median; a claim is NaN where the reply has no
    valid readings.  floor_us: as guard_extra."""
    extra = guard_extra(replies, base_us, floor_us)
    pairs = [_readings(r) for r in replies]
    return [e + extra if math.isfinite(e) and math.isfinite(g) else float("nan")
            for e, g in pairs]


def judge_claims(walls_c, claims_c, raws_c, walls_r, claims_r):
    """Whether the candidate's own timings stand against the referee's
    clock.  All values in microseconds, one per timed call: walls are the
    referee's times of the CALL exchanges (less the no-op round trip and
    run-queue waits), raws the whole exchanges, claims what the workers
    reported (claims_from).  The reference is trusted: its overhead
    o_ref = median(wall - claim) is what a call costs beyond its own time.
    The candidate's claims are disbelieved when one is negative, NaN or
    longer than its exchange, or when the lower quartile of its walls
    (WALL_QUANTILE) less the lower quartile of the reference's overheads
    exceeds its median claim by more than max(CLAIM_SLACK_US,
    CLAIM_SLACK_FRAC x claim): a forged event time or a synchronize
    patched to return early shows as a gap, and a busy host, which only
    lengthens exchanges, does not.  Returns a dict: believed, cand and ref (the per-call
    times to report), o_ref, o_cand, slack (the bound's allowance), why
    (in words, when not believed), and forged: a claim that cannot be true
    (negative, NaN, longer than its exchange), replaced by wall - o_ref.

    A gap alone is no proof of forgery: a candidate that spends more host
    time launching than the reference shows the same gap (its calls' GPU
    work waits behind the gate until forward returns), and the wall clock
    is sound evidence of it, for the digest in each reply ties the exchange
    to the moment its outputs were final.  A call whose claims fail the
    bound is charged max(claim, wall - o_ref - slack): the time its
    exchange took beyond the allowance every candidate gets.  Charging the
    whole of wall - o_ref made the verdict jump where the gap crossed the
    bound: an honest 48 us Triton kernel, whose launcher takes the host
    about 110 us more than torch's operator, read 1.00x in 7 timings and
    0.25x in 2 on one H100.  A forger gains nothing by it: claiming c for
    work of true time t, it is charged max(c, t - max(CLAIM_SLACK_US,
    CLAIM_SLACK_FRAC x c)), never less than the least claim the bound
    would believe of that work (the slack grows with the claim)."""
    res = {"believed": True, "cand": list(claims_c), "ref": list(claims_r),
           "o_ref": float("nan"), "o_cand": float("nan"), "slack": float("nan"),
           "why": "", "forged": False}
    if not claims_r or any(not math.isfinite(c) or c < 0 for c in claims_r):
        # The reference's events failed (a broken device): wall clock for both.
        res.update(believed=True, cand=list(walls_c), ref=list(walls_r),
                   why="no event timings from the reference")
        return res
    over_r = [w - c for w, c in zip(walls_r, claims_r)]
    o_ref = median(over_r)
    res["o_ref"] = o_ref
    for i, (c, raw) in enumerate(zip(claims_c, raws_c)):
        if not (math.isfinite(c) and 0 <= c <= raw + CLAIM_EPS_US):
            res["believed"], res["forged"] = False, True
            res["why"] = ("timed call %d: the candidate claimed %s us for a call the "
                          "referee's clock saw take %.1f us" % (i + 1, c, raw))
            break
    if res["believed"]:
        res["o_cand"] = median([w - c for w, c in zip(walls_c, claims_c)])
        mw, mc = quantile(walls_c, WALL_QUANTILE), median(claims_c)
        o_lo = quantile(over_r, WALL_QUANTILE)
        slack = res["slack"] = max(CLAIM_SLACK_US, CLAIM_SLACK_FRAC * mc)
        if mw - o_lo > mc + slack:
            res["believed"] = False
            res["why"] = ("the candidate's wall-clock time at its lower quartile %.1f us "
                          "less the reference's overhead at its lower quartile %.1f us "
                          "exceeds its claimed median %.1f us by more than max(%g us, %g%%)"
                          % (mw, o_lo, mc, CLAIM_SLACK_US, CLAIM_SLACK_FRAC * 100))
    if res["forged"]:
        res["cand"] = [max(w - o_ref, 0.0) for w in walls_c]
    elif not res["believed"]:
        res["cand"] = [max(c, w - o_ref - slack) for w, c in zip(walls_c, claims_c)]
    return res


def roofline_floor_us(in_bytes, out_bytes, l2_bytes, copy_bps, factor=ROOFLINE_FACTOR):
    """The least time, in microseconds, in which a call can read its inputs
    and write its outputs: bytes / (factor x the device's copy rate, in
    bytes moved per second).  The inputs are cold (the L2 was flushed), so
    all of them come from memory; outputs that fit in the L2 may stay there
    (it is write-back) when the call ends, so only the excess counts.
    0 when the rate is unknown."""
    if not (copy_bps > 0 and factor > 0):
        return 0.0
    moved = max(in_bytes, 0) + max(out_bytes - max(l2_bytes, 0), 0)
    return moved / (factor * copy_bps) * 1e6


def beyond_roofline(runtime_us, floor_us):
    """Whether a measured time is faster than physics allows (flag
    speedup_beyond_roofline): above 0 and below the floor."""
    return floor_us > 0 and 0 < runtime_us < floor_us
