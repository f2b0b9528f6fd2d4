/*
 * bank.c -- the bank workload of the benchmark harness; see README.md.
 *
 * Each worker repeatedly moves one unit between two distinct random accounts:
 * it locks both accounts exclusively, moves the unit, and releases both, with
 * nothing else inside the lock. ordo takes the two accounts' keys (8-byte
 * big-endian account numbers from ordo_key_u64) with one ordo_lock_all on a
 * "mem://" place and drops them with ordo_unlock_all, one ordo_txn_t per
 * worker. The peers:
 *
 *   - one pthread mutex per account, taken lower index first, which is how a
 *     careful programmer avoids deadlock by hand;
 *   - one pthread mutex for the whole bank (no order to get wrong, and no
 *     parallelism either);
 *   - a lock scheme defined in another file (bank_scheme_t in bench.h; bdb.c
 *     plugs Berkeley DB's lock subsystem in), called through its hooks.
 *
 * A run lasts a fixed time; its result is transfers per second summed over
 * the workers. After every run the total balance must equal what it was at
 * the start; if it does not, the locks let two transfers race, and the run
 * fails.
 *
 * When the row lists the extra value "max_wait_us", every side reads the
 * wait clock (a tick the main thread makes every 100 us, see bank_tick)
 * just before it asks for the two accounts and again once it holds them,
 * and the run reports the longest such wait of any worker; rows without
 * the extra read no clock in the loop and sleep through the run. When the
 * row lists "waits_per_xfer", ordo's side reports the requests that queued
 * on its place (ordo_stats().waited) per transfer.
 *
 * Interface:
 *   bank_run_ordo()      one run through ordo
 *   bank_run_pthread()   one run through hand-ordered pthread mutexes
 *   bank_run_gmutex()    one run through one global pthread mutex
 *   bank_run_scheme()    one run through another file's bank_scheme_t
 */
#include "bench.h"

#include <ordo.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BANK_START_BALANCE 1000000

/* Which lock a run's workers take: the side it measures. */
typedef enum bank_kind_e {
  BANK_ORDO,    /* ordo_lock_all of both keys on a mem:// place */
  BANK_PTHREAD, /* one mutex per account, lower index first */
  BANK_GMUTEX,  /* one mutex for every account */
  BANK_SCHEME   /* a bank_scheme_t's hooks */
} bank_kind_t;

/*
 * One account per cache line, so that the peer's mutexes do not share lines
 * and the two sides touch memory laid out the same way.
 */
typedef struct bank_account_s {
  _Alignas(64) pthread_mutex_t mu; /* the pthread peer's lock */
  int64_t balance; /* guarded by mu, or by the lock of the side that runs */
} bank_account_t;

typedef struct bank_s {
  const bench_row_t *row;
  bank_kind_t kind;
  int timed; /* the row reports max_wait_us: read the ticks around acquires */
  size_t naccounts;
  bank_account_t *acct;
  uint8_t (*keys)[8];                  /* keys[i] is ordo_key_u64(i) */
  ordo_t *o;                           /* the place; NULL but in ordo's runs */
  const bank_scheme_t *scheme;         /* BANK_SCHEME: the hooks */
  void *scheme_run;                    /* BANK_SCHEME: what scheme->open made */
  _Alignas(64) pthread_mutex_t global; /* BANK_GMUTEX: the one lock */
  /* The wait clock (bank_tick): the main thread's tick count, and the
   * CLOCK_MONOTONIC time of tick g in tick_ns[g % BANK_TICK_RING]. */
  _Alignas(64) _Atomic uint64_t tick;
  _Atomic uint64_t *tick_ns;
  _Alignas(64) pthread_barrier_t start;
  atomic_int stop; /* set by the main thread at the end, or by a failure */
} bank_t;

/* A worker's own state, on its own cache line. */
typedef struct bank_worker_s {
  _Alignas(64) bank_t *bank;
  pthread_t tid;
  uint64_t rng;
  uint64_t transfers;   /* written by the worker, read after join */
  uint64_t max_wait_ns; /* the longest acquire, when the row is timed */
  const char *failed;   /* the call that failed, or NULL */
  int rc;               /* what it returned */
} bank_worker_t;

/* Picks two distinct accounts, uniformly among ordered pairs. */
static void bank_pick(const bank_t *b, uint64_t *rng, size_t *from,
                      size_t *to) {
  uint64_t r = bench_rng_next(rng);
  size_t a = (size_t)(r % b->naccounts);
  size_t c = (size_t)((r >> 32) % (b->naccounts - 1));
  *from = a;
  *to = c >= a ? c + 1 : c;
}

static void bank_fail(bank_worker_t *w, const char *call, int rc) {
  w->failed = call;
  w->rc = rc;
  atomic_store(&w->bank->stop, 1);
}

/* CLOCK_MONOTONIC in nanoseconds. */
static uint64_t bank_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The wait clock. Timing each acquire with a clock_gettime pair (or
 * rdtsc) would add two clock reads to every transfer of every side: the
 * same nanoseconds, but not the same share. They cost the hand-ordered
 * mutexes, whose transfer is the cheapest, about two thirds of their rate
 * at 10,000 accounts and ordo far less, and so more than doubled that
 * row's ratio (README.md has the figures). Instead the main thread, which
 * only sleeps while a run lasts, ticks every BANK_TICK_NS: it notes the
 * time of tick g in tick_ns[g % BANK_TICK_RING], then publishes g. A
 * worker loads the tick count before and after each acquire (two loads of
 * a line that changes 10,000 times a second) and reads the ring only when
 * the count moved by 2 or more. What the ticks cost is CPU time per second
 * of run (the main thread's wake-ups), the same share of every side's, and
 * nothing per transfer.
 *
 * An acquire that began at tick g0 and ended at tick g1 began before tick
 * g0 + 1 was made and ended after tick g1 was, so it lasted at least
 * tick_ns[g1] - tick_ns[g0 + 1] (unless the main thread lost the CPU
 * between reading the clock for tick g0 + 1 and publishing it, a window of
 * a few instructions). So max_wait_us is a lower bound, short of the true
 * wait by up to two tick periods (200 us) while the main thread ticks on
 * time. A main thread that wakes late makes the bound looser (and misses
 * a wait that lies within its delay), but never turns its own delay into
 * a wait, as a single time stored by the main thread would: a worker that
 * read it during a stall would take the stale time for its start.
 */
#define BANK_TICK_NS 100000L
#define BANK_TICK_RING 65536 /* 6.5 s of ticks; a power of two */

/* Before an acquire: the tick it starts in, when the row is timed. */
static inline uint64_t bank_wait_begin(bank_t *b) {
  return b->timed ? atomic_load_explicit(&b->tick, memory_order_acquire) : 0;
}

/* Once both accounts are held: keeps the longest wait (its lower bound). */
static inline void bank_wait_end(bank_t *b, bank_worker_t *w, uint64_t g0) {
  if (!b->timed)
    return;
  uint64_t g1 = atomic_load_explicit(&b->tick, memory_order_acquire);
  if (g1 < g0 + 2)
    return; /* less than one whole tick period for sure */
  uint64_t a = g0 + 1;
  if (g1 - a >= BANK_TICK_RING)
    a = g1 - (BANK_TICK_RING - 1); /* overwritten: a later, smaller bound */
  uint64_t d = atomic_load_explicit(&b->tick_ns[g1 % BANK_TICK_RING],
                                    memory_order_relaxed) -
               atomic_load_explicit(&b->tick_ns[a % BANK_TICK_RING],
                                    memory_order_relaxed);
  if (d > w->max_wait_ns)
    w->max_wait_ns = d;
}

/* Makes tick g at time now: the time first, then the count. */
static void bank_tick_make(bank_t *b, uint64_t g, uint64_t now) {
  atomic_store_explicit(&b->tick_ns[g % BANK_TICK_RING], now,
                        memory_order_relaxed);
  atomic_store_explicit(&b->tick, g, memory_order_release);
}

/*
 * bank_tick -- the main thread's sleep through a timed run: ticks every
 * BANK_TICK_NS for `seconds`, after tick 0 (made before the workers
 * start). Each sleep is relative to the last wake-up, so a late wake-up
 * delays the next tick rather than bringing a burst of them.
 */
static void bank_tick(bank_t *b, double seconds) {
  const struct timespec period = {0, BANK_TICK_NS};
  uint64_t g = atomic_load_explicit(&b->tick, memory_order_relaxed);
  uint64_t now = bank_clock_ns();
  uint64_t end = now + (uint64_t)(seconds * 1e9);
  while (now < end) {
    clock_nanosleep(CLOCK_MONOTONIC, 0, &period, NULL); /* EINTR: early */
    now = bank_clock_ns();
    bank_tick_make(b, ++g, now);
  }
}

static void *bank_worker_ordo(void *arg) {
  bank_worker_t *w = arg;
  bank_t *b = w->bank;
  ordo_txn_t *t = NULL;
  uint64_t n = 0;

  int rc = ordo_txn_begin(b->o, &t, NULL);
  if (rc != 0)
    bank_fail(w, "ordo_txn_begin", rc);
  pthread_barrier_wait(&b->start);
  while (t != NULL && !atomic_load_explicit(&b->stop, memory_order_relaxed)) {
    size_t from, to;
    bank_pick(b, &w->rng, &from, &to);
    /* Unordered on purpose: putting the keys in order is ordo's job. */
    ordo_req_t r[2] = {ORDO_REQ_X(b->keys[from], 8),
                       ORDO_REQ_X(b->keys[to], 8)};
    uint64_t t0 = bank_wait_begin(b);
    rc = ordo_lock_all(t, r, 2, ORDO_FOREVER);
    if (rc != 0) {
      bank_fail(w, "ordo_lock_all", rc);
      break;
    }
    bank_wait_end(b, w, t0);
    b->acct[from].balance--;
    b->acct[to].balance++;
    rc = ordo_unlock_all(t);
    if (rc != 2) {
      bank_fail(w, "ordo_unlock_all", rc);
      break;
    }
    n++;
  }
  w->transfers = n;
  if (t != NULL)
    ordo_txn_end(t);
  return NULL;
}

static void *bank_worker_pthread(void *arg) {
  bank_worker_t *w = arg;
  bank_t *b = w->bank;
  uint64_t n = 0;
  int rc;

  pthread_barrier_wait(&b->start);
  while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
    size_t from, to;
    bank_pick(b, &w->rng, &from, &to);
    size_t lo = from < to ? from : to;
    size_t hi = from < to ? to : from;
    uint64_t t0 = bank_wait_begin(b);
    if ((rc = pthread_mutex_lock(&b->acct[lo].mu)) != 0 ||
        (rc = pthread_mutex_lock(&b->acct[hi].mu)) != 0) {
      bank_fail(w, "pthread_mutex_lock", rc);
      break;
    }
    bank_wait_end(b, w, t0);
    b->acct[from].balance--;
    b->acct[to].balance++;
    pthread_mutex_unlock(&b->acct[hi].mu);
    pthread_mutex_unlock(&b->acct[lo].mu);
    n++;
  }
  w->transfers = n;
  return NULL;
}

static void *bank_worker_gmutex(void *arg) {
  bank_worker_t *w = arg;
  bank_t *b = w->bank;
  uint64_t n = 0;
  int rc;

  pthread_barrier_wait(&b->start);
  while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
    size_t from, to;
    bank_pick(b, &w->rng, &from, &to);
    uint64_t t0 = bank_wait_begin(b);
    if ((rc = pthread_mutex_lock(&b->global)) != 0) {
      bank_fail(w, "pthread_mutex_lock", rc);
      break;
    }
    bank_wait_end(b, w, t0);
    b->acct[from].balance--;
    b->acct[to].balance++;
    pthread_mutex_unlock(&b->global);
    n++;
  }
  w->transfers = n;
  return NULL;
}

static void *bank_worker_scheme(void *arg) {
  bank_worker_t *w = arg;
  bank_t *b = w->bank;
  const bank_scheme_t *s = b->scheme;
  void *sw = NULL;
  uint64_t n = 0;

  int rc = s->begin(b->scheme_run, &sw);
  if (rc != 0)
    bank_fail(w, "begin", rc);
  pthread_barrier_wait(&b->start);
  while (rc == 0 && !atomic_load_explicit(&b->stop, memory_order_relaxed)) {
    size_t from, to;
    bank_pick(b, &w->rng, &from, &to);
    size_t lo = from < to ? from : to;
    size_t hi = from < to ? to : from;
    uint64_t t0 = bank_wait_begin(b);
    if ((rc = s->lock(sw, lo, hi)) != 0) {
      bank_fail(w, "lock", rc);
      break;
    }
    bank_wait_end(b, w, t0);
    b->acct[from].balance--;
    b->acct[to].balance++;
    if ((rc = s->unlock(sw)) != 0) {
      bank_fail(w, "unlock", rc);
      break;
    }
    n++;
  }
  w->transfers = n;
  if (sw != NULL)
    s->end(b->scheme_run, sw);
  return NULL;
}

/* Whether the row lists the extra value `name`. */
static int bank_row_reports(const bench_row_t *row, const char *name) {
  for (int i = 0; i < BENCH_MAX_EXTRAS && row->extras[i] != NULL; i++)
    if (strcmp(row->extras[i], name) == 0)
      return 1;
  return 0;
}

/* Reports worker i's failure. */
static void bank_report(const bank_t *b, long long i, const bank_worker_t *w) {
  int e = w->rc;
  if (b->kind == BANK_SCHEME)
    bench_error(b->row, "worker %lld: %s %s: %s", i, b->scheme->name, w->failed,
                b->scheme->strerror(e));
  else if (b->kind == BANK_ORDO && e < 0)
    bench_error(b->row, "worker %lld: %s: %s (%s)", i, w->failed,
                ordo_err_name(e), ordo_strerror(e));
  else if (b->kind == BANK_ORDO)
    bench_error(b->row, "worker %lld: %s returned %d", i, w->failed, e);
  else
    bench_error(b->row, "worker %lld: %s: %s", i, w->failed, strerror(e));
}

/*
 * bank_run -- one timed run of one side. Everything is built afresh (the
 * accounts, the mutexes, the ordo place or the scheme's state) so runs do
 * not inherit each other's state. The clock starts when every worker has
 * passed the start barrier.
 */
static int bank_run(const bench_row_t *row, bank_kind_t kind,
                    const bank_scheme_t *scheme, void *state, double seconds,
                    double *out) {
  long long na = bench_param_int(row, "accounts");
  long long nw = bench_param_int(row, "workers");
  if (na < 2 || nw < 1) {
    bench_error(row, "needs accounts >= 2 and workers >= 1");
    return -1;
  }

  bank_t bank, *b = &bank;
  memset(b, 0, sizeof *b);
  b->row = row;
  b->kind = kind;
  b->timed = bank_row_reports(row, "max_wait_us");
  atomic_init(&b->tick, 0);
  b->scheme = scheme;
  b->naccounts = (size_t)na;
  b->acct = aligned_alloc(64, b->naccounts * sizeof *b->acct);
  b->keys = malloc(b->naccounts * sizeof *b->keys);
  if (b->timed)
    b->tick_ns = calloc(BANK_TICK_RING, sizeof *b->tick_ns);
  bank_worker_t *w = aligned_alloc(64, (size_t)nw * sizeof *w);
  if (b->acct == NULL || b->keys == NULL || w == NULL ||
      (b->timed && b->tick_ns == NULL)) {
    bench_error(row, "out of memory");
    free(b->acct);
    free(b->keys);
    free((void *)b->tick_ns);
    free(w);
    return -1;
  }
  for (size_t i = 0; i < b->naccounts; i++) {
    pthread_mutex_init(&b->acct[i].mu, NULL);
    b->acct[i].balance = BANK_START_BALANCE;
    ordo_key_u64(b->keys[i], i);
  }
  pthread_mutex_init(&b->global, NULL);
  int rc = 0, scheme_open = 0;
  if (kind == BANK_ORDO && (rc = ordo_open(&b->o, "mem://", NULL)) != 0) {
    bench_error(row, "ordo_open: %s", ordo_strerror(rc));
    b->o = NULL;
    goto done;
  }
  if (kind == BANK_SCHEME) {
    if ((rc = scheme->open(row, state, b->naccounts, (int)nw,
                           &b->scheme_run)) != 0) {
      bench_error(row, "%s open: %s", scheme->name, scheme->strerror(rc));
      goto done;
    }
    scheme_open = 1;
  }
  atomic_init(&b->stop, 0);
  pthread_barrier_init(&b->start, NULL, (unsigned)nw + 1);

  void *(*fn)(void *) = kind == BANK_ORDO      ? bank_worker_ordo
                        : kind == BANK_PTHREAD ? bank_worker_pthread
                        : kind == BANK_GMUTEX  ? bank_worker_gmutex
                                               : bank_worker_scheme;
  for (long long i = 0; i < nw; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].bank = b;
    w[i].rng = ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ULL;
    rc = pthread_create(&w[i].tid, NULL, fn, &w[i]);
    if (rc != 0) {
      /* The workers already started wait at the barrier for ever. */
      bench_error(row, "pthread_create: %s", strerror(rc));
      exit(1);
    }
  }
  if (b->timed)
    bank_tick_make(b, 0, bank_clock_ns()); /* the first acquires' start */
  pthread_barrier_wait(&b->start);
  double t0 = bench_now();
  if (b->timed)
    bank_tick(b, seconds);
  else
    bench_sleep(seconds);
  atomic_store(&b->stop, 1);
  uint64_t total = 0, max_wait_ns = 0;
  for (long long i = 0; i < nw; i++) {
    pthread_join(w[i].tid, NULL);
    total += w[i].transfers;
    if (w[i].max_wait_ns > max_wait_ns)
      max_wait_ns = w[i].max_wait_ns;
  }
  double t1 = bench_now();
  pthread_barrier_destroy(&b->start);

  rc = -1;
  for (long long i = 0; i < nw; i++) {
    if (w[i].failed != NULL) {
      bank_report(b, i, &w[i]);
      goto done;
    }
  }
  int64_t sum = 0;
  for (size_t i = 0; i < b->naccounts; i++)
    sum += b->acct[i].balance;
  int64_t want = (int64_t)b->naccounts * BANK_START_BALANCE;
  if (sum != want) {
    bench_error(row,
                "%s run: total balance %lld, expected %lld: the locks let "
                "transfers race",
                kind == BANK_ORDO ? "ordo" : "peer", (long long)sum,
                (long long)want);
    goto done;
  }
  *out = (double)total / (t1 - t0);
  if (b->timed)
    bench_extra(row, "max_wait_us", (double)max_wait_ns / 1e3);
  if (kind == BANK_ORDO && bank_row_reports(row, "waits_per_xfer")) {
    ordo_stats_t st;
    if (ordo_stats(b->o, &st) == 0 && st.acquired > 0)
      bench_extra(row, "waits_per_xfer",
                  (double)st.waited / (double)st.acquired);
  }
  rc = 0;

done:
  if (scheme_open && scheme->close(row, b->scheme_run) != 0)
    rc = -1;
  if (b->o != NULL)
    ordo_close(b->o);
  for (size_t i = 0; i < b->naccounts; i++)
    pthread_mutex_destroy(&b->acct[i].mu);
  pthread_mutex_destroy(&b->global);
  free(b->acct);
  free(b->keys);
  free((void *)b->tick_ns);
  free(w);
  return rc == 0 ? 0 : -1;
}

int bank_run_ordo(const bench_row_t *row, void *state, double seconds,
                  double *out) {
  (void)state;
  return bank_run(row, BANK_ORDO, NULL, NULL, seconds, out);
}

int bank_run_pthread(const bench_row_t *row, void *state, double seconds,
                     double *out) {
  (void)state;
  return bank_run(row, BANK_PTHREAD, NULL, NULL, seconds, out);
}

int bank_run_gmutex(const bench_row_t *row, void *state, double seconds,
                    double *out) {
  (void)state;
  return bank_run(row, BANK_GMUTEX, NULL, NULL, seconds, out);
}

int bank_run_scheme(const bench_row_t *row, const bank_scheme_t *scheme,
                    void *state, double seconds, double *out) {
  return bank_run(row, BANK_SCHEME, scheme, state, seconds, out);
}
