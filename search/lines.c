/*
 * lines.c -- a program's lines, classified by a small Python tokenizer so
 * that the anchor checks can tell a harmless blank line or trailing space
 * from a change (lines.h states the rules).
 *
 * The tokenizer knows what decides where string literals are: quotes
 * (single, double, tripled; any prefix such as r, b, f reads the same,
 * since a backslash always escapes the next character for tokenizing),
 * backslash escapes (a backslash before the newline continues a string or,
 * outside one, the line), and comments (a '#' outside strings runs to the
 * end of the line).  A single-quoted string left open at the end of a line
 * is a syntax error in Python; it is closed there, so one bad line cannot
 * turn the rest of a program into string data.  Everything is bounded by
 * the text; the input is untrusted LLM output.
 */
#include <stdlib.h>
#include <string.h>

#include "search/lines.h"

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

int lines_split(const char *text, size_t len, struct lines *ls)
{
	size_t i, n = 0, start = 0, cap = 1;

	for (i = 0; i < len; i++)
		cap += text[i] == '\n';
	ls->n = 0;
	ls->v = malloc(cap * sizeof(*ls->v));
	if (!ls->v)
		return ST_ENOMEM;
	for (i = 0; i <= len; i++) {
		struct line *l = &ls->v[n];

		if (i < len && text[i] != '\n')
			continue;
		if (i == len && start == len)
			break; /* no partial last line */
		l->p = text + start;
		l->raw = i - start + (i < len);
		l->len = i - start;
		while (l->len && is_space(l->p[l->len - 1]))
			l->len--;
		l->no = (uint32_t)(n + 1);
		l->flags = 0;
		n++;
		start = i + 1;
	}
	ls->n = n;
	return 0;
}

void lines_release(struct lines *ls)
{
	free(ls->v);
	ls->v = NULL;
	ls->n = 0;
}

/* Where the tokenizer is between lines. */
struct tok {
	char quote; /* 0 outside strings, else ' or " */
	bool triple;
};

/* The bytes of a line before its ending ("\n" or "\r\n"). */
static size_t content_len(const struct line *l)
{
	size_t n = l->raw;

	if (n && l->p[n - 1] == '\n')
		n--;
	if (n && l->p[n - 1] == '\r')
		n--;
	return n;
}

/* Tokenizes one line of n content bytes; returns its flags. */
static unsigned mark_line(struct tok *t, const char *p, size_t n)
{
	unsigned flags = t->quote ? LN_STR_START : 0;
	bool blank = true, esc_nl = false;
	size_t i = 0;

	while (i < n) {
		char c = p[i];

		blank &= is_space(c);
		if (t->quote) {
			if (c == '\\') {
				esc_nl = i + 1 == n;
				i += 2;
			} else if (c == t->quote &&
				   (!t->triple || (i + 2 < n && p[i + 1] == c && p[i + 2] == c))) {
				i += t->triple ? 3 : 1;
				t->quote = 0;
			} else {
				i++;
			}
			continue;
		}
		if (c == '#')
			break; /* a comment: the rest of the line */
		if (c == '\'' || c == '"') {
			t->triple = i + 2 < n && p[i + 1] == c && p[i + 2] == c;
			t->quote = c;
			i += t->triple ? 3 : 1;
		} else {
			if (c == '\\' && i + 1 == n)
				flags |= LN_CONT;
			i++;
		}
	}
	for (; blank && i < n; i++) /* the comment's bytes, for blankness */
		blank = is_space(p[i]);
	if (t->quote && !t->triple && !esc_nl)
		t->quote = 0; /* an unterminated string ends with its line */
	if (t->quote)
		flags |= LN_STR_END;
	if (blank)
		flags |= LN_BLANK;
	return flags;
}

void lines_mark(struct lines *ls)
{
	struct tok t = {0, false};
	bool after_cont = false;

	for (size_t i = 0; i < ls->n; i++) {
		struct line *l = &ls->v[i];
		size_t n = content_len(l);

		l->flags = mark_line(&t, l->p, n);
		l->len = n;
		/* inside a string, trailing whitespace is data */
		while (!(l->flags & LN_STR_END) && l->len && is_space(l->p[l->len - 1]))
			l->len--;
		if (!(l->flags & LN_BLANK) || (l->flags & LN_STR_START) || after_cont)
			l->flags |= LN_SIG;
		after_cont = (l->flags & LN_CONT) != 0;
	}
}

void lines_significant(struct lines *ls)
{
	size_t i, n = 0;

	for (i = 0; i < ls->n; i++)
		if (ls->v[i].flags & LN_SIG)
			ls->v[n++] = ls->v[i];
	ls->n = n;
}

int lines_slice(const struct lines *ls, size_t from, size_t n, struct lines *out)
{
	out->n = 0;
	if (from > ls->n)
		from = ls->n;
	if (n > ls->n - from)
		n = ls->n - from;
	out->v = malloc((n ? n : 1) * sizeof(*out->v));
	if (!out->v)
		return ST_ENOMEM;
	if (n)
		memcpy(out->v, ls->v + from, n * sizeof(*out->v));
	out->n = n;
	return 0;
}

bool lines_eq(const struct line *a, const struct line *b)
{
	return a->len == b->len && memcmp(a->p, b->p, a->len) == 0 &&
	       !((a->flags ^ b->flags) & (LN_STR_START | LN_STR_END));
}
