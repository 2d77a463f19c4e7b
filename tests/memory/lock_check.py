"""The referee's GPU lock (evaluator/stark_referee_lock.py) when other
evaluations' timings hold it past the deadline: that wait is the
evaluator's queue, so a step that needs the lock ends as an `error` naming
the evaluator's limit (never the candidate's `timeout`), and a step the
verdict can do without (the checks after the timing) is skipped with a
note; the wait moves the evaluation's deadline on, within its
allowance (the queue's clock); and timings go first, back to back.  The lock is held by a real process on a
real lock file.  No GPU and
no torch.  Prints TAP.  Usage: python3 tests/memory/lock_check.py"""
import fcntl
import os
import signal
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator"))
sys.path.insert(0, HERE)
sys.modules["_stark"] = types.SimpleNamespace(limits=lambda: {})

from tap import done, ok  # noqa: E402
import stark_referee_lock as L  # noqa: E402



class Evaluation(L.GpuLock):
    """The attributes of stark_referee.Evaluation the GPU lock reads; the
    deadline comes `wait_s` seconds after each step begins to wait."""

    def __init__(self, fd, wait_s=0.3):
        self.cuda = True
        self.lock_fd = fd
        self.lock_held = None
        self.lock_wait = {}
        self.held_ms = {}
        self.held_calls = {}
        self.res = {"env": {}}
        self.wait_s = wait_s
        self.until = None
        self.queue_init(time.monotonic() + 60.0)

    def time_left_for(self, pairs):
        if self.until is None:
            self.until = time.monotonic() + self.wait_s
        return time.monotonic() < self.until


def holder(path, secs=None, how=fcntl.LOCK_EX, byte=L.LOCK_GPU):
    """A process holding the GPU lock exclusively (another evaluation's
    timing), or `byte` as `how` says, for secs seconds, or until killed."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        fd = os.open(path, os.O_RDWR)
        fcntl.lockf(fd, how, 1, byte)
        os.write(w, b"x")
        while secs is None:
            time.sleep(1)
        time.sleep(secs)
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    os.close(r)
    return pid


class Clocked(Evaluation):
    """Its deadline as the referee's: the queue's clock moves it on."""

    def __init__(self, fd, left_s, allow_s):
        super().__init__(fd)
        self.queue_init(time.monotonic() + left_s)
        self.queue_allow_s = allow_s

    def time_left_for(self, pairs):
        return time.monotonic() + 0.05 < self.deadline


def can_take(path):
    """Whether another process could take the GPU lock exclusively now."""
    pid = os.fork()
    if pid == 0:
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, L.LOCK_GPU)
            os._exit(0)
        except OSError:
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


def main():
    tmp = tempfile.mkdtemp(prefix="stark-lock-check.")
    path = os.path.join(tmp, "gpu.lock")
    with open(path, "wb") as f:
        f.write(b"\0" * 4096)
    fd = os.open(path, os.O_RDWR)
    pid = holder(path)
    try:
        ev = Evaluation(fd)
        ran = []
        t0 = time.monotonic()
        try:
            with ev.gpu_shared("trial 1 of 5"):
                ran.append("trial")
            got = None
        except L.Verdict as v:
            got = v
        ok(got is not None and got.status == "error" and isinstance(got, L.LockNotFree),
           "a step that cannot get the GPU lock before the deadline is an error, not a timeout",
           "got %r" % ((got and (got.status, got.message)),))
        ok(got is not None and "evaluator's limit" in got.message and "trial 1 of 5" in
           got.message and not ran, "the error names the step and the evaluator's limit",
           "got %r, ran %r" % (got and got.message, ran))
        ok(time.monotonic() - t0 < 5, "it waited until the deadline, no longer")

        ev = Evaluation(fd)
        r = ev.gpu_optional(lambda: ran.append("probe") or 7, "shape_probe",
                            "the call at another shape")
        note = ev.res["env"].get("shape_probe", "")
        ok(r is None and "probe" not in ran and note.startswith("skipped: ") and
           "evaluator's limit" in note and "another shape" in note,
           "a step the verdict can do without is skipped, with a note saying why",
           "returned %r, ran %r, note %r" % (r, ran, note))
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)

    ev = Evaluation(fd)
    held = []
    r = ev.gpu_optional(lambda: held.append(not can_take(path)) or 7, "shape_probe",
                        "the call at another shape")
    ok(r == 7 and held == [True] and "shape_probe" not in ev.res["env"],
       "with the lock free the step runs under it and returns its result",
       "returned %r, held %r, env %r" % (r, held, ev.res["env"]))
    ok(can_take(path) and ev.lock_held is None, "and lets the lock go after the step")

    # How long each kind of step held the lock (env gpu_held_ms), the
    # waits left out: a hold of 0.2 s and one of 0.1 s of trials, a
    # timing of 0.15 s, a step without a kind.
    ev = Evaluation(fd)
    for step, secs in (("trials", 0.2), ("trials", 0.1), ("probes", 0.0)):
        with ev.gpu_shared("a step", step):
            time.sleep(secs)
    ok(ev.take_lock(exclusive=True), "a timing takes the free lock")
    time.sleep(0.15)
    for reply in ({"ev_us": 40000.0}, {"ev_us": 2500}, {"ev_us": float("nan")},
                  {"ev_us": True}, {}, None):
        ev.note_kernels(reply)
    ev.release_lock()
    ev.note_kernels({"ev_us": 90000.0})         # no lock held: not counted
    with ev.gpu_shared("a step"):
        pass
    held = dict(zip(ev.res["env"].get("gpu_held_ms", "").split()[0::2],
                    map(float, ev.res["env"].get("gpu_held_ms", "").split()[1::2])))
    ok(sorted(held) == ["other", "probes", "timing", "trials"] and
       290 <= held["trials"] < 600 and 140 <= held["timing"] < 450 and held["probes"] < 100,
       "env gpu_held_ms: how long each kind of step held the GPU lock", held)
    ok(ev.res["env"].get("gpu_held_calls_ms") == "timing 42",
       "env gpu_held_calls_ms: the calls' kernel time in those holds; readings "
       "that are not times, and calls outside a hold, left out",
       ev.res["env"].get("gpu_held_calls_ms"))

    # The queue's allowance: the request's queue_ms where the orchestrator
    # gave one (evaluations sharing the GPU), else the wall time again.
    ok(L.queue_allowance({"queue_ms": 1080000}, 180.0) == 1080.0 and
       L.queue_allowance({"queue_ms": 0}, 180.0) == 180.0 and
       L.queue_allowance({}, 180.0) == 180.0 and
       L.queue_allowance({"queue_ms": True}, 180.0) == 180.0,
       "the queue's allowance is the request's queue_ms, else the wall time again")

    # The queue's clock: a wait for the lock longer than the time that was
    # left moves the deadline on, within the allowance.
    pid = holder(path, 1.0)
    ev = Clocked(fd, 0.3, 10.0)
    base = ev.deadline
    t0 = time.monotonic()
    try:
        with ev.gpu_shared("trial 1 of 5"):
            got = "ran"
    except L.Verdict as v:
        got = v.message
    waited = time.monotonic() - t0
    os.waitpid(pid, 0)
    moved = ev.deadline - base
    ok(got == "ran" and waited >= 0.9 and abs(moved - waited) < 0.1 and
       ev.res["env"].get("queue_ms", "").endswith(" of 10000"),
       "a wait in the GPU's queue moves the deadline on by as long as it lasted",
       "got %r after %.2f s, deadline moved %.2f s, env %r" % (got, waited, moved, ev.res["env"]))
    ev.release_lock()
    pid = holder(path, 1.0)
    ev = Clocked(fd, 0.3, 0.2)
    t0 = time.monotonic()
    try:
        with ev.gpu_shared("trial 1 of 5"):
            got = "ran"
    except L.LockNotFree:
        got = "error"
    waited = time.monotonic() - t0
    os.waitpid(pid, 0)
    ok(got == "error" and 0.35 < waited < 0.9,
       "no further than its allowance: then the step is the evaluator's error",
       "got %r after %.2f s" % (got, waited))
    timings_first(path, fd)
    os.close(fd)
    os.unlink(path)
    os.rmdir(tmp)
    return done()


def shared_free(path):
    """Whether another process's shared step would queue now (no timing marked)."""
    pid = os.fork()
    if pid == 0:
        fd = os.open(path, os.O_RDWR)
        try:
            L._no_timing_waits(fd)
            os._exit(0)
        except OSError:
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


def timings_first(path, fd):
    """Timings go back to back: while one waits (LOCK_TIMING marked), a
    shared step does not get the GPU although its byte is free; another
    timing does, and marks it while it holds the GPU; letting go unmarks."""
    # A timing that waits: LOCK_TIMING marked, the GPU byte itself free.
    pid = holder(path, how=fcntl.LOCK_SH, byte=L.LOCK_TIMING)
    try:
        ev = Evaluation(fd, wait_s=0.3)
        ran = []
        try:
            with ev.gpu_shared("trial 2 of 5"):
                ran.append("trial")
        except L.LockNotFree:
            pass
        ok(not ran and can_take(path),
           "while a timing waits, a shared step stays out although the GPU is free",
           "ran %r" % ran)
        ev = Evaluation(fd, wait_s=0.3)
        took = ev.take_lock(exclusive=True)
        ok(took and ev.lock_held == "ex" and not can_take(path),
           "another timing gets the GPU meanwhile: timings back to back")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    ok(not shared_free(path), "a timing holding the GPU keeps the mark: shared steps wait")
    ev.release_lock()
    ok(shared_free(path) and can_take(path), "letting the GPU go drops the mark")
    ev = Evaluation(fd, wait_s=0.3)
    with ev.gpu_shared("trial 3 of 5"):
        inside = not can_take(path)
    ok(inside and shared_free(path), "with no timing marked, a shared step runs, marking nothing")
    pid = holder(path)
    try:
        ev = Evaluation(fd, wait_s=0.3)
        took = ev.take_lock(exclusive=True)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    ok(not took and ev.lock_held is None and shared_free(path),
       "a timing that gave up at its deadline drops its mark")


if __name__ == "__main__":
    sys.exit(main())
