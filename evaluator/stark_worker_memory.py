"""stark_worker_memory -- what a worker knows about memory: the problem's
footprint estimated on PyTorch's meta device before anything is allocated
(PLAN, reference only), the device's and the allocator's figures that GEN,
CALL and LOAD replies carry for the referee's plan (stark_memory), the
figures an out-of-memory failure is reported with, and the reference's
repeatability check.

Figures from the candidate's worker are its own word: the referee uses
them to reserve memory and to tell whose allocations ran the device out,
never to pass a candidate.
"""

import contextlib
import math
import re
import resource
import time
import weakref

import torch

import stark_tensors as T
import stark_wire as W

try:
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:             # an old torch: no estimate
    TorchDispatchMode = object
try:
    from torch.utils.flop_counter import flop_registry as _FLOPS
except ImportError:             # torch before 2.1: traffic alone
    _FLOPS = {}

# The forward's kernels estimated on meta (_Tracker), for whether its
# launching may outlast its GPU work (the workers' launch modes matter
# then: stark_referee_modes).  Set so that a GPU's work is rather
# under-estimated (a fast GPU), so a launch-bound model is not missed:
# each kernel at least KERNEL_MIN_US (a small kernel back to back took
# 1.7 us on an H200), its bytes moved at MEM_BW, its flops at FLOP_RATE.
KERNEL_MIN_US = 2.0
MEM_BW = 4.8e12                 # bytes a second
FLOP_RATE = 1.0e14              # flops a second
HOST_US_PER_KERNEL = 4.0        # the host's least time to launch a kernel
LAUNCH_BOUND_SHARE = 0.5        # launching over GPU time: launch-bound
PLAN_LAUNCH_SHARE = 0.3         # ... by the plan's estimate (a least GPU time)

OOM_TYPES = ("OutOfMemoryError", "MemoryError")
# A second output for the repeatability check is made only where the
# device has this much free beyond it.
REPEAT_ROOM = 256 << 20
_TRIED = re.compile(r"Tried to allocate ([0-9.]+) ([KMGT]i?B)")
_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def is_oom(exc):
    """Whether an exception says memory ran out (CUDA's or the host's)."""
    return type(exc).__name__ in OOM_TYPES or "out of memory" in str(exc)[:2000]


def tried_bytes(text):
    """The allocation a CUDA out-of-memory message says failed, in bytes
    (0 when it does not say)."""
    m = _TRIED.search(text or "")
    return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else 0


def host_rss():
    """This process's resident and peak resident host memory in bytes."""
    rss = hwm = 0
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) << 10
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) << 10
    except (OSError, ValueError):
        hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
    return rss, hwm


class _Tracker(TorchDispatchMode):
    """Counts the bytes of the tensors that operators allocate (outputs
    that are not views of their inputs) for as long as they live, and
    their peak: the forward's allocations, on meta tensors.  Also the
    operators that make a new tensor (kernels, roughly: `kernels`) and
    their GPU time at the least (`gpu_us`: KERNEL_MIN_US, or their bytes
    in and out at MEM_BW and flops at FLOP_RATE where that is longer)."""

    def __init__(self):
        super().__init__()
        self.live = 0
        self.peak = 0
        self.kernels = 0
        self.gpu_us = 0.0
        # The weak references to the tensors made, until each is freed
        # (weakref.ref with a callback: weakref.finalize costs more, and
        # level 3's LSTMs make 21,000-43,000 tensors on meta).
        self._refs = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        fresh = _FRESH.get(func)
        if fresh is None:
            fresh = _FRESH[func] = tuple(r.alias_info is None for r in func._schema.returns)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        made = 0
        for f, t in zip(fresh, outs):
            if f and isinstance(t, torch.Tensor):
                n = t.numel() * t.element_size()
                made += n
                self.live += n
                self.peak = max(self.peak, self.live)
                self._refs.add(weakref.ref(t, self._freed(n)))
        if made:
            self.kernels += 1
            moved = made + _arg_bytes(args) + (_arg_bytes(kwargs.values()) if kwargs else 0)
            self.gpu_us += max(KERNEL_MIN_US,
                               1e6 * (moved / MEM_BW + _op_flops(func, args, kwargs, out) / FLOP_RATE))
        return out

    def _freed(self, n):
        def gone(ref):
            self._refs.discard(ref)
            self.live -= n
        return gone


# Whether each of an operator's returns is a new tensor (not an alias of
# an input), by operator: its schema read once.
_FRESH = {}


def _arg_bytes(items):
    """The bytes of the tensors among an operator's arguments, in lists
    and tuples too (cat's, stack's)."""
    n = 0
    for x in items:
        if isinstance(x, torch.Tensor):
            n += x.numel() * x.element_size()
        elif isinstance(x, (list, tuple)):
            n += _arg_bytes(x)
    return n


def _op_flops(func, args, kwargs, out):
    """An operator's flops by torch's own formulas (matmuls, convolutions,
    attention); 0 for the others, or where it has none."""
    f = _FLOPS.get(getattr(func, "_overloadpacket", None))
    if f is None:
        return 0
    try:
        n = f(*args, **(kwargs or {}), out_val=out)
    except Exception:
        return 0
    return n if isinstance(n, (int, float)) and n > 0 else 0


def plan_launch_bound(kernels, gpu_us_least):
    """Whether the reference's forward, as estimated on the meta device
    (PLAN: `kernels` operators that make a tensor, `gpu_us_least` their
    GPU time at the least), may be launch-bound: HOST_US_PER_KERNEL a
    kernel at least PLAN_LAUNCH_SHARE of that time.  Made to err towards
    yes (the GPU time under-estimated, a fast host), since a yes costs
    start-up time and a no a launch-bound verdict's fidelity: at half,
    level 3's 10_ResNet101 (211 kernels, 2213 us at the least by torch
    2.11's estimate on an H100; 5.0 ms measured) was not matched, and its
    honest copy read 1.021x and 1.023x where its workers' modes were 6%
    and 9% apart.  None where the estimate is missing.  Of KernelBench's
    problems (torch 1.13's meta kernels, no flops: scripts/kernelbench-plan),
    none of levels 1 and 2 and 24 of level 3's 50: its RNN, LSTMs and
    GRUs, all but two of its models of 40 kernels or more, a deep narrow
    MLP, LeNet-5 and the softmax U-Net."""
    if type(kernels) is not int or kernels <= 0 or \
            not isinstance(gpu_us_least, (int, float)) or not gpu_us_least > 0:
        return None
    return kernels * HOST_US_PER_KERNEL >= PLAN_LAUNCH_SHARE * gpu_us_least


class _MetaFactories(torch.overrides.TorchFunctionMode
                     if hasattr(torch.overrides, "TorchFunctionMode") else object):
    """torch 1.x has no default device: factory functions sent to meta."""

    NAMES = {"randn", "rand", "randint", "zeros", "ones", "empty", "full", "tensor",
             "arange", "linspace", "eye", "randperm", "normal", "empty_strided",
             "as_tensor", "randn_like", "rand_like", "zeros_like", "ones_like",
             "empty_like", "full_like", "randint_like"}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if getattr(func, "__name__", "") in self.NAMES and getattr(func, "__module__", "") in (
                "torch", "torch._C._VariableFunctions", None):
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


def _meta_device():
    if hasattr(torch.device, "__enter__"):
        return torch.device("meta")
    return _MetaFactories()


def _nbytes(items):
    return sum(x.numel() * x.element_size() for x in items if isinstance(x, torch.Tensor))


def _warm_models():
    """Small models of the kinds KernelBench's problems are made of, with
    inputs: (model, inputs) pairs, built under _meta_device()."""
    nn = torch.nn
    return [
        (nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.GELU(), nn.Dropout(0.0), nn.SiLU(),
                       nn.Tanh(), nn.Sigmoid(), nn.LayerNorm(8), nn.Softmax(-1)),
         [torch.randn(2, 8)]),
        (nn.Sequential(nn.Conv1d(2, 2, 3), nn.ConvTranspose1d(2, 2, 3), nn.BatchNorm1d(2),
                       nn.MaxPool1d(2), nn.AvgPool1d(1)), [torch.randn(2, 2, 8)]),
        (nn.Sequential(nn.Conv2d(2, 2, 3), nn.ConvTranspose2d(2, 2, 3), nn.BatchNorm2d(2),
                       nn.GroupNorm(1, 2), nn.InstanceNorm2d(2), nn.MaxPool2d(2),
                       nn.AvgPool2d(1), nn.AdaptiveAvgPool2d(1)), [torch.randn(2, 2, 8, 8)]),
        (nn.Sequential(nn.Conv3d(2, 2, 3), nn.ConvTranspose3d(2, 2, 3), nn.BatchNorm3d(2),
                       nn.MaxPool3d(2), nn.AvgPool3d(1)), [torch.randn(2, 2, 8, 8, 8)]),
    ]


def _warm_one(model, items):
    with torch.no_grad(), _Tracker():
        y = model(*items).flatten(1)
        z = torch.matmul(y, y.t()) + torch.bmm(y[None], y.t()[None])[0]
        for t in (z.sum(-1), z.mean(0), z.amax(-1), torch.logsumexp(z, -1),
                  torch.cumsum(z, 0), torch.log_softmax(z, -1), z.clamp(0, 1),
                  torch.nn.functional.hardtanh(z), torch.nn.functional.mish(z)):
            del t


def warm_meta():
    """Runs the estimate's machinery (_meta_device, _Tracker) once on small
    models of the usual kinds (_warm_models) and a few functions, so that
    a process forked afterwards inherits what its first use made: under
    torch 2.11 it cost seconds a process (the H200's host, KernelBench's
    level 2 problem 1 alone: 2.7 s building its model and inputs on meta,
    2.4 s its forward; 4-5 s in all with six at once), against
    milliseconds once made.  The zygote calls it (stark_referee.prewarm).
    Meta only: it never touches CUDA, which the zygote must not
    initialize.  Never raises; returns what it did, for PREWARM."""
    t0 = time.monotonic()
    dtype = torch.get_default_dtype()
    ran, why = 0, ""
    try:
        torch.set_default_dtype(torch.float32)
        with _meta_device():
            pairs = _warm_models()
        for model, items in pairs:
            # Each on its own: an operator without a meta kernel (older
            # torch) costs only its model.
            try:
                _warm_one(model.to("meta"), [x.to("meta") for x in items])
                ran += 1
            except Exception as e:
                why = why or ("; first failure %s: %s" % (type(e).__name__, e))[:160]
        return "%.0f ms, %d of %d models%s" % ((time.monotonic() - t0) * 1e3, ran,
                                               len(pairs), why)
    except Exception as e:
        return ("failed after %.0f ms: %s: %s" % ((time.monotonic() - t0) * 1e3,
                                                   type(e).__name__, e))[:200]
    finally:
        torch.set_default_dtype(dtype)


class Memory:
    """The part of Worker that reports memory and plans (PLAN)."""

    # Out-of-memory errors that this worker's own code caught and went on
    # from (ours_oom): left out of the count mem_facts reports.
    ooms_ours = 0

    def ooms_total(self):
        """How many times torch's allocator on this worker's GPU ran out of
        memory since the process began (its num_ooms), whoever caught the
        error; 0 on CPUs."""
        if self.device.type != "cuda":
            return 0
        try:
            return int(torch.cuda.memory_stats(self.device).get("num_ooms", 0))
        except Exception:
            return 0

    @contextlib.contextmanager
    def ours_oom(self):
        """Around evaluator code that catches running out of memory and
        goes on (the scrub, the repeat check, torch.compile's baseline):
        its out-of-memory errors are the evaluator's, not the forward's."""
        n0 = self.ooms_total()
        try:
            yield
        finally:
            self.ooms_ours += max(self.ooms_total() - n0, 0)

    def mem_facts(self):
        """This worker's device memory, for the referee's plan: bytes
        allocated now and at the peak since the last reading (torch's
        allocator), and the device's free and total bytes.  {} on CPUs.
        "ooms": the allocator's out-of-memory errors that the evaluator
        did not catch itself (ours_oom) -- a library inside the forward:
        cuDNN, short of memory for an algorithm's workspace, runs another
        one, with other results and another time, and says nothing.
        The reference worker's L2 flush buffer (a block of its own, made
        once the model is loaded and kept) is left out of every figure: it
        is the evaluator's, not the model's."""
        if self.device.type != "cuda":
            return {}
        try:
            free, total = torch.cuda.mem_get_info(self.device)
            own = self.flush_buf.numel() if getattr(self, "flush_buf", None) is not None else 0
            facts = {"alloc": int(torch.cuda.memory_allocated(self.device)) - own,
                     "peak": int(torch.cuda.max_memory_allocated(self.device)) - own,
                     "reserved": int(torch.cuda.memory_reserved(self.device)) - own,
                     "peak_reserved": int(torch.cuda.max_memory_reserved(self.device)) - own,
                     "free": int(free), "total": int(total),
                     "ooms": max(self.ooms_total() - self.ooms_ours, 0)}
            torch.cuda.reset_peak_memory_stats(self.device)
            return facts
        except Exception:
            return {}

    def oom_facts(self, exc):
        """What an out-of-memory failure is reported with: the allocation
        that failed, the worker's device figures (mem_facts) and its host
        memory."""
        facts = {"tried": tried_bytes(str(exc))}
        if self.device.type == "cuda":
            try:
                facts.update({"alloc": int(torch.cuda.memory_allocated(self.device)),
                              "peak": int(torch.cuda.max_memory_allocated(self.device))})
                free, total = torch.cuda.mem_get_info(self.device)
                facts.update({"free": int(free), "total": int(total)})
            except Exception:
                pass
        facts["rss"], facts["hwm"] = host_rss()
        return facts

    def cmd_plan(self, args):
        """Reference only, before LOAD: the problem's footprint estimated on
        the meta device, where tensors have shapes and no memory -- the
        model built with get_init_inputs(), the inputs of get_inputs(), one
        forward with every operator's allocations counted while they live
        (_Tracker), at the problem's sizes or those of args["sizes"]
        (the shape probe's): {"in", "out", "weights", "fwd"} in bytes, or
        {"error": why} where the problem does not run on meta (an operator
        without a meta kernel, data-dependent code, a copy to the host).
        Convolutions' workspaces are not counted: the first trial's
        measurement has them.  Also the device's free and total bytes."""
        t0 = time.monotonic()
        reply = {}
        try:
            reply["mem"] = self.mem_facts()
        except Exception:
            pass
        # On a GPU the first reading makes CUDA's context (0.1-1 s on the
        # H200, more with several workers starting at once).
        self.est_marks = {"measured": time.monotonic()}
        try:
            sizes = args.get("sizes") if isinstance(args.get("sizes"), dict) else {}
            # "estimate": false where the referee holds this problem's
            # estimate from an earlier evaluation (stark_plan_cache).
            if args.get("estimate", True) is not False:
                reply.update(self._estimate(int(args.get("init_seed", 0)), sizes))
        except BaseException as e:
            reply["error"] = W.exc_text(e)
        # The worker's start, step by step (Worker.started), for the
        # referee's env.startup_parts_ms: with the estimate's own steps
        # (_estimate's marks) and when the threads beside it ended.
        st = dict(getattr(self, "started", {}), plan=t0)
        st.update(self.est_marks)
        st["planned"] = time.monotonic()
        prep = getattr(self, "fused_prep", None)
        if prep is not None and type(prep[1].get("end")) is float:
            st["nvrtc"] = prep[1]["end"]
        reply["started"] = st
        return reply

    def _estimate(self, seed, sizes=None):
        mod = self.problem
        dtype = torch.get_default_dtype()
        saved = {}
        try:
            for k, v in (sizes or {}).items():
                if isinstance(k, str) and type(v) is int and type(getattr(mod, k, None)) is int:
                    saved[k] = getattr(mod, k)
                    setattr(mod, k, v)
            torch.set_default_dtype(torch.float32)
            with _meta_device():
                torch.manual_seed(seed)
                self.est_marks["seeded"] = time.monotonic()
                init = list(mod.get_init_inputs())
                model = mod.Model(*init)
                items = list(mod.get_inputs())
                self.est_marks["built"] = time.monotonic()
        finally:
            for k, v in saved.items():
                setattr(mod, k, v)
            torch.set_default_dtype(dtype)
        weights = 0
        if isinstance(model, torch.nn.Module):
            model = model.to("meta")
            weights = sum(p.numel() * p.element_size() for p in model.parameters()) + \
                sum(b.numel() * b.element_size() for b in model.buffers())
        items = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in items]
        tracker = _Tracker()
        with torch.no_grad(), tracker:
            out = model(*items)
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            nout = _nbytes(outs)
        del out, outs
        return {"in": _nbytes(items), "out": nout, "weights": weights,
                "fwd": max(tracker.peak, nout),
                "kernels": tracker.kernels, "gpu_us_least": round(tracker.gpu_us, 1)}

    def repeat_check(self, tols, room=None):
        """Reference only, once: forward again on the same inputs and the
        two outputs compared, so a reference that does not give the same
        outputs twice is known before it judges anyone.  tols: (atol, rtol)
        by dtype name; room: whether the referee's memory plan has room
        for a second output beside the first (None: judged here from the
        device's free memory).  Returns {"equal": bitwise, "nbad",
        "max_abs", "index": the first output that differs} or
        {"digest_only": True, "equal"} where there is no room for a second
        output: the first outputs are summed and let go before the second
        run, whose outputs the call keeps (the same, where they agree)."""
        first = self.outputs
        a = list(first) if isinstance(first, (tuple, list)) else [first]
        if not all(type(t) is torch.Tensor and t.layout is torch.strided for t in a):
            return {}
        size = sum(t.numel() * t.element_size() for t in a)
        if room is None:
            room = True
            if self.device.type == "cuda":
                # Room for a second output and the forward's temporaries.
                free, _ = torch.cuda.mem_get_info(self.device)
                room = free > 2 * size + REPEAT_ROOM
        if not room:
            sums = [T.weighted_digest(t) for t in a]
            del a, first
            self.outputs = None
            second = self._forward()
            self.outputs = second
            b = list(second) if isinstance(second, (tuple, list)) else [second]
            same = len(b) == len(sums) and all(T.weighted_digest(t) == s for t, s in zip(b, sums))
            return {"digest_only": True, "equal": same}
        second = self._forward()
        b = list(second) if isinstance(second, (tuple, list)) else [second]
        res = {"equal": True, "nbad": 0, "max_abs": 0.0}
        if len(b) != len(a):
            return {"equal": False, "nbad": 1, "max_abs": math.inf, "index": 0}
        for i, (x, y) in enumerate(zip(a, b)):
            if x.shape != y.shape or x.dtype != y.dtype:
                return {"equal": False, "nbad": max(x.numel(), 1), "max_abs": math.inf,
                        "index": i}
            if T.weighted_digest(x) == T.weighted_digest(y):
                continue
            res["equal"] = False
            atol, rtol = tols.get(W.DTYPE_NAMES.get(x.dtype, ""), (0.0, 0.0))
            r = T.compare_tensor(y, x, atol, rtol)
            exact = T.compare_tensor(y, x, 0.0, 0.0)
            res["max_abs"] = max(res["max_abs"], exact["max_abs"])
            if r["nbad"] and "index" not in res:
                res.update({"nbad": r["nbad"], "index": i, "numel": x.numel()})
        return res
