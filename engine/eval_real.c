/*
 * eval_real.c -- the real evaluation provider: `stark-eval` through
 * pool/pool.h, exactly as `stark eval --stage auto` runs it (same request
 * defaults, same build cache, same evaluator binary, same jails: a compile
 * stage in the compile jail when the candidate builds an extension, then a
 * run stage in the run jail; a candidate that builds nothing -- the fast
 * format, plain PyTorch -- goes straight to the run stage).  The result's
 * env says which ("stages").
 *
 * One zygote (pool/pool.h) serves the whole run: started at the first
 * evaluation, restarted by the next one if it dies; $STARK_ZYGOTE=0 execs
 * every evaluator process instead.  A zygote that cannot be started is
 * reported once and the run goes on without one.
 *
 * The evaluation is polled in short slices so SIGINT/SIGTERM cancel it
 * within a fraction of a second: the evaluator's tree is killed and the
 * call returns ST_ECANCELED, nothing is journaled, and resume runs the
 * evaluation again.  A failure to start the evaluator is an error of the
 * run (it stops as "failed", resumable), not a verdict on the candidate.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evaluator/evaluator.h"
#include "pool/pool.h"
#include "engine/engine_int.h"

#define EVAL_POLL_MS 200

struct eval_real {
	struct eval_provider base;
	char evaluator[PATH_MAX];
	char cache[PATH_MAX];
	struct evalrun_zygote *zygote; /* started at the first evaluation */
	bool no_zygote;		       /* $STARK_ZYGOTE=0, or it cannot start */
};

int eval__request(const struct eval_job *job, const char *device, const char *cache,
		  struct proto_request *rq)
{
	char name[PROTO_NAME_MAX];

	snprintf(name, sizeof(name), "%s", job->key);
	rq->id = str_dup(name);
	if (device && !(rq->device = str_dup(device)))
		return ST_ENOMEM;
	rq->format = str_dup(job->format);
	rq->language = str_dup(job->language ? job->language : "auto");
	rq->precision = str_dup(job->precision ? job->precision : "fp32");
	rq->baseline = str_dup(job->baseline ? job->baseline : "eager");
	rq->problem_name = str_dup(job->problem_name);
	rq->solution_name = str_dup(name);
	rq->cache_dir = str_dup(cache);
	rq->problem_src = malloc(job->problem_len + 1);
	rq->solution_src = malloc(job->code_len + 1);
	if (!rq->language || !rq->precision || !rq->baseline || !rq->id || !rq->format ||
	    !rq->problem_name || !rq->solution_name || !rq->cache_dir || !rq->problem_src ||
	    !rq->solution_src)
		return ST_ENOMEM;
	memcpy(rq->problem_src, job->problem_src, job->problem_len);
	rq->problem_src[job->problem_len] = '\0';
	rq->problem_len = job->problem_len;
	memcpy(rq->solution_src, job->code, job->code_len);
	rq->solution_src[job->code_len] = '\0';
	rq->solution_len = job->code_len;
	rq->stage = PROTO_STAGE_COMPILE;
	rq->seed = job->seed;
	if (job->kb_trials)
		rq->kb_trials = job->kb_trials < 0 ? 0 : (uint32_t)job->kb_trials;
	rq->wall_ms = EVAL_DEFAULT_WALL_MS;
	return ST_OK;
}

struct evalrun_zygote *eval__zygote(const char *evaluator, struct evalrun_zygote **z, bool *off)
{
	if (!*z && !*off) {
		*off = !evalrun_zygote_wanted();
		if (!*off && evalrun_zygote_start(evaluator, NULL, z)) {
			stark_warn("evaluations run without a zygote (each evaluator process is exec'd)");
			*off = true;
		}
	}
	return *z;
}

static int real_eval(struct eval_provider *p, const struct eval_job *job, struct proto_result *out)
{
	struct eval_real *e = (struct eval_real *)p;
	struct evalrun_opts copts, ropts;
	struct evalrun_binds binds;
	struct evalrun_pair *pair = NULL;
	struct proto_request rq;
	int rc;

	proto_request_init(&rq);
	rc = eval__request(job, job->device, e->cache, &rq);
	if (rc)
		goto out;
	evalrun_opts_init(&copts);
	evalrun_opts_init(&ropts);
	copts.evaluator = ropts.evaluator = e->evaluator;
	evalrun_jail_opts(&copts, &ropts, e->cache, job->device, job->insecure, &binds);
	copts.zygote = ropts.zygote = eval__zygote(e->evaluator, &e->zygote, &e->no_zygote);
	rc = evalrun_pair_start(&copts, &ropts, &rq, EVALRUN_AUTO, &pair);
	/* Polled in slices, so that a signal cancels it. */
	while (!rc && !(p->stop && *p->stop) && (rc = evalrun_pair_poll(pair, EVAL_POLL_MS)) == 0)
		;
	if (rc < 0) {
		stark_warn("evaluation %s: cannot start %s: %s%s", job->key, e->evaluator,
			   stark_strerror(rc),
			   rc == ST_EDENIED ? " (the jail lacks layers on this machine; "
					      "--insecure-sandbox runs with the layers it has)"
					    : "");
		goto out;
	}
	if (rc == 0) { /* stopped before it was done */
		evalrun_pair_cancel(pair);
		rc = ST_ECANCELED;
		goto out;
	}
	/* A local failure while polling still ends in a result (see pool/pool.h). */
	rc = evalrun_pair_finish(pair, out, NULL);
out:
	evalrun_pair_free(pair);
	proto_request_release(&rq);
	return rc;
}

static void real_free(struct eval_provider *p)
{
	struct eval_real *e = (struct eval_real *)p;

	evalrun_zygote_free(e->zygote);
	free(p);
}

int eval_provider_real(const char *evaluator, struct eval_provider **out)
{
	struct eval_real *e = calloc(1, sizeof(*e));
	char err[512];

	*out = NULL;
	if (!e)
		return ST_ENOMEM;
	snprintf(e->evaluator, sizeof(e->evaluator), "%s", evaluator);
	if (access(e->evaluator, X_OK) < 0) {
		stark_warn("the evaluator '%s' is not there (build it, or set STARK_EVALUATOR)",
			   e->evaluator);
		free(e);
		return ST_ENOENT;
	}
	if (evalrun_default_cache(e->cache, sizeof(e->cache), err, sizeof(err))) {
		stark_warn("%s", err);
		free(e);
		return ST_EIO;
	}
	e->base.eval = real_eval;
	e->base.free = real_free;
	e->base.name = "stark-eval";
	e->base.slots = 1;
	*out = &e->base;
	return ST_OK;
}
