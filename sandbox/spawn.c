/*
 * spawn.c -- the parent side of a jail: plan, clone, hand-over, watch.
 *
 * sandbox_spawn() checks the layers the caller requires against what this
 * machine offers, prepares a plan (mounts, limits, the compiled seccomp
 * program) while allocation is still safe, creates the cgroup, and clones
 * the child straight into its namespaces with clone3() (CLONE_PIDFD, so the
 * handle can never point at a recycled pid; CLONE_INTO_CGROUP on cgroup v2).
 * It then finishes what only the parent can do -- the uid/gid maps, the
 * cgroup v1 attach -- sends "go", and waits on the sync socket until the
 * child either reports a failure or execs (EOF, the socket is close-on-exec;
 * sandbox_spawn_fn()'s child closes it by hand before it calls the function).
 *
 * sandbox_wait() polls the pidfd, the seccomp listeners the child handed us
 * and the deadline; it kills the whole tree (the pid namespace's init, the
 * cgroup, the process group) when the deadline passes or when the filter
 * reports a forbidden system call, and says in words how the child ended.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_int.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

struct sandbox_child {
	pid_t pid;
	int pidfd;
	int epfd;      /* pidfd + the seccomp listener + the limits tick */
	int tick;      /* timerfd: look at the cgroup's counters, -1 if none */
	int status_fd; /* read end: the program's wait status, relayed by init */
	int listeners[SBX_MAX_LISTENERS];
	int nlisteners;
	enum sandbox_stage stage;
	unsigned layers;
	uint64_t start_ns, deadline_ns, wall_ms, mem_bytes, pids, cpu_seconds;
	uint64_t oom_grace_ns, oom_seen_ns; /* the grace; when the OOM kill was seen */
	struct sbx_cgroup cg;
	bool killed, deadline_hit, reaped;
	enum sandbox_end limit_hit; /* SANDBOX_OOM or SANDBOX_PIDS once one was hit */
	long seccomp_nr;	    /* first forbidden call the filter reported, or -1 */
	uint32_t seccomp_arch;
	struct sandbox_exit ex;
};

void sandbox_config_init(struct sandbox_config *cfg, enum sandbox_stage stage)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->stage = stage;
	cfg->gpu_index = -1;
	cfg->mem_bytes = 4ull << 30;
	cfg->pids = 256;
	cfg->scratch_bytes = 1ull << 30;
	cfg->fsize_bytes = 1ull << 30;
	cfg->cpu_seconds = 600;
	cfg->wall_ms = 180000;
	cfg->required = stage == SANDBOX_NONE ? SANDBOX_L_FDS | SANDBOX_L_ENV : SANDBOX_L_ALL;
}

pid_t sandbox_child_pid(const struct sandbox_child *c)
{
	return c->pid;
}
unsigned sandbox_child_layers(const struct sandbox_child *c)
{
	return c->layers;
}
int sandbox_child_fd(const struct sandbox_child *c)
{
	return c->epfd;
}

/* Plan of one spawn: copies what the child needs into fixed storage. */
static int plan_fds(struct sbx_plan *p, const struct sandbox_config *cfg)
{
	if (cfg->nfds > SBX_MAX_FDS)
		return stark_error(ST_EINVAL, "sandbox: too many descriptors to map (%zu)",
				   cfg->nfds);
	for (size_t i = 0; i < cfg->nfds; i++) {
		int to = cfg->fds[i].child_fd;

		if (to < 0 || to >= SBX_NOFILE - 8 || cfg->fds[i].parent_fd < 0)
			return stark_error(ST_EINVAL, "sandbox: bad descriptor mapping %d -> %d",
					   cfg->fds[i].parent_fd, to);
		for (size_t j = 0; j < i; j++)
			if (cfg->fds[j].child_fd == to)
				return stark_error(ST_EINVAL, "sandbox: descriptor %d mapped twice",
						   to);
		p->fds[i] = cfg->fds[i];
	}
	p->nfds = (int)cfg->nfds;
	return 0;
}

/* Which layers this spawn will apply: what the stage wants and the machine has. */
static unsigned wanted_layers(enum sandbox_stage stage)
{
	if (stage == SANDBOX_NONE)
		return SANDBOX_L_FDS | SANDBOX_L_ENV;
	return SANDBOX_L_ALL;
}

/* Writes s to a /proc file of the child (uid_map and friends). */
static int write_proc(pid_t pid, const char *name, const char *s)
{
	char path[64];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return stark_error(ST_ESYS, "sandbox: open %s: %s", path, strerror(errno));
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		rc = stark_error(ST_ESYS, "sandbox: write %s: %s", path, strerror(errno));
	close(fd);
	return rc;
}

/*
 * The user namespace maps exactly one id: the caller's uid and gid, to
 * themselves -- except root, which becomes nobody (65534) inside.  A process
 * that believes it is root but holds no capability misbehaves: libcuda, as
 * euid 0, tries to create and fix the device nodes and fails CUDA's
 * initialisation (error 304).  Outside the jail the id is still the
 * caller's, so file access is unchanged.  A root caller can also let the
 * child drop its supplementary groups; anyone else must deny setgroups
 * before writing gid_map.
 */
static int write_id_maps(pid_t pid, bool *drop_groups)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();
	int rc;

	*drop_groups = uid == 0;
	if (!*drop_groups) {
		rc = write_proc(pid, "setgroups", "deny");
		if (rc)
			return rc;
	}
	snprintf(map, sizeof(map), "%u %u 1\n", uid ? (unsigned)uid : SBX_NOBODY, (unsigned)uid);
	rc = write_proc(pid, "uid_map", map);
	if (rc)
		return rc;
	snprintf(map, sizeof(map), "%u %u 1\n", gid ? (unsigned)gid : SBX_NOBODY, (unsigned)gid);
	return write_proc(pid, "gid_map", map);
}

/* Receives the seccomp listener (SCM_RIGHTS) or a failure report. */
static int recv_msg(int fd, void *buf, size_t len, int *passed_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm;
	ssize_t n;

	*passed_fd = -1;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(passed_fd, CMSG_DATA(cm), sizeof(int));
	return (int)n;
}

static int add_listener(struct sandbox_child *c, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

	if (c->nlisteners >= SBX_MAX_LISTENERS) {
		close(fd);
		return ST_ETOOBIG;
	}
	c->listeners[c->nlisteners++] = fd;
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return ST_ESYS;
	return 0;
}

static int epoll_add(int epfd, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? ST_ESYS : 0;
}

static pid_t clone_child(uint64_t flags, int cgfd, int *pidfd)
{
	struct clone_args ca;

	memset(&ca, 0, sizeof(ca));
	ca.flags = flags | CLONE_PIDFD | (cgfd >= 0 ? CLONE_INTO_CGROUP : 0);
	ca.pidfd = (uint64_t)(uintptr_t)pidfd;
	/* No exit signal: a caller's waitpid(-1) cannot reap our child and
	 * steal its status; only our __WALL wait on the pidfd does. */
	ca.exit_signal = 0;
	ca.cgroup = cgfd >= 0 ? (uint64_t)cgfd : 0;
	return (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
}

/*
 * The hand-over after clone: id maps and v1 cgroups (which only the parent
 * can set up), then "go", then the child's answer: a listener fd, a failure
 * report, or EOF when exec succeeded.
 */
static int handshake(struct sandbox_child *c, struct sbx_plan *plan, int sync)
{
	struct sbx_report rep;
	bool drop = false;
	int rc, n, fd;
	char go;

	if (plan->stage != SANDBOX_NONE) {
		rc = (c->layers & SANDBOX_L_USERNS) ? write_id_maps(c->pid, &drop) : 0;
		if (rc)
			return rc;
		if (c->cg.version == 1) {
			rc = sbx_cgroup_attach(&c->cg, c->pid);
			if (rc)
				return rc;
		}
		go = drop ? 'G' : 'g';
		if (write(sync, &go, 1) != 1)
			return stark_error(ST_ESYS, "sandbox: cannot release child: %s",
					   strerror(errno));
	}
	for (;;) {
		memset(&rep, 0, sizeof(rep));
		n = recv_msg(sync, &rep, sizeof(rep), &fd);
		if (n < 0)
			return stark_error(ST_ESYS, "sandbox: reading child status: %s",
					   strerror(errno));
		if (n == 0)
			return 0; /* exec happened */
		if (fd >= 0) {
			rc = add_listener(c, fd);
			if (rc)
				return stark_error(rc, "sandbox: cannot watch seccomp listener");
			continue;
		}
		rep.msg[sizeof(rep.msg) - 1] = '\0';
		errno = rep.err;
		return stark_error(ST_ESYS, "sandbox: %s: %s", rep.msg, strerror(rep.err));
	}
}

static int prepare(struct sandbox_child *c, const struct sandbox_config *cfg,
		   struct sbx_plan *plan);

/*
 * With a cgroup, the child's descriptor also wakes four times a second so
 * that a caller polling it looks at the limits (sandbox_wait): the first
 * OOM kill or pids.max refusal ends the whole evaluation, on v1 as on v2.
 */
static int start_tick(struct sandbox_child *c)
{
	struct itimerspec every = {.it_interval = {0, 250000000}, .it_value = {0, 250000000}};

	if (!c->cg.version)
		return 0;
	c->tick = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (c->tick < 0 || timerfd_settime(c->tick, 0, &every, NULL) < 0)
		return ST_ESYS;
	return epoll_add(c->epfd, c->tick);
}

int sandbox_check_layers(const struct sandbox_config *cfg)
{
	unsigned missing = cfg->required & ~sandbox_layers_available(cfg->stage);

	if (!missing)
		return 0;
	sbx_warn_missing_once(cfg->stage, missing);
	return cfg->insecure ? 0 : ST_EDENIED;
}

/* Threads of this process, from /proc/self/task (-1 if it cannot tell). */
static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The caller's signal state, which a function-mode child gets back. */
static int save_signals(struct sbx_plan *plan)
{
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP && sigaction(sig, NULL, &plan->sigact[sig]) < 0 &&
		    errno != EINVAL)
			return stark_error(ST_ESYS, "sandbox: sigaction: %s", strerror(errno));
	if (sigprocmask(SIG_SETMASK, NULL, &plan->sigmask) < 0)
		return stark_error(ST_ESYS, "sandbox: sigprocmask: %s", strerror(errno));
	return 0;
}

static int spawn(const struct sandbox_config *cfg, const char *path, char *const argv[],
		 sandbox_entry fn, void *arg, struct sandbox_child **out)
{
	unsigned have = sandbox_layers_available(cfg->stage);
	struct sandbox_child *c = NULL;
	struct sbx_plan *plan = NULL;
	int sv[2] = {-1, -1}, st[2] = {-1, -1};
	uint64_t nsflags = 0;
	int rc;

	*out = NULL;
	rc = sandbox_check_layers(cfg);
	if (rc)
		return rc;
	c = calloc(1, sizeof(*c));
	plan = calloc(1, sizeof(*plan));
	if (!c || !plan) {
		rc = ST_ENOMEM;
		goto out_free;
	}
	c->pid = -1;
	c->pidfd = c->epfd = c->status_fd = c->tick = c->cg.v2fd = -1;
	c->seccomp_nr = -1;
	c->stage = cfg->stage;
	c->layers = wanted_layers(cfg->stage) & have;
	c->wall_ms = cfg->wall_ms;
	c->mem_bytes = cfg->mem_bytes;
	c->oom_grace_ns = cfg->oom_grace_ms * 1000000ull;
	c->pids = cfg->pids;
	c->cpu_seconds = cfg->cpu_seconds;
	plan->stage = cfg->stage;
	plan->layers = c->layers;
	plan->path = path;
	plan->argv = argv;
	plan->envp = (char *const *)cfg->env;
	plan->fn = fn;
	plan->fn_arg = arg;
	rc = plan_fds(plan, cfg);
	if (!rc && fn)
		rc = save_signals(plan);
	if (rc)
		goto out_free;
	rc = prepare(c, cfg, plan);
	if (rc)
		goto out_cgroup;

	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->epfd < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		rc = stark_error(ST_ESYS, "sandbox: socketpair: %s", strerror(errno));
		goto out_cgroup;
	}
	plan->sync_fd = sv[1];
	plan->status_fd = -1;
	if (c->layers & SANDBOX_L_PIDNS) {
		if (pipe2(st, O_CLOEXEC | O_NONBLOCK) < 0) {
			rc = stark_error(ST_ESYS, "sandbox: pipe: %s", strerror(errno));
			goto out_sockets;
		}
		plan->status_fd = st[1];
		c->status_fd = st[0];
		st[0] = -1;
	}
	if (c->layers & SANDBOX_L_USERNS)
		nsflags |= CLONE_NEWUSER;
	if (c->layers & SANDBOX_L_MNTNS)
		nsflags |= CLONE_NEWNS;
	if (c->layers & SANDBOX_L_PIDNS)
		nsflags |= CLONE_NEWPID;
	if (c->layers & SANDBOX_L_NETNS)
		nsflags |= CLONE_NEWNET;
	if (c->layers & SANDBOX_L_IPCUTS)
		nsflags |= CLONE_NEWIPC | CLONE_NEWUTS;

	c->start_ns = clock_mono_ns();
	c->deadline_ns = cfg->wall_ms ? c->start_ns + cfg->wall_ms * 1000000ull : UINT64_MAX;
	c->pid = clone_child(nsflags, c->cg.version == 2 ? c->cg.v2fd : -1, &c->pidfd);
	if (c->pid < 0) {
		rc = stark_error(ST_ESYS, "sandbox: clone3: %s", strerror(errno));
		goto out_sockets;
	}
	if (c->pid == 0)
		sbx_child(plan); /* never returns */

	/* Parent: close the child's ends, then finish the hand-over. */
	close(sv[1]);
	sv[1] = -1;
	if (st[1] >= 0) {
		close(st[1]);
		st[1] = -1;
	}
	if (epoll_add(c->epfd, c->pidfd) || start_tick(c)) {
		rc = stark_error(ST_ESYS, "sandbox: epoll: %s", strerror(errno));
		goto out_kill;
	}
	rc = handshake(c, plan, sv[0]);
	if (rc)
		goto out_kill;
	close(sv[0]);
	free(plan);
	*out = c;
	return 0;

out_kill:
	sandbox_kill(c);
	while (waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, &(siginfo_t){0}, WEXITED | __WALL) < 0 &&
	       errno == EINTR)
		;
	c->reaped = true;
out_sockets:
	for (int i = 0; i < 2; i++) {
		if (sv[i] >= 0)
			close(sv[i]);
		if (st[i] >= 0)
			close(st[i]);
	}
out_cgroup:
	sbx_cgroup_destroy(&c->cg);
out_free:
	if (c && c->pid >= 0 && !c->reaped)
		sandbox_kill(c);
	if (c)
		sandbox_child_free(c);
	free(plan);
	return rc;
}

int sandbox_spawn(const struct sandbox_config *cfg, const char *path, char *const argv[],
		  struct sandbox_child **out)
{
	*out = NULL;
	if (!path || !argv)
		return stark_error(ST_EINVAL, "sandbox: no program to spawn");
	return spawn(cfg, path, argv, NULL, NULL, out);
}

int sandbox_spawn_fn(const struct sandbox_config *cfg, const char *path, sandbox_entry fn,
		     void *arg, struct sandbox_child **out)
{
	int n = count_threads();

	*out = NULL;
	if (!fn)
		return stark_error(ST_EINVAL, "sandbox: no function to run");
	if (n != 1)
		return stark_error(ST_EINVAL,
				   "sandbox: a function-mode jail needs a single-threaded caller (this process has %d threads)",
				   n);
	return spawn(cfg, path, NULL, fn, arg, out);
}

/* Mounts, limits and the filter: the parts of the plan that need the stage. */
static int prepare(struct sandbox_child *c, const struct sandbox_config *cfg, struct sbx_plan *plan)
{
	int rc;

	plan->mem_bytes = cfg->mem_bytes;
	plan->pids = cfg->pids;
	plan->fsize_bytes = cfg->fsize_bytes;
	plan->cpu_seconds = cfg->cpu_seconds;
	if (cfg->stage == SANDBOX_NONE) {
		if (cfg->workdir)
			snprintf(plan->workdir, sizeof(plan->workdir), "%s", cfg->workdir);
		return 0;
	}
	rc = sbx_plan_mounts(plan, cfg);
	if (rc)
		return rc;
	if (c->layers & SANDBOX_L_CGROUP) {
		rc = sbx_cgroup_create(&c->cg, cfg);
		if (rc)
			return rc;
	}
	if (c->layers & SANDBOX_L_SECCOMP) {
		/* The jail's filter reports denied calls to us (policy.c). */
		plan->filter_notify = true;
		rc = sbx_policy_get(cfg->stage, cfg->stage == SANDBOX_RUN && cfg->run_exec,
				    plan->filter_notify, &plan->filter);
		if (rc)
			return rc;
	}
	return 0;
}

void sandbox_kill(struct sandbox_child *c)
{
	if (!c || c->pid <= 0 || c->reaped)
		return;
	c->killed = true;
	/* The pid namespace's init: its death takes every process inside. */
	syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
	/* The cgroup: catches anything that left the namespace (it cannot). */
	sbx_cgroup_kill(&c->cg);
	/* Without a pid namespace: the process group the child leads. */
	if (!(c->layers & SANDBOX_L_PIDNS))
		kill(-c->pid, SIGKILL);
}

void sandbox_child_free(struct sandbox_child *c)
{
	if (!c)
		return;
	if (c->pid > 0 && !c->reaped) {
		sandbox_kill(c);
		while (waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, &(siginfo_t){0}, WEXITED | __WALL) < 0 &&
		       errno == EINTR)
			;
	}
	for (int i = 0; i < c->nlisteners; i++)
		close(c->listeners[i]);
	if (c->epfd >= 0)
		close(c->epfd);
	if (c->status_fd >= 0)
		close(c->status_fd);
	if (c->tick >= 0)
		close(c->tick);
	if (c->pidfd >= 0)
		close(c->pidfd);
	sbx_cgroup_destroy(&c->cg);
	free(c);
}

/* A forbidden call: remember the first one, and end the whole tree. */
static void take_notification(struct sandbox_child *c, int fd)
{
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;

	memset(&req, 0, sizeof(req));
	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
		if (errno != EINTR && errno != ENOENT) {
			epoll_ctl(c->epfd, EPOLL_CTL_DEL, fd, NULL);
		}
		return;
	}
	if (c->seccomp_nr < 0) {
		c->seccomp_nr = req.data.nr;
		c->seccomp_arch = req.data.arch;
	}
	sandbox_kill(c);
	/* The call is never executed; answer so the thread does not linger. */
	memset(&resp, 0, sizeof(resp));
	resp.id = req.id;
	resp.error = -EPERM;
	ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

static int pump(struct sandbox_child *c, int timeout_ms)
{
	struct epoll_event ev[8];
	int n = epoll_wait(c->epfd, ev, 8, timeout_ms);

	for (int i = 0; i < n; i++) {
		if (ev[i].data.fd == c->pidfd)
			continue;
		if (ev[i].data.fd == c->tick) {
			uint64_t ticks;

			if (read(c->tick, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
				return -1;
			continue;
		}
		if (ev[i].events & (EPOLLHUP | EPOLLERR)) {
			epoll_ctl(c->epfd, EPOLL_CTL_DEL, ev[i].data.fd, NULL);
			continue;
		}
		take_notification(c, ev[i].data.fd);
	}
	return n;
}

/* With a pid namespace, how the program (pid 2) ended, as init relayed it. */
static void program_status(struct sandbox_child *c, siginfo_t *si)
{
	int st;

	if (c->status_fd < 0 || read(c->status_fd, &st, sizeof(st)) != (ssize_t)sizeof(st))
		return; /* init itself was killed: its own status stands */
	if (WIFEXITED(st)) {
		si->si_code = CLD_EXITED;
		si->si_status = WEXITSTATUS(st);
	} else if (WIFSIGNALED(st)) {
		si->si_code = WCOREDUMP(st) ? CLD_DUMPED : CLD_KILLED;
		si->si_status = WTERMSIG(st);
	}
}

static void describe(struct sandbox_child *c, siginfo_t *si)
{
	struct sandbox_exit *ex = &c->ex;
	const char *name;

	program_status(c, si);

	memset(ex, 0, sizeof(*ex));
	ex->syscall_nr = c->seccomp_nr;
	ex->wall_ns = clock_mono_ns() - c->start_ns;
	if (si->si_code == CLD_EXITED) {
		ex->how = SANDBOX_EXITED;
		ex->code = si->si_status;
	} else {
		ex->how = SANDBOX_SIGNALED;
		ex->sig = si->si_status;
	}
	if (c->seccomp_nr >= 0) {
		ex->how = SANDBOX_SECCOMP;
		name = sandbox_syscall_name_arch(c->seccomp_nr, c->seccomp_arch);
		if (name)
			snprintf(ex->why, sizeof(ex->why), "killed by seccomp: syscall %s", name);
		else
			snprintf(ex->why, sizeof(ex->why), "killed by seccomp: syscall %ld",
				 c->seccomp_nr);
	} else if (c->deadline_hit) {
		ex->how = SANDBOX_DEADLINE;
		snprintf(ex->why, sizeof(ex->why), "deadline of %.3g s passed; process tree killed",
			 (double)c->wall_ms / 1000.0);
	} else if (c->limit_hit == SANDBOX_OOM || sbx_cgroup_oom(&c->cg)) {
		ex->how = SANDBOX_OOM;
		snprintf(ex->why, sizeof(ex->why),
			 "memory limit of %llu MiB reached; process tree killed",
			 (unsigned long long)(c->mem_bytes >> 20));
	} else if (c->limit_hit == SANDBOX_PIDS) {
		ex->how = SANDBOX_PIDS;
		snprintf(ex->why, sizeof(ex->why),
			 "process limit of %llu reached; process tree killed",
			 (unsigned long long)c->pids);
	} else if (ex->how == SANDBOX_SIGNALED && ex->sig == SIGSYS) {
		ex->how = SANDBOX_SECCOMP;
		/* Not reported to us: the narrow filter's own kill (policy.c). */
		snprintf(ex->why, sizeof(ex->why),
			 "killed by seccomp (SIGSYS): a call the narrow filter forbids (%s)",
			 sbx_policy_narrow_kills());
	} else if (ex->how == SANDBOX_SIGNALED && ex->sig == SIGXCPU) {
		ex->how = SANDBOX_CPU;
		snprintf(ex->why, sizeof(ex->why), "cpu time limit of %llu s reached",
			 (unsigned long long)c->cpu_seconds);
	} else if (sbx_cgroup_pids_hit(&c->cg) && !(ex->how == SANDBOX_EXITED && ex->code == 0)) {
		ex->how = SANDBOX_PIDS;
		snprintf(ex->why, sizeof(ex->why), "process limit of %llu reached (%s)",
			 (unsigned long long)c->pids,
			 si->si_code == CLD_EXITED ? "exited" : strsignal(si->si_status));
		if (si->si_code == CLD_EXITED)
			ex->code = si->si_status;
	} else if (ex->how == SANDBOX_EXITED) {
		snprintf(ex->why, sizeof(ex->why), "exited with status %d", ex->code);
	} else {
		snprintf(ex->why, sizeof(ex->why), "killed by signal %d (%s)%s%s", ex->sig,
			 strsignal(ex->sig), si->si_code == CLD_DUMPED ? ", core dumped" : "",
			 c->killed ? ", by the supervisor" : "");
	}
}

/* The first OOM kill or pids.max refusal in the cgroup ends the tree; an
 * OOM kill after the config's grace, which lets a supervisor inside report
 * whose process the kernel chose. */
static void check_limits(struct sandbox_child *c)
{
	if (c->killed || c->reaped || !c->cg.version)
		return;
	if (c->limit_hit == SANDBOX_OOM) {
		if (clock_mono_ns() - c->oom_seen_ns >= c->oom_grace_ns)
			sandbox_kill(c);
		return;
	}
	if (sbx_cgroup_oom(&c->cg)) {
		c->limit_hit = SANDBOX_OOM;
		c->oom_seen_ns = clock_mono_ns();
		if (!c->oom_grace_ns)
			sandbox_kill(c);
	} else if (sbx_cgroup_pids_hit(&c->cg)) {
		c->limit_hit = SANDBOX_PIDS;
		sandbox_kill(c);
	}
}

int sandbox_wait(struct sandbox_child *c, int timeout_ms, struct sandbox_exit *ex)
{
	uint64_t until =
	    timeout_ms < 0 ? UINT64_MAX : clock_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	siginfo_t si;

	while (!c->reaped) {
		uint64_t now, stop;
		int ms;

		/* Reports from the filter first: they name the cause of death. */
		if (pump(c, 0) < 0 && errno != EINTR)
			return stark_error(ST_ESYS, "sandbox: epoll_wait: %s", strerror(errno));
		check_limits(c);
		memset(&si, 0, sizeof(si));
		if (waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, &si, WEXITED | WNOHANG | __WALL) < 0 &&
		    errno != EINTR)
			return stark_error(ST_ESYS, "sandbox: waitid: %s", strerror(errno));
		if (si.si_pid != 0) {
			c->reaped = true;
			describe(c, &si);
			break;
		}
		now = clock_mono_ns();
		if (now >= c->deadline_ns && !c->killed) {
			c->deadline_hit = true;
			sandbox_kill(c);
			continue;
		}
		if (now >= until)
			return ST_ETIMEDOUT;
		stop = until < c->deadline_ns ? until : c->deadline_ns;
		ms = c->killed ? 20 : (int)((stop - now + 999999) / 1000000);
		if (ms > 1000 || ms < 0)
			ms = 1000;
		if (pump(c, ms) < 0 && errno != EINTR)
			return stark_error(ST_ESYS, "sandbox: epoll_wait: %s", strerror(errno));
	}
	*ex = c->ex;
	return 0;
}
