import numpy as np
import torch
import torch.nn as nn

# Honest: the computation done outside torch's operators altogether, as a
# kernel of one's own would be (numpy stands in for it on the CPU).
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = x.detach().cpu().numpy()
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return torch.from_numpy(e / e.sum(axis=1, keepdims=True, dtype=np.float32))
