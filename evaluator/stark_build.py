"""stark_build -- load_inline builds in the evaluation's own build folder.

Candidate solutions in KernelBench format build native code with
torch.utils.cpp_extension.load_inline.  Inside a worker, before the
solution's top level runs, install() replaces that function with one of two
stand-ins, both working in one folder, the evaluation's build folder
(the request's build_dir):

  mode "build" (compile stage, and the all-in-one stage): the real
      load_inline builds into a fresh temporary folder in the build folder,
      with verbose=False so the compiler's output ends up in the exception
      (our compile log); on success the folder gets a manifest and is
      renamed into place.  An entry already there (the same call made
      twice) is imported without building.  In the compile stage the build
      folder is a scratch folder of this evaluation alone, the only place
      the compile jail may write.
  mode "load" (run stage): only imports what the build folder holds, which
      in the run jail is the compile stage's output, read-only; never
      builds and never execs.  A missing entry is a compile_error saying
      that the compile stage must build it first.

Sharing builds between evaluations is not done here: once the compile
stage's processes are gone, the orchestrator (trusted) copies the build
folder into the build cache under a key computed by trusted code from the
toolchain and the sources (stark_env.entry_key, orchestrator/buildcache.c),
and later evaluations with those inputs get that entry as their build
folder.  Nothing a jailed process names or writes decides where a build is
published, and no jail can write the cache.  lookup() is how the referee
finds an entry, or a remembered compile error, before any candidate runs.

In the compile stage, nvcc is reached through stark_nvcc (written into each
build's folder), which runs nvcc's host and device front ends at the same
time; STARK_NVCC=plain keeps the real nvcc alone.  The build summary says
how each .cu unit was compiled ("nvcc").

Build failures are recorded here even when the candidate's code catches the
exception, so a solution that quietly falls back to PyTorch after a failed
build is still reported as compile_error (or as error, when the referee
finds that the machine lacks what the build needs: stark_env).
"""

import hashlib
import importlib.util
import io
import json
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import time

# torch's extension module looks for CUDA and ROCm at import by running
# `which nvcc` and `sh -c 'which hipcc | xargs readlink -f'` unless
# CUDA_HOME and ROCM_HOME are set, and its hipify part runs
# `hipconfig --rocmpath` regardless.  The run jail forbids exec and kills
# the evaluation for it (SECURITY.md), so give it the same answers, found
# without exec, and refuse its subprocesses during the import the way a
# missing tool would (it handles that).  ROCM_HOME only matters to ROCm
# builds of torch.
def _home_of(tool, fallback):
    path = shutil.which(tool)
    home = os.path.dirname(os.path.dirname(os.path.realpath(path))) if path else fallback
    return home if home and os.path.exists(home) else None


if not (os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")):
    os.environ["CUDA_HOME"] = _home_of("nvcc", "/usr/local/cuda") or "/nonexistent/cuda"
if not (os.environ.get("ROCM_HOME") or os.environ.get("ROCM_PATH")):
    os.environ["ROCM_HOME"] = _home_of("hipcc", "/opt/rocm") or "/nonexistent/rocm"


def _no_exec(*args, **kwargs):
    raise PermissionError("stark: no subprocess while the evaluator starts")


def _import_extension_module():
    """Imports torch.utils.cpp_extension in a worker, before the solution
    runs (and before the narrow filter), under the rules above.  Never in
    the referee: with torch 2.x the import initializes CUDA, and a CUDA
    runtime initialized before fork is unusable in every forked worker
    ("Cannot re-initialize CUDA in forked subprocess").  Its notice about a
    missing CUDA runtime on CPU machines is noise and is dropped."""
    quiet, sys.stderr = sys.stderr, io.StringIO()
    popen, subprocess.Popen = subprocess.Popen, _no_exec
    try:
        import torch.utils.cpp_extension as ext
    finally:
        subprocess.Popen = popen
        sys.stderr = quiet
    return ext


KEY_VERSION = "stark-ext-1"
MANIFEST = "stark-manifest.json"
LOG_KEEP = 200000           # bytes of compiler output kept per failure
ENTRY_MARK = ".stark-entry"     # written by the publisher into every entry
FAILED_MAX = 1 << 20            # bytes of a remembered failure read back


class BuildError(RuntimeError):
    """load_inline failed to build (the log is in stark_build.failures)."""


class MissingBuild(RuntimeError):
    """Run stage: no prebuilt module for these sources in the build folder."""


class SetupError(RuntimeError):
    """torch.utils.cpp_extension could not be imported (install()): the
    machine lacks something torch's builds need.  .cause is the exception."""

    def __init__(self, cause):
        super().__init__("torch.utils.cpp_extension cannot be imported: %s: %s"
                         % (type(cause).__name__, cause))
        self.cause = cause


# Per-process state of the worker that loads the candidate.
state = {
    "mode": None,        # "build" or "load"
    "build_dir": None,   # this evaluation's build folder, or None (nothing built)
    "calls": 0,          # load_inline calls
    "built": 0,          # entries built by this process
    "hits": 0,           # entries found in the cache
    "build_s": 0.0,      # seconds spent building
    "load_s": 0.0,       # seconds spent importing cached entries
    "failures": [],      # [{"name", "log"}]
    "nvcc": [],          # stark_nvcc's records of this process's builds
    "nvcc_cmd": None,    # the nvcc command of the build under way
}
_real_load_inline = None
_real_join_cuda_home = None
NVCC_SCRIPT = "stark_nvcc.py"
NVCC_STATS = "stark-nvcc.jsonl"
NVCC_KEEP = 16              # records kept per process


def _nvcc_source():
    """stark_nvcc's text: embedded in stark-eval (pyembed sets
    __stark_source__), or the file beside this one."""
    import stark_nvcc
    src = getattr(stark_nvcc, "__stark_source__", None)
    if src is None:
        with open(stark_nvcc.__file__, "r", encoding="utf-8") as f:
            src = f.read()
    return src


def _nvcc_command(tmp):
    """The nvcc command for a build in tmp: python3 stark_nvcc.py REAL
    STATS, or None to leave torch's choice (STARK_NVCC=plain, no nvcc,
    a path a ninja file cannot hold)."""
    if os.environ.get("STARK_NVCC", "") == "plain" or _real_join_cuda_home is None:
        return None
    real = _real_join_cuda_home("bin", "nvcc")
    script = os.path.join(tmp, NVCC_SCRIPT)
    stats = os.path.join(tmp, NVCC_STATS)
    parts = [sys.executable, script, real, stats]
    if not os.path.exists(real) or any(not p or any(c.isspace() or c in "$:" for c in p)
                                       for p in parts):
        return None
    try:
        with open(script, "w", encoding="utf-8") as f:
            f.write(_nvcc_source())
    except (OSError, ImportError):
        return None
    return " ".join(parts)


def _join_cuda_home(*paths):
    """torch's _join_cuda_home, except that bin/nvcc is stark_nvcc during
    a build that chose it."""
    if paths == ("bin", "nvcc") and state["nvcc_cmd"]:
        return state["nvcc_cmd"]
    return _real_join_cuda_home(*paths)


def _collect_nvcc(tmp):
    try:
        with open(os.path.join(tmp, NVCC_STATS), "r", encoding="utf-8") as f:
            lines = f.read(65536).splitlines()
    except OSError:
        return
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and len(state["nvcc"]) < NVCC_KEEP:
            state["nvcc"].append(rec)


def _as_list(x):
    if x is None:
        return []
    if isinstance(x, str):
        return [x]
    return [str(s) for s in x]


def _functions_key(functions):
    if functions is None:
        return None
    if isinstance(functions, str):
        return [functions]
    if isinstance(functions, dict):
        return sorted([str(k), str(v)] for k, v in functions.items())
    return [str(f) for f in functions]


def cache_key(name, cpp_sources, cuda_sources, functions, extra_cflags,
              extra_cuda_cflags, extra_ldflags, extra_include_paths, with_cuda,
              is_python_module, with_pytorch_error_handling, extra):
    import torch
    doc = {
        "v": KEY_VERSION,
        "name": str(name),
        "cpp": _as_list(cpp_sources),
        "cuda": _as_list(cuda_sources),
        "functions": _functions_key(functions),
        "cflags": _as_list(extra_cflags),
        "cuda_cflags": _as_list(extra_cuda_cflags),
        "ldflags": _as_list(extra_ldflags),
        "include": _as_list(extra_include_paths),
        "with_cuda": with_cuda,
        "python_module": bool(is_python_module),
        "error_handling": bool(with_pytorch_error_handling),
        "extra": sorted((str(k), repr(v)) for k, v in extra.items()),
        "torch": torch.__version__,
        "torch_cuda": getattr(torch.version, "cuda", None),
        "python": "%d.%d" % sys.version_info[:2],
        "machine": platform.machine(),
        "arch_list": os.environ.get("TORCH_CUDA_ARCH_LIST"),
        "cxx": os.environ.get("CXX"),
    }
    blob = json.dumps(doc, sort_keys=True).encode("utf-8", "surrogatepass")
    return hashlib.sha256(blob).hexdigest()


def _entry_dir(name, key):
    safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in str(name))[:64]
    return os.path.join(state["build_dir"], "ext", "%s-%s" % (safe or "ext", key[:32]))


def _read_manifest(entry):
    try:
        with open(os.path.join(entry, MANIFEST), "r", encoding="utf-8") as f:
            man = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(man, dict):
        return None
    mod, fname = man.get("module"), man.get("file")
    if (not isinstance(mod, str) or not isinstance(fname, str) or
            os.path.basename(fname) != fname or not mod.isidentifier()):
        return None
    return man


def _import_entry(entry, man):
    """Imports a built module from a cache entry, as torch would."""
    import torch
    path = os.path.join(entry, man["file"])
    if not man.get("python_module", True):
        torch.ops.load_library(path)
        return path
    spec = importlib.util.spec_from_file_location(man["module"], path)
    if spec is None or spec.loader is None:
        raise MissingBuild("cannot import %s" % path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fail(name, log, cuda):
    state["failures"].append({"name": str(name), "log": log, "cuda": bool(cuda)})
    raise BuildError("load_inline could not build extension '%s'" % name) from None


def _build(name, key, entry, kwargs):
    """Builds into a temporary folder and renames it into place.  The
    build folder belongs to this evaluation alone: no lock is needed."""
    os.makedirs(os.path.dirname(entry), mode=0o700, exist_ok=True)
    tmp = "%s.tmp-%d" % (entry, os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp, mode=0o700)
    kwargs = dict(kwargs)
    kwargs["build_directory"] = tmp
    kwargs["verbose"] = False       # the output goes into the exception
    state["nvcc_cmd"] = _nvcc_command(tmp)
    try:
        result = _real_load_inline(name, **kwargs)
    except Exception as e:
        state["nvcc_cmd"] = None
        _collect_nvcc(tmp)
        log = "%s: %s" % (type(e).__name__, e) if isinstance(e, ImportError) else str(e)
        if len(log) > LOG_KEEP:
            log = log[:LOG_KEEP // 2] + "\n[... cut ...]\n" + log[-LOG_KEEP // 2:]
        shutil.rmtree(tmp, ignore_errors=True)
        _fail(name, log, kwargs.get("cuda_sources"))
    state["nvcc_cmd"] = None
    _collect_nvcc(tmp)
    if isinstance(result, str):     # is_python_module=False: a path
        fname, mod = os.path.basename(result), os.path.splitext(
            os.path.basename(result))[0]
    else:
        fname = os.path.basename(result.__file__)
        mod = result.__name__
    man = {"module": mod, "file": fname, "key": key,
           "python_module": not isinstance(result, str)}
    with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(man, f)
    shutil.rmtree(entry, ignore_errors=True)
    os.rename(tmp, entry)
    return entry, man, result


def load_inline(name, cpp_sources=None, cuda_sources=None, functions=None,
                extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None,
                extra_include_paths=None, build_directory=None, verbose=False,
                with_cuda=None, is_python_module=True,
                with_pytorch_error_handling=True, keep_intermediates=True,
                **extra):
    """Stands in for torch.utils.cpp_extension.load_inline (same arguments;
    build_directory and verbose are ignored)."""
    state["calls"] += 1
    key = cache_key(name, cpp_sources, cuda_sources, functions, extra_cflags,
                    extra_cuda_cflags, extra_ldflags, extra_include_paths,
                    with_cuda, is_python_module, with_pytorch_error_handling,
                    extra)
    entry = _entry_dir(name, key) if state["build_dir"] else None
    man = _read_manifest(entry) if entry else None
    if man is not None:
        t0 = time.monotonic()
        mod = _import_entry(entry, man)
        state["hits"] += 1
        state["load_s"] += time.monotonic() - t0
        return mod
    if state["mode"] != "build" or entry is None:
        # Recorded like a failed build, so the verdict is compile_error even
        # when the solution catches the exception.
        msg = ("load_inline: extension '%s' is not in this evaluation's builds (key %s): "
               "solutions in the KernelBench format are built in the compile stage, "
               "which must run first with these same sources; the run stage only "
               "loads its builds (the fast format, stark_cuda, compiles in either)"
               % (name, key[:16]))
        state["failures"].append({"name": str(name), "log": msg, "missing": True})
        raise MissingBuild(msg)
    kwargs = dict(cpp_sources=cpp_sources if cpp_sources is not None else [],
                  cuda_sources=cuda_sources, functions=functions,
                  extra_cflags=extra_cflags, extra_cuda_cflags=extra_cuda_cflags,
                  extra_ldflags=extra_ldflags,
                  extra_include_paths=extra_include_paths, with_cuda=with_cuda,
                  is_python_module=is_python_module,
                  with_pytorch_error_handling=with_pytorch_error_handling,
                  keep_intermediates=keep_intermediates, **extra)
    t0 = time.monotonic()
    entry, man, result = _build(name, key, entry, kwargs)
    state["built"] += 1
    state["build_s"] += time.monotonic() - t0
    return result


def install(mode, build_dir):
    """Replaces load_inline in torch.utils.cpp_extension (before the
    solution's top level runs).  mode is "build" or "load"; build_dir is
    the evaluation's build folder (None: nothing can be loaded or built).
    Raises SetupError where torch's extension module cannot be imported."""
    global _real_load_inline, _real_join_cuda_home
    state["mode"] = mode
    state["build_dir"] = build_dir or None
    try:
        ext = _import_extension_module()
    except Exception as e:
        raise SetupError(e) from e
    if _real_load_inline is None:
        _real_load_inline = ext.load_inline
    if _real_join_cuda_home is None and callable(getattr(ext, "_join_cuda_home", None)):
        _real_join_cuda_home = ext._join_cuda_home
        ext._join_cuda_home = _join_cuda_home
    ext.load_inline = load_inline


def lookup(store_dir, key):
    """What the build cache holds for an evaluation key (trusted code, the
    referee, before any candidate runs; the store is read-only in every
    jail): ("hit", folder) for a published build, ("failed", message, log)
    for a remembered compile error, or None."""
    if not store_dir or not isinstance(key, str) or len(key) != 64 or \
            any(c not in "0123456789abcdef" for c in key):
        return None
    entry = os.path.join(store_dir, "builds", key)
    try:
        st = os.lstat(entry)
        mark = os.lstat(os.path.join(entry, ENTRY_MARK))
        if stat.S_ISDIR(st.st_mode) and stat.S_ISREG(mark.st_mode):
            return ("hit", entry)
    except OSError:
        pass
    try:
        fd = os.open(os.path.join(store_dir, "failed", key), os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            doc = json.loads(f.read(FAILED_MAX).decode("utf-8", "replace"))
        if isinstance(doc, dict) and isinstance(doc.get("message"), str):
            return ("failed", doc["message"], str(doc.get("log", "")))
    except (OSError, ValueError):
        pass
    return None


# The prefix stark_nvcc precompiles (prepare_pch): what load_inline puts
# before a .cu unit's sources, then torch/extension.h, which KernelBench's
# solutions include first.  The declaration after it marks the prefix's end.
PCH_CUDA = """#include <torch/extension.h>
int stark_pch_end_ = 0;
int stark_pch_probe() { return stark_pch_end_; }
"""
PCH_VARIANTS = ((), ("-O3",))   # extra_cuda_cflags prepared for


def prepare_pch(folder, variants=PCH_VARIANTS):
    """Builds the canonical unit once per variant of extra_cuda_cflags with
    stark_nvcc making its prefix's precompiled header in folder (see
    stark_nvcc).  Run outside any jail, by the operator: candidates must
    never write folder.  Returns stark_nvcc's records of the builds."""
    folder = os.path.abspath(folder)
    os.makedirs(folder, exist_ok=True)
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        # What stark gives the compile jail for this GPU (from nvidia-smi's
        # compute capability): the prefix serves only builds whose flags
        # are the ones it was made with.
        import torch
        if torch.cuda.is_available():
            os.environ["TORCH_CUDA_ARCH_LIST"] = "%d.%d" % torch.cuda.get_device_capability()
    scratch = tempfile.mkdtemp(prefix="stark-pch-")
    os.environ["STARK_NVCC_PCH_MAKE"] = folder
    try:
        install("build", scratch)
        for i, flags in enumerate(variants):
            tmp = os.path.join(scratch, "b%d" % i)
            os.makedirs(tmp)
            state["nvcc_cmd"] = _nvcc_command(tmp)
            if state["nvcc_cmd"] is None:
                raise RuntimeError("no stark_nvcc for this build (STARK_NVCC=plain, or no nvcc)")
            try:
                _real_load_inline("stark_pch_%d" % i, cpp_sources="int stark_pch_probe();",
                                  cuda_sources=PCH_CUDA, functions=["stark_pch_probe"],
                                  extra_cuda_cflags=list(flags), build_directory=tmp,
                                  verbose=False)
            except Exception as e:
                # The prefix is made before the link, which may still fail
                # where torch has no CUDA libraries (it only has to compile).
                state["failures"].append({"name": "stark_pch_%d" % i, "log": str(e)[-2000:]})
            finally:
                state["nvcc_cmd"] = None
                _collect_nvcc(tmp)
    finally:
        os.environ.pop("STARK_NVCC_PCH_MAKE", None)
        shutil.rmtree(scratch, ignore_errors=True)
    return state["nvcc"]


def summary():
    return {"calls": state["calls"], "built": state["built"],
            "hits": state["hits"], "build_s": round(state["build_s"], 3),
            "load_s": round(state["load_s"], 3),
            "failures": state["failures"], "nvcc": state["nvcc"]}


if __name__ == "__main__":
    # python3 evaluator/stark_build.py --prepare-pch FOLDER
    if len(sys.argv) != 3 or sys.argv[1] != "--prepare-pch":
        sys.stderr.write("usage: stark_build.py --prepare-pch FOLDER\n")
        sys.exit(2)
    recs = prepare_pch(sys.argv[2])
    for r in recs:
        print(json.dumps(r))
    made = [r for r in recs if str(r.get("pch", "")).startswith("made")]
    print("stark_build: %d of %d precompiled prefixes made in %s"
          % (len(made), len(PCH_VARIANTS), sys.argv[2]))
    sys.exit(0 if len(made) == len(PCH_VARIANTS) else 1)
