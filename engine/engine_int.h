/*
 * engine_int.h -- what the files of engine/ share and nobody else sees (its
 * unit tests aside): writing the journal (batches), the fast head scanner
 * that rebuilds a run, the memo of the open attempt, a request's settings
 * per role, and the steps of an attempt that live in one file and are
 * taken in another.  Internal names of the run files start with run__.
 */
#ifndef STARK_ENGINE_INT_H
#define STARK_ENGINE_INT_H

#include "engine/engine.h"

/* ---- writing and scanning the journal (journal.c) ---- */

/*
 * A batch: events gathered to be committed in one transaction (struct
 * jr_batch, engine.h).  The batch owns the payloads it serialised until
 * commit or release.
 */
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

/* Same, given the blob's length (the head's "blob" field). */
ST_WUR int jr_blob_at(const void *data, size_t len, uint64_t blob_len, const char **blob);

/* An evaluation result as a head (scalars) and a body (texts). */
ST_WUR int jr_result_to_json(const struct proto_result *rs, json_t *head, json_t *body);
/* The inverse; rs must be initialised (it is filled, and owns what it
 * holds); body may be NULL.  ST_EPROTO for a malformed head. */
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

/* ---- a request's settings (route.c) ---- */

/* role's request settings into rq (temperature .. extra; not its messages). */
void route_request(const struct search_config *cfg, enum search_role role, struct llm_request *rq);
/*
 * What to change when a server rejected request member param for role,
 * as one line ("set token_field.code = max_completion_tokens"); "" when
 * no setting of stark's makes that member.
 */
void route_fix(const struct search_config *cfg, enum llm_api api, enum search_role role,
	       const char *param, char *buf, size_t n);
/* $ per million input/output tokens of role on model: price_in/out.ROLE
 * where set (non-zero), else price.MODEL, else 0. */
void route_price(const struct search_config *cfg, enum search_role role, const char *model,
		 double *in, double *out);

/* ---- state.c, rebuild.c, inputs.c ---- */

/* Records a complaint (JR_CHECK) in r->checks. */
ST_WUR int run_check_add(struct run *r, uint32_t attempt, const char *key, const char *reason);
/* The spend of model, created (NULL past RUN_MODELS_MAX models: the last
 * slot, "(other models)", takes the rest). */
struct run_spend *run_model_spend(struct run *r, const char *model);

/* The memo entry of key in the open attempt; NULL when absent (find) or
 * when the memo is full (add, which returns an existing entry too). */
struct run_memo *run_memo_find(struct run *r, const char *key);
struct run_memo *run_memo_add(struct run *r, const char *key);

/* Writes m (taken: decref'd; NULL gives ST_ENOMEM) as id's metadata
 * record, compact JSON; ST_ETOOBIG past STORE_META_MAX. */
ST_WUR int run__meta_put(struct store *st, const char *id, json_t *m);
/* Writes the metadata record (state, attempts, best) for `stark list`. */
ST_WUR int run_meta_write(struct run *r);

/* upgrade.c: a JR_UPGRADE event read back (head and body borrowed). */
ST_WUR int run__apply_upgrade(struct run *r, const json_t *head, const json_t *body, char *err,
			      size_t errlen);
/* The prompt texts of a format as an object by file name (a new
 * reference, NULL when out of memory), and back (ST_ENOENT: o is not an
 * object, ST_EPROTO: a template is missing; out the caller's). */
json_t *run_prompts_json(const struct prompt_set *p, const char *format);
ST_WUR int run_prompts_from_json(const json_t *o, const char *format, struct prompt_set *out);

/* Makes room in r->info for node id (new entries: no verdict yet). */
ST_WUR int run_info_reserve(struct run *r, uint32_t id);

/* ---- the run files (state.c, create.c, agent.c, run.c) ---- */

#define RUN_ERR_MAX 512

/* Why the loop stops (run.c), as the steps of an attempt report it. */
enum stop_kind {
	STOP_NONE = 0,
	STOP_FINISH, /* budget, caps, search exhausted */
	STOP_PAUSE,  /* fatal LLM error, repeated failures */
	STOP_SIGNAL, /* SIGINT/SIGTERM */
	STOP_FAIL,   /* an internal error */
	STOP_WAIT    /* the run waits for an answer (r->pend): not a stop */
};

/* What the agent phase of an attempt produced (agent.c, for run.c). */
enum made_kind { MADE_NODE, MADE_REJECTED, MADE_LLM_ERROR };

struct made {
	enum made_kind kind;
	uint32_t parent;
	enum node_origin origin;
	struct dbuf code; /* owned by the caller, who inits it */
	struct dbuf plan; /* likewise */
	char reason[RUN_ERR_MAX];
};

/* state.c: the wall clock in seconds, for the journal's timestamps. */
double run__now(void);
/* state.c: adds an event to r->batch; takes head and body (decrefs them,
 * NULL head: ST_ENOMEM), borrows blob. */
ST_WUR int run__batch_take(struct run *r, uint32_t type, json_t *head, json_t *body,
			   const void *blob, size_t blob_len);
/* state.c: commits r->batch and advances r->last_seq. */
ST_WUR int run__commit(struct run *r);
/* state.c: the progress line on r->progress (a no-op without one); final
 * ends it with a newline on a terminal. */
void run__progress(struct run *r, bool final);
/* state.c: on a terminal, what the run waits for now (an LLM call, an
 * evaluation), shown on the progress line. */
void run__doing(struct run *r, const char *fmt, ...) ST_PRINTF(2, 3);
/*
 * agent.c: the agent phase of the open attempt (plan -> code, or debug,
 * sample, reflect; each call journal first, rejected answers re-asked).
 * made->code and made->plan must be initialised by the caller.  Returns 0
 * with made->kind set, or 0 with *stop set (caps, a signal, a fatal LLM
 * error; why says which), or a negative code (the journal failed).
 */
ST_WUR int run__phase_agents(struct run *r, struct made *made, enum stop_kind *stop, char *why,
			     size_t whylen);
/*
 * agent.c: journals the reply to the LLM request r->pend waits on (with
 * the spend so far) and commits it; a fatal reply sets r->halt (a pause,
 * why in r->halt_why).  Releases reply.
 */
ST_WUR int run__llm_reply(struct run *r, struct llm_reply *reply);
/* run.c: KernelBench's trials of a run's or a bench's options
 * ("kb_trials", as the request has it; 5 where absent: runs and benches
 * made before the option) as eval_job and run_spec have them: 0 never,
 * -1 none (its verdict not sought), else 1..PROTO_TRIALS_MAX. */
int run__kb_trials(const json_t *options);

/* ---- real evaluations (eval_real.c, for evalpool.c too) ---- */

struct evalrun_zygote;
/* The request for job (id and solution name its key; device copied, or
 * left NULL for the caller to set; cache the build cache), into rq, which
 * must be initialised and owns what it is given, on failure too
 * (ST_ENOMEM). */
ST_WUR int eval__request(const struct eval_job *job, const char *device, const char *cache,
			 struct proto_request *rq);
/* *z, the zygote of evaluator, started on first use; NULL with *off set
 * where it is not wanted ($STARK_ZYGOTE=0) or cannot start (said once):
 * evaluations are then exec'd. */
struct evalrun_zygote *eval__zygote(const char *evaluator, struct evalrun_zygote **z, bool *off);

/* bench.c: creates run i of a bench from its problem file (kept if it exists). */
ST_WUR int bench__create_run(struct bench *b, size_t i, char *err, size_t errlen);
/* bench.c: rewrites the bench's record (its table and problem rows). */
ST_WUR int bench__write_record(struct bench *b);

#endif
