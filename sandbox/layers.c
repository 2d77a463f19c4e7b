/*
 * layers.c -- which isolation layers this machine can provide.
 *
 * Probed once per process: namespaces by cloning a throw-away child into
 * them, cgroups by the hierarchy cgroup.c finds, seccomp by compiling the
 * stage's policy.  A missing layer is reported once per stage and layer
 * set; sandbox_spawn() refuses when the caller's required layers are not
 * all there, unless the caller asked for insecure mode.
 */
#include <errno.h>
#include <linux/sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "sandbox/sandbox_int.h"

static const char *const names[] = {"fds",    "env",	"userns", "netns", "pidns",  "mntns",
				    "ipcuts", "cgroup", "rlimit", "nnp",   "seccomp"};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned avail[3];
static atomic_uint warned[3];

/* Can a child be cloned into these namespaces? */
static bool can_clone(uint64_t flags)
{
	struct clone_args ca;
	pid_t pid;
	int status;

	memset(&ca, 0, sizeof(ca));
	ca.flags = flags;
	ca.exit_signal = SIGCHLD;
	pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return false;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void probe(void)
{
	unsigned base = SANDBOX_L_FDS | SANDBOX_L_ENV | SANDBOX_L_RLIMIT | SANDBOX_L_NNP;
	unsigned ns = 0;
	struct sock_fprog prog;

	if (can_clone(CLONE_NEWUSER))
		ns |= SANDBOX_L_USERNS;
	/* The others are made inside the new user namespace, as in a spawn. */
	if ((ns & SANDBOX_L_USERNS) && can_clone(CLONE_NEWUSER | CLONE_NEWNET))
		ns |= SANDBOX_L_NETNS;
	if ((ns & SANDBOX_L_USERNS) && can_clone(CLONE_NEWUSER | CLONE_NEWPID))
		ns |= SANDBOX_L_PIDNS;
	if ((ns & SANDBOX_L_USERNS) && can_clone(CLONE_NEWUSER | CLONE_NEWNS))
		ns |= SANDBOX_L_MNTNS;
	if ((ns & SANDBOX_L_USERNS) && can_clone(CLONE_NEWUSER | CLONE_NEWIPC | CLONE_NEWUTS))
		ns |= SANDBOX_L_IPCUTS;
	if (sbx_cgroup_version() != 0)
		ns |= SANDBOX_L_CGROUP;
	avail[SANDBOX_NONE] = SANDBOX_L_FDS | SANDBOX_L_ENV;
	for (int st = SANDBOX_COMPILE; st <= SANDBOX_RUN; st++) {
		avail[st] = base | ns;
		if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 &&
		    sbx_policy_get((enum sandbox_stage)st, false, st == SANDBOX_COMPILE, &prog) == 0)
			avail[st] |= SANDBOX_L_SECCOMP;
	}
	/* Without a user namespace the rest cannot be built unprivileged, and
	 * the mount plan needs the mount namespace: all or nothing. */
	for (int st = SANDBOX_COMPILE; st <= SANDBOX_RUN; st++)
		if ((avail[st] & (SANDBOX_L_USERNS | SANDBOX_L_MNTNS)) !=
		    (SANDBOX_L_USERNS | SANDBOX_L_MNTNS))
			avail[st] &= ~(SANDBOX_L_USERNS | SANDBOX_L_MNTNS | SANDBOX_L_NETNS |
				       SANDBOX_L_PIDNS | SANDBOX_L_IPCUTS);
}

unsigned sandbox_layers_available(enum sandbox_stage stage)
{
	pthread_once(&once, probe);
	return stage <= SANDBOX_RUN ? avail[stage] : 0;
}

void sbx_warn_missing_once(enum sandbox_stage stage, unsigned missing)
{
	char buf[128];

	if (stage > SANDBOX_RUN || (atomic_fetch_or(&warned[stage], missing) & missing) == missing)
		return;
	sandbox_layers_str(missing, buf, sizeof(buf));
	if (stage == SANDBOX_NONE)
		stark_warn("sandbox: the none stage builds no jail (%s required)", buf);
	else
		stark_warn("sandbox: this machine cannot provide %s for the %s stage", buf,
			   sbx_policy_name(stage));
}

static pthread_once_t compat_once = PTHREAD_ONCE_INIT;
static bool compat;

static void probe_compat(void)
{
#if defined(__x86_64__)
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		long rc = 20; /* i386 getpid */

		__asm__ volatile("int $0x80" : "+a"(rc)::"memory");
		_exit(rc == (long)getpid() ? 0 : 1);
	}
	if (pid < 0)
		return;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	compat = WIFEXITED(status) && WEXITSTATUS(status) == 0;
#endif
}

bool sandbox_compat_entry(void)
{
	pthread_once(&compat_once, probe_compat);
	return compat;
}

const char *sandbox_layers_str(unsigned layers, char *buf, size_t len)
{
	size_t n = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; i < ST_ARRAY_LEN(names); i++) {
		if (!(layers & (1u << i)))
			continue;
		int w = snprintf(buf + n, len - n, "%s%s", n ? "," : "", names[i]);

		if (w < 0 || (size_t)w >= len - n)
			break;
		n += (size_t)w;
	}
	if (n == 0)
		snprintf(buf, len, "none");
	return buf;
}

int sandbox_layers_parse(const char *s, unsigned *out)
{
	unsigned v = 0;

	while (s && *s) {
		size_t n = strcspn(s, ",");
		bool found = false;

		if (n == 3 && strncmp(s, "all", 3) == 0) {
			v |= SANDBOX_L_ALL;
			found = true;
		} else if (n == 4 && strncmp(s, "none", 4) == 0) {
			found = true;
		}
		for (size_t i = 0; !found && i < ST_ARRAY_LEN(names); i++)
			if (strlen(names[i]) == n && strncmp(s, names[i], n) == 0) {
				v |= 1u << i;
				found = true;
			}
		if (!found)
			return ST_EINVAL;
		s += n;
		if (*s == ',')
			s++;
	}
	*out = v;
	return 0;
}
