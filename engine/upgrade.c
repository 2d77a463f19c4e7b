/*
 * upgrade.c -- which stark made a run, the prompt set it was given, and a
 * run carried over to another stark.
 *
 * A run records, in its header (JR_RUN), the stark that created it (head
 * "stark": release, commit, wire protocol and store format versions, the
 * prompt set's hash) and the text of every prompt template it uses (body
 * "prompts", by file name), so a run resumed by another stark continues
 * with the prompts it started with.  A run created before runs recorded
 * them (store format 1) has neither: it continues only once the user
 * accepts this stark's prompts (`stark resume --accept-upgrade`), which
 * journals JR_UPGRADE (head: stark, from, at; body: prompts), replayed on
 * every load like the header.
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

const char *run_upgrade_note(const struct run *r, char *buf, size_t len)
{
	const json_t *p = r->producer;
	const char *rel = jr_str(p, "release", NULL), *commit = jr_str(p, "commit", "unknown");

	buf[0] = '\0';
	if (!r->prompts_recorded) {
		snprintf(buf, len,
			 "run %s was started by a stark that recorded neither its version nor its "
			 "prompts (before 0.2.0); this stark %s would continue it with its own "
			 "prompt templates: `stark resume %s --accept-upgrade` continues with them",
			 r->id, stark_release(), r->id);
		return buf;
	}
	if (rel && (strcmp(rel, stark_release()) || strcmp(commit, stark_commit())))
		snprintf(
		    buf, len,
		    "run %s was started by stark %s (commit %s); this is stark %s (commit %s): "
		    "it continues with the run's recorded prompts (%s) and settings",
		    r->id, rel, commit, stark_release(), stark_commit(), jr_str(p, "prompts", "?"));
	return buf[0] ? buf : NULL;
}

int run_accept_upgrade(struct run *r, char *err, size_t errlen)
{
	const char *format = jr_str(r->options, "format", "kernelbench");
	struct prompt_set p;
	json_t *head, *stark;
	char hash[17];
	int rc;

	if (r->prompts_recorded)
		return 0;
	rc = run_prompts_current(&r->cfg, format, &p, hash, err, errlen);
	if (rc)
		return rc;
	stark = run_producer_new(hash);
	head = json_pack("{s:O, s:O?, s:f}", "stark", stark, "from", r->producer, "at", run__now());
	rc = run__batch_take(r, JR_UPGRADE, head,
			     json_pack("{s:o}", "prompts", run_prompts_json(&p, format)), NULL, 0);
	if (!rc)
		rc = run__commit(r);
	if (rc) {
		jr_batch_release(&r->batch);
		stark_errbuf(err, errlen, rc, "run %s: cannot journal the upgrade: %s", r->id,
			     stark_strerror(rc));
		prompt_release(&p);
		json_decref(stark);
		return rc;
	}
	if (r->prompts_loaded)
		prompt_release(&r->prompts);
	r->prompts = p;
	r->prompts_loaded = r->prompts_recorded = true;
	json_decref(r->producer);
	r->producer = stark;
	return 0;
}

int run__apply_upgrade(struct run *r, const json_t *head, const json_t *body)
{
	const char *format = jr_str(r->options, "format", "kernelbench");
	const json_t *stark = json_object_get(head, "stark");
	struct prompt_set p;
	int rc;

	if (!json_is_object(stark))
		return ST_EPROTO;
	rc = run_prompts_from_json(json_object_get(body, "prompts"), format, &p);
	if (rc)
		return rc == ST_ENOENT ? ST_EPROTO : rc;
	if (r->prompts_loaded)
		prompt_release(&r->prompts);
	r->prompts = p;
	r->prompts_loaded = r->prompts_recorded = true;
	json_decref(r->producer);
	r->producer = json_incref((json_t *)stark);
	return 0;
}
