# Example problem (KernelBench format): a scaled hard-swish with a residual,
#   out = x * clamp(x + 3, 0, 6) / 6 * scale + residual,
# where scale is a learned per-feature vector.  PyTorch runs it as six
# elementwise passes over memory with five temporaries; a fused kernel makes
# one pass.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))

    def forward(self, x, residual):
        return x * torch.clamp(x + 3.0, 0.0, 6.0) / 6.0 * self.scale + residual


batch_size = 128
features = 4096


def get_inputs():
    x = torch.randn(batch_size, features) * 4.0
    residual = torch.randn(batch_size, features)
    return [x, residual]


def get_init_inputs():
    return [features]
