/*
 * sbx_hostile.c -- a program that misbehaves on request, for the sandbox
 * tests.  Usage: sbx_hostile [--narrow] ACTION [ARG...]
 *
 * With --narrow it first calls sandbox_narrow(), as the evaluator does
 * before it loads candidate code.  Each action tries one thing from
 * THREATS.md (E1-E10) and prints what happened ("connected", "read: ...",
 * "denied: ..."); the tests assert on the way the program ends and on the
 * host's state, not only on what it prints.  "stamp" prints the monotonic
 * clock at the first instruction of main, for scripts/bench-jail.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "sandbox/sandbox.h"

extern char **environ;

static int say(const char *what, long rc)
{
	if (rc < 0)
		printf("denied: %s: %s\n", what, strerror(errno));
	else
		printf("done: %s = %ld\n", what, rc);
	fflush(stdout);
	return rc < 0 ? 1 : 0;
}

static int act_connect(const char *port, int type)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
	int fd = socket(AF_INET, type, 0);

	if (fd < 0)
		return say("socket", -1);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return say("connect", -1);
	if (type == SOCK_DGRAM)
		send(fd, "x", 1, 0);
	return say("connected", 0);
}

static int act_dns(const char *name)
{
	struct addrinfo *ai = NULL;
	int rc = getaddrinfo(name, "80", NULL, &ai);

	printf("getaddrinfo: %s\n", rc ? gai_strerror(rc) : "resolved");
	if (ai)
		freeaddrinfo(ai);
	return rc ? 1 : 0;
}

static int act_read(const char *path)
{
	char buf[4096];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return say("open", -1);
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return say("read", -1);
	buf[n] = '\0';
	printf("read: %s\n", buf);
	return 0;
}

static int act_write(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		return say("open for writing", -1);
	return say("write", write(fd, "pwned\n", 6));
}

static void *idle_thread(void *arg)
{
	(void)arg;
	pause();
	return NULL;
}

static int act_forkbomb(void)
{
	for (;;) {
		pid_t p = fork();

		if (p == 0)
			pause();
		if (p < 0) {
			printf("fork failed: %s\n", strerror(errno));
			fflush(stdout);
			return 3;
		}
	}
}

static int act_threadbomb(void)
{
	for (long n = 0;; n++) {
		pthread_t t;

		if (pthread_create(&t, NULL, idle_thread, NULL) != 0) {
			printf("thread %ld failed\n", n);
			fflush(stdout);
			return 3;
		}
	}
}

static int act_membomb(void)
{
	for (size_t total = 0;; total += 64 << 20) {
		char *p = mmap(NULL, 64 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);

		if (p == MAP_FAILED) {
			printf("mmap failed after %zu MiB\n", total >> 20);
			fflush(stdout);
			return 3;
		}
		memset(p, 1, 64 << 20);
	}
}

static int act_diskfill(const char *path)
{
	static char buf[1 << 20];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	long mb = 0;

	signal(SIGXFSZ, SIG_IGN);
	if (fd < 0)
		return say("open", -1);
	memset(buf, 'x', sizeof(buf));
	while (write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf))
		mb++;
	printf("disk full after %ld MiB: %s\n", mb, strerror(errno));
	return 3;
}

static int act_spew(void)
{
	static char buf[1 << 16];

	memset(buf, 'y', sizeof(buf));
	for (int i = 0; i < 1600; i++)
		if (write(1, buf, sizeof(buf)) < 0)
			return 3;
	return 0;
}

/* Double fork, new session: a daemon that would outlive its parent (E6). */
static int act_daemon(const char *tag)
{
	pid_t p = fork();

	if (p == 0) {
		setsid();
		if (fork() == 0) {
			prctl(PR_SET_NAME, tag, 0, 0, 0);
			for (;;)
				pause();
		}
		_exit(0);
	}
	waitpid(p, NULL, 0);
	usleep(100000); /* let the grandchild name itself */
	printf("daemon started\n");
	fflush(stdout);
	return 0;
}

/* Writes a fake "correct" result to every descriptor it can find (E10). */
static int act_forge(void)
{
	static const char frame[] = "\x00\x00\x00\x10{\"verdict\":\"correct\"}";
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		if (write(fd, frame, sizeof(frame) - 1) > 0)
			n++;
	printf("forged on %d descriptors\n", n);
	return 0;
}

static int act_fds(void)
{
	printf("fds:");
	for (int fd = 0; fd < 65536; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			printf(" %d", fd);
	printf("\n");
	return 0;
}

/* Names in a directory, sorted, on one line ("ls: a b c"). */
static int act_ls(const char *dir)
{
	struct dirent **list;
	int n = scandir(dir, &list, NULL, alphasort);

	if (n < 0)
		return say("scandir", -1);
	printf("ls:");
	for (int i = 0; i < n; i++) {
		if (list[i]->d_name[0] != '.')
			printf(" %s", list[i]->d_name);
		free(list[i]);
	}
	putchar('\n');
	free(list);
	return 0;
}

static int act_env(void)
{
	for (char **e = environ; *e; e++)
		printf("env: %s\n", *e);
	return 0;
}

static int act_int80(void)
{
	long rc = 20; /* i386 getpid */

	__asm__ volatile("int $0x80" : "+a"(rc)::"memory");
	return say("int 0x80 getpid", rc);
}

static int act_clone3_userns(void)
{
	struct clone_args ca = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
	long rc = syscall(SYS_clone3, &ca, sizeof(ca));

	if (rc == 0)
		_exit(0);
	return say("clone3(CLONE_NEWUSER)", rc);
}

static int act_perf(void)
{
	struct perf_event_attr pa = {
	    .type = PERF_TYPE_SOFTWARE, .size = sizeof(pa), .config = PERF_COUNT_SW_CPU_CLOCK};

	return say("perf_event_open", syscall(SYS_perf_event_open, &pa, 0, -1, -1, 0));
}

static int act_stamp(uint64_t t)
{
	printf("%llu\n", (unsigned long long)t);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t start = clock_mono_ns(); /* first thing: scripts/bench-jail */
	const char *a, *arg;

	if (argc > 1 && strcmp(argv[1], "--narrow") == 0) {
		int rc = sandbox_narrow();

		if (rc) {
			fprintf(stderr, "sbx_hostile: narrow: %s (%s)\n", stark_strerror(rc),
				strerror(errno));
			return 4;
		}
		argv++;
		argc--;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: sbx_hostile [--narrow] ACTION [ARG]\n");
		return 2;
	}
	a = argv[1];
	arg = argc > 2 ? argv[2] : "";
	if (!strcmp(a, "stamp"))
		return act_stamp(start);
	if (!strcmp(a, "ok"))
		return puts("ok") < 0;
	if (!strcmp(a, "exit"))
		return atoi(arg);
	if (!strcmp(a, "env"))
		return act_env();
	if (!strcmp(a, "ls"))
		return act_ls(arg);
	if (!strcmp(a, "id"))
		return printf("uid %d euid %d gid %d groups %d\n", (int)getuid(), (int)geteuid(),
			      (int)getgid(), getgroups(0, NULL)) < 0;
	if (!strcmp(a, "fds"))
		return act_fds();
	if (!strcmp(a, "forge"))
		return act_forge();
	if (!strcmp(a, "connect"))
		return act_connect(arg, SOCK_STREAM);
	if (!strcmp(a, "udp"))
		return act_connect(arg, SOCK_DGRAM);
	if (!strcmp(a, "unix"))
		return say("socket(AF_UNIX)", socket(AF_UNIX, SOCK_STREAM, 0));
	if (!strcmp(a, "raw"))
		return say("socket(AF_PACKET)", socket(AF_PACKET, SOCK_RAW, 0));
	if (!strcmp(a, "dns"))
		return act_dns(arg);
	if (!strcmp(a, "read"))
		return act_read(arg);
	if (!strcmp(a, "write"))
		return act_write(arg);
	if (!strcmp(a, "symlink"))
		return say("symlink", symlink(arg, argc > 3 ? argv[3] : "link"));
	if (!strcmp(a, "exec"))
		return execl("/bin/sh", "sh", "-c", "echo exec-worked", (char *)NULL),
		       say("exec", -1);
	if (!strcmp(a, "forkbomb"))
		return act_forkbomb();
	if (!strcmp(a, "threadbomb"))
		return act_threadbomb();
	if (!strcmp(a, "membomb"))
		return act_membomb();
	if (!strcmp(a, "diskfill"))
		return act_diskfill(*arg ? arg : "/tmp/fill");
	if (!strcmp(a, "spew"))
		return act_spew();
	if (!strcmp(a, "spin"))
		for (volatile unsigned long i = 0;; i++)
			;
	if (!strcmp(a, "sleep")) {
		if (*arg)
			prctl(PR_SET_NAME, arg, 0, 0, 0);
		for (;;)
			pause();
	}
	if (!strcmp(a, "daemon"))
		return act_daemon(*arg ? arg : "sbx-daemon");
	if (!strcmp(a, "kill-all"))
		return say("kill(-1)", kill(-1, SIGKILL)), say("still alive", 0);
	if (!strcmp(a, "kill-parent"))
		return say("kill(ppid)",
			   getppid() > 0 ? kill(getppid(), SIGKILL) : (errno = ESRCH, -1));
	if (!strcmp(a, "kill-pid"))
		return say("kill(pid)", kill(atoi(arg), SIGKILL));
	if (!strcmp(a, "ptrace"))
		return say("ptrace(attach)",
			   ptrace(PTRACE_ATTACH, *arg ? atoi(arg) : getppid(), 0, 0));
	if (!strcmp(a, "proc-mem")) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/%s/mem", *arg ? arg : "self");
		return say("open /proc/PID/mem rw", open(path, O_RDWR));
	}
	if (!strcmp(a, "unshare"))
		return say("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER));
	if (!strcmp(a, "mount"))
		return say("mount", mount("none", "/tmp", "tmpfs", 0, NULL));
	if (!strcmp(a, "bpf")) {
		union bpf_attr at;

		memset(&at, 0, sizeof(at));
		return say("bpf", syscall(SYS_bpf, BPF_MAP_CREATE, &at, sizeof(at)));
	}
	if (!strcmp(a, "io_uring"))
		return say("io_uring_setup", syscall(SYS_io_uring_setup, 8, calloc(1, 256)));
	if (!strcmp(a, "keyctl"))
		return say("keyctl", syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3, 0));
	if (!strcmp(a, "perf"))
		return act_perf();
	if (!strcmp(a, "userfaultfd"))
		return say("userfaultfd", syscall(SYS_userfaultfd, 0));
	if (!strcmp(a, "int80"))
		return act_int80();
	if (!strcmp(a, "clone3"))
		return act_clone3_userns();
	if (!strcmp(a, "clone-userns")) {
		long rc = syscall(SYS_clone, (long)(CLONE_NEWUSER | SIGCHLD), 0L, 0L, 0L, 0L);

		if (rc == 0)
			_exit(0);
		return say("clone(CLONE_NEWUSER)", rc);
	}
	if (!strcmp(a, "seccomp"))
		return say("seccomp(SET_MODE_FILTER)", syscall(SYS_seccomp, 1, 0, NULL));
	if (!strcmp(a, "setns"))
		return say("setns", setns(0, 0));
	if (!strcmp(a, "tiocsti")) {
		char c = 'x';

		return say("ioctl(TIOCSTI)", ioctl(0, 0x5412, &c));
	}
	fprintf(stderr, "sbx_hostile: unknown action %s\n", a);
	return 2;
}
