/*
 * cmd_eval.c -- `stark eval PROBLEM.py SOLUTION.py`: judge one candidate;
 * `stark eval --batch FILE`: judge many, one JSON object per line.
 *
 * Builds a request from the two files and the options, hands it to a
 * stark-eval process through evalrun.h (stark itself never imports torch or
 * runs the candidate), and prints the verdict: a short human report, or
 * with --json one JSON object on stdout whose names are a stable contract
 * (status, correct, runtime_us, ref_runtime_us, speedup, message, and the
 * other result fields; NaN numbers are null).
 *
 * The evaluator processes are forked by one zygote (evalrun.h), started
 * once per `stark eval` and reused by every stage and every pair of a
 * batch, unless $STARK_ZYGOTE is 0 (then each is exec'd, as before).  With
 * --sandbox none the zygote is used as well: its children are then
 * unjailed, exactly as exec'd ones would be.
 *
 * A batch file has one pair per line, "PROBLEM.py SOLUTION.py" (blank lines
 * and lines starting with # are skipped; paths cannot contain blanks).
 * Up to --jobs evaluations are in flight at once; the output keeps the
 * input's order.  On a CUDA device with --jobs > 1 (or --gpu-lock FILE),
 * every run stage gets the same lock file on fd 4 (EVAL_FD_LOCK): the
 * referee holds it exclusively while it times and shared while it runs
 * other GPU work (evaluator.h), so timings take the GPU one at a time and
 * alone, while compiles overlap everything and checks overlap each other.
 * SIGINT/SIGTERM cancel what is in flight.
 *
 * Exit status: 0 correct (every pair, in a batch), 1 any other verdict, 2
 * usage or input errors (missing, unreadable, empty or oversized files, bad
 * options, a malformed batch line), 3 internal failures (the evaluator
 * could not be started).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "evaluator/evaluator.h"
#include "orchestrator/cli.h"
#include "orchestrator/evalrun.h"

#define HUMAN_LOG_LINES 60
#define JSON_OUTPUT_TAIL 4096
#define BATCH_FILE_MAX (16u << 20) /* bytes of a batch file */
#define BATCH_JOBS_MAX 64	   /* --jobs */

struct eval_args {
	const char *problem, *solution;
	const char *batch; /* --batch FILE ("-": stdin), or NULL */
	char device[32];
	bool json, timing, have_seed, insecure, no_jail;
	int stage;	   /* enum evalrun_stages, or -1: the default */
	uint64_t seed;
	uint32_t trials, wall_ms, jobs;
	uint32_t min_reps;  /* --min-reps, or 0: the request's default */
	uint32_t placements; /* --placements, or 0: the request's default */
	double target_rse;  /* --target-rse, or NAN: the request's default */
	const char *cache;
	const char *gpu_lock; /* --gpu-lock FILE, or NULL */
	const char *verdict;  /* --verdict stark|kernelbench, or NULL: stark */
};

/* How evaluations start: the options of both stages, and the zygote. */
struct eval_env {
	struct evalrun_opts copts, ropts;
	struct evalrun_binds binds;
	struct evalrun_zygote *zygote;
	enum evalrun_stages mode;
	char cache[PATH_MAX];
	int lock_fd;
};

static void usage(FILE *f)
{
	struct proto_request dflt;

	proto_request_init(&dflt);
	fprintf(f,
		"usage: stark eval PROBLEM.py SOLUTION.py [options]\n"
		"       stark eval --batch FILE|- [--jobs N] [options]\n"
		"\n"
		"Judges SOLUTION.py (class ModelNew) against PROBLEM.py (KernelBench format:\n"
		"class Model, get_inputs, get_init_inputs) in a separate evaluator process.\n"
		"\n"
		"  --device cpu|cuda[:N]  where to run [cpu]\n"
		"  --json                 print one JSON object instead of a report\n"
		"  --trials N             correctness trials on fresh inputs [5]\n"
		"  --seed N               master seed (default: random, never shown to the candidate)\n"
		"  --timeout SECONDS      wall-clock budget of the evaluation [%u]\n"
		"  --no-timing            check correctness only\n"
		"  --min-reps N           timed calls of each model before the timing may stop [%u]\n"
		"  --target-rse X         stop timing when both medians' relative standard\n"
		"                         errors are at most X (0-1) [%g]\n"
		"  --placements N         on a GPU, try N memory pools for the timed calls'\n"
		"                         inputs and allocations (over 4: keep each model's\n"
		"                         fastest 4 by a scan) and report the fastest\n"
		"                         pool's times (1-%u) [%u]\n"
		"  --verdict stark|kernelbench  which verdict decides the status: stark's own, or\n"
		"                         KernelBench's (torch.allclose, atol=rtol=1e-4, on its\n"
		"                         harness's 5 inputs); the result carries both [stark]\n"
		"  --cache DIR            build cache [$STARK_CACHE, $XDG_CACHE_HOME/stark, ~/.cache/stark]\n"
		"  --stage all|split|auto one evaluator process; a compile process then a run\n"
		"                         process sharing the cache; or split only when the\n"
		"                         solution builds an extension (load_inline,\n"
		"                         cpp_extension), else the run process alone\n"
		"                         [split when jailed, auto with --batch; all unjailed]\n"
		"  --sandbox jail|none    judge in the compile and run jails (SECURITY.md) [jail]\n"
		"  --insecure-sandbox     run even where this machine lacks layers of the jail,\n"
		"                         or with --sandbox none (untrusted code, less isolated)\n"
		"  --batch FILE|-         judge every \"PROBLEM.py SOLUTION.py\" line of FILE\n"
		"                         (# comments and blank lines skipped), printing one\n"
		"                         JSON object per line, in input order\n"
		"  --jobs N               batch evaluations in flight at once (1-%u) [1]\n"
		"  --gpu-lock FILE        lock file shared with other stark processes on this\n"
		"                         GPU, so timings take it one at a time and alone\n"
		"                         (created if missing; with --jobs N > 1 on cuda a\n"
		"                         private one is used by default)\n"
		"\n"
		"$STARK_ZYGOTE=0 execs every evaluator process instead of forking it from one\n"
		"started evaluator (slower; for comparisons).\n"
		"\n"
		"Exit status: 0 correct, 1 another verdict, 2 usage or input error, 3 internal failure.\n",
		EVAL_DEFAULT_WALL_MS / 1000, dflt.min_reps, dflt.target_rse, PROTO_PLACEMENTS_MAX,
		dflt.placements, BATCH_JOBS_MAX);
}

static bool device_ok(const char *d)
{
	uint64_t n;

	if (!strcmp(d, "cpu") || !strcmp(d, "cuda"))
		return true;
	return str_starts(d, "cuda:") && !str_to_u64(d + 5, 0, 999, &n);
}

static int parse_args(int argc, char **argv, struct eval_args *a)
{
	static const struct option longopts[] = {
		{"device", required_argument, NULL, 'd'}, {"json", no_argument, NULL, 'j'},
		{"trials", required_argument, NULL, 't'}, {"seed", required_argument, NULL, 's'},
		{"timeout", required_argument, NULL, 'T'}, {"no-timing", no_argument, NULL, 'n'},
		{"cache", required_argument, NULL, 'c'},	 {"stage", required_argument, NULL, 'S'},
		{"sandbox", required_argument, NULL, 'B'},	 {"insecure-sandbox", no_argument, NULL, 'I'},
		{"batch", required_argument, NULL, 'b'},	 {"jobs", required_argument, NULL, 'J'},
		{"gpu-lock", required_argument, NULL, 'L'},	 {"help", no_argument, NULL, 'h'},
		{"min-reps", required_argument, NULL, 'r'},	 {"target-rse", required_argument, NULL, 'R'},
		{"placements", required_argument, NULL, 'P'},	 {"verdict", required_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c;

	memset(a, 0, sizeof(*a));
	snprintf(a->device, sizeof(a->device), "cpu");
	a->timing = true;
	a->trials = 5;
	a->wall_ms = EVAL_DEFAULT_WALL_MS;
	a->jobs = 1;
	a->stage = -1;
	a->target_rse = NAN;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (!device_ok(optarg) || strlen(optarg) >= sizeof(a->device))
				return stark_error(CLI_USAGE, "eval: --device must be cpu, cuda or cuda:N, not '%s'", optarg);
			snprintf(a->device, sizeof(a->device), "%s", optarg);
			break;
		case 'j': a->json = true; break;
		case 'n': a->timing = false; break;
		case 'c': a->cache = optarg; break;
		case 't':
			if (str_to_u64(optarg, 1, PROTO_TRIALS_MAX, &v))
				return stark_error(CLI_USAGE, "eval: --trials must be 1..%u, not '%s'", PROTO_TRIALS_MAX, optarg);
			a->trials = (uint32_t)v;
			break;
		case 's':
			if (str_to_u64(optarg, 0, UINT64_MAX, &a->seed))
				return stark_error(CLI_USAGE, "eval: --seed must be an unsigned integer, not '%s'", optarg);
			a->have_seed = true;
			break;
		case 'T':
			if (str_to_u64(optarg, 1, PROTO_TIME_MS_MAX / 1000, &v))
				return stark_error(CLI_USAGE, "eval: --timeout must be 1..%u seconds, not '%s'", PROTO_TIME_MS_MAX / 1000, optarg);
			a->wall_ms = (uint32_t)(v * 1000);
			break;
		case 'S':
			if (!strcmp(optarg, "all"))
				a->stage = EVALRUN_ONE;
			else if (!strcmp(optarg, "split"))
				a->stage = EVALRUN_SPLIT;
			else if (!strcmp(optarg, "auto"))
				a->stage = EVALRUN_AUTO;
			else
				return stark_error(CLI_USAGE, "eval: --stage must be all, split or auto, not '%s'", optarg);
			break;
		case 'b': a->batch = optarg; break;
		case 'r':
			if (str_to_u64(optarg, 1, PROTO_REPS_MAX, &v))
				return stark_error(CLI_USAGE, "eval: --min-reps must be 1..%u, not '%s'", PROTO_REPS_MAX, optarg);
			a->min_reps = (uint32_t)v;
			break;
		case 'P':
			if (str_to_u64(optarg, 1, PROTO_PLACEMENTS_MAX, &v))
				return stark_error(CLI_USAGE, "eval: --placements must be 1..%u, not '%s'", PROTO_PLACEMENTS_MAX, optarg);
			a->placements = (uint32_t)v;
			break;
		case 'R':
			if (str_to_double(optarg, &a->target_rse) || !(a->target_rse >= 0.0 && a->target_rse <= 1.0))
				return stark_error(CLI_USAGE, "eval: --target-rse must be a number from 0 to 1, not '%s'", optarg);
			break;
		case 'J':
			if (str_to_u64(optarg, 1, BATCH_JOBS_MAX, &v))
				return stark_error(CLI_USAGE, "eval: --jobs must be 1..%u, not '%s'", BATCH_JOBS_MAX, optarg);
			a->jobs = (uint32_t)v;
			break;
		case 'B':
			if (strcmp(optarg, "jail") && strcmp(optarg, "none"))
				return stark_error(CLI_USAGE, "eval: --sandbox must be jail or none, not '%s'", optarg);
			a->no_jail = !strcmp(optarg, "none");
			break;
		case 'I': a->insecure = true; break;
		case 'V':
			if (strcmp(optarg, "stark") && strcmp(optarg, "kernelbench"))
				return stark_error(CLI_USAGE, "eval: --verdict must be stark or kernelbench, not '%s'", optarg);
			a->verdict = optarg;
			break;
		case 'L':
			if (!*optarg)
				return stark_error(CLI_USAGE, "eval: --gpu-lock needs a file name");
			a->gpu_lock = optarg;
			break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			stark_warn("eval: unknown or incomplete option '%s'", argv[optind - 1]);
			usage(stderr);
			return CLI_USAGE;
		}
	}
	if (argc - optind != (a->batch ? 0 : 2)) {
		if (a->batch)
			stark_warn("eval: --batch takes its pairs from the file, not the command line");
		usage(stderr);
		return CLI_USAGE;
	}
	if (a->jobs > 1 && !a->batch)
		return stark_error(CLI_USAGE, "eval: --jobs goes with --batch");
	if (a->no_jail && !a->insecure)
		return stark_error(CLI_USAGE, "eval: --sandbox none runs untrusted code unjailed; add --insecure-sandbox to mean it");
	if (!a->batch) {
		a->problem = argv[optind];
		a->solution = argv[optind + 1];
	}
	return 0;
}


/* The build cache, from --cache or the default; 0 or a CLI_* exit status. */
static int find_cache(const struct eval_args *a, char *cache, size_t cachelen)
{
	char err[512];

	if (a->cache) {
		if (!realpath(a->cache, cache))
			return stark_error(CLI_USAGE, "eval: build cache '%s' is not a folder we can use", a->cache);
		if (strlen(cache) >= cachelen || strlen(cache) > PROTO_PATH_MAX)
			return stark_error(CLI_USAGE, "eval: build cache path is too long");
	} else if (evalrun_default_cache(cache, cachelen, err, sizeof(err))) {
		return stark_error(CLI_USAGE, "eval: %s", err);
	}
	return 0;
}

/*
 * Fills the request for one pair (index n of a batch, 0 otherwise); 0, or
 * a CLI_* exit status with the message in err (not printed).
 */
static int build_request(const struct eval_args *a, const char *problem, const char *solution,
			 size_t n, const char *cache, struct proto_request *rq, char *err,
			 size_t errlen)
{
	char id[64];
	int rc;

	rc = evalrun_load_sources(rq, problem, solution, err, errlen);
	if (rc)
		return rc == ST_ENOMEM ? CLI_FAILURE : CLI_USAGE;
	if (a->batch)
		snprintf(id, sizeof(id), "eval-%ld-%ld-%zu", (long)getpid(), (long)time(NULL), n);
	else
		snprintf(id, sizeof(id), "eval-%ld-%ld", (long)getpid(), (long)time(NULL));
	rq->id = str_dup(id);
	rq->device = str_dup(a->device);
	/* The fast format is the one whose solutions use stark_cuda. */
	rq->format = str_dup(memmem(rq->solution_src, rq->solution_len, "stark_cuda", 10) ? "fast"
										  : "kernelbench");
	rq->cache_dir = str_dup(cache);
	rq->verdict = str_dup(a->verdict ? a->verdict : "stark");
	if (!rq->id || !rq->device || !rq->format || !rq->cache_dir || !rq->verdict) {
		snprintf(err, errlen, "out of memory");
		return CLI_FAILURE;
	}
	rq->stage = PROTO_STAGE_ALL;
	rq->trials = a->trials;
	rq->timing = a->timing;
	if (a->min_reps) {
		rq->min_reps = a->min_reps;
		if (rq->max_reps < rq->min_reps)
			rq->max_reps = rq->min_reps;
	}
	if (a->placements)
		rq->placements = a->placements;
	if (!isnan(a->target_rse))
		rq->target_rse = a->target_rse;
	rq->wall_ms = a->wall_ms;
	rq->seed = a->seed;
	if (!a->have_seed && getrandom(&rq->seed, sizeof(rq->seed), 0) != (ssize_t)sizeof(rq->seed)) {
		snprintf(err, errlen, "cannot draw a random seed");
		return CLI_FAILURE;
	}
	return 0;
}

/* ---- output ---------------------------------------------------------- */

static json_t *num(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

static json_t *str_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t left)
{
	size_t n;
	uint32_t cp;

	if (p[0] >= 0x20 && p[0] < 0x80)
		return 1;
	if (p[0] == '\n' || p[0] == '\t' || p[0] == '\r')
		return 1;
	if (p[0] < 0xc2 || p[0] > 0xf4)
		return 0;
	n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : 2;
	if (n > left)
		return 0;
	cp = p[0] & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* The last n bytes of captured output as a JSON string: control bytes and
 * invalid UTF-8 (candidates print anything) become '?'. */
static json_t *tail(const char *p, size_t len, size_t n)
{
	const unsigned char *s;
	char *copy;
	size_t k = 0;
	json_t *j;

	if (!p || !len)
		return json_null();
	if (len > n) {
		p += len - n;
		len = n;
	}
	copy = malloc(len + 1);
	if (!copy)
		return json_null();
	s = (const unsigned char *)p;
	for (size_t i = 0; i < len;) {
		size_t q = utf8_seq(s + i, len - i);

		if (q == 0) {
			copy[k++] = '?';
			i++;
			continue;
		}
		memcpy(copy + k, s + i, q);
		k += q;
		i += q;
	}
	j = json_stringn(copy, k);
	free(copy);
	return j ? j : json_null();
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* How the evaluation's processes started and ran, as seen by stark. */
static json_t *timing_json(const struct evalrun_info *info)
{
	json_t *t = json_object(), *stages = json_array();

	if (!t || !stages) {
		json_decref(t);
		json_decref(stages);
		return json_null();
	}
	for (unsigned i = 0; i < info->nstages && i < ST_ARRAY_LEN(info->stage); i++) {
		const struct evalrun_stage_info *si = &info->stage[i];

		json_array_append_new(
		    stages, json_pack("{s:s,s:b,s:I,s:I,s:f,s:f,s:f,s:f}", "stage", si->stage,
				      "zygote", si->zygote, "zygote_pid", (json_int_t)si->zygote_pid,
				      "zygote_starts", (json_int_t)si->zygote_starts, "spawn_ms",
				      ms(si->spawn_ns), "fork_ms", ms(si->fork_ns), "jail_ms",
				      ms(si->jail_ns), "wall_ms", ms(si->wall_ns)));
	}
	json_object_set_new(t, "stages", stages);
	return t;
}

/* The result as the JSON object of the contract (the top of the file). */
/* One verdict of "verdicts": its status (null where it was not reached),
 * whether it is correct, and why. */
static json_t *verdict_json(const char *status, const char *reason)
{
	json_t *o = json_object();

	if (!o)
		return json_null();
	json_object_set_new(o, "status", str_or_null(status));
	json_object_set_new(o, "correct", json_boolean(status && !strcmp(status, "correct")));
	json_object_set_new(o, "reason", str_or_null(reason));
	return o;
}

/* "verdicts": stark's and KernelBench's.  Where the evaluation ended before
 * the verdicts were recorded (a build or load failure, a rejection, crash
 * or timeout during the trials), stark's is the status and KernelBench's
 * is not known (null). */
static json_t *verdicts_json(const struct proto_result *rs)
{
	bool reached = rs->stark_status && *rs->stark_status;
	json_t *o = json_object(), *kb;

	if (!o)
		return json_null();
	json_object_set_new(o, "stark", verdict_json(reached ? rs->stark_status
							   : proto_status_name(rs->status),
						   reached ? rs->stark_reason : rs->message));
	kb = verdict_json(rs->kb_status, rs->kb_reason);
	if (json_is_object(kb)) {
		json_object_set_new(kb, "trials_run", json_integer(rs->kb_trials_run));
		json_object_set_new(kb, "trials_passed", json_integer(rs->kb_trials_passed));
		json_object_set_new(kb, "max_difference", num(rs->kb_max_diff));
	}
	json_object_set_new(o, "kernelbench", kb);
	return o;
}

static json_t *result_json(const struct eval_args *a, const char *problem, const char *solution,
			   const struct proto_result *rs, const struct evalrun_info *info)
{
	json_t *o = json_object(), *flags = json_array(), *env = json_object(), *st = json_object();
	static const char *const stage_names[4] = {"startup_ms", "compile_ms", "check_ms", "time_ms"};
	char layers[256];

	if (!o || !flags || !env || !st) {
		json_decref(o);
		json_decref(flags);
		json_decref(env);
		json_decref(st);
		return NULL;
	}
	for (uint32_t i = 0; i < rs->nflags; i++)
		json_array_append_new(flags, json_string(rs->flags[i]));
	for (uint32_t i = 0; i < rs->nenv; i++)
		json_object_set_new(env, rs->env[i].key, json_string(rs->env[i].val));
	for (int i = 0; i < 4; i++)
		json_object_set_new(st, stage_names[i], num(rs->stage_ms[i]));
	sandbox_layers_str(info->layers, layers, sizeof(layers));
	json_object_set_new(o, "status", json_string(proto_status_name(rs->status)));
	json_object_set_new(o, "correct", json_boolean(rs->status == PROTO_ST_CORRECT));
	json_object_set_new(o, "runtime_us", num(rs->runtime_us));
	json_object_set_new(o, "ref_runtime_us", num(rs->ref_runtime_us));
	json_object_set_new(o, "speedup", num(rs->speedup));
	json_object_set_new(o, "message", str_or_null(rs->message));
	json_object_set_new(o, "runtime_ci_us", json_pack("[oo]", num(rs->runtime_lo_us), num(rs->runtime_hi_us)));
	json_object_set_new(o, "ref_runtime_ci_us", json_pack("[oo]", num(rs->ref_lo_us), num(rs->ref_hi_us)));
	json_object_set_new(o, "reps", json_integer(rs->reps));
	json_object_set_new(o, "trials_run", json_integer(rs->trials_run));
	json_object_set_new(o, "trials_passed", json_integer(rs->trials_passed));
	json_object_set_new(o, "max_abs_err", num(rs->max_abs_err));
	json_object_set_new(o, "max_rel_err", num(rs->max_rel_err));
	json_object_set_new(o, "first_bad", str_or_null(rs->first_bad));
	json_object_set_new(o, "flags", flags);
	json_object_set_new(o, "verdict", json_string(rs->verdict && *rs->verdict ? rs->verdict
						     : a->verdict ? a->verdict : "stark"));
	json_object_set_new(o, "verdicts", verdicts_json(rs));
	json_object_set_new(o, "env", env);
	json_object_set_new(o, "stage_ms", st);
	json_object_set_new(o, "log", str_or_null(rs->log));
	json_object_set_new(o, "id", json_string(rs->id ? rs->id : ""));
	json_object_set_new(o, "problem", json_string(problem));
	json_object_set_new(o, "solution", json_string(solution));
	json_object_set_new(o, "device", json_string(a->device));
	json_object_set_new(o, "sandbox", json_string(layers));
	json_object_set_new(o, "stdout", tail(info->out, info->out_len, JSON_OUTPUT_TAIL));
	json_object_set_new(o, "stderr", tail(info->err, info->err_len, JSON_OUTPUT_TAIL));
	json_object_set_new(o, "stdout_bytes", json_integer((json_int_t)info->out_total));
	json_object_set_new(o, "stderr_bytes", json_integer((json_int_t)info->err_total));
	json_object_set_new(o, "wall_ms", json_real(ms(info->total_ns)));
	json_object_set_new(o, "timing", timing_json(info));
	return o;
}

static int print_json(const struct eval_args *a, const struct proto_result *rs,
		      const struct evalrun_info *info)
{
	json_t *o = result_json(a, a->problem, a->solution, rs, info);
	int rc = CLI_FAILURE;

	if (o && json_dumpf(o, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII) == 0 &&
	    fputc('\n', stdout) != EOF && fflush(stdout) == 0)
		rc = 0;
	else
		stark_warn("eval: cannot write the JSON result");
	json_decref(o);
	return rc;
}

static void fmt_us(char *buf, size_t len, double us)
{
	if (!isfinite(us))
		snprintf(buf, len, "n/a");
	else if (us >= 1e6)
		snprintf(buf, len, "%.3f s", us / 1e6);
	else if (us >= 1e3)
		snprintf(buf, len, "%.3f ms", us / 1e3);
	else
		snprintf(buf, len, "%.1f us", us);
}

static void print_log(const char *log)
{
	const char *p = log;
	int lines = 0;

	while (*p && lines < HUMAN_LOG_LINES) {
		const char *nl = strchr(p, '\n');
		int n = nl ? (int)(nl - p) : (int)strlen(p);

		printf("  | %.*s\n", n, p);
		lines++;
		p += n + (nl ? 1 : 0);
	}
	if (*p)
		printf("  | [... the rest is in `stark eval --json` \"log\" ...]\n");
}

static int print_human(const struct proto_result *rs, const struct evalrun_info *info)
{
	char c[32], clo[32], chi[32], r[32], rlo[32], rhi[32];
	bool timed = rs->status == PROTO_ST_CORRECT && isfinite(rs->runtime_us);
	bool staged = false;

	if (timed) {
		/* The message repeats the timings; the lines below say it better. */
		printf("correct: %u of %u trials match (max abs err %.3g, max rel err %.3g)\n",
		       rs->trials_passed, rs->trials_run, rs->max_abs_err, rs->max_rel_err);
		fmt_us(c, sizeof(c), rs->runtime_us);
		fmt_us(clo, sizeof(clo), rs->runtime_lo_us);
		fmt_us(chi, sizeof(chi), rs->runtime_hi_us);
		fmt_us(r, sizeof(r), rs->ref_runtime_us);
		fmt_us(rlo, sizeof(rlo), rs->ref_lo_us);
		fmt_us(rhi, sizeof(rhi), rs->ref_hi_us);
		printf("  candidate  %-12s median, 95%% CI [%s, %s]\n", c, clo, chi);
		printf("  reference  %-12s median, 95%% CI [%s, %s]\n", r, rlo, rhi);
		printf("  speedup    %.3gx (%u timed calls of each, interleaved)\n", rs->speedup,
		       rs->reps);
		/* Flags' reasons and a verdict that differs are in the message. */
		if (rs->nflags || (rs->kb_status && *rs->kb_status && strcmp(rs->kb_status, "correct")))
			printf("  message    %s\n", rs->message ? rs->message : "");
	} else {
		printf("%s: %s\n", proto_status_name(rs->status), rs->message ? rs->message : "");
	}
	for (uint32_t i = 0; i < rs->nflags; i++)
		printf("  flag       %s\n", rs->flags[i]);
	if (rs->stark_status && *rs->stark_status)
		printf("  verdicts   stark %s, kernelbench %s (%u of %u trials within torch.allclose);"
		       " %s decides\n",
		       rs->stark_status, rs->kb_status && *rs->kb_status ? rs->kb_status : "n/a",
		       rs->kb_trials_passed, rs->kb_trials_run,
		       rs->verdict && *rs->verdict ? rs->verdict : "stark");
	for (int i = 0; i < 4; i++)
		staged |= isfinite(rs->stage_ms[i]);
	if (staged)
		printf("  stages     startup %.0f ms, compile %.0f ms, check %.0f ms, timing %.0f ms; total %.1f s\n",
		       isfinite(rs->stage_ms[0]) ? rs->stage_ms[0] : 0.0,
		       isfinite(rs->stage_ms[1]) ? rs->stage_ms[1] : 0.0,
		       isfinite(rs->stage_ms[2]) ? rs->stage_ms[2] : 0.0,
		       isfinite(rs->stage_ms[3]) ? rs->stage_ms[3] : 0.0, (double)info->wall_ns / 1e9);
	if (rs->log && *rs->log)
		print_log(rs->log);
	if (info->out_total > info->out_len || info->err_total > info->err_len)
		printf("  note       the evaluation printed %llu bytes to stdout and %llu to stderr; the first %u of each were kept\n",
		       (unsigned long long)info->out_total, (unsigned long long)info->err_total,
		       EVAL_OUTPUT_CAP);
	return fflush(stdout) == 0 ? 0 : CLI_FAILURE;
}

/* ---- evaluations -------------------------------------------------------- */

/* The GPU lock: the --gpu-lock file, or for --jobs an unlinked file of our
 * own, shared by the jobs.  Opened for reading and writing: the referee
 * takes shared (read) and exclusive (write) record locks on it. */
static int open_lock(const char *given)
{
	const char *dir = getenv("TMPDIR");
	char path[PATH_MAX];
	struct stat st;
	int fd;

	if (given) {
		fd = open(given, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return stark_error(-1, "eval: cannot open the GPU lock file %s: %s", given, strerror(errno));
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			return stark_error(-1, "eval: the GPU lock %s is not a regular file", given);
		}
		return fd;
	}
	snprintf(path, sizeof(path), "%s/stark-gpu-lock-XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return stark_error(-1, "eval: cannot create the GPU lock file %s: %s", path, strerror(errno));
	unlink(path);
	return fd;
}

/* Options of both stages, the zygote, the lock; 0 or a CLI_* exit status. */
static int eval_env_init(const struct eval_args *a, struct eval_env *e)
{
	int rc;

	memset(e, 0, sizeof(*e));
	e->lock_fd = -1;
	rc = find_cache(a, e->cache, sizeof(e->cache));
	if (rc)
		return rc;
	evalrun_opts_init(&e->copts);
	e->copts.evaluator = cli_evaluator_path();
	if (access(e->copts.evaluator, X_OK) < 0)
		return stark_error(CLI_FAILURE, "eval: the evaluator '%s' is not there (build it, or set STARK_EVALUATOR)",
				   e->copts.evaluator);
	e->ropts = e->copts;
	if (!a->no_jail) {
		/* Jailed, an evaluation is split (or, in auto, skips a compile
		 * stage with nothing to build): the compile jail may exec the
		 * toolchain, the run jail may not (SECURITY.md). */
		evalrun_jail_opts(&e->copts, &e->ropts, e->cache, a->device, a->insecure, &e->binds);
		e->mode = a->stage == EVALRUN_AUTO || (a->stage < 0 && a->batch) ? EVALRUN_AUTO
										 : EVALRUN_SPLIT;
	} else {
		e->mode = a->stage < 0 ? EVALRUN_ONE : (enum evalrun_stages)a->stage;
	}
	if ((a->jobs > 1 || a->gpu_lock) && str_starts(a->device, "cuda")) {
		e->lock_fd = open_lock(a->gpu_lock);
		if (e->lock_fd < 0)
			return CLI_FAILURE;
		e->ropts.lock_fd = e->lock_fd;
	}
	return 0;
}

/* The zygote every evaluation of this command forks from, if wanted. */
static void eval_env_zygote(struct eval_env *e)
{
	if (evalrun_zygote_wanted() &&
	    evalrun_zygote_start(e->copts.evaluator, NULL, &e->zygote) != 0)
		stark_warn("eval: evaluating without a zygote (each evaluator process is exec'd)");
	e->copts.zygote = e->ropts.zygote = e->zygote;
}

static void eval_env_release(struct eval_env *e)
{
	evalrun_zygote_free(e->zygote);
	e->zygote = NULL;
	if (e->lock_fd >= 0)
		close(e->lock_fd);
	e->lock_fd = -1;
}

/* A failure to run at all, as a CLI status with its message. */
static int run_failure(int rc)
{
	if (rc == ST_EDENIED)
		return stark_error(CLI_FAILURE, "eval: this machine cannot build the whole jail (see the warning above); --insecure-sandbox runs the evaluation with the layers it has");
	return stark_error(CLI_FAILURE, "eval: the evaluation could not run: %s", stark_strerror(rc));
}

static int eval_single(const struct eval_args *a, struct eval_env *e)
{
	struct proto_request rq;
	struct proto_result rs;
	struct evalrun_info info;
	struct evalrun_pair *p = NULL;
	char err[512];
	int rc, prc = 0;

	proto_request_init(&rq);
	proto_result_init(&rs);
	evalrun_info_init(&info);
	rc = build_request(a, a->problem, a->solution, 0, e->cache, &rq, err, sizeof(err));
	if (rc) {
		rc = stark_error(rc, "eval: %s", err);
		goto out;
	}
	eval_env_zygote(e);
	rc = evalrun_pair_start(&e->copts, &e->ropts, &rq, e->mode, &p);
	if (!rc) {
		while ((prc = evalrun_pair_poll(p, -1)) == 0)
			;
		rc = evalrun_pair_finish(p, &rs, &info);
	}
	if (rc || prc < 0) {
		rc = run_failure(rc ? rc : prc);
		goto out;
	}
	rc = a->json ? print_json(a, &rs, &info) : print_human(&rs, &info);
	if (!rc)
		rc = rs.status == PROTO_ST_CORRECT ? CLI_OK : CLI_NEGATIVE;
out:
	evalrun_pair_free(p);
	evalrun_info_release(&info);
	proto_result_release(&rs);
	proto_request_release(&rq);
	return rc;
}

/* ---- batches ------------------------------------------------------------ */

static volatile sig_atomic_t batch_stop;

static void on_stop(int sig)
{
	(void)sig;
	batch_stop = 1;
}

/* One line of the batch. */
struct batch_item {
	char *problem, *solution; /* point into the file's text */
	struct proto_request rq;
	struct evalrun_pair *pair; /* in flight, or NULL */
	char *json;		   /* the line to print, once done */
	bool failed;		   /* could not run: exit status 3 */
	bool correct;
};

struct batch {
	struct batch_item *items;
	size_t n, next_start, next_print, in_flight;
	struct dbuf text;
};

/* Splits the batch file into pairs; 0 or CLI_USAGE with a message. */
static int batch_parse(struct batch *b, const char *file)
{
	char *save = NULL, *line;
	size_t lineno = 0, cap = 0;
	int rc;

	dbuf_init(&b->text, BATCH_FILE_MAX);
	rc = !strcmp(file, "-") ? 0 : io_read_file(file, BATCH_FILE_MAX, &b->text);
	if (!strcmp(file, "-")) {
		char buf[65536];
		ssize_t r;

		while ((r = read(0, buf, sizeof(buf))) != 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 || dbuf_append(&b->text, buf, (size_t)r)) {
				rc = ST_EIO;
				break;
			}
		}
	}
	if (rc)
		return stark_error(CLI_USAGE, "eval: batch file '%s' cannot be read (%s)", file,
				   rc == ST_ETOOBIG ? "too large" : stark_strerror(rc));
	if (!b->text.p)
		return 0;
	for (line = strtok_r(b->text.p, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *words[3] = {NULL}, *ws = NULL;
		size_t k = 0;

		lineno++;
		line[strcspn(line, "\r")] = '\0';
		for (char *w = strtok_r(line, " \t", &ws); w; w = strtok_r(NULL, " \t", &ws))
			words[k < 3 ? k++ : 2] = w;
		if (k == 0 || words[0][0] == '#')
			continue;
		if (k != 2)
			return stark_error(CLI_USAGE, "eval: batch line %zu: expected \"PROBLEM.py SOLUTION.py\"", lineno);
		if (b->n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct batch_item *it = realloc(b->items, ncap * sizeof(*it));

			if (!it)
				return stark_error(CLI_FAILURE, "eval: out of memory");
			b->items = it;
			cap = ncap;
		}
		memset(&b->items[b->n], 0, sizeof(b->items[b->n]));
		b->items[b->n].problem = words[0];
		b->items[b->n].solution = words[1];
		proto_request_init(&b->items[b->n].rq);
		b->n++;
	}
	return 0;
}

static void batch_release(struct batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		evalrun_pair_free(b->items[i].pair);
		proto_request_release(&b->items[i].rq);
		free(b->items[i].json);
	}
	free(b->items);
	dbuf_release(&b->text);
}

/* The line for a pair that was not evaluated: status "error", and why. */
static void item_error(const struct eval_args *a, struct batch_item *it, size_t idx,
		       const char *why)
{
	json_t *o = json_pack("{s:s,s:b,s:s,s:s,s:s,s:s,s:I}", "status", "error", "correct", 0,
			      "message", why, "problem", it->problem, "solution", it->solution,
			      "device", a->device, "index", (json_int_t)idx);

	it->json = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	json_decref(o);
}

/* Starts pair idx (or records why it cannot run). */
static void batch_start(const struct eval_args *a, struct eval_env *e, struct batch *b, size_t idx)
{
	struct batch_item *it = &b->items[idx];
	char err[512], msg[600];
	int rc;

	rc = build_request(a, it->problem, it->solution, idx, e->cache, &it->rq, err, sizeof(err));
	if (!rc) {
		rc = evalrun_pair_start(&e->copts, &e->ropts, &it->rq, e->mode, &it->pair);
		if (rc) {
			snprintf(err, sizeof(err), "the evaluation could not run: %s", stark_strerror(rc));
			rc = CLI_FAILURE;
		}
	}
	if (!rc) {
		b->in_flight++;
		return;
	}
	snprintf(msg, sizeof(msg), "%s", err);
	it->failed = rc == CLI_FAILURE;
	item_error(a, it, idx, msg);
}

/* A pair is done: its line. */
static void batch_finish(const struct eval_args *a, struct batch *b, size_t idx, int prc)
{
	struct batch_item *it = &b->items[idx];
	struct proto_result rs;
	struct evalrun_info info;
	json_t *o;
	int rc;

	proto_result_init(&rs);
	evalrun_info_init(&info);
	rc = evalrun_pair_finish(it->pair, &rs, &info);
	evalrun_pair_free(it->pair);
	it->pair = NULL;
	b->in_flight--;
	if (rc || prc < 0) {
		it->failed = true;
		item_error(a, it, idx, rc ? "out of memory" : "the run stage could not be started");
	} else {
		o = result_json(a, it->problem, it->solution, &rs, &info);
		if (o)
			json_object_set_new(o, "index", json_integer((json_int_t)idx));
		it->json = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
		json_decref(o);
		it->correct = rs.status == PROTO_ST_CORRECT;
	}
	evalrun_info_release(&info);
	proto_result_release(&rs);
	proto_request_release(&it->rq);
	proto_request_init(&it->rq);
}

/* Prints every finished line that is next in input order. */
static int batch_print(struct batch *b)
{
	while (b->next_print < b->n && b->items[b->next_print].json) {
		struct batch_item *it = &b->items[b->next_print];

		if (puts(it->json) == EOF || fflush(stdout) != 0)
			return stark_error(CLI_FAILURE, "eval: cannot write the batch's results");
		free(it->json);
		it->json = NULL;
		b->next_print++;
	}
	return 0;
}

/* Polls every pair in flight once, for up to timeout_ms. */
static void batch_poll(const struct eval_args *a, struct batch *b, int timeout_ms)
{
	struct pollfd pfd[BATCH_JOBS_MAX * EVALRUN_POLLFDS];
	size_t n = 0;

	for (size_t i = b->next_print; i < b->next_start; i++) {
		int t = -1;

		if (!b->items[i].pair)
			continue;
		n += evalrun_pair_pollfds(b->items[i].pair, pfd + n, ST_ARRAY_LEN(pfd) - n, &t);
		if (t >= 0 && t < timeout_ms)
			timeout_ms = t;
	}
	if (poll(pfd, (nfds_t)n, timeout_ms) < 0 && errno != EINTR)
		stark_warn("eval: poll: %s", strerror(errno));
	for (size_t i = b->next_print; i < b->next_start; i++) {
		struct batch_item *it = &b->items[i];
		int prc;

		if (!it->pair)
			continue;
		if (batch_stop)
			evalrun_pair_cancel(it->pair);
		prc = evalrun_pair_poll(it->pair, 0);
		if (prc != 0)
			batch_finish(a, b, i, prc);
	}
}

static int eval_batch(const struct eval_args *a, struct eval_env *e)
{
	struct batch b = {0};
	struct sigaction sa;
	size_t window = a->jobs * 4 > 16 ? a->jobs * 4 : 16;
	bool all_correct = true, failed = false;
	int rc;

	rc = batch_parse(&b, a->batch);
	if (rc)
		goto out;
	eval_env_zygote(e);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (b.next_print < b.n) {
		/* Start what the jobs and the output window allow. */
		while (!batch_stop && b.next_start < b.n && b.in_flight < a->jobs &&
		       b.next_start - b.next_print < window)
			batch_start(a, e, &b, b.next_start++);
		if (batch_stop)
			for (size_t i = b.next_start; i < b.n; i++)
				if (!b.items[i].json)
					item_error(a, &b.items[i], i, "the evaluation was canceled");
		if (batch_stop)
			b.next_start = b.n;
		rc = batch_print(&b);
		if (rc)
			goto out;
		if (b.in_flight)
			batch_poll(a, &b, 1000);
	}
	for (size_t i = 0; i < b.n; i++) {
		all_correct &= b.items[i].correct;
		failed |= b.items[i].failed;
	}
	rc = batch_stop || failed ? CLI_FAILURE : all_correct ? CLI_OK : CLI_NEGATIVE;
out:
	batch_release(&b);
	return rc;
}

int cmd_eval(int argc, char **argv)
{
	struct eval_args a;
	struct eval_env e;
	int rc;

	rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	rc = eval_env_init(&a, &e);
	if (!rc)
		rc = a.batch ? eval_batch(&a, &e) : eval_single(&a, &e);
	eval_env_release(&e);
	return rc;
}
