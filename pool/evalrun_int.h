/*
 * evalrun_int.h -- what evalrun.c, evalpair.c and evalzyg.c share, and
 * nobody else sees: the zygote's side of a job (evalzyg.c) and the
 * environment copy every evaluator gets.
 */
#ifndef STARK_EVALRUN_INT_H
#define STARK_EVALRUN_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/common.h"
#include "evaluator/evaluator.h"
#include "pool/evalrun.h"

/* evalrun.c: a private copy of the environment an evaluator gets (given,
 * or the allowlisted part of ours); NULL when out of memory. */
char **evalrun_copy_env(const char *const *given);
void evalrun_free_env(char **env);

/*
 * evalzyg.c.  A job's way to the zygote and back.
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
