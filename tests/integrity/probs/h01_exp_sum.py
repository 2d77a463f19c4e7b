import torch
import torch.nn as nn

# Honest: the softmax written out -- the row maximum subtracted, the
# exponentials, their sum, the division -- none of them the reference's
# own softmax operator.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x - x.amax(dim=1, keepdim=True))
        return e / e.sum(dim=1, keepdim=True)
