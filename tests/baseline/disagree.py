import torch
import torch.nn as nn


class Model(nn.Module):
    """A reference whose compiled path computes something else: it takes
    another branch under torch.compile (torch.compiler.is_compiling(), as
    libraries branch on it), so its compiled outputs disagree with its
    eager ones and the compiled reference must not be used."""

    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, x):
        y = torch.clamp(x * self.alpha + self.beta, -1.0, 1.0)
        if torch.compiler.is_compiling():
            y = y + 0.5
        y = y - torch.relu(x) * 0.5
        return y * y


batch_size = 64
dim = 2048
alpha = 1.5
beta = 0.25


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [alpha, beta]
