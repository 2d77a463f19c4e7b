/*
 * tree.c -- the tree of kernel attempts.
 *
 * The search memory of STARK: every attempt is a node holding its code,
 * how it was made (origin, the plan's instructions), and how it fared
 * (status, speedup, feedback).  Node ids are dense indices in creation
 * order, so a tree rebuilt from a journal by the same sequence of
 * tree_add()/tree_set_result() calls is identical, ids included.  The tree
 * answers the structural questions the policy and the context windows ask:
 * children, siblings, cousins, leaders, debug allowance.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/search.h"

struct search_tree {
	struct tree_node *nodes;
	uint32_t n;
	uint32_t cap;
};

static char *dup_capped(const char *s, size_t max, size_t *len_out)
{
	size_t n = s ? strlen(s) : 0;
	char *p;

	if (n > max)
		return NULL;
	p = malloc(n + 1);
	if (!p)
		return NULL;
	if (n)
		memcpy(p, s, n);
	p[n] = '\0';
	if (len_out)
		*len_out = n;
	return p;
}

static int tree_grow(struct search_tree *t)
{
	uint32_t ncap;
	struct tree_node *nn;

	if (t->n < t->cap)
		return 0;
	if (t->cap >= TREE_NODES_MAX)
		return ST_ETOOBIG;
	ncap = t->cap ? t->cap * 2 : 64;
	if (ncap > TREE_NODES_MAX)
		ncap = TREE_NODES_MAX;
	nn = realloc(t->nodes, (size_t)ncap * sizeof(*nn));
	if (!nn)
		return ST_ENOMEM;
	t->nodes = nn;
	t->cap = ncap;
	return 0;
}

static int child_push(struct tree_node *p, uint32_t id)
{
	uint32_t ncap;
	uint32_t *nc;

	if (p->nchildren == p->children_cap) {
		ncap = p->children_cap ? p->children_cap * 2 : 4;
		nc = realloc(p->children, (size_t)ncap * sizeof(*nc));
		if (!nc)
			return ST_ENOMEM;
		p->children = nc;
		p->children_cap = ncap;
	}
	p->children[p->nchildren++] = id;
	return 0;
}

static void node_release(struct tree_node *n)
{
	free(n->code);
	free(n->plan);
	free(n->feedback);
	free(n->children);
}

/* Fills the slot t->nodes[t->n] (room must exist) and counts it. */
static int node_init(struct search_tree *t, uint32_t parent, enum node_origin origin,
		     const char *code, const char *plan)
{
	struct tree_node *n = &t->nodes[t->n];

	memset(n, 0, sizeof(*n));
	n->id = t->n;
	n->parent = parent;
	n->origin = origin;
	n->status = NODE_PENDING;
	n->depth = parent == TREE_NONE ? 0 : t->nodes[parent].depth + 1;
	n->code = dup_capped(code, TREE_CODE_MAX, &n->code_len);
	n->plan = dup_capped(plan, TREE_PLAN_MAX, NULL);
	n->feedback = dup_capped("", 0, NULL);
	if (!n->code || !n->plan || !n->feedback) {
		node_release(n);
		if ((code && strlen(code) > TREE_CODE_MAX) || (plan && strlen(plan) > TREE_PLAN_MAX))
			return ST_ETOOBIG;
		return ST_ENOMEM;
	}
	t->n++;
	return 0;
}

int tree_new(const char *root_code, struct search_tree **out)
{
	struct search_tree *t;
	int rc;

	*out = NULL;
	if (!root_code)
		return ST_EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return ST_ENOMEM;
	rc = tree_grow(t);
	if (rc)
		goto out_free;
	rc = node_init(t, TREE_NONE, ORIGIN_ROOT, root_code, NULL);
	if (rc)
		goto out_free;
	t->nodes[0].status = NODE_CORRECT;
	t->nodes[0].speedup = 1.0;
	*out = t;
	return 0;
out_free:
	free(t->nodes);
	free(t);
	return rc;
}

void tree_free(struct search_tree *t)
{
	uint32_t i;

	if (!t)
		return;
	for (i = 0; i < t->n; i++)
		node_release(&t->nodes[i]);
	free(t->nodes);
	free(t);
}

int tree_add(struct search_tree *t, uint32_t parent, enum node_origin origin, const char *code,
	     const char *plan, uint32_t *id_out)
{
	int rc;

	if (origin == ORIGIN_ROOT || (unsigned)origin > ORIGIN_REFLECT || !code)
		return ST_EINVAL;
	if (parent >= t->n)
		return ST_ENOENT;
	rc = tree_grow(t);
	if (rc)
		return rc;
	rc = node_init(t, parent, origin, code, plan);
	if (rc)
		return rc;
	rc = child_push(&t->nodes[parent], t->n - 1);
	if (rc) {
		t->n--;
		node_release(&t->nodes[t->n]);
		return rc;
	}
	*id_out = t->n - 1;
	return 0;
}

/* Copies feedback, keeping head and tail around a cut line when too long. */
static char *feedback_capped(const char *fb)
{
	size_t n = fb ? strlen(fb) : 0, half = TREE_FEEDBACK_MAX / 2 - 64;
	struct dbuf b;

	if (n <= TREE_FEEDBACK_MAX)
		return dup_capped(fb, TREE_FEEDBACK_MAX, NULL);
	dbuf_init(&b, TREE_FEEDBACK_MAX + 128);
	if (dbuf_append(&b, fb, half) || dbuf_printf(&b, "\n[... %zu bytes cut ...]\n", n - 2 * half) ||
	    dbuf_append(&b, fb + n - half, half)) {
		dbuf_release(&b);
		return NULL;
	}
	return dbuf_detach(&b, NULL);
}

int tree_set_result(struct search_tree *t, uint32_t id, enum node_status status, double speedup,
		    const char *feedback)
{
	struct tree_node *n;
	char *fb;

	if (id >= t->n)
		return ST_ENOENT;
	if ((unsigned)status > NODE_ERROR || status == NODE_PENDING)
		return ST_EINVAL;
	if (status == NODE_CORRECT && !(isfinite(speedup) && speedup > 0))
		return ST_EINVAL;
	fb = feedback_capped(feedback);
	if (!fb)
		return ST_ENOMEM;
	n = &t->nodes[id];
	free(n->feedback);
	n->feedback = fb;
	n->status = status;
	n->speedup = status == NODE_CORRECT ? speedup : 0.0;
	return 0;
}

uint32_t tree_count(const struct search_tree *t)
{
	return t->n;
}

const struct tree_node *tree_node(const struct search_tree *t, uint32_t id)
{
	return id < t->n ? &t->nodes[id] : NULL;
}

bool tree_is_leaf(const struct search_tree *t, uint32_t id)
{
	return id < t->n && t->nodes[id].nchildren == 0;
}

/* Appends id to out[0..max), counting past max; ST_ETOOBIG reported by caller. */
static void id_put(uint32_t *out, size_t max, size_t *n, uint32_t id)
{
	if (*n < max)
		out[*n] = id;
	(*n)++;
}

int tree_siblings(const struct search_tree *t, uint32_t id, uint32_t *out, size_t max, size_t *n)
{
	const struct tree_node *p;
	uint32_t i;

	*n = 0;
	if (id >= t->n)
		return ST_ENOENT;
	if (t->nodes[id].parent == TREE_NONE)
		return 0;
	p = &t->nodes[t->nodes[id].parent];
	for (i = 0; i < p->nchildren; i++)
		if (p->children[i] != id)
			id_put(out, max, n, p->children[i]);
	if (*n > max) {
		*n = max;
		return ST_ETOOBIG;
	}
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int tree_cousins(const struct search_tree *t, uint32_t id, uint32_t *out, size_t max, size_t *n)
{
	const struct tree_node *p, *s;
	uint32_t i, j;

	*n = 0;
	if (id >= t->n)
		return ST_ENOENT;
	if (t->nodes[id].parent == TREE_NONE)
		return 0;
	p = &t->nodes[t->nodes[id].parent];
	for (i = 0; i < p->nchildren; i++) {
		if (p->children[i] == id)
			continue;
		s = &t->nodes[p->children[i]];
		for (j = 0; j < s->nchildren; j++)
			id_put(out, max, n, s->children[j]);
	}
	if (*n > max) {
		*n = max;
		qsort(out, max, sizeof(*out), cmp_u32);
		return ST_ETOOBIG;
	}
	qsort(out, *n, sizeof(*out), cmp_u32);
	return 0;
}

/* True when node a ranks before node b among leaders. */
static bool leader_before(const struct tree_node *a, const struct tree_node *b)
{
	if (a->speedup != b->speedup)
		return a->speedup > b->speedup;
	return a->id < b->id;
}

size_t tree_leaders(const struct search_tree *t, uint32_t r, uint32_t *out)
{
	size_t n = 0, k;
	uint32_t i;

	/* Insertion into a sorted array of at most r: O(nodes * r), r small. */
	for (i = 0; i < t->n && r > 0; i++) {
		if (t->nodes[i].status != NODE_CORRECT)
			continue;
		if (n == r && !leader_before(&t->nodes[i], &t->nodes[out[n - 1]]))
			continue;
		k = n < r ? n++ : n - 1;
		while (k > 0 && leader_before(&t->nodes[i], &t->nodes[out[k - 1]])) {
			out[k] = out[k - 1];
			k--;
		}
		out[k] = i;
	}
	return n;
}

uint32_t tree_best(const struct search_tree *t)
{
	uint32_t best;

	return tree_leaders(t, 1, &best) ? best : TREE_NONE;
}

uint32_t tree_debug_attempts(const struct search_tree *t, uint32_t id)
{
	const struct tree_node *n;
	uint32_t count = 0, i;

	if (id >= t->n)
		return 0;
	n = &t->nodes[id];
	for (i = 0; i < n->nchildren; i++)
		if (t->nodes[n->children[i]].origin == ORIGIN_DEBUG)
			count++;
	while (n->origin == ORIGIN_DEBUG) {
		count++;
		n = &t->nodes[n->parent];
	}
	return count;
}

bool node_status_failed(enum node_status s)
{
	return s != NODE_PENDING && s != NODE_CORRECT;
}

/* Appends [p, p + n) to buf (of len, at *at) with control characters as
 * spaces, stopping before a character that does not fit whole. */
static bool reason_put(char *buf, size_t len, size_t *at, const char *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = (unsigned char)p[i];
		size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;

		if (i + k > n)
			k = n - i;
		if (*at + k >= len)
			return false;
		for (size_t j = 0; j < k; j++)
			buf[(*at)++] = c < 0x20 || c == 0x7f ? ' ' : p[i + j];
		i += k;
	}
	return true;
}

/* The first non-blank line of s at or after p, as [*b, *b + return). */
static size_t first_line(const char *p, const char **b)
{
	size_t n;

	p += strspn(p, " \t\r\n");
	n = strcspn(p, "\r\n");
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	*b = p;
	return n;
}

void tree_node_reason(const struct tree_node *n, char *buf, size_t len)
{
	const char *fb = n && n->feedback ? n->feedback : "", *l, *e = NULL;
	size_t at = 0, ln, en = 0;

	if (!len)
		return;
	buf[0] = '\0';
	if (!n || !node_status_failed(n->status) || len < 8)
		return;
	ln = first_line(fb, &l);
	if (!ln) {
		l = node_status_name(n->status);
		ln = strlen(l);
	}
	/* A compiler's message is generic; its first error line says what broke. */
	if (n->status == NODE_COMPILE_ERROR) {
		for (const char *p = l + ln; (p = strstr(p, "error")) != NULL; p++) {
			const char *s = p;

			while (s > l + ln && s[-1] != '\n')
				s--;
			if (s > l + ln) {
				en = first_line(s, &e);
				break;
			}
		}
	}
	if (len > TREE_REASON_MAX + 1)
		len = TREE_REASON_MAX + 1;
	if (!reason_put(buf, len - 3, &at, l, ln) ||
	    (en && (!reason_put(buf, len - 3, &at, ": ", 2) || !reason_put(buf, len - 3, &at, e, en)))) {
		memcpy(buf + at, "...", 3);
		at += 3;
	}
	buf[at] = '\0';
}

bool node_status_debuggable(enum node_status s)
{
	switch (s) {
	case NODE_INCORRECT:
	case NODE_COMPILE_ERROR:
	case NODE_RUNTIME_ERROR:
	case NODE_TIMEOUT:
	case NODE_CRASHED:
		return true;
	default:
		return false;
	}
}

static const char *const status_names[] = {
	"pending", "correct", "incorrect", "compile_error", "runtime_error",
	"timeout", "crashed", "rejected",  "error",
};

static const char *const origin_names[] = {"root", "plan", "debug", "sample", "reflect"};

const char *node_status_name(enum node_status s)
{
	return (unsigned)s < ST_ARRAY_LEN(status_names) ? status_names[s] : "unknown";
}

int node_status_parse(const char *name, enum node_status *out)
{
	size_t i;

	for (i = 0; i < ST_ARRAY_LEN(status_names); i++) {
		if (strcmp(name, status_names[i]) == 0) {
			*out = (enum node_status)i;
			return 0;
		}
	}
	return ST_EINVAL;
}

const char *node_origin_name(enum node_origin o)
{
	return (unsigned)o < ST_ARRAY_LEN(origin_names) ? origin_names[o] : "unknown";
}

int node_origin_parse(const char *name, enum node_origin *out)
{
	size_t i;

	for (i = 0; i < ST_ARRAY_LEN(origin_names); i++) {
		if (strcmp(name, origin_names[i]) == 0) {
			*out = (enum node_origin)i;
			return 0;
		}
	}
	return ST_EINVAL;
}

/* Length of the identifier `Model` at p if it stands alone there, else 0. */
static size_t model_word_at(const char *start, const char *p)
{
	if (strncmp(p, "Model", 5) != 0)
		return 0;
	if (p > start && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
			  (p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= '0' && p[-1] <= '9')))
		return 0;
	return 5;
}

int tree_seed_code(const char *reference, struct dbuf *out)
{
	const char *p = reference, *q;
	int rc;

	/* Rename `Model` where followed by '(' or ',' after `class ` or `super(`. */
	while ((q = strstr(p, "Model")) != NULL) {
		bool after_class = q - reference >= 6 && strncmp(q - 6, "class ", 6) == 0;
		bool after_super = q - reference >= 6 && strncmp(q - 6, "super(", 6) == 0;
		bool ends = q[5] == '(' || q[5] == ',' || q[5] == ':';

		rc = dbuf_append(out, p, (size_t)(q - p));
		if (rc)
			return rc;
		if ((after_class || after_super) && ends && model_word_at(reference, q))
			rc = dbuf_puts(out, "ModelNew");
		else
			rc = dbuf_append(out, q, 5);
		if (rc)
			return rc;
		p = q + 5;
	}
	return dbuf_puts(out, p);
}
