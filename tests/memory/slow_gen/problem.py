# A small problem whose inputs take 8 s to make (a stand-in for gigabytes
# made on the CPU): while the reference worker is at it, the candidate
# worker may already be dead.
import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1.0


def get_inputs():
    time.sleep(8)
    return [torch.randn(256, 256)]


def get_init_inputs():
    return []
