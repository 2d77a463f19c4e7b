# A small problem whose inputs are slow to make only for KernelBench's own
# trials (their seeds are public: torch.manual_seed(42), then one
# torch.randint per trial), a stand-in for level 1's gigabytes of
# torch.rand made on the CPU: stark's trials are quick, and KernelBench's
# five cannot all be made within the evaluation's deadline.  SLOW_S is the
# time each of them takes.
import time

import torch
import torch.nn as nn

SLOW_S = 8.0
_g = torch.Generator().manual_seed(42)
_KB_SEEDS = {int(torch.randint(0, 2**32 - 1, (1,), generator=_g).item()) for _ in range(5)}


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2.0


def get_inputs():
    if torch.initial_seed() in _KB_SEEDS:
        time.sleep(SLOW_S)
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
