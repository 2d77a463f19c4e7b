/*
 * decode.c -- a bounded msgpack reader for the two messages, written by
 * hand on purpose.
 *
 * Why not msgpack-c's unpacker: it trusts the headers it reads.  A 5-byte
 * array32 header claiming 2^32-1 elements makes msgpack_unpack() allocate
 * an element array sized from the claim (tens of GiB) before it has seen a
 * single element, and deep nesting recurses per level; nothing in its API
 * caps either.  The subset we accept is tiny -- one map of known keys whose
 * values are uints, float64s, bools, strings, one array of strings and one
 * map of strings -- so a reader over the bytes is short and easy to audit:
 *
 *  - every length or count is compared with the bytes that remain before
 *    it is used (a string of n bytes needs n more bytes; a container of n
 *    entries needs at least n bytes per entry), and with the field's cap;
 *  - nothing is allocated except a copy of a string that is already known
 *    to be present in the input and under its cap, so memory is bounded by
 *    the body length plus one small allocation per string (at most 24
 *    fields + 32 flags + 128 env strings);
 *  - there is no recursion and no skipping of unknown values: a value must
 *    have the type its key expects, checked on its first byte, so nested
 *    bombs are rejected at their first byte;
 *  - the first key must be "v", so a peer on another version gets
 *    ST_EVERSION rather than an error about a key it added.
 *
 * After the map is read, trailing bytes, missing required keys and the
 * schema's rules (schema.c) are checked; any failure is ST_EPROTO with a
 * message naming the field.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_int.h"

struct rd {
	const unsigned char *p; /* next byte */
	size_t left;		/* bytes after p */
	const char *key;	/* the field being read, for messages */
	char *err;
	size_t errlen;
};

/* A name for the msgpack type that starts with byte b. */
static const char *type_name(unsigned char b)
{
	if (b <= 0x7f || (b >= 0xcc && b <= 0xcf))
		return "unsigned int";
	if (b >= 0xe0 || (b >= 0xd0 && b <= 0xd3))
		return "signed int";
	if (b <= 0x8f || b == 0xde || b == 0xdf)
		return "map";
	if (b <= 0x9f || b == 0xdc || b == 0xdd)
		return "array";
	if (b <= 0xbf || (b >= 0xd9 && b <= 0xdb))
		return "string";
	switch (b) {
	case 0xc0:
		return "nil";
	case 0xc1:
		return "reserved byte 0xc1";
	case 0xc2:
	case 0xc3:
		return "bool";
	case 0xc4:
	case 0xc5:
	case 0xc6:
		return "bin";
	case 0xca:
		return "float32";
	case 0xcb:
		return "float64";
	}
	return "ext";
}

/* Records a failure about the current field (or the message) and returns rc. */
static int fail(struct rd *r, int rc, const char *fmt, ...) ST_PRINTF(3, 4);
static int fail(struct rd *r, int rc, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	if (!r->err || !r->errlen)
		return rc;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (r->key)
		snprintf(r->err, r->errlen, "field \"%s\": %s", r->key, what);
	else
		snprintf(r->err, r->errlen, "message: %s", what);
	return rc;
}

static int need(struct rd *r, size_t n)
{
	if (r->left < n)
		return fail(r, ST_EPROTO, "truncated: needs %zu bytes, %zu left", n, r->left);
	return 0;
}

static int wrong_type(struct rd *r, const char *want)
{
	return fail(r, ST_EPROTO, "expected %s, got %s", want, type_name(r->p[0]));
}

/* Big-endian unsigned integer of w bytes at p. */
static uint64_t be(const unsigned char *p, size_t w)
{
	uint64_t v = 0;

	for (size_t i = 0; i < w; i++)
		v = v << 8 | p[i];
	return v;
}

/* Reads a header: one type byte, then w bytes of big-endian length or value. */
static int take_header(struct rd *r, size_t w, uint64_t *v)
{
	int rc = need(r, 1 + w);

	if (rc)
		return rc;
	*v = be(r->p + 1, w);
	r->p += 1 + w;
	r->left -= 1 + w;
	return 0;
}

/* Consumes the type byte of a fix* form and returns its embedded value. */
static uint64_t take_fix(struct rd *r, unsigned char mask)
{
	uint64_t v = r->p[0] & mask;

	r->p++;
	r->left--;
	return v;
}

static int rd_uint(struct rd *r, uint64_t *v)
{
	unsigned char b;
	int rc = need(r, 1);

	if (rc)
		return rc;
	b = r->p[0];
	if (b <= 0x7f) {
		*v = take_fix(r, 0x7f);
		return 0;
	}
	if (b >= 0xcc && b <= 0xcf)
		return take_header(r, (size_t)1 << (b - 0xcc), v);
	return wrong_type(r, "unsigned int");
}

static int rd_f64(struct rd *r, double *d)
{
	uint64_t bits;
	int rc = need(r, 1);

	if (rc)
		return rc;
	if (r->p[0] != 0xcb)
		return wrong_type(r, "float64");
	rc = take_header(r, 8, &bits);
	if (!rc)
		memcpy(d, &bits, sizeof(*d));
	return rc;
}

static int rd_bool(struct rd *r, bool *v)
{
	int rc = need(r, 1);

	if (rc)
		return rc;
	if (r->p[0] != 0xc2 && r->p[0] != 0xc3)
		return wrong_type(r, "bool");
	*v = r->p[0] == 0xc3;
	r->p++;
	r->left--;
	return 0;
}

/* A container header: count of entries, each at least min_entry bytes. */
static int rd_container(struct rd *r, bool map, uint64_t *n)
{
	unsigned char b, fix = map ? 0x80 : 0x90;
	size_t min_entry = map ? 2 : 1;
	int rc = need(r, 1);

	if (rc)
		return rc;
	b = r->p[0];
	if ((b & 0xf0) == fix)
		*n = take_fix(r, 0x0f);
	else if (b == (map ? 0xde : 0xdc))
		rc = take_header(r, 2, n);
	else if (b == (map ? 0xdf : 0xdd))
		rc = take_header(r, 4, n);
	else
		return wrong_type(r, map ? "map" : "array");
	if (rc)
		return rc;
	if (*n > r->left / min_entry)
		return fail(r, ST_EPROTO, "truncated: %s of %" PRIu64 " entries in %zu bytes",
			    map ? "map" : "array", *n, r->left);
	return 0;
}

/* A str (or bin, if allowed) of at most cap bytes; *s points into the input. */
static int rd_str(struct rd *r, bool bin_ok, uint64_t cap, const char **s, size_t *n)
{
	unsigned char b;
	uint64_t len;
	int rc = need(r, 1);

	if (rc)
		return rc;
	b = r->p[0];
	if (b >= 0xa0 && b <= 0xbf)
		len = take_fix(r, 0x1f);
	else if (b >= 0xd9 && b <= 0xdb)
		rc = take_header(r, (size_t)1 << (b - 0xd9), &len);
	else if (bin_ok && b >= 0xc4 && b <= 0xc6)
		rc = take_header(r, (size_t)1 << (b - 0xc4), &len);
	else
		return wrong_type(r, bin_ok ? "string or bin" : "string");
	if (rc)
		return rc;
	if (len > cap)
		return fail(r, ST_EPROTO, "%" PRIu64 " bytes, at most %" PRIu64, len, cap);
	rc = need(r, (size_t)len);
	if (rc)
		return rc;
	*s = (const char *)r->p;
	*n = (size_t)len;
	r->p += len;
	r->left -= len;
	return 0;
}

/* A text string copied out: at most cap bytes, no NUL (UTF-8 is checked
 * with the schema's rules later). */
static int rd_text(struct rd *r, uint64_t cap, char **out)
{
	const char *s;
	size_t n;
	int rc = rd_str(r, false, cap, &s, &n);

	if (rc)
		return rc;
	if (memchr(s, '\0', n))
		return fail(r, ST_EPROTO, "contains a nul byte");
	*out = malloc(n + 1);
	if (!*out)
		return fail(r, ST_ENOMEM, "out of memory");
	memcpy(*out, s, n);
	(*out)[n] = '\0';
	return 0;
}

static int rd_src(struct rd *r, const struct proto_field *f, char *base)
{
	char **dst = (char **)(base + f->off);
	const char *s;
	size_t n;
	int rc = rd_str(r, true, f->max, &s, &n);

	if (rc)
		return rc;
	*dst = malloc(n + 1);
	if (!*dst)
		return fail(r, ST_ENOMEM, "out of memory");
	memcpy(*dst, s, n);
	(*dst)[n] = '\0';
	*(size_t *)(base + f->len_off) = n;
	return 0;
}

static int rd_flags(struct rd *r, struct proto_result *rs)
{
	uint64_t n;
	int rc = rd_container(r, false, &n);

	if (rc)
		return rc;
	if (n > PROTO_FLAGS_MAX)
		return fail(r, ST_EPROTO, "%" PRIu64 " entries, at most %d", n, PROTO_FLAGS_MAX);
	for (uint32_t i = 0; i < n; i++) {
		rc = rd_text(r, PROTO_NAME_MAX, &rs->flags[i]);
		if (rc)
			return rc;
		rs->nflags = i + 1;
	}
	return 0;
}

static int rd_env(struct rd *r, struct proto_result *rs)
{
	uint64_t n;
	int rc = rd_container(r, true, &n);

	if (rc)
		return rc;
	if (n > PROTO_ENV_MAX)
		return fail(r, ST_EPROTO, "%" PRIu64 " entries, at most %d", n, PROTO_ENV_MAX);
	for (uint32_t i = 0; i < n; i++) {
		struct proto_kv *kv = &rs->env[i];

		rc = rd_text(r, PROTO_NAME_MAX, &kv->key);
		if (rc)
			return rc;
		rc = rd_text(r, PROTO_ENV_VAL_MAX, &kv->val);
		if (rc) {
			free(kv->key);
			kv->key = NULL;
			return rc;
		}
		rs->nenv = i + 1;
	}
	return 0;
}

/* Reads the value of field f into the struct at base. */
static int rd_value(struct rd *r, const struct proto_field *f, char *base)
{
	void *p = base + f->off;
	const char *s;
	char name[PROTO_KEY_MAX + 1];
	uint64_t u;
	size_t n;
	int rc;

	switch (f->type) {
	case PF_VERSION:
		rc = rd_uint(r, &u);
		if (rc)
			return rc;
		if (u != PROTO_VERSION)
			return fail(r, ST_EVERSION, "version %" PRIu64 ", this build speaks %d", u,
				    PROTO_VERSION);
		*(uint32_t *)p = PROTO_VERSION;
		return 0;
	case PF_U32:
		rc = rd_uint(r, &u);
		if (rc)
			return rc;
		if (u > UINT32_MAX)
			return fail(r, ST_EPROTO, "%" PRIu64 " does not fit in 32 bits", u);
		*(uint32_t *)p = (uint32_t)u;
		return 0; /* the range is the schema check's */
	case PF_STAGE:
		rc = rd_uint(r, &u);
		if (rc)
			return rc;
		if (u < f->min || u > f->max)
			return fail(r, ST_EPROTO,
				    "%" PRIu64 " is out of range %" PRIu64 "..%" PRIu64, u, f->min,
				    f->max);
		*(enum proto_stage *)p = (enum proto_stage)u;
		return 0;
	case PF_U64:
		return rd_uint(r, (uint64_t *)p);
	case PF_STATUS:
		rc = rd_str(r, false, PROTO_KEY_MAX, &s, &n);
		if (rc)
			return rc;
		memcpy(name, s, n);
		name[n] = '\0';
		if (memchr(s, '\0', n) || proto_status_parse(name, (enum proto_status *)p)) {
			char q[200];

			proto_quote(q, sizeof(q), s, n);
			return fail(r, ST_EPROTO, "unknown status \"%s\"", q);
		}
		return 0;
	case PF_BOOL:
		return rd_bool(r, (bool *)p);
	case PF_F64:
		return rd_f64(r, (double *)p);
	case PF_STR:
		return rd_text(r, f->max, (char **)p);
	case PF_SRC:
		return rd_src(r, f, base);
	case PF_FLAGS:
		return rd_flags(r, (struct proto_result *)base);
	case PF_ENV:
		return rd_env(r, (struct proto_result *)base);
	}
	return fail(r, ST_EPROTO, "bad schema type");
}

static const struct proto_field *lookup(const struct proto_schema *sc, const char *k, size_t n,
					size_t *idx)
{
	for (size_t i = 0; i < sc->nfields; i++) {
		if (strlen(sc->fields[i].key) == n && !memcmp(sc->fields[i].key, k, n)) {
			*idx = i;
			return &sc->fields[i];
		}
	}
	return NULL;
}

/* Reads one key and its value; *seen tracks keys already read. */
static int rd_entry(struct rd *r, const struct proto_schema *sc, char *base, uint64_t i,
		    uint64_t *seen)
{
	const struct proto_field *f;
	const char *k;
	char q[200];
	size_t n, idx;
	int rc;

	r->key = NULL;
	if (r->left && !(r->p[0] >= 0xa0 && r->p[0] <= 0xbf) &&
	    !(r->p[0] >= 0xd9 && r->p[0] <= 0xdb))
		return fail(r, ST_EPROTO, "key %" PRIu64 ": expected string, got %s", i,
			    type_name(r->p[0]));
	rc = rd_str(r, false, UINT32_MAX, &k, &n);
	if (rc)
		return rc;
	f = n <= PROTO_KEY_MAX ? lookup(sc, k, n, &idx) : NULL;
	proto_quote(q, sizeof(q), k, n);
	if (!f)
		return fail(r, ST_EPROTO, "unknown key \"%s\"", q);
	if (i == 0 && f->type != PF_VERSION)
		return fail(r, ST_EPROTO, "first key is \"%s\", expected \"v\"", q);
	if (*seen & (UINT64_C(1) << idx))
		return fail(r, ST_EPROTO, "duplicate key \"%s\"", q);
	*seen |= UINT64_C(1) << idx;
	r->key = f->key;
	return rd_value(r, f, base);
}

/* Every string field left NULL becomes "", so decoded strings are never NULL. */
static int fill_strings(const struct proto_schema *sc, char *base)
{
	for (size_t i = 0; i < sc->nfields; i++) {
		char **p = (char **)(base + sc->fields[i].off);

		if (sc->fields[i].type != PF_STR && sc->fields[i].type != PF_SRC)
			continue;
		if (!*p && !(*p = calloc(1, 1)))
			return ST_ENOMEM;
	}
	return 0;
}

static int decode(const struct proto_schema *sc, const void *body, size_t len, void *obj, char *err,
		  size_t errlen)
{
	struct rd r = {body, len, NULL, err, errlen};
	uint64_t n, seen = 0;
	int rc;

	if (len > PROTO_FRAME_MAX)
		return fail(&r, ST_ETOOBIG, "%zu bytes, at most %u", len, PROTO_FRAME_MAX);
	if (!len)
		return fail(&r, ST_EPROTO, "empty");
	rc = rd_container(&r, true, &n);
	if (rc)
		return rc;
	/* n is not compared with the schema's size here: a map with too many
	 * entries fails on its first unknown or duplicate key, which says more
	 * (and reads "v" first), and n is already bounded by the bytes left. */
	for (uint64_t i = 0; i < n; i++) {
		rc = rd_entry(&r, sc, obj, i, &seen);
		if (rc)
			return rc;
	}
	r.key = NULL;
	if (r.left)
		return fail(&r, ST_EPROTO, "%zu trailing bytes after the map", r.left);
	for (size_t i = 0; i < sc->nfields; i++) {
		if (sc->fields[i].required && !(seen & (UINT64_C(1) << i))) {
			r.key = sc->fields[i].key;
			return fail(&r, ST_EPROTO, "missing");
		}
	}
	if (fill_strings(sc, obj))
		return fail(&r, ST_ENOMEM, "out of memory");
	rc = proto_check_fields(sc, obj, err, errlen);
	return rc ? ST_EPROTO : 0;
}

int proto_request_decode(const void *body, size_t len, struct proto_request *rq, char *err,
			 size_t errlen)
{
	int rc;

	proto_request_init(rq);
	rc = decode(&proto_request_schema, body, len, rq, err, errlen);
	if (rc)
		proto_request_release(rq);
	return rc;
}

int proto_result_decode(const void *body, size_t len, struct proto_result *rs, char *err,
			size_t errlen)
{
	int rc;

	proto_result_init(rs);
	rc = decode(&proto_result_schema, body, len, rs, err, errlen);
	if (rc)
		proto_result_release(rs);
	return rc;
}
