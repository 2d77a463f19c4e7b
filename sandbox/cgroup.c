/*
 * cgroup.c -- one control group per evaluation: memory (swap included),
 * pids and cpu limits, and a way to kill everything in it.
 *
 * cgroup v2 (the GPU machine): a leaf under a delegated parent (probe_v2
 * says which) with memory.max, memory.swap.max = 0, memory.oom.group = 1
 * (0 where the config grants an OOM grace: the kernel kills one process),
 * pids.max and cpu.max; the child is cloned straight into it
 * (CLONE_INTO_CGROUP) and the whole group dies through cgroup.kill.  The
 * v2 "no internal processes" rule decides the parent: controllers can only
 * be enabled for the children of a group that holds no process itself.
 *
 * cgroup v1 (this build machine, CI): a group per controller (memory, pids,
 * cpu) under the group we are in, limits written, the child attached by the
 * parent before it is released; kill is SIGKILL to every listed task (the
 * pid namespace does the real work).  Groups are removed after the wait.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/common.h"
#include "sandbox/sandbox_int.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static const char *const v1_ctrl[3] = {"memory", "pids", "cpu"};

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static atomic_bool probe_started;
static char parent_override[512]; /* sandbox_set_cgroup_parent() */
static int probed_version;     /* 0 none, 1, 2 */
static char v2_parent[512];    /* where v2 leaves go */
static char v1_parent[3][512]; /* where v1 groups go, per controller */
static atomic_uint seq;

static int write_str(const char *dir, const char *file, const char *s)
{
	char path[640];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return ST_ESYS;
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		rc = ST_ESYS;
	close(fd);
	return rc;
}

static int write_u64(const char *dir, const char *file, uint64_t v)
{
	char s[32];

	snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
	return write_str(dir, file, s);
}

/* Reads "key N" from a flat-keyed file (memory.events, pids.events ...). */
static uint64_t read_key(const char *dir, const char *file, const char *key)
{
	char path[640], line[128];
	unsigned long long v = 0;
	size_t klen = strlen(key);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
			v = strtoull(line + klen + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* Our own cgroup for a v1 controller (or "" for v2), from /proc/self/cgroup. */
static bool own_cgroup(const char *ctrl, char *out, size_t len)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/cgroup", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *ctrls = strchr(line, ':'), *path, *tok, *save = NULL;

		if (!ctrls || !(path = strchr(++ctrls, ':')))
			continue;
		*path++ = '\0';
		path[strcspn(path, "\n")] = '\0';
		if (ctrl[0] == '\0')
			found = ctrls[0] == '\0';
		for (tok = ctrl[0] ? strtok_r(ctrls, ",", &save) : NULL; tok && !found;
		     tok = strtok_r(NULL, ",", &save))
			found = strcmp(tok, ctrl) == 0;
		if (found)
			snprintf(out, len, "%s", path);
	}
	fclose(f);
	return found;
}

/* A limit file's value: a number of bytes, or UINT64_MAX ("max", absent,
 * unreadable). */
static uint64_t read_limit(const char *path)
{
	char buf[64];
	unsigned long long v;
	char *end;
	FILE *f = fopen(path, "re");

	if (!f)
		return UINT64_MAX;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return UINT64_MAX;
	}
	fclose(f);
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || end == buf)
		return UINT64_MAX;
	return (uint64_t)v;
}

uint64_t sandbox_memory_limit(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	uint64_t lim = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
	char own[400], path[640];
	struct statfs sf;
	bool v2 = statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;

	if (!own_cgroup(v2 ? "" : "memory", own, sizeof(own)))
		return lim;
	/* Our group and each one above it, up to the hierarchy's root. */
	for (;;) {
		uint64_t v;
		char *slash;

		snprintf(path, sizeof(path), "/sys/fs/cgroup%s%s/%s", v2 ? "" : "/memory",
			 strcmp(own, "/") == 0 ? "" : own,
			 v2 ? "memory.max" : "memory.limit_in_bytes");
		v = read_limit(path);
		if (v && v < lim)
			lim = v;
		slash = strrchr(own, '/');
		if (!slash || slash == own)
			break;
		*slash = '\0';
	}
	return lim;
}

static bool has_controllers(const char *dir, const char *file)
{
	char path[640], buf[256] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return strstr(buf, "memory") && strstr(buf, "pids") && strstr(buf, "cpu");
}

/* Can leaves under dir get memory, pids and cpu?  Enables them if it may. */
static bool delegates(const char *dir)
{
	if (has_controllers(dir, "cgroup.subtree_control"))
		return true;
	return has_controllers(dir, "cgroup.controllers") &&
	       write_str(dir, "cgroup.subtree_control", "+memory +pids +cpu") == 0 &&
	       has_controllers(dir, "cgroup.subtree_control");
}

/* True when we are the only process in dir (a service started for us). */
static bool alone_in(const char *dir)
{
	char path[640];
	long pid;
	int n = 0;
	bool only_us = true;
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fscanf(f, "%ld", &pid) == 1) {
		n++;
		only_us &= pid == (long)getpid();
	}
	fclose(f);
	return n == 1 && only_us;
}

/*
 * v2: where the leaves go, in order of preference:
 *   1. the directory our orchestrator found (sandbox_set_cgroup_parent), or
 *      $STARK_SANDBOX_CGROUP, a directory the operator prepared;
 *   2. our own cgroup, if it already delegates the three controllers, or if
 *      we are its only process: then we move into a "stark-supervisor" leaf
 *      (no internal processes) and enable them for our leaves;
 *   3. as root, a "stark" group at the top of the hierarchy (our own group
 *      holds other processes, which we do not move).
 */
static bool probe_v2(void)
{
	struct statfs sf;
	char own[400], sup[600];
	const char *env = getenv("STARK_SANDBOX_CGROUP");

	if (statfs("/sys/fs/cgroup", &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC)
		return false;
	if (parent_override[0])
		env = parent_override;
	if (env && *env) {
		snprintf(v2_parent, sizeof(v2_parent), "%s", env);
		return delegates(v2_parent);
	}
	if (own_cgroup("", own, sizeof(own))) {
		snprintf(v2_parent, sizeof(v2_parent), "/sys/fs/cgroup%s",
			 strcmp(own, "/") == 0 ? "" : own);
		if (has_controllers(v2_parent, "cgroup.subtree_control"))
			return true;
		if (strcmp(own, "/") != 0 && alone_in(v2_parent)) {
			snprintf(sup, sizeof(sup), "%s/stark-supervisor", v2_parent);
			if ((mkdir(sup, 0755) == 0 || errno == EEXIST) &&
			    write_str(sup, "cgroup.procs", "0") == 0 && delegates(v2_parent))
				return true;
		}
	}
	if (geteuid() != 0)
		return false;
	snprintf(v2_parent, sizeof(v2_parent), "/sys/fs/cgroup/stark");
	if (mkdir(v2_parent, 0755) < 0 && errno != EEXIST)
		return false;
	return delegates(v2_parent);
}

/* v1: memory, pids and cpu each mounted, and groups can be made under ours. */
static bool probe_v1(void)
{
	char own[400], test[640];

	for (int i = 0; i < 3; i++) {
		if (!own_cgroup(v1_ctrl[i], own, sizeof(own)))
			return false;
		snprintf(v1_parent[i], sizeof(v1_parent[i]), "/sys/fs/cgroup/%s%s", v1_ctrl[i],
			 strcmp(own, "/") == 0 ? "" : own);
		snprintf(test, sizeof(test), "%s/stark-probe-%d", v1_parent[i], (int)getpid());
		if (mkdir(test, 0755) < 0 && errno != EEXIST)
			return false;
		rmdir(test);
	}
	return true;
}

static bool gone(long pid)
{
	return pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* Empty groups "stark-PID-N" whose stark process is gone (killed before
 * it could remove them), and "stark-OWNER-PID-N" whose maker (a zygote's
 * child) is gone, whether or not the owner lives. */
static void sweep(const char *parent)
{
	char path[640];
	struct dirent *de;
	DIR *d = opendir(parent);
	long pid, maker;
	unsigned n;

	while (d && (de = readdir(d))) {
		int k = sscanf(de->d_name, "stark-%ld-%ld-%u", &pid, &maker, &n);

		if (k < 2 || pid <= 0)
			continue;
		if (!(k == 3 && maker != getpid() && gone(maker)) && (pid == getpid() || !gone(pid)))
			continue; /* its owner lives (or is not ours to judge) */
		snprintf(path, sizeof(path), "%s/%s", parent, de->d_name);
		rmdir(path);
	}
	if (d)
		closedir(d);
}

static void probe(void)
{
	atomic_store(&probe_started, true);
	if (probe_v2()) {
		probed_version = 2;
		sweep(v2_parent);
	} else if (probe_v1()) {
		probed_version = 1;
		for (int i = 0; i < 3; i++)
			sweep(v1_parent[i]);
	}
}

int sbx_cgroup_version(void)
{
	pthread_once(&probe_once, probe);
	return probed_version;
}

const char *sandbox_cgroup_parent(void)
{
	return sbx_cgroup_version() == 2 ? v2_parent : NULL;
}

int sandbox_set_cgroup_parent(const char *dir)
{
	if (atomic_load(&probe_started) || !dir || dir[0] != '/' ||
	    strlen(dir) >= sizeof(parent_override))
		return ST_EINVAL;
	snprintf(parent_override, sizeof(parent_override), "%s", dir);
	return 0;
}

void sandbox_cgroup_sweep(void)
{
	int v = sbx_cgroup_version();

	if (v == 2)
		sweep(v2_parent);
	for (int i = 0; v == 1 && i < 3; i++)
		sweep(v1_parent[i]);
}

int sbx_cgroup_create(struct sbx_cgroup *cg, const struct sandbox_config *cfg)
{
	unsigned n = atomic_fetch_add(&seq, 1);
	uint64_t mem = cfg->mem_bytes, pids = cfg->pids;
	char cpu[48], name[64];
	int rc = 0;

	memset(cg, 0, sizeof(*cg));
	cg->v2fd = -1;
	cg->version = sbx_cgroup_version();
	/* stark-PID-N, or stark-OWNER-PID-N for a zygote's child (sandbox.h) */
	if (cfg->owner_pid > 0 && cfg->owner_pid != getpid())
		snprintf(name, sizeof(name), "stark-%d-%d-%u", (int)cfg->owner_pid, (int)getpid(), n);
	else
		snprintf(name, sizeof(name), "stark-%d-%u", (int)getpid(), n);
	snprintf(cpu, sizeof(cpu), "%llu 100000",
		 (unsigned long long)(cfg->cpu_percent ? cfg->cpu_percent * 1000ull : 0));
	if (cg->version == 2) {
		if (snprintf(cg->v2, sizeof(cg->v2), "%s/%s", v2_parent, name) >=
			    (int)sizeof(cg->v2) ||
		    mkdir(cg->v2, 0755) < 0)
			return stark_error(ST_ESYS, "sandbox: mkdir %s: %s", cg->v2,
					   strerror(errno));
		if ((mem && (write_u64(cg->v2, "memory.max", mem) ||
			     write_u64(cg->v2, "memory.swap.max", 0) ||
			     write_str(cg->v2, "memory.oom.group",
				       cfg->oom_grace_ms ? "0" : "1"))) ||
		    (pids && write_u64(cg->v2, "pids.max", pids)) ||
		    (cfg->cpu_percent && write_str(cg->v2, "cpu.max", cpu)))
			rc = stark_error(ST_ESYS, "sandbox: cgroup limits in %s: %s", cg->v2,
					 strerror(errno));
		cg->v2fd = open(cg->v2, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
		if (!rc && cg->v2fd < 0)
			rc = stark_error(ST_ESYS, "sandbox: open %s: %s", cg->v2, strerror(errno));
		return rc;
	}
	if (cg->version != 1)
		return stark_error(ST_EDENIED, "sandbox: no usable cgroup hierarchy");
	for (int i = 0; i < 3; i++) {
		if (snprintf(cg->v1[i], sizeof(cg->v1[i]), "%s/%s", v1_parent[i], name) >=
			    (int)sizeof(cg->v1[i]) ||
		    mkdir(cg->v1[i], 0755) < 0) {
			rc = stark_error(ST_ESYS, "sandbox: mkdir %s: %s", cg->v1[i],
					 strerror(errno));
			cg->v1[i][0] = '\0';
			return rc;
		}
	}
	if (mem) {
		rc = write_u64(cg->v1[0], "memory.limit_in_bytes", mem);
		/* No swap beyond the limit, where swap accounting exists. */
		if (!rc && write_u64(cg->v1[0], "memory.memsw.limit_in_bytes", mem) &&
		    errno != ENOENT)
			rc = ST_ESYS;
	}
	if (!rc && pids)
		rc = write_u64(cg->v1[1], "pids.max", pids);
	if (!rc && cfg->cpu_percent)
		rc = write_u64(cg->v1[2], "cpu.cfs_period_us", 100000) ||
			     write_u64(cg->v1[2], "cpu.cfs_quota_us", cfg->cpu_percent * 1000ull)
			 ? ST_ESYS
			 : 0;
	if (rc)
		return stark_error(ST_ESYS, "sandbox: cgroup v1 limits: %s", strerror(errno));
	cg->oom_before = read_key(cg->v1[0], "memory.oom_control", "oom_kill");
	return 0;
}

int sbx_cgroup_attach(const struct sbx_cgroup *cg, pid_t pid)
{
	for (int i = 0; cg->version == 1 && i < 3; i++)
		if (write_u64(cg->v1[i], "cgroup.procs", (uint64_t)pid))
			return stark_error(ST_ESYS, "sandbox: attach %d to %s: %s", (int)pid,
					   cg->v1[i], strerror(errno));
	return 0;
}

/* v1 has no cgroup.kill: signal every task listed, a few rounds. */
static void kill_tasks(const char *dir)
{
	char path[640];
	long pid;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	for (int round = 0; round < 4; round++) {
		FILE *f = fopen(path, "re");
		int n = 0;

		if (!f)
			return;
		while (fscanf(f, "%ld", &pid) == 1) {
			kill((pid_t)pid, SIGKILL);
			n++;
		}
		fclose(f);
		if (n == 0)
			return;
	}
}

void sbx_cgroup_kill(const struct sbx_cgroup *cg)
{
	if (cg->version == 2)
		write_str(cg->v2, "cgroup.kill", "1");
	else if (cg->version == 1 && cg->v1[1][0])
		kill_tasks(cg->v1[1]);
}

bool sbx_cgroup_oom(const struct sbx_cgroup *cg)
{
	if (cg->version == 2)
		return read_key(cg->v2, "memory.events", "oom_kill") > 0;
	if (cg->version == 1 && cg->v1[0][0])
		return read_key(cg->v1[0], "memory.oom_control", "oom_kill") > cg->oom_before;
	return false;
}

bool sbx_cgroup_pids_hit(const struct sbx_cgroup *cg)
{
	if (cg->version == 2)
		return read_key(cg->v2, "pids.events", "max") > 0;
	if (cg->version == 1 && cg->v1[1][0])
		return read_key(cg->v1[1], "pids.events", "max") > 0;
	return false;
}

/* Removes the groups; tasks may take a moment to leave after the kill. */
static void remove_dir(const char *dir)
{
	for (int i = 0; i < 200 && rmdir(dir) < 0 && errno == EBUSY; i++)
		usleep(1000);
}

void sbx_cgroup_destroy(struct sbx_cgroup *cg)
{
	if (cg->v2fd >= 0)
		close(cg->v2fd);
	cg->v2fd = -1;
	if (cg->version == 2 && cg->v2[0])
		remove_dir(cg->v2);
	for (int i = 0; cg->version == 1 && i < 3; i++)
		if (cg->v1[i][0])
			remove_dir(cg->v1[i]);
	cg->version = 0;
}
