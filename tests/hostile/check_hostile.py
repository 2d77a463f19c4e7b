"""Runs the hostile corpus (tests/hostile/EXPECT) through `stark eval` and
prints TAP: one line per row for the verdict, one for the host's safety.

Usage: check_hostile.py STARK EXPECT [--only REGEX]
(REGEX is searched in "template@stage:arg"; $STARK_HOSTILE_ONLY works too,
and $STARK_HOSTILE_DEVICE picks the device, e.g. cuda, default cpu.)

Each EXPECT row names a template, the stage it is armed in, the statuses
accepted, a text the result's message must contain ("-" for none) and, if
any, ARG=value for the template and TIMEOUT=seconds for the evaluation.  Around every evaluation the host is
watched (README.md): a canary file, a planted secret and API key in stark's
environment, a fake store in stark's $HOME, TCP and UDP listeners on the
loopback, a peer process, and the processes left afterwards.  The build
cache is watched too: an honest C++ candidate (honest_cpp.py) is built into
it first, its published build's files must stay as they were, no link may
appear anywhere in the store, and after every E11 row the honest candidate
must still be judged correct from the cache.
"""
import hashlib
import json
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 8  # --timeout for each evaluation: spin and sleep rows hit it


def read_expect(path, only):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            words = shlex.split(line)
            row = {"cand": words[0], "stage": words[1], "statuses": words[2].split("|"),
                   "message": None if words[3] == "-" else words[3], "arg": ""}
            for kv in words[4:]:
                k, v = kv.split("=", 1)
                row[k.lower()] = v
            if not only or re.search(only, row["cand"] + "@" + row["stage"] + ":" + row["arg"]):
                rows.append(row)
    return rows


class Host:
    """What an evaluation must not touch, and the checks that it did not."""

    def __init__(self, root):
        self.root = root
        self.token = "canary-" + secrets.token_hex(8)
        self.secret = "sk-test-" + secrets.token_hex(12)
        self.store_token = "store-" + secrets.token_hex(8)
        self.canary = os.path.join(root, "canary", "secret.txt")
        os.makedirs(os.path.dirname(self.canary))
        with open(self.canary, "w") as f:
            f.write(self.token + "\n")
        self.home = os.path.join(root, "home")
        self.store = os.path.join(self.home, ".stark", "store")
        os.makedirs(os.path.dirname(self.store))
        with open(self.store, "w") as f:
            f.write(self.store_token + "\n")
        self.cache = os.path.join(root, "cache")
        os.makedirs(self.cache)
        self.stamp = {p: os.stat(p).st_mtime_ns for p in (self.canary, self.store)}
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.setblocking(False)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)
        self.peer = subprocess.Popen(["sleep", "100000"])

    def stark_eval(self, stark, problem, solution, timeout, extra=()):
        p = subprocess.run([stark, "eval", problem, solution, "--json", "--no-timing",
                            "--trials", "1", "--device", os.environ.get("STARK_HOSTILE_DEVICE", "cpu"),
                            "--timeout", str(timeout)] + list(extra),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env(),
                           timeout=900)
        try:
            return json.loads(p.stdout), p
        except ValueError:
            return {}, p

    def build_honest(self, stark):
        """Builds the honest candidate into the cache; returns what went wrong."""
        self.honest = os.path.join(self.root, "honest")
        os.makedirs(self.honest)
        for name in ("problem.py", "honest_cpp.py"):
            with open(os.path.join(HERE, name)) as f, \
                    open(os.path.join(self.honest, name), "w") as g:
                g.write(f.read())
        res, p = self.stark_eval(stark, os.path.join(self.honest, "problem.py"),
                                 os.path.join(self.honest, "honest_cpp.py"), 300)
        env = res.get("env") or {}
        if res.get("status") != "correct" or env.get("build_cache") != "stored":
            return "status %s, build_cache %s: %s %s" % (
                res.get("status"), env.get("build_cache"), (res.get("message") or "")[:300],
                p.stderr.decode(errors="replace")[-300:])
        self.honest_entry = os.path.join(self.cache, "store", "builds", env["build_key"])
        self.honest_key = env["build_key"]
        self.honest_files = self.snapshot(self.honest_entry)
        return None

    @staticmethod
    def snapshot(top):
        out = {}
        for root, dirs, files in os.walk(top):
            for name in files + dirs:
                path = os.path.join(root, name)
                st = os.lstat(path)
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb") as f:
                        out[os.path.relpath(path, top)] = hashlib.sha256(f.read()).hexdigest()
                else:
                    out[os.path.relpath(path, top)] = "mode %o" % st.st_mode
        return out

    def cache_harms(self, stark, row):
        """What an evaluation changed in the build cache that it must not."""
        why = []
        if not getattr(self, "honest_entry", None):
            return why
        if self.snapshot(self.honest_entry) != self.honest_files:
            why.append("the honest candidate's published build changed")
        for root, dirs, files in os.walk(os.path.join(self.cache, "store")):
            for name in files + dirs:
                if os.path.islink(os.path.join(root, name)):
                    why.append("a link in the store: %s" % os.path.join(root, name))
        if os.path.exists(os.path.join(self.cache, "store", "failed", self.honest_key)):
            why.append("a failure is remembered for the honest candidate")
        if row["cand"].startswith("e11_"):
            res, _ = self.stark_eval(stark, os.path.join(self.honest, "problem.py"),
                                     os.path.join(self.honest, "honest_cpp.py"), 120)
            env = res.get("env") or {}
            if res.get("status") != "correct" or env.get("build_cache") != "hit":
                why.append("the honest candidate, from the cache, is now %s (build_cache %s): %s"
                           % (res.get("status"), env.get("build_cache"),
                              (res.get("message") or "")[:200]))
        return why

    def env(self):
        env = dict(os.environ)
        env.update(HOME=self.home, STARK_CACHE=self.cache, STARK_TEST_SECRET=self.secret,
                   OPENAI_API_KEY=self.secret, ANTHROPIC_API_KEY=self.secret)
        return env

    def render(self, row, folder):
        with open(os.path.join(HERE, row["cand"])) as f:
            text = f.read()
        tag = "stkd-" + secrets.token_hex(4)
        for k, v in (("@STAGE@", row["stage"]), ("@PORT@", str(self.tcp.getsockname()[1])),
                     ("@UDP@", str(self.udp.getsockname()[1])), ("@CANARY@", self.canary),
                     ("@TAG@", tag), ("@ARG@", row["arg"]), ("@CACHE@", self.cache)):
            text = text.replace(k, v)
        path = os.path.join(folder, "solution.py")
        with open(path, "w") as f:
            f.write(text)
        return path, tag

    def harms(self, output, tag, stark_pid):
        """What went wrong on the host, as a list of sentences (empty: nothing)."""
        why = []
        for path in (self.canary, self.store):
            if os.stat(path).st_mtime_ns != self.stamp[path]:
                why.append("%s was modified" % path)
        with open(self.canary) as f:
            if f.read() != self.token + "\n":
                why.append("the canary's content changed")
        for what, token in (("canary", self.token), ("secret", self.secret),
                            ("store", self.store_token)):
            if token in output:
                why.append("the %s's content appeared in the output" % what)
        try:
            self.tcp.accept()
            why.append("the TCP listener received a connection")
        except BlockingIOError:
            pass
        try:
            self.udp.recv(64)
            why.append("the UDP listener received a datagram")
        except BlockingIOError:
            pass
        if self.peer.poll() is not None:
            why.append("a peer process of the host was killed")
            self.peer = subprocess.Popen(["sleep", "100000"])
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/comm" % pid) as f:
                    comm = f.read().strip()
                with open("/proc/%s/cgroup" % pid) as f:
                    groups = f.read()
            except OSError:
                continue
            # The evaluation's processes: the daemon's name, or the cgroups
            # the sandbox made for this stark process (stark-PID-N).
            if comm == tag or "/stark-%d-" % stark_pid in groups:
                why.append("process %s (%s) outlived the evaluation" % (pid, comm))
        return why

    def close(self):
        self.peer.send_signal(signal.SIGKILL)
        self.peer.wait()


def compat_entry():
    """Whether this kernel takes int 0x80 from a 64-bit process: the row's
    int80() in a plain child, unjailed.  Without IA32 emulation the
    instruction faults (SIGSEGV) before any filter sees a call, so the jail
    has nothing to deny or name (sandbox_compat_entry in sandbox.h)."""
    code = ("import ctypes, mmap, os\n"
            "buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
            "buf.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))\n"
            "addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))\n"
            "raise SystemExit(0 if ctypes.CFUNCTYPE(ctypes.c_int)(addr)() == os.getpid() else 1)\n")
    rc = subprocess.run([sys.executable, "-c", code]).returncode
    return rc == 0


def main():
    stark, expect = sys.argv[1], sys.argv[2]
    only = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--only" else os.environ.get(
        "STARK_HOSTILE_ONLY")
    rows = read_expect(expect, only)
    if any(r["arg"] == "int80" for r in rows) and not compat_entry():
        print("# this kernel has no 32-bit syscall entry: int 0x80 faults (SIGSEGV) before "
              "any filter sees a call, so those rows expect the fault")
        for r in rows:
            if r["arg"] == "int80":
                r["message"] = "SIGSEGV"
    print("1..%d" % (2 * len(rows) + 1), flush=True)
    n = 1
    with tempfile.TemporaryDirectory(prefix="stark-hostile-", dir="/var/tmp") as root:
        host = Host(root)
        try:
            t0 = time.time()
            bad = host.build_honest(stark)
            print("%s 1 - the honest C++ candidate is built and stored in the cache (%.0f s)%s"
                  % ("not ok" if bad else "ok", time.time() - t0, "" if not bad else ": " + bad),
                  flush=True)
            for row in rows:
                folder = tempfile.mkdtemp(dir=root)
                with open(os.path.join(HERE, "problem.py")) as f, \
                        open(os.path.join(folder, "problem.py"), "w") as g:
                    g.write(f.read())
                solution, tag = host.render(row, folder)
                name = "%s@%s%s" % (row["cand"], row["stage"], ":" + row["arg"] if row["arg"] else "")
                t0 = time.time()
                p = subprocess.Popen([stark, "eval", os.path.join(folder, "problem.py"), solution,
                                      "--json", "--no-timing", "--trials", "1",
                                      "--device", os.environ.get("STARK_HOSTILE_DEVICE", "cpu"),
                                      "--timeout", row.get("timeout", str(TIMEOUT_S))],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=host.env())
                stdout, stderr = p.communicate(timeout=900)
                p.stdout = stdout
                out = stdout.decode(errors="replace") + stderr.decode(errors="replace")
                why = []
                try:
                    res = json.loads(p.stdout)
                except ValueError:
                    res = {}
                    why.append("no JSON (exit %d): %s" % (p.returncode, out[-300:]))
                status, message = res.get("status"), res.get("message") or ""
                if res and status not in row["statuses"]:
                    why.append("status %s, expected %s" % (status, "|".join(row["statuses"])))
                if res and row["message"] and row["message"] not in message:
                    why.append("message lacks '%s'" % row["message"])
                n += 1
                desc = "%s -> %s (%.0f s)" % (name, status, time.time() - t0)
                print("%s %d - verdict %s" % ("not ok" if why else "ok", n, desc))
                for w in why:
                    print("# " + w)
                if why and res:
                    print("# message: " + message[:300].replace("\n", " "))
                harm = host.harms(out, tag, p.pid) + host.cache_harms(stark, row)
                n += 1
                print("%s %d - host unharmed by %s" % ("not ok" if harm else "ok", n, name))
                for w in harm:
                    print("# " + w)
                sys.stdout.flush()
        finally:
            host.close()


main()
