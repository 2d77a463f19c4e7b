/*
 * route.c -- how each agent role reaches its model: which server and
 * dialect (llm.ROLE or the run's --llm), which model, and the settings its
 * requests carry (temperature or none, the token-limit field, reasoning
 * effort, an Anthropic thinking budget or adaptive thinking, extra body
 * members), with the checks that catch, before anything is spent, what a
 * dialect cannot say, and the fix to name when a server refuses a member
 * all the same (a reasoning model that takes no temperature, say: servers
 * differ in ways no static check knows).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine_int.h"

/* Members stark sets itself; extra_body may not. */
static const char *const own_members[] = {
    "model",	   "system",	       "messages",
    "temperature", "max_tokens",       "max_completion_tokens",
    "thinking",	   "reasoning_effort", "output_config",
    "stream",
};

int route_of(const struct search_config *cfg, const char *llm, const char *model,
	     enum search_role role, struct route *out, char *err, size_t errlen)
{
	const char *name = search_role_name(role);
	const char *e = cfg->llm[role][0] ? cfg->llm[role] : llm;

	memset(out, 0, sizeof(*out));
	if (!e || !*e)
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "role %s has no llm: pass --llm or set llm.%s", name, name);
	if (str_starts(e, "openai:") && e[7]) {
		out->api = LLM_OPENAI;
		out->base_url = e + 7;
	} else if (str_starts(e, "anthropic:") && e[10]) {
		out->api = LLM_ANTHROPIC;
		out->base_url = e + 10;
	} else {
		return stark_errbuf(
		    err, errlen, ST_EINVAL,
		    "role %s: llm '%s' is not openai:BASE_URL or anthropic:BASE_URL%s", name, e,
		    cfg->llm[role][0] ? " (llm.ROLE cannot be replay:)" : "");
	}
	out->endpoint = e;
	out->model = cfg->model[role][0] ? cfg->model[role] : model;
	if (!out->model || !*out->model)
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "role %s has no model: pass --model or set model.%s", name,
				    name);
	return 0;
}

bool route_role_used(enum search_policy policy, enum search_role role)
{
	switch (policy) {
	case POLICY_SAMPLING:
		return role == ROLE_SAMPLE;
	case POLICY_REFLEXION:
		return role == ROLE_REFLECT;
	default:
		return role == ROLE_PLAN || role == ROLE_CODE || role == ROLE_DEBUG;
	}
}

static bool own_member(const char *key)
{
	for (size_t i = 0; i < ST_ARRAY_LEN(own_members); i++)
		if (!strcmp(key, own_members[i]))
			return true;
	return false;
}

static int check_extra(const char *extra, const char *role, char *err, size_t errlen)
{
	json_error_t je;
	json_t *x, *v;
	const char *k;
	int rc = 0;

	if (!extra[0])
		return 0;
	x = json_loads(extra, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(x)) {
		json_decref(x);
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "extra_body.%s must be a JSON object (%s)", role,
				    je.text[0] ? je.text : "it is not an object");
	}
	json_object_foreach(x, k, v)
	{
		if (own_member(k)) {
			rc = stark_errbuf(
			    err, errlen, ST_EINVAL,
			    "extra_body.%s sets '%s', which stark sets itself (use the keys "
			    "temperature, max_tokens, token_field, reasoning_effort, thinking)",
			    role, k);
			break;
		}
	}
	json_decref(x);
	return rc;
}

/* What one role's settings can say in its dialect. */
static int check_role(const struct search_config *cfg, const struct route *rt,
		      enum search_role role, char *err, size_t errlen)
{
	const char *n = search_role_name(role);
	uint32_t th = cfg->thinking[role];
	double t = cfg->temperature[role];

	if (rt->api == LLM_OPENAI && th != THINKING_OFF)
		return stark_errbuf(
		    err, errlen, ST_EINVAL,
		    "thinking.%s is Anthropic's; an OpenAI-compatible server takes "
		    "reasoning_effort.%s (or a switch of its own in extra_body.%s): set "
		    "thinking.%s = off",
		    n, n, n, n);
	if (rt->api == LLM_ANTHROPIC && cfg->token_field[role] != TOKEN_FIELD_MAX_TOKENS)
		return stark_errbuf(
		    err, errlen, ST_EINVAL,
		    "token_field.%s = max_completion_tokens is OpenAI's; Anthropic takes "
		    "max_tokens: set token_field.%s = max_tokens",
		    n, n);
	if (rt->api == LLM_ANTHROPIC && th != THINKING_OFF && th != THINKING_ADAPTIVE &&
	    th >= cfg->max_tokens[role])
		return stark_errbuf(
		    err, errlen, ST_EINVAL,
		    "thinking.%s = %u must be below max_tokens.%s = %u (Anthropic counts "
		    "the thinking within max_tokens): raise max_tokens.%s",
		    n, th, n, cfg->max_tokens[role], n);
	if (rt->api == LLM_ANTHROPIC && th != THINKING_OFF && t != TEMPERATURE_NONE && t != 1.0)
		return stark_errbuf(
		    err, errlen, ST_EINVAL,
		    "temperature.%s = %g with thinking.%s on: Anthropic takes no temperature "
		    "but 1 with thinking: set temperature.%s = none",
		    n, t, n, n);
	return check_extra(cfg->extra_body[role], n, err, errlen);
}

int route_check(const struct search_config *cfg, const char *llm, const char *model, char *err,
		size_t errlen)
{
	struct route rt;
	int rc;

	for (int r = 0; r < ROLE_COUNT; r++) {
		if (!route_role_used(cfg->policy, (enum search_role)r))
			continue;
		rc = route_of(cfg, llm, model, (enum search_role)r, &rt, err, errlen);
		if (!rc)
			rc = check_role(cfg, &rt, (enum search_role)r, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

void route_request(const struct search_config *cfg, enum search_role role, struct llm_request *rq)
{
	uint32_t th = cfg->thinking[role];

	rq->temperature = cfg->temperature[role] < 0 ? -1 : cfg->temperature[role];
	rq->max_tokens = cfg->max_tokens[role];
	rq->token_field = cfg->token_field[role] == TOKEN_FIELD_MAX_COMPLETION
			      ? LLM_TOKENS_MAX_COMPLETION
			      : LLM_TOKENS_MAX_TOKENS;
	rq->reasoning_effort = cfg->reasoning_effort[role][0] ? cfg->reasoning_effort[role] : NULL;
	rq->thinking = th == THINKING_OFF	 ? LLM_THINK_OFF
		       : th == THINKING_ADAPTIVE ? LLM_THINK_ADAPTIVE
						 : LLM_THINK_BUDGET;
	rq->thinking_budget = rq->thinking == LLM_THINK_BUDGET ? th : 0;
	rq->extra = cfg->extra_body[role][0] ? cfg->extra_body[role] : NULL;
}

/* Whether extra_body of role has a top-level member param. */
static bool extra_has(const char *extra, const char *param)
{
	json_t *x = extra[0] ? json_loads(extra, 0, NULL) : NULL;
	bool has = json_object_get(x, param) != NULL;

	json_decref(x);
	return has;
}

void route_fix(const struct search_config *cfg, enum llm_api api, enum search_role role,
	       const char *param, char *buf, size_t n)
{
	const char *r = search_role_name(role);
	uint32_t th = cfg->thinking[role];

	buf[0] = '\0';
	if (!param || !*param)
		return;
	if (!strcmp(param, "max_tokens") && api == LLM_OPENAI)
		snprintf(buf, n, "set token_field.%s = max_completion_tokens", r);
	else if (!strcmp(param, "max_tokens"))
		snprintf(buf, n,
			 "check max_tokens.%s (now %u): above any thinking budget, within "
			 "the model's output limit",
			 r, cfg->max_tokens[role]);
	else if (!strcmp(param, "max_completion_tokens"))
		snprintf(buf, n, "set token_field.%s = max_tokens", r);
	else if (!strcmp(param, "temperature"))
		snprintf(buf, n, "set temperature.%s = none", r);
	else if (!strcmp(param, "reasoning_effort") || !strcmp(param, "output_config"))
		snprintf(buf, n, "change reasoning_effort.%s (now %s; none sends no effort)", r,
			 cfg->reasoning_effort[role][0] ? cfg->reasoning_effort[role] : "none");
	else if (!strcmp(param, "thinking") && th == THINKING_ADAPTIVE)
		snprintf(buf, n, "set thinking.%s to a budget (e.g. 8000) or off", r);
	else if (!strcmp(param, "thinking"))
		snprintf(buf, n,
			 "set thinking.%s = adaptive (models that take adaptive thinking "
			 "only) or off, or change its budget",
			 r);
	else if (extra_has(cfg->extra_body[role], param))
		snprintf(buf, n, "change extra_body.%s, which sets '%s'", r, param);
}

void route_price(const struct search_config *cfg, enum search_role role, const char *model,
		 double *in, double *out)
{
	*in = cfg->price_in[role];
	*out = cfg->price_out[role];
	if (*in > 0 || *out > 0 || !model)
		return;
	for (uint32_t i = 0; i < cfg->nprices && i < CONFIG_PRICES_MAX; i++)
		if (!strcmp(cfg->price[i].model, model)) {
			*in = cfg->price[i].in;
			*out = cfg->price[i].out;
			return;
		}
}
