"""A GPU's delivered inputs, the parts that run without a GPU
(evaluator/stark_worker_ipc.py): the reference's worker takes a mapping's
size from its own driver, never from the candidate's export, and refuses
an export that is malformed, sized unlike the buffer it must fill, reaches
past the mapping, or is one allocation too many; the candidate's worker
serves no request of the reference's side.  The driver's mapping is stood
in for by a table of (address, size) per handle, since CUDA IPC needs a
GPU; tests/gpu/45-input-delivery.t runs the whole on one.  Prints TAP.
Usage: python3 tests/helpers/ipc_check.py"""
import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator"))
sys.path.insert(0, os.path.join(HERE, "..", "memory"))

from tap import done, ok  # noqa: E402

import torch  # noqa: E402

import stark_cuda  # noqa: E402
import stark_worker_ipc as I  # noqa: E402


def raises(fn, *args):
    try:
        fn(*args)
    except ValueError as e:
        return str(e)
    return None


MAPPED = {}         # handle bytes -> (address, size): the driver's word


def fake_open(h):
    return MAPPED[h]


stark_cuda.ipc_open = fake_open


class Ref(I.IpcDelivery):
    def __init__(self, role="ref"):
        self.role = role
        self.device = torch.device("cuda")
        self.in_bufs = []


def handle(i):
    return bytes([i % 256, i // 256]) * (stark_cuda.IPC_HANDLE_BYTES // 2)


like = torch.empty(1024, dtype=torch.float32)          # 4096 bytes
MAPPED[handle(1)] = (0x7f0000000000, 8192)
r = Ref()
d = {"h": handle(1).hex(), "off": 4096, "n": 4096, "size": 1 << 40}
ok(r._ipc_check(d, like) == 0x7f0000000000 + 4096,
   "an export that fits the mapping gives its address here")
e = raises(r._ipc_check, dict(d, off=4100), like)
ok(e is not None and "mapping of 8192" in e,
   "an export past the mapping's end is refused, whatever size it claims", e)
e = raises(r._ipc_check, dict(d, n=8192, off=0), like)
ok(e is not None and "4096 needed" in e, "an export sized unlike the buffer is refused", e)
bad = [dict(d, h="00"), dict(d, h=123), dict(d, off=-1), dict(d, n=True),
       dict(d, off=1.5), {"h": d["h"]}, ["not", "a", "dict"]]
ok(all(raises(r._ipc_check, b, like) == "an exported buffer that is not described" for b in bad),
   "malformed exports are refused before any mapping (%d kinds)" % len(bad))
try:
    r._ipc_check(dict(d, h=handle(2).hex()), like)
    unknown = None
except KeyError as e2:
    unknown = e2
ok(unknown is not None, "a handle the driver cannot open fails, nothing mapped for it")
ok(handle(2) not in (r.ipc_maps or {}), "... and is not kept")

# The export as the candidate's side makes it, the driver stood in for:
# the handle's 64 bytes whole, NULs included (a handle's first NUL once
# cut it short, and every export was refused as "not described" on a GPU).
class FakeDriver:
    def cuMemGetAddressRange_v2(self, pbase, psize, ptr):
        pbase._obj.value, psize._obj.value = ptr.value - 4096, 8192
        return 0

    def cuIpcGetMemHandle(self, ph, base):
        ctypes.memmove(ctypes.addressof(ph._obj), handle(1), stark_cuda.IPC_HANDLE_BYTES)
        return 0


real_cuda, stark_cuda._cuda = stark_cuda._cuda, FakeDriver
hb, off, size = stark_cuda.ipc_export(0x7f0000001000)
stark_cuda._cuda = real_cuda
ok(hb == handle(1) and (off, size) == (4096, 8192) and
   r._ipc_check(dict(d, h=hb.hex(), off=off), like) == 0x7f0000000000 + 4096,
   "an export's handle keeps its NULs and is accepted", hb.hex())

# Each allocation is mapped once, and at most IPC_MAPS_MAX of them.
r = Ref()
for i in range(I.IPC_MAPS_MAX + 1):
    MAPPED[handle(1000 + i)] = (0x7e0000000000 + (i << 20), 4096)
got = [r._ipc_check(dict(d, h=handle(1000 + i).hex(), off=0), like) for i in range(8)]
r._ipc_check(dict(d, h=handle(1000).hex(), off=0), like)
ok(len(r.ipc_maps) == 8 and len(set(got)) == 8, "an allocation exported again is mapped once")
for i in range(8, I.IPC_MAPS_MAX):
    r._ipc_check(dict(d, h=handle(1000 + i).hex(), off=0), like)
e = raises(r._ipc_check, dict(d, h=handle(1000 + I.IPC_MAPS_MAX).hex(), off=0), like)
ok(e is not None and "more than %d" % I.IPC_MAPS_MAX in e and len(r.ipc_maps) == I.IPC_MAPS_MAX,
   "mappings are capped at IPC_MAPS_MAX", e)

# The IPC command's requests.
r = Ref()
r.in_bufs = [like, like]
e = raises(r.cmd_ipc, {"open": [d]})
ok(e is not None and "1 buffers" in e and "this pair has 2" in e,
   "an export of another count of buffers than the pair's is refused", e)
r.ipc_stage = [like, like]
e = raises(r.cmd_ipc, {"open": "x"})
ok(e is not None and "missing" in e, "an export that is not a list is refused", e)
ok(r.ipc_ready is False and r.ipc_views is None, "... and nothing is delivered after it")
e = raises(r.ipc_deliver, "cand")
ok(e is not None and "no delivered inputs" in e, "delivering with nothing staged is refused", e)
ok(r.ipc_mutated() == [], "no mutation is read where nothing was delivered")
c = Ref("cand")
e = raises(c.cmd_ipc, {"open": [d]})
ok(e is not None and "cannot serve" in e, "the candidate's worker serves no reference request", e)
ok(raises(c.cmd_ipc, {"test": d}) is not None, "... nor the self-test's write")
cpu = Ref()
cpu.device = torch.device("cpu")
e = raises(cpu.cmd_ipc, {"test_make": True})
ok(e is not None and "without a GPU" in e, "a worker on the CPU refuses IPC", e)
sys.exit(done())
