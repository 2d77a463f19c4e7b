import torch
import torch.nn as nn


# Cheat (R12): the data in bfloat16.  Near 100 bfloat16 steps by 0.5, whose
# rounding adds about 0.02 to a variance near 1: beyond even the cancelling
# reference's error.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h = x.to(torch.bfloat16).float()
        d = h - h.mean(dim=1, keepdim=True)
        return (d * d).mean(dim=1)
