# The problem's own code as ModelNew: an honest candidate.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x):
        return self.lin(x)
