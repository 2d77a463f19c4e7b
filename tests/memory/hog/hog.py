# Takes 3 GiB of host memory in forward, far beyond what the reference
# needs: its worker is the one the jail's memory limit kills, and the
# candidate answers for it.
import torch
import torch.nn as nn

_kept = []


class ModelNew(nn.Module):
    def forward(self, x):
        for _ in range(48):
            _kept.append(bytearray(64 << 20))
        return torch.relu(x) + 1.0
