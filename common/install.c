/*
 * install.c -- which stark this is and where its installed parts lie.
 *
 * The release, the commit and the prefix are compiled into this file alone
 * (the Makefile passes STARK_RELEASE, STARK_COMMIT, STARK_LIBEXECDIR and
 * STARK_DATADIR when it builds it), so a new commit rebuilds one object.
 *
 * Parts are looked for, in order:
 *   1. beside the program, as a build tree has them: stark-eval beside
 *      stark, and the data (prompts/, examples/) in the folder above the
 *      build folder (the source tree) or beside the program;
 *   2. relative to the program, as an installed tree has them: for
 *      ROOT/bin/stark (or ROOT/libexec/stark/stark-eval), ROOT/libexec/stark
 *      and ROOT/share/stark, so a tree moved as a whole keeps working;
 *   3. the folders the program was built for ($(PREFIX)/libexec/stark and
 *      $(PREFIX)/share/stark).
 * A candidate counts only where its marker file is there (stark-eval, or
 * prompts/plan.txt).  The STARK_* overrides are the callers' (they come
 * first).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

#ifndef STARK_RELEASE
#define STARK_RELEASE "0.0.0"
#endif
#ifndef STARK_COMMIT
#define STARK_COMMIT "unknown"
#endif
#ifndef STARK_LIBEXECDIR
#define STARK_LIBEXECDIR "/usr/local/libexec/stark"
#endif
#ifndef STARK_DATADIR
#define STARK_DATADIR "/usr/local/share/stark"
#endif

const char *stark_release(void)
{
	return STARK_RELEASE;
}

const char *stark_commit(void)
{
	return STARK_COMMIT[0] ? STARK_COMMIT : "unknown";
}

/* The folder of the running program into buf; false when unknown. */
static bool self_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n <= 0)
		return false;
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	if (!slash || slash == buf)
		return false;
	*slash = '\0';
	return true;
}

/* True when dir ends with the path component(s) tail ("/bin"). */
static bool ends_with(const char *dir, const char *tail)
{
	size_t n = strlen(dir), t = strlen(tail);

	return n > t && !strcmp(dir + n - t, tail);
}

/* Tries dir: copies it into buf when dir/marker is there. */
static bool try_dir(const char *dir, const char *marker, int mode, char *buf, size_t len,
		    struct dbuf *tried)
{
	char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, marker) >= sizeof(path))
		return false;
	if (access(path, mode) == 0) {
		if (!realpath(dir, path))
			snprintf(path, sizeof(path), "%s", dir);
		return (size_t)snprintf(buf, len, "%s", path) < len;
	}
	if (tried && dbuf_printf(tried, "%s%s", tried->len ? ", " : "", path))
		dbuf_reset(tried); /* over its cap: the message names none */
	return false;
}

int stark_part_dir(enum stark_part part, char *buf, size_t len, struct dbuf *tried)
{
	const char *marker = part == STARK_PART_LIBEXEC ? "stark-eval" : "prompts/plan.txt";
	const char *sub = part == STARK_PART_LIBEXEC ? "libexec/stark" : "share/stark";
	int mode = part == STARK_PART_LIBEXEC ? X_OK : R_OK;
	char self[PATH_MAX], cand[PATH_MAX + 32];

	if (tried)
		dbuf_reset(tried);
	if (self_dir(self, sizeof(self))) {
		/* 1. a build tree */
		if (part == STARK_PART_LIBEXEC && try_dir(self, marker, mode, buf, len, NULL))
			return 0;
		if (part == STARK_PART_DATA) {
			snprintf(cand, sizeof(cand), "%s/..", self);
			if (try_dir(cand, marker, mode, buf, len, NULL) ||
			    try_dir(self, marker, mode, buf, len, NULL))
				return 0;
		}
		/* 2. an installed tree, wherever it was moved */
		if (ends_with(self, "/bin"))
			snprintf(cand, sizeof(cand), "%s/../%s", self, sub);
		else if (ends_with(self, "/libexec/stark"))
			snprintf(cand, sizeof(cand), "%s/../../%s", self, sub);
		else
			cand[0] = '\0';
		if (cand[0] && try_dir(cand, marker, mode, buf, len, tried))
			return 0;
	}
	/* 3. where it was installed */
	if (try_dir(part == STARK_PART_LIBEXEC ? STARK_LIBEXECDIR : STARK_DATADIR, marker, mode,
		    buf, len, tried))
		return 0;
	return ST_ENOENT;
}

const char *stark_part_built_for(enum stark_part part)
{
	return part == STARK_PART_LIBEXEC ? STARK_LIBEXECDIR : STARK_DATADIR;
}
