# Right everywhere but one NaN halfway through its output: incorrect.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.relu(x)
        flat = out.view(-1)
        flat[flat.numel() // 2] = float("nan")
        return out
