/*
 * cli.h -- the subcommands of `stark` (internal to orchestrator/).
 *
 * Each cmd_* takes the arguments after the subcommand name (argv[0] is the
 * subcommand) and returns the process exit status: 0 success, 1 the job ran
 * but its outcome is negative (e.g. an incorrect candidate), 2 usage or
 * input error, 3 internal or environment failure.
 */
#ifndef STARK_CLI_H
#define STARK_CLI_H

enum cli_exit {
	CLI_OK = 0,
	CLI_NEGATIVE = 1,
	CLI_USAGE = 2,
	CLI_FAILURE = 3
};

int cmd_eval(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_doctor(int argc, char **argv);

/* Path of the stark-eval program: $STARK_EVALUATOR, else beside stark. */
const char *cli_evaluator_path(void);

#endif
