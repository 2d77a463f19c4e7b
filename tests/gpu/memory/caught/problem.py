# A model whose forward asks for a scratch of 30% of the device and, where
# the allocator refuses it, catches the error and takes a slower path that
# needs none: what cuDNN does when its chosen algorithm's workspace does
# not fit (it runs another, with other results and another time, and says
# nothing).  Alone, both of an evaluation's workers get their scratch; two
# evaluations at once do not all get theirs: the one whose worker met the
# refusal beside the other is the evaluator's failure, judged again alone
# (env.mem_caught, env.mem_retried), never charged and never judged on the
# other path.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.is_cuda:
            total = torch.cuda.get_device_properties(x.device).total_memory
            try:
                scratch = torch.empty(int(total * 0.3) // 4, device=x.device)
            except torch.OutOfMemoryError:
                return (x + x) * 1.0
            scratch[:1].fill_(1.0)
            return x * 2.0 * scratch[:1]
        return x * 2.0


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
