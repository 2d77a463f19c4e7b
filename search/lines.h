/*
 * lines.h -- a program's lines as the anchor checks compare them (internal
 * to the search core: anchor.c and its tests).
 *
 * A text is split into lines, and each line is classified by a small
 * tokenizer of Python (the language of every candidate format; CUDA and C++
 * sources live in its string literals): does the line begin inside a
 * string literal, does its newline fall inside one, does it end with a
 * backslash continuation, is it blank.  From that:
 *
 *   - a line is *significant* unless it is blank, begins outside any string
 *     literal and does not follow a continuation: blank lines between
 *     statements (or inside brackets) cannot change what a Python program
 *     means, blank lines inside a string literal can;
 *   - two lines are equal when their bytes are, trailing whitespace aside
 *     where the newline is outside a string literal (inside one it is
 *     data), and when they agree on where strings begin and end (a fixed
 *     line swallowed by a string opened elsewhere has changed).
 *
 * A '\r' before '\n' belongs to the line ending everywhere (Python reads
 * CRLF sources as LF ones).  Every line keeps its 1-based number in the
 * text it came from.
 *
 * Ownership: lines point into the text they were split from, which must
 * outlive them; the array is owned (lines_release).
 */
#ifndef STARK_LINES_H
#define STARK_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define LN_STR_START 1u	 /* begins inside a string literal */
#define LN_STR_END   2u	 /* its newline is inside a string literal */
#define LN_CONT	     4u	 /* ends with a backslash continuation outside strings */
#define LN_BLANK     8u	 /* whitespace only */
#define LN_SIG	     16u /* significant (see above) */

struct line {
	const char *p;
	size_t len;  /* bytes compared: without the line ending, and without trailing
			whitespace unless LN_STR_END */
	size_t raw;  /* bytes including the '\n' */
	uint32_t no; /* 1-based line number in the text split */
	unsigned flags;
};

struct lines {
	struct line *v;
	size_t n;
};

/* Splits text into lines (a last line without '\n' counts); ST_ENOMEM. */
ST_WUR int lines_split(const char *text, size_t len, struct lines *ls);
void lines_release(struct lines *ls);
/*
 * Classifies ls's lines in order as one Python text (string literals
 * spanning lines, comments, continuations), sets each line's len and
 * marks the significant ones LN_SIG.
 */
void lines_mark(struct lines *ls);
/* Keeps the lines marked LN_SIG, in order. */
void lines_significant(struct lines *ls);
/* A copy of ls->v[from, from + n) (ST_ENOMEM); out is owned by the caller. */
ST_WUR int lines_slice(const struct lines *ls, size_t from, size_t n, struct lines *out);
/* Whether two marked lines are equal (see above). */
bool lines_eq(const struct line *a, const struct line *b);

#endif
