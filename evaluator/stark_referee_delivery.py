"""stark_referee_delivery -- the referee's side of delivered inputs: on the
CPU, a timed pair's inputs reach the candidate's process only inside its
timed exchange (stark_worker_delivery says why and how).

For each timed pair after the first, the candidate's worker readies its
input tensors (views of the input window) without a seed while the
reference's makes the inputs (gen_delivered); each timed call then
begins with its worker stopped, waiting about as long as the candidate's
worker waits while the reference's writes its inputs, and continued once
the clock has started (delivered_call).

Trust: the window is the reference's (a sealed memfd it made); the
candidate only maps it.  A candidate's worker that cannot map it is
rejected, never timed on inputs it made itself.  Where the reference's
worker cannot make it (the evaluator's own limits) or a pair's inputs do
not fit its layout (a problem whose inputs change shape from seed to
seed), the pair runs as before and env inputs_delivered says how many
pairs were delivered and why others were not.
"""

import os
import time

import stark_wire as W
from stark_referee_common import Verdict
from stark_referee_timing import _runq_wait_ns, _unqueued
from stark_referee_workers import Stopped

STOP_WAIT_S = 1.0           # how long a worker's stop is waited for
GAP_START_NS = 50000        # the wait stopped before the first write is measured


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
    deliver_gap_ns = GAP_START_NS  # how long the last write of inputs took

    def delivery_on(self, timed, kind):
        """Whether this pair's inputs are delivered (opening the window on
        the first pair that can use it)."""
        if not timed or kind is not None or self.cuda or not W.input_delivery():
            return False
        if self.inwin_state is None and self.last_timed_desc is not None:
            self.open_input_window(self.last_timed_desc)
        return self.inwin_state == "on"

    def open_input_window(self, desc):
        """INWIN: the reference's worker makes the window for inputs of
        `desc` (its description of the last timed pair's), the candidate's
        maps it."""
        env = self.res["env"]
        items = desc["items"]
        specs = [W.checked_spec(d, "input") for d in items if d.get("t") == "tensor"]
        _, size = W.window_layout(specs)
        self.inwin_state = "off"
        if size <= 0:
            env["inputs_delivered"] = "no: the inputs hold no tensor bytes"
            return
        msg = {"size": size, "items": items}
        kind, obj, fd = self.fd_from_ref(W.INWIN, msg, "making the input window")
        if kind != W.OK or fd < 0:
            if fd >= 0:
                os.close(fd)
            env["inputs_delivered"] = ("no: the reference's worker made no input window "
                                       "(%.200s)" % (obj.get("message") if kind != W.OK
                                                     else "no descriptor"))
            return
        try:
            ck, cobj = self.fd_to_cand(W.INWIN, msg, fd, "mapping the input window")
        finally:
            os.close(fd)
        if ck != W.OK:
            raise Verdict("rejected", "the candidate's worker did not map the input window "
                          "the reference's worker made (%.300s): its timed calls could not "
                          "be given their inputs inside the timed exchange"
                          % cobj.get("message"), check="input_window")
        self.inwin_state = "on"
        self.inwin_items = items

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

        Each worker is made to wait stopped for about as long as the
        candidate's worker waits while its inputs are written, and is
        continued once the clock has started; the round trip taken off its
        exchange is one made the same way (stop, the same wait, continue
        and a no-op), just before.  Waking a process stopped for that long
        cost 30-180 us on the development machine where a warm round trip
        cost 5: a round trip from a warm worker would charge the candidate
        that difference.  The candidate's inputs are written after its
        round trip and before its call, so that it first runs with them
        inside its timed exchange."""
        if role == "cand":
            with Stopped(self.ref):
                rt = self.cold_rt(self.cand, self.deliver_gap_ns)
                self.stop_wait(self.cand)
            t = time.perf_counter_ns()
            self.command(self.ref, W.INWIN, {"write": True}, "writing the inputs (%s)" % what)
            with Stopped(self.ref):
                self.deliver_gap_ns = time.perf_counter_ns() - t
                return self.call(self.cand, "forward (%s)" % what, kind, args, net=True,
                                 stopped_start=True, pre_rt=rt)
        with Stopped(self.cand):
            rt = self.cold_rt(self.ref, self.deliver_gap_ns)
            self.stop_wait(self.ref)
            _spin(self.deliver_gap_ns)
            return self.call(self.ref, "forward (%s)" % what, kind, args, net=True,
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
        if not_done:
            text += "; %d not (%s)" % (not_done, why or "see above")
        env["inputs_delivered"] = text[:300]
