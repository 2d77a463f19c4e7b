/*
 * test_report.c -- unit tests of report/: the data model a run's report is
 * built from (nodes, attempts, LLM calls, anchor complaints, evaluation
 * details, the curves' figures), the bench section's checks and curves,
 * the page's escaping of untrusted text, the short reason of a failed node
 * and the terminal view of one node.
 *
 * Runs are made as `stark run` makes them, with replayed LLM replies and
 * evaluation results, in a store under /dev/shm where it exists.
 */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine_int.h"
#include "report/report.h"
#include "report/report_int.h"

#define PROBLEM                                                                                    \
	"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"                       \
	"    def __init__(self):\n        super().__init__()\n\n"                                  \
	"    def forward(self, x):\n        return x * 2\n\n\n"                                    \
	"def get_inputs():\n    return [torch.rand(4, 4)]\n\n\n"                                   \
	"def get_init_inputs():\n    return []\n"
#define ROOT_HEAD_J                                                                                \
	"import torch\\nimport torch.nn as nn\\n\\n\\nclass ModelNew(nn.Module):\\n"               \
	"    def __init__(self):\\n        super().__init__()\\n\\n    def forward(self, x):\\n"
#define ROOT_TAIL_J                                                                                \
	"\\n\\ndef get_inputs():\\n    return [torch.rand(4, 4)]\\n\\n\\n"                         \
	"def get_init_inputs():\\n    return []\\n"
#define PLAN_TEXT                                                                                  \
	"Fuse it.\\n\\n```python\\n" ROOT_HEAD_J "<<<IMPROVE BEGIN: one kernel>>>\\n"              \
	"        return x * 2\\n<<<IMPROVE END>>>\\n" ROOT_TAIL_J "```\\n"
/* A plan whose unanchored text is not the node's code: never grounded. */
#define BAD_PLAN_TEXT                                                                              \
	"Fuse it.\\n\\n```python\\nimport numpy\\n<<<IMPROVE BEGIN: one kernel>>>\\n"              \
	"        return x * 2\\n<<<IMPROVE END>>>\\n```\\n"

static char dir[PATH_MAX];

static void write_file(const char *name, const char *text, char *path, size_t len)
{
	FILE *f;
	int n = snprintf(path, len, "%.3000s/%.64s", dir, name);

	ck_assert(n > 0 && (size_t)n < len);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

struct env {
	char problem[PATH_MAX], llm[PATH_MAX], eval[PATH_MAX];
	char llm_spec[PATH_MAX + 8], eval_spec[PATH_MAX + 8];
	struct store *st;
	struct llm_provider *llmp;
	struct eval_provider *evp;
	struct search_config cfg;
};

/* Evaluation results: n1 incorrect with an escape sequence and markup in
 * its message, n2 a long compile log, n3 correct 2.5x with flags and env;
 * the rest by key parity (correct 1.5x + i/100, runtime errors). */
static const char *eval_lines(void)
{
	static char text[256 << 10];
	size_t n = 0;

	n += (size_t)snprintf(text + n, sizeof(text) - n,
			      "{\"key\":\"n1\",\"status\":\"incorrect\",\"message\":\"output 0 "
			      "differs \\u001b[31m<img src=x onerror=alert(1)>\","
			      "\"first_bad\":\"[3, "
			      "1]\",\"max_abs_err\":0.5,\"max_rel_err\":0.25,\"trials_run\":5,"
			      "\"trials_passed\":2}\n");
	n += (size_t)snprintf(text + n, sizeof(text) - n,
			      "{\"key\":\"n2\",\"status\":\"compile_error\",\"message\":\"the "
			      "build failed\",\"log\":\"");
	for (int i = 0; i < 600; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n,
				      "kernel.cu(%d): note: line %d of the log\\n", i, i);
	n += (size_t)snprintf(text + n, sizeof(text) - n,
			      "kernel.cu(601): error: identifier \\\"y\\\" is undefined\\n\"}\n");
	n += (size_t)snprintf(
	    text + n, sizeof(text) - n,
	    "{\"key\":\"n3\",\"status\":\"correct\",\"speedup\":2.5,\"runtime_us\":20,\"ref_"
	    "runtime_us\":50,"
	    "\"runtime_lo_us\":19,\"runtime_hi_us\":21,\"compile_ms\":1200,\"time_ms\":300,"
	    "\"flags\":[\"calls_reference_op\"],\"env\":{\"device\":\"cpu\",\"torch\":\"2.1\"}}\n");
	for (int i = 4; i <= 60; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n,
				      i % 2 ? "{\"key\":\"n%d\",\"status\":\"runtime_error\","
					      "\"message\":\"m%d\",\"log\":\"l%d\"}\n"
					    : "{\"key\":\"n%d\",\"status\":\"correct\",\"speedup\":"
					      "1.%02d,\"message\":\"ok\",\"log\":\"l%d\"}\n",
				      i, i, i);
	return text;
}

static void env_init(struct env *e, uint32_t budget, bool bad_plans)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	char err[512];

	snprintf(dir, sizeof(dir), "%s/stark-test-report.XXXXXX", base);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	if (!getenv("STARK_PROMPTS"))
		setenv("STARK_PROMPTS", "prompts", 1);
	write_file("problem.py", PROBLEM, e->problem, sizeof(e->problem));
	write_file("llm.jsonl",
		   bad_plans ? "{\"key\":\"a1.plan.r0\",\"role\":\"plan\",\"text\":\"" PLAN_TEXT
			       "\",\"tokens_in\":100,\"tokens_out\":10}\n"
			       "{\"key\":\"*\",\"role\":\"plan\",\"text\":\"" BAD_PLAN_TEXT
			       "\",\"tokens_in\":100,\"tokens_out\":10}\n"
			     : "{\"key\":\"*\",\"role\":\"plan\",\"text\":\"" PLAN_TEXT
			       "\",\"tokens_in\":100,\"tokens_out\":10}\n",
		   e->llm, sizeof(e->llm));
	{
		FILE *f = fopen(e->llm, "a");

		ck_assert_ptr_nonnull(f);
		fputs("{\"key\":\"*\",\"role\":\"code\",\"text\":\"" PLAN_TEXT
		      "\",\"tokens_in\":50,\"tokens_out\":20}\n"
		      "{\"key\":\"*\",\"role\":\"debug\",\"text\":\"```python\\n" ROOT_HEAD_J
		      "        return x * 2\\n" ROOT_TAIL_J
		      "```\\n\",\"tokens_in\":70,\"tokens_out\":30}\n",
		      f);
		ck_assert_int_eq(fclose(f), 0);
	}
	write_file("eval.jsonl", eval_lines(), e->eval, sizeof(e->eval));
	snprintf(e->llm_spec, sizeof(e->llm_spec), "replay:%s", e->llm);
	snprintf(e->eval_spec, sizeof(e->eval_spec), "replay:%s", e->eval);
	ck_assert_int_eq(store_open(dir, &e->st), 0);
	ck_assert_int_eq(llm_provider_replay(e->llm, &e->llmp, err, sizeof(err)), 0);
	ck_assert_int_eq(eval_provider_replay(e->eval, &e->evp, err, sizeof(err)), 0);
	search_config_defaults(&e->cfg);
	e->cfg.budget = budget;
	e->cfg.seed = 3;
	e->cfg.price_in[ROLE_PLAN] = 2.0; /* dollars per million tokens */
	e->cfg.price_out[ROLE_CODE] = 10.0;
}

static void env_release(struct env *e)
{
	char cmd[PATH_MAX + 16];

	llm_provider_free(e->llmp);
	eval_provider_free(e->evp);
	store_close(e->st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static struct run *run_to_end(struct env *e, const char *id)
{
	struct run_spec spec = {.run_id = id,
				.problem_path = e->problem,
				.llm = e->llm_spec,
				.device = "cpu",
				.eval = e->eval_spec,
				.format = "kernelbench",
				.cfg = &e->cfg};
	char err[512] = "";
	struct run *r = NULL;

	ck_assert_msg(run_create(e->st, &spec, &r, err, sizeof(err)) == 0, "run_create: %s", err);
	run_attach(r, e->llmp, e->evp, NULL);
	ck_assert_msg(run_loop(r, err, sizeof(err)) == 0, "run_loop: %s", err);
	ck_assert_int_eq(r->state, RUN_FINISHED);
	return r;
}

static json_t *model(struct run *r, long detail)
{
	char err[512] = "";
	json_t *o = NULL;

	ck_assert_msg(report_run_json(r, detail, &o, err, sizeof(err)) == 0, "report: %s", err);
	ck_assert_ptr_nonnull(o);
	return o;
}

/* ---- the run model ---- */

START_TEST(run_model_matches_the_run)
{
	struct env e;
	struct run *r;
	json_t *o, *nodes, *log, *n, *a, *v;
	double best = 0, dollars = 0;
	size_t i, j, verdicts = 0;
	const char *k;

	env_init(&e, 14, false);
	r = run_to_end(&e, "m1");
	o = model(r, REPORT_ALL);
	nodes = json_object_get(o, "nodes");
	log = json_object_get(o, "attempt_log");
	ck_assert_uint_eq(json_array_size(nodes), tree_count(r->tree));
	ck_assert_uint_eq(json_array_size(log), r->attempts);
	ck_assert_str_eq(jr_str(o, "run_id", ""), "m1");
	json_array_foreach(nodes, i, n)
	{
		const struct tree_node *t = tree_node(r->tree, (uint32_t)i);

		ck_assert_uint_eq(jr_u64(n, "id", 99), i);
		ck_assert_str_eq(jr_str(n, "code", "?"), t->code);
		ck_assert_str_eq(jr_str(n, "plan", "?"), t->plan);
		ck_assert_str_eq(jr_str(n, "status", ""), node_status_name(t->status));
		ck_assert(jr_bool(n, "detail", false));
		/* every failed node says why, in one short phrase */
		ck_assert_int_eq(json_is_string(json_object_get(n, "reason")),
				 node_status_failed(t->status));
		if (i)
			ck_assert(isfinite(jr_real(n, "at", NAN)));
		if (i && t->status != NODE_REJECTED && t->status != NODE_PENDING)
			ck_assert_msg(json_is_object(json_object_get(n, "result")), "node %zu", i);
	}
	json_array_foreach(log, i, a)
	{
		json_t *calls = json_object_get(a, "llm"), *c;
		json_t *node = json_object_get(a, "node");
		char pre[32];

		ck_assert_uint_eq(jr_u64(a, "attempt", 0), i + 1);
		ck_assert(json_array_size(calls) >= 1);
		snprintf(pre, sizeof(pre), "a%zu.", i + 1);
		json_array_foreach(calls, j, c)
		{
			ck_assert(str_starts(jr_str(c, "key", ""), pre));
			ck_assert(jr_bool(c, "answered", false));
			ck_assert(isfinite(jr_real(c, "ms", NAN)));
			ck_assert(isfinite(jr_real(c, "dollars", NAN)));
			if (!strcmp(jr_str(c, "role", ""), "plan"))
				ck_assert_uint_eq(jr_u64(c, "tokens_in", 0), 100);
		}
		ck_assert(jr_real(a, "ended", 0) >= jr_real(a, "started", 1));
		/* the curves' figures: spend and best so far, monotone, exact */
		ck_assert(jr_real(a, "dollars", -1) >= dollars);
		dollars = jr_real(a, "dollars", 0);
		if (json_is_integer(node)) {
			const struct tree_node *t =
			    tree_node(r->tree, (uint32_t)json_integer_value(node));

			if (t->status == NODE_CORRECT && t->speedup > best)
				best = t->speedup;
		}
		if (best > 0)
			ck_assert(jr_real(a, "best", NAN) == best);
		else
			ck_assert(json_is_null(json_object_get(a, "best")));
	}
	ck_assert(fabs(dollars - run_spend_total(r).dollars) < 1e-12);
	ck_assert(dollars > 0);
	json_object_foreach(json_object_get(o, "verdicts"), k, v)
	{
		const char *s;
		json_t *c;

		json_object_foreach(v, s, c) verdicts += (size_t)json_integer_value(c);
	}
	ck_assert_uint_eq(verdicts, r->attempts);
	/* n1: the incorrect node's evaluation, as journaled */
	n = json_array_get(nodes, 1);
	ck_assert_str_eq(jr_str(n, "status", ""), "incorrect");
	v = json_object_get(n, "result");
	ck_assert_ptr_nonnull(strstr(jr_str(v, "message", ""), "<img src=x onerror=alert(1)>"));
	ck_assert_str_eq(jr_str(v, "first_bad", ""), "[3, 1]");
	ck_assert_int_eq(jr_u64(v, "trials_passed", 0), 2);
	ck_assert(jr_real(v, "max_abs_err", 0) == 0.5);
	/* n2: a long log keeps its end; its reason names the compiler's error */
	n = json_array_get(nodes, 2);
	v = json_object_get(n, "result");
	ck_assert_uint_le(strlen(jr_str(v, "log_tail", "")), REPORT_LOG_TAIL);
	ck_assert_uint_gt(jr_u64(v, "log_bytes", 0), REPORT_LOG_TAIL);
	ck_assert_ptr_nonnull(strstr(jr_str(v, "log_tail", ""), "identifier \"y\" is undefined\n"));
	ck_assert(str_starts(jr_str(v, "log_tail", ""), "kernel.cu("));
	ck_assert_str_eq(jr_str(n, "reason", ""),
			 "the build failed: kernel.cu(601): error: identifier \"y\" is undefined");
	/* n3: flags, env, interval and stage times */
	v = json_object_get(json_array_get(nodes, 3), "result");
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(v, "flags"), 0)),
			 "calls_reference_op");
	ck_assert_str_eq(jr_str(json_object_get(v, "env"), "torch", ""), "2.1");
	ck_assert(jr_real(v, "runtime_lo_us", 0) == 19 && jr_real(v, "compile_ms", 0) == 1200);
	json_decref(o);
	run_free(r);
	env_release(&e);
}
END_TEST

START_TEST(one_node_detail_and_reload)
{
	struct env e;
	struct run *r, *l = NULL;
	json_t *a, *b;
	size_t i;
	json_t *n;
	char err[256];

	env_init(&e, 6, false);
	r = run_to_end(&e, "m2");
	a = model(r, 2);
	json_array_foreach(json_object_get(a, "nodes"), i, n)
	{
		ck_assert_int_eq(jr_bool(n, "detail", true), i == 2);
		ck_assert_int_eq(json_object_get(n, "code") != NULL, i == 2);
	}
	/* a run loaded back from the store gives the same model */
	ck_assert_int_eq(run_load(e.st, "m2", false, &l, err, sizeof(err)), 0);
	b = model(l, 2);
	ck_assert(json_equal(json_object_get(a, "nodes"), json_object_get(b, "nodes")));
	ck_assert(json_equal(json_object_get(a, "attempt_log"), json_object_get(b, "attempt_log")));
	json_decref(a);
	json_decref(b);
	run_free(l);
	run_free(r);
	env_release(&e);
}
END_TEST

START_TEST(rejected_nodes_carry_the_anchor_complaints)
{
	struct env e;
	struct run *r;
	json_t *o, *n, *a;
	size_t i, rejected = 0;

	env_init(&e, 5, true);
	r = run_to_end(&e, "m3");
	o = model(r, REPORT_ALL);
	json_array_foreach(json_object_get(o, "nodes"), i, n)
	{
		if (strcmp(jr_str(n, "status", ""), "rejected"))
			continue;
		rejected++;
		a = json_array_get(json_object_get(o, "attempt_log"), jr_u64(n, "attempt", 0) - 1);
		ck_assert_str_eq(jr_str(a, "outcome", ""), "rejected");
		/* one complaint per try: the first and each retry */
		ck_assert_uint_eq(json_array_size(json_object_get(a, "checks")),
				  e.cfg.verify_retries + 1);
		ck_assert(str_starts(
		    jr_str(json_array_get(json_object_get(a, "checks"), 0), "reason", ""),
		    "plan agent: "));
		ck_assert(str_starts(jr_str(n, "rejected", ""), "plan agent: "));
		ck_assert(str_starts(jr_str(n, "reason", ""), "plan agent: "));
		ck_assert(json_is_null(json_object_get(n, "result")));
		ck_assert_int_ge(
		    jr_i64(json_object_get(json_object_get(o, "verdicts"), "plan"), "rejected", 0),
		    1);
	}
	ck_assert_uint_ge(rejected, 1);
	json_decref(o);
	run_free(r);
	env_release(&e);
}
END_TEST

/* ---- the terminal view ---- */

START_TEST(node_text_is_complete_and_inert)
{
	struct env e;
	struct run *r;
	json_t *o;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	env_init(&e, 4, false);
	r = run_to_end(&e, "m4");
	o = model(r, 1);
	f = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(report_print_node(o, 1, f), 0);
	ck_assert_int_eq(report_print_node(o, 99, f), ST_ENOENT);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(text, "node 1 of run m4"));
	ck_assert_ptr_nonnull(strstr(text, "status: incorrect"));
	ck_assert_ptr_nonnull(strstr(text, "why: output 0 differs"));
	ck_assert_ptr_nonnull(strstr(text, "first bad element: [3, 1]"));
	ck_assert_ptr_nonnull(strstr(text, "trials: 2 of 5 passed"));
	ck_assert_ptr_nonnull(strstr(text, "llm calls of attempt 1"));
	ck_assert_ptr_nonnull(strstr(text, "a1.plan.r0"));
	ck_assert_ptr_nonnull(strstr(text, "instructions:"));
	/* the escape sequence in the message is not passed to the terminal */
	ck_assert_ptr_null(strchr(text, '\033'));
	ck_assert_ptr_nonnull(strstr(text, "?[31m"));
	free(text);
	json_decref(o);
	run_free(r);
	env_release(&e);
}
END_TEST

START_TEST(reason_phrase)
{
	struct tree_node n = {.status = NODE_RUNTIME_ERROR};
	char buf[TREE_REASON_MAX + 1], small[12], fb[600];

	n.feedback = fb;
	strcpy(fb, "\n  forward raised\tRuntimeError\nTraceback ...");
	tree_node_reason(&n, buf, sizeof(buf));
	ck_assert_str_eq(buf, "forward raised RuntimeError");
	fb[0] = '\0';
	tree_node_reason(&n, buf, sizeof(buf));
	ck_assert_str_eq(buf, "runtime_error");
	/* cut on a character boundary, marked */
	memset(fb, 0, sizeof(fb));
	for (int i = 0; i < 100; i++)
		strcat(fb, "\xc3\xa9");
	tree_node_reason(&n, buf, sizeof(buf));
	ck_assert_uint_le(strlen(buf), TREE_REASON_MAX);
	ck_assert(str_starts(buf + strlen(buf) - 3, "..."));
	ck_assert_int_eq((strlen(buf) - 3) % 2, 0);
	tree_node_reason(&n, small, sizeof(small));
	ck_assert_str_eq(small, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9...");
	/* control characters never reach a terminal */
	strcpy(fb, "bad \033[2J\x7f end");
	tree_node_reason(&n, buf, sizeof(buf));
	ck_assert_str_eq(buf, "bad  [2J  end");
	n.status = NODE_CORRECT;
	tree_node_reason(&n, buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	n.status = NODE_PENDING;
	tree_node_reason(&n, buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(text_of_any_bytes)
{
	static const struct {
		const char *in, *out;
		size_t n;
	} cases[] = {
	    {"plain", "plain", 5},
	    {"caf\xc3\xa9", "caf\xc3\xa9", 5},
	    {"a\xff"
	     "b",
	     "a?b", 3},
	    {"\xc3", "?", 1},		     /* cut sequence */
	    {"\xc0\xaf", "??", 2},	     /* overlong '/' */
	    {"\xed\xa0\x80", "???", 3},	     /* a surrogate */
	    {"\xf4\x90\x80\x80", "????", 4}, /* past U+10FFFF */
	    {"x\xf0\x9f\x98\x80y", "x\xf0\x9f\x98\x80y", 6},
	};

	for (size_t i = 0; i < ST_ARRAY_LEN(cases); i++) {
		json_t *s = report__text(cases[i].in, cases[i].n);

		ck_assert_ptr_nonnull(s);
		ck_assert_uint_eq(json_string_length(s), strlen(cases[i].out));
		ck_assert_str_eq(json_string_value(s), cases[i].out);
		json_decref(s);
	}
}
END_TEST

/* ---- the page ---- */

static const char *HOSTILE[] = {
    "</script><script>alert(1)</script>",      "<img src=x onerror=alert(2)>",
    "<!-- <script> & &amp; </SCRIPT >",	       "line\xe2\x80\xa8separator\xe2\x80\xa9paragraph",
    "quote \" backslash \\ nul-free \x01 ctl", "\xf0\x9f\x98\x80 emoji and \xc3\xa9",
};

START_TEST(html_escapes_untrusted_text)
{
	json_t *runs = json_array(), *doc, *back, *nodes = json_array();
	struct dbuf page;
	size_t tlen, i;
	const char *t = report_template(&tlen), *start, *end;
	json_error_t jerr;

	for (i = 0; i < ST_ARRAY_LEN(HOSTILE); i++)
		ck_assert_int_eq(
		    json_array_append_new(
			nodes, json_pack("{s:i, s:s, s:s}", "id", (int)i, "code", HOSTILE[i],
					 "plan", HOSTILE[(i + 1) % ST_ARRAY_LEN(HOSTILE)])),
		    0);
	ck_assert_int_eq(
	    json_array_append_new(runs, json_pack("{s:s, s:o}", "run_id", "x", "nodes", nodes)), 0);
	ck_assert_int_eq(report_doc("<b>title</b>", runs, NULL, &doc), 0);
	dbuf_init(&page, REPORT_HTML_MAX);
	ck_assert_int_eq(report_html(doc, &page), 0);
	/* the data sit between the element's start tag and the first end tag */
	start = strstr(page.p, "<script type=\"application/json\" id=\"stark-data\">");
	ck_assert_ptr_nonnull(start);
	start = strchr(start, '>') + 1;
	end = strstr(start, "</script>");
	ck_assert_ptr_nonnull(end);
	for (const char *p = start; p < end; p++) {
		ck_assert_msg(*p != '<' && *p != '>' && *p != '&', "raw %c in the data", *p);
		ck_assert_msg((unsigned char)*p < 0x80, "raw non-ASCII byte in the data");
	}
	/* what JSON.parse reads back is the document, byte for byte */
	back = json_loadb(start, (size_t)(end - start), 0, &jerr);
	ck_assert_msg(back != NULL, "data do not parse: %s", jerr.text);
	ck_assert(json_equal(back, doc));
	/* the rest is the template, untouched: two scripts, no markup from the data */
	ck_assert_uint_eq(page.len - (size_t)(end - start), tlen - strlen("@STARK_DATA@"));
	ck_assert_int_eq(memcmp(page.p, t, (size_t)(start - page.p)), 0);
	ck_assert_ptr_null(strstr(page.p, "<img"));
	json_decref(back);
	/* the page has a cap, and leaves nothing behind past it */
	dbuf_release(&page);
	dbuf_init(&page, 1000);
	ck_assert_int_eq(report_html(doc, &page), ST_ETOOBIG);
	ck_assert_uint_eq(page.len, 0);
	dbuf_release(&page);
	json_decref(doc);
}
END_TEST

START_TEST(template_has_one_data_slot)
{
	size_t tlen;
	const char *t = report_template(&tlen), *m = strstr(t, "@STARK_DATA@");

	ck_assert_uint_gt(tlen, 1000);
	ck_assert_uint_eq(strlen(t), tlen); /* linked whole, NUL after */
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_null(strstr(m + 1, "@STARK_DATA@"));
	/* the page fetches nothing: no external script, style, font or image */
	ck_assert_ptr_null(strstr(t, "src="));
	ck_assert_ptr_null(strstr(t, "href="));
	ck_assert_ptr_null(strstr(t, "@import"));
	ck_assert_ptr_null(strstr(t, "url("));
	ck_assert_ptr_null(strstr(t, "innerHTML"));
	ck_assert_ptr_null(strstr(t, "outerHTML"));
	ck_assert_ptr_null(strstr(t, "insertAdjacentHTML"));
	ck_assert_ptr_null(strstr(t, "document.write"));
	ck_assert_ptr_nonnull(strstr(t, "Content-Security-Policy"));
}
END_TEST

/* ---- the bench section ---- */

static json_t *fake_run(const char *id, const char *bests)
{
	json_t *log = json_array();

	for (const char *p = bests; *p; p++) {
		json_t *a = json_object();

		json_object_set_new(a, "attempt",
				    json_integer((json_int_t)json_array_size(log) + 1));
		json_object_set_new(a, "best",
				    *p == '-' ? json_null() : json_real((*p - '0') / 2.0));
		json_array_append_new(log, a);
	}
	return json_pack("{s:s, s:o}", "run_id", id, "attempt_log", log);
}

static json_t *record(const char *extra_problem)
{
	json_error_t jerr;
	char text[2048];
	json_t *o;

	snprintf(
	    text, sizeof(text),
	    "{\"kind\":\"bench\",\"bench_id\":\"b1\",\"level\":1,"
	    "\"table\":[{\"level\":1,\"policy\":\"stark\",\"problems\":2,\"success_rate\":1.0,"
	    "\"fast_1\":0.5,\"mean_speedup\":1.2,\"geomean_speedup\":null},"
	    "{\"level\":1,\"policy\":\"sampling\",\"problems\":2,\"success_rate\":0.5,"
	    "\"fast_1\":0,\"mean_speedup\":0.9,\"geomean_speedup\":0.8}],"
	    "\"problems\":[{\"level\":1,\"policy\":\"stark\",\"problem\":\"1_a.py\",\"run_id\":"
	    "\"ra\",\"best_speedup\":2},"
	    "{\"level\":1,\"policy\":\"stark\",\"problem\":\"2_b.py\",\"run_id\":\"rb\"},"
	    "{\"level\":1,\"policy\":\"sampling\",\"problem\":\"1_a.py\",\"run_id\":\"rc\"}%s]}",
	    extra_problem);
	o = json_loads(text, 0, &jerr);
	ck_assert_msg(o != NULL, "%s", jerr.text);
	return o;
}

START_TEST(bench_curves_and_rows)
{
	json_t *runs = json_array(), *rec, *b = NULL, *cv, *pts, *rows;
	char err[256] = "";

	/* bests: '-' none yet, digit d is d/2 (so '4' is 2.0x, '1' is 0.5x) */
	json_array_append_new(runs, fake_run("ra", "-44"));
	json_array_append_new(runs, fake_run("rb", "136"));
	json_array_append_new(runs, fake_run("rc", "1"));
	rec = record(
	    ",{\"level\":1,\"policy\":\"sampling\",\"problem\":\"2_b.py\",\"run_id\":\"gone\"}");
	ck_assert_msg(report_bench_json(rec, runs, &b, err, sizeof(err)) == 0, "%s", err);
	ck_assert_str_eq(jr_str(b, "bench_id", ""), "b1");
	ck_assert_uint_eq(json_array_size(json_object_get(b, "table")), 2);
	rows = json_object_get(b, "problems");
	ck_assert_uint_eq(json_array_size(rows), 4);
	ck_assert(!jr_bool(json_array_get(rows, 0), "missing", true));
	ck_assert(jr_bool(json_array_get(rows, 3), "missing", false));
	ck_assert(json_is_null(json_object_get(json_array_get(rows, 1), "best_speedup")));
	cv = json_object_get(b, "curves");
	ck_assert_uint_eq(json_array_size(cv), 2);
	/* stark: after 1 attempt ra none (1.0), rb 0.5 (kept 1.0) -> 1.0;
	 * after 2: 2.0 and 1.5 -> sqrt(3); after 3: 2.0 and 3.0 -> sqrt(6) */
	ck_assert_str_eq(jr_str(json_array_get(cv, 0), "policy", ""), "stark");
	ck_assert_int_eq(jr_u64(json_array_get(cv, 0), "problems", 0), 2);
	pts = json_object_get(json_array_get(cv, 0), "points");
	ck_assert_uint_eq(json_array_size(pts), 3);
	ck_assert(fabs(json_real_value(json_array_get(json_array_get(pts, 0), 1)) - 1.0) < 1e-12);
	ck_assert(fabs(json_real_value(json_array_get(json_array_get(pts, 1), 1)) - sqrt(3.0)) <
		  1e-12);
	ck_assert(fabs(json_real_value(json_array_get(json_array_get(pts, 2), 1)) - sqrt(6.0)) <
		  1e-12);
	/* sampling: one run found (the missing one is left out), 0.5x kept as 1.0 */
	ck_assert_int_eq(jr_u64(json_array_get(cv, 1), "problems", 0), 1);
	pts = json_object_get(json_array_get(cv, 1), "points");
	ck_assert(fabs(json_real_value(json_array_get(json_array_get(pts, 0), 1)) - 1.0) < 1e-12);
	json_decref(b);
	json_decref(rec);
	json_decref(runs);
}
END_TEST

START_TEST(bench_records_of_the_wrong_shape)
{
	static const struct {
		const char *text, *err;
	} bad[] = {
	    {"[]", "not an object of kind"},
	    {"{\"kind\":\"run\",\"table\":[],\"problems\":[]}", "not an object of kind"},
	    {"{\"kind\":\"bench\",\"problems\":[]}", "table is not an array"},
	    {"{\"kind\":\"bench\",\"table\":[{\"level\":1,\"problems\":1,\"success_rate\":1,\"fast_"
	     "1\":1,"
	     "\"mean_speedup\":1,\"geomean_speedup\":1}],\"problems\":[]}",
	     "table row 1: policy is missing"},
	    {"{\"kind\":\"bench\",\"table\":[{\"level\":1,\"policy\":\"s\",\"problems\":1,"
	     "\"success_rate\":\"high\",\"fast_1\":1,\"mean_speedup\":1,\"geomean_speedup\":1}],"
	     "\"problems\":[]}",
	     "table row 1: success_rate is not a number"},
	    {"{\"kind\":\"bench\",\"table\":[{\"level\":-1,\"policy\":\"s\",\"problems\":1,"
	     "\"success_rate\":1,\"fast_1\":1,\"mean_speedup\":1,\"geomean_speedup\":1}],"
	     "\"problems\":[]}",
	     "table row 1: level is not a count"},
	    {"{\"kind\":\"bench\",\"table\":[],\"problems\":[{\"level\":1,\"policy\":\"s\","
	     "\"problem\":\"p\","
	     "\"run_id\":\"../etc\"}]}",
	     "problems row 1: run_id is not a valid run id"},
	    {"{\"kind\":\"bench\",\"table\":[],\"problems\":[7]}",
	     "problems row 1: row is not an object"},
	};
	json_t *runs = json_array();

	for (size_t i = 0; i < ST_ARRAY_LEN(bad); i++) {
		json_t *rec = json_loads(bad[i].text, 0, NULL), *b = (json_t *)1;
		char err[256] = "";

		ck_assert_ptr_nonnull(rec);
		ck_assert_int_eq(report_bench_json(rec, runs, &b, err, sizeof(err)), ST_EINVAL);
		ck_assert_ptr_null(b);
		ck_assert_msg(strstr(err, bad[i].err), "case %zu: %s", i, err);
		json_decref(rec);
	}
	json_decref(runs);
}
END_TEST

START_TEST(bench_from_the_store)
{
	struct env e;
	struct run *r1, *r2;
	json_t *rec, *doc = NULL, *b;
	const char *ids[] = {"bench-x"}, *two[] = {"ra", "bench-x"}, *none[] = {"nosuch"};
	char err[512] = "", *meta;

	env_init(&e, 3, false);
	r1 = run_to_end(&e, "ra");
	r2 = run_to_end(&e, "rb");
	rec = record("");
	meta = json_dumps(rec, JSON_COMPACT);
	ck_assert_int_eq(store_run_create(e.st, "bench-x", meta, strlen(meta)), 0);
	ck_assert_msg(report_build(e.st, ids, 1, &doc, err, sizeof(err)) == 0, "%s", err);
	ck_assert_str_eq(jr_str(doc, "title", ""), "bench bench-x");
	ck_assert_uint_eq(json_array_size(json_object_get(doc, "runs")), 2); /* rc is not stored */
	b = json_object_get(doc, "bench");
	ck_assert_uint_eq(json_array_size(json_object_get(b, "problems")), 3);
	ck_assert(jr_bool(json_array_get(json_object_get(b, "problems"), 2), "missing", false));
	json_decref(doc);
	ck_assert_int_eq(report_build(e.st, two, 2, &doc, err, sizeof(err)), ST_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "report it alone"));
	ck_assert_int_eq(report_build(e.st, none, 1, &doc, err, sizeof(err)), ST_ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "no such run"));
	free(meta);
	json_decref(rec);
	run_free(r1);
	run_free(r2);
	env_release(&e);
}
END_TEST

static Suite *report_suite(void)
{
	Suite *s = suite_create("report");
	TCase *m = tcase_create("model"), *p = tcase_create("page"), *b = tcase_create("bench");

	tcase_set_timeout(m, 60);
	tcase_add_test(m, run_model_matches_the_run);
	tcase_add_test(m, one_node_detail_and_reload);
	tcase_add_test(m, rejected_nodes_carry_the_anchor_complaints);
	tcase_add_test(m, node_text_is_complete_and_inert);
	tcase_add_test(m, reason_phrase);
	tcase_add_test(m, text_of_any_bytes);
	tcase_add_test(p, html_escapes_untrusted_text);
	tcase_add_test(p, template_has_one_data_slot);
	tcase_add_test(b, bench_curves_and_rows);
	tcase_add_test(b, bench_records_of_the_wrong_shape);
	tcase_set_timeout(b, 60);
	tcase_add_test(b, bench_from_the_store);
	suite_add_tcase(s, m);
	suite_add_tcase(s, p);
	suite_add_tcase(s, b);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(report_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
