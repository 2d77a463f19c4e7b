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
tmpfs no other evaluation sees), or where the orchestrator gives one (the
request's jit_dir, a scratch folder of this evaluation alone), and
Triton's home, dump and override folders point there too, so no cache
another evaluation can write is ever read.

A warm cache.  Where the orchestrator gives jit_dir, what Triton compiled
is kept for the later evaluations of the same problem and solution
(pool/evalpair.c): the orchestrator copies what was published under the
key (stark_env.entry_key over fingerprint(), the device kind and both
sources' bytes) into jit_dir/cache before the jail exists, the referee
keeps it where the key is the one it computes itself (warm), and where
there was none asks for the cache to be published after the run.  A
candidate can plant anything there, but only for the same solution's
later evaluations, which could plant it themselves: the solution's bytes
are in the key, and Triton keys each kernel by its own full key as well.

The JIT's cost is kept out of the timed calls: the worker counts the
kernels Triton compiled during each call (the cache's entries) and reports
them with the call; the referee's warm-up goes on while a call still
compiles, and reports the compile time as its own stage (env triton_jit).
These counts come from the candidate's process and are diagnostics: the
referee's timing rests on its own clocks as for every candidate.

  use_file(lang)                whether lang's solutions are imported from a file
  prepare(folder[, cache])      Triton's folders set to this evaluation's
  fingerprint()                 what a cached kernel depends on beside the sources
  warm(folder, key)             whether a published cache was restored for key
  load(name, src, folder)       the solution imported from folder/<file>
  compiled(folder[, memo])      kernels compiled so far (cache entries)
  exec_paths()                  what Triton's JIT execs (the run jail's allowlist)
  probe_compiler(folder)        whether that compiler still works once restricted

In a run jail, Triton's JIT is the one reason a candidate's process may
exec at all: the orchestrator gives such a jail a filter that allows
execve (proto_request_jit_exec decides, on both sides), and the referee,
before it forks any worker, restricts with Landlock which files may be
executed to exec_paths(): Triton's bundled tools (ptxas), the C compiler
that builds its launchers (gcc or cc, with as, ld and the compiler's own
programs) and the ELF interpreter they need.  A shell, python, or anything
else fails with EACCES (SECURITY.md, "Triton").
"""

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import time

FILE_LANGUAGES = ("triton", "cute", "tilelang")
# A cache folder changed more recently than this when counted is counted
# again at the next call (compiled): beyond a coarse clock's tick.
JIT_MTIME_SETTLE_NS = 50_000_000
_SAFE = re.compile(r"[^A-Za-z0-9_]")
JIT_KEY_VERSION = "stark-jit-1"
ENTRY_MARK = ".stark-entry"     # buildcache.c's, written last into an entry


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


def compiler(environ=None):
    """The C compiler Triton's JIT will run, chosen as Triton chooses it
    (triton/runtime/build.py: $CC, else gcc, else clang on PATH), or None."""
    environ = os.environ if environ is None else environ
    path = environ.get("PATH") or "/usr/bin:/bin"
    cc = environ.get("CC")
    if cc:
        return shutil.which(cc, path=path) or cc
    return shutil.which("gcc", path=path) or shutil.which("clang", path=path)


def script_execs(path, environ):
    """For a script (a compiler wrapper such as `#!/bin/sh` + `exec
    /opt/gcc/bin/gcc-real -B... "$@"`): its interpreter (through env when
    it names one) and the absolute paths of executable files its text
    names.  Nothing for a binary or a file that cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    out = []
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if line:
        out.append(line[0])
        if os.path.basename(line[0]) == "env" and len(line) > 1:
            prog = shutil.which(line[1], path=environ.get("PATH") or "/usr/bin:/bin")
            if prog:
                out.append(prog)
    for tok in re.findall(rb"(?<![\w./-])(/[\w./+-]+)", head):
        p = tok.decode("utf-8", "replace")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            out.append(p)
    return out


DRIVER_PROGS = ("cc1", "as", "collect2", "ld", "lto-wrapper")


def asks_compiler(cc, progs=DRIVER_PROGS):
    """The programs the compiler driver itself runs (cc1, as, collect2, ld,
    lto-wrapper; a C++ driver's cc1plus), as it reports them: wherever its
    toolchain lives (a compiler outside /usr that finds them through -B, a
    versioned libexec).  Asked before any candidate code runs."""
    out = []
    for prog in progs:
        try:
            r = subprocess.run([cc, "-print-prog-name=" + prog], capture_output=True,
                               timeout=20, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            continue
        p = r.stdout.decode("utf-8", "replace").strip()
        if r.returncode == 0 and os.path.isabs(p) and os.path.exists(p):
            out.append(p)
    return out


def exec_paths(environ=None):
    """The files Triton's JIT may execute: its bundled tools' folder, the C
    compiler it will use (with a wrapper script's interpreter and the files
    the script runs) and the programs that compiler runs, the usual
    compilers' folders, the ELF interpreter (absent ones are skipped by
    the caller)."""
    environ = os.environ if environ is None else environ
    out = []

    def add(p):
        if p and p not in out:
            out.append(p)

    root = triton_dir()
    if root:
        add(os.path.join(root, "backends", "nvidia", "bin"))
    path = environ.get("PATH") or "/usr/bin:/bin"
    cc = compiler(environ)
    tools = [cc] if cc else []
    tools += [shutil.which(t, path=path) for t in _TOOLS]
    for p in tools:
        if not p:
            continue
        add(p)
        for q in script_execs(p, environ):
            add(q)
    if cc:
        for q in asks_compiler(cc):
            add(q)
    for p in _TOOL_DIRS + _INTERPRETERS:
        add(p)
    return out


_PROBE_C = b"int stark_probe(int x) { return x + 1; }\n"


def probe_compiler(folder, environ=None):
    """Builds a small shared object with the compiler Triton will use, as
    Triton builds its launchers (-O3 -shared -fPIC), after exec has been
    restricted: None when it works, else what failed.  A toolchain the
    restriction or the machine breaks is the evaluator's `error`, found
    here before any candidate code runs, never the candidate's
    runtime_error at its kernel's first call."""
    cc = compiler(environ)
    if not cc:
        return "no C compiler on PATH (Triton's JIT builds its launchers with gcc or clang)"
    src = os.path.join(folder, "stark_probe.c")
    so = os.path.join(folder, "stark_probe.so")
    try:
        with open(src, "wb") as f:
            f.write(_PROBE_C)
        r = subprocess.run([cc, src, "-O3", "-shared", "-fPIC", "-o", so], capture_output=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        return "running %s failed: %s" % (cc, e)
    finally:
        try:
            os.unlink(src)
        except OSError:
            pass
    if r.returncode != 0:
        err = r.stderr.decode("utf-8", "replace").strip().splitlines()
        return "%s exited %d: %s" % (cc, r.returncode, " | ".join(err[-4:])[:600])
    try:
        os.unlink(so)
    except OSError:
        pass
    return None


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


def prepare(folder, cache=None):
    """Points every folder Triton writes or reads at this evaluation's own
    (made by the referee, private to its jail; cache, where given, the
    orchestrator's scratch for it).  Before triton is imported: it reads
    them at import and at first use."""
    cache = cache or os.path.join(folder, "cache")
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


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except (importlib.metadata.PackageNotFoundError, ValueError, OSError):
        return None


def fingerprint(environ=None):
    """SHA-256 (hex) of what Triton's compiled kernels depend on beside
    the sources: Triton's, torch's and Python's versions and the GPU
    architecture stark named (STARK_CUDA_ARCH).  No import, no exec: the
    referee computes it in the run jail.  An entry made under another
    toolchain would only miss in Triton's own keys; this keeps it from
    being copied at all."""
    environ = os.environ if environ is None else environ
    doc = {"v": JIT_KEY_VERSION, "python": sys.version, "machine": platform.machine(),
           "triton": _version("triton"), "torch": _version("torch"),
           "arch": [environ.get(k) for k in ("STARK_CUDA_ARCH", "TORCH_CUDA_ARCH_LIST")]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8", "surrogatepass")) \
        .hexdigest()


def warm(folder, key):
    """Whether the orchestrator restored a published cache for key into
    folder/cache (folder/restored holds the key: the orchestrator writes it
    after the copy, before this evaluation's jail exists); (files, bytes)
    it holds, or None, where the cache was emptied: what another key left,
    or a copy cut short, is never used.  Trusted code, before any worker
    exists."""
    cache = os.path.join(folder, "cache")
    try:
        fd = os.open(os.path.join(folder, "restored"), os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            ok = f.read(128) == key.encode("ascii")
    except (OSError, UnicodeEncodeError):
        ok = False
    if ok and os.path.isdir(cache) and not os.path.islink(cache):
        files = size = 0
        for top, _, names in os.walk(cache):
            for name in names:
                files += 1
                size += os.lstat(os.path.join(top, name)).st_size
        return files, size
    if os.path.lexists(cache):
        if stat.S_ISDIR(os.lstat(cache).st_mode):
            shutil.rmtree(cache)
        else:
            os.unlink(cache)
    return None


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


def compiled(cache, memo=None):
    """Kernels in the cache so far: one folder per compiled kernel holds a
    .json of its metadata (launchers and utilities are .so files).

    memo, a dict the caller keeps between calls, makes a call that compiled
    nothing cost one stat: the count is taken again only where the cache's
    folder changed since (Triton makes a kernel's folder there when it
    compiles it, within the call), or changed so recently when it was last
    counted that the file system's coarse clock may not show a change made
    in the same tick.  The worker counts before and after every call, inside
    the referee's clock of the candidate's exchange: a full count took
    84 us on the development machine, twice a call, charged to every timed
    call of a Triton candidate (a 48 us kernel on the H100 had its claims
    disbelieved by the wall-clock bound)."""
    if memo is not None:
        try:
            mtime = os.stat(cache).st_mtime_ns
        except OSError:
            return 0
        if memo.get("mtime") == mtime and memo.get("stable"):
            return memo["n"]
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
    if memo is not None:
        memo.update(mtime=mtime, n=n, stable=time.time_ns() - mtime > JIT_MTIME_SETTLE_NS)
    return n
