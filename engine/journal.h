/*
 * journal.h -- the event schema of a run's journal (internal to orchestrator/).
 *
 * A run's journal (store/) is the single source of truth: `stark resume`
 * rebuilds everything from it, `stark show` renders it, and the replay
 * providers read it back.  Every event is committed before the orchestrator
 * acts on it; events that must become durable together are gathered in a
 * struct jr_batch and committed in one transaction.
 *
 * Payload layout: a "head" -- one compact JSON object on one line -- then,
 * for events with bulky fields, '\n' and a "body" JSON object, and for
 * events that carry raw bytes, '\n' and a "blob" of exactly head.blob bytes
 * at the end of the payload (the body is then empty when absent).  Compact
 * JSON never holds a raw newline, so the first '\n' ends the head.  State
 * is rebuilt from heads and blobs alone (no JSON string decoding of code),
 * so a 10,000-node journal resumes in tens of milliseconds; bodies
 * (prompts, raw replies, logs) are parsed only when needed.
 *
 * Events (head fields | body fields):
 *   JR_RUN          v, run_id, problem, problem_path, created, options{...}
 *                   | problem_src, config{...}              (first event)
 *   JR_STATE        state, reason, at
 *   JR_SELECT       attempt, node, action, rng, at          (policy chose)
 *   JR_LLM_REQUEST  key, attempt, node, role, retry, temperature (null:
 *                   none), max_tokens, token_field, reasoning_effort,
 *                   thinking, extra_body, llm, model, hash, system_len,
 *                   turns (lengths of the messages after the system
 *                   message: user[, assistant, user]; absent: one user)
 *                   | blob: the system message then the others in order
 *   JR_LLM_RESPONSE key, attempt, role, model, rc, fatal, http_status,
 *                   tries, tokens_in, tokens_out, tokens_reasoning,
 *                   truncated, param, dollars, error, text_len,
 *                   spend{role: {calls, tokens_in, tokens_out,
 *                   tokens_reasoning, dollars}}, spend_models{model: ...},
 *                   ms (latency), at
 *                   | blob: the completion text then the raw body
 *   JR_CHECK        key, attempt, role, retry, reason       (a violation)
 *   JR_NODE         id, parent, attempt, origin, hash, code_len, rejected, at
 *                   | blob: code bytes then plan bytes
 *   JR_EVAL_REQUEST key, attempt, node, hash
 *   JR_EVAL_RESULT  key, attempt, node, status, verdict, speedup,
 *                   runtime_us, ref_runtime_us, wall_ms, at
 *                   | message, log, first_bad, flags, env
 *                   | blob: the feedback given to the tree
 *   JR_ATTEMPT_END  attempt, node, outcome, reason, at
 *   JR_CONFIG       changed (the "key = value" lines that changed), at
 *                   | config (the whole configuration after the change):
 *                   how roles reach their models, changed on resume
 *
 * "at" is the Unix time of journaling (absent from older journals); no
 * reader may rely on it for the search itself, only to show what happened.
 *
 * Ownership: a batch owns the payloads it serialised until commit/release;
 * parse functions return new json_t references owned by the caller.
 */
#ifndef STARK_JOURNAL_H
#define STARK_JOURNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "proto/proto.h"
#include "store/store.h"

#define JR_VERSION   1
#define JR_BATCH_MAX 8

enum jr_type {
	JR_RUN = 1,
	JR_STATE = 2,
	JR_SELECT = 3,
	JR_LLM_REQUEST = 4,
	JR_LLM_RESPONSE = 5,
	JR_CHECK = 6,
	JR_NODE = 7,
	JR_EVAL_REQUEST = 8,
	JR_EVAL_RESULT = 9,
	JR_ATTEMPT_END = 10,
	JR_CONFIG = 11
};
#define JR_TYPE_MAX 11

/* "run", "state", ...; "unknown" for anything else. */
const char *jr_type_name(uint32_t type);

/* Events gathered to be committed in one transaction. */
struct jr_batch {
	struct store_event ev[JR_BATCH_MAX];
	char *payload[JR_BATCH_MAX]; /* owned */
	size_t n;
};

void jr_batch_init(struct jr_batch *b);
/*
 * Serialises head, body (may be NULL) and blob (blob_len bytes, may be 0)
 * into a new event of the batch; sets head's "blob" when blob_len > 0.
 * Borrows all three.  ST_ETOOBIG past STORE_EVENT_MAX or JR_BATCH_MAX.
 */
ST_WUR int jr_batch_add(struct jr_batch *b, uint32_t type, json_t *head, json_t *body,
			const void *blob, size_t blob_len);
/* Same, with the blob given in two parts (written one after the other). */
ST_WUR int jr_batch_add2(struct jr_batch *b, uint32_t type, json_t *head, json_t *body,
			 const void *blob, size_t blob_len, const void *blob2, size_t blob2_len);
/* Commits the batch (a no-op when empty) and empties it, even on failure. */
ST_WUR int jr_batch_commit(struct jr_batch *b, struct store *st, const char *run_id);
void jr_batch_release(struct jr_batch *b);

/* Parses an event's head; ST_EPROTO when it is not a JSON object. */
ST_WUR int jr_parse_head(const void *data, size_t len, json_t **head);
/* Parses an event's body; *body is NULL when the event has none. */
ST_WUR int jr_parse_body(const void *data, size_t len, json_t **body);
/*
 * The blob of an event whose head was parsed (borrowed from data; *n is 0
 * without one).  ST_EPROTO when head.blob does not fit the payload.
 */
ST_WUR int jr_blob(const void *data, size_t len, const json_t *head, const char **blob, size_t *n);
/* Same, given the blob's length (the head's "blob" field). */
ST_WUR int jr_blob_at(const void *data, size_t len, uint64_t blob_len, const char **blob);
/*
 * Reads the event seq of a run (which must have type `type`; ST_ENOENT
 * otherwise), parses its head and body and copies its blob into blob
 * (reset first).  Any of the three outputs may be NULL.
 */
ST_WUR int jr_read(struct store *st, const char *run_id, uint64_t seq, uint32_t type, json_t **head,
		   json_t **body, struct dbuf *blob);

/* Field access with defaults, for heads and bodies read back. */
uint64_t jr_u64(const json_t *o, const char *key, uint64_t dflt);
int64_t jr_i64(const json_t *o, const char *key, int64_t dflt);
double jr_real(const json_t *o, const char *key, double dflt);		/* null -> NaN */
const char *jr_str(const json_t *o, const char *key, const char *dflt); /* borrowed */
bool jr_bool(const json_t *o, const char *key, bool dflt);
/* A double as JSON: NaN and infinities become null. */
json_t *jr_real_new(double v);

/* An evaluation result as a head (scalars) and a body (texts). */
ST_WUR int jr_result_to_json(const struct proto_result *rs, json_t *head, json_t *body);
/* The inverse; rs must be initialised; body may be NULL. */
ST_WUR int jr_result_from_json(const json_t *head, const json_t *body, struct proto_result *rs);

/*
 * A fast reader of the top-level fields of a head, for rebuilding a run
 * without building JSON objects.  Each field's key is set by the caller;
 * jr_head_scan() sets p/n to the raw value text (NULL when absent) and
 * escaped when a string value holds escapes (then read it with jansson).
 * ST_EPROTO when the head is not a JSON object.
 */
struct jr_field {
	const char *key;
	const char *p; /* borrowed from the payload */
	size_t n;
	bool escaped;
};
ST_WUR int jr_head_scan(const void *data, size_t len, struct jr_field *f, size_t n);
bool jr_field_u64(const struct jr_field *f, uint64_t *out);
bool jr_field_real(const struct jr_field *f, double *out); /* null -> NaN */
/* True when the value is the string s (without escapes). */
bool jr_field_is(const struct jr_field *f, const char *s);
/* Copies an unescaped string value into buf; 0 when absent or escaped. */
size_t jr_field_str(const struct jr_field *f, char *buf, size_t len);

/* A 64-bit fingerprint of bytes (FNV-style, a word at a time), as 16
 * lowercase hex digits (out holds 17 bytes).  Stable across versions of
 * the journal: replay files match on it. */
void jr_hash_hex(const void *data, size_t len, char out[17]);

#endif
