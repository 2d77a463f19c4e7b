/*
 * fuzz_anchor.c -- libFuzzer target for grounded-instruction anchors: the
 * code extractor, the plan parser, the grounding check and the code
 * verifier all read LLM replies, which are untrusted bytes.
 *
 * Input: PLAN \0 CODE \0 OUTPUT (missing parts are empty).  Besides "no
 * crash, no leak, no undefined behaviour", it checks four properties:
 *   - a parsed scaffold rendered canonically parses back to the same
 *     scaffold;
 *   - a plan grounded in CODE verifies CODE itself (the unchanged program
 *     changes nothing outside the anchors);
 *   - a verified OUTPUT, once cleaned of markers, verifies again;
 *   - read as whole replies (fenced blocks, prose), a PLAN that
 *     anchor_accept_plan takes against CODE lets anchor_accept_code take
 *     CODE (when CODE is not blank and holds no fence of its own), and
 *     OUTPUT's cleaned program when it takes OUTPUT.
 * Seeds: tests/fuzz_anchor-corpus/.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "search/search.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Splits at the first two NULs; the last part keeps any further NULs. */
static void split(const char *p, size_t n, const char **part, size_t *len, int nparts)
{
	const char *nul;
	int i;

	for (i = 0; i < nparts; i++) {
		part[i] = p;
		nul = i < nparts - 1 && n ? memchr(p, '\0', n) : NULL;
		len[i] = nul ? (size_t)(nul - p) : n;
		p += len[i] + (nul != NULL);
		n -= len[i] + (nul != NULL);
	}
}

static void same_scaffold(const struct scaffold *a, const struct scaffold *b)
{
	size_t i;

	if (a->nanchors != b->nanchors)
		abort();
	for (i = 0; i <= a->nanchors; i++)
		if (a->fixed_len[i] != b->fixed_len[i] ||
		    memcmp(a->fixed[i], b->fixed[i], a->fixed_len[i]) != 0)
			abort();
	for (i = 0; i < a->nanchors; i++)
		if (strcmp(a->anchors[i].instruction, b->anchors[i].instruction) != 0 ||
		    a->anchors[i].body_len != b->anchors[i].body_len ||
		    memcmp(a->anchors[i].body, b->anchors[i].body, a->anchors[i].body_len) != 0)
			abort();
}

static void check_roundtrip(const struct scaffold *s)
{
	struct scaffold s2;
	struct dbuf b;
	char err[ANCHOR_ERR_MAX];

	scaffold_init(&s2);
	dbuf_init(&b, 8u << 20);
	if (scaffold_render(s, &b) == 0) {
		if (anchor_parse(dbuf_str(&b), b.len, &s2, err, sizeof(err)) != 0)
			abort();
		same_scaffold(s, &s2);
	}
	scaffold_release(&s2);
	dbuf_release(&b);
}

static void check_verify(const struct scaffold *s, const char *out, size_t n)
{
	struct dbuf clean;
	char err[ANCHOR_ERR_MAX];

	dbuf_init(&clean, 8u << 20);
	if (anchor_verify_code(s, out, n, &clean, err, sizeof(err)) == 0 &&
	    anchor_verify_code(s, dbuf_str(&clean), clean.len, NULL, err, sizeof(err)) != 0)
		abort();
	dbuf_release(&clean);
}

/* Code a reply can hold bare: not blank, no fence line of its own. */
static bool plain_program(const char *p, size_t n)
{
	bool blank = true;

	for (size_t i = 0; i < n; i++)
		blank &= p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r' ||
			 p[i] == '\f' || p[i] == '\v';
	return !blank && !memmem(p, n, "```", 3);
}

/* The run's path: whole replies, every candidate block tried. */
static void check_replies(const char *plan, size_t pn, const char *code, size_t cn, const char *out,
			  size_t on)
{
	struct anchor_candidate c[ANCHOR_CANDIDATES_MAX];
	char err[ANCHOR_ERR_MAX];
	struct scaffold s;
	struct dbuf clean, again;
	size_t n = 0;

	if (anchor_reply_candidates(out, on, c, &n) == 0)
		for (size_t i = 0; i < n; i++)
			if (!n || n > ANCHOR_CANDIDATES_MAX || c[i].off > on ||
			    c[i].len > on - c[i].off)
				abort();
	scaffold_init(&s);
	dbuf_init(&clean, 8u << 20);
	dbuf_init(&again, 8u << 20);
	if (anchor_accept_plan(plan, pn, code, cn, &s, err, sizeof(err)) == 0) {
		/* the unchanged program, bare (a reply with no fence of its own) */
		if (plain_program(code, cn) &&
		    anchor_accept_code(&s, code, cn, &clean, err, sizeof(err)) != 0)
			abort();
		if (anchor_accept_code(&s, out, on, &clean, err, sizeof(err)) == 0 &&
		    anchor_verify_code(&s, dbuf_str(&clean), clean.len, &again, err, sizeof(err)) !=
			0)
			abort();
	} else if (s.fixed) {
		abort(); /* released on failure */
	}
	(void)anchor_reply_code(out, on, &clean, err, sizeof(err));
	dbuf_release(&again);
	dbuf_release(&clean);
	scaffold_release(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *part[3];
	size_t len[3];
	char *copy, err[ANCHOR_ERR_MAX];
	struct scaffold s;
	struct dbuf code;

	/* A NUL-terminated copy: the API takes (pointer, length) but tree code is C strings. */
	copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	split(copy, size, part, len, 3);
	dbuf_init(&code, 8u << 20);
	(void)anchor_extract_code(copy, size, &code);
	dbuf_release(&code);
	scaffold_init(&s);
	if (anchor_parse(part[0], len[0], &s, err, sizeof(err)) == 0) {
		check_roundtrip(&s);
		if (anchor_check_grounded(&s, part[1], len[1], err, sizeof(err)) == 0 &&
		    anchor_verify_code(&s, part[1], len[1], NULL, err, sizeof(err)) != 0)
			abort();
		check_verify(&s, part[2], len[2]);
		dbuf_init(&code, 1u << 20);
		(void)scaffold_instructions(&s, &code);
		dbuf_release(&code);
	}
	scaffold_release(&s);
	check_replies(part[0], len[0], part[1], len[1], part[2], len[2]);
	free(copy);
	return 0;
}
