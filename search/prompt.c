/*
 * prompt.c -- the agents' prompts, rendered from text templates.
 *
 * Templates are files in prompts/, read at run time by the engine
 * (engine/inputs.c) so they can be tuned without rebuilding (the run
 * journals the rendered prompts, so a run stays reproducible even if the
 * files change later); here they are text already.  Rendering is plain substitution of
 * {{name}} placeholders; a placeholder that names no variable, or one that
 * has no value for the role being rendered, is an error rather than an
 * empty string, so a template mistake cannot silently starve an agent.
 * Text that is not `{{ name }}` with a lowercase name passes through as is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/search.h"

static const char *const file_names[PROMPT_COUNT] = {
    "system.txt", "plan.txt",	 "code.txt",  "debug.txt",
    "sample.txt", "reflect.txt", "retry.txt", "format_%s.txt",
};

/* retry.txt where a prompts folder has none (folders made before it existed):
 * prompt_default_text(). */
static const char retry_default[] =
    "Your previous answer was rejected by a mechanical check, so nothing of it was run:\n"
    "\n"
    "{{complaint}}\n"
    "\n"
    "Answer the task above again from the start, following every one of its rules, and give "
    "the complete program in a single ```python block.\n";

int prompt_file_name(enum prompt_file f, const char *format, char *buf, size_t len)
{
	int n;

	if ((unsigned)f >= PROMPT_COUNT || !len)
		return ST_EINVAL;
	if (f == PROMPT_FORMAT && strcmp(format, "fast") && strcmp(format, "kernelbench") &&
	    strcmp(format, "triton"))
		return ST_EINVAL;
	n = snprintf(buf, len, file_names[f], format);
	return n < 0 || (size_t)n >= len ? ST_ETOOBIG : 0;
}

const char *prompt_default_text(enum prompt_file f)
{
	return f == PROMPT_RETRY ? retry_default : NULL;
}

void prompt_release(struct prompt_set *p)
{
	int i;

	for (i = 0; i < PROMPT_COUNT; i++) {
		free(p->text[i]);
		p->text[i] = NULL;
	}
}

/* The value of placeholder name (n bytes); *known false for no such name. */
static const char *var_value(const struct prompt_vars *v, const char *name, size_t n, bool *known)
{
	static const char *const names[] = {"problem",	"code",	  "context", "instructions",
					    "feedback", "format", "plan",    "complaint"};
	const char *vals[] = {v->problem,  v->code,   v->context, v->instructions,
			      v->feedback, v->format, v->plan,	  v->complaint};
	size_t i;

	for (i = 0; i < ST_ARRAY_LEN(names); i++) {
		if (strlen(names[i]) == n && memcmp(names[i], name, n) == 0) {
			*known = true;
			return vals[i];
		}
	}
	*known = false;
	return NULL;
}

/* At p (just after "{{"): [ws] name [ws] "}}".  Returns bytes to skip past "}}", or 0. */
static size_t placeholder_at(const char *p, const char **name, size_t *n)
{
	const char *s = p;

	while (*s == ' ')
		s++;
	*name = s;
	while ((*s >= 'a' && *s <= 'z') || *s == '_')
		s++;
	*n = (size_t)(s - *name);
	while (*s == ' ')
		s++;
	if (*n == 0 || s[0] != '}' || s[1] != '}')
		return 0;
	return (size_t)(s + 2 - p);
}

int prompt_render(const char *tmpl, const struct prompt_vars *v, struct dbuf *out, char *err,
		  size_t errlen)
{
	const char *p = tmpl, *q, *name, *val;
	size_t skip, n;
	bool known;
	int rc;

	while ((q = strstr(p, "{{")) != NULL) {
		skip = placeholder_at(q + 2, &name, &n);
		if (!skip) {
			rc = dbuf_append(out, p, (size_t)(q + 2 - p));
			p = q + 2;
			if (rc)
				return stark_errbuf(err, errlen, rc, "prompt is too large");
			continue;
		}
		val = var_value(v, name, n, &known);
		if (!known)
			return stark_errbuf(err, errlen, ST_EINVAL,
					    "unknown placeholder '{{%.*s}}'", (int)n, name);
		if (!val)
			return stark_errbuf(err, errlen, ST_EINVAL,
					    "placeholder '{{%.*s}}' has no value in this prompt",
					    (int)n, name);
		rc = dbuf_append(out, p, (size_t)(q - p));
		if (!rc)
			rc = dbuf_puts(out, val);
		if (rc)
			return stark_errbuf(err, errlen, rc, "prompt is too large");
		p = q + 2 + skip;
	}
	rc = dbuf_puts(out, p);
	return rc ? stark_errbuf(err, errlen, rc, "prompt is too large") : 0;
}

static enum prompt_file role_file(enum search_role r)
{
	static const enum prompt_file files[ROLE_COUNT] = {PROMPT_PLAN, PROMPT_CODE, PROMPT_DEBUG,
							   PROMPT_SAMPLE, PROMPT_REFLECT};

	return files[r];
}

/* Renders one loaded template; the message names the file. */
static int render_file(const struct prompt_set *p, enum prompt_file f, const struct prompt_vars *v,
		       struct dbuf *out, char *err, size_t errlen)
{
	char msg[ANCHOR_ERR_MAX];
	int rc;

	if (!p->text[f])
		return stark_errbuf(err, errlen, ST_EINVAL, "prompt template %s is not loaded",
				    file_names[f]);
	rc = prompt_render(p->text[f], v, out, msg, sizeof(msg));
	return rc ? stark_errbuf(err, errlen, rc, "%s: %s", file_names[f], msg) : 0;
}

/* Fills the role's variables; plan and instr are scratch buffers for CODE. */
static int step_vars(const struct prompt_set *p, const struct tree_node *n,
		     const struct prompt_step *st, struct dbuf *plan, struct dbuf *instr,
		     struct prompt_vars *v)
{
	int rc = 0;

	memset(v, 0, sizeof(*v));
	v->problem = st->problem;
	v->format = p->text[PROMPT_FORMAT];
	if (st->role == ROLE_SAMPLE)
		return 0;
	v->code = n->code;
	v->context = st->window ? dbuf_str(&st->window->text) : NULL;
	if (st->role == ROLE_DEBUG || st->role == ROLE_REFLECT)
		v->feedback = n->feedback[0] ? n->feedback : "(no diagnostics were recorded)";
	if (st->role == ROLE_DEBUG)
		v->instructions = n->plan[0] ? n->plan : "(none: this attempt was not planned)";
	if (st->role == ROLE_CODE) {
		if (!st->scaffold)
			return ST_EINVAL;
		rc = scaffold_render(st->scaffold, plan);
		if (!rc)
			rc = scaffold_instructions(st->scaffold, instr);
		v->plan = dbuf_str(plan);
		v->instructions = dbuf_str(instr);
	}
	return rc;
}

int prompt_build(const struct prompt_set *p, const struct search_tree *t,
		 const struct prompt_step *step, struct dbuf *system, struct dbuf *user, char *err,
		 size_t errlen)
{
	const struct tree_node *n = tree_node(t, step->node);
	struct dbuf plan, instr;
	struct prompt_vars v;
	int rc;

	dbuf_reset(system);
	dbuf_reset(user);
	if ((unsigned)step->role >= ROLE_COUNT || !n || !step->problem)
		return stark_errbuf(err, errlen, ST_EINVAL, "bad prompt step");
	if (step->window && (step->window->n == 0 || step->window->ids[0] != step->node))
		return stark_errbuf(err, errlen, ST_EINVAL,
				    "context window was built for another node");
	dbuf_init(&plan, PROMPT_MAX);
	dbuf_init(&instr, PROMPT_MAX);
	rc = step_vars(p, n, step, &plan, &instr, &v);
	if (rc) {
		stark_errbuf(err, errlen, rc, "cannot prepare the %s prompt",
			     search_role_name(step->role));
		goto out;
	}
	rc = render_file(p, PROMPT_SYSTEM, &v, system, err, errlen);
	if (!rc)
		rc = render_file(p, role_file(step->role), &v, user, err, errlen);
out:
	dbuf_release(&plan);
	dbuf_release(&instr);
	return rc;
}

int prompt_retry(const struct prompt_set *p, const char *complaint, struct dbuf *out, char *err,
		 size_t errlen)
{
	struct prompt_vars v;

	memset(&v, 0, sizeof(v));
	v.complaint = complaint;
	dbuf_reset(out);
	return render_file(p, PROMPT_RETRY, &v, out, err, errlen);
}
