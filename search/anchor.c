/*
 * anchor.c -- grounded instructions: the plan agent's anchors, checked.
 *
 * The plan agent returns the node's code with the spans to change wrapped
 * in <<<IMPROVE BEGIN: instruction>>> ... <<<IMPROVE END>>> lines.  This
 * file turns that reply into a scaffold (fixed segments that must not
 * change, anchored bodies with their instructions), checks the plan is
 * grounded (markers aside, it is the node's code), and verifies that the
 * code agent's program differs from the node's code only inside the
 * anchors.  Everything here reads untrusted LLM text: every loop is bounded
 * by the input, every buffer capped, and tests/fuzz/fuzz_anchor.c drives
 * it with arbitrary bytes.
 *
 * Lenient in what it reads (spellings, case, comment prefixes, where the
 * instruction sits, which fenced block of a reply holds the program),
 * exact in what it verifies: comparisons are line by line with the line
 * model of lines.h, which lets pass only what cannot change a Python
 * program's meaning (blank lines and trailing whitespace outside string
 * literals), nothing else.  A violation's message names the line and
 * quotes what was expected there: it goes back to the agent as the
 * complaint of its retry.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/lines.h"
#include "search/search.h"

#define ANCHOR_TEXT_MAX (2 * TREE_CODE_MAX) /* a plan or program we read */

/* ---- lines ------------------------------------------------------------------ */

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static size_t count_lines(const char *p, size_t len)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++)
		n += p[i] == '\n';
	return n + (len && p[len - 1] != '\n');
}

/* A line quoted for a message: at most 60 bytes, printable, in backquotes. */
static const char *quote(const struct line *l, char *buf, size_t n)
{
	size_t j = 0, len = l ? l->len : 0;

	if (!l || !len) {
		snprintf(buf, n, "%s", l ? "a blank line" : "nothing");
		return buf;
	}
	if (n < 8)
		return "";
	buf[j++] = '`';
	for (size_t i = 0; i < len && j + 5 < n && i < 60; i++) {
		unsigned char c = (unsigned char)l->p[i];

		buf[j++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
	}
	if (len > 60 && j + 5 < n) {
		memcpy(buf + j, "...", 3);
		j += 3;
	}
	buf[j++] = '`';
	buf[j] = '\0';
	return buf;
}

/* ---- markers ------------------------------------------------------------------ */

enum mark { MARK_NONE, MARK_BEGIN, MARK_END, MARK_STRAY };

struct span {
	const char *p;
	size_t len;
};

static const char *skip_ws(const char *s, const char *e)
{
	while (s < e && is_ws(*s))
		s++;
	return s;
}

static struct span trim(const char *s, const char *e)
{
	struct span r;

	s = skip_ws(s, e);
	while (e > s && is_ws(e[-1]))
		e--;
	r.p = s;
	r.len = (size_t)(e - s);
	return r;
}

/* Length of word at s, matched without regard to case, or 0. */
static size_t match_ci(const char *s, const char *e, const char *word)
{
	size_t i, n = strlen(word);

	if ((size_t)(e - s) < n)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		if (c != word[i])
			return 0;
	}
	return n;
}

/* Skips indentation and a comment prefix (a run of # / ; * - characters). */
static const char *skip_prefix(const char *s, const char *e)
{
	s = skip_ws(s, e);
	while (s < e && (*s == '#' || *s == '/' || *s == ';' || *s == '*' || *s == '-'))
		s++;
	return skip_ws(s, e);
}

/* After "<<<": [ws] IMPROVE [sep] BEGIN[S]|END[S].  Returns kind and end. */
static enum mark keyword_at(const char *s, const char *e, const char **after)
{
	size_t n;
	enum mark k;

	s = skip_ws(s, e);
	n = match_ci(s, e, "IMPROVE");
	if (!n)
		return MARK_NONE;
	s += n;
	while (s < e && (is_ws(*s) || *s == '_' || *s == '-'))
		s++;
	if ((n = match_ci(s, e, "BEGIN")) != 0)
		k = MARK_BEGIN;
	else if ((n = match_ci(s, e, "END")) != 0)
		k = MARK_END;
	else
		return MARK_NONE;
	s += n;
	if (s < e && (*s == 'S' || *s == 's'))
		s++;
	*after = s;
	return k;
}

/* True when "<<<IMPROVE BEGIN|END" occurs anywhere in [s, e). */
static bool has_marker_text(const char *s, const char *e)
{
	const char *q, *after;

	for (q = s; q + 3 <= e; q++)
		if (q[0] == '<' && q[1] == '<' && q[2] == '<' &&
		    keyword_at(q + 3, e, &after) != MARK_NONE)
			return true;
	return false;
}

/* Drops trailing "*" "/" pairs (a C comment's close) and whitespace. */
static struct span trim_close(struct span sp)
{
	sp = trim(sp.p, sp.p + sp.len);
	while (sp.len >= 2 && sp.p[sp.len - 2] == '*' && sp.p[sp.len - 1] == '/')
		sp = trim(sp.p, sp.p + sp.len - 2);
	return sp;
}

/*
 * Classifies one line (len without '\n').  For BEGIN, *instr gets the
 * instruction found on the line (possibly empty).
 */
/* Length of word at s, matched exactly, or 0. */
static size_t match_exact(const char *s, const char *e, const char *word)
{
	size_t n = strlen(word);

	return (size_t)(e - s) >= n && !memcmp(s, word, n) ? n : 0;
}

/*
 * A marker written as a plain comment, without brackets: "# IMPROVE
 * BEGIN: instruction", "// IMPROVE END".  Upper case only, and nothing but
 * an instruction may follow, so ordinary comments are never taken for one.
 */
static enum mark bare_marker(const char *s, const char *e, struct span *instr)
{
	const char *q = s;
	struct span rest;
	enum mark k;
	size_t n;

	if (!(n = match_exact(q, e, "IMPROVE")) || has_marker_text(q, e))
		return MARK_NONE; /* with a bracketed marker too: stray, as the caller finds */
	q += n;
	if (q >= e || !(is_ws(*q) || *q == '_' || *q == '-'))
		return MARK_NONE;
	while (q < e && (is_ws(*q) || *q == '_' || *q == '-'))
		q++;
	if ((n = match_exact(q, e, "BEGIN")) != 0)
		k = MARK_BEGIN;
	else if ((n = match_exact(q, e, "END")) != 0)
		k = MARK_END;
	else
		return MARK_NONE;
	q += n;
	if (q < e && *q == 'S')
		q++;
	if (q < e && !is_ws(*q) && *q != ':')
		return MARK_NONE;
	rest = trim_close(trim(q, e));
	if (rest.len && *rest.p == ':')
		rest = trim(rest.p + 1, rest.p + rest.len);
	if (k == MARK_END && rest.len)
		return MARK_NONE;
	*instr = rest;
	return k;
}

static enum mark marker_parse(const char *p, size_t len, struct span *instr)
{
	const char *e = p + len, *s = skip_prefix(p, e), *after, *close = NULL, *q;
	enum mark k;
	struct span before, tail;

	instr->p = p;
	instr->len = 0;
	if (s != skip_ws(p, e) && (k = bare_marker(s, e, instr)) != MARK_NONE)
		return k;
	if ((size_t)(e - s) < 3 || memcmp(s, "<<<", 3) != 0 ||
	    (k = keyword_at(s + 3, e, &after)) == MARK_NONE)
		return has_marker_text(p, e) ? MARK_STRAY : MARK_NONE;
	/* The last ">>>" closes the marker: instructions may mention launches. */
	for (q = after; q + 3 <= e; q++)
		if (memcmp(q, ">>>", 3) == 0)
			close = q;
	if (has_marker_text(after, e))
		return MARK_STRAY; /* two markers on one line */
	before = trim_close(trim(after, close ? close : e));
	if (before.len && (*before.p == ':' || *before.p == '-'))
		before = trim(before.p + 1, before.p + before.len);
	tail = trim_close(trim(close ? close + 3 : e, e));
	if (tail.len && (*tail.p == ':' || *tail.p == '-'))
		tail = trim(tail.p + 1, tail.p + tail.len);
	*instr = before.len ? before : tail;
	return k;
}

/* An `INSTRUCTION: text` line (comment prefix allowed); text in *instr. */
static bool instruction_line(const char *p, size_t len, struct span *instr)
{
	const char *e = p + len, *s = skip_prefix(p, e);
	size_t n = match_ci(s, e, "INSTRUCTION");

	if (!n)
		return false;
	s += n;
	if (s < e && (*s == 'S' || *s == 's'))
		s++;
	s = skip_ws(s, e);
	if (s >= e || *s != ':')
		return false;
	*instr = trim_close(trim(s + 1, e));
	return true;
}

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
	*info = trim(s + n, e);
	return n;
}

static bool info_is_python(struct span info)
{
	const char *e = info.p + info.len;
	size_t n;

	if ((n = match_ci(info.p, e, "PYTHON3")) == 0 && (n = match_ci(info.p, e, "PYTHON")) == 0 &&
	    (n = match_ci(info.p, e, "PY")) == 0)
		return false;
	return info.p + n == e || is_ws(info.p[n]) || info.p[n] == '{';
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
		const char *p = skip_ws(ls->v[i].p, ls->v[i].p + ls->v[i].len);

		if (match_exact(p, ls->v[i].p + ls->v[i].len, "class ModelNew"))
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

/* ---- the scaffold -------------------------------------------------------------- */

void scaffold_init(struct scaffold *s)
{
	memset(s, 0, sizeof(*s));
}

void scaffold_release(struct scaffold *s)
{
	size_t i;

	if (s->fixed)
		for (i = 0; i <= s->nanchors; i++)
			free(s->fixed[i]);
	for (i = 0; s->anchors && i < s->nanchors; i++) {
		free(s->anchors[i].instruction);
		free(s->anchors[i].body);
	}
	free(s->fixed);
	free(s->fixed_len);
	free(s->anchors);
	free(s->code_lines);
	scaffold_init(s);
}

struct parse_state {
	struct scaffold *s;
	struct dbuf cur; /* the fixed segment or body being read */
	bool inside;
	bool want_instr; /* the line after an instruction-less BEGIN */
	char *err;
	size_t errlen;
};

static int perr(struct parse_state *ps, int rc, const char *fmt, ...) ST_PRINTF(3, 4);
static int perr(struct parse_state *ps, int rc, const char *fmt, ...)
{
	va_list ap;

	if (ps->err && ps->errlen) {
		va_start(ap, fmt);
		vsnprintf(ps->err, ps->errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static int set_instruction(struct parse_state *ps, struct span in)
{
	struct anchor_span *a = &ps->s->anchors[ps->s->nanchors];

	if (in.len > ANCHOR_INSTR_MAX)
		return perr(ps, ST_ETOOBIG,
			    "anchor %zu at line %u has an instruction over %d bytes",
			    ps->s->nanchors + 1, a->line, ANCHOR_INSTR_MAX);
	free(a->instruction);
	a->instruction = strndup(in.p, in.len);
	return a->instruction ? 0 : ST_ENOMEM;
}

static int on_begin(struct parse_state *ps, uint32_t lineno, struct span in)
{
	struct scaffold *s = ps->s;

	if (ps->inside)
		return perr(ps, ST_EINVAL,
			    "anchor %zu at line %u begins inside anchor %zu (anchors may not nest)",
			    s->nanchors + 2, lineno, s->nanchors + 1);
	if (s->nanchors == ANCHOR_MAX)
		return perr(ps, ST_ETOOBIG, "plan has more than %d anchors", ANCHOR_MAX);
	s->fixed_len[s->nanchors] = ps->cur.len;
	s->fixed[s->nanchors] = dbuf_detach(&ps->cur, NULL);
	if (!s->fixed[s->nanchors] && !(s->fixed[s->nanchors] = strdup("")))
		return ST_ENOMEM;
	memset(&s->anchors[s->nanchors], 0, sizeof(s->anchors[0]));
	s->anchors[s->nanchors].line = lineno;
	ps->inside = true;
	ps->want_instr = in.len == 0;
	return set_instruction(ps, in);
}

static int on_end(struct parse_state *ps, uint32_t lineno)
{
	struct scaffold *s = ps->s;
	struct anchor_span *a = &s->anchors[s->nanchors];

	if (!ps->inside)
		return perr(ps, ST_EINVAL, "end marker at line %u has no matching begin", lineno);
	if (!a->instruction[0])
		return perr(ps, ST_EINVAL, "anchor %zu at line %u has no instruction",
			    s->nanchors + 1, a->line);
	a->body_len = ps->cur.len;
	a->body = dbuf_detach(&ps->cur, NULL);
	if (!a->body && !(a->body = strdup("")))
		return ST_ENOMEM;
	s->nanchors++;
	ps->inside = false;
	return 0;
}

static int parse_line(struct parse_state *ps, const struct line *l, uint32_t lineno)
{
	struct span in;
	enum mark k = marker_parse(l->p, l->len, &in);
	bool want = ps->want_instr;

	ps->want_instr = false;
	if (k == MARK_STRAY)
		return perr(ps, ST_EINVAL, "anchor marker at line %u is not on its own line",
			    lineno);
	if (k == MARK_BEGIN)
		return on_begin(ps, lineno, in);
	if (k == MARK_END)
		return on_end(ps, lineno);
	if (want && instruction_line(l->p, l->len, &in))
		return set_instruction(ps, in);
	if (dbuf_append(&ps->cur, l->p, l->raw))
		return perr(ps, ST_ETOOBIG, "plan is too large");
	return 0;
}

static int scaffold_alloc(struct scaffold *s)
{
	s->fixed = calloc(ANCHOR_MAX + 1, sizeof(*s->fixed));
	s->fixed_len = calloc(ANCHOR_MAX + 1, sizeof(*s->fixed_len));
	s->anchors = calloc(ANCHOR_MAX, sizeof(*s->anchors));
	return s->fixed && s->fixed_len && s->anchors ? 0 : ST_ENOMEM;
}

static int parse_finish(struct parse_state *ps)
{
	struct scaffold *s = ps->s;

	if (ps->inside)
		return perr(ps, ST_EINVAL, "anchor %zu at line %u is not terminated",
			    s->nanchors + 1, s->anchors[s->nanchors].line);
	if (s->nanchors == 0)
		return perr(ps, ST_EINVAL, "plan has no anchors");
	s->fixed_len[s->nanchors] = ps->cur.len;
	s->fixed[s->nanchors] = dbuf_detach(&ps->cur, NULL);
	if (!s->fixed[s->nanchors] && !(s->fixed[s->nanchors] = strdup("")))
		return ST_ENOMEM;
	return 0;
}

int anchor_parse(const char *plan, size_t len, struct scaffold *s, char *err, size_t errlen)
{
	struct parse_state ps = {s, {0}, false, false, err, errlen};
	struct lines ls = {NULL, 0};
	size_t i;
	int rc;

	scaffold_release(s);
	if (len > ANCHOR_TEXT_MAX)
		return perr(&ps, ST_ETOOBIG, "plan is larger than %u bytes", ANCHOR_TEXT_MAX);
	dbuf_init(&ps.cur, ANCHOR_TEXT_MAX);
	rc = scaffold_alloc(s);
	if (!rc)
		rc = lines_split(plan, len, &ls);
	for (i = 0; !rc && i < ls.n; i++)
		rc = parse_line(&ps, &ls.v[i], (uint32_t)(i + 1));
	if (!rc)
		rc = parse_finish(&ps);
	if (rc && ps.inside && s->anchors) {
		/* The open anchor's instruction is not counted in nanchors. */
		free(s->anchors[s->nanchors].instruction);
		s->anchors[s->nanchors].instruction = NULL;
	}
	lines_release(&ls);
	dbuf_release(&ps.cur);
	if (rc)
		scaffold_release(s);
	return rc;
}

/* ---- grounding and verification ------------------------------------------------- */

/* The plan without markers: fixed[0] body[0] ... fixed[n], into out. */
static int scaffold_join(const struct scaffold *s, struct dbuf *out)
{
	size_t i;
	int rc = 0;

	for (i = 0; i <= s->nanchors && !rc; i++) {
		rc = dbuf_append(out, s->fixed[i], s->fixed_len[i]);
		if (!rc && i < s->nanchors)
			rc = dbuf_append(out, s->anchors[i].body, s->anchors[i].body_len);
	}
	return rc;
}

/* A text split, classified, and (sig) reduced to its significant lines. */
static int text_lines(const char *text, size_t len, struct lines *all, struct lines *sig)
{
	int rc = lines_split(text ? text : "", text ? len : 0, all);

	if (!rc) {
		lines_mark(all);
		rc = lines_slice(all, 0, all->n, sig);
	}
	if (!rc)
		lines_significant(sig);
	return rc;
}

/*
 * Maps each line of the joined plan to the node's code: the code line of
 * the first significant plan line at or after it (plan and code agree
 * line for line once reduced to significant lines).
 */
static int build_line_map(struct scaffold *s, const struct lines *a, const struct lines *asig,
			  const struct lines *bsig, size_t code_lines)
{
	size_t k = asig->n;
	uint32_t *map = malloc((a->n ? a->n : 1) * sizeof(*map));

	if (!map)
		return ST_ENOMEM;
	for (size_t j = a->n; j-- > 0;) {
		if (k > 0 && asig->v[k - 1].no == a->v[j].no)
			k--;
		map[j] = k < bsig->n ? bsig->v[k].no : (uint32_t)(code_lines + 1);
	}
	free(s->code_lines);
	s->code_lines = map;
	s->ncode_lines = a->n;
	return 0;
}

/* The node's code line of joined-plan line no (1-based). */
static uint32_t code_line_of(const struct scaffold *s, uint32_t no)
{
	if (s->code_lines && no >= 1 && no <= s->ncode_lines)
		return s->code_lines[no - 1];
	if (s->code_lines && s->ncode_lines)
		return s->code_lines[s->ncode_lines - 1] + 1;
	return no;
}

int anchor_check_grounded(struct scaffold *s, const char *code, size_t len, char *err,
			  size_t errlen)
{
	struct lines a = {NULL, 0}, asig = {NULL, 0}, b = {NULL, 0}, bsig = {NULL, 0};
	struct dbuf joined;
	char qa[80], qb[80];
	size_t i, line = 1;
	int rc;

	if (!s->fixed || s->nanchors == 0)
		return stark_errbuf(err, errlen, ST_EINVAL, "plan has no anchors");
	dbuf_init(&joined, ANCHOR_TEXT_MAX);
	rc = scaffold_join(s, &joined);
	if (!rc)
		rc = text_lines(joined.p, joined.len, &a, &asig);
	if (!rc)
		rc = text_lines(code, len, &b, &bsig);
	if (rc)
		goto out;
	for (i = 0; i < asig.n && i < bsig.n && lines_eq(&asig.v[i], &bsig.v[i]); i++)
		;
	if (i < asig.n || i < bsig.n) {
		rc = stark_errbuf(
		    err, errlen, ST_EINVAL,
		    "plan changes the node's code near line %u: the code has %s, the plan %s "
		    "(outside anchors the plan must repeat the code exactly, and inside them "
		    "keep the original text)",
		    i < bsig.n ? bsig.v[i].no : (uint32_t)b.n + 1,
		    quote(i < bsig.n ? &bsig.v[i] : NULL, qb, sizeof(qb)),
		    quote(i < asig.n ? &asig.v[i] : NULL, qa, sizeof(qa)));
		goto out;
	}
	rc = build_line_map(s, &a, &asig, &bsig, b.n);
	for (i = 0; !rc && i < s->nanchors; i++) {
		line += count_lines(s->fixed[i], s->fixed_len[i]);
		s->anchors[i].code_line = code_line_of(s, (uint32_t)line);
		line += count_lines(s->anchors[i].body, s->anchors[i].body_len);
	}
out:
	lines_release(&a);
	lines_release(&asig);
	lines_release(&b);
	lines_release(&bsig);
	dbuf_release(&joined);
	return rc;
}

/*
 * Keeps the lines of a program that are not anchor marker lines (nor the
 * INSTRUCTION line after an instruction-less BEGIN).  A marker inside a
 * line of code (stray) is kept: dropping the line would drop code.
 */
static void drop_markers(struct lines *ls)
{
	size_t i, n = 0;
	struct span in;
	bool after_begin = false;
	enum mark k;

	for (i = 0; i < ls->n; i++) {
		k = marker_parse(ls->v[i].p, ls->v[i].len, &in);
		if (k == MARK_BEGIN || k == MARK_END) {
			after_begin = k == MARK_BEGIN && in.len == 0;
			continue;
		}
		if (after_begin && instruction_line(ls->v[i].p, ls->v[i].len, &in)) {
			after_begin = false;
			continue;
		}
		after_begin = false;
		ls->v[n++] = ls->v[i];
	}
	ls->n = n;
}

/* Lines of seg matching p from line at. */
static size_t match_len(const struct lines *p, size_t at, const struct lines *seg)
{
	size_t k = 0;

	while (k < seg->n && at + k < p->n && lines_eq(&p->v[at + k], &seg->v[k]))
		k++;
	return k;
}

/* Leftmost j >= from where seg matches whole, or SIZE_MAX. */
static size_t find_seg(const struct lines *p, size_t from, const struct lines *seg)
{
	for (size_t j = from; j <= p->n; j++)
		if (match_len(p, j, seg) == seg->n)
			return j;
	return SIZE_MAX;
}

#define BLAME_CELLS (4u << 20) /* the longest-run search is quadratic: bound it */

/*
 * Where a segment that is not in p[from..] went wrong: the longest run of
 * its lines found there (longest common substring, earliest on ties); the
 * line of seg just before that run is the one missing or changed, or, for
 * a run that starts the segment, the line just after it.  *k gets that seg
 * line, *found p's line in its place (SIZE_MAX: none).
 */
static int blame_seg(const struct lines *p, size_t from, const struct lines *seg, size_t *k,
		     size_t *found)
{
	size_t m = p->n - from, n = seg->n, best = 0, ba = 0, bj = from, *row;

	*k = 0;
	*found = from < p->n ? from : SIZE_MAX;
	if (!n || !m || (uint64_t)n * m > BLAME_CELLS)
		return 0;
	row = calloc(m + 1, sizeof(*row)); /* row[j + 1]: run ending at seg a, p from + j */
	if (!row)
		return ST_ENOMEM;
	for (size_t a = 0; a < n; a++) {
		for (size_t j = m; j-- > 0;) {
			row[j + 1] = lines_eq(&seg->v[a], &p->v[from + j]) ? row[j] + 1 : 0;
			if (row[j + 1] > best) {
				best = row[j + 1];
				ba = a + 1 - best;
				bj = from + j + 1 - best;
			}
		}
	}
	free(row);
	if (!best)
		return 0;
	if (ba > 0) {
		*k = ba - 1;
		*found = bj > from ? bj - 1 : SIZE_MAX;
	} else {
		*k = best;
		*found = bj + best < p->n ? bj + best : SIZE_MAX;
	}
	return 0;
}

struct verify_ctx {
	const struct scaffold *s;
	struct lines out;  /* the program's significant lines, markers dropped */
	struct lines plan; /* the joined plan's lines, classified */
	struct lines seg;  /* the fixed segment being matched: its significant lines */
	char *err;
	size_t errlen;
};

/* A violation at seg line k (seg->n: past its end), found: the program's line there or NULL. */
static int outside_err(struct verify_ctx *v, size_t k, const struct line *found)
{
	const struct line *want = k < v->seg.n ? &v->seg.v[k] : NULL;
	char qw[80], qf[80];
	uint32_t no = want ? want->no : v->seg.n ? v->seg.v[v->seg.n - 1].no + 1 : 1;

	if (!want)
		return stark_errbuf(v->err, v->errlen, ST_EINVAL,
				    "code changes text outside anchors near line %u",
				    code_line_of(v->s, no));
	if (found && found->len == want->len && !memcmp(found->p, want->p, want->len))
		return stark_errbuf(
		    v->err, v->errlen, ST_EINVAL,
		    "code changes text outside anchors near line %u: %s is %s a string "
		    "literal in the code and %s it in the plan (a quote opened or closed "
		    "inside an anchor)",
		    code_line_of(v->s, no), quote(want, qw, sizeof(qw)),
		    (found->flags & LN_STR_END) ? "inside" : "outside",
		    (want->flags & LN_STR_END) ? "inside" : "outside");
	return stark_errbuf(
	    v->err, v->errlen, ST_EINVAL,
	    "code changes text outside anchors near line %u: the plan has %s there, the "
	    "code %s",
	    code_line_of(v->s, no), quote(want, qw, sizeof(qw)), quote(found, qf, sizeof(qf)));
}

/* The significant lines of fixed segment i, which starts at plan line *at. */
static int fixed_lines(struct verify_ctx *v, size_t i, size_t *at)
{
	const struct scaffold *s = v->s;
	size_t n = count_lines(s->fixed[i], s->fixed_len[i]);
	int rc;

	lines_release(&v->seg);
	rc = lines_slice(&v->plan, *at, n, &v->seg);
	if (!rc)
		lines_significant(&v->seg);
	*at += n + (i < s->nanchors ? count_lines(s->anchors[i].body, s->anchors[i].body_len) : 0);
	return rc;
}

/* Matches fixed segment i at *pos (first, middle or last). */
static int match_fixed(struct verify_ctx *v, size_t i, size_t *pos)
{
	const struct lines *p = &v->out, *seg = &v->seg;
	size_t j, k, at;
	int rc;

	if (i == 0) {
		k = match_len(p, 0, seg);
		if (k < seg->n)
			return outside_err(v, k, k < p->n ? &p->v[k] : NULL);
		*pos = k;
	} else if (i < v->s->nanchors) {
		j = find_seg(p, *pos, seg);
		if (j == SIZE_MAX) {
			if ((rc = blame_seg(p, *pos, seg, &k, &at)))
				return rc;
			return outside_err(v, k, at < p->n ? &p->v[at] : NULL);
		}
		*pos = j + seg->n;
	} else if (seg->n) {
		/* the last segment ends the program: compare from the end */
		size_t room = p->n - *pos;

		for (k = seg->n; k > 0 && seg->n - k < room; k--) {
			j = p->n - (seg->n - k) - 1;
			if (!lines_eq(&p->v[j], &seg->v[k - 1]))
				return outside_err(v, k - 1, &p->v[j]);
		}
		if (k > 0) /* the program ran out first */
			return outside_err(v, k - 1, NULL);
	}
	return 0;
}

int anchor_verify_code(const struct scaffold *s, const char *code, size_t len, struct dbuf *cleaned,
		       char *err, size_t errlen)
{
	struct verify_ctx v = {s, {NULL, 0}, {NULL, 0}, {NULL, 0}, err, errlen};
	struct lines all = {NULL, 0}, tmp = {NULL, 0};
	struct dbuf joined;
	size_t i, pos = 0, at = 0;
	int rc;

	if (!s->fixed || s->nanchors == 0)
		return stark_errbuf(err, errlen, ST_EINVAL, "plan has no anchors");
	if (len > ANCHOR_TEXT_MAX)
		return stark_errbuf(err, errlen, ST_ETOOBIG, "code is larger than %u bytes",
				    ANCHOR_TEXT_MAX);
	dbuf_init(&joined, ANCHOR_TEXT_MAX);
	rc = lines_split(code, len, &all);
	if (!rc) {
		drop_markers(&all);
		lines_mark(&all);
		rc = lines_slice(&all, 0, all.n, &v.out);
	}
	if (!rc) {
		lines_significant(&v.out);
		rc = scaffold_join(s, &joined);
	}
	if (!rc)
		rc = text_lines(joined.p, joined.len, &v.plan, &tmp);
	for (i = 0; !rc && i <= s->nanchors; i++) {
		rc = fixed_lines(&v, i, &at);
		if (!rc)
			rc = match_fixed(&v, i, &pos);
	}
	for (i = 0; !rc && cleaned && i < all.n; i++)
		rc = dbuf_append(cleaned, all.v[i].p, all.v[i].raw);
	lines_release(&all);
	lines_release(&tmp);
	lines_release(&v.out);
	lines_release(&v.plan);
	lines_release(&v.seg);
	dbuf_release(&joined);
	return rc;
}

/* ---- whole replies ------------------------------------------------------------ */

static bool blank_text(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_ws(p[i]) && p[i] != '\n')
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

int scaffold_render(const struct scaffold *s, struct dbuf *out)
{
	size_t i;
	int rc = 0;

	for (i = 0; i <= s->nanchors && !rc; i++) {
		rc = dbuf_append(out, s->fixed[i], s->fixed_len[i]);
		if (rc || i == s->nanchors)
			break;
		if (s->fixed_len[i] && s->fixed[i][s->fixed_len[i] - 1] != '\n')
			rc = dbuf_puts(out, "\n");
		if (!rc)
			rc = dbuf_printf(out, "<<<IMPROVE BEGIN: %s>>>\n",
					 s->anchors[i].instruction);
		if (!rc)
			rc = dbuf_append(out, s->anchors[i].body, s->anchors[i].body_len);
		if (!rc && s->anchors[i].body_len &&
		    s->anchors[i].body[s->anchors[i].body_len - 1] != '\n')
			rc = dbuf_puts(out, "\n");
		if (!rc)
			rc = dbuf_puts(out, "<<<IMPROVE END>>>\n");
	}
	return rc;
}

int scaffold_instructions(const struct scaffold *s, struct dbuf *out)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < s->nanchors && !rc; i++) {
		if (s->anchors[i].code_line)
			rc = dbuf_printf(out, "%zu. (line %u) %s\n", i + 1, s->anchors[i].code_line,
					 s->anchors[i].instruction);
		else
			rc = dbuf_printf(out, "%zu. %s\n", i + 1, s->anchors[i].instruction);
	}
	return rc;
}
