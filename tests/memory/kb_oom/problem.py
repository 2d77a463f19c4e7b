# A small problem whose inputs take 480 MiB of host memory only for
# KernelBench's own trials (their seeds are public: torch.manual_seed(42),
# then one torch.randint per trial), a stand-in for level 1's gigabytes of
# inputs made on the CPU in both workers at once: with the run jail's
# memory made small, one worker is killed in KernelBench's first trials,
# while stark's trials fit.  The limit is the evaluator's own.  The
# inputs' storage is held for a while before get_inputs() returns, so that
# both workers hold it at once whatever their timing.
import time

import torch
import torch.nn as nn

_g = torch.Generator().manual_seed(42)
_KB_SEEDS = {int(torch.randint(0, 2**32 - 1, (1,), generator=_g).item()) for _ in range(5)}


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2.0


def get_inputs():
    if torch.initial_seed() in _KB_SEEDS:
        held = torch.ones(120 << 20)
        time.sleep(1.5)
        return [held[:4096].view(64, 64)]
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
