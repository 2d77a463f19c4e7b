import torch
import torch.nn as nn
from stark_cuda import CudaModule

# Honest twin of r17_persist_l2, line for line without the L2 settings: the
# kernel runs on the model's own stream, which waits for the caller's
# stream, and the caller's stream waits for it.
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
        self.stream = None

    def forward(self, table, start):
        table, start = table.contiguous(), start.contiguous()
        chains = start.numel()
        out = torch.empty(chains, device=start.device, dtype=torch.int64)
        cur = torch.cuda.current_stream(start.device)
        if self.stream is None:
            self.stream = torch.cuda.Stream(device=start.device)
        s = self.stream
        s.wait_stream(cur)
        mod.chase(grid=((chains + 63) // 64,), block=(64,),
                  args=(table, start, out, chains, self.steps), stream=s)
        out.record_stream(s)
        cur.wait_stream(s)
        return out
