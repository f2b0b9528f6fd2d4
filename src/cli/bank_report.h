/*
 * bank_report.h -- how `ordo bank` reports, whatever the driver: the human
 * summary and the JSON object of one result, and the table (or JSON) of
 * --compare's three. A driver fills a bank_result_t, its counter rows
 * included (bank_count_add); the report prints only what it holds, so the
 * two drivers' reports are one function. See README.md, "Reporting".
 *
 * Interface (defined in bank_report.c):
 *   bank_json_str        writes a JSON string literal
 *   bank_report          one result, as the summary or (--json) JSON
 *   bank_report_compare  --compare's results, as a table or (--json) JSON
 */
#ifndef ORDO_CLI_BANK_REPORT_H
#define ORDO_CLI_BANK_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "cli/bank_graph.h"
#include "cli/bank_model.h"

/* Writes s as a JSON string literal. */
void bank_json_str(FILE *f, const char *s);

/*
 * bank_report -- prints r, the result of the configuration o, on stdout:
 * the summary, or with o->json one JSON object. g is the --graph file (or
 * NULL without --graph); graphs says whether the driver draws graphs at
 * all, and so whether the JSON has a "graph" member (null without one).
 */
void bank_report(const bank_opts_t *o, const bank_result_t *r,
                 const bank_graph_t *g, int graphs);

/*
 * bank_report_compare -- prints the n results r of --compare's
 * configurations cfg: one table, the lock timeouts used, what --graph
 * wrote, the reason of each run that failed, and the verdict line; or with
 * cfg[0].json one object {"compare": [...], "ok", "graph"}.
 */
void bank_report_compare(const bank_opts_t *cfg, const bank_result_t *r,
                         size_t n, const bank_graph_t *g);

#endif /* ORDO_CLI_BANK_REPORT_H */
