/*
 * http.c -- the LLM client proper: calls, attempts, retries and deadlines
 * over curl multi.  The only file in STARK that includes <curl/curl.h>;
 * curl's errors are mapped to ST_E* codes here.
 *
 * A call is one llm_submit(): a request body built once, then one or more
 * HTTP attempts.  Each call sits in a slot (max_inflight of them) and moves
 *   WAITING --(not_before reached)--> RUNNING --(attempt ends)--> WAITING | DONE
 * and a DONE call is handed to the caller by llm_poll().  Nothing sleeps:
 * a backoff is a call's not_before time, and llm_poll() waits in
 * curl_multi_poll() for at most the time to the nearest one, so waits never
 * hold up other transfers.  Every attempt's curl timeout is the smaller of
 * the attempt timeout and what is left of the call's deadline, and a retry
 * is only scheduled when its wait ends before the deadline, so a call ends
 * by its deadline whatever the server does (hang, drip, flood).
 *
 * The API key lives in one header list; it is wiped on free, never logged
 * (no CURLOPT_VERBOSE) and redacted from error text and raw bodies.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "llm/llm_int.h"

#define NS_PER_MS	1000000ull
#define KEY_REDACT_MIN	8    /* shorter keys would redact innocent text */
#define RETRY_MIN_MS	100  /* the least time worth starting an attempt with */
#define RAW_KEEP_TOOBIG 4096 /* bytes of an oversized body kept in the reply */

enum call_state { CALL_FREE = 0, CALL_WAITING, CALL_RUNNING, CALL_DONE };

struct llm_call {
	enum call_state state;
	CURL *easy;
	char *body; /* request body (owned); curl reads it in place */
	size_t body_len;
	struct dbuf resp;    /* this attempt's response body, capped */
	uint64_t t_submit;   /* ns, monotonic */
	uint64_t deadline;   /* ns: the call ends by then */
	uint64_t not_before; /* ns: a WAITING call starts its next attempt then */
	uint64_t done_seq;   /* order of completion */
	uint32_t attempts;
	bool too_big; /* the write callback hit the cap */
	bool no_mem;  /* the write callback could not grow */
	bool have_retry_after;
	uint64_t retry_after_ms;
	int last_rc;	    /* why the last attempt failed, for a deadline hit */
	char last_why[256]; /* before the next one could start */
	struct llm_reply reply;
	char curl_err[CURL_ERROR_SIZE];
};

struct llm_client {
	struct llm_config cfg; /* strings point at the copies below */
	char *base_url;
	char *model;
	char *api_key;
	char *url;
	struct curl_slist *headers; /* holds the key: wiped on free */
	CURLM *multi;
	struct llm_call *calls; /* cfg.max_inflight slots */
	size_t ncalls;		/* slots not FREE */
	uint64_t rng;
	uint64_t seq;
	uint64_t hold_until; /* ns: no attempt starts before (a 429's wait) */
};

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

/* Replaces every copy of the key in buf with '*' (servers have echoed keys). */
static void redact(const struct llm_client *c, char *buf, size_t len)
{
	size_t klen = c->api_key ? strlen(c->api_key) : 0;
	char *p = buf;

	if (!buf || klen < KEY_REDACT_MIN)
		return;
	while (len >= klen && (p = memmem(buf, len, c->api_key, klen))) {
		memset(p, '*', klen);
		len -= (size_t)(p - buf) + klen;
		buf = p + klen;
	}
}

/* Sockets must not leak into children: libcurl 7.88 opens them without CLOEXEC. */
static curl_socket_t open_cloexec(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
	(void)ud;
	(void)purpose;
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/*
 * libcurl also opens a wakeup channel in curl_multi_init() without CLOEXEC
 * (7.88: a socketpair; the 8.x releases may use a pipe), and offers no hook for
 * it.  So list the descriptors before and after and mark the new sockets
 * and pipes close-on-exec.  Best effort (children close
 * everything above 2 anyway); a socket another thread opens meanwhile only
 * becomes close-on-exec, which STARK never relies on the opposite of.
 */
#define FD_LIST_MAX 16384

static size_t list_fds(int *fds, size_t max)
{
	struct dirent *d;
	size_t n = 0;
	DIR *dir = opendir("/proc/self/fd");

	if (!dir)
		return 0;
	while ((d = readdir(dir)) && n < max)
		if (d->d_name[0] >= '0' && d->d_name[0] <= '9')
			fds[n++] = atoi(d->d_name);
	closedir(dir);
	return n;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

static CURLM *multi_init_cloexec(void)
{
	int *before = malloc(FD_LIST_MAX * sizeof(int)), *after = NULL;
	size_t nb = before ? list_fds(before, FD_LIST_MAX) : 0, na;
	CURLM *m = curl_multi_init();

	if (!m || !before || nb == FD_LIST_MAX || !(after = malloc(FD_LIST_MAX * sizeof(int))))
		goto out_free;
	qsort(before, nb, sizeof(int), cmp_int);
	na = list_fds(after, FD_LIST_MAX);
	for (size_t i = 0; i < na; i++) {
		struct stat st;
		bool old = false;
		int fl;

		old = bsearch(&after[i], before, nb, sizeof(int), cmp_int) != NULL;
		if (old || fstat(after[i], &st) || !(S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode)))
			continue;
		fl = fcntl(after[i], F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			(void)fcntl(after[i], F_SETFD, fl | FD_CLOEXEC);
	}
out_free:
	free(after);
	free(before);
	return m;
}

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
	struct llm_call *call = ud;
	int rc = dbuf_append(&call->resp, data, size * n);

	if (rc == ST_ETOOBIG)
		call->too_big = true;
	else if (rc)
		call->no_mem = true;
	return rc ? 0 : size * n; /* 0 aborts the transfer */
}

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
	static const char name[] = "retry-after:";
	struct llm_call *call = ud;
	size_t len = size * n;
	char val[96];
	uint64_t ms;

	if (len >= 5 && !strncmp(data, "HTTP/", 5)) { /* a new response (after 1xx) */
		call->have_retry_after = false;
		return len;
	}
	if (len <= sizeof(name) - 1 || strncasecmp(data, name, sizeof(name) - 1))
		return len;
	len -= sizeof(name) - 1;
	data += sizeof(name) - 1;
	while (len && (data[len - 1] == '\r' || data[len - 1] == '\n'))
		len--;
	if (len >= sizeof(val))
		return size * n; /* no valid value is that long */
	memcpy(val, data, len);
	val[len] = '\0';
	if (!llm__parse_retry_after(val, time(NULL), &ms)) {
		call->have_retry_after = true;
		call->retry_after_ms = ms;
	}
	return size * n;
}

static int build_headers(struct llm_client *c)
{
	static const char *const fixed[] = {
	    "Content-Type: application/json", "Accept: application/json",
	    "Expect:", /* no 100-continue round trip on large prompts */
	};
	struct curl_slist *h;
	struct dbuf auth;
	int rc = 0;

	for (size_t i = 0; i < ST_ARRAY_LEN(fixed); i++) {
		if (!(h = curl_slist_append(c->headers, fixed[i])))
			return ST_ENOMEM;
		c->headers = h;
	}
	if (c->cfg.api == LLM_ANTHROPIC) {
		if (!(h = curl_slist_append(c->headers, "anthropic-version: 2023-06-01")))
			return ST_ENOMEM;
		c->headers = h;
	}
	if (!c->api_key || !*c->api_key)
		return 0;
	dbuf_init(&auth, 64 + strlen(c->api_key));
	rc = dbuf_printf(&auth,
			 c->cfg.api == LLM_ANTHROPIC ? "x-api-key: %s" : "Authorization: Bearer %s",
			 c->api_key);
	if (!rc) {
		if ((h = curl_slist_append(c->headers, auth.p)))
			c->headers = h;
		else
			rc = ST_ENOMEM;
	}
	if (auth.p)
		explicit_bzero(auth.p, auth.len);
	dbuf_release(&auth);
	return rc;
}

static void free_headers(struct curl_slist *h)
{
	for (struct curl_slist *p = h; p; p = p->next)
		explicit_bzero(p->data, strlen(p->data));
	curl_slist_free_all(h);
}

void llm_client_free(struct llm_client *c)
{
	if (!c)
		return;
	for (size_t i = 0; c->calls && i < c->cfg.max_inflight; i++) {
		struct llm_call *call = &c->calls[i];

		if (call->easy) {
			if (call->state == CALL_RUNNING)
				curl_multi_remove_handle(c->multi, call->easy);
			curl_easy_cleanup(call->easy);
		}
		free(call->body);
		dbuf_release(&call->resp);
		llm_reply_release(&call->reply);
	}
	free(c->calls);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	free_headers(c->headers);
	free(c->base_url);
	free(c->model);
	wipe_free(c->api_key);
	free(c->url);
	free(c);
	curl_global_cleanup();
}

int llm_client_new(const struct llm_config *cfg, struct llm_client **out)
{
	struct llm_client *c;
	struct dbuf url;
	size_t blen;
	int rc;

	*out = NULL;
	if ((rc = llm__config_check(cfg, NULL, 0)))
		return rc;
	/* Reference-counted; thread-safe in the libcurl STARK builds against (>= 7.84). */
	if (curl_global_init(CURL_GLOBAL_DEFAULT))
		return ST_EHTTP;
	c = calloc(1, sizeof(*c));
	if (!c) {
		curl_global_cleanup();
		return ST_ENOMEM;
	}
	c->cfg = *cfg;
	c->base_url = strdup(cfg->base_url);
	c->model = strdup(cfg->model);
	c->api_key = str_dup(cfg->api_key);
	c->calls = calloc(cfg->max_inflight, sizeof(*c->calls));
	c->multi = multi_init_cloexec();
	rc = ST_ENOMEM;
	if (!c->base_url || !c->model || (cfg->api_key && !c->api_key) || !c->calls || !c->multi)
		goto out_free;
	c->cfg.base_url = c->base_url;
	c->cfg.model = c->model;
	c->cfg.api_key = c->api_key;
	blen = strlen(c->base_url);
	while (blen && c->base_url[blen - 1] == '/')
		blen--;
	dbuf_init(&url, blen + 64);
	rc = dbuf_printf(&url, "%.*s/%s", (int)blen, c->base_url,
			 cfg->api == LLM_ANTHROPIC ? "messages" : "chat/completions");
	c->url = dbuf_detach(&url, NULL);
	if (rc)
		goto out_free;
	if ((rc = build_headers(c)))
		goto out_free;
	c->rng = cfg->seed;
	*out = c;
	return 0;
out_free:
	llm_client_free(c);
	return rc;
}

/* Options that hold for every attempt of a call. */
static int setup_easy(struct llm_client *c, struct llm_call *call)
{
	const struct llm_config *cfg = &c->cfg;
	CURL *e = call->easy;
	CURLcode r = CURLE_OK;

	r |= curl_easy_setopt(e, CURLOPT_URL, c->url);
	r |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	r |= curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	r |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	r |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
	r |= curl_easy_setopt(e, CURLOPT_POST, 1L);
	r |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)call->body_len);
	r |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, call->body);
	r |= curl_easy_setopt(e, CURLOPT_USERAGENT, "stark-llm/1");
	r |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	r |= curl_easy_setopt(e, CURLOPT_WRITEDATA, call);
	r |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	r |= curl_easy_setopt(e, CURLOPT_HEADERDATA, call);
	r |= curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_cloexec);
	r |= curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)cfg->max_response_bytes);
	r |= curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	r |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, call->curl_err);
	r |= curl_easy_setopt(e, CURLOPT_PRIVATE, call);
	return r == CURLE_OK ? 0 : ST_EHTTP;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static const char *plural(uint32_t n)
{
	return n == 1 ? "" : "s";
}

/* snprintf that may truncate: error lines are bounded on purpose. */
static void fmt_line(char *buf, size_t n, const char *fmt, ...) ST_PRINTF(3, 4);
static void fmt_line(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, n, fmt, ap);
	va_end(ap);
}

static void vfinish(struct llm_client *c, struct llm_call *call, int rc, bool fatal,
		    const char *fmt, va_list ap)
{
	struct llm_reply *r = &call->reply;
	uint64_t now = clock_mono_ns();

	r->rc = rc;
	r->fatal = fatal;
	r->attempts = call->attempts;
	r->elapsed_ms = (uint32_t)min_u64((now - call->t_submit) / NS_PER_MS, UINT32_MAX);
	if (rc) {
		vsnprintf(r->error, sizeof(r->error), fmt, ap);
		redact(c, r->error, strlen(r->error));
	}
	redact(c, call->resp.p, call->resp.len);
	r->raw = dbuf_detach(&call->resp, &r->raw_len);
	curl_easy_cleanup(call->easy);
	call->easy = NULL;
	free(call->body);
	call->body = NULL;
	call->state = CALL_DONE;
	call->done_seq = ++c->seq;
}

static void finish(struct llm_client *c, struct llm_call *call, int rc, bool fatal, const char *fmt,
		   ...) ST_PRINTF(5, 6);
static void finish(struct llm_client *c, struct llm_call *call, int rc, bool fatal, const char *fmt,
		   ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfinish(c, call, rc, fatal, fmt, ap);
	va_end(ap);
}

static void start_attempt(struct llm_client *c, struct llm_call *call, uint64_t now)
{
	const struct llm_config *cfg = &c->cfg;
	uint64_t left = call->deadline > now ? (call->deadline - now) / NS_PER_MS : 0;
	uint64_t t = min_u64(cfg->timeout_ms, left);
	uint64_t conn = cfg->connect_timeout_ms ? min_u64(cfg->connect_timeout_ms, t) : t;
	uint64_t low_ms = cfg->low_speed_ms ? cfg->low_speed_ms : cfg->timeout_ms;
	CURLcode r = CURLE_OK;

	if (!t) {
		if (call->last_rc)
			finish(c, call, call->last_rc, false,
			       "%s; deadline of %u ms reached after %u attempt%s", call->last_why,
			       cfg->total_timeout_ms, call->attempts, plural(call->attempts));
		else
			finish(c, call, ST_ETIMEDOUT, false,
			       "deadline of %u ms passed before attempt %u", cfg->total_timeout_ms,
			       call->attempts + 1);
		return;
	}
	dbuf_reset(&call->resp);
	call->too_big = call->no_mem = call->have_retry_after = false;
	call->curl_err[0] = '\0';
	r |= curl_easy_setopt(call->easy, CURLOPT_TIMEOUT_MS, (long)t);
	r |= curl_easy_setopt(call->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)conn);
	r |= curl_easy_setopt(call->easy, CURLOPT_LOW_SPEED_LIMIT, (long)cfg->low_speed_bps);
	r |= curl_easy_setopt(call->easy, CURLOPT_LOW_SPEED_TIME, (long)((low_ms + 999) / 1000));
	if (r != CURLE_OK || curl_multi_add_handle(c->multi, call->easy) != CURLM_OK) {
		finish(c, call, ST_EHTTP, false, "cannot start a request to %s", c->url);
		return;
	}
	call->attempts++;
	call->state = CALL_RUNNING;
}

/*
 * After a retryable failure (reason already in why): schedule the next
 * attempt, or finish with rc when retries or the deadline are spent.
 */
static void retry_or_finish(struct llm_client *c, struct llm_call *call, int rc, const char *why)
{
	const struct llm_config *cfg = &c->cfg;
	uint64_t now = clock_mono_ns(), delay;

	if (call->attempts > cfg->max_retries) {
		finish(c, call, rc, false, "%s; gave up after %u attempt%s", why, call->attempts,
		       plural(call->attempts));
		return;
	}
	delay = llm__backoff_ms(cfg, call->attempts - 1, &c->rng);
	if (call->have_retry_after) {
		uint64_t ra = min_u64(call->retry_after_ms, cfg->retry_after_max_ms);

		delay = delay > ra ? delay : ra;
	}
	/* a retry needs time to do something: RETRY_MIN_MS (or timeout_ms) after its wait */
	if (now + (delay + min_u64(RETRY_MIN_MS, cfg->timeout_ms)) * NS_PER_MS > call->deadline) {
		finish(c, call, rc, false,
		       "%s; no time left for a retry within %u ms, %u attempt%s made", why,
		       cfg->total_timeout_ms, call->attempts, plural(call->attempts));
		return;
	}
	call->not_before = now + delay * NS_PER_MS;
	/* A rate limit is the server's, not one call's: every call of this
	 * client waits it out, so many callers slow down together instead of
	 * each spending its retries against the limit. */
	if (call->reply.http_status == 429 && call->not_before > c->hold_until)
		c->hold_until = call->not_before;
	call->state = CALL_WAITING;
	call->last_rc = rc;
	snprintf(call->last_why, sizeof(call->last_why), "%s", why);
}

static void http_done(struct llm_client *c, struct llm_call *call, long status)
{
	struct llm_reply *r = &call->reply;
	char why[256], msg[160];
	struct llm_answer ans;
	struct dbuf text;
	int rc;

	switch (llm__classify_status(status)) {
	case LLM__OK:
		dbuf_init(&text, c->cfg.max_response_bytes);
		rc = llm_parse_response(c->cfg.api, call->resp.p, call->resp.len, &text, &ans, msg,
					sizeof(msg));
		r->tokens_in = ans.tokens_in;
		r->tokens_out = ans.tokens_out;
		r->tokens_reasoning = ans.tokens_reasoning;
		r->truncated = ans.truncated;
		if (rc) {
			dbuf_release(&text);
			finish(c, call, rc, false, "reply from %s: %s", c->url, msg);
			return;
		}
		r->text = dbuf_detach(&text, NULL);
		finish(c, call, 0, false, "ok");
		return;
	case LLM__RETRY:
		llm__error_text(call->resp.p, call->resp.len, msg, sizeof(msg));
		fmt_line(why, sizeof(why), "http %ld from %s: %s", status, c->url, msg);
		retry_or_finish(c, call, ST_EHTTP, why);
		return;
	case LLM__FATAL:
	case LLM__FAIL:
		llm__error_text(call->resp.p, call->resp.len, msg, sizeof(msg));
		if (status >= 400 && status < 500)
			llm__error_param(call->resp.p, call->resp.len, call->body, call->body_len,
					 r->param, sizeof(r->param));
		finish(c, call, ST_EHTTP, llm__classify_status(status) == LLM__FATAL,
		       "http %ld from %s: %s", status, c->url, msg);
		return;
	}
}

static bool transport_retryable(CURLcode res)
{
	switch (res) {
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return true;
	default:
		return false;
	}
}

/* Errors that no retry or later call can fix: the configuration is wrong. */
static bool transport_fatal(CURLcode res)
{
	return res == CURLE_UNSUPPORTED_PROTOCOL || res == CURLE_URL_MALFORMAT ||
	       res == CURLE_PEER_FAILED_VERIFICATION || res == CURLE_SSL_CACERT_BADFILE ||
	       res == CURLE_SSL_CERTPROBLEM;
}

static void attempt_done(struct llm_client *c, struct llm_call *call, CURLcode res)
{
	const char *cause = call->curl_err[0] ? call->curl_err : curl_easy_strerror(res);
	char why[256];
	long status = 0;

	curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
	curl_multi_remove_handle(c->multi, call->easy);
	call->state = CALL_WAITING;
	call->reply.http_status = status;
	if (call->too_big || res == CURLE_FILESIZE_EXCEEDED) {
		if (call->resp.len > RAW_KEEP_TOOBIG) /* keep the start, for the journal */
			call->resp.p[call->resp.len = RAW_KEEP_TOOBIG] = '\0';
		finish(c, call, ST_ETOOBIG, false, "response from %s larger than %zu bytes", c->url,
		       c->cfg.max_response_bytes);
	} else if (call->no_mem) {
		finish(c, call, ST_ENOMEM, false, "out of memory reading a response from %s",
		       c->url);
	} else if (res == CURLE_OK) {
		http_done(c, call, status);
	} else if (res == CURLE_OPERATION_TIMEDOUT) {
		fmt_line(why, sizeof(why), "attempt %u on %s timed out: %s", call->attempts, c->url,
			 cause);
		retry_or_finish(c, call, ST_ETIMEDOUT, why);
	} else if (transport_retryable(res)) {
		fmt_line(why, sizeof(why), "request to %s failed: %s", c->url, cause);
		retry_or_finish(c, call, ST_EHTTP, why);
	} else {
		finish(c, call, ST_EHTTP, transport_fatal(res), "request to %s failed: %s", c->url,
		       cause);
	}
}

int llm_submit(struct llm_client *c, const struct llm_request *rq)
{
	struct llm_call *call = NULL;
	struct dbuf body;
	uint64_t now;
	int rc;

	if (c->ncalls >= c->cfg.max_inflight)
		return ST_EBUSY;
	for (size_t i = 0; i < c->cfg.max_inflight && !call; i++)
		if (c->calls[i].state == CALL_FREE)
			call = &c->calls[i];
	if (!call)
		return ST_EBUSY;
	dbuf_init(&body, c->cfg.max_request_bytes);
	rc = llm_request_body(&c->cfg, rq, &body);
	if (rc)
		goto out_body;
	memset(call, 0, sizeof(*call));
	call->body = dbuf_detach(&body, &call->body_len);
	dbuf_init(&call->resp, c->cfg.max_response_bytes);
	call->easy = curl_easy_init();
	rc = call->easy ? setup_easy(c, call) : ST_ENOMEM;
	if (rc)
		goto out_call;
	now = clock_mono_ns();
	call->reply.tag = rq->tag;
	call->t_submit = now;
	call->not_before = now;
	call->deadline = now + (uint64_t)c->cfg.total_timeout_ms * NS_PER_MS;
	call->state = CALL_WAITING;
	c->ncalls++;
	return 0;
out_call:
	curl_easy_cleanup(call->easy);
	free(call->body);
	memset(call, 0, sizeof(*call));
out_body:
	dbuf_release(&body);
	return rc;
}

/* Starts due attempts and runs curl; returns the next not_before (or UINT64_MAX). */
static int drive(struct llm_client *c, uint64_t *next)
{
	struct CURLMsg *msg;
	int running, left;
	uint64_t now = clock_mono_ns();

	for (size_t i = 0; i < c->cfg.max_inflight && c->hold_until <= now; i++)
		if (c->calls[i].state == CALL_WAITING && c->calls[i].not_before <= now)
			start_attempt(c, &c->calls[i], now);
	if (curl_multi_perform(c->multi, &running) != CURLM_OK)
		return ST_EHTTP;
	while ((msg = curl_multi_info_read(c->multi, &left))) {
		struct llm_call *call;
		char *priv = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
		call = (struct llm_call *)(void *)priv;
		if (call && call->state == CALL_RUNNING)
			attempt_done(c, call, msg->data.result);
	}
	*next = UINT64_MAX;
	for (size_t i = 0; i < c->cfg.max_inflight; i++)
		if (c->calls[i].state == CALL_WAITING)
			*next = min_u64(*next, c->calls[i].not_before > c->hold_until
						   ? c->calls[i].not_before
						   : c->hold_until);
	return 0;
}

static size_t ndone(const struct llm_client *c)
{
	size_t n = 0;

	for (size_t i = 0; i < c->cfg.max_inflight; i++)
		n += c->calls[i].state == CALL_DONE;
	return n;
}

/* Moves finished replies out, oldest first. */
static int collect(struct llm_client *c, struct llm_reply *out, size_t n)
{
	size_t moved = 0;

	while (moved < n) {
		struct llm_call *best = NULL;

		for (size_t i = 0; i < c->cfg.max_inflight; i++) {
			struct llm_call *call = &c->calls[i];

			if (call->state == CALL_DONE && (!best || call->done_seq < best->done_seq))
				best = call;
		}
		if (!best)
			break;
		out[moved++] = best->reply;
		dbuf_release(&best->resp);
		memset(best, 0, sizeof(*best));
		c->ncalls--;
	}
	return (int)moved;
}

int llm_poll(struct llm_client *c, int timeout_ms, struct llm_reply *out, size_t n)
{
	uint64_t start = clock_mono_ns(), end, next, now;
	int rc;

	end = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * NS_PER_MS;
	for (;;) {
		uint64_t wait;

		if ((rc = drive(c, &next)))
			return rc;
		if (ndone(c) || !c->ncalls)
			break;
		now = clock_mono_ns();
		if (now >= end)
			break;
		wait = min_u64(end, next);
		wait = wait > now ? (wait - now + NS_PER_MS - 1) / NS_PER_MS : 0;
		if (wait > 0 &&
		    curl_multi_poll(c->multi, NULL, 0, (int)min_u64(wait, 1000), NULL) != CURLM_OK)
			return ST_EHTTP;
	}
	return collect(c, out, n);
}

size_t llm_inflight(const struct llm_client *c)
{
	return c->ncalls;
}

uint64_t llm_held_ms(const struct llm_client *c)
{
	uint64_t now = clock_mono_ns();

	return c->hold_until > now ? (c->hold_until - now) / NS_PER_MS : 0;
}

void llm_reply_release(struct llm_reply *r)
{
	free(r->text);
	free(r->raw);
	r->text = NULL;
	r->raw = NULL;
	r->raw_len = 0;
}
