/*
 * test_engine.c -- unit tests of engine/: the journal's event layout, the
 * replay providers' matching rules, the files a run reads (templates,
 * configuration), how roles reach their models, and the durability
 * contract of the run files (run.c, agent.c, rebuild.c).
 *
 * The central test is "every prefix": a run is driven to its end with
 * replayed replies and results, then for every N the journal's first N
 * events are copied into a fresh run (what a crash after event N leaves --
 * and more, since real crashes only cut between batches), that run is
 * resumed to its end, and it must end with the same tree, attempts and
 * spend, having asked the LLM only for requests whose response was not in
 * the prefix.  Other tests cover caps, SIGINT, repeated and fatal LLM
 * failures, and the metadata `stark list` reads.
 *
 * Stores live under /dev/shm when it exists (fsync there is cheap).
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine_int.h"

#define PROBLEM                                                                                    \
	"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"                       \
	"    def __init__(self):\n        super().__init__()\n\n"                                  \
	"    def forward(self, x):\n        return x * 2\n\n\n"                                    \
	"def get_inputs():\n    return [torch.rand(4, 4)]\n\n\n"                                   \
	"def get_init_inputs():\n    return []\n"
#define ROOT_HEAD                                                                                  \
	"import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"                    \
	"    def __init__(self):\n        super().__init__()\n\n    def forward(self, x):\n"
#define ROOT_TAIL                                                                                  \
	"\n\ndef get_inputs():\n    return [torch.rand(4, 4)]\n\n\n"                               \
	"def get_init_inputs():\n    return []\n"
#define PLAN_TEXT                                                                                  \
	"Fuse it.\\n\\n```python\\n" ROOT_HEAD_J "<<<IMPROVE BEGIN: one kernel>>>\\n"              \
	"        return x * 2\\n<<<IMPROVE END>>>\\n" ROOT_TAIL_J "```\\n"
#define ROOT_HEAD_J                                                                                \
	"import torch\\nimport torch.nn as nn\\n\\n\\nclass ModelNew(nn.Module):\\n"               \
	"    def __init__(self):\\n        super().__init__()\\n\\n    def forward(self, x):\\n"
#define ROOT_TAIL_J                                                                                \
	"\\n\\ndef get_inputs():\\n    return [torch.rand(4, 4)]\\n\\n\\n"                         \
	"def get_init_inputs():\\n    return []\\n"

static char dir[PATH_MAX];

static void mkstore(void)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	snprintf(dir, sizeof(dir), "%s/stark-test-engine.XXXXXX", base);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	if (!getenv("STARK_PROMPTS"))
		setenv("STARK_PROMPTS", "prompts", 1);
	ck_assert_msg(access("prompts/plan.txt", R_OK) == 0 || getenv("STARK_PROMPTS"),
		      "run from the repository root or set STARK_PROMPTS");
}

static void rmstore(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

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

/* Replies valid for any node: every node holds the root's code. */
static void write_llm_replay(char *path, size_t len)
{
	write_file("llm.jsonl",
		   "{\"key\":\"*\",\"role\":\"plan\",\"text\":\"" PLAN_TEXT
		   "\",\"tokens_in\":100,\"tokens_out\":10}\n"
		   "{\"key\":\"*\",\"role\":\"code\",\"text\":\"" PLAN_TEXT
		   "\",\"tokens_in\":50,\"tokens_out\":20}\n"
		   "{\"key\":\"*\",\"role\":\"debug\",\"text\":\"```python\\n" ROOT_HEAD_J
		   "        return x * 2\\n" ROOT_TAIL_J
		   "```\\n\",\"tokens_in\":70,\"tokens_out\":30}\n",
		   path, len);
}

/* Results by key: a mix of correct (with speedups) and failures. */
static void write_eval_replay(char *path, size_t len)
{
	static char text[64 << 10];
	size_t n = 0;

	for (int i = 1; i <= 200; i++) {
		static const char *const st[] = {"correct", "correct",	 "compile_error",
						 "correct", "incorrect", "runtime_error",
						 "correct"};
		const char *s = st[(i * 5) % 7];

		n += (size_t)snprintf(text + n, sizeof(text) - n,
				      "{\"key\":\"n%d\",\"status\":\"%s\",\"speedup\":%.3f,"
				      "\"message\":\"m%d\",\"log\":\"l%d\"}\n",
				      i, s, 0.5 + (double)((i * 37) % 41) / 10.0, i, i);
	}
	write_file("eval.jsonl", text, path, len);
}

/* ---- a provider wrapper that records what reached the "network" ---- */

struct counting {
	struct llm_provider base;
	struct llm_provider *inner;
	char keys[512][RUN_KEY_MAX];
	size_t n;
	int fail_rc; /* answer every call with this rc (0: pass through) */
	bool fail_fatal;
	const char *fail_param;		   /* the member a fatal failure blames */
	volatile sig_atomic_t *raise_stop; /* set after the first call */
	/* the request of key watch, as it reached the "network" */
	const char *watch;
	size_t watch_nmsgs;
	char *watch_msgs[4];
	enum llm_token_field watch_tf;
	double watch_temp;
};

static int counting_call(struct llm_provider *p, const char *key, const char *role,
			 const struct llm_request *rq, struct llm_reply *out)
{
	struct counting *c = (struct counting *)p;

	if (c->n < 512)
		snprintf(c->keys[c->n++], RUN_KEY_MAX, "%s", key);
	if (c->raise_stop)
		*c->raise_stop = 1;
	if (c->watch && !strcmp(key, c->watch)) {
		c->watch_nmsgs = rq->nmsgs;
		for (size_t i = 0; i < rq->nmsgs && i < 4; i++) {
			free(c->watch_msgs[i]);
			c->watch_msgs[i] = strdup(rq->msgs[i].content);
		}
		c->watch_tf = rq->token_field;
		c->watch_temp = rq->temperature;
	}
	if (c->fail_rc) {
		memset(out, 0, sizeof(*out));
		out->rc = c->fail_rc;
		out->fatal = c->fail_fatal;
		out->http_status = c->fail_fatal ? (c->fail_param ? 400 : 401) : 0;
		snprintf(out->param, sizeof(out->param), "%s", c->fail_param ? c->fail_param : "");
		snprintf(out->error, sizeof(out->error), "injected failure");
		return 0;
	}
	return c->inner->call(c->inner, key, role, rq, out);
}

static void counting_free(struct llm_provider *p)
{
	struct counting *c = (struct counting *)p;

	for (size_t i = 0; i < 4; i++) {
		free(c->watch_msgs[i]);
		c->watch_msgs[i] = NULL;
	}
}

static void counting_init(struct counting *c, struct llm_provider *inner)
{
	memset(c, 0, sizeof(*c));
	c->base.call = counting_call;
	c->base.free = counting_free;
	c->base.name = "counting";
	c->inner = inner;
}

/* ---- helpers to drive runs ---- */

struct env {
	char problem[PATH_MAX], llm[PATH_MAX], eval[PATH_MAX];
	char llm_spec[PATH_MAX + 8], eval_spec[PATH_MAX + 8];
	struct store *st;
	struct llm_provider *replay;
	struct eval_provider *evp;
	struct search_config cfg;
};

static void env_init(struct env *e, uint32_t budget)
{
	char err[512];

	mkstore();
	write_file("problem.py", PROBLEM, e->problem, sizeof(e->problem));
	write_llm_replay(e->llm, sizeof(e->llm));
	write_eval_replay(e->eval, sizeof(e->eval));
	snprintf(e->llm_spec, sizeof(e->llm_spec), "replay:%s", e->llm);
	snprintf(e->eval_spec, sizeof(e->eval_spec), "replay:%s", e->eval);
	ck_assert_int_eq(store_open(dir, &e->st), 0);
	ck_assert_int_eq(llm_provider_replay(e->llm, &e->replay, err, sizeof(err)), 0);
	ck_assert_int_eq(eval_provider_replay(e->eval, &e->evp, err, sizeof(err)), 0);
	search_config_defaults(&e->cfg);
	e->cfg.budget = budget;
	e->cfg.seed = 3;
}

static void env_release(struct env *e)
{
	llm_provider_free(e->replay);
	eval_provider_free(e->evp);
	store_close(e->st);
	rmstore();
}

static struct run *start(struct env *e, const char *id)
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
	int rc = run_create(e->st, &spec, &r, err, sizeof(err));

	ck_assert_msg(rc == 0, "run_create: %s", err);
	return r;
}

static void loop(struct run *r, struct llm_provider *llm, struct eval_provider *ev,
		 volatile sig_atomic_t *stop)
{
	char err[512] = "";

	run_attach(r, llm, ev, stop);
	ck_assert_msg(run_loop(r, err, sizeof(err)) == 0, "run_loop: %s", err);
}

static struct run *load(struct env *e, const char *id, bool lock)
{
	char err[512] = "";
	struct run *r = NULL;
	int rc = run_load(e->st, id, lock, &r, err, sizeof(err));

	ck_assert_msg(rc == 0, "run_load %s: %s", id, err);
	return r;
}

static void same_tree(const struct run *a, const struct run *b)
{
	ck_assert_uint_eq(tree_count(a->tree), tree_count(b->tree));
	ck_assert_uint_eq(a->attempts, b->attempts);
	for (uint32_t i = 0; i < tree_count(a->tree); i++) {
		const struct tree_node *x = tree_node(a->tree, i), *y = tree_node(b->tree, i);

		ck_assert_uint_eq(x->parent, y->parent);
		ck_assert_int_eq(x->origin, y->origin);
		ck_assert_int_eq(x->status, y->status);
		ck_assert(x->speedup == y->speedup);
		ck_assert_str_eq(x->code, y->code);
		ck_assert_str_eq(x->plan, y->plan);
		ck_assert_str_eq(x->feedback, y->feedback);
		ck_assert_uint_eq(a->info[i].attempt, b->info[i].attempt);
	}
	for (int i = 0; i < ROLE_COUNT; i++) {
		ck_assert_uint_eq(a->spend[i].calls, b->spend[i].calls);
		ck_assert_uint_eq(a->spend[i].tokens_in, b->spend[i].tokens_in);
		ck_assert_uint_eq(a->spend[i].tokens_out, b->spend[i].tokens_out);
	}
}

/* ---- journal layout ---- */

START_TEST(journal_layout)
{
	struct jr_batch b;
	json_t *h = json_pack("{s:s}", "k", "v"), *body = json_pack("{s:i}", "x", 7), *ph, *pb;
	const char *blob;
	size_t bn;

	jr_batch_init(&b);
	ck_assert_int_eq(jr_batch_add(&b, JR_STATE, h, NULL, NULL, 0), 0);
	ck_assert_int_eq(jr_batch_add(&b, JR_NODE, h, body, NULL, 0), 0);
	ck_assert_int_eq(jr_batch_add2(&b, JR_NODE, h, NULL, "ab\ncd", 5, "{\"e\"}\n", 6), 0);
	ck_assert_int_eq(jr_batch_add(&b, JR_NODE, h, body, "\n\n", 2), 0);
	/* head only */
	ck_assert_int_eq(jr_parse_head(b.ev[0].data, b.ev[0].len, &ph), 0);
	ck_assert_str_eq(jr_str(ph, "k", ""), "v");
	ck_assert_int_eq(jr_parse_body(b.ev[0].data, b.ev[0].len, &pb), 0);
	ck_assert_ptr_null(pb);
	ck_assert_int_eq(jr_blob(b.ev[0].data, b.ev[0].len, ph, &blob, &bn), 0);
	ck_assert_uint_eq(bn, 0);
	json_decref(ph);
	/* head + body */
	ck_assert_int_eq(jr_parse_body(b.ev[1].data, b.ev[1].len, &pb), 0);
	ck_assert_int_eq(jr_i64(pb, "x", 0), 7);
	json_decref(pb);
	/* head + two-part blob with newlines and JSON-looking bytes */
	ck_assert_int_eq(jr_parse_head(b.ev[2].data, b.ev[2].len, &ph), 0);
	ck_assert_int_eq(jr_parse_body(b.ev[2].data, b.ev[2].len, &pb), 0);
	ck_assert_ptr_null(pb);
	ck_assert_int_eq(jr_blob(b.ev[2].data, b.ev[2].len, ph, &blob, &bn), 0);
	ck_assert_uint_eq(bn, 11);
	ck_assert_int_eq(memcmp(blob, "ab\ncd{\"e\"}\n", 11), 0);
	json_decref(ph);
	/* head + body + blob */
	ck_assert_int_eq(jr_parse_head(b.ev[3].data, b.ev[3].len, &ph), 0);
	ck_assert_int_eq(jr_parse_body(b.ev[3].data, b.ev[3].len, &pb), 0);
	ck_assert_int_eq(jr_i64(pb, "x", 0), 7);
	ck_assert_int_eq(jr_blob(b.ev[3].data, b.ev[3].len, ph, &blob, &bn), 0);
	ck_assert_uint_eq(bn, 2);
	json_decref(pb);
	/* a head claiming more blob than the payload holds is refused */
	json_object_set_new(ph, "blob", json_integer(1000));
	ck_assert_int_eq(jr_blob(b.ev[3].data, b.ev[3].len, ph, &blob, &bn), ST_EPROTO);
	json_decref(ph);
	ck_assert_int_eq(jr_parse_head("not json", 8, &ph), ST_EPROTO);
	jr_batch_release(&b);
	json_decref(h);
	json_decref(body);
}
END_TEST

START_TEST(journal_head_scan)
{
	const char *h = "{\"id\":12,\"s\":\"a\\\"b\",\"nest\":{\"id\":99,\"x\":[1,{\"y\":\"}\"}]},"
			"\"origin\":\"plan\",\"r\":-1.5e3,\"n\":null}\nbody";
	struct jr_field f[] = {{.key = "id"}, {.key = "s"}, {.key = "origin"},
			       {.key = "r"},  {.key = "n"}, {.key = "missing"}};
	char buf[16];
	uint64_t u;
	double d;

	ck_assert_int_eq(jr_head_scan(h, strlen(h), f, 6), 0);
	ck_assert(jr_field_u64(&f[0], &u));
	ck_assert_uint_eq(u, 12); /* the top-level id, not the nested one */
	ck_assert(f[1].escaped);
	ck_assert_uint_eq(jr_field_str(&f[1], buf, sizeof(buf)), 0);
	ck_assert(jr_field_is(&f[2], "plan"));
	ck_assert_uint_gt(jr_field_str(&f[2], buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "plan");
	ck_assert(jr_field_real(&f[3], &d));
	ck_assert(d == -1500.0);
	ck_assert(!jr_field_u64(&f[3], &u));
	ck_assert(jr_field_real(&f[4], &d) && isnan(d));
	ck_assert_ptr_null(f[5].p);
	/* malformed heads are refused, never read past their end */
	static const char *const bad[] = {"",
					  "[1]",
					  "{\"a\":",
					  "{\"a\":1",
					  "{\"a\" 1}",
					  "{\"a\":\"open}",
					  "{\"a\":{\"b\":1}",
					  "{a:1}",
					  "{\"a\":1,}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(jr_head_scan(bad[i], strlen(bad[i]), f, 6) == ST_EPROTO, "%s",
			      bad[i]);
	ck_assert_int_eq(jr_head_scan("{}", 2, f, 6), 0);
}
END_TEST

START_TEST(journal_result_roundtrip)
{
	struct proto_result a, b;
	json_t *h = json_object(), *body = json_object();

	proto_result_init(&a);
	proto_result_init(&b);
	a.status = PROTO_ST_CORRECT;
	a.speedup = 1.2345678901234567;
	a.runtime_us = 0.1;
	a.trials_run = 5;
	a.trials_passed = 5;
	ck_assert_int_eq(proto_result_set_message(&a, "ok %d", 1), 0);
	ck_assert_int_eq(proto_result_add_flag(&a, "fast"), 0);
	ck_assert_int_eq(proto_result_add_env(&a, "gpu", "none"), 0);
	ck_assert_int_eq(jr_result_to_json(&a, h, body), 0);
	ck_assert_int_eq(jr_result_from_json(h, body, &b), 0);
	ck_assert_int_eq(b.status, PROTO_ST_CORRECT);
	ck_assert(b.speedup == a.speedup);
	ck_assert(isnan(b.max_abs_err));
	ck_assert_str_eq(b.message, "ok 1");
	ck_assert_uint_eq(b.nflags, 1);
	ck_assert_str_eq(b.env[0].val, "none");
	proto_result_release(&a);
	proto_result_release(&b);
	json_decref(h);
	json_decref(body);
}
END_TEST

START_TEST(journal_hash)
{
	char a[17], b[17], c[17];

	jr_hash_hex("hello world, hello", 18, a);
	jr_hash_hex("hello world, hello", 18, b);
	jr_hash_hex("hello world, hellp", 18, c);
	ck_assert_str_eq(a, b);
	ck_assert_str_ne(a, c);
	ck_assert_uint_eq(strlen(a), 16);
}
END_TEST

/* ---- replay matching rules ---- */

START_TEST(replay_llm_rules)
{
	struct llm_provider *p;
	struct llm_message m = {"user", "x"};
	struct llm_request rq = {.msgs = &m, .nmsgs = 1};
	struct llm_reply rp;
	char path[PATH_MAX], err[256];

	mkstore();
	write_file("r.jsonl",
		   "{\"key\":\"a1.plan.r0\",\"text\":\"first\",\"tokens_in\":3}\n"
		   "\n"
		   "{\"key\":\"*\",\"role\":\"code\",\"text\":\"any code\"}\n"
		   "{\"key\":\"a1.plan.r0\",\"text\":\"second\"}\n",
		   path, sizeof(path));
	ck_assert_int_eq(llm_provider_replay(path, &p, err, sizeof(err)), 0);
	ck_assert_int_eq(p->call(p, "a1.plan.r0", "plan", &rq, &rp), 0);
	ck_assert_int_eq(rp.rc, 0);
	ck_assert_str_eq(rp.text, "first");
	ck_assert_uint_eq(rp.tokens_in, 3);
	llm_reply_release(&rp);
	ck_assert_int_eq(p->call(p, "a1.plan.r0", "plan", &rq, &rp), 0);
	ck_assert_str_eq(rp.text, "second");
	llm_reply_release(&rp);
	ck_assert_int_eq(p->call(p, "a9.code.r0", "code", &rq, &rp), 0);
	ck_assert_str_eq(rp.text, "any code");
	llm_reply_release(&rp);
	/* exhausted key, no wildcard for the role: fatal, so the run pauses */
	ck_assert_int_eq(p->call(p, "a1.plan.r0", "plan", &rq, &rp), 0);
	ck_assert_int_ne(rp.rc, 0);
	ck_assert(rp.fatal);
	ck_assert_ptr_nonnull(strstr(rp.error, "a1.plan.r0"));
	llm_reply_release(&rp);
	llm_provider_free(p);
	write_file("bad.jsonl", "{\"key\":\"x\",\"text\":1}\n", path, sizeof(path));
	ck_assert_int_eq(llm_provider_replay(path, &p, err, sizeof(err)), ST_EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "line 1"));
	ck_assert_int_eq(llm_provider_replay("/nonexistent/x", &p, err, sizeof(err)), ST_ENOENT);
	rmstore();
}
END_TEST

START_TEST(replay_eval_rules)
{
	struct eval_provider *p;
	struct proto_result rs;
	struct eval_job job = {.key = "n1", .hash = "aaaa"};
	char path[PATH_MAX], err[256];

	mkstore();
	write_file("e.jsonl",
		   "{\"key\":\"n1\",\"hash\":\"bbbb\",\"status\":\"incorrect\"}\n"
		   "{\"key\":\"n7\",\"hash\":\"aaaa\",\"status\":\"correct\",\"speedup\":2.5}\n"
		   "{\"key\":\"n2\",\"status\":\"compile_error\",\"log\":\"boom\"}\n"
		   "{\"key\":\"*\",\"status\":\"timeout\"}\n",
		   path, sizeof(path));
	ck_assert_int_eq(eval_provider_replay(path, &p, err, sizeof(err)), 0);
	/* n1 is recorded for other code: the code's own result wins */
	proto_result_init(&rs);
	ck_assert_int_eq(p->eval(p, &job, &rs), 0);
	ck_assert_int_eq(rs.status, PROTO_ST_CORRECT);
	ck_assert(rs.speedup == 2.5);
	ck_assert_str_eq(rs.id, "n1");
	proto_result_release(&rs);
	/* a key without a hash matches any code */
	job.key = "n2";
	proto_result_init(&rs);
	ck_assert_int_eq(p->eval(p, &job, &rs), 0);
	ck_assert_int_eq(rs.status, PROTO_ST_COMPILE_ERROR);
	ck_assert_str_eq(rs.log, "boom");
	proto_result_release(&rs);
	/* nothing else: the wildcard */
	job.key = "n3";
	job.hash = "cccc";
	proto_result_init(&rs);
	ck_assert_int_eq(p->eval(p, &job, &rs), 0);
	ck_assert_int_eq(rs.status, PROTO_ST_TIMEOUT);
	proto_result_release(&rs);
	eval_provider_free(p);
	rmstore();
}
END_TEST

/* ---- inputs: templates and configuration files ---- */

START_TEST(prompts_load)
{
	struct prompt_set p;
	char path[PATH_MAX], err[256];

	mkstore();
	ck_assert_msg(run_prompts_load("prompts", "fast", &p, err, sizeof(err)) == 0, "%s", err);
	for (int i = 0; i < PROMPT_COUNT; i++)
		ck_assert_ptr_nonnull(p.text[i]);
	ck_assert_ptr_nonnull(strstr(p.text[PROMPT_FORMAT], "stark_cuda"));
	ck_assert_ptr_nonnull(strstr(p.text[PROMPT_PLAN], "CUDA"));
	prompt_release(&p);
	/* the Triton format: its own format document, and its own variants of
	 * the prompts that speak of the kernel language (plan_triton.txt, ...);
	 * the others (code.txt) shared */
	ck_assert_msg(run_prompts_load("prompts", "triton", &p, err, sizeof(err)) == 0, "%s", err);
	ck_assert_ptr_nonnull(strstr(p.text[PROMPT_FORMAT], "@triton.jit"));
	for (int i = 0; i < PROMPT_COUNT; i++) {
		ck_assert_ptr_nonnull(p.text[i]);
		if (i != PROMPT_RETRY)
			ck_assert_msg(!strstr(p.text[i], "CUDA kernel") && !strstr(p.text[i], "CUDA source"),
				      "prompt %d speaks of CUDA", i);
	}
	ck_assert_ptr_nonnull(strstr(p.text[PROMPT_PLAN], "@triton.jit"));
	ck_assert_ptr_nonnull(strstr(p.text[PROMPT_DEBUG], "tl.load"));
	ck_assert_ptr_nonnull(strstr(p.text[PROMPT_SYSTEM], "Triton kernels"));
	ck_assert_ptr_nonnull(strstr(p.text[PROMPT_SAMPLE], "Triton"));
	prompt_release(&p);
	ck_assert_int_ne(run_prompts_load("/nonexistent-dir", "kernelbench", &p, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent-dir/system.txt"));
	ck_assert_ptr_null(p.text[0]);
	ck_assert_int_eq(run_prompts_load("prompts", "cuda", &p, err, sizeof(err)), ST_EINVAL);
	ck_assert_str_eq(err, "unknown candidate format 'cuda'");
	/* a folder with some templates: the first missing one is named, and
	 * what was read is freed */
	write_file("system.txt", "", path, sizeof(path));
	ck_assert_int_ne(run_prompts_load(dir, "fast", &p, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "plan.txt"), "%s", err);
	ck_assert_ptr_null(p.text[0]);
	/* a format's variant is used where it exists, the base elsewhere */
	{
		static const char *const names[] = {"plan.txt", "code.txt", "debug.txt", "sample.txt",
						    "reflect.txt", "format_triton.txt",
						    "format_kernelbench.txt"};

		for (size_t i = 0; i < ST_ARRAY_LEN(names); i++)
			write_file(names[i], names[i], path, sizeof(path));
		write_file("plan_triton.txt", "triton plan", path, sizeof(path));
		ck_assert_msg(run_prompts_load(dir, "triton", &p, err, sizeof(err)) == 0, "%s", err);
		ck_assert_str_eq(p.text[PROMPT_PLAN], "triton plan");
		ck_assert_str_eq(p.text[PROMPT_DEBUG], "debug.txt");
		ck_assert_str_eq(p.text[PROMPT_FORMAT], "format_triton.txt");
		prompt_release(&p);
		ck_assert_msg(run_prompts_load(dir, "kernelbench", &p, err, sizeof(err)) == 0, "%s", err);
		ck_assert_str_eq(p.text[PROMPT_PLAN], "plan.txt");
		prompt_release(&p);
	}
	rmstore();
}
END_TEST

START_TEST(config_file)
{
	struct search_config c;
	char path[PATH_MAX], err[256];

	mkstore();
	search_config_defaults(&c);
	ck_assert_int_ne(run_config_load_file(&c, "/nonexistent.cfg", err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "/nonexistent.cfg: cannot read config"), "%s", err);
	write_file("a.cfg", "budget = 7\nepsilon = 0.5 # explore more\n", path, sizeof(path));
	ck_assert_msg(run_config_load_file(&c, path, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(c.budget, 7);
	ck_assert(c.epsilon == 0.5);
	write_file("b.cfg", "budget = 9\nepsilon2 = 1\n", path, sizeof(path));
	ck_assert_int_ne(run_config_load_file(&c, path, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "b.cfg:2:"), "%s", err);
	ck_assert_uint_eq(c.budget, 7); /* all or nothing */
	rmstore();
}
END_TEST

/* ---- the run driver ---- */

START_TEST(run_finishes_and_reloads)
{
	struct env e;
	struct run *r, *l;
	struct dbuf meta;
	json_t *m;

	env_init(&e, 12);
	r = start(&e, "r1");
	loop(r, e.replay, e.evp, NULL);
	ck_assert_int_eq(r->state, RUN_FINISHED);
	ck_assert_uint_eq(r->attempts, 12);
	ck_assert_uint_eq(tree_count(r->tree), 13);
	ck_assert_ptr_nonnull(strstr(r->reason, "budget"));
	ck_assert_uint_ne(run_best(r), TREE_NONE);
	l = load(&e, "r1", false);
	same_tree(r, l);
	ck_assert_int_eq(l->state, RUN_FINISHED);
	ck_assert(!l->cur.open);
	/* the metadata `stark list` reads */
	dbuf_init(&meta, 1 << 20);
	ck_assert_int_eq(store_run_meta_get(e.st, "r1", &meta), 0);
	m = json_loads(dbuf_str(&meta), 0, NULL);
	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(jr_str(m, "state", ""), "finished");
	ck_assert_int_eq(jr_u64(m, "attempts", 0), 12);
	json_decref(m);
	dbuf_release(&meta);
	/* a second lock on the run is refused while one is held */
	{
		struct run *a = NULL, *b = NULL;
		char err[256];

		ck_assert_int_eq(run_load(e.st, "r1", true, &b, err, sizeof(err)), ST_EBUSY);
		store_unlock_run(r->lock);
		r->lock = NULL;
		ck_assert_int_eq(run_load(e.st, "r1", true, &a, err, sizeof(err)), 0);
		ck_assert_int_eq(run_load(e.st, "r1", true, &b, err, sizeof(err)), ST_EBUSY);
		run_free(a);
	}
	run_free(l);
	run_free(r);
	env_release(&e);
}
END_TEST

struct prefix_ctx {
	struct store *st;
	const char *dst;
	uint64_t n;
	struct store_event *ev;
	char **data;
	size_t count;
};

static int collect_cb(void *arg, const struct store_event *ev)
{
	struct prefix_ctx *c = arg;

	if (c->count >= c->n)
		return 1;
	c->data[c->count] = malloc(ev->len ? ev->len : 1);
	ck_assert_ptr_nonnull(c->data[c->count]);
	memcpy(c->data[c->count], ev->data, ev->len);
	c->ev[c->count] =
	    (struct store_event){.type = ev->type, .data = c->data[c->count], .len = ev->len};
	c->count++;
	return 0;
}

/* Copies the first n events of run src into a new run dst. */
static void copy_prefix(struct store *st, const char *src, const char *dst, uint64_t n)
{
	struct prefix_ctx c = {.st = st, .dst = dst, .n = n};

	c.ev = calloc(n, sizeof(*c.ev));
	c.data = calloc(n, sizeof(*c.data));
	ck_assert_int_ge(store_scan(st, src, 1, collect_cb, &c), 0);
	ck_assert_uint_eq(c.count, n);
	ck_assert_int_eq(store_run_create(st, dst, "{}", 2), 0);
	ck_assert_int_eq(store_append(st, dst, c.ev, c.count), 0);
	for (size_t i = 0; i < c.count; i++)
		free(c.data[i]);
	free(c.data);
	free(c.ev);
}

struct answered_ctx {
	char keys[512][RUN_KEY_MAX];
	size_t n;
};

static int answered_cb(void *arg, const struct store_event *ev)
{
	struct answered_ctx *a = arg;
	json_t *h;

	if (ev->type != JR_LLM_RESPONSE)
		return 0;
	ck_assert_int_eq(jr_parse_head(ev->data, ev->len, &h), 0);
	if (!jr_bool(h, "fatal", false) && a->n < 512)
		snprintf(a->keys[a->n++], RUN_KEY_MAX, "%s", jr_str(h, "key", ""));
	json_decref(h);
	return 0;
}

START_TEST(resume_from_every_prefix)
{
	struct env e;
	struct run *ref, *r;
	uint64_t total = 0;
	char id[32];

	env_init(&e, 10);
	ref = start(&e, "ref");
	loop(ref, e.replay, e.evp, NULL);
	ck_assert_int_eq(ref->state, RUN_FINISHED);
	ck_assert_int_eq(store_last_seq(e.st, "ref", &total), 0);
	ck_assert_uint_gt(total, 40);
	fprintf(stderr, "# every prefix: %llu events\n", (unsigned long long)total);
	for (uint64_t n = 1; n < total; n++) {
		struct counting c;
		struct answered_ctx ans = {.n = 0};

		snprintf(id, sizeof(id), "p%llu", (unsigned long long)n);
		copy_prefix(e.st, "ref", id, n);
		ck_assert_int_ge(store_scan(e.st, id, 1, answered_cb, &ans), 0);
		counting_init(&c, e.replay);
		r = load(&e, id, true);
		loop(r, &c.base, e.evp, NULL);
		ck_assert_msg(r->state == RUN_FINISHED, "prefix %llu: state %s (%s)",
			      (unsigned long long)n, run_state_name(r->state), r->reason);
		same_tree(ref, r);
		/* nothing answered in the prefix went to the LLM again */
		for (size_t i = 0; i < c.n; i++)
			for (size_t j = 0; j < ans.n; j++)
				ck_assert_msg(strcmp(c.keys[i], ans.keys[j]) != 0,
					      "prefix %llu: %s asked again", (unsigned long long)n,
					      c.keys[i]);
		run_free(r);
	}
	run_free(ref);
	env_release(&e);
}
END_TEST

START_TEST(stop_flag_interrupts)
{
	struct env e;
	struct counting c;
	struct run *r, *ref;
	volatile sig_atomic_t stop = 0;

	env_init(&e, 6);
	ref = start(&e, "ref");
	loop(ref, e.replay, e.evp, NULL);
	r = start(&e, "sig");
	counting_init(&c, e.replay);
	c.raise_stop = &stop;
	loop(r, &c.base, e.evp, &stop);
	ck_assert_int_eq(r->state, RUN_INTERRUPTED);
	ck_assert_ptr_nonnull(strstr(r->reason, "signal"));
	run_free(r);
	r = load(&e, "sig", true);
	ck_assert_int_eq(r->state, RUN_INTERRUPTED);
	stop = 0;
	loop(r, e.replay, e.evp, &stop);
	ck_assert_int_eq(r->state, RUN_FINISHED);
	/* the tree is the uninterrupted one (the run ids differ, nothing else) */
	same_tree(ref, r);
	run_free(r);
	run_free(ref);
	env_release(&e);
}
END_TEST

START_TEST(caps_stop_before_the_call)
{
	struct env e;
	struct run *r;
	struct run_spend t;

	env_init(&e, 30);
	/* an attempt costs 180 tokens; a call is estimated at its prompt + 100 */
	e.cfg.max_total_tokens = 3000;
	e.cfg.max_tokens[ROLE_PLAN] = 100;
	e.cfg.max_tokens[ROLE_CODE] = 100;
	e.cfg.max_tokens[ROLE_DEBUG] = 100;
	r = start(&e, "cap");
	loop(r, e.replay, e.evp, NULL);
	ck_assert_int_eq(r->state, RUN_FINISHED);
	ck_assert_msg(strstr(r->reason, "token cap") != NULL, "%s", r->reason);
	t = run_spend_total(r);
	ck_assert_uint_le(t.tokens_in + t.tokens_out, 3000);
	ck_assert_uint_gt(r->attempts, 0);
	ck_assert_uint_lt(r->attempts, 30);
	run_free(r);
	env_release(&e);
}
END_TEST

START_TEST(llm_failures_pause)
{
	struct env e;
	struct counting c;
	struct run *r;

	env_init(&e, 10);
	/* transient failures (retries exhausted): attempts fail, then a pause */
	r = start(&e, "flaky");
	counting_init(&c, e.replay);
	c.fail_rc = ST_ETIMEDOUT;
	loop(r, &c.base, e.evp, NULL);
	ck_assert_int_eq(r->state, RUN_INTERRUPTED);
	ck_assert_uint_eq(r->attempts, RUN_LLM_ERRORS_PAUSE);
	ck_assert_ptr_nonnull(strstr(r->reason, "in a row"));
	run_free(r);
	/* a fatal error pauses at once; resume sends the same request again */
	r = start(&e, "fatal");
	counting_init(&c, e.replay);
	c.fail_rc = ST_EHTTP;
	c.fail_fatal = true;
	loop(r, &c.base, e.evp, NULL);
	ck_assert_int_eq(r->state, RUN_INTERRUPTED);
	ck_assert_uint_eq(c.n, 1);
	ck_assert_str_eq(c.keys[0], "a1.plan.r0");
	ck_assert_ptr_nonnull(strstr(r->reason, "a1.plan.r0"));
	run_free(r);
	r = load(&e, "fatal", true);
	ck_assert(r->cur.open);
	counting_init(&c, e.replay);
	loop(r, &c.base, e.evp, NULL);
	ck_assert_int_eq(r->state, RUN_FINISHED);
	ck_assert_str_eq(c.keys[0], "a1.plan.r0");
	run_free(r);
	env_release(&e);
}
END_TEST

/* An evaluator that cannot do node 2's evaluation the first time. */
struct failing_eval {
	struct eval_provider base;
	struct eval_provider *inner;
	unsigned fails;
};

static int failing_eval_call(struct eval_provider *p, const struct eval_job *job,
			     struct proto_result *out)
{
	struct failing_eval *f = (struct failing_eval *)p;

	if (strcmp(job->key, "n2") || f->fails == 0)
		return f->inner->eval(f->inner, job, out);
	f->fails--;
	out->id = str_dup(job->key);
	out->status = PROTO_ST_ERROR;
	ck_assert_int_eq(proto_result_set_message(out, "this machine lacks ninja: apt-get install ninja-build"), 0);
	ck_assert_int_eq(proto_result_set_log(out, "Ninja is required", 17), 0);
	return 0;
}

/* An evaluation that ends in `error` is not the candidate's outcome: the
 * run pauses, the node keeps no result, and resume evaluates it again. */
START_TEST(eval_error_pauses)
{
	struct env e;
	struct failing_eval f = {.base = {.eval = failing_eval_call, .name = "failing"}, .fails = 1};
	struct run *r;

	env_init(&e, 6);
	f.inner = e.evp;
	r = start(&e, "broken");
	loop(r, e.replay, &f.base, NULL);
	ck_assert_int_eq(r->state, RUN_INTERRUPTED);
	ck_assert_msg(strstr(r->reason, "node 2 could not be done") && strstr(r->reason, "ninja-build"),
		      "%s", r->reason);
	ck_assert_uint_eq(r->attempts, 1);
	ck_assert_int_eq(tree_node(r->tree, 2)->status, NODE_PENDING);
	ck_assert_int_eq(r->info[2].verdict, -1);
	run_free(r);
	/* the journal says the same after a reload, and resume sends it again */
	r = load(&e, "broken", true);
	ck_assert(r->cur.open && r->cur.eval_requested && !r->cur.eval_done);
	ck_assert_int_eq(tree_node(r->tree, 2)->status, NODE_PENDING);
	loop(r, e.replay, &f.base, NULL);
	ck_assert_int_eq(r->state, RUN_FINISHED);
	ck_assert_int_ne(tree_node(r->tree, 2)->status, NODE_PENDING);
	ck_assert_int_ne(tree_node(r->tree, 2)->status, NODE_ERROR);
	ck_assert_uint_eq(r->attempts, 6);
	run_free(r);
	env_release(&e);
}
END_TEST

START_TEST(create_refuses_taken_id)
{
	struct env e;
	struct run_spec spec;
	struct run *r, *r2 = NULL;
	char err[512];

	env_init(&e, 2);
	r = start(&e, "dup");
	loop(r, e.replay, e.evp, NULL);
	spec = (struct run_spec){.run_id = "dup",
				 .problem_path = e.problem,
				 .llm = e.llm_spec,
				 .device = "cpu",
				 .eval = e.eval_spec,
				 .format = "kernelbench",
				 .cfg = &e.cfg};
	run_free(r);
	ck_assert_int_eq(run_create(e.st, &spec, &r2, err, sizeof(err)), ST_EEXIST);
	ck_assert_ptr_nonnull(strstr(err, "already exists"));
	/* a record without a journal (killed while created) is taken over */
	ck_assert_int_eq(store_run_create(e.st, "half", "{}", 2), 0);
	spec.run_id = "half";
	ck_assert_int_eq(run_load(e.st, "half", false, &r2, err, sizeof(err)), ST_ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "never started"));
	ck_assert_int_eq(run_create(e.st, &spec, &r2, err, sizeof(err)), 0);
	run_free(r2);
	spec.run_id = "bad/id";
	ck_assert_int_eq(run_create(e.st, &spec, &r2, err, sizeof(err)), ST_EINVAL);
	env_release(&e);
}
END_TEST

/* ---- grounding slips, retries with complaints, model settings ---------- */

/* A plan that edits a line outside its anchor: rejected, the retry says why. */
#define BAD_PLAN_TEXT                                                                              \
	"```python\\nimport torch as T\\nimport torch.nn as nn\\n\\n\\nclass "                     \
	"ModelNew(nn.Module):\\n"                                                                  \
	"    def __init__(self):\\n        super().__init__()\\n\\n    def forward(self, x):\\n"   \
	"<<<IMPROVE BEGIN: one kernel>>>\\n        return x * 2\\n<<<IMPROVE "                     \
	"END>>>\\n" ROOT_TAIL_J "```\\n"
/* The same plan as PLAN_TEXT with two extra blank lines outside the anchor: accepted. */
#define SLIP_PLAN_TEXT                                                                             \
	"```py\\n" ROOT_HEAD_J "<<<IMPROVE BEGIN: one kernel>>>\\n        return x * 2\\n"         \
	"<<<IMPROVE END>>>\\n\\n\\n" ROOT_TAIL_J "```\\nThat is all.\\n"

/* Replies: attempt 1's plan is rejected once, attempt 2's plan has harmless slips. */
static void write_retry_replay(struct env *e)
{
	char err[256];

	llm_provider_free(e->replay);
	write_file("retry.jsonl",
		   "{\"key\":\"a1.plan.r0\",\"text\":\"" BAD_PLAN_TEXT "\",\"tokens_in\":90,"
		   "\"tokens_out\":40}\n"
		   "{\"key\":\"a2.plan.r0\",\"text\":\"" SLIP_PLAN_TEXT "\",\"tokens_in\":90,"
		   "\"tokens_out\":40}\n"
		   "{\"key\":\"*\",\"role\":\"plan\",\"text\":\"" PLAN_TEXT
		   "\",\"tokens_in\":100,\"tokens_out\":10,\"tokens_reasoning\":4}\n"
		   "{\"key\":\"*\",\"role\":\"code\",\"text\":\"" PLAN_TEXT
		   "\",\"tokens_in\":50,\"tokens_out\":20}\n"
		   "{\"key\":\"*\",\"role\":\"debug\",\"text\":\"```python\\n" ROOT_HEAD_J
		   "        return x * 2\\n" ROOT_TAIL_J
		   "```\\n\",\"tokens_in\":70,\"tokens_out\":30}\n",
		   e->llm, sizeof(e->llm));
	snprintf(e->llm_spec, sizeof(e->llm_spec), "replay:%s", e->llm);
	ck_assert_int_eq(llm_provider_replay(e->llm, &e->replay, err, sizeof(err)), 0);
}

/* The requests of a run: key -> hash of its messages and their layout. */
struct requests {
	char key[128][RUN_KEY_MAX];
	char sig[128][96];
	size_t n;
};

static int requests_cb(void *arg, const struct store_event *ev)
{
	struct requests *q = arg;
	json_t *h, *t;
	size_t i;
	char *turns;

	if (ev->type != JR_LLM_REQUEST)
		return 0;
	ck_assert_int_eq(jr_parse_head(ev->data, ev->len, &h), 0);
	for (i = 0; i < q->n && strcmp(q->key[i], jr_str(h, "key", "")); i++)
		;
	ck_assert_uint_lt(i, 128);
	t = json_object_get(h, "turns");
	turns = t ? json_dumps(t, JSON_COMPACT) : NULL;
	snprintf(q->key[i], RUN_KEY_MAX, "%s", jr_str(h, "key", ""));
	snprintf(q->sig[i], sizeof(q->sig[i]), "%s/%llu/%s", jr_str(h, "hash", ""),
		 (unsigned long long)jr_u64(h, "system_len", 0), turns ? turns : "-");
	free(turns);
	if (i == q->n)
		q->n++;
	json_decref(h);
	return 0;
}

START_TEST(retry_carries_complaint)
{
	struct env e;
	struct counting c;
	struct requests ref = {.n = 0};
	struct run *r;
	uint64_t total = 0;

	env_init(&e, 3);
	write_retry_replay(&e);
	r = start(&e, "retry");
	counting_init(&c, e.replay);
	c.watch = "a1.plan.r1";
	loop(r, &c.base, e.evp, NULL);
	ck_assert_int_eq(r->state, RUN_FINISHED);
	ck_assert_str_eq(c.keys[0], "a1.plan.r0");
	ck_assert_str_eq(c.keys[1], "a1.plan.r1");
	ck_assert_str_eq(c.keys[2], "a1.code.r0");
	/* the retry is a conversation: the rejected answer, then the complaint */
	ck_assert_uint_eq(c.watch_nmsgs, 4);
	ck_assert_ptr_nonnull(strstr(c.watch_msgs[2], "import torch as T"));
	ck_assert_ptr_nonnull(strstr(c.watch_msgs[3], "rejected by a mechanical check"));
	ck_assert_msg(strstr(c.watch_msgs[3], "plan changes the node's code near line 1: the code "
					      "has `import torch`, the plan `import torch as T`"),
		      "%s", c.watch_msgs[3]);
	counting_free(&c.base);
	/* attempt 2's plan, two blank lines off, was taken at once */
	ck_assert_str_eq(c.keys[3], "a2.plan.r0");
	ck_assert_str_eq(c.keys[4], "a2.code.r0");
	/* the complaint is journaled and kept with attempt 1's node */
	ck_assert_uint_eq(r->nchecks, 1);
	ck_assert_uint_eq(r->checks[0].attempt, 1);
	ck_assert_str_eq(r->checks[0].key, "a1.plan.r0");
	ck_assert_ptr_nonnull(strstr(r->checks[0].reason, "plan agent: plan changes"));
	ck_assert_int_ge(store_scan(e.st, "retry", 1, requests_cb, &ref), 0);
	ck_assert_str_eq(ref.key[1], "a1.plan.r1");
	ck_assert_ptr_nonnull(strstr(ref.sig[1], "/["));	    /* three turns */
	ck_assert_int_ne(strncmp(ref.sig[0], ref.sig[1], 16), 0);   /* another request */
	ck_assert_uint_eq(r->spend[ROLE_PLAN].tokens_reasoning, 8); /* a1.r1 and a3 */
	run_free(r);
	r = load(&e, "retry", false);
	ck_assert_uint_eq(r->nchecks, 1);
	ck_assert_uint_eq(r->spend[ROLE_PLAN].tokens_reasoning, 8);
	run_free(r);
	/* resumed from every prefix: the same requests, the retry rebuilt byte for byte */
	ck_assert_int_eq(store_last_seq(e.st, "retry", &total), 0);
	for (uint64_t n = 1; n < total; n++) {
		struct answered_ctx ans = {.n = 0};
		struct requests got = {.n = 0};
		char id[32];

		snprintf(id, sizeof(id), "q%llu", (unsigned long long)n);
		copy_prefix(e.st, "retry", id, n);
		ck_assert_int_ge(store_scan(e.st, id, 1, answered_cb, &ans), 0);
		write_retry_replay(&e);
		counting_init(&c, e.replay);
		r = load(&e, id, true);
		loop(r, &c.base, e.evp, NULL);
		ck_assert_msg(r->state == RUN_FINISHED, "prefix %llu: %s", (unsigned long long)n,
			      r->reason);
		ck_assert_int_ge(store_scan(e.st, id, 1, requests_cb, &got), 0);
		ck_assert_uint_eq(got.n, ref.n);
		for (size_t i = 0; i < ref.n; i++) {
			ck_assert_str_eq(got.key[i], ref.key[i]);
			ck_assert_msg(!strcmp(got.sig[i], ref.sig[i]), "prefix %llu: %s differs",
				      (unsigned long long)n, ref.key[i]);
		}
		for (size_t i = 0; i < c.n; i++)
			for (size_t j = 0; j < ans.n; j++)
				ck_assert_msg(strcmp(c.keys[i], ans.keys[j]) != 0,
					      "prefix %llu: %s asked again", (unsigned long long)n,
					      c.keys[i]);
		ck_assert_uint_eq(r->nchecks, 1);
		run_free(r);
	}
	env_release(&e);
}
END_TEST

START_TEST(settings_change_on_resume)
{
	struct env e;
	struct counting c;
	struct run_spec spec;
	struct search_config cfg;
	struct requests q = {.n = 0};
	struct run *r;
	char err[512], *changed = NULL;

	env_init(&e, 2);
	spec = (struct run_spec){.run_id = "o3",
				 .problem_path = e.problem,
				 .llm = "openai:https://api.openai.com/v1",
				 .model = "o3",
				 .device = "cpu",
				 .eval = e.eval_spec,
				 .format = "kernelbench",
				 .cfg = &e.cfg};
	ck_assert_int_eq(run_create(e.st, &spec, &r, err, sizeof(err)), 0);
	/* the server refuses max_tokens at the first call: paused, the setting named */
	counting_init(&c, e.replay);
	c.fail_rc = ST_EHTTP;
	c.fail_fatal = true;
	c.fail_param = "max_tokens";
	loop(r, &c.base, e.evp, NULL);
	ck_assert_int_eq(r->state, RUN_INTERRUPTED);
	ck_assert_uint_eq(c.n, 1);
	ck_assert_msg(strstr(r->reason, "refused 'max_tokens' (role plan, model o3): set "
					"token_field.plan = max_completion_tokens, then `stark "
					"resume o3 --set KEY=VALUE`"),
		      "%s", r->reason);
	run_free(r);
	/* resume changes how the plan role is asked, nothing else */
	r = load(&e, "o3", true);
	cfg = r->cfg;
	cfg.epsilon = 0.5;
	ck_assert_int_eq(run_config_change(r, &cfg, NULL, err, sizeof(err)), ST_EINVAL);
	ck_assert_msg(strstr(err, "'epsilon' is fixed"), "%s", err);
	cfg = r->cfg;
	ck_assert_int_eq(run_config_change(r, &cfg, NULL, err, sizeof(err)), ST_EINVAL);
	ck_assert_msg(strstr(err, "change nothing"), "%s", err);
	ck_assert_int_eq(
	    search_config_set(&cfg, "token_field.plan", "max_completion_tokens", err, sizeof(err)),
	    0);
	ck_assert_int_eq(search_config_set(&cfg, "temperature.plan", "none", err, sizeof(err)), 0);
	ck_assert_int_eq(run_config_change(r, &cfg, &changed, err, sizeof(err)), 0);
	ck_assert_str_eq(changed,
			 "temperature.plan = none; token_field.plan = max_completion_tokens");
	free(changed);
	run_free(r);
	r = load(&e, "o3", true);
	ck_assert_int_eq(r->cfg.token_field[ROLE_PLAN], TOKEN_FIELD_MAX_COMPLETION);
	ck_assert(r->cfg.temperature[ROLE_PLAN] == TEMPERATURE_NONE);
	ck_assert(r->cfg.epsilon == e.cfg.epsilon);
	counting_init(&c, e.replay);
	c.watch = "a1.plan.r0";
	loop(r, &c.base, e.evp, NULL);
	ck_assert_int_eq(r->state, RUN_FINISHED);
	/* the request went again, with the new settings, and is journaled with them */
	ck_assert_str_eq(c.keys[0], "a1.plan.r0");
	ck_assert_int_eq(c.watch_tf, LLM_TOKENS_MAX_COMPLETION);
	ck_assert(c.watch_temp < 0);
	counting_free(&c.base);
	run_free(r);
	{
		struct store_event last = {0};
		json_t *h = NULL;
		uint64_t seq = 0, n = 0;
		struct dbuf b;

		dbuf_init(&b, STORE_EVENT_MAX);
		ck_assert_int_ge(store_scan(e.st, "o3", 1, requests_cb, &q), 0);
		ck_assert_str_eq(q.key[0], "a1.plan.r0");
		/* count the journaled requests of a1.plan.r0: the first, and the one re-sent */
		ck_assert_int_eq(store_last_seq(e.st, "o3", &seq), 0);
		for (uint64_t i = 1; i <= seq; i++) {
			if (jr_read(e.st, "o3", i, JR_LLM_REQUEST, &h, NULL, &b))
				continue;
			if (!strcmp(jr_str(h, "key", ""), "a1.plan.r0")) {
				n++;
				if (n == 2) {
					ck_assert_str_eq(jr_str(h, "token_field", ""),
							 "max_completion_tokens");
					ck_assert(json_is_null(json_object_get(h, "temperature")));
				}
			}
			json_decref(h);
			h = NULL;
		}
		ck_assert_uint_eq(n, 2);
		(void)last;
		dbuf_release(&b);
	}
	env_release(&e);
}
END_TEST

START_TEST(route_rules)
{
	struct search_config c;
	struct llm_request rq = {0};
	struct route rt;
	char err[512], fix[200];
	double pin, pout;

	search_config_defaults(&c);
	/* the run's --llm and --model, or a role's own */
	ck_assert_int_eq(route_check(&c, "", "m", err, sizeof(err)), ST_EINVAL);
	ck_assert_str_eq(err, "role plan has no llm: pass --llm or set llm.plan");
	ck_assert_int_eq(route_check(&c, "openai:http://h/v1", "", err, sizeof(err)), ST_EINVAL);
	ck_assert_str_eq(err, "role plan has no model: pass --model or set model.plan");
	ck_assert_int_eq(route_check(&c, "openai:http://h/v1", "m", err, sizeof(err)), 0);
	ck_assert_int_eq(search_config_set(&c, "llm.debug",
					   "anthropic:https://api.anthropic.com/v1", err,
					   sizeof(err)),
			 0);
	ck_assert_int_eq(route_of(&c, "openai:http://h/v1", "m", ROLE_DEBUG, &rt, err, sizeof(err)),
			 0);
	ck_assert_int_eq(rt.api, LLM_ANTHROPIC);
	ck_assert_str_eq(rt.base_url, "https://api.anthropic.com/v1");
	ck_assert_str_eq(rt.model, "m");
	/* what Anthropic cannot take with thinking, caught before anything is spent */
	ck_assert_int_eq(search_config_set(&c, "thinking.debug", "8000", err, sizeof(err)), 0);
	ck_assert_int_eq(route_check(&c, "openai:http://h/v1", "m", err, sizeof(err)), ST_EINVAL);
	ck_assert_msg(strstr(err, "temperature.debug = 0.1 with thinking.debug on") &&
			  strstr(err, "set temperature.debug = none"),
		      "%s", err);
	ck_assert_int_eq(search_config_set(&c, "temperature.debug", "none", err, sizeof(err)), 0);
	ck_assert_int_eq(search_config_set(&c, "max_tokens.debug", "8000", err, sizeof(err)), 0);
	ck_assert_int_eq(route_check(&c, "openai:http://h/v1", "m", err, sizeof(err)), ST_EINVAL);
	ck_assert_msg(strstr(err, "thinking.debug = 8000 must be below max_tokens.debug = 8000"),
		      "%s", err);
	ck_assert_int_eq(search_config_set(&c, "max_tokens.debug", "16000", err, sizeof(err)), 0);
	ck_assert_int_eq(route_check(&c, "openai:http://h/v1", "m", err, sizeof(err)), 0);
	ck_assert_int_eq(
	    search_config_set(&c, "token_field.debug", "max_completion_tokens", err, sizeof(err)),
	    0);
	ck_assert_int_eq(route_check(&c, "openai:http://h/v1", "m", err, sizeof(err)), ST_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "set token_field.debug = max_tokens"));
	ck_assert_int_eq(search_config_set(&c, "token_field.debug", "max_tokens", err, sizeof(err)),
			 0);
	/* no thinking on an OpenAI-compatible server; extra_body checked */
	ck_assert_int_eq(search_config_set(&c, "thinking.plan", "adaptive", err, sizeof(err)), 0);
	ck_assert_int_eq(route_check(&c, "openai:http://h/v1", "m", err, sizeof(err)), ST_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "thinking.plan is Anthropic's"));
	ck_assert_int_eq(search_config_set(&c, "thinking.plan", "off", err, sizeof(err)), 0);
	ck_assert_int_eq(
	    search_config_set(&c, "extra_body.code", "{\"max_tokens\": 5}", err, sizeof(err)), 0);
	ck_assert_int_eq(route_check(&c, "openai:http://h/v1", "m", err, sizeof(err)), ST_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "extra_body.code sets 'max_tokens'"));
	ck_assert_int_eq(search_config_set(&c, "extra_body.code", "[1", err, sizeof(err)), 0);
	ck_assert_int_eq(route_check(&c, "openai:http://h/v1", "m", err, sizeof(err)), ST_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "extra_body.code must be a JSON object"));
	ck_assert_int_eq(
	    search_config_set(&c, "extra_body.code", "{\"top_k\": 20}", err, sizeof(err)), 0);
	ck_assert_int_eq(route_check(&c, "openai:http://h/v1", "m", err, sizeof(err)), 0);
	/* unused roles are not checked: the stark policy never asks sample */
	ck_assert_int_eq(search_config_set(&c, "thinking.sample", "adaptive", err, sizeof(err)), 0);
	ck_assert_int_eq(route_check(&c, "openai:http://h/v1", "m", err, sizeof(err)), 0);
	/* the request settings */
	ck_assert_int_eq(
	    search_config_set(&c, "token_field.plan", "max_completion_tokens", err, sizeof(err)),
	    0);
	ck_assert_int_eq(search_config_set(&c, "reasoning_effort.plan", "high", err, sizeof(err)),
			 0);
	route_request(&c, ROLE_PLAN, &rq);
	ck_assert(rq.temperature == 0.8);
	ck_assert_int_eq(rq.token_field, LLM_TOKENS_MAX_COMPLETION);
	ck_assert_str_eq(rq.reasoning_effort, "high");
	ck_assert_int_eq(rq.thinking, LLM_THINK_OFF);
	route_request(&c, ROLE_DEBUG, &rq);
	ck_assert(rq.temperature < 0);
	ck_assert_int_eq(rq.thinking, LLM_THINK_BUDGET);
	ck_assert_uint_eq(rq.thinking_budget, 8000);
	ck_assert_ptr_null(rq.reasoning_effort);
	route_request(&c, ROLE_CODE, &rq);
	ck_assert_str_eq(rq.extra, "{\"top_k\": 20}");
	/* the fix to name for what a server refused */
	route_fix(&c, LLM_OPENAI, ROLE_CODE, "max_tokens", fix, sizeof(fix));
	ck_assert_str_eq(fix, "set token_field.code = max_completion_tokens");
	route_fix(&c, LLM_OPENAI, ROLE_PLAN, "max_completion_tokens", fix, sizeof(fix));
	ck_assert_str_eq(fix, "set token_field.plan = max_tokens");
	route_fix(&c, LLM_OPENAI, ROLE_PLAN, "temperature", fix, sizeof(fix));
	ck_assert_str_eq(fix, "set temperature.plan = none");
	route_fix(&c, LLM_OPENAI, ROLE_PLAN, "reasoning_effort", fix, sizeof(fix));
	ck_assert_str_eq(fix, "change reasoning_effort.plan (now high; none sends no effort)");
	route_fix(&c, LLM_ANTHROPIC, ROLE_DEBUG, "thinking", fix, sizeof(fix));
	ck_assert_ptr_nonnull(strstr(fix, "set thinking.debug = adaptive"));
	route_fix(&c, LLM_OPENAI, ROLE_CODE, "top_k", fix, sizeof(fix));
	ck_assert_str_eq(fix, "change extra_body.code, which sets 'top_k'");
	route_fix(&c, LLM_OPENAI, ROLE_CODE, "messages", fix, sizeof(fix));
	ck_assert_str_eq(fix, "");
	/* prices: the role's where set, else the model's */
	ck_assert_int_eq(search_config_set(&c, "price.o3", "2 8", err, sizeof(err)), 0);
	route_price(&c, ROLE_PLAN, "o3", &pin, &pout);
	ck_assert(pin == 2 && pout == 8);
	route_price(&c, ROLE_PLAN, "other", &pin, &pout);
	ck_assert(pin == 0 && pout == 0);
	c.price_out[ROLE_PLAN] = 60;
	route_price(&c, ROLE_PLAN, "o3", &pin, &pout);
	ck_assert(pin == 0 && pout == 60);
}
END_TEST

/* Spend per role and per model, priced per model, reasoning counted. */
START_TEST(spend_per_model)
{
	struct env e;
	struct run *r, *l;
	char err[256];
	double sum = 0;

	env_init(&e, 6);
	write_retry_replay(&e);
	ck_assert_int_eq(search_config_set(&e.cfg, "model.plan", "thinker", err, sizeof(err)), 0);
	ck_assert_int_eq(search_config_set(&e.cfg, "model.code", "typist", err, sizeof(err)), 0);
	ck_assert_int_eq(search_config_set(&e.cfg, "model.debug", "typist", err, sizeof(err)), 0);
	ck_assert_int_eq(search_config_set(&e.cfg, "price.thinker", "10 40", err, sizeof(err)), 0);
	ck_assert_int_eq(search_config_set(&e.cfg, "price.typist", "1 2", err, sizeof(err)), 0);
	r = start(&e, "models");
	loop(r, e.replay, e.evp, NULL);
	ck_assert_int_eq(r->state, RUN_FINISHED);
	ck_assert_uint_eq(r->nmodels, 2);
	ck_assert_str_eq(r->models[0].model, "thinker");
	ck_assert_str_eq(r->models[1].model, "typist");
	ck_assert_uint_eq(r->models[0].s.calls, r->spend[ROLE_PLAN].calls);
	ck_assert_uint_eq(r->models[1].s.calls,
			  r->spend[ROLE_CODE].calls + r->spend[ROLE_DEBUG].calls);
	ck_assert_uint_eq(r->models[0].s.tokens_reasoning, r->spend[ROLE_PLAN].tokens_reasoning);
	ck_assert(fabs(r->models[0].s.dollars - ((double)r->spend[ROLE_PLAN].tokens_in * 10 +
						 (double)r->spend[ROLE_PLAN].tokens_out * 40) /
						    1e6) < 1e-12);
	for (size_t i = 0; i < r->nmodels; i++)
		sum += r->models[i].s.dollars;
	ck_assert(fabs(sum - run_spend_total(r).dollars) < 1e-12);
	l = load(&e, "models", false);
	ck_assert_uint_eq(l->nmodels, 2);
	ck_assert_uint_eq(l->models[1].s.calls, r->models[1].s.calls);
	ck_assert(l->models[0].s.dollars == r->models[0].s.dollars);
	run_free(l);
	run_free(r);
	env_release(&e);
}
END_TEST

/* ---- runs stepped side by side ---- */

/*
 * Three runs stepped in a seeded random order, each answer given at a
 * random later turn (as a bench's event loop does), against the same run
 * driven alone by run_loop: identical trees, attempts and spend.
 */
START_TEST(steps_interleaved_equal_alone)
{
	struct env e;
	struct run *alone, *r[3];
	struct llm_provider *llm[3];
	bool waiting[3] = {false, false, false}, done[3] = {false, false, false};
	enum run_wait w[3];
	char err[512] = "", id[8];
	unsigned seed = 17, ndone = 0, turns = 0;

	env_init(&e, 12);
	alone = start(&e, "alone");
	loop(alone, e.replay, e.evp, NULL);
	for (int i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "s%d", i);
		r[i] = start(&e, id);
		ck_assert_int_eq(llm_provider_replay(e.llm, &llm[i], err, sizeof(err)), 0);
		ck_assert_int_eq(run_begin(r[i], err, sizeof(err)), 0);
	}
	while (ndone < 3 && turns++ < 100000) {
		int i = (int)(rand_r(&seed) % 3);

		if (done[i])
			continue;
		if (!waiting[i]) { /* step: it runs until it needs an answer */
			ck_assert_int_eq(run_step(r[i], &w[i], err, sizeof(err)), 0);
			if (w[i] == RUN_WAIT_DONE) {
				done[i] = true;
				ndone++;
			}
			waiting[i] = w[i] != RUN_WAIT_DONE;
			continue;
		}
		if (rand_r(&seed) % 2) /* its answer comes later */
			continue;
		if (w[i] == RUN_WAIT_LLM) {
			struct llm_reply reply;

			memset(&reply, 0, sizeof(reply));
			ck_assert_int_eq(llm[i]->call(llm[i], r[i]->pend.key,
						      search_role_name(r[i]->pend.role),
						      &r[i]->pend.rq, &reply),
					 0);
			ck_assert_int_eq(run_llm_reply(r[i], &reply, err, sizeof(err)), 0);
		} else {
			struct proto_result res;

			proto_result_init(&res);
			ck_assert_int_eq(e.evp->eval(e.evp, &r[i]->pend.job, &res), 0);
			ck_assert_int_eq(run_eval_result(r[i], &res, 1.0, err, sizeof(err)), 0);
			proto_result_release(&res);
		}
		waiting[i] = false;
	}
	ck_assert_uint_eq(ndone, 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(r[i]->state, RUN_FINISHED);
		same_tree(alone, r[i]);
		run_free(r[i]);
		llm_provider_free(llm[i]);
	}
	run_free(alone);
	env_release(&e);
}
END_TEST

/* ---- the bench's table, against figures worked by hand ---- */

static struct bench_run table_run(int level, enum search_policy pol, double best, int kb,
				  double kb_best)
{
	struct bench_run r;

	memset(&r, 0, sizeof(r));
	r.level = level;
	r.policy = pol;
	r.best = best;
	r.kb_correct = kb;
	r.kb_best = kb_best;
	r.compile_state = -1;
	r.best_compile = NAN;
	r.attempts = 10;
	r.llm_calls = 3;
	r.spend[ROLE_PLAN].calls = 2;
	r.spend[ROLE_PLAN].dollars = 0.25;
	r.spend[ROLE_CODE].calls = 1;
	r.spend[ROLE_CODE].tokens_in = 100;
	r.gpu_seconds = 1.5;
	return r;
}

static double num(const json_t *row, const char *key)
{
	const json_t *v = json_object_get(row, key);

	ck_assert_msg(json_is_number(v), "%s is not a number", key);
	return json_number_value(v);
}

START_TEST(bench_table_figures)
{
	/* level 1, stark: best 2.0, 0.5 (correct but slower), none, 4.0;
	 * level 1, sampling: none */
	struct bench_run runs[5] = {
	    table_run(1, POLICY_STARK, 2.0, 1, 1.5), table_run(1, POLICY_STARK, 0.5, 0, NAN),
	    table_run(1, POLICY_SAMPLING, NAN, -1, NAN), table_run(1, POLICY_STARK, NAN, -1, NAN),
	    table_run(1, POLICY_STARK, 4.0, -1, NAN)};
	double x[4] = {4, 1, 0.5, 2};
	json_t *t = bench_table(runs, 5), *a, *b;

	ck_assert_double_eq_tol(bench_geomean(x, 4), sqrt(2.0), 1e-12);
	ck_assert_double_eq(bench_geomean(x, 0), 1.0);
	ck_assert_double_eq(bench_median(x, 4), 1.5); /* (1 + 2) / 2 */
	ck_assert_double_eq(bench_median(x, 3), 1.0); /* sorted: 0.5 1 2 */
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(json_array_size(t), 2);
	a = json_array_get(t, 0);
	b = json_array_get(t, 1);
	ck_assert_str_eq(jr_str(a, "policy", ""), "stark");
	ck_assert_int_eq(jr_i64(a, "problems", 0), 4);
	ck_assert_double_eq_tol(num(a, "success_rate"), 0.75, 1e-12);
	ck_assert_double_eq_tol(num(a, "fast_1"), 0.5, 1e-12);   /* 2.0 and 4.0 */
	ck_assert_double_eq_tol(num(a, "fast_1_5"), 0.5, 1e-12); /* 2.0 and 4.0 */
	ck_assert_double_eq_tol(num(a, "fast_2"), 0.25, 1e-12);  /* 4.0 only: strictly above */
	ck_assert_double_eq_tol(num(a, "mean_speedup"), 1.875, 1e-12); /* (2+.5+1+4)/4 */
	ck_assert_double_eq_tol(num(a, "geomean_speedup"), sqrt(2.0), 1e-12); /* 4^(1/4) */
	ck_assert_double_eq_tol(num(a, "median_speedup"), 1.5, 1e-12);
	ck_assert_double_eq_tol(num(a, "success_rate_kernelbench"), 0.25, 1e-12);
	ck_assert_double_eq_tol(num(a, "fast_1_kernelbench"), 0.25, 1e-12);
	ck_assert_int_eq(jr_i64(a, "attempts", 0), 40);
	ck_assert_int_eq(jr_i64(a, "llm_calls", 0), 12);
	ck_assert_double_eq_tol(num(a, "dollars"), 1.0, 1e-12);
	ck_assert_double_eq_tol(num(a, "gpu_seconds"), 6.0, 1e-12);
	ck_assert_int_eq(jr_i64(json_object_get(json_object_get(a, "spend"), "plan"), "calls", 0),
			 8);
	ck_assert_int_eq(
	    jr_i64(json_object_get(json_object_get(a, "spend"), "code"), "tokens_in", 0), 400);
	/* no correct candidate: every speedup figure is the reference's */
	ck_assert_str_eq(jr_str(b, "policy", ""), "sampling");
	ck_assert_double_eq(num(b, "success_rate"), 0);
	ck_assert_double_eq(num(b, "fast_1"), 0);
	ck_assert_double_eq(num(b, "mean_speedup"), 1.0);
	ck_assert_double_eq(num(b, "geomean_speedup"), 1.0);
	ck_assert_double_eq(num(b, "median_speedup"), 1.0);
	ck_assert(json_is_null(json_object_get(b, "success_rate_kernelbench")));
	ck_assert(json_is_null(json_object_get(b, "fast_1_kernelbench")));
	/* a bench that did not ask for the compiled baseline has none */
	ck_assert(json_is_null(json_object_get(a, "fast_1_compile")));
	ck_assert(json_is_null(json_object_get(a, "problems_compile")));
	ck_assert(json_is_null(json_object_get(b, "geomean_speedup_compile")));
	json_decref(t);
}
END_TEST

/* With --baseline compile: the figures against the compiled reference,
 * over the problems whose compiled baseline could be had. */
START_TEST(bench_table_compile)
{
	/* level 1, stark: eager best 2.0 vs compile 1.2; 3.0 vs 0.8 (compiled
	 * faster than the candidate); 1.5 with the compiled baseline
	 * unavailable; no correct candidate (compiled baseline measured or
	 * not: 1.0); 4.0 vs 2.5.  level 2, stark: unavailable only. */
	struct bench_run runs[6] = {
	    table_run(1, POLICY_STARK, 2.0, -1, NAN), table_run(1, POLICY_STARK, 3.0, -1, NAN),
	    table_run(1, POLICY_STARK, 1.5, -1, NAN), table_run(1, POLICY_STARK, NAN, -1, NAN),
	    table_run(1, POLICY_STARK, 4.0, -1, NAN), table_run(2, POLICY_STARK, 1.1, -1, NAN)};
	const double comp[6] = {1.2, 0.8, NAN, NAN, 2.5, NAN};
	const int state[6] = {1, 1, 0, -1, 1, 0};
	json_t *t, *a, *b, *p;

	for (size_t i = 0; i < 6; i++) {
		runs[i].compile_asked = true;
		runs[i].compile_state = state[i];
		runs[i].best_compile = comp[i];
		if (!state[i])
			snprintf(runs[i].compile_why, sizeof(runs[i].compile_why),
				 "torch.compile failed: BackendCompilerFailed");
	}
	t = bench_table(runs, 6);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(json_array_size(t), 2);
	a = json_array_get(t, 0);
	b = json_array_get(t, 1);
	/* the eager figures are those of the eager table */
	ck_assert_int_eq(jr_i64(a, "problems", 0), 5);
	ck_assert_double_eq_tol(num(a, "fast_1"), 0.8, 1e-12);
	ck_assert_double_eq_tol(num(a, "mean_speedup"), 2.3, 1e-12); /* (2+3+1.5+1+4)/5 */
	/* against torch.compile: 4 problems (1.2, 0.8, 1.0, 2.5), one unavailable */
	ck_assert_int_eq(jr_i64(a, "problems_compile", -1), 4);
	ck_assert_int_eq(jr_i64(a, "compile_unavailable", -1), 1);
	ck_assert_double_eq_tol(num(a, "fast_1_compile"), 0.5, 1e-12);	 /* 1.2 and 2.5 */
	ck_assert_double_eq_tol(num(a, "fast_1_5_compile"), 0.25, 1e-12); /* 2.5 */
	ck_assert_double_eq_tol(num(a, "fast_2_compile"), 0.25, 1e-12);
	ck_assert_double_eq_tol(num(a, "mean_speedup_compile"), 1.375, 1e-12); /* 5.5/4 */
	ck_assert_double_eq_tol(num(a, "geomean_speedup_compile"), pow(1.2 * 0.8 * 2.5, 0.25),
				1e-12);
	ck_assert_double_eq_tol(num(a, "median_speedup_compile"), 1.1, 1e-12); /* (1+1.2)/2 */
	/* a row whose every compiled baseline was unavailable: no problem left */
	ck_assert_int_eq(jr_i64(b, "problems_compile", -1), 0);
	ck_assert_int_eq(jr_i64(b, "compile_unavailable", -1), 1);
	ck_assert_double_eq(num(b, "fast_1_compile"), 0);
	ck_assert_double_eq(num(b, "geomean_speedup_compile"), 1.0);
	json_decref(t);
	/* the problem rows carry each one's best and why it had none */
	p = bench_problems(runs, 6);
	ck_assert_ptr_nonnull(p);
	ck_assert_double_eq_tol(num(json_array_get(p, 0), "best_speedup_compile"), 1.2, 1e-12);
	ck_assert(json_is_null(json_object_get(json_array_get(p, 0), "baseline_compile_error")));
	ck_assert(json_is_null(json_object_get(json_array_get(p, 2), "best_speedup_compile")));
	ck_assert_str_eq(jr_str(json_array_get(p, 2), "baseline_compile_error", ""),
			 "torch.compile failed: BackendCompilerFailed");
	json_decref(p);
}
END_TEST

static Suite *engine_suite(void)
{
	Suite *s = suite_create("engine");
	TCase *j = tcase_create("journal"), *p = tcase_create("replay"),
	      *d = tcase_create("driver");

	tcase_add_test(j, journal_layout);
	tcase_add_test(j, journal_head_scan);
	tcase_add_test(j, journal_result_roundtrip);
	tcase_add_test(j, journal_hash);
	tcase_add_test(p, replay_llm_rules);
	tcase_add_test(p, replay_eval_rules);
	tcase_add_test(p, prompts_load);
	tcase_add_test(p, config_file);
	tcase_set_timeout(d, 120);
	tcase_add_test(d, run_finishes_and_reloads);
	tcase_add_test(d, resume_from_every_prefix);
	tcase_add_test(d, stop_flag_interrupts);
	tcase_add_test(d, caps_stop_before_the_call);
	tcase_add_test(d, llm_failures_pause);
	tcase_add_test(d, eval_error_pauses);
	tcase_add_test(d, create_refuses_taken_id);
	tcase_add_test(d, retry_carries_complaint);
	tcase_add_test(d, settings_change_on_resume);
	tcase_add_test(d, spend_per_model);
	tcase_add_test(d, steps_interleaved_equal_alone);
	tcase_add_test(p, route_rules);
	tcase_add_test(j, bench_table_figures);
	tcase_add_test(j, bench_table_compile);
	suite_add_tcase(s, j);
	suite_add_tcase(s, p);
	suite_add_tcase(s, d);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(engine_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
