/*
 * philosophers.c -- ordo example: the dining philosophers, who never
 * deadlock and never starve. A diner takes its two forks with ONE
 * ordo_lock_all (inside ordo_retry), so it holds neither while it waits,
 * and ordo's starvation bound keeps every diner's turn coming. Checked: no
 * fork in two hands, every diner ate, no stall. README.md: flags, output.
 */
#define EX_PROG "philosophers"
#include "common.h" /* flags, threads, error lines: no locking in it */
#include "ordo.h"

#define FORK_LEN 9 /* "fork:0042" */

typedef struct table_s {
  ordo_t *o;
  const char *url;
  uint64_t seed;
  long diners, meals, seconds, eat_us, think_us, lock_ms;
  long json;
  ordo_retry_options_t retry;
  char (*fork)[FORK_LEN + 1]; /* fork i's key: plain strings */
  /* owner[f]: the diner holding fork f, plus 1, or 0. A witness, not a
   * lock: relaxed, so it orders nothing; a second hand fails its swap. */
  _Atomic long *owner;
  _Atomic long violations, eating, peak, finished, stop;
  struct diner_s *d;
  ordo_stats_t s0, s1; /* before and after: the deadlocks */
  long total, fewest, errors;
  double t0, changed, stall_s, secs; /* the start, the last meal, ... */
} table_t;

/* One diner; its fields are its own until it is joined, but for meals. */
typedef struct diner_s {
  table_t *t;
  ordo_txn_t *txn;
  long id, retries;
  _Atomic long meals;                /* read by watch() while it runs */
  double hungry, max_wait, sum_wait; /* in seconds */
  int err, unlock_err;
} diner_t;

/* Below the line: witness (fork f goes from hand `from` to `to`, diner + 1
 * or 0, by CAS; any other holder is a violation), waited, stalled, report. */
static int witness(table_t *t, long f, long from, long to);
static void waited(diner_t *d, long delta);
static void stalled(table_t *t);
static void report(const table_t *t, int ok);

/* eat -- one attempt, run by ordo_retry: both forks with one ordo_lock_all,
 * eat, both down, unlock. After a lock error nothing is held and ordo_retry
 * backs off; after the meal it is done, whatever the unlock says. */
static int eat(ordo_txn_t *txn, void *arg) {
  diner_t *d = arg;
  table_t *t = d->t;
  long left = d->id, right = (d->id + 1) % t->diners, me = d->id + 1;
  ordo_req_t req[2] = {ORDO_REQ_X(t->fork[left], FORK_LEN),
                       ORDO_REQ_X(t->fork[right], FORK_LEN)};
  int rc = ordo_lock_all(txn, req, 2, t->lock_ms);
  if (rc < 0)
    return rc;
  int got_l = witness(t, left, 0, me), got_r = witness(t, right, 0, me);
  waited(d, 1);
  ex_sleep_us(t->eat_us); /* eat */
  waited(d, -1);
  if (got_r)
    witness(t, right, me, 0);
  if (got_l)
    witness(t, left, me, 0);
  if ((rc = ordo_unlock_all(txn)) < 0)
    d->unlock_err = rc;
  return 0;
}

static void *diner_run(void *arg) {
  diner_t *d = arg;
  table_t *t = d->t;
  uint64_t r = ex_mix64(t->seed ^ ex_mix64((uint64_t)d->id));
  for (long meals = 0; d->err == 0 && !atomic_load(&t->stop) &&
                       (t->meals == 0 || meals < t->meals);) {
    r = ex_mix64(r);
    ex_sleep_us((long)(r % (uint64_t)(t->think_us + 1))); /* think */
    d->hungry = ex_now_s();
    unsigned attempts = 0;
    int rc = ordo_retry(d->txn, &t->retry, eat, d, &attempts);
    d->retries += attempts > 0 ? attempts - 1 : 0;
    d->err = rc < 0 ? rc : d->unlock_err; /* no forks after every retry */
    if (d->err == 0)
      atomic_store(&d->meals, ++meals);
  }
  atomic_fetch_add(&t->finished, 1);
  return NULL;
}

/* watch -- every 10 ms while the diners run: no meal at all for stall_s
 * is a deadlock, which ordo_lock_all must never let happen; it also stops
 * the run when --seconds are up. Returns 0 once all have finished. */
static int watch(void *arg) {
  table_t *t = arg;
  long sum = 0;
  ex_sleep_us(10000);
  for (long i = 0; i < t->diners; i++)
    sum += atomic_load(&t->d[i].meals);
  double now = ex_now_s();
  if (sum != t->total)
    t->total = sum, t->changed = now;
  else if (now - t->changed >= t->stall_s)
    stalled(t);
  if (t->seconds > 0 && now - t->t0 >= (double)t->seconds)
    atomic_store(&t->stop, 1);
  return atomic_load(&t->finished) < t->diners;
}

/* check -- the invariant: no fork in two hands, every diner ate (all of
 * its meals, unless the time ran out first), and no diner gave up. */
static int check(table_t *t) {
  t->fewest = LONG_MAX;
  for (long i = 0; i < t->diners; i++) {
    long m = atomic_load(&t->d[i].meals);
    t->fewest = m < t->fewest ? m : t->fewest;
    t->errors += t->d[i].err != 0;
  }
  int all = t->seconds == 0 ? t->fewest == t->meals : t->fewest >= 1;
  return atomic_load(&t->violations) == 0 && t->fewest >= 1 && all &&
         t->errors == 0;
}

/* dine -- a txn per diner, all eating at once, watched; check; report. */
static int dine(table_t *t) {
  int rc = ex_open(&t->o, t->url), ok = 0, n = 0;
  for (; rc == 0 && n < t->diners; n++) {
    t->d[n] = (diner_t){.t = t, .id = n};
    rc = ordo_txn_begin(t->o, &t->d[n].txn, NULL); /* a remote one connects */
  }
  if (rc == 0) {
    ordo_stats(t->o, &t->s0);
    t->t0 = t->changed = ex_now_s();
    t->secs = ex_threads(t->diners, t->d, sizeof *t->d, diner_run, watch, t,
                         "--diners");
    ordo_stats(t->o, &t->s1);
    report(t, ok = check(t));
  } else {
    ex_unusable(t->url, rc);
  }
  for (long i = 0; i < n; i++)
    ordo_txn_end(t->d[i].txn); /* NULL (a begin that failed): nothing */
  ordo_close(t->o);            /* NULL when ordo_open failed: nothing */
  return ok;
}

/* ---- plumbing below: waits, flags, report ------------------------------ */

#define STALL_S 10.0 /* no meal at all for this long: a deadlock */

static int witness(table_t *t, long f, long from, long to) {
  if (atomic_compare_exchange_strong_explicit(
          &t->owner[f], &from, to, memory_order_relaxed, memory_order_relaxed))
    return 1;
  atomic_fetch_add_explicit(&t->violations, 1, memory_order_relaxed);
  return 0;
}

static const char usage[] =
    "usage: " EX_PROG
    " [--backend URL] [--diners N] [--meals N] [--seconds S]\n"
    "                    [--eat-us US] [--think-us US] [--lock-timeout MS]\n"
    "                    [--seed N] [--json]\n"
    "Diners take their two forks with one ordo_lock_all, eat, put them\n"
    "down and think; the run prints each diner's meals and longest wait and\n"
    "checks that no fork was ever in two hands, that every diner ate, and\n"
    "that the table never stalled.\n" //
    EX_HELP_BACKEND
    "  --diners N         diners and forks, 2..1000 (default 5)\n"
    "  --meals N          meals per diner, 0 for no limit (default 100)\n"
    "  --seconds S        stop after S seconds, 0 for no limit (default 0)\n"
    "  --eat-us US        how long a meal holds the forks (default 500)\n"
    "  --think-us US      the longest pause between meals (default 500)\n"
    "  --lock-timeout MS  bound on each ordo_lock_all (default 2000)\n"
    "  --seed N           the thinking pauses (default 1)\n"
    "  --json             print one JSON object instead of the summary\n"
    "Exit status: 0 the check passed, 1 it failed, the table stalled (no\n"
    "meal for 10 s) or the backend could not be used, 2 bad usage.\n";

/* The flags ex_flags takes, each with its range, in the order of to[]. */
static const char flags[] = "--diners=2..1000 --meals=0.. --seconds=0..86400 "
                            "--eat-us=0..1000000 --think-us=0..1000000 "
                            "--lock-timeout=0..3600000 --seed=0.. --json";

static void setup(int argc, char **argv, table_t *t) {
  long seed = 1;
  *t = (table_t){.diners = 5,
                 .meals = 100,
                 .eat_us = 500,
                 .think_us = 500,
                 .lock_ms = 2000};
  long *const to[] = {&t->diners,   &t->meals,   &t->seconds, &t->eat_us,
                      &t->think_us, &t->lock_ms, &seed,       &t->json};
  t->url = ex_flags(argc, argv, usage, flags, to);
  t->seed = (uint64_t)seed;
  if (t->meals == 0 && t->seconds == 0) {
    fputs(EX_PROG ": --meals 0 runs until --seconds S, which is missing: "
                  "give one or the other\n",
          stderr);
    exit(2);
  }
  ordo_retry_options_init(&t->retry);
  /* Three lock timeouts, if that is longer than STALL_S. */
  t->stall_s =
      STALL_S > 3e-3 * (double)t->lock_ms ? STALL_S : 3e-3 * (double)t->lock_ms;
  t->d = ex_calloc(t->diners, sizeof *t->d, "--diners");
  t->fork = ex_calloc(t->diners, sizeof *t->fork, "--diners");
  t->owner = ex_calloc(t->diners, sizeof *t->owner, "--diners");
  for (long f = 0; f < t->diners; f++) /* fixed width: table order */
    snprintf(t->fork[f], sizeof t->fork[f], "fork:%04u", (unsigned)f % 10000u);
}

/* waited -- at a meal's start (delta 1): how long diner d waited, and how
 * many eat at once (at most half the table); at its end (-1), one fewer.
 * Relaxed, as are all the witnesses: ordering the meals is ordo's job
 * alone (and what ThreadSanitizer then checks). */
static void waited(diner_t *d, long delta) {
  table_t *t = d->t;
  if (delta > 0) {
    double w = ex_now_s() - d->hungry;
    d->sum_wait += w;
    d->max_wait = w > d->max_wait ? w : d->max_wait;
  }
  long n = atomic_fetch_add_explicit(&t->eating, delta, memory_order_relaxed);
  long peak = atomic_load_explicit(&t->peak, memory_order_relaxed);
  while (n + delta > peak && !atomic_compare_exchange_weak_explicit(
                                 &t->peak, &peak, n + delta,
                                 memory_order_relaxed, memory_order_relaxed))
    ;
}

/* stalled -- no meal for stall_s: which diner holds which fork, and exit 1
 * (the diners are stuck: there is nothing to join). */
static void stalled(table_t *t) {
  fprintf(stderr,
          EX_PROG ": no diner has eaten for %.0f s: a deadlock, or a "
                  "backend that stopped answering; forks held:",
          t->stall_s);
  const char *sep = " ";
  for (long f = 0; f < t->diners; f++)
    if (atomic_load(&t->owner[f]) != 0) {
      fprintf(stderr, "%sfork %ld by diner %ld", sep, f,
              atomic_load(&t->owner[f]) - 1);
      sep = ", ";
    }
  fputc('\n', stderr);
  if (t->json)
    printf("{\"example\": \"philosophers\", \"backend\": \"%s\", "
           "\"stalled\": true, \"ok\": false}\n",
           ordo_url(t->o));
  exit(1);
}

static void report(const table_t *t, int ok) {
  long retries = 0, total = 0;
  int err = 0;
  for (long i = 0; i < t->diners; i++) {
    retries += t->d[i].retries;
    total += atomic_load(&t->d[i].meals);
    err = t->d[i].err != 0 ? t->d[i].err : err;
  }
  long violations = atomic_load(&t->violations);
  unsigned long long deadlocks =
      (unsigned long long)(t->s1.deadlocks - t->s0.deadlocks);
  if (t->json) {
    printf("{\"example\": \"philosophers\", \"backend\": \"%s\", \"diners\": "
           "%ld, \"seed\": %llu, \"seconds\": %.6f, \"meals\": [",
           ordo_url(t->o), t->diners, (unsigned long long)t->seed, t->secs);
    for (long i = 0; i < t->diners; i++)
      printf("%s%ld", i ? ", " : "", atomic_load(&t->d[i].meals));
    printf("], \"max_wait_us\": [");
    for (long i = 0; i < t->diners; i++)
      printf("%s%.1f", i ? ", " : "", t->d[i].max_wait * 1e6);
    printf("], \"fewest_meals\": %ld, \"peak_eating\": %ld, \"retries\": %ld, "
           "\"errors\": %ld, \"fork_violations\": %ld, \"deadlocks\": %llu, "
           "\"stalled\": false, \"ok\": %s}\n",
           t->fewest, atomic_load(&t->peak), retries, t->errors, violations,
           deadlocks, ok ? "true" : "false");
    return;
  }
  char goal[64];
  if (t->meals == 0)
    snprintf(goal, sizeof goal, "meals for %ld s", t->seconds);
  else
    snprintf(goal, sizeof goal, "%ld meals each", t->meals);
  printf(EX_PROG ": %s, %ld diners, %s, eat %ld us, think 0-%ld us, seed "
                 "%llu\n",
         ordo_url(t->o), t->diners, goal, t->eat_us, t->think_us,
         (unsigned long long)t->seed);
  printf("diner  meals  longest wait  mean wait\n");
  for (long i = 0; i < t->diners; i++) {
    long m = atomic_load(&t->d[i].meals);
    printf("%5ld  %5ld  %9.2f ms  %6.2f ms\n", i, m, t->d[i].max_wait * 1e3,
           m ? t->d[i].sum_wait * 1e3 / (double)m : 0.0);
  }
  printf("table      %ld meals in %.2f s, at most %ld of %ld diners eating "
         "at once\n",
         total, t->secs, atomic_load(&t->peak), t->diners);
  printf("locks      %ld retries; %llu deadlocks (ordo_stats)\n", retries,
         deadlocks);
  if (t->errors != 0)
    printf("errors     %ld diners gave up, the last on %s: %s\n", t->errors,
           ordo_err_name(err), ordo_strerror(err));
  printf("invariant: no fork held by two diners at once (%ld seen), every "
         "diner ate (fewest meals %ld), no deadlock: %s\n",
         violations, t->fewest, ok ? "OK" : "FAIL");
}

static void teardown(table_t *t) {
  free(t->d);
  free(t->fork);
  free(t->owner);
}

int main(int argc, char **argv) {
  table_t t;
  setup(argc, argv, &t);
  int ok = dine(&t);
  teardown(&t);
  return ok ? 0 : 1;
}
