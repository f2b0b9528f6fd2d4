/*
 * split.c -- ordo example: splitting expenses among friends.
 *
 * 50 users keep balances in cents. An expense is paid by one user for 2 to 5
 * others: the payer's balance goes up by the amount, each participant's down
 * by a share, and the shares add up to the amount to the cent (the first
 * amount % n participants pay one cent more). 8 threads apply thousands of
 * expenses at once. Each expense locks every balance it touches, payer and
 * participants, with ONE ordo_lock_all: the keys are sorted and taken all or
 * nothing, so two expenses over overlapping sets of users can never each
 * hold half of the other's set and wait for the rest.
 *
 * It shows: keys from ordo_key_u64, lock sets of different sizes, ordo_retry
 * around one unit of work, and two checks afterwards: the balances add up to
 * 0, and every balance equals what a serial replay of the same expenses
 * gives (so no update was lost to a race).
 *
 * Run:  build/examples/split                     (in-process, mem://)
 *       build/examples/split --backend ordod://127.0.0.1:7411 --expenses 500
 *       build/examples/split --help              (every flag)
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

#define PROG "split"
#define MAX_SHARERS 5     /* an expense is split among 2..5 others */
#define MAX_CENTS 100000L /* an expense is 0.01 to 1000.00 */
#define URL_FORMS                                                              \
  "mem://, ordod://HOST:PORT, redis://HOST:PORT[/DB], "                        \
  "redlock://HOST:PORT,HOST:PORT,HOST:PORT, postgres://USER:PASS@HOST:PORT/DB" \
  " (each with an optional ?query)"

static const char usage[] =
    "usage: " PROG " [--backend URL] [--users N] [--expenses N] [--threads N]\n"
    "             [--lock-timeout MS] [--seed N] [--json]\n"
    "Threads apply expenses, each paid by one user and split among 2-5\n"
    "others, locking all of their balances with one ordo_lock_all; then\n"
    "the run checks that the balances add up to 0 and equal a serial\n"
    "replay of the same expenses.\n"
    "  --backend URL      where the locks live (default mem://): mem://,\n"
    "                     ordod://HOST:PORT, redis://HOST:PORT[/DB],\n"
    "                     redlock://HOST:PORT,HOST:PORT,HOST:PORT,\n"
    "                     postgres://USER:PASS@HOST:PORT/DB (each with an\n"
    "                     optional ?query; a password is never shown)\n"
    "  --users N          users, 6..1000000 (default 50)\n"
    "  --expenses N       expenses, 1..100000000 (default 5000)\n"
    "  --threads N        threads applying them, 1..1000 (default 8)\n"
    "  --lock-timeout MS  bound on each ordo_lock_all (default 2000)\n"
    "  --seed N           the expenses: who pays, who shares, how much "
    "(default 1)\n"
    "  --json             print one JSON object instead of the summary\n"
    "Exit status: 0 the check passed, 1 it failed or the backend could not\n"
    "be used, 2 bad usage.\n";

/* One expense: a pure function of the seed and its index (plan()). */
typedef struct expense_s {
  uint64_t payer, sharer[MAX_SHARERS];
  int n;         /* sharers */
  int64_t cents; /* the amount paid */
} expense_t;

typedef struct split_s {
  ordo_t *o;
  uint64_t seed;
  long users, expenses, lock_ms;
  ordo_retry_options_t retry;
  /* balance[u] is guarded by user u's ordo lock and by nothing else. */
  int64_t *balance;
  unsigned char *applied; /* per expense, by the thread that claimed it */
  _Atomic long next;      /* the next expense to claim */
} split_t;

/* One thread; its counters are read after the join. */
typedef struct worker_s {
  split_t *s;
  ordo_txn_t *txn;
  pthread_t thread;
  long retries, failed;
  int err; /* the last error that made an expense fail */
} worker_t;

/* One expense being applied, handed to ordo_retry. */
typedef struct job_s {
  split_t *s;
  long idx;
  expense_t e;
  int unlock_err;
} job_t;

/* SplitMix64's finalizer: every output bit depends on every input bit. */
static uint64_t mix64(uint64_t z) {
  z += UINT64_C(0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* plan -- expense idx: a payer, 2-5 distinct others, an amount. The same
 * seed gives the same expenses, whichever thread applies them when. */
static void plan(const split_t *s, long idx, expense_t *e) {
  uint64_t r = mix64(s->seed ^ mix64((uint64_t)idx));
  uint64_t n = (uint64_t)s->users;
  e->payer = r % n;
  e->n = 2 + (int)((r >> 40) % (MAX_SHARERS - 1));
  for (int k = 0; k < e->n; k++) {
    int fresh;
    do { /* draw until it is neither the payer nor drawn already */
      r = mix64(r);
      e->sharer[k] = r % n;
      fresh = e->sharer[k] != e->payer;
      for (int j = 0; j < k; j++)
        fresh = fresh && e->sharer[j] != e->sharer[k];
    } while (!fresh);
  }
  e->cents = 1 + (int64_t)(mix64(r) % MAX_CENTS);
}

/* apply -- the split itself; the caller holds every balance it touches.
 * Shares of cents / n, and one cent more for the first cents % n sharers:
 * they add up to the amount exactly, so no cent is made or lost. */
static void apply(int64_t *balance, const expense_t *e) {
  int64_t share = e->cents / e->n, rest = e->cents % e->n;
  balance[e->payer] += e->cents;
  for (int k = 0; k < e->n; k++)
    balance[e->sharer[k]] -= share + (k < rest);
}

/*
 * pay -- one attempt, run by ordo_retry: lock payer and sharers with one
 * ordo_lock_all (in any order: it sorts them), apply, unlock. On a lock
 * error nothing is held and nothing was changed, so ordo_retry may back
 * off and run it again. Once applied, the attempt counts as done whatever
 * the unlock says: returning its error could apply the expense twice.
 */
static int pay(ordo_txn_t *t, void *arg) {
  job_t *j = arg;
  uint8_t key[1 + MAX_SHARERS][8];
  ordo_req_t req[1 + MAX_SHARERS];
  ordo_key_u64(key[0], j->e.payer);
  req[0] = (ordo_req_t)ORDO_REQ_X(key[0], 8);
  for (int k = 0; k < j->e.n; k++) {
    ordo_key_u64(key[k + 1], j->e.sharer[k]);
    req[k + 1] = (ordo_req_t)ORDO_REQ_X(key[k + 1], 8);
  }
  int rc = ordo_lock_all(t, req, (size_t)j->e.n + 1, j->s->lock_ms);
  if (rc < 0)
    return rc;
  apply(j->s->balance, &j->e);
  j->s->applied[j->idx]++;
  rc = ordo_unlock_all(t);
  if (rc < 0)
    j->unlock_err = rc;
  return 0;
}

static void *worker_run(void *arg) {
  worker_t *w = arg;
  split_t *s = w->s;
  for (;;) {
    job_t j = {.s = s};
    /* Each index goes to one thread. Relaxed: a stronger order would make
     * the claims themselves order the threads' balance updates, and hide a
     * missing lock from ThreadSanitizer; the ordo locks alone must. */
    j.idx = atomic_fetch_add_explicit(&s->next, 1, memory_order_relaxed);
    if (j.idx >= s->expenses)
      break;
    plan(s, j.idx, &j.e);
    unsigned attempts = 0;
    int rc = ordo_retry(w->txn, &s->retry, pay, &j, &attempts);
    w->retries += attempts > 0 ? attempts - 1 : 0;
    if (rc < 0 || j.unlock_err < 0) {
      w->failed += rc < 0;
      w->err = rc < 0 ? rc : j.unlock_err;
      if (j.unlock_err < 0 || !ordo_is_retryable(rc))
        break; /* keys may be left locked, or the backend is unusable */
    }
  }
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

/* money -- cents as "-12.34", in one of two buffers of the caller's. */
static const char *money(char buf[32], int64_t cents) {
  int64_t a = cents < 0 ? -cents : cents;
  snprintf(buf, 32, "%s%lld.%02lld", cents < 0 ? "-" : "", (long long)(a / 100),
           (long long)(a % 100));
  return buf;
}

int main(int argc, char **argv) {
  const char *url = "mem://", *v;
  long threads = 8;
  int json = 0;
  split_t s = {.seed = 1, .users = 50, .expenses = 5000, .lock_ms = 2000};
  for (int i = 1; i < argc; i++) {
    if ((v = opt(argc, argv, &i, "--backend")))
      url = v;
    else if ((v = opt(argc, argv, &i, "--users")))
      s.users = num("--users", v, 1 + MAX_SHARERS, 1000000);
    else if ((v = opt(argc, argv, &i, "--expenses")))
      s.expenses = num("--expenses", v, 1, 100000000);
    else if ((v = opt(argc, argv, &i, "--threads")))
      threads = num("--threads", v, 1, 1000);
    else if ((v = opt(argc, argv, &i, "--lock-timeout")))
      s.lock_ms = num("--lock-timeout", v, 0, 3600000);
    else if ((v = opt(argc, argv, &i, "--seed")))
      s.seed = (uint64_t)num("--seed", v, 0, LONG_MAX);
    else if (strcmp(argv[i], "--json") == 0)
      json = 1;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage, stdout);
      return 0;
    } else {
      fprintf(stderr,
              PROG ": unknown option '%s': the options are --backend, "
                   "--users, --expenses, --threads, --lock-timeout, --seed, "
                   "--json (see " PROG " --help)\n",
              argv[i]);
      return 2;
    }
  }
  ordo_retry_options_init(&s.retry);

  /* A URL ordo cannot parse is a usage error; a backend that does not
   * answer is not, and on the remote ones it shows only at the first
   * ordo_txn_begin, since ordo_open connects to nothing. */
  char buf[512];
  int rc = ordo_open(&s.o, url, NULL);
  if (rc == ORDO_EURL || rc == ORDO_EINVAL) {
    fprintf(stderr, PROG ": bad backend URL '%s': accepted forms are %s\n",
            shown(url, buf, sizeof buf), URL_FORMS);
    return 2;
  }
  int opened = rc == 0;
  worker_t *w = calloc((size_t)threads, sizeof *w);
  s.balance = calloc((size_t)s.users, sizeof *s.balance);
  int64_t *replay = calloc((size_t)s.users, sizeof *replay);
  s.applied = calloc((size_t)s.expenses, 1);
  int oom = !w || !s.balance || !replay || !s.applied;
  long begun = 0;
  for (; rc == 0 && !oom && begun < threads; begun++) {
    w[begun].s = &s;
    rc = ordo_txn_begin(s.o, &w[begun].txn, NULL);
  }
  if (oom || rc < 0) {
    if (oom)
      fputs(PROG ": out of memory; try fewer --users or --expenses\n", stderr);
    else
      fprintf(stderr,
              PROG ": cannot use backend '%s': %s (%s); check that its server "
                   "is running and that the URL's host, port, database and "
                   "password are right\n",
              shown(url, buf, sizeof buf), ordo_strerror(rc),
              ordo_err_name(rc));
    for (long i = 0; i < begun; i++)
      if (w[i].txn != NULL)
        ordo_txn_end(w[i].txn);
    if (opened)
      ordo_close(s.o);
    free(w);
    free(s.balance);
    free(replay);
    free(s.applied);
    return 1;
  }

  double t0 = now_s();
  for (long i = 0; i < threads; i++)
    if (pthread_create(&w[i].thread, NULL, worker_run, &w[i]) != 0) {
      fprintf(stderr, PROG ": cannot start thread %ld; try fewer --threads\n",
              i);
      return 1;
    }
  for (long i = 0; i < threads; i++)
    pthread_join(w[i].thread, NULL);
  double secs = now_s() - t0;

  /* The check: the balances add up to 0; every expense was applied at most
   * once; and replaying the applied ones on one thread, with no locks,
   * gives every balance exactly (addition does not care about order). */
  long applied = 0, twice = 0, retries = 0, failed = 0, differ = 0;
  int err = 0;
  int64_t sum = 0, spent = 0;
  for (long i = 0; i < s.expenses; i++) {
    expense_t e;
    twice += s.applied[i] > 1;
    if (s.applied[i] != 1)
      continue;
    applied++;
    plan(&s, i, &e);
    apply(replay, &e);
    spent += e.cents;
  }
  long hi = 0, lo = 0; /* the users owed most and owing most */
  for (long u = 0; u < s.users; u++) {
    sum += s.balance[u];
    differ += s.balance[u] != replay[u];
    hi = s.balance[u] > s.balance[hi] ? u : hi;
    lo = s.balance[u] < s.balance[lo] ? u : lo;
  }
  for (long i = 0; i < threads; i++) {
    retries += w[i].retries;
    failed += w[i].failed;
    err = w[i].err != 0 ? w[i].err : err;
    ordo_txn_end(w[i].txn);
  }
  int ok = sum == 0 && differ == 0 && twice == 0 && applied == s.expenses &&
           err == 0;

  char m1[32], m2[32], m3[32];
  if (json) {
    printf("{\"example\": \"split\", \"backend\": \"%s\", \"users\": %ld, "
           "\"expenses\": %ld, \"threads\": %ld, \"seed\": %llu, "
           "\"applied\": %ld, \"applied_twice\": %ld, \"failed\": %ld, "
           "\"retries\": %ld, \"spent_cents\": %lld, \"sum_cents\": %lld, "
           "\"balances_off_replay\": %ld, \"seconds\": %.6f, \"ok\": %s}\n",
           ordo_url(s.o), s.users, s.expenses, threads,
           (unsigned long long)s.seed, applied, twice, failed, retries,
           (long long)spent, (long long)sum, differ, secs,
           ok ? "true" : "false");
  } else {
    printf(PROG ": %s, %ld users, %ld expenses over %ld threads, seed %llu\n",
           ordo_url(s.o), s.users, s.expenses, threads,
           (unsigned long long)s.seed);
    printf("expenses   %ld/%ld applied in %.3f s (%.0f/s); %ld lock retries\n",
           applied, s.expenses, secs, secs > 0 ? applied / secs : 0.0, retries);
    printf("money      %s spent; owed most: user %ld (%s); owing most: user "
           "%ld (%s)\n",
           money(m1, spent), hi, money(m2, s.balance[hi]), lo,
           money(m3, s.balance[lo]));
    if (err != 0)
      printf("errors     %ld expenses failed, the last on %s: %s\n", failed,
             ordo_err_name(err), ordo_strerror(err));
    printf("invariant: sum of balances %lld, %ld/%ld balances equal a serial "
           "replay, %ld/%ld expenses applied once: %s\n",
           (long long)sum, s.users - differ, s.users, applied, s.expenses,
           ok ? "OK" : "FAIL");
  }
  ordo_close(s.o);
  free(w);
  free(s.balance);
  free(replay);
  free(s.applied);
  return ok ? 0 : 1;
}
