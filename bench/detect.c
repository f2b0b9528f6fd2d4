/*
 * detect.c -- the cost of immediate deadlock detection on throughput; see
 * README.md (rows detect_hotkey_t64 and detect_manykeys_t64).
 *
 * The same deadlock-free workload runs on a fresh "mem://" place per run,
 * with opts.detect = ORDO_DETECT_IMMEDIATE (the ordo side) or
 * ORDO_DETECT_OFF (the "peer"). Both set sweep_ms = 0 and log_wait_ms = 0,
 * so the search a txn makes when it blocks is the only difference. The
 * result is operations per second summed over the threads.
 *
 * The engine searches only when the txn that blocks holds a key on which
 * someone is already queued (src/detect/detect.c, awaited()): a cycle
 * through it needs an edge into it. So each thread holds a private key for
 * the whole run, and one parked request waits on each private key: a txn of
 * its own per thread, queued with ordo_lock_all_async, never granted, and
 * cancelled after the run. With that, every time a thread blocks the engine
 * searches the wait-for graph from it (and finds no cycle). Without the
 * parked requests (parameter parked = 0) nothing could wait for a private
 * key, and the only cost left to measure would be that check.
 *
 *   hotkey    each loop: ordo_lock of the one hot key X, a counter bumped
 *             under it, ordo_unlock of X.
 *   manykeys  each loop: two distinct random keys of `keys`, taken one at a
 *             time with ordo_lock in ascending order, both keys' counters
 *             bumped, both released with ordo_unlock.
 *
 * Keys are always taken in one order (the private key, then the shared keys
 * in ascending order) and the parked requests wait only on private keys, so
 * no cycle can form and the run without detection cannot hang. Threads run
 * DT_RAMP_S before the count starts, so that the run measures the queues
 * that 64 threads on few cores settle into rather than their simultaneous
 * start. After each run the counters must add up to the operations
 * counted, every parked request must have been cancelled (its callback
 * reports ORDO_ECANCELED), and the place must report 0 deadlocks.
 *
 * Interface:
 *   detect_hotkey_run_on(), detect_hotkey_run_off()
 *   detect_manykeys_run_on(), detect_manykeys_run_off()
 */
#include "bench.h"

#include <ordo.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DT_KEY_LEN 9       /* a tag byte, then ordo_key_u64 */
#define DT_TAG_PRIVATE 'a' /* private keys sort before the shared ones */
#define DT_TAG_SHARED 'k'
#define DT_RAMP_S 0.2

typedef uint8_t dt_key_t[DT_KEY_LEN];

/* A counter per key, each on its own cache line; guarded by its key. */
typedef struct dt_slot_s {
  _Alignas(64) uint64_t count;
} dt_slot_t;

enum { DT_HOTKEY, DT_MANYKEYS };

typedef struct dt_s {
  const bench_row_t *row;
  int kind;
  size_t nkeys;      /* shared keys: 1 (the hot key) or many */
  dt_key_t *key;     /* the shared keys, ascending */
  dt_key_t *priv;    /* priv[i]: thread i's private key */
  dt_slot_t *slot;   /* slot[i] counts ops under key[i] */
  dt_slot_t *pslot;  /* pslot[i] counts thread i's ops */
  ordo_txn_t **park; /* park[i] waits on priv[i] */
  size_t nparked;
  atomic_size_t park_fired, park_canceled;
  ordo_t *o;
  pthread_barrier_t start;
  atomic_int stop;
} dt_t;

typedef struct dt_worker_s {
  _Alignas(64) dt_t *dt;
  pthread_t tid;
  ordo_txn_t *t; /* begun, with its private key, by the main thread */
  size_t idx;
  uint64_t rng;
  _Atomic uint64_t ops; /* written by the worker only, read by the main */
  const char *failed;
  int rc;
} dt_worker_t;

static void dt_key(dt_key_t k, uint8_t tag, uint64_t v) {
  k[0] = tag;
  ordo_key_u64(k + 1, v);
}

static void dt_fail(dt_worker_t *w, const char *call, int rc) {
  w->failed = call;
  w->rc = rc;
  atomic_store(&w->dt->stop, 1);
}

static int dt_lock(dt_worker_t *w, const uint8_t *key) {
  int rc = ordo_lock(w->t, key, DT_KEY_LEN, ORDO_MODE_X, ORDO_FOREVER);
  if (rc != 0)
    dt_fail(w, "ordo_lock", rc);
  return rc;
}

static int dt_unlock(dt_worker_t *w, const uint8_t *key) {
  int rc = ordo_unlock(w->t, key, DT_KEY_LEN);
  if (rc != 0)
    dt_fail(w, "ordo_unlock", rc);
  return rc;
}

static void *dt_worker(void *arg) {
  dt_worker_t *w = arg;
  dt_t *d = w->dt;
  uint64_t n = 0;

  pthread_barrier_wait(&d->start);
  while (!atomic_load_explicit(&d->stop, memory_order_relaxed)) {
    if (d->kind == DT_HOTKEY) {
      if (dt_lock(w, d->key[0]) != 0)
        break;
      d->slot[0].count++;
      d->pslot[w->idx].count++;
      if (dt_unlock(w, d->key[0]) != 0)
        break;
    } else {
      uint64_t r = bench_rng_next(&w->rng);
      size_t a = (size_t)(r % d->nkeys);
      size_t c = (size_t)((r >> 32) % (d->nkeys - 1));
      c = c >= a ? c + 1 : c;
      size_t k1 = a < c ? a : c, k2 = a < c ? c : a;
      if (dt_lock(w, d->key[k1]) != 0 || dt_lock(w, d->key[k2]) != 0)
        break;
      d->slot[k1].count++;
      d->slot[k2].count++;
      d->pslot[w->idx].count++;
      if (dt_unlock(w, d->key[k2]) != 0 || dt_unlock(w, d->key[k1]) != 0)
        break;
    }
    atomic_store_explicit(&w->ops, ++n, memory_order_relaxed);
  }
  return NULL;
}

/* The callback of a parked request: only its cancel ends it. */
static void dt_park_done(ordo_txn_t *t, int status, void *arg) {
  dt_t *d = arg;
  (void)t;
  if (status == ORDO_ECANCELED)
    atomic_fetch_add(&d->park_canceled, 1);
  atomic_fetch_add(&d->park_fired, 1);
}

/* Cancels the parked requests and ends every txn; 0, or -1 if a parked
 * request ended otherwise than by its cancel. */
static int dt_unpark(dt_t *d, dt_worker_t *w, size_t nw) {
  int bad = 0;
  for (size_t i = 0; i < d->nparked; i++) {
    int rc = ordo_cancel(d->park[i]);
    if (rc != 0) {
      bench_error(d->row, "ordo_cancel of parked request %zu: %s", i,
                  ordo_strerror(rc));
      bad = 1;
    }
  }
  size_t fired = atomic_load(&d->park_fired);
  size_t canceled = atomic_load(&d->park_canceled);
  if (!bad && (fired != d->nparked || canceled != d->nparked)) {
    bench_error(d->row, "%zu parked requests, %zu callbacks, %zu cancelled",
                d->nparked, fired, canceled);
    bad = 1;
  }
  for (size_t i = 0; i < nw; i++)
    if (w[i].t != NULL)
      ordo_txn_end(w[i].t);
  for (size_t i = 0; d->park != NULL && i < nw; i++)
    if (d->park[i] != NULL)
      ordo_txn_end(d->park[i]);
  return bad ? -1 : 0;
}

/* One timed run; detect is ORDO_DETECT_IMMEDIATE or ORDO_DETECT_OFF. */
static int dt_run(const bench_row_t *row, int kind, ordo_detect_t detect,
                  double seconds, double *out) {
  long long nt = bench_param_int(row, "threads");
  long long nk = bench_param_int(row, "keys");
  long long parked = bench_param_int(row, "parked");
  if (nt < 1 || nk < (kind == DT_HOTKEY ? 1 : 2) ||
      (parked != 0 && parked != 1)) {
    bench_error(row, "needs threads >= 1, keys >= %d and parked 0 or 1",
                kind == DT_HOTKEY ? 1 : 2);
    return -1;
  }
  size_t nw = (size_t)nt;

  dt_t d;
  memset(&d, 0, sizeof d);
  d.row = row;
  d.kind = kind;
  d.nkeys = (size_t)nk;
  atomic_init(&d.park_fired, 0);
  atomic_init(&d.park_canceled, 0);
  atomic_init(&d.stop, 0);
  d.key = malloc(d.nkeys * sizeof *d.key);
  d.priv = malloc(nw * sizeof *d.priv);
  d.slot = aligned_alloc(64, d.nkeys * sizeof *d.slot);
  d.pslot = aligned_alloc(64, nw * sizeof *d.pslot);
  d.park = calloc(nw, sizeof *d.park);
  dt_worker_t *w = aligned_alloc(64, nw * sizeof *w);
  int rc = -1, orc;
  if (d.key == NULL || d.priv == NULL || d.slot == NULL || d.pslot == NULL ||
      d.park == NULL || w == NULL) {
    bench_error(row, "out of memory");
    free(w);
    w = NULL;
    nw = 0;
    goto done;
  }
  for (size_t i = 0; i < d.nkeys; i++) {
    dt_key(d.key[i], DT_TAG_SHARED, i);
    d.slot[i].count = 0;
  }
  for (size_t i = 0; i < nw; i++) {
    dt_key(d.priv[i], DT_TAG_PRIVATE, i);
    d.pslot[i].count = 0;
    memset(&w[i], 0, sizeof w[i]);
    w[i].dt = &d;
    w[i].idx = i;
    w[i].rng = ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ULL;
    atomic_init(&w[i].ops, 0);
  }

  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.detect = detect;
  opts.sweep_ms = 0;
  opts.log_wait_ms = 0;
  if ((orc = ordo_open(&d.o, "mem://", &opts)) != 0) {
    bench_error(row, "ordo_open: %s", ordo_strerror(orc));
    d.o = NULL;
    goto done;
  }
  /* Each thread's txn takes its private key, then a parked request queues
   * on it. The workers get their txns through pthread_create. */
  for (size_t i = 0; i < nw; i++) {
    if ((orc = ordo_txn_begin(d.o, &w[i].t, NULL)) != 0 ||
        (orc = ordo_lock(w[i].t, d.priv[i], DT_KEY_LEN, ORDO_MODE_X, 0)) != 0) {
      bench_error(row, "taking private key %zu: %s", i, ordo_strerror(orc));
      goto unpark;
    }
  }
  for (size_t i = 0; parked && i < nw; i++) {
    if ((orc = ordo_txn_begin(d.o, &d.park[i], NULL)) != 0) {
      d.park[i] = NULL;
      bench_error(row, "ordo_txn_begin: %s", ordo_strerror(orc));
      goto unpark;
    }
    ordo_req_t req = ORDO_REQ_X(d.priv[i], DT_KEY_LEN);
    orc =
        ordo_lock_all_async(d.park[i], &req, 1, ORDO_FOREVER, dt_park_done, &d);
    if (orc != ORDO_PENDING) {
      bench_error(row,
                  "parked request %zu: ordo_lock_all_async returned %d, "
                  "expected ORDO_PENDING",
                  i, orc);
      goto unpark;
    }
    d.nparked++;
  }

  pthread_barrier_init(&d.start, NULL, (unsigned)nw + 1);
  for (size_t i = 0; i < nw; i++) {
    int prc = pthread_create(&w[i].tid, NULL, dt_worker, &w[i]);
    if (prc != 0) {
      /* The workers already started wait at the barrier for ever. */
      bench_error(row, "pthread_create: %s", strerror(prc));
      exit(1);
    }
  }
  ordo_stats_t s0, s1;
  uint64_t c0 = 0, c1 = 0, total = 0;
  pthread_barrier_wait(&d.start);
  bench_sleep(DT_RAMP_S);
  double t0 = bench_now();
  ordo_stats(d.o, &s0);
  for (size_t i = 0; i < nw; i++)
    c0 += atomic_load_explicit(&w[i].ops, memory_order_relaxed);
  bench_sleep(seconds);
  for (size_t i = 0; i < nw; i++)
    c1 += atomic_load_explicit(&w[i].ops, memory_order_relaxed);
  ordo_stats(d.o, &s1);
  double t1 = bench_now();
  atomic_store(&d.stop, 1);
  for (size_t i = 0; i < nw; i++) {
    pthread_join(w[i].tid, NULL);
    total += atomic_load(&w[i].ops);
  }
  pthread_barrier_destroy(&d.start);

  for (size_t i = 0; i < nw; i++)
    if (w[i].failed != NULL) {
      int e = w[i].rc;
      bench_error(row, "thread %zu: %s: %s (%s)", i, w[i].failed,
                  ordo_err_name(e), ordo_strerror(e));
      goto unpark;
    }
  uint64_t sum = 0, psum = 0;
  for (size_t i = 0; i < d.nkeys; i++)
    sum += d.slot[i].count;
  for (size_t i = 0; i < nw; i++)
    psum += d.pslot[i].count;
  uint64_t per_op = kind == DT_HOTKEY ? 1 : 2;
  if (sum != total * per_op || psum != total) {
    bench_error(row,
                "detection %s: counters %llu and %llu for %llu operations: "
                "the locks let two threads race",
                detect == ORDO_DETECT_OFF ? "off" : "on",
                (unsigned long long)sum, (unsigned long long)psum,
                (unsigned long long)total);
    goto unpark;
  }
  if (s1.deadlocks != 0 || s1.waiting < d.nparked) {
    bench_error(row,
                "%llu deadlocks and %llu waiting requests; expected 0 "
                "and at least the %zu parked",
                (unsigned long long)s1.deadlocks,
                (unsigned long long)s1.waiting, d.nparked);
    goto unpark;
  }
  *out = (double)(c1 - c0) / (t1 - t0);
  /* Requests that had to queue (each one a search with detection on), per
   * operation counted. */
  if (c1 > c0)
    bench_extra(row, "waits_per_op",
                (double)(s1.waited - s0.waited) / (double)(c1 - c0));
  rc = 0;

unpark:
  if (dt_unpark(&d, w, nw) != 0)
    rc = -1;
done:
  if (d.o != NULL)
    ordo_close(d.o);
  free(d.key);
  free(d.priv);
  free(d.slot);
  free(d.pslot);
  free(d.park);
  free(w);
  return rc;
}

int detect_hotkey_run_on(const bench_row_t *row, void *state, double seconds,
                         double *out) {
  (void)state;
  return dt_run(row, DT_HOTKEY, ORDO_DETECT_IMMEDIATE, seconds, out);
}

int detect_hotkey_run_off(const bench_row_t *row, void *state, double seconds,
                          double *out) {
  (void)state;
  return dt_run(row, DT_HOTKEY, ORDO_DETECT_OFF, seconds, out);
}

int detect_manykeys_run_on(const bench_row_t *row, void *state, double seconds,
                           double *out) {
  (void)state;
  return dt_run(row, DT_MANYKEYS, ORDO_DETECT_IMMEDIATE, seconds, out);
}

int detect_manykeys_run_off(const bench_row_t *row, void *state, double seconds,
                            double *out) {
  (void)state;
  return dt_run(row, DT_MANYKEYS, ORDO_DETECT_OFF, seconds, out);
}
