import torch
import torch.nn as nn

# Mutates its input as the reference does, in every call, timed ones too.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x.clamp_(min=0.0)
        return x + x
