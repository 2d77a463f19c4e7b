/*
 * paths.c -- where the parts of stark installed beside it are: the
 * evaluator program.  (The prompt templates are found by the engine:
 * run_prompts_dir.)
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static char evaluator_path[PATH_MAX];

const char *cli_evaluator_path(void)
{
	const char *env = getenv("STARK_EVALUATOR");
	char self[PATH_MAX];
	ssize_t n;
	char *slash;

	if (env && *env)
		return env;
	if (evaluator_path[0])
		return evaluator_path;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return "stark-eval";
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return "stark-eval";
	*slash = '\0';
	if (snprintf(evaluator_path, sizeof(evaluator_path), "%s/stark-eval", self) >=
	    (int)sizeof(evaluator_path))
		return "stark-eval";
	return evaluator_path;
}
