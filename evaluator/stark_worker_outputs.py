"""stark_worker_outputs -- a worker's outputs: their description with the
integrity facts the referee checks (FETCH), the candidate's bytes written
into the output window, and, in the reference worker, the comparison with
its own outputs (COMPARE) and its float64 second opinion.

In the candidate's worker all of this can be replaced by the candidate:
its checks on outputs (plain tensors, no aliasing of inputs, no late
writes) catch honest mistakes and lazy tricks.  What the referee trusts is
the reference worker's side: the bytes it reads from the output window,
its comparison, and the digests that tie those bytes to the moment the
call returned.
"""

import copy
import json
import math
import os
import time

import torch

import stark_cuda
import stark_fused
import stark_rules as R
import stark_tensors as T
import stark_wire as W

# Device memory the reference's worker leaves free beside a device window
# it makes (cmd_dwindow): the window is an extra, never a reason to fail.
DWINDOW_ROOM = 1 << 30
RECHECK_BYTES = 2 << 30      # cap on the float64 outputs of a recheck (_exact)
RECHECK_IN_BYTES = 4 << 30   # and on its float64 inputs
JITTER_SEED = 0x5EED_F64      # the jittered float64 run's noise (stark_rules.jitter_)


def storage_span(t):
    """(address, bytes) of the storage under a tensor, on which outputs are
    checked for aliasing inputs."""
    try:
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        return st.data_ptr(), st.nbytes()
    except Exception:
        return t.data_ptr(), t.numel() * t.element_size()


def _overlaps(a, b):
    (pa, na), (pb, nb) = a, b
    return na > 0 and nb > 0 and pa < pb + nb and pb < pa + na


def _same_bytes(a, b):
    """Bitwise equality (NaN payloads included) of two tensors; b may be
    a's weighted digest (stark_tensors.weighted_digest) as it was, kept
    instead of a copy of a large tensor."""
    if type(b) is int:
        try:
            return T.weighted_digest(a) == b
        except Exception:
            return False
    try:
        if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
            return False
        if a.numel() == 0:
            return True
        fa = a.detach().contiguous().reshape(-1).view(torch.uint8)
        fb = b.detach().contiguous().reshape(-1).view(torch.uint8)
        return bool(torch.equal(fa, fb))
    except Exception:
        return False


def _magnitude(t):
    """The mean absolute value of a floating tensor (0 for others, for empty
    ones and where it is not finite): the scale of an output, by which the
    referee widens the absolute tolerance on scaled inputs.  Summed piece
    by piece, so a large output needs no copy of itself."""
    if not t.is_floating_point() or t.numel() == 0:
        return 0.0
    flat = t.detach().reshape(-1)
    total = torch.zeros((), dtype=torch.float64, device=flat.device)
    for off in range(0, flat.numel(), T.COMPARE_CHUNK):
        total += flat[off:off + T.COMPARE_CHUNK].abs().sum(dtype=torch.float64)
    m = float(total) / flat.numel()     # one reading of the device
    return m if m == m and m not in (float("inf"), float("-inf")) else 0.0


class Outputs:
    """The part of Worker that serves FETCH and COMPARE."""

    def _describe_outputs(self, light=False):
        """(header, tensors) of this worker's outputs.  With `light` (the
        reference's timed pairs: a "light" GEN), no integrity facts but
        aliasing and no magnitudes: the referee keeps the reference's facts
        from its earlier calls (stark_referee_data.fetch_ref), and on an
        output of 2 GiB the digests and sums took 30-35 ms a timed pair."""
        out = self.outputs
        if isinstance(out, (tuple, list)):
            items, kind = list(out), "seq"
        else:
            items, kind = [out], "tensor"
        if len(items) > W.MAX_TENSORS:
            return {"kind": "bad", "detail": "%d outputs (at most %d)"
                    % (len(items), W.MAX_TENSORS)}, []
        descs, tensors, facts = [], [], {}
        for i, t in enumerate(items):
            if not isinstance(t, torch.Tensor):
                return {"kind": "bad", "index": i,
                        "detail": "output %d is %s, not a tensor"
                        % (i, type(t).__name__)}, []
            if type(t) is not torch.Tensor:
                return {"kind": "reject", "check": "tensor subclass",
                        "detail": "output %d is a %s, not a plain torch.Tensor"
                        % (i, type(t).__qualname__)}, []
            if t.layout is not torch.strided:
                return {"kind": "bad", "index": i,
                        "detail": "output %d has layout %s" % (i, t.layout)}, []
            if t.dtype not in W.DTYPE_NAMES:
                return {"kind": "bad", "index": i,
                        "detail": "output %d has unsupported dtype %s" % (i, t.dtype)}, []
            span = storage_span(t)
            for j, sp in enumerate(self.in_spans):
                if _overlaps(span, sp):
                    facts.setdefault("alias", []).append([i, j])
            snap = self.snapshot[i] if self.snapshot and i < len(self.snapshot) else None
            if snap is not None and not _same_bytes(t, snap):
                facts["late_write"] = True
                if isinstance(snap, torch.Tensor):
                    t = snap    # what the caller got when forward returned
            d = W.describe_tensor(t)
            d["device"] = str(t.device)
            descs.append(d)
            tensors.append(t.detach())
        if self.role == "ref" and sum(t.numel() * t.element_size()
                                      for t in tensors) > W.OUTPUT_MAX:
            return {"kind": "bad", "detail": "the outputs are larger than %d GiB"
                    % (W.OUTPUT_MAX >> 30)}, []
        mutated = [] if light else [j for j, (x, p) in enumerate(zip(
            [x for x in self.inputs if isinstance(x, torch.Tensor)], self.pristine))
            if p is not None and not _same_bytes(x, p)]
        if mutated:
            facts["mutated"] = mutated
        header = {"kind": kind, "items": descs, "facts": facts}
        if self.role == "ref" and not light:
            header["mag"] = [_magnitude(t) for t in tensors]
        return header, tensors

    def cmd_fetch(self, args):
        """The reference only describes its outputs and keeps them for
        COMPARE; the candidate also writes the first chunk of their bytes
        into the output window, whose capacity the referee gives
        (args["window"]), and says how many it wrote; PUT writes the
        next ones (stark_wire: outputs larger than the window stream
        through it).  After a "light" GEN the reference's says nothing of
        late writes, mutated inputs and magnitudes (_describe_outputs)."""
        header, tensors = self._describe_outputs(self.light)
        if header["kind"] in ("bad", "reject"):
            self.chan.send_json(W.OUT_HEADER, header)
            return
        if self.role == "ref":
            self.kept = tensors
            if args.get("inwin") is True:
                # The candidate's delivered inputs, as its call left them
                # (stark_worker_delivery; on a GPU, stark_worker_ipc).
                header["facts"]["cand_mutated"] = (self.ipc_mutated() if self.ipc_ready
                                                   else self.window_mutated())
            self.chan.send_json(W.OUT_HEADER, header)
            return
        self.chan.send_json(W.OUT_HEADER, header)
        self.outputs = None
        cap = args.get("window")
        # "slot": chunks of this size in turn at offsets 0 and slot (the
        # reference compares one while this worker writes the other).
        slot = args.get("slot")
        if type(slot) is int and type(cap) is int and W.WINDOW_ALIGN <= slot <= cap // 2:
            cap = slot
        specs = [(t.dtype, tuple(t.shape), t.numel() * t.element_size()) for t in tensors]
        offs, total = W.window_layout(specs)
        if self.window is None or type(cap) is not int or cap < W.WINDOW_ALIGN:
            self.sending = None
            self.chan.send_json(W.OUT_WRITTEN, {"bytes": 0})
            return
        # Each output's bytes in logical order (a copy only of outputs that
        # are not contiguous).
        self.sending = {"flat": [t.contiguous().reshape(-1).view(torch.uint8) if t.numel() else None
                                 for t in tensors],
                        "specs": specs, "offs": offs, "total": total,
                        "cap": cap // W.WINDOW_ALIGN * W.WINDOW_ALIGN}
        del tensors
        self.chan.send_json(W.OUT_WRITTEN, {"bytes": self._write_chunk(0)})

    def cmd_dwindow(self, payload, fd):
        """The output window on the device (stark_wire.DeviceWindow).  The
        reference makes it ({"size": n}: replies OK {"size"} with its
        descriptor), then uses it ({"use": true}) or lets it go ({"drop":
        true}); the candidate maps the descriptor it is sent with {"size":
        n} and writes its outputs there from then on.  On any failure it
        replies ERR and the host window stays."""
        try:
            args = json.loads(payload) if payload else {}
            if not isinstance(args, dict) or self.device.type != "cuda":
                raise ValueError("no device window here")
            dev = self.device.index if self.device.index is not None else \
                torch.cuda.current_device()
            n = args.get("size")
            if self.role == "ref" and args.get("use") is True and self.dwin_made is not None:
                self.window, self.dwin_made = W.DeviceWindow(self.dwin_made, False), None
            elif self.role == "ref" and args.get("drop") is True:
                if self.dwin_made is not None:
                    self.dwin_made.close()
                self.dwin_made = None
            elif self.role == "ref" and type(n) is int and 0 < n <= W.OUTPUT_MAX:
                free = torch.cuda.mem_get_info(dev)[0]
                if free < n + DWINDOW_ROOM:
                    raise MemoryError("%d MiB free on the device, %d MiB wanted for the "
                                      "window and %d MiB of room" % (
                                          free >> 20, n >> 20, DWINDOW_ROOM >> 20))
                if self.dwin_made is not None:
                    self.dwin_made.close()
                self.dwin_made = stark_cuda.SharedMemory.create(n, dev)
                out = self.dwin_made.export()
                try:
                    self.chan.send_fd(W.OK, {"size": self.dwin_made.size}, out)
                finally:
                    os.close(out)
                return
            elif self.role == "cand" and type(n) is int and 0 < n <= W.OUTPUT_MAX and fd >= 0:
                mem = stark_cuda.SharedMemory.open(fd, n, dev, True)
                self.window = W.DeviceWindow(mem, True)
            else:
                raise ValueError("a device window request this worker cannot serve")
            self.chan.send_json(W.OK, {})
        except W.WorkerGone:
            raise
        except BaseException as e:
            self.chan.send_json(W.ERR, {"type": type(e).__name__, "phase": "window",
                                        "message": str(e)[:500]})
        finally:
            if fd >= 0:
                os.close(fd)

    def cmd_put(self, args):
        """Candidate only: the chunk of its outputs' bytes from args["off"]
        written into the output window at args["at"] (0, or the chunk's
        size: the second slot); replies how many bytes."""
        snd = self.sending
        off, base = args.get("off"), args.get("at", 0)
        if (snd is None or type(off) is not int or off < 0 or off >= snd["total"] or
                off % W.WINDOW_ALIGN or base not in (0, snd["cap"])):
            self.chan.send_json(W.OUT_WRITTEN, {"bytes": 0})
            return
        self.chan.send_json(W.OUT_WRITTEN, {"bytes": self._write_chunk(off, base)})

    def _write_chunk(self, start, base=0):
        """The stream's bytes [start, start + capacity) into the window at
        offset `base`; returns how many were written."""
        snd = self.sending
        n = min(snd["total"] - start, snd["cap"])
        if n <= 0:
            return 0
        dst = self.window.tensors([(torch.uint8, (n,), n)], [base], base + n)[0]
        for i, lo, hi in W.chunk_parts(snd["specs"], snd["offs"], start, start + n):
            at = snd["offs"][i] + lo - start
            dst[at:at + hi - lo].copy_(snd["flat"][i][lo:hi])
        if self.window.on_device:
            # Copies on the device are queued: done before the reply says
            # so, since the reference reads the window on streams of its own.
            torch.cuda.synchronize(dst.device)
        del dst
        return n

    def cmd_compare(self, header):
        """Reference only: reads a chunk of the candidate's output bytes from
        the output window (the referee's header checks passed, the
        candidate is stopped), moves it to this worker's device and judges
        it against the outputs kept at FETCH (_compare_piece).  The first
        COMPARE of a call carries the header (items, tolerances, digests and
        the rules' terms: _compare_begin) and the chunk at offset 0; later
        ones {"off", "len"}.  Replies {"next": offset} while it needs more,
        else the results, one per output up to the first that fails (the
        message names only that one; KernelBench's comparison judges every
        output): a stream stops once that output is complete."""
        if "items" in header:
            self._compare_begin(header)
        st = self.cmp
        if st is None:
            raise ValueError("a chunk to compare, but no comparison begun")
        off, n, base = header.get("off", 0), header.get("len"), header.get("at", 0)
        if (type(off) is not int or type(n) is not int or off != st["next"] or n < 0 or
                n != min(st["total"] - off, n) or (n == 0 and st["total"] > off)):
            raise ValueError("chunk [%r, +%r) out of order (expected offset %d of %d)"
                             % (off, n, st["next"], st["total"]))
        if type(base) is not int or base < 0 or base % W.WINDOW_ALIGN:
            raise ValueError("chunk at window offset %r" % (base,))
        t0 = time.monotonic()
        copy_s = 0.0
        if n:
            src = self.window.tensors([(torch.uint8, (n,), n)], [base], base + n)[0]
            for i, lo, hi in W.chunk_parts(st["specs"], st["offs"], off, off + n):
                at = st["offs"][i] + lo - off
                piece = src[at:at + hi - lo]
                # On a GPU, one copy onto the device, straight from the
                # (registered) window, which the digest and the comparison
                # both read: the candidate, which may be running (writing
                # the next chunk into the other slot), cannot show them
                # different bytes.  On the CPU the window is compared in
                # place, the candidate stopped.
                # A device window's piece is copied out of it first, for
                # the same reason.
                want = st["want"][i]
                tc = time.monotonic()
                if piece.device != want.device:
                    g = piece.to(want.device)
                elif self.window.on_device:
                    g = piece.clone()
                    torch.cuda.synchronize(g.device)
                else:
                    g = piece
                copy_s += time.monotonic() - tc
                self._compare_piece(i, g, lo, hi)
                del g, piece
            del src
        st["next"] = off + n
        done = st["next"] >= st["total"]
        # Stop once an output that failed is complete: results up to it.
        results = []
        for i, (_, _, nb) in enumerate(st["specs"]):
            if st["offs"][i] + nb > st["next"] and nb:
                break
            results.append(self._compare_result(i))
            if st["kb"] is None and (results[-1]["nbad"] or results[-1].get("scale_bad")):
                done = True
                break
        # The chunk's time in this worker (the referee's env compare_ms):
        # the copy out of the window, the rest (the digest, the rules).
        work = [round(copy_s * 1e3, 3), round((time.monotonic() - t0 - copy_s) * 1e3, 3)]
        if not done:
            return {"next": st["next"], "work_ms": work}
        reply = self._compare_end(results)
        reply["work_ms"] = work
        return reply

    def _compare_begin(self, header):
        """A call's comparison begins.  Header keys (the referee's):
          items, tol  the outputs and their (atol, rtol);
          digest   the candidate's claimed digests of its outputs;
          recheck  slack of the float64 second opinion (0: none);
          scale    per output, the scale rule's fraction (stark_rules);
          scale_slack  the scale rule's second-opinion slack;
          precision    true: precision statistics against the float64 run
                   (and its jittered twin) for every floating output;
                   "probe": the same, where the last GEN centred inputs
                   (stark_rules.centre_inputs) -- a probe whose inputs did
                   not change is not worth the float64 runs;
          kb       [atol, rtol]: KernelBench's torch.allclose only;
          f64      why the float64 runs are skipped (the referee's memory
                   plan: no room for them), where they are."""
        kept = self.kept
        specs = [W.checked_spec(d, "compared output") for d in header["items"]]
        tols = [(float(a), float(r)) for a, r in header["tol"]]
        if kept is None or len(specs) != len(kept) or len(tols) != len(kept):
            raise ValueError("nothing to compare with: %d outputs kept, %d sent"
                             % (len(kept or []), len(specs)))
        for i, ((dt, shape, _), want) in enumerate(zip(specs, kept)):
            if dt != want.dtype or shape != tuple(want.shape):
                raise ValueError("output %d sent as %s %s, kept as %s %s"
                                 % (i, dt, list(shape), want.dtype, list(want.shape)))
        if self.window is None:
            raise ValueError("this worker has no output window")
        offs, total = W.window_layout(specs)

        def num(v):
            return float(v) if type(v) in (int, float) and v > 0 else 0.0
        fracs = header.get("scale") if isinstance(header.get("scale"), list) else []
        kb = header.get("kb")
        prec = header.get("precision")
        self.cmp = {
            "specs": specs, "offs": offs, "total": total, "tols": tols, "next": 0,
            "want": [w.detach().reshape(-1) for w in kept],
            "shape": [tuple(w.shape) for w in kept],
            "slack": num(header.get("recheck")),
            "fracs": [num(fracs[i]) if i < len(fracs) else 0.0 for i in range(len(kept))],
            "sslack": num(header.get("scale_slack")),
            "kb": ([float(kb[0]), float(kb[1])]
                   if isinstance(kb, list) and len(kb) == 2 and
                   all(type(x) in (int, float) for x in kb) else None),
            "precision": prec if prec in (True, "probe") else None,
            "no_f64": (header["f64"][:400] if isinstance(header.get("f64"), str)
                       else None),
            "claimed": header.get("digest"),
            "digest": [0] * len(kept), "acc": [None] * len(kept), "note": None}
        # Where DEVICE_INFO's prepare did not ready the fused comparison,
        # before this worker's first comparison of outputs large enough to
        # repay its self-test.
        if total >= stark_fused.FUSED_MIN:
            self.cmp["note"] = self.fused_ready()

    def fused_ready(self):
        """The fused comparison (stark_fused), unless torch's is asked for:
        made beside the loading (stark_fused.prepare), tried on the device
        here once (stark_fused.enable).  Returns its note (how comparisons
        run) the one time it is readied, else None."""
        if not (self.fused_note is None and self.cfg.get("compare_kernel") is True and
                self.role == "ref" and self.device.type == "cuda"):
            return None
        self.fused_note = stark_fused.enable(self.device, self.fused_prep)
        self.fused_prep = None
        return self.fused_note

    def _compare_piece(self, i, got, lo, hi):
        """The rules on a piece of output i (its bytes [lo, hi), got on this
        worker's device).  KernelBench's comparison: torch.allclose, the
        pieces' results merged (stark_rules.kb_merge).  Stark's:
        compare_tensor against the reference's output and the scale rule
        (stark_rules.scale_bad), and where either fails, the float64
        second opinion (_recheck) on the same piece; the piece's result is
        added to the output's (merge_results), its digest too.  An output
        larger than the window is judged by the scale rule piece by piece
        (each piece is the window's size, 256 MiB by default, but the
        last), and its precision statistics come from its first piece."""
        st = self.cmp
        dt, _, nb = st["specs"][i]
        st["digest"][i] = T.digest_add(st["digest"][i], T.digest_part(got, nb))
        esize = nb // max(math.prod(st["shape"][i]), 1)
        e0, e1 = lo // esize, hi // esize
        g = got.view(dt)
        want = st["want"][i][e0:e1]
        atol, rtol = st["tols"][i]
        if st["kb"] is not None:
            acc = st["acc"][i] or {"kb": None, "error": None}
            st["acc"][i] = acc
            if acc["error"] is None:
                try:
                    acc["kb"] = R.kb_merge(acc["kb"], R.kb_allclose(g, want, *st["kb"]), e0)
                except Exception as e:      # what KernelBench meets as an exception
                    acc["error"] = W.exc_text(e)
            return
        acc = st["acc"][i] or {"plain": None, "final": None, "rechecked": False,
                               "re_nbad": 0, "re_max_abs": 0.0, "ref_err": 0.0,
                               "re_error": None, "scale": None, "precision": None,
                               "ill": False}
        st["acc"][i] = acc
        frac = st["fracs"][i]
        r = T.compare_tensor(g, want, atol, rtol)
        r["scale_bad"] = R.scale_bad(r, frac)
        acc["plain"] = T.merge_results(acc["plain"], r, e0)
        piece = r
        if (r["nbad"] or r["scale_bad"]) and st["slack"] and want.is_floating_point():
            rr = self._recheck(i, g, want, atol, rtol, st["slack"], e0, e1, r, frac)
            if "error" in rr:
                acc["re_error"] = rr["error"]
            else:
                acc["rechecked"] = True
                acc["re_nbad"] += rr["nbad"]
                acc["re_max_abs"] = max(acc["re_max_abs"], rr["max_abs"])
                acc["ref_err"] = rr["ref_err"]
                acc["ill"] = acc["ill"] or bool(rr.get("ill"))
                if rr.get("scale") is not None:
                    acc["scale"] = rr["scale"]
                if not rr["nbad"] and not rr["scale_bad"]:
                    piece = rr
        acc["final"] = T.merge_results(acc["final"], piece, e0)
        if st["precision"] and lo == 0 and want.is_floating_point():
            if st["precision"] == "probe" and not self.centred:
                acc["precision"] = {"error": "nothing to centre: every floating input already "
                                    "holds negative values (the first trial judges alone)"}
            else:
                acc["precision"] = self._precision(i, g, want, e0, e1)

    def _compare_result(self, i):
        """Output i's result once all its bytes were compared: the plain
        comparison's statistics over the whole output where it fails (with
        what the second opinion found), else the pieces' as judged."""
        acc = self.cmp["acc"][i]
        if acc is None:         # no bytes: an empty output
            if self.cmp["kb"] is not None:
                return {"close": True, "nbad": 0, "first": None, "max_diff": 0.0,
                        "avg_diff": 0.0, "used": 0.0}
            return {"nbad": 0, "max_abs": 0.0, "max_rel": 0.0, "first": None,
                    "scale_bad": False}
        if self.cmp["kb"] is not None:
            return {"error": acc["error"]} if acc["error"] is not None else acc["kb"]
        info = None
        if acc["re_error"] is not None:
            info = {"error": acc["re_error"]}
        elif acc["rechecked"]:
            info = {"ref_err": acc["ref_err"], "nbad": acc["re_nbad"],
                    "max_abs": acc["re_max_abs"]}
            if acc["ill"]:
                info["ill"] = True
            if acc["scale"] is not None:
                info["scale"] = acc["scale"]
        final = acc["final"]
        failed = final["nbad"] or final.get("scale_bad")
        r = dict(acc["plain"] if failed else final)
        r["scale_bad"] = bool(final.get("scale_bad"))
        if info is not None and (failed or "error" not in info):
            r["recheck"] = info
        if acc["precision"] is not None:
            r["precision"] = acc["precision"]
        return r

    def _compare_end(self, results):
        st = self.cmp
        reply = {}
        claimed = st["claimed"]
        if claimed is not None:
            reply["digest_ok"] = (isinstance(claimed, list) and len(claimed) == len(st["want"]) and
                                  all(type(c) is int and c == d for c, d in
                                      zip(claimed[:len(results)], st["digest"])))
        self.cmp = None
        self.kept = None
        self.exact = None
        self.exact_j = None
        self.outputs = None
        reply["results"] = results
        if st["note"]:
            reply["kernel"] = st["note"]
        if self.window is not None and self.window.pin_error:
            reply["window"] = self.window.pin_error
        return reply

    def _precision(self, i, got, want, e0, e1):
        """Output i's precision statistics (stark_rules.precision_stats) over
        its elements [e0, e1), or {"error": why} where the float64 runs
        cannot serve."""
        exact = self._exact()
        if isinstance(exact, str):
            return {"error": exact}
        if not self._scaled() and not (self.gen_args or {}).get("centre"):
            # The problem's own inputs: whether the float64 run is the same
            # computation, for the scaled calls' rechecks (_recheck).
            err = self._ref_error(i, exact, self.cmp["tols"][i][0])
            self.f64_rounding[i] = not isinstance(err, dict)
        jit = self._exact(jittered=True)
        x = exact[i].reshape(-1)[e0:e1]
        xj = None if isinstance(jit, str) else jit[i].reshape(-1)[e0:e1]
        st = R.precision_stats(got, want, x, xj)
        if isinstance(jit, str):
            st["in_error"] = jit
        return st

    def _recheck(self, i, got, want, atol, rtol, slack, e0, e1, first, frac=0.0):
        """A piece (elements [e0, e1)) of output i failed the comparison
        with the reference or the scale rule: the second opinion of the
        reference's float64 run (stark_tensors.compare_exact, with the
        reference's own error over the whole output; stark_rules.scale_exact
        for the scale rule).  An honest kernel can be closer to the exact
        result than the reference is: a variance as E[x^2] - E[x]^2 in
        float32 loses three digits that a two-pass kernel keeps, and a
        running sum that crosses zero has lost the absolute precision of
        its largest terms.  Returns the recheck's result (compare_tensor's
        with ref_err, scale_bad and scale) or {"error": why}."""
        exact = self._exact()
        if isinstance(exact, str):
            return {"error": exact}
        x = exact[i].reshape(-1)[e0:e1]
        ill = None
        if first["nbad"]:
            err = self._ref_error(i, exact, atol)
            if isinstance(err, dict) and self._scaled() and self.f64_rounding.get(i):
                # Beyond rounding here, within it on the problem's own
                # inputs: the problem's conditioning at scaled inputs
                # (stark_tensors.RECHECK_MAX_REL).
                ill = self._ref_error(i, exact, atol, capped=False)
                if not isinstance(ill, dict):
                    err = ill
            if isinstance(err, dict):
                return err
            r = T.compare_exact(got, want, x, atol, rtol, slack, err=err)
            if "error" in r:
                return r
            if ill is not None:
                r["ill"] = True
        else:
            r = dict(first)
            r["ref_err"] = float("nan")
        sc = (R.scale_exact(got, want, x, frac, self.cmp["sslack"]) if frac
              else {"bad": False})
        r["scale_bad"] = sc["bad"]
        r["scale"] = sc
        return r

    def _ref_error(self, i, exact, atol, capped=True):
        """Output i's reference error against its float64 run, `exact`
        (stark_tensors.exact_error), once a call for each `capped`: an
        output compared in pieces reuses it."""
        errs = self.cmp.setdefault("ref_err", {})
        if (i, capped) not in errs:
            errs[i, capped] = T.exact_error(self.cmp["want"][i], exact[i], atol, capped=capped)
        return errs[i, capped]

    def _scaled(self):
        """Whether this call's inputs came from the variant distribution."""
        return bool((self.gen_args or {}).get("variant"))

    def _exact(self, jittered=False):
        """The reference's outputs of this call computed in float64: a copy
        of the model with floating parameters and buffers in float64 (made
        once, from the model as it is now), run on the inputs as they were
        before the call (the pristine copies, or where the inputs were too
        large to copy, the inputs made again from the call's seed).  With
        `jittered`, the same
        run with every floating input, parameter and buffer moved by one
        float32 rounding (stark_rules.jitter_, from a fixed seed), the
        parameters restored after.  Cached for the call.  Returns a list of
        tensors, or why there is none."""
        cached = self.exact_j if jittered else self.exact
        if cached is not None:
            return cached
        with self.ours_oom():
            # The second opinion's own out-of-memory errors, caught here
            # or by a library inside the float64 run, are the evaluator's
            # (mem_facts' "ooms").
            return self._exact_run(jittered)

    def _exact_run(self, jittered):
        why = None
        try:
            if self.cmp and self.cmp.get("no_f64"):
                why = self.cmp["no_f64"]
            elif not isinstance(self.model, torch.nn.Module):
                why = "the reference model is not a torch.nn.Module"
            elif len(self.pristine) != sum(isinstance(x, torch.Tensor) for x in self.inputs):
                why = "the call's inputs are not all kept"
            elif sum(t.numel() for t in self.kept or []) * 8 > RECHECK_BYTES:
                why = "the float64 outputs would pass %d GiB" % (RECHECK_BYTES >> 30)
            elif sum(x.numel() for x in self.in_bufs) * 8 > RECHECK_IN_BYTES:
                why = "the float64 inputs would pass %d GiB" % (RECHECK_IN_BYTES >> 30)
            else:
                if self.model64 is None:
                    self.model64 = copy.deepcopy(self.model).to(torch.float64)
                gen = None
                if jittered:
                    gen = torch.Generator(device=self.device)
                    gen.manual_seed(JITTER_SEED)
                before = self.pristine
                if not all(isinstance(p, torch.Tensor) for p in before):
                    # Large inputs were not copied (check_copy_bytes): made
                    # again from the call's seed.
                    before = [x for x in self.regenerate_inputs() if isinstance(x, torch.Tensor)]
                args = T.with_tensors(self.inputs, [
                    (R.jitter_(x.to(device=self.device, dtype=torch.float64), gen)
                     if gen is not None else x.to(device=self.device, dtype=torch.float64))
                    if x.is_floating_point() else x.to(self.device)
                    for x in before])
                del before
                try:
                    if gen is not None:
                        self._model64_jitter(gen)
                    with torch.no_grad():
                        out = self.model64(*args)
                finally:
                    if gen is not None:
                        self._model64_restore()
                del args
                items = list(out) if isinstance(out, (tuple, list)) else [out]
                if not all(isinstance(t, torch.Tensor) for t in items):
                    why = "the float64 run returned something other than tensors"
                elif len(items) != len(self.kept or []):
                    why = "the float64 run returned %d outputs, not %d" % (
                        len(items), len(self.kept or []))
                else:
                    items = [t.detach() for t in items]
                    if jittered:
                        self.exact_j = items
                    else:
                        self.exact = items
                    return items
        except Exception as e:          # any failure: no recheck, the first verdict stands
            why = "the float64 run failed: " + W.exc_text(e)
        if jittered:
            self.exact_j = why
        else:
            self.exact = why
        return why

    def _model64_jitter(self, gen):
        with torch.no_grad():
            for t in self.model64.state_dict().values():
                if isinstance(t, torch.Tensor) and t.dtype == torch.float64:
                    R.jitter_(t, gen)

    def _model64_restore(self):
        """The float64 copy's parameters and buffers back to the model's."""
        with torch.no_grad():
            src = self.model.state_dict()
            for k, t in self.model64.state_dict().items():
                v = src.get(k)
                if (isinstance(t, torch.Tensor) and t.dtype == torch.float64 and
                        isinstance(v, torch.Tensor) and v.shape == t.shape):
                    t.copy_(v.to(torch.float64))
