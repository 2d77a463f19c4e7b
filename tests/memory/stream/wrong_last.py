# Right everywhere but the last element of the last output: the mismatch
# lies in the stream's last chunk.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = torch.tanh(x) * self.scale
        last = (x * 1000).to(torch.int64)
        last[-1, -1] += 7
        return y, y.sum(dim=1).half(), (x > 0), last
