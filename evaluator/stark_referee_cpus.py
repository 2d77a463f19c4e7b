"""stark_referee_cpus -- CPUs kept for timing phases (STARK_TIMING_CPUS).

A timed call's exchange holds the worker's host time: on a GPU its
launches run before the gate lets the GPU start, and the referee's clock
bounds what the events claim (stark_referee_readings.judge_claims).  A
host busy with the other evaluations' work stretches that host time
without preempting the worker: the run-queue waits the clock already
leaves out do not show it.  On two H200s, beside two KernelBench jobs
making their inputs on the CPU, an honest 48 us Triton kernel's exchanges
ran 100-380 us beyond the reference's, and 7 of 23 timings were charged.

STARK_TIMING_CPUS="LIST;LIST;..." keeps CPUs for timing phases: list k
(a cpulist, "7,23" or "6-7"; empty: none) is GPU k's, k its device minor (nvidia-smi's
order) where the jail shows one GPU, else the device's index; an
evaluation on the CPU uses list 0.  Every evaluation keeps its referee
and workers off every listed CPU (set when the referee starts, inherited
by the workers it forks); the one in a timing phase, which holds its GPU
exclusively, moves its referee and every thread of both workers onto its
own list, and back when the phase ends.  Name both SMT siblings of a core
(lscpu -e), so that no other work shares the core.  Unset or "off":
nothing moves.  stark works the lists out (unset or "auto") before any
evaluator starts (pool/cpus.c), so the evaluator sees lists or "off".

A candidate may set its own threads' affinity (OpenMP pins them): it can
only leave the timing CPUs for its own timing, or crowd them from
another evaluation as it could crowd any CPU without them.
"""

import os
import re


def parse_cpulist(text):
    """The CPUs of a cpulist ("0-3,8,10-11"); ValueError if malformed."""
    cpus = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d{1,4})(?:-(\d{1,4}))?", part)
        if not m:
            raise ValueError("%r is not a CPU number or range" % part)
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ValueError("%r is a range that ends before it begins" % part)
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


def cpulist(cpus):
    """A set of CPUs written as a cpulist, ranges joined."""
    runs = []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join("%d-%d" % (a, b) if b > a else "%d" % a for a, b in runs)


def gpu_number(cuda, device, dev_dir="/dev"):
    """Which list of STARK_TIMING_CPUS is this evaluation's: the minor of
    the one GPU device node the jail shows, else the index in the request's
    device ("cuda:1"), else 0 (the CPU, or "cuda")."""
    if not cuda:
        return 0
    try:
        minors = [int(n[6:]) for n in os.listdir(dev_dir) if re.fullmatch(r"nvidia\d+", n)]
    except OSError:
        minors = []
    if len(minors) == 1:
        return minors[0]
    m = re.fullmatch(r"cuda:(\d+)", device or "")
    return int(m.group(1)) if m else 0


def plan(spec, number, allowed):
    """(mine, others, why): the CPUs of this evaluation's timing phases and
    the CPUs of everything else, both within `allowed`, or (None, None,
    why) where nothing is to move (why: "" unset, else the reason)."""
    if not spec or not spec.strip() or spec.strip() == "off":
        return None, None, ""
    try:
        # An empty list keeps no CPUs for that GPU (auto leaves the GPUs
        # CUDA_VISIBLE_DEVICES hides from stark so).
        lists = [parse_cpulist(x) if x.strip() else frozenset() for x in spec.split(";")]
    except ValueError as e:
        return None, None, "STARK_TIMING_CPUS=%r: %s" % (spec[:80], e)
    if number >= len(lists) or not lists[number]:
        return None, None, "STARK_TIMING_CPUS names %d list(s), none for GPU %d" % (
            len(lists), number)
    mine = lists[number] & allowed
    others = allowed - frozenset().union(*lists)
    if not mine:
        return None, None, "none of list %d's CPUs (%s) is allowed here (%s)" % (
            number, cpulist(lists[number]), cpulist(allowed))
    if not others:
        return None, None, "the lists take every CPU allowed here (%s)" % cpulist(allowed)
    return mine, others, ""


# Threads of a worker moved at most (a jail limits how many it may make).
THREADS_MAX = 4096


def threads_of(pid):
    """The thread ids of a process (its /proc task folder), at most
    THREADS_MAX; [] if gone."""
    try:
        return [int(t) for t in os.listdir("/proc/%d/task" % pid)[:THREADS_MAX]]
    except (OSError, ValueError):
        return []


def allowed_of(pid):
    """A process's main thread's CPUs as the kernel has them (its
    Cpus_allowed_list), or "" if unreadable."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


class TimingCpus:
    """The part of Evaluation that keeps timing phases on CPUs of their
    own.  Off (every method a no-op) unless STARK_TIMING_CPUS is set and
    usable; env.timing_cpus says what was done, or why not."""

    cpus_mine = cpus_others = None

    def cpus_start(self):
        """Before the workers are forked: this thread off every listed
        CPU, which the workers inherit."""
        spec = os.environ.get("STARK_TIMING_CPUS", "")
        if not spec or spec.strip() == "off":
            return
        env = self.res["env"]
        try:
            allowed = frozenset(os.sched_getaffinity(0))
        except OSError as e:
            env["timing_cpus"] = "off: %s" % e
            return
        number = gpu_number(self.cuda, self.req.get("device"))
        mine, others, why = plan(spec, number, allowed)
        if mine is None:
            env["timing_cpus"] = ("off: %s" % why)[:300]
            return
        try:
            os.sched_setaffinity(0, others)
        except OSError as e:
            env["timing_cpus"] = "off: %s" % e
            return
        self.cpus_mine, self.cpus_others = mine, others
        env["timing_cpus"] = "list %d, %s; outside timing %s" % (
            number, cpulist(mine), cpulist(others))

    def cpus_move(self, timing):
        """Moves the referee's thread and every thread of both workers onto
        the timing CPUs (timing: the phase begins) or back off them (it
        ended), and adds to env.timing_cpus where the kernel then has the
        workers' main threads.  Nothing when off."""
        if self.cpus_mine is None:
            return
        mask = self.cpus_mine if timing else self.cpus_others
        failed = 0
        for pid in [0] + [w.pid for w in self.workers if w.pid]:
            for tid in ([0] if pid == 0 else threads_of(pid)):
                try:
                    os.sched_setaffinity(tid, mask)
                except OSError:
                    failed += 1     # a thread that ended meanwhile
        seen = "/".join(allowed_of(w.pid) or "?" for w in self.workers if w.pid)
        if failed:
            seen += " (%d threads not moved)" % failed
        env = self.res["env"]
        env["timing_cpus"] = ("%s%s %s" % (
            env.get("timing_cpus", ""), "; workers in timing on" if timing else ", after it on",
            seen))[:600]
