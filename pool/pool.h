/*
 * pool.h -- evaluations: running candidates in stark-eval processes.  The
 * public header of pool/; its names start with evalrun_ (EVALRUN_ for
 * constants).  `stark eval` (cli/) and the engine's evaluation provider
 * (engine/eval_real.c) use it; a remote worker would stand beside it.
 *
 * An evaluation is one stark-eval process started through sandbox_spawn()
 * with pipes on fds 0-3 (see evaluator/evaluator.h): the request frame is
 * written to fd 0, stdout and stderr are read into capped buffers (the rest
 * is drained and discarded, so a candidate that prints 100 MB neither blocks
 * the evaluator nor bloats us), and exactly one result frame is read from
 * fd 3 with the incremental framer -- every byte of it untrusted.  When the
 * process ends, or its deadline (the request's wall_ms plus a grace period)
 * passes and the whole tree is killed, the outcome becomes a proto_result:
 * the evaluator's own when a valid frame with the request's id arrived, else
 * one made here from how the process ended ("timeout" for the deadline,
 * "crashed" for a signal, a seccomp kill, a memory limit or a malformed
 * frame, "error" for an exit without a result).
 *
 * The interface is poll-based so one thread can drive many evaluations:
 *
 *	evalrun_start(&opts, &rq, &er);
 *	while ((rc = evalrun_poll(er, -1)) == 0)
 *		;                        // or merge evalrun_pollfds() into a
 *		                         // larger poll and call evalrun_poll(er, 0)
 *	evalrun_finish(er, &rs, &info);
 *	evalrun_free(er);
 *
 * evalrun_one() does exactly that, and evalrun_split() runs a compile-stage
 * evaluation and then a run-stage one (separate processes, separate jails)
 * sharing the build cache; evalrun_pair_*() is the same, poll-driven, and
 * can skip the compile stage of a candidate that builds nothing.
 *
 * The evaluator is either exec'd for each evaluation (sandbox_spawn), or,
 * when the options name a zygote (evalrun_zygote_start), forked in its jail
 * from a stark-eval that started its interpreter once (evaluator.h): the
 * jail, the pipes, the capture, the framer, the deadline and the verdicts
 * made here are the same; only the process start is cheaper.  A zygote
 * that dies ends its evaluations in flight as "error" (the message says
 * so), and the next evalrun_start() restarts it.
 *
 * Files: setup.c (options, jails, environment, sources, build cache),
 * evalzyg.c (the zygote), evalrun.c (one process: start, I/O, deadline,
 * end), verdict.c (its result), evalpair.c (a candidate's stages, and the
 * blocking forms).  Their shared internals are in pool_int.h.
 *
 * Errors: a call that can fail returns 0 or a negative ST_E* code
 * (common.h) and prints what failed on stderr, unless it says it writes its
 * message to an err buffer.  A verdict on the candidate is never an error
 * of the call: it is the result's status.  Ownership: handles returned
 * through an out parameter belong to the caller until the matching _free;
 * everything passed in is borrowed for the call alone unless a call says
 * otherwise.
 *
 * The calling process must ignore SIGPIPE (stark's main does): a write to an
 * evaluator that died must fail with EPIPE, not kill us.
 */
#ifndef STARK_POOL_H
#define STARK_POOL_H

#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "proto/proto.h"
#include "sandbox/sandbox.h"

#define EVALRUN_RESULT_MAX (8u << 20) /* bytes of the result frame's body */
#define EVALRUN_GRACE_MS 15000u	      /* beyond wall_ms before the tree is killed */
/* Memory of the compile jail.  A KernelBench build compiles the host and
 * device halves of its torch-including .cu unit at the same time as its
 * C++ unit (stark_nvcc): 5.9 GiB of summed RSS at its peak on torch 2.11,
 * against 3.3 GiB one after another; the run jail keeps the default. */
#define EVALRUN_COMPILE_MEM (8ull << 30)
/* The run jail: after the first OOM kill its referee has this long to say
 * whose worker the kernel killed and whose allocations it was (the run
 * jail's memory is the sandbox's default, or $STARK_RUN_MEM_MIB).  3 s
 * was too short on a 2-core machine running the test suite's evaluations
 * side by side: a memory bomb's referee had not answered, and the verdict
 * fell to the evaluator's own error.  The grace ends as soon as the
 * referee answers; only a referee that never does costs all of it. */
#define EVALRUN_OOM_GRACE_MS 10000u
#define EVALRUN_POLLFDS 5	      /* descriptors evalrun_pollfds() may fill */
#define EVALRUN_ZYGOTE_READY_MS 300000u /* a zygote's start-up, at most */
#define EVALRUN_ZYGOTE_SPAWN_MS 60000u	/* a job sent to its jail entered, at most */
#define EVALRUN_ZYGOTE_ANSWER_MS 5000u	/* a kill asked to its report, at most */

struct evalrun_zygote; /* a started `stark-eval --zygote` (opaque) */

/* How to start the evaluator.  Borrowed during evalrun_start() only. */
struct evalrun_opts {
	const char *evaluator;		  /* path of stark-eval (required) */
	enum sandbox_stage sandbox;	  /* jail for the process [SANDBOX_NONE] */
	unsigned required;		  /* layers insisted on; 0 = the sandbox's
					     default for the stage */
	bool insecure;			  /* run even with required layers missing */
	uint64_t grace_ms;		  /* [EVALRUN_GRACE_MS] */
	const struct sandbox_bind *binds; /* paths the jail shows (jailed stages) */
	size_t nbinds;
	int gpu_index;			  /* the GPU's device node minor
					     (evalrun_gpu_minor); -1: no GPU
					     device nodes [-1] */
	uint64_t mem_bytes;		  /* 0: the sandbox's default */
	uint64_t oom_grace_ms;		  /* sandbox_config.oom_grace_ms [0] */
	const char *const *env;		  /* NULL-terminated "K=V" list; NULL =
					     the allowlisted part of our own
					     environment (evalrun_env_allowed);
					     with a zygote: the zygote's */
	struct evalrun_zygote *zygote;	  /* fork the evaluator from this zygote
					     (borrowed until the run is freed);
					     NULL: exec it */
	int lock_fd;			  /* handed to the evaluator as fd 4
					     (EVAL_FD_LOCK); -1: none [-1] */
};

/* Sets every field of o to its default (in brackets above). */
void evalrun_opts_init(struct evalrun_opts *o);

/* Storage for the binds of evalrun_jail_opts(); must outlive the opts.
 * An evaluation adds one more (its build folder: evalrun_pair_start). */
#define EVALRUN_BINDS_MAX 9
struct evalrun_binds {
	struct sandbox_bind compile[EVALRUN_BINDS_MAX], run[EVALRUN_BINDS_MAX];
	char extra[2048];
	char store[PATH_MAX]; /* the cache's store/ */
};

/*
 * The jails of a split evaluation (SECURITY.md): turns compile and run
 * (initialized, evaluator set) into a compile jail that sees the build
 * cache's store (published builds, remembered failures) read-only and a
 * run jail that sees none of it (each evaluation adds its own build
 * folder: writable scratch to the compile jail, its builds read-only to
 * the run jail), and, for device "cuda[:N]", that GPU's device nodes in
 * the run jail.  The run jail's memory limit, where run->mem_bytes is 0,
 * is evalrun_run_mem_default(1), with an OOM grace (EVALRUN_OOM_GRACE_MS);
 * a caller with several evaluations in flight sets run->mem_bytes from
 * evalrun_run_mem_default(N) first.  $STARK_SANDBOX_BINDS (':'-separated) adds read-only paths
 * to both, e.g. a Python environment outside /usr; an item SRC=DST shows
 * SRC at DST inside the jails.  $STARK_NVCC_PCH (an absolute path to a
 * folder) is bound read-only into the compile jail.
 * insecure: run with the layers this machine has when some are missing.
 * The opts borrow binds (which must outlive them) and the cache string.
 * Cannot fail; where nvidia-smi is missing the CUDA variables stay unset
 * (the compile stage then says what to set).
 */
void evalrun_jail_opts(struct evalrun_opts *compile, struct evalrun_opts *run, const char *cache,
		       const char *device, bool insecure, struct evalrun_binds *binds);

/*
 * The run jail's memory limit for one of in_flight evaluations on this
 * machine (0 counts as 1): $STARK_RUN_MEM_MIB (MiB, at least 512; a bad
 * value is warned about and ignored), else three quarters of the
 * machine's memory (sandbox_memory_limit) divided by in_flight, at least
 * EVALRUN_RUN_MEM_FLOOR.
 */
#define EVALRUN_RUN_MEM_FLOOR (4ull << 30)
uint64_t evalrun_run_mem_default(unsigned in_flight);

/*
 * The request's queue_ms for one of sharers evaluations in flight on one
 * GPU, each of wall_ms: 0 (the wall time again) for one, else twice the
 * wall time for each of the others, at most PROTO_TIME_MS_MAX.  Why twice:
 * an evaluation ahead in the queue may take its own wall time and its own
 * waits; on one H100 with --jobs 4, level 1's problems of 6-8 GiB took
 * 320-360 s whole with a 180 s wall time, each needing most of the GPU,
 * and the fourth's wait for device memory (349 s) outlasted an allowance
 * of one wall time: an honest evaluation ended `error` by our queue.
 */
uint32_t evalrun_queue_ms(uint32_t wall_ms, unsigned sharers);

/*
 * Finds GPU gpu_index's compute capability in nvidia-smi's
 * "--query-gpu=index,compute_cap --format=csv,noheader" output (lines
 * "0, 9.0").  0 with *major and *minor set; -1 where no well-formed line
 * names that GPU.  evalrun_jail_opts() uses it to set $STARK_CUDA_ARCH
 * (sm_90) and $TORCH_CUDA_ARCH_LIST (9.0), where they are unset, for a
 * "cuda" device: the compile jail sees no GPU to ask.
 */
int evalrun_parse_caps(const char *text, int gpu_index, int *major, int *minor);

/*
 * The device node (/dev/nvidiaM: M, the driver's minor) of the GPU that
 * stark names cuda:index -- nvidia-smi's index, the index-th GPU in PCI bus
 * order, counted among $CUDA_VISIBLE_DEVICES where that lists indices.
 * Read from the driver's folder gpus_dir (/proc/driver/nvidia/gpus: one
 * folder per GPU, named by its bus id, whose "information" file has a
 * "Device Minor:" line).  The minors need not follow the bus order, and the
 * run jail shows its GPU's node alone, so the evaluator inside sees that GPU
 * as its only device (cuda:0).  -1 where the folder does not name such a GPU.
 */
int evalrun_gpu_minor(const char *gpus_dir, const char *visible, int index);

/* True when an environment variable name may be passed to an evaluator by
 * default (PATH, LANG, the compiler, CUDA and sanitizer settings; never
 * secrets such as API keys).  Pure. */
bool evalrun_env_allowed(const char *name);

/*
 * Starts `EVALUATOR --zygote` outside any jail (sandbox stage none; its
 * environment is env, or the allowlisted part of ours, and is the one every
 * evaluation it serves gets) and waits until it is ready: its interpreter,
 * harness and prewarm done (seconds; at most EVALRUN_ZYGOTE_READY_MS).  On
 * cgroup v2 it is told where our jails' groups go.  *out owns the zygote
 * until evalrun_zygote_free(), which kills it and whatever it still runs.
 * Returns 0, ST_ENOMEM, or ST_ESYS/ST_ETIMEDOUT/ST_EPROTO with a message
 * printed.
 */
ST_WUR int evalrun_zygote_start(const char *evaluator, const char *const *env,
				struct evalrun_zygote **out);
/* Waits for jails still ending (evalrun_zygote_settle), then kills the
 * zygote and frees z; NULL is a no-op. */
void evalrun_zygote_free(struct evalrun_zygote *z);
/*
 * An evaluation's result is taken as soon as its frame is complete; its
 * jail may still be ending (the referee waits for its workers after it
 * sends the result: a GPU process takes 0.3 s to release the device), and
 * with a zygote evalrun_free() leaves that end to the zygote.  This waits
 * up to timeout_ms (0: only looks) for those ends and returns how many are
 * still ending.  evalrun_zygote_free() waits up to
 * EVALRUN_ZYGOTE_ANSWER_MS for them before it kills what is left.
 */
unsigned evalrun_zygote_settle(struct evalrun_zygote *z, int timeout_ms);
/* False when $STARK_ZYGOTE is "0": callers then exec every evaluation. */
bool evalrun_zygote_wanted(void);

struct evalrun_zygote_stats {
	pid_t pid;	     /* the zygote now running, or 0 */
	unsigned starts;     /* starts so far (1 + restarts) */
	uint64_t start_ns;   /* the last start: spawn to ready */
	uint64_t init_ns;    /* of which the interpreter and harness */
	uint64_t prewarm_ns; /* and stark_referee.prewarm() */
	unsigned threads;    /* threads the zygote runs once ready */
};
/* Copies z's figures into out; cannot fail. */
void evalrun_zygote_stats(const struct evalrun_zygote *z, struct evalrun_zygote_stats *out);

/* How one process (one stage) of an evaluation started and ran. */
struct evalrun_stage_info {
	char stage[8];	   /* "compile", "run" or "all" */
	bool zygote;	   /* forked by a zygote, not exec'd */
	pid_t zygote_pid;  /* that zygote, and its starts so far */
	unsigned zygote_starts;
	uint64_t spawn_ns; /* evalrun_start: pipes made to the evaluator
			      entered in its jail */
	uint64_t fork_ns;  /* zygote: job received to its monitor running */
	uint64_t jail_ns;  /* zygote: the jail built, the evaluation in it */
	uint64_t wall_ns;  /* evalrun_start to the result taken */
};

/* What is known about a finished evaluation besides its result. */
struct evalrun_info {
	struct sandbox_exit exit; /* how the process ended, when ended */
	bool ended;		  /* false: the result came while the process
				     was still ending (a zygote's evaluation
				     tears its workers down after it) */
	unsigned layers;	  /* sandbox layers applied */
	bool got_result;	  /* the result came from the evaluator */
	char *out;		  /* stdout, first EVAL_OUTPUT_CAP bytes (owned) */
	size_t out_len;
	uint64_t out_total;	  /* bytes the evaluator wrote to stdout */
	char *err;		  /* stderr, likewise */
	size_t err_len;
	uint64_t err_total;
	uint64_t wall_ns;	  /* start to reap */
	struct evalrun_stage_info stage[2]; /* the processes, in order */
	unsigned nstages;
	uint64_t total_ns;	  /* request to result, every stage included */
};

/* An empty info (no output held); release frees the captured output and
 * empties it again.  Neither can fail. */
void evalrun_info_init(struct evalrun_info *info);
void evalrun_info_release(struct evalrun_info *info);

struct evalrun; /* one evaluation in flight (opaque) */

/*
 * Encodes rq (borrowed for the call; proto_request_check() must pass),
 * starts the evaluator and returns the handle in *out, owned by the caller
 * (evalrun_free); o is borrowed for the call, o->zygote until the handle is
 * freed.  Returns 0, ST_EINVAL for a request that does not encode (message
 * printed), ST_EDENIED when the sandbox lacks required layers, ST_ESYS or
 * ST_ENOMEM; *out is NULL then.  With o->zygote, a zygote that died or
 * stopped answering is restarted first, and the call returns once the
 * evaluator runs in its jail.
 */
ST_WUR int evalrun_start(const struct evalrun_opts *o, const struct proto_request *rq,
			 struct evalrun **out);

/*
 * Fills pfd[0..n) with the descriptors the run waits on (at most
 * EVALRUN_POLLFDS) and returns n; 0 once the run is done.  *timeout_ms
 * (if not NULL) receives the time to the run's deadline.
 */
size_t evalrun_pollfds(const struct evalrun *er, struct pollfd *pfd, size_t max,
		       int *timeout_ms);

/*
 * Moves the run forward: waits up to timeout_ms (-1: until something
 * happens or the deadline) for I/O or the end of the process, handles what
 * is ready, and enforces the deadline.  Returns 1 when the run is done, 0
 * while it goes on, or a negative ST_E* code on a local failure (the tree
 * is killed then; evalrun_finish still reports).
 */
ST_WUR int evalrun_poll(struct evalrun *er, int timeout_ms);

/*
 * After evalrun_finish(): makes sure nothing of the evaluation's jail is
 * left (a zygote's evaluation sends its result before its workers end):
 * kills what is left and waits for the jail's end.  0 when its init was
 * reaped, so that no process of the jail exists any more (its pid
 * namespace died with it); ST_ESYS when that is not known (the zygote or
 * the wait was lost).  The build cache's publisher needs it.
 */
ST_WUR int evalrun_wait_gone(struct evalrun *er);

/* Kills the evaluator's tree now (e.g. on SIGINT) and waits for its end; the
 * run ends as "error" ("the evaluation was canceled").  A no-op once ended. */
void evalrun_cancel(struct evalrun *er);

/*
 * After evalrun_poll() returned 1: fills rs (initialized by the caller; on
 * return it always holds a result, see the top of this file) and, when info
 * is not NULL, info (initialized; it takes the captured output).  Returns 0
 * or ST_ENOMEM.
 */
ST_WUR int evalrun_finish(struct evalrun *er, struct proto_result *rs,
			  struct evalrun_info *info);

/* Kills a run still going and frees everything; NULL is a no-op.  With a
 * zygote, a run whose result is in while its jail still ends is left to
 * the zygote to see end (evalrun_zygote_settle). */
void evalrun_free(struct evalrun *er);

/* start + poll until done + finish + free: rs (initialized) and info (may
 * be NULL) as evalrun_finish fills them.  Same returns as evalrun_start, or
 * ST_ENOMEM from finish. */
ST_WUR int evalrun_one(const struct evalrun_opts *o, const struct proto_request *rq,
		       struct proto_result *rs, struct evalrun_info *info);

/*
 * The two-stage form: rq (stage ignored) is evaluated with stage COMPILE
 * under compile_opts and, if that says "compiled", again with stage RUN
 * under run_opts; both share rq->cache_dir, which must be set.  rs gets the
 * compile result if it is not "compiled", else the run result with the
 * compile stage's compile_ms and, in env, its ext_built and ext_build_ms
 * and the compile jail's layers as compile_sandbox (and "stages" =
 * "compile+run").  info describes the last process, and info->stage[] both.
 * It is evalrun_pair_*() in EVALRUN_SPLIT mode, run to its end.  Returns
 * as evalrun_start() (for either stage), or ST_ENOMEM.
 */
ST_WUR int evalrun_split(const struct evalrun_opts *compile_opts,
			 const struct evalrun_opts *run_opts, const struct proto_request *rq,
			 struct proto_result *rs, struct evalrun_info *info);

/*
 * Whether a solution needs the compile stage: it mentions load_inline,
 * cpp_extension or a load( call (torch.utils.cpp_extension's builders).  A
 * plain substring test, conservative by design: a solution that disguises
 * a build still cannot make one in the run stage, whose loader only takes
 * what the cache holds, and ends as compile_error there.  Fast-format
 * solutions (NVRTC, a library call) and pure PyTorch need no compile stage.
 * Pure; src (len bytes, may be NULL) is borrowed.
 */
bool evalrun_needs_compile(const char *src, size_t len);

/* Which processes evaluate a candidate (evalrun_pair_start). */
enum evalrun_stages {
	EVALRUN_ONE = 0,   /* one process, rq's own stage (e.g. all), copts */
	EVALRUN_SPLIT = 1, /* compile stage (copts), then run stage (ropts) */
	EVALRUN_AUTO = 2   /* SPLIT if evalrun_needs_compile(), else run only */
};

struct evalrun_pair; /* one candidate's evaluation, all its stages (opaque) */

/*
 * The poll-driven form of evalrun_split(), for callers that keep several
 * evaluations in flight.  copts, ropts, their binds and rq are borrowed
 * until evalrun_pair_free().  The result's env says which processes ran:
 * "stages" = "compile+run", "run" or "all".  Start returns as
 * evalrun_start(); poll returns 1 when done, 0 while going, or, when the
 * run stage could not be started after the compile stage, its negative
 * code (the pair is then done, and finish reports the compile stage's
 * result).  finish: as evalrun_finish(), with info->stage[] holding every
 * stage and info->total_ns the whole evaluation.  The pair returned in *out
 * is the caller's (evalrun_pair_free; NULL is a no-op); pollfds and cancel
 * behave as evalrun_pollfds and evalrun_cancel on the stage running.
 */
ST_WUR int evalrun_pair_start(const struct evalrun_opts *copts, const struct evalrun_opts *ropts,
			      const struct proto_request *rq, enum evalrun_stages mode,
			      struct evalrun_pair **out);
size_t evalrun_pair_pollfds(const struct evalrun_pair *p, struct pollfd *pfd, size_t max,
			    int *timeout_ms);
ST_WUR int evalrun_pair_poll(struct evalrun_pair *p, int timeout_ms);
void evalrun_pair_cancel(struct evalrun_pair *p);
ST_WUR int evalrun_pair_finish(struct evalrun_pair *p, struct proto_result *rs,
			       struct evalrun_info *info);
void evalrun_pair_free(struct evalrun_pair *p);

/*
 * The build cache (buildcache.c).  Under its root:
 *	store/builds/KEY/	published builds (immutable once in place)
 *	store/failed/KEY	remembered compile errors (JSON: message, log)
 *	store/plans/KEY		problems' footprint estimates (JSON)
 *	jit/KEY/		published JIT caches (Triton's; immutable),
 *				beside the store: no jail sees them
 *	scratch/PID-XXXXXX/	one evaluation's build folder while it runs
 * Only the orchestrator writes store/, after the compile stage's process
 * tree is gone; every jail sees it read-only, and the compile jail writes
 * only its own scratch folder.
 */
#define EVALRUN_KEY_LEN 64			/* hex digits of a key */
#define EVALRUN_PUBLISH_FILE_MAX (1ull << 30)	/* bytes of one published file */
#define EVALRUN_PUBLISH_TOTAL_MAX (4ull << 30)	/* bytes of one published build */
#define EVALRUN_PUBLISH_FILES_MAX 20000u	/* files and folders of one build */
#define EVALRUN_PUBLISH_DEPTH_MAX 24u		/* folder nesting of one build */
/* A JIT cache is copied into every later evaluation of its solution.
 * Triton's, on the H100: 13-15 files and 88-90 KiB for a one-kernel
 * candidate (its launcher and utilities included), 40 files and 187 KiB
 * for four autotuned kernels; these caps hold a thousand times that. */
#define EVALRUN_JIT_TOTAL_MAX (256ull << 20)	/* bytes of one JIT cache */
#define EVALRUN_JIT_FILES_MAX 4000u		/* files and folders of one */

/* True for 64 lowercase hex digits. */
bool evalrun_key_valid(const char *key);
/*
 * An evaluation's key: SHA-256 (hex, into out) of the key version, the
 * toolchain's fingerprint (64 hex digits, from the compile stage's referee:
 * evaluator/stark_env.py, which computes the same key), the device kind
 * ("cuda" for "cuda[:N]", else "cpu") and the SHA-256 of the problem's and
 * the solution's bytes.  ST_EINVAL for a malformed fingerprint.
 */
ST_WUR int evalrun_build_key(const char *toolchain, const char *device, const char *problem,
			     size_t plen, const char *solution, size_t slen,
			     char out[EVALRUN_KEY_LEN + 1]);
/* Creates the layout under root (mode 0700); the first call in a process
 * also removes what dead processes left (their scratch and temporary
 * folders).  0, or ST_EIO with a message in err. */
ST_WUR int evalrun_cache_prepare(const char *root, char *err, size_t errlen);
/* Creates an empty scratch folder, its path into out.  0, or ST_ETOOBIG /
 * ST_EIO (printed). */
ST_WUR int evalrun_scratch_make(const char *root, char *out, size_t len);
/* Removes a folder and all it holds, following no link, whatever the
 * permissions and nesting its (dead) writer left; best effort. */
void evalrun_tree_remove(const char *path);

struct evalrun_publish {
	uint64_t files;	  /* files and folders copied */
	uint64_t bytes;	  /* bytes copied */
	uint64_t skipped; /* links, fifos, sockets, unreadable files: left out */
};
/*
 * Copies the folder scratch (whose writers must all be gone) into
 * root/store/builds/key (dir "builds") or root/jit/key (dir "jit": a JIT
 * cache):
 * regular files and folders only, none followed
 * through a link, within the EVALRUN_PUBLISH_* caps, into a temporary
 * folder renamed into place.  Returns 0 (published), 1 (an entry with
 * that key was there already; it is kept), ST_ETOOBIG (over a cap) or
 * ST_EIO, with why in why; ST_EINVAL for a malformed key.
 */
ST_WUR int evalrun_publish(const char *root, const char *dir, const char *key,
			   const char *scratch, struct evalrun_publish *st, char *why,
			   size_t whylen);
/*
 * Copies the published JIT cache root/jit/key, where it is whole
 * (its mark), into dir/cache (made here; dir is an evaluation's empty JIT
 * scratch, nothing jailed in it yet) as evalrun_publish copies, and
 * writes dir/restored holding the key, for the referee to check against
 * its own.  1 (restored), 0 (none published), ST_ETOOBIG or ST_EIO with
 * why (what was copied stays; the referee finds no "restored" and starts
 * cold), ST_EINVAL for a malformed key.
 */
ST_WUR int evalrun_jit_restore(const char *root, const char *key, const char *dir,
			       struct evalrun_publish *st, char *why, size_t whylen);
/* Remembers a compile error (the compiler's verdict on the candidate's
 * own sources, as the referee judged it) under key.  0, ST_EINVAL,
 * ST_ENOMEM or ST_EIO (printed). */
ST_WUR int evalrun_remember_failure(const char *root, const char *key, const char *message,
				    const char *log);
/*
 * A problem's footprint estimate, kept for its later evaluations
 * (evaluator/stark_plan_cache.py).  evalrun_plan_key: the entry's key,
 * SHA-256 (hex, into out) of the key version, the device kind and the
 * SHA-256 of the problem's bytes.  evalrun_plan_load: the entry's text
 * into buf (at most PROTO_PLAN_MAX bytes, no NUL), true; false (buf "")
 * where there is none.  evalrun_plan_store: writes the estimate text (the
 * referee's JSON, checked to be exactly an estimate's fields and
 * fingerprint, and written as printed here) to root/store/plans/key.  0,
 * ST_EINVAL (not an estimate), ST_ENOMEM or ST_EIO (printed).
 */
ST_WUR int evalrun_plan_key(const char *device, const char *problem, size_t plen,
			    char out[EVALRUN_KEY_LEN + 1]);
bool evalrun_plan_load(const char *root, const char *key, char buf[PROTO_PLAN_MAX + 1]);
ST_WUR int evalrun_plan_store(const char *root, const char *key, const char *text);

/*
 * Reads a problem and a solution file into rq's sources and names (rq
 * initialized; its strings are replaced, and owned by rq).  Missing,
 * unreadable, empty or oversized (> PROTO_SRC_MAX) files are ST_ENOENT/
 * ST_EIO/ST_EINVAL/ST_ETOOBIG with a message in err naming the file
 * (nothing printed); rq is unchanged then.
 */
ST_WUR int evalrun_load_sources(struct proto_request *rq, const char *problem_path,
				const char *solution_path, char *err, size_t errlen);

/*
 * The default build cache: $STARK_CACHE, else $XDG_CACHE_HOME/stark, else
 * $HOME/.cache/stark; created (mode 0700) if missing, written to buf.
 * Returns 0 or ST_EINVAL (no HOME, too long, not absolute) / ST_EIO (cannot
 * create it) with a message in err (nothing printed).
 */
ST_WUR int evalrun_default_cache(char *buf, size_t len, char *err, size_t errlen);

/*
 * Opens the lock that the evaluations on one device share (each run stage
 * gets it as lock_fd): the file at path (--gpu-lock FILE); else, for a
 * "cuda" or "cuda:N" device, the machine's lock of that GPU
 * (evalrun_gpu_lock_path), shared with every other stark process of this
 * user on it; else (device NULL: a CPU's slots) a new unlinked file in
 * $TMPDIR (else /tmp) that only this process's evaluations share.  A named
 * file is created (mode 0660) if missing; a link or anything but a regular
 * file is refused.  Opened for reading and writing, close-on-exec: the
 * referee takes shared and exclusive record locks on it (evaluator.h).
 * Returns the descriptor, the caller's to close, or ST_ESYS/ST_EINVAL with
 * a message in err (nothing printed).
 */
ST_WUR int evalrun_gpu_lock_open(const char *path, const char *device, char *err, size_t errlen);

/*
 * The path of the machine's lock of the GPU that stark names device
 * ("cuda" or "cuda:N"): stark-gpu-lock-gpuM, M the GPU's device minor
 * (evalrun_gpu_minor; cudaN by the index where the driver's folder is
 * missing), in $STARK_LOCK_DIR, else /tmp/stark-UID.  The folder is made
 * (0700) where missing and refused where another user could swap the file:
 * not a folder, another user's (root's aside), or writable by others
 * without the sticky bit.  Returns 0, or ST_EINVAL/ST_ESYS with a message
 * in err.
 */
ST_WUR int evalrun_gpu_lock_path(const char *device, char *buf, size_t len, char *err,
				 size_t errlen);

/* Cores (a CPU and its SMT siblings) kept for each GPU's timing phases by
 * STARK_TIMING_CPUS=auto. */
#define EVALRUN_TIMING_CORES 2

/*
 * STARK_TIMING_CPUS=auto, worked out from the machine: for each GPU of
 * gpus_dir (/proc/driver/nvidia/gpus), in device-minor order, the
 * EVALRUN_TIMING_CORES highest-numbered whole cores of its local CPUs
 * (sys_root/bus/pci/devices/BUS/local_cpulist, else every online CPU)
 * that no other GPU took, written into buf as the variable's lists
 * ("62-63;60-61"; evaluator/stark_referee_cpus.py).  allowed (a cpulist,
 * the process's own CPUs; NULL: every online CPU) bounds what is taken
 * and counted; a GPU none of whose local CPUs is allowed takes from the
 * allowed ones.  Where allowed leaves out some online CPUs (a cpuset),
 * visible ($CUDA_VISIBLE_DEVICES; NULL or "": every GPU) names the GPUs
 * served and the others' lists are empty (";;58-59"); else every GPU is
 * served, so that every process on the machine keeps the same lists.
 * buf is "" where there is no GPU.  Refused (ST_EINVAL, the reason in err)
 * where the minors are not 0..N-1 or the lists would take more than
 * max_pct percent of the CPUs counted; ST_EIO where the online CPUs cannot
 * be read.
 */
ST_WUR int evalrun_timing_cpus_auto(const char *gpus_dir, const char *sys_root,
				    const char *allowed, const char *visible, int max_pct,
				    char *buf, size_t len, char *err, size_t errlen);

/* Resolves STARK_TIMING_CPUS once, in our environment (what the evaluators
 * and any stark process started from here inherit): unset, CPUs are kept
 * as auto keeps them where they come to at most a quarter of ours, else
 * none; "auto", up to half, with a warning where none can be kept; the
 * variable is then the lists, or "off" where none are kept.  "off" and
 * lists named by hand are left alone. */
void evalrun_timing_cpus_resolve(void);

/* Why resolve kept no CPUs ("" where it kept some, or was not called).
 * Static storage. */
const char *evalrun_timing_cpus_why(void);

#endif
