# A small KernelBench-format problem for the tests and benchmarks of
# `stark run` that replay evaluations (40-run-resume.t, test_engine.c's shape,
# scripts/bench-orchestrator): it is read, seeded and prompted, never run.
# Row-wise sum and maximum, returned as a tuple.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        s = x.sum(dim=1)
        m = torch.sort(x, dim=1).values[:, -1]
        return s, m


rows = 512
cols = 1024


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []
