# A small problem whose forward is slow only on the meta device, a
# stand-in for level 3's LSTMs and GRUs (21,000-43,000 operators, 17-31 s
# on meta with torch 2.11 on an H100): the footprint's estimate takes
# SLOW_S, so the shape probe's own estimate is skipped and the probe is
# planned from its inputs.  N is a size only get_inputs() uses: the probe
# grows it.
import time

import torch
import torch.nn as nn

SLOW_S = 3.5
N = 64


class Model(nn.Module):
    def forward(self, x):
        if x.is_meta:
            time.sleep(SLOW_S)
        return torch.tanh(x) * 2.0


def get_inputs():
    return [torch.randn(N, 32)]


def get_init_inputs():
    return []
