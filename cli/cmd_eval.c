/*
 * cmd_eval.c -- `stark eval PROBLEM.py SOLUTION.py`: judge one candidate;
 * `stark eval --batch FILE`: judge many, one JSON object per line.
 *
 * Builds a request from the two files and the options, hands it to a
 * stark-eval process through pool/pool.h (stark itself never imports torch or
 * runs the candidate), and prints the verdict: a short human report, or
 * with --json one JSON object on stdout whose names are a stable contract
 * (status, correct, runtime_us, ref_runtime_us, speedup, message, and the
 * other result fields; NaN numbers are null).
 *
 * The evaluator processes are forked by one zygote (pool/pool.h), started
 * once per `stark eval` and reused by every stage and every pair of a
 * batch, unless $STARK_ZYGOTE is 0 (then each is exec'd, as before).  With
 * --sandbox none the zygote is used as well: its children are then
 * unjailed, exactly as exec'd ones would be.
 *
 * A batch file has one pair per line, "PROBLEM.py SOLUTION.py" (blank lines
 * and lines starting with # are skipped; paths cannot contain blanks).
 * Up to --jobs evaluations are in flight at once; the output keeps the
 * input's order.  On a CUDA device every run stage gets the GPU's lock
 * file on fd 4 (EVAL_FD_LOCK): the machine's for that GPU, which every
 * stark process on it shares (evalrun_gpu_lock_path), or --gpu-lock's.  The
 * referee holds it exclusively while it times and shared while it runs
 * other GPU work (evaluator.h), so timings take the GPU one at a time and
 * alone, while compiles overlap everything and checks overlap each other.
 * SIGINT/SIGTERM cancel what is in flight.
 *
 * Here: the options and the single evaluation.  eval_env.c builds the
 * requests and the stages' options, eval_print.c prints verdicts,
 * eval_batch.c runs batches.
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
#include "cli/cli.h"

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
		"  --l2-flush on|off      on a GPU, flush the L2 cache before every timed call;\n"
		"                         off times with what the cache holds, as KernelBench's\n"
		"                         published times do [on]\n"
		"  --verdict stark|kernelbench  which verdict decides the status: stark's own, or\n"
		"                         KernelBench's (torch.allclose, atol=rtol=1e-4, on its\n"
		"                         harness's 5 inputs); the result carries both [stark]\n"
		"  --kb-trials N          KernelBench's trials (its num_correct_trials, 0-%u);\n"
		"                         0 skips its verdict, half of an evaluation where the\n"
		"                         inputs take GiBs (made on the CPU, as its harness\n"
		"                         does) [5]\n"
		"  --language auto|cuda|triton|cute|tilelang|tk  the candidate's kernel language;\n"
		"                         auto reads its imports and decorators; a language\n"
		"                         this machine cannot judge is `error` naming what is\n"
		"                         missing (stark doctor lists them) [auto]\n"
		"  --precision fp32|fp16|bf16  cast floating inputs and weights to this dtype,\n"
		"                         as KernelBench's harness does; tolerances follow the\n"
		"                         outputs' dtype (fp32 1e-4, fp16/bf16 1e-2) [fp32]\n"
		"  --baseline eager|compile  compile also times the reference under\n"
		"                         torch.compile (default mode) and reports the speedup\n"
		"                         against it too (speedup_compile); where the reference\n"
		"                         cannot be compiled the result says why [eager]\n"
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
		"  --gpu-lock FILE        the GPU's lock file, so timings take it one at a time\n"
		"                         and alone (created if missing) [on cuda, the\n"
		"                         machine's: $STARK_LOCK_DIR or /tmp/stark-UID, shared\n"
		"                         with every stark process on that GPU]\n"
		"\n"
		"$STARK_ZYGOTE=0 execs every evaluator process instead of forking it from one\n"
		"started evaluator (slower; for comparisons).\n"
		"\n"
		"Exit status: 0 correct, 1 another verdict, 2 usage or input error, 3 internal failure.\n",
		EVAL_DEFAULT_WALL_MS / 1000, dflt.min_reps, dflt.target_rse, PROTO_PLACEMENTS_MAX,
		dflt.placements, PROTO_TRIALS_MAX, BATCH_JOBS_MAX);
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
		{"placements", required_argument, NULL, 'P'},
		{"l2-flush", required_argument, NULL, 'F'},	 {"verdict", required_argument, NULL, 'V'},
		{"language", required_argument, NULL, 'G'},	 {"precision", required_argument, NULL, 'p'},
		{"baseline", required_argument, NULL, 'A'},	 {"kb-trials", required_argument, NULL, 'K'},
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c;

	memset(a, 0, sizeof(*a));
	snprintf(a->device, sizeof(a->device), "cpu");
	a->timing = true;
	a->trials = 5;
	a->kb_trials = 5;
	a->wall_ms = EVAL_DEFAULT_WALL_MS;
	a->jobs = 1;
	a->stage = -1;
	a->target_rse = NAN;
	a->l2_flush = -1;
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
		case 'K':
			if (str_to_u64(optarg, 0, PROTO_TRIALS_MAX, &v))
				return stark_error(CLI_USAGE, "eval: --kb-trials must be 0..%u, not '%s'", PROTO_TRIALS_MAX, optarg);
			a->kb_trials = (uint32_t)v;
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
		case 'F':
			if (strcmp(optarg, "on") && strcmp(optarg, "off"))
				return stark_error(CLI_USAGE, "eval: --l2-flush must be on or off, not '%s'", optarg);
			a->l2_flush = !strcmp(optarg, "on");
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
		case 'G':
			if (!cli_name_in(optarg, proto_languages))
				return stark_error(CLI_USAGE, "eval: --language must be auto, cuda, triton, cute, tilelang or tk, not '%s'", optarg);
			a->language = optarg;
			break;
		case 'p':
			if (!cli_name_in(optarg, proto_precisions))
				return stark_error(CLI_USAGE, "eval: --precision must be fp32, fp16 or bf16, not '%s'", optarg);
			a->precision = optarg;
			break;
		case 'A':
			if (!cli_name_in(optarg, proto_baselines))
				return stark_error(CLI_USAGE, "eval: --baseline must be eager or compile, not '%s'", optarg);
			a->baseline = optarg;
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
	if (a->kb_trials == 0 && a->verdict && !strcmp(a->verdict, "kernelbench"))
		return stark_error(CLI_USAGE, "eval: --verdict kernelbench needs KernelBench's trials, not --kb-trials 0");
	if (a->no_jail && !a->insecure)
		return stark_error(CLI_USAGE, "eval: --sandbox none runs untrusted code unjailed; add --insecure-sandbox to mean it");
	if (!a->batch) {
		a->problem = argv[optind];
		a->solution = argv[optind + 1];
	}
	return 0;
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
	rc = cli_eval_request(a, a->problem, a->solution, 0, e->cache, &rq, err, sizeof(err));
	if (rc) {
		rc = stark_error(rc, "eval: %s", err);
		goto out;
	}
	cli_eval_env_zygote(e);
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
	rc = a->json ? cli_eval_print_json(a, &rs, &info) : cli_eval_print_human(&rs, &info);
	if (!rc)
		rc = rs.status == PROTO_ST_CORRECT ? CLI_OK : CLI_NEGATIVE;
out:
	evalrun_pair_free(p);
	evalrun_info_release(&info);
	proto_result_release(&rs);
	proto_request_release(&rq);
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
	rc = cli_eval_env_init(&a, &e);
	if (!rc)
		rc = a.batch ? cli_eval_batch(&a, &e) : eval_single(&a, &e);
	cli_eval_env_release(&e);
	return rc;
}
