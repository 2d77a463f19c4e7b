/*
 * pool_int.h -- what the files of pool/ share and nobody else sees (its
 * unit tests aside): the state of one evaluator process (evalrun.c, read by
 * verdict.c), the environment copy every evaluator gets (setup.c), and the
 * zygote's side of a job (evalzyg.c).  Internal names: evalrun__ and evz_.
 */
#ifndef STARK_POOL_INT_H
#define STARK_POOL_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/common.h"
#include "evaluator/evaluator.h"
#include "pool/pool.h"

/* The driver's folder of GPUs (evalrun_gpu_minor). */
#define EVALRUN_GPUS_DIR "/proc/driver/nvidia/gpus"

/* setup.c: "Device Minor: M" (0-255) of the GPU folder gpus_dir/bus (its
 * "information" file); -1 if absent. */
int evalrun__read_minor(const char *gpus_dir, const char *bus);

/* ---- one evaluator process (evalrun.c) ---- */

enum { P_IN, P_OUT, P_ERR, P_RES, P_COUNT };

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
	bool queued;		/* the GPU is shared: its queue's time allowed */
	char *id;
	char **env;		/* owned copy of the environment given */
};

/*
 * Reads what is available on pipe `which` (P_OUT, P_ERR: into the capped
 * capture; P_RES: into the framer) and closes it at EOF.
 */
void evalrun__read_pipe(struct evalrun *er, int which);
/* Asks for the whole tree to be killed: the sandbox's, or the monitor's. */
void evalrun__kill_tree(struct evalrun *er);
/*
 * Waits up to timeout_ms (0: only looks; < 0: until it ends, after a kill
 * at most EVALRUN_ZYGOTE_ANSWER_MS with a zygote) for the process's end;
 * once it ended, er->ended and er->ex say how and the pipes are drained and
 * closed.
 */
void evalrun__reap(struct evalrun *er, int timeout_ms);
/*
 * The result of an evaluation that sent none (or a bad one: decode_err),
 * from how its process ended (er->ex, er->si.stage), into rs.
 */
int evalrun__synthesize(struct evalrun *er, struct proto_result *rs, const char *decode_err);
/* The value of a result's env key (borrowed from rs), or NULL. */
const char *evalrun__env_of(const struct proto_result *rs, const char *key);

/* ---- the environment (setup.c) ---- */

/* A private copy of the environment an evaluator gets (given, or the
 * allowlisted part of ours), freed by evalrun_free_env(); NULL when out of
 * memory. */
char **evalrun_copy_env(const char *const *given);
void evalrun_free_env(char **env);

/* ---- the zygote's side of a job ---- */

/*
 * evalzyg.c: a job's way to the zygote and back.
 *
 * evz_ensure: starts the zygote if it is not running, or restarts it if it
 * died or was marked broken.  evz_send: sends job with the descriptors in
 * enum eval_zfd order (n of them), waiting at most EVALRUN_ZYGOTE_ANSWER_MS
 * for room on the socket; a failure marks the zygote broken.
 * evz_recv_report: reads one report without blocking: 1 and *r filled (its
 * fields checked), 0 when none is there yet, ST_EEOF when the monitor's end
 * is closed, ST_EPROTO for a malformed one (r->why says how).
 * evz_lost: after a report socket closed without an ENDED report: whether
 * the zygote itself ended, in words into why (e.g. "the evaluator's zygote
 * (pid 12) ended: killed by signal 9"); a dead zygote is marked broken.
 * evz_park: takes the report socket of an evaluation whose result is in
 * but whose jail is still ending (its workers release the GPU), so the
 * caller need not wait; the zygote closes it on the ENDED report
 * (evalrun_zygote_settle).  False, the socket still the caller's, when
 * EVZ_ENDING_MAX are parked already or the zygote is not running.
 */
#define EVZ_ENDING_MAX 64
ST_WUR int evz_ensure(struct evalrun_zygote *z);
ST_WUR int evz_send(struct evalrun_zygote *z, const struct eval_zjob *job, const int *fds,
		    int n);
void evz_mark_broken(struct evalrun_zygote *z, bool kill_now);
ST_WUR int evz_recv_report(int fd, struct eval_zreport *r);
bool evz_lost(struct evalrun_zygote *z, char *why, size_t len);
bool evz_park(struct evalrun_zygote *z, int rep);

#endif
