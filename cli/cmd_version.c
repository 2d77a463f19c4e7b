/*
 * cmd_version.c -- `stark version [--json]` and `stark --version`: which
 * stark this is (release, commit, wire protocol and store format versions,
 * the prompt set's hash) and what its evaluator will judge with (torch,
 * CUDA, Python, the compilers), which the evaluator itself is asked
 * (`stark-eval --doctor cpu`, outside any jail, for at most
 * VERSION_PROBE_MS).  Every part that cannot be found is reported as such
 * and the command still succeeds: it is what users paste into bug reports.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "cli/cli.h"
#include "pool/pool_int.h"

#define VERSION_PROBE_MS 20000u

/* The prompt set: {"dir", "hash"} or {"dir"?, "error"}. */
static json_t *prompts_json(void)
{
	char dir[PATH_MAX], hash[17], err[CLI_ERR_MAX];

	if (run_prompts_dir(dir, sizeof(dir), err, sizeof(err)))
		return json_pack("{s:s}", "error", err);
	if (run_prompts_set_hash(dir, hash, err, sizeof(err)))
		return json_pack("{s:s, s:s}", "dir", dir, "error", err);
	return json_pack("{s:s, s:s}", "dir", dir, "hash", hash);
}

/* What the evaluator reports of its toolchain: {"path", versions...} or
 * {"path", "error"}. */
static json_t *evaluator_json(void)
{
	struct evalrun_opts o;
	json_t *report = NULL, *out;
	char err[CLI_ERR_MAX];

	evalrun_opts_init(&o);
	o.evaluator = cli_evaluator_path();
	if (access(o.evaluator, X_OK) < 0)
		return json_pack("{s:s, s:s}", "path", o.evaluator, "error",
				 "not there (reinstall stark, or set STARK_EVALUATOR)");
	if (cli_evaluator_probe("cpu", SANDBOX_NONE, &o, VERSION_PROBE_MS, &report, err,
				sizeof(err)))
		return json_pack("{s:s, s:s}", "path", o.evaluator, "error", err);
	out = json_deep_copy(json_object_get(report, "versions"));
	if (!json_is_object(out)) {
		json_decref(out);
		out = json_pack("{s:s}", "error", "the evaluator reported no versions");
	}
	if (out)
		json_object_set_new(out, "path", json_string(o.evaluator));
	json_decref(report);
	return out;
}

json_t *cli_version_json(bool probe)
{
	json_t *o = run_producer_new(NULL);

	if (!o)
		return NULL;
	json_object_set_new(o, "prompts", prompts_json());
	if (probe)
		json_object_set_new(o, "evaluator", evaluator_json());
	return o;
}

static const char *field(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s && *s ? s : "none";
}

static int print_text(const json_t *v)
{
	const json_t *p = json_object_get(v, "prompts"), *e = json_object_get(v, "evaluator");

	printf("stark %s (commit %s)\n", field(v, "release"), field(v, "commit"));
	printf("wire protocol %d, store format %d\n", PROTO_VERSION, STORE_FORMAT_VERSION);
	if (json_object_get(p, "hash"))
		printf("prompts %s (%s)\n", field(p, "hash"), field(p, "dir"));
	else
		printf("prompts: %s\n", field(p, "error"));
	if (json_object_get(e, "error"))
		printf("evaluator %s: %s\n", field(e, "path"), field(e, "error"));
	else
		printf("evaluator %s: torch %s (CUDA %s), python %s; compiler %s; nvcc %s\n",
		       field(e, "path"), field(e, "torch"), field(e, "torch_cuda"),
		       field(e, "python"), field(e, "cxx"), field(e, "nvcc"));
	return fflush(stdout) == EOF ? CLI_FAILURE : CLI_OK;
}

int cmd_version(int argc, char **argv)
{
	bool json = false;
	json_t *v;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: stark version [--json]\n"
			       "  which stark this is, and the torch, CUDA and compilers its "
			       "evaluator uses\n");
			return CLI_OK;
		} else {
			return stark_error(CLI_USAGE, "usage: stark version [--json]");
		}
	}
	v = cli_version_json(true);
	if (!v)
		return stark_error(CLI_FAILURE, "version: out of memory");
	if (json)
		rc = json_dumpf(v, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) ||
			     fputc('\n', stdout) == EOF || fflush(stdout) == EOF
			 ? CLI_FAILURE
			 : CLI_OK;
	else
		rc = print_text(v);
	json_decref(v);
	return rc;
}
