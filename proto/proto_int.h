/*
 * proto_int.h -- proto/'s internals: the schema tables that the encoder,
 * the decoder and the checks all walk, so the wire format and its rules
 * are written down once (schema.c), and small helpers they share.
 * Nothing outside proto/ includes this file.
 */
#ifndef STARK_PROTO_INT_H
#define STARK_PROTO_INT_H

#include "proto/proto.h"

/* Longest key in any schema; longer keys are unknown without a lookup. */
#define PROTO_KEY_MAX 32

enum proto_ftype {
	PF_VERSION, /* uint32_t, must equal PROTO_VERSION; first key */
	PF_U32,	    /* uint32_t in [min, max] */
	PF_U64,	    /* uint64_t in [min, max] */
	PF_STAGE,   /* enum proto_stage, sent as an unsigned int */
	PF_STATUS,  /* enum proto_status, sent as its name */
	PF_BOOL,    /* bool */
	PF_F64,	    /* double in [dmin, dmax], NaN if nan_ok */
	PF_STR,	    /* char *, UTF-8 text, at most max bytes */
	PF_SRC,	    /* char * plus a size_t length at len_off; str or bin */
	PF_FLAGS,   /* result.flags/nflags */
	PF_ENV	    /* result.env/nenv */
};

struct proto_field {
	const char *key;
	enum proto_ftype type;
	bool required;
	size_t off;	   /* where the value lives in the struct */
	size_t len_off;	   /* PF_SRC: where its length lives */
	uint64_t min, max; /* integers: range; strings: max is the cap */
	double dmin, dmax; /* PF_F64 */
	bool nan_ok;	   /* PF_F64 */
};

struct proto_schema {
	const char *what; /* "request" or "result" */
	const struct proto_field *fields;
	size_t nfields;
	/* Rules between fields, after the per-field ones passed. */
	int (*check)(const void *obj, char *err, size_t errlen);
};

extern const struct proto_schema proto_request_schema;
extern const struct proto_schema proto_result_schema;

/* schema.c */
ST_WUR int proto_check_fields(const struct proto_schema *s, const void *obj, char *err,
			      size_t errlen);
void proto_free_fields(const struct proto_schema *s, void *obj);
/* Length of a PF_SRC value: len, or strlen(s) when len is 0. */
size_t proto_src_len(const char *s, size_t len);

/* proto.c */
/* Writes at most 40 bytes of s[0..n) into dst as printable ASCII,
 * escaping the rest as \xNN, for error messages about hostile text. */
void proto_quote(char *dst, size_t dstlen, const void *s, size_t n);

static inline uint32_t proto_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void proto_put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

#endif
