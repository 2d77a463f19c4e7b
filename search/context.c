/*
 * context.c -- the dynamic context windows of the three agents.
 *
 * Each agent sees a different slice of the tree, rebuilt at every step
 * (the paper's role-specific windows):
 *   plan    the node, its children (what was already tried from here) and
 *           the global top-r leaders (what works best anywhere);
 *   code    the node, its children and its cousins (its siblings'
 *           children: neighbouring implementations of related plans);
 *   debug   the node and its siblings (other attempts from the same
 *           parent, often correct versions of the same idea);
 *   reflect (baseline) the node and its ancestors, newest first.
 * The window is a rendered text within a token budget, with a fixed
 * truncation order (see search.h), so the same tree always gives the same
 * window, byte for byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/search.h"

#define REL_CHILD 1u
#define REL_LEADER 2u
#define REL_COUSIN 4u
#define REL_SIBLING 8u
#define REL_ANCESTOR 16u

struct cand {
	double key;	/* speedup for correct nodes, -1 for the rest */
	uint32_t id;
	unsigned rel;
};

struct gather {
	const struct search_tree *t;
	unsigned char *rel; /* per id: REL_* flags (deduplicates) */
	struct cand *v;	    /* the relatives, filled by gather_collect */
	size_t n;
};

size_t context_tokens(size_t bytes)
{
	return (bytes + 3) / 4;
}

void context_init(struct context_window *w)
{
	memset(w, 0, sizeof(*w));
	dbuf_init(&w->text, PROMPT_MAX);
}

void context_release(struct context_window *w)
{
	dbuf_release(&w->text);
	w->n = 0;
	w->tokens = 0;
}

/* Marks id with relation rel; pending nodes have no outcome to show. */
static void gather_put(struct gather *g, uint32_t id, unsigned rel)
{
	if (tree_node(g->t, id)->status != NODE_PENDING)
		g->rel[id] |= (unsigned char)rel;
}

static int gather_list(struct gather *g, uint32_t node, unsigned rel)
{
	uint32_t *ids;
	size_t n, i;
	int rc;

	ids = malloc((size_t)tree_count(g->t) * sizeof(*ids));
	if (!ids)
		return ST_ENOMEM;
	if (rel == REL_SIBLING)
		rc = tree_siblings(g->t, node, ids, tree_count(g->t), &n);
	else
		rc = tree_cousins(g->t, node, ids, tree_count(g->t), &n);
	for (i = 0; !rc && i < n; i++)
		gather_put(g, ids[i], rel);
	free(ids);
	return rc;
}

static int gather_role(struct gather *g, const struct search_config *cfg, enum search_role role,
		       uint32_t node)
{
	const struct tree_node *n = tree_node(g->t, node);
	uint32_t i, leaders[64];
	size_t nl;

	if (role == ROLE_PLAN || role == ROLE_CODE)
		for (i = 0; i < n->nchildren; i++)
			gather_put(g, n->children[i], REL_CHILD);
	if (role == ROLE_PLAN) {
		nl = tree_leaders(g->t, cfg->leaders < 64 ? cfg->leaders : 64, leaders);
		for (i = 0; i < nl; i++)
			gather_put(g, leaders[i], REL_LEADER);
	}
	if (role == ROLE_CODE)
		return gather_list(g, node, REL_COUSIN);
	if (role == ROLE_DEBUG)
		return gather_list(g, node, REL_SIBLING);
	if (role == ROLE_REFLECT)
		for (i = n->parent; i != TREE_NONE; i = tree_node(g->t, i)->parent)
			gather_put(g, i, REL_ANCESTOR);
	return 0;
}

/* Lists marked ids but the node itself (rendered apart), ids ascending. */
static void gather_collect(struct gather *g, uint32_t node, bool newest_first)
{
	uint32_t i, count = tree_count(g->t);

	g->n = 0;
	for (i = 0; i < count; i++) {
		uint32_t id = newest_first ? count - 1 - i : i;

		if (g->rel[id] && id != node) {
			const struct tree_node *n = tree_node(g->t, id);

			g->v[g->n].key = n->status == NODE_CORRECT ? n->speedup : -1.0;
			g->v[g->n].id = id;
			g->v[g->n].rel = g->rel[id];
			g->n++;
		}
	}
}

/*
 * Rank order: correct first by speedup descending, then the rest; ids
 * ascending among equals.  Speedups are > 0, so a key of -1 sorts failures
 * after every correct node.
 */
static bool ranks_before(const struct cand *a, const struct cand *b)
{
	if (a->key != b->key)
		return a->key > b->key;
	return a->id < b->id;
}

/* Stable bottom-up merge sort by rank (qsort has no context argument). */
static int sort_rank(struct gather *g)
{
	struct cand *tmp, *src = g->v, *dst, *swap;
	size_t width, lo, mid, hi, i, j, k;

	if (g->n < 2)
		return 0;
	tmp = malloc(g->n * sizeof(*tmp));
	if (!tmp)
		return ST_ENOMEM;
	dst = tmp;
	for (width = 1; width < g->n; width *= 2) {
		for (lo = 0; lo < g->n; lo += 2 * width) {
			mid = lo + width < g->n ? lo + width : g->n;
			hi = lo + 2 * width < g->n ? lo + 2 * width : g->n;
			for (i = lo, j = mid, k = lo; k < hi; k++)
				dst[k] = (i < mid && (j >= hi || !ranks_before(&src[j], &src[i])))
						 ? src[i++]
						 : src[j++];
		}
		swap = src;
		src = dst;
		dst = swap;
	}
	if (src != g->v)
		memcpy(g->v, src, g->n * sizeof(*src));
	free(tmp);
	return 0;
}

static const char *rel_text(unsigned rel, char *buf, size_t len)
{
	static const char *const names[] = {"child", "leader", "cousin", "sibling", "ancestor"};
	size_t i, off = 0;

	buf[0] = '\0';
	for (i = 0; i < ST_ARRAY_LEN(names); i++) {
		if (!(rel & (1u << i)))
			continue;
		off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? ", " : "", names[i]);
		if (off >= len)
			break;
	}
	return buf;
}

/* Appends at most max bytes of text, then a cut note if it was longer. */
static int append_cut(struct dbuf *b, const char *text, size_t max)
{
	size_t n = strlen(text);
	int rc;

	if (n <= max)
		return dbuf_append(b, text, n);
	rc = dbuf_append(b, text, max);
	if (!rc)
		rc = dbuf_printf(b, "\n[... %zu bytes cut ...]\n", n - max);
	return rc;
}

static int entry_header(struct dbuf *b, const struct tree_node *n, const char *what)
{
	int rc;

	rc = dbuf_printf(b, "### attempt %u (%s", n->id, what);
	if (!rc && n->parent != TREE_NONE)
		rc = dbuf_printf(b, "; %s from attempt %u", node_origin_name(n->origin), n->parent);
	if (!rc && n->status == NODE_CORRECT)
		rc = dbuf_printf(b, "): correct, speedup %.2fx\n", n->speedup);
	else if (!rc)
		rc = dbuf_printf(b, "): %s\n", node_status_name(n->status));
	return rc;
}

/* One relative: header, instructions, feedback, code; each capped. */
static int render_entry(struct dbuf *b, const struct tree_node *n, unsigned rel, size_t code_max)
{
	char rbuf[64];
	int rc;

	rc = entry_header(b, n, rel_text(rel, rbuf, sizeof(rbuf)));
	if (!rc && n->plan[0]) {
		rc = dbuf_puts(b, "instructions:\n");
		if (!rc)
			rc = append_cut(b, n->plan, code_max / 4);
	}
	if (!rc && n->feedback[0]) {
		rc = dbuf_puts(b, "feedback:\n");
		if (!rc)
			rc = append_cut(b, n->feedback, code_max / 4);
		if (!rc && n->feedback[strlen(n->feedback) - 1] != '\n')
			rc = dbuf_puts(b, "\n");
	}
	if (!rc)
		rc = dbuf_puts(b, "code:\n```python\n");
	if (!rc)
		rc = append_cut(b, n->code, code_max);
	if (!rc && (n->code_len == 0 || n->code[n->code_len - 1] != '\n'))
		rc = dbuf_puts(b, "\n");
	if (!rc)
		rc = dbuf_puts(b, "```\n\n");
	return rc;
}

static int render_node(struct context_window *w, const struct search_tree *t, uint32_t node)
{
	int rc = entry_header(&w->text, tree_node(t, node), "the current program");

	if (!rc)
		rc = dbuf_puts(&w->text, "(its code is given in full separately)\n\n");
	return rc;
}

/* Adds ranked entries while they fit the budget; stops at the first that does not. */
static int render_ranked(struct context_window *w, const struct gather *g, size_t budget,
			 size_t code_max)
{
	struct dbuf e;
	size_t i;
	int rc = 0;

	dbuf_init(&e, PROMPT_MAX);
	for (i = 0; i < g->n && w->n < CONTEXT_IDS_MAX; i++) {
		dbuf_reset(&e);
		rc = render_entry(&e, tree_node(g->t, g->v[i].id), g->v[i].rel, code_max);
		if (rc == ST_ETOOBIG)
			break;
		if (rc)
			goto out;
		if (context_tokens(w->text.len + e.len) > budget)
			break;
		rc = dbuf_append(&w->text, e.p, e.len);
		if (rc)
			goto out;
		w->ids[w->n++] = g->v[i].id;
	}
	rc = 0;
out:
	dbuf_release(&e);
	return rc;
}

int context_build(const struct search_tree *t, const struct search_config *cfg,
		  enum search_role role, uint32_t node, struct context_window *w)
{
	struct gather g = {t, NULL, NULL, 0};
	int rc;

	dbuf_reset(&w->text);
	w->n = 0;
	w->candidates = 0;
	w->tokens = 0;
	if (!tree_node(t, node))
		return ST_ENOENT;
	if ((unsigned)role >= ROLE_COUNT)
		return ST_EINVAL;
	g.rel = calloc(tree_count(t), 1);
	g.v = malloc((size_t)tree_count(t) * sizeof(*g.v));
	rc = g.rel && g.v ? gather_role(&g, cfg, role, node) : ST_ENOMEM;
	if (rc)
		goto out;
	gather_collect(&g, node, role == ROLE_REFLECT);
	if (role != ROLE_REFLECT)
		rc = sort_rank(&g);
	if (!rc)
		rc = render_node(w, t, node);
	if (rc)
		goto out;
	w->ids[w->n++] = node;
	w->candidates = g.n + 1;
	rc = render_ranked(w, &g, cfg->context_tokens[role], cfg->context_entry_bytes);
	w->tokens = context_tokens(w->text.len);
out:
	free(g.rel);
	free(g.v);
	return rc;
}
