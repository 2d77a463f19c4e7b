/*
 * cli.h -- the commands of `stark`: thin parsers and printers over the
 * engine (engine/engine.h), the pool (pool/pool.h) and the method
 * (search/search.h).  cli/ is the program's top floor: no other folder
 * includes this header.  Its names start with cmd_ (a subcommand) or cli_.
 *
 * Each cmd_* takes the arguments after the subcommand name (argv[0] is the
 * subcommand) and returns the process exit status: 0 success, 1 the job ran
 * but its outcome is negative (e.g. an incorrect candidate), 2 usage or
 * input error, 3 internal or environment failure.  Messages go to stderr
 * (stark_warn), results to stdout.
 *
 * Files: main.c (dispatch), paths.c (where the program's parts are
 * installed), args.c and providers.c (what the commands of runs share),
 * cmd_search.c (run, resume), cmd_show.c (show, export, list, report),
 * show.c (rendering runs),
 * cmd_eval.c, eval_env.c, eval_print.c and eval_batch.c (`stark eval`).
 */
#ifndef STARK_CLI_H
#define STARK_CLI_H

#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/engine.h"
#include "pool/pool.h"

enum cli_exit {
	CLI_OK = 0,
	CLI_NEGATIVE = 1,
	CLI_USAGE = 2,
	CLI_FAILURE = 3
};

int cmd_eval(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_version(int argc, char **argv);
/* This stark as `stark version --json` has it (a new reference, NULL when
 * out of memory); probe: with the evaluator's versions (cmd_version.c). */
json_t *cli_version_json(bool probe);

/* Path of the stark-eval program: $STARK_EVALUATOR, else beside stark
 * (static storage; never NULL). */
const char *cli_evaluator_path(void);

#define CLI_ERR_MAX 1024 /* bytes of a message buffer */

/*
 * Runs `stark-eval --doctor DEVICE` (o->evaluator) in a jail of the stage
 * (SANDBOX_NONE: outside), for at most wall_ms; its JSON report
 * (stark_env.report: checks, toolchain, versions) into *report, the
 * caller's.  0, or a code with why in err (cmd_doctor.c).
 */
int cli_evaluator_probe(const char *device, enum sandbox_stage stage, const struct evalrun_opts *o,
			uint32_t wall_ms, json_t **report, char *err, size_t errlen);

/* ---- what the commands of runs share (args.c, providers.c) ---- */

/* Set by SIGINT or SIGTERM once cli_catch_signals() ran (system calls are
 * then interrupted: no SA_RESTART); a run or a bench stops at its next
 * step. */
extern volatile sig_atomic_t cli_stop;
void cli_catch_signals(void);

/*
 * Matches "--name VALUE" and "--name=VALUE" at argv[*i] and advances *i
 * past the value; *val is NULL (a warning printed) when the value is
 * missing.  False when argv[*i] is another option.
 */
bool cli_opt_value(int argc, char **argv, int *i, const char *name, const char **val);
/* Opens the store at dir (NULL: run_default_store()), creating the folder;
 * *st is the caller's (store_close).  0, or a CLI_* status, message printed. */
int cli_open_store(const char *dir, struct store **st);
/*
 * Before a run is created: every role used reaches a model (llm spec and
 * model, or llm.ROLE and model.ROLE), with a key it may be sent and
 * settings its dialect can say.  0, or ST_EINVAL with the fix in err.  Keys
 * stay in the environment (they are taken only when the run starts).
 */
int cli_check_routes(const struct search_config *cfg, const char *spec, const char *model,
		     char *err, size_t errlen);
/*
 * The providers a run's options name (journaled or from the command line),
 * the caller's to free; API keys leave the environment here.  0, or a
 * CLI_* status, message printed.
 */
int cli_make_providers(const struct run *r, struct llm_provider **llm,
		       struct eval_provider **eval);

/*
 * The LLM provider a bench shares: a client per route of every role its
 * policies use, each with inflight calls at once (take: the keys leave
 * the environment).  0, or a code with err set.
 */
int cli_bench_llm(const struct search_config *cfg, const enum search_policy *pols, size_t npol,
		  const char *spec, const char *model, uint32_t inflight, bool take,
		  struct llm_provider **llm, char *err, size_t errlen);
/*
 * A bench run's own replay providers (struct bench_io.make): for each of
 * llm and eval that is not NULL, the run's replay file, where replay:DIR
 * means DIR/STEM.jsonl for the problem STEM.py.  0, or a code (printed).
 */
int cli_bench_replay(void *arg, struct run *r, struct llm_provider **llm,
		     struct eval_provider **eval);
/* The problems a bench's SUITE arguments name (suite.c). */
struct cli_suite {
	struct bench_problem *p; /* paths owned */
	size_t n, cap;
};
/* Adds a folder (its *.py in KernelBench's order), a list file or a
 * problem file; level 0: from the folder's name.  0 or a CLI_* status
 * (printed). */
int cli_suite_add(struct cli_suite *s, const char *arg, int level);
void cli_suite_release(struct cli_suite *s);

/* `stark bench`, and `stark resume` / `stark show` of a bench (cmd_bench.c). */
int cmd_bench(int argc, char **argv);
/* cap: a new --max-dollars (NULL: keep it); accept: --accept-upgrade. */
int cli_bench_resume(struct store *st, const char *id, const char *cap, bool accept);
/* fmt: "text", "json", "csv"; problems: the per-problem rows too. */
int cli_bench_show(struct store *st, const char *id, const char *fmt, bool problems);
/* The table as text (bench_show.c); 0 or CLI_FAILURE. */
int cli_bench_print(const struct bench *b, FILE *out);

/* ---- rendering runs (show.c) ---- */

/*
 * `stark show`, `stark export`, `stark list`, and the plan `stark resume
 * --dry-run` prints.  All of these read a run loaded with run_load(lock =
 * false); none writes to the store.  A run whose journal says "running"
 * while no process holds its lock was killed: it is shown as "interrupted".
 * r and st are borrowed; out is written to and not closed.
 */
/* The tree (with each node's complaints), leaders, spend per role and per
 * model, and state; --json gives the object documented in docs/RUNS.md. */
ST_WUR int show_run(struct run *r, bool json, FILE *out);
/* What resume would do next, in one line per fact. */
void show_resume_plan(struct run *r, FILE *out);
#define EXPORT_BEST    (-1L) /* the fastest correct node, if it beats the reference */
#define EXPORT_FASTEST (-2L) /* the fastest correct node, whatever its speedup */

/*
 * Writes a node's code (a node id, EXPORT_BEST or EXPORT_FASTEST) to path
 * (atomic replace; NULL or "-": stdout).  ST_ENOENT with a message when
 * there is no such node, no correct node, or (EXPORT_BEST) none that beats
 * the reference: the message names the fastest and --fastest.
 */
ST_WUR int export_code(struct run *r, long node, const char *path, char *err, size_t errlen);
/*
 * JSON Lines from the journal: "responses" (LLM replies, a replay file for
 * --llm replay:), "results" (evaluation results, for --eval replay:) or
 * "journal" (every event).
 */
ST_WUR int export_jsonl(struct run *r, const char *what, const char *path, char *err,
			size_t errlen);
/* One line per run of the store (or a JSON array). */
ST_WUR int show_list(struct store *st, bool json, FILE *out);

/*
 * --kb-trials N of run and bench (KernelBench's trials, 0..PROTO_TRIALS_MAX)
 * into *out as run_spec has it: -1 for 0 (its verdict not sought), else N.
 * 0, or -1 with the complaint printed (cmd names the command).
 */
int cli_kb_trials(const char *cmd, const char *v, int *out);
/*
 * --language, --format and --precision of run and bench, checked and
 * completed: language "triton" sets the format "triton" (KernelBench's, in
 * Triton); the format defaults by device; precision to "fp32".  0, or -1
 * with the complaint printed (cmd names the command).
 */
int cli_language_format(const char *cmd, const char *language, const char *device,
			const char **format, const char **precision);

/* Whether name is one of list's (NULL-terminated), e.g. proto_languages. */
bool cli_name_in(const char *name, const char *const *list);

/* ---- stark eval (cmd_eval.c, eval_env.c, eval_print.c, eval_batch.c) ---- */

#define BATCH_JOBS_MAX 64	   /* --jobs */

struct eval_args {
	const char *problem, *solution;
	const char *batch; /* --batch FILE ("-": stdin), or NULL */
	char device[32];
	bool json, timing, have_seed, insecure, no_jail;
	int stage;	   /* enum evalrun_stages, or -1: the default */
	uint64_t seed;
	uint32_t trials, wall_ms, jobs;
	uint32_t kb_trials; /* --kb-trials: KernelBench's trials, 0: its verdict not sought */
	uint32_t min_reps;  /* --min-reps, or 0: the request's default */
	uint32_t placements; /* --placements, or 0: the request's default */
	int l2_flush;	    /* --l2-flush: 1 on, 0 off, -1 the request's default */
	const char *verdict; /* --verdict stark|kernelbench, or NULL: stark */
	const char *language; /* --language (proto_languages), or NULL: auto */
	const char *precision; /* --precision fp32|fp16|bf16, or NULL: fp32 */
	const char *baseline; /* --baseline eager|compile, or NULL: eager */
	double target_rse;  /* --target-rse, or NAN: the request's default */
	const char *cache;
	const char *gpu_lock; /* --gpu-lock FILE, or NULL */
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

/*
 * eval_env.c.  cli_eval_request fills rq (initialized) for one pair (index
 * n of a batch, 0 otherwise): 0, or a CLI_* exit status with the message in
 * err (not printed).  cli_eval_env_init sets up e (the options of both
 * stages, the build cache, the GPU lock): 0 or a CLI_* status, message
 * printed; cli_eval_env_release always follows it, whatever it returned.
 * cli_eval_env_zygote starts the zygote every evaluation forks from, if
 * wanted (a warning, and exec'd evaluators, when it cannot start).
 */
int cli_eval_request(const struct eval_args *a, const char *problem, const char *solution,
		     size_t n, const char *cache, struct proto_request *rq, char *err,
		     size_t errlen);
int cli_eval_env_init(const struct eval_args *a, struct eval_env *e);
void cli_eval_env_zygote(struct eval_env *e);
void cli_eval_env_release(struct eval_env *e);

/*
 * eval_print.c.  cli_eval_json: the result as the JSON object of the
 * contract (cmd_eval.c's top comment), a new reference, NULL when out of
 * memory.  The printers write to stdout: 0, or CLI_FAILURE when stdout
 * fails.
 */
json_t *cli_eval_json(const struct eval_args *a, const char *problem, const char *solution,
		      const struct proto_result *rs, const struct evalrun_info *info);
int cli_eval_print_json(const struct eval_args *a, const struct proto_result *rs,
			const struct evalrun_info *info);
int cli_eval_print_human(const struct proto_result *rs, const struct evalrun_info *info);

/* eval_batch.c: `stark eval --batch`; the command's exit status. */
int cli_eval_batch(const struct eval_args *a, struct eval_env *e);

#endif
