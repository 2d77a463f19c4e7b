/*
 * test_proto.c -- unit tests for proto/: round trips of both messages with
 * every field, defaults, NaN, the setters, framing over pipes and through
 * the incremental framer, and a large set of malformed bodies (truncated at
 * every offset, huge headers, wrong types for every field, unknown,
 * duplicate and missing keys, out-of-range values, bad text, nested bombs).
 *
 * Malformed input is written by a tiny msgpack writer below rather than by
 * msgpack-c, so tests can produce exactly the bytes a hostile peer would
 * (non-minimal forms, lying headers).  The seed corpus in
 * tests/proto-corpus/ (also the fuzzer's seeds) is written by
 *	test_proto --write-corpus tests/proto-corpus
 * and checked by the corpus test: files named ok-request-* and ok-result-*
 * must decode as that message, bad-* must fail as both, stream-ok-* must
 * split into frames that all decode, stream-bad-* must not.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/proto.h"

#define ERRLEN 512

/* ---- a tiny msgpack writer for building hostile input ---- */

static void w_raw(struct dbuf *b, const void *p, size_t n)
{
	ck_assert_int_eq(dbuf_append(b, p, n), 0);
}

static void w_byte(struct dbuf *b, unsigned c)
{
	unsigned char x = (unsigned char)c;

	w_raw(b, &x, 1);
}

static void w_be(struct dbuf *b, uint64_t v, int width)
{
	for (int i = width - 1; i >= 0; i--)
		w_byte(b, (unsigned)(v >> (8 * i)) & 0xff);
}

static void w_uint(struct dbuf *b, uint64_t v)
{
	if (v <= 0x7f) {
		w_byte(b, (unsigned)v);
	} else if (v <= 0xff) {
		w_byte(b, 0xcc);
		w_be(b, v, 1);
	} else if (v <= 0xffff) {
		w_byte(b, 0xcd);
		w_be(b, v, 2);
	} else if (v <= 0xffffffff) {
		w_byte(b, 0xce);
		w_be(b, v, 4);
	} else {
		w_byte(b, 0xcf);
		w_be(b, v, 8);
	}
}

/* A container or string header: fix form, then 8-bit (if any), 16, 32. */
static void w_hdr(struct dbuf *b, uint64_t n, unsigned fix, uint64_t fixmax, unsigned c8,
		  unsigned c16, unsigned c32)
{
	if (n <= fixmax) {
		w_byte(b, fix | (unsigned)n);
	} else if (c8 && n <= 0xff) {
		w_byte(b, c8);
		w_be(b, n, 1);
	} else if (n <= 0xffff) {
		w_byte(b, c16);
		w_be(b, n, 2);
	} else {
		w_byte(b, c32);
		w_be(b, n, 4);
	}
}

static void w_map(struct dbuf *b, uint64_t n)
{
	w_hdr(b, n, 0x80, 15, 0, 0xde, 0xdf);
}

static void w_arr(struct dbuf *b, uint64_t n)
{
	w_hdr(b, n, 0x90, 15, 0, 0xdc, 0xdd);
}

static void w_strn(struct dbuf *b, const void *s, size_t n)
{
	w_hdr(b, n, 0xa0, 31, 0xd9, 0xda, 0xdb);
	w_raw(b, s, n);
}

static void w_str(struct dbuf *b, const char *s)
{
	w_strn(b, s, strlen(s));
}

static void w_binn(struct dbuf *b, const void *s, size_t n)
{
	w_hdr(b, n, 0xc4, 0, 0xc4, 0xc5, 0xc6); /* no fix form: n=0 is c4 00 */
	w_raw(b, s, n);
}

static void w_f64(struct dbuf *b, double d)
{
	uint64_t bits;

	memcpy(&bits, &d, sizeof(bits));
	w_byte(b, 0xcb);
	w_be(b, bits, 8);
}

/* A string of n copies of c. */
static void w_fill(struct dbuf *b, size_t n, char c)
{
	char *s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	memset(s, c, n);
	w_strn(b, s, n);
	free(s);
}

static void big_init(struct dbuf *b)
{
	dbuf_init(b, 128u << 20);
}

/* ---- messages as key lists, so tests can vary one key at a time ---- */

enum kind { K_VERSION, K_UINT, K_U64, K_F64, K_BOOL, K_STR, K_SRC, K_STATUS, K_FLAGS, K_ENV };

struct key {
	const char *key;
	enum kind kind;
	bool required;
	uint64_t u;    /* K_UINT/K_U64 valid value */
	const char *s; /* K_STR/K_SRC/K_STATUS valid value */
	double d;      /* K_F64 valid value */
};

static const struct key rq_keys[] = {
	{"v", K_VERSION, true, 1, NULL, 0},
	{"id", K_STR, true, 0, "job-1", 0},
	{"stage", K_UINT, true, 2, NULL, 0},
	{"device", K_STR, true, 0, "cuda:1", 0},
	{"format", K_STR, true, 0, "fast", 0},
	{"problem_name", K_STR, false, 0, "p.py", 0},
	{"problem_src", K_SRC, true, 0, "class Model: pass\n", 0},
	{"solution_name", K_STR, false, 0, "s.py", 0},
	{"solution_src", K_SRC, true, 0, "class ModelNew: pass\n", 0},
	{"cache_dir", K_STR, false, 0, "/cache", 0},
	{"build_dir", K_STR, false, 0, "/cache/scratch/1-a", 0},
	{"jit_dir", K_STR, false, 0, "/cache/scratch/1-b", 0},
	{"seed", K_U64, true, 0x123456789abcdefULL, NULL, 0},
	{"trials", K_UINT, false, 7, NULL, 0},
	{"kb_trials", K_UINT, false, 2, NULL, 0},
	{"atol32", K_F64, false, 0, NULL, 1e-3},
	{"rtol32", K_F64, false, 0, NULL, 2e-3},
	{"atol16", K_F64, false, 0, NULL, 3e-2},
	{"rtol16", K_F64, false, 0, NULL, 4e-2},
	{"timing", K_BOOL, false, 0, NULL, 0},
	{"warmup", K_UINT, false, 9, NULL, 0},
	{"min_reps", K_UINT, false, 11, NULL, 0},
	{"max_reps", K_UINT, false, 300, NULL, 0},
	{"max_time_ms", K_UINT, false, 70000, NULL, 0},
	{"target_rse", K_F64, false, 0, NULL, 0.05},
	{"placements", K_UINT, false, 3, NULL, 0},
	{"l2_flush", K_BOOL, false, 0, NULL, 0},
	{"host_mem_mib", K_UINT, false, 2048, NULL, 0},
	{"wall_ms", K_UINT, false, 123456, NULL, 0},
	{"verdict", K_STR, false, 0, "kernelbench", 0},
	{"baseline", K_STR, false, 0, "compile", 0},
};
#define N_RQ ((int)ST_ARRAY_LEN(rq_keys))

static const struct key rs_keys[] = {
	{"v", K_VERSION, true, 1, NULL, 0},
	{"id", K_STR, true, 0, "job-1", 0},
	{"status", K_STATUS, true, 0, "incorrect", 0},
	{"message", K_STR, false, 0, "output differs", 0},
	{"log", K_STR, false, 0, "Traceback...", 0},
	{"trials_run", K_UINT, false, 5, NULL, 0},
	{"trials_passed", K_UINT, false, 4, NULL, 0},
	{"max_abs_err", K_F64, false, 0, NULL, 0.5},
	{"max_rel_err", K_F64, false, 0, NULL, 0.25},
	{"first_bad", K_STR, false, 0, "[3, 17]", 0},
	{"runtime_us", K_F64, false, 0, NULL, 10},
	{"runtime_lo_us", K_F64, false, 0, NULL, 9},
	{"runtime_hi_us", K_F64, false, 0, NULL, 11},
	{"ref_runtime_us", K_F64, false, 0, NULL, 20},
	{"ref_lo_us", K_F64, false, 0, NULL, 19},
	{"ref_hi_us", K_F64, false, 0, NULL, 21},
	{"reps", K_UINT, false, 100, NULL, 0},
	{"speedup", K_F64, false, 0, NULL, 2},
	{"startup_ms", K_F64, false, 0, NULL, 1},
	{"compile_ms", K_F64, false, 0, NULL, 2},
	{"check_ms", K_F64, false, 0, NULL, 3},
	{"time_ms", K_F64, false, 0, NULL, 4},
	{"flags", K_FLAGS, false, 0, NULL, 0},
	{"env", K_ENV, false, 0, NULL, 0},
	{"verdict", K_STR, false, 0, "stark", 0},
	{"stark_status", K_STR, false, 0, "incorrect", 0},
	{"stark_reason", K_STR, false, 0, "output 0 differs", 0},
	{"kb_status", K_STR, false, 0, "correct", 0},
	{"kb_reason", K_STR, false, 0, "5 of 5 trials within torch.allclose", 0},
	{"kb_trials_run", K_UINT, false, 5, NULL, 0},
	{"kb_trials_passed", K_UINT, false, 5, NULL, 0},
	{"kb_max_diff", K_F64, false, 0, NULL, 8e-5},
	{"ref_compile_us", K_F64, false, 0, NULL, 15},
	{"ref_compile_lo_us", K_F64, false, 0, NULL, 14},
	{"ref_compile_hi_us", K_F64, false, 0, NULL, 16},
	{"speedup_compile", K_F64, false, 0, NULL, 1.5},
	{"baseline_compile_error", K_STR, false, 0, "torch.compile raised BackendCompilerFailed", 0},
};
#define N_RS ((int)ST_ARRAY_LEN(rs_keys))

static void put_valid(struct dbuf *b, const struct key *k)
{
	switch (k->kind) {
	case K_VERSION:
	case K_UINT:
	case K_U64:
		w_uint(b, k->u);
		break;
	case K_F64:
		w_f64(b, k->d);
		break;
	case K_BOOL:
		w_byte(b, 0xc2);
		break;
	case K_STR:
	case K_SRC:
	case K_STATUS:
		w_str(b, k->s);
		break;
	case K_FLAGS:
		w_arr(b, 2);
		w_str(b, "side_stream");
		w_str(b, "slow_ref");
		break;
	case K_ENV:
		w_map(b, 2);
		w_str(b, "gpu");
		w_str(b, "H100");
		w_str(b, "torch");
		w_str(b, "2.11");
		break;
	}
}

/* How build() departs from a valid message. */
struct variant {
	int skip;		       /* key left out, or -1 */
	int replace;		       /* key whose value replace_fn writes, or -1 */
	void (*replace_fn)(struct dbuf *b);
	int dup;		       /* key written twice, or -1 */
	const char *extra;	       /* unknown key appended, or NULL */
	bool trailing;		       /* a nil after the map */
	bool required_only;	       /* leave out optional keys */
};
#define V0 {-1, -1, NULL, -1, NULL, false, false}

static void build(struct dbuf *b, const struct key *keys, int n, const struct variant *v)
{
	int count = 0;

	for (int i = 0; i < n; i++)
		if (i != v->skip && (!v->required_only || keys[i].required))
			count++;
	w_map(b, (uint64_t)count + (v->dup >= 0) + (v->extra != NULL));
	for (int i = 0; i < n; i++) {
		if (i == v->skip || (v->required_only && !keys[i].required))
			continue;
		w_str(b, keys[i].key);
		if (i == v->replace)
			v->replace_fn(b);
		else
			put_valid(b, &keys[i]);
		if (i == v->dup) {
			w_str(b, keys[i].key);
			put_valid(b, &keys[i]);
		}
	}
	if (v->extra) {
		w_str(b, v->extra);
		w_uint(b, 1);
	}
	if (v->trailing)
		w_byte(b, 0xc0);
}

static int dec_rq(const void *p, size_t n, char *err)
{
	struct proto_request rq;
	int rc = proto_request_decode(p, n, &rq, err, ERRLEN);

	proto_request_release(&rq);
	return rc;
}

static int dec_rs(const void *p, size_t n, char *err)
{
	struct proto_result rs;
	int rc = proto_result_decode(p, n, &rs, err, ERRLEN);

	proto_result_release(&rs);
	return rc;
}

/* Builds a request variant and returns the decoder's code; err gets the message. */
static int try_rq(const struct variant *v, char *err)
{
	struct dbuf b;
	int rc;

	big_init(&b);
	build(&b, rq_keys, N_RQ, v);
	rc = dec_rq(b.p, b.len, err);
	dbuf_release(&b);
	return rc;
}

static int try_rs(const struct variant *v, char *err)
{
	struct dbuf b;
	int rc;

	big_init(&b);
	build(&b, rs_keys, N_RS, v);
	rc = dec_rs(b.p, b.len, err);
	dbuf_release(&b);
	return rc;
}

static int key_index(const struct key *keys, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(keys[i].key, name))
			return i;
	ck_abort_msg("no key %s", name);
	return -1;
}

/* The replacement value for the next build(), set by the test. */
static struct dbuf g_val;

static void put_g_val(struct dbuf *b)
{
	w_raw(b, g_val.p, g_val.len);
}

/* Decodes a request/result whose key `name` has the raw value in g_val. */
static int rq_with(const char *name, char *err)
{
	struct variant v = V0;

	v.replace = key_index(rq_keys, N_RQ, name);
	v.replace_fn = put_g_val;
	return try_rq(&v, err);
}

static int rs_with(const char *name, char *err)
{
	struct variant v = V0;

	v.replace = key_index(rs_keys, N_RS, name);
	v.replace_fn = put_g_val;
	return try_rs(&v, err);
}

static void gv_reset(void)
{
	dbuf_release(&g_val);
	big_init(&g_val);
}

#define EXPECT_BAD(call, code, needle)                                              \
	do {                                                                        \
		char err_[ERRLEN] = "";                                             \
		int rc_ = call(needle, err_);                                       \
		ck_assert_msg(rc_ == (code), "%s: rc %d, want %d (%s)", needle, rc_, \
			      code, err_);                                          \
		ck_assert_msg(strstr(err_, needle), "%s: message \"%s\"", needle, err_); \
	} while (0)

/* ---- full structs ---- */

static void fill_request(struct proto_request *rq)
{
	static const char src[] = "import torch\n\0binary\xff tail";

	proto_request_init(rq);
	rq->id = strdup("job-42");
	rq->stage = PROTO_STAGE_RUN;
	rq->device = strdup("cuda:3");
	rq->format = strdup("fast");
	rq->problem_name = strdup("level1/19_ReLU.py");
	rq->problem_src = malloc(sizeof(src));
	memcpy(rq->problem_src, src, sizeof(src));
	rq->problem_len = sizeof(src) - 1;
	rq->solution_name = strdup("cand \xc3\xa9.py");
	rq->solution_src = strdup("class ModelNew: pass\n");
	rq->cache_dir = strdup("/var/cache/stark");
	rq->build_dir = strdup("/var/cache/stark/scratch/7-abcdef");
	rq->jit_dir = strdup("/var/cache/stark/scratch/7-fedcba");
	rq->seed = UINT64_MAX;
	rq->trials = PROTO_TRIALS_MAX;
	rq->kb_trials = 3;
	rq->tol_fp32 = (struct proto_tolerance){1.5e-5, 2.5e-5};
	rq->tol_fp16 = (struct proto_tolerance){0.0, 0.125};
	rq->timing = false;
	rq->warmup = 17;
	rq->min_reps = 9;
	rq->max_reps = 99999;
	rq->max_time_ms = 4321;
	rq->target_rse = 0.005;
	rq->placements = PROTO_PLACEMENTS_MAX;
	rq->l2_flush = false;
	rq->host_mem_mib = PROTO_HOST_MEM_MIB_MAX;
	rq->wall_ms = PROTO_TIME_MS_MAX;
	rq->verdict = strdup("kernelbench");
	rq->baseline = strdup("compile");
}

static void fill_result(struct proto_result *rs)
{
	char k[32], v[32];

	proto_result_init(rs);
	rs->id = strdup("job-42");
	rs->status = PROTO_ST_RUNTIME_ERROR;
	ck_assert_int_eq(proto_result_set_message(rs, "raised %s at trial %d", "ValueError", 3), 0);
	ck_assert_int_eq(proto_result_set_log(rs, "Traceback (most recent call last):\n", 35), 0);
	rs->trials_run = 5;
	rs->trials_passed = 2;
	rs->max_abs_err = 0.75;
	rs->max_rel_err = INFINITY;
	rs->first_bad = strdup("[3, 17]");
	rs->runtime_us = 12.5;
	rs->runtime_lo_us = 12.0;
	rs->runtime_hi_us = 13.0;
	rs->ref_runtime_us = 25.0;
	rs->ref_lo_us = -0.0;
	rs->ref_hi_us = 26.0;
	rs->reps = 1000;
	rs->speedup = 2.0;
	for (int i = 0; i < 4; i++)
		rs->stage_ms[i] = 100.0 * (i + 1);
	for (int i = 0; i < PROTO_FLAGS_MAX; i++) {
		snprintf(k, sizeof(k), "flag_%d", i);
		ck_assert_int_eq(proto_result_add_flag(rs, k), 0);
	}
	for (int i = 0; i < PROTO_ENV_MAX; i++) {
		snprintf(k, sizeof(k), "key%d", i);
		snprintf(v, sizeof(v), "value %d \xe2\x82\xac", i);
		ck_assert_int_eq(proto_result_add_env(rs, k, v), 0);
	}
	rs->verdict = strdup("kernelbench");
	rs->stark_status = strdup("incorrect");
	rs->stark_reason = strdup("output 0 differs (trial 1 of 5): its RMS error is 100% of its RMS");
	rs->kb_status = strdup("runtime_error");
	rs->kb_reason = strdup("trial 2: the candidate raised ValueError \xe2\x80\x94 bad");
	rs->kb_trials_run = 2;
	rs->kb_trials_passed = 1;
	rs->kb_max_diff = 1.25e-4;
	rs->ref_compile_us = 18.5;
	rs->ref_compile_lo_us = 18.0;
	rs->ref_compile_hi_us = INFINITY;
	rs->speedup_compile = 1.48;
	rs->baseline_compile_error = strdup("");
}

static void same_double(double a, double b, const char *what)
{
	ck_assert_msg(!memcmp(&a, &b, sizeof(a)), "%s: %g != %g", what, a, b);
}

static void same_request(const struct proto_request *a, const struct proto_request *b)
{
	ck_assert_uint_eq(a->v, b->v);
	ck_assert_str_eq(a->id, b->id);
	ck_assert_int_eq(a->stage, b->stage);
	ck_assert_str_eq(a->device, b->device);
	ck_assert_str_eq(a->format, b->format);
	ck_assert_str_eq(a->problem_name, b->problem_name);
	ck_assert_uint_eq(a->problem_len, b->problem_len);
	ck_assert_mem_eq(a->problem_src, b->problem_src, a->problem_len);
	ck_assert_str_eq(a->solution_name, b->solution_name);
	ck_assert_uint_eq(a->solution_len ? a->solution_len : strlen(a->solution_src),
			  b->solution_len ? b->solution_len : strlen(b->solution_src));
	ck_assert_str_eq(a->solution_src, b->solution_src);
	ck_assert_str_eq(a->cache_dir, b->cache_dir);
	ck_assert_str_eq(a->build_dir ? a->build_dir : "", b->build_dir ? b->build_dir : "");
	ck_assert_str_eq(a->jit_dir ? a->jit_dir : "", b->jit_dir ? b->jit_dir : "");
	ck_assert_uint_eq(a->seed, b->seed);
	ck_assert_uint_eq(a->trials, b->trials);
	same_double(a->tol_fp32.atol, b->tol_fp32.atol, "atol32");
	same_double(a->tol_fp32.rtol, b->tol_fp32.rtol, "rtol32");
	same_double(a->tol_fp16.atol, b->tol_fp16.atol, "atol16");
	same_double(a->tol_fp16.rtol, b->tol_fp16.rtol, "rtol16");
	ck_assert_int_eq(a->timing, b->timing);
	ck_assert_uint_eq(a->warmup, b->warmup);
	ck_assert_uint_eq(a->kb_trials, b->kb_trials);
	ck_assert_uint_eq(a->min_reps, b->min_reps);
	ck_assert_uint_eq(a->max_reps, b->max_reps);
	ck_assert_uint_eq(a->max_time_ms, b->max_time_ms);
	same_double(a->target_rse, b->target_rse, "target_rse");
	ck_assert_uint_eq(a->placements, b->placements);
	ck_assert_int_eq(a->l2_flush, b->l2_flush);
	ck_assert_uint_eq(a->host_mem_mib, b->host_mem_mib);
	ck_assert_uint_eq(a->wall_ms, b->wall_ms);
	ck_assert_str_eq(a->verdict ? a->verdict : "", b->verdict);
	ck_assert_str_eq(a->baseline ? a->baseline : "", b->baseline);
}

static void same_result(const struct proto_result *a, const struct proto_result *b)
{
	ck_assert_uint_eq(a->v, b->v);
	ck_assert_str_eq(a->id, b->id);
	ck_assert_int_eq(a->status, b->status);
	ck_assert_str_eq(a->message ? a->message : "", b->message);
	ck_assert_str_eq(a->log ? a->log : "", b->log);
	ck_assert_uint_eq(a->trials_run, b->trials_run);
	ck_assert_uint_eq(a->trials_passed, b->trials_passed);
	same_double(a->max_abs_err, b->max_abs_err, "max_abs_err");
	same_double(a->max_rel_err, b->max_rel_err, "max_rel_err");
	ck_assert_str_eq(a->first_bad ? a->first_bad : "", b->first_bad);
	same_double(a->runtime_us, b->runtime_us, "runtime_us");
	same_double(a->runtime_lo_us, b->runtime_lo_us, "runtime_lo_us");
	same_double(a->runtime_hi_us, b->runtime_hi_us, "runtime_hi_us");
	same_double(a->ref_runtime_us, b->ref_runtime_us, "ref_runtime_us");
	same_double(a->ref_lo_us, b->ref_lo_us, "ref_lo_us");
	same_double(a->ref_hi_us, b->ref_hi_us, "ref_hi_us");
	ck_assert_uint_eq(a->reps, b->reps);
	same_double(a->speedup, b->speedup, "speedup");
	for (int i = 0; i < 4; i++)
		same_double(a->stage_ms[i], b->stage_ms[i], "stage_ms");
	ck_assert_uint_eq(a->nflags, b->nflags);
	for (uint32_t i = 0; i < a->nflags; i++)
		ck_assert_str_eq(a->flags[i], b->flags[i]);
	ck_assert_uint_eq(a->nenv, b->nenv);
	for (uint32_t i = 0; i < a->nenv; i++) {
		ck_assert_str_eq(a->env[i].key, b->env[i].key);
		ck_assert_str_eq(a->env[i].val, b->env[i].val);
	}
	ck_assert_str_eq(a->verdict ? a->verdict : "", b->verdict);
	ck_assert_str_eq(a->stark_status ? a->stark_status : "", b->stark_status);
	ck_assert_str_eq(a->stark_reason ? a->stark_reason : "", b->stark_reason);
	ck_assert_str_eq(a->kb_status ? a->kb_status : "", b->kb_status);
	ck_assert_str_eq(a->kb_reason ? a->kb_reason : "", b->kb_reason);
	ck_assert_uint_eq(a->kb_trials_run, b->kb_trials_run);
	ck_assert_uint_eq(a->kb_trials_passed, b->kb_trials_passed);
	same_double(a->kb_max_diff, b->kb_max_diff, "kb_max_diff");
	same_double(a->ref_compile_us, b->ref_compile_us, "ref_compile_us");
	same_double(a->ref_compile_lo_us, b->ref_compile_lo_us, "ref_compile_lo_us");
	same_double(a->ref_compile_hi_us, b->ref_compile_hi_us, "ref_compile_hi_us");
	same_double(a->speedup_compile, b->speedup_compile, "speedup_compile");
	ck_assert_str_eq(a->baseline_compile_error ? a->baseline_compile_error : "",
			 b->baseline_compile_error);
}

/* Frame -> body helpers for encoder output. */
static const void *body_of(const struct dbuf *f)
{
	return f->p + PROTO_PREFIX_LEN;
}

static size_t len_of(const struct dbuf *f)
{
	ck_assert_uint_ge(f->len, PROTO_PREFIX_LEN);
	return f->len - PROTO_PREFIX_LEN;
}

/* ---- round trips ---- */

START_TEST(request_round_trip)
{
	struct proto_request a, b;
	struct dbuf f1, f2;
	char err[ERRLEN] = "";

	fill_request(&a);
	big_init(&f1);
	big_init(&f2);
	ck_assert_int_eq(proto_request_encode(&a, &f1), 0);
	ck_assert_int_eq(proto_request_decode(body_of(&f1), len_of(&f1), &b, err, ERRLEN), 0);
	same_request(&a, &b);
	ck_assert_int_eq(proto_request_encode(&b, &f2), 0);
	ck_assert_uint_eq(f1.len, f2.len);
	ck_assert_mem_eq(f1.p, f2.p, f1.len);
	/* a result decoder refuses a request */
	ck_assert_int_eq(dec_rs(body_of(&f1), len_of(&f1), err), ST_EPROTO);
	proto_request_release(&a);
	proto_request_release(&b);
	proto_request_release(&b); /* twice is harmless */
	dbuf_release(&f1);
	dbuf_release(&f2);
}
END_TEST

START_TEST(result_round_trip)
{
	struct proto_result a, b;
	struct dbuf f1, f2;
	char err[ERRLEN] = "";

	fill_result(&a);
	big_init(&f1);
	big_init(&f2);
	ck_assert_int_eq(proto_result_encode(&a, &f1), 0);
	ck_assert_int_eq(proto_result_decode(body_of(&f1), len_of(&f1), &b, err, ERRLEN), 0);
	same_result(&a, &b);
	ck_assert_int_eq(proto_result_encode(&b, &f2), 0);
	ck_assert_mem_eq(f1.p, f2.p, f1.len);
	ck_assert_int_eq(dec_rq(body_of(&f1), len_of(&f1), err), ST_EPROTO);
	proto_result_release(&a);
	proto_result_release(&b);
	dbuf_release(&f1);
	dbuf_release(&f2);
}
END_TEST

START_TEST(nan_round_trip)
{
	struct proto_result a, b;
	struct dbuf f;
	double payload;
	uint64_t bits = 0x7ff8000000000abcULL; /* a quiet NaN with a payload */
	char err[ERRLEN] = "";

	memcpy(&payload, &bits, sizeof(payload));
	proto_result_init(&a);
	a.id = strdup("n");
	a.status = PROTO_ST_CORRECT;
	a.speedup = payload;
	a.runtime_us = -NAN;
	a.ref_runtime_us = -INFINITY;
	big_init(&f);
	ck_assert_int_eq(proto_result_encode(&a, &f), 0);
	ck_assert_int_eq(proto_result_decode(body_of(&f), len_of(&f), &b, err, ERRLEN), 0);
	ck_assert(isnan(b.max_abs_err) && isnan(b.stage_ms[3]));
	same_result(&a, &b);
	proto_result_release(&a);
	proto_result_release(&b);
	dbuf_release(&f);
}
END_TEST

/* Which run jails allow exec for a JIT: Triton declared, or auto and a line
 * importing triton; never a mention elsewhere, another language, or a
 * module whose name only starts with triton. */
START_TEST(request_jit_exec)
{
	static const struct {
		const char *lang, *src;
		bool want;
	} cases[] = {
	    {"triton", "x = 1\n", true},
	    {"auto", "import torch\nimport triton\n", true},
	    {"", "import triton.language as tl\n", true},
	    {NULL, "from triton import jit\n", true},
	    {"auto", "def f():\n    import triton\n", true},
	    {"auto", "import triton", true},
	    {"auto", "import triton, torch\n", true},
	    {"auto", "from\ttriton.language import core\r\n", true},
	    {"cuda", "import triton\n", false},
	    {"tilelang", "import triton\n", false},
	    {"auto", "# import triton\n", false},
	    {"auto", "x = 'import triton'\n", false},
	    {"auto", "import tritonclient\n", false},
	    {"auto", "import torch\n", false},
	    {"auto", "", false},
	};

	for (size_t i = 0; i < ST_ARRAY_LEN(cases); i++) {
		struct proto_request rq;

		proto_request_init(&rq);
		rq.language = (char *)cases[i].lang;
		rq.solution_src = (char *)cases[i].src;
		ck_assert_msg(proto_request_jit_exec(&rq) == cases[i].want, "case %zu: %s", i,
			      cases[i].src);
	}
}
END_TEST

/* "language" and "precision": "" or one of their names. */
START_TEST(request_language_precision)
{
	struct proto_request rq;
	char err[256];

	proto_request_init(&rq);
	rq.id = (char *)"x";
	rq.device = (char *)"cpu";
	rq.format = (char *)"kernelbench";
	rq.problem_src = (char *)"p";
	rq.solution_src = (char *)"s";
	for (size_t i = 0; proto_languages[i]; i++) {
		rq.language = (char *)proto_languages[i];
		ck_assert_int_eq(proto_request_check(&rq, err, sizeof(err)), 0);
	}
	for (size_t i = 0; proto_precisions[i]; i++) {
		rq.precision = (char *)proto_precisions[i];
		ck_assert_int_eq(proto_request_check(&rq, err, sizeof(err)), 0);
	}
	rq.language = (char *)"rust";
	ck_assert_int_eq(proto_request_check(&rq, err, sizeof(err)), ST_EINVAL);
	ck_assert_msg(strstr(err, "\"language\"") && strstr(err, "rust"), "%s", err);
	rq.language = NULL;
	rq.precision = (char *)"fp8";
	ck_assert_int_eq(proto_request_check(&rq, err, sizeof(err)), ST_EINVAL);
	ck_assert_msg(strstr(err, "\"precision\"") && strstr(err, "fp16"), "%s", err);
}
END_TEST

/* "baseline": "", eager or compile; compile alone asks for the compiled
 * reference, and with it the run jail allows exec whatever the language. */
START_TEST(request_baseline)
{
	struct proto_request rq;
	char err[256];

	proto_request_init(&rq);
	rq.id = (char *)"x";
	rq.device = (char *)"cpu";
	rq.format = (char *)"kernelbench";
	rq.problem_src = (char *)"p";
	rq.solution_src = (char *)"import torch\n";
	ck_assert(!proto_request_baseline_compile(&rq) && !proto_request_run_exec(&rq));
	for (size_t i = 0; proto_baselines[i]; i++) {
		rq.baseline = (char *)proto_baselines[i];
		ck_assert_int_eq(proto_request_check(&rq, err, sizeof(err)), 0);
	}
	rq.baseline = (char *)"eager";
	ck_assert(!proto_request_baseline_compile(&rq) && !proto_request_run_exec(&rq));
	rq.baseline = (char *)"compile";
	ck_assert(proto_request_baseline_compile(&rq) && proto_request_run_exec(&rq));
	ck_assert(!proto_request_jit_exec(&rq)); /* the candidate's language still says no */
	rq.language = (char *)"cuda";
	ck_assert(proto_request_run_exec(&rq));
	rq.baseline = (char *)"";
	rq.language = (char *)"triton";
	ck_assert(proto_request_run_exec(&rq) && !proto_request_baseline_compile(&rq));
	rq.baseline = (char *)"max-autotune";
	ck_assert_int_eq(proto_request_check(&rq, err, sizeof(err)), ST_EINVAL);
	ck_assert_msg(strstr(err, "\"baseline\"") && strstr(err, "eager or compile"), "%s", err);
	ck_assert(!proto_request_baseline_compile(&rq));
}
END_TEST

START_TEST(request_defaults)
{
	struct proto_request d, rq;
	struct variant v = V0;
	struct dbuf b;
	char err[ERRLEN] = "";

	proto_request_init(&d);
	ck_assert_uint_eq(d.v, PROTO_VERSION);
	ck_assert_int_eq(d.stage, PROTO_STAGE_ALL);
	ck_assert_uint_eq(d.trials, 5);
	ck_assert(d.tol_fp32.atol == 1e-4 && d.tol_fp32.rtol == 1e-4);
	ck_assert(d.tol_fp16.atol == 1e-2 && d.tol_fp16.rtol == 1e-2);
	ck_assert(d.timing);
	ck_assert_ptr_null(d.id);
	ck_assert_int_eq(proto_request_check(&d, err, ERRLEN), ST_EINVAL); /* no device */
	ck_assert_ptr_nonnull(strstr(err, "device"));

	v.required_only = true;
	big_init(&b);
	build(&b, rq_keys, N_RQ, &v);
	ck_assert_int_eq(proto_request_decode(b.p, b.len, &rq, err, ERRLEN), 0);
	ck_assert_str_eq(rq.problem_name, "");
	ck_assert_str_eq(rq.solution_name, "");
	ck_assert_str_eq(rq.cache_dir, "");
	ck_assert_str_eq(rq.verdict, ""); /* stark decides */
	ck_assert_uint_eq(rq.trials, d.trials);
	ck_assert_uint_eq(rq.kb_trials, 5);
	ck_assert_uint_eq(rq.warmup, d.warmup);
	ck_assert_uint_eq(rq.min_reps, d.min_reps);
	ck_assert_uint_eq(rq.max_reps, d.max_reps);
	ck_assert_uint_eq(rq.max_time_ms, d.max_time_ms);
	ck_assert_uint_eq(rq.wall_ms, d.wall_ms);
	ck_assert(rq.target_rse == d.target_rse);
	ck_assert_uint_eq(rq.placements, 32);
	ck_assert_uint_eq(rq.placements, d.placements);
	ck_assert(rq.timing == d.timing);
	ck_assert(rq.l2_flush && d.l2_flush);
	ck_assert_uint_eq(rq.seed, 0x123456789abcdefULL);
	proto_request_release(&rq);
	dbuf_release(&b);
}
END_TEST

START_TEST(result_defaults)
{
	struct proto_result d, rs;
	struct variant v = V0;
	struct dbuf b;
	char err[ERRLEN] = "";

	proto_result_init(&d);
	ck_assert_int_eq(d.status, PROTO_ST_ERROR);
	ck_assert(isnan(d.runtime_us) && isnan(d.speedup) && isnan(d.stage_ms[0]));
	v.required_only = true;
	big_init(&b);
	build(&b, rs_keys, N_RS, &v);
	ck_assert_int_eq(proto_result_decode(b.p, b.len, &rs, err, ERRLEN), 0);
	ck_assert_int_eq(rs.status, PROTO_ST_INCORRECT);
	ck_assert_str_eq(rs.message, "");
	ck_assert_str_eq(rs.log, "");
	ck_assert_str_eq(rs.first_bad, "");
	ck_assert(isnan(rs.max_abs_err) && isnan(rs.ref_hi_us) && isnan(rs.stage_ms[2]));
	ck_assert_uint_eq(rs.nflags, 0);
	ck_assert_uint_eq(rs.nenv, 0);
	/* no verdicts reached */
	ck_assert_str_eq(rs.verdict, "");
	ck_assert_str_eq(rs.stark_status, "");
	ck_assert_str_eq(rs.kb_status, "");
	ck_assert_str_eq(rs.kb_reason, "");
	ck_assert_uint_eq(rs.kb_trials_run, 0);
	ck_assert(isnan(rs.kb_max_diff));
	proto_result_release(&rs);
	dbuf_release(&b);
}
END_TEST

START_TEST(lenient_forms)
{
	/* non-minimal integers, bin sources, float extremes, limits at the cap */
	char err[ERRLEN] = "";

	gv_reset();
	w_byte(&g_val, 0xcf);
	w_be(&g_val, 5, 8);
	ck_assert_int_eq(rq_with("trials", err), 0);
	gv_reset();
	w_binn(&g_val, "\0\xff\xfe", 3);
	ck_assert_int_eq(rq_with("problem_src", err), 0);
	gv_reset();
	w_fill(&g_val, PROTO_NAME_MAX, 'x');
	ck_assert_int_eq(rq_with("id", err), 0);
	gv_reset();
	w_str(&g_val, "\xf0\x9f\x98\x80 \xe2\x82\xac \xc3\xa9");
	ck_assert_int_eq(rq_with("id", err), 0);
	gv_reset();
	w_str(&g_val, "cuda");
	ck_assert_int_eq(rq_with("device", err), 0);
	gv_reset();
	w_str(&g_val, "cpu");
	ck_assert_int_eq(rq_with("device", err), 0);
	gv_reset();
	w_uint(&g_val, UINT64_MAX);
	ck_assert_int_eq(rq_with("seed", err), 0);
	gv_reset();
	w_f64(&g_val, INFINITY);
	ck_assert_int_eq(rs_with("speedup", err), 0);
	gv_reset();
	w_arr(&g_val, 0);
	ck_assert_int_eq(rs_with("flags", err), 0);
	gv_reset();
	w_map(&g_val, 0);
	ck_assert_int_eq(rs_with("env", err), 0);
	gv_reset();
	w_fill(&g_val, PROTO_MESSAGE_MAX, 'm');
	ck_assert_int_eq(rs_with("message", err), 0);
	dbuf_release(&g_val);
}
END_TEST

/* ---- malformed bodies ---- */

START_TEST(truncated_everywhere)
{
	struct proto_request rq;
	struct proto_result rs;
	struct dbuf f;
	char err[ERRLEN];

	fill_request(&rq);
	big_init(&f);
	ck_assert_int_eq(proto_request_encode(&rq, &f), 0);
	for (size_t n = 0; n < len_of(&f); n++) {
		int rc = dec_rq(body_of(&f), n, err);

		ck_assert_msg(rc == ST_EPROTO, "request cut at %zu: rc %d", n, rc);
	}
	proto_request_release(&rq);
	dbuf_reset(&f);
	fill_result(&rs);
	ck_assert_int_eq(proto_result_encode(&rs, &f), 0);
	for (size_t n = 0; n < len_of(&f); n++) {
		int rc = dec_rs(body_of(&f), n, err);

		ck_assert_msg(rc == ST_EPROTO, "result cut at %zu: rc %d", n, rc);
	}
	ck_assert_int_eq(dec_rs(body_of(&f), len_of(&f), err), 0);
	proto_result_release(&rs);
	dbuf_release(&f);
}
END_TEST

/* Wire type categories, and the value each writes. */
enum wt { W_NIL, W_BOOL, W_UINT, W_NEG, W_SINT, W_F32, W_F64, W_STR, W_BIN, W_ARR, W_MAP,
	  W_EXT, W_C1, W_COUNT };

static void put_wt(struct dbuf *b, enum wt t)
{
	static const unsigned char f32[] = {0xca, 0x3f, 0x80, 0, 0};
	static const unsigned char ext[] = {0xd4, 0x01, 0x00};

	switch (t) {
	case W_NIL: w_byte(b, 0xc0); break;
	case W_BOOL: w_byte(b, 0xc3); break;
	case W_UINT: w_uint(b, 1); break;
	case W_NEG: w_byte(b, 0xff); break;
	case W_SINT: w_byte(b, 0xd0); w_byte(b, 1); break;
	case W_F32: w_raw(b, f32, sizeof(f32)); break;
	case W_F64: w_f64(b, 0.5); break;
	case W_STR: w_str(b, "x"); break;
	case W_BIN: w_binn(b, "x", 1); break;
	case W_ARR: w_arr(b, 1); w_str(b, "x"); break;
	case W_MAP: w_map(b, 1); w_str(b, "x"); w_str(b, "y"); break;
	case W_EXT: w_raw(b, ext, sizeof(ext)); break;
	case W_C1: w_byte(b, 0xc1); break;
	case W_COUNT: break;
	}
}

static bool type_ok(enum kind k, enum wt t)
{
	switch (k) {
	case K_VERSION:
	case K_UINT:
	case K_U64: return t == W_UINT;
	case K_F64: return t == W_F64;
	case K_BOOL: return t == W_BOOL;
	case K_STR:
	case K_STATUS: return t == W_STR;
	case K_SRC: return t == W_STR || t == W_BIN;
	case K_FLAGS: return t == W_ARR;
	case K_ENV: return t == W_MAP;
	}
	return false;
}

static void wrong_types(const struct key *keys, int n, int i, bool request)
{
	char err[ERRLEN], want[64];

	snprintf(want, sizeof(want), "field \"%s\"", keys[i].key);
	for (int t = 0; t < W_COUNT; t++) {
		if (type_ok(keys[i].kind, (enum wt)t))
			continue;
		gv_reset();
		put_wt(&g_val, (enum wt)t);
		err[0] = '\0';
		int rc = request ? rq_with(keys[i].key, err) : rs_with(keys[i].key, err);

		ck_assert_msg(rc == ST_EPROTO, "%s type %d: rc %d", keys[i].key, t, rc);
		ck_assert_msg(strstr(err, want), "%s type %d: \"%s\"", keys[i].key, t, err);
	}
	(void)n;
	dbuf_release(&g_val);
}

START_TEST(request_wrong_types)
{
	wrong_types(rq_keys, N_RQ, _i, true);
}
END_TEST

START_TEST(result_wrong_types)
{
	wrong_types(rs_keys, N_RS, _i, false);
}
END_TEST

/* Every key, duplicated; every required key, missing; every optional key,
 * missing and fine. */
static void dup_and_missing(const struct key *keys, int i, bool request)
{
	char err[ERRLEN] = "";
	struct variant v = V0;
	int rc;

	v.dup = i;
	rc = request ? try_rq(&v, err) : try_rs(&v, err);
	ck_assert_msg(rc == ST_EPROTO && strstr(err, "duplicate key") && strstr(err, keys[i].key),
		      "dup %s: %d %s", keys[i].key, rc, err);
	v = (struct variant)V0;
	v.skip = i;
	rc = request ? try_rq(&v, err) : try_rs(&v, err);
	if (!keys[i].required &&
	    (!strcmp(keys[i].key, "trials_run") || !strcmp(keys[i].key, "kb_trials_run"))) {
		/* (kb_)trials_passed may not exceed the default (kb_)trials_run, 0 */
		ck_assert_msg(rc == ST_EPROTO && strstr(err, "above ") &&
				      strstr(err, keys[i].key),
			      "%s", err);
		return;
	}
	if (!keys[i].required) {
		ck_assert_msg(rc == 0, "optional %s missing: %d %s", keys[i].key, rc, err);
		return;
	}
	ck_assert_msg(rc == ST_EPROTO, "missing %s: rc %d", keys[i].key, rc);
	if (i)
		ck_assert_msg(strstr(err, keys[i].key) && strstr(err, "missing"), "%s", err);
	else
		ck_assert_msg(strstr(err, "expected \"v\""), "%s", err);
}

START_TEST(request_dup_missing)
{
	dup_and_missing(rq_keys, _i, true);
}
END_TEST

START_TEST(result_dup_missing)
{
	dup_and_missing(rs_keys, _i, false);
}
END_TEST

START_TEST(keys_and_structure)
{
	char err[ERRLEN] = "";
	struct variant v = V0;
	struct dbuf b;

	v.extra = "bogus";
	ck_assert_int_eq(try_rq(&v, err), ST_EPROTO);
	ck_assert_str_eq(err, "message: unknown key \"bogus\"");
	v.extra = "\x1b[31mred\"\\";
	ck_assert_int_eq(try_rs(&v, err), ST_EPROTO);
	ck_assert_str_eq(err, "message: unknown key \"\\x1b[31mred\\x22\\x5c\"");
	v.extra = "a_key_that_is_much_longer_than_any_known_key";
	ck_assert_int_eq(try_rq(&v, err), ST_EPROTO);
	v = (struct variant)V0;
	v.trailing = true;
	ck_assert_int_eq(try_rq(&v, err), ST_EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "1 trailing bytes"));
	ck_assert_int_eq(try_rs(&v, err), ST_EPROTO);

	big_init(&b);
	ck_assert_int_eq(dec_rq("", 0, err), ST_EPROTO); /* empty body */
	ck_assert_str_eq(err, "message: empty");
	w_map(&b, 0);
	ck_assert_int_eq(dec_rq(b.p, b.len, err), ST_EPROTO);
	dbuf_reset(&b);
	w_arr(&b, 1);
	w_map(&b, 0);
	ck_assert_int_eq(dec_rs(b.p, b.len, err), ST_EPROTO);
	ck_assert_str_eq(err, "message: expected map, got array");
	/* a non-string key */
	dbuf_reset(&b);
	w_map(&b, 1);
	w_binn(&b, "v", 1);
	w_uint(&b, 1);
	ck_assert_int_eq(dec_rq(b.p, b.len, err), ST_EPROTO);
	ck_assert_str_eq(err, "message: key 0: expected string, got bin");
	/* "v" not first */
	dbuf_reset(&b);
	w_map(&b, 2);
	w_str(&b, "id");
	w_str(&b, "x");
	w_str(&b, "v");
	w_uint(&b, 1);
	ck_assert_int_eq(dec_rs(b.p, b.len, err), ST_EPROTO);
	ck_assert_str_eq(err, "message: first key is \"id\", expected \"v\"");
	/* more entries than the schema has keys */
	dbuf_reset(&b);
	w_map(&b, 1000);
	for (int i = 0; i < 1000; i++) {
		w_uint(&b, 1);
		w_uint(&b, 1);
	}
	ck_assert_int_eq(dec_rs(b.p, b.len, err), ST_EPROTO);
	ck_assert_str_eq(err, "message: key 0: expected string, got unsigned int");
	dbuf_release(&b);
}
END_TEST

START_TEST(versions)
{
	char err[ERRLEN] = "";

	gv_reset();
	w_uint(&g_val, 2);
	ck_assert_int_eq(rq_with("v", err), ST_EVERSION);
	ck_assert_str_eq(err, "field \"v\": version 2, this build speaks 1");
	gv_reset();
	w_uint(&g_val, 0);
	ck_assert_int_eq(rs_with("v", err), ST_EVERSION);
	gv_reset();
	w_uint(&g_val, UINT64_MAX);
	ck_assert_int_eq(rs_with("v", err), ST_EVERSION);
	gv_reset();
	w_str(&g_val, "1");
	ck_assert_int_eq(rq_with("v", err), ST_EPROTO);
	/* a v2 message with keys v1 does not know still reads as a version error */
	gv_reset();
	w_uint(&g_val, 2);
	{
		struct variant v = V0;

		v.replace = 0;
		v.replace_fn = put_g_val;
		v.extra = "new_in_v2";
		ck_assert_int_eq(try_rq(&v, err), ST_EVERSION);
	}
	dbuf_release(&g_val);
}
END_TEST

START_TEST(huge_headers)
{
	static const unsigned char map32[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
	static const unsigned char hdrs[][5] = {
		{0xdb, 0xff, 0xff, 0xff, 0xff}, /* str32 of 4 GiB */
		{0xc6, 0xff, 0xff, 0xff, 0xff}, /* bin32 */
		{0xdd, 0xff, 0xff, 0xff, 0xff}, /* array32 */
		{0xdf, 0xff, 0xff, 0xff, 0xff}, /* map32 */
	};
	static const char *const rq_fields[] = {"id", "problem_src", "solution_src", "cache_dir"};
	static const char *const rs_fields[] = {"message", "log", "flags", "env", "status"};
	char err[ERRLEN] = "";

	ck_assert_int_eq(dec_rq(map32, sizeof(map32), err), ST_EPROTO);
	ck_assert_int_eq(dec_rs(map32, sizeof(map32), err), ST_EPROTO);
	for (size_t h = 0; h < ST_ARRAY_LEN(hdrs); h++) {
		for (size_t i = 0; i < ST_ARRAY_LEN(rq_fields); i++) {
			gv_reset();
			w_raw(&g_val, hdrs[h], 5);
			EXPECT_BAD(rq_with, ST_EPROTO, rq_fields[i]);
		}
		for (size_t i = 0; i < ST_ARRAY_LEN(rs_fields); i++) {
			gv_reset();
			w_raw(&g_val, hdrs[h], 5);
			EXPECT_BAD(rs_with, ST_EPROTO, rs_fields[i]);
		}
	}
	/* a source within its cap but claiming more bytes than are there */
	gv_reset();
	w_byte(&g_val, 0xdb);
	w_be(&g_val, PROTO_SRC_MAX, 4);
	w_raw(&g_val, "abc", 3);
	ck_assert_int_eq(rq_with("problem_src", err), ST_EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "truncated"));
	/* 33 flags, 65 env entries, all present */
	gv_reset();
	w_arr(&g_val, PROTO_FLAGS_MAX + 1);
	for (int i = 0; i <= PROTO_FLAGS_MAX; i++)
		w_str(&g_val, "f");
	ck_assert_int_eq(rs_with("flags", err), ST_EPROTO);
	ck_assert_str_eq(err, "field \"flags\": 33 entries, at most 32");
	gv_reset();
	w_map(&g_val, PROTO_ENV_MAX + 1);
	for (int i = 0; i <= PROTO_ENV_MAX; i++) {
		char k[16];

		snprintf(k, sizeof(k), "k%d", i);
		w_str(&g_val, k);
		w_str(&g_val, "v");
	}
	ck_assert_int_eq(rs_with("env", err), ST_EPROTO);
	dbuf_release(&g_val);
}
END_TEST

START_TEST(over_caps)
{
	static const struct {
		const char *key;
		size_t cap;
		bool request;
	} caps[] = {
		{"id", PROTO_NAME_MAX, true},	     {"device", PROTO_NAME_MAX, true},
		{"format", PROTO_NAME_MAX, true},    {"problem_name", PROTO_PATH_MAX, true},
		{"solution_name", PROTO_PATH_MAX, true}, {"cache_dir", PROTO_PATH_MAX, true},
		{"build_dir", PROTO_PATH_MAX, true}, {"jit_dir", PROTO_PATH_MAX, true},
		{"problem_src", PROTO_SRC_MAX, true}, {"solution_src", PROTO_SRC_MAX, true},
		{"id", PROTO_NAME_MAX, false},	     {"message", PROTO_MESSAGE_MAX, false},
		{"log", PROTO_LOG_MAX, false},	     {"first_bad", PROTO_NAME_MAX, false},
		{"status", 32, false},
	};

	for (size_t i = 0; i < ST_ARRAY_LEN(caps); i++) {
		gv_reset();
		w_fill(&g_val, caps[i].cap + 1, 'a');
		if (caps[i].request)
			EXPECT_BAD(rq_with, ST_EPROTO, caps[i].key);
		else
			EXPECT_BAD(rs_with, ST_EPROTO, caps[i].key);
	}
	/* flag and env entries */
	gv_reset();
	w_arr(&g_val, 1);
	w_fill(&g_val, PROTO_NAME_MAX + 1, 'f');
	EXPECT_BAD(rs_with, ST_EPROTO, "flags");
	gv_reset();
	w_map(&g_val, 1);
	w_str(&g_val, "k");
	w_fill(&g_val, PROTO_ENV_VAL_MAX + 1, 'v');
	EXPECT_BAD(rs_with, ST_EPROTO, "env");
	dbuf_release(&g_val);
}
END_TEST

START_TEST(nested_bombs)
{
	struct dbuf b;
	char err[ERRLEN] = "";

	big_init(&b);
	for (int i = 0; i < 100000; i++)
		w_byte(&b, 0x91); /* [[[[...]]]] */
	w_byte(&b, 0xc0);
	ck_assert_int_eq(dec_rq(b.p, b.len, err), ST_EPROTO);
	gv_reset();
	w_raw(&g_val, b.p, b.len);
	EXPECT_BAD(rq_with, ST_EPROTO, "id");
	EXPECT_BAD(rs_with, ST_EPROTO, "env");
	/* inside the one array we accept */
	gv_reset();
	w_byte(&g_val, 0x91);
	w_raw(&g_val, b.p, b.len);
	ck_assert_int_eq(rs_with("flags", err), ST_EPROTO);
	ck_assert_str_eq(err, "field \"flags\": expected string, got array");
	/* maps of maps */
	dbuf_reset(&b);
	for (int i = 0; i < 100000; i++) {
		w_byte(&b, 0x81);
		w_str(&b, "env");
	}
	ck_assert_int_eq(dec_rs(b.p, b.len, err), ST_EPROTO);
	gv_reset();
	w_raw(&g_val, b.p, b.len);
	EXPECT_BAD(rs_with, ST_EPROTO, "env");
	dbuf_release(&g_val);
	dbuf_release(&b);
}
END_TEST

static void put_u(struct dbuf *b, uint64_t v)
{
	gv_reset();
	w_uint(b, v);
}

static void put_d(struct dbuf *b, double d)
{
	gv_reset();
	w_f64(b, d);
}

static void put_s(struct dbuf *b, const char *s, size_t n)
{
	gv_reset();
	w_strn(b, s, n);
}

START_TEST(ranges)
{
	static const struct {
		const char *key;
		uint64_t bad;
	} rq_u[] = {
		{"trials", 0},	      {"trials", PROTO_TRIALS_MAX + 1}, {"trials", 1ULL << 32},
		{"kb_trials", PROTO_TRIALS_MAX + 1},
		{"stage", 0},	      {"stage", 4},			{"stage", 1ULL << 40},
		{"warmup", PROTO_WARMUP_MAX + 1}, {"min_reps", 0},	{"max_reps", 0},
		{"max_reps", PROTO_REPS_MAX + 1}, {"max_time_ms", 0},	{"wall_ms", 0},
		{"wall_ms", PROTO_TIME_MS_MAX + 1ULL}, {"min_reps", 301}, /* > max_reps 300 */
		{"placements", 0}, {"placements", PROTO_PLACEMENTS_MAX + 1},
		{"host_mem_mib", PROTO_HOST_MEM_MIB_MAX + 1ULL},
	};
	static const struct {
		const char *key;
		double bad;
	} rq_d[] = {
		{"atol32", -1e-9}, {"rtol32", NAN},	  {"atol16", INFINITY},
		{"rtol16", -0.5},  {"target_rse", 1.5}, {"target_rse", NAN},
	};
	static const struct {
		const char *key;
		uint64_t bad;
	} rs_u[] = {
		{"trials_run", PROTO_TRIALS_MAX + 1}, {"trials_passed", 6}, /* > trials_run 5 */
		{"reps", PROTO_REPS_MAX + 1},	      {"trials_run", 3},    /* < trials_passed 4 */
		{"kb_trials_run", PROTO_TRIALS_MAX + 1}, {"kb_trials_passed", 6}, /* > kb_trials_run 5 */
		{"kb_trials_run", 4},		      /* < kb_trials_passed 5 */
	};

	for (size_t i = 0; i < ST_ARRAY_LEN(rq_u); i++) {
		put_u(&g_val, rq_u[i].bad);
		EXPECT_BAD(rq_with, ST_EPROTO, rq_u[i].key);
	}
	for (size_t i = 0; i < ST_ARRAY_LEN(rq_d); i++) {
		put_d(&g_val, rq_d[i].bad);
		EXPECT_BAD(rq_with, ST_EPROTO, rq_d[i].key);
	}
	for (size_t i = 0; i < ST_ARRAY_LEN(rs_u); i++) {
		put_u(&g_val, rs_u[i].bad);
		EXPECT_BAD(rs_with, ST_EPROTO, rs_u[i].key);
	}
	{
		char err[ERRLEN] = "";

		put_u(&g_val, 0);
		ck_assert_int_eq(rq_with("trials", err), ST_EPROTO);
		ck_assert_str_eq(err, "field \"trials\": 0 is out of range 1..1000");
		put_u(&g_val, 1ULL << 32);
		ck_assert_int_eq(rq_with("warmup", err), ST_EPROTO);
		ck_assert_str_eq(err, "field \"warmup\": 4294967296 does not fit in 32 bits");
		put_u(&g_val, 0); /* with "verdict" "kernelbench" */
		ck_assert_int_eq(rq_with("kb_trials", err), ST_EPROTO);
		ck_assert_str_eq(err, "field \"kb_trials\": 0, but KernelBench's verdict decides "
				      "(\"verdict\" is \"kernelbench\")");
	}
	dbuf_release(&g_val);
}
END_TEST

START_TEST(text_rules)
{
	static const struct {
		const char *key;
		const char *s;
		size_t n;
		bool request;
	} bad[] = {
		{"id", "a\0b", 3, true},		/* NUL */
		{"id", "\xff", 1, true},		/* invalid byte */
		{"cache_dir", "\xc0\x80", 2, true},	/* overlong NUL */
		{"problem_name", "\xed\xa0\x80", 3, true}, /* surrogate */
		{"solution_name", "\xf4\x90\x80\x80", 4, true}, /* > U+10FFFF */
		{"solution_name", "\xe2\x82", 2, true}, /* cut sequence */
		{"device", "gpu", 3, true},
		{"device", "cuda:1234", 9, true},
		{"device", "cuda:", 5, true},
		{"device", "cuda:1x", 7, true},
		{"device", "", 0, true},
		{"format", "triton", 6, true},
		{"message", "\x80", 1, false},
		{"log", "ok\0", 3, false},
		{"first_bad", "\xfe", 1, false},
		{"status", "bogus", 5, false},
		{"status", "", 0, false},
		{"status", "correct\0", 8, false},
	};

	for (size_t i = 0; i < ST_ARRAY_LEN(bad); i++) {
		put_s(&g_val, bad[i].s, bad[i].n);
		if (bad[i].request)
			EXPECT_BAD(rq_with, ST_EPROTO, bad[i].key);
		else
			EXPECT_BAD(rs_with, ST_EPROTO, bad[i].key);
	}
	/* flags and env entries: empty, NUL, bad UTF-8, non-string, repeated key */
	gv_reset();
	w_arr(&g_val, 1);
	w_str(&g_val, "");
	EXPECT_BAD(rs_with, ST_EPROTO, "flags");
	gv_reset();
	w_arr(&g_val, 2);
	w_str(&g_val, "ok");
	w_strn(&g_val, "\xff", 1);
	EXPECT_BAD(rs_with, ST_EPROTO, "flags");
	gv_reset();
	w_arr(&g_val, 1);
	w_uint(&g_val, 1);
	EXPECT_BAD(rs_with, ST_EPROTO, "flags");
	gv_reset();
	w_map(&g_val, 1);
	w_str(&g_val, "");
	w_str(&g_val, "v");
	EXPECT_BAD(rs_with, ST_EPROTO, "env");
	gv_reset();
	w_map(&g_val, 1);
	w_str(&g_val, "k");
	w_strn(&g_val, "a\0", 2);
	EXPECT_BAD(rs_with, ST_EPROTO, "env");
	gv_reset();
	w_map(&g_val, 1);
	w_str(&g_val, "k");
	w_uint(&g_val, 1);
	EXPECT_BAD(rs_with, ST_EPROTO, "env");
	gv_reset();
	w_map(&g_val, 2);
	w_str(&g_val, "k");
	w_str(&g_val, "1");
	w_str(&g_val, "k");
	w_str(&g_val, "2");
	EXPECT_BAD(rs_with, ST_EPROTO, "env");
	dbuf_release(&g_val);
}
END_TEST

START_TEST(body_over_frame_max)
{
	char err[ERRLEN] = "";
	char *p = calloc(1, (size_t)PROTO_FRAME_MAX + 1);

	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(dec_rq(p, (size_t)PROTO_FRAME_MAX + 1, err), ST_ETOOBIG);
	ck_assert_int_eq(dec_rs(p, (size_t)PROTO_FRAME_MAX + 1, err), ST_ETOOBIG);
	free(p);
}
END_TEST

/* ---- encoder ---- */

START_TEST(encode_checks)
{
	struct proto_request rq;
	struct proto_result rs;
	struct dbuf out, small;
	char err[ERRLEN] = "";

	big_init(&out);
	ck_assert_int_eq(dbuf_puts(&out, "keep"), 0);
	proto_request_init(&rq);
	ck_assert_int_eq(proto_request_encode(&rq, &out), ST_EINVAL); /* no device */
	ck_assert_uint_eq(out.len, 4);
	proto_request_release(&rq);

	fill_request(&rq);
	rq.trials = 0;
	ck_assert_int_eq(proto_request_encode(&rq, &out), ST_EINVAL);
	ck_assert_int_eq(proto_request_check(&rq, err, ERRLEN), ST_EINVAL);
	ck_assert_str_eq(err, "field \"trials\": 0 is out of range 1..1000");
	rq.trials = 1;
	rq.min_reps = rq.max_reps + 1;
	ck_assert_int_eq(proto_request_check(&rq, err, ERRLEN), ST_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "min_reps"));
	rq.min_reps = 1;
	free(rq.id);
	rq.id = calloc(1, PROTO_NAME_MAX + 2);
	memset(rq.id, 'i', PROTO_NAME_MAX + 1);
	ck_assert_int_eq(proto_request_encode(&rq, &out), ST_ETOOBIG);
	ck_assert_int_eq(proto_request_check(&rq, err, ERRLEN), ST_ETOOBIG);
	ck_assert_str_eq(err, "field \"id\": 257 bytes, at most 256");
	rq.id[PROTO_NAME_MAX] = '\0';
	rq.stage = (enum proto_stage)7;
	ck_assert_int_eq(proto_request_encode(&rq, &out), ST_EINVAL);
	rq.stage = PROTO_STAGE_COMPILE;
	rq.v = 2;
	ck_assert_int_eq(proto_request_encode(&rq, &out), ST_EINVAL);
	rq.v = PROTO_VERSION;
	free(rq.solution_src);
	rq.solution_src = NULL;
	rq.solution_len = 3;
	ck_assert_int_eq(proto_request_encode(&rq, &out), ST_EINVAL);
	rq.solution_len = 0; /* NULL source is sent as "" */
	ck_assert_uint_eq(out.len, 4);
	ck_assert_str_eq(out.p, "keep");

	/* the output's cap */
	dbuf_init(&small, 64);
	ck_assert_int_eq(proto_request_encode(&rq, &small), ST_ETOOBIG);
	ck_assert_uint_eq(small.len, 0);
	dbuf_release(&small);
	/* appends after what is there */
	ck_assert_int_eq(proto_request_encode(&rq, &out), 0);
	ck_assert_mem_eq(out.p, "keep", 4);
	proto_request_release(&rq);

	proto_result_init(&rs);
	rs.id = strdup("x");
	rs.status = (enum proto_status)PROTO_ST_COUNT;
	ck_assert_int_eq(proto_result_encode(&rs, &out), ST_EINVAL);
	rs.status = PROTO_ST_TIMEOUT;
	rs.log = strdup("bad \xff utf-8");
	ck_assert_int_eq(proto_result_check(&rs, err, ERRLEN), ST_EINVAL);
	ck_assert_str_eq(err, "field \"log\": not valid utf-8");
	ck_assert_int_eq(proto_result_set_log(&rs, "bad \xff utf-8", 11), 0);
	ck_assert_str_eq(rs.log, "bad ? utf-8");
	rs.flags[0] = strdup("x");
	rs.flags[1] = NULL;
	rs.nflags = 2;
	ck_assert_int_eq(proto_result_check(&rs, err, ERRLEN), ST_EINVAL);
	ck_assert_str_eq(err, "field \"flags\": entry 1: empty");
	rs.nflags = 1;
	ck_assert_int_eq(proto_result_encode(&rs, &out), 0);
	proto_result_release(&rs);
	dbuf_release(&out);
}
END_TEST

/* The two verdicts: which decides is "stark", "kernelbench" or "" (the
 * default, stark); each verdict's status is a status name or "" (not
 * reached); a reason is capped at PROTO_REASON_MAX. */
START_TEST(verdict_fields)
{
	static const struct {
		const char *key;
		const char *s;
		bool request;
	} bad[] = {
		{"verdict", "kb", true},	   {"verdict", "Stark", true},
		{"verdict", "both", false},	   {"stark_status", "passed", false},
		{"kb_status", "compiled ", false}, {"kb_status", "ok", false},
	};
	static const char *const good_rs[][2] = {
		{"verdict", ""},	    {"verdict", "kernelbench"}, {"stark_status", ""},
		{"kb_status", "runtime_error"}, {"kb_status", "error"}, {"stark_status", "rejected"},
	};
	struct proto_request rq;
	struct proto_result rs;
	struct dbuf out;
	char err[ERRLEN] = "";

	for (size_t i = 0; i < ST_ARRAY_LEN(bad); i++) {
		gv_reset();
		w_str(&g_val, bad[i].s);
		if (bad[i].request)
			EXPECT_BAD(rq_with, ST_EPROTO, bad[i].key);
		else
			EXPECT_BAD(rs_with, ST_EPROTO, bad[i].key);
	}
	for (size_t i = 0; i < ST_ARRAY_LEN(good_rs); i++) {
		gv_reset();
		w_str(&g_val, good_rs[i][1]);
		ck_assert_msg(rs_with(good_rs[i][0], err) == 0, "%s=\"%s\": %s", good_rs[i][0],
			      good_rs[i][1], err);
	}
	gv_reset();
	w_str(&g_val, "stark");
	ck_assert_int_eq(rq_with("verdict", err), 0);
	dbuf_release(&g_val);

	/* the encoder applies the same rules */
	big_init(&out);
	fill_request(&rq);
	free(rq.verdict);
	rq.verdict = strdup("majority");
	ck_assert_int_eq(proto_request_encode(&rq, &out), ST_EINVAL);
	ck_assert_int_eq(proto_request_check(&rq, err, ERRLEN), ST_EINVAL);
	ck_assert_str_eq(err, "field \"verdict\": \"majority\" is not stark or kernelbench");
	free(rq.verdict);
	rq.verdict = NULL; /* sent as "": stark decides */
	ck_assert_int_eq(proto_request_encode(&rq, &out), 0);
	proto_request_release(&rq);
	fill_result(&rs);
	rs.kb_trials_passed = 3;
	ck_assert_int_eq(proto_result_check(&rs, err, ERRLEN), ST_EINVAL);
	ck_assert_str_eq(err, "field \"kb_trials_passed\": 3 is above kb_trials_run 2");
	rs.kb_trials_passed = 2;
	free(rs.kb_status);
	rs.kb_status = strdup("fine");
	ck_assert_int_eq(proto_result_check(&rs, err, ERRLEN), ST_EINVAL);
	ck_assert_str_eq(err, "field \"kb_status\": \"fine\" is no status");
	free(rs.kb_status);
	rs.kb_status = NULL;
	free(rs.kb_reason);
	rs.kb_reason = calloc(1, PROTO_REASON_MAX + 2);
	memset(rs.kb_reason, 'r', PROTO_REASON_MAX + 1);
	ck_assert_int_eq(proto_result_check(&rs, err, ERRLEN), ST_ETOOBIG);
	rs.kb_reason[PROTO_REASON_MAX] = '\0';
	ck_assert_int_eq(proto_result_encode(&rs, &out), 0);
	proto_result_release(&rs);
	dbuf_release(&out);
}
END_TEST

START_TEST(setters)
{
	struct proto_result rs;
	char *big, k[32];
	size_t n = 3u << 20;

	proto_result_init(&rs);
	big = malloc(n + 1);
	memset(big, 'x', n);
	big[n] = '\0';
	ck_assert_int_eq(proto_result_set_message(&rs, "%s", big), 0);
	ck_assert_uint_eq(strlen(rs.message), PROTO_MESSAGE_MAX);
	ck_assert_int_eq(proto_result_set_message(&rs, "cut \xe2\x82\xac here %d", 5), 0);
	ck_assert_str_eq(rs.message, "cut \xe2\x82\xac here 5");
	ck_assert_int_eq(proto_result_set_message(&rs, "bad \xe2\x82"), 0);
	ck_assert_str_eq(rs.message, "bad ??");

	/* a log past its cap keeps head and tail */
	memcpy(big, "HEAD", 4);
	memcpy(big + n - 4, "TAIL", 4);
	ck_assert_int_eq(proto_result_set_log(&rs, big, n), 0);
	ck_assert_uint_le(strlen(rs.log), PROTO_LOG_MAX);
	ck_assert_uint_ge(strlen(rs.log), PROTO_LOG_MAX - 64);
	ck_assert(!strncmp(rs.log, "HEAD", 4));
	ck_assert_str_eq(rs.log + strlen(rs.log) - 4, "TAIL");
	ck_assert_ptr_nonnull(strstr(rs.log, " bytes cut ...]"));
	ck_assert_int_eq(proto_result_set_log(&rs, "a\0b", 3), 0);
	ck_assert_str_eq(rs.log, "a?b");

	ck_assert_int_eq(proto_result_add_flag(&rs, ""), ST_EINVAL);
	ck_assert_int_eq(proto_result_add_flag(&rs, NULL), ST_EINVAL);
	big[PROTO_NAME_MAX + 1] = '\0';
	ck_assert_int_eq(proto_result_add_flag(&rs, big), ST_ETOOBIG);
	ck_assert_int_eq(proto_result_add_flag(&rs, "same"), 0);
	ck_assert_int_eq(proto_result_add_flag(&rs, "same"), 0);
	ck_assert_uint_eq(rs.nflags, 1);
	for (int i = 1; i < PROTO_FLAGS_MAX; i++) {
		snprintf(k, sizeof(k), "f%d", i);
		ck_assert_int_eq(proto_result_add_flag(&rs, k), 0);
	}
	ck_assert_int_eq(proto_result_add_flag(&rs, "one_more"), ST_ETOOBIG);
	ck_assert_uint_eq(rs.nflags, PROTO_FLAGS_MAX);

	ck_assert_int_eq(proto_result_add_env(&rs, "", "v"), ST_EINVAL);
	ck_assert_int_eq(proto_result_add_env(&rs, big, "v"), ST_ETOOBIG);
	ck_assert_int_eq(proto_result_add_env(&rs, "gpu", "A100"), 0);
	ck_assert_int_eq(proto_result_add_env(&rs, "gpu", "H100"), 0);
	ck_assert_uint_eq(rs.nenv, 1);
	ck_assert_str_eq(rs.env[0].val, "H100");
	memset(big, 'v', n);
	ck_assert_int_eq(proto_result_add_env(&rs, "long", big), 0);
	ck_assert_uint_eq(strlen(rs.env[1].val), PROTO_ENV_VAL_MAX);
	ck_assert_int_eq(proto_result_add_env(&rs, "nil", NULL), 0);
	ck_assert_str_eq(rs.env[2].val, "");
	for (int i = 3; i < PROTO_ENV_MAX; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		ck_assert_int_eq(proto_result_add_env(&rs, k, "v"), 0);
	}
	ck_assert_int_eq(proto_result_add_env(&rs, "full", "v"), ST_ETOOBIG);
	ck_assert_int_eq(proto_result_add_env(&rs, "gpu", "B200"), 0); /* replace still works */

	/* whatever the setters stored encodes */
	rs.id = strdup("s");
	{
		struct dbuf f;

		big_init(&f);
		ck_assert_int_eq(proto_result_encode(&rs, &f), 0);
		dbuf_release(&f);
	}
	free(big);
	proto_result_release(&rs);
}
END_TEST

START_TEST(status_names)
{
	enum proto_status st;
	static const char *const names[] = {"correct", "incorrect", "compile_error",
					    "runtime_error", "timeout", "crashed",
					    "rejected", "error", "compiled"};

	ck_assert_int_eq(ST_ARRAY_LEN(names), PROTO_ST_COUNT);
	for (int i = 0; i < PROTO_ST_COUNT; i++) {
		ck_assert_str_eq(proto_status_name((enum proto_status)i), names[i]);
		ck_assert_int_eq(proto_status_parse(names[i], &st), 0);
		ck_assert_int_eq(st, i);
	}
	ck_assert_str_eq(proto_status_name((enum proto_status)PROTO_ST_COUNT), "unknown");
	ck_assert_str_eq(proto_status_name((enum proto_status)-1), "unknown");
	ck_assert_int_eq(proto_status_parse("Correct", &st), ST_EINVAL);
	ck_assert_int_eq(proto_status_parse("", &st), ST_EINVAL);
	ck_assert_int_eq(proto_status_parse(NULL, &st), ST_EINVAL);
}
END_TEST

/* ---- framing ---- */

static void encode_pair(struct dbuf *out)
{
	struct proto_request rq;
	struct proto_result rs;

	fill_request(&rq);
	fill_result(&rs);
	ck_assert_int_eq(proto_request_encode(&rq, out), 0);
	ck_assert_int_eq(proto_result_encode(&rs, out), 0);
	proto_request_release(&rq);
	proto_result_release(&rs);
}

START_TEST(frame_pipe)
{
	struct dbuf frames, in;
	int fds[2], status;
	pid_t pid;
	size_t first;
	char err[ERRLEN] = "";
	static const unsigned char huge[] = {0xff, 0xff, 0xff, 0xff, 'x'};
	static const unsigned char cut[] = {0, 0, 0, 9, 'a', 'b'};

	big_init(&frames);
	encode_pair(&frames);
	first = PROTO_PREFIX_LEN;
	for (int i = 0; i < PROTO_PREFIX_LEN; i++)
		first += (size_t)(unsigned char)frames.p[i] << (8 * (3 - i));
	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) { /* the writer, so frames larger than a pipe work */
		struct dbuf one = {frames.p, first, first, first};
		struct dbuf two = {frames.p + first, frames.len - first, 0, 0};

		close(fds[0]);
		_exit(proto_frame_write(fds[1], &one) || proto_frame_write(fds[1], &two));
	}
	close(fds[1]);
	dbuf_init(&in, PROTO_FRAME_MAX);
	ck_assert_int_eq(proto_frame_read(fds[0], PROTO_FRAME_MAX, &in), 0);
	ck_assert_int_eq(dec_rq(in.p, in.len, err), 0);
	ck_assert_int_eq(proto_frame_read(fds[0], PROTO_FRAME_MAX, &in), 0);
	ck_assert_int_eq(dec_rs(in.p, in.len, err), 0);
	ck_assert_int_eq(proto_frame_read(fds[0], PROTO_FRAME_MAX, &in), ST_EEOF);
	close(fds[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* a huge prefix is refused before anything is allocated */
	dbuf_release(&in);
	ck_assert_int_eq(pipe(fds), 0);
	ck_assert_int_eq(write(fds[1], huge, sizeof(huge)), (ssize_t)sizeof(huge));
	ck_assert_int_eq(proto_frame_read(fds[0], PROTO_FRAME_MAX, &in), ST_ETOOBIG);
	ck_assert_ptr_null(in.p);
	close(fds[0]);
	close(fds[1]);
	/* a prefix above the caller's max, and above the dbuf's own cap */
	ck_assert_int_eq(pipe(fds), 0);
	ck_assert_int_eq(write(fds[1], cut, 4), 4);
	ck_assert_int_eq(proto_frame_read(fds[0], 8, &in), ST_ETOOBIG);
	ck_assert_int_eq(write(fds[1], cut, 4), 4);
	dbuf_init(&in, 8);
	ck_assert_int_eq(proto_frame_read(fds[0], 100, &in), ST_ETOOBIG);
	/* the peer closes inside a body, and before a prefix is complete */
	dbuf_init(&in, 100);
	ck_assert_int_eq(write(fds[1], cut, sizeof(cut)), (ssize_t)sizeof(cut));
	close(fds[1]);
	ck_assert_int_eq(proto_frame_read(fds[0], 100, &in), ST_EEOF);
	ck_assert_uint_eq(in.len, 0);
	close(fds[0]);
	ck_assert_int_eq(pipe(fds), 0);
	ck_assert_int_eq(write(fds[1], cut, 2), 2);
	close(fds[1]);
	ck_assert_int_eq(proto_frame_read(fds[0], 100, &in), ST_EEOF);
	close(fds[0]);
	/* a frame too short to carry a prefix is not written */
	{
		struct dbuf tiny = {(char *)"ab", 2, 3, 2};

		ck_assert_int_eq(proto_frame_write(1, &tiny), ST_EINVAL);
	}
	dbuf_release(&in);
	dbuf_release(&frames);
}
END_TEST

/* Feeds s in pieces of `step` bytes; returns how many frames decoded. */
static int feed_all(struct proto_framer *f, const char *s, size_t n, size_t step, int *err_rc)
{
	const void *body;
	size_t len, used, off = 0;
	int frames = 0, rc;
	char err[ERRLEN];

	*err_rc = 0;
	while (off < n) {
		size_t piece = n - off < step ? n - off : step;

		while (piece) {
			rc = proto_framer_feed(f, s + off, piece, &body, &len, &used);
			if (rc < 0) {
				*err_rc = rc;
				return frames;
			}
			ck_assert_uint_le(used, piece);
			off += used;
			piece -= used;
			if (rc == 1) {
				ck_assert(!proto_framer_partial(f));
				ck_assert(dec_rq(body, len, err) == 0 || dec_rs(body, len, err) == 0);
				frames++;
			} else {
				ck_assert_uint_eq(piece, 0);
			}
		}
	}
	return frames;
}

START_TEST(framer_pieces)
{
	static const size_t steps[] = {1, 2, 3, 5, 7, 64, 1000, 1 << 20};
	struct proto_framer f;
	struct dbuf frames;
	const void *body;
	size_t len, used;
	int rc;

	big_init(&frames);
	encode_pair(&frames);
	encode_pair(&frames);
	for (size_t i = 0; i < ST_ARRAY_LEN(steps); i++) {
		proto_framer_init(&f, PROTO_FRAME_MAX);
		ck_assert_int_eq(feed_all(&f, frames.p, frames.len, steps[i], &rc), 4);
		ck_assert_int_eq(rc, 0);
		ck_assert(!proto_framer_partial(&f));
		proto_framer_release(&f);
	}
	/* stopping inside a frame is visible */
	proto_framer_init(&f, PROTO_FRAME_MAX);
	ck_assert_int_eq(feed_all(&f, frames.p, 3, 1, &rc), 0);
	ck_assert(proto_framer_partial(&f));
	ck_assert_int_eq(feed_all(&f, frames.p + 3, 10, 10, &rc), 0);
	ck_assert(proto_framer_partial(&f));
	proto_framer_release(&f);

	/* an empty frame is a frame (the decoder refuses its body) */
	proto_framer_init(&f, 16);
	ck_assert_int_eq(proto_framer_feed(&f, "\0\0\0\0", 4, &body, &len, &used), 1);
	ck_assert_uint_eq(len, 0);
	ck_assert_uint_eq(used, 4);
	ck_assert_int_eq(proto_framer_feed(&f, NULL, 0, &body, &len, &used), 0);
	ck_assert_uint_eq(used, 0);
	/* over the cap: refused at the prefix, and for good */
	ck_assert_int_eq(proto_framer_feed(&f, "\0\0\0\x11zz", 6, &body, &len, &used),
			 ST_ETOOBIG);
	ck_assert_int_eq(proto_framer_feed(&f, "\0\0\0\1z", 5, &body, &len, &used), ST_ETOOBIG);
	ck_assert_uint_eq(used, 0);
	ck_assert(!proto_framer_partial(&f));
	proto_framer_release(&f);
	proto_framer_init(&f, SIZE_MAX); /* clamped to PROTO_FRAME_MAX */
	ck_assert_int_eq(proto_framer_feed(&f, "\xff\xff\xff\xff", 4, &body, &len, &used),
			 ST_ETOOBIG);
	ck_assert_ptr_null(f.buf.p);
	proto_framer_release(&f);
	dbuf_release(&frames);
}
END_TEST

/* ---- the seed corpus ---- */

struct seed {
	char name[64];
	struct dbuf data;
};

static struct seed seeds[64];
static int nseeds;

static struct dbuf *seed_new(const char *name)
{
	struct seed *s = &seeds[nseeds++];

	ck_assert_int_le(nseeds, (int)ST_ARRAY_LEN(seeds));
	snprintf(s->name, sizeof(s->name), "%s", name);
	big_init(&s->data);
	return &s->data;
}

static void seed_body(const char *name, const struct dbuf *frame)
{
	w_raw(seed_new(name), body_of(frame), len_of(frame));
}

static void seed_variant(const char *name, bool request, const struct variant *v)
{
	build(seed_new(name), request ? rq_keys : rs_keys, request ? N_RQ : N_RS, v);
}

static void seed_with(const char *name, bool request, const char *key, const void *raw,
		      size_t n)
{
	struct variant v = V0;

	gv_reset();
	w_raw(&g_val, raw, n);
	v.replace = request ? key_index(rq_keys, N_RQ, key) : key_index(rs_keys, N_RS, key);
	v.replace_fn = put_g_val;
	seed_variant(name, request, &v);
}

static void make_seeds(void)
{
	struct proto_request rq;
	struct proto_result rs;
	struct variant v = V0;
	struct dbuf f, *d;

	nseeds = 0;
	big_init(&f);
	fill_request(&rq);
	ck_assert_int_eq(proto_request_encode(&rq, &f), 0);
	seed_body("ok-request-full", &f);
	dbuf_reset(&f);
	fill_result(&rs);
	ck_assert_int_eq(proto_result_encode(&rs, &f), 0);
	seed_body("ok-result-full", &f);
	dbuf_reset(&f);
	proto_result_release(&rs);
	proto_result_init(&rs);
	rs.id = strdup("nan");
	rs.status = PROTO_ST_CORRECT;
	rs.speedup = INFINITY;
	ck_assert_int_eq(proto_result_encode(&rs, &f), 0);
	seed_body("ok-result-nan", &f);
	v.required_only = true;
	seed_variant("ok-request-min", true, &v);
	seed_variant("ok-result-min", false, &v);
	v = (struct variant)V0;
	seed_variant("ok-request-keys", true, &v);
	seed_variant("ok-result-keys", false, &v);
	seed_with("ok-request-bin", true, "problem_src", "\xc4\x03\x00\xff\x01", 5);

	d = seed_new("bad-truncated");
	w_raw(d, body_of(&f), len_of(&f) / 2);
	v.extra = "bogus";
	seed_variant("bad-unknown-key", true, &v);
	v = (struct variant)V0;
	v.dup = 3;
	seed_variant("bad-dup-key", false, &v);
	v = (struct variant)V0;
	v.trailing = true;
	seed_variant("bad-trailing", true, &v);
	v = (struct variant)V0;
	v.skip = 2;
	seed_variant("bad-missing", false, &v);
	seed_with("bad-version", true, "v", "\x02", 1);
	seed_with("bad-huge-array", false, "flags", "\xdd\xff\xff\xff\xff", 5);
	seed_with("bad-huge-map", false, "env", "\xdf\xff\xff\xff\xff", 5);
	seed_with("bad-huge-str", true, "problem_src", "\xdb\xff\xff\xff\xff", 5);
	seed_with("bad-wrong-type", true, "trials", "\xcb\x3f\xf0\0\0\0\0\0\0", 9);
	seed_with("bad-negative", true, "seed", "\xff", 1);
	seed_with("bad-range", true, "trials", "\xcd\x03\xe9", 3);
	seed_with("bad-utf8", false, "message", "\xa2\xc0\x80", 3);
	seed_with("bad-status", false, "status", "\xa3" "bad", 4);
	seed_with("bad-nested", false, "flags", "\x91\x91\x91\x91\x91\x91\x91\xc0", 8);
	d = seed_new("bad-top-array");
	w_arr(d, 2);
	w_uint(d, 1);
	w_uint(d, 2);

	d = seed_new("stream-ok-pair");
	encode_pair(d);
	d = seed_new("stream-bad-huge");
	w_raw(d, "\xff\xff\xff\xff", 4);
	d = seed_new("stream-bad-cut");
	encode_pair(d);
	d->len -= 10;
	proto_request_release(&rq);
	proto_result_release(&rs);
	dbuf_release(&f);
	dbuf_release(&g_val);
}

static void free_seeds(void)
{
	for (int i = 0; i < nseeds; i++)
		dbuf_release(&seeds[i].data);
	nseeds = 0;
}

/* Writes the seeds into dir; runs inside a test (Check asserts need one). */
static void write_corpus(const char *dir)
{
	char path[4096];

	ck_assert_msg(mkdir(dir, 0755) == 0 || errno == EEXIST, "cannot create %s", dir);
	for (int i = 0; i < nseeds; i++) {
		ck_assert_int_lt(snprintf(path, sizeof(path), "%s/%s", dir, seeds[i].name),
				 (int)sizeof(path));
		ck_assert_msg(!io_write_file_atomic(path, seeds[i].data.p, seeds[i].data.len),
			      "cannot write %s", path);
	}
	printf("wrote %d seeds to %s\n", nseeds, dir);
}

/* Checks one corpus file against the expectation in its name. */
static void check_seed(const char *name, const struct dbuf *d)
{
	char err[ERRLEN] = "";
	int rq = dec_rq(d->p, d->len, err), rs = dec_rs(d->p, d->len, err);

	if (str_starts(name, "ok-request")) {
		ck_assert_msg(rq == 0 && rs != 0, "%s: %d %d", name, rq, rs);
	} else if (str_starts(name, "ok-result")) {
		ck_assert_msg(rs == 0 && rq != 0, "%s: %d %d", name, rq, rs);
	} else if (str_starts(name, "bad-")) {
		ck_assert_msg(rq != 0 && rs != 0, "%s decodes", name);
	} else if (str_starts(name, "stream-")) {
		struct proto_framer f;
		int frames, rc;
		bool ok;

		proto_framer_init(&f, PROTO_FRAME_MAX);
		frames = feed_all(&f, d->p, d->len, 7, &rc);
		ok = rc == 0 && !proto_framer_partial(&f) && frames > 0;
		ck_assert_msg(ok == str_starts(name, "stream-ok"), "%s: %d frames, rc %d", name,
			      frames, rc);
		proto_framer_release(&f);
	} else {
		ck_abort_msg("corpus file %s: name says nothing", name);
	}
}

START_TEST(corpus)
{
	const char *dir = getenv("STARK_PROTO_CORPUS");
	char path[4096];
	struct dirent *e;
	struct dbuf d;
	DIR *dp;
	int n = 0;

	if (!dir)
		dir = "tests/proto-corpus";
	dp = opendir(dir);
	ck_assert_msg(dp != NULL, "cannot open %s (run from the repository root)", dir);
	while ((e = readdir(dp))) {
		if (e->d_name[0] == '.')
			continue;
		ck_assert_int_lt(snprintf(path, sizeof(path), "%s/%s", dir, e->d_name),
				 (int)sizeof(path));
		ck_assert_int_eq(io_read_file(path, PROTO_FRAME_MAX, &d), 0);
		check_seed(e->d_name, &d);
		dbuf_release(&d);
		n++;
	}
	closedir(dp);
	ck_assert_int_ge(n, 20);
}
END_TEST

START_TEST(seeds_fresh)
{
	/* the generated seeds meet their own names, so the corpus can be rebuilt */
	const char *dir = getenv("STARK_PROTO_WRITE_CORPUS");

	make_seeds();
	for (int i = 0; i < nseeds; i++)
		check_seed(seeds[i].name, &seeds[i].data);
	if (dir)
		write_corpus(dir);
	free_seeds();
}
END_TEST

static Suite *proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("round_trip");
	TCase *bad = tcase_create("malformed");
	TCase *io = tcase_create("framing");
	TCase *gen = tcase_create("seeds");

	tcase_add_test(tc, request_round_trip);
	tcase_add_test(tc, request_jit_exec);
	tcase_add_test(tc, request_language_precision);
	tcase_add_test(tc, request_baseline);
	tcase_add_test(tc, result_round_trip);
	tcase_add_test(tc, nan_round_trip);
	tcase_add_test(tc, request_defaults);
	tcase_add_test(tc, result_defaults);
	tcase_add_test(tc, lenient_forms);
	tcase_add_test(tc, encode_checks);
	tcase_add_test(tc, setters);
	tcase_add_test(tc, verdict_fields);
	tcase_add_test(tc, status_names);
	suite_add_tcase(s, tc);

	tcase_set_timeout(bad, 60);
	tcase_add_test(bad, truncated_everywhere);
	tcase_add_loop_test(bad, request_wrong_types, 0, N_RQ);
	tcase_add_loop_test(bad, result_wrong_types, 0, N_RS);
	tcase_add_loop_test(bad, request_dup_missing, 0, N_RQ);
	tcase_add_loop_test(bad, result_dup_missing, 0, N_RS);
	tcase_add_test(bad, keys_and_structure);
	tcase_add_test(bad, versions);
	tcase_add_test(bad, huge_headers);
	tcase_add_test(bad, over_caps);
	tcase_add_test(bad, nested_bombs);
	tcase_add_test(bad, ranges);
	tcase_add_test(bad, text_rules);
	tcase_add_test(bad, body_over_frame_max);
	tcase_add_test(bad, corpus);
	suite_add_tcase(s, bad);

	tcase_add_test(gen, seeds_fresh);
	suite_add_tcase(s, gen);

	tcase_add_test(io, frame_pipe);
	tcase_add_test(io, framer_pieces);
	suite_add_tcase(s, io);
	return s;
}

/* With --write-corpus DIR, only the seeds test runs, and writes them. */
int main(int argc, char **argv)
{
	SRunner *sr;
	int failed;

	stark_set_progname(argv[0]);
	sr = srunner_create(proto_suite());
	if (argc == 3 && !strcmp(argv[1], "--write-corpus")) {
		setenv("STARK_PROTO_WRITE_CORPUS", argv[2], 1);
		srunner_run(sr, NULL, "seeds", CK_NORMAL);
	} else {
		srunner_run_all(sr, CK_NORMAL);
	}
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
