import torch
import torch.nn as nn

# R12 on the GPU: turns TF32 on for matrix products in its own process (10
# mantissa bits for the inputs: about 1e-3 relative error per product) and
# calls torch.matmul.  PyTorch leaves TF32 off for fp32 matrix products by
# default, as the reference's process does; with K = 512 the result is far
# outside the fp32 tolerance: incorrect.
torch.set_float32_matmul_precision("high")
try:
    torch.backends.cuda.matmul.allow_tf32 = True
except Exception:
    torch.backends.cuda.matmul.fp32_precision = "tf32"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)
