/*
 * cmd_search.c -- `stark run`, `stark resume`, `stark show`, `stark export`,
 * `stark list` and `stark report`: argument parsing, the store's location,
 * the API key, signals, and the exit status.  The work is the engine's
 * (engine/engine.h: run_create, run_load, run_loop), show.c's (rendering)
 * and report/'s (a node in full, the HTML report).
 *
 * The store is $STARK_STORE, else $XDG_DATA_HOME/stark, else
 * ~/.local/share/stark, unless --store DIR is given.  API keys are read
 * from the environment (key_for says which goes where: api_key_env.ROLE,
 * $STARK_API_KEY, $OPENAI_API_KEY, $ANTHROPIC_API_KEY), and every one of
 * those variables is removed from the environment at once, so no child
 * (the evaluator, the compilers it runs) can inherit them; keys are never
 * journaled.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "report/report.h"

#define ERR_MAX 1024

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

/* SIGINT/SIGTERM set the flag; system calls are interrupted (no SA_RESTART). */
static void catch_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* Matches "--name VALUE" and "--name=VALUE"; advances *i past the value. */
static bool opt_value(int argc, char **argv, int *i, const char *name, const char **val)
{
	size_t n = strlen(name);

	if (strncmp(argv[*i], name, n))
		return false;
	if (argv[*i][n] == '=') {
		*val = argv[*i] + n + 1;
		return true;
	}
	if (argv[*i][n] != '\0')
		return false;
	if (*i + 1 >= argc) {
		stark_warn("option %s needs a value", name);
		*val = NULL;
		return true;
	}
	*val = argv[++*i];
	return true;
}

static int open_store(const char *dir, struct store **st)
{
	char def[PROTO_PATH_MAX];
	int rc;

	if (!dir) {
		if (run_default_store(def, sizeof(def)))
			return stark_error(
			    CLI_USAGE,
			    "no store folder: set STARK_STORE or HOME, or pass --store DIR");
		dir = def;
	}
	if (io_mkdir_p(dir))
		return stark_error(CLI_FAILURE, "store %s: cannot create the folder: %s", dir,
				   strerror(errno));
	rc = store_open(dir, st);
	if (rc)
		return stark_error(CLI_FAILURE, "store %s: cannot open: %s", dir,
				   stark_strerror(rc));
	return CLI_OK;
}

/* A variable's value, copied, and (take) the variable removed from the environment. */
static char *take_env(const char *name, bool take)
{
	const char *v = name && *name ? getenv(name) : NULL;
	char *copy = v && *v ? strdup(v) : NULL;

	if (take && name && *name)
		unsetenv(name);
	return copy;
}

static void wipe(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

/* The keys a run may send: taken from the environment at once, wiped after. */
struct keyring {
	char *stark, *openai, *anthropic;
	char *role[ROLE_COUNT]; /* api_key_env.ROLE's */
};

/* The keys (take: and the variables out of the environment, for good). */
static void keyring_take(struct keyring *k, const struct search_config *cfg, bool take)
{
	memset(k, 0, sizeof(*k));
	for (int i = 0; i < ROLE_COUNT; i++) {
		const char *name = cfg->api_key_env[i];

		for (int j = 0; j < i && name[0] && !k->role[i]; j++)
			if (!strcmp(name, cfg->api_key_env[j]) && k->role[j])
				k->role[i] = strdup(k->role[j]);
		if (!k->role[i])
			k->role[i] = take_env(name, take);
	}
	k->stark = take_env("STARK_API_KEY", take);
	k->openai = take_env("OPENAI_API_KEY", take);
	k->anthropic = take_env("ANTHROPIC_API_KEY", take);
}

static void keyring_wipe(struct keyring *k)
{
	wipe(k->stark);
	wipe(k->openai);
	wipe(k->anthropic);
	for (int i = 0; i < ROLE_COUNT; i++)
		wipe(k->role[i]);
}

/* The vendor's own server, which its variable's key is for. */
static bool vendor_host(const struct route *rt)
{
	return str_starts(rt->base_url, rt->api == LLM_ANTHROPIC ? "https://api.anthropic.com/"
								 : "https://api.openai.com/");
}

/*
 * The key a role's route is sent with (borrowed from k): api_key_env.ROLE's
 * variable; else, when every role uses one server, $STARK_API_KEY or the
 * dialect's variable (OPENAI_API_KEY, ANTHROPIC_API_KEY); else the
 * dialect's variable on the vendor's own server only, so no key goes to a
 * server it was not meant for.
 */
static int key_for(const struct keyring *k, const struct search_config *cfg, int role,
		   const struct route *rt, bool one_server, const char **key, char *err,
		   size_t errlen)
{
	const char *vendor = rt->api == LLM_ANTHROPIC ? k->anthropic : k->openai;

	*key = NULL;
	if (cfg->api_key_env[role][0]) {
		*key = k->role[role];
		if (!*key)
			snprintf(err, errlen, "api_key_env.%s names %s, which is not set",
				 search_role_name((enum search_role)role), cfg->api_key_env[role]);
		return *key ? 0 : ST_EINVAL;
	}
	if (one_server) {
		*key = k->stark ? k->stark : vendor;
		return 0;
	}
	if (k->stark) {
		snprintf(err, errlen,
			 "STARK_API_KEY is ambiguous when roles use different servers: name each "
			 "role's variable with api_key_env.ROLE");
		return ST_EINVAL;
	}
	*key = vendor_host(rt) ? vendor : NULL;
	return 0;
}

/*
 * The client configuration of each role the policy uses, with its key
 * (borrowed from k); llm (not NULL) gets the provider, or with llm NULL
 * this only checks that every role has a route and a key it may be sent.
 */
static int http_routes(const struct search_config *cfg, const char *spec, const char *model,
		       const struct keyring *k, struct llm_provider **llm, char *err, size_t errlen)
{
	struct llm_config cfgs[ROLE_COUNT];
	struct route rts[ROLE_COUNT];
	const char *roles[ROLE_COUNT];
	int rix[ROLE_COUNT];
	bool one = true;
	size_t n = 0;
	int rc;

	rc = route_check(cfg, spec, model, err, errlen);
	for (int i = 0; !rc && i < ROLE_COUNT; i++) {
		if (!route_role_used(cfg->policy, (enum search_role)i))
			continue;
		rc = route_of(cfg, spec, model, (enum search_role)i, &rts[n], err, errlen);
		if (rc)
			break;
		roles[n] = search_role_name((enum search_role)i);
		rix[n] = i;
		one &= !strcmp(rts[n].base_url, rts[0].base_url); /* one server, any dialect */
		n++;
	}
	for (size_t i = 0; !rc && i < n; i++) {
		llm_config_init(&cfgs[i]);
		cfgs[i].api = rts[i].api;
		cfgs[i].base_url = rts[i].base_url;
		cfgs[i].model = rts[i].model;
		rc = key_for(k, cfg, rix[i], &rts[i], one, &cfgs[i].api_key, err, errlen);
	}
	if (!rc && llm) {
		rc = llm_provider_http(roles, cfgs, n, llm);
		if (rc)
			snprintf(err, errlen, "llm: cannot set up the clients: %s",
				 stark_strerror(rc));
	}
	return rc;
}

/* The HTTP provider of a run, its keys taken out of the environment. */
static int http_provider(const struct run *r, struct llm_provider **llm, char *err, size_t errlen)
{
	struct keyring k;
	int rc;

	keyring_take(&k, &r->cfg, true);
	rc = http_routes(&r->cfg, jr_str(r->options, "llm", ""), jr_str(r->options, "model", ""),
			 &k, llm, err, errlen);
	keyring_wipe(&k);
	return rc;
}

/* Before a run is created: every role reaches a model, with a key it may be sent. */
static int http_check(const struct search_config *cfg, const char *spec, const char *model,
		      char *err, size_t errlen)
{
	struct keyring k;
	int rc;

	keyring_take(&k, cfg, false);
	rc = http_routes(cfg, spec, model, &k, NULL, err, errlen);
	keyring_wipe(&k);
	return rc;
}

/* The providers named by a run's options (journaled or from the command line). */
static int make_providers(const struct run *r, struct llm_provider **llm,
			  struct eval_provider **eval)
{
	const char *spec = jr_str(r->options, "llm", ""), *ev = jr_str(r->options, "eval", "");
	char err[ERR_MAX] = "";
	int rc;

	*llm = NULL;
	*eval = NULL;
	if (str_starts(spec, "replay:"))
		rc = llm_provider_replay(spec + 7, llm, err, sizeof(err));
	else
		rc = http_provider(r, llm, err, sizeof(err));
	if (rc) {
		stark_warn("run %s: %s", r->id, err);
		return CLI_USAGE;
	}
	if (str_starts(ev, "replay:"))
		rc = eval_provider_replay(ev + 7, eval, err, sizeof(err));
	else
		rc = eval_provider_real(cli_evaluator_path(), eval);
	if (rc) {
		if (err[0])
			stark_warn("%s", err);
		llm_provider_free(*llm);
		*llm = NULL;
		return CLI_USAGE;
	}
	return CLI_OK;
}

/* Runs the loop and turns its ending into an exit status. */
static int drive(struct run *r)
{
	struct llm_provider *llm;
	struct eval_provider *eval;
	char err[ERR_MAX];
	int rc;

	rc = make_providers(r, &llm, &eval);
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
	run_attach(r, llm, eval, &stop_flag);
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
		"                 [--set KEY=VALUE]... [--eval stark-eval|replay:FILE] [--format kernelbench|fast]\n"
		"                 [--insecure-sandbox]\n"
		"  Candidates are judged in the compile and run jails (SECURITY.md); where this\n"
		"  machine lacks layers the run refuses unless --insecure-sandbox is given.\n"
		"  --format defaults to fast on cuda and kernelbench on cpu.\n"
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
	const char *store_dir = NULL, *config = NULL, *v;
	char err[ERR_MAX], llmbuf[PROTO_PATH_MAX + 16], evbuf[PROTO_PATH_MAX + 16];
	struct search_config cfg;
	struct store *st = NULL;
	struct run *r = NULL;
	int rc = CLI_USAGE;

	search_config_defaults(&cfg);
	spec.llm = getenv("STARK_LLM");
	spec.model = getenv("STARK_MODEL");
	/* First pass: the config file, so flags override it wherever they are. */
	for (int i = 1; i < argc; i++)
		if (opt_value(argc, argv, &i, "--config", &v)) {
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
		if (opt_value(argc, argv, &i, "--config", &v))
			continue;
		if (opt_value(argc, argv, &i, "--run-id", &v))
			spec.run_id = v;
		else if (opt_value(argc, argv, &i, "--llm", &v))
			spec.llm = v;
		else if (opt_value(argc, argv, &i, "--model", &v))
			spec.model = v;
		else if (opt_value(argc, argv, &i, "--device", &v))
			spec.device = v;
		else if (opt_value(argc, argv, &i, "--store", &v))
			store_dir = v;
		else if (opt_value(argc, argv, &i, "--eval", &v))
			spec.eval = v;
		else if (opt_value(argc, argv, &i, "--format", &v))
			spec.format = v;
		else if (!strcmp(argv[i], "--insecure-sandbox"))
			spec.insecure_sandbox = true;
		else if (opt_value(argc, argv, &i, "--budget", &v))
			key = "budget";
		else if (opt_value(argc, argv, &i, "--policy", &v))
			key = "policy";
		else if (opt_value(argc, argv, &i, "--set", &v)) {
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
	    http_check(&cfg, spec.llm, spec.model ? spec.model : "", err, sizeof(err)))
		return stark_error(CLI_USAGE, "run: %s", err);
	if (strcmp(spec.eval, "stark-eval") && !(str_starts(spec.eval, "replay:") && spec.eval[7]))
		return stark_error(CLI_USAGE, "run: --eval must be stark-eval or replay:FILE");
	if (strcmp(spec.device, "cpu") && strcmp(spec.device, "cuda") &&
	    !str_starts(spec.device, "cuda:"))
		return stark_error(CLI_USAGE, "run: --device must be cpu, cuda or cuda:N");
	/* The fast format needs NVRTC and a GPU; on the CPU agents write C++
	 * through load_inline. */
	if (!spec.format)
		spec.format = str_starts(spec.device, "cuda") ? "fast" : "kernelbench";
	if (strcmp(spec.format, "kernelbench") && strcmp(spec.format, "fast"))
		return stark_error(CLI_USAGE, "run: --format must be kernelbench or fast");
	if (search_config_check(&cfg, err, sizeof(err)))
		return stark_error(CLI_USAGE, "run: %s", err);
	spec.llm = abs_spec(spec.llm, "replay:", llmbuf, sizeof(llmbuf));
	spec.eval = abs_spec(spec.eval, "replay:", evbuf, sizeof(evbuf));
	spec.cfg = &cfg;
	rc = open_store(store_dir, &st);
	if (rc)
		return rc;
	catch_signals();
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
	"usage: stark resume RUN_ID [--store DIR] [--dry-run] [--config FILE] [--set "             \
	"KEY=VALUE]..."
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
	char err[ERR_MAX], *changed = NULL;

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
	size_t nsets = 0;
	bool dry = false;
	char err[ERR_MAX];
	struct store *st = NULL;
	struct run *r = NULL;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (opt_value(argc, argv, &i, "--store", &v)) {
			if (!v)
				return CLI_USAGE;
			store_dir = v;
		} else if (opt_value(argc, argv, &i, "--config", &v)) {
			if (!v)
				return CLI_USAGE;
			config = v;
		} else if (opt_value(argc, argv, &i, "--set", &v)) {
			if (!v || nsets == RESUME_SETS_MAX)
				return stark_error(CLI_USAGE, RESUME_USAGE);
			sets[nsets++] = v;
		} else if (!strcmp(argv[i], "--dry-run")) {
			dry = true;
		} else if (argv[i][0] == '-' || id) {
			return stark_error(CLI_USAGE, RESUME_USAGE);
		} else {
			id = argv[i];
		}
	}
	if (!id)
		return stark_error(CLI_USAGE, RESUME_USAGE);
	rc = open_store(store_dir, &st);
	if (rc)
		return rc;
	catch_signals();
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
		show_resume_plan(r, stdout);
		rc = CLI_OK;
		goto out_close;
	}
	if (r->state == RUN_FINISHED) {
		stark_warn("run %s already finished (%s); nothing to resume", id, r->reason);
		rc = CLI_OK;
		goto out_close;
	}
	rc = resume_settings(r, config, sets, nsets);
	if (!rc)
		rc = drive(r);
out_close:
	run_free(r);
	store_close(st);
	return rc;
}

/* Parses "RUN_ID [--store DIR]" plus the flags given; returns the run id. */
struct common_args {
	const char *id;
	const char *store;
	const char *out;
	bool json;
	const char *what; /* export: "code", "responses", "results", "journal" */
	long node;
};

enum {
	ARG_JSON = 1,	/* --json */
	ARG_OUT = 2,	/* -o FILE */
	ARG_NODE = 4,	/* --node N */
	ARG_EXPORT = 8, /* --fastest, --responses, --results, --journal */
};

static int parse_common(int argc, char **argv, struct common_args *a, unsigned flags,
			const char *usage)
{
	const char *v;

	a->what = "code";
	a->node = EXPORT_BEST;
	for (int i = 1; i < argc; i++) {
		if (opt_value(argc, argv, &i, "--store", &v)) {
			if (!v)
				return CLI_USAGE;
			a->store = v;
		} else if (!strcmp(argv[i], "--json") && (flags & ARG_JSON)) {
			a->json = true;
		} else if ((flags & ARG_OUT) && (opt_value(argc, argv, &i, "-o", &v) ||
						 opt_value(argc, argv, &i, "--output", &v))) {
			if (!v)
				return CLI_USAGE;
			a->out = v;
		} else if ((flags & ARG_NODE) && opt_value(argc, argv, &i, "--node", &v)) {
			uint64_t n;

			if (!v || str_to_u64(v, 0, TREE_NODES_MAX, &n))
				return stark_error(CLI_USAGE, "--node wants a node id");
			a->node = (long)n;
		} else if ((flags & ARG_EXPORT) && !strcmp(argv[i], "--fastest")) {
			a->node = EXPORT_FASTEST;
		} else if ((flags & ARG_EXPORT) &&
			   (!strcmp(argv[i], "--responses") || !strcmp(argv[i], "--results") ||
			    !strcmp(argv[i], "--journal"))) {
			a->what = argv[i] + 2;
		} else if (argv[i][0] == '-' || a->id) {
			return stark_error(CLI_USAGE, "usage: %s", usage);
		} else {
			a->id = argv[i];
		}
	}
	if (!a->id)
		return stark_error(CLI_USAGE, "usage: %s", usage);
	return CLI_OK;
}

/* One node in full: the text view, or {"node", "attempt"} as JSON. */
static int show_node(struct run *r, long node, bool json)
{
	json_t *o = NULL, *n, *att;
	char err[ERR_MAX];
	int rc;

	if ((uint64_t)node >= tree_count(r->tree))
		return stark_error(CLI_USAGE, "run %s has no node %ld (it has %u)", r->id, node,
				   tree_count(r->tree));
	rc = report_run_json(r, node, &o, err, sizeof(err));
	if (rc) {
		stark_warn("%s", err);
		return CLI_FAILURE;
	}
	if (!json) {
		rc = report_print_node(o, (uint32_t)node, stdout);
		json_decref(o);
		return rc ? CLI_FAILURE : CLI_OK;
	}
	n = json_array_get(json_object_get(o, "nodes"), (size_t)node);
	att = json_array_get(json_object_get(o, "attempt_log"), (size_t)jr_u64(n, "attempt", 0) - 1);
	n = json_pack("{s:O, s:O}", "node", n, "attempt",
		      att && jr_u64(n, "attempt", 0) ? att : json_null());
	rc = !n || json_dumpf(n, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
	json_decref(n);
	json_decref(o);
	fputc('\n', stdout);
	return rc || ferror(stdout) ? CLI_FAILURE : CLI_OK;
}

/*
 * The store and the run a names, the run loaded to be read (no lock): 0,
 * or a CLI_* status with the message printed.  *st and *r are the
 * caller's to free either way (NULL when not opened).
 */
static int open_run(const struct common_args *a, struct store **st, struct run **r)
{
	char err[ERR_MAX];
	int rc = open_store(a->store, st);

	if (rc)
		return rc;
	rc = run_load(*st, a->id, false, r, err, sizeof(err));
	if (rc) {
		stark_warn("%s", err);
		return rc == ST_ENOENT || rc == ST_EINVAL ? CLI_USAGE : CLI_FAILURE;
	}
	return CLI_OK;
}

int cmd_show(int argc, char **argv)
{
	struct common_args a = {0};
	struct store *st = NULL;
	struct run *r = NULL;
	int rc;

	rc = parse_common(argc, argv, &a, ARG_JSON | ARG_NODE,
			  "stark show RUN_ID [--node N] [--json] [--store DIR]");
	if (rc)
		return rc;
	rc = open_run(&a, &st, &r);
	if (!rc && a.node >= 0)
		rc = show_node(r, a.node, a.json);
	else if (!rc)
		rc = show_run(r, a.json, stdout) ? CLI_FAILURE : CLI_OK;
	run_free(r);
	store_close(st);
	return rc;
}

int cmd_export(int argc, char **argv)
{
	struct common_args a = {0};
	struct store *st = NULL;
	struct run *r = NULL;
	char err[ERR_MAX] = "";
	int rc;

	rc = parse_common(argc, argv, &a, ARG_OUT | ARG_NODE | ARG_EXPORT,
			  "stark export RUN_ID [-o FILE] [--node N | --fastest | --responses | "
			  "--results | --journal] [--store DIR]");
	if (rc)
		return rc;
	rc = open_run(&a, &st, &r);
	if (rc)
		goto out_close;
	if (!strcmp(a.what, "code"))
		rc = export_code(r, a.node, a.out, err, sizeof(err));
	else
		rc = export_jsonl(r, a.what, a.out, err, sizeof(err));
	if (rc) {
		stark_warn("%s", err);
		rc = rc == ST_ENOENT ? CLI_NEGATIVE : CLI_FAILURE;
	}
out_close:
	run_free(r);
	store_close(st);
	return rc;
}

int cmd_list(int argc, char **argv)
{
	const char *store_dir = NULL, *v;
	struct store *st = NULL;
	bool json = false;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (opt_value(argc, argv, &i, "--store", &v)) {
			if (!v)
				return CLI_USAGE;
			store_dir = v;
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else {
			return stark_error(CLI_USAGE, "usage: stark list [--store DIR] [--json]");
		}
	}
	rc = open_store(store_dir, &st);
	if (rc)
		return rc;
	rc = show_list(st, json, stdout) ? CLI_FAILURE : CLI_OK;
	store_close(st);
	return rc;
}

int cmd_report(int argc, char **argv)
{
	static const char usage[] = "stark report RUN_ID|BENCH_ID... [-o FILE.html] [--store DIR]";
	const char *store_dir = NULL, *out = NULL, *v, **ids;
	char err[ERR_MAX] = "", path[PROTO_PATH_MAX];
	struct store *st = NULL;
	struct dbuf html;
	json_t *doc = NULL;
	size_t n = 0;
	int rc;

	ids = calloc((size_t)argc, sizeof(*ids));
	if (!ids)
		return stark_error(CLI_FAILURE, "out of memory");
	for (int i = 1; i < argc; i++) {
		bool is_store = opt_value(argc, argv, &i, "--store", &v);

		if (is_store || opt_value(argc, argv, &i, "-o", &v) ||
		    opt_value(argc, argv, &i, "--output", &v)) {
			if (!v) {
				free(ids);
				return CLI_USAGE;
			}
			if (is_store)
				store_dir = v;
			else
				out = v;
		} else if (argv[i][0] == '-') {
			free(ids);
			return stark_error(CLI_USAGE, "usage: %s", usage);
		} else {
			ids[n++] = argv[i];
		}
	}
	if (!n) {
		free(ids);
		return stark_error(CLI_USAGE, "usage: %s", usage);
	}
	if (!out) {
		snprintf(path, sizeof(path), "%s.html", n == 1 ? ids[0] : "report");
		out = path;
	}
	rc = open_store(store_dir, &st);
	if (rc) {
		free(ids);
		return rc;
	}
	dbuf_init(&html, REPORT_HTML_MAX);
	rc = report_build(st, ids, n, &doc, err, sizeof(err));
	if (rc) {
		stark_warn("%s", err);
		rc = rc == ST_ENOENT || rc == ST_EINVAL ? CLI_USAGE : CLI_FAILURE;
		goto out_free;
	}
	rc = report_html(doc, &html);
	if (rc) {
		stark_warn("cannot render the report: %s%s", stark_strerror(rc),
			   rc == ST_ETOOBIG ? " (larger than REPORT_HTML_MAX)" : "");
		rc = CLI_FAILURE;
		goto out_free;
	}
	if (!strcmp(out, "-"))
		rc = io_write_full(STDOUT_FILENO, html.p, html.len);
	else
		rc = io_write_file_atomic(out, html.p, html.len);
	if (rc) {
		stark_warn("%s: cannot write: %s", out, strerror(errno));
		rc = CLI_FAILURE;
		goto out_free;
	}
	if (strcmp(out, "-"))
		fprintf(stderr, "report written to %s (%zu bytes; it opens offline)\n", out,
			html.len);
	rc = CLI_OK;
out_free:
	dbuf_release(&html);
	json_decref(doc);
	store_close(st);
	free(ids);
	return rc;
}