import torch
import torch.nn as nn

# Honest: an online softmax over blocks of 4096 columns (a running maximum
# and a running sum rescaled as the maximum grows), then one normalising
# pass -- a flash-style kernel's order.
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        m = torch.full((x.shape[0], 1), float("-inf"), device=x.device)
        s = torch.zeros(x.shape[0], 1, device=x.device)
        for c in range(0, x.shape[1], 4096):
            blk = x[:, c:c + 4096]
            m_new = torch.maximum(m, blk.amax(dim=1, keepdim=True))
            s = s * torch.exp(m - m_new) + torch.exp(blk - m_new).sum(dim=1, keepdim=True)
            m = m_new
        return torch.exp(x - m) / s
