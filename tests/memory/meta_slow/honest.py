# The honest copy of problem.py's Model.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2.0
