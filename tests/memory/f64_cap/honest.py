# The problem's own code as ModelNew: an honest candidate.
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0
