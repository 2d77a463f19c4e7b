/*
 * cpus.c -- STARK_TIMING_CPUS=auto: CPUs kept for each GPU's timing phases,
 * chosen from the machine (evaluator/stark_referee_cpus.py keeps them).
 *
 * A timed call's exchange holds the worker's host time, which the
 * referee's clock bounds; other evaluations' work on the host (KernelBench's
 * inputs made on the CPU, builds) stretches it.  On four H200s, level 3's
 * launch-bound models beside a level-1 batch: with two CPUs kept for each
 * GPU, 34 of 37 honest copies read within 2% and none was charged by the
 * wall clock; without, 25 of 39, and 4 were charged (0.31-0.61x).  With
 * auto against none on two GPUs of the same load: 25 of 28 against 18 of
 * 28, and none charged against two (0.33-0.37x).  So it is the default.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "pool/pool_int.h"

#define CPUS_MAX 1024	 /* CPUs of one host looked at, at most */
#define AUTO_GPUS_MAX 64 /* GPUs given CPUs, at most */

struct cpuset {
	unsigned char on[CPUS_MAX];
};

/* The CPUs of a cpulist ("0-3,8,10-11") into s; false if malformed. */
static bool parse_list(const char *text, struct cpuset *s)
{
	const char *p = text;

	memset(s, 0, sizeof(*s));
	while (*p && *p != '\n') {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;

		if (end == p || lo < 0 || lo >= CPUS_MAX)
			return false;
		p = end;
		if (*p == '-') {
			hi = strtol(p + 1, &end, 10);
			if (end == p + 1 || hi < lo || hi >= CPUS_MAX)
				return false;
			p = end;
		}
		for (long c = lo; c <= hi; c++)
			s->on[c] = 1;
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return false;
	}
	return true;
}

static bool read_list(const char *path, struct cpuset *s)
{
	char line[4096];
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(line, sizeof(line), f) && parse_list(line, s);
	fclose(f);
	return ok;
}

/* s written as a cpulist, ranges joined, into buf. */
static void write_list(const struct cpuset *s, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int c = 0; c < CPUS_MAX && n < len; c++) {
		int e = c;

		if (!s->on[c])
			continue;
		while (e + 1 < CPUS_MAX && s->on[e + 1])
			e++;
		n += (size_t)snprintf(buf + n, len - n, "%s%d", n ? "," : "", c);
		if (e > c && n < len)
			n += (size_t)snprintf(buf + n, len - n, "-%d", e);
		c = e;
	}
}

static int count(const struct cpuset *s)
{
	int n = 0;

	for (int c = 0; c < CPUS_MAX; c++)
		n += s->on[c];
	return n;
}

/* Takes `cores` whole cores (a CPU and its SMT siblings) for one GPU from
 * its local CPUs, the highest-numbered first, none of them in used. */
static void take_cores(const char *sys_root, const struct cpuset *local, struct cpuset *used,
		       struct cpuset *mine, int cores)
{
	memset(mine, 0, sizeof(*mine));
	for (int c = CPUS_MAX - 1; c >= 0 && cores > 0; c--) {
		char path[PATH_MAX];
		struct cpuset sib;
		bool clash = false;

		if (!local->on[c] || used->on[c])
			continue;
		snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%d/topology/thread_siblings_list",
			 sys_root, c);
		if (!read_list(path, &sib)) {
			memset(&sib, 0, sizeof(sib));
			sib.on[c] = 1;
		}
		for (int s = 0; s < CPUS_MAX; s++)
			if (sib.on[s] && used->on[s])
				clash = true;
		if (clash)
			continue;
		for (int s = 0; s < CPUS_MAX; s++)
			if (sib.on[s] && local->on[s]) {
				mine->on[s] = 1;
				used->on[s] = 1;
			}
		cores--;
	}
}

struct auto_state {
	struct cpuset online, used, local, lists[AUTO_GPUS_MAX];
	char bus[AUTO_GPUS_MAX][64];
};

/* The GPUs of gpus_dir by device minor into st->bus; their count, or -1
 * where the minors are not 0..count-1. */
static int find_gpus(const char *gpus_dir, struct auto_state *st)
{
	int ngpu = 0, maxminor = -1;
	struct dirent *de;
	DIR *d = opendir(gpus_dir);

	if (!d)
		return 0; /* no GPU driver: nothing to keep */
	while ((de = readdir(d))) {
		int m;

		if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(st->bus[0]))
			continue;
		m = evalrun__read_minor(gpus_dir, de->d_name);
		if (m < 0 || m >= AUTO_GPUS_MAX || st->bus[m][0])
			continue;
		snprintf(st->bus[m], sizeof(st->bus[m]), "%s", de->d_name);
		ngpu++;
		if (m > maxminor)
			maxminor = m;
	}
	closedir(d);
	return maxminor + 1 == ngpu ? ngpu : -1;
}

/* Which GPUs (by minor) get CPUs.  Where the process may run on every
 * online CPU, all of them, so that every stark process on the machine
 * keeps the same lists and stays off all of them.  Where its CPUs are
 * restricted (a scheduler's cpuset: a Slurm job's), they are taken to be
 * its alone, and only the GPUs $CUDA_VISIBLE_DEVICES shows it (all where
 * that names none by index) get CPUs from them. */
static void served(const char *gpus_dir, const char *visible, bool restricted, int ngpu,
		   bool *serve)
{
	bool any = false;

	memset(serve, 0, sizeof(bool) * AUTO_GPUS_MAX);
	for (int idx = 0; restricted && visible && *visible && idx < AUTO_GPUS_MAX; idx++) {
		int m = evalrun_gpu_minor(gpus_dir, visible, idx);

		if (m < 0)
			break;
		if (m < ngpu)
			serve[m] = any = true;
	}
	if (!any)
		for (int m = 0; m < ngpu; m++)
			serve[m] = true;
}

int evalrun_timing_cpus_auto(const char *gpus_dir, const char *sys_root, const char *allowed,
			     const char *visible, int max_pct, char *buf, size_t len, char *err,
			     size_t errlen)
{
	bool serve[AUTO_GPUS_MAX], restricted = false;
	struct auto_state *st = calloc(1, sizeof(*st));
	struct cpuset mask;
	char path[PATH_MAX];
	int ngpu, kept, rc = 0;
	size_t n = 0;

	buf[0] = '\0';
	if (!st)
		return stark_errbuf(err, errlen, ST_ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "%s/devices/system/cpu/online", sys_root);
	if (!read_list(path, &st->online)) {
		rc = stark_errbuf(err, errlen, ST_EIO, "cannot read the online CPUs (%s)", path);
		goto out;
	}
	if (allowed) {
		int before = count(&st->online);

		if (!parse_list(allowed, &mask)) {
			rc = stark_errbuf(err, errlen, ST_EINVAL, "%.64s is not a CPU list", allowed);
			goto out;
		}
		for (int c = 0; c < CPUS_MAX; c++)
			st->online.on[c] &= mask.on[c];
		restricted = count(&st->online) < before;
	}
	if ((ngpu = find_gpus(gpus_dir, st)) < 0) {
		rc = stark_errbuf(err, errlen, ST_EINVAL,
				  "the GPUs' device minors are not 0, 1, ...: set STARK_TIMING_CPUS "
				  "by hand");
		goto out;
	}
	served(gpus_dir, visible, restricted, ngpu, serve);
	for (int m = 0; m < ngpu; m++) {
		if (!serve[m])
			continue; /* not this process's: an empty list */
		snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/local_cpulist", sys_root,
			 st->bus[m]);
		if (!read_list(path, &st->local))
			st->local = st->online;
		for (int c = 0; c < CPUS_MAX; c++)
			st->local.on[c] &= st->online.on[c];
		/* None of its own CPUs is ours (a cpuset on the other socket):
		 * the nearest we have are any of ours. */
		if (!count(&st->local))
			st->local = st->online;
		take_cores(sys_root, &st->local, &st->used, &st->lists[m], EVALRUN_TIMING_CORES);
		if (!count(&st->lists[m])) {
			rc = stark_errbuf(err, errlen, ST_EINVAL,
					  "no CPU near GPU %d is left for its timings", m);
			goto out;
		}
	}
	kept = count(&st->used);
	if (ngpu && 100 * kept > max_pct * count(&st->online)) {
		rc = stark_errbuf(err, errlen, ST_EINVAL,
				  "%d GPU%s would keep %d of the %d CPUs %s for %s timings, more "
				  "than %d%%",
				  ngpu, ngpu > 1 ? "s" : "", kept, count(&st->online),
				  allowed ? "stark may use" : "online", ngpu > 1 ? "their" : "its",
				  max_pct);
		goto out;
	}
	for (int m = 0; m < ngpu; m++) {
		char one[1024];

		write_list(&st->lists[m], one, sizeof(one));
		n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s", m ? ";" : "", one);
	}
	if (n >= len) {
		buf[0] = '\0';
		rc = stark_errbuf(err, errlen, ST_EINVAL, "the CPU lists are too long");
	}
out:
	free(st);
	return rc;
}

/* Why no CPUs are kept, where resolve kept none ("" where it kept some). */
static char resolve_why[PATH_MAX + 256];

/* The CPUs this process may run on, as a cpulist into buf; false where the
 * kernel does not say. */
static bool own_cpus(char *buf, size_t len)
{
	cpu_set_t set;
	struct cpuset s;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return false;
	memset(&s, 0, sizeof(s));
	for (int c = 0; c < CPU_SETSIZE && c < CPUS_MAX; c++)
		s.on[c] = CPU_ISSET(c, &set) ? 1 : 0;
	write_list(&s, buf, len);
	return buf[0] != '\0';
}

void evalrun_timing_cpus_resolve(void)
{
	const char *spec = getenv("STARK_TIMING_CPUS");
	char buf[8192], mine[8192], err[PATH_MAX + 256];
	bool asked = spec && strcmp(spec, "auto") == 0;

	resolve_why[0] = '\0';
	if (spec && !asked) {
		if (!*spec || strcmp(spec, "off") == 0)
			snprintf(resolve_why, sizeof(resolve_why), "STARK_TIMING_CPUS=off");
		return; /* "off", or lists named by hand */
	}
	/* Unset is auto, within what a plain machine can spare: a quarter of
	 * its CPUs.  Asked for by name, up to half, with a warning where
	 * even that cannot be done. */
	if (evalrun_timing_cpus_auto(EVALRUN_GPUS_DIR, "/sys", own_cpus(mine, sizeof(mine)) ? mine : NULL,
				     getenv("CUDA_VISIBLE_DEVICES"), asked ? 50 : 25, buf, sizeof(buf),
				     err, sizeof(err))) {
		if (asked)
			stark_warn("STARK_TIMING_CPUS=auto: %s; no CPUs are kept for timings", err);
		snprintf(resolve_why, sizeof(resolve_why), "%s", err);
		buf[0] = '\0';
	} else if (!buf[0]) {
		snprintf(resolve_why, sizeof(resolve_why), "no GPU on this machine");
	}
	/* Resolved once, here: what the evaluators and any stark process we
	 * start inherit is a list or "off", never auto again. */
	setenv("STARK_TIMING_CPUS", buf[0] ? buf : "off", 1);
}

const char *evalrun_timing_cpus_why(void)
{
	return resolve_why;
}
