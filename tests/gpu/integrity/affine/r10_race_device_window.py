import gc
import threading
import time

import torch
import torch.nn as nn

# R10 through the output window on the device (STARK_OUTPUT_WINDOW=device):
# forward returns an unwritten output at once, and a thread computes the
# answer afterwards (untimed) and keeps copying it over the device window,
# which the candidate's worker maps writable, at every offset a chunk of
# the stream may sit at.  The reference copies each chunk out of the window
# and judges its copy against the digests the call reply gave (those of the
# unwritten output): rejected (output written after return) or incorrect,
# never correct.  Where the host window is used, this is a plain unwritten
# output: incorrect.


def _device_windows():
    out = []
    for o in gc.get_objects():
        try:
            if type(o).__name__ == "DeviceWindow" and getattr(o, "writable", False):
                out.append(o)
        except Exception:
            pass
    return out


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def _race(self, x):
        with torch.no_grad():
            y = (torch.tanh(x * self.weight + self.bias) * 3.0).contiguous()
        b = y.reshape(-1).view(torch.uint8)
        wins = _device_windows()
        t_end = time.monotonic() + 1.0
        s = torch.cuda.Stream()
        while wins and time.monotonic() < t_end:
            with torch.cuda.stream(s):
                for w in wins:
                    base = w.map(w.size)
                    n = w.size
                    for slot in (n, n // 2):
                        for at in (0, slot):
                            for off in range(0, b.numel(), max(slot, 1)):
                                k = min(slot, b.numel() - off, n - at)
                                if k > 0:
                                    base[at:at + k].copy_(b[off:off + k])
            s.synchronize()

    def forward(self, x):
        out = torch.empty_like(x)
        threading.Thread(target=self._race, args=(x.detach().clone(),), daemon=True).start()
        return out
