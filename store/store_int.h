/*
 * store_int.h -- what the files of store/ share, and the knobs its unit
 * tests reach.  Not for other modules.
 *
 * store.c checks arguments and guards the handle (pid, re-entry); api.c
 * holds the public calls on the folder, runs and journals; lock.c owns the
 * per-run lock files; lmdb.c is the only file that speaks LMDB and trusts
 * its arguments to have been checked.
 */
#ifndef STARK_STORE_INT_H
#define STARK_STORE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"
#include "store/store.h"

#define STORE__MAP_DEFAULT ((size_t)1 << 30) /* 1 GiB of address space */
#define STORE__MAP_MIN	   ((size_t)64 << 10)
#define STORE__MAP_MAX	   ((size_t)1 << 40) /* growth stops here: ST_ETOOBIG */
#define STORE__FORMAT_PREFIX "stark-store " /* the format record: prefix, version */

struct store_db; /* an open LMDB environment (lmdb.c) */

struct store {
	char *dir;	     /* owned */
	struct store_db *db; /* owned */
	pid_t pid;	     /* the process that opened it */
	bool in_cb;	     /* inside a scan or list callback */
};

/* store.c: checks every public entry makes, each describing what it refuses. */
ST_WUR int store__guard(const struct store *st, const char *what);
ST_WUR int store__check_id(const char *run_id);
ST_WUR int store__check_meta(const char *run_id, const void *meta, size_t len);
ST_WUR int store__check_events(const char *run_id, const struct store_event *ev, size_t n);

/* lmdb.c: arguments are valid run ids and capped sizes. */
ST_WUR int store__db_open(const char *dir, size_t mapsize, struct store_db **out);
void store__db_close(struct store_db *db);
ST_WUR int store__db_meta_put(struct store_db *db, const char *run_id, const void *meta, size_t len,
			      bool create);
ST_WUR int store__db_meta_get(struct store_db *db, const char *run_id, struct dbuf *out);
ST_WUR int store__db_list(struct store_db *db,
			  int (*cb)(void *arg, const char *run_id, const void *meta, size_t len),
			  void *arg);
ST_WUR int store__db_append(struct store_db *db, const char *run_id, struct store_event *ev,
			    size_t n);
ST_WUR int store__db_scan(struct store_db *db, const char *run_id, uint64_t from_seq,
			  int (*cb)(void *arg, const struct store_event *ev), void *arg);
ST_WUR int store__db_last_seq(struct store_db *db, const char *run_id, uint64_t *seq);

/* The format version of the store in dir (0: not one), read only. */
ST_WUR int store__db_format(const char *dir, unsigned *ver);

/* For tests: the current map size in bytes. */
size_t store__db_mapsize(struct store_db *db);
/* For tests: how many dead processes' reader slots the open cleared. */
int store__db_dead_readers(struct store_db *db);
/*
 * For tests: makes the next write transactions fail with an I/O error after
 * `puts` successful record writes (a negative value turns it off), to show
 * that a failed batch leaves nothing behind.
 */
void store__db_fail_after(struct store_db *db, int puts);

/*
 * For tests: makes the next migration fail after its backup is written and
 * before its transaction commits, as a crash there would leave it.
 */
void store__test_fail_migration(bool on);

/* lock.c */
ST_WUR int store__lock_dir_init(const char *dir);

#endif
