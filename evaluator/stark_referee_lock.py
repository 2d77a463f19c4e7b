"""stark_referee_lock -- the GPU lock shared by evaluations on one GPU.

When fd 4 is open at start it is a lock file shared by the evaluations on
one GPU (evaluator.h, EVAL_FD_LOCK): the timing phase holds an exclusive
lock on it, other GPU work a shared one, one step (a trial, a probe) at a
time.  The workers never hold it: fork_worker closes every descriptor but
their socket and the output window.
"""

import contextlib
import errno
import fcntl
import os
import stat
import time

from stark_referee_common import Verdict

LOCK_FD = 4                   # the GPU lock file, when the orchestrator passes one
LOCK_TURN = 0                 # its byte taken to wait for LOCK_GPU (take_lock)
LOCK_GPU = 1                  # its byte held while using the GPU
LOCK_TIMING = 3               # held shared by each timing waiting for or holding LOCK_GPU


def lock_usable(fd):
    """Whether fd is open on a regular file we may write-lock: only such a
    descriptor is taken as the orchestrator's GPU lock."""
    try:
        st = os.fstat(fd)
        fl = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and (fl & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR)


class LockNotFree(Verdict):
    """The GPU lock was not free before the evaluation's deadline: the
    evaluator's own queue (the other evaluations' timings on the GPU), so an
    error and never the candidate's doing."""

    def __init__(self, what):
        super().__init__("error", "the GPU lock (held by other evaluations' timings) was not "
                         "free before the evaluation's deadline, for %s (the evaluator's "
                         "limit: fewer evaluations in flight on this GPU, or a longer "
                         "--timeout, would let it run)" % what)


def queue_allowance(req, wall_s):
    """How far waits in the GPU's queue may move the deadline on: the
    request's queue_ms (the orchestrator's allowance for the evaluations
    sharing the GPU: pool/evalrun.c, evalrun_queue_ms), else the wall time
    again."""
    q = req.get("queue_ms")
    if isinstance(q, int) and not isinstance(q, bool) and q > 0:
        return q / 1000.0
    return wall_s


def _no_timing_waits(fd):
    """Returns when no timing marks LOCK_TIMING; raises EAGAIN (BlockingIOError)
    while one does: the test is an exclusive lock on that byte, taken and at
    once let go (a timing that tried to mark it meanwhile tries again)."""
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, LOCK_TIMING)
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, LOCK_TIMING)


def _unlock(fd, byte):
    try:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, byte)
    except OSError:
        pass


class GpuLock:
    """The part of Evaluation that takes and lets go of the GPU lock, and
    keeps the clock of its queue."""

    timing_marked = False     # LOCK_TIMING held (take_lock)
    held_since = None         # when the lock now held was taken
    held_step = None          # what for: the step's name in env gpu_held_ms

    # -- the queue's clock -------------------------------------------------
    # Waiting for the other evaluations on the GPU (the memory ledger's
    # admission and growth, the GPU lock) is the evaluator's queue, not this
    # evaluation's work: up to queue_allow_s of it (the evaluation's wall
    # time again, where the orchestrator passed the GPU lock) moves the
    # deadline on.  The orchestrator's own deadline for the process allows
    # as much (pool/evalrun.c, outer_wall_ms).  On a GPU shared by --jobs 4
    # of level 1's problems at their real sizes, the waits reached 153 s of
    # a 180 s evaluation.
    def queue_init(self, deadline):
        self.base_deadline = deadline
        self.queue_allow_s = 0.0
        self.queue_s = 0.0
        self.queue_since = None

    @property
    def deadline(self):
        q = self.queue_s
        if self.queue_since is not None:
            q += time.monotonic() - self.queue_since
        return self.base_deadline + min(q, self.queue_allow_s)

    @contextlib.contextmanager
    def queued(self):
        """A wait in the GPU's queue: it moves the deadline on while it
        lasts (within queue_allow_s); env.queue_ms is the whole of them."""
        if self.queue_since is not None:
            yield
            return
        self.queue_since = time.monotonic()
        try:
            yield
        finally:
            self.queue_s += time.monotonic() - self.queue_since
            self.queue_since = None
            self.res["env"]["queue_ms"] = "%.0f of %.0f" % (self.queue_s * 1e3,
                                                           self.queue_allow_s * 1e3)

    def queue_uncount(self, seconds):
        """Takes seconds off the waits counted (a wait that counted more
        than it may: DataPath.gen_cpu_made)."""
        self.queue_s = max(self.queue_s - seconds, 0.0)
        self.res["env"]["queue_ms"] = "%.0f of %.0f" % (self.queue_s * 1e3,
                                                       self.queue_allow_s * 1e3)

    def take_lock(self, exclusive=True, step=None):
        """The GPU lock (fd 4, when the orchestrator passed one): POSIX
        record locks on its byte LOCK_GPU, exclusive for a timing phase,
        shared for other work on the GPU (loading, trials, probes), so no
        one's GPU work runs beside a timing.  Both are taken through the
        turnstile byte LOCK_TURN, held only while waiting: a timing that
        waits keeps new shared holders out, and the ones already in finish
        their step (one trial) and let it in.

        Timings go first, back to back: each timing marks LOCK_TIMING
        (shared) from the start of its wait until it lets the GPU go, and
        a shared step does not even queue for the turnstile while any
        timing is marked.  Without it, a shared step took the turnstile
        as soon as one timing ended, the next timing then waited for the
        steps that got in to finish, and the GPU sat half idle through
        that drain once per timing: on two H200s, a bench of level 2 with
        8 evaluations a GPU waited 3.2 s for every 2.7 s timing (GPUs
        41% busy); with timings first, 2.7 s for 2.6 s (47% busy).
        Shared steps are not starved: a timing only comes once its
        evaluation's own shared steps are done.

        Waits while time for two pairs is left; returns False when the
        deadline came first.  A lock already held in the other mode is
        let go first.  `step` names what the lock is held for in env
        gpu_held_ms (how long each kind of step held it: which of them
        keeps the GPU from the others)."""
        if self.lock_fd is None:
            return True
        want = "ex" if exclusive else "sh"
        if self.lock_held == want:
            return True
        self.release_lock()
        fd = self.lock_fd
        env = self.res["env"]
        with self.queued():
            got = self._wait_lock(fd, want, exclusive, env)
        if self.lock_held == want:
            self.held_since = time.monotonic()
            self.held_step = step or ("timing" if exclusive else "other")
        return got

    def _wait_lock(self, fd, want, exclusive, env):
        t0 = time.monotonic()
        delay = 0.001
        turn = False
        got = False
        try:
            while True:
                try:
                    if exclusive and not self.timing_marked:
                        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, LOCK_TIMING)
                        self.timing_marked = True
                    if not exclusive and not turn:
                        _no_timing_waits(fd)
                    if not turn:
                        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, LOCK_TURN)
                        turn = True
                    fcntl.lockf(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) |
                                fcntl.LOCK_NB, 1, LOCK_GPU)
                    self.lock_held = want
                    got = True
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
            # (by fd: a lock found unusable above is no longer self.lock_fd)
            if turn:
                _unlock(fd, LOCK_TURN)
            if not got:
                self._unmark_timing(fd)
            waited = self.lock_wait.get(want, 0.0) + time.monotonic() - t0
            self.lock_wait[want] = waited
            env["gpu_lock_wait_ms"] = "/".join("%.1f" % (self.lock_wait.get(k, 0.0) * 1e3)
                                               for k in ("ex", "sh"))
        return True

    def release_lock(self):
        if self.lock_held:
            self.lock_held = None
            _unlock(self.lock_fd, LOCK_GPU)
            self._count_held()
        self._unmark_timing(self.lock_fd)

    def note_kernels(self, reply):
        """Adds a CALL reply's kernel time (its events, ev_us) to the hold
        it was made in, for env gpu_held_calls_ms: how much of each kind of
        hold the models' own forwards kept the GPU busy (the candidate's
        events are its own word: a diagnostic, never evidence)."""
        us = reply.get("ev_us") if isinstance(reply, dict) else None
        if (not self.lock_held or type(us) not in (int, float) or not 0 <= us < 1e9):
            return
        calls = self.held_calls
        step = self.held_step or "other"
        calls[step] = calls.get(step, 0.0) + us / 1e3
        self.res["env"]["gpu_held_calls_ms"] = " ".join(
            "%s %.0f" % kv for kv in calls.items())[:200]

    def _count_held(self):
        """Adds the hold just ended to env gpu_held_ms ("step ms ...")."""
        if self.held_since is None:
            return
        held = self.held_ms
        step = self.held_step or "other"
        held[step] = held.get(step, 0.0) + (time.monotonic() - self.held_since) * 1e3
        self.held_since = self.held_step = None
        self.res["env"]["gpu_held_ms"] = " ".join("%s %.0f" % kv for kv in held.items())[:200]

    def _unmark_timing(self, fd):
        if self.timing_marked:
            self.timing_marked = False
            _unlock(fd, LOCK_TIMING)

    @contextlib.contextmanager
    def gpu_shared(self, what="a step on the GPU", step="other"):
        """One step of GPU work outside the timing phase (loading, a trial,
        a probe) under the GPU lock, shared; let go after the step, so a
        timing that waits gets its turn.  Raises LockNotFree (an error: the
        evaluator's queue) when the deadline comes first.  `step`: its
        kind, for env gpu_held_ms."""
        if not (self.cuda and self.lock_fd is not None):
            yield
            return
        if not self.take_lock(exclusive=False, step=step):
            raise LockNotFree(what)
        try:
            yield
        finally:
            self.release_lock()

    def gpu_optional(self, fn, key, what, step="other"):
        """fn() as a step under the shared GPU lock, for a step the verdict
        can do without (the checks after the timing): skipped when the lock
        is not free before the deadline, env[key] saying so.  Returns fn's
        result, or None when skipped."""
        try:
            with self.gpu_shared(what, step):
                return fn()
        except LockNotFree as e:
            self.res["env"][key] = ("skipped: %s" % e.message)[:900]
            return None
