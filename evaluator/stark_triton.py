"""stark_triton -- what the candidate's worker does, before the candidate's
code runs, for a solution in a Python kernel language (Triton, the CuTe
DSL, TileLang), and what it tells the referee about Triton's JIT.

These languages read a kernel's source through `inspect` ("@jit functions
should be defined in a Python file"), so the solution is written to a real
file in a folder of this evaluation and imported from there, as
KernelBench's harness does.

Triton compiles each kernel at its first call for each specialization (and
@triton.autotune benchmarks its configurations then) and keeps what it
compiled in a cache folder.  Each evaluation gets a cache of its own, made
by the referee in the evaluation's private scratch (the jail's /tmp, a
tmpfs no other evaluation sees), and Triton's home, dump and override
folders point there too, so no cache another evaluation can write is ever
read, and nothing this one writes outlives it.

The JIT's cost is kept out of the timed calls: the worker counts the
kernels Triton compiled during each call (the cache's entries) and reports
them with the call; the referee's warm-up goes on while a call still
compiles, and reports the compile time as its own stage (env triton_jit).
These counts come from the candidate's process and are diagnostics: the
referee's timing rests on its own clocks as for every candidate.

  use_file(lang)                whether lang's solutions are imported from a file
  prepare(folder)               Triton's folders set to this evaluation's
  load(name, src, folder)       the solution imported from folder/<file>
  compiled(folder)              kernels compiled so far (cache entries)
  exec_paths()                  what Triton's JIT execs (the run jail's allowlist)

In a run jail, Triton's JIT is the one reason a candidate's process may
exec at all: the orchestrator gives such a jail a filter that allows
execve (proto_request_jit_exec decides, on both sides), and the referee,
before it forks any worker, restricts with Landlock which files may be
executed to exec_paths(): Triton's bundled tools (ptxas), the C compiler
that builds its launchers (gcc or cc, with as, ld and the compiler's own
programs) and the ELF interpreter they need.  A shell, python, or anything
else fails with EACCES (SECURITY.md, "Triton").
"""

import importlib.util
import os
import re
import shutil
import sys

FILE_LANGUAGES = ("triton", "cute", "tilelang")
_SAFE = re.compile(r"[^A-Za-z0-9_]")


# The C compiler Triton builds its launchers with, and what it execs.
_TOOLS = ("gcc", "cc", "clang", "as", "ld")
_TOOL_DIRS = ("/usr/lib/gcc", "/usr/libexec/gcc", "/usr/lib/llvm")
_INTERPRETERS = ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1")
# Where libcuda.so.1 lives (TRITON_LIBCUDA_PATH: Triton runs ldconfig -p
# otherwise, and ldconfig is not on the list).
_LIBCUDA_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu",
                 "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib")


def triton_dir():
    """Triton's package folder, found without importing it, or None."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    locs = list(spec.submodule_search_locations or []) if spec else []
    return locs[0] if locs else None


def exec_paths(environ=None):
    """The files Triton's JIT may execute: its bundled tools' folder, the C
    compiler's programs, the ELF interpreter (absent ones are skipped by
    the caller)."""
    environ = os.environ if environ is None else environ
    out = []
    root = triton_dir()
    if root:
        out.append(os.path.join(root, "backends", "nvidia", "bin"))
    path = environ.get("PATH") or "/usr/bin:/bin"
    cc = environ.get("CC")
    for tool in ((cc,) if cc else ()) + _TOOLS:
        p = shutil.which(tool, path=path)
        if p and p not in out:
            out.append(p)
    out.extend(_TOOL_DIRS)
    out.extend(_INTERPRETERS)
    return out


def libcuda_dir(environ=None):
    """The folder holding libcuda.so.1, or None."""
    environ = os.environ if environ is None else environ
    dirs = [d for d in (environ.get("LD_LIBRARY_PATH") or "").split(":") if d]
    for d in dirs + list(_LIBCUDA_DIRS):
        if os.path.exists(os.path.join(d, "libcuda.so.1")):
            return d
    return None


def use_file(lang):
    return lang in FILE_LANGUAGES


def prepare(folder):
    """Points every folder Triton writes or reads at this evaluation's own
    (made by the referee, private to its jail).  Before triton is
    imported: it reads them at import and at first use."""
    cache = os.path.join(folder, "cache")
    os.makedirs(cache, mode=0o700, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = cache
    os.environ["TRITON_HOME"] = folder
    os.environ["TRITON_DUMP_DIR"] = os.path.join(folder, "dump")
    os.environ["TRITON_OVERRIDE_DIR"] = os.path.join(folder, "override")
    lib = libcuda_dir()
    if lib:
        os.environ["TRITON_LIBCUDA_PATH"] = lib
    # Settings that would change what is compiled or run: never inherited.
    for var in ("TRITON_INTERPRET", "TRITON_ALWAYS_COMPILE", "TRITON_KERNEL_OVERRIDE",
                "TRITON_KERNEL_DUMP", "TRITON_PTXAS_PATH"):
        os.environ.pop(var, None)
    return cache


def load(name, src, folder):
    """Writes the solution's bytes to a .py file in folder and imports it as
    the module `stark_solution` (its own name shown in tracebacks through
    the file's name)."""
    base = _SAFE.sub("_", os.path.splitext(os.path.basename(name or "solution"))[0])[:64]
    path = os.path.join(folder, (base or "solution") + ".py")
    if isinstance(src, str):
        src = src.encode("utf-8", "surrogateescape")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("stark_solution", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["stark_solution"] = mod
    spec.loader.exec_module(mod)
    return mod


def compiled(cache):
    """Kernels in the cache so far: one folder per compiled kernel holds a
    .json of its metadata (launchers and utilities are .so files)."""
    n = 0
    try:
        for entry in os.scandir(cache):
            if not entry.is_dir(follow_symlinks=False):
                continue
            try:
                n += sum(1 for f in os.scandir(entry.path)
                         if f.name.endswith(".json") and not f.name.startswith("__grp__"))
            except OSError:
                pass
    except OSError:
        return 0
    return n
