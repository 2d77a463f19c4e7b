/*
 * sched.c -- the bench's event loop: every run of a bench driven from one
 * thread, each run a state machine stepped until it waits (engine.h:
 * run_step), its requests sent through shared providers that do not
 * block.
 *
 * Each turn of the loop: runs are started into free slots (up to
 * runs_in_flight; a run is loaded and locked when it starts and freed
 * when it stops), every ready run is stepped, waiting LLM requests are
 * sent in the order they were made while fewer than llm_in_flight are
 * out and the dollar cap allows, waiting evaluations are started while
 * the pool has a free slot, and then the loop sleeps until a reply or a
 * result comes.  A run's request is journaled before run_step returns
 * it, and its answer is journaled (run_llm_reply, run_eval_result)
 * before the run is stepped again, so a kill at any instant loses only
 * answers not yet journaled, which resume asks for again.  Nothing a run
 * decides depends on the others or on timing: its tree is the same alone
 * or in a bench of any size, given the same answers.
 *
 * The bench stops early when a run pauses or fails (a fatal LLM error,
 * an evaluation that could not be done, an internal error), when the next
 * LLM call could pass --max-dollars (spend so far, plus the most the
 * calls in flight can cost, plus its own most), or on a signal.  Except
 * on a signal, it sends nothing new and waits for what is in flight (LLM
 * replies are paid for); on a signal it drops what is in flight at once.
 * Either way every run in flight is journaled interrupted, and so is the
 * bench: `stark resume BENCH_ID` continues it.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

#define SCHED_POLL_MS	200
#define SCHED_STATUS_NS 250000000ull
#define SCHED_RECORD_NS 2000000000ull
#define SCHED_REPLIES	64

enum slot_state { SLOT_FREE = 0, SLOT_READY, SLOT_WANT_LLM, SLOT_LLM, SLOT_WANT_EVAL, SLOT_EVAL };

struct slot {
	enum slot_state st;
	struct run *r;
	size_t idx;		  /* b->runs[idx] */
	struct llm_provider *llm; /* the run's own (replay), else NULL */
	struct eval_provider *eval;
	uint64_t queued;     /* order its request was made */
	double inflight_usd; /* the most its call in flight can cost */
	uint32_t seen;	     /* attempts already counted */
};

struct loop {
	struct bench *b;
	const struct bench_io *io;
	struct slot *slot;
	size_t nslot, next;
	unsigned llm_max, llm_out, evals_out;
	double cap, inflight_usd;
	uint64_t seq, t0, status_ns;
	uint64_t attempts, llm_calls, evals, done;
	bool halting, hard;
	enum run_state halt_state;
	char why[RUN_REASON_MAX];
	char *err;
	size_t errlen;
};

static void event(struct loop *l, const char *fmt, ...) ST_PRINTF(2, 3);
static void event(struct loop *l, const char *fmt, ...)
{
	char line[RUN_REASON_MAX + 256];
	va_list ap;

	if (!l->io->event)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	l->io->event(l->io->arg, l->b, line);
}

static void halt(struct loop *l, enum run_state s, bool hard, const char *fmt, ...) ST_PRINTF(4, 5);
static void halt(struct loop *l, enum run_state s, bool hard, const char *fmt, ...)
{
	va_list ap;

	l->hard |= hard;
	if (l->halting)
		return;
	l->halting = true;
	l->halt_state = s;
	va_start(ap, fmt);
	vsnprintf(l->why, sizeof(l->why), fmt, ap);
	va_end(ap);
	event(l, "bench %s stopping: %s", l->b->id, l->why);
}

static double spent(const struct loop *l)
{
	double usd = 0;

	for (size_t i = 0; i < l->b->nruns; i++)
		for (int k = 0; k < ROLE_COUNT; k++)
			usd += l->b->runs[i].spend[k].dollars;
	return usd;
}

static struct llm_provider *llm_of(struct loop *l, struct slot *s)
{
	return s->llm ? s->llm : l->io->llm;
}

static struct eval_provider *eval_of(struct loop *l, struct slot *s)
{
	return s->eval ? s->eval : l->io->eval;
}

/* ---- runs in and out of slots ---- */

static void slot_release(struct slot *s)
{
	run_free(s->r);
	llm_provider_free(s->llm);
	eval_provider_free(s->eval);
	memset(s, 0, sizeof(*s));
}

/* Loads run idx into slot s and begins it; 1 when it needs no slot (finished). */
static int start_run(struct loop *l, struct slot *s, size_t idx)
{
	struct bench *b = l->b;
	const char *id = b->runs[idx].run_id;
	char err[RUN_ERR_MAX] = "";
	int rc;

	rc = run_load(b->st, id, true, &s->r, err, sizeof(err));
	if (rc == ST_ENOENT && !(rc = bench__create_run(b, idx, err, sizeof(err))))
		rc = run_load(b->st, id, true, &s->r, err, sizeof(err));
	if (rc == ST_EBUSY) {
		halt(l, RUN_INTERRUPTED, false, "run %s is in use by another process", id);
		return rc;
	}
	if (rc) {
		halt(l, RUN_FAILED, false, "run %s cannot be loaded: %s", id, err);
		return rc;
	}
	if (b->accept_upgrade && s->r->state != RUN_FINISHED && run_needs_upgrade(s->r) &&
	    (rc = run_accept_upgrade(s->r, err, sizeof(err)))) {
		halt(l, RUN_FAILED, false, "%s", err);
		return rc;
	}
	if (s->r->state == RUN_FINISHED) {
		rc = bench_summary_from(b, idx, s->r);
		slot_release(s);
		l->done++;
		return rc ? rc : 1;
	}
	if ((!l->io->llm || !l->io->eval) && l->io->make &&
	    (rc = l->io->make(l->io->arg, s->r, l->io->llm ? NULL : &s->llm,
			      l->io->eval ? NULL : &s->eval))) {
		halt(l, RUN_FAILED, false,
		     "run %s: its llm or evaluation provider could not be set up", id);
		slot_release(s);
		return rc;
	}
	s->idx = idx;
	s->seen = s->r->attempts;
	rc = run_begin(s->r, l->err, l->errlen);
	if (rc) {
		slot_release(s);
		return rc;
	}
	s->st = SLOT_READY;
	event(l, "run %s started (%s, %s, %u of %u attempts done)", id, b->runs[idx].problem,
	      search_policy_name(b->runs[idx].policy), s->r->attempts, s->r->cfg.budget);
	return ST_OK;
}

/* A run that stopped: its summary into the bench, its slot freed. */
static int end_run(struct loop *l, struct slot *s)
{
	struct bench_run *br = &l->b->runs[s->idx];
	int rc = bench_summary_from(l->b, s->idx, s->r);

	if (isfinite(br->best))
		event(l, "run %s %s: %s; best %.2fx", br->run_id, run_state_name(s->r->state),
		      s->r->reason, br->best);
	else
		event(l, "run %s %s: %s; no correct candidate", br->run_id,
		      run_state_name(s->r->state), s->r->reason);
	if (s->r->state == RUN_FINISHED)
		l->done++;
	else
		halt(l, s->r->state, false, "run %s %s: %s", br->run_id,
		     run_state_name(s->r->state), s->r->reason);
	slot_release(s);
	if (!rc && clock_mono_ns() - l->b->meta_ns > SCHED_RECORD_NS)
		rc = bench__write_record(l->b);
	return rc;
}

/* Attempts a run ended since last seen (an answer can end one), as events. */
static void note_attempts(struct loop *l, struct slot *s)
{
	struct bench_run *br = &l->b->runs[s->idx];
	uint32_t best;

	if (s->r->attempts == s->seen)
		return;
	best = run_best(s->r);
	l->attempts += s->r->attempts - s->seen;
	s->seen = s->r->attempts;
	br->attempts = s->r->attempts;
	br->best = best == TREE_NONE ? NAN : tree_node(s->r->tree, best)->speedup;
	if (best == TREE_NONE)
		event(l, "run %s: attempt %u done, no correct candidate yet", br->run_id, s->seen);
	else
		event(l, "run %s: attempt %u done, best %.2fx", br->run_id, s->seen, br->best);
}

/* Steps a ready run until it waits or stops. */
static int step(struct loop *l, struct slot *s)
{
	enum run_wait w;
	int rc;

	note_attempts(l, s);
	rc = run_step(s->r, &w, l->err, l->errlen);
	if (rc)
		return rc;
	note_attempts(l, s);
	if (w == RUN_WAIT_DONE)
		return end_run(l, s);
	s->st = w == RUN_WAIT_LLM ? SLOT_WANT_LLM : SLOT_WANT_EVAL;
	s->queued = ++l->seq;
	return ST_OK;
}

/* ---- answers ---- */

static int llm_answer(struct loop *l, struct slot *s, struct llm_reply *reply)
{
	struct bench_run *br = &l->b->runs[s->idx];
	int rc;

	if (reply->fatal)
		halt(l, RUN_INTERRUPTED, false, "llm request %s of run %s failed: %s",
		     s->r->pend.key, s->r->id,
		     reply->error[0] ? reply->error : stark_strerror(reply->rc));
	rc = run_llm_reply(s->r, reply, l->err, l->errlen);
	if (rc)
		return rc;
	l->llm_calls++;
	for (int k = 0; k < ROLE_COUNT; k++)
		br->spend[k] = s->r->spend[k];
	s->st = SLOT_READY;
	return ST_OK;
}

static int eval_answer(struct loop *l, struct slot *s, int erc, struct proto_result *res)
{
	int rc;

	if (erc) { /* could not be run at all: the run stops as failed */
		s->r->halt = STOP_FAIL;
		snprintf(s->r->halt_why, sizeof(s->r->halt_why),
			 "internal error in attempt %u: the evaluation could not be run: %s",
			 s->r->cur.k, stark_strerror(erc));
		run_pending_clear(s->r);
		s->st = SLOT_READY;
		return ST_OK;
	}
	rc = run_eval_result(s->r, res, (double)(clock_mono_ns() - s->r->pend.t0) / 1e6, l->err,
			     l->errlen);
	l->evals++;
	s->st = SLOT_READY;
	return rc;
}

/* ---- sending ---- */

/* The waiting slot of kind st made first; NULL when none. */
static struct slot *oldest(struct loop *l, enum slot_state st)
{
	struct slot *best = NULL;

	for (size_t i = 0; i < l->nslot; i++)
		if (l->slot[i].st == st && (!best || l->slot[i].queued < best->queued))
			best = &l->slot[i];
	return best;
}

static int send_llm(struct loop *l)
{
	struct slot *s;
	int rc = ST_OK;

	while (!rc && !l->halting && l->llm_out < l->llm_max && (s = oldest(l, SLOT_WANT_LLM))) {
		struct llm_provider *p = llm_of(l, s);
		struct run_pending *pd = &s->r->pend;
		const char *role = search_role_name(pd->role);
		struct llm_reply now;
		double sofar = spent(l);

		if (l->cap > 0 && sofar + l->inflight_usd + pd->max_dollars > l->cap) {
			halt(l, RUN_INTERRUPTED, false,
			     "dollar cap reached ($%.4f spent, up to $%.4f in flight, next call up "
			     "to $%.4f, cap $%.4f)",
			     sofar, l->inflight_usd, pd->max_dollars, l->cap);
			break;
		}
		memset(&now, 0, sizeof(now));
		pd->rq.tag = (uint64_t)(s - l->slot) + 1;
		if (!p->submit || s->llm) { /* answered at once (replay) */
			rc = p->call(p, pd->key, role, &pd->rq, &now);
			rc = rc ? rc : 1;
		} else {
			rc = p->submit(p, pd->key, role, &pd->rq, &now);
		}
		if (rc == 1) {
			rc = llm_answer(l, s, &now);
			continue;
		}
		if (rc)
			break;
		s->st = SLOT_LLM;
		s->inflight_usd = pd->max_dollars;
		l->inflight_usd += pd->max_dollars;
		l->llm_out++;
	}
	return rc;
}

static int send_evals(struct loop *l)
{
	struct slot *s;
	int rc = ST_OK;

	while (!rc && !l->halting && (s = oldest(l, SLOT_WANT_EVAL))) {
		struct eval_provider *p = eval_of(l, s);

		if (!p->start || s->eval) { /* answered at once (replay) */
			struct proto_result res;
			int erc;

			proto_result_init(&res);
			erc = p->eval(p, &s->r->pend.job, &res);
			rc = eval_answer(l, s, erc, &res);
			proto_result_release(&res);
			continue;
		}
		rc = p->start(p, &s->r->pend.job, (uint64_t)(s - l->slot) + 1);
		if (rc == ST_EBUSY)
			return ST_OK;
		if (rc) { /* this evaluation cannot start: the run stops as failed */
			rc = eval_answer(l, s, rc, NULL);
			continue;
		}
		s->st = SLOT_EVAL;
		l->evals_out++;
	}
	return rc;
}

/* ---- waiting ---- */

static struct slot *slot_of(struct loop *l, uint64_t tag, enum slot_state st)
{
	if (!tag || tag > l->nslot || l->slot[tag - 1].st != st)
		return NULL;
	return &l->slot[tag - 1];
}

static int wait_llm(struct loop *l, int timeout_ms)
{
	struct llm_reply out[SCHED_REPLIES];
	int n = l->io->llm->poll(l->io->llm, timeout_ms, out, SCHED_REPLIES), rc = ST_OK;

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		struct slot *s = slot_of(l, out[i].tag, SLOT_LLM);

		if (!s || rc) {
			llm_reply_release(&out[i]);
			continue;
		}
		l->llm_out--;
		l->inflight_usd -= s->inflight_usd;
		s->inflight_usd = 0;
		rc = llm_answer(l, s, &out[i]);
	}
	return rc;
}

static int wait_evals(struct loop *l, int timeout_ms)
{
	struct eval_done out[16];
	int n = l->io->eval->poll(l->io->eval, timeout_ms, out, ST_ARRAY_LEN(out)), rc = ST_OK;

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		struct slot *s = slot_of(l, out[i].tag, SLOT_EVAL);

		if (s && !rc) {
			l->evals_out--;
			rc = eval_answer(l, s, out[i].rc, &out[i].res);
		}
		proto_result_release(&out[i].res);
	}
	return rc;
}

static void status(struct loop *l, bool force)
{
	char pool[160] = "", line[512];
	uint64_t now = clock_mono_ns();
	double el = (double)(now - l->t0) / 1e9, left = 0, eta = -1;
	size_t inflight = 0;
	double best = 0;

	if (!l->io->status || (!force && now - l->status_ns < SCHED_STATUS_NS))
		return;
	l->status_ns = now;
	for (size_t i = 0; i < l->nslot; i++)
		inflight += l->slot[i].st != SLOT_FREE;
	for (size_t i = 0; i < l->b->nruns; i++) {
		const struct bench_run *r = &l->b->runs[i];

		if (!r->done)
			left += l->b->cfg.budget > r->attempts ? l->b->cfg.budget - r->attempts : 0;
		if (isfinite(r->best) && r->best > best)
			best = r->best;
	}
	if (l->attempts)
		eta = el / (double)l->attempts * left;
	if (l->io->eval)
		eval_provider_pool_describe(l->io->eval, pool, sizeof(pool));
	snprintf(
	    line, sizeof(line),
	    "runs %llu done, %zu in flight, %zu waiting | %llu attempts | llm %u in flight%s | "
	    "evals %u in flight%s%s | best %.2fx | $%.4f | %.0f s%s",
	    (unsigned long long)l->done, inflight, l->b->nruns - l->next,
	    (unsigned long long)l->attempts, l->llm_out,
	    l->io->llm && l->io->llm->held_ms && l->io->llm->held_ms(l->io->llm) ? " (rate limited)"
										 : "",
	    l->evals_out, pool[0] ? " on " : "", pool, best, spent(l), el, "");
	if (eta >= 0)
		snprintf(line + strlen(line), sizeof(line) - strlen(line), ", ETA %.0f s", eta);
	l->io->status(l->io->arg, l->b, line);
}

/* Waits for an answer when no run is ready; false when nothing can come. */
static int wait_any(struct loop *l, bool *idle)
{
	bool llm = l->llm_out > 0, ev = l->evals_out > 0;
	int rc = ST_OK;

	*idle = !llm && !ev;
	if (llm)
		rc = wait_llm(l, ev ? 0 : SCHED_POLL_MS);
	if (!rc && ev)
		rc = wait_evals(l, llm ? 20 : SCHED_POLL_MS);
	return rc;
}

/* ---- the loop ---- */

static bool any(const struct loop *l, enum slot_state st)
{
	for (size_t i = 0; i < l->nslot; i++)
		if (l->slot[i].st == st)
			return true;
	return false;
}

static bool busy(const struct loop *l)
{
	return any(l, SLOT_READY) || any(l, SLOT_WANT_LLM) || any(l, SLOT_LLM) ||
	       any(l, SLOT_WANT_EVAL) || any(l, SLOT_EVAL);
}

static int turn(struct loop *l)
{
	bool idle;
	int rc = ST_OK;

	if (l->io->stop && *l->io->stop)
		halt(l, RUN_INTERRUPTED, true, "interrupted by a signal");
	for (size_t i = 0; !rc && !l->halting && i < l->nslot && l->next < l->b->nruns; i++) {
		if (l->slot[i].st != SLOT_FREE)
			continue;
		rc = start_run(l, &l->slot[i], l->next++);
		if (rc == 1) {
			rc = ST_OK;
			i--; /* the slot is still free */
		} else if (rc && l->halting) {
			rc = ST_OK;
		}
	}
	for (size_t i = 0; !rc && !l->hard && i < l->nslot; i++)
		if (l->slot[i].st == SLOT_READY)
			rc = step(l, &l->slot[i]);
	if (!rc && !l->hard)
		rc = send_llm(l);
	if (!rc && !l->hard)
		rc = send_evals(l);
	if (rc || l->hard || any(l, SLOT_READY))
		return rc;
	rc = wait_any(l, &idle);
	if (!rc && idle && l->halting)
		l->hard = true; /* nothing in flight to wait for */
	status(l, false);
	return rc;
}

/* Every run still in a slot is journaled interrupted; in-flight work dropped. */
static int drop_all(struct loop *l)
{
	int rc = ST_OK;

	if (l->io->eval && l->io->eval->cancel)
		l->io->eval->cancel(l->io->eval);
	for (size_t i = 0; i < l->nslot; i++) {
		struct slot *s = &l->slot[i];

		if (s->st == SLOT_FREE)
			continue;
		if (!rc)
			rc = run_interrupt(s->r, l->why[0] ? l->why : "the bench stopped", l->err,
					   l->errlen);
		if (!rc)
			rc = bench_summary_from(l->b, s->idx, s->r);
		slot_release(s);
	}
	return rc;
}

int bench_drive(struct bench *b, const struct bench_io *io, char *err, size_t errlen)
{
	struct loop l = {.b = b, .io = io, .err = err, .errlen = errlen};
	const json_t *o = json_object_get(b->spec, "options");
	int rc, rc2;

	err[0] = '\0';
	l.nslot = (size_t)jr_u64(o, "runs_in_flight", 1);
	l.llm_max = (unsigned)jr_u64(o, "llm_in_flight", 1);
	l.cap = jr_real(o, "max_dollars", 0);
	l.nslot = l.nslot ? l.nslot : 1;
	l.llm_max = l.llm_max ? l.llm_max : 1;
	l.slot = calloc(l.nslot, sizeof(*l.slot));
	if (!l.slot)
		return ST_ENOMEM;
	l.t0 = clock_mono_ns();
	rc = b->last_seq > 2 ? bench_set_state(b, RUN_RUNNING, "resumed") : ST_OK;
	while (!rc && !l.hard && (busy(&l) || (!l.halting && l.next < b->nruns)))
		rc = turn(&l);
	rc2 = drop_all(&l);
	rc = rc ? rc : rc2;
	status(&l, true);
	free(l.slot);
	if (!rc && l.halting)
		rc = bench_set_state(b, l.halt_state, l.why);
	else if (!rc)
		rc = bench_set_state(b, RUN_FINISHED, "every run finished");
	if (rc && !err[0])
		snprintf(err, errlen, "bench %s: cannot write the journal: %s", b->id,
			 stark_strerror(rc));
	return rc;
}
