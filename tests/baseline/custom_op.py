import torch
import torch.nn as nn

# A custom operator registered without a fake (meta) implementation, as
# many extensions' operators are: eager PyTorch runs it, torch.compile
# cannot trace it (dynamo needs the fake kernel for the output's shape).


@torch.library.custom_op("stark_e2e::clamp_shift", mutates_args=())
def clamp_shift(x: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    return torch.clamp(x * alpha + beta, -1.0, 1.0)


class Model(nn.Module):
    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, x):
        y = clamp_shift(x, self.alpha, self.beta)
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
