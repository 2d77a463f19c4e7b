import torch
import torch.nn as nn

# Honest, fp32 split-K in PyTorch: K cut into 4 slices, one product per
# slice, the partial products added in order.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        K = A.shape[1]
        step = (K + 3) // 4
        C = None
        for k0 in range(0, K, step):
            part = torch.matmul(A[:, k0:k0 + step], B[k0:k0 + step])
            C = part if C is None else C + part
        return C
