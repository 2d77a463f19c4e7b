"""stark_referee_common -- what every part of the referee uses: the Verdict
it raises, the limits of the result, the seeds it derives, and the readers
of values a worker reported.

Verdicts are raised as Verdict exceptions from wherever the evidence is
found and turned into the result at the top (stark_referee.Evaluation.run).
What a worker reports is untrusted JSON: the readers below take a number
only where it is one (else NaN), a count only where it is a non-negative
int (else 0), an object only where it is one (else empty).
"""

import hashlib

import _stark

LIMITS = _stark.limits()


class Verdict(Exception):
    """A decision reached: status name, message, and optional log.  check
    names the integrity check that failed, for the few places that must
    tell an integrity rejection from other failures; ours marks a failure
    at a limit of the evaluator's own (its deadline, the run jail's memory,
    the device's memory plan), which KernelBench's trials leave undecided
    instead of blaming anyone (Verdicts.kernelbench_trials).  fields go
    into the result."""

    def __init__(self, status, message, log="", check=None, ours=False, **fields):
        super().__init__(message)
        self.status = status
        self.message = message
        self.log = log
        self.check = check
        self.ours = ours
        self.fields = fields


def cut(text, limit):
    """text within limit characters: its head and tail, and what was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2 - 32
    return text[:half] + "\n[... %d characters cut ...]\n" % (len(text) - 2 * half) + text[-half:]


def derive(master, label):
    """The seed of `label` (a call's inputs, the weights), derived from the
    master seed."""
    h = hashlib.sha256(b"stark-seed\0%d\0%s" % (master, label.encode()))
    return int.from_bytes(h.digest()[:8], "little") & ((1 << 63) - 1)


def number(v):
    """v as a float when it is a JSON number (not a bool), else NaN."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return float("nan")


def int_field(d, k):
    """d[k] when d is a dict and that is a non-negative int, else 0."""
    v = d.get(k) if isinstance(d, dict) else None
    return v if type(v) is int and v >= 0 else 0


def dict_field(d, k):
    """d[k] when d is a dict and that is a dict, else an empty dict."""
    v = d.get(k) if isinstance(d, dict) else None
    return v if isinstance(v, dict) else {}


def fmt_us(us):
    """Microseconds in words: us, ms or s, 4 significant figures; n/a for NaN."""
    if us != us:
        return "n/a"
    if us >= 1e6:
        return "%.3g s" % (us / 1e6)
    if us >= 1e3:
        return "%.4g ms" % (us / 1e3)
    return "%.4g us" % us
