/*
 * lock.c -- the lock file that the evaluations on one device share: the
 * GPU's queue (one timing at a time, other GPU work shared) and its memory
 * ledger (evaluator.h, EVAL_FD_LOCK).
 *
 * A GPU's lock is the machine's, not one process's: every stark process of
 * this user that evaluates on that GPU opens the same file, found by the
 * GPU's device minor.  A private lock per process let two processes on one
 * GPU time at once: on an H200, a level-3 batch beside a level-1 batch on
 * the same two GPUs had 41 of 84 evaluations' guard readings stretched by
 * about 300 us (timeslices of the other process's context), and honest
 * copies read 0.78-0.94x; each batch alone, none of 105.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "pool/pool_int.h"

/* Whether dir may hold our lock files: a directory (not a link) that no
 * other user can swap files in -- ours or root's, and, where others may
 * write to it, sticky (as /tmp).  Made (0700) where missing. */
static int lock_dir_ok(const char *dir, char *err, size_t errlen)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return stark_errbuf(err, errlen, ST_ESYS, "cannot create the lock folder %s: %s",
				    dir, strerror(errno));
	if (lstat(dir, &st) < 0)
		return stark_errbuf(err, errlen, ST_ESYS, "cannot read the lock folder %s: %s", dir,
				    strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return stark_errbuf(err, errlen, ST_ESYS,
				    "the lock folder %s is not a folder (a link is refused)", dir);
	if (st.st_uid != geteuid() && st.st_uid != 0)
		return stark_errbuf(err, errlen, ST_ESYS,
				    "the lock folder %s belongs to another user (uid %u): set "
				    "STARK_LOCK_DIR to a folder of your own",
				    dir, (unsigned)st.st_uid);
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		return stark_errbuf(err, errlen, ST_ESYS,
				    "the lock folder %s may be written by others and is not sticky "
				    "(chmod +t or go-w it)",
				    dir);
	return 0;
}

int evalrun_gpu_lock_path(const char *device, char *buf, size_t len, char *err, size_t errlen)
{
	const char *dir = getenv("STARK_LOCK_DIR");
	char own[64], key[32];
	int index, minor, n, rc;

	if (!device || strncmp(device, "cuda", 4) != 0 || (device[4] && device[4] != ':'))
		return stark_errbuf(err, errlen, ST_EINVAL, "no machine-wide lock for device '%s'",
				    device ? device : "(none)");
	index = device[4] == ':' ? atoi(device + 5) : 0;
	minor = evalrun_gpu_minor(EVALRUN_GPUS_DIR, getenv("CUDA_VISIBLE_DEVICES"), index);
	/* By the driver's minor: the same GPU whatever CUDA_VISIBLE_DEVICES
	 * each process has.  Without the driver's folder, by the index. */
	if (minor >= 0)
		snprintf(key, sizeof(key), "gpu%d", minor);
	else
		snprintf(key, sizeof(key), "cuda%d", index);
	if (!dir || !*dir) {
		snprintf(own, sizeof(own), "/tmp/stark-%u", (unsigned)geteuid());
		dir = own;
	}
	if (dir[0] != '/')
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "STARK_LOCK_DIR '%s' is not an absolute path", dir);
	if ((rc = lock_dir_ok(dir, err, errlen)))
		return rc;
	n = snprintf(buf, len, "%s/stark-gpu-lock-%s", dir, key);
	if (n < 0 || (size_t)n >= len)
		return stark_errbuf(err, errlen, ST_EINVAL, "the lock folder's path is too long");
	return 0;
}

int evalrun_gpu_lock_open(const char *path, const char *device, char *err, size_t errlen)
{
	const char *dir = getenv("TMPDIR");
	char tmp[PATH_MAX];
	struct stat st;
	int fd, rc;

	if (!path && device) {
		if ((rc = evalrun_gpu_lock_path(device, tmp, sizeof(tmp), err, errlen)))
			return rc;
		path = tmp;
	}
	if (path) {
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0660);
		if (fd < 0)
			return stark_errbuf(err, errlen, ST_ESYS,
					    "cannot open the GPU lock file %s: %s", path,
					    strerror(errno));
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			return stark_errbuf(err, errlen, ST_ESYS,
					    "the GPU lock %s is not a regular file", path);
		}
		return fd;
	}
	snprintf(tmp, sizeof(tmp), "%s/stark-gpu-lock-XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return stark_errbuf(err, errlen, ST_ESYS, "cannot create the GPU lock file %s: %s",
				    tmp, strerror(errno));
	unlink(tmp);
	return fd;
}
