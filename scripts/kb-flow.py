#!/usr/bin/env python3
"""kb-flow.py -- a KernelBench-style evaluation of ONE candidate, for
comparison with `stark eval` (scripts/bench-gpu runs it).

    scripts/kb-flow.py PROBLEM.py CANDIDATE.py [--warm] [--gpu-lock FILE] ...

What KernelBench's own evaluation does, in this fresh python3 process:
  start        the interpreter starts, imports torch, creates the CUDA context
  compile      imports the problem and the candidate (load_inline builds here,
               into a fresh TORCH_EXTENSIONS_DIR in a temporary folder, so the
               build cost is real; --warm keeps a persistent folder instead),
               then builds Model and ModelNew after the same manual_seed
               (KernelBench's way of giving both the same weights)
  correctness  5 trials (--trials): fresh seeded inputs, both models, shape
               check and torch.allclose (KernelBench's default atol = rtol =
               1e-2; --atol/--rtol)
  timing       3 warm-up calls, then 100 timed calls (--timed) of the candidate
               and of the reference, each call between two CUDA events on the
               current stream, with the L2 cache flushed before every timed
               call (a write of a buffer twice the L2 size)
One JSON object on stdout: seconds per stage (start counts from the process's
own start, read from /proc), the total, the candidate's and the reference's
median (and mean/min/max/std) in microseconds, and the verdict.  Exit status
0 when correct, 1 otherwise.

--gpu-lock FILE takes FILE exclusively (stark's GPU lock, scripts/gpulock.py)
around the correctness and timing stages (the builds run outside it), so
several flows can build in
parallel while the GPU is timed by one process at a time; the wait is
reported as lock_wait_s and is not part of any stage.

--device cpu runs the same flow without a GPU (host clock instead of
events), as a smoke test of this script.

Fast-format candidates (`from stark_cuda import CudaModule`) work too:
evaluator/ is put on sys.path and their NVRTC cubins go to the same
temporary folder.
"""
import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

import gpulock


def process_age_s():
    """Seconds since this process started (from /proc; 0 where unknown)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])          # field 22 of stat(5)
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


T_WALL0 = time.time()
T0 = time.perf_counter() - process_age_s()       # the process's start, on perf_counter's scale
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Everything the problem, the candidate or a compiler prints goes to stderr:
# stdout carries only the JSON result.
_STDOUT = os.dup(1)
os.dup2(2, 1)


def emit(obj):
    sys.stdout.flush()
    with os.fdopen(_STDOUT, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("problem")
    p.add_argument("candidate")
    p.add_argument("--warm", action="store_true", help="reuse a persistent extension build folder")
    p.add_argument("--ext-dir", help="the build folder for --warm [$KB_FLOW_EXT_DIR, ~/.cache/stark-kb-flow]")
    p.add_argument("--gpu-lock", help="take this GPU lock file around the correctness and timing stages")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--timed", type=int, default=100)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--atol", type=float, default=1e-2)
    p.add_argument("--rtol", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--no-reference-timing", action="store_true")
    return p.parse_args()


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def stats_us(ms):
    s = sorted(ms)
    n = len(s)
    if not n:
        return None
    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    mean = sum(s) / n
    std = (sum((x - mean) ** 2 for x in s) / n) ** 0.5
    return {"median": med * 1e3, "mean": mean * 1e3, "std": std * 1e3, "min": s[0] * 1e3,
            "max": s[-1] * 1e3, "n": n}


def main():
    args = parse_args()
    res = {"problem": args.problem, "candidate": args.candidate, "warm": args.warm,
           "flow": "kernelbench-style", "stages_s": {}, "lock_wait_s": 0.0, "correct": False,
           "error": None, "error_stage": None}
    stages = res["stages_s"]
    tmp = tempfile.mkdtemp(prefix="kb-flow-")
    if args.warm:
        ext_dir = args.ext_dir or os.environ.get("KB_FLOW_EXT_DIR") or \
            os.path.join(os.path.expanduser("~"), ".cache", "stark-kb-flow")
    else:
        ext_dir = os.path.join(tmp, "torch_extensions")
    os.makedirs(ext_dir, exist_ok=True)
    os.environ["TORCH_EXTENSIONS_DIR"] = ext_dir
    os.environ.setdefault("STARK_CUDA_CACHE", os.path.join(ext_dir, "cubin"))
    res["build_dir"] = ext_dir
    sys.path.insert(0, os.path.join(ROOT, "evaluator"))
    lock_fd = None
    stage = "start"
    t = T0
    try:
        import torch

        dev = torch.device(args.device)
        cuda = dev.type == "cuda"

        def sync():
            if cuda:
                torch.cuda.synchronize(dev)
        if cuda:
            torch.cuda.set_device(dev)
        torch.zeros(1, device=dev)
        sync()
        res["torch"] = torch.__version__
        res["device"] = torch.cuda.get_device_name(dev) if cuda else "cpu"
        now = time.perf_counter()
        stages["start"] = now - t
        t = now

        stage = "compile"
        prob = load(os.path.abspath(args.problem), "kb_problem")
        cand = load(os.path.abspath(args.candidate), "kb_candidate")
        init = prob.get_init_inputs()
        torch.manual_seed(args.seed)
        ref_model = prob.Model(*init).to(dev)
        torch.manual_seed(args.seed)
        new_model = cand.ModelNew(*init).to(dev)
        sync()
        now = time.perf_counter()
        stages["compile"] = now - t

        if args.gpu_lock:
            # Held until the process exits.
            gpulock.GpuLock(args.gpu_lock, exclusive=True).__enter__()
            res["lock_wait_s"] = time.perf_counter() - now
        t = time.perf_counter()

        stage = "correctness"
        torch.manual_seed(args.seed)
        trial_seeds = [int(torch.randint(0, 2 ** 31 - 1, (1,)).item()) for _ in range(args.trials)]
        passed, max_diff = 0, 0.0
        with torch.no_grad():
            for s in trial_seeds:
                torch.manual_seed(s)
                inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]
                torch.manual_seed(s)
                want = ref_model(*inputs)
                sync()
                torch.manual_seed(s)
                got = new_model(*inputs)
                sync()
                ws = list(want) if isinstance(want, (tuple, list)) else [want]
                gs = list(got) if isinstance(got, (tuple, list)) else [got]
                ok = len(ws) == len(gs)
                for w, g in zip(ws, gs):
                    if not isinstance(g, torch.Tensor) or g.shape != w.shape:
                        ok = False
                        continue
                    d = (g.double() - w.double()).abs()
                    max_diff = max(max_diff, float(d.max()) if d.numel() else 0.0)
                    ok = ok and bool(torch.allclose(g, w, atol=args.atol, rtol=args.rtol))
                passed += ok
        res.update({"trials": args.trials, "trials_passed": passed, "max_abs_diff": max_diff,
                    "atol": args.atol, "rtol": args.rtol, "correct": passed == args.trials})
        now = time.perf_counter()
        stages["correctness"] = now - t
        t = now

        if res["correct"]:
            stage = "timing"
            props = torch.cuda.get_device_properties(dev) if cuda else None
            l2 = int(getattr(props, "L2_cache_size", 0) or (50 << 20))
            flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device=dev)
            res["l2_flush_bytes"] = 2 * l2 // 4 * 4
            torch.manual_seed(args.seed)
            inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]

            def time_model(model):
                with torch.no_grad():
                    for _ in range(args.warmup):
                        model(*inputs)
                    sync()
                    ms = []
                    for _ in range(args.timed):
                        flush.zero_()
                        if not cuda:        # a smoke test without a GPU: host clock
                            t1 = time.perf_counter()
                            model(*inputs)
                            ms.append((time.perf_counter() - t1) * 1e3)
                            continue
                        start = torch.cuda.Event(enable_timing=True)
                        end = torch.cuda.Event(enable_timing=True)
                        start.record()
                        model(*inputs)
                        end.record()
                        torch.cuda.synchronize(dev)
                        ms.append(start.elapsed_time(end))
                return ms
            res["candidate_us"] = stats_us(time_model(new_model))
            if not args.no_reference_timing:
                res["reference_us"] = stats_us(time_model(ref_model))
                c, r = res["candidate_us"]["median"], res["reference_us"]["median"]
                res["speedup"] = r / c if c > 0 else None
            now = time.perf_counter()
            stages["timing"] = now - t
        else:
            res["error"] = "incorrect: %d of %d trials within atol=%g, rtol=%g (max abs diff %.3g)" % (
                passed, args.trials, args.atol, args.rtol, max_diff)
            res["error_stage"] = "correctness"
    except BaseException as e:
        res["error"] = "%s: %s" % (type(e).__name__, str(e)[-3000:])
        res["error_stage"] = stage
        res["traceback"] = traceback.format_exc()[-6000:]
        res["correct"] = False
    finally:
        if lock_fd is not None:
            os.close(lock_fd)
        shutil.rmtree(tmp, ignore_errors=True)
    stages["total"] = time.perf_counter() - T0
    res["started_at"] = T_WALL0
    emit(res)
    return 0 if res["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
