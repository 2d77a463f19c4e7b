/*
 * agent.c -- the agents of one attempt, journal first.
 *
 * One agent call is answered from the journal when its response is there,
 * re-sent with the journaled messages when only its request is, and
 * otherwise built (context window + templates, and for a retry the
 * rejected answer and the checker's complaint), checked against the caps
 * on tokens and dollars (its prompt estimate plus its max_tokens, before
 * it is made), journaled, committed and sent with its role's settings
 * (route.c); its reply is journaled with the spend so far.  The plan
 * agent's answer must parse into anchors grounded in the node's code and
 * the code agent's may change only the anchored spans: a rejected answer
 * is journaled (JR_CHECK) and the agent asked again, up to
 * cfg.verify_retries times, then the attempt's node is rejected.
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
			 "extra_body", c->extra_body[role], "llm", run_role_llm(r, role), "model",
			 run_role_model(r, role));
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

	route_price(&r->cfg, role, run_role_model(r, role), &pin, &pout);
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
	const char *model = run_role_model(r, role);
	struct run_spend *sp = &r->spend[role], *ms = run_model_spend(r, model);
	struct run_memo *m = run_memo_find(r, key);
	json_t *head, *spend, *models;
	double usd, pin, pout;
	size_t tl;
	int rc;

	if (reply->text)
		str_utf8_sanitize(reply->text, strlen(reply->text));
	if (reply->raw)
		str_utf8_sanitize(reply->raw, reply->raw_len);
	reply->error[sizeof(reply->error) - 1] = '\0';
	str_utf8_sanitize(reply->error, strlen(reply->error));
	reply->param[sizeof(reply->param) - 1] = '\0';
	str_utf8_sanitize(reply->param, strlen(reply->param));
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
	    models ? models : json_null(), "ms", (json_int_t)reply->elapsed_ms, "at", run__now());
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
			 reply->param, search_role_name(role), run_role_model(r, role), err);
	else
		snprintf(
		    why, whylen,
		    "llm request %s: the server refused '%s' (role %s, model %s): %s, then `stark "
		    "resume %s --set KEY=VALUE`; it said: %s",
		    key, reply->param, search_role_name(role), run_role_model(r, role), fix, r->id, err);
}

/* The most a call can cost: its prompt estimate in and max_tokens out. */
static double call_max_dollars(struct run *r, size_t prompt_bytes, enum search_role role)
{
	double pin, pout;

	route_price(&r->cfg, role, run_role_model(r, role), &pin, &pout);
	return (double)context_tokens(prompt_bytes) * pin / 1e6 +
	       (double)r->cfg.max_tokens[role] * pout / 1e6;
}

/* Leaves the request to send in r->pend; takes the turns' contents. */
static int pend_request(struct run *r, const char *key, enum search_role role,
			const struct dbuf *sys, struct llm_message *msgs, size_t nturns,
			size_t prompt_bytes)
{
	struct run_pending *p = &r->pend;

	run_pending_clear(r);
	p->msgs[0] = (struct llm_message){"system", strdup(dbuf_str(sys))};
	if (!p->msgs[0].content) {
		free_turns(msgs, nturns);
		return ST_ENOMEM;
	}
	for (size_t i = 0; i < nturns; i++)
		p->msgs[i + 1] = msgs[i];
	p->kind = RUN_WAIT_LLM;
	snprintf(p->key, sizeof(p->key), "%s", key);
	p->role = role;
	p->rq.tag = ++r->tag;
	p->rq.msgs = p->msgs;
	p->rq.nmsgs = nturns + 1;
	route_request(&r->cfg, role, &p->rq);
	p->max_dollars = call_max_dollars(r, prompt_bytes, role);
	p->t0 = clock_mono_ns();
	return ST_OK;
}

int run__llm_reply(struct run *r, struct llm_reply *reply)
{
	struct run_pending *p = &r->pend;
	int rc;

	if (p->kind != RUN_WAIT_LLM) {
		llm_reply_release(reply);
		return ST_EINVAL;
	}
	rc = record_reply(r, p->key, p->role, reply);
	if (!rc)
		rc = run__commit(r);
	if (!rc && reply->fatal) {
		fatal_reason(r, p->role, p->key, reply, r->halt_why, sizeof(r->halt_why));
		r->halt = STOP_PAUSE;
	}
	llm_reply_release(reply);
	if (!rc)
		run_pending_clear(r);
	return rc;
}

/*
 * One agent call, journal first: answered from the journal when its
 * response is there, re-sent with the journaled messages when only its
 * request is (journaled again when its settings changed), built and
 * journaled otherwise; a request to send is left in r->pend with *stop =
 * STOP_WAIT, and its reply, once journaled (run__llm_reply), answers the
 * same call when the attempt is stepped again.  prev (NULL for a first
 * try) is the rejected answer a retry carries.  Returns 0 with out
 * filled, or 0 with *stop set (waiting, caps, fatal error), or a
 * negative code.
 */
static int agent_call(struct run *r, enum search_role role, uint32_t retry, uint32_t node,
		      const struct scaffold *sc, const struct retry_turn *prev,
		      struct agent_out *out, enum stop_kind *stop, char *why, size_t whylen)
{
	struct llm_message msgs[3];
	struct dbuf sys, turns;
	size_t lens[3] = {0, 0, 0}, nturns = 1;
	char key[RUN_KEY_MAX];
	struct run_memo *m;
	bool journal = true;
	int rc = 0;

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
		rc = run__commit(r);
	if (!rc)
		rc = split_turns(&turns, lens, nturns, msgs);
	if (!rc)
		rc = pend_request(r, key, role, &sys, msgs, nturns, sys.len + turns.len);
	if (rc)
		goto out_free;
	run__doing(r, "%s agent on node %u%s", search_role_name(role), node,
		   retry ? " (asked again)" : "");
	*stop = STOP_WAIT;
out_free:
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
	rc = run__batch_take(r, JR_CHECK,
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

int run__phase_agents(struct run *r, struct made *made, enum stop_kind *stop, char *why,
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
