"""stark_referee_data -- the data path of one pair of calls (run_pair): the
inputs (GEN), the output window, FETCH and COMPARE.  The calls themselves
are made and clocked by stark_referee_timing.

Tensor data never passes through the referee's hands beyond forwarding
bytes (stark_wire describes the data path): each worker makes the call's
inputs on its device from a seed derived per call, and the reference
worker -- trusted, it runs only problem code -- compares the candidate's
outputs with its own on its device.  The referee checks what the workers
report about the inputs and outputs (structure, dtype, shape, device,
aliasing, mutation, late writes) and turns the reference's comparison into
the verdict.
"""

import contextlib
import os
import time

import stark_memory
import stark_wire as W
from stark_referee_common import Verdict, derive, dict_field, int_field, number
from stark_referee_compare import RECHECK_SLACK
from stark_referee_workers import Stopped


# The reference's calls whose integrity facts (late writes, mutated inputs)
# are read before its timed calls go without (run_pair, fetch_ref): the
# correctness phase's trials, at least.
REF_FULL_FETCHES = 3
# A candidate's worker given less than this for a KernelBench trial's
# inputs (or 2.5 times the reference worker's time) is not blamed for
# missing the deadline (DataPath.kb_gen_late).
KB_GEN_FLOOR_S = 10.0
# What get_inputs() may peak at on the CPU, in times its inputs, before its
# peak is measured (DataPath.kb_serial).
KB_GEN_FACTOR = 3


class DataPath:
    """The part of Evaluation that moves a pair's inputs and outputs."""

    def send_gen(self, w, args, what):
        self.talk(w, what, w.chan.send_json, W.GEN, args, self.deadline)

    def recv_gen(self, w, what, host=False):
        """A worker's reply to GEN: the description of its inputs, checked
        for shape; returns (description, tensor bytes).  host: the reply to
        GEN host_only (kb_inputs_ahead): (None, its CPU tensors' bytes)."""
        def go():
            d = self.expect_ok(w, what)
            if w is self.ref and isinstance(d.get("kb_rand"), str):
                # How KernelBench's CPU inputs were drawn (stark_rand)
                self.res["env"]["kb_rand"] = d["kb_rand"][:300]
            if host:
                n = d.get("host_bytes")
                return None, n if type(n) is int and n >= 0 else 0
            n = d.get("placements")
            if w is self.ref and type(n) is int and 0 < n <= self.req["placements"]:
                self.placements = max(self.placements, n)
            self.note_mem(w.role, "gen", d)
            items = d.get("items")
            if not isinstance(items, list) or len(items) > W.MAX_ITEMS:
                raise W.WireError("bad input description")
            specs = [W.checked_spec(x, "input") for x in items
                     if isinstance(x, dict) and x.get("t") == "tensor"]
            if len(specs) > W.MAX_TENSORS:
                raise W.WireError("more than %d input tensors" % W.MAX_TENSORS)
            desc = {"items": items}
            if w is self.cand and isinstance(d.get("ipc"), list):
                # GEN "ipc_export" (stark_referee_ipc)
                desc["ipc"] = d["ipc"][:W.MAX_TENSORS]
            if w is self.ref and "delivered" in d:
                # GEN "deliver" (stark_referee_delivery)
                desc["delivered"] = d.get("delivered") is True
                desc["not_delivered"] = str(d.get("not_delivered"))[:200]
            return desc, sum(sp[2] for sp in specs)
        return self.talk(w, what, go)

    def gen_inputs(self, label, what, variant=False, slot=None, extra=None, light=False,
                   deliver=None, ipc=False):
        """Both workers make this call's inputs from a seed derived for it
        (in parallel: each on its own device), on memory placement `slot`
        where several are in use; the candidate's must be described
        exactly as the reference's.  extra: more GEN arguments ("centre":
        the precision probe's inputs; "kb" with "seed": a KernelBench
        trial's, from its public seed).  light: the reference's pair until
        its next GEN goes without its integrity facts (run_pair, fetch_ref:
        no weighted digests of large inputs, no late-write copy, no
        mutation check, no magnitudes).  deliver: None for an untimed pair;
        for a timed one, whether the candidate's inputs are delivered
        (stark_referee_delivery).  ipc: whether they are delivered on the
        GPU (stark_referee_ipc).  Returns the input bytes."""
        args = {"seed": derive(self.seed, label), "sizes": {}, "variant": bool(variant)}
        if slot is not None:
            args["slot"] = slot
            if self.place_cap is not None:
                args["places"] = self.place_cap
        if extra:
            args.update(extra)
        if "kb" in args and not args.get("from_host"):
            return self.gen_cpu_made(args, what)
        self.pair_delivered = False
        self.pair_ipc = False
        if ipc:
            got = self.gen_ipc(args, what, light)
            if got is not None:
                self.last_timed_desc = None
                self.pair_ipc = True
                return got
        if deliver:
            got = self.gen_delivered(args, what, light)
            if got is not None:
                self.last_timed_desc = got[0]
                self.pair_delivered = True
                return got[1]
        self.send_gen(self.ref, dict(args, light=True) if light else args, what)
        self.send_gen(self.cand, args, what)
        self.await_replies((self.ref, self.cand), what)
        ref_desc, nbytes = self.recv_gen(self.ref, what)
        cand_desc, _ = self.recv_gen(self.cand, what)
        self.check_gen(ref_desc, cand_desc, what)
        if deliver is not None:
            self.last_timed_desc = ref_desc
        return nbytes

    def gen_cpu_made(self, args, what):
        """A KernelBench trial's inputs, which each worker makes on the CPU
        as KernelBench's harness does (get_inputs() from its public seed:
        on level 1's sizes 15-20 s a trial for 6 GiB of torch.rand).  That
        is the evaluator's cost, not the candidate's: the wait moves the
        deadline on, as a wait in the GPU's queue does (queued, within its
        allowance), up to the reference worker's own time at it plus a
        half (the candidate's process could dawdle).  Where both workers'
        CPU copies would not fit the run jail's memory at once
        (kb_serial), the candidate's worker makes its copy after the
        reference's."""
        host = bool(args.get("host_only"))
        serial = not host and self.kb_serial()
        t0 = time.monotonic()
        ready = {}
        cand_t0 = t0
        try:
            with self.queued() if self.queue_allow_s > 0 else contextlib.nullcontext():
                if serial:
                    self.send_gen(self.ref, args, what)
                    self.await_replies((self.ref,), what, ready)
                    ref_desc, nbytes = self.recv_gen(self.ref, what)
                    # Its peak, made alone, decides the trials after it.
                    self.sample_host()
                    self.kb_ref_hwm = self.host_hwm.get("ref", 0)
                    cand_t0 = time.monotonic()
                    self.send_gen(self.cand, args, what)
                    self.await_replies((self.cand,), what)
                else:
                    # Both at once, each watched (await_replies: a worker the
                    # jail kills is accounted for at once).
                    for w in (self.ref, self.cand):
                        self.send_gen(w, args, what)
                    self.await_replies((self.ref, self.cand), what, ready)
                    ref_desc, nbytes = self.recv_gen(self.ref, what, host)
                cand_desc, _ = self.recv_gen(self.cand, what, host)
        except Verdict as v:
            raise self.kb_gen_late(v, ready, t0, cand_t0) from None
        ref_s = ready.get("ref", time.monotonic()) - t0
        spent = time.monotonic() - t0
        allowed = ref_s * (2.5 if serial else 1.5) + 1.0
        if spent > allowed and self.queue_allow_s > 0:
            self.queue_uncount(spent - allowed)
        self.kb_gen_s += spent
        self.kb_gens[serial] += 1
        self.res["env"]["kb_gen_ms"] = "%.0f" % (self.kb_gen_s * 1e3)
        if self.kb_gens[True]:
            self.res["env"]["kb_gen_order"] = "%d one worker after the other, %d both at once" % (
                self.kb_gens[True], self.kb_gens[False])
        if not host:
            self.check_gen(ref_desc, cand_desc, what)
        return nbytes

    def kb_inputs_ahead(self, seed, prec, what):
        """A KernelBench trial's inputs made on the CPU by both workers
        before the referee takes the GPU lock for the trial (GEN
        host_only, through gen_cpu_made's clock and blame), so the seconds
        that takes do not keep the GPU's other evaluations from timing; the
        trial's GEN then only moves them to the device (from_host).
        Returns whether it did: not where they are made one worker after
        the other (kb_serial: each worker's copy must reach the device,
        under the lock, before the other's is made)."""
        if self.kb_serial():
            return False
        self.gen_cpu_made({"seed": seed, "sizes": {}, "variant": False,
                           "kb": prec, "host_only": True}, what)
        return True

    def kb_gen_late(self, v, ready, t0, cand_t0):
        """A candidate's worker that missed the deadline while making
        KernelBench's inputs -- the problem's get_inputs(), the evaluator's
        cost -- is blamed only where it had the time the reference's worker
        took, 2.5 times over and at least KB_GEN_FLOOR_S: else the deadline
        came from what the evaluator spent before (its queue, earlier
        trials' inputs), a limit of its own (on one H100 with --jobs 4,
        23_Softmax's third trial was called the candidate's timeout after
        279 s of waiting for device memory)."""
        if v.status != "timeout" or v.check is not None or v.ours or "ref" not in ready:
            return v
        ref_s = ready["ref"] - t0
        given = self.deadline - cand_t0
        if given >= max(KB_GEN_FLOOR_S, 2.5 * ref_s):
            return v
        return Verdict("timeout", "%s, with %.1f s left for inputs the reference's worker "
                       "made in %.1f s" % (v.message, given, ref_s), v.log, ours=True)

    def kb_serial(self):
        """Whether a KernelBench trial's inputs are made one worker after
        the other (on a GPU, where stark's own inputs are made on the device
        and the run jail was not planned for two CPU copies).  get_inputs()
        may peak at several times its inputs on the CPU (level 1's
        93_masked_cumsum: 12.9 GiB a worker for 5 GiB of inputs, its mask
        drawn as int64), so where KB_GEN_FACTOR times the inputs in both
        workers could pass 80% of the jail's memory left to tensors, the
        first trial is made one after the other, and the reference worker's
        peak measured there (VmHWM) decides the others: both at once where
        two such peaks and the referee's stay within 90% of the jail's
        limit."""
        budget = self.host_budget()
        if not self.cuda or not budget:
            return False
        if self.kb_ref_hwm:
            limit = int_field(self.req, "host_mem_mib") << 20
            return 2 * self.kb_ref_hwm + self.host_hwm.get("referee", 0) > 0.9 * limit
        est = self.fp_estimated["in"] if self.fp_estimated else 0
        return 2 * KB_GEN_FACTOR * max(est, self.input_bytes) > 0.8 * budget

    def out_meta(self, hdr):
        """(kind, specs, devices) of a valid output header."""
        k, items = hdr.get("kind"), hdr.get("items")
        if k not in ("tensor", "seq") or not isinstance(items, list) or \
                len(items) > W.MAX_TENSORS or (k == "tensor" and len(items) != 1):
            raise W.WireError("bad output header")
        specs = [W.checked_spec(d, "output") for d in items]
        devices = [str(d.get("device", ""))[:32] for d in items]
        return k, specs, devices

    def fetch_ref(self, what, light=False, inwin=False):
        """The reference's output header (its bytes stay in its worker for
        the comparison): (kind, specs, devices) and its integrity facts.
        With `light` (a pair whose GEN said so: gen_inputs), its worker
        neither checks for late writes and mutated inputs nor sums
        magnitudes: the facts are those its earlier calls showed
        (ref_facts_seen), and the magnitudes the first plain call's.  With
        `inwin` (a delivered pair), the facts also say which of the
        candidate's inputs its call changed (cand_mutated)."""
        w = self.ref

        def go():
            if inwin:
                w.chan.send_json(W.FETCH, {"inwin": True}, self.deadline)
            else:
                w.chan.send(W.FETCH, b"", self.deadline)
            hdr = self.expect(w, W.OUT_HEADER, what, W.HEADER_MAX)
            if hdr.get("kind") in ("bad", "reject"):
                raise Verdict("error", "the problem's reference returned an unsupported "
                              "output (%s): %.300s" % (what, hdr.get("detail")))
            meta = self.out_meta(hdr)
            if sum(sp[2] for sp in meta[1]) > W.OUTPUT_MAX:
                raise Verdict("error", "the reference output is larger than %d GiB"
                              % (W.OUTPUT_MAX >> 30))
            facts = dict_field(hdr, "facts")
            if light:
                # What the reference did in any earlier call it may do in
                # this one (check_facts); aliasing is still seen afresh.
                facts = dict(self.ref_facts_seen, **facts)
            else:
                for k in ("late_write", "mutated"):
                    if facts.get(k):
                        self.ref_facts_seen[k] = facts[k]
                self.ref_full_fetches += 1
            mag = (self.plain_mag if light else
                   hdr.get("mag") if isinstance(hdr.get("mag"), list) else [])
            mag = [number(m) for m in mag[:len(meta[1])]]
            facts["mag"] = mag + [0.0] * (len(meta[1]) - len(mag))
            return meta, facts
        return self.talk(w, what, go)

    def fetch_compare(self, ref_meta, ref_facts, what, digest=None, tols=None, extra=None,
                      structure=None):
        """The candidate's outputs: its header is checked against the
        reference's (structure, dtype, shape and device) and its integrity
        facts against the reference's; its bytes, which it writes into the
        output window (stark_wire), are then read and compared by the
        reference worker while the candidate is stopped, one chunk of the
        window's capacity at a time (stream_compare).  digest: on GPUs, the
        digests of its outputs the candidate's CALL reply gave, which the
        reference checks against the bytes.  tols: (atol, rtol) per output,
        by default the request's for each dtype.  extra: more keys of the
        COMPARE header (stark_worker_outputs._judge); structure: the check
        of the candidate's output header against the reference's, by
        default check_structure.  Returns the reference's per-output
        statistics."""
        c = self.cand
        _, size = W.window_layout(ref_meta[1])
        if self.dwin_state is None and self.cuda and size >= stark_memory.DWINDOW_MIN and \
                W.window_on_device():
            self.open_device_window(what, size)
        win = min(size, self.window_cap)
        if win > self.window_size and self.dwin_state != "on":
            # Grown only (the window is sealed against shrinking); sparse
            # until the candidate writes.
            os.ftruncate(self.window_fd, win)
            self.window_size = win
        # Outputs larger than the window stream through two slots of half
        # its size (stream_compare; the capacity is at least WINDOW_MIN).
        slot = None
        if size > self.window_cap:
            slot = self.window_cap // 2 // W.WINDOW_ALIGN * W.WINDOW_ALIGN
        fetch = {"window": self.window_cap}
        if slot:
            fetch["slot"] = slot

        def head():
            c.chan.send_json(W.FETCH, fetch, self.deadline)
            hdr = self.expect(c, W.OUT_HEADER, what, W.HEADER_MAX)
            k = hdr.get("kind")
            if k == "bad":
                raise Verdict("incorrect", "the candidate's output is wrong (%s): %.300s"
                              % (what, hdr.get("detail")))
            if k == "reject":
                raise Verdict("rejected", "integrity check '%.60s' failed (%s): %.300s"
                              % (hdr.get("check"), what, hdr.get("detail")))
            return self.out_meta(hdr), dict_field(hdr, "facts")
        t = time.monotonic()
        meta, cand_facts = self.talk(c, what, head)
        try:
            (structure or self.check_structure)(meta, ref_meta, what)
        except BaseException:
            # The candidate writes its outputs after its header: that
            # message is read, so that the evaluation can go on (the other
            # verdict's trials) with the channel in step.
            self.talk(c, what, self.expect, c, W.OUT_WRITTEN, what)
            raise
        t = self.spend("fetch", t)
        if isinstance(ref_facts.get("cand_mutated"), list) and ref_facts["cand_mutated"]:
            # Delivered inputs: the reference's worker saw what the call did
            # to them (stark_worker_delivery).
            cand_facts = dict(cand_facts, mutated=ref_facts["cand_mutated"])
        self.check_facts(cand_facts, ref_facts, what)
        if slot:
            win = slot
        self.written(0, win, size, what)
        t = self.spend("write", t)
        if not ref_meta[1]:
            return []
        tols = tols or self.tolerances(ref_meta)
        hdr = {"items": [{"dtype": W.dtype_name(sp[0]), "shape": list(sp[1])}
                         for sp in ref_meta[1]],
               "tol": [list(t) for t in tols],
               "recheck": RECHECK_SLACK}
        if self.f64_skip():
            hdr["f64"] = self.f64_skip()
        hdr.update(self.judge_terms(tols))
        if extra:
            hdr.update(extra)
        if digest is not None:
            ok = isinstance(digest, list) and all(type(d) is int and abs(d) < (1 << 63)
                                                  for d in digest)
            hdr["digest"] = digest if ok else []
        reply = self.stream_compare(hdr, win, size, what, t, bool(slot))
        if isinstance(reply.get("window"), str):
            self.res["env"]["window"] = reply["window"][:200]
        if isinstance(reply.get("kernel"), str):
            self.res["env"]["compare_kernel"] = reply["kernel"][:400]
        if digest is not None and reply.get("digest_ok") is not True:
            raise Verdict("rejected", "integrity check 'output written after return' "
                          "failed (%s): the candidate's outputs are not those it had when "
                          "its call returned, so work went on outside the timed call" % what,
                          check="digest")
        return self.checked_results(reply, len(ref_meta[1]), what)

    def fd_to_worker(self, w, kind, msg, fd, what):
        """A request with a descriptor to a worker (the other stopped):
        (reply kind, reply)."""
        other = self.ref if w is self.cand else self.cand

        def give():
            w.chan.send_fd(kind, msg, fd, self.deadline)
            return w.chan.recv_json({W.OK: W.CONTROL_MAX, W.ERR: W.CONTROL_MAX},
                                    self.deadline)
        with Stopped(other):
            return self.talk(w, what, give)

    def open_device_window(self, what, out_bytes):
        """The output window on the device (STARK_OUTPUT_WINDOW=device), for
        outputs of out_bytes (stark_memory.device_window_size: their size,
        1 GiB at most): the reference's worker makes it and passes
        its descriptor (stark_wire.DeviceWindow), which this process hands
        on to the candidate's.  Once both map it, the chunks are copied
        on the device instead of through host memory; where either cannot
        (no room beside the reference's, a driver without the calls), the
        host window stays, and env output_window_device says why."""
        self.dwin_state = "off"
        env = self.res["env"]
        ref, cand = self.ref, self.cand
        cap = stark_memory.device_window_size(out_bytes)

        def make():
            ref.chan.send_json(W.DWINDOW, {"size": cap}, self.deadline)
            ref.chan.accept_fds = True
            try:
                kind, obj = ref.chan.recv_json({W.OK: W.CONTROL_MAX, W.ERR: W.CONTROL_MAX},
                                               self.deadline)
            finally:
                ref.chan.accept_fds = False
            return kind, obj, ref.chan.take_fd()
        with Stopped(cand):
            kind, obj, fd = self.talk(ref, "making the device window", make)
        size = obj.get("size")
        if kind != W.OK or fd < 0 or type(size) is not int or size < cap:
            if fd >= 0:
                os.close(fd)
            env["output_window_device"] = "not used: the reference's worker made none (%.200s)" % (
                obj.get("message") if kind != W.OK else "no descriptor")
            return
        try:
            ck, cobj = self.fd_to_worker(cand, W.DWINDOW, {"size": size}, fd,
                                         "mapping the device window")
        finally:
            os.close(fd)
        use = ck == W.OK
        with Stopped(cand):
            self.command(ref, W.DWINDOW, {"use": True} if use else {"drop": True},
                         "the device window")
        if use:
            # From now on the chunks are the device window's (its capacity:
            # the host window's grows no further than it had).
            self.dwin_state = "on"
            self.window_cap = cap
            env["output_window_device"] = "%d MiB, mapped by both workers" % (size >> 20)
        else:
            env["output_window_device"] = ("not used: the candidate's worker could not map "
                                           "it (%.200s)" % cobj.get("message"))

    def written(self, off, win, size, what):
        """The candidate's account of a chunk it wrote into the window: the
        bytes [off, off + win) of its outputs, or to their end."""
        c = self.cand
        want = min(win, size - off)

        def go():
            info = self.expect(c, W.OUT_WRITTEN, what)
            if info.get("bytes") != want:
                raise W.WireError("%r bytes written to the output window, expected %d"
                                  % (info.get("bytes"), want))
        self.talk(c, what, go)

    def stream_compare(self, hdr, win, size, what, t, slots=False):
        """The reference worker compares the chunk in the window, whose
        first chunk (`win` bytes) the candidate wrote at FETCH.  With
        `slots` (outputs larger than the window: fetch_compare), chunks of
        `win` bytes go in turn to the window's offsets 0 and win, the
        candidate writing the next (PUT) into one while the reference
        compares the last in the other.  On a GPU the two run at once (the
        copies from and to the device overlap): the reference judges its
        own copy of the chunk against the digests the candidate's call
        reply gave, so a running candidate cannot change what it judges.
        On the CPU, where the window is judged without digests, the
        candidate writes first and is stopped while the reference
        compares.  Returns the reference's last reply (its results)."""
        c, r = self.cand, self.ref
        off, msg, chunks, at = 0, dict(hdr), 0, 0
        overlap = slots and self.cuda
        while True:
            n = min(win, size - off)
            msg["off"], msg["len"] = off, n
            ahead = slots and off + n < size
            if slots:
                msg["at"] = at
            if ahead:
                self.talk(c, what, c.chan.send_json, W.PUT,
                          {"off": off + n, "at": win - at}, self.deadline)
                if not overlap:
                    self.written(off + n, win, size, what)
                    t = self.spend("write", t)
            try:
                with contextlib.nullcontext() if overlap else Stopped(c):
                    self.talk(r, what, r.chan.send_json, W.COMPARE, msg, self.deadline)
                    reply = self.talk(r, what, self.expect_ok, r,
                                      "the comparison of outputs (%s)" % what)
            except BaseException:
                if ahead and overlap:
                    # The candidate's account of the chunk it was writing
                    # is read, so that its channel stays in step.
                    with contextlib.suppress(Exception):
                        self.written(off + n, win, size, what)
                raise
            t = self.spend("compare", t)
            work = reply.get("work_ms")
            if isinstance(work, list) and len(work) == 2 and \
                    all(type(x) in (int, float) and 0 <= x < 1e9 for x in work):
                self.cmp_work[0] += 1
                self.cmp_work[1] += work[0]
                self.cmp_work[2] += work[1]
            if ahead and overlap:
                self.written(off + n, win, size, what)
                t = self.spend("write", t)
            chunks += 1
            nxt = reply.get("next")
            if nxt is None:
                break
            if type(nxt) is not int or nxt != off + n or nxt >= size:
                raise Verdict("error", "the reference worker asked for chunk %.40r of the "
                              "outputs after [%d, %d) of %d bytes (%s)"
                              % (nxt, off, off + n, size, what))
            off, msg, at = nxt, {}, win - at
        self.chunks = max(self.chunks, chunks)
        return reply

    def run_pair(self, label, what, order=("ref", "cand"), kind=None, variant=False,
                 timed=False, slot=None, repeat=False, gen=None, judge=None):
        """Both models on inputs made for this call, each called with the
        other stopped (on GPUs, a timed call after an L2 flush); outputs
        described, integrity facts checked, outputs compared by the
        reference worker.  With `repeat`, the reference runs forward a
        second time on the same inputs and says whether its outputs agree
        (check_repeat).  gen, judge: more GEN arguments and COMPARE header
        keys (gen_inputs, fetch_compare).  Returns (ns, replies, raw ns,
        mismatch message or None), the first three by role."""
        t_pair = time.monotonic()
        self.mem_step = what
        # The reference's timed calls skip its integrity facts once
        # REF_FULL_FETCHES of its calls have shown them (fetch_ref).
        light = (timed and kind is None and bool(self.plain_mag) and
                 self.ref_full_fetches >= REF_FULL_FETCHES)
        deliver = self.delivery_on(timed, kind) if timed else None
        self.input_bytes = max(self.input_bytes,
                               self.gen_inputs(label, what, variant, slot, gen, light,
                                               deliver, self.ipc_on(timed, kind)))
        ipc = self.pair_ipc
        # Whether this pair's inputs are delivered (gen_delivered may have
        # found that they cannot be).
        deliver = bool(deliver) and self.pair_delivered
        t = self.spend("gen", t_pair)
        ns, replies, raws = {}, {}, {}
        for role in order:
            w, other = (self.ref, self.cand) if role == "ref" else (self.cand, self.ref)
            args = None
            if timed and self.cuda:
                fl = {"flush": bool(self.req.get("l2_flush", True))}
                if ipc:
                    # The inputs written into the buffers of the worker
                    # about to be timed, then the flush; a candidate's
                    # worker about to be timed stays stopped until its
                    # clock starts.  (Before the reference's call it is
                    # stopped only inside the blocks below, as without
                    # delivery: stopped here, it stayed stopped after a
                    # reference timed second, and the pair's fetch waited
                    # on it until the deadline.)
                    fl["deliver"] = role
                    if role == "cand":
                        self.stop_wait(self.cand)
                with Stopped(self.cand):
                    self.command(self.ref, W.FLUSH, fl, "an L2 flush (%s)" % what)
                t = self.spend("flush", t)
                args = {"gate_us": self.spin_us}
            if repeat and role == "ref":
                args = dict(args or {}, repeat={
                    n: list(self.tolerance(dt)) for n, dt in W.DTYPES.items()})
                if self.repeat_room() is not None:
                    args["repeat_room"] = self.repeat_room()
            if deliver:
                ns[role], replies[role], raws[role] = self.delivered_call(role, what, kind,
                                                                          args)
            elif ipc:
                # Both workers' calls begin alike: continued from a stop as
                # the clock starts.
                self.stop_wait(w)
                with Stopped(other):
                    ns[role], replies[role], raws[role] = self.call(
                        w, "forward (%s)" % what, kind, args, stopped_start=True)
            else:
                with Stopped(other):
                    ns[role], replies[role], raws[role] = self.call(
                        w, "forward (%s)" % what, kind, args, net=timed and not self.cuda)
            t = self.spend("call", t)
            self.note_mem(role, "call", replies[role])
            if timed and self.cuda:
                self.note_launch(role, replies[role], self.note_gate(replies[role]))
        self.note_jit(replies.get("cand"), timed and "warm-up" not in what)
        ref_meta, ref_facts = self.fetch_ref(what, light, deliver or ipc)
        self.spend("fetch", t)
        self.output_bytes = max(self.output_bytes, sum(sp[2] for sp in ref_meta[1]))
        if variant:
            tols = self.tolerances(ref_meta, ref_facts["mag"])
        else:
            tols = self.tolerances(ref_meta)
            if not self.plain_mag:
                self.plain_mag = list(ref_facts["mag"])
        digest = replies["cand"].get("digest", []) if self.cuda and kind is None else None
        results = self.fetch_compare(ref_meta, ref_facts, what, digest, tols, judge)
        bad = self.compare(results, ref_meta, what, tols)
        self.pair_max_s = max(self.pair_max_s, time.monotonic() - t_pair)
        return ns, replies, raws, bad

    def check_repeat(self, rep):
        """The reference's two runs of the first trial on the same inputs
        (stark_worker_memory.repeat_check): outputs that differ beyond the
        tolerance make the problem impossible to judge (an error that says
        by how much); a difference within it is noted (env
        reference_repeat)."""
        env = self.res["env"]
        if not isinstance(rep, dict) or not isinstance(rep.get("equal"), bool):
            return
        if rep["equal"]:
            env["reference_repeat"] = "bitwise" + (" (by digest)" if rep.get("digest_only")
                                                   else "")
            return
        if rep.get("digest_only"):
            env["reference_repeat"] = ("not bitwise (by digest; no room on the device for "
                                       "a second output to say by how much)")
            return
        nbad = int_field(rep, "nbad")
        amax = number(rep.get("max_abs"))
        if nbad:
            why = self.ref_stochastic
            raise Verdict("error", "the problem's reference is not deterministic: run twice "
                          "on the same inputs (trial 1), its output %d differs in %d of %d "
                          "elements beyond the tolerance (max abs difference %.3g), so no "
                          "candidate can be judged against it%s"
                          % (int_field(rep, "index"), nbad, int_field(rep, "numel"), amax,
                             "; its modules that draw random numbers in training mode, "
                             "as the problem runs them: %s" % "; ".join(why) if why else ""))
        env["reference_repeat"] = ("not bitwise: two runs on the same inputs differ by up "
                                   "to %.3g, within the tolerance" % amax)
