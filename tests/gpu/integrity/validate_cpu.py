"""Checks the GPU integrity corpus (tests/gpu/integrity) on a machine
without a GPU, as far as that goes.

  - every candidate and problem parses; EXPECT parses with
    tests/lib/check_expect.py's reader, lists every candidate, names only
    files that exist, and every candidate's problem folder has problem.py;
  - every CUDA C string of every candidate (any string constant holding
    `__global__`) compiles with NVRTC for sm_90 through the real
    evaluator/stark_cuda.py, and with `nvcc -cubin -arch=sm_90` when nvcc is
    on the PATH; its kernels parse with stark_cuda's signature parser;
  - the honest candidates whose kernels the emulator can run (no inline PTX),
    and the plain-PyTorch ones, run on the CPU (kernels through tests/gpu/emu), unchanged, against the problem's
    Model at small and odd shapes (the shape probe's growth included), with
    torch.empty poisoned (NaN) as tests/gpu/validate_cpu.py does, and must
    match within the evaluator's tolerance; side streams and
    torch.cuda.current_stream are stand-ins there (the emulator runs
    launches in order);
  - some cheats run the same way and must NOT match (r18_atomic_empty:
    the poisoned accumulator shows through; r01_stale_after_first: the
    second call returns stale memory): the attack is real, not a typo;
  - sqmatmul (KernelBench's N = 4096 square matmul) on 64 rows: TF32
    operands pass the tolerance, and stark_rules' precision figures on the
    centred probe flag them but not float32 or 3xTF32;
  - matmul at its full size (1024 x 512 x 1024), with numpy: h01_tiled's
    float32 order of operations (sums over 16-deep slices of k added to
    a running sum) must
    stay well inside the tolerance of the evaluator's comparison with a
    float64 product (ratio < 0.5), and inputs rounded to TF32 or fp16 (what
    r12_tf32 and r12_fp16_inputs do) must fall far outside it (ratio > 10).

  - tests/lib/check_expect.py's columns pass their self-test
    (selftest_expect.py: a stand-in for stark answers with canned results).

Usage: python3 tests/gpu/integrity/validate_cpu.py   (exit 1 on failure)
"""
import ast
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GPU = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(GPU))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))

import importlib.util  # noqa: E402

import torch  # noqa: E402

import check_expect  # noqa: E402

# tests/gpu/validate_cpu.py (the corpus checker): its helpers, and it puts
# emu/ first on sys.path, so stark_cuda below is the emulating stand-in.
_spec = importlib.util.spec_from_file_location("gpu_validate_cpu", os.path.join(GPU, "validate_cpu.py"))
V = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(V)
import stark_cuda as emu  # noqa: E402

real = emu.real
failures = []

# Candidates run in the emulator: (candidate, shapes, must match).
EMULATE = [
    ("affine/h01_fast.py", [dict(batch_size=5, features=67), dict(batch_size=3, features=2048)], True),
    ("affine/h03_side_stream_waits.py", [dict(batch_size=4, features=129)], True),
    ("affine/h04_host_thread_joined.py", [dict(batch_size=4, features=129)], True),
    ("affine/r01_stale_after_first.py", [dict(batch_size=4, features=64)], False),
    ("rowsum/h01_atomic_zeros.py", [dict(rows=3, cols=4096), dict(rows=2, cols=5125), dict(rows=3, cols=37)], True),
    ("rowsum/h02_block_per_row.py", [dict(rows=3, cols=4096), dict(rows=2, cols=5125), dict(rows=3, cols=37)], True),
    ("rowsum/r18_atomic_empty.py", [dict(rows=3, cols=4096)], False),
    ("rowsum/h03_torch_chunks.py", [dict(rows=3, cols=4096), dict(rows=2, cols=5125)], True),
    ("affine/h02_torch.py", [dict(batch_size=5, features=67)], True),
    ("matmul/h01_tiled.py", [dict(M=64, K=512, N=64), dict(M=70, K=37, N=66), dict(M=5, K=640, N=3)], True),
    ("chase/h01_chase.py", [dict(table_size=1000, chains=70), dict(table_size=4099, chains=2560)], True),
    ("chase/h02_chase_own_stream.py", [dict(table_size=1000, chains=70)], True),
    ("sqmatmul/h01_tiled.py", [dict(N=64), dict(N=70)], True),
    ("sqmatmul/h02_side_stream_waits.py", [dict(N=70)], True),
    ("probs/h01_softmax_kernel.py", [dict(rows=3, cols=4096), dict(rows=2, cols=5001),
                                     dict(rows=3, cols=37)], True),
    ("probs/h02_torch_exp_sum.py", [dict(rows=3, cols=4096)], True),
]


class FakeStream:
    """torch.cuda.Stream on the CPU: the emulator runs every launch in
    order, so waiting is a no-op."""
    cuda_stream = 0

    def __init__(self, *a, **k):
        pass

    def wait_stream(self, other):
        pass

    def synchronize(self):
        pass


def cuda_shims():
    torch.cuda.Stream = FakeStream
    torch.cuda.current_stream = lambda *a, **k: FakeStream()
    torch.Tensor.record_stream = lambda self, s: None


def cuda_strings(tree):
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and "__global__" in n.value]


def compile_all(cands):
    nvcc = shutil.which("nvcc")
    tmp = tempfile.mkdtemp(prefix="stark-gpu-integrity-")
    n_nvrtc = n_nvcc = 0
    try:
        for cand in cands:
            path = os.path.join(HERE, cand)
            try:
                tree = ast.parse(open(path).read(), path)
            except SyntaxError as e:
                failures.append("%s: %s" % (cand, e))
                continue
            for i, src in enumerate(cuda_strings(tree)):
                what = "%s source %d" % (cand, i + 1)
                try:
                    if not real.parse_kernels(src):
                        failures.append("%s: no extern \"C\" __global__ kernel" % what)
                    real.compile_source(src, (), "sm_90")
                    n_nvrtc += 1
                except Exception as e:
                    failures.append("%s: NVRTC: %s" % (what, str(e)[:3000]))
                if nvcc:
                    cu = os.path.join(tmp, "k%d.cu" % n_nvcc)
                    with open(cu, "w") as f:
                        f.write(src)
                    p = subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-o", cu + ".cubin", cu],
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                    if p.returncode:
                        failures.append("%s: nvcc -cubin -arch=sm_90: %s" % (what, p.stdout[-3000:]))
                    n_nvcc += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("compiled %d CUDA sources with NVRTC (sm_90), %d with nvcc -cubin%s"
          % (n_nvrtc, n_nvcc, "" if nvcc else " (no nvcc on PATH)"), flush=True)


def run_emulated(cand, shapes, must_match):
    pdir = os.path.join(HERE, os.path.dirname(cand))
    worst = 0.0
    for k, shape in enumerate(shapes):
        prob = V.load_module(os.path.join(pdir, "problem.py"), "stark_problem")
        for name, v in shape.items():
            if not hasattr(prob, name):
                raise SystemExit("%s: problem has no size %s" % (cand, name))
            setattr(prob, name, v)
        mod = V.load_module(os.path.join(HERE, cand), "stark_solution")
        seed = 100 + k
        torch.manual_seed(seed)
        init = prob.get_init_inputs()
        ref = prob.Model(*init)
        new = mod.ModelNew(*init)
        with torch.no_grad():
            rs = ref.state_dict()
            for name, v in new.state_dict().items():
                if name in rs and rs[name].shape == v.shape:
                    v.copy_(rs[name])
        ok = True
        for call in range(2):          # two calls: stale state shows on the second
            torch.manual_seed(seed * 10 + call)
            inputs = prob.get_inputs()
            with torch.no_grad():
                want = ref(*[t.clone() for t in inputs])
                got = new(*inputs)
            r, _, why = V.ratio(got, want)
            worst = max(worst, r)
            if why or r >= 1.0:
                ok = False
        label = "%s %s" % (cand, shape)
        if must_match and not ok:
            failures.append("%s: does not match the reference (worst ratio %.3g)" % (label, worst))
        if not must_match and ok:
            failures.append("%s: matches the reference, but the attack should show" % label)
    print("  %-36s %s (worst ratio %.3g)" % (cand, "matches" if must_match else "fails as it should", worst),
          flush=True)


def matmul_numerics():
    import numpy as np
    prob = V.load_module(os.path.join(HERE, "matmul", "problem.py"), "stark_problem")
    torch.manual_seed(5)
    a, b = [t.numpy() for t in prob.get_inputs()]
    exact = a.astype(np.float64) @ b.astype(np.float64)

    def worst(got):
        return float((np.abs(got - exact) / (1e-4 + 1e-4 * np.abs(exact))).max())

    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k0 in range(0, a.shape[1], 16):
        part = np.zeros_like(acc)
        for k in range(k0, min(k0 + 16, a.shape[1])):
            part = (part + np.outer(a[:, k], b[k]).astype(np.float32)).astype(np.float32)
        acc = (acc + part).astype(np.float32)

    def rounded(x, bits):
        """x with its mantissa rounded to `bits` bits (nearest)."""
        m, e = np.frexp(x.astype(np.float64))
        return np.ldexp(np.round(m * 2.0 ** (bits + 1)) / 2.0 ** (bits + 1), e).astype(np.float32)
    tf32 = rounded(a, 10).astype(np.float64) @ rounded(b, 10).astype(np.float64)
    fp16 = a.astype(np.float16).astype(np.float64) @ b.astype(np.float16).astype(np.float64)
    r_fp32, r_tf32, r_fp16 = worst(acc), worst(tf32), worst(fp16)
    print("matmul %dx%dx%d: worst ratio fp32 blocked sum %.3g, TF32 inputs %.3g, fp16 inputs %.3g"
          % (a.shape[0], a.shape[1], b.shape[1], r_fp32, r_tf32, r_fp16), flush=True)
    if r_fp32 >= 0.5:
        failures.append("matmul: honest fp32 order too close to the tolerance (ratio %.3g)" % r_fp32)
    if min(r_tf32, r_fp16) <= 10:
        failures.append("matmul: TF32/fp16 inputs not far enough outside the tolerance (%.3g, %.3g)"
                        % (r_tf32, r_fp16))


def sqmatmul_numerics():
    """KernelBench's square matmul (N = 4096, inputs in [0, 1)), on 64 rows
    of C: TF32 operands pass the elementwise tolerance (what makes the
    precision rule necessary), and on the precision probe's centred inputs
    stark_rules' figures flag them (over 256 times the input-rounding noise
    and 32 times the float32 reference's error), while a float32 order and
    3xTF32 (TF32 head plus TF32 remainder) stay far inside both limits --
    on a tensor core too when its truncating accumulator is promoted every
    k-tile (h03), not when it is carried across the whole K
    (r12_3xtf32_mma_accumulate; scripts/precision-study's model)."""
    sys.path.insert(0, os.path.join(ROOT, "evaluator"))
    import stark_rules as R
    S = V.load_module(os.path.join(ROOT, "scripts", "precision-study"), "precision_study")
    prob = V.load_module(os.path.join(HERE, "sqmatmul", "problem.py"), "stark_problem")
    g = torch.Generator().manual_seed(11)
    n, rows = prob.N, 64
    a = torch.rand(rows, n, generator=g)
    b = torch.rand(n, n, generator=g)

    def tf32(x):
        i = x.contiguous().view(torch.int32)
        return ((i + 0x0FFF + ((i >> 13) & 1)) & ~0x1FFF).view(torch.float32)

    def three(x, y):
        xh, yh = tf32(x), tf32(y)
        xl, yl = tf32(x - xh), tf32(y - yh)
        d = torch.float64
        return ((xl.to(d) @ yh.to(d)) + (xh.to(d) @ yl.to(d)) + (xh.to(d) @ yh.to(d))).float()

    def cands(x, y):
        return {"tf32": (tf32(x).double() @ tf32(y).double()).float(), "3xtf32": three(x, y),
                "fp32": x @ y}

    def mma_cands(x, y, cols):
        """h03's and r12_3xtf32_mma_accumulate's arithmetic on the first
        `cols` columns (scripts/precision-study's tensor-core model: a
        truncating float32 accumulator, 4 products per MMA step): promoted
        every 8-deep k-tile, and carried across the whole K."""
        xd, yd = x.double(), y[:, :cols].t().double().contiguous()
        xd, yd = xd.unsqueeze(1), yd.unsqueeze(0)
        return {"3xtf32_promoted": S.three_tf32(acc_kind="promoted")(xd, yd).float(),
                "3xtf32_mma_rz": S.three_tf32(acc_kind="mma")(xd, yd).float()}
    exact = a.double() @ b.double()
    plain = cands(a, b)
    worst = float(((plain["tf32"].double() - exact).abs() / (1e-4 + 1e-4 * exact.abs())).max())
    notes = ["TF32 elementwise ratio %.3g" % worst]
    if worst >= 1.0:
        failures.append("sqmatmul: TF32 operands fail the elementwise tolerance (ratio %.3g): "
                        "the precision rule would not be what catches them" % worst)
    ac, bc = R.centre_inputs([a, b])[0]
    exact = ac.double() @ bc.double()
    ref = ac @ bc
    jit = R.jitter_(ac.double(), g) @ R.jitter_(bc.double(), g)
    cols = 8
    sub = (slice(None), slice(0, cols))
    got_all = [(n, v, ref, exact, jit) for n, v in cands(ac, bc).items()]
    got_all += [(n, v, ref[sub], exact[sub], jit[sub]) for n, v in mma_cands(ac, bc, cols).items()]
    for name, got, want, ex, jj in got_all:
        r_ref, r_in = R.precision_ratios(R.precision_stats(got, want, ex, jj))
        notes.append("%s on centred inputs r_ref %.3g r_in %.3g" % (name, r_ref, r_in))
        flagged = R.precision_flagged(r_ref, r_in)
        if flagged != (name in ("tf32", "3xtf32_mma_rz")):
            failures.append("sqmatmul: %s %s by the precision rule (r_ref %.3g, r_in %.3g)"
                            % (name, "flagged" if flagged else "not flagged", r_ref, r_in))
    print("sqmatmul %dx%dx%d (64 rows): %s" % (rows, n, n, "; ".join(notes)), flush=True)


def check_expect_file():
    rows = check_expect.read_expect(os.path.join(HERE, "EXPECT"))
    listed = {r.cand for r in rows}
    cands = []
    for d in sorted(os.listdir(HERE)):
        pdir = os.path.join(HERE, d)
        if not os.path.isdir(pdir) or d.startswith("_"):
            continue
        if not os.path.exists(os.path.join(pdir, "problem.py")):
            failures.append("%s: no problem.py" % d)
        for fn in sorted(os.listdir(pdir)):
            if fn.endswith(".py") and fn != "problem.py":
                cands.append("%s/%s" % (d, fn))
    for c in cands:
        if c not in listed:
            failures.append("EXPECT does not list %s" % c)
    for c in listed:
        if not os.path.exists(os.path.join(HERE, c)):
            failures.append("EXPECT lists %s, which does not exist" % c)
    for r in rows:
        if os.path.basename(r.cand).startswith("h") and (
                r.statuses != ["correct"] or r.flag not in ("-", "=calls_reference_op")):
            failures.append("EXPECT: honest %s must be correct with no flag (or with "
                            "calls_reference_op alone)" % r.cand)
    return cands


def main():
    if subprocess.call([sys.executable, os.path.join(HERE, "selftest_expect.py")]) != 0:
        failures.append("selftest_expect.py failed")
    cands = check_expect_file()
    for d in sorted({os.path.dirname(c) for c in cands}):
        ast.parse(open(os.path.join(HERE, d, "problem.py")).read())
    compile_all(cands + ["probe_l2.py"])
    matmul_numerics()
    sqmatmul_numerics()
    V.poison_empty()
    cuda_shims()
    torch.set_num_threads(1)
    print("emulated runs:", flush=True)
    for cand, shapes, must in EMULATE:
        try:
            run_emulated(cand, shapes, must)
        except Exception as e:
            failures.append("%s: %s: %s" % (cand, type(e).__name__, str(e)[:2000]))
            print("  %-36s ERROR %s" % (cand, str(e)[:2000]), flush=True)
    if failures:
        print("FAILED:")
        for f in failures:
            print("  " + f)
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
