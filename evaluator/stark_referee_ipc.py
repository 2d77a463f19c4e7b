"""stark_referee_ipc -- the referee's side of a GPU's delivered inputs:
by default (STARK_INPUT_DELIVERY=off keeps the old way), a timed pair's
inputs reach the candidate's worker only while it is stopped, written by
the reference's worker through CUDA IPC (stark_worker_ipc says why and
how).

Before any candidate code runs (after the launch modes are matched),
ipc_selftest has the candidate's worker export a buffer and the
reference's write it: where that fails, this environment cannot deliver
(env inputs_delivered says why) and timing goes on as before, unless it
ran out of device memory beside other evaluations: then it is judged
again alone (_ipc_ask).  Once it has worked, a candidate's
worker whose buffers cannot be opened or written is rejected: it is its
process that broke what worked.

For each timed pair: the candidate's worker makes its inputs from a
decoy seed and exports its buffers; the reference's makes them from the
pair's seed, stages a copy and maps the candidate's buffers (gen_ipc).
Before each timed call, the reference's worker writes the staging copy
into the buffers of the worker about to be timed and flushes the L2; the
candidate's worker is stopped through that and continued as its clock
starts (run_pair).  Inputs over IPC_MAX bytes, or whose description
depends on the seed, are made by each worker as before.
"""

import stark_memory as M
import stark_wire as W
from stark_referee_common import Verdict, derive

IPC_MAX = M.IPC_STAGE_MAX   # inputs delivered up to this (the reference stages a copy)


class IpcInputs:
    """The part of Evaluation that delivers a GPU's timed inputs."""

    ipc_state = None        # None (not asked), "on", or why it is off
    ipc_counts = (0, 0)     # timed pairs delivered, not
    pair_ipc = False        # whether this pair's inputs are delivered

    def _ipc_ask(self, w, args, what, oom_ours=False):
        """One IPC exchange: (True, reply) or (False, the error's text).
        A worker that ran out of device memory (its error's oom facts)
        met the evaluator's limit, never the candidate's doing: beside
        other evaluations it is judged again alone
        (stark_referee._again_alone), else with oom_ours it is the
        evaluator's error, else a failure returned like any other."""
        def go():
            w.chan.send_json(W.IPC, args, self.deadline)
            return w.chan.recv_json({W.OK: W.CONTROL_MAX, W.ERR: W.CONTROL_MAX}, self.deadline)
        kind, obj = self.talk(w, what, go)
        if kind == W.OK:
            return True, obj
        text = "%s: %s" % (obj.get("type"), str(obj.get("message"))[:200])
        if isinstance(obj.get("oom"), dict):
            n, held = 0, 0
            if self.ledger is not None and not self.req.get("mem_alone"):
                held, _, n = self.ledger.others()
            why = "CUDA IPC (%s) ran out of device memory" % what
            if n > 0:
                why += " beside %d other evaluations reserving %s" % (n, M.fmt_bytes(held))
                self.mem_retry = why
            if n > 0 or oom_ours:
                raise Verdict("error", "%s (the evaluator's limit, not the candidate's "
                              "doing): %.200s" % (why, text), ours=True)
        return False, text

    def ipc_selftest(self):
        """Whether this environment can deliver a GPU's inputs, tried
        between the two clean workers (no candidate code has run)."""
        if not (self.cuda and self.req["timing"] and W.input_delivery(device=True)):
            return
        what = "the delivery's self-test"
        ok, got = self._ipc_ask(self.cand, {"test_make": True}, what)
        if ok:
            ok, got = self._ipc_ask(self.ref, {"test": got}, what)
        if ok:
            ok, got = self._ipc_ask(self.cand, {"test_check": True}, what)
            if ok and got.get("ok") is not True:
                ok, got = False, "the bytes written did not arrive"
        self.ipc_state = "on" if ok else "off"
        if not ok:
            self.res["env"]["inputs_delivered"] = ("no: CUDA IPC between the workers failed "
                                                   "before the candidate loaded (%.200s)" % got)

    def ipc_on(self, timed, kind):
        return bool(timed and kind is None and self.cuda and self.ipc_state == "on")

    def gen_ipc(self, args, what, light):
        """A timed pair's GEN with delivered inputs; returns the input bytes,
        or None where this pair's cannot be delivered (the caller makes
        them as before).  Inputs the trials showed to be over IPC_MAX
        are not tried: the workers would make a staging copy and a
        decoy's inputs for nothing."""
        if self.input_bytes > IPC_MAX:
            self.ipc_state = "off"
            self.note_ipc("inputs of %d MiB (delivered: up to %d MiB)" % (
                self.input_bytes >> 20, IPC_MAX >> 20))
            return None
        decoy = dict(args, seed=derive(self.seed, "decoy-%d" % args["seed"]), ipc_export=True)
        rargs = dict(args, ipc_stage=True)
        if light:
            rargs["light"] = True
        self.send_gen(self.cand, decoy, what)
        self.send_gen(self.ref, rargs, what)
        self.await_replies((self.ref, self.cand), what)
        ref_desc, nbytes = self.recv_gen(self.ref, what)
        cand_desc, _ = self.recv_gen(self.cand, what)
        exported = cand_desc.pop("ipc", None)
        why = None
        if nbytes > IPC_MAX:
            why = "inputs of %d MiB (delivered: up to %d MiB)" % (nbytes >> 20, IPC_MAX >> 20)
        elif self.inputs_differ(ref_desc, cand_desc):
            why = "the inputs' description depends on the seed"
        if why is not None:
            self.ipc_state = "off"
            self.note_ipc(why)
            return None
        if not isinstance(exported, list):
            raise Verdict("rejected", "the candidate's worker did not export its input "
                          "buffers (%s), which worked before it loaded: its timed calls "
                          "could not be given their inputs while it was stopped" % what,
                          check="input_window")
        ok, got = self._ipc_ask(self.ref, {"open": exported}, what, oom_ours=True)
        if not ok:
            raise Verdict("rejected", "the candidate's input buffers could not be opened "
                          "(%s: %s), which worked before it loaded: its timed calls could "
                          "not be given their inputs while it was stopped" % (what, got),
                          check="input_window")
        self.ipc_counts = (self.ipc_counts[0] + 1, self.ipc_counts[1])
        self.note_ipc()
        return nbytes

    def inputs_differ(self, ref_desc, cand_desc):
        try:
            self.check_gen(ref_desc, cand_desc, "a decoy")
        except Verdict:
            return True
        return False

    def note_ipc(self, why=None):
        done, not_done = self.ipc_counts
        if why is not None:
            not_done += 1
            self.ipc_counts = (done, not_done)
        text = "%d timed pairs, on the GPU through CUDA IPC" % done
        if not_done:
            text += "; %d not (%s)" % (not_done, why or "see above")
        self.res["env"]["inputs_delivered"] = text[:300]
