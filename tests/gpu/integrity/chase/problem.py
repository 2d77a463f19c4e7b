import torch
import torch.nn as nn

table_size = 6 * 1024 * 1024    # int32 entries: 24 MB, about half an H100's L2
chains = 2048
steps = 96


class Model(nn.Module):
    """Pointer chasing: each of `chains` walks `steps` hops through a random
    table (j = table[j]) from its start and returns the sum of the indices it
    visited.  A kernel for it is bound by the latency of dependent loads, so
    it runs about twice as fast when the table sits in L2 as when it comes
    from memory: what a candidate that pins its input in persisting L2 lines
    (THREATS.md R17) gains if the evaluator's flush does not reach them."""

    def __init__(self, steps):
        super().__init__()
        self.steps = steps

    def forward(self, table, start):
        t = table.long()
        idx = start.long()
        acc = torch.zeros_like(idx)
        for _ in range(self.steps):
            idx = t[idx]
            acc += idx
        return acc


def get_inputs():
    return [torch.randint(0, table_size, (table_size,), dtype=torch.int32),
            torch.randint(0, table_size, (chains,), dtype=torch.int32)]


def get_init_inputs():
    return [steps]
