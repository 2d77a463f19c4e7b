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

The worker is one class, Worker, in parts: its GPU machinery for timing
(stark_worker_gpu), its inputs (stark_worker_inputs), its outputs
(stark_worker_outputs) and what it knows about memory (stark_worker_memory)
are modules of their own.
"""

import faulthandler
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
import stark_fused
import stark_rules as R
import stark_triton
import stark_tensors as T
import stark_wire as W
from stark_compiled import CompiledRef
from stark_worker_delivery import Delivery
from stark_worker_gpu import GpuTiming
from stark_worker_inputs import Inputs
from stark_worker_ipc import IpcDelivery
from stark_worker_memory import OOM_TYPES, Memory, is_oom
from stark_worker_outputs import Outputs

TRACEBACK_MAX = 200000
COPY_CHECK_BYTES = 1 << 30   # inputs/outputs copied for checks, beyond: digests


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


# Modules that draw random numbers in training mode (KernelBench runs its
# models as constructed, in training mode).
STOCHASTIC = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d,
              torch.nn.AlphaDropout, torch.nn.FeatureAlphaDropout, torch.nn.RReLU)


def _stochastic(model):
    """The reference's modules that draw random numbers as it runs (in
    training mode, with a probability above 0 where they have one), named
    as the model names them: at most 4, for the message of a reference
    that is not deterministic."""
    out = []
    if not isinstance(model, torch.nn.Module):
        return out
    for name, m in model.named_modules():
        if isinstance(m, STOCHASTIC) and m.training and getattr(m, "p", 1) > 0:
            out.append("%s: %s" % (name or "the model", repr(m)[:60]))
            if len(out) == 4:
                break
    return out


def _no_model_new():
    """The error of a solution without a class ModelNew."""
    return {"phase": "load", "type": "MissingModelNew",
            "message": "the solution defines no class ModelNew", "traceback": ""}


def _setup_failed(e):
    """stark_build.install() could not import torch's extension module
    (before any candidate code ran); the referee checks the claim."""
    cause = e.cause
    return {"phase": "setup", "type": type(cause).__name__, "message": str(e)[:4000],
            "module": getattr(cause, "name", None) if isinstance(cause, ImportError) else None,
            "traceback": W.format_exc(cause, TRACEBACK_MAX)}


class ExecRestrictError(Exception):
    """The candidate's worker could not restrict what it may execute
    (before any of its code ran): the evaluator's failure."""


def _builds(src):
    """Whether a solution uses torch's extension builders (the test the
    orchestrator makes: evalrun_needs_compile)."""
    return any(w in src for w in (b"load_inline", b"cpp_extension", b"load("))


def _exec_module(name, filename, src):
    """Runs source bytes as a fresh module registered in sys.modules."""
    mod = types.ModuleType(name)
    mod.__file__ = filename
    sys.modules[name] = mod
    code = compile(src, filename, "exec", dont_inherit=True)
    exec(code, mod.__dict__)
    return mod


class Worker(GpuTiming, Inputs, Outputs, Memory, CompiledRef, Delivery, IpcDelivery):
    """One worker: its model, this call's inputs and outputs, and the
    command loop (serve).  The reference worker also holds the compiled
    reference where one is asked for (stark_compiled)."""

    def __init__(self, chan, role, cfg, problem):
        # When this process reached each step of its start (time.monotonic,
        # the system's clock: the referee compares them with its own): its
        # main, the window mapped, CUDA initialized, this object made.
        self.started = {"main": _T_MAIN or time.monotonic()}
        self.chan = chan
        self.role = role            # "ref" or "cand"
        self.cfg = cfg              # non-secret request fields
        self.problem = problem      # the problem module (trusted)
        self.device = local_device(cfg["device"])
        self.model = None
        self.dtype = R.KB_DTYPES.get(cfg.get("precision") or "fp32")
        if self.dtype == torch.float32:
            self.dtype = None
        self.jit_cache = None       # Triton's cache of this evaluation (cand)
        self.jit_memo = {}          # its last count (stark_triton.compiled)
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
        self.gen_args = None   # the last GEN's arguments (regenerate_inputs)
        self.light = False     # reference: the last GEN said "light" (cmd_gen)
        self.kb_host = None    # (seed, items): KernelBench's CPU inputs made ahead (GEN host_only)
        self.gens = 0
        self.kept = None       # reference: outputs described at FETCH
        self.model64 = None    # reference: its float64 copy, made for a recheck
        # reference: output -> whether its float64 run, on the problem's own
        # inputs, differed from it by rounding alone (stark_tensors.
        # exact_error within the cap), learned on a precision-judged call
        self.f64_rounding = {}
        self.exact = None      # reference: this call's float64 outputs, or why not
        self.cmp = None        # reference: the comparison under way (COMPARE chunks)
        self.fused_note = None  # reference: how its comparisons run (stark_fused.enable)
        self.fused_prep = None  # reference: stark_fused.prepare's handle, until enable
        self.sending = None    # candidate: the outputs being streamed (FETCH, PUT)
        self.exact_j = None    # reference: the same on jittered inputs (precision)
        self.centred = None    # tensors the last GEN centred (a precision probe's)
        # The output window (stark_wire): the candidate writes its outputs
        # there, the reference reads them.
        fd = cfg.get("window_fd")
        self.window = W.Window(fd, writable=(role == "cand"),
                               pin=self.device.type == "cuda") if type(fd) is int else None
        self.started["window"] = time.monotonic()
        self.dwin_made = None  # reference: the device window made, not yet used (DWINDOW)
        if cfg.get("device_window") is True and self.device.type == "cuda":
            self.chan.accept_fds = True
        if cfg.get("input_window") is True:
            # Both workers, so that their exchanges cost the same
            # (stark_worker_delivery).
            self.chan.accept_fds = True
        self.events = None
        self.gate = None       # the timed call's gate kernel (stark_worker_gpu._gate)
        self.gate_error = None
        self.launch_buf = None  # the launch mode's buffer (TIMED_NOOP launches)
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
                self.started["cuda"] = time.monotonic()
                self.warming = threading.Thread(target=_warm_cuda,
                                                args=(self.device, self.started),
                                                name="stark-warm", daemon=True)
                self.warming.start()
                # The fused comparison's kernels, unless torch's is asked
                # for: compiled beside the loading (stark_fused.prepare),
                # tried on the device at the first large comparison.
                if role == "ref" and cfg.get("compare_kernel") is True:
                    self.fused_prep = stark_fused.prepare(self.device)

        self.started["made"] = time.monotonic()

    # -- loading ---------------------------------------------------------
    def _load_solution(self):
        # The solution gets no handle on the reference: the problem module
        # leaves sys.modules (this worker keeps its own reference to it).
        sys.modules.pop("stark_problem", None)
        # Trusted start-up first (torch's extension module, our loaders),
        # then the narrow filter, then the candidate.
        mode = self.cfg.get("build_mode") or (
            "build" if self.cfg["stage"] in ("compile", "all") else "load")
        build_dir = self.cfg.get("build_dir") or None
        try:
            stark_build.install(mode, build_dir)
        except stark_build.SetupError:
            # Only a solution that builds needs torch's extension module;
            # for one that does, the machine's lack is reported before any
            # of its code runs (the referee checks the claim: stark_env).
            if _builds(self.cfg["solution_src"]):
                raise
        # The fast format (stark_cuda) keeps its cubins in the build folder
        # too.  The run stage compiles what is missing itself: NVRTC is a
        # library (no exec), and this process runs the candidate's code
        # anyway, so compiling its CUDA source here adds no exposure.  The
        # run jail's build folder is read-only; new cubins then go to a
        # private folder of this evaluation (the referee made it and
        # removes it).
        dirs = [os.path.join(build_dir, "cuda")] if build_dir else []
        if self.cfg.get("cubin_dir"):
            dirs.append(self.cfg["cubin_dir"])
        os.environ["STARK_CUDA_CACHE"] = os.pathsep.join(dirs)
        os.environ["STARK_CUDA_MODE"] = "compile" if self.cfg["stage"] == "compile" else "auto"
        self._restrict_exec()
        lang = self.cfg.get("language") or "cuda"
        folder = self.cfg.get("lang_dir")
        if stark_triton.use_file(lang) and folder:
            # Read through inspect: imported from a real file, in this
            # evaluation's own folder (Triton's cache beside it).
            if lang == "triton":
                self.jit_cache = stark_triton.prepare(folder, self.cfg.get("jit_cache"))
            _stark.narrow()
            return stark_triton.load(self.cfg["solution_name"], self.cfg["solution_src"],
                                     folder)
        _stark.narrow()
        return _exec_module("stark_solution", self.cfg["solution_name"],
                            self.cfg["solution_src"])

    def _restrict_exec(self):
        """Where the run jail allows exec for another reason than this
        candidate's language (the compiled reference's compiler), what
        this worker may execute is restricted further to what its
        language needs (cfg "cand_exec": Triton's tools, or nothing),
        before any of its code runs.  Landlock binds the calling thread
        and the threads and processes it makes from now on; the jail-wide
        restriction the referee set before this worker was forked still
        binds the threads CUDA started before.  Raises ExecRestrictError."""
        paths = self.cfg.get("cand_exec")
        if not isinstance(paths, list):
            return
        try:
            _stark.restrict_exec([p for p in paths if isinstance(p, str)])
        except OSError as e:
            raise ExecRestrictError(str(e))

    def _construct(self, cls, init_seed, on_device):
        """cls(*get_init_inputs()) with the weights' seed.  On a GPU the
        model is built with the device as the default device (torch 2.x),
        so its weights are made there and never pass through host memory
        (KernelBench's level 3 has models of 2.7 and 8.6 GB, beyond the
        run jail's host memory); a model that cannot be built that way (a
        constructor that needs host tensors) is built on the CPU and
        moved, as before.  Every worker builds the same way from the same
        seed, so the weights agree."""
        if on_device and self.device.type != "cpu" and hasattr(torch.device, "__enter__"):
            try:
                with torch.device(self.device):
                    return self._build(cls, init_seed, True)
            except BaseException as e:
                if is_oom(e) or not isinstance(e, Exception):
                    raise
        return self._build(cls, init_seed, on_device)

    def _build(self, cls, init_seed, on_device):
        torch.manual_seed(init_seed)
        random.seed(init_seed)
        init = list(self.problem.get_init_inputs())
        torch.manual_seed(init_seed)
        model = cls(*init)
        if on_device:
            model = model.to(self.device)
        if self.dtype is not None and isinstance(model, torch.nn.Module):
            # --precision: weights cast as KernelBench's harness casts them
            # (model.to(dtype)), in both workers alike.
            model = model.to(dtype=self.dtype)
        return model, init

    def _copy_weights(self, model, init_seed):
        """Copies the reference's parameters and buffers into the candidate
        where names and shapes agree, so both compute with equal weights."""
        if not isinstance(model, torch.nn.Module):
            return 0
        # Built as the reference worker built it (on the device, where it
        # can be), so the weights are the same ones.
        ref, _ = self._construct(self.problem.Model, init_seed, True)
        ref_state = ref.state_dict()
        n = 0
        with torch.no_grad():
            for k, v in model.state_dict().items():
                r = ref_state.get(k)
                if (isinstance(r, torch.Tensor) and isinstance(v, torch.Tensor) and
                        r.shape == v.shape and r.dtype == v.dtype):
                    v.copy_(r.to(v.device))
                    n += 1
        del ref, ref_state
        if self.device.type == "cuda":
            torch.cuda.empty_cache()    # the copy's blocks back to the device
        return n

    def cmd_load(self, args):
        t0 = time.monotonic()
        try:
            reply, err = self._load(args)
        finally:
            if self.warming is not None:
                self.warming.join(WARM_WAIT_S)
                self.warming = None
        if err is not None and (err.get("type") in OOM_TYPES or
                                "out of memory" in str(err.get("message", ""))[:2000]):
            err["oom"] = self.oom_facts(err.get("message", ""))
        if reply is not None:
            reply["load_s"] = time.monotonic() - t0
            mem = self.mem_facts()
            if mem:
                reply["mem"] = mem
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
            return {"stochastic": _stochastic(self.model)}, None
        phase = "load"
        try:
            sol = self._load_solution()
            failures = stark_build.state["failures"]
            if failures:
                return None, self._build_failed()
            phase = "construct"
            cls = getattr(sol, "ModelNew", None)
            if cls is None or not callable(cls):
                return None, _no_model_new()
            reuses = isinstance(cls, type) and issubclass(cls, self.problem.Model)
            self.model, _ = self._construct(cls, init_seed, True)
            copied = self._copy_weights(self.model, init_seed)
        except stark_build.SetupError as e:
            return None, _setup_failed(e)
        except ExecRestrictError as e:
            return None, {"phase": "jail", "type": "ExecRestrictError", "traceback": "",
                          "message": "cannot restrict what the candidate's worker may "
                          "execute: %s" % e}
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
                "cuda": any(x.get("cuda") for x in f), "build": stark_build.summary()}

    def cmd_compile(self):
        """Compile stage: the solution's top level (which builds), then a
        best-effort construction on the CPU for builds made in __init__."""
        t0 = time.monotonic()
        try:
            sol = self._load_solution()
        except stark_build.SetupError as e:
            return None, _setup_failed(e)
        except BaseException as e:
            if stark_build.state["failures"]:
                return None, self._build_failed()
            return None, _error("load", e)
        if stark_build.state["failures"]:
            return None, self._build_failed()
        cls = getattr(sol, "ModelNew", None)
        if cls is None or not callable(cls):
            return None, _no_model_new()
        try:
            self._construct(cls, 0, False)
        except BaseException:
            pass        # the run stage reports it
        if stark_build.state["failures"]:
            return None, self._build_failed()
        return {"load_s": time.monotonic() - t0, "build": stark_build.summary()}, None

    def check_copy_bytes(self):
        """Inputs or outputs up to this many bytes are copied for the
        mutation and late-write checks, larger ones summed by
        stark_tensors.weighted_digest: a copy of an 8 GiB input would take 8
        GiB more of the device for a check."""
        return COPY_CHECK_BYTES

    # -- calls -----------------------------------------------------------
    def _forward(self):
        with torch.no_grad():
            return self.model(*self.inputs)

    def cmd_call(self, args, digest=True):
        """One call of forward on this call's inputs (on a GPU, timed);
        with `digest`, the digests of its outputs for the reply (a profiled
        call has none: its operators are the model's alone)."""
        self.outputs = None
        self.kept = None
        self.exact = None
        self.exact_j = None
        jit0 = stark_triton.compiled(self.jit_cache, self.jit_memo) if self.jit_cache else None
        if self.device.type == "cuda":
            # The pool's context is entered and left outside the timed
            # span.
            t_jit = time.monotonic()
            with self._in_slot():
                self.outputs, info = self._timed(self._forward, args.get("gate_us"))
            if jit0 is not None:
                # Kernels Triton compiled during this call (diagnostics).
                new = stark_triton.compiled(self.jit_cache, self.jit_memo) - jit0
                info["jit"] = {"new": new, "ms": round((time.monotonic() - t_jit) * 1e3, 1)}
            out = self.outputs
            items = list(out) if isinstance(out, (tuple, list)) else [out]
            if digest:
                h = time.perf_counter()
                info["digest"] = [T.output_digest(t) for t in items[:W.MAX_TENSORS]]
                info["host_us"].append(round((time.perf_counter() - h) * 1e6, 1))
        else:
            self.outputs = self._forward()
            info = {}
        # A timed call (one queued behind a gate) sends no memory figures:
        # reading them (torch's allocator statistics, four times over, and
        # the driver's free memory) took the worker 500-1,000 us on an H100,
        # inside the referee's clock of the exchange and varying with the
        # host's load, which swayed the wall-clock bound on a 48 us kernel.
        # The memory plan rests on the untimed calls' figures; the peak the
        # timed calls reach is in the next reading.
        mem = {} if args.get("gate_us") else self.mem_facts()
        if mem:
            info["mem"] = mem
        if self.role == "ref" and isinstance(args.get("repeat"), dict):
            n0 = self.ooms_total()
            try:
                room = args.get("repeat_room")
                info["repeat"] = self.repeat_check(args["repeat"],
                                                   room if type(room) is bool else None)
            except Exception as e:
                if not is_oom(e):
                    raise
                # No room for a second run: no check (the trial goes on),
                # and the error the evaluator's own (mem_facts' "ooms").
                self.ooms_ours += max(self.ooms_total() - n0, 0)
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
                info["repeat"] = {"skipped": "out of memory"}
        return info

    def after_call(self):
        """Right after the reply to CALL: a copy of the outputs as they were
        when forward returned (a weighted digest of each, where they pass
        check_copy_bytes).  FETCH sends this copy and reports whether the
        live outputs changed since (work finished behind the clock)."""
        out = self.outputs
        items = list(out) if isinstance(out, (tuple, list)) else [out]
        plain = [type(t) is torch.Tensor and t.layout is torch.strided for t in items]
        size = sum(t.numel() * t.element_size() for t, p in zip(items, plain) if p)
        if size > self.check_copy_bytes():
            # Large outputs: a weighted digest of each instead of a copy.
            self.snapshot = [T.weighted_digest(t) if p else None for t, p in zip(items, plain)]
        else:
            self.snapshot = [t.detach().clone() if p else None for t, p in zip(items, plain)]

    def cmd_profile(self):
        """Runs forward once under the autograd profiler and returns the
        names of the operators it dispatched (for the calls_reference_op
        flag); the outputs are kept for FETCH like after CALL."""
        cuda = self.device.type == "cuda"
        prof = None
        # Device time per operator where the profiler can record it
        # (kineto's CUDA activity: use_device in torch 2.x, use_cuda
        # before); host time otherwise.
        for kw in ({"use_device": "cuda"}, {"use_cuda": True}) if cuda else ():
            try:
                p = torch.autograd.profiler.profile(**kw)
                p.__enter__()
                prof = p
                break
            except Exception:
                continue
        if prof is None:
            prof = torch.autograd.profiler.profile()
            prof.__enter__()
        t0 = time.perf_counter()
        try:
            self.cmd_call({}, digest=False)
            if cuda:
                torch.cuda.synchronize(self.device)
        finally:
            wall_us = (time.perf_counter() - t0) * 1e6
            prof.__exit__(None, None, None)
        return _op_times(prof.function_events, wall_us)

    # -- the loop --------------------------------------------------------
    def serve(self):
        chan = self.chan
        caps = {W.LOAD: 1 << 16, W.COMPILE: 1 << 16, W.GEN: 1 << 20, W.CALL: 1 << 12,
                W.SCAN: 64, W.FETCH: 64, W.PUT: 64, W.COMPARE: W.HEADER_MAX, W.FLUSH: 64,
                W.TIMED_NOOP: 64, W.DEVICE_INFO: 1 << 12, W.PING: 0, W.PSTATS: 0, W.QUIT: 0,
                W.PROFILE: 0, W.PLAN: 1 << 12, W.COMPILE_REF: 1 << 12, W.DWINDOW: 64,
                W.INWIN: 1 << 20, W.IPC: 1 << 20}
        phases = {W.LOAD: "load", W.GEN: "inputs", W.COMPARE: "compare",
                  W.FLUSH: "device", W.DEVICE_INFO: "device", W.IPC: "device"}
        while True:
            kind, payload = chan.recv(caps)
            t_recv = time.perf_counter()
            fd = chan.take_fd()
            if kind == W.DWINDOW:
                self.cmd_dwindow(payload, fd)
                continue
            if kind == W.INWIN:
                self.cmd_inwin(payload, fd)
                continue
            if fd >= 0:
                os.close(fd)
            if kind == W.QUIT:
                return
            if kind == W.PING:
                chan.send(W.OK)
                continue
            if kind == W.PSTATS:
                chan.send_json(W.OK, {"text": W.profile_text(_PROF) if _PROF else ""})
                continue
            if kind in (W.FETCH, W.PUT):
                try:
                    args = json.loads(payload) if payload else {}
                    args = args if isinstance(args, dict) else {}
                    if kind == W.FETCH:
                        self.cmd_fetch(args)
                    else:
                        self.cmd_put(args)
                except W.WorkerGone:
                    raise
                except BaseException as e:
                    err = _error("fetch", e)
                    if is_oom(e):
                        err["oom"] = self.oom_facts(e)
                    chan.send_json(W.ERR, err)
                continue
            args = json.loads(payload) if payload else {}
            # CALL and PROFILE keep what FETCH needs of their outputs for
            # its late-write check (after_call); a call of the compiled
            # reference keeps nothing.  Nor does a CALL on a GPU: its reply
            # carries its outputs' digests, which the reference checks
            # against the bytes it is sent (the stronger check: made before
            # the reply, not after), so the copy or the two weighted digests
            # of the outputs were work for nothing (14 ms a timed pair at 2
            # GiB on an H200).  Nor a CALL after a "light" GEN (the
            # reference's timed pairs: its FETCH says nothing of late writes).
            keeps = kind == W.PROFILE or (kind == W.CALL and self.device.type != "cuda"
                                          and not self.light)
            if kind == W.CALL and not keeps:
                self.snapshot = None
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
                    info, err = self.cmd_timed_noop(args), None
                elif kind == W.IPC:
                    info, err = self.cmd_ipc(args), None
                elif kind == W.DEVICE_INFO:
                    info, err = self.cmd_device_info(args), None
                elif kind == W.PLAN:
                    info, err = self.cmd_plan(args), None
                elif kind == W.COMPILE_REF and self.role == "ref":
                    info, err = self.cmd_compile_ref(args), None
                elif kind == W.CALL and self.role == "ref" and args.get("compiled") is True:
                    info, err = self.compiled_call(args), None
                    keeps = False
                else:
                    info, err = self.cmd_call(args), None
            except W.WorkerGone:
                raise
            except BaseException as e:
                info, err = None, _error(phases.get(kind, "forward"), e)
                if is_oom(e):
                    err["oom"] = self.oom_facts(e)
            if err is not None:
                chan.send_json(W.ERR, err)
                continue
            if kind == W.CALL and isinstance(info, dict) and "host_us" in info:
                # The worker's own time from the request to its reply
                # (diagnostics, like host_us: the referee's clock is the
                # evidence; the rest of its exchange is the transport).
                info["exch_us"] = round((time.perf_counter() - t_recv) * 1e6, 1)
            chan.send_json(W.OK, info)
            if keeps:
                try:
                    self.after_call()
                except BaseException:
                    self.snapshot = None


def _op_times(events, wall_us):
    """The profiled call's operators: their names (ops), and per name its
    count and self time in us (times: {name: [count, us]}: device time
    where the profiler recorded any, else host time), with the call's wall
    time (wall_us) and which time it is (clock)."""
    rows = []
    dev_total = 0.0
    for e in events:
        host = getattr(e, "self_cpu_time_total", 0.0)
        dev = getattr(e, "self_device_time_total", None)
        if not isinstance(dev, (int, float)):
            dev = getattr(e, "self_cuda_time_total", 0.0)
        host = float(host) if isinstance(host, (int, float)) else 0.0
        dev = float(dev) if isinstance(dev, (int, float)) else 0.0
        dev_total += dev
        rows.append((str(e.name)[:120], host, dev))
    use_dev = dev_total > 0.0
    times = {}
    for name, host, dev in rows:
        c = times.setdefault(name, [0, 0.0])
        c[0] += 1
        c[1] += dev if use_dev else host
    names = sorted(times)[:4000]
    return {"ops": names, "times": {k: times[k] for k in names[:1000]},
            "wall_us": wall_us, "clock": "device" if use_dev else "host"}


WARM_WAIT_S = 60.0


def local_device(name):
    """The torch device in this process for the request's device name.
    The run jail shows the assigned GPU's node alone (evalrun_gpu_minor),
    so cuda:N is this process's only device, cuda:0; without a jail
    (--insecure) every GPU is seen, numbered as nvidia-smi numbers them
    (PCI bus order), and cuda:N stays itself."""
    dev = torch.device(name)
    if dev.type != "cuda" or not dev.index:
        return dev
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")   # read at cuInit
    try:
        n = torch.cuda.device_count()
    except Exception:       # no driver: the device check says so later
        return dev
    return torch.device("cuda", 0) if n == 1 else dev


def _warm_cuda(dev, started):
    """The first uses of CUDA every evaluation makes: the kernels behind
    get_inputs(), elementwise work, a copy, a synchronize.  A generator of
    its own: the default one's state belongs to the main thread (the
    weights and inputs are seeded).  Failures are left for the loading to
    meet and report.  When it ends goes in started["warmed"]
    (Worker.started, the referee's startup parts)."""
    try:
        g = torch.Generator(device=dev)
        x = torch.randn(1024, device=dev, generator=g)
        torch.rand(1024, device=dev, generator=g).mul_(x).add_(1.0)
        torch.empty(1024, device=dev).normal_(generator=g).cpu()
        torch.cuda.synchronize(dev)
    except BaseException:
        pass
    started["warmed"] = time.monotonic()


def _oom_first():
    """Workers go before the referee when the jail's memory runs out: the
    kernel's OOM killer then chooses a worker (the largest), and the
    referee lives to say whose it was.  Raising one's own score needs no
    privilege; where it fails, the kernel chooses by size alone."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


_T_MAIN = None          # when main began (Worker.started)
_PROF = None            # this process's cProfile.Profile, with STARK_PY_PROFILE=1


def main(sock, role, cfg, problem):
    """Entry point in the forked child; never returns."""
    global _T_MAIN, _PROF
    _T_MAIN = time.monotonic()
    code = 0
    if cfg.get("py_profile") is True:
        # STARK_PY_PROFILE=1: where this process's wall time goes (PSTATS).
        # A diagnostic: where a profiler cannot run here, none.
        import cProfile
        try:
            _PROF = cProfile.Profile()
            _PROF.enable()
        except Exception:
            traceback.print_exc()
            _PROF = None
    _oom_first()
    if type(cfg.get("crash_fd")) is int:
        # A fatal signal (a fault in native code: the candidate's, a
        # library's) writes this thread's Python frames to the referee's
        # memfd, then ends the worker with that signal as before (the
        # referee names both: stark_referee_workers.crash_frames).
        try:
            faulthandler.enable(file=cfg["crash_fd"], all_threads=False)
        except Exception:
            pass
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
