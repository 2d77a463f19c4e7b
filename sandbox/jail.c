/*
 * jail.c -- the child side: turns a fresh clone into a jail and execs (or,
 * for sandbox_spawn_fn(), calls the caller's function in pid 2).
 *
 * One linear sequence, read top to bottom; every step that changes what the
 * process may do is narrated.  Nothing here allocates: the parent prepared
 * the plan (sandbox_int.h), and this process may be the raw clone3() child
 * of a multithreaded program.  Any failure is reported to the parent over
 * the sync socket and ends the child (fail closed: nothing half-jailed ever
 * execs).
 *
 * Order matters:
 *   descriptors  first, so nothing of the parent's leaks into later steps;
 *   "go"         the parent has written our uid/gid maps and cgroup;
 *   mounts       need the capabilities we hold in the new user namespace;
 *   limits       before the capabilities that could lift them are gone;
 *   caps, nnp    then the filter, which needs no privilege under nnp;
 *   init         the process splits: pid 1 stays as a reaping init, pid 2
 *                installs the filter and execs;
 *   seccomp      last, so it only has to allow what the exec'd program does,
 *                plus the two calls that hand over the listener and exec.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/sandbox_int.h"

#define SYNC_FD SBX_FD_SYNC

/* Reports "what: strerror(errno)" to the parent and ends the child. */
static ST_NORETURN void fail(const char *what, const char *obj)
{
	struct sbx_report rep;
	size_t n = 0;

	memset(&rep, 0, sizeof(rep));
	rep.err = errno ? errno : EINVAL;
	for (const char *s = what; *s && n < sizeof(rep.msg) - 1; s++)
		rep.msg[n++] = *s;
	if (obj && n < sizeof(rep.msg) - 2) {
		rep.msg[n++] = ' ';
		for (const char *s = obj; *s && n < sizeof(rep.msg) - 1; s++)
			rep.msg[n++] = *s;
	}
	send(SYNC_FD, &rep, sizeof(rep), MSG_NOSIGNAL);
	_exit(127);
}

/*
 * Moves the mapped descriptors into place and closes every other one.  All
 * inputs are first copied above every fixed number (SBX_FD_EXEC), so no
 * placement can clobber an input that is yet to be placed.
 */
static void place_fds(const struct sbx_plan *p, struct rlimit *saved)
{
	int tmp[SBX_MAX_FDS], top = 2, sync, status = -1;
	const int base = SBX_FD_EXEC + 1;
	struct rlimit rl;

	/* Room for the copies and the fixed descriptors (sync, status, exec). */
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_max < (rlim_t)base + SBX_MAX_FDS + 4)
		_exit(127); /* cannot even report: the parent sees the child end */
	*saved = rl;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	/* Copies of every input first, above every number we place into. */
	sync = fcntl(p->sync_fd, F_DUPFD_CLOEXEC, base);
	if (p->status_fd >= 0)
		status = fcntl(p->status_fd, F_DUPFD_CLOEXEC, base);
	for (int i = 0; i < p->nfds; i++) {
		if (p->fds[i].child_fd > top)
			top = p->fds[i].child_fd;
		tmp[i] = fcntl(p->fds[i].parent_fd, F_DUPFD_CLOEXEC, base);
		if (tmp[i] < 0)
			_exit(127);
	}
	if (sync < 0 || dup3(sync, SYNC_FD, O_CLOEXEC) < 0)
		_exit(127);
	/* From here on, failures can be reported. */
	if (p->status_fd >= 0 && (status < 0 || dup3(status, SBX_FD_STATUS, O_CLOEXEC) < 0))
		fail("place status pipe", NULL);
	for (int i = 0; i < p->nfds; i++)
		if (dup2(tmp[i], p->fds[i].child_fd) < 0)
			fail("map descriptor", NULL);
	/* 0..2 that the caller did not map read and write /dev/null. */
	for (int fd = 0; fd <= top; fd++) {
		bool mapped = false;
		int nul;

		for (int i = 0; i < p->nfds; i++)
			mapped |= p->fds[i].child_fd == fd;
		if (mapped)
			continue;
		if (fd > 2) {
			close(fd);
			continue;
		}
		nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (nul < 0 || dup2(nul, fd) < 0)
			fail("open", "/dev/null");
		close(nul);
	}
	/* Everything else goes: the parent's store, sockets, pipes, the copies (E8). */
	syscall(SYS_close_range, (unsigned)top + 1,
		(unsigned)(p->status_fd >= 0 ? SBX_FD_STATUS : SYNC_FD) - 1, 0u);
	syscall(SYS_close_range, (unsigned)SYNC_FD + 1, ~0u, 0u);
}

/* mkdir -p for a path relative to the cwd (the new root). */
static void make_path(const char *rel, bool last_is_dir)
{
	char buf[256];
	size_t n = strlen(rel);

	if (n >= sizeof(buf))
		fail("path too long:", rel);
	memcpy(buf, rel, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		if (buf[i] == '\0' && !last_is_dir)
			break;
		buf[i] = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			fail("mkdir", buf);
		buf[i] = i < n ? '/' : '\0';
	}
	if (!last_is_dir) {
		int fd = open(rel, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);

		if (fd < 0)
			fail("create mount point", rel);
		close(fd);
	}
}

static void tmpfs_at(const char *rel, uint64_t size, unsigned mode, unsigned long flags)
{
	char opts[64];

	snprintf(opts, sizeof(opts), "size=%llu,mode=%o", (unsigned long long)size, mode);
	make_path(rel, true);
	if (mount("tmpfs", rel, "tmpfs", MS_NOSUID | MS_NODEV | flags, opts) < 0)
		fail("mount tmpfs on", rel);
}

/*
 * /proc stays writable where a process writes its own entries (CUDA names
 * its threads through /proc/self/task/N/comm and fails without it), but
 * what reaches the kernel as a whole is read-only or hidden, as runc does:
 * a jail of a root caller runs as host uid 0 without capabilities, and
 * procfs gives euid 0 the owner's write bits (sysctls, sysrq-trigger).
 */
static void guard_proc(const char *proc)
{
	static const char *const ro[] = {"sys", "sysrq-trigger", "irq", "bus", "fs", "driver"};
	static const char *const hide_files[] = {
	    "kcore", "keys", "timer_list", "sched_debug", "latency_stats", "kallsyms", "kmsg"};
	static const char *const hide_dirs[] = {"acpi", "scsi", "asound"};
	char path[96];
	struct stat st;

	for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", proc, ro[i]);
		if (lstat(path, &st) < 0)
			continue;
		if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0 ||
		    mount(NULL, path, NULL,
			  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  NULL) < 0)
			fail("make read-only", path);
	}
	for (size_t i = 0; i < sizeof(hide_files) / sizeof(hide_files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", proc, hide_files[i]);
		if (lstat(path, &st) == 0 && mount("/dev/null", path, NULL, MS_BIND, NULL) < 0)
			fail("hide", path);
	}
	for (size_t i = 0; i < sizeof(hide_dirs) / sizeof(hide_dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", proc, hide_dirs[i]);
		if (lstat(path, &st) == 0 &&
		    mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  "size=4k,mode=0555") < 0)
			fail("hide", path);
	}
}

/*
 * The minimal root: a tmpfs holding only the plan's mounts, then pivot_root
 * into it and drop the host's tree.  Bind sources are cloned as detached
 * trees first (open_tree), because the new root is built on /tmp, which it
 * hides, and so that read-only applies to every submount (mount_setattr,
 * AT_RECURSIVE) -- a plain MS_RDONLY remount only covers the top one.
 */
static void build_root(const struct sbx_plan *p)
{
	int src[SBX_MAX_MOUNTS];

	/* Nothing we mount may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fail("make / private", NULL);
	for (int i = 0; i < p->nmounts; i++) {
		const struct sbx_mount *m = &p->mounts[i];
		struct mount_attr attr = {.propagation = MS_PRIVATE};

		src[i] = -1;
		if (m->kind != SBX_M_BIND && m->kind != SBX_M_DEV)
			continue;
		src[i] =
		    open_tree(AT_FDCWD, m->src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
		if (src[i] < 0) {
			if (errno == ENOENT && m->optional)
				continue;
			fail("clone mount", m->src);
		}
		attr.attr_set = MOUNT_ATTR_NOSUID | (m->writable ? 0 : MOUNT_ATTR_RDONLY) |
				(m->kind == SBX_M_DEV ? 0 : MOUNT_ATTR_NODEV);
		if (mount_setattr(src[i], "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) <
		    0)
			fail("set mount flags of", m->src);
	}

	/* The new root: a small tmpfs with only mount points in it. */
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") < 0 ||
	    chdir("/tmp") < 0)
		fail("mount new root on", "/tmp");
	for (int i = 0; i < p->nmounts; i++) {
		const struct sbx_mount *m = &p->mounts[i];
		const char *dst = m->dst + 1; /* relative to the new root */

		switch (m->kind) {
		case SBX_M_BIND:
		case SBX_M_DEV:
			if (src[i] < 0)
				break;
			make_path(dst, m->is_dir);
			if (move_mount(src[i], "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
				fail("bind mount", m->dst);
			close(src[i]);
			break;
		case SBX_M_SYMLINK:
			if (symlink(m->src, dst) < 0 && errno != EEXIST)
				fail("symlink", m->dst);
			break;
		case SBX_M_TMPFS:
			tmpfs_at(dst, m->size, m->mode, m->noexec ? MS_NOEXEC : 0);
			break;
		case SBX_M_PROC:
			/* The new pid namespace's proc.  Without a pid namespace
			 * there is none to show: no /proc. */
			if (!(p->layers & SANDBOX_L_PIDNS))
				break;
			make_path(dst, true);
			if (mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
				fail("mount proc on", m->dst);
			guard_proc(dst);
			break;
		}
	}

	/* Swap roots; the host's tree is detached and unreachable from here. */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		fail("pivot_root", NULL);
	if (umount2(".", MNT_DETACH) < 0)
		fail("detach old root", NULL);
	if (chdir("/") < 0)
		fail("chdir", "/");
	/* The root itself is read-only: only the scratch and writable binds take writes. */
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
	    0)
		fail("remount / read-only", NULL);
}

static void set_limit(int res, uint64_t soft, uint64_t hard, const char *name)
{
	struct rlimit rl = {.rlim_cur = soft, .rlim_max = hard};

	if (setrlimit(res, &rl) < 0)
		fail("setrlimit", name);
}

static void set_limits(const struct sbx_plan *p)
{
	/* Fds are 0..SBX_NOFILE-1: SBX_FD_EXEC can never be reopened after exec. */
	set_limit(RLIMIT_NOFILE, SBX_NOFILE, SBX_NOFILE, "nofile");
	set_limit(RLIMIT_CORE, 0, 0, "core");
	/* Memory: the cgroup (memory.max, no swap) is the limit and names
	 * itself when hit.  Without one, RLIMIT_DATA is the backstop; never
	 * both, and never RLIMIT_AS: CUDA and sanitizers reserve terabytes of
	 * address space, and data counts writable reservations too. */
	if (p->mem_bytes && !(p->layers & SANDBOX_L_CGROUP))
		set_limit(RLIMIT_DATA, p->mem_bytes, p->mem_bytes, "data");
	if (p->fsize_bytes)
		set_limit(RLIMIT_FSIZE, p->fsize_bytes, p->fsize_bytes, "fsize");
	if (p->cpu_seconds)
		set_limit(RLIMIT_CPU, p->cpu_seconds, p->cpu_seconds + 2, "cpu");
	if (p->pids)
		set_limit(RLIMIT_NPROC, p->pids, p->pids, "nproc");
	set_limit(RLIMIT_MSGQUEUE, 0, 0, "msgqueue");
	set_limit(RLIMIT_RTPRIO, 0, 0, "rtprio");
}

/*
 * Splits into the namespace's init (this process, pid 1) and the program
 * (pid 2, which returns from here).  The init only reaps; when the program
 * ends it writes the wait status to the parent and exits, and its exit
 * kills whatever is left in the namespace.  It holds no descriptor the
 * program could use, is not dumpable (no /proc/1/mem, no ptrace by uid),
 * and, as init, ignores every signal sent from inside the namespace.
 */
static void become_init(const struct sbx_plan *p)
{
	/* Before an exec, a raw clone (no atfork handlers: the parent may be
	 * multithreaded).  Before a function, libc's fork(): the function runs
	 * libc, whose per-thread state must be a child's (sandbox.h). */
	int was = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
	pid_t pid;
	int st;

	/* Not dumpable before the program exists: set after the fork, a fast
	 * program could open /proc/1/environ or /proc/1/mem first (the unit
	 * test caught one reading init's environment).  The program gets the
	 * caller's setting back (an exec resets it anyway). */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	pid = p->fn ? fork() : (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (pid < 0)
		fail("fork the program", NULL);
	if (pid == 0) {
		prctl(PR_SET_DUMPABLE, was > 0 ? was : 0, 0, 0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		return;
	}
	/* Nothing but the status pipe: not the program's stdout or result
	 * channel (their readers see EOF when the program's copies go), not the
	 * sync socket, not the program's descriptor. */
	syscall(SYS_close_range, 0u, (unsigned)SBX_FD_STATUS - 1, 0u);
	syscall(SYS_close_range, (unsigned)SBX_FD_STATUS + 1, ~0u, 0u);
	for (;;) {
		pid_t w = waitpid(-1, &st, __WALL);

		if (w == pid) {
			if (write(SBX_FD_STATUS, &st, sizeof(st)) != (ssize_t)sizeof(st))
				_exit(126);
			_exit(0);
		}
		if (w < 0 && errno != EINTR)
			_exit(126);
	}
}

/*
 * Function mode, in the process that runs the function (pid 2): what an
 * exec would have done to our descriptors -- the sync socket and the
 * status pipe are close-on-exec -- done by hand, the caller's signal state
 * and environment back, then the function.  Closing the sync socket is the
 * parent's signal that the hand-over is complete.
 */
static ST_NORETURN void run_fn(const struct sbx_plan *p)
{
	extern char **environ;

	if (p->envp)
		environ = (char **)p->envp;
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &p->sigact[sig], NULL);
	if (p->status_fd >= 0)
		close(SBX_FD_STATUS);
	close(SYNC_FD);
	sigprocmask(SIG_SETMASK, &p->sigmask, NULL);
	_exit(p->fn(p->fn_arg));
}

static void reset_signals(void)
{
	sigset_t all;

	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
}

void sbx_child(const struct sbx_plan *p)
{
	char *const empty_env[] = {NULL};
	char *const *envp = p->envp ? p->envp : empty_env;
	unsigned l = p->layers;
	struct rlimit nofile = {1024, 1024};
	char go;
	int fd;

	/* 1. If the parent dies, so do we (and with us the pid namespace). */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* 2. A clean signal state: default actions, nothing blocked. */
	reset_signals();
	/* 3. A session of our own: no controlling terminal (no TIOCSTI), and a
	 *    process group the parent can kill when there is no pid namespace. */
	setsid();
	/* 4. Descriptors: the mapped ones, the sync socket and status pipe,
	 *    nothing else (E8). */
	place_fds(p, &nofile);

	if (p->stage == SANDBOX_NONE) {
		setrlimit(RLIMIT_NOFILE, &nofile);
		if (p->workdir[0] && chdir(p->workdir) < 0)
			fail("chdir", p->workdir);
		if (p->fn)
			run_fn(p);
		/* Environment: exactly the caller's list (E2). */
		execve(p->path, p->argv, envp);
		fail("exec", p->path);
	}

	/* 5. Wait until the parent has written our id maps and cgroup. */
	if (read(SYNC_FD, &go, 1) != 1)
		_exit(127);
	/* 6. Identity: the caller's uid/gid (nobody inside for root; spawn.c),
	 *    and no supplementary groups where the parent could let us drop them. */
	if (go == 'G' && setgroups(0, NULL) < 0)
		fail("setgroups", NULL);
	/* 7. The file system: pivot into a root holding only the plan (E2, E3). */
	if (l & SANDBOX_L_MNTNS)
		build_root(p);
	/* 8. Our own hostname; network, ipc and uts namespaces came with clone3:
	 *    the netns has only a loopback that is down (E1). */
	if ((l & SANDBOX_L_IPCUTS) && sethostname("stark", 5) < 0)
		fail("sethostname", NULL);
	if (chdir(p->workdir[0] ? p->workdir : "/tmp") < 0)
		fail("chdir", p->workdir[0] ? p->workdir : "/tmp");
	/* 9. The program, opened inside the jail, at a descriptor number that
	 *    the limits below make unreachable once exec closes it.  Function
	 *    mode never opens it, so the run filter's one exec matches nothing. */
	if (!p->fn) {
		fd = open(p->path, O_PATH | O_CLOEXEC);
		if (fd < 0 || dup3(fd, SBX_FD_EXEC, O_CLOEXEC) < 0)
			fail("open program", p->path);
		close(fd);
	}
	/* 10. Resource limits (E5); the cgroup was set up by the parent. */
	if (l & SANDBOX_L_RLIMIT)
		set_limits(p);
	/* 11. No capabilities, inside or out, now or after exec. */
	if (sbx_drop_caps())
		fail("drop capabilities", NULL);
	/* 12. No new privileges: no setuid, no file capabilities, ever. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail("set no_new_privs", NULL);
	/* 13. Pid 1 ignores the default action of signals sent to it: the
	 *     program's SIGXCPU, SIGPIPE, abort() would change meaning.  So we
	 *     stay behind as the namespace's init, and the program is pid 2. */
	if (l & SANDBOX_L_PIDNS)
		become_init(p);
	/* 14. The system call filter of the stage (E4, E7, E9).  A reporting
	 *     filter hands its listener to the parent, which names the call and
	 *     kills the tree; the call itself never runs. */
	if ((l & SANDBOX_L_SECCOMP) && p->filter.len) {
		unsigned flags = p->filter_notify ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
		long lfd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &p->filter);

		if (lfd < 0)
			fail("install seccomp filter", NULL);
		if (p->filter_notify && sbx_send_fd(SYNC_FD, (int)lfd))
			fail("send seccomp listener", NULL);
		if (p->filter_notify)
			close((int)lfd);
	}
	/* 15. Exec through the descriptor; the environment is exactly the
	 *     caller's list.  In function mode: the function, in this process. */
	if (p->fn)
		run_fn(p);
	syscall(SYS_execveat, SBX_FD_EXEC, "", p->argv, envp, AT_EMPTY_PATH);
	fail("exec", p->path ? p->path : "(function)");
}
