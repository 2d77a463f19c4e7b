/*
 * encode.c -- writes a request or result as one frame, with msgpack-c's
 * packer.  This is the only file in STARK that includes msgpack.h; the
 * decoder (decode.c) is hand-written because msgpack-c's unpacker cannot
 * be bounded (see there).
 *
 * The struct is checked against the schema first (schema.c), so nothing
 * leaves that the other side would reject.  Then every field is written in
 * table order, "v" first; a NULL string is written as "".  The packer
 * appends to the caller's dbuf through a callback, so the dbuf's cap bounds
 * the frame; the 4-byte length prefix is reserved first and patched once
 * the body's size is known.  msgpack-c picks the shortest form for each
 * integer and writes doubles as float64 bit for bit (NaN payloads kept).
 */
#include <string.h>

#include <msgpack.h>

#include "proto/proto_int.h"

struct sink {
	struct dbuf *out;
	int rc; /* the dbuf's error, since the packer only sees -1 */
};

static int sink_write(void *data, const char *buf, size_t len)
{
	struct sink *s = data;

	s->rc = dbuf_append(s->out, buf, len);
	return s->rc ? -1 : 0;
}

static int pack_str(msgpack_packer *pk, const char *s, size_t n)
{
	if (!s) {
		s = "";
		n = 0;
	}
	if (msgpack_pack_str(pk, n))
		return -1;
	return msgpack_pack_str_body(pk, s, n);
}

static int pack_text(msgpack_packer *pk, const char *s)
{
	return pack_str(pk, s, s ? strlen(s) : 0);
}

static int pack_flags(msgpack_packer *pk, const struct proto_result *rs)
{
	if (msgpack_pack_array(pk, rs->nflags))
		return -1;
	for (uint32_t i = 0; i < rs->nflags; i++)
		if (pack_text(pk, rs->flags[i]))
			return -1;
	return 0;
}

static int pack_env(msgpack_packer *pk, const struct proto_result *rs)
{
	if (msgpack_pack_map(pk, rs->nenv))
		return -1;
	for (uint32_t i = 0; i < rs->nenv; i++)
		if (pack_text(pk, rs->env[i].key) || pack_text(pk, rs->env[i].val))
			return -1;
	return 0;
}

/* Packs the value of field f from the struct at base; 0 or -1. */
static int pack_value(msgpack_packer *pk, const struct proto_field *f, const char *base)
{
	const void *p = base + f->off;
	const char *s;

	switch (f->type) {
	case PF_VERSION:
	case PF_U32:
		return msgpack_pack_uint32(pk, *(const uint32_t *)p);
	case PF_U64:
		return msgpack_pack_uint64(pk, *(const uint64_t *)p);
	case PF_STAGE:
		return msgpack_pack_uint32(pk, *(const enum proto_stage *)p);
	case PF_STATUS:
		return pack_text(pk, proto_status_name(*(const enum proto_status *)p));
	case PF_BOOL:
		return *(const bool *)p ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	case PF_F64:
		return msgpack_pack_double(pk, *(const double *)p);
	case PF_STR:
		return pack_text(pk, *(char *const *)p);
	case PF_SRC:
		s = *(char *const *)p;
		return pack_str(pk, s, proto_src_len(s, *(const size_t *)(base + f->len_off)));
	case PF_FLAGS:
		return pack_flags(pk, (const struct proto_result *)base);
	case PF_ENV:
		return pack_env(pk, (const struct proto_result *)base);
	}
	return -1;
}

static int encode(const struct proto_schema *sc, const void *obj, struct dbuf *out)
{
	static const unsigned char zero[PROTO_PREFIX_LEN];
	struct sink sink = {out, 0};
	msgpack_packer pk;
	size_t start = out->len, body;
	int rc;

	rc = proto_check_fields(sc, obj, NULL, 0);
	if (rc)
		return rc;
	rc = dbuf_append(out, zero, sizeof(zero));
	if (rc)
		return rc;
	msgpack_packer_init(&pk, &sink, sink_write);
	if (msgpack_pack_map(&pk, (uint32_t)sc->nfields))
		goto out_undo;
	for (size_t i = 0; i < sc->nfields; i++) {
		if (pack_text(&pk, sc->fields[i].key) || pack_value(&pk, &sc->fields[i], obj))
			goto out_undo;
	}
	body = out->len - start - PROTO_PREFIX_LEN;
	if (body > PROTO_FRAME_MAX) {
		sink.rc = ST_ETOOBIG;
		goto out_undo;
	}
	proto_put_be32((unsigned char *)out->p + start, (uint32_t)body);
	return 0;
out_undo:
	out->len = start;
	out->p[start] = '\0';
	return sink.rc ? sink.rc : ST_EINVAL;
}

int proto_request_encode(const struct proto_request *rq, struct dbuf *out)
{
	return encode(&proto_request_schema, rq, out);
}

int proto_result_encode(const struct proto_result *rs, struct dbuf *out)
{
	return encode(&proto_result_schema, rs, out);
}
