/*
 * mounts.c -- what a jail's file system holds, decided in the parent.
 *
 * The mount plan is a list applied in order inside the new root (jail.c):
 * the system directories read-only (or, where the host has merged /usr, the
 * same symlinks), the few /etc files that the dynamic loader, Python and the
 * toolchain read, /dev with only null, zero, random/urandom and -- in the run
 * stage on a GPU machine -- the assigned GPU's nodes, a read-only /proc of
 * the new pid namespace, a size-capped tmpfs at /tmp as scratch, then the
 * caller's binds, then the program itself read-only.  Nothing else of the
 * host exists inside: no /home, /root, /run, /var, /sys, no orchestrator
 * store, no other /etc file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "sandbox/sandbox_int.h"

/* Host paths every jail sees (read-only; optional ones may be absent). */
static const struct {
	const char *path;
	bool optional;
} system_paths[] = {
    {"/usr", false},		  /* toolchain, python, torch, libraries */
    {"/bin", true},		  /* symlink to usr/bin on merged-/usr hosts */
    {"/sbin", true},		  /* (ldconfig, for ctypes.util) */
    {"/lib", true},		  /* the dynamic loader's home */
    {"/lib64", true},		  /* ld-linux-x86-64.so.2 */
    {"/lib32", true},		  /* multilib toolchains */
    {"/etc/ld.so.cache", true},	  /* library lookup */
    {"/etc/ld.so.conf", true},	  /* read by ldconfig -p (ctypes) */
    {"/etc/ld.so.conf.d", true},  /* " */
    {"/etc/alternatives", true},  /* Debian: cc, c++, python links */
    {"/etc/passwd", true},	  /* getpwuid() for our uid (python, ninja) */
    {"/etc/group", true},	  /* getgrgid() */
    {"/etc/nsswitch.conf", true}, /* how getpw* look up: files only */
    {"/etc/localtime", true},	  /* time zone for logs */
    {"/etc/python3.11", true},	  /* Debian's sitecustomize */
    {"/etc/nvidia", true},	  /* driver profiles, if any */
};

/* GPU nodes of the run stage; %d is the assigned GPU. */
static const struct {
	const char *fmt;
	bool optional;
} gpu_nodes[] = {
    {"/dev/nvidiactl", false},	     /* the control device every process opens */
    {"/dev/nvidia%d", false},	     /* the assigned GPU only */
    {"/dev/nvidia-uvm", false},	     /* unified memory (cudaMalloc needs it) */
    {"/dev/nvidia-uvm-tools", true}, /* profiler counters, opened at init */
};

static int add(struct sbx_plan *p, enum sbx_mount_kind kind, const char *src, const char *dst)
{
	struct sbx_mount *m;

	if (p->nmounts >= SBX_MAX_MOUNTS)
		return stark_error(ST_ETOOBIG, "sandbox: too many mounts");
	if (!dst || dst[0] != '/' || strstr(dst, "/../") || strlen(dst) >= sizeof(m->dst) ||
	    (src && strlen(src) >= sizeof(m->src)))
		return stark_error(ST_EINVAL, "sandbox: bad mount destination %s",
				   dst ? dst : "(null)");
	m = &p->mounts[p->nmounts++];
	memset(m, 0, sizeof(*m));
	m->kind = kind;
	snprintf(m->src, sizeof(m->src), "%s", src ? src : "");
	snprintf(m->dst, sizeof(m->dst), "%s", dst);
	return 0;
}

/* A host path as it is: a symlink stays a symlink, anything else is bound. */
static int add_host(struct sbx_plan *p, const char *path, const char *dst, bool writable,
		    bool optional)
{
	struct stat st;
	char target[256];
	ssize_t n;
	int rc;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT && optional)
			return 0;
		return stark_error(ST_ENOENT, "sandbox: cannot bind %s: %s", path, strerror(errno));
	}
	if (S_ISLNK(st.st_mode) && strcmp(path, dst) == 0) {
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			return stark_error(ST_ESYS, "sandbox: readlink %s: %s", path,
					   strerror(errno));
		target[n] = '\0';
		return add(p, SBX_M_SYMLINK, target, dst);
	}
	if (stat(path, &st) < 0)
		return stark_error(ST_ENOENT, "sandbox: cannot bind %s: %s", path, strerror(errno));
	rc = add(p, SBX_M_BIND, path, dst);
	if (rc)
		return rc;
	p->mounts[p->nmounts - 1].writable = writable;
	p->mounts[p->nmounts - 1].optional = optional;
	p->mounts[p->nmounts - 1].is_dir = S_ISDIR(st.st_mode);
	return 0;
}

static int add_tmpfs(struct sbx_plan *p, const char *dst, uint64_t size, unsigned mode, bool noexec)
{
	int rc = add(p, SBX_M_TMPFS, NULL, dst);

	if (rc)
		return rc;
	p->mounts[p->nmounts - 1].size = size;
	p->mounts[p->nmounts - 1].mode = mode;
	p->mounts[p->nmounts - 1].noexec = noexec;
	return 0;
}

static int add_dev(struct sbx_plan *p, const char *node, bool optional)
{
	int rc;

	if (access(node, F_OK) < 0) {
		if (optional)
			return 0;
		return stark_error(ST_ENOENT, "sandbox: device %s missing", node);
	}
	rc = add(p, SBX_M_DEV, node, node);
	if (rc == 0)
		p->mounts[p->nmounts - 1].optional = optional;
	return rc;
}

/* /dev: a tmpfs with a handful of nodes bound from the host (no mknod in a
 * user namespace), /dev/shm for POSIX semaphores, and the usual links. */
static int plan_dev(struct sbx_plan *p, const struct sandbox_config *cfg)
{
	static const char *const nodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
					    "/dev/urandom"};
	static const char *const links[][2] = {{"/proc/self/fd", "/dev/fd"},
					       {"/proc/self/fd/0", "/dev/stdin"},
					       {"/proc/self/fd/1", "/dev/stdout"},
					       {"/proc/self/fd/2", "/dev/stderr"}};
	char node[64];
	int rc;

	rc = add_tmpfs(p, "/dev", 64 << 10, 0755, true);
	for (size_t i = 0; !rc && i < ST_ARRAY_LEN(nodes); i++)
		rc = add_dev(p, nodes[i], false);
	for (size_t i = 0; !rc && i < ST_ARRAY_LEN(links); i++)
		rc = add(p, SBX_M_SYMLINK, links[i][0], links[i][1]);
	if (!rc)
		rc = add_tmpfs(p, "/dev/shm", 64ull << 20, 01777, true);
	if (rc || cfg->stage != SANDBOX_RUN || cfg->gpu_index < 0)
		return rc;
	for (size_t i = 0; !rc && i < ST_ARRAY_LEN(gpu_nodes); i++) {
		snprintf(node, sizeof(node), gpu_nodes[i].fmt, cfg->gpu_index);
		rc = add_dev(p, node, gpu_nodes[i].optional);
	}
	/* The driver reads topology (NUMA node, PCI ids) from /sys. */
	if (!rc)
		rc = add_host(p, "/sys", "/sys", false, true);
	return rc;
}

int sbx_plan_mounts(struct sbx_plan *p, const struct sandbox_config *cfg)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < ST_ARRAY_LEN(system_paths); i++)
		rc = add_host(p, system_paths[i].path, system_paths[i].path, false,
			      system_paths[i].optional);
	if (!rc)
		rc = plan_dev(p, cfg);
	if (!rc)
		rc = add(p, SBX_M_PROC, NULL, "/proc");
	/* Scratch: the only writable place besides the caller's writable binds. */
	if (!rc)
		rc = add_tmpfs(p, "/tmp", cfg->scratch_bytes ? cfg->scratch_bytes : 256ull << 20,
			       01777, false);
	for (size_t i = 0; !rc && i < cfg->nbinds; i++) {
		const struct sandbox_bind *b = &cfg->binds[i];

		rc = add_host(p, b->src, b->dst ? b->dst : b->src, b->writable, false);
	}
	/* The program itself, read-only, where its path says (in function
	 * mode, the path the caller named, if any). */
	if (!rc && p->path && p->path[0] == '/')
		rc = add_host(p, p->path, p->path, false, false);
	else if (!rc && (p->path || !p->fn))
		rc = stark_error(ST_EINVAL, "sandbox: program path must be absolute: %s",
				 p->path ? p->path : "(null)");
	if (!rc && cfg->workdir)
		snprintf(p->workdir, sizeof(p->workdir), "%s", cfg->workdir);
	return rc;
}
