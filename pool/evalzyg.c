/*
 * evalzyg.c -- the orchestrator's side of the evaluator's zygote
 * (evaluator.h): starting `stark-eval --zygote`, sending it jobs, reading
 * its reports, and noticing when it dies.
 *
 * The zygote runs outside any jail (it is trusted code that never runs
 * candidate code nor reads a request), started like an unjailed evaluator:
 * descriptors closed, its environment exactly the evaluator's list, our
 * death its death (the sandbox's PDEATHSIG), and, down the tree, its
 * monitors' and their jails'.  Every message from it is fixed-size and
 * checked here before use.  A zygote that dies, or stops answering, is
 * marked broken and restarted by the next evalrun_start(); the evaluations
 * it had in flight end as "error" (evalrun.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/common.h"
#include "evaluator/evaluator.h"
#include "pool/pool.h"
#include "pool/pool_int.h"
#include "sandbox/sandbox.h"

struct evalrun_zygote {
	char *evaluator;
	char **env;		     /* owned copy */
	struct sandbox_child *child; /* NULL while not running */
	int ctl;		     /* our end of the control socket, -1 */
	bool broken;
	struct evalrun_zygote_stats stats;
	/* Report sockets of evaluations whose result came before their end
	 * (evz_park): the jail is still tearing down; its ENDED report, or
	 * the socket's close, is the end. */
	int ending[EVZ_ENDING_MAX];
	unsigned nending;
};

bool evalrun_zygote_wanted(void)
{
	const char *v = getenv("STARK_ZYGOTE");

	return !v || strcmp(v, "0") != 0;
}

/* Kills the zygote (and so its monitors and their jails) and reaps it. */
static void stop(struct evalrun_zygote *z)
{
	for (unsigned i = 0; i < z->nending; i++)
		close(z->ending[i]);
	z->nending = 0;
	if (z->ctl >= 0)
		close(z->ctl);
	z->ctl = -1;
	if (z->child) {
		sandbox_kill(z->child);
		sandbox_child_free(z->child);
	}
	z->child = NULL;
	z->stats.pid = 0;
}

void evalrun_zygote_free(struct evalrun_zygote *z)
{
	if (!z)
		return;
	/* Jails still ending finish their own teardown first. */
	(void)evalrun_zygote_settle(z, EVALRUN_ZYGOTE_ANSWER_MS);
	stop(z);
	free(z->evaluator);
	evalrun_free_env(z->env);
	free(z);
}

void evalrun_zygote_stats(const struct evalrun_zygote *z, struct evalrun_zygote_stats *out)
{
	*out = z->stats;
}

void evz_mark_broken(struct evalrun_zygote *z, bool kill_now)
{
	z->broken = true;
	if (kill_now && z->child) {
		stark_warn("evalrun: the evaluator's zygote (pid %d) stopped answering; killed it",
			   (int)z->stats.pid);
		stop(z);
	}
}

/* Waits for the ready message: 0, or ST_E* with a message printed. */
static int wait_ready(struct evalrun_zygote *z)
{
	uint64_t until = clock_mono_ns() + EVALRUN_ZYGOTE_READY_MS * 1000000ull;
	struct eval_zready r;
	ssize_t n;

	for (;;) {
		struct pollfd pf[2] = {{z->ctl, POLLIN, 0}, {sandbox_child_fd(z->child), POLLIN, 0}};
		uint64_t now = clock_mono_ns();
		struct sandbox_exit ex;

		if (now >= until)
			return stark_error(ST_ETIMEDOUT, "evalrun: the evaluator's zygote was not ready after %u s",
					   EVALRUN_ZYGOTE_READY_MS / 1000);
		if (poll(pf, 2, (int)((until - now) / 1000000 + 1)) < 0 && errno != EINTR)
			return stark_error(ST_ESYS, "evalrun: poll: %s", strerror(errno));
		if (pf[0].revents)
			break;
		if (pf[1].revents && sandbox_wait(z->child, 0, &ex) == 0)
			return stark_error(ST_ESYS, "evalrun: the evaluator's zygote ended before it was ready: %s",
					   ex.why);
	}
	n = recv(z->ctl, &r, sizeof(r), MSG_DONTWAIT | MSG_TRUNC);
	if (n == 0)
		return stark_error(ST_ESYS, "evalrun: the evaluator's zygote closed its socket before it was ready (its stderr says why)");
	if (n != (ssize_t)sizeof(r) || r.magic != EVAL_ZMAGIC || r.version != EVAL_ZVERSION ||
	    r.pid != (int32_t)sandbox_child_pid(z->child) || !memchr(r.note, '\0', sizeof(r.note)))
		return stark_error(ST_EPROTO, "evalrun: the evaluator's zygote sent a malformed ready message");
	z->stats.init_ns = r.init_ns;
	z->stats.prewarm_ns = r.prewarm_ns;
	if (r.note[0])
		stark_warn("evalrun: the evaluator's zygote cannot evaluate: %s", r.note);
	/* torch's import leaves thread pools behind (17 threads on the H100
	 * machine): harmless, each job starts in a fork(), which is
	 * single-threaded, and only that fork clones the jail. */
	z->stats.threads = r.threads;
	return 0;
}

/* Starts the zygote process; 0 or ST_E* (message printed). */
static int start(struct evalrun_zygote *z)
{
	struct sandbox_config cfg;
	struct sandbox_fd map[3];
	const char *cgparent = sandbox_cgroup_parent(); /* probes before the fork */
	char *argv[5] = {z->evaluator, (char *)"--zygote", NULL, NULL, NULL};
	uint64_t t0 = clock_mono_ns();
	int sv[2] = {-1, -1}, nul = -1, rc;

	(void)sandbox_layers_available(SANDBOX_RUN);
	if (cgparent) {
		argv[2] = (char *)"--cgroup-parent";
		argv[3] = (char *)cgparent;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
	    (nul = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
		rc = stark_error(ST_ESYS, "evalrun: zygote socket: %s", strerror(errno));
		goto out_close;
	}
	sandbox_config_init(&cfg, SANDBOX_NONE);
	map[0] = (struct sandbox_fd){sv[1], 0};
	map[1] = (struct sandbox_fd){nul, 1};
	map[2] = (struct sandbox_fd){2, 2}; /* its messages are ours */
	cfg.fds = map;
	cfg.nfds = 3;
	cfg.env = (const char *const *)z->env;
	cfg.wall_ms = 0;
	rc = sandbox_spawn(&cfg, z->evaluator, argv, &z->child);
	if (rc) {
		stark_warn("evalrun: cannot start the evaluator's zygote %s: %s", z->evaluator,
			   stark_strerror(rc));
		goto out_close;
	}
	z->ctl = sv[0];
	sv[0] = -1;
	z->stats.pid = sandbox_child_pid(z->child);
	z->stats.starts++;
	rc = wait_ready(z);
	if (rc) {
		stop(z);
		goto out_close;
	}
	z->stats.start_ns = clock_mono_ns() - t0;
	z->broken = false;
out_close:
	for (int i = 0; i < 2; i++)
		if (sv[i] >= 0)
			close(sv[i]);
	if (nul >= 0)
		close(nul);
	return rc;
}

int evalrun_zygote_start(const char *evaluator, const char *const *env,
			 struct evalrun_zygote **out)
{
	struct evalrun_zygote *z = calloc(1, sizeof(*z));
	int rc;

	*out = NULL;
	if (!z)
		return ST_ENOMEM;
	z->ctl = -1;
	z->evaluator = str_dup(evaluator);
	z->env = evalrun_copy_env(env);
	if (!z->evaluator || !z->env) {
		evalrun_zygote_free(z);
		return ST_ENOMEM;
	}
	rc = start(z);
	if (rc) {
		evalrun_zygote_free(z);
		return rc;
	}
	*out = z;
	return 0;
}

/* Whether the zygote process has ended; its account into ex. */
static bool ended(struct evalrun_zygote *z, struct sandbox_exit *ex)
{
	return !z->child || sandbox_wait(z->child, 0, ex) == 0;
}

int evz_ensure(struct evalrun_zygote *z)
{
	struct sandbox_exit ex;
	bool dead = ended(z, &ex);

	(void)evalrun_zygote_settle(z, 0);
	if (!z->broken && !dead)
		return 0;
	if (z->child && dead)
		stark_warn("evalrun: the evaluator's zygote (pid %d) ended (%s); starting another",
			   (int)z->stats.pid, ex.why);
	else if (z->child)
		stark_warn("evalrun: the evaluator's zygote (pid %d) stopped answering; starting another",
			   (int)z->stats.pid);
	stop(z);
	/* Groups its killed monitors could not remove. */
	sandbox_cgroup_sweep();
	return start(z);
}

int evz_send(struct evalrun_zygote *z, const struct eval_zjob *job, const int *fds, int n)
{
	char cbuf[CMSG_SPACE(sizeof(int) * EVAL_ZFD_COUNT)];
	struct iovec iov = {.iov_base = (void *)job, .iov_len = sizeof(*job)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n)};
	struct cmsghdr *cm;
	struct pollfd pf = {z->ctl, POLLOUT, 0};

	if (n < 1 || n > EVAL_ZFD_COUNT || z->ctl < 0)
		return ST_EINVAL;
	memset(cbuf, 0, sizeof(cbuf));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)n);
	for (;;) {
		ssize_t w = sendmsg(z->ctl, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w == (ssize_t)sizeof(*job))
			return 0;
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN &&
		    poll(&pf, 1, (int)EVALRUN_ZYGOTE_ANSWER_MS) > 0)
			continue;
		evz_mark_broken(z, false);
		return stark_error(ST_ESYS, "evalrun: cannot send a job to the evaluator's zygote: %s",
				   w < 0 && errno != EAGAIN ? strerror(errno) : "it does not read");
	}
}

int evz_recv_report(int fd, struct eval_zreport *r)
{
	ssize_t n;

	do
		n = recv(fd, r, sizeof(*r), MSG_DONTWAIT | MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n == 0 || (n < 0 && errno == ECONNRESET))
		return ST_EEOF;
	if (n != (ssize_t)sizeof(*r) || r->magic != EVAL_ZMAGIC || r->version != EVAL_ZVERSION ||
	    (r->kind != EVAL_ZREP_STARTED && r->kind != EVAL_ZREP_ENDED) ||
	    r->spawn_rc > 0 || r->spawn_rc < -64 || (r->layers & ~SANDBOX_L_ALL) ||
	    r->how > SANDBOX_CPU || !memchr(r->why, '\0', sizeof(r->why))) {
		memset(r, 0, sizeof(*r));
		snprintf(r->why, sizeof(r->why), "the evaluator's zygote sent a malformed report (%zd bytes)",
			 n);
		return ST_EPROTO;
	}
	return 1;
}

bool evz_lost(struct evalrun_zygote *z, char *why, size_t len)
{
	struct sandbox_exit ex;
	pid_t pid = z->stats.pid;

	/* A zygote that dies takes its monitors first (PDEATHSIG), so it is
	 * already reapable when their sockets close; give it a moment. */
	for (int i = 0; i < 50 && z->child && !ended(z, &ex); i++)
		usleep(2000);
	if (z->child && ended(z, &ex)) {
		snprintf(why, len, "the evaluator's zygote (pid %d) ended: %s", (int)pid, ex.why);
		z->broken = true;
		return true;
	}
	snprintf(why, len, "the evaluator's monitor process ended without a report");
	return false;
}

bool evz_park(struct evalrun_zygote *z, int rep)
{
	(void)evalrun_zygote_settle(z, 0);
	if (z->nending >= EVZ_ENDING_MAX || !z->child)
		return false;
	z->ending[z->nending++] = rep;
	return true;
}

/* Whether a parked report socket is done with: an ENDED report, its close,
 * or anything malformed (closing it kills what is left of the jail). */
static bool parked_done(int fd)
{
	struct eval_zreport r;
	int rc;

	while ((rc = evz_recv_report(fd, &r)) == 1)
		if (r.kind == EVAL_ZREP_ENDED)
			return true;
	return rc != 0;
}

unsigned evalrun_zygote_settle(struct evalrun_zygote *z, int timeout_ms)
{
	uint64_t until = clock_mono_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;

	for (;;) {
		struct pollfd pf[EVZ_ENDING_MAX];
		uint64_t now;
		unsigned n = 0;

		for (unsigned i = 0; i < z->nending; i++) {
			if (parked_done(z->ending[i]))
				close(z->ending[i]);
			else
				z->ending[n++] = z->ending[i];
		}
		z->nending = n;
		now = clock_mono_ns();
		if (!n || now >= until)
			return n;
		for (unsigned i = 0; i < n; i++)
			pf[i] = (struct pollfd){z->ending[i], POLLIN, 0};
		if (poll(pf, n, (int)((until - now) / 1000000 + 1)) < 0 && errno != EINTR)
			return n;
	}
}
