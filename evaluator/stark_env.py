"""stark_env -- what this machine has for building and running candidates.

Three users, all trusted code:

  - the referee, in the compile stage and before any candidate code runs:
    toolchain() fingerprints what a load_inline build depends on (compiler
    and its version, nvcc, torch and its headers, pybind11, Python, the
    arch list and flags), and entry_key() turns it, with the problem's and
    the solution's bytes, into the key under which the orchestrator
    publishes the build (the orchestrator computes the same key itself:
    orchestrator/buildcache.c);
  - the referee again, after a build or the load of torch's extension
    module failed: lacking() probes the machine for what a build needs, so
    that a missing tool, header or Python module is an `error` naming the
    fix rather than the candidate's compile_error or runtime_error, and
    rememberable() decides whether a failure may be remembered (only the
    compiler's verdict on the candidate's own sources);
  - `stark doctor` (stark-eval --doctor DEVICE): report() lists every check
    for a device, each with its fix.

The probes only look (stat, PATH lookups, imports in a forked child); the
one program run is the compiler's --version, in the compile stage.
"""

import hashlib
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig

KEY_VERSION = "stark-build-2"
VERSION_TIMEOUT_S = 10
IMPORT_TIMEOUT_S = 60

# Debian and its derivatives (apt names the fixes).  /etc is not in the
# jails; /usr is.
DEBIAN = os.path.exists("/usr/bin/dpkg") or os.path.exists("/etc/debian_version")


def _torch():
    import torch
    return torch


def _torch_dir():
    return os.path.dirname(os.path.realpath(_torch().__file__))


def _system_python():
    """True where torch and this interpreter are the distribution's (Debian
    packages fix what is missing), False in a venv or a pip install."""
    if sys.prefix != sys.base_prefix:
        return False
    return _torch_dir().startswith(("/usr/lib/python3/", "/usr/lib/python3.")) and DEBIAN


def _apt_or(pkg, other):
    return "apt-get install %s" % pkg if DEBIAN else other


def _pip_or_apt(module, pkg):
    if _system_python():
        return "apt-get install %s" % pkg
    return "%s -m pip install %s" % (sys.executable or "python3", module)


def _stat_id(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return "%s:%d:%d" % (os.path.realpath(path), st.st_size, st.st_mtime_ns)


def _include_dirs():
    """Where torch's build looks for headers: torch's include folders, then
    the interpreter's and the system's."""
    inc = os.path.join(_torch_dir(), "include")
    dirs = [inc, os.path.join(inc, "torch", "csrc", "api", "include")]
    for key in ("include", "platinclude"):
        d = sysconfig.get_paths().get(key)
        if d and d not in dirs:
            dirs.append(d)
    dirs += ["/usr/local/include", "/usr/include"]
    return dirs


def _find_header(name):
    for d in _include_dirs():
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    return None


def _compiler():
    """The C++ compiler torch's builds use: $CXX, else c++ on PATH."""
    name = os.environ.get("CXX") or "c++"
    return name, shutil.which(name)


def _cuda_home():
    return os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or ""


def _nvcc():
    home = _cuda_home()
    path = os.path.join(home, "bin", "nvcc") if home else None
    return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


def _first_line(argv):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=VERSION_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return "unknown (%s)" % type(e).__name__
    lines = p.stdout.decode("utf-8", "replace").strip().splitlines()
    return lines[0][:200] if lines else "unknown (no output)"


def _cuda_version(nvcc):
    """The toolkit's version: its version.json (CUDA 11.1+), else the
    "release" line of nvcc --version."""
    try:
        with open(os.path.join(_cuda_home(), "version.json"), "r", encoding="utf-8") as f:
            doc = json.load(f)
        return str(doc.get("cuda", {}).get("version", "unknown"))[:40]
    except (OSError, ValueError, AttributeError):
        pass
    try:
        p = subprocess.run([nvcc, "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=VERSION_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return "unknown (%s)" % type(e).__name__
    for line in p.stdout.decode("utf-8", "replace").splitlines():
        if "release" in line:
            return line.strip()[:120]
    return "unknown"


FLAG_ENV = ("CXX", "CC", "CFLAGS", "CXXFLAGS", "LDFLAGS", "CUDA_HOME", "CUDA_PATH",
            "TORCH_CUDA_ARCH_LIST", "STARK_CUDA_ARCH")


def toolchain():
    """(doc, fingerprint, description): what a load_inline build's output
    depends on besides its sources, and its SHA-256 (hex).  A new compiler,
    torch, header package, Python or arch list changes the fingerprint, so
    builds made before are not used."""
    torch = _torch()
    name, cxx = _compiler()
    nvcc = _nvcc()
    doc = {
        "v": KEY_VERSION,
        "python": sys.version,
        "machine": platform.machine(),
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "torch_cuda": getattr(torch.version, "cuda", None),
        "torch_include": os.path.realpath(os.path.join(_torch_dir(), "include")),
        "torch_extension_h": _stat_id(os.path.join(_torch_dir(), "include", "torch",
                                                   "extension.h")),
        "pybind11_h": _stat_id(_find_header("pybind11/pybind11.h") or "/nonexistent"),
        "python_h": _stat_id(_find_header("Python.h") or "/nonexistent"),
        "cxx": {"name": name, "path": _stat_id(cxx) if cxx else None,
                "version": _first_line([cxx, "--version"]) if cxx else None},
        "nvcc": {"path": _stat_id(nvcc) if nvcc else None,
                 "version": _cuda_version(nvcc) if nvcc else None},
        "env": {k: os.environ.get(k) for k in FLAG_ENV},
    }
    blob = json.dumps(doc, sort_keys=True).encode("utf-8", "surrogatepass")
    desc = "%s; torch %s; python %s%s%s" % (
        doc["cxx"]["version"] or "no C++ compiler", torch.__version__,
        platform.python_version(),
        "; nvcc %s" % doc["nvcc"]["version"] if nvcc else "",
        "; arch %s" % doc["env"]["TORCH_CUDA_ARCH_LIST"]
        if doc["env"]["TORCH_CUDA_ARCH_LIST"] else "")
    return doc, hashlib.sha256(blob).hexdigest(), desc[:300]


def device_kind(device):
    return "cuda" if str(device).startswith("cuda") else "cpu"


def entry_key(fingerprint, device, problem_src, solution_src):
    """The build cache key of an evaluation: the toolchain's fingerprint,
    the device kind and the SHA-256 of the problem's and the solution's
    bytes (the solution's top level runs in the compile stage and may
    rewrite its own build output, so the key covers the whole file, not
    only load_inline's arguments).  buildcache.c computes the same."""
    text = "%s\ntoolchain %s\ndevice %s\nproblem %s\nsolution %s\n" % (
        KEY_VERSION, fingerprint, device_kind(device),
        hashlib.sha256(problem_src).hexdigest(), hashlib.sha256(solution_src).hexdigest())
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# -- checks --------------------------------------------------------------
# Each check returns {"name", "ok", "detail", "fix"}; "path", where known,
# is the file the check looked for (stark doctor suggests binding it into
# the jail when it exists outside).

def _check(name, ok, detail, fix="", path=None):
    d = {"name": name, "ok": bool(ok), "detail": str(detail)[:400], "fix": "" if ok else fix}
    if path:
        d["path"] = path
    return d


def check_python():
    return _check("python", True, "%s (%s)" % (platform.python_version(), sys.executable))


def check_torch():
    try:
        torch = _torch()
    except Exception as e:
        return _check("torch", False, "%s: %s" % (type(e).__name__, e),
                      _apt_or("python3-torch", "pip install torch"))
    return _check("torch", True, "%s (%s)" % (torch.__version__, _torch_dir()))


def _import_in_child(module):
    """Imports module in a forked child (the caller's imports stay as they
    are; torch's extension module initializes CUDA under torch 2.x, which
    a process that forks workers must not).  Returns None or the error."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        msg = b""
        try:
            sys.stderr = open(os.devnull, "w")
            if module == "torch.utils.cpp_extension":
                import stark_build
                stark_build._import_extension_module()
            else:
                importlib.import_module(module)
        except BaseException as e:
            name = getattr(e, "name", None) if isinstance(e, ImportError) else None
            msg = json.dumps({"type": type(e).__name__, "message": str(e)[:400],
                              "name": name}).encode()
        try:
            os.write(w, msg)
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    try:
        import select
        end = IMPORT_TIMEOUT_S
        while True:
            ready, _, _ = select.select([r], [], [], end)
            if not ready:
                os.kill(pid, 9)
                chunks = [json.dumps({"type": "Timeout", "message": "the import did not "
                                      "finish in %d s" % IMPORT_TIMEOUT_S}).encode()]
                break
            b = os.read(r, 4096)
            if not b:
                break
            chunks.append(b)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    data = b"".join(chunks)
    return json.loads(data) if data else None


def _module_fix(name):
    pkg = {"setuptools": "python3-setuptools", "pybind11": "python3-pybind11"}.get(
        name, "python3-%s" % name)
    return _pip_or_apt(name, pkg)


def check_setuptools(in_child=True):
    err = _import_in_child("setuptools") if in_child else _import_here("setuptools")
    return _check("setuptools", err is None,
                  "importable" if err is None else "%s: %s" % (err["type"], err["message"]),
                  _module_fix("setuptools") + " (torch's cpp_extension imports it)")


def _import_here(module):
    try:
        if module == "torch.utils.cpp_extension":
            import stark_build
            stark_build._import_extension_module()
        else:
            importlib.import_module(module)
    except BaseException as e:
        return {"type": type(e).__name__, "message": str(e)[:400],
                "name": getattr(e, "name", None) if isinstance(e, ImportError) else None}
    return None


def check_extension_module(in_child=True):
    """torch.utils.cpp_extension, which every load_inline build needs;
    where it fails on a missing module, the fix names that module."""
    mod = "torch.utils.cpp_extension"
    err = _import_in_child(mod) if in_child else _import_here(mod)
    if err is None:
        return _check(mod, True, "importable")
    name = err.get("name")
    fix = (_module_fix(name.split(".")[0]) if err.get("type") == "ModuleNotFoundError" and name
           else "reinstall torch (%s)" % _apt_or("apt-get install --reinstall python3-torch",
                                                  "pip install --force-reinstall torch"))
    return _check(mod, False, "%s: %s" % (err["type"], err["message"]), fix)


def check_ninja():
    path = shutil.which("ninja")
    return _check("ninja", path, path or "not on PATH (%s)" % os.environ.get("PATH", ""),
                  _apt_or("ninja-build", "pip install ninja") +
                  " (torch's load_inline builds with ninja)")


def check_compiler():
    name, path = _compiler()
    return _check("c++ compiler", path, "%s: %s" % (name, path) if path else
                  "%s is not on PATH (%s)" % (name, os.environ.get("PATH", "")),
                  _apt_or("g++", "install a C++ compiler (g++ or clang++)") +
                  ("" if name == "c++" else ", or unset CXX"))


def check_python_h():
    p = _find_header("Python.h")
    want = sysconfig.get_paths().get("include") or "the interpreter's include folder"
    return _check("Python.h", p, p or "not in %s" % want,
                  _apt_or("libpython3-dev", "install the interpreter's development headers"),
                  path=os.path.join(want, "Python.h"))


def check_torch_headers():
    p = os.path.join(_torch_dir(), "include", "torch", "extension.h")
    ok = os.path.isfile(p)
    if _system_python():
        fix = "apt-get install libtorch-dev (Debian ships torch's C++ headers apart)"
    else:
        fix = "reinstall torch (its wheel ships torch/include): pip install --force-reinstall torch"
    return _check("torch headers", ok, p if ok else "%s is missing" % p, fix, path=p)


def check_pybind11():
    p = _find_header("pybind11/pybind11.h")
    fix = ("apt-get install pybind11-dev" if _system_python() else
           "reinstall torch (its wheel ships pybind11 in torch/include): "
           "pip install --force-reinstall torch")
    return _check("pybind11 headers", p, p or "pybind11/pybind11.h is in none of %s" %
                  ", ".join(_include_dirs()), fix)


def check_nvcc():
    p = _nvcc()
    home = _cuda_home()
    return _check("nvcc", p, p or ("no bin/nvcc in CUDA_HOME=%s" % home if home else
                                   "CUDA_HOME is not set and no nvcc is on PATH"),
                  "install the CUDA toolkit (%s) and set CUDA_HOME to it; a toolkit outside "
                  "/usr must be named in STARK_SANDBOX_BINDS" %
                  _apt_or("nvidia-cuda-toolkit", "developer.nvidia.com/cuda-downloads"),
                  path=os.path.join(home, "bin", "nvcc") if home else None)


def check_cuda_headers():
    home = _cuda_home()
    p = os.path.join(home, "include", "cuda_runtime.h") if home else ""
    ok = bool(p) and os.path.isfile(p)
    return _check("CUDA headers", ok, p if ok else "no cuda_runtime.h in %s/include" %
                  (home or "CUDA_HOME"), "install the CUDA toolkit's headers with it (see nvcc)",
                  path=p or None)


def check_torch_cuda():
    v = getattr(_torch().version, "cuda", None)
    return _check("torch with CUDA", v, "built for CUDA %s" % v if v else
                  "this torch is built without CUDA",
                  "install a CUDA build of torch (pip install torch, from pytorch.org)")


def check_nvrtc():
    try:
        import stark_cuda
        v = stark_cuda.nvrtc_version()
    except Exception as e:
        return _check("NVRTC", False, "%s: %s" % (type(e).__name__, e),
                      "install NVRTC: the CUDA toolkit, or pip install nvidia-cuda-nvrtc-cu12 "
                      "(torch's CUDA wheels bring it)")
    return _check("NVRTC", True, "nvrtc %s" % (v,))


def check_arch():
    arch = os.environ.get("STARK_CUDA_ARCH") or os.environ.get("TORCH_CUDA_ARCH_LIST")
    return _check("CUDA target", arch, "STARK_CUDA_ARCH=%s TORCH_CUDA_ARCH_LIST=%s" % (
        os.environ.get("STARK_CUDA_ARCH"), os.environ.get("TORCH_CUDA_ARCH_LIST")),
        "set STARK_CUDA_ARCH (e.g. sm_90): nvidia-smi did not say what the GPU is, and the "
        "compile jail sees no GPU")


# What each format needs, by device kind.
BUILD_CHECKS = (check_extension_module, check_setuptools, check_ninja, check_compiler,
                check_python_h, check_torch_headers, check_pybind11)
CUDA_BUILD_CHECKS = (check_nvcc, check_cuda_headers, check_torch_cuda)
FAST_CHECKS = (check_torch_cuda, check_nvrtc, check_arch)


def formats(device):
    """{format: [checks]} for a device kind."""
    if device_kind(device) == "cpu":
        return {"kernelbench (load_inline C++)": list(BUILD_CHECKS)}
    return {"kernelbench (load_inline CUDA)": list(BUILD_CHECKS) + list(CUDA_BUILD_CHECKS) +
            [check_arch],
            "fast (NVRTC)": list(FAST_CHECKS)}


def lacking(device, cuda_sources=True, in_child=True):
    """The checks a load_inline build on this device needs that fail here:
    a list of check dicts (empty: the machine has everything).  CUDA's only
    count on a cuda device for a build with CUDA sources."""
    checks = list(BUILD_CHECKS)
    if device_kind(device) == "cuda" and cuda_sources:
        checks += list(CUDA_BUILD_CHECKS)
    out = []
    for fn in checks:
        try:
            c = fn(in_child) if fn in (check_extension_module, check_setuptools) else fn()
        except Exception as e:
            c = _check(fn.__name__[6:], False, "the check failed: %s: %s" % (type(e).__name__, e))
        if not c["ok"]:
            out.append(c)
    # torch's extension module failing on a module checked apart: say it once.
    named = [c["name"] for c in out if c["name"] != "torch.utils.cpp_extension"]
    return [c for c in out if c["name"] != "torch.utils.cpp_extension" or
            not any("'%s'" % n in c["detail"] for n in named)]


def describe(missing, what="build the candidate's extension"):
    """One message for what is missing, each with its fix, and where to
    look for the rest."""
    parts = ["%s (%s): %s" % (c["name"], c["detail"], c["fix"]) for c in missing]
    return ("this machine cannot %s, which is not the candidate's fault: missing %s. "
            "`stark doctor` lists what this machine lacks." % (what, "; ".join(parts)))


# Resource trouble and missing files: never the compiler's verdict on the code.
_NOT_THE_CODE = re.compile(
    r"No such file or directory|cannot open source file|Killed signal|internal compiler "
    r"error|No space left|virtual memory exhausted|out of memory|Cannot allocate memory|"
    r"cannot find -l|Segmentation fault|terminated program|File size limit", re.I)
_DIAG = re.compile(r"^(?P<path>[^\s:()]+?)(?::\d+:\d+|:\d+|\(\d+\)): error\b", re.M)


def rememberable(log):
    """Whether a failed build may be remembered: the compiler reported an
    error in the candidate's own sources (main.cpp, cuda.cu: what
    load_inline writes) and nothing that points at the machine (a missing
    file or library, a killed compiler, a full disk)."""
    if not isinstance(log, str) or _NOT_THE_CODE.search(log):
        return False
    for m in _DIAG.finditer(log):
        if os.path.basename(m.group("path")) in ("main.cpp", "cuda.cu"):
            return True
    return False


def report(device):
    """stark doctor's probe: every check for the device's formats, once
    each, with the formats that need it."""
    seen = {}
    needs = {}
    for fmt, checks in formats(device).items():
        for fn in [check_python, check_torch] + checks:
            name = fn.__name__
            if name not in seen:
                try:
                    seen[name] = fn(False) if fn in (check_extension_module,
                                                     check_setuptools) else fn()
                except Exception as e:
                    seen[name] = _check(name[6:], False, "the check failed: %s: %s" %
                                        (type(e).__name__, e))
            needs.setdefault(name, []).append(fmt)
    out = []
    for name, c in seen.items():
        c = dict(c)
        c["needed_by"] = needs[name]
        out.append(c)
    try:
        doc, fp, desc = toolchain()
        versions = {"torch": doc["torch"], "torch_cuda": doc["torch_cuda"],
                    "python": platform.python_version(), "cxx": doc["cxx"]["version"],
                    "nvcc": doc["nvcc"]["version"]}
    except Exception as e:
        fp, desc, versions = None, "unknown (%s)" % e, {}
    return {"device": device, "checks": out, "toolchain": desc, "toolchain_id": fp,
            "formats": list(formats(device)), "versions": versions,
            "languages": languages(device), "baselines": baselines(device),
            "inputs": inputs()}


def inputs():
    """How KernelBench's CPU inputs are drawn here (stark_rand): its fast
    torch.rand checked against this torch, with both speeds."""
    try:
        import stark_rand
        why = stark_rand.check()
        if not why:
            fast, own = stark_rand.speed()
    except Exception as e:
        why = "the check failed: %s: %s" % (type(e).__name__, e)
    if why:
        return [{"input": "torch.rand", "ok": False, "detail": why}]
    return [{"input": "torch.rand", "ok": True,
             "detail": "the fast engine, checked bit for bit against torch %s: %.2f GB/s "
             "(torch's own %.2f GB/s, 64 MiB)" % (_torch().__version__, fast, own)}]


def languages(device):
    """The kernel languages this machine can judge on the device: one
    entry each, with what is missing (stark_lang)."""
    import stark_lang
    out = []
    for lang, lack in stark_lang.languages(device).items():
        out.append({"language": lang, "name": stark_lang.NAMES[lang], "ok": lack is None,
                    "detail": "can be judged" if lack is None else lack})
    return out


def baselines(device):
    """What the reference can be timed as (--baseline): eager always;
    compile where torch has torch.compile and inductor has what it
    generates code for on the device (Triton on a GPU, a C++ compiler on
    the CPU).  The run jail's Landlock is checked by stark doctor itself."""
    out = [{"baseline": "eager", "ok": True, "detail": "the reference as written"}]
    try:
        import stark_compiled
        why = stark_compiled.available()
        if why is None and device.startswith("cuda"):
            try:
                import triton
                detail = "torch %s, triton %s (inductor's GPU kernels)" % (
                    stark_compiled.torch.__version__, triton.__version__)
            except Exception as e:
                why = ("inductor writes a GPU's kernels in Triton, which is not importable "
                       "(%s: %s)" % (type(e).__name__, e))
        elif why is None:
            cxx = stark_compiled._cxx(os.environ)
            detail = "torch %s, C++ compiler %s (inductor's CPU kernels)" % (
                stark_compiled.torch.__version__, cxx)
            if not cxx:
                why = "inductor compiles a CPU's kernels with a C++ compiler: none on PATH"
    except Exception as e:
        why = "torch is not importable (%s: %s)" % (type(e).__name__, e)
    out.append({"baseline": "compile", "ok": why is None,
                "detail": detail if why is None else why})
    return out


def report_json(device):
    return json.dumps(report(device), sort_keys=True)
