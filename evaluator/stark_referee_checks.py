"""stark_referee_checks -- integrity checks and flags.

A failed integrity check rejects the candidate (status "rejected", naming
the check).  Checked here: the candidate's worker made other inputs than
the reference's from the same seed; what it observed about its own call
(an output written after forward returned, an input mutated in place, an
output that aliases an input), where the reference does not do the same.
The output window's bytes are tied to the moment a timed call returned by
the output digests (stark_referee_data).

A flag marks a result without rejecting it (flag(), with the reason the
message gives).  The probes, one checked call each after the trials, raise
calls_reference_op (the candidate dispatches operators that do the
reference's work: probe_ops), reduced_precision (on the first trial and on
inputs centred to zero mean, the candidate is far from the exact result
where rounding its inputs to float32 and the reference's own rounding are
not: probe_precision) and shape_specialized (it fails at another valid
shape); the loading raises reuses_reference, and the timing
timing_unverified, below_timer_resolution and speedup_beyond_roofline.
"""

import stark_rules as R
import stark_tensors as T
import stark_wire as W
from stark_referee_common import Verdict, derive, number
from stark_referee_workers import Stopped

# Operators that compute nothing of the problem's result: allocation,
# views and reshapes, copies and moves between dtypes and devices, and
# queries.  Every other operator the reference dispatches is its work
# (probe_ops).  Names as the profiler gives them, in-place and out=
# variants folded onto the plain name (op_name).
NON_COMPUTING = frozenset("aten::" + n for n in (
    "empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like ones "
    "ones_like full full_like new_zeros new_ones new_full fill zero scalar_tensor "
    "lift lift_fresh lift_fresh_copy detach alias view _unsafe_view view_as reshape "
    "_reshape_alias as_strided expand expand_as broadcast_to squeeze unsqueeze flatten "
    "unflatten permute transpose t numpy_T movedim swapaxes contiguous clone copy "
    "_copy_from _copy_from_and_resize to _to_copy type_as resize resize_as select slice "
    "narrow split split_with_sizes chunk unbind cat _cat stack item _local_scalar_dense "
    "is_nonzero result_type size stride dim numel set record_stream diagonal unfold "
    "view_as_real view_as_complex detach_copy is_same_size _has_compatible_shallow_copy_type "
    "pin_memory _pin_memory is_pinned constant_pad_nd pad repeat tile expand_copy "
    "_nested_tensor_from_mask_left_aligned align_to refine_names rename resolve_conj "
    "resolve_neg conj _conj _neg_view alias_copy view_copy _reshape_copy "
    "is_floating_point is_complex is_contiguous sym_size sym_stride sym_numel "
    "sym_storage_offset storage_offset").split())

# Operators that do the same heavy work under other names: a candidate that
# dispatches one of a family the reference uses calls the reference's work
# as much as one that dispatches the same name (torch.mm or F.linear for a
# torch.matmul).
OP_FAMILIES = (
    frozenset("aten::" + n for n in (
        "mm bmm matmul addmm addbmm baddbmm linear einsum tensordot dot vdot mv addmv "
        "_addmm_activation addr outer inner chain_matmul multi_dot _mm_plus_mm "
        "_scaled_mm _int_mm").split()),
    frozenset("aten::" + n for n in (
        "conv1d conv2d conv3d convolution _convolution conv_transpose1d conv_transpose2d "
        "conv_transpose3d mkldnn_convolution cudnn_convolution cudnn_convolution_transpose "
        "_convolution_mode slow_conv2d slow_conv3d slow_conv_transpose2d "
        "slow_conv_transpose3d thnn_conv2d _slow_conv2d_forward convolution_overrideable "
        "miopen_convolution _nnpack_spatial_convolution").split()),
    frozenset("aten::" + n for n in (
        "scaled_dot_product_attention _scaled_dot_product_attention "
        "_scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention "
        "_scaled_dot_product_cudnn_attention _scaled_dot_product_attention_math "
        "_flash_attention_forward _efficient_attention_forward").split()),
)


def op_name(name):
    """A profiler name with in-place and out= variants folded onto the
    plain name (aten::tanh_ -> aten::tanh); None for what is not an aten
    operator (runtime calls, user ranges, other namespaces)."""
    if not isinstance(name, str) or not name.startswith("aten::"):
        return None
    base = name.split(".", 1)[0]
    while base.endswith("_") and len(base) > len("aten::") + 1:
        base = base[:-1]
    return base


def work_ops(ref_names):
    """The reference's work: every aten operator it dispatched but the
    non-computing ones, with the families of those that have a family."""
    work = {op_name(n) for n in ref_names} - {None}
    work -= NON_COMPUTING
    for fam in OP_FAMILIES:
        if work & fam:
            work |= fam
    return work


def op_shares(times, work, wall_us):
    """[(op, us)] of the candidate's profiled operators (times: {name:
    [count, us]}) that are in `work`, largest first, and their share of the
    call's wall time (at most 1)."""
    got = {}
    for name, v in times.items():
        n = op_name(name)
        if n in work and isinstance(v, list) and len(v) == 2:
            got[n] = got.get(n, 0.0) + max(number(v[1]), 0.0)
    ranked = sorted(got.items(), key=lambda kv: -kv[1])
    total = sum(us for _, us in ranked)
    share = min(total / wall_us, 1.0) if wall_us and wall_us > 0 else float("nan")
    return ranked, share


# The precision rule (probe_precision, judge_precision): its limits and why
# they hold at every size are stark_rules' (PRECISION_IN_MAX,
# PRECISION_REF_MAX, precision_flagged).
PRECISION_IN_MAX = R.PRECISION_IN_MAX
PRECISION_REF_MAX = R.PRECISION_REF_MAX


def _int_list(v):
    if not isinstance(v, list):
        return "?"
    return ", ".join(str(x) for x in v[:8] if type(x) is int) or "?"


class Checks:
    """The part of Evaluation that checks integrity, probes and flags."""

    def check_gen(self, ref_desc, cand_desc, what):
        bad = T.inputs_mismatch(ref_desc, cand_desc)
        if bad is not None:
            raise Verdict("rejected", "integrity check 'inputs' failed (%s): the "
                          "candidate's worker made other inputs than the reference's "
                          "from the same seed: %s" % (what, bad), check="inputs")

    def check_facts(self, cand, ref, what):
        """Integrity checks on what the candidate's worker observed about its
        own call; behaviour the reference shows too is allowed."""
        if cand.get("late_write") and not ref.get("late_write"):
            raise Verdict("rejected", "integrity check 'output written after return' "
                          "failed (%s): the candidate's output changed after forward "
                          "returned, so work went on outside the timed call" % what)
        if cand.get("mutated") and not ref.get("mutated"):
            raise Verdict("rejected", "integrity check 'input mutation' failed (%s): "
                          "the candidate modified input tensor %s in place"
                          % (what, _int_list(cand.get("mutated"))))
        if cand.get("alias") and not ref.get("alias"):
            pairs = cand.get("alias")
            first = pairs[0] if isinstance(pairs, list) and pairs and \
                isinstance(pairs[0], list) and len(pairs[0]) == 2 else ["?", "?"]
            raise Verdict("rejected", "integrity check 'output aliases input' failed "
                          "(%s): output %s shares memory with input tensor %s"
                          % (what, _int_list([first[0]]), _int_list([first[1]])))

    def probe_ops(self):
        """One more checked call per model under the profiler.  The
        reference's work is every operator it dispatches but allocation,
        views, copies and queries (work_ops); a candidate that dispatches
        any of them is flagged calls_reference_op, naming them and their
        share of its profiled call, so that a whole fallback (the matmul it
        was asked to replace, in an except branch) reads apart from a small
        helper."""
        if not self.time_left_for(3):
            return
        what = "profiled call"
        _, replies, _, bad = self.run_pair("profile", what, kind=W.PROFILE)
        if bad is not None and not self.lenient:
            raise Verdict("incorrect", bad)

        def names(reply):
            v = reply.get("ops") if isinstance(reply, dict) else None
            return {n for n in v if isinstance(n, str)} if isinstance(v, list) else set()
        work = work_ops(names(replies["ref"]))
        cand = replies["cand"] if isinstance(replies["cand"], dict) else {}
        times = cand.get("times") if isinstance(cand.get("times"), dict) else {}
        if not times:
            times = {n: [1, 0.0] for n in names(cand)}
        ranked, share = op_shares(times, work, number(cand.get("wall_us")))
        if not ranked:
            return
        total = sum(us for _, us in ranked)
        parts = ["%s %.0f%%" % (n, 100.0 * us / total) if total > 0 else n
                 for n, us in ranked[:8]]
        clock = "device" if cand.get("clock") == "device" else "host"
        why = ("it dispatches the reference's own operators %s%s" % (
            ", ".join(parts), "" if len(ranked) <= 8 else " and %d more" % (len(ranked) - 8)))
        if share == share:
            why += ": %.0f%% of its profiled call's %s time" % (100.0 * share, clock)
        ref = replies["ref"] if isinstance(replies["ref"], dict) else {}
        rtimes = ref.get("times") if isinstance(ref.get("times"), dict) else {}
        mine = {n for n, _ in ranked}
        r_all, _ = op_shares(rtimes, work, 0)
        r_tot = sum(us for _, us in r_all)
        if r_tot > 0:
            why += ("; in the reference those operators take %.0f%% of its work's time"
                    % (100.0 * sum(us for n, us in r_all if n in mine) / r_tot))
        self.flag("calls_reference_op", why)
        self.res["env"]["reference_ops_called"] = why[:900]

    def note_precision(self, what, i, st):
        """Keeps the precision statistics of output i of a judged call."""
        self.precision_seen.append((what, i, st))

    def probe_precision(self):
        """The precision probe: one checked call on inputs whose non-negative
        floating tensors are centred to zero mean (stark_rules.centre_inputs),
        where any float32 summation order keeps its rounding small and a
        downcast does not, judged with the first trial's statistics
        (judge_precision).  The probe's inputs may lie outside the
        problem's domain: a candidate that fails there is not judged
        incorrect for it; a reference that does not give finite outputs
        there leaves the first trial alone to judge."""
        if not self.time_left_for(4):
            return
        what = "precision probe (inputs centred to zero mean)"
        try:
            _, _, _, bad = self.run_pair("centred", what, gen={"centre": True},
                                         judge={"precision": "probe"})
            if bad is not None:
                self.res["env"]["precision_probe"] = ("the candidate differs there (not "
                                                      "judged): " + bad)[:900]
        except Verdict as v:
            if v.check is not None or v.status not in ("incorrect", "runtime_error"):
                raise
            self.res["env"]["precision_probe"] = ("not judged: " + v.message)[:900]

    def judge_precision(self):
        """reduced_precision when a judged output's error is over
        PRECISION_IN_MAX times the input-rounding noise and over
        PRECISION_REF_MAX times the reference's own error; env.precision
        gives every judged call's figures."""
        notes, worst = [], None
        for what, i, st in self.precision_seen:
            if "error" in st:
                notes.append("%s, output %d: not judged: %s" % (what, i, st["error"]))
                continue
            r_ref, r_in = R.precision_ratios(st)
            notes.append("%s, output %d: RMS error %.3g, %.3g times the reference's own "
                         "(%.3g), %.3g times the input-rounding noise (%.3g)" % (
                             what, i, st["e_cand"], r_ref, st["e_ref"], r_in,
                             st["e_in"]))
            if R.precision_flagged(r_ref, r_in) and (
                    worst is None or r_in > worst[1]):
                worst = (what, r_in, r_ref, i)
        if notes:
            self.res["env"]["precision"] = "; ".join(notes)[:900]
        if worst is not None:
            self.flag("reduced_precision", (
                "on the %s, output %d is %.3g times further from the float64 result than "
                "rounding the inputs to float32 puts it and %.3g times further than the "
                "float32 reference (limits %g and %g): a narrower type (TF32, float16, "
                "bfloat16), a float32 accumulator that truncates (tensor cores' MMA "
                "accumulator carried across the whole sum) or an approximation "
                "somewhere in its computation"
                % (worst[0], worst[3], worst[1], worst[2], PRECISION_IN_MAX,
                   PRECISION_REF_MAX)))

    def probe_shape(self):
        """One checked call at another valid shape: the problem's module-level
        integer sizes that only get_inputs() uses (not get_init_inputs())
        grown by a quarter, in both workers' copies of the problem.  If the
        reference runs there and the candidate fails or differs, its sizes
        are hard-coded (flag shape_specialized).  Runs last, after
        KernelBench's trials (Evaluation.evaluate): a candidate that
        crashes here has been measured already, and a worker this call
        leaves unusable serves nothing after it."""
        if not self.time_left_for(4):
            return
        sizes = self.shape_sizes()
        if not sizes:
            return
        what = "call at another shape (%s)" % ", ".join(
            "%s=%d" % kv for kv in sorted(sizes.items()))
        args = {"seed": derive(self.seed, "shape"), "sizes": sizes, "variant": False}
        if self.shape_fp is not None:
            # Planned before the inputs are made, from the meta estimate.
            fits, why = self.shape_room(None)
            if not fits:
                self.res["env"]["shape_probe"] = why[:900]
                return
        try:
            self.send_gen(self.ref, args, what)
            ref_desc, total = self.recv_gen(self.ref, what)
        except Verdict:
            return              # the problem does not take other sizes
        if total > 4 * max(self.input_bytes, 1 << 20):
            return              # too big to be a cheap probe
        fits, why = self.shape_room(total) if self.shape_fp is None else (True, None)
        if not fits:
            self.res["env"]["shape_probe"] = why[:900]
            return
        try:
            with Stopped(self.cand):
                self.call(self.ref, "forward (%s)" % what)
            ref_meta, ref_facts = self.fetch_ref(what)
        except Verdict:
            return              # the reference does not run there: no probe
        saved = (self.max_abs, self.max_rel, self.res.get("first_bad"))
        try:
            self.send_gen(self.cand, args, what)
            cand_desc, _ = self.recv_gen(self.cand, what)
            self.check_gen(ref_desc, cand_desc, what)
            with Stopped(self.ref):
                reply = self.call(self.cand, "forward (%s)" % what)[1]
            results = self.fetch_compare(ref_meta, ref_facts, what,
                                         reply.get("digest", []) if self.cuda else None)
            bad = self.compare(results, ref_meta, what)
        except Verdict as v:
            if v.check is not None:
                raise           # an integrity failure, whatever the shape
            if v.status == "error":
                return          # the reference failed to compare: no probe
            bad = v.message
        finally:
            self.max_abs, self.max_rel = saved[0], saved[1]
            if saved[2] is None:
                self.res.pop("first_bad", None)
        if bad is not None:
            self.flag("shape_specialized")
            self.res["env"]["shape_probe"] = bad[:900]

    def shape_sizes(self):
        """The shape probe's sizes: the problem's module-level integer sizes
        that only get_inputs() uses (not get_init_inputs()), each grown by
        a quarter; {} where there are none.  A size whose value is also in
        a module-level tuple or list is left as it is: the tuple was likely
        made from it when the module loaded (KernelBench's
        95_CrossEntropyLoss: input_shape = (num_classes,)), and growing the
        size alone makes inputs that disagree with each other (class
        indices beyond the logits' width: a device-side assert in the
        reference)."""
        mod = self.problem
        try:
            base_init = repr(mod.get_init_inputs())
        except Exception:
            return {}
        in_seqs = set()
        for name, v in list(vars(mod).items()):
            if not name.startswith("_") and type(v) in (tuple, list) and len(v) <= 16:
                in_seqs.update(x for x in v if type(x) is int)
        sizes = {}
        for name, v in list(vars(mod).items()):
            if name.startswith("_") or type(v) is not int or v < 4 or v > (1 << 20):
                continue
            if v in in_seqs:
                continue
            setattr(mod, name, v + v // 4)
            try:
                same_init = repr(mod.get_init_inputs()) == base_init
            except Exception:
                same_init = False
            setattr(mod, name, v)
            if same_init:
                sizes[name] = v + v // 4
        return sizes

    def flag(self, name, why=None):
        """Marks the result with a flag; `why` goes into the message of a
        correct result (Verdicts.final_verdict)."""
        if name not in self.res["flags"]:
            self.res["flags"].append(name)
        if why and name not in self.flag_why:
            self.flag_why[name] = why
