/*
 * main.c -- stark-eval, the evaluator program.
 *
 * Reads one request frame on fd 0, runs the evaluation in the embedded
 * Python harness (pyembed.c), and writes exactly one result frame on fd 3
 * (see evaluator.h and serve.c).  stdout and stderr carry whatever the
 * harness and the candidate print; nobody parses them.
 *
 * Usage: stark-eval [--jailed]
 *        stark-eval --zygote [--cgroup-parent DIR]
 *        stark-eval --doctor DEVICE
 *   --jailed   the orchestrator started us in a run jail: candidate workers
 *              install the sandbox's narrow seccomp filter before loading
 *              the solution.
 *   --zygote   serve evaluations forked from one started interpreter, each
 *              in its own jail (zygote.c; the protocol is in evaluator.h).
 *   --doctor   print what this machine has and lacks for DEVICE's candidate
 *              formats, as JSON on stdout (stark_env.report; `stark doctor`
 *              runs it in a compile jail), and exit 0 (3: it could not).
 *
 * Exit status: 0 a result was written; 3 it could not be (fd 3 missing or
 * broken).  After the result is written the process leaves with _exit():
 * finalizing an interpreter that loaded torch buys nothing and can hang.
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "evaluator/evaluator.h"
#include "evaluator/evaluator_int.h"

/* The embedded interpreter leaks by design; leak reports would be noise. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}

static int usage(const char *arg)
{
	stark_warn("unknown argument '%s' (usage: %s [--jailed] | --zygote [--cgroup-parent DIR] | --doctor DEVICE)",
		   arg, EVAL_PROGRAM);
	return 3;
}

static int doctor(struct evpy_opts *opts, const char *device)
{
	struct dbuf out;
	char err[512];
	int rc;

	if (evpy_init(opts, err, sizeof(err))) {
		stark_warn("%s", err);
		return 3;
	}
	dbuf_init(&out, 1u << 20);
	rc = evpy_doctor(device, &out);
	if (rc)
		stark_warn("the probe failed: %s", dbuf_str(&out));
	else if (io_write_full(1, out.p, out.len) || io_write_full(1, "\n", 1))
		rc = ST_EIO;
	dbuf_release(&out);
	return rc ? 3 : 0;
}

int main(int argc, char **argv)
{
	struct evpy_opts opts = {.jailed = false, .start_ns = clock_mono_ns()};
	const char *cgroup_parent = NULL;
	bool zygote = false;

	stark_set_progname(EVAL_PROGRAM);
	/*
	 * Pin glibc's allocation regime before Python starts, so the reference
	 * worker and the candidate worker (both forked from here) allocate alike.
	 * With the default dynamic threshold a tensor of a few MB is mmapped and
	 * page-faulted on every call in one process and reused from the heap in
	 * another, depending on each process's history: CPU timings of the same
	 * model then differed up to 10x between workers.
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--jailed"))
			opts.jailed = true;
		else if (!strcmp(argv[i], "--zygote"))
			zygote = true;
		else if (!strcmp(argv[i], "--cgroup-parent") && i + 1 < argc)
			cgroup_parent = argv[++i];
		else if (!strcmp(argv[i], "--doctor") && i + 1 < argc && argc == 3)
			_exit(doctor(&opts, argv[++i]));
		else
			return usage(argv[i]);
	}
	if (zygote)
		_exit(eval_zygote_main(cgroup_parent));
	if (cgroup_parent)
		return usage("--cgroup-parent");
	_exit(eval_serve_one(&opts, NULL));
}
