"""stark_worker_delivery -- a timed call's inputs, written into the
candidate's worker by the reference's while the candidate is stopped.

A worker that makes its own inputs holds them before its timed call: a
candidate that wraps its worker's GEN could run the model there, untimed,
and return that result from the call (59-63x "correct" on a CPU matmul,
tests/integrity/sqmatmul/r09_precompute_in_gen.py).  So on the CPU, with
STARK_INPUT_DELIVERY=on, the timed pairs deliver both workers' inputs
instead, the same way.  The referee makes two input windows (memfds
sealed against resizing): the reference's, which holds a staging copy
and its own call's inputs, and the candidate's, which the reference's
worker maps too (read-only).  Each worker's input tensors for a timed
call are views of its window.  For each timed pair the candidate's
worker is told only the inputs' description (GEN "delivered": no seed);
the reference's worker makes the call's inputs from the seed and copies
them into the staging copy (GEN "deliver").  Before each timed call the
referee stops the worker, copies the staging bytes into that worker's
input views, and continues it once its clock has started
(stark_referee_delivery): so whatever the candidate does with the values
is timed, and both workers meet their inputs alike, freshly written by
another process.

The candidate's worker keeps no copy of delivered inputs, so the mutation
check is the reference's: at FETCH it compares the candidate's window with
its own copy of the inputs.

A part of stark_worker.Worker (a mixin).
"""

import json
import mmap
import os
import warnings

import torch

import stark_tensors as T
import stark_wire as W
from stark_worker_outputs import _same_bytes, storage_span


def _views(mm, items, base=0):
    """The input tensors of a window mapping for a description's items
    (describe_inputs), at window_layout's offsets from `base`; (tensors,
    offsets)."""
    specs = [W.checked_spec(d, "input") for d in items if d.get("t") == "tensor"]
    offs, total = W.window_layout(specs)
    if base + total > len(mm):
        raise ValueError("the inputs need %d bytes, the window holds %d" % (total, len(mm) - base))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # a read-only mapping
        flat = torch.frombuffer(mm, dtype=torch.uint8)
    views = []
    for (dtype, shape, n), off in zip(specs, offs):
        t = (flat[base + off:base + off + n].view(dtype).view(shape) if n else
             torch.empty(shape, dtype=dtype))
        views.append(t)
    return views, offs


def _value(d):
    """A plain item of a description (describe_inputs) as get_inputs() gave it."""
    if d.get("t") == "list":
        v = list(d.get("v") or [])
        return tuple(v) if d.get("tuple") else v
    return d.get("v")


class Delivery:
    """The input windows: INWIN, the reference's staging copy, the views."""

    inwin = None        # the mapping of this worker's window (mmap)
    inwin_cand = None   # reference: its read-only mapping of the candidate's
    inwin_items = None  # the description the layout was made for
    inwin_views = None  # this worker's input tensors in its window
    inwin_stage = None  # reference: the staging copy's tensors
    inwin_ready = False  # reference: this call's inputs were staged (GEN "deliver")

    def cmd_inwin(self, payload, fd):
        """INWIN {"size": n, "items": [...], "part": "own"|"cand"} with a
        window's descriptor: the worker maps its own window (the
        reference's holds the staging copy, then its views, 2n bytes; the
        candidate's n), or the reference maps the candidate's read-only
        (its mutation check).  On any failure ERR: the referee then times
        without delivery, or rejects a candidate that maps none."""
        try:
            args = json.loads(payload) if payload else {}
            if not isinstance(args, dict):
                raise ValueError("an input window request that is not an object")
            n, items, part = args.get("size"), args.get("items"), args.get("part")
            if (type(n) is not int or not 0 < n <= W.OUTPUT_MAX or not isinstance(items, list)
                    or len(items) > W.MAX_ITEMS or part not in ("own", "cand")
                    or (part == "cand" and self.role != "ref") or self.device.type != "cpu"):
                raise ValueError("an input window request this worker cannot serve")
            own = 2 * n if part == "own" and self.role == "ref" else n
            if fd < 0 or os.fstat(fd).st_size < own:
                raise ValueError("no window of %d bytes was sent" % own)
            if part == "cand":
                self.inwin_cand = mmap.mmap(fd, n, prot=mmap.PROT_READ)
            else:
                mm = mmap.mmap(fd, own)
                if self.role == "ref":
                    self.inwin_stage, _ = _views(mm, items)
                    self.inwin_views, _ = _views(mm, items, n)
                else:
                    self.inwin_views, _ = _views(mm, items)
                self.inwin = mm
            self.inwin_items = items
            self.chan.send_json(W.OK, {})
        except W.WorkerGone:
            raise
        except BaseException as e:
            self.chan.send_json(W.ERR, {"type": type(e).__name__, "phase": "window",
                                        "message": str(e)[:500]})
        finally:
            if fd >= 0:
                os.close(fd)

    def _use_views(self):
        """This call's inputs: the window's views, plain values from the
        description; requires_grad as get_inputs() gave it."""
        items = self.inwin_items
        it = iter(self.inwin_views)
        self.inputs = [next(it) if d.get("t") == "tensor" else _value(d) for d in items]
        for d, x in zip(items, self.inputs):
            if d.get("t") == "tensor" and x.is_floating_point():
                x.requires_grad_(bool(d.get("requires_grad")))
        self.in_spans = [storage_span(x) for x in self.inwin_views]

    def delivered_gen(self):
        """The candidate's GEN "delivered": its inputs are its window's
        tensors, which the referee fills while this process is stopped;
        replies their description.  No copy is kept: the reference checks
        them for mutation."""
        if self.inwin_views is None:
            raise ValueError("GEN delivered without an input window")
        self._use_views()
        self.in_bufs = list(self.inwin_views)
        self.pristine = [None] * len(self.in_bufs)
        desc, _ = T.describe_inputs(self.inputs)
        return {"items": desc["items"], "bytes": sum(x.numel() * x.element_size()
                                                     for x in self.in_bufs),
                "placements": 1, "delivered": True}

    def deliver(self, desc):
        """The reference's GEN "deliver": this call's inputs (placed, the
        variant made) copied into the staging copy, and its own call's
        inputs made its window's views, which the referee fills from it.
        Returns None, or why not: inputs of another description than the
        windows' layout (a problem whose inputs change shape), or inputs of
        which this worker keeps no copy (over check_copy_bytes); the
        referee then has the candidate make its own."""
        self.inwin_ready = False
        if self.inwin is None or self.inwin_cand is None:
            return "no input window"
        if json.dumps(desc["items"], sort_keys=True) != json.dumps(self.inwin_items,
                                                                   sort_keys=True):
            return "the inputs' description differs from the window's"
        if len(self.pristine) != len(self.in_bufs) or not all(
                isinstance(p, torch.Tensor) for p in self.pristine):
            return "inputs over %d MiB are not copied" % (self.check_copy_bytes() >> 20)
        for v, x in zip(self.inwin_stage, self.in_bufs):
            v.copy_(x.detach())
        self._use_views()
        self.inwin_ready = True
        return None

    def window_mutated(self):
        """Which delivered inputs the candidate's call changed: its window
        compared with this worker's copy of the inputs."""
        if self.inwin_cand is None or not self.inwin_ready:
            return []
        views, _ = _views(self.inwin_cand, self.inwin_items)
        return [j for j, (v, p) in enumerate(zip(views, self.pristine))
                if not _same_bytes(v, p)]
