/*
 * providers.c -- the providers a run's options name (journaled, or from
 * the command line): replayed replies or a client per role over HTTP, and
 * stark-eval or replayed results.  API keys are read from the environment
 * (key_for says which goes where: api_key_env.ROLE, $STARK_API_KEY,
 * $OPENAI_API_KEY, $ANTHROPIC_API_KEY), and every one of those variables is
 * removed from the environment at once, so no child (the evaluator, the
 * compilers it runs) can inherit them; keys are never journaled, and are
 * wiped from memory once the clients hold their copies.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

/* A variable's value, copied, and (take) the variable removed from the environment. */
static char *take_env(const char *name, bool take)
{
	const char *v = name && *name ? getenv(name) : NULL;
	char *copy = v && *v ? strdup(v) : NULL;

	if (take && name && *name)
		unsetenv(name);
	return copy;
}

static void wipe(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

/* The keys a run may send: taken from the environment at once, wiped after. */
struct keyring {
	char *stark, *openai, *anthropic;
	char *role[ROLE_COUNT]; /* api_key_env.ROLE's */
};

/* The keys (take: and the variables out of the environment, for good). */
static void keyring_take(struct keyring *k, const struct search_config *cfg, bool take)
{
	memset(k, 0, sizeof(*k));
	for (int i = 0; i < ROLE_COUNT; i++) {
		const char *name = cfg->api_key_env[i];

		for (int j = 0; j < i && name[0] && !k->role[i]; j++)
			if (!strcmp(name, cfg->api_key_env[j]) && k->role[j])
				k->role[i] = strdup(k->role[j]);
		if (!k->role[i])
			k->role[i] = take_env(name, take);
	}
	k->stark = take_env("STARK_API_KEY", take);
	k->openai = take_env("OPENAI_API_KEY", take);
	k->anthropic = take_env("ANTHROPIC_API_KEY", take);
}

static void keyring_wipe(struct keyring *k)
{
	wipe(k->stark);
	wipe(k->openai);
	wipe(k->anthropic);
	for (int i = 0; i < ROLE_COUNT; i++)
		wipe(k->role[i]);
}

/* The vendor's own server, which its variable's key is for. */
static bool vendor_host(const struct route *rt)
{
	return str_starts(rt->base_url, rt->api == LLM_ANTHROPIC ? "https://api.anthropic.com/"
								 : "https://api.openai.com/");
}

/*
 * The key a role's route is sent with (borrowed from k): api_key_env.ROLE's
 * variable; else, when every role uses one server, $STARK_API_KEY or the
 * dialect's variable (OPENAI_API_KEY, ANTHROPIC_API_KEY); else the
 * dialect's variable on the vendor's own server only, so no key goes to a
 * server it was not meant for.
 */
static int key_for(const struct keyring *k, const struct search_config *cfg, int role,
		   const struct route *rt, bool one_server, const char **key, char *err,
		   size_t errlen)
{
	const char *vendor = rt->api == LLM_ANTHROPIC ? k->anthropic : k->openai;

	*key = NULL;
	if (cfg->api_key_env[role][0]) {
		*key = k->role[role];
		if (!*key)
			snprintf(err, errlen, "api_key_env.%s names %s, which is not set",
				 search_role_name((enum search_role)role), cfg->api_key_env[role]);
		return *key ? 0 : ST_EINVAL;
	}
	if (one_server) {
		*key = k->stark ? k->stark : vendor;
		return 0;
	}
	if (k->stark) {
		snprintf(err, errlen,
			 "STARK_API_KEY is ambiguous when roles use different servers: name each "
			 "role's variable with api_key_env.ROLE");
		return ST_EINVAL;
	}
	*key = vendor_host(rt) ? vendor : NULL;
	return 0;
}

/*
 * The client configuration of each role the policy uses, with its key
 * (borrowed from k); llm (not NULL) gets the provider, or with llm NULL
 * this only checks that every role has a route and a key it may be sent.
 */
static int http_routes_for(const struct search_config *cfg, unsigned roles_mask,
			   uint32_t inflight, const char *spec, const char *model,
			   const struct keyring *k, struct llm_provider **llm, char *err,
			   size_t errlen);

static int http_routes(const struct search_config *cfg, const char *spec, const char *model,
		       const struct keyring *k, struct llm_provider **llm, char *err, size_t errlen)
{
	unsigned mask = 0;

	for (int i = 0; i < ROLE_COUNT; i++)
		if (route_role_used(cfg->policy, (enum search_role)i))
			mask |= 1u << i;
	return http_routes_for(cfg, mask, 0, spec, model, k, llm, err, errlen);
}

/* http_routes for the roles in roles_mask, inflight calls at once per client (0: default). */
static int http_routes_for(const struct search_config *cfg, unsigned roles_mask,
			   uint32_t inflight, const char *spec, const char *model,
			   const struct keyring *k, struct llm_provider **llm, char *err,
			   size_t errlen)
{
	struct llm_config cfgs[ROLE_COUNT];
	struct route rts[ROLE_COUNT];
	const char *roles[ROLE_COUNT];
	int rix[ROLE_COUNT];
	bool one = true;
	size_t n = 0;
	int rc;

	rc = route_check(cfg, spec, model, err, errlen);
	for (int i = 0; !rc && i < ROLE_COUNT; i++) {
		if (!(roles_mask & (1u << i)))
			continue;
		rc = route_of(cfg, spec, model, (enum search_role)i, &rts[n], err, errlen);
		if (rc)
			break;
		roles[n] = search_role_name((enum search_role)i);
		rix[n] = i;
		one &= !strcmp(rts[n].base_url, rts[0].base_url); /* one server, any dialect */
		n++;
	}
	for (size_t i = 0; !rc && i < n; i++) {
		llm_config_init(&cfgs[i]);
		cfgs[i].api = rts[i].api;
		cfgs[i].base_url = rts[i].base_url;
		cfgs[i].model = rts[i].model;
		if (inflight)
			cfgs[i].max_inflight = inflight;
		rc = key_for(k, cfg, rix[i], &rts[i], one, &cfgs[i].api_key, err, errlen);
	}
	if (!rc && llm) {
		rc = llm_provider_http(roles, cfgs, n, llm);
		if (rc)
			snprintf(err, errlen, "llm: cannot set up the clients: %s",
				 stark_strerror(rc));
	}
	return rc;
}

/* The HTTP provider of a run, its keys taken out of the environment. */
static int http_provider(const struct run *r, struct llm_provider **llm, char *err, size_t errlen)
{
	struct keyring k;
	int rc;

	keyring_take(&k, &r->cfg, true);
	rc = http_routes(&r->cfg, jr_str(r->options, "llm", ""), jr_str(r->options, "model", ""),
			 &k, llm, err, errlen);
	keyring_wipe(&k);
	return rc;
}

/* Before a run is created: every role reaches a model, with a key it may be sent. */
int cli_check_routes(const struct search_config *cfg, const char *spec, const char *model,
		     char *err, size_t errlen)
{
	struct keyring k;
	int rc;

	keyring_take(&k, cfg, false);
	rc = http_routes(cfg, spec, model, &k, NULL, err, errlen);
	keyring_wipe(&k);
	return rc;
}

/* The providers named by a run's options (journaled or from the command line). */
int cli_make_providers(const struct run *r, struct llm_provider **llm, struct eval_provider **eval)
{
	const char *spec = jr_str(r->options, "llm", ""), *ev = jr_str(r->options, "eval", "");
	char err[CLI_ERR_MAX] = "";
	int rc;

	*llm = NULL;
	*eval = NULL;
	if (str_starts(spec, "replay:"))
		rc = llm_provider_replay(spec + 7, llm, err, sizeof(err));
	else
		rc = http_provider(r, llm, err, sizeof(err));
	if (rc) {
		stark_warn("run %s: %s", r->id, err);
		return CLI_USAGE;
	}
	if (str_starts(ev, "replay:"))
		rc = eval_provider_replay(ev + 7, eval, err, sizeof(err));
	else
		rc = eval_provider_real(cli_evaluator_path(), eval);
	if (rc) {
		if (err[0])
			stark_warn("%s", err);
		llm_provider_free(*llm);
		*llm = NULL;
		return CLI_USAGE;
	}
	return CLI_OK;
}

/* ---- benches ---- */

int cli_bench_llm(const struct search_config *cfg, const enum search_policy *pols, size_t npol,
		  const char *spec, const char *model, uint32_t inflight, bool take,
		  struct llm_provider **llm, char *err, size_t errlen)
{
	struct keyring k;
	unsigned mask = 0;
	int rc;

	for (size_t p = 0; p < npol; p++)
		for (int i = 0; i < ROLE_COUNT; i++)
			if (route_role_used(pols[p], (enum search_role)i))
				mask |= 1u << i;
	keyring_take(&k, cfg, take);
	rc = http_routes_for(cfg, mask, inflight, spec, model, &k, llm, err, errlen);
	keyring_wipe(&k);
	return rc;
}

/* replay:DIR means DIR/STEM.jsonl for the problem STEM.py; a file is itself. */
static void replay_path(const char *path, const char *problem, char *out, size_t len)
{
	struct stat sb;
	const char *dot = strrchr(problem, '.');
	int n = dot ? (int)(dot - problem) : (int)strlen(problem);

	if (!stat(path, &sb) && S_ISDIR(sb.st_mode))
		snprintf(out, len, "%s/%.*s.jsonl", path, n, problem);
	else
		snprintf(out, len, "%s", path);
}

int cli_bench_replay(void *arg, struct run *r, struct llm_provider **llm,
		     struct eval_provider **eval)
{
	const char *spec = jr_str(r->options, "llm", ""), *ev = jr_str(r->options, "eval", "");
	char err[CLI_ERR_MAX] = "", path[PROTO_PATH_MAX];
	int rc = 0;

	(void)arg;
	if (llm && str_starts(spec, "replay:")) {
		replay_path(spec + 7, r->problem, path, sizeof(path));
		rc = llm_provider_replay(path, llm, err, sizeof(err));
	}
	if (!rc && eval && str_starts(ev, "replay:")) {
		replay_path(ev + 7, r->problem, path, sizeof(path));
		rc = eval_provider_replay(path, eval, err, sizeof(err));
	}
	if (rc) {
		stark_warn("run %s: %s", r->id, err);
		if (llm) {
			llm_provider_free(*llm);
			*llm = NULL;
		}
	}
	return rc;
}
