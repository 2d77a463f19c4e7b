/*
 * state.c -- a run in memory and the few things every step does with it:
 * names of its states, the best node and the spend so far (per role and
 * per model), the complaints and the memo of the attempt still open, room
 * for per-node facts; adding events to the batch and committing it; the
 * state and configuration events and the metadata record that `stark list`
 * shows; the progress line on a terminal; the default store folder;
 * dropping what it waits on; freeing it all.  The ground the other run
 * files stand on.
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

static const char *const state_names[] = {"running", "interrupted", "finished", "failed"};

const char *run_state_name(enum run_state s)
{
	return (unsigned)s < ST_ARRAY_LEN(state_names) ? state_names[s] : "unknown";
}

int run_state_parse(const char *name, enum run_state *out)
{
	for (size_t i = 0; i < ST_ARRAY_LEN(state_names); i++)
		if (!strcmp(name, state_names[i])) {
			*out = (enum run_state)i;
			return ST_OK;
		}
	return ST_EINVAL;
}

int run_default_store(char *buf, size_t len)
{
	const char *env = getenv("STARK_STORE"), *xdg = getenv("XDG_DATA_HOME");
	const char *home = getenv("HOME");
	int n;

	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (xdg && *xdg == '/')
		n = snprintf(buf, len, "%s/stark", xdg);
	else if (home && *home)
		n = snprintf(buf, len, "%s/.local/share/stark", home);
	else
		return ST_ENOENT;
	return n < 0 || (size_t)n >= len ? ST_ETOOBIG : ST_OK;
}

void run_free(struct run *r)
{
	if (!r)
		return;
	jr_batch_release(&r->batch);
	if (r->prompts_loaded)
		prompt_release(&r->prompts);
	tree_free(r->tree);
	for (size_t i = 0; i < r->nchecks; i++)
		free(r->checks[i].reason);
	free(r->checks);
	json_decref(r->options);
	json_decref(r->producer);
	free(r->cfg_text);
	free(r->problem_src);
	free(r->pause_log);
	free(r->info);
	store_unlock_run(r->lock);
	free(r);
}

void run_pending_clear(struct run *r)
{
	for (size_t i = 0; i < ST_ARRAY_LEN(r->pend.msgs); i++)
		free((char *)r->pend.msgs[i].content);
	memset(&r->pend, 0, sizeof(r->pend));
}

uint32_t run_best(const struct run *r)
{
	uint32_t best = TREE_NONE;

	if (!r->tree)
		return TREE_NONE;
	for (uint32_t i = 1; i < tree_count(r->tree); i++) {
		const struct tree_node *n = tree_node(r->tree, i);

		if (n->status != NODE_CORRECT)
			continue;
		if (best == TREE_NONE || n->speedup > tree_node(r->tree, best)->speedup)
			best = i;
	}
	return best;
}

bool run_beats_reference(const struct run *r, uint32_t id)
{
	const struct tree_node *n = id == TREE_NONE || !r->tree ? NULL : tree_node(r->tree, id);

	return n && n->status == NODE_CORRECT && n->speedup > 1.0;
}

struct run_spend run_spend_total(const struct run *r)
{
	struct run_spend t = {0};

	for (int i = 0; i < ROLE_COUNT; i++) {
		t.calls += r->spend[i].calls;
		t.tokens_in += r->spend[i].tokens_in;
		t.tokens_out += r->spend[i].tokens_out;
		t.tokens_reasoning += r->spend[i].tokens_reasoning;
		t.dollars += r->spend[i].dollars;
	}
	return t;
}

struct run_spend *run_model_spend(struct run *r, const char *model)
{
	static const char other[] = "(other models)";
	size_t i;

	if (!model || !*model)
		model = "(no model)"; /* a replayed run's */
	for (i = 0; i < r->nmodels; i++)
		if (!strcmp(r->models[i].model, model))
			return &r->models[i].s;
	if (r->nmodels == RUN_MODELS_MAX)
		return &r->models[RUN_MODELS_MAX - 1].s;
	if (r->nmodels == RUN_MODELS_MAX - 1)
		model = other;
	memset(&r->models[i], 0, sizeof(r->models[i]));
	snprintf(r->models[i].model, sizeof(r->models[i].model), "%s", model);
	r->nmodels++;
	return &r->models[i].s;
}

int run_check_add(struct run *r, uint32_t attempt, const char *key, const char *reason)
{
	struct run_check *c;

	if (r->nchecks == r->checks_cap) {
		size_t cap = r->checks_cap ? r->checks_cap * 2 : 16;

		c = realloc(r->checks, cap * sizeof(*c));
		if (!c)
			return ST_ENOMEM;
		r->checks = c;
		r->checks_cap = cap;
	}
	c = &r->checks[r->nchecks];
	c->attempt = attempt;
	snprintf(c->key, sizeof(c->key), "%s", key);
	c->reason = strdup(reason);
	if (!c->reason)
		return ST_ENOMEM;
	r->nchecks++;
	return ST_OK;
}

/* ---- pass 2: the open attempt, the RNG, the spend ---- */

static struct run_memo *memo_get(struct run *r, const char *key, bool create)
{
	for (size_t i = 0; i < r->cur.nmemo; i++)
		if (!strcmp(r->cur.memo[i].key, key))
			return &r->cur.memo[i];
	if (!create || r->cur.nmemo >= RUN_MEMO_MAX || strlen(key) >= RUN_KEY_MAX)
		return NULL;
	struct run_memo *m = &r->cur.memo[r->cur.nmemo++];

	memset(m, 0, sizeof(*m));
	snprintf(m->key, sizeof(m->key), "%s", key);
	return m;
}

struct run_memo *run_memo_find(struct run *r, const char *key)
{
	return memo_get(r, key, false);
}

struct run_memo *run_memo_add(struct run *r, const char *key)
{
	return memo_get(r, key, true);
}

double run__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Takes head and body (decrefs them), adds to the batch. */
int run__batch_take(struct run *r, uint32_t type, json_t *head, json_t *body, const void *blob,
		      size_t blob_len)
{
	int rc = head ? jr_batch_add(&r->batch, type, head, body, blob, blob_len) : ST_ENOMEM;

	json_decref(head);
	json_decref(body);
	return rc;
}

int run__commit(struct run *r)
{
	size_t n = r->batch.n;
	int rc = jr_batch_commit(&r->batch, r->st, r->id);

	if (!rc)
		r->last_seq += n;
	return rc;
}


/* ---- metadata and state ---- */

int run__meta_put(struct store *st, const char *id, json_t *m)
{
	char *s;
	int rc;

	if (!m)
		return ST_ENOMEM;
	s = json_dumps(m, JSON_COMPACT);
	json_decref(m);
	if (!s)
		return ST_ENOMEM;
	rc = strlen(s) <= STORE_META_MAX ? store_run_meta_put(st, id, s, strlen(s)) : ST_ETOOBIG;
	free(s);
	return rc;
}

int run_meta_write(struct run *r)
{
	uint32_t best = run_best(r);
	struct run_spend t = run_spend_total(r);
	json_t *m;
	int rc;

	m = json_pack(
	    "{s:s, s:s, s:s, s:s, s:I, s:I, s:o, s:o, s:b, s:f, s:f, s:o}", "run_id", r->id,
	    "problem", r->problem, "state", run_state_name(r->state), "reason", r->reason,
	    "attempts", (json_int_t)r->attempts, "budget", (json_int_t)r->cfg.budget, "best_node",
	    best == TREE_NONE ? json_null() : json_integer(best), "best_speedup",
	    best == TREE_NONE ? json_null() : jr_real_new(tree_node(r->tree, best)->speedup),
	    "beats_reference", run_beats_reference(r, best), "created", r->created, "updated",
	    run__now(), "dollars", jr_real_new(t.dollars));
	rc = run__meta_put(r->st, r->id, m);
	if (!rc)
		r->meta_ns = clock_mono_ns();
	return rc;
}

int run_set_state(struct run *r, enum run_state s, const char *reason)
{
	json_t *head = json_pack("{s:s, s:s, s:f}", "state", run_state_name(s), "reason",
				 reason ? reason : "", "at", run__now());
	int rc;

	/* Why an evaluation could not be done: its log, with the pause. */
	if (head && r->pause_log && s == RUN_INTERRUPTED &&
	    json_object_set_new(head, "log", json_string(r->pause_log))) {
		json_decref(head);
		head = NULL;
	}
	free(r->pause_log);
	r->pause_log = NULL;
	rc = run__batch_take(r, JR_STATE, head, NULL, NULL, 0);
	if (!rc)
		rc = run__commit(r);
	if (rc)
		return rc;
	r->state = s;
	snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "");
	return run_meta_write(r);
}

/* The value of key in a dump (`key = value` lines), or NULL. */
static const char *dump_value_of(const char *dump, const char *key, size_t klen, size_t *vlen)
{
	for (const char *p = dump; p && *p;) {
		const char *nl = strchr(p, '\n'), *end = nl ? nl : p + strlen(p);

		if ((size_t)(end - p) >= klen + 3 && !strncmp(p, key, klen) &&
		    !strncmp(p + klen, " = ", 3)) {
			*vlen = (size_t)(end - p) - klen - 3;
			return p + klen + 3;
		}
		p = nl ? nl + 1 : NULL;
	}
	return NULL;
}

int run_config_change(struct run *r, const struct search_config *c, char **changed, char *err,
		      size_t errlen)
{
	struct dbuf before, after, diff;
	json_t *list = json_array();
	int rc;

	err[0] = '\0';
	dbuf_init(&before, 1u << 20);
	dbuf_init(&after, 1u << 20);
	dbuf_init(&diff, 1u << 20);
	rc = list ? search_config_dump(&r->cfg, &before) : ST_ENOMEM;
	if (!rc)
		rc = search_config_dump(c, &after);
	for (const char *p = dbuf_str(&after); !rc && *p;) {
		const char *nl = strchr(p, '\n'), *eq = strstr(p, " = "), *old;
		size_t n = nl ? (size_t)(nl - p) : strlen(p), klen, olen = 0;
		char key[CONFIG_STR_MAX + 32];

		if (!eq || eq > p + n)
			break;
		klen = (size_t)(eq - p);
		old = dump_value_of(dbuf_str(&before), p, klen, &olen);
		if (!old || olen != n - klen - 3 || memcmp(old, eq + 3, olen)) {
			snprintf(key, sizeof(key), "%.*s", (int)klen, p);
			if (!search_config_key_live(key)) {
				snprintf(err, errlen,
					 "key '%s' is fixed for the life of a run; on resume only "
					 "how roles reach their models may change",
					 key);
				rc = ST_EINVAL;
				break;
			}
			rc = dbuf_printf(&diff, "%s%.*s", diff.len ? "; " : "", (int)n, p);
			if (!rc && json_array_append_new(list, json_stringn(p, n)))
				rc = ST_ENOMEM;
		}
		p += n + (nl != NULL);
	}
	if (!rc && !diff.len) {
		snprintf(err, errlen, "the settings given change nothing");
		rc = ST_EINVAL;
	}
	if (!rc)
		rc = run__batch_take(r, JR_CONFIG,
				json_pack("{s:O, s:f}", "changed", list, "at", run__now()),
				json_pack("{s:s}", "config", dbuf_str(&after)), NULL, 0);
	if (!rc)
		rc = run__commit(r);
	if (!rc) {
		char *text = strdup(dbuf_str(&after));

		r->cfg = *c;
		if (text) { /* else the next load reads it from the journal */
			free(r->cfg_text);
			r->cfg_text = text;
		}
		if (changed)
			*changed = dbuf_detach(&diff, NULL);
	} else if (rc != ST_EINVAL && err[0] == '\0') {
		snprintf(err, errlen, "run %s: cannot journal the configuration: %s", r->id,
			 stark_strerror(rc));
	}
	json_decref(list);
	dbuf_release(&before);
	dbuf_release(&after);
	dbuf_release(&diff);
	return rc;
}

int run_info_reserve(struct run *r, uint32_t id)
{
	struct run_node_info *ni;
	size_t ncap;

	if (id < r->info_cap)
		return ST_OK;
	ncap = r->info_cap ? r->info_cap * 2 : 64;
	while (ncap <= id)
		ncap *= 2;
	ni = realloc(r->info, ncap * sizeof(*ni));
	if (!ni)
		return ST_ENOMEM;
	for (size_t i = r->info_cap; i < ncap; i++)
		ni[i] =
		    (struct run_node_info){.verdict = -1,
					   .runtime_us = NAN,
					   .ref_runtime_us = NAN,
					   .speedup_compile = NAN,
					   .ref_compile_us = NAN};
	r->info = ni;
	r->info_cap = ncap;
	return ST_OK;
}

/* ---- progress ---- */

void run__progress(struct run *r, bool final)
{
	uint32_t best = run_best(r);
	struct run_spend t = run_spend_total(r);
	char bests[96];

	if (!r->progress)
		return;
	if (best == TREE_NONE)
		snprintf(bests, sizeof(bests), "none yet");
	else
		snprintf(bests, sizeof(bests), "%.2fx (node %u)%s",
			 tree_node(r->tree, best)->speedup, best,
			 run_beats_reference(r, best) ? "" : ", slower than the reference");
	fprintf(r->progress, "%s%s: attempt %u/%u, best %s, spend $%.4f, %llu tokens%s%s%s",
		r->progress_tty ? "\r\033[K" : "", r->id, r->attempts, r->cfg.budget, bests,
		t.dollars, (unsigned long long)(t.tokens_in + t.tokens_out),
		r->progress_tty && !final && r->doing[0] ? "; " : "",
		r->progress_tty && !final ? r->doing : "", r->progress_tty && !final ? "" : "\n");
	fflush(r->progress);
}

/* On a terminal, what the run is waiting for now (an LLM call, an evaluation). */
void run__doing(struct run *r, const char *fmt, ...)
{
	va_list ap;

	if (!r->progress || !r->progress_tty)
		return;
	va_start(ap, fmt);
	vsnprintf(r->doing, sizeof(r->doing), fmt, ap);
	va_end(ap);
	run__progress(r, false);
}

const char *run_role_model(const struct run *r, enum search_role role)
{
	const char *m = r->cfg.model[role];

	return m[0] ? m : jr_str(r->options, "model", "");
}

const char *run_role_llm(const struct run *r, enum search_role role)
{
	const char *e = r->cfg.llm[role];

	return e[0] ? e : jr_str(r->options, "llm", "");
}
