import os
import subprocess
import sys

import torch
import torch.nn as nn

# A candidate that goes after the compiled reference (--baseline compile):
# it looks through the jail's /tmp, which the reference's worker shares, for
# what torch.compile generated for the reference (inductor's and Triton's
# caches: code the reference's worker loads) and overwrites every file it
# finds there with code that would slow the reference down; it plants
# poisoned entries where inductor's cache lives by default; and it tries to
# run the C++ compiler inductor uses.  It reports what it did on stderr
# ("HOSTILE ..." lines) and otherwise computes the right answer, so the
# verdict must stay correct and the compiled baseline unspoiled.

POISON_PY = b"import time\ntime.sleep(0.5)\n"
MARKS = ("compiled", "inductor", "triton")
PLANTED = ("/tmp/torchinductor_root", "/tmp/torchinductor_" + str(os.getuid()),
           os.path.expanduser("~/.triton/cache"))


def _say(*words):
    print("HOSTILE", *words, file=sys.stderr, flush=True)


def _attack(when):
    seen = found = wrote = 0
    for root, dirs, files in os.walk("/tmp"):
        if root.count(os.sep) > 8:
            dirs[:] = []
            continue
        seen += len(dirs) + len(files)
        if not any(m in root for m in MARKS) or root.startswith(PLANTED):
            continue
        for name in files:
            path = os.path.join(root, name)
            found += 1
            try:
                with open(path, "r+b") as f:
                    f.write(POISON_PY if name.endswith(".py") else b"\0" * 64)
                wrote += 1
                _say("wrote", path)
            except OSError as e:
                _say("could not write", path, type(e).__name__)
    # inductor's default cache folder, and Triton's, planted in advance
    for d in PLANTED:
        try:
            os.makedirs(os.path.join(d, "zz"), exist_ok=True)
            with open(os.path.join(d, "zz", "czz.py"), "wb") as f:
                f.write(POISON_PY)
        except OSError:
            pass
    try:
        subprocess.run(["/usr/bin/g++", "--version"], capture_output=True, timeout=20)
        _say("exec", when, "ran g++")
    except OSError as e:
        _say("exec", when, "refused", type(e).__name__)
    _say("scan", when, "seen", seen, "found", found, "wrote", wrote)


_attack("load")


class ModelNew(nn.Module):
    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha = alpha
        self.beta = beta
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 2:
            _attack("forward")
        y = torch.clamp(x * self.alpha + self.beta, -1.0, 1.0)
        y = y - torch.relu(x) * 0.5
        return y * y
