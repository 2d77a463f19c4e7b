/*
 * verify.c -- the checks of grounded instructions: a plan is grounded when,
 * markers aside, it is the node's code; the code agent's program must
 * differ from the node's code only inside the anchors.  Comparisons are
 * line by line with the line model of lines.h (only what cannot change a
 * Python program's meaning passes: blank lines and trailing whitespace
 * outside string literals).  A violation's message names the line of the
 * node's code and quotes what was expected there: it goes back to the
 * agent as the complaint of its retry.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/anchor_int.h"

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
		    anchor__quote(i < bsig.n ? &bsig.v[i] : NULL, qb, sizeof(qb)),
		    anchor__quote(i < asig.n ? &asig.v[i] : NULL, qa, sizeof(qa)));
		goto out;
	}
	rc = build_line_map(s, &a, &asig, &bsig, b.n);
	for (i = 0; !rc && i < s->nanchors; i++) {
		line += anchor__count_lines(s->fixed[i], s->fixed_len[i]);
		s->anchors[i].code_line = code_line_of(s, (uint32_t)line);
		line += anchor__count_lines(s->anchors[i].body, s->anchors[i].body_len);
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
		k = anchor__marker_parse(ls->v[i].p, ls->v[i].len, &in);
		if (k == MARK_BEGIN || k == MARK_END) {
			after_begin = k == MARK_BEGIN && in.len == 0;
			continue;
		}
		if (after_begin && anchor__instruction_line(ls->v[i].p, ls->v[i].len, &in)) {
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
		    code_line_of(v->s, no), anchor__quote(want, qw, sizeof(qw)),
		    (found->flags & LN_STR_END) ? "inside" : "outside",
		    (want->flags & LN_STR_END) ? "inside" : "outside");
	return stark_errbuf(
	    v->err, v->errlen, ST_EINVAL,
	    "code changes text outside anchors near line %u: the plan has %s there, the "
	    "code %s",
	    code_line_of(v->s, no), anchor__quote(want, qw, sizeof(qw)), anchor__quote(found, qf, sizeof(qf)));
}

/* The significant lines of fixed segment i, which starts at plan line *at. */
static int fixed_lines(struct verify_ctx *v, size_t i, size_t *at)
{
	const struct scaffold *s = v->s;
	size_t n = anchor__count_lines(s->fixed[i], s->fixed_len[i]);
	int rc;

	lines_release(&v->seg);
	rc = lines_slice(&v->plan, *at, n, &v->seg);
	if (!rc)
		lines_significant(&v->seg);
	*at += n + (i < s->nanchors ? anchor__count_lines(s->anchors[i].body, s->anchors[i].body_len) : 0);
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
