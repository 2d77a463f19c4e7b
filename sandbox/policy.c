/*
 * policy.c -- the system call policies, as one table, compiled with
 * libseccomp into BPF programs that the child loads without allocating.
 *
 * Three policies, one column each:
 *   COMPILE  the compile jail: the toolchain execs ~14 programs (ninja, gcc,
 *            nvcc, cicc, ptxas, ld); no network sockets.
 *   RUN      the run jail, before the evaluator's trusted start-up: embedded
 *            Python, torch and CUDA initialise (AF_UNIX sockets, threads,
 *            driver ioctls); exec only of the jail's own program (below).
 *   RUN+EXEC the run jail of a candidate whose language compiles at its
 *            first call (Triton's JIT execs its ptxas and the C compiler):
 *            RUN with execve allowed.  Which files may be exec'd is not a
 *            question seccomp can answer (the path is in memory); the
 *            evaluator's trusted start-up restricts it with Landlock
 *            (sandbox_restrict_exec, landlock.c) before any candidate code
 *            runs, and refuses to go on where it cannot.
 *   NARROW   installed by the evaluator (sandbox_narrow) on every thread
 *            before candidate code is loaded: RUN minus what only trusted
 *            start-up needs (the exec descriptor, filters, capset, pidfds).
 * Anything not allowed is denied; the 32-bit (int 0x80) and x32 entry points
 * are denied as a whole (libseccomp's bad-arch action).
 *
 * How a denial ends, and why this design: a filter whose default action is
 * SCMP_ACT_KILL_PROCESS kills reliably but leaves the parent only "SIGSYS"
 * in the wait status.  The alternatives for naming the call were (a) the
 * audit line in /dev/kmsg -- root only, rate-limited by printk and absent
 * where auditd owns the log; (b) SECCOMP_RET_TRAP with a SIGSYS handler --
 * the handler lives in the process being judged, so candidate code can patch
 * it and forge the reason; (c) SECCOMP_RET_USER_NOTIF -- the kernel tells a
 * supervisor outside the jail which call was made, by which pid, and the
 * call does not run while the supervisor decides.  We use (c) wherever a
 * supervisor exists: the deny action is USER_NOTIF, and the supervisor
 * (spawn.c) never lets the call proceed: it records the number, kills the
 * whole tree, and answers EPERM.  It fails closed: if the supervisor is
 * gone, the kernel fails every such call with ENOSYS, and the child dies
 * with its parent (PDEATHSIG).  Where no supervisor exists (a filter
 * compiled for a process outside any jail) the default is
 * SCMP_ACT_KILL_PROCESS.
 *
 * The narrow filter is stacked on the RUN filter, and the kernel runs both
 * and keeps the strictest answer: KILL_PROCESS outranks USER_NOTIF, and only
 * one filter in a chain may have a listener.  So inside a jail NARROW holds
 * only the difference -- it kills (SCMP_ACT_KILL_PROCESS) exactly the calls
 * RUN allows and NARROW does not, and allows everything else, leaving the
 * RUN filter to deny and report the rest by name.  Outside a jail (no RUN
 * filter answers the probe below) NARROW is compiled as a full allowlist
 * with KILL_PROCESS as its default.  A kill by the narrow difference is
 * reported as a SIGSYS death naming the calls it can have been.
 *
 * "Run" forbids exec after the evaluator starts without trusting it to do
 * so: the only exec the RUN filter allows is execveat(SBX_FD_EXEC, "", ...,
 * AT_EMPTY_PATH), the descriptor jail.c opens on the program just before
 * the exec.  It is close-on-exec, and RLIMIT_NOFILE (hard, = SBX_FD_EXEC)
 * keeps any later descriptor below that number, so the rule matches nothing
 * afterwards: exec happens exactly once.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/common.h"
#include "sandbox/sandbox_int.h"

/* Cell values: what a policy does with a call. */
enum {
	D = 0, /* denied (the default): reported and killed */
	A,     /* allowed */
	N,     /* fails with ENOSYS, so libc falls back (clone3 -> clone) */
	E,     /* fails with EPERM, quietly: probed by libraries, never needed */
	U,     /* allowed for AF_UNIX only (arg 0) */
	C,     /* clone: threads and fork, no new namespaces (arg 0) */
	X,     /* execveat of the jail's own program descriptor only */
	T,     /* ioctl, except TIOCSTI and TIOCLINUX (arg 1: EPERM) */
	P,     /* prctl: the options in prctl_ok[] only */
	F,     /* seccomp: installing a filter (sandbox_narrow) and queries */
};

/* seccomp(SBX_PROBE_OP, ...) fails with SBX_PROBE_ERRNO only under our RUN
 * filter, so sandbox_narrow() can tell whether it runs inside a run jail. */
#define SBX_PROBE_OP	0x5354524bu /* "STRK" */
#define SBX_PROBE_ERRNO ENOTUNIQ

/* clone() flags that would create namespaces (CLONE_NEWTIME is clone3-only). */
#define NS_FLAGS                                                                                   \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |             \
	 CLONE_NEWPID | CLONE_NEWNET)

// clang-format off: the table is read as columns
static const struct {
	const char *name;
	unsigned char compile, run, narrow;
	const char *why;
} policy[] = {
    /* name                  COMPILE RUN NARROW */
    /* --- memory --- */
    {"brk", A, A, A, "malloc"},
    {"mmap", A, A, A, "malloc, shared libraries, CUDA mappings"},
    {"munmap", A, A, A, "free"},
    {"mremap", A, A, A, "realloc of large blocks"},
    {"mprotect", A, A, A, "dynamic loader, JIT (torch, triton)"},
    {"madvise", A, A, A, "allocator hints"},
    {"mincore", A, A, A, "allocator probes"},
    {"msync", A, A, A, "mapped files"},
    {"mlock", A, A, A, "pinned host memory (RLIMIT_MEMLOCK bounds it)"},
    {"munlock", A, A, A, "pinned host memory"},
    {"membarrier", A, A, A, "runtime synchronisation"},
    {"get_mempolicy", A, A, A, "NUMA-aware allocators (CUDA, torch)"},
    {"set_mempolicy", A, A, A, "NUMA-aware allocators"},
    {"mbind", A, A, A, "NUMA-aware allocators"},
    {"memfd_create", A, A, A, "anonymous shared memory (torch, python)"},
    {"pkey_alloc", E, E, E, "probed by glibc; not needed"},
    /* --- files --- */
    {"read", A, A, A, "I/O"},
    {"write", A, A, A, "I/O"},
    {"readv", A, A, A, "I/O"},
    {"writev", A, A, A, "I/O"},
    {"pread64", A, A, A, "I/O"},
    {"pwrite64", A, A, A, "I/O"},
    {"preadv", A, A, A, "I/O"},
    {"pwritev", A, A, A, "I/O"},
    {"preadv2", A, A, A, "I/O"},
    {"pwritev2", A, A, A, "I/O"},
    {"open", A, A, A, "the jail's root decides what exists"},
    {"openat", A, A, A, "the jail's root decides what exists"},
    {"openat2", N, N, N, "newer libraries fall back to openat"},
    {"creat", A, A, A, "files in scratch"},
    {"close", A, A, A, "I/O"},
    {"close_range", A, A, A, "subprocess"},
    {"lseek", A, A, A, "I/O"},
    {"stat", A, A, A, "metadata"},
    {"fstat", A, A, A, "metadata"},
    {"lstat", A, A, A, "metadata"},
    {"newfstatat", A, A, A, "metadata"},
    {"statx", A, A, A, "metadata"},
    {"statfs", A, A, A, "metadata (python, gcc)"},
    {"fstatfs", A, A, A, "metadata"},
    {"access", A, A, A, "metadata"},
    {"faccessat", A, A, A, "metadata"},
    {"faccessat2", A, A, A, "metadata"},
    {"readlink", A, A, A, "metadata"},
    {"readlinkat", A, A, A, "metadata"},
    {"getdents", A, A, A, "directory listing"},
    {"getdents64", A, A, A, "directory listing"},
    {"getcwd", A, A, A, "paths"},
    {"chdir", A, A, A, "paths"},
    {"fchdir", A, A, A, "paths"},
    {"fcntl", A, A, A, "descriptor flags, locks"},
    {"flock", A, A, A, "torch's extension builder lock file"},
    {"dup", A, A, A, "descriptors"},
    {"dup2", A, A, A, "descriptors"},
    {"dup3", A, A, A, "descriptors"},
    {"pipe", A, A, A, "subprocess, python"},
    {"pipe2", A, A, A, "subprocess, python"},
    {"ioctl", T, T, T, "terminals, CUDA driver; never TIOCSTI"},
    {"fsync", A, A, A, "writes in scratch"},
    {"fdatasync", A, A, A, "writes in scratch"},
    {"truncate", A, A, A, "writes in scratch"},
    {"ftruncate", A, A, A, "writes in scratch, shared memory"},
    {"fallocate", A, A, A, "writes in scratch (RLIMIT_FSIZE bounds it)"},
    {"fadvise64", A, A, A, "I/O hints"},
    {"readahead", A, A, A, "I/O hints"},
    {"sendfile", A, A, A, "file copies (shutil)"},
    {"copy_file_range", A, A, A, "file copies (shutil)"},
    {"splice", A, A, A, "file copies"},
    {"rename", A, A, A, "atomic writes in scratch"},
    {"renameat", A, A, A, "atomic writes in scratch"},
    {"renameat2", A, A, A, "atomic writes in scratch"},
    {"mkdir", A, A, A, "scratch"},
    {"mkdirat", A, A, A, "scratch"},
    {"rmdir", A, A, A, "scratch"},
    {"unlink", A, A, A, "scratch"},
    {"unlinkat", A, A, A, "scratch"},
    {"link", A, A, A, "scratch"},
    {"linkat", A, A, A, "scratch"},
    {"symlink", A, A, A, "scratch; resolved inside the jail only"},
    {"symlinkat", A, A, A, "scratch"},
    {"chown", E, E, E, "EPERM, as without CAP_CHOWN (NVML tries)"},
    {"fchown", E, E, E, "EPERM, as without CAP_CHOWN"},
    {"lchown", E, E, E, "EPERM, as without CAP_CHOWN"},
    {"fchownat", E, E, E, "EPERM, as without CAP_CHOWN"},
    {"mknod", E, E, E, "EPERM, as without CAP_MKNOD (drivers try)"},
    {"mknodat", E, E, E, "EPERM, as without CAP_MKNOD"},
    {"chmod", A, A, A, "built files"},
    {"fchmod", A, A, A, "built files"},
    {"fchmodat", A, A, A, "built files"},
    {"umask", A, A, A, "file modes"},
    {"utime", A, A, A, "build timestamps"},
    {"utimes", A, A, A, "build timestamps"},
    {"utimensat", A, A, A, "build timestamps (ninja)"},
    {"getxattr", A, A, A, "reads only (cp -p, python)"},
    {"lgetxattr", A, A, A, "reads only"},
    {"fgetxattr", A, A, A, "reads only"},
    {"listxattr", A, A, A, "reads only"},
    {"llistxattr", A, A, A, "reads only"},
    {"flistxattr", A, A, A, "reads only"},
    {"inotify_init1", A, A, A, "file watchers; harmless"},
    {"inotify_add_watch", A, A, A, "file watchers"},
    {"inotify_rm_watch", A, A, A, "file watchers"},
    /* --- polling, events, time --- */
    {"select", A, A, A, "event loops"},
    {"pselect6", A, A, A, "event loops"},
    {"poll", A, A, A, "event loops"},
    {"ppoll", A, A, A, "event loops"},
    {"epoll_create", A, A, A, "event loops"},
    {"epoll_create1", A, A, A, "event loops"},
    {"epoll_ctl", A, A, A, "event loops"},
    {"epoll_wait", A, A, A, "event loops"},
    {"epoll_pwait", A, A, A, "event loops"},
    {"epoll_pwait2", A, A, A, "event loops"},
    {"eventfd", A, A, A, "CUDA, torch thread pools"},
    {"eventfd2", A, A, A, "CUDA, torch thread pools"},
    {"signalfd", A, A, A, "event loops"},
    {"signalfd4", A, A, A, "event loops"},
    {"timerfd_create", A, A, A, "event loops"},
    {"timerfd_settime", A, A, A, "event loops"},
    {"timerfd_gettime", A, A, A, "event loops"},
    {"nanosleep", A, A, A, "time"},
    {"clock_nanosleep", A, A, A, "time"},
    {"clock_gettime", A, A, A, "time"},
    {"clock_getres", A, A, A, "time"},
    {"gettimeofday", A, A, A, "time"},
    {"time", A, A, A, "time"},
    {"times", A, A, A, "time"},
    {"getitimer", A, A, A, "timers"},
    {"setitimer", A, A, A, "timers"},
    {"alarm", A, A, A, "timers"},
    {"timer_create", A, A, A, "timers"},
    {"timer_settime", A, A, A, "timers"},
    {"timer_gettime", A, A, A, "timers"},
    {"timer_getoverrun", A, A, A, "timers"},
    {"timer_delete", A, A, A, "timers"},
    {"pause", A, A, A, "signals"},
    {"restart_syscall", A, A, A, "signals"},
    /* --- signals --- */
    {"rt_sigaction", A, A, A, "signal handlers"},
    {"rt_sigprocmask", A, A, A, "signal masks"},
    {"rt_sigreturn", A, A, A, "signal handlers"},
    {"rt_sigsuspend", A, A, A, "signals"},
    {"rt_sigtimedwait", A, A, A, "signals"},
    {"rt_sigpending", A, A, A, "signals"},
    {"rt_sigqueueinfo", A, A, A, "signals (own pid namespace only)"},
    {"rt_tgsigqueueinfo", A, A, A, "signals (own pid namespace only)"},
    {"sigaltstack", A, A, A, "python's faulthandler"},
    {"kill", A, A, A, "own pid namespace only"},
    {"tkill", A, A, A, "own pid namespace only"},
    {"tgkill", A, A, A, "raise(), thread signals"},
    {"pidfd_open", A, A, D, "the referee watches its workers"},
    {"pidfd_send_signal", A, A, D, "own pid namespace only (pidfd_getfd: denied)"},
    /* --- processes and threads --- */
    {"clone", C, C, C, "threads (CUDA runs ~17) and fork"},
    {"clone3", N, N, N, "flags live in memory seccomp cannot read"},
    {"fork", A, A, A, "subprocess"},
    {"vfork", A, A, A, "subprocess"},
    {"execve", A, D, D, "the toolchain; never at run time"},
    {"execveat", A, X, D, "the jail's own exec"},
    {"exit", A, A, A, "threads"},
    {"exit_group", A, A, A, "processes"},
    {"wait4", A, A, A, "subprocess"},
    {"waitid", A, A, A, "subprocess"},
    {"set_tid_address", A, A, A, "thread start-up"},
    {"set_robust_list", A, A, A, "thread start-up"},
    {"get_robust_list", E, E, E, "not needed; reads other threads' lists"},
    {"rseq", A, A, A, "glibc thread start-up"},
    {"futex", A, A, A, "locks"},
    {"futex_waitv", A, A, A, "locks"},
    {"arch_prctl", A, A, A, "thread-local storage"},
    {"prctl", P, P, P, "see prctl_ok[]"},
    {"sched_yield", A, A, A, "spin locks"},
    {"sched_getaffinity", A, A, A, "os.cpu_count, OpenMP"},
    {"sched_setaffinity", A, A, A, "OpenMP thread pinning"},
    {"sched_getparam", A, A, A, "scheduling queries"},
    {"sched_getscheduler", A, A, A, "scheduling queries"},
    {"sched_setscheduler", E, E, E, "real-time classes: refused"},
    {"sched_get_priority_max", A, A, A, "scheduling queries"},
    {"sched_get_priority_min", A, A, A, "scheduling queries"},
    {"sched_getattr", A, A, A, "scheduling queries"},
    {"getpriority", A, A, A, "nice"},
    {"setpriority", A, A, A, "nice (only downwards without privilege)"},
    {"getcpu", A, A, A, "NUMA"},
    {"getpid", A, A, A, "identity"},
    {"getppid", A, A, A, "identity"},
    {"gettid", A, A, A, "identity"},
    {"getuid", A, A, A, "identity"},
    {"geteuid", A, A, A, "identity"},
    {"getgid", A, A, A, "identity"},
    {"getegid", A, A, A, "identity"},
    {"getresuid", A, A, A, "identity"},
    {"getresgid", A, A, A, "identity"},
    {"getgroups", A, A, A, "identity"},
    {"setfsuid", A, A, A, "ncurses opens terminfo with its own ids (import readline, pdb); without capabilities no other id is taken"},
    {"setfsgid", A, A, A, "as setfsuid"},
    {"getpgrp", A, A, A, "process groups"},
    {"getpgid", A, A, A, "process groups"},
    {"setpgid", A, A, E, "process groups (ninja, make); a loaded candidate stays in its group, which the referee stops"},
    {"getsid", A, A, A, "sessions"},
    {"setsid", A, A, E, "sessions (inside the pid namespace); as setpgid"},
    {"capget", A, A, A, "capability queries (all empty)"},
    {"capset", A, A, D, "dropping capabilities (sandbox_narrow)"},
    {"uname", A, A, A, "platform queries"},
    {"sysinfo", A, A, A, "memory size queries"},
    {"getrusage", A, A, A, "resource usage"},
    {"getrlimit", A, A, A, "limits"},
    {"setrlimit", A, A, A, "limits (lowering; raising stops at hard)"},
    {"prlimit64", A, A, A, "limits (own processes only)"},
    {"getrandom", A, A, A, "hash seeds, torch"},
    /* --- sockets: local only; the network namespace has no route anyway --- */
    {"socket", U, U, U, "AF_UNIX only (CUDA; glibc asks nscd)"},
    {"socketpair", U, U, U, "AF_UNIX only (python, multiprocessing)"},
    {"connect", A, A, A, "AF_UNIX only, by socket()"},
    {"bind", A, A, A, "AF_UNIX only, by socket()"},
    {"listen", A, A, A, "AF_UNIX only, by socket()"},
    {"accept", A, A, A, "AF_UNIX only, by socket()"},
    {"accept4", A, A, A, "AF_UNIX only, by socket()"},
    {"getsockname", A, A, A, "socket queries"},
    {"getpeername", A, A, A, "socket queries"},
    {"getsockopt", A, A, A, "socket queries"},
    {"setsockopt", A, A, A, "socket options"},
    {"shutdown", A, A, A, "socket close"},
    {"sendto", A, A, A, "on sockets we hold"},
    {"recvfrom", A, A, A, "on sockets we hold"},
    {"sendmsg", A, A, A, "on sockets we hold; hands over the listener"},
    {"recvmsg", A, A, A, "on sockets we hold"},
    {"sendmmsg", A, A, A, "on sockets we hold"},
    {"recvmmsg", A, A, A, "on sockets we hold"},
    /* --- System V IPC: private to the jail's ipc namespace --- */
    {"shmget", A, A, A, "shared memory (ipc namespace)"},
    {"shmat", A, A, A, "shared memory (ipc namespace)"},
    {"shmdt", A, A, A, "shared memory (ipc namespace)"},
    {"shmctl", A, A, A, "shared memory (ipc namespace)"},
    {"semget", A, A, A, "semaphores (ipc namespace)"},
    {"semop", A, A, A, "semaphores (ipc namespace)"},
    {"semtimedop", A, A, A, "semaphores (ipc namespace)"},
    {"semctl", A, A, A, "semaphores (ipc namespace)"},
    /* --- the filter itself --- */
    {"seccomp", D, F, D, "sandbox_narrow() installs the second filter"},
    {"landlock_create_ruleset", D, A, D, "sandbox_restrict_exec (a JIT's run jail): only restricts"},
    {"landlock_add_rule", D, A, D, "sandbox_restrict_exec"},
    {"landlock_restrict_self", D, A, D, "sandbox_restrict_exec"},
    /* Everything else is denied; named here so a reader sees they were meant:
     * ptrace process_vm_readv process_vm_writev pidfd_getfd kcmp (E7);
     * unshare setns mount umount2 pivot_root chroot open_tree move_mount
     * fsopen fsmount mount_setattr (E9: namespaces, mounts); bpf
     * perf_event_open userfaultfd io_uring_setup io_uring_enter
     * io_uring_register keyctl add_key request_key (E9: kernel attack
     * surface); kexec_load init_module finit_module delete_module reboot
     * swapon acct iopl ioperm modify_ldt personality (E9); setxattr
     * (no attribute changes); setuid setgid
     * setreuid setresuid setgroups (no identity changes); socket(AF_INET*,
     * AF_NETLINK, AF_PACKET) (E1). */
};
// clang-format on

/* prctl options any stage may use (arg 0). */
static const struct {
	int option;
	const char *why;
} prctl_ok[] = {
    {PR_SET_NAME, "thread names (torch, CUDA)"},
    {PR_GET_NAME, "thread names"},
    {PR_GET_DUMPABLE, "queries"},
    {PR_SET_DUMPABLE, "the referee hides its memory from workers"},
    {PR_SET_PDEATHSIG, "workers die with the referee"},
    {PR_GET_PDEATHSIG, "queries"},
    {PR_SET_NO_NEW_PRIVS, "sandbox_narrow (already set)"},
    {PR_GET_NO_NEW_PRIVS, "queries"},
    {PR_CAPBSET_READ, "capability queries"},
    {PR_CAPBSET_DROP, "sandbox_narrow drops what is left"},
    {PR_CAP_AMBIENT, "sandbox_narrow clears ambient capabilities"},
    {PR_GET_SECUREBITS, "queries"},
    {PR_GET_SECCOMP, "queries"},
    {PR_GET_TIMERSLACK, "queries"},
    {PR_SET_TIMERSLACK, "event loops"},
    {PR_GET_THP_DISABLE, "allocator queries"},
    {0x53564d41 /* PR_SET_VMA */, "glibc names anonymous mappings"},
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct {
	struct sock_filter *prog;
	unsigned short len;
	int rc;
} compiled[5][2]; /* [compile, run, narrow, narrow-in-jail, run+exec][kill, notify] */

/* Adds one table cell for syscall nr with the stage's deny action. */
static int add_cell(scmp_filter_ctx ctx, int nr, int cell, uint32_t ok)
{
	int rc = 0;

	switch (cell) {
	case D:
		return 0;
	case A:
		return seccomp_rule_add(ctx, ok, nr, 0);
	case N:
		return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
	case E:
		return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	case U:
		return seccomp_rule_add(ctx, ok, nr, 1,
					SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, AF_UNIX));
	case C:
		return seccomp_rule_add(ctx, ok, nr, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS, 0));
	case X:
		return seccomp_rule_add(ctx, ok, nr, 2,
					SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, SBX_FD_EXEC),
					SCMP_A4(SCMP_CMP_MASKED_EQ, 0xffffffffu, AT_EMPTY_PATH));
	case T:
		/* Allowed, except the two requests that type into a terminal
		 * (refused quietly: without a controlling tty they fail anyway). */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
		if (!rc)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
					      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
		if (!rc)
			rc = seccomp_rule_add(ctx, ok, nr, 0);
		return rc;
	case P:
		for (size_t i = 0; !rc && i < ST_ARRAY_LEN(prctl_ok); i++)
			rc = seccomp_rule_add(
			    ctx, ok, nr, 1,
			    SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint64_t)prctl_ok[i].option));
		return rc;
	case F:
		/* Installing a filter, and the probes libseccomp makes first
		 * (strict mode, which it expects to be refused); our own probe. */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), nr, 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, SECCOMP_SET_MODE_STRICT));
		if (!rc)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(SBX_PROBE_ERRNO), nr, 1,
					      SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, SBX_PROBE_OP));
		if (!rc)
			rc = seccomp_rule_add(ctx, ok, nr, 1,
					      SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, SECCOMP_SET_MODE_FILTER));
		if (!rc)
			rc = seccomp_rule_add(ctx, ok, nr, 1,
					      SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, SECCOMP_GET_ACTION_AVAIL));
		if (!rc)
			rc = seccomp_rule_add(ctx, ok, nr, 1,
					      SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, SECCOMP_GET_NOTIF_SIZES));
		return rc;
	}
	return -EINVAL;
}

static int cell_of(size_t i, int which)
{
	if (which == 4) /* RUN+EXEC: the run column, execve allowed */
		return !strcmp(policy[i].name, "execve") ? A : policy[i].run;
	return which == 0 ? policy[i].compile : which == 1 ? policy[i].run : policy[i].narrow;
}

/* Exports the BPF through a memfd: libseccomp 2.5 has no in-memory export. */
static int export(scmp_filter_ctx ctx, struct sock_filter **prog, unsigned short *len)
{
	int fd = memfd_create("stark-bpf", MFD_CLOEXEC), rc = ST_ESYS;
	off_t size;

	if (fd < 0)
		return ST_ESYS;
	if (seccomp_export_bpf(ctx, fd) < 0)
		goto out;
	size = lseek(fd, 0, SEEK_CUR);
	if (size <= 0 || size % (off_t)sizeof(struct sock_filter) ||
	    size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
		goto out;
	*prog = malloc((size_t)size);
	if (!*prog) {
		rc = ST_ENOMEM;
		goto out;
	}
	if (pread(fd, *prog, (size_t)size, 0) != size) {
		free(*prog);
		*prog = NULL;
		goto out;
	}
	*len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
	rc = 0;
out:
	close(fd);
	return rc;
}

/*
 * Compiles one policy.  which: 0 compile, 1 run, 2 narrow (full allowlist),
 * 3 narrow inside a run jail (the difference; see the top of the file),
 * 4 run+exec.  The difference is the same in both run jails: execve is
 * denied by RUN and NARROW alike, so the filter underneath decides.
 */
static int build(int which, bool notify, struct sock_filter **prog, unsigned short *len)
{
	uint32_t deny = notify ? SCMP_ACT_NOTIFY : SCMP_ACT_KILL_PROCESS;
	scmp_filter_ctx ctx = seccomp_init(which == 3 ? SCMP_ACT_ALLOW : deny);
	int rc = 0;

	if (!ctx)
		return ST_ENOMEM;
	/* int 0x80 and x32 entries: denied as a whole, reported where possible
	 * (the difference filter lets the RUN filter deny and report them). */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, which == 3 ? SCMP_ACT_ALLOW : deny) <
	    0) {
		rc = ST_ESYS;
		goto out;
	}
	for (size_t i = 0; !rc && i < ST_ARRAY_LEN(policy); i++) {
		int nr = seccomp_syscall_resolve_name(policy[i].name), r;

		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		if (which != 3)
			r = add_cell(ctx, nr, cell_of(i, which), SCMP_ACT_ALLOW);
		else if (policy[i].narrow == policy[i].run)
			r = 0; /* the RUN filter underneath decides */
		else if (policy[i].narrow == D)
			r = add_cell(ctx, nr, policy[i].run, SCMP_ACT_KILL_PROCESS);
		else if (policy[i].narrow == E)
			r = add_cell(ctx, nr, E, SCMP_ACT_ALLOW); /* refused quietly */
		else
			r = -EINVAL; /* NARROW may only deny more than RUN */
		if (r < 0)
			rc = stark_error(ST_ESYS, "sandbox: seccomp rule for %s", policy[i].name);
	}
	if (!rc)
		rc = export(ctx, prog, len);
out:
	seccomp_release(ctx);
	return rc;
}

static void build_all(void)
{
	for (int w = 0; w < 5; w++)
		for (int n = 0; n < (w == 2 || w == 3 ? 1 : 2); n++)
			compiled[w][n].rc = build(w, n, &compiled[w][n].prog, &compiled[w][n].len);
}

static int get(int which, bool notify, struct sock_fprog *out)
{
	pthread_once(&once, build_all);
	if (compiled[which][notify].rc)
		return compiled[which][notify].rc;
	out->filter = compiled[which][notify].prog;
	out->len = compiled[which][notify].len;
	return 0;
}

int sbx_policy_get(enum sandbox_stage stage, bool run_exec, bool notify, struct sock_fprog *out)
{
	if (stage != SANDBOX_COMPILE && stage != SANDBOX_RUN)
		return ST_EINVAL;
	return get(stage == SANDBOX_COMPILE ? 0 : run_exec ? 4 : 1, notify, out);
}

const char *sbx_policy_name(enum sandbox_stage stage)
{
	return stage == SANDBOX_COMPILE ? "compile" : stage == SANDBOX_RUN ? "run" : "none";
}

const char *sandbox_syscall_name_arch(long nr, uint32_t arch)
{
	static _Thread_local char buf[64];
	uint32_t token = arch ? arch : SCMP_ARCH_NATIVE;
	char *name = seccomp_syscall_resolve_num_arch(token, (int)nr);

	if (!name)
		return NULL;
	snprintf(buf, sizeof(buf), "%s%s", token == SCMP_ARCH_X86 ? "i386 " : "", name);
	free(name);
	return buf;
}

const char *sandbox_syscall_name(long nr)
{
	return sandbox_syscall_name_arch(nr, 0);
}

/* The narrow policy's program (sandbox_narrow, narrow.c). */
int sbx_policy_narrow(bool in_jail, struct sock_fprog *out)
{
	return get(in_jail ? 3 : 2, false, out);
}

bool sbx_policy_in_run_jail(void)
{
	return syscall(SYS_seccomp, SBX_PROBE_OP, 0, NULL) < 0 && errno == SBX_PROBE_ERRNO;
}

/* The calls a kill by the narrow difference can have been ("socket, ..."). */
static char narrow_kills[256];
static pthread_once_t narrow_kills_once = PTHREAD_ONCE_INIT;

static void list_narrow_kills(void)
{
	size_t n = 0;

	for (size_t i = 0; i < ST_ARRAY_LEN(policy); i++) {
		if (policy[i].narrow != D || policy[i].run == D)
			continue;
		int w = snprintf(narrow_kills + n, sizeof(narrow_kills) - n, "%s%s", n ? ", " : "",
				 policy[i].name);

		if (w < 0 || (size_t)w >= sizeof(narrow_kills) - n)
			break;
		n += (size_t)w;
	}
}

const char *sbx_policy_narrow_kills(void)
{
	pthread_once(&narrow_kills_once, list_narrow_kills);
	return narrow_kills;
}
