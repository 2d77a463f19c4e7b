/*
 * config.c -- the parameters of a search, with the paper's defaults.
 *
 * One declarative table names every key, where it lives in struct
 * search_config, its type and its accepted range; parsing, dumping and
 * checking all walk that table, so a key cannot be settable but missing
 * from the journaled dump.  Files are `key = value` lines; per-role keys
 * are KEY.ROLE (temperature.plan), or KEY alone for every role; model
 * prices are price.MODEL = IN OUT (a list beside the table).
 *
 * Defaults and where they come from:
 *   budget 30            issue 5: "budget 30 attempts per problem" (the
 *                        paper compares agents at the same attempt count)
 *   epsilon 0.3          issue 5 gives the paper's range 0.3-0.4; we take
 *                        the low end (more exploitation on a 30-attempt
 *                        budget).  We could not read the paper's own value.
 *   temperature plan 0.8, code 0.1, debug 0.1
 *                        the paper (plan creative, code/debug precise)
 *   temperature sample 0.7, reflect 0.3
 *                        ours: independent samples need diversity; a
 *                        reflection edits a given program like the code agent
 *                        but a little freer
 *   root_cap 5, prune_n 3, debug_max 2, leaders 3, leaf_weight 2
 *                        ours (the paper names these mechanisms; we could
 *                        not read its values): with 30 attempts, 5 root
 *                        children leave 25 for refinement; a node with 4
 *                        failed children is a dead idea; 2 repairs per
 *                        failure; r = 3 leaders keep the plan context small;
 *                        a leaf is twice as likely as an internal node.
 *   context budgets      plan/code 24k tokens, debug/reflect 16k; 12 KiB of
 *                        code per context entry (a typical KernelBench
 *                        candidate is 4-10 KiB)
 *   prices               0 (unknown model): spend is counted, not priced,
 *                        until the operator sets price.MODEL or
 *                        price_in/price_out.
 *   llm, model, api_key_env  "" per role: the run's --llm, --model and the
 *                        usual key variables (cmd_search.c)
 *   token_field max_tokens, thinking off, reasoning_effort none, extra_body
 *                        none: what every OpenAI-compatible and Anthropic
 *                        server takes; reasoning models are set per role
 *                        (docs/RUNS.md).  These keys, temperature, max_tokens
 *                        and the prices are "live": `stark resume --set` may
 *                        change them; the search's own keys are fixed.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "search/search.h"

enum ctype {
	CT_U32,
	CT_U64,
	CT_DOUBLE,
	CT_STR,		/* text; max = capacity (0: CONFIG_STR_MAX) */
	CT_POLICY,
	CT_TEMP,	/* a number in [min, max] or "none" (TEMPERATURE_NONE) */
	CT_TOKEN_FIELD, /* max_tokens | max_completion_tokens */
	CT_WORD,	/* a lowercase word, "none" = "" (reasoning effort) */
	CT_ENV,		/* an environment variable's name, "" = none */
	CT_THINKING	/* off | adaptive | a budget in [min, max] tokens */
};

struct ckey {
	const char *name;
	enum ctype type;
	size_t off;	/* offset in struct search_config (of element 0 for roles) */
	size_t stride;	/* per-role element size; 0 for a scalar */
	double min, max;
	bool live;	/* may change on resume (how roles reach their models) */
};

#define SCALAR(n, t, f, lo, hi) {n, t, offsetof(struct search_config, f), 0, lo, hi, false}
#define ROLES_(n, t, f, lo, hi, lv)                                                                \
	{n, t, offsetof(struct search_config, f), sizeof(((struct search_config *)0)->f[0]), lo, hi, lv}
#define ROLES(n, t, f, lo, hi) ROLES_(n, t, f, lo, hi, false)
#define LIVE(n, t, f, lo, hi)  ROLES_(n, t, f, lo, hi, true)

static const struct ckey keys[] = {
	SCALAR("policy", CT_POLICY, policy, 0, 2),
	SCALAR("budget", CT_U32, budget, 1, 1000000),
	SCALAR("epsilon", CT_DOUBLE, epsilon, 0, 1),
	SCALAR("root_cap", CT_U32, root_cap, 1, 1000000),
	SCALAR("prune_n", CT_U32, prune_n, 0, 1000000),
	SCALAR("debug_max", CT_U32, debug_max, 0, 1000),
	SCALAR("leaders", CT_U32, leaders, 1, 64),
	SCALAR("leaf_weight", CT_DOUBLE, leaf_weight, 1e-6, 1e6),
	SCALAR("verify_retries", CT_U32, verify_retries, 0, 10),
	SCALAR("seed", CT_U64, seed, 0, 1.8446744073709552e19),
	LIVE("temperature", CT_TEMP, temperature, 0, 2),
	LIVE("max_tokens", CT_U32, max_tokens, 1, 1000000),
	ROLES("context_tokens", CT_U32, context_tokens, 0, 10000000),
	SCALAR("context_entry_bytes", CT_U32, context_entry_bytes, 256, TREE_CODE_MAX),
	LIVE("price_in", CT_DOUBLE, price_in, 0, 1e6),
	LIVE("price_out", CT_DOUBLE, price_out, 0, 1e6),
	LIVE("model", CT_STR, model, 0, 0),
	LIVE("llm", CT_STR, llm, 0, 0),
	LIVE("api_key_env", CT_ENV, api_key_env, 0, CONFIG_ENV_MAX),
	LIVE("token_field", CT_TOKEN_FIELD, token_field, 0, 1),
	LIVE("reasoning_effort", CT_WORD, reasoning_effort, 0, CONFIG_WORD_MAX),
	LIVE("thinking", CT_THINKING, thinking, 1024, 1000000),
	LIVE("extra_body", CT_STR, extra_body, 0, 0),
	SCALAR("max_total_tokens", CT_U64, max_total_tokens, 0, 1.8446744073709552e19),
	SCALAR("max_dollars", CT_DOUBLE, max_dollars, 0, 1e9),
	SCALAR("prompts_dir", CT_STR, prompts_dir, 0, 0),
};

static const char *const role_names[ROLE_COUNT] = {"plan", "code", "debug", "sample", "reflect"};
static const char *const policy_names[] = {"stark", "sampling", "reflexion"};

const char *search_policy_name(enum search_policy p)
{
	return (unsigned)p < ST_ARRAY_LEN(policy_names) ? policy_names[p] : policy_names[0];
}

const char *search_role_name(enum search_role r)
{
	return (unsigned)r < ROLE_COUNT ? role_names[r] : "unknown";
}

void search_config_defaults(struct search_config *c)
{
	static const double temp[ROLE_COUNT] = {0.8, 0.1, 0.1, 0.7, 0.3};
	static const uint32_t ctx[ROLE_COUNT] = {24000, 24000, 16000, 0, 16000};
	int r;

	memset(c, 0, sizeof(*c));
	c->policy = POLICY_STARK;
	c->budget = 30;
	c->epsilon = 0.3;
	c->root_cap = 5;
	c->prune_n = 3;
	c->debug_max = 2;
	c->leaders = 3;
	c->leaf_weight = 2.0;
	c->verify_retries = 1;
	c->seed = 1;
	for (r = 0; r < ROLE_COUNT; r++) {
		c->temperature[r] = temp[r];
		c->max_tokens[r] = 8192;
		c->context_tokens[r] = ctx[r];
	}
	c->context_entry_bytes = 12288;
}

#define ROLE_ALL (-2) /* a per-role key given without .ROLE */

static void *field(struct search_config *c, const struct ckey *k, int role)
{
	return (char *)c + k->off + (k->stride ? (size_t)role * k->stride : 0);
}

/* Splits "name.role" (or a bare per-role "name": ROLE_ALL) against the table; role -1 for scalars. */
static const struct ckey *key_find(const char *key, int *role)
{
	size_t i, n;
	int r;

	for (i = 0; i < ST_ARRAY_LEN(keys); i++) {
		n = strlen(keys[i].name);
		if (strncmp(key, keys[i].name, n) != 0)
			continue;
		if (key[n] == '\0') {
			*role = keys[i].stride ? ROLE_ALL : -1;
			return &keys[i];
		}
		if (!keys[i].stride || key[n] != '.')
			continue;
		for (r = 0; r < ROLE_COUNT; r++) {
			if (strcmp(key + n + 1, role_names[r]) == 0) {
				*role = r;
				return &keys[i];
			}
		}
	}
	return NULL;
}

static size_t str_cap(const struct ckey *k)
{
	return k->max > 0 ? (size_t)k->max : CONFIG_STR_MAX;
}

/* Text fit for a string key: below its capacity, no control characters. */
static bool text_ok(const char *value, size_t cap)
{
	if (strlen(value) >= cap)
		return false;
	for (size_t i = 0; value[i]; i++)
		if ((unsigned char)value[i] < 0x20)
			return false; /* keeps the dump one line per key */
	return true;
}

static bool word_ok(const char *v)
{
	for (size_t i = 0; v[i]; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '_' ||
		      v[i] == '-'))
			return false;
	return true;
}

static bool env_ok(const char *v)
{
	for (size_t i = 0; v[i]; i++)
		if (!((v[i] >= 'A' && v[i] <= 'Z') || v[i] == '_' || (i && v[i] >= '0' && v[i] <= '9')))
			return false;
	return true;
}

static int parse_number(const struct ckey *k, const char *value, double *d)
{
	return str_to_double(value, d) || *d < k->min || *d > k->max ? ST_EINVAL : 0;
}

static int parse_value(const struct ckey *k, const char *value, void *dst)
{
	uint64_t u;
	double d;
	size_t i;

	switch (k->type) {
	case CT_U32:
	case CT_U64:
		if (str_to_u64(value, (uint64_t)k->min, k->type == CT_U32 ? (uint64_t)k->max : UINT64_MAX,
			       &u))
			return ST_EINVAL;
		if (k->type == CT_U32)
			*(uint32_t *)dst = (uint32_t)u;
		else
			*(uint64_t *)dst = u;
		return 0;
	case CT_DOUBLE:
		if (parse_number(k, value, &d))
			return ST_EINVAL;
		*(double *)dst = d;
		return 0;
	case CT_TEMP:
		if (!strcmp(value, "none"))
			d = TEMPERATURE_NONE;
		else if (parse_number(k, value, &d))
			return ST_EINVAL;
		*(double *)dst = d;
		return 0;
	case CT_STR:
	case CT_WORD:
	case CT_ENV:
		if (!text_ok(value, str_cap(k)))
			return strlen(value) >= str_cap(k) ? ST_ETOOBIG : ST_EINVAL;
		if (k->type == CT_WORD && !strcmp(value, "none"))
			value = "";
		if ((k->type == CT_WORD && !word_ok(value)) || (k->type == CT_ENV && !env_ok(value)))
			return ST_EINVAL;
		memcpy(dst, value, strlen(value) + 1);
		return 0;
	case CT_TOKEN_FIELD:
		if (!strcmp(value, "max_tokens"))
			*(uint32_t *)dst = TOKEN_FIELD_MAX_TOKENS;
		else if (!strcmp(value, "max_completion_tokens"))
			*(uint32_t *)dst = TOKEN_FIELD_MAX_COMPLETION;
		else
			return ST_EINVAL;
		return 0;
	case CT_THINKING:
		if (!strcmp(value, "off"))
			*(uint32_t *)dst = THINKING_OFF;
		else if (!strcmp(value, "adaptive"))
			*(uint32_t *)dst = THINKING_ADAPTIVE;
		else if (str_to_u64(value, (uint64_t)k->min, (uint64_t)k->max, &u))
			return ST_EINVAL;
		else
			*(uint32_t *)dst = (uint32_t)u;
		return 0;
	case CT_POLICY:
		for (i = 0; i < ST_ARRAY_LEN(policy_names); i++) {
			if (strcmp(value, policy_names[i]) == 0) {
				*(enum search_policy *)dst = (enum search_policy)i;
				return 0;
			}
		}
		return ST_EINVAL;
	}
	return ST_EINVAL;
}

static const char *range_text(const struct ckey *k, char *buf, size_t len)
{
	switch (k->type) {
	case CT_POLICY:
		return "stark, sampling or reflexion";
	case CT_TOKEN_FIELD:
		return "max_tokens or max_completion_tokens";
	case CT_WORD:
		return "none or a lowercase word such as low, medium, high";
	case CT_ENV:
		return "an environment variable's name (A-Z, 0-9, _)";
	case CT_STR:
		snprintf(buf, len, "at most %zu bytes", str_cap(k) - 1);
		return buf;
	case CT_U64:
		snprintf(buf, len, "an integer >= %.0f", k->min);
		return buf;
	case CT_TEMP:
		snprintf(buf, len, "none or a number in [%g, %g]", k->min, k->max);
		return buf;
	case CT_THINKING:
		snprintf(buf, len, "off, adaptive or a budget of %g to %g tokens", k->min, k->max);
		return buf;
	default:
		snprintf(buf, len, "%s in [%g, %g]", k->type == CT_DOUBLE ? "a number" : "an integer",
			 k->min, k->max);
		return buf;
	}
}

/* price.MODEL = IN OUT */
static int set_price(struct search_config *c, const char *key, const char *value, char *err,
		     size_t errlen)
{
	const char *model = key + 6;
	char in[64], out[64], extra[2];
	double a, b;
	uint32_t i;

	if (!model[0] || !text_ok(model, CONFIG_STR_MAX) || strpbrk(model, " \t="))
		return stark_errbuf(err, errlen, ST_EINVAL, "bad model name in key '%s'", key);
	if (sscanf(value, "%63s %63s %1s", in, out, extra) != 2 || str_to_double(in, &a) ||
	    str_to_double(out, &b) || !(a >= 0 && a <= 1e6) || !(b >= 0 && b <= 1e6))
		return stark_errbuf(
		    err, errlen, ST_EINVAL,
		    "bad value '%s' for key '%s' (want two numbers in [0, 1e6]: $ per "
		    "million input tokens, then output tokens)",
		    value, key);
	for (i = 0; i < c->nprices && strcmp(c->price[i].model, model); i++)
		;
	if (i == CONFIG_PRICES_MAX)
		return stark_errbuf(err, errlen, ST_ETOOBIG, "more than %d price.MODEL keys",
				    CONFIG_PRICES_MAX);
	snprintf(c->price[i].model, sizeof(c->price[i].model), "%s", model);
	c->price[i].in = a;
	c->price[i].out = b;
	if (i == c->nprices)
		c->nprices++;
	return 0;
}

int search_config_set(struct search_config *c, const char *key, const char *value, char *err,
		      size_t errlen)
{
	const struct ckey *k;
	char range[96];
	int role, rc = 0;

	if (str_starts(key, "price."))
		return set_price(c, key, value, err, errlen);
	k = key_find(key, &role);
	if (!k)
		return stark_errbuf(err, errlen, ST_ENOENT, "unknown key '%s'", key);
	for (int r = role == ROLE_ALL ? 0 : role; !rc && r < (role == ROLE_ALL ? ROLE_COUNT : role + 1);
	     r++)
		rc = parse_value(k, value, field(c, k, r));
	if (rc)
		return stark_errbuf(err, errlen, rc, "bad value '%s' for key '%s' (want %s)", value,
				    key, range_text(k, range, sizeof(range)));
	return 0;
}

bool search_config_key_live(const char *key)
{
	int role;
	const struct ckey *k;

	if (str_starts(key, "price."))
		return true;
	k = key_find(key, &role);
	return k && k->live;
}

/* Cuts s at a '#' that starts the line or follows whitespace, then trims. */
static char *config_line_clean(char *s)
{
	char *p, *e;

	for (p = s; *p; p++) {
		if (*p == '#' && (p == s || p[-1] == ' ' || p[-1] == '\t')) {
			*p = '\0';
			break;
		}
	}
	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static int config_line(struct search_config *c, const char *name, size_t lineno, char *line,
		       char *err, size_t errlen)
{
	char *s = config_line_clean(line), *eq, *key, *val, msg[ANCHOR_ERR_MAX];
	int rc;

	if (!*s)
		return 0;
	eq = strchr(s, '=');
	if (!eq)
		return stark_errbuf(err, errlen, ST_EINVAL, "%s:%zu: expected 'key = value'", name,
				    lineno);
	*eq = '\0';
	key = config_line_clean(s);
	val = config_line_clean(eq + 1);
	rc = search_config_set(c, key, val, msg, sizeof(msg));
	if (rc)
		return stark_errbuf(err, errlen, rc, "%s:%zu: %s", name, lineno, msg);
	return 0;
}

int search_config_load_text(struct search_config *c, const char *name, const char *text,
			    char *err, size_t errlen)
{
	struct search_config tmp = *c;
	char line[4096];
	const char *p = text, *nl;
	size_t lineno = 0, n;
	int rc;

	while (*p) {
		lineno++;
		nl = strchr(p, '\n');
		n = nl ? (size_t)(nl - p) : strlen(p);
		if (n >= sizeof(line))
			return stark_errbuf(err, errlen, ST_ETOOBIG, "%s:%zu: line is too long",
					    name, lineno);
		memcpy(line, p, n);
		line[n] = '\0';
		rc = config_line(&tmp, name, lineno, line, err, errlen);
		if (rc)
			return rc;
		p += n + (nl != NULL);
	}
	*c = tmp; /* all or nothing */
	return 0;
}

static int dump_value(const struct ckey *k, const void *src, struct dbuf *out)
{
	uint32_t u = k->type == CT_U32 || k->type == CT_TOKEN_FIELD || k->type == CT_THINKING
			 ? *(const uint32_t *)src
			 : 0;
	double d = k->type == CT_DOUBLE || k->type == CT_TEMP ? *(const double *)src : 0;

	switch (k->type) {
	case CT_U32:
		return dbuf_printf(out, "%u\n", u);
	case CT_U64:
		return dbuf_printf(out, "%llu\n", (unsigned long long)*(const uint64_t *)src);
	case CT_TEMP:
		if (d < 0)
			return dbuf_puts(out, "none\n");
		/* fall through */
	case CT_DOUBLE:
		return dbuf_printf(out, "%.17g\n", d);
	case CT_WORD:
		if (!*(const char *)src)
			return dbuf_puts(out, "none\n");
		/* fall through */
	case CT_STR:
	case CT_ENV:
		return dbuf_printf(out, "%s\n", (const char *)src);
	case CT_POLICY:
		return dbuf_printf(out, "%s\n", policy_names[*(const enum search_policy *)src]);
	case CT_TOKEN_FIELD:
		return dbuf_puts(out, u == TOKEN_FIELD_MAX_COMPLETION ? "max_completion_tokens\n"
								       : "max_tokens\n");
	case CT_THINKING:
		if (u == THINKING_OFF || u == THINKING_ADAPTIVE)
			return dbuf_puts(out, u == THINKING_OFF ? "off\n" : "adaptive\n");
		return dbuf_printf(out, "%u\n", u);
	}
	return ST_EINVAL;
}

int search_config_dump(const struct search_config *c, struct dbuf *out)
{
	size_t i;
	int r, rc = 0;

	for (i = 0; i < ST_ARRAY_LEN(keys) && !rc; i++) {
		for (r = keys[i].stride ? 0 : -1; r < (keys[i].stride ? ROLE_COUNT : 0) && !rc; r++) {
			if (r < 0)
				rc = dbuf_printf(out, "%s = ", keys[i].name);
			else
				rc = dbuf_printf(out, "%s.%s = ", keys[i].name, role_names[r]);
			if (!rc)
				rc = dump_value(&keys[i], field((struct search_config *)c, &keys[i], r),
						out);
		}
	}
	for (uint32_t p = 0; !rc && p < c->nprices && p < CONFIG_PRICES_MAX; p++)
		rc = dbuf_printf(out, "price.%s = %.17g %.17g\n", c->price[p].model, c->price[p].in,
				 c->price[p].out);
	return rc;
}

/* Re-validates one field against the table's range. */
static bool value_ok(const struct ckey *k, const void *v)
{
	double d;
	uint32_t u;

	switch (k->type) {
	case CT_U32:
		d = *(const uint32_t *)v;
		return d >= k->min && d <= k->max;
	case CT_U64:
		return true;
	case CT_TEMP:
		if (*(const double *)v == TEMPERATURE_NONE)
			return true;
		/* fall through */
	case CT_DOUBLE:
		d = *(const double *)v;
		return isfinite(d) && d >= k->min && d <= k->max;
	case CT_STR:
	case CT_WORD:
	case CT_ENV:
		if (!memchr(v, '\0', str_cap(k)) || !text_ok(v, str_cap(k)))
			return false;
		return k->type == CT_STR || (k->type == CT_WORD ? word_ok(v) : env_ok(v));
	case CT_TOKEN_FIELD:
		return *(const uint32_t *)v <= TOKEN_FIELD_MAX_COMPLETION;
	case CT_THINKING:
		u = *(const uint32_t *)v;
		return u == THINKING_OFF || u == THINKING_ADAPTIVE || (u >= k->min && u <= k->max);
	case CT_POLICY:
		return (unsigned)*(const enum search_policy *)v < ST_ARRAY_LEN(policy_names);
	}
	return false;
}

int search_config_check(const struct search_config *c, char *err, size_t errlen)
{
	char range[96];
	size_t i;
	int r;

	for (i = 0; i < ST_ARRAY_LEN(keys); i++) {
		for (r = keys[i].stride ? 0 : -1; r < (keys[i].stride ? ROLE_COUNT : 0); r++) {
			if (!value_ok(&keys[i], field((struct search_config *)c, &keys[i], r)))
				return stark_errbuf(err, errlen, ST_EINVAL,
						    "key '%s%s%s' must be %s", keys[i].name,
						    r < 0 ? "" : ".", r < 0 ? "" : role_names[r],
						    range_text(&keys[i], range, sizeof(range)));
		}
	}
	if (c->nprices > CONFIG_PRICES_MAX)
		return stark_errbuf(err, errlen, ST_EINVAL, "more than %d price.MODEL keys",
				    CONFIG_PRICES_MAX);
	return 0;
}
