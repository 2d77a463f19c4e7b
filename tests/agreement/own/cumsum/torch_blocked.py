import torch
import torch.nn as nn

# Honest, fp32 two-level scan in PyTorch: running sums within blocks of 128,
# plus the running sum of the block totals before each block.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        rows, cols = x.shape
        if cols % 128:
            return torch.cumsum(x, dim=1)
        blocks = x.reshape(rows, cols // 128, 128).cumsum(dim=2)
        before = blocks[:, :, -1].cumsum(dim=1) - blocks[:, :, -1]
        return (blocks + before.unsqueeze(2)).reshape(rows, cols)
