/*
 * model.c -- a run as the report's data model.
 *
 * The summary is `stark show --json`'s object (engine.h: run_json); one scan of
 * the journal adds what only the journal holds: for each attempt the
 * policy's choice, its LLM calls (role, model, tokens, dollars, latency,
 * failures), the anchor checks' complaints, its outcome and when it
 * started and ended, and the spend and best speedup once it was over; for
 * each node when it was made, why it was rejected, and its evaluation
 * (message, log tail, first bad index, flags, env, trials, intervals,
 * stage times); and the run's state changes.  Node code and instructions
 * come from the rebuilt tree.  Only event heads are parsed, except the
 * results of the nodes whose details are asked for.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

/* ---- helpers shared by report/ ---- */

/* Bytes of the well-formed UTF-8 sequence at p (at most n), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
	size_t k = p[0] < 0x80	       ? 1
		   : (p[0] >> 5) == 6  ? 2
		   : (p[0] >> 4) == 14 ? 3
		   : (p[0] >> 3) == 30 ? 4
				       : 0;

	if (!k || k > n || (k == 2 && p[0] < 0xc2) || (k == 4 && p[0] > 0xf4))
		return 0;
	for (size_t i = 1; i < k; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if (k == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0)))
		return 0; /* overlong, or a surrogate */
	if (k == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90)))
		return 0;
	return k;
}

json_t *report__text(const char *p, size_t n)
{
	json_t *s = json_stringn(p ? p : "", p ? n : 0);
	char *c;

	if (s || !p)
		return s;
	/* Not UTF-8: keep what is, mark what is not. */
	c = malloc(n ? n : 1);
	if (!c)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t k = utf8_seq((const unsigned char *)p + i, n - i);

		if (k)
			memcpy(c + i, p + i, k);
		else
			c[i] = '?', k = 1;
		i += k;
	}
	s = json_stringn(c, n);
	free(c);
	return s;
}

int report__set(json_t *o, const char *key, json_t *v)
{
	if (!v)
		return ST_ENOMEM;
	return json_object_set_new(o, key, v) ? ST_ENOMEM : ST_OK;
}

int report__push(json_t *a, json_t *v)
{
	if (!v)
		return ST_ENOMEM;
	return json_array_append_new(a, v) ? ST_ENOMEM : ST_OK;
}

json_t *report__num(double v)
{
	return jr_real_new(v);
}

/* ---- the scan ---- */

struct scan {
	struct run *r;
	long detail;
	json_t *nodes;	/* the run object's, borrowed */
	json_t *log;	/* attempt objects, attempt k at k - 1 */
	json_t *states; /* {state, reason, at} */
	double dollars; /* spend so far */
	double best;	/* best speedup so far, 0 for none */
	int rc;
	char *err;
	size_t errlen;
};

static bool wants(const struct scan *c, uint64_t id)
{
	return c->detail == REPORT_ALL || (c->detail >= 0 && (uint64_t)c->detail == id);
}

static int scan_fail(struct scan *c, int rc, uint64_t seq, const char *what)
{
	snprintf(c->err, c->errlen, "run %s: journal event %llu: %s", c->r->id,
		 (unsigned long long)seq, what);
	c->rc = rc;
	return 1;
}

static json_t *attempt_of(struct scan *c, const json_t *head)
{
	uint64_t k = jr_u64(head, "attempt", 0);

	return k ? json_array_get(c->log, (size_t)(k - 1)) : NULL;
}

/* A number of o as it is (integers stay integers), or null. */
static json_t *copy_num(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? json_incref(v) : report__num(jr_real(o, key, NAN));
}

static int on_select(struct scan *c, const json_t *h)
{
	uint64_t k = jr_u64(h, "attempt", 0);
	json_t *a;

	if (k != json_array_size(c->log) + 1)
		return ST_EPROTO;
	a = json_pack("{s:I, s:s, s:I, s:b, s:o, s:n, s:n, s:n, s:s, s:n, s:n, s:[], s:[]}",
		      "attempt", (json_int_t)k, "action", jr_str(h, "action", ""), "parent",
		      (json_int_t)jr_u64(h, "node", 0), "explored", jr_bool(h, "explored", false),
		      "started", copy_num(h, "at"), "ended", "node", "outcome", "reason", "",
		      "dollars", "best", "llm", "checks");
	return report__push(c->log, a);
}

static int on_request(struct scan *c, const json_t *h)
{
	json_t *a = attempt_of(c, h);

	if (!a)
		return ST_OK;
	return report__push(
	    json_object_get(a, "llm"),
	    json_pack("{s:s, s:s, s:I, s:s, s:s, s:n, s:n, s:n, s:n, s:n, s:n, s:b, s:b, s:s, "
		      "s:n, s:n, s:n}",
		      "key", jr_str(h, "key", ""), "role", jr_str(h, "role", ""), "retry",
		      (json_int_t)jr_u64(h, "retry", 0), "llm", jr_str(h, "llm", ""), "model",
		      jr_str(h, "model", ""), "tokens_in", "tokens_out", "tokens_reasoning",
		      "dollars", "ms", "rc", "answered", false, "truncated", false, "error", "",
		      "http_status", "tries", "at"));
}

/* The request a response answers: the last call of its key still unanswered. */
static json_t *call_of(json_t *calls, const char *key)
{
	for (size_t i = json_array_size(calls); i-- > 0;) {
		json_t *o = json_array_get(calls, i);

		if (!strcmp(jr_str(o, "key", ""), key))
			return jr_bool(o, "answered", false) ? NULL : o;
	}
	return NULL;
}

static int on_response(struct scan *c, const json_t *h)
{
	json_t *a = attempt_of(c, h), *calls, *o, *sp = json_object_get(h, "spend"), *v;
	const char *role;
	int rc = ST_OK;

	if (json_is_object(sp)) {
		c->dollars = 0;
		json_object_foreach(sp, role, v)
		{
			c->dollars += jr_real(v, "dollars", 0);
		}
	}
	if (!a)
		return ST_OK;
	calls = json_object_get(a, "llm");
	o = call_of(calls, jr_str(h, "key", ""));
	if (!o) { /* a response whose request is older than the journal's start */
		o = json_pack("{s:s, s:s, s:s}", "key", jr_str(h, "key", ""), "role",
			      jr_str(h, "role", ""), "model", "");
		rc = report__push(calls, json_incref(o));
		json_decref(o);
		if (rc)
			return rc;
	}
	rc |= report__set(o, "answered", json_true());
	rc |= report__set(o, "tokens_in", json_integer((json_int_t)jr_u64(h, "tokens_in", 0)));
	rc |= report__set(o, "tokens_out", json_integer((json_int_t)jr_u64(h, "tokens_out", 0)));
	rc |= report__set(o, "tokens_reasoning",
			  json_integer((json_int_t)jr_u64(h, "tokens_reasoning", 0)));
	rc |= report__set(o, "truncated", json_boolean(jr_bool(h, "truncated", false)));
	if (jr_str(h, "model", "")[0])
		rc |= report__set(o, "model", json_string(jr_str(h, "model", "")));
	rc |= report__set(o, "dollars", copy_num(h, "dollars"));
	rc |= report__set(o, "ms", copy_num(h, "ms"));
	rc |= report__set(o, "rc", json_integer(jr_i64(h, "rc", 0)));
	rc |= report__set(o, "fatal", json_boolean(jr_bool(h, "fatal", false)));
	rc |= report__set(o, "error", json_string(jr_str(h, "error", "")));
	rc |= report__set(o, "http_status", json_integer(jr_i64(h, "http_status", 0)));
	rc |= report__set(o, "tries", json_integer(jr_i64(h, "tries", 0)));
	rc |= report__set(o, "at", copy_num(h, "at"));
	return rc ? ST_ENOMEM : ST_OK;
}

static int on_check(struct scan *c, const json_t *h)
{
	json_t *a = attempt_of(c, h);

	if (!a)
		return ST_OK;
	return report__push(json_object_get(a, "checks"),
			    json_pack("{s:s, s:s, s:I, s:s}", "key", jr_str(h, "key", ""), "role",
				      jr_str(h, "role", ""), "retry",
				      (json_int_t)jr_u64(h, "retry", 0), "reason",
				      jr_str(h, "reason", "")));
}

static int on_node(struct scan *c, const json_t *h)
{
	uint64_t id = jr_u64(h, "id", UINT64_MAX);
	json_t *n = id < json_array_size(c->nodes) ? json_array_get(c->nodes, (size_t)id) : NULL;
	json_t *rej = json_object_get(h, "rejected");
	int rc;

	if (!n)
		return ST_EPROTO;
	rc = report__set(n, "at", copy_num(h, "at"));
	if (!rc && json_is_string(rej))
		rc = report__set(n, "rejected", json_incref(rej));
	return rc;
}

/* The end of a log, from a line start where one is near. */
static json_t *log_tail(const char *log, size_t n)
{
	size_t from = 0;

	if (n > REPORT_LOG_TAIL) {
		const char *nl;

		from = n - REPORT_LOG_TAIL;
		nl = memchr(log + from, '\n', n - from);
		if (nl && (size_t)(nl - log) < from + 512)
			from = (size_t)(nl - log) + 1;
		while (from < n && ((unsigned char)log[from] & 0xc0) == 0x80)
			from++;
	}
	return report__text(log + from, n - from);
}

static json_t *result_obj(const json_t *h, const json_t *b)
{
	static const char *const nums[] = {
	    "speedup",	      "runtime_us",	   "runtime_lo_us",	"runtime_hi_us",
	    "ref_runtime_us", "ref_lo_us",	   "ref_hi_us",		"reps",
	    "trials_run",     "trials_passed",	   "max_abs_err",	"max_rel_err",
	    "startup_ms",     "compile_ms",	   "check_ms",		"time_ms",
	    "ref_compile_us", "ref_compile_lo_us", "ref_compile_hi_us", "speedup_compile"};
	json_t *o = json_object(), *flags = json_array(), *env = json_object(), *v;
	const char *log = jr_str(b, "log", ""), *k;
	size_t i;
	int rc = ST_OK;

	if (!o || !flags || !env)
		goto out_fail;
	rc |= report__set(o, "verdict", json_string(jr_str(b, "status", jr_str(h, "verdict", ""))));
	rc |= report__set(o, "message", json_string(jr_str(b, "message", "")));
	rc |= report__set(o, "first_bad", json_string(jr_str(b, "first_bad", "")));
	rc |= report__set(o, "baseline_compile_error",
			  json_string(jr_str(b, "baseline_compile_error", "")));
	rc |= report__set(o, "log_tail", log_tail(log, strlen(log)));
	rc |= report__set(o, "log_bytes", json_integer((json_int_t)strlen(log)));
	for (i = 0; i < ST_ARRAY_LEN(nums); i++)
		rc |= report__set(o, nums[i], copy_num(b, nums[i]));
	rc |= report__set(o, "wall_ms", copy_num(h, "wall_ms"));
	rc |= report__set(o, "at", copy_num(h, "at"));
	json_array_foreach(json_object_get(b, "flags"), i, v)
	{
		if (json_is_string(v))
			rc |= report__push(flags, json_incref(v));
	}
	json_object_foreach(json_object_get(b, "env"), k, v)
	{
		if (json_is_string(v))
			rc |= report__set(env, k, json_incref(v));
	}
	rc |= report__set(o, "flags", flags);
	flags = NULL;
	rc |= report__set(o, "env", env);
	env = NULL;
	if (rc)
		goto out_fail;
	return o;
out_fail:
	json_decref(o);
	json_decref(flags);
	json_decref(env);
	return NULL;
}

static int on_result(struct scan *c, const struct store_event *ev, const json_t *h)
{
	uint64_t id = jr_u64(h, "node", UINT64_MAX);
	json_t *n = id < json_array_size(c->nodes) ? json_array_get(c->nodes, (size_t)id) : NULL;
	json_t *b = NULL;
	int rc;

	if (!n)
		return ST_EPROTO;
	if (!wants(c, id))
		return ST_OK;
	rc = jr_parse_body(ev->data, ev->len, &b);
	if (rc)
		return rc;
	rc = report__set(n, "result", result_obj(h, b ? b : h));
	json_decref(b);
	return rc;
}

static int on_end(struct scan *c, const json_t *h)
{
	json_t *a = attempt_of(c, h), *node = json_object_get(h, "node");
	const struct tree_node *n;
	int rc = ST_OK;

	if (json_is_integer(node)) {
		n = tree_node(c->r->tree, (uint32_t)json_integer_value(node));
		if (n && n->status == NODE_CORRECT && n->speedup > c->best)
			c->best = n->speedup;
	}
	if (!a)
		return ST_OK;
	rc |= report__set(a, "node", json_is_integer(node) ? json_incref(node) : json_null());
	rc |= report__set(a, "outcome", json_string(jr_str(h, "outcome", "")));
	rc |= report__set(a, "reason",
			  report__text(jr_str(h, "reason", ""), strlen(jr_str(h, "reason", ""))));
	rc |= report__set(a, "ended", copy_num(h, "at"));
	rc |= report__set(a, "dollars", report__num(c->dollars));
	rc |= report__set(a, "best", c->best > 0 ? json_real(c->best) : json_null());
	return rc ? ST_ENOMEM : ST_OK;
}

static int scan_cb(void *arg, const struct store_event *ev)
{
	struct scan *c = arg;
	json_t *h = NULL;
	int rc = ST_OK;

	if (ev->type == JR_RUN || ev->type == JR_EVAL_REQUEST)
		return 0;
	if (jr_parse_head(ev->data, ev->len, &h))
		return scan_fail(c, ST_EPROTO, ev->seq, "malformed event head");
	switch (ev->type) {
	case JR_STATE:
		rc = report__push(c->states,
				  json_pack("{s:s, s:s, s:o}", "state", jr_str(h, "state", ""),
					    "reason", jr_str(h, "reason", ""), "at",
					    copy_num(h, "at")));
		break;
	case JR_SELECT:
		rc = on_select(c, h);
		break;
	case JR_LLM_REQUEST:
		rc = on_request(c, h);
		break;
	case JR_LLM_RESPONSE:
		rc = on_response(c, h);
		break;
	case JR_CHECK:
		rc = on_check(c, h);
		break;
	case JR_NODE:
		rc = on_node(c, h);
		break;
	case JR_EVAL_RESULT:
		rc = on_result(c, ev, h);
		break;
	case JR_ATTEMPT_END:
		rc = on_end(c, h);
		break;
	default:
		break;
	}
	json_decref(h);
	if (rc)
		return scan_fail(c, rc, ev->seq,
				 rc == ST_ENOMEM ? "out of memory" : "event out of place");
	return 0;
}

/* ---- the run object ---- */

/* Code and instructions of the nodes asked for; null detail for the rest. */
static int node_details(struct scan *c)
{
	size_t i;
	json_t *n;

	json_array_foreach(c->nodes, i, n)
	{
		const struct tree_node *t = tree_node(c->r->tree, (uint32_t)i);
		uint32_t lines = 0;
		int rc = ST_OK;

		if (!t)
			return ST_EPROTO;
		for (size_t k = 0; k < t->code_len; k++)
			lines += t->code[k] == '\n';
		lines += t->code_len && t->code[t->code_len - 1] != '\n';
		rc |= report__set(n, "code_lines", json_integer(lines));
		rc |= report__set(n, "detail", json_boolean(wants(c, i)));
		if (!json_object_get(n, "at"))
			rc |= report__set(n, "at", i ? json_null() : report__num(c->r->created));
		if (!json_object_get(n, "rejected"))
			rc |= report__set(n, "rejected", json_null());
		if (!json_object_get(n, "result"))
			rc |= report__set(n, "result", json_null());
		if (wants(c, i)) {
			rc |= report__set(n, "code", report__text(t->code, t->code_len));
			rc |= report__set(n, "plan", report__text(t->plan, strlen(t->plan)));
		}
		if (rc)
			return ST_ENOMEM;
	}
	return ST_OK;
}

/* Outcomes per agent role: {action: {status or outcome: count}}. */
static json_t *verdicts(const struct scan *c)
{
	json_t *o = json_object(), *a;
	size_t i;

	json_array_foreach(c->log, i, a)
	{
		json_t *node = json_object_get(a, "node"), *role;
		const char *what = jr_str(a, "outcome", NULL), *act = jr_str(a, "action", "?");

		if (json_is_integer(node)) {
			const struct tree_node *t =
			    tree_node(c->r->tree, (uint32_t)json_integer_value(node));

			what = t ? node_status_name(t->status) : "unknown";
		} else if (!what || !*what) {
			what = "open";
		}
		role = json_object_get(o, act);
		if (!role && report__set(o, act, role = json_object()))
			goto out_fail;
		if (report__set(role, what, json_integer(jr_i64(role, what, 0) + 1)))
			goto out_fail;
	}
	return o;
out_fail:
	json_decref(o);
	return NULL;
}

int report_run_json(struct run *r, long detail, json_t **out, char *err, size_t errlen)
{
	struct scan c = {.r = r, .detail = detail, .err = err, .errlen = errlen};
	json_t *o = run_json(r);
	int rc;

	*out = NULL;
	c.log = json_array();
	c.states = json_array();
	if (!o || !c.log || !c.states || !json_is_array(json_object_get(o, "nodes"))) {
		rc = ST_ENOMEM;
		snprintf(err, errlen, "run %s: out of memory", r->id);
		goto out_fail;
	}
	c.nodes = json_object_get(o, "nodes");
	rc = store_scan(r->st, r->id, 1, scan_cb, &c);
	if (rc < 0) {
		snprintf(err, errlen, "run %s: cannot read the journal: %s", r->id,
			 stark_strerror(rc));
		goto out_fail;
	}
	if (c.rc) {
		rc = c.rc;
		goto out_fail;
	}
	rc = node_details(&c);
	if (!rc)
		rc = report__set(o, "verdicts", verdicts(&c));
	if (!rc)
		rc = report__set(o, "attempt_log", json_incref(c.log));
	if (!rc)
		rc = report__set(o, "states", json_incref(c.states));
	if (rc) {
		snprintf(err, errlen, "run %s: %s", r->id,
			 rc == ST_ENOMEM ? "out of memory" : "tree and journal disagree");
		goto out_fail;
	}
	json_decref(c.log);
	json_decref(c.states);
	*out = o;
	return ST_OK;
out_fail:
	json_decref(c.log);
	json_decref(c.states);
	json_decref(o);
	return rc;
}
