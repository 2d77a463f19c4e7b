import torch
import torch.nn as nn

import errno
import fcntl
import mmap
import os

# R10 through the output window: the candidate's worker holds the memfd its
# outputs go through.  It looks there for the reference's answer (the window
# only ever holds the candidate's own bytes), and tries to shrink the file
# under the reference's mapping (a fault there would end the reference) and
# to seal it against growth (the referee could no longer size it).  Both are
# refused by the window's seals; what it returns is its previous output.


def _window():
    for name in os.listdir("/proc/self/fd"):
        try:
            if "stark-outputs" in os.readlink("/proc/self/fd/" + name):
                return int(name)
        except OSError:
            pass
    return None


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        fd = _window()
        if fd is None:
            return torch.zeros_like(x)
        attacks = [lambda: fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_GROW)]
        if os.fstat(fd).st_size > 0:
            attacks.append(lambda: os.ftruncate(fd, 0))
        for attack in attacks:
            try:
                attack()
            except OSError as e:
                if e.errno != errno.EPERM:
                    raise
            else:
                # Not what the corpus expects: the evaluation then ends in
                # a runtime error, not "incorrect".
                raise RuntimeError("an attack on the output window's size went through")
        n = x.numel() * x.element_size()
        if os.fstat(fd).st_size < n:
            return torch.zeros_like(x)
        with mmap.mmap(fd, n, prot=mmap.PROT_READ) as m:
            return torch.frombuffer(bytearray(m[:n]), dtype=x.dtype).reshape(x.shape).clone()
