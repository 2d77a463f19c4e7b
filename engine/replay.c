/*
 * replay.c -- the replay providers: LLM replies and evaluation results read
 * from a JSON Lines file instead of the network or the evaluator.
 *
 * They serve demos (no API key, no GPU), debugging (re-run a search from a
 * recorded run), cheap ablations, and deterministic tests.  The file is
 * loaded whole at construction into an index sorted by key; lookups are
 * binary searches, so a replay of tens of thousands of requests adds no
 * measurable cost.  The matching rules are stated in engine.h.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/engine_int.h"

#define REPLAY_LINE_MAX (64u << 20)

struct replay_entry {
	const char *key;  /* borrowed from obj */
	const char *role; /* "" when absent */
	const char *hash; /* "" when absent */
	json_t *obj;	  /* owned */
	size_t line;	  /* 1-based, file order */
	bool used;
};

struct replay_index {
	struct replay_entry *e; /* sorted by (key, line) */
	size_t n;
	struct replay_entry **by_hash; /* sorted by hash; entries with a hash */
	size_t nhash;
};

static int cmp_key(const void *a, const void *b)
{
	const struct replay_entry *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	if (c)
		return c;
	return x->line < y->line ? -1 : x->line > y->line;
}

static int cmp_hash(const void *a, const void *b)
{
	const struct replay_entry *const *x = a, *const *y = b;

	return strcmp((*x)->hash, (*y)->hash);
}

static void index_release(struct replay_index *ix)
{
	for (size_t i = 0; i < ix->n; i++)
		json_decref(ix->e[i].obj);
	free(ix->e);
	free(ix->by_hash);
	memset(ix, 0, sizeof(*ix));
}

static int index_push(struct replay_index *ix, size_t *cap, json_t *obj, size_t line)
{
	struct replay_entry *ne;

	if (ix->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 256;

		ne = realloc(ix->e, nc * sizeof(*ne));
		if (!ne)
			return ST_ENOMEM;
		ix->e = ne;
		*cap = nc;
	}
	ix->e[ix->n++] = (struct replay_entry){
	    .key = jr_str(obj, "key", ""),
	    .role = jr_str(obj, "role", ""),
	    .hash = jr_str(obj, "hash", ""),
	    .obj = obj,
	    .line = line,
	};
	return ST_OK;
}

static int index_load(const char *path, struct replay_index *ix, char *err, size_t errlen)
{
	size_t cap = 0, lineno = 0, total = 0, linecap = 0;
	char *line = NULL;
	struct stat sb;
	json_error_t jerr;
	ssize_t n;
	FILE *f;
	int rc = ST_OK;

	memset(ix, 0, sizeof(*ix));
	f = fopen(path, "re");
	if (!f) {
		snprintf(err, errlen, "replay file %s: %s", path, strerror(errno));
		return ST_ENOENT;
	}
	/* The size bounds what getline() may allocate for one line. */
	if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode) ||
	    (uint64_t)sb.st_size > REPLAY_FILE_MAX) {
		snprintf(err, errlen, "replay file %s: not a regular file of at most %llu bytes",
			 path, (unsigned long long)REPLAY_FILE_MAX);
		fclose(f);
		return ST_ETOOBIG;
	}
	while ((n = getline(&line, &linecap, f)) >= 0) {
		json_t *obj;

		lineno++;
		total += (size_t)n;
		if ((size_t)n > REPLAY_LINE_MAX || total > REPLAY_FILE_MAX) {
			snprintf(err, errlen, "replay file %s: line %zu: too large", path, lineno);
			rc = ST_ETOOBIG;
			goto out_close;
		}
		if (strspn(line, " \t\r\n") == (size_t)n)
			continue;
		obj = json_loadb(line, (size_t)n, 0, &jerr);
		if (!json_is_object(obj) || !json_is_string(json_object_get(obj, "key"))) {
			snprintf(err, errlen,
				 "replay file %s: line %zu: not a JSON object with a \"key\"", path,
				 lineno);
			json_decref(obj);
			rc = ST_EPROTO;
			goto out_close;
		}
		rc = index_push(ix, &cap, obj, lineno);
		if (rc) {
			json_decref(obj);
			goto out_close;
		}
	}
	if (ferror(f)) {
		snprintf(err, errlen, "replay file %s: read failed", path);
		rc = ST_EIO;
		goto out_close;
	}
	qsort(ix->e, ix->n, sizeof(*ix->e), cmp_key);
	ix->by_hash = calloc(ix->n ? ix->n : 1, sizeof(*ix->by_hash));
	if (!ix->by_hash) {
		rc = ST_ENOMEM;
		goto out_close;
	}
	for (size_t i = 0; i < ix->n; i++)
		if (ix->e[i].hash[0])
			ix->by_hash[ix->nhash++] = &ix->e[i];
	qsort(ix->by_hash, ix->nhash, sizeof(*ix->by_hash), cmp_hash);
out_close:
	free(line);
	fclose(f);
	if (rc)
		index_release(ix);
	return rc;
}

/* The first entry with this key (in file order), or NULL. */
static struct replay_entry *index_first(struct replay_index *ix, const char *key)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(ix->e[mid].key, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ix->n && !strcmp(ix->e[lo].key, key) ? &ix->e[lo] : NULL;
}

static struct replay_entry *index_by_hash(struct replay_index *ix, const char *hash)
{
	struct replay_entry probe = {.hash = hash}, *pp = &probe, **hit;

	if (!hash || !hash[0])
		return NULL;
	hit = bsearch(&pp, ix->by_hash, ix->nhash, sizeof(*ix->by_hash), cmp_hash);
	return hit ? *hit : NULL;
}

/* A "*" entry for role (any role when role is NULL), or NULL. */
static struct replay_entry *index_wildcard(struct replay_index *ix, const char *role)
{
	for (struct replay_entry *e = index_first(ix, "*");
	     e && e < ix->e + ix->n && !strcmp(e->key, "*"); e++)
		if (!role || !e->role[0] || !strcmp(e->role, role))
			return e;
	return NULL;
}

/* ---- LLM replay ---- */

struct llm_replay {
	struct llm_provider base;
	struct replay_index ix;
};

static int llm_replay_call(struct llm_provider *p, const char *key, const char *role,
			   const struct llm_request *rq, struct llm_reply *out)
{
	struct llm_replay *r = (struct llm_replay *)p;
	struct replay_entry *e = index_first(&r->ix, key);
	const char *text, *raw;

	memset(out, 0, sizeof(*out));
	out->tag = rq->tag;
	if (p->stop && *p->stop)
		return ST_ECANCELED;
	while (e && e < r->ix.e + r->ix.n && !strcmp(e->key, key) && e->used)
		e++;
	if (!e || e >= r->ix.e + r->ix.n || strcmp(e->key, key))
		e = index_wildcard(&r->ix, role);
	else
		e->used = true;
	if (!e) {
		out->rc = ST_ENOENT;
		out->fatal = true;
		snprintf(out->error, sizeof(out->error),
			 "replay: no recorded response for request %s (role %s)", key, role);
		return ST_OK;
	}
	text = jr_str(e->obj, "text", NULL);
	raw = jr_str(e->obj, "raw", "");
	out->attempts = 1;
	out->http_status = 200;
	out->tokens_in = jr_u64(e->obj, "tokens_in", 0);
	out->tokens_out = jr_u64(e->obj, "tokens_out", 0);
	out->tokens_reasoning = jr_u64(e->obj, "tokens_reasoning", 0);
	out->truncated = jr_bool(e->obj, "truncated", false);
	out->raw_len = strlen(raw);
	out->raw = strdup(raw);
	out->text = text ? strdup(text) : NULL;
	if (!out->raw || !out->text) {
		llm_reply_release(out);
		memset(out, 0, sizeof(*out));
		out->rc = ST_ENOMEM;
		snprintf(out->error, sizeof(out->error), "replay: out of memory");
	}
	return ST_OK;
}

static void llm_replay_free(struct llm_provider *p)
{
	struct llm_replay *r = (struct llm_replay *)p;

	index_release(&r->ix);
	free(r);
}

int llm_provider_replay(const char *path, struct llm_provider **out, char *err, size_t errlen)
{
	struct llm_replay *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return ST_ENOMEM;
	rc = index_load(path, &r->ix, err, errlen);
	if (rc) {
		free(r);
		return rc;
	}
	for (size_t i = 0; i < r->ix.n; i++)
		if (!json_is_string(json_object_get(r->ix.e[i].obj, "text"))) {
			snprintf(err, errlen, "replay file %s: line %zu: no \"text\"", path,
				 r->ix.e[i].line);
			llm_replay_free(&r->base);
			return ST_EPROTO;
		}
	r->base.call = llm_replay_call;
	r->base.free = llm_replay_free;
	r->base.name = "replay";
	*out = &r->base;
	return ST_OK;
}

/* ---- evaluation replay ---- */

struct eval_replay {
	struct eval_provider base;
	struct replay_index ix;
};

static int eval_replay_eval(struct eval_provider *p, const struct eval_job *job,
			    struct proto_result *out)
{
	struct eval_replay *r = (struct eval_replay *)p;
	struct replay_entry *e;
	int rc;

	if (p->stop && *p->stop)
		return ST_ECANCELED;
	/* The same key for the same code; else the same code; else "*". */
	for (e = index_first(&r->ix, job->key);
	     e && e < r->ix.e + r->ix.n && !strcmp(e->key, job->key); e++)
		if (!e->hash[0] || !job->hash || !strcmp(e->hash, job->hash))
			break;
	if (e && (e >= r->ix.e + r->ix.n || strcmp(e->key, job->key)))
		e = NULL;
	if (!e)
		e = index_by_hash(&r->ix, job->hash);
	if (!e)
		e = index_wildcard(&r->ix, NULL);
	if (!e) {
		out->status = PROTO_ST_ERROR;
		return proto_result_set_message(out, "replay: no recorded result for evaluation %s",
						job->key);
	}
	rc = jr_result_from_json(e->obj, e->obj, out);
	if (rc == ST_EPROTO) {
		out->status = PROTO_ST_ERROR;
		return proto_result_set_message(
		    out, "replay: recorded result for %s has no valid status", job->key);
	}
	if (rc)
		return rc;
	free(out->id);
	out->id = strdup(job->key);
	return out->id ? ST_OK : ST_ENOMEM;
}

static void eval_replay_free(struct eval_provider *p)
{
	struct eval_replay *r = (struct eval_replay *)p;

	index_release(&r->ix);
	free(r);
}

int eval_provider_replay(const char *path, struct eval_provider **out, char *err, size_t errlen)
{
	struct eval_replay *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return ST_ENOMEM;
	rc = index_load(path, &r->ix, err, errlen);
	if (rc) {
		free(r);
		return rc;
	}
	r->base.eval = eval_replay_eval;
	r->base.slots = 1;
	r->base.free = eval_replay_free;
	r->base.name = "replay";
	*out = &r->base;
	return ST_OK;
}
