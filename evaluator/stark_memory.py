"""stark_memory -- the memory model: what an evaluation needs on its device,
planned from the problem's measured footprint, and the ledger through which
evaluations on one GPU admit each other by that need.

The footprint of a problem is a few figures of its reference: the bytes of
its inputs, outputs and weights and the peak of one forward above the
inputs and weights.  The reference worker estimates them before anything
runs, from the problem's shapes on PyTorch's meta device (stark_worker's
PLAN), and measures them in the first trial (its allocator's peak); the
candidate's worker reports its own (its word: used to reserve, and to
judge who ran out of memory, never for a verdict in its favour).
plan() turns footprints into the bytes of device memory one evaluation
reserves: the largest of its phases (making inputs, calls, the reference's
second run, the comparison, the precision probe's inputs, the float64 runs,
the placements of the timing phase, the shape probe), each counting both
workers' buffers, generated inputs, outputs and copies kept for checks,
with the CUDA contexts; where the whole does not fit the budget, the
optional phases are reduced or skipped, each with the evaluator's limit
named.  The same arithmetic plans host memory on the CPU (the run jail's
limit as the budget, no contexts).

The ledger lives in the GPU lock file (evaluator.h, EVAL_FD_LOCK) that every
evaluation on a GPU already shares -- `stark eval --jobs N`, `--gpu-lock
FILE` across stark processes, and scripts (scripts/gpulock.py) -- so
admission works across all of them alike.  Layout, besides the GPU lock's
bytes 0 and 1:
  byte 2                the ledger's mutex (a write lock, held while the
                        table is read or changed)
  bytes 64..64+SLOTS-1  one byte per slot: a write lock held by the slot's
                        owner for as long as its record stands
  offset 2048           the header: magic, version, the next ticket
  offset 4096 + 64*i    slot i's record: magic, version, pid, ticket,
                        bytes reserved, bytes waited for (0 once admitted),
                        the time it was made
A record counts only while its slot's byte is locked: POSIX record locks
die with their process, so an evaluation that is killed releases its
reservation with everything else it held, and a reader never trusts a
record whose owner is gone.  An evaluation waits to be admitted while the
reservations of the others and the waits of those that came first leave
too little of the budget (the device's memory less a margin).  Growing a
reservation later (once the first trial has measured the footprint) waits
the same way, keeping what it holds, its extra bytes in its record's wait
under its first ticket, so that those who came after queue behind it.  A
wait while holding memory could deadlock: growers each waiting for the
others' bytes, or for a newcomer that cannot fit beside them.  So a grower
that sees no other record able to move -- none holding without waiting
(they will release), none waiting that fits now (it will be admitted) --
gives up if it has the latest ticket of the growers, keeping what it
holds: of any such cycle exactly one member, the same one in every
member's view, stops waiting, and its bytes become an ordinary holding
that will be released.

This module needs only the standard library: its tests run it in plain
Python processes.
"""

import errno
import fcntl
import os
import struct
import time

GIB = 1 << 30
MIB = 1 << 20

# Device memory that is not in the allocator's figures, per evaluation: a
# CUDA context with PyTorch's kernels loaded in each worker, and the
# reference worker's flush buffer (twice the L2, left out of its figures)
# with, under STARK_FLUSH_CONTEXT=own, a context of its own: the larger of
# the two is kept, whichever the evaluation uses.
# Measured on the H100 (CUDA 13, torch 2.11): a process's device use after
# its first tensor is 620 MiB, and one forward of KernelBench's conv and
# GEMM problems adds 8-64 MiB beyond the allocator's reserved bytes
# (cuDNN and cuBLAS load lazily); the device's own account of what an
# evaluation holds is in env.gpu_mem.
CONTEXT_BYTES = 704 * MIB
FLUSH_CONTEXT_BYTES = 384 * MIB
# The caching allocator rounds blocks up and keeps freed ones: a worker's
# allocations hold up to this much more of the device than they use, until
# the first trial measures it (max_memory_reserved over max_memory_allocated,
# a footprint's "factor"): on the H100 KernelBench's transposed convolutions
# held 1.20x (level 1, 57) to 1.48x (level 2, 13) their peak.  A measured
# factor counts up to ALLOC_FACTOR_MAX (a candidate's figures are its own
# word: used to reserve for it, never beyond this).
ALLOC_FACTOR = 1.10
ALLOC_FACTOR_MAX = 3.0
# Until the first trial measures it, an estimate is planned with this
# factor.  Since a GEN makes its tensors in a pool of its own (dropped once
# copied), the references' measured factors on two H200s (torch 2.11) were
# at most 1.10 for all 43 of KernelBench level 1's problems 1-44 judged
# (its 6 GiB elementwise operators and norms included, which had read
# 1.50-1.51 while the GEN's freed tensors stayed cached) and 1.17 for
# level 2's convolutions (cuDNN's workspace; 7 of 40 problems).  1.25
# covers those; one beyond it is planned from its measured factor after the
# first trial (Ledger.grow), and one that still runs out of memory beside
# others is judged again alone.  Too high a figure only holds evaluations
# back (at 1.50, 17 of those 43 waited for memory, up to 133 s, with 4 in
# flight a GPU).
ALLOC_FACTOR_EST = 1.25
ALLOC_SLACK = 64 * MIB
# The output window (stark_wire): its capacity, one chunk of the candidate's
# outputs, on the reference's device too where the window is there.
# $STARK_WINDOW_BYTES sets another (window_bytes).
CHUNK_BYTES = 256 * MIB
WINDOW_MIN = 4096             # the smallest capacity $STARK_WINDOW_BYTES may set
WINDOW_ALIGN = 256            # each output's offset in the window
WINDOW_MAX = 16 << 30         # the largest: the reference's outputs' cap
# The comparison's temporaries on a GPU (stark_tensors.COMPARE_TEMP_BYTES:
# a step of 16M elements, 25 bytes an element at most), and per byte of
# output where the outputs are smaller than a step (2-byte elements).
COMPARE_TEMP_BYTES = 400 * MIB
# Outputs from this size on use the device window, where it is asked for
# (stark_referee_data.open_device_window, device_window_bytes); smaller ones
# cost under a millisecond through host memory (at 16 MiB, 0.6 ms a pair on an
# H200), and the window takes their size of the device, DWINDOW_BYTES at
# most (device_window_size).
DWINDOW_MIN = 16 * MIB
# The device window's capacity unless $STARK_WINDOW_BYTES sets one: chunks
# of 512 MiB in its two slots.  Each chunk costs a round trip and a launch
# or two whatever its size (about 1 ms on an H200): on one H200, level 2's
# problems with 1-2 GiB of outputs spent 456-933 ms of their timing phase,
# which holds the GPU alone, comparing in 128 MiB chunks, and 112-329 ms
# in 512 MiB ones (the timing stage 1.5-2.4 -> 1.1-1.7 s).
DWINDOW_BYTES = 1 << 30
DWINDOW_GRAIN = 2 * MIB       # smaller outputs get a window of their size, in these
COMPARE_TEMP_PER_BYTE = 13
# Inputs and outputs up to this size are copied for the integrity checks
# (stark_worker.COPY_CHECK_BYTES), beyond it summed.
COPY_CHECK_BYTES = 1 * GIB
# Of the device, this much is left out of the budget: the driver's own, and
# what other programs hold.
BUDGET_MARGIN = 1 * GIB
BUDGET_MARGIN_FRAC = 0.03
# A candidate is planned with the reference's need until its own is known;
# it is blamed for running out of memory only beyond this many times the
# reference's figure plus CAND_SLACK (the limit of its allowance).
CAND_FACTOR = 2.0
CAND_SLACK = 1 * GIB
HOST_SLACK = 256 * MIB      # the same for host memory (the run jail's 4 GiB)
# On the CPU the run jail's memory holds the referee and both workers with
# torch imported before any tensor: env.host_mem_mib of
# tests/memory/stream on the development machine (torch 1.13, Python 3.11,
# forked from the zygote) reads referee 133, ref 151, cand 171 MiB; counted
# as 3 x 256 MiB.
HOST_BASE_BYTES = 3 * 256 * MIB
# The timing phase's extra placements (memory pools, each with its own
# inputs and forward's allocations) take at most this much per worker: 32
# placements of a problem moving 128 MiB (tests/gpu/problems), none more
# for one of 6 GiB.
PLACEMENT_BYTES = 8 * GIB
# A GPU's delivered inputs (the default there, stark_referee_ipc):
# the reference's worker holds a staging copy of a timed pair's inputs in
# the timing phase; inputs beyond this are not delivered.
IPC_STAGE_MAX = 1 * GIB

LEDGER_MUTEX = 2
SLOT_BASE = 64
SLOTS = 64
HEADER_AT = 2048
TABLE_AT = 4096
RECORD = struct.Struct("<4sIqQQQd")      # magic, version, pid, ticket, bytes, waiting, time
HEADER = struct.Struct("<4sIQ")          # magic, version, next ticket
RECORD_SIZE = 64
MAGIC = b"STKM"
VERSION = 1


def fmt_bytes(n):
    """Bytes in words: '6.00 GiB', '512 MiB'."""
    if n >= GIB:
        return "%.2f GiB" % (n / GIB)
    if n >= MIB:
        return "%.0f MiB" % (n / MIB)
    return "%d bytes" % n


def budget(total):
    """The bytes of a device of `total` bytes that evaluations may reserve."""
    return max(int(total - max(BUDGET_MARGIN, BUDGET_MARGIN_FRAC * total)), 0)


# -- the plan ------------------------------------------------------------
#
# An evaluation goes through phases, and in each a worker holds more or less
# than in a plain call.  What each holds at its peak, in allocator bytes, for
# a footprint fp (i: inputs, o: outputs, w: weights, f: the forward's peak
# above inputs and weights, outputs included; ci, co: the copies the checks
# keep of inputs and outputs up to COPY_CHECK_BYTES, beyond it a sum):
#   load      the models built: the weights, and in the candidate's worker
#             the reference's weights copied beside its own
#   gen       making a call's inputs: the buffers beside the generated
#             tensors, the weights, the inputs' copy (w + 2i + ci); also a
#             KernelBench trial's (made on the host, cast, moved) and the
#             scaled trials' (the variant made in the buffers in place,
#             stark_tensors.vary_tensors_, piece by piece: VARY_BYTES more)
#   call      a forward: w + i + ci + f, and the outputs' copy (co)
#   repeat    the reference's second forward of the first trial on the same
#             inputs (stark_worker_memory.repeat_check), beside the first
#             outputs: call + f; by digest only (the first outputs summed
#             and let go first) no more than a call
#   compare   the reference holding its outputs, a window's piece of
#             the candidate's (window_bytes) and the comparison's
#             temporaries (COMPARE_TEMP_BYTES); the candidate its outputs
#   centre    the precision probe's inputs: centred in the buffers, piece
#             by piece (stark_rules.centre_), so a gen and VARY_BYTES
#   float64   the reference's float64 runs (the precision statistics of the
#             first trial and the probe, the second opinion of a failing
#             comparison; stark_worker_outputs._exact), during compare: the
#             model's float64 copy (2w), the float64 inputs (2i) and their
#             jitter (2i, one tensor at a time), the float64 forward (2f),
#             the two float64 outputs (2o each, the plain one kept while
#             the jittered one runs), and where the inputs were not copied
#             (i > COPY_CHECK_BYTES) the inputs made again and centred (3i)
#   timing    a call in each of the placements' pools (placement_bytes); on a
#             GPU the generated inputs' block cached in each of them too, and
#             where inputs are delivered (a GPU's default) the
#             reference's staging copy of them (i, up to IPC_STAGE_MAX).
#             KernelBench's trials come after it, with the placements let go
#             first (stark_worker_gpu.drop_placements): their GENs are gens
#   shape     the shape probe: a call at the grown sizes (its own
#             footprint, estimated on the meta device like the problem's)
# The candidate's worker goes through gen, call and compare in step with
# the reference's; the reference's repeat and float64 runs happen while the
# candidate holds its call (the outputs it sends).  An evaluation reserves
# the largest phase for its whole length, so that it waits while holding
# memory at most once, when the first trial's measured footprint replaces
# the estimate (Ledger.grow).
#
# The figures are counted from the code (each phase's tensors), and checked
# against measurement: scripts/bench-kb-footprint gives in, out, weights and
# the forward's peak of every KernelBench problem (torch's allocator on an
# H100); the allocator's rounding (ALLOC_FACTOR, ALLOC_SLACK) is the gap
# between those figures and torch.cuda.memory_reserved in the same run.

# Temporaries of the in-place, piece-by-piece passes over inputs (variant,
# centring, weighted digests): a piece of stark_tensors.COMPARE_CHUNK (4M)
# elements in float64 and a product of it, 2 x 32 MiB, with room.
VARY_BYTES = 128 * MIB
# The float64 runs happen only within these (stark_worker_outputs'
# RECHECK_BYTES and RECHECK_IN_BYTES: also a bound on their time).
F64_OUT_BYTES = 2 * GIB
F64_IN_BYTES = 4 * GIB

PHASES = ("load", "gen", "call", "repeat", "compare", "centre", "float64", "timing", "shape")


def _parts(fp):
    i, o, w = fp.get("in", 0), fp.get("out", 0), fp.get("weights", 0)
    f = max(fp.get("fwd", 0), o)
    ci = i if i <= COPY_CHECK_BYTES else 0
    co = o if o <= COPY_CHECK_BYTES else 0
    return i, o, w, f, ci, co


def f64_fits(fp):
    """Whether the float64 runs are within their own caps (F64_OUT_BYTES,
    F64_IN_BYTES) for this footprint."""
    return 2 * fp.get("out", 0) <= F64_OUT_BYTES and 2 * fp.get("in", 0) <= F64_IN_BYTES


def phase_bytes(ref, cand=None, places=1, shape=None, f64=True, repeat=True, gen_placed=False,
                staged=False):
    """{phase: (reference worker's bytes, candidate worker's bytes)} at each
    phase's peak, before the allocator's rounding and the contexts (see the
    table above).  cand: the candidate's footprint, the reference's until
    known; shape: the footprint at the shape probe's sizes (no shape phase
    without it); f64: whether the float64 runs are planned; repeat: whether
    the second output of the repeatability check is (else by digest);
    gen_placed: whether the timing phase's GENs make their tensors in the
    placement's own pool (on a GPU, stark_worker_inputs._gen_pool), where
    their block stays cached beside the buffers and is the one the call's
    allocations take: the inputs' size beyond the forward's.  staged:
    whether the reference's worker stages a copy of the timed inputs (a
    GPU's delivered inputs, up to IPC_STAGE_MAX)."""
    cand = cand or ref
    out = {}
    r = _parts(ref)
    c = _parts(cand)

    def gen(p):
        i, o, w, f, ci, co = p
        return w + 2 * i + ci + VARY_BYTES

    def call(p):
        i, o, w, f, ci, co = p
        return w + i + ci + f + co

    # Loading: the candidate's worker holds its own weights and the copy
    # of the reference's it is given (stark_worker._copy_weights).
    out["load"] = (r[2], c[2] + r[2])
    out["gen"] = (gen(r), gen(c))
    out["call"] = (call(r), call(c))
    out["repeat"] = (call(r) + (r[3] if repeat else 0), call(c))
    i, o, w, f, ci, co = r
    # A chunk copied out of the window onto the device: at most the
    # window's capacity, the device window's on a GPU (gen_placed).
    chunk = max(window_bytes(), device_window_bytes(ref) if gen_placed else 0)
    cmp_ref = w + i + ci + o + co + chunk + min(COMPARE_TEMP_BYTES, COMPARE_TEMP_PER_BYTE * o)
    out["compare"] = (cmp_ref, call(c))
    out["centre"] = (gen(r), gen(c))
    if f64 and f64_fits(ref):
        regen = 3 * i if not ci else 0
        runs = 2 * i + max(2 * i, 2 * w, 2 * f)
        out["float64"] = (cmp_ref + 2 * w + 2 * o + max(regen, runs), call(c))
    if places > 1 or gen_placed:
        kr, kc = (max(r[0] - r[3], 0), max(c[0] - c[3], 0)) if gen_placed else (0, 0)
        out["timing"] = (call(r) + kr + (places - 1) * placement_bytes(ref),
                         call(c) + kc + (places - 1) * placement_bytes(cand))
    if staged and r[0] <= IPC_STAGE_MAX:
        t = out.get("timing", (call(r), call(c)))
        out["timing"] = (t[0] + r[0], t[1])
    if shape:
        out["shape"] = (call(_parts(shape)), call(_parts(shape)))
    return out


def alloc_factor(peak, peak_reserved):
    """The allocator's measured rounding: its peak reserved bytes over its
    peak allocated bytes, within [ALLOC_FACTOR, ALLOC_FACTOR_MAX]; the
    default where there is no reading or the peak is too small to say."""
    if type(peak) is not int or type(peak_reserved) is not int or peak < 64 * MIB:
        return ALLOC_FACTOR
    return min(max(peak_reserved / peak, ALLOC_FACTOR), ALLOC_FACTOR_MAX)


def factor_of(fp):
    f = (fp or {}).get("factor")
    if not isinstance(f, (int, float)) or not f == f:
        return ALLOC_FACTOR
    return min(max(float(f), ALLOC_FACTOR), ALLOC_FACTOR_MAX)


def _need_of(pair, factors=(ALLOC_FACTOR, ALLOC_FACTOR)):
    return sum(int(b * f + ALLOC_SLACK) for b, f in zip(pair, factors))


def need_by_phase(ref, cand=None, places=1, shape=None, f64=True, repeat=True, contexts=True,
                  staged=None):
    """{phase: device bytes of the whole evaluation in that phase}: both
    workers' (phase_bytes, with the allocator's rounding) and the CUDA
    contexts (none for a host plan: contexts=False; a device plan's timing
    phase holds the generated inputs' block in its placements' pools too).
    staged: as phase_bytes; None, on a device plan where inputs are
    delivered (input_delivery)."""
    if staged is None:
        staged = contexts and input_delivery(device=True)
    ctx = 2 * CONTEXT_BYTES + FLUSH_CONTEXT_BYTES + device_window_bytes(ref) if contexts else 0
    factors = (factor_of(ref), factor_of(cand or ref))
    return {k: ctx + _need_of(v, factors) for k, v in
            phase_bytes(ref, cand, places, shape, f64, repeat, gen_placed=contexts,
                        staged=staged).items()}


def input_delivery(env=None, device=False):
    """Whether timed pairs deliver the candidate's inputs, on the CPU
    through input windows (stark_worker_delivery), on a GPU through CUDA
    IPC (stark_worker_ipc): $STARK_INPUT_DELIVERY=on or off where it is
    set; else on a GPU only (on the CPU it still moves small honest
    kernels: docs/METHOD.md)."""
    value = (os.environ if env is None else env).get("STARK_INPUT_DELIVERY", "")
    if value in ("on", "off"):
        return value == "on"
    return device


def window_bytes(env=None, device=False):
    """The output window's capacity in bytes: $STARK_WINDOW_BYTES when it
    is a whole number of at least WINDOW_MIN (rounded down to a multiple
    of WINDOW_ALIGN, WINDOW_MAX at most), else CHUNK_BYTES for the window
    in host memory and DWINDOW_BYTES for the one on the device (device).
    A smaller window costs more round trips per output, not correctness
    (tests make it small to stream small outputs in many chunks); a larger
    one fewer, for its bytes."""
    v = (os.environ if env is None else env).get("STARK_WINDOW_BYTES", "")
    dflt = DWINDOW_BYTES if device else CHUNK_BYTES
    try:
        n = int(v)
    except ValueError:
        return dflt
    if n < WINDOW_MIN:
        return dflt
    return min(n, WINDOW_MAX) // WINDOW_ALIGN * WINDOW_ALIGN


def device_window_size(out, env=None):
    """The device window for outputs of `out` bytes (laid out): their size
    in DWINDOW_GRAIN, up to its capacity (window_bytes, device); larger
    outputs, and those of a later call that outgrow it, stream through it."""
    grains = -(-max(out, 1) // DWINDOW_GRAIN) * DWINDOW_GRAIN
    return min(window_bytes(env, device=True), grains)


def device_window_bytes(fp, env=None):
    """The output window the reference's worker holds on the device from
    its first comparison on, unless the host window is asked for
    ($STARK_OUTPUT_WINDOW=host), where the outputs are large enough to use
    it (DWINDOW_MIN): device_window_size of the outputs."""
    env = os.environ if env is None else env
    if env.get("STARK_OUTPUT_WINDOW", "") == "host" or fp.get("out", 0) < DWINDOW_MIN:
        return 0
    return device_window_size(fp["out"], env)


def worker_need(fp):
    """A worker's device memory for one plain call (the larger of making
    inputs and calling), with the allocator's rounding."""
    i, o, w, f, ci, co = _parts(fp)
    return int(max(w + 2 * i + ci, w + i + ci + f + co) * factor_of(fp) + ALLOC_SLACK)


def floor_need(fp):
    """What no plan can go below: each worker holds its weights, its inputs
    and its outputs at once.  A problem whose floor passes the budget
    cannot be judged on this device at all."""
    one = fp.get("in", 0) + fp.get("out", 0) + fp.get("weights", 0)
    return 2 * one + 2 * CONTEXT_BYTES + FLUSH_CONTEXT_BYTES


def need(ref, cand=None, places=1, shape=None, f64=True, repeat=True):
    """Device bytes for an evaluation: the largest of its phases
    (need_by_phase)."""
    return max(need_by_phase(ref, cand, places, shape, f64, repeat).values())


class Plan:
    """What an evaluation reserves and which of its optional phases run in
    full: made by plan() from the footprints and the budget.
      need      bytes to reserve (the largest phase planned)
      phases    {phase: bytes} of the phases planned
      f64       the float64 runs planned (else skipped: why in reduced)
      repeat    the repeatability check keeps a second output (else by
                digest only)
      reduced   {phase: why} for each phase reduced or skipped for the
                evaluator's own limit
    The shape probe is not in it: it runs where its need fits what the
    evaluation holds or can take without waiting (shape_need)."""

    def __init__(self):
        self.need = 0
        self.phases = {}
        self.f64 = True
        self.repeat = True
        self.reduced = {}

    def text(self):
        """The phases' bytes, in words: 'gen 12.3 GiB, call ...'."""
        return ", ".join("%s %s" % (k, fmt_bytes(self.phases[k])) for k in PHASES
                         if k in self.phases)

    def reduced_text(self):
        return "; ".join("%s: %s" % (k, self.reduced[k]) for k in PHASES if k in self.reduced)


def plan(ref, cand=None, budget=0, places=1, f64=True, repeat=True, contexts=True):
    """The plan of an evaluation within `budget` bytes (0: no limit known):
    every phase in full where the whole fits; else the optional phases
    reduced in turn until it fits -- the repeatability check by digest, then
    the float64 runs skipped -- each with its reason (the evaluator's limit,
    never the candidate's doing).  f64, repeat: False where an earlier plan
    reduced them already (a plan is never widened once the evaluation has
    gone past them).  A plan whose floor passes the budget is the caller's
    error to report (floor_need)."""
    p = Plan()
    p.f64, p.repeat = f64, repeat
    lim = budget or float("inf")
    if p.f64 and not f64_fits(ref):
        p.f64 = False
        p.reduced["float64"] = ("the float64 runs would take %s of outputs and %s of inputs, "
                                "beyond their caps of %s and %s" % (
                                    fmt_bytes(2 * ref.get("out", 0)),
                                    fmt_bytes(2 * ref.get("in", 0)),
                                    fmt_bytes(F64_OUT_BYTES), fmt_bytes(F64_IN_BYTES)))

    def cur():
        return need_by_phase(ref, cand, places, None, p.f64, p.repeat, contexts)

    by = cur()
    if p.repeat and by["repeat"] > lim:
        p.repeat = False
        p.reduced["repeat"] = ("a second output beside the first needs %s, beyond the %s "
                               "the evaluator allows itself: compared by digest" % (
                                   fmt_bytes(by["repeat"]), fmt_bytes(budget)))
        by = cur()
    if p.f64 and by.get("float64", 0) > lim:
        p.f64 = False
        p.reduced["float64"] = ("the reference's float64 runs need %s, beyond the %s the "
                                "evaluator allows itself" % (fmt_bytes(by["float64"]),
                                                             fmt_bytes(budget)))
        by = cur()
    p.phases = by
    p.need = max(by.values())
    return p


def shape_need(shape, cand_ratio=1.0, contexts=True):
    """Bytes of the whole evaluation during the shape probe: making the
    inputs and a call at the grown sizes (`shape`, the footprint there) in both workers, the
    candidate's scaled by cand_ratio (its own figures over the
    reference's, at least 1), with the contexts."""
    ctx = 2 * CONTEXT_BYTES + FLUSH_CONTEXT_BYTES
    i, o, w, f, ci, co = _parts(shape)
    call = max(w + i + ci + f + co, w + 2 * i + ci)
    return ctx + _need_of((call, call * max(cand_ratio, 1.0)))


def placement_bytes(fp):
    """What one more placement holds in a worker: its copy of the inputs
    and the forward's allocations made in its pool, where the timed GENs'
    tensors are made too (their block, at least the inputs' size, cached
    there for the forward's allocations: stark_worker_inputs._gen_pool)."""
    i = fp.get("in", 0)
    return int((i + max(fp.get("fwd", 0), fp.get("out", 0), i)) * ALLOC_FACTOR)


def places(ref, cand, want, spare):
    """How many placements the timing phase may rotate through: at most
    `want`, each worker's extra placements within PLACEMENT_BYTES, and all
    of them within `spare` bytes (what the ledger or the device has free
    beyond the evaluation's need).  At least 1."""
    per = max(placement_bytes(ref), placement_bytes(cand or ref), 1)
    both = placement_bytes(ref) + placement_bytes(cand or ref)
    n = min(want, 1 + PLACEMENT_BYTES // per, 1 + max(spare, 0) // max(both, 1))
    return max(int(n), 1)


def over_allowance(cand_bytes, ref_bytes, slack=CAND_SLACK):
    """Whether a candidate's figure is beyond what it is allowed against
    the reference's (CAND_FACTOR times it plus slack: CAND_SLACK on the
    device, HOST_SLACK on the host): the candidate itself then answers for
    running out of memory."""
    return cand_bytes > CAND_FACTOR * ref_bytes + slack


# -- the ledger ------------------------------------------------------------

class LedgerError(Exception):
    """The lock file cannot serve as a ledger (not lockable, unwritable)."""


def _lock(fd, how, start, wait=True):
    """A POSIX record lock on one byte; False when `wait` is false and the
    byte is held by another process."""
    try:
        fcntl.lockf(fd, how | (0 if wait else fcntl.LOCK_NB), 1, start)
        return True
    except OSError as e:
        if not wait and e.errno in (errno.EACCES, errno.EAGAIN):
            return False
        raise LedgerError("record lock on byte %d: %s" % (start, e))


def _fits(recs, r, limit):
    """Whether record r of the table recs [(slot, pid, ticket, bytes,
    waiting)] would be admitted or grown now: the others' bytes, the waits
    of those with earlier tickets, and r's bytes with its wait, within
    limit."""
    held = sum(x[3] for x in recs if x is not r)
    ahead = sum(x[4] for x in recs if x[2] < r[2])
    return held + ahead + r[3] + r[4] <= limit


def _deadlocked(recs, me, limit):
    """Whether the grower `me` should stop waiting: no other record of
    recs can move (none holds without waiting, none waiting fits now), and
    of the records that wait while holding, me has the latest ticket."""
    for r in recs:
        if r is me:
            continue
        if r[3] > 0 and r[4] == 0 or r[4] > 0 and _fits(recs, r, limit):
            return False
    return me[2] == max(r[2] for r in recs if r is me or r[3] > 0 and r[4] > 0)


class Ledger:
    """One evaluation's view of the ledger in the lock file fd (not owned:
    the caller closes it, which drops the locks).  At most one record per
    Ledger: reserve() waits for admission, grow() waits to enlarge it,
    resize() changes it without waiting, release() gives it up."""

    def __init__(self, fd):
        self.fd = fd
        self.slot = None
        self.ticket = 0
        self.bytes = 0
        self.waited_s = 0.0
        self.gave_up = None         # why the last grow() stopped short

    # -- the table, under the mutex --
    def _table(self):
        """The live records of the others: [(slot, pid, ticket, bytes,
        waiting)].  Records whose owner is gone are skipped."""
        out = []
        data = os.pread(self.fd, SLOTS * RECORD_SIZE, TABLE_AT)
        for i in range(SLOTS):
            if i == self.slot:
                continue
            rec = data[i * RECORD_SIZE:i * RECORD_SIZE + RECORD.size]
            if len(rec) < RECORD.size:
                break
            magic, ver, pid, ticket, nbytes, waiting, _ = RECORD.unpack(rec)
            if magic != MAGIC or ver != VERSION:
                continue
            # Live only while its owner holds the slot's byte.
            if _lock(self.fd, fcntl.LOCK_SH, SLOT_BASE + i, wait=False):
                _lock(self.fd, fcntl.LOCK_UN, SLOT_BASE + i)
                continue
            out.append((i, pid, ticket, nbytes, waiting))
        return out

    def _write(self, nbytes, waiting):
        os.pwrite(self.fd, RECORD.pack(MAGIC, VERSION, os.getpid(), self.ticket, nbytes,
                                       waiting, time.time()).ljust(RECORD_SIZE, b"\0"),
                  TABLE_AT + self.slot * RECORD_SIZE)

    def _claim(self):
        """A free slot, locked, and a ticket (under the mutex)."""
        for i in range(SLOTS):
            if _lock(self.fd, fcntl.LOCK_EX, SLOT_BASE + i, wait=False):
                self.slot = i
                break
        else:
            raise LedgerError("all %d slots of the ledger are held" % SLOTS)
        head = os.pread(self.fd, HEADER.size, HEADER_AT)
        nxt = 1
        if len(head) == HEADER.size:
            magic, ver, n = HEADER.unpack(head)
            if magic == MAGIC and ver == VERSION:
                nxt = n
        self.ticket = nxt
        os.pwrite(self.fd, HEADER.pack(MAGIC, VERSION, nxt + 1), HEADER_AT)

    def _mutex(self):
        _lock(self.fd, fcntl.LOCK_EX, LEDGER_MUTEX)

    def _unmutex(self):
        _lock(self.fd, fcntl.LOCK_UN, LEDGER_MUTEX)

    def others(self):
        """(bytes the others have reserved, bytes the others are waiting
        for, their count)."""
        self._mutex()
        try:
            t = self._table()
        finally:
            self._unmutex()
        return sum(r[3] for r in t), sum(r[4] for r in t), len(t)

    def reserve(self, nbytes, limit, until, sleep=time.sleep):
        """Waits until nbytes fit: what the others hold, what those that
        came before wait for, and nbytes, within limit.  until() is called
        between polls and returns False to give up (the deadline).  Returns
        True once admitted (the record stands), False when given up (no
        record left)."""
        t0 = time.monotonic()
        self._mutex()
        try:
            if self.slot is None:
                self._claim()
            self._write(0, nbytes)
        finally:
            self._unmutex()

        def step():
            t = self._table()
            held = sum(r[3] for r in t)
            ahead = sum(r[4] for r in t if r[2] < self.ticket)
            if held + ahead + nbytes <= limit or (not t and nbytes > limit):
                self._write(nbytes, 0)
                self.bytes = nbytes
                return True
            return None
        try:
            if self._poll(step, until, sleep):
                return True
            self.release()
            return False
        finally:
            self.waited_s += time.monotonic() - t0

    def grow(self, nbytes, limit, until, sleep=time.sleep):
        """Waits until the reservation can grow to nbytes: what the others
        hold, what those that came before wait for, and nbytes, within
        limit; meanwhile it keeps what it holds, and its record shows the
        extra bytes as its wait (under its first ticket: those that came
        after count it).  Gives up, keeping what it holds, where nbytes is
        beyond limit (at once), where waiting would deadlock (_deadlocked)
        or when until() returns False; self.gave_up then says which
        ("limit", "deadlock", "deadline"), else it is None.  A size no
        larger than the reservation is taken at once (resize).  Returns the
        bytes now reserved."""
        self.gave_up = None
        if self.slot is None or nbytes <= self.bytes:
            return self.resize(nbytes, limit)
        if nbytes > limit:
            self.gave_up = "limit"
            return self.bytes
        t0 = time.monotonic()
        me = (self.slot, os.getpid(), self.ticket, self.bytes, nbytes - self.bytes)
        self._mutex()
        try:
            self._write(self.bytes, nbytes - self.bytes)
        finally:
            self._unmutex()

        def step():
            t = self._table() + [me]
            if _fits(t, me, limit):
                self._write(nbytes, 0)
                self.bytes = nbytes
                return nbytes
            if _deadlocked(t, me, limit):
                self.gave_up = "deadlock"
                self._write(self.bytes, 0)
                return self.bytes
            return None
        try:
            got = self._poll(step, until, sleep)
            if got is not None:
                return got
            self.gave_up = "deadline"
            return self.resize(self.bytes, limit)
        finally:
            self.waited_s += time.monotonic() - t0

    def _poll(self, step, until, sleep):
        """step() under the mutex until it returns something other than
        None, which is returned; None once until() returns False.  The
        polls back off from 10 to 200 ms."""
        delay = 0.01
        while True:
            self._mutex()
            try:
                got = step()
            finally:
                self._unmutex()
            if got is not None:
                return got
            if not until():
                return None
            sleep(delay)
            delay = min(delay * 2, 0.2)

    def resize(self, nbytes, limit):
        """Changes the reservation without waiting: a smaller one always, a
        larger one as far as the others leave room (at least the current
        one).  Returns the bytes now reserved."""
        if self.slot is None:
            return 0
        self._mutex()
        try:
            if nbytes > self.bytes:
                held = sum(r[3] for r in self._table())
                nbytes = max(self.bytes, min(nbytes, limit - held))
            self._write(nbytes, 0)
            self.bytes = nbytes
        finally:
            self._unmutex()
        return nbytes

    def free(self, limit):
        """Bytes of the budget no one holds or waits for, this record's
        excluded."""
        held, waiting, _ = self.others()
        return max(limit - held - waiting - self.bytes, 0)

    def release(self):
        """The record withdrawn and its slot let go."""
        if self.slot is None:
            return
        try:
            self._mutex()
            try:
                self._write(0, 0)
            finally:
                self._unmutex()
        except (OSError, LedgerError):
            pass
        try:
            _lock(self.fd, fcntl.LOCK_UN, SLOT_BASE + self.slot)
        except LedgerError:
            pass
        self.slot = None
        self.bytes = 0


def read_ledger(fd):
    """The live records of a lock file, for tools: [(pid, ticket, bytes,
    waiting)]."""
    view = Ledger(fd)
    view._mutex()
    try:
        return [(r[1], r[2], r[3], r[4]) for r in view._table()]
    finally:
        view._unmutex()
