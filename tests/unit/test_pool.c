/*
 * test_pool.c -- unit tests of pool/: the parsing it does of what the
 * machine reports (nvidia-smi's compute capabilities), which candidates
 * need a compile stage, and evaluations driven through the evaluator's
 * zygote with the real stark-eval beside this test's folder: the zygote's
 * checks of what it receives, an evaluation lost with its zygote and the
 * restart, the deadline's kill through the report socket, cancel, and a
 * result taken before its jail has ended.  The zygote tests are skipped
 * where that stark-eval or an interpreter with torch is missing.
 *
 * The binary links pool/ and what pool needs (sandbox, proto, common).
 */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evaluator/evaluator.h"
#include "pool/pool_int.h"

#define PROBLEM                                                                                    \
	"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"                       \
	"    def __init__(self):\n        super().__init__()\n\n"                                  \
	"    def forward(self, x):\n        return x * 2\n\n\n"                                    \
	"def get_inputs():\n    return [torch.rand(4, 4)]\n\n\n"                                   \
	"def get_init_inputs():\n    return []\n"

/* ---- evaluations through the zygote ---------------------------------- */

static char evaluator[PATH_MAX + 16];

/* stark-eval beside our folder (it must be able to import torch, as
 * test_evaluator's interpreter must); a test without it says so and skips. */
static bool have_evaluator(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return false;
	self[n] = '\0';
	for (int i = 0; i < 2 && (slash = strrchr(self, '/')); i++)
		*slash = '\0';
	snprintf(evaluator, sizeof(evaluator), "%s/stark-eval", self);
	if (access(evaluator, X_OK) == 0)
		return true;
	fprintf(stderr, "test_pool: %s is not built: zygote test skipped\n", evaluator);
	return false;
}

#define CAND_OK                                                                                    \
	"import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"                    \
	"    def __init__(self):\n        super().__init__()\n\n"                                  \
	"    def forward(self, x):\n        return x * 2\n"
#define CAND_HANG                                                                                  \
	"import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"                    \
	"    def __init__(self):\n        super().__init__()\n\n"                                  \
	"    def forward(self, x):\n        while True:\n            pass\n"

static void make_request(struct proto_request *rq, const char *cand, uint32_t wall_ms)
{
	proto_request_init(rq);
	rq->id = str_dup("zyg-test");
	rq->device = str_dup("cpu");
	rq->format = str_dup("kernelbench");
	rq->problem_name = str_dup("problem.py");
	rq->problem_src = str_dup(PROBLEM);
	rq->problem_len = strlen(PROBLEM);
	rq->solution_name = str_dup("solution.py");
	rq->solution_src = str_dup(cand);
	rq->solution_len = strlen(cand);
	rq->stage = PROTO_STAGE_ALL;
	rq->trials = 1;
	rq->timing = false;
	rq->wall_ms = wall_ms;
	rq->seed = 7;
	ck_assert_ptr_nonnull(rq->solution_src);
}

/* Runs rq to its end through o; the result into rs. */
static void run_to_end(const struct evalrun_opts *o, const struct proto_request *rq,
		       struct proto_result *rs)
{
	proto_result_init(rs);
	ck_assert_int_eq(evalrun_one(o, rq, rs, NULL), 0);
}

/* nvidia-smi's compute capabilities, GPU by GPU; anything else is no answer. */
START_TEST(parse_caps)
{
	const char *text = "0, 9.0\n1, 10.0\r\n2, [N/A]\n 3 ,8.6 \n4, 9.0 extra\n5, 1000.0\n";
	int ma = -1, mi = -1;

	ck_assert_int_eq(evalrun_parse_caps(text, 0, &ma, &mi), 0);
	ck_assert(ma == 9 && mi == 0);
	ck_assert_int_eq(evalrun_parse_caps(text, 1, &ma, &mi), 0);
	ck_assert(ma == 10 && mi == 0);
	ck_assert_int_eq(evalrun_parse_caps(text, 3, &ma, &mi), 0);
	ck_assert(ma == 8 && mi == 6);
	ma = mi = -1;
	ck_assert_int_eq(evalrun_parse_caps(text, 2, &ma, &mi), -1);
	ck_assert_int_eq(evalrun_parse_caps(text, 4, &ma, &mi), -1);
	ck_assert_int_eq(evalrun_parse_caps(text, 5, &ma, &mi), -1);
	ck_assert_int_eq(evalrun_parse_caps(text, 6, &ma, &mi), -1);
	ck_assert_int_eq(evalrun_parse_caps("", 0, &ma, &mi), -1);
	ck_assert(ma == -1 && mi == -1);
}
END_TEST

static void put(const char *folder, const char *name, const char *text);

/* cuda:N is nvidia-smi's index N (PCI bus order), whose device node the
 * driver may number otherwise; $CUDA_VISIBLE_DEVICES renumbers. */
START_TEST(gpu_minor)
{
	static const char *const bus[] = {"0000:c3:00.0", "0000:18:00.0", "0000:9a:00.0"};
	static const int minor[] = {0, 2, 1};
	char root[] = "/tmp/stark-unit-gpus.XXXXXX", p[PATH_MAX], text[64];

	ck_assert_ptr_nonnull(mkdtemp(root));
	for (size_t i = 0; i < ST_ARRAY_LEN(bus); i++) {
		snprintf(p, sizeof(p), "%s/%s", root, bus[i]);
		ck_assert_int_eq(mkdir(p, 0700), 0);
		snprintf(text, sizeof(text), "Model: NVIDIA H100\nDevice Minor: %d\nBus Location: x\n",
			 minor[i]);
		put(p, "information", text);
	}
	/* Bus order: 18 (minor 2), 9a (1), c3 (0). */
	ck_assert_int_eq(evalrun_gpu_minor(root, NULL, 0), 2);
	ck_assert_int_eq(evalrun_gpu_minor(root, NULL, 1), 1);
	ck_assert_int_eq(evalrun_gpu_minor(root, "", 2), 0);
	ck_assert_int_eq(evalrun_gpu_minor(root, NULL, 3), -1);
	ck_assert_int_eq(evalrun_gpu_minor(root, NULL, -1), -1);
	ck_assert_int_eq(evalrun_gpu_minor(root, "2,0", 0), 0);
	ck_assert_int_eq(evalrun_gpu_minor(root, "2,0", 1), 2);
	ck_assert_int_eq(evalrun_gpu_minor(root, "2,0", 2), -1);
	/* UUIDs are not followed: the index counts every GPU. */
	ck_assert_int_eq(evalrun_gpu_minor(root, "GPU-1234", 1), 1);
	ck_assert_int_eq(evalrun_gpu_minor("/nonexistent/gpus", NULL, 0), -1);
	/* A GPU whose information file says no minor. */
	snprintf(p, sizeof(p), "%s/0000:9a:00.0", root);
	put(p, "information", "Model: NVIDIA H100\n");
	ck_assert_int_eq(evalrun_gpu_minor(root, NULL, 1), -1);
	for (size_t i = 0; i < ST_ARRAY_LEN(bus); i++) {
		snprintf(p, sizeof(p), "%s/%s/information", root, bus[i]);
		unlink(p);
		snprintf(p, sizeof(p), "%s/%s", root, bus[i]);
		rmdir(p);
	}
	rmdir(root);
}
END_TEST

/* An evaluation that reached its jail's memory limit and sent no result:
 * in the compile jail the candidate's (crashed); in the run jail, which
 * holds the evaluator's side too, the evaluator's own limit (error), since
 * no account of whose allocations reached it came. */
/* The GPU's lock is the machine's: every process that names the same GPU
 * opens one file (the memory ledger and the timing queue are shared), a
 * CPU's slots get a private unlinked one, and a lock folder that another
 * user could swap files in is refused with the reason. */
static ino_t lock_ino(const char *device)
{
	char err[PATH_MAX + 128];
	struct stat st;
	int fd = evalrun_gpu_lock_open(NULL, device, err, sizeof(err));

	ck_assert_msg(fd >= 0, "%s: %s", device ? device : "(none)", err);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(close(fd), 0);
	return st.st_nlink ? st.st_ino : 0;
}

START_TEST(gpu_lock_machine_wide)
{
	char dir[] = "/tmp/stark-lockdir-XXXXXX", sub[PATH_MAX], path[PATH_MAX], err[PATH_MAX + 128];
	const char *saved = getenv("STARK_LOCK_DIR");
	char *keep = saved ? strdup(saved) : NULL;
	struct stat st;
	ino_t a, b;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(setenv("STARK_LOCK_DIR", dir, 1), 0);
	a = lock_ino("cuda:0");
	ck_assert_uint_ne(a, 0);
	ck_assert_uint_eq(lock_ino("cuda:0"), a);
	ck_assert_uint_eq(lock_ino("cuda"), a); /* "cuda" is cuda:0 */
	b = lock_ino("cuda:1");
	ck_assert_uint_ne(b, 0);
	ck_assert_uint_ne(b, a);
	ck_assert_uint_eq(lock_ino(NULL), 0);	/* private and unlinked */
	ck_assert_int_eq(evalrun_gpu_lock_path("cuda:1", path, sizeof(path), err, sizeof(err)), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_ino, b);
	ck_assert_int_eq(evalrun_gpu_lock_path("cpu", path, sizeof(path), err, sizeof(err)),
			 ST_EINVAL);
	/* Made where missing, private. */
	snprintf(sub, sizeof(sub), "%s/made", dir);
	ck_assert_int_eq(setenv("STARK_LOCK_DIR", sub, 1), 0);
	ck_assert_uint_ne(lock_ino("cuda:2"), 0);
	ck_assert_int_eq(stat(sub, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	/* Open to others and not sticky: refused; sticky (as /tmp): taken. */
	ck_assert_int_eq(chmod(sub, 0777), 0);
	ck_assert_int_lt(evalrun_gpu_lock_open(NULL, "cuda:2", err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "may be written by others and is not sticky"), "%s", err);
	ck_assert_int_eq(chmod(sub, 01777), 0);
	ck_assert_uint_ne(lock_ino("cuda:2"), 0);
	/* A link in the folder's place, a relative folder: refused. */
	snprintf(path, sizeof(path), "%s/link", dir);
	ck_assert_int_eq(symlink(sub, path), 0);
	ck_assert_int_eq(setenv("STARK_LOCK_DIR", path, 1), 0);
	ck_assert_int_lt(evalrun_gpu_lock_open(NULL, "cuda:0", err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "is not a folder (a link is refused)"), "%s", err);
	ck_assert_int_eq(setenv("STARK_LOCK_DIR", "locks", 1), 0);
	ck_assert_int_lt(evalrun_gpu_lock_open(NULL, "cuda:0", err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "is not an absolute path"), "%s", err);
	/* A lock file replaced by a link is refused too. */
	ck_assert_int_eq(setenv("STARK_LOCK_DIR", dir, 1), 0);
	ck_assert_int_eq(evalrun_gpu_lock_path("cuda:3", path, sizeof(path), err, sizeof(err)), 0);
	ck_assert_int_eq(symlink("/etc/passwd", path), 0);
	ck_assert_int_lt(evalrun_gpu_lock_open(NULL, "cuda:3", err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "cannot open the GPU lock file"), "%s", err);
	if (keep)
		setenv("STARK_LOCK_DIR", keep, 1);
	else
		unsetenv("STARK_LOCK_DIR");
	free(keep);
	{
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		ck_assert_int_eq(system(cmd), 0);
	}
}
END_TEST

/* STARK_TIMING_CPUS=auto from a machine laid out under a folder: the
 * driver's GPU folders and sysfs (online CPUs, each GPU's local CPUs,
 * SMT siblings). */
static void put_file(const char *root, const char *rel, const char *text)
{
	char path[PATH_MAX], cmd[PATH_MAX + 32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

/* 16 CPUs, core k = CPUs k and k+8; GPU bus ids bus0/bus1 near 0-3,8-11
 * and 4-7,12-15. */
static void machine(const char *root, int ngpu, const char *online)
{
	char rel[128], text[64];

	put_file(root, "sys/devices/system/cpu/online", online);
	for (int c = 0; c < 16; c++) {
		snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
			 c);
		snprintf(text, sizeof(text), "%d,%d\n", c % 8, c % 8 + 8);
		put_file(root, rel, text);
	}
	for (int g = 0; g < ngpu; g++) {
		snprintf(rel, sizeof(rel), "gpus/bus%d/information", g);
		snprintf(text, sizeof(text), "Model: H200\nDevice Minor: %d\n", g);
		put_file(root, rel, text);
		snprintf(rel, sizeof(rel), "sys/bus/pci/devices/bus%d/local_cpulist", g);
		put_file(root, rel, g == 0 ? "0-3,8-11\n" : "4-7,12-15\n");
	}
}

START_TEST(timing_cpus_auto)
{
	char root[] = "/tmp/stark-cpus-XXXXXX", gpus[256], sys[256], cmd[PATH_MAX];
	char buf[256], err[512];

	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(gpus, sizeof(gpus), "%s/gpus", root);
	snprintf(sys, sizeof(sys), "%s/sys", root);
	machine(root, 2, "0-15\n");
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, NULL, NULL, 50, buf, sizeof(buf), err, sizeof(err)), 0);
	/* Each GPU its two highest cores near it, both siblings of each. */
	ck_assert_str_eq(buf, "2-3,10-11;6-7,14-15");
	/* Within the CPUs the process may use, counted against them: 8 of
	 * 12 passes at most 75%, not at most 50%. */
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, "0-5,8-13", NULL, 75, buf, sizeof(buf), err,
						  sizeof(err)),
			 0);
	ck_assert_str_eq(buf, "2-3,10-11;4-5,12-13");
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, "0-5,8-13", NULL, 50, buf, sizeof(buf), err,
						  sizeof(err)),
			 ST_EINVAL);
	ck_assert_msg(strstr(err, "keep 8 of the 12 CPUs stark may use"), "%s", err);
	/* The default's quarter: 8 of 16 is too many. */
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, NULL, NULL, 25, buf, sizeof(buf), err,
						  sizeof(err)),
			 ST_EINVAL);
	ck_assert_msg(strstr(err, "more than 25%"), "%s", err);
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, "0-3,5", NULL, 75, buf, sizeof(buf), err,
						  sizeof(err)),
			 0);
	ck_assert_str_eq(buf, "2-3;5");
	/* A Slurm job's share: GPU 1 alone visible, the CPUs of GPU 0's
	 * socket alone allowed (a cpuset: its own).  GPU 1 takes the nearest
	 * it has; GPU 0, not this process's, keeps none. */
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, "0-3,8-11", "1", 50, buf, sizeof(buf),
						  err, sizeof(err)),
			 0);
	ck_assert_str_eq(buf, ";2-3,10-11");
	/* Every CPU allowed: every GPU's lists, whatever it sees, so that
	 * processes given different GPUs agree (here 8 of 16, refused at a
	 * quarter). */
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, NULL, "1", 50, buf, sizeof(buf), err,
						  sizeof(err)),
			 0);
	ck_assert_str_eq(buf, "2-3,10-11;6-7,14-15");
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, "0-15", "1", 25, buf, sizeof(buf), err,
						  sizeof(err)),
			 ST_EINVAL);
	/* UUIDs are not followed: every GPU is served. */
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, NULL, "GPU-8c2e", 50, buf, sizeof(buf),
						  err, sizeof(err)),
			 0);
	ck_assert_str_eq(buf, "2-3,10-11;6-7,14-15");
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, "0-x", NULL, 50, buf, sizeof(buf), err,
						  sizeof(err)),
			 ST_EINVAL);
	/* A GPU whose local list is missing takes from every online CPU,
	 * never another GPU's. */
	snprintf(cmd, sizeof(cmd), "rm %s/bus/pci/devices/bus1/local_cpulist", sys);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, NULL, NULL, 50, buf, sizeof(buf), err, sizeof(err)), 0);
	ck_assert_str_eq(buf, "2-3,10-11;6-7,14-15");
	/* More than half the CPUs: refused, saying so. */
	put_file(root, "sys/devices/system/cpu/online", "0-1,8-9,4-5,12-13\n");
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, NULL, NULL, 50, buf, sizeof(buf), err, sizeof(err)),
			 ST_EINVAL);
	ck_assert_msg(strstr(err, "would keep 8 of the 8 CPUs"), "%s", err);
	ck_assert_str_eq(buf, "");
	/* Minors with a gap: refused.  No GPU folder: nothing, no error. */
	put_file(root, "sys/devices/system/cpu/online", "0-15\n");
	put_file(root, "gpus/bus1/information", "Device Minor: 3\n");
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, sys, NULL, NULL, 50, buf, sizeof(buf), err, sizeof(err)),
			 ST_EINVAL);
	ck_assert_msg(strstr(err, "device minors are not 0, 1"), "%s", err);
	snprintf(cmd, sizeof(cmd), "%s/none", root);
	ck_assert_int_eq(evalrun_timing_cpus_auto(cmd, sys, NULL, NULL, 50, buf, sizeof(buf), err, sizeof(err)), 0);
	ck_assert_str_eq(buf, "");
	/* Unreadable online list: an error, not a guess. */
	snprintf(cmd, sizeof(cmd), "%s/nosys", root);
	ck_assert_int_eq(evalrun_timing_cpus_auto(gpus, cmd, NULL, NULL, 50, buf, sizeof(buf), err, sizeof(err)),
			 ST_EIO);
	/* Lists named by hand and "off" are left as they are; unset is
	 * resolved to lists or "off" (this machine's GPUs decide which),
	 * never left unset for a child to work out again. */
	ck_assert_int_eq(setenv("STARK_TIMING_CPUS", "7;15", 1), 0);
	evalrun_timing_cpus_resolve();
	ck_assert_str_eq(getenv("STARK_TIMING_CPUS"), "7;15");
	ck_assert_str_eq(evalrun_timing_cpus_why(), "");
	ck_assert_int_eq(setenv("STARK_TIMING_CPUS", "off", 1), 0);
	evalrun_timing_cpus_resolve();
	ck_assert_str_eq(getenv("STARK_TIMING_CPUS"), "off");
	ck_assert_str_eq(evalrun_timing_cpus_why(), "STARK_TIMING_CPUS=off");
	unsetenv("STARK_TIMING_CPUS");
	evalrun_timing_cpus_resolve();
	ck_assert_ptr_nonnull(getenv("STARK_TIMING_CPUS"));
	if (access("/proc/driver/nvidia/gpus", F_OK) != 0) {
		ck_assert_str_eq(getenv("STARK_TIMING_CPUS"), "off");
		ck_assert_str_eq(evalrun_timing_cpus_why(), "no GPU on this machine");
	}
	unsetenv("STARK_TIMING_CPUS");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(oom_without_account)
{
	static const char *const stages[] = {"run", "all", "compile"};
	static const enum proto_status want[] = {PROTO_ST_ERROR, PROTO_ST_ERROR, PROTO_ST_CRASHED};

	for (size_t i = 0; i < ST_ARRAY_LEN(stages); i++) {
		struct evalrun er;
		struct proto_result rs;
		char id[] = "e1";

		memset(&er, 0, sizeof(er));
		er.id = id;
		snprintf(er.si.stage, sizeof(er.si.stage), "%s", stages[i]);
		er.ex.how = SANDBOX_OOM;
		snprintf(er.ex.why, sizeof(er.ex.why),
			 "memory limit of 16110 MiB reached; process tree killed");
		proto_result_init(&rs);
		ck_assert_int_eq(evalrun__synthesize(&er, &rs, NULL), 0);
		ck_assert_msg(rs.status == want[i], "%s: status %d", stages[i], (int)rs.status);
		ck_assert_msg(strstr(rs.message, "memory limit of 16110 MiB"), "%s", rs.message);
		ck_assert_msg((strstr(rs.message, "STARK_RUN_MEM_MIB") != NULL) == (i < 2), "%s",
			      rs.message);
		ck_assert_str_eq(rs.id, "e1");
		proto_result_release(&rs);
	}
}
END_TEST

START_TEST(needs_compile)
{
	static const char *const yes[] = {
		"from torch.utils.cpp_extension import load_inline\n",
		"import torch.utils.cpp_extension as ce\n",
		"m = load(name='x', sources=['a.cu'])\n",
	};
	static const char *const no[] = {
		CAND_OK,
		"import stark_cuda\nmod = stark_cuda.CudaModule(SRC)\n",
		"",
	};

	for (size_t i = 0; i < ST_ARRAY_LEN(yes); i++)
		ck_assert_msg(evalrun_needs_compile(yes[i], strlen(yes[i])), "%s", yes[i]);
	for (size_t i = 0; i < ST_ARRAY_LEN(no); i++)
		ck_assert_msg(!evalrun_needs_compile(no[i], strlen(no[i])), "%s", no[i]);
	/* Only the first len bytes count. */
	ck_assert(!evalrun_needs_compile(yes[0], 10));
}
END_TEST

START_TEST(zygote_reports_checked)
{
	struct eval_zreport r, got;
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	ck_assert_int_eq(evz_recv_report(sv[0], &got), 0); /* nothing yet */
	memset(&r, 0, sizeof(r));
	r.magic = EVAL_ZMAGIC;
	r.version = EVAL_ZVERSION;
	r.kind = EVAL_ZREP_ENDED;
	r.how = SANDBOX_SECCOMP;
	r.syscall_nr = 41;
	snprintf(r.why, sizeof(r.why), "killed by seccomp: syscall socket");
	ck_assert_int_eq(send(sv[1], &r, sizeof(r), 0), (ssize_t)sizeof(r));
	ck_assert_int_eq(evz_recv_report(sv[0], &got), 1);
	ck_assert_str_eq(got.why, "killed by seccomp: syscall socket");
	ck_assert_int_eq(got.syscall_nr, 41);
	/* Short, long, foreign, out of range, unterminated: refused. */
	ck_assert_int_eq(send(sv[1], &r, sizeof(r) - 1, 0), (ssize_t)sizeof(r) - 1);
	ck_assert_int_eq(evz_recv_report(sv[0], &got), ST_EPROTO);
	{
		char big[sizeof(r) + 8];

		memcpy(big, &r, sizeof(r));
		ck_assert_int_eq(send(sv[1], big, sizeof(big), 0), (ssize_t)sizeof(big));
		ck_assert_int_eq(evz_recv_report(sv[0], &got), ST_EPROTO);
	}
	r.magic ^= 1;
	ck_assert_int_eq(send(sv[1], &r, sizeof(r), 0), (ssize_t)sizeof(r));
	ck_assert_int_eq(evz_recv_report(sv[0], &got), ST_EPROTO);
	r.magic ^= 1;
	r.kind = 7;
	ck_assert_int_eq(send(sv[1], &r, sizeof(r), 0), (ssize_t)sizeof(r));
	ck_assert_int_eq(evz_recv_report(sv[0], &got), ST_EPROTO);
	r.kind = EVAL_ZREP_ENDED;
	r.how = 99;
	ck_assert_int_eq(send(sv[1], &r, sizeof(r), 0), (ssize_t)sizeof(r));
	ck_assert_int_eq(evz_recv_report(sv[0], &got), ST_EPROTO);
	r.how = 0;
	r.layers = 1u << 20;
	ck_assert_int_eq(send(sv[1], &r, sizeof(r), 0), (ssize_t)sizeof(r));
	ck_assert_int_eq(evz_recv_report(sv[0], &got), ST_EPROTO);
	r.layers = 0;
	memset(r.why, 'x', sizeof(r.why));
	ck_assert_int_eq(send(sv[1], &r, sizeof(r), 0), (ssize_t)sizeof(r));
	ck_assert_int_eq(evz_recv_report(sv[0], &got), ST_EPROTO);
	close(sv[1]);
	ck_assert_int_eq(evz_recv_report(sv[0], &got), ST_EEOF);
	close(sv[0]);
}
END_TEST

/* A zygote started by hand on a socket of ours; its pid, its socket. */
static pid_t raw_zygote(int *ctl)
{
	struct eval_zready ready;
	int sv[2];
	pid_t pid;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	pid = fork();
	if (pid == 0) {
		dup2(sv[1], 0);
		execl(evaluator, evaluator, "--zygote", (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	ck_assert_int_eq(recv(sv[0], &ready, sizeof(ready), 0), (ssize_t)sizeof(ready));
	ck_assert_int_eq(ready.magic, EVAL_ZMAGIC);
	ck_assert_int_eq(ready.pid, pid);
	/* Recorded, not required to be 1: a CUDA build of torch leaves
	 * threads behind at import (16 on the H100 machine). */
	ck_assert_uint_ge(ready.threads, 1);
	*ctl = sv[0];
	return pid;
}

/*
 * Sends len bytes of job with nfds descriptors attached, every one of them
 * the same end of a fresh report socket; the zygote's answer on it goes to
 * *r.  Returns recv's count (0: no answer, the descriptors closed).
 */
static ssize_t send_raw_job(int ctl, const void *job, size_t len, int nfds,
			    struct eval_zreport *r)
{
	char cbuf[CMSG_SPACE(sizeof(int) * (EVAL_ZFD_COUNT + 1))];
	int fds[EVAL_ZFD_COUNT + 1], rs[2];
	struct iovec iov = {.iov_base = (void *)job, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds)};
	struct cmsghdr *cm;
	ssize_t n;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rs), 0);
	for (int i = 0; i < nfds; i++)
		fds[i] = rs[1];
	memset(cbuf, 0, sizeof(cbuf));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	ck_assert_int_eq(sendmsg(ctl, &mh, 0), (ssize_t)len);
	close(rs[1]);
	memset(r, 0, sizeof(*r));
	n = recv(rs[0], r, sizeof(*r), 0);
	close(rs[0]);
	return n;
}

static void expect_refused(int ctl, const struct eval_zjob *job, const char *why)
{
	struct eval_zreport r;

	ck_assert_int_eq(send_raw_job(ctl, job, sizeof(*job), EVAL_ZFD_LOCK, &r),
			 (ssize_t)sizeof(r));
	ck_assert_int_eq(r.kind, EVAL_ZREP_ENDED);
	ck_assert_int_eq(r.spawn_rc, ST_EPROTO);
	ck_assert_msg(strstr(r.why, why), "%s", r.why);
}

START_TEST(zygote_refuses_bad_jobs)
{
	struct eval_zjob job, bad;
	struct eval_zreport r;
	int ctl, st;
	pid_t pid;

	if (!have_evaluator())
		return;
	pid = raw_zygote(&ctl);
	memset(&job, 0, sizeof(job));
	job.magic = EVAL_ZMAGIC;
	job.version = EVAL_ZVERSION;
	job.stage = EVAL_ZSTAGE_RUN;
	job.wall_ms = 1000;
	job.nbinds = 1;
	snprintf(job.binds[0].src, EVAL_ZPATH, "/usr");
	/* Too few descriptors: no report socket to answer on; all closed. */
	ck_assert_int_eq(send_raw_job(ctl, &job, sizeof(job), EVAL_ZFD_REPORT, &r), 0);
	/* Too many (a lock not announced), a short message, foreign bytes. */
	ck_assert_int_eq(send_raw_job(ctl, &job, sizeof(job), EVAL_ZFD_COUNT, &r), (ssize_t)sizeof(r));
	ck_assert_str_eq(r.why, "zygote: a job with the wrong number of descriptors");
	ck_assert_int_eq(send_raw_job(ctl, &job, sizeof(job) - 8, EVAL_ZFD_LOCK, &r), (ssize_t)sizeof(r));
	ck_assert_str_eq(r.why, "zygote: a message that is not a job of this version");
	bad = job;
	bad.magic = 0x12345678;
	expect_refused(ctl, &bad, "not a job of this version");
	bad = job;
	bad.stage = 9;
	expect_refused(ctl, &bad, "bad stage");
	bad = job;
	bad.nbinds = EVAL_ZBINDS + 1;
	expect_refused(ctl, &bad, "bind count");
	bad = job;
	bad.flags = 1u << 7;
	expect_refused(ctl, &bad, "flag");
	bad = job;
	snprintf(bad.binds[0].src, EVAL_ZPATH, "relative/path");
	expect_refused(ctl, &bad, "bad bind");
	bad = job;
	memset(bad.binds[0].dst, 'x', EVAL_ZPATH);
	expect_refused(ctl, &bad, "bad bind");
	/* It survived them all, and leaves when its socket closes. */
	ck_assert_int_eq(waitpid(pid, &st, WNOHANG), 0);
	close(ctl);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

/* Pids in the groups of our jails, stark-OURPID-* (other stark processes
 * on this machine have their own): under the parent the sandbox probed on
 * cgroup v2, else under our own group. */
static size_t jail_tasks(pid_t *out, size_t max)
{
	char own[512] = "", line[600], path[1200], prefix[32];
	size_t n = 0;
	const char *parent = sandbox_cgroup_parent();
	FILE *f = parent ? NULL : fopen("/proc/self/cgroup", "r");
	DIR *d;
	struct dirent *de;

	if (parent)
		snprintf(own, sizeof(own), "%s", parent);
	/* v1: the pids hierarchy; else v2's unified one. */
	while (f && fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':'), *q = c ? strchr(c + 1, ':') : NULL;
		bool v1 = c && q && !strncmp(c + 1, "pids:", 5);

		if (v1 || (c && q && !strncmp(c, "::", 2) && !own[0])) {
			snprintf(own, sizeof(own), "/sys/fs/cgroup%s%s", v1 ? "/pids" : "", q + 1);
			own[strcspn(own, "\n")] = '\0';
		}
		if (v1)
			break;
	}
	if (f)
		fclose(f);
	d = opendir(own);
	while (d && (de = readdir(d))) {
		FILE *p;
		long pid;

		snprintf(prefix, sizeof(prefix), "stark-%d-", (int)getpid());
		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		snprintf(path, sizeof(path), "%s/%s/cgroup.procs", own, de->d_name);
		p = fopen(path, "r");
		while (p && n < max && fscanf(p, "%ld", &pid) == 1)
			out[n++] = (pid_t)pid;
		if (p)
			fclose(p);
	}
	if (d)
		closedir(d);
	return n;
}

/* o (initialized, evaluator set) as the run jail `stark` would make:
 * $STARK_SANDBOX_BINDS bound (where torch lives outside /usr, as on the GPU
 * machine), cache a read-only directory of its own. */
static void run_jail(struct evalrun_opts *o, struct evalrun_binds *b, char *cache)
{
	struct evalrun_opts compile;

	ck_assert_ptr_nonnull(mkdtemp(cache));
	evalrun_opts_init(&compile);
	compile.evaluator = o->evaluator;
	evalrun_jail_opts(&compile, o, cache, "cpu", false, b);
}

START_TEST(zygote_lost_then_restarted)
{
	struct evalrun_zygote *z;
	struct evalrun_zygote_stats st1, st2;
	struct evalrun_opts o;
	struct evalrun_binds binds;
	char cache[] = "/tmp/stark-test-cache.XXXXXX";
	struct evalrun *er;
	struct proto_request rq;
	struct proto_result rs;
	int rc;

	if (!have_evaluator())
		return;
	ck_assert_int_eq(evalrun_zygote_start(evaluator, NULL, &z), 0);
	evalrun_zygote_stats(z, &st1);
	ck_assert_int_gt(st1.pid, 0);
	ck_assert_uint_eq(st1.starts, 1);
	evalrun_opts_init(&o);
	o.evaluator = evaluator;
	run_jail(&o, &binds, cache);
	o.zygote = z;
	make_request(&rq, CAND_HANG, 60000);
	ck_assert_int_eq(evalrun_start(&o, &rq, &er), 0);
	ck_assert_int_eq(evalrun_poll(er, 1500), 0);
	ck_assert_int_eq(kill(st1.pid, SIGKILL), 0);
	while ((rc = evalrun_poll(er, -1)) == 0)
		;
	proto_result_init(&rs);
	ck_assert_int_eq(evalrun_finish(er, &rs, NULL), 0);
	evalrun_free(er);
	ck_assert_int_eq(rs.status, PROTO_ST_ERROR);
	ck_assert_msg(strstr(rs.message, "the evaluation was lost: the evaluator's zygote") &&
			  strstr(rs.message, "killed by signal 9"),
		      "%s", rs.message);
	proto_result_release(&rs);
	/* The next evaluation starts another zygote, and succeeds. */
	proto_request_release(&rq);
	make_request(&rq, CAND_OK, 60000);
	run_to_end(&o, &rq, &rs);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s", rs.message);
	evalrun_zygote_stats(z, &st2);
	ck_assert_uint_eq(st2.starts, 2);
	ck_assert_int_ne(st2.pid, st1.pid);
	proto_result_release(&rs);
	proto_request_release(&rq);
	evalrun_zygote_free(z);
	rmdir(cache);
	ck_assert_int_ne(kill(st2.pid, 0), 0);
}
END_TEST

/* A run whose jail is stopped as soon as it starts: only the orchestrator's
 * deadline can end it, a timeout whose message holds `want`, between
 * min_ms and max_ms after the stop, nothing of the jail left. */
static void stopped_to_deadline(const struct evalrun_opts *o, const struct proto_request *rq,
				const char *want, uint64_t min_ms, uint64_t max_ms)
{
	struct evalrun *er;
	struct proto_result rs;
	pid_t tasks[64];
	size_t n;
	uint64_t t0, took;

	ck_assert_int_eq(evalrun_start(o, rq, &er), 0);
	n = jail_tasks(tasks, 64);
	ck_assert_uint_gt(n, 0);
	for (size_t i = 0; i < n; i++)
		kill(tasks[i], SIGSTOP);
	t0 = clock_mono_ns();
	while (evalrun_poll(er, -1) == 0)
		;
	took = (clock_mono_ns() - t0) / 1000000ull;
	proto_result_init(&rs);
	ck_assert_int_eq(evalrun_finish(er, &rs, NULL), 0);
	evalrun_free(er);
	ck_assert_int_eq(rs.status, PROTO_ST_TIMEOUT);
	ck_assert_msg(strstr(rs.message, want), "%s", rs.message);
	ck_assert_msg(took >= min_ms && took < max_ms, "%llu ms", (unsigned long long)took);
	ck_assert_uint_eq(jail_tasks(tasks, 64), 0);
	proto_result_release(&rs);
}

START_TEST(zygote_deadline_and_cancel)
{
	struct evalrun_zygote *z;
	struct evalrun_opts o;
	struct evalrun_binds binds;
	char cache[] = "/tmp/stark-test-cache.XXXXXX";
	struct evalrun *er;
	struct proto_request rq;
	struct proto_result rs;
	pid_t tasks[64];
	uint64_t t0;

	if (!have_evaluator())
		return;
	ck_assert_int_eq(evalrun_zygote_start(evaluator, NULL, &z), 0);
	evalrun_opts_init(&o);
	o.evaluator = evaluator;
	run_jail(&o, &binds, cache);
	o.zygote = z;
	o.grace_ms = 1000;
	/* Deadline: every process of the jail stopped, so only the
	 * orchestrator's deadline can end it -- by a kill the monitor does. */
	make_request(&rq, CAND_OK, 3000);
	stopped_to_deadline(&o, &rq, "wall-clock limit of 3 s (plus 1 s grace)", 0, 6000);
	/* On a shared GPU (the lock passed) the evaluator's waits in its queue
	 * move its own deadline on, so the backstop allows the wall time
	 * again: 3 + 3 + 1 s. */
	{
		char lerr[256];

		o.lock_fd = evalrun_gpu_lock_open(NULL, NULL, lerr, sizeof(lerr));
		ck_assert_msg(o.lock_fd >= 0, "%s", lerr);
		stopped_to_deadline(&o, &rq,
				    "wall-clock limit of 3 s (plus 4 s for its grace and its queue on "
				    "the shared GPU)",
				    5500, 9000);
		close(o.lock_fd);
		o.lock_fd = -1;
	}
	/* Cancel: ends at once as "error", nothing of the jail left. */
	proto_request_release(&rq);
	make_request(&rq, CAND_HANG, 60000);
	ck_assert_int_eq(evalrun_start(&o, &rq, &er), 0);
	ck_assert_int_eq(evalrun_poll(er, 1000), 0);
	t0 = clock_mono_ns();
	evalrun_cancel(er);
	proto_result_init(&rs);
	ck_assert_int_eq(evalrun_finish(er, &rs, NULL), 0);
	evalrun_free(er);
	ck_assert_uint_lt(clock_mono_ns() - t0, 2000000000ull);
	ck_assert_int_eq(rs.status, PROTO_ST_ERROR);
	ck_assert_str_eq(rs.message, "the evaluation was canceled");
	ck_assert_uint_eq(jail_tasks(tasks, 64), 0);
	/* The zygote is as good as before. */
	proto_result_release(&rs);
	proto_request_release(&rq);
	make_request(&rq, CAND_OK, 60000);
	run_to_end(&o, &rq, &rs);
	ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s", rs.message);
	proto_result_release(&rs);
	proto_request_release(&rq);
	evalrun_zygote_free(z);
	rmdir(cache);
}
END_TEST

/* A result is taken when its frame is in, not when the jail is gone: the
 * referee waits for its workers after it sends the result.  What is still
 * ending is the zygote's to see end (evalrun_zygote_settle), and
 * evalrun_zygote_free() leaves nothing behind. */
START_TEST(zygote_result_before_end)
{
	struct evalrun_zygote *z;
	struct evalrun_opts o;
	struct evalrun_binds binds;
	struct evalrun_info info;
	char cache[] = "/tmp/stark-test-cache.XXXXXX";
	struct evalrun *er;
	struct proto_request rq;
	struct proto_result rs;
	pid_t tasks[64];
	unsigned early = 0;

	if (!have_evaluator())
		return;
	ck_assert_int_eq(evalrun_zygote_start(evaluator, NULL, &z), 0);
	evalrun_opts_init(&o);
	o.evaluator = evaluator;
	run_jail(&o, &binds, cache);
	o.zygote = z;
	make_request(&rq, CAND_OK, 60000);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(evalrun_start(&o, &rq, &er), 0);
		while (evalrun_poll(er, -1) == 0)
			;
		proto_result_init(&rs);
		evalrun_info_init(&info);
		ck_assert_int_eq(evalrun_finish(er, &rs, &info), 0);
		evalrun_free(er);
		ck_assert_msg(rs.status == PROTO_ST_CORRECT, "%s", rs.message);
		ck_assert(info.got_result);
		/* Not ended: no exit status to report, and what it printed
		 * before its result is kept all the same. */
		if (!info.ended) {
			early++;
			ck_assert_int_eq(info.exit.how, SANDBOX_EXITED);
			ck_assert_int_eq(info.exit.sig, 0);
		}
		evalrun_info_release(&info);
		proto_result_release(&rs);
		if (i == 0) {
			ck_assert_uint_eq(evalrun_zygote_settle(z, 10000), 0);
			ck_assert_uint_eq(jail_tasks(tasks, 64), 0);
		}
	}
	fprintf(stderr, "test_pool: %u of 3 results came before their jails ended\n", early);
	/* The last two may still be ending: freeing the zygote waits. */
	evalrun_zygote_free(z);
	ck_assert_uint_eq(jail_tasks(tasks, 64), 0);
	proto_request_release(&rq);
	rmdir(cache);
}
END_TEST

/* ---- the build cache (buildcache.c) ---- */

/* The key matches the referee's (test_evaluator.c checks the same vector
 * against stark_env.entry_key). */
START_TEST(cache_key_vector)
{
	static const char prob[] = "class Model: pass\n", sol[] = "class ModelNew: pass\n";
	char tc[EVALRUN_KEY_LEN + 1], key[EVALRUN_KEY_LEN + 1], cpu[EVALRUN_KEY_LEN + 1];

	for (int i = 0; i < 32; i++)
		memcpy(tc + 2 * i, "ab", 2);
	tc[64] = '\0';
	ck_assert_int_eq(evalrun_build_key(tc, "cuda:1", prob, strlen(prob), sol, strlen(sol), key), 0);
	ck_assert_str_eq(key, "787cedc4a8d34768cb4019a0d99487990f4257632b4eb87d552405f8cdcdffbc");
	ck_assert_int_eq(evalrun_build_key(tc, "cpu", prob, strlen(prob), sol, strlen(sol), cpu), 0);
	ck_assert_str_eq(cpu, "6ecd0e11fe1156ed13093b5c0eb84f8b0f70900d3097c066df3937db0c9f291e");
	ck_assert(evalrun_key_valid(key));
	tc[5] = 'G';
	ck_assert_int_eq(evalrun_build_key(tc, "cpu", prob, 1, sol, 1, key), ST_EINVAL);
	ck_assert(!evalrun_key_valid("../../etc"));
	ck_assert(!evalrun_key_valid(""));
}
END_TEST

/* folder/name into out (PATH_MAX bytes). */
static char *at(char *out, const char *folder, const char *name)
{
	ck_assert_int_lt(snprintf(out, PATH_MAX, "%s/%s", folder, name), PATH_MAX);
	return out;
}

static void put(const char *folder, const char *name, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	at(path, folder, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static bool holds(const char *folder, const char *name, const char *text)
{
	char path[PATH_MAX], buf[256] = "";
	FILE *f;
	size_t n;

	at(path, folder, name);
	f = fopen(path, "r");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return !strcmp(buf, text);
}

/* What the publisher takes from a scratch folder left by a hostile compile
 * stage: regular files and folders, never a link, a fifo or what a link
 * points to; an entry already published stays as it was. */
START_TEST(cache_publish)
{
	char root[] = "/tmp/stark-unit-cache.XXXXXX", scratch[PATH_MAX], outside[PATH_MAX],
	     entry[PATH_MAX], p[PATH_MAX], why[256], err[512];
	const char *key = "1111111111111111111111111111111111111111111111111111111111111111";
	struct evalrun_publish st;
	struct stat sb;

	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(evalrun_cache_prepare(root, err, sizeof(err)), 0);
	ck_assert_int_eq(evalrun_scratch_make(root, scratch, sizeof(scratch)), 0);
	at(outside, root, "outside");
	ck_assert_int_eq(mkdir(outside, 0700), 0);
	put(outside, "secret", "host secret");
	put(scratch, "mod.so", "built bytes");
	at(p, scratch, "ext");
	ck_assert_int_eq(mkdir(p, 0700), 0);
	put(p, "main.o", "object");
	at(p, scratch, "link.so");
	ck_assert_int_eq(symlink("../../outside/secret", p), 0);
	at(p, scratch, "ext/dirlink");
	ck_assert_int_eq(symlink(outside, p), 0);
	at(p, scratch, "fifo");
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	at(p, scratch, ".stark-entry");
	ck_assert_int_eq(symlink("/etc/passwd", p), 0);
	at(p, scratch, "closed");
	ck_assert_int_eq(mkdir(p, 0700), 0);
	put(p, "inner", "in a closed folder");
	ck_assert_int_eq(chmod(p, 0), 0);

	ck_assert_int_eq(evalrun_publish(root, "builds", key, scratch, &st, why, sizeof(why)), 0);
	at(p, root, "store/builds");
	at(entry, p, key);
	ck_assert(holds(entry, "mod.so", "built bytes"));
	ck_assert(holds(entry, "ext/main.o", "object"));
	ck_assert(holds(entry, "closed/inner", "in a closed folder"));
	ck_assert_uint_eq(st.skipped, 3); /* link.so, dirlink, fifo */
	for (const char *const *n = (const char *const[]){"link.so", "ext/dirlink", "fifo", NULL}; *n; n++) {
		at(p, entry, *n);
		ck_assert_msg(lstat(p, &sb) < 0 && errno == ENOENT, "%s was published", *n);
	}
	at(p, entry, ".stark-entry");
	ck_assert(lstat(p, &sb) == 0 && S_ISREG(sb.st_mode));
	ck_assert(holds(outside, "secret", "host secret"));

	/* The same key again: the first entry stays. */
	put(scratch, "mod.so", "other bytes");
	ck_assert_int_eq(evalrun_publish(root, "builds", key, scratch, &st, why, sizeof(why)), 1);
	ck_assert(holds(entry, "mod.so", "built bytes"));
	/* A bad key is refused before anything is written. */
	ck_assert_int_eq(evalrun_publish(root, "builds", "../x", scratch, &st, why, sizeof(why)), ST_EINVAL);

	/* Removal follows no link and gets through closed folders. */
	evalrun_tree_remove(scratch);
	ck_assert(lstat(scratch, &sb) < 0 && errno == ENOENT);
	ck_assert(holds(outside, "secret", "host secret"));
	evalrun_tree_remove(root);
	ck_assert(lstat(root, &sb) < 0);
}
END_TEST

/* Over a cap nothing is published; folders nested past any depth are
 * still removed. */
START_TEST(cache_caps_and_depth)
{
	char root[] = "/tmp/stark-unit-cache.XXXXXX", scratch[PATH_MAX], p[PATH_MAX + 80], why[256],
	     err[512];
	const char *key = "2222222222222222222222222222222222222222222222222222222222222222";
	struct evalrun_publish st;
	struct stat sb;
	size_t n;

	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(evalrun_cache_prepare(root, err, sizeof(err)), 0);
	ck_assert_int_eq(evalrun_scratch_make(root, scratch, sizeof(scratch)), 0);
	ck_assert_int_lt(chdir(scratch), 1);
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(mkdir("d", 0700), 0);
		ck_assert_int_eq(chdir("d"), 0);
	}
	put(".", "deep", "x");
	ck_assert_int_eq(chdir("/"), 0);
	ck_assert_int_eq(evalrun_publish(root, "builds", key, scratch, &st, why, sizeof(why)), ST_ETOOBIG);
	ck_assert_ptr_nonnull(strstr(why, "nested"));
	at(p, root, "store/builds");
	n = strlen(p);
	ck_assert(n < sizeof(p) - 70);
	p[n] = '/';
	memcpy(p + n + 1, key, 65);
	ck_assert(lstat(p, &sb) < 0);
	/* no temporary folder is left either */
	at(p, root, "store/builds");
	{
		DIR *d = opendir(p);
		struct dirent *e;
		int left = 0;

		ck_assert_ptr_nonnull(d);
		while ((e = readdir(d)))
			left += e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."));
		closedir(d);
		ck_assert_int_eq(left, 0);
	}
	evalrun_tree_remove(scratch);
	ck_assert(lstat(scratch, &sb) < 0 && errno == ENOENT);
	evalrun_tree_remove(root);
}
END_TEST

/* A JIT cache is published under jit/ (beside the store), within its own smaller caps
 * (a sparse file over them is refused without being read); a folder other
 * than builds and jit is refused. */
START_TEST(cache_jit_entry)
{
	char root[] = "/tmp/stark-unit-cache.XXXXXX", scratch[PATH_MAX], p[PATH_MAX + 80],
	     entry[PATH_MAX + 160], why[256], err[512];
	const char *key = "4444444444444444444444444444444444444444444444444444444444444444";
	struct evalrun_publish st;
	struct stat sb;
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(evalrun_cache_prepare(root, err, sizeof(err)), 0);
	ck_assert_int_eq(evalrun_scratch_make(root, scratch, sizeof(scratch)), 0);
	at(p, scratch, "abc");
	ck_assert_int_eq(mkdir(p, 0700), 0);
	put(p, "k.json", "{}");
	put(p, "k.cubin", "cubin bytes");
	ck_assert_int_eq(evalrun_publish(root, "../builds", key, scratch, &st, why, sizeof(why)),
			 ST_EINVAL);
	ck_assert_int_eq(evalrun_publish(root, "jit", key, scratch, &st, why, sizeof(why)), 0);
	ck_assert_uint_eq(st.files, 3);
	at(p, root, "jit");
	at(entry, p, key);
	ck_assert(holds(entry, "abc/k.cubin", "cubin bytes"));
	at(p, entry, ".stark-entry");
	ck_assert(lstat(p, &sb) == 0 && S_ISREG(sb.st_mode));
	at(p, root, "store/builds");
	at(entry, p, key);
	ck_assert(lstat(entry, &sb) < 0 && errno == ENOENT);

	/* Restored into a later evaluation's scratch: the files in cache/,
	 * not the mark; the key in restored.  Nothing for a key not there. */
	{
		char again[PATH_MAX], q[PATH_MAX + 80];

		ck_assert_int_eq(evalrun_scratch_make(root, again, sizeof(again)), 0);
		ck_assert_int_eq(evalrun_jit_restore(root, key, again, &st, why, sizeof(why)), 1);
		ck_assert_uint_eq(st.files, 3);
		at(q, again, "cache");
		ck_assert(holds(q, "abc/k.cubin", "cubin bytes"));
		at(p, q, ".stark-entry");
		ck_assert(lstat(p, &sb) < 0 && errno == ENOENT);
		ck_assert(holds(again, "restored", key));
		evalrun_tree_remove(again);
		ck_assert_int_eq(evalrun_scratch_make(root, again, sizeof(again)), 0);
		ck_assert_int_eq(evalrun_jit_restore(root, "6666666666666666666666666666666666666666666666666666666666666666",
						     again, &st, why, sizeof(why)), 0);
		at(q, again, "cache");
		ck_assert(lstat(q, &sb) < 0 && errno == ENOENT);
		evalrun_tree_remove(again);
	}

	/* Over the JIT cache's cap (a build's would take it): refused. */
	at(p, scratch, "big");
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)EVALRUN_JIT_TOTAL_MAX + 1), 0);
	close(fd);
	key = "5555555555555555555555555555555555555555555555555555555555555555";
	ck_assert_int_eq(evalrun_publish(root, "jit", key, scratch, &st, why, sizeof(why)),
			 ST_ETOOBIG);
	ck_assert_ptr_nonnull(strstr(why, "larger than the cap"));
	at(p, root, "jit");
	at(entry, p, key);
	ck_assert(lstat(entry, &sb) < 0 && errno == ENOENT);
	evalrun_tree_remove(scratch);
	evalrun_tree_remove(root);
}
END_TEST

/* A remembered failure is JSON with the message and the log. */
START_TEST(cache_remember_failure)
{
	char root[] = "/tmp/stark-unit-cache.XXXXXX", p[PATH_MAX + 80], err[512];
	size_t n;
	const char *key = "3333333333333333333333333333333333333333333333333333333333333333";
	json_t *doc;

	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(evalrun_cache_prepare(root, err, sizeof(err)), 0);
	ck_assert_int_eq(evalrun_remember_failure(root, key, "load_inline failed", "main.cpp:1:2: error: x"), 0);
	at(p, root, "store/failed");
	n = strlen(p);
	p[n] = '/';
	memcpy(p + n + 1, key, 65);
	doc = json_load_file(p, 0, NULL);
	ck_assert_ptr_nonnull(doc);
	ck_assert_str_eq(json_string_value(json_object_get(doc, "message")), "load_inline failed");
	ck_assert_str_eq(json_string_value(json_object_get(doc, "log")), "main.cpp:1:2: error: x");
	json_decref(doc);
	ck_assert_int_eq(evalrun_remember_failure(root, "nope", "m", "l"), ST_EINVAL);
	evalrun_tree_remove(root);
}
END_TEST

/* The footprint estimate kept for a problem's later evaluations: its key
 * (device kind and problem bytes only: vector), stored only where the
 * text is exactly an estimate, written as printed here, read back within
 * PROTO_PLAN_MAX bytes and never through a link. */
START_TEST(cache_plan_entry)
{
	static const char prob[] = "class Model: pass\n";
	static const char fp[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char root[] = "/tmp/stark-unit-cache.XXXXXX", err[512], key[EVALRUN_KEY_LEN + 1],
	     cpu[EVALRUN_KEY_LEN + 1], buf[PROTO_PLAN_MAX + 1], dir[PATH_MAX], doc[512],
	     big[PROTO_PLAN_MAX + 64];
	int dfd;
	const char *bad[] = {
	    "{\"in\":1,\"out\":2,\"weights\":0,\"fwd\":3,\"kernels\":4,\"gpu_us_least\":1.5}",
	    "{\"in\":-1,\"out\":2,\"weights\":0,\"fwd\":3,\"kernels\":4,\"gpu_us_least\":1.5,\"fwd_s\":0,\"fp\":\"%s\"}",
	    "{\"in\":1.5,\"out\":2,\"weights\":0,\"fwd\":3,\"kernels\":4,\"gpu_us_least\":1.5,\"fwd_s\":0,\"fp\":\"%s\"}",
	    "{\"in\":1,\"out\":2,\"weights\":0,\"fwd\":3,\"kernels\":4,\"gpu_us_least\":1.5,\"fwd_s\":0,\"fp\":\"../x\"}",
	    "{\"in\":1,\"out\":2,\"weights\":0,\"fwd\":3,\"kernels\":4,\"gpu_us_least\":1.5,\"fwd_s\":0,\"fp\":\"%s\",\"x\":1}",
	    "{\"in\":1,\"in\":1,\"weights\":0,\"fwd\":3,\"kernels\":4,\"gpu_us_least\":1.5,\"fwd_s\":0,\"fp\":\"%s\"}",
	    "[1,2]", "not json"};

	ck_assert_int_eq(evalrun_plan_key("cuda:1", prob, strlen(prob), key), 0);
	ck_assert_str_eq(key, "fba1d3cc2cbdfae10b341e4a0443ae658e5e5879ead448798ed8309be37bd396");
	ck_assert_int_eq(evalrun_plan_key("cpu", prob, strlen(prob), cpu), 0);
	ck_assert_str_ne(key, cpu);
	ck_assert_int_eq(evalrun_plan_key(NULL, prob, 1, cpu), ST_EINVAL);

	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(evalrun_cache_prepare(root, err, sizeof(err)), 0);
	ck_assert(!evalrun_plan_load(root, key, buf));
	ck_assert_str_eq(buf, "");
	snprintf(doc, sizeof(doc), "{\"kernels\": 4, \"in\": 1, \"out\": 2, \"weights\": 0, "
		 "\"fwd\": 3, \"gpu_us_least\": 1.5, \"fwd_s\": 0.25, \"fp\": \"%s\"}", fp);
	ck_assert_int_eq(evalrun_plan_store(root, key, doc), 0);
	ck_assert(evalrun_plan_load(root, key, buf));
	snprintf(doc, sizeof(doc), "{\"fp\":\"%s\",\"fwd\":3,\"fwd_s\":0.25,\"gpu_us_least\":1.5,"
		 "\"in\":1,\"kernels\":4,\"out\":2,\"weights\":0}", fp);
	ck_assert_str_eq(buf, doc);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[512];

		snprintf(text, sizeof(text), bad[i], fp);
		ck_assert_msg(evalrun_plan_store(root, key, text) == ST_EINVAL, "stored: %s", text);
	}
	ck_assert(evalrun_plan_load(root, key, buf));
	ck_assert_str_eq(buf, doc); /* the refused ones changed nothing */
	memset(big, ' ', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, doc, strlen(doc));
	ck_assert_int_eq(evalrun_plan_store(root, key, big), ST_EINVAL);
	ck_assert_int_eq(evalrun_plan_store(root, "../../x", doc), ST_EINVAL);

	/* Read back: not through a link, nor past PROTO_PLAN_MAX bytes. */
	at(dir, root, "store/plans");
	put(dir, "target", doc);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dfd, 0);
	ck_assert_int_eq(symlinkat("target", dfd, cpu), 0);
	ck_assert(!evalrun_plan_load(root, cpu, buf));
	ck_assert_int_eq(unlinkat(dfd, cpu, 0), 0);
	close(dfd);
	put(dir, cpu, big);
	ck_assert(!evalrun_plan_load(root, cpu, buf));
	ck_assert_str_eq(buf, "");
	ck_assert(!evalrun_plan_load(root, "nope", buf));
	evalrun_tree_remove(root);
}
END_TEST

/* The run jail's memory: the machine's share per evaluation in flight,
 * never below the floor, and $STARK_RUN_MEM_MIB over all of it. */
START_TEST(run_mem_share)
{
	uint64_t phys = sandbox_memory_limit();
	uint64_t one, four, many;
	struct evalrun_opts compile, run;
	struct evalrun_binds binds;

	unsetenv("STARK_RUN_MEM_MIB");
	one = evalrun_run_mem_default(1);
	four = evalrun_run_mem_default(4);
	many = evalrun_run_mem_default(100000);
	ck_assert_uint_eq(evalrun_run_mem_default(0), one);
	ck_assert_uint_le(one, phys);
	ck_assert_uint_ge(four, EVALRUN_RUN_MEM_FLOOR);
	ck_assert_uint_eq(many, EVALRUN_RUN_MEM_FLOOR);
	ck_assert_uint_ge(one, four);
	ck_assert_uint_ge(four, many);
	/* Three quarters of the machine for one, a quarter of that for four
	 * (or the floor where that is less). */
	if (phys / 4 * 3 > EVALRUN_RUN_MEM_FLOOR)
		ck_assert_uint_le(phys / 4 * 3 - one, 1u << 20);
	if (phys / 16 * 3 > EVALRUN_RUN_MEM_FLOOR)
		ck_assert_uint_le(phys / 16 * 3 - four, 1u << 20);
	ck_assert_int_eq(setenv("STARK_RUN_MEM_MIB", "2048", 1), 0);
	ck_assert_uint_eq(evalrun_run_mem_default(1), 2048ull << 20);
	ck_assert_uint_eq(evalrun_run_mem_default(64), 2048ull << 20);
	ck_assert_int_eq(setenv("STARK_RUN_MEM_MIB", "100", 1), 0); /* below 512: ignored */
	ck_assert_uint_eq(evalrun_run_mem_default(4), four);
	ck_assert_int_eq(setenv("STARK_RUN_MEM_MIB", "lots", 1), 0);
	ck_assert_uint_eq(evalrun_run_mem_default(4), four);
	unsetenv("STARK_RUN_MEM_MIB");
	/* The jail keeps a limit its caller set, and takes one evaluation's
	 * share where none was set. */
	evalrun_opts_init(&compile);
	evalrun_opts_init(&run);
	run.mem_bytes = four;
	evalrun_jail_opts(&compile, &run, "/nonexistent", "cpu", false, &binds);
	ck_assert_uint_eq(run.mem_bytes, four);
	evalrun_opts_init(&compile);
	evalrun_opts_init(&run);
	evalrun_jail_opts(&compile, &run, "/nonexistent", "cpu", false, &binds);
	ck_assert_uint_eq(run.mem_bytes, one);
}
END_TEST

/* The queue's allowance: none beyond the wall time for one evaluation on
 * a GPU, twice the wall time for each other one, capped by the protocol. */
START_TEST(queue_allowance)
{
	ck_assert_uint_eq(evalrun_queue_ms(180000, 0), 0);
	ck_assert_uint_eq(evalrun_queue_ms(180000, 1), 0);
	ck_assert_uint_eq(evalrun_queue_ms(180000, 2), 360000);
	ck_assert_uint_eq(evalrun_queue_ms(180000, 4), 1080000);
	ck_assert_uint_eq(evalrun_queue_ms(PROTO_TIME_MS_MAX, 3), PROTO_TIME_MS_MAX);
	ck_assert_uint_eq(evalrun_queue_ms(4000000000u, 64), PROTO_TIME_MS_MAX);
}
END_TEST

static Suite *pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *e = tcase_create("evalrun");

	tcase_set_timeout(e, 120);
	tcase_add_test(e, parse_caps);
	tcase_add_test(e, gpu_minor);
	tcase_add_test(e, gpu_lock_machine_wide);
	tcase_add_test(e, timing_cpus_auto);
	tcase_add_test(e, needs_compile);
	tcase_add_test(e, run_mem_share);
	tcase_add_test(e, queue_allowance);
	tcase_add_test(e, oom_without_account);
	tcase_add_test(e, zygote_reports_checked);
	tcase_add_test(e, zygote_refuses_bad_jobs);
	tcase_add_test(e, zygote_lost_then_restarted);
	tcase_add_test(e, zygote_deadline_and_cancel);
	tcase_add_test(e, zygote_result_before_end);
	suite_add_tcase(s, e);
	e = tcase_create("buildcache");
	tcase_add_test(e, cache_key_vector);
	tcase_add_test(e, cache_publish);
	tcase_add_test(e, cache_caps_and_depth);
	tcase_add_test(e, cache_jit_entry);
	tcase_add_test(e, cache_remember_failure);
	tcase_add_test(e, cache_plan_entry);
	suite_add_tcase(s, e);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pool_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
