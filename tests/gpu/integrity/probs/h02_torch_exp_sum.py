import torch
import torch.nn as nn

# Honest: the softmax written out in PyTorch (maximum, exp, sum, division),
# none of them the reference's softmax operator.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x - x.amax(dim=1, keepdim=True))
        return e / e.sum(dim=1, keepdim=True)
