/*
 * text.c -- one node for the terminal (`stark show RUN --node N`): where it
 * came from, what it was asked to do, what the evaluator or the anchor
 * check said about it, the end of its log, its timings and flags, and the
 * LLM calls that made it.  Everything comes from a RUN object
 * (report_run_json with the node's details).
 *
 * Strings from candidates and LLMs reach a terminal here: control
 * characters other than tab (C0, DEL and C1) are printed as '?', so an
 * escape sequence in a traceback cannot drive the terminal.
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "report/report_int.h"

#define LOG_LINES 40 /* lines of a log printed */

/* s with control characters as '?', each line after the first indented. */
static void put_text(FILE *out, const char *s, const char *indent)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\n') {
			if (s[1])
				fprintf(out, "\n%s", indent);
			continue;
		}
		/* C1 controls (U+0080-U+009F) act as ESC sequences on some terminals. */
		if (c == 0xc2 && (unsigned char)s[1] >= 0x80 && (unsigned char)s[1] <= 0x9f) {
			fputc('?', out);
			s++;
			continue;
		}
		fputc((c < 0x20 && c != '\t') || c == 0x7f ? '?' : c, out);
	}
}

static void put_block(FILE *out, const char *title, const char *s)
{
	fprintf(out, "%s:\n    ", title);
	put_text(out, s, "    ");
	fputc('\n', out);
}

static void put_time(FILE *out, double t)
{
	struct tm tm;
	time_t s = (time_t)t;
	char b[32];

	if (!isfinite(t) || !gmtime_r(&s, &tm) || !strftime(b, sizeof(b), "%Y-%m-%d %H:%M:%S", &tm))
		fprintf(out, "unknown");
	else
		fprintf(out, "%s UTC", b);
}

static const json_t *attempt_of(const json_t *run, uint64_t k)
{
	const json_t *log = json_object_get(run, "attempt_log");

	return k && k <= json_array_size(log) ? json_array_get(log, (size_t)(k - 1)) : NULL;
}

static void put_origin(FILE *out, const json_t *run, const json_t *n)
{
	const char *o = jr_str(n, "origin", "");
	const json_t *p =
	    json_array_get(json_object_get(run, "nodes"), (size_t)jr_u64(n, "parent", 0));

	fprintf(out, "  origin: %s", o);
	if (!strcmp(o, "root"))
		fprintf(out, " (the reference program, as the search started from it)\n");
	else if (!strcmp(o, "plan"))
		fprintf(out, " (the plan agent's instructions, carried out by the code agent)\n");
	else if (!strcmp(o, "debug"))
		fprintf(out, " (the debug agent repairing its parent)\n");
	else if (!strcmp(o, "sample"))
		fprintf(out, " (a fresh sample from the reference)\n");
	else
		fprintf(out, " (a refinement of its parent from its feedback)\n");
	if (p && json_is_integer(json_object_get(n, "parent")))
		fprintf(out, "  parent: node %llu (%s, %s)\n",
			(unsigned long long)jr_u64(n, "parent", 0), jr_str(p, "origin", "?"),
			jr_str(p, "status", "?"));
}

static void put_status(FILE *out, const json_t *n)
{
	const json_t *rs = json_object_get(n, "result");
	double sp = jr_real(n, "speedup", NAN), rt = jr_real(n, "runtime_us", NAN);
	double ref = jr_real(n, "ref_runtime_us", NAN);

	fprintf(out, "  status: %s", jr_str(n, "status", "?"));
	if (json_is_string(json_object_get(n, "verdict")) &&
	    strcmp(jr_str(n, "verdict", ""), jr_str(n, "status", "")))
		fprintf(out, " (evaluator's verdict: %s)", jr_str(n, "verdict", ""));
	if (isfinite(sp))
		fprintf(out, ", %.2fx", sp);
	if (isfinite(rt)) {
		fprintf(out, "; candidate %.1f us", rt);
		if (isfinite(jr_real(rs, "runtime_lo_us", NAN)))
			fprintf(out, " (95%%: %.1f-%.1f)", jr_real(rs, "runtime_lo_us", NAN),
				jr_real(rs, "runtime_hi_us", NAN));
	}
	if (isfinite(ref))
		fprintf(out, ", reference %.1f us", ref);
	fputc('\n', out);
	/* --baseline compile: against the reference under torch.compile too */
	if (isfinite(jr_real(rs, "ref_compile_us", NAN)))
		fprintf(out,
			"  torch.compile: reference %.1f us (95%%: %.1f-%.1f), speedup %.2fx\n",
			jr_real(rs, "ref_compile_us", NAN), jr_real(rs, "ref_compile_lo_us", NAN),
			jr_real(rs, "ref_compile_hi_us", NAN), jr_real(rs, "speedup_compile", NAN));
	else if (*jr_str(rs, "baseline_compile_error", "")) {
		fprintf(out, "  torch.compile: no compiled baseline: ");
		put_text(out, jr_str(rs, "baseline_compile_error", ""), "    ");
		fputc('\n', out);
	}
	if (json_is_string(json_object_get(n, "reason"))) {
		fprintf(out, "  why: ");
		put_text(out, jr_str(n, "reason", ""), "       ");
		fputc('\n', out);
	}
}

static void put_attempt(FILE *out, const json_t *a, const json_t *n)
{
	double t0 = jr_real(a, "started", NAN), t1 = jr_real(a, "ended", NAN);

	fprintf(out, "  attempt %llu: the policy chose node %llu for %s%s; outcome %s\n",
		(unsigned long long)jr_u64(a, "attempt", 0),
		(unsigned long long)jr_u64(a, "parent", 0), jr_str(a, "action", "?"),
		jr_bool(a, "explored", false) ? " (exploring)" : "",
		jr_str(a, "outcome", "")[0] ? jr_str(a, "outcome", "") : "open");
	fprintf(out, "  made: ");
	put_time(out, jr_real(n, "at", NAN));
	if (isfinite(t0) && isfinite(t1))
		fprintf(out, "; the attempt took %.1f s", t1 - t0);
	fputc('\n', out);
}

static void put_checks(FILE *out, const json_t *a)
{
	const json_t *checks = json_object_get(a, "checks"), *c;
	size_t i;

	if (!json_array_size(checks))
		return;
	fprintf(out, "anchor checks that refused a reply:\n");
	json_array_foreach(checks, i, c)
	{
		fprintf(out, "    %s (retry %llu): ", jr_str(c, "key", ""),
			(unsigned long long)jr_u64(c, "retry", 0));
		put_text(out, jr_str(c, "reason", ""), "      ");
		fputc('\n', out);
	}
}

static void put_num(FILE *out, const char *label, double v, const char *unit, bool *first)
{
	if (!isfinite(v))
		return;
	fprintf(out, "%s%s %.1f %s", *first ? "" : ", ", label, v, unit);
	*first = false;
}

static void put_result(FILE *out, const json_t *rs)
{
	const json_t *v;
	const char *k;
	size_t i;
	bool first = true;

	fprintf(out, "evaluation:\n    verdict: %s\n", jr_str(rs, "verdict", "?"));
	if (jr_str(json_object_get(rs, "env"), "language", "")[0])
		fprintf(out, "    language: %s; precision %s\n",
			jr_str(json_object_get(rs, "env"), "language", ""),
			jr_str(json_object_get(rs, "env"), "input_precision", "fp32"));
	if (jr_str(rs, "message", "")[0]) {
		fprintf(out, "    message: ");
		put_text(out, jr_str(rs, "message", ""), "      ");
		fputc('\n', out);
	}
	if (jr_str(rs, "first_bad", "")[0] || isfinite(jr_real(rs, "max_abs_err", NAN)))
		fprintf(out, "    first bad element: %s; max abs err %g, max rel err %g\n",
			jr_str(rs, "first_bad", "")[0] ? jr_str(rs, "first_bad", "") : "none",
			jr_real(rs, "max_abs_err", NAN), jr_real(rs, "max_rel_err", NAN));
	if (jr_u64(rs, "trials_run", 0))
		fprintf(out, "    trials: %llu of %llu passed; %llu timed calls\n",
			(unsigned long long)jr_u64(rs, "trials_passed", 0),
			(unsigned long long)jr_u64(rs, "trials_run", 0),
			(unsigned long long)jr_u64(rs, "reps", 0));
	fprintf(out, "    times: ");
	put_num(out, "startup", jr_real(rs, "startup_ms", NAN), "ms", &first);
	put_num(out, "compile", jr_real(rs, "compile_ms", NAN), "ms", &first);
	put_num(out, "check", jr_real(rs, "check_ms", NAN), "ms", &first);
	put_num(out, "timing", jr_real(rs, "time_ms", NAN), "ms", &first);
	put_num(out, "evaluation wall", jr_real(rs, "wall_ms", NAN), "ms", &first);
	fprintf(out, "%s\n    flags:", first ? "not recorded" : "");
	json_array_foreach(json_object_get(rs, "flags"), i, v)
	{
		fputc(' ', out);
		put_text(out, json_string_value(v), "");
	}
	fprintf(out, "%s\n", json_array_size(json_object_get(rs, "flags")) ? "" : " none");
	if (json_object_size(json_object_get(rs, "env"))) {
		fprintf(out, "    environment:\n");
		json_object_foreach(json_object_get(rs, "env"), k, v)
		{
			fprintf(out, "      ");
			put_text(out, k, "");
			fprintf(out, ": ");
			put_text(out, json_string_value(v), "        ");
			fputc('\n', out);
		}
	}
}

static void put_log(FILE *out, const json_t *rs)
{
	const char *log = jr_str(rs, "log_tail", ""), *p;
	size_t lines = 0, skip;

	if (!log[0])
		return;
	for (p = log; *p; p++)
		lines += *p == '\n';
	lines += p > log && p[-1] != '\n';
	skip = lines > LOG_LINES ? lines - LOG_LINES : 0;
	fprintf(out, "log (%llu bytes", (unsigned long long)jr_u64(rs, "log_bytes", 0));
	if (skip || jr_u64(rs, "log_bytes", 0) > strlen(log))
		fprintf(out, "; its last %zu lines", lines - skip);
	fprintf(out, "):\n    ");
	for (p = log; skip && *p; p++)
		skip -= *p == '\n';
	put_text(out, p, "    ");
	fputc('\n', out);
}

static void put_calls(FILE *out, const json_t *a)
{
	const json_t *calls = json_object_get(a, "llm"), *c;
	size_t i;

	if (!json_array_size(calls))
		return;
	fprintf(out, "llm calls of attempt %llu:\n    %-16s %-8s %-20s %9s %10s %9s %8s  %s\n",
		(unsigned long long)jr_u64(a, "attempt", 0), "key", "role", "model", "tokens in",
		"tokens out", "dollars", "ms", "result");
	json_array_foreach(calls, i, c)
	{
		const char *model = jr_str(c, "model", "");

		fprintf(out, "    %-16s %-8s %-20.20s %9llu %10llu %9.4f %8.0f  ",
			jr_str(c, "key", ""), jr_str(c, "role", ""), model[0] ? model : "-",
			(unsigned long long)jr_u64(c, "tokens_in", 0),
			(unsigned long long)jr_u64(c, "tokens_out", 0), jr_real(c, "dollars", 0),
			jr_real(c, "ms", NAN));
		if (!jr_bool(c, "answered", false))
			fprintf(out, "no answer journaled");
		else if (jr_i64(c, "rc", 0))
			put_text(out, jr_str(c, "error", "failed"), "");
		else
			fprintf(out, "ok");
		if (jr_u64(c, "tokens_reasoning", 0))
			fprintf(out, ", %llu reasoning tokens",
				(unsigned long long)jr_u64(c, "tokens_reasoning", 0));
		if (jr_bool(c, "truncated", false))
			fprintf(out, ", cut at its token limit");
		fputc('\n', out);
	}
}

int report_print_node(const json_t *run, uint32_t id, FILE *out)
{
	const json_t *n = json_array_get(json_object_get(run, "nodes"), id), *a;
	const char *plan;

	if (!n)
		return ST_ENOENT;
	a = attempt_of(run, jr_u64(n, "attempt", 0));
	fprintf(out, "node %u of run %s (%s)\n", id, jr_str(run, "run_id", ""),
		jr_str(run, "problem", ""));
	put_origin(out, run, n);
	put_status(out, n);
	if (a)
		put_attempt(out, a, n);
	if (json_is_string(json_object_get(n, "rejected")))
		put_block(out, "rejected before evaluation", jr_str(n, "rejected", ""));
	put_checks(out, a);
	plan = jr_str(n, "plan", "");
	if (plan[0])
		put_block(out, "instructions", plan);
	if (json_is_object(json_object_get(n, "result"))) {
		put_result(out, json_object_get(n, "result"));
		put_log(out, json_object_get(n, "result"));
	}
	put_calls(out, a);
	fprintf(out, "code: %llu lines (`stark export %s --node %u` writes it)\n",
		(unsigned long long)jr_u64(n, "code_lines", 0), jr_str(run, "run_id", ""), id);
	return ferror(out) ? ST_EIO : ST_OK;
}
