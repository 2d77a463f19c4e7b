import torch
import torch.nn as nn

# R12: the exponentials rounded to bfloat16 (a narrow exp table), summed
# and divided in float32.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x - x.amax(dim=1, keepdim=True)).bfloat16().float()
        return e / e.sum(dim=1, keepdim=True)
