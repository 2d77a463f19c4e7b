# Demo problem (KernelBench format): softplus times a learned scale,
#   out = log(1 + exp(x)) * scale,
# written as four elementwise passes; torch's softplus does it in one.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(features) + 0.5)

    def forward(self, x):
        return torch.log(1 + torch.exp(x)) * self.scale


batch_size = 256
features = 4096


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
