import torch
import torch.nn as nn

# Honest: a plain-PyTorch rewrite on the GPU (one kernel fewer than the
# reference: addcmul, then in-place tanh and scale).
class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.addcmul(self.bias, x, self.weight).tanh_().mul_(3.0)
