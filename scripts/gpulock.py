"""The GPU lock protocol of stark's evaluators (evaluator/evaluator.h,
EVAL_FD_LOCK), for scripts that share a GPU with `stark eval --gpu-lock
FILE`: POSIX record locks on byte 1 of FILE, exclusive to time, shared for
other GPU work, each taken while holding byte 0 (the turnstile), so a
timing that waits keeps new shared holders out; a timing also holds byte 3
shared from the start of its wait to its end, and shared work waits while
any timing holds it, so timings run back to back.

The same file holds the evaluations' memory ledger (evaluator/stark_memory.py):
`python3 scripts/gpulock.py FILE` lists the reservations standing there.
stark itself takes, for a GPU, the machine's file of that GPU:
$STARK_LOCK_DIR (else /tmp/stark-UID)/stark-gpu-lock-gpuM, M the GPU's
device minor (/dev/nvidiaM); a script that opens that file shares the
queue and the ledger with every stark process on the GPU.

`python3 scripts/gpulock.py watch PID OUT [SECONDS]` samples, every SECONDS
(default 0.5) until PID ends, what the GPU lock files of PID (or of its
children: a `stark bench` or `stark eval --batch`, one file a GPU) are held
for, from /proc/locks, without taking any: a line "T S0 S1 ..." a sample,
T seconds since the start, Sk `timing` (held exclusively), `shared` or `-`
for the k-th GPU (scripts/bench-bench-gpu)."""
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


def _stat(pid):
    """The fields of /proc/PID/stat after the command (state, ppid, ...),
    [] if the process is gone: the command may hold spaces and
    parentheses, so they start after its last ")"."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return []
    return stat[stat.rfind(")") + 2:].split()


def _children(pid):
    kids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat(name)
        if len(fields) > 1 and fields[1] == str(pid):
            kids.append(int(name))
    return sorted(kids)


def lock_files(pid):
    """The GPU lock files process `pid` holds open, in the order it opened
    them (a bench opens one a GPU, in the order of its devices), or, where
    it holds none, those of its first child that does: [(st_dev, st_ino)].
    stark's are named stark-gpu-lock-*: a GPU's is the machine's
    (STARK_LOCK_DIR, else /tmp/stark-UID: stark-gpu-lock-gpuM, M the GPU's
    device minor), so the states read there include other stark processes
    on that GPU; a CPU's is an unlinked temporary file."""
    for p in [pid] + _children(pid):
        found = []
        try:
            fds = os.listdir("/proc/%d/fd" % p)
        except OSError:
            continue
        for name in fds:
            path = "/proc/%d/fd/%s" % (p, name)
            try:
                if "/stark-gpu-lock-" not in os.readlink(path):
                    continue
                st = os.stat(path)
            except OSError:
                continue
            found.append((int(name), (st.st_dev, st.st_ino)))
        if found:
            return [key for _, key in sorted(found)]
    return []


def _gpu_locks(text):
    """(key, mode) of each lock held on a GPU byte in /proc/locks's text:
    key (st_dev major, minor, inode), mode WRITE or READ.  Waiters ("->")
    hold nothing; lines it cannot read are skipped."""
    for line in text.splitlines():
        f = line.split()
        if len(f) < 8 or f[1] == "->":
            continue
        mode, dev, start, end = f[3], f[5], f[6], f[7]
        parts = dev.split(":")
        if len(parts) != 3:
            continue
        try:
            key = (int(parts[0], 16), int(parts[1], 16), int(parts[2]))
            lo = int(start)
            hi = float("inf") if end == "EOF" else int(end)
        except ValueError:
            continue
        if lo <= GPU <= hi:
            yield key, mode


def _by_keys(keys, found, merge, none):
    """found's values for keys (st_dev, st_ino): by device and inode, else
    by inode alone (on an overlay file system stat() names the overlay's
    device and /proc/locks the layer's), the inode's values merged."""
    by_ino = {}
    for (_, _, ino), v in found.items():
        by_ino[ino] = merge(by_ino[ino], v) if ino in by_ino else v
    return [found.get((os.major(d), os.minor(d), ino), by_ino.get(ino, none)) for d, ino in keys]


def _read_locks(text):
    if text is None:
        with open("/proc/locks") as f:
            text = f.read()
    return text


def states(keys, text=None):
    """What each lock file's GPU byte (keys: (st_dev, st_ino)) is held for
    now: "timing" (exclusively), "shared", or "" (free), from /proc/locks
    (or `text` in its format)."""
    held = {}
    for key, mode in _gpu_locks(_read_locks(text)):
        was = held.get(key, "")
        held[key] = "timing" if mode == "WRITE" or was == "timing" else "shared"
    return _by_keys(keys, held, lambda a, b: "timing" if "timing" in (a, b) else b, "")


def holders(keys, text=None):
    """How many processes hold each lock file's GPU byte (keys as for
    states): a timing's one, or the shared steps in at once."""
    n = {}
    for key, _ in _gpu_locks(_read_locks(text)):
        n[key] = n.get(key, 0) + 1
    return _by_keys(keys, n, lambda a, b: a + b, 0)


def cpu_ticks():
    """(busy, all) jiffies of the machine's CPUs, from /proc/stat's first
    line: busy is all less idle and iowait."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - (v[4] if len(v) > 4 else 0), sum(v)


def _alive(pid):
    """Whether pid runs (a zombie has ended)."""
    fields = _stat(pid)
    return bool(fields) and fields[0] not in ("Z", "X")


def watch(pid, out, every=0.5):
    """Appends a line to `out` every `every` seconds until `pid` ends: the
    seconds since the start and each GPU's state (states), "-" for free;
    and one to `out`.host: the seconds, the host's CPU busy share (%) and
    each GPU's lock holders (holders)."""
    t0 = time.monotonic()
    keys = []
    last = cpu_ticks()
    # Beside it, OUT.host: the seconds, the host CPUs' busy share since
    # the last sample (%), and each GPU's lock holders.
    with open(out, "a") as f, open(out + ".host", "a") as h:
        while _alive(pid):
            if not keys:
                keys = lock_files(pid)
            if keys:
                with open("/proc/locks") as pl:
                    text = pl.read()
                at = time.monotonic() - t0
                f.write("%.2f %s\n" % (at, " ".join(s or "-" for s in states(keys, text))))
                f.flush()
                now = cpu_ticks()
                busy = 100.0 * (now[0] - last[0]) / max(now[1] - last[1], 1)
                last = now
                h.write("%.2f %.1f %s\n" % (at, busy, " ".join(
                    str(c) for c in holders(keys, text))))
                h.flush()
            time.sleep(every)


if __name__ == "__main__":
    if len(sys.argv) in (4, 5) and sys.argv[1] == "watch":
        watch(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]) if len(sys.argv) == 5 else 0.5)
        sys.exit(0)
    if len(sys.argv) != 2:
        sys.exit("usage: gpulock.py LOCKFILE   (lists its memory reservations)\n"
                 "       gpulock.py watch PID OUT [SECONDS]   (samples PID's GPU locks)")
    try:
        rows = ledger(sys.argv[1])
    except OSError as e:
        sys.exit("gpulock.py: %s: %s" % (sys.argv[1], e.strerror))
    for pid, ticket, held, waiting in rows:
        print("pid %d ticket %d: %.2f GiB reserved%s" % (
            pid, ticket, held / (1 << 30),
            ", waiting for %.2f GiB" % (waiting / (1 << 30)) if waiting else ""))
