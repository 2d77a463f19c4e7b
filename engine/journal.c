/*
 * journal.c -- serialising and reading back the events of a run's journal.
 *
 * See engine.h for the schema.  This file knows the payload layout (a JSON
 * head line, optionally a JSON body) and how an evaluation result maps to
 * JSON; what the events mean is the run files' business (run.c, agent.c,
 * rebuild.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

#define JR_DUMP_FLAGS (JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(17))

static const char *const type_names[JR_TYPE_MAX + 1] = {
    [JR_RUN] = "run",
    [JR_STATE] = "state",
    [JR_SELECT] = "select",
    [JR_LLM_REQUEST] = "llm_request",
    [JR_LLM_RESPONSE] = "llm_response",
    [JR_CHECK] = "check",
    [JR_NODE] = "node",
    [JR_EVAL_REQUEST] = "eval_request",
    [JR_EVAL_RESULT] = "eval_result",
    [JR_ATTEMPT_END] = "attempt_end",
    [JR_CONFIG] = "config",
    [JR_UPGRADE] = "upgrade",
};

const char *jr_type_name(uint32_t type)
{
	if (type >= 1 && type <= JR_TYPE_MAX && type_names[type])
		return type_names[type];
	return "unknown";
}

void jr_batch_init(struct jr_batch *b)
{
	memset(b, 0, sizeof(*b));
}

void jr_batch_release(struct jr_batch *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->payload[i]);
	b->n = 0;
}

int jr_batch_add2(struct jr_batch *b, uint32_t type, json_t *head, json_t *body, const void *blob,
		  size_t blob_len, const void *blob2, size_t blob2_len)
{
	size_t hl, bl = 0, len, total = blob_len + blob2_len;
	char *h = NULL, *bd = NULL, *p;
	int rc = ST_OK;

	if (b->n >= JR_BATCH_MAX || blob_len > STORE_EVENT_MAX || blob2_len > STORE_EVENT_MAX)
		return ST_ETOOBIG;
	if (total && json_object_set_new(head, "blob", json_integer((json_int_t)total)))
		return ST_ENOMEM;
	h = json_dumps(head, JR_DUMP_FLAGS);
	if (!h)
		return ST_ENOMEM;
	if (body) {
		bd = json_dumps(body, JR_DUMP_FLAGS);
		if (!bd) {
			rc = ST_ENOMEM;
			goto out_free;
		}
		bl = strlen(bd);
	}
	hl = strlen(h);
	len = hl + (bd || total ? 1 + bl : 0) + (total ? 1 + total : 0);
	if (len > STORE_EVENT_MAX) {
		rc = ST_ETOOBIG;
		goto out_free;
	}
	p = malloc(len + 1);
	if (!p) {
		rc = ST_ENOMEM;
		goto out_free;
	}
	memcpy(p, h, hl);
	if (bd || total) {
		p[hl] = '\n';
		if (bl)
			memcpy(p + hl + 1, bd, bl);
	}
	if (total) {
		p[hl + 1 + bl] = '\n';
		if (blob_len)
			memcpy(p + hl + 2 + bl, blob, blob_len);
		if (blob2_len)
			memcpy(p + hl + 2 + bl + blob_len, blob2, blob2_len);
	}
	p[len] = '\0';
	b->payload[b->n] = p;
	b->ev[b->n] = (struct store_event){.type = type, .data = p, .len = len};
	b->n++;
out_free:
	free(bd);
	free(h);
	return rc;
}

int jr_batch_add(struct jr_batch *b, uint32_t type, json_t *head, json_t *body, const void *blob,
		 size_t blob_len)
{
	return jr_batch_add2(b, type, head, body, blob, blob_len, NULL, 0);
}

int jr_batch_commit(struct jr_batch *b, struct store *st, const char *run_id)
{
	int rc = ST_OK;

	if (b->n)
		rc = store_append(st, run_id, b->ev, b->n);
	jr_batch_release(b);
	return rc;
}

static size_t head_len(const void *data, size_t len)
{
	const char *nl = memchr(data, '\n', len);

	return nl ? (size_t)(nl - (const char *)data) : len;
}

/* A JSON object from n bytes at p, as a new reference; ST_EPROTO for
 * anything else (duplicate keys included). */
static int load_object(const char *p, size_t n, json_t **out)
{
	json_error_t jerr;
	json_t *o = json_loadb(p, n, JSON_REJECT_DUPLICATES, &jerr);

	if (!o)
		return ST_EPROTO;
	if (!json_is_object(o)) {
		json_decref(o);
		return ST_EPROTO;
	}
	*out = o;
	return ST_OK;
}

int jr_parse_head(const void *data, size_t len, json_t **head)
{
	return load_object(data, head_len(data, len), head);
}

/* The body's extent, [*off, *off + *n), given the parsed head. */
static int body_extent(const void *data, size_t len, const json_t *head, size_t *off, size_t *n)
{
	uint64_t bn = jr_u64(head, "blob", 0);
	size_t hl = head_len(data, len);

	*off = hl + 1;
	*n = 0;
	if (hl >= len)
		return ST_OK;
	if (bn) {
		if (bn > len || len - bn < hl + 2 || ((const char *)data)[len - bn - 1] != '\n')
			return ST_EPROTO;
		*n = len - (size_t)bn - 1 - *off;
	} else {
		*n = len - *off;
	}
	return ST_OK;
}

int jr_blob_at(const void *data, size_t len, uint64_t bn, const char **blob)
{
	size_t hl = head_len(data, len);

	*blob = NULL;
	if (!bn)
		return ST_OK;
	if (bn > len || len - bn < hl + 2 || ((const char *)data)[len - bn - 1] != '\n')
		return ST_EPROTO;
	*blob = (const char *)data + len - bn;
	return ST_OK;
}

int jr_blob(const void *data, size_t len, const json_t *head, const char **blob, size_t *n)
{
	uint64_t bn = jr_u64(head, "blob", 0);
	int rc = jr_blob_at(data, len, bn, blob);

	*n = rc || !*blob ? 0 : (size_t)bn;
	return rc;
}

int jr_parse_body(const void *data, size_t len, json_t **body)
{
	json_t *head = NULL;
	size_t off, n;
	int rc;

	*body = NULL;
	rc = jr_parse_head(data, len, &head);
	if (!rc)
		rc = body_extent(data, len, head, &off, &n);
	json_decref(head);
	if (rc || !n)
		return rc;
	return load_object((const char *)data + off, n, body);
}

struct read_one {
	uint64_t seq;
	uint32_t type;
	json_t *head, *body;
	struct dbuf *blob;
	bool want_body;
	int rc;
};

static int read_one_cb(void *arg, const struct store_event *ev)
{
	struct read_one *r = arg;
	const char *bp;
	size_t bn;

	if (ev->seq != r->seq || ev->type != r->type) {
		r->rc = ST_ENOENT;
		return 1;
	}
	r->rc = jr_parse_head(ev->data, ev->len, &r->head);
	if (!r->rc && r->want_body)
		r->rc = jr_parse_body(ev->data, ev->len, &r->body);
	if (!r->rc && r->blob) {
		dbuf_reset(r->blob);
		r->rc = jr_blob(ev->data, ev->len, r->head, &bp, &bn);
		if (!r->rc && bn)
			r->rc = dbuf_append(r->blob, bp, bn);
	}
	return 1;
}

int jr_read(struct store *st, const char *run_id, uint64_t seq, uint32_t type, json_t **head,
	    json_t **body, struct dbuf *blob)
{
	struct read_one r = {
	    .seq = seq, .type = type, .rc = ST_ENOENT, .blob = blob, .want_body = body != NULL};
	int rc;

	rc = store_scan(st, run_id, seq, read_one_cb, &r);
	if (rc < 0)
		goto out_fail;
	rc = r.rc;
	if (rc)
		goto out_fail;
	if (head)
		*head = r.head;
	else
		json_decref(r.head);
	if (body)
		*body = r.body;
	return ST_OK;
out_fail:
	json_decref(r.head);
	json_decref(r.body);
	return rc;
}

uint64_t jr_u64(const json_t *o, const char *key, uint64_t dflt)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return dflt;
	return (uint64_t)json_integer_value(v);
}

int64_t jr_i64(const json_t *o, const char *key, int64_t dflt)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

double jr_real(const json_t *o, const char *key, double dflt)
{
	json_t *v = json_object_get(o, key);

	if (json_is_null(v))
		return NAN;
	return json_is_number(v) ? json_number_value(v) : dflt;
}

const char *jr_str(const json_t *o, const char *key, const char *dflt)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : dflt;
}

bool jr_bool(const json_t *o, const char *key, bool dflt)
{
	json_t *v = json_object_get(o, key);

	return json_is_boolean(v) ? json_is_true(v) : dflt;
}

json_t *jr_real_new(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

/* json_object_set_new that reports allocation failure. */
static int set_new(json_t *o, const char *key, json_t *v)
{
	if (!v)
		return ST_ENOMEM;
	return json_object_set_new(o, key, v) ? ST_ENOMEM : ST_OK;
}

static const char *const stage_keys[4] = {"startup_ms", "compile_ms", "check_ms", "time_ms"};

static int dup_field(char **dst, const char *s)
{
	char *p = strdup(s ? s : "");

	if (!p)
		return ST_ENOMEM;
	free(*dst);
	*dst = p;
	return ST_OK;
}

/* One verdict as `stark eval --json` writes it; null where not reached. */
static json_t *verdict_obj(const char *status, const char *reason)
{
	if (!status || !*status)
		return json_null();
	return json_pack("{s:s, s:b, s:s}", "status", status, "correct", !strcmp(status, "correct"),
			 "reason", reason ? reason : "");
}

/*
 * "verdicts": stark's and KernelBench's, as `stark eval --json` has them
 * (cli/eval_print.c), plus "decided" (which one made the status).
 */
static json_t *verdicts_json(const struct proto_result *rs)
{
	bool reached = rs->stark_status && *rs->stark_status;
	json_t *kb = verdict_obj(rs->kb_status, rs->kb_reason);

	if (json_is_object(kb)) {
		json_object_set_new(kb, "trials_run", json_integer(rs->kb_trials_run));
		json_object_set_new(kb, "trials_passed", json_integer(rs->kb_trials_passed));
		json_object_set_new(kb, "max_difference", jr_real_new(rs->kb_max_diff));
	}
	return json_pack("{s:s, s:o, s:o}", "decided", rs->verdict ? rs->verdict : "", "stark",
			 verdict_obj(reached ? rs->stark_status : proto_status_name(rs->status),
				     reached ? rs->stark_reason : rs->message),
			 "kernelbench", kb ? kb : json_null());
}

/* The verdicts of a result read back (replay files carry them too). */
static int verdicts_from_json(const json_t *v, struct proto_result *rs)
{
	const json_t *st = json_object_get(v, "stark"), *kb = json_object_get(v, "kernelbench");
	int rc = ST_OK;

	if (!json_is_object(v))
		return ST_OK;
	rc = dup_field(&rs->verdict, jr_str(v, "decided", ""));
	if (!rc && json_is_object(st))
		rc = dup_field(&rs->stark_status, jr_str(st, "status", ""));
	if (!rc && json_is_object(st))
		rc = dup_field(&rs->stark_reason, jr_str(st, "reason", ""));
	if (!rc && json_is_object(kb))
		rc = dup_field(&rs->kb_status, jr_str(kb, "status", ""));
	if (!rc && json_is_object(kb))
		rc = dup_field(&rs->kb_reason, jr_str(kb, "reason", ""));
	if (json_is_object(kb)) {
		rs->kb_trials_run = (uint32_t)jr_u64(kb, "trials_run", 0);
		rs->kb_trials_passed = (uint32_t)jr_u64(kb, "trials_passed", 0);
		rs->kb_max_diff = jr_real(kb, "max_difference", NAN);
	}
	return rc;
}

int jr_result_to_json(const struct proto_result *rs, json_t *head, json_t *body)
{
	json_t *flags = NULL, *env = NULL;
	int rc = ST_OK;

	rc |= set_new(head, "status", json_string(proto_status_name(rs->status)));
	rc |= set_new(head, "speedup", jr_real_new(rs->speedup));
	rc |= set_new(head, "runtime_us", jr_real_new(rs->runtime_us));
	rc |= set_new(head, "runtime_lo_us", jr_real_new(rs->runtime_lo_us));
	rc |= set_new(head, "runtime_hi_us", jr_real_new(rs->runtime_hi_us));
	rc |= set_new(head, "ref_runtime_us", jr_real_new(rs->ref_runtime_us));
	rc |= set_new(head, "ref_lo_us", jr_real_new(rs->ref_lo_us));
	rc |= set_new(head, "ref_hi_us", jr_real_new(rs->ref_hi_us));
	rc |= set_new(head, "reps", json_integer(rs->reps));
	rc |= set_new(head, "trials_run", json_integer(rs->trials_run));
	rc |= set_new(head, "trials_passed", json_integer(rs->trials_passed));
	rc |= set_new(head, "max_abs_err", jr_real_new(rs->max_abs_err));
	rc |= set_new(head, "max_rel_err", jr_real_new(rs->max_rel_err));
	for (size_t i = 0; i < 4; i++)
		rc |= set_new(head, stage_keys[i], jr_real_new(rs->stage_ms[i]));
	/* The compiled baseline's fields only where it was asked for and
	 * timed, or said why not: older results have none of them. */
	if (isfinite(rs->ref_compile_us) || isfinite(rs->speedup_compile)) {
		rc |= set_new(head, "ref_compile_us", jr_real_new(rs->ref_compile_us));
		rc |= set_new(head, "ref_compile_lo_us", jr_real_new(rs->ref_compile_lo_us));
		rc |= set_new(head, "ref_compile_hi_us", jr_real_new(rs->ref_compile_hi_us));
		rc |= set_new(head, "speedup_compile", jr_real_new(rs->speedup_compile));
	}
	if (rs->baseline_compile_error && *rs->baseline_compile_error)
		rc |= set_new(head, "baseline_compile_error",
			      json_string(rs->baseline_compile_error));
	if (rc)
		return ST_ENOMEM;
	rc |= set_new(body, "message", json_string(rs->message ? rs->message : ""));
	rc |= set_new(body, "log", json_string(rs->log ? rs->log : ""));
	rc |= set_new(body, "first_bad", json_string(rs->first_bad ? rs->first_bad : ""));
	flags = json_array();
	env = json_object();
	if (rc || !flags || !env)
		goto out_nomem;
	for (uint32_t i = 0; i < rs->nflags && i < PROTO_FLAGS_MAX; i++)
		if (json_array_append_new(flags, json_string(rs->flags[i] ? rs->flags[i] : "")))
			goto out_nomem;
	for (uint32_t i = 0; i < rs->nenv && i < PROTO_ENV_MAX; i++)
		if (rs->env[i].key &&
		    json_object_set_new(env, rs->env[i].key,
					json_string(rs->env[i].val ? rs->env[i].val : "")))
			goto out_nomem;
	rc = set_new(body, "flags", flags);
	flags = NULL;
	rc |= set_new(body, "env", env);
	env = NULL;
	rc |= set_new(body, "verdicts", verdicts_json(rs));
	return rc ? ST_ENOMEM : ST_OK;
out_nomem:
	json_decref(flags);
	json_decref(env);
	return ST_ENOMEM;
}

int jr_result_from_json(const json_t *head, const json_t *body, struct proto_result *rs)
{
	enum proto_status st;
	const char *key;
	json_t *v;
	size_t i;
	int rc;

	if (proto_status_parse(jr_str(head, "status", ""), &st))
		return ST_EPROTO;
	rs->status = st;
	rs->speedup = jr_real(head, "speedup", NAN);
	rs->runtime_us = jr_real(head, "runtime_us", NAN);
	rs->runtime_lo_us = jr_real(head, "runtime_lo_us", NAN);
	rs->runtime_hi_us = jr_real(head, "runtime_hi_us", NAN);
	rs->ref_runtime_us = jr_real(head, "ref_runtime_us", NAN);
	rs->ref_lo_us = jr_real(head, "ref_lo_us", NAN);
	rs->ref_hi_us = jr_real(head, "ref_hi_us", NAN);
	rs->reps = (uint32_t)jr_u64(head, "reps", 0);
	rs->trials_run = (uint32_t)jr_u64(head, "trials_run", 0);
	rs->trials_passed = (uint32_t)jr_u64(head, "trials_passed", 0);
	rs->max_abs_err = jr_real(head, "max_abs_err", NAN);
	rs->max_rel_err = jr_real(head, "max_rel_err", NAN);
	for (i = 0; i < 4; i++)
		rs->stage_ms[i] = jr_real(head, stage_keys[i], NAN);
	rs->ref_compile_us = jr_real(head, "ref_compile_us", NAN);
	rs->ref_compile_lo_us = jr_real(head, "ref_compile_lo_us", NAN);
	rs->ref_compile_hi_us = jr_real(head, "ref_compile_hi_us", NAN);
	rs->speedup_compile = jr_real(head, "speedup_compile", NAN);
	if (*jr_str(head, "baseline_compile_error", "") &&
	    dup_field(&rs->baseline_compile_error, jr_str(head, "baseline_compile_error", "")))
		return ST_ENOMEM;
	if (!body)
		return ST_OK;
	rc = dup_field(&rs->message, jr_str(body, "message", ""));
	if (!rc)
		rc = dup_field(&rs->log, jr_str(body, "log", ""));
	if (!rc)
		rc = dup_field(&rs->first_bad, jr_str(body, "first_bad", ""));
	if (rc)
		return rc;
	json_array_foreach(json_object_get(body, "flags"), i, v)
	{
		if (json_is_string(v) && proto_result_add_flag(rs, json_string_value(v)))
			break;
	}
	json_object_foreach(json_object_get(body, "env"), key, v)
	{
		if (json_is_string(v) && proto_result_add_env(rs, key, json_string_value(v)))
			break;
	}
	return verdicts_from_json(json_object_get(body, "verdicts"), rs);
}

void jr_hash_hex(const void *data, size_t len, char out[17])
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)len, w;
	size_t i = 0;

	/* FNV-style mixing a word at a time: a fingerprint, not a defence. */
	for (; i + 8 <= len; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	h ^= h >> 32;
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* ---- a fast reader of heads, for rebuilding ---- */

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
		p++;
	return p;
}

/* Past a JSON string starting at p (the opening quote); NULL if unterminated. */
static const char *skip_string(const char *p, const char *end, bool *escaped)
{
	for (p++; p < end; p++) {
		if (*p == '\\') {
			*escaped = true;
			p++;
		} else if (*p == '"') {
			return p + 1;
		}
	}
	return NULL;
}

/* Past one JSON value at p; NULL when malformed. */
static const char *skip_value(const char *p, const char *end, bool *escaped)
{
	int depth = 0;

	do {
		p = skip_ws(p, end);
		if (p >= end)
			return NULL;
		if (*p == '"') {
			p = skip_string(p, end, escaped);
			if (!p)
				return NULL;
		} else if (*p == '{' || *p == '[') {
			depth++;
			p++;
			continue;
		} else if (*p == '}' || *p == ']') {
			if (--depth < 0)
				return NULL;
			p++;
		} else if (*p == ',' || *p == ':') {
			if (!depth)
				return NULL;
			p++;
			continue;
		} else {
			while (p < end && !strchr(",}] \t\r\n", *p))
				p++;
		}
	} while (depth > 0);
	return p;
}

int jr_head_scan(const void *data, size_t len, struct jr_field *f, size_t n)
{
	const char *p = data, *end = p + head_len(data, len);

	for (size_t i = 0; i < n; i++) {
		f[i].p = NULL;
		f[i].n = 0;
		f[i].escaped = false;
	}
	p = skip_ws(p, end);
	if (p >= end || *p++ != '{')
		return ST_EPROTO;
	p = skip_ws(p, end);
	if (p < end && *p == '}')
		return ST_OK;
	for (;;) {
		const char *k, *v;
		bool kesc = false, vesc = false;
		size_t kn;

		p = skip_ws(p, end);
		if (p >= end || *p != '"')
			return ST_EPROTO;
		k = p + 1;
		p = skip_string(p, end, &kesc);
		if (!p)
			return ST_EPROTO;
		kn = (size_t)(p - 1 - k);
		p = skip_ws(p, end);
		if (p >= end || *p++ != ':')
			return ST_EPROTO;
		v = skip_ws(p, end);
		p = skip_value(v, end, &vesc);
		if (!p)
			return ST_EPROTO;
		for (size_t i = 0; i < n && !kesc; i++)
			if (strlen(f[i].key) == kn && !memcmp(f[i].key, k, kn)) {
				f[i].p = v;
				f[i].n = (size_t)(p - v);
				f[i].escaped = vesc;
			}
		p = skip_ws(p, end);
		if (p < end && *p == ',') {
			p++;
			continue;
		}
		if (p < end && *p == '}')
			return ST_OK;
		return ST_EPROTO;
	}
}

bool jr_field_u64(const struct jr_field *f, uint64_t *out)
{
	uint64_t v = 0;

	if (!f->p || !f->n || f->n > 20)
		return false;
	for (size_t i = 0; i < f->n; i++) {
		if (f->p[i] < '0' || f->p[i] > '9' || v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(f->p[i] - '0');
	}
	*out = v;
	return true;
}

bool jr_field_real(const struct jr_field *f, double *out)
{
	char buf[64], *e;

	if (!f->p || !f->n || f->n >= sizeof(buf))
		return false;
	if (f->n == 4 && !memcmp(f->p, "null", 4)) {
		*out = NAN;
		return true;
	}
	memcpy(buf, f->p, f->n);
	buf[f->n] = '\0';
	*out = strtod(buf, &e);
	return *e == '\0';
}

bool jr_field_is(const struct jr_field *f, const char *s)
{
	size_t n = strlen(s);

	return f->p && !f->escaped && f->n == n + 2 && f->p[0] == '"' && !memcmp(f->p + 1, s, n);
}

size_t jr_field_str(const struct jr_field *f, char *buf, size_t len)
{
	size_t n;

	if (!f->p || f->n < 2 || f->p[0] != '"' || f->escaped || !len)
		return 0;
	n = f->n - 2 < len - 1 ? f->n - 2 : len - 1;
	memcpy(buf, f->p + 1, n);
	buf[n] = '\0';
	return n + 1;
}
