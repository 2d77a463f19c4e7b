/*
 * cmd_show.c -- the commands that read runs: `stark show` (a run, or one
 * node in full), `stark export` (a node's code, or the journal as replay
 * files), `stark list` and `stark report` (the HTML page).  None writes to
 * the store; the rendering is show.c's and report/'s.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "report/report.h"

/* Parses "RUN_ID [--store DIR]" plus the flags given; returns the run id. */
struct common_args {
	const char *id;
	const char *store;
	const char *out;
	bool json;
	const char *what; /* export: "code", "responses", "results", "journal" */
	long node;
};

enum {
	ARG_JSON = 1,	/* --json */
	ARG_OUT = 2,	/* -o FILE */
	ARG_NODE = 4,	/* --node N */
	ARG_EXPORT = 8, /* --fastest, --responses, --results, --journal */
};

static int parse_common(int argc, char **argv, struct common_args *a, unsigned flags,
			const char *usage)
{
	const char *v;

	a->what = "code";
	a->node = EXPORT_BEST;
	for (int i = 1; i < argc; i++) {
		if (cli_opt_value(argc, argv, &i, "--store", &v)) {
			if (!v)
				return CLI_USAGE;
			a->store = v;
		} else if (!strcmp(argv[i], "--json") && (flags & ARG_JSON)) {
			a->json = true;
		} else if ((flags & ARG_OUT) && (cli_opt_value(argc, argv, &i, "-o", &v) ||
						 cli_opt_value(argc, argv, &i, "--output", &v))) {
			if (!v)
				return CLI_USAGE;
			a->out = v;
		} else if ((flags & ARG_NODE) && cli_opt_value(argc, argv, &i, "--node", &v)) {
			uint64_t n;

			if (!v || str_to_u64(v, 0, TREE_NODES_MAX, &n))
				return stark_error(CLI_USAGE, "--node wants a node id");
			a->node = (long)n;
		} else if ((flags & ARG_EXPORT) && !strcmp(argv[i], "--fastest")) {
			a->node = EXPORT_FASTEST;
		} else if ((flags & ARG_EXPORT) &&
			   (!strcmp(argv[i], "--responses") || !strcmp(argv[i], "--results") ||
			    !strcmp(argv[i], "--journal"))) {
			a->what = argv[i] + 2;
		} else if (argv[i][0] == '-' || a->id) {
			return stark_error(CLI_USAGE, "usage: %s", usage);
		} else {
			a->id = argv[i];
		}
	}
	if (!a->id)
		return stark_error(CLI_USAGE, "usage: %s", usage);
	return CLI_OK;
}

/* One node in full: the text view, or {"node", "attempt"} as JSON. */
static int show_node(struct run *r, long node, bool json)
{
	json_t *o = NULL, *n, *att;
	char err[CLI_ERR_MAX];
	int rc;

	if ((uint64_t)node >= tree_count(r->tree))
		return stark_error(CLI_USAGE, "run %s has no node %ld (it has %u)", r->id, node,
				   tree_count(r->tree));
	rc = report_run_json(r, node, &o, err, sizeof(err));
	if (rc) {
		stark_warn("%s", err);
		return CLI_FAILURE;
	}
	if (!json) {
		rc = report_print_node(o, (uint32_t)node, stdout);
		json_decref(o);
		return rc ? CLI_FAILURE : CLI_OK;
	}
	n = json_array_get(json_object_get(o, "nodes"), (size_t)node);
	att = json_array_get(json_object_get(o, "attempt_log"), (size_t)jr_u64(n, "attempt", 0) - 1);
	n = json_pack("{s:O, s:O}", "node", n, "attempt",
		      att && jr_u64(n, "attempt", 0) ? att : json_null());
	rc = !n || json_dumpf(n, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
	json_decref(n);
	json_decref(o);
	fputc('\n', stdout);
	return rc || ferror(stdout) ? CLI_FAILURE : CLI_OK;
}

/*
 * The store and the run a names, the run loaded to be read (no lock): 0,
 * or a CLI_* status with the message printed.  *st and *r are the
 * caller's to free either way (NULL when not opened).
 */
static int open_run(const struct common_args *a, struct store **st, struct run **r)
{
	char err[CLI_ERR_MAX];
	int rc = cli_open_store(a->store, st);

	if (rc)
		return rc;
	rc = run_load(*st, a->id, false, r, err, sizeof(err));
	if (rc) {
		stark_warn("%s", err);
		return rc == ST_ENOENT || rc == ST_EINVAL ? CLI_USAGE : CLI_FAILURE;
	}
	return CLI_OK;
}

/*
 * `stark show BENCH_ID [--json|--csv] [--problems] [--store DIR]`: a bench
 * (bench_show.c); 1 when the id is not a bench's (then a run is shown).
 */
static int show_bench(int argc, char **argv)
{
	const char *id = NULL, *dir = NULL, *fmt = "text", *v;
	bool problems = false;
	struct store *st = NULL;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (cli_opt_value(argc, argv, &i, "--store", &v)) {
			if (!v)
				return CLI_USAGE;
			dir = v;
		} else if (!strcmp(argv[i], "--json")) {
			fmt = "json";
		} else if (!strcmp(argv[i], "--csv")) {
			fmt = "csv";
		} else if (!strcmp(argv[i], "--problems")) {
			problems = true;
		} else if (argv[i][0] == '-') {
			return 1;
		} else if (!id) {
			id = argv[i];
		}
	}
	if (!id || !store_run_id_valid(id) || cli_open_store(dir, &st))
		return 1;
	rc = bench_is(st, id) ? cli_bench_show(st, id, fmt, problems) : 1;
	store_close(st);
	return rc;
}

int cmd_show(int argc, char **argv)
{
	struct common_args a = {0};
	struct store *st = NULL;
	struct run *r = NULL;
	int rc;

	rc = show_bench(argc, argv);
	if (rc != 1)
		return rc;

	rc = parse_common(argc, argv, &a, ARG_JSON | ARG_NODE,
			  "stark show RUN_ID [--node N] [--json] [--store DIR]");
	if (rc)
		return rc;
	rc = open_run(&a, &st, &r);
	if (!rc && a.node >= 0)
		rc = show_node(r, a.node, a.json);
	else if (!rc)
		rc = show_run(r, a.json, stdout) ? CLI_FAILURE : CLI_OK;
	run_free(r);
	store_close(st);
	return rc;
}

int cmd_export(int argc, char **argv)
{
	struct common_args a = {0};
	struct store *st = NULL;
	struct run *r = NULL;
	char err[CLI_ERR_MAX] = "";
	int rc;

	rc = parse_common(argc, argv, &a, ARG_OUT | ARG_NODE | ARG_EXPORT,
			  "stark export RUN_ID [-o FILE] [--node N | --fastest | --responses | "
			  "--results | --journal] [--store DIR]");
	if (rc)
		return rc;
	rc = open_run(&a, &st, &r);
	if (rc)
		goto out_close;
	if (!strcmp(a.what, "code"))
		rc = export_code(r, a.node, a.out, err, sizeof(err));
	else
		rc = export_jsonl(r, a.what, a.out, err, sizeof(err));
	if (rc) {
		stark_warn("%s", err);
		rc = rc == ST_ENOENT ? CLI_NEGATIVE : CLI_FAILURE;
	}
out_close:
	run_free(r);
	store_close(st);
	return rc;
}

/* `stark list --ids[=runs|benches]`: one id a line, for shell completion. */
static int ids_cb(void *arg, const char *id, const void *meta, size_t len)
{
	const char *want = arg;
	json_t *m = json_loadb(meta, len, 0, NULL);
	bool bench = !strcmp(jr_str(m, "kind", ""), "bench");

	json_decref(m);
	if (!strcmp(want, "all") || !strcmp(want, bench ? "benches" : "runs"))
		printf("%s\n", id);
	return 0;
}

/* The ids of a store, never creating or migrating one: completion runs it. */
static int list_ids(const char *store_dir, const char *want)
{
	char def[PROTO_PATH_MAX], data[PROTO_PATH_MAX + 16];
	struct store *st = NULL;
	int rc;

	if (!store_dir && !run_default_store(def, sizeof(def)))
		store_dir = def;
	if (!store_dir ||
	    (size_t)snprintf(data, sizeof(data), "%s/data.mdb", store_dir) >= sizeof(data) ||
	    access(data, R_OK) < 0 || store_probe_format(store_dir) != STORE_FORMAT_VERSION)
		return CLI_OK;
	rc = cli_open_store(store_dir, &st);
	if (rc)
		return rc;
	rc = store_run_list(st, ids_cb, (void *)want) || fflush(stdout) ? CLI_FAILURE : CLI_OK;
	store_close(st);
	return rc;
}

int cmd_list(int argc, char **argv)
{
	const char *store_dir = NULL, *v, *ids = NULL;
	struct store *st = NULL;
	bool json = false;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (cli_opt_value(argc, argv, &i, "--store", &v)) {
			if (!v)
				return CLI_USAGE;
			store_dir = v;
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--ids") || !strcmp(argv[i], "--ids=all")) {
			ids = "all";
		} else if (!strcmp(argv[i], "--ids=runs") || !strcmp(argv[i], "--ids=benches")) {
			ids = argv[i] + 6;
		} else {
			return stark_error(CLI_USAGE, "usage: stark list [--store DIR] [--json]");
		}
	}
	if (ids)
		return list_ids(store_dir, ids);
	rc = cli_open_store(store_dir, &st);
	if (rc)
		return rc;
	rc = show_list(st, json, stdout) ? CLI_FAILURE : CLI_OK;
	store_close(st);
	return rc;
}

int cmd_report(int argc, char **argv)
{
	static const char usage[] = "stark report RUN_ID|BENCH_ID... [-o FILE.html] [--store DIR]";
	const char *store_dir = NULL, *out = NULL, *v, **ids;
	char err[CLI_ERR_MAX] = "", path[PROTO_PATH_MAX];
	struct store *st = NULL;
	struct dbuf html;
	json_t *doc = NULL;
	size_t n = 0;
	int rc;

	ids = calloc((size_t)argc, sizeof(*ids));
	if (!ids)
		return stark_error(CLI_FAILURE, "out of memory");
	for (int i = 1; i < argc; i++) {
		bool is_store = cli_opt_value(argc, argv, &i, "--store", &v);

		if (is_store || cli_opt_value(argc, argv, &i, "-o", &v) ||
		    cli_opt_value(argc, argv, &i, "--output", &v)) {
			if (!v) {
				free(ids);
				return CLI_USAGE;
			}
			if (is_store)
				store_dir = v;
			else
				out = v;
		} else if (argv[i][0] == '-') {
			free(ids);
			return stark_error(CLI_USAGE, "usage: %s", usage);
		} else {
			ids[n++] = argv[i];
		}
	}
	if (!n) {
		free(ids);
		return stark_error(CLI_USAGE, "usage: %s", usage);
	}
	if (!out) {
		snprintf(path, sizeof(path), "%s.html", n == 1 ? ids[0] : "report");
		out = path;
	}
	rc = cli_open_store(store_dir, &st);
	if (rc) {
		free(ids);
		return rc;
	}
	dbuf_init(&html, REPORT_HTML_MAX);
	rc = report_build(st, ids, n, &doc, err, sizeof(err));
	if (rc) {
		stark_warn("%s", err);
		rc = rc == ST_ENOENT || rc == ST_EINVAL ? CLI_USAGE : CLI_FAILURE;
		goto out_free;
	}
	rc = report_html(doc, &html);
	if (rc) {
		stark_warn("cannot render the report: %s%s", stark_strerror(rc),
			   rc == ST_ETOOBIG ? " (larger than REPORT_HTML_MAX)" : "");
		rc = CLI_FAILURE;
		goto out_free;
	}
	if (!strcmp(out, "-"))
		rc = io_write_full(STDOUT_FILENO, html.p, html.len);
	else
		rc = io_write_file_atomic(out, html.p, html.len);
	if (rc) {
		stark_warn("%s: cannot write: %s", out, strerror(errno));
		rc = CLI_FAILURE;
		goto out_free;
	}
	if (strcmp(out, "-"))
		fprintf(stderr, "report written to %s (%zu bytes; it opens offline)\n", out,
			html.len);
	rc = CLI_OK;
out_free:
	dbuf_release(&html);
	json_decref(doc);
	store_close(st);
	free(ids);
	return rc;
}
