# Launch-bound like KernelBench's level-3 ResNet18 at batch 2: hundreds of
# small kernels, each far shorter than the host takes to launch it.  An
# honest copy must read 1.00x within 2% every time.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, depth, width):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))

    def forward(self, x):
        for lin, norm in zip(self.layers, self.norms):
            x = torch.relu(norm(lin(x))) + x * 0.5
        return x


depth = 120
width = 256


def get_inputs():
    return [torch.randn(2, width)]


def get_init_inputs():
    return [depth, width]
