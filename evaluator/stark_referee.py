"""stark_referee -- the trusted half of the evaluator: loads the problem,
drives the workers, times both models, and decides.

evaluate(req) is called by the C side with the request as a dict (without
the secret seed) and returns the result as a dict that the C side checks and
encodes for the orchestrator.  The referee never runs candidate code: the
solution's top level, its native builds and its forward all run in a forked
candidate worker (stark_worker).  The referee holds what must not be
forgeable -- the master seed (asked of the C side only after the workers are
forked, so no worker's memory ever held it), the clock, and the verdict --
and it reads nothing from a worker but capped JSON and tensor bytes whose
dtype and shape it has validated.

Tensor data never passes through the referee's hands beyond forwarding
bytes (stark_wire describes the data path): each worker makes the call's
inputs on its device from a seed derived per call, and the reference
worker -- trusted, it runs only problem code -- compares the candidate's
outputs with its own on its device.  The referee checks what the workers
report about the inputs and outputs (structure, dtype, shape, device,
aliasing, mutation, late writes) and turns the reference's comparison into
the verdict.

The process is made non-dumpable before any worker exists, so workers
(same user, same namespaces when unjailed) cannot ptrace it or read its
/proc/PID/mem.  While one worker is timed the other is stopped (SIGSTOP to
its process group), so a candidate's background threads can neither slow
the reference nor finish their work while the clock is not looking.

Timing.  On CPUs a call's time is the referee's own clock around the CALL
exchange, less the median no-op round trip and the worker's run-queue
waits.  On GPUs the worker times each call with CUDA events on its stream
plus a guard event after a device-wide synchronize (work left on side
streams counts), after the reference worker has flushed the L2 (it is
shared by every process on the GPU, and the candidate's process could skip
or patch a flush of its own).  The candidate's claims are bounded by the
referee's clock: a candidate whose wall time, less the overhead the
reference shows, exceeds what it claims is timed by the wall clock instead
(flag timing_unverified).  Clocks and throttling are read through NVML in
the reference worker, never here: neither CUDA nor NVML may be initialized
in a process that forks workers afterwards.  When fd 4 is open at start it
is a lock file shared by evaluations on one GPU: the timing phase holds an
exclusive lock on it.

Verdicts are raised as Verdict exceptions from wherever the evidence is
found and turned into the result at the top.
"""

import contextlib
import errno
import fcntl
import hashlib
import importlib
import json
import math
import os
import shutil
import signal
import socket
import stat
import sys
import tempfile
import time
import types

import torch

import _stark
import stark_cuda
import stark_wire as W
import stark_worker

LIMITS = _stark.limits()
NOOP_PINGS = 21
CALL_FLOOR_S = 10.0           # a candidate's forward may take at least this,
CALL_FACTOR = 100.0           # or this many times the reference's slowest call
LOCK_FD = 4                   # the GPU lock file, when the orchestrator passes one
LOCK_TURN = 0                 # its byte taken to wait for LOCK_GPU (take_lock)
LOCK_GPU = 1                  # its byte held while using the GPU
# A candidate's claimed median may fall short of its wall-clock median (less
# the reference's overhead) by this much before the claims are disbelieved.
# Measured on the H100: honest fast-format candidates' exchanges cost 50-120
# us more than the reference's (their Python launch path runs after the
# last launch, outside the events), so a tighter bound flagged every one of
# them.  A forged time is caught when it hides more than this; the output
# digests in the CALL reply catch outputs finished after the reply whatever
# the claim.
CLAIM_SLACK_US = 150.0
# Claims are disbelieved on medians of wall-clock times, which a few slow
# exchanges can sway when there are few: timing goes on to this many calls
# (time allowing) before claims that do not stand are given up.
JUDGE_MIN_REPS = 30
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
# On scaled inputs the absolute tolerance grows with the outputs' mean
# magnitude (rounding errors do), by at most this factor: 8x inputs into a
# product of two.  Measured need: a row-wise cumsum of 2048 shifted inputs
# drifts far from zero, and an honest scan then misses the plain atol.
VARIANT_ATOL_MAX = 64.0
# An output that fails the comparison gets a second opinion: the reference
# worker runs the reference again in float64 on the same inputs, and the
# candidate passes when it is within the tolerance plus RECHECK_SLACK times
# the reference's own error (stark_wire.compare_exact).  Honest kernels
# differ from a float32 reference by its rounding (on the H100 a row scan of
# 2048 normals, honest, missed atol=1e-4 by 2.2e-5 where the sum crossed
# zero), and one that is more exact than the reference differs by all of
# it.  A kernel that computes in a narrower type stays out: bfloat16 rounds
# 2^16 times coarser than float32, TF32 2^13.
RECHECK_SLACK = 4.0
# A kernel cannot move its data faster than the device copies memory; a
# tuned streaming kernel may beat a plain copy_ by some percent, so the floor
# is this factor above the measured copy rate.
ROOFLINE_FACTOR = 1.25
# Before each timed GPU call the reference worker's flush context holds the
# GPU with a spin long enough for the caller's launches to queue up behind it
# (stark_worker.cmd_flush): SPIN_FACTOR times the slowest model's median host
# time from the worker's wake-up to its last launch, plus SPIN_MARGIN_US for
# the messages in between, within [SPIN_MIN_US, SPIN_CAP_US].  The first
# calls, before any host time is known, get SPIN_START_US.
SPIN_START_US = 400
SPIN_MIN_US = 100
SPIN_CAP_US = 2000
SPIN_FACTOR = 1.5
SPIN_MARGIN_US = 150
# With more memory placements than this, each worker first times forward
# on all of them (stark_worker.cmd_scan) and the timed calls rotate through
# its PLACEMENT_KEEP fastest.
PLACEMENT_KEEP = 4

# Library operators that do the heavy lifting of a problem.  A candidate that
# dispatches one the reference also uses may simply be calling the op it was
# asked to replace (flag calls_reference_op).  Elementwise ops and plain
# reductions are not listed: every honest kernel wrapper uses some.
HEAVY_OPS = {
    "aten::mm", "aten::bmm", "aten::matmul", "aten::addmm", "aten::addbmm",
    "aten::baddbmm", "aten::linear", "aten::einsum", "aten::tensordot",
    "aten::dot", "aten::mv", "aten::addmv", "aten::_addmm_activation",
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution",
    "aten::_convolution", "aten::conv_transpose1d", "aten::conv_transpose2d",
    "aten::conv_transpose3d", "aten::mkldnn_convolution", "aten::cudnn_convolution",
    "aten::layer_norm", "aten::native_layer_norm", "aten::batch_norm",
    "aten::native_batch_norm", "aten::group_norm", "aten::native_group_norm",
    "aten::instance_norm", "aten::rms_norm", "aten::softmax", "aten::_softmax",
    "aten::log_softmax", "aten::_log_softmax",
    "aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d",
    "aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices",
    "aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d",
    "aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d",
    "aten::adaptive_avg_pool3d", "aten::adaptive_max_pool2d",
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::cumsum", "aten::cumprod", "aten::sort", "aten::topk",
    "aten::embedding", "aten::lstm", "aten::gru", "aten::rnn_tanh",
    "aten::rnn_relu", "aten::cross_entropy_loss", "aten::nll_loss",
}
DEADLINE_MARGIN_S = 0.5       # left to report after the last wait
ENDING_WAIT_S = 1.0           # how long a worker that hung up may take to exit


class Verdict(Exception):
    """A decision reached: status name, message, and optional log.  check
    names the integrity check that failed, for the few places that must
    tell an integrity rejection from other failures."""

    def __init__(self, status, message, log="", check=None, **fields):
        super().__init__(message)
        self.status = status
        self.message = message
        self.log = log
        self.check = check
        self.fields = fields


def _signal_name(sig):
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "signal %d" % sig


def _fmt_us(us):
    if us != us:
        return "n/a"
    if us >= 1e6:
        return "%.3g s" % (us / 1e6)
    if us >= 1e3:
        return "%.4g ms" % (us / 1e3)
    return "%.4g us" % us


def _fmt_num(x):
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        return "%.6g" % x
    return str(x)


def _cut(text, limit):
    if len(text) <= limit:
        return text
    half = limit // 2 - 32
    return text[:half] + "\n[... %d characters cut ...]\n" % (len(text) - 2 * half) + text[-half:]


def _derive(master, label):
    h = hashlib.sha256(b"stark-seed\0%d\0%s" % (master, label.encode()))
    return int.from_bytes(h.digest()[:8], "little") & ((1 << 63) - 1)


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


def _unravel(flat, shape):
    idx = []
    for d in reversed(shape):
        idx.append(flat % d if d else 0)
        flat = flat // d if d else 0
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"


def _quantile(xs, q):
    """The q-quantile of xs, interpolated between order statistics; NaN
    for none."""
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = q * (len(s) - 1)
    i = int(math.floor(pos))
    j = min(i + 1, len(s) - 1)
    return s[i] + (s[j] - s[i]) * (pos - i)


def _median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def placement_adjusted(xs, slots):
    """Timed calls made on several memory placements (the worker's pools,
    see stark_worker._slot), brought to the level of the fastest.

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
    meds = {k: _median(v) for k, v in groups.items()}
    eligible = [m for k, m in meds.items() if len(groups[k]) >= 2]
    if len(eligible) < 2:
        return list(xs), meds
    best = min(eligible)
    return [x * best / meds[k] if k in meds and len(groups[k]) >= 2 else x
            for x, k in zip(xs, slots)], meds


def _number(v):
    """v as a float when it is a JSON number (not a bool), else NaN."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return float("nan")


def guard_base(replies_r, sync_us):
    """What the device-wide synchronize and the guard event add to a timed
    call with no work off its stream: the reference's median guard gap
    (guard_us - ev_us) in the timed calls themselves, measured in the same
    conditions as the candidate's, unless that gap exceeds the timed no-ops'
    (sync_us) by more than GUARD_SIDE_US: then the reference does work off
    its stream (trusted), and sync_us is the base."""
    gaps = _gaps(replies_r)
    if not gaps:
        return sync_us
    gap = _median(gaps)
    return sync_us if gap - sync_us > GUARD_SIDE_US else gap


def _readings(reply):
    """(ev_us, guard_us) of a CALL reply, NaN where missing or invalid."""
    if not isinstance(reply, dict):
        return float("nan"), float("nan")
    return _number(reply.get("ev_us")), _number(reply.get("guard_us"))


def _gaps(replies):
    pairs = [_readings(r) for r in replies]
    return [g - e for e, g in pairs if math.isfinite(e) and math.isfinite(g)]


def guard_extra(replies, base_us):
    """The work a model's calls leave off their stream, in us a call: the
    median guard gap beyond base_us when that exceeds GUARD_NOISE_US,
    else 0."""
    gaps = _gaps(replies)
    extra = _median(gaps) - base_us if gaps else 0.0
    return extra if extra > GUARD_NOISE_US else 0.0


def guard_host_slack(ref_noops, cand_noops):
    """How much longer the candidate's process takes than the reference's
    over a guard with no work (the median gaps of their timed no-ops), in
    [0, GUARD_HOST_SLACK_US]; 0 without readings.  Added to the
    candidate's guard base: its host's latency is not work off its
    stream.  The candidate could inflate its no-ops' readings, so the
    gift is capped; the wall-clock bound stays the check on forged
    readings."""
    r, c = _gaps(ref_noops), _gaps(cand_noops)
    if not r or not c:
        return 0.0
    return min(max(_median(c) - _median(r), 0.0), GUARD_HOST_SLACK_US)


def claims_from(replies, base_us):
    """A model's own timings of its calls (the CALL replies on GPUs): each
    call's stream event time plus the work its calls leave off the stream
    -- side streams, host threads -- taken as the median guard gap beyond
    base_us (guard_base), the same for every call, and counted when it
    exceeds GUARD_NOISE_US: a per-call maximum of the two readings would
    add the guard's noise to every call.  Work the calls do off the stream
    in most calls moves the median; a claim is NaN where the reply has no
    valid readings."""
    extra = guard_extra(replies, base_us)
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
    times to report: disbelieved claims are replaced by wall - o_ref),
    o_ref, o_cand, why (in words, when not believed)."""
    res = {"believed": True, "cand": list(claims_c), "ref": list(claims_r),
           "o_ref": float("nan"), "o_cand": float("nan"), "why": ""}
    if not claims_r or any(not math.isfinite(c) or c < 0 for c in claims_r):
        # The reference's events failed (a broken device): wall clock for both.
        res.update(believed=True, cand=list(walls_c), ref=list(walls_r),
                   why="no event timings from the reference")
        return res
    over_r = [w - c for w, c in zip(walls_r, claims_r)]
    o_ref = _median(over_r)
    res["o_ref"] = o_ref
    for i, (c, raw) in enumerate(zip(claims_c, raws_c)):
        if not (math.isfinite(c) and 0 <= c <= raw + CLAIM_EPS_US):
            res["believed"] = False
            res["why"] = ("timed call %d: the candidate claimed %s us for a call the "
                          "referee's clock saw take %.1f us" % (i + 1, c, raw))
            break
    if res["believed"]:
        res["o_cand"] = _median([w - c for w, c in zip(walls_c, claims_c)])
        mw, mc = _quantile(walls_c, WALL_QUANTILE), _median(claims_c)
        o_lo = _quantile(over_r, WALL_QUANTILE)
        if mw - o_lo > mc + max(CLAIM_SLACK_US, CLAIM_SLACK_FRAC * mc):
            res["believed"] = False
            res["why"] = ("the candidate's wall-clock time at its lower quartile %.1f us "
                          "less the reference's overhead at its lower quartile %.1f us "
                          "exceeds its claimed median %.1f us by more than max(%g us, %g%%)"
                          % (mw, o_lo, mc, CLAIM_SLACK_US, CLAIM_SLACK_FRAC * 100))
    if not res["believed"]:
        res["cand"] = [max(w - o_ref, 0.0) for w in walls_c]
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


def _lock_usable(fd):
    """Whether fd is open on a regular file we may write-lock: only such a
    descriptor is taken as the orchestrator's GPU lock."""
    try:
        st = os.fstat(fd)
        fl = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and (fl & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR)


# -- zygote support ----------------------------------------------------------

PREWARM = {}
PREWARM_IMPORTS = (
    "ctypes", "errno", "fcntl", "hashlib", "importlib.util", "io", "json", "platform",
    "select", "shutil", "socket", "stat", "struct", "subprocess", "tempfile", "threading",
    "traceback", "numpy", "torch.nn", "torch.nn.functional", "torch.autograd.profiler",
    "torch.profiler", "torch.utils._device",
)


def prewarm():
    """Called from C once, after the harness loads and before any
    evaluation forks from this process: imports what the referee and the
    workers import later and loads NVRTC, so each
    forked evaluation starts with them in memory.  It must not initialize
    CUDA (nor NVML): a CUDA runtime initialized before fork is unusable in
    every forked child.  Importing torch does not initialize it; NVRTC is
    loaded but not used (a compile before fork broke CUDA in the children
    on CUDA 13).  Not imported:
    torch.utils.cpp_extension, which initializes CUDA under torch 2.x (the
    workers import it).  Never raises; returns what it did (PREWARM)."""
    t0 = time.monotonic()
    try:
        missing = []
        for name in PREWARM_IMPORTS:
            try:
                importlib.import_module(name)
            except Exception as e:
                missing.append("%s (%s)" % (name, type(e).__name__))
        PREWARM["imports"] = "ok" if not missing else "missing " + ", ".join(missing)
        try:
            # Loaded, never used: on the H100 (CUDA 13) a process forked
            # after an NVRTC compile could not initialize CUDA any more
            # ("CUDA driver initialization failed"), while loading the
            # library and asking its version leave children intact.
            t1 = time.monotonic()
            PREWARM["nvrtc"] = "nvrtc %s loaded, %.0f ms" % (
                stark_cuda.nvrtc_version(), (time.monotonic() - t1) * 1e3)
        except Exception as e:
            PREWARM["nvrtc"] = ("unavailable: %s: %s" % (type(e).__name__, e))[:200]
        if torch.cuda.is_initialized():
            PREWARM["cuda"] = "initialized before fork: workers cannot use CUDA"
    except BaseException as e:
        PREWARM["error"] = ("%s: %s" % (type(e).__name__, e))[:200]
    PREWARM["ms"] = "%.0f" % ((time.monotonic() - t0) * 1e3)
    return dict(PREWARM)

class WorkerHandle:
    def __init__(self, role, pid, chan):
        self.role = role
        self.pid = pid
        self.chan = chan
        self.label = "reference worker" if role == "ref" else "candidate worker"
        self.stopped = False
        self.status = None

    def signal(self, sig):
        """To the worker's process group (what it spawned) and to the worker
        itself, in case it left the group."""
        for send in (os.killpg, os.kill):
            try:
                send(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self):
        if not self.stopped:
            self.signal(signal.SIGSTOP)
            self.stopped = True

    def cont(self):
        if self.stopped:
            self.signal(signal.SIGCONT)
            self.stopped = False

    def reap(self, block=False):
        if self.status is None:
            try:
                pid, st = os.waitpid(self.pid, 0 if block else os.WNOHANG)
            except ChildProcessError:
                pid, st = self.pid, 0
            if pid:
                self.status = st
        return self.status

    def kill(self):
        self.signal(signal.SIGKILL)
        self.reap(block=True)

    def ending(self):
        """How the worker ended, in words (after it is gone)."""
        st = self.reap(block=False)
        # A process that closed its channel may take a while to be gone (a
        # GPU process releases its device first): up to ENDING_WAIT_S.
        t_end = time.monotonic() + ENDING_WAIT_S
        while st is None and time.monotonic() < t_end:
            time.sleep(0.01)
            st = self.reap(block=False)
        if st is None:
            return "closed its channel"
        if os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            return "killed by signal %d (%s)" % (sig, _signal_name(sig))
        return "exited with status %d" % os.WEXITSTATUS(st)


class _Stopped:
    """Context manager: the given workers are stopped inside the block."""

    def __init__(self, *workers):
        self.workers = [w for w in workers if w is not None]

    def __enter__(self):
        for w in self.workers:
            w.stop()

    def __exit__(self, *exc):
        for w in self.workers:
            w.cont()
        return False


class Evaluation:
    def __init__(self, req):
        self.req = req
        self.t_start = _stark.start_ns() / 1e9
        self.deadline = self.t_start + req["wall_ms"] / 1000.0 - DEADLINE_MARGIN_S
        self.wall_s = req["wall_ms"] / 1000.0
        self.stage = req["stage"]
        self.problem = None
        self.workers = []
        self.ref = None
        self.cand = None
        self.tmp_cache = None
        self.seed = None
        self.res = {"status": "error", "message": "", "log": "", "flags": [],
                    "env": {}, "trials_run": 0, "trials_passed": 0,
                    "stage_ms": {}}
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.ref_call_max_ns = 0
        self.pair_max_s = 0.0
        self.spin_us = SPIN_START_US
        self.spin_seen = []             # spins queued (us), for the result
        self.spin_error = None
        self.launch_us = {"ref": [], "cand": []}   # host time to the last launch
        self.input_bytes = 0
        self.output_bytes = 0
        self.placements = 0         # memory placements the calls rotate through
        self.scanned = 0            # placements the scan chose them from
        self.plain_mag = []         # outputs' mean magnitudes on plain inputs
        self.compared = False
        self.rechecked = 0          # comparisons passed on the float64 recheck
        self.recheck_err = 0.0      # the largest reference error they allowed for
        self.build = {}
        self.cuda = str(req["device"]).startswith("cuda")
        self.tmp_cubin = None
        self.lock_fd = None
        self.window_fd = None           # the output window (stark_wire)
        self.window_size = 0
        self.lock_held = None       # "ex", "sh" or None
        self.lock_wait = {}         # seconds waited for the GPU lock, by mode
        self.spent = {}             # seconds by part of a pair (env pair_ms)

    def spend(self, part, t0):
        """Adds the time since t0 to a part of the pairs' cost; returns now."""
        t = time.monotonic()
        self.spent[part] = self.spent.get(part, 0.0) + (t - t0)
        return t

    # -- problem ---------------------------------------------------------
    def load_problem(self):
        name = self.req["problem_name"] or "problem.py"
        src = self.req["problem_src"]
        if not src.strip():
            raise Verdict("error", "the problem '%s' is empty" % name)
        mod = types.ModuleType("stark_problem")
        mod.__file__ = name
        sys.modules["stark_problem"] = mod
        try:
            code = compile(src, name, "exec", dont_inherit=True)
            exec(code, mod.__dict__)
        except BaseException as e:
            raise Verdict("error", "the problem '%s' does not load: %s"
                          % (name, _exc_line(e)), _tb(e))
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs")
                   if not callable(getattr(mod, n, None))]
        if missing:
            raise Verdict("error", "the problem '%s' does not define %s (KernelBench "
                          "format: class Model(nn.Module), get_inputs(), "
                          "get_init_inputs())" % (name, ", ".join(missing)))
        self.problem = mod

    # -- inputs ----------------------------------------------------------
    def send_gen(self, w, args, what):
        self.talk(w, what, w.chan.send_json, W.GEN, args, self.deadline)

    def recv_gen(self, w, what):
        """A worker's reply to GEN: the description of its inputs, checked
        for shape; returns (description, tensor bytes)."""
        def go():
            d = self.expect_ok(w, what)
            n = d.get("placements")
            if w is self.ref and type(n) is int and 0 < n <= self.req["placements"]:
                self.placements = max(self.placements, n)
            items = d.get("items")
            if not isinstance(items, list) or len(items) > W.MAX_ITEMS:
                raise W.WireError("bad input description")
            specs = [W.checked_spec(x, "input") for x in items
                     if isinstance(x, dict) and x.get("t") == "tensor"]
            if len(specs) > W.MAX_TENSORS:
                raise W.WireError("more than %d input tensors" % W.MAX_TENSORS)
            return {"items": items}, sum(sp[2] for sp in specs)
        return self.talk(w, what, go)

    def check_gen(self, ref_desc, cand_desc, what):
        bad = W.inputs_mismatch(ref_desc, cand_desc)
        if bad is not None:
            raise Verdict("rejected", "integrity check 'inputs' failed (%s): the "
                          "candidate's worker made other inputs than the reference's "
                          "from the same seed: %s" % (what, bad), check="inputs")

    def gen_inputs(self, label, what, variant=False, slot=None):
        """Both workers make this call's inputs from a seed derived for it
        (in parallel: each on its own device), on memory placement `slot`
        where several are in use; the candidate's must be described
        exactly as the reference's.  Returns the input bytes."""
        args = {"seed": _derive(self.seed, label), "sizes": {}, "variant": bool(variant)}
        if slot is not None:
            args["slot"] = slot
        for w in (self.ref, self.cand):
            self.send_gen(w, args, what)
        ref_desc, nbytes = self.recv_gen(self.ref, what)
        cand_desc, _ = self.recv_gen(self.cand, what)
        self.check_gen(ref_desc, cand_desc, what)
        return nbytes

    # -- workers ---------------------------------------------------------
    def cfg(self):
        return {"device": self.req["device"], "stage": self.stage,
                "cache_dir": self.req["cache_dir"] or self.tmp_cache,
                "cubin_dir": self.tmp_cubin, "window_fd": self.window_fd,
                "solution_name": self.req["solution_name"] or "solution.py",
                "solution_src": self.req["solution_src"],
                "placements": self.req["placements"]}

    def spawn(self, role):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = _stark.fork_worker(child.fileno(),
                                 -1 if self.window_fd is None else self.window_fd)
        if pid == 0:
            try:
                # The C side closed these descriptors; forget them without
                # closing whatever may reuse their numbers.
                parent.detach()
                for w in self.workers:
                    w.chan.sock.detach()
                stark_worker.main(child, role, self.cfg(), self.problem)
            finally:
                os._exit(70)
        child.close()
        w = WorkerHandle(role, pid, W.Channel(parent, pid))
        self.workers.append(w)
        return w

    def stop_workers(self):
        """Every worker killed, none waited for: once the verdict is made
        nothing a worker does can change it, and a GPU process takes a
        while (0.3 s on the H100) to release its device.  The result goes
        out meanwhile; teardown() waits for them after it."""
        for w in self.workers:
            w.signal(signal.SIGKILL)
        self.release_lock()

    def teardown(self):
        """After stop_workers(): the workers reaped, the private build
        folders removed."""
        for w in self.workers:
            w.kill()
            w.chan.close()
        self.workers = []
        for d in (self.tmp_cache, self.tmp_cubin):
            if d:
                shutil.rmtree(d, ignore_errors=True)
        if self.window_fd is not None:
            os.close(self.window_fd)
            self.window_fd = None

    def failed(self, w, exc, what):
        """Turns a failure talking to a worker into a Verdict."""
        if isinstance(exc, Verdict):
            return exc
        cand = w.role == "cand"
        if isinstance(exc, W.WorkerTimeout):
            w.kill()
            if cand:
                return Verdict("timeout", "the candidate did not finish %s within the "
                               "evaluation's wall-clock budget of %.0f s; its worker "
                               "was killed" % (what, self.wall_s))
            return Verdict("error", "the reference did not finish %s within the "
                           "wall-clock budget of %.0f s" % (what, self.wall_s))
        if isinstance(exc, W.WorkerGone):
            how = w.ending()
            if cand:
                return Verdict("crashed", "candidate worker %s during %s" % (how, what))
            return Verdict("error", "reference worker %s during %s" % (how, what))
        if isinstance(exc, W.WireError):
            w.kill()
            if cand:
                return Verdict("rejected", "integrity check 'worker protocol' failed: "
                               "the candidate worker sent a malformed message during "
                               "%s (%s)" % (what, exc))
            return Verdict("error", "reference worker broke the protocol during %s: %s"
                           % (what, exc))
        return exc

    def expect_ok(self, w, what):
        kind, obj = w.chan.recv_json({W.OK: W.CONTROL_MAX, W.ERR: W.CONTROL_MAX},
                                     self.deadline)
        if kind == W.OK:
            return obj
        raise self.worker_error(w, obj, what)

    def worker_error(self, w, err, what):
        etype = str(err.get("type", "Exception"))[:200]
        emsg = str(err.get("message", ""))[:4000]
        tb = _cut(str(err.get("traceback", "")), LIMITS["log_max"] - 1024)
        if w.role == "ref":
            if err.get("phase") == "device" and err.get("type") == "NoDevice":
                return Verdict("error", emsg)
            if err.get("phase") == "inputs":
                return Verdict("error", "the problem's get_inputs() failed (%s): %s: %s"
                               % (what, etype, emsg), tb)
            return Verdict("error", "the problem's reference raised %s during %s: %s"
                           % (etype, what, emsg), tb)
        if err.get("phase") == "build":
            self.build = err.get("build") if isinstance(err.get("build"), dict) else {}
            fails = self.build.get("failures") or []
            log = "\n\n".join(str(f.get("log", "")) for f in fails
                              if isinstance(f, dict))
            if err.get("missing") is True:
                return Verdict("compile_error", emsg, _cut(log, LIMITS["log_max"] - 1024))
            return Verdict("compile_error", "%s; the compiler's output is in the log"
                           % emsg, _cut(log, LIMITS["log_max"] - 1024))
        if err.get("phase") == "inputs":
            return Verdict("runtime_error", "the candidate's worker raised %s while making "
                           "the inputs (%s): %s" % (etype, what, emsg), tb)
        sol = self.req["solution_name"] or "solution.py"
        if err.get("phase") == "load":
            if etype == "MissingModelNew":
                return Verdict("runtime_error", "the solution '%s' defines no class "
                               "ModelNew" % sol)
            return Verdict("runtime_error", "the solution '%s' raised %s while loading: %s"
                           % (sol, etype, emsg), tb)
        return Verdict("runtime_error", "the candidate raised %s during %s: %s"
                       % (etype, what, emsg), tb)

    def talk(self, w, what, fn, *args):
        try:
            return fn(*args)
        except (W.WorkerTimeout, W.WorkerGone, W.WireError) as e:
            raise self.failed(w, e, what)

    # -- one call --------------------------------------------------------
    def note_launch(self, role, reply):
        """Keeps the model's host time from wake-up to its last launch (the
        first two host_us readings of its CALL reply) and sets the next
        spin from both models' medians."""
        host = reply.get("host_us") if isinstance(reply, dict) else None
        if not (isinstance(host, list) and len(host) >= 2):
            return
        t = _number(host[0]) + _number(host[1])
        if not (math.isfinite(t) and t >= 0):
            return
        self.launch_us[role].append(min(t, 1e6))
        worst = max(_median(v) for v in self.launch_us.values() if v)
        self.spin_us = int(min(max(SPIN_FACTOR * worst + SPIN_MARGIN_US, SPIN_MIN_US),
                               SPIN_CAP_US))

    def call(self, w, what, kind=None, args=None, net=False):
        """Runs forward on the worker's inputs; returns (elapsed ns as seen
        by the referee from the send of CALL to the reply, less the worker's
        run-queue waits; the reply; the whole exchange in ns).  With `net`
        (timed calls on CPUs), the elapsed ns are also less a no-op round
        trip made just before (see _settle).  A candidate's call gets
        CALL_FLOOR_S or CALL_FACTOR times the reference's slowest call,
        whichever is more (within the deadline)."""
        kind = kind or W.CALL
        payload = json.dumps(args).encode() if args else b""
        deadline = self.deadline
        limit = None
        if w.role == "cand":
            limit = max(CALL_FLOOR_S, CALL_FACTOR * self.ref_call_max_ns / 1e9)
            deadline = min(deadline, time.monotonic() + limit)

        def go():
            rt = self._settle(w, deadline, True) if net else 0
            q0 = _runq_wait_ns(w.pid)
            t0 = time.perf_counter_ns()
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

    def command(self, w, kind, args, what):
        """A plain command and its OK reply (FLSH, TNOP, DEVI)."""
        def go():
            if args is None:
                w.chan.send(kind, b"", self.deadline)
            else:
                w.chan.send_json(kind, args, self.deadline)
            return self.expect_ok(w, what)
        return self.talk(w, what, go)

    def out_meta(self, hdr):
        """(kind, specs, devices) of a valid output header."""
        k, items = hdr.get("kind"), hdr.get("items")
        if k not in ("tensor", "seq") or not isinstance(items, list) or \
                len(items) > W.MAX_TENSORS or (k == "tensor" and len(items) != 1):
            raise W.WireError("bad output header")
        specs = [W.checked_spec(d, "output") for d in items]
        devices = [str(d.get("device", ""))[:32] for d in items]
        return k, specs, devices

    def fetch_ref(self, what):
        """The reference's output header (its bytes stay in its worker for
        the comparison): (kind, specs, devices) and its integrity facts."""
        w = self.ref

        def go():
            w.chan.send(W.FETCH, b"", self.deadline)
            kind, hdr = w.chan.recv_json({W.OUT_HEADER: W.HEADER_MAX,
                                          W.ERR: W.CONTROL_MAX}, self.deadline)
            if kind == W.ERR:
                raise self.worker_error(w, hdr, what)
            if hdr.get("kind") in ("bad", "reject"):
                raise Verdict("error", "the problem's reference returned an unsupported "
                              "output (%s): %.300s" % (what, hdr.get("detail")))
            meta = self.out_meta(hdr)
            if sum(sp[2] for sp in meta[1]) > W.OUTPUT_MAX:
                raise Verdict("error", "the reference output is larger than %d GiB"
                              % (W.OUTPUT_MAX >> 30))
            facts = hdr.get("facts") if isinstance(hdr.get("facts"), dict) else {}
            mag = hdr.get("mag") if isinstance(hdr.get("mag"), list) else []
            mag = [_number(m) for m in mag[:len(meta[1])]]
            facts["mag"] = mag + [0.0] * (len(meta[1]) - len(mag))
            return meta, facts
        return self.talk(w, what, go)

    def fetch_compare(self, ref_meta, ref_facts, what, digest=None, tols=None):
        """The candidate's outputs: its header is checked against the
        reference's (structure, dtype, shape and device) and its integrity
        facts against the reference's; its bytes, which it writes into the
        output window (stark_wire), are then read and compared by the
        reference worker while the candidate is stopped.  digest: on GPUs,
        the digests of its outputs the candidate's CALL reply gave, which
        the reference checks against the bytes.  tols: (atol, rtol) per
        output, by default the request's for each dtype.  Returns the
        reference's per-output statistics."""
        c, r = self.cand, self.ref
        _, size = W.window_layout(ref_meta[1])
        if size > self.window_size:
            # Grown only (the window is sealed against shrinking); sparse
            # until the candidate writes.
            os.ftruncate(self.window_fd, size)
            self.window_size = size

        def head():
            c.chan.send_json(W.FETCH, {"window": size}, self.deadline)
            kind, hdr = c.chan.recv_json({W.OUT_HEADER: W.HEADER_MAX,
                                          W.ERR: W.CONTROL_MAX}, self.deadline)
            if kind == W.ERR:
                raise self.worker_error(c, hdr, what)
            k = hdr.get("kind")
            if k == "bad":
                raise Verdict("incorrect", "the candidate's output is wrong (%s): %.300s"
                              % (what, hdr.get("detail")))
            if k == "reject":
                raise Verdict("rejected", "integrity check '%.60s' failed (%s): %.300s"
                              % (hdr.get("check"), what, hdr.get("detail")))
            meta = self.out_meta(hdr)
            self.check_structure(meta, ref_meta, what)
            facts = hdr.get("facts") if isinstance(hdr.get("facts"), dict) else {}
            return facts
        t = time.monotonic()
        cand_facts = self.talk(c, what, head)
        t = self.spend("fetch", t)
        self.check_facts(cand_facts, ref_facts, what)

        def written():
            kind, info = c.chan.recv_json({W.OUT_WRITTEN: W.CONTROL_MAX,
                                           W.ERR: W.CONTROL_MAX}, self.deadline)
            if kind == W.ERR:
                raise self.worker_error(c, info, what)
            if info.get("bytes") != size:
                raise W.WireError("%r bytes written to the output window, expected %d"
                                  % (info.get("bytes"), size))
        self.talk(c, what, written)
        t = self.spend("write", t)
        if not ref_meta[1]:
            return []
        hdr = {"items": [{"dtype": W.dtype_name(sp[0]), "shape": list(sp[1])}
                         for sp in ref_meta[1]],
               "tol": [list(t) for t in (tols or self.tolerances(ref_meta))],
               "recheck": RECHECK_SLACK}
        if digest is not None:
            ok = isinstance(digest, list) and all(type(d) is int and abs(d) < (1 << 63)
                                                  for d in digest)
            hdr["digest"] = digest if ok else []
        with _Stopped(c):
            self.talk(r, what, r.chan.send_json, W.COMPARE, hdr, self.deadline)
            reply = self.talk(r, what, self.expect_ok, r, "the comparison of outputs (%s)"
                              % what)
        self.spend("compare", t)
        if isinstance(reply.get("window"), str):
            self.res["env"]["window"] = reply["window"][:200]
        if digest is not None and reply.get("digest_ok") is not True:
            raise Verdict("rejected", "integrity check 'output written after return' "
                          "failed (%s): the candidate's outputs are not those it had when "
                          "its call returned, so work went on outside the timed call" % what,
                          check="digest")
        return self.checked_results(reply, len(ref_meta[1]), what)

    def checked_results(self, reply, nout, what):
        res = reply.get("results")
        if not isinstance(res, list) or not 1 <= len(res) <= nout:
            raise Verdict("error", "the reference worker sent malformed comparison "
                          "results (%s)" % what)
        out = []
        for r in res:
            if not isinstance(r, dict) or type(r.get("nbad")) is not int or r["nbad"] < 0:
                raise Verdict("error", "the reference worker sent malformed comparison "
                              "results (%s)" % what)
            first = r.get("first")
            rc = r.get("recheck")
            if isinstance(rc, dict):
                rc = {"error": str(rc["error"])[:300]} if "error" in rc else {
                    "ref_err": _number(rc.get("ref_err")), "nbad": _int(rc, "nbad"),
                    "max_abs": _number(rc.get("max_abs"))}
            else:
                rc = None
            out.append({"nbad": r["nbad"], "max_abs": _number(r.get("max_abs")),
                        "max_rel": _number(r.get("max_rel")),
                        "first": first if type(first) is int and first >= 0 else 0,
                        "got": r.get("got"), "want": r.get("want"), "recheck": rc})
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
            if not r["nbad"]:
                if rc is not None and "ref_err" in rc:
                    self.rechecked += 1
                    self.recheck_err = max(self.recheck_err, rc["ref_err"])
                continue
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
                        "(%.3g), max abs err %.3g"
                        % (rc["nbad"], RECHECK_SLACK, rc["ref_err"], rc["max_abs"]))
            elif rc is not None:
                msg += "; no float64 recheck: %s" % rc["error"]
            return msg
        return None

    def run_pair(self, label, what, order=("ref", "cand"), kind=None, variant=False,
                 timed=False, slot=None):
        """Both models on inputs made for this call, each called with the
        other stopped (on GPUs, a timed call after an L2 flush); outputs
        described, integrity facts checked, outputs compared by the
        reference worker.  Returns (ns, replies, raw ns, mismatch message
        or None), the first three by role."""
        t_pair = time.monotonic()
        self.input_bytes = max(self.input_bytes, self.gen_inputs(label, what, variant, slot))
        t = self.spend("gen", t_pair)
        ns, replies, raws = {}, {}, {}
        for role in order:
            w, other = (self.ref, self.cand) if role == "ref" else (self.cand, self.ref)
            args = None
            if timed and self.cuda:
                with _Stopped(self.cand):
                    fl = self.command(self.ref, W.FLUSH, {"spin_us": self.spin_us},
                                      "an L2 flush (%s)" % what)
                t = self.spend("flush", t)
                fl = fl if isinstance(fl, dict) else {}
                if type(fl.get("spin_us")) is int and fl["spin_us"] > 0:
                    self.spin_seen.append(fl["spin_us"])
                    args = {"queued": True}
                elif fl.get("spin_error") and self.spin_error is None:
                    self.spin_error = str(fl.get("spin_error"))[:200]
            with _Stopped(other):
                ns[role], replies[role], raws[role] = self.call(
                    w, "forward (%s)" % what, kind, args, net=timed and not self.cuda)
            t = self.spend("call", t)
            if timed and self.cuda:
                self.note_launch(role, replies[role])
        ref_meta, ref_facts = self.fetch_ref(what)
        self.spend("fetch", t)
        self.output_bytes = max(self.output_bytes, sum(sp[2] for sp in ref_meta[1]))
        if variant:
            tols = self.tolerances(ref_meta, ref_facts["mag"])
        else:
            tols = self.tolerances(ref_meta)
            if not self.plain_mag:
                self.plain_mag = list(ref_facts["mag"])
        digest = replies["cand"].get("digest", []) if self.cuda and kind is None else None
        results = self.fetch_compare(ref_meta, ref_facts, what, digest, tols)
        bad = self.compare(results, ref_meta, what, tols)
        self.pair_max_s = max(self.pair_max_s, time.monotonic() - t_pair)
        return ns, replies, raws, bad

    def check_facts(self, cand, ref, what):
        """Integrity checks on what the candidate's worker observed about its
        own call; behaviour the reference shows too is allowed."""
        if cand.get("late_write") and not ref.get("late_write"):
            raise Verdict("rejected", "integrity check 'output written after return' "
                          "failed (%s): the candidate's output changed after forward "
                          "returned, so work went on outside the timed call" % what)
        if cand.get("mutated") and not ref.get("mutated"):
            raise Verdict("rejected", "integrity check 'input mutation' failed (%s): "
                          "the candidate modified input tensor %s in place"
                          % (what, _int_list(cand.get("mutated"))))
        if cand.get("alias") and not ref.get("alias"):
            pairs = cand.get("alias")
            first = pairs[0] if isinstance(pairs, list) and pairs and \
                isinstance(pairs[0], list) and len(pairs[0]) == 2 else ["?", "?"]
            raise Verdict("rejected", "integrity check 'output aliases input' failed "
                          "(%s): output %s shares memory with input tensor %s"
                          % (what, _int_list([first[0]]), _int_list([first[1]])))

    # -- stages ----------------------------------------------------------
    def stage_compile(self):
        t0 = time.monotonic()
        self.talk(self.cand, "the compile stage", self.cand.chan.send_json, W.COMPILE,
                  {}, self.deadline)
        info = self.talk(self.cand, "the compile stage", self.expect_ok, self.cand,
                         "the compile stage")
        self.res["stage_ms"]["compile_ms"] = (time.monotonic() - t0) * 1e3
        self.build = info.get("build") if isinstance(info.get("build"), dict) else {}
        raise Verdict("compiled", "the solution's native code is built (%d built, "
                      "%d from the cache)" % (_int(self.build, "built"),
                                              _int(self.build, "hits")))

    def load_models(self):
        # Not under the GPU lock: loading may build native code for a
        # minute, and what it runs on the GPU (a context, weights) is small.
        init_seed = _derive(self.seed, "init")
        for w in (self.ref, self.cand):
            self.talk(w, "loading", w.chan.send_json, W.LOAD,
                      {"init_seed": init_seed}, self.deadline)
        t0 = time.monotonic()
        self.talk(self.ref, "loading", self.expect_ok, self.ref,
                  "construction of Model")
        info = self.talk(self.cand, "loading", self.expect_ok, self.cand,
                         "construction of ModelNew")
        self.res["stage_ms"]["compile_ms"] = (time.monotonic() - t0) * 1e3
        self.build = info.get("build") if isinstance(info.get("build"), dict) else {}
        self.res["env"]["weights_copied"] = str(_int(info, "weights_copied"))
        # The fast format's NVRTC builds while the candidate loaded, as its
        # worker counted them (diagnostics: that process runs its code).
        cub = info.get("cubins") if isinstance(info.get("cubins"), dict) else {}
        if _int(cub, "built") or _int(cub, "cached"):
            self.res["env"]["cubins"] = "built %d in %.0f ms, cached %d" % (
                _int(cub, "built"), _number(cub.get("build_s")) * 1e3, _int(cub, "cached"))
        if info.get("reuses_reference") is True:
            self.flag("reuses_reference")

    def check_trials(self):
        """The trials alternate between the problem's own inputs and the
        variant distribution (stark_wire.vary_inputs), odd trials scaled."""
        trials = self.req["trials"]
        t0 = time.monotonic()
        first_fail = None
        took = []
        for t in range(trials):
            variant = t % 2 == 1
            what = "trial %d of %d%s" % (t + 1, trials, ", scaled inputs" if variant else "")
            t1 = time.monotonic()
            with self.gpu_shared():
                _, _, _, bad = self.run_pair("trial-%d" % t, what, variant=variant)
            took.append("%.0f" % ((time.monotonic() - t1) * 1e3))
            self.res["env"]["trial_ms"] = "/".join(took[:12])
            self.res["trials_run"] = t + 1
            if bad is None:
                self.res["trials_passed"] += 1
            elif first_fail is None:
                first_fail = bad
        self.res["stage_ms"]["check_ms"] = (time.monotonic() - t0) * 1e3
        if first_fail is not None:
            raise Verdict("incorrect", "%d of %d trials failed; %s"
                          % (trials - self.res["trials_passed"], trials, first_fail))

    # -- timing ----------------------------------------------------------
    def take_lock(self, exclusive=True):
        """The GPU lock (fd 4, when the orchestrator passed one): POSIX
        record locks on its byte LOCK_GPU, exclusive for a timing phase,
        shared for other work on the GPU (loading, trials, probes), so no
        one's GPU work runs beside a timing.  Both are taken through the
        turnstile byte LOCK_TURN, held only while waiting: a timing that
        waits keeps new shared holders out, and the ones already in finish
        their step (one trial) and let it in.  Waits while time for two
        pairs is left; returns False when the deadline came first.  A lock
        already held in the other mode is let go first."""
        if self.lock_fd is None:
            return True
        want = "ex" if exclusive else "sh"
        if self.lock_held == want:
            return True
        self.release_lock()
        fd = self.lock_fd
        env = self.res["env"]
        t0 = time.monotonic()
        delay = 0.001
        turn = False
        try:
            while True:
                try:
                    if not turn:
                        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, LOCK_TURN)
                        turn = True
                    fcntl.lockf(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) |
                                fcntl.LOCK_NB, 1, LOCK_GPU)
                    self.lock_held = want
                    break
                except OSError as e:
                    if e.errno not in (errno.EACCES, errno.EAGAIN):
                        env["gpu_lock"] = ("unusable: %s" % e)[:200]
                        self.lock_fd = None
                        return True
                if not self.time_left_for(2):
                    return False
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
        finally:
            if turn:
                try:
                    fcntl.lockf(fd, fcntl.LOCK_UN, 1, LOCK_TURN)
                except OSError:
                    pass
            waited = self.lock_wait.get(want, 0.0) + time.monotonic() - t0
            self.lock_wait[want] = waited
            env["gpu_lock_wait_ms"] = "/".join("%.1f" % (self.lock_wait.get(k, 0.0) * 1e3)
                                               for k in ("ex", "sh"))
        return True

    def release_lock(self):
        if self.lock_held:
            self.lock_held = None
            try:
                fcntl.lockf(self.lock_fd, fcntl.LOCK_UN, 1, LOCK_GPU)
            except OSError:
                pass

    @contextlib.contextmanager
    def gpu_shared(self):
        """One step of GPU work outside the timing phase (loading, a trial,
        a probe) under the GPU lock, shared; let go after the step, so a
        timing that waits gets its turn.  Raises a timeout Verdict when the
        deadline comes first."""
        if not (self.cuda and self.lock_fd is not None):
            yield
            return
        if not self.take_lock(exclusive=False):
            raise Verdict("timeout", "the GPU lock (held by other evaluations' timings) was "
                          "not free before the evaluation's deadline")
        try:
            yield
        finally:
            self.release_lock()

    def time_models(self):
        """The timing phase: no-op round trips, warm-up pairs (checked, not
        timed), then timed pairs in alternating order until both medians
        are known to target_rse or the time is up.  Holds the GPU lock
        throughout."""
        if not self.take_lock():
            self.res["env"]["timing_stop"] = "gpu_lock"
            return
        try:
            self.timing_phase()
        finally:
            self.release_lock()

    def scan_placements(self, nplace):
        """Each worker, the other stopped, times forward on each of its
        memory placements (fresh plain inputs) and keeps the fastest
        PLACEMENT_KEEP for the timed calls (stark_worker.cmd_scan).
        Returns the placements the timed calls rotate through."""
        t = time.monotonic()
        self.gen_inputs("scan", "the placement scan", slot=0)
        got = {}
        for role, w, other in (("ref", self.ref, self.cand), ("cand", self.cand, self.ref)):
            with _Stopped(other):
                got[role] = self.command(w, W.SCAN, {"keep": PLACEMENT_KEEP},
                                         "the placement scan")
        kept = [got[r].get("kept") for r in got]
        if not all(type(k) is int and 1 <= k <= PLACEMENT_KEEP for k in kept):
            return nplace       # no scan made: the calls rotate through all
        self.scanned = nplace
        self.placements = max(kept)
        parts = []
        for role in ("ref", "cand"):
            us = [_number(x) for x in got[role].get("us", [])[:64]
                  if isinstance(x, (int, float))]
            if us:
                parts.append("%s %s" % (role, " ".join("%.1f" % x for x in us)))
        env = self.res["env"]
        env["timing_scan_us"] = "; ".join(parts)[:900]
        env["timing_scan_ms"] = "%.0f (ref %.0f, cand %.0f)" % (
            (time.monotonic() - t) * 1e3, _number(got["ref"].get("ms")),
            _number(got["cand"].get("ms")))
        return self.placements

    def timing_phase(self, retry=True, t_first=None):
        """See time_models.  A candidate whose claims are not believed gets
        one more timing phase, when the deadline allows, before it is
        reported by wall clock and flagged: a host busy with other work
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
        for role, w, other in (("ref", self.ref, self.cand), ("cand", self.cand, self.ref)):
            with _Stopped(other):
                pings = [self.ping(w) for _ in range(NOOP_PINGS)]
            noop[role] = sorted(pings)[len(pings) // 2]
        sync_us, dev0, slack_c = 0.0, {}, 0.0
        if self.cuda:
            # What a device-wide synchronize and a guard event cost by
            # themselves: the reference's timed no-ops.
            with _Stopped(self.cand):
                dev0 = self.command(self.ref, W.DEVICE_INFO, {"bandwidth": True},
                                    "reading the GPU's state")
                nops = [self.command(self.ref, W.TIMED_NOOP, None, "a timed no-op")
                        for _ in range(NOOP_PINGS)]
            gaps = _gaps(nops)
            sync_us = max(_median(gaps), 0.0) if gaps else 0.0
            with _Stopped(self.ref):
                cnops = [self.command(self.cand, W.TIMED_NOOP, None, "a timed no-op")
                         for _ in range(NOOP_PINGS)]
            slack_c = guard_host_slack(nops, cnops)
            env["timing_guard_slack_us"] = "%.1f" % slack_c
        # Memory placements the timed calls rotate through (the reference
        # worker's count, from its GEN replies); each is warmed up, so
        # that no placement's first timed call makes its allocations.
        nplace = max(self.placements, 1) if self.cuda else 1
        if nplace > PLACEMENT_KEEP:
            nplace = self.scan_placements(nplace)
        for i in range(max(req["warmup"], nplace if nplace > 1 else 0)):
            if not self.time_left_for(2):
                break
            what = "warm-up call %d" % (i + 1)
            bad = self.run_pair("%swarmup-%d" % (lp, i), what, timed=True, slot=i % nplace)[3]
            if bad is not None:
                raise Verdict("incorrect", bad)
        walls = {"ref": [], "cand": []}
        replies_seen = {"ref": [], "cand": []}

        def all_claims():
            base = guard_base(replies_seen["ref"], sync_us)
            return {"ref": claims_from(replies_seen["ref"], base),
                    "cand": claims_from(replies_seen["cand"], base + slack_c)}

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
            if bad is not None:
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
            with _Stopped(self.cand):
                dev1 = self.command(self.ref, W.DEVICE_INFO, {}, "reading the GPU's state")
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
                env["timing_method"] = "cuda_events; the candidate by wall clock"
            elif j["why"]:
                env["timing_method"] = "wall_clock (%s)" % j["why"]
            else:
                env["timing_method"] = "cuda_events"
            env["timing_sync_us"] = "%.1f/%.1f" % (sync_us, guard_base(replies_seen["ref"], sync_us))
            if self.spin_seen:
                env["timing_spin_us"] = "%d-%d" % (min(self.spin_seen), max(self.spin_seen))
            else:
                env["timing_spin_us"] = "none (%s)" % (self.spin_error or "not queued")
            env["timing_detail_us"] = "; ".join(
                "%s %s" % (role, self.call_detail(replies_seen[role], walls[role]))
                for role in ("ref", "cand"))[:1000]
            env["timing_overhead_us"] = "%.1f/%.1f" % (j["o_ref"], j["o_cand"])
            env["timing_placements"] = str(nplace)
            if self.scanned:
                env["timing_scanned"] = str(self.scanned)
            if not j["believed"]:
                self.flag("timing_unverified")
                env["timing_unverified"] = j["why"][:900]
        else:
            cand_us, ref_us = walls["cand"], walls["ref"]
            env["timing_method"] = "wall_clock"
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
        self.check_roofline(c_med, dev0)

    @staticmethod
    def call_detail(replies, walls):
        """Medians of a model's GPU call readings, for the result's notes:
        the referee's wall time, the events (start->end, start->guard) and
        where the worker's host time went (as host_us lists it).  The
        candidate's are its own word: diagnostics, never evidence."""
        ev = _median([_number(r.get("ev_us")) for r in replies])
        guard = _median([_number(r.get("guard_us")) for r in replies])
        host = [r.get("host_us") for r in replies]
        host = [h for h in host if isinstance(h, list) and len(h) == 5]
        parts = ["/".join("%.0f" % _median([_number(h[i]) for h in host]) for i in range(5))
                 if host else "?"]
        return "wall %.1f ev %.1f guard %.1f host %s" % (_median(walls), ev, guard, parts[0])

    def check_roofline(self, c_med, dev):
        """Flag speedup_beyond_roofline: the candidate's median is below the
        time the device needs to read its inputs and write its outputs
        (roofline_floor_us).  GPUs only: on CPUs caches and the OS blur any
        such floor."""
        bps = _number(dev.get("copy_bps"))
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
        if type(l2) is int:
            ctx = a.get("flush_context")
            where = "a context of its own" if ctx == "own" else \
                "the reference's context, %.200s" % ctx
            env["l2_flush"] = ("%d MiB written from %s; persisting lines reset: %.100s"
                               % (stark_worker.FLUSH_L2_TIMES * l2 >> 20, where,
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

    def probe_ops(self):
        """One more checked call per model under the profiler: if the
        candidate dispatches a heavy library operator that the reference
        uses too, it may be calling the op it was asked to replace."""
        if not self.time_left_for(3):
            return
        what = "profiled call"
        _, replies, _, bad = self.run_pair("profile", what, kind=W.PROFILE)
        if bad is not None:
            raise Verdict("incorrect", bad)

        def ops(reply):
            names = reply.get("ops") if isinstance(reply, dict) else None
            return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()
        shared = ops(replies["ref"]) & ops(replies["cand"]) & HEAVY_OPS
        if shared:
            self.flag("calls_reference_op")
            self.res["env"]["reference_ops_called"] = ",".join(sorted(shared))[:1000]

    def probe_shape(self):
        """One checked call at another valid shape: the problem's module-level
        integer sizes that only get_inputs() uses (not get_init_inputs())
        grown by a quarter, in both workers' copies of the problem.  If the
        reference runs there and the candidate fails or differs, its sizes
        are hard-coded (flag shape_specialized).  Runs last: a candidate
        that crashes here has been measured already."""
        if not self.time_left_for(4):
            return
        mod = self.problem
        try:
            base_init = repr(mod.get_init_inputs())
        except Exception:
            return
        sizes = {}
        for name, v in list(vars(mod).items()):
            if name.startswith("_") or type(v) is not int or v < 4 or v > (1 << 20):
                continue
            setattr(mod, name, v + v // 4)
            try:
                same_init = repr(mod.get_init_inputs()) == base_init
            except Exception:
                same_init = False
            setattr(mod, name, v)
            if same_init:
                sizes[name] = v + v // 4
        if not sizes:
            return
        what = "call at another shape (%s)" % ", ".join(
            "%s=%d" % kv for kv in sorted(sizes.items()))
        args = {"seed": _derive(self.seed, "shape"), "sizes": sizes, "variant": False}
        try:
            self.send_gen(self.ref, args, what)
            ref_desc, total = self.recv_gen(self.ref, what)
        except Verdict:
            return              # the problem does not take other sizes
        if total > 4 * max(self.input_bytes, 1 << 20):
            return              # too big to be a cheap probe
        try:
            with _Stopped(self.cand):
                self.call(self.ref, "forward (%s)" % what)
            ref_meta, ref_facts = self.fetch_ref(what)
        except Verdict:
            return              # the reference does not run there: no probe
        saved = (self.max_abs, self.max_rel, self.res.get("first_bad"))
        try:
            self.send_gen(self.cand, args, what)
            cand_desc, _ = self.recv_gen(self.cand, what)
            self.check_gen(ref_desc, cand_desc, what)
            with _Stopped(self.ref):
                reply = self.call(self.cand, "forward (%s)" % what)[1]
            results = self.fetch_compare(ref_meta, ref_facts, what,
                                         reply.get("digest", []) if self.cuda else None)
            bad = self.compare(results, ref_meta, what)
        except Verdict as v:
            if v.check is not None:
                raise           # an integrity failure, whatever the shape
            if v.status == "error":
                return          # the reference failed to compare: no probe
            bad = v.message
        finally:
            self.max_abs, self.max_rel = saved[0], saved[1]
            if saved[2] is None:
                self.res.pop("first_bad", None)
        if bad is not None:
            self.flag("shape_specialized")
            self.res["env"]["shape_probe"] = bad[:900]

    def flag(self, name):
        if name not in self.res["flags"]:
            self.res["flags"].append(name)

    # -- the whole evaluation --------------------------------------------
    def run(self):
        try:
            try:
                self.evaluate()
            except Verdict as v:
                self.res["status"] = v.status
                self.res["message"] = v.message
                self.res["log"] = v.log
                self.res.update(v.fields)
        finally:
            for w in self.workers:
                w.cont()
            self.stop_workers()
            _ENDING.append(self)
        self.finish()
        return self.res

    def evaluate(self):
        # Before this process opens anything: fd 4, if open, is the GPU lock
        # the orchestrator passed (the workers never hold it: fork_worker
        # closes every descriptor but their socket).
        if _lock_usable(LOCK_FD):
            self.lock_fd = LOCK_FD
        self.env_facts()
        # No CUDA call here (torch.cuda.is_available() included): a CUDA
        # runtime initialized before fork is unusable in the workers.  The
        # reference worker reports a missing device.
        self.load_problem()
        if not self.req["cache_dir"]:
            if self.stage == "run":
                raise Verdict("error", "the run stage needs a build cache (cache_dir)")
            self.tmp_cache = tempfile.mkdtemp(prefix="stark-cache-")
        if self.stage == "run":
            # Where the candidate worker's NVRTC builds go when the shared
            # cache is read-only (the run jail's).
            try:
                self.tmp_cubin = tempfile.mkdtemp(prefix="stark-cubin-")
            except OSError:
                self.tmp_cubin = None
        _stark.set_dumpable(False)
        if self.stage != "compile":
            self.window_fd = W.window_create()
            self.ref = self.spawn("ref")
        self.cand = self.spawn("cand")
        # Only now, with every worker forked, does the secret enter memory.
        self.seed = _stark.secret_seed()
        self.res["stage_ms"]["startup_ms"] = (time.monotonic() - self.t_start) * 1e3
        if self.stage == "compile":
            self.stage_compile()
        self.load_models()
        self.check_trials()
        t0 = time.monotonic()
        with self.gpu_shared():
            self.probe_ops()
        t1 = time.monotonic()
        if self.req["timing"]:
            self.time_models()
        t2 = time.monotonic()
        with self.gpu_shared():
            self.probe_shape()
        # The probes' cost, which stage_ms leaves out: ops, shape.
        self.res["env"]["probe_ms"] = "%.0f/%.0f" % ((t1 - t0) * 1e3,
                                                     (time.monotonic() - t2) * 1e3)
        msg = "%d of %d trials match (max abs err %.3g, max rel err %.3g)" % (
            self.res["trials_passed"], self.res["trials_run"], self.max_abs, self.max_rel)
        r = self.res
        if self.req["timing"] and not r.get("reps"):
            msg += "; not timed: no time was left before the deadline"
        elif self.req["timing"]:
            npl = r["env"].get("timing_placements", "1")
            msg += ("; candidate %s [%s, %s], reference %s [%s, %s] (median, 95%% CI, "
                    "%d timed calls each%s): speedup %.3gx" % (
                        _fmt_us(r["runtime_us"]), _fmt_us(r["runtime_lo_us"]),
                        _fmt_us(r["runtime_hi_us"]), _fmt_us(r["ref_runtime_us"]),
                        _fmt_us(r["ref_lo_us"]), _fmt_us(r["ref_hi_us"]), r["reps"],
                        "" if npl == "1" else ", on the fastest of %s placements%s" % (
                            npl, "" if "timing_scanned" not in r["env"] else
                            " kept from %s scanned" % r["env"]["timing_scanned"]),
                        r["speedup"]))
        raise Verdict("correct", msg)

    def env_facts(self):
        env = self.res["env"]
        env["python"] = "%d.%d.%d" % sys.version_info[:3]
        env["torch"] = torch.__version__
        env["device"] = self.req["device"]
        env["threads"] = str(torch.get_num_threads())
        env["jailed"] = "1" if _stark.jailed() else "0"
        if PREWARM:
            env["prewarm"] = "; ".join("%s %s" % kv for kv in sorted(PREWARM.items()))[:500]
        try:
            with open("/proc/cpuinfo", "r") as f:
                for line in f:
                    if line.startswith("model name"):
                        env["cpu"] = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass

    def finish(self):
        r = self.res
        if self.spent:
            # Where the pairs' time went (checks, timing, probes together).
            r["env"]["pair_ms"] = " ".join("%s %.0f" % (k, v * 1e3)
                                           for k, v in self.spent.items())[:200]
        if self.compared:
            r["max_abs_err"] = self.max_abs
            r["max_rel_err"] = self.max_rel
        if self.rechecked:
            r["env"]["float64_recheck"] = (
                "%d comparisons passed against the reference run in float64; its own "
                "error up to %.3g" % (self.rechecked, self.recheck_err))
        b = self.build or {}
        if b:
            r["env"]["ext_built"] = str(_int(b, "built"))
            r["env"]["ext_cached"] = str(_int(b, "hits"))
            if isinstance(b.get("build_s"), (int, float)):
                r["env"]["ext_build_ms"] = "%.0f" % (b["build_s"] * 1e3)
            if isinstance(b.get("load_s"), (int, float)):
                r["env"]["ext_load_ms"] = "%.1f" % (b["load_s"] * 1e3)
            nv = _nvcc_note(b.get("nvcc"))
            if nv:
                r["env"]["ext_nvcc"] = nv
        r["message"] = _cut(r["message"], LIMITS["message_max"] - 64)
        r["log"] = _cut(r["log"], LIMITS["log_max"] - 1024)
        r["flags"] = r["flags"][:LIMITS["flags_max"]]
        # Room is left for the notes the C side adds.
        keep = LIMITS["env_max"] - 8
        if len(r["env"]) > keep:
            r["env"] = dict(list(r["env"].items())[:keep])


def _nvcc_note(recs):
    """env.ext_nvcc: how each .cu unit of the builds was compiled
    (stark_nvcc's records): "parallel host H s, device D s, final F s"
    (with what became of a precompiled prefix, where one was offered), or
    "plain: WHY"."""
    if not isinstance(recs, list):
        return ""
    parts = []
    for rec in recs[:8]:
        if not isinstance(rec, dict) or not isinstance(rec.get("mode"), str):
            continue
        if rec["mode"] != "parallel":
            parts.append(rec["mode"][:60])
            continue
        pch = rec.get("pch")
        parts.append("parallel host %.1f s, device %.1f s, final %.1f s%s%s" % (
            _number(rec.get("host_s")), _number(rec.get("device_s")),
            _number(rec.get("final_s")),
            " (precompiled prefix: %s)" % pch[:40] if isinstance(pch, str) else "",
            "" if rec.get("rc") == 0 else ", exit %d" % _int(rec, "rc")))
    return "; ".join(parts)[:200]


def _int_list(v):
    if not isinstance(v, list):
        return "?"
    return ", ".join(str(x) for x in v[:8] if type(x) is int) or "?"


def _int(d, k):
    v = d.get(k) if isinstance(d, dict) else None
    return v if type(v) is int and v >= 0 else 0


def _exc_line(e):
    if isinstance(e, SyntaxError):
        return "SyntaxError: %s (%s, line %s)" % (e.msg, e.filename, e.lineno)
    return "%s: %s" % (type(e).__name__, str(e)[:2000])


def _tb(e):
    return W.format_exc(e)


# Evaluations whose result is made and whose workers are killed but not yet
# reaped (after_result).
_ENDING = []


def _flush_std():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass


def evaluate(req):
    """Entry point from C: req is a dict (see pyembed.c); returns the
    result dict with every worker killed, and the C side sends it before
    it calls after_result(), which waits for them.  The C side leaves with
    _exit(), so buffered output is flushed here."""
    try:
        return Evaluation(req).run()
    finally:
        _flush_std()


def after_result():
    """The rest of the teardown, once the result is sent: the workers
    reaped, the private build folders removed."""
    while _ENDING:
        _ENDING.pop().teardown()
    _flush_std()
