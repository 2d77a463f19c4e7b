# A reference that is not deterministic: dropout in training mode.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(p=0.5)

    def forward(self, x):
        return self.drop(x) * 2.0


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
