/*
 * store.h -- the durable state of STARK runs, kept in LMDB.
 *
 * A store is a folder holding one LMDB environment in its default, fully
 * synced mode, plus a locks/ folder with one lock file per run.  Each run
 * has a metadata record and a journal: an append-only sequence of events
 * numbered from 1 with no gaps.  Every append is committed (fsync'd) before
 * it returns, so a run killed at any instant can be rebuilt from its
 * journal: after a crash the journal is exactly the events of the appends
 * that returned, plus possibly the whole batch that was being committed.
 * The map grows by itself when full (the transaction is replayed); stale
 * reader slots are cleared at open.
 *
 * Processes and threads: a store handle is used by one thread at a time and
 * never in a forked child (calls from another pid fail with ST_EINVAL).
 * Several processes may open the same store (LMDB serialises their
 * writes), but one process opens a given store once: LMDB's locks break if
 * the same files are opened twice in one process.  Descriptors the store
 * opens are close-on-exec.
 *
 * Errors: functions return 0 or a negative ST_E* code.  Invalid arguments
 * are refused with ST_EINVAL (ST_ETOOBIG for sizes) before LMDB is touched.
 * ST_ENOENT, ST_EEXIST and a held lock's ST_EBUSY are returned silently,
 * for the caller to word; every other failure is also described on stderr
 * (stark_warn), with LMDB's own message where it has one.
 *
 * Ownership: strings and buffers passed in are borrowed for the call;
 * event data handed to a callback is borrowed until it returns.  Callbacks
 * must not call back into the store (ST_EINVAL if they do).
 */
#ifndef STARK_STORE_H
#define STARK_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"

/*
 * The store's format version, kept in the store.  1: stark 0.1.0.  2: runs
 * record the stark that made them and their prompt templates (engine.h),
 * which a format-1 stark would ignore.  A store of an older format is
 * migrated in place when opened (see store_open); a newer one is refused.
 */
#define STORE_FORMAT_VERSION 2

#define STORE_RUN_ID_MAX   64	       /* [A-Za-z0-9._-], not starting with '.' */
#define STORE_EVENT_MAX	   (16u << 20) /* one event's payload */
#define STORE_META_MAX	   (1u << 20)  /* one run's metadata */
#define STORE_BATCH_MAX	   (64u << 20) /* payload bytes in one store_append */
#define STORE_BATCH_EVENTS 4096	       /* events in one store_append */

struct store;
struct store_lock;

struct store_event {
	uint64_t seq;	  /* assigned by the store on append */
	uint32_t type;	  /* caller-defined event type */
	const void *data; /* payload (the orchestrator writes JSON); may be NULL if len is 0 */
	size_t len;
};

/*
 * Opens the store in dir, creating the folder (not its parents) and the
 * environment if needed.  The map starts at 1 GiB of address space (the
 * file stays sparse; the environment variable STARK_STORE_MAPSIZE, in
 * bytes, overrides it, for tests) and doubles when full.
 * A store of an older format is migrated in place first: the environment
 * is copied, compacted and synced, to DIR/backups/format-N-STAMP/data.mdb
 * (itself a store that the stark of format N opens), then one transaction
 * rewrites what the new format changes, so a crash at any instant leaves
 * the old store or the new one (and perhaps a backup).  Migrate with no
 * older stark using the store.
 * ST_EVERSION: dir holds something that is not a store, or a store of a
 * format newer than STORE_FORMAT_VERSION; the message (stderr) names the
 * version and what to do.  *out is owned by the caller: store_close() it.
 */
ST_WUR int store_open(const char *dir, struct store **out);
/*
 * The format version of the store in dir, read without changing anything
 * (no folder created, no migration): STORE_FORMAT_VERSION for a store this
 * stark uses as it is, another version, or 0 when dir holds no store.
 */
unsigned store_probe_format(const char *dir);
/* Closes the environment and frees st; NULL is a no-op. */
void store_close(struct store *st);

/* True when id is a valid run id (also safe as a file name). */
bool store_run_id_valid(const char *id);

/*
 * Takes the exclusive lock on a run: flock(LOCK_EX|LOCK_NB) on
 * DIR/locks/RUN_ID.lock, which then holds the holder's pid.  ST_EBUSY when
 * another process (or another lock in this one) holds it: see
 * store_lock_holder().  The lock needs no run record, and dies with the
 * process (its descriptor is close-on-exec; a child forked without exec
 * shares it until it closes it).  *out is owned by the caller.
 */
ST_WUR int store_lock_run(struct store *st, const char *run_id, struct store_lock **out);
/* Releases the lock and frees l; NULL is a no-op. */
void store_unlock_run(struct store_lock *l);
/*
 * The pid written by the process that holds (or last held) the run's lock,
 * for a message such as "run X is in use by process N".  ST_ENOENT when
 * no pid is recorded.  Advisory: the holder may exit at any moment.
 */
ST_WUR int store_lock_holder(struct store *st, const char *run_id, pid_t *pid);

/* Creates a run with its metadata (at most STORE_META_MAX bytes); ST_EEXIST if it exists. */
ST_WUR int store_run_create(struct store *st, const char *run_id, const void *meta, size_t len);
/* Replaces a run's metadata (e.g. its state); ST_ENOENT if absent. */
ST_WUR int store_run_meta_put(struct store *st, const char *run_id, const void *meta, size_t len);
/*
 * Reads a run's metadata into out (reset first; out's cap applies:
 * ST_ETOOBIG past it).  ST_ENOENT if the run is absent.
 */
ST_WUR int store_run_meta_get(struct store *st, const char *run_id, struct dbuf *out);
/*
 * Calls cb for each run in id order (bytewise) from one snapshot; a non-zero
 * return from cb stops the walk and is returned.
 */
ST_WUR int store_run_list(struct store *st,
			  int (*cb)(void *arg, const char *run_id, const void *meta, size_t len),
			  void *arg);

/*
 * Appends n events (at most STORE_BATCH_EVENTS, payloads each at most
 * STORE_EVENT_MAX and together at most STORE_BATCH_MAX bytes) to a run's
 * journal in one transaction, all or none, and sets ev[i].seq to
 * last + 1 + i.  Returns once the transaction is durable.  n == 0 is a
 * no-op.  ST_ENOENT if the run does not exist.
 */
ST_WUR int store_append(struct store *st, const char *run_id, struct store_event *ev, size_t n);
/*
 * Calls cb for each event with seq >= from_seq, in order, from one
 * snapshot; ev and its data are borrowed until cb returns.  A non-zero
 * return from cb stops the scan and is returned.  ST_ENOENT if the run does
 * not exist; ST_EIO if a record is malformed.
 */
ST_WUR int store_scan(struct store *st, const char *run_id, uint64_t from_seq,
		      int (*cb)(void *arg, const struct store_event *ev), void *arg);
/* Sequence number of the last event, 0 for an empty journal; ST_ENOENT if no run. */
ST_WUR int store_last_seq(struct store *st, const char *run_id, uint64_t *seq);

#endif
