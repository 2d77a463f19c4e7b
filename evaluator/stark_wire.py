"""stark_wire -- the protocol between the referee and its workers: messages,
channels, tensor descriptions and the output window.  What both sides
compute on tensors the same way (input descriptions and variants, output
digests, the comparison) is stark_tensors.

The referee (trusted) drives two forked workers over socketpairs: one runs
the problem's reference Model, the other the candidate's ModelNew.  Every
message is a 12-byte header (4-byte ASCII kind, 8-byte little-endian payload
length) followed by the payload.  Payloads are JSON; output tensors travel
through the output window (below), described by a JSON header that names
each tensor's dtype and shape.

Nothing a worker sends is unpickled or evaluated: the referee reads a
header, checks the kind and the length against a cap it chose before
reading a byte of payload, and parses JSON; the reference worker reads
from the window only the dtypes and shapes the referee validated.  Deadlines are enforced on every read and write; a
worker that dies is noticed through its pidfd (or by polling its pid where
pidfds are not available).

The data path of one call (the same on CPUs and GPUs):
  GEN    both workers make the call's inputs themselves, on their device,
         from the seed the referee derived for this call, and reply with a
         description (stark_tensors.describe_inputs) that the referee
         compares: a candidate whose inputs differ from the reference's is
         rejected.
  CALL   each model runs with the other worker stopped.
  FETCH  the reference describes its outputs (header only: its bytes never
         leave it); the candidate sends its header and writes its bytes
         into the output window (below), then says so.
  CMPR   the referee checks the candidate's header against the reference's
         and, with the candidate stopped, has the reference worker read the
         bytes from the window onto its device and compare them with its
         own outputs (stark_tensors.compare_tensor); it replies with the
         statistics, or with the offset of the next chunk it needs (below).
  PUT    the candidate writes the next chunk of its outputs' bytes into the
         window; CMPR again, and so on.

The output window is a memfd the referee creates before it forks the
workers and sizes (ftruncate, grown only) to the outputs' bytes
(window_layout), at most the window's capacity (window_capacity: 256 MiB
in host memory, 1 GiB on the device, unless $STARK_WINDOW_BYTES says
otherwise).  Outputs larger than that
stream through it in chunks: the outputs, laid out one after another
(window_layout), are cut at multiples of the capacity (chunk_parts); FETCH
writes the first chunk, each PUT the next one, and the reference compares
each chunk as it comes and keeps the statistics of every output
(stark_tensors.merge_results), so host memory stays at one chunk however
large the outputs are (KernelBench's level 1 returns up to 8 GiB).  Outputs move
through it with one copy each way, straight between the device and memory
the workers register with CUDA, instead of through two sockets and the
referee.  The candidate maps it
writable, the reference read-only; it only ever holds the candidate's
bytes, so reading it teaches the candidate nothing.  It is sealed against
shrinking (a mapping past the end of a shrunk file faults) and against new
seals, so the candidate can neither crash the reference through it nor
stop the referee growing it.  What the candidate writes there after it
said FETCH was done is still its own output, and the output digests of
timed calls tie those bytes to the moment the call returned.
"""

import json
import mmap
import os
import select
import socket
import struct
import time
import traceback
import warnings

import torch

import stark_memory as M

HDR = struct.Struct("<4sQ")

# Kinds the referee sends.
LOAD = b"LOAD"      # JSON {"init_seed": n}: build the model
COMPILE = b"COMP"   # JSON {}: run the solution's top level, build natives
GEN = b"GEN "       # JSON {"seed", "sizes", "variant"[, "slot"]}: make this call's
                    # inputs (in the memory placement `slot`)
CALL = b"CALL"      # run forward on the last inputs (timed in the worker on GPUs)
DWINDOW = b"DWIN"   # the output window on the device (DeviceWindow): to the
                    # reference {"size": n} (replies OK {"size"} and the
                    # descriptor), {"use": true} or {"drop": true}; to the
                    # candidate {"size": n} and the descriptor
INWIN = b"INWN"     # an input window's descriptor (stark_worker_delivery), from
                    # the referee: JSON {"size": n, "items": [...], "part":
                    # "own" | "cand"} (the reference also maps the candidate's)
IPC = b"IPC "       # a GPU's delivered inputs (stark_worker_ipc): to the reference
                    # JSON {"open": [...]} or {"test": {...}}, to the candidate
                    # {"test_make": true} or {"test_check": true}
FETCH = b"FTCH"     # describe the last outputs; JSON {"window": n}: the
                    # candidate also writes them into the output window
COMPARE = b"CMPR"   # reference only: JSON header; the bytes are in the window
FLUSH = b"FLSH"     # reference only: flush the GPU's L2 before a timed call
TIMED_NOOP = b"TNOP"  # CALL's timing steps without forward; JSON {"launches": n}:
                    # n launches of one small kernel instead (the launch mode)
DEVICE_INFO = b"DEVI"  # reference only: JSON {"bandwidth", "prepare", "timing", "compare": bool}
PING = b"PING"      # no-op round trip
PROFILE = b"PROF"   # like CALL, under the profiler; replies the op names
SCAN = b"SCAN"      # JSON {"keep": n}: time forward on every memory placement
                    # with the last inputs; keep the fastest n for later GENs
PLAN = b"PLAN"      # reference only: JSON {"init_seed": n}: the problem's footprint
                    # estimated on the meta device (stark_worker_memory)
COMPILE_REF = b"CREF"  # reference only: JSON {"folder", "warm_max"}: the model under
                    # torch.compile, warmed up on the last inputs until it compiles
                    # no more (stark_compiled); CALL {"compiled": true} then runs it
PUT = b"PUT "       # candidate only: JSON {"off": n}: write the outputs' bytes
                    # from offset n into the output window (the next chunk)
PSTATS = b"PSTA"    # the worker's Python profile (STARK_PY_PROFILE=1): replies {"text"}
QUIT = b"QUIT"

# Kinds a worker sends.
OK = b"OK  "        # JSON info
ERR = b"ERR "       # JSON {"type", "message", "traceback", "phase", ...}
OUT_HEADER = b"OUTH"  # JSON {"kind": "tensor"|"seq"|"bad"|"reject", ...}
OUT_WRITTEN = b"OUTW"  # JSON {"bytes": n}: the outputs are in the window

CONTROL_MAX = 4 << 20       # a JSON payload from a worker
HEADER_MAX = 1 << 20        # an output header
MAX_TENSORS = 64            # tensors in one output or input list
MAX_ITEMS = 4096            # items (tensors and values) in one input list
OUTPUT_MAX = 16 << 30       # bytes of reference output accepted
WINDOW_BYTES = M.CHUNK_BYTES  # the output window's capacity: one chunk
WINDOW_MIN = M.WINDOW_MIN   # the smallest capacity $STARK_WINDOW_BYTES may set
MAX_DIMS = 16

DTYPES = {
    "float32": torch.float32, "float64": torch.float64,
    "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class WireError(Exception):
    """A worker broke the protocol (bad kind, oversized, malformed)."""


class WorkerGone(Exception):
    """The worker closed its socket or died."""


class WorkerTimeout(Exception):
    """The deadline passed while waiting on a worker."""


def format_exc(exc, limit=200000):
    """The traceback of exc without the evaluator's own frames (files named
    <stark-eval>/...), so a user sees where their code failed; capped,
    keeping the head and the tail."""
    try:
        te = traceback.TracebackException.from_exception(exc)
        te.stack = traceback.StackSummary.from_list(
            [f for f in te.stack if not f.filename.startswith("<stark-eval>")])
        text = "".join(te.format())
    except Exception:
        text = "%s: %s\n" % (type(exc).__name__, exc)
    if len(text) > limit:
        text = text[:limit // 4] + "\n[... cut ...]\n" + text[-limit // 2:]
    return text


PROFILE_CHARS = 1000        # a Python profile's text: whole lines within an env value


def profile_text(prof, limit=PROFILE_CHARS):
    """A cProfile.Profile's heaviest functions by cumulative time, one a
    line, "cum_ms own_ms calls file:line(function)", as many whole lines
    as fit in `limit` characters (STARK_PY_PROFILE: where an evaluation's
    processes spend their wall time)."""
    import pstats
    out, n = [], 0
    for (f, line, fn), (_, nc, tt, ct, _) in sorted(pstats.Stats(prof).stats.items(),
                                                    key=lambda kv: -kv[1][3]):
        text = "%.0f %.0f %d %s:%d(%s)" % (ct * 1e3, tt * 1e3, nc, os.path.basename(f),
                                          line, fn[:80])
        if n + len(text) + 1 > limit:
            break
        out.append(text)
        n += len(text) + 1
    return "\n".join(out)


def exc_text(e):
    """An exception in one short line: its type and message."""
    return ("%s: %s" % (type(e).__name__, e))[:300]


def dtype_name(dt):
    name = DTYPE_NAMES.get(dt)
    if name is None:
        raise ValueError("unsupported dtype %s" % dt)
    return name


def describe_tensor(t):
    return {"dtype": dtype_name(t.dtype), "shape": list(t.shape)}


def checked_spec(spec, what):
    """Validates one {"dtype", "shape"} entry from a peer; returns
    (dtype, shape, nbytes)."""
    if not isinstance(spec, dict):
        raise WireError("%s: expected an object" % what)
    dt = DTYPES.get(spec.get("dtype")) if isinstance(spec.get("dtype"), str) else None
    if dt is None:
        raise WireError("%s: unknown dtype %.40r" % (what, spec.get("dtype")))
    shape = spec.get("shape")
    if (not isinstance(shape, list) or len(shape) > MAX_DIMS or
            not all(type(d) is int and 0 <= d < (1 << 40) for d in shape)):
        raise WireError("%s: bad shape %.80r" % (what, shape))
    n = 1
    for d in shape:
        n *= d
    nbytes = n * torch.empty((), dtype=dt).element_size()
    return dt, tuple(shape), nbytes


WINDOW_ALIGN = M.WINDOW_ALIGN  # each output's offset in the window


def window_layout(specs):
    """Offsets of the outputs of validated specs [(dtype, shape, nbytes)] in
    the output window, each aligned to WINDOW_ALIGN, and the bytes the
    window needs for them."""
    offs, pos = [], 0
    for _, _, n in specs:
        offs.append(pos)
        pos += -(-n // WINDOW_ALIGN) * WINDOW_ALIGN
    return offs, pos


def window_capacity(env=None, device=False):
    """The output window's capacity in bytes, in host memory or on the
    device (stark_memory.window_bytes: $STARK_WINDOW_BYTES, else 256 MiB
    and 1 GiB), which the memory plan counts."""
    return M.window_bytes(env, device)


def input_delivery(env=None, device=False):
    """Whether timed pairs deliver the candidate's inputs
    (stark_memory.input_delivery)."""
    return M.input_delivery(env, device)


def window_on_device(env=None):
    """Whether large outputs on a GPU go through an output window on the
    device (DeviceWindow; the default) rather than host memory
    ($STARK_OUTPUT_WINDOW=host)."""
    return (os.environ if env is None else env).get("STARK_OUTPUT_WINDOW", "") != "host"


def chunk_parts(specs, offs, start, end):
    """The pieces of the outputs (validated specs at window_layout's offs)
    that the stream's bytes [start, end) hold: (output index, first byte,
    end byte) within each output's own bytes.  Chunks begin at multiples
    of WINDOW_ALIGN and outputs at WINDOW_ALIGN boundaries, so a piece never
    splits an element or an 8-byte word."""
    parts = []
    for i, ((_, _, n), off) in enumerate(zip(specs, offs)):
        lo, hi = max(start, off), min(end, off + n)
        if lo < hi:
            parts.append((i, lo - off, hi - off))
    return parts


def input_window(size):
    """The referee's side: a new input window of `size` bytes
    (stark_worker_delivery), a memfd sealed against shrinking, growing
    and further seals, so the candidate's process can neither take pages
    from under the referee's copies nor make it larger.  Returns its
    descriptor."""
    import fcntl
    fd = os.memfd_create("stark-inputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(fd)
        raise
    return fd


def window_create():
    """The referee's side: a new, empty output window (a memfd sealed
    against shrinking and further seals).  Returns its descriptor."""
    import fcntl
    fd = os.memfd_create("stark-outputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(fd)
        raise
    return fd


class Window:
    """A worker's mapping of the output window: writable in the candidate's
    worker, read-only in the reference's.  With pin, the mapping is
    registered with CUDA (cudaHostRegister), so copies between it and the
    device run at the speed of pinned memory; where registering fails they
    still work, at the speed of pageable memory (pin_error says why)."""

    on_device = False

    def __init__(self, fd, writable, pin=False):
        self.fd = fd
        self.writable = writable
        self.pin = pin
        self.pin_error = None
        self.mm = None
        self.size = 0
        self.ptr = None         # the registered address, when pinned
        self.stale = []         # mappings a live view kept from closing

    def _address(self, mm):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # a read-only buffer
            return torch.frombuffer(mm, dtype=torch.uint8, count=1).data_ptr()

    def unmap(self):
        if self.ptr is not None:
            torch.cuda.cudart().cudaHostUnregister(self.ptr)
            self.ptr = None
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:
                self.stale.append(self.mm)
            self.mm, self.size = None, 0

    def map(self, size):
        """The mapping, at least size bytes long (the window's file must be
        that large: WireError if it is not)."""
        if self.mm is not None and self.size >= size:
            return self.mm
        have = os.fstat(self.fd).st_size
        if have < size:
            raise WireError("the output window holds %d bytes, %d needed" % (have, size))
        self.unmap()
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if self.writable else 0)
        self.mm = mmap.mmap(self.fd, size, flags=mmap.MAP_SHARED, prot=prot)
        self.size = size
        if self.pin and self.pin_error is None:
            ptr = self._address(self.mm)
            # cudaHostRegisterReadOnly (8) for the reference's mapping.
            err = torch.cuda.cudart().cudaHostRegister(ptr, size, 0 if self.writable else 8)
            if int(err) == 0:
                self.ptr = ptr
            else:
                self.pin_error = "cudaHostRegister: error %d" % int(err)
        return self.mm

    def tensors(self, specs, offs, size):
        """CPU tensors over the window's bytes for validated specs at offs
        (window_layout); they are views, to be dropped before the next
        map()."""
        mm = self.map(size)
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # a read-only buffer
            for (dt, shape, n), off in zip(specs, offs):
                if n == 0:
                    out.append(torch.empty(shape, dtype=dt))
                    continue
                t = torch.frombuffer(mm, dtype=torch.uint8, count=n, offset=off)
                out.append(t.view(dt).reshape(shape))
        return out


class _DeviceArray:
    """A device address range as __cuda_array_interface__, for
    torch.as_tensor."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 3}


class DeviceWindow:
    """The output window in device memory (STARK_OUTPUT_WINDOW=device): made
    and exported by the reference's worker, mapped read-write by the
    candidate's (stark_cuda.SharedMemory).  Its tensors() are CUDA views,
    the same interface as Window's; the reference copies each piece out of
    it before judging it (the candidate's process can write it at any
    time, as it can the host window)."""

    on_device = True
    pin_error = None

    def __init__(self, mem, writable):
        self.mem = mem
        self.writable = writable
        self.size = mem.size
        self.base = None

    def map(self, size):
        if size > self.size:
            raise WireError("the device window holds %d bytes, %d needed" % (self.size, size))
        if self.base is None:
            self.base = torch.as_tensor(_DeviceArray(self.mem.ptr, self.size),
                                        device="cuda:%d" % self.mem.device)
        return self.base

    def tensors(self, specs, offs, size):
        base = self.map(size)
        out = []
        for (dt, shape, n), off in zip(specs, offs):
            if n == 0:
                out.append(torch.empty(shape, dtype=dt, device=base.device))
                continue
            out.append(base[off:off + n].view(dt).reshape(shape))
        return out

    def unmap(self):
        self.base = None
        self.mem.close()


class Channel:
    """One end of a referee<->worker socketpair, with deadlines.

    pid/pidfd (referee side only) let a blocked read notice that the worker
    died.  deadline is a time.monotonic() value or None (wait forever: only
    the worker side, which the referee kills when it must)."""

    WATCH_S = 0.1               # how often a wait calls watch()

    def __init__(self, sock, pid=None):
        self.sock = sock
        self.pid = pid
        self.pidfd = -1
        self.watch = None       # called every WATCH_S while waiting (the referee's)
        self.accept_fds = False  # whether descriptors sent are received (take_fd)
        self.fd_in = -1
        if pid is not None and hasattr(os, "pidfd_open"):
            try:
                self.pidfd = os.pidfd_open(pid)
            except OSError:
                self.pidfd = -1

    def close(self):
        if self.fd_in >= 0:
            os.close(self.fd_in)
            self.fd_in = -1
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1
        self.sock.close()

    def _wait(self, events, deadline):
        if deadline is None:
            return
        poller = select.poll()
        poller.register(self.sock.fileno(), events)
        if self.pidfd >= 0:
            poller.register(self.pidfd, select.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerTimeout()
            # Without a pidfd, wake up now and then to check the pid.
            slice_ms = left * 1000 if self.pidfd >= 0 else min(left * 1000, 200)
            if self.watch is not None:
                slice_ms = min(slice_ms, self.WATCH_S * 1000)
            ready = poller.poll(max(1, int(slice_ms)))
            if not ready and self.watch is not None:
                self.watch()
            fds = {fd: ev for fd, ev in ready}
            if self.sock.fileno() in fds:
                return
            if self.pidfd >= 0 and self.pidfd in fds:
                raise WorkerGone()
            if self.pidfd < 0 and self.pid is not None:
                try:
                    done, _ = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:
                    done = self.pid
                if done:
                    raise WorkerGone()

    def send_fd(self, kind, obj, fd, deadline=None):
        """A JSON message with a file descriptor passed along (SCM_RIGHTS,
        on its first byte): the device window's (DeviceWindow)."""
        payload = json.dumps(obj).encode()
        data = HDR.pack(kind, len(payload)) + payload
        self._wait(select.POLLOUT, deadline)
        try:
            n = socket.send_fds(self.sock, [data], [fd])
        except OSError:
            raise WorkerGone()
        if n < len(data):
            self.send_all(data[n:], deadline)

    def take_fd(self):
        """The descriptor the last message received carried (-1 if none);
        the caller owns it.  Only a channel with accept_fds set receives
        them: elsewhere the kernel closes any sent."""
        fd, self.fd_in = self.fd_in, -1
        return fd

    def _recv_first(self, view, deadline):
        """The first bytes of a message header, and a descriptor passed
        with them (kept in fd_in; any more are closed)."""
        while True:
            self._wait(select.POLLIN, deadline)
            try:
                data, fds, _, _ = socket.recv_fds(
                    self.sock, len(view), 4, socket.MSG_DONTWAIT if deadline is not None else 0)
                break
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                raise WorkerGone()
        for extra in fds[1:]:
            os.close(extra)
        if self.fd_in >= 0:
            os.close(self.fd_in)
        self.fd_in = fds[0] if fds else -1
        if not data:
            raise WorkerGone()
        view[:len(data)] = data
        return len(data)

    def recv_into(self, view, deadline):
        got = 0
        while got < len(view):
            self._wait(select.POLLIN, deadline)
            try:
                n = self.sock.recv_into(view[got:], 0, socket.MSG_DONTWAIT
                                        if deadline is not None else 0)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                raise WorkerGone()
            if n == 0:
                raise WorkerGone()
            got += n

    def send_all(self, data, deadline):
        view = memoryview(data).cast("B")
        sent = 0
        while sent < len(view):
            self._wait(select.POLLOUT, deadline)
            try:
                n = self.sock.send(view[sent:], socket.MSG_DONTWAIT
                                   if deadline is not None else 0)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                raise WorkerGone()
            sent += n

    def send(self, kind, payload=b"", deadline=None):
        self.send_all(HDR.pack(kind, len(payload)), deadline)
        if payload:
            self.send_all(payload, deadline)

    def send_json(self, kind, obj, deadline=None):
        self.send(kind, json.dumps(obj).encode(), deadline)

    def recv_header(self, deadline):
        hdr = bytearray(HDR.size)
        view = memoryview(hdr)
        got = self._recv_first(view, deadline) if self.accept_fds else 0
        self.recv_into(view[got:], deadline)
        return HDR.unpack(bytes(hdr))

    def recv(self, caps, deadline=None):
        """Receives one message whose kind is in caps (kind -> max length).
        Returns (kind, payload bytes)."""
        kind, n = self.recv_header(deadline)
        if kind not in caps:
            raise WireError("unexpected message kind %r" % kind)
        if n > caps[kind]:
            raise WireError("message %r of %d bytes exceeds the cap of %d"
                            % (kind.decode("ascii", "replace"), n, caps[kind]))
        buf = bytearray(n)
        self.recv_into(memoryview(buf), deadline)
        return kind, bytes(buf)

    def recv_json(self, caps, deadline=None):
        kind, payload = self.recv(caps, deadline)
        try:
            obj = json.loads(payload.decode("utf-8")) if payload else {}
        except (ValueError, RecursionError) as e:
            raise WireError("malformed JSON in %r: %s" % (kind, e))
        if not isinstance(obj, dict):
            raise WireError("message %r is not a JSON object" % kind)
        return kind, obj
