"""stark_worker_ipc -- a timed call's inputs on a GPU, written into the
candidate's worker by the reference's while the candidate is stopped.

The GPU form of stark_worker_delivery (which says why).  A worker that
makes its own inputs holds them before its timed call: a candidate that
wraps its worker's GEN could run the model there, untimed, and return
that result from the call (2,112x "correct" on KernelBench's square
matmul on an H200).  On a GPU, by default (STARK_INPUT_DELIVERY=off
keeps the old way), each timed pair goes so:

- the candidate's worker makes its inputs as always -- in its memory
  placement, in the same buffers as before -- but from a decoy seed of
  the referee's (nothing it can compute there is this call's), and
  exports the allocations under those buffers (GEN "ipc_export": CUDA
  IPC handles, stark_cuda.ipc_export);
- the reference's worker makes the call's inputs from the seed, keeps a
  staging copy (GEN "ipc_stage"), and maps the candidate's buffers
  (IPC {"open"});
- before each timed call, the reference's worker copies the staging copy
  into the buffers of the worker about to be timed (its own, or the
  candidate's through the mapping), then flushes the L2 (FLUSH
  "deliver"); the candidate's worker is stopped meanwhile and continued
  once the referee's clock has started (stark_referee_ipc);
- the reference compares the candidate's buffers with the staging copy
  after its call (FETCH "inwin": cand_mutated).

Placements are kept: the buffers are the ones the placement scan chose.
Whether IPC works in this environment is tested before any candidate
code runs (IPC {"test_make"}, {"test"}, {"test_check"}), so that a
candidate whose buffers cannot be opened later is the candidate's doing.

A part of stark_worker.Worker (a mixin).
"""

import torch

import stark_cuda
import stark_memory as M
import stark_wire as W
from stark_worker_outputs import _same_bytes

IPC_TEST_BYTES = 1 << 20
IPC_MAPS_MAX = 512      # the candidate's allocations mapped at most (placements x inputs)
IPC_TEST_BYTE = 0x5A


def _view(ptr, like):
    """A tensor over device address ptr, of like's dtype and shape
    (contiguous)."""
    n = like.numel() * like.element_size()
    flat = torch.as_tensor(W._DeviceArray(ptr, max(n, 1)), device=like.device)
    return flat[:n].view(like.dtype).view(like.shape)


class IpcDelivery:
    """The GPU's delivered inputs: export, open, stage, deliver, check."""

    ipc_maps = None      # reference: {handle bytes: (address mapped here, its size)}
    ipc_views = None     # reference: the candidate's input buffers, mapped
    ipc_stage = None     # reference: the staging copy of this pair's inputs
    ipc_ready = False    # reference: this pair's inputs staged and mapped
    ipc_test = None      # candidate: the self-test's buffer

    def ipc_export_inputs(self):
        """The candidate's GEN "ipc_export": its input buffers as
        [{"h": handle hex, "off", "n"}] (stark_cuda.ipc_export)."""
        out = []
        for x in self.in_bufs:
            if not x.is_contiguous():
                raise ValueError("an input buffer that is not contiguous")
            h, off, size = stark_cuda.ipc_export(x.data_ptr())
            out.append({"h": h.hex(), "off": off, "n": x.numel() * x.element_size(),
                        "size": size})
        # The values it made are a decoy's: no copy is kept, and the
        # reference checks the buffers for mutation.
        self.pristine = [None] * len(self.in_bufs)
        return out

    def ipc_stage_inputs(self):
        """The reference's GEN "ipc_stage": a copy of this pair's inputs
        (placed, the variant made), in the staging buffers of the last
        pair where shapes agree.  None over IPC_STAGE_MAX bytes (the
        referee delivers no more, and the memory plan counts no copy
        beyond it): a 16 GiB copy made for nothing, kept into the timing,
        ran the reference of KernelBench level 1's problem 45 out of
        device memory alone on the H100."""
        if sum(x.numel() * x.element_size() for x in self.in_bufs) > M.IPC_STAGE_MAX:
            self.ipc_stage = None
            self.ipc_views = None
            self.ipc_ready = False
            return
        old = self.ipc_stage or []
        stage = []
        for i, x in enumerate(self.in_bufs):
            s = old[i] if i < len(old) else None
            if not (isinstance(s, torch.Tensor) and s.shape == x.shape and s.dtype == x.dtype):
                s = torch.empty_like(x, memory_format=torch.contiguous_format)
            s.copy_(x.detach())
            stage.append(s)
        self.ipc_stage = stage
        self.ipc_views = None
        self.ipc_ready = False

    def _ipc_map(self, hexh):
        h = bytes.fromhex(hexh)
        if self.ipc_maps is None:
            self.ipc_maps = {}
        if h not in self.ipc_maps:
            if len(self.ipc_maps) >= IPC_MAPS_MAX:
                raise ValueError("more than %d allocations exported" % IPC_MAPS_MAX)
            self.ipc_maps[h] = stark_cuda.ipc_open(h)
        return self.ipc_maps[h]

    def cmd_ipc(self, args):
        """IPC: to the reference {"open": [...]} (the candidate's GEN
        export: its buffers mapped as views shaped like this worker's own
        inputs) or {"test": {...}} (the self-test: mapped and written); to
        the candidate {"test_make": true} or {"test_check": true}."""
        if self.device.type != "cuda":
            raise ValueError("IPC on a worker without a GPU")
        if self.role == "cand":
            if args.get("test_make") is True:
                self.ipc_test = torch.zeros(IPC_TEST_BYTES, dtype=torch.uint8, device=self.device)
                torch.cuda.synchronize(self.device)
                h, off, size = stark_cuda.ipc_export(self.ipc_test.data_ptr())
                return {"h": h.hex(), "off": off, "n": IPC_TEST_BYTES, "size": size}
            if args.get("test_check") is True:
                t, self.ipc_test = self.ipc_test, None
                ok = t is not None and bool((t == IPC_TEST_BYTE).all())
                return {"ok": ok}
            raise ValueError("an IPC request the candidate's worker cannot serve")
        if isinstance(args.get("test"), dict):
            d = args["test"]
            like = torch.empty(IPC_TEST_BYTES, dtype=torch.uint8, device=self.device)
            v = _view(self._ipc_check(d, like), like)
            v.fill_(IPC_TEST_BYTE)
            torch.cuda.synchronize(self.device)
            return {}
        got = args.get("open")
        if not isinstance(got, list) or len(got) != len(self.in_bufs or []) or \
                self.ipc_stage is None:
            raise ValueError("the candidate's inputs are %s, this pair has %d"
                             % ("%d buffers" % len(got) if isinstance(got, list) else "missing",
                                len(self.in_bufs or [])))
        self.ipc_views = [_view(self._ipc_check(d, x), x) for d, x in zip(got, self.in_bufs)]
        self.ipc_ready = True
        return {}

    def _ipc_check(self, d, like):
        """The address of an exported buffer's first byte, mapped here,
        once its description is checked against `like` (the buffer it
        must match) and against the mapping's size as this process's
        driver has it: the exporter's figures are its word, and a write
        past the mapping would land in this worker's own memory."""
        n = like.numel() * like.element_size()
        if not (isinstance(d, dict) and isinstance(d.get("h"), str) and
                len(d["h"]) == 2 * stark_cuda.IPC_HANDLE_BYTES and
                all(type(d.get(k)) is int and d[k] >= 0 for k in ("off", "n"))):
            raise ValueError("an exported buffer that is not described")
        ptr, size = self._ipc_map(d["h"])
        if d["n"] != n or d["off"] + n > size:
            raise ValueError("an exported buffer of %d bytes at %d of a mapping of %d, "
                             "%d needed" % (d["n"], d["off"], size, n))
        return ptr + d["off"]

    def ipc_deliver(self, to):
        """FLUSH "deliver": the staging copy into the buffers of the worker
        about to be timed ("ref": this one's; "cand": the mapped ones),
        then synchronized."""
        if not self.ipc_ready:
            raise ValueError("no delivered inputs are staged")
        dst = self.in_bufs if to == "ref" else self.ipc_views
        with torch.no_grad():
            for d, s in zip(dst, self.ipc_stage):
                d.copy_(s)
        torch.cuda.synchronize(self.device)

    def ipc_mutated(self):
        """Which of the candidate's delivered inputs its call changed."""
        if not self.ipc_ready:
            return []
        return [j for j, (v, s) in enumerate(zip(self.ipc_views, self.ipc_stage))
                if not _same_bytes(v, s)]
