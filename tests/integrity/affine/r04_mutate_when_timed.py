import torch
import torch.nn as nn

# R4 and R16 together: behaves during the first calls (correctness), then
# corrupts its input in place once it believes it is being timed.  The
# reference's timed calls skip their own integrity facts; the candidate's
# never do.
class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = torch.tanh(x * self.weight + self.bias) * 3.0
        if self.calls > 12:
            x.zero_()
        return y
