"""The memory ledger (evaluator/stark_memory.py) across real processes on one
lock file: admission by budget, order of arrival, a killed holder's
reservation released with its locks, resize, growth that waits (in order,
without deadlock, up to a deadline), and the plan's arithmetic.  Prints
TAP.  Usage: python3 tests/memory/ledger_check.py"""
import os
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator"))
sys.path.insert(0, HERE)

from tap import done, ok  # noqa: E402
import stark_memory as M  # noqa: E402

MIB = 1 << 20


def child(path, need, limit, hold_s, log, wait_s=20.0):
    """Forks an evaluation stand-in: opens the lock file, waits to reserve
    `need` of `limit`, holds it hold_s seconds (forever if None), and logs
    "pid admitted t0 t1" (or "pid gave-up")."""
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        fd = os.open(path, os.O_RDWR)
        led = M.Ledger(fd)
        end = time.monotonic() + wait_s
        got = led.reserve(need, limit, lambda: time.monotonic() < end)
        t0 = time.monotonic()
        if got and hold_s is None:
            with open(log, "a") as f:
                f.write("%d admitted %.3f -1\n" % (os.getpid(), t0))
            while True:
                time.sleep(1)
        if got:
            time.sleep(hold_s)
        t1 = time.monotonic()
        led.release()
        with open(log, "a") as f:
            f.write("%d %s %.3f %.3f\n" % (os.getpid(), "admitted" if got else "gave-up", t0, t1))
    except BaseException as e:
        sys.stderr.write("child: %r\n" % e)
        code = 1
    finally:
        os._exit(code)


def grower(path, need, more, limit, pause, hold_s, log, wait_s=20.0):
    """Forks an evaluation stand-in that reserves `need`, after `pause`
    seconds grows to `more` (waiting up to wait_s), holds what it got
    hold_s seconds, and logs "pid how MiB t-grow t-got t-release" (how:
    "granted", or why it gave up)."""
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        led = M.Ledger(os.open(path, os.O_RDWR))
        led.reserve(need, limit, lambda: True)
        time.sleep(pause)
        end = time.monotonic() + wait_s
        t0 = time.monotonic()
        got = led.grow(more, limit, lambda: time.monotonic() < end)
        t1 = time.monotonic()
        with open(log, "a") as f:
            f.write("%d %s %d %.3f %.3f -1\n" % (os.getpid(), led.gave_up or "granted",
                                                 got // MIB, t0, t1))
        time.sleep(hold_s)
        t2 = time.monotonic()
        led.release()
        with open(log, "a") as f:
            f.write("%d released %d %.3f %.3f %.3f\n" % (os.getpid(), got // MIB, t0, t1, t2))
    except BaseException as e:
        sys.stderr.write("grower: %r\n" % e)
        code = 1
    finally:
        os._exit(code)


def read_log(log):
    """{pid: (what, figures...)}, a pid's last line."""
    out = {}
    if os.path.exists(log):
        for line in open(log):
            pid, what, *rest = line.split()
            out[int(pid)] = (what,) + tuple(float(x) for x in rest)
    return out


def grow_log(log):
    """{pid: (how, MiB got, t-grow, t-got)} from the growers' first lines."""
    out = {}
    if os.path.exists(log):
        for line in open(log):
            pid, how, mib, t0, t1, _ = line.split()
            out.setdefault(int(pid), (how, int(mib), float(t0), float(t1)))
    return out


def wait_for(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        time.sleep(0.02)


def main():
    d = tempfile.mkdtemp(prefix="stark-ledger-")
    path = os.path.join(d, "gpu.lock")
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    log = os.path.join(d, "log")
    limit = 100 * MIB

    # Three of 60 within 100: one at a time, none fails.
    pids = []
    for i in range(3):
        pids.append(child(path, 60 * MIB, limit, 0.4, log))
        time.sleep(0.05)
    for p in pids:
        os.waitpid(p, 0)
    got = read_log(log)
    spans = sorted(v[1:] for v in got.values() if v[0] == "admitted")
    overlap = any(a[1] > b[0] + 0.01 for a, b in zip(spans, spans[1:]))
    ok(len(spans) == 3 and not overlap, "three reservations of 60 in a budget of 100 run one "
       "after another, none fails", "log: %r" % got)

    # Two of 40 within 100 run side by side.
    os.unlink(log)
    pids = [child(path, 40 * MIB, limit, 0.5, log) for _ in range(2)]
    for p in pids:
        os.waitpid(p, 0)
    spans = sorted(v[1:] for v in read_log(log).values())
    ok(len(spans) == 2 and spans[1][0] < spans[0][1], "two reservations of 40 in 100 overlap",
       "spans: %r" % spans)

    # A holder killed with SIGKILL: its reservation goes with its locks.
    os.unlink(log)
    holder = child(path, 80 * MIB, limit, None, log)
    t_end = time.monotonic() + 5
    while not read_log(log) and time.monotonic() < t_end:
        time.sleep(0.02)
    fd = os.open(path, os.O_RDWR)
    seen = M.read_ledger(fd)
    ok(any(r[0] == holder and r[2] == 80 * MIB for r in seen), "the ledger shows the holder's "
       "80 MiB", "records: %r" % seen)
    waiter = child(path, 60 * MIB, limit, 0.0, log)
    time.sleep(0.5)
    early = read_log(log).get(waiter)
    os.kill(holder, signal.SIGKILL)
    t_kill = time.monotonic()
    os.waitpid(holder, 0)
    os.waitpid(waiter, 0)
    late = read_log(log).get(waiter)
    ok(early is None and late is not None and late[0] == "admitted" and
       late[1] - t_kill < 2.0, "a waiter is admitted once the holder is killed",
       "before the kill: %r, after: %r" % (early, late))
    ok(M.read_ledger(fd) == [], "no record is left once everyone is gone",
       "records: %r" % M.read_ledger(fd))

    # Order of arrival: a large waiter is not overtaken by later small ones.
    os.unlink(log)
    first = child(path, 50 * MIB, limit, 0.6, log)
    time.sleep(0.1)
    big = child(path, 90 * MIB, limit, 0.2, log)
    time.sleep(0.1)
    small = child(path, 30 * MIB, limit, 0.1, log)
    for p in (first, big, small):
        os.waitpid(p, 0)
    got = read_log(log)
    ok(all(p in got for p in (first, big, small)) and got[big][1] < got[small][1],
       "a later small reservation waits behind an earlier large one", "log: %r" % got)

    # A deadline while waiting: given up, no record left.
    os.unlink(log)
    holder = child(path, 90 * MIB, limit, 1.0, log)
    time.sleep(0.1)
    quitter = child(path, 50 * MIB, limit, 0.0, log, wait_s=0.3)
    os.waitpid(quitter, 0)
    got = read_log(log)
    ok(got.get(quitter, ("?",))[0] == "gave-up" and
       all(r[0] != quitter for r in M.read_ledger(fd)),
       "a wait past its deadline gives up and leaves no record", "log: %r" % got)
    os.waitpid(holder, 0)

    # resize: shrinking makes room at once; growing takes only what is free.
    led = M.Ledger(fd)
    ok(led.reserve(70 * MIB, limit, lambda: True), "admitted alone")
    os.unlink(log)
    waiter = child(path, 50 * MIB, limit, 0.0, log)
    time.sleep(0.3)
    ok(waiter not in read_log(log), "a waiter for 50 waits while 70 are held")
    led.resize(40 * MIB, limit)
    os.waitpid(waiter, 0)
    ok(read_log(log).get(waiter, ("?",))[0] == "admitted", "shrinking to 40 admits it")
    holder = child(path, 30 * MIB, limit, 1.0, log)
    time.sleep(0.2)
    ok(led.resize(90 * MIB, limit) == 70 * MIB, "growing to 90 beside 30 held stops at 70")
    os.waitpid(holder, 0)
    led.release()

    # grow: waits while a plain holder holds, granted once it releases.
    os.unlink(log)
    holder = child(path, 60 * MIB, limit, 1.0, log)
    wait_for(lambda: any(r[2] == 60 * MIB for r in M.read_ledger(fd)))
    glog = os.path.join(d, "grow")
    g = grower(path, 30 * MIB, 60 * MIB, limit, 0.0, 0.0, glog)
    wait_for(lambda: any(r[3] == 30 * MIB for r in M.read_ledger(fd)))
    seen = M.read_ledger(fd)
    ok(any(r[0] == g and r[2] == 30 * MIB and r[3] == 30 * MIB for r in seen),
       "a grower keeps its 30 while it waits for 30 more", "records: %r" % seen)
    # A newcomer's 10 would fit beside 60 and 30 held, but not before the
    # grower's wait: it comes later, so it queues behind it.
    late = child(path, 10 * MIB, limit, 0.0, log)
    for p in (holder, g, late):
        os.waitpid(p, 0)
    got, grown = read_log(log), grow_log(glog)
    ok(grown.get(g, ("?",))[:2] == ("granted", 60) and grown[g][3] >= got[holder][2],
       "the grower is granted 60 once the holder releases", "holder %r, grower %r" % (
           got.get(holder), grown.get(g)))
    ok(late in got and got[late][1] >= got[holder][2],
       "a later newcomer does not go ahead of a waiting grower", "holder %r, newcomer %r" % (
           got.get(holder), got.get(late)))

    # Two holders each growing beyond what the other leaves: the later
    # ticket gives up at once, keeping its 40; the earlier is granted once
    # it releases.
    os.unlink(glog)
    first = grower(path, 40 * MIB, 70 * MIB, limit, 0.3, 0.0, glog, wait_s=10.0)
    wait_for(lambda: any(r[0] == first for r in M.read_ledger(fd)))
    second = grower(path, 40 * MIB, 70 * MIB, limit, 0.3, 0.5, glog, wait_s=10.0)
    for p in (first, second):
        os.waitpid(p, 0)
    grown, ended = grow_log(glog), read_log(glog)
    a, b = grown.get(first, ("?",)), grown.get(second, ("?",))
    ok(b[:2] == ("deadlock", 40) and b[3] - b[2] < 1.0,
       "of two growers that would deadlock the later gives up at once, keeping its 40",
       "later %r" % (b,))
    ok(a[:2] == ("granted", 70) and a[3] >= ended[second][4],
       "the earlier is granted its 70 once the later releases",
       "earlier %r, later released %r" % (a, ended.get(second)))

    # A deadline while growing: what it held, its record standing, no wait.
    os.unlink(log)
    os.unlink(glog)
    holder = child(path, 60 * MIB, limit, 1.5, log)
    wait_for(lambda: any(r[2] == 60 * MIB for r in M.read_ledger(fd)))
    g = grower(path, 30 * MIB, 60 * MIB, limit, 0.0, 0.5, glog, wait_s=0.3)
    wait_for(lambda: g in grow_log(glog))
    seen = M.read_ledger(fd)
    grown = grow_log(glog)
    ok(grown.get(g, ("?",))[:2] == ("deadline", 30) and
       any(r[0] == g and r[2] == 30 * MIB and r[3] == 0 for r in seen),
       "a growth past its deadline keeps its 30, its record standing without a wait",
       "grower %r, records %r" % (grown.get(g), seen))
    for p in (holder, g):
        os.waitpid(p, 0)

    # Beyond the limit a growth can never fit: it returns at once.
    led = M.Ledger(fd)
    led.reserve(30 * MIB, limit, lambda: True)
    t0 = time.monotonic()
    got = led.grow(200 * MIB, limit, lambda: True)
    ok(got == 30 * MIB and led.gave_up == "limit" and time.monotonic() - t0 < 0.1,
       "a growth beyond the limit returns at once with what is held")
    led.release()
    os.close(fd)

    # The plan's arithmetic.
    G = M.GIB
    relu = {"in": 6 * G, "out": 6 * G, "weights": 0, "fwd": 6 * G}
    w = M.worker_need(relu)
    ok(12 * G < w < 14 * G, "a worker of an elementwise op on 6 GiB needs its input twice "
       "(%s)" % M.fmt_bytes(w))
    ok(M.places(relu, None, 32, 80 * G) == 1, "no extra placement for 6 GiB tensors")
    small = {"in": 16 * MIB, "out": 16 * MIB, "weights": 0, "fwd": 16 * MIB}
    ok(M.places(small, None, 32, 80 * G) == 32, "32 placements for 16 MiB tensors")
    ok(M.places(small, None, 32, 100 * MIB) < 4, "few placements where little is spare")
    corpus = {"in": 64 * MIB, "out": 64 * MIB, "weights": 0, "fwd": 64 * MIB}
    ok(M.places(corpus, corpus, 32, 60 * G) == 32, "32 placements for the GPU corpus's "
       "64 MiB tensors, as before the plan")
    huge = {"in": 40 * G, "out": 1 * G, "weights": 0, "fwd": 1 * G}
    ok(M.floor_need(huge) > M.budget(80 * G), "40 GiB of inputs cannot fit twice on 80 GiB")
    ok(M.over_allowance(5 * G, 1 * G) and not M.over_allowance(2 * G, 1 * G),
       "a candidate is over its allowance beyond twice the reference's plus 1 GiB")

    return done()


if __name__ == "__main__":
    sys.exit(main())
