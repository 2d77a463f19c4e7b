/*
 * cmd_bench.c -- `stark bench SUITE...`: a suite of problems under
 * several policies, every run driven by one event loop (engine.h:
 * bench_create, bench_drive); `stark resume BENCH_ID` continues one;
 * the display (a status line on a terminal, one line per event
 * otherwise) and the table at the end.  `stark show BENCH_ID` is in
 * bench_show.c.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#define BENCH_SETS_MAX 64

/* clang-format off */
static void usage(FILE *f)
{
	fprintf(f,
		"usage: stark bench SUITE... [--bench-id ID] [--policies stark,sampling,reflexion] [--budget N]\n"
		"                   [--llm openai:URL|anthropic:URL|replay:FILE|replay:DIR] [--model NAME]\n"
		"                   [--device cpu|cuda|cuda:0,1,...|all] [--runs-in-flight N] [--llm-in-flight K]\n"
		"                   [--evals-per-device N] [--max-dollars D] [--baseline eager|compile]\n"
		"                   [--kb-trials N]\n"
		"                   [--level N] [--eval stark-eval|replay:FILE|replay:DIR]\n"
		"                   [--format kernelbench|fast|triton] [--language cuda|triton] [--precision fp32|fp16|bf16]\n"
		"                   [--store DIR] [--config FILE] [--set KEY=VALUE]... [--insecure-sandbox]\n"
		"  SUITE: a folder of KernelBench problems (level1/ as it is), a list file (a path a line),\n"
		"  or problem files; the level comes from the folder's name (levelN) or --level.\n"
		"  One run per problem and policy, all in this process: up to --runs-in-flight runs at once\n"
		"  (default 8), --llm-in-flight LLM requests across them (default: the runs in flight),\n"
		"  --evals-per-device evaluations on each device (cpu 2, cuda 4).  --max-dollars stops the\n"
		"  bench (resumable) before a call could pass it, counting the calls in flight.\n"
		"  replay:DIR answers each problem STEM.py from DIR/STEM.jsonl.\n"
		"  --kb-trials N: KernelBench's own trials in each evaluation; 0 leaves its verdict\n"
		"  unsought, and its columns of the table null (stark's verdict decides either way) [5].\n"
		"  `stark resume BENCH_ID` continues it; `stark show BENCH_ID [--json|--csv]` prints the table.\n");
}
/* clang-format on */

/* ---- options ---- */

struct bench_args {
	struct bench_spec spec;
	struct cli_suite suite;
	enum search_policy pols[3];
	const char *store_dir, *config, *sets[BENCH_SETS_MAX];
	const char *language; /* --language, or NULL */
	size_t nsets;
	int level;
	char devices[512];
	char llmbuf[PROTO_PATH_MAX + 16], evbuf[PROTO_PATH_MAX + 16];
};

static int parse_policies(struct bench_args *a, const char *v)
{
	char buf[128], *save = NULL, *t;

	snprintf(buf, sizeof(buf), "%s", v);
	a->spec.npolicies = 0;
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		enum search_policy p;

		if (!strcmp(t, "stark"))
			p = POLICY_STARK;
		else if (!strcmp(t, "sampling"))
			p = POLICY_SAMPLING;
		else if (!strcmp(t, "reflexion"))
			p = POLICY_REFLEXION;
		else
			return stark_error(CLI_USAGE,
					   "bench: unknown policy '%s' (stark, sampling, "
					   "reflexion)",
					   t);
		for (size_t i = 0; i < a->spec.npolicies; i++)
			if (a->pols[i] == p)
				return stark_error(CLI_USAGE, "bench: policy '%s' named twice", t);
		a->pols[a->spec.npolicies++] = p;
	}
	return a->spec.npolicies ? 0 : stark_error(CLI_USAGE, "bench: --policies is empty");
}

/* The GPUs nvidia-smi lists, as "cuda:0,cuda:1"; 0 found is an error. */
static int all_gpus(char *out, size_t len)
{
	FILE *p = popen("nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null", "r");
	char line[64];
	size_t n = 0;

	out[0] = '\0';
	while (p && fgets(line, sizeof(line), p)) {
		int idx = atoi(line);

		if (line[0] < '0' || line[0] > '9')
			continue;
		snprintf(out + strlen(out), len - strlen(out), "%scuda:%d", n++ ? "," : "", idx);
	}
	if (p)
		pclose(p);
	return n ? 0 : stark_error(CLI_USAGE, "bench: --device all: nvidia-smi lists no GPU");
}

/* --device: cpu, cuda (cuda:0), cuda:0,1 or cuda:0,cuda:1, all; normalised into out. */
static int parse_devices(const char *v, char *out, size_t len)
{
	char buf[512], *save = NULL, *t;

	if (!strcmp(v, "all"))
		return all_gpus(out, len);
	snprintf(buf, sizeof(buf), "%s", v);
	out[0] = '\0';
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		const char *sep = out[0] ? "," : "";
		char *end;

		if (!strcmp(t, "cpu")) {
			snprintf(out + strlen(out), len - strlen(out), "%scpu", sep);
		} else if (!strcmp(t, "cuda")) {
			snprintf(out + strlen(out), len - strlen(out), "%scuda:0", sep);
		} else {
			const char *num = str_starts(t, "cuda:") ? t + 5 : t;
			long k = strtol(num, &end, 10);

			if (!*num || *end || k < 0 || k > 255)
				return stark_error(
				    CLI_USAGE,
				    "bench: --device wants cpu, cuda, cuda:0,1,... or "
				    "all (got '%s')",
				    v);
			snprintf(out + strlen(out), len - strlen(out), "%scuda:%ld", sep, k);
		}
	}
	return out[0] ? 0 : stark_error(CLI_USAGE, "bench: --device is empty");
}

static int set_key(struct search_config *cfg, const char *kv)
{
	const char *eq = strchr(kv, '=');
	char k[128], err[CLI_ERR_MAX];

	if (!eq || (size_t)(eq - kv) >= sizeof(k))
		return stark_error(CLI_USAGE, "--set wants KEY=VALUE, got '%s'", kv);
	memcpy(k, kv, (size_t)(eq - kv));
	k[eq - kv] = '\0';
	if (search_config_set(cfg, k, eq + 1, err, sizeof(err)))
		return stark_error(CLI_USAGE, "bench: %s", err);
	return 0;
}

static int set_one(struct search_config *cfg, const char *key, const char *v)
{
	char err[CLI_ERR_MAX];

	if (search_config_set(cfg, key, v, err, sizeof(err)))
		return stark_error(CLI_USAGE, "bench: %s", err);
	return 0;
}

static int parse_num(const char *name, const char *v, double lo, double hi, double *out)
{
	char *end;
	double d = v ? strtod(v, &end) : NAN;

	if (!v || end == v || *end || !(d >= lo && d <= hi))
		return stark_error(CLI_USAGE, "bench: %s wants a number in %g..%g (got '%s')", name,
				   lo, hi, v ? v : "");
	*out = d;
	return 0;
}

/* Replay paths are journaled absolute, so resume works from any folder. */
static const char *abs_replay(const char *spec, char *buf, size_t len)
{
	char path[PROTO_PATH_MAX];

	if (!spec || !str_starts(spec, "replay:") || spec[7] == '/' || !realpath(spec + 7, path))
		return spec;
	snprintf(buf, len, "replay:%s", path);
	return buf;
}

static int parse(int argc, char **argv, struct bench_args *a, struct search_config *cfg)
{
	struct bench_spec *s = &a->spec;
	const char *v, *dev = "cpu", *suites[BENCH_PROBLEMS_MAX];
	size_t nsuites = 0;
	double d;
	int rc = 0;

	s->llm = getenv("STARK_LLM");
	s->model = getenv("STARK_MODEL");
	s->eval = "stark-eval";
	s->baseline = "eager";
	s->runs_in_flight = 8;
	a->pols[0] = POLICY_STARK;
	s->npolicies = 1;
	for (int i = 1; i < argc; i++)
		if (cli_opt_value(argc, argv, &i, "--config", &v)) {
			if (!v)
				return CLI_USAGE;
			a->config = v;
		}
	if (a->config) {
		char err[CLI_ERR_MAX];

		if (run_config_load_file(cfg, a->config, err, sizeof(err)))
			return stark_error(CLI_USAGE, "%s", err);
	}
	for (int i = 1; !rc && i < argc; i++) {
		v = NULL;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return -1;
		}
		if (cli_opt_value(argc, argv, &i, "--config", &v))
			continue;
		if (cli_opt_value(argc, argv, &i, "--bench-id", &v))
			s->bench_id = v;
		else if (cli_opt_value(argc, argv, &i, "--policies", &v))
			rc = v ? parse_policies(a, v) : CLI_USAGE;
		else if (cli_opt_value(argc, argv, &i, "--budget", &v))
			rc = v ? set_one(cfg, "budget", v) : CLI_USAGE;
		else if (cli_opt_value(argc, argv, &i, "--llm", &v))
			s->llm = v;
		else if (cli_opt_value(argc, argv, &i, "--model", &v))
			s->model = v;
		else if (cli_opt_value(argc, argv, &i, "--device", &v))
			dev = v;
		else if (cli_opt_value(argc, argv, &i, "--eval", &v))
			s->eval = v;
		else if (cli_opt_value(argc, argv, &i, "--format", &v))
			s->format = v;
		else if (cli_opt_value(argc, argv, &i, "--language", &v))
			a->language = v;
		else if (cli_opt_value(argc, argv, &i, "--precision", &v))
			s->precision = v;
		else if (cli_opt_value(argc, argv, &i, "--store", &v))
			a->store_dir = v;
		else if (cli_opt_value(argc, argv, &i, "--baseline", &v))
			s->baseline = v;
		else if (cli_opt_value(argc, argv, &i, "--kb-trials", &v)) {
			if (cli_kb_trials("bench", v, &s->kb_trials))
				return CLI_USAGE;
		} else if (cli_opt_value(argc, argv, &i, "--runs-in-flight", &v)) {
			if (!(rc = parse_num("--runs-in-flight", v, 1, 4096, &d)))
				s->runs_in_flight = (unsigned)d;
		} else if (cli_opt_value(argc, argv, &i, "--llm-in-flight", &v)) {
			if (!(rc = parse_num("--llm-in-flight", v, 1, 4096, &d)))
				s->llm_in_flight = (unsigned)d;
		} else if (cli_opt_value(argc, argv, &i, "--evals-per-device", &v)) {
			if (!(rc = parse_num("--evals-per-device", v, 1, 64, &d)))
				s->evals_per_device = (unsigned)d;
		} else if (cli_opt_value(argc, argv, &i, "--max-dollars", &v)) {
			rc = parse_num("--max-dollars", v, 0, 1e9, &s->max_dollars);
		} else if (cli_opt_value(argc, argv, &i, "--level", &v)) {
			if (!(rc = parse_num("--level", v, 1, 99, &d)))
				a->level = (int)d;
		} else if (cli_opt_value(argc, argv, &i, "--set", &v)) {
			if (!v || a->nsets == BENCH_SETS_MAX)
				return CLI_USAGE;
			a->sets[a->nsets++] = v;
		} else if (!strcmp(argv[i], "--insecure-sandbox")) {
			s->insecure_sandbox = true;
		} else if (argv[i][0] == '-') {
			stark_warn("bench: unknown option '%s'", argv[i]);
			usage(stderr);
			return CLI_USAGE;
		} else if (nsuites < ST_ARRAY_LEN(suites)) {
			suites[nsuites++] = argv[i];
		}
		if (!rc && !v && argv[i][0] == '-' && strcmp(argv[i], "--insecure-sandbox"))
			return CLI_USAGE;
	}
	if (rc)
		return rc;
	for (size_t i = 0; i < a->nsets; i++)
		if ((rc = set_key(cfg, a->sets[i])))
			return rc;
	if (!nsuites) {
		usage(stderr);
		return CLI_USAGE;
	}
	for (size_t i = 0; !rc && i < nsuites; i++)
		rc = cli_suite_add(&a->suite, suites[i], a->level);
	if (!rc)
		rc = parse_devices(dev, a->devices, sizeof(a->devices));
	if (rc)
		return rc;
	if (!cli_name_in(s->baseline, proto_baselines))
		return stark_error(CLI_USAGE, "bench: --baseline wants eager or compile");
	s->problems = a->suite.p;
	s->nproblems = a->suite.n;
	s->policies = a->pols;
	s->devices = a->devices;
	if (cli_language_format("bench", a->language, a->devices, &s->format, &s->precision))
		return CLI_USAGE;
	if (!s->evals_per_device)
		s->evals_per_device = str_starts(a->devices, "cuda") ? 4 : 2;
	if (!s->llm_in_flight)
		s->llm_in_flight = s->runs_in_flight;
	s->llm = abs_replay(s->llm ? s->llm : "", a->llmbuf, sizeof(a->llmbuf));
	s->eval = abs_replay(s->eval, a->evbuf, sizeof(a->evbuf));
	s->cfg = cfg;
	return 0;
}

static int check(struct bench_args *a, struct search_config *cfg)
{
	struct bench_spec *s = &a->spec;
	char err[CLI_ERR_MAX];

	if (strcmp(s->format, "kernelbench") && strcmp(s->format, "fast"))
		return stark_error(CLI_USAGE, "bench: --format must be kernelbench or fast");
	if (strcmp(s->eval, "stark-eval") && !(str_starts(s->eval, "replay:") && s->eval[7]))
		return stark_error(CLI_USAGE, "bench: --eval must be stark-eval or replay:PATH");
	if (!s->llm[0] || !(str_starts(s->llm, "replay:") || str_starts(s->llm, "openai:") ||
			    str_starts(s->llm, "anthropic:")))
		return stark_error(CLI_USAGE, "bench: --llm must be openai:BASE_URL, "
					      "anthropic:BASE_URL or replay:PATH");
	for (size_t p = 0; p < s->npolicies; p++) {
		struct search_config c = *cfg;

		c.policy = s->policies[p];
		if (search_config_check(&c, err, sizeof(err)))
			return stark_error(CLI_USAGE, "bench: %s", err);
		if (!str_starts(s->llm, "replay:") &&
		    cli_check_routes(&c, s->llm, s->model ? s->model : "", err, sizeof(err)))
			return stark_error(CLI_USAGE, "bench: %s", err);
	}
	return 0;
}

/* ---- the display ---- */

struct display {
	bool tty;
	bool status_shown;
};

static void on_event(void *arg, const struct bench *b, const char *line)
{
	struct display *d = arg;

	(void)b;
	if (d->tty) {
		if (strstr(line, " started (") || strstr(line, ": attempt "))
			return; /* the status line says these */
		fprintf(stderr, "\r\033[K%s\n", line);
		d->status_shown = false;
		return;
	}
	fprintf(stderr, "%s\n", line);
}

static void on_status(void *arg, const struct bench *b, const char *line)
{
	struct display *d = arg;

	(void)b;
	if (!d->tty)
		return;
	fprintf(stderr, "\r\033[K%.*s", 200, line);
	d->status_shown = true;
}

/* ---- driving ---- */

static int make_shared(struct bench *b, struct llm_provider **llm, struct eval_provider **eval)
{
	const char *spec = bench_opt(b, "llm", ""), *ev = bench_opt(b, "eval", "stark-eval");
	const json_t *runs = json_object_get(b->spec, "runs");
	enum search_policy pols[3];
	size_t npol = 0;
	char err[CLI_ERR_MAX] = "", devs[512], *save = NULL, *t;
	const char *list[EVAL_DEVICES_MAX];
	size_t ndev = 0;
	int rc;

	*llm = NULL;
	*eval = NULL;
	for (size_t i = 0; i < b->nruns && npol < 3; i++) {
		bool seen = false;

		for (size_t j = 0; j < npol; j++)
			seen |= pols[j] == b->runs[i].policy;
		if (!seen)
			pols[npol++] = b->runs[i].policy;
	}
	(void)runs;
	if (!str_starts(spec, "replay:")) {
		rc = cli_bench_llm(
		    &b->cfg, pols, npol, spec, bench_opt(b, "model", ""),
		    (uint32_t)jr_u64(json_object_get(b->spec, "options"), "llm_in_flight", 8), true,
		    llm, err, sizeof(err));
		if (rc)
			return stark_error(CLI_USAGE, "bench %s: %s", b->id, err);
	}
	if (str_starts(ev, "replay:"))
		return 0;
	snprintf(devs, sizeof(devs), "%s", bench_opt(b, "device", "cpu"));
	for (t = strtok_r(devs, ",", &save); t && ndev < EVAL_DEVICES_MAX;
	     t = strtok_r(NULL, ",", &save))
		list[ndev++] = t;
	rc = eval_provider_pool(
	    cli_evaluator_path(), list, ndev,
	    (unsigned)jr_u64(json_object_get(b->spec, "options"), "evals_per_device", 2), eval);
	if (rc) {
		llm_provider_free(*llm);
		*llm = NULL;
		return stark_error(CLI_USAGE, "bench %s: cannot set up the evaluation pool", b->id);
	}
	return 0;
}

static void print_spend(const struct bench *b)
{
	double most = bench_max_dollars(b),
	       cap = jr_real(json_object_get(b->spec, "options"), "max_dollars", 0);

	fprintf(stderr, "bench %s: %zu runs; the most it can spend is $%.2f%s", b->id, b->nruns,
		most, most == 0 ? " (no prices set: price.MODEL or price_in/price_out.ROLE)" : "");
	if (cap > 0)
		fprintf(stderr, "; it stops at $%.2f (--max-dollars)", cap);
	fputc('\n', stderr);
	if (!strcmp(bench_opt(b, "baseline", "eager"), "compile"))
		fprintf(stderr,
			"bench %s: --baseline compile: each evaluation also times the reference "
			"under torch.compile (compiled before the candidate loads; its compile "
			"time is the evaluation's); the table adds the figures against it\n",
			b->id);
}

static int drive(struct bench *b)
{
	struct display d = {.tty = isatty(STDOUT_FILENO) && isatty(STDERR_FILENO)};
	struct bench_io io = {.make = cli_bench_replay,
			      .stop = &cli_stop,
			      .event = on_event,
			      .status = on_status,
			      .arg = &d};
	char err[CLI_ERR_MAX];
	int rc;

	rc = make_shared(b, &io.llm, &io.eval);
	if (rc)
		return rc;
	print_spend(b);
	rc = bench_drive(b, &io, err, sizeof(err));
	if (d.status_shown)
		fputc('\n', stderr);
	llm_provider_free(io.llm);
	eval_provider_free(io.eval);
	if (rc) {
		stark_warn("%s", err);
		return CLI_FAILURE;
	}
	rc = cli_bench_print(b, stdout);
	if (b->state == RUN_FINISHED)
		return rc;
	stark_warn("bench %s %s: %s; continue with `stark resume %s`", b->id,
		   run_state_name(b->state), b->reason, b->id);
	return CLI_FAILURE;
}

int cmd_bench(int argc, char **argv)
{
	struct bench_args a;
	struct search_config cfg;
	struct store *st = NULL;
	struct bench *b = NULL;
	char err[CLI_ERR_MAX] = "";
	int rc;

	memset(&a, 0, sizeof(a));
	search_config_defaults(&cfg);
	rc = parse(argc, argv, &a, &cfg);
	if (rc < 0) {
		rc = CLI_OK;
		goto out;
	}
	if (!rc)
		rc = check(&a, &cfg);
	if (!rc)
		rc = cli_open_store(a.store_dir, &st);
	if (rc)
		goto out;
	cli_catch_signals();
	if (bench_create(st, &a.spec, &b, err, sizeof(err))) {
		stark_warn("%s", err);
		rc = CLI_FAILURE;
		goto out;
	}
	printf("%s\n", b->id);
	fflush(stdout);
	rc = drive(b);
out:
	bench_free(b);
	store_close(st);
	cli_suite_release(&a.suite);
	return rc;
}

/* A run of b that is not finished and may continue only with
 * --accept-upgrade (run_needs_upgrade), or NULL. */
static const char *unrecorded_run(struct bench *b)
{
	char err[CLI_ERR_MAX];

	for (size_t i = 0; i < b->nruns; i++) {
		struct run *r = NULL;
		bool old;

		if (run_load(b->st, b->runs[i].run_id, false, &r, err, sizeof(err)))
			continue; /* not created yet, or the loop will say why */
		old = r->state != RUN_FINISHED && run_needs_upgrade(r);
		run_free(r);
		if (old)
			return b->runs[i].run_id;
	}
	return NULL;
}

int cli_bench_resume(struct store *st, const char *id, const char *cap, bool accept)
{
	struct bench *b = NULL;
	char err[CLI_ERR_MAX];
	const char *old;
	int rc;

	cli_catch_signals();
	rc = bench_load(st, id, true, &b, err, sizeof(err));
	if (rc == ST_EBUSY) {
		pid_t pid;

		if (!store_lock_holder(st, id, &pid))
			stark_warn(
			    "bench %s is in use by process %ld; wait for it or stop it first", id,
			    (long)pid);
		else
			stark_warn("bench %s is in use by another process", id);
		return CLI_FAILURE;
	}
	if (rc) {
		stark_warn("%s", err);
		return CLI_FAILURE;
	}
	old = b->state == RUN_FINISHED ? NULL : unrecorded_run(b);
	if (old && !accept) {
		stark_warn("bench %s has runs that this stark %s would change (e.g. %s: `stark "
			   "resume %s --dry-run` says how); `stark resume %s --accept-upgrade` "
			   "continues them",
			   id, stark_release(), old, old, id);
		bench_free(b);
		return CLI_USAGE;
	}
	b->accept_upgrade = accept;
	if (cap && bench_set_cap(b, strtod(cap, NULL))) {
		bench_free(b);
		return stark_error(CLI_FAILURE, "bench %s: cannot journal its new cap", id);
	}
	printf("%s\n", b->id);
	fflush(stdout);
	if (b->state == RUN_FINISHED) {
		stark_warn("bench %s already finished (%s); nothing to resume", id, b->reason);
		rc = cli_bench_print(b, stdout);
	} else {
		rc = drive(b);
	}
	bench_free(b);
	return rc;
}
