#!/usr/bin/env python3
"""run_fixture.py -- deterministic inputs for tests and benchmarks of `stark run`.

  run_fixture.py root PROBLEM
      prints the root code STARK seeds from PROBLEM (class Model -> ModelNew,
      as tree_seed_code() does).
  run_fixture.py plan PROBLEM
      prints an LLM reply that is a valid plan for the root code: the code in a
      ```python block with one anchor around the body of forward().
  run_fixture.py llm-replay PROBLEM OUT
      writes a --llm replay: file with a "*" entry per agent role.  The plan and
      code replies are the anchored root code (the code agent's reply, once its
      marker lines are dropped, is the root code again), so every plan is
      grounded and every node holds the root's code; debug, sample and reflect
      answer the plain root code.
  run_fixture.py eval-replay OUT [--nodes N] [--seed S]
      writes an --eval replay: file with results for evaluation keys n1..nN
      drawn from a seeded RNG (correct with speedups, incorrect, compile and
      runtime errors) and a "*" fallback (correct, 1.0x).
  run_fixture.py mock-script PROBLEM OUT
      writes a tests/mock_llm.py script whose default reply is the plan reply.
  run_fixture.py hostile PROBLEM PROBLEM_OUT LLM_OUT EVAL_OUT
      writes a run whose every text is hostile markup, for the tests of
      `stark report`: PROBLEM with a comment line of payloads (so every
      node's code holds them), replies where attempt 1 plans and codes
      validly and every later plan is not grounded in its node (rejected
      after the anchor check's retries), and results whose messages, logs,
      flags and env carry the payloads and a terminal escape sequence.  A
      payload that ran would set window.__pwned, open a dialog or fetch.
  run_fixture.py bench-record OUT BENCH_ID SHOW_JSON...
      writes a bench record (docs/REPORT.md) for the runs whose `stark show
      --json` objects are given, one problem row per run (level 1, the run's
      policy and problem), and a table row per policy.
  run_fixture.py demo-bench EXAMPLES
      writes the suite `make demo` benches (EXAMPLES/bench/level1/: the
      hard-swish example and two pure-PyTorch problems) and their recorded
      replies (EXAMPLES/bench/replies/STEM.jsonl) for the stark and sampling
      policies: on each problem the STARK path of demo-replay (a correct
      first kernel, a coder's mistake, a debug that repairs it) and three
      samples (the reference, the first kernel, a wrong one).
  run_fixture.py demo-replay PROBLEM GOOD OUT [SIMULATED_EVAL_OUT]
      writes the recorded replies `make demo` replays: attempt 1 plans and
      codes the fused kernel of GOOD (a KernelBench solution whose extension
      source and load_inline call sit between its imports and class
      ModelNew), attempt 2 plans a change to forward() and the coder swaps
      two arguments (a runtime error), attempt 3 debugs it.  Optionally also
      the evaluation results that path expects, to pick a policy seed.
"""
import json
import os
import random
import re
import sys

ROOT_RE = re.compile(r"(?<=class )Model(?=[(,:])|(?<=super\()Model(?=[(,:])")


def root_code(problem):
    with open(problem, encoding="utf-8") as f:
        return ROOT_RE.sub("ModelNew", f.read())


def plan_reply(problem):
    lines = root_code(problem).splitlines(keepends=True)
    for i, line in enumerate(lines):
        if re.match(r"\s+def forward\(", line):
            start = i + 1
            break
    else:
        raise SystemExit("run_fixture: %s has no forward()" % problem)
    indent = len(lines[i]) - len(lines[i].lstrip())
    end = start
    while end < len(lines) and (not lines[end].strip() or
                                len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    body = (lines[:start] + ["<<<IMPROVE BEGIN: fuse the body of forward into one kernel>>>\n"] +
            lines[start:end] + ["<<<IMPROVE END>>>\n"] + lines[end:])
    return "One fused kernel replaces the reference ops.\n\n```python\n" + "".join(body) + "```\n"


def plain_reply(problem):
    return "Here is the program.\n\n```python\n" + root_code(problem) + "```\n"


def llm_replay(problem, out):
    plan = plan_reply(problem)
    plain = plain_reply(problem)
    with open(out, "w", encoding="utf-8") as f:
        for role, text in (("plan", plan), ("code", plan), ("debug", plain),
                           ("sample", plain), ("reflect", plain)):
            f.write(json.dumps({"key": "*", "role": role, "text": text, "raw": "",
                                "tokens_in": 1200, "tokens_out": 300}) + "\n")


def eval_replay(out, nodes, seed):
    rng = random.Random(seed)
    with open(out, "w", encoding="utf-8") as f:
        for i in range(1, nodes + 1):
            x = rng.random()
            if x < 0.55:
                r = {"status": "correct", "speedup": round(rng.uniform(0.5, 3.0), 6),
                     "runtime_us": round(rng.uniform(10, 100), 3), "ref_runtime_us": 50.0,
                     "message": "correct"}
            elif x < 0.70:
                r = {"status": "incorrect", "message": "output 0 differs",
                     "max_abs_err": 0.5, "first_bad": "[3, 17]"}
            elif x < 0.85:
                r = {"status": "compile_error", "message": "nvcc failed",
                     "log": "kernel.cu(12): error: identifier \"x\" is undefined"}
            else:
                r = {"status": "runtime_error", "message": "forward raised",
                     "log": "Traceback (most recent call last):\nRuntimeError: shape"}
            r["key"] = "n%d" % i
            f.write(json.dumps(r) + "\n")
        f.write(json.dumps({"key": "*", "status": "correct", "speedup": 1.0,
                            "runtime_us": 50.0, "ref_runtime_us": 50.0,
                            "message": "correct"}) + "\n")


def demo_replay(problem, good, out, sim=None):
    root = root_code(problem).splitlines(keepends=True)
    g = open(good, encoding="utf-8").read().splitlines(keepends=True)
    # The kernel block of GOOD: from the load_inline import to class ModelNew.
    start = next(i for i, l in enumerate(g) if l.startswith("from torch.utils.cpp_extension"))
    end = next(i for i, l in enumerate(g) if l.startswith("class ModelNew"))
    block = g[start:end]
    while block and not block[-1].strip():
        block.pop()
    call = next(l for l in g if "fused." in l and "return" in l)
    imp = next(i for i, l in enumerate(root) if l.startswith("import torch.nn"))
    fwd = next(i for i, l in enumerate(root) if re.match(r"\s+def forward\(", l))
    body = fwd + 1
    fence = lambda lines: "```python\n" + "".join(lines) + "```\n"
    A = "<<<IMPROVE BEGIN: %s>>>\n"
    E = "<<<IMPROVE END>>>\n"
    plan1 = (root[:imp + 1] +
             [A % "add a C++ extension hardswish_scale_add(x, scale, residual) that computes "
              "x * clamp(x + 3, 0, 6) / 6 * scale + residual in one pass over rows with "
              "at::parallel_for, built with load_inline", E] +
             root[imp + 1:body] +
             [A % "replace the six elementwise torch ops with one call of "
              "fused.hardswish_scale_add(x, self.scale, residual)", root[body], E] +
             root[body + 1:])
    node1 = root[:imp + 1] + block + root[imp + 1:body] + [call] + root[body + 1:]
    n1body = next(i for i, l in enumerate(node1) if re.match(r"\s+def forward\(", l)) + 1
    plan2 = (node1[:n1body] +
             [A % "pass residual and scale to the kernel as contiguous tensors made once, "
              "so no copy happens inside the extension", node1[n1body], E] +
             node1[n1body + 1:])
    bad = call.replace("(x, self.scale, residual)", "(x, residual.contiguous(), self.scale.contiguous())")
    node2 = node1[:n1body] + [bad] + node1[n1body + 1:]
    fixed = call.replace("(x, self.scale, residual)",
                         "(x, self.scale.contiguous(), residual.contiguous())")
    node3 = node1[:n1body] + [fixed] + node1[n1body + 1:]
    replies = [
        ("a1.plan.r0", "plan", "The reference makes six passes over memory; one fused C++ "
         "pass over rows does the same work once.\n\n" + fence(plan1), 2900, 420),
        ("a1.code.r0", "code", fence(node1), 3600, 900),
        ("a2.plan.r0", "plan", "The kernel calls .contiguous() on every input; make the "
         "inputs contiguous once in forward().\n\n" + fence(plan2), 3400, 380),
        ("a2.code.r0", "code", fence(node2), 3900, 120),
        ("a3.debug.r0", "debug", "The arguments were passed in the wrong order: the kernel "
         "takes (x, scale, residual).\n\n" + fence(node3), 4100, 900),
    ]
    with open(out, "w", encoding="utf-8") as f:
        for key, role, text, tin, tout in replies:
            f.write(json.dumps({"key": key, "role": role, "text": text,
                                "tokens_in": tin, "tokens_out": tout}) + "\n")
    if sim:
        with open(sim, "w", encoding="utf-8") as f:
            for r in ({"key": "n1", "status": "correct", "speedup": 2.0},
                      {"key": "n2", "status": "runtime_error", "message": "x and residual differ"},
                      {"key": "n3", "status": "correct", "speedup": 1.9}):
                f.write(json.dumps(r) + "\n")

# The two pure-PyTorch problems of the demo bench: (file, problem text,
# first kernel's forward line, the coder's mistake, the debugged line, a
# wrong sample's line).
DEMO_PROBLEMS = [
    ("2_softplus_scale.py",
     "# Demo problem (KernelBench format): softplus times a learned scale,\n"
     "#   out = log(1 + exp(x)) * scale,\n"
     "# written as four elementwise passes; torch's softplus does it in one.\n"
     "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
     "    def __init__(self, features):\n        super().__init__()\n"
     "        self.scale = nn.Parameter(torch.rand(features) + 0.5)\n\n"
     "    def forward(self, x):\n        return torch.log(1 + torch.exp(x)) * self.scale\n\n\n"
     "batch_size = 256\nfeatures = 4096\n\n\ndef get_inputs():\n"
     "    return [torch.randn(batch_size, features)]\n\n\ndef get_init_inputs():\n"
     "    return [features]\n",
     "        return torch.nn.functional.softplus(x) * self.scale\n",
     "        return torch.nn.functional.softplus(x, beta=self.scale)\n",
     "        return torch.nn.functional.softplus(x).mul_(self.scale)\n",
     "        return torch.nn.functional.softplus(x)\n"),
    ("3_sum_of_squares.py",
     "# Demo problem (KernelBench format): the sum of squares of each row,\n"
     "#   out[i] = sum_j x[i, j]^2,\n"
     "# which PyTorch computes through a temporary the size of x.\n"
     "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
     "    def __init__(self):\n        super().__init__()\n\n"
     "    def forward(self, x):\n        return (x * x).sum(dim=1)\n\n\n"
     "rows = 2048\ncols = 2048\n\n\ndef get_inputs():\n"
     "    return [torch.randn(rows, cols)]\n\n\ndef get_init_inputs():\n    return []\n",
     "        return torch.bmm(x.unsqueeze(1), x.unsqueeze(2)).view(-1)\n",
     "        return torch.bmm(x.unsqueeze(1), x.unsqueeze(1)).view(-1)\n",
     "        return torch.einsum(\"ij,ij->i\", x, x)\n",
     "        return (x * x).sum(dim=0)\n"),
]


def stark_path(root, first, bad, fixed, what1, what2, why):
    """Replies of the demo's STARK path on a problem whose forward is one line."""
    fence = lambda lines: "```python\n" + "".join(lines) + "```\n"
    A = "<<<IMPROVE BEGIN: %s>>>\n"
    E = "<<<IMPROVE END>>>\n"
    body = next(i for i, l in enumerate(root) if re.match(r"\s+def forward\(", l)) + 1
    plan1 = root[:body] + [A % what1, root[body], E] + root[body + 1:]
    node1 = root[:body] + [first] + root[body + 1:]
    plan2 = node1[:body] + [A % what2, node1[body], E] + node1[body + 1:]
    node2 = node1[:body] + [bad] + node1[body + 1:]
    node3 = node1[:body] + [fixed] + node1[body + 1:]
    return node1, [
        ("a1.plan.r0", "plan", "The reference makes several passes; one call does it.\n\n" +
         fence(plan1), 1900, 300),
        ("a1.code.r0", "code", fence(node1), 2300, 400),
        ("a2.plan.r0", "plan", "Fold the remaining step into the same call.\n\n" + fence(plan2),
         2400, 260),
        ("a2.code.r0", "code", fence(node2), 2600, 120),
        ("a3.debug.r0", "debug", why + "\n\n" + fence(node3), 2900, 400),
    ]


def demo_bench(examples):
    ex = os.path.join(examples, "bench")
    lv = os.path.join(ex, "level1")
    rp = os.path.join(ex, "replies")
    os.makedirs(lv, exist_ok=True)
    os.makedirs(rp, exist_ok=True)
    fence = lambda text: "Here is the program.\n\n```python\n" + text + "```\n"
    hs = os.path.join(examples, "hardswish_residual")
    src = open(os.path.join(hs, "problem.py"), encoding="utf-8").read()
    with open(os.path.join(lv, "1_hardswish_residual.py"), "w", encoding="utf-8") as f:
        f.write(src)
    tmp = os.path.join(rp, ".hs.jsonl")
    demo_replay(os.path.join(lv, "1_hardswish_residual.py"), os.path.join(hs, "good.py"), tmp)
    replies = [json.loads(l) for l in open(tmp, encoding="utf-8")]
    os.unlink(tmp)
    node1 = next(r for r in replies if r["key"] == "a1.code.r0")["text"][len("```python\n"):-4]
    root = root_code(os.path.join(lv, "1_hardswish_residual.py"))
    wrong = open(os.path.join(hs, "wrong.py"), encoding="utf-8").read()
    samples = [root, node1, wrong]
    files = [("1_hardswish_residual", replies, samples)]
    for name, text, first, bad, fixed, wrong_line in DEMO_PROBLEMS:
        path = os.path.join(lv, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        lines = root_code(path).splitlines(keepends=True)
        node1, path_replies = stark_path(
            lines, first, bad, fixed, "compute it with one library call",
            "apply the scale inside the same call",
            "The call's arguments were wrong; this one is what the plan meant.")
        rep = [dict(key=k, role=r, text=t, tokens_in=i, tokens_out=o)
               for k, r, t, i, o in path_replies]
        body = next(i for i, l in enumerate(lines) if re.match(r"\s+def forward\(", l)) + 1
        samples = ["".join(lines), "".join(node1),
                   "".join(lines[:body] + [wrong_line] + lines[body + 1:])]
        files.append((name[:-3], rep, samples))
    for stem, rep, samples in files:
        with open(os.path.join(rp, stem + ".jsonl"), "w", encoding="utf-8") as f:
            for r in rep:
                f.write(json.dumps(r) + "\n")
            for k, code in enumerate(samples, 1):
                f.write(json.dumps({"key": "a%d.sample.r0" % k, "role": "sample",
                                    "text": fence(code), "tokens_in": 900,
                                    "tokens_out": 350 + 40 * k}) + "\n")


PAYLOAD = ('</script><script>window.__pwned=1;alert(1)</script><img src=x onerror="window.__pwned=2">'
           '<svg onload="window.__pwned=3"></svg><img src="http://127.0.0.1:9/leak"> &amp; <!-- '
           '\u2028 \u2029 -->')


def hostile(problem, problem_out, llm_out, eval_out):
    with open(problem, encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    at = next(i for i, l in enumerate(lines) if l.startswith("import "))
    lines.insert(at, "# " + PAYLOAD + "\n")
    with open(problem_out, "w", encoding="utf-8") as f:
        f.write("".join(lines))
    plan = plan_reply(problem_out)
    bad = "Make it faster.\n\n```python\nimport numpy  # " + PAYLOAD + \
        "\n<<<IMPROVE BEGIN: " + PAYLOAD + ">>>\n    pass\n<<<IMPROVE END>>>\n```\n"
    with open(llm_out, "w", encoding="utf-8") as f:
        for key, role, text in (("a1.plan.r0", "plan", plan), ("a1.code.r0", "code", plan),
                                ("*", "plan", bad), ("*", "code", plan),
                                ("*", "debug", plain_reply(problem_out)),
                                ("*", "sample", plain_reply(problem_out)),
                                ("*", "reflect", plain_reply(problem_out))):
            f.write(json.dumps({"key": key, "role": role, "text": text,
                                "tokens_in": 900, "tokens_out": 200}) + "\n")
    with open(eval_out, "w", encoding="utf-8") as f:
        f.write(json.dumps({"key": "n1", "status": "incorrect",
                            "message": "output 0 differs: " + PAYLOAD,
                            "log": "Traceback\n\x1b[2J\x1b]0;pwned\x07" + PAYLOAD + "\n",
                            "first_bad": "[0]", "max_abs_err": 1.0, "max_rel_err": 1.0,
                            "trials_run": 5, "trials_passed": 0,
                            "flags": [PAYLOAD[:60]], "env": {PAYLOAD[:40]: PAYLOAD}}) + "\n")
        f.write(json.dumps({"key": "*", "status": "correct", "speedup": 1.25,
                            "runtime_us": 40.0, "ref_runtime_us": 50.0,
                            "message": "correct " + PAYLOAD}) + "\n")


def bench_record(out, bench_id, shows):
    runs = []
    for p in shows:
        with open(p, encoding="utf-8") as f:
            runs.append(json.load(f))
    problems, table = [], []
    for r in runs:
        fastest = r.get("fastest", r["best"])
        best = fastest["speedup"] if fastest else None
        problems.append({"level": 1, "policy": r["policy"], "problem": r["problem"],
                         "run_id": r["run_id"], "status": "correct" if best else "failed",
                         "best_speedup": best, "attempts": r["attempts"],
                         "dollars": r["spend"]["total"]["dollars"]})
    for policy in sorted(set(p["policy"] for p in problems)):
        rows = [p for p in problems if p["policy"] == policy]
        bests = [p["best_speedup"] or 0.0 for p in rows]
        kept = [max(b, 1.0) for b in bests]
        geo = 1.0
        for k in kept:
            geo *= k
        table.append({"level": 1, "policy": policy, "problems": len(rows),
                      "success_rate": sum(1 for b in bests if b > 0) / len(rows),
                      "fast_1": sum(1 for b in bests if b > 1) / len(rows),
                      "mean_speedup": sum(bests) / len(rows),
                      "geomean_speedup": geo ** (1.0 / len(rows))})
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"kind": "bench", "bench_id": bench_id, "level": 1, "table": table,
                   "problems": problems}, f)


def main(argv):
    if len(argv) >= 3 and argv[1] == "root":
        sys.stdout.write(root_code(argv[2]))
    elif len(argv) >= 3 and argv[1] == "plan":
        sys.stdout.write(plan_reply(argv[2]))
    elif len(argv) >= 4 and argv[1] == "llm-replay":
        llm_replay(argv[2], argv[3])
    elif len(argv) >= 3 and argv[1] == "eval-replay":
        nodes, seed = 200, 7
        rest = argv[3:]
        while rest:
            if rest[0] == "--nodes":
                nodes = int(rest[1])
            elif rest[0] == "--seed":
                seed = int(rest[1])
            else:
                raise SystemExit("run_fixture: unknown option " + rest[0])
            rest = rest[2:]
        eval_replay(argv[2], nodes, seed)
    elif len(argv) >= 6 and argv[1] == "hostile":
        hostile(argv[2], argv[3], argv[4], argv[5])
    elif len(argv) >= 5 and argv[1] == "bench-record":
        bench_record(argv[2], argv[3], argv[4:])
    elif len(argv) >= 3 and argv[1] == "demo-bench":
        demo_bench(argv[2])
    elif len(argv) >= 5 and argv[1] == "demo-replay":
        demo_replay(argv[2], argv[3], argv[4], argv[5] if len(argv) > 5 else None)
    elif len(argv) >= 4 and argv[1] == "mock-script":
        with open(argv[3], "w", encoding="utf-8") as f:
            json.dump({"default": {"text": plan_reply(argv[2]), "usage": [1200, 300]}}, f)
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
