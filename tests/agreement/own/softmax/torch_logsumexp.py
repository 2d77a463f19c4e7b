import torch
import torch.nn as nn

# Honest, fp32: exp(x - logsumexp(x)), one division fewer and another
# rounding path.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.exp(x - torch.logsumexp(x, dim=1, keepdim=True))
