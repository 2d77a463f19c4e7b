/*
 * cmd_search.c -- `stark run` and `stark resume`: their options, the
 * store, signals, and the exit status; the work is the engine's
 * (engine/engine.h: run_create, run_load, run_loop), with the providers
 * providers.c makes.  `stark show`, `stark export`, `stark list` and
 * `stark report` are in cmd_show.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

/* Runs the loop and turns its ending into an exit status. */
static int drive(struct run *r)
{
	struct llm_provider *llm;
	struct eval_provider *eval;
	char err[CLI_ERR_MAX];
	int rc;

	rc = cli_make_providers(r, &llm, &eval);
	if (rc) {
		if (run_set_state(r, RUN_FAILED,
				  "its llm or evaluation provider could not be set up"))
			stark_warn("run %s: cannot journal its state", r->id);
		stark_warn(
		    "run %s stopped before its first attempt; fix the cause and `stark resume %s`",
		    r->id, r->id);
		return rc;
	}
	r->progress = stderr;
	r->progress_tty = isatty(STDERR_FILENO);
	run_attach(r, llm, eval, &cli_stop);
	rc = run_loop(r, err, sizeof(err));
	llm_provider_free(llm);
	eval_provider_free(eval);
	if (rc) {
		stark_warn("%s", err);
		return CLI_FAILURE;
	}
	switch (r->state) {
	case RUN_FINISHED:
		if (run_best(r) == TREE_NONE) {
			stark_warn("run %s finished (%s) without a correct candidate", r->id,
				   r->reason);
			return CLI_NEGATIVE;
		}
		if (!run_beats_reference(r, run_best(r))) {
			stark_warn(
			    "run %s finished (%s): no candidate beat the reference; the fastest "
			    "correct one, node %u, runs at %.2fx (`stark export %s --fastest -o "
			    "FILE` writes it)",
			    r->id, r->reason, run_best(r), tree_node(r->tree, run_best(r))->speedup,
			    r->id);
			return CLI_NEGATIVE;
		}
		printf("run %s finished (%s): best %.2fx (node %u); `stark export %s -o FILE`\n",
		       r->id, r->reason, tree_node(r->tree, run_best(r))->speedup, run_best(r),
		       r->id);
		return CLI_OK;
	case RUN_INTERRUPTED:
		stark_warn("run %s interrupted: %s; continue with `stark resume %s`", r->id,
			   r->reason, r->id);
		return CLI_FAILURE;
	default:
		stark_warn("run %s failed: %s; continue with `stark resume %s`", r->id, r->reason,
			   r->id);
		return CLI_FAILURE;
	}
}

/* clang-format off */
static void run_usage(void)
{
	fprintf(stderr,
		"usage: stark run PROBLEM.py [--run-id ID] [--budget N] [--policy stark|sampling|reflexion]\n"
		"                 [--llm openai:BASE_URL | anthropic:BASE_URL | replay:FILE] [--model NAME]\n"
		"                 [--device cpu|cuda[:N]] [--store DIR] [--config FILE]\n"
		"                 [--set KEY=VALUE]... [--eval stark-eval|replay:FILE]\n"
		"                 [--format kernelbench|fast|triton] [--language cuda|triton]\n"
		"                 [--precision fp32|fp16|bf16] [--baseline eager|compile] [--kb-trials N]\n"
		"                 [--insecure-sandbox]\n"
		"  Candidates are judged in the compile and run jails (SECURITY.md); where this\n"
		"  machine lacks layers the run refuses unless --insecure-sandbox is given.\n"
		"  --format defaults to fast on cuda and kernelbench on cpu; --language triton (the\n"
		"  same as --format triton) has the agents write Triton kernels (cuda only).\n"
		"  --precision casts inputs and weights as KernelBench's harness does [fp32].\n"
		"  --baseline compile also times the reference under torch.compile in every\n"
		"  evaluation and reports speedups against both (docs/BENCH.md) [eager].\n"
		"  --kb-trials N: KernelBench's own trials in each evaluation; 0 leaves its verdict\n"
		"  unsought (stark's decides either way) [5].\n"
		"  --llm defaults to $STARK_LLM, --model to $STARK_MODEL; llm.ROLE, model.ROLE and the\n"
		"  other per-role keys of --config / --set give a role its own server, model and\n"
		"  settings (docs/RUNS.md).  The API key comes from $STARK_API_KEY (or OPENAI_API_KEY /\n"
		"  ANTHROPIC_API_KEY; api_key_env.ROLE names a role's own).  --eval replay:FILE answers\n"
		"  evaluations from recorded results (tests, ablations); the default is stark-eval.\n");
}
/* clang-format on */

static bool llm_spec_ok(const char *s)
{
	return s && ((str_starts(s, "openai:") && s[7]) || (str_starts(s, "anthropic:") && s[10]) ||
		     (str_starts(s, "replay:") && s[7]));
}

/* Replay paths are journaled absolute, so resume works from any folder. */
static const char *abs_spec(const char *spec, const char *prefix, char *buf, size_t len)
{
	size_t n = strlen(prefix);
	char path[PROTO_PATH_MAX];

	if (!spec || !str_starts(spec, prefix) || spec[n] == '/' || !realpath(spec + n, path))
		return spec;
	snprintf(buf, len, "%s%s", prefix, path);
	return buf;
}

int cmd_run(int argc, char **argv)
{
	struct run_spec spec = {.device = "cpu", .eval = "stark-eval", .format = NULL};
	const char *language = NULL;
	const char *store_dir = NULL, *config = NULL, *v;
	char err[CLI_ERR_MAX], llmbuf[PROTO_PATH_MAX + 16], evbuf[PROTO_PATH_MAX + 16];
	struct search_config cfg;
	struct store *st = NULL;
	struct run *r = NULL;
	int rc = CLI_USAGE;

	search_config_defaults(&cfg);
	spec.llm = getenv("STARK_LLM");
	spec.model = getenv("STARK_MODEL");
	/* First pass: the config file, so flags override it wherever they are. */
	for (int i = 1; i < argc; i++)
		if (cli_opt_value(argc, argv, &i, "--config", &v)) {
			if (!v)
				return CLI_USAGE;
			config = v;
		}
	if (config && run_config_load_file(&cfg, config, err, sizeof(err)))
		return stark_error(CLI_USAGE, "%s", err);
	for (int i = 1; i < argc; i++) {
		const char *key = NULL;

		v = NULL;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			run_usage();
			return CLI_OK;
		}
		if (cli_opt_value(argc, argv, &i, "--config", &v))
			continue;
		if (cli_opt_value(argc, argv, &i, "--run-id", &v))
			spec.run_id = v;
		else if (cli_opt_value(argc, argv, &i, "--llm", &v))
			spec.llm = v;
		else if (cli_opt_value(argc, argv, &i, "--model", &v))
			spec.model = v;
		else if (cli_opt_value(argc, argv, &i, "--device", &v))
			spec.device = v;
		else if (cli_opt_value(argc, argv, &i, "--store", &v))
			store_dir = v;
		else if (cli_opt_value(argc, argv, &i, "--eval", &v))
			spec.eval = v;
		else if (cli_opt_value(argc, argv, &i, "--format", &v))
			spec.format = v;
		else if (cli_opt_value(argc, argv, &i, "--language", &v))
			language = v;
		else if (cli_opt_value(argc, argv, &i, "--precision", &v))
			spec.precision = v;
		else if (cli_opt_value(argc, argv, &i, "--baseline", &v))
			spec.baseline = v;
		else if (cli_opt_value(argc, argv, &i, "--kb-trials", &v)) {
			if (cli_kb_trials("run", v, &spec.kb_trials))
				return CLI_USAGE;
		}
		else if (!strcmp(argv[i], "--insecure-sandbox"))
			spec.insecure_sandbox = true;
		else if (cli_opt_value(argc, argv, &i, "--budget", &v))
			key = "budget";
		else if (cli_opt_value(argc, argv, &i, "--policy", &v))
			key = "policy";
		else if (cli_opt_value(argc, argv, &i, "--set", &v)) {
			const char *eq = v ? strchr(v, '=') : NULL;
			char k[128];

			if (!eq || (size_t)(eq - v) >= sizeof(k))
				return stark_error(CLI_USAGE, "--set wants KEY=VALUE, got '%s'",
						   v ? v : "");
			memcpy(k, v, (size_t)(eq - v));
			k[eq - v] = '\0';
			if (search_config_set(&cfg, k, eq + 1, err, sizeof(err)))
				return stark_error(CLI_USAGE, "%s", err);
			continue;
		} else if (argv[i][0] == '-') {
			stark_warn("run: unknown option '%s'", argv[i]);
			run_usage();
			return CLI_USAGE;
		} else if (!spec.problem_path) {
			spec.problem_path = argv[i];
			continue;
		} else {
			return stark_error(CLI_USAGE, "run: one problem file only ('%s' is extra)",
					   argv[i]);
		}
		if (!v)
			return CLI_USAGE;
		if (key && search_config_set(&cfg, key, v, err, sizeof(err)))
			return stark_error(CLI_USAGE, "%s", err);
	}
	if (!spec.problem_path) {
		run_usage();
		return CLI_USAGE;
	}
	if (spec.llm && *spec.llm && !llm_spec_ok(spec.llm))
		return stark_error(CLI_USAGE,
				   "run: --llm must be openai:BASE_URL, anthropic:BASE_URL or "
				   "replay:FILE (got '%s')",
				   spec.llm);
	if (!spec.llm)
		spec.llm = "";
	/* every role the policy asks must reach a model, with settings its dialect can say */
	if (!str_starts(spec.llm, "replay:") &&
	    cli_check_routes(&cfg, spec.llm, spec.model ? spec.model : "", err, sizeof(err)))
		return stark_error(CLI_USAGE, "run: %s", err);
	if (strcmp(spec.eval, "stark-eval") && !(str_starts(spec.eval, "replay:") && spec.eval[7]))
		return stark_error(CLI_USAGE, "run: --eval must be stark-eval or replay:FILE");
	if (strcmp(spec.device, "cpu") && strcmp(spec.device, "cuda") &&
	    !str_starts(spec.device, "cuda:"))
		return stark_error(CLI_USAGE, "run: --device must be cpu, cuda or cuda:N");
	/* The fast format needs NVRTC and a GPU; on the CPU agents write C++
	 * through load_inline. */
	if (cli_language_format("run", language, spec.device, &spec.format, &spec.precision))
		return CLI_USAGE;
	if (spec.baseline && !cli_name_in(spec.baseline, proto_baselines))
		return stark_error(CLI_USAGE, "run: --baseline must be eager or compile, not '%s'",
				   spec.baseline);
	if (search_config_check(&cfg, err, sizeof(err)))
		return stark_error(CLI_USAGE, "run: %s", err);
	spec.llm = abs_spec(spec.llm, "replay:", llmbuf, sizeof(llmbuf));
	spec.eval = abs_spec(spec.eval, "replay:", evbuf, sizeof(evbuf));
	spec.cfg = &cfg;
	rc = cli_open_store(store_dir, &st);
	if (rc)
		return rc;
	cli_catch_signals();
	if (run_create(st, &spec, &r, err, sizeof(err))) {
		stark_warn("%s", err);
		rc = CLI_FAILURE;
		goto out_close;
	}
	printf("%s\n", r->id);
	fflush(stdout);
	rc = drive(r);
out_close:
	run_free(r);
	store_close(st);
	return rc;
}

#define RESUME_USAGE                                                                               \
	"usage: stark resume RUN_ID|BENCH_ID [--store DIR] [--dry-run] [--config FILE] [--set "    \
	"KEY=VALUE]... [--max-dollars D (a bench)] [--accept-upgrade]"
#define RESUME_SETS_MAX 64

/*
 * Applies `--config FILE` and `--set KEY=VALUE` of a resume to the run's
 * configuration, journaled (run_config_change: only how roles reach their
 * models may change).  0, or a CLI exit status.
 */
static int resume_settings(struct run *r, const char *file, const char *const *sets, size_t n)
{
	struct search_config c = r->cfg;
	const char *spec = jr_str(r->options, "llm", ""), *model = jr_str(r->options, "model", "");
	char err[CLI_ERR_MAX], *changed = NULL;

	if (!file && !n)
		return CLI_OK;
	if (file && run_config_load_file(&c, file, err, sizeof(err)))
		return stark_error(CLI_USAGE, "resume: %s", err);
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(sets[i], '=');
		char k[128];

		if (!eq || (size_t)(eq - sets[i]) >= sizeof(k))
			return stark_error(CLI_USAGE, "--set wants KEY=VALUE, got '%s'", sets[i]);
		memcpy(k, sets[i], (size_t)(eq - sets[i]));
		k[eq - sets[i]] = '\0';
		if (search_config_set(&c, k, eq + 1, err, sizeof(err)))
			return stark_error(CLI_USAGE, "resume: %s", err);
	}
	if (search_config_check(&c, err, sizeof(err)) ||
	    (!str_starts(spec, "replay:") && route_check(&c, spec, model, err, sizeof(err))))
		return stark_error(CLI_USAGE, "resume: %s", err);
	if (run_config_change(r, &c, &changed, err, sizeof(err)))
		return stark_error(CLI_USAGE, "resume %s: %s", r->id, err);
	fprintf(stderr, "run %s: settings changed: %s\n", r->id, changed);
	free(changed);
	return CLI_OK;
}

int cmd_resume(int argc, char **argv)
{
	const char *store_dir = NULL, *id = NULL, *config = NULL, *v, *sets[RESUME_SETS_MAX];
	const char *cap = NULL;
	size_t nsets = 0;
	bool dry = false, accept = false, needs;
	char err[CLI_ERR_MAX], note[RUN_REASON_MAX + CLI_ERR_MAX];
	struct store *st = NULL;
	struct run *r = NULL;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (cli_opt_value(argc, argv, &i, "--store", &v)) {
			if (!v)
				return CLI_USAGE;
			store_dir = v;
		} else if (cli_opt_value(argc, argv, &i, "--config", &v)) {
			if (!v)
				return CLI_USAGE;
			config = v;
		} else if (cli_opt_value(argc, argv, &i, "--set", &v)) {
			if (!v || nsets == RESUME_SETS_MAX)
				return stark_error(CLI_USAGE, RESUME_USAGE);
			sets[nsets++] = v;
		} else if (!strcmp(argv[i], "--dry-run")) {
			dry = true;
		} else if (!strcmp(argv[i], "--accept-upgrade")) {
			accept = true;
		} else if (cli_opt_value(argc, argv, &i, "--max-dollars", &v)) {
			char *end;

			cap = v;
			if (!v || strtod(v, &end) < 0 || end == v || *end)
				return stark_error(CLI_USAGE, "resume: --max-dollars wants an amount");
		} else if (argv[i][0] == '-' || id) {
			return stark_error(CLI_USAGE, RESUME_USAGE);
		} else {
			id = argv[i];
		}
	}
	if (!id)
		return stark_error(CLI_USAGE, RESUME_USAGE);
	rc = cli_open_store(store_dir, &st);
	if (rc)
		return rc;
	if (bench_is(st, id)) {
		if (dry || config || nsets)
			rc = stark_error(CLI_USAGE, "resume %s: a bench resumes as it was asked "
						    "(--dry-run, --config and --set are for runs; "
						    "--max-dollars D changes its cap)",
					 id);
		else
			rc = cli_bench_resume(st, id, cap, accept);
		goto out_close;
	}
	if (cap) {
		rc = stark_error(CLI_USAGE, "resume %s: --max-dollars is for benches", id);
		goto out_close;
	}
	cli_catch_signals();
	rc = run_load(st, id, true, &r, err, sizeof(err));
	if (rc == ST_EBUSY) {
		pid_t pid;

		if (!store_lock_holder(st, id, &pid))
			stark_warn("run %s is in use by process %ld; wait for it or stop it first",
				   id, (long)pid);
		else
			stark_warn("run %s is in use by another process", id);
		rc = CLI_FAILURE;
		goto out_close;
	}
	if (rc) {
		stark_warn("%s", err);
		rc = rc == ST_ENOENT || rc == ST_EINVAL ? CLI_USAGE : CLI_FAILURE;
		goto out_close;
	}
	printf("%s\n", r->id);
	fflush(stdout);
	if (dry) {
		if (run_upgrade_note(r, note, sizeof(note)))
			printf("%s\n", note);
		show_resume_plan(r, stdout);
		rc = CLI_OK;
		goto out_close;
	}
	if (r->state == RUN_FINISHED) {
		stark_warn("run %s already finished (%s); nothing to resume", id, r->reason);
		rc = CLI_OK;
		goto out_close;
	}
	/* A run made by another stark continues as it was made, or is told to. */
	needs = run_needs_upgrade(r);
	if (run_upgrade_note(r, note, sizeof(note)) && (!needs || !accept))
		fprintf(stderr, "%s\n", note);
	if (needs && !accept) {
		rc = CLI_USAGE;
		goto out_close;
	}
	if (needs) {
		if (run_accept_upgrade(r, err, sizeof(err))) {
			stark_warn("%s", err);
			rc = CLI_FAILURE;
			goto out_close;
		}
		fprintf(stderr, "run %s: continues with stark %s, prompts %s\n", r->id,
			stark_release(), jr_str(r->producer, "prompts", "?"));
	}
	rc = resume_settings(r, config, sets, nsets);
	if (!rc)
		rc = drive(r);
out_close:
	run_free(r);
	store_close(st);
	return rc;
}
