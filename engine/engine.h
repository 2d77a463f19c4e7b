/*
 * engine.h -- running searches durably: a STARK run as a state machine
 * whose every step is journaled before it is acted on.  The public header
 * of engine/; its names start with run_ (runs), jr_ (the journal), route_
 * (how each agent role reaches its model), llm_provider_ /
 * eval_provider_ (where replies and results come from) and bench_ (many
 * runs in one event loop, and their table).  The commands (cli/) use it.
 * It is longer than the 800 lines a file should stay under because it is
 * the module's one public header: every call the commands make of runs,
 * the journal, the providers and benches is declared here, with its
 * ownership and its errors.
 *
 * The engine drives the method (search/search.h), calls LLMs through llm/,
 * evaluations through pool/ (engine/eval_real.c), and keeps everything in
 * the store (store/).  Files: state.c (a run in memory, its state and
 * configuration events, its progress line), create.c (a new run),
 * rebuild.c (a run from its journal), agent.c (the agents of one attempt),
 * run.c (the attempts, the steps and the blocking loop), view.c (a run as
 * readers see it), journal.c (the event format), bench.c (a bench's
 * record), sched.c (its event loop), table.c (its results table),
 * evalpool.c (evaluations over several devices),
 * inputs.c (templates and configuration files), route.c (roles to models),
 * provider.c, replay.c and eval_real.c (the providers).  Internals shared
 * between them: engine_int.h.
 *
 * Errors: a call that can fail returns 0 or a negative ST_E* code
 * (common.h); where it takes an err buffer the message is written there
 * and nothing is printed.  Ownership: what a call returns through an out
 * parameter is the caller's (freed by the matching _free or _release);
 * arguments are borrowed for the call unless a call says otherwise.
 */
#ifndef STARK_ENGINE_H
#define STARK_ENGINE_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "llm/llm.h"
#include "proto/proto.h"
#include "search/search.h"
#include "store/store.h"

/* ---- the journal (journal.c) ------------------------------------------- */

/*
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
 *                   runtime_us, ref_runtime_us, wall_ms, at, and where the
 *                   compiled baseline was timed speedup_compile,
 *                   ref_compile_us (absent from older journals)
 *                   | message, log, first_bad, flags, env
 *                   | blob: the feedback given to the tree
 *   JR_ATTEMPT_END  attempt, node, outcome, reason, at
 *   JR_CONFIG       changed (the "key = value" lines that changed), at
 *                   | config (the whole configuration after the change):
 *                   how roles reach their models, changed on resume
 *   JR_UPGRADE      stark{...}, from{...} (null: unrecorded), changed, at
 *                   | prompts{file name: text}, config: the run continues
 *                   with another stark (resume --accept-upgrade): its
 *                   prompts (this stark's where it recorded none) and its
 *                   settings as that stark reads them
 *
 * JR_RUN's head also holds stark{release, commit, proto, store, prompts}
 * (the stark that created the run) and its body prompts{file name: text}
 * (the templates the run uses); both are absent from runs created before
 * stark 0.2.0 (store format 1).
 *
 * "at" is the Unix time of journaling (absent from older journals); no
 * reader may rely on it for the search itself, only to show what happened.
 *
 * Parse functions return new json_t references owned by the caller; blobs
 * and field values are borrowed from the event's payload.
 */
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
	JR_CONFIG = 11,
	JR_UPGRADE = 12
};
#define JR_TYPE_MAX 12

/* "run", "state", ...; "unknown" for anything else (static strings). */
const char *jr_type_name(uint32_t type);

/* Events gathered to be committed in one transaction; written by the
 * engine alone (engine_int.h), here because struct run holds one. */
struct jr_batch {
	struct store_event ev[JR_BATCH_MAX];
	char *payload[JR_BATCH_MAX]; /* owned */
	size_t n;
};

/* Parses an event's head into a new reference (*head, the caller's);
 * ST_EPROTO when it is not a JSON object, ST_ENOMEM. */
ST_WUR int jr_parse_head(const void *data, size_t len, json_t **head);
/* Parses an event's body into a new reference (*body, the caller's; NULL
 * when the event has none); ST_EPROTO when it is malformed. */
ST_WUR int jr_parse_body(const void *data, size_t len, json_t **body);
/*
 * The blob of an event whose head was parsed (borrowed from data; *n is 0
 * without one).  ST_EPROTO when head.blob does not fit the payload.
 */
ST_WUR int jr_blob(const void *data, size_t len, const json_t *head, const char **blob, size_t *n);
/*
 * Reads the event seq of a run (which must have type `type`; ST_ENOENT
 * otherwise), parses its head and body (new references, the caller's) and
 * copies its blob into blob (reset first; its cap applies).  Any of the
 * three outputs may be NULL.  Also the store's codes (store_scan).
 */
ST_WUR int jr_read(struct store *st, const char *run_id, uint64_t seq, uint32_t type, json_t **head,
		   json_t **body, struct dbuf *blob);

/* Field access with defaults, for heads and bodies read back (o may be
 * NULL; a field of another type gives the default).  Cannot fail. */
uint64_t jr_u64(const json_t *o, const char *key, uint64_t dflt);
int64_t jr_i64(const json_t *o, const char *key, int64_t dflt);
double jr_real(const json_t *o, const char *key, double dflt);		/* null -> NaN */
const char *jr_str(const json_t *o, const char *key, const char *dflt); /* borrowed */
bool jr_bool(const json_t *o, const char *key, bool dflt);
/* A double as a new JSON reference: NaN and infinities become null; NULL
 * only when out of memory. */
json_t *jr_real_new(double v);

/* A 64-bit fingerprint of bytes (FNV-style, a word at a time), as 16
 * lowercase hex digits (out holds 17 bytes).  Stable across versions of
 * the journal: replay files match on it. */
void jr_hash_hex(const void *data, size_t len, char out[17]);

/* ---- providers (provider.c, replay.c, eval_real.c, route.c) ------------- */

/*
 * Where a run's LLM replies and evaluation results come from.
 *
 * The run loop sees one blocking call per LLM request and per evaluation,
 * made only after the request is durable in the journal.  Two kinds each:
 *
 *   LLM   real   -- llm/ over HTTP (openai:URL, anthropic:URL)
 *         replay -- replay:FILE, recorded replies, no network
 *   eval  real   -- `stark-eval` through pool/pool.h (default)
 *         replay -- replay:FILE, recorded results (tests, ablations)
 *
 * Replay files are JSON Lines.  `stark export RUN --responses` and
 * `stark export RUN --results` write them from a run's journal, which is
 * therefore the recording.  Matching rules (docs/RUNS.md):
 *   LLM:  the first unused line whose "key" equals the request key (keys
 *         are "a<attempt>.<role>.r<retry>", so a run re-executed with the
 *         same configuration asks for them in the order of issue); else a
 *         line with "key": "*" and the request's "role" (reusable); else
 *         the call fails as fatal (the run pauses, resumable).
 *   eval: a line whose "key" equals the evaluation key ("n<node>") and
 *         whose "hash" (if it has one) equals the candidate's code hash, so
 *         a recorded run replays exactly; else a line with that code hash
 *         (an ablation meeting the same code); else a line with "key": "*";
 *         else the evaluation ends with status "error".
 *
 * A stop flag (set by SIGINT/SIGTERM) makes a call return ST_ECANCELED as
 * soon as it can; nothing is journaled for a cancelled call, so resume
 * re-issues it.
 *
 * Providers borrow their configuration strings only during the
 * constructor; replies and results are owned by the caller.
 */
#define REPLAY_FILE_MAX (1ull << 30) /* bytes in a replay file */

struct llm_provider {
	/*
	 * Sends rq, known to the journal under key for agent role, and waits
	 * for the reply (out->rc says how the call ended).  Returns 0, or
	 * ST_ECANCELED when *stop was raised first.
	 */
	int (*call)(struct llm_provider *p, const char *key, const char *role,
		    const struct llm_request *rq, struct llm_reply *out);
	/*
	 * The same without waiting, for a driver with many calls in flight:
	 * returns 0 when the call is in flight (its reply comes from poll,
	 * with rq->tag), 1 when it was answered at once into *now (replay; or
	 * a request that could not be sent, as a failed reply), or a negative
	 * code.  rq is copied.  poll moves up to n replies into out within
	 * timeout_ms and returns how many (or a negative code).
	 */
	int (*submit)(struct llm_provider *p, const char *key, const char *role,
		      const struct llm_request *rq, struct llm_reply *now);
	int (*poll)(struct llm_provider *p, int timeout_ms, struct llm_reply *out, size_t n);
	/* ms every call still waits after a 429 (0: not held) */
	uint64_t (*held_ms)(struct llm_provider *p);
	void (*free)(struct llm_provider *p); /* frees p and all it holds */
	const volatile sig_atomic_t *stop; /* borrowed; may be NULL */
	const char *name;		   /* "openai", "anthropic", "replay" */
};

struct eval_job {
	const char *key;	  /* "n<node>" */
	const char *hash;	  /* code hash (jr_hash_hex) */
	const char *problem_name; /* borrowed, as are the rest */
	const char *problem_src;
	size_t problem_len;
	const char *code;
	size_t code_len;
	const char *device; /* "cpu" or "cuda:N" */
	const char *format; /* "kernelbench" or "fast" */
	const char *language;  /* the request's "language": "auto" or "triton" */
	const char *precision; /* "fp32", "fp16" or "bf16" */
	const char *baseline;  /* "eager" or "compile" (request "baseline"); NULL: eager */
	int kb_trials;	       /* KernelBench's trials (request "kb_trials"): 0 its
				  default (5), -1 none (its verdict not sought) */
	uint64_t seed;	    /* the run's evaluation seed */
	bool insecure;	    /* evaluate with fewer jail layers than required */
};

/* An evaluation a provider finished (eval_provider.poll). */
struct eval_done {
	uint64_t tag;
	int rc;			 /* 0 with res; negative: it could not be run */
	struct proto_result res; /* initialised; the caller releases it */
	char device[32];	 /* where it ran */
};

struct eval_provider {
	/*
	 * Evaluates job (borrowed) into out (initialised by the caller, whose
	 * it stays); 0 with a result in out whatever the verdict, ST_ECANCELED
	 * when *stop was raised first, or a negative code when the evaluation
	 * could not be run at all (nothing journaled; the run stops as failed).
	 */
	int (*eval)(struct eval_provider *p, const struct eval_job *job, struct proto_result *out);
	/*
	 * Without waiting (NULL where eval answers at once, as replay does):
	 * start copies job and returns 0, or ST_EBUSY when every slot is taken;
	 * poll moves up to n finished evaluations into out (each out[i].res
	 * initialised by poll) within timeout_ms and returns how many; cancel
	 * kills whatever is in flight (nothing of it is reported).
	 */
	int (*start)(struct eval_provider *p, const struct eval_job *job, uint64_t tag);
	int (*poll)(struct eval_provider *p, int timeout_ms, struct eval_done *out, size_t n);
	void (*cancel)(struct eval_provider *p);
	unsigned slots;	      /* evaluations it runs at once (1 without start) */
	unsigned busy;	      /* of which in flight now */
	void (*free)(struct eval_provider *p); /* frees p and all it holds */
	const volatile sig_atomic_t *stop; /* borrowed; may be NULL */
	const char *name; /* "stark-eval", "replay" */
};

/*
 * The real client over HTTP: a client per distinct endpoint, model and key
 * among routes[0..n), each the llm_config of the role named roles[i]
 * (strings and keys copied; keys held in memory only).  A call for a role
 * without a route fails as fatal.  *out is the caller's
 * (llm_provider_free).  ST_ETOOBIG past its clients' cap, ST_ENOMEM, or
 * llm_client_new()'s codes.
 */
ST_WUR int llm_provider_http(const char *const *roles, const struct llm_config *routes, size_t n,
			     struct llm_provider **out);

/* ---- routes: how each role reaches its model (route.c) ---- */

/*
 * Where role's requests go: llm.ROLE, else the run's --llm (llm); model.ROLE,
 * else --model (model).  out's strings point into cfg or the arguments.
 * ST_EINVAL (with err) when role has no endpoint or no model.
 */
struct route {
	enum llm_api api;
	const char *endpoint; /* "openai:URL" or "anthropic:URL" */
	const char *base_url; /* the URL */
	const char *model;
};
ST_WUR int route_of(const struct search_config *cfg, const char *llm, const char *model,
		    enum search_role role, struct route *out, char *err, size_t errlen);
/* Whether the policy asks role for anything. */
bool route_role_used(enum search_policy policy, enum search_role role);
/*
 * Checks every used role's settings against what its dialect can say (an
 * Anthropic thinking budget below max_tokens and temperature none or 1
 * with thinking; no max_completion_tokens there; no thinking on
 * OpenAI-compatible servers; extra_body a JSON object that sets nothing
 * stark sets).  ST_EINVAL with err naming the key and the fix.
 */
ST_WUR int route_check(const struct search_config *cfg, const char *llm, const char *model,
		       char *err, size_t errlen);
/* Replies from a replay file (read whole at once, at most REPLAY_FILE_MAX
 * bytes); *out is the caller's.  On failure err names the file and line:
 * ST_ENOENT/ST_EIO, ST_ETOOBIG, ST_EPROTO for a malformed line. */
ST_WUR int llm_provider_replay(const char *path, struct llm_provider **out, char *err,
			       size_t errlen);
/*
 * Real evaluations by the stark-eval program at evaluator (copied), with
 * the default build cache (evalrun_default_cache; created if missing).
 * ST_ENOENT when the program is not executable, ST_EIO when the cache
 * cannot be made (both warned on stderr), ST_ENOMEM.
 */
ST_WUR int eval_provider_real(const char *evaluator, struct eval_provider **out);
/*
 * Real evaluations through one pool of slots: devices[0..ndev) ("cpu",
 * "cuda:N"), per_device evaluations in flight on each (builds overlap;
 * on a GPU the slots share one GPU lock, so one timing runs at a time),
 * one zygote for all (the CPU's slots share a lock too: one timing at a
 * time there).  An evaluation whose device reports `error` while
 * another device is alive is sent to another device instead of being
 * reported; a device where EVAL_DEVICE_DEATHS evaluations in a row ended
 * so, each then judged elsewhere, is taken out of the pool with a
 * message on stderr, and its work goes to the others.  The job's device
 * is ignored: the pool's slot decides.  As eval_provider_real() for
 * errors; ST_EINVAL for no device.
 */
#define EVAL_DEVICES_MAX   16
#define EVAL_DEVICE_DEATHS 2
ST_WUR int eval_provider_pool(const char *evaluator, const char *const *devices, size_t ndev,
			      unsigned per_device, struct eval_provider **out);
/* The devices of a pool and whether each is alive, for a progress line:
 * writes "cuda:0 3/4, cuda:1 0/4 (out)": in flight / slots.  Cannot fail. */
void eval_provider_pool_describe(const struct eval_provider *p, char *buf, size_t len);

/* Results from a replay file; as llm_provider_replay(). */
ST_WUR int eval_provider_replay(const char *path, struct eval_provider **out, char *err,
				size_t errlen);

/* Free a provider; NULL is a no-op. */
static inline void llm_provider_free(struct llm_provider *p)
{
	if (p)
		p->free(p);
}

static inline void eval_provider_free(struct eval_provider *p)
{
	if (p)
		p->free(p);
}

/* ---- runs (state.c, create.c, rebuild.c, run.c) ------------------------- */

/*
 * A run is its journal (above) plus what can be derived from it: the
 * tree, the policy's RNG, spend per role, the attempt in progress.  The
 * same loader serves `stark resume` (which then continues the loop),
 * `stark show` and `stark export` (which only read).
 *
 * A run makes one attempt at a time, with one LLM call or one evaluation
 * in flight (a bench runs many runs side by side).  An attempt is
 *   SELECT -> agent calls (plan -> code, or debug, sample, reflect; each
 *   anchor violation retried cfg.verify_retries times) -> NODE ->
 *   EVAL_REQUEST -> EVAL_RESULT -> ATTEMPT_END
 * and every event is committed before what it announces happens.  Resume
 * replays the completed attempts into the tree, restores the RNG from the
 * last SELECT, and re-enters the open attempt: an LLM call whose response
 * is journaled is answered from the journal, a journaled request without a
 * response is re-sent with the journaled messages, an evaluation without a
 * result is run again.
 *
 * Ownership: a struct run owns everything it points to except the store
 * (borrowed from the caller for the run's lifetime) and the providers
 * (borrowed from run_attach() until run_free()).  A struct run is read by
 * the commands and the report (its fields are public) and written by the
 * engine alone.
 */
#define RUN_MEMO_MAX	     64		/* LLM requests in one attempt */
#define RUN_ANSWER_MAX	     (256u << 10) /* bytes of a rejected answer its retry repeats */
#define RUN_KEY_MAX	     48		/* "a123456.reflect.r12" */
#define RUN_LLM_ERRORS_PAUSE 3		/* consecutive failed calls that pause the run */
#define RUN_PROBLEM_MAX	     (4u << 20) /* bytes of a problem file */
#define RUN_REASON_MAX	     512
#define RUN_META_EVERY_NS    1000000000ull /* metadata refresh between attempts */

enum run_state {
	RUN_RUNNING = 0,
	RUN_INTERRUPTED = 1, /* paused: signal, fatal LLM error; resumable */
	RUN_FINISHED = 2,    /* budget, caps or search exhausted */
	RUN_FAILED = 3	     /* an internal error stopped it; resumable */
};
/* "running", "interrupted", "finished", "failed" ("unknown" otherwise), and
 * back (ST_EINVAL for another name). */
const char *run_state_name(enum run_state s);
ST_WUR int run_state_parse(const char *name, enum run_state *out);

/* What `stark run` was asked to do (all borrowed). */
struct run_spec {
	const char *run_id;	  /* NULL: generated from the problem's name */
	const char *problem_path; /* read whole, journaled */
	const char *llm;	  /* "openai:URL", "anthropic:URL", "replay:FILE" */
	const char *model;	  /* may be NULL for replay */
	const char *device;	  /* "cpu", "cuda", "cuda:N" */
	const char *eval;	  /* "stark-eval" or "replay:FILE" */
	const char *format;	  /* candidate format: "kernelbench", "fast" or
				     "triton" (KernelBench's, in Triton) */
	const char *precision;	  /* "fp32" (NULL), "fp16" or "bf16" */
	const char *baseline;	  /* "eager" (NULL) or "compile": the reference
				     also timed under torch.compile */
	int kb_trials;		  /* KernelBench's trials: 0 its default (5), -1
				     none (its verdict not sought), else 1..max */
	bool insecure_sandbox;	  /* run candidates where the jail lacks layers */
	const struct search_config *cfg;
};

struct run_spend {
	uint64_t calls, tokens_in, tokens_out;
	uint64_t tokens_reasoning; /* of tokens_out, as the servers reported */
	double dollars;
};

#define RUN_MODELS_MAX 16 /* models with spend of their own; more share "(other models)" */

/* Spend per model, whatever roles asked it. */
struct run_model_spend {
	char model[CONFIG_STR_MAX];
	struct run_spend s;
};

/* A journaled complaint: a rejected answer of an agent (JR_CHECK). */
struct run_check {
	uint32_t attempt;
	char key[RUN_KEY_MAX];
	char *reason; /* owned */
};

/* What the journal says about the LLM calls of the open attempt. */
struct run_memo {
	char key[RUN_KEY_MAX];
	uint64_t req_seq;  /* JR_LLM_REQUEST, 0 if none */
	uint64_t resp_seq; /* last JR_LLM_RESPONSE, 0 if none */
	bool resp_fatal;   /* that response was a fatal error: re-send */
	bool checked;	   /* a JR_CHECK for this key is journaled */
};

/* Facts about a node that the tree does not keep. */
struct run_node_info {
	uint32_t attempt;
	int verdict; /* enum proto_status, or -1 before an evaluation */
	double runtime_us;
	double ref_runtime_us;
	double speedup_compile; /* against the compiled reference; NaN when none */
	double ref_compile_us;	/* the compiled reference's median; NaN when none */
	uint64_t node_seq; /* its JR_NODE event (0 for the root) */
	uint64_t result_seq;
};

struct run_attempt {
	bool open;  /* a SELECT without its ATTEMPT_END */
	uint32_t k; /* attempt number, from 1 */
	uint64_t select_seq;
	struct search_choice choice;
	uint32_t node; /* created node, TREE_NONE before */
	bool eval_requested;
	bool eval_done;
	struct run_memo memo[RUN_MEMO_MAX];
	size_t nmemo;
};

/*
 * What a stepped run waits for (run_step): an LLM reply or an evaluation
 * result, whose request is journaled and committed already; or nothing
 * more in this process (the run finished, paused or failed, journaled).
 */
enum run_wait {
	RUN_WAIT_LLM = 1,
	RUN_WAIT_EVAL = 2,
	RUN_WAIT_DONE = 3
};

/*
 * The request a run waits on, owned by the run until the answer is given
 * (run_llm_reply, run_eval_result) or the run is freed.  The driver reads
 * it and must not change it; rq.tag is the driver's to set.
 */
struct run_pending {
	enum run_wait kind; /* 0 when none */
	char key[RUN_KEY_MAX];
	enum search_role role;		/* LLM */
	struct llm_request rq;		/* msgs point into msgs/text below */
	struct llm_message msgs[4];	/* contents owned */
	double max_dollars;		/* the most this call can cost (caps) */
	struct eval_job job;		/* eval: borrows the tree and the run */
	char hash[17];
	uint64_t t0;			/* when the run asked (monotonic ns) */
};

struct run {
	struct store *st; /* borrowed */
	struct store_lock *lock;
	char id[STORE_RUN_ID_MAX + 1];
	json_t *options; /* head.options of JR_RUN */
	char *problem_src;
	size_t problem_len;
	char problem[PROTO_PATH_MAX];
	double created;
	struct search_config cfg;
	struct search_tree *tree;
	struct run_node_info *info; /* per node id */
	size_t info_cap;
	struct search_rng rng;
	uint32_t attempts; /* finished attempts */
	struct run_spend spend[ROLE_COUNT];
	struct run_model_spend models[RUN_MODELS_MAX];
	size_t nmodels;
	struct run_check *checks; /* every complaint, in journal order */
	size_t nchecks, checks_cap;
	enum run_state state;
	char reason[RUN_REASON_MAX];
	struct run_attempt cur;
	uint64_t last_seq;
	uint64_t eval_seed;
	uint32_t llm_errors; /* consecutive attempts ended by an LLM error */
	uint64_t meta_ns;    /* when the metadata was last written (monotonic) */
	bool fresh;	     /* created by run_create, not yet looped */
	json_t *producer;    /* the stark that made it or last took it over
				(JR_RUN/JR_UPGRADE head.stark); NULL before 0.2.0 */
	struct prompt_set prompts; /* the run's own (recorded), or loaded to run */
	bool prompts_loaded;
	bool prompts_recorded; /* prompts come from the journal */
	char *cfg_text;	       /* the configuration as last journaled (JR_RUN,
				  JR_CONFIG, JR_UPGRADE body "config"; owned) */
	struct jr_batch batch;
	struct llm_provider *llm;
	struct eval_provider *eval;
	const volatile sig_atomic_t *stop;
	FILE *progress; /* NULL: quiet */
	bool progress_tty;
	char doing[96]; /* what the run waits for (terminal progress) */
	char *pause_log; /* the log of an evaluation that ended in `error`,
			    journaled with the pause it causes (owned) */
	uint64_t tag;
	struct run_pending pend; /* what run_step() left the run waiting on */
	int halt;		 /* a stop decided outside run_step (enum stop_kind) */
	char halt_why[RUN_REASON_MAX];
};

/* ---- which stark made a run, its prompts, upgrades (inputs.c, upgrade.c) ---- */

/*
 * Where the prompt templates are when a run's configuration names no
 * prompts_dir: $STARK_PROMPTS, else the prompts/ folder of stark's
 * installation (stark_part_dir).  Written to buf.  ST_ENOENT, with err
 * naming every path tried, when the installation lacks them.
 */
ST_WUR int run_prompts_dir(char *buf, size_t len, char *err, size_t errlen);
/*
 * Loads every template of a format from dir (each capped at 256 KiB) into
 * out, whose texts are then the caller's (prompt_release); the format
 * document is format_NAME.txt for "fast" or "kernelbench".  On failure out
 * holds nothing and err names the file: ST_EINVAL (unknown format, a NUL
 * byte), ST_ETOOBIG, or io_read_file()'s code.
 */
ST_WUR int run_prompts_load(const char *dir, const char *format, struct prompt_set *out,
			    char *err, size_t errlen);
/* The prompt set's hash (16 hex digits): every template file of dir, both
 * formats' documents included.  0, or run_prompts_load()'s codes. */
ST_WUR int run_prompts_set_hash(const char *dir, char out[17], char *err, size_t errlen);
/* The templates a new run of format gets (cfg's prompts_dir, else
 * run_prompts_dir()) into out (the caller's), with the set's hash. */
ST_WUR int run_prompts_current(const struct search_config *cfg, const char *format,
			       struct prompt_set *out, char hash[17], char *err, size_t errlen);
/*
 * This stark as a new JSON object (NULL when out of memory): release,
 * commit, proto (wire protocol version), store (store format version) and
 * prompts (prompts_hash; omitted when NULL).  Runs, benches and results
 * record it as "stark".
 */
json_t *run_producer_new(const char *prompts_hash);
/*
 * The settings this stark reads differently from the run's journaled
 * configuration, one "; "-separated entry each ("KEY = VALUE (this stark's
 * default; the run recorded none)", "KEY (recorded; this stark has no such
 * setting)", "KEY: recorded A, read as B"), into out (reset first).  An
 * empty out: none.  0, ST_ENOMEM or ST_ETOOBIG.
 */
ST_WUR int run_settings_changed(const struct run *r, struct dbuf *out);
/* Whether r may continue only after run_accept_upgrade(): it recorded no
 * prompts (made before stark 0.2.0), or this stark reads its settings
 * differently. */
bool run_needs_upgrade(const struct run *r);
/*
 * What resuming r with this stark means, in buf, or NULL when nothing
 * changed.  Where the run may continue as it is (its own prompts and
 * settings, under another stark) the note says so; where it needs
 * run_accept_upgrade() the note says exactly what changed and how to
 * accept it.
 */
const char *run_upgrade_note(const struct run *r, char *buf, size_t len);
/* Lets a run that needs it continue with this stark: the run takes this
 * stark's prompts if it recorded none, and its settings as this stark
 * reads them; journaled as JR_UPGRADE.  0 when none is needed.  Needs the
 * run's lock. */
ST_WUR int run_accept_upgrade(struct run *r, char *err, size_t errlen);

/*
 * Creates a new run from spec (borrowed for the call): reads the problem,
 * takes the run's lock, journals JR_RUN and JR_STATE(running) and writes
 * the metadata.  *out is owned by the caller (run_free) and holds the lock;
 * it borrows st for its lifetime.  ST_EINVAL for a bad id or problem file,
 * ST_EEXIST when the id is taken, ST_EBUSY when locked, or the store's
 * codes; err gets a message.
 */
ST_WUR int run_create(struct store *st, const struct run_spec *spec, struct run **out, char *err,
		      size_t errlen);
/*
 * Loads a run by scanning its journal.  With lock, takes the run's lock
 * first (ST_EBUSY when another process holds it).  *out is the caller's
 * (run_free) and borrows st for its lifetime.  ST_EINVAL for an invalid
 * id, ST_ENOENT for an unknown run (or one never started), ST_EPROTO or
 * ST_EVERSION for a journal it cannot read; err gets a message naming the
 * run and the event.
 */
ST_WUR int run_load(struct store *st, const char *run_id, bool lock, struct run **out, char *err,
		    size_t errlen);
/* Frees r and all it owns, releasing its lock; NULL is a no-op. */
void run_free(struct run *r);

/* The providers the loop uses (borrowed; the caller frees them after
 * run_free) and the flag that stops it (borrowed likewise; may be NULL).
 * Sets the providers' stop flag too. */
void run_attach(struct run *r, struct llm_provider *llm, struct eval_provider *eval,
		const volatile sig_atomic_t *stop);

/*
 * Journals JR_STATE(running) (on resume) and runs attempts until the run
 * finishes, is interrupted (*stop, a fatal LLM error, repeated LLM
 * failures) or fails.  Needs run_attach() first.  Returns 0 when it ran
 * to a stop it journaled (see r->state and r->reason), a negative code
 * when the journal itself could not be written (err says so).  It is
 * run_begin + run_step with the providers' blocking calls.
 */
ST_WUR int run_loop(struct run *r, char *err, size_t errlen);

/*
 * The run as a state machine, for a driver that keeps many runs and
 * their requests in flight (the bench, engine/bench.h's loop):
 *
 *	run_begin(r);                     journals "running" on resume
 *	while (run_step(r, &w) == 0 && w != RUN_WAIT_DONE) {
 *		w == RUN_WAIT_LLM:  send r->pend.rq, then run_llm_reply()
 *		w == RUN_WAIT_EVAL: evaluate r->pend.job, then run_eval_result()
 *	}
 *
 * run_step makes every decision of the method (search/) and journals it;
 * it returns as soon as the run needs an answer from outside, whose
 * request is already durable.  A step re-enters the open attempt exactly
 * as resume does (journaled replies are read back), so a run's tree
 * depends only on the replies and results it is given, never on when or
 * beside what it ran.  A driver that stops with a request in flight calls
 * run_interrupt: nothing of that request's answer is journaled, and
 * resume asks again.  Providers are not needed (run_attach is for
 * run_loop).  All return 0 or a negative code when the journal could not
 * be written (err says so; the run must then be freed).
 */
ST_WUR int run_begin(struct run *r, char *err, size_t errlen);
ST_WUR int run_step(struct run *r, enum run_wait *wait, char *err, size_t errlen);
/* The reply to r->pend (an LLM request): journaled with its spend; a
 * fatal reply pauses the run at the next step.  reply is released. */
ST_WUR int run_llm_reply(struct run *r, struct llm_reply *reply, char *err, size_t errlen);
/* The result of r->pend (an evaluation), wall_ms as the driver saw it:
 * journaled and given to the tree; `error` pauses the run at the next
 * step (not the candidate's outcome).  res stays the caller's. */
ST_WUR int run_eval_result(struct run *r, const struct proto_result *res, double wall_ms,
			   char *err, size_t errlen);
/* Drops what the run waits on and journals it interrupted (reason copied). */
ST_WUR int run_interrupt(struct run *r, const char *reason, char *err, size_t errlen);
/* Drops r->pend (freeing what it owns); cannot fail. */
void run_pending_clear(struct run *r);

/* Journals a state change (reason may be NULL; copied) and rewrites the
 * metadata; the store's codes on failure, r unchanged then. */
ST_WUR int run_set_state(struct run *r, enum run_state s, const char *reason);

/*
 * Journals a new configuration for a loaded run (`stark resume --set`):
 * only the keys search_config_key_live() names may differ from r->cfg
 * (ST_EINVAL, with err naming the first other key that does).  changed
 * (the differing `key = value` lines) is written into *changed when not
 * NULL (owned by the caller).  ST_EINVAL too when nothing changes.
 */
ST_WUR int run_config_change(struct run *r, const struct search_config *c, char **changed,
			     char *err, size_t errlen);

/* The model role asks now: model.ROLE, else the run's --model ("" when
 * neither); and the server: llm.ROLE, else the run's --llm.  Borrowed from
 * r until its configuration changes. */
const char *run_role_model(const struct run *r, enum search_role role);
const char *run_role_llm(const struct run *r, enum search_role role);

/* The fastest correct node other than the root, or TREE_NONE; it may be
 * slower than the reference (see run_beats_reference). */
uint32_t run_best(const struct run *r);
/* Whether node id is correct and faster than the reference (speedup > 1). */
bool run_beats_reference(const struct run *r, uint32_t id);
/* Total spend over roles. */
struct run_spend run_spend_total(const struct run *r);

/* Default store folder, written to buf: $STARK_STORE, else
 * $XDG_DATA_HOME/stark (when absolute), else ~/.local/share/stark.
 * ST_ENOENT without HOME, ST_ETOOBIG when it does not fit. */
ST_WUR int run_default_store(char *buf, size_t len);

/* ---- views (view.c) ---- */

/*
 * The object `stark show --json` prints and `stark report` builds on
 * (docs/RUNS.md), as a new reference (the caller's); NULL when out of
 * memory.  r is read only (its lock tested, see run_shown_state).
 */
json_t *run_json(struct run *r);
/*
 * The state a reader should be shown: s, except that a run journaled as
 * "running" while no process holds its lock was killed, and is shown as
 * "interrupted".  Takes and drops the lock of run id in st to find out.
 */
enum run_state run_shown_state(struct store *st, const char *id, enum run_state s);
/* The reason to show beside the shown state: the journaled reason, or why
 * a killed run reads as interrupted (static text). */
const char *run_shown_reason(enum run_state shown, enum run_state journaled, const char *reason);

/* ---- benches (bench.c, sched.c, table.c) ------------------------------ */

/*
 * A bench runs a suite of problems under several policies at once: one
 * run per problem x policy, each an ordinary run (its own journal, lock,
 * `stark show RUN_ID`), all driven by one event loop in one process
 * (bench_drive): up to runs_in_flight runs stepped at once, up to
 * llm_in_flight LLM requests in flight across them, evaluations through
 * one pool of slots.  A bench is a store record of its own (its metadata
 * is the record docs/REPORT.md describes, kind "bench"); its journal
 * holds BENCH_EV_SPEC (what was asked, with the base configuration) and
 * BENCH_EV_STATE events.  Its runs are created, from the problem files,
 * before the first is stepped, so resume needs nothing but the store.
 * The bench's lock (store_lock_run on its id) keeps a second process out;
 * each run it steps is locked too.
 */
#define BENCH_ID_MAX	   32
#define BENCH_PROBLEMS_MAX 4096
#define BENCH_RUNS_MAX	   (3 * BENCH_PROBLEMS_MAX)
#define BENCH_EV_SPEC	   1
#define BENCH_EV_STATE	   2
#define BENCH_EV_CAP	   3 /* max_dollars, changed on resume */

struct bench_problem {
	const char *path; /* the problem file */
	int level;	  /* KernelBench level, 0 when unknown */
};

/* What `stark bench` was asked to do (all borrowed). */
struct bench_spec {
	const char *bench_id; /* NULL: generated */
	const struct bench_problem *problems;
	size_t nproblems;
	const enum search_policy *policies;
	size_t npolicies;
	const char *llm, *model, *eval, *format;
	const char *precision; /* "fp32" (NULL), "fp16" or "bf16" */
	const char *devices; /* "cpu", "cuda:0,1", resolved by the caller */
	bool insecure_sandbox;
	unsigned runs_in_flight, llm_in_flight, evals_per_device;
	double max_dollars;   /* 0: no cap */
	const char *baseline; /* "eager" or "compile" */
	int kb_trials;	      /* as run_spec's */
	const struct search_config *cfg; /* the base; each run sets its policy */
};

/* One run of a bench, with what the table needs of it. */
struct bench_run {
	char run_id[STORE_RUN_ID_MAX + 1];
	char problem[PROTO_NAME_MAX]; /* the file's name */
	int level;
	enum search_policy policy;
	bool done;		/* finished: not stepped again */
	enum run_state state;
	uint32_t attempts;
	double best;		/* best correct speedup; NaN when none */
	uint64_t llm_calls;
	struct run_spend spend[ROLE_COUNT];
	double gpu_seconds;	/* correctness and timing time of its evaluations */
	int kb_correct;		/* verdicts.kernelbench: -1 absent, 0, 1 */
	double kb_best;		/* its best speedup among those correct; NaN */
	bool compile_asked;	/* the bench's --baseline compile */
	int compile_state;	/* the compiled baseline: 1 timed for a correct
				   result, 0 unavailable (a result said why),
				   -1 neither (not asked, nothing timed yet) */
	double best_compile;	/* the best speedup_compile of its correct
				   results; NaN when none */
	char compile_why[200];	/* the first reason it was unavailable */
};

struct bench {
	struct store *st; /* borrowed */
	struct store_lock *lock;
	char id[STORE_RUN_ID_MAX + 1];
	json_t *spec;	  /* BENCH_EV_SPEC's head */
	double created;
	enum run_state state;
	char reason[RUN_REASON_MAX];
	struct search_config cfg; /* the base configuration (its policy unused) */
	struct bench_run *runs;
	size_t nruns;
	uint64_t last_seq;
	uint64_t meta_ns; /* when the record was last written (monotonic) */
	bool accept_upgrade; /* runs that recorded no prompts take this stark's
				(run_accept_upgrade) as they start; set by the caller */
};

/*
 * Creates a bench: journals its spec, creates every run (from the problem
 * files; a run that exists already is kept) and writes the record.
 * *out is the caller's (bench_free) and holds the bench's lock.
 * ST_EINVAL (bad id or spec), ST_EEXIST, ST_EBUSY, run_create()'s codes;
 * err says which.
 */
ST_WUR int bench_create(struct store *st, const struct bench_spec *spec, struct bench **out,
			char *err, size_t errlen);
/* Loads a bench (with lock: ST_EBUSY when another process has it); its
 * runs' summaries are read from their journals. */
ST_WUR int bench_load(struct store *st, const char *id, bool lock, struct bench **out, char *err,
		      size_t errlen);
void bench_free(struct bench *b);
/* Whether the record id is a bench (its metadata says kind "bench"). */
bool bench_is(struct store *st, const char *id);
/* Journals a new --max-dollars for the bench (0: no cap); ST_EINVAL below 0. */
ST_WUR int bench_set_cap(struct bench *b, double max_dollars);
/* Journals the bench's state and rewrites its record (table included). */
ST_WUR int bench_set_state(struct bench *b, enum run_state s, const char *reason);
/* Re-reads run i's summary from its journal (b->runs[i]). */
ST_WUR int bench_refresh_run(struct bench *b, size_t i);
/* Fills b->runs[i] from a loaded run (no journal read but its results'). */
ST_WUR int bench_summary_from(struct bench *b, size_t i, struct run *r);
/* The most the bench can still spend: every unfinished attempt of every
 * run at its worst (each call at max_tokens, every retry taken). */
double bench_max_dollars(const struct bench *b);
/* A spec string of the bench's options (borrowed from b->spec). */
const char *bench_opt(const struct bench *b, const char *key, const char *dflt);

/* How the loop reaches the outside (borrowed for bench_drive). */
struct bench_io {
	struct llm_provider *llm;   /* shared; NULL: each run gets its own */
	struct eval_provider *eval; /* shared; NULL: each run gets its own */
	/* a run's own providers (replay), freed by the loop when it leaves */
	int (*make)(void *arg, struct run *r, struct llm_provider **llm,
		    struct eval_provider **eval);
	void *arg;
	const volatile sig_atomic_t *stop;
	/* what happened, for the display: one event (a line) or a redraw */
	void (*event)(void *arg, const struct bench *b, const char *line);
	void (*status)(void *arg, const struct bench *b, const char *line);
};

/*
 * Runs the bench until every run is done, or it pauses (a signal, a fatal
 * LLM error, the dollar cap, a run that cannot be loaded) or fails; the
 * bench's state says which, journaled.  0, or a negative code when a
 * journal could not be written (err says so).
 */
ST_WUR int bench_drive(struct bench *b, const struct bench_io *io, char *err, size_t errlen);

/* ---- the table (table.c) ---- */

/* Geometric mean of x[0..n) (all > 0); 1.0 for n = 0. */
double bench_geomean(const double *x, size_t n);
/* Median of x[0..n) (sorted in place); 1.0 for n = 0. */
double bench_median(double *x, size_t n);
/* Share of x[0..n) (best speedups, 1.0 where none) strictly above p; 0 for n = 0. */
double bench_fast_p(const double *best, const bool *correct, size_t n, double p);
/*
 * The table: one row per level x policy, in first-seen order, with level,
 * policy, problems, success_rate, fast_1, fast_1_5, fast_2,
 * mean_speedup, geomean_speedup, median_speedup (of the best correct
 * candidate, 1.0 where none), success_rate_kernelbench,
 * fast_1_kernelbench (null where no result says), attempts, llm_calls,
 * tokens_in/tokens_out/dollars per role (spend), dollars, gpu_seconds;
 * and against the compiled reference (null where no run of the row asked
 * for it): problems_compile (the row's problems less compile_unavailable,
 * those whose compiled baseline could not be had, which the figures
 * leave out), fast_1_compile, fast_1_5_compile, fast_2_compile,
 * mean_speedup_compile, geomean_speedup_compile, median_speedup_compile
 * (of the best correct speedup_compile, 1.0 where none).
 * A new reference (the caller's); NULL when out of memory.
 */
json_t *bench_table(const struct bench_run *runs, size_t n);
/* The per-problem rows (docs/REPORT.md's "problems"). */
json_t *bench_problems(const struct bench_run *runs, size_t n);
/* `stark show BENCH_ID --json`: the record with its runs' states. */
json_t *bench_json(const struct bench *b);

/*
 * Reads a configuration file (at most 1 MiB) and applies it on top of c
 * (search_config_load_text(): all or nothing).  io_read_file()'s codes,
 * ST_EINVAL for a NUL byte or a bad line, ST_ENOENT for an unknown key;
 * err names the file (and the line).
 */
ST_WUR int run_config_load_file(struct search_config *c, const char *path, char *err,
				size_t errlen);

#endif
