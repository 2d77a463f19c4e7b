/*
 * sandbox_int.h -- what the files of sandbox/ share and nobody else sees.
 *
 * The parent (spawn.c) prepares everything that needs memory allocation --
 * the compiled seccomp program, the mount plan, the uid/gid maps, the cgroup
 * -- before it clones, because the child of a raw clone3() in a possibly
 * multithreaded process must not call malloc.  The child (jail.c) then only
 * walks the plan with system calls, in one linear sequence, and execs (or,
 * in function mode, calls the caller's function in pid 2).
 */
#ifndef STARK_SANDBOX_INT_H
#define STARK_SANDBOX_INT_H

#include <linux/filter.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/sandbox.h"

/* Descriptor numbers the jail reserves (sync below SBX_NOFILE; exec at it). */
#define SBX_NOFILE	  1024	     /* RLIMIT_NOFILE inside: fds are 0..1023 */
#define SBX_FD_EXEC	  SBX_NOFILE /* the program, for the one allowed execveat */
#define SBX_MAX_FDS	  64	     /* mapped descriptors */
#define SBX_NOBODY	  65534u     /* who a root caller is inside the jail */
#define SBX_MAX_MOUNTS	  48
#define SBX_MAX_LISTENERS 1 /* seccomp listeners per child: the jail filter's */

/* Kinds of entries in the mount plan, applied in order inside the new root. */
enum sbx_mount_kind {
	SBX_M_BIND,    /* bind src at dst (ro unless writable) */
	SBX_M_SYMLINK, /* dst -> target (src), e.g. /lib -> usr/lib */
	SBX_M_TMPFS,   /* size-capped tmpfs at dst */
	SBX_M_PROC,    /* a read-only proc of the new pid namespace at dst */
	SBX_M_DEV      /* bind a device node src at dst */
};

struct sbx_mount {
	enum sbx_mount_kind kind;
	char src[256];
	char dst[256];
	bool writable;
	bool optional; /* skip silently when src does not exist */
	bool is_dir;   /* src is a directory (mountpoint to create) */
	bool noexec;   /* tmpfs: no exec, no PROT_EXEC mappings of its files */
	uint64_t size; /* tmpfs size in bytes */
	unsigned mode; /* tmpfs mode */
};

/* cgroup of one evaluation: a v2 leaf, or one group per v1 controller. */
struct sbx_cgroup {
	int version; /* 0 none, 1 or 2 */
	char v2[512];
	char v1[3][512]; /* memory, pids, cpu ("" when absent) */
	int v2fd;	 /* O_DIRECTORY fd for CLONE_INTO_CGROUP, -1 if none */
	uint64_t oom_before;
};

/* Everything the child needs, prepared by the parent before clone. */
struct sbx_plan {
	enum sandbox_stage stage;
	unsigned layers; /* layers to apply */
	const char *path; /* the program; in function mode, a path to bind or NULL */
	char *const *argv;
	char *const *envp;
	/* Function mode (sandbox_spawn_fn): what pid 2 calls instead of exec,
	 * and the caller's signal state, which it gets back first. */
	sandbox_entry fn;
	void *fn_arg;
	struct sigaction sigact[NSIG];
	sigset_t sigmask;
	int nfds;
	struct sandbox_fd fds[SBX_MAX_FDS];
	int sync_fd;   /* child end of the parent<->child socket */
	int status_fd; /* write end of the status pipe (init relays), -1 if none */
	int nmounts;
	struct sbx_mount mounts[SBX_MAX_MOUNTS];
	char workdir[256];
	uint64_t mem_bytes, pids, fsize_bytes, cpu_seconds;
	struct sock_fprog filter; /* compiled; len 0 = no filter */
	bool filter_notify;	  /* filter returns USER_NOTIF: send listener */
	bool drop_groups;	  /* setgroups(0, NULL) possible (root caller) */
};

/* One failure report from the child before exec. */
struct sbx_report {
	int err;       /* errno */
	char msg[200]; /* "mount tmpfs on /tmp" */
};

/* mounts.c: the stage's mount plan (system paths, scratch, /dev, /proc). */
ST_WUR int sbx_plan_mounts(struct sbx_plan *p, const struct sandbox_config *cfg);

/* jail.c: the child side; never returns. */
ST_NORETURN void sbx_child(const struct sbx_plan *p);

/* policy.c */
/* Compiles the filter for a stage (cached; owned by policy.c). */
/* run_exec: the run stage's RUN+EXEC policy (sandbox_config.run_exec). */
ST_WUR int sbx_policy_get(enum sandbox_stage stage, bool run_exec, bool notify,
			  struct sock_fprog *out);
const char *sbx_policy_name(enum sandbox_stage stage);
/* NARROW: the difference to RUN inside a run jail, a full allowlist outside. */
ST_WUR int sbx_policy_narrow(bool in_jail, struct sock_fprog *out);
bool sbx_policy_in_run_jail(void);
const char *sbx_policy_narrow_kills(void);

/* narrow.c: shared with jail.c (no allocation; usable in the child). */
ST_WUR int sbx_drop_caps(void);
ST_WUR int sbx_send_fd(int sock, int fd);
#define SBX_FD_SYNC   (SBX_NOFILE - 1) /* close-on-exec; EOF: the program exec'd */
#define SBX_FD_STATUS (SBX_NOFILE - 2) /* init -> parent: the program's wait status */
/* Name of a syscall of an audit arch ("socket", "i386 socketcall"), or NULL. */
const char *sandbox_syscall_name_arch(long nr, uint32_t arch);

/* cgroup.c */
int sbx_cgroup_version(void);
ST_WUR int sbx_cgroup_create(struct sbx_cgroup *cg, const struct sandbox_config *cfg);
ST_WUR int sbx_cgroup_attach(const struct sbx_cgroup *cg, pid_t pid);
void sbx_cgroup_kill(const struct sbx_cgroup *cg);
bool sbx_cgroup_oom(const struct sbx_cgroup *cg);
bool sbx_cgroup_pids_hit(const struct sbx_cgroup *cg);
void sbx_cgroup_destroy(struct sbx_cgroup *cg);

/* layers.c */
void sbx_warn_missing_once(enum sandbox_stage stage, unsigned missing);

#endif
