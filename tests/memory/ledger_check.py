"""The memory ledger (evaluator/stark_memory.py) across real processes on one
lock file: admission by budget, order of arrival, a killed holder's
reservation released with its locks, resize, and the plan's arithmetic.
Prints TAP.  Usage: python3 tests/memory/ledger_check.py"""
import os
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator"))

import stark_memory as M  # noqa: E402

MIB = 1 << 20
n = 0
failed = 0


def ok(cond, what, *notes):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, what))
    if not cond:
        failed = 1
        for line in notes:
            print("# %s" % line)


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


def read_log(log):
    out = {}
    if os.path.exists(log):
        for line in open(log):
            pid, what, t0, t1 = line.split()
            out[int(pid)] = (what, float(t0), float(t1))
    return out


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

    print("1..%d" % n)
    return failed


if __name__ == "__main__":
    sys.exit(main())
