"""stark_compiled -- the compiled reference (request "baseline" =
"compile"): the problem's Model under torch.compile (default mode), timed
beside the eager reference so that speedups are reported against both.

It lives in the reference worker, which runs nothing but problem code and
PyTorch's: torch.compile(model) shares the eager model's parameters, so it
costs no second copy of the weights.  The referee asks for it (COMPILE_REF)
right after the reference is built and before the candidate's worker is
told to load anything, so no candidate code has run when inductor writes
and loads the code it generates:

  - inductor's and Triton's caches, home, dump and override folders are a
    folder of this evaluation (the run jail's private /tmp), made by the
    referee; remote caches are off and settings that would change what is
    compiled are not inherited;
  - inductor compiles lazily at the first call: the warm-up calls go on
    until a call compiles nothing more (dynamo's frame counter), so no
    compilation lands in a timed call;
  - the folder is then removed: the shared objects inductor built are
    mapped by the worker, and a file that is still reachable could be
    rewritten under the mapping by the candidate's worker, which shares the
    jail's /tmp.  Once unlinked nothing names them;
  - from then on dynamo may not compile again (error_on_recompile), and a
    timed call that compiled anyway (its frame counter moved) ends the
    compiled baseline for this evaluation.

inductor execs the C++ compiler (CPU kernels) and Triton's ptxas and the C
compiler (GPU kernels): the run jail allows exec for such an evaluation and
the referee restricts with Landlock what may be executed to exec_paths()
before any worker is forked; the candidate's worker restricts itself
further to what its own language needs (nothing, unless it is Triton).

Whatever goes wrong here -- no torch.compile (PyTorch before 2.0), a
reference that dynamo or inductor cannot compile, a missing compiler or
header, running out of memory, outputs that disagree with eager PyTorch's
beyond a loose tolerance -- is reported as the reason there is no compiled
baseline (the result's baseline_compile_error); it is never the
candidate's doing and never part of the verdict.

  setup(folder)            the caches and settings, before compiling
  exec_paths()             what inductor may execute in the run jail
  compare_loosely(e, c)    None, or why compiled outputs disagree
  CompiledRef              the worker's part (COMPILE_REF, compiled CALLs)
"""

import os
import shutil
import time

import torch

import stark_triton
from stark_worker_memory import is_oom

WARM_MIN = 2            # calls after the last one that compiled
COMPARE_CHUNK = 1 << 22  # elements compared at a time
# Loose on purpose: inductor reorders reductions and fuses what eager
# rounds between ops (16-bit dtypes most), while a compiled model that
# computes something else is off by far more.
LOOSE_TOL = {torch.float16: (5e-2, 5e-2), torch.bfloat16: (5e-2, 5e-2)}
LOOSE_TOL_DEFAULT = (1e-2, 1e-2)
# Environment that would change what inductor or dynamo compile, or where
# they read from: never inherited (the folder's own are set instead).
_PREFIXES = ("TORCHINDUCTOR_", "TORCHDYNAMO_", "TORCH_COMPILE_", "TORCH_LOGS")
_CXX = ("g++", "c++", "clang++")


def available():
    """None when torch.compile exists, else why not."""
    if not callable(getattr(torch, "compile", None)):
        return ("torch %s has no torch.compile (PyTorch 2.0 or later has it)"
                % torch.__version__)
    return None


def setup(folder):
    """Points every cache and folder inductor, dynamo and Triton write or
    read at folder (this evaluation's own), with compilation in this
    process (no pool of compile workers: those would be Python programs
    exec'd from the run jail)."""
    for k in list(os.environ):
        if k.startswith(_PREFIXES):
            os.environ.pop(k, None)
    inductor = os.path.join(folder, "inductor")
    os.makedirs(inductor, mode=0o700, exist_ok=True)
    stark_triton.prepare(os.path.join(folder, "triton"))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    os.environ["TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE"] = "0"
    os.environ["TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE"] = "0"
    import torch._dynamo  # noqa: F401  (after the environment: read at import)
    import torch._inductor.config as icfg
    for name, value in (("compile_threads", 1), ("fx_graph_remote_cache", False),
                        ("autotune_remote_cache", False)):
        if hasattr(icfg, name):
            setattr(icfg, name, value)


def _cxx(environ):
    """The C++ compiler inductor will run ($CXX, else g++, c++, clang++ on
    PATH), or None."""
    path = environ.get("PATH") or "/usr/bin:/bin"
    cxx = environ.get("CXX")
    if cxx:
        return shutil.which(cxx, path=path) or cxx
    for name in _CXX:
        p = shutil.which(name, path=path)
        if p:
            return p
    return None


def exec_paths(environ=None):
    """The files inductor may execute: everything Triton's JIT may
    (stark_triton.exec_paths: ptxas, the C compiler and its programs, the
    ELF interpreter; inductor's GPU kernels are Triton's), the C++
    compiler with the programs it reports it runs (cc1plus), nvcc (asked
    its version) and the ptxas a torch wheel ships."""
    environ = os.environ if environ is None else environ
    out = list(stark_triton.exec_paths(environ))
    cxx = _cxx(environ)
    if cxx:
        extra = [cxx] + stark_triton.script_execs(cxx, environ)
        extra += stark_triton.asks_compiler(cxx, ("cc1plus",) + stark_triton.DRIVER_PROGS)
        out += [p for p in extra if p not in out]
    # Inductor runs `nvcc --version` for every graph it compiles (for a
    # comment in its repro text, torch 2.11) and copes only with an nvcc
    # that is missing: one that is there must be allowed to run.  Nothing
    # else runs for that; nvcc's own compilers (cicc) stay out.
    nvcc = shutil.which("nvcc", path=environ.get("PATH") or "/usr/bin:/bin")
    if nvcc:
        extra = [nvcc] + stark_triton.script_execs(nvcc, environ)
        out += [p for p in extra if p not in out]
    # Wheels built for a newer CUDA than Triton's ship their own ptxas, and
    # inductor points Triton at it (torch 2.11 +cu130: torch/bin/ptxas).
    ptxas = os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas")
    if os.path.isfile(ptxas) and ptxas not in out:
        out.append(ptxas)
    return out


def _compiles():
    """Frames dynamo has tried to compile so far (0 where it is absent)."""
    try:
        from torch._dynamo.utils import counters
        return int(counters["frames"]["total"])
    except Exception:
        return 0


def _graphs():
    """(graphs compiled, graph breaks) as dynamo counted them."""
    try:
        from torch._dynamo.utils import counters
        return (int(counters["stats"]["unique_graphs"]),
                int(sum(counters["graph_break"].values())))
    except Exception:
        return 0, 0


def _items(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _diff(e, c):
    """(elements beyond the loose tolerance, largest finite difference) of
    one pair of same-shaped tensors, a chunk at a time (no float64 copy of
    a whole output)."""
    atol, rtol = LOOSE_TOL.get(e.dtype, LOOSE_TOL_DEFAULT)
    if not (e.is_floating_point() or e.is_complex()):
        atol = rtol = 0.0
    ef, cf = e.detach().reshape(-1), c.detach().reshape(-1)
    bad, worst = 0, 0.0
    for off in range(0, ef.numel(), COMPARE_CHUNK):
        a = ef[off:off + COMPARE_CHUNK].to(torch.float64)
        b = cf[off:off + COMPARE_CHUNK].to(torch.float64)
        d = (a - b).abs()
        both_nan = torch.isnan(a) & torch.isnan(b)
        same_inf = torch.isinf(a) & (a == b)
        ok = (d <= atol + rtol * a.abs()) | both_nan | same_inf
        bad += int((~ok).sum())
        fin = d[torch.isfinite(d)]
        if fin.numel():
            worst = max(worst, float(fin.max()))
    return bad, worst


def compare_loosely(e_out, c_out):
    """None when the compiled outputs c_out match the eager ones e_out in
    structure, dtype and shape and within LOOSE_TOL, else why not."""
    es, cs = _items(e_out), _items(c_out)
    if len(es) != len(cs):
        return "returned %d outputs, eager PyTorch %d" % (len(cs), len(es))
    for i, (e, c) in enumerate(zip(es, cs)):
        if not isinstance(e, torch.Tensor) or not isinstance(c, torch.Tensor):
            if isinstance(e, torch.Tensor) or isinstance(c, torch.Tensor) or e != c:
                return "output %d is %r, eager PyTorch's %r" % (i, type(c).__name__,
                                                               type(e).__name__)
            continue
        if e.dtype != c.dtype or tuple(e.shape) != tuple(c.shape):
            return "output %d is %s%s, eager PyTorch's %s%s" % (
                i, str(c.dtype).replace("torch.", ""), list(c.shape),
                str(e.dtype).replace("torch.", ""), list(e.shape))
        bad, worst = _diff(e, c)
        if bad:
            atol, rtol = LOOSE_TOL.get(e.dtype, LOOSE_TOL_DEFAULT)
            return ("output %d differs from eager PyTorch's in %d of %d elements beyond "
                    "atol=rtol=%g (largest difference %.3g)" % (i, bad, e.numel(), atol,
                                                                 worst))
    return None


def _why(e):
    """One line saying why torch.compile failed: its exception's type and
    the first lines of its message (inductor's carry the compiler's
    output)."""
    msg = " | ".join(line.strip() for line in str(e).strip().splitlines()[:6] if line.strip())
    return ("%s: %s" % (type(e).__name__, msg))[:1500]


class CompiledRef:
    """The reference worker's part: the compiled model (self.compiled) and
    its warm-up."""

    compiled = None

    def _restore_inputs(self):
        """The call's inputs as GEN made them (a model may change its
        inputs in place), from the copies kept for the mutation check or
        made again from the seed where only digests were kept."""
        saved = self.pristine
        if saved and all(isinstance(p, torch.Tensor) for p in saved):
            with torch.no_grad():
                for buf, p in zip(self.in_bufs, saved):
                    buf.copy_(p)
            return
        items = self.regenerate_inputs() or []
        tensors = [t for t in items if isinstance(t, torch.Tensor)]
        with torch.no_grad():
            for buf, t in zip(self.in_bufs, tensors):
                buf.copy_(t.to(buf.device))

    def _compiled_forward(self):
        with torch.no_grad():
            return self.compiled(*self.inputs)

    def cmd_compile_ref(self, args):
        """COMPILE_REF: torch.compile(model) warmed up on the last GEN's
        inputs: a first call that compiles, its outputs compared with the
        eager model's on the same inputs, then calls until one compiles
        nothing (at least WARM_MIN after the last that did, at most
        warm_max in all).  The folder is removed before the reply.  Replies
        what happened; "error" says why there is no compiled reference
        (never raised: nothing here is the candidate's, nor the
        evaluation's, failure)."""
        folder = args.get("folder") if isinstance(args.get("folder"), str) else None
        warm_max = args.get("warm_max") if type(args.get("warm_max")) is int else 16
        t0 = time.monotonic()
        reply = {}
        try:
            # Out-of-memory errors inductor's autotuning catches are the
            # baseline's, never the eager forward's (mem_facts' "ooms").
            with self.ours_oom():
                reply = self._compile_ref(folder, max(warm_max, WARM_MIN + 1))
        except BaseException as e:
            if not isinstance(e, Exception) and not is_oom(e):
                raise
            self.compiled = None
            reply = {"error": ("torch.compile ran out of memory: " if is_oom(e) else
                               "torch.compile failed: ") + _why(e)}
        finally:
            if folder:
                # What inductor built and loaded is named by nothing from now
                # on (see the module's docstring).
                shutil.rmtree(folder, ignore_errors=True)
        if self.compiled is None and self.device.type == "cuda":
            torch.cuda.empty_cache()
        reply["ms"] = round((time.monotonic() - t0) * 1e3, 1)
        reply["graphs"], reply["graph_breaks"] = _graphs()
        return reply

    def _compile_ref(self, folder, warm_max):
        why = available()
        if why:
            return {"error": why}
        if folder:
            setup(folder)
        self._restore_inputs()
        eager = self._forward()
        self._restore_inputs()
        self.compiled = torch.compile(self.model)
        n0 = _compiles()
        t1 = time.monotonic()
        out = self._compiled_forward()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        first_ms = (time.monotonic() - t1) * 1e3
        why = compare_loosely(eager, out)
        del eager, out
        if why:
            self.compiled = None
            return {"error": "the compiled reference disagrees with the eager one: %s; it is "
                    "not used" % why, "first_ms": round(first_ms, 1)}
        calls, quiet = 1, 0
        seen = _compiles()
        while calls < warm_max and quiet < WARM_MIN:
            self._compiled_forward()
            calls += 1
            now = _compiles()
            quiet = quiet + 1 if now == seen else 0
            seen = now
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        if quiet < WARM_MIN:
            self.compiled = None
            return {"error": "torch.compile still compiled after %d warm-up calls" % calls}
        try:
            torch._dynamo.config.error_on_recompile = True
        except Exception:
            pass
        return {"compiled": True, "first_ms": round(first_ms, 1), "calls": calls,
                "frames": seen - n0}

    def compiled_call(self, args):
        """CALL {"compiled": true}: one call of the compiled model on this
        call's inputs, timed as an eager call is (on a GPU, between events
        behind the gate).  Its outputs are dropped (they
        were compared at COMPILE_REF).  A failure, or a call that compiled
        again, is in the reply ("error"), never raised."""
        if self.compiled is None:
            return {"error": "no compiled reference"}
        n0 = _compiles()
        try:
            if self.device.type == "cuda":
                with self._in_slot():
                    out, info = self._timed(self._compiled_forward,
                                            args.get("gate_us"))
            else:
                out, info = self._compiled_forward(), {}
        except Exception as e:
            self.compiled = None
            return {"error": "the compiled reference raised " + _why(e)}
        del out
        if _compiles() != n0:
            self.compiled = None
            info["error"] = "the compiled reference compiled again during a timed call"
        return info
