/*
 * run.c -- creating a run and driving its attempts, journal first.
 *
 * The rule everything here follows: an event is appended to the batch when
 * it happens, and the batch is committed before the next thing that leaves
 * the process (an LLM request, an evaluation, an exit).  So an LLM request
 * is durable before it is sent, a response is durable before the request it
 * leads to is sent, a candidate and its evaluation request are durable
 * before the evaluator starts, and its result is durable before the next
 * selection is acted on.  A kill at any instant loses at most work whose
 * outcome was not yet journaled, and resume (rebuild.c + the memo below)
 * redoes exactly that.
 *
 * The loop is sequential: one LLM call or one evaluation at a time.  The
 * caps on tokens and dollars count the call about to be made (its prompt
 * estimate plus its max_tokens) before it is made.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "orchestrator/run.h"

#define RUN_ERR_MAX 512

enum stop_kind {
	STOP_NONE = 0,
	STOP_FINISH, /* budget, caps, search exhausted */
	STOP_PAUSE,  /* fatal LLM error, repeated failures */
	STOP_SIGNAL, /* SIGINT/SIGTERM */
	STOP_FAIL    /* an internal error */
};

/* What the agent phase of an attempt produced. */
enum made_kind { MADE_NODE, MADE_REJECTED, MADE_LLM_ERROR };

struct made {
	enum made_kind kind;
	uint32_t parent;
	enum node_origin origin;
	struct dbuf code;
	struct dbuf plan;
	char reason[RUN_ERR_MAX];
};

/* One agent call's outcome as the attempt sees it. */
struct agent_out {
	int rc;
	bool fatal;
	bool truncated; /* the reply stopped at its token limit */
	struct dbuf text;
	char error[256];
};

/* What a retry adds to its conversation: the rejected answer, and why. */
struct retry_turn {
	const char *answer;
	size_t answer_len;
	const char *complaint;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Takes head and body (decrefs them), adds to the batch. */
static int batch_take(struct run *r, uint32_t type, json_t *head, json_t *body, const void *blob,
		      size_t blob_len)
{
	int rc = head ? jr_batch_add(&r->batch, type, head, body, blob, blob_len) : ST_ENOMEM;

	json_decref(head);
	json_decref(body);
	return rc;
}

static int commit(struct run *r)
{
	size_t n = r->batch.n;
	int rc = jr_batch_commit(&r->batch, r->st, r->id);

	if (!rc)
		r->last_seq += n;
	return rc;
}

/* Replaces invalid UTF-8 and NUL bytes with '?', so the text journals as
 * a JSON string and reads back byte for byte. */
static void text_clean(char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		size_t len = c < 0x80	      ? 1
			     : (c >> 5) == 6  ? 2
			     : (c >> 4) == 14 ? 3
			     : (c >> 3) == 30 ? 4
					      : 0;
		bool ok = len > 0 && i + len <= n && c != 0;

		for (size_t j = 1; ok && j < len; j++)
			ok = ((unsigned char)s[i + j] & 0xc0) == 0x80;
		if (ok && len == 2 && c < 0xc2)
			ok = false;
		if (ok && len == 3) {
			unsigned char d = (unsigned char)s[i + 1];

			ok = !(c == 0xe0 && d < 0xa0) && !(c == 0xed && d >= 0xa0);
		}
		if (ok && len == 4) {
			unsigned char d = (unsigned char)s[i + 1];

			ok = c <= 0xf4 && !(c == 0xf0 && d < 0x90) && !(c == 0xf4 && d >= 0x90);
		}
		if (!ok) {
			s[i++] = '?';
			continue;
		}
		i += len;
	}
}

static void progress_doing(struct run *r, const char *fmt, ...) ST_PRINTF(2, 3);

/* ---- metadata and state ---- */

int run_meta_write(struct run *r)
{
	uint32_t best = run_best(r);
	struct run_spend t = run_spend_total(r);
	json_t *m;
	char *s;
	int rc;

	m = json_pack(
	    "{s:s, s:s, s:s, s:s, s:I, s:I, s:o, s:o, s:b, s:f, s:f, s:o}", "run_id", r->id,
	    "problem", r->problem, "state", run_state_name(r->state), "reason", r->reason,
	    "attempts", (json_int_t)r->attempts, "budget", (json_int_t)r->cfg.budget, "best_node",
	    best == TREE_NONE ? json_null() : json_integer(best), "best_speedup",
	    best == TREE_NONE ? json_null() : jr_real_new(tree_node(r->tree, best)->speedup),
	    "beats_reference", run_beats_reference(r, best), "created", r->created, "updated",
	    now_s(), "dollars", jr_real_new(t.dollars));
	if (!m)
		return ST_ENOMEM;
	s = json_dumps(m, JSON_COMPACT);
	json_decref(m);
	if (!s)
		return ST_ENOMEM;
	rc = store_run_meta_put(r->st, r->id, s, strlen(s));
	free(s);
	if (!rc)
		r->meta_ns = clock_mono_ns();
	return rc;
}

int run_set_state(struct run *r, enum run_state s, const char *reason)
{
	json_t *head = json_pack("{s:s, s:s, s:f}", "state", run_state_name(s), "reason",
				 reason ? reason : "", "at", now_s());
	int rc;

	/* Why an evaluation could not be done: its log, with the pause. */
	if (head && r->pause_log && s == RUN_INTERRUPTED &&
	    json_object_set_new(head, "log", json_string(r->pause_log))) {
		json_decref(head);
		head = NULL;
	}
	free(r->pause_log);
	r->pause_log = NULL;
	rc = batch_take(r, JR_STATE, head, NULL, NULL, 0);
	if (!rc)
		rc = commit(r);
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
		rc = batch_take(r, JR_CONFIG,
				json_pack("{s:O, s:f}", "changed", list, "at", now_s()),
				json_pack("{s:s}", "config", dbuf_str(&after)), NULL, 0);
	if (!rc)
		rc = commit(r);
	if (!rc) {
		r->cfg = *c;
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
	return json_pack("{s:s, s:s?, s:s, s:s, s:s, s:b}", "llm", spec->llm, "model", spec->model,
			 "device", spec->device, "eval", spec->eval, "format", spec->format,
			 "insecure_sandbox", spec->insecure_sandbox);
}

int run_create(struct store *st, const struct run_spec *spec, struct run **out, char *err,
	       size_t errlen)
{
	char id[STORE_RUN_ID_MAX + 1], abspath[PROTO_PATH_MAX];
	struct store_lock *lock = NULL;
	struct dbuf src, cfgtext;
	struct jr_batch b;
	json_t *head = NULL, *body = NULL;
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
	head = json_pack("{s:i, s:s, s:s, s:s, s:f, s:I, s:o}", "v", JR_VERSION, "run_id", id,
			 "problem", base, "problem_path", abspath, "created", now_s(), "eval_seed",
			 (json_int_t)eval_seed, "options", run_options(spec));
	body = json_pack("{s:s, s:s}", "problem_src", dbuf_str(&src), "config", dbuf_str(&cfgtext));
	rc = head && body ? jr_batch_add(&b, JR_RUN, head, body, NULL, 0) : ST_ENOMEM;
	json_decref(head);
	json_decref(body);
	head = json_pack("{s:s, s:s, s:f}", "state", "running", "reason", "started", "at", now_s());
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
	store_unlock_run(lock);
	jr_batch_release(&b);
	dbuf_release(&cfgtext);
	dbuf_release(&src);
	return rc;
}

void run_attach(struct run *r, struct llm_provider *llm, struct eval_provider *eval,
		const volatile sig_atomic_t *stop)
{
	r->llm = llm;
	r->eval = eval;
	r->stop = stop;
	if (llm)
		llm->stop = stop;
	if (eval)
		eval->stop = stop;
}

/* ---- agent calls ---- */

static const char *model_for(const struct run *r, enum search_role role)
{
	const char *m = r->cfg.model[role];

	return m[0] ? m : jr_str(r->options, "model", "");
}

static const char *llm_for(const struct run *r, enum search_role role)
{
	const char *e = r->cfg.llm[role];

	return e[0] ? e : jr_str(r->options, "llm", "");
}

static json_t *spend_entry(const struct run_spend *s)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:f}", "calls", (json_int_t)s->calls, "tokens_in",
			 (json_int_t)s->tokens_in, "tokens_out", (json_int_t)s->tokens_out,
			 "tokens_reasoning", (json_int_t)s->tokens_reasoning, "dollars",
			 s->dollars);
}

/* Cumulative spend per role, or (models) per model. */
static json_t *spend_json(const struct run *r, bool models)
{
	json_t *o = json_object();
	size_t n = models ? r->nmodels : ROLE_COUNT;

	for (size_t i = 0; o && i < n; i++) {
		const char *name =
		    models ? r->models[i].model : search_role_name((enum search_role)i);
		json_t *e = spend_entry(models ? &r->models[i].s : &r->spend[i]);

		if (!e || json_object_set_new(o, name, e)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/*
 * What a request of role is sent with, as journaled: compared on resume,
 * so a request re-sent after `stark resume --set` is journaled again with
 * what it really carries.
 */
static json_t *settings_json(const struct run *r, enum search_role role)
{
	const struct search_config *c = &r->cfg;
	uint32_t th = c->thinking[role];

	return json_pack("{s:o, s:I, s:s, s:s, s:o, s:s, s:s, s:s}", "temperature",
			 c->temperature[role] < 0 ? json_null() : json_real(c->temperature[role]),
			 "max_tokens", (json_int_t)c->max_tokens[role], "token_field",
			 c->token_field[role] == TOKEN_FIELD_MAX_COMPLETION
			     ? "max_completion_tokens"
			     : "max_tokens",
			 "reasoning_effort", c->reasoning_effort[role], "thinking",
			 th == THINKING_OFF	   ? json_string("off")
			 : th == THINKING_ADAPTIVE ? json_string("adaptive")
						   : json_integer(th),
			 "extra_body", c->extra_body[role], "llm", llm_for(r, role), "model",
			 model_for(r, role));
}

/* The messages of a new request: context window + templates. */
static int build_messages(struct run *r, enum search_role role, uint32_t node,
			  const struct scaffold *sc, struct dbuf *sys, struct dbuf *user, char *err,
			  size_t errlen)
{
	struct context_window w;
	struct prompt_step step = {
	    .role = role, .node = node, .problem = r->problem_src, .scaffold = sc};
	int rc;

	context_init(&w);
	if (role != ROLE_SAMPLE) {
		rc = context_build(r->tree, &r->cfg, role, node, &w);
		if (rc) {
			snprintf(err, errlen, "context for %s on node %u: %s",
				 search_role_name(role), node, stark_strerror(rc));
			goto out;
		}
		step.window = &w;
	}
	rc = prompt_build(&r->prompts, r->tree, &step, sys, user, err, errlen);
out:
	context_release(&w);
	return rc;
}

/*
 * The turns a retry appends after the user message: the rejected answer
 * (cut to RUN_ANSWER_MAX) as the assistant's, then the complaint.  turns
 * gets them one after the other, lens their lengths.
 */
static int retry_turns(struct run *r, const struct retry_turn *prev, struct dbuf *turns,
		       size_t lens[3], char *err, size_t errlen)
{
	static const char cut[] = "\n[... the rest of this answer is not repeated ...]\n";
	struct dbuf msg;
	size_t n = prev->answer_len < RUN_ANSWER_MAX ? prev->answer_len : RUN_ANSWER_MAX;
	int rc;

	dbuf_init(&msg, PROMPT_MAX);
	rc = dbuf_append(turns, prev->answer, n);
	if (!rc && n < prev->answer_len)
		rc = dbuf_puts(turns, cut);
	lens[1] = turns->len - lens[0];
	if (!rc)
		rc = prompt_retry(&r->prompts, prev->complaint, &msg, err, errlen);
	if (!rc)
		rc = dbuf_append(turns, msg.p, msg.len);
	lens[2] = turns->len - lens[0] - lens[1];
	dbuf_release(&msg);
	return rc;
}

/* A new request's messages: the prompt, and for a retry the turns it adds. */
static int new_messages(struct run *r, enum search_role role, uint32_t node,
			const struct scaffold *sc, const struct retry_turn *prev, struct dbuf *sys,
			struct dbuf *turns, size_t lens[3], size_t *nturns, char *err,
			size_t errlen)
{
	int rc = build_messages(r, role, node, sc, sys, turns, err, errlen);

	lens[0] = turns->len;
	*nturns = 1;
	if (rc || !prev)
		return rc;
	*nturns = 3;
	return retry_turns(r, prev, turns, lens, err, errlen);
}

static bool over_caps(struct run *r, size_t prompt_bytes, uint32_t max_tokens,
		      enum search_role role, char *why, size_t whylen)
{
	struct run_spend t = run_spend_total(r);
	uint64_t est_in = context_tokens(prompt_bytes), est = est_in + max_tokens;
	double pin, pout, est_usd;

	route_price(&r->cfg, role, model_for(r, role), &pin, &pout);
	est_usd = (double)est_in * pin / 1e6 + (double)max_tokens * pout / 1e6;
	if (r->cfg.max_total_tokens && t.tokens_in + t.tokens_out + est > r->cfg.max_total_tokens) {
		snprintf(why, whylen,
			 "token cap reached (%llu used, next call up to %llu, cap %llu)",
			 (unsigned long long)(t.tokens_in + t.tokens_out), (unsigned long long)est,
			 (unsigned long long)r->cfg.max_total_tokens);
		return true;
	}
	if (r->cfg.max_dollars > 0 && t.dollars + est_usd > r->cfg.max_dollars) {
		snprintf(why, whylen,
			 "dollar cap reached ($%.4f used, next call up to $%.4f, cap $%.4f)",
			 t.dollars, est_usd, r->cfg.max_dollars);
		return true;
	}
	return false;
}

/* A journaled response, answered from the journal. */
static int memo_answer(struct run *r, const struct run_memo *m, struct agent_out *out)
{
	json_t *head = NULL;
	struct dbuf blob;
	size_t tl;
	int rc;

	dbuf_init(&blob, STORE_EVENT_MAX);
	rc = jr_read(r->st, r->id, m->resp_seq, JR_LLM_RESPONSE, &head, NULL, &blob);
	if (rc)
		goto out;
	out->rc = (int)jr_i64(head, "rc", ST_EPROTO);
	out->fatal = false;
	out->truncated = jr_bool(head, "truncated", false);
	snprintf(out->error, sizeof(out->error), "%s", jr_str(head, "error", ""));
	tl = (size_t)jr_u64(head, "text_len", 0);
	rc = tl <= blob.len ? dbuf_append(&out->text, blob.p ? blob.p : "", tl) : ST_EPROTO;
out:
	json_decref(head);
	dbuf_release(&blob);
	return rc;
}

/*
 * The messages of a journaled request, to send it again: the system
 * message into sys, the others into turns (lens: their lengths, *n of
 * them).  *stale when the request's settings have changed since
 * (`stark resume --set`), so it must be journaled again.
 */
static int memo_request(struct run *r, const struct run_memo *m, enum search_role role,
			struct dbuf *sys, struct dbuf *turns, size_t lens[3], size_t *n,
			bool *stale)
{
	json_t *head = NULL, *now = settings_json(r, role), *t, *v;
	struct dbuf blob;
	const char *k;
	size_t sl, sum = 0, i;
	int rc;

	dbuf_init(&blob, STORE_EVENT_MAX);
	rc =
	    now ? jr_read(r->st, r->id, m->req_seq, JR_LLM_REQUEST, &head, NULL, &blob) : ST_ENOMEM;
	if (rc)
		goto out;
	*stale = false;
	json_object_foreach(now, k, v) *stale |= !json_equal(v, json_object_get(head, k));
	sl = (size_t)jr_u64(head, "system_len", SIZE_MAX);
	rc = sl <= blob.len ? ST_OK : ST_EPROTO;
	t = json_object_get(head, "turns");
	*n = json_is_array(t) ? json_array_size(t) : 1;
	if (!rc && (*n < 1 || *n > 3 || (*n != 1 && *n != 3)))
		rc = ST_EPROTO;
	for (i = 0; !rc && i < *n; i++) {
		lens[i] = json_is_array(t) ? (size_t)json_integer_value(json_array_get(t, i))
					   : blob.len - sl;
		sum += lens[i];
	}
	if (!rc && sum != blob.len - sl)
		rc = ST_EPROTO;
	if (!rc)
		rc = dbuf_append(sys, blob.p, sl);
	if (!rc)
		rc = dbuf_append(turns, blob.p + sl, blob.len - sl);
out:
	json_decref(now);
	json_decref(head);
	dbuf_release(&blob);
	return rc;
}

static void free_turns(struct llm_message *msgs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free((char *)msgs[i].content);
}

/* The turns as messages user[, assistant, user] (copies: free_turns). */
static int split_turns(const struct dbuf *turns, const size_t *lens, size_t n,
		       struct llm_message *msgs)
{
	size_t off = 0;

	for (size_t i = 0; i < n; i++) {
		char *c = strndup(turns->p ? turns->p + off : "", lens[i]);

		if (!c) {
			free_turns(msgs, i);
			return ST_ENOMEM;
		}
		msgs[i] = (struct llm_message){i == 1 ? "assistant" : "user", c};
		off += lens[i];
	}
	return 0;
}

/* Adds the request to the batch and to the memo (committed by the caller). */
static int journal_request(struct run *r, const char *key, enum search_role role, uint32_t retry,
			   uint32_t node, const struct dbuf *sys, const struct dbuf *turns,
			   const size_t *lens, size_t n)
{
	json_t *head = settings_json(r, role), *tl = json_array();
	struct run_memo *m;
	char hash[17];
	int rc = head && tl ? 0 : ST_ENOMEM;

	jr_hash_hex(turns->p ? turns->p : "", turns->len, hash);
	for (size_t i = 0; !rc && n > 1 && i < n; i++)
		rc = json_array_append_new(tl, json_integer((json_int_t)lens[i])) ? ST_ENOMEM : 0;
	if (!rc && (json_object_set_new(head, "key", json_string(key)) ||
		    json_object_set_new(head, "attempt", json_integer(r->cur.k)) ||
		    json_object_set_new(head, "node", json_integer(node)) ||
		    json_object_set_new(head, "role", json_string(search_role_name(role))) ||
		    json_object_set_new(head, "retry", json_integer(retry)) ||
		    json_object_set_new(head, "hash", json_string(hash)) ||
		    json_object_set_new(head, "system_len", json_integer((json_int_t)sys->len)) ||
		    (n > 1 && json_object_set(head, "turns", tl))))
		rc = ST_ENOMEM;
	if (!rc)
		rc = jr_batch_add2(&r->batch, JR_LLM_REQUEST, head, NULL, sys->p, sys->len,
				   turns->p, turns->len);
	json_decref(head);
	json_decref(tl);
	if (rc)
		return rc;
	m = run_memo_add(r, key);
	if (!m)
		return ST_ETOOBIG;
	m->req_seq = r->last_seq + r->batch.n;
	return ST_OK;
}

/* Counts the reply's spend (per role and per model) and adds it to the batch and the memo. */
static int record_reply(struct run *r, const char *key, enum search_role role,
			struct llm_reply *reply)
{
	const char *model = model_for(r, role);
	struct run_spend *sp = &r->spend[role], *ms = run_model_spend(r, model);
	struct run_memo *m = run_memo_find(r, key);
	json_t *head, *spend, *models;
	double usd, pin, pout;
	size_t tl;
	int rc;

	if (reply->text)
		text_clean(reply->text, strlen(reply->text));
	if (reply->raw)
		text_clean(reply->raw, reply->raw_len);
	reply->error[sizeof(reply->error) - 1] = '\0';
	text_clean(reply->error, strlen(reply->error));
	reply->param[sizeof(reply->param) - 1] = '\0';
	text_clean(reply->param, strlen(reply->param));
	tl = reply->text ? strlen(reply->text) : 0;
	route_price(&r->cfg, role, model, &pin, &pout);
	usd = (double)reply->tokens_in * pin / 1e6 + (double)reply->tokens_out * pout / 1e6;
	for (int i = 0; i < 2; i++) {
		struct run_spend *x = i ? ms : sp;

		if (!x)
			continue;
		x->calls++;
		x->tokens_in += reply->tokens_in;
		x->tokens_out += reply->tokens_out;
		x->tokens_reasoning += reply->tokens_reasoning;
		x->dollars += usd;
	}
	spend = spend_json(r, false);
	models = spend_json(r, true);
	head = json_pack(
	    "{s:s, s:I, s:s, s:s, s:i, s:b, s:I, s:I, s:I, s:I, s:I, s:b, s:s, s:f, s:s, s:I, s:o, "
	    "s:o, s:I, s:f}",
	    "key", key, "attempt", (json_int_t)r->cur.k, "role", search_role_name(role), "model",
	    model, "rc", reply->rc, "fatal", reply->fatal, "http_status",
	    (json_int_t)reply->http_status, "tries", (json_int_t)reply->attempts, "tokens_in",
	    (json_int_t)reply->tokens_in, "tokens_out", (json_int_t)reply->tokens_out,
	    "tokens_reasoning", (json_int_t)reply->tokens_reasoning, "truncated", reply->truncated,
	    "param", reply->param, "dollars", usd, "error", reply->error, "text_len",
	    (json_int_t)tl, "spend", spend ? spend : json_null(), "spend_models",
	    models ? models : json_null(), "ms", (json_int_t)reply->elapsed_ms, "at", now_s());
	rc = head && spend && models
		 ? jr_batch_add2(&r->batch, JR_LLM_RESPONSE, head, NULL, reply->text, tl,
				 reply->raw, reply->raw ? reply->raw_len : 0)
		 : ST_ENOMEM;
	json_decref(head);
	if (rc || !m)
		return rc ? rc : ST_EPROTO;
	m->resp_seq = r->last_seq + r->batch.n;
	m->resp_fatal = reply->fatal;
	return ST_OK;
}

/* Why a fatal reply pauses the run, with the setting to change when a member was refused. */
static void fatal_reason(struct run *r, enum search_role role, const char *key,
			 const struct llm_reply *reply, char *why, size_t whylen)
{
	const char *err = reply->error[0] ? reply->error : stark_strerror(reply->rc);
	struct route rt;
	char fix[200] = "", msg[64];

	if (reply->param[0] &&
	    !route_of(&r->cfg, jr_str(r->options, "llm", ""), jr_str(r->options, "model", ""), role,
		      &rt, msg, sizeof(msg)))
		route_fix(&r->cfg, rt.api, role, reply->param, fix, sizeof(fix));
	if (!reply->param[0])
		snprintf(why, whylen, "llm request %s failed: %s", key, err);
	else if (!fix[0])
		snprintf(why, whylen,
			 "llm request %s: the server refused '%s' (role %s, model %s): %s", key,
			 reply->param, search_role_name(role), model_for(r, role), err);
	else
		snprintf(
		    why, whylen,
		    "llm request %s: the server refused '%s' (role %s, model %s): %s, then `stark "
		    "resume %s --set KEY=VALUE`; it said: %s",
		    key, reply->param, search_role_name(role), model_for(r, role), fix, r->id, err);
}

/*
 * One agent call, journal first: answered from the journal when its
 * response is there, re-sent with the journaled messages when only its
 * request is (journaled again when its settings changed), built,
 * journaled and sent otherwise.  prev (NULL for a first try) is the
 * rejected answer a retry carries.  Returns 0 with out filled, or 0 with
 * *stop set (caps, signal, fatal error), or a negative code.
 */
static int agent_call(struct run *r, enum search_role role, uint32_t retry, uint32_t node,
		      const struct scaffold *sc, const struct retry_turn *prev,
		      struct agent_out *out, enum stop_kind *stop, char *why, size_t whylen)
{
	struct llm_message msgs[4];
	struct llm_reply reply;
	struct llm_request rq = {0};
	struct dbuf sys, turns;
	size_t lens[3] = {0, 0, 0}, nturns = 1;
	char key[RUN_KEY_MAX];
	struct run_memo *m;
	bool journal = true;
	int rc = 0;

	memset(&reply, 0, sizeof(reply));
	dbuf_init(&sys, PROMPT_MAX);
	dbuf_init(&turns, 3 * PROMPT_MAX);
	dbuf_reset(&out->text);
	out->rc = 0;
	out->fatal = out->truncated = false;
	out->error[0] = '\0';
	snprintf(key, sizeof(key), "a%u.%s.r%u", r->cur.k, search_role_name(role), retry);
	m = run_memo_find(r, key);
	if (m && m->resp_seq && !m->resp_fatal) {
		rc = memo_answer(r, m, out);
		goto out_free;
	}
	if (m && m->req_seq) {
		rc = memo_request(r, m, role, &sys, &turns, lens, &nturns, &journal);
	} else if (new_messages(r, role, node, sc, prev, &sys, &turns, lens, &nturns, why,
				whylen)) {
		*stop = STOP_FAIL;
		rc = 0;
		goto out_free;
	}
	if (!rc && over_caps(r, sys.len + turns.len, r->cfg.max_tokens[role], role, why, whylen)) {
		*stop = STOP_FINISH;
		goto out_free;
	}
	if (!rc && journal)
		rc = journal_request(r, key, role, retry, node, &sys, &turns, lens, nturns);
	if (!rc)
		rc = commit(r);
	if (rc)
		goto out_free;
	msgs[0] = (struct llm_message){"system", dbuf_str(&sys)};
	rc = split_turns(&turns, lens, nturns, msgs + 1);
	if (rc)
		goto out_free;
	rq.tag = ++r->tag;
	rq.msgs = msgs;
	rq.nmsgs = nturns + 1;
	route_request(&r->cfg, role, &rq);
	progress_doing(r, "%s agent on node %u%s", search_role_name(role), node,
		       retry ? " (asked again)" : "");
	rc = r->llm->call(r->llm, key, search_role_name(role), &rq, &reply);
	free_turns(msgs + 1, nturns);
	if (rc == ST_ECANCELED) {
		*stop = STOP_SIGNAL;
		rc = 0;
		goto out_free;
	}
	if (!rc)
		rc = record_reply(r, key, role, &reply);
	if (rc)
		goto out_free;
	out->rc = reply.rc;
	out->fatal = reply.fatal;
	out->truncated = reply.truncated;
	snprintf(out->error, sizeof(out->error), "%s", reply.error);
	if (reply.rc == 0 && reply.text)
		rc = dbuf_puts(&out->text, reply.text);
	if (!rc && reply.fatal) {
		rc = commit(r);
		fatal_reason(r, role, key, &reply, why, whylen);
		*stop = STOP_PAUSE;
	}
out_free:
	llm_reply_release(&reply);
	dbuf_release(&sys);
	dbuf_release(&turns);
	return rc;
}

/* Journals a complaint about an answer, once per key, and keeps it for `stark show`. */
static int note_violation(struct run *r, enum search_role role, uint32_t retry, const char *reason)
{
	char key[RUN_KEY_MAX];
	struct run_memo *m;
	int rc;

	snprintf(key, sizeof(key), "a%u.%s.r%u", r->cur.k, search_role_name(role), retry);
	m = run_memo_find(r, key);
	if (m && m->checked)
		return ST_OK;
	rc = batch_take(r, JR_CHECK,
			json_pack("{s:s, s:I, s:s, s:I, s:s}", "key", key, "attempt",
				  (json_int_t)r->cur.k, "role", search_role_name(role), "retry",
				  (json_int_t)retry, "reason", reason),
			NULL, NULL, 0);
	if (!rc)
		rc = run_check_add(r, r->cur.k, key, reason);
	if (!rc && m)
		m->checked = true;
	return rc;
}

/* ---- the agent phase of an attempt ---- */

/*
 * Checks an answer the way its role needs (search.h): a plan is parsed
 * and grounded in the node's code (into sc_out), a program is verified
 * against the plan sc (and cleaned of markers), any other reply must hold
 * code.  The program goes to code.
 */
static int check_answer(struct run *r, enum search_role role, uint32_t node,
			const struct scaffold *sc, struct scaffold *sc_out, const struct dbuf *text,
			struct dbuf *code, char *err, size_t errlen)
{
	const struct tree_node *n = tree_node(r->tree, node);
	const char *t = dbuf_str(text);

	dbuf_reset(code);
	if (role == ROLE_PLAN)
		return anchor_accept_plan(t, text->len, n->code, n->code_len, sc_out, err, errlen);
	if (role == ROLE_CODE)
		return anchor_accept_code(sc, t, text->len, code, err, errlen);
	return anchor_reply_code(t, text->len, code, err, errlen);
}

/*
 * Asks role for an answer, and again after a rejected one up to
 * verify_retries times, each retry carrying the rejected answer and the
 * checker's complaint (so it is a different request).  Sets made->kind;
 * fills made->code on success (and sc_out for a plan).
 */
static int ask(struct run *r, enum search_role role, uint32_t node, const struct scaffold *sc,
	       struct scaffold *sc_out, struct made *made, enum stop_kind *stop, char *why,
	       size_t whylen)
{
	struct agent_out o = {0};
	struct retry_turn prev = {0};
	struct dbuf code, last;
	char verr[RUN_ERR_MAX], complaint[RUN_ERR_MAX];
	int rc = 0;

	dbuf_init(&o.text, 16u << 20);
	dbuf_init(&last, 16u << 20);
	dbuf_init(&code, TREE_CODE_MAX);
	made->kind = MADE_REJECTED;
	for (uint32_t retry = 0; retry <= r->cfg.verify_retries; retry++) {
		rc = agent_call(r, role, retry, node, sc, retry ? &prev : NULL, &o, stop, why,
				whylen);
		if (rc || *stop)
			goto out;
		if (o.rc) {
			made->kind = MADE_LLM_ERROR;
			snprintf(made->reason, sizeof(made->reason), "%s agent call failed: %s",
				 search_role_name(role),
				 o.error[0] ? o.error : stark_strerror(o.rc));
			goto out;
		}
		verr[0] = '\0';
		rc = check_answer(r, role, node, sc, sc_out, &o.text, &code, verr, sizeof(verr));
		if (!rc) {
			made->kind = MADE_NODE;
			dbuf_reset(&made->code);
			rc = dbuf_append(&made->code, code.p ? code.p : "", code.len);
			goto out;
		}
		if (rc != ST_EINVAL && rc != ST_ETOOBIG)
			goto out;
		rc = 0;
		snprintf(complaint, sizeof(complaint), "%.400s%s", verr,
			 o.truncated
			     ? " (the reply stopped at its token limit, reasoning included, "
			       "before the answer was complete)"
			     : "");
		snprintf(made->reason, sizeof(made->reason), "%s agent: %.480s",
			 search_role_name(role), complaint);
		dbuf_reset(&made->code);
		if (!anchor_extract_code(dbuf_str(&o.text), o.text.len, &code))
			dbuf_append_trunc(&made->code, code.p ? code.p : "", code.len);
		rc = note_violation(r, role, retry, made->reason);
		if (rc)
			goto out;
		dbuf_reset(&last);
		rc = dbuf_append(&last, o.text.p ? o.text.p : "", o.text.len);
		if (rc)
			goto out;
		prev = (struct retry_turn){dbuf_str(&last), last.len, complaint};
	}
out:
	dbuf_release(&code);
	dbuf_release(&last);
	dbuf_release(&o.text);
	return rc;
}

static int phase_agents(struct run *r, struct made *made, enum stop_kind *stop, char *why,
			size_t whylen)
{
	const struct search_choice *ch = &r->cur.choice;
	const struct tree_node *n = tree_node(r->tree, ch->node);
	struct scaffold sc;
	int rc = 0;

	scaffold_init(&sc);
	made->parent = ch->node;
	switch (ch->action) {
	case ACTION_PLAN:
		made->origin = ORIGIN_PLAN;
		rc = ask(r, ROLE_PLAN, ch->node, NULL, &sc, made, stop, why, whylen);
		if (rc || *stop || made->kind != MADE_NODE)
			break;
		dbuf_reset(&made->plan);
		rc = scaffold_instructions(&sc, &made->plan);
		if (!rc)
			rc = ask(r, ROLE_CODE, ch->node, &sc, NULL, made, stop, why, whylen);
		break;
	case ACTION_DEBUG:
		made->origin = ORIGIN_DEBUG;
		rc = dbuf_puts(&made->plan, n->plan ? n->plan : "");
		if (!rc)
			rc = ask(r, ROLE_DEBUG, ch->node, NULL, NULL, made, stop, why, whylen);
		break;
	case ACTION_SAMPLE:
		made->origin = ORIGIN_SAMPLE;
		made->parent = 0;
		rc = ask(r, ROLE_SAMPLE, 0, NULL, NULL, made, stop, why, whylen);
		break;
	case ACTION_REFLECT:
		made->origin = ORIGIN_REFLECT;
		rc = ask(r, ROLE_REFLECT, ch->node, NULL, NULL, made, stop, why, whylen);
		break;
	}
	scaffold_release(&sc);
	return rc;
}

/* ---- node, evaluation, end of attempt ---- */

static int end_attempt(struct run *r, uint32_t node, const char *outcome, const char *reason)
{
	int rc = batch_take(r, JR_ATTEMPT_END,
			    json_pack("{s:I, s:o, s:s, s:s, s:f}", "attempt", (json_int_t)r->cur.k,
				      "node", node == TREE_NONE ? json_null() : json_integer(node),
				      "outcome", outcome, "reason", reason ? reason : "", "at",
				      now_s()),
			    NULL, NULL, 0);

	if (!rc)
		rc = commit(r);
	if (rc)
		return rc;
	r->attempts++;
	r->cur.open = false;
	r->doing[0] = '\0';
	r->llm_errors = strcmp(outcome, "llm_error") ? 0 : r->llm_errors + 1;
	/* The metadata `stark list` shows is a summary: refreshed at most once
	 * a second while attempts are fast, always on a state change. */
	if (clock_mono_ns() - r->meta_ns < RUN_META_EVERY_NS)
		return ST_OK;
	return run_meta_write(r);
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
		    (struct run_node_info){.verdict = -1, .runtime_us = NAN, .ref_runtime_us = NAN};
	r->info = ni;
	r->info_cap = ncap;
	return ST_OK;
}

static int eval_request(struct run *r, uint32_t id)
{
	const struct tree_node *n = tree_node(r->tree, id);
	char key[RUN_KEY_MAX], hash[17];

	snprintf(key, sizeof(key), "n%u", id);
	jr_hash_hex(n->code, n->code_len, hash);
	return batch_take(r, JR_EVAL_REQUEST,
			  json_pack("{s:s, s:I, s:I, s:s}", "key", key, "attempt",
				    (json_int_t)r->cur.k, "node", (json_int_t)id, "hash", hash),
			  NULL, NULL, 0);
}

/* Journals the node the agents made; rejected nodes end the attempt. */
static int add_node(struct run *r, struct made *made)
{
	char hash[17];
	uint32_t id;
	int rc;

	rc = tree_add(r->tree, made->parent, made->origin, dbuf_str(&made->code),
		      dbuf_str(&made->plan), &id);
	if (!rc)
		rc = run_info_reserve(r, id);
	if (rc)
		return rc;
	r->info[id].attempt = r->cur.k;
	r->info[id].node_seq = r->last_seq + r->batch.n + 1;
	r->cur.node = id;
	jr_hash_hex(made->code.p ? made->code.p : "", made->code.len, hash);
	{
		json_t *head =
		    json_pack("{s:I, s:I, s:I, s:s, s:s, s:I, s:f}", "id", (json_int_t)id, "parent",
			      (json_int_t)made->parent, "attempt", (json_int_t)r->cur.k, "origin",
			      node_origin_name(made->origin), "hash", hash, "code_len",
			      (json_int_t)made->code.len, "at", now_s());
		struct dbuf blob;

		if (head && made->kind == MADE_REJECTED &&
		    json_object_set_new(head, "rejected", json_string(made->reason))) {
			json_decref(head);
			head = NULL;
		}
		dbuf_init(&blob, STORE_EVENT_MAX);
		rc = dbuf_append(&blob, made->code.p ? made->code.p : "", made->code.len);
		if (!rc)
			rc = dbuf_append(&blob, made->plan.p ? made->plan.p : "", made->plan.len);
		if (!rc)
			rc = batch_take(r, JR_NODE, head, NULL, blob.p, blob.len);
		else
			json_decref(head);
		dbuf_release(&blob);
	}
	if (rc)
		return rc;
	if (made->kind == MADE_REJECTED) {
		rc = tree_set_result(r->tree, id, NODE_REJECTED, 0, made->reason);
		return rc ? rc : end_attempt(r, id, "rejected", made->reason);
	}
	rc = eval_request(r, id);
	if (!rc)
		r->cur.eval_requested = true;
	return rc;
}

static enum node_status node_status_of(const struct proto_result *res)
{
	switch (res->status) {
	case PROTO_ST_CORRECT:
		return isfinite(res->speedup) && res->speedup > 0 ? NODE_CORRECT : NODE_ERROR;
	case PROTO_ST_INCORRECT:
		return NODE_INCORRECT;
	case PROTO_ST_COMPILE_ERROR:
		return NODE_COMPILE_ERROR;
	case PROTO_ST_RUNTIME_ERROR:
		return NODE_RUNTIME_ERROR;
	case PROTO_ST_TIMEOUT:
		return NODE_TIMEOUT;
	case PROTO_ST_CRASHED:
		return NODE_CRASHED;
	case PROTO_ST_REJECTED:
		return NODE_REJECTED;
	default:
		return NODE_ERROR;
	}
}

/* What the agents see about an outcome: the message, then the log. */
static int feedback_of(const struct proto_result *res, enum node_status st, struct dbuf *fb)
{
	int rc = dbuf_puts(fb, res->message ? res->message : "");

	if (!rc && st == NODE_ERROR && res->status == PROTO_ST_CORRECT)
		rc = dbuf_puts(fb, " (the evaluator reported no valid speedup)");
	if (!rc && res->log && res->log[0])
		rc = dbuf_printf(fb, "\n%s", res->log);
	return rc;
}

/*
 * An evaluation that ends in `error` could not be done (a broken
 * installation, a lost evaluator): it is not the candidate's outcome, so
 * it is neither journaled as the node's result nor fed to the agents.  The
 * run pauses with the message, its log goes with the pause, and
 * `stark resume` sends the evaluation again, once the cause is fixed.
 */
static void pause_on_error(struct run *r, const struct proto_result *res, char *why,
			   size_t whylen, enum stop_kind *stop)
{
	const char *log = res->log ? res->log : "";

	snprintf(why, whylen,
		 "the evaluation of node %u could not be done (not the candidate's fault): %.360s",
		 r->cur.node, res->message && res->message[0] ? res->message : "no message");
	text_clean(why, strlen(why));
	free(r->pause_log);
	r->pause_log = strndup(log, 65536);
	if (r->pause_log)
		text_clean(r->pause_log, strlen(r->pause_log));
	*stop = STOP_PAUSE;
}

static int phase_eval(struct run *r, enum stop_kind *stop, char *why, size_t whylen)
{
	const struct tree_node *n = tree_node(r->tree, r->cur.node);
	char key[RUN_KEY_MAX], hash[17];
	struct proto_result res;
	struct eval_job job;
	struct dbuf fb;
	json_t *head = NULL, *body = NULL;
	enum node_status st;
	uint64_t t0;
	double eval_ms;
	int rc;

	if (r->cur.eval_done)
		return end_attempt(r, r->cur.node, "evaluated", NULL);
	if (!r->cur.eval_requested) {
		rc = eval_request(r, r->cur.node);
		if (rc)
			return rc;
		r->cur.eval_requested = true;
	}
	rc = commit(r);
	if (rc)
		return rc;
	proto_result_init(&res);
	dbuf_init(&fb, PROTO_MESSAGE_MAX + PROTO_LOG_MAX + 256);
	snprintf(key, sizeof(key), "n%u", r->cur.node);
	jr_hash_hex(n->code, n->code_len, hash);
	job = (struct eval_job){.key = key,
				.hash = hash,
				.problem_name = r->problem,
				.problem_src = r->problem_src,
				.problem_len = r->problem_len,
				.code = n->code,
				.code_len = n->code_len,
				.device = jr_str(r->options, "device", "cpu"),
				.format = jr_str(r->options, "format", "kernelbench"),
				.insecure = jr_bool(r->options, "insecure_sandbox", false),
				.seed =
				    r->eval_seed ^ ((uint64_t)r->cur.node * 0x9e3779b97f4a7c15ull)};
	progress_doing(r, "evaluating node %u", r->cur.node);
	t0 = clock_mono_ns();
	rc = r->eval->eval(r->eval, &job, &res);
	eval_ms = (double)(clock_mono_ns() - t0) / 1e6;
	if (rc == ST_ECANCELED) {
		*stop = STOP_SIGNAL;
		rc = 0;
		goto out_free;
	}
	if (rc)
		goto out_free;
	if (res.status == PROTO_ST_ERROR) {
		pause_on_error(r, &res, why, whylen, stop);
		goto out_free;
	}
	st = node_status_of(&res);
	rc = feedback_of(&res, st, &fb);
	if (!rc)
		rc = tree_set_result(r->tree, r->cur.node, st, st == NODE_CORRECT ? res.speedup : 0,
				     dbuf_str(&fb));
	if (rc)
		goto out_free;
	n = tree_node(r->tree, r->cur.node);
	r->info[r->cur.node].verdict = (int)res.status;
	r->info[r->cur.node].runtime_us = res.runtime_us;
	r->info[r->cur.node].ref_runtime_us = res.ref_runtime_us;
	r->info[r->cur.node].result_seq = r->last_seq + 1;
	head = json_pack("{s:s, s:I, s:I, s:s, s:s, s:o, s:o, s:o, s:f, s:f}", "key", key,
			 "attempt", (json_int_t)r->cur.k, "node", (json_int_t)r->cur.node, "status",
			 node_status_name(st), "verdict", proto_status_name(res.status), "speedup",
			 jr_real_new(n->speedup), "runtime_us", jr_real_new(res.runtime_us),
			 "ref_runtime_us", jr_real_new(res.ref_runtime_us), "wall_ms", eval_ms, "at",
			 now_s());
	body = json_object();
	rc = head && body ? jr_result_to_json(&res, body, body) : ST_ENOMEM;
	if (rc) {
		json_decref(head);
		json_decref(body);
		goto out_free;
	}
	rc = batch_take(r, JR_EVAL_RESULT, head, body, fb.p, fb.len);
	if (!rc) {
		r->cur.eval_done = true;
		rc = end_attempt(r, r->cur.node, "evaluated", NULL);
	}
out_free:
	dbuf_release(&fb);
	proto_result_release(&res);
	return rc;
}

/* ---- progress ---- */

static void progress(struct run *r, bool final)
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
static void progress_doing(struct run *r, const char *fmt, ...)
{
	va_list ap;

	if (!r->progress || !r->progress_tty)
		return;
	va_start(ap, fmt);
	vsnprintf(r->doing, sizeof(r->doing), fmt, ap);
	va_end(ap);
	progress(r, false);
}

/* ---- the loop ---- */

static int start_attempt(struct run *r, enum stop_kind *stop, char *why, size_t whylen)
{
	struct search_choice ch;
	char rng[33];
	int rc;

	if (r->attempts >= r->cfg.budget) {
		snprintf(why, whylen, "budget reached (%u attempts)", r->cfg.budget);
		*stop = STOP_FINISH;
		return 0;
	}
	rc = policy_select(r->tree, &r->cfg, &r->rng, &ch);
	if (rc == ST_ENOENT) {
		snprintf(why, whylen, "search exhausted: no node is eligible");
		*stop = STOP_FINISH;
		return 0;
	}
	if (rc)
		return rc;
	memset(&r->cur, 0, sizeof(r->cur));
	r->cur.open = true;
	r->cur.k = r->attempts + 1;
	r->cur.choice = ch;
	r->cur.node = TREE_NONE;
	r->cur.select_seq = r->last_seq + r->batch.n + 1;
	rng_format(&r->rng, rng);
	return batch_take(r, JR_SELECT,
			  json_pack("{s:I, s:I, s:s, s:b, s:s, s:f}", "attempt", (json_int_t)r->cur.k,
				    "node", (json_int_t)ch.node, "action",
				    search_action_name(ch.action), "explored", ch.explored, "rng",
				    rng, "at", now_s()),
			  NULL, NULL, 0);
}

static int attempt(struct run *r, enum stop_kind *stop, char *why, size_t whylen)
{
	struct made made = {0};
	int rc;

	if (!r->cur.open) {
		rc = start_attempt(r, stop, why, whylen);
		if (rc || *stop)
			return rc;
	}
	if (r->cur.node != TREE_NONE && !r->cur.eval_requested &&
	    tree_node(r->tree, r->cur.node)->status == NODE_REJECTED)
		return end_attempt(r, r->cur.node, "rejected",
				   tree_node(r->tree, r->cur.node)->feedback);
	if (r->cur.node == TREE_NONE) {
		dbuf_init(&made.code, TREE_CODE_MAX);
		dbuf_init(&made.plan, TREE_PLAN_MAX);
		rc = phase_agents(r, &made, stop, why, whylen);
		if (!rc && !*stop && made.kind == MADE_LLM_ERROR) {
			rc = end_attempt(r, TREE_NONE, "llm_error", made.reason);
			if (!rc && r->llm_errors >= RUN_LLM_ERRORS_PAUSE) {
				snprintf(why, whylen,
					 "%u attempts in a row ended in a failed llm call (last: %.400s)",
					 r->llm_errors, made.reason);
				*stop = STOP_PAUSE;
			}
		} else if (!rc && !*stop) {
			rc = add_node(r, &made);
		}
		dbuf_release(&made.code);
		dbuf_release(&made.plan);
		if (rc || *stop || !r->cur.open)
			return rc;
	}
	return phase_eval(r, stop, why, whylen);
}

/* The candidate format the agents write (the run's --format). */
static const char *run_format(const struct run *r)
{
	return jr_str(r->options, "format", "kernelbench");
}

static int load_prompts(struct run *r, char *err, size_t errlen)
{
	char dir[PROTO_PATH_MAX];
	int rc;

	if (r->prompts_loaded)
		return ST_OK;
	if (r->cfg.prompts_dir[0])
		snprintf(dir, sizeof(dir), "%s", r->cfg.prompts_dir);
	else if ((rc = prompt_default_dir(dir, sizeof(dir))))
		return rc;
	rc = prompt_load(dir, run_format(r), &r->prompts, err, errlen);
	if (!rc)
		r->prompts_loaded = true;
	return rc;
}

int run_loop(struct run *r, char *err, size_t errlen)
{
	enum stop_kind stop = STOP_NONE;
	char why[RUN_REASON_MAX] = "";
	int rc;

	err[0] = '\0';
	if (!r->fresh) {
		rc = run_set_state(r, RUN_RUNNING, "resumed");
		if (rc)
			goto out_journal;
	}
	r->fresh = false;
	r->llm_errors = 0;
	if (load_prompts(r, why, sizeof(why))) {
		stop = STOP_FAIL;
		goto out_stop;
	}
	progress(r, false);
	while (!stop) {
		if (r->stop && *r->stop) {
			stop = STOP_SIGNAL;
			break;
		}
		uint32_t before = r->attempts;

		rc = attempt(r, &stop, why, sizeof(why));
		if (rc) {
			snprintf(why, sizeof(why), "internal error in attempt %u: %s", r->cur.k,
				 stark_strerror(rc));
			stop = STOP_FAIL;
			break;
		}
		if (r->attempts != before)
			progress(r, false);
	}
out_stop:
	switch (stop) {
	case STOP_FINISH:
		rc = run_set_state(r, RUN_FINISHED, why);
		break;
	case STOP_SIGNAL:
		rc = run_set_state(r, RUN_INTERRUPTED, "interrupted by a signal");
		break;
	case STOP_PAUSE:
		rc = run_set_state(r, RUN_INTERRUPTED, why);
		break;
	default:
		rc = run_set_state(r, RUN_FAILED, why);
		break;
	}
	if (r->progress_tty)
		progress(r, true);
	if (!rc)
		return ST_OK;
out_journal:
	snprintf(err, errlen, "run %s: cannot write the journal: %s", r->id, stark_strerror(rc));
	return rc;
}
