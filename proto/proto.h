/*
 * proto.h -- the messages between the orchestrator and an evaluator.
 *
 * One request goes to the evaluator, one result comes back.  Each is a
 * msgpack map with string keys, sent as a frame: a 4-byte big-endian body
 * length followed by the body.  The length is checked against
 * PROTO_FRAME_MAX before anything is allocated.  Decoding is strict: every
 * key must be known and appear once, every value must have the expected
 * type and fit its cap, and required keys must be present; anything else is
 * an error with a message naming the offending field.  The orchestrator
 * treats every byte from an evaluator as hostile.
 *
 * Wire types: integers are msgpack unsigned ints (any width; negative and
 * signed forms are rejected), doubles are float64 only, bools are bools,
 * strings are str (sources may also be bin), "status" is the status name,
 * "flags" is an array of str, "env" a map of str to str.  Text fields must
 * be valid UTF-8 without NUL bytes; sources are opaque bytes.
 *
 * Versioning: each message carries "v", and it must be the map's first key,
 * so a peer speaking another version gets ST_EVERSION, not a confusing
 * complaint about a key it added.  A decoder accepts exactly PROTO_VERSION;
 * a change to the schema bumps it.  The encoders always write every field,
 * "v" first.
 *
 * Ownership: a decoded struct owns its strings (malloc'd, NUL-terminated;
 * after a successful decode none is NULL: a missing optional string is "")
 * and is freed with proto_request_release()/proto_result_release().  When
 * filling a struct by hand, strings are malloc'd and owned by the struct
 * too (release frees them); NULL is sent as "".  Encoders borrow the struct
 * and append to a caller-owned dbuf.
 */
#ifndef STARK_PROTO_H
#define STARK_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define PROTO_VERSION 1
#define PROTO_PREFIX_LEN 4		  /* bytes of the length prefix */
#define PROTO_FRAME_MAX (64u << 20)	  /* one frame's body, bytes */
#define PROTO_SRC_MAX (4u << 20)	  /* problem or solution source */
#define PROTO_PLAN_MAX 2048		  /* a footprint estimate (JSON) */
#define PROTO_NAME_MAX 256		  /* names, ids, short strings */
#define PROTO_PATH_MAX 4096		  /* paths */
#define PROTO_MESSAGE_MAX (64u << 10)	  /* human message */
#define PROTO_LOG_MAX (1u << 20)	  /* compiler log, traceback */
#define PROTO_FLAGS_MAX 32		  /* entries in result.flags */
/* entries in result.env: a GPU evaluation at KernelBench's sizes fills 58
 * (its memory plan, timing, the queue, the builds), and the C side adds its
 * own notes after the evaluator's; at 64 the last notes were dropped. */
#define PROTO_ENV_MAX 96
#define PROTO_ENV_VAL_MAX (PROTO_NAME_MAX * 4) /* one env value */
#define PROTO_REASON_MAX (16u << 10)	  /* one verdict's reason (result.*_reason) */
#define PROTO_TRIALS_MAX 1000
#define PROTO_WARMUP_MAX 10000		  /* request.warmup */
#define PROTO_REPS_MAX 1000000		  /* request.min_reps/max_reps, result.reps */
#define PROTO_PLACEMENTS_MAX 64		  /* request.placements */
#define PROTO_HOST_MEM_MIB_MAX (1u << 24) /* request.host_mem_mib (16 TiB) */
#define PROTO_TIME_MS_MAX 86400000u	  /* request.max_time_ms/wall_ms: a day */

/* What the evaluator is asked to do with the candidate. */
enum proto_stage {
	PROTO_STAGE_COMPILE = 1, /* build native code into the cache; no timing */
	PROTO_STAGE_RUN = 2,	 /* load prebuilt code, check and time */
	PROTO_STAGE_ALL = 3	 /* both in one process (no separate jails) */
};

/* The verdict.  Names (proto_status_name) are a stable external contract. */
enum proto_status {
	PROTO_ST_CORRECT = 0,	    /* "correct" */
	PROTO_ST_INCORRECT = 1,	    /* "incorrect": wrong output */
	PROTO_ST_COMPILE_ERROR = 2, /* "compile_error": log holds compiler output */
	PROTO_ST_RUNTIME_ERROR = 3, /* "runtime_error": log holds the traceback */
	PROTO_ST_TIMEOUT = 4,	    /* "timeout" */
	PROTO_ST_CRASHED = 5,	    /* "crashed": message names signal/cause */
	PROTO_ST_REJECTED = 6,	    /* "rejected": an integrity check failed */
	PROTO_ST_ERROR = 7,	    /* "error": could not evaluate (bad problem,
				       infrastructure); not the candidate's fault */
	PROTO_ST_COMPILED = 8	    /* "compiled": compile stage succeeded */
};
#define PROTO_ST_COUNT 9

struct proto_tolerance {
	double atol, rtol;
};

/*
 * The request.  Required keys: "v", "id", "stage", "device", "format",
 * "problem_src", "solution_src", "seed"; the others default to the values
 * proto_request_init() sets (shown in brackets).  Ranges are checked by
 * the encoder and the decoder alike.
 */
struct proto_request {
	uint32_t v;			/* "v": PROTO_VERSION */
	char *id;			/* "id": job id, <= PROTO_NAME_MAX */
	enum proto_stage stage;		/* "stage": 1..3 [3] */
	char *device;			/* "device": "cpu", "cuda" or "cuda:N"
					   (N < 1000) */
	char *format;			/* "format": "kernelbench" or "fast" */
	char *problem_name;		/* "problem_name": for messages,
					   <= PROTO_PATH_MAX [""] */
	char *problem_src;		/* "problem_src": <= PROTO_SRC_MAX */
	size_t problem_len;		/* bytes of problem_src; 0 = strlen */
	char *solution_name;		/* "solution_name": <= PROTO_PATH_MAX [""] */
	char *solution_src;		/* "solution_src": <= PROTO_SRC_MAX */
	size_t solution_len;		/* bytes of solution_src; 0 = strlen */
	char *cache_dir;		/* "cache_dir": the build cache's store
					   (published builds, remembered
					   failures; read-only), as the
					   evaluator sees it; "" = none;
					   <= PROTO_PATH_MAX [""] */
	char *build_dir;		/* "build_dir": this evaluation's build
					   folder: empty scratch to build in
					   (compile, all), or the builds to
					   load (run, read-only); "" = a
					   private one (compile, all), none
					   (run); <= PROTO_PATH_MAX [""] */
	char *jit_dir;			/* "jit_dir": this evaluation's own
					   writable folder for its language's
					   JIT cache (Triton; run, all), which
					   the orchestrator may publish after
					   it; "" = a private one;
					   <= PROTO_PATH_MAX [""] */
	uint64_t seed;			/* "seed": secret master seed [0] */
	uint32_t trials;		/* "trials": correctness trials,
					   1..PROTO_TRIALS_MAX [5] */
	uint32_t kb_trials;		/* "kb_trials": KernelBench's own trials
					   (its num_correct_trials),
					   0..PROTO_TRIALS_MAX [5]; 0: its
					   verdict is not sought */
	struct proto_tolerance tol_fp32; /* "atol32"/"rtol32": finite, >= 0
					    [1e-4, 1e-4] */
	struct proto_tolerance tol_fp16; /* "atol16"/"rtol16" (fp16 and bf16)
					    [1e-2, 1e-2] */
	bool timing;			/* "timing": measure speed when correct
					   [true] */
	uint32_t warmup;		/* "warmup": untimed calls per model after the trials,
					   0..PROTO_WARMUP_MAX [1]: the trials warm up too */
	uint32_t min_reps;		/* "min_reps": 1..PROTO_REPS_MAX [16] */
	uint32_t max_reps;		/* "max_reps": min_reps..PROTO_REPS_MAX
					   [1000] */
	uint32_t max_time_ms;		/* "max_time_ms": cap on the timing phase,
					   1..PROTO_TIME_MS_MAX [5000] */
	uint32_t placements;		/* "placements": 1..PROTO_PLACEMENTS_MAX
					   [32]: on GPUs, memory pools tried;
					   over 4, each model's fastest 4 by a
					   scan, which the timed calls' inputs
					   and allocations rotate through; times
					   are the fastest pool's
					   (docs/METHOD.md "Timing") */
	bool l2_flush;			/* "l2_flush": on GPUs, flush the L2 before
					   every timed call [true]; false times
					   with whatever the cache holds, as
					   KernelBench's published times do */
	uint32_t host_mem_mib;		/* "host_mem_mib": the memory limit of the
					   jail the stage runs in, in MiB, set
					   by the orchestrator; the CPU's memory
					   plan's budget (0: none known) [0] */
	double target_rse;		/* "target_rse": stop when rel. std. error
					   of the median estimate is below it;
					   0..1 [0.01] */
	uint32_t wall_ms;		/* "wall_ms": the evaluator's own budget,
					   1..PROTO_TIME_MS_MAX [600000] */
	uint32_t queue_ms;		/* "queue_ms": how far its waits in the
					   GPU's queue (device memory, the GPU
					   lock) may move that budget's end on,
					   where it is handed a GPU lock;
					   0..PROTO_TIME_MS_MAX; 0 = wall_ms
					   again [0] */
	char *verdict;			/* "verdict": which verdict decides "status":
					   "stark" or "kernelbench"; "" = stark
					   [""] (docs/METHOD.md) */
	char *language;			/* "language": the candidate's kernel
					   language: "auto" (read from its
					   imports and decorators), "cuda",
					   "triton", "cute", "tilelang" or
					   "tk"; "" = auto [""] (docs/USAGE.md
					   "Languages") */
	char *precision;		/* "precision": "fp32", "fp16" or
					   "bf16": floating inputs and weights
					   cast to it as KernelBench's harness
					   casts them; "" = fp32 [""] */
	char *baseline;			/* "baseline": "eager" or "compile":
					   with "compile" the reference is also
					   timed under torch.compile (default
					   mode) and the result carries both
					   speedups (docs/BENCH.md); "" = eager
					   [""] */
	char *plan;			/* "plan": the problem's footprint
					   estimate kept from an earlier
					   evaluation (JSON, written by the
					   referee, kept by the orchestrator:
					   evaluator/stark_plan_cache.py);
					   "" = none; <= PROTO_PLAN_MAX [""] */
};

struct proto_kv {
	char *key; /* non-empty, <= PROTO_NAME_MAX, unique in env */
	char *val; /* <= PROTO_ENV_VAL_MAX */
};

/*
 * The result.  Required keys: "v", "id", "status"; the others default to
 * the values proto_result_init() sets: 0, "", NaN for every double, no
 * flags, no env.  Doubles may be NaN or infinite.
 */
struct proto_result {
	uint32_t v;		  /* "v" */
	char *id;		  /* "id": echoes the request, <= PROTO_NAME_MAX */
	enum proto_status status; /* "status": the name, as a string */
	char *message;		  /* "message": one human paragraph,
				     <= PROTO_MESSAGE_MAX */
	char *log;		  /* "log": compiler log or traceback,
				     <= PROTO_LOG_MAX */
	uint32_t trials_run;	  /* "trials_run": <= PROTO_TRIALS_MAX */
	uint32_t trials_passed;	  /* "trials_passed": <= trials_run */
	double max_abs_err;	  /* "max_abs_err" (NaN when not compared) */
	double max_rel_err;	  /* "max_rel_err" */
	char *first_bad;	  /* "first_bad": index of the first bad element,
				     e.g. "[3, 17]", or ""; <= PROTO_NAME_MAX */
	double runtime_us;	  /* "runtime_us": candidate median, or NaN */
	double runtime_lo_us;	  /* "runtime_lo_us"/"runtime_hi_us": 95% CI */
	double runtime_hi_us;
	double ref_runtime_us;	  /* "ref_runtime_us": reference median */
	double ref_lo_us;	  /* "ref_lo_us"/"ref_hi_us" */
	double ref_hi_us;
	uint32_t reps;		  /* "reps": timed calls per model,
				     <= PROTO_REPS_MAX */
	double speedup;		  /* "speedup": ref median / candidate median */
	double stage_ms[4];	  /* "startup_ms","compile_ms","check_ms","time_ms" */
	char *flags[PROTO_FLAGS_MAX]; /* "flags": suspicious-but-not-proven;
					 each non-empty, <= PROTO_NAME_MAX */
	uint32_t nflags;
	struct proto_kv env[PROTO_ENV_MAX]; /* "env": device name, clocks, versions */
	uint32_t nenv;
	/* The two verdicts (docs/METHOD.md); "" where they were not
	   reached (the compile stage, a candidate that did not load, a
	   rejection or crash during the trials, which "status" then says). */
	char *verdict;		  /* "verdict": the one that decided "status":
				     "stark", "kernelbench" or "" */
	char *stark_status;	  /* "stark_status": a status name or "" */
	char *stark_reason;	  /* "stark_reason": <= PROTO_REASON_MAX */
	char *kb_status;	  /* "kb_status": KernelBench's verdict, a
				     status name or "" */
	char *kb_reason;	  /* "kb_reason": <= PROTO_REASON_MAX */
	uint32_t kb_trials_run;	  /* "kb_trials_run": <= PROTO_TRIALS_MAX */
	uint32_t kb_trials_passed; /* "kb_trials_passed": <= kb_trials_run */
	double kb_max_diff;	  /* "kb_max_diff": the largest |expected - got|
				     of its trials (NaN when not compared) */
	/* The compiled baseline (request "baseline" = "compile"): the
	   reference under torch.compile, timed beside the eager one; NaN
	   where it was not asked, not timed, or could not be had, which
	   "baseline_compile_error" then says.  The eager fields above are
	   the same with or without it. */
	double ref_compile_us;	  /* "ref_compile_us": its median */
	double ref_compile_lo_us; /* "ref_compile_lo_us"/"ref_compile_hi_us": 95% CI */
	double ref_compile_hi_us;
	double speedup_compile;	  /* "speedup_compile": ref_compile_us /
				     runtime_us */
	char *baseline_compile_error; /* "baseline_compile_error": why there
					 is no compiled baseline (torch.compile
					 missing or failing for this reference,
					 outputs that disagree with eager
					 PyTorch), or ""; never the
					 candidate's doing and never part of
					 the verdict; <= PROTO_REASON_MAX */
};

/* Sets the defaults above; strings NULL.  Needs no release before. */
void proto_request_init(struct proto_request *rq);
/* Frees every string and re-initializes; safe to call twice. */
void proto_request_release(struct proto_request *rq);
void proto_result_init(struct proto_result *rs);   /* NaN metrics, status error */
void proto_result_release(struct proto_result *rs);

/* The stable name of st, or "unknown" for a value out of range. */
const char *proto_status_name(enum proto_status st);
/* Returns 0 and sets *st, or ST_EINVAL for an unknown name. */
ST_WUR int proto_status_parse(const char *name, enum proto_status *st);

/*
 * Whether the candidate's run stage needs exec for its language's JIT
 * (Triton: ptxas and the C compiler at a kernel's first call): "language"
 * is "triton", or auto ("" or "auto") and a line of the solution starts
 * with `import triton` or `from triton` (indented ones too).  The
 * orchestrator gives such a run jail the RUN+EXEC filter, and the
 * evaluator restricts what may be exec'd before candidate code runs; both
 * decide by this one rule.
 */
bool proto_request_jit_exec(const struct proto_request *rq);

/* Whether "baseline" asks for the compiled reference ("compile"). */
bool proto_request_baseline_compile(const struct proto_request *rq);

/*
 * Whether the run jail must allow execve: the candidate's JIT
 * (proto_request_jit_exec) or the compiled reference's (torch.compile's
 * inductor execs the C++ compiler on the CPU, Triton's ptxas and the C
 * compiler on a GPU).  Both sides decide by this rule; the evaluator
 * restricts what may be exec'd with Landlock before any worker exists.
 */
bool proto_request_run_exec(const struct proto_request *rq);

/* The names "language", "precision" and "baseline" take (besides ""),
 * NULL-terminated. */
extern const char *const proto_languages[];
extern const char *const proto_precisions[];
extern const char *const proto_baselines[];

/*
 * Setters that copy, enforce the field's cap and keep ownership rules.
 * Invalid UTF-8 and NUL bytes in what they copy become '?', so what they
 * store always encodes.
 *  - set_message formats and truncates to PROTO_MESSAGE_MAX;
 *  - set_log copies n bytes; past PROTO_LOG_MAX it keeps the head and the
 *    tail with a note of what was cut between them;
 *  - add_flag ignores a flag already present; ST_EINVAL for an empty flag,
 *    ST_ETOOBIG past PROTO_NAME_MAX bytes or PROTO_FLAGS_MAX flags;
 *  - add_env replaces the value of an existing key and truncates the value
 *    to PROTO_ENV_VAL_MAX; ST_EINVAL for an empty key, ST_ETOOBIG for a key
 *    past PROTO_NAME_MAX or a full env.
 * All return ST_ENOMEM when out of memory and leave rs unchanged on error.
 */
ST_WUR int proto_result_set_message(struct proto_result *rs, const char *fmt, ...)
	ST_PRINTF(2, 3);
ST_WUR int proto_result_set_log(struct proto_result *rs, const void *data, size_t n);
ST_WUR int proto_result_add_flag(struct proto_result *rs, const char *flag);
ST_WUR int proto_result_add_env(struct proto_result *rs, const char *k, const char *v);

/*
 * The schema's rules (caps, ranges, UTF-8, device, format and verdict
 * names, status names in *_status, min_reps <= max_reps, trials_passed <=
 * trials_run and kb_trials_passed <= kb_trials_run, unique env keys)
 * applied to a struct built by hand.  Returns 0, ST_ETOOBIG for a string or
 * list over its cap, or ST_EINVAL; err (if not NULL) names the field.  The
 * encoders run these first, so what encodes also decodes.
 */
ST_WUR int proto_request_check(const struct proto_request *rq, char *err, size_t errlen);
ST_WUR int proto_result_check(const struct proto_result *rs, char *err, size_t errlen);

/*
 * Encoding appends one complete frame (length prefix included) to out; out
 * needs room for the frame under its cap (PROTO_PREFIX_LEN +
 * PROTO_FRAME_MAX always suffices).  Returns 0, the error of the *_check
 * function, ST_ETOOBIG when out's cap is hit, or ST_ENOMEM; on error out is
 * as it was.
 *
 * Decoding takes one frame body (without the prefix).  rq/rs need not be
 * initialized; on success the caller releases it, on error it is left
 * released (initialized, owning nothing).  On a decoding error the return
 * is ST_EPROTO, ST_EVERSION (wrong "v"), ST_ETOOBIG (len over
 * PROTO_FRAME_MAX) or ST_ENOMEM, and err (if not NULL) receives a message
 * such as "field \"trials\": expected unsigned int, got array".
 * Memory used is bounded by a small multiple of len.
 */
ST_WUR int proto_request_encode(const struct proto_request *rq, struct dbuf *out);
ST_WUR int proto_result_encode(const struct proto_result *rs, struct dbuf *out);
ST_WUR int proto_request_decode(const void *body, size_t len,
				struct proto_request *rq, char *err, size_t errlen);
ST_WUR int proto_result_decode(const void *body, size_t len,
			       struct proto_result *rs, char *err, size_t errlen);

/*
 * Frame I/O on blocking descriptors.  proto_frame_read() reads the prefix,
 * rejects a length above max (clamped to PROTO_FRAME_MAX) with ST_ETOOBIG
 * before allocating, then reads the body into out (reset first; out's own
 * cap applies too), growing it only as bytes arrive.  Returns 0, ST_EEOF if
 * the peer closed (before or inside a frame), ST_EIO, ST_ETOOBIG or
 * ST_ENOMEM; after an error the stream is mid-frame and only fit to close.  proto_frame_write() writes a whole frame as built by an
 * encoder (ST_EINVAL if it is shorter than a prefix, or ST_EIO).
 */
ST_WUR int proto_frame_read(int fd, size_t max, struct dbuf *out);
ST_WUR int proto_frame_write(int fd, const struct dbuf *frame);

/*
 * Incremental framing for non-blocking readers (the orchestrator polls many
 * evaluators).  Feed bytes as they arrive; each call consumes at most one
 * frame's worth and sets *used to the bytes of data it took, so callers
 * loop until all n are used:
 *
 *	while (n) {
 *		rc = proto_framer_feed(&f, p, n, &body, &len, &used);
 *		if (rc < 0) goto out_kill;   // stream is unrecoverable
 *		p += used, n -= used;
 *		if (rc == 1) handle(body, len);
 *	}
 *
 * Returns 1 when a frame is complete (*body and *len describe it, borrowed
 * until the next feed or release), 0 when more bytes are needed, or
 * ST_ETOOBIG (a prefix above max) / ST_ENOMEM.  Errors are sticky: every
 * later feed returns the same code.  The body buffer grows only as bytes
 * arrive, so a peer that announces a large frame and stalls costs nothing.
 * Fields are private.
 */
struct proto_framer {
	struct dbuf buf;		     /* the current body */
	unsigned char hdr[PROTO_PREFIX_LEN]; /* the prefix as it arrives */
	size_t nhdr;			     /* bytes of hdr received */
	size_t max;			     /* cap on a body */
	int err;			     /* sticky error, or 0 */
	bool ready;			     /* a frame was handed out */
};
/* max is clamped to PROTO_FRAME_MAX. */
void proto_framer_init(struct proto_framer *f, size_t max);
ST_WUR int proto_framer_feed(struct proto_framer *f, const void *data, size_t n,
			     const void **body, size_t *len, size_t *used);
/* True while a frame has started but not completed (EOF now = truncation). */
bool proto_framer_partial(const struct proto_framer *f);
void proto_framer_release(struct proto_framer *f);

#endif
