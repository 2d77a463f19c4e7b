/*
 * lmdb.c -- the store's only contact with LMDB.  It is longer than the 800
 * lines a file should stay under because it is the whole of LMDB in stark
 * (transactions, the map's growth, readers, the store's format and its
 * migration): each foreign runtime stays in one file, where its codes are
 * mapped to ours.
 *
 * Layout: one environment in the store folder, default (fully synced) mode,
 * MDB_NOTLS, with three named databases:
 *   info     "format" -> "stark-store N" (checked at open; an older N is
 *            migrated: migrate()), "migrated" -> a note of the last migration
 *   runs     run id (no NUL) -> the run's metadata, as the caller gave it
 *   journal  run id, NUL, seq as big-endian u64 -> type as big-endian u32,
 *            then the payload
 * so the journal sorts by run, then by seq, and one run's events are one
 * contiguous key range (a NUL sorts below every byte a run id may hold).
 *
 * Every write goes through db_write(), which runs a transaction body and
 * commits it; when LMDB reports MDB_MAP_FULL (from a put or from the
 * commit) the transaction is aborted, the map doubled and the body replayed
 * from scratch, so a body must compute everything inside the transaction.
 * Every transaction begins through txn_begin(), which adopts the size
 * another process grew the map to when LMDB says MDB_MAP_RESIZED, and
 * clears dead readers' slots when it says MDB_READERS_FULL.
 *
 * LMDB and errno codes are mapped to ST_E* by db_err(), the one place that
 * also words them (with mdb_strerror()).  Functions here return either an
 * LMDB code (names start with db_/txn_ or end in _txn) or ST_E* (the
 * store__db_* entry points), never a mix.
 */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/store_int.h"

#define JKEY_MAX (STORE_RUN_ID_MAX + 1 + 8)
#define TYPE_LEN 4
#define MAX_DBS	 4
#define RETRIES	 4 /* to begin a transaction after MDB_MAP_RESIZED or MDB_READERS_FULL */

/* Our own outcomes in LMDB's code space (LMDB's are <= -30600, errno's > 0). */
#define DB_EMALFORMED (-1) /* a record is malformed; already described */
#define DB_EFORMAT    (-2) /* the store has another format; already described */
#define DB_EMIGRATE   (-3) /* the store has an older format: migrate it */

struct store_db {
	MDB_env *env;
	MDB_dbi info, runs, journal;
	int dead_readers; /* stale reader slots cleared at open */
	int fail_after;	  /* fault injection: fail puts past this many; -1 off */
	int puts;	  /* records put by the current write transaction */
};

typedef int (*txn_body)(struct store_db *db, MDB_txn *txn, void *arg);

/* Maps an LMDB or errno code to ST_E*, describing every unexpected one. */
static int db_err(int mrc, const char *what, const char *obj)
{
	int rc;

	switch (mrc) {
	case 0:
		return 0;
	case MDB_NOTFOUND:
		return ST_ENOENT;
	case MDB_KEYEXIST:
		return ST_EEXIST;
	case DB_EMALFORMED:
		return ST_EIO;
	case DB_EFORMAT:
		return ST_EVERSION;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
	case MDB_BAD_VALSIZE:
	case MDB_DBS_FULL:
	case MDB_PAGE_FULL:
	case MDB_CURSOR_FULL:
		rc = ST_ETOOBIG;
		break;
	case MDB_VERSION_MISMATCH:
	case MDB_INVALID:
	case MDB_INCOMPATIBLE:
		rc = ST_EVERSION;
		break;
	case MDB_READERS_FULL:
	case MDB_TLS_FULL:
		rc = ST_EBUSY;
		break;
	case ENOMEM:
		rc = ST_ENOMEM;
		break;
	case EIO:
	case ENOSPC:
	case EDQUOT:
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_PANIC:
		rc = ST_EIO;
		break;
	default:
		rc = mrc > 0 ? ST_ESYS : ST_EIO;
		break;
	}
	stark_warn("store: %s %s: %s", what, obj, mdb_strerror(mrc));
	return rc;
}

static void put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static uint64_t get_be64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void put_be32(unsigned char *p, uint32_t v)
{
	for (int i = 3; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Fills kb (JKEY_MAX bytes) with the journal key of (run_id, seq). */
static MDB_val jkey(unsigned char *kb, const char *run_id, size_t idlen, uint64_t seq)
{
	MDB_val k = {idlen + 1 + 8, kb};

	memcpy(kb, run_id, idlen);
	kb[idlen] = '\0';
	put_be64(kb + idlen + 1, seq);
	return k;
}

/* True when k is a journal key of the run whose key prefix is in kb. */
static bool in_run(const MDB_val *k, const unsigned char *kb, size_t idlen)
{
	return k->mv_size >= idlen + 1 && memcmp(k->mv_data, kb, idlen + 1) == 0;
}

static int txn_begin(struct store_db *db, unsigned flags, MDB_txn **txn)
{
	int mrc, dead;

	for (int tries = 0;; tries++) {
		mrc = mdb_txn_begin(db->env, NULL, flags, txn);
		if (tries == RETRIES)
			return mrc;
		if (mrc == MDB_MAP_RESIZED) {
			/* Another process grew the map past ours: adopt its size. */
			mrc = mdb_env_set_mapsize(db->env, 0);
		} else if (mrc == MDB_READERS_FULL) {
			/* Slots of readers that died since we opened: clear them. */
			mrc = mdb_reader_check(db->env, &dead);
			if (!mrc && !dead)
				return MDB_READERS_FULL;
		} else {
			return mrc;
		}
		if (mrc)
			return mrc;
	}
}

/* Doubles the map; MDB_MAP_FULL once it has reached STORE__MAP_MAX. */
static int db_grow(struct store_db *db)
{
	MDB_envinfo info;
	size_t size;
	int mrc;

	mrc = mdb_env_info(db->env, &info);
	if (mrc)
		return mrc;
	if (info.me_mapsize >= STORE__MAP_MAX)
		return MDB_MAP_FULL;
	size = info.me_mapsize > STORE__MAP_MAX / 2 ? STORE__MAP_MAX : info.me_mapsize * 2;
	return mdb_env_set_mapsize(db->env, size);
}

/*
 * Runs body in a write transaction and commits it, growing the map and
 * replaying the whole transaction while LMDB says the map is full.  No other
 * transaction of this handle is open here (store.c forbids re-entry), which
 * mdb_env_set_mapsize() requires.
 */
static int db_write(struct store_db *db, txn_body body, void *arg)
{
	MDB_txn *txn;
	int mrc;

	for (;;) {
		mrc = txn_begin(db, 0, &txn);
		if (mrc)
			return mrc;
		db->puts = 0;
		mrc = body(db, txn, arg);
		if (mrc)
			mdb_txn_abort(txn);
		else
			mrc = mdb_txn_commit(txn); /* frees txn, even on failure */
		if (mrc != MDB_MAP_FULL)
			return mrc;
		mrc = db_grow(db);
		if (mrc)
			return mrc;
	}
}

/* mdb_put, counted for fault injection. */
static int db_put(struct store_db *db, MDB_txn *txn, MDB_dbi dbi, MDB_val *k, MDB_val *v,
		  unsigned flags)
{
	if (db->fail_after >= 0 && db->puts >= db->fail_after)
		return EIO;
	db->puts++;
	return mdb_put(txn, dbi, k, v, flags);
}

static int run_exists_txn(struct store_db *db, MDB_txn *txn, const char *run_id, size_t idlen)
{
	MDB_val k = {idlen, (void *)run_id}, v;

	return mdb_get(txn, db->runs, &k, &v);
}

/* The last seq of a run's journal (0 when empty): the key just below (run, max). */
static int last_seq_txn(struct store_db *db, MDB_txn *txn, const char *run_id, size_t idlen,
			uint64_t *seq)
{
	unsigned char kb[JKEY_MAX];
	MDB_val k = jkey(kb, run_id, idlen, UINT64_MAX), v;
	MDB_cursor *c;
	int mrc;

	*seq = 0;
	mrc = mdb_cursor_open(txn, db->journal, &c);
	if (mrc)
		return mrc;
	mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	if (mrc == 0)
		mrc = mdb_cursor_get(c, &k, &v, MDB_PREV);
	else if (mrc == MDB_NOTFOUND)
		mrc = mdb_cursor_get(c, &k, &v, MDB_LAST);
	if (mrc == MDB_NOTFOUND) {
		mrc = 0;
		goto out_close;
	}
	if (mrc || !in_run(&k, kb, idlen))
		goto out_close;
	if (k.mv_size != idlen + 1 + 8) {
		stark_warn("store: journal of run %s holds a key of %zu bytes", run_id, k.mv_size);
		mrc = DB_EMALFORMED;
		goto out_close;
	}
	*seq = get_be64((const unsigned char *)k.mv_data + idlen + 1);
out_close:
	mdb_cursor_close(c);
	return mrc;
}

/* The version in a format record, 0 when it is not one ("stark-store N"). */
static unsigned format_version(const MDB_val *v)
{
	static const char pre[] = STORE__FORMAT_PREFIX;
	const char *p = v->mv_data;
	size_t n = sizeof(pre) - 1;
	unsigned ver = 0;

	if (v->mv_size <= n || v->mv_size > n + 6 || memcmp(p, pre, n) != 0)
		return 0;
	for (; n < v->mv_size; n++) {
		if (p[n] < '0' || p[n] > '9')
			return 0;
		ver = ver * 10 + (unsigned)(p[n] - '0');
	}
	return ver;
}

static MDB_val format_record(char *buf, size_t len, unsigned ver)
{
	int n = snprintf(buf, len, STORE__FORMAT_PREFIX "%u", ver);

	return (MDB_val){(size_t)n, buf};
}

struct open_op {
	const char *dir;
	unsigned found; /* the store's format version */
};

static int open_txn(struct store_db *db, MDB_txn *txn, void *arg)
{
	struct open_op *op = arg;
	const char *dir = op->dir;
	char fmt[32];
	MDB_val k = {6, (void *)"format"}, v, nv;
	MDB_dbi main;
	MDB_stat ms;
	int mrc;

	mrc = mdb_dbi_open(txn, "info", 0, &db->info);
	if (mrc == MDB_NOTFOUND) {
		/* A new store, unless the environment already holds something else. */
		mrc = mdb_dbi_open(txn, NULL, 0, &main);
		if (!mrc)
			mrc = mdb_stat(txn, main, &ms);
		if (mrc)
			return mrc;
		if (ms.ms_entries) {
			stark_warn("store: %s holds an LMDB environment that is not a STARK store",
				   dir);
			return DB_EFORMAT;
		}
		nv = format_record(fmt, sizeof(fmt), STORE_FORMAT_VERSION);
		mrc = mdb_dbi_open(txn, "info", MDB_CREATE, &db->info);
		if (!mrc)
			mrc = mdb_put(txn, db->info, &k, &nv, 0);
	}
	if (!mrc)
		mrc = mdb_dbi_open(txn, "runs", MDB_CREATE, &db->runs);
	if (!mrc)
		mrc = mdb_dbi_open(txn, "journal", MDB_CREATE, &db->journal);
	if (!mrc)
		mrc = mdb_get(txn, db->info, &k, &v);
	if (mrc)
		return mrc;
	op->found = format_version(&v);
	if (!op->found) {
		stark_warn("store: %s holds store format '%.*s', which no stark reads", dir,
			   (int)(v.mv_size < 64 ? v.mv_size : 64), (const char *)v.mv_data);
		return DB_EFORMAT;
	}
	if (op->found > STORE_FORMAT_VERSION) {
		stark_warn("store: %s has store format %u, newer than this stark's (%d): a newer "
			   "stark wrote it; use that stark (or a newer one) with it, or give this "
			   "one another store (--store DIR or STARK_STORE)",
			   dir, op->found, STORE_FORMAT_VERSION);
		return DB_EFORMAT;
	}
	return op->found < STORE_FORMAT_VERSION ? DB_EMIGRATE : 0;
}

/* ---- migration of an older format ---- */

static bool fail_migration; /* tests: store__test_fail_migration */

void store__test_fail_migration(bool on)
{
	fail_migration = on;
}

/* fsyncs a file or folder by path; an errno value or 0. */
static int sync_path(const char *path, bool dir)
{
	int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_WRONLY) | O_CLOEXEC), e = 0;

	if (fd < 0)
		return errno;
	if (fsync(fd) < 0)
		e = errno;
	close(fd);
	return e;
}

/*
 * Copies the environment, compacted, to DIR/backups/format-N-STAMP/data.mdb
 * through a ".part" folder renamed once synced.  An errno or LMDB code, or
 * 0 with the backup's folder in out.
 */
static int backup(struct store_db *db, const char *dir, unsigned ver, char *out, size_t len)
{
	char backups[PATH_MAX], part[PATH_MAX], file[PATH_MAX], stamp[32];
	time_t t = time(NULL);
	struct tm tm;
	int fd, mrc;

	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	if ((size_t)snprintf(backups, sizeof(backups), "%s/backups", dir) >= sizeof(backups))
		return ENAMETOOLONG;
	if (mkdir(backups, 0700) < 0 && errno != EEXIST)
		return errno;
	/* A name no earlier backup (or a crashed one's .part) has. */
	for (int i = 0;; i++) {
		if (i == 100)
			return EEXIST;
		if ((size_t)snprintf(out, len, "%s/format-%u-%s-%d", backups, ver, stamp, i) >= len ||
		    (size_t)snprintf(part, sizeof(part), "%s.part", out) >= sizeof(part) ||
		    (size_t)snprintf(file, sizeof(file), "%s/data.mdb", part) >= sizeof(file))
			return ENAMETOOLONG;
		if (access(out, F_OK) == 0)
			continue;
		if (mkdir(part, 0700) == 0)
			break;
		if (errno != EEXIST)
			return errno;
	}
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	mrc = mdb_env_copyfd2(db->env, fd, MDB_CP_COMPACT);
	if (!mrc && fsync(fd) < 0)
		mrc = errno;
	close(fd);
	if (!mrc)
		mrc = sync_path(part, true);
	if (!mrc && rename(part, out) < 0)
		mrc = errno;
	if (!mrc)
		mrc = sync_path(backups, true);
	if (!mrc)
		mrc = sync_path(dir, true);
	return mrc;
}

struct migrate_op {
	const char *dir;
	unsigned from;
};

/*
 * From format 1 to 2: runs gain records the store does not read (the stark
 * that made them, their prompts: engine.h), so what changes is the format
 * record, and a record of the migration.
 */
static int migrate_txn(struct store_db *db, MDB_txn *txn, void *arg)
{
	struct migrate_op *op = arg;
	MDB_val k = {6, (void *)"format"}, v, nv, mk = {8, (void *)"migrated"};
	char fmt[32], note[160];
	int mrc, n;

	mrc = mdb_dbi_open(txn, "info", 0, &db->info);
	if (!mrc)
		mrc = mdb_get(txn, db->info, &k, &v);
	if (mrc)
		return mrc;
	if (format_version(&v) != op->from)
		return 0; /* another process migrated it meanwhile */
	n = snprintf(note, sizeof(note), "format %u to %d by stark %s at %lld", op->from,
		     STORE_FORMAT_VERSION, stark_release(), (long long)time(NULL));
	nv = format_record(fmt, sizeof(fmt), STORE_FORMAT_VERSION);
	mrc = db_put(db, txn, db->info, &k, &nv, 0);
	if (!mrc)
		mrc = db_put(db, txn, db->info, &mk, &(MDB_val){(size_t)n, note}, 0);
	if (!mrc && fail_migration)
		mrc = EIO;
	return mrc;
}

static int migrate(struct store_db *db, const char *dir, unsigned from)
{
	struct migrate_op op = {dir, from};
	char saved[PATH_MAX];
	int mrc;

	mrc = backup(db, dir, from, saved, sizeof(saved));
	if (mrc) {
		stark_warn("store: %s has store format %u; this stark (format %d) migrates it after "
			   "a backup, and the backup failed: %s",
			   dir, from, STORE_FORMAT_VERSION,
			   mrc > 0 ? strerror(mrc) : mdb_strerror(mrc));
		return mrc;
	}
	mrc = db_write(db, migrate_txn, &op);
	if (mrc) {
		stark_warn("store: %s: migrating format %u to %d failed (the store is unchanged; "
			   "its backup is %s): %s",
			   dir, from, STORE_FORMAT_VERSION, saved,
			   mrc > 0 ? strerror(mrc) : mdb_strerror(mrc));
		return mrc;
	}
	stark_warn("store: %s migrated from format %u to %d; the format-%u store was saved as "
		   "%s",
		   dir, from, STORE_FORMAT_VERSION, from, saved);
	return 0;
}

int store__db_open(const char *dir, size_t mapsize, struct store_db **out)
{
	struct open_op op = {dir, 0};
	struct store_db *db;
	int mrc, fd, fl, dead = 0, rc;

	*out = NULL;
	db = calloc(1, sizeof(*db));
	if (!db)
		return ST_ENOMEM;
	db->fail_after = -1;
	mrc = mdb_env_create(&db->env);
	if (mrc) {
		rc = db_err(mrc, "cannot create an environment for", dir);
		goto out_free;
	}
	mrc = mdb_env_set_maxdbs(db->env, MAX_DBS);
	if (!mrc)
		mrc = mdb_env_set_mapsize(db->env, mapsize);
	if (!mrc)
		mrc = mdb_env_open(db->env, dir, MDB_NOTLS, 0600);
	if (mrc) {
		rc = db_err(mrc, "cannot open", dir);
		goto out_close;
	}
	/* LMDB opens its data file without close-on-exec; children inherit it. */
	mrc = mdb_env_get_fd(db->env, &fd);
	if (!mrc && ((fl = fcntl(fd, F_GETFD)) < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0))
		mrc = errno;
	if (mrc) {
		rc = db_err(mrc, "cannot make the data file close-on-exec in", dir);
		goto out_close;
	}
	/* Clear reader slots left by processes that died in a read. */
	mrc = mdb_reader_check(db->env, &dead);
	db->dead_readers = dead;
	if (!mrc)
		mrc = db_write(db, open_txn, &op);
	if (mrc == DB_EMIGRATE) {
		if (migrate(db, dir, op.found)) {
			rc = ST_EIO; /* described */
			goto out_close;
		}
		mrc = db_write(db, open_txn, &op);
	}
	if (mrc) {
		rc = db_err(mrc, "cannot open", dir);
		goto out_close;
	}
	*out = db;
	return 0;
out_close:
	mdb_env_close(db->env);
out_free:
	free(db);
	return rc;
}

void store__db_close(struct store_db *db)
{
	if (!db)
		return;
	mdb_env_close(db->env);
	free(db);
}

size_t store__db_mapsize(struct store_db *db)
{
	MDB_envinfo info;

	return mdb_env_info(db->env, &info) ? 0 : info.me_mapsize;
}

int store__db_dead_readers(struct store_db *db)
{
	return db->dead_readers;
}

void store__db_fail_after(struct store_db *db, int puts)
{
	db->fail_after = puts;
}

struct meta_op {
	const char *run_id;
	const void *meta;
	size_t len;
	bool create;
};

static int meta_put_txn(struct store_db *db, MDB_txn *txn, void *arg)
{
	struct meta_op *op = arg;
	MDB_val k = {strlen(op->run_id), (void *)op->run_id};
	MDB_val v = {op->len, (void *)op->meta};
	int mrc;

	if (!op->create) {
		mrc = run_exists_txn(db, txn, op->run_id, k.mv_size);
		if (mrc)
			return mrc;
	}
	return db_put(db, txn, db->runs, &k, &v, op->create ? MDB_NOOVERWRITE : 0);
}

int store__db_meta_put(struct store_db *db, const char *run_id, const void *meta, size_t len,
		       bool create)
{
	struct meta_op op = {run_id, len ? meta : "", len, create};

	return db_err(db_write(db, meta_put_txn, &op),
		      create ? "cannot create run" : "cannot update the metadata of run", run_id);
}

int store__db_meta_get(struct store_db *db, const char *run_id, struct dbuf *out)
{
	MDB_val k = {strlen(run_id), (void *)run_id}, v;
	MDB_txn *txn;
	int mrc, rc;

	dbuf_reset(out);
	mrc = txn_begin(db, MDB_RDONLY, &txn);
	if (mrc)
		return db_err(mrc, "cannot read run", run_id);
	mrc = mdb_get(txn, db->runs, &k, &v);
	if (mrc) {
		rc = db_err(mrc, "cannot read the metadata of run", run_id);
		goto out_abort;
	}
	rc = dbuf_append(out, v.mv_size ? v.mv_data : "", v.mv_size);
	if (rc)
		stark_warn("store: metadata of run %s (%zu bytes) does not fit its buffer: %s",
			   run_id, v.mv_size, stark_strerror(rc));
out_abort:
	mdb_txn_abort(txn);
	return rc;
}

int store__db_list(struct store_db *db,
		   int (*cb)(void *arg, const char *run_id, const void *meta, size_t len),
		   void *arg)
{
	char id[STORE_RUN_ID_MAX + 1];
	MDB_cursor *c = NULL;
	MDB_txn *txn = NULL;
	MDB_val k, v;
	int mrc, rc = 0;

	mrc = txn_begin(db, MDB_RDONLY, &txn);
	if (!mrc)
		mrc = mdb_cursor_open(txn, db->runs, &c);
	if (!mrc)
		mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	for (; !mrc; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size == 0 || k.mv_size > STORE_RUN_ID_MAX ||
		    memchr(k.mv_data, '\0', k.mv_size)) {
			stark_warn("store: the run table holds a malformed key of %zu bytes",
				   k.mv_size);
			mrc = DB_EMALFORMED;
			break;
		}
		memcpy(id, k.mv_data, k.mv_size);
		id[k.mv_size] = '\0';
		rc = cb(arg, id, v.mv_data, v.mv_size);
		if (rc)
			goto out;
	}
	if (mrc == MDB_NOTFOUND)
		mrc = 0;
	rc = db_err(mrc, "cannot list the runs of", "the store");
out:
	if (c)
		mdb_cursor_close(c);
	if (txn)
		mdb_txn_abort(txn);
	return rc;
}

struct append_op {
	const char *run_id;
	size_t idlen;
	const struct store_event *ev;
	size_t n;
	uint64_t first; /* the seq of ev[0], set by the body */
};

static int append_txn(struct store_db *db, MDB_txn *txn, void *arg)
{
	struct append_op *op = arg;
	unsigned char kb[JKEY_MAX];
	uint64_t last;
	MDB_val k, v;
	int mrc;

	mrc = run_exists_txn(db, txn, op->run_id, op->idlen);
	if (!mrc)
		mrc = last_seq_txn(db, txn, op->run_id, op->idlen, &last);
	if (mrc)
		return mrc;
	if (last > UINT64_MAX - 1 - op->n) {
		stark_warn("store: journal of run %s has no sequence numbers left", op->run_id);
		return DB_EMALFORMED;
	}
	op->first = last + 1;
	for (size_t i = 0; i < op->n; i++) {
		k = jkey(kb, op->run_id, op->idlen, op->first + i);
		v.mv_size = TYPE_LEN + op->ev[i].len;
		v.mv_data = NULL;
		mrc = db_put(db, txn, db->journal, &k, &v, MDB_NOOVERWRITE | MDB_RESERVE);
		if (mrc == MDB_KEYEXIST) {
			stark_warn("store: journal of run %s already holds event %llu", op->run_id,
				   (unsigned long long)(op->first + i));
			return DB_EMALFORMED;
		}
		if (mrc)
			return mrc;
		put_be32(v.mv_data, op->ev[i].type);
		if (op->ev[i].len)
			memcpy((unsigned char *)v.mv_data + TYPE_LEN, op->ev[i].data,
			       op->ev[i].len);
	}
	return 0;
}

int store__db_append(struct store_db *db, const char *run_id, struct store_event *ev, size_t n)
{
	struct append_op op = {run_id, strlen(run_id), ev, n, 0};
	int rc;

	rc = db_err(db_write(db, append_txn, &op), "cannot append to the journal of run", run_id);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		ev[i].seq = op.first + i;
	return 0;
}

/* Decodes one journal record of the run, checking it follows prev. */
static int decode(const char *run_id, size_t idlen, const MDB_val *k, const MDB_val *v,
		  uint64_t prev, struct store_event *ev)
{
	if (k->mv_size != idlen + 1 + 8 || v->mv_size < TYPE_LEN) {
		stark_warn("store: journal of run %s holds a malformed record (%zu+%zu bytes)",
			   run_id, k->mv_size, v->mv_size);
		return DB_EMALFORMED;
	}
	ev->seq = get_be64((const unsigned char *)k->mv_data + idlen + 1);
	if (ev->seq == 0 || (prev && ev->seq != prev + 1)) {
		stark_warn("store: journal of run %s skips from event %llu to %llu", run_id,
			   (unsigned long long)prev, (unsigned long long)ev->seq);
		return DB_EMALFORMED;
	}
	ev->type = get_be32(v->mv_data);
	ev->data = (const unsigned char *)v->mv_data + TYPE_LEN;
	ev->len = v->mv_size - TYPE_LEN;
	return 0;
}

int store__db_scan(struct store_db *db, const char *run_id, uint64_t from_seq,
		   int (*cb)(void *arg, const struct store_event *ev), void *arg)
{
	size_t idlen = strlen(run_id);
	unsigned char kb[JKEY_MAX];
	MDB_val k = jkey(kb, run_id, idlen, from_seq), v;
	struct store_event ev;
	MDB_cursor *c = NULL;
	MDB_txn *txn = NULL;
	uint64_t prev = 0;
	int mrc, rc = 0;

	mrc = txn_begin(db, MDB_RDONLY, &txn);
	if (!mrc)
		mrc = run_exists_txn(db, txn, run_id, idlen);
	if (!mrc)
		mrc = mdb_cursor_open(txn, db->journal, &c);
	if (!mrc)
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	for (; !mrc && in_run(&k, kb, idlen); mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		mrc = decode(run_id, idlen, &k, &v, prev, &ev);
		if (mrc)
			break;
		prev = ev.seq;
		rc = cb(arg, &ev);
		if (rc)
			goto out;
	}
	if (mrc == MDB_NOTFOUND && c)
		mrc = 0;
	rc = db_err(mrc, "cannot read the journal of run", run_id);
out:
	if (c)
		mdb_cursor_close(c);
	if (txn)
		mdb_txn_abort(txn);
	return rc;
}

int store__db_last_seq(struct store_db *db, const char *run_id, uint64_t *seq)
{
	size_t idlen = strlen(run_id);
	MDB_txn *txn;
	int mrc;

	*seq = 0;
	mrc = txn_begin(db, MDB_RDONLY, &txn);
	if (mrc)
		return db_err(mrc, "cannot read the journal of run", run_id);
	mrc = run_exists_txn(db, txn, run_id, idlen);
	if (!mrc)
		mrc = last_seq_txn(db, txn, run_id, idlen, seq);
	mdb_txn_abort(txn);
	return db_err(mrc, "cannot read the journal of run", run_id);
}

int store__db_format(const char *dir, unsigned *ver)
{
	MDB_val k = {6, (void *)"format"}, v;
	MDB_env *env = NULL;
	MDB_txn *txn = NULL;
	MDB_dbi info;
	int mrc;

	*ver = 0;
	mrc = mdb_env_create(&env);
	if (!mrc)
		mrc = mdb_env_set_maxdbs(env, MAX_DBS);
	if (!mrc)
		mrc = mdb_env_open(env, dir, MDB_RDONLY | MDB_NOTLS, 0600);
	if (!mrc)
		mrc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
	if (!mrc)
		mrc = mdb_dbi_open(txn, "info", 0, &info);
	if (!mrc)
		mrc = mdb_get(txn, info, &k, &v);
	if (!mrc)
		*ver = format_version(&v);
	if (txn)
		mdb_txn_abort(txn);
	mdb_env_close(env);
	return mrc == MDB_NOTFOUND ? ST_ENOENT : mrc ? ST_EIO : 0;
}
