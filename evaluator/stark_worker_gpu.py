"""stark_worker_gpu -- a worker's GPU machinery for timing: the timed call
(the gate, CUDA events and the guard), memory placements and their scan,
and, in the reference worker only, the L2 flush and the facts about the
device (the L2's size, the copy rate, clocks through NVML).

Both workers time their calls with this same code, so reference and
candidate are measured alike; what the timing rests on beyond the
candidate's own word -- the flush, the device's state -- is done
by the reference worker, which runs only problem code.  The referee's side
is stark_referee_timing.
"""

import contextlib
import ctypes
import time

import torch

import stark_cuda
import stark_tensors as T
import stark_wire as W

FLUSH_L2_TIMES = 2            # an L2 flush writes this many times the L2's size
BANDWIDTH_BYTES = 256 << 20   # buffer of the copy-rate measurement
GATE_MAX_US = 60000           # the longest gate a CALL may ask for
LAUNCHES_MAX = 2048           # launches a TIMED_NOOP may ask for (the launch mode)
MODE_REPS_MAX = 32            # reference forwards a TIMED_NOOP {"model"} may time
MODE_WARMUP = 3               # ... after that many untimed ones
MODE_SEED = 0x5EED0DE         # the public seed of their weights and inputs
WARM_JOIN_S = 30.0            # ... after waiting this long at most for the start-up's warm-up
PLACEMENT_BYTES = 4 << 30    # cap on the input copies of placements (_slot)
SCAN_CALLS = 1               # forward calls per placement in a SCAN
SCAN_SPIN_MAX_US = 60000     # cap on the spin each of a SCAN's calls queues behind

# The gate a timed call queues behind (see _timed): a grid whose blocks take
# every thread slot of every SM, so that no kernel of this context, on any
# stream, starts before it ends.  It ends when the host releases it --
# block 0's first thread sees the generation `gen` in a word of pinned host
# memory and passes it on through a word of device memory to the other
# blocks' first threads -- or `ns` after it started, whichever comes first.
# The first threads sleep half a microsecond between readings and the
# others wait at their block's barrier, so the gate draws little power.
# PTX, so the driver builds it for whatever GPU this is, without NVRTC.
GATE_PTX = b"""\
.version 7.0
.target sm_75
.address_size 64

.visible .entry stark_gate(.param .u64 g_host, .param .u64 g_dev, .param .u32 g_gen,
                           .param .u64 g_ns)
.maxntid 1024, 1, 1
{
	.reg .pred %p<6>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<8>;
	.shared .u32 s_go;

	ld.param.u64 %rd1, [g_host];
	ld.param.u64 %rd2, [g_dev];
	ld.param.u32 %r1, [g_gen];
	ld.param.u64 %rd3, [g_ns];
	mov.u64 %rd4, %globaltimer;
	add.s64 %rd5, %rd4, %rd3;
	mov.u32 %r2, %tid.x;
	mov.u32 %r3, %ctaid.x;
	setp.eq.u32 %p1, %r2, 0;
	setp.eq.u32 %p2, %r3, 0;
$L_poll:
	@!%p1 bra $L_bar;
	@%p2 ld.volatile.u32 %r4, [%rd1];
	@!%p2 ld.volatile.u32 %r4, [%rd2];
	setp.eq.u32 %p3, %r4, %r1;
	@%p3 bra $L_seen;
	mov.u64 %rd6, %globaltimer;
	setp.ge.u64 %p4, %rd6, %rd5;
	selp.u32 %r5, 1, 0, %p4;
	st.shared.u32 [s_go], %r5;
	@!%p4 nanosleep.u32 500;
	bra $L_bar;
$L_seen:
	@%p2 st.volatile.u32 [%rd2], %r1;
	mov.u32 %r5, 1;
	st.shared.u32 [s_go], %r5;
$L_bar:
	bar.sync 0;
	ld.shared.u32 %r6, [s_go];
	bar.sync 0;
	setp.eq.u32 %p5, %r6, 0;
	@%p5 bra $L_poll;
	ret;
}
\0"""


class GpuTiming:
    """The part of Worker that times calls on a GPU and serves FLUSH, SCAN,
    TIMED_NOOP and DEVICE_INFO."""

    # -- timed calls -----------------------------------------------------
    def _events(self):
        if self.events is None:
            self.events = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            self.events.append(torch.cuda.Event())
        return self.events

    def _gate(self):
        """The gate kernel (GATE_PTX), loaded into this worker's own context
        at first use: {"fn", "blocks", "threads", "host" (the pinned word,
        a ctypes c_uint32), "host_dev" and "dev" (device addresses of the
        two words), "gen"}, or None (why in gate_error).  Blocks of
        `threads` threads, enough to take every thread slot of every SM."""
        if self.gate is None and self.gate_error is None:
            try:
                lib = stark_cuda._cuda()
                torch.cuda.synchronize(self.device)     # PyTorch's context current
                mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
                stark_cuda._check(lib.cuModuleLoadData(ctypes.byref(mod), GATE_PTX),
                                  "cuModuleLoadData(gate)")
                stark_cuda._check(lib.cuModuleGetFunction(ctypes.byref(fn), mod,
                                                          b"stark_gate"),
                                  "cuModuleGetFunction(stark_gate)")
                host, host_dev = ctypes.c_void_p(), ctypes.c_uint64()
                # CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP
                stark_cuda._check(lib.cuMemHostAlloc(ctypes.byref(host), ctypes.c_size_t(64),
                                                     ctypes.c_uint(0x03)),
                                  "cuMemHostAlloc(gate)")
                stark_cuda._check(lib.cuMemHostGetDevicePointer_v2(
                    ctypes.byref(host_dev), host, ctypes.c_uint(0)),
                    "cuMemHostGetDevicePointer(gate)")
                word = ctypes.c_uint32.from_address(host.value)
                word.value = 0
                dev = torch.zeros(1, dtype=torch.int32, device=self.device)
                props = torch.cuda.get_device_properties(self.device)
                per_sm = int(getattr(props, "max_threads_per_multi_processor", 0) or 2048)
                threads = next((t for t in (1024, 768, 512, 256) if per_sm % t == 0), 1024)
                self.gate = {"fn": fn, "threads": threads,
                             "blocks": props.multi_processor_count * max(per_sm // threads, 1),
                             "host": word, "host_dev": host_dev.value, "dev": dev,
                             "gen": 0}
                torch.cuda.synchronize(self.device)
            except Exception as e:
                self.gate_error = W.exc_text(e)[:300]
        return self.gate

    def _launch_gate(self, gate, gate_us, stream):
        """The gate on `stream`, for at most gate_us microseconds (and
        GATE_MAX_US): its generation once launched (the host ends it by
        writing that to gate["host"]), else 0 (why in gate_error)."""
        gate_us = min(gate_us, GATE_MAX_US)
        gate["gen"] += 1
        args = (ctypes.c_uint64(gate["host_dev"]), ctypes.c_uint64(gate["dev"].data_ptr()),
                ctypes.c_uint32(gate["gen"]), ctypes.c_uint64(gate_us * 1000))
        params = (ctypes.c_void_p * 4)(*[ctypes.addressof(a) for a in args])
        rc = stark_cuda._cuda().cuLaunchKernel(gate["fn"], gate["blocks"], 1, 1,
                                               gate["threads"], 1, 1, 0,
                                               ctypes.c_void_p(stream.cuda_stream),
                                               params, None)
        if rc != 0:
            self.gate_error = "cuLaunchKernel(stark_gate): error %d" % rc
            return 0
        return gate["gen"]

    def _timed(self, fn, gate_us=None):
        """Runs fn() between CUDA events on the current stream, then a
        device-wide synchronize and a guard event: start->end is what the
        stream saw, start->guard also covers work left on side streams or
        launched by host threads.  Returns (fn's result, timing dict).

        With gate_us, the start event and fn's launches queue up behind a
        gate on the same stream (GATE_PTX): a kernel of this worker's own
        context that takes every thread slot of every SM until the host
        releases it, once fn has returned and the end event is recorded,
        or for gate_us microseconds at most (the referee sizes that to
        outlast the model's launching; fn may synchronize).  The launches
        then run back to back, so start->end is the GPU's time for fn, not
        the host's time to launch it; and a kernel fn sends to a stream of
        its own cannot run beside the gate, before the start event, since
        no SM has room for it.  The host releases the gate as soon as it
        can because the candidate's process could put a gate of its own in
        this one's place, one that leaves room beside it: whatever ran
        there ran while the host was in fn, which the referee's clock sees
        (a gate of fixed length hid as much as its length from it).  The
        gate is in the caller's own context because the GPU timeslices
        between contexts: behind a spin in a second context, the timed
        span took in the slices of the spin left after the call's work.
        The reply's "gate_us" says what was launched (0 with "gate_error"
        if none).  Without a gate, a first event, waited for, makes any
        switch of context before the start event, and the host's launch
        time counts."""
        dev = self.device
        clock = time.perf_counter
        gate = self._gate() if type(gate_us) is int and gate_us > 0 else None
        h0 = clock()
        torch.cuda.synchronize(dev)
        stream = torch.cuda.current_stream(dev)
        start, end, guard, switch = self._events()
        gen = self._launch_gate(gate, gate_us, stream) if gate is not None else 0
        if not gen:
            switch.record(stream)
            switch.synchronize()
        h1 = clock()
        try:
            start.record(stream)
            out = fn()
            end.record(stream)
        finally:
            if gen:
                gate["host"].value = gen
        h2 = clock()
        torch.cuda.synchronize(dev)
        h3 = clock()
        guard.record(stream)
        guard.synchronize()
        info = {"ev_us": start.elapsed_time(end) * 1e3,
                "guard_us": start.elapsed_time(guard) * 1e3}
        h4 = clock()
        # Where the host's time went (diagnostics only): before the start
        # event, in fn, in the synchronize, in the guard and the readings.
        info["host_us"] = [round((b - a) * 1e6, 1) for a, b in
                           ((h0, h1), (h1, h2), (h2, h3), (h3, h4))]
        if type(gate_us) is int and gate_us > 0:
            info["gate_us"] = min(gate_us, GATE_MAX_US) if gen else 0
            if not gen and self.gate_error:
                info["gate_error"] = self.gate_error
        return out, info

    def cmd_timed_noop(self, args=None):
        """CALL's timing steps around nothing; with {"launches": n}, around
        n launches of one small kernel, queued behind a gate so that they
        run back to back: the GPU's time for them is this process's launch
        mode (on an H200, 600 launches read 934-984 us in some processes
        and 1025-1058 us in others, and a process keeps its mode; a
        launch-bound model's forward follows it, 1507-1527 against
        1590-1605 us: scripts/probe-launch-mode --variants=calib)."""
        if self.device.type != "cuda":
            return {}
        if isinstance(args, dict) and args.get("model") is True:
            return self._timed_reference(args.get("reps"))
        n = args.get("launches") if isinstance(args, dict) else None
        if type(n) is not int or not 0 < n <= LAUNCHES_MAX:
            return self._timed(lambda: None)[1]
        if self.warming is not None:
            # Not beside the start-up's own first uses of CUDA.
            self.warming.join(WARM_JOIN_S)
        if self.launch_buf is None:
            self.launch_buf = torch.zeros(256, device=self.device)
        buf = self.launch_buf

        def launches():
            for _ in range(n):
                buf.add_(1.0)
        return self._timed(launches, gate_us=min(GATE_MAX_US, 2000 + 20 * n))[1]

    def _timed_reference(self, reps):
        """See _timed_reference_run; out-of-memory errors met there are the
        evaluator's (the launch-mode probe builds a model of its own), not the forward's
        (mem_facts' "ooms")."""
        with self.ours_oom():
            return self._timed_reference_run(reps)

    def _timed_reference_run(self, reps):
        """TIMED_NOOP {"model": true, "reps": n}: this worker's launch mode
        on the problem's own reference model.  Asked for before any
        candidate code is loaded (the referee's match_modes), and refused
        once a model is: the reference's Model built here from a public
        seed (MODE_SEED), on inputs of that seed, timed n times as a timed
        call is (behind a gate, its launches back to back), then dropped.
        A launch-bound model's time follows its process's launch mode
        more closely than launches of one small kernel do: on an H100, two
        level-3 models whose workers' small-kernel readings matched within
        1.3% read 1.044x and 1.024x as honest copies.
        {"model_us": [n readings]} or {"model_error": why}."""
        if self.model is not None:
            return {"model_error": "a model is loaded already"}
        if type(reps) is not int or not 0 < reps <= MODE_REPS_MAX:
            return {"model_error": "reps must be 1-%d" % MODE_REPS_MAX}
        if self.warming is not None:
            self.warming.join(WARM_JOIN_S)
        model = items = None
        try:
            model, _ = self._construct(self.problem.Model, MODE_SEED, True)
            items, _ = self._make_inputs({"seed": MODE_SEED}, own_seed=False)

            def fwd():
                model(*items)
            with torch.no_grad():
                for _ in range(MODE_WARMUP):
                    fwd()
                torch.cuda.synchronize(self.device)
                t = time.perf_counter()
                fwd()
                host = (time.perf_counter() - t) * 1e6
                torch.cuda.synchronize(self.device)
                gate_us = min(GATE_MAX_US, 2000 + int(2 * host))
                got = [self._timed(fwd, gate_us=gate_us)[1] for _ in range(reps)]
            evs = [g["ev_us"] for g in got if g.get("gate_us")]
            if len(evs) < len(got):
                return {"model_error": "no gate: %s" % (self.gate_error or "?")}
            return {"model_us": evs}
        except Exception as e:
            return {"model_error": W.exc_text(e)[:500]}
        finally:
            del model, items
            torch.cuda.empty_cache()

    # -- memory placements -----------------------------------------------
    def _slot(self, nbytes, slot, places=None):
        """The placement of the call this GEN makes inputs for: `slot`
        (the referee's choice) modulo the placements in use.

        A kernel's time can follow the physical pages under its buffers:
        on the H100 one layernorm read 54.5-55.0 us with its 64 MiB input
        on three physical allocations and 61.0-66.4 us on three others,
        whatever virtual range they were mapped at; the same allocations,
        made in the same order in a second process, read the same
        (scripts/bench-placement, MODES=vmm).  A worker that keeps its
        buffers where the caching allocator put them measures those pages,
        and the next evaluation measures others.  With the request's
        "placements" N > 1, calls on a GPU take their inputs from, and
        make the model's allocations in, the pool (MemPool: separate
        segments, so separate pages) of the placement the referee names;
        the referee reports the time on the fastest placement
        (placement_adjusted).  Both workers run this same code, so
        reference and candidate are measured alike.  Fewer placements when
        the input copies would pass PLACEMENT_BYTES, or than `places`, the
        referee's plan (stark_memory: what the device's memory affords
        with the forward's own allocations in every pool); one where torch
        has no MemPool."""
        self.gens += 1
        self.n_slots = 1
        want = self.cfg.get("placements")
        if (self.device.type != "cuda" or type(want) is not int or want <= 1 or
                not hasattr(torch.cuda, "MemPool")):
            return 0
        if self.scan_kept:
            # After a SCAN: the referee's slot s is the s-th fastest kept.
            self.n_slots = len(self.scan_kept)
            s = slot if type(slot) is int and slot >= 0 else 0
            return self.scan_kept[s % self.n_slots]
        n = max(1, min(want, PLACEMENT_BYTES // max(nbytes, 1)))
        if type(places) is int and places >= 1:
            n = min(n, places)
        if not self.pools:
            self.pools.append(torch.cuda.MemPool())
        self.n_slots = n
        if type(slot) is not int or slot < 0:
            return 0            # trials and probes: the first placement
        while len(self.pools) <= slot % n:
            self.pools.append(torch.cuda.MemPool())
        return slot % n

    def cmd_scan(self, args):
        """Times forward, SCAN_CALLS times after an L2 flush, on each of the
        placements the last GEN allowed (its inputs copied into each pool,
        whose allocations forward then makes), and keeps the `keep`
        fastest by their quickest call: GEN slot s then means the s-th of
        them.  The other pools are let go.

        Which physical pages a buffer gets decides a kernel's time by up
        to 20% on the H100, and a placement as fast as the fastest may be
        one in ten: among 8 placements a naive mse_loss found one at
        126 us in two evaluations of five and none (131 us) in three.  A
        scan of 32 cost each worker 32-53 ms on the H100, about what three
        checked, timed calls cost.  The scan's calls are neither checked nor
        reported: a candidate that games them only chooses which of its
        own placements its checked calls then run on."""
        keep = args.get("keep")
        if (self.device.type != "cuda" or type(keep) is not int or keep < 1 or
                self.scan_kept or not self.pools or self.gen_desc is None):
            return {"pools": 0}
        t0 = time.monotonic()
        n = self.n_slots
        src = list(self.in_bufs)
        flush = torch.empty(2 * self._l2_bytes(), dtype=torch.uint8, device=self.device)
        # First each placement's inputs and one forward, which makes its
        # allocations (a cudaMalloc can wait for the GPU to drain).
        inputs = []
        for p in range(n):
            while len(self.pools) <= p:
                self.pools.append(torch.cuda.MemPool())
            self.slot = p
            inputs.append(T.with_tensors(self.inputs,
                                        self._place(self.gen_desc, src, check=False)))
            self.inputs = inputs[-1]
            with self._in_slot():
                out = self._forward()
                del out
        marks = [(p, torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(SCAN_CALLS) for p in range(n)]
        torch.cuda.synchronize(self.device)
        # Then the timed calls, each queued behind a spin of its own that
        # outlasts the host's launching of one call, so each pair of events
        # holds the GPU's time for forward, not the host's for launching
        # it, and the host is never more than a call ahead (a model of
        # hundreds of launches would fill the launch queue if all the
        # calls were queued behind one spin).
        host_us = self._launch_us(flush, inputs[0])
        cycles = self._spin_cycles(min(SCAN_SPIN_MAX_US, 300 + 1.5 * host_us))
        for i, (p, a, b) in enumerate(marks):
            self.slot = p
            self.inputs = inputs[p]
            torch.cuda._sleep(cycles)
            if self.cfg.get("l2_flush", True):
                flush.fill_(i & 0xFF)
            with self._in_slot():
                a.record()
                out = self._forward()
                b.record()
                del out
        torch.cuda.synchronize(self.device)
        self.inputs = inputs[-1]
        del inputs
        best = [float("inf")] * n
        for p, a, b in marks:
            best[p] = min(best[p], a.elapsed_time(b) * 1e3)
        del flush, marks
        order = sorted(range(n), key=lambda p: best[p])
        self.scan_kept = order[:keep]
        for p in order[keep:]:
            self.slot_bufs.pop(p, None)
            self.pools[p] = None
        self.slot = self.scan_kept[0]
        self.outputs = None
        self.snapshot = None
        torch.cuda.empty_cache()
        return {"pools": n, "kept": len(self.scan_kept),
                "us": [round(best[p], 1) for p in order],
                "ms": round((time.monotonic() - t0) * 1e3, 1)}

    def _launch_us(self, flush, inputs):
        """The host's time to launch an L2 flush and forward with an event
        on each side, as the scan does, without waiting for the GPU: the
        slowest of three, in microseconds."""
        self.inputs = inputs
        a = torch.cuda.Event(enable_timing=True)
        worst = 0.0
        for _ in range(3):
            t = time.perf_counter()
            flush.fill_(0)
            a.record()
            out = self._forward()
            a.record()
            del out
            worst = max(worst, time.perf_counter() - t)
        torch.cuda.synchronize(self.device)
        return worst * 1e6

    def _spin_cycles(self, us):
        """GPU clock cycles that torch.cuda._sleep spins for about `us`
        microseconds, at the clock measured on a first spin."""
        if not self.cycles_per_us:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            torch.cuda._sleep(200000)
            b.record()
            b.synchronize()
            ms = a.elapsed_time(b)
            self.cycles_per_us = 200000 / (ms * 1e3) if ms > 0 else 2000.0
        return int(us * self.cycles_per_us)

    def drop_placements(self):
        """Lets go of every placement's pool: the timing's input buffers in
        each, the forward's allocations made there, and the generated
        inputs' block cached beside them (_gen_pool), their memory back to
        the device.  Held into KernelBench's trials, which come after the
        timing, they put a trial's inputs on top of about twice the inputs'
        size in each worker, beyond the memory plan's gen phase: on four
        H200s, four evaluations a GPU, the references of level 1's
        problems with 8-16 GiB inputs and small outputs (45-49) ran out of
        device memory in KernelBench's trials 2-5.  A later GEN makes a
        first pool again, and a later timing its placements (no SCAN kept).
        The caller has let go of the last call's inputs and outputs."""
        if not self.pools:
            return
        self.slot_bufs = {}
        self.scan_kept = None
        self.pools = []
        self.slot = 0
        self.n_slots = 1
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def _in_slot(self):
        """A context in which this worker's allocations go to the pool of
        the current placement (nothing on CPUs)."""
        if (self.device.type == "cuda" and self.slot < len(self.pools) and
                self.pools[self.slot] is not None):
            return self._in_pool(self.pools[self.slot])
        return contextlib.nullcontext()

    def _in_pool(self, pool):
        """A context in which this worker's allocations go to `pool` (a
        MemPool on this worker's GPU; None: where they would go anyway)."""
        if pool is None:
            return contextlib.nullcontext()
        dev = self.device
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        return torch.cuda.use_mem_pool(pool, dev)

    # -- the L2 flush and the device (reference only) ---------------------
    def _l2_bytes(self):
        props = torch.cuda.get_device_properties(self.device)
        n = getattr(props, "L2_cache_size", 0) or 0
        if not n:
            try:
                lib = stark_cuda._cuda()
                v = ctypes.c_int()
                # CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
                if lib.cuDeviceGetAttribute(ctypes.byref(v), 38, self._ordinal()) == 0:
                    n = v.value
            except Exception:
                n = 0
        return int(n) or (64 << 20)

    def _ordinal(self):
        return self.device.index if self.device.index is not None else torch.cuda.current_device()

    def _reset_persisting(self):
        """cuCtxResetPersistingL2Cache: lines a kernel marked persisting
        (an access policy window) go back to normal, so the flush's writes
        evict them.  None when done, else why not."""
        try:
            lib = stark_cuda._cuda()
            rc = lib.cuCtxResetPersistingL2Cache()
        except Exception as e:
            return "%s: %s" % (type(e).__name__, e)
        if rc != 0:
            name = ctypes.c_char_p()
            lib.cuGetErrorName(rc, ctypes.byref(name))
            return name.value.decode() if name.value else "error %d" % rc
        return None

    def _flush_setup(self):
        if self.flush_buf is None and self.flush_ctx is None:
            self.l2_bytes = self._l2_bytes()
            torch.cuda.synchronize(self.device)
            self.persist_error = self._reset_persisting()
            if self.cfg.get("flush_context", "shared") == "own":
                try:
                    self.flush_ctx = _FlushContext(self._ordinal(),
                                                   FLUSH_L2_TIMES * self.l2_bytes)
                except Exception as e:
                    self.flush_ctx_error = W.exc_text(e)
            if self.flush_ctx is None:
                self.flush_buf = torch.empty(FLUSH_L2_TIMES * self.l2_bytes,
                                             dtype=torch.uint8, device=self.device)
                torch.cuda.synchronize(self.device)

    def cmd_flush(self, args):
        """Before every timed call of either model: persisting L2 lines reset
        and twice the L2's size written, then the device synchronized.  L2
        is shared by every context on the GPU, so what this trusted worker
        writes evicts what the candidate's process left there.  The writes
        come from PyTorch's context in this worker, or from a context of
        their own (_FlushContext) where cfg "flush_context" is "own"
        (STARK_FLUSH_CONTEXT=own): with that second context, both workers
        launched a host-bound model slower and this one the slower (the
        GRUs' honest copies read 1.12-1.22x on an H100; 1.000x without).

        The flush is done when the reply goes out: the timed call's gate
        (see _timed) runs in the caller's own context and behind the
        flush, so no flush work is pending when its span starts.

        A flush that cannot be made (no memory for its buffer) is reported
        by DEVICE_INFO and skipped here: timing goes on, warmer.  With
        {"flush": false} (--l2-flush off) nothing is written and no line
        reset, so calls are timed with whatever the cache holds, as
        KernelBench's published times are."""
        if self.device.type != "cuda":
            return {}
        if args.get("deliver") in ("ref", "cand"):
            # A delivered pair's inputs, written before the flush evicts
            # them (stark_worker_ipc).
            self.ipc_deliver(args["deliver"])
        try:
            self._flush_setup()
        except Exception:
            return {}
        write = args.get("flush") is not False
        if self.persist_error is None and write:
            self._reset_persisting()
        self.flush_n += 1
        if not write:
            return {}
        if self.flush_ctx is not None:
            self.flush_ctx.flush(self.flush_n & 0xFF)
        elif self.flush_buf is not None:
            self.flush_buf.fill_(self.flush_n & 0xFF)
            torch.cuda.synchronize(self.device)
        return {}

    def _copy_bandwidth(self):
        """The device's copy rate in bytes moved (read + written) per second:
        the best of 3 device-to-device copies of BANDWIDTH_BYTES."""
        src = torch.empty(BANDWIDTH_BYTES, dtype=torch.uint8, device=self.device).fill_(1)
        dst = torch.empty_like(src)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dst.copy_(src)
        best = float("inf")
        for _ in range(3):
            torch.cuda.synchronize(self.device)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3)
        del src, dst
        torch.cuda.empty_cache()
        return 2 * BANDWIDTH_BYTES / best if best > 0 else 0.0

    def cmd_device_info(self, args):
        """See _cmd_device_info_run; out-of-memory errors met there are the
        evaluator's (the flush buffer, the bandwidth copy, the compare kernel), not the forward's
        (mem_facts' "ooms")."""
        with self.ours_oom():
            return self._cmd_device_info_run(args)

    def _cmd_device_info_run(self, args):
        """Reference only: facts about the GPU for the result (clocks,
        throttling, temperature and power through NVML; the L2 size; the
        copy rate when asked).  Never fails: what cannot be had is said.

        With {"prepare": true}, sent once the model is loaded, outside the
        GPU lock, beside the candidate's loading: only what the timing
        phase's readings need is made, and nothing read (the flush's
        buffer, and its context where asked; NVML's handle; not with
        "timing": false);
        with "compare" too, the fused
        comparison is made ready (Outputs.fused_ready), and "kernel" says
        how comparisons will run.  Under
        the timing's exclusive lock these took 230-340 ms of a 1.0 s phase
        on an H200, and under the shared lock 0.2-0.6 s, the GPU idle
        meanwhile; the self-test, 35-260 ms of the first trial's hold."""
        info = {}
        if self.device.type != "cuda":
            return info
        if args.get("prepare"):
            made = (("flush", self._flush_setup), ("nvml", self._nvml_setup))
            for what, fn in made if args.get("timing") is not False else ():
                try:
                    fn()
                except Exception as e:
                    info["%s_error" % what] = W.exc_text(e)
            note = self.fused_ready() if args.get("compare") is True else None
            if note is not None:
                info["kernel"] = note
            return info
        try:
            self._flush_setup()
            info["l2_bytes"] = self.l2_bytes
            info["persist_reset"] = self.persist_error or "ok"
            info["flush_context"] = "own" if self.flush_ctx is not None else \
                "shared (%s)" % self.flush_ctx_error if self.flush_ctx_error else "shared"
        except Exception as e:
            info["flush_error"] = W.exc_text(e)
        if args.get("bandwidth"):
            try:
                info["copy_bps"] = self._copy_bandwidth()
            except Exception as e:
                info["copy_error"] = W.exc_text(e)
        try:
            info["nvml"] = self._nvml_setup().snapshot()
        except Exception as e:
            info["nvml_error"] = W.exc_text(e)
        return info

    def _nvml_setup(self):
        if self.nvml is None:
            self.nvml = _Nvml(self._pci_bus_id())
        return self.nvml

    def _pci_bus_id(self):
        lib = stark_cuda._cuda()
        dev = ctypes.c_int()
        stark_cuda._check(lib.cuDeviceGet(ctypes.byref(dev), self._ordinal()), "cuDeviceGet")
        buf = ctypes.create_string_buffer(64)
        stark_cuda._check(lib.cuDeviceGetPCIBusId(buf, 64, dev), "cuDeviceGetPCIBusId")
        return buf.value.decode()


class _FlushContext:
    """A CUDA context of the reference worker's own, beside PyTorch's, with
    a buffer for L2 flushes (driver API through stark_cuda's libcuda).
    Flushes run in it and leave PyTorch's context current again."""

    def __init__(self, ordinal, nbytes):
        lib = stark_cuda._cuda()
        self.lib = lib
        lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.cuMemsetD8_v2.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t]
        lib.cuCtxPushCurrent_v2.argtypes = [ctypes.c_void_p]
        dev = ctypes.c_int()
        stark_cuda._check(lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        ctx = ctypes.c_void_p()
        # cuCtxCreate has had several signatures; the first the driver takes.
        rc = -1
        for name, args in (("cuCtxCreate_v4", (None, 0, dev)),
                           ("cuCtxCreate_v3", (None, 0, 0, dev)),
                           ("cuCtxCreate_v2", (0, dev))):
            if rc != 0 and hasattr(lib, name):
                rc = getattr(lib, name)(ctypes.byref(ctx), *args)
        stark_cuda._check(rc, "cuCtxCreate")
        self.ctx = ctx              # created current: pushed on this thread
        try:
            self.ptr = ctypes.c_uint64()
            stark_cuda._check(lib.cuMemAlloc_v2(ctypes.byref(self.ptr), nbytes), "cuMemAlloc")
        except Exception:
            self._pop()
            lib.cuCtxDestroy_v2(ctx)
            raise
        self._pop()
        self.nbytes = nbytes

    def _pop(self):
        popped = ctypes.c_void_p()
        self.lib.cuCtxPopCurrent_v2(ctypes.byref(popped))

    def flush(self, value):
        """Persisting lines reset and the buffer written, synchronized."""
        lib = self.lib
        stark_cuda._check(lib.cuCtxPushCurrent_v2(self.ctx), "cuCtxPushCurrent")
        try:
            lib.cuCtxResetPersistingL2Cache()
            stark_cuda._check(lib.cuMemsetD8_v2(self.ptr.value, value, self.nbytes),
                              "cuMemsetD8")
            stark_cuda._check(lib.cuCtxSynchronize(), "cuCtxSynchronize")
        finally:
            self._pop()


# NVML's clock event (throttle) reasons, by bit.  GPU idle is left out: the
# GPU is idle whenever it is asked.
_THROTTLE_BITS = (
    (0x2, "applications_clocks"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
    (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"), (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"), (0x100, "display_clocks"),
)


class _Nvml:
    """The GPU's clocks, throttle reasons, temperature and power through
    NVML (ctypes on libnvidia-ml.so.1), for the device at a PCI bus id."""

    def __init__(self, bus_id):
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        lib.nvmlErrorString.restype = ctypes.c_char_p
        self.lib = lib
        self._ok(lib.nvmlInit_v2(), "nvmlInit_v2")
        self.handle = ctypes.c_void_p()
        rc = lib.nvmlDeviceGetHandleByPciBusId_v2(bus_id.encode(), ctypes.byref(self.handle))
        if rc != 0:
            # NVML may number only the GPUs it can open; where that is one,
            # it is ours (a jail shows only the assigned GPU's nodes).
            n = ctypes.c_uint()
            if lib.nvmlDeviceGetCount_v2(ctypes.byref(n)) != 0 or n.value != 1 or \
                    lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.handle)) != 0:
                self._ok(rc, "nvmlDeviceGetHandleByPciBusId_v2(%s)" % bus_id)

    def _ok(self, rc, what):
        if rc != 0:
            raise OSError("%s failed: %s" % (what, self.lib.nvmlErrorString(rc).decode()))

    def _uint(self, fn, *args):
        v = ctypes.c_uint()
        rc = getattr(self.lib, fn)(self.handle, *args, ctypes.byref(v))
        return v.value if rc == 0 else None

    def snapshot(self):
        lib, out = self.lib, {}
        name = ctypes.create_string_buffer(96)
        if lib.nvmlDeviceGetName(self.handle, name, 96) == 0:
            out["name"] = name.value.decode(errors="replace")
        out["sm_mhz"] = self._uint("nvmlDeviceGetClockInfo", 1)      # NVML_CLOCK_SM
        out["mem_mhz"] = self._uint("nvmlDeviceGetClockInfo", 2)     # NVML_CLOCK_MEM
        out["temp_c"] = self._uint("nvmlDeviceGetTemperature", 0)    # NVML_TEMPERATURE_GPU
        mw = self._uint("nvmlDeviceGetPowerUsage")
        out["power_w"] = None if mw is None else round(mw / 1000.0, 1)
        reasons = ctypes.c_ulonglong()
        for fn in ("nvmlDeviceGetCurrentClocksEventReasons",
                   "nvmlDeviceGetCurrentClocksThrottleReasons"):
            f = getattr(lib, fn, None)
            if f is not None and f(self.handle, ctypes.byref(reasons)) == 0:
                out["throttle"] = [n for bit, n in _THROTTLE_BITS if reasons.value & bit]
                break
        return out
