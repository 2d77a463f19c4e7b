/*
 * main.c -- `stark`, the command users type.  Dispatches to a subcommand.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "cli/cli.h"
#include "pool/pool.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *usage;
} commands[] = {
	{"eval", cmd_eval, "eval PROBLEM.py SOLUTION.py [--device cpu|cuda[:N]] [--json] ...\n"
			   "  stark eval --batch FILE|- [--jobs N] [--device cpu|cuda[:N]] ..."},
	{"run", cmd_run, "run PROBLEM.py [--run-id ID] [--budget N] [--policy stark|sampling|reflexion] ..."},
	{"bench", cmd_bench, "bench SUITE... [--policies stark,sampling,reflexion] [--budget N] ..."},
	{"resume", cmd_resume, "resume RUN_ID|BENCH_ID [--store DIR]"},
	{"show", cmd_show, "show RUN_ID [--node N] [--json] [--store DIR]\n"
			   "  stark show BENCH_ID [--json|--csv] [--problems] [--store DIR]"},
	{"export", cmd_export, "export RUN_ID [-o FILE] [--store DIR]"},
	{"list", cmd_list, "list [--store DIR]"},
	{"report", cmd_report, "report RUN_ID|BENCH_ID... [-o FILE.html] [--store DIR]"},
	{"doctor", cmd_doctor, "doctor [--device cpu|cuda[:N]] [--json]"},
	{"version", cmd_version, "version [--json]      (also: stark --version)"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: stark COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < ST_ARRAY_LEN(commands); i++)
		fprintf(f, "  stark %s\n", commands[i].usage);
	fprintf(f, "\n`stark COMMAND --help` describes a command's options.\n");
}

int main(int argc, char **argv)
{
	stark_set_progname("stark");
	/* A closed pipe on stdout must be an error we report, not a death. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return CLI_USAGE;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))
		return cmd_version(argc - 1, argv + 1);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return CLI_OK;
	}
	/* Before any evaluator starts: they inherit the lists worked out. */
	evalrun_timing_cpus_resolve();
	for (size_t i = 0; i < ST_ARRAY_LEN(commands); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	stark_warn("unknown command '%s'", argv[1]);
	usage(stderr);
	return CLI_USAGE;
}
