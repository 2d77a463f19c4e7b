/*
 * anchor.c -- grounded instructions: the plan agent's anchors read into a
 * scaffold, and the scaffold rendered back.
 *
 * The plan agent returns the node's code with the spans to change wrapped
 * in <<<IMPROVE BEGIN: instruction>>> ... <<<IMPROVE END>>> lines.  This
 * file reads marker lines and turns a plan into a scaffold (fixed segments
 * that must not change, anchored bodies with their instructions);
 * verify.c checks the plan is grounded (markers aside, it is the node's
 * code) and that the code agent's program differs from the node's code
 * only inside the anchors; reply.c finds the program among a reply's
 * fenced blocks.  Everything here reads untrusted LLM text: every loop is
 * bounded by the input, every buffer capped, and tests/fuzz/fuzz_anchor.c
 * drives it with arbitrary bytes.
 *
 * Lenient in what it reads (spellings, case, comment prefixes, where the
 * instruction sits), exact in what it verifies (verify.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/anchor_int.h"

/* ---- lines ------------------------------------------------------------------ */

bool anchor__is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

size_t anchor__count_lines(const char *p, size_t len)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++)
		n += p[i] == '\n';
	return n + (len && p[len - 1] != '\n');
}

/* A line quoted for a message: at most 60 bytes, printable, in backquotes. */
const char *anchor__quote(const struct line *l, char *buf, size_t n)
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

const char *anchor__skip_ws(const char *s, const char *e)
{
	while (s < e && anchor__is_ws(*s))
		s++;
	return s;
}

struct span anchor__trim(const char *s, const char *e)
{
	struct span r;

	s = anchor__skip_ws(s, e);
	while (e > s && anchor__is_ws(e[-1]))
		e--;
	r.p = s;
	r.len = (size_t)(e - s);
	return r;
}

/* Length of word at s, matched without regard to case, or 0. */
size_t anchor__match_ci(const char *s, const char *e, const char *word)
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
	s = anchor__skip_ws(s, e);
	while (s < e && (*s == '#' || *s == '/' || *s == ';' || *s == '*' || *s == '-'))
		s++;
	return anchor__skip_ws(s, e);
}

/* After "<<<": [ws] IMPROVE [sep] BEGIN[S]|END[S].  Returns kind and end. */
static enum mark keyword_at(const char *s, const char *e, const char **after)
{
	size_t n;
	enum mark k;

	s = anchor__skip_ws(s, e);
	n = anchor__match_ci(s, e, "IMPROVE");
	if (!n)
		return MARK_NONE;
	s += n;
	while (s < e && (anchor__is_ws(*s) || *s == '_' || *s == '-'))
		s++;
	if ((n = anchor__match_ci(s, e, "BEGIN")) != 0)
		k = MARK_BEGIN;
	else if ((n = anchor__match_ci(s, e, "END")) != 0)
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
	sp = anchor__trim(sp.p, sp.p + sp.len);
	while (sp.len >= 2 && sp.p[sp.len - 2] == '*' && sp.p[sp.len - 1] == '/')
		sp = anchor__trim(sp.p, sp.p + sp.len - 2);
	return sp;
}

/* Length of word at s, matched exactly, or 0. */
size_t anchor__match_exact(const char *s, const char *e, const char *word)
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

	if (!(n = anchor__match_exact(q, e, "IMPROVE")) || has_marker_text(q, e))
		return MARK_NONE; /* with a bracketed marker too: stray, as the caller finds */
	q += n;
	if (q >= e || !(anchor__is_ws(*q) || *q == '_' || *q == '-'))
		return MARK_NONE;
	while (q < e && (anchor__is_ws(*q) || *q == '_' || *q == '-'))
		q++;
	if ((n = anchor__match_exact(q, e, "BEGIN")) != 0)
		k = MARK_BEGIN;
	else if ((n = anchor__match_exact(q, e, "END")) != 0)
		k = MARK_END;
	else
		return MARK_NONE;
	q += n;
	if (q < e && *q == 'S')
		q++;
	if (q < e && !anchor__is_ws(*q) && *q != ':')
		return MARK_NONE;
	rest = trim_close(anchor__trim(q, e));
	if (rest.len && *rest.p == ':')
		rest = anchor__trim(rest.p + 1, rest.p + rest.len);
	if (k == MARK_END && rest.len)
		return MARK_NONE;
	*instr = rest;
	return k;
}

/*
 * Classifies one line (len without '\n').  For BEGIN, *instr gets the
 * instruction found on the line (possibly empty).
 */
enum mark anchor__marker_parse(const char *p, size_t len, struct span *instr)
{
	const char *e = p + len, *s = skip_prefix(p, e), *after, *close = NULL, *q;
	enum mark k;
	struct span before, tail;

	instr->p = p;
	instr->len = 0;
	if (s != anchor__skip_ws(p, e) && (k = bare_marker(s, e, instr)) != MARK_NONE)
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
	before = trim_close(anchor__trim(after, close ? close : e));
	if (before.len && (*before.p == ':' || *before.p == '-'))
		before = anchor__trim(before.p + 1, before.p + before.len);
	tail = trim_close(anchor__trim(close ? close + 3 : e, e));
	if (tail.len && (*tail.p == ':' || *tail.p == '-'))
		tail = anchor__trim(tail.p + 1, tail.p + tail.len);
	*instr = before.len ? before : tail;
	return k;
}

/* An `INSTRUCTION: text` line (comment prefix allowed); text in *instr. */
bool anchor__instruction_line(const char *p, size_t len, struct span *instr)
{
	const char *e = p + len, *s = skip_prefix(p, e);
	size_t n = anchor__match_ci(s, e, "INSTRUCTION");

	if (!n)
		return false;
	s += n;
	if (s < e && (*s == 'S' || *s == 's'))
		s++;
	s = anchor__skip_ws(s, e);
	if (s >= e || *s != ':')
		return false;
	*instr = trim_close(anchor__trim(s + 1, e));
	return true;
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
	enum mark k = anchor__marker_parse(l->p, l->len, &in);
	bool want = ps->want_instr;

	ps->want_instr = false;
	if (k == MARK_STRAY)
		return perr(ps, ST_EINVAL, "anchor marker at line %u is not on its own line",
			    lineno);
	if (k == MARK_BEGIN)
		return on_begin(ps, lineno, in);
	if (k == MARK_END)
		return on_end(ps, lineno);
	if (want && anchor__instruction_line(l->p, l->len, &in))
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
