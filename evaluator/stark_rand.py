"""stark_rand -- KernelBench's CPU inputs made fast, bit for bit.

KernelBench's harness makes a trial's inputs on the CPU: torch.manual_seed
with the trial's seed, then the problem's get_inputs(), whose torch.rand()
calls draw from torch's CPU generator one element at a time through a
generic loop (0.8 GB/s on the GPU machine's host: 8 s for one of level 1's
6 GiB tensors, in both workers, for each of five trials).  Inside
kernelbench_inputs(), torch.rand is served by _fast(): the same
numbers from the same generator state, made by _stark.mt_rand
(evaluator/mtrand.c, the same engine as a tight loop), with the
generator's state written back as torch would have left it, so every draw
after it -- torch's own included -- is unchanged.

Trust nothing about torch's internals without looking: before the first
use in a process, check() compares _fast with this torch's own
torch.rand bit for bit -- the numbers and the generator's whole state
afterwards -- over several seeds, sizes across the engine's 624-word
blocks, a draw of 1M elements and draws interleaved with other
distributions.  Where anything differs (another torch, another engine, a
state layout it does not know), torch.rand is left alone and status() says
why; STARK_KB_RAND=torch in the environment keeps torch's own.  Only the
calls torch.rand would serve from the default CPU generator into a new
contiguous float32 CPU tensor of at least MIN_NUMEL elements are taken;
every other call goes to torch.rand as it was.
"""

import contextlib
import ctypes
import os
import struct
import time

import torch

import _stark

MIN_NUMEL = 1 << 16     # below this torch's own loop costs under 0.1 ms
STATE_BYTES = 5056      # torch's CPU generator state (CPUGeneratorImplState)
_HEAD = struct.Struct("<QiiQ")          # the_initial_seed, left, seeded, next
_WORDS64 = struct.Struct("<624Q")       # the engine's words, as torch stores them
_WORDS32 = struct.Struct("<624I")
# A normal sample torch's generator keeps for its next draw (a double's
# flag, then a float's): where one is kept, the call goes to torch, whose
# state would otherwise pass through get_rng_state and set_rng_state with
# it -- a round trip whose fidelity is torch's business, not ours to rely on.
_DOUBLE_NORMAL_FLAG = struct.Struct("<i")
_DOUBLE_NORMAL_AT = _HEAD.size + _WORDS64.size + 24      # after normal_x, _y, _rho
_FLOAT_NORMAL_FLAG_AT = _DOUBLE_NORMAL_AT + 8 + 4        # after the padding and the float

_status = None          # None until check() ran; "" when _fast may serve
_TORCH_RAND = torch.rand    # torch's own, as the harness found it
_served = {"calls": 0, "numbers": 0, "s": 0.0, "torch_calls": 0}


def _read_state():
    """torch's default CPU generator state: (raw bytearray, left, next,
    the 624 words as a bytearray of uint32), or None for a layout this
    does not know or a state holding a normal sample."""
    st = torch.get_rng_state()
    if st.dtype != torch.uint8 or st.numel() != STATE_BYTES or not st.is_contiguous():
        return None
    raw = bytearray(ctypes.string_at(st.data_ptr(), STATE_BYTES))
    if _DOUBLE_NORMAL_FLAG.unpack_from(raw, _DOUBLE_NORMAL_AT)[0] or raw[_FLOAT_NORMAL_FLAG_AT]:
        return None
    _, left, _, nxt = _HEAD.unpack_from(raw, 0)
    words = _WORDS64.unpack_from(raw, _HEAD.size)
    if any(w >> 32 for w in words) or not 1 <= left <= 624 or not 0 <= nxt <= 624:
        return None
    return raw, left, nxt, bytearray(_WORDS32.pack(*words))


def _write_state(raw, left, nxt, key):
    seed, _, seeded, _ = _HEAD.unpack_from(raw, 0)
    _HEAD.pack_into(raw, 0, seed, left, seeded, nxt)
    _WORDS64.pack_into(raw, _HEAD.size, *_WORDS32.unpack(key))
    torch.set_rng_state(torch.frombuffer(raw, dtype=torch.uint8).clone())


def _shape(size, kw):
    """The shape torch.rand(*size, **kw) asks for, or None where the call
    is not one _fast takes."""
    if "size" in kw:
        if size:
            return None
        size = (kw["size"],)
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    if not all(type(n) is int and n >= 0 for n in size):
        return None
    for k, v in kw.items():
        if k == "size":
            continue
        if k == "dtype" and v in (None, torch.float32):
            continue
        if k == "device" and (v is None or str(v) == "cpu"):
            continue
        if k == "layout" and v in (None, torch.strided):
            continue
        if k in ("requires_grad", "pin_memory") and v is False or \
                k == "requires_grad" and v is True:
            continue
        if k == "generator" and v is None:
            continue
        return None
    return size


def _make(shape, numel):
    """torch.rand(shape)'s tensor from the default generator's state, the
    state moved on; None where the state is not one the engine can take."""
    st = _read_state()
    if st is None:
        return None
    raw, left, nxt, key = st
    out = torch.empty(shape, dtype=torch.float32, device="cpu")
    buf = (ctypes.c_float * numel).from_address(out.data_ptr())
    left, nxt = _stark.mt_rand(key, left, nxt, buf)
    _write_state(raw, left, nxt, key)
    return out


def _fast(orig, size, kw, floor):
    """torch.rand(*size, **kw) by the engine where the call is one it
    takes (of floor numbers or more), else by orig, torch's own."""
    shape = _shape(size, kw)
    numel = 1
    for n in shape or ():
        numel *= n
    out = None
    if shape is not None and numel >= floor:
        # Where torch itself would put the tensor and of what dtype (its
        # default device and dtype, whichever way they were set).
        probe = torch.empty(0)
        if probe.device.type == "cpu" and probe.dtype == torch.float32:
            t0 = time.monotonic()
            out = _make(shape, numel)
            if out is not None:
                _served["calls"] += 1
                _served["numbers"] += numel
                _served["s"] += time.monotonic() - t0
    if out is None:
        _served["torch_calls"] += 1
        return orig(*size, **kw)
    if kw.get("requires_grad") is True:
        out.requires_grad_(True)
    return out


def _compare(orig, seed, plan):
    """Whether _fast and torch.rand draw alike for `plan` (sizes, or
    "n" for a torch.randn(5) between) from manual_seed(seed): every number
    bit for bit and the generator's state after."""
    runs = []
    for fast in (False, True):
        torch.manual_seed(seed)
        got = []
        for n in plan:
            if n == "n":
                got.append(torch.randn(5))
            elif fast:
                got.append(_fast(orig, (n,), {}, 0))
            else:
                got.append(orig(n))
        state = torch.get_rng_state()
        runs.append((got, bytes(state.tolist())))
    (a, sa), (b, sb) = runs
    return sa == sb and all(x.shape == y.shape and torch.equal(x.view(torch.int32),
                                                               y.view(torch.int32))
                            for x, y in zip(a, b))


def check():
    """Compares _fast with this process's torch.rand once (a few
    milliseconds); returns status()."""
    global _status
    if _status is not None:
        return _status
    orig = _TORCH_RAND
    if os.environ.get("STARK_KB_RAND", "") == "torch":
        _status = "torch's own: STARK_KB_RAND=torch"
        return _status
    saved = torch.get_rng_state()
    try:
        torch.manual_seed(0)
        if _read_state() is None:
            _status = "torch's own: its CPU generator's state has a layout this does not know"
        else:
            plans = [(0, [1, 623, 1, 624, 625, 1000, 3 * 624 + 5, "n", 70000, 17]),
                     (42, [624 * 624, "n", 1 << 20, 3]),
                     ((1 << 40) + 7, [5, 70001, "n", 624])]
            bad = [seed for seed, plan in plans if not _compare(orig, seed, plan)]
            _status = ("torch's own: the fast engine's numbers differ from this torch's "
                       "torch.rand (seeds %s)" % bad if bad else "")
    except Exception as e:      # noqa: BLE001 -- any failure keeps torch's own
        _status = "torch's own: checking the fast engine failed: %s: %s" % (
            type(e).__name__, str(e)[:120])
    finally:
        torch.set_rng_state(saved)
        for k in _served:
            _served[k] = 0
    return _status


def speed(numel=16 << 20):
    """(fast, torch's own) in GB/s for one torch.rand of numel float32
    numbers on the CPU (stark doctor); the generator's state is kept."""
    saved = torch.get_rng_state()
    try:
        out = []
        for fast in (True, False):
            torch.manual_seed(1)
            t0 = time.monotonic()
            if fast:
                _fast(_TORCH_RAND, (numel,), {}, 0)
            else:
                _TORCH_RAND(numel)
            out.append(numel * 4 / max(time.monotonic() - t0, 1e-9) / 1e9)
        return tuple(out)
    finally:
        torch.set_rng_state(saved)


def status():
    """"" where _fast serves (after check()), else why not; None
    before check() ran."""
    return _status


def report():
    """What kernelbench_inputs() did in this process, for the result."""
    if _status is None:
        return "not used"
    if _status:
        return _status
    return ("fast engine (checked bit for bit against this torch): %d calls, %d numbers "
            "in %.2f s; %d calls left to torch.rand" % (
                _served["calls"], _served["numbers"], _served["s"], _served["torch_calls"]))


@contextlib.contextmanager
def kernelbench_inputs():
    """torch.rand served by _fast while KernelBench's inputs are made
    (where check() passed), restored after."""
    if check():
        yield
        return
    orig = torch.rand

    def rand(*size, **kw):
        return _fast(orig, size, kw, MIN_NUMEL)
    torch.rand = rand
    try:
        yield
    finally:
        torch.rand = orig
