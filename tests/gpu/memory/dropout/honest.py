# The problem's own code as ModelNew: an honest candidate.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(p=0.5)

    def forward(self, x):
        return self.drop(x) * 2.0
