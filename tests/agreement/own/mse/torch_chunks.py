import torch
import torch.nn as nn

# Honest, fp32: the squared differences summed in 64 chunks, the chunk sums
# added, then divided by n.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        d = (predictions - targets).reshape(-1)
        n = d.numel()
        if n % 64:
            return torch.mean(d * d)
        return (d * d).reshape(64, -1).sum(dim=1).sum() / n
