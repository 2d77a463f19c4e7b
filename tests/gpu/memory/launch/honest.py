# The problem's own code as ModelNew: an honest candidate.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, depth, width):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))

    def forward(self, x):
        for lin, norm in zip(self.layers, self.norms):
            x = torch.relu(norm(lin(x))) + x * 0.5
        return x
