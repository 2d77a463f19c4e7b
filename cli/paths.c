/*
 * paths.c -- where the parts of stark installed with it are: the evaluator
 * program.  (The prompt templates are found by the engine:
 * run_prompts_dir; both use common's stark_part_dir.)
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
	char dir[PATH_MAX];

	if (env && *env)
		return env;
	if (evaluator_path[0])
		return evaluator_path;
	/* Not found: the path it was built for, so the error names a real place. */
	if (stark_part_dir(STARK_PART_LIBEXEC, dir, sizeof(dir), NULL))
		snprintf(dir, sizeof(dir), "%s", stark_part_built_for(STARK_PART_LIBEXEC));
	if ((size_t)snprintf(evaluator_path, sizeof(evaluator_path), "%s/stark-eval", dir) >=
	    sizeof(evaluator_path))
		return "stark-eval";
	return evaluator_path;
}
