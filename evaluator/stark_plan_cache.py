"""stark_plan_cache -- the problem's footprint estimate, kept across
evaluations of the same problem.

The reference worker estimates a problem's footprint on the meta device
before each evaluation (stark_worker_memory.cmd_plan).  That takes
milliseconds for most problems, and 10-14 s for level 3's LSTMs and GRUs
on torch 2.11 (21,000-43,000 operators on meta, whose elementwise kernels
are Python): every attempt of a search on such a problem paid it.  The
estimate depends only on the problem's text, torch and the estimating
code, so the first evaluation's is kept and the later ones read it.

Layout, beside the build cache's (pool/buildcache.c):

    store/plans/KEY    the estimate, JSON: in, out, weights, fwd (bytes),
                       kernels, gpu_us_least, fwd_s, and fp (fingerprint)

The orchestrator names the entry (evalrun_plan_key: the device kind and
the SHA-256 of the problem's bytes), reads it, and sends its text in the
request ("plan"); the referee uses it where its fingerprint (torch's
build, Python's, the estimating code's) is this process's own, and
otherwise asks the reference worker and hands the estimate it got back
(env plan_publish, which the orchestrator checks, keeps under the same
key and drops from the result).  No jail sees the store's plans; nothing
a candidate runs comes before the estimate or can write the entry.
"""

import hashlib
import json
import sys

import torch

KEY_VERSION = "stark-plan-1"
ENTRY_MAX = 2048        # bytes of an entry (PROTO_PLAN_MAX)
# The entry's fields: the estimate (ints), and the seconds its forward took.
INT_FIELDS = ("in", "out", "weights", "fwd", "kernels")
NUM_FIELDS = ("gpu_us_least", "fwd_s")
# The code whose figures the estimate is: a change to it is a new key.
ESTIMATORS = ("stark_worker_memory", "stark_memory")


def fingerprint():
    """SHA-256 (hex) of what an estimate depends on besides the problem:
    torch's build, Python's, and the estimating modules' text."""
    doc = {"v": KEY_VERSION, "torch": torch.__version__,
           "torch_git": getattr(torch.version, "git_version", None),
           "python": sys.version,
           "code": [hashlib.sha256(str(getattr(sys.modules.get(m), "__stark_source__", ""))
                                   .encode("utf-8", "surrogatepass")).hexdigest()
                    for m in ESTIMATORS]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


def entry_of(est, fwd_s, fp):
    """The entry for an estimate (a PLAN reply) made under fingerprint fp,
    or None where it is not a whole estimate."""
    doc = {"fp": fp}
    for k in INT_FIELDS:
        v = est.get(k)
        if type(v) is not int or v < 0:
            return None
        doc[k] = v
    g = est.get("gpu_us_least")
    if type(g) not in (int, float) or not g >= 0:
        return None
    doc["gpu_us_least"] = float(g)
    doc["fwd_s"] = round(float(fwd_s), 3) if fwd_s is not None and fwd_s >= 0 else 0.0
    return doc


def valid(doc):
    """Whether doc is an entry as entry_of makes it."""
    if not isinstance(doc, dict) or set(doc) != set(INT_FIELDS + NUM_FIELDS + ("fp",)):
        return False
    fp = doc["fp"]
    if not (isinstance(fp, str) and len(fp) == 64 and all(c in "0123456789abcdef" for c in fp)):
        return False
    return all(type(doc[k]) is int and doc[k] >= 0 for k in INT_FIELDS) and \
        all(type(doc[k]) in (int, float) and doc[k] >= 0 for k in NUM_FIELDS)


def kept(text, fp):
    """The entry the request carried (its text), where it is one and was
    made under fingerprint fp; else None, with why."""
    if not text:
        return None, "none kept"
    try:
        doc = json.loads(text)
    except ValueError:
        return None, "the kept entry is not JSON"
    if not valid(doc):
        return None, "the kept entry is malformed"
    if doc["fp"] != fp:
        return None, "kept under another torch, Python or estimator"
    return doc, None
