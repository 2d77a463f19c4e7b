"""stark_worker -- the process that runs a model for the referee.

The referee forks two workers after importing torch and loading the problem,
before any computation: a reference worker (role "ref": the problem's Model,
trusted code) and a candidate worker (role "cand": the solution's ModelNew,
hostile code).  Both make their inputs (GEN), run and time their model
(CALL) and describe their outputs (FETCH) with the same code, so reference
and candidate are measured the same way.  Only the reference worker, which
runs nothing but problem code, does the work the verdict rests on: it
compares the candidate's output bytes with its own outputs (COMPARE), and
on GPUs it flushes the L2 before every timed call and reads the clocks and
the copy rate (FLUSH, DEVICE_INFO).

By the time serve() runs, the C side of the fork (_stark.fork_worker) has
closed every descriptor but this worker's socket, the output window and
stdio -- the result channel (fd 3), the GPU lock (fd 4) and the other
worker's socket included
-- wiped the secret seed from this copy of memory, and put the worker in its
own process group.  A candidate worker, when the evaluator runs jailed, then
installs the sandbox's narrow seccomp filter before the solution's top level
runs.

Everything in the candidate's worker after the solution is loaded can be
replaced by the candidate; nothing the referee relies on is computed there.
Its checks on outputs (plain tensors, no aliasing of inputs, no late
writes) catch honest mistakes and lazy tricks; what the referee trusts is
the bytes the reference worker reads from the output window, the digests
that tie them to the moment the call returned, and its own clock.
"""

import contextlib
import copy
import ctypes
import json
import os
import random
import sys
import threading
import time
import traceback
import types

import torch

import _stark
import stark_build
import stark_cuda
import stark_wire as W

TRACEBACK_MAX = 200000
FLUSH_L2_TIMES = 2            # an L2 flush writes this many times the L2's size
BANDWIDTH_BYTES = 256 << 20   # buffer of the copy-rate measurement
SPIN_MAX_US = 5000            # the longest spin a FLUSH may ask for
PLACEMENT_BYTES = 4 << 30    # cap on the input copies of placements (_slot)
SCAN_CALLS = 1               # forward calls per placement in a SCAN
SCAN_SPIN_MAX_US = 30000     # cap on the spin a SCAN's launches queue behind
RECHECK_BYTES = 2 << 30      # cap on the float64 outputs of a recheck (_exact)

# The spin that follows a flush (see cmd_flush): one thread polling the
# GPU's global timer until spin_ns have passed.  PTX, so the driver builds
# it for whatever GPU this is, without NVRTC.
SPIN_PTX = b"""\
.version 7.0
.target sm_75
.address_size 64

.visible .entry stark_spin(.param .u64 stark_spin_ns)
{
	.reg .pred %p<2>;
	.reg .b64 %rd<5>;

	ld.param.u64 %rd1, [stark_spin_ns];
	mov.u64 %rd2, %globaltimer;
	add.s64 %rd3, %rd2, %rd1;
$L_loop:
	mov.u64 %rd4, %globaltimer;
	setp.lt.u64 %p1, %rd4, %rd3;
	@%p1 bra $L_loop;
	ret;
}
\0"""


def _error(phase, exc, extra=None):
    tb = W.format_exc(exc, TRACEBACK_MAX)
    msg = str(exc)
    info = {"phase": phase, "type": type(exc).__name__, "message": msg[:4000],
            "traceback": tb}
    if isinstance(exc, SyntaxError):
        info["message"] = "%s (%s, line %s)" % (exc.msg, exc.filename, exc.lineno)
    if extra:
        info.update(extra)
    return info


def _exec_module(name, filename, src):
    """Runs source bytes as a fresh module registered in sys.modules."""
    mod = types.ModuleType(name)
    mod.__file__ = filename
    sys.modules[name] = mod
    code = compile(src, filename, "exec", dont_inherit=True)
    exec(code, mod.__dict__)
    return mod


def _with_tensors(items, tensors):
    """items (a call's arguments) with its tensors replaced, in order, by
    those of `tensors`; other items as they are."""
    it = iter(tensors)
    return [next(it) if isinstance(x, torch.Tensor) else x for x in items]


def _storage_span(t):
    try:
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        return st.data_ptr(), st.nbytes()
    except Exception:
        return t.data_ptr(), t.numel() * t.element_size()


def _overlaps(a, b):
    (pa, na), (pb, nb) = a, b
    return na > 0 and nb > 0 and pa < pb + nb and pb < pa + na


def _same_bytes(a, b):
    """Bitwise equality (NaN payloads included) of two tensors."""
    try:
        if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
            return False
        if a.numel() == 0:
            return True
        fa = a.detach().contiguous().reshape(-1).view(torch.uint8)
        fb = b.detach().contiguous().reshape(-1).view(torch.uint8)
        return bool(torch.equal(fa, fb))
    except Exception:
        return False


class Worker:
    def __init__(self, chan, role, cfg, problem):
        self.chan = chan
        self.role = role            # "ref" or "cand"
        self.cfg = cfg              # non-secret request fields
        self.problem = problem      # the problem module (trusted)
        self.device = torch.device(cfg["device"])
        self.model = None
        self.inputs = None
        self.outputs = None
        self.snapshot = None
        self.pristine = []
        self.in_bufs = []      # input tensors of this call's placement
        self.in_spans = []
        self.slot_bufs = {}    # placement -> its input tensors, reused
        self.pools = []        # placement -> torch.cuda.MemPool
        self.slot = 0
        self.n_slots = 1       # placements of the last GEN
        self.scan_kept = None  # placements the SCAN kept, fastest first
        self.cycles_per_us = 0.0   # the GPU's clock, for torch.cuda._sleep
        self.gen_desc = None   # the last GEN's input description
        self.gens = 0
        self.kept = None       # reference: outputs described at FETCH
        self.model64 = None    # reference: its float64 copy, made for a recheck
        self.exact = None      # reference: this call's float64 outputs, or why not
        # The output window (stark_wire): the candidate writes its outputs
        # there, the reference reads them.
        fd = cfg.get("window_fd")
        self.window = W.Window(fd, writable=(role == "cand"),
                               pin=self.device.type == "cuda") if type(fd) is int else None
        self.events = None
        self.flush_buf = None
        self.flush_ctx = None
        self.flush_ctx_error = ""
        self.flush_n = 0
        self.l2_bytes = 0
        self.persist_error = None
        self.nvml = None
        self.warming = None
        if self.device.type == "cuda":
            # A CUDA process's first uses cost about 0.3 s on the H100 (the
            # context, the first kernels' lazy loading): paid now, the
            # kernels beside the loading, not in the first trial.  Trusted
            # code; LOAD waits for the thread before it replies.  torch's
            # own initialization runs here, in this thread: a seed set
            # while another thread initializes may be lost.
            try:
                torch.cuda.init()
            except BaseException:
                pass        # LOAD meets the failure and reports it
            else:
                self.warming = threading.Thread(target=_warm_cuda, args=(self.device,),
                                                name="stark-warm", daemon=True)
                self.warming.start()

    # -- loading ---------------------------------------------------------
    def _load_solution(self):
        # The solution gets no handle on the reference: the problem module
        # leaves sys.modules (this worker keeps its own reference to it).
        sys.modules.pop("stark_problem", None)
        # Trusted start-up first (torch's extension module, our loaders),
        # then the narrow filter, then the candidate.
        mode = "build" if self.cfg["stage"] in ("compile", "all") else "load"
        stark_build.install(mode, self.cfg["cache_dir"])
        # The fast format (stark_cuda) keeps its cubins in the same cache.
        # The run stage compiles what is missing itself: NVRTC is a library
        # (no exec), and this process runs the candidate's code anyway, so
        # compiling its CUDA source here adds no exposure.  The run jail
        # mounts the cache read-only; new cubins then go to a private
        # folder of this evaluation (the referee made it and removes it).
        dirs = [os.path.join(self.cfg["cache_dir"], "cuda")]
        if self.cfg.get("cubin_dir"):
            dirs.append(self.cfg["cubin_dir"])
        os.environ["STARK_CUDA_CACHE"] = os.pathsep.join(dirs)
        os.environ["STARK_CUDA_MODE"] = "compile" if self.cfg["stage"] == "compile" else "auto"
        _stark.narrow()
        return _exec_module("stark_solution", self.cfg["solution_name"],
                            self.cfg["solution_src"])

    def _construct(self, cls, init_seed, on_device):
        torch.manual_seed(init_seed)
        random.seed(init_seed)
        init = list(self.problem.get_init_inputs())
        torch.manual_seed(init_seed)
        model = cls(*init)
        if on_device:
            model = model.to(self.device)
        return model, init

    def _copy_weights(self, model, init_seed):
        """Copies the reference's parameters and buffers into the candidate
        where names and shapes agree, so both compute with equal weights."""
        if not isinstance(model, torch.nn.Module):
            return 0
        ref, _ = self._construct(self.problem.Model, init_seed, False)
        ref_state = ref.state_dict()
        n = 0
        with torch.no_grad():
            for k, v in model.state_dict().items():
                r = ref_state.get(k)
                if (isinstance(r, torch.Tensor) and isinstance(v, torch.Tensor) and
                        r.shape == v.shape and r.dtype == v.dtype):
                    v.copy_(r.to(v.device))
                    n += 1
        return n

    def cmd_load(self, args):
        t0 = time.monotonic()
        try:
            reply, err = self._load(args)
        finally:
            if self.warming is not None:
                self.warming.join(WARM_WAIT_S)
                self.warming = None
        if reply is not None:
            reply["load_s"] = time.monotonic() - t0
        return reply, err

    def _load(self, args):
        init_seed = int(args["init_seed"])
        if self.role == "ref":
            if self.device.type == "cuda" and not torch.cuda.is_available():
                return None, {"phase": "device", "type": "NoDevice", "traceback": "",
                              "message": "device %s was requested but CUDA is not "
                              "available here" % self.cfg["device"]}
            # The reference runs under the same narrow filter as the
            # candidate, though it is trusted: every system call of a timed
            # exchange (a synchronize is hundreds of them) then costs the
            # same in both workers.  Unnarrowed, the reference's exchanges
            # were 50-120 us cheaper on the H100, and the wall-clock bound
            # on the candidate's claims read that as a forged time.
            _stark.narrow()
            try:
                self.model, _ = self._construct(self.problem.Model, init_seed, True)
            except BaseException as e:
                return None, _error("construct", e)
            return {}, None
        phase = "load"
        try:
            sol = self._load_solution()
            failures = stark_build.state["failures"]
            if failures:
                return None, self._build_failed()
            phase = "construct"
            cls = getattr(sol, "ModelNew", None)
            if cls is None or not callable(cls):
                return None, {"phase": "load", "type": "MissingModelNew",
                              "message": "the solution defines no class ModelNew",
                              "traceback": ""}
            reuses = isinstance(cls, type) and issubclass(cls, self.problem.Model)
            self.model, _ = self._construct(cls, init_seed, True)
            copied = self._copy_weights(self.model, init_seed)
        except BaseException as e:
            if stark_build.state["failures"]:
                return None, self._build_failed()
            return None, _error(phase, e)
        # From here on, randomness the candidate draws is unpredictable.
        seed = int.from_bytes(os.urandom(8), "little")
        torch.manual_seed(seed)
        random.seed(seed)
        return {"weights_copied": copied, "reuses_reference": reuses,
                "build": stark_build.summary(), "cubins": dict(stark_cuda.stats)}, None

    def _build_failed(self):
        f = stark_build.state["failures"]
        missing = bool(f[0].get("missing"))
        msg = f[0]["log"] if missing else "load_inline failed to build '%s'" % f[0]["name"]
        return {"phase": "build", "type": "MissingBuild" if missing else "BuildError",
                "message": msg, "missing": missing, "traceback": "",
                "build": stark_build.summary()}

    def cmd_compile(self):
        """Compile stage: the solution's top level (which builds), then a
        best-effort construction on the CPU for builds made in __init__."""
        t0 = time.monotonic()
        try:
            sol = self._load_solution()
        except BaseException as e:
            if stark_build.state["failures"]:
                return None, self._build_failed()
            return None, _error("load", e)
        if stark_build.state["failures"]:
            return None, self._build_failed()
        cls = getattr(sol, "ModelNew", None)
        if cls is None or not callable(cls):
            return None, {"phase": "load", "type": "MissingModelNew",
                          "message": "the solution defines no class ModelNew",
                          "traceback": ""}
        try:
            self._construct(cls, 0, False)
        except BaseException:
            pass        # the run stage reports it
        if stark_build.state["failures"]:
            return None, self._build_failed()
        return {"load_s": time.monotonic() - t0, "build": stark_build.summary()}, None

    # -- inputs ----------------------------------------------------------
    def _seed_all(self, seed):
        torch.manual_seed(seed)
        random.seed(seed)
        np = sys.modules.get("numpy")
        if np is not None:
            try:
                np.random.seed(seed & 0xFFFFFFFF)
            except Exception:
                pass

    def _generate(self):
        """get_inputs() with this worker's device as the default device
        (torch 2.x), so the inputs are made where they are used; torch 1.x
        has no default device: there they are made on the CPU and moved."""
        get = self.problem.get_inputs
        if self.device.type != "cpu" and hasattr(torch.device, "__enter__"):
            with torch.device(self.device):
                items = get()
        else:
            items = get()
        if not isinstance(items, (list, tuple)):
            raise TypeError("get_inputs() returned %s, not a list" % type(items).__name__)
        return list(items)

    def cmd_gen(self, args):
        """Makes this call's inputs from the referee's seed, with the
        problem's module-level sizes overridden as asked (and restored), in
        the problem's or the variant distribution (stark_wire.vary_inputs).
        The values land in the same buffers as the last call's (when shapes
        agree), as a benchmark loop would: results cached on data pointers
        come out stale, and allocation patterns stay alike from call to
        call.  Replies with the description the referee compares."""
        seed = int(args["seed"])
        sizes = args.get("sizes") if isinstance(args.get("sizes"), dict) else {}
        mod = self.problem
        saved = {}
        dtype = torch.get_default_dtype()
        try:
            for k, v in sizes.items():
                if isinstance(k, str) and type(v) is int and type(getattr(mod, k, None)) is int:
                    saved[k] = getattr(mod, k)
                    setattr(mod, k, v)
            # A solution's top level may have changed the default dtype;
            # inputs are made the way the problem expects, in both workers.
            torch.set_default_dtype(torch.float32)
            self._seed_all(seed)
            items = self._generate()
            if args.get("variant"):
                items = W.vary_inputs(items, seed)
        finally:
            for k, v in saved.items():
                setattr(mod, k, v)
            torch.set_default_dtype(dtype)
        if self.role == "cand":
            # Randomness the candidate draws stays unpredictable.
            self._seed_all(int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1))
        desc, tensors = W.describe_inputs(items)
        self.slot = self._slot(sum(t.numel() * t.element_size() for t in tensors), args.get("slot"))
        self.gen_desc = desc
        placed = self._place(desc, tensors)
        self.inputs = _with_tensors(items, placed)
        self.outputs = None
        self.snapshot = None
        self.kept = None
        self.exact = None
        if self.device.type == "cuda":
            # Inputs complete before the next command: a timed call queued
            # behind the flush context's spin must find nothing of this
            # context's left to wait for (see _timed).
            torch.cuda.synchronize(self.device)
        return {"items": desc["items"],
                "bytes": sum(t.numel() * t.element_size() for t in placed),
                "placements": self.n_slots}

    def _slot(self, nbytes, slot):
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
        the input copies would pass PLACEMENT_BYTES; one where torch has no
        MemPool."""
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
            inputs.append(_with_tensors(self.inputs,
                                        self._place(self.gen_desc, src, check=False)))
            self.inputs = inputs[-1]
            with self._in_slot():
                out = self._forward()
                del out
        marks = [(p, torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(SCAN_CALLS) for p in range(n)]
        torch.cuda.synchronize(self.device)
        # Then the timed calls, all queued at once behind a spin, so the
        # GPU runs them back to back and each pair of events holds the
        # GPU's time for forward, not the host's for launching it.  The
        # spin outlasts the host's launching of them all: a fast-format
        # forward takes the host up to 100 us to launch, about what the
        # GPU takes to run it.
        host_us = self._launch_us(flush, inputs[0])
        torch.cuda._sleep(self._spin_cycles(
            min(SCAN_SPIN_MAX_US, 300 + 1.5 * host_us * len(marks))))
        for i, (p, a, b) in enumerate(marks):
            self.slot = p
            self.inputs = inputs[p]
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

    def _in_slot(self):
        """A context in which this worker's allocations go to the pool of
        the current placement (nothing on CPUs)."""
        if (self.device.type == "cuda" and self.slot < len(self.pools) and
                self.pools[self.slot] is not None):
            dev = self.device
            if dev.index is None:
                dev = torch.device("cuda", torch.cuda.current_device())
            return torch.cuda.use_mem_pool(self.pools[self.slot], dev)
        return contextlib.nullcontext()

    def _place(self, desc, tensors, check=True):
        """Copies generated tensors into the persistent input buffers of
        this call's placement on this worker's device; keeps pristine
        copies for the mutation check (unless `check` is false: the
        SCAN's unchecked calls)."""
        specs = [d for d in desc["items"] if d["t"] == "tensor"]
        placed = []
        bufs = self.slot_bufs.get(self.slot, [])
        for i, (d, t) in enumerate(zip(specs, tensors)):
            t = t.detach()
            buf = bufs[i] if i < len(bufs) else None
            if (isinstance(buf, torch.Tensor) and buf.shape == t.shape and
                    buf.dtype == t.dtype and buf.device == self.device):
                buf.requires_grad_(False)
                buf.copy_(t)
            else:
                # Always a buffer of our own: get_inputs() may return a
                # tensor it keeps (a module-level constant), which a model
                # that mutates its inputs would otherwise change for later
                # calls.
                with self._in_slot():
                    buf = torch.empty(t.shape, dtype=t.dtype, device=self.device)
                buf.copy_(t)
            buf.requires_grad_(False)
            placed.append(buf)
        self.slot_bufs[self.slot] = placed
        self.in_bufs = placed
        self.in_spans = [_storage_span(x) for x in placed]
        if not check:
            return placed
        pristine = []
        for i, x in enumerate(placed):
            p = self.pristine[i] if i < len(self.pristine) else None
            if isinstance(p, torch.Tensor) and p.shape == x.shape and p.dtype == x.dtype:
                p.copy_(x)
            else:
                p = x.detach().clone()
            pristine.append(p)
        self.pristine = pristine
        for d, x in zip(specs, placed):
            if d.get("requires_grad") and x.is_floating_point():
                x.requires_grad_(True)
        return placed

    # -- calls -----------------------------------------------------------
    def _events(self):
        if self.events is None:
            self.events = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            self.events.append(torch.cuda.Event())
        return self.events

    def _timed(self, fn, queued=False):
        """Runs fn() between CUDA events on the current stream, then a
        device-wide synchronize and a guard event: start->end is what the
        stream saw, start->guard also covers work left on side streams or
        launched by host threads.  Returns (fn's result, timing dict).

        The GPU runs one process's context at a time.  When `queued`, the
        reference worker's flush context holds the GPU with a spin (see
        cmd_flush): the start event and fn's launches queue up behind it
        and run back to back once the GPU switches to this context, so
        start->end is the GPU's time for fn, not the host's time to launch
        it, and the switch itself comes before the start event.  Without a
        spin, a first event, waited for, makes the switch before the start
        event, and the host's launch time counts."""
        dev = self.device
        clock = time.perf_counter
        h0 = clock()
        torch.cuda.synchronize(dev)
        stream = torch.cuda.current_stream(dev)
        start, end, guard, switch = self._events()
        if not queued:
            switch.record(stream)
            switch.synchronize()
        h1 = clock()
        start.record(stream)
        out = fn()
        end.record(stream)
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
        return out, info

    def _forward(self):
        with torch.no_grad():
            return self.model(*self.inputs)

    def cmd_call(self, args):
        self.outputs = None
        self.kept = None
        self.exact = None
        if self.device.type == "cuda":
            # The pool's context is entered and left outside the timed
            # span.
            with self._in_slot():
                self.outputs, info = self._timed(self._forward, args.get("queued") is True)
            out = self.outputs
            items = list(out) if isinstance(out, (tuple, list)) else [out]
            h = time.perf_counter()
            info["digest"] = [W.output_digest(t) for t in items[:W.MAX_TENSORS]]
            info["host_us"].append(round((time.perf_counter() - h) * 1e6, 1))
            return info
        self.outputs = self._forward()
        return {}

    def cmd_timed_noop(self):
        if self.device.type != "cuda":
            return {}
        return self._timed(lambda: None)[1]

    def after_call(self):
        """Right after the reply to CALL: a copy of the outputs as they were
        when forward returned.  FETCH sends this copy and reports whether
        the live outputs changed since (work finished behind the clock)."""
        out = self.outputs
        items = list(out) if isinstance(out, (tuple, list)) else [out]
        self.snapshot = [t.detach().clone() if type(t) is torch.Tensor and
                         t.layout is torch.strided else None for t in items]

    def cmd_profile(self):
        """Runs forward once under the autograd profiler and returns the
        names of the operators it dispatched (for the calls_reference_op
        flag); the outputs are kept for FETCH like after CALL."""
        prof = torch.autograd.profiler.profile()
        with prof:
            self.cmd_call({})
        names = sorted({str(e.name)[:120] for e in prof.function_events})
        return {"ops": names[:4000]}

    def _describe_outputs(self):
        out = self.outputs
        if isinstance(out, (tuple, list)):
            items, kind = list(out), "seq"
        else:
            items, kind = [out], "tensor"
        if len(items) > W.MAX_TENSORS:
            return {"kind": "bad", "detail": "%d outputs (at most %d)"
                    % (len(items), W.MAX_TENSORS)}, []
        descs, tensors, facts = [], [], {}
        for i, t in enumerate(items):
            if not isinstance(t, torch.Tensor):
                return {"kind": "bad", "index": i,
                        "detail": "output %d is %s, not a tensor"
                        % (i, type(t).__name__)}, []
            if type(t) is not torch.Tensor:
                return {"kind": "reject", "check": "tensor subclass",
                        "detail": "output %d is a %s, not a plain torch.Tensor"
                        % (i, type(t).__qualname__)}, []
            if t.layout is not torch.strided:
                return {"kind": "bad", "index": i,
                        "detail": "output %d has layout %s" % (i, t.layout)}, []
            if t.dtype not in W.DTYPE_NAMES:
                return {"kind": "bad", "index": i,
                        "detail": "output %d has unsupported dtype %s" % (i, t.dtype)}, []
            span = _storage_span(t)
            for j, sp in enumerate(self.in_spans):
                if _overlaps(span, sp):
                    facts.setdefault("alias", []).append([i, j])
            snap = self.snapshot[i] if self.snapshot and i < len(self.snapshot) else None
            if snap is not None and not _same_bytes(t, snap):
                facts["late_write"] = True
                t = snap        # what the caller got when forward returned
            d = W.describe_tensor(t)
            d["device"] = str(t.device)
            descs.append(d)
            tensors.append(t.detach())
        if self.role == "ref" and sum(t.numel() * t.element_size()
                                      for t in tensors) > W.OUTPUT_MAX:
            return {"kind": "bad", "detail": "the outputs are larger than %d GiB"
                    % (W.OUTPUT_MAX >> 30)}, []
        mutated = [j for j, (x, p) in enumerate(zip(
            [x for x in self.inputs if isinstance(x, torch.Tensor)], self.pristine))
            if not _same_bytes(x, p)]
        if mutated:
            facts["mutated"] = mutated
        header = {"kind": kind, "items": descs, "facts": facts}
        if self.role == "ref":
            header["mag"] = [_magnitude(t) for t in tensors]
        return header, tensors

    def cmd_fetch(self, args):
        """The reference only describes its outputs and keeps them for
        COMPARE; the candidate also writes their bytes into the output
        window, when they fit the size the referee made it (args["window"]:
        outputs that do not fit fail the referee's checks anyway), and
        says how many it wrote."""
        header, tensors = self._describe_outputs()
        if header["kind"] in ("bad", "reject"):
            self.chan.send_json(W.OUT_HEADER, header)
            return
        if self.role == "ref":
            self.kept = tensors
            self.chan.send_json(W.OUT_HEADER, header)
            return
        self.chan.send_json(W.OUT_HEADER, header)
        self.outputs = None
        size = args.get("window")
        specs = [(t.dtype, tuple(t.shape), t.numel() * t.element_size()) for t in tensors]
        offs, total = W.window_layout(specs)
        if self.window is None or type(size) is not int or total > size:
            self.chan.send_json(W.OUT_WRITTEN, {"bytes": 0})
            return
        views = self.window.tensors(specs, offs, total)
        for v, t in zip(views, tensors):
            v.copy_(t)
        del views
        self.chan.send_json(W.OUT_WRITTEN, {"bytes": total})

    def cmd_compare(self, header):
        """Reference only: reads the candidate's output bytes from the output
        window (the referee's header checks passed, the candidate is
        stopped), moves them to this worker's device and compares them with
        the outputs kept at FETCH.  Stops at the first output with
        mismatches, as the message names only that one."""
        kept = self.kept
        specs = [W.checked_spec(d, "compared output") for d in header["items"]]
        tols = [(float(a), float(r)) for a, r in header["tol"]]
        if kept is None or len(specs) != len(kept) or len(tols) != len(kept):
            raise ValueError("nothing to compare with: %d outputs kept, %d sent"
                             % (len(kept or []), len(specs)))
        for i, ((dt, shape, _), want) in enumerate(zip(specs, kept)):
            if dt != want.dtype or shape != tuple(want.shape):
                raise ValueError("output %d sent as %s %s, kept as %s %s"
                                 % (i, dt, list(shape), want.dtype, list(want.shape)))
        if self.window is None:
            raise ValueError("this worker has no output window")
        offs, total = W.window_layout(specs)
        views = self.window.tensors(specs, offs, total)
        # On a GPU, one copy each, straight from the (registered) window;
        # on the CPU, the views are compared in place.
        got = [v.to(want.device) if v.device != want.device else v
               for v, want in zip(views, kept)]
        del views
        reply = {}
        claimed = header.get("digest")
        if claimed is not None:
            reply["digest_ok"] = (isinstance(claimed, list) and len(claimed) == len(got) and
                                  all(type(c) is int and c == W.output_digest(g)
                                      for c, g in zip(claimed, got)))
        slack = header.get("recheck")
        slack = float(slack) if type(slack) in (int, float) and slack > 0 else 0.0
        results = []
        for i, (g, want, (atol, rtol)) in enumerate(zip(got, kept, tols)):
            r = W.compare_tensor(g, want.detach(), atol, rtol)
            if r["nbad"] and slack and want.is_floating_point():
                r = self._recheck(i, g, want.detach(), atol, rtol, slack, r)
            results.append(r)
            if r["nbad"]:
                break
        self.kept = None
        self.exact = None
        self.outputs = None
        del got
        reply["results"] = results
        if self.window is not None and self.window.pin_error:
            reply["window"] = self.window.pin_error
        return reply

    def _recheck(self, i, got, want, atol, rtol, slack, first):
        """Output i failed the comparison with the reference: the second
        opinion of the reference's float64 run (stark_wire.compare_exact).
        An honest kernel can be closer to the exact result than the
        reference is: a variance as E[x^2] - E[x]^2 in float32 loses three
        digits that a two-pass kernel keeps, and a running sum that crosses
        zero has lost the absolute precision of its largest terms.  Returns
        the recheck's result when it passes, else the first one; either
        carries "recheck" (what the second opinion found)."""
        exact = self._exact()
        if isinstance(exact, str):
            first["recheck"] = {"error": exact}
            return first
        r = W.compare_exact(got, want, exact[i], atol, rtol, slack)
        if "error" in r:
            first["recheck"] = {"error": r["error"]}
            return first
        info = {"ref_err": r["ref_err"], "nbad": r["nbad"], "max_abs": r["max_abs"]}
        if r["nbad"]:
            first["recheck"] = info
            return first
        r["recheck"] = info
        return r

    def _exact(self):
        """The reference's outputs of this call computed in float64: a copy
        of the model with floating parameters and buffers in float64 (made
        once, from the model as it is now), run on the inputs as they were
        before the call (the pristine copies).  Cached for the call.
        Returns a list of tensors, or why there is none."""
        if self.exact is not None:
            return self.exact
        why = None
        try:
            if not isinstance(self.model, torch.nn.Module):
                why = "the reference model is not a torch.nn.Module"
            elif len(self.pristine) != sum(isinstance(x, torch.Tensor) for x in self.inputs):
                why = "the call's inputs are not all kept"
            elif sum(t.numel() for t in self.kept or []) * 8 > RECHECK_BYTES:
                why = "the float64 outputs would pass %d GiB" % (RECHECK_BYTES >> 30)
            else:
                if self.model64 is None:
                    self.model64 = copy.deepcopy(self.model).to(torch.float64)
                args = _with_tensors(self.inputs, [
                    x.to(torch.float64) if x.is_floating_point() else x
                    for x in self.pristine])
                with torch.no_grad():
                    out = self.model64(*args)
                items = list(out) if isinstance(out, (tuple, list)) else [out]
                if not all(isinstance(t, torch.Tensor) for t in items):
                    why = "the float64 run returned something other than tensors"
                elif len(items) != len(self.kept or []):
                    why = "the float64 run returned %d outputs, not %d" % (
                        len(items), len(self.kept or []))
                else:
                    self.exact = [t.detach() for t in items]
                    return self.exact
        except Exception as e:          # any failure: no recheck, the first verdict stands
            why = "the float64 run failed: " + _exc_text(e)
        self.exact = why
        return why

    # -- the GPU, for timing (reference only) -----------------------------
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
            try:
                self.flush_ctx = _FlushContext(self._ordinal(), FLUSH_L2_TIMES * self.l2_bytes)
            except Exception as e:
                self.flush_ctx_error = _exc_text(e)
                self.flush_buf = torch.empty(FLUSH_L2_TIMES * self.l2_bytes,
                                             dtype=torch.uint8, device=self.device)
                torch.cuda.synchronize(self.device)

    def cmd_flush(self, args):
        """Before every timed call of either model: persisting L2 lines reset
        and twice the L2's size written, then the device synchronized.  L2
        is shared by every context on the GPU, so what this trusted worker
        writes evicts what the candidate's process left there.  The writes
        come from a context of their own (_FlushContext), so that both
        models' calls follow another context's work alike.

        With {"spin_us": n}, the flush context then keeps the GPU busy for
        n microseconds and the reply does not wait for it: the next timed
        call's launches queue up meanwhile and run back to back (see
        _timed), so the host's launch time stops counting.  The candidate
        cannot use the GPU during the spin, since the GPU runs one context
        at a time and the spin's is this worker's.  The reply says whether
        a spin is queued ("spin_us", 0 if not, and why in "spin_error").

        A flush that cannot be made (no memory for its buffer) is reported
        by DEVICE_INFO and skipped here: timing goes on, warmer."""
        if self.device.type != "cuda":
            return {}
        try:
            self._flush_setup()
        except Exception:
            return {}
        if self.persist_error is None:
            self._reset_persisting()
        self.flush_n += 1
        spin = args.get("spin_us")
        spin = min(max(int(spin), 0), SPIN_MAX_US) if type(spin) is int else 0
        if self.flush_ctx is not None:
            return self.flush_ctx.flush(self.flush_n & 0xFF, spin * 1000)
        if self.flush_buf is not None:
            self.flush_buf.fill_(self.flush_n & 0xFF)
            torch.cuda.synchronize(self.device)
        return {"spin_us": 0, "spin_error": "no flush context of its own"}

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
        """Reference only: facts about the GPU for the result (clocks,
        throttling, temperature and power through NVML; the L2 size; the
        copy rate when asked).  Never fails: what cannot be had is said."""
        info = {}
        if self.device.type != "cuda":
            return info
        try:
            self._flush_setup()
            info["l2_bytes"] = self.l2_bytes
            info["persist_reset"] = self.persist_error or "ok"
            info["flush_context"] = "own" if self.flush_ctx is not None else \
                "shared (%s)" % self.flush_ctx_error
        except Exception as e:
            info["flush_error"] = _exc_text(e)
        if args.get("bandwidth"):
            try:
                info["copy_bps"] = self._copy_bandwidth()
            except Exception as e:
                info["copy_error"] = _exc_text(e)
        try:
            if self.nvml is None:
                self.nvml = _Nvml(self._pci_bus_id())
            info["nvml"] = self.nvml.snapshot()
        except Exception as e:
            info["nvml_error"] = _exc_text(e)
        return info

    def _pci_bus_id(self):
        lib = stark_cuda._cuda()
        dev = ctypes.c_int()
        stark_cuda._check(lib.cuDeviceGet(ctypes.byref(dev), self._ordinal()), "cuDeviceGet")
        buf = ctypes.create_string_buffer(64)
        stark_cuda._check(lib.cuDeviceGetPCIBusId(buf, 64, dev), "cuDeviceGetPCIBusId")
        return buf.value.decode()

    # -- the loop --------------------------------------------------------
    def serve(self):
        chan = self.chan
        caps = {W.LOAD: 1 << 16, W.COMPILE: 1 << 16, W.GEN: 1 << 20, W.CALL: 64, W.SCAN: 64,
                W.FETCH: 64, W.COMPARE: W.HEADER_MAX, W.FLUSH: 64, W.TIMED_NOOP: 0,
                W.DEVICE_INFO: 1 << 12, W.PING: 0, W.QUIT: 0, W.PROFILE: 0}
        phases = {W.LOAD: "load", W.GEN: "inputs", W.COMPARE: "compare",
                  W.FLUSH: "device", W.DEVICE_INFO: "device"}
        while True:
            kind, payload = chan.recv(caps)
            if kind == W.QUIT:
                return
            if kind == W.PING:
                chan.send(W.OK)
                continue
            if kind == W.FETCH:
                try:
                    args = json.loads(payload) if payload else {}
                    self.cmd_fetch(args if isinstance(args, dict) else {})
                except BaseException as e:
                    chan.send_json(W.ERR, _error("fetch", e))
                continue
            args = json.loads(payload) if payload else {}
            try:
                if kind == W.LOAD:
                    info, err = self.cmd_load(args)
                elif kind == W.COMPILE:
                    info, err = self.cmd_compile()
                elif kind == W.GEN:
                    info, err = self.cmd_gen(args), None
                elif kind == W.PROFILE:
                    info, err = self.cmd_profile(), None
                elif kind == W.SCAN:
                    info, err = self.cmd_scan(args), None
                elif kind == W.COMPARE:
                    info, err = self.cmd_compare(args), None
                elif kind == W.FLUSH:
                    info, err = self.cmd_flush(args), None
                elif kind == W.TIMED_NOOP:
                    info, err = self.cmd_timed_noop(), None
                elif kind == W.DEVICE_INFO:
                    info, err = self.cmd_device_info(args), None
                else:
                    info, err = self.cmd_call(args), None
            except W.WorkerGone:
                raise
            except BaseException as e:
                info, err = None, _error(phases.get(kind, "forward"), e)
            if err is not None:
                chan.send_json(W.ERR, err)
                continue
            chan.send_json(W.OK, info)
            if kind in (W.CALL, W.PROFILE):
                try:
                    self.after_call()
                except BaseException:
                    self.snapshot = None


class _FlushContext:
    """A CUDA context of the reference worker's own, beside PyTorch's, with
    a buffer for L2 flushes and the spin kernel (driver API through
    stark_cuda's libcuda).  Flushes and spins run in it and leave
    PyTorch's context current again."""

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
        self.spin_fn, self.spin_error = None, None
        try:
            mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
            stark_cuda._check(lib.cuModuleLoadData(ctypes.byref(mod), SPIN_PTX),
                              "cuModuleLoadData(spin)")
            stark_cuda._check(lib.cuModuleGetFunction(ctypes.byref(fn), mod, b"stark_spin"),
                              "cuModuleGetFunction(stark_spin)")
            self.spin_fn = fn
        except Exception as e:
            self.spin_error = _exc_text(e)
        self._pop()
        self.nbytes = nbytes

    def _pop(self):
        popped = ctypes.c_void_p()
        self.lib.cuCtxPopCurrent_v2(ctypes.byref(popped))

    def flush(self, value, spin_ns=0):
        """The flush, synchronized; then, when spin_ns > 0, the spin kernel
        launched and left running.  Returns FLUSH's reply."""
        lib = self.lib
        reply = {"spin_us": 0}
        stark_cuda._check(lib.cuCtxPushCurrent_v2(self.ctx), "cuCtxPushCurrent")
        try:
            lib.cuCtxResetPersistingL2Cache()
            stark_cuda._check(lib.cuMemsetD8_v2(self.ptr.value, value, self.nbytes), "cuMemsetD8")
            stark_cuda._check(lib.cuCtxSynchronize(), "cuCtxSynchronize")
            if spin_ns > 0 and self.spin_fn is not None:
                arg = ctypes.c_uint64(spin_ns)
                params = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
                rc = lib.cuLaunchKernel(self.spin_fn, 1, 1, 1, 1, 1, 1, 0, None, params, None)
                if rc == 0:
                    reply["spin_us"] = spin_ns // 1000
                else:
                    reply["spin_error"] = "cuLaunchKernel(stark_spin): error %d" % rc
            elif spin_ns > 0:
                reply["spin_error"] = self.spin_error
        finally:
            self._pop()
        return reply


def _magnitude(t):
    """The mean absolute value of a floating tensor (0 for others, for empty
    ones and where it is not finite): the scale of an output, by which the
    referee widens the absolute tolerance on scaled inputs."""
    if not t.is_floating_point() or t.numel() == 0:
        return 0.0
    m = float(t.detach().abs().float().mean())
    return m if m == m and m not in (float("inf"), float("-inf")) else 0.0


def _exc_text(e):
    return ("%s: %s" % (type(e).__name__, e))[:300]


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


WARM_WAIT_S = 60.0


def _warm_cuda(dev):
    """The first uses of CUDA every evaluation makes: the kernels behind
    get_inputs(), elementwise work, a copy, a synchronize.  A generator of
    its own: the default one's state belongs to the main thread (the
    weights and inputs are seeded).  Failures are left for the loading to
    meet and report."""
    try:
        g = torch.Generator(device=dev)
        x = torch.randn(1024, device=dev, generator=g)
        torch.rand(1024, device=dev, generator=g).mul_(x).add_(1.0)
        torch.empty(1024, device=dev).normal_(generator=g).cpu()
        torch.cuda.synchronize(dev)
    except BaseException:
        pass


def main(sock, role, cfg, problem):
    """Entry point in the forked child; never returns."""
    code = 0
    try:
        chan = W.Channel(sock)
        Worker(chan, role, cfg, problem).serve()
    except W.WorkerGone:
        code = 0
    except BaseException:
        traceback.print_exc()
        code = 70
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        os._exit(code)
