/*
 * search.h -- the STARK method: the public header of search/.
 *
 * The method of arXiv 2510.16996 ("STARK: Strategic Team of Agents for
 * Refining Kernels") as pure logic: a tree of kernel attempts, the modified
 * epsilon-greedy policy that picks which node to work on and with which
 * agent, grounded-instruction anchors (parse the plan agent's scaffold,
 * check it is grounded in the node's code, verify the code agent changed
 * only the anchored spans), the role-specific context windows, prompt
 * templates, and the configuration with the paper's defaults.
 *
 * Nothing here touches a file, the network, LMDB, the clock or a child
 * process, and there is no global state: every function is a function of
 * its arguments (the RNG state is an argument).  The engine (engine/)
 * reads templates and configuration files and hands their text over, and
 * rebuilds a run by replaying journaled events into these calls: it gets
 * the same tree, the same choices and the same prompts.  tests/unit/
 * test_search.c links this module and common/ alone.
 *
 * Prefixes, one per object of the method: tree_ and node_ (the tree),
 * rng_ (the seeded PRNG), policy_ (selection), anchor_/scaffold_ (grounded
 * instructions), context_ (windows), prompt_ (templates), search_ (the
 * configuration, roles and actions).  Files: tree.c, policy.c, anchor.c
 * (with lines.c: how a program's lines compare; lines.h is internal),
 * context.c, prompt.c, config.c.
 *
 * Errors: a call that can fail returns 0 or a negative ST_E* code
 * (common.h) and prints nothing; where it takes an err buffer the message
 * is written there.  A call that appends to a caller's struct dbuf fails
 * with ST_ETOOBIG at the buffer's cap (ST_ENOMEM when memory runs out) and
 * leaves what it appended so far.  Ownership: structs the caller
 * initializes (scaffold, context_window, prompt_set) own their contents
 * until their _release; strings passed in are copied or borrowed for the
 * call, as each call says.
 *
 * One step of the driver, stark policy (the others are one call shorter):
 *
 *   policy_select(tree, cfg, &rng, &ch)          -> {node, action}; journal rng
 *   PLAN:  context_build(ROLE_PLAN) + prompt_build(ROLE_PLAN) -> LLM
 *          anchor_extract_code(reply) -> anchor_parse -> anchor_check_grounded
 *          context_build(ROLE_CODE) + prompt_build(ROLE_CODE, &scaffold) -> LLM
 *          anchor_extract_code(reply) -> anchor_verify_code -> cleaned code
 *          tree_add(tree, ch.node, ORIGIN_PLAN, code, instructions, &id)
 *   DEBUG: context_build(ROLE_DEBUG) + prompt_build(ROLE_DEBUG) -> LLM
 *          anchor_extract_code(reply) -> tree_add(ORIGIN_DEBUG, ...)
 *   then, when the evaluation returns: tree_set_result(tree, id, ...)
 *   A violation of the anchors is retried cfg->verify_retries times, then
 *   recorded as a node with status NODE_REJECTED and the violation as its
 *   feedback (it counts as a failed attempt).
 */
#ifndef STARK_SEARCH_H
#define STARK_SEARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* ---- limits ---------------------------------------------------------- */

#define TREE_NONE UINT32_MAX		/* "no node" (the root's parent) */
#define TREE_NODES_MAX 1000000u		/* nodes in one tree */
#define TREE_CODE_MAX (512u << 10)	/* bytes of one node's code */
#define TREE_PLAN_MAX (64u << 10)	/* bytes of one node's instructions */
#define TREE_FEEDBACK_MAX (16u << 10)	/* feedback kept (head + tail, see tree_set_result) */
#define TREE_REASON_MAX 96		/* bytes of a failed node's short reason */
#define ANCHOR_MAX 64			/* anchors in one plan */
#define ANCHOR_INSTR_MAX 4096		/* bytes of one instruction */
#define ANCHOR_ERR_MAX 512		/* size of violation message buffers */
#define ANCHOR_CANDIDATES_MAX 8		/* fenced blocks of a reply tried */
#define CONTEXT_IDS_MAX 256		/* nodes in one context window */
#define PROMPT_MAX (2u << 20)		/* bytes of one rendered prompt */
#define CONFIG_STR_MAX 256		/* bytes of a string parameter, NUL included */

/* ---- nodes and the tree (tree.c) --------------------------------------- */

enum node_origin {
	ORIGIN_ROOT = 0,  /* the reference program / initial code */
	ORIGIN_PLAN = 1,  /* plan agent + code agent */
	ORIGIN_DEBUG = 2, /* debug agent repairing its parent */
	ORIGIN_SAMPLE = 3,/* sampling baseline: fresh sample from the root */
	ORIGIN_REFLECT = 4/* reflexion baseline: refinement of its parent */
};

enum node_status {
	NODE_PENDING = 0,	/* created, not evaluated yet */
	NODE_CORRECT = 1,	/* passed; speedup is meaningful */
	NODE_INCORRECT = 2,	/* ran, outputs mismatched */
	NODE_COMPILE_ERROR = 3,
	NODE_RUNTIME_ERROR = 4,
	NODE_TIMEOUT = 5,
	NODE_CRASHED = 6,	/* killed by a signal, sandbox violation */
	NODE_REJECTED = 7,	/* never evaluated: anchors violated, no code in reply */
	NODE_ERROR = 8		/* infrastructure failure, not the candidate's fault */
};

/*
 * One attempt.  Everything is owned by the tree; a node pointer and its
 * strings are borrowed until the next tree_add()/tree_set_result() on the
 * same tree or tree_free() (the node array may move when it grows).
 */
struct tree_node {
	uint32_t id;		/* index; root = 0; ids are dense, in creation order */
	uint32_t parent;	/* TREE_NONE for the root */
	enum node_origin origin;
	enum node_status status;
	double speedup;		/* reference time / candidate time; 0 unless CORRECT */
	char *code;		/* NUL-terminated, code_len bytes */
	size_t code_len;
	char *plan;		/* instructions that produced it ("" for none) */
	char *feedback;		/* compiler log / traceback / mismatch ("" for none) */
	uint32_t *children;	/* ids in creation order */
	uint32_t nchildren;
	uint32_t children_cap;
	uint32_t depth;		/* root = 0 */
};

struct search_tree; /* opaque */

/*
 * Creates a tree whose root (id 0) holds root_code, with status
 * NODE_CORRECT and speedup 1.0: the reference is correct and as fast as
 * itself by definition (the driver may overwrite this with tree_set_result
 * after measuring it).  See tree_seed_code() for what to pass.  root_code
 * is copied; *out is the caller's (tree_free).  ST_EINVAL for NULL,
 * ST_ETOOBIG past TREE_CODE_MAX, ST_ENOMEM; *out is NULL then.
 */
ST_WUR int tree_new(const char *root_code, struct search_tree **out);
/* Frees t and every node; NULL is a no-op. */
void tree_free(struct search_tree *t);

/*
 * Adds a child of parent with status NODE_PENDING.  code and plan (may be
 * NULL) are copied.  *id_out gets the new id, which is always
 * tree_count() before the call.  ST_ENOENT for an unknown parent,
 * ST_ETOOBIG past TREE_CODE_MAX/TREE_PLAN_MAX/TREE_NODES_MAX, ST_EINVAL for
 * ORIGIN_ROOT or NULL code, ST_ENOMEM; the tree is unchanged then.
 */
ST_WUR int tree_add(struct search_tree *t, uint32_t parent, enum node_origin origin,
		    const char *code, const char *plan, uint32_t *id_out);

/*
 * Records an evaluation outcome.  speedup is stored only for NODE_CORRECT
 * (and must then be finite and > 0); feedback (may be NULL) is copied, and
 * when longer than TREE_FEEDBACK_MAX its head and tail are kept around a
 * "[... N bytes cut ...]" line (compiler logs put the first error first,
 * tracebacks put the cause last).  May be called again (a replay sets the
 * same values).  ST_ENOENT for an unknown id, ST_EINVAL for a bad value.
 */
ST_WUR int tree_set_result(struct search_tree *t, uint32_t id, enum node_status status,
			   double speedup, const char *feedback);

uint32_t tree_count(const struct search_tree *t); /* nodes, root included */
/* The node, or NULL for an unknown id.  Borrowed (see struct tree_node). */
const struct tree_node *tree_node(const struct search_tree *t, uint32_t id);
/* True when node id exists and has no children. */
bool tree_is_leaf(const struct search_tree *t, uint32_t id);

/*
 * Relatives, written to out[0..max) in ascending id order; *n gets the
 * count.  ST_ETOOBIG (with the first max written) when there are more,
 * ST_ENOENT for an unknown id.  Siblings exclude the node itself; cousins
 * are the children of the node's siblings (what the paper calls the
 * cousins of the attempt about to be made under the node).
 */
ST_WUR int tree_siblings(const struct search_tree *t, uint32_t id, uint32_t *out, size_t max,
			 size_t *n);
ST_WUR int tree_cousins(const struct search_tree *t, uint32_t id, uint32_t *out, size_t max,
			size_t *n);

/*
 * Leaders: the top-r NODE_CORRECT nodes by speedup, descending, ties broken
 * by the smaller id.  Writes min(r, number correct) ids to out (which holds
 * r).  The root counts while it is CORRECT.
 */
size_t tree_leaders(const struct search_tree *t, uint32_t r, uint32_t *out);
/* The best correct node (leader #1), or TREE_NONE. */
uint32_t tree_best(const struct search_tree *t);

/* Debug children of id, plus the number of consecutive ORIGIN_DEBUG
 * ancestors-or-self (a debug chain counts against the same allowance). */
uint32_t tree_debug_attempts(const struct search_tree *t, uint32_t id);

/*
 * Why a failed node failed, in one short phrase for `stark show`: the first
 * non-blank line of its feedback (the evaluator's message or the rejection)
 * and, for a compile error, the first later line that names an error; cut
 * to fit len and TREE_REASON_MAX bytes on a character boundary ("..."
 * marks a cut), control characters as spaces.  "" for a correct or pending
 * node, or when len < 8.
 */
void tree_node_reason(const struct tree_node *n, char *buf, size_t len);
/* True for every settled status other than NODE_CORRECT. */
bool node_status_failed(enum node_status s);
/* True for the failures the debug agent can work on: incorrect, compile
 * error, runtime error, timeout, crashed (they come with diagnostics). */
bool node_status_debuggable(enum node_status s);
/* Stable lowercase names ("compile_error", "plan", ...) for the journal
 * and `stark show`; the _parse functions are their inverses (ST_EINVAL). */
const char *node_status_name(enum node_status s);
ST_WUR int node_status_parse(const char *name, enum node_status *out);
const char *node_origin_name(enum node_origin o);
ST_WUR int node_origin_parse(const char *name, enum node_origin *out);

/*
 * The root's code from a KernelBench reference: the text with the class
 * `Model` renamed `ModelNew` (its `class Model(` line and `super(Model,`
 * calls), so the root is itself a valid candidate and the code agent's
 * first edits need not touch text outside the anchors.  out is appended to
 * (its cap applies); reference is borrowed.
 */
ST_WUR int tree_seed_code(const char *reference, struct dbuf *out);

/* ---- the seeded PRNG (policy.c) ---------------------------------------- */

/*
 * xoroshiro128** seeded through splitmix64.  The whole state is s[0], s[1]:
 * journal it after each policy_select() and copy it back to resume.
 */
struct search_rng {
	uint64_t s[2];
};

/* None of the rng_ calls can fail; r is the caller's. */
void rng_seed(struct search_rng *r, uint64_t seed);
uint64_t rng_next(struct search_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double rng_double(struct search_rng *r);
/* Uniform in [0, n), unbiased (Lemire); 0 when n == 0. */
uint64_t rng_below(struct search_rng *r, uint64_t n);
/* 32 hex digits, NUL-terminated (buf holds 33), and back (ST_EINVAL). */
void rng_format(const struct search_rng *r, char buf[33]);
ST_WUR int rng_parse(const char *text, struct search_rng *out);

/* ---- configuration (config.c) ------------------------------------------ */

enum search_policy {
	POLICY_STARK = 0,	/* the paper's method */
	POLICY_SAMPLING = 1,	/* best-of-N independent samples from the root */
	POLICY_REFLEXION = 2	/* linear refinement of the last attempt */
};
/* "stark", "sampling", "reflexion" (static strings; "stark" for a value
 * outside the enum). */
const char *search_policy_name(enum search_policy p);

/* The agent roles; also the index of per-role parameters. */
enum search_role {
	ROLE_PLAN = 0,
	ROLE_CODE = 1,
	ROLE_DEBUG = 2,
	ROLE_SAMPLE = 3,
	ROLE_REFLECT = 4,
	ROLE_COUNT = 5
};
const char *search_role_name(enum search_role r); /* "plan", "code", ... */

/*
 * Every parameter of a run.  A flat value: copy it freely.  Keys of the
 * config file are given beside each field; per-role keys are KEY.ROLE
 * (e.g. temperature.plan).  The defaults and where they come from are in
 * config.c.
 */
#define CONFIG_PRICES_MAX 16   /* price.MODEL entries */
#define CONFIG_WORD_MAX	  32   /* bytes of a reasoning effort, NUL included */
#define CONFIG_ENV_MAX	  64   /* bytes of an environment variable's name, NUL included */
#define TEMPERATURE_NONE  (-1.0)	/* temperature.ROLE = none: not sent */
#define THINKING_OFF	  0u		/* thinking.ROLE = off */
#define THINKING_ADAPTIVE UINT32_MAX	/* thinking.ROLE = adaptive */

enum token_field { TOKEN_FIELD_MAX_TOKENS = 0, TOKEN_FIELD_MAX_COMPLETION = 1 };

/* price.MODEL = IN OUT: $ per million input and output tokens of a model. */
struct search_price {
	char model[CONFIG_STR_MAX];
	double in, out;
};

struct search_config {
	enum search_policy policy;	 /* policy = stark|sampling|reflexion */
	uint32_t budget;		 /* budget: attempts (nodes other than the root) */
	double epsilon;			 /* epsilon: probability of exploring */
	uint32_t root_cap;		 /* root_cap: most direct children of the root */
	uint32_t prune_n;		 /* prune_n: > n children, none correct -> dead */
	uint32_t debug_max;		 /* debug_max: debug attempts per failing node */
	uint32_t leaders;		 /* leaders: r, the top-r leaders in plan contexts */
	double leaf_weight;		 /* leaf_weight: exploration weight of a leaf (internal = 1) */
	uint32_t verify_retries;	 /* verify_retries: re-asks after an anchor violation */
	uint64_t seed;			 /* seed: the policy RNG */
	double temperature[ROLE_COUNT];	 /* temperature.ROLE; TEMPERATURE_NONE = none */
	uint32_t max_tokens[ROLE_COUNT]; /* max_tokens.ROLE: completion tokens per call */
	uint32_t context_tokens[ROLE_COUNT]; /* context_tokens.ROLE: window budget */
	uint32_t context_entry_bytes;	 /* context_entry_bytes: code cap per entry */
	double price_in[ROLE_COUNT];	 /* price_in.ROLE: $ per million input tokens */
	double price_out[ROLE_COUNT];	 /* price_out.ROLE: $ per million output tokens */
	char model[ROLE_COUNT][CONFIG_STR_MAX]; /* model.ROLE: "" = the run's --model */
	/* how each role talks to its model (see docs/RUNS.md; all may change on resume) */
	char llm[ROLE_COUNT][CONFIG_STR_MAX];	/* llm.ROLE: openai:URL | anthropic:URL; "" = --llm */
	char api_key_env[ROLE_COUNT][CONFIG_ENV_MAX]; /* api_key_env.ROLE: variable with its key */
	uint32_t token_field[ROLE_COUNT];	/* token_field.ROLE: enum token_field */
	char reasoning_effort[ROLE_COUNT][CONFIG_WORD_MAX]; /* reasoning_effort.ROLE; "" = none */
	uint32_t thinking[ROLE_COUNT];		/* thinking.ROLE: off, adaptive or a budget */
	char extra_body[ROLE_COUNT][CONFIG_STR_MAX]; /* extra_body.ROLE: JSON object; "" = none */
	struct search_price price[CONFIG_PRICES_MAX]; /* price.MODEL, in the order set */
	uint32_t nprices;
	uint64_t max_total_tokens;	 /* max_total_tokens: 0 = no cap */
	double max_dollars;		 /* max_dollars: 0 = no cap */
	char prompts_dir[CONFIG_STR_MAX];/* prompts_dir: "" = run_prompts_dir() */
};

/* The paper's defaults (config.c says where each comes from). */
void search_config_defaults(struct search_config *c);
/*
 * Sets one parameter from text (CLI flags, config files).  A per-role key
 * without its .ROLE sets every role (`temperature = none`).  ST_ENOENT for
 * an unknown key, ST_EINVAL for a bad value; err (may be NULL) gets a
 * message naming the key.
 */
ST_WUR int search_config_set(struct search_config *c, const char *key, const char *value,
			     char *err, size_t errlen);
/*
 * Whether key may change during a run (`stark resume --set`): the keys of
 * how roles reach their models (llm, model, api_key_env, temperature,
 * max_tokens, token_field, reasoning_effort, thinking, extra_body, prices).
 * The search's own keys are fixed when it starts.
 */
bool search_config_key_live(const char *key);
/*
 * Applies the text of a `key = value` file (# starts a comment line or a
 * trailing comment after whitespace; blank lines ignored) on top of c, all
 * or nothing.  Errors name the file (name), line and key ("cfg.txt:7:
 * unknown key 'epsilon2'").  The engine reads the file
 * (run_config_load_file).
 */
ST_WUR int search_config_load_text(struct search_config *c, const char *name, const char *text,
				   char *err, size_t errlen);
/*
 * The effective configuration as `key = value` lines in a fixed order,
 * appended to out; loading the text back reproduces c exactly (doubles are
 * written with 17 significant digits).  Journal this at run start.  Fails
 * only as an append does (out's cap, memory).
 */
ST_WUR int search_config_dump(const struct search_config *c, struct dbuf *out);
/* Consistency checks across fields (e.g. root_cap >= 1): 0, or ST_EINVAL
 * with a message naming the key in err. */
ST_WUR int search_config_check(const struct search_config *c, char *err, size_t errlen);

/* ---- the policy (policy.c) --------------------------------------------- */

enum search_action {
	ACTION_PLAN = 0,   /* plan agent then code agent: improve the node */
	ACTION_DEBUG = 1,  /* debug agent: repair the failing node */
	ACTION_SAMPLE = 2, /* sampling baseline: fresh sample (node = root) */
	ACTION_REFLECT = 3 /* reflexion baseline: refine the node from feedback */
};
const char *search_action_name(enum search_action a); /* "plan", "debug", ... */

struct search_choice {
	uint32_t node;
	enum search_action action;
	bool explored; /* stark: true when the epsilon branch was taken */
};

/*
 * Whether node id may be selected under the stark policy, and for which
 * action (out may be NULL).  The rule:
 *   - pending nodes (in flight) are not eligible;
 *   - the root is not eligible once it has root_cap children (throttling);
 *   - a node with more than prune_n children, none of them correct and none
 *     pending, is dead (pruning);
 *   - a CORRECT node is eligible for ACTION_PLAN;
 *   - a debuggable failure is eligible for ACTION_DEBUG while
 *     tree_debug_attempts() < debug_max;
 *   - other failures (rejected, error) are not eligible.
 */
bool policy_eligible(const struct search_tree *t, const struct search_config *cfg, uint32_t id,
		     enum search_action *out);

/*
 * Picks the next node and action.  Pure given (t, cfg, *rng); advances
 * *rng.  stark: with probability 1 - epsilon exploit (the best eligible
 * leader, action PLAN); otherwise, or when no leader is eligible, explore:
 * draw among eligible nodes with weight leaf_weight for leaves and 1 for
 * internal nodes, the action being the node's (PLAN or DEBUG).  sampling:
 * always {root, SAMPLE}.  reflexion: {the newest node, REFLECT} (the root
 * before any attempt).  One uniform draw decides exploit/explore and one
 * more picks the explored node, so the RNG advances 1 or 2 steps (sampling
 * and reflexion do not draw).  When nothing is eligible: ST_EBUSY if some
 * node is still pending (wait for its result, then ask again; for
 * reflexion, whenever the newest node is pending), else ST_ENOENT (the
 * search is exhausted).  *rng may have advanced in either case.
 */
ST_WUR int policy_select(const struct search_tree *t, const struct search_config *cfg,
			 struct search_rng *rng, struct search_choice *out);

/* ---- grounded-instruction anchors (anchor.c) --------------------------- */

/*
 * The plan agent's reply is the node's code with anchored spans:
 *
 *     <<<IMPROVE BEGIN: one-line instruction>>>
 *     ...original code to be replaced...
 *     <<<IMPROVE END>>>
 *
 * Accepted variations: BEGINS/ENDS; any letter case; spaces inside the
 * brackets; a comment prefix (#, //, slash-star, --, ;) and indentation before the
 * marker and a closing star-slash after it; the instruction after the closing >>>
 * instead of after a colon; or, when the BEGIN line carries none, on the
 * next line as `INSTRUCTION: text` (comment prefixes allowed); a marker
 * written as a plain comment without the brackets (`# IMPROVE BEGIN: text`,
 * `// IMPROVE END`; upper case only).  The last
 * >>> on the line closes the marker, so an instruction may mention a
 * kernel launch (k<<<grid, block>>>).  A marker must be on its own line;
 * CUDA launches are never taken for markers.  Anchors may not nest.
 *
 * What "the same text" means (grounding, verification): lines compare
 * equal up to trailing whitespace, and blank lines do not count, except
 * inside a Python string literal (where the CUDA or C++ source lives, and
 * where both are data) and after a backslash continuation; lines must also
 * agree on where string literals begin and end.  Nothing else is forgiven:
 * indentation, comments, spelling.
 *
 * A scaffold is the plan split into nanchors + 1 fixed segments (text that
 * must not change) and nanchors anchored bodies (the original text inside
 * each anchor), with marker lines removed:
 *     fixed[0] body[0] fixed[1] body[1] ... fixed[nanchors]
 * Every segment is whole lines (each ends with '\n' except possibly the
 * last).
 */
struct anchor_span {
	char *instruction; /* owned, trimmed, non-empty */
	char *body;	   /* owned: the original text inside the anchor */
	size_t body_len;
	uint32_t line;	   /* 1-based line of the BEGIN marker in the plan */
	uint32_t code_line;/* 1-based line in the node's code where the body starts */
};

struct scaffold {
	char **fixed;	   /* owned: nanchors + 1 segments */
	size_t *fixed_len;
	struct anchor_span *anchors; /* owned */
	size_t nanchors;
	/* owned: the node's code line of each line of the plan without markers,
	 * set by anchor_check_grounded (violations are reported in code lines) */
	uint32_t *code_lines;
	size_t ncode_lines;
};

/* An empty scaffold; release frees what it holds and empties it again
 * (it may be reused).  Neither can fail. */
void scaffold_init(struct scaffold *s);
void scaffold_release(struct scaffold *s);

/*
 * Where the program of an LLM reply may be: its fenced blocks (the last
 * ANCHOR_CANDIDATES_MAX), best first -- a block holding a line `class
 * ModelNew` (a whole program in either candidate format) before one that
 * does not, then one labelled python (py, python3) before an unlabelled
 * one before one in another language, then the later before the earlier
 * -- or, when it has none, the whole reply.  An opening fence with no
 * closing fence (a truncated reply) runs to the end.  A candidate is a
 * span of the reply; out holds ANCHOR_CANDIDATES_MAX, *n gets at least 1.
 * ST_ETOOBIG past twice TREE_CODE_MAX bytes.  reply (len bytes) is
 * borrowed: the candidates are spans of it.
 */
struct anchor_candidate {
	size_t off, len;
};
ST_WUR int anchor_reply_candidates(const char *reply, size_t len, struct anchor_candidate *out,
				   size_t *n);

/* The best candidate's text into out (reset first; capped by its max:
 * ST_ETOOBIG). */
ST_WUR int anchor_extract_code(const char *reply, size_t len, struct dbuf *out);

/*
 * Parses plan text (already extracted) into s (which must be initialized;
 * it is released first).  ST_EINVAL with a message in err (e.g. "anchor 2
 * has no instruction", "anchor 3 at line 40 begins inside anchor 2 (anchors
 * may not nest)", "anchor 1 at line 5 is not terminated", "plan has no
 * anchors"); ST_ETOOBIG past ANCHOR_MAX or ANCHOR_INSTR_MAX.
 */
ST_WUR int anchor_parse(const char *plan, size_t len, struct scaffold *s, char *err,
			size_t errlen);

/*
 * Checks the plan is grounded in the node's code: the scaffold with its
 * markers removed (fixed and bodies interleaved) is the same text as code
 * (see above: blank lines and trailing whitespace outside string literals
 * aside).  Also sets each anchor's code_line and the scaffold's code_lines.
 * ST_EINVAL with "plan changes the node's code near line 14: the code has
 * `...`, the plan `...`" style messages (lines of the node's code).
 */
ST_WUR int anchor_check_grounded(struct scaffold *s, const char *code, size_t len, char *err,
				 size_t errlen);

/*
 * Verifies the code agent's program against the scaffold: after dropping
 * any anchor marker lines the agent left in, the fixed segments must
 * appear in order (the first at the start, the last at the end), each as a
 * run of lines that are the same text (see above); the text between them
 * (the anchored spans) may be anything.  The unchanged code always
 * verifies.  On success the program without marker lines is appended to
 * cleaned (may be NULL).  ST_EINVAL with "code changes text outside
 * anchors near line 14: the plan has `...` there, the code `...`" (a line
 * of the node's code once grounded) on a violation.
 */
ST_WUR int anchor_verify_code(const struct scaffold *s, const char *code, size_t len,
			      struct dbuf *cleaned, char *err, size_t errlen);

/*
 * A whole reply checked, as the run does for each agent.  Each candidate
 * (best first) is tried, and the first that passes is taken; otherwise
 * ST_EINVAL with a complaint in err: that of the best candidate, or for a
 * plan of the best one with anchors; "reply has no code" when every
 * candidate is blank.  The complaint is what the agent's retry is told.
 *   anchor_accept_plan: anchor_parse + anchor_check_grounded against the
 *     node's code; s gets the scaffold (released on failure).
 *   anchor_accept_code: anchor_verify_code against s; cleaned (not NULL)
 *     gets the program without markers (reset first).
 *   anchor_reply_code: any other agent: the best candidate into out
 *     (reset first).
 * ST_ETOOBIG with a message for a reply past twice TREE_CODE_MAX or a
 * program past out's cap; reply (len bytes) and code are borrowed.
 */
ST_WUR int anchor_accept_plan(const char *reply, size_t len, const char *code, size_t code_len,
			      struct scaffold *s, char *err, size_t errlen);
ST_WUR int anchor_accept_code(const struct scaffold *s, const char *reply, size_t len,
			      struct dbuf *cleaned, char *err, size_t errlen);
ST_WUR int anchor_reply_code(const char *reply, size_t len, struct dbuf *out, char *err,
			     size_t errlen);

/*
 * The plan in canonical form, appended to out: fixed segments and bodies
 * with `<<<IMPROVE BEGIN: instruction>>>` / `<<<IMPROVE END>>>` lines, as
 * shown to the code agent (anchor_parse() reads it back to the same
 * scaffold).  Fails only as an append does.
 */
ST_WUR int scaffold_render(const struct scaffold *s, struct dbuf *out);

/* The instructions as a numbered list ("1. (line 12) use shared memory\n"),
 * appended to out: what tree_add() stores as a node's plan. */
ST_WUR int scaffold_instructions(const struct scaffold *s, struct dbuf *out);

/* ---- context windows (context.c) --------------------------------------- */

/*
 * The nodes an agent sees besides the one it works on, rebuilt each step:
 *   ROLE_PLAN:    node + its children + the global top-r leaders
 *   ROLE_CODE:    node + its children + its cousins (siblings' children)
 *   ROLE_DEBUG:   node + its siblings
 *   ROLE_REFLECT: node + its ancestors (the linear history), newest first
 *   ROLE_SAMPLE:  nothing (independent samples)
 * Pending nodes are skipped (they have no outcome yet); duplicates are
 * listed once.  Budget: cfg->context_tokens[role] tokens, estimated as
 * bytes / 4 (rounded up) of the rendered text.  Truncation rule: the node
 * itself is always first (its code is not repeated: the prompt carries it
 * in full as {{code}}); the others are ranked correct first by speedup
 * descending, then failed, ties and failures by ascending id, and added in
 * that order until the next entry would exceed the budget, where the
 * window stops.  Each entry's code is cut to cfg->context_entry_bytes, and
 * its instructions and feedback to a quarter of that each, with a
 * "[... N bytes cut ...]" line.  Cost: O(nodes + k log k) for k relatives.
 */
struct context_window {
	uint32_t ids[CONTEXT_IDS_MAX]; /* ids[0] is the node itself */
	size_t n;
	size_t candidates;	       /* relatives before the budget cut, node included */
	struct dbuf text;	       /* owned: the rendered window */
	size_t tokens;		       /* estimate of text */
};

/* An empty window (its text capped at PROMPT_MAX); release frees the text.
 * Neither can fail. */
void context_init(struct context_window *w);
void context_release(struct context_window *w);
/* Builds the window (w is reset first; t and cfg are borrowed).  ST_ENOENT
 * for an unknown node, ST_EINVAL for an unknown role, or an append's
 * failure. */
ST_WUR int context_build(const struct search_tree *t, const struct search_config *cfg,
			 enum search_role role, uint32_t node, struct context_window *w);
/* The token estimate used everywhere: ceil(bytes / 4). */
size_t context_tokens(size_t bytes);

/* ---- prompts (prompt.c) ------------------------------------------------ */

/*
 * Templates are text files in a prompts directory, read at run time by the
 * engine (run_prompts_load): system.txt, plan.txt, code.txt, debug.txt,
 * sample.txt, reflect.txt, retry.txt (what a retry after a rejected answer
 * says) and format_NAME.txt (the candidate format's documentation,
 * inserted as {{format}}).  Placeholders are {{name}} with name one of
 * problem, code, context, instructions, feedback, format, plan, complaint;
 * an unknown name, or a known one with no value for this role, is an
 * error.
 */
enum prompt_file {
	PROMPT_SYSTEM = 0,
	PROMPT_PLAN,
	PROMPT_CODE,
	PROMPT_DEBUG,
	PROMPT_SAMPLE,
	PROMPT_REFLECT,
	PROMPT_RETRY, /* the complaint a rejected answer's retry carries (optional file) */
	PROMPT_FORMAT,
	PROMPT_COUNT
};

/* The templates' text, NUL-terminated, one per enum prompt_file; filled
 * by the engine, released by prompt_release(). */
struct prompt_set {
	char *text[PROMPT_COUNT]; /* owned */
};

/*
 * The file name of template f ("system.txt", "format_fast.txt") for the
 * candidate format "fast" or "kernelbench", written to buf (NUL-terminated).
 * ST_EINVAL for an unknown f or format, ST_ETOOBIG when buf is too short.
 */
ST_WUR int prompt_file_name(enum prompt_file f, const char *format, char *buf, size_t len);
/* The built-in text of a template that a prompts folder may lack (retry.txt:
 * folders made before it existed), or NULL for one it must have.  Static. */
const char *prompt_default_text(enum prompt_file f);
/* Frees every text of p and sets it to NULL (p itself is the caller's). */
void prompt_release(struct prompt_set *p);

/* Values for placeholders; NULL = not available (using it is an error). */
struct prompt_vars {
	const char *problem;	  /* the reference program */
	const char *code;	  /* the code the agent works on */
	const char *context;	  /* a rendered context window */
	const char *instructions; /* numbered instructions of the plan */
	const char *feedback;	  /* diagnostics of the node */
	const char *format;	  /* the candidate format doc */
	const char *plan;	  /* the anchored plan (code agent) */
	const char *complaint;	  /* why an answer was rejected (retry) */
};

/* Renders tmpl into out (appended; out's cap applies: ST_ETOOBIG).  err
 * names the placeholder on ST_EINVAL (unknown, or without a value). */
ST_WUR int prompt_render(const char *tmpl, const struct prompt_vars *v, struct dbuf *out,
			 char *err, size_t errlen);

/*
 * The system and user messages for one agent call (both reset first, then
 * capped at PROMPT_MAX by the caller's dbuf_init):
 *   ROLE_PLAN:    code = node, context, problem, format
 *   ROLE_CODE:    plan = the anchored plan rendered from sc (required),
 *                 instructions, code, context, problem, format
 *   ROLE_DEBUG:   code = node, feedback = node's, instructions = node's
 *                 plan, context, problem, format
 *   ROLE_SAMPLE:  problem, format
 *   ROLE_REFLECT: code = node, feedback = node's, context, problem, format
 * The window w must have been built for the same role and node (may be NULL
 * for ROLE_SAMPLE).  Everything step points to is borrowed for the call.
 * ST_EINVAL (a bad step, a window for another node, a template that is not
 * loaded, a placeholder without a value) or an append's failure, with a
 * message naming the template in err.
 */
struct prompt_step {
	enum search_role role;
	uint32_t node;
	const char *problem;		 /* borrowed */
	const struct scaffold *scaffold; /* ROLE_CODE only */
	const struct context_window *window;
};
ST_WUR int prompt_build(const struct prompt_set *p, const struct search_tree *t,
			const struct prompt_step *step, struct dbuf *system, struct dbuf *user,
			char *err, size_t errlen);
/*
 * The user message that follows a rejected answer in its retry: retry.txt
 * (placeholder complaint; a built-in text where the folder has no
 * retry.txt), into out (reset first).  complaint is borrowed; fails as
 * prompt_render() does, err naming the template.
 */
ST_WUR int prompt_retry(const struct prompt_set *p, const char *complaint, struct dbuf *out,
			char *err, size_t errlen);

#endif
