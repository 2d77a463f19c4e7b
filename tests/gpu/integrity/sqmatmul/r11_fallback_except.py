import torch
import torch.nn as nn

# R11, issue 18's third cheat: a ModelNew that tries to import its compiled
# extension, which does not exist, and in `except` calls the very torch
# function the reference calls.  Bit-identical to the reference; flagged
# calls_reference_op, naming aten::mm and its share of the call.
try:
    import stark_missing_sgemm_ext as ext
except ImportError:
    ext = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        if ext is not None:
            return ext.sgemm(A, B)
        return torch.matmul(A, B)
