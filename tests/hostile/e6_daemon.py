"""E6: a double-fork daemon that would outlive the evaluation."""
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


import ctypes
import time

if _armed():
    if os.fork() == 0:
        try:
            os.setsid()     # refused in the run stage: the child stays in the group
        except OSError:
            pass
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(15, b"@TAG@", 0, 0, 0)  # PR_SET_NAME
            while True:
                time.sleep(1)
        os._exit(0)
    time.sleep(0.5)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale + 1.0
