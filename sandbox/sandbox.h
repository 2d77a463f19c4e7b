/*
 * sandbox.h -- turning a fork into a jail, and watching it from outside.
 *
 * sandbox_spawn() clones the child straight into new user, mount, pid,
 * network, ipc and uts namespaces and a cgroup, and the child builds its
 * jail as one linear sequence (sandbox/jail.c): descriptors, environment,
 * a minimal root (pivot_root), limits, no capabilities, no_new_privs, an
 * init that stays pid 1 while the program runs as pid 2, the stage's
 * seccomp filter, exec.  The parent keeps a handle and enforces the
 * wall-clock deadline in sandbox_wait(), which kills the whole process tree
 * when it passes, when the filter reports a forbidden call, or when the
 * memory or pids limit is hit, and says in words how the child ended
 * ("killed by seccomp: syscall socket", "deadline of 30 s passed; process
 * tree killed", "memory limit of 4096 MiB reached; process tree killed").
 *
 * Inside a jail: the caller's uid and gid (root becomes nobody, 65534,
 * inside; outside it stays the caller's), /usr and the /lib, /bin links
 * read-only, a few /etc files, /dev with null, zero, full, random, urandom
 * and a small /dev/shm (plus the GPU's nodes and /sys, read-only, in a run
 * jail with gpu_index >= 0), the jail's own /proc (kernel-wide parts
 * read-only or hidden), a size-capped tmpfs at /tmp, the caller's binds,
 * and the program itself, read-only at its own path.  The program must be
 * an ELF binary given by absolute path: it is exec'd through a descriptor.
 *
 * sandbox_spawn_fn() builds the same jail around a function of the caller
 * instead of a program (a zygote's fork, below).
 *
 * Layers that a machine cannot provide are reported once; sandbox_spawn()
 * refuses (ST_EDENIED) when cfg->required layers are missing, unless
 * cfg->insecure, and records the layers applied in the handle.
 *
 * The code that builds a jail links libc and libseccomp only.  SECURITY.md
 * says what each layer stops and what it does not.
 */
#ifndef STARK_SANDBOX_H
#define STARK_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"

enum sandbox_stage {
	SANDBOX_NONE = 0,    /* plain fork+exec: fds closed, env exact, deadline,
				process group killed; no jail */
	SANDBOX_COMPILE = 1, /* exec allowed for the toolchain, no GPU, no network */
	SANDBOX_RUN = 2	     /* no exec after the program's own, assigned GPU only,
				no network; the program narrows (sandbox_narrow) */
};

/* Layers, as bits; sandbox_layers_str() names them ("userns,netns,..."). */
enum sandbox_layer {
	SANDBOX_L_FDS = 1u << 0,     /* descriptors above the mapped ones closed */
	SANDBOX_L_ENV = 1u << 1,     /* environment reduced to the allowlist */
	SANDBOX_L_USERNS = 1u << 2,  /* new user namespace, no host privileges */
	SANDBOX_L_NETNS = 1u << 3,   /* new network namespace: no interfaces */
	SANDBOX_L_PIDNS = 1u << 4,   /* new pid namespace: tree dies with its init */
	SANDBOX_L_MNTNS = 1u << 5,   /* new mount namespace + pivot_root */
	SANDBOX_L_IPCUTS = 1u << 6,  /* new ipc and uts namespaces */
	SANDBOX_L_CGROUP = 1u << 7,  /* cgroup limits (v2 leaf or v1 controllers) */
	SANDBOX_L_RLIMIT = 1u << 8,  /* rlimits */
	SANDBOX_L_NNP = 1u << 9,     /* no_new_privs */
	SANDBOX_L_SECCOMP = 1u << 10 /* seccomp allowlist, kill process */
};
#define SANDBOX_L_ALL 0x7ffu

/* A path made visible inside the jail: read-only, nosuid, nodev, all its
 * submounts included, unless writable.  A symlinked src whose dst is
 * itself (/lib -> usr/lib) becomes the same symlink. */
struct sandbox_bind {
	const char *src; /* host path */
	const char *dst; /* path inside the jail (NULL = same as src) */
	bool writable;
};

/* A descriptor handed to the child at a fixed number (dup2 before exec). */
struct sandbox_fd {
	int parent_fd; /* descriptor in the parent */
	int child_fd;  /* number in the child (0, 1, 2, 3, ...) */
};

struct sandbox_config {
	enum sandbox_stage stage;
	const struct sandbox_bind *binds; /* borrowed for the spawn call */
	size_t nbinds;
	const struct sandbox_fd *fds; /* borrowed; all others are closed */
	size_t nfds;
	const char *const *env; /* NULL-terminated "K=V" list; all the
				   child gets (borrowed) */
	int gpu_index;		/* -1: no GPU device nodes */
	uint64_t mem_bytes;	/* memory.max (else RLIMIT_DATA); 0 = no cap */
	uint64_t oom_grace_ms;	/* after the first OOM kill in the cgroup, the
				   tree may run this long before it is killed
				   (a supervising process inside reports whose
				   process the kernel chose; v2 then kills one
				   process, not the group); 0 = at once [0] */
	uint64_t pids;		/* pids.max and RLIMIT_NPROC; 0 = no cap */
	uint64_t scratch_bytes; /* size of the tmpfs at /tmp (0: 256 MiB) */
	uint64_t fsize_bytes;	/* RLIMIT_FSIZE; 0 = no cap */
	uint64_t cpu_seconds;	/* RLIMIT_CPU; 0 = no cap */
	uint64_t wall_ms;	/* the deadline sandbox_wait() enforces; 0 = none */
	uint64_t cpu_percent;	/* cgroup cpu.max: 100 = one CPU; 0 = no cap */
	const char *workdir;	/* cwd inside the jail (NULL = /tmp, the scratch) */
	unsigned required;	/* layers the caller insists on [all; none: fds,env] */
	bool insecure;		/* run even when required layers are missing */
	bool run_exec;		/* SANDBOX_RUN only: the filter allows execve
				   (RUN+EXEC, policy.c), for a JIT that execs
				   its compiler at first call; the program
				   must restrict what may be exec'd
				   (sandbox_restrict_exec) before it runs
				   untrusted code [false] */
	pid_t owner_pid;	/* the pid the cgroup is named after (0: ours); see
				   sandbox_spawn_fn() */
};

void sandbox_config_init(struct sandbox_config *cfg, enum sandbox_stage stage);

/* How a jailed child ended (in a jail: how the program, pid 2, ended). */
enum sandbox_end {
	SANDBOX_EXITED = 0,   /* code in .code */
	SANDBOX_SIGNALED = 1, /* signal in .sig */
	SANDBOX_SECCOMP = 2,  /* a forbidden call; .syscall_nr, -1 when only the
				 narrow filter's SIGSYS says so */
	SANDBOX_DEADLINE = 3, /* wall clock passed; tree killed */
	SANDBOX_OOM = 4,      /* the cgroup's first OOM kill; tree killed */
	SANDBOX_PIDS = 5,     /* pids.max refused a fork; tree killed (or the
				 child failed after hitting it) */
	SANDBOX_CPU = 6	      /* RLIMIT_CPU (SIGXCPU) */
};

struct sandbox_exit {
	enum sandbox_end how;
	int code;
	int sig;
	long syscall_nr;  /* -1 when unknown */
	uint64_t wall_ns; /* spawn to reap */
	char why[256];	  /* e.g. "killed by seccomp: syscall socket" */
};

struct sandbox_child; /* opaque */

/*
 * Spawns path (absolute, an ELF binary) with argv in a jail built from cfg;
 * returns once the program is exec'd.  On success *out owns the child and
 * must be passed to sandbox_wait() and then sandbox_child_free().  Returns
 * ST_EDENIED when cfg->required layers are missing and cfg->insecure is
 * false (nothing is run then), ST_EINVAL/ST_ENOENT for a bad config or a
 * missing path, ST_ESYS when the jail could not be built (the message names
 * the step, e.g. "sandbox: mount proc on /proc: ...").
 */
ST_WUR int sandbox_spawn(const struct sandbox_config *cfg, const char *path, char *const argv[],
			 struct sandbox_child **out);

/* What the jailed process of sandbox_spawn_fn() runs; its return value is
 * the exit status. */
typedef int (*sandbox_entry)(void *arg);

/*
 * The function-entry form of sandbox_spawn(), for a zygote: the same jail,
 * built by the same sequence (namespaces, cgroup, mounts, limits, no
 * capabilities, no_new_privs, an init as pid 1, the stage's filter with its
 * listener handed to us), but instead of exec'ing a program the jailed
 * process (pid 2; with no pid namespace, the child itself) calls fn(arg)
 * and _exit()s with its return value.  Returns once fn is about to run;
 * sandbox_wait(), sandbox_kill() and sandbox_child_fd() work unchanged.
 *
 * What differs from an exec:
 *   - fn runs in a copy of the caller's memory (a forked interpreter, for
 *     instance): nothing secret may be in it;
 *   - the descriptors are the mapped ones only, as after exec (the jail's
 *     own sync socket and status pipe are closed before fn runs);
 *   - the signal dispositions and mask are the caller's again when fn runs
 *     (the jail's set-up runs with default ones), as after fork();
 *   - cfg->env, if not NULL, becomes environ (libc's; an embedded
 *     interpreter keeps the copy it made at start-up); NULL keeps ours;
 *   - no exec happens, so the run stage's one permitted exec (execveat of
 *     the program's descriptor, policy.c) matches nothing: that descriptor
 *     is never opened, and every exec is a reported seccomp kill;
 *   - in a jail with a pid namespace, pid 2 is split off from init with
 *     libc's fork(), so that libc's per-thread state (the cached thread
 *     id, the robust list) and atfork handlers are a child's, as fn will
 *     call into libc freely.  Without one (stage none, or insecure), fn
 *     runs in the raw clone, whose libc still holds the caller's thread id:
 *     harmless, as no other thread can take that id while the caller lives
 *     (it does, until it has reaped the child).
 * path, if not NULL, is made visible read-only at its own path, as the
 * program is by sandbox_spawn() (e.g. the caller's own binary, so that
 * /proc/self/exe resolves inside).
 *
 * The caller must be single-threaded (a freshly fork()ed process is): the
 * child of the raw clone3() runs libc before fn, and a lock held by another
 * thread at the clone would stay held forever.  Returns ST_EINVAL when the
 * caller has other threads, else as sandbox_spawn().  A zygote's children
 * set cfg->owner_pid to the orchestrator's pid, so that the cgroups they
 * make carry its name (stark-OWNER-PID-N) and its sweeps and checks find
 * them.
 */
ST_WUR int sandbox_spawn_fn(const struct sandbox_config *cfg, const char *path, sandbox_entry fn,
			    void *arg, struct sandbox_child **out);

/*
 * The layer check that sandbox_spawn() makes before it builds anything:
 * 0 when every layer cfg->required names is available for cfg->stage, or
 * when cfg->insecure (the missing ones are reported once per process);
 * ST_EDENIED (reported once) otherwise.  For a process that has another
 * one build its jails (a zygote): it decides, and reports, here.
 */
ST_WUR int sandbox_check_layers(const struct sandbox_config *cfg);

/*
 * cgroup v2: the directory under which jails' groups are made, once probed
 * (NULL on cgroup v1 or without cgroups).  A process started to build jails
 * for us (a zygote) gets it through sandbox_set_cgroup_parent(), because
 * its own probe, made from a group it shares with us, would not find it.
 */
const char *sandbox_cgroup_parent(void);
/* Must be called before the first spawn or probe; ST_EINVAL after it. */
ST_WUR int sandbox_set_cgroup_parent(const char *dir);
/*
 * The memory this process and its jails may take together: the machine's
 * physical memory, or less where our own cgroup or one above it is limited
 * (v2 memory.max, v1 memory.limit_in_bytes; a container's --memory).  0
 * where not even the physical memory is known.
 */
uint64_t sandbox_memory_limit(void);
/*
 * Removes the empty groups left by processes that are gone (a zygote's
 * children killed with it); run once at every probe, and again by a caller
 * whose zygote died.
 */
void sandbox_cgroup_sweep(void);
pid_t sandbox_child_pid(const struct sandbox_child *c);
/* Layers actually applied to this child. */
unsigned sandbox_child_layers(const struct sandbox_child *c);
/*
 * A pollable descriptor (an epoll set of the pidfd, the seccomp listener
 * and, with a cgroup, a 250 ms tick) that becomes readable when the child
 * ends, when the filter reports a forbidden call, or when the limits are to
 * be looked at; call sandbox_wait(c, 0, ...) then, which kills the tree on
 * a report or a limit hit.  Borrowed until sandbox_child_free().
 */
int sandbox_child_fd(const struct sandbox_child *c);
/* Kills the whole tree now (idempotent). */
void sandbox_kill(struct sandbox_child *c);
/*
 * Waits until the child ends or its deadline passes (then kills the tree),
 * fills *ex.  timeout_ms < 0 waits for the end; 0 polls, returning
 * ST_ETIMEDOUT (nothing filled) if the child still runs.  Every call also
 * handles the filter's reports and the limits (see sandbox_child_fd).
 */
ST_WUR int sandbox_wait(struct sandbox_child *c, int timeout_ms, struct sandbox_exit *ex);
void sandbox_child_free(struct sandbox_child *c);

/* Layers this machine can provide for a stage, probed once and cached. */
unsigned sandbox_layers_available(enum sandbox_stage stage);
/* Writes "userns,netns,..." into buf. */
const char *sandbox_layers_str(unsigned layers, char *buf, size_t len);
/* Parses the same form; ST_EINVAL on an unknown name. */
ST_WUR int sandbox_layers_parse(const char *s, unsigned *out);

/*
 * Whether this kernel takes 32-bit system calls (int 0x80) from 64-bit
 * processes, probed once in a throw-away child.  Every jail's filter denies
 * that entry and names the call ("killed by seccomp: syscall i386 getpid");
 * a kernel built or booted without IA32 emulation (ia32_emulation=0, and
 * confidential-computing guests, where Linux 6.7+ turns it off) has no such
 * entry: the instruction faults with SIGSEGV before any filter sees it, so
 * there is no call to deny or to name.  Always false off x86-64.
 */
bool sandbox_compat_entry(void);

/*
 * In the process that will load untrusted code, after its trusted start-up
 * (Python, torch, the CUDA context) and before the code is loaded: drops
 * every capability, sets no_new_privs and installs the narrow filter on
 * every thread (TSYNC).  Inside a run jail it adds to the jail's filter,
 * which still reports denied calls by name; outside one it is a full
 * allowlist that kills (not for compile jails, whose filter forbids
 * seccomp() and would end the evaluation).  The referee should also make
 * itself non-dumpable
 * (PR_SET_DUMPABLE 0) before it forks workers.  Returns 0, ST_ESYS, or
 * ST_EDENIED if capabilities remain.
 */
ST_WUR int sandbox_narrow(void);

/*
 * Landlock: from now on, this process and everything it forks or execs may
 * execute only the files named by paths (NULL-terminated; a folder allows
 * every file beneath it; symbolic links are followed, so /usr/bin/gcc
 * allows its target) -- every other execve fails with EACCES, the ELF
 * interpreter of an allowed program included, so it must be listed too.
 * Paths that do not exist are skipped and counted in *skipped (may be
 * NULL).  Needs no_new_privs (set in every jail; sandbox_narrow sets it
 * too).  Other file access is left as it was (the jail's mounts decide).
 * Returns 0, ST_EDENIED where the kernel has no Landlock (Linux < 5.13 or
 * not enabled), or ST_ESYS; err names the step.
 */
/* The kernel's Landlock ABI version (>= 1), or 0 where it has none. */
int sandbox_landlock_abi(void);

ST_WUR int sandbox_restrict_exec(const char *const *paths, size_t *skipped, char *err,
				 size_t errlen);

/* Name of a syscall number on this architecture ("socket"), or NULL;
 * borrowed until the next call from this thread. */
const char *sandbox_syscall_name(long nr);

#endif
