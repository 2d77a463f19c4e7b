/*
 * anchor_int.h -- what the anchor files of search/ share, and nobody else
 * sees: anchor.c reads marker lines and plans, verify.c checks a plan's
 * grounding and the code agent's program, reply.c finds the program among
 * a reply's fenced blocks.  Text primitives over untrusted bytes, each
 * bounded by the [s, e) or (p, len) it is given; none can fail.  Internal
 * names start with anchor__.
 */
#ifndef STARK_ANCHOR_INT_H
#define STARK_ANCHOR_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "search/lines.h"
#include "search/search.h"

#define ANCHOR_TEXT_MAX (2 * TREE_CODE_MAX) /* a plan or program we read */

enum mark { MARK_NONE, MARK_BEGIN, MARK_END, MARK_STRAY };

/* A piece of the text being read (borrowed from it). */
struct span {
	const char *p;
	size_t len;
};

/* Blank but for a newline: space, tab, CR, FF, VT. */
bool anchor__is_ws(char c);
/* The lines of p[0..len) (a last line without '\n' counts). */
size_t anchor__count_lines(const char *p, size_t len);
/* A line quoted for a message into buf (n bytes): at most 60 bytes,
 * printable, in backquotes; returns buf. */
const char *anchor__quote(const struct line *l, char *buf, size_t n);
/* The first byte of [s, e) that is not anchor__is_ws(), or e. */
const char *anchor__skip_ws(const char *s, const char *e);
/* [s, e) without its leading and trailing anchor__is_ws() bytes. */
struct span anchor__trim(const char *s, const char *e);
/* Length of word at s, matched without regard to case, or 0. */
size_t anchor__match_ci(const char *s, const char *e, const char *word);
/* Length of word at s, matched exactly, or 0. */
size_t anchor__match_exact(const char *s, const char *e, const char *word);
/* Classifies one line (len without '\n').  For BEGIN, *instr gets the
 * instruction found on the line (possibly empty). */
enum mark anchor__marker_parse(const char *p, size_t len, struct span *instr);
/* An `INSTRUCTION: text` line (comment prefix allowed); text in *instr. */
bool anchor__instruction_line(const char *p, size_t len, struct span *instr);

#endif
