/*
 * verdict.c -- the result of an evaluation whose process ended (or sent its
 * result): the evaluator's own, when a valid frame with the request's id
 * arrived, else one made here from how the process ended -- "timeout" for
 * the deadline, "crashed" for a signal, a seccomp kill, the compile jail's
 * memory limit or a malformed frame, "error" for an exit without a result,
 * a lost zygote or the run jail's memory limit with no account of whose
 * allocations reached it --
 * with the message saying which; and what stark saw of the run besides
 * (struct evalrun_info).  Nothing the evaluator sent is trusted: the frame
 * is decoded strictly here (proto_result_decode).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "pool/pool_int.h"

static const char *signame(int sig)
{
	const char *s = sigabbrev_np(sig);

	return s ? s : "?";
}

/* A result made here, from how the process ended. */
int evalrun__synthesize(struct evalrun *er, struct proto_result *rs, const char *decode_err)
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
			rs, "the evaluator did not finish within its wall-clock limit of %.0f s (plus %.0f s %s); its process tree was killed",
			wall_s, (double)(er->deadline_ns - er->start_ns) / 1e9 - wall_s,
			er->queued ? "for its grace and its queue on the shared GPU" : "grace");
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
	if (ex->how == SANDBOX_OOM && strcmp(er->si.stage, "compile") != 0) {
		/* The run jail holds the evaluator's side and the candidate's;
		 * whose allocations reached the limit is the referee's account
		 * (oom_account), and none came: on the H200 two workers making
		 * 6 GiB inputs each went past 16 GiB and the jail ended before
		 * the referee answered.  A limit of ours is never the
		 * candidate's verdict. */
		rs->status = PROTO_ST_ERROR;
		rc = proto_result_set_message(
		    rs, "the run jail's %s before the evaluator could say whose allocations reached it: a limit of the evaluator's own, not the candidate's verdict; STARK_RUN_MEM_MIB raises it",
		    ex->why[0] ? ex->why : "memory limit was reached");
		if (!rc && er->err.len)
			rc = proto_result_set_log(rs, er->err.p, er->err.len);
		return rc;
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

const char *evalrun__env_of(const struct proto_result *rs, const char *key)
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
	const char *blame = evalrun__env_of(rs, "oom_blame"), *mib = evalrun__env_of(rs, "host_mem_mib");
	char *seen;
	int rc;

	if ((rs->status != PROTO_ST_CRASHED && rs->status != PROTO_ST_ERROR) || !rs->message ||
	    !strstr(rs->message, "(SIGKILL)"))
		return 0;
	if (!er->ended)
		evalrun__reap(er, OOM_ACCOUNT_WAIT_MS);
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
		evalrun__kill_tree(er);
		evalrun__reap(er, -1);
	}
	if (!er->ended) {
		/* What it printed before its result. */
		for (int i = P_OUT; i < P_RES; i++)
			if (er->fd[i] >= 0)
				evalrun__read_pipe(er, i);
	}
	if (!valid) {
		rc = evalrun__synthesize(er, rs, why);
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
