/*
 * show.h -- rendering runs for people and programs (internal to
 * orchestrator/): `stark show`, `stark export`, `stark list`, and the plan
 * `stark resume --dry-run` prints.
 *
 * All of these read a run loaded with run_load(lock = false); none writes
 * to the store.  A run whose journal says "running" while no process holds
 * its lock was killed: it is shown as "interrupted".
 *
 * Ownership: r and st are borrowed; out is written to and not closed.
 */
#ifndef STARK_SHOW_H
#define STARK_SHOW_H

#include <stdio.h>

#include "engine/engine.h"

/* The tree (with each node's complaints), leaders, spend per role and per
 * model, and state; --json gives the object documented in docs/RUNS.md. */
ST_WUR int show_run(struct run *r, bool json, FILE *out);
/* The object `stark show --json` prints (a new reference; NULL when out of
 * memory): what `stark report` builds on. */
json_t *show_run_json(struct run *r);
/* "stark", "sampling", "reflexion". */
const char *show_policy_name(enum search_policy p);
/* What resume would do next, in one line per fact. */
void show_resume_plan(struct run *r, FILE *out);
#define EXPORT_BEST    (-1L) /* the fastest correct node, if it beats the reference */
#define EXPORT_FASTEST (-2L) /* the fastest correct node, whatever its speedup */

/*
 * Writes a node's code (a node id, EXPORT_BEST or EXPORT_FASTEST) to path
 * (atomic replace; NULL or "-": stdout).  ST_ENOENT with a message when
 * there is no such node, no correct node, or (EXPORT_BEST) none that beats
 * the reference: the message names the fastest and --fastest.
 */
ST_WUR int export_code(struct run *r, long node, const char *path, char *err, size_t errlen);
/*
 * JSON Lines from the journal: "responses" (LLM replies, a replay file for
 * --llm replay:), "results" (evaluation results, for --eval replay:) or
 * "journal" (every event).
 */
ST_WUR int export_jsonl(struct run *r, const char *what, const char *path, char *err,
			size_t errlen);
/* One line per run of the store (or a JSON array). */
ST_WUR int show_list(struct store *st, bool json, FILE *out);

#endif
