/*
 * evalpair.c -- a candidate's whole evaluation: one process, or a compile
 * stage and then a run stage (separate processes in separate jails, sharing
 * the build cache), poll-driven so a caller can keep several in flight;
 * and the blocking forms for callers that wait for one (evalrun_one,
 * evalrun_split).
 *
 * The run stage starts only when the compile stage says "compiled"; the
 * result is then the run stage's, with what the compile stage knows about
 * the build (its compile_ms, ext_built, ext_build_ms, ext_nvcc and its
 * jail's layers as compile_sandbox).  In EVALRUN_AUTO mode a candidate that builds
 * nothing (evalrun_needs_compile) goes straight to the run stage: the
 * fast format compiles its kernels with NVRTC there, a library call that
 * the run jail allows, and a pure PyTorch candidate has nothing to build.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "pool/pool.h"
#include "pool/pool_int.h"

/* What the compile stage says about its builds, kept for the result. */
static const char *const build_keys[] = {"ext_built", "ext_build_ms", "ext_nvcc", "sandbox"};
static const char *const kept_as[] = {"ext_built", "ext_build_ms", "ext_nvcc", "compile_sandbox"};
#define NKEPT ST_ARRAY_LEN(build_keys)

struct evalrun_pair {
	struct evalrun_opts copts, ropts; /* copies; their binds borrowed */
	struct proto_request stage;	  /* rq (borrowed) with the stage now running */
	bool split;			  /* compile, then run */
	const char *stages;		  /* "all", "compile+run", "run" */
	struct evalrun *er;		  /* the process running, or NULL */
	bool second;			  /* the run stage after a compile was started */
	bool done, canceled;
	struct proto_result res; /* the result to report, once done */
	struct evalrun_info info;
	struct evalrun_stage_info first; /* the compile stage's process */
	char *kept[NKEPT];
	double compile_ms;
	uint64_t start_ns;
};

bool evalrun_needs_compile(const char *src, size_t len)
{
	static const char *const words[] = {"load_inline", "cpp_extension", "load("};

	for (size_t i = 0; i < ST_ARRAY_LEN(words); i++)
		if (src && memmem(src, len, words[i], strlen(words[i])))
			return true;
	return false;
}

int evalrun_pair_start(const struct evalrun_opts *copts, const struct evalrun_opts *ropts,
		       const struct proto_request *rq, enum evalrun_stages mode,
		       struct evalrun_pair **out)
{
	struct evalrun_pair *p;
	const struct evalrun_opts *first;
	int rc;

	*out = NULL;
	if (mode != EVALRUN_ONE && (!rq->cache_dir || !*rq->cache_dir))
		return stark_error(ST_EINVAL, "evalrun: the split stages need a build cache");
	p = calloc(1, sizeof(*p));
	if (!p)
		return ST_ENOMEM;
	p->copts = *copts;
	p->ropts = *ropts;
	p->stage = *rq;
	proto_result_init(&p->res);
	evalrun_info_init(&p->info);
	p->start_ns = clock_mono_ns();
	p->split = mode == EVALRUN_SPLIT ||
		   (mode == EVALRUN_AUTO && evalrun_needs_compile(rq->solution_src, rq->solution_len));
	if (mode == EVALRUN_ONE) {
		p->stages = "all";
		first = copts;
	} else if (p->split) {
		p->stages = "compile+run";
		p->stage.stage = PROTO_STAGE_COMPILE;
		first = copts;
	} else {
		p->stages = "run";
		p->stage.stage = PROTO_STAGE_RUN;
		first = ropts;
	}
	rc = evalrun_start(first, &p->stage, &p->er);
	if (rc) {
		evalrun_pair_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

size_t evalrun_pair_pollfds(const struct evalrun_pair *p, struct pollfd *pfd, size_t max,
			    int *timeout_ms)
{
	if (timeout_ms)
		*timeout_ms = -1;
	if (p->done || !p->er)
		return 0;
	return evalrun_pollfds(p->er, pfd, max, timeout_ms);
}

/* The compile stage said "compiled": keep what the result will need. */
static void keep_build(struct evalrun_pair *p)
{
	p->compile_ms = p->res.stage_ms[1];
	p->first = p->info.stage[0];
	for (uint32_t i = 0; i < p->res.nenv; i++)
		for (size_t k = 0; k < NKEPT; k++)
			if (!strcmp(p->res.env[i].key, build_keys[k]) && !p->kept[k])
				p->kept[k] = str_dup(p->res.env[i].val);
}

/* The process in er ended: take its result; start the run stage if due. */
static int stage_done(struct evalrun_pair *p)
{
	int rc;

	proto_result_release(&p->res);
	proto_result_init(&p->res);
	rc = evalrun_finish(p->er, &p->res, &p->info);
	evalrun_free(p->er);
	p->er = NULL;
	if (rc || !p->split || p->second || p->canceled || p->res.status != PROTO_ST_COMPILED) {
		p->done = true;
		return rc;
	}
	keep_build(p);
	p->stage.stage = PROTO_STAGE_RUN;
	rc = evalrun_start(&p->ropts, &p->stage, &p->er);
	if (rc)
		p->done = true; /* finish reports the compile stage's result */
	p->second = rc == 0;
	return rc;
}

int evalrun_pair_poll(struct evalrun_pair *p, int timeout_ms)
{
	int rc;

	if (p->done)
		return 1;
	rc = evalrun_poll(p->er, timeout_ms);
	if (rc == 0)
		return 0;
	/* A local failure while polling still ends in a result (pool/pool.h). */
	rc = stage_done(p);
	if (rc)
		return rc;
	return p->done ? 1 : 0;
}

void evalrun_pair_cancel(struct evalrun_pair *p)
{
	if (p->done)
		return;
	p->canceled = true;
	evalrun_cancel(p->er);
	if (stage_done(p))
		p->done = true;
}

int evalrun_pair_finish(struct evalrun_pair *p, struct proto_result *rs,
			struct evalrun_info *info)
{
	int rc = 0;

	if (!p->done)
		evalrun_pair_cancel(p);
	proto_result_release(rs);
	*rs = p->res;
	proto_result_init(&p->res);
	if (p->second) {
		/* The build happened in the first stage; the second only loaded. */
		rs->stage_ms[1] = p->compile_ms;
		for (size_t k = 0; k < NKEPT && !rc; k++)
			if (p->kept[k] && proto_result_add_env(rs, kept_as[k], p->kept[k]) == ST_ENOMEM)
				rc = ST_ENOMEM; /* a full env only loses these notes */
	}
	if (!rc && proto_result_add_env(rs, "stages", p->stages) == ST_ENOMEM)
		rc = ST_ENOMEM;
	if (info) {
		evalrun_info_release(info);
		*info = p->info;
		evalrun_info_init(&p->info);
		if (p->second) {
			info->stage[1] = info->stage[0];
			info->stage[0] = p->first;
			info->nstages = 2;
		}
		info->total_ns = clock_mono_ns() - p->start_ns;
	}
	return rc;
}

void evalrun_pair_free(struct evalrun_pair *p)
{
	if (!p)
		return;
	evalrun_free(p->er);
	proto_result_release(&p->res);
	evalrun_info_release(&p->info);
	for (size_t k = 0; k < NKEPT; k++)
		free(p->kept[k]);
	free(p);
}

int evalrun_split(const struct evalrun_opts *compile_opts, const struct evalrun_opts *run_opts,
		  const struct proto_request *rq, struct proto_result *rs,
		  struct evalrun_info *info)
{
	struct evalrun_pair *p;
	int rc, prc;

	rc = evalrun_pair_start(compile_opts, run_opts, rq, EVALRUN_SPLIT, &p);
	if (rc)
		return rc;
	while ((prc = evalrun_pair_poll(p, -1)) == 0)
		;
	rc = evalrun_pair_finish(p, rs, info);
	evalrun_pair_free(p);
	return prc < 0 ? prc : rc;
}

int evalrun_one(const struct evalrun_opts *o, const struct proto_request *rq,
		struct proto_result *rs, struct evalrun_info *info)
{
	struct evalrun *er;
	int rc;

	rc = evalrun_start(o, rq, &er);
	if (rc)
		return rc;
	while ((rc = evalrun_poll(er, -1)) == 0)
		;
	rc = evalrun_finish(er, rs, info);
	evalrun_free(er);
	return rc;
}
