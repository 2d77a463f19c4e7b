"""stark_worker_inputs -- how a worker makes a call's inputs (GEN).

Both workers make the inputs themselves, on their device, from the seed
the referee derived for the call: get_inputs() under that seed (or, for
KernelBench's own verdict, as its harness makes them), with the problem's
module-level sizes overridden where the referee asks (the shape probe),
cast to the requested precision, then copied into the input buffers of
the call's memory placement, where the variant distribution is applied
(stark_tensors.vary_tensors_) or the precision probe's inputs are centred
(stark_rules.centre_).  What the mutation check needs is kept beside
them: a copy of each input, or a weighted digest of each where the inputs
are large (Worker.check_copy_bytes).  The description of the inputs is
what the referee compares between the two workers.

A part of stark_worker.Worker (a mixin): it uses the worker's device,
problem, role and placements (stark_worker_gpu: _slot, _in_slot, _in_pool) and its
memory facts (stark_worker_memory).
"""

import os
import random
import sys

import torch

import stark_rand
import stark_rules as R
import stark_tensors as T
from stark_worker_memory import is_oom
from stark_worker_outputs import storage_span

MODEL64_KEEP_BYTES = 256 << 20   # a float64 copy of the model kept between calls up to this


def _nbytes(model):
    """Bytes of a module's parameters and buffers."""
    return sum(t.numel() * t.element_size() for t in
               list(model.parameters()) + list(model.buffers()))


class Inputs:
    """A call's inputs: GEN, and making them again (regenerate_inputs)."""

    gen_bytes = 0       # the last GEN's inputs' bytes (_gen_pool)

    def _seed_all(self, seed):
        torch.manual_seed(seed)
        random.seed(seed)
        np = sys.modules.get("numpy")
        if np is not None:
            try:
                np.random.seed(seed & 0xFFFFFFFF)
            except Exception:
                pass

    def _generate(self):
        """get_inputs() with this worker's device as the default device
        (torch 2.x), so the inputs are made where they are used; torch 1.x
        has no default device: there they are made on the CPU and moved."""
        get = self.problem.get_inputs
        if self.device.type != "cpu" and hasattr(torch.device, "__enter__"):
            with torch.device(self.device):
                items = get()
        else:
            items = get()
        if not isinstance(items, (list, tuple)):
            raise TypeError("get_inputs() returned %s, not a list" % type(items).__name__)
        return list(items)

    def cmd_gen(self, args):
        """Makes this call's inputs from the referee's seed, with the
        problem's module-level sizes overridden as asked (and restored), in
        the problem's or the variant distribution (stark_tensors.vary_inputs).
        The values land in the same buffers as the last call's (when shapes
        agree), as a benchmark loop would: results cached on data pointers
        come out stale, and allocation patterns stay alike from call to
        call.  Replies with the description the referee compares.

        Memory: the last call's outputs and copies are let go before
        get_inputs() runs, the generated tensors are dropped once copied
        into the buffers, and the variant is made in the buffers in place,
        so a call's inputs need their own size twice (generated and
        buffered) at the peak, not four times.  The last call's inputs are
        let go too: where a buffer is replaced (inputs of another shape),
        the old one must be gone before the new one is made (_place), and
        self.inputs held it, as did _place's own loop -- three copies of
        the inputs at that step (tests/memory/genbuf_check.py)."""
        held, self.kb_host = self.kb_host, None
        self.ipc_ready = False
        self.inputs = None
        self.in_bufs = []
        self.outputs = None
        self.snapshot = None
        self.kept = None
        self.exact = None
        self.exact_j = None
        self.sending = None
        self.cmp = None
        if args.get("ipc_stage") is not True:
            # A GEN that stages nothing: the last pair's staging copy (the
            # reference's, stark_worker_ipc) goes before these inputs come.
            self.ipc_stage = None
            self.ipc_views = None
        # "light" (the reference's timed pairs): until the next GEN this
        # worker keeps nothing for its integrity facts and FETCH reports
        # none (stark_worker_outputs._describe_outputs): no weighted
        # digests of large inputs (_place), no late-write copy.
        self.light = self.role == "ref" and args.get("light") is True
        if self.model64 is not None and _nbytes(self.model64) > MODEL64_KEEP_BYTES:
            # A large float64 copy of the model is made again when next
            # needed, not held through every later phase (stark_memory).
            self.model64 = None
        if args.get("kb") is not None:
            # KernelBench's trials come after the timing and need none of
            # its placements (stark_worker_gpu.drop_placements).
            self.drop_placements()
        if args.get("host_only"):
            return self._kb_host_gen(args)
        if args.get("delivered") is True and self.role == "cand":
            # A timed call's inputs, which the referee copies in while this
            # worker is stopped (stark_worker_delivery): no seed was sent.
            return self.delivered_gen()
        pool, pre = self._gen_pool(args)
        with self._in_pool(pool):
            items, variant = self._make_inputs(args, held=held if args.get("from_host") else None)
        del held
        desc, tensors = T.describe_inputs(items)
        nbytes = sum(t.numel() * t.element_size() for t in tensors)
        self.slot = (pre if pre is not None and nbytes == self.gen_bytes else
                     self._slot(nbytes, args.get("slot"), args.get("places")))
        self.gen_bytes = nbytes
        sizes = sorted((t.numel() * t.element_size() for t in tensors), reverse=True)
        self.gen_desc = desc
        self.gen_args = dict(args)
        # The call's other arguments, without references to the generated
        # tensors (dropped once copied into the buffers).
        values = [None if isinstance(x, torch.Tensor) else x for x in items]
        is_tensor = [isinstance(x, torch.Tensor) for x in items]
        del items
        placed = self._place(desc, tensors, digest=not self.light, variant=variant,
                             centre=bool(args.get("centre")))
        del tensors
        it = iter(placed)
        self.inputs = [next(it) if t else v for v, t in zip(values, is_tensor)]
        if pre is not None:
            self._scrub(pool, sizes)
        # A pool of the GEN's own goes with its last block: its cached
        # memory back to the device (a tensor get_inputs() keeps holds its
        # block until it is let go).
        del pool
        if self.device.type == "cuda":
            # Inputs complete before the next command: a timed call's gate
            # must find nothing of this context's left to run beside it
            # (see _timed).
            torch.cuda.synchronize(self.device)
        reply = {"items": desc["items"], "bytes": nbytes, "placements": self.n_slots}
        if args.get("ipc_export") is True and self.role == "cand":
            reply["ipc"] = self.ipc_export_inputs()
        if args.get("ipc_stage") is True and self.role == "ref":
            self.ipc_stage_inputs()
        if args.get("deliver") is True and self.role == "ref":
            why = self.deliver(desc)
            reply["delivered"] = why is None
            if why is not None:
                reply["not_delivered"] = why
        if args.get("kb") is not None:
            reply["kb_rand"] = stark_rand.report()
        mem = self.mem_facts()
        if mem:
            reply["mem"] = mem
        return reply

    def _gen_pool(self, args):
        """Where this GEN makes its tensors, on a GPU where torch has
        MemPool: (pool, slot), pool None for the default pool, slot the
        placement chosen before making them (None: chosen after, from
        their bytes).

        The trials' and probes' GENs make them in a pool of their own,
        dropped once they are copied into the buffers, and its memory with
        it.  Made in the default pool, they stayed cached there beside
        their buffers (which live in the placements' pools) and counted in
        every later reading of the worker's reserved memory: the memory
        plan's allocator factor, a call's peak reserved over its peak
        allocated, read 2.00 for an elementwise problem with 16 GiB inputs
        on the H100 and planned 130 GiB for it.

        The timing phase's GENs (those naming a slot, once an earlier GEN
        gave the inputs' bytes) make them in the pool of the call's own
        placement instead, where the call's allocations are made: their
        block, cached there once copied, is the one the call's outputs
        then take, so that no timed call has a cudaMalloc or a cudaFree of
        the inputs' size beside it.  A pool made and dropped per call did:
        the GPU's work after such a free ran slower, and on two H200s an
        honest relu on 6 GiB read 3.06 ms after a GEN into its placement's
        pool and 3.40 ms after one into a pool dropped each call (21 of
        KernelBench level 1's 43 honest copies then missed 1.00 by more
        than 2%; tests/gpu/40-memory.t).  The memory plan counts that
        block in each placement (stark_memory.placement_bytes)."""
        if self.device.type != "cuda" or not hasattr(torch.cuda, "MemPool"):
            return None, None
        if args.get("slot") is None or not self.gen_bytes:
            return torch.cuda.MemPool(), None
        slot = self._slot(self.gen_bytes, args.get("slot"), args.get("places"))
        pool = self.pools[slot] if slot < len(self.pools) else None
        return pool, slot

    def _scrub(self, pool, sizes):
        """Fills the blocks the generated tensors left in `pool` (cached
        there, next taken by the call's outputs) with 0xFF bytes: an
        output left unwritten then holds NaN, never this call's inputs.
        Only memory taken from the allocator here is written: blocks of
        the generated tensors' sizes, largest first (where get_inputs()
        keeps a tensor of its own, its block is not free, and this takes
        another).  Where that other block does not fit on the device, the
        scrub stops there: the outputs then take memory this GEN never
        held, so never its inputs, and an out-of-memory error here would
        have been the evaluator's own."""
        held = []
        try:
            with self.ours_oom(), self._in_pool(pool):
                for n in sizes:
                    if n:
                        held.append(torch.empty(n, dtype=torch.uint8, device=self.device))
                for t in held:
                    t.fill_(255)
        except Exception as e:          # noqa: BLE001 -- only memory running out
            if not is_oom(e):
                raise
        del held

    def _kb_host_gen(self, args):
        """GEN with "host_only" (a KernelBench trial's, "kb" and its
        "seed"): only get_inputs() on the CPU, as KernelBench's harness
        makes them, kept for the next GEN, which says "from_host" and moves
        them to the device.  The referee asks for this before it takes the
        GPU lock for the trial, so the seconds the CPU takes (15-20 s a
        trial at level 1's sizes) do not hold up the GPU's other
        evaluations' timings.  Replies the CPU tensors' bytes."""
        if not isinstance(args.get("kb"), str):
            raise ValueError("GEN host_only is for KernelBench's trials (no \"kb\")")
        items, _ = self._make_inputs(args, host_only=True)
        self.kb_host = (int(args["seed"]), items)
        return {"host_bytes": sum(t.numel() * t.element_size() for t in items
                                  if isinstance(t, torch.Tensor)),
                "kb_rand": stark_rand.report()}

    def _make_inputs(self, args, own_seed=True, host_only=False, held=None):
        """get_inputs() for GEN's args: the items, and the seed of the
        variant to apply (None for the problem's own distribution).
        host_only, held: KernelBench's CPU inputs only, or those made
        ahead (_kb_host_gen; _kb_generate)."""
        seed = int(args["seed"])
        sizes = args.get("sizes") if isinstance(args.get("sizes"), dict) else {}
        mod = self.problem
        saved = {}
        dtype = torch.get_default_dtype()
        kb = args.get("kb") if isinstance(args.get("kb"), str) else None
        if own_seed:
            self.centred = None
        try:
            for k, v in sizes.items():
                if isinstance(k, str) and type(v) is int and type(getattr(mod, k, None)) is int:
                    saved[k] = getattr(mod, k)
                    setattr(mod, k, v)
            # A solution's top level may have changed the default dtype;
            # inputs are made the way the problem expects, in both workers.
            torch.set_default_dtype(torch.float32)
            if kb is not None:
                items = self._kb_generate(seed, kb, host_only, held)
                if host_only:
                    return items, None
            else:
                self._seed_all(seed)
                items = self._generate()
            if self.dtype is not None:
                # --precision: floating inputs cast (integer ones are
                # indices and counts, kept; KernelBench's own verdict casts
                # every tensor, as its harness does: _kb_generate).
                items = [t.to(dtype=self.dtype) if isinstance(t, torch.Tensor) and
                         t.is_floating_point() else t for t in items]
            if args.get("centre") and not own_seed:
                # (never with a variant: the precision probe's own inputs)
                # Made again for a float64 run: centred into new tensors
                # (get_inputs() may return tensors it keeps).  GEN's are
                # centred in the buffers (_place).
                items, _ = R.centre_inputs(items)
        finally:
            for k, v in saved.items():
                setattr(mod, k, v)
            torch.set_default_dtype(dtype)
        if kb is not None:
            if own_seed:
                # KernelBench seeds again before it runs the models.
                self._kb_seed(seed)
        elif self.role == "cand" and own_seed:
            # Randomness the candidate draws stays unpredictable.
            self._seed_all(int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1))
        return items, (seed if args.get("variant") else None)

    def regenerate_inputs(self):
        """The last GEN's inputs made again from its seed (fresh tensors,
        the variant applied): what the call's inputs were before the call,
        where the worker kept no copy of them (check_copy_bytes).  Returns
        the call's arguments, or None when there was no GEN."""
        if self.gen_args is None:
            return None
        items, variant = self._make_inputs(self.gen_args, own_seed=False)
        if variant is not None:
            items = T.vary_inputs(items, variant)
        return items

    def _kb_seed(self, seed):
        """KernelBench's set_seed: torch.manual_seed, and on a GPU
        torch.cuda.manual_seed."""
        torch.manual_seed(seed)
        if self.device.type == "cuda":
            torch.cuda.manual_seed(seed)

    def _kb_generate(self, seed, precision, host_only=False, held=None):
        """A KernelBench trial's inputs, made as its harness makes them
        (eval.py, run_and_check_correctness): set_seed(trial seed),
        get_inputs() on the CPU (no default device), every tensor cast to
        the precision's dtype and moved to the device
        (stark_rules.kb_process_input).  Its torch.rand() calls are
        served by stark_rand's engine, the same numbers faster.  host_only:
        the CPU's items alone; held: (seed, items) made so before, used
        for that seed."""
        if held is not None and held[0] == seed:
            items = held[1]
        else:
            self._kb_seed(seed)
            with stark_rand.kernelbench_inputs():
                items = self.problem.get_inputs()
            if not isinstance(items, (list, tuple)):
                raise TypeError("get_inputs() returned %s, not a list" % type(items).__name__)
        if host_only:
            return list(items)
        return [R.kb_process_input(x, self.device, precision) for x in items]

    def _place(self, desc, tensors, check=True, variant=None, centre=False, digest=True):
        """Copies generated tensors into the persistent input buffers of
        this call's placement on this worker's device, makes the variant
        there (variant: its seed) or centres them (centre: the precision
        probe's, stark_rules.centre_) and keeps what the mutation check needs
        (unless `check` is false: the SCAN's unchecked calls): a copy of
        each input (which the float64 second opinion runs on), or, where the
        inputs pass check_copy_bytes, a weighted digest of each
        (stark_tensors.weighted_digest; None without `digest`: a call whose
        FETCH makes no mutation check)."""
        specs = [d for d in desc["items"] if d["t"] == "tensor"]
        placed = []
        bufs = self.slot_bufs.get(self.slot, [])
        for i, (d, t) in enumerate(zip(specs, tensors)):
            t = t.detach()
            buf = bufs[i] if i < len(bufs) else None
            if (isinstance(buf, torch.Tensor) and buf.shape == t.shape and
                    buf.dtype == t.dtype and buf.device == self.device):
                buf.requires_grad_(False)
                buf.copy_(t)
            else:
                # Always a buffer of our own: get_inputs() may return a
                # tensor it keeps (a module-level constant), which a model
                # that mutates its inputs would otherwise change for later
                # calls.
                # The old buffer goes before the new one comes: this
                # loop's own name for it too.
                buf = None
                if i < len(bufs):
                    bufs[i] = None
                with self._in_slot():
                    buf = torch.empty(t.shape, dtype=t.dtype, device=self.device)
                buf.copy_(t)
            buf.requires_grad_(False)
            placed.append(buf)
        self.slot_bufs[self.slot] = placed
        self.in_bufs = placed
        self.in_spans = [storage_span(x) for x in placed]
        if variant is not None:
            T.vary_tensors_(placed, variant)
        elif centre:
            # The precision probe's inputs, centred in the buffers piece by
            # piece: no second copy of them (stark_memory's centre phase).
            self.centred = sum(R.centre_(placed))
        if not check:
            return placed
        if sum(x.numel() * x.element_size() for x in placed) > self.check_copy_bytes():
            self.pristine = [T.weighted_digest(x) if digest else None for x in placed]
        else:
            pristine = []
            for i, x in enumerate(placed):
                p = self.pristine[i] if i < len(self.pristine) else None
                if isinstance(p, torch.Tensor) and p.shape == x.shape and p.dtype == x.dtype:
                    p.copy_(x)
                else:
                    p = x.detach().clone()
                pristine.append(p)
            self.pristine = pristine
        for d, x in zip(specs, placed):
            if d.get("requires_grad") and x.is_floating_point():
                x.requires_grad_(True)
        return placed
