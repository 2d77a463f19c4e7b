# A model whose forward takes a scratch buffer of a third of the device
# that no estimate sees: made only on a CUDA device (the plan's estimate runs
# on the meta device), the way a library's workspace is (cuDNN's, cuBLAS's).
# Alone, both of an evaluation's workers fit; two such evaluations at once
# do not, whatever they reserved: the one that runs out first is judged
# again alone (env.mem_retried), never charged.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.is_cuda:
            total = torch.cuda.get_device_properties(x.device).total_memory
            scratch = torch.empty(int(total * 0.3) // 4, device=x.device)
            scratch.fill_(1.0)
            return x * 2.0 + (scratch[:1] - 1.0)
        return x * 2.0


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
