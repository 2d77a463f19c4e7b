/*
 * provider.h -- where a run's LLM replies and evaluation results come from
 * (internal to orchestrator/).
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
 * Ownership: providers borrow their configuration strings only during the
 * constructor; replies and results are owned by the caller.
 */
#ifndef STARK_PROVIDER_H
#define STARK_PROVIDER_H

#include <signal.h>
#include <stdbool.h>

#include "common/common.h"
#include "llm/llm.h"
#include "search/search.h"
#include "proto/proto.h"

#define REPLAY_FILE_MAX (1ull << 30) /* bytes in a replay file */

struct llm_provider {
	/*
	 * Sends rq, known to the journal under key for agent role, and waits
	 * for the reply (out->rc says how the call ended).  Returns 0, or
	 * ST_ECANCELED when *stop was raised first.
	 */
	int (*call)(struct llm_provider *p, const char *key, const char *role,
		    const struct llm_request *rq, struct llm_reply *out);
	void (*free)(struct llm_provider *p);
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
	uint64_t seed;	    /* the run's evaluation seed */
	bool insecure;	    /* evaluate with fewer jail layers than required */
};

struct eval_provider {
	/* Evaluates job into out (initialised by the caller); 0 or ST_ECANCELED. */
	int (*eval)(struct eval_provider *p, const struct eval_job *job, struct proto_result *out);
	void (*free)(struct eval_provider *p);
	const volatile sig_atomic_t *stop;
	const char *name; /* "stark-eval", "replay" */
};

/*
 * The real client over HTTP: a client per distinct endpoint, model and key
 * among routes[0..n), each the llm_config of the role named roles[i]
 * (strings and keys copied; keys held in memory only).  A call for a role
 * without a route fails as fatal.
 */
ST_WUR int llm_provider_http(const char *const *roles, const struct llm_config *routes, size_t n,
			     struct llm_provider **out);

/* ---- routes: how each role reaches its model (route.c) ---- */

/*
 * Where role's requests go: llm.ROLE, else the run's --llm (llm); model.ROLE,
 * else --model (model).  out's strings point into cfg or the arguments.
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
/* Replies from a replay file; err receives a message on failure. */
ST_WUR int llm_provider_replay(const char *path, struct llm_provider **out, char *err,
			       size_t errlen);
/* Real evaluations by `stark-eval`. */
ST_WUR int eval_provider_real(struct eval_provider **out);
/* Results from a replay file. */
ST_WUR int eval_provider_replay(const char *path, struct eval_provider **out, char *err,
				size_t errlen);

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

#endif
