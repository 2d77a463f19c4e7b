/*
 * lock.c -- one lock file per run, so two stark processes never drive the
 * same run.
 *
 * The lock is flock(LOCK_EX|LOCK_NB) on DIR/locks/RUN_ID.lock.  flock locks
 * belong to the open file description, so the kernel drops them when the
 * holder dies, however it dies; nothing stale is ever left to clean up.  The
 * holder writes its pid into the file for the refusal message; the file
 * itself is never removed (removing a lock file races with a process that
 * has just opened it).  The descriptor is close-on-exec, and the file is
 * opened with O_NOFOLLOW so a planted symlink is refused, not followed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_int.h"

#define PID_TEXT_MAX 24

struct store_lock {
	int fd;
};

int store__lock_dir_init(const char *dir)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/locks", dir) >= (int)sizeof(path))
		return stark_error(ST_ETOOBIG, "store: folder path %s is too long", dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return stark_error(ST_ESYS, "store: cannot create folder %s: %s", path,
				   strerror(errno));
	return 0;
}

/* The lock file of run_id, for `what` (an open store and a valid id first). */
static int lock_path(const struct store *st, const char *run_id, const char *what, char *path,
		     size_t size)
{
	int rc = store__guard(st, what);

	if (!rc)
		rc = store__check_id(run_id);
	if (rc)
		return rc;
	if (snprintf(path, size, "%s/locks/%s.lock", st->dir, run_id) >= (int)size)
		return stark_error(ST_ETOOBIG, "store: lock file path for run %s is too long",
				   run_id);
	return 0;
}

int store_lock_run(struct store *st, const char *run_id, struct store_lock **out)
{
	char path[PATH_MAX], pid[PID_TEXT_MAX];
	struct store_lock *l;
	int fd, n, r, rc;

	*out = NULL;
	rc = lock_path(st, run_id, "lock a run", path, sizeof(path));
	if (rc)
		return rc;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return stark_error(ST_ESYS, "store: cannot open lock file %s: %s", path,
				   strerror(errno));
	do
		r = flock(fd, LOCK_EX | LOCK_NB);
	while (r < 0 && errno == EINTR);
	if (r < 0 && errno == EWOULDBLOCK) {
		rc = ST_EBUSY;
		goto out_close;
	}
	if (r < 0) {
		rc = stark_error(ST_ESYS, "store: cannot lock %s: %s", path, strerror(errno));
		goto out_close;
	}
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
		rc = stark_error(ST_EIO, "store: cannot write the holder's pid to %s: %s", path,
				 strerror(errno));
		goto out_close;
	}
	l = malloc(sizeof(*l));
	if (!l) {
		rc = ST_ENOMEM;
		goto out_close;
	}
	l->fd = fd;
	*out = l;
	return 0;
out_close:
	close(fd); /* drops the lock if we took it */
	return rc;
}

void store_unlock_run(struct store_lock *l)
{
	if (!l)
		return;
	/* Clear the pid while still holding the lock; failing that is harmless. */
	if (ftruncate(l->fd, 0) < 0)
		stark_warn("store: cannot clear a run's lock file: %s", strerror(errno));
	close(l->fd);
	free(l);
}

int store_lock_holder(struct store *st, const char *run_id, pid_t *pid)
{
	char path[PATH_MAX], text[PID_TEXT_MAX];
	uint64_t v;
	ssize_t n;
	char *nl;
	int fd, rc;

	*pid = 0;
	rc = lock_path(st, run_id, "read a run's lock", path, sizeof(path));
	if (rc)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT)
		return ST_ENOENT;
	if (fd < 0)
		return stark_error(ST_ESYS, "store: cannot open lock file %s: %s", path,
				   strerror(errno));
	n = pread(fd, text, sizeof(text) - 1, 0);
	close(fd);
	if (n <= 0)
		return ST_ENOENT;
	text[n] = '\0';
	nl = strchr(text, '\n');
	if (nl)
		*nl = '\0';
	/* Advisory text: anything but a plausible pid reads as "unknown". */
	if (str_to_u64(text, 1, INT32_MAX, &v))
		return ST_ENOENT;
	*pid = (pid_t)v;
	return 0;
}
