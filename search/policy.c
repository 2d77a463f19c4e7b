/*
 * policy.c -- which node to work on next, and with which agent.
 *
 * The paper's modified epsilon-greedy search over the tree of attempts,
 * plus the two baselines it is compared with, on the same tree:
 *
 *   stark      with probability 1 - epsilon exploit: the best eligible
 *              leader (correct, fastest, smallest id), improved by the
 *              plan and code agents.  Otherwise explore: a weighted draw
 *              among all eligible nodes, leaves weighing leaf_weight and
 *              internal nodes 1 (leaf-biased exploration: new ideas are
 *              grown from the frontier more often than from nodes already
 *              expanded).  A failing node drawn this way goes to the debug
 *              agent.  Eligibility (policy_eligible) carries root
 *              throttling, dead-branch pruning and the debug allowance.
 *   sampling   best-of-N: every attempt is a fresh sample from the root.
 *   reflexion  linear refinement: always the newest attempt, with its
 *              feedback.
 *
 * Assumptions where the paper is not specific (arXiv 2510.16996 was not
 * available to us in full; issue 5 fixes the rules we follow):
 *   - The debug path is routed by status, not by a separate probability:
 *     a debuggable failure can only be chosen by exploration and is then
 *     always debugged; a correct node is always improved.  Exploitation
 *     never debugs, so the search keeps climbing from its best kernel.
 *   - Pruning looks only at settled children: a node whose children
 *     number more than prune_n, none correct and none still pending, is
 *     dead.  Debug children count as children.
 *   - The root is eligible while it has fewer than root_cap children; its
 *     own status is CORRECT with speedup 1 (the reference), so it is the
 *     first leader until something beats it.
 *
 * The PRNG is xoroshiro128** (Blackman and Vigna) seeded by splitmix64;
 * two u64 of state, so the driver journals and restores it exactly.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "search/search.h"

/* ---- PRNG --------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void rng_seed(struct search_rng *r, uint64_t seed)
{
	uint64_t x = seed;

	r->s[0] = splitmix64(&x);
	r->s[1] = splitmix64(&x);
	if (!r->s[0] && !r->s[1]) /* the one forbidden state */
		r->s[1] = 1;
}

uint64_t rng_next(struct search_rng *r)
{
	uint64_t s0 = r->s[0], s1 = r->s[1];
	uint64_t result = rotl(s0 * 5, 7) * 9;

	s1 ^= s0;
	r->s[0] = rotl(s0, 24) ^ s1 ^ (s1 << 16);
	r->s[1] = rotl(s1, 37);
	return result;
}

double rng_double(struct search_rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t rng_below(struct search_rng *r, uint64_t n)
{
	unsigned __int128 m;
	uint64_t lo, threshold;

	if (n == 0)
		return 0;
	m = (unsigned __int128)rng_next(r) * n;
	lo = (uint64_t)m;
	if (lo < n) {
		threshold = -n % n;
		while (lo < threshold) {
			m = (unsigned __int128)rng_next(r) * n;
			lo = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

void rng_format(const struct search_rng *r, char buf[33])
{
	snprintf(buf, 33, "%016" PRIx64 "%016" PRIx64, r->s[0], r->s[1]);
}

static int hex_u64(const char *p, uint64_t *out)
{
	uint64_t v = 0;
	int i, d;

	for (i = 0; i < 16; i++) {
		if (p[i] >= '0' && p[i] <= '9')
			d = p[i] - '0';
		else if (p[i] >= 'a' && p[i] <= 'f')
			d = p[i] - 'a' + 10;
		else if (p[i] >= 'A' && p[i] <= 'F')
			d = p[i] - 'A' + 10;
		else
			return ST_EINVAL;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return 0;
}

int rng_parse(const char *text, struct search_rng *out)
{
	struct search_rng r;

	if (strlen(text) != 32 || hex_u64(text, &r.s[0]) || hex_u64(text + 16, &r.s[1]))
		return ST_EINVAL;
	if (!r.s[0] && !r.s[1])
		return ST_EINVAL;
	*out = r;
	return 0;
}

/* ---- eligibility ---------------------------------------------------------- */

/* More than prune_n children, all settled, none correct. */
static bool branch_dead(const struct search_tree *t, const struct tree_node *n, uint32_t prune_n)
{
	uint32_t i;
	enum node_status s;

	if (n->nchildren <= prune_n)
		return false;
	for (i = 0; i < n->nchildren; i++) {
		s = tree_node(t, n->children[i])->status;
		if (s == NODE_CORRECT || s == NODE_PENDING)
			return false;
	}
	return true;
}

bool policy_eligible(const struct search_tree *t, const struct search_config *cfg, uint32_t id,
		     enum search_action *out)
{
	const struct tree_node *n = tree_node(t, id);
	enum search_action a;

	if (!n || n->status == NODE_PENDING)
		return false;
	if (n->parent == TREE_NONE && n->nchildren >= cfg->root_cap)
		return false;
	if (branch_dead(t, n, cfg->prune_n))
		return false;
	if (n->status == NODE_CORRECT)
		a = ACTION_PLAN;
	else if (node_status_debuggable(n->status) && tree_debug_attempts(t, id) < cfg->debug_max)
		a = ACTION_DEBUG;
	else
		return false;
	if (out)
		*out = a;
	return true;
}

/* ---- selection ------------------------------------------------------------ */

/* The best eligible correct node, or TREE_NONE. */
static uint32_t best_eligible_leader(const struct search_tree *t, const struct search_config *cfg)
{
	const struct tree_node *n, *best = NULL;
	uint32_t i, count = tree_count(t);

	for (i = 0; i < count; i++) {
		n = tree_node(t, i);
		if (n->status != NODE_CORRECT || !policy_eligible(t, cfg, i, NULL))
			continue;
		if (!best || n->speedup > best->speedup)
			best = n; /* ascending ids: the first of equals wins */
	}
	return best ? best->id : TREE_NONE;
}

static bool any_pending(const struct search_tree *t)
{
	uint32_t i, count = tree_count(t);

	for (i = 0; i < count; i++)
		if (tree_node(t, i)->status == NODE_PENDING)
			return true;
	return false;
}

static double explore_weight(const struct search_tree *t, const struct search_config *cfg,
			     uint32_t id)
{
	return tree_is_leaf(t, id) ? cfg->leaf_weight : 1.0;
}

/*
 * The weighted draw: u in [0, total), walk eligible nodes in id order
 * subtracting weights.  One rng_double() per call.
 */
static int explore(const struct search_tree *t, const struct search_config *cfg,
		   struct search_rng *rng, struct search_choice *out)
{
	uint32_t i, count = tree_count(t), last = TREE_NONE;
	double total = 0, u, w;
	enum search_action a, last_a = ACTION_PLAN;

	for (i = 0; i < count; i++)
		if (policy_eligible(t, cfg, i, NULL))
			total += explore_weight(t, cfg, i);
	if (total <= 0)
		return any_pending(t) ? ST_EBUSY : ST_ENOENT;
	u = rng_double(rng) * total;
	for (i = 0; i < count; i++) {
		if (!policy_eligible(t, cfg, i, &a))
			continue;
		w = explore_weight(t, cfg, i);
		last = i;
		last_a = a;
		if (u < w)
			break;
		u -= w;
	}
	/* Rounding can leave u just above the last weight: take the last. */
	out->node = last;
	out->action = last_a;
	out->explored = true;
	return 0;
}

static int select_stark(const struct search_tree *t, const struct search_config *cfg,
			struct search_rng *rng, struct search_choice *out)
{
	uint32_t leader;
	bool exploring = rng_double(rng) < cfg->epsilon;

	if (!exploring) {
		leader = best_eligible_leader(t, cfg);
		if (leader != TREE_NONE) {
			out->node = leader;
			out->action = ACTION_PLAN;
			out->explored = false;
			return 0;
		}
	}
	return explore(t, cfg, rng, out);
}

int policy_select(const struct search_tree *t, const struct search_config *cfg,
		  struct search_rng *rng, struct search_choice *out)
{
	memset(out, 0, sizeof(*out));
	switch (cfg->policy) {
	case POLICY_STARK:
		return select_stark(t, cfg, rng, out);
	case POLICY_SAMPLING:
		out->node = 0;
		out->action = ACTION_SAMPLE;
		return 0;
	case POLICY_REFLEXION:
		out->node = tree_count(t) - 1;
		out->action = ACTION_REFLECT;
		return tree_node(t, out->node)->status == NODE_PENDING ? ST_EBUSY : 0;
	}
	return ST_EINVAL;
}

const char *search_action_name(enum search_action a)
{
	static const char *const names[] = {"plan", "debug", "sample", "reflect"};

	return (unsigned)a < ST_ARRAY_LEN(names) ? names[a] : "unknown";
}
