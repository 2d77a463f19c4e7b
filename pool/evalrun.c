/*
 * evalrun.c -- one evaluator process, driven by poll: started, fed its
 * request, its output taken, its deadline kept, its end seen.
 *
 * The orchestrator's side of evaluator/evaluator.h: four pipes (request,
 * stdout, stderr, result), a sandboxed child, a loop that writes the request
 * without blocking, reads stdout/stderr into capped buffers and discards the
 * excess, feeds fd 3 to the framer (capped at EVALRUN_RESULT_MAX; a second
 * frame or trailing bytes are a protocol violation), and waits for the child
 * under a deadline.  What the process sent and how it ended become the
 * result in verdict.c.
 *
 * The child is either exec'd here (sandbox_spawn) or forked in its jail by
 * the evaluator's zygote (evalzyg.c): then the pipes go to the zygote with
 * the job, the end of the child is the monitor's report on a socket instead
 * of the sandbox's descriptor, and a kill is a byte on that socket.  Only
 * evalrun__kill_tree() and evalrun__reap() tell the two apart; everything
 * the verdicts are made from is the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "evaluator/evaluator.h"
#include "pool/pool_int.h"

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int make_pipes(int fds[P_COUNT][2])
{
	for (int i = 0; i < P_COUNT; i++)
		fds[i][0] = fds[i][1] = -1;
	for (int i = 0; i < P_COUNT; i++)
		if (pipe2(fds[i], O_CLOEXEC) < 0)
			return stark_error(ST_ESYS, "evalrun: pipe: %s", strerror(errno));
	return 0;
}

/*
 * The process's deadline: the request's wall time and the grace period,
 * and where the GPU is shared (the GPU lock passed) the request's queue
 * allowance (queue_ms, else the wall time again) for the evaluator's
 * queue on it.  The evaluator keeps its own deadline
 * at the request's wall time, moved on only by its waits in that queue
 * (the memory ledger, the GPU lock: stark_referee_lock.queued), so this
 * one is a backstop against a stuck evaluator, never reached by one that
 * keeps its clock.
 */
static uint64_t outer_wall_ms(const struct evalrun_opts *o, const struct proto_request *rq)
{
	uint64_t wall = rq->wall_ms;

	return wall + o->grace_ms + (o->lock_fd >= 0 ? (rq->queue_ms ? rq->queue_ms : wall) : 0);
}

uint32_t evalrun_queue_ms(uint32_t wall_ms, unsigned sharers)
{
	uint64_t q = (uint64_t)wall_ms * 2u * (sharers > 1 ? sharers - 1 : 0);

	return q > PROTO_TIME_MS_MAX ? PROTO_TIME_MS_MAX : (uint32_t)q;
}

/* The exec'd form: the evaluator binary, spawned in its jail here. */
static int start_exec(struct evalrun *er, const struct evalrun_opts *o,
		      const struct proto_request *rq, int p[P_COUNT][2])
{
	struct sandbox_config cfg;
	struct sandbox_fd map[P_COUNT + 1];
	char *argv[3];

	sandbox_config_init(&cfg, o->sandbox);
	map[P_IN] = (struct sandbox_fd){p[P_IN][0], EVAL_FD_REQUEST};
	map[P_OUT] = (struct sandbox_fd){p[P_OUT][1], 1};
	map[P_ERR] = (struct sandbox_fd){p[P_ERR][1], 2};
	map[P_RES] = (struct sandbox_fd){p[P_RES][1], EVAL_FD_RESULT};
	cfg.nfds = P_COUNT;
	if (o->lock_fd >= 0)
		map[cfg.nfds++] = (struct sandbox_fd){o->lock_fd, EVAL_FD_LOCK};
	cfg.fds = map;
	cfg.env = (const char *const *)er->env;
	cfg.binds = o->binds;
	cfg.nbinds = o->nbinds;
	cfg.gpu_index = o->gpu_index;
	if (o->mem_bytes)
		cfg.mem_bytes = o->mem_bytes;
	cfg.oom_grace_ms = o->oom_grace_ms;
	if (o->required)
		cfg.required = o->required;
	cfg.insecure = o->insecure;
	cfg.run_exec = o->sandbox == SANDBOX_RUN && proto_request_run_exec(rq);
	cfg.wall_ms = outer_wall_ms(o, rq);
	argv[0] = (char *)o->evaluator;
	argv[1] = o->sandbox == SANDBOX_RUN ? (char *)"--jailed" : NULL;
	argv[2] = NULL;
	return sandbox_spawn(&cfg, o->evaluator, argv, &er->child);
}

/* The job for the zygote: what start_exec() puts in the sandbox config. */
static int make_job(const struct evalrun_opts *o, const struct proto_request *rq,
		    struct eval_zjob *job)
{
	struct sandbox_config cfg;
	int rc;

	sandbox_config_init(&cfg, o->sandbox);
	if (o->required)
		cfg.required = o->required;
	cfg.insecure = o->insecure;
	/* Decided and reported here, once, as sandbox_spawn() would: the
	 * zygote's children are then asked only for what this machine has. */
	rc = sandbox_check_layers(&cfg);
	if (rc)
		return rc;
	memset(job, 0, sizeof(*job));
	job->magic = EVAL_ZMAGIC;
	job->version = EVAL_ZVERSION;
	job->stage = (uint32_t)o->sandbox;
	job->flags = (o->insecure ? EVAL_ZJOB_INSECURE : 0) |
		     (o->lock_fd >= 0 ? EVAL_ZJOB_LOCK : 0) |
		     (o->sandbox == SANDBOX_RUN ? EVAL_ZJOB_JAILED : 0) |
		     (o->sandbox == SANDBOX_RUN && proto_request_run_exec(rq) ? EVAL_ZJOB_EXEC : 0);
	job->gpu_index = o->gpu_index;
	/* (never 0, which the zygote would read as "the stage's default") */
	job->required = (cfg.required & sandbox_layers_available(o->sandbox)) | SANDBOX_L_FDS;
	job->mem_bytes = o->mem_bytes;
	job->oom_grace_ms = o->oom_grace_ms;
	job->wall_ms = outer_wall_ms(o, rq);
	job->owner_pid = (int32_t)getpid();
	if (o->nbinds > EVAL_ZBINDS)
		return stark_error(ST_EINVAL, "evalrun: %zu binds, the zygote takes %u", o->nbinds,
				   EVAL_ZBINDS);
	job->nbinds = (uint32_t)o->nbinds;
	for (size_t i = 0; i < o->nbinds; i++) {
		const struct sandbox_bind *b = &o->binds[i];

		if (!b->src || strlen(b->src) >= EVAL_ZPATH ||
		    (b->dst && strlen(b->dst) >= EVAL_ZPATH))
			return stark_error(ST_EINVAL, "evalrun: bind path too long for the zygote: %.100s",
					   b->src ? b->src : "(null)");
		snprintf(job->binds[i].src, EVAL_ZPATH, "%s", b->src);
		snprintf(job->binds[i].dst, EVAL_ZPATH, "%s", b->dst ? b->dst : "");
		job->binds[i].writable = b->writable;
	}
	return 0;
}

/*
 * Waits until the job's jail is entered: 0 (STARTED), 1 when the zygote
 * went away first (the caller may retry on a new one), or the spawn's
 * failure (its message printed, as sandbox_spawn() prints it).
 */
static int wait_started(struct evalrun *er)
{
	uint64_t until = clock_mono_ns() + EVALRUN_ZYGOTE_SPAWN_MS * 1000000ull;
	struct eval_zreport r;
	int rc;

	for (;;) {
		struct pollfd pf = {er->rep, POLLIN, 0};
		uint64_t now = clock_mono_ns();

		rc = evz_recv_report(er->rep, &r);
		if (rc == ST_EEOF && evz_lost(er->zyg, er->lost_why, sizeof(er->lost_why)))
			return 1;
		if (rc == ST_EEOF)
			return stark_error(ST_ESYS, "evalrun: %s", er->lost_why);
		if (rc == ST_EPROTO)
			return stark_error(ST_EPROTO, "evalrun: %s", r.why);
		if (rc == 1 && r.kind == EVAL_ZREP_STARTED) {
			er->layers = r.layers;
			er->si.fork_ns = r.fork_ns;
			er->si.jail_ns = r.jail_ns;
			return 0;
		}
		if (rc == 1) {
			if (r.why[0])
				stark_warn("%s", r.why);
			return r.spawn_rc < 0 ? r.spawn_rc : ST_EPROTO;
		}
		if (now >= until) {
			evz_mark_broken(er->zyg, true);
			return stark_error(ST_ETIMEDOUT, "evalrun: the evaluator's zygote did not start a job within %u s",
					   EVALRUN_ZYGOTE_SPAWN_MS / 1000);
		}
		if (poll(&pf, 1, (int)((until - now) / 1000000 + 1)) < 0 && errno != EINTR)
			return stark_error(ST_ESYS, "evalrun: poll: %s", strerror(errno));
	}
}

/* The zygote's form: the pipes go to it with the job; one retry on a
 * zygote that died under us. */
static int start_zygote(struct evalrun *er, const struct evalrun_opts *o,
			const struct proto_request *rq, int p[P_COUNT][2])
{
	struct eval_zjob job;
	int fds[EVAL_ZFD_COUNT], rs[2], rc;

	rc = make_job(o, rq, &job);
	for (int attempt = 0; !rc && attempt < 2; attempt++) {
		rc = evz_ensure(o->zygote);
		if (rc)
			return rc;
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rs) < 0)
			return stark_error(ST_ESYS, "evalrun: socketpair: %s", strerror(errno));
		fds[EVAL_ZFD_REQUEST] = p[P_IN][0];
		fds[EVAL_ZFD_STDOUT] = p[P_OUT][1];
		fds[EVAL_ZFD_STDERR] = p[P_ERR][1];
		fds[EVAL_ZFD_RESULT] = p[P_RES][1];
		fds[EVAL_ZFD_REPORT] = rs[1];
		fds[EVAL_ZFD_LOCK] = o->lock_fd;
		rc = evz_send(o->zygote, &job, fds, o->lock_fd >= 0 ? EVAL_ZFD_COUNT : EVAL_ZFD_LOCK);
		close(rs[1]);
		er->rep = rs[0];
		er->zyg = o->zygote;
		if (rc)
			snprintf(er->lost_why, sizeof(er->lost_why),
				 "the evaluator's zygote did not take the job");
		rc = rc ? 1 : wait_started(er);
		if (rc != 1)
			break;
		close(er->rep); /* the zygote died before the jail was entered */
		er->rep = -1;
		rc = 0;
	}
	if (rc == 0 && er->rep < 0)
		rc = stark_error(ST_ESYS, "evalrun: %s", er->lost_why);
	return rc;
}

/* The memory limit of the jail a stage runs in, in MiB, for the request's
 * host_mem_mib (the CPU's memory plan in the evaluator): the stage's limit,
 * or the sandbox's default for it; 0 where the stage is not jailed. */
static uint32_t host_mem_mib(const struct evalrun_opts *o)
{
	struct sandbox_config cfg;
	uint64_t b;

	if (o->sandbox == SANDBOX_NONE)
		return 0;
	sandbox_config_init(&cfg, o->sandbox);
	b = o->mem_bytes ? o->mem_bytes : cfg.mem_bytes;
	b >>= 20;
	return b > PROTO_HOST_MEM_MIB_MAX ? PROTO_HOST_MEM_MIB_MAX : (uint32_t)b;
}

int evalrun_start(const struct evalrun_opts *o, const struct proto_request *rq,
		  struct evalrun **out)
{
	struct proto_request q;
	int p[P_COUNT][2];
	struct evalrun *er;
	char err[256];
	int rc;

	*out = NULL;
	er = calloc(1, sizeof(*er));
	if (!er)
		return ST_ENOMEM;
	for (int i = 0; i < P_COUNT; i++)
		er->fd[i] = -1;
	er->rep = -1;
	dbuf_init(&er->req, PROTO_PREFIX_LEN + PROTO_FRAME_MAX);
	dbuf_init(&er->out, EVAL_OUTPUT_CAP);
	dbuf_init(&er->err, EVAL_OUTPUT_CAP);
	dbuf_init(&er->body, EVALRUN_RESULT_MAX);
	proto_framer_init(&er->framer, EVALRUN_RESULT_MAX);
	er->wall_ms = rq->wall_ms;
	er->id = str_dup(rq->id ? rq->id : "");
	er->env = evalrun_copy_env(o->env);
	if (!er->id || !er->env) {
		rc = ST_ENOMEM;
		goto out_free;
	}
	/* A shallow copy, read only by the encoder: the request as given, its
	 * host_mem_mib no larger than the jail's memory limit. */
	q = *rq;
	{
		uint32_t jail = host_mem_mib(o);

		if (jail && (!q.host_mem_mib || q.host_mem_mib > jail))
			q.host_mem_mib = jail;
	}
	rc = proto_request_check(&q, err, sizeof(err));
	if (!rc)
		rc = proto_request_encode(&q, &er->req);
	if (rc) {
		rc = stark_error(ST_EINVAL, "evalrun: request does not encode: %s",
				 rc == ST_ENOMEM ? "out of memory" : err);
		goto out_free;
	}
	rc = make_pipes(p);
	if (rc)
		goto out_pipes;

	snprintf(er->si.stage, sizeof(er->si.stage), "%s",
		 rq->stage == PROTO_STAGE_COMPILE ? "compile" :
		 rq->stage == PROTO_STAGE_RUN	  ? "run" :
						    "all");
	er->si.zygote = o->zygote != NULL;
	er->start_ns = clock_mono_ns();
	er->deadline_ns = er->start_ns + outer_wall_ms(o, rq) * 1000000ull;
	er->queued = o->lock_fd >= 0;
	rc = o->zygote ? start_zygote(er, o, rq, p) : start_exec(er, o, rq, p);
	if (rc)
		goto out_pipes;
	er->si.spawn_ns = clock_mono_ns() - er->start_ns;
	if (o->zygote) {
		struct evalrun_zygote_stats zs;

		evalrun_zygote_stats(o->zygote, &zs);
		er->si.zygote_pid = zs.pid;
		er->si.zygote_starts = zs.starts;
	}
	if (er->child)
		er->layers = sandbox_child_layers(er->child);
	er->fd[P_IN] = p[P_IN][1];
	er->fd[P_OUT] = p[P_OUT][0];
	er->fd[P_ERR] = p[P_ERR][0];
	er->fd[P_RES] = p[P_RES][0];
	p[P_IN][1] = p[P_OUT][0] = p[P_ERR][0] = p[P_RES][0] = -1;
	for (int i = 0; i < P_COUNT; i++) {
		int fl = fcntl(er->fd[i], F_GETFL);

		if (fl < 0 || fcntl(er->fd[i], F_SETFL, fl | O_NONBLOCK) < 0) {
			rc = stark_error(ST_ESYS, "evalrun: fcntl: %s", strerror(errno));
			goto out_pipes;
		}
	}
	rc = 0;
out_pipes:
	for (int i = 0; i < P_COUNT; i++) {
		close_fd(&p[i][0]);
		close_fd(&p[i][1]);
	}
	if (!rc) {
		*out = er;
		return 0;
	}
	close_fd(&er->rep); /* a job that never started: nothing to reap */
out_free:
	evalrun_free(er);
	return rc;
}

size_t evalrun_pollfds(const struct evalrun *er, struct pollfd *pfd, size_t max,
		       int *timeout_ms)
{
	size_t n = 0;
	uint64_t now = clock_mono_ns();

	if (timeout_ms)
		*timeout_ms = now >= er->deadline_ns ? 0 :
			      (int)((er->deadline_ns - now + 999999) / 1000000 > INT_MAX
					    ? INT_MAX
					    : (er->deadline_ns - now + 999999) / 1000000);
	if (er->ended)
		return 0;
	if (er->fd[P_IN] >= 0 && n < max)
		pfd[n++] = (struct pollfd){er->fd[P_IN], POLLOUT, 0};
	for (int i = P_OUT; i < P_COUNT; i++)
		if (er->fd[i] >= 0 && n < max)
			pfd[n++] = (struct pollfd){er->fd[i], POLLIN, 0};
	if (n < max && (er->child || er->rep >= 0))
		pfd[n++] = (struct pollfd){er->child ? sandbox_child_fd(er->child) : er->rep, POLLIN,
					   0};
	return n;
}

static void write_request(struct evalrun *er)
{
	while (er->fd[P_IN] >= 0 && er->req_off < er->req.len) {
		ssize_t w = write(er->fd[P_IN], er->req.p + er->req_off, er->req.len - er->req_off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w < 0) {
			close_fd(&er->fd[P_IN]); /* EPIPE: the evaluator is gone */
			return;
		}
		er->req_off += (size_t)w;
	}
	if (er->req_off == er->req.len)
		close_fd(&er->fd[P_IN]); /* EOF after the frame */
}

/* Feeds result-channel bytes to the framer; one frame, nothing after it. */
static void take_result_bytes(struct evalrun *er, const char *p, size_t n)
{
	while (n && !er->proto_err[0]) {
		const void *body;
		size_t len, used;
		int rc;

		if (er->have_frame) {
			snprintf(er->proto_err, sizeof(er->proto_err),
				 "bytes after the result frame on fd %d", EVAL_FD_RESULT);
			return;
		}
		rc = proto_framer_feed(&er->framer, p, n, &body, &len, &used);
		if (rc < 0) {
			snprintf(er->proto_err, sizeof(er->proto_err),
				 "result frame: %s (cap %u bytes)", stark_strerror(rc),
				 EVALRUN_RESULT_MAX);
			return;
		}
		p += used;
		n -= used;
		if (rc == 1) {
			if (dbuf_append(&er->body, body, len)) {
				snprintf(er->proto_err, sizeof(er->proto_err),
					 "result frame too large");
				return;
			}
			er->have_frame = true;
		}
	}
}

/* Reads what is available on one of our pipes; closes it at EOF. */
void evalrun__read_pipe(struct evalrun *er, int which)
{
	char buf[65536];

	for (;;) {
		ssize_t r = read(er->fd[which], buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			close_fd(&er->fd[which]);
			return;
		}
		if (which == P_OUT) {
			er->out_total += (uint64_t)r;
			dbuf_append_trunc(&er->out, buf, (size_t)r);
		} else if (which == P_ERR) {
			er->err_total += (uint64_t)r;
			dbuf_append_trunc(&er->err, buf, (size_t)r);
		} else {
			take_result_bytes(er, buf, (size_t)r);
		}
	}
}

/* The child is gone: take what the pipes still hold, then close them.
 * Descendants may keep a pipe open; we take only what is there now. */
static void drain_and_close(struct evalrun *er)
{
	for (int i = P_OUT; i < P_COUNT; i++)
		if (er->fd[i] >= 0)
			evalrun__read_pipe(er, i);
	for (int i = 0; i < P_COUNT; i++)
		close_fd(&er->fd[i]);
}

/* Asks for the whole tree to be killed: the sandbox's, or the monitor's. */
void evalrun__kill_tree(struct evalrun *er)
{
	char k = EVAL_ZKILL;

	if (er->child)
		sandbox_kill(er->child);
	else if (er->rep >= 0 && !er->kill_sent)
		er->kill_sent = send(er->rep, &k, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
}

/* The evaluation is lost with its zygote or monitor: say so, as a kill. */
static void lose(struct evalrun *er)
{
	er->zyg_lost = true;
	memset(&er->ex, 0, sizeof(er->ex));
	er->ex.how = SANDBOX_SIGNALED;
	er->ex.sig = SIGKILL;
	er->ex.syscall_nr = -1;
	snprintf(er->ex.why, sizeof(er->ex.why), "%s", er->lost_why);
}

/*
 * evalrun__reap() with a zygote: the monitor's ENDED report is the end.  Waiting
 * without a limit (timeout_ms < 0, always after a kill was asked) waits at
 * most EVALRUN_ZYGOTE_ANSWER_MS: a zygote that does not answer by then is
 * killed, which takes the evaluation's tree with it.
 */
static void reap_zygote(struct evalrun *er, int timeout_ms)
{
	uint64_t ms = timeout_ms < 0 ? EVALRUN_ZYGOTE_ANSWER_MS : (uint64_t)timeout_ms;
	uint64_t now = clock_mono_ns(), until = now + ms * 1000000ull;
	struct eval_zreport r;
	int rc;

	for (;;) {
		struct pollfd pf = {er->rep, POLLIN, 0};

		rc = evz_recv_report(er->rep, &r);
		if (rc == 1 && r.kind == EVAL_ZREP_ENDED) {
			memset(&er->ex, 0, sizeof(er->ex));
			er->ex.how = (enum sandbox_end)r.how;
			er->ex.code = r.code;
			er->ex.sig = r.sig;
			er->ex.syscall_nr = (long)r.syscall_nr;
			er->ex.wall_ns = r.wall_ns;
			snprintf(er->ex.why, sizeof(er->ex.why), "%s", r.why);
			break;
		}
		if (rc == ST_EEOF) {
			evz_lost(er->zyg, er->lost_why, sizeof(er->lost_why));
			lose(er);
			break;
		}
		if (rc != 0) { /* malformed, or a second STARTED: a broken zygote */
			snprintf(er->lost_why, sizeof(er->lost_why), "%s",
				 rc == 1 ? "the evaluator's zygote sent a report out of order" : r.why);
			evz_mark_broken(er->zyg, true);
			lose(er);
			break;
		}
		now = clock_mono_ns();
		if (now >= until && timeout_ms >= 0)
			return;
		if (now >= until) {
			snprintf(er->lost_why, sizeof(er->lost_why),
				 "the evaluator's zygote did not answer a kill within %u s",
				 EVALRUN_ZYGOTE_ANSWER_MS / 1000);
			evz_mark_broken(er->zyg, true);
			lose(er);
			break;
		}
		if (poll(&pf, 1, (int)((until - now + 999999) / 1000000)) < 0 && errno != EINTR) {
			evalrun__kill_tree(er);
			timeout_ms = -1;
		}
	}
	er->ended = true;
	close_fd(&er->rep);
	drain_and_close(er);
}

void evalrun__reap(struct evalrun *er, int timeout_ms)
{
	int rc;

	if (!er->child) {
		reap_zygote(er, timeout_ms);
		return;
	}
	rc = sandbox_wait(er->child, timeout_ms, &er->ex);

	if (rc == ST_ETIMEDOUT)
		return;
	if (rc) {
		/* Could not wait: make sure nothing survives, and say so. */
		sandbox_kill(er->child);
		memset(&er->ex, 0, sizeof(er->ex));
		er->ex.how = SANDBOX_SIGNALED;
		er->ex.sig = SIGKILL;
		snprintf(er->ex.why, sizeof(er->ex.why), "waiting for the evaluator failed: %s",
			 stark_strerror(rc));
		er->local_fail = true;
	}
	er->ended = true;
	drain_and_close(er);
}

int evalrun_poll(struct evalrun *er, int timeout_ms)
{
	struct pollfd pfd[EVALRUN_POLLFDS];
	int left, n;

	if (er->ended)
		return 1;
	n = (int)evalrun_pollfds(er, pfd, EVALRUN_POLLFDS, &left);
	if (timeout_ms < 0 || timeout_ms > left)
		timeout_ms = left;
	if (poll(pfd, (nfds_t)n, timeout_ms) < 0 && errno != EINTR) {
		stark_warn("evalrun: poll: %s", strerror(errno));
		evalrun_cancel(er);
		er->local_fail = true;
		return ST_ESYS;
	}
	if (er->fd[P_IN] >= 0)
		write_request(er);
	for (int i = P_OUT; i < P_COUNT; i++)
		if (er->fd[i] >= 0)
			evalrun__read_pipe(er, i);
	if (er->proto_err[0]) {
		/* The result channel is unusable: no point in waiting. */
		evalrun__kill_tree(er);
		evalrun__reap(er, -1);
		return 1;
	}
	if (clock_mono_ns() >= er->deadline_ns) {
		er->deadline_hit = true;
		evalrun__kill_tree(er);
		evalrun__reap(er, -1);
		return 1;
	}
	evalrun__reap(er, 0);
	/* A zygote's evaluation sends its result before it waits for its
	 * workers to end: the result is what we wait for. */
	if (!er->ended && er->have_frame && !er->child)
		return 1;
	return er->ended ? 1 : 0;
}

int evalrun_wait_gone(struct evalrun *er)
{
	if (!er->ended) {
		evalrun__kill_tree(er);
		evalrun__reap(er, -1);
	}
	if (!er->ended || er->zyg_lost || er->local_fail)
		return ST_ESYS;
	return 0;
}

void evalrun_cancel(struct evalrun *er)
{
	if (er->ended)
		return;
	er->canceled = true;
	evalrun__kill_tree(er);
	evalrun__reap(er, -1);
}

void evalrun_free(struct evalrun *er)
{
	if (!er)
		return;
	if (er->child) {
		if (!er->ended) {
			sandbox_kill(er->child);
			if (sandbox_wait(er->child, -1, &er->ex))
				stark_warn("evalrun: cannot reap the evaluator");
		}
		sandbox_child_free(er->child);
	} else if (er->rep >= 0 && !er->ended) {
		if (er->have_frame && !er->proto_err[0] && !er->kill_sent &&
		    evz_park(er->zyg, er->rep))
			er->rep = -1; /* its end is the zygote's to see */
		else {
			evalrun__kill_tree(er);
			evalrun__reap(er, -1);
		}
	}
	close_fd(&er->rep);
	for (int i = 0; i < P_COUNT; i++)
		close_fd(&er->fd[i]);
	dbuf_release(&er->req);
	dbuf_release(&er->out);
	dbuf_release(&er->err);
	dbuf_release(&er->body);
	proto_framer_release(&er->framer);
	free(er->id);
	evalrun_free_env(er->env);
	free(er);
}
