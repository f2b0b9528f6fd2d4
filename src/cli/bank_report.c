/*
 * bank_report.c -- the report of `ordo bank`, the same for every driver:
 * the summary, the JSON object of a result, and --compare's table. It
 * prints what the driver put into the bank_result_t: the words that name
 * the place and its detection (place, locks, detect, deadlock_timeout) and
 * the counter rows, so ordo's run and PostgreSQL's ledger read the same
 * way and a new driver reports without a line of its own here. See
 * README.md, "Reporting".
 *
 * Interface: bank_json_str, bank_report, bank_report_compare
 * (bank_report.h).
 */
#include "cli/bank_report.h"

#include <inttypes.h>
#include <stdatomic.h>

void bank_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* The members of one result's JSON object, without the braces. */
static void report_json_fields(FILE *f, const bank_opts_t *o,
                               const bank_result_t *r) {
  double rate = r->seconds > 0 ? (double)r->completed / r->seconds : 0.0;
  fputs("\"backend\": ", f);
  bank_json_str(f, r->backend ? r->backend : "");
  if (r->locks != NULL)
    fprintf(f, ", \"locks\": \"%s\"", r->locks);
  if (r->deadlock_timeout[0] != '\0') {
    fputs(", \"deadlock_timeout\": ", f);
    bank_json_str(f, r->deadlock_timeout);
  }
  fprintf(f, ", \"mode\": \"%s\"", bank_mode_names[o->mode]);
  if (r->detect != NULL)
    fprintf(f, ", \"detect\": \"%s\"", r->detect);
  fprintf(f,
          ", \"accounts\": %ld, \"workers\": %ld, \"lock_timeout_ms\": %ld, "
          "\"attempts\": %ld, \"transfers\": %" PRIu64
          ", \"transfers_expected\": %" PRIu64 ", \"failed\": %" PRIu64
          ", \"seconds\": %.6f, \"transfers_per_s\": %.1f, \"p50_us\": %.1f, "
          "\"p99_us\": %.1f",
          o->accounts, o->workers, o->lock_timeout_ms, o->attempts,
          r->completed, r->expected, r->failed, r->seconds, rate, r->p50_us,
          r->p99_us);
  for (size_t i = 0; i < r->ncount; i++)
    if (r->count[i].json != NULL)
      fprintf(f, ", \"%s\": %" PRIu64, r->count[i].json, r->count[i].value);
  fprintf(f,
          ", \"total_before\": %" PRId64 ", \"total_after\": %" PRId64
          ", \"ok\": %s, \"verdict\": ",
          r->total_before, r->total_after, r->ok ? "true" : "false");
  bank_json_str(f, r->verdict);
}

/* "graph": null, or what --graph FILE holds. */
static void report_json_graph(FILE *f, const bank_graph_t *g) {
  fputs("\"graph\": ", f);
  if (g == NULL) {
    fputs("null", f);
    return;
  }
  fputs("{\"file\": ", f);
  bank_json_str(f, g->path);
  if (atomic_load(&g->claimed))
    fprintf(f,
            ", \"deadlock\": %" PRIu64 ", \"edges\": %zu, \"victim\": %" PRIu64
            "}",
            g->rec.seq, g->rec.nedges, g->rec.victim);
  else
    fputs(", \"deadlock\": null}", f);
}

/* The line that says what --graph FILE holds; nothing without --graph. */
static void report_graph_line(const bank_graph_t *g) {
  if (g == NULL)
    return;
  if (atomic_load(&g->claimed))
    printf("graph         %s: the cycle of deadlock %" PRIu64 " (%zu edges, "
           "victim txn %" PRIu64 "), as DOT\n",
           g->path, g->rec.seq, g->rec.nedges, g->rec.victim);
  else
    printf("graph         %s: no deadlock was recorded, so an empty graph\n",
           g->path);
}

static void report_human(const bank_opts_t *o, const bank_result_t *r,
                         const bank_graph_t *g) {
  double rate = r->seconds > 0 ? (double)r->completed / r->seconds : 0.0;
  char att[32];
  if (o->attempts == 0)
    snprintf(att, sizeof(att), "until done");
  else
    snprintf(att, sizeof(att), "at most %ld", o->attempts);
  printf("ordo bank: %s%s, %s mode, %s%s, %ld accounts, %ld workers, "
         "lock timeout %ld ms, attempts %s\n",
         r->backend ? r->backend : "", r->place, bank_mode_names[o->mode],
         r->detect ? "detect " : "deadlock_timeout ",
         r->detect ? r->detect : r->deadlock_timeout, o->accounts, o->workers,
         o->lock_timeout_ms, att);
  if (o->accounts == 2)
    printf("transfers     %" PRIu64 "/%" PRIu64 " (%" PRIu64
           " from 0 to 1, %" PRIu64 " from 1 to 0)\n",
           r->completed, r->expected, r->forward, r->completed - r->forward);
  else
    printf("transfers     %" PRIu64 "/%" PRIu64
           " (between random distinct pairs)\n",
           r->completed, r->expected);
  printf("seconds       %.3f\n", r->seconds);
  printf("transfers/s   %.0f\n", rate);
  printf("latency       p50 %.1f us, p99 %.1f us per transfer (retries and "
         "backoff included)\n",
         r->p50_us, r->p99_us);
  for (size_t i = 0; i < r->ncount; i++)
    if (r->count[i].label != NULL)
      printf("%-13s %" PRIu64 "%s\n", r->count[i].label, r->count[i].value,
             r->count[i].note);
  printf("balance       before %" PRId64 ", after %" PRId64 "\n",
         r->total_before, r->total_after);
  report_graph_line(g);
  printf("verdict: %s \u2014 %s\n", r->ok ? "OK" : "FAIL", r->verdict);
}

void bank_report(const bank_opts_t *o, const bank_result_t *r,
                 const bank_graph_t *g, int graphs) {
  if (!o->json) {
    report_human(o, r, g);
    return;
  }
  fputc('{', stdout);
  report_json_fields(stdout, o, r);
  if (graphs) {
    fputs(", ", stdout);
    report_json_graph(stdout, g);
  }
  fputs("}\n", stdout);
}

/* The table of --compare (bank_report_compare). */
static void report_compare_table(const bank_opts_t *cfg, const bank_result_t *r,
                                 size_t n, const bank_graph_t *g) {
  printf("ordo bank --compare: %s, %ld accounts, %ld workers, 2 x %ld "
         "transfers\n",
         r[0].backend ? r[0].backend : "", cfg[0].accounts, cfg[0].workers,
         cfg[0].transfers);
  printf("%-7s  %-9s  %11s  %8s  %10s  %10s  %7s  %8s  %9s  %s\n", "mode",
         "detect", "transfers/s", "seconds", "p50 us", "p99 us", "retries",
         "timeouts", "deadlocks", "ok");
  size_t failed = 0;
  for (size_t i = 0; i < n; i++) {
    const bank_result_t *x = &r[i];
    double rate = x->seconds > 0 ? (double)x->completed / x->seconds : 0.0;
    printf("%-7s  %-9s  %11.0f  %8.3f  %10.1f  %10.1f  %7" PRIu64 "  %8" PRIu64
           "  %9" PRIu64 "  %s\n",
           bank_mode_names[cfg[i].mode], bank_detect_names[cfg[i].detect], rate,
           x->seconds, x->p50_us, x->p99_us, x->retries, x->timeouts,
           x->deadlocks, x->ok ? "yes" : "NO");
    failed += !x->ok;
  }
  printf("lock timeout: %ld ms, and %ld ms in the detect-off run; latency "
         "includes retries and backoff\n",
         cfg[0].lock_timeout_ms, cfg[n - 1].lock_timeout_ms);
  report_graph_line(g);
  for (size_t i = 0; i < n; i++)
    if (!r[i].ok)
      printf("%s, detect %s: FAIL \u2014 %s\n", bank_mode_names[cfg[i].mode],
             bank_detect_names[cfg[i].detect], r[i].verdict);
  if (failed == 0)
    printf("verdict: OK \u2014 all %zu runs passed\n", n);
  else
    printf("verdict: FAIL \u2014 %zu of %zu runs failed\n", failed, n);
}

void bank_report_compare(const bank_opts_t *cfg, const bank_result_t *r,
                         size_t n, const bank_graph_t *g) {
  if (!cfg[0].json) {
    report_compare_table(cfg, r, n, g);
    return;
  }
  int ok = 1;
  fputs("{\"compare\": [", stdout);
  for (size_t i = 0; i < n; i++) {
    fputs(i ? ", {" : "{", stdout);
    report_json_fields(stdout, &cfg[i], &r[i]);
    fputc('}', stdout);
    ok = ok && r[i].ok;
  }
  printf("], \"ok\": %s, ", ok ? "true" : "false");
  report_json_graph(stdout, g);
  fputs("}\n", stdout);
}
