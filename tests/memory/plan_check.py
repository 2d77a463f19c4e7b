"""The memory plan (evaluator/stark_memory.py: plan, need_by_phase,
shape_need) for given footprints, and the ledger admitting evaluations by
the plan's need across real processes: every phase counted, the largest
reserved, optional phases reduced in order where the whole does not fit,
and a third evaluation of 6 GiB waiting while two hold the device.  Prints
TAP.  Usage: python3 tests/memory/plan_check.py"""
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator"))
sys.path.insert(0, HERE)

from tap import done, ok  # noqa: E402
import stark_memory as M  # noqa: E402

GIB, MIB = M.GIB, M.MIB


def fp(i, o, w=0, f=None):
    return {"in": i, "out": o, "weights": w, "fwd": o if f is None else f}


# KernelBench level 1's 19_ReLU (4096 x 393216 floats): 6 GiB in and out.
big = fp(6 * GIB, 6 * GIB)
h100 = M.budget(int(79.2 * GIB))          # an H100's 80 GB as torch reports it
p = M.plan(big, budget=h100)
ph = M.phase_bytes(big)
ok(ph["repeat"][0] == ph["call"][0] + 6 * GIB,
   "the repeatability check's second output is counted beside the first",
   str(ph))
ok(ph["centre"][0] - ph["call"][0] < 1 * GIB and ph["gen"][0] >= 12 * GIB,
   "centring the probe's inputs in place costs no copy of them", str(ph))
ok(p.need == max(p.phases.values()) == p.phases["repeat"],
   "the plan reserves its largest phase", p.text())
ok(not p.f64 and "beyond their caps" in p.reduced["float64"] and "repeat" not in p.reduced,
   "6 GiB outputs: the float64 runs beyond their own caps, named", p.reduced_text())
ok(2 * p.need <= h100 < 3 * p.need,
   "two 6 GiB evaluations fit an H100 at once, three do not (%s each of %s)"
   % (M.fmt_bytes(p.need), M.fmt_bytes(h100)))

# A 512 MiB problem with 256 MiB of weights: the float64 runs are the peak.
mid = fp(512 * MIB, 512 * MIB, 256 * MIB, 1 * GIB)
full = M.plan(mid, budget=h100)
f64 = M.phase_bytes(mid)["float64"][0]
cmp_ref = M.phase_bytes(mid)["compare"][0]
ok(full.f64 and full.need == full.phases["float64"] and
   f64 - cmp_ref == 2 * 256 * MIB + 2 * 512 * MIB + 2 * 512 * MIB + 2 * GIB,
   "the float64 runs count the model's copy, both float64 outputs, the inputs and "
   "the forward in float64", M.fmt_bytes(f64 - cmp_ref))
tight = M.plan(mid, budget=full.phases["float64"] - 1)
ok(not tight.f64 and tight.repeat and "float64" in tight.reduced and
   tight.need < full.need and "float64" not in tight.phases,
   "a budget just short of the float64 runs skips them alone, with the reason",
   tight.reduced_text())
tighter = M.plan(mid, budget=full.phases["repeat"] - 1)
ok(not tighter.repeat and not tighter.f64 and tighter.phases["repeat"] == tighter.phases["call"],
   "shorter still: the repeatability check by digest too", tighter.reduced_text())
again = M.plan(mid, budget=h100, f64=False)
ok(not again.f64 and "float64" not in again.phases,
   "a phase once reduced stays reduced when the plan is made again")
host = M.plan(mid, budget=h100, contexts=False)
# mid's 512 MiB of outputs get a device window of their size, and the
# chunk copied out of it for the comparison is that size too, against the
# host window's 256 MiB (in the float64 phase, the largest, as in compare).
# The chunk's difference is a worker's, so the allocator's factor scales it.
dwin = M.device_window_bytes(mid)
extra = full.need - host.need - (2 * M.CONTEXT_BYTES + M.FLUSH_CONTEXT_BYTES + dwin)
ok(dwin == 512 * MIB and dwin - M.window_bytes() <= extra <= 1.5 * (dwin - M.window_bytes()),
   "a host plan counts no CUDA contexts nor output window on the device, and "
   "the host window's chunk", M.fmt_bytes(extra))
cand = fp(512 * MIB, 512 * MIB, 256 * MIB, 4 * GIB)
ok(M.need(mid, cand) > M.need(mid), "a candidate's larger forward is planned once known")
grown = M.shape_need(fp(int(1.5625 * 512 * MIB), int(1.5625 * 512 * MIB), 256 * MIB))
ok(M.need_by_phase(mid)["call"] < grown,
   "the shape probe's need follows the grown sizes")
# The timed GENs' tensors are made in the placement's pool: their block
# stays cached there and the forward's allocations take it, so it costs
# only the inputs' size beyond the forward's.
red = fp(2 * GIB, 4 * MIB, 0, 64 * MIB)      # a reduction: large in, small out
kept = M.phase_bytes(red, gen_placed=True)["timing"][0] - M.phase_bytes(red)["call"][0]
ok(kept == 2 * GIB - 64 * MIB and "timing" not in M.phase_bytes(red),
   "a reduction's timing phase holds its generated inputs' block beyond the forward's", kept)
ok(M.phase_bytes(big, gen_placed=True)["timing"] == M.phase_bytes(big)["call"],
   "an elementwise problem's outputs take that block: nothing more")
ok(M.need_by_phase(red)["timing"] - M.need_by_phase(red)["call"] >= 2 * (2 * GIB - 64 * MIB) and
   "timing" not in M.need_by_phase(red, contexts=False),
   "a device plan counts it in both workers; a host plan makes no pools")
ok(M.placement_bytes(red) == int(4 * GIB * M.ALLOC_FACTOR) and
   M.placement_bytes(big) == int(12 * GIB * M.ALLOC_FACTOR),
   "each placement holds its inputs and the larger of the forward's and the inputs' block")
# A GPU's delivered inputs: the reference's worker stages a copy of them.
small = fp(512 * MIB, 512 * MIB)
st = M.phase_bytes(small, gen_placed=True, staged=True)["timing"]
un = M.phase_bytes(small, gen_placed=True)["timing"]
ok(st[0] - un[0] == 512 * MIB and st[1] == un[1],
   "delivered inputs: the reference's staging copy counted in its timing phase", (st, un))
ok(M.phase_bytes(big, gen_placed=True, staged=True) == M.phase_bytes(big, gen_placed=True),
   "inputs beyond IPC_STAGE_MAX are not delivered: no staging copy counted")
os.environ["STARK_INPUT_DELIVERY"] = "on"
on = M.need_by_phase(small)["timing"]
on_host = M.need_by_phase(small, contexts=False)
os.environ["STARK_INPUT_DELIVERY"] = "off"
off = M.need_by_phase(small)["timing"]
del os.environ["STARK_INPUT_DELIVERY"]
default = M.need_by_phase(small)["timing"]
ok(on - off >= 512 * MIB and "timing" not in on_host,
   "STARK_INPUT_DELIVERY=on counts it in a device plan, not in a host one")
ok(default == on and M.input_delivery({}, device=True) and not M.input_delivery({})
   and not M.input_delivery({"STARK_INPUT_DELIVERY": "off"}, device=True)
   and M.input_delivery({"STARK_INPUT_DELIVERY": "on"}),
   "delivery unset: on for a GPU (its plan counts the staging copy), off on the CPU; "
   "on and off as set", (default, on, off))
timing = M.need_by_phase(mid, places=4)["timing"]
ok(timing - M.need_by_phase(mid)["call"] >= 3 * 2 * M.placement_bytes(mid) * M.ALLOC_FACTOR - 2,
   "placements are counted in both workers")

# The ledger admits by the plan, across processes (record locks are per
# process): two 6 GiB evaluations at once, a third waits until one of them
# is done.
def evaluation(path, need, hold_s, w):
    """A forked stand-in: reserves `need` of the H100's budget (waiting up
    to 20 s), holds it hold_s seconds, writes 'admitted-after-s' to w."""
    pid = os.fork()
    if pid:
        return pid
    try:
        led = M.Ledger(os.open(path, os.O_RDWR))
        end = time.monotonic() + 20
        t0 = time.monotonic()
        got = led.reserve(need, h100, lambda: time.monotonic() < end)
        os.write(w, b"%s %.3f\n" % (b"in" if got else b"out", time.monotonic() - t0))
        time.sleep(hold_s)
        led.release()
    finally:
        os._exit(0)


path = tempfile.mktemp(prefix="stark-plan-ledger.")
os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
# The allocator's rounding as the first trial measures it: a transposed
# convolution's allocator held 1.48x its peak on the H100 (KernelBench level
# 2, 13: 7686 MiB reserved for a 5184 MiB peak); the plan follows the
# measured factor, per worker, never below the default nor beyond the cap.
ok(abs(M.alloc_factor(5184 * MIB, 7686 * MIB) - 1.4826) < 1e-3 and
   M.alloc_factor(1 * GIB, 1 * GIB) == M.ALLOC_FACTOR and
   M.alloc_factor(1 * GIB, 100 * GIB) == M.ALLOC_FACTOR_MAX and
   M.alloc_factor(1 * MIB, 64 * MIB) == M.ALLOC_FACTOR and
   M.alloc_factor("x", 1) == M.ALLOC_FACTOR,
   "the allocator's measured factor: reserved over allocated peaks, within bounds")
conv = fp(1 * GIB, 1 * GIB, 64 * MIB, 5 * GIB)
conv_f = dict(conv, factor=1.48)
plain, held = M.need_by_phase(conv)["call"], M.need_by_phase(conv_f)["call"]
ref_call = M.phase_bytes(conv)["call"][0]
ok(abs((held - plain) - 2 * ref_call * (1.48 - M.ALLOC_FACTOR)) < 4,
   "a measured factor of 1.48x is planned for both workers' calls",
   "plain %s, with the factor %s" % (M.fmt_bytes(plain), M.fmt_bytes(held)))
only_cand = M.need_by_phase(conv, dict(conv, factor=1.48))["call"]
ok(abs((only_cand - plain) - ref_call * (1.48 - M.ALLOC_FACTOR)) < 4 and
   M.need_by_phase(conv, dict(conv, factor=50.0))["call"] - plain
   <= ref_call * (M.ALLOC_FACTOR_MAX - M.ALLOC_FACTOR) + 4,
   "the candidate's factor counts for its worker alone, capped")

r, w = os.pipe()
kids = [evaluation(path, p.need, 1.5, w), evaluation(path, p.need, 1.5, w)]
time.sleep(0.5)
kids.append(evaluation(path, p.need, 0.0, w))
time.sleep(0.5)
view = M.Ledger(os.open(path, os.O_RDWR))
held, waiting, count = view.others()
ok(held == 2 * p.need and waiting == p.need and count == 3,
   "two 6 GiB plans admitted at once, the third waits for its plan's bytes",
   "held %s, waiting %s, %d records" % (M.fmt_bytes(held), M.fmt_bytes(waiting), count))
for k in kids:
    os.waitpid(k, 0)
os.close(w)
lines = os.read(r, 1000).decode().split("\n")
waits = sorted(float(x.split()[1]) for x in lines if x.startswith("in "))
ok(len(waits) == 3 and waits[1] < 0.3 and waits[2] >= 0.4,
   "the third is admitted once one of the two is done (waits %s s)" % waits)
os.unlink(path)
sys.exit(done())
