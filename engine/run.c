/*
 * run.c -- driving a run's attempts, journal first: select, the agents
 * (agent.c), the node, its evaluation, the end of the attempt; and the loop
 * that runs attempts until the run finishes, pauses or fails.
 *
 * The rule everything here follows: an event is appended to the batch when
 * it happens, and the batch is committed before the next thing that leaves
 * the process (an LLM request, an evaluation, an exit).  So an LLM request
 * is durable before it is sent, a response is durable before the request it
 * leads to is sent, a candidate and its evaluation request are durable
 * before the evaluator starts, and its result is durable before the next
 * selection is acted on.  A kill at any instant loses at most work whose
 * outcome was not yet journaled, and resume (rebuild.c + the memo that
 * agent.c consults) redoes exactly that.
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

#include "engine/engine_int.h"

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

/* ---- node, evaluation, end of attempt ---- */

static int end_attempt(struct run *r, uint32_t node, const char *outcome, const char *reason)
{
	int rc = run__batch_take(r, JR_ATTEMPT_END,
			    json_pack("{s:I, s:o, s:s, s:s, s:f}", "attempt", (json_int_t)r->cur.k,
				      "node", node == TREE_NONE ? json_null() : json_integer(node),
				      "outcome", outcome, "reason", reason ? reason : "", "at",
				      run__now()),
			    NULL, NULL, 0);

	if (!rc)
		rc = run__commit(r);
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

static int eval_request(struct run *r, uint32_t id)
{
	const struct tree_node *n = tree_node(r->tree, id);
	char key[RUN_KEY_MAX], hash[17];

	snprintf(key, sizeof(key), "n%u", id);
	jr_hash_hex(n->code, n->code_len, hash);
	return run__batch_take(r, JR_EVAL_REQUEST,
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
			      (json_int_t)made->code.len, "at", run__now());
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
			rc = run__batch_take(r, JR_NODE, head, NULL, blob.p, blob.len);
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
	str_utf8_sanitize(why, strlen(why));
	free(r->pause_log);
	r->pause_log = strndup(log, 65536);
	if (r->pause_log)
		str_utf8_sanitize(r->pause_log, strlen(r->pause_log));
	*stop = STOP_PAUSE;
}

/* The evaluator's format for the run's: a Triton solution is KernelBench's
 * format (a Python file with ModelNew), its language "triton". */
int run__kb_trials(const json_t *options)
{
	uint64_t n = jr_u64(options, "kb_trials", 5);

	return n == 0 ? -1 : n > PROTO_TRIALS_MAX ? PROTO_TRIALS_MAX : (int)n;
}

static const char *eval_format(const char *run_format)
{
	return strcmp(run_format, "triton") ? run_format : "kernelbench";
}

/* Leaves the evaluation of the open attempt's node in r->pend. */
static void pend_eval(struct run *r)
{
	const struct tree_node *n = tree_node(r->tree, r->cur.node);
	struct run_pending *p = &r->pend;

	run_pending_clear(r);
	p->kind = RUN_WAIT_EVAL;
	snprintf(p->key, sizeof(p->key), "n%u", r->cur.node);
	jr_hash_hex(n->code, n->code_len, p->hash);
	p->job = (struct eval_job){
	    .key = p->key,
	    .hash = p->hash,
	    .problem_name = r->problem,
	    .problem_src = r->problem_src,
	    .problem_len = r->problem_len,
	    .code = n->code,
	    .code_len = n->code_len,
	    .device = jr_str(r->options, "device", "cpu"),
	    .format = eval_format(jr_str(r->options, "format", "kernelbench")),
	    .language = strcmp(jr_str(r->options, "format", ""), "triton") ? "auto" : "triton",
	    .precision = jr_str(r->options, "precision", "fp32"),
	    .baseline = jr_str(r->options, "baseline", "eager"),
	    .kb_trials = run__kb_trials(r->options),
	    .insecure = jr_bool(r->options, "insecure_sandbox", false),
	    .seed = r->eval_seed ^ ((uint64_t)r->cur.node * 0x9e3779b97f4a7c15ull)};
	p->t0 = clock_mono_ns();
}

static int phase_eval(struct run *r, enum stop_kind *stop)
{
	int rc;

	if (r->cur.eval_done)
		return end_attempt(r, r->cur.node, "evaluated", NULL);
	if (!r->cur.eval_requested) {
		rc = eval_request(r, r->cur.node);
		if (rc)
			return rc;
		r->cur.eval_requested = true;
	}
	rc = run__commit(r);
	if (rc)
		return rc;
	pend_eval(r);
	run__doing(r, "evaluating node %u", r->cur.node);
	*stop = STOP_WAIT;
	return ST_OK;
}

/* The result of the evaluation r->pend waits on: journaled, then the attempt ends. */
static int eval_result(struct run *r, const struct proto_result *res, double eval_ms)
{
	const struct tree_node *n;
	struct dbuf fb;
	json_t *head = NULL, *body = NULL;
	enum node_status st;
	int rc;

	if (r->pend.kind != RUN_WAIT_EVAL || !r->cur.open || r->cur.node == TREE_NONE)
		return ST_EINVAL;
	if (res->status == PROTO_ST_ERROR) {
		enum stop_kind stop = STOP_NONE;

		pause_on_error(r, res, r->halt_why, sizeof(r->halt_why), &stop);
		r->halt = stop;
		run_pending_clear(r);
		return ST_OK;
	}
	dbuf_init(&fb, PROTO_MESSAGE_MAX + PROTO_LOG_MAX + 256);
	st = node_status_of(res);
	rc = feedback_of(res, st, &fb);
	if (!rc)
		rc = tree_set_result(r->tree, r->cur.node, st, st == NODE_CORRECT ? res->speedup : 0,
				     dbuf_str(&fb));
	if (rc)
		goto out_free;
	n = tree_node(r->tree, r->cur.node);
	r->info[r->cur.node].verdict = (int)res->status;
	r->info[r->cur.node].runtime_us = res->runtime_us;
	r->info[r->cur.node].ref_runtime_us = res->ref_runtime_us;
	r->info[r->cur.node].speedup_compile = res->speedup_compile;
	r->info[r->cur.node].ref_compile_us = res->ref_compile_us;
	r->info[r->cur.node].result_seq = r->last_seq + 1;
	head = json_pack("{s:s, s:I, s:I, s:s, s:s, s:o, s:o, s:o, s:f, s:f}", "key", r->pend.key,
			 "attempt", (json_int_t)r->cur.k, "node", (json_int_t)r->cur.node, "status",
			 node_status_name(st), "verdict", proto_status_name(res->status), "speedup",
			 jr_real_new(n->speedup), "runtime_us", jr_real_new(res->runtime_us),
			 "ref_runtime_us", jr_real_new(res->ref_runtime_us), "wall_ms", eval_ms,
			 "at", run__now());
	if (head && isfinite(res->speedup_compile) &&
	    (json_object_set_new(head, "speedup_compile", json_real(res->speedup_compile)) ||
	     json_object_set_new(head, "ref_compile_us", jr_real_new(res->ref_compile_us)))) {
		json_decref(head);
		head = NULL;
	}
	body = json_object();
	rc = head && body ? jr_result_to_json(res, body, body) : ST_ENOMEM;
	if (rc) {
		json_decref(head);
		json_decref(body);
		goto out_free;
	}
	rc = run__batch_take(r, JR_EVAL_RESULT, head, body, fb.p, fb.len);
	if (!rc) {
		r->cur.eval_done = true;
		run_pending_clear(r);
		rc = end_attempt(r, r->cur.node, "evaluated", NULL);
	}
out_free:
	dbuf_release(&fb);
	return rc;
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
	return run__batch_take(r, JR_SELECT,
			  json_pack("{s:I, s:I, s:s, s:b, s:s, s:f}", "attempt", (json_int_t)r->cur.k,
				    "node", (json_int_t)ch.node, "action",
				    search_action_name(ch.action), "explored", ch.explored, "rng",
				    rng, "at", run__now()),
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
		rc = run__phase_agents(r, &made, stop, why, whylen);
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
	return phase_eval(r, stop);
}

/*
 * The run's prompts: those its journal recorded (loaded with it).  A run
 * that needs it (run_needs_upgrade: no prompts recorded, or settings this
 * stark reads differently) continues only after run_accept_upgrade().
 */
static int load_prompts(struct run *r, char *err, size_t errlen)
{
	char note[RUN_REASON_MAX];

	if (r->prompts_loaded && !run_needs_upgrade(r))
		return ST_OK;
	snprintf(err, errlen, "%s",
		 run_upgrade_note(r, note, sizeof(note)) ? note : "the run has no prompts");
	return ST_EVERSION;
}

static int journal_fail(struct run *r, int rc, char *err, size_t errlen)
{
	snprintf(err, errlen, "run %s: cannot write the journal: %s", r->id, stark_strerror(rc));
	return rc;
}

int run_begin(struct run *r, char *err, size_t errlen)
{
	char why[RUN_REASON_MAX] = "";
	int rc;

	err[0] = '\0';
	run_pending_clear(r);
	r->halt = STOP_NONE;
	if (!r->fresh) {
		rc = run_set_state(r, RUN_RUNNING, "resumed");
		if (rc)
			return journal_fail(r, rc, err, errlen);
	}
	r->fresh = false;
	r->llm_errors = 0;
	if (load_prompts(r, why, sizeof(why))) {
		r->halt = STOP_FAIL;
		snprintf(r->halt_why, sizeof(r->halt_why), "%s", why);
	}
	run__progress(r, false);
	return ST_OK;
}

/* Journals the state a stop leads to. */
static int finish(struct run *r, enum stop_kind stop, const char *why)
{
	switch (stop) {
	case STOP_FINISH:
		return run_set_state(r, RUN_FINISHED, why);
	case STOP_SIGNAL:
		return run_set_state(r, RUN_INTERRUPTED, "interrupted by a signal");
	case STOP_PAUSE:
		return run_set_state(r, RUN_INTERRUPTED, why);
	default:
		return run_set_state(r, RUN_FAILED, why);
	}
}

int run_step(struct run *r, enum run_wait *wait, char *err, size_t errlen)
{
	enum stop_kind stop = r->halt;
	char why[RUN_REASON_MAX] = "";
	int rc;

	err[0] = '\0';
	*wait = RUN_WAIT_DONE;
	if (r->pend.kind) { /* asked again before its answer: the same request */
		*wait = r->pend.kind;
		return ST_OK;
	}
	if (stop)
		snprintf(why, sizeof(why), "%s", r->halt_why);
	while (!stop) {
		uint32_t before = r->attempts;

		rc = attempt(r, &stop, why, sizeof(why));
		if (rc) {
			snprintf(why, sizeof(why), "internal error in attempt %u: %s", r->cur.k,
				 stark_strerror(rc));
			stop = STOP_FAIL;
			break;
		}
		if (r->attempts != before)
			run__progress(r, false);
	}
	if (stop == STOP_WAIT) {
		*wait = r->pend.kind;
		return ST_OK;
	}
	r->halt = STOP_NONE;
	rc = finish(r, stop, why);
	if (r->progress_tty)
		run__progress(r, true);
	return rc ? journal_fail(r, rc, err, errlen) : ST_OK;
}

int run_llm_reply(struct run *r, struct llm_reply *reply, char *err, size_t errlen)
{
	int rc = run__llm_reply(r, reply);

	return rc ? journal_fail(r, rc, err, errlen) : ST_OK;
}

int run_eval_result(struct run *r, const struct proto_result *res, double wall_ms, char *err,
		    size_t errlen)
{
	int rc = eval_result(r, res, wall_ms);

	return rc ? journal_fail(r, rc, err, errlen) : ST_OK;
}

int run_interrupt(struct run *r, const char *reason, char *err, size_t errlen)
{
	int rc;

	run_pending_clear(r);
	r->halt = STOP_NONE;
	rc = run_set_state(r, RUN_INTERRUPTED, reason);
	if (r->progress_tty)
		run__progress(r, true);
	return rc ? journal_fail(r, rc, err, errlen) : ST_OK;
}

/* The blocking driver of one run: each request answered by its provider in turn. */
int run_loop(struct run *r, char *err, size_t errlen)
{
	enum run_wait w;
	int rc = run_begin(r, err, errlen);

	while (!rc && !(rc = run_step(r, &w, err, errlen)) && w != RUN_WAIT_DONE) {
		if (r->stop && *r->stop)
			return run_interrupt(r, "interrupted by a signal", err, errlen);
		if (w == RUN_WAIT_LLM) {
			struct llm_reply reply;

			memset(&reply, 0, sizeof(reply));
			rc = r->llm->call(r->llm, r->pend.key, search_role_name(r->pend.role),
					  &r->pend.rq, &reply);
			if (!rc)
				rc = run_llm_reply(r, &reply, err, errlen);
			else
				llm_reply_release(&reply);
		} else {
			struct proto_result res;

			proto_result_init(&res);
			rc = r->eval->eval(r->eval, &r->pend.job, &res);
			if (!rc)
				rc = run_eval_result(r, &res,
						     (double)(clock_mono_ns() - r->pend.t0) / 1e6,
						     err, errlen);
			proto_result_release(&res);
		}
		if (rc == ST_ECANCELED)
			return run_interrupt(r, "interrupted by a signal", err, errlen);
		if (rc && !err[0]) {
			/* the evaluator could not be run at all: the run stops as failed */
			char why[RUN_REASON_MAX];

			snprintf(why, sizeof(why), "internal error in attempt %u: %s", r->cur.k,
				 stark_strerror(rc));
			r->halt = STOP_FAIL;
			snprintf(r->halt_why, sizeof(r->halt_why), "%s", why);
			run_pending_clear(r);
			rc = 0;
		}
	}
	return rc;
}
