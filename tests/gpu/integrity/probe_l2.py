"""Does R17 (persisting L2 lines across the evaluator's flush) work on this
GPU?  A measurement, not a test: run it on a GPU machine by hand,
    python3 tests/gpu/integrity/probe_l2.py

For each set-up -- plain loads (the honest chase), an access-policy window
with persisting hits over the table and the set-aside at its maximum
(chase/r17_persist_l2.py's _Persist), evict_last cache hints (as
chase/r17_evict_last.py) -- thread 0 of the pointer chase of
chase/problem.py's size reads %globaltimer and clock64 around its 96
dependent loads, so launch overheads, events and GPU clock changes between
calls drop out: it prints ns and SM cycles per load (an L2 hit is about a
third of a miss).  Before each timed launch the L2 is flushed (2 x its size
written) in this process ("local") or in another process ("remote", as the
evaluator's reference worker does), with or without
cuCtxResetPersistingL2Cache in the flushing process ("+R"), or not at all
("none": hot).

Measured on the H100 (driver 580, torch 2.11), ns per load:
    plain      none 179 | local 531 | local+R 531 | remote 529 | remote+R 528
    window     none 185 | local 290 | local+R 520 | remote 648 | remote+R 647
    evict_last none 187 | local 495 | local+R 534 | remote 531 | remote+R 533
Persisting lines survive a flush made in the candidate's own context (290
ns: mostly hits) unless the flush resets them; a flush from another
context evicts them with or without the reset (the set-aside seems to be
the context's own), and the window then makes misses slower.
"""
import ctypes
import importlib.util
import multiprocessing as mp
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "evaluator"))

SRC = r'''
__device__ __forceinline__ unsigned long long gtimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ int load_evict_last(const int* p)
{
    int v;
    asm volatile("{\n\t.reg .b64 pol;\n\t"
                 "createpolicy.fractional.L2::evict_last.b64 pol, 1.0;\n\t"
                 "ld.global.L2::cache_hint.b32 %0, [%1], pol;\n\t}"
                 : "=r"(v) : "l"(p));
    return v;
}

extern "C" __global__ void chase_timed(const int* table, const int* start, long long* out,
                                       long long* tm, int chains, int steps, int evict_last)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < chains) {
        int j = start[i];
        long long acc = 0;
        unsigned long long t0 = gtimer();
        long long c0 = clock64();
        for (int s = 0; s < steps; s++) {
            j = evict_last ? load_evict_last(table + j) : *(volatile const int*)(table + j);
            acc += j;
        }
        long long c1 = clock64();
        unsigned long long t1 = gtimer();
        out[i] = acc;
        if (i == 0) {
            tm[0] = (long long)(t1 - t0);
            tm[1] = c1 - c0;
        }
    }
}
'''
REPS = 15


def flusher(conn, l2):
    import torch
    cu = ctypes.CDLL("libcuda.so.1")
    buf = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    n = 0
    while True:
        reset = conn.recv()
        if reset is None:
            return
        if reset and cu.cuCtxResetPersistingL2Cache() != 0:
            raise RuntimeError("cuCtxResetPersistingL2Cache failed")
        n += 1
        buf.fill_(n & 0xFF)
        torch.cuda.synchronize()
        conn.send("ok")


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def probe(which):
    import torch
    from stark_cuda import CudaModule
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    a, b = mp.get_context("spawn").Pipe()
    p = mp.get_context("spawn").Process(target=flusher, args=(b, l2))
    p.start()
    prob = load(os.path.join(HERE, "chase", "problem.py"), "chase_problem")
    mod = CudaModule(SRC)
    torch.manual_seed(1)
    with torch.device("cuda"):
        table, start = prob.get_inputs()
    chains = start.numel()
    out = torch.empty(chains, dtype=torch.int64, device="cuda")
    tm = torch.zeros(2, dtype=torch.int64, device="cuda")
    s = torch.cuda.Stream()
    cu = ctypes.CDLL("libcuda.so.1")
    if which == "window":
        load(os.path.join(HERE, "chase", "r17_persist_l2.py"), "r17")._Persist().pin(s, table)
    local = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")

    def run():
        mod.chase_timed(grid=((chains + 63) // 64,), block=(64,),
                        args=(table, start, out, tm, chains, prob.steps, int(which == "evict_last")),
                        stream=s)
        s.synchronize()
        return tm.tolist()

    row = []
    for kind in ("none", "local", "local+R", "remote", "remote+R"):
        run()
        ns, cy = [], []
        for _ in range(REPS):
            torch.cuda.synchronize()
            reset = kind.endswith("+R")
            if kind.startswith("local"):
                if reset and cu.cuCtxResetPersistingL2Cache() != 0:
                    raise RuntimeError("cuCtxResetPersistingL2Cache failed")
                local.fill_(7)
                torch.cuda.synchronize()
            elif kind.startswith("remote"):
                a.send(reset)
                a.recv()
            t, c = run()
            ns.append(t / prob.steps)
            cy.append(c / prob.steps)
        row.append("%s %4.0f ns %4.0f cy" % (kind, sorted(ns)[REPS // 2], sorted(cy)[REPS // 2]))
    print("%-10s %s" % (which, " | ".join(row)), flush=True)
    a.send(None)
    p.join()


def main():
    which = sys.argv[1:] or ["plain", "window", "evict_last"]
    if len(which) > 1:
        # One process per set-up: the window's set-aside stays with its context.
        import subprocess
        for w in which:
            subprocess.call([sys.executable, os.path.abspath(__file__), w])
        return
    probe(which[0])


if __name__ == "__main__":
    main()
