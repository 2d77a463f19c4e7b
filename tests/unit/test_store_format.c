/*
 * test_store_format.c -- the store's format version: a new store carries
 * this stark's, a newer one is refused untouched, a format-1 store is
 * migrated in place after a backup that is itself a format-1 store, and a
 * migration that fails before its commit leaves the store as it was.
 */
#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "store/store.h"
#include "store/store_int.h"

static char tmp_root[PATH_MAX - 64];
static char store_dir[PATH_MAX];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static void setup(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(tmp_root, sizeof(tmp_root), "%s/stark-format-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tmp_root));
	snprintf(store_dir, sizeof(store_dir), "%s/store", tmp_root);
	store__test_fail_migration(false);
}

static void teardown(void)
{
	nftw(tmp_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Reads (value NULL) or writes info's "format" with LMDB directly; flags:
 * MDB_NOLOCK for a folder without lock.mdb (a backup). */
static void raw_format(const char *dir, const char *value, unsigned flags, char *out, size_t len)
{
	MDB_val k = {6, (void *)"format"}, v;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;

	ck_assert_int_eq(mdb_env_create(&env), 0);
	ck_assert_int_eq(mdb_env_set_maxdbs(env, 4), 0);
	ck_assert_int_eq(mdb_env_open(env, dir, MDB_NOTLS | flags | (value ? 0 : MDB_RDONLY), 0600),
			 0);
	ck_assert_int_eq(mdb_txn_begin(env, NULL, value ? 0 : MDB_RDONLY, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "info", 0, &dbi), 0);
	if (value) {
		v = (MDB_val){strlen(value), (void *)value};
		ck_assert_int_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
		ck_assert_int_eq(mdb_txn_commit(txn), 0);
	} else {
		ck_assert_int_eq(mdb_get(txn, dbi, &k, &v), 0);
		snprintf(out, len, "%.*s", (int)v.mv_size, (const char *)v.mv_data);
		mdb_txn_abort(txn);
	}
	mdb_env_close(env);
}

/* A store with one run of three events, left with the given format record. */
static void make_store(const char *format)
{
	struct store_event ev[3] = {{0, 1, "a", 1}, {0, 2, "bb", 2}, {0, 3, "ccc", 3}};
	struct store *st;

	ck_assert_int_eq(store_open(store_dir, &st), 0);
	ck_assert_int_eq(store_run_create(st, "r1", "{}", 2), 0);
	ck_assert_int_eq(store_append(st, "r1", ev, 3), 0);
	store_close(st);
	raw_format(store_dir, format, 0, NULL, 0);
}

static void check_run(const char *dir)
{
	struct store *st;
	uint64_t seq = 0;

	ck_assert_int_eq(store_open(dir, &st), 0);
	ck_assert_int_eq(store_last_seq(st, "r1", &seq), 0);
	ck_assert_int_eq(seq, 3);
	store_close(st);
}

/* The one backup folder under store_dir/backups, into out; how many there are. */
static int backups(char *out, size_t len)
{
	char dir[PATH_MAX / 2];
	struct dirent *e;
	DIR *d;
	int n = 0;

	if ((size_t)snprintf(dir, sizeof(dir), "%s/backups", store_dir) >= sizeof(dir))
		return -1;
	d = opendir(dir);
	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && ++n == 1 &&
		    (size_t)snprintf(out, len, "%s/%s", dir, e->d_name) >= len)
			out[0] = '\0';
	closedir(d);
	return n;
}

START_TEST(test_new_store_has_this_format)
{
	char f[64];
	struct store *st;

	ck_assert_uint_eq(store_probe_format(store_dir), 0); /* nothing there */
	ck_assert_int_eq(store_open(store_dir, &st), 0);
	store_close(st);
	raw_format(store_dir, NULL, 0, f, sizeof(f));
	ck_assert_str_eq(f, "stark-store 2");
	ck_assert_uint_eq(store_probe_format(store_dir), STORE_FORMAT_VERSION);
}
END_TEST

START_TEST(test_newer_format_refused_untouched)
{
	char f[64], b[PATH_MAX];
	struct store *st = NULL;

	make_store("stark-store 3");
	ck_assert_uint_eq(store_probe_format(store_dir), 3);
	ck_assert_int_eq(store_open(store_dir, &st), ST_EVERSION);
	ck_assert_ptr_null(st);
	raw_format(store_dir, NULL, 0, f, sizeof(f));
	ck_assert_str_eq(f, "stark-store 3");
	ck_assert_int_eq(backups(b, sizeof(b)), 0);
}
END_TEST

START_TEST(test_unknown_format_refused)
{
	struct store *st = NULL;

	make_store("stark-store x1");
	ck_assert_uint_eq(store_probe_format(store_dir), 0);
	ck_assert_int_eq(store_open(store_dir, &st), ST_EVERSION);
	raw_format(store_dir, "stark-store 99999999", 0, NULL, 0);
	ck_assert_int_eq(store_open(store_dir, &st), ST_EVERSION);
	raw_format(store_dir, "stark-store 0", 0, NULL, 0);
	ck_assert_int_eq(store_open(store_dir, &st), ST_EVERSION);
}
END_TEST

START_TEST(test_migrate_format_1)
{
	char f[64], b[PATH_MAX], data[PATH_MAX + 16];

	make_store("stark-store 1");
	ck_assert_uint_eq(store_probe_format(store_dir), 1);
	check_run(store_dir); /* opening migrates */
	raw_format(store_dir, NULL, 0, f, sizeof(f));
	ck_assert_str_eq(f, "stark-store 2");
	ck_assert_int_eq(backups(b, sizeof(b)), 1);
	ck_assert_ptr_null(strstr(b, ".part"));
	ck_assert_ptr_nonnull(strstr(b, "/format-1-"));
	/* The backup is the format-1 store as it was, with its run. */
	raw_format(b, NULL, MDB_NOLOCK, f, sizeof(f));
	ck_assert_str_eq(f, "stark-store 1");
	snprintf(data, sizeof(data), "%s/data.mdb", b);
	ck_assert_int_eq(access(data, R_OK), 0);
	/* Opening again changes nothing more. */
	check_run(store_dir);
	ck_assert_int_eq(backups(b, sizeof(b)), 1);
}
END_TEST

START_TEST(test_failed_migration_leaves_store)
{
	char f[64], b[PATH_MAX];
	struct store *st = NULL;

	make_store("stark-store 1");
	store__test_fail_migration(true);
	ck_assert_int_ne(store_open(store_dir, &st), 0);
	ck_assert_ptr_null(st);
	raw_format(store_dir, NULL, 0, f, sizeof(f));
	ck_assert_str_eq(f, "stark-store 1");
	ck_assert_int_eq(backups(b, sizeof(b)), 1); /* the backup was written first */
	store__test_fail_migration(false);
	check_run(store_dir);
	raw_format(store_dir, NULL, 0, f, sizeof(f));
	ck_assert_str_eq(f, "stark-store 2");
	ck_assert_int_eq(backups(b, sizeof(b)), 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store_format");
	TCase *tc = tcase_create("format");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_new_store_has_this_format);
	tcase_add_test(tc, test_newer_format_refused_untouched);
	tcase_add_test(tc, test_unknown_format_refused);
	tcase_add_test(tc, test_migrate_format_1);
	tcase_add_test(tc, test_failed_migration_leaves_store);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
