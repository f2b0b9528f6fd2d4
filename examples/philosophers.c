/*
 * philosophers.c -- ordo example: the dining philosophers, who never
 * deadlock and never starve.
 *
 * Five diners sit at a round table with a fork between each two. To eat, a
 * diner needs both forks beside it. The textbook deadlock: every diner picks
 * up its left fork, then waits for its right one, for ever. Here a diner
 * takes its two forks with ONE ordo_lock_all: it holds neither while it
 * waits, so no cycle of waiting can form, and ordo's starvation bound (a
 * waiter that has waited long reserves its keys) keeps every diner's turn
 * coming. Each diner thinks (a random pause), gets hungry, takes its forks,
 * eats (a short bounded hold), puts them down, and again, until it has had
 * its meals or the time is up. The run then prints every diner's meals and
 * longest wait, so a reader can see that nobody starved.
 *
 * It shows: plain string keys, ordo_lock_all of two keys that other txns
 * want in the opposite order, ordo_retry, fairness, and checks: no fork in
 * two hands at once (an atomic owner word per fork), every diner ate, and
 * the run never stalled (a deadlock would stop every meal).
 *
 * Run:  build/examples/philosophers                 (in-process, mem://)
 *       build/examples/philosophers --diners 7 --seconds 3
 *       build/examples/philosophers --help          (every flag)
 * Exit: 0 the check passed, 1 it failed or the backend could not be used,
 *       2 bad usage (an unknown flag, a bad value, a malformed URL).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ordo.h"

#define PROG "philosophers"
#define FORK_LEN 9   /* "fork:0042" */
#define STALL_S 10.0 /* no meal at all for this long (the help says 10 s) */
#define URL_FORMS                                                              \
  "mem://, ordod://HOST:PORT, redis://HOST:PORT[/DB], "                        \
  "redlock://HOST:PORT,HOST:PORT,HOST:PORT, postgres://USER:PASS@HOST:PORT/DB" \
  " (each with an optional ?query)"

static const char usage[] =
    "usage: " PROG " [--backend URL] [--diners N] [--meals N] [--seconds S]\n"
    "                    [--eat-us US] [--think-us US] [--lock-timeout MS]\n"
    "                    [--seed N] [--json]\n"
    "Diners take their two forks with one ordo_lock_all, eat, put them\n"
    "down and think; the run prints each diner's meals and longest wait and\n"
    "checks that no fork was ever in two hands, that every diner ate, and\n"
    "that the table never stalled.\n"
    "  --backend URL      where the locks live (default mem://): mem://,\n"
    "                     ordod://HOST:PORT, redis://HOST:PORT[/DB],\n"
    "                     redlock://HOST:PORT,HOST:PORT,HOST:PORT,\n"
    "                     postgres://USER:PASS@HOST:PORT/DB (each with an\n"
    "                     optional ?query; a password is never shown)\n"
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

typedef struct table_s {
  ordo_t *o;
  uint64_t seed;
  long diners, meals, eat_us, think_us, lock_ms;
  ordo_retry_options_t retry;
  char (*fork)[FORK_LEN + 1]; /* fork i's key */
  /* owner[f] is the diner holding fork f, plus 1, or 0. It is a witness,
   * not a lock: updated with relaxed atomics, which order nothing, so the
   * forks are kept apart by ordo alone and a second hand on a fork shows
   * up as a failed compare-and-swap. */
  _Atomic long *owner;
  _Atomic long violations, eating, peak, finished;
  _Atomic int stop;
  pthread_barrier_t start; /* all diners sit down at once */
} table_t;

/* One diner. meals is read by the main thread while the run goes; every
 * other counter is the diner's own until it is joined. */
typedef struct diner_s {
  table_t *t;
  ordo_txn_t *txn;
  long id;
  pthread_t thread;
  _Atomic long meals;
  uint64_t hungry_ns, max_wait_ns, sum_wait_ns;
  long retries;
  int err, unlock_err;
} diner_t;

/* SplitMix64's finalizer: every output bit depends on every input bit. */
static uint64_t mix64(uint64_t z) {
  z += UINT64_C(0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* pick_up, put_down -- the witness of a fork changing hands (table_t). */
static int pick_up(table_t *t, long f, long me) {
  long free = 0;
  if (atomic_compare_exchange_strong_explicit(&t->owner[f], &free, me + 1,
                                              memory_order_relaxed,
                                              memory_order_relaxed))
    return 1;
  /* Another diner has it: ordo let two diners hold one fork. */
  atomic_fetch_add_explicit(&t->violations, 1, memory_order_relaxed);
  return 0;
}

static void put_down(table_t *t, long f, long me) {
  long mine = me + 1;
  if (!atomic_compare_exchange_strong_explicit(
          &t->owner[f], &mine, 0, memory_order_relaxed, memory_order_relaxed))
    atomic_fetch_add_explicit(&t->violations, 1, memory_order_relaxed);
}

/*
 * eat -- one attempt, run by ordo_retry: both forks with one ordo_lock_all,
 * eat, both down, unlock. On a lock error nothing is held and ordo_retry
 * backs off before trying again (the diner stays hungry meanwhile). After
 * the meal the attempt counts as done whatever the unlock says.
 */
static int eat(ordo_txn_t *txn, void *arg) {
  diner_t *d = arg;
  table_t *t = d->t;
  long left = d->id, right = (d->id + 1) % t->diners;
  ordo_req_t req[2] = {ORDO_REQ_X(t->fork[left], FORK_LEN),
                       ORDO_REQ_X(t->fork[right], FORK_LEN)};
  int rc = ordo_lock_all(txn, req, 2, t->lock_ms);
  if (rc < 0)
    return rc;
  uint64_t waited = now_ns() - d->hungry_ns;
  d->sum_wait_ns += waited;
  d->max_wait_ns = waited > d->max_wait_ns ? waited : d->max_wait_ns;
  int got_left = pick_up(t, left, d->id), got_right = pick_up(t, right, d->id);
  /* How many eat at once (at most half the table). Relaxed, as are all
   * the witnesses: they must not order one diner's meal before another's,
   * which is ordo's job alone (and what ThreadSanitizer then checks). */
  long eating =
      atomic_fetch_add_explicit(&t->eating, 1, memory_order_relaxed) + 1;
  long peak = atomic_load_explicit(&t->peak, memory_order_relaxed);
  while (eating > peak && !atomic_compare_exchange_weak_explicit(
                              &t->peak, &peak, eating, memory_order_relaxed,
                              memory_order_relaxed))
    ;
  sleep_us(t->eat_us); /* eat */
  atomic_fetch_sub_explicit(&t->eating, 1, memory_order_relaxed);
  if (got_right)
    put_down(t, right, d->id);
  if (got_left)
    put_down(t, left, d->id);
  rc = ordo_unlock_all(txn);
  if (rc < 0)
    d->unlock_err = rc;
  return 0;
}

static void *diner_run(void *arg) {
  diner_t *d = arg;
  table_t *t = d->t;
  uint64_t r = mix64(t->seed ^ mix64((uint64_t)d->id));
  pthread_barrier_wait(&t->start);
  long meals = 0;
  while (!atomic_load(&t->stop) && (t->meals == 0 || meals < t->meals)) {
    r = mix64(r);
    sleep_us((long)(r % (uint64_t)(t->think_us + 1))); /* think */
    d->hungry_ns = now_ns();
    unsigned attempts = 0;
    int rc = ordo_retry(d->txn, &t->retry, eat, d, &attempts);
    d->retries += attempts > 0 ? attempts - 1 : 0;
    d->err = rc < 0 ? rc : d->unlock_err;
    if (d->err != 0)
      break; /* still no forks after every retry, or a backend error */
    atomic_store(&d->meals, ++meals);
  }
  atomic_fetch_add(&t->finished, 1);
  return NULL;
}

/* ---- The command line: plumbing, nothing about ordo ---------------------- */

/* opt -- the value of flag name at argv[*i], as "--name V" or "--name=V";
 * NULL when argv[*i] is not that flag. Exits 2 when the value is missing. */
static const char *opt(int argc, char **argv, int *i, const char *name) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0)
    return NULL;
  if (argv[*i][n] == '=')
    return argv[*i] + n + 1;
  if (argv[*i][n] != '\0')
    return NULL;
  if (*i + 1 < argc)
    return argv[++*i];
  fprintf(stderr, PROG ": %s needs a value (see " PROG " --help)\n", name);
  exit(2);
}

/* num -- v as a whole number in lo..hi, or exit 2 saying what is wanted. */
static long num(const char *name, const char *v, long lo, long hi) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (end == v || *end != '\0' || errno != 0 || n < lo || n > hi) {
    fprintf(stderr,
            PROG ": bad value '%s' for %s: a whole number in %ld..%ld\n", v,
            name, lo, hi);
    exit(2);
  }
  return n;
}

/* shown -- url with any password starred out, for error lines. */
static const char *shown(const char *url, char *buf, size_t cap) {
  const char *s = strstr(url, "://"), *at = strrchr(url, '@');
  const char *colon =
      s && at > s ? memchr(s + 3, ':', (size_t)(at - s - 3)) : NULL;
  if (colon == NULL)
    return url;
  snprintf(buf, cap, "%.*s***%s", (int)(colon + 1 - url), url, at);
  return buf;
}

int main(int argc, char **argv) {
  const char *url = "mem://", *v;
  long seconds = 0;
  int json = 0;
  table_t t = {.seed = 1,
               .diners = 5,
               .meals = 100,
               .eat_us = 500,
               .think_us = 500,
               .lock_ms = 2000};
  for (int i = 1; i < argc; i++) {
    if ((v = opt(argc, argv, &i, "--backend")))
      url = v;
    else if ((v = opt(argc, argv, &i, "--diners")))
      t.diners = num("--diners", v, 2, 1000);
    else if ((v = opt(argc, argv, &i, "--meals")))
      t.meals = num("--meals", v, 0, LONG_MAX);
    else if ((v = opt(argc, argv, &i, "--seconds")))
      seconds = num("--seconds", v, 0, 86400);
    else if ((v = opt(argc, argv, &i, "--eat-us")))
      t.eat_us = num("--eat-us", v, 0, 1000000);
    else if ((v = opt(argc, argv, &i, "--think-us")))
      t.think_us = num("--think-us", v, 0, 1000000);
    else if ((v = opt(argc, argv, &i, "--lock-timeout")))
      t.lock_ms = num("--lock-timeout", v, 0, 3600000);
    else if ((v = opt(argc, argv, &i, "--seed")))
      t.seed = (uint64_t)num("--seed", v, 0, LONG_MAX);
    else if (strcmp(argv[i], "--json") == 0)
      json = 1;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage, stdout);
      return 0;
    } else {
      fprintf(stderr,
              PROG ": unknown option '%s': the options are --backend, "
                   "--diners, --meals, --seconds, --eat-us, --think-us, "
                   "--lock-timeout, --seed, --json (see " PROG " --help)\n",
              argv[i]);
      return 2;
    }
  }
  if (t.meals == 0 && seconds == 0) {
    fputs(PROG ": --meals 0 runs until --seconds S, which is missing: give "
               "one or the other\n",
          stderr);
    return 2;
  }
  ordo_retry_options_init(&t.retry);

  /* A URL ordo cannot parse is a usage error; a backend that does not
   * answer is not, and on the remote ones it shows only at the first
   * ordo_txn_begin, since ordo_open connects to nothing. */
  char buf[512];
  int rc = ordo_open(&t.o, url, NULL);
  if (rc == ORDO_EURL || rc == ORDO_EINVAL) {
    fprintf(stderr, PROG ": bad backend URL '%s': accepted forms are %s\n",
            shown(url, buf, sizeof buf), URL_FORMS);
    return 2;
  }
  int opened = rc == 0;
  diner_t *d = calloc((size_t)t.diners, sizeof *d);
  t.fork = calloc((size_t)t.diners, sizeof *t.fork);
  t.owner = calloc((size_t)t.diners, sizeof *t.owner);
  int oom = !d || !t.fork || !t.owner;
  long begun = 0;
  for (; rc == 0 && !oom && begun < t.diners; begun++) {
    /* Fixed-width numbers: byte order is then table order in dumps. */
    snprintf(t.fork[begun], sizeof t.fork[begun], "fork:%04u",
             (unsigned)begun % 10000u);
    d[begun].t = &t;
    d[begun].id = begun;
    rc = ordo_txn_begin(t.o, &d[begun].txn, NULL);
  }
  if (oom || rc < 0) {
    if (oom)
      fputs(PROG ": out of memory; try fewer --diners\n", stderr);
    else
      fprintf(stderr,
              PROG ": cannot use backend '%s': %s (%s); check that its server "
                   "is running and that the URL's host, port, database and "
                   "password are right\n",
              shown(url, buf, sizeof buf), ordo_strerror(rc),
              ordo_err_name(rc));
    for (long i = 0; i < begun; i++)
      if (d[i].txn != NULL)
        ordo_txn_end(d[i].txn);
    if (opened)
      ordo_close(t.o);
    free(d);
    free(t.fork);
    free(t.owner);
    return 1;
  }

  ordo_stats_t s0, s1;
  memset(&s0, 0, sizeof s0);
  memset(&s1, 0, sizeof s1);
  ordo_stats(t.o, &s0);
  pthread_barrier_init(&t.start, NULL, (unsigned)t.diners + 1);
  for (long i = 0; i < t.diners; i++)
    if (pthread_create(&d[i].thread, NULL, diner_run, &d[i]) != 0) {
      fprintf(stderr, PROG ": cannot start diner %ld; try fewer --diners\n", i);
      return 1;
    }
  pthread_barrier_wait(&t.start);

  /* Watch the table: stop it when the time is up, and call it a deadlock
   * when no diner at all has eaten for STALL_S seconds (or three lock
   * timeouts, if longer): with ordo_lock_all that must never happen. */
  uint64_t t0 = now_ns(), changed = t0;
  double stall_s = STALL_S > 3e-3 * t.lock_ms ? STALL_S : 3e-3 * t.lock_ms;
  long total = 0;
  while (atomic_load(&t.finished) < t.diners) {
    sleep_us(10000);
    long sum = 0;
    for (long i = 0; i < t.diners; i++)
      sum += atomic_load(&d[i].meals);
    uint64_t now = now_ns();
    if (sum != total) {
      total = sum;
      changed = now;
    }
    if (seconds > 0 && now - t0 >= (uint64_t)seconds * 1000000000u)
      atomic_store(&t.stop, 1);
    if ((double)(now - changed) / 1e9 >= stall_s) {
      fprintf(stderr,
              PROG ": no diner has eaten for %.0f s: a deadlock, or "
                   "a backend that stopped answering; forks held:",
              stall_s);
      const char *sep = " ";
      for (long f = 0; f < t.diners; f++)
        if (atomic_load(&t.owner[f]) != 0) {
          fprintf(stderr, "%sfork %ld by diner %ld", sep, f,
                  atomic_load(&t.owner[f]) - 1);
          sep = ", ";
        }
      fputc('\n', stderr);
      if (json)
        printf("{\"example\": \"philosophers\", \"backend\": \"%s\", "
               "\"stalled\": true, \"ok\": false}\n",
               ordo_url(t.o));
      exit(1); /* the diners are stuck: nothing to join */
    }
  }
  for (long i = 0; i < t.diners; i++)
    pthread_join(d[i].thread, NULL);
  double secs = (double)(now_ns() - t0) / 1e9;
  ordo_stats(t.o, &s1);

  /* The check: no fork in two hands, every diner ate (all of its meals,
   * unless the time ran out first), and no diner gave up. */
  long fewest = LONG_MAX, retries = 0, errors = 0;
  total = 0;
  int err = 0;
  for (long i = 0; i < t.diners; i++) {
    long m = atomic_load(&d[i].meals);
    total += m;
    fewest = m < fewest ? m : fewest;
    retries += d[i].retries;
    errors += d[i].err != 0;
    err = d[i].err != 0 ? d[i].err : err;
  }
  long violations = atomic_load(&t.violations);
  int all_meals = seconds == 0 ? fewest == t.meals : fewest >= 1;
  int ok = violations == 0 && fewest >= 1 && all_meals && errors == 0;
  uint64_t deadlocks = s1.deadlocks - s0.deadlocks;

  if (json) {
    printf("{\"example\": \"philosophers\", \"backend\": \"%s\", \"diners\": "
           "%ld, \"seed\": %llu, \"seconds\": %.6f, \"meals\": [",
           ordo_url(t.o), t.diners, (unsigned long long)t.seed, secs);
    for (long i = 0; i < t.diners; i++)
      printf("%s%ld", i ? ", " : "", atomic_load(&d[i].meals));
    printf("], \"max_wait_us\": [");
    for (long i = 0; i < t.diners; i++)
      printf("%s%.1f", i ? ", " : "", (double)d[i].max_wait_ns / 1e3);
    printf("], \"fewest_meals\": %ld, \"peak_eating\": %ld, \"retries\": %ld, "
           "\"errors\": %ld, \"fork_violations\": %ld, \"deadlocks\": %llu, "
           "\"stalled\": false, \"ok\": %s}\n",
           fewest, atomic_load(&t.peak), retries, errors, violations,
           (unsigned long long)deadlocks, ok ? "true" : "false");
  } else {
    char goal[64];
    if (t.meals == 0)
      snprintf(goal, sizeof goal, "meals for %ld s", seconds);
    else
      snprintf(goal, sizeof goal, "%ld meals each", t.meals);
    printf(PROG ": %s, %ld diners, %s, eat %ld us, think 0-%ld us, seed "
                "%llu\n",
           ordo_url(t.o), t.diners, goal, t.eat_us, t.think_us,
           (unsigned long long)t.seed);
    printf("diner  meals  longest wait  mean wait\n");
    for (long i = 0; i < t.diners; i++) {
      long m = atomic_load(&d[i].meals);
      printf("%5ld  %5ld  %9.2f ms  %6.2f ms\n", i, m,
             (double)d[i].max_wait_ns / 1e6,
             m ? (double)d[i].sum_wait_ns / 1e6 / (double)m : 0.0);
    }
    printf("table      %ld meals in %.2f s, at most %ld of %ld diners eating "
           "at once\n",
           total, secs, atomic_load(&t.peak), t.diners);
    printf("locks      %ld retries; %llu deadlocks (ordo_stats)\n", retries,
           (unsigned long long)deadlocks);
    if (errors != 0)
      printf("errors     %ld diners gave up, the last on %s: %s\n", errors,
             ordo_err_name(err), ordo_strerror(err));
    printf("invariant: no fork held by two diners at once (%ld seen), every "
           "diner ate (fewest meals %ld), no deadlock: %s\n",
           violations, fewest, ok ? "OK" : "FAIL");
  }
  for (long i = 0; i < t.diners; i++)
    ordo_txn_end(d[i].txn);
  ordo_close(t.o);
  pthread_barrier_destroy(&t.start);
  free(d);
  free(t.fork);
  free(t.owner);
  return ok ? 0 : 1;
}
