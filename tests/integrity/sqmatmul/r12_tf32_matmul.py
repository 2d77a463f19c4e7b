import torch
import torch.nn as nn

# R12 and R11 together: the TF32 cheat in its CPU form -- the
# operands rounded to TF32 and handed to the library's own matmul.
def tf32(x):
    i = x.contiguous().view(torch.int32)
    i = (i + 0x0FFF + ((i >> 13) & 1)) & ~0x1FFF
    return i.view(torch.float32)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(tf32(a), tf32(b))
