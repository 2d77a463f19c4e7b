import torch
import torch.nn as nn

# Honest: the written-out softmax in float64, rounded once.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        d = x.double()
        e = torch.exp(d - d.amax(dim=1, keepdim=True))
        return (e / e.sum(dim=1, keepdim=True)).to(x.dtype)
