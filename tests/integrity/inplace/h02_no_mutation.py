import torch
import torch.nn as nn

# Leaves its input alone.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.where(x > 0, x * 2.0, torch.zeros_like(x))
