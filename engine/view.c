/*
 * view.c -- a run as readers see it: the object `stark show --json` prints
 * and `stark report` builds on (state, routes, spend per role and per
 * model, leaders, the open attempt, every node with its verdict, timings,
 * complaints and why it failed), and the state to show for a run whose
 * journal says "running" while no process holds it (it was killed).
 * Reads only; the store is touched only to test the run's lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

/* The state as a user should read it: "running" without a holder was killed. */
enum run_state run_shown_state(struct store *st, const char *id, enum run_state s)
{
	struct store_lock *l = NULL;

	if (s != RUN_RUNNING || store_lock_run(st, id, &l))
		return s;
	store_unlock_run(l);
	return RUN_INTERRUPTED;
}

const char *run_shown_reason(enum run_state shown, enum run_state journaled, const char *reason)
{
	if (shown != journaled)
		return "the process running it stopped without a clean stop; `stark resume` continues it";
	return reason;
}

static json_t *spend_obj(const struct run_spend *s)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:o}", "calls", (json_int_t)s->calls, "tokens_in",
			 (json_int_t)s->tokens_in, "tokens_out", (json_int_t)s->tokens_out,
			 "tokens_reasoning", (json_int_t)s->tokens_reasoning, "dollars",
			 jr_real_new(s->dollars));
}

/* The complaints of the attempt that made node id (its rejected answers). */
static json_t *checks_obj(const struct run *r, uint32_t id)
{
	json_t *a = json_array();

	for (size_t i = 0; a && id && i < r->nchecks; i++)
		if (r->checks[i].attempt == r->info[id].attempt &&
		    json_array_append_new(a, json_pack("{s:s, s:s}", "key", r->checks[i].key,
						       "reason", r->checks[i].reason))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *speedup_obj(const struct run *r, uint32_t id)
{
	if (id == TREE_NONE)
		return json_null();
	return json_pack("{s:I, s:o, s:o}", "node", (json_int_t)id, "speedup",
			 jr_real_new(tree_node(r->tree, id)->speedup), "speedup_compile",
			 jr_real_new(r->info[id].speedup_compile));
}

static json_t *node_obj(const struct run *r, uint32_t id)
{
	const struct tree_node *n = tree_node(r->tree, id);
	const struct run_node_info *ni = &r->info[id];
	char why[TREE_REASON_MAX + 1];
	json_t *o, *ch = json_array();

	for (uint32_t i = 0; ch && i < n->nchildren; i++)
		if (json_array_append_new(ch, json_integer(n->children[i]))) {
			json_decref(ch);
			ch = NULL;
		}
	tree_node_reason(n, why, sizeof(why));
	o = json_pack(
	    "{s:I, s:o, s:s, s:o, s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id",
	    (json_int_t)id,
	    "parent", n->parent == TREE_NONE ? json_null() : json_integer(n->parent), "status",
	    node_status_name(n->status), "speedup",
	    n->status == NODE_CORRECT ? jr_real_new(n->speedup) : json_null(), "origin",
	    node_origin_name(n->origin), "attempt", (json_int_t)ni->attempt, "depth",
	    (json_int_t)n->depth, "verdict",
	    ni->verdict < 0 ? json_null()
			    : json_string(proto_status_name((enum proto_status)ni->verdict)),
	    "runtime_us", jr_real_new(ni->runtime_us), "ref_runtime_us",
	    jr_real_new(ni->ref_runtime_us), "speedup_compile",
	    n->status == NODE_CORRECT ? jr_real_new(ni->speedup_compile) : json_null(),
	    "ref_compile_us", jr_real_new(ni->ref_compile_us), "children", ch ? ch : json_null(), "checks",
	    checks_obj(r, id), "reason", why[0] ? json_string(why) : json_null());
	return o;
}

json_t *run_json(struct run *r)
{
	enum run_state shown = run_shown_state(r->st, r->id, r->state);
	uint32_t best = run_best(r), leaders[64];
	size_t nl = tree_leaders(r->tree, r->cfg.leaders < 64 ? r->cfg.leaders : 64, leaders);
	struct run_spend total = run_spend_total(r);
	json_t *o, *spend, *models, *routes, *nodes, *lead, *open = json_null();

	spend = json_object();
	for (int i = 0; spend && i < ROLE_COUNT; i++) {
		json_t *e = spend_obj(&r->spend[i]);

		if (e)
			json_object_set_new(e, "model", json_string(run_role_model(r, i)));
		json_object_set_new(spend, search_role_name((enum search_role)i), e);
	}
	routes = json_object();
	for (int i = 0; routes && i < ROLE_COUNT; i++)
		if (route_role_used(r->cfg.policy, (enum search_role)i))
			json_object_set_new(routes, search_role_name((enum search_role)i),
					    json_pack("{s:s, s:s}", "llm", run_role_llm(r, i), "model",
						      run_role_model(r, i)));
	if (spend)
		json_object_set_new(spend, "total", spend_obj(&total));
	models = json_object();
	for (size_t i = 0; models && i < r->nmodels; i++)
		json_object_set_new(models, r->models[i].model, spend_obj(&r->models[i].s));
	lead = json_array();
	for (size_t i = 0; lead && i < nl; i++)
		json_array_append_new(lead, json_integer(leaders[i]));
	nodes = json_array();
	for (uint32_t i = 0; nodes && i < tree_count(r->tree); i++)
		if (json_array_append_new(nodes, node_obj(r, i))) {
			json_decref(nodes);
			nodes = NULL;
		}
	if (r->cur.open)
		open = json_pack("{s:I, s:I, s:s}", "attempt", (json_int_t)r->cur.k, "node",
				 (json_int_t)r->cur.choice.node, "action",
				 search_action_name(r->cur.choice.action));
	o = json_pack(
	    "{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:f, s:O, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
	    "run_id", r->id, "problem", r->problem, "state", run_state_name(shown), "reason",
	    run_shown_reason(shown, r->state, r->reason), "policy", search_policy_name(r->cfg.policy),
	    "budget", (json_int_t)r->cfg.budget, "attempts", (json_int_t)r->attempts, "created",
	    r->created, "options", r->options, "routes", routes ? routes : json_null(), "best",
	    run_beats_reference(r, best) ? speedup_obj(r, best) : json_null(), "fastest",
	    speedup_obj(r, best), "leaders", lead ? lead : json_null(), "spend",
	    spend ? spend : json_null(), "spend_models", models ? models : json_null(),
	    "open_attempt", open ? open : json_null(), "nodes", nodes ? nodes : json_null());
	if (o)
		json_object_set_new(o, "stark", r->producer ? json_incref(r->producer) : json_null());
	return o;
}
