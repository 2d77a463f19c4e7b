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
need() turns a footprint into bytes of device memory for one evaluation:
both workers' buffers, generated inputs, outputs, copies kept for checks,
the CUDA contexts, and the placements of the timing phase.

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
too little of the budget (the device's memory less a margin); growing a
reservation later never waits (a wait while holding memory can deadlock),
it takes what is free.

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
# reference worker's flush context with its buffer (twice the L2).
# Estimates for the H100 (CUDA 13, torch 2.x); the device's own account of
# what an evaluation holds is in env.gpu_mem.
CONTEXT_BYTES = 512 * MIB
FLUSH_CONTEXT_BYTES = 384 * MIB
# The caching allocator rounds blocks up and keeps freed ones: a worker's
# allocations hold up to this much more of the device than they use.
ALLOC_FACTOR = 1.10
ALLOC_SLACK = 64 * MIB
# The window of the comparison on the reference's device (stark_wire).
CHUNK_BYTES = 256 * MIB
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
# The timing phase's extra placements (memory pools, each with its own
# inputs and forward's allocations) take at most this much per worker: 32
# placements of a problem moving 128 MiB (tests/gpu/problems), none more
# for one of 6 GiB.
PLACEMENT_BYTES = 8 * GIB

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

def worker_need(fp):
    """A worker's device memory for one call, from a footprint (a dict with
    in, out, weights and fwd -- the forward's peak above its inputs and
    weights, outputs included): the larger of making inputs (the generated
    tensors beside the buffers) and calling (the forward's peak beside the
    buffers, with the copies the checks keep of inputs and outputs up to
    COPY_CHECK_BYTES), with the allocator's rounding."""
    i, o, w = fp.get("in", 0), fp.get("out", 0), fp.get("weights", 0)
    f = max(fp.get("fwd", 0), o)
    copies = (i if i <= COPY_CHECK_BYTES else 0) + (o if o <= COPY_CHECK_BYTES else 0)
    gen = w + 2 * i
    call = w + i + f + copies
    return int(max(gen, call) * ALLOC_FACTOR + ALLOC_SLACK)


def floor_need(fp):
    """What no plan can go below: each worker holds its weights, its inputs
    and its outputs at once.  A problem whose floor passes the budget
    cannot be judged on this device at all."""
    one = fp.get("in", 0) + fp.get("out", 0) + fp.get("weights", 0)
    return 2 * one + 2 * CONTEXT_BYTES + FLUSH_CONTEXT_BYTES


def need(ref, cand=None, places=1):
    """Device bytes for an evaluation: the contexts, the reference worker
    (its footprint `ref`, plus a chunk of the candidate's outputs while it
    compares), the candidate's worker (its own footprint, or the
    reference's until that is known), and places-1 more placements in
    each (placement_bytes)."""
    r = worker_need(ref) + CHUNK_BYTES
    c = worker_need(cand if cand else ref)
    extra = (places - 1) * (placement_bytes(ref) + placement_bytes(cand or ref))
    return 2 * CONTEXT_BYTES + FLUSH_CONTEXT_BYTES + r + c + max(extra, 0)


def placement_bytes(fp):
    """What one more placement holds in a worker: its copy of the inputs
    and the forward's allocations made in its pool."""
    return int((fp.get("in", 0) + max(fp.get("fwd", 0), fp.get("out", 0))) * ALLOC_FACTOR)


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


class Ledger:
    """One evaluation's view of the ledger in the lock file fd (not owned:
    the caller closes it, which drops the locks).  At most one record per
    Ledger: reserve() waits for admission, resize() changes it, release()
    gives it up."""

    def __init__(self, fd):
        self.fd = fd
        self.slot = None
        self.ticket = 0
        self.bytes = 0
        self.waited_s = 0.0

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
        delay = 0.01
        self._mutex()
        try:
            if self.slot is None:
                self._claim()
            self._write(0, nbytes)
        finally:
            self._unmutex()
        try:
            while True:
                self._mutex()
                try:
                    t = self._table()
                    held = sum(r[3] for r in t)
                    ahead = sum(r[4] for r in t if r[2] < self.ticket)
                    if held + ahead + nbytes <= limit or (not t and nbytes > limit):
                        self._write(nbytes, 0)
                        self.bytes = nbytes
                        return True
                finally:
                    self._unmutex()
                if not until():
                    self.release()
                    return False
                sleep(delay)
                delay = min(delay * 2, 0.2)
        finally:
            self.waited_s += time.monotonic() - t0

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
