"""stark_referee -- the trusted half of the evaluator: loads the problem,
drives the workers, times both models, and decides.

evaluate(req) is called by the C side with the request as a dict (without
the secret seed) and returns the result as a dict that the C side checks and
encodes for the orchestrator.  The referee never runs candidate code: the
solution's top level, its native builds and its forward all run in a forked
candidate worker (stark_worker).  The referee holds what must not be
forgeable -- the master seed (asked of the C side only after the workers are
forked, so no worker's memory ever held it), the clock, and the verdict --
and it reads nothing from a worker but capped JSON and tensor bytes whose
dtype and shape it has validated.

The process is made non-dumpable before any worker exists, so workers
(same user, same namespaces when unjailed) cannot ptrace it or read its
/proc/PID/mem.

The referee is one object, an Evaluation, made of parts by concern, each
in a module of its own with the trust notes of what it does:
  stark_referee_common    Verdict, the result's limits, seeds, readers of
                          what workers report
  stark_referee_workers   forking, stopping and talking to the workers
  stark_referee_data      one pair's data path: inputs, the output window
  stark_referee_delivery  a timed pair's inputs written into the stopped
                          candidate (the input window)
  stark_referee_compare   tolerances, the comparison, the float64 recheck
  stark_referee_lock      the GPU lock shared by evaluations
  stark_referee_memory    device memory: the plan, admission, whose fault
                          running out of it is (stark_memory: the model
                          and the ledger)
  stark_referee_timing    the timing method and the timing phase
  stark_referee_modes     the workers' launch modes: read, and matched
  stark_referee_readings  what timed readings mean (claims, guard, roofline)
  stark_referee_checks    integrity checks, probes and flags
  stark_referee_build     the build folder and key, the build cache's
                          answer, and whose fault a failed build is
  stark_referee_verdicts  KernelBench's verdict beside stark's, and which
                          decides
  stark_referee_baseline  the compiled baseline: the reference also timed
                          under torch.compile (stark_compiled)
This module holds the evaluation's flow (Evaluation.evaluate) and the
result.
"""

import importlib
import os
import shutil
import sys
import tempfile
import time
import types

import torch

import _stark
import stark_cuda
import stark_fused
import stark_lang
import stark_rand
import stark_triton
import stark_wire as W
import stark_worker_memory
from stark_referee_baseline import Baseline
from stark_referee_build import Builds
from stark_referee_checks import Checks
from stark_referee_common import LIMITS, Verdict, cut, derive, dict_field, fmt_us, int_field, number
from stark_referee_compare import Comparison
from stark_referee_cpus import TimingCpus
from stark_referee_data import DataPath
from stark_referee_delivery import InputDelivery
from stark_referee_ipc import IpcInputs
from stark_referee_lock import LOCK_FD, GpuLock, lock_usable, queue_allowance
from stark_referee_memory import MemoryPlan
from stark_referee_modes import LaunchModes
from stark_referee_timing import SPIN_START_US, Timing
from stark_referee_verdicts import Verdicts
from stark_referee_workers import Workers, py_profile_wanted

DEADLINE_MARGIN_S = 0.5       # left to report after the last wait


# -- zygote support ----------------------------------------------------------

PREWARM = {}
PREWARM_IMPORTS = (
    "ctypes", "errno", "fcntl", "hashlib", "importlib.util", "io", "json", "platform",
    "select", "shutil", "socket", "stat", "struct", "subprocess", "tempfile", "threading",
    "traceback", "numpy", "torch.nn", "torch.nn.functional", "torch.autograd.profiler",
    "torch.profiler", "torch.utils._device",
)


def prewarm():
    """Called from C once, after the harness loads and before any
    evaluation forks from this process: imports what the referee and the
    workers import later, loads NVRTC and makes the footprint estimate's
    first use on the meta device (stark_worker_memory.warm_meta: seconds a
    process under torch 2.11) and checks KernelBench's inputs' engine
    (stark_rand.check), so each forked evaluation starts with them in
    memory.  It must not initialize
    CUDA (nor NVML): a CUDA runtime initialized before fork is unusable in
    every forked child.  Importing torch does not initialize it; NVRTC is
    loaded but not used (a compile before fork broke CUDA in the children
    on CUDA 13).  Not imported:
    torch.utils.cpp_extension, which initializes CUDA under torch 2.x (the
    workers import it).  Never raises; returns what it did (PREWARM)."""
    t0 = time.monotonic()
    try:
        missing = []
        for name in PREWARM_IMPORTS:
            try:
                importlib.import_module(name)
            except Exception as e:
                missing.append("%s (%s)" % (name, type(e).__name__))
        PREWARM["imports"] = "ok" if not missing else "missing " + ", ".join(missing)
        try:
            # Loaded, never used: on the H100 (CUDA 13) a process forked
            # after an NVRTC compile could not initialize CUDA any more
            # ("CUDA driver initialization failed"), while loading the
            # library and asking its version leave children intact.
            t1 = time.monotonic()
            PREWARM["nvrtc"] = "nvrtc %s loaded, %.0f ms" % (
                stark_cuda.nvrtc_version(), (time.monotonic() - t1) * 1e3)
        except Exception as e:
            PREWARM["nvrtc"] = ("unavailable: %s: %s" % (type(e).__name__, e))[:200]
        # The meta estimate's first use (imports, registrations: seconds
        # a process under torch 2.11), made once here for every fork.
        PREWARM["meta"] = stark_worker_memory.warm_meta()
        # KernelBench's inputs' engine checked against this torch once
        # (stark_rand.check: 36 ms on the development machine), not in
        # every forked worker.
        PREWARM["kb_rand"] = stark_rand.check() or "checked"
        if torch.cuda.is_initialized():
            PREWARM["cuda"] = "initialized before fork: workers cannot use CUDA"
    except BaseException as e:
        PREWARM["error"] = ("%s: %s" % (type(e).__name__, e))[:200]
    PREWARM["ms"] = "%.0f" % ((time.monotonic() - t0) * 1e3)
    return dict(PREWARM)


class Evaluation(Workers, Builds, DataPath, InputDelivery, IpcInputs, Comparison, GpuLock,
                 TimingCpus, MemoryPlan, Timing, LaunchModes, Checks, Verdicts, Baseline):
    """One evaluation: the flow is evaluate(); the parts it calls are the
    mixins' (see the module's docstring)."""

    def __init__(self, req):
        self.req = req
        self.t_start = _stark.start_ns() / 1e9
        self.queue_init(self.t_start + req["wall_ms"] / 1000.0 - DEADLINE_MARGIN_S)
        self.wall_s = req["wall_ms"] / 1000.0
        self.stage = req["stage"]
        self.problem = None
        self.workers = []
        self.ref = None
        self.cand = None
        self.ref_stochastic = []    # the reference's random modules (LOAD's "stochastic")
        self.tmp_cache = None
        self.seed = None
        self.res = {"status": "error", "message": "", "log": "", "flags": [],
                    "env": {}, "trials_run": 0, "trials_passed": 0,
                    "stage_ms": {}}
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.ref_call_max_ns = 0
        self.pair_max_s = 0.0
        self.spin_us = SPIN_START_US
        self.spin_seen = []             # spins queued (us), for the result
        self.spin_error = None
        self.spin_short = 0             # timed calls whose launching outlasted the gate
        self.launch_us = {"ref": [], "cand": [], "compiled": []}  # host time to the last launch
        self.input_bytes = 0
        self.kb_gen_s = 0.0             # KernelBench's inputs made (gen_cpu_made)
        self.kb_gens = {True: 0, False: 0}  # ... one worker after the other, both at once
        self.kb_ref_hwm = 0             # the reference worker's peak after making them alone
        self.output_bytes = 0
        self.placements = 0         # memory placements the calls rotate through
        self.scanned = 0            # placements the scan chose them from
        self.plain_mag = []         # outputs' mean magnitudes on plain inputs
        self.ref_facts_seen = {}    # integrity facts the reference's calls showed
        self.ref_full_fetches = 0   # its output headers read with them (fetch_ref)
        self.compared = False
        self.rechecked = 0          # comparisons passed on the float64 recheck
        self.recheck_err = 0.0      # the largest reference error they allowed for
        self.build = {}
        self.build_dir = None       # the workers' build folder (stark_build)
        self.build_mode = None      # None: by stage; "load": a cached build
        self.cuda = str(req["device"]).startswith("cuda")
        self.tmp_cubin = None
        self.language = "cuda"      # the candidate's kernel language (stark_lang)
        self.lang_dir = None        # its file and Triton's cache (file languages)
        self.jit_seen = [0, 0.0, 0]  # Triton kernels compiled, ms, calls
        self.jit_cache = None       # Triton's cache: the orchestrator's jit_dir
        self.jit_cold = False       # it started empty: publish it afterwards
        self.lock_fd = None
        self.window_fd = None           # the output window (stark_wire)
        self.window_size = 0
        self.window_cap = W.window_capacity()   # its capacity: one chunk
        self.dwin_state = None          # the device window: None (not tried), "on", "off"
        self.delivered = [0, 0]         # timed pairs whose inputs were delivered, not
        self.cold_rts = {}              # role -> their round trips from a stop, ns
        self.chunks = 0                 # most chunks an output streamed in
        self.lock_held = None       # "ex", "sh" or None
        self.lock_wait = {}         # seconds waited for the GPU lock, by mode
        self.held_ms = {}           # ms the GPU lock was held, by step (env gpu_held_ms)
        self.held_calls = {}        # the calls' kernel ms within (env gpu_held_calls_ms)
        self.spent = {}             # seconds by part of a pair (env pair_ms)
        # The reference worker's own time in the comparisons (env compare_ms):
        # chunks, ms copying them out of the window, ms judging them.
        self.cmp_work = [0, 0.0, 0.0]
        self.host_hwm = {}          # workers' peak resident host memory, sampled
        self.mem_init()
        self.flag_why = {}          # flag -> why, for the message
        self.precision_seen = []    # (what, output, statistics) of judged calls
        self.below_tol = {}         # output -> (largest expected value, atol) under it
        self.lenient = False        # stark's verdict failed; timed for KernelBench's
        self.kb = None              # KernelBench's verdict (kernelbench_trials)
        self.stark_failure = None   # stark's failed verdict, when it failed
        self.baseline_init()

    # -- the flow -------------------------------------------------------
    def run(self):
        prof = None
        if py_profile_wanted():
            # Where this process's wall time goes (env.py_profile_referee;
            # the workers': Workers.worker_profiles).
            import cProfile
            prof = self.py_prof = cProfile.Profile()
            prof.enable()
        try:
            try:
                self.evaluate()
            except Verdict as v:
                self.res["status"] = v.status
                self.res["message"] = v.message
                self.res["log"] = v.log
                self.res.update(v.fields)
        finally:
            if prof is not None:
                prof.disable()
                self.res["env"]["py_profile_referee"] = W.profile_text(prof)
            self.sample_host()
            for w in self.workers:
                w.cont()
            self.worker_profiles()
            self.stop_workers()
            _ENDING.append(self)
        self.finish()
        return self.res

    def evaluate(self):
        """The evaluation's flow, which ends by raising its Verdict: stark's
        trials; when they passed, the probes and the timing; KernelBench's
        trials (its inputs, cast to float32 whatever the problem's dtypes,
        can crash a kernel that reads integers; nothing of stark's verdict
        runs after them); both verdicts recorded (decide); when only
        KernelBench's passed, the candidate is timed after it; the shape
        probe last, for a flag only, and only where KernelBench's trials
        left both workers usable."""
        self.start_up()
        if self.stage == "compile":
            self.stage_compile()
        self.plan_memory()
        t = time.monotonic()
        if self.match_modes():
            self.startup_part("modes", t)
        self.ipc_selftest()
        self.load_models()
        stark = None
        try:
            self.check_trials()
        except Verdict as v:
            if v.check is not None or v.status not in ("incorrect", "runtime_error"):
                raise
            stark = v
        if stark is None:
            self.probes_and_timing()
        t0 = time.monotonic()
        kb = self.kernelbench_trials()
        self.res["env"]["kb_ms"] = "%.0f" % ((time.monotonic() - t0) * 1e3)
        self.decide(stark, kb)
        if stark is not None:
            # stark's verdict failed and KernelBench's passed: timed for
            # KernelBench's (fast_p under its verdict).
            self.probes_and_timing()
        elif (kb["status"] in ("correct", "incorrect", "error", "") and
              all(w.reap() is None for w in (self.ref, self.cand))):
            # Last of all: a call at another shape can leave a worker
            # unusable (a device-side assert poisons its CUDA context), and
            # nothing may run after it that a verdict depends on.  Not
            # after KernelBench's trials broke the candidate's worker: its
            # failure here would be theirs (an `error` there is the
            # reference's, whose failure here only skips the probe).
            t0 = time.monotonic()
            self.gpu_optional(self.probe_shape, "shape_probe", "the call at another shape",
                              "shape")
            if "probe_ms" in self.res["env"]:
                self.res["env"]["probe_ms"] += "/%.0f" % ((time.monotonic() - t0) * 1e3)
        else:
            self.res["env"]["shape_probe"] = (
                "not run: KernelBench's trials ended %s, after which a worker is gone or "
                "may be unusable" % kb["status"])
        self.note_below_tolerance()
        raise self.final_verdict()

    def probes_and_timing(self):
        """The probes (operators; precision and shape only for a candidate
        stark's trials passed) and the timing phase."""
        t0 = time.monotonic()
        with self.gpu_shared("the operator probe", "probes"):
            self.probe_ops()
        t1 = time.monotonic()
        if not self.lenient:
            # Precision is stark's question about a candidate it passed.
            with self.gpu_shared("the precision probe", "probes"):
                self.probe_precision()
            self.judge_precision()
        t2 = time.monotonic()
        if self.req["timing"]:
            self.time_models()
        # The probes' cost, which stage_ms leaves out: ops and precision
        # (the shape probe's comes after KernelBench's trials: evaluate).
        self.res["env"]["probe_ms"] = "%.0f/%.0f" % ((t1 - t0) * 1e3, (t2 - t1) * 1e3)

    # -- its steps -------------------------------------------------------
    def start_up(self):
        """The problem loaded, the private folders made, the workers
        forked, and only then the secret seed taken."""
        # Before this process opens anything: fd 4, if open, is the GPU lock
        # the orchestrator passed (the workers never hold it: fork_worker
        # closes every descriptor but their socket).
        self.startup_part("before", self.t_start)
        if lock_usable(LOCK_FD):
            self.lock_fd = LOCK_FD
            # The GPU is shared: its queue may move the deadline on, as far
            # as the orchestrator allows for the evaluations sharing it.
            self.queue_allow_s = queue_allowance(self.req, self.wall_s)
        self.env_facts()
        # Off the timing CPUs, as the workers forked below will be.
        self.cpus_start()
        # No CUDA call here (torch.cuda.is_available() included): a CUDA
        # runtime initialized before fork is unusable in the workers.  The
        # reference worker reports a missing device.
        t = time.monotonic()
        self.load_problem()
        self.startup_part("load", t)
        self.check_language()
        if self.stage == "run":
            self.build_dir = self.req["build_dir"] or None
        else:
            self.plan_build()
        if self.stage == "run":
            # Where the candidate worker's NVRTC builds go when the shared
            # cache is read-only (the run jail's).
            try:
                self.tmp_cubin = tempfile.mkdtemp(prefix="stark-cubin-")
            except OSError:
                self.tmp_cubin = None
        _stark.set_dumpable(False)
        t = time.monotonic()
        if self.stage != "compile":
            self.window_fd = W.window_create()
            self.ref = self.spawn("ref")
        self.cand = self.spawn("cand")
        self.startup_part("spawn", t)
        # Only now, with every worker forked, does the secret enter memory.
        self.seed = _stark.secret_seed()
        self.res["stage_ms"]["startup_ms"] = (time.monotonic() - self.t_start) * 1e3

    def startup_part(self, name, t0):
        """Adds a part of the startup stage, from t0 (time.monotonic) to
        now, to env.startup_parts_ms: before (the process's start to its
        first step), load, spawn, plan (the footprint on the meta device,
        the reference's worker ready: its steps are the ref_ parts,
        stark_referee_memory.note_started), shape, admit (the memory
        ledger's wait)."""
        env = self.res["env"]
        part = "%s %.0f" % (name, (time.monotonic() - t0) * 1e3)
        env["startup_parts_ms"] = (env["startup_parts_ms"] + " " + part
                                   if env.get("startup_parts_ms") else part)[:300]

    def env_facts(self):
        env = self.res["env"]
        env["python"] = "%d.%d.%d" % sys.version_info[:3]
        env["torch"] = torch.__version__
        env["device"] = self.req["device"]
        env["threads"] = str(torch.get_num_threads())
        env["jailed"] = "1" if _stark.jailed() else "0"
        if PREWARM:
            env["prewarm"] = "; ".join("%s %s" % kv for kv in sorted(PREWARM.items()))[:500]
        try:
            with open("/proc/cpuinfo", "r") as f:
                for line in f:
                    if line.startswith("model name"):
                        env["cpu"] = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass

    def check_language(self):
        """The candidate's language, declared or read from its source (never
        run); `error` where this machine cannot judge it, before any of its
        code runs.  A file language's solution and Triton's cache get a
        folder of this evaluation (the jail's private /tmp)."""
        env = self.res["env"]
        declared = self.req.get("language") or "auto"
        lang, how = stark_lang.detect(self.req["solution_src"], declared)
        self.language = lang
        env["language"] = "%s (%s)" % (lang, how)
        if lang == "triton":
            # For the orchestrator: the key of Triton's cache (pool/evalpair.c)
            env["jit_toolchain"] = stark_triton.fingerprint()
        env["input_precision"] = self.req.get("precision") or "fp32"
        lack = stark_lang.missing(lang, self.req["device"])
        if lack:
            raise Verdict("error", lack)
        if declared != "auto":
            # A package of another known language that the source imports
            # and this machine lacks is still the machine's lack.
            seen, why = stark_lang.detect(self.req["solution_src"], "auto")
            lack = seen != lang and stark_lang.missing(seen, self.req["device"])
            if lack:
                raise Verdict("error", "%s (the solution %s)" % (lack, why))
        if _stark.jailed() and self.stage != "compile":
            self.restrict_exec(lang)
        if stark_triton.use_file(lang):
            # (the compile stage too: a solution that also builds with
            # load_inline runs its top level, decorators included, there)
            try:
                self.lang_dir = tempfile.mkdtemp(prefix="stark-%s-" % lang)
            except OSError as e:
                raise Verdict("error", "cannot make the folder for the %s solution's file: "
                              "%s" % (lang, e))
            if lang == "triton" and self.stage != "compile":
                self.plan_jit_cache()

    def restrict_exec(self, lang):
        """In a run jail whose filter allows execve (req run_exec, the
        orchestrator's rule: a JIT language, or the compiled baseline's
        compiler), only the JIT's and the compiler's tools may be executed
        from now on: Landlock, set here before any worker is forked,
        inherited by all of them; the evaluation stops where it cannot be
        set (fail closed).  A Triton candidate in a jail without exec for
        its JIT (a language the orchestrator did not see) is `error`
        before its JIT would be killed for an exec."""
        if not self.req.get("jit_exec") and lang == "triton":
            raise Verdict("error", "this Triton candidate's imports were not seen by the "
                          "orchestrator, so its run jail allows no exec for Triton's JIT: "
                          "judge it with --language triton")
        if not self.req.get("run_exec"):
            return
        paths = self.exec_allowlist()
        self.jailed_restrict(paths)
        self.res["env"]["exec_allowed"] = cut(", ".join(
            p for p in paths if os.path.exists(p)), 500)
        if lang == "triton":
            try:
                folder = tempfile.mkdtemp(prefix="stark-cc-probe-")
            except OSError as e:
                raise Verdict("error", "cannot make a folder for the C compiler's check: %s" % e)
            try:
                why = stark_triton.probe_compiler(folder)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            if why:
                raise Verdict("error", "Triton's JIT could not build a launcher in the run jail "
                              "(checked before the candidate ran): %s; the files it may execute "
                              "are %s (the evaluator's restriction or this machine's compiler, "
                              "not the candidate's doing)" % (why, self.res["env"]["exec_allowed"]))

    def load_problem(self):
        name = self.req["problem_name"] or "problem.py"
        src = self.req["problem_src"]
        if not src.strip():
            raise Verdict("error", "the problem '%s' is empty" % name)
        mod = types.ModuleType("stark_problem")
        mod.__file__ = name
        sys.modules["stark_problem"] = mod
        try:
            code = compile(src, name, "exec", dont_inherit=True)
            exec(code, mod.__dict__)
        except BaseException as e:
            raise Verdict("error", "the problem '%s' does not load: %s"
                          % (name, _exc_line(e)), _tb(e))
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs")
                   if not callable(getattr(mod, n, None))]
        if missing:
            raise Verdict("error", "the problem '%s' does not define %s (KernelBench "
                          "format: class Model(nn.Module), get_inputs(), "
                          "get_init_inputs())" % (name, ", ".join(missing)))
        self.problem = mod

    def stage_compile(self):
        t0 = time.monotonic()
        self.talk(self.cand, "the compile stage", self.cand.chan.send_json, W.COMPILE,
                  {}, self.deadline)
        info = self.talk(self.cand, "the compile stage", self.expect_ok, self.cand,
                         "the compile stage")
        self.res["stage_ms"]["compile_ms"] = (time.monotonic() - t0) * 1e3
        self.build = dict_field(info, "build")
        self.built()
        raise Verdict("compiled", "the solution's native code is built (%d built, "
                      "%d from the cache)" % (int_field(self.build, "built"),
                                              int_field(self.build, "hits")))

    def load_models(self):
        # Not under the GPU lock: loading may build native code for a
        # minute, and what it runs on the GPU (a context, weights) is small.
        init_seed = derive(self.seed, "init")
        compiled = self.wants_compiled()
        # With the compiled baseline, the candidate's worker loads only once
        # the compiled reference is made: none of its code has run while
        # inductor writes and loads what it generates (stark_compiled).
        for w in (self.ref,) if compiled else (self.ref, self.cand):
            self.talk(w, "loading", w.chan.send_json, W.LOAD,
                      {"init_seed": init_seed}, self.deadline)
        t0 = time.monotonic()
        ref_info = self.talk(self.ref, "loading", self.expect_ok, self.ref,
                             "construction of Model")
        self.note_mem("ref", "load", ref_info)
        self.prepare_device()
        self.ref_stochastic = [str(x)[:80] for x in (ref_info.get("stochastic") or [])
                               if isinstance(x, str)][:4] if isinstance(ref_info, dict) else []
        if compiled:
            self.compile_reference(init_seed)
            self.talk(self.cand, "loading", self.cand.chan.send_json, W.LOAD,
                      {"init_seed": init_seed}, self.deadline)
            t0 = time.monotonic()
        info = self.talk(self.cand, "loading", self.expect_ok, self.cand,
                         "construction of ModelNew")
        self.note_mem("cand", "load", info)
        self.res["stage_ms"]["compile_ms"] = (time.monotonic() - t0) * 1e3
        self.build = dict_field(info, "build")
        if self.stage == "all":
            self.built()
        self.res["env"]["weights_copied"] = str(int_field(info, "weights_copied"))
        # The fast format's NVRTC builds while the candidate loaded, as its
        # worker counted them (diagnostics: that process runs its code).
        cub = dict_field(info, "cubins")
        if int_field(cub, "built") or int_field(cub, "cached"):
            self.res["env"]["cubins"] = "built %d in %.0f ms, cached %d" % (
                int_field(cub, "built"), number(cub.get("build_s")) * 1e3,
                int_field(cub, "cached"))
        if info.get("reuses_reference") is True:
            self.flag("reuses_reference")

    def prepare_device(self):
        """Beside the candidate's loading, and like loading outside the GPU
        lock (a context and a few small kernels): the reference's worker
        makes what the timing phase's readings need (the flush's buffer,
        NVML's handle; none without a timing) and, where the outputs are
        large enough for it (stark_fused.FUSED_MIN), readies the fused
        comparison, so that no hold of the GPU lock waits for them
        (DEVICE_INFO's prepare)."""
        if not self.cuda:
            return
        t0 = time.monotonic()
        est = (self.fp_estimated or {}).get("out", 0)
        info = self.command(self.ref, W.DEVICE_INFO,
                            {"prepare": True, "timing": bool(self.req["timing"]),
                             "compare": est >= stark_fused.FUSED_MIN},
                            "preparing the GPU's state")
        env = self.res["env"]
        errs = ["%s: %s" % (k, v) for k, v in info.items()
                if k.endswith("_error") and isinstance(v, str)]
        if errs:
            env["device_prepare"] = "; ".join(errs)[:600]
        if isinstance(info.get("kernel"), str):
            env["compare_kernel"] = info["kernel"][:400]
        env["device_prepare_ms"] = "%.0f" % ((time.monotonic() - t0) * 1e3)

    def check_trials(self):
        """The trials alternate between the problem's own inputs and the
        variant distribution (stark_tensors.vary_inputs), odd trials scaled."""
        trials = self.req["trials"]
        t0 = time.monotonic()
        first_fail = None
        took = []
        for t in range(trials):
            variant = t % 2 == 1
            what = "trial %d of %d%s" % (t + 1, trials, ", scaled inputs" if variant else "")
            t1 = time.monotonic()
            with self.gpu_shared(what, "trials"):
                # The first trial is judged for precision too (judge_precision).
                _, replies, _, bad = self.run_pair("trial-%d" % t, what, variant=variant,
                                                   repeat=t == 0,
                                                   judge={"precision": True} if t == 0 else None)
            if t == 0:
                self.check_repeat(replies["ref"].get("repeat"))
                self.replan_memory()
            took.append("%.0f" % ((time.monotonic() - t1) * 1e3))
            self.res["env"]["trial_ms"] = "/".join(took[:12])
            self.res["trials_run"] = t + 1
            if bad is None:
                self.res["trials_passed"] += 1
            elif first_fail is None:
                first_fail = bad
        self.res["stage_ms"]["check_ms"] = (time.monotonic() - t0) * 1e3
        if first_fail is not None:
            raise Verdict("incorrect", "%d of %d trials failed; %s"
                          % (trials - self.res["trials_passed"], trials, first_fail))

    # -- the result ------------------------------------------------------
    def note_below_tolerance(self):
        """env.below_tolerance: the outputs whose expected values all sit
        under the absolute tolerance (zeros would pass them elementwise:
        the scale rule judges them)."""
        if self.below_tol:
            self.res["env"]["below_tolerance"] = "; ".join(
                "output %d: every expected value under atol=%g (the largest %.3g): judged "
                "against its own scale too" % (i, atol, mx)
                for i, (mx, atol) in sorted(self.below_tol.items()))[:900]

    def timing_message(self):
        """The timings' part of the message ("" when timing was off)."""
        msg = ""
        r = self.res
        if self.req["timing"] and not r.get("reps"):
            msg += "; not timed: no time was left before the deadline"
        elif self.req["timing"]:
            npl = r["env"].get("timing_placements", "1")
            msg += ("; candidate %s [%s, %s], reference %s [%s, %s] (median, 95%% CI, "
                    "%d timed calls each%s): speedup %.3gx" % (
                        fmt_us(r["runtime_us"]), fmt_us(r["runtime_lo_us"]),
                        fmt_us(r["runtime_hi_us"]), fmt_us(r["ref_runtime_us"]),
                        fmt_us(r["ref_lo_us"]), fmt_us(r["ref_hi_us"]), r["reps"],
                        "" if npl == "1" else ", on the fastest of %s placements%s" % (
                            npl, "" if "timing_scanned" not in r["env"] else
                            " kept from %s scanned" % r["env"]["timing_scanned"]),
                        r["speedup"]))
            if self.mode_unmatched is not None:
                gap, forks = self.mode_unmatched
                msg += ("; the workers' launch modes stayed %.1f%% apart after %d forks (the "
                        "candidate's worker read the reference's model %s): on a launch-bound "
                        "model the speedup may be off by about that much" % (
                            abs(gap), forks, "faster" if gap < 0 else "slower"))
            msg += self.baseline_message()
        return msg

    def finish(self):
        r = self.res
        self.baseline_fields()
        self.jit_publish()
        if self.spent:
            # Where the pairs' time went (checks, timing, probes together).
            r["env"]["pair_ms"] = " ".join("%s %.0f" % (k, v * 1e3)
                                           for k, v in self.spent.items())[:200]
        if self.cmp_work[0]:
            r["env"]["compare_ms"] = self.work_text(self.cmp_work)
        if self.host_hwm:
            r["env"]["host_mem_mib"] = self.host_text()
        if self.chunks > 1:
            # Streamed: chunks of half the window, in its two slots in turn
            # (stark_referee_data.stream_compare).
            half = self.window_cap // 2 // W.WINDOW_ALIGN * W.WINDOW_ALIGN
            r["env"]["output_window"] = ("%d chunks of up to %d MiB" % (self.chunks, half >> 20)
                                         if half >= (1 << 20) else
                                         "%d chunks of up to %d bytes" % (self.chunks, half)) + \
                (" in two slots, written and compared at once" if self.cuda else
                 " in two slots")
        if self.compared:
            r["max_abs_err"] = self.max_abs
            r["max_rel_err"] = self.max_rel
        if self.rechecked:
            r["env"]["float64_recheck"] = (
                "%d comparisons passed against the reference run in float64; its own "
                "error up to %.3g" % (self.rechecked, self.recheck_err))
        b = self.build or {}
        if b:
            r["env"]["ext_built"] = str(int_field(b, "built"))
            r["env"]["ext_cached"] = str(int_field(b, "hits"))
            if isinstance(b.get("build_s"), (int, float)):
                r["env"]["ext_build_ms"] = "%.0f" % (b["build_s"] * 1e3)
            if isinstance(b.get("load_s"), (int, float)):
                r["env"]["ext_load_ms"] = "%.1f" % (b["load_s"] * 1e3)
            nv = _nvcc_note(b.get("nvcc"))
            if nv:
                r["env"]["ext_nvcc"] = nv
        r["message"] = cut(r["message"], LIMITS["message_max"] - 64)
        r["log"] = cut(r["log"], LIMITS["log_max"] - 1024)
        r["flags"] = r["flags"][:LIMITS["flags_max"]]
        # Room is left for the notes the C side adds.
        keep = LIMITS["env_max"] - 8
        if len(r["env"]) > keep:
            r["env"] = dict(list(r["env"].items())[:keep])
        # A value past the wire's limit would cost the whole result; each
        # is written within it, and this is the backstop.
        vmax = LIMITS.get("env_val_max", 1024)
        for k, v in r["env"].items():
            if isinstance(v, str) and len(v.encode()) > vmax:
                r["env"][k] = v.encode()[:vmax - 3].decode(errors="ignore") + "..."

    @staticmethod
    def work_text(w):
        """cmp_work (or a part of it) as env text."""
        return "chunks %d copy %.0f judge %.0f (in the reference's worker)" % tuple(w)

    def spend(self, part, t0):
        """Adds the time since t0 to a part of the pairs' cost; returns now."""
        t = time.monotonic()
        self.spent[part] = self.spent.get(part, 0.0) + (t - t0)
        return t


def _nvcc_note(recs):
    """env.ext_nvcc: how each .cu unit of the builds was compiled
    (stark_nvcc's records): "parallel host H s, device D s, final F s"
    (with what became of a precompiled prefix, where one was offered), or
    "plain: WHY"."""
    if not isinstance(recs, list):
        return ""
    parts = []
    for rec in recs[:8]:
        if not isinstance(rec, dict) or not isinstance(rec.get("mode"), str):
            continue
        if rec["mode"] != "parallel":
            parts.append(rec["mode"][:60])
            continue
        pch = rec.get("pch")
        parts.append("parallel host %.1f s, device %.1f s, final %.1f s%s%s" % (
            number(rec.get("host_s")), number(rec.get("device_s")),
            number(rec.get("final_s")),
            " (precompiled prefix: %s)" % pch[:40] if isinstance(pch, str) else "",
            "" if rec.get("rc") == 0 else ", exit %d" % int_field(rec, "rc")))
    return "; ".join(parts)[:200]


def _exc_line(e):
    if isinstance(e, SyntaxError):
        return "SyntaxError: %s (%s, line %s)" % (e.msg, e.filename, e.lineno)
    return "%s: %s" % (type(e).__name__, str(e)[:2000])


def _tb(e):
    return W.format_exc(e)


# Evaluations whose result is made and whose workers are killed but not yet
# reaped (after_result).
_ENDING = []


def _flush_std():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass


def evaluate(req):
    """Entry point from C: req is a dict (see pyembed.c); returns the
    result dict with every worker killed, and the C side sends it before
    it calls after_result(), which waits for them.  The C side leaves with
    _exit(), so buffered output is flushed here."""
    try:
        ev = Evaluation(req)
        res = ev.run()
        if res.get("status") == "error" and ev.mem_retry and not req.get("mem_alone"):
            res = _again_alone(ev, req, res)
        return res
    finally:
        _flush_std()


def _again_alone(ev, req, res):
    """An evaluation that ran out of device memory beside others, within
    what it planned (an estimate fell short: its own, or another's whose
    evaluation took more than it reserved) is the evaluator's failure: it
    is judged again from the start, alone on the GPU (the whole budget
    reserved, waiting for the others to finish), where the time left
    allows at least as long again as the first attempt took.  The result
    says so (env.mem_retried)."""
    now = time.monotonic()
    spent = now - ev.t_start
    if ev.deadline - now < max(spent, 10.0):
        res["env"]["mem_retried"] = ("no: %s; too little time left to judge it again alone"
                                     % ev.mem_retry)[:600]
        return res
    while _ENDING:
        _ENDING.pop().teardown()
    again = Evaluation(dict(req, mem_alone=True))
    again.queue_s = ev.queue_s          # one process, one deadline, one queue
    res2 = again.run()
    res2["env"]["mem_retried"] = ("judged again alone on the GPU: %s" % ev.mem_retry)[:600]
    return res2


def after_result():
    """The rest of the teardown, once the result is sent: the workers
    reaped, the private build folders removed."""
    while _ENDING:
        _ENDING.pop().teardown()
    _flush_std()
