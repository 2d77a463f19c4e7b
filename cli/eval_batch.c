/*
 * eval_batch.c -- `stark eval --batch FILE`: judge many pairs, one JSON
 * object per line, in input order.
 *
 * A batch file has one pair per line, "PROBLEM.py SOLUTION.py" (blank lines
 * and lines starting with # are skipped; paths cannot contain blanks).  Up
 * to --jobs evaluations are in flight at once, polled together; the output
 * keeps the input's order (a window of lines may finish ahead).
 * SIGINT/SIGTERM cancel what is in flight and what has not started; each
 * such pair still gets its line, with status "error".
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "evaluator/evaluator.h"
#include "cli/cli.h"

#define BATCH_FILE_MAX (16u << 20) /* bytes of a batch file */

/* ---- batches ------------------------------------------------------------ */

static volatile sig_atomic_t batch_stop;

static void on_stop(int sig)
{
	(void)sig;
	batch_stop = 1;
}

/* One line of the batch. */
struct batch_item {
	char *problem, *solution; /* point into the file's text */
	struct proto_request rq;
	struct evalrun_pair *pair; /* in flight, or NULL */
	char *json;		   /* the line to print, once done */
	bool failed;		   /* could not run: exit status 3 */
	bool correct;
};

struct batch {
	struct batch_item *items;
	size_t n, next_start, next_print, in_flight;
	struct dbuf text;
};

/* Splits the batch file into pairs; 0 or CLI_USAGE with a message. */
static int batch_parse(struct batch *b, const char *file)
{
	char *save = NULL, *line;
	size_t lineno = 0, cap = 0;
	int rc;

	dbuf_init(&b->text, BATCH_FILE_MAX);
	rc = !strcmp(file, "-") ? 0 : io_read_file(file, BATCH_FILE_MAX, &b->text);
	if (!strcmp(file, "-")) {
		char buf[65536];
		ssize_t r;

		while ((r = read(0, buf, sizeof(buf))) != 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 || dbuf_append(&b->text, buf, (size_t)r)) {
				rc = ST_EIO;
				break;
			}
		}
	}
	if (rc)
		return stark_error(CLI_USAGE, "eval: batch file '%s' cannot be read (%s)", file,
				   rc == ST_ETOOBIG ? "too large" : stark_strerror(rc));
	if (!b->text.p)
		return 0;
	for (line = strtok_r(b->text.p, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *words[3] = {NULL}, *ws = NULL;
		size_t k = 0;

		lineno++;
		line[strcspn(line, "\r")] = '\0';
		for (char *w = strtok_r(line, " \t", &ws); w; w = strtok_r(NULL, " \t", &ws))
			words[k < 3 ? k++ : 2] = w;
		if (k == 0 || words[0][0] == '#')
			continue;
		if (k != 2)
			return stark_error(CLI_USAGE, "eval: batch line %zu: expected \"PROBLEM.py SOLUTION.py\"", lineno);
		if (b->n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct batch_item *it = realloc(b->items, ncap * sizeof(*it));

			if (!it)
				return stark_error(CLI_FAILURE, "eval: out of memory");
			b->items = it;
			cap = ncap;
		}
		memset(&b->items[b->n], 0, sizeof(b->items[b->n]));
		b->items[b->n].problem = words[0];
		b->items[b->n].solution = words[1];
		proto_request_init(&b->items[b->n].rq);
		b->n++;
	}
	return 0;
}

static void batch_release(struct batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		evalrun_pair_free(b->items[i].pair);
		proto_request_release(&b->items[i].rq);
		free(b->items[i].json);
	}
	free(b->items);
	dbuf_release(&b->text);
}

/* The line for a pair that was not evaluated: status "error", and why. */
static void item_error(const struct eval_args *a, struct batch_item *it, size_t idx,
		       const char *why)
{
	json_t *o = json_pack("{s:s,s:b,s:s,s:s,s:s,s:s,s:I}", "status", "error", "correct", 0,
			      "message", why, "problem", it->problem, "solution", it->solution,
			      "device", a->device, "index", (json_int_t)idx);

	it->json = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	json_decref(o);
}

/* Starts pair idx (or records why it cannot run). */
static void batch_start(const struct eval_args *a, struct eval_env *e, struct batch *b, size_t idx)
{
	struct batch_item *it = &b->items[idx];
	char err[512], msg[600];
	int rc;

	rc = cli_eval_request(a, it->problem, it->solution, idx, e->cache, &it->rq, err, sizeof(err));
	if (!rc) {
		rc = evalrun_pair_start(&e->copts, &e->ropts, &it->rq, e->mode, &it->pair);
		if (rc) {
			snprintf(err, sizeof(err), "the evaluation could not run: %s", stark_strerror(rc));
			rc = CLI_FAILURE;
		}
	}
	if (!rc) {
		b->in_flight++;
		return;
	}
	snprintf(msg, sizeof(msg), "%s", err);
	it->failed = rc == CLI_FAILURE;
	item_error(a, it, idx, msg);
}

/* A pair is done: its line. */
static void batch_finish(const struct eval_args *a, struct batch *b, size_t idx, int prc)
{
	struct batch_item *it = &b->items[idx];
	struct proto_result rs;
	struct evalrun_info info;
	json_t *o;
	int rc;

	proto_result_init(&rs);
	evalrun_info_init(&info);
	rc = evalrun_pair_finish(it->pair, &rs, &info);
	evalrun_pair_free(it->pair);
	it->pair = NULL;
	b->in_flight--;
	if (rc || prc < 0) {
		it->failed = true;
		item_error(a, it, idx, rc ? "out of memory" : "the run stage could not be started");
	} else {
		o = cli_eval_json(a, it->problem, it->solution, &rs, &info);
		if (o)
			json_object_set_new(o, "index", json_integer((json_int_t)idx));
		it->json = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
		json_decref(o);
		it->correct = rs.status == PROTO_ST_CORRECT;
	}
	evalrun_info_release(&info);
	proto_result_release(&rs);
	proto_request_release(&it->rq);
	proto_request_init(&it->rq);
}

/* Prints every finished line that is next in input order. */
static int batch_print(struct batch *b)
{
	while (b->next_print < b->n && b->items[b->next_print].json) {
		struct batch_item *it = &b->items[b->next_print];

		if (puts(it->json) == EOF || fflush(stdout) != 0)
			return stark_error(CLI_FAILURE, "eval: cannot write the batch's results");
		free(it->json);
		it->json = NULL;
		b->next_print++;
	}
	return 0;
}

/* Polls every pair in flight once, for up to timeout_ms. */
static void batch_poll(const struct eval_args *a, struct batch *b, int timeout_ms)
{
	struct pollfd pfd[BATCH_JOBS_MAX * EVALRUN_POLLFDS];
	size_t n = 0;

	for (size_t i = b->next_print; i < b->next_start; i++) {
		int t = -1;

		if (!b->items[i].pair)
			continue;
		n += evalrun_pair_pollfds(b->items[i].pair, pfd + n, ST_ARRAY_LEN(pfd) - n, &t);
		if (t >= 0 && t < timeout_ms)
			timeout_ms = t;
	}
	if (poll(pfd, (nfds_t)n, timeout_ms) < 0 && errno != EINTR)
		stark_warn("eval: poll: %s", strerror(errno));
	for (size_t i = b->next_print; i < b->next_start; i++) {
		struct batch_item *it = &b->items[i];
		int prc;

		if (!it->pair)
			continue;
		if (batch_stop)
			evalrun_pair_cancel(it->pair);
		prc = evalrun_pair_poll(it->pair, 0);
		if (prc != 0)
			batch_finish(a, b, i, prc);
	}
}

int cli_eval_batch(const struct eval_args *a, struct eval_env *e)
{
	struct batch b = {0};
	struct sigaction sa;
	size_t window = a->jobs * 4 > 16 ? a->jobs * 4 : 16;
	bool all_correct = true, failed = false;
	int rc;

	rc = batch_parse(&b, a->batch);
	if (rc)
		goto out;
	cli_eval_env_zygote(e);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (b.next_print < b.n) {
		/* Start what the jobs and the output window allow. */
		while (!batch_stop && b.next_start < b.n && b.in_flight < a->jobs &&
		       b.next_start - b.next_print < window)
			batch_start(a, e, &b, b.next_start++);
		if (batch_stop)
			for (size_t i = b.next_start; i < b.n; i++)
				if (!b.items[i].json)
					item_error(a, &b.items[i], i, "the evaluation was canceled");
		if (batch_stop)
			b.next_start = b.n;
		rc = batch_print(&b);
		if (rc)
			goto out;
		if (b.in_flight)
			batch_poll(a, &b, 1000);
	}
	for (size_t i = 0; i < b.n; i++) {
		all_correct &= b.items[i].correct;
		failed |= b.items[i].failed;
	}
	rc = batch_stop || failed ? CLI_FAILURE : all_correct ? CLI_OK : CLI_NEGATIVE;
out:
	batch_release(&b);
	return rc;
}
