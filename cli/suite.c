/*
 * suite.c -- what `stark bench SUITE...` names: a folder of problem files
 * in KernelBench's layout (a checkout's level1/ as it is: its *.py files,
 * in the order of their leading numbers), a list file (one problem path a
 * line, relative to the list's folder; blank lines and # comments
 * skipped), or single problem files.  A problem's level is --level, else
 * the number of the folder it sits in (level1/ -> 1), else 0.
 */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

#define SUITE_LIST_MAX (4u << 20) /* bytes of a list file */

void cli_suite_release(struct cli_suite *s)
{
	for (size_t i = 0; i < s->n; i++)
		free((char *)s->p[i].path);
	free(s->p);
	memset(s, 0, sizeof(*s));
}

/* The level a folder's name says: "level3" -> 3, else 0. */
static int level_of_dir(const char *path)
{
	char buf[PATH_MAX], *slash;
	const char *base;

	snprintf(buf, sizeof(buf), "%s", path);
	while ((slash = strrchr(buf, '/')) && slash[1] == '\0' && slash != buf)
		*slash = '\0';
	base = strrchr(buf, '/');
	base = base ? base + 1 : buf;
	if (strncmp(base, "level", 5) || !isdigit((unsigned char)base[5]))
		return 0;
	return atoi(base + 5);
}

static int add(struct cli_suite *s, const char *path, int level)
{
	char abs[PATH_MAX], dir[PATH_MAX];
	struct stat sb;

	if (stat(path, &sb) || !S_ISREG(sb.st_mode))
		return stark_error(CLI_USAGE, "bench: problem %s: not a readable file", path);
	if (!realpath(path, abs))
		return stark_error(CLI_USAGE, "bench: problem %s: cannot resolve it", path);
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->p[i].path, abs))
			return 0; /* named twice: once */
	if (s->n == BENCH_PROBLEMS_MAX)
		return stark_error(CLI_USAGE, "bench: more than %d problems", BENCH_PROBLEMS_MAX);
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		struct bench_problem *p = realloc(s->p, cap * sizeof(*p));

		if (!p)
			return stark_error(CLI_FAILURE, "bench: out of memory");
		s->p = p;
		s->cap = cap;
	}
	if (!level) {
		snprintf(dir, sizeof(dir), "%s", abs);
		*strrchr(dir, '/') = '\0';
		level = level_of_dir(dir);
	}
	s->p[s->n].path = strdup(abs);
	s->p[s->n].level = level;
	if (!s->p[s->n].path)
		return stark_error(CLI_FAILURE, "bench: out of memory");
	s->n++;
	return 0;
}

/* KernelBench's order: by the number a name starts with, then by name. */
static int cmp_name(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	long nx = isdigit((unsigned char)*x) ? strtol(x, NULL, 10) : LONG_MAX;
	long ny = isdigit((unsigned char)*y) ? strtol(y, NULL, 10) : LONG_MAX;

	if (nx != ny)
		return nx < ny ? -1 : 1;
	return strcmp(x, y);
}

static int add_dir(struct cli_suite *s, const char *dir, int level)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL, path[PATH_MAX + 300];
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!d)
		return stark_error(CLI_USAGE, "bench: cannot open the folder %s", dir);
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (len < 4 || strcmp(e->d_name + len - 3, ".py") || e->d_name[0] == '.' ||
		    e->d_name[0] == '_')
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*nn));

			if (!nn) {
				rc = stark_error(CLI_FAILURE, "bench: out of memory");
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(e->d_name))) {
			rc = stark_error(CLI_FAILURE, "bench: out of memory");
			break;
		}
		n++;
	}
	closedir(d);
	if (!rc && !n)
		rc = stark_error(CLI_USAGE, "bench: the folder %s holds no .py problem file", dir);
	if (!rc)
		qsort(names, n, sizeof(*names), cmp_name);
	for (size_t i = 0; !rc && i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		rc = add(s, path, level ? level : level_of_dir(dir));
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

static int add_list(struct cli_suite *s, const char *file, int level)
{
	char dir[PATH_MAX], path[2 * PATH_MAX + 2], *save = NULL, *line, *slash;
	struct dbuf text;
	int rc;

	dbuf_init(&text, SUITE_LIST_MAX);
	if (io_read_file(file, SUITE_LIST_MAX, &text)) {
		dbuf_release(&text);
		return stark_error(CLI_USAGE, "bench: cannot read the list %s", file);
	}
	snprintf(dir, sizeof(dir), "%s", file);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	rc = 0;
	for (line = strtok_r(text.p ? text.p : (char *)"", "\n", &save); !rc && line;
	     line = strtok_r(NULL, "\n", &save)) {
		size_t len;

		while (isspace((unsigned char)*line))
			line++;
		len = strlen(line);
		while (len && isspace((unsigned char)line[len - 1]))
			line[--len] = '\0';
		if (!len || line[0] == '#')
			continue;
		if (line[0] == '/')
			snprintf(path, sizeof(path), "%s", line);
		else
			snprintf(path, sizeof(path), "%s/%s", dir, line);
		rc = add(s, path, level);
	}
	dbuf_release(&text);
	if (!rc && !s->n)
		rc = stark_error(CLI_USAGE, "bench: the list %s names no problem", file);
	return rc;
}

int cli_suite_add(struct cli_suite *s, const char *arg, int level)
{
	struct stat sb;
	size_t len = strlen(arg);

	if (stat(arg, &sb))
		return stark_error(CLI_USAGE, "bench: %s: no such file or folder", arg);
	if (S_ISDIR(sb.st_mode))
		return add_dir(s, arg, level);
	if (len > 3 && !strcmp(arg + len - 3, ".py"))
		return add(s, arg, level);
	return add_list(s, arg, level);
}
