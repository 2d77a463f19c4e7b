"""stark_cuda -- STARK's fast candidate format: CUDA C kernels compiled by
NVRTC and launched from Python, with no torch headers and no host C++ build.

A candidate writes its device code as a string of CUDA C with `extern "C"
__global__` kernels, wraps it in CudaModule, and launches kernels from
ModelNew.forward on PyTorch's current stream:

    mod = CudaModule(SRC)
    mod.my_kernel(grid=(blocks,), block=(256,), args=(x, out, n))

Compilation goes through NVRTC to a cubin for the device's architecture
(about 0.05 s once NVRTC is warm, against about a minute for load_inline),
cached by a hash of the source, options, architecture and NVRTC version.
Kernel parameter types are read from the kernel's signature in the source:
pointer parameters take CUDA tensors (or None for NULL), scalar parameters
take Python numbers converted to the declared C type.

Environment (set by the evaluator; all optional for standalone use):
  STARK_CUDA_CACHE  folder for cubins (default: a per-user cache folder), or
                    several separated by ':': cubins are looked up in each,
                    and a new one is written to the first that takes it (the
                    run jail's shared cache is read-only; a private folder
                    follows it)
  STARK_CUDA_MODE   "auto" (compile if not cached, then load: the run stage),
                    "compile" (compile and store only; launching is an
                    error: used in the compile jail, which has no GPU) or
                    "load" (never compile; a cubin missing from the cache is
                    an error)
  STARK_CUDA_ARCH   target, e.g. "sm_90"; required where no GPU is visible
                    (stark sets it from nvidia-smi for a "cuda" device)

This file is the only place the fast format touches the CUDA driver and
NVRTC libraries (through ctypes).
"""

import ctypes
import hashlib
import os
import re
import threading
import time

__all__ = ["CudaModule", "CudaKernel", "CudaError", "CompileError"]


class CudaError(RuntimeError):
    """A CUDA driver or NVRTC call failed."""


class CompileError(CudaError):
    """NVRTC rejected the source; .log holds the compiler's messages."""

    def __init__(self, message, log=""):
        super().__init__(message + ("\n" + log if log else ""))
        self.log = log


_lock = threading.Lock()
_libs = {}

# What this process's modules cost (diagnostics; the evaluator reports
# them): cubins compiled by NVRTC and the seconds that took, cubins found
# in the cache, and the seconds cuModuleLoadData took on first launches.
stats = {"built": 0, "build_s": 0.0, "cached": 0, "load_s": 0.0}

_NVRTC_NAMES = ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")
_CUDA_NAMES = ("libcuda.so.1", "libcuda.so")


def _candidate_dirs():
    """Folders that may hold libnvrtc besides the loader's search path:
    the CUDA toolkit and the NVIDIA wheels PyTorch depends on."""
    dirs = ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"]
    try:
        import site

        for sp in site.getsitepackages():
            for sub in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"):
                dirs.append(os.path.join(sp, sub))
    except Exception:
        pass
    return dirs


def _load(kind, names):
    with _lock:
        lib = _libs.get(kind)
        if lib is not None:
            return lib
        errors = []
        for name in names:
            paths = [name] + [os.path.join(d, name) for d in _candidate_dirs()]
            for path in paths:
                try:
                    lib = ctypes.CDLL(path)
                    _libs[kind] = lib
                    return lib
                except OSError as e:
                    errors.append(str(e))
        raise CudaError("cannot load %s: %s" % (kind, errors[-1] if errors else "not found"))


def _nvrtc():
    return _load("nvrtc", _NVRTC_NAMES)


def _cuda():
    lib = _load("cuda", _CUDA_NAMES)
    if not getattr(lib, "_stark_init", False):
        _check(lib.cuInit(0), "cuInit")
        lib._stark_init = True
    return lib


def _check(rc, what):
    if rc == 0:
        return
    name = ctypes.c_char_p()
    try:
        _load("cuda", _CUDA_NAMES).cuGetErrorName(rc, ctypes.byref(name))
    except CudaError:
        pass
    label = name.value.decode() if name.value else "error %d" % rc
    raise CudaError("%s failed: %s" % (what, label))


def _nvrtc_check(rc, what):
    if rc == 0:
        return
    lib = _nvrtc()
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    raise CudaError("%s failed: %s" % (what, lib.nvrtcGetErrorString(rc).decode()))


def nvrtc_version():
    major, minor = ctypes.c_int(), ctypes.c_int()
    _nvrtc_check(_nvrtc().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return "%d.%d" % (major.value, minor.value)


def _device_ordinal():
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.current_device()
    except Exception:
        pass
    return 0


def device_arch():
    """The target architecture: $STARK_CUDA_ARCH, else the current device's."""
    arch = os.environ.get("STARK_CUDA_ARCH")
    if arch:
        if not re.fullmatch(r"sm_\d+[a-z]?", arch):
            raise CudaError("STARK_CUDA_ARCH must look like sm_90, not %r" % arch)
        return arch
    try:
        lib = _cuda()
        dev = ctypes.c_int()
        _check(lib.cuDeviceGet(ctypes.byref(dev), _device_ordinal()), "cuDeviceGet")
    except CudaError as e:
        # The compile jail sees no GPU: stark sets STARK_CUDA_ARCH from
        # nvidia-smi for a "cuda" device, where nvidia-smi answers.
        raise CudaError("no GPU to take the target architecture from (%s); set "
                        "STARK_CUDA_ARCH, e.g. sm_90" % e) from None
    major, minor = ctypes.c_int(), ctypes.c_int()
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
    _check(lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev), "cuDeviceGetAttribute")
    _check(lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev), "cuDeviceGetAttribute")
    return "sm_%d%d" % (major.value, minor.value)


def _cache_dirs():
    dirs = [d for d in os.environ.get("STARK_CUDA_CACHE", "").split(os.pathsep) if d]
    if not dirs:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        dirs = [os.path.join(base, "stark", "cubin")]
    return dirs


def _mode():
    mode = os.environ.get("STARK_CUDA_MODE", "auto")
    if mode not in ("auto", "compile", "load"):
        raise CudaError("STARK_CUDA_MODE must be auto, compile or load, not %r" % mode)
    return mode


def _include_dirs():
    """CUDA's headers (cuda_fp16.h, cuda_bf16.h, ...), which NVRTC does not
    search by itself: the toolkit's, else the NVIDIA wheels'."""
    dirs = []
    for d in ["/usr/local/cuda/include", "/usr/local/cuda/targets/x86_64-linux/include"] + [
            os.path.join(os.path.dirname(c), "include") for c in _candidate_dirs()]:
        if os.path.isfile(os.path.join(d, "cuda_fp16.h")) and d not in dirs:
            dirs.append(d)
    return dirs


def compile_source(source, options, arch, name="kernel.cu"):
    """Compiles CUDA C source to a cubin with NVRTC.  Returns bytes;
    raises CompileError with NVRTC's log on a compile failure."""
    lib = _nvrtc()
    prog = ctypes.c_void_p()
    _nvrtc_check(
        lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
        "nvrtcCreateProgram",
    )
    try:
        opts = ["--gpu-architecture=" + arch, "-default-device", "--std=c++17"]
        opts += ["-I" + d for d in _include_dirs()] + list(options)
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(max(size.value, 1))
        lib.nvrtcGetProgramLog(prog, log)
        text = log.value.decode(errors="replace")
        if rc != 0:
            raise CompileError("nvrtc could not compile %s" % name, text)
        _nvrtc_check(lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
        cubin = ctypes.create_string_buffer(size.value)
        _nvrtc_check(lib.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return cubin.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


# C parameter types a kernel signature may use, and how to pass them.
_SCALARS = {
    "bool": ctypes.c_bool,
    "char": ctypes.c_byte,
    "signed char": ctypes.c_byte,
    "int8_t": ctypes.c_int8,
    "unsigned char": ctypes.c_ubyte,
    "uint8_t": ctypes.c_uint8,
    "short": ctypes.c_int16,
    "int16_t": ctypes.c_int16,
    "unsigned short": ctypes.c_uint16,
    "uint16_t": ctypes.c_uint16,
    "int": ctypes.c_int32,
    "signed": ctypes.c_int32,
    "int32_t": ctypes.c_int32,
    "unsigned": ctypes.c_uint32,
    "unsigned int": ctypes.c_uint32,
    "uint32_t": ctypes.c_uint32,
    "long": ctypes.c_int64,
    "long int": ctypes.c_int64,
    "long long": ctypes.c_int64,
    "long long int": ctypes.c_int64,
    "int64_t": ctypes.c_int64,
    "ptrdiff_t": ctypes.c_int64,
    "unsigned long": ctypes.c_uint64,
    "unsigned long long": ctypes.c_uint64,
    "size_t": ctypes.c_uint64,
    "uint64_t": ctypes.c_uint64,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict"}
_KERNEL_RE = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?'
                        r"void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(([^)]*)\)")


def _strip_comments(src):
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


def parse_kernels(source):
    """Maps each extern "C" __global__ kernel's name to its parameter kinds:
    a list of (name, ctype) where ctype None means a pointer."""
    kernels = {}
    for m in _KERNEL_RE.finditer(_strip_comments(source)):
        name, params = m.group(1), m.group(2).strip()
        kinds = []
        if params and params != "void":
            for i, p in enumerate(params.split(",")):
                p = p.strip()
                if "*" in p:
                    kinds.append(("arg%d" % i, None))
                    continue
                words = [w for w in p.split() if w not in _QUALIFIERS]
                if len(words) < 2:
                    raise CudaError("kernel %s: cannot read parameter %r" % (name, p))
                ctype = _SCALARS.get(" ".join(words[:-1]))
                if ctype is None:
                    raise CudaError("kernel %s: parameter %r has a type the fast format does not pass "
                                    "(use a pointer or one of: %s)" % (name, p, ", ".join(sorted(_SCALARS))))
                kinds.append((words[-1], ctype))
        kernels[name] = kinds
    return kernels


def _dim3(v, what):
    if isinstance(v, int):
        v = (v,)
    v = tuple(int(x) for x in v)
    if not 1 <= len(v) <= 3 or any(x < 1 for x in v):
        raise CudaError("%s must be 1 to 3 positive integers, not %r" % (what, v))
    return v + (1,) * (3 - len(v))


class CudaKernel:
    """One kernel of a CudaModule; call it to launch."""

    def __init__(self, module, name, kinds):
        self._module = module
        self.name = name
        self._kinds = kinds
        self._func = None

    def _function(self):
        if self._func is None:
            func = ctypes.c_void_p()
            _check(_cuda().cuModuleGetFunction(ctypes.byref(func), self._module._handle(), self.name.encode()),
                   "cuModuleGetFunction(%s)" % self.name)
            self._func = func
        return self._func

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        if len(args) != len(self._kinds):
            raise CudaError("kernel %s takes %d arguments, got %d" % (self.name, len(self._kinds), len(args)))
        holders = []
        for (pname, ctype), a in zip(self._kinds, args):
            if ctype is None:
                if a is None:
                    holders.append(ctypes.c_void_p(0))
                elif hasattr(a, "data_ptr") and getattr(a, "is_cuda", False):
                    holders.append(ctypes.c_void_p(a.data_ptr()))
                else:
                    raise CudaError("kernel %s: argument %s must be a CUDA tensor or None" % (self.name, pname))
            else:
                if hasattr(a, "item"):
                    a = a.item()
                holders.append(ctype(a))
        params = (ctypes.c_void_p * max(len(holders), 1))(*[ctypes.addressof(h) for h in holders])
        gx, gy, gz = _dim3(grid, "grid")
        bx, by, bz = _dim3(block, "block")
        if stream is None:
            import torch

            stream = torch.cuda.current_stream().cuda_stream
        elif hasattr(stream, "cuda_stream"):
            stream = stream.cuda_stream
        func = self._function()
        _check(_cuda().cuLaunchKernel(func, gx, gy, gz, bx, by, bz, int(shared_mem),
                                      ctypes.c_void_p(stream), params, None),
               "launch of %s" % self.name)


class CudaModule:
    """CUDA C source compiled once (NVRTC, cached unless cache=False) and
    loaded on first use.

    Every extern "C" __global__ kernel in the source is an attribute:
    `mod.kernel_name(grid, block, args, shared_mem=0, stream=None)`.
    """

    def __init__(self, source, options=(), name="kernel.cu", cache=True):
        if not isinstance(source, str) or not source.strip():
            raise CudaError("CudaModule needs CUDA C source text")
        self.source = source
        self.options = tuple(options)
        self.kernels = {k: CudaKernel(self, k, v) for k, v in parse_kernels(source).items()}
        if not self.kernels:
            raise CudaError('no extern "C" __global__ kernel found in the source')
        self.arch = device_arch()
        # A cubin is valid for its architecture whatever NVRTC built it, so
        # the key leaves the NVRTC version out: the run jail never needs it.
        key = "\0".join([source, "\0".join(self.options), self.arch])
        self.key = hashlib.sha256(key.encode()).hexdigest()[:32]
        self._mod = None
        # cache=False: compiled in memory whatever STARK_CUDA_MODE says, and
        # neither read from nor written to a cache folder (the evaluator's
        # own kernels, which no folder a candidate can write may supply).
        self.cubin = self._obtain(name) if cache else compile_source(source, self.options,
                                                                      self.arch, name)

    def _obtain(self, name):
        fname = "%s.%s.cubin" % (self.key, self.arch)
        dirs = _cache_dirs()
        for d in dirs:
            try:
                with open(os.path.join(d, fname), "rb") as f:
                    cubin = f.read()
                stats["cached"] += 1
                return cubin
            except OSError:
                pass
        if _mode() == "load":
            raise CudaError("kernel source was not compiled in the compile stage (no cubin %s)" % fname)
        t0 = time.perf_counter()
        cubin = compile_source(self.source, self.options, self.arch, name)
        stats["built"] += 1
        stats["build_s"] += time.perf_counter() - t0
        err = None
        for d in dirs:
            path = os.path.join(d, fname)
            try:
                os.makedirs(d, exist_ok=True)
                tmp = "%s.%d.tmp" % (path, os.getpid())
                with open(tmp, "wb") as f:
                    f.write(cubin)
                os.replace(tmp, path)
                return cubin
            except OSError as e:
                err = e
        if _mode() == "compile" and err is not None:
            raise err
        return cubin

    def _handle(self):
        if _mode() == "compile":
            raise CudaError("kernels cannot be launched in the compile stage")
        if self._mod is None:
            lib = _cuda()
            ctx = ctypes.c_void_p()
            _check(lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
            if not ctx.value:
                # Use the primary context, the one PyTorch uses.
                dev = ctypes.c_int()
                _check(lib.cuDeviceGet(ctypes.byref(dev), _device_ordinal()), "cuDeviceGet")
                _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
                _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
            mod = ctypes.c_void_p()
            t0 = time.perf_counter()
            _check(lib.cuModuleLoadData(ctypes.byref(mod), self.cubin), "cuModuleLoadData")
            stats["load_s"] += time.perf_counter() - t0
            self._mod = mod
        return self._mod

    def __getattr__(self, name):
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError("no kernel named %r in this module (have: %s)" % (name, ", ".join(sorted(kernels))))


# -- device memory shared between processes ---------------------------------
# The output window on the device (stark_wire.DeviceWindow): memory made by
# CUDA's virtual memory management in the reference's worker, exported as a
# POSIX file descriptor, passed to the candidate's worker over the
# referee's channels and mapped there.  Its copies stay on the device (0.53
# ms a GiB on an H200, against 20 ms each way through pinned host memory).
# These calls need the current context: PyTorch's, made current once it has
# touched the device.

_HANDLE_FD = 1               # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_ACCESS_READ, _ACCESS_RW = 1, 3


class _MemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _MemLocation), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _MemLocation), ("flags", ctypes.c_int)]


def _alloc_prop(device):
    p = _AllocProp()
    p.type = 1                      # CU_MEM_ALLOCATION_TYPE_PINNED
    p.requestedHandleTypes = _HANDLE_FD
    p.location.type = 1             # CU_MEM_LOCATION_TYPE_DEVICE
    p.location.id = device
    return p


class SharedMemory:
    """A device allocation mapped into this process, that another process
    may map too (create, then export; or open an exported descriptor).
    ptr and size describe the mapping; close() unmaps and releases it."""

    def __init__(self, device):
        self.device = device
        self.handle = ctypes.c_ulonglong(0)
        self.ptr = 0
        self.size = 0

    @classmethod
    def create(cls, nbytes, device):
        """At least nbytes on `device`, mapped read-write; CudaError if
        the driver refuses."""
        lib = _cuda()
        self = cls(device)
        prop = _alloc_prop(device)
        gran = ctypes.c_size_t()
        _check(lib.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0),
               "cuMemGetAllocationGranularity")
        g = max(gran.value, 1)
        size = (max(nbytes, 1) + g - 1) // g * g
        _check(lib.cuMemCreate(ctypes.byref(self.handle), ctypes.c_size_t(size),
                               ctypes.byref(prop), ctypes.c_ulonglong(0)), "cuMemCreate")
        try:
            self._map(size, True)
        except CudaError:
            lib.cuMemRelease(self.handle)
            raise
        return self

    @classmethod
    def open(cls, fd, nbytes, device, writable):
        """The allocation exported as fd (not closed here), its first
        nbytes mapped: read-write, or read-only."""
        lib = _cuda()
        self = cls(device)
        _check(lib.cuMemImportFromShareableHandle(ctypes.byref(self.handle),
                                                  ctypes.c_void_p(fd), _HANDLE_FD),
               "cuMemImportFromShareableHandle")
        try:
            self._map(nbytes, writable)
        except CudaError:
            lib.cuMemRelease(self.handle)
            raise
        return self

    def _map(self, size, writable):
        lib = _cuda()
        ptr = ctypes.c_ulonglong()
        _check(lib.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                       ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)),
               "cuMemAddressReserve")
        try:
            _check(lib.cuMemMap(ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), self.handle,
                                ctypes.c_ulonglong(0)), "cuMemMap")
            acc = _AccessDesc()
            acc.location.type = 1
            acc.location.id = self.device
            acc.flags = _ACCESS_RW if writable else _ACCESS_READ
            rc = lib.cuMemSetAccess(ptr, ctypes.c_size_t(size), ctypes.byref(acc), ctypes.c_size_t(1))
            if rc:
                lib.cuMemUnmap(ptr, ctypes.c_size_t(size))
                _check(rc, "cuMemSetAccess")
        except CudaError:
            lib.cuMemAddressFree(ptr, ctypes.c_size_t(size))
            raise
        self.ptr, self.size = ptr.value, size

    def export(self):
        """A new file descriptor for this allocation (the caller closes it)."""
        fd = ctypes.c_int(-1)
        _check(_cuda().cuMemExportToShareableHandle(ctypes.byref(fd), self.handle, _HANDLE_FD,
                                                    ctypes.c_ulonglong(0)),
               "cuMemExportToShareableHandle")
        return fd.value

    def close(self):
        """Unmaps and releases; the memory is freed once every process that
        maps it has let go."""
        if not self.ptr:
            return
        lib = _cuda()
        lib.cuMemUnmap(ctypes.c_ulonglong(self.ptr), ctypes.c_size_t(self.size))
        lib.cuMemAddressFree(ctypes.c_ulonglong(self.ptr), ctypes.c_size_t(self.size))
        lib.cuMemRelease(self.handle)
        self.ptr, self.size = 0, 0


# -- device memory of another process, by CUDA IPC ---------------------------
# A timed call's delivered inputs on a GPU (stark_worker_ipc): the
# candidate's worker exports the allocations under its input buffers
# (legacy IPC handles: PyTorch's caching allocator takes them with
# cudaMalloc), and the reference's worker opens them and writes the
# inputs there.  Like the calls above, these need PyTorch's context current.

IPC_HANDLE_BYTES = 64
_IPC_LAZY_PEER = 1           # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * IPC_HANDLE_BYTES)]


def ipc_export(ptr):
    """The allocation holding device address ptr: (its IPC handle's bytes,
    ptr's offset in it, the allocation's size)."""
    lib = _cuda()
    base, size = ctypes.c_ulonglong(), ctypes.c_size_t()
    _check(lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size),
                                       ctypes.c_ulonglong(ptr)), "cuMemGetAddressRange")
    h = _IpcHandle()
    _check(lib.cuIpcGetMemHandle(ctypes.byref(h), base), "cuIpcGetMemHandle")
    # The structure's buffer, all 64 bytes: a c_char array read as a field
    # stops at its first NUL.
    return bytes(h), ptr - base.value, size.value


def ipc_open(handle):
    """Maps another process's allocation by its IPC handle's bytes: (the
    device address it is mapped at here, the mapping's size as this
    process's driver has it -- never the exporter's word).  Mappings are
    kept for the worker's life (stark_worker_ipc caps how many)."""
    if len(handle) != IPC_HANDLE_BYTES:
        raise CudaError("an IPC handle of %d bytes" % len(handle))
    lib = _cuda()
    h = _IpcHandle()
    ctypes.memmove(ctypes.byref(h), handle, IPC_HANDLE_BYTES)
    ptr = ctypes.c_ulonglong()
    lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), _IpcHandle,
                                          ctypes.c_uint]
    _check(lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, _IPC_LAZY_PEER),
           "cuIpcOpenMemHandle")
    base, size = ctypes.c_ulonglong(), ctypes.c_size_t()
    rc = lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr)
    if rc != 0 or base.value != ptr.value:
        lib.cuIpcCloseMemHandle(ptr)
        _check(rc or 1, "cuMemGetAddressRange of an opened IPC mapping")
    return ptr.value, size.value
