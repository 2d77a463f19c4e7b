/*
 * llm.h -- asking language models for completions over HTTP (libcurl).
 *
 * Two wire dialects: OpenAI-compatible chat completions (OpenAI, vLLM,
 * SGLang, llama.cpp server, Ollama, OpenRouter, DeepSeek) and Anthropic
 * messages, each with the settings of reasoning models: the token-limit
 * field (max_tokens or max_completion_tokens), temperature or none,
 * reasoning effort, an Anthropic thinking budget or adaptive thinking, and
 * extra body members for server-specific switches.  Replies may carry
 * their reasoning apart from the answer (Anthropic thinking and
 * redacted_thinking blocks, `reasoning_content` or `reasoning` beside the
 * content, a leading <think>...</think> in it): only the answer is text.
 * Several requests are in flight at once (curl multi).  Every call has a
 * deadline; 408/429/5xx and connection errors are retried with exponential
 * backoff and full jitter, honouring Retry-After up to a bound (a 429
 * holds back every call of the client, not only its own: llm_held_ms);
 * 400/401/403/422 are not retried and are reported as fatal (the caller
 * pauses the run), naming the request member the server blamed.
 * Response bodies are capped.  The API key is never logged, never put in an
 * error message and is redacted from bodies handed back.  Sockets are
 * close-on-exec.
 *
 * The client is single-threaded and does no work behind the caller's back:
 * transfers, backoff waits and retries all advance inside llm_poll().
 *
 * Ownership: llm_client_new() copies the configuration's strings;
 * llm_submit() copies what it needs from the request; replies returned by
 * llm_poll() are owned by the caller (llm_reply_release).
 */
#ifndef STARK_LLM_H
#define STARK_LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

enum llm_api {
	LLM_OPENAI = 0,	  /* POST {base}/chat/completions */
	LLM_ANTHROPIC = 1 /* POST {base}/messages */
};

struct llm_config {
	enum llm_api api;
	const char *base_url;	     /* e.g. "http://127.0.0.1:8000/v1"; required */
	const char *api_key;	     /* may be NULL; never logged */
	const char *model;	     /* required */
	uint32_t timeout_ms;	     /* deadline of one HTTP attempt */
	uint32_t connect_timeout_ms; /* deadline of one connect (capped by timeout_ms) */
	uint32_t total_timeout_ms;   /* deadline of a call, retries and waits included */
	uint32_t max_retries;	     /* retries after the first attempt */
	uint32_t backoff_base_ms;    /* first backoff cap; doubles per retry */
	uint32_t backoff_max_ms;     /* cap on one backoff */
	uint32_t retry_after_max_ms; /* cap on an honoured Retry-After */
	/*
	 * An attempt whose average speed stays under low_speed_bps bytes/s for
	 * low_speed_ms is abandoned (a slow drip).  Non-streaming servers send
	 * nothing until the completion is done, so keep low_speed_ms near
	 * timeout_ms; 0 means timeout_ms.  low_speed_bps 0 turns the check off.
	 */
	uint32_t low_speed_bps;
	uint32_t low_speed_ms;
	size_t max_request_bytes;  /* cap on a request body */
	size_t max_response_bytes; /* cap on a response body; larger replies fail */
	uint32_t max_inflight;	   /* calls submitted and not yet polled */
	uint64_t seed;		   /* jitter RNG seed */
};

/*
 * Defaults: OpenAI dialect, 300 s per attempt, 10 s connect, 900 s per
 * call, 5 retries, backoff 1 s doubling to 60 s, Retry-After up to 120 s,
 * low speed 1 byte/s over the attempt timeout, 16 MiB requests, 8 MiB
 * responses, 8 in flight, seed 1.  base_url and model are left NULL.
 */
void llm_config_init(struct llm_config *cfg);

struct llm_message {
	const char *role; /* "system", "user" or "assistant" */
	const char *content;
};

/*
 * The field that carries the completion-token limit (OpenAI dialect):
 * "max_tokens" (most servers; refused by OpenAI's o-series and GPT-5) or
 * "max_completion_tokens" (OpenAI's reasoning models).
 */
enum llm_token_field { LLM_TOKENS_MAX_TOKENS = 0, LLM_TOKENS_MAX_COMPLETION = 1 };

/* Anthropic extended thinking. */
enum llm_thinking {
	LLM_THINK_OFF = 0,     /* no "thinking" member */
	LLM_THINK_BUDGET = 1,  /* {"type":"enabled","budget_tokens":N} (N >= 1024, < max_tokens) */
	LLM_THINK_ADAPTIVE = 2 /* {"type":"adaptive"}: the model sizes its thinking */
};

struct llm_request {
	uint64_t tag; /* caller's id, echoed in the reply */
	const struct llm_message *msgs;
	size_t nmsgs;
	double temperature;		  /* < 0: not sent (server default) */
	uint32_t max_tokens;		  /* 0: not sent (OpenAI); required by Anthropic */
	enum llm_token_field token_field; /* OpenAI only; Anthropic takes max_tokens alone */
	/*
	 * Reasoning effort (e.g. "low", "high"); NULL or "": not sent.  OpenAI:
	 * "reasoning_effort"; Anthropic: "output_config": {"effort": ...}.
	 */
	const char *reasoning_effort;
	enum llm_thinking thinking; /* Anthropic only */
	uint32_t thinking_budget;   /* tokens, for LLM_THINK_BUDGET */
	/*
	 * The text of a JSON object whose members are added to the body after
	 * the request's own (server-specific switches such as vLLM's
	 * chat_template_kwargs); NULL or "": none.  A member the request sets
	 * itself is ST_EINVAL.
	 */
	const char *extra;
};

struct llm_reply {
	uint64_t tag;
	int rc;		     /* 0, or ST_EHTTP/ST_ETIMEDOUT/ST_ETOOBIG/ST_EPROTO ... */
	bool fatal;	     /* 400/401/403/422 or a bad URL: do not retry; pause the run */
	long http_status;    /* last HTTP status, 0 if none */
	uint32_t attempts;   /* HTTP attempts made */
	uint32_t elapsed_ms; /* from llm_submit() to the end of the call */
	char *text;	     /* the completion text (owned), NULL on failure */
	char *raw;	     /* last response body (owned), NULL if none; 4 KiB after ST_ETOOBIG */
	size_t raw_len;
	uint64_t tokens_in;	   /* usage reported by the server */
	uint64_t tokens_out;	   /* output billed, reasoning included (see llm_parse_response) */
	uint64_t tokens_reasoning; /* of tokens_out, what the server says was reasoning */
	bool truncated;		   /* the reply stopped at its token limit */
	/*
	 * After an HTTP 4xx: the request member the server named as the cause
	 * (its "param" field, else the first member of the request the error
	 * message mentions), e.g. "max_tokens"; "" when none.
	 */
	char param[48];
	char error[256]; /* one lowercase line when rc != 0 */
};

struct llm_client;

/* ST_EINVAL on a configuration without base_url or model, or with a zero limit. */
ST_WUR int llm_client_new(const struct llm_config *cfg, struct llm_client **out);
void llm_client_free(struct llm_client *c); /* aborts calls in flight; NULL is a no-op */
/*
 * Queues a request; its first attempt starts at the next llm_poll().
 * ST_EBUSY when max_inflight calls are already in flight; ST_EINVAL on a
 * request the dialect cannot express; ST_ETOOBIG past max_request_bytes.
 */
ST_WUR int llm_submit(struct llm_client *c, const struct llm_request *rq);
/*
 * Drives transfers, backoff waits and retries, returning as soon as at
 * least one call has finished, after timeout_ms (0: do what is ready and
 * return; negative: no limit), or at once when nothing is in flight.
 * Moves up to n finished replies, in the order they finished, into out.
 * Returns the number moved, or a negative ST_E* code when curl itself
 * fails (calls stay in flight).
 */
ST_WUR int llm_poll(struct llm_client *c, int timeout_ms, struct llm_reply *out, size_t n);
/* Calls submitted and not yet returned by llm_poll(). */
size_t llm_inflight(const struct llm_client *c);
/*
 * How long the client still holds every attempt back after a 429: the
 * wait one call was given (its backoff, or its Retry-After up to
 * retry_after_max_ms) applies to all the client's calls, new ones too, so
 * a rate limit slows every caller at once.  0 when not held.
 */
uint64_t llm_held_ms(const struct llm_client *c);
void llm_reply_release(struct llm_reply *r);

/*
 * The JSON body for a request in cfg's dialect (exposed for journaling);
 * appended to out, which the caller initialised with its cap.  The same
 * request always gives the same bytes.  ST_EINVAL for what the dialect
 * cannot say: Anthropic without max_tokens, with max_completion_tokens, or
 * with a thinking budget not below max_tokens; OpenAI with thinking; extra
 * that is not a JSON object or repeats a member of the request.
 */
ST_WUR int llm_request_body(const struct llm_config *cfg, const struct llm_request *rq,
			    struct dbuf *out);
/* What a reply says besides its text. */
struct llm_answer {
	uint64_t tokens_in, tokens_out, tokens_reasoning; /* as in struct llm_reply */
	bool truncated;		/* finish_reason "length" / stop_reason "max_tokens" */
	size_t reasoning_bytes; /* reasoning text the reply carried apart (not kept) */
};

/*
 * Parses a response body in a dialect into the completion text (out is
 * reset first; its cap bounds the text) and what else it says (ans may be
 * NULL; missing usage reads as 0).  Exposed for replay and fuzzing.
 *
 * The text is the answer alone: Anthropic "text" blocks (thinking and
 * redacted_thinking blocks are skipped), OpenAI "content" (a string, or
 * its "text" parts) without a leading <think>...</think> block; reasoning
 * beside it ("reasoning_content", "reasoning") is counted, not kept.  A
 * message whose content is null is an empty answer when the reply carries
 * reasoning or was cut at its token limit (a reasoning model that spent
 * its whole limit thinking).
 *
 * tokens_out is what is billed as output: completion_tokens (OpenAI) or
 * output_tokens (Anthropic), which include reasoning on OpenAI, Anthropic,
 * DeepSeek and vLLM; where a server leaves reasoning out of them
 * (total_tokens above prompt + completion, or reasoning_tokens above
 * completion_tokens), the reasoning is added.  tokens_reasoning is
 * usage.completion_tokens_details.reasoning_tokens (or
 * usage.reasoning_tokens), 0 when not reported.
 *
 * ST_EPROTO with err set (one line; err may be NULL) on a malformed body, a
 * body without an answer, or an error object; ST_ETOOBIG when the text
 * passes the cap.
 */
ST_WUR int llm_parse_response(enum llm_api api, const char *body, size_t len, struct dbuf *text,
			      struct llm_answer *ans, char *err, size_t errlen);

#endif
