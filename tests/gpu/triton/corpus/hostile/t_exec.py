# Hostile: a Triton candidate (its run jail may exec Triton's tools and the
# C compiler) that tries to run anything else: a shell, Python, and a copy
# of Triton's own ptxas made in /tmp.  Each must fail with EACCES
# (Landlock); any that runs raises, so "correct" means every one was
# refused and the candidate then did its job.  The attempts are made in
# forward, which runs in the run jail only: a single `stark eval` imports
# the solution first in the compile jail, whose purpose is to exec the
# toolchain (SECURITY.md), so an exec at import proves nothing there.
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
    """The interpreters of the toolchain's wrapper scripts: the C compiler
    Triton runs and the tools beside it (gcc, cc, clang, as, ld on PATH),
    where one is a script (a wrapper around the real program, as in
    /opt/gcc/bin on some GPU hosts, whose wrappers may name /bin/sh or
    /bin/bash).  Such a shell must run for Triton to work, so the run jail
    allows it (SECURITY.md, "Triton"), and it is not an escape."""
    tools = [os.environ.get("CC")] + [shutil.which(t) for t in ("gcc", "cc", "clang", "as", "ld")]
    shells = set()
    for cc in tools:
        if not cc:
            continue
        try:
            with open(shutil.which(cc) or cc, "rb") as f:
                head = f.read(256)
        except OSError:
            continue
        if not head.startswith(b"#!"):
            continue
        line = head[2:].split(b"\n", 1)[0].split()
        if line:
            shells.add(os.path.realpath(line[0].decode()))
    return shells


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


@triton.jit
def affine_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 1.5 + 0.25, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.tried = False

    def forward(self, x):
        if not self.tried:
            self.tried = True
            _attack()
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        affine_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096, num_warps=8)
        return out
