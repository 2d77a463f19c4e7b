/*
 * rebuild.c -- a run's state from its journal.
 *
 * One pass over the journal replays what finished attempts did to the tree
 * (JR_NODE -> tree_add, JR_EVAL_RESULT -> tree_set_result), reading only
 * event heads and blobs, and the configuration changes made on resume
 * (JR_CONFIG) and the complaints about answers (JR_CHECK, for `stark
 * show`); the events of LLM calls are skipped by type.  A
 * second, short pass parses the events of the attempt still open, if any,
 * into the memo agent.c consults, and the last SELECT (RNG state) and last
 * LLM response (cumulative spend per role and per model).  This is what makes resuming a
 * 10,000-node run take milliseconds rather than seconds.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

/* ---- pass 1 ---- */

struct load_ctx {
	struct run *r;
	struct dbuf scratch;
	uint64_t last_select;
	uint64_t last_response;
	int rc;
	char *err;
	size_t errlen;
};

static int load_fail(struct load_ctx *c, int rc, uint64_t seq, const char *what)
{
	snprintf(c->err, c->errlen, "run %s: journal event %llu: %s", c->r->id,
		 (unsigned long long)seq, what);
	c->rc = rc;
	return 1;
}

static int apply_run(struct load_ctx *c, const struct store_event *ev)
{
	struct run *r = c->r;
	json_t *head = NULL, *body = NULL;
	const char *src, *cfgtext;
	struct dbuf seed;
	int rc;

	dbuf_init(&seed, TREE_CODE_MAX);
	if (ev->seq != 1 || r->tree)
		return load_fail(c, ST_EPROTO, ev->seq, "run header out of place");
	rc = jr_parse_head(ev->data, ev->len, &head);
	if (!rc)
		rc = jr_parse_body(ev->data, ev->len, &body);
	if (rc || !body)
		goto out_bad;
	if (jr_u64(head, "v", 0) != JR_VERSION) {
		rc = load_fail(c, ST_EVERSION, ev->seq, "unsupported journal version");
		goto out_free;
	}
	src = jr_str(body, "problem_src", NULL);
	cfgtext = jr_str(body, "config", NULL);
	if (!src || !cfgtext || !json_is_object(json_object_get(head, "options")))
		goto out_bad;
	r->options = json_incref(json_object_get(head, "options"));
	if (json_is_object(json_object_get(head, "stark")))
		r->producer = json_incref(json_object_get(head, "stark"));
	rc = run_prompts_from_json(json_object_get(body, "prompts"),
				   jr_str(r->options, "format", "kernelbench"), &r->prompts);
	if (rc == ST_EPROTO)
		goto out_bad;
	if (rc == ST_ENOMEM) {
		rc = load_fail(c, ST_ENOMEM, ev->seq, "out of memory");
		goto out_free;
	}
	r->prompts_loaded = r->prompts_recorded = rc == 0;
	snprintf(r->problem, sizeof(r->problem), "%s", jr_str(head, "problem", "problem"));
	r->created = jr_real(head, "created", 0);
	r->eval_seed = jr_u64(head, "eval_seed", 0);
	r->problem_len = strlen(src);
	r->problem_src = strdup(src);
	if (!r->problem_src) {
		rc = load_fail(c, ST_ENOMEM, ev->seq, "out of memory");
		goto out_free;
	}
	search_config_defaults(&r->cfg);
	if (search_config_load_text(&r->cfg, "journaled config", cfgtext, c->err, c->errlen)) {
		c->rc = ST_EPROTO;
		rc = 1;
		goto out_free;
	}
	if (!(r->cfg_text = strdup(cfgtext))) {
		rc = load_fail(c, ST_ENOMEM, ev->seq, "out of memory");
		goto out_free;
	}
	rng_seed(&r->rng, r->cfg.seed);
	rc = tree_seed_code(r->problem_src, &seed);
	if (!rc)
		rc = tree_new(dbuf_str(&seed), &r->tree);
	if (!rc)
		rc = run_info_reserve(r, 0);
	if (rc) {
		rc = load_fail(c, rc, ev->seq, "cannot build the root");
		goto out_free;
	}
	goto out_free;
out_bad:
	rc = load_fail(c, ST_EPROTO, ev->seq, "malformed run header");
out_free:
	dbuf_release(&seed);
	json_decref(head);
	json_decref(body);
	return rc;
}

static int apply_state(struct load_ctx *c, const struct store_event *ev)
{
	json_t *head;

	if (jr_parse_head(ev->data, ev->len, &head) ||
	    run_state_parse(jr_str(head, "state", ""), &c->r->state)) {
		if (head)
			json_decref(head);
		return load_fail(c, ST_EPROTO, ev->seq, "malformed state event");
	}
	snprintf(c->r->reason, sizeof(c->r->reason), "%s", jr_str(head, "reason", ""));
	json_decref(head);
	return 0;
}

enum { NF_ID, NF_PARENT, NF_ATTEMPT, NF_ORIGIN, NF_CODE_LEN, NF_REJECTED, NF_BLOB, NF_COUNT };

static int apply_node(struct load_ctx *c, const struct store_event *ev)
{
	struct jr_field f[NF_COUNT] = {{.key = "id"},	  {.key = "parent"},   {.key = "attempt"},
				       {.key = "origin"}, {.key = "code_len"}, {.key = "rejected"},
				       {.key = "blob"}};
	struct run *r = c->r;
	enum node_origin origin;
	uint64_t id, parent, attempt = 0, code_len = 0, bn = 0;
	char name[32], why[RUN_REASON_MAX];
	const char *blob;
	uint32_t got;
	int rc;

	if (jr_head_scan(ev->data, ev->len, f, NF_COUNT) || !jr_field_u64(&f[NF_ID], &id) ||
	    !jr_field_u64(&f[NF_PARENT], &parent) ||
	    !jr_field_str(&f[NF_ORIGIN], name, sizeof(name)) || node_origin_parse(name, &origin))
		goto out_bad;
	jr_field_u64(&f[NF_ATTEMPT], &attempt);
	jr_field_u64(&f[NF_CODE_LEN], &code_len);
	jr_field_u64(&f[NF_BLOB], &bn);
	if (jr_blob_at(ev->data, ev->len, bn, &blob) || code_len > bn)
		goto out_bad;
	dbuf_reset(&c->scratch);
	if (dbuf_append(&c->scratch, blob ? blob : "", (size_t)code_len) ||
	    dbuf_append(&c->scratch, "", 1) ||
	    dbuf_append(&c->scratch, blob ? blob + code_len : "", (size_t)(bn - code_len)))
		return load_fail(c, ST_ENOMEM, ev->seq, "out of memory");
	rc = tree_add(r->tree, parent > UINT32_MAX ? TREE_NONE : (uint32_t)parent, origin,
		      c->scratch.p, c->scratch.p + code_len + 1, &got);
	if (rc || got != id || run_info_reserve(r, got))
		return load_fail(c, rc ? rc : ST_EPROTO, ev->seq, "node does not fit the tree");
	r->info[got].attempt = (uint32_t)attempt;
	r->info[got].node_seq = ev->seq;
	r->cur.node = got;
	if (!f[NF_REJECTED].p)
		return 0;
	if (f[NF_REJECTED].escaped) {
		json_t *head = NULL;

		if (jr_parse_head(ev->data, ev->len, &head))
			goto out_bad;
		snprintf(why, sizeof(why), "%s", jr_str(head, "rejected", ""));
		json_decref(head);
	} else {
		jr_field_str(&f[NF_REJECTED], why, sizeof(why));
	}
	if (tree_set_result(r->tree, got, NODE_REJECTED, 0, why))
		goto out_bad;
	return 0;
out_bad:
	return load_fail(c, ST_EPROTO, ev->seq, "malformed node event");
}

enum {
	RF_NODE,
	RF_STATUS,
	RF_VERDICT,
	RF_SPEEDUP,
	RF_RUNTIME,
	RF_REF,
	RF_BLOB,
	RF_SPEEDUP_C,
	RF_REF_C,
	RF_COUNT
};

static int apply_result(struct load_ctx *c, const struct store_event *ev)
{
	struct jr_field f[RF_COUNT] = {{.key = "node"},	      {.key = "status"},
				       {.key = "verdict"},    {.key = "speedup"},
				       {.key = "runtime_us"}, {.key = "ref_runtime_us"},
				       {.key = "blob"},	      {.key = "speedup_compile"},
				       {.key = "ref_compile_us"}};
	struct run *r = c->r;
	enum node_status st;
	enum proto_status verdict;
	double speedup = 0, rt = NAN, ref = NAN, sc = NAN, refc = NAN;
	uint64_t id, bn = 0;
	char sname[32], vname[32];
	const char *blob;

	if (jr_head_scan(ev->data, ev->len, f, RF_COUNT) || !jr_field_u64(&f[RF_NODE], &id) ||
	    !jr_field_str(&f[RF_STATUS], sname, sizeof(sname)) ||
	    !jr_field_str(&f[RF_VERDICT], vname, sizeof(vname)) || node_status_parse(sname, &st) ||
	    proto_status_parse(vname, &verdict) || id >= tree_count(r->tree))
		goto out_bad;
	jr_field_real(&f[RF_SPEEDUP], &speedup);
	jr_field_real(&f[RF_RUNTIME], &rt);
	jr_field_real(&f[RF_REF], &ref);
	jr_field_real(&f[RF_SPEEDUP_C], &sc);
	jr_field_real(&f[RF_REF_C], &refc);
	jr_field_u64(&f[RF_BLOB], &bn);
	if (jr_blob_at(ev->data, ev->len, bn, &blob))
		goto out_bad;
	dbuf_reset(&c->scratch);
	if (dbuf_append(&c->scratch, blob ? blob : "", (size_t)bn))
		return load_fail(c, ST_ENOMEM, ev->seq, "out of memory");
	if (tree_set_result(r->tree, (uint32_t)id, st, speedup, dbuf_str(&c->scratch)))
		goto out_bad;
	r->info[id].verdict = (int)verdict;
	r->info[id].runtime_us = rt;
	r->info[id].ref_runtime_us = ref;
	r->info[id].speedup_compile = sc;
	r->info[id].ref_compile_us = refc;
	r->info[id].result_seq = ev->seq;
	r->cur.eval_done = true;
	return 0;
out_bad:
	return load_fail(c, ST_EPROTO, ev->seq, "malformed evaluation result");
}

/* A configuration changed on resume: the body holds the whole of it. */
static int apply_config(struct load_ctx *c, const struct store_event *ev)
{
	json_t *body = NULL;
	const char *text;
	int rc = 1;

	if (jr_parse_body(ev->data, ev->len, &body) || !(text = jr_str(body, "config", NULL)))
		goto out;
	search_config_defaults(&c->r->cfg);
	if (search_config_load_text(&c->r->cfg, "journaled config", text, c->err, c->errlen)) {
		c->rc = ST_EPROTO;
		json_decref(body);
		return 1;
	}
	free(c->r->cfg_text);
	if (!(c->r->cfg_text = strdup(text))) {
		json_decref(body);
		return load_fail(c, ST_ENOMEM, ev->seq, "out of memory");
	}
	rc = 0;
out:
	json_decref(body);
	return rc ? load_fail(c, ST_EPROTO, ev->seq, "malformed configuration change") : 0;
}

/* The run took another stark's prompts (run_accept_upgrade). */
static int apply_upgrade(struct load_ctx *c, const struct store_event *ev)
{
	json_t *head = NULL, *body = NULL;
	int rc = ST_EPROTO;

	if (!jr_parse_head(ev->data, ev->len, &head) && !jr_parse_body(ev->data, ev->len, &body))
		rc = run__apply_upgrade(c->r, head, body, c->err, c->errlen);
	json_decref(head);
	json_decref(body);
	return rc ? load_fail(c, rc, ev->seq, "malformed upgrade event") : 0;
}

/* A complaint about an answer, kept for `stark show`. */
static int apply_check(struct load_ctx *c, const struct store_event *ev)
{
	json_t *head = NULL;
	int rc;

	if (jr_parse_head(ev->data, ev->len, &head))
		return load_fail(c, ST_EPROTO, ev->seq, "malformed check event");
	rc = run_check_add(c->r, (uint32_t)jr_u64(head, "attempt", 0), jr_str(head, "key", ""),
			   jr_str(head, "reason", ""));
	json_decref(head);
	return rc ? load_fail(c, rc, ev->seq, "out of memory") : 0;
}

static int load_cb(void *arg, const struct store_event *ev)
{
	struct load_ctx *c = arg;
	struct run *r = c->r;

	r->last_seq = ev->seq;
	if (ev->type != JR_RUN && !r->tree)
		return load_fail(c, ST_EPROTO, ev->seq, "journal does not start with a run header");
	switch (ev->type) {
	case JR_RUN:
		return apply_run(c, ev);
	case JR_STATE:
		return apply_state(c, ev);
	case JR_SELECT:
		memset(&r->cur, 0, sizeof(r->cur));
		r->cur.open = true;
		r->cur.k = r->attempts + 1;
		r->cur.select_seq = ev->seq;
		r->cur.node = TREE_NONE;
		c->last_select = ev->seq;
		return 0;
	case JR_LLM_RESPONSE:
		c->last_response = ev->seq;
		return 0;
	case JR_NODE:
		return apply_node(c, ev);
	case JR_EVAL_REQUEST:
		r->cur.eval_requested = true;
		return 0;
	case JR_EVAL_RESULT:
		return apply_result(c, ev);
	case JR_ATTEMPT_END:
		r->attempts++;
		r->cur.open = false;
		return 0;
	case JR_CHECK:
		return apply_check(c, ev);
	case JR_CONFIG:
		return apply_config(c, ev);
	case JR_UPGRADE:
		return apply_upgrade(c, ev);
	case JR_LLM_REQUEST:
		return 0;
	}
	return load_fail(c, ST_EPROTO, ev->seq, "unknown event type");
}

static int open_cb(void *arg, const struct store_event *ev)
{
	struct load_ctx *c = arg;
	struct run_memo *m;
	json_t *head;

	if (ev->type != JR_LLM_REQUEST && ev->type != JR_LLM_RESPONSE && ev->type != JR_CHECK)
		return 0;
	if (jr_parse_head(ev->data, ev->len, &head))
		return load_fail(c, ST_EPROTO, ev->seq, "malformed llm event");
	m = run_memo_add(c->r, jr_str(head, "key", ""));
	if (!m) {
		json_decref(head);
		return load_fail(c, ST_ETOOBIG, ev->seq, "too many llm calls in one attempt");
	}
	if (ev->type == JR_LLM_REQUEST) {
		m->req_seq = ev->seq;
	} else if (ev->type == JR_LLM_RESPONSE) {
		m->resp_seq = ev->seq;
		m->resp_fatal = jr_bool(head, "fatal", false);
	} else {
		m->checked = true;
	}
	json_decref(head);
	return 0;
}

static int load_select(struct load_ctx *c)
{
	struct run *r = c->r;
	json_t *head = NULL;
	enum search_action a;
	const char *an;
	int rc;

	rc = jr_read(r->st, r->id, c->last_select, JR_SELECT, &head, NULL, NULL);
	if (rc)
		goto out_bad;
	an = jr_str(head, "action", "");
	rc = ST_EPROTO;
	for (int i = ACTION_PLAN; i <= ACTION_REFLECT; i++)
		if (!strcmp(an, search_action_name((enum search_action)i))) {
			a = (enum search_action)i;
			rc = 0;
		}
	if (rc || rng_parse(jr_str(head, "rng", ""), &r->rng))
		goto out_bad;
	if (r->cur.open) {
		r->cur.choice.node = (uint32_t)jr_u64(head, "node", TREE_NONE);
		r->cur.choice.action = a;
		r->cur.choice.explored = jr_bool(head, "explored", false);
		if (jr_u64(head, "attempt", 0) != r->cur.k ||
		    !tree_node(r->tree, r->cur.choice.node))
			goto out_bad;
	}
	json_decref(head);
	return 0;
out_bad:
	json_decref(head);
	return load_fail(c, ST_EPROTO, c->last_select, "malformed selection");
}

static void spend_from(const json_t *o, struct run_spend *s)
{
	s->calls = jr_u64(o, "calls", 0);
	s->tokens_in = jr_u64(o, "tokens_in", 0);
	s->tokens_out = jr_u64(o, "tokens_out", 0);
	s->tokens_reasoning = jr_u64(o, "tokens_reasoning", 0);
	s->dollars = jr_real(o, "dollars", 0);
}

static int load_spend(struct load_ctx *c)
{
	struct run *r = c->r;
	json_t *head = NULL, *sp, *o;
	const char *model;
	int rc;

	rc = jr_read(r->st, r->id, c->last_response, JR_LLM_RESPONSE, &head, NULL, NULL);
	if (rc)
		return load_fail(c, ST_EPROTO, c->last_response, "unreadable llm response");
	sp = json_object_get(head, "spend");
	for (int i = 0; i < ROLE_COUNT; i++)
		spend_from(json_object_get(sp, search_role_name((enum search_role)i)),
			   &r->spend[i]);
	json_object_foreach(json_object_get(head, "spend_models"), model, o)
	{
		struct run_spend *ms = run_model_spend(r, model);

		if (ms)
			spend_from(o, ms);
	}
	json_decref(head);
	return 0;
}

int run_load(struct store *st, const char *run_id, bool lock, struct run **out, char *err,
	     size_t errlen)
{
	struct load_ctx c = {.err = err, .errlen = errlen};
	struct run *r;
	int rc;

	if (!store_run_id_valid(run_id)) {
		snprintf(err, errlen, "run id '%s' is not valid", run_id);
		return ST_EINVAL;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return ST_ENOMEM;
	r->st = st;
	r->cur.node = TREE_NONE;
	snprintf(r->id, sizeof(r->id), "%s", run_id);
	jr_batch_init(&r->batch);
	c.r = r;
	dbuf_init(&c.scratch, STORE_EVENT_MAX + 1);
	if (lock) {
		rc = store_lock_run(st, run_id, &r->lock);
		if (rc) {
			snprintf(err, errlen, "run %s: cannot lock: %s", run_id,
				 stark_strerror(rc));
			goto out_fail;
		}
	}
	rc = store_scan(st, run_id, 1, load_cb, &c);
	if (rc == ST_ENOENT) {
		snprintf(err, errlen, "run %s: no such run", run_id);
		goto out_fail;
	}
	if (rc < 0) {
		snprintf(err, errlen, "run %s: cannot read the journal: %s", run_id,
			 stark_strerror(rc));
		goto out_fail;
	}
	if (rc > 0 || !r->tree) {
		rc = c.rc ? c.rc : ST_EPROTO;
		if (!r->tree && !c.rc) {
			snprintf(err, errlen,
				 "run %s was never started (stopped while being created); start it again with `stark run PROBLEM --run-id %s`",
				 run_id, run_id);
			rc = ST_ENOENT;
		}
		goto out_fail;
	}
	if (c.last_select && load_select(&c))
		goto out_pass2;
	if (r->cur.open && store_scan(st, run_id, r->cur.select_seq + 1, open_cb, &c) < 0) {
		snprintf(err, errlen, "run %s: cannot read the journal", run_id);
		rc = ST_EIO;
		goto out_fail;
	}
	if (c.rc)
		goto out_pass2;
	if (c.last_response && load_spend(&c))
		goto out_pass2;
	dbuf_release(&c.scratch);
	*out = r;
	return ST_OK;
out_pass2:
	rc = c.rc;
out_fail:
	dbuf_release(&c.scratch);
	run_free(r);
	return rc ? rc : ST_EPROTO;
}
