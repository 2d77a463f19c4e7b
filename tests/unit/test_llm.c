/*
 * test_llm.c -- unit tests of the LLM client (llm/).
 *
 * Pure tests cover request bodies, reply and error parsing, Retry-After
 * parsing and the seeded backoff.  Network tests run the client against
 * tests/mock_llm.py (a real HTTP server on loopback, started per test) and
 * check that every fault mode -- 429 with Retry-After, 5xx, 4xx, hang,
 * slow drip, truncated JSON, huge bodies, resets, refused connections --
 * ends in the right result within its deadline, using the mock's request
 * log for counts and for the time between attempts.
 *
 * Timings are printed to stderr as "# name: ..." lines.
 */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "llm/llm.h"
#include "llm/llm_int.h"

#define KEY   "test-key-0123456789abcdef"
#define MODEL "mock-model"

/* ---- the mock server ---- */

struct mock {
	pid_t pid;
	int port;
	char dir[64];
	char base[64];
};

/* The repository root: the cwd under scripts/run-tests, else from our path. */
static void repo_root(char *out, size_t n)
{
	char exe[PATH_MAX];
	ssize_t len;

	if (access("tests/mock_llm.py", R_OK) == 0) {
		snprintf(out, n, ".");
		return;
	}
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ck_assert_int_gt(len, 0);
	exe[len] = '\0';
	for (int i = 0; i < 3; i++) /* BUILD/tests/test_llm */
		*strrchr(exe, '/') = '\0';
	snprintf(out, n, "%s", exe);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

static void mock_start_key(struct mock *m, const char *script, const char *key)
{
	char root[PATH_MAX], py[PATH_MAX + 32], spath[128], ppath[128], parent[32];
	uint64_t until;

	repo_root(root, sizeof(root));
	snprintf(py, sizeof(py), "%s/tests/mock_llm.py", root);
	snprintf(m->dir, sizeof(m->dir), "/tmp/stark-llm-test-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(m->dir));
	snprintf(spath, sizeof(spath), "%s/script.json", m->dir);
	snprintf(ppath, sizeof(ppath), "%s/port", m->dir);
	snprintf(parent, sizeof(parent), "%ld", (long)getpid());
	write_file(spath, script);
	m->pid = fork();
	ck_assert_int_ge(m->pid, 0);
	if (m->pid == 0) {
		const char *argv[] = {"python3",
				      py,
				      "--script",
				      spath,
				      "--port-file",
				      ppath,
				      "--max-seconds",
				      "60",
				      "--parent-pid",
				      parent,
				      "--log-bodies",
				      key ? "--key" : NULL,
				      key,
				      NULL};
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0)
			dup2(null, 1);
		execvp("python3", (char *const *)argv);
		_exit(127);
	}
	until = clock_mono_ns() + 15000000000ull;
	for (;;) {
		FILE *f = fopen(ppath, "r");

		if (f) {
			ck_assert_int_eq(fscanf(f, "%d", &m->port), 1);
			fclose(f);
			break;
		}
		ck_assert_msg(clock_mono_ns() < until, "mock server did not start");
		ck_assert_int_eq(waitpid(m->pid, NULL, WNOHANG), 0);
		usleep(10000);
	}
	/* the server has read its script: nothing is left behind if a check fails */
	unlink(spath);
	unlink(ppath);
	rmdir(m->dir);
	snprintf(m->base, sizeof(m->base), "http://127.0.0.1:%d/v1", m->port);
}

static void mock_start(struct mock *m, const char *script)
{
	mock_start_key(m, script, KEY);
}

static void mock_stop(struct mock *m)
{
	kill(m->pid, SIGKILL);
	waitpid(m->pid, NULL, 0);
}

/* GET /_stats over a plain socket (the tests keep libcurl out of their own code). */
static json_t *mock_stats(const struct mock *m)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)m->port)};
	static const char req[] = "GET /_stats HTTP/1.0\r\n\r\n";
	struct dbuf b;
	char chunk[8192];
	const char *json;
	json_t *j;
	ssize_t r;
	int fd;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(io_write_full(fd, req, sizeof(req) - 1), 0);
	dbuf_init(&b, 64u << 20);
	while ((r = read(fd, chunk, sizeof(chunk))) > 0)
		ck_assert_int_eq(dbuf_append(&b, chunk, (size_t)r), 0);
	close(fd);
	json = strstr(dbuf_str(&b), "\r\n\r\n");
	ck_assert_ptr_nonnull(json);
	j = json_loads(json + 4, 0, NULL);
	ck_assert_ptr_nonnull(j);
	dbuf_release(&b);
	return j;
}

static long stats_requests(const struct mock *m)
{
	json_t *j = mock_stats(m);
	long n = (long)json_integer_value(json_object_get(j, "requests"));

	json_decref(j);
	return n;
}

/* Seconds between the arrival of request i and request i + 1. */
static double stats_gap(json_t *j, size_t i)
{
	json_t *log = json_object_get(j, "log");
	double a = json_number_value(json_object_get(json_array_get(log, i), "t"));
	double b = json_number_value(json_object_get(json_array_get(log, i + 1), "t"));

	ck_assert_int_gt(json_array_size(log), i + 1);
	return b - a;
}

static const char *stats_log_str(json_t *j, size_t i, const char *key)
{
	json_t *e = json_array_get(json_object_get(j, "log"), i);

	ck_assert_ptr_nonnull(e);
	return json_string_value(json_object_get(e, key));
}

/* ---- helpers ---- */

static const struct llm_message MSGS[] = {
    {"system", "you write cuda kernels"},
    {"user", "make it faster"},
};

static struct llm_request req(uint64_t tag)
{
	struct llm_request r = {
	    .tag = tag, .msgs = MSGS, .nmsgs = 2, .temperature = 0.1, .max_tokens = 256};

	return r;
}

/* Small, fast limits for tests; every fault test shortens what it needs. */
static void cfg_for(struct llm_config *cfg, enum llm_api api, const struct mock *m)
{
	llm_config_init(cfg);
	cfg->api = api;
	cfg->base_url = m ? m->base : "http://127.0.0.1:1/v1";
	cfg->api_key = KEY;
	cfg->model = MODEL;
	cfg->timeout_ms = 5000;
	cfg->total_timeout_ms = 10000;
	cfg->max_retries = 3;
	cfg->backoff_base_ms = 20;
	cfg->backoff_max_ms = 100;
	cfg->retry_after_max_ms = 5000;
	cfg->max_response_bytes = 1u << 20;
	cfg->seed = 42;
}

static uint64_t ms_since(uint64_t t0)
{
	return (clock_mono_ns() - t0) / 1000000u;
}

/* One call, start to end; returns the wall time in ms. */
static uint64_t call_one(const struct llm_config *cfg, const struct llm_request *rq,
			 struct llm_reply *rep)
{
	struct llm_client *c;
	uint64_t t0 = clock_mono_ns();
	int n;

	ck_assert_int_eq(llm_client_new(cfg, &c), 0);
	ck_assert_int_eq(llm_submit(c, rq), 0);
	ck_assert_uint_eq(llm_inflight(c), 1);
	do {
		n = llm_poll(c, 100, rep, 1);
		ck_assert_int_ge(n, 0);
		ck_assert_msg(ms_since(t0) < 30000, "call did not end");
	} while (n == 0);
	ck_assert_uint_eq(llm_inflight(c), 0);
	llm_client_free(c);
	ck_assert_uint_eq(rep->tag, rq->tag);
	return ms_since(t0);
}

/* ---- pure: configuration, bodies, parsing, policy ---- */

START_TEST(test_config)
{
	struct llm_config cfg;
	struct llm_client *c = NULL;

	llm_config_init(&cfg);
	ck_assert_int_eq(cfg.api, LLM_OPENAI);
	ck_assert_uint_gt(cfg.timeout_ms, 0);
	ck_assert_uint_ge(cfg.total_timeout_ms, cfg.timeout_ms);
	ck_assert_uint_gt(cfg.max_inflight, 0);
	ck_assert_int_eq(llm_client_new(&cfg, &c), ST_EINVAL); /* no base_url, no model */
	ck_assert_ptr_null(c);
	cfg_for(&cfg, LLM_OPENAI, NULL);
	cfg.max_inflight = 0;
	ck_assert_int_eq(llm_client_new(&cfg, &c), ST_EINVAL);
	cfg.max_inflight = 2;
	cfg.api_key = "sk-abc\r\nX-Evil: 1";
	ck_assert_int_eq(llm_client_new(&cfg, &c), ST_EINVAL);
	cfg.api_key = KEY;
	ck_assert_int_eq(llm_client_new(&cfg, &c), 0);
	ck_assert_uint_eq(llm_inflight(c), 0);
	llm_client_free(c);
	llm_client_free(NULL);
}
END_TEST

START_TEST(test_body_openai)
{
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct dbuf b;

	cfg_for(&cfg, LLM_OPENAI, NULL);
	cfg.model = "m";
	rq.temperature = 0.8;
	rq.max_tokens = 100;
	dbuf_init(&b, 4096);
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), 0);
	ck_assert_str_eq(dbuf_str(&b),
			 "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"you "
			 "write cuda kernels\"},{\"role\":\"user\",\"content\":\"make it "
			 "faster\"}],\"temperature\":0.8,\"max_tokens\":100}");
	/* temperature < 0 and max_tokens 0 are left to the server */
	dbuf_reset(&b);
	rq.temperature = -1;
	rq.max_tokens = 0;
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), 0);
	ck_assert_ptr_null(strstr(dbuf_str(&b), "temperature"));
	ck_assert_ptr_null(strstr(dbuf_str(&b), "max_tokens"));
	dbuf_release(&b);
}
END_TEST

START_TEST(test_body_anthropic)
{
	static const struct llm_message msgs[] = {
	    {"system", "be brief"},	    {"user", "hi"},
	    {"assistant", "hello"},	    {"system", "and exact"},
	    {"user", "again \"quoted\"\n"},
	};
	struct llm_request rq = {
	    .tag = 1, .msgs = msgs, .nmsgs = 5, .temperature = 0.1, .max_tokens = 100};
	struct llm_config cfg;
	struct dbuf b, b2;

	cfg_for(&cfg, LLM_ANTHROPIC, NULL);
	cfg.model = "claude";
	dbuf_init(&b, 4096);
	dbuf_init(&b2, 4096);
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), 0);
	ck_assert_str_eq(
	    dbuf_str(&b),
	    "{\"model\":\"claude\",\"system\":\"be brief\\n\\nand exact\",\"messages\":"
	    "[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\","
	    "\"content\":\"hello\"},{\"role\":\"user\",\"content\":\"again "
	    "\\\"quoted\\\"\\n\"}],\"temperature\":0.1,\"max_tokens\":100}");
	/* the same request gives the same bytes (journal hashes rely on it) */
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b2), 0);
	ck_assert_str_eq(dbuf_str(&b), dbuf_str(&b2));
	dbuf_release(&b);
	dbuf_release(&b2);
}
END_TEST

START_TEST(test_body_invalid)
{
	struct llm_message bad_role[] = {{"tool", "x"}};
	struct llm_message bad_utf8[] = {{"user", "caf\xc3"}};
	struct llm_message no_content[] = {{"user", NULL}};
	struct llm_request rq = req(1);
	struct llm_config cfg;
	struct dbuf b;

	cfg_for(&cfg, LLM_OPENAI, NULL);
	dbuf_init(&b, 4096);
	rq.msgs = bad_role;
	rq.nmsgs = 1;
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_EINVAL);
	rq.msgs = bad_utf8;
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_EINVAL);
	rq.msgs = no_content;
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_EINVAL);
	ck_assert_uint_eq(b.len, 0);
	rq = req(1);
	cfg.api = LLM_ANTHROPIC;
	rq.max_tokens = 0; /* required by anthropic */
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_EINVAL);
	/* over the cap: ST_ETOOBIG and nothing half-written */
	rq.max_tokens = 10;
	dbuf_release(&b);
	dbuf_init(&b, 40);
	ck_assert_int_eq(dbuf_puts(&b, "keep"), 0);
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_ETOOBIG);
	ck_assert_str_eq(dbuf_str(&b), "keep");
	dbuf_release(&b);
}
END_TEST

START_TEST(test_body_reasoning)
{
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct dbuf b;

	dbuf_init(&b, 4096);
	/* OpenAI's reasoning models: max_completion_tokens, effort, no temperature */
	cfg_for(&cfg, LLM_OPENAI, NULL);
	cfg.model = "o3";
	rq.nmsgs = 1;
	rq.msgs = &MSGS[1];
	rq.temperature = -1;
	rq.token_field = LLM_TOKENS_MAX_COMPLETION;
	rq.reasoning_effort = "high";
	rq.extra = "{\"top_p\":0.9,\"chat_template_kwargs\":{\"enable_thinking\":true}}";
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), 0);
	ck_assert_str_eq(dbuf_str(&b),
			 "{\"model\":\"o3\",\"messages\":[{\"role\":\"user\",\"content\":\"make it "
			 "faster\"}],\"max_completion_tokens\":256,\"reasoning_effort\":\"high\","
			 "\"top_p\":0.9,\"chat_template_kwargs\":{\"enable_thinking\":true}}");
	/* extra may not repeat the request's own members, and must be an object */
	dbuf_reset(&b);
	rq.extra = "{\"max_tokens\":5}";
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_EINVAL);
	rq.extra = "{\"reasoning_effort\":\"low\"}";
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_EINVAL);
	rq.extra = "[1]";
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_EINVAL);
	rq.extra = "{\"a\":1,\"a\":2}";
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_EINVAL);
	rq.extra = NULL;
	rq.thinking = LLM_THINK_BUDGET; /* no such thing in the OpenAI dialect */
	rq.thinking_budget = 2000;
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_EINVAL);
	ck_assert_uint_eq(b.len, 0);
	/* Anthropic extended thinking with a budget, and effort */
	cfg.api = LLM_ANTHROPIC;
	cfg.model = "claude";
	rq.token_field = LLM_TOKENS_MAX_TOKENS;
	rq.max_tokens = 16000;
	rq.thinking_budget = 8000;
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), 0);
	ck_assert_str_eq(dbuf_str(&b),
			 "{\"model\":\"claude\",\"messages\":[{\"role\":\"user\",\"content\":"
			 "\"make it faster\"}],\"max_tokens\":16000,\"thinking\":{\"type\":"
			 "\"enabled\",\"budget_tokens\":8000},\"output_config\":{\"effort\":"
			 "\"high\"}}");
	dbuf_reset(&b);
	rq.thinking = LLM_THINK_ADAPTIVE;
	rq.reasoning_effort = "";
	rq.temperature = 1;
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), 0);
	ck_assert_ptr_nonnull(strstr(dbuf_str(&b), "\"temperature\":1.0,\"max_tokens\":16000,"
						   "\"thinking\":{\"type\":\"adaptive\"}}"));
	dbuf_reset(&b);
	/* what Anthropic cannot take */
	rq.thinking = LLM_THINK_BUDGET;
	rq.thinking_budget = 16000; /* not below max_tokens */
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_EINVAL);
	rq.thinking_budget = 0;
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_EINVAL);
	rq.thinking = LLM_THINK_OFF;
	rq.token_field = LLM_TOKENS_MAX_COMPLETION;
	ck_assert_int_eq(llm_request_body(&cfg, &rq, &b), ST_EINVAL);
	ck_assert_uint_eq(b.len, 0);
	dbuf_release(&b);
}
END_TEST

static int parse_ans(enum llm_api api, const char *body, struct dbuf *text, struct llm_answer *a)
{
	char err[256];
	int rc = llm_parse_response(api, body, strlen(body), text, a, err, sizeof(err));

	ck_assert_msg(rc == 0, "%s: %s", body, err);
	return rc;
}

START_TEST(test_parse_reasoning)
{
	struct llm_answer a;
	struct dbuf t;
	char err[256];

	dbuf_init(&t, 1024);
	/* OpenAI reasoning model: reasoning tokens are part of completion_tokens */
	parse_ans(
	    LLM_OPENAI,
	    "{\"choices\":[{\"finish_reason\":\"stop\",\"message\":{\"content\":\"ans\"}}],"
	    "\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":900,\"total_tokens\":1000,"
	    "\"completion_tokens_details\":{\"reasoning_tokens\":800}}}",
	    &t, &a);
	ck_assert_str_eq(dbuf_str(&t), "ans");
	ck_assert_uint_eq(a.tokens_in, 100);
	ck_assert_uint_eq(a.tokens_out, 900);
	ck_assert_uint_eq(a.tokens_reasoning, 800);
	ck_assert(!a.truncated);
	/* DeepSeek / vLLM: reasoning_content beside the answer */
	parse_ans(LLM_OPENAI,
		  "{\"choices\":[{\"message\":{\"reasoning_content\":\"hmm ```python\\nx\\n```\","
		  "\"content\":\"```python\\ny\\n```\"}}],\"usage\":{\"prompt_tokens\":5,"
		  "\"completion_tokens\":9}}",
		  &t, &a);
	ck_assert_str_eq(dbuf_str(&t), "```python\ny\n```");
	ck_assert_uint_eq(a.reasoning_bytes, 19);
	ck_assert_uint_eq(a.tokens_out, 9);
	/* newer vLLM / OpenRouter: "reasoning" */
	parse_ans(LLM_OPENAI,
		  "{\"choices\":[{\"message\":{\"reasoning\":\"abc\",\"content\":\"z\"}}]}", &t,
		  &a);
	ck_assert_str_eq(dbuf_str(&t), "z");
	ck_assert_uint_eq(a.reasoning_bytes, 3);
	/* inline <think> from a server without a reasoning parser */
	parse_ans(LLM_OPENAI,
		  "{\"choices\":[{\"message\":{\"content\":\"\\n<think>\\nfirst ```x```\\n</think>"
		  "\\n\\nthe answer\\n\"}}]}",
		  &t, &a);
	ck_assert_str_eq(dbuf_str(&t), "the answer\n");
	parse_ans(LLM_OPENAI,
		  "{\"choices\":[{\"finish_reason\":\"length\",\"message\":{\"content\":"
		  "\"<think>never closed\"}}]}",
		  &t, &a);
	ck_assert_str_eq(dbuf_str(&t), "");
	ck_assert(a.truncated);
	/* a "<think>" later in the answer is the answer's */
	parse_ans(LLM_OPENAI, "{\"choices\":[{\"message\":{\"content\":\"a <think>b\"}}]}", &t, &a);
	ck_assert_str_eq(dbuf_str(&t), "a <think>b");
	/* the limit spent reasoning: no content, an empty answer, cut */
	parse_ans(LLM_OPENAI,
		  "{\"choices\":[{\"finish_reason\":\"length\",\"message\":{\"content\":null}}],"
		  "\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4096,"
		  "\"completion_tokens_details\":{\"reasoning_tokens\":4096}}}",
		  &t, &a);
	ck_assert_str_eq(dbuf_str(&t), "");
	ck_assert(a.truncated);
	ck_assert_uint_eq(a.tokens_out, 4096);
	parse_ans(LLM_OPENAI,
		  "{\"choices\":[{\"message\":{\"content\":null,\"reasoning_content\":\"r\"}}]}",
		  &t, &a);
	ck_assert_str_eq(dbuf_str(&t), "");
	/* no content, no reasoning, not cut: still malformed */
	ck_assert_int_eq(llm_parse_response(LLM_OPENAI,
					    "{\"choices\":[{\"message\":{\"content\":null}}]}", 44,
					    &t, &a, err, sizeof(err)),
			 ST_EPROTO);
	/* servers that leave reasoning out of completion_tokens: it is counted */
	parse_ans(
	    LLM_OPENAI,
	    "{\"choices\":[{\"message\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":10,"
	    "\"completion_tokens\":20,\"total_tokens\":530,\"completion_tokens_details\":"
	    "{\"reasoning_tokens\":500}}}",
	    &t, &a);
	ck_assert_uint_eq(a.tokens_out, 520);
	ck_assert_uint_eq(a.tokens_reasoning, 500);
	parse_ans(
	    LLM_OPENAI,
	    "{\"choices\":[{\"message\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":10,"
	    "\"completion_tokens\":20,\"reasoning_tokens\":300}}",
	    &t, &a);
	ck_assert_uint_eq(a.tokens_out, 320);
	/* Anthropic: thinking and redacted_thinking blocks are not the answer */
	parse_ans(
	    LLM_ANTHROPIC,
	    "{\"content\":[{\"type\":\"thinking\",\"thinking\":\"step 1\",\"signature\":\"s\"},"
	    "{\"type\":\"redacted_thinking\",\"data\":\"xyz\"},{\"type\":\"text\",\"text\":"
	    "\"done\"}],\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":7,"
	    "\"output_tokens\":70}}",
	    &t, &a);
	ck_assert_str_eq(dbuf_str(&t), "done");
	ck_assert_uint_eq(a.reasoning_bytes, 9);
	ck_assert_uint_eq(a.tokens_out, 70);
	ck_assert(!a.truncated);
	parse_ans(LLM_ANTHROPIC,
		  "{\"content\":[{\"type\":\"thinking\",\"thinking\":\"long\"}],\"stop_reason\":"
		  "\"max_tokens\"}",
		  &t, &a);
	ck_assert_str_eq(dbuf_str(&t), "");
	ck_assert(a.truncated);
	dbuf_release(&t);
}
END_TEST

static void blames(const char *body, const char *req, const char *want)
{
	char param[48];

	llm__error_param(body, strlen(body), req, req ? strlen(req) : 0, param, sizeof(param));
	ck_assert_msg(!strcmp(param, want), "%s: blamed '%s', want '%s'", body, param, want);
}

START_TEST(test_error_param)
{
	static const char *const rq =
	    "{\"model\":\"m\",\"messages\":[],\"temperature\":0.5,"
	    "\"max_tokens\":9000,\"thinking\":{\"type\":\"enabled\","
	    "\"budget_tokens\":8000},\"output_config\":{\"effort\":\"x\"},"
	    "\"top_k\":5}";

	/* OpenAI names the parameter */
	blames("{\"error\":{\"message\":\"Unsupported parameter: 'max_tokens' is not supported "
	       "with this model. Use 'max_completion_tokens' instead.\",\"type\":"
	       "\"invalid_request_error\",\"param\":\"max_tokens\",\"code\":"
	       "\"unsupported_parameter\"}}",
	       NULL, "max_tokens");
	/* Anthropic does not: the first member of the request the message names */
	blames("{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
	       "\"`temperature` may only be set to 1 when thinking is enabled.\"}}",
	       rq, "temperature");
	blames(
	    "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
	    "\"thinking.enabled.budget_tokens: Input should be greater than or equal to 1024\"}}",
	    rq, "thinking");
	blames("{\"type\":\"error\",\"error\":{\"message\":\"output_config.effort: Input should be "
	       "'low'\"}}",
	       rq, "output_config");
	blames("{\"type\":\"error\",\"error\":{\"message\":\"budget_tokens is too large\"}}", rq,
	       "thinking");
	/* vLLM: an error object at the top; a member that came from extra */
	blames("{\"object\":\"error\",\"message\":\"top_k must be -1 or positive\",\"type\":"
	       "\"BadRequestError\",\"param\":null}",
	       rq, "top_k");
	/* FastAPI validation errors name the location */
	blames("{\"detail\":[{\"loc\":[\"body\",\"max_tokens\"],\"msg\":\"too big\"}]}", rq,
	       "max_tokens");
	/* whole words only; nothing named; not JSON */
	blames("{\"error\":{\"message\":\"the model is overloaded, maxi_tokens\"}}", rq, "");
	blames("{\"error\":{\"message\":\"context length exceeded\"}}", rq, "");
	blames("<html>400</html>", rq, "");
	blames("", NULL, "");
}
END_TEST

static int parse(enum llm_api api, const char *body, struct dbuf *text, uint64_t *in, uint64_t *out,
		 char *err)
{
	struct llm_answer a;
	int rc = llm_parse_response(api, body, strlen(body), text, &a, err, 256);

	if (in)
		*in = a.tokens_in;
	if (out)
		*out = a.tokens_out;
	return rc;
}

START_TEST(test_parse_openai)
{
	struct dbuf t;
	uint64_t in = 9, out = 9;
	char err[256];

	dbuf_init(&t, 1024);
	ck_assert_int_eq(parse(LLM_OPENAI,
			       "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":"
			       "\"hi \\u00e9\"}}],\"usage\":{\"prompt_tokens\":12,"
			       "\"completion_tokens\":3}}",
			       &t, &in, &out, err),
			 0);
	ck_assert_str_eq(dbuf_str(&t), "hi \xc3\xa9");
	ck_assert_uint_eq(in, 12);
	ck_assert_uint_eq(out, 3);
	/* content as parts; usage missing reads as 0 */
	ck_assert_int_eq(parse(LLM_OPENAI,
			       "{\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\","
			       "\"text\":\"a\"},{\"type\":\"image\"},{\"type\":\"text\",\"text\":"
			       "\"b\"}]}}]}",
			       &t, &in, &out, err),
			 0);
	ck_assert_str_eq(dbuf_str(&t), "ab");
	ck_assert_uint_eq(in + out, 0);
	/* empty content is a valid (empty) completion */
	ck_assert_int_eq(parse(LLM_OPENAI, "{\"choices\":[{\"message\":{\"content\":\"\"}}]}", &t,
			       NULL, NULL, err),
			 0);
	ck_assert_str_eq(dbuf_str(&t), "");
	ck_assert_int_eq(
	    parse(LLM_OPENAI, "{\"choices\":[{\"message\":{\"content\":null,\"refusal\":\"no\"}}]}",
		  &t, NULL, NULL, err),
	    ST_EPROTO);
	ck_assert_str_eq(err, "model refused: no");
	ck_assert_int_eq(parse(LLM_OPENAI, "{\"choices\":[]}", &t, NULL, NULL, err), ST_EPROTO);
	ck_assert_str_eq(err, "malformed reply: no choices");
	ck_assert_int_eq(parse(LLM_OPENAI, "{\"choices\":[{\"text\":\"x\"}]}", &t, NULL, NULL, err),
			 ST_EPROTO);
	dbuf_release(&t);
}
END_TEST

START_TEST(test_parse_anthropic)
{
	struct dbuf t;
	uint64_t in, out;
	char err[256];

	dbuf_init(&t, 1024);
	ck_assert_int_eq(parse(LLM_ANTHROPIC,
			       "{\"type\":\"message\",\"content\":[{\"type\":\"thinking\","
			       "\"thinking\":\"hmm\"},{\"type\":\"text\",\"text\":\"one \"},"
			       "{\"type\":\"text\",\"text\":\"two\"}],\"usage\":{\"input_tokens\":"
			       "40,\"output_tokens\":2}}",
			       &t, &in, &out, err),
			 0);
	ck_assert_str_eq(dbuf_str(&t), "one two");
	ck_assert_uint_eq(in, 40);
	ck_assert_uint_eq(out, 2);
	ck_assert_int_eq(parse(LLM_ANTHROPIC, "{\"content\":\"x\"}", &t, &in, &out, err),
			 ST_EPROTO);
	ck_assert_int_eq(
	    parse(LLM_ANTHROPIC, "{\"content\":[{\"type\":\"text\"}]}", &t, &in, &out, err),
	    ST_EPROTO);
	/* the OpenAI shape is not an Anthropic reply */
	ck_assert_int_eq(parse(LLM_ANTHROPIC, "{\"choices\":[{\"message\":{\"content\":\"x\"}}]}",
			       &t, &in, &out, err),
			 ST_EPROTO);
	dbuf_release(&t);
}
END_TEST

START_TEST(test_parse_bad)
{
	struct dbuf t;
	char err[256];

	dbuf_init(&t, 8);
	ck_assert_int_eq(
	    parse(LLM_OPENAI, "{\"choices\":[{\"message\":{\"con", &t, NULL, NULL, err), ST_EPROTO);
	ck_assert_msg(str_starts(err, "malformed json reply"), "%s", err);
	ck_assert_int_eq(parse(LLM_OPENAI, "", &t, NULL, NULL, err), ST_EPROTO);
	ck_assert_int_eq(parse(LLM_OPENAI, "[1]", &t, NULL, NULL, err), ST_EPROTO);
	ck_assert_int_eq(llm_parse_response(LLM_OPENAI, "{}\0{}", 5, &t, NULL, err, 256),
			 ST_EPROTO);
	ck_assert_int_eq(llm_parse_response(LLM_OPENAI, NULL, 0, &t, NULL, NULL, 0), ST_EPROTO);
	/* an error object in a 200 reply */
	ck_assert_int_eq(parse(LLM_OPENAI,
			       "{\"error\":{\"message\":\"context too long\",\"type\":"
			       "\"invalid_request_error\"}}",
			       &t, NULL, NULL, err),
			 ST_EPROTO);
	ck_assert_str_eq(err, "server error: invalid_request_error: context too long");
	/* text over the cap */
	ck_assert_int_eq(parse(LLM_ANTHROPIC,
			       "{\"content\":[{\"type\":\"text\",\"text\":\"123456789\"}]}", &t,
			       NULL, NULL, err),
			 ST_ETOOBIG);
	ck_assert_str_eq(dbuf_str(&t), "");
	/* embedded NUL escapes are refused (text is a C string) */
	ck_assert_int_eq(parse(LLM_ANTHROPIC,
			       "{\"content\":[{\"type\":\"text\",\"text\":\"a\\u0000b\"}]}", &t,
			       NULL, NULL, err),
			 ST_EPROTO);
	dbuf_release(&t);
}
END_TEST

static void error_text_is(const char *body, const char *want)
{
	char err[256];

	llm__error_text(body, strlen(body), err, sizeof(err));
	ck_assert_str_eq(err, want);
}

START_TEST(test_error_text)
{
	error_text_is("{\"error\":{\"message\":\"Incorrect API key\",\"type\":"
		      "\"invalid_request_error\",\"code\":\"invalid_api_key\"}}",
		      "invalid_request_error: Incorrect API key");
	error_text_is("{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
		      "\"Overloaded\"}}",
		      "overloaded_error: Overloaded");
	error_text_is("{\"error\":\"model 'x' not found\"}", "model 'x' not found");
	error_text_is("{\"detail\":\"Not Found\"}", "Not Found");
	error_text_is("{\"object\":\"error\",\"message\":\"bad\",\"type\":\"BadRequestError\"}",
		      "BadRequestError: bad");
	error_text_is("<html>\r\n<b>502 Bad Gateway</b></html>",
		      "<html>  <b>502 Bad Gateway</b></html>");
	error_text_is("", "empty body");
}
END_TEST

START_TEST(test_retry_after)
{
	time_t now = 1700000000; /* Tue, 14 Nov 2023 22:13:20 GMT */
	uint64_t ms = 0;

	ck_assert_int_eq(llm__parse_retry_after("2", now, &ms), 0);
	ck_assert_uint_eq(ms, 2000);
	ck_assert_int_eq(llm__parse_retry_after(" 1.5 ", now, &ms), 0);
	ck_assert_uint_eq(ms, 1500);
	ck_assert_int_eq(llm__parse_retry_after("0", now, &ms), 0);
	ck_assert_uint_eq(ms, 0);
	ck_assert_int_eq(llm__parse_retry_after("Tue, 14 Nov 2023 22:13:23 GMT", now, &ms), 0);
	ck_assert_uint_eq(ms, 3000);
	ck_assert_int_eq(llm__parse_retry_after("Tuesday, 14-Nov-23 22:13:30 GMT", now, &ms), 0);
	ck_assert_uint_eq(ms, 10000);
	ck_assert_int_eq(llm__parse_retry_after("Tue Nov 14 22:13:21 2023", now, &ms), 0);
	ck_assert_uint_eq(ms, 1000);
	ck_assert_int_eq(llm__parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now, &ms), 0);
	ck_assert_uint_eq(ms, 0); /* in the past */
	ck_assert_int_eq(llm__parse_retry_after("soon", now, &ms), ST_EINVAL);
	ck_assert_int_eq(llm__parse_retry_after("", now, &ms), ST_EINVAL);
	ck_assert_int_eq(llm__parse_retry_after("-1", now, &ms), ST_EINVAL);
	ck_assert_int_eq(llm__parse_retry_after("5s", now, &ms), ST_EINVAL);
	ck_assert_int_eq(llm__parse_retry_after("Tue, 14 Nov 2023 22:13:23 GMT x", now, &ms),
			 ST_EINVAL);
}
END_TEST

START_TEST(test_backoff)
{
	struct llm_config cfg;
	uint64_t a = 7, b = 7, seen_max = 0;

	llm_config_init(&cfg);
	cfg.backoff_base_ms = 100;
	cfg.backoff_max_ms = 1000;
	for (uint32_t retry = 0; retry < 12; retry++) {
		uint64_t cap = retry >= 4 ? 1000 : 100u << retry;

		for (int i = 0; i < 200; i++) {
			uint64_t x = llm__backoff_ms(&cfg, retry, &a);

			ck_assert_uint_eq(x, llm__backoff_ms(&cfg, retry, &b)); /* seeded */
			ck_assert_uint_le(x, cap);
			if (retry == 11 && x > seen_max)
				seen_max = x;
		}
	}
	ck_assert_uint_gt(seen_max, 800); /* full jitter reaches near the cap */
	cfg.backoff_base_ms = 0;
	ck_assert_uint_eq(llm__backoff_ms(&cfg, 3, &a), 0);
	cfg.backoff_base_ms = 4000000000u;
	cfg.backoff_max_ms = 4000000000u;
	ck_assert_uint_le(llm__backoff_ms(&cfg, 40, &a), 4000000000u);
	ck_assert_int_eq(llm__classify_status(200), LLM__OK);
	ck_assert_int_eq(llm__classify_status(408), LLM__RETRY);
	ck_assert_int_eq(llm__classify_status(429), LLM__RETRY);
	ck_assert_int_eq(llm__classify_status(503), LLM__RETRY);
	ck_assert_int_eq(llm__classify_status(401), LLM__FATAL);
	ck_assert_int_eq(llm__classify_status(422), LLM__FATAL);
	ck_assert_int_eq(llm__classify_status(404), LLM__FAIL);
	ck_assert_int_eq(llm__classify_status(302), LLM__FAIL);
}
END_TEST

/* ---- network: success in both dialects ---- */

START_TEST(test_ok_openai)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(77);
	struct llm_reply r;
	json_t *st;
	uint64_t ms;

	mock_start(&m, "[{\"text\": \"__global__ void k() {}\", \"usage\": [13, 5]}]");
	cfg_for(&cfg, LLM_OPENAI, &m);
	ms = call_one(&cfg, &rq, &r);
	fprintf(stderr, "# ok_openai: %llu ms\n", (unsigned long long)ms);
	ck_assert_msg(r.rc == 0, "%s", r.error);
	ck_assert_str_eq(r.text, "__global__ void k() {}");
	ck_assert_uint_eq(r.tokens_in, 13);
	ck_assert_uint_eq(r.tokens_out, 5);
	ck_assert_uint_eq(r.attempts, 1);
	ck_assert_int_eq(r.http_status, 200);
	ck_assert(!r.fatal);
	ck_assert_ptr_nonnull(r.raw);
	ck_assert_uint_eq(r.raw_len, strlen(r.raw));
	st = mock_stats(&m);
	ck_assert_int_eq(json_integer_value(json_object_get(st, "requests")), 1);
	ck_assert_str_eq(stats_log_str(st, 0, "path"), "/v1/chat/completions");
	ck_assert_str_eq(stats_log_str(st, 0, "auth"), "ok");
	ck_assert_ptr_nonnull(strstr(stats_log_str(st, 0, "body"), "\"role\":\"system\""));
	json_decref(st);
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

START_TEST(test_ok_anthropic)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(5);
	struct llm_reply r;
	char base[80];
	json_t *st;

	mock_start(&m, "[{\"text\": \"<<<IMPROVE BEGIN>>>x<<<IMPROVE END>>>\", \"usage\": [90, "
		       "12]}]");
	cfg_for(&cfg, LLM_ANTHROPIC, &m);
	snprintf(base, sizeof(base), "%s/", m.base); /* a trailing slash is fine */
	cfg.base_url = base;
	call_one(&cfg, &rq, &r);
	ck_assert_msg(r.rc == 0, "%s", r.error);
	ck_assert_str_eq(r.text, "<<<IMPROVE BEGIN>>>x<<<IMPROVE END>>>");
	ck_assert_uint_eq(r.tokens_in, 90);
	ck_assert_uint_eq(r.tokens_out, 12);
	st = mock_stats(&m);
	ck_assert_str_eq(stats_log_str(st, 0, "path"), "/v1/messages");
	ck_assert_str_eq(stats_log_str(st, 0, "auth"), "ok");
	ck_assert_ptr_nonnull(
	    strstr(stats_log_str(st, 0, "body"), "\"system\":\"you write cuda kernels\""));
	json_decref(st);
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

START_TEST(test_no_anchors)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;

	mock_start(&m, "[{\"fault\": \"no_anchors\"}]");
	cfg_for(&cfg, LLM_OPENAI, &m);
	call_one(&cfg, &rq, &r);
	/* well-formed: the client hands it over; anchors are the orchestrator's job */
	ck_assert_int_eq(r.rc, 0);
	ck_assert_ptr_null(strstr(r.text, "<<<"));
	ck_assert_uint_eq(r.attempts, 1);
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

/* ---- network: the dialects of reasoning models ---- */

struct dialect_case {
	const char *name;
	enum llm_api api;
	const char *model;
	enum llm_token_field tf;
	double temp;
	enum llm_thinking thinking;
	const char *effort;
	const char *refused; /* the member a wrong setting gets blamed, or NULL */
	uint64_t tokens_out, reasoning;
};

START_TEST(test_dialects)
{
	/* usage [30, 10]; the mock's default reasoning is 13 words (26 tokens) */
	static const struct dialect_case cases[] = {
	    {"openai-reasoning", LLM_OPENAI, "o3", LLM_TOKENS_MAX_COMPLETION, -1, LLM_THINK_OFF,
	     "high", "max_tokens", 36, 26},
	    {"reasoning-content", LLM_OPENAI, "deepseek-reasoner", LLM_TOKENS_MAX_TOKENS, 0.6,
	     LLM_THINK_OFF, NULL, NULL, 36, 26},
	    {"reasoning-field", LLM_OPENAI, "qwen3", LLM_TOKENS_MAX_TOKENS, 0.6, LLM_THINK_OFF,
	     NULL, NULL, 36, 26},
	    {"think-inline", LLM_OPENAI, "qwq", LLM_TOKENS_MAX_TOKENS, 0.6, LLM_THINK_OFF, NULL,
	     NULL, 10, 0},
	    {"reasoning-apart", LLM_OPENAI, "grok", LLM_TOKENS_MAX_TOKENS, 0.6, LLM_THINK_OFF, NULL,
	     NULL, 36, 26},
	    {"anthropic-thinking", LLM_ANTHROPIC, "claude-t", LLM_TOKENS_MAX_TOKENS, -1,
	     LLM_THINK_BUDGET, NULL, "temperature", 36, 0},
	    {"anthropic-adaptive", LLM_ANTHROPIC, "claude-a", LLM_TOKENS_MAX_TOKENS, 1,
	     LLM_THINK_ADAPTIVE, "max", "thinking", 36, 0},
	};
	char script[1024];
	struct mock m;

	snprintf(script, sizeof(script),
		 "{\"models\": {\"o3\": \"openai-reasoning\", \"deepseek-reasoner\": "
		 "\"reasoning-content\", \"qwen3\": \"reasoning-field\", \"qwq\": "
		 "\"think-inline\", \"grok\": \"reasoning-apart\", \"claude-t\": "
		 "\"anthropic-thinking\", \"claude-a\": \"anthropic-adaptive\"}, "
		 "\"default\": {\"text\": \"```python\\nx = 1\\n```\", \"usage\": [30, 10]}}");
	mock_start(&m, script);
	for (size_t i = 0; i < ST_ARRAY_LEN(cases); i++) {
		const struct dialect_case *k = &cases[i];
		struct llm_request rq = req(i + 1);
		struct llm_config cfg;
		struct llm_reply r;

		cfg_for(&cfg, k->api, &m);
		cfg.model = k->model;
		rq.max_tokens = 4096;
		rq.temperature = k->temp;
		rq.token_field = k->tf;
		rq.thinking = k->thinking;
		rq.thinking_budget = 2048;
		rq.reasoning_effort = k->effort;
		call_one(&cfg, &rq, &r);
		ck_assert_msg(r.rc == 0, "%s: %s", k->name, r.error);
		ck_assert_msg(!strcmp(r.text, "```python\nx = 1\n```"), "%s: text '%s'", k->name,
			      r.text);
		ck_assert_msg(r.tokens_out == k->tokens_out, "%s: %llu tokens out", k->name,
			      (unsigned long long)r.tokens_out);
		ck_assert_uint_eq(r.tokens_reasoning, k->reasoning);
		llm_reply_release(&r);
		if (!k->refused)
			continue;
		/* the settings of an ordinary model: refused at once, the member named */
		rq.token_field = LLM_TOKENS_MAX_TOKENS;
		rq.temperature = 0.5;
		if (k->thinking == LLM_THINK_ADAPTIVE) {
			rq.thinking = LLM_THINK_BUDGET;
			rq.temperature = -1;
		}
		call_one(&cfg, &rq, &r);
		ck_assert_int_eq(r.rc, ST_EHTTP);
		ck_assert(r.fatal);
		ck_assert_int_eq(r.http_status, 400);
		ck_assert_uint_eq(r.attempts, 1);
		ck_assert_msg(!strcmp(r.param, k->refused), "%s: blamed '%s' (%s)", k->name,
			      r.param, r.error);
		llm_reply_release(&r);
	}
	mock_stop(&m);
}
END_TEST

START_TEST(test_reasoning_cut)
{
	struct llm_request rq = req(3);
	struct llm_config cfg;
	struct llm_reply r;
	struct mock m;

	/* a reasoning model that spent its limit thinking: a reply, empty, cut */
	mock_start(&m, "{\"models\": {\"o3\": \"openai-reasoning\"}, \"default\": {\"cut\": true, "
		       "\"usage\": [30, 0], \"reasoning_tokens\": 256}}");
	cfg_for(&cfg, LLM_OPENAI, &m);
	cfg.model = "o3";
	rq.temperature = -1;
	rq.token_field = LLM_TOKENS_MAX_COMPLETION;
	call_one(&cfg, &rq, &r);
	ck_assert_msg(r.rc == 0, "%s", r.error);
	ck_assert_str_eq(r.text, "");
	ck_assert(r.truncated);
	ck_assert_uint_eq(r.tokens_out, 256);
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

/* ---- network: retries ---- */

static void retry_after_case(const char *script, double lo, double hi, const char *name)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;
	json_t *st;
	double gap;

	mock_start(&m, script);
	cfg_for(&cfg, LLM_OPENAI, &m);
	cfg.retry_after_max_ms = 2500;
	call_one(&cfg, &rq, &r);
	ck_assert_msg(r.rc == 0, "%s", r.error);
	ck_assert_str_eq(r.text, "after");
	ck_assert_uint_eq(r.attempts, 2);
	st = mock_stats(&m);
	gap = stats_gap(st, 0);
	fprintf(stderr, "# %s: retry %.3f s after the 429 (want %.2f..%.2f), call %u ms\n", name,
		gap, lo, hi, r.elapsed_ms);
	ck_assert_msg(gap >= lo && gap <= hi, "%s: gap %.3f s", name, gap);
	/* a retry resends the same bytes */
	ck_assert_str_eq(stats_log_str(st, 0, "sha256"), stats_log_str(st, 1, "sha256"));
	json_decref(st);
	llm_reply_release(&r);
	mock_stop(&m);
}

START_TEST(test_429_retry_after_seconds)
{
	retry_after_case("[{\"status\": 429, \"retry_after\": 1}, {\"text\": \"after\"}]", 0.98,
			 1.4, "429_retry_after_seconds");
}
END_TEST

START_TEST(test_429_retry_after_date)
{
	/* an HTTP-date has 1 s resolution: now + 2 s means 1..2 s from now,
	 * or 3 s where the client's whole-second clock reads a second behind
	 * the mock's (seen on the GPU host): then retry_after_max_ms (2.5 s)
	 * caps it */
	retry_after_case("[{\"status\": 429, \"retry_after_date\": 2}, {\"text\": \"after\"}]",
			 0.95, 2.6, "429_retry_after_date");
}
END_TEST

START_TEST(test_429_retry_after_capped)
{
	/* Retry-After 30 s, capped at 2.5 s by retry_after_max_ms */
	retry_after_case("[{\"status\": 429, \"retry_after\": 30}, {\"text\": \"after\"}]", 2.45,
			 2.9, "429_retry_after_capped");
}
END_TEST

/* A 429 holds back every call of the client: one submitted during the
 * wait is not sent before it ends, though it has a backoff of its own. */
START_TEST(test_429_holds_every_call)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request a = req(1), b = req(2);
	struct llm_client *c;
	struct llm_reply r[2];
	uint64_t t0;
	json_t *st;
	int got = 0, n;

	mock_start(&m, "[{\"status\": 429, \"retry_after\": 1}, {\"text\": \"a\"}, "
		       "{\"text\": \"b\"}]");
	cfg_for(&cfg, LLM_OPENAI, &m);
	ck_assert_int_eq(llm_client_new(&cfg, &c), 0);
	ck_assert_int_eq(llm_submit(c, &a), 0);
	t0 = clock_mono_ns();
	while (stats_requests(&m) < 1 && ms_since(t0) < 5000)
		ck_assert_int_ge(llm_poll(c, 20, r, 1), 0);
	/* the 429 is in once the client holds */
	while (!llm_held_ms(c) && ms_since(t0) < 5000)
		ck_assert_int_ge(llm_poll(c, 20, r, 1), 0);
	ck_assert_uint_gt(llm_held_ms(c), 500);
	ck_assert_int_eq(llm_submit(c, &b), 0);
	while (got < 2 && ms_since(t0) < 8000) {
		n = llm_poll(c, 200, r + got, (size_t)(2 - got));
		ck_assert_int_ge(n, 0);
		got += n;
	}
	ck_assert_int_eq(got, 2);
	st = mock_stats(&m);
	/* both calls reached the server a second after the 429, not before */
	ck_assert_msg(stats_gap(st, 0) >= 0.95, "first after the 429: %.3f s", stats_gap(st, 0));
	ck_assert_msg(stats_gap(st, 0) + stats_gap(st, 1) >= 0.95, "second: %.3f s",
		      stats_gap(st, 0) + stats_gap(st, 1));
	json_decref(st);
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(r[i].rc == 0, "%s", r[i].error);
		llm_reply_release(&r[i]);
	}
	llm_client_free(c);
	mock_stop(&m);
}
END_TEST

START_TEST(test_429_past_deadline)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;
	uint64_t ms;

	/* the server asks for 5 s, the call has 1 s: fail now, not at the deadline */
	mock_start(&m, "{\"default\": {\"status\": 429, \"retry_after\": 5}}");
	cfg_for(&cfg, LLM_OPENAI, &m);
	cfg.total_timeout_ms = 1000;
	cfg.retry_after_max_ms = 10000;
	ms = call_one(&cfg, &rq, &r);
	fprintf(stderr, "# 429_past_deadline: %llu ms: %s\n", (unsigned long long)ms, r.error);
	ck_assert_int_eq(r.rc, ST_EHTTP);
	ck_assert_int_eq(r.http_status, 429);
	ck_assert_uint_eq(r.attempts, 1);
	ck_assert(!r.fatal);
	ck_assert_ptr_nonnull(strstr(r.error, "no time left"));
	ck_assert_uint_lt(ms, 800);
	ck_assert_int_eq(stats_requests(&m), 1);
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

START_TEST(test_500_then_ok)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;
	json_t *st;

	mock_start(&m, "[{\"status\": 500}, {\"status\": 502, \"body\": \"<html>bad "
		       "gateway</html>\"}, {\"text\": \"third time\"}]");
	cfg_for(&cfg, LLM_OPENAI, &m);
	call_one(&cfg, &rq, &r);
	ck_assert_msg(r.rc == 0, "%s", r.error);
	ck_assert_str_eq(r.text, "third time");
	ck_assert_uint_eq(r.attempts, 3);
	st = mock_stats(&m);
	ck_assert_int_eq(json_integer_value(json_object_get(st, "requests")), 3);
	ck_assert_str_eq(stats_log_str(st, 0, "sha256"), stats_log_str(st, 2, "sha256"));
	fprintf(stderr, "# 500_then_ok: gaps %.3f s, %.3f s (backoff cap 20/40 ms)\n",
		stats_gap(st, 0), stats_gap(st, 1));
	json_decref(st);
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

START_TEST(test_retries_exhausted)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;
	uint64_t ms;

	mock_start(&m, "{\"default\": {\"status\": 503, \"error\": \"overloaded\"}}");
	cfg_for(&cfg, LLM_ANTHROPIC, &m);
	cfg.max_retries = 2;
	ms = call_one(&cfg, &rq, &r);
	fprintf(stderr, "# retries_exhausted: %llu ms: %s\n", (unsigned long long)ms, r.error);
	ck_assert_int_eq(r.rc, ST_EHTTP);
	ck_assert_int_eq(r.http_status, 503);
	ck_assert_uint_eq(r.attempts, 3);
	ck_assert(!r.fatal);
	ck_assert_ptr_null(r.text);
	ck_assert_ptr_nonnull(strstr(r.error, "http 503"));
	ck_assert_ptr_nonnull(strstr(r.error, "overloaded_error: overloaded"));
	ck_assert_ptr_nonnull(strstr(r.error, "gave up after 3 attempts"));
	ck_assert_int_eq(stats_requests(&m), 3);
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

START_TEST(test_5xx_total_deadline)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;
	uint64_t ms;

	/* unlimited retries of a 500, backoff up to 300 ms: the deadline ends it */
	mock_start(&m, "{\"default\": {\"status\": 500}}");
	cfg_for(&cfg, LLM_OPENAI, &m);
	cfg.max_retries = 1000;
	cfg.backoff_base_ms = 100;
	cfg.backoff_max_ms = 300;
	cfg.total_timeout_ms = 1000;
	ms = call_one(&cfg, &rq, &r);
	fprintf(stderr, "# 5xx_total_deadline: %llu ms, %u attempts\n", (unsigned long long)ms,
		r.attempts);
	ck_assert_int_eq(r.rc, ST_EHTTP);
	ck_assert_int_eq(r.http_status, 500);
	ck_assert_uint_gt(r.attempts, 2);
	ck_assert_uint_le(ms, 1000 + 200);
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

/* ---- network: not retried ---- */

START_TEST(test_fatal_no_retry)
{
	static const long codes[] = {400, 401, 403};
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;
	struct mock m;
	char script[128];

	for (size_t i = 0; i < ST_ARRAY_LEN(codes); i++) {
		snprintf(script, sizeof(script), "[{\"status\": %ld, \"error\": \"nope %ld\"}]",
			 codes[i], codes[i]);
		mock_start(&m, script);
		cfg_for(&cfg, i == 1 ? LLM_ANTHROPIC : LLM_OPENAI, &m);
		call_one(&cfg, &rq, &r);
		ck_assert_int_eq(r.rc, ST_EHTTP);
		ck_assert(r.fatal);
		ck_assert_int_eq(r.http_status, codes[i]);
		ck_assert_uint_eq(r.attempts, 1);
		ck_assert_msg(strstr(r.error, "nope") != NULL, "%s", r.error);
		ck_assert_int_eq(stats_requests(&m), 1);
		llm_reply_release(&r);
		mock_stop(&m);
	}
}
END_TEST

START_TEST(test_401_wrong_key)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;

	/* the server wants another key: a real 401 from the mock's auth check */
	mock_start_key(&m, "[]", "the-right-key-000");
	cfg_for(&cfg, LLM_ANTHROPIC, &m);
	call_one(&cfg, &rq, &r);
	fprintf(stderr, "# 401_wrong_key: %s\n", r.error);
	ck_assert_int_eq(r.rc, ST_EHTTP);
	ck_assert(r.fatal);
	ck_assert_int_eq(r.http_status, 401);
	ck_assert_uint_eq(r.attempts, 1);
	ck_assert_ptr_nonnull(strstr(r.error, "authentication_error"));
	ck_assert_ptr_null(strstr(r.error, KEY));
	ck_assert_int_eq(stats_requests(&m), 1);
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

START_TEST(test_key_redacted)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;

	/* a server that echoes the key back: neither the message nor the raw body keep it */
	mock_start(&m, "[{\"status\": 401, \"error\": \"bad key " KEY "!\"}]");
	cfg_for(&cfg, LLM_OPENAI, &m);
	call_one(&cfg, &rq, &r);
	ck_assert(r.fatal);
	ck_assert_ptr_null(strstr(r.error, KEY));
	ck_assert_ptr_nonnull(strstr(r.error, "bad key ****"));
	ck_assert_ptr_nonnull(r.raw);
	ck_assert_ptr_null(memmem(r.raw, r.raw_len, KEY, strlen(KEY)));
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

START_TEST(test_404_not_retried)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;

	mock_start(&m, "[{\"status\": 404, \"error\": \"no such model\"}]");
	cfg_for(&cfg, LLM_OPENAI, &m);
	call_one(&cfg, &rq, &r);
	ck_assert_int_eq(r.rc, ST_EHTTP);
	ck_assert(!r.fatal);
	ck_assert_int_eq(r.http_status, 404);
	ck_assert_uint_eq(r.attempts, 1);
	ck_assert_int_eq(stats_requests(&m), 1);
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

/* ---- network: deadlines ---- */

START_TEST(test_hang)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;
	uint64_t ms;

	mock_start(&m, "{\"default\": {\"fault\": \"hang\", \"seconds\": 30}}");
	cfg_for(&cfg, LLM_OPENAI, &m);
	cfg.timeout_ms = 400;
	cfg.total_timeout_ms = 1200;
	cfg.max_retries = 100;
	ms = call_one(&cfg, &rq, &r);
	fprintf(stderr, "# hang: ST_ETIMEDOUT after %llu ms (deadline 1200), %u attempts\n",
		(unsigned long long)ms, r.attempts);
	ck_assert_int_eq(r.rc, ST_ETIMEDOUT);
	ck_assert(!r.fatal);
	ck_assert_uint_ge(r.attempts, 2);
	ck_assert_uint_ge(ms, 1150);
	ck_assert_uint_le(ms, 1200 + 400);
	ck_assert_int_le(stats_requests(&m), r.attempts);
	ck_assert_int_ge(stats_requests(&m), 2);
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

START_TEST(test_slow_drip)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;
	uint64_t ms;

	/* 20 bytes/s forever: every attempt times out; the call ends at its deadline */
	mock_start(&m, "{\"default\": {\"fault\": \"drip\", \"interval\": 0.05}}");
	cfg_for(&cfg, LLM_OPENAI, &m);
	cfg.timeout_ms = 600;
	cfg.total_timeout_ms = 1500;
	ms = call_one(&cfg, &rq, &r);
	fprintf(stderr, "# slow_drip: ST_ETIMEDOUT after %llu ms (deadline 1500), %u attempts\n",
		(unsigned long long)ms, r.attempts);
	ck_assert_int_eq(r.rc, ST_ETIMEDOUT);
	ck_assert_uint_ge(ms, 1450);
	ck_assert_uint_le(ms, 1500 + 400);
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

START_TEST(test_low_speed)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;
	uint64_t ms;

	/* 2 bytes/s under a 100 bytes/s floor over 1 s: abandoned long before timeout_ms */
	mock_start(&m, "{\"default\": {\"fault\": \"drip\", \"interval\": 0.5}}");
	cfg_for(&cfg, LLM_OPENAI, &m);
	cfg.timeout_ms = 10000;
	cfg.total_timeout_ms = 10000;
	cfg.max_retries = 0;
	cfg.low_speed_bps = 100;
	cfg.low_speed_ms = 1000;
	ms = call_one(&cfg, &rq, &r);
	fprintf(stderr, "# low_speed: ST_ETIMEDOUT after %llu ms: %s\n", (unsigned long long)ms,
		r.error);
	ck_assert_int_eq(r.rc, ST_ETIMEDOUT);
	ck_assert_uint_eq(r.attempts, 1);
	ck_assert_uint_lt(ms, 4500); /* curl averages speed over a few seconds */
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

/* ---- network: bad bodies ---- */

START_TEST(test_truncated)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;

	mock_start(&m, "[{\"fault\": \"truncate\"}, {\"text\": \"never asked\"}]");
	cfg_for(&cfg, LLM_ANTHROPIC, &m);
	call_one(&cfg, &rq, &r);
	fprintf(stderr, "# truncated: %s\n", r.error);
	ck_assert_int_eq(r.rc, ST_EPROTO);
	ck_assert_ptr_null(r.text);
	ck_assert_ptr_nonnull(r.raw); /* kept for the journal */
	ck_assert_uint_gt(r.raw_len, 10);
	ck_assert_ptr_nonnull(strstr(r.error, "malformed json"));
	ck_assert_uint_eq(r.attempts, 1);
	ck_assert_int_eq(stats_requests(&m), 1); /* a paid-for reply is not bought again */
	llm_reply_release(&r);
	mock_stop(&m);
}
END_TEST

static void huge_case(bool chunked)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;
	uint64_t ms;

	mock_start(&m, chunked ? "[{\"fault\": \"huge\", \"bytes\": 33554432, \"chunked\": true}]"
			       : "[{\"fault\": \"huge\", \"bytes\": 33554432}]");
	cfg_for(&cfg, LLM_OPENAI, &m);
	cfg.max_response_bytes = 256u << 10;
	ms = call_one(&cfg, &rq, &r);
	fprintf(stderr, "# huge (%s): ST_ETOOBIG after %llu ms\n",
		chunked ? "chunked" : "content-length", (unsigned long long)ms);
	ck_assert_int_eq(r.rc, ST_ETOOBIG);
	ck_assert_uint_eq(r.attempts, 1);
	ck_assert_uint_le(r.raw_len, 4096);
	ck_assert_ptr_nonnull(strstr(r.error, "larger than 262144 bytes"));
	ck_assert_uint_lt(ms, 3000);
	llm_reply_release(&r);
	mock_stop(&m);
}

START_TEST(test_huge_length)
{
	huge_case(false);
}
END_TEST

START_TEST(test_huge_chunked)
{
	huge_case(true);
}
END_TEST

/* ---- network: connections ---- */

START_TEST(test_reset_then_ok)
{
	static const char *const faults[] = {"reset", "close"};
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;
	struct mock m;
	char script[128];

	for (size_t i = 0; i < ST_ARRAY_LEN(faults); i++) {
		snprintf(script, sizeof(script), "[{\"fault\": \"%s\"}, {\"text\": \"back\"}]",
			 faults[i]);
		mock_start(&m, script);
		cfg_for(&cfg, LLM_OPENAI, &m);
		call_one(&cfg, &rq, &r);
		ck_assert_msg(r.rc == 0, "%s: %s", faults[i], r.error);
		ck_assert_str_eq(r.text, "back");
		ck_assert_uint_eq(r.attempts, 2);
		ck_assert_int_eq(stats_requests(&m), 2);
		llm_reply_release(&r);
		mock_stop(&m);
	}
}
END_TEST

/* A loopback port with nothing listening. */
static int dead_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

START_TEST(test_refused)
{
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;
	char base[64];
	uint64_t ms;

	snprintf(base, sizeof(base), "http://127.0.0.1:%d/v1", dead_port());
	cfg_for(&cfg, LLM_OPENAI, NULL);
	cfg.base_url = base;
	cfg.max_retries = 2;
	ms = call_one(&cfg, &rq, &r);
	fprintf(stderr, "# refused: %llu ms, %u attempts: %s\n", (unsigned long long)ms, r.attempts,
		r.error);
	ck_assert_int_eq(r.rc, ST_EHTTP);
	ck_assert(!r.fatal);
	ck_assert_int_eq(r.http_status, 0);
	ck_assert_uint_eq(r.attempts, 3);
	ck_assert_ptr_nonnull(strstr(r.error, "gave up after 3 attempts"));
	ck_assert_uint_lt(ms, 1000);
	llm_reply_release(&r);
}
END_TEST

START_TEST(test_bad_url_fatal)
{
	struct llm_config cfg;
	struct llm_request rq = req(1);
	struct llm_reply r;

	cfg_for(&cfg, LLM_OPENAI, NULL);
	cfg.base_url = "gopher://127.0.0.1:1/v1";
	call_one(&cfg, &rq, &r);
	ck_assert_int_eq(r.rc, ST_EHTTP);
	ck_assert(r.fatal);
	ck_assert_uint_eq(r.attempts, 1);
	llm_reply_release(&r);
}
END_TEST

/* ---- network: several calls ---- */

START_TEST(test_concurrent)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_client *c;
	struct llm_message msgs[4][1];
	char prompts[4][32];
	struct llm_reply out[4];
	bool seen[4] = {false};
	uint64_t t0, ms;
	size_t got = 0;
	json_t *st, *hashes, *v;
	const char *h;

	mock_start(&m, "{\"default\": {\"delay\": 1, \"text\": \"slow\"}}");
	cfg_for(&cfg, LLM_OPENAI, &m);
	cfg.max_inflight = 4;
	ck_assert_int_eq(llm_client_new(&cfg, &c), 0);
	t0 = clock_mono_ns();
	for (int i = 0; i < 4; i++) {
		struct llm_request rq = req((uint64_t)i);

		snprintf(prompts[i], sizeof(prompts[i]), "prompt %d", i);
		msgs[i][0].role = "user";
		msgs[i][0].content = prompts[i];
		rq.msgs = msgs[i];
		rq.nmsgs = 1;
		ck_assert_int_eq(llm_submit(c, &rq), 0);
	}
	{
		struct llm_request rq = req(99);

		ck_assert_int_eq(llm_submit(c, &rq), ST_EBUSY);
	}
	ck_assert_uint_eq(llm_inflight(c), 4);
	while (got < 4) {
		int n = llm_poll(c, 500, out + got, 4 - got);

		ck_assert_int_ge(n, 0);
		got += (size_t)n;
		ck_assert_uint_lt(ms_since(t0), 10000);
	}
	ms = ms_since(t0);
	fprintf(stderr, "# concurrent: 4 calls of 1 s each done in %llu ms\n",
		(unsigned long long)ms);
	ck_assert_uint_lt(ms, 1700);
	for (int i = 0; i < 4; i++) {
		ck_assert_msg(out[i].rc == 0, "%s", out[i].error);
		ck_assert_uint_lt(out[i].tag, 4);
		ck_assert(!seen[out[i].tag]);
		seen[out[i].tag] = true;
		llm_reply_release(&out[i]);
	}
	ck_assert_uint_eq(llm_inflight(c), 0);
	llm_client_free(c);
	st = mock_stats(&m);
	ck_assert_int_eq(json_integer_value(json_object_get(st, "requests")), 4);
	ck_assert_int_eq(json_integer_value(json_object_get(st, "max_concurrent")), 4);
	hashes = json_object_get(st, "hashes");
	ck_assert_uint_eq(json_object_size(hashes), 4);
	json_object_foreach(hashes, h, v) ck_assert_int_eq(json_integer_value(v), 1);
	json_decref(st);
	mock_stop(&m);
}
END_TEST

START_TEST(test_backoff_does_not_block)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_client *c;
	struct llm_request a = req(1), b = req(2);
	struct llm_reply out[2];
	uint64_t t0, tb = 0;
	size_t got = 0;

	/* A gets 503 + Retry-After 1; B, submitted while A waits, must not wait
	 * for A (a 429 is another matter: test_429_holds_every_call) */
	mock_start(&m, "[{\"status\": 503, \"retry_after\": 1}, {\"delay\": 0.2, \"text\": \"b\"},"
		       " {\"text\": \"a\"}]");
	cfg_for(&cfg, LLM_OPENAI, &m);
	ck_assert_int_eq(llm_client_new(&cfg, &c), 0);
	t0 = clock_mono_ns();
	ck_assert_int_eq(llm_submit(c, &a), 0);
	while (stats_requests(&m) < 1) {
		ck_assert_int_eq(llm_poll(c, 20, out, 2), 0);
		ck_assert_uint_lt(ms_since(t0), 5000);
	}
	ck_assert_int_eq(llm_poll(c, 50, out, 2), 0); /* A reads its 503, starts waiting */
	ck_assert_int_eq(llm_submit(c, &b), 0);
	while (got < 2) {
		int n = llm_poll(c, 1000, out + got, 2 - got);

		ck_assert_int_ge(n, 0);
		if (n && got == 0)
			tb = ms_since(t0);
		got += (size_t)n;
		ck_assert_uint_lt(ms_since(t0), 10000);
	}
	fprintf(stderr, "# backoff_does_not_block: B done at %llu ms, A at %u ms\n",
		(unsigned long long)tb, out[1].elapsed_ms);
	ck_assert_uint_eq(out[0].tag, 2);
	ck_assert_str_eq(out[0].text, "b");
	ck_assert_uint_lt(out[0].elapsed_ms, 600);
	ck_assert_uint_eq(out[1].tag, 1);
	ck_assert_str_eq(out[1].text, "a");
	ck_assert_uint_ge(out[1].elapsed_ms, 990);
	llm_reply_release(&out[0]);
	llm_reply_release(&out[1]);
	llm_client_free(c);
	mock_stop(&m);
}
END_TEST

START_TEST(test_free_inflight)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_client *c;
	struct llm_request rq = req(1);
	struct llm_reply out;
	uint64_t t0;

	mock_start(&m, "{\"default\": {\"fault\": \"hang\", \"seconds\": 30}}");
	cfg_for(&cfg, LLM_OPENAI, &m);
	ck_assert_int_eq(llm_client_new(&cfg, &c), 0);
	for (uint64_t i = 0; i < 3; i++) {
		rq.tag = i;
		ck_assert_int_eq(llm_submit(c, &rq), 0);
	}
	ck_assert_int_eq(llm_poll(c, 200, &out, 1), 0);
	ck_assert_int_eq(llm_poll(c, 0, &out, 1), 0);
	t0 = clock_mono_ns();
	llm_client_free(c); /* aborts the three transfers; ASan checks nothing leaks */
	ck_assert_uint_lt(ms_since(t0), 200);
	mock_stop(&m);
}
END_TEST

START_TEST(test_poll_idle)
{
	struct llm_config cfg;
	struct llm_client *c;
	struct llm_reply out;
	uint64_t t0;

	cfg_for(&cfg, LLM_OPENAI, NULL);
	ck_assert_int_eq(llm_client_new(&cfg, &c), 0);
	t0 = clock_mono_ns();
	ck_assert_int_eq(llm_poll(c, -1, &out, 1), 0); /* nothing in flight: at once */
	ck_assert_int_eq(llm_poll(c, 1000, &out, 1), 0);
	ck_assert_uint_lt(ms_since(t0), 100);
	llm_client_free(c);
}
END_TEST

/* Every socket the client opened is close-on-exec (children must not inherit them). */
START_TEST(test_sockets_cloexec)
{
	struct mock m;
	struct llm_config cfg;
	struct llm_client *c;
	struct llm_request rq = req(1);
	struct llm_reply out;
	struct dirent *d;
	bool before[1024] = {false};
	int nsock = 0;
	DIR *dir;

	mock_start(&m, "{\"default\": {\"fault\": \"hang\", \"seconds\": 30}}");
	cfg_for(&cfg, LLM_OPENAI, &m);
	dir = opendir("/proc/self/fd"); /* what the test had before the client */
	ck_assert_ptr_nonnull(dir);
	while ((d = readdir(dir)))
		if (atoi(d->d_name) < 1024)
			before[atoi(d->d_name)] = true;
	closedir(dir);
	ck_assert_int_eq(llm_client_new(&cfg, &c), 0);
	ck_assert_int_eq(llm_submit(c, &rq), 0);
	ck_assert_int_eq(stats_requests(&m), 0);
	while (stats_requests(&m) < 1)
		ck_assert_int_eq(llm_poll(c, 50, &out, 1), 0);
	dir = opendir("/proc/self/fd");
	ck_assert_ptr_nonnull(dir);
	while ((d = readdir(dir))) {
		char path[64], link[128];
		ssize_t n;
		int fd = atoi(d->d_name);

		if (d->d_name[0] == '.' || fd == dirfd(dir) || (fd < 1024 && before[fd]))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (!str_starts(link, "socket:") && !str_starts(link, "pipe:") &&
		    !str_starts(link, "anon_inode:"))
			continue;
		nsock += str_starts(link, "socket:");
		ck_assert_msg(fcntl(fd, F_GETFD) & FD_CLOEXEC, "fd %d (%s) is inheritable", fd,
			      link);
	}
	closedir(dir);
	ck_assert_int_ge(nsock, 1);
	llm_client_free(c);
	mock_stop(&m);
}
END_TEST

static Suite *llm_suite(void)
{
	Suite *s = suite_create("llm");
	TCase *pure = tcase_create("pure");
	TCase *net = tcase_create("net");

	tcase_add_test(pure, test_config);
	tcase_add_test(pure, test_body_openai);
	tcase_add_test(pure, test_body_anthropic);
	tcase_add_test(pure, test_body_invalid);
	tcase_add_test(pure, test_body_reasoning);
	tcase_add_test(pure, test_parse_reasoning);
	tcase_add_test(pure, test_error_param);
	tcase_add_test(pure, test_parse_openai);
	tcase_add_test(pure, test_parse_anthropic);
	tcase_add_test(pure, test_parse_bad);
	tcase_add_test(pure, test_error_text);
	tcase_add_test(pure, test_retry_after);
	tcase_add_test(pure, test_backoff);
	tcase_add_test(pure, test_poll_idle);
	suite_add_tcase(s, pure);

	tcase_set_timeout(net, 40);
	tcase_add_test(net, test_ok_openai);
	tcase_add_test(net, test_ok_anthropic);
	tcase_add_test(net, test_no_anchors);
	tcase_add_test(net, test_dialects);
	tcase_add_test(net, test_reasoning_cut);
	tcase_add_test(net, test_429_retry_after_seconds);
	tcase_add_test(net, test_429_retry_after_date);
	tcase_add_test(net, test_429_retry_after_capped);
	tcase_add_test(net, test_429_past_deadline);
	tcase_add_test(net, test_429_holds_every_call);
	tcase_add_test(net, test_500_then_ok);
	tcase_add_test(net, test_retries_exhausted);
	tcase_add_test(net, test_5xx_total_deadline);
	tcase_add_test(net, test_fatal_no_retry);
	tcase_add_test(net, test_401_wrong_key);
	tcase_add_test(net, test_key_redacted);
	tcase_add_test(net, test_404_not_retried);
	tcase_add_test(net, test_hang);
	tcase_add_test(net, test_slow_drip);
	tcase_add_test(net, test_low_speed);
	tcase_add_test(net, test_truncated);
	tcase_add_test(net, test_huge_length);
	tcase_add_test(net, test_huge_chunked);
	tcase_add_test(net, test_reset_then_ok);
	tcase_add_test(net, test_refused);
	tcase_add_test(net, test_bad_url_fatal);
	tcase_add_test(net, test_concurrent);
	tcase_add_test(net, test_backoff_does_not_block);
	tcase_add_test(net, test_free_inflight);
	tcase_add_test(net, test_sockets_cloexec);
	suite_add_tcase(s, net);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(llm_suite());
	int failed;

	setenv("NO_PROXY", "127.0.0.1,localhost", 1); /* the mock is never behind a proxy */
	setenv("no_proxy", "127.0.0.1,localhost", 1);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
