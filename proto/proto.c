/*
 * proto.c -- what every file of proto/ stands on: status names, the
 * messages' defaults (init), the capped setters the evaluator fills a
 * result with, and quoting hostile text for messages, which the schema,
 * the encoder and the decoder share.  It calls nothing else of proto/: releasing and checking a
 * message walk its schema table (schema.c), encoding and decoding are
 * encode.c's and decode.c's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_int.h"

static const char *const status_names[PROTO_ST_COUNT] = {
	[PROTO_ST_CORRECT] = "correct",
	[PROTO_ST_INCORRECT] = "incorrect",
	[PROTO_ST_COMPILE_ERROR] = "compile_error",
	[PROTO_ST_RUNTIME_ERROR] = "runtime_error",
	[PROTO_ST_TIMEOUT] = "timeout",
	[PROTO_ST_CRASHED] = "crashed",
	[PROTO_ST_REJECTED] = "rejected",
	[PROTO_ST_ERROR] = "error",
	[PROTO_ST_COMPILED] = "compiled",
};

const char *proto_status_name(enum proto_status st)
{
	if ((int)st < 0 || (int)st >= PROTO_ST_COUNT)
		return "unknown";
	return status_names[st];
}

int proto_status_parse(const char *name, enum proto_status *st)
{
	for (int i = 0; name && i < PROTO_ST_COUNT; i++) {
		if (!strcmp(name, status_names[i])) {
			*st = (enum proto_status)i;
			return 0;
		}
	}
	return ST_EINVAL;
}

void proto_request_init(struct proto_request *rq)
{
	memset(rq, 0, sizeof(*rq));
	rq->v = PROTO_VERSION;
	rq->stage = PROTO_STAGE_ALL;
	rq->trials = 5;
	rq->kb_trials = 5;
	rq->tol_fp32 = (struct proto_tolerance){1e-4, 1e-4};
	rq->tol_fp16 = (struct proto_tolerance){1e-2, 1e-2};
	rq->timing = true;
	rq->warmup = 1;
	rq->min_reps = 16;
	rq->max_reps = 1000;
	rq->max_time_ms = 5000;
	rq->target_rse = 0.01;
	rq->placements = 32;
	rq->l2_flush = true;
	rq->wall_ms = 600000;
}

void proto_result_init(struct proto_result *rs)
{
	memset(rs, 0, sizeof(*rs));
	rs->v = PROTO_VERSION;
	rs->status = PROTO_ST_ERROR;
	rs->max_abs_err = rs->max_rel_err = NAN;
	rs->runtime_us = rs->runtime_lo_us = rs->runtime_hi_us = NAN;
	rs->ref_runtime_us = rs->ref_lo_us = rs->ref_hi_us = NAN;
	rs->speedup = NAN;
	rs->kb_max_diff = NAN;
	rs->ref_compile_us = rs->ref_compile_lo_us = rs->ref_compile_hi_us = NAN;
	rs->speedup_compile = NAN;
	for (size_t i = 0; i < ST_ARRAY_LEN(rs->stage_ms); i++)
		rs->stage_ms[i] = NAN;
}

/* Copies n bytes of s into a new NUL-terminated string made valid UTF-8. */
static char *dup_clean(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	str_utf8_sanitize(p, n);
	return p;
}

int proto_result_set_message(struct proto_result *rs, const char *fmt, ...)
{
	char *s, *shrunk;
	va_list ap;
	int n;

	s = malloc(PROTO_MESSAGE_MAX + 1);
	if (!s)
		return ST_ENOMEM;
	va_start(ap, fmt);
	n = vsnprintf(s, PROTO_MESSAGE_MAX + 1, fmt, ap);
	va_end(ap);
	if (n < 0) {
		free(s);
		return ST_EINVAL;
	}
	str_utf8_sanitize(s, strlen(s));
	shrunk = realloc(s, strlen(s) + 1);
	free(rs->message);
	rs->message = shrunk ? shrunk : s;
	return 0;
}

int proto_result_set_log(struct proto_result *rs, const void *data, size_t n)
{
	const size_t room = 64; /* for the note between head and tail */
	size_t head, tail;
	char *s;
	int k;

	if (n <= PROTO_LOG_MAX) {
		s = dup_clean(data, n);
		if (!s)
			return ST_ENOMEM;
		goto out_set;
	}
	head = (PROTO_LOG_MAX - room) / 2;
	tail = PROTO_LOG_MAX - room - head;
	s = malloc(PROTO_LOG_MAX + 1);
	if (!s)
		return ST_ENOMEM;
	memcpy(s, data, head);
	k = snprintf(s + head, room + 1, "\n[... %zu bytes cut ...]\n", n - head - tail);
	memcpy(s + head + (size_t)k, (const char *)data + n - tail, tail);
	s[head + (size_t)k + tail] = '\0';
	str_utf8_sanitize(s, head + (size_t)k + tail);
out_set:
	free(rs->log);
	rs->log = s;
	return 0;
}

int proto_result_add_flag(struct proto_result *rs, const char *flag)
{
	size_t n = flag ? strlen(flag) : 0;
	char *s;

	if (!n)
		return ST_EINVAL;
	if (n > PROTO_NAME_MAX)
		return ST_ETOOBIG;
	s = dup_clean(flag, n);
	if (!s)
		return ST_ENOMEM;
	for (uint32_t i = 0; i < rs->nflags; i++) {
		if (!strcmp(rs->flags[i], s)) {
			free(s);
			return 0;
		}
	}
	if (rs->nflags >= PROTO_FLAGS_MAX) {
		free(s);
		return ST_ETOOBIG;
	}
	rs->flags[rs->nflags++] = s;
	return 0;
}

int proto_result_add_env(struct proto_result *rs, const char *k, const char *v)
{
	size_t kn = k ? strlen(k) : 0;
	size_t vn = v ? strnlen(v, PROTO_ENV_VAL_MAX) : 0;
	char *key, *val;

	if (!kn)
		return ST_EINVAL;
	if (kn > PROTO_NAME_MAX)
		return ST_ETOOBIG;
	key = dup_clean(k, kn);
	val = dup_clean(v ? v : "", vn);
	if (!key || !val)
		goto out_nomem;
	for (uint32_t i = 0; i < rs->nenv; i++) {
		if (!strcmp(rs->env[i].key, key)) {
			free(key);
			free(rs->env[i].val);
			rs->env[i].val = val;
			return 0;
		}
	}
	if (rs->nenv >= PROTO_ENV_MAX) {
		free(key);
		free(val);
		return ST_ETOOBIG;
	}
	rs->env[rs->nenv].key = key;
	rs->env[rs->nenv].val = val;
	rs->nenv++;
	return 0;
out_nomem:
	free(key);
	free(val);
	return ST_ENOMEM;
}

void proto_quote(char *dst, size_t dstlen, const void *s, size_t n)
{
	const unsigned char *p = s;
	size_t o = 0, lim = n < 40 ? n : 40;

	if (!dstlen)
		return;
	for (size_t i = 0; i < lim && o + 5 < dstlen; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
			dst[o++] = (char)p[i];
		else
			o += (size_t)snprintf(dst + o, dstlen - o, "\\x%02x", p[i]);
	}
	if (n > lim && o + 4 < dstlen) {
		memcpy(dst + o, "...", 3);
		o += 3;
	}
	dst[o] = '\0';
}