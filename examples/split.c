/*
 * split.c -- ordo example: splitting expenses among friends.
 *
 * An expense is paid by one of 50 users for 2-5 others. 8 threads apply
 * thousands at once, each under ONE ordo_lock_all (inside ordo_retry) of
 * the balances it touches, keyed by ordo_key_u64: taken all or nothing, so
 * two overlapping expenses never each hold half of the other's set. The
 * check: the balances add up to 0, and each equals a serial replay.
 * README.md has the flags, the output and the exit status.
 */
#define EX_PROG "split"
#include "common.h" /* flags, threads, error lines: no locking in it */
#include "ordo.h"

#define MAX_SHARERS 5 /* an expense is split among 2..5 others */

/* One expense: a pure function of the seed and its index (plan()). */
typedef struct expense_s {
  uint64_t payer, sharer[MAX_SHARERS];
  int n;         /* sharers */
  int64_t cents; /* the amount paid */
} expense_t;

typedef struct split_s {
  ordo_t *o;
  const char *url;
  uint64_t seed;
  long users, expenses, threads, lock_ms;
  long json;
  ordo_retry_options_t retry;
  int64_t *balance;       /* balance[u]: guarded by user u's ordo lock alone */
  unsigned char *applied; /* per expense, by the thread that claimed it */
  _Atomic long next;      /* the next expense to claim */
  struct worker_s *w;
  int64_t *replay, sum, spent; /* check() */
  long done, twice, differ, errors;
  double secs;
} split_t;

/* One thread; its fields are its own until it is joined. */
typedef struct worker_s {
  split_t *s;
  ordo_txn_t *txn;
  long idx, retries, failed; /* the expense being applied; counters */
  expense_t e;
  int err, unlock_err; /* the last error that made an expense fail */
  int begin_err;       /* ordo_txn_begin's, when it failed */
} worker_t;

/* Below the line: the plan of expenses, flags (exit 2 if bad), report. */
static void plan(const split_t *s, long idx, expense_t *e);
static void setup(int argc, char **argv, split_t *s);
static void report(const split_t *s, int ok);
static void teardown(split_t *s);

/* apply -- the split; the caller holds every balance it touches. Shares of
 * cents / n, one cent more for the first cents % n: no cent made or lost. */
static void apply(int64_t *balance, const expense_t *e) {
  int64_t share = e->cents / e->n, rest = e->cents % e->n;
  balance[e->payer] += e->cents;
  for (int k = 0; k < e->n; k++)
    balance[e->sharer[k]] -= share + (k < rest);
}

/* pay -- one attempt, run by ordo_retry: lock payer and sharers with one
 * ordo_lock_all (in any order: it sorts them), apply, unlock. After a lock
 * error nothing is held or changed, so ordo_retry may rerun it; once
 * applied it is done, whatever the unlock says. */
static int pay(ordo_txn_t *t, void *arg) {
  worker_t *w = arg;
  uint8_t key[1 + MAX_SHARERS][8];
  ordo_req_t req[1 + MAX_SHARERS];
  for (int k = 0; k <= w->e.n; k++) {
    ordo_key_u64(key[k], k == 0 ? w->e.payer : w->e.sharer[k - 1]);
    req[k] = (ordo_req_t)ORDO_REQ_X(key[k], 8);
  }
  int rc = ordo_lock_all(t, req, (size_t)w->e.n + 1, w->s->lock_ms);
  if (rc < 0)
    return rc;
  apply(w->s->balance, &w->e);
  w->s->applied[w->idx]++;
  w->unlock_err = ordo_unlock_all(t); /* < 0: keys may still be held */
  return 0;
}

static void *worker_run(void *arg) {
  worker_t *w = arg;
  split_t *s = w->s;
  /* A txn per thread, begun in it (a remote backend connects here). */
  if ((w->begin_err = ordo_txn_begin(s->o, &w->txn, NULL)) < 0)
    return NULL;
  /* Each index goes to one thread. Relaxed, so that the claims order no
   * balance update (which would hide a missing lock from TSan): ordo must. */
  while ((w->idx = atomic_fetch_add_explicit(
              &s->next, 1, memory_order_relaxed)) < s->expenses) {
    plan(s, w->idx, &w->e);
    unsigned attempts = 0;
    int rc = ordo_retry(w->txn, &s->retry, pay, w, &attempts);
    w->retries += attempts > 0 ? attempts - 1 : 0;
    w->failed += rc < 0;
    w->err = rc < 0 ? rc : w->unlock_err < 0 ? w->unlock_err : w->err;
    if (w->unlock_err < 0 || (rc < 0 && !ordo_is_retryable(rc)))
      break; /* keys may be left locked, or the backend is unusable */
  }
  ordo_txn_end(w->txn);
  return NULL;
}

/* check -- the invariant: the balances add up to 0, every expense was
 * applied once, and a lock-free serial replay gives every balance. */
static int check(split_t *s) {
  for (long i = 0; i < s->expenses; i++) {
    expense_t e;
    s->twice += s->applied[i] > 1;
    if (s->applied[i] == 1) {
      plan(s, i, &e);
      apply(s->replay, &e);
      s->done++, s->spent += e.cents;
    }
  }
  for (long u = 0; u < s->users; u++) {
    s->sum += s->balance[u];
    s->differ += s->balance[u] != s->replay[u];
  }
  for (long i = 0; i < s->threads; i++)
    s->errors += s->w[i].err != 0;
  return s->sum == 0 && s->differ == 0 && s->twice == 0 &&
         s->done == s->expenses && s->errors == 0;
}

int main(int argc, char **argv) {
  split_t s;
  setup(argc, argv, &s);
  int rc = ex_open(&s.o, s.url), ok = 0;
  if (rc == 0)
    s.secs = ex_threads(s.threads, s.w, sizeof *s.w, worker_run, NULL, NULL,
                        "--threads");
  for (long i = 0; rc == 0 && i < s.threads; i++)
    rc = s.w[i].begin_err; /* the backend could not be used */
  if (rc == 0)
    report(&s, ok = check(&s));
  else
    ex_unusable(s.url, rc);
  ordo_close(s.o); /* NULL when ordo_open failed: nothing */
  teardown(&s);
  return ok ? 0 : 1;
}

/* ---- plumbing below: the expenses, flags, report ----------------------- */

#define MAX_CENTS 100000L /* an expense is 0.01 to 1000.00 */

/* plan -- expense idx: a payer, 2-5 distinct others, an amount. The same
 * seed gives the same expenses, whichever thread applies them when. */
static void plan(const split_t *s, long idx, expense_t *e) {
  uint64_t r = ex_mix64(s->seed ^ ex_mix64((uint64_t)idx)), n = s->users;
  e->payer = r % n;
  e->n = 2 + (int)((r >> 40) % (MAX_SHARERS - 1));
  for (int k = 0; k < e->n; k++) {
    int fresh = 0;
    while (!fresh) { /* draw until neither the payer nor drawn already */
      e->sharer[k] = (r = ex_mix64(r)) % n;
      fresh = e->sharer[k] != e->payer;
      for (int j = 0; j < k; j++)
        fresh = fresh && e->sharer[j] != e->sharer[k];
    }
  }
  e->cents = 1 + (int64_t)(ex_mix64(r) % MAX_CENTS);
}

static const char usage[] =
    "usage: " EX_PROG
    " [--backend URL] [--users N] [--expenses N] [--threads N]\n"
    "             [--lock-timeout MS] [--seed N] [--json]\n"
    "Threads apply expenses, each paid by one user and split among 2-5\n"
    "others, locking all of their balances with one ordo_lock_all; then\n"
    "the run checks that the balances add up to 0 and equal a serial\n"
    "replay of the same expenses.\n" //
    EX_HELP_BACKEND                  //
    "  --users N          users, 6..1000000 (default 50)\n"
    "  --expenses N       expenses, 1..100000000 (default 5000)\n"
    "  --threads N        threads applying them, 1..1000 (default 8)\n"
    "  --lock-timeout MS  bound on each ordo_lock_all (default 2000)\n"
    "  --seed N           the expenses: who pays, who shares, how much "
    "(default 1)\n" //
    EX_HELP_END;

/* The flags ex_flags takes, each with its range, in the order of to[]. */
static const char flags[] =
    "--users=6..1000000 --expenses=1..100000000 "
    "--threads=1..1000 --lock-timeout=0..3600000 --seed=0.. "
    "--json";

static void setup(int argc, char **argv, split_t *s) {
  long seed = 1;
  *s = (split_t){.users = 50, .expenses = 5000, .threads = 8, .lock_ms = 2000};
  long *const to[] = {&s->users,   &s->expenses, &s->threads,
                      &s->lock_ms, &seed,        &s->json};
  s->url = ex_flags(argc, argv, usage, flags, to);
  s->seed = (uint64_t)seed;
  ordo_retry_options_init(&s->retry);
  s->w = ex_calloc(s->threads, sizeof *s->w, "--threads");
  for (long i = 0; i < s->threads; i++)
    s->w[i].s = s;
  s->applied = ex_calloc(s->expenses, 1, "--expenses");
  s->balance = ex_calloc(s->users, sizeof *s->balance, "--users");
  s->replay = ex_calloc(s->users, sizeof *s->replay, "--users");
}

/* money -- cents as "-12.34", in a buffer of the caller's. */
static const char *money(char buf[32], int64_t cents) {
  int64_t a = cents < 0 ? -cents : cents;
  snprintf(buf, 32, "%s%lld.%02lld", cents < 0 ? "-" : "", (long long)(a / 100),
           (long long)(a % 100));
  return buf;
}

static void report(const split_t *s, int ok) {
  long retries = 0, failed = 0, hi = 0, lo = 0; /* owed most, owing most */
  int err = 0;
  for (long i = 0; i < s->threads; i++) {
    retries += s->w[i].retries;
    failed += s->w[i].failed;
    err = s->w[i].err != 0 ? s->w[i].err : err;
  }
  for (long u = 0; u < s->users; u++) {
    hi = s->balance[u] > s->balance[hi] ? u : hi;
    lo = s->balance[u] < s->balance[lo] ? u : lo;
  }
  char m1[32], m2[32], m3[32];
  if (s->json) {
    printf("{\"example\": \"split\", \"backend\": \"%s\", \"users\": %ld, "
           "\"expenses\": %ld, \"threads\": %ld, \"seed\": %llu, "
           "\"applied\": %ld, \"applied_twice\": %ld, \"failed\": %ld, "
           "\"retries\": %ld, \"spent_cents\": %lld, \"sum_cents\": %lld, "
           "\"balances_off_replay\": %ld, \"seconds\": %.6f, \"ok\": %s}\n",
           ordo_url(s->o), s->users, s->expenses, s->threads,
           (unsigned long long)s->seed, s->done, s->twice, failed, retries,
           (long long)s->spent, (long long)s->sum, s->differ, s->secs,
           ok ? "true" : "false");
    return;
  }
  printf(EX_PROG ": %s, %ld users, %ld expenses over %ld threads, seed %llu\n",
         ordo_url(s->o), s->users, s->expenses, s->threads,
         (unsigned long long)s->seed);
  printf("expenses   %ld/%ld applied in %.3f s (%.0f/s); %ld lock retries\n",
         s->done, s->expenses, s->secs, s->secs > 0 ? s->done / s->secs : 0.0,
         retries);
  printf("money      %s spent; owed most: user %ld (%s); owing most: user "
         "%ld (%s)\n",
         money(m1, s->spent), hi, money(m2, s->balance[hi]), lo,
         money(m3, s->balance[lo]));
  if (err != 0)
    printf("errors     %ld expenses failed, the last on %s: %s\n", failed,
           ordo_err_name(err), ordo_strerror(err));
  printf("invariant: sum of balances %lld, %ld/%ld balances equal a serial "
         "replay, %ld/%ld expenses applied once: %s\n",
         (long long)s->sum, s->users - s->differ, s->users, s->done,
         s->expenses, ok ? "OK" : "FAIL");
}

static void teardown(split_t *s) {
  free(s->w);
  free(s->balance);
  free(s->replay);
  free(s->applied);
}
