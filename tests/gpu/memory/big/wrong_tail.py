# Right everywhere but the last of its 1.6 billion elements, 6 GiB into
# its output: incorrect, however the comparison reads it.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.relu(x)
        out.view(-1)[-1] += 1.0
        return out
