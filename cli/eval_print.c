/*
 * eval_print.c -- a verdict of `stark eval` as people read it (a short
 * report) or programs do (one JSON object whose names are a stable
 * contract: see cmd_eval.c).  Captured output is untrusted text: its tail
 * is cut and made valid UTF-8 before it is printed.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "evaluator/evaluator.h"
#include "cli/cli.h"

#define HUMAN_LOG_LINES 60
#define JSON_OUTPUT_TAIL 4096

/* ---- output ---------------------------------------------------------- */

static json_t *num(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

static json_t *str_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

/* The last n bytes of captured output as a JSON string: control bytes and
 * invalid UTF-8 (candidates print anything) become '?'. */
static json_t *tail(const char *p, size_t len, size_t n)
{
	char *copy;
	json_t *j;

	if (!p || !len)
		return json_null();
	if (len > n) {
		p += len - n;
		len = n;
	}
	copy = malloc(len + 1);
	if (!copy)
		return json_null();
	memcpy(copy, p, len);
	str_utf8_sanitize(copy, len);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)copy[i] < 0x20 && copy[i] != '\n' && copy[i] != '\t' &&
		    copy[i] != '\r')
			copy[i] = '?';
	j = json_stringn(copy, len);
	free(copy);
	return j ? j : json_null();
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* How the evaluation's processes started and ran, as seen by stark. */
static json_t *timing_json(const struct evalrun_info *info)
{
	json_t *t = json_object(), *stages = json_array();

	if (!t || !stages) {
		json_decref(t);
		json_decref(stages);
		return json_null();
	}
	for (unsigned i = 0; i < info->nstages && i < ST_ARRAY_LEN(info->stage); i++) {
		const struct evalrun_stage_info *si = &info->stage[i];

		json_array_append_new(
		    stages, json_pack("{s:s,s:b,s:I,s:I,s:f,s:f,s:f,s:f}", "stage", si->stage,
				      "zygote", si->zygote, "zygote_pid", (json_int_t)si->zygote_pid,
				      "zygote_starts", (json_int_t)si->zygote_starts, "spawn_ms",
				      ms(si->spawn_ns), "fork_ms", ms(si->fork_ns), "jail_ms",
				      ms(si->jail_ns), "wall_ms", ms(si->wall_ns)));
	}
	json_object_set_new(t, "stages", stages);
	return t;
}

/* One verdict of "verdicts": its status (null where it was not reached),
 * whether it is correct, and why. */
static json_t *verdict_json(const char *status, const char *reason)
{
	json_t *o = json_object();

	if (!o)
		return json_null();
	json_object_set_new(o, "status", str_or_null(status));
	json_object_set_new(o, "correct", json_boolean(status && !strcmp(status, "correct")));
	json_object_set_new(o, "reason", str_or_null(reason));
	return o;
}

/* "verdicts": stark's and KernelBench's.  Where the evaluation ended before
 * the verdicts were recorded (a build or load failure, a rejection, crash
 * or timeout during the trials), stark's is the status and KernelBench's
 * is not known (null). */
static json_t *verdicts_json(const struct proto_result *rs)
{
	bool reached = rs->stark_status && *rs->stark_status;
	json_t *o = json_object(), *kb;

	if (!o)
		return json_null();
	json_object_set_new(o, "stark", verdict_json(reached ? rs->stark_status
							   : proto_status_name(rs->status),
						   reached ? rs->stark_reason : rs->message));
	kb = verdict_json(rs->kb_status, rs->kb_reason);
	if (json_is_object(kb)) {
		json_object_set_new(kb, "trials_run", json_integer(rs->kb_trials_run));
		json_object_set_new(kb, "trials_passed", json_integer(rs->kb_trials_passed));
		json_object_set_new(kb, "max_difference", num(rs->kb_max_diff));
	}
	json_object_set_new(o, "kernelbench", kb);
	return o;
}

/* The result as the JSON object of the contract (the top of the file). */
json_t *cli_eval_json(const struct eval_args *a, const char *problem, const char *solution,
			   const struct proto_result *rs, const struct evalrun_info *info)
{
	json_t *o = json_object(), *flags = json_array(), *env = json_object(), *st = json_object();
	static const char *const stage_names[4] = {"startup_ms", "compile_ms", "check_ms", "time_ms"};
	char layers[256];

	if (!o || !flags || !env || !st) {
		json_decref(o);
		json_decref(flags);
		json_decref(env);
		json_decref(st);
		return NULL;
	}
	for (uint32_t i = 0; i < rs->nflags; i++)
		json_array_append_new(flags, json_string(rs->flags[i]));
	for (uint32_t i = 0; i < rs->nenv; i++)
		json_object_set_new(env, rs->env[i].key, json_string(rs->env[i].val));
	for (int i = 0; i < 4; i++)
		json_object_set_new(st, stage_names[i], num(rs->stage_ms[i]));
	sandbox_layers_str(info->layers, layers, sizeof(layers));
	json_object_set_new(o, "stark", json_pack("{s:s, s:s, s:i}", "release", stark_release(),
						  "commit", stark_commit(), "proto", PROTO_VERSION));
	json_object_set_new(o, "status", json_string(proto_status_name(rs->status)));
	json_object_set_new(o, "correct", json_boolean(rs->status == PROTO_ST_CORRECT));
	json_object_set_new(o, "runtime_us", num(rs->runtime_us));
	json_object_set_new(o, "ref_runtime_us", num(rs->ref_runtime_us));
	json_object_set_new(o, "speedup", num(rs->speedup));
	json_object_set_new(o, "message", str_or_null(rs->message));
	json_object_set_new(o, "runtime_ci_us", json_pack("[oo]", num(rs->runtime_lo_us), num(rs->runtime_hi_us)));
	json_object_set_new(o, "ref_runtime_ci_us", json_pack("[oo]", num(rs->ref_lo_us), num(rs->ref_hi_us)));
	json_object_set_new(o, "baseline", json_string(a->baseline ? a->baseline : "eager"));
	json_object_set_new(o, "ref_compile_us", num(rs->ref_compile_us));
	json_object_set_new(o, "ref_compile_ci_us", json_pack("[oo]", num(rs->ref_compile_lo_us), num(rs->ref_compile_hi_us)));
	json_object_set_new(o, "speedup_compile", num(rs->speedup_compile));
	json_object_set_new(o, "baseline_compile_error", str_or_null(rs->baseline_compile_error));
	json_object_set_new(o, "reps", json_integer(rs->reps));
	json_object_set_new(o, "trials_run", json_integer(rs->trials_run));
	json_object_set_new(o, "trials_passed", json_integer(rs->trials_passed));
	json_object_set_new(o, "max_abs_err", num(rs->max_abs_err));
	json_object_set_new(o, "max_rel_err", num(rs->max_rel_err));
	json_object_set_new(o, "first_bad", str_or_null(rs->first_bad));
	json_object_set_new(o, "flags", flags);
	json_object_set_new(o, "verdict", json_string(rs->verdict && *rs->verdict ? rs->verdict
						     : a->verdict ? a->verdict : "stark"));
	json_object_set_new(o, "verdicts", verdicts_json(rs));
	json_object_set_new(o, "env", env);
	json_object_set_new(o, "stage_ms", st);
	json_object_set_new(o, "log", str_or_null(rs->log));
	json_object_set_new(o, "id", json_string(rs->id ? rs->id : ""));
	json_object_set_new(o, "problem", json_string(problem));
	json_object_set_new(o, "solution", json_string(solution));
	json_object_set_new(o, "device", json_string(a->device));
	json_object_set_new(o, "sandbox", json_string(layers));
	json_object_set_new(o, "stdout", tail(info->out, info->out_len, JSON_OUTPUT_TAIL));
	json_object_set_new(o, "stderr", tail(info->err, info->err_len, JSON_OUTPUT_TAIL));
	json_object_set_new(o, "stdout_bytes", json_integer((json_int_t)info->out_total));
	json_object_set_new(o, "stderr_bytes", json_integer((json_int_t)info->err_total));
	json_object_set_new(o, "wall_ms", json_real(ms(info->total_ns)));
	json_object_set_new(o, "timing", timing_json(info));
	return o;
}

int cli_eval_print_json(const struct eval_args *a, const struct proto_result *rs,
		      const struct evalrun_info *info)
{
	json_t *o = cli_eval_json(a, a->problem, a->solution, rs, info);
	int rc = CLI_FAILURE;

	if (o && json_dumpf(o, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII) == 0 &&
	    fputc('\n', stdout) != EOF && fflush(stdout) == 0)
		rc = 0;
	else
		stark_warn("eval: cannot write the JSON result");
	json_decref(o);
	return rc;
}

/* The value of env key k in the result, or NULL. */
static const char *env_val(const struct proto_result *rs, const char *k)
{
	for (uint32_t i = 0; i < rs->nenv; i++)
		if (!strcmp(rs->env[i].key, k))
			return rs->env[i].val;
	return NULL;
}

static void fmt_us(char *buf, size_t len, double us)
{
	if (!isfinite(us))
		snprintf(buf, len, "n/a");
	else if (us >= 1e6)
		snprintf(buf, len, "%.3f s", us / 1e6);
	else if (us >= 1e3)
		snprintf(buf, len, "%.3f ms", us / 1e3);
	else
		snprintf(buf, len, "%.1f us", us);
}

static void print_log(const char *log)
{
	const char *p = log;
	int lines = 0;

	while (*p && lines < HUMAN_LOG_LINES) {
		const char *nl = strchr(p, '\n');
		int n = nl ? (int)(nl - p) : (int)strlen(p);

		printf("  | %.*s\n", n, p);
		lines++;
		p += n + (nl ? 1 : 0);
	}
	if (*p)
		printf("  | [... the rest is in `stark eval --json` \"log\" ...]\n");
}

int cli_eval_print_human(const struct proto_result *rs, const struct evalrun_info *info)
{
	char c[32], clo[32], chi[32], r[32], rlo[32], rhi[32];
	bool timed = rs->status == PROTO_ST_CORRECT && isfinite(rs->runtime_us);
	bool staged = false;

	if (timed) {
		/* The message repeats the timings; the lines below say it better. */
		printf("correct: %u of %u trials match (max abs err %.3g, max rel err %.3g)\n",
		       rs->trials_passed, rs->trials_run, rs->max_abs_err, rs->max_rel_err);
		fmt_us(c, sizeof(c), rs->runtime_us);
		fmt_us(clo, sizeof(clo), rs->runtime_lo_us);
		fmt_us(chi, sizeof(chi), rs->runtime_hi_us);
		fmt_us(r, sizeof(r), rs->ref_runtime_us);
		fmt_us(rlo, sizeof(rlo), rs->ref_lo_us);
		fmt_us(rhi, sizeof(rhi), rs->ref_hi_us);
		printf("  candidate  %-12s median, 95%% CI [%s, %s]\n", c, clo, chi);
		printf("  reference  %-12s median, 95%% CI [%s, %s]\n", r, rlo, rhi);
		printf("  speedup    %.3gx (%u timed calls of each, interleaved)\n", rs->speedup,
		       rs->reps);
		if (isfinite(rs->speedup_compile)) {
			fmt_us(r, sizeof(r), rs->ref_compile_us);
			fmt_us(rlo, sizeof(rlo), rs->ref_compile_lo_us);
			fmt_us(rhi, sizeof(rhi), rs->ref_compile_hi_us);
			printf("  compiled   %-12s median, 95%% CI [%s, %s] (the reference under torch.compile)\n",
			       r, rlo, rhi);
			printf("  speedup    %.3gx against torch.compile\n", rs->speedup_compile);
		}
		/* Flags' reasons and a verdict that differs are in the message. */
		if (rs->nflags || (rs->kb_status && *rs->kb_status && strcmp(rs->kb_status, "correct")))
			printf("  message    %s\n", rs->message ? rs->message : "");
	} else {
		printf("%s: %s\n", proto_status_name(rs->status), rs->message ? rs->message : "");
	}
	/* Not the candidate's fault: what this machine lacks is one command away. */
	if (rs->status == PROTO_ST_ERROR && !(rs->message && strstr(rs->message, "stark doctor")))
		printf("  (`stark doctor` lists what this machine lacks for each device)\n");
	for (uint32_t i = 0; i < rs->nflags; i++)
		printf("  flag       %s\n", rs->flags[i]);
	if (rs->stark_status && *rs->stark_status && rs->kb_status && *rs->kb_status)
		printf("  verdicts   stark %s, kernelbench %s (%u of %u trials within torch.allclose);"
		       " %s decides\n",
		       rs->stark_status, rs->kb_status, rs->kb_trials_passed, rs->kb_trials_run,
		       rs->verdict && *rs->verdict ? rs->verdict : "stark");
	else if (rs->stark_status && *rs->stark_status)
		printf("  verdicts   stark %s decides; kernelbench's %s\n", rs->stark_status,
		       rs->kb_reason && *rs->kb_reason ? rs->kb_reason : "not reached");
	if (env_val(rs, "language") || env_val(rs, "input_precision"))
		printf("  language   %s; precision %s\n",
		       env_val(rs, "language") ? env_val(rs, "language") : "cuda",
		       env_val(rs, "input_precision") ? env_val(rs, "input_precision") : "fp32");
	if (rs->baseline_compile_error && *rs->baseline_compile_error)
		printf("  baseline   no compiled baseline: %s\n", rs->baseline_compile_error);
	if (env_val(rs, "triton_jit"))
		printf("  triton jit %s (untimed: trials and warm-up)\n", env_val(rs, "triton_jit"));
	for (int i = 0; i < 4; i++)
		staged |= isfinite(rs->stage_ms[i]);
	if (staged)
		printf("  stages     startup %.0f ms, compile %.0f ms, check %.0f ms, timing %.0f ms; total %.1f s\n",
		       isfinite(rs->stage_ms[0]) ? rs->stage_ms[0] : 0.0,
		       isfinite(rs->stage_ms[1]) ? rs->stage_ms[1] : 0.0,
		       isfinite(rs->stage_ms[2]) ? rs->stage_ms[2] : 0.0,
		       isfinite(rs->stage_ms[3]) ? rs->stage_ms[3] : 0.0, (double)info->wall_ns / 1e9);
	if (rs->log && *rs->log)
		print_log(rs->log);
	if (info->out_total > info->out_len || info->err_total > info->err_len)
		printf("  note       the evaluation printed %llu bytes to stdout and %llu to stderr; the first %u of each were kept\n",
		       (unsigned long long)info->out_total, (unsigned long long)info->err_total,
		       EVAL_OUTPUT_CAP);
	return fflush(stdout) == 0 ? 0 : CLI_FAILURE;
}