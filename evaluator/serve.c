/*
 * serve.c -- one evaluation on the evaluator's descriptors (evaluator.h):
 * the request frame from fd 0, the harness (pyembed.c), the result frame to
 * fd 3.  stark-eval's main() runs it once in a fresh process; the zygote
 * (zygote.c) runs it in every jailed process it forks, where the
 * interpreter is already started.
 *
 * Every request that arrives gets a result frame: an undecodable request or
 * an interpreter that does not start becomes status "error" with a message.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "evaluator/evaluator.h"
#include "evaluator/evaluator_int.h"
#include "proto/proto.h"

/* Encodes rs and writes it to the result channel. */
static int write_result(const struct proto_result *rs)
{
	struct dbuf frame;
	int rc;

	dbuf_init(&frame, PROTO_PREFIX_LEN + PROTO_FRAME_MAX);
	rc = proto_result_encode(rs, &frame);
	if (rc) {
		stark_warn("cannot encode the result: %s", stark_strerror(rc));
		goto out_free;
	}
	rc = proto_frame_write(EVAL_FD_RESULT, &frame);
	if (rc)
		stark_warn("cannot write the result to fd %d: %s", EVAL_FD_RESULT,
			   stark_strerror(rc));
out_free:
	dbuf_release(&frame);
	return rc;
}

/* An "error" result for failures before the harness runs. */
static int write_error(const char *id, const char *fmt, const char *detail)
{
	struct proto_result rs;
	int rc;

	proto_result_init(&rs);
	rs.status = PROTO_ST_ERROR;
	rs.id = str_dup(id ? id : "");
	rc = rs.id ? proto_result_set_message(&rs, fmt, detail) : ST_ENOMEM;
	if (!rc)
		rc = write_result(&rs);
	proto_result_release(&rs);
	return rc;
}

/* Reads and decodes the request; wipes the raw bytes (they hold the seed). */
static int read_request(struct proto_request *rq, char *err, size_t errlen)
{
	struct dbuf body;
	int rc;

	dbuf_init(&body, PROTO_FRAME_MAX);
	rc = proto_frame_read(EVAL_FD_REQUEST, PROTO_FRAME_MAX, &body);
	if (rc) {
		snprintf(err, errlen, "cannot read the request frame on fd %d: %s",
			 EVAL_FD_REQUEST, stark_strerror(rc));
		goto out_free;
	}
	rc = proto_request_decode(body.p, body.len, rq, err, errlen);
out_free:
	if (body.p)
		explicit_bzero(body.p, body.len);
	dbuf_release(&body);
	return rc;
}

int eval_serve_one(const struct evpy_opts *o, const char *init_err)
{
	struct proto_request rq;
	struct proto_result rs;
	char err[1024];
	pid_t self = getpid();
	int rc, flags;

	/* The result channel must exist, and no program we exec may inherit it. */
	flags = fcntl(EVAL_FD_RESULT, F_GETFD);
	if (flags < 0 || fcntl(EVAL_FD_RESULT, F_SETFD, flags | FD_CLOEXEC) < 0) {
		stark_warn("fd %d (the result channel) is not open: %s", EVAL_FD_RESULT,
			   strerror(errno));
		return 3;
	}
	/* So is the GPU lock, where there is one: workers never need it. */
	flags = fcntl(EVAL_FD_LOCK, F_GETFD);
	if (flags >= 0)
		(void)fcntl(EVAL_FD_LOCK, F_SETFD, flags | FD_CLOEXEC);

	proto_request_init(&rq);
	rc = read_request(&rq, err, sizeof(err));
	if (rc)
		return write_error("", "evaluator: bad request: %s", err) ? 3 : 0;
	/* The seed leaves the request before Python sees anything of it. */
	evpy_set_secret(rq.seed);
	explicit_bzero(&rq.seed, sizeof(rq.seed));

	proto_result_init(&rs);
	if (init_err) {
		rc = write_error(rq.id, "evaluator: %s", init_err);
		goto out;
	}
	rc = evpy_init(o, err, sizeof(err));
	if (rc) {
		rc = write_error(rq.id, "evaluator: %s", err);
		goto out;
	}
	rc = evpy_evaluate(&rq, &rs);
	if (getpid() != self)
		_exit(70); /* a worker must never get here */
	if (rc)
		rc = write_error(rq.id, "evaluator: %s", stark_strerror(rc));
	else
		rc = write_result(&rs);
	/* The result is out; the workers' ends are ours alone to wait for. */
	evpy_after_result();
out:
	proto_result_release(&rs);
	proto_request_release(&rq);
	fflush(stdout);
	fflush(stderr);
	return rc ? 3 : 0;
}
