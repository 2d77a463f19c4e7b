import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = torch.tanh(x) * self.scale
        return y, y.sum(dim=1).half(), (x > 0), (x * 1000).to(torch.int64)
