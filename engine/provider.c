/*
 * provider.c -- the real providers: LLM calls over HTTP through llm/, and
 * evaluations by `stark-eval` through pool/pool.h.
 *
 * For `stark run` a call submits one request and polls until its reply
 * arrives, checking the stop flag between polls (a poll lasts at most
 * STOP_POLL_MS, so SIGINT is honoured within a fraction of a second); a
 * bench submits many and polls them together (submit, poll).  Each role has a route (endpoint, model, key); routes that agree
 * on all three share a client.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

#define STOP_POLL_MS   200
#define HTTP_ROLES_MAX 8

struct llm_http {
	struct llm_provider base;
	struct llm_client *client[HTTP_ROLES_MAX]; /* distinct routes */
	char *role[HTTP_ROLES_MAX];		   /* role names */
	size_t route_of[HTTP_ROLES_MAX];	   /* role i -> client index */
	size_t nroles, nclients;
};

static struct llm_client *client_for(struct llm_http *h, const char *role)
{
	for (size_t i = 0; i < h->nroles; i++)
		if (!strcmp(h->role[i], role))
			return h->client[h->route_of[i]];
	return NULL;
}

/* Sends rq: 0 in flight, 1 when it could not be sent (a failed reply in *out). */
static int http_submit(struct llm_provider *p, const char *key, const char *role,
		       const struct llm_request *rq, struct llm_reply *out)
{
	struct llm_http *h = (struct llm_http *)p;
	struct llm_client *c = client_for(h, role);
	int rc;

	(void)key;
	memset(out, 0, sizeof(*out));
	out->tag = rq->tag;
	rc = c ? llm_submit(c, rq) : ST_ENOENT;
	if (!rc)
		return 0;
	out->rc = rc;
	out->fatal = rc == ST_EINVAL || rc == ST_ETOOBIG || rc == ST_ENOENT;
	snprintf(out->error, sizeof(out->error), "%s",
		 c ? "cannot submit the request: " : "no llm for role ");
	snprintf(out->error + strlen(out->error), sizeof(out->error) - strlen(out->error), "%s",
		 c ? stark_strerror(rc) : role);
	return 1;
}

/* Replies of every client; the wait is spent on the first busy one. */
static int http_poll(struct llm_provider *p, int timeout_ms, struct llm_reply *out, size_t n)
{
	struct llm_http *h = (struct llm_http *)p;
	size_t got = 0;
	bool waited = false;

	for (size_t i = 0; i < h->nclients && got < n; i++) {
		int k;

		if (!llm_inflight(h->client[i]))
			continue;
		k = llm_poll(h->client[i], waited ? 0 : timeout_ms, out + got, n - got);
		if (k < 0)
			return k;
		waited = true;
		got += (size_t)k;
	}
	return (int)got;
}

static uint64_t http_held_ms(struct llm_provider *p)
{
	struct llm_http *h = (struct llm_http *)p;
	uint64_t m = 0;

	for (size_t i = 0; i < h->nclients; i++)
		if (llm_held_ms(h->client[i]) > m)
			m = llm_held_ms(h->client[i]);
	return m;
}

static int http_call(struct llm_provider *p, const char *key, const char *role,
		     const struct llm_request *rq, struct llm_reply *out)
{
	struct llm_http *h = (struct llm_http *)p;
	struct llm_client *c = client_for(h, role);
	int n;

	if (http_submit(p, key, role, rq, out))
		return ST_OK;
	for (;;) {
		if (p->stop && *p->stop)
			return ST_ECANCELED;
		n = llm_poll(c, STOP_POLL_MS, out, 1);
		if (n == 1)
			return ST_OK;
		if (n < 0)
			return n;
	}
}

static void http_free(struct llm_provider *p)
{
	struct llm_http *h = (struct llm_http *)p;

	for (size_t i = 0; i < h->nclients; i++)
		llm_client_free(h->client[i]);
	for (size_t i = 0; i < h->nroles; i++)
		free(h->role[i]);
	free(h);
}

static bool same_str(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

static bool same_route(const struct llm_config *a, const struct llm_config *b)
{
	return a->api == b->api && same_str(a->base_url, b->base_url) &&
	       same_str(a->model, b->model) && same_str(a->api_key, b->api_key);
}

int llm_provider_http(const char *const *roles, const struct llm_config *routes, size_t n,
		      struct llm_provider **out)
{
	struct llm_http *h;
	int rc = 0;

	if (n > HTTP_ROLES_MAX)
		return ST_ETOOBIG;
	h = calloc(1, sizeof(*h));
	if (!h)
		return ST_ENOMEM;
	h->base.call = http_call;
	h->base.submit = http_submit;
	h->base.poll = http_poll;
	h->base.held_ms = http_held_ms;
	h->base.free = http_free;
	h->base.name = n && routes[0].api == LLM_ANTHROPIC ? "anthropic" : "openai";
	for (size_t i = 0; !rc && i < n; i++) {
		size_t j;

		for (j = 0; j < i && !same_route(&routes[j], &routes[i]); j++)
			;
		h->role[i] = strdup(roles[i]);
		if (!h->role[i]) {
			rc = ST_ENOMEM;
			break;
		}
		h->nroles++;
		if (j < i) {
			h->route_of[i] = h->route_of[j];
			continue;
		}
		rc = llm_client_new(&routes[i], &h->client[h->nclients]);
		h->route_of[i] = h->nclients++;
	}
	if (rc) {
		http_free(&h->base);
		return rc;
	}
	*out = &h->base;
	return ST_OK;
}
