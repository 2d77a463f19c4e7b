import torch
import torch.nn as nn

# Honest, more precise than the reference: the mean in float64, rounded
# once.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        d = predictions.double() - targets.double()
        return torch.mean(d * d).to(predictions.dtype)
