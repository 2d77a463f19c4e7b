"""TAP for the checks of tests/memory: ok() prints one line a check (and
the notes of one that failed), done() the plan line and the exit status."""
import sys

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
    return bool(cond)


def done():
    """Prints the plan; returns the exit status (1 if a check failed)."""
    print("1..%d" % n)
    sys.stdout.flush()
    return failed
