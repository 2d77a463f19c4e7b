/*
 * test_upgrade.c -- a run across starks: what a run records of the stark
 * that made it (engine/upgrade.c), when resuming it needs
 * --accept-upgrade (no prompts recorded, or settings this stark reads
 * differently), what the note says, and that accepting is journaled and
 * replayed.  Run from the repository root (the prompt templates).
 */
#include <check.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "engine/engine_int.h"

static char dir[PATH_MAX];
static struct store *st;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/stark-test-upgrade.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	if (!getenv("STARK_PROMPTS"))
		setenv("STARK_PROMPTS", "prompts", 1);
	ck_assert_int_eq(store_open(dir, &st), 0);
}

static void teardown(void)
{
	store_close(st);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A new run of tests/helpers/run_problem.py, closed again. */
static void create(const char *id)
{
	struct search_config cfg;
	struct run_spec spec = {.run_id = id,
				.problem_path = "tests/helpers/run_problem.py",
				.llm = "replay:/nonexistent",
				.device = "cpu",
				.eval = "replay:/nonexistent",
				.format = "kernelbench",
				.cfg = &cfg};
	struct run *r = NULL;
	char err[512] = "";

	search_config_defaults(&cfg);
	ck_assert_msg(run_create(st, &spec, &r, err, sizeof(err)) == 0, "run_create: %s", err);
	run_free(r);
}

static struct run *load(const char *id, bool lock)
{
	struct run *r = NULL;
	char err[512] = "";

	ck_assert_msg(run_load(st, id, lock, &r, err, sizeof(err)) == 0, "run_load: %s", err);
	return r;
}

/* Journals one event (head and body taken). */
static void journal(const char *id, uint32_t type, json_t *head, json_t *body)
{
	struct jr_batch b;

	jr_batch_init(&b);
	ck_assert_ptr_nonnull(head);
	ck_assert_int_eq(jr_batch_add(&b, type, head, body, NULL, 0), 0);
	ck_assert_int_eq(jr_batch_commit(&b, st, id), 0);
	jr_batch_release(&b);
	json_decref(head);
	json_decref(body);
}

/* The run's configuration text without its line starting with key. */
static char *config_without(struct run *r, const char *key)
{
	struct dbuf d;
	char *s, *p, *nl;

	dbuf_init(&d, 1u << 20);
	ck_assert_int_eq(search_config_dump(&r->cfg, &d), 0);
	s = dbuf_detach(&d, NULL);
	p = strstr(s, key);
	ck_assert_ptr_nonnull(p);
	ck_assert(p == s || p[-1] == '\n');
	nl = strchr(p, '\n');
	memmove(p, nl + 1, strlen(nl + 1) + 1);
	return s;
}

START_TEST(test_same_stark)
{
	struct run *r;
	char note[1024];

	create("same");
	r = load("same", false);
	ck_assert(r->prompts_recorded);
	ck_assert_ptr_nonnull(r->prompts.text[PROMPT_PLAN]);
	ck_assert_str_eq(jr_str(r->producer, "release", ""), stark_release());
	ck_assert_str_eq(jr_str(r->producer, "commit", ""), stark_commit());
	ck_assert_int_eq(jr_i64(r->producer, "store", 0), STORE_FORMAT_VERSION);
	ck_assert_int_eq(strlen(jr_str(r->producer, "prompts", "")), 16);
	ck_assert(!run_needs_upgrade(r));
	ck_assert_ptr_null(run_upgrade_note(r, note, sizeof(note)));
	run_free(r);
}
END_TEST

START_TEST(test_setting_this_stark_added)
{
	struct run *r;
	char note[2048], err[512] = "", *text;
	struct dbuf d;

	create("added");
	r = load("added", false);
	text = config_without(r, "leaders = ");
	run_free(r);
	/* As if the run had been made by a stark without the "leaders" setting. */
	journal("added", JR_CONFIG, json_pack("{s:[], s:f}", "changed", "at", 1.0),
		json_pack("{s:s}", "config", text));
	free(text);
	r = load("added", true);
	dbuf_init(&d, 1u << 16);
	ck_assert_int_eq(run_settings_changed(r, &d), 0);
	ck_assert_msg(strstr(dbuf_str(&d), "leaders = ") &&
			  strstr(dbuf_str(&d), "(this stark's default; the run recorded none)"),
		      "%s", dbuf_str(&d));
	ck_assert(run_needs_upgrade(r));
	ck_assert_ptr_nonnull(run_upgrade_note(r, note, sizeof(note)));
	ck_assert_msg(strstr(note, "reads its settings differently: leaders = ") &&
			  strstr(note, "stark resume added --accept-upgrade"),
		      "%s", note);
	ck_assert_msg(run_accept_upgrade(r, err, sizeof(err)) == 0, "%s", err);
	ck_assert(!run_needs_upgrade(r));
	run_free(r);
	/* Replayed from the journal. */
	r = load("added", false);
	ck_assert(!run_needs_upgrade(r));
	ck_assert_ptr_nonnull(strstr(r->cfg_text, "leaders = "));
	ck_assert_int_eq(run_settings_changed(r, &d), 0);
	ck_assert_int_eq(d.len, 0);
	dbuf_release(&d);
	run_free(r);
}
END_TEST

START_TEST(test_other_stark_same_settings)
{
	struct run *r;
	char note[1024], *plan;
	json_t *prompts;
	struct dbuf d;

	create("other");
	r = load("other", false);
	plan = strdup(r->prompts.text[PROMPT_PLAN]);
	prompts = run_prompts_json(&r->prompts, "kernelbench");
	json_object_set_new(prompts, "plan.txt", json_string("an older plan template"));
	dbuf_init(&d, 1u << 20);
	ck_assert_int_eq(search_config_dump(&r->cfg, &d), 0);
	run_free(r);
	journal("other", JR_UPGRADE,
		json_pack("{s:{s:s, s:s, s:i, s:i, s:s}, s:n, s:s, s:f}", "stark", "release",
			  "0.1.9", "commit", "abc", "proto", 1, "store", 2, "prompts",
			  "0123456789abcdef", "from", "changed", "", "at", 1.0),
		json_pack("{s:o, s:s}", "prompts", prompts, "config", dbuf_str(&d)));
	dbuf_release(&d);
	r = load("other", false);
	ck_assert(!run_needs_upgrade(r));
	ck_assert_str_eq(r->prompts.text[PROMPT_PLAN], "an older plan template");
	ck_assert_str_ne(r->prompts.text[PROMPT_PLAN], plan);
	ck_assert_ptr_nonnull(run_upgrade_note(r, note, sizeof(note)));
	ck_assert_msg(
	    strstr(note, "started by stark 0.1.9 (commit abc)") &&
		strstr(note, "continues with the run's recorded prompts (0123456789abcdef)"),
	    "%s", note);
	free(plan);
	run_free(r);
}
END_TEST

START_TEST(test_missing_templates_are_an_install_error)
{
	struct search_config cfg;
	struct prompt_set p;
	char hash[17], err[1024] = "";

	search_config_defaults(&cfg);
	setenv("STARK_PROMPTS", dir, 1); /* a folder without templates */
	ck_assert_int_eq(run_prompts_current(&cfg, "fast", &p, hash, err, sizeof(err)), ST_ENOENT);
	ck_assert_msg(strstr(err, "prompt template ") && strstr(err, "is missing") &&
			  strstr(err, dir) && !strstr(err, "resume"),
		      "%s", err);
	unsetenv("STARK_PROMPTS");
	setenv("STARK_PROMPTS", "prompts", 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("upgrade");
	TCase *tc = tcase_create("upgrade");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_same_stark);
	tcase_add_test(tc, test_setting_this_stark_added);
	tcase_add_test(tc, test_other_stark_same_settings);
	tcase_add_test(tc, test_missing_templates_are_an_install_error);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
