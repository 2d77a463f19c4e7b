/*
 * cmd_doctor.c -- `stark doctor`: what this machine has and lacks for
 * judging candidates on a device, each missing piece with the command or
 * setting that fixes it.
 *
 * Three sources, merged into one list of checks:
 *   - the jail (sandbox_layers_available): every layer, for the compile and
 *     the run stage; the build cache's folders;
 *   - on a "cuda" device, the GPU's device nodes and the target the compile
 *     jail is told (nvidia-smi, or $STARK_CUDA_ARCH: evalrun_jail_opts);
 *   - the evaluator's own probe (`stark-eval --doctor DEVICE`,
 *     evaluator/stark_env.py: torch and its headers, pybind11, setuptools,
 *     the compiler, ninja, Python.h, nvcc, NVRTC), run in a compile jail
 *     with the binds evaluations get, so that it sees what a build sees.
 *     Where a check fails there, the probe runs again outside the jail: a
 *     piece that is only outside is one STARK_SANDBOX_BINDS must name.
 *     It also lists the kernel languages the device can judge (stark_lang:
 *     the Python packages and headers each needs) and the baselines the
 *     reference can be timed as (torch.compile and what inductor needs);
 *     for Triton and torch.compile, the run jail's Landlock is checked
 *     here, outside the jail.
 *
 * Exit status: 0 when everything the device's formats need is there, 1
 * when something is missing, 2 usage, 3 when the probe could not run.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "cli/cli.h"
#include "pool/pool.h"
#include "pool/pool_int.h"

#define PROBE_OUT_MAX (1u << 20)
#define PROBE_WALL_MS 120000u

struct doctor_args {
	const char *device;
	bool json;
};

static const char *const layer_fix[] = {
    [0] = "",
    [1] = "",
    [2] = "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0)",
    [3] = "network namespaces come with user namespaces (see userns)",
    [4] = "pid namespaces come with user namespaces (see userns)",
    [5] = "mount namespaces come with user namespaces (see userns)",
    [6] = "ipc and uts namespaces come with user namespaces (see userns)",
    [7] = "a cgroup v2 subtree delegated to this user (STARK_SANDBOX_CGROUP), or cgroup v1 pids/memory/cpu controllers (SECURITY.md)",
    [8] = "",
    [9] = "",
    [10] = "a kernel with seccomp filters (CONFIG_SECCOMP_FILTER) and libseccomp",
};

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: stark doctor [--device cpu|cuda[:N]] [--json]\n"
		   "  Lists what this machine has and lacks for judging candidates on the device\n"
		   "  (the jail's layers, the build cache, torch and its headers, pybind11,\n"
		   "  setuptools, the compiler, ninja, nvcc, NVRTC, the GPU), each missing piece\n"
		   "  with its fix.  Exit 0: everything is there; 1: something is missing.\n");
	return rc;
}

static json_t *check(const char *name, bool ok, const char *detail, const char *fix, const char *need)
{
	return json_pack("{s:s, s:b, s:s, s:s, s:[s]}", "name", name, "ok", ok, "detail", detail, "fix",
			 ok ? "" : fix, "needed_by", need);
}

/* The run jail's memory: what one evaluation gets, and each of four. */
static void mem_check(json_t *out)
{
	char detail[300];
	uint64_t machine = sandbox_memory_limit(), one = evalrun_run_mem_default(1),
		 four = evalrun_run_mem_default(4);

	snprintf(detail, sizeof(detail),
		 "%.1f GiB for one evaluation, %.1f GiB each with --jobs 4 (%s; this machine: %.1f GiB)",
		 (double)one / (1 << 30), (double)four / (1 << 30),
		 getenv("STARK_RUN_MEM_MIB") && one == four ? "STARK_RUN_MEM_MIB"
							   : "three quarters of the machine, shared",
		 (double)machine / (1 << 30));
	json_array_append_new(out, check("run jail memory", true, detail, "", "every format"));
}

static void jail_checks(json_t *out)
{
	static const struct {
		enum sandbox_stage stage;
		const char *name;
	} stages[] = {{SANDBOX_COMPILE, "compile"}, {SANDBOX_RUN, "run"}};
	char name[64], have[256], detail[600], fix[1024];

	for (size_t s = 0; s < ST_ARRAY_LEN(stages); s++) {
		unsigned avail = sandbox_layers_available(stages[s].stage);
		unsigned lack = SANDBOX_L_ALL & ~avail;

		snprintf(name, sizeof(name), "jail (%s stage)", stages[s].name);
		sandbox_layers_str(avail, have, sizeof(have));
		fix[0] = '\0';
		for (unsigned b = 0; b < ST_ARRAY_LEN(layer_fix); b++) {
			char one[64];

			if (!(lack & (1u << b)) || !layer_fix[b][0] || strstr(fix, layer_fix[b]))
				continue;
			sandbox_layers_str(1u << b, one, sizeof(one));
			snprintf(fix + strlen(fix), sizeof(fix) - strlen(fix), "%s%s: %s", fix[0] ? "; " : "",
				 one, layer_fix[b]);
		}
		if (lack) {
			char missing[256];

			sandbox_layers_str(lack, missing, sizeof(missing));
			snprintf(detail, sizeof(detail), "has %s; lacks %s", have, missing);
		} else {
			snprintf(detail, sizeof(detail), "all 11 layers: %s", have);
		}
		json_array_append_new(out, check(name, !lack, detail,
						 fix[0] ? fix : "see SECURITY.md, \"Machines\"", "every format"));
	}
}

/* The GPU's lock (the machine's, shared by every stark process on it) and
 * the CPUs kept for its timings (STARK_TIMING_CPUS, resolved by main). */
static void lock_checks(json_t *out, const char *device, int gpu)
{
	const char *spec = getenv("STARK_TIMING_CPUS");
	char path[PATH_MAX], err[PATH_MAX + 128], detail[PATH_MAX + 256];
	bool ok = evalrun_gpu_lock_path(device, path, sizeof(path), err, sizeof(err)) == 0;

	json_array_append_new(out, check("GPU lock", ok, ok ? path : err,
					 "set STARK_LOCK_DIR to a folder of your own", "every cuda format"));
	if (!spec || !*spec || strcmp(spec, "off") == 0) {
		const char *why = evalrun_timing_cpus_why();

		snprintf(detail, sizeof(detail), "none kept (%s)",
			 *why ? why : "STARK_TIMING_CPUS=off");
	} else {
		const char *p = spec;

		for (int k = 0; k < gpu && p; k++)
			if ((p = strchr(p, ';')))
				p++;
		if (p && !strcspn(p, ";"))
			p = NULL; /* an empty list: none for this GPU */
		snprintf(detail, sizeof(detail), "GPU %d: %.*s (STARK_TIMING_CPUS=%s)", gpu,
			 p ? (int)strcspn(p, ";") : 4, p ? p : "none", spec);
	}
	json_array_append_new(out, check("timing CPUs", true, detail, "", "every cuda format"));
}

static void gpu_checks(json_t *out, const char *device)
{
	int idx = device[4] == ':' ? atoi(device + 5) : 0;
	int minor = evalrun_gpu_minor(EVALRUN_GPUS_DIR, getenv("CUDA_VISIBLE_DEVICES"), idx);
	char node[64], detail[256];
	bool ok;

	ok = access("/dev/nvidiactl", F_OK) == 0;
	snprintf(node, sizeof(node), "/dev/nvidia%d", minor >= 0 ? minor : idx);
	ok = ok && access(node, F_OK) == 0;
	snprintf(detail, sizeof(detail), ok ? "/dev/nvidiactl and %s" : "no /dev/nvidiactl or %s", node);
	json_array_append_new(out, check("GPU device", ok, detail,
					 "install the NVIDIA driver, or pick a GPU this machine has (--device cuda:N)",
					 "every cuda format"));
	lock_checks(out, device, minor >= 0 ? minor : idx);
}

/*
 * Reads the child's stdout until EOF or the deadline, serving the jail
 * meanwhile (sandbox_child_fd: a forbidden call's report, the limits): a
 * probe stopped on a denied call is killed and its pipe closes, rather than
 * waiting on an answer nobody gives.
 */
static int read_all(int fd, struct sandbox_child *child, struct dbuf *out, uint64_t deadline_ns)
{
	char buf[65536];

	for (;;) {
		struct pollfd pfd[2] = {{fd, POLLIN, 0}, {sandbox_child_fd(child), POLLIN, 0}};
		uint64_t now = clock_mono_ns();
		struct sandbox_exit ex;
		ssize_t r;
		int n;

		if (now >= deadline_ns)
			return ST_ETIMEDOUT;
		n = poll(pfd, pfd[1].fd >= 0 ? 2 : 1, (int)((deadline_ns - now) / 1000000 + 1));
		if (n < 0 && errno != EINTR)
			return ST_ESYS;
		if (n <= 0)
			continue;
		if (pfd[1].revents) {
			int w = sandbox_wait(child, 0, &ex);

			if (w && w != ST_ETIMEDOUT)
				return w;
		}
		if (!pfd[0].revents)
			continue;
		r = read(fd, buf, sizeof(buf));
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return r < 0 ? ST_EIO : 0;
		dbuf_append_trunc(out, buf, (size_t)r);
	}
}

int cli_evaluator_probe(const char *device, enum sandbox_stage stage, const struct evalrun_opts *o,
			uint32_t wall_ms, json_t **report, char *err, size_t errlen)
{
	struct sandbox_config cfg;
	struct sandbox_child *child = NULL;
	struct sandbox_exit ex;
	struct sandbox_fd map[3];
	struct dbuf out;
	char *argv[4], **env = evalrun_copy_env(NULL);
	int p[2] = {-1, -1}, null = -1, rc;
	json_error_t jerr;

	*report = NULL;
	dbuf_init(&out, PROBE_OUT_MAX);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (!env || null < 0 || pipe2(p, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "cannot set up the probe: %s", env ? strerror(errno) : "out of memory");
		rc = ST_ESYS;
		goto out;
	}
	sandbox_config_init(&cfg, stage);
	map[0] = (struct sandbox_fd){null, 0};
	map[1] = (struct sandbox_fd){p[1], 1};
	map[2] = (struct sandbox_fd){null, 2};
	cfg.fds = map;
	cfg.nfds = 3;
	cfg.env = (const char *const *)env;
	cfg.binds = o->binds;
	cfg.nbinds = o->nbinds;
	cfg.mem_bytes = EVALRUN_COMPILE_MEM;
	cfg.wall_ms = wall_ms;
	argv[0] = (char *)o->evaluator;
	argv[1] = (char *)"--doctor";
	argv[2] = (char *)device;
	argv[3] = NULL;
	rc = sandbox_spawn(&cfg, o->evaluator, argv, &child);
	close(p[1]);
	p[1] = -1;
	if (rc) {
		snprintf(err, errlen, "the probe could not start: %s", stark_strerror(rc));
		goto out;
	}
	rc = read_all(p[0], child, &out, clock_mono_ns() + wall_ms * 1000000ull);
	if (rc)
		sandbox_kill(child);
	if (sandbox_wait(child, -1, &ex) == 0 && !rc && (ex.how != SANDBOX_EXITED || ex.code != 0)) {
		snprintf(err, errlen, "the probe ended %s %d%s%s", ex.how == SANDBOX_EXITED ? "with status" : "by",
			 ex.how == SANDBOX_EXITED ? ex.code : ex.sig, ex.why[0] ? ": " : "", ex.why);
		rc = ST_EPROTO;
		goto out;
	}
	if (rc) {
		snprintf(err, errlen, "the probe did not finish: %s", stark_strerror(rc));
		goto out;
	}
	*report = json_loadb(out.p ? out.p : "", out.len, 0, &jerr);
	if (!json_is_object(*report) || !json_is_array(json_object_get(*report, "checks"))) {
		snprintf(err, errlen, "the probe's report is not what was expected: %s", jerr.text);
		json_decref(*report);
		*report = NULL;
		rc = ST_EPROTO;
	}
out:
	sandbox_child_free(child);
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	if (null >= 0)
		close(null);
	evalrun_free_env(env);
	dbuf_release(&out);
	return rc;
}

/* A check failing in the jail but passing outside: a bind is missing. */
static void bind_hints(json_t *jailed, const json_t *host)
{
	size_t i, j;
	json_t *c, *h;

	json_array_foreach(json_object_get(jailed, "checks"), i, c) {
		if (json_is_true(json_object_get(c, "ok")))
			continue;
		json_array_foreach(json_object_get(host, "checks"), j, h) {
			char fix[1024];

			if (!json_equal(json_object_get(c, "name"), json_object_get(h, "name")) ||
			    !json_is_true(json_object_get(h, "ok")))
				continue;
			snprintf(fix, sizeof(fix),
				 "present outside the jail (%s): add its folder to STARK_SANDBOX_BINDS, which the jails show read-only",
				 json_string_value(json_object_get(h, "detail")));
			json_object_set_new(c, "fix", json_string(fix));
		}
	}
}

/*
 * The kernel languages and baselines (the probe's "languages" and
 * "baselines"), with what the jail adds: Triton's JIT, and inductor under
 * --baseline compile, exec their tools in the run jail, which needs
 * Landlock to restrict what may run there (sandbox_restrict_exec).  These
 * never change the exit status: CUDA alone is what a device needs.
 */
static void exec_jail_checks(json_t *list, const char *key, const char *needs)
{
	int abi = sandbox_landlock_abi();
	size_t i;
	json_t *l;

	json_array_foreach(list, i, l) {
		const char *what = json_string_value(json_object_get(l, key));
		char detail[700];

		if (!what || strcmp(what, needs) || !json_is_true(json_object_get(l, "ok")) || abi > 0)
			continue;
		snprintf(detail, sizeof(detail),
			 "this kernel has no Landlock, which the run jail needs to restrict what %s may execute: boot with landlock in lsm= (Linux 5.13 or later), or use --sandbox none --insecure-sandbox",
			 strcmp(key, "language") ? "torch.compile" : "Triton's JIT");
		json_object_set_new(l, "ok", json_false());
		json_object_set_new(l, "detail", json_string(detail));
	}
}

/* One section of named entries, each ok or absent with its detail. */
static void print_list(const json_t *list, const char *title, const char *key)
{
	size_t i;
	json_t *l;

	if (!json_array_size(list))
		return;
	printf("%s\n", title);
	json_array_foreach(list, i, l) {
		bool ok = json_is_true(json_object_get(l, "ok"));
		const char *name = json_string_value(json_object_get(l, "name"));

		printf("  %-7s %-26s %s\n", ok ? "ok" : "absent", name ? name : json_string_value(json_object_get(l, key)),
		       json_string_value(json_object_get(l, "detail")));
	}
}

static int print_human(const char *device, json_t *checks, const char *where, const char *toolchain)
{
	size_t i;
	json_t *c;
	bool all = true;

	printf("stark doctor: device %s (the evaluator probed %s)\n", device, where);
	json_array_foreach(checks, i, c) {
		bool ok = json_is_true(json_object_get(c, "ok"));

		all &= ok;
		printf("  %-7s %-26s %s\n", ok ? "ok" : "MISSING", json_string_value(json_object_get(c, "name")),
		       json_string_value(json_object_get(c, "detail")));
		if (!ok)
			printf("          fix: %s\n", json_string_value(json_object_get(c, "fix")));
	}
	if (toolchain)
		printf("toolchain: %s\n", toolchain);
	printf(all ? "everything %s needs is here\n" : "something %s needs is missing: see the fixes above\n",
	       device);
	return all ? CLI_OK : CLI_NEGATIVE;
}

static int parse(int argc, char **argv, struct doctor_args *a)
{
	static const struct option opts[] = {
	    {"device", required_argument, NULL, 'd'}, {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	int c, used;

	a->device = "cpu";
	a->json = false;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'd')
			a->device = optarg;
		else if (c == 'j')
			a->json = true;
		else if (c == 'h')
			return usage(stdout, -1);
		else
			return usage(stderr, CLI_USAGE);
	}
	if (optind != argc)
		return usage(stderr, CLI_USAGE);
	if (strcmp(a->device, "cpu") && strcmp(a->device, "cuda") &&
	    !(str_starts(a->device, "cuda:") && sscanf(a->device + 5, "%d%n", &c, &used) == 1 &&
	      c >= 0 && c < 1000 && a->device[5 + used] == '\0'))
		return stark_error(CLI_USAGE, "doctor: --device must be cpu, cuda or cuda:N, not '%s'", a->device);
	return 0;
}

int cmd_doctor(int argc, char **argv)
{
	struct doctor_args a;
	struct evalrun_opts copts, ropts;
	struct evalrun_binds binds;
	char cache[PATH_MAX], err[PATH_MAX + 256], where[400];
	json_t *checks = json_array(), *report = NULL, *host = NULL, *c;
	const char *toolchain = NULL;
	bool cache_ok;
	size_t i;
	int rc;

	rc = parse(argc, argv, &a);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (!checks)
		return CLI_FAILURE;
	evalrun_opts_init(&copts);
	evalrun_opts_init(&ropts);
	copts.evaluator = cli_evaluator_path();
	cache_ok = evalrun_default_cache(cache, sizeof(cache), err, sizeof(err)) == 0 &&
		   evalrun_cache_prepare(cache, err, sizeof(err)) == 0;
	json_array_append_new(checks, check("build cache", cache_ok, cache_ok ? cache : err,
					    "set STARK_CACHE to a folder this user can write", "every format"));
	jail_checks(checks);
	mem_check(checks);
	/* The binds evaluations get (and, for cuda, the target it finds). */
	evalrun_jail_opts(&copts, &ropts, cache_ok ? cache : "/nonexistent", a.device, false, &binds);
	if (!cache_ok) {
		copts.binds++; /* the store cannot be bound */
		copts.nbinds--;
	}
	if (str_starts(a.device, "cuda"))
		gpu_checks(checks, a.device);
	if (access(copts.evaluator, X_OK) < 0) {
		rc = stark_error(CLI_FAILURE, "doctor: the evaluator '%s' is not there (build it, or set STARK_EVALUATOR)",
				 copts.evaluator);
		goto out;
	}
	snprintf(where, sizeof(where), "in a compile jail");
	if (cli_evaluator_probe(a.device, SANDBOX_COMPILE, &copts, PROBE_WALL_MS, &report, err, sizeof(err))) {
		snprintf(where, sizeof(where), "outside any jail (in the compile jail: %.300s)", err);
		if (cli_evaluator_probe(a.device, SANDBOX_NONE, &copts, PROBE_WALL_MS, &report, err, sizeof(err))) {
			rc = stark_error(CLI_FAILURE, "doctor: %s", err);
			goto out;
		}
	} else {
		json_array_foreach(json_object_get(report, "checks"), i, c) {
			if (!json_is_true(json_object_get(c, "ok")) && !host &&
			    cli_evaluator_probe(a.device, SANDBOX_NONE, &copts, PROBE_WALL_MS, &host, err,
						sizeof(err)) == 0)
				bind_hints(report, host);
		}
	}
	json_array_foreach(json_object_get(report, "checks"), i, c)
		json_array_append(checks, c);
	toolchain = json_string_value(json_object_get(report, "toolchain"));
	if (!json_is_array(json_object_get(report, "languages")))
		json_object_set_new(report, "languages", json_array());
	if (!json_is_array(json_object_get(report, "baselines")))
		json_object_set_new(report, "baselines", json_array());
	exec_jail_checks(json_object_get(report, "languages"), "language", "triton");
	exec_jail_checks(json_object_get(report, "baselines"), "baseline", "compile");
	if (a.json) {
		bool all = true;

		json_array_foreach(checks, i, c)
			all &= json_is_true(json_object_get(c, "ok"));
		json_t *o = json_pack("{s:s, s:b, s:s, s:O, s:O, s:O, s:O, s:O?, s:s?}", "device", a.device,
				      "ok", all, "probed", where, "checks", checks, "formats",
				      json_object_get(report, "formats"), "languages",
				      json_object_get(report, "languages"), "baselines",
				      json_object_get(report, "baselines"), "inputs",
				      json_object_get(report, "inputs"), "toolchain", toolchain);

		if (!o || json_dumpf(o, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) || fputc('\n', stdout) == EOF) {
			json_decref(o);
			rc = CLI_FAILURE;
			goto out;
		}
		json_decref(o);
		rc = all ? CLI_OK : CLI_NEGATIVE;
	} else {
		rc = print_human(a.device, checks, where, toolchain);
		print_list(json_object_get(report, "languages"),
			   "kernel languages (--language; none is needed for the exit status):", "language");
		print_list(json_object_get(report, "baselines"),
			   "baselines (--baseline; none is needed for the exit status):", "baseline");
		print_list(json_object_get(report, "inputs"),
			   "KernelBench's inputs on the CPU (none is needed for the exit status):", "input");
	}
	if (fflush(stdout) == EOF)
		rc = CLI_FAILURE;
out:
	json_decref(checks);
	json_decref(report);
	json_decref(host);
	return rc;
}
