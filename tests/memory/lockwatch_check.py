"""scripts/gpulock.py's watch: which GPU lock files a bench holds (the
unlinked stark-gpu-lock-* files, in the order opened, found through a
parent such as `timeout`) and what each GPU byte is held for, read from
/proc/locks without taking any lock -- real processes holding real locks.
No GPU and no torch.  Prints TAP.  Usage: python3 tests/memory/lockwatch_check.py"""
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
sys.path.insert(0, HERE)

from tap import done, ok  # noqa: E402
import gpulock as G  # noqa: E402


def bench(tmp, hows, secs=None):
    """A forked stand-in for a bench: opens one unlinked lock file a GPU (as
    engine/evalpool.c does), holds byte 1 of each as `hows` says (LOCK_SH,
    LOCK_EX or None), for secs seconds or until killed.  Returns its pid
    once it holds them."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        for how in hows:
            fd, path = tempfile.mkstemp(prefix="stark-gpu-lock-", dir=tmp)
            os.unlink(path)
            if how is not None:
                fcntl.lockf(fd, how, 1, G.GPU)
        os.write(w, b"x")
        time.sleep(3600 if secs is None else secs)
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    os.close(r)
    return pid


def waiter(pid_holding, key_index, tmp_pid):
    """A process blocked on an exclusive lock of another's lock file (through
    /proc/PID/fd): a waiter, which /proc/locks lists with "->"."""
    fds = sorted(int(n) for n in os.listdir("/proc/%d/fd" % tmp_pid)
                 if "/stark-gpu-lock-" in os.readlink("/proc/%d/fd/%s" % (tmp_pid, n)))
    path = "/proc/%d/fd/%d" % (tmp_pid, fds[key_index])
    pid = os.fork()
    if pid == 0:
        fd = os.open(path, os.O_RDWR)
        fcntl.lockf(fd, fcntl.LOCK_EX, 1, G.GPU)
        os._exit(0)
    return pid


def kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def main():
    tmp = tempfile.mkdtemp(prefix="stark-lockwatch.")
    pid = bench(tmp, [fcntl.LOCK_SH, fcntl.LOCK_EX, None])
    try:
        keys = G.lock_files(pid)
        ok(len(keys) == 3 and len(set(keys)) == 3,
           "a bench's three unlinked lock files are found, one a GPU", keys)
        got = G.states(keys)
        ok(got == ["shared", "timing", ""],
           "held shared, exclusively, and free, as /proc/locks says", got)
        ok(G.lock_files(os.getpid()) == keys,
           "through a parent that holds none (timeout), its child's files, in the same order")
        w = waiter(pid, 0, pid)
        try:
            time.sleep(0.2)
            got = G.states(keys)
        finally:
            kill(w)
        ok(got == ["shared", "timing", ""], "a process waiting for a GPU holds nothing", got)
    finally:
        kill(pid)
    ok(G.states(keys) == ["", "", ""], "a bench gone holds nothing")

    text = ("1: POSIX  ADVISORY  READ  10 fe:01:77 1 1\n"
            "1: -> POSIX  ADVISORY  WRITE 11 fe:01:77 1 1\n"
            "2: OFDLCK ADVISORY  WRITE -1 fe:01:78 0 EOF\n"
            "3: POSIX  ADVISORY  READ  12 fe:01:79 3 3\n"
            "4: FLOCK  ADVISORY  WRITE 13 fe:01:80 0 EOF\n"
            "garbage\n")
    dev = os.makedev(0xfe, 1)
    got = G.states([(dev, 77), (dev, 78), (dev, 79), (dev, 80)], text)
    ok(got == ["shared", "timing", "", "timing"],
       "ranges to EOF cover the GPU byte; the timing mark (byte 3) alone is not the GPU; "
       "lines it cannot read are skipped", got)

    text2 = ("1: POSIX  ADVISORY  READ  10 fe:01:77 1 1\n"
             "2: POSIX  ADVISORY  READ  14 fe:01:77 0 EOF\n"
             "3: -> POSIX  ADVISORY  WRITE 11 fe:01:77 1 1\n"
             "4: POSIX  ADVISORY  READ  15 fe:01:77 3 3\n"
             "5: POSIX  ADVISORY  WRITE 16 fe:01:78 1 1\n")
    got = G.holders([(dev, 77), (dev, 78), (dev, 79)], text2)
    ok(got == [2, 1, 0], "holders: two shared steps in at once, one timing, none; "
       "waiters and the timing mark are not holders", got)
    busy, total = G.cpu_ticks()
    ok(0 <= busy <= total and total > 0, "the host's CPU ticks read from /proc/stat",
       (busy, total))

    # The sampler: a line a sample until the bench ends.
    out = os.path.join(tmp, "locks.txt")
    pid = bench(tmp, [fcntl.LOCK_EX, fcntl.LOCK_SH], secs=1.2)
    t0 = time.monotonic()
    rc = subprocess.call([sys.executable, os.path.join(HERE, "..", "..", "scripts", "gpulock.py"),
                          "watch", str(pid), out, "0.1"], timeout=30)
    took = time.monotonic() - t0
    os.waitpid(pid, 0)
    lines = [ln.split() for ln in open(out)] if os.path.exists(out) else []
    # The last sample may fall between the bench's exit and its reaping.
    held = [ln for ln in lines if ln[1:] == ["timing", "shared"]]
    ok(rc == 0 and len(held) >= 5 and len(lines) - len(held) <= 1 and
       all(ln[1:] in (["timing", "shared"], ["-", "-"]) for ln in lines) and took < 10,
       "watch writes each GPU's state every interval and ends with the bench",
       "rc %s, %d lines, %.1f s: %s" % (rc, len(lines), took, lines[:3]))
    host = [ln.split() for ln in open(out + ".host")] if os.path.exists(out + ".host") else []
    ok(len(host) == len(lines) and all(len(x) == 4 and 0.0 <= float(x[1]) <= 100.0 and
                                       x[2:] in (["1", "1"], ["0", "0"]) for x in host),
       "beside it, the host's CPU busy share and each GPU's holders a sample", host[:3])
    os.unlink(out + ".host")
    os.unlink(out)
    os.rmdir(tmp)
    return done()


if __name__ == "__main__":
    sys.exit(main())
