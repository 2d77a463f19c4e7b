/*
 * show.c -- `stark show`, `stark export`, `stark list`: a run's tree,
 * leaders, spend and state for people (text) and programs (JSON), its best
 * candidate as a ready-to-use file, and its journal as JSON Lines (the
 * replay files of --llm replay: and --eval replay:).
 *
 * Everything here reads; the only writes are the output files.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static void print_tree(const struct run *r, FILE *out)
{
	uint32_t n = tree_count(r->tree), *stack = malloc((size_t)n * sizeof(*stack));
	char why[TREE_REASON_MAX + 1];
	size_t top = 0;

	if (!stack)
		return;
	stack[top++] = 0;
	while (top) {
		uint32_t id = stack[--top];
		const struct tree_node *nd = tree_node(r->tree, id);
		unsigned indent = nd->depth < 40 ? nd->depth * 2 : 80;

		fprintf(out, "  %*s%u %s %s", indent, "", id, node_origin_name(nd->origin),
			node_status_name(nd->status));
		if (nd->status == NODE_CORRECT)
			fprintf(out, " %.2fx", nd->speedup);
		if (nd->status == NODE_CORRECT && isfinite(r->info[id].speedup_compile))
			fprintf(out, " (%.2fx vs torch.compile)", r->info[id].speedup_compile);
		if (id)
			fprintf(out, "  [attempt %u]", r->info[id].attempt);
		tree_node_reason(nd, why, sizeof(why));
		if (why[0])
			fprintf(out, "  %s", why);
		fputc('\n', out);
		for (size_t i = 0; id && i < r->nchecks; i++)
			if (r->checks[i].attempt == r->info[id].attempt)
				fprintf(out, "  %*s  rejected %s: %s\n", indent, "",
					r->checks[i].key, r->checks[i].reason);
		for (uint32_t i = nd->nchildren; i-- > 0;)
			stack[top++] = nd->children[i];
	}
	free(stack);
}

static void print_spend(FILE *out, const char *name, const struct run_spend *s, const char *model)
{
	fprintf(out, "  %-8s %6llu %11llu %11llu %11llu %10.4f  %s\n", name,
		(unsigned long long)s->calls, (unsigned long long)s->tokens_in,
		(unsigned long long)s->tokens_out, (unsigned long long)s->tokens_reasoning,
		s->dollars, model);
}

int show_run(struct run *r, bool json, FILE *out)
{
	enum run_state shown = run_shown_state(r->st, r->id, r->state);
	uint32_t best = run_best(r);
	struct run_spend t = run_spend_total(r);

	if (json) {
		json_t *o = run_json(r);
		int rc;

		if (!o)
			return ST_ENOMEM;
		rc = json_dumpf(o, out, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) ? ST_EIO : ST_OK;
		json_decref(o);
		fputc('\n', out);
		return ferror(out) ? ST_EIO : rc;
	}
	fprintf(out, "run %s (%s)\n", r->id, r->problem);
	fprintf(out, "state: %s", run_state_name(shown));
	if (run_shown_reason(shown, r->state, r->reason)[0])
		fprintf(out, " (%s)", run_shown_reason(shown, r->state, r->reason));
	fprintf(out, "\npolicy %s, attempts %u/%u, llm %s, eval %s, device %s, format %s, precision %s, baseline %s\n",
		search_policy_name(r->cfg.policy), r->attempts, r->cfg.budget,
		jr_str(r->options, "llm", "?"), jr_str(r->options, "eval", "?"),
		jr_str(r->options, "device", "?"), jr_str(r->options, "format", "kernelbench"),
		jr_str(r->options, "precision", "fp32"), jr_str(r->options, "baseline", "eager"));
	if (r->producer)
		fprintf(out, "stark: %s (commit %s), prompts %s\n",
			jr_str(r->producer, "release", "?"), jr_str(r->producer, "commit", "?"),
			jr_str(r->producer, "prompts", "?"));
	else
		fprintf(out, "stark: before 0.2.0 (the run recorded no version)\n");
	if (best == TREE_NONE)
		fprintf(out, "best: no correct candidate yet\n");
	else if (!run_beats_reference(r, best))
		fprintf(out,
			"best: no candidate beat the reference; the fastest correct one is node %u "
			"at %.2fx (`stark export %s --fastest` writes it)\n",
			best, tree_node(r->tree, best)->speedup, r->id);
	else
		fprintf(out, "best: node %u, %.2fx\n", best, tree_node(r->tree, best)->speedup);
	if (best != TREE_NONE && isfinite(r->info[best].speedup_compile))
		fprintf(out, "best against torch.compile: node %u at %.2fx (compiled reference %.1f us)\n",
			best, r->info[best].speedup_compile, r->info[best].ref_compile_us);
	fprintf(out, "spend per role:\n  %-8s %6s %11s %11s %11s %10s  %s\n", "role", "calls",
		"tokens in", "tokens out", "reasoning", "dollars", "model");
	for (int i = 0; i < ROLE_COUNT; i++)
		if (r->spend[i].calls)
			print_spend(out, search_role_name((enum search_role)i), &r->spend[i],
				    run_role_model(r, i));
	print_spend(out, "total", &t, "");
	if (r->nmodels)
		fprintf(out, "spend per model:\n  %-24s %6s %11s %11s %11s %10s\n", "model",
			"calls", "tokens in", "tokens out", "reasoning", "dollars");
	for (size_t i = 0; i < r->nmodels; i++) {
		const struct run_spend *s = &r->models[i].s;

		fprintf(out, "  %-24s %6llu %11llu %11llu %11llu %10.4f\n", r->models[i].model,
			(unsigned long long)s->calls, (unsigned long long)s->tokens_in,
			(unsigned long long)s->tokens_out, (unsigned long long)s->tokens_reasoning,
			s->dollars);
	}
	fprintf(out, "tree (%u nodes):\n", tree_count(r->tree));
	print_tree(r, out);
	return ferror(out) ? ST_EIO : ST_OK;
}

void show_resume_plan(struct run *r, FILE *out)
{
	fprintf(out, "state: %s (%s)\n", run_state_name(r->state), r->reason);
	fprintf(out, "rebuilt: %u nodes, %u attempts done of %u, journal at event %llu\n",
		tree_count(r->tree), r->attempts, r->cfg.budget, (unsigned long long)r->last_seq);
	if (!r->cur.open) {
		fprintf(out, "next: %s\n",
			r->attempts < r->cfg.budget ? "a new attempt" : "nothing (budget reached)");
		return;
	}
	fprintf(out, "open attempt %u: %s on node %u\n", r->cur.k,
		search_action_name(r->cur.choice.action), r->cur.choice.node);
	for (size_t i = 0; i < r->cur.nmemo; i++) {
		const struct run_memo *m = &r->cur.memo[i];

		fprintf(out, "  llm %s: %s\n", m->key,
			m->resp_seq && !m->resp_fatal ? "answered (from the journal)"
			: m->req_seq		      ? "in flight (will be sent again)"
						      : "not requested");
	}
	if (r->cur.node != TREE_NONE)
		fprintf(out, "  node %u: %s\n", r->cur.node,
			r->cur.eval_done ? "evaluated" : "evaluation in flight (will run again)");
}

/* ---- export ---- */

static FILE *open_out(const char *path, char *tmp, size_t tmplen)
{
	int n;

	if (!path || !strcmp(path, "-"))
		return stdout;
	n = snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
	if (n < 0 || (size_t)n >= tmplen)
		return NULL;
	return fopen(tmp, "we");
}

static int close_out(FILE *f, const char *path, const char *tmp, char *err, size_t errlen)
{
	bool bad;

	if (f == stdout) {
		bad = fflush(f) || ferror(f);
	} else {
		bad = fflush(f) || ferror(f) || fsync(fileno(f));
		bad |= fclose(f) != 0;
		if (!bad && rename(tmp, path))
			bad = true;
		if (bad)
			unlink(tmp);
	}
	if (bad) {
		snprintf(err, errlen, "%s: cannot write: %s", path ? path : "stdout",
			 strerror(errno));
		return ST_EIO;
	}
	return ST_OK;
}

int export_code(struct run *r, long node, const char *path, char *err, size_t errlen)
{
	uint32_t id = node < 0 ? run_best(r) : (uint32_t)node;
	const struct tree_node *n = id == TREE_NONE ? NULL : tree_node(r->tree, id);
	char tmp[PROTO_PATH_MAX + 32];
	FILE *f;

	if (!n) {
		if (node < 0)
			snprintf(err, errlen, "run %s has no correct candidate yet", r->id);
		else
			snprintf(err, errlen, "run %s has no node %ld", r->id, node);
		return ST_ENOENT;
	}
	if (node == EXPORT_BEST && !run_beats_reference(r, id)) {
		snprintf(
		    err, errlen,
		    "run %s: no candidate beat the reference; the fastest correct one, node %u, "
		    "runs at %.2fx: `stark export %s --fastest` writes it",
		    r->id, id, n->speedup, r->id);
		return ST_ENOENT;
	}
	f = open_out(path, tmp, sizeof(tmp));
	if (!f) {
		snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
		return ST_EIO;
	}
	fwrite(n->code, 1, n->code_len, f);
	if (n->code_len && n->code[n->code_len - 1] != '\n')
		fputc('\n', f);
	if (f != stdout && node < 0)
		fprintf(stderr, "node %u (%.3gx) of run %s written to %s\n", id, n->speedup, r->id,
			path);
	return close_out(f, path, tmp, err, errlen);
}

struct export_ctx {
	struct run *r;
	const char *what;
	FILE *f;
	char (*hash)[17]; /* code hash per node id */
	uint32_t nhash;
	int rc;
};

static int emit(struct export_ctx *c, json_t *o)
{
	if (!o || json_dumpf(o, c->f, JSON_COMPACT | JSON_REAL_PRECISION(17))) {
		json_decref(o);
		c->rc = ST_EIO;
		return 1;
	}
	json_decref(o);
	fputc('\n', c->f);
	return 0;
}

static json_t *text_or_note(const char *p, size_t n)
{
	json_t *s = json_stringn(p ? p : "", n);

	return s ? s : json_string("(not utf-8)");
}

/* A request's messages: the system message, then its turns (user[, assistant, user]). */
static json_t *request_messages(const json_t *head, const char *blob, size_t bn)
{
	const json_t *turns = json_object_get(head, "turns");
	size_t k = (size_t)jr_u64(head, "system_len", 0), n, i;
	json_t *msgs = json_array(), *o;

	k = k > bn ? bn : k;
	json_array_append_new(
	    msgs, json_pack("{s:s, s:o}", "role", "system", "content", text_or_note(blob, k)));
	n = json_is_array(turns) ? json_array_size(turns) : 1;
	for (i = 0; msgs && i < n && i < 3; i++) {
		size_t len = json_is_array(turns)
				 ? (size_t)json_integer_value(json_array_get(turns, i))
				 : bn - k;

		len = len > bn - k ? bn - k : len;
		json_array_append_new(msgs, json_pack("{s:s, s:o}", "role",
						      i == 1 ? "assistant" : "user", "content",
						      text_or_note(blob ? blob + k : NULL, len)));
		k += len;
	}
	o = json_pack("{s:o}", "messages", msgs ? msgs : json_null());
	return o;
}

/* An event's body for --journal, with its blob split into named texts. */
static json_t *journal_body(uint32_t type, const json_t *head, json_t *body, const char *blob,
			    size_t bn)
{
	size_t k;

	switch (type) {
	case JR_LLM_REQUEST:
		return request_messages(head, blob, bn);
	case JR_LLM_RESPONSE:
		k = (size_t)jr_u64(head, "text_len", 0);
		k = k > bn ? bn : k;
		return json_pack("{s:o, s:o}", "text", text_or_note(blob, k), "raw",
				 text_or_note(blob ? blob + k : NULL, bn - k));
	case JR_NODE:
		k = (size_t)jr_u64(head, "code_len", 0);
		k = k > bn ? bn : k;
		return json_pack("{s:o, s:o}", "code", text_or_note(blob, k), "plan",
				 text_or_note(blob ? blob + k : NULL, bn - k));
	case JR_EVAL_RESULT: {
		json_t *o = body ? json_deep_copy(body) : json_object();

		if (o)
			json_object_set_new(o, "feedback", text_or_note(blob, bn));
		return o;
	}
	default:
		return body ? json_incref(body) : json_null();
	}
}

static int export_cb(void *arg, const struct store_event *ev)
{
	struct export_ctx *c = arg;
	json_t *head = NULL, *body = NULL, *o = NULL;
	const char *blob;
	size_t bn;
	int stop = 0;

	if (jr_parse_head(ev->data, ev->len, &head) || jr_parse_body(ev->data, ev->len, &body) ||
	    jr_blob(ev->data, ev->len, head, &blob, &bn)) {
		c->rc = ST_EPROTO;
		stop = 1;
		goto out;
	}
	if (!strcmp(c->what, "journal")) {
		o = json_pack("{s:I, s:s, s:O, s:o}", "seq", (json_int_t)ev->seq, "type",
			      jr_type_name(ev->type), "head", head, "body",
			      journal_body(ev->type, head, body, blob, bn));
		stop = emit(c, o);
	} else if (ev->type == JR_NODE && c->hash) {
		uint64_t id = jr_u64(head, "id", UINT64_MAX);

		if (id < c->nhash)
			snprintf(c->hash[id], 17, "%s", jr_str(head, "hash", ""));
	} else if (!strcmp(c->what, "responses") && ev->type == JR_LLM_RESPONSE &&
		   jr_i64(head, "rc", -1) == 0) {
		size_t tl = (size_t)jr_u64(head, "text_len", 0);
		json_t *text, *raw;

		if (tl > bn) {
			c->rc = ST_EPROTO;
			stop = 1;
			goto out;
		}
		text = text_or_note(blob, tl);
		raw = text_or_note(blob ? blob + tl : NULL, bn - tl);
		o = json_pack("{s:s, s:s, s:I, s:o, s:o, s:I, s:I, s:I, s:b}", "key",
			      jr_str(head, "key", ""), "role", jr_str(head, "role", ""), "attempt",
			      (json_int_t)jr_u64(head, "attempt", 0), "text", text, "raw", raw,
			      "tokens_in", (json_int_t)jr_u64(head, "tokens_in", 0), "tokens_out",
			      (json_int_t)jr_u64(head, "tokens_out", 0), "tokens_reasoning",
			      (json_int_t)jr_u64(head, "tokens_reasoning", 0), "truncated",
			      jr_bool(head, "truncated", false));
		stop = emit(c, o);
	} else if (!strcmp(c->what, "results") && ev->type == JR_EVAL_RESULT && body) {
		uint64_t id = jr_u64(head, "node", UINT64_MAX);

		o = json_deep_copy(body);
		if (o) {
			json_object_set_new(o, "key", json_string(jr_str(head, "key", "")));
			json_object_set_new(o, "node", json_integer((json_int_t)id));
			if (id < c->nhash && c->hash[id][0])
				json_object_set_new(o, "hash", json_string(c->hash[id]));
		}
		stop = emit(c, o);
	}
out:
	json_decref(head);
	json_decref(body);
	return stop;
}

int export_jsonl(struct run *r, const char *what, const char *path, char *err, size_t errlen)
{
	struct export_ctx c = {.r = r, .what = what};
	char tmp[PROTO_PATH_MAX + 32];
	int rc;

	c.nhash = tree_count(r->tree);
	c.hash = calloc(c.nhash, sizeof(*c.hash));
	if (!c.hash)
		return ST_ENOMEM;
	c.f = open_out(path, tmp, sizeof(tmp));
	if (!c.f) {
		free(c.hash);
		snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
		return ST_EIO;
	}
	rc = store_scan(r->st, r->id, 1, export_cb, &c);
	free(c.hash);
	if (rc < 0 || c.rc) {
		if (c.f != stdout) {
			fclose(c.f);
			unlink(tmp);
		}
		snprintf(err, errlen, "run %s: cannot export the journal: %s", r->id,
			 stark_strerror(rc < 0 ? rc : c.rc));
		return rc < 0 ? rc : c.rc;
	}
	return close_out(c.f, path, tmp, err, errlen);
}

/* ---- list ---- */

static int list_cb(void *arg, const char *run_id, const void *meta, size_t len)
{
	json_t *arr = arg, *m;
	json_error_t jerr;

	m = json_loadb(meta, len, 0, &jerr);
	if (!json_is_object(m)) {
		json_decref(m);
		m = json_object();
	}
	if (!m || json_object_set_new(m, "run_id", json_string(run_id)) ||
	    json_array_append_new(arr, m))
		return ST_ENOMEM;
	return 0;
}

int show_list(struct store *st, bool json, FILE *out)
{
	json_t *arr = json_array(), *m;
	size_t i;
	int rc;

	if (!arr)
		return ST_ENOMEM;
	rc = store_run_list(st, list_cb, arr);
	if (rc)
		goto out_free;
	/* States are settled after the walk: store callbacks may not use the store. */
	json_array_foreach(arr, i, m)
	{
		const char *id;
		enum run_state s;

		if (!strcmp(jr_str(m, "kind", ""), "bench")) { /* a bench: one line, no rows */
			char what[64];

			snprintf(what, sizeof(what), "bench of %llu runs",
				 (unsigned long long)jr_u64(m, "runs", 0));
			json_object_set_new(m, "run_id", json_string(jr_str(m, "bench_id", "")));
			json_object_set_new(m, "problem", json_string(what));
			json_object_del(m, "table");
			json_object_del(m, "problems");
		}
		id = jr_str(m, "run_id", "");

		if (!run_state_parse(jr_str(m, "state", ""), &s))
			json_object_set_new(
			    m, "state", json_string(run_state_name(run_shown_state(st, id, s))));
		else
			json_object_set_new(m, "state", json_string("new"));
	}
	if (json) {
		rc = json_dumpf(arr, out, JSON_INDENT(1)) ? ST_EIO : ST_OK;
		fputc('\n', out);
		goto out_free;
	}
	fprintf(out, "%-40s %-12s %11s %14s  %s\n", "run", "state", "attempts", "best", "problem");
	json_array_foreach(arr, i, m)
	{
		double best = jr_real(m, "best_speedup", NAN);
		char b[32] = "-";

		/* a fastest candidate slower than the reference is no win: said so */
		if (isfinite(best))
			snprintf(b, sizeof(b), "%.2fx%s", best,
				 jr_bool(m, "beats_reference", best > 1.0) ? "" : " slower");
		fprintf(out, "%-40s %-12s %5llu/%-5llu %14s  %s\n", jr_str(m, "run_id", ""),
			jr_str(m, "state", ""), (unsigned long long)jr_u64(m, "attempts", 0),
			(unsigned long long)jr_u64(m, "budget", 0), b, jr_str(m, "problem", ""));
	}
	rc = ferror(out) ? ST_EIO : ST_OK;
out_free:
	json_decref(arr);
	return rc;
}
