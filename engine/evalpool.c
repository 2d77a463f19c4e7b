/*
 * evalpool.c -- real evaluations through one pool of slots, for a bench:
 * several devices ("cpu", "cuda:N"), several evaluations in flight on
 * each, one zygote for all, polled together without blocking.
 *
 * Each evaluation is `stark-eval` exactly as eval_real.c runs it (the
 * same request, jails and build cache: evalrun_pair in EVALRUN_AUTO
 * mode); only where it runs is chosen here.  A job goes to the live
 * device with the fewest evaluations in flight (the first on a tie), so
 * builds overlap on the host's cores while each device's slots share its
 * lock (pool/pool.h: one timing at a time on a GPU; the referee takes the
 * lock's exclusive side for its timing phase on the CPU as well, so two
 * CPU timings never overlap either).
 *
 * A device that fails: an evaluation that ends in `error` could not be
 * done, which may be the device (a lost GPU, a poisoned context) or the
 * machine (a missing compiler).  While another device is alive, the job
 * is sent there instead of being reported; if it is judged there, the
 * first device counts a failure, and EVAL_DEVICE_DEATHS of them in a row
 * take it out of the pool (said once on stderr, with its last message).
 * A job that ends in `error` on every device it tried is reported as
 * such: the run pauses on it (engine.h), which is right for a broken
 * machine.  Nothing here is journaled: the run journals the result the
 * pool reports, wherever it ran.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evaluator/evaluator.h"
#include "pool/pool.h"
#include "engine/engine_int.h"

#define POOL_SLOTS_MAX 256

struct pool_dev {
	char name[32];
	int lock_fd; /* shared by the device's slots; -1 for one slot on the CPU */
	unsigned busy;
	unsigned failures; /* errors in a row that another device then judged */
	bool dead;
	char last[200];
};

struct pool_job {
	bool used;
	uint64_t tag;
	int dev;
	uint32_t tried; /* devices tried (bit mask) */
	struct proto_request rq;
	struct evalrun_opts copts, ropts;
	struct evalrun_binds binds;
	struct evalrun_pair *pair;
	int first_dev;	 /* the first device that failed it, or -1 */
	char first[200]; /* and how */
	bool insecure;
};

struct eval_pool {
	struct eval_provider base;
	char evaluator[PATH_MAX];
	char cache[PATH_MAX];
	struct evalrun_zygote *zygote;
	bool no_zygote;
	struct pool_dev dev[EVAL_DEVICES_MAX];
	size_t ndev;
	unsigned per_device;
	struct pool_job *jobs; /* base.slots of them */
};

/* The live device with the fewest in flight that the job has not tried; -1 if none. */
static int pick_device(const struct eval_pool *e, uint32_t tried, bool need_slot)
{
	int best = -1;

	for (size_t i = 0; i < e->ndev; i++) {
		const struct pool_dev *d = &e->dev[i];

		if (d->dead || (tried & (1u << i)) || (need_slot && d->busy >= e->per_device))
			continue;
		if (best < 0 || d->busy < e->dev[best].busy)
			best = (int)i;
	}
	return best;
}

/* Starts (or restarts elsewhere) job j on device dev. */
static int launch(struct eval_pool *e, struct pool_job *j, int dev, bool insecure)
{
	struct pool_dev *d = &e->dev[dev];
	int rc;

	free(j->rq.device);
	j->rq.device = str_dup(d->name);
	if (!j->rq.device)
		return ST_ENOMEM;
	evalrun_opts_init(&j->copts);
	evalrun_opts_init(&j->ropts);
	j->copts.evaluator = j->ropts.evaluator = e->evaluator;
	j->ropts.mem_bytes = evalrun_run_mem_default(e->base.slots);
	evalrun_jail_opts(&j->copts, &j->ropts, e->cache, d->name, insecure, &j->binds);
	j->copts.zygote = j->ropts.zygote = eval__zygote(e->evaluator, &e->zygote, &e->no_zygote);
	j->ropts.lock_fd = d->lock_fd;
	j->rq.queue_ms = evalrun_queue_ms(j->rq.wall_ms, e->per_device);
	rc = evalrun_pair_start(&j->copts, &j->ropts, &j->rq, EVALRUN_AUTO, &j->pair);
	if (rc) {
		stark_warn("evaluation %s: cannot start %s on %s: %s", j->rq.id, e->evaluator,
			   d->name, stark_strerror(rc));
		return rc;
	}
	j->dev = dev;
	j->tried |= 1u << dev;
	d->busy++;
	e->base.busy++;
	return ST_OK;
}

static void job_clear(struct pool_job *j)
{
	evalrun_pair_free(j->pair);
	proto_request_release(&j->rq);
	memset(j, 0, sizeof(*j));
	j->first_dev = -1;
}

/* Remembers the first device that failed job j, and how. */
static void note_failure(struct pool_job *j, const char *how)
{
	if (j->first_dev >= 0)
		return;
	j->first_dev = j->dev;
	snprintf(j->first, sizeof(j->first), "%s", how && how[0] ? how : "no message");
}

/*
 * Starts j on the live device with the fewest in flight that it has not
 * tried (need_slot: one with a free slot), trying the next where the
 * evaluator cannot start.  0, ST_EBUSY (no device with a free slot), or
 * the last start's code when every device refused.
 */
static int launch_somewhere(struct eval_pool *e, struct pool_job *j, bool need_slot)
{
	int rc = ST_EBUSY, dev;

	while ((dev = pick_device(e, j->tried, need_slot)) >= 0) {
		char how[200];

		rc = launch(e, j, dev, j->insecure);
		if (!rc || rc == ST_EBUSY) /* busy is no failure: the job waits */
			return rc;
		j->tried |= 1u << dev;
		j->dev = dev;
		snprintf(how, sizeof(how), "the evaluator could not start there: %s",
			 stark_strerror(rc));
		note_failure(j, how);
	}
	return rc;
}

static int pool_start(struct eval_provider *p, const struct eval_job *job, uint64_t tag)
{
	struct eval_pool *e = (struct eval_pool *)p;
	struct pool_job *j = NULL;
	int rc;

	if (pick_device(e, 0, true) < 0)
		return ST_EBUSY;
	for (unsigned i = 0; i < p->slots && !j; i++)
		if (!e->jobs[i].used)
			j = &e->jobs[i];
	if (!j)
		return ST_EBUSY;
	memset(j, 0, sizeof(*j));
	j->first_dev = -1;
	proto_request_init(&j->rq);
	j->used = true;
	j->tag = tag;
	j->insecure = job->insecure;
	rc = eval__request(job, NULL, e->cache, &j->rq);
	if (!rc)
		rc = launch_somewhere(e, j, true);
	if (rc == ST_EBUSY && j->first_dev >= 0)
		rc = launch_somewhere(e, j, false); /* every free slot refused: any device */
	if (rc)
		job_clear(j);
	return rc;
}

/* A job judged on another device than the first that failed it. */
static void count_failure(struct eval_pool *e, struct pool_job *j)
{
	struct pool_dev *d = &e->dev[j->first_dev];

	d->failures++;
	snprintf(d->last, sizeof(d->last), "%s", j->first);
	if (d->failures < EVAL_DEVICE_DEATHS || d->dead)
		return;
	d->dead = true;
	stark_warn("device %s taken out of the evaluation pool: %u evaluations in a row failed "
		   "there (`error`) and were then judged on another device (last: %s)",
		   d->name, d->failures, d->last);
}

/* A finished pair: reported into *out (returns 1), or sent elsewhere (0). */
static int job_done(struct eval_pool *e, struct pool_job *j, struct eval_done *out)
{
	struct pool_dev *d = &e->dev[j->dev];
	struct proto_result rs;
	int rc;

	d->busy--;
	e->base.busy--;
	proto_result_init(&rs);
	rc = evalrun_pair_finish(j->pair, &rs, NULL);
	if (!rc && rs.status == PROTO_ST_ERROR) {
		note_failure(j, rs.message);
		evalrun_pair_free(j->pair);
		j->pair = NULL;
		if (!launch_somewhere(e, j, false)) {
			proto_result_release(&rs);
			return 0;
		}
	}
	if (!rc && rs.status != PROTO_ST_ERROR) {
		d->failures = 0;
		if (j->first_dev >= 0 && j->first_dev != j->dev)
			count_failure(e, j);
	}
	memset(out, 0, sizeof(*out));
	out->tag = j->tag;
	out->rc = rc;
	snprintf(out->device, sizeof(out->device), "%s", d->name);
	out->res = rs;
	job_clear(j);
	return 1;
}

static int pool_poll(struct eval_provider *p, int timeout_ms, struct eval_done *out, size_t n)
{
	struct eval_pool *e = (struct eval_pool *)p;
	struct pollfd pfd[POOL_SLOTS_MAX * EVALRUN_POLLFDS];
	size_t npfd = 0, got = 0;

	for (unsigned i = 0; i < p->slots; i++) {
		int t = -1;

		if (!e->jobs[i].used || !e->jobs[i].pair)
			continue;
		npfd +=
		    evalrun_pair_pollfds(e->jobs[i].pair, pfd + npfd, ST_ARRAY_LEN(pfd) - npfd, &t);
		if (t >= 0 && (timeout_ms < 0 || t < timeout_ms))
			timeout_ms = t;
	}
	if (!p->busy)
		return 0;
	if (poll(pfd, (nfds_t)npfd, timeout_ms) < 0 && errno != EINTR)
		stark_warn("evaluation pool: poll: %s", strerror(errno));
	for (unsigned i = 0; i < p->slots && got < n; i++) {
		struct pool_job *j = &e->jobs[i];
		int prc;

		if (!j->used || !j->pair)
			continue;
		prc = evalrun_pair_poll(j->pair, 0);
		if (prc != 0) /* a run stage that could not start still ends in a result */
			got += (size_t)job_done(e, j, &out[got]);
	}
	return (int)got;
}

static void pool_cancel(struct eval_provider *p)
{
	struct eval_pool *e = (struct eval_pool *)p;

	for (unsigned i = 0; i < p->slots; i++) {
		if (!e->jobs[i].used)
			continue;
		if (e->jobs[i].pair)
			evalrun_pair_cancel(e->jobs[i].pair);
		job_clear(&e->jobs[i]);
	}
	for (size_t i = 0; i < e->ndev; i++)
		e->dev[i].busy = 0;
	p->busy = 0;
}

/* The blocking form, for a pool used by one run. */
static int pool_eval(struct eval_provider *p, const struct eval_job *job, struct proto_result *out)
{
	struct eval_done d;
	int rc = pool_start(p, job, 1), n = 0;

	while (!rc && !n) {
		if (p->stop && *p->stop) {
			pool_cancel(p);
			return ST_ECANCELED;
		}
		n = pool_poll(p, 200, &d, 1);
		if (n < 0)
			rc = n;
	}
	if (rc)
		return rc;
	if (d.rc) {
		proto_result_release(&d.res);
		return d.rc;
	}
	proto_result_release(out);
	*out = d.res;
	return ST_OK;
}

static void pool_free(struct eval_provider *p)
{
	struct eval_pool *e = (struct eval_pool *)p;

	pool_cancel(p);
	evalrun_zygote_free(e->zygote);
	for (size_t i = 0; i < e->ndev; i++)
		if (e->dev[i].lock_fd >= 0)
			close(e->dev[i].lock_fd);
	free(e->jobs);
	free(e);
}

void eval_provider_pool_describe(const struct eval_provider *p, char *buf, size_t len)
{
	const struct eval_pool *e = (const struct eval_pool *)p;
	size_t off = 0;

	buf[0] = '\0';
	if (!p || p->eval != pool_eval) {
		snprintf(buf, len, "%s", p ? p->name : "none");
		return;
	}
	for (size_t i = 0; i < e->ndev && off < len; i++) {
		int k =
		    snprintf(buf + off, len - off, "%s%s %u/%u%s", i ? ", " : "", e->dev[i].name,
			     e->dev[i].busy, e->per_device, e->dev[i].dead ? " (out)" : "");
		if (k < 0)
			break;
		off += (size_t)k;
	}
}

int eval_provider_pool(const char *evaluator, const char *const *devices, size_t ndev,
		       unsigned per_device, struct eval_provider **out)
{
	struct eval_pool *e;
	char err[512];
	int rc = ST_OK;

	*out = NULL;
	if (!ndev || ndev > EVAL_DEVICES_MAX || !per_device || ndev * per_device > POOL_SLOTS_MAX)
		return ST_EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return ST_ENOMEM;
	for (size_t i = 0; i < EVAL_DEVICES_MAX; i++)
		e->dev[i].lock_fd = -1;
	snprintf(e->evaluator, sizeof(e->evaluator), "%s", evaluator);
	if (access(e->evaluator, X_OK) < 0) {
		stark_warn("the evaluator '%s' is not there (build it, or set STARK_EVALUATOR)",
			   e->evaluator);
		rc = ST_ENOENT;
		goto out_fail;
	}
	if (evalrun_default_cache(e->cache, sizeof(e->cache), err, sizeof(err))) {
		stark_warn("%s", err);
		rc = ST_EIO;
		goto out_fail;
	}
	e->ndev = ndev;
	e->per_device = per_device;
	for (size_t i = 0; i < ndev; i++) {
		snprintf(e->dev[i].name, sizeof(e->dev[i].name), "%s", devices[i]);
		/* the referee times under the lock on any device: on the CPU
		 * too, two timings never run at once */
		if (!str_starts(devices[i], "cuda") && per_device < 2)
			continue;
		/* a GPU's lock is the machine's (other stark processes on it
		 * queue there too); a CPU's, this pool's own */
		e->dev[i].lock_fd = evalrun_gpu_lock_open(
			NULL, str_starts(devices[i], "cuda") ? devices[i] : NULL, err, sizeof(err));
		if (e->dev[i].lock_fd < 0) {
			stark_warn("%s", err);
			rc = ST_ESYS;
			goto out_fail;
		}
	}
	e->base.slots = (unsigned)(ndev * per_device);
	e->jobs = calloc(e->base.slots, sizeof(*e->jobs));
	if (!e->jobs) {
		rc = ST_ENOMEM;
		goto out_fail;
	}
	e->base.eval = pool_eval;
	e->base.start = pool_start;
	e->base.poll = pool_poll;
	e->base.cancel = pool_cancel;
	e->base.free = pool_free;
	e->base.name = "stark-eval";
	*out = &e->base;
	return ST_OK;
out_fail:
	for (size_t i = 0; i < EVAL_DEVICES_MAX; i++)
		if (e->dev[i].lock_fd >= 0)
			close(e->dev[i].lock_fd);
	free(e->jobs);
	free(e);
	return rc;
}
