/*
 * eval_env.c -- how `stark eval` starts its evaluations: the request for a
 * pair of files and the options, the build cache, the two stages' jails
 * (split when jailed; one process with --sandbox none), the zygote they
 * fork from, and the GPU lock their timings share.
 */
#include <errno.h>
#include <fcntl.h>
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
int cli_eval_request(const struct eval_args *a, const char *problem, const char *solution,
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
	rq->language = str_dup(a->language ? a->language : "auto");
	rq->precision = str_dup(a->precision ? a->precision : "fp32");
	rq->baseline = str_dup(a->baseline ? a->baseline : "eager");
	if (!rq->id || !rq->device || !rq->format || !rq->cache_dir || !rq->verdict ||
	    !rq->language || !rq->precision || !rq->baseline) {
		snprintf(err, errlen, "out of memory");
		return CLI_FAILURE;
	}
	rq->stage = PROTO_STAGE_ALL;
	rq->trials = a->trials;
	rq->kb_trials = a->kb_trials;
	rq->timing = a->timing;
	if (a->min_reps) {
		rq->min_reps = a->min_reps;
		if (rq->max_reps < rq->min_reps)
			rq->max_reps = rq->min_reps;
	}
	if (a->placements)
		rq->placements = a->placements;
	if (a->l2_flush >= 0)
		rq->l2_flush = a->l2_flush != 0;
	if (!isnan(a->target_rse))
		rq->target_rse = a->target_rse;
	rq->wall_ms = a->wall_ms;
	rq->queue_ms = evalrun_queue_ms(a->wall_ms, a->batch ? a->jobs : 1);
	rq->seed = a->seed;
	if (!a->have_seed && getrandom(&rq->seed, sizeof(rq->seed), 0) != (ssize_t)sizeof(rq->seed)) {
		snprintf(err, errlen, "cannot draw a random seed");
		return CLI_FAILURE;
	}
	return 0;
}

/* Options of both stages, the zygote, the lock; 0 or a CLI_* exit status. */
int cli_eval_env_init(const struct eval_args *a, struct eval_env *e)
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
		 * toolchain, the run jail may not (SECURITY.md).  The run jails
		 * share the machine's memory among the batch's evaluations in
		 * flight (evalrun_run_mem_default). */
		e->ropts.mem_bytes = evalrun_run_mem_default(a->batch ? a->jobs : 1);
		evalrun_jail_opts(&e->copts, &e->ropts, e->cache, a->device, a->insecure, &e->binds);
		e->mode = a->stage == EVALRUN_AUTO || (a->stage < 0 && a->batch) ? EVALRUN_AUTO
										 : EVALRUN_SPLIT;
	} else {
		e->mode = a->stage < 0 ? EVALRUN_ONE : (enum evalrun_stages)a->stage;
	}
	/* On a GPU, always the machine's lock of that GPU (or --gpu-lock's):
	 * one evaluation at a time still shares the GPU with other stark
	 * processes, whose timings and memory it must not cross. */
	if (str_starts(a->device, "cuda")) {
		char err[PATH_MAX + 128];

		e->lock_fd = evalrun_gpu_lock_open(a->gpu_lock, a->device, err, sizeof(err));
		if (e->lock_fd < 0)
			return stark_error(CLI_FAILURE, "eval: %s", err);
		e->ropts.lock_fd = e->lock_fd;
	}
	return 0;
}

/* The zygote every evaluation of this command forks from, if wanted. */
void cli_eval_env_zygote(struct eval_env *e)
{
	if (evalrun_zygote_wanted() &&
	    evalrun_zygote_start(e->copts.evaluator, NULL, &e->zygote) != 0)
		stark_warn("eval: evaluating without a zygote (each evaluator process is exec'd)");
	e->copts.zygote = e->ropts.zygote = e->zygote;
}

void cli_eval_env_release(struct eval_env *e)
{
	evalrun_zygote_free(e->zygote);
	e->zygote = NULL;
	if (e->lock_fd >= 0)
		close(e->lock_fd);
	e->lock_fd = -1;
}