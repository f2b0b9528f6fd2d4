/*
 * bank_model.c -- the bank check apart from the places it runs on: the
 * names of its options, the plan of transfers (bank_plan), the latency
 * figures, the checks both drivers make and the verdict they build, the
 * workers' start gate and the watchdog. The drivers (bank_ordo.c,
 * bank_pg.c) run the plan and fill a bank_result_t with what they measured
 * and checked; the report (bank_report.c) prints it. Nothing here knows a
 * driver. See README.md; invariants are cited as "invariant N".
 *
 * Interface: see bank_model.h (every name there is defined here).
 */
#include "cli/bank_model.h"

#include <errno.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ordo.h"

/* ---- Names ----------------------------------------------------------------
 */

const char *const bank_mode_names[] = {"ordered", "naive"};
const char *const bank_locks_names[] = {"rows", "advisory", NULL};
_Static_assert(BANK_LOCKS_ROWS == 0 && BANK_LOCKS_ADVISORY == 1,
               "bank_locks_names is indexed by bank_locks_t");

/* --detect's values, indexed by ordo_detect_t: a name's index is its mode. */
const char *const bank_detect_names[] = {"immediate", "delayed", "off", NULL};
_Static_assert(ORDO_DETECT_IMMEDIATE == 0 && ORDO_DETECT_DELAYED == 1 &&
                   ORDO_DETECT_OFF == 2,
               "bank_detect_names is indexed by ordo_detect_t");

/* ---- The plan -------------------------------------------------------------
 */

/* Fixed so that a run's pairs and amounts can be reproduced (invariant 8). */
#define BANK_SEED UINT64_C(0x6f72646f62616e6b)

uint64_t bank_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * bank_mix64 -- the SplitMix64 finalizer (Steele, Lea and Flood, "Fast
 * splittable pseudorandom number generators", OOPSLA 2014): a bijection whose
 * output bits each depend on every input bit, so consecutive indices give
 * unrelated draws without any shared generator state between workers.
 */
uint64_t bank_mix64(uint64_t z) {
  z += UINT64_C(0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/*
 * bank_plan -- what transfer idx does, a pure function of idx (invariant 8).
 * With two accounts even indices go 0 -> 1 and odd ones 1 -> 0: exactly N
 * each way, and since workers claim consecutive indices both directions are
 * in flight at once whenever there are two workers or more. The ledger
 * (bank_pg.c) runs the same plan, and checks its journal against it.
 */
void bank_plan(size_t naccounts, uint64_t idx, size_t *from, size_t *to,
               int64_t *amount) {
  uint64_t r = bank_mix64(BANK_SEED ^ idx);
  if (naccounts == 2) {
    *from = (size_t)(idx & 1);
    *to = 1 - *from;
  } else {
    *from = (size_t)(r % naccounts);
    r = bank_mix64(r);
    *to = (size_t)(r % (naccounts - 1));
    if (*to >= *from)
      (*to)++; /* distinct from from, uniform over the others */
  }
  r = bank_mix64(r);
  *amount = 1 + (int64_t)(r % BANK_MAX_AMOUNT);
}

/* ---- Measures and checks --------------------------------------------------
 */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/*
 * Nearest-rank percentile of sorted v[0..n), in microseconds: the smallest
 * sample with at least pct percent of the samples at or below it.
 */
static double percentile_us(const uint64_t *v, uint64_t n, unsigned pct) {
  if (n == 0)
    return 0.0;
  uint64_t rank = (pct * n + 99) / 100; /* ceil(pct * n / 100) */
  if (rank < 1)
    rank = 1;
  return (double)v[rank - 1] / 1000.0;
}

void bank_latency(bank_result_t *r, uint64_t *lat_ns, uint64_t n) {
  qsort(lat_ns, n, sizeof(*lat_ns), cmp_u64);
  r->p50_us = percentile_us(lat_ns, n, 50);
  r->p99_us = percentile_us(lat_ns, n, 99);
}

void bank_verdict_add(bank_result_t *r, const char *fmt, ...) {
  size_t len = strlen(r->verdict);
  if (len + 3 >= sizeof(r->verdict))
    return;
  if (len > 0) {
    memcpy(r->verdict + len, "; ", 3);
    len += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->verdict + len, sizeof(r->verdict) - len, fmt, ap);
  va_end(ap);
}

void bank_check_total(bank_result_t *r) {
  if (r->total_after != r->total_before)
    bank_verdict_add(r, "balance changed from %" PRId64 " to %" PRId64,
                     r->total_before, r->total_after);
}

void bank_check_count(bank_result_t *r) {
  if (r->completed != r->expected)
    bank_verdict_add(r, "%" PRIu64 "/%" PRIu64 " transfers completed",
                     r->completed, r->expected);
}

/* The naive mode deadlocks on purpose: there the count is a measure, and
 * the other checks show that the victims' retries lost nothing. */
void bank_check_ordered(const bank_opts_t *o, bank_result_t *r) {
  if (o->mode == BANK_MODE_ORDERED && r->deadlocks != 0)
    bank_verdict_add(r, "%" PRIu64 " deadlocks in ordered mode", r->deadlocks);
}

int bank_judged(bank_result_t *r) {
  r->ok = r->verdict[0] == '\0';
  return r->ok;
}

void bank_count_add(bank_result_t *r, const char *json, const char *label,
                    uint64_t value, const char *note, ...) {
  if (r->ncount >= BANK_MAX_COUNTS)
    return; /* a driver lists a fixed few; the bound is the array's */
  bank_count_t *c = &r->count[r->ncount++];
  c->json = json;
  c->label = label;
  c->value = value;
  va_list ap;
  va_start(ap, note);
  vsnprintf(c->note, sizeof(c->note), note, ap);
  va_end(ap);
}

/*
 * bank_url_redact -- copies url into out with any password replaced by "***",
 * for error lines printed before ordo_url() can do it (the open failed). The
 * password is what lies between the ':' after the user and the '@' that ends
 * the authority, as in redis://user:secret@host.
 */
void bank_url_redact(const char *url, char *out, size_t cap) {
  snprintf(out, cap, "%s", url);
  const char *auth = strstr(url, "://");
  if (auth == NULL)
    return;
  auth += 3;
  size_t alen = strcspn(auth, "/?#");
  const char *at = NULL;
  for (const char *p = auth; p < auth + alen; p++)
    if (*p == '@')
      at = p; /* the last '@' ends the userinfo */
  if (at == NULL)
    return;
  const char *colon = memchr(auth, ':', (size_t)(at - auth));
  if (colon == NULL)
    return;
  snprintf(out, cap, "%.*s***%s", (int)(colon + 1 - url), url, at);
}

/* ---- The watchdog and the start gate (README.md, "The watchdog") ----------
 */

static void *bank_watchdog_thread(void *arg) {
  bank_watchdog_t *wd = arg;
  ordo__mutex_lock(&wd->mu);
  while (!wd->cancel &&
         ordo__cond_timedwait(&wd->cv, &wd->mu, &wd->deadline) != ETIMEDOUT)
    ;
  int fire = !wd->cancel;
  ordo__mutex_unlock(&wd->mu);
  if (!fire)
    return NULL;
  /* From here on the main thread is blocked in a pthread_join (of a worker,
   * or of this thread in bank_watchdog_stop) that can only end with the
   * process: it has not stopped the bar or closed the place, and never
   * will. So the bar is ours to stop and what dump reads stays valid. No
   * lock is held. */
  cli_progress_stop(wd->bar);
  fprintf(stderr,
          "ordo bank: watchdog: the run did not finish within %ld s; %s "
          "follows:\n",
          wd->seconds, wd->what);
  fflush(stderr);
  wd->dump(wd->arg);
  fflush(stderr);
  _exit(CLI_EXIT_WATCHDOG);
}

/* bank_watchdog_start's setup: 0, or an error number (nothing to stop). */
static int watchdog_setup(bank_watchdog_t *wd, long seconds,
                          cli_progress_t *bar, const char *what,
                          bank_dump_cb dump, void *arg) {
  memset(wd, 0, sizeof(*wd));
  wd->dump = dump;
  wd->arg = arg;
  wd->what = what;
  wd->bar = bar;
  wd->seconds = seconds;
  if (seconds == 0)
    return 0;
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc != 0)
    return rc;
  /* The deadline is on CLOCK_MONOTONIC, so setting the wall clock can
   * neither fire the watchdog early nor hold it off. */
  rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (rc == 0)
    rc = pthread_cond_init(&wd->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (rc != 0)
    return rc;
  rc = ordo__mutex_init(&wd->mu);
  if (rc != 0) {
    pthread_cond_destroy(&wd->cv);
    return rc;
  }
  clock_gettime(CLOCK_MONOTONIC, &wd->deadline);
  wd->deadline.tv_sec += (time_t)seconds;
  rc = pthread_create(&wd->thread, NULL, bank_watchdog_thread, wd);
  if (rc != 0) {
    ordo__mutex_destroy(&wd->mu);
    pthread_cond_destroy(&wd->cv);
  } else {
    wd->active = 1;
  }
  return rc;
}

int bank_watchdog_start(bank_watchdog_t *wd, long seconds, cli_progress_t *bar,
                        const char *what, bank_dump_cb dump, void *arg) {
  int rc = watchdog_setup(wd, seconds, bar, what, dump, arg);
  if (rc != 0)
    fprintf(stderr,
            "ordo bank: cannot start the watchdog thread: %s; try without "
            "--watchdog\n",
            strerror(rc));
  return rc;
}

void bank_gate_init(bank_gate_t *g) {
  ordo__mutex_init(&g->mu);
  pthread_cond_init(&g->cv, NULL);
  g->go = g->abort = 0;
}

void bank_gate_destroy(bank_gate_t *g) {
  ordo__mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
}

void bank_gate_open(bank_gate_t *g, int go) {
  ordo__mutex_lock(&g->mu);
  if (go)
    g->go = 1;
  else
    g->abort = 1;
  pthread_cond_broadcast(&g->cv);
  ordo__mutex_unlock(&g->mu);
}

int bank_gate_wait(bank_gate_t *g) {
  ordo__mutex_lock(&g->mu);
  while (!g->go && !g->abort)
    ordo__cond_wait(&g->cv, &g->mu);
  int aborted = g->abort;
  ordo__mutex_unlock(&g->mu);
  return aborted;
}

void bank_watchdog_stop(bank_watchdog_t *wd) {
  if (!wd->active)
    return;
  ordo__mutex_lock(&wd->mu);
  wd->cancel = 1;
  pthread_cond_signal(&wd->cv);
  ordo__mutex_unlock(&wd->mu);
  pthread_join(wd->thread, NULL);
  ordo__mutex_destroy(&wd->mu);
  pthread_cond_destroy(&wd->cv);
  wd->active = 0;
}

/* ---- The crew: the workers' threads, gate, bar and watchdog ---------------
 */

/* The progress bar's read callback: transfers finished by all workers. */
static uint64_t crew_progress_read(void *arg) {
  const bank_crew_t *c = arg;
  uint64_t sum = 0;
  for (size_t i = 0; i < c->n; i++) {
    _Atomic uint64_t *done =
        (_Atomic uint64_t *)((char *)c->first + i * c->stride + c->done_off);
    sum += atomic_load_explicit(done, memory_order_relaxed);
  }
  return sum;
}

int bank_crew_run(const bank_crew_t *c, int status, double *seconds) {
  pthread_t thread[BANK_MAX_WORKERS];
  bank_gate_init(c->gate);
  size_t started = 0;
  for (; status == CLI_EXIT_OK && started < c->n; started++) {
    int rc = pthread_create(&thread[started], NULL, c->work,
                            (char *)c->first + started * c->stride);
    if (rc != 0) {
      fprintf(stderr,
              "ordo bank: cannot start worker thread %zu: %s; try fewer "
              "--workers\n",
              started + 1, strerror(rc));
      status = CLI_EXIT_FAIL;
      break;
    }
  }

  /* Zeroed, both are safe to stop when they never started. The bar starts
   * before the watchdog, which stops it when it fires. */
  cli_progress_t bar;
  bank_watchdog_t wd;
  memset(&bar, 0, sizeof(bar));
  memset(&wd, 0, sizeof(wd));
  if (status == CLI_EXIT_OK)
    cli_progress_start(&bar, c->label, c->total, crew_progress_read, (void *)c);

  /* Open the gate only once every worker exists, so the clock measures all
   * of them working (invariant 6). The watchdog is armed just before, so its
   * SEC seconds count from the start of the transfers too (a few
   * microseconds early, never late). */
  if (status == CLI_EXIT_OK &&
      bank_watchdog_start(&wd, c->watchdog_s, &bar, c->what, c->dump,
                          c->dump_arg) != 0)
    status = CLI_EXIT_FAIL;
  double t0 = cli_now();
  bank_gate_open(c->gate, status == CLI_EXIT_OK);
  for (size_t i = 0; i < started; i++)
    pthread_join(thread[i], NULL);
  double t1 = cli_now();
  /* The run is over: cancel the watchdog before touching the bar (it stops
   * the bar itself when it fires, and then this join never returns). */
  bank_watchdog_stop(&wd);
  cli_progress_stop(&bar);
  bank_gate_destroy(c->gate);
  *seconds = t1 - t0;
  return status;
}
