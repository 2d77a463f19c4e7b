/*
 * schema.c -- the two messages written down as tables, and the rules that
 * a struct must satisfy before it is sent or after it is received.
 *
 * Each row names a wire key, the C type it lands in, where it lives in the
 * struct, whether it is required, and its cap or range.  The encoder
 * (encode.c) writes the rows in order, the decoder (decode.c) looks keys up
 * here, and proto_check_fields() applies the same caps and ranges on both
 * sides, so a struct that encodes always decodes and a schema change is a
 * one-line edit (plus a PROTO_VERSION bump).  Releasing a message walks the
 * same rows (proto_free_fields), and so does checking one
 * (proto_request_check, proto_result_check).  Rules that relate two fields
 * live in the per-message check functions at the end.
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_int.h"

#define RQ(f) offsetof(struct proto_request, f)
#define RS(f) offsetof(struct proto_result, f)

#define ROW_U32(o, k, req, lo, hi) \
	{.key = k, .type = PF_U32, .required = req, .off = o, .min = lo, .max = hi}
#define ROW_STR(o, k, req, cap) {.key = k, .type = PF_STR, .required = req, .off = o, .max = cap}
#define ROW_TOL(o, k) \
	{.key = k, .type = PF_F64, .off = o, .dmin = 0.0, .dmax = DBL_MAX}
#define ROW_METRIC(o, k) \
	{.key = k, .type = PF_F64, .off = o, .dmin = -HUGE_VAL, .dmax = HUGE_VAL, .nan_ok = true}

static int request_check(const void *obj, char *err, size_t errlen);
static int result_check(const void *obj, char *err, size_t errlen);

static const struct proto_field request_fields[] = {
	{.key = "v", .type = PF_VERSION, .required = true, .off = RQ(v)},
	ROW_STR(RQ(id), "id", true, PROTO_NAME_MAX),
	{.key = "stage", .type = PF_STAGE, .required = true, .off = RQ(stage),
	 .min = PROTO_STAGE_COMPILE, .max = PROTO_STAGE_ALL},
	ROW_STR(RQ(device), "device", true, PROTO_NAME_MAX),
	ROW_STR(RQ(format), "format", true, PROTO_NAME_MAX),
	ROW_STR(RQ(problem_name), "problem_name", false, PROTO_PATH_MAX),
	{.key = "problem_src", .type = PF_SRC, .required = true, .off = RQ(problem_src),
	 .len_off = RQ(problem_len), .max = PROTO_SRC_MAX},
	ROW_STR(RQ(solution_name), "solution_name", false, PROTO_PATH_MAX),
	{.key = "solution_src", .type = PF_SRC, .required = true, .off = RQ(solution_src),
	 .len_off = RQ(solution_len), .max = PROTO_SRC_MAX},
	ROW_STR(RQ(cache_dir), "cache_dir", false, PROTO_PATH_MAX),
	ROW_STR(RQ(build_dir), "build_dir", false, PROTO_PATH_MAX),
	ROW_STR(RQ(jit_dir), "jit_dir", false, PROTO_PATH_MAX),
	{.key = "seed", .type = PF_U64, .required = true, .off = RQ(seed), .max = UINT64_MAX},
	ROW_U32(RQ(trials), "trials", false, 1, PROTO_TRIALS_MAX),
	ROW_U32(RQ(kb_trials), "kb_trials", false, 0, PROTO_TRIALS_MAX),
	ROW_TOL(RQ(tol_fp32.atol), "atol32"),
	ROW_TOL(RQ(tol_fp32.rtol), "rtol32"),
	ROW_TOL(RQ(tol_fp16.atol), "atol16"),
	ROW_TOL(RQ(tol_fp16.rtol), "rtol16"),
	{.key = "timing", .type = PF_BOOL, .off = RQ(timing)},
	ROW_U32(RQ(warmup), "warmup", false, 0, PROTO_WARMUP_MAX),
	ROW_U32(RQ(min_reps), "min_reps", false, 1, PROTO_REPS_MAX),
	ROW_U32(RQ(max_reps), "max_reps", false, 1, PROTO_REPS_MAX),
	ROW_U32(RQ(max_time_ms), "max_time_ms", false, 1, PROTO_TIME_MS_MAX),
	{.key = "target_rse", .type = PF_F64, .off = RQ(target_rse), .dmin = 0.0, .dmax = 1.0},
	ROW_U32(RQ(placements), "placements", false, 1, PROTO_PLACEMENTS_MAX),
	{.key = "l2_flush", .type = PF_BOOL, .off = RQ(l2_flush)},
	ROW_U32(RQ(host_mem_mib), "host_mem_mib", false, 0, PROTO_HOST_MEM_MIB_MAX),
	ROW_U32(RQ(wall_ms), "wall_ms", false, 1, PROTO_TIME_MS_MAX),
	ROW_U32(RQ(queue_ms), "queue_ms", false, 0, PROTO_TIME_MS_MAX),
	ROW_STR(RQ(verdict), "verdict", false, PROTO_NAME_MAX),
	ROW_STR(RQ(language), "language", false, PROTO_NAME_MAX),
	ROW_STR(RQ(precision), "precision", false, PROTO_NAME_MAX),
	ROW_STR(RQ(baseline), "baseline", false, PROTO_NAME_MAX),
	ROW_STR(RQ(plan), "plan", false, PROTO_PLAN_MAX),
};

static const struct proto_field result_fields[] = {
	{.key = "v", .type = PF_VERSION, .required = true, .off = RS(v)},
	ROW_STR(RS(id), "id", true, PROTO_NAME_MAX),
	{.key = "status", .type = PF_STATUS, .required = true, .off = RS(status)},
	ROW_STR(RS(message), "message", false, PROTO_MESSAGE_MAX),
	ROW_STR(RS(log), "log", false, PROTO_LOG_MAX),
	ROW_U32(RS(trials_run), "trials_run", false, 0, PROTO_TRIALS_MAX),
	ROW_U32(RS(trials_passed), "trials_passed", false, 0, PROTO_TRIALS_MAX),
	ROW_METRIC(RS(max_abs_err), "max_abs_err"),
	ROW_METRIC(RS(max_rel_err), "max_rel_err"),
	ROW_STR(RS(first_bad), "first_bad", false, PROTO_NAME_MAX),
	ROW_METRIC(RS(runtime_us), "runtime_us"),
	ROW_METRIC(RS(runtime_lo_us), "runtime_lo_us"),
	ROW_METRIC(RS(runtime_hi_us), "runtime_hi_us"),
	ROW_METRIC(RS(ref_runtime_us), "ref_runtime_us"),
	ROW_METRIC(RS(ref_lo_us), "ref_lo_us"),
	ROW_METRIC(RS(ref_hi_us), "ref_hi_us"),
	ROW_U32(RS(reps), "reps", false, 0, PROTO_REPS_MAX),
	ROW_METRIC(RS(speedup), "speedup"),
	ROW_METRIC(RS(stage_ms[0]), "startup_ms"),
	ROW_METRIC(RS(stage_ms[1]), "compile_ms"),
	ROW_METRIC(RS(stage_ms[2]), "check_ms"),
	ROW_METRIC(RS(stage_ms[3]), "time_ms"),
	{.key = "flags", .type = PF_FLAGS, .off = RS(flags)},
	{.key = "env", .type = PF_ENV, .off = RS(env)},
	ROW_STR(RS(verdict), "verdict", false, PROTO_NAME_MAX),
	ROW_STR(RS(stark_status), "stark_status", false, PROTO_NAME_MAX),
	ROW_STR(RS(stark_reason), "stark_reason", false, PROTO_REASON_MAX),
	ROW_STR(RS(kb_status), "kb_status", false, PROTO_NAME_MAX),
	ROW_STR(RS(kb_reason), "kb_reason", false, PROTO_REASON_MAX),
	ROW_U32(RS(kb_trials_run), "kb_trials_run", false, 0, PROTO_TRIALS_MAX),
	ROW_U32(RS(kb_trials_passed), "kb_trials_passed", false, 0, PROTO_TRIALS_MAX),
	ROW_METRIC(RS(kb_max_diff), "kb_max_diff"),
	ROW_METRIC(RS(ref_compile_us), "ref_compile_us"),
	ROW_METRIC(RS(ref_compile_lo_us), "ref_compile_lo_us"),
	ROW_METRIC(RS(ref_compile_hi_us), "ref_compile_hi_us"),
	ROW_METRIC(RS(speedup_compile), "speedup_compile"),
	ROW_STR(RS(baseline_compile_error), "baseline_compile_error", false, PROTO_REASON_MAX),
};

/* The decoder tracks seen keys in a 64-bit mask. */
_Static_assert(ST_ARRAY_LEN(request_fields) <= 64, "too many request fields");
_Static_assert(ST_ARRAY_LEN(result_fields) <= 64, "too many result fields");

const struct proto_schema proto_request_schema = {
	"request", request_fields, ST_ARRAY_LEN(request_fields), request_check};
const struct proto_schema proto_result_schema = {
	"result", result_fields, ST_ARRAY_LEN(result_fields), result_check};

size_t proto_src_len(const char *s, size_t len)
{
	return s && !len ? strlen(s) : len;
}

/* Text: optional non-emptiness, the cap, UTF-8.  NULL counts as "". */
static int check_text(const char *what, const char *s, uint64_t cap, bool nonempty,
		      char *err, size_t errlen)
{
	size_t n = s ? strlen(s) : 0;

	if (nonempty && !n)
		return stark_errbuf(err, errlen, ST_EINVAL, "%s: empty", what);
	if (n > cap)
		return stark_errbuf(err, errlen, ST_ETOOBIG, "%s: %zu bytes, at most %" PRIu64,
				    what, n, cap);
	if (!str_utf8_valid(s, n))
		return stark_errbuf(err, errlen, ST_EINVAL, "%s: not valid utf-8", what);
	return 0;
}

static int check_uint(const struct proto_field *f, uint64_t v, char *err, size_t errlen)
{
	if (v < f->min || v > f->max)
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "field \"%s\": %" PRIu64 " is out of range %" PRIu64
				    "..%" PRIu64,
				    f->key, v, f->min, f->max);
	return 0;
}

static int check_double(const struct proto_field *f, double v, char *err, size_t errlen)
{
	if (isnan(v))
		return f->nan_ok
			   ? 0
			   : stark_errbuf(err, errlen, ST_EINVAL, "field \"%s\": is NaN", f->key);
	if (v < f->dmin || v > f->dmax)
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "field \"%s\": %g is out of range %g..%g", f->key, v, f->dmin,
				    f->dmax);
	return 0;
}

static int check_src(const struct proto_field *f, const char *base, char *err, size_t errlen)
{
	const char *s = *(char *const *)(base + f->off);
	size_t len = *(const size_t *)(base + f->len_off);

	if (!s && len)
		return stark_errbuf(err, errlen, ST_EINVAL, "field \"%s\": length %zu without data",
				    f->key, len);
	len = proto_src_len(s, len);
	if (len > f->max)
		return stark_errbuf(err, errlen, ST_ETOOBIG,
				    "field \"%s\": %zu bytes, at most %" PRIu64, f->key, len,
				    f->max);
	return 0;
}

static int check_flags(const struct proto_result *rs, char *err, size_t errlen)
{
	char what[64];
	int rc;

	if (rs->nflags > PROTO_FLAGS_MAX)
		return stark_errbuf(err, errlen, ST_ETOOBIG,
				    "field \"flags\": %u entries, at most %d", rs->nflags,
				    PROTO_FLAGS_MAX);
	for (uint32_t i = 0; i < rs->nflags; i++) {
		snprintf(what, sizeof(what), "field \"flags\": entry %u", i);
		rc = check_text(what, rs->flags[i], PROTO_NAME_MAX, true, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

static int check_env(const struct proto_result *rs, char *err, size_t errlen)
{
	char what[64];
	int rc;

	if (rs->nenv > PROTO_ENV_MAX)
		return stark_errbuf(err, errlen, ST_ETOOBIG,
				    "field \"env\": %u entries, at most %d", rs->nenv,
				    PROTO_ENV_MAX);
	for (uint32_t i = 0; i < rs->nenv; i++) {
		const struct proto_kv *kv = &rs->env[i];

		snprintf(what, sizeof(what), "field \"env\": key %u", i);
		rc = check_text(what, kv->key, PROTO_NAME_MAX, true, err, errlen);
		if (rc)
			return rc;
		snprintf(what, sizeof(what), "field \"env\": value %u", i);
		rc = check_text(what, kv->val, PROTO_ENV_VAL_MAX, false, err, errlen);
		if (rc)
			return rc;
		for (uint32_t j = 0; j < i; j++)
			if (!strcmp(rs->env[j].key, kv->key))
				return stark_errbuf(err, errlen, ST_EINVAL,
						    "field \"env\": key %u repeats key %u", i, j);
	}
	return 0;
}

static int check_field(const struct proto_field *f, const char *base, char *err, size_t errlen)
{
	const void *p = base + f->off;
	char what[64];
	int st;

	switch (f->type) {
	case PF_VERSION:
		if (*(const uint32_t *)p != PROTO_VERSION)
			return stark_errbuf(err, errlen, ST_EINVAL, "field \"v\": %u, expected %d",
					    *(const uint32_t *)p, PROTO_VERSION);
		return 0;
	case PF_U32:
		return check_uint(f, *(const uint32_t *)p, err, errlen);
	case PF_U64:
		return check_uint(f, *(const uint64_t *)p, err, errlen);
	case PF_STAGE:
		st = (int)*(const enum proto_stage *)p;
		if (st < (int)f->min || st > (int)f->max)
			return stark_errbuf(err, errlen, ST_EINVAL,
					    "field \"%s\": %d is out of range %d..%d", f->key, st,
					    (int)f->min, (int)f->max);
		return 0;
	case PF_STATUS:
		st = (int)*(const enum proto_status *)p;
		if (st < 0 || st >= PROTO_ST_COUNT)
			return stark_errbuf(err, errlen, ST_EINVAL, "field \"%s\": %d is no status",
					    f->key, st);
		return 0;
	case PF_BOOL:
		return 0;
	case PF_F64:
		return check_double(f, *(const double *)p, err, errlen);
	case PF_STR:
		snprintf(what, sizeof(what), "field \"%s\"", f->key);
		return check_text(what, *(char *const *)p, f->max, false, err, errlen);
	case PF_SRC:
		return check_src(f, base, err, errlen);
	case PF_FLAGS:
		return check_flags((const struct proto_result *)base, err, errlen);
	case PF_ENV:
		return check_env((const struct proto_result *)base, err, errlen);
	}
	return stark_errbuf(err, errlen, ST_EINVAL, "field \"%s\": bad schema type", f->key);
}

int proto_check_fields(const struct proto_schema *s, const void *obj, char *err, size_t errlen)
{
	int rc;

	for (size_t i = 0; i < s->nfields; i++) {
		rc = check_field(&s->fields[i], obj, err, errlen);
		if (rc)
			return rc;
	}
	return s->check ? s->check(obj, err, errlen) : 0;
}

void proto_free_fields(const struct proto_schema *s, void *obj)
{
	char *base = obj;

	for (size_t i = 0; i < s->nfields; i++) {
		const struct proto_field *f = &s->fields[i];
		struct proto_result *rs = obj;

		switch (f->type) {
		case PF_SRC:
			*(size_t *)(base + f->len_off) = 0;
			/* fall through */
		case PF_STR:
			free(*(char **)(base + f->off));
			*(char **)(base + f->off) = NULL;
			break;
		case PF_FLAGS:
			for (uint32_t j = 0; j < rs->nflags && j < PROTO_FLAGS_MAX; j++)
				free(rs->flags[j]);
			rs->nflags = 0;
			break;
		case PF_ENV:
			for (uint32_t j = 0; j < rs->nenv && j < PROTO_ENV_MAX; j++) {
				free(rs->env[j].key);
				free(rs->env[j].val);
			}
			rs->nenv = 0;
			break;
		default:
			break;
		}
	}
}

void proto_request_release(struct proto_request *rq)
{
	proto_free_fields(&proto_request_schema, rq);
	proto_request_init(rq);
}

void proto_result_release(struct proto_result *rs)
{
	proto_free_fields(&proto_result_schema, rs);
	proto_result_init(rs);
}

int proto_request_check(const struct proto_request *rq, char *err, size_t errlen)
{
	return proto_check_fields(&proto_request_schema, rq, err, errlen);
}

int proto_result_check(const struct proto_result *rs, char *err, size_t errlen)
{
	return proto_check_fields(&proto_result_schema, rs, err, errlen);
}

/* "cpu", "cuda" or "cuda:N" with 1 to 3 digits. */
static bool device_valid(const char *d)
{
	size_t n;

	if (!strcmp(d, "cpu") || !strcmp(d, "cuda"))
		return true;
	if (strncmp(d, "cuda:", 5))
		return false;
	d += 5;
	n = strspn(d, "0123456789");
	return n >= 1 && n <= 3 && !d[n];
}

/* "", "stark" or "kernelbench": which verdict decides. */
static bool verdict_valid(const char *v)
{
	return !v || !*v || !strcmp(v, "stark") || !strcmp(v, "kernelbench");
}

static int check_verdict(const char *key, const char *v, char *err, size_t errlen)
{
	char q[200];

	if (verdict_valid(v))
		return 0;
	proto_quote(q, sizeof(q), v, strlen(v));
	return stark_errbuf(err, errlen, ST_EINVAL,
			  "field \"%s\": \"%s\" is not stark or kernelbench", key, q);
}

/* "" or a status name. */
static int check_status_name(const char *key, const char *v, char *err, size_t errlen)
{
	enum proto_status st;
	char q[200];

	if (!v || !*v || !proto_status_parse(v, &st))
		return 0;
	proto_quote(q, sizeof(q), v, strlen(v));
	return stark_errbuf(err, errlen, ST_EINVAL, "field \"%s\": \"%s\" is no status", key, q);
}

/* v is "" or one of the names in list (NULL-terminated). */
static int check_name(const char *key, const char *v, const char *const *list, const char *what,
		      char *err, size_t errlen)
{
	char q[200];

	if (!v || !*v)
		return 0;
	for (size_t i = 0; list[i]; i++)
		if (!strcmp(v, list[i]))
			return 0;
	proto_quote(q, sizeof(q), v, strlen(v));
	return stark_errbuf(err, errlen, ST_EINVAL, "field \"%s\": \"%s\" is not %s", key, q, what);
}

/* A line starting (after blanks) with `import triton` or `from triton`,
 * followed by a blank, a dot, a comma or the line's end. */
static bool imports_triton(const char *src, size_t len)
{
	for (size_t i = 0; i < len;) {
		size_t j = i, n;
		const char *w = NULL;

		while (j < len && (src[j] == ' ' || src[j] == '\t'))
			j++;
		if (len - j > 7 && !memcmp(src + j, "import", 6) && strchr(" \t", src[j + 6]))
			w = src + j + 7;
		else if (len - j > 5 && !memcmp(src + j, "from", 4) && strchr(" \t", src[j + 4]))
			w = src + j + 5;
		if (w) {
			n = (size_t)(w - src);
			while (n < len && (src[n] == ' ' || src[n] == '\t'))
				n++;
			if (len - n >= 6 && !memcmp(src + n, "triton", 6) &&
			    (len - n == 6 || strchr(" \t.,\r\n", src[n + 6])))
				return true;
		}
		const char *nl = memchr(src + i, '\n', len - i);
		if (!nl)
			break;
		i = (size_t)(nl - src) + 1;
	}
	return false;
}

bool proto_request_jit_exec(const struct proto_request *rq)
{
	const char *lang = rq->language ? rq->language : "";

	if (!strcmp(lang, "triton"))
		return true;
	if (*lang && strcmp(lang, "auto"))
		return false;
	return rq->solution_src &&
	       imports_triton(rq->solution_src,
			      rq->solution_len ? rq->solution_len : strlen(rq->solution_src));
}

bool proto_request_baseline_compile(const struct proto_request *rq)
{
	return rq->baseline && !strcmp(rq->baseline, "compile");
}

bool proto_request_run_exec(const struct proto_request *rq)
{
	return proto_request_jit_exec(rq) || proto_request_baseline_compile(rq);
}

const char *const proto_languages[] = {"auto", "cuda", "triton", "cute", "tilelang", "tk", NULL};
const char *const proto_precisions[] = {"fp32", "fp16", "bf16", NULL};
const char *const proto_baselines[] = {"eager", "compile", NULL};

static int request_check(const void *obj, char *err, size_t errlen)
{
	const struct proto_request *rq = obj;
	const char *device = rq->device ? rq->device : "";
	const char *format = rq->format ? rq->format : "";
	char q[200];

	if (!device_valid(device)) {
		proto_quote(q, sizeof(q), device, strlen(device));
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "field \"device\": \"%s\" is not cpu, cuda or cuda:N", q);
	}
	if (strcmp(format, "kernelbench") && strcmp(format, "fast")) {
		proto_quote(q, sizeof(q), format, strlen(format));
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "field \"format\": \"%s\" is not kernelbench or fast", q);
	}
	if (rq->min_reps > rq->max_reps)
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "field \"min_reps\": %u is above max_reps %u", rq->min_reps,
				    rq->max_reps);
	if (check_name("language", rq->language, proto_languages,
		       "auto, cuda, triton, cute, tilelang or tk", err, errlen) ||
	    check_name("precision", rq->precision, proto_precisions, "fp32, fp16 or bf16", err,
		       errlen) ||
	    check_name("baseline", rq->baseline, proto_baselines, "eager or compile", err, errlen))
		return ST_EINVAL;
	if (check_verdict("verdict", rq->verdict, err, errlen))
		return ST_EINVAL;
	if (rq->verdict && !strcmp(rq->verdict, "kernelbench") && rq->kb_trials == 0)
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "field \"kb_trials\": 0, but KernelBench's verdict decides "
				    "(\"verdict\" is \"kernelbench\")");
	return 0;
}

static int result_check(const void *obj, char *err, size_t errlen)
{
	const struct proto_result *rs = obj;
	int rc;

	if (rs->trials_passed > rs->trials_run)
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "field \"trials_passed\": %u is above trials_run %u",
				    rs->trials_passed, rs->trials_run);
	if (rs->kb_trials_passed > rs->kb_trials_run)
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "field \"kb_trials_passed\": %u is above kb_trials_run %u",
				    rs->kb_trials_passed, rs->kb_trials_run);
	rc = check_verdict("verdict", rs->verdict, err, errlen);
	if (!rc)
		rc = check_status_name("stark_status", rs->stark_status, err, errlen);
	if (!rc)
		rc = check_status_name("kb_status", rs->kb_status, err, errlen);
	return rc;
}
