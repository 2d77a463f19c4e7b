/*
 * evalpair.c -- a candidate's whole evaluation: one process, or a compile
 * stage and then a run stage (separate processes in separate jails),
 * poll-driven so a caller can keep several in flight; the blocking forms
 * for callers that wait for one (evalrun_one, evalrun_split); and how an
 * evaluation uses the build cache.
 *
 * The run stage starts only when the compile stage says "compiled"; the
 * result is then the run stage's, with what the compile stage knows about
 * the build (its compile_ms, ext_built, ext_build_ms, ext_nvcc, the
 * toolchain and the build cache's part, and its jail's layers as
 * compile_sandbox).  In EVALRUN_AUTO mode a candidate that builds nothing
 * (evalrun_needs_compile) goes straight to the run stage: the fast format
 * compiles its kernels with NVRTC there, a library call that the run jail
 * allows, and a pure PyTorch candidate has nothing to build.
 *
 * Builds (buildcache.c).  The compile stage (or the all-in-one process)
 * builds in a scratch folder of its own, the only place its jail may
 * write; the cache's store is read-only to it.  When it ends with its
 * build made, and once its process tree is gone, the scratch folder is
 * published into the store under the key computed here (the referee's
 * toolchain fingerprint, the device kind and our own copies of the
 * sources; the referee's key must agree), and the run stage gets that
 * entry, read-only, as its build folder.  Where the referee found the
 * key's entry already published ("hit"), the compile stage built nothing
 * and the run stage gets the entry; where it judged a compile error the
 * compiler's verdict on the candidate's own code, that is remembered
 * under the key.
 *
 * JIT caches.  A run stage (or all-in-one process) of a candidate in a
 * JIT language (proto_request_jit_exec: Triton) gets a second scratch
 * folder, writable in its jail (the request's jit_dir), for the JIT's
 * cache.  Before the stage starts, where an earlier evaluation of the same
 * problem and solution published one, it is copied here into
 * jit_dir/cache, with jit_dir/restored naming its key; the referee, before
 * any candidate code runs, keeps it where that key is the one it computes
 * (env jit_cache "warm ..."), and otherwise empties it and asks for it to
 * be published afterwards (env jit_publish, with its fingerprint of the
 * JIT's toolchain, jit_toolchain).  Published caches are kept in the
 * cache's jit/ folder, beside the store: no jail ever sees them.  The key
 * is computed here, from the referee's fingerprint (the compile stage's,
 * or the last one this process saw) and our own copies of the sources;
 * once the stage's process tree is gone, jit_dir/cache is
 * published under jit/KEY, as builds are, within smaller caps.  What the
 * candidate wrote there reaches only later evaluations of the very same
 * solution, which could write it themselves.  Nothing else is ever
 * written to the store.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/common.h"
#include "pool/pool.h"
#include "pool/pool_int.h"

/* What the compile stage says about its builds, kept for the result. */
static const char *const build_keys[] = {"ext_built", "ext_build_ms", "ext_nvcc", "sandbox",
					 "toolchain", "build_key", "build_cache"};
static const char *const kept_as[] = {"ext_built", "ext_build_ms", "ext_nvcc", "compile_sandbox",
				      "toolchain", "build_key", "build_cache"};
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
	/* The build cache; root "" when the request names none. */
	char root[PATH_MAX], store[PATH_MAX], scratch[PATH_MAX], entry[PATH_MAX];
	char jit[PATH_MAX];		     /* the JIT cache's scratch, "" = none */
	char jit_fp[EVALRUN_KEY_LEN + 1];    /* the compile stage's JIT fingerprint */
	char key[EVALRUN_KEY_LEN + 1];
	char plan_key[EVALRUN_KEY_LEN + 1]; /* the footprint estimate's, "" = none */
	char plan[PROTO_PLAN_MAX + 1];	    /* its text, the request's "plan" */
	char note[320];		     /* env build_cache: what became of the build */
	struct sandbox_bind cbinds[EVALRUN_BINDS_MAX + 2], rbinds[EVALRUN_BINDS_MAX + 2];
};

bool evalrun_needs_compile(const char *src, size_t len)
{
	static const char *const words[] = {"load_inline", "cpp_extension", "load("};

	for (size_t i = 0; i < ST_ARRAY_LEN(words); i++)
		if (src && memmem(src, len, words[i], strlen(words[i])))
			return true;
	return false;
}

static bool env_is(const struct proto_result *rs, const char *key, const char *val)
{
	const char *v = evalrun__env_of(rs, key);

	return v && !strcmp(v, val);
}

/* o's binds, copied into arr, plus one: a folder of the pair's own (its
 * build, its JIT cache: two at most). */
static int add_bind(struct evalrun_opts *o, struct sandbox_bind *arr, const char *src,
		    bool writable)
{
	if (o->nbinds >= EVALRUN_BINDS_MAX + 2)
		return stark_error(ST_ETOOBIG, "evalrun: too many binds for the build folder");
	if (o->nbinds)
		memmove(arr, o->binds, o->nbinds * sizeof(*arr));
	arr[o->nbinds] = (struct sandbox_bind){.src = src, .writable = writable};
	o->binds = arr;
	o->nbinds++;
	return 0;
}

/* The sources' lengths, as the request's 0 means (strlen). */
static void src_lens(const struct proto_request *rq, size_t *plen, size_t *slen)
{
	*plen = rq->problem_len || !rq->problem_src ? rq->problem_len : strlen(rq->problem_src);
	*slen = rq->solution_len || !rq->solution_src ? rq->solution_len : strlen(rq->solution_src);
}

/* The store, and a scratch folder for a stage that builds. */
static int cache_start(struct evalrun_pair *p, const char *root, bool builds)
{
	char err[PATH_MAX + 128];
	size_t plen, slen;
	int rc;

	snprintf(p->root, sizeof(p->root), "%s", root);
	rc = evalrun_cache_prepare(p->root, err, sizeof(err));
	if (rc)
		return stark_error(rc, "evalrun: %s", err);
	if (snprintf(p->store, sizeof(p->store), "%s/store", p->root) >= (int)sizeof(p->store))
		return stark_error(ST_ETOOBIG, "evalrun: the build cache's path is too long");
	p->stage.cache_dir = p->store;
	/* The problem's footprint estimate, where an earlier evaluation of
	 * it left one (the referee checks it was made as it would make it). */
	src_lens(&p->stage, &plen, &slen);
	if (!evalrun_plan_key(p->stage.device, p->stage.problem_src, plen, p->plan_key) &&
	    evalrun_plan_load(p->root, p->plan_key, p->plan))
		p->stage.plan = p->plan;
	if (!builds)
		return 0;
	rc = evalrun_scratch_make(p->root, p->scratch, sizeof(p->scratch));
	if (!rc)
		rc = add_bind(&p->copts, p->cbinds, p->scratch, true);
	p->stage.build_dir = p->scratch;
	return rc;
}

/* The fingerprint of the JIT's toolchain the last referee of this process
 * reported: the key of a run stage with no compile stage before it.  The
 * referee checks the key of what is restored, so a stale one only costs a
 * cold cache. */
static char last_jit_fp[EVALRUN_KEY_LEN + 1];

/* The key of this evaluation's sources under a toolchain's fingerprint fp
 * (a build's, the JIT's), into key; false where fp is none or malformed. */
static bool source_key(const struct evalrun_pair *p, const char *fp, char key[EVALRUN_KEY_LEN + 1])
{
	size_t plen, slen;

	src_lens(&p->stage, &plen, &slen);
	return fp && evalrun_key_valid(fp) &&
	       !evalrun_build_key(fp, p->stage.device, p->stage.problem_src, plen,
				  p->stage.solution_src, slen, key);
}

/* The JIT cache's scratch folder for the stage about to start in o's jail
 * (arr: o's bind array), where its candidate's language has a JIT and the
 * request names a build cache; what is published under its key copied
 * in.  0, or the error that stops the evaluation. */
static int jit_start(struct evalrun_pair *p, struct evalrun_opts *o, struct sandbox_bind *arr)
{
	char key[EVALRUN_KEY_LEN + 1], why[256];
	struct evalrun_publish st;
	int rc;

	if (!p->root[0] || !proto_request_jit_exec(&p->stage))
		return 0;
	rc = evalrun_scratch_make(p->root, p->jit, sizeof(p->jit));
	if (!rc)
		rc = add_bind(o, arr, p->jit, true);
	if (rc) {
		if (p->jit[0])
			evalrun_tree_remove(p->jit);
		p->jit[0] = '\0';
		return rc;
	}
	p->stage.jit_dir = p->jit;
	if (source_key(p, p->jit_fp[0] ? p->jit_fp : last_jit_fp, key) &&
	    evalrun_jit_restore(p->root, key, p->jit, &st, why, sizeof(why)) < 0)
		stark_warn("build cache: the JIT cache of %s is not restored: %s", p->stage.id, why);
	return 0;
}

/* The referee's fingerprint of the JIT's toolchain, kept for the run
 * stage's key and the next evaluation's. */
static void note_jit_fp(struct evalrun_pair *p)
{
	const char *fp = evalrun__env_of(&p->res, "jit_toolchain");

	if (!fp || !evalrun_key_valid(fp))
		return;
	snprintf(p->jit_fp, sizeof(p->jit_fp), "%s", fp);
	snprintf(last_jit_fp, sizeof(last_jit_fp), "%s", fp);
}

/* The stage with the JIT cache ended: the cache published where the
 * referee asked (its words checked: the key is ours), then the scratch
 * removed.  What became of it is the result's env jit_store. */
static void after_jit(struct evalrun_pair *p)
{
	char key[EVALRUN_KEY_LEN + 1], why[256], note[320] = "", cache[PATH_MAX + 8];
	struct evalrun_publish st;
	int rc;

	if (!p->jit[0])
		return;
	if (p->canceled || !env_is(&p->res, "jit_publish", "1"))
		goto out;
	if (!source_key(p, evalrun__env_of(&p->res, "jit_toolchain"), key)) {
		snprintf(note, sizeof(note), "not stored: no fingerprint of the JIT's toolchain");
		goto out;
	}
	if (evalrun_wait_gone(p->er)) {
		snprintf(note, sizeof(note),
			 "not stored: the run stage's processes could not be seen to end");
		goto out;
	}
	snprintf(cache, sizeof(cache), "%s/cache", p->jit);
	rc = evalrun_publish(p->root, "jit", key, cache, &st, why, sizeof(why));
	if (rc < 0)
		snprintf(note, sizeof(note), "not stored: %s", why);
	else
		snprintf(note, sizeof(note), "%s (%llu files, %llu bytes%s)",
			 rc == 1 ? "stored by another evaluation" : "stored",
			 (unsigned long long)st.files, (unsigned long long)st.bytes,
			 st.skipped ? ", links and special files left out" : "");
out:
	if (note[0] && proto_result_add_env(&p->res, "jit_store", note) == ST_ENOMEM)
		stark_warn("evalrun: the JIT cache's note is not kept: out of memory");
	evalrun_tree_remove(p->jit);
	p->jit[0] = '\0';
	p->stage.jit_dir = NULL;
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
	p->stage.build_dir = NULL;
	p->stage.jit_dir = NULL;
	proto_result_init(&p->res);
	evalrun_info_init(&p->info);
	p->start_ns = clock_mono_ns();
	p->split = mode == EVALRUN_SPLIT ||
		   (mode == EVALRUN_AUTO && evalrun_needs_compile(rq->solution_src, rq->solution_len));
	if (mode == EVALRUN_ONE) {
		p->stages = "all";
		first = &p->copts;
	} else if (p->split) {
		p->stages = "compile+run";
		p->stage.stage = PROTO_STAGE_COMPILE;
		first = &p->copts;
	} else {
		p->stages = "run";
		p->stage.stage = PROTO_STAGE_RUN;
		first = &p->ropts;
	}
	rc = rq->cache_dir && *rq->cache_dir ? cache_start(p, rq->cache_dir, first == &p->copts) : 0;
	if (!rc && !p->split)
		rc = first == &p->copts ? jit_start(p, &p->copts, p->cbinds)
					: jit_start(p, &p->ropts, p->rbinds);
	if (!rc)
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
	/* What became of the build, as we know it, over the referee's word. */
	for (size_t k = 0; k < NKEPT && p->note[0]; k++)
		if (!strcmp(build_keys[k], "build_cache")) {
			free(p->kept[k]);
			p->kept[k] = str_dup(p->note);
		}
}

/* The referee's words to us alone, left out of the result. */
static void env_drop_internal(struct proto_result *rs)
{
	static const char *const internal[] = {"build_toolchain", "build_publish", "build_remember",
					       "plan_publish", "plan_torch", "jit_publish",
					       "jit_toolchain"};
	uint32_t k = 0;

	for (uint32_t i = 0; i < rs->nenv; i++) {
		bool drop = false;

		for (size_t j = 0; j < ST_ARRAY_LEN(internal); j++)
			drop |= !strcmp(rs->env[i].key, internal[j]);
		if (drop) {
			free(rs->env[i].key);
			free(rs->env[i].val);
		} else {
			rs->env[k++] = rs->env[i];
		}
	}
	rs->nenv = k;
}

/* Makes the result an error of the evaluation (not the candidate's). */
static int fail_build(struct evalrun_pair *p, const char *fmt, const char *arg)
{
	p->res.status = PROTO_ST_ERROR;
	free(p->res.message);
	p->res.message = NULL;
	return proto_result_set_message(&p->res, fmt, arg);
}

/* Copies the finished build into the store, once nothing of its jail is
 * left; the run stage loads the entry, or the scratch where it could not
 * be stored. */
static void publish(struct evalrun_pair *p)
{
	struct evalrun_publish st;
	char why[256];
	int rc;

	snprintf(p->entry, sizeof(p->entry), "%s", p->scratch);
	if (evalrun_wait_gone(p->er)) {
		snprintf(p->note, sizeof(p->note),
			 "not stored: the compile stage's processes could not be seen to end");
		return;
	}
	rc = evalrun_publish(p->root, "builds", p->key, p->scratch, &st, why, sizeof(why));
	if (rc < 0) {
		snprintf(p->note, sizeof(p->note), "not stored: %s", why);
		stark_warn("build cache: the build of %s is not stored: %s", p->stage.id, why);
		return;
	}
	if (snprintf(p->entry, sizeof(p->entry), "%s/builds/%s", p->store, p->key) >=
	    (int)sizeof(p->entry))
		return; /* (cannot be: the scratch's path is longer) */
	snprintf(p->note, sizeof(p->note), rc == 1 ? "stored (by another evaluation)" :
		 st.skipped ? "stored (%llu links or special files left out)" : "stored",
		 (unsigned long long)st.skipped);
	evalrun_tree_remove(p->scratch);
	p->scratch[0] = '\0';
}

/*
 * The building stage (compile, or all-in-one) ended: its key checked
 * against ours, then its build published, its entry found, or its compile
 * error remembered, as the referee's env asks.  0, or ST_ENOMEM.
 */
static int after_build(struct evalrun_pair *p)
{
	const char *key = evalrun__env_of(&p->res, "build_key"), *tc = evalrun__env_of(&p->res, "build_toolchain");
	bool compiled = p->res.status == PROTO_ST_COMPILED;
	struct stat st;

	if (!key || !p->root[0])
		return 0;
	if (!source_key(p, tc, p->key) || strcmp(p->key, key)) {
		p->key[0] = '\0';
		return compiled ? fail_build(p, "the evaluator's build key %.16s... is not the one computed from the sources and its toolchain; the build is not used", key)
				: 0;
	}
	if (p->res.status == PROTO_ST_COMPILE_ERROR && env_is(&p->res, "build_remember", "1")) {
		if (!evalrun_remember_failure(p->root, p->key, p->res.message, p->res.log))
			snprintf(p->note, sizeof(p->note), "failure remembered");
		return 0;
	}
	if (compiled && env_is(&p->res, "build_cache", "hit")) {
		if (snprintf(p->entry, sizeof(p->entry), "%s/builds/%s", p->store, p->key) >=
			    (int)sizeof(p->entry) ||
		    lstat(p->entry, &st) < 0 || !S_ISDIR(st.st_mode))
			return fail_build(p, "the build cache's entry %.16s... went away before the run stage", p->key);
		return 0;
	}
	if (env_is(&p->res, "build_publish", "1") && p->scratch[0])
		publish(p);
	return 0;
}

/* The referee estimated the problem's footprint (its env plan_publish):
 * kept in the store for the problem's later evaluations, under the key
 * computed at the start.  Best effort: an estimate not kept is made
 * again. */
static void after_plan(struct evalrun_pair *p)
{
	const char *doc = evalrun__env_of(&p->res, "plan_publish");

	if (!doc || !p->plan_key[0] || p->canceled)
		return;
	if (evalrun_plan_store(p->root, p->plan_key, doc) == ST_EINVAL)
		stark_warn("build cache: the footprint estimate of %s is not kept: malformed",
			   p->stage.id);
}

/* The process in er ended: take its result; start the run stage if due. */
static int stage_done(struct evalrun_pair *p)
{
	bool builder = !p->second && p->stage.stage != PROTO_STAGE_RUN;
	int rc;

	proto_result_release(&p->res);
	proto_result_init(&p->res);
	rc = evalrun_finish(p->er, &p->res, &p->info);
	if (!rc && builder && !p->canceled)
		rc = after_build(p);
	if (!rc)
		after_plan(p);
	after_jit(p);
	note_jit_fp(p);
	env_drop_internal(&p->res);
	if (!rc && builder && p->note[0] && !(p->split && p->res.status == PROTO_ST_COMPILED) &&
	    proto_result_add_env(&p->res, "build_cache", p->note) == ST_ENOMEM)
		rc = ST_ENOMEM;
	evalrun_free(p->er);
	p->er = NULL;
	if (rc || !p->split || p->second || p->canceled || p->res.status != PROTO_ST_COMPILED) {
		p->done = true;
		return rc;
	}
	keep_build(p);
	p->stage.stage = PROTO_STAGE_RUN;
	p->stage.build_dir = p->entry[0] ? p->entry : NULL;
	rc = p->entry[0] ? add_bind(&p->ropts, p->rbinds, p->entry, false) : 0;
	if (!rc)
		rc = jit_start(p, &p->ropts, p->rbinds);
	if (!rc)
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
	if (p->scratch[0])
		evalrun_tree_remove(p->scratch);
	if (p->jit[0])
		evalrun_tree_remove(p->jit);
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
