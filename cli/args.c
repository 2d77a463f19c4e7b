/*
 * args.c -- what the commands of runs share: an option's value, the
 * store folder ($STARK_STORE, else $XDG_DATA_HOME/stark, else
 * ~/.local/share/stark, unless --store DIR is given; created if missing),
 * and the flag SIGINT and SIGTERM set.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

volatile sig_atomic_t cli_stop;

static void on_signal(int sig)
{
	(void)sig;
	cli_stop = 1;
}

void cli_catch_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* Matches "--name VALUE" and "--name=VALUE"; advances *i past the value. */
bool cli_opt_value(int argc, char **argv, int *i, const char *name, const char **val)
{
	size_t n = strlen(name);

	if (strncmp(argv[*i], name, n))
		return false;
	if (argv[*i][n] == '=') {
		*val = argv[*i] + n + 1;
		return true;
	}
	if (argv[*i][n] != '\0')
		return false;
	if (*i + 1 >= argc) {
		stark_warn("option %s needs a value", name);
		*val = NULL;
		return true;
	}
	*val = argv[++*i];
	return true;
}

bool cli_name_in(const char *name, const char *const *list)
{
	for (size_t i = 0; name && list[i]; i++)
		if (!strcmp(name, list[i]))
			return true;
	return false;
}

int cli_kb_trials(const char *cmd, const char *v, int *out)
{
	uint64_t n;

	if (!v || str_to_u64(v, 0, PROTO_TRIALS_MAX, &n)) {
		stark_error(CLI_USAGE, "%s: --kb-trials must be 0..%u, not '%s'", cmd, PROTO_TRIALS_MAX,
			    v ? v : "");
		return -1;
	}
	*out = n ? (int)n : -1;
	return 0;
}

int cli_language_format(const char *cmd, const char *language, const char *device,
			const char **format, const char **precision)
{
	if (language && strcmp(language, "cuda") && strcmp(language, "triton") &&
	    strcmp(language, "auto")) {
		stark_warn("%s: --language must be cuda or triton (the agents write one of them), not '%s'",
			   cmd, language);
		return -1;
	}
	if (language && !strcmp(language, "triton")) {
		if (*format && strcmp(*format, "triton")) {
			stark_warn("%s: --language triton writes the triton format, not --format %s", cmd,
				   *format);
			return -1;
		}
		*format = "triton";
	}
	if (!*format)
		*format = str_starts(device, "cuda") ? "fast" : "kernelbench";
	if (strcmp(*format, "kernelbench") && strcmp(*format, "fast") && strcmp(*format, "triton")) {
		stark_warn("%s: --format must be kernelbench, fast or triton, not '%s'", cmd, *format);
		return -1;
	}
	if (!strcmp(*format, "triton") && !str_starts(device, "cuda")) {
		stark_warn("%s: Triton kernels run on CUDA devices only (--device cuda)", cmd);
		return -1;
	}
	if (!*precision)
		*precision = "fp32";
	if (!cli_name_in(*precision, proto_precisions)) {
		stark_warn("%s: --precision must be fp32, fp16 or bf16, not '%s'", cmd, *precision);
		return -1;
	}
	return 0;
}

int cli_open_store(const char *dir, struct store **st)
{
	char def[PROTO_PATH_MAX];
	int rc;

	if (!dir) {
		if (run_default_store(def, sizeof(def)))
			return stark_error(
			    CLI_USAGE,
			    "no store folder: set STARK_STORE or HOME, or pass --store DIR");
		dir = def;
	}
	if (io_mkdir_p(dir))
		return stark_error(CLI_FAILURE, "store %s: cannot create the folder: %s", dir,
				   strerror(errno));
	rc = store_open(dir, st);
	if (rc)
		return stark_error(CLI_FAILURE, "store %s: cannot open: %s", dir,
				   stark_strerror(rc));
	return CLI_OK;
}
