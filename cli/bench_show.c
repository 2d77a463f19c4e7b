/*
 * bench_show.c -- `stark show BENCH_ID [--json|--csv] [--problems]`: a
 * bench's table (one row per level x policy), as text, as the JSON object
 * scripts read (engine.h: bench_json; its field names are stable), or as
 * CSV with a fixed header; --problems adds a row per run.  A bench whose
 * journal says "running" while no process holds its lock was killed, and
 * is shown as "interrupted".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* The table's columns, in the CSV's order (stable: scripts read them). */
static const char *const table_cols[] = {"level",
					 "policy",
					 "problems",
					 "success_rate",
					 "fast_1",
					 "fast_1_5",
					 "fast_2",
					 "mean_speedup",
					 "geomean_speedup",
					 "median_speedup",
					 "success_rate_kernelbench",
					 "fast_1_kernelbench",
					 "attempts",
					 "llm_calls",
					 "dollars",
					 "gpu_seconds",
					 NULL};
/* After them, in a bench with --baseline compile only (an eager bench's
 * header stays as it was). */
static const char *const table_compile_cols[] = {
    "problems_compile",	       "compile_unavailable",	 "fast_1_compile",
    "fast_1_5_compile",	       "fast_2_compile",	 "mean_speedup_compile",
    "geomean_speedup_compile", "median_speedup_compile", NULL};
static const char *const problem_cols[] = {"level",   "policy",	      "problem",  "run_id",
					   "status",  "best_speedup", "attempts", "llm_calls",
					   "dollars", "gpu_seconds",  NULL};
static const char *const problem_compile_cols[] = {"best_speedup_compile", NULL};

static void csv_value(FILE *out, const json_t *v)
{
	if (json_is_integer(v))
		fprintf(out, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		fprintf(out, "%.6g", json_real_value(v));
	else if (json_is_string(v)) {
		const char *s = json_string_value(v);

		if (strpbrk(s, ",\"\n")) {
			fputc('"', out);
			for (; *s; s++) {
				if (*s == '"')
					fputc('"', out);
				fputc(*s, out);
			}
			fputc('"', out);
		} else {
			fputs(s, out);
		}
	}
}

/* The rows under a header of cols, then more (NULL: none). */
static void csv(FILE *out, const json_t *rows, const char *const *cols, const char *const *more)
{
	const json_t *row;
	size_t i;

	for (size_t c = 0; cols[c]; c++)
		fprintf(out, "%s%s", c ? "," : "", cols[c]);
	for (size_t c = 0; more && more[c]; c++)
		fprintf(out, ",%s", more[c]);
	fputc('\n', out);
	json_array_foreach(rows, i, row)
	{
		for (size_t c = 0; cols[c]; c++) {
			if (c)
				fputc(',', out);
			csv_value(out, json_object_get(row, cols[c]));
		}
		for (size_t c = 0; more && more[c]; c++) {
			fputc(',', out);
			csv_value(out, json_object_get(row, more[c]));
		}
		fputc('\n', out);
	}
}

static void pct(char *buf, size_t n, const json_t *v)
{
	if (json_is_number(v))
		snprintf(buf, n, "%.1f%%", 100 * json_number_value(v));
	else
		snprintf(buf, n, "-");
}

/* The rows' figures against torch.compile, where the bench asked for them. */
static void print_compile(const json_t *t, FILE *out)
{
	const json_t *row;
	bool head = false;
	size_t i;

	json_array_foreach(t, i, row)
	{
		char f1[16], f15[16], f2[16];

		if (!json_is_integer(json_object_get(row, "problems_compile")))
			continue;
		if (!head)
			fprintf(out, "\nagainst torch.compile (--baseline compile):\n"
				     "%-5s %-9s %8s %11s %7s %8s %7s %7s %7s %7s\n",
				"level", "policy", "problems", "unavailable", "fast_1", "fast_1.5",
				"fast_2", "mean", "geomean", "median");
		head = true;
		pct(f1, sizeof(f1), json_object_get(row, "fast_1_compile"));
		pct(f15, sizeof(f15), json_object_get(row, "fast_1_5_compile"));
		pct(f2, sizeof(f2), json_object_get(row, "fast_2_compile"));
		fprintf(out, "%-5lld %-9s %8lld %11lld %7s %8s %7s %6.2fx %6.2fx %6.2fx\n",
			(long long)jr_i64(row, "level", 0), jr_str(row, "policy", ""),
			(long long)jr_i64(row, "problems_compile", 0),
			(long long)jr_i64(row, "compile_unavailable", 0), f1, f15, f2,
			jr_real(row, "mean_speedup_compile", 1),
			jr_real(row, "geomean_speedup_compile", 1),
			jr_real(row, "median_speedup_compile", 1));
	}
}

int cli_bench_print(const struct bench *b, FILE *out)
{
	json_t *t = bench_table(b->runs, b->nruns), *row;
	size_t i;

	if (!t)
		return stark_error(CLI_FAILURE, "bench %s: out of memory", b->id);
	fprintf(out, "%-5s %-9s %8s %8s %7s %8s %7s %7s %7s %7s %8s %9s %10s %9s\n", "level",
		"policy", "problems", "success", "fast_1", "fast_1.5", "fast_2", "mean", "geomean",
		"median", "attempts", "llm_calls", "dollars", "gpu_s");
	json_array_foreach(t, i, row)
	{
		char s[16], f1[16], f15[16], f2[16];

		pct(s, sizeof(s), json_object_get(row, "success_rate"));
		pct(f1, sizeof(f1), json_object_get(row, "fast_1"));
		pct(f15, sizeof(f15), json_object_get(row, "fast_1_5"));
		pct(f2, sizeof(f2), json_object_get(row, "fast_2"));
		fprintf(out,
			"%-5lld %-9s %8lld %8s %7s %8s %7s %6.2fx %6.2fx %6.2fx %8lld %9lld %10.4f "
			"%9.1f\n",
			(long long)jr_i64(row, "level", 0), jr_str(row, "policy", ""),
			(long long)jr_i64(row, "problems", 0), s, f1, f15, f2,
			jr_real(row, "mean_speedup", 1), jr_real(row, "geomean_speedup", 1),
			jr_real(row, "median_speedup", 1), (long long)jr_i64(row, "attempts", 0),
			(long long)jr_i64(row, "llm_calls", 0), jr_real(row, "dollars", 0),
			jr_real(row, "gpu_seconds", 0));
	}
	print_compile(t, out);
	json_decref(t);
	return ferror(out) ? CLI_FAILURE : CLI_OK;
}

static void print_problems(const struct bench *b, FILE *out)
{
	fprintf(out, "\n%-5s %-9s %-44s %-12s %8s %9s %8s %10s\n", "level", "policy", "run",
		"status", "best", "compiled", "attempts", "dollars");
	for (size_t i = 0; i < b->nruns; i++) {
		const struct bench_run *r = &b->runs[i];
		double usd = 0;
		char best[16] = "-", comp[16] = "-";

		for (int k = 0; k < ROLE_COUNT; k++)
			usd += r->spend[k].dollars;
		if (isfinite(r->best))
			snprintf(best, sizeof(best), "%.2fx", r->best);
		if (isfinite(r->best_compile))
			snprintf(comp, sizeof(comp), "%.2fx", r->best_compile);
		else if (r->compile_state == 0)
			snprintf(comp, sizeof(comp), "n/a");
		fprintf(out, "%-5d %-9s %-44s %-12s %8s %9s %8u %10.4f\n", r->level,
			search_policy_name(r->policy), r->run_id,
			isfinite(r->best) ? "correct" : run_state_name(r->state), best, comp,
			r->attempts, usd);
	}
}

int cli_bench_show(struct store *st, const char *id, const char *fmt, bool problems)
{
	struct bench *b = NULL;
	char err[CLI_ERR_MAX];
	json_t *o;
	int rc;

	if (bench_load(st, id, false, &b, err, sizeof(err)))
		return stark_error(CLI_FAILURE, "%s", err);
	b->state = run_shown_state(st, b->id, b->state);
	if (!strcmp(fmt, "json")) {
		o = bench_json(b);
		rc = o && !json_dumpf(o, stdout, JSON_INDENT(1) | JSON_ENSURE_ASCII) ? CLI_OK
										     : CLI_FAILURE;
		fputc('\n', stdout);
		json_decref(o);
	} else if (!strcmp(fmt, "csv")) {
		json_t *rows =
		    problems ? bench_problems(b->runs, b->nruns) : bench_table(b->runs, b->nruns);
		bool comp = !strcmp(bench_opt(b, "baseline", "eager"), "compile");

		rc = rows ? CLI_OK : CLI_FAILURE;
		if (rows)
			csv(stdout, rows, problems ? problem_cols : table_cols,
			    !comp ? NULL : problems ? problem_compile_cols : table_compile_cols);
		json_decref(rows);
	} else {
		const json_t *by = json_object_get(b->spec, "stark");
		const json_t *opt = json_object_get(b->spec, "options");

		printf("bench %s: %s (%s), %zu runs; format %s, precision %s, baseline %s\n", b->id,
		       run_state_name(b->state), run_shown_reason(b->state, b->state, b->reason),
		       b->nruns, jr_str(opt, "format", "kernelbench"), jr_str(opt, "precision", "fp32"),
		       jr_str(opt, "baseline", "eager"));
		if (by)
			printf("stark: %s (commit %s)\n", jr_str(by, "release", "?"),
			       jr_str(by, "commit", "?"));
		else
			printf("stark: before 0.2.0 (the bench recorded no version)\n");
		rc = cli_bench_print(b, stdout);
		if (problems)
			print_problems(b, stdout);
	}
	bench_free(b);
	if (fflush(stdout))
		rc = CLI_FAILURE;
	return rc;
}
