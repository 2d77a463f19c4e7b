"""Runs each candidate of one or more EXPECT files through `stark eval
--json` and prints TAP.  Used by the integrity corpus tests
(tests/e2e/50-integrity.t, tests/gpu/20-integrity.t) and the GPU corpus
(tests/gpu/10-gpu-corpus.t).

Usage: check_expect.py STARK EXPECT [EXPECT ...] [STARK-EVAL-OPTIONS ...]
  The first argument that starts with "-" begins the options passed to every
  `stark eval` (e.g. --device cuda --trials 3).  With several EXPECT files
  the TAP stream is one plan over all of them and each candidate is named by
  its path.  STARK_INTEGRITY_ONLY=REGEX keeps only the rows whose candidate
  matches.

EXPECT lines: CANDIDATE STATUSES FLAG [KEY=VALUE ...]   ("#" starts a comment)
  CANDIDATE  path relative to the EXPECT file; the problem is problem.py in
             the candidate's folder
  STATUSES   accepted statuses, separated by |
  FLAG       what the flags must be when the status is "correct":
             "-"          no flag at all;
             "any"        whatever flags;
             NAME[,NAME]  at least one of these flags (others may be there too);
             NAME+NAME    all of these flags (others may be there too);
             =NAME[,NAME] exactly these flags, no other
  Bounds, checked when the status is "correct":
  max_speedup=X            speedup <= X
  min_runtime_us=X         runtime_us >= X (work that must be counted: e.g. a
                           kernel known to spin for 2 ms)
  same_speed_as=CAND:TOL   |runtime_us / CAND's runtime_us - 1| <= TOL
  not_faster_than=CAND:TOL runtime_us >= CAND's runtime_us * (1 - TOL)
                           (CAND: another row of the same EXPECT file, by its
                           candidate path; it is evaluated in this run too, and
                           must itself be "correct" with a runtime, else the
                           comparison fails)
  waived_by=FLAG[,FLAG]    the bounds above need not hold when the result
                           carries one of these flags: an evaluator that
                           cannot vouch for a timing may say so (e.g.
                           timing_unverified, speedup_beyond_roofline) instead
                           of measuring it right
  Timing bounds are not checked (and a TAP comment says so) when
  --no-timing is among the options; otherwise a "correct" result without
  runtime_us fails them.
  Other keys:
  no_timing=REASON   the row is evaluated with --no-timing (in a batch of its
                     own): a verdict that does not rest on the timing phase,
                     spared its seconds
  cpu_only=REASON    the row is skipped (TAP "# SKIP") unless --device is cpu
                     (the default): for candidates whose attack or whose
                     expectation only holds on the CPU
  todo=REASON        a defense the evaluator does not have yet: the line is
                     reported with TAP's "# TODO" directive (a known failure,
                     listed by scripts/run-tests, not counted as passed or
                     failed); once it passes, the TAP line says so and the
                     marker should go
  todo_cpu=REASON    as todo, on the CPU only: a defense the GPU has by
                     default (the row must pass there)
  seed=N             the row is evaluated alone with --seed N: a verdict that
                     needs one draw of the trials' inputs (a scaled trial
                     that reaches a path), pinned
  env=KEY[,KEY]      when the status is "correct", these env keys must be
                     present (the path the row is there for was taken)
  In REASONs "_" stands for a space.
"""
import json
import os
import re
import subprocess
import sys
import threading
import time

EVAL_TIMEOUT_S = 900
BOUND_KEYS = ("max_speedup", "min_runtime_us", "same_speed_as", "not_faster_than")
KEYS = set(BOUND_KEYS) | {"waived_by", "cpu_only", "todo", "todo_cpu", "no_timing", "seed",
                          "env"}


class Row:
    def __init__(self, expect, base, fields, lineno):
        self.where = "%s:%d" % (expect, lineno)
        self.base = base
        self.cand = fields[0]
        if len(fields) < 3:
            raise SystemExit("%s: need CANDIDATE STATUSES FLAG" % self.where)
        self.statuses = fields[1].split("|")
        self.flag = fields[2]
        self.opts = {}
        for kv in fields[3:]:
            k, sep, v = kv.partition("=")
            if not sep or k not in KEYS:
                raise SystemExit("%s: unknown column %r (known: %s)" % (self.where, kv, ", ".join(sorted(KEYS))))
            self.opts[k] = v
        for k in ("same_speed_as", "not_faster_than"):
            if k in self.opts:
                other, sep, tol = self.opts[k].rpartition(":")
                try:
                    float(tol)
                except ValueError:
                    sep = ""
                if not sep or not other:
                    raise SystemExit("%s: %s needs CANDIDATE:TOLERANCE" % (self.where, k))

    @property
    def path(self):
        return os.path.normpath(os.path.join(self.base, self.cand))


def read_expect(expect):
    base = os.path.dirname(expect)
    rows = []
    with open(expect) as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split("#", 1)[0].split()
            if fields:
                rows.append(Row(expect, base, fields, lineno))
    known = {r.cand for r in rows}
    for r in rows:
        for k in ("same_speed_as", "not_faster_than"):
            if k in r.opts:
                other = r.opts[k].rpartition(":")[0]
                if other not in known:
                    raise SystemExit("%s: %s names %s, which is not a row of %s" % (r.where, k, other, expect))
    return rows


def option(extra, name, default=None):
    for i, a in enumerate(extra):
        if a == name and i + 1 < len(extra):
            return extra[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


class Runner:
    def __init__(self, stark, extra):
        self.stark = stark
        self.extra = extra
        self.results = {}       # candidate path -> (result dict or None, why list)
        self.untimed = set()    # candidate paths evaluated with --no-timing
        self.seeds = {}         # candidate path -> its pinned --seed

    def options(self, key):
        extra = list(self.extra)
        if key in self.untimed and "--no-timing" not in extra:
            extra.append("--no-timing")
        if key in self.seeds:
            extra += ["--seed", self.seeds[key]]
        return extra

    def prefetch(self, rows):
        """Evaluates rows' candidates in `stark eval --batch` processes (one
        for the rows with no_timing, one for the others): one evaluator
        zygote imports torch once for all of them, instead of once per row
        (STARK_EXPECT_BATCH=0 keeps one process per row)."""
        for row in rows:
            if "no_timing" in row.opts:
                self.untimed.add(row.path)
            if "seed" in row.opts:
                self.seeds[row.path] = row.opts["seed"]
        if os.environ.get("STARK_EXPECT_BATCH", "1") == "0":
            return
        keys = []
        for row in rows:
            if row.path not in self.results and row.path not in keys and \
                    row.path not in self.seeds:     # a pinned seed: its own process
                keys.append(row.path)
        for untimed in (False, True):
            self.prefetch_keys([k for k in keys if (k in self.untimed) == untimed])

    def prefetch_keys(self, keys):
        """One batch; each result as it comes, with a TAP comment line (a
        run cut short still shows which rows were judged, and how)."""
        if not keys:
            return
        lines = "".join("%s %s\n" % (os.path.join(os.path.dirname(k), "problem.py"), k) for k in keys)
        jobs = os.environ.get("STARK_EXPECT_JOBS")
        cmd = [self.stark, "eval", "--batch", "-"] + (["--jobs", jobs] if jobs else [])
        t0 = time.monotonic()
        p = subprocess.Popen(cmd + self.options(keys[0]), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        p.stdin.write(lines.encode())
        p.stdin.close()
        got, wanted = 0, set(keys)
        watchdog = threading.Timer(EVAL_TIMEOUT_S * len(keys), p.kill)
        watchdog.start()
        for line in p.stdout:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            # With --jobs the results come as they finish: matched by
            # solution.  A missing line: that row falls back to its own
            # process.
            k = obj.get("solution")
            if k in wanted and k not in self.results:
                got += 1
                self.results[k] = (obj, [])
                print("# judged %d/%d at %.0f s: %s -> %s" % (got, len(keys), time.monotonic() - t0,
                                                          k, obj.get("status")), flush=True)
        watchdog.cancel()
        p.kill()
        p.wait()

    def evaluate(self, row):
        key = row.path
        if key not in self.results:
            problem = os.path.join(os.path.dirname(key), "problem.py")
            why = []
            res = None
            try:
                p = subprocess.run([self.stark, "eval", problem, key, "--json"] + self.options(key),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=EVAL_TIMEOUT_S)
                try:
                    res = json.loads(p.stdout)
                    if not isinstance(res, dict):
                        raise ValueError("not an object")
                except ValueError:
                    res = None
                    why.append("no JSON on stdout (exit %d): %s"
                               % (p.returncode, p.stderr.decode(errors="replace")[-400:]))
            except subprocess.TimeoutExpired:
                why.append("stark eval did not finish within %d s" % EVAL_TIMEOUT_S)
            self.results[key] = (res, why)
        res, why = self.results[key]
        return res, list(why)


def runtime(res):
    v = res.get("runtime_us") if isinstance(res, dict) else None
    return v if isinstance(v, (int, float)) else None


def check_bounds(row, res, runner, rows_by_cand, timing):
    """The bound failures of a "correct" result, and notes."""
    why, notes = [], []
    present = [k for k in BOUND_KEYS if k in row.opts]
    if not present:
        return why, notes
    flags = res.get("flags") or []
    waivers = [f for f in row.opts.get("waived_by", "").split(",") if f]
    hit = [f for f in waivers if f in flags]
    if hit:
        notes.append("bounds waived: flagged %s" % ",".join(hit))
        return why, notes
    ms = row.opts.get("max_speedup")
    if ms is not None and (res.get("speedup") or 0) > float(ms):
        why.append("speedup %.2f above %s" % (res.get("speedup"), ms))
    timed = [k for k in present if k != "max_speedup"]
    if not timed:
        return why, notes
    if not timing:
        notes.append("timing bounds (%s) not checked: --no-timing" % ", ".join(timed))
        return why, notes
    rt = runtime(res)
    if rt is None:
        why.append("no runtime_us to check %s against" % ", ".join(timed))
        return why, notes
    mr = row.opts.get("min_runtime_us")
    if mr is not None:
        notes.append("runtime %.1f us (min_runtime_us=%s)" % (rt, mr))
        if rt < float(mr):
            why.append("runtime %.1f us below min_runtime_us=%s" % (rt, mr))
    for k in ("same_speed_as", "not_faster_than"):
        if k not in row.opts:
            continue
        other, _, tol = row.opts[k].rpartition(":")
        tol = float(tol)
        ores, owhy = runner.evaluate(rows_by_cand[other])
        ort = runtime(ores) if ores and ores.get("status") == "correct" else None
        if ort is None or ort <= 0:
            why.append("%s=%s: %s has no runtime to compare with (status %s%s)"
                       % (k, row.opts[k], other, ores.get("status") if ores else "?",
                          "; " + owhy[0] if owhy else ""))
            continue
        ratio = rt / ort
        notes.append("runtime %.1f us, %s %.1f us (ratio %.3f)" % (rt, other, ort, ratio))
        if k == "same_speed_as" and abs(ratio - 1) > tol:
            why.append("runtime %.1f us is not within %g%% of %s's %.1f us" % (rt, 100 * tol, other, ort))
        if k == "not_faster_than" and ratio < 1 - tol:
            why.append("runtime %.1f us is more than %g%% below %s's %.1f us" % (rt, 100 * tol, other, ort))
    return why, notes


def check_row(row, res, runner, rows_by_cand, timing):
    why, notes = [], []
    st, flags = res.get("status"), res.get("flags") or []
    if st not in row.statuses:
        why.append("status %s, expected %s" % (st, "|".join(row.statuses)))
    if st == "correct":
        if row.flag == "-" and flags:
            why.append("unexpected flags %s" % flags)
        elif row.flag.startswith("="):
            want = [f for f in row.flag[1:].split(",") if f]
            if sorted(set(flags)) != sorted(set(want)):
                why.append("flags %s, expected exactly %s" % (flags, want))
        elif "+" in row.flag:
            want = row.flag.split("+")
            missing = [f for f in want if f not in flags]
            if missing:
                why.append("flag %s missing (flags %s)" % (" and ".join(missing), flags))
        elif row.flag not in ("-", "any"):
            want = row.flag.split(",")
            if not any(f in flags for f in want):
                why.append("flag %s missing (flags %s)" % (" or ".join(want), flags))
        env = res.get("env") if isinstance(res.get("env"), dict) else {}
        missing = [k for k in row.opts.get("env", "").split(",") if k and k not in env]
        if missing:
            why.append("env %s missing" % ", ".join(missing))
        w, n = check_bounds(row, res, runner, rows_by_cand, timing)
        why += w
        notes += n
    return why, notes


def main():
    if len(sys.argv) < 3:
        raise SystemExit("usage: check_expect.py STARK EXPECT [EXPECT ...] [STARK-EVAL-OPTIONS ...]")
    stark = sys.argv[1]
    rest = sys.argv[2:]
    n_files = next((i for i, a in enumerate(rest) if a.startswith("-")), len(rest))
    expects, extra = rest[:n_files], rest[n_files:]
    if not expects:
        raise SystemExit("check_expect.py: no EXPECT file")
    device = option(extra, "--device", "cpu")
    timing = "--no-timing" not in extra
    runner = Runner(stark, extra)
    plan = []               # (row, rows_by_cand of its file)
    only = os.environ.get("STARK_INTEGRITY_ONLY")
    for expect in expects:
        rows = read_expect(expect)
        by_cand = {r.cand: r for r in rows}
        plan += [(r, by_cand) for r in rows if not only or re.search(only, r.cand)]
    print("1..%d" % len(plan), flush=True)
    todo_rows = [r for r, _ in plan if not ("cpu_only" in r.opts and device != "cpu")]
    for r, by_cand in plan:     # rows that bounds compare with are evaluated too
        for k in ("same_speed_as", "not_faster_than"):
            other = r.opts.get(k, "").split(":")[0]
            if other in by_cand:
                todo_rows.append(by_cand[other])
    runner.prefetch(todo_rows)
    for n, (row, by_cand) in enumerate(plan, 1):
        name = row.path if len(expects) > 1 else row.cand
        todo = row.opts.get("todo") or (row.opts.get("todo_cpu") if device == "cpu" else None)
        directive = " # TODO %s" % todo.replace("_", " ") if todo else ""
        if "cpu_only" in row.opts and device != "cpu":
            print("ok %d - %s # SKIP cpu only: %s" % (n, name, row.opts["cpu_only"].replace("_", " ")))
            sys.stdout.flush()
            continue
        res, why = runner.evaluate(row)
        notes = []
        if res is not None:
            w, notes = check_row(row, res, runner, by_cand,
                                 timing and row.path not in runner.untimed)
            why += w
        desc = "%s -> %s" % (name, res.get("status") if res else "?")
        if res is not None and res.get("flags"):
            desc += " [%s]" % ",".join(str(f) for f in res.get("flags"))
        if why:
            print("not ok %d - %s%s" % (n, desc, directive))
            for w in why:
                print("# " + w)
            if res is not None:
                print("# message: " + str(res.get("message"))[:300].replace("\n", " "))
        else:
            print("ok %d - %s%s" % (n, desc, directive))
        for note in notes:
            print("# " + note)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
