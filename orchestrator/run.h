/*
 * run.h -- one STARK run as a durable state machine (internal to
 * orchestrator/).
 *
 * A run is its journal (journal.h) plus what can be derived from it: the
 * tree, the policy's RNG, spend per role, the attempt in progress.  The
 * same loader serves `stark resume` (which then continues the loop),
 * `stark show` and `stark export` (which only read).
 *
 * The loop is sequential: one attempt at a time, one LLM call or one
 * evaluation in flight.  An attempt is
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
 * (borrowed from run_attach() until run_free()).
 */
#ifndef STARK_RUN_H
#define STARK_RUN_H

#include <jansson.h>
#include <signal.h>
#include <stdio.h>

#include "common/common.h"
#include "orchestrator/journal.h"
#include "orchestrator/provider.h"
#include "orchestrator/search.h"
#include "store/store.h"

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
	const char *format;	  /* candidate format: "kernelbench" or "fast" */
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
	/* only while running */
	struct prompt_set prompts;
	bool prompts_loaded;
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
};

/*
 * Creates a new run from spec: reads the problem, takes the run's lock,
 * journals JR_RUN and JR_STATE(running) and writes the metadata.  *out is
 * owned by the caller (run_free).  ST_EEXIST when the id is taken,
 * ST_EBUSY when locked; err gets a message.
 */
ST_WUR int run_create(struct store *st, const struct run_spec *spec, struct run **out, char *err,
		      size_t errlen);
/*
 * Loads a run by scanning its journal.  With lock, takes the run's lock
 * first (ST_EBUSY when another process holds it).  ST_ENOENT for an unknown
 * run.
 */
ST_WUR int run_load(struct store *st, const char *run_id, bool lock, struct run **out, char *err,
		    size_t errlen);
void run_free(struct run *r);

/* The providers the loop uses (borrowed; the caller frees them after run_free). */
void run_attach(struct run *r, struct llm_provider *llm, struct eval_provider *eval,
		const volatile sig_atomic_t *stop);

/*
 * Journals JR_STATE(running) (on resume) and runs attempts until the run
 * finishes, is interrupted (*stop, a fatal LLM error, repeated LLM
 * failures) or fails.  Returns 0 when it ran to a stop it journaled (see
 * r->state and r->reason), a negative code when the journal itself could
 * not be written.
 */
ST_WUR int run_loop(struct run *r, char *err, size_t errlen);

/* Journals a state change (and the metadata). */
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

/* Records a complaint (JR_CHECK) in r->checks. */
ST_WUR int run_check_add(struct run *r, uint32_t attempt, const char *key, const char *reason);
/* The spend of model, created (NULL past RUN_MODELS_MAX models: the last
 * slot, "(other models)", takes the rest). */
struct run_spend *run_model_spend(struct run *r, const char *model);

/* The memo entry of key in the open attempt; NULL when absent (find) or
 * when the memo is full (add, which returns an existing entry too). */
struct run_memo *run_memo_find(struct run *r, const char *key);
struct run_memo *run_memo_add(struct run *r, const char *key);

/* Writes the metadata record (state, attempts, best) for `stark list`. */
ST_WUR int run_meta_write(struct run *r);

/* The fastest correct node other than the root, or TREE_NONE; it may be
 * slower than the reference (see run_beats_reference). */
uint32_t run_best(const struct run *r);
/* Whether node id is correct and faster than the reference (speedup > 1). */
bool run_beats_reference(const struct run *r, uint32_t id);
/* Total spend over roles. */
struct run_spend run_spend_total(const struct run *r);

/* Default store folder: $STARK_STORE, else $XDG_DATA_HOME/stark, else ~/.local/share/stark. */
ST_WUR int run_default_store(char *buf, size_t len);

/* Makes room in r->info for node id (new entries: no verdict yet). */
ST_WUR int run_info_reserve(struct run *r, uint32_t id);

#endif
