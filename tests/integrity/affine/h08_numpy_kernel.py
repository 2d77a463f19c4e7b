import numpy as np
import torch
import torch.nn as nn

# Honest: the whole computation in a kernel of its own (numpy stands in
# for one on the CPU), with torch's cheap operators around it: a reshape
# and an allocation of the output, which compute nothing of the result.
class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        out = torch.empty_like(flat)
        w = self.weight.detach().numpy()
        b = self.bias.detach().numpy()
        np.multiply(np.tanh(flat.numpy() * w + b), 3.0, out=out.numpy())
        return out.reshape(x.shape)
