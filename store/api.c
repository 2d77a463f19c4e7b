/*
 * api.c -- the store's public calls on the folder, its runs and their
 * journals: open and close, create a run, its metadata, the list of runs,
 * append and scan events.  Each makes the checks of store.c and hands
 * over to lmdb.c; the per-run locks are lock.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_int.h"

#define DIR_MAX (PATH_MAX - 2 * STORE_RUN_ID_MAX) /* room for locks/ID.lock */

/* The initial map size: STORE__MAP_DEFAULT, or STARK_STORE_MAPSIZE for tests. */
static int map_size(size_t *out)
{
	const char *env = getenv("STARK_STORE_MAPSIZE");
	uint64_t v;

	*out = STORE__MAP_DEFAULT;
	if (!env || !*env)
		return 0;
	if (str_to_u64(env, STORE__MAP_MIN, STORE__MAP_MAX, &v))
		return stark_error(
		    ST_EINVAL,
		    "store: STARK_STORE_MAPSIZE=%.32s is not a byte count from %zu to %zu", env,
		    STORE__MAP_MIN, STORE__MAP_MAX);
	*out = (size_t)v;
	return 0;
}

/* fsyncs a folder, so the entries just created in it survive a power cut. */
static int sync_dir(const char *path)
{
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		rc = stark_error(ST_EIO, "store: cannot sync folder %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return rc;
}

/* fsyncs the folder that holds path (its last component stripped). */
static int sync_parent(const char *path)
{
	char parent[PATH_MAX];
	size_t n = strlen(path);
	char *slash;

	while (n > 1 && path[n - 1] == '/')
		n--;
	memcpy(parent, path, n);
	parent[n] = '\0';
	slash = strrchr(parent, '/');
	if (!slash)
		return sync_dir(".");
	slash[slash == parent] = '\0';
	return sync_dir(parent);
}

int store_open(const char *dir, struct store **out)
{
	char data[PATH_MAX];
	struct store *st;
	struct stat sb;
	bool created = false, fresh;
	size_t mapsize;
	int rc;

	*out = NULL;
	if (!dir || !*dir)
		return stark_error(ST_EINVAL, "store: no folder given");
	if (strlen(dir) >= DIR_MAX)
		return stark_error(ST_ETOOBIG, "store: folder path is longer than %d bytes",
				   DIR_MAX);
	rc = map_size(&mapsize);
	if (rc)
		return rc;
	if (mkdir(dir, 0700) == 0)
		created = true;
	else if (errno != EEXIST)
		return stark_error(ST_ESYS, "store: cannot create folder %s: %s", dir,
				   strerror(errno));
	if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode))
		return stark_error(ST_EINVAL, "store: %s is not a folder", dir);
	snprintf(data, sizeof(data), "%s/data.mdb", dir);
	fresh = access(data, F_OK) != 0;
	rc = store__lock_dir_init(dir);
	if (rc)
		return rc;

	st = calloc(1, sizeof(*st));
	if (!st)
		return ST_ENOMEM;
	st->pid = getpid();
	st->dir = strdup(dir);
	if (!st->dir) {
		rc = ST_ENOMEM;
		goto out_free;
	}
	rc = store__db_open(dir, mapsize, &st->db);
	if (rc)
		goto out_free;
	/* A new environment: make its files' names durable too. */
	if (fresh)
		rc = sync_dir(dir);
	if (!rc && created)
		rc = sync_parent(dir);
	if (rc)
		goto out_close;
	*out = st;
	return 0;
out_close:
	store__db_close(st->db);
out_free:
	free(st->dir);
	free(st);
	return rc;
}

unsigned store_probe_format(const char *dir)
{
	unsigned ver = 0;

	if (!dir || !*dir || strlen(dir) >= DIR_MAX || store__db_format(dir, &ver))
		return 0;
	return ver;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	/* In a forked child the environment is the parent's: leave it alone. */
	if (st->pid == getpid())
		store__db_close(st->db);
	free(st->dir);
	free(st);
}

int store_run_create(struct store *st, const char *run_id, const void *meta, size_t len)
{
	int rc = store__guard(st, "create a run");

	if (!rc)
		rc = store__check_id(run_id);
	if (!rc)
		rc = store__check_meta(run_id, meta, len);
	if (!rc)
		rc = store__db_meta_put(st->db, run_id, meta, len, true);
	return rc;
}

int store_run_meta_put(struct store *st, const char *run_id, const void *meta, size_t len)
{
	int rc = store__guard(st, "update a run");

	if (!rc)
		rc = store__check_id(run_id);
	if (!rc)
		rc = store__check_meta(run_id, meta, len);
	if (!rc)
		rc = store__db_meta_put(st->db, run_id, meta, len, false);
	return rc;
}

int store_run_meta_get(struct store *st, const char *run_id, struct dbuf *out)
{
	int rc = store__guard(st, "read a run");

	if (!rc)
		rc = store__check_id(run_id);
	if (!rc && !out)
		rc = stark_error(ST_EINVAL, "store: read run %s: no output buffer", run_id);
	if (!rc)
		rc = store__db_meta_get(st->db, run_id, out);
	return rc;
}

int store_run_list(struct store *st,
		   int (*cb)(void *arg, const char *run_id, const void *meta, size_t len),
		   void *arg)
{
	int rc = store__guard(st, "list runs");

	if (!rc && !cb)
		rc = stark_error(ST_EINVAL, "store: list runs: no callback");
	if (rc)
		return rc;
	st->in_cb = true;
	rc = store__db_list(st->db, cb, arg);
	st->in_cb = false;
	return rc;
}

int store_append(struct store *st, const char *run_id, struct store_event *ev, size_t n)
{
	int rc = store__guard(st, "append events");

	if (!rc)
		rc = store__check_id(run_id);
	if (!rc)
		rc = store__check_events(run_id, ev, n);
	if (!rc && n)
		rc = store__db_append(st->db, run_id, ev, n);
	return rc;
}

int store_scan(struct store *st, const char *run_id, uint64_t from_seq,
	       int (*cb)(void *arg, const struct store_event *ev), void *arg)
{
	int rc = store__guard(st, "scan a journal");

	if (!rc)
		rc = store__check_id(run_id);
	if (!rc && !cb)
		rc = stark_error(ST_EINVAL, "store: scan run %s: no callback", run_id);
	if (rc)
		return rc;
	st->in_cb = true;
	rc = store__db_scan(st->db, run_id, from_seq, cb, arg);
	st->in_cb = false;
	return rc;
}

int store_last_seq(struct store *st, const char *run_id, uint64_t *seq)
{
	int rc = store__guard(st, "read a journal");

	if (!rc)
		rc = store__check_id(run_id);
	if (!rc && !seq)
		rc = stark_error(ST_EINVAL, "store: read run %s: no output for the sequence number",
				 run_id);
	if (!rc)
		rc = store__db_last_seq(st->db, run_id, seq);
	return rc;
}
