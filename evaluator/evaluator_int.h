/*
 * evaluator_int.h -- internals of stark-eval shared by main.c, pyembed.c and
 * the unit tests.
 *
 * pyembed.c is the one file that includes Python.h.  It starts the embedded
 * interpreter, registers the builtin module _stark (the privileged
 * primitives the Python harness needs: forking workers, the secret seed,
 * the sandbox's narrow filter, dumpability), loads the harness that is
 * linked into the binary (pysrc.S), and converts between proto structs and
 * Python dicts.
 *
 * The interpreter is process-wide state, set up once (evpy_init); the
 * secret seed is held here, outside Python, until the referee asks for it
 * after its workers are forked, and it is wiped in every forked worker.
 */
#ifndef STARK_EVALUATOR_INT_H
#define STARK_EVALUATOR_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"
#include "proto/proto.h"

struct evpy_opts {
	bool jailed;	   /* running in a run jail: workers call sandbox_narrow() */
	uint64_t start_ns; /* clock_mono_ns() when the program started */
};

/*
 * Starts the interpreter with the _stark module and executes the embedded
 * harness modules.  Call once per process; opts is copied.  On failure
 * returns ST_EIO and writes a message into err.  In a process forked from
 * one that started the interpreter (the zygote's evaluations), a call only
 * replaces the options (jailed, start time) and returns 0.
 */
ST_WUR int evpy_init(const struct evpy_opts *opts, char *err, size_t errlen);

/*
 * The zygote's start-up beyond evpy_init(): calls stark_referee.prewarm()
 * if the harness has one (imports and caches that every evaluation would
 * otherwise pay for).  Returns 0; ST_EIO when prewarm() raised (message in
 * err; evaluations can still run); ST_EDENIED when CUDA is initialized
 * afterwards, which no forked evaluation could use.
 */
ST_WUR int evpy_prewarm(char *err, size_t errlen);

/*
 * torch.rand()'s float32 numbers on the CPU, bit for bit (mtrand.c): the
 * MT19937 engine of torch's CPU generator -- key its 624 words, left and
 * next torch's own counters -- advanced over n draws, out[i] the i-th
 * draw's low 24 bits times 2^-24, and the state left as torch's engine
 * would leave it.  out is owned by the caller and holds n floats.  Returns
 * 0, or ST_EINVAL (nothing changed) where left and next are not a state
 * torch's engine can be in.
 */
#define EVAL_MT_WORDS 624
ST_WUR int eval_mt_rand(uint32_t key[EVAL_MT_WORDS], int32_t *left, uint32_t *next, float *out,
			size_t n);

/*
 * Forks with Python's fork protocol (PyOS_BeforeFork, then the child's or
 * the parent's PyOS_AfterFork_*), after flushing sys.stdout, sys.stderr and
 * C's streams.  For forks made elsewhere (sandbox_spawn_fn's clone), the
 * three steps are available separately: call evpy_before_fork() before,
 * evpy_after_fork_parent() in the parent after, and evpy_after_fork_child()
 * first thing in the child.  Without an interpreter they only flush.
 */
pid_t evpy_fork(void);
void evpy_before_fork(void);
void evpy_after_fork_parent(void);
void evpy_after_fork_child(void);

/*
 * serve.c: one evaluation on the descriptors of evaluator.h -- reads the
 * request on fd 0, starts the interpreter with opts (or, forked from a
 * zygote, only sets them), evaluates, writes the result on fd 3.  When
 * init_err is not NULL the interpreter could not be started (a zygote's
 * start-up failed): the request then gets an "error" result naming it.
 * Returns the exit status: 0 a result was written, 3 it could not be.
 */
int eval_serve_one(const struct evpy_opts *opts, const char *init_err);

/*
 * zygote.c: `stark-eval --zygote` (evaluator.h).  cgroup_parent, if not
 * NULL, is the orchestrator's cgroup v2 parent for jails.  Returns the exit
 * status: 0 when the control socket closed, 3 on a broken start.
 */
int eval_zygote_main(const char *cgroup_parent);

/*
 * Keeps the request's secret master seed outside the interpreter until the
 * referee takes it (once) through _stark.secret_seed().
 */
void evpy_set_secret(uint64_t seed);

/*
 * Runs one evaluation: rq is borrowed (its seed is not read: see
 * evpy_set_secret), rs must be initialized and is filled.  Every failure of
 * the harness itself becomes status "error" with a message and traceback,
 * so on return rs always holds a result to send.  Returns 0, or ST_ENOMEM.
 * In a forked worker this never returns.  The evaluation's workers are
 * killed but may not be gone yet: send rs, then call evpy_after_result(),
 * which waits for them (a GPU process takes a while to release its
 * device, and the result need not wait for that).
 */
ST_WUR int evpy_evaluate(const struct proto_request *rq, struct proto_result *rs);
void evpy_after_result(void);

/*
 * Converts a result dict, as the harness returns it, into rs (initialized
 * by the caller).  Strict: unknown keys, wrong types, bad status names and
 * out-of-range numbers are ST_EINVAL with a message in err.  Exposed for
 * the unit tests through evpy_result_from_expr().
 */
ST_WUR int evpy_result_from_expr(const char *expr, struct proto_result *rs, char *err,
				 size_t errlen);

/*
 * `stark-eval --doctor DEVICE`: appends stark_env.report_json(device), what
 * this machine has and lacks for the device's candidate formats (JSON), to
 * out.  Returns 0, or ST_EINVAL with the exception text in out.
 */
ST_WUR int evpy_doctor(const char *device, struct dbuf *out);

/*
 * Test hook: evaluates the Python expression expr with `req` bound to the
 * request dict built from rq (or None when rq is NULL) and the harness
 * modules importable, and appends str() of the value to out.  Returns 0,
 * or ST_EINVAL with the exception text in out.
 */
ST_WUR int evpy_eval(const struct proto_request *rq, const char *expr, struct dbuf *out);

#endif
