import torch
import torch.nn as nn

# Honest: split-K.  Four slices of k are reduced apart (each a broadcast
# product summed over its 256 values), then the four partial results are
# added in float32, as a split-K kernel's second pass does.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        K = a.shape[1]
        step = -(-K // 4)
        parts = [(a[:, k:k + step, None] * b[None, k:k + step]).sum(1)
                 for k in range(0, K, step)]
        out = parts[0]
        for p in parts[1:]:
            out = out + p
        return out
