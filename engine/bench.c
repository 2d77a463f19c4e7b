/*
 * bench.c -- a bench as a store record: its spec journaled once
 * (BENCH_EV_SPEC: the options, every run's id, problem and policy, and
 * the base configuration), its state changes (BENCH_EV_STATE), and its
 * metadata, the record `stark report` reads (docs/REPORT.md): kind
 * "bench", the table and a row per problem, rewritten as runs end.
 *
 * Every run is created (run_create, from its problem file) right after
 * the spec is journaled, before any is stepped; a bench killed in
 * between creates the rest when it is resumed (the files must then still
 * be there; the message names a missing one).  Each run's summary (its
 * best speedup, spend, evaluation seconds) is read from its own journal,
 * the single source of truth.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "engine/engine_int.h"

static const char *policy_short(enum search_policy p)
{
	return search_policy_name(p);
}

static int policy_parse(const char *s, enum search_policy *out)
{
	for (int p = 0; p < 3; p++)
		if (!strcmp(s, search_policy_name((enum search_policy)p))) {
			*out = (enum search_policy)p;
			return ST_OK;
		}
	return ST_EINVAL;
}

/* The run id of problem `path` under policy, the idx-th of the bench. */
static void run_id_of(const char *bench, enum search_policy pol, size_t idx, const char *path,
		      char *out, size_t len)
{
	const char *base = strrchr(path, '/');
	char stem[STORE_RUN_ID_MAX + 1];
	size_t n = 0;

	base = base ? base + 1 : path;
	for (const char *p = base; *p && *p != '.' && n < sizeof(stem) - 1; p++)
		stem[n++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
				    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'
				? *p
				: '_';
	stem[n] = '\0';
	/* cut to fit: the index keeps ids apart */
	if (snprintf(out, len, "%s-%s-%04zu-", bench, policy_short(pol), idx) < (int)len) {
		size_t used = strlen(out);

		memcpy(out + used, stem, strnlen(stem, len - 1 - used));
		out[used + strnlen(stem, len - 1 - used)] = '\0';
	}
}

bool bench_is(struct store *st, const char *id)
{
	struct dbuf m;
	json_t *o;
	bool is;

	if (!store_run_id_valid(id))
		return false;
	dbuf_init(&m, STORE_META_MAX);
	if (store_run_meta_get(st, id, &m)) {
		dbuf_release(&m);
		return false;
	}
	o = json_loadb(m.p ? m.p : "", m.len, 0, NULL);
	is = o && !strcmp(jr_str(o, "kind", ""), "bench");
	json_decref(o);
	dbuf_release(&m);
	return is;
}

const char *bench_opt(const struct bench *b, const char *key, const char *dflt)
{
	return jr_str(json_object_get(b->spec, "options"), key, dflt);
}

void bench_free(struct bench *b)
{
	if (!b)
		return;
	json_decref(b->spec);
	free(b->runs);
	store_unlock_run(b->lock);
	free(b);
}

/* ---- the record ---- */

static int write_record(struct bench *b)
{
	json_t *m, *table = bench_table(b->runs, b->nruns),
		   *probs = bench_problems(b->runs, b->nruns);
	int rc;

	m = table && probs
		? json_pack("{s:s, s:s, s:i, s:f, s:s, s:s, s:I, s:f, s:O, s:O}", "kind", "bench",
			    "bench_id", b->id, "level", b->nruns ? b->runs[0].level : 0, "created",
			    b->created, "state", run_state_name(b->state), "reason", b->reason,
			    "runs", (json_int_t)b->nruns, "updated", run__now(), "table", table,
			    "problems", probs)
		: NULL;
	json_decref(table);
	json_decref(probs);
	rc = run__meta_put(b->st, b->id, m);
	if (!rc)
		b->meta_ns = clock_mono_ns();
	return rc;
}

static int journal(struct bench *b, uint32_t type, json_t *head, const char *body)
{
	struct jr_batch batch;
	json_t *bo = body ? json_pack("{s:s}", "config", body) : NULL;
	int rc;

	jr_batch_init(&batch);
	rc = head && (!body || bo) ? jr_batch_add(&batch, type, head, bo, NULL, 0) : ST_ENOMEM;
	json_decref(head);
	json_decref(bo);
	if (!rc)
		rc = jr_batch_commit(&batch, b->st, b->id);
	jr_batch_release(&batch);
	if (!rc)
		b->last_seq++;
	return rc;
}

static int apply_cap(struct bench *b, double usd)
{
	json_t *o = json_object_get(b->spec, "options");

	return o && !json_object_set_new(o, "max_dollars", json_real(usd)) ? ST_OK : ST_ENOMEM;
}

int bench_set_cap(struct bench *b, double max_dollars)
{
	int rc;

	if (!(max_dollars >= 0) || !isfinite(max_dollars))
		return ST_EINVAL;
	rc = journal(b, BENCH_EV_CAP,
		     json_pack("{s:f, s:f}", "max_dollars", max_dollars, "at", run__now()), NULL);
	return rc ? rc : apply_cap(b, max_dollars);
}

int bench_set_state(struct bench *b, enum run_state s, const char *reason)
{
	int rc = journal(b, BENCH_EV_STATE,
			 json_pack("{s:s, s:s, s:f}", "state", run_state_name(s), "reason",
				   reason ? reason : "", "at", run__now()),
			 NULL);

	if (rc)
		return rc;
	b->state = s;
	snprintf(b->reason, sizeof(b->reason), "%s", reason ? reason : "");
	return write_record(b);
}

/* ---- a run's summary, from its journal ---- */

struct scan_ctx {
	struct bench_run *br;
};

static bool kb_verdict(const json_t *v, double *speedup)
{
	const json_t *s = json_object_get(v, "status");

	*speedup = jr_real(v, "speedup", NAN);
	if (json_is_boolean(json_object_get(v, "correct")))
		return json_is_true(json_object_get(v, "correct"));
	if (json_is_string(s))
		return !strcmp(json_string_value(s), "correct");
	return json_is_string(v) && !strcmp(json_string_value(v), "correct");
}

/* Copies s into dst (size n), cut at a character boundary. */
static void copy_utf8(char *dst, size_t n, const char *s)
{
	size_t len = strlen(s);

	if (len >= n) {
		len = n - 1;
		while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--; /* s[len] starts a character: cut before it */
	}
	memcpy(dst, s, len);
	dst[len] = '\0';
}

/* The compiled baseline of one result (its body): the best
 * speedup_compile of the correct ones, or the first reason it was
 * unavailable (engine.h: struct bench_run). */
static void scan_compile(struct bench_run *br, const json_t *body)
{
	double sc = jr_real(body, "speedup_compile", NAN);
	const char *why = jr_str(body, "baseline_compile_error", "");

	if (!strcmp(jr_str(body, "status", ""), "correct") && isfinite(sc)) {
		br->compile_state = 1;
		if (!isfinite(br->best_compile) || sc > br->best_compile)
			br->best_compile = sc;
	} else if (*why && br->compile_state < 0) {
		br->compile_state = 0;
		copy_utf8(br->compile_why, sizeof(br->compile_why), why);
	}
}

static int scan_result(void *arg, const struct store_event *ev)
{
	struct scan_ctx *c = arg;
	json_t *body = NULL, *kb;
	double sp;

	if (ev->type != JR_EVAL_RESULT)
		return 0;
	if (jr_parse_body(ev->data, ev->len, &body) || !body)
		return 0;
	for (const char *k = "check_ms"; k; k = strcmp(k, "check_ms") ? NULL : "time_ms") {
		double ms = jr_real(body, k, NAN);

		if (isfinite(ms) && ms > 0)
			c->br->gpu_seconds += ms / 1000;
	}
	scan_compile(c->br, body);
	kb = json_object_get(json_object_get(body, "verdicts"), "kernelbench");
	if (json_is_object(kb) || json_is_string(kb)) {
		bool ok = kb_verdict(kb, &sp);

		if (!isfinite(sp)) /* one timing serves both verdicts */
			sp = jr_real(body, "speedup", NAN);

		if (c->br->kb_correct < 0)
			c->br->kb_correct = 0;
		if (ok) {
			c->br->kb_correct = 1;
			if (isfinite(sp) && (!isfinite(c->br->kb_best) || sp > c->br->kb_best))
				c->br->kb_best = sp;
		}
	}
	json_decref(body);
	return 0;
}

int bench_summary_from(struct bench *b, size_t i, struct run *r)
{
	struct bench_run *br = &b->runs[i];
	struct scan_ctx c = {br};
	uint32_t best = run_best(r);

	br->state = r->state;
	br->done = r->state == RUN_FINISHED;
	br->attempts = r->attempts;
	br->best = best == TREE_NONE ? NAN : tree_node(r->tree, best)->speedup;
	br->llm_calls = 0;
	for (int k = 0; k < ROLE_COUNT; k++) {
		br->spend[k] = r->spend[k];
		br->llm_calls += r->spend[k].calls;
	}
	br->gpu_seconds = 0;
	br->kb_correct = -1;
	br->kb_best = NAN;
	br->compile_state = -1;
	br->best_compile = NAN;
	br->compile_why[0] = '\0';
	return store_scan(b->st, r->id, 1, scan_result, &c);
}

int bench_refresh_run(struct bench *b, size_t i)
{
	char err[RUN_ERR_MAX];
	struct run *r = NULL;
	int rc = run_load(b->st, b->runs[i].run_id, false, &r, err, sizeof(err));

	if (rc == ST_ENOENT) { /* not created yet */
		b->runs[i].state = RUN_RUNNING;
		return ST_OK;
	}
	if (!rc) {
		rc = bench_summary_from(b, i, r);
		b->runs[i].state = run_shown_state(b->st, r->id, r->state);
	}
	run_free(r);
	return rc;
}

/* ---- the spend it can reach ---- */

/* The most one call of role can cost (every retry's turns included). */
static double call_cost(const struct search_config *c, const char *model, enum search_role role,
			size_t problem_bytes, uint32_t retry)
{
	double pin, pout;
	uint64_t in = (uint64_t)c->context_tokens[role] + context_tokens(problem_bytes) + 4096 +
		      (uint64_t)retry * ((uint64_t)c->max_tokens[role] + 512);
	const char *m = c->model[role][0] ? c->model[role] : model;

	route_price(c, role, m, &pin, &pout);
	return (double)in * pin / 1e6 + (double)c->max_tokens[role] * pout / 1e6;
}

/* The worst attempt of a policy: every call of its costliest action, every retry. */
static double attempt_cost(const struct search_config *c, const char *model, enum search_policy pol,
			   size_t problem_bytes)
{
	double cost[ROLE_COUNT] = {0}, worst;

	for (int k = 0; k < ROLE_COUNT; k++)
		for (uint32_t t = 0; t <= c->verify_retries; t++)
			cost[k] += call_cost(c, model, (enum search_role)k, problem_bytes, t);
	switch (pol) {
	case POLICY_SAMPLING:
		return cost[ROLE_SAMPLE];
	case POLICY_REFLEXION:
		return cost[ROLE_REFLECT];
	default:
		worst = cost[ROLE_PLAN] + cost[ROLE_CODE];
		return worst > cost[ROLE_DEBUG] ? worst : cost[ROLE_DEBUG];
	}
}

double bench_max_dollars(const struct bench *b)
{
	const json_t *runs = json_object_get(b->spec, "runs");
	const char *model = bench_opt(b, "model", "");
	double sum = 0;

	for (size_t i = 0; i < b->nruns; i++) {
		const struct bench_run *r = &b->runs[i];
		uint32_t left = b->cfg.budget > r->attempts ? b->cfg.budget - r->attempts : 0;
		size_t bytes = (size_t)jr_u64(json_array_get(runs, i), "problem_bytes", 65536);

		if (!r->done)
			sum += left * attempt_cost(&b->cfg, model, r->policy, bytes);
	}
	return sum;
}

/* ---- creating and loading ---- */

static int runs_from_spec(struct bench *b, char *err, size_t errlen)
{
	const json_t *runs = json_object_get(b->spec, "runs"), *e;
	size_t i;

	b->nruns = json_array_size(runs);
	if (!b->nruns || b->nruns > BENCH_RUNS_MAX) {
		snprintf(err, errlen, "bench %s: its spec names %zu runs", b->id, b->nruns);
		return ST_EPROTO;
	}
	b->runs = calloc(b->nruns, sizeof(*b->runs));
	if (!b->runs)
		return ST_ENOMEM;
	json_array_foreach(runs, i, e)
	{
		struct bench_run *r = &b->runs[i];

		snprintf(r->run_id, sizeof(r->run_id), "%s", jr_str(e, "run_id", ""));
		snprintf(r->problem, sizeof(r->problem), "%s", jr_str(e, "problem", ""));
		r->level = (int)jr_i64(e, "level", 0);
		r->best = r->kb_best = r->best_compile = NAN;
		r->kb_correct = -1;
		r->compile_state = -1;
		r->compile_asked = !strcmp(bench_opt(b, "baseline", "eager"), "compile");
		r->state = RUN_RUNNING;
		if (policy_parse(jr_str(e, "policy", ""), &r->policy) ||
		    !store_run_id_valid(r->run_id)) {
			snprintf(err, errlen, "bench %s: run %zu of its spec is malformed", b->id,
				 i + 1);
			return ST_EPROTO;
		}
	}
	return ST_OK;
}

/* Creates run i from its problem file (a run that exists is kept). */
int bench__create_run(struct bench *b, size_t i, char *err, size_t errlen)
{
	const json_t *e = json_array_get(json_object_get(b->spec, "runs"), i);
	struct search_config c = b->cfg;
	struct run_spec rs = {.run_id = b->runs[i].run_id,
			      .problem_path = jr_str(e, "path", ""),
			      .llm = bench_opt(b, "llm", ""),
			      .model = bench_opt(b, "model", NULL),
			      .device = bench_opt(b, "device", "cpu"),
			      .eval = bench_opt(b, "eval", "stark-eval"),
			      .format = bench_opt(b, "format", "kernelbench"),
			      .precision = bench_opt(b, "precision", "fp32"),
			      .baseline = bench_opt(b, "baseline", "eager"),
			      .kb_trials = run__kb_trials(json_object_get(b->spec, "options")),
			      .insecure_sandbox = jr_bool(json_object_get(b->spec, "options"),
							  "insecure_sandbox", false),
			      .cfg = &c};
	struct run *r = NULL;
	int rc;

	c.policy = b->runs[i].policy;
	rc = run_create(b->st, &rs, &r, err, errlen);
	if (rc == ST_EEXIST)
		rc = ST_OK;
	run_free(r);
	return rc;
}

static json_t *spec_json(const struct bench_spec *s, const char *id, double created, char *err,
			 size_t errlen)
{
	json_t *runs = json_array(), *o;
	size_t idx = 0;

	for (size_t p = 0; runs && p < s->npolicies; p++)
		for (size_t i = 0; i < s->nproblems; i++) {
			const char *path = s->problems[i].path, *base = strrchr(path, '/');
			char rid[STORE_RUN_ID_MAX + 1];
			struct dbuf src;

			dbuf_init(&src, RUN_PROBLEM_MAX);
			if (io_read_file(path, RUN_PROBLEM_MAX, &src)) {
				snprintf(err, errlen, "problem %s: cannot read it", path);
				dbuf_release(&src);
				json_decref(runs);
				return NULL;
			}
			run_id_of(id, s->policies[p], idx++, path, rid, sizeof(rid));
			json_array_append_new(
			    runs, json_pack("{s:s, s:s, s:s, s:i, s:s, s:I}", "run_id", rid,
					    "problem", base ? base + 1 : path, "path", path,
					    "level", s->problems[i].level, "policy",
					    search_policy_name(s->policies[p]), "problem_bytes",
					    (json_int_t)src.len));
			dbuf_release(&src);
		}
	o = json_pack("{s:i, s:s, s:f, s:{s:s, s:s?, s:s, s:s, s:s, s:s, s:b, s:I, s:I, s:I, s:f,"
		      " s:s, s:I}, s:o}",
		      "v", 1, "bench_id", id, "created", created, "options", "llm", s->llm, "model",
		      s->model, "eval", s->eval, "format", s->format, "precision",
		      s->precision ? s->precision : "fp32", "device", s->devices,
		      "insecure_sandbox", s->insecure_sandbox, "runs_in_flight",
		      (json_int_t)s->runs_in_flight, "llm_in_flight", (json_int_t)s->llm_in_flight,
		      "evals_per_device", (json_int_t)s->evals_per_device, "max_dollars",
		      s->max_dollars, "baseline", s->baseline ? s->baseline : "eager", "kb_trials",
		      (json_int_t)(s->kb_trials < 0 ? 0 : s->kb_trials ? s->kb_trials : 5), "runs",
		      runs);
	if (o)
		json_object_set_new(o, "stark", run_producer_new(NULL));
	if (!o)
		snprintf(err, errlen, "bench %s: out of memory", id);
	return o;
}

static void make_id(char *out, size_t len)
{
	unsigned short rnd = 0;
	time_t t = time(NULL);
	struct tm tm;
	char stamp[32];

	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		rnd = (unsigned short)t;
	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(out, len, "bench-%s-%04x", stamp, rnd);
}

int bench_create(struct store *st, const struct bench_spec *spec, struct bench **out, char *err,
		 size_t errlen)
{
	struct bench *b = calloc(1, sizeof(*b));
	struct dbuf cfgtext;
	uint64_t last = 1;
	int rc;

	*out = NULL;
	dbuf_init(&cfgtext, 1u << 20);
	if (!b)
		return ST_ENOMEM;
	b->st = st;
	if (spec->bench_id)
		snprintf(b->id, sizeof(b->id), "%s", spec->bench_id);
	else
		make_id(b->id, sizeof(b->id));
	if (!store_run_id_valid(b->id) || strlen(b->id) > BENCH_ID_MAX) {
		snprintf(err, errlen,
			 "bench id '%s' is not valid (at most %d letters, digits, '.', '_', '-')",
			 b->id, BENCH_ID_MAX);
		rc = ST_EINVAL;
		goto out_fail;
	}
	if (!spec->nproblems || spec->nproblems > BENCH_PROBLEMS_MAX || !spec->npolicies) {
		snprintf(err, errlen, "bench %s: %zu problems (1..%d wanted)", b->id,
			 spec->nproblems, BENCH_PROBLEMS_MAX);
		rc = ST_EINVAL;
		goto out_fail;
	}
	rc = store_lock_run(st, b->id, &b->lock);
	if (rc) {
		snprintf(err, errlen, "bench %s: cannot lock: %s", b->id, stark_strerror(rc));
		goto out_fail;
	}
	rc = store_run_create(st, b->id, "{\"kind\":\"bench\"}", 16);
	if (rc == ST_EEXIST && !store_last_seq(st, b->id, &last) && last == 0)
		rc = ST_OK; /* killed before its spec: take it over */
	if (rc) {
		snprintf(err, errlen,
			 rc == ST_EEXIST
			     ? "%s already exists in this store (a bench continues with "
			       "`stark resume %s`)"
			     : "bench %s: cannot create: %s",
			 b->id, rc == ST_EEXIST ? b->id : stark_strerror(rc));
		goto out_fail;
	}
	b->created = run__now();
	b->cfg = *spec->cfg;
	rc = search_config_dump(spec->cfg, &cfgtext);
	b->spec = rc ? NULL : spec_json(spec, b->id, b->created, err, errlen);
	if (!b->spec) {
		rc = rc ? rc : ST_EINVAL;
		goto out_fail;
	}
	rc = journal(b, BENCH_EV_SPEC, json_incref(b->spec), dbuf_str(&cfgtext));
	if (!rc)
		rc = runs_from_spec(b, err, errlen);
	for (size_t i = 0; !rc && i < b->nruns; i++)
		rc = bench__create_run(b, i, err, errlen);
	if (!rc)
		rc = bench_set_state(b, RUN_RUNNING, "started");
	if (rc) {
		if (!err[0])
			snprintf(err, errlen, "bench %s: cannot journal: %s", b->id,
				 stark_strerror(rc));
		goto out_fail;
	}
	dbuf_release(&cfgtext);
	*out = b;
	return ST_OK;
out_fail:
	dbuf_release(&cfgtext);
	bench_free(b);
	return rc;
}

struct load_ctx {
	struct bench *b;
	char *err;
	size_t errlen;
};

static int load_cb(void *arg, const struct store_event *ev)
{
	struct load_ctx *c = arg;
	struct bench *b = c->b;
	json_t *head = NULL, *body = NULL;
	int rc = jr_parse_head(ev->data, ev->len, &head);

	b->last_seq = ev->seq;
	if (!rc && ev->type == BENCH_EV_SPEC && !b->spec) {
		rc = jr_parse_body(ev->data, ev->len, &body);
		b->spec = head;
		head = NULL;
		b->created = jr_real(b->spec, "created", 0);
		search_config_defaults(&b->cfg);
		if (!rc && search_config_load_text(&b->cfg, "bench config",
						   jr_str(body, "config", ""), c->err, c->errlen))
			rc = ST_EPROTO;
	} else if (!rc && ev->type == BENCH_EV_CAP && b->spec) {
		rc = apply_cap(b, jr_real(head, "max_dollars", 0));
	} else if (!rc && ev->type == BENCH_EV_STATE) {
		if (run_state_parse(jr_str(head, "state", ""), &b->state))
			rc = ST_EPROTO;
		snprintf(b->reason, sizeof(b->reason), "%s", jr_str(head, "reason", ""));
	}
	json_decref(head);
	json_decref(body);
	if (rc && !c->err[0])
		snprintf(c->err, c->errlen, "bench %s: event %llu is malformed", b->id,
			 (unsigned long long)ev->seq);
	return rc;
}

int bench_load(struct store *st, const char *id, bool lock, struct bench **out, char *err,
	       size_t errlen)
{
	struct bench *b = calloc(1, sizeof(*b));
	struct load_ctx c = {b, err, errlen};
	int rc;

	*out = NULL;
	err[0] = '\0';
	if (!b)
		return ST_ENOMEM;
	b->st = st;
	snprintf(b->id, sizeof(b->id), "%s", id);
	if (!bench_is(st, id)) {
		snprintf(err, errlen, "%s is not a bench in this store", id);
		rc = ST_ENOENT;
		goto out_fail;
	}
	if (lock && (rc = store_lock_run(st, id, &b->lock))) {
		snprintf(err, errlen, "bench %s: cannot lock: %s", id, stark_strerror(rc));
		goto out_fail;
	}
	rc = store_scan(st, id, 1, load_cb, &c);
	if (!rc && !b->spec) {
		snprintf(err, errlen, "bench %s was never started (no spec journaled)", id);
		rc = ST_ENOENT;
	}
	if (!rc)
		rc = runs_from_spec(b, err, errlen);
	for (size_t i = 0; !rc && i < b->nruns; i++)
		rc = bench_refresh_run(b, i);
	if (rc) {
		if (!err[0])
			snprintf(err, errlen, "bench %s: cannot read it: %s", id,
				 stark_strerror(rc));
		goto out_fail;
	}
	*out = b;
	return ST_OK;
out_fail:
	bench_free(b);
	return rc;
}

json_t *bench_json(const struct bench *b)
{
	json_t *o =
	    json_pack("{s:s, s:s, s:s, s:s, s:f, s:O, s:o, s:o, s:f}", "kind", "bench", "bench_id",
		      b->id, "state", run_state_name(b->state), "reason", b->reason, "created",
		      b->created, "options", json_object_get(b->spec, "options"), "table",
		      bench_table(b->runs, b->nruns), "problems", bench_problems(b->runs, b->nruns),
		      "max_dollars_left", bench_max_dollars(b));

	if (o) /* null: a bench made before stark 0.2.0 */
		json_object_set(o, "stark",
				json_object_get(b->spec, "stark")
				    ? json_object_get(b->spec, "stark")
				    : json_null());
	return o;
}

int bench__write_record(struct bench *b)
{
	return write_record(b);
}
