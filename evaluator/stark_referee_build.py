"""stark_referee_build -- the referee's part in the build path: the
evaluation's build folder and key, what the build cache holds for it, and
who is blamed when a build fails.

Before any candidate code runs in the compile (or all-in-one) stage,
plan_build() takes the toolchain's fingerprint and the evaluation's key
(stark_env) and looks the key up in the cache's store, which every jail
sees read-only: a published build ends the compile stage ("compiled") and
is what the all-in-one stage loads; a remembered compile error is the
verdict again.  Builds otherwise go to the request's build_dir, a scratch
folder of this evaluation alone; the orchestrator publishes it after the
stage's processes are gone, under the key it computes itself and checks
against build_key (orchestrator/buildcache.c).  The env keys build_key,
build_toolchain, build_publish and build_remember are for the orchestrator;
toolchain and build_cache are for the user.

A Triton candidate's run stage has the same for what Triton compiles
(plan_jit_cache, jit_publish): the orchestrator's jit_dir holds this
evaluation's cache, filled from the cache's jit/KEY before any worker exists
where an earlier evaluation of the same sources left one (env jit_cache
"warm ..."), and otherwise published afterwards where Triton compiled
anything ("cold"; jit_publish and jit_toolchain are for the orchestrator,
which computes the key itself; jit_store says what became of it).

A failed build, or a failed import of torch's extension module, is the
machine's fault (`error`, naming what is missing and its fix) when the
referee's own probe finds the machine lacking what builds need; the
worker's account alone proves nothing, since the candidate runs there.
"""

import os
import tempfile

import stark_build
import stark_env
import stark_triton
from stark_referee_common import LIMITS, Verdict, cut


class Builds:
    """The part of Evaluation that plans builds and judges their failures."""

    def plan_build(self):
        """Compile and all-in-one stages: the build folder, the key, and
        what the cache holds for it (may raise the stage's Verdict)."""
        self.build_dir = self.req["build_dir"] or None
        if not self.build_dir:
            self.tmp_cache = tempfile.mkdtemp(prefix="stark-build-")
            self.build_dir = self.tmp_cache
        if not self.req["cache_dir"]:
            return
        env = self.res["env"]
        _, fp, desc = stark_env.toolchain()
        key = stark_env.entry_key(fp, self.req["device"], self.req["problem_src"],
                                  self.req["solution_src"])
        env.update(build_key=key, build_toolchain=fp, toolchain=desc)
        found = stark_build.lookup(self.req["cache_dir"], key)
        if found is not None and found[0] == "failed":
            env["build_cache"] = "remembered failure"
            raise Verdict("compile_error", found[1], cut(
                "[the same sources failed to build before with this toolchain; this is "
                "that build's log]\n" + found[2], LIMITS["log_max"] - 1024))
        if found is not None:
            env["build_cache"] = "hit"
            if self.stage == "compile":
                raise Verdict("compiled", "the solution's native code was built before with "
                              "this toolchain (from the build cache)")
            self.build_dir = found[1]
            self.build_mode = "load"

    def built(self):
        """The candidate's builds succeeded (compile stage, or all-in-one
        with nothing from the cache): the orchestrator may publish them."""
        if self.res["env"].get("build_key") and (self.stage == "compile" or
                                                 self.build_mode is None):
            self.res["env"]["build_publish"] = "1"

    def plan_jit_cache(self):
        """A Triton candidate's run stage, where the orchestrator gave a
        folder for Triton's cache (jit_dir): what it restored there is
        kept where its key is this evaluation's (env jit_cache "warm"),
        and otherwise the cache starts empty and is published afterwards
        ("cold"; jit_publish).  Before any worker exists."""
        folder = self.req.get("jit_dir")
        if not folder:
            return
        env = self.res["env"]
        key = stark_env.entry_key(env["jit_toolchain"], self.req["device"],
                                  self.req["problem_src"], self.req["solution_src"])
        cache = os.path.join(folder, "cache")
        try:
            got = stark_triton.warm(folder, key)
            os.makedirs(cache, mode=0o700, exist_ok=True)
        except OSError as e:
            raise Verdict("error", "cannot prepare Triton's cache in %s: %s" % (folder, e))
        self.jit_cache = cache
        if got is None:
            self.jit_cold = True
            env["jit_cache"] = "cold"
        else:
            env["jit_cache"] = "warm: %d files, %d KiB from an earlier evaluation" % (
                got[0], got[1] >> 10)

    def jit_publish(self):
        """At the end: a cold cache to which Triton added kernels is for
        the orchestrator to publish."""
        if self.jit_cold and self.jit_seen[0] > 0:
            self.res["env"]["jit_publish"] = "1"

    def machine_lacks(self, cuda_sources, log):
        """An `error` naming what this machine lacks for builds, or None
        when it lacks nothing (then the failure is the candidate's)."""
        missing = stark_env.lacking(self.req["device"], cuda_sources)
        if not missing:
            return None
        return Verdict("error", stark_env.describe(missing), cut(log, LIMITS["log_max"] - 1024))

    def build_failure(self, err, emsg, tb, log):
        """The verdict on a worker's build or setup failure, or on its
        failing to load NVRTC; None where it is not one of those."""
        phase = err.get("phase")
        if phase == "build" and err.get("missing") is not True:
            v = self.machine_lacks(err.get("cuda") is not False, log)
            if v is None and stark_env.rememberable(log) and self.res["env"].get("build_key"):
                self.res["env"]["build_remember"] = "1"
            return v
        if phase == "setup":
            return self.machine_lacks(False, tb)
        if "cannot load nvrtc" in emsg:
            c = stark_env.check_nvrtc()
            if not c["ok"]:
                return Verdict("error", stark_env.describe(
                    [c], "run the fast format's kernels"), tb)
        return None
