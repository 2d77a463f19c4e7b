/*
 * fuzz_proto.c -- libFuzzer target for proto/'s decoders of untrusted
 * bytes.
 *
 * Each input is used three ways: as a request body, as a result body, and
 * as a byte stream fed to the incremental framer in pieces (sized by the
 * input's first byte), each completed frame then decoded as both messages.
 * Beyond "no crash, no leak, no sanitizer report", it checks properties:
 *  - a failed decode returns one of the documented codes and leaves a
 *    non-empty, printable-ASCII message (hostile text is quoted);
 *  - what decodes re-encodes, the encoding decodes again, and encoding
 *    that gives the same bytes (round-trip stability, NaN payloads kept);
 *  - the framer never takes more bytes than offered, and asks for more
 *    only when it has taken all it was given.
 * Seeds: tests/proto-corpus/ (written by test_proto --write-corpus).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

#define FUZZ_FRAME_MAX (1u << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(int rc, const char *err)
{
	if (rc != ST_EPROTO && rc != ST_EVERSION && rc != ST_ETOOBIG && rc != ST_ENOMEM)
		abort();
	if (!err[0])
		abort();
	for (const char *p = err; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			abort();
}

static void same_frames(const struct dbuf *f1, const struct dbuf *f2)
{
	if (f1->len != f2->len || memcmp(f1->p, f2->p, f1->len))
		abort();
}

/* Decodes; if that works, encodes, decodes the encoding and encodes again. */
static void request_round_trip(const void *data, size_t size)
{
	struct proto_request a, b;
	struct dbuf f1, f2;
	char err[256] = "";
	int rc = proto_request_decode(data, size, &a, err, sizeof(err));

	if (rc) {
		check_error(rc, err);
		proto_request_release(&a); /* harmless after a failure */
		return;
	}
	/* the run jail's exec rule reads the solution's untrusted bytes */
	if (proto_request_jit_exec(&a) != proto_request_jit_exec(&a))
		abort();
	/* with the compiled baseline's: exec whenever either asks for it */
	if (proto_request_run_exec(&a) !=
	    (proto_request_jit_exec(&a) || proto_request_baseline_compile(&a)))
		abort();
	dbuf_init(&f1, PROTO_PREFIX_LEN + PROTO_FRAME_MAX);
	dbuf_init(&f2, PROTO_PREFIX_LEN + PROTO_FRAME_MAX);
	if (proto_request_encode(&a, &f1) ||
	    proto_request_decode(f1.p + PROTO_PREFIX_LEN, f1.len - PROTO_PREFIX_LEN, &b, err,
				 sizeof(err)) ||
	    proto_request_encode(&b, &f2))
		abort();
	same_frames(&f1, &f2);
	proto_request_release(&a);
	proto_request_release(&b);
	dbuf_release(&f1);
	dbuf_release(&f2);
}

static void result_round_trip(const void *data, size_t size)
{
	struct proto_result a, b;
	struct dbuf f1, f2;
	char err[256] = "";
	int rc = proto_result_decode(data, size, &a, err, sizeof(err));

	if (rc) {
		check_error(rc, err);
		proto_result_release(&a);
		return;
	}
	dbuf_init(&f1, PROTO_PREFIX_LEN + PROTO_FRAME_MAX);
	dbuf_init(&f2, PROTO_PREFIX_LEN + PROTO_FRAME_MAX);
	if (proto_result_encode(&a, &f1) ||
	    proto_result_decode(f1.p + PROTO_PREFIX_LEN, f1.len - PROTO_PREFIX_LEN, &b, err,
				sizeof(err)) ||
	    proto_result_encode(&b, &f2))
		abort();
	same_frames(&f1, &f2);
	proto_result_release(&a);
	proto_result_release(&b);
	dbuf_release(&f1);
	dbuf_release(&f2);
}

static void frame_stream(const uint8_t *data, size_t size)
{
	struct proto_framer f;
	const void *body;
	size_t len, used, step = size ? 1 + data[0] % 64 : 1;
	int rc;

	proto_framer_init(&f, FUZZ_FRAME_MAX);
	while (size) {
		size_t piece = size < step ? size : step;

		rc = proto_framer_feed(&f, data, piece, &body, &len, &used);
		if (used > piece)
			abort();
		if (rc < 0) {
			if (rc != ST_ETOOBIG && rc != ST_ENOMEM)
				abort();
			break;
		}
		if (rc == 0 && used != piece)
			abort();
		if (rc == 1) {
			if (len > FUZZ_FRAME_MAX || proto_framer_partial(&f))
				abort();
			request_round_trip(body, len);
			result_round_trip(body, len);
		}
		data += used;
		size -= used;
	}
	proto_framer_release(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	request_round_trip(data, size);
	result_round_trip(data, size);
	frame_stream(data, size);
	return 0;
}
