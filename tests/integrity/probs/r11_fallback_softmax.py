import torch
import torch.nn as nn
import torch.nn.functional as F

# R11: tries a kernel module that is not there, and in except calls the
# reference's own operator (under its functional name).
try:
    import stark_missing_softmax_ext as ext
except ImportError:
    ext = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if ext is not None:
            return ext.softmax(x)
        return F.softmax(x, dim=-1)
