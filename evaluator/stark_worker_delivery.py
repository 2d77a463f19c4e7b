"""stark_worker_delivery -- a timed call's inputs, written into the
candidate's worker by the reference's while the candidate is stopped.

A worker that makes its own inputs holds them before its timed call: a
candidate that wraps its worker's GEN could run the model there, untimed,
and return that result from the call (59-63x "correct" on a CPU matmul,
tests/integrity/sqmatmul/r09_precompute_in_gen.py).  So on the CPU, with
STARK_INPUT_DELIVERY=on, the timed pairs deliver the candidate's inputs
instead: the reference's worker makes an input window (a memfd sealed
against resizing), the candidate's worker maps it and makes its input
tensors views of it.  Before each timed pair the candidate's worker is
told only the inputs' description (GEN "delivered": no seed); the
reference's worker makes the call's inputs from the seed (GEN "deliver")
and, with the candidate's worker stopped just before its timed call,
writes them into the window (INWIN "write").  The candidate's process
first runs again when the referee's clock of that call has started
(stark_referee_delivery), so whatever it does with the values is timed.

The candidate's worker keeps no copy of delivered inputs, so the mutation
check is the reference's: at FETCH it compares the window with the inputs
it wrote (its own copy of them, or their weighted digests).

A part of stark_worker.Worker (a mixin).
"""

import json
import mmap
import os

import torch

import stark_tensors as T
import stark_wire as W
from stark_worker_outputs import _same_bytes, storage_span


def _views(mm, items):
    """The input tensors of a window mapping for a description's items
    (describe_inputs), at window_layout's offsets; (tensors, layout)."""
    specs = [W.checked_spec(d, "input") for d in items if d.get("t") == "tensor"]
    offs, total = W.window_layout(specs)
    if total > len(mm):
        raise ValueError("the inputs need %d bytes, the window holds %d" % (total, len(mm)))
    flat = torch.frombuffer(mm, dtype=torch.uint8) if len(mm) else torch.empty(0, dtype=torch.uint8)
    views = []
    for (dtype, shape, n), off in zip(specs, offs):
        t = flat[off:off + n].view(dtype).view(shape) if n else torch.empty(shape, dtype=dtype)
        views.append(t)
    return views, offs


def _value(d):
    """A plain item of a description (describe_inputs) as get_inputs() gave it."""
    if d.get("t") == "list":
        v = list(d.get("v") or [])
        return tuple(v) if d.get("tuple") else v
    return d.get("v")


class Delivery:
    """The input window: INWIN, the reference's writes, the candidate's views."""

    inwin = None        # the window's mapping (mmap)
    inwin_items = None  # the description its layout was made for
    inwin_views = None  # the candidate's input tensors in it
    inwin_offs = None
    inwin_ready = False  # reference: this call's inputs may be written (GEN "deliver")

    def cmd_inwin(self, payload, fd):
        """INWIN {"size": n, "items": [...]}: the reference's worker makes
        the window (replies OK {"size"} and its descriptor); the
        candidate's maps the descriptor it is sent with it.  On any failure
        ERR: the referee then times without delivery, or rejects a
        candidate that cannot map what the reference made.  INWIN
        {"write": true} to the reference: this call's inputs written into
        the window (the candidate's worker is stopped)."""
        try:
            args = json.loads(payload) if payload else {}
            if self.role == "ref" and isinstance(args, dict) and args.get("write") is True:
                self.write_inputs()
                self.chan.send_json(W.OK, {})
                return
            n, items = args.get("size"), args.get("items")
            if (not isinstance(args, dict) or type(n) is not int or not 0 < n <= W.OUTPUT_MAX
                    or not isinstance(items, list) or len(items) > W.MAX_ITEMS
                    or self.device.type != "cpu"):
                raise ValueError("an input window request this worker cannot serve")
            if self.role == "ref":
                wfd = W.input_window(n)
                try:
                    self.inwin = mmap.mmap(wfd, n)
                    _views(self.inwin, items)
                    self.inwin_items = items
                    self.chan.send_fd(W.OK, {"size": n}, wfd)
                finally:
                    os.close(wfd)
                return
            if fd < 0 or os.fstat(fd).st_size < n:
                raise ValueError("no window of %d bytes was sent" % n)
            mm = mmap.mmap(fd, n)
            self.inwin_views, self.inwin_offs = _views(mm, items)
            self.inwin, self.inwin_items = mm, items
            self.chan.send_json(W.OK, {})
        except W.WorkerGone:
            raise
        except BaseException as e:
            self.chan.send_json(W.ERR, {"type": type(e).__name__, "phase": "window",
                                        "message": str(e)[:500]})
        finally:
            if fd >= 0:
                os.close(fd)

    def delivered_gen(self):
        """The candidate's GEN "delivered": its inputs are the window's
        tensors, whose values the reference's worker writes while this
        process is stopped; replies their description.  No copy is kept:
        the reference checks them for mutation."""
        if self.inwin_views is None:
            raise ValueError("GEN delivered without an input window")
        items = self.inwin_items
        it = iter(self.inwin_views)
        self.inputs = [next(it) if d.get("t") == "tensor" else _value(d) for d in items]
        for d, x in zip(items, self.inputs):
            if d.get("t") == "tensor" and x.is_floating_point():
                x.requires_grad_(bool(d.get("requires_grad")))
        self.in_bufs = list(self.inwin_views)
        self.in_spans = [storage_span(x) for x in self.in_bufs]
        self.pristine = [None] * len(self.in_bufs)
        desc, _ = T.describe_inputs(self.inputs)
        return {"items": desc["items"], "bytes": sum(x.numel() * x.element_size()
                                                     for x in self.in_bufs),
                "placements": 1, "delivered": True}

    def deliver(self, desc):
        """The reference's GEN "deliver": whether this call's inputs can be
        written into the window (INWIN "write", just before the
        candidate's timed call).  Returns None, or why not: inputs of
        another description than the window's layout (a problem whose
        inputs change shape), or inputs of which this worker keeps no copy
        (over check_copy_bytes); the referee then has the candidate make
        its own."""
        self.inwin_ready = False
        if self.inwin is None:
            return "no input window"
        if json.dumps(desc["items"], sort_keys=True) != json.dumps(self.inwin_items,
                                                                   sort_keys=True):
            return "the inputs' description differs from the window's"
        if len(self.pristine) != len(self.in_bufs) or not all(
                isinstance(p, torch.Tensor) for p in self.pristine):
            return "inputs over %d MiB are not copied" % (self.check_copy_bytes() >> 20)
        self.inwin_ready = True
        return None

    def write_inputs(self):
        """This call's inputs as GEN made them (the copies kept for the
        mutation check: the reference's own call may have changed its
        buffers) written into the window."""
        if not self.inwin_ready:
            raise ValueError("no inputs to write into the input window")
        views, _ = _views(self.inwin, self.inwin_items)
        for v, p in zip(views, self.pristine):
            v.copy_(p)

    def window_mutated(self):
        """Which delivered inputs the candidate's call changed: the window
        compared with the reference's copy of what it wrote."""
        if self.inwin is None or not self.inwin_ready:
            return []
        views, _ = _views(self.inwin, self.inwin_items)
        return [j for j, (v, p) in enumerate(zip(views, self.pristine))
                if not _same_bytes(v, p)]
