"""Judges the honest Triton corpus (kernels/) against KernelBench's own
problems and prints one row per problem: verdict, candidate and reference
medians, speedup against eager PyTorch, and what Triton's JIT compiled.

Each kernels/STEM.py solves KernelBench's level1/STEM.py (l2_STEM.py:
level2/STEM.py), read from a KernelBench checkout (--kb, $KB, else
.kb/checkout: the folder holding KernelBench/level1).  KernelBench's files
are read there and never copied into this repository.

By default the problems run at reduced sizes (their module-level sizes
rewritten in a scratch copy, SMALL below: tensors of 16-64 MB, so the
whole corpus fits in a few minutes); --real keeps KernelBench's sizes
(tensors up to 6 GB: the figures of docs/BENCHMARKS.md).

With --keep DIR the problems as judged, each result (STEM.json) and
DIR/fidelity.list ("PROBLEM CANDIDATE RESULT" lines, for
scripts/fidelity.py --list: the same kernels timed by triton's do_bench)
stay in DIR.

With --twice the corpus is judged twice with one fresh build cache: the
first pass compiles every kernel (env jit_cache "cold"), the second finds
them in the cache ("warm"); both passes' wall time per evaluation is
printed, with their medians (the judge latency with and without Triton's
JIT).

Usage: judge.py [--kb DIR] [--stark PATH] [--real] [--jobs N] [--only REGEX]
                [--keep DIR] [--tap] [--twice] [-- STARK-EVAL-OPTIONS...]
Exit status 0 when every row is `correct`, language triton, without flags.
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ELEMENTWISE = {"batch_size": "1024", "dim": "16384"}
SMALL = {
    "23_Softmax": ELEMENTWISE, "24_LogSoftmax": ELEMENTWISE,
    "38_L1Norm_": {"batch_size": "1024", "dim": "16383"},
    "39_L2Norm_": {"batch_size": "1024", "dim": "16383"},
    "36_RMSNorm_": {"batch_size": "8", "dim1": "128", "dim2": "128"},
    "37_FrobeniusNorm_": {"batch_size": "8", "dim1": "128", "dim2": "128"},
    "40_LayerNorm": {"batch_size": "4", "dim1": "128", "dim2": "128"},
    "47_Sum_reduction_over_a_dimension": {"batch_size": "16", "dim1": "1024", "dim2": "1023"},
    "48_Mean_reduction_over_a_dimension": {"batch_size": "16", "dim1": "1024", "dim2": "1023"},
    "49_Max_reduction_over_a_dimension": {"batch_size": "16", "dim1": "1024", "dim2": "1023"},
    "53_Min_reduction_over_a_dimension": {"batch_size": "16", "dim1": "1024", "dim2": "1023"},
    "5_Matrix_scalar_multiplication": {"M": "4096", "N": "4096"},
    "1_Square_matrix_multiplication_": {"N": "1024"},
    "2_Standard_matrix_multiplication_": {"M": "1024", "K": "2048", "N": "1024"},
    "88_MinGPTNewGelu": {"batch_size": "2048", "dim": "8192"},
    "94_MSELoss": {"batch_size": "4096", "input_shape": "(4096,)"},
    "89_cumsum": {"batch_size": "1024", "input_shape": "(8192,)"},
    "12_Gemm_Multiply_LeakyReLU": {"batch_size": "512", "in_features": "2048",
                                   "out_features": "2048"},
    "40_Matmul_Scaling_ResidualAdd": {"batch_size": "2048", "in_features": "2048",
                                      "out_features": "2048"},
}


def problem_of(stem, kb):
    if stem.startswith("l2_"):
        return stem[3:], os.path.join(kb, "KernelBench", "level2", stem[3:] + ".py")
    return stem, os.path.join(kb, "KernelBench", "level1", stem + ".py")


def shrink(src, sizes):
    """The problem's module-level assignments of these names rewritten."""
    for name, value in sizes.items():
        src, n = re.subn(r"(?m)^%s\s*=.*$" % re.escape(name), "%s = %s" % (name, value), src)
        if not n:
            raise SystemExit("judge: no module-level '%s' to shrink" % name)
    return src


def batch(cmd, lines, env, n, label):
    """One `stark eval --batch`: its results in the batch's order.  Each
    result is noted on stderr as it comes (status, wall time, Triton's
    cache), so a run cut short still says how far it got and how long each
    evaluation took."""
    t0 = time.time()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, text=True, env=env)
        proc.stdin.write(lines)
        proc.stdin.close()
        results = []
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            results.append(r)
            e = r.get("env") or {}
            sys.stderr.write("judge: %s%s%d/%d at %.0f s: %s, wall %.1f s, jit_cache %s\n" % (
                label, ": " if label else "", len(results), n, time.time() - t0, r.get("status"),
                r.get("wall_ms", 0) / 1e3, e.get("jit_cache", "-")))
            sys.stderr.flush()
        rc = proc.wait()
        if len(results) != n:
            err.seek(0)
            sys.stderr.write(err.read()[-3000:])
            raise SystemExit("judge: %d results for %d pairs (exit %d)" % (len(results), n, rc))
    return results


def latency(pairs, passes):
    """Both passes' wall time per evaluation and Triton's cache, and their
    medians."""
    print("%-42s %9s %9s  %s" % ("problem", "cold_s", "warm_s", "second pass's jit_cache"))
    for (stem, _, _), a, b in zip(pairs, *passes):
        print("%-42s %9.1f %9.1f  %s" % (stem, a.get("wall_ms", 0) / 1e3, b.get("wall_ms", 0) / 1e3,
                                         (b.get("env") or {}).get("jit_cache", "-")))
    med = lambda rs: statistics.median(r.get("wall_ms", 0) / 1e3 for r in rs)
    warm = sum(1 for r in passes[1] if str((r.get("env") or {}).get("jit_cache", "")).startswith("warm"))
    print("judge latency p50: %.1f s with Triton's JIT, %.1f s with a warm cache (warm on %d of %d)"
          % (med(passes[0]), med(passes[1]), warm, len(pairs)))


def main(argv):
    kb = os.environ.get("KB") or ".kb/checkout"
    stark, real, jobs, only, tap, extra, keep = "build/stark", False, 2, None, False, [], None
    twice = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            extra = argv[i + 1:]
            break
        if a in ("--kb", "--stark", "--jobs", "--only", "--keep"):
            i += 1
            v = argv[i]
            if a == "--kb":
                kb = v
            elif a == "--keep":
                keep = os.path.abspath(v)
            elif a == "--stark":
                stark = v
            elif a == "--jobs":
                jobs = int(v)
            else:
                only = re.compile(v)
        elif a == "--real":
            real = True
        elif a == "--tap":
            tap = True
        elif a == "--twice":
            twice = True
        else:
            raise SystemExit(__doc__)
        i += 1
    if not os.path.isdir(os.path.join(kb, "KernelBench", "level1")):
        if tap:
            print("1..0 # skip no KernelBench checkout at %s (set KB)" % kb)
            return 0
        raise SystemExit("judge: no KernelBench checkout at %s (KB=DIR holding KernelBench/level1)"
                         % kb)
    if keep:
        os.makedirs(keep, exist_ok=True)
    tmp = keep or tempfile.mkdtemp(prefix="stark-triton-judge-")
    try:
        pairs = []
        for f in sorted(os.listdir(os.path.join(HERE, "kernels"))):
            stem = f[:-3]
            if not f.endswith(".py") or (only and not only.search(stem)):
                continue
            name, path = problem_of(stem, kb)
            src = open(path).read()
            if not real:
                src = shrink(src, SMALL.get(name, ELEMENTWISE))
            prob = os.path.join(tmp, name + ".py")
            with open(prob, "w") as out:
                out.write(src)
            pairs.append((stem, prob, os.path.join(HERE, "kernels", f)))
        cmd = [stark, "eval", "--batch", "-", "--jobs", str(jobs), "--device", "cuda"] + extra
        lines = "".join("%s %s\n" % (p, s) for _, p, s in pairs)
        env = dict(os.environ)
        if twice:
            env["STARK_CACHE"] = os.path.join(tmp, "cache")
        passes = []
        for k in range(2 if twice else 1):
            results = batch(cmd, lines, env, len(pairs), "pass %d" % (k + 1) if twice else "")
            passes.append(results)
        if twice:
            latency(pairs, passes)
        if keep:
            with open(os.path.join(keep, "fidelity.list"), "w") as lst:
                for (stem, prob, sol), r in zip(pairs, results):
                    res = os.path.join(keep, stem + ".json")
                    with open(res, "w") as f:
                        json.dump(r, f)
                    lst.write("%s %s %s\n" % (prob, sol, res))
        bad = 0
        if tap:
            print("1..%d" % len(pairs))
        else:
            print("%-42s %-13s %10s %10s %8s  %s" % ("problem", "status", "cand_us", "ref_us",
                                                     "speedup", "triton jit"))
        for n, ((stem, _, _), r) in enumerate(zip(pairs, results), 1):
            env = r.get("env") or {}
            ok = (r.get("status") == "correct" and not r.get("flags") and
                  str(env.get("language", "")).startswith("triton"))
            bad += not ok
            fmt = lambda v: "%.1f" % v if isinstance(v, (int, float)) else "-"
            row = "%-42s %-13s %10s %10s %8s  %s" % (
                stem, r.get("status"), fmt(r.get("runtime_us")), fmt(r.get("ref_runtime_us")),
                ("%.2fx" % r["speedup"]) if isinstance(r.get("speedup"), (int, float)) else "-",
                env.get("triton_jit", "-"))
            if tap:
                print("%s %d - %s" % ("ok" if ok else "not ok", n, row))
                if not ok:
                    print("# %s" % str(r.get("message", ""))[:600].replace("\n", " "))
                    if r.get("flags"):
                        print("# flags: %s" % ", ".join(r["flags"]))
            else:
                print(row)
                if not ok:
                    print("    %s" % str(r.get("message", ""))[:600])
        if not tap:
            sp = [r["speedup"] for r in results if isinstance(r.get("speedup"), (int, float))
                  and r["speedup"] > 0]
            if sp:
                geo = 1.0
                for s in sp:
                    geo *= s
                print("%d of %d correct; geometric-mean speedup %.2fx over %d timed"
                      % (len(pairs) - bad, len(pairs), geo ** (1.0 / len(sp)), len(sp)))
        return 1 if bad else 0
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
