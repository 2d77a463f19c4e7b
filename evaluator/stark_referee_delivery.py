"""stark_referee_delivery -- the referee's side of delivered inputs: on the
CPU, a timed pair's inputs reach the candidate's process only inside its
timed exchange (stark_worker_delivery says why and how).

For each timed pair after the first, the candidate's worker readies its
input tensors (views of its input window) without a seed while the
reference's makes the inputs and stages a copy (gen_delivered).  Each
timed call, the reference's as the candidate's, then begins with its
worker stopped while this process copies the staged inputs into that
worker's window, and the worker is continued once the clock has started
(delivered_call): both meet their inputs alike.

Trust: the windows are this process's (sealed memfds); the candidate's
worker maps only its own.  A candidate's worker that cannot map it is
rejected, never timed on inputs it made itself.  Where the reference's
worker cannot make it (the evaluator's own limits) or a pair's inputs do
not fit its layout (a problem whose inputs change shape from seed to
seed), the pair runs as before and env inputs_delivered says how many
pairs were delivered and why others were not.
"""

import mmap
import os
import time

import stark_wire as W
from stark_referee_common import Verdict
from stark_referee_timing import _runq_wait_ns, _unqueued
from stark_referee_workers import Stopped

STOP_WAIT_S = 1.0           # how long a worker's stop is waited for
GAP_START_NS = 50000        # the wait stopped before the first copy is measured
INWIN_MAX = 256 << 20       # inputs delivered up to this (held three times: staged, twice)


def _spin(ns):
    """Waits ns nanoseconds on this CPU (a sleep that short oversleeps)."""
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


class InputDelivery:
    """The part of Evaluation that delivers a timed pair's inputs."""

    inwin_state = None      # None (not tried), "on", or why it is off
    inwin_items = None      # the description the window was made for
    last_timed_desc = None  # the reference's description of the last timed pair's inputs
    delivered = [0, 0]      # timed pairs delivered, not delivered (after the first)
    pair_delivered = False  # whether this pair's inputs are (gen_inputs)
    copy_ns = GAP_START_NS  # how long the last copy into a window took
    inwin_size = 0          # bytes of one copy of the inputs
    inwin_maps = None       # the referee's mappings: the reference's window, the candidate's

    def delivery_on(self, timed, kind):
        """Whether this pair's inputs are delivered (opening the window on
        the first pair that can use it)."""
        if not timed or kind is not None or self.cuda or not W.input_delivery():
            return False
        if self.inwin_state is None and self.last_timed_desc is not None:
            self.open_input_window(self.last_timed_desc)
        return self.inwin_state == "on"

    def open_input_window(self, desc):
        """INWIN: the referee makes the two input windows for inputs of
        `desc` (the reference's description of the last timed pair's),
        maps both, and hands them on: the reference's worker maps its own
        and the candidate's, the candidate's worker its own."""
        env = self.res["env"]
        items = desc["items"]
        specs = [W.checked_spec(d, "input") for d in items if d.get("t") == "tensor"]
        _, size = W.window_layout(specs)
        self.inwin_state = "off"
        if size <= 0 or size > INWIN_MAX:
            env["inputs_delivered"] = ("no: inputs of %d bytes (delivered: 1 to %d MiB, held "
                                       "three times)" % (size, INWIN_MAX >> 20))
            return
        fds = []
        try:
            try:
                fds = [W.input_window(2 * size), W.input_window(size)]
                maps = [mmap.mmap(fds[0], 2 * size), mmap.mmap(fds[1], size)]
            except OSError as e:
                env["inputs_delivered"] = "no: no input windows of %d bytes (%s)" % (size, e)
                return
            msg = {"size": size, "items": items}
            for part, fd in (("own", fds[0]), ("cand", fds[1])):
                kind, obj = self.fd_to_worker(self.ref, W.INWIN, dict(msg, part=part), fd,
                                              "mapping the input windows")
                if kind != W.OK:
                    env["inputs_delivered"] = ("no: the reference's worker could not map "
                                               "them (%.200s)" % obj.get("message"))
                    return
            ck, cobj = self.fd_to_worker(self.cand, W.INWIN, dict(msg, part="own"), fds[1],
                                         "mapping the input window")
        finally:
            for fd in fds:
                os.close(fd)
        if ck != W.OK:
            raise Verdict("rejected", "the candidate's worker did not map the input window "
                          "(%.300s): its timed calls could not be given their inputs "
                          "inside the timed exchange" % cobj.get("message"),
                          check="input_window")
        self.inwin_state = "on"
        self.inwin_items = items
        self.inwin_size = size
        self.inwin_maps = maps

    def gen_delivered(self, args, what, light):
        """A timed pair's GEN with delivered inputs: the candidate's worker
        readies its views of the window (no seed), the reference's makes
        the inputs and says whether they can be written.  Returns (the
        reference's description, the input bytes), or None where they
        cannot (the caller makes the pair's inputs as before)."""
        cand, ref = self.cand, self.ref
        rargs = dict(args, deliver=True)
        if light:
            rargs["light"] = True
        self.send_gen(cand, {"delivered": True}, what)
        self.send_gen(ref, rargs, what)
        self.await_replies((ref, cand), what)
        ref_desc, nbytes = self.recv_gen(ref, what)
        cand_desc, _ = self.recv_gen(cand, what)
        if ref_desc.get("delivered") is not True:
            self.delivered[1] += 1
            self.note_delivery(str(ref_desc.get("not_delivered"))[:200])
            return None
        self.check_gen(ref_desc, cand_desc, what)
        self.delivered[0] += 1
        self.note_delivery()
        return ref_desc, nbytes

    def delivered_call(self, role, what, kind, args):
        """One timed call of a delivered pair; returns call()'s answer.

        The worker, the other stopped, is stopped; its inputs are copied
        from the reference's staging copy into its window; the clock
        starts and the worker is continued.  The round trip taken off its
        exchange is one made the same way (stopped, as long as the copy
        took, continued as the clock starts), just before: waking a
        process stopped that long cost 30-180 us on the development
        machine where a warm round trip cost 5.  Both workers' calls are
        made so, so that they meet their inputs alike."""
        w, other = (self.ref, self.cand) if role == "ref" else (self.cand, self.ref)
        n = self.inwin_size
        src = memoryview(self.inwin_maps[0])[:n]
        dst = (memoryview(self.inwin_maps[0])[n:2 * n] if role == "ref" else
               memoryview(self.inwin_maps[1])[:n])
        with Stopped(other):
            rt = self.cold_rt(w, self.copy_ns)
            self.cold_rts.setdefault(role, []).append(rt)
            self.stop_wait(w)
            t = time.perf_counter_ns()
            dst[:] = src
            self.copy_ns = time.perf_counter_ns() - t
            return self.call(w, "forward (%s)" % what, kind, args, net=True,
                             stopped_start=True, pre_rt=rt)

    def cold_rt(self, w, gap_ns):
        """A no-op round trip in ns (less the worker's run-queue waits) made
        as a delivered pair's call is: the worker settled, stopped, left
        stopped for gap_ns, continued as the clock starts.  It runs again
        after."""
        def go():
            self._settle(w, self.deadline)
            self.stop_wait(w)
            _spin(gap_ns)
            q0 = _runq_wait_ns(w.pid)
            t0 = time.perf_counter_ns()
            w.cont()
            w.chan.send(W.PING, b"", self.deadline)
            w.chan.recv({W.OK: 0}, self.deadline)
            t1 = time.perf_counter_ns()
            return _unqueued(t1 - t0, q0, _runq_wait_ns(w.pid))
        return self.talk(w, "a no-op round trip", go)

    def stop_wait(self, w):
        """Stops a worker and waits until its main thread is stopped (a
        signal is delivered when the kernel gets to it), at most
        STOP_WAIT_S."""
        w.stop()
        end = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < end:
            try:
                with open("/proc/%d/stat" % w.pid, "rb") as f:
                    st = f.read(512)
                state = st[st.rindex(b")") + 2:st.rindex(b")") + 3]
            except (OSError, ValueError):
                return
            if state in (b"T", b"t", b"Z", b"X"):
                return

    def note_delivery(self, why=None):
        env = self.res["env"]
        done, not_done = self.delivered
        text = "%d timed pairs" % done
        rts = {r: sorted(v)[len(v) // 2] / 1e3 for r, v in self.cold_rts.items() if v}
        if len(rts) == 2:
            # The round trips taken off, medians (diagnostics).
            text += ", round trips from a stop ref %.1f us, cand %.1f us, copy %.1f us" % (
                rts["ref"], rts["cand"], self.copy_ns / 1e3)
        if not_done:
            text += "; %d not (%s)" % (not_done, why or "see above")
        env["inputs_delivered"] = text[:300]
