import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest: one thread per chain, `steps` dependent loads from the table, on
# PyTorch's current stream.
SRC = r'''
extern "C" __global__ void chase(const int* __restrict__ table, const int* __restrict__ start,
                                 long long* __restrict__ out, int chains, int steps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < chains) {
        int j = start[i];
        long long acc = 0;
        for (int s = 0; s < steps; s++) {
            j = table[j];
            acc += j;
        }
        out[i] = acc;
    }
}
'''
mod = CudaModule(SRC)


class ModelNew(nn.Module):
    def __init__(self, steps):
        super().__init__()
        self.steps = steps

    def forward(self, table, start):
        table, start = table.contiguous(), start.contiguous()
        chains = start.numel()
        out = torch.empty(chains, device=start.device, dtype=torch.int64)
        mod.chase(grid=((chains + 63) // 64,), block=(64,),
                  args=(table, start, out, chains, self.steps))
        return out
