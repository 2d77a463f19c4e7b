"""The GPU lock protocol of stark's evaluators (evaluator/evaluator.h,
EVAL_FD_LOCK), for scripts that share a GPU with `stark eval --gpu-lock
FILE`: POSIX record locks on byte 1 of FILE, exclusive to time, shared for
other GPU work, each taken while holding byte 0 (the turnstile), so a
timing that waits keeps new shared holders out; a timing also holds byte 3
shared from the start of its wait to its end, and shared work waits while
any timing holds it, so timings run back to back.

The same file holds the evaluations' memory ledger (evaluator/stark_memory.py):
`python3 scripts/gpulock.py FILE` lists the reservations standing there."""
import errno
import fcntl
import os
import sys
import time

TURN, GPU, TIMING = 0, 1, 3


class GpuLock:
    """with GpuLock(path, exclusive=True): the GPU, as the protocol says."""

    def __init__(self, path, exclusive=True):
        self.path, self.exclusive, self.fd = path, exclusive, -1

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        if self.exclusive:
            fcntl.lockf(self.fd, fcntl.LOCK_SH, 1, TIMING)
        else:
            while True:     # no timing waiting or running
                try:
                    fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, TIMING)
                    fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, TIMING)
                    break
                except OSError as e:
                    if e.errno not in (errno.EACCES, errno.EAGAIN):
                        raise
                    time.sleep(0.01)
        fcntl.lockf(self.fd, fcntl.LOCK_EX, 1, TURN)
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH, 1, GPU)
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, TURN)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)       # closing drops every lock this process holds on the file
        self.fd = -1
        return False


def ledger(path):
    """The memory reservations standing in a lock file: [(pid, ticket, bytes
    reserved, bytes waited for)] (evaluator/stark_memory.py)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "evaluator"))
    import stark_memory
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        return stark_memory.read_ledger(fd)
    finally:
        os.close(fd)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gpulock.py LOCKFILE   (lists its memory reservations)")
    try:
        rows = ledger(sys.argv[1])
    except OSError as e:
        sys.exit("gpulock.py: %s: %s" % (sys.argv[1], e.strerror))
    for pid, ticket, held, waiting in rows:
        print("pid %d ticket %d: %.2f GiB reserved%s" % (
            pid, ticket, held / (1 << 30),
            ", waiting for %.2f GiB" % (waiting / (1 << 30)) if waiting else ""))
