/*
 * bank.c -- the bank workload of the benchmark harness; see README.md.
 *
 * Each worker repeatedly moves one unit between two distinct random accounts:
 * it locks both accounts exclusively, moves the unit, and releases both, with
 * nothing else inside the lock. ordo takes the two accounts' keys (8-byte
 * big-endian account numbers from ordo_key_u64) with one ordo_lock_all on a
 * "mem://" place and drops them with ordo_unlock_all, one ordo_txn_t per
 * worker. The peer is one pthread mutex per account, taken lower index first,
 * which is how a careful programmer avoids deadlock by hand.
 *
 * A run lasts a fixed time; its result is transfers per second summed over
 * the workers. After every run the total balance must equal what it was at
 * the start; if it does not, the locks let two transfers race, and the run
 * fails.
 *
 * Interface:
 *   bank_run_ordo()      one run through ordo
 *   bank_run_pthread()   one run through hand-ordered pthread mutexes
 */
#include "bench.h"

#include <ordo.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BANK_START_BALANCE 1000000

/*
 * One account per cache line, so that the peer's mutexes do not share lines
 * and the two sides touch memory laid out the same way.
 */
typedef struct bank_account_s {
  _Alignas(64) pthread_mutex_t mu; /* the peer's lock; unused through ordo */
  int64_t balance; /* guarded by mu, or by the account's ordo key */
} bank_account_t;

typedef struct bank_s {
  const bench_row_t *row;
  size_t naccounts;
  bank_account_t *acct;
  uint8_t (*keys)[8]; /* keys[i] is ordo_key_u64(i) */
  ordo_t *o;          /* the place; NULL in the peer's runs */
  pthread_barrier_t start;
  atomic_int stop; /* set by the main thread at the end, or by a failure */
} bank_t;

/* A worker's own state, on its own cache line. */
typedef struct bank_worker_s {
  _Alignas(64) bank_t *bank;
  pthread_t tid;
  uint64_t rng;
  uint64_t transfers; /* written by the worker, read after join */
  const char *failed; /* the call that failed, or NULL */
  int rc;             /* what it returned */
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
    rc = ordo_lock_all(t, r, 2, ORDO_FOREVER);
    if (rc != 0) {
      bank_fail(w, "ordo_lock_all", rc);
      break;
    }
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
    if ((rc = pthread_mutex_lock(&b->acct[lo].mu)) != 0 ||
        (rc = pthread_mutex_lock(&b->acct[hi].mu)) != 0) {
      bank_fail(w, "pthread_mutex_lock", rc);
      break;
    }
    b->acct[from].balance--;
    b->acct[to].balance++;
    pthread_mutex_unlock(&b->acct[hi].mu);
    pthread_mutex_unlock(&b->acct[lo].mu);
    n++;
  }
  w->transfers = n;
  return NULL;
}

/*
 * bank_run -- one timed run of either side. Everything is built afresh (the
 * accounts, the mutexes, the ordo place) so runs do not inherit each other's
 * state. The clock starts when every worker has passed the start barrier.
 */
static int bank_run(const bench_row_t *row, int use_ordo, double seconds,
                    double *out) {
  long long na = bench_param_int(row, "accounts");
  long long nw = bench_param_int(row, "workers");
  if (na < 2 || nw < 1) {
    bench_error(row, "needs accounts >= 2 and workers >= 1");
    return -1;
  }

  bank_t b;
  memset(&b, 0, sizeof b);
  b.row = row;
  b.naccounts = (size_t)na;
  b.acct = aligned_alloc(64, b.naccounts * sizeof *b.acct);
  b.keys = malloc(b.naccounts * sizeof *b.keys);
  bank_worker_t *w = aligned_alloc(64, (size_t)nw * sizeof *w);
  if (b.acct == NULL || b.keys == NULL || w == NULL) {
    bench_error(row, "out of memory");
    free(b.acct);
    free(b.keys);
    free(w);
    return -1;
  }
  for (size_t i = 0; i < b.naccounts; i++) {
    pthread_mutex_init(&b.acct[i].mu, NULL);
    b.acct[i].balance = BANK_START_BALANCE;
    ordo_key_u64(b.keys[i], i);
  }
  int rc = 0;
  if (use_ordo && (rc = ordo_open(&b.o, "mem://", NULL)) != 0) {
    bench_error(row, "ordo_open: %s", ordo_strerror(rc));
    b.o = NULL;
    goto done;
  }
  atomic_init(&b.stop, 0);
  pthread_barrier_init(&b.start, NULL, (unsigned)nw + 1);

  for (long long i = 0; i < nw; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].bank = &b;
    w[i].rng = ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ULL;
    rc = pthread_create(&w[i].tid, NULL,
                        use_ordo ? bank_worker_ordo : bank_worker_pthread,
                        &w[i]);
    if (rc != 0) {
      /* The workers already started wait at the barrier for ever. */
      bench_error(row, "pthread_create: %s", strerror(rc));
      exit(1);
    }
  }
  pthread_barrier_wait(&b.start);
  double t0 = bench_now();
  bench_sleep(seconds);
  atomic_store(&b.stop, 1);
  uint64_t total = 0;
  for (long long i = 0; i < nw; i++) {
    pthread_join(w[i].tid, NULL);
    total += w[i].transfers;
  }
  double t1 = bench_now();
  pthread_barrier_destroy(&b.start);

  for (long long i = 0; i < nw; i++) {
    if (w[i].failed != NULL) {
      int e = w[i].rc;
      if (e < 0)
        bench_error(row, "worker %lld: %s: %s (%s)", i, w[i].failed,
                    ordo_err_name(e), ordo_strerror(e));
      else if (strncmp(w[i].failed, "ordo_", 5) == 0)
        bench_error(row, "worker %lld: %s returned %d", i, w[i].failed, e);
      else
        bench_error(row, "worker %lld: %s: %s", i, w[i].failed, strerror(e));
      rc = -1;
      goto done;
    }
  }
  int64_t sum = 0;
  for (size_t i = 0; i < b.naccounts; i++)
    sum += b.acct[i].balance;
  int64_t want = (int64_t)b.naccounts * BANK_START_BALANCE;
  if (sum != want) {
    bench_error(row,
                "%s run: total balance %lld, expected %lld: the locks let "
                "transfers race",
                use_ordo ? "ordo" : "peer", (long long)sum, (long long)want);
    rc = -1;
    goto done;
  }
  *out = (double)total / (t1 - t0);
  rc = 0;

done:
  if (b.o != NULL)
    ordo_close(b.o);
  for (size_t i = 0; i < b.naccounts; i++)
    pthread_mutex_destroy(&b.acct[i].mu);
  free(b.acct);
  free(b.keys);
  free(w);
  return rc == 0 ? 0 : -1;
}

int bank_run_ordo(const bench_row_t *row, void *state, double seconds,
                  double *out) {
  (void)state;
  return bank_run(row, 1, seconds, out);
}

int bank_run_pthread(const bench_row_t *row, void *state, double seconds,
                     double *out) {
  (void)state;
  return bank_run(row, 0, seconds, out);
}
