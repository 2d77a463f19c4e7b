import torch
import torch.nn as nn

# R1 on the GPU: computes nothing and returns torch.empty_like(x), hoping the
# CUDA caching allocator hands back a block that still holds a result.  In
# STARK the reference runs in another process, so the only results this
# process's allocator can hand back are its own earlier outputs (for other
# inputs): incorrect.
class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.empty_like(x)
