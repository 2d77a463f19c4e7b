"""The GPU lock protocol of stark's evaluators (evaluator/evaluator.h,
EVAL_FD_LOCK), for scripts that share a GPU with `stark eval --gpu-lock
FILE`: POSIX record locks on byte 1 of FILE, exclusive to time, shared for
other GPU work, each taken while holding byte 0 (the turnstile), so a
timing that waits keeps new shared holders out."""
import fcntl
import os

TURN, GPU = 0, 1


class GpuLock:
    """with GpuLock(path, exclusive=True): the GPU, as the protocol says."""

    def __init__(self, path, exclusive=True):
        self.path, self.exclusive, self.fd = path, exclusive, -1

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
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
