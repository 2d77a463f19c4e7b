/*
 * bench.c -- the bench section of a report: a bench record's results table
 * and problem rows, checked field by field and copied (the page renders
 * exactly what is checked here), plus one curve per (level, policy): after
 * k attempts, the geometric mean over that policy's problems of the best
 * speedup found so far, where a problem keeps the reference (1.0) until a
 * correct candidate beats it.  The curves are computed from the runs'
 * attempt logs, so policies compare at a glance on one plot.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

#define BENCH_STR_MAX  256  /* bytes of a policy, problem or status name */
#define BENCH_TEXT_MAX 1024 /* bytes of a reason */

struct check {
	char *err;
	size_t errlen;
	const char *where; /* "table", "problems" */
	size_t row;
};

static int bad(struct check *c, const char *key, const char *what)
{
	snprintf(c->err, c->errlen, "bench record: %s row %zu: %s %s", c->where, c->row + 1, key,
		 what);
	return ST_EINVAL;
}

/* Copies key of row to o when it has the type wanted ("i" integer >= 0,
 * "n" number or null, "s" non-empty string, "t" text (a string of at most
 * BENCH_TEXT_MAX bytes) or null, "r" a run id); optional keys may be absent
 * (then null). */
static int take(struct check *c, const json_t *row, json_t *o, const char *key, char type,
		bool optional)
{
	json_t *v = json_object_get(row, key);

	if (!v) {
		if (!optional)
			return bad(c, key, "is missing");
		return report__set(o, key, json_null());
	}
	switch (type) {
	case 'i':
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return bad(c, key, "is not a count");
		break;
	case 'n':
		if (!json_is_null(v) && (!json_is_number(v) || !isfinite(json_number_value(v))))
			return bad(c, key, "is not a number");
		break;
	case 't':
		if (!json_is_null(v) &&
		    (!json_is_string(v) || json_string_length(v) > BENCH_TEXT_MAX))
			return bad(c, key, "is not a short text");
		break;
	case 's':
	case 'r':
		if (!json_is_string(v) || !json_string_length(v) ||
		    json_string_length(v) > BENCH_STR_MAX)
			return bad(c, key, "is not a name");
		if (type == 'r' && !store_run_id_valid(json_string_value(v)))
			return bad(c, key, "is not a valid run id");
		break;
	default:
		return ST_EINVAL;
	}
	return report__set(o, key, json_incref(v));
}

static int copy_rows(struct check *c, const json_t *rows, const char *const *keys,
		     const char *types, const char *optional, json_t **out)
{
	json_t *a = json_array(), *row;
	int rc = a ? ST_OK : ST_ENOMEM;

	*out = NULL;
	if (!json_is_array(rows) || json_array_size(rows) > REPORT_BENCH_ROWS) {
		json_decref(a);
		snprintf(c->err, c->errlen, "bench record: %s is not an array of at most %u rows",
			 c->where, REPORT_BENCH_ROWS);
		return ST_EINVAL;
	}
	json_array_foreach(rows, c->row, row)
	{
		json_t *o = json_object();

		if (!rc && (!o || !json_is_object(row)))
			rc = o ? bad(c, "row", "is not an object") : ST_ENOMEM;
		for (size_t k = 0; !rc && keys[k]; k++)
			rc = take(c, row, o, keys[k], types[k], optional[k] == '?');
		if (!rc)
			rc = report__push(a, json_incref(o));
		json_decref(o);
		if (rc)
			break;
	}
	if (rc) {
		json_decref(a);
		return rc;
	}
	*out = a;
	return ST_OK;
}

/* ---- curves ---- */

static const json_t *run_by_id(const json_t *runs, const char *id)
{
	size_t i;
	json_t *r;

	json_array_foreach(runs, i, r)
	{
		if (!strcmp(jr_str(r, "run_id", ""), id))
			return r;
	}
	return NULL;
}

/* Best speedup kept after attempt k (1-based) of a run: at least 1.0. */
static double kept_after(const json_t *run, size_t k)
{
	const json_t *log = json_object_get(run, "attempt_log");
	size_t n = json_array_size(log);
	double b;

	if (!n)
		return 1.0;
	b = jr_real(json_array_get(log, (k < n ? k : n) - 1), "best", NAN);
	return isfinite(b) && b > 1.0 ? b : 1.0;
}

static int one_curve(const json_t *problems, const json_t *runs, const json_t *level,
		     const char *policy, json_t **out)
{
	const json_t **member = calloc(json_array_size(problems) + 1, sizeof(*member));
	size_t n = 0, kmax = 0, i;
	json_t *row, *pts = json_array();
	int rc = pts && member ? ST_OK : ST_ENOMEM;

	json_array_foreach(problems, i, row)
	{
		const json_t *r;

		if (!json_equal(json_object_get(row, "level"), (json_t *)level) ||
		    strcmp(jr_str(row, "policy", ""), policy))
			continue;
		r = run_by_id(runs, jr_str(row, "run_id", ""));
		if (!r || !member)
			continue;
		member[n++] = r;
		if (json_array_size(json_object_get(r, "attempt_log")) > kmax)
			kmax = json_array_size(json_object_get(r, "attempt_log"));
	}
	for (size_t k = 1; !rc && n && k <= kmax; k++) {
		double s = 0;

		for (size_t j = 0; j < n; j++)
			s += log(kept_after(member[j], k));
		rc = report__push(pts, json_pack("[I, f]", (json_int_t)k, exp(s / (double)n)));
	}
	free(member);
	*out = rc ? NULL
		  : json_pack("{s:O, s:s, s:I, s:o}", "level", level, "policy", policy, "problems",
			      (json_int_t)n, "points", pts);
	if (rc)
		json_decref(pts);
	return *out ? ST_OK : ST_ENOMEM;
}

static int curves(const json_t *problems, const json_t *runs, json_t **out)
{
	json_t *a = json_array(), *row, *cv;
	size_t i, j;
	int rc = a ? ST_OK : ST_ENOMEM;

	json_array_foreach(problems, i, row)
	{
		bool seen = false;

		if (rc)
			break;
		json_array_foreach(a, j, cv)
		{
			seen |= json_equal(json_object_get(cv, "level"),
					   json_object_get(row, "level")) &&
				!strcmp(jr_str(cv, "policy", ""), jr_str(row, "policy", ""));
		}
		if (seen)
			continue;
		rc = one_curve(problems, runs, json_object_get(row, "level"),
			       jr_str(row, "policy", ""), &cv);
		if (!rc)
			rc = report__push(a, cv);
	}
	if (rc) {
		json_decref(a);
		a = NULL;
	}
	*out = a;
	return rc;
}

int report_bench_json(const json_t *rec, const json_t *runs, json_t **out, char *err, size_t errlen)
{
	/* the compiled baseline's figures: optional (benches before them, or
	 * --baseline eager: null) */
	static const char *const tkeys[] = {"level",
					    "policy",
					    "problems",
					    "success_rate",
					    "fast_1",
					    "mean_speedup",
					    "geomean_speedup",
					    "problems_compile",
					    "compile_unavailable",
					    "fast_1_compile",
					    "mean_speedup_compile",
					    "geomean_speedup_compile",
					    NULL};
	static const char *const pkeys[] = {"level",
					    "policy",
					    "problem",
					    "run_id",
					    "status",
					    "best_speedup",
					    "attempts",
					    "dollars",
					    "best_speedup_compile",
					    "baseline_compile_error",
					    NULL};
	struct check c = {.err = err, .errlen = errlen};
	json_t *o = NULL, *table = NULL, *probs = NULL, *cv = NULL, *row;
	size_t i;
	int rc;

	*out = NULL;
	if (!json_is_object(rec) || strcmp(jr_str(rec, "kind", ""), "bench")) {
		snprintf(err, errlen, "bench record: not an object of kind \"bench\"");
		return ST_EINVAL;
	}
	c.where = "table";
	rc = copy_rows(&c, json_object_get(rec, "table"), tkeys, "isinnnnnnnnn", "-------?????",
		       &table);
	if (!rc) {
		c.where = "problems";
		rc = copy_rows(&c, json_object_get(rec, "problems"), pkeys, "issrsninnt",
			       "----??????", &probs);
	}
	if (rc)
		goto out_fail;
	json_array_foreach(probs, i, row)
	{
		rc |= report__set(row, "missing",
				  json_boolean(!run_by_id(runs, jr_str(row, "run_id", ""))));
	}
	if (!rc)
		rc = curves(probs, runs, &cv);
	if (!rc)
		o = json_pack("{s:s, s:O, s:O, s:o, s:o, s:o}", "bench_id",
			      jr_str(rec, "bench_id", ""), "level",
			      json_is_integer(json_object_get(rec, "level"))
				  ? json_object_get(rec, "level")
				  : json_null(),
			      "created",
			      json_is_number(json_object_get(rec, "created"))
				  ? json_object_get(rec, "created")
				  : json_null(),
			      "table", table, "problems", probs, "curves", cv);
	table = probs = cv = NULL;
	if (!o) {
		rc = ST_ENOMEM;
		snprintf(err, errlen, "bench record: out of memory");
		goto out_fail;
	}
	*out = o;
	return ST_OK;
out_fail:
	json_decref(table);
	json_decref(probs);
	json_decref(cv);
	return rc;
}
