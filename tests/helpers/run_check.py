#!/usr/bin/env python3
"""run_check.py -- checks on `stark show --json` and `stark export --journal`
output for the end-to-end tests of `stark run`/`stark resume`.

  run_check.py same A.json B.json
      exit 0 when the two `stark show --json` trees are identical once the
      timing fields ("created") and the stark that made each run ("stark":
      a rebuild between two runs changes its commit) are dropped; prints
      the first difference.
  run_check.py fields SHOW.json
      exit 0 when the documented fields are present (run_id, state, budget,
      attempts, nodes[id, parent, status, speedup, origin], best, spend).
  run_check.py answered JOURNAL.jsonl
      prints the keys of LLM requests whose response is journaled (fatal
      errors excepted), one per line.
  run_check.py stats PORT
      prints the mock server's /_stats JSON.
  run_check.py audit STATS.json JOURNAL.jsonl SNAPDIR
      the mock server saw no journaled request twice: SNAPDIR holds, for each
      kill i, mark.i (requests the mock had seen when the killed process was
      dead) and answered.i (keys answered in the journal then).  Every request
      the mock received after mark.i must be one whose response was not yet
      journaled.  Requests are matched to keys by their messages.  Prints a
      summary; exit 1 on a violation.
  run_check.py bench-audit STATS.json JOURNALDIR SNAPDIR INFLIGHT
      the same for a bench: JOURNALDIR holds each run's journal (RUN.jsonl),
      answered.i keys are RUN/KEY, and at most INFLIGHT requests may be lost
      (sent again) per kill, the LLM calls a bench has in flight.
  run_check.py bench-same A.json B.json
      exit 0 when two `stark show BENCH --json` objects have the same table
      (ids and timings aside).
"""
import json
import os
import sys
import urllib.request

TIMING = ("created", "stark")


def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in TIMING}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o


def first_diff(a, b, path="$"):
    if type(a) is not type(b):
        return "%s: %r != %r" % (path, a, b)
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return "%s.%s: only in %s" % (path, k, "first" if k in a else "second")
            d = first_diff(a[k], b[k], path + "." + k)
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return "%s: length %d != %d" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, "%s[%d]" % (path, i))
            if d:
                return d
        return None
    return None if a == b else "%s: %r != %r" % (path, a, b)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def journal(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def answered(events):
    keys = set()
    for e in events:
        if e["type"] == "llm_response" and not e["head"].get("fatal"):
            keys.add(e["head"]["key"])
    return keys


def message_keys(events):
    """(system, user) -> set of request keys with those messages."""
    out = {}
    for e in events:
        if e["type"] == "llm_request":
            msgs = e["body"]["messages"]
            sig = tuple(m["content"] for m in msgs)
            out.setdefault(sig, set()).add(e["head"]["key"])
    return out


def sig_of_body(body):
    req = json.loads(body)
    msgs = list(req["messages"])
    if "system" in req:  # anthropic dialect
        sysmsg = req["system"]
        if isinstance(sysmsg, list):
            sysmsg = "".join(p.get("text", "") for p in sysmsg)
        msgs = [{"role": "system", "content": sysmsg}] + msgs
    out = []
    for m in msgs:
        c = m["content"]
        if isinstance(c, list):
            c = "".join(p.get("text", "") for p in c)
        out.append(c)
    return tuple(out)


def audit(stats_path, journal_path, snapdir):
    stats = load(stats_path)
    events = journal(journal_path)
    by_msgs = message_keys(events)
    log = [e for e in stats["log"] if e.get("path", "").endswith(("/chat/completions", "/messages"))]
    marks = []
    i = 0
    while os.path.exists(os.path.join(snapdir, "mark.%d" % i)):
        with open(os.path.join(snapdir, "mark.%d" % i)) as f:
            mark = int(f.read().strip())
        with open(os.path.join(snapdir, "answered.%d" % i)) as f:
            keys = set(line.strip() for line in f if line.strip())
        marks.append((mark, keys))
        i += 1
    bad = []
    unmatched = 0
    for n, entry in enumerate(log):
        if "body" not in entry:
            raise SystemExit("audit: the mock must run with --log-bodies")
        cands = by_msgs.get(sig_of_body(entry["body"]))
        if not cands:
            unmatched += 1
            continue
        for mark, keys in marks:
            if n >= mark and cands <= keys:
                bad.append((n, sorted(cands)))
                break
    resp = len(answered(events))
    print("# mock saw %d requests; journal answers %d; %d kills; %d resent after a kill"
          % (len(log), resp, len(marks), len(log) - resp))
    if unmatched:
        print("# %d requests match no journaled request" % unmatched)
    for n, keys in bad[:5]:
        print("# request %d (%s) was sent although its response was journaled" % (n, ",".join(keys)))
    return 0 if not bad and not unmatched and len(log) - resp <= len(marks) else 1


def bench_audit(stats_path, jdir, snapdir, inflight):
    events = []
    for name in sorted(os.listdir(jdir)):
        if not name.endswith(".jsonl"):
            continue
        run = name[:-6]
        for e in journal(os.path.join(jdir, name)):
            if "key" in e.get("head", {}):
                e["head"]["key"] = run + "/" + e["head"]["key"]
            events.append(e)
    stats = load(stats_path)
    by_msgs = message_keys(events)
    log = [e for e in stats["log"] if e.get("path", "").endswith(("/chat/completions", "/messages"))]
    marks = []
    i = 0
    while os.path.exists(os.path.join(snapdir, "mark.%d" % i)):
        with open(os.path.join(snapdir, "mark.%d" % i)) as f:
            mark = int(f.read().strip())
        with open(os.path.join(snapdir, "answered.%d" % i)) as f:
            keys = set(line.strip() for line in f if line.strip())
        marks.append((mark, keys))
        i += 1
    bad, unmatched = [], 0
    for n, entry in enumerate(log):
        cands = by_msgs.get(sig_of_body(entry["body"]))
        if not cands:
            unmatched += 1
            continue
        for mark, keys in marks:
            if n >= mark and cands <= keys:
                bad.append((n, sorted(cands)))
                break
    resp = len(answered(events))
    print("# mock saw %d requests; journals answer %d; %d kills; %d sent again after a kill"
          % (len(log), resp, len(marks), len(log) - resp))
    for n, keys in bad[:5]:
        print("# request %d (%s) was sent although its response was journaled" % (n, ",".join(keys)))
    if unmatched:
        print("# %d requests match no journaled request" % unmatched)
    return 0 if not bad and not unmatched and len(log) - resp <= inflight * len(marks) else 1


def bench_same(a, b):
    ta, tb = load(a)["table"], load(b)["table"]
    d = first_diff(ta, tb)
    if d:
        print("# tables differ: %s" % d)
        return 1
    return 0


def fields(show):
    need = ("run_id", "state", "budget", "attempts", "nodes", "best", "spend")
    missing = [k for k in need if k not in show]
    for n in show.get("nodes", []):
        missing += ["nodes[].%s" % k for k in ("id", "parent", "status", "speedup", "origin")
                    if k not in n]
    for role in ("plan", "code", "debug"):
        if role not in show.get("spend", {}):
            missing.append("spend.%s" % role)
    if missing:
        print("# missing: " + ", ".join(sorted(set(missing))))
        return 1
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "same":
        d = first_diff(strip(load(argv[2])), strip(load(argv[3])))
        if d:
            print("# first difference: " + d)
            return 1
        return 0
    if len(argv) == 3 and argv[1] == "fields":
        return fields(load(argv[2]))
    if len(argv) == 3 and argv[1] == "answered":
        for k in sorted(answered(journal(argv[2]))):
            print(k)
        return 0
    if len(argv) == 3 and argv[1] == "stats":
        with urllib.request.urlopen("http://127.0.0.1:%s/_stats" % argv[2], timeout=10) as r:
            sys.stdout.write(r.read().decode())
        return 0
    if len(argv) == 6 and argv[1] == "bench-audit":
        return bench_audit(argv[2], argv[3], argv[4], int(argv[5]))
    if len(argv) == 4 and argv[1] == "bench-same":
        return bench_same(argv[2], argv[3])
    if len(argv) == 5 and argv[1] == "audit":
        return audit(argv[2], argv[3], argv[4])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
