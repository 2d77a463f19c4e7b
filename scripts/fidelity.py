#!/usr/bin/env python3
"""fidelity.py -- an independent timing of candidates and their references,
to check the times `stark eval` reports (runtime_us, ref_runtime_us).

    scripts/fidelity.py [--stark-json RESULT.json] PROBLEM.py CANDIDATE.py [PROBLEM.py CANDIDATE.py ...]
    scripts/fidelity.py --list FILE     (lines: PROBLEM.py CANDIDATE.py [RESULT.json])

For each pair, in this one process: the problem's Model and the candidate's
ModelNew are built after the same seed, ModelNew gets the reference's
parameters where names and shapes agree (as stark's worker does), one set of
seeded inputs goes to the GPU, the outputs are compared once (atol = rtol =
1e-4 for fp32, 1e-2 for fp16/bf16), and each model's forward (under
torch.no_grad) is timed with triton.testing.do_bench(fn, warmup=25, rep=40,
return_mode="median"), which zeroes a 256 MB buffer before every call (L2
flush) and times each call between CUDA events.  A kernel's time depends on
the physical pages under its buffers (up to 20% on the H100), and stark
reports the time on the fastest of its placements; so here too each model
is measured on --placements (8) memory placements -- a torch.cuda.MemPool
each, holding a copy of the inputs and the model's own allocations --
alternately (cand, ref on each), and the lowest median is kept.  Without
triton the same method is done here (events, a 2x-L2 flush, median;
"method" says which).

With a stark result (--stark-json, or the third column of --list), each
entry also gets stark's numbers and their relative difference from these:
agree = within --tolerance (5%) for times of --min-us (20 us) or more.

Prints one JSON object: {"device", "method", "results": [...]}; exit status
0 unless a pair could not be measured or disagreed.
--device cpu is a smoke test of this script (host clock).
Fast-format candidates need stark_cuda: evaluator/ is put on sys.path and
NVRTC cubins go to a temporary $STARK_CUDA_CACHE.
"""
import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import traceback

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
    p.add_argument("pairs", nargs="*", help="PROBLEM.py CANDIDATE.py ...")
    p.add_argument("--list", help="file of lines: PROBLEM.py CANDIDATE.py [STARK_RESULT.json]")
    p.add_argument("--stark-json", action="append", default=[],
                   help="stark eval --json result for the pair at the same position")
    p.add_argument("--warmup", type=float, default=25, help="do_bench warm-up, ms")
    p.add_argument("--rep", type=float, default=40, help="do_bench repetition time, ms")
    p.add_argument("--placements", type=int, default=8,
                   help="memory placements (MemPools) each model is measured on")
    p.add_argument("--tolerance", type=float, default=0.05)
    p.add_argument("--min-us", type=float, default=20.0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--method", choices=("auto", "do_bench", "events", "settled"), default="auto",
                   help="auto: do_bench where triton imports, else events; events: a 2x-L2 "
                   "flush queued right before each call (as do_bench); settled: the flush "
                   "synchronized, then the call's launches queued behind a sleep kernel, as "
                   "stark's timed calls are (whether the flush's write-backs slow the call)")
    return p.parse_args()


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def make_bench(torch, dev, method="auto"):
    if dev.type == "cpu":       # a smoke test of this script without a GPU
        import time

        def bench_cpu(fn, warmup, rep):
            fn()
            ts = []
            end = time.perf_counter() + rep / 1e3
            while time.perf_counter() < end or len(ts) < 3:
                t = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t) * 1e3)
            ts.sort()
            return ts[len(ts) // 2]
        return bench_cpu, "host clock, median (cpu smoke test)"
    if method in ("auto", "do_bench"):
        try:
            from triton.testing import do_bench

            def bench(fn, warmup, rep):
                return do_bench(fn, warmup=warmup, rep=rep, return_mode="median")
            return bench, "triton.testing.do_bench(return_mode='median')"
        except Exception:
            if method == "do_bench":
                raise
    props = torch.cuda.get_device_properties(dev)
    l2 = int(getattr(props, "L2_cache_size", 0) or (50 << 20))
    flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device=dev)

    def bench(fn, warmup, rep):
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            flush.zero_()
            fn()
        end.record()
        torch.cuda.synchronize()
        est = max(start.elapsed_time(end) / 5, 1e-3)
        for _ in range(max(1, int(warmup / est))):
            fn()
        n = max(1, int(rep / est))
        evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        if method == "settled":
            # The sleep kernel's length: the host's time to launch fn, twice,
            # and 50 us, in the GPU's cycles.
            import time
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            torch.cuda._sleep(1000000)
            b.record()
            torch.cuda.synchronize()
            per_us = 1e6 / (a.elapsed_time(b) * 1e3)
            t = time.perf_counter()
            fn()
            host_us = (time.perf_counter() - t) * 1e6
            torch.cuda.synchronize()
            cycles = int((2 * host_us + 50) * per_us)
            for s, e in evs:
                flush.zero_()
                torch.cuda.synchronize()
                torch.cuda._sleep(cycles)
                s.record()
                fn()
                e.record()
            torch.cuda.synchronize()
        else:
            for s, e in evs:
                flush.zero_()
                s.record()
                fn()
                e.record()
            torch.cuda.synchronize()
        ms = sorted(s.elapsed_time(e) for s, e in evs)
        return ms[len(ms) // 2]
    if method == "settled":
        return bench, "2x L2 flush synchronized, launches behind a sleep kernel, events, median"
    return bench, "events + 2x L2 flush queued before each call, median%s" % (
        " (triton not importable)" if method == "auto" else "")


def tolerance(dtype, torch):
    return (1e-2, 1e-2) if dtype in (torch.float16, torch.bfloat16) else (1e-4, 1e-4)


def measure(torch, bench, dev, problem, candidate, idx, args, sync):
    prob = load(os.path.abspath(problem), "fid_problem_%d" % idx)
    cand = load(os.path.abspath(candidate), "fid_candidate_%d" % idx)
    init = prob.get_init_inputs()
    torch.manual_seed(args.seed)
    ref = prob.Model(*init).to(dev)
    torch.manual_seed(args.seed)
    new = cand.ModelNew(*init).to(dev)
    copied = 0
    with torch.no_grad():
        rs = ref.state_dict()
        for k, v in new.state_dict().items():
            r = rs.get(k)
            if r is not None and r.shape == v.shape and r.dtype == v.dtype:
                v.copy_(r)
                copied += 1
    torch.manual_seed(args.seed + 1)
    inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]
    with torch.no_grad():
        want = ref(*inputs)
        got = new(*inputs)
    sync()
    ws = list(want) if isinstance(want, (tuple, list)) else [want]
    gs = list(got) if isinstance(got, (tuple, list)) else [got]
    correct = len(ws) == len(gs)
    for w, g in zip(ws, gs):
        atol, rtol = tolerance(w.dtype, torch)
        correct = correct and g.shape == w.shape and bool(torch.allclose(g.float(), w.float(), atol=atol, rtol=rtol))

    def run(model, xs):
        def fn():
            with torch.no_grad():
                model(*xs)
        return fn
    cs, rs_ = [], []
    pools = []          # held to the end, so each placement gets new pages
    for _ in range(max(args.placements, 1)):
        if args.placements > 1 and hasattr(torch.cuda, "MemPool") and dev.type == "cuda":
            pool = torch.cuda.MemPool()
            pools.append(pool)
            ctx = torch.cuda.use_mem_pool(pool, dev)
        else:
            ctx = _Null()
        with ctx:
            xs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            cs.append(bench(run(new, xs), args.warmup, args.rep))
            rs_.append(bench(run(ref, xs), args.warmup, args.rep))
        pools.append(xs)
    return {"problem": problem, "candidate": candidate, "correct": correct, "weights_copied": copied,
            "cand_us": min(cs) * 1e3, "ref_us": min(rs_) * 1e3,
            "cand_us_runs": [c * 1e3 for c in cs], "ref_us_runs": [r * 1e3 for r in rs_]}


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def compare(entry, stark_path, args):
    try:
        with open(stark_path) as f:
            st = json.load(f)
    except (OSError, ValueError) as e:
        entry["stark_error"] = "cannot read %s: %s" % (stark_path, e)
        return
    entry["stark_json"] = stark_path
    entry["stark_status"] = st.get("status")
    agree = True
    for ours, theirs, key in (("cand_us", "runtime_us", "cand"), ("ref_us", "ref_runtime_us", "ref")):
        s = st.get(theirs)
        entry["stark_" + theirs] = s
        if not isinstance(s, (int, float)) or not entry.get(ours):
            entry[key + "_rel_diff"] = None
            agree = False
            continue
        d = (s - entry[ours]) / entry[ours]
        entry[key + "_rel_diff"] = d
        if entry[ours] >= args.min_us and abs(d) > args.tolerance:
            agree = False
    entry["agree"] = agree


def main():
    args = parse_args()
    jobs = []
    if args.list:
        with open(args.list) as f:
            for line in f:
                w = line.split()
                if len(w) >= 2:
                    jobs.append((w[0], w[1], w[2] if len(w) > 2 else None))
    if len(args.pairs) % 2:
        sys.exit("fidelity.py: give PROBLEM.py CANDIDATE.py pairs")
    for i in range(0, len(args.pairs), 2):
        k = i // 2
        jobs.append((args.pairs[i], args.pairs[i + 1], args.stark_json[k] if k < len(args.stark_json) else None))
    if not jobs:
        sys.exit("fidelity.py: nothing to measure")
    sys.path.insert(0, os.path.join(ROOT, "evaluator"))
    tmp = tempfile.mkdtemp(prefix="fidelity-")
    os.environ.setdefault("STARK_CUDA_CACHE", os.path.join(tmp, "cubin"))
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(tmp, "torch_extensions"))
    import torch

    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()
    bench, method = make_bench(torch, dev, args.method)
    out = {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "torch": torch.__version__, "method": method,
           "tolerance": args.tolerance, "min_us": args.min_us, "results": []}
    rc = 0
    for idx, (problem, candidate, stark_path) in enumerate(jobs):
        try:
            entry = measure(torch, bench, dev, problem, candidate, idx, args, sync)
        except Exception as e:
            entry = {"problem": problem, "candidate": candidate, "error": "%s: %s" % (type(e).__name__, e),
                     "traceback": traceback.format_exc()[-4000:]}
            rc = 1
        if stark_path and "error" not in entry:
            compare(entry, stark_path, args)
            if entry.get("agree") is False:
                rc = 1
        out["results"].append(entry)
        print("fidelity: %s %s" % (candidate, json.dumps({k: entry.get(k) for k in (
            "cand_us", "ref_us", "cand_rel_diff", "ref_rel_diff", "error")})), file=sys.stderr, flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    emit(out)
    return rc


if __name__ == "__main__":
    sys.exit(main())
