/*
 * setup.c -- what an evaluation is given before its process starts: the
 * options and jails of its stages (binds, the GPU's device nodes, the
 * compile jail's memory, the CUDA architecture the compile jail cannot ask
 * a GPU for), the environment an evaluator may see (an allowlist: never
 * API keys), its sources, the build cache and the GPU lock its timings
 * share; and the record of how it ran (struct evalrun_info).  The ground the other files of pool/ stand
 * on: nothing here starts or talks to an evaluator.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "pool/pool_int.h"

extern char **environ;

#define CUDA_ARCH_WAIT_MS 10000u /* nvidia-smi's answer, at most */
#define GPUS_MAX 64		 /* GPUs of one host looked at, at most */

static const char *const env_allow[] = {
	"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TERM",
	"CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "MAX_JOBS",
	/* Not CUDA_VISIBLE_DEVICES: the run jail shows one GPU, which its
	 * evaluator sees as device 0 (evalrun_gpu_minor). */
	"CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST",
	"NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "STARK_CUDA_ARCH", "STARK_NVCC",
	"STARK_NVCC_PCH", "STARK_WINDOW_BYTES", "STARK_OUTPUT_WINDOW", "STARK_TIMING_CPUS",
	"STARK_COMPARE_KERNEL", "STARK_LAUNCH_MATCH", "STARK_LAUNCH_MATCH_ON", "STARK_PY_PROFILE",
	"STARK_INPUT_DELIVERY", "STARK_FLUSH_CONTEXT", "STARK_KB_RAND",
	"THUNDERKITTENS_ROOT", "TK_INCLUDE",
	"OMP_NUM_THREADS", "MKL_NUM_THREADS",
	"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
};

void evalrun_opts_init(struct evalrun_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->sandbox = SANDBOX_NONE;
	o->grace_ms = EVALRUN_GRACE_MS;
	o->gpu_index = -1;
	o->lock_fd = -1;
}

int evalrun_parse_caps(const char *text, int gpu_index, int *major, int *minor)
{
	const char *line = text;

	while (line && *line) {
		const char *nl = strchr(line, '\n');
		char buf[64];
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		int idx, ma, mi, used = 0;

		if (len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = '\0';
			if (sscanf(buf, " %d , %d.%d %n", &idx, &ma, &mi, &used) == 3 &&
			    buf[used] == '\0' && idx == gpu_index && ma > 0 && ma < 100 &&
			    mi >= 0 && mi < 10) {
				*major = ma;
				*minor = mi;
				return 0;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return -1;
}

/*
 * Where $STARK_CUDA_ARCH is not set, sets it (and $TORCH_CUDA_ARCH_LIST
 * where that is not set) from nvidia-smi's compute capability of GPU
 * gpu_index: the compile jail sees no GPU, so NVRTC and load_inline must be
 * told the target there.  Where only $STARK_CUDA_ARCH is set (sm_90),
 * $TORCH_CUDA_ARCH_LIST follows it (9.0).  Once per process; quiet where
 * nvidia-smi is missing or slow (the compile stage then says what to set).
 */
static void cuda_arch_env(int gpu_index)
{
	static bool tried;
	char a0[] = "nvidia-smi", a1[] = "--query-gpu=index,compute_cap", a2[] = "--format=csv,noheader";
	char *argv[] = {a0, a1, a2, NULL};
	char out[4096], list[16], arch[16];
	const char *given = getenv("STARK_CUDA_ARCH");
	posix_spawn_file_actions_t fa;
	int fds[2], status, major, minor, used = 0;
	size_t got = 0;
	pid_t pid = -1;
	uint64_t end;

	if (tried)
		return;
	tried = true;
	if (given) {
		if (!getenv("TORCH_CUDA_ARCH_LIST") &&
		    sscanf(given, "sm_%d%n", &major, &used) == 1 && given[used] == '\0' &&
		    major >= 10 && major < 1000) {
			snprintf(list, sizeof(list), "%d.%d", major / 10, major % 10);
			setenv("TORCH_CUDA_ARCH_LIST", list, 0);
		}
		return;
	}
	if (pipe2(fds, O_CLOEXEC) < 0)
		return;
	if (posix_spawn_file_actions_init(&fa) == 0) {
		if (posix_spawn_file_actions_adddup2(&fa, fds[1], 1) == 0 &&
		    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0) == 0 &&
		    posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0)
			pid = -1;
		posix_spawn_file_actions_destroy(&fa);
	}
	close(fds[1]);
	end = clock_mono_ns() + CUDA_ARCH_WAIT_MS * 1000000ull;
	while (pid > 0 && got < sizeof(out) - 1) {
		struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
		uint64_t now = clock_mono_ns();
		ssize_t r;

		if (now >= end || poll(&pfd, 1, (int)((end - now) / 1000000 + 1)) <= 0)
			break;
		r = read(fds[0], out + got, sizeof(out) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	out[got] = '\0';
	close(fds[0]);
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);	/* gone already, or hung: either way, reaped */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (evalrun_parse_caps(out, gpu_index, &major, &minor))
		return;
	snprintf(arch, sizeof(arch), "sm_%d%d", major, minor);
	snprintf(list, sizeof(list), "%d.%d", major, minor);
	setenv("STARK_CUDA_ARCH", arch, 0);
	setenv("TORCH_CUDA_ARCH_LIST", list, 0);
}

/*
 * The run jail's memory limit: $STARK_RUN_MEM_MIB, else three quarters of
 * the machine's memory (or of our cgroup's limit, where that is less:
 * sandbox_memory_limit) shared among the evaluations in flight on it, and
 * never below 4 GiB (what a 2-core, 24 GiB CI machine gets).  Why a share
 * and not a fixed part: a KernelBench level-1 problem moves 6-16 GiB of
 * inputs, which KernelBench's harness makes on the CPU in each worker, so
 * an evaluation's referee and two workers need two to three times that.
 * On the H100 host (128 GiB) the former default (an eighth, capped at
 * 16 GiB) killed 15 honest evaluations of level 1 at 16 GiB while the host
 * had 100 GiB free, made the workers' copies one after the other (130 s
 * of a 320 s evaluation) and left 45_Average_Pooling_2D (16 GiB of inputs)
 * unable to run at all.  A jail's limit bounds what it may take, so the
 * shares of all evaluations in flight together stay within the machine.
 */
uint64_t evalrun_run_mem_default(unsigned in_flight)
{
	const char *v = getenv("STARK_RUN_MEM_MIB");
	uint64_t machine = sandbox_memory_limit();
	uint64_t mib, def = EVALRUN_RUN_MEM_FLOOR;

	if (machine) {
		uint64_t share = machine / 4 * 3 / (in_flight ? in_flight : 1);

		def = share < def ? def : share;
	}
	if (!v || !*v || str_to_u64(v, 512, 1ull << 24, &mib)) {
		if (v && *v)
			stark_warn("evalrun: STARK_RUN_MEM_MIB must be a number of MiB from 512 up, not '%s'; the run jail keeps its default of %llu MiB",
				   v, (unsigned long long)(def >> 20));
		return def;
	}
	return mib << 20;
}

void evalrun_jail_opts(struct evalrun_opts *compile, struct evalrun_opts *run, const char *cache,
		       const char *device, bool insecure, struct evalrun_binds *binds)
{
	const char *env = getenv("STARK_SANDBOX_BINDS");
	const char *pch = getenv("STARK_NVCC_PCH");
	char *save = NULL;
	struct stat st;
	size_t n = 0;

	/* The store, read-only, to the compile stage's referee (what the
	 * cache holds for its key); no jail ever gets it writable. */
	snprintf(binds->store, sizeof(binds->store), "%s/store", cache);
	binds->compile[0] = (struct sandbox_bind){.src = binds->store};
	snprintf(binds->extra, sizeof(binds->extra), "%s", env ? env : "");
	for (char *p = strtok_r(binds->extra, ":", &save); p && n + 1 < EVALRUN_BINDS_MAX;
	     p = strtok_r(NULL, ":", &save), n++) {
		char *eq = strchr(p, '=');

		if (eq)
			*eq = '\0';
		binds->compile[n + 1] = binds->run[n] =
		    (struct sandbox_bind){.src = p, .dst = eq && eq[1] ? eq + 1 : NULL};
	}
	compile->nbinds = n + 1;
	run->nbinds = n;
	/* Prepared prefixes for stark_nvcc: read-only to the compile jail, so
	 * that no candidate can change what later builds include. */
	if (pch && pch[0] == '/' && compile->nbinds < EVALRUN_BINDS_MAX && stat(pch, &st) == 0 &&
	    S_ISDIR(st.st_mode))
		binds->compile[compile->nbinds++] = (struct sandbox_bind){.src = pch};
	compile->sandbox = SANDBOX_COMPILE;
	run->sandbox = SANDBOX_RUN;
	if (!compile->mem_bytes)
		compile->mem_bytes = EVALRUN_COMPILE_MEM;
	if (!run->mem_bytes)
		run->mem_bytes = evalrun_run_mem_default(1);
	run->oom_grace_ms = EVALRUN_OOM_GRACE_MS;
	compile->binds = binds->compile;
	run->binds = binds->run;
	compile->insecure = run->insecure = insecure;
	if (str_starts(device, "cuda")) {
		int index = device[4] == ':' ? atoi(device + 5) : 0;

		run->gpu_index = evalrun_gpu_minor(EVALRUN_GPUS_DIR, getenv("CUDA_VISIBLE_DEVICES"), index);
		if (run->gpu_index < 0)
			run->gpu_index = index; /* no driver folder: the evaluator says what is missing */
		cuda_arch_env(index);
	}
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int evalrun__read_minor(const char *gpus_dir, const char *bus)
{
	char path[PATH_MAX], line[256];
	int minor = -1;
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s/information", gpus_dir, bus) >= sizeof(path))
		return -1;
	if (!(f = fopen(path, "re")))
		return -1;
	while (minor < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "Device Minor: %d", &minor) != 1 || minor < 0 || minor > 255)
			minor = -1;
	fclose(f);
	return minor;
}

int evalrun_gpu_minor(const char *gpus_dir, const char *visible, int index)
{
	char *names[GPUS_MAX];
	size_t n = 0, i;
	struct dirent *e;
	int rc = -1;
	DIR *d;

	if (index < 0 || !gpus_dir)
		return -1;
	/* CUDA_VISIBLE_DEVICES=2,3: cuda:1 is the GPU of index 3.  A list of
	 * UUIDs or MIG names is not followed (index counts all GPUs). */
	if (visible && *visible) {
		const char *p = visible;
		int k = 0, v = -1;

		while (*p) {
			char *end;
			long x = strtol(p, &end, 10);

			if (end == p || x < 0 || x >= GPUS_MAX || (*end && *end != ','))
				break;
			if (k++ == index)
				v = (int)x;
			p = *end ? end + 1 : end;
		}
		if (!*p) {
			if (v < 0)
				return -1; /* fewer visible GPUs than index */
			index = v;
		}
	}
	if (!(d = opendir(gpus_dir)))
		return -1;
	while (n < GPUS_MAX && (e = readdir(d)))
		if (e->d_name[0] != '.' && (names[n] = strdup(e->d_name)))
			n++;
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_names);
	if ((size_t)index < n)
		rc = evalrun__read_minor(gpus_dir, names[index]);
	for (i = 0; i < n; i++)
		free(names[i]);
	return rc;
}

bool evalrun_env_allowed(const char *name)
{
	for (size_t i = 0; i < ST_ARRAY_LEN(env_allow); i++)
		if (!strcmp(name, env_allow[i]))
			return true;
	return false;
}

void evalrun_info_init(struct evalrun_info *info)
{
	memset(info, 0, sizeof(*info));
}

void evalrun_info_release(struct evalrun_info *info)
{
	free(info->out);
	free(info->err);
	evalrun_info_init(info);
}

void evalrun_free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

char **evalrun_copy_env(const char *const *given)
{
	size_t n = 0, k = 0;
	char **env;

	if (given)
		while (given[n])
			n++;
	else
		while (environ[n])
			n++;
	env = calloc(n + 1, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *kv = given ? given[i] : environ[i];
		const char *eq = strchr(kv, '=');
		char name[128];

		if (!given) {
			if (!eq || (size_t)(eq - kv) >= sizeof(name))
				continue;
			memcpy(name, kv, (size_t)(eq - kv));
			name[eq - kv] = '\0';
			if (!evalrun_env_allowed(name))
				continue;
		}
		env[k] = strdup(kv);
		if (!env[k]) {
			evalrun_free_env(env);
			return NULL;
		}
		k++;
	}
	return env;
}


int evalrun_load_sources(struct proto_request *rq, const char *problem_path,
			 const char *solution_path, char *err, size_t errlen)
{
	const char *paths[2] = {problem_path, solution_path};
	const char *what[2] = {"problem", "solution"};
	struct dbuf src[2];
	int rc = 0;

	dbuf_init(&src[0], PROTO_SRC_MAX);
	dbuf_init(&src[1], PROTO_SRC_MAX);
	for (int i = 0; i < 2 && !rc; i++) {
		rc = io_read_file(paths[i], PROTO_SRC_MAX, &src[i]);
		if (rc == ST_ENOENT)
			snprintf(err, errlen, "%s file '%s' does not exist", what[i], paths[i]);
		else if (rc == ST_ETOOBIG)
			snprintf(err, errlen, "%s file '%s' is larger than %u bytes", what[i],
				 paths[i], PROTO_SRC_MAX);
		else if (rc)
			snprintf(err, errlen, "%s file '%s' cannot be read: %s", what[i], paths[i],
				 strerror(errno));
		else if (src[i].len == 0) {
			snprintf(err, errlen, "%s file '%s' is empty", what[i], paths[i]);
			rc = ST_EINVAL;
		}
	}
	if (rc)
		goto out_free;
	free(rq->problem_name);
	free(rq->solution_name);
	free(rq->problem_src);
	free(rq->solution_src);
	rq->problem_name = str_dup(problem_path);
	rq->solution_name = str_dup(solution_path);
	rq->problem_src = dbuf_detach(&src[0], &rq->problem_len);
	rq->solution_src = dbuf_detach(&src[1], &rq->solution_len);
	if (!rq->problem_name || !rq->solution_name) {
		snprintf(err, errlen, "out of memory");
		rc = ST_ENOMEM;
	}
out_free:
	dbuf_release(&src[0]);
	dbuf_release(&src[1]);
	return rc;
}

int evalrun_default_cache(char *buf, size_t len, char *err, size_t errlen)
{
	const char *env = getenv("STARK_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	int n;

	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (xdg && *xdg)
		n = snprintf(buf, len, "%s/stark", xdg);
	else if (home && *home)
		n = snprintf(buf, len, "%s/.cache/stark", home);
	else {
		snprintf(err, errlen, "no build cache: set STARK_CACHE or HOME");
		return ST_EINVAL;
	}
	if (n < 0 || (size_t)n >= len || n >= PROTO_PATH_MAX) {
		snprintf(err, errlen, "build cache path is too long");
		return ST_EINVAL;
	}
	if (buf[0] != '/') {
		snprintf(err, errlen, "build cache '%s' is not an absolute path", buf);
		return ST_EINVAL;
	}
	if (io_mkdir_p(buf)) {
		snprintf(err, errlen, "cannot create build cache '%s': %s", buf, strerror(errno));
		return ST_EIO;
	}
	return 0;
}
