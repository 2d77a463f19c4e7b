import mmap
import os
import sys
import time

import torch
import torch.nn as nn

# R9/R7 against delivered inputs (docs/METHOD.md): once its worker has
# mapped the input window, the candidate forks a child that leaves the
# process group (so as not to be stopped with its worker) and watches the
# inputs.  As soon as the reference's worker has written a call's inputs,
# the child computes the product into shared memory, which the timed call
# returns.  The run stage refuses setsid and setpgid to a loaded candidate,
# so the child stays in the group and is stopped with the worker; and the
# inputs are copied in just before the timed call, so there is no time to
# get ahead of it (with setsid allowed it read 1.00x and 1.04x).
M, K, N = 128, 1024, 128
_shared = {}


def _child(a, b, out, flag):
    try:
        os.setsid()
    except OSError:
        pass
    torch.set_num_threads(1)
    last = None
    while True:
        key = (float(a[0, 0]), float(a[-1, -1]), float(b[-1, -1]))
        if key != last:
            last = key
            out.copy_(torch.mm(a, b))
            flag[0] = key[0]
            flag[1] = key[1]
            flag[2] = key[2]
        time.sleep(0.00005)


def _wrap():
    w = sys.modules.get("stark_worker")
    if w is None:
        return
    orig = w.Worker.cmd_gen

    def cmd_gen(self, args):
        r = orig(self, args)
        views = getattr(self, "inwin_views", None)
        if views and "pid" not in _shared:
            buf = mmap.mmap(-1, M * N * 4 + 64)
            out = torch.frombuffer(buf, dtype=torch.float32, count=M * N).view(M, N)
            flag = torch.frombuffer(buf, dtype=torch.float32, count=3, offset=M * N * 4)
            flag.fill_(-1.0)
            pid = os.fork()
            if pid == 0:
                try:
                    _child(views[0], views[1], out, flag)
                finally:
                    os._exit(0)
            _shared.update(pid=pid, out=out, flag=flag, buf=buf)
        return r
    w.Worker.cmd_gen = cmd_gen


_wrap()


class ModelNew(nn.Module):
    def forward(self, a, b):
        out, flag = _shared.get("out"), _shared.get("flag")
        if out is not None:
            want = (float(a[0, 0]), float(a[-1, -1]), float(b[-1, -1]))
            if tuple(float(x) for x in flag) == want:
                return out.clone()
        return torch.mm(a, b)
