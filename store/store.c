/*
 * store.c -- the checks every call of the store makes before anything
 * reaches LMDB or a lock file; the ground the other files of store/ stand
 * on.
 *
 * Each entry point (api.c, lock.c) refuses a NULL or foreign handle (one
 * opened by another process: LMDB environments must not be used across
 * fork), a call made from inside one of the store's own callbacks (a read
 * transaction is open then, and growing the map needs none to be), an
 * invalid run id, and payloads past their caps.  Only then does it hand
 * over to lmdb.c, which trusts what it is given.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "store/store_int.h"

bool store_run_id_valid(const char *id)
{
	size_t n;

	if (!id || !*id || *id == '.')
		return false;
	for (n = 0; id[n]; n++) {
		char c = id[n];

		if (n == STORE_RUN_ID_MAX)
			return false;
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

int store__check_id(const char *run_id)
{
	char shown[STORE_RUN_ID_MAX + 4];
	size_t i;

	if (store_run_id_valid(run_id))
		return 0;
	if (!run_id)
		return stark_error(ST_EINVAL, "store: missing run id");
	/* Show a bounded, printable form of what was refused. */
	for (i = 0; run_id[i] && i < STORE_RUN_ID_MAX; i++)
		shown[i] = run_id[i] > ' ' && run_id[i] < 127 ? run_id[i] : '?';
	shown[i] = '\0';
	if (run_id[i])
		memcpy(shown + i, "...", 4);
	return stark_error(
	    ST_EINVAL,
	    "store: invalid run id '%s' (1 to %d of [A-Za-z0-9._-], not starting with '.')", shown,
	    STORE_RUN_ID_MAX);
}

int store__guard(const struct store *st, const char *what)
{
	if (!st)
		return stark_error(ST_EINVAL, "store: %s: no store handle", what);
	if (st->pid != getpid())
		return stark_error(ST_EINVAL,
				   "store: %s: the handle belongs to process %ld (used after fork)",
				   what, (long)st->pid);
	if (st->in_cb)
		return stark_error(ST_EINVAL, "store: %s: called from inside a store callback",
				   what);
	return 0;
}

int store__check_meta(const char *run_id, const void *meta, size_t len)
{
	if (!meta && len)
		return stark_error(ST_EINVAL, "store: metadata of run %s: no bytes for length %zu",
				   run_id, len);
	if (len > STORE_META_MAX)
		return stark_error(ST_ETOOBIG,
				   "store: metadata of run %s is %zu bytes, over the cap of %u",
				   run_id, len, STORE_META_MAX);
	return 0;
}

int store__check_events(const char *run_id, const struct store_event *ev, size_t n)
{
	size_t total = 0;

	if (!ev && n)
		return stark_error(ST_EINVAL, "store: append to run %s: no events for count %zu",
				   run_id, n);
	if (n > STORE_BATCH_EVENTS)
		return stark_error(ST_ETOOBIG,
				   "store: append to run %s: %zu events, over the cap of %d",
				   run_id, n, STORE_BATCH_EVENTS);
	for (size_t i = 0; i < n; i++) {
		if (!ev[i].data && ev[i].len)
			return stark_error(
			    ST_EINVAL,
			    "store: append to run %s: event %zu has no bytes for length %zu",
			    run_id, i, ev[i].len);
		if (ev[i].len > STORE_EVENT_MAX)
			return stark_error(
			    ST_ETOOBIG,
			    "store: append to run %s: event %zu is %zu bytes, over the cap of %u",
			    run_id, i, ev[i].len, STORE_EVENT_MAX);
		total += ev[i].len;
	}
	if (total > STORE_BATCH_MAX)
		return stark_error(
		    ST_ETOOBIG,
		    "store: append to run %s: %zu bytes in one batch, over the cap of %u", run_id,
		    total, STORE_BATCH_MAX);
	return 0;
}
