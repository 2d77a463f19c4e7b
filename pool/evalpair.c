/*
 * evalpair.c -- a candidate's whole evaluation: one process, or a compile
 * stage and then a run stage (separate processes in separate jails, sharing
 * the build cache), poll-driven so a caller can keep several in flight.
 * Also the files an evaluation starts from: the sources, the build cache.
 *
 * The run stage starts only when the compile stage says "compiled"; the
 * result is then the run stage's, with what the compile stage knows about
 * the build (its compile_ms, ext_built, ext_build_ms, ext_nvcc and its
 * jail's layers as compile_sandbox).  In EVALRUN_AUTO mode a candidate that builds
 * nothing (evalrun_needs_compile) goes straight to the run stage: the
 * fast format compiles its kernels with NVRTC there, a library call that
 * the run jail allows, and a pure PyTorch candidate has nothing to build.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/common.h"
#include "pool/evalrun.h"
#include "pool/evalrun_int.h"

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
	/* A local failure while polling still ends in a result (evalrun.h). */
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

int evalrun_load_sources(struct proto_request *rq, const char *problem_path,
			 const char *solution_path, char *err, size_t errlen)
{
	const char *paths[2] = {problem_path, solution_path};
	const char *what[2] = {"problem", "solution"};
	struct dbuf src[2];
	int rc = 0;

	dbuf_init(&src[0], PROTO_SRC_MAX);
	dbuf_init(&src[1], PROTO_SRC_MAX);
	for (int i = 0; i < 2 && !rc; i++) {
		rc = io_read_file(paths[i], PROTO_SRC_MAX, &src[i]);
		if (rc == ST_ENOENT)
			snprintf(err, errlen, "%s file '%s' does not exist", what[i], paths[i]);
		else if (rc == ST_ETOOBIG)
			snprintf(err, errlen, "%s file '%s' is larger than %u bytes", what[i],
				 paths[i], PROTO_SRC_MAX);
		else if (rc)
			snprintf(err, errlen, "%s file '%s' cannot be read: %s", what[i], paths[i],
				 strerror(errno));
		else if (src[i].len == 0) {
			snprintf(err, errlen, "%s file '%s' is empty", what[i], paths[i]);
			rc = ST_EINVAL;
		}
	}
	if (rc)
		goto out_free;
	free(rq->problem_name);
	free(rq->solution_name);
	free(rq->problem_src);
	free(rq->solution_src);
	rq->problem_name = str_dup(problem_path);
	rq->solution_name = str_dup(solution_path);
	rq->problem_src = dbuf_detach(&src[0], &rq->problem_len);
	rq->solution_src = dbuf_detach(&src[1], &rq->solution_len);
	if (!rq->problem_name || !rq->solution_name) {
		snprintf(err, errlen, "out of memory");
		rc = ST_ENOMEM;
	}
out_free:
	dbuf_release(&src[0]);
	dbuf_release(&src[1]);
	return rc;
}

/* mkdir -p for a path we own, mode 0700 for what we create. */
static int make_dirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST) {
			*p = '/';
			return -1;
		}
		*p = '/';
	}
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

int evalrun_default_cache(char *buf, size_t len, char *err, size_t errlen)
{
	const char *env = getenv("STARK_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	int n;

	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (xdg && *xdg)
		n = snprintf(buf, len, "%s/stark", xdg);
	else if (home && *home)
		n = snprintf(buf, len, "%s/.cache/stark", home);
	else {
		snprintf(err, errlen, "no build cache: set STARK_CACHE or HOME");
		return ST_EINVAL;
	}
	if (n < 0 || (size_t)n >= len || n >= PROTO_PATH_MAX) {
		snprintf(err, errlen, "build cache path is too long");
		return ST_EINVAL;
	}
	if (buf[0] != '/') {
		snprintf(err, errlen, "build cache '%s' is not an absolute path", buf);
		return ST_EINVAL;
	}
	if (make_dirs(buf) < 0) {
		snprintf(err, errlen, "cannot create build cache '%s': %s", buf, strerror(errno));
		return ST_EIO;
	}
	return 0;
}
