/*
 * create.c -- a new run: its id, its problem read and checked, its options,
 * configuration and prompt templates (and the stark that made it) journaled (JR_RUN, then JR_STATE running) under its
 * lock, then loaded back from that journal like any resumed run, so a run
 * has one way into memory.  A run killed between its record and its
 * header is taken over by the next `stark run --run-id` of the same id.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine_int.h"

/* ---- creating a run ---- */

static void make_run_id(const char *problem_path, char *out, size_t len)
{
	const char *base = strrchr(problem_path, '/');
	char stem[24], stamp[32];
	unsigned short rnd = 0;
	time_t t = time(NULL);
	struct tm tm;
	size_t n = 0;

	base = base ? base + 1 : problem_path;
	for (const char *p = base; *p && *p != '.' && n < sizeof(stem) - 1; p++) {
		char c = *p;

		stem[n++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
				    (c >= '0' && c <= '9') || c == '-' || c == '_'
				? c
				: '_';
	}
	stem[n] = '\0';
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		rnd = (unsigned short)(getpid() ^ t);
	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(out, len, "%s-%s-%04x", n ? stem : "run", stamp, rnd);
}

static int read_problem(const char *path, struct dbuf *src, char *err, size_t errlen)
{
	int rc = io_read_file(path, RUN_PROBLEM_MAX, src);

	if (rc) {
		snprintf(err, errlen, "problem %s: cannot read: %s", path, stark_strerror(rc));
		return rc;
	}
	if (memchr(src->p ? src->p : "", '\0', src->len) || !src->len) {
		snprintf(err, errlen, "problem %s: empty or not a text file", path);
		return ST_EINVAL;
	}
	{
		json_t *probe = json_stringn(src->p, src->len);

		if (!probe) {
			snprintf(err, errlen, "problem %s: not UTF-8 text", path);
			return ST_EINVAL;
		}
		json_decref(probe);
	}
	return ST_OK;
}

static json_t *run_options(const struct run_spec *spec)
{
	/* kb_trials as the request has it: 5 by default, 0 for none */
	json_int_t kb = spec->kb_trials < 0 ? 0 : spec->kb_trials ? spec->kb_trials : 5;

	return json_pack("{s:s, s:s?, s:s, s:s, s:s, s:s, s:s, s:I, s:b}", "llm", spec->llm,
			 "model", spec->model, "device", spec->device, "eval", spec->eval, "format",
			 spec->format, "precision", spec->precision ? spec->precision : "fp32",
			 "baseline", spec->baseline ? spec->baseline : "eager", "kb_trials", kb,
			 "insecure_sandbox", spec->insecure_sandbox);
}

int run_create(struct store *st, const struct run_spec *spec, struct run **out, char *err,
	       size_t errlen)
{
	char id[STORE_RUN_ID_MAX + 1], abspath[PROTO_PATH_MAX];
	struct store_lock *lock = NULL;
	struct dbuf src, cfgtext;
	struct jr_batch b;
	struct prompt_set prompts = {{0}};
	json_t *head = NULL, *body = NULL;
	char phash[17];
	const char *base;
	uint64_t eval_seed = 0;
	int rc;

	dbuf_init(&src, RUN_PROBLEM_MAX);
	dbuf_init(&cfgtext, 1u << 20);
	jr_batch_init(&b);
	if (spec->run_id)
		snprintf(id, sizeof(id), "%s", spec->run_id);
	else
		make_run_id(spec->problem_path, id, sizeof(id));
	if (!store_run_id_valid(id)) {
		snprintf(err, errlen,
			 "run id '%s' is not valid (use letters, digits, '.', '_', '-')", id);
		rc = ST_EINVAL;
		goto out_free;
	}
	rc = read_problem(spec->problem_path, &src, err, errlen);
	if (rc)
		goto out_free;
	if (!realpath(spec->problem_path, abspath))
		snprintf(abspath, sizeof(abspath), "%s", spec->problem_path);
	base = strrchr(abspath, '/');
	base = base ? base + 1 : abspath;
	/* The templates are the run's from now on, whatever stark resumes it. */
	rc = run_prompts_current(spec->cfg, spec->format, &prompts, phash, err, errlen);
	if (rc)
		goto out_free;
	rc = search_config_dump(spec->cfg, &cfgtext);
	if (rc) {
		snprintf(err, errlen, "run %s: cannot write the configuration", id);
		goto out_free;
	}
	if (getrandom(&eval_seed, sizeof(eval_seed), 0) != (ssize_t)sizeof(eval_seed))
		eval_seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	eval_seed &= (1ull << 53) - 1; /* exact in JSON */
	rc = store_lock_run(st, id, &lock);
	if (rc) {
		snprintf(err, errlen, "run %s: cannot lock: %s", id, stark_strerror(rc));
		goto out_free;
	}
	rc = store_run_create(st, id, "{}", 2);
	if (rc == ST_EEXIST) {
		/* Killed between creating the record and journaling its header: the
		 * run never started, and we hold its lock, so take it over. */
		uint64_t last = 1;

		if (!store_last_seq(st, id, &last) && last == 0)
			rc = ST_OK;
	}
	if (rc) {
		snprintf(err, errlen,
			 rc == ST_EEXIST
			     ? "run %s already exists (continue it with `stark resume %s`)"
			     : "run %s: cannot create: %s",
			 id, rc == ST_EEXIST ? id : stark_strerror(rc));
		goto out_free;
	}
	head = json_pack("{s:i, s:s, s:s, s:s, s:f, s:I, s:o, s:o}", "v", JR_VERSION, "run_id", id,
			 "problem", base, "problem_path", abspath, "created", run__now(), "eval_seed",
			 (json_int_t)eval_seed, "options", run_options(spec), "stark",
			 run_producer_new(phash));
	body = json_pack("{s:s, s:s, s:o}", "problem_src", dbuf_str(&src), "config",
			 dbuf_str(&cfgtext), "prompts", run_prompts_json(&prompts, spec->format));
	rc = head && body ? jr_batch_add(&b, JR_RUN, head, body, NULL, 0) : ST_ENOMEM;
	json_decref(head);
	json_decref(body);
	head = json_pack("{s:s, s:s, s:f}", "state", "running", "reason", "started", "at", run__now());
	if (!rc)
		rc = head ? jr_batch_add(&b, JR_STATE, head, NULL, NULL, 0) : ST_ENOMEM;
	json_decref(head);
	if (!rc)
		rc = jr_batch_commit(&b, st, id);
	if (rc) {
		snprintf(err, errlen, "run %s: cannot journal the run header: %s", id,
			 stark_strerror(rc));
		goto out_free;
	}
	rc = run_load(st, id, false, out, err, errlen);
	if (rc)
		goto out_free;
	(*out)->lock = lock;
	(*out)->fresh = true;
	lock = NULL;
	rc = run_meta_write(*out);
	if (rc) {
		snprintf(err, errlen, "run %s: cannot write metadata: %s", id, stark_strerror(rc));
		run_free(*out);
		*out = NULL;
	}
out_free:
	prompt_release(&prompts);
	store_unlock_run(lock);
	jr_batch_release(&b);
	dbuf_release(&cfgtext);
	dbuf_release(&src);
	return rc;
}
