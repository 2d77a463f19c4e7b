/*
 * inputs.c -- what a run reads from files besides its problem: the agents'
 * prompt templates (and where they are found: $STARK_PROMPTS, else stark's
 * installation) and a configuration file.
 * The search method (search/) is handed their text and never touches a
 * file itself.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine_int.h"

#define PROMPT_FILE_MAX (256u << 10) /* bytes of one template */
#define CONFIG_FILE_MAX (1u << 20)   /* bytes of a configuration file */

int run_prompts_dir(char *buf, size_t len, char *err, size_t errlen)
{
	const char *env = getenv("STARK_PROMPTS");
	char data[PATH_MAX];
	struct dbuf tried;
	int rc;

	if (env && *env)
		return (size_t)snprintf(buf, len, "%s", env) < len
			   ? 0
			   : stark_errbuf(err, errlen, ST_ETOOBIG, "STARK_PROMPTS is too long");
	dbuf_init(&tried, 4096);
	rc = stark_part_dir(STARK_PART_DATA, data, sizeof(data), &tried);
	if (rc)
		stark_errbuf(err, errlen, rc,
			     "stark's installation is incomplete: its prompt templates are not "
			     "there (looked for %s); reinstall stark (`make install`, or the stark "
			     "package), or set STARK_PROMPTS to a folder of templates",
			     tried.len ? dbuf_str(&tried) : "nothing");
	else if ((size_t)snprintf(buf, len, "%s/prompts", data) >= len)
		rc = stark_errbuf(err, errlen, ST_ETOOBIG, "the prompts folder's path is too long");
	dbuf_release(&tried);
	return rc;
}

/* dir/NAME_FORMAT.txt for dir/NAME.txt, where it exists (the Triton
 * format's plan, debug, system and sample prompts); false otherwise. */
static bool variant_path(const char *dir, const char *name, const char *format, char *path,
			 size_t len)
{
	const char *dot = strrchr(name, '.');
	int n;

	if (!dot || !strncmp(name, "format_", 7))
		return false;
	n = snprintf(path, len, "%s/%.*s_%s%s", dir, (int)(dot - name), name, format, dot);
	return n > 0 && (size_t)n < len && access(path, R_OK) == 0;
}

int run_prompts_load(const char *dir, const char *format, struct prompt_set *out, char *err,
		     size_t errlen)
{
	char path[PATH_MAX];
	struct dbuf b;
	int i, rc = 0;

	memset(out, 0, sizeof(*out));
	if (strcmp(format, "fast") && strcmp(format, "kernelbench") && strcmp(format, "triton"))
		return stark_errbuf(err, errlen, ST_EINVAL, "unknown candidate format '%s'", format);
	for (i = 0; i < PROMPT_COUNT && !rc; i++) {
		char name[64];

		if (prompt_file_name((enum prompt_file)i, format, name, sizeof(name)))
			return stark_errbuf(err, errlen, ST_EINVAL, "no template file for prompt %d", i);
		/* A format's own variant (plan_triton.txt) where there is one. */
		if (!variant_path(dir, name, format, path, sizeof(path)) &&
		    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
			return stark_errbuf(err, errlen, ST_ETOOBIG, "prompts dir path is too long");
		dbuf_init(&b, PROMPT_FILE_MAX);
		rc = io_read_file(path, PROMPT_FILE_MAX, &b);
		if (rc == ST_ENOENT && prompt_default_text((enum prompt_file)i))
			rc = dbuf_puts(&b, prompt_default_text((enum prompt_file)i));
		if (!rc && memchr(dbuf_str(&b), '\0', b.len))
			rc = ST_EINVAL;
		if (rc == ST_ENOENT) {
			stark_errbuf(err, errlen, rc,
				     "prompt template %s is missing: the prompts folder %s is "
				     "incomplete (reinstall stark, or point STARK_PROMPTS or "
				     "prompts_dir at a complete folder)",
				     path, dir);
			dbuf_release(&b);
			break;
		}
		if (rc) {
			stark_errbuf(err, errlen, rc, "cannot load prompt template %s: %s", path,
				     stark_strerror(rc));
			dbuf_release(&b);
			break;
		}
		out->text[i] = dbuf_detach(&b, NULL);
		if (!out->text[i] && !(out->text[i] = strdup("")))
			rc = ST_ENOMEM;
	}
	if (rc)
		prompt_release(out);
	return rc;
}

int run_config_load_file(struct search_config *c, const char *path, char *err, size_t errlen)
{
	struct dbuf b;
	int rc;

	dbuf_init(&b, CONFIG_FILE_MAX);
	rc = io_read_file(path, b.max, &b);
	if (rc) {
		stark_errbuf(err, errlen, rc, "%s: cannot read config: %s", path, stark_strerror(rc));
		goto out;
	}
	if (memchr(dbuf_str(&b), '\0', b.len)) {
		rc = stark_errbuf(err, errlen, ST_EINVAL, "%s: config contains a nul byte", path);
		goto out;
	}
	rc = search_config_load_text(c, path, dbuf_str(&b), err, errlen);
out:
	dbuf_release(&b);
	return rc;
}
