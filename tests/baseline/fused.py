import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The same chain in fewer eager passes (an honest candidate)."""

    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, x):
        y = torch.clamp(torch.add(x * self.alpha, self.beta), -1.0, 1.0)
        y = torch.sub(y, torch.relu(x), alpha=0.5)
        return y.square_()
