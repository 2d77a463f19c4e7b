/*
 * zygote.c -- `stark-eval --zygote`: one started interpreter, many jailed
 * evaluations forked from it.
 *
 * Every evaluation used to be a fresh stark-eval exec'd in a jail, paying
 * for the interpreter and `import torch` (seconds) each time, twice for a
 * split evaluation.  The zygote pays once: it starts the interpreter,
 * imports the harness and calls stark_referee.prewarm() -- never touching
 * CUDA, which does not survive fork -- and then serves jobs from the
 * orchestrator on its control socket (fd 0; the protocol is in
 * evaluator.h).
 *
 * For each job the zygote forks a monitor and goes back to its socket; it
 * never waits on one job, and reaps monitors as they end.  The monitor is
 * single-threaded (a fresh fork), which sandbox_spawn_fn() requires: it
 * builds the job's jail exactly as for an exec'd evaluator, and in it the
 * evaluation -- a fork of the zygote's memory, with the interpreter told it
 * was forked -- runs eval_serve_one() on fds 0-3 as stark-eval's main()
 * would.  The monitor watches the jail (sandbox_wait) and the report
 * socket, kills the tree when the orchestrator asks or goes away, and
 * reports how the evaluation ended.
 *
 * Trust: the zygote and its monitors are trusted code and never run
 * candidate code; they never see a request (the seed, the problem, the
 * candidate are read inside the jail).  What evaluations share is the
 * zygote's memory image as it was after start-up, copied on write: each
 * gets fresh namespaces, cgroup, scratch and processes.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "evaluator/evaluator.h"
#include "evaluator/evaluator_int.h"
#include "sandbox/sandbox.h"

#define ZYG_CTL		0    /* the control socket */
#define ZYG_MAX_MONITORS 256 /* evaluations in flight at once */
#define ZYG_REAP_MS	200  /* how often the idle zygote reaps monitors */

/* The zygote's start-up, as every evaluation it forks sees it. */
static struct {
	char exe[PATH_MAX]; /* our binary, shown read-only inside the jails */
	char init_err[1024]; /* why every evaluation must fail, or "" */
	pid_t pid;
	int monitors; /* forked, not yet reaped */
} Z;

struct zjob {
	struct eval_zjob msg;
	int fd[EVAL_ZFD_COUNT]; /* -1 where absent */
	uint64_t recv_ns;
};

/* What the jailed process needs of its job (the rest is the zygote's). */
struct entry_arg {
	bool jailed;
};

static void close_job(struct zjob *j)
{
	for (int i = 0; i < EVAL_ZFD_COUNT; i++)
		if (j->fd[i] >= 0)
			close(j->fd[i]);
	for (int i = 0; i < EVAL_ZFD_COUNT; i++)
		j->fd[i] = -1;
}

static void report_init(struct eval_zreport *r, uint32_t kind)
{
	memset(r, 0, sizeof(*r));
	r->magic = EVAL_ZMAGIC;
	r->version = EVAL_ZVERSION;
	r->kind = kind;
	r->syscall_nr = -1;
}

static void send_report(int fd, const struct eval_zreport *r)
{
	if (fd >= 0 && send(fd, r, sizeof(*r), MSG_NOSIGNAL) != (ssize_t)sizeof(*r))
		stark_warn("zygote: cannot send a report: %s", strerror(errno));
}

/* A job that cannot be run: one ENDED report, if there is where to send it. */
static void refuse(struct zjob *j, int rc, const char *why)
{
	struct eval_zreport r;

	report_init(&r, EVAL_ZREP_ENDED);
	r.spawn_rc = rc;
	snprintf(r.why, sizeof(r.why), "zygote: %s", why);
	send_report(j->fd[EVAL_ZFD_REPORT], &r);
	close_job(j);
}

/* ---- the jailed evaluation ------------------------------------------- */

/* Runs in the jail, in a copy of the zygote: what main() does after exec. */
static int entry(void *arg)
{
	const struct entry_arg *a = arg;
	struct evpy_opts o;

	evpy_after_fork_child();
	o.jailed = a->jailed;
	o.start_ns = clock_mono_ns(); /* the evaluation's clock starts here */
	return eval_serve_one(&o, Z.init_err[0] ? Z.init_err : NULL);
}

/* ---- the monitor ----------------------------------------------------- */

/* Turns a job into the jail's configuration; binds point into j. */
static void job_config(const struct zjob *j, struct sandbox_config *cfg,
		       struct sandbox_bind *binds, struct sandbox_fd *map)
{
	const struct eval_zjob *m = &j->msg;
	size_t n = 0;

	sandbox_config_init(cfg, (enum sandbox_stage)m->stage);
	map[n++] = (struct sandbox_fd){j->fd[EVAL_ZFD_REQUEST], EVAL_FD_REQUEST};
	map[n++] = (struct sandbox_fd){j->fd[EVAL_ZFD_STDOUT], 1};
	map[n++] = (struct sandbox_fd){j->fd[EVAL_ZFD_STDERR], 2};
	map[n++] = (struct sandbox_fd){j->fd[EVAL_ZFD_RESULT], EVAL_FD_RESULT};
	if (m->flags & EVAL_ZJOB_LOCK)
		map[n++] = (struct sandbox_fd){j->fd[EVAL_ZFD_LOCK], EVAL_FD_LOCK};
	cfg->fds = map;
	cfg->nfds = n;
	cfg->env = NULL; /* ours: the list the orchestrator started us with */
	for (uint32_t i = 0; i < m->nbinds; i++)
		binds[i] = (struct sandbox_bind){.src = m->binds[i].src,
						 .dst = m->binds[i].dst[0] ? m->binds[i].dst : NULL,
						 .writable = m->binds[i].writable != 0};
	cfg->binds = binds;
	cfg->nbinds = m->nbinds;
	cfg->gpu_index = m->gpu_index;
	if (m->mem_bytes)
		cfg->mem_bytes = m->mem_bytes;
	cfg->oom_grace_ms = m->oom_grace_ms;
	if (m->required)
		cfg->required = m->required;
	cfg->insecure = (m->flags & EVAL_ZJOB_INSECURE) != 0;
	cfg->run_exec = (m->flags & EVAL_ZJOB_EXEC) != 0;
	cfg->wall_ms = m->wall_ms;
	cfg->owner_pid = m->owner_pid;
}

/*
 * What the sandbox prints while it builds the jail (stark_error) goes to a
 * memfd on fd 2, so that it reaches the orchestrator in the report and is
 * printed there once, by stark, as for an exec'd evaluator.
 */
static int capture_begin(int *saved)
{
	int m = memfd_create("stark-zygote-err", MFD_CLOEXEC);

	*saved = fcntl(2, F_DUPFD_CLOEXEC, 3);
	if (m < 0 || *saved < 0 || dup2(m, 2) < 0) {
		if (m >= 0)
			close(m);
		if (*saved >= 0)
			close(*saved);
		*saved = -1;
		return -1;
	}
	close(m);
	return 0;
}

/* Restores fd 2; the last line captured, without our program's prefix,
 * goes to why; anything else captured is passed on to stderr. */
static void capture_end(int saved, char *why, size_t len)
{
	char buf[4096], *line;
	ssize_t n;

	if (saved < 0)
		return;
	n = pread(2, buf, sizeof(buf) - 1, 0);
	dup2(saved, 2);
	close(saved);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	line = strrchr(buf, '\n');
	line = line ? line + 1 : buf;
	if (line > buf)
		fprintf(stderr, "%.*s\n", (int)(line - buf - 1), buf);
	if (str_starts(line, EVAL_PROGRAM ": "))
		line += strlen(EVAL_PROGRAM ": ");
	snprintf(why, len, "%.*s", (int)(len - 1), line);
}

/* Waits for the end, killing the tree when the orchestrator asks or leaves. */
static void watch(struct sandbox_child *c, int rep, struct sandbox_exit *ex)
{
	bool peer = true;
	int rc;

	for (;;) {
		struct pollfd pf[2] = {{sandbox_child_fd(c), POLLIN, 0},
				       {peer ? rep : -1, POLLIN, 0}};
		char b;

		if (poll(pf, 2, 1000) < 0 && errno != EINTR)
			sandbox_kill(c);
		if (pf[1].revents) {
			ssize_t n = recv(rep, &b, 1, MSG_DONTWAIT);

			if (n == 1 && b == EVAL_ZKILL) {
				sandbox_kill(c);
			} else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
				sandbox_kill(c); /* the orchestrator is gone */
				peer = false;
			}
		}
		rc = sandbox_wait(c, 0, ex);
		if (rc == 0)
			return;
		if (rc != ST_ETIMEDOUT) {
			sandbox_kill(c);
			memset(ex, 0, sizeof(*ex));
			ex->how = SANDBOX_SIGNALED;
			ex->sig = SIGKILL;
			snprintf(ex->why, sizeof(ex->why), "waiting for the evaluator failed: %s",
				 stark_strerror(rc));
			return;
		}
	}
}

static ST_NORETURN void monitor(struct zjob *j)
{
	struct sandbox_config cfg;
	struct sandbox_bind binds[EVAL_ZBINDS];
	struct sandbox_fd map[EVAL_ZFD_COUNT];
	struct entry_arg arg = {.jailed = (j->msg.flags & EVAL_ZJOB_JAILED) != 0};
	struct sandbox_child *c = NULL;
	struct sandbox_exit ex;
	struct eval_zreport r;
	uint64_t t0;
	int rc, saved, rep = j->fd[EVAL_ZFD_REPORT];

	/* Die with the zygote (and so, through the jail's init, the tree). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != Z.pid)
		_exit(0);
	close(ZYG_CTL);
	report_init(&r, EVAL_ZREP_STARTED);
	t0 = clock_mono_ns();
	r.fork_ns = t0 - j->recv_ns;
	job_config(j, &cfg, binds, map);
	if (capture_begin(&saved) < 0)
		stark_warn("zygote: cannot capture the sandbox's messages: %s", strerror(errno));
	/* The jail's clone is a fork of an interpreter: Python's protocol. */
	evpy_before_fork();
	rc = sandbox_spawn_fn(&cfg, Z.exe, entry, &arg, &c);
	evpy_after_fork_parent();
	capture_end(saved, r.why, sizeof(r.why));
	r.jail_ns = clock_mono_ns() - t0;
	/* Only the jail holds the evaluation's pipes now: their readers see
	 * EOF when it ends, as with an exec'd evaluator. */
	for (int i = 0; i < EVAL_ZFD_COUNT; i++)
		if (i != EVAL_ZFD_REPORT && j->fd[i] >= 0)
			close(j->fd[i]);
	if (rc) {
		r.kind = EVAL_ZREP_ENDED;
		r.spawn_rc = rc;
		if (!r.why[0])
			snprintf(r.why, sizeof(r.why), "sandbox: %s", stark_strerror(rc));
		send_report(rep, &r);
		_exit(0);
	}
	r.why[0] = '\0';
	r.layers = sandbox_child_layers(c);
	send_report(rep, &r);

	watch(c, rep, &ex);
	r.kind = EVAL_ZREP_ENDED;
	r.how = (uint32_t)ex.how;
	r.code = ex.code;
	r.sig = ex.sig;
	r.syscall_nr = ex.syscall_nr;
	r.wall_ns = ex.wall_ns;
	snprintf(r.why, sizeof(r.why), "%s", ex.why);
	/* The jail's cgroup goes before the report, as an exec'd evaluator's
	 * goes before evalrun_free() returns: ended means gone. */
	sandbox_child_free(c);
	send_report(rep, &r);
	_exit(0);
}

/* ---- the zygote ------------------------------------------------------ */

static bool terminated(const char *s, size_t len)
{
	return memchr(s, '\0', len) != NULL;
}

/* Why a received job cannot be run, or NULL. */
static const char *check_job(const struct zjob *j, ssize_t n, int nfds)
{
	const struct eval_zjob *m = &j->msg;
	int want = EVAL_ZFD_LOCK + ((m->flags & EVAL_ZJOB_LOCK) ? 1 : 0);

	if (n != (ssize_t)sizeof(*m) || m->magic != EVAL_ZMAGIC || m->version != EVAL_ZVERSION)
		return "a message that is not a job of this version";
	if (nfds != want)
		return "a job with the wrong number of descriptors";
	if (m->stage > EVAL_ZSTAGE_RUN || m->nbinds > EVAL_ZBINDS || !m->wall_ms ||
	    (m->flags & ~(EVAL_ZJOB_INSECURE | EVAL_ZJOB_LOCK | EVAL_ZJOB_JAILED | EVAL_ZJOB_EXEC)))
		return "a job with a bad stage, flag, bind count or deadline";
	for (uint32_t i = 0; i < m->nbinds; i++)
		if (!terminated(m->binds[i].src, sizeof(m->binds[i].src)) ||
		    !terminated(m->binds[i].dst, sizeof(m->binds[i].dst)) ||
		    m->binds[i].src[0] != '/' || m->binds[i].writable > 1)
			return "a job with a bad bind";
	return NULL;
}

/*
 * Receives one job: 1, 0 at EOF (the orchestrator is done), -1 on an error
 * of the socket.  A malformed job is refused here (and counts as handled).
 */
static int recv_job(struct zjob *j)
{
	char cbuf[CMSG_SPACE(sizeof(int) * EVAL_ZFD_COUNT)];
	struct iovec iov = {.iov_base = &j->msg, .iov_len = sizeof(j->msg)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	const char *why;
	int nfds = 0;
	ssize_t n;

	memset(j, 0, sizeof(*j));
	for (int i = 0; i < EVAL_ZFD_COUNT; i++)
		j->fd[i] = -1;
	n = recvmsg(ZYG_CTL, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 2 : -1;
	j->recv_ns = clock_mono_ns();
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (nfds < EVAL_ZFD_COUNT)
				j->fd[nfds] = fd;
			else
				close(fd);
			nfds++;
		}
	}
	if (n == 0 && nfds == 0)
		return 0;
	why = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? "a truncated job" : check_job(j, n, nfds);
	if (why) {
		stark_warn("zygote: refused %s", why);
		refuse(j, ST_EPROTO, why); /* closes every descriptor received */
	}
	return 1;
}

static void reap_monitors(void)
{
	int st;

	while (Z.monitors > 0 && waitpid(-1, &st, WNOHANG) > 0)
		Z.monitors--;
}

static void serve_job(struct zjob *j)
{
	pid_t pid;

	if (Z.monitors >= ZYG_MAX_MONITORS) {
		refuse(j, ST_EBUSY, "too many evaluations in flight");
		return;
	}
	pid = evpy_fork();
	if (pid == 0)
		monitor(j);
	if (pid < 0)
		refuse(j, ST_ESYS, "cannot fork a monitor");
	else
		Z.monitors++;
	close_job(j);
}

/* Interpreter, harness, prewarm, the sandbox's probes: all before any fork. */
static void start_up(struct eval_zready *ready)
{
	struct evpy_opts o = {.jailed = false, .start_ns = clock_mono_ns()};
	char err[1024];
	uint64_t t0 = clock_mono_ns();
	ssize_t n;
	int rc;

	n = readlink("/proc/self/exe", Z.exe, sizeof(Z.exe) - 1);
	Z.exe[n > 0 ? n : 0] = '\0';
	rc = evpy_init(&o, err, sizeof(err));
	if (rc)
		snprintf(Z.init_err, sizeof(Z.init_err), "%s", err);
	ready->init_ns = clock_mono_ns() - t0;
	t0 = clock_mono_ns();
	rc = rc ? 0 : evpy_prewarm(err, sizeof(err));
	if (rc == ST_EDENIED)
		snprintf(Z.init_err, sizeof(Z.init_err), "%s", err);
	else if (rc)
		stark_warn("zygote: %s", err);
	ready->prewarm_ns = clock_mono_ns() - t0;
	/* Probed and compiled once here, inherited by every monitor. */
	(void)sandbox_layers_available(SANDBOX_COMPILE);
	(void)sandbox_layers_available(SANDBOX_RUN);
	snprintf(ready->note, sizeof(ready->note), "%.*s", (int)sizeof(ready->note) - 1, Z.init_err);
}

static uint32_t count_threads(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	unsigned t = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %u", &t) == 1)
			break;
	if (f)
		fclose(f);
	return t;
}

int eval_zygote_main(const char *cgroup_parent)
{
	struct eval_zready ready;
	int type = 0;
	socklen_t tl = sizeof(type);

	Z.pid = getpid();
	if (getsockopt(ZYG_CTL, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_SEQPACKET) {
		stark_warn("zygote: fd %d is not a SOCK_SEQPACKET socket", ZYG_CTL);
		return 3;
	}
	(void)fcntl(ZYG_CTL, F_SETFD, FD_CLOEXEC);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
		return 3; /* the orchestrator is gone already */
	if (cgroup_parent && sandbox_set_cgroup_parent(cgroup_parent)) {
		stark_warn("zygote: bad cgroup parent '%s'", cgroup_parent);
		return 3;
	}
	memset(&ready, 0, sizeof(ready));
	ready.magic = EVAL_ZMAGIC;
	ready.version = EVAL_ZVERSION;
	ready.pid = (int32_t)Z.pid;
	start_up(&ready);
	ready.threads = count_threads();
	fflush(NULL);
	if (send(ZYG_CTL, &ready, sizeof(ready), MSG_NOSIGNAL) != (ssize_t)sizeof(ready))
		return 3;
	for (;;) {
		struct pollfd pf = {ZYG_CTL, POLLIN, 0};
		struct zjob j;
		int rc;

		reap_monitors();
		if (poll(&pf, 1, ZYG_REAP_MS) < 0 && errno != EINTR)
			return 3;
		if (!pf.revents)
			continue;
		rc = recv_job(&j);
		if (rc == 0)
			return 0; /* the orchestrator closed: our monitors die with us */
		if (rc < 0) {
			stark_warn("zygote: control socket: %s", strerror(errno));
			return 3;
		}
		if (rc == 1 && j.fd[EVAL_ZFD_REPORT] >= 0)
			serve_job(&j);
	}
}
