/*
 * reply.c -- the program in an LLM reply: its fenced blocks ranked (a
 * whole program before a fragment, python before other languages, the
 * later before the earlier), and a reply accepted as a plan or as the code
 * agent's program when one of its candidates passes the checks (anchor.c
 * parses, verify.c checks), the complaint otherwise being the most telling
 * candidate's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/anchor_int.h"

/* ---- extraction ------------------------------------------------------------------ */

/* A fence line: up to 3 spaces, then 3+ backticks.  Returns the count. */
static size_t fence_ticks(const struct line *l, struct span *info)
{
	const char *s = l->p, *e = l->p + l->len;
	size_t ind = 0, n = 0;

	while (s < e && *s == ' ' && ind < 3) {
		s++;
		ind++;
	}
	while (s + n < e && s[n] == '`')
		n++;
	if (n < 3)
		return 0;
	*info = anchor__trim(s + n, e);
	return n;
}

static bool info_is_python(struct span info)
{
	const char *e = info.p + info.len;
	size_t n;

	if ((n = anchor__match_ci(info.p, e, "PYTHON3")) == 0 && (n = anchor__match_ci(info.p, e, "PYTHON")) == 0 &&
	    (n = anchor__match_ci(info.p, e, "PY")) == 0)
		return false;
	return info.p + n == e || anchor__is_ws(info.p[n]) || info.p[n] == '{';
}

/* A fenced block: lines [first, end) of the reply, and what it looks like. */
struct block {
	size_t first, end;
	int rank; /* holds `class ModelNew` 4, labelled python 2, unlabelled 1 */
	size_t order;
};

static bool block_is_program(const struct lines *ls, size_t first, size_t end)
{
	for (size_t i = first; i < end; i++) {
		const char *p = anchor__skip_ws(ls->v[i].p, ls->v[i].p + ls->v[i].len);

		if (anchor__match_exact(p, ls->v[i].p + ls->v[i].len, "class ModelNew"))
			return true;
	}
	return false;
}

/* The fenced blocks of a reply (the last ANCHOR_CANDIDATES_MAX), best first. */
static size_t blocks_of(const struct lines *ls, struct block *b)
{
	size_t i, n = 0, open = 0, ticks = 0, close;
	struct span info = {NULL, 0};
	int label = 0;
	bool inside = false;

	for (i = 0; i <= ls->n; i++) {
		close = i < ls->n ? fence_ticks(&ls->v[i], &info) : 0;
		if (!inside && close) {
			inside = true;
			open = i + 1;
			ticks = close;
			label = info_is_python(info) ? 2 : info.len == 0 ? 1 : 0;
		} else if (inside && (i == ls->n || (close >= ticks && info.len == 0))) {
			if (n == ANCHOR_CANDIDATES_MAX) {
				memmove(b, b + 1, (n - 1) * sizeof(*b));
				n--;
			}
			b[n] = (struct block){open, i, label, n};
			b[n].rank += block_is_program(ls, open, i) ? 4 : 0;
			n++;
			inside = false;
		}
	}
	for (i = 0; i < n; i++)
		b[i].order = i;
	/* insertion sort: rank descending, then the later block first */
	for (i = 1; i < n; i++) {
		struct block x = b[i];
		size_t j = i;

		while (j > 0 && (b[j - 1].rank < x.rank ||
				 (b[j - 1].rank == x.rank && b[j - 1].order < x.order))) {
			b[j] = b[j - 1];
			j--;
		}
		b[j] = x;
	}
	return n;
}

int anchor_reply_candidates(const char *reply, size_t len, struct anchor_candidate *out, size_t *n)
{
	struct block b[ANCHOR_CANDIDATES_MAX];
	struct lines ls;
	size_t nb;
	int rc;

	*n = 0;
	if (len > ANCHOR_TEXT_MAX)
		return ST_ETOOBIG;
	rc = lines_split(reply, len, &ls);
	if (rc)
		return rc;
	nb = blocks_of(&ls, b);
	for (size_t i = 0; i < nb; i++) {
		size_t f = b[i].first, e = b[i].end;

		out[i].off = f < ls.n ? (size_t)(ls.v[f].p - reply) : len;
		out[i].len = e > f ? (size_t)(ls.v[e - 1].p + ls.v[e - 1].raw - ls.v[f].p) : 0;
	}
	*n = nb;
	if (!nb) {
		out[0] = (struct anchor_candidate){0, len};
		*n = 1;
	}
	lines_release(&ls);
	return 0;
}

int anchor_extract_code(const char *reply, size_t len, struct dbuf *out)
{
	struct anchor_candidate c[ANCHOR_CANDIDATES_MAX];
	size_t n;
	int rc;

	dbuf_reset(out);
	rc = anchor_reply_candidates(reply, len, c, &n);
	if (rc)
		return rc;
	return c[0].len ? dbuf_append(out, reply + c[0].off, c[0].len) : dbuf_append(out, "", 0);
}

/* ---- whole replies ------------------------------------------------------------ */

static bool blank_text(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!anchor__is_ws(p[i]) && p[i] != '\n')
			return false;
	return true;
}

/* The candidates of a reply; "reply has no code" when every one is blank. */
static int candidates(const char *reply, size_t len, struct anchor_candidate *c, size_t *n,
		      char *err, size_t errlen)
{
	int rc = anchor_reply_candidates(reply, len, c, n);
	size_t i;

	if (rc == ST_ETOOBIG)
		return stark_errbuf(err, errlen, rc, "reply is larger than %u bytes",
				    ANCHOR_TEXT_MAX);
	if (rc)
		return rc;
	for (i = 0; i < *n && blank_text(reply + c[i].off, c[i].len); i++)
		;
	return i < *n ? 0 : stark_errbuf(err, errlen, ST_EINVAL, "reply has no code");
}

int anchor_reply_code(const char *reply, size_t len, struct dbuf *out, char *err, size_t errlen)
{
	struct anchor_candidate c[ANCHOR_CANDIDATES_MAX];
	size_t n;
	int rc;

	dbuf_reset(out);
	rc = candidates(reply, len, c, &n, err, errlen);
	if (!rc)
		rc = dbuf_append(out, reply + c[0].off, c[0].len);
	if (rc == ST_ETOOBIG)
		stark_errbuf(err, errlen, rc, "reply's code is larger than %zu bytes", out->max);
	return rc;
}

int anchor_accept_plan(const char *reply, size_t len, const char *code, size_t code_len,
		       struct scaffold *s, char *err, size_t errlen)
{
	struct anchor_candidate c[ANCHOR_CANDIDATES_MAX];
	char why[ANCHOR_ERR_MAX] = "";
	int rc, best = 0; /* 1: the complaint is about a plan that parsed */
	size_t n;

	rc = candidates(reply, len, c, &n, err, errlen);
	for (size_t i = 0; !rc && i < n; i++) {
		int parsed;
		char e[ANCHOR_ERR_MAX];

		rc = anchor_parse(reply + c[i].off, c[i].len, s, e, sizeof(e));
		parsed = rc == 0;
		if (!rc)
			rc = anchor_check_grounded(s, code, code_len, e, sizeof(e));
		if (!rc)
			return 0;
		if (rc != ST_EINVAL && rc != ST_ETOOBIG)
			return rc;
		if (!why[0] || parsed > best) {
			snprintf(why, sizeof(why), "%s", e);
			best = parsed;
		}
		rc = 0;
	}
	if (rc)
		return rc;
	scaffold_release(s);
	return stark_errbuf(err, errlen, ST_EINVAL, "%s", why);
}

int anchor_accept_code(const struct scaffold *s, const char *reply, size_t len,
		       struct dbuf *cleaned, char *err, size_t errlen)
{
	struct anchor_candidate c[ANCHOR_CANDIDATES_MAX];
	char why[ANCHOR_ERR_MAX] = "";
	size_t n;
	int rc;

	rc = candidates(reply, len, c, &n, err, errlen);
	for (size_t i = 0; !rc && i < n; i++) {
		char e[ANCHOR_ERR_MAX];

		dbuf_reset(cleaned);
		rc = anchor_verify_code(s, reply + c[i].off, c[i].len, cleaned, e, sizeof(e));
		if (!rc)
			return 0;
		if (rc != ST_EINVAL && rc != ST_ETOOBIG)
			return rc;
		if (!why[0])
			snprintf(why, sizeof(why), "%s", e);
		rc = 0;
	}
	if (rc)
		return rc;
	dbuf_reset(cleaned);
	return stark_errbuf(err, errlen, ST_EINVAL, "%s", why);
}
