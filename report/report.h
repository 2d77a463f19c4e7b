/*
 * report.h -- what a search did, for people: the data model of a run (or of
 * a bench, several runs with a results table) built from the store, the
 * one-page HTML report that renders it (`stark report`), and the terminal
 * view of one node (`stark show RUN --node N`).
 *
 * The model is one JSON document (docs/REPORT.md lists every field):
 *
 *   {"format": "stark-report", "version": 1, "generated": UNIX_TIME,
 *    "title": "...", "runs": [RUN...], "bench": BENCH or null}
 *
 * RUN is report_run_json()'s object: the run's summary (as `stark show
 * --json`), its nodes with everything known about each (code, the plan's
 * instructions, the evaluation's message, log tail, flags, env and stage
 * times, the rejection reason), its attempts in order (the policy's
 * choice, the LLM calls with tokens, dollars and latency, the anchor
 * checks' complaints, the outcome, the cumulative spend and best speedup
 * after it), its state changes, and verdict counts per agent role.
 * BENCH is report_bench_json()'s object.
 *
 * The page is a template (report/page.html, linked into the binary) with
 * the document embedded as JSON in a <script type="application/json">
 * element, '<', '>' and '&' written as \u003c, \u003e, \u0026 and every
 * non-ASCII character as \uXXXX, so no string from a candidate can end the
 * element; the page's script renders every string as text, never as HTML.
 * The page fetches nothing: its styles and script are inline.
 *
 * Prefix: report_.  Files: model.c (runs), bench.c (bench section),
 * build.c (a document from ids), html.c (the page), text.c (the
 * terminal), page.html + page.S (the template).
 *
 * Everything here reads the store; nothing writes to it.
 *
 * Ownership: runs and stores are borrowed for the call; json_t results are
 * new references owned by the caller; documents passed in are borrowed.
 */
#ifndef STARK_REPORT_H
#define STARK_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "common/common.h"
#include "engine/engine.h"

#define REPORT_VERSION	  1
#define REPORT_LOG_TAIL	  (8u << 10)   /* bytes of a node's log kept (its end) */
#define REPORT_HTML_MAX	  (512u << 20) /* bytes of one page */
#define REPORT_BENCH_ROWS 100000       /* rows of a bench's table or problem list */
#define REPORT_ALL	  (-1L)	       /* report_run_json: details of every node */

/*
 * A run as the report's RUN object, from r (loaded, no lock needed) and a
 * scan of its journal.  detail: REPORT_ALL for every node's code, plan and
 * evaluation, or one node id for that node's alone (the others keep their
 * summary: what `stark show --node` needs).  ST_EPROTO with err set on a
 * journal that does not read back.
 */
ST_WUR int report_run_json(struct run *r, long detail, json_t **out, char *err, size_t errlen);

/*
 * A bench section from a bench record (docs/REPORT.md: "kind": "bench",
 * level, table rows, problem rows naming their run ids) and the RUN objects
 * of its runs (an array; runs the record names but the array lacks are
 * marked "missing" in their rows): the record's fields checked and copied,
 * plus one best-speedup-against-attempts curve per (level, policy).
 * ST_EINVAL with err set when the record does not have that shape.
 */
ST_WUR int report_bench_json(const json_t *record, const json_t *runs, json_t **out, char *err,
			     size_t errlen);

/*
 * The document for n ids of st: each a run, or one bench record (a store
 * record whose metadata has "kind": "bench"), reported alone with the runs
 * its rows name.  ST_ENOENT (no such run), ST_EINVAL (a bench record of the
 * wrong shape) and others with err set.
 */
ST_WUR int report_build(struct store *st, const char *const *ids, size_t n, json_t **out, char *err,
			size_t errlen);

/* The document around runs (an array) and bench (NULL: none); takes both. */
ST_WUR int report_doc(const char *title, json_t *runs, json_t *bench, json_t **out);

/*
 * The page for doc, appended to out (whose cap applies: ST_ETOOBIG past
 * it).  ST_EINVAL when doc does not encode.
 */
ST_WUR int report_html(const json_t *doc, struct dbuf *out);

/* The page's template as linked (borrowed, static). */
const char *report_template(size_t *len);

/*
 * Everything about node id of a RUN object, for the terminal: origin,
 * parent, instructions, verdict, message, log tail, timings, flags, the
 * LLM calls that made it, why it was rejected.  ST_ENOENT for an unknown
 * node.
 */
ST_WUR int report_print_node(const json_t *run, uint32_t id, FILE *out);

#endif
