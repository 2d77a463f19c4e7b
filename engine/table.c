/*
 * table.c -- a bench's results table, the figures of the STARK paper's
 * Table 1: per level x policy, the share of problems with a correct
 * candidate (success_rate), fast_p (the share whose best correct
 * candidate beats the reference by more than p: p = 1, 1.5, 2, as
 * KernelBench defines it), the mean, geometric mean and median of the
 * best correct speedup (1.0 for a problem without a correct candidate),
 * and what it cost: attempts, LLM calls, tokens and dollars per agent
 * role, evaluation seconds.  The same figures from the KernelBench
 * verdict of each result (verdicts.kernelbench) where results carry one,
 * and against the compiled reference (--baseline compile) over the
 * problems whose compiled baseline could be had.
 * Pure arithmetic over struct bench_run; no I/O.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

double bench_geomean(const double *x, size_t n)
{
	double s = 0;

	if (!n)
		return 1.0;
	for (size_t i = 0; i < n; i++)
		s += log(x[i]);
	return exp(s / (double)n);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *x, size_t n)
{
	if (!n)
		return 1.0;
	qsort(x, n, sizeof(*x), cmp_double);
	return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

double bench_fast_p(const double *best, const bool *correct, size_t n, double p)
{
	size_t k = 0;

	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		k += correct[i] && best[i] > p;
	return (double)k / (double)n;
}

/* The compiled baseline's figures of a row (engine.h: bench_table) into
 * o; nulls where no run of the row asked for it. */
static int row_compile(json_t *o, const struct bench_run *runs, const size_t *idx, size_t n)
{
	static const char *const keys[] = {"problems_compile",	      "compile_unavailable",
					   "fast_1_compile",	      "fast_1_5_compile",
					   "fast_2_compile",	      "mean_speedup_compile",
					   "geomean_speedup_compile", "median_speedup_compile"};
	double *best = calloc(n + 1, sizeof(*best)), sum = 0, v[ST_ARRAY_LEN(keys)];
	bool *ok = calloc(n + 1, sizeof(*ok)), asked = false;
	size_t k = 0, gone = 0;
	int rc = ST_ENOMEM;

	if (!best || !ok)
		goto out;
	for (size_t j = 0; j < n; j++) {
		const struct bench_run *r = &runs[idx[j]];

		asked |= r->compile_asked;
		if (r->compile_state == 0) {
			gone++;
			continue;
		}
		ok[k] = r->compile_state > 0 && isfinite(r->best_compile);
		best[k] = ok[k] ? r->best_compile : 1.0;
		sum += best[k++];
	}
	v[0] = (double)k;
	v[1] = (double)gone;
	v[2] = bench_fast_p(best, ok, k, 1.0);
	v[3] = bench_fast_p(best, ok, k, 1.5);
	v[4] = bench_fast_p(best, ok, k, 2.0);
	v[5] = k ? sum / (double)k : 1.0;
	v[6] = bench_geomean(best, k);
	v[7] = bench_median(best, k); /* sorts best: last */
	rc = ST_OK;
	for (size_t i = 0; !rc && i < ST_ARRAY_LEN(keys); i++)
		if (json_object_set_new(o, keys[i],
					!asked	? json_null()
					: i < 2 ? json_integer((json_int_t)v[i])
						: json_real(v[i])))
			rc = ST_ENOMEM;
out:
	free(best);
	free(ok);
	return rc;
}

/* The figures of one row, over runs[idx[0..n)]. */
static json_t *row(const struct bench_run *runs, const size_t *idx, size_t n)
{
	double *best = calloc(n + 1, sizeof(*best)), *kbb = calloc(n + 1, sizeof(*kbb));
	bool *ok = calloc(n + 1, sizeof(*ok)), *kbok = calloc(n + 1, sizeof(*kbok));
	struct run_spend roles[ROLE_COUNT];
	double sum = 0, gpu = 0, dollars = 0, success, geo, med;
	uint64_t attempts = 0, calls = 0;
	size_t nok = 0, nkb = 0, nkbok = 0;
	json_t *o = NULL, *spend;

	memset(roles, 0, sizeof(roles));
	if (!best || !ok || !kbb || !kbok)
		goto out;
	for (size_t j = 0; j < n; j++) {
		const struct bench_run *r = &runs[idx[j]];

		ok[j] = isfinite(r->best);
		best[j] = ok[j] ? r->best : 1.0;
		nok += ok[j];
		sum += best[j];
		attempts += r->attempts;
		calls += r->llm_calls;
		gpu += r->gpu_seconds;
		if (r->kb_correct >= 0) {
			nkb++;
			kbok[j] = r->kb_correct > 0;
			nkbok += kbok[j];
		}
		kbb[j] = kbok[j] && isfinite(r->kb_best) ? r->kb_best : 1.0;
		for (int k = 0; k < ROLE_COUNT; k++) {
			roles[k].calls += r->spend[k].calls;
			roles[k].tokens_in += r->spend[k].tokens_in;
			roles[k].tokens_out += r->spend[k].tokens_out;
			roles[k].dollars += r->spend[k].dollars;
			dollars += r->spend[k].dollars;
		}
	}
	success = n ? (double)nok / (double)n : 0;
	geo = bench_geomean(best, n);
	o = json_pack("{s:i, s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:f, s:f}", "level",
		      runs[idx[0]].level, "policy", search_policy_name(runs[idx[0]].policy),
		      "problems", (json_int_t)n, "success_rate", success, "fast_1",
		      bench_fast_p(best, ok, n, 1.0), "fast_1_5", bench_fast_p(best, ok, n, 1.5),
		      "fast_2", bench_fast_p(best, ok, n, 2.0), "mean_speedup",
		      n ? sum / (double)n : 1.0, "geomean_speedup", geo, "attempts",
		      (json_int_t)attempts, "llm_calls", (json_int_t)calls, "dollars", dollars,
		      "gpu_seconds", gpu);
	med = bench_median(best, n); /* sorts best: after every other use */
	spend = json_object();
	if (!o || !spend || json_object_set_new(o, "median_speedup", json_real(med)) ||
	    json_object_set_new(o, "success_rate_kernelbench",
				nkb ? json_real((double)nkbok / (double)n) : json_null()) ||
	    json_object_set_new(o, "fast_1_kernelbench",
				nkb ? json_real(bench_fast_p(kbb, kbok, n, 1.0)) : json_null()) ||
	    row_compile(o, runs, idx, n)) {
		json_decref(spend);
		json_decref(o);
		o = NULL;
		goto out;
	}
	for (int k = 0; k < ROLE_COUNT; k++) {
		if (!roles[k].calls)
			continue;
		json_object_set_new(
		    spend, search_role_name((enum search_role)k),
		    json_pack("{s:I, s:I, s:I, s:f}", "calls", (json_int_t)roles[k].calls,
			      "tokens_in", (json_int_t)roles[k].tokens_in, "tokens_out",
			      (json_int_t)roles[k].tokens_out, "dollars", roles[k].dollars));
	}
	json_object_set_new(o, "spend", spend);
out:
	free(best);
	free(ok);
	free(kbb);
	free(kbok);
	return o;
}

json_t *bench_table(const struct bench_run *runs, size_t n)
{
	size_t *idx = calloc(n + 1, sizeof(*idx));
	bool *seen = calloc(n + 1, sizeof(*seen));
	json_t *t = json_array();

	for (size_t i = 0; t && idx && seen && i < n; i++) {
		size_t k = 0;
		json_t *o;

		if (seen[i])
			continue;
		for (size_t j = i; j < n; j++) {
			if (runs[j].level != runs[i].level || runs[j].policy != runs[i].policy)
				continue;
			seen[j] = true;
			idx[k++] = j;
		}
		o = row(runs, idx, k);
		if (!o || json_array_append_new(t, o)) {
			json_decref(t);
			t = NULL;
		}
	}
	if (!idx || !seen) {
		json_decref(t);
		t = NULL;
	}
	free(idx);
	free(seen);
	return t;
}

json_t *bench_problems(const struct bench_run *runs, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++) {
		const struct bench_run *r = &runs[i];
		double usd = 0;
		json_t *o;

		for (int k = 0; k < ROLE_COUNT; k++)
			usd += r->spend[k].dollars;
		o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:o, s:I, s:f, s:I, s:f, s:o, s:o}",
			      "level", r->level, "policy", search_policy_name(r->policy), "problem",
			      r->problem, "run_id", r->run_id, "status",
			      isfinite(r->best)		 ? "correct"
			      : r->state == RUN_FINISHED ? "no_correct"
							 : run_state_name(r->state),
			      "best_speedup", jr_real_new(r->best), "attempts",
			      (json_int_t)r->attempts, "dollars", usd, "llm_calls",
			      (json_int_t)r->llm_calls, "gpu_seconds", r->gpu_seconds,
			      "best_speedup_compile", jr_real_new(r->best_compile),
			      "baseline_compile_error",
			      r->compile_state == 0 ? json_string(r->compile_why) : json_null());
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}
