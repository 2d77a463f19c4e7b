/*
 * evaluator.h -- how to talk to the evaluator binary (stark-eval).
 *
 * The evaluator is a separate program that embeds Python and PyTorch.  The
 * orchestrator starts it (normally inside a sandbox jail) with:
 *
 *   fd 0   the request: exactly one proto frame, then EOF
 *   fd 1   stdout of the evaluator and of candidate code (untrusted, capped
 *          by the reader)
 *   fd 2   stderr, likewise
 *   fd 3   the result channel: exactly one proto frame, written by the
 *          referee (trusted code) only; candidate code never holds it
 *
 * Exit status 0 means a result frame was written.  Any other ending (signal,
 * non-zero exit, no frame, malformed frame) is turned into a verdict by the
 * orchestrator from the sandbox's account of how the child ended.
 *
 * Inside the evaluator, the referee (trusted: seeds, expected outputs,
 * verdict, result channel) never runs candidate code; candidate code runs
 * in forked workers that close fd 3 before loading it.
 */
#ifndef STARK_EVALUATOR_H
#define STARK_EVALUATOR_H

#include <stdint.h>

#define EVAL_FD_REQUEST 0
#define EVAL_FD_RESULT 3
#define EVAL_FD_LOCK 4 /* optional: a file, open for reading and writing,
			  on which evaluations sharing a GPU take POSIX
			  record locks (the machine's file of the GPU,
			  pool/pool.h evalrun_gpu_lock_path; --gpu-lock):
			  byte 1 exclusively while one times, shared while
			  one runs other GPU work (trials, probes); byte 0,
			  exclusively, only while waiting for byte 1, so a
			  timing that waits keeps new shared holders out;
			  byte 3 shared by each timing from the start of
			  its wait until it lets byte 1 go, and a shared
			  step does not queue for byte 0 while byte 3 is
			  held, so timings run back to back.
			  Other programs that use the GPU may take byte 1
			  the same way to keep out of timings.  The same
			  file holds the memory ledger (byte 2, bytes
			  64-127, offsets 2048 and 4096 on:
			  evaluator/stark_memory.py), through which the
			  evaluations on the GPU reserve device memory. */
#define EVAL_PROGRAM "stark-eval"

/* Default limits the orchestrator applies to one evaluation. */
#define EVAL_DEFAULT_WALL_MS 180000u	 /* whole evaluation, compile included */
#define EVAL_OUTPUT_CAP (256u << 10)	 /* stdout/stderr bytes kept */

/*
 * The zygote: `stark-eval --zygote [--cgroup-parent DIR]`, started by the
 * orchestrator outside any jail (sandbox stage none: descriptors closed,
 * environment exact) with fd 0 a Unix SOCK_SEQPACKET socket, the control
 * socket.  It starts the interpreter once, imports the harness (torch
 * included) and calls stark_referee.prewarm() if the harness has one, but
 * never initializes CUDA; then it sends one struct eval_zready and serves
 * jobs until the control socket closes.
 *
 * A job is one struct eval_zjob with EVAL_ZFD_COUNT descriptors attached
 * (SCM_RIGHTS, in enum eval_zfd order; EVAL_ZFD_LOCK only when the job's
 * flags say so).  For each, the zygote forks a monitor, which builds the
 * job's jail and, in it, forks the evaluation from the zygote's memory
 * (sandbox_spawn_fn): the jailed process reads the request on fd 0 and
 * writes stdout, stderr and the result on fds 1-3 exactly as a stark-eval
 * process does (above), so nothing the orchestrator reads there changes.
 * The zygote itself never reads a request: it never holds a seed, a
 * problem or a candidate.
 *
 * On the job's report socket the monitor sends one struct eval_zreport of
 * kind EVAL_ZREP_STARTED once the jail is entered, then one of kind
 * EVAL_ZREP_ENDED when the evaluation has ended and been reaped (how, in
 * the sandbox's words); a jail that could not be built is a single ENDED
 * with spawn_rc < 0 and the sandbox's message in why.  The orchestrator
 * writes one byte EVAL_ZKILL to have the whole tree killed (it is then
 * still reported as ENDED); closing its end kills the tree too.
 *
 * Every message is fixed-size, starts with EVAL_ZMAGIC and EVAL_ZVERSION,
 * and is checked on receipt; strings are NUL-terminated within their
 * arrays.  Both ends are built from the same tree: the layout is not an
 * interface between versions.
 */
#define EVAL_ZMAGIC 0x5a4b5453u /* "STKZ" */
#define EVAL_ZVERSION 2u
#define EVAL_ZBINDS 12		/* binds per job */
#define EVAL_ZPATH 256		/* bytes of a bind path, NUL included */
#define EVAL_ZKILL 'K'

enum eval_zfd {
	EVAL_ZFD_REQUEST, /* read end of the request pipe -> fd 0 */
	EVAL_ZFD_STDOUT,  /* write end -> fd 1 */
	EVAL_ZFD_STDERR,  /* write end -> fd 2 */
	EVAL_ZFD_RESULT,  /* write end -> fd 3 */
	EVAL_ZFD_REPORT,  /* the monitor's end of the report socket */
	EVAL_ZFD_LOCK,	  /* the GPU lock file -> fd 4 (EVAL_ZJOB_LOCK) */
	EVAL_ZFD_COUNT
};

enum eval_zstage { EVAL_ZSTAGE_NONE = 0, EVAL_ZSTAGE_COMPILE = 1, EVAL_ZSTAGE_RUN = 2 };

#define EVAL_ZJOB_INSECURE 1u /* run with the layers this machine has */
#define EVAL_ZJOB_LOCK	   2u /* EVAL_ZFD_LOCK is attached */
#define EVAL_ZJOB_JAILED   4u /* the evaluator's --jailed: workers narrow */
#define EVAL_ZJOB_EXEC	   8u /* run jail: sandbox_config.run_exec (proto_request_run_exec) */

struct eval_zbind {
	char src[EVAL_ZPATH];
	char dst[EVAL_ZPATH]; /* "" = src */
	uint32_t writable;    /* 0 or 1 */
	uint32_t pad;
};

struct eval_zjob {
	uint32_t magic, version;
	uint32_t stage;	    /* enum eval_zstage */
	uint32_t flags;	    /* EVAL_ZJOB_* */
	int32_t gpu_index;  /* -1: no GPU device nodes */
	uint32_t required;  /* sandbox layers; 0 = the stage's default */
	uint64_t mem_bytes; /* 0 = the sandbox's default */
	uint64_t oom_grace_ms; /* sandbox_config.oom_grace_ms */
	uint64_t wall_ms;   /* the deadline the monitor enforces */
	int32_t owner_pid;  /* names the jail's cgroup (sandbox.h) */
	uint32_t nbinds;    /* <= EVAL_ZBINDS */
	struct eval_zbind binds[EVAL_ZBINDS];
};

struct eval_zready {
	uint32_t magic, version;
	int32_t pid;	     /* the zygote's */
	uint32_t threads;    /* its threads after start-up (1 expected) */
	uint64_t init_ns;    /* interpreter and harness start-up */
	uint64_t prewarm_ns; /* stark_referee.prewarm() */
	char note[256];	     /* why evaluations will fail ("" = they will not) */
};

enum eval_zrep_kind { EVAL_ZREP_STARTED = 1, EVAL_ZREP_ENDED = 2 };

struct eval_zreport {
	uint32_t magic, version;
	uint32_t kind;	    /* enum eval_zrep_kind */
	int32_t spawn_rc;   /* 0, or why the jail was never entered (ST_E*) */
	uint32_t layers;    /* sandbox layers applied */
	uint32_t how;	    /* ENDED: enum sandbox_end */
	int32_t code, sig;  /* ENDED: as struct sandbox_exit */
	int64_t syscall_nr; /* ENDED: -1 when unknown */
	uint64_t wall_ns;   /* ENDED: jail spawn to reap */
	uint64_t fork_ns;   /* job received by the zygote to the monitor running */
	uint64_t jail_ns;   /* the jail built, the evaluation forked into it */
	char why[256];	    /* ENDED: sandbox_exit.why, or the spawn failure */
};

#endif
