/*
 * upgrade.c -- which stark made a run, the prompt set it was given, and a
 * run carried over to another stark.
 *
 * A run records, in its header (JR_RUN), the stark that created it (head
 * "stark": release, commit, wire protocol and store format versions, the
 * prompt set's hash) and the text of every prompt template it uses (body
 * "prompts", by file name), so a run resumed by another stark continues
 * with the prompts it started with, and with its journaled settings.  A run
 * created before runs recorded them (store format 1) has neither, and a
 * stark that reads a run's settings differently (a setting it added, or
 * dropped) would change the run under it: such a run continues only once
 * the user accepts this stark (`stark resume --accept-upgrade`), which
 * journals JR_UPGRADE (head: stark, from, changed, at; body: prompts,
 * config), replayed on every load like the header.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

#define SET_MAX (4u << 20) /* bytes hashed for one prompt set */

json_t *run_producer_new(const char *prompts_hash)
{
	return json_pack("{s:s, s:s, s:i, s:i, s:s?}", "release", stark_release(), "commit",
			 stark_commit(), "proto", PROTO_VERSION, "store", STORE_FORMAT_VERSION,
			 "prompts", prompts_hash);
}

int run_prompts_set_hash(const char *dir, char out[17], char *err, size_t errlen)
{
	static const char *const formats[] = {"fast", "kernelbench"};
	struct prompt_set p[2];
	struct dbuf all;
	char name[64];
	int rc;

	memset(p, 0, sizeof(p));
	dbuf_init(&all, SET_MAX);
	rc = run_prompts_load(dir, formats[0], &p[0], err, errlen);
	if (!rc)
		rc = run_prompts_load(dir, formats[1], &p[1], err, errlen);
	/* Every file of the set once, in enum order, the kernelbench format last. */
	for (int i = 0; i < PROMPT_COUNT && !rc; i++)
		if (!(rc = prompt_file_name((enum prompt_file)i, formats[0], name, sizeof(name))))
			rc = dbuf_printf(&all, "%s%c%zu%c%s", name, 0, strlen(p[0].text[i]), 0,
					 p[0].text[i]);
	if (!rc && !(rc = prompt_file_name(PROMPT_FORMAT, formats[1], name, sizeof(name))))
		rc = dbuf_printf(&all, "%s%c%zu%c%s", name, 0, strlen(p[1].text[PROMPT_FORMAT]), 0,
				 p[1].text[PROMPT_FORMAT]);
	if (!rc)
		jr_hash_hex(all.p ? all.p : "", all.len, out);
	else if (rc == ST_ETOOBIG || rc == ST_ENOMEM)
		stark_errbuf(err, errlen, rc, "prompt set in %s: %s", dir, stark_strerror(rc));
	prompt_release(&p[0]);
	prompt_release(&p[1]);
	dbuf_release(&all);
	return rc;
}

json_t *run_prompts_json(const struct prompt_set *p, const char *format)
{
	json_t *o = json_object();
	char name[64];

	for (int i = 0; o && i < PROMPT_COUNT; i++)
		if (prompt_file_name((enum prompt_file)i, format, name, sizeof(name)) ||
		    json_object_set_new(o, name, json_string(p->text[i] ? p->text[i] : ""))) {
			json_decref(o);
			return NULL;
		}
	return o;
}

int run_prompts_from_json(const json_t *o, const char *format, struct prompt_set *out)
{
	char name[64];
	const char *t;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(o))
		return ST_ENOENT;
	for (int i = 0; i < PROMPT_COUNT; i++) {
		if (prompt_file_name((enum prompt_file)i, format, name, sizeof(name)) ||
		    !(t = json_string_value(json_object_get(o, name)))) {
			prompt_release(out);
			return ST_EPROTO;
		}
		if (!(out->text[i] = strdup(t))) {
			prompt_release(out);
			return ST_ENOMEM;
		}
	}
	return 0;
}

int run_prompts_current(const struct search_config *cfg, const char *format, struct prompt_set *out,
			char hash[17], char *err, size_t errlen)
{
	char dir[PROTO_PATH_MAX];
	int rc;

	memset(out, 0, sizeof(*out));
	if (cfg->prompts_dir[0])
		rc = (size_t)snprintf(dir, sizeof(dir), "%s", cfg->prompts_dir) < sizeof(dir)
			 ? 0
			 : stark_errbuf(err, errlen, ST_ETOOBIG, "prompts_dir is too long");
	else
		rc = run_prompts_dir(dir, sizeof(dir), err, errlen);
	if (!rc)
		rc = run_prompts_load(dir, format, out, err, errlen);
	if (!rc)
		rc = run_prompts_set_hash(dir, hash, err, errlen);
	if (rc)
		prompt_release(out);
	return rc;
}

/* The value of "KEY = VALUE" line key (klen bytes, with " = ") in text,
 * or NULL; *n its length. */
static const char *value_in(const char *text, const char *key, size_t klen, size_t *n)
{
	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		if (len >= klen + 3 && !memcmp(p, key, klen) && !memcmp(p + klen, " = ", 3)) {
			*n = len - klen - 3;
			return p + klen + 3;
		}
		p = nl ? nl + 1 : NULL;
	}
	return NULL;
}

/* Every "KEY = VALUE" line of a that b lacks or holds otherwise. */
static int compare(const char *a, const char *b, bool a_is_now, struct dbuf *out)
{
	int rc = 0;

	for (const char *p = a; !rc && p && *p;) {
		const char *nl = strchr(p, '\n'), *eq = strstr(p, " = "), *v;
		size_t len = nl ? (size_t)(nl - p) : strlen(p), k, vn = 0;

		if (eq && eq < p + len) {
			k = (size_t)(eq - p);
			v = value_in(b, p, k, &vn);
			if (!v && a_is_now)
				rc = dbuf_printf(
				    out, "%s%.*s (this stark's default; the run recorded none)",
				    out->len ? "; " : "", (int)len, p);
			else if (!v)
				rc = dbuf_printf(
				    out, "%s%.*s (recorded; this stark has no such setting)",
				    out->len ? "; " : "", (int)k, p);
			else if (a_is_now && (vn != len - k - 3 || memcmp(v, eq + 3, vn)))
				rc = dbuf_printf(out, "%s%.*s: recorded %.*s, read as %.*s",
						 out->len ? "; " : "", (int)k, p, (int)vn, v,
						 (int)(len - k - 3), eq + 3);
		}
		p = nl ? nl + 1 : NULL;
	}
	return rc;
}

int run_settings_changed(const struct run *r, struct dbuf *out)
{
	struct dbuf now;
	int rc;

	dbuf_reset(out);
	if (!r->cfg_text)
		return 0;
	dbuf_init(&now, 1u << 20);
	rc = search_config_dump(&r->cfg, &now);
	if (!rc)
		rc = compare(dbuf_str(&now), r->cfg_text, true, out);
	if (!rc)
		rc = compare(r->cfg_text, dbuf_str(&now), false, out);
	dbuf_release(&now);
	return rc;
}

bool run_needs_upgrade(const struct run *r)
{
	struct dbuf d;
	bool changed;

	if (!r->prompts_recorded)
		return true;
	dbuf_init(&d, 64u << 10);
	changed = run_settings_changed(r, &d) || d.len; /* unknown counts as changed */
	dbuf_release(&d);
	return changed;
}

const char *run_upgrade_note(const struct run *r, char *buf, size_t len)
{
	const json_t *p = r->producer;
	const char *rel = jr_str(p, "release", NULL), *commit = jr_str(p, "commit", "unknown");
	char by[128];
	struct dbuf d;

	buf[0] = '\0';
	if (rel)
		snprintf(by, sizeof(by), "stark %s (commit %s)", rel, commit);
	else
		snprintf(by, sizeof(by), "a stark that recorded no version (before 0.2.0)");
	dbuf_init(&d, 64u << 10);
	if (run_settings_changed(r, &d)) { /* out of memory or past the cap */
		dbuf_reset(&d);
		if (dbuf_puts(&d, "(they could not be compared)"))
			d.len = 0;
	}
	if (!r->prompts_recorded || d.len) {
		snprintf(buf, len,
			 "run %s was started by %s; this is stark %s (commit %s).%s%s%s%s "
			 "`stark resume %s --accept-upgrade` continues it with %s%s",
			 r->id, by, stark_release(), stark_commit(),
			 r->prompts_recorded ? "" : " The run recorded no prompts.",
			 d.len ? " This stark reads its settings differently: " : "",
			 d.len ? dbuf_str(&d) : "", d.len ? "." : "", r->id,
			 r->prompts_recorded ? "its own prompts" : "this stark's prompt templates",
			 d.len ? " and the settings as this stark reads them" : "");
	} else if (rel && (strcmp(rel, stark_release()) || strcmp(commit, stark_commit()))) {
		snprintf(buf, len,
			 "run %s was started by %s; this is stark %s (commit %s): it continues "
			 "with the run's recorded prompts (%s) and settings",
			 r->id, by, stark_release(), stark_commit(), jr_str(p, "prompts", "?"));
	}
	dbuf_release(&d);
	return buf[0] ? buf : NULL;
}

int run_accept_upgrade(struct run *r, char *err, size_t errlen)
{
	const char *format = jr_str(r->options, "format", "kernelbench");
	struct prompt_set p = {{0}};
	struct dbuf changed, cfg;
	json_t *head = NULL, *stark = NULL;
	char hash[17];
	int rc = 0;

	if (!run_needs_upgrade(r))
		return 0;
	dbuf_init(&changed, 64u << 10);
	dbuf_init(&cfg, 1u << 20);
	if (!r->prompts_recorded)
		rc = run_prompts_current(&r->cfg, format, &p, hash, err, errlen);
	if (!rc && (rc = run_settings_changed(r, &changed)))
		stark_errbuf(err, errlen, rc, "run %s: cannot compare its settings", r->id);
	if (!rc && (rc = search_config_dump(&r->cfg, &cfg)))
		stark_errbuf(err, errlen, rc, "run %s: cannot write its settings", r->id);
	if (rc)
		goto out;
	stark = run_producer_new(r->prompts_recorded ? jr_str(r->producer, "prompts", NULL) : hash);
	head = json_pack("{s:O, s:O?, s:s, s:f}", "stark", stark, "from", r->producer, "changed",
			 dbuf_str(&changed), "at", run__now());
	rc = run__batch_take(
	    r, JR_UPGRADE, head,
	    json_pack("{s:o, s:s}", "prompts",
		      run_prompts_json(r->prompts_recorded ? &r->prompts : &p, format), "config",
		      dbuf_str(&cfg)),
	    NULL, 0);
	if (!rc)
		rc = run__commit(r);
	if (rc) {
		jr_batch_release(&r->batch);
		stark_errbuf(err, errlen, rc, "run %s: cannot journal the upgrade: %s", r->id,
			     stark_strerror(rc));
		goto out;
	}
	free(r->cfg_text);
	r->cfg_text = dbuf_detach(&cfg, NULL);
	if (!r->prompts_recorded) {
		if (r->prompts_loaded)
			prompt_release(&r->prompts);
		r->prompts = p;
		memset(&p, 0, sizeof(p));
		r->prompts_loaded = r->prompts_recorded = true;
	}
	json_decref(r->producer);
	r->producer = stark;
	stark = NULL;
out:
	prompt_release(&p);
	json_decref(stark);
	dbuf_release(&changed);
	dbuf_release(&cfg);
	return rc;
}

int run__apply_upgrade(struct run *r, const json_t *head, const json_t *body, char *err,
		       size_t errlen)
{
	const char *format = jr_str(r->options, "format", "kernelbench");
	const json_t *stark = json_object_get(head, "stark");
	const char *text = jr_str(body, "config", NULL);
	struct search_config c;
	struct prompt_set p;
	char *copy = NULL;
	int rc;

	if (!json_is_object(stark))
		return ST_EPROTO;
	if (text) { /* absent from no upgrade stark writes, but optional to read */
		search_config_defaults(&c);
		if (search_config_load_text(&c, "journaled config", text, err, errlen))
			return ST_EPROTO;
		if (!(copy = strdup(text)))
			return ST_ENOMEM;
	}
	rc = run_prompts_from_json(json_object_get(body, "prompts"), format, &p);
	if (rc) {
		free(copy);
		return rc == ST_ENOENT ? ST_EPROTO : rc;
	}
	if (r->prompts_loaded)
		prompt_release(&r->prompts);
	r->prompts = p;
	r->prompts_loaded = r->prompts_recorded = true;
	if (copy) {
		r->cfg = c;
		free(r->cfg_text);
		r->cfg_text = copy;
	}
	json_decref(r->producer);
	r->producer = json_incref((json_t *)stark);
	return 0;
}
