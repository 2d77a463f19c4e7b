# Hostile: a Triton candidate (its run jail may exec Triton's tools and the
# C compiler) that tries to run anything else: a shell, Python, and a copy
# of Triton's own ptxas made in /tmp.  Each must fail with EACCES
# (Landlock); any that runs raises, so "correct" means every one was
# refused and the candidate then did its job.
import os
import shutil
import subprocess

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _refused(argv):
    try:
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=20)
    except PermissionError:
        return
    except FileNotFoundError:
        return
    raise RuntimeError("exec got through: %s" % argv[0])


def _compiler_shells():
    """The interpreter of the C compiler Triton runs, where that compiler
    is a script (a wrapper around the real one, as in /opt/gcc/bin/gcc on
    some GPU hosts): that shell must run for Triton to work, so the run
    jail allows it (SECURITY.md, "Triton"), and it is not an escape."""
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
    try:
        with open(cc, "rb") as f:
            head = f.read(256)
    except (OSError, TypeError):
        return set()
    if not head.startswith(b"#!"):
        return set()
    line = head[2:].split(b"\n", 1)[0].split()
    return {os.path.realpath(line[0].decode())} if line else set()


def _attack():
    for shell in ("/bin/sh", "/bin/bash"):
        if os.path.exists(shell) and os.path.realpath(shell) not in _compiler_shells():
            _refused([shell, "-c", "true"])
    for py in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(py):
            _refused([py, "-c", "pass"])
    bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    ptxas = os.path.join(bindir, "ptxas")
    if os.path.exists(ptxas):
        copy = "/tmp/stark-ptxas-copy"
        shutil.copyfile(ptxas, copy)
        os.chmod(copy, 0o755)
        _refused([copy, "--version"])


_attack()


@triton.jit
def affine_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 1.5 + 0.25, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        _refused(["/bin/sh", "-c", "true"])
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        affine_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096, num_warps=8)
        return out
