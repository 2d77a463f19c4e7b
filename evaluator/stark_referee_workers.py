"""stark_referee_workers -- the referee's side of its workers: forking them,
stopping them, talking to them, and turning their failures into verdicts.

Each worker is forked through the C side (_stark.fork_worker), which closes
every descriptor but the worker's socket, the output window and stdio,
wipes the secret seed from the worker's copy of memory, and gives it a
process group of its own; the referee keeps a WorkerHandle.  While one
worker is timed the other is stopped (SIGSTOP to its process group:
Stopped), so a candidate's background threads can neither slow the
reference nor finish their work while the clock is not looking.

Everything a worker sends is capped JSON (stark_wire.Channel); its outputs'
bytes go through the output window (stark_referee_data).  A candidate
worker that misses the deadline has timed out, one that dies has crashed,
one that breaks the protocol is rejected; the same failures of the
reference worker are the evaluator's own ("error").
"""

import json
import os
import select
import shutil
import signal
import socket
import time

import _stark
import stark_fused
import stark_wire as W
import stark_worker
from stark_referee_common import LIMITS, Verdict, cut, dict_field

ENDING_WAIT_S = 1.0           # how long a worker that hung up may take to exit
PSTATS_WAIT_S = 5.0           # how long a worker's profile is waited for
# A worker's fault handler's account (crash_frames): read up to, kept up to,
# the innermost frame up to.
CRASH_READ_MAX = 64 << 10
CRASH_TEXT_MAX = 4000
CRASH_AT_MAX = 200


def py_profile_wanted():
    """Whether STARK_PY_PROFILE=1 asks for the processes' Python profiles."""
    return os.environ.get("STARK_PY_PROFILE") == "1"


def flush_context_wanted():
    """Where the reference's worker writes the L2 flush: "shared", PyTorch's
    own context in that worker (the default), or "own", a CUDA context of
    its own beside it (STARK_FLUSH_CONTEXT=own).  With a context of its
    own, the honest copies of KernelBench's GRUs read 1.12-1.22x on an
    H100 in 10 evaluations of 10, both workers launching slower (85-93
    against 75.5 ms of host time a call) and the reference's the slower;
    in PyTorch's context, 1.000x and 1.002x."""
    return "own" if os.environ.get("STARK_FLUSH_CONTEXT") == "own" else "shared"


def _signal_name(sig):
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "signal %d" % sig


class WorkerHandle:
    """A forked worker as the referee holds it: its pid and channel, whether
    it is stopped, and how it ended."""

    def __init__(self, role, pid, chan):
        self.role = role
        self.pid = pid
        self.chan = chan
        self.label = "reference worker" if role == "ref" else "candidate worker"
        self.stopped = False
        self.status = None
        self.t_fork = None          # time.monotonic() before it was forked
        # The memfd the worker's fault handler writes its Python frames to
        # when a fatal signal ends it (stark_worker.main), or None.
        self.crash_fd = None

    def release(self):
        """The channel and the crash memfd closed (the worker is gone)."""
        self.chan.close()
        if self.crash_fd is not None:
            os.close(self.crash_fd)
            self.crash_fd = None

    def crash_frames(self):
        """What the worker's fault handler wrote when a fatal signal ended
        it, up to its list of extension modules, in printable ASCII and at
        most CRASH_TEXT_MAX characters (the innermost frames), or "".  The worker's own
        word: a candidate's process could have written anything there."""
        if self.crash_fd is None:
            return ""
        try:
            raw = os.pread(self.crash_fd, CRASH_READ_MAX, 0)
        except OSError:
            return ""
        text = raw.decode("ascii", "replace").split("\nExtension modules:")[0]
        text = "".join(c if c == "\n" or " " <= c <= "~" else "?" for c in text).strip()
        return text[:CRASH_TEXT_MAX]

    def signal(self, sig):
        """To the worker's process group (what it spawned) and to the worker
        itself, in case it left the group."""
        for send in (os.killpg, os.kill):
            try:
                send(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self):
        if not self.stopped:
            self.signal(signal.SIGSTOP)
            self.stopped = True

    def cont(self):
        if self.stopped:
            self.signal(signal.SIGCONT)
            self.stopped = False

    def reap(self, block=False):
        if self.status is None:
            try:
                pid, st = os.waitpid(self.pid, 0 if block else os.WNOHANG)
            except ChildProcessError:
                pid, st = self.pid, 0
            if pid:
                self.status = st
        return self.status

    def kill(self):
        self.signal(signal.SIGKILL)
        self.reap(block=True)

    def fault_at(self):
        """The innermost Python frame of the faulting thread, from
        crash_frames ("file, line N in name"), or ""."""
        lines = self.crash_frames().splitlines()
        for i, line in enumerate(lines):
            if line.startswith("Current thread") or line.startswith("Stack (most recent"):
                for f in lines[i + 1:]:
                    f = f.strip()
                    if f.startswith("File "):
                        return f[5:][:CRASH_AT_MAX]
                    if not f:
                        break
        return ""

    def ending(self):
        """How the worker ended, in words (after it is gone)."""
        st = self.reap(block=False)
        # A process that closed its channel may take a while to be gone (a
        # GPU process releases its device first): up to ENDING_WAIT_S.
        t_end = time.monotonic() + ENDING_WAIT_S
        while st is None and time.monotonic() < t_end:
            time.sleep(0.01)
            st = self.reap(block=False)
        if st is None:
            return "closed its channel"
        if os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            return "killed by signal %d (%s)" % (sig, _signal_name(sig))
        return "exited with status %d" % os.WEXITSTATUS(st)


def _vm_hwm(path):
    """VmHWM of a /proc status file in bytes, or 0."""
    try:
        with open(path, "rb") as f:
            for line in f.read(4096).split(b"\n"):
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return 0


class Stopped:
    """Context manager: the given workers are stopped inside the block.  A
    worker already stopped when it begins stays stopped after it (a
    delivered pair's candidate: stark_referee_delivery)."""

    def __init__(self, *workers):
        self.workers = [w for w in workers if w is not None]
        self.stopped = []

    def __enter__(self):
        self.stopped = [w for w in self.workers if not w.stopped]
        for w in self.stopped:
            w.stop()

    def __exit__(self, *exc):
        for w in self.stopped:
            w.cont()
        return False


class Workers:
    """The part of Evaluation that spawns and talks to the workers."""

    py_prof = None      # the referee's cProfile.Profile (STARK_PY_PROFILE=1)

    def cfg(self):
        return {"device": self.req["device"], "stage": self.stage,
                "build_dir": self.build_dir, "build_mode": self.build_mode,
                "cubin_dir": self.tmp_cubin, "window_fd": self.window_fd,
                "solution_name": self.req["solution_name"] or "solution.py",
                "solution_src": self.req["solution_src"],
                "placements": self.req["placements"],
                "l2_flush": bool(self.req.get("l2_flush", True)),
                "flush_context": flush_context_wanted(),
                "device_window": self.cuda and W.window_on_device(),
                "input_window": not self.cuda and W.input_delivery(),
                "compare_kernel": self.cuda and stark_fused.wanted(),
                "language": self.language, "lang_dir": self.lang_dir,
                "jit_cache": self.jit_cache,
                "cand_exec": self.cand_exec,
                "precision": self.req.get("precision") or "fp32",
                "py_profile": py_profile_wanted()}

    def spawn(self, role):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            crash = os.memfd_create("stark-crash-" + role, 0)
        except OSError:
            crash = -1          # no account of a fault; the signal is still named
        t_fork = time.monotonic()
        try:
            pid = _stark.fork_worker(child.fileno(),
                                     -1 if self.window_fd is None else self.window_fd, crash)
        except BaseException:
            if crash >= 0:
                os.close(crash)
            raise
        if pid == 0:
            try:
                # The C side closed these descriptors; forget them without
                # closing whatever may reuse their numbers.
                parent.detach()
                for w in self.workers:
                    w.chan.sock.detach()
                # The referee's profiler is this copy's too; the worker
                # runs one of its own, and from Python 3.12 (sys.monitoring)
                # enabling a second one while it runs raises.
                if self.py_prof is not None:
                    self.py_prof.disable()
                for w in self.workers:
                    w.crash_fd = None
                stark_worker.main(child, role,
                                  dict(self.cfg(), crash_fd=crash if crash >= 0 else None),
                                  self.problem)
            finally:
                os._exit(70)
        child.close()
        w = WorkerHandle(role, pid, W.Channel(parent, pid))
        w.crash_fd = crash if crash >= 0 else None
        w.t_fork = t_fork
        w.chan.watch = self.sample_host
        self.workers.append(w)
        return w

    def respawn(self, role):
        """The worker of `role` killed and forked anew, before it ran
        anything but the evaluator's own code (its LOAD not yet sent:
        stark_referee_modes.match_modes)."""
        old = self.ref if role == "ref" else self.cand
        self.workers.remove(old)
        old.kill()
        old.release()
        w = self.spawn(role)
        if role == "ref":
            self.ref = w
        else:
            self.cand = w
        return w

    def sample_host(self):
        """The workers' peak resident host memory (VmHWM, which the kernel
        keeps), read while they live: what an evaluation's host memory
        comes to, and, when the jail's limit kills one, how much each had
        taken (stark_referee_memory)."""
        for w in self.workers:
            hwm = _vm_hwm("/proc/%d/status" % w.pid)
            if hwm:
                self.host_hwm[w.role] = max(self.host_hwm.get(w.role, 0), hwm)
        hwm = _vm_hwm("/proc/self/status")
        if hwm:
            self.host_hwm["referee"] = max(self.host_hwm.get("referee", 0), hwm)

    def host_text(self):
        """The processes' peak host memory, in MiB, as env.host_mem_mib
        gives it."""
        return ", ".join("%s %d" % (role, self.host_hwm[role] >> 20)
                         for role in ("referee", "ref", "cand") if role in self.host_hwm)

    def near_host_limit(self):
        """Whether the three processes' peaks came within a tenth of the
        run jail's memory limit: a worker SIGKILLed then was the OOM
        killer's victim, not a process that killed itself."""
        mib = self.req.get("host_mem_mib")
        if type(mib) is not int or mib <= 0:
            return False
        return sum(self.host_hwm.values()) >= 0.9 * (mib << 20)

    def await_replies(self, ws, what, ready=None):
        """Waits until each of the workers ws, all at work on one command,
        has begun its reply, or the deadline (the reads that follow then
        time out as they would have).  One that dies meanwhile fails at
        once, though another is still at work: a worker the jail's memory
        limit killed is accounted for (failed, kill_blame) while the jail
        gives the referee its grace, not after the other worker's reply --
        on the H200 the reference worker made 6 GiB of bf16 inputs on the
        CPU for seconds while the candidate worker lay dead, and the jail
        ended the evaluation before the referee could say whose the
        limit was.  ready, a dict, gets each worker's role and the
        monotonic time its reply began."""
        poller = select.poll()
        fds = {}
        for w in ws:
            fds[w.chan.sock.fileno()] = (w, False)
            if w.chan.pidfd >= 0:
                fds[w.chan.pidfd] = (w, True)
        for fd in fds:
            poller.register(fd, select.POLLIN)
        waiting = set(ws)
        while waiting:
            left = self.deadline - time.monotonic()
            if left <= 0:
                return
            for fd, _ in poller.poll(max(1, int(min(left, W.Channel.WATCH_S) * 1000))):
                w, gone = fds[fd]
                if gone:
                    raise self.failed(w, W.WorkerGone(), what)
                waiting.discard(w)
                poller.unregister(fd)
                if ready is not None:
                    ready[w.role] = time.monotonic()
            self.sample_host()

    def worker_profiles(self):
        """With STARK_PY_PROFILE=1, each live worker's Python profile
        (PSTATS) in env.py_profile_ref and py_profile_cand: where its wall
        time went (the candidate's is its own word).  Never fails."""
        if not py_profile_wanted():
            return
        for w in self.workers:
            if w.reap() is not None:
                continue
            try:
                t = time.monotonic() + PSTATS_WAIT_S
                w.chan.send(W.PSTATS, b"", t)
                kind, payload = w.chan.recv({W.OK: 1 << 16}, t)
                text = json.loads(payload).get("text")
            except Exception as e:      # a diagnostic: nothing to blame
                text = "unavailable: %s" % W.exc_text(e)
            if isinstance(text, str):
                self.res["env"]["py_profile_%s" % w.role] = text[:W.PROFILE_CHARS]

    def stop_workers(self):
        """Every worker killed, none waited for: once the verdict is made
        nothing a worker does can change it, and a GPU process takes a
        while (0.3 s on the H100) to release its device.  The result goes
        out meanwhile; teardown() waits for them after it."""
        for w in self.workers:
            w.signal(signal.SIGKILL)
        self.release_lock()

    def teardown(self):
        """After stop_workers(): the workers reaped, the private build
        folders removed."""
        for w in self.workers:
            w.kill()
            w.release()
        self.workers = []
        # Only now, with the workers gone and their device memory with them,
        # is the reservation given up.
        self.release_memory()
        for d in (self.tmp_cache, self.tmp_cubin, self.lang_dir):
            if d:
                shutil.rmtree(d, ignore_errors=True)
        if self.window_fd is not None:
            os.close(self.window_fd)
            self.window_fd = None

    def failed(self, w, exc, what):
        """Turns a failure talking to a worker into a Verdict."""
        if isinstance(exc, Verdict):
            return exc
        cand = w.role == "cand"
        if isinstance(exc, W.WorkerTimeout):
            w.kill()
            if w.stopped:
                # Waited on a worker the referee itself held stopped: no
                # reply could come, and the fault is the evaluator's, never
                # the candidate's.
                return Verdict("error", "the referee waited for the %s worker during %s "
                               "while it held that worker stopped (a fault of the "
                               "evaluator's)" % ("candidate's" if cand else "reference's",
                                                 what), ours=True)
            if cand:
                return Verdict("timeout", "the candidate did not finish %s within the "
                               "evaluation's wall-clock budget of %.0f s; its worker "
                               "was killed" % (what, self.wall_s))
            return Verdict("error", "the reference did not finish %s within the "
                           "wall-clock budget of %.0f s" % (what, self.wall_s), ours=True)
        if isinstance(exc, W.WorkerGone):
            how = w.ending()
            ours = False
            # A fatal signal: the worker's Python frames at the fault (its
            # fault handler's), the innermost named, all in the log.
            frames = w.crash_frames() if "killed by signal" in how and "SIGKILL" not in how else ""
            at = w.fault_at() if frames else ""
            if at:
                how += " at %s" % at
            if cand:
                # As a candidate's tracebacks: without the evaluator's frames.
                frames = "\n".join(f for f in frames.splitlines() if '"<stark-eval>/' not in f)
            if "SIGKILL" in how:
                # Perhaps the kernel's OOM victim: the run jail's account
                # says so, and this judgement says whose fault it was
                # (evalrun.c, oom_account).
                self.sample_host()
                self.res["env"]["oom_blame"] = self.kill_blame(w)
                ours = self.res["env"]["oom_blame"] == "evaluator" and self.near_host_limit()
                if ours:
                    how += (" (most likely the run jail's memory limit of %d MiB, the "
                            "evaluator's own, which STARK_RUN_MEM_MIB raises: peak host "
                            "memory in MiB %s)" % (
                                self.req.get("host_mem_mib"), self.host_text()))
            if cand:
                return Verdict("crashed", "candidate worker %s during %s" % (how, what),
                               frames, ours=ours)
            return Verdict("error", "reference worker %s during %s" % (how, what), frames,
                           ours=ours)
        if isinstance(exc, W.WireError):
            w.kill()
            if cand:
                return Verdict("rejected", "integrity check 'worker protocol' failed: "
                               "the candidate worker sent a malformed message during "
                               "%s (%s)" % (what, exc))
            return Verdict("error", "reference worker broke the protocol during %s: %s"
                           % (what, exc))
        return exc

    def expect(self, w, kind, what, cap=W.CONTROL_MAX):
        """The worker's next message, which must be of `kind` (JSON of at
        most cap bytes) or ERR, raised as the verdict it makes."""
        got, obj = w.chan.recv_json({kind: cap, W.ERR: W.CONTROL_MAX}, self.deadline)
        if got == kind:
            return obj
        raise self.worker_error(w, obj, what)

    def expect_ok(self, w, what):
        return self.expect(w, W.OK, what)

    def worker_error(self, w, err, what):
        etype = str(err.get("type", "Exception"))[:200]
        emsg = str(err.get("message", ""))[:4000]
        tb = cut(str(err.get("traceback", "")), LIMITS["log_max"] - 1024)
        oom = self.oom_verdict(w, err, what, etype, emsg, tb)
        if oom is not None:
            return oom
        if w.role == "ref":
            if err.get("phase") == "device" and err.get("type") == "NoDevice":
                return Verdict("error", emsg)
            if err.get("phase") == "inputs":
                return Verdict("error", "the problem's get_inputs() failed (%s): %s: %s"
                               % (what, etype, emsg), tb)
            return Verdict("error", "the problem's reference raised %s during %s: %s"
                           % (etype, what, emsg), tb)
        if err.get("phase") == "jail":
            # Before any of its code ran: the jail's, not the candidate's.
            return Verdict("error", emsg)
        log = ""
        if err.get("phase") == "build":
            self.build = dict_field(err, "build")
            fails = self.build.get("failures") or []
            log = "\n\n".join(str(f.get("log", "")) for f in fails
                              if isinstance(f, dict))
        # The machine's fault, where the referee finds it lacking
        # (stark_referee_build).
        v = self.build_failure(err, emsg, tb, log)
        if v is not None:
            return v
        if err.get("phase") == "build":
            if err.get("missing") is True:
                return Verdict("compile_error", emsg, cut(log, LIMITS["log_max"] - 1024))
            return Verdict("compile_error", "%s; the compiler's output is in the log"
                           % emsg, cut(log, LIMITS["log_max"] - 1024))
        if err.get("phase") == "inputs":
            return Verdict("runtime_error", "the candidate's worker raised %s while making "
                           "the inputs (%s): %s" % (etype, what, emsg), tb)
        sol = self.req["solution_name"] or "solution.py"
        if err.get("phase") in ("load", "setup"):
            if etype == "MissingModelNew":
                return Verdict("runtime_error", "the solution '%s' defines no class "
                               "ModelNew" % sol)
            return Verdict("runtime_error", "the solution '%s' raised %s while loading: %s"
                           % (sol, etype, emsg), tb)
        return Verdict("runtime_error", "the candidate raised %s during %s: %s"
                       % (etype, what, emsg), tb)

    def talk(self, w, what, fn, *args):
        try:
            return fn(*args)
        except (W.WorkerTimeout, W.WorkerGone, W.WireError) as e:
            raise self.failed(w, e, what)

    def command(self, w, kind, args, what):
        """A plain command and its OK reply (FLSH, TNOP, DEVI)."""
        def go():
            if args is None:
                w.chan.send(kind, b"", self.deadline)
            else:
                w.chan.send_json(kind, args, self.deadline)
            return self.expect_ok(w, what)
        return self.talk(w, what, go)
