/*
 * evalrun.c -- one evaluation in a stark-eval process, driven by poll.
 *
 * The orchestrator's side of evaluator/evaluator.h: four pipes (request,
 * stdout, stderr, result), a sandboxed child, a loop that writes the request
 * without blocking, reads stdout/stderr into capped buffers and discards the
 * excess, feeds fd 3 to the framer (capped at EVALRUN_RESULT_MAX; a second
 * frame or trailing bytes are a protocol violation), and waits for the child
 * under a deadline.  Nothing the evaluator sends is trusted: the result is
 * decoded strictly and must echo the request's id; everything else (no
 * frame, a bad frame, a signal, the deadline) is turned into a verdict here,
 * with the message saying which.
 *
 * The child is either exec'd here (sandbox_spawn) or forked in its jail by
 * the evaluator's zygote (evalzyg.c): then the pipes go to the zygote with
 * the job, the end of the child is the monitor's report on a socket instead
 * of the sandbox's descriptor, and a kill is a byte on that socket.  Only
 * kill_tree() and reap() tell the two apart; everything the verdicts are
 * made from is the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "evaluator/evaluator.h"
#include "orchestrator/evalrun.h"
#include "orchestrator/evalrun_int.h"

extern char **environ;

enum { P_IN, P_OUT, P_ERR, P_RES, P_COUNT };

#define CUDA_ARCH_WAIT_MS 10000u /* nvidia-smi's answer, at most */

struct evalrun {
	struct sandbox_child *child; /* exec'd: the jail; NULL with a zygote */
	struct evalrun_zygote *zyg;  /* forked by this zygote, or NULL */
	int rep;		     /* zygote: the report socket, -1 once closed */
	bool kill_sent, zyg_lost;
	char lost_why[256];	     /* zyg_lost: what happened */
	struct evalrun_stage_info si;
	int fd[P_COUNT];	/* our ends; -1 once closed */
	struct dbuf req;	/* the encoded request frame */
	size_t req_off;		/* bytes of it written */
	struct dbuf out, err;	/* captured stdout/stderr (capped) */
	uint64_t out_total, err_total;
	struct proto_framer framer;
	struct dbuf body;	/* the result frame's body, once complete */
	bool have_frame;
	char proto_err[256];	/* why the result channel is unusable, or "" */
	bool ended, canceled, deadline_hit, local_fail;
	struct sandbox_exit ex;
	unsigned layers;
	uint64_t start_ns, deadline_ns;
	uint32_t wall_ms;
	char *id;
	char **env;		/* owned copy of the environment given */
};

static const char *const env_allow[] = {
	"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TERM",
	"CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "MAX_JOBS",
	"CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "TORCH_CUDA_ARCH_LIST",
	"NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "STARK_CUDA_ARCH", "STARK_NVCC",
	"STARK_NVCC_PCH", "STARK_WINDOW_BYTES",
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

/* $STARK_RUN_MEM_MIB in bytes, or 0 (the sandbox's default) where it is
 * unset or not a number of MiB from 512 up. */
static uint64_t run_mem_bytes(void)
{
	const char *v = getenv("STARK_RUN_MEM_MIB");
	uint64_t mib;

	if (!v || !*v || str_to_u64(v, 512, 1ull << 24, &mib)) {
		if (v && *v)
			stark_warn("evalrun: STARK_RUN_MEM_MIB must be a number of MiB from 512 up, not '%s'; the run jail keeps its default",
				   v);
		return 0;
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
	size_t n = 1;

	binds->compile[0] = (struct sandbox_bind){.src = cache, .writable = true};
	binds->run[0] = (struct sandbox_bind){.src = cache, .writable = false};
	snprintf(binds->extra, sizeof(binds->extra), "%s", env ? env : "");
	for (char *p = strtok_r(binds->extra, ":", &save); p && n < EVALRUN_BINDS_MAX;
	     p = strtok_r(NULL, ":", &save), n++)
		binds->compile[n] = binds->run[n] = (struct sandbox_bind){.src = p};
	compile->nbinds = n;
	/* Prepared prefixes for stark_nvcc: read-only to the compile jail, so
	 * that no candidate can change what later builds include. */
	if (pch && pch[0] == '/' && n < EVALRUN_BINDS_MAX && stat(pch, &st) == 0 && S_ISDIR(st.st_mode))
		binds->compile[compile->nbinds++] = (struct sandbox_bind){.src = pch};
	compile->sandbox = SANDBOX_COMPILE;
	run->sandbox = SANDBOX_RUN;
	if (!compile->mem_bytes)
		compile->mem_bytes = EVALRUN_COMPILE_MEM;
	if (!run->mem_bytes)
		run->mem_bytes = run_mem_bytes();
	run->oom_grace_ms = EVALRUN_OOM_GRACE_MS;
	compile->binds = binds->compile;
	run->binds = binds->run;
	run->nbinds = n;
	compile->insecure = run->insecure = insecure;
	if (str_starts(device, "cuda")) {
		run->gpu_index = device[4] == ':' ? atoi(device + 5) : 0;
		cuda_arch_env(run->gpu_index);
	}
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

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
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

static int make_pipes(int fds[P_COUNT][2])
{
	for (int i = 0; i < P_COUNT; i++)
		fds[i][0] = fds[i][1] = -1;
	for (int i = 0; i < P_COUNT; i++)
		if (pipe2(fds[i], O_CLOEXEC) < 0)
			return stark_error(ST_ESYS, "evalrun: pipe: %s", strerror(errno));
	return 0;
}

/* The exec'd form: the evaluator binary, spawned in its jail here. */
static int start_exec(struct evalrun *er, const struct evalrun_opts *o,
		      const struct proto_request *rq, int p[P_COUNT][2])
{
	struct sandbox_config cfg;
	struct sandbox_fd map[P_COUNT + 1];
	char *argv[3];

	sandbox_config_init(&cfg, o->sandbox);
	map[P_IN] = (struct sandbox_fd){p[P_IN][0], EVAL_FD_REQUEST};
	map[P_OUT] = (struct sandbox_fd){p[P_OUT][1], 1};
	map[P_ERR] = (struct sandbox_fd){p[P_ERR][1], 2};
	map[P_RES] = (struct sandbox_fd){p[P_RES][1], EVAL_FD_RESULT};
	cfg.nfds = P_COUNT;
	if (o->lock_fd >= 0)
		map[cfg.nfds++] = (struct sandbox_fd){o->lock_fd, EVAL_FD_LOCK};
	cfg.fds = map;
	cfg.env = (const char *const *)er->env;
	cfg.binds = o->binds;
	cfg.nbinds = o->nbinds;
	cfg.gpu_index = o->gpu_index;
	if (o->mem_bytes)
		cfg.mem_bytes = o->mem_bytes;
	cfg.oom_grace_ms = o->oom_grace_ms;
	if (o->required)
		cfg.required = o->required;
	cfg.insecure = o->insecure;
	cfg.wall_ms = (uint64_t)rq->wall_ms + o->grace_ms;
	argv[0] = (char *)o->evaluator;
	argv[1] = o->sandbox == SANDBOX_RUN ? (char *)"--jailed" : NULL;
	argv[2] = NULL;
	return sandbox_spawn(&cfg, o->evaluator, argv, &er->child);
}

/* The job for the zygote: what start_exec() puts in the sandbox config. */
static int make_job(const struct evalrun_opts *o, const struct proto_request *rq,
		    struct eval_zjob *job)
{
	struct sandbox_config cfg;
	int rc;

	sandbox_config_init(&cfg, o->sandbox);
	if (o->required)
		cfg.required = o->required;
	cfg.insecure = o->insecure;
	/* Decided and reported here, once, as sandbox_spawn() would: the
	 * zygote's children are then asked only for what this machine has. */
	rc = sandbox_check_layers(&cfg);
	if (rc)
		return rc;
	memset(job, 0, sizeof(*job));
	job->magic = EVAL_ZMAGIC;
	job->version = EVAL_ZVERSION;
	job->stage = (uint32_t)o->sandbox;
	job->flags = (o->insecure ? EVAL_ZJOB_INSECURE : 0) |
		     (o->lock_fd >= 0 ? EVAL_ZJOB_LOCK : 0) |
		     (o->sandbox == SANDBOX_RUN ? EVAL_ZJOB_JAILED : 0);
	job->gpu_index = o->gpu_index;
	/* (never 0, which the zygote would read as "the stage's default") */
	job->required = (cfg.required & sandbox_layers_available(o->sandbox)) | SANDBOX_L_FDS;
	job->mem_bytes = o->mem_bytes;
	job->oom_grace_ms = o->oom_grace_ms;
	job->wall_ms = (uint64_t)rq->wall_ms + o->grace_ms;
	job->owner_pid = (int32_t)getpid();
	if (o->nbinds > EVAL_ZBINDS)
		return stark_error(ST_EINVAL, "evalrun: %zu binds, the zygote takes %u", o->nbinds,
				   EVAL_ZBINDS);
	job->nbinds = (uint32_t)o->nbinds;
	for (size_t i = 0; i < o->nbinds; i++) {
		const struct sandbox_bind *b = &o->binds[i];

		if (!b->src || strlen(b->src) >= EVAL_ZPATH ||
		    (b->dst && strlen(b->dst) >= EVAL_ZPATH))
			return stark_error(ST_EINVAL, "evalrun: bind path too long for the zygote: %.100s",
					   b->src ? b->src : "(null)");
		snprintf(job->binds[i].src, EVAL_ZPATH, "%s", b->src);
		snprintf(job->binds[i].dst, EVAL_ZPATH, "%s", b->dst ? b->dst : "");
		job->binds[i].writable = b->writable;
	}
	return 0;
}

/*
 * Waits until the job's jail is entered: 0 (STARTED), 1 when the zygote
 * went away first (the caller may retry on a new one), or the spawn's
 * failure (its message printed, as sandbox_spawn() prints it).
 */
static int wait_started(struct evalrun *er)
{
	uint64_t until = clock_mono_ns() + EVALRUN_ZYGOTE_SPAWN_MS * 1000000ull;
	struct eval_zreport r;
	int rc;

	for (;;) {
		struct pollfd pf = {er->rep, POLLIN, 0};
		uint64_t now = clock_mono_ns();

		rc = evz_recv_report(er->rep, &r);
		if (rc == ST_EEOF && evz_lost(er->zyg, er->lost_why, sizeof(er->lost_why)))
			return 1;
		if (rc == ST_EEOF)
			return stark_error(ST_ESYS, "evalrun: %s", er->lost_why);
		if (rc == ST_EPROTO)
			return stark_error(ST_EPROTO, "evalrun: %s", r.why);
		if (rc == 1 && r.kind == EVAL_ZREP_STARTED) {
			er->layers = r.layers;
			er->si.fork_ns = r.fork_ns;
			er->si.jail_ns = r.jail_ns;
			return 0;
		}
		if (rc == 1) {
			if (r.why[0])
				stark_warn("%s", r.why);
			return r.spawn_rc < 0 ? r.spawn_rc : ST_EPROTO;
		}
		if (now >= until) {
			evz_mark_broken(er->zyg, true);
			return stark_error(ST_ETIMEDOUT, "evalrun: the evaluator's zygote did not start a job within %u s",
					   EVALRUN_ZYGOTE_SPAWN_MS / 1000);
		}
		if (poll(&pf, 1, (int)((until - now) / 1000000 + 1)) < 0 && errno != EINTR)
			return stark_error(ST_ESYS, "evalrun: poll: %s", strerror(errno));
	}
}

/* The zygote's form: the pipes go to it with the job; one retry on a
 * zygote that died under us. */
static int start_zygote(struct evalrun *er, const struct evalrun_opts *o,
			const struct proto_request *rq, int p[P_COUNT][2])
{
	struct eval_zjob job;
	int fds[EVAL_ZFD_COUNT], rs[2], rc;

	rc = make_job(o, rq, &job);
	for (int attempt = 0; !rc && attempt < 2; attempt++) {
		rc = evz_ensure(o->zygote);
		if (rc)
			return rc;
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rs) < 0)
			return stark_error(ST_ESYS, "evalrun: socketpair: %s", strerror(errno));
		fds[EVAL_ZFD_REQUEST] = p[P_IN][0];
		fds[EVAL_ZFD_STDOUT] = p[P_OUT][1];
		fds[EVAL_ZFD_STDERR] = p[P_ERR][1];
		fds[EVAL_ZFD_RESULT] = p[P_RES][1];
		fds[EVAL_ZFD_REPORT] = rs[1];
		fds[EVAL_ZFD_LOCK] = o->lock_fd;
		rc = evz_send(o->zygote, &job, fds, o->lock_fd >= 0 ? EVAL_ZFD_COUNT : EVAL_ZFD_LOCK);
		close(rs[1]);
		er->rep = rs[0];
		er->zyg = o->zygote;
		if (rc)
			snprintf(er->lost_why, sizeof(er->lost_why),
				 "the evaluator's zygote did not take the job");
		rc = rc ? 1 : wait_started(er);
		if (rc != 1)
			break;
		close(er->rep); /* the zygote died before the jail was entered */
		er->rep = -1;
		rc = 0;
	}
	if (rc == 0 && er->rep < 0)
		rc = stark_error(ST_ESYS, "evalrun: %s", er->lost_why);
	return rc;
}

int evalrun_start(const struct evalrun_opts *o, const struct proto_request *rq,
		  struct evalrun **out)
{
	int p[P_COUNT][2];
	struct evalrun *er;
	char err[256];
	int rc;

	*out = NULL;
	er = calloc(1, sizeof(*er));
	if (!er)
		return ST_ENOMEM;
	for (int i = 0; i < P_COUNT; i++)
		er->fd[i] = -1;
	er->rep = -1;
	dbuf_init(&er->req, PROTO_PREFIX_LEN + PROTO_FRAME_MAX);
	dbuf_init(&er->out, EVAL_OUTPUT_CAP);
	dbuf_init(&er->err, EVAL_OUTPUT_CAP);
	dbuf_init(&er->body, EVALRUN_RESULT_MAX);
	proto_framer_init(&er->framer, EVALRUN_RESULT_MAX);
	er->wall_ms = rq->wall_ms;
	er->id = str_dup(rq->id ? rq->id : "");
	er->env = evalrun_copy_env(o->env);
	if (!er->id || !er->env) {
		rc = ST_ENOMEM;
		goto out_free;
	}
	rc = proto_request_check(rq, err, sizeof(err));
	if (!rc)
		rc = proto_request_encode(rq, &er->req);
	if (rc) {
		rc = stark_error(ST_EINVAL, "evalrun: request does not encode: %s",
				 rc == ST_ENOMEM ? "out of memory" : err);
		goto out_free;
	}
	rc = make_pipes(p);
	if (rc)
		goto out_pipes;

	snprintf(er->si.stage, sizeof(er->si.stage), "%s",
		 rq->stage == PROTO_STAGE_COMPILE ? "compile" :
		 rq->stage == PROTO_STAGE_RUN	  ? "run" :
						    "all");
	er->si.zygote = o->zygote != NULL;
	er->start_ns = clock_mono_ns();
	er->deadline_ns = er->start_ns + ((uint64_t)rq->wall_ms + o->grace_ms) * 1000000ull;
	rc = o->zygote ? start_zygote(er, o, rq, p) : start_exec(er, o, rq, p);
	if (rc)
		goto out_pipes;
	er->si.spawn_ns = clock_mono_ns() - er->start_ns;
	if (o->zygote) {
		struct evalrun_zygote_stats zs;

		evalrun_zygote_stats(o->zygote, &zs);
		er->si.zygote_pid = zs.pid;
		er->si.zygote_starts = zs.starts;
	}
	if (er->child)
		er->layers = sandbox_child_layers(er->child);
	er->fd[P_IN] = p[P_IN][1];
	er->fd[P_OUT] = p[P_OUT][0];
	er->fd[P_ERR] = p[P_ERR][0];
	er->fd[P_RES] = p[P_RES][0];
	p[P_IN][1] = p[P_OUT][0] = p[P_ERR][0] = p[P_RES][0] = -1;
	for (int i = 0; i < P_COUNT; i++) {
		int fl = fcntl(er->fd[i], F_GETFL);

		if (fl < 0 || fcntl(er->fd[i], F_SETFL, fl | O_NONBLOCK) < 0) {
			rc = stark_error(ST_ESYS, "evalrun: fcntl: %s", strerror(errno));
			goto out_pipes;
		}
	}
	rc = 0;
out_pipes:
	for (int i = 0; i < P_COUNT; i++) {
		close_fd(&p[i][0]);
		close_fd(&p[i][1]);
	}
	if (!rc) {
		*out = er;
		return 0;
	}
	close_fd(&er->rep); /* a job that never started: nothing to reap */
out_free:
	evalrun_free(er);
	return rc;
}

size_t evalrun_pollfds(const struct evalrun *er, struct pollfd *pfd, size_t max,
		       int *timeout_ms)
{
	size_t n = 0;
	uint64_t now = clock_mono_ns();

	if (timeout_ms)
		*timeout_ms = now >= er->deadline_ns ? 0 :
			      (int)((er->deadline_ns - now + 999999) / 1000000 > INT_MAX
					    ? INT_MAX
					    : (er->deadline_ns - now + 999999) / 1000000);
	if (er->ended)
		return 0;
	if (er->fd[P_IN] >= 0 && n < max)
		pfd[n++] = (struct pollfd){er->fd[P_IN], POLLOUT, 0};
	for (int i = P_OUT; i < P_COUNT; i++)
		if (er->fd[i] >= 0 && n < max)
			pfd[n++] = (struct pollfd){er->fd[i], POLLIN, 0};
	if (n < max && (er->child || er->rep >= 0))
		pfd[n++] = (struct pollfd){er->child ? sandbox_child_fd(er->child) : er->rep, POLLIN,
					   0};
	return n;
}

static void write_request(struct evalrun *er)
{
	while (er->fd[P_IN] >= 0 && er->req_off < er->req.len) {
		ssize_t w = write(er->fd[P_IN], er->req.p + er->req_off, er->req.len - er->req_off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w < 0) {
			close_fd(&er->fd[P_IN]); /* EPIPE: the evaluator is gone */
			return;
		}
		er->req_off += (size_t)w;
	}
	if (er->req_off == er->req.len)
		close_fd(&er->fd[P_IN]); /* EOF after the frame */
}

/* Feeds result-channel bytes to the framer; one frame, nothing after it. */
static void take_result_bytes(struct evalrun *er, const char *p, size_t n)
{
	while (n && !er->proto_err[0]) {
		const void *body;
		size_t len, used;
		int rc;

		if (er->have_frame) {
			snprintf(er->proto_err, sizeof(er->proto_err),
				 "bytes after the result frame on fd %d", EVAL_FD_RESULT);
			return;
		}
		rc = proto_framer_feed(&er->framer, p, n, &body, &len, &used);
		if (rc < 0) {
			snprintf(er->proto_err, sizeof(er->proto_err),
				 "result frame: %s (cap %u bytes)", stark_strerror(rc),
				 EVALRUN_RESULT_MAX);
			return;
		}
		p += used;
		n -= used;
		if (rc == 1) {
			if (dbuf_append(&er->body, body, len)) {
				snprintf(er->proto_err, sizeof(er->proto_err),
					 "result frame too large");
				return;
			}
			er->have_frame = true;
		}
	}
}

/* Reads what is available on one of our pipes; closes it at EOF. */
static void read_pipe(struct evalrun *er, int which)
{
	char buf[65536];

	for (;;) {
		ssize_t r = read(er->fd[which], buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			close_fd(&er->fd[which]);
			return;
		}
		if (which == P_OUT) {
			er->out_total += (uint64_t)r;
			dbuf_append_trunc(&er->out, buf, (size_t)r);
		} else if (which == P_ERR) {
			er->err_total += (uint64_t)r;
			dbuf_append_trunc(&er->err, buf, (size_t)r);
		} else {
			take_result_bytes(er, buf, (size_t)r);
		}
	}
}

/* The child is gone: take what the pipes still hold, then close them.
 * Descendants may keep a pipe open; we take only what is there now. */
static void drain_and_close(struct evalrun *er)
{
	for (int i = P_OUT; i < P_COUNT; i++)
		if (er->fd[i] >= 0)
			read_pipe(er, i);
	for (int i = 0; i < P_COUNT; i++)
		close_fd(&er->fd[i]);
}

/* Asks for the whole tree to be killed: the sandbox's, or the monitor's. */
static void kill_tree(struct evalrun *er)
{
	char k = EVAL_ZKILL;

	if (er->child)
		sandbox_kill(er->child);
	else if (er->rep >= 0 && !er->kill_sent)
		er->kill_sent = send(er->rep, &k, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
}

/* The evaluation is lost with its zygote or monitor: say so, as a kill. */
static void lose(struct evalrun *er)
{
	er->zyg_lost = true;
	memset(&er->ex, 0, sizeof(er->ex));
	er->ex.how = SANDBOX_SIGNALED;
	er->ex.sig = SIGKILL;
	er->ex.syscall_nr = -1;
	snprintf(er->ex.why, sizeof(er->ex.why), "%s", er->lost_why);
}

/*
 * reap() with a zygote: the monitor's ENDED report is the end.  Waiting
 * without a limit (timeout_ms < 0, always after a kill was asked) waits at
 * most EVALRUN_ZYGOTE_ANSWER_MS: a zygote that does not answer by then is
 * killed, which takes the evaluation's tree with it.
 */
static void reap_zygote(struct evalrun *er, int timeout_ms)
{
	uint64_t ms = timeout_ms < 0 ? EVALRUN_ZYGOTE_ANSWER_MS : (uint64_t)timeout_ms;
	uint64_t now = clock_mono_ns(), until = now + ms * 1000000ull;
	struct eval_zreport r;
	int rc;

	for (;;) {
		struct pollfd pf = {er->rep, POLLIN, 0};

		rc = evz_recv_report(er->rep, &r);
		if (rc == 1 && r.kind == EVAL_ZREP_ENDED) {
			memset(&er->ex, 0, sizeof(er->ex));
			er->ex.how = (enum sandbox_end)r.how;
			er->ex.code = r.code;
			er->ex.sig = r.sig;
			er->ex.syscall_nr = (long)r.syscall_nr;
			er->ex.wall_ns = r.wall_ns;
			snprintf(er->ex.why, sizeof(er->ex.why), "%s", r.why);
			break;
		}
		if (rc == ST_EEOF) {
			evz_lost(er->zyg, er->lost_why, sizeof(er->lost_why));
			lose(er);
			break;
		}
		if (rc != 0) { /* malformed, or a second STARTED: a broken zygote */
			snprintf(er->lost_why, sizeof(er->lost_why), "%s",
				 rc == 1 ? "the evaluator's zygote sent a report out of order" : r.why);
			evz_mark_broken(er->zyg, true);
			lose(er);
			break;
		}
		now = clock_mono_ns();
		if (now >= until && timeout_ms >= 0)
			return;
		if (now >= until) {
			snprintf(er->lost_why, sizeof(er->lost_why),
				 "the evaluator's zygote did not answer a kill within %u s",
				 EVALRUN_ZYGOTE_ANSWER_MS / 1000);
			evz_mark_broken(er->zyg, true);
			lose(er);
			break;
		}
		if (poll(&pf, 1, (int)((until - now + 999999) / 1000000)) < 0 && errno != EINTR) {
			kill_tree(er);
			timeout_ms = -1;
		}
	}
	er->ended = true;
	close_fd(&er->rep);
	drain_and_close(er);
}

static void reap(struct evalrun *er, int timeout_ms)
{
	int rc;

	if (!er->child) {
		reap_zygote(er, timeout_ms);
		return;
	}
	rc = sandbox_wait(er->child, timeout_ms, &er->ex);

	if (rc == ST_ETIMEDOUT)
		return;
	if (rc) {
		/* Could not wait: make sure nothing survives, and say so. */
		sandbox_kill(er->child);
		memset(&er->ex, 0, sizeof(er->ex));
		er->ex.how = SANDBOX_SIGNALED;
		er->ex.sig = SIGKILL;
		snprintf(er->ex.why, sizeof(er->ex.why), "waiting for the evaluator failed: %s",
			 stark_strerror(rc));
		er->local_fail = true;
	}
	er->ended = true;
	drain_and_close(er);
}

int evalrun_poll(struct evalrun *er, int timeout_ms)
{
	struct pollfd pfd[EVALRUN_POLLFDS];
	int left, n;

	if (er->ended)
		return 1;
	n = (int)evalrun_pollfds(er, pfd, EVALRUN_POLLFDS, &left);
	if (timeout_ms < 0 || timeout_ms > left)
		timeout_ms = left;
	if (poll(pfd, (nfds_t)n, timeout_ms) < 0 && errno != EINTR) {
		stark_warn("evalrun: poll: %s", strerror(errno));
		evalrun_cancel(er);
		er->local_fail = true;
		return ST_ESYS;
	}
	if (er->fd[P_IN] >= 0)
		write_request(er);
	for (int i = P_OUT; i < P_COUNT; i++)
		if (er->fd[i] >= 0)
			read_pipe(er, i);
	if (er->proto_err[0]) {
		/* The result channel is unusable: no point in waiting. */
		kill_tree(er);
		reap(er, -1);
		return 1;
	}
	if (clock_mono_ns() >= er->deadline_ns) {
		er->deadline_hit = true;
		kill_tree(er);
		reap(er, -1);
		return 1;
	}
	reap(er, 0);
	/* A zygote's evaluation sends its result before it waits for its
	 * workers to end: the result is what we wait for. */
	if (!er->ended && er->have_frame && !er->child)
		return 1;
	return er->ended ? 1 : 0;
}

void evalrun_cancel(struct evalrun *er)
{
	if (er->ended)
		return;
	er->canceled = true;
	kill_tree(er);
	reap(er, -1);
}

static const char *signame(int sig)
{
	const char *s = sigabbrev_np(sig);

	return s ? s : "?";
}

/* A result made here, from how the process ended. */
static int synthesize(struct evalrun *er, struct proto_result *rs, const char *decode_err)
{
	const struct sandbox_exit *ex = &er->ex;
	double wall_s = (double)(er->wall_ms) / 1000.0;
	int rc;

	proto_result_release(rs);
	rs->id = str_dup(er->id);
	if (!rs->id)
		return ST_ENOMEM;
	if (er->canceled) {
		rs->status = PROTO_ST_ERROR;
		return proto_result_set_message(rs, "the evaluation was canceled");
	}
	if (er->deadline_hit || ex->how == SANDBOX_DEADLINE) {
		rs->status = PROTO_ST_TIMEOUT;
		return proto_result_set_message(
			rs, "the evaluator did not finish within its wall-clock limit of %.0f s (plus %.0f s grace); its process tree was killed",
			wall_s, (double)(er->deadline_ns - er->start_ns) / 1e9 - wall_s);
	}
	if (er->zyg_lost) {
		rs->status = PROTO_ST_ERROR;
		rc = proto_result_set_message(rs, "the evaluation was lost: %s", er->lost_why);
		if (!rc && er->err.len)
			rc = proto_result_set_log(rs, er->err.p, er->err.len);
		return rc;
	}
	if (decode_err) {
		rs->status = PROTO_ST_CRASHED;
		return proto_result_set_message(rs, "the evaluator sent a malformed result: %s",
						decode_err);
	}
	switch (ex->how) {
	case SANDBOX_SECCOMP:
	case SANDBOX_OOM:
	case SANDBOX_PIDS:
	case SANDBOX_CPU:
		rs->status = PROTO_ST_CRASHED;
		rc = proto_result_set_message(rs, "the evaluator was %s",
					      ex->why[0] ? ex->why : "stopped by the sandbox");
		break;
	case SANDBOX_SIGNALED:
		rs->status = PROTO_ST_CRASHED;
		rc = proto_result_set_message(rs, "the evaluator was killed by signal %d (SIG%s)%s%s",
					      ex->sig, signame(ex->sig), ex->why[0] ? ": " : "",
					      ex->why);
		break;
	default:
		rs->status = PROTO_ST_ERROR;
		rc = proto_result_set_message(
			rs, "the evaluator exited with status %d without a result (its stderr is in the log)",
			ex->code);
		break;
	}
	if (!rc && er->err.len)
		rc = proto_result_set_log(rs, er->err.p, er->err.len);
	return rc;
}

/* The value of a result's env key, or NULL. */
static const char *env_of(const struct proto_result *rs, const char *key)
{
	for (uint32_t i = 0; i < rs->nenv; i++)
		if (!strcmp(rs->env[i].key, key))
			return rs->env[i].val;
	return NULL;
}

/*
 * A worker the evaluator saw killed by SIGKILL may have been the kernel's
 * OOM victim: the run jail gives its referee a grace after the first OOM
 * kill (EVALRUN_OOM_GRACE_MS), and where the cgroup has no group kill
 * (cgroup v1) the referee survives anyway, so it reports the bare signal
 * before the jail's own account is in.  That account is trusted and says
 * more, so it is waited for (the workers are already dead: a short wait)
 * and, when the memory limit was reached, the message says so.  Whose
 * fault it was is the referee's judgement (env oom_blame, from the
 * workers' peak host memory it sampled, env host_mem_mib): a limit of
 * ours reached by our own side, or by a candidate within its allowance,
 * is an error, never the candidate's.
 */
#define OOM_ACCOUNT_WAIT_MS 5000
static int oom_account(struct evalrun *er, struct proto_result *rs)
{
	const char *blame = env_of(rs, "oom_blame"), *mib = env_of(rs, "host_mem_mib");
	char *seen;
	int rc;

	if ((rs->status != PROTO_ST_CRASHED && rs->status != PROTO_ST_ERROR) || !rs->message ||
	    !strstr(rs->message, "(SIGKILL)"))
		return 0;
	if (!er->ended)
		reap(er, OOM_ACCOUNT_WAIT_MS);
	if (!er->ended || er->ex.how != SANDBOX_OOM)
		return 0;
	seen = rs->message;
	rs->message = NULL;
	if (blame && !strcmp(blame, "evaluator")) {
		rs->status = PROTO_ST_ERROR;
		rc = proto_result_set_message(
			rs, "the run jail's %s: a limit of the evaluator's own, reached by its side or by a candidate within its allowance (peak host memory in MiB: %s; the evaluator saw: %s); STARK_RUN_MEM_MIB raises it",
			er->ex.why, mib ? mib : "not sampled", seen);
	} else {
		rc = proto_result_set_message(
			rs, "the jail's %s; the candidate's allocations reached it (peak host memory in MiB: %s; the evaluator saw: %s)",
			er->ex.why, mib ? mib : "not sampled", seen);
	}
	free(seen);
	return rc;
}

int evalrun_finish(struct evalrun *er, struct proto_result *rs, struct evalrun_info *info)
{
	char derr[256] = "", layers[256];
	const char *why = NULL;
	bool valid;
	int rc;

	if (!er->ended && !(er->have_frame && !er->child))
		evalrun_cancel(er);
	if (er->proto_err[0]) {
		why = er->proto_err;
	} else if (er->have_frame && !er->deadline_hit) {
		proto_result_release(rs);
		rc = proto_result_decode(er->body.p, er->body.len, rs, derr, sizeof(derr));
		if (rc == ST_ENOMEM)
			return rc;
		if (rc) {
			why = derr;
		} else if (strcmp(rs->id, er->id)) {
			snprintf(derr, sizeof(derr), "its id \"%.64s\" is not the request's \"%.64s\"",
				 rs->id, er->id);
			why = derr;
		}
	} else if (proto_framer_partial(&er->framer) && !er->deadline_hit) {
		why = "the result frame was cut short";
	}
	valid = er->have_frame && !why && !er->deadline_hit;
	if (!valid && !er->ended) {
		/* A bad frame from a process still running: its end says more. */
		kill_tree(er);
		reap(er, -1);
	}
	if (!er->ended) {
		/* What it printed before its result. */
		for (int i = P_OUT; i < P_RES; i++)
			if (er->fd[i] >= 0)
				read_pipe(er, i);
	}
	if (!valid) {
		rc = synthesize(er, rs, why);
		if (rc)
			return rc;
	} else {
		rc = oom_account(er, rs);
		if (rc)
			return rc;
	}
	if (er->layers) {
		sandbox_layers_str(er->layers, layers, sizeof(layers));
		if (proto_result_add_env(rs, "sandbox", layers) == ST_ENOMEM)
			return ST_ENOMEM; /* a full env only loses this note */
	}
	if (info) {
		evalrun_info_release(info);
		info->exit = er->ex;
		info->ended = er->ended;
		info->layers = er->layers;
		info->got_result = valid;
		info->out = dbuf_detach(&er->out, &info->out_len);
		info->err = dbuf_detach(&er->err, &info->err_len);
		info->out_total = er->out_total;
		info->err_total = er->err_total;
		info->wall_ns = er->ex.wall_ns ? er->ex.wall_ns : clock_mono_ns() - er->start_ns;
		info->stage[0] = er->si;
		info->stage[0].wall_ns = clock_mono_ns() - er->start_ns;
		info->nstages = 1;
		info->total_ns = info->stage[0].wall_ns;
	}
	return 0;
}

void evalrun_free(struct evalrun *er)
{
	if (!er)
		return;
	if (er->child) {
		if (!er->ended) {
			sandbox_kill(er->child);
			if (sandbox_wait(er->child, -1, &er->ex))
				stark_warn("evalrun: cannot reap the evaluator");
		}
		sandbox_child_free(er->child);
	} else if (er->rep >= 0 && !er->ended) {
		if (er->have_frame && !er->proto_err[0] && !er->kill_sent &&
		    evz_park(er->zyg, er->rep))
			er->rep = -1; /* its end is the zygote's to see */
		else {
			kill_tree(er);
			reap(er, -1);
		}
	}
	close_fd(&er->rep);
	for (int i = 0; i < P_COUNT; i++)
		close_fd(&er->fd[i]);
	dbuf_release(&er->req);
	dbuf_release(&er->out);
	dbuf_release(&er->err);
	dbuf_release(&er->body);
	proto_framer_release(&er->framer);
	free(er->id);
	evalrun_free_env(er->env);
	free(er);
}

int evalrun_one(const struct evalrun_opts *o, const struct proto_request *rq,
		struct proto_result *rs, struct evalrun_info *info)
{
	struct evalrun *er;
	int rc;

	rc = evalrun_start(o, rq, &er);
	if (rc)
		return rc;
	while ((rc = evalrun_poll(er, -1)) == 0)
		;
	rc = evalrun_finish(er, rs, info);
	evalrun_free(er);
	return rc;
}

