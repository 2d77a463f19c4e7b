"""stark_nvcc -- nvcc with its host and device front ends side by side.

    python3 stark_nvcc.py REAL_NVCC STATS_FILE NVCC_ARGUMENT...

For one .cu file compiled with -c, nvcc runs these steps one after another
(`nvcc --dryrun` lists them):

    host:   preprocess (cpp4.ii) -> cudafe++ (host code, cudafe1.cpp)
    device: preprocess (cpp1.ii) -> cicc (ptx) -> ptxas -> fatbinary
    final:  the host compiler on cudafe1.cpp, which includes the device
            stub and the fatbinary

For a unit that includes torch/extension.h, cudafe++ and cicc each parse
all of torch's headers, and each takes about as long as the other.  The
two chains share only the module id, a name cudafe++ writes to a file and
cicc reads: this program writes the id itself, runs the two chains at the
same time, and then the final step.  What comes out is what nvcc makes,
except for the id string (a hash of the source, its path and the
arguments, instead of nvcc's own hash).

Anything it does not recognize runs the real nvcc unchanged: another
form of command, a dry run that fails, a step list of another shape.

Compiler output is passed on as nvcc would: when the host chain fails,
only its messages (nvcc stops at the first failing step, and cicc would
repeat cudafe++'s errors); otherwise the host chain's, then the device
chain's, then the final step's.

STATS_FILE ("-" for none) gets one JSON line per run: the mode
("parallel", or "plain: WHY") and, in parallel mode, the seconds each
chain and the final step took, and what became of the precompiled prefix
("pch").

A precompiled prefix.  The final step spends about 20 s on torch's
headers, which cudafe1.cpp holds before the unit's own code.  With
$STARK_NVCC_PCH naming a folder of prepared prefixes, a unit whose
cudafe1.cpp starts with one of them byte for byte (past its first line,
which names the unit's path) and whose final step is the one the prefix
was prepared for gets that prefix replaced by an #include of it, which the
host compiler then reads precompiled (prefix.h.gch beside it; where GCC
finds the .gch unusable it reads prefix.h itself, which is the same text).
The object is the one the whole file makes under the prefix's module id,
which a unit takes wherever a prefix is prepared for its final step (see
_pch_module_id).  The folder is written only by
a build with $STARK_NVCC_PCH_MAKE set to it, of a unit that marks the end
of its prefix with a declaration of SENTINEL (stark_build.prepare_pch);
never by the compile jail, where candidates' code runs, and where it is
bound read-only.  torch.utils.cpp_extension.load_inline is
pointed at this program by stark_build in the compile stage; it has no
state of its own and needs only the standard library.
"""

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PCH_ENV = "STARK_NVCC_PCH"
PCH_MAKE_ENV = "STARK_NVCC_PCH_MAKE"
SENTINEL = b"stark_pch_end_"
MARKER_RE = re.compile(rb'# [0-9]+ "[^"\n]*"')
FILTER_DEPS = "-- Filter Dependencies -- > "
# nvcc arguments after which the form is not a plain compile of one unit.
PLAIN_ONLY = {"--dryrun", "-dryrun", "-E", "--preprocess", "-M", "-MM",
              "--generate-dependencies", "--generate-nonsystem-dependencies",
              "-cuda", "--cuda", "-ptx", "--ptx", "-cubin", "--cubin",
              "-fatbin", "--fatbin", "-link", "--link", "-lib", "--lib",
              "-dlink", "--device-link", "-run", "--run", "--version", "-V",
              "-h", "--help", "-keep", "--keep", "-keep-dir", "--keep-dir",
              "-save-temps", "--save-temps", "-time", "--time"}


class Plain(Exception):
    """The real nvcc runs instead; the message says why."""


def _stat(path, rec):
    if path == "-":
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
    except OSError:
        pass


def _quoted(cmd, flag):
    m = re.search(re.escape(flag) + r' "([^"]*)"', cmd)
    return m.group(1) if m else None


def _output_of(cmd):
    """The file after -o in a step (quoted by nvcc)."""
    m = re.search(r' -o "([^"]*)"', cmd)
    return m.group(1) if m else None


def _program(cmd):
    try:
        first = shlex.split(cmd)[0]
    except (ValueError, IndexError):
        return ""
    return os.path.basename(first)


def plan(dry_lines):
    """Splits nvcc's step list into (exports, host, device, final, after,
    depfile, module_id_file).  Raises Plain when the list is not of the
    shape described at the top."""
    exports, cmds, depfile = [], [], None
    for line in dry_lines:
        if not line.startswith("#$ "):
            continue
        body = line[3:].strip()
        if NAME_RE.match(body):
            # Settings nvcc gives its steps (PATH, CICC_PATH, ...).  Those
            # that are not one shell word are for nvcc's own use.
            try:
                if len(shlex.split(body)) == 1:
                    exports.append("export " + body)
            except ValueError:
                pass
            continue
        if body.startswith(FILTER_DEPS):
            depfile = body[len(FILTER_DEPS):].strip()
            continue
        cmds.append(body)
    fe = [c for c in cmds if _program(c) == "cudafe++"]
    if len(fe) != 1:
        raise Plain("%d cudafe++ steps" % len(fe))
    fe = fe[0]
    fe_in = shlex.split(fe)[-1]
    gen_c = _quoted(fe, "--gen_c_file_name")
    id_file = _quoted(fe, "--module_id_file_name")
    if not gen_c or not id_file or "--gen_module_id_file " not in fe:
        raise Plain("cudafe++ step of another form")
    pre = [c for c in cmds if _output_of(c) == fe_in]
    if len(pre) != 1:
        raise Plain("no single preprocessing step for cudafe++")
    final_i = [i for i, c in enumerate(cmds)
               if " -c " in c and ('"%s"' % gen_c) in c]
    if len(final_i) != 1:
        raise Plain("no single host compile of %s" % os.path.basename(gen_c))
    fi = final_i[0]
    device = [c for c in cmds[:fi] if c is not fe and c is not pre[0]]
    if cmds.index(fe) > fi or cmds.index(pre[0]) > fi:
        raise Plain("cudafe++ after the host compile")
    if not any(_program(c) == "cicc" or "/cicc" in c.split(" ")[0] for c in device):
        raise Plain("no cicc step")
    host = [pre[0], fe.replace("--gen_module_id_file ", "", 1)]
    return exports, host, device, cmds[fi], cmds[fi + 1:], depfile, id_file, gen_c


def module_id(args, src):
    """A module id of nvcc's form and length (_HASH_LEN_NAME_HASH) for
    src."""
    h = hashlib.sha256()
    try:
        with open(src, "rb") as f:
            h.update(f.read())
    except OSError:
        pass
    h.update(os.path.abspath(src).encode())
    h.update("\0".join(args).encode())
    base = re.sub(r"[^A-Za-z0-9]", "_", os.path.basename(src))
    d = h.hexdigest()
    return "_%s_%d_%s_%s" % (d[:8], len(base), base, d[8:16])


def _start(script, log):
    return subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT)


def _pass_on(log):
    log.seek(0)
    shutil.copyfileobj(log, sys.stderr.buffer)
    sys.stderr.flush()


def _chains(head, host, device, rec):
    """Runs the host and device chains at once; passes their output on;
    returns the first failure's status (the host chain's first)."""
    t1 = time.monotonic()
    with tempfile.TemporaryFile() as hlog, tempfile.TemporaryFile() as dlog:
        procs = {"host": _start(head + "\n".join(host), hlog),
                 "device": _start(head + "\n".join(device), dlog)}
        rcs = {}
        while len(rcs) < 2:
            for name, p in procs.items():
                if name not in rcs and p.poll() is not None:
                    rcs[name] = p.returncode
                    rec[name + "_s"] = round(time.monotonic() - t1, 3)
            if len(rcs) < 2:
                time.sleep(0.005)
        _pass_on(hlog)
        if rcs["host"] != 0:
            return rcs["host"]
        _pass_on(dlog)
        return rcs["device"]


def _pch_key(final, gen_c):
    """The prepared prefix's name for a final step: a hash of its command
    with the unit and the object left out."""
    cmd = final.replace('"%s"' % gen_c, "UNIT")
    cmd = re.sub(r' -o "[^"]*"', " -o OUT", cmd)
    return hashlib.sha256(cmd.encode()).hexdigest()[:32]


def _pch_module_id(folder, final, gen_c):
    """The module id of the prefix prepared for this final step, if any.

    cudafe++ names the anonymous namespaces of torch's headers after the
    module id, so a unit matches a prepared prefix only under the id it was
    made with; a unit that may use one takes that id.  Anonymous
    namespaces stay local to the extension either way; what the id names
    with process-wide linkage (unique symbols such as cuda::std's `ignore`)
    are stateless objects two extensions may share."""
    if not folder:
        return None
    try:
        with open(os.path.join(folder, _pch_key(final, gen_c), "module_id"), "r",
                  encoding="ascii") as f:
            mid = f.read(256).strip()
    except OSError:
        return None
    return mid if re.fullmatch(r"_[A-Za-z0-9_]{1,200}", mid) else None


def make_pch(folder, final, gen_c, head, mid):
    """Prepares the prefix of gen_c (up to the line marker before SENTINEL)
    under folder for this final step: prefix.h and, by the final step's
    compiler, prefix.h.gch, put in place whole.  Returns what it did."""
    with open(gen_c, "rb") as f:
        text = f.read()
    i = text.find(SENTINEL)
    j = text.rfind(b"\n# ", 0, i) if i >= 0 else -1
    if j < 0 or not MARKER_RE.match(text, j + 1):
        return "no end of prefix marked"
    dest = os.path.join(folder, _pch_key(final, gen_c))
    tmp = tempfile.mkdtemp(prefix=".make-", dir=folder)
    try:
        header = os.path.join(tmp, "prefix.h")
        with open(header, "wb") as f:
            f.write(text[:j + 1])
        with open(os.path.join(tmp, "module_id"), "w", encoding="ascii") as f:
            f.write(mid)
        cmd = final.replace(" -c ", " ", 1).replace(" -x c++ ", " -x c++-header ", 1)
        cmd = cmd.replace('"%s"' % gen_c, shlex.quote(header))
        cmd = re.sub(r' -o "[^"]*"', " -o " + shlex.quote(header + ".gch"), cmd)
        if " -x c++-header " not in cmd:
            return "a final step of another form"
        if subprocess.run(["sh", "-c", head + cmd], stdin=subprocess.DEVNULL).returncode:
            return "the compiler failed on the prefix"
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(tmp, dest)
        tmp = None
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return "made %d bytes" % (j + 1)


def use_pch(folder, final, gen_c):
    """Rewrites gen_c to include its prepared prefix, where one matches.
    Returns what it did."""
    d = os.path.join(folder, _pch_key(final, gen_c))
    header = os.path.join(d, "prefix.h")
    if not os.path.isfile(header + ".gch"):
        return "none for this final step"
    if any(c in header for c in '"\\\n'):
        return "a folder name it cannot include"
    with open(header, "rb") as f:
        prefix = f.read()
    with open(gen_c, "rb") as f:
        text = f.read()
    a, b = prefix.find(b"\n") + 1, text.find(b"\n") + 1
    n = len(prefix) - a
    if (a == 0 or b == 0 or text[b:b + n] != prefix[a:] or
            not MARKER_RE.match(text, b + n)):
        return "another prefix"
    tmp = gen_c + ".pch"
    with open(tmp, "wb") as f:
        f.write(b'#include "%s"\n' % header.encode())
        f.write(text[b + n:])
    os.replace(tmp, gen_c)
    return "used"


def run(real, stats, args):
    """Returns nvcc's exit status; raises Plain before anything ran."""
    if any(a in PLAIN_ONLY for a in args):
        raise Plain("not a plain compile")
    units = [a for a in args if a.endswith(".cu") and not a.startswith("-")]
    if "-c" not in args or len(units) != 1:
        raise Plain("not one .cu with -c")
    t0 = time.monotonic()
    keep = tempfile.mkdtemp(prefix="stark-nvcc-")
    try:
        dry = subprocess.run([real, "--dryrun", "--keep", "--keep-dir", keep] + args,
                             stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, errors="replace")
        if dry.returncode != 0:
            raise Plain("dry run failed")
        exports, host, device, final, after, depfile, id_file, gen_c = plan(
            dry.stderr.splitlines())
        making = os.environ.get(PCH_MAKE_ENV)
        folder = making or os.environ.get(PCH_ENV)
        mid, shared = module_id(args, units[0]), _pch_module_id(folder, final, gen_c)
        with open(id_file, "w", encoding="ascii") as f:
            f.write(shared or mid)
        head = "\n".join(exports) + "\nset -e\n"
        t1 = time.monotonic()
        rec = {"mode": "parallel", "unit": os.path.basename(units[0]),
               "plan_s": round(t1 - t0, 3)}
        rc = _chains(head, host, device, rec)
        if rc == 0 and folder:
            t2 = time.monotonic()
            notes = []
            try:
                if making:
                    notes.append(make_pch(making, final, gen_c, head, shared or mid))
                notes.append(use_pch(folder, final, gen_c))
            except OSError as e:
                notes.append("unusable: %s" % e)
            rec["pch"] = ", ".join(notes)
            rec["pch_s"] = round(time.monotonic() - t2, 3)
        if rc == 0:
            t2 = time.monotonic()
            rc = subprocess.run(["sh", "-c", head + "\n".join([final] + after)],
                                stdin=subprocess.DEVNULL).returncode
            rec["final_s"] = round(time.monotonic() - t2, 3)
        if rc == 0 and depfile:
            # The build folder is never rebuilt in place; the unit itself
            # is the one dependency ninja needs to know of.
            out = args[args.index("-o") + 1] if "-o" in args[:-1] else None
            if out:
                with open(depfile, "w", encoding="utf-8") as f:
                    f.write("%s: %s\n" % (out.replace(" ", "\\ "),
                                          units[0].replace(" ", "\\ ")))
        rec["total_s"] = round(time.monotonic() - t0, 3)
        rec["rc"] = rc
        _stat(stats, rec)
        return rc
    finally:
        shutil.rmtree(keep, ignore_errors=True)


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: stark_nvcc.py REAL_NVCC STATS_FILE ARG...\n")
        return 2
    real, stats, args = argv[0], argv[1], argv[2:]
    try:
        return run(real, stats, args)
    except Plain as why:
        _stat(stats, {"mode": "plain: %s" % why})
        sys.stderr.flush()
        os.execv(real, [real] + args)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
