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

import torch

import stark_rules as R
import stark_wire as W

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
    """Bitwise equality (NaN payloads included) of two tensors."""
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
    referee widens the absolute tolerance on scaled inputs."""
    if not t.is_floating_point() or t.numel() == 0:
        return 0.0
    m = float(t.detach().abs().float().mean())
    return m if m == m and m not in (float("inf"), float("-inf")) else 0.0


class Outputs:
    """The part of Worker that serves FETCH and COMPARE."""

    def _describe_outputs(self):
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
                t = snap        # what the caller got when forward returned
            d = W.describe_tensor(t)
            d["device"] = str(t.device)
            descs.append(d)
            tensors.append(t.detach())
        if self.role == "ref" and sum(t.numel() * t.element_size()
                                      for t in tensors) > W.OUTPUT_MAX:
            return {"kind": "bad", "detail": "the outputs are larger than %d GiB"
                    % (W.OUTPUT_MAX >> 30)}, []
        mutated = [j for j, (x, p) in enumerate(zip(
            [x for x in self.inputs if isinstance(x, torch.Tensor)], self.pristine))
            if not _same_bytes(x, p)]
        if mutated:
            facts["mutated"] = mutated
        header = {"kind": kind, "items": descs, "facts": facts}
        if self.role == "ref":
            header["mag"] = [_magnitude(t) for t in tensors]
        return header, tensors

    def cmd_fetch(self, args):
        """The reference only describes its outputs and keeps them for
        COMPARE; the candidate also writes their bytes into the output
        window, when they fit the size the referee made it (args["window"]:
        outputs that do not fit fail the referee's checks anyway), and
        says how many it wrote."""
        header, tensors = self._describe_outputs()
        if header["kind"] in ("bad", "reject"):
            self.chan.send_json(W.OUT_HEADER, header)
            return
        if self.role == "ref":
            self.kept = tensors
            self.chan.send_json(W.OUT_HEADER, header)
            return
        self.chan.send_json(W.OUT_HEADER, header)
        self.outputs = None
        size = args.get("window")
        specs = [(t.dtype, tuple(t.shape), t.numel() * t.element_size()) for t in tensors]
        offs, total = W.window_layout(specs)
        if self.window is None or type(size) is not int or total > size:
            self.chan.send_json(W.OUT_WRITTEN, {"bytes": 0})
            return
        views = self.window.tensors(specs, offs, total)
        for v, t in zip(views, tensors):
            v.copy_(t)
        del views
        self.chan.send_json(W.OUT_WRITTEN, {"bytes": total})

    def cmd_compare(self, header):
        """Reference only: reads the candidate's output bytes from the output
        window (the referee's header checks passed, the candidate is
        stopped), moves them to this worker's device and compares them with
        the outputs kept at FETCH.  Stops at the first output with
        mismatches, as the message names only that one."""
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
        views = self.window.tensors(specs, offs, total)
        # On a GPU, one copy each, straight from the (registered) window;
        # on the CPU, the views are compared in place.
        got = [v.to(want.device) if v.device != want.device else v
               for v, want in zip(views, kept)]
        del views
        reply = {}
        claimed = header.get("digest")
        if claimed is not None:
            reply["digest_ok"] = (isinstance(claimed, list) and len(claimed) == len(got) and
                                  all(type(c) is int and c == W.output_digest(g)
                                      for c, g in zip(claimed, got)))
        results = self._judge(got, kept, tols, header)
        self.kept = None
        self.exact = None
        self.exact_j = None
        self.outputs = None
        del got
        reply["results"] = results
        if self.window is not None and self.window.pin_error:
            reply["window"] = self.window.pin_error
        return reply

    def _judge(self, got, kept, tols, header):
        """The per-output results of COMPARE.  Header keys (the referee's):
          recheck  slack of the float64 second opinion (0: none);
          scale    per output, the scale rule's fraction (stark_rules);
          scale_slack  the scale rule's second-opinion slack;
          precision    true: precision statistics against the float64 run
                   (and its jittered twin) for every floating output;
                   "probe": the same, where the last GEN centred inputs
                   (stark_rules.centre_inputs) -- a probe whose inputs
                   did not change is not worth the float64 runs;
          kb       [atol, rtol]: KernelBench's torch.allclose only.
        Stops at the first output that fails, as the message names only
        that one."""
        def num(v):
            return float(v) if type(v) in (int, float) and v > 0 else 0.0
        slack = num(header.get("recheck"))
        fracs = header.get("scale") if isinstance(header.get("scale"), list) else []
        sslack = num(header.get("scale_slack"))
        kb = header.get("kb")
        results = []
        for i, (g, want, (atol, rtol)) in enumerate(zip(got, kept, tols)):
            want = want.detach()
            if isinstance(kb, list) and len(kb) == 2:
                try:
                    results.append(R.kb_allclose(g, want, float(kb[0]), float(kb[1])))
                except Exception as e:      # what KernelBench meets as an exception
                    results.append({"error": W.exc_text(e)})
                continue
            r = W.compare_tensor(g, want, atol, rtol)
            frac = num(fracs[i]) if i < len(fracs) else 0.0
            r["scale_bad"] = R.scale_bad(r, frac)
            if (r["nbad"] or r["scale_bad"]) and slack and want.is_floating_point():
                r = self._recheck(i, g, want, atol, rtol, slack, r, frac, sslack)
            prec = header.get("precision")
            if prec == "probe" and not self.centred:
                r["precision"] = {"error": "nothing to centre: every floating input already "
                                  "holds negative values (the first trial judges alone)"}
            elif prec in (True, "probe") and want.is_floating_point():
                r["precision"] = self._precision(i, g, want)
            results.append(r)
            if r["nbad"] or r["scale_bad"]:
                break
        return results

    def _precision(self, i, got, want):
        """Output i's precision statistics (stark_rules.precision_stats), or
        {"error": why} where the float64 runs cannot serve."""
        exact = self._exact()
        if isinstance(exact, str):
            return {"error": exact}
        jit = self._exact(jittered=True)
        st = R.precision_stats(got, want, exact[i], None if isinstance(jit, str) else jit[i])
        if isinstance(jit, str):
            st["in_error"] = jit
        return st

    def _recheck(self, i, got, want, atol, rtol, slack, first, frac=0.0, sslack=0.0):
        """Output i failed the comparison with the reference: the second
        opinion of the reference's float64 run (stark_wire.compare_exact).
        An honest kernel can be closer to the exact result than the
        reference is: a variance as E[x^2] - E[x]^2 in float32 loses three
        digits that a two-pass kernel keeps, and a running sum that crosses
        zero has lost the absolute precision of its largest terms.  Returns
        the recheck's result when it passes, else the first one; either
        carries "recheck" (what the second opinion found)."""
        exact = self._exact()
        if isinstance(exact, str):
            first["recheck"] = {"error": exact}
            return first
        if first["nbad"]:
            r = W.compare_exact(got, want, exact[i], atol, rtol, slack)
            if "error" in r:
                first["recheck"] = {"error": r["error"]}
                return first
        else:
            r = dict(first)
            r["ref_err"] = float("nan")
        sc = R.scale_exact(got, want, exact[i], frac, sslack) if frac else {"bad": False}
        r["scale_bad"] = sc["bad"]
        info = {"ref_err": r["ref_err"], "nbad": r["nbad"], "max_abs": r["max_abs"],
                "scale": sc}
        if r["nbad"] or r["scale_bad"]:
            first["recheck"] = info
            return first
        r["recheck"] = info
        return r

    def _exact(self, jittered=False):
        """The reference's outputs of this call computed in float64: a copy
        of the model with floating parameters and buffers in float64 (made
        once, from the model as it is now), run on the inputs as they were
        before the call (the pristine copies).  With `jittered`, the same
        run with every floating input, parameter and buffer moved by one
        float32 rounding (stark_rules.jitter_, from a fixed seed), the
        parameters restored after.  Cached for the call.  Returns a list of
        tensors, or why there is none."""
        cached = self.exact_j if jittered else self.exact
        if cached is not None:
            return cached
        why = None
        try:
            if not isinstance(self.model, torch.nn.Module):
                why = "the reference model is not a torch.nn.Module"
            elif len(self.pristine) != sum(isinstance(x, torch.Tensor) for x in self.inputs):
                why = "the call's inputs are not all kept"
            elif sum(t.numel() for t in self.kept or []) * 8 > RECHECK_BYTES:
                why = "the float64 outputs would pass %d GiB" % (RECHECK_BYTES >> 30)
            elif sum(x.numel() for x in self.pristine) * 8 > RECHECK_IN_BYTES:
                why = "the float64 inputs would pass %d GiB" % (RECHECK_IN_BYTES >> 30)
            else:
                if self.model64 is None:
                    self.model64 = copy.deepcopy(self.model).to(torch.float64)
                gen = None
                if jittered:
                    gen = torch.Generator(device=self.device)
                    gen.manual_seed(JITTER_SEED)
                args = W.with_tensors(self.inputs, [
                    (R.jitter_(x.to(torch.float64), gen) if gen is not None
                     else x.to(torch.float64)) if x.is_floating_point() else x
                    for x in self.pristine])
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
