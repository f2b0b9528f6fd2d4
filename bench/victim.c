/*
 * victim.c -- how fast the victim of a deadlock gets its answer, against a
 * plain hand-off, with many other requests waiting; see README.md (rows
 * detect_victim_w*).
 *
 * The row's setup opens one "mem://" place for all its runs and fills it
 * with `waiters` other waiting requests: one holder txn takes `waiters` keys
 * with one ordo_lock_all, and `waiters` txns each ask one of those keys with
 * ordo_lock_all_async (no thread each: they sit in the engine's queues).
 * The teardown cancels them all (each callback must report ORDO_ECANCELED)
 * and ends every txn. Both sides run on that place, one sample at a time,
 * the main thread and one helper thread taking part:
 *
 *   deadlock (ordo side)  txns t1 then t2 are begun (t2 is the youngest);
 *                         t1 takes key a, t2 takes key b; the helper blocks
 *                         in ordo_lock(t1, b); once ordo_stats().waiting
 *                         shows it queued, and a settle time has let its
 *                         spin end, the main thread calls ordo_lock(t2, a).
 *                         That closes the cycle; the sample runs from just
 *                         before that call to its return, which must be
 *                         ORDO_EDEADLK (t2 is the victim); the helper's
 *                         ordo_lock must then return 0.
 *   hand-off (the peer)   tA takes key a; the helper blocks in
 *                         ordo_lock(tB, a); after the same wait and settle
 *                         time, the main thread calls ordo_unlock_all(tA).
 *                         The sample runs from just before that call to the
 *                         helper's return from ordo_lock (both read
 *                         CLOCK_MONOTONIC).
 *
 * A run takes `seconds` * 2000 samples (at least 50): 1000 in a full run,
 * 200 in a quick one, about `seconds` long, as one sample takes about half
 * a millisecond (mostly the settle time). Its result is the samples' 99th
 * percentile in
 * microseconds (nearest rank); the 50th percentile, the count and, for the
 * deadlock side, the engine's own 99th percentile from
 * ordo_stats().detect_hist (log2 buckets: a power of two) are extras.
 *
 * The place uses the default options (immediate detection, a background
 * sweep every 1000 ms) except log_wait_ms = 0 and alarm_per_min = 0, so that
 * thousands of long waits and hundreds of deadlocks a second do not write
 * to stderr.
 *
 * Interface:
 *   victim_setup(), victim_teardown()   the place, its waiters, the helper
 *   victim_run_deadlock()               one run of deadlock samples
 *   victim_run_handoff()                one run of hand-off samples
 */
#include "bench.h"

#include <ordo.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VICTIM_KEY_LEN 9 /* a tag byte, then ordo_key_u64 */
#define VICTIM_SAMPLES_PER_S 2000
#define VICTIM_MIN_SAMPLES 50
#define VICTIM_BLOCK_LIMIT_S 5.0 /* the helper must block within this */

typedef uint8_t victim_key_t[VICTIM_KEY_LEN];

typedef struct victim_s {
  const bench_row_t *row;
  ordo_t *o;
  double settle_s; /* from queued to asleep: past the waiter's spin */
  victim_key_t ka, kb;

  /* The other waiters. */
  ordo_txn_t *holder;
  ordo_txn_t **waiter;
  victim_key_t *wkey;
  size_t nwaiters; /* asked for */
  size_t nqueued;  /* queued so far (and to cancel) */
  atomic_size_t fired, canceled;

  /* The helper thread and its one command: ordo_lock(cmd_txn, cmd_key). */
  pthread_t helper;
  int helper_started;
  sem_t go, done;
  int cmd_quit;
  ordo_txn_t *cmd_txn;
  const uint8_t *cmd_key;
  int cmd_rc, cmd_unlock_rc;
  double cmd_ret; /* when its ordo_lock returned */

  double *sample;
  size_t cap;
} victim_t;

static void victim_key(victim_key_t k, uint8_t tag, uint64_t v) {
  k[0] = tag;
  ordo_key_u64(k + 1, v);
}

static void victim_sem_wait(sem_t *s) {
  while (sem_wait(s) != 0 && errno == EINTR)
    ;
}

static void *victim_helper(void *arg) {
  victim_t *v = arg;
  for (;;) {
    victim_sem_wait(&v->go);
    if (v->cmd_quit)
      break;
    int rc = ordo_lock(v->cmd_txn, v->cmd_key, VICTIM_KEY_LEN, ORDO_MODE_X,
                       ORDO_FOREVER);
    v->cmd_ret = bench_now();
    v->cmd_rc = rc;
    v->cmd_unlock_rc = rc == 0 ? ordo_unlock_all(v->cmd_txn) : 0;
    sem_post(&v->done);
  }
  return NULL;
}

/* The callback of the other waiters: only the teardown's cancel ends them. */
static void victim_waiter_done(ordo_txn_t *t, int status, void *arg) {
  victim_t *v = arg;
  (void)t;
  if (status == ORDO_ECANCELED)
    atomic_fetch_add(&v->canceled, 1);
  atomic_fetch_add(&v->fired, 1);
}

/* Cancels and ends everything setup made (also after a partial setup). */
static void victim_free(victim_t *v) {
  if (v->helper_started) {
    v->cmd_quit = 1;
    sem_post(&v->go);
    pthread_join(v->helper, NULL);
  }
  sem_destroy(&v->go);
  sem_destroy(&v->done);
  for (size_t i = 0; i < v->nqueued; i++) {
    int rc = ordo_cancel(v->waiter[i]);
    if (rc != 0)
      bench_error(v->row, "teardown: ordo_cancel of waiter %zu: %s", i,
                  ordo_strerror(rc));
  }
  size_t fired = atomic_load(&v->fired), canceled = atomic_load(&v->canceled);
  if (fired != v->nqueued || canceled != v->nqueued)
    bench_error(v->row,
                "teardown: %zu callbacks (%zu ECANCELED) for %zu queued "
                "waiters",
                fired, canceled, v->nqueued);
  for (size_t i = 0; v->waiter != NULL && i < v->nwaiters; i++)
    if (v->waiter[i] != NULL)
      ordo_txn_end(v->waiter[i]);
  if (v->holder != NULL)
    ordo_txn_end(v->holder);
  if (v->o != NULL)
    ordo_close(v->o);
  free(v->waiter);
  free(v->wkey);
  free(v->sample);
  free(v);
}

int victim_setup(const bench_row_t *row, void **state) {
  long long nw = bench_param_int(row, "waiters");
  long long settle_us = bench_param_int(row, "settle_us");
  if (nw < 0 || settle_us < 0) {
    bench_error(row, "needs waiters >= 0 and settle_us >= 0");
    return -1;
  }
  victim_t *v = calloc(1, sizeof *v);
  if (v == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  v->row = row;
  v->settle_s = (double)settle_us * 1e-6;
  v->nwaiters = (size_t)nw;
  atomic_init(&v->fired, 0);
  atomic_init(&v->canceled, 0);
  sem_init(&v->go, 0, 0);
  sem_init(&v->done, 0, 0);
  victim_key(v->ka, 'a', 0);
  victim_key(v->kb, 'b', 0);
  v->waiter = calloc(v->nwaiters + 1, sizeof *v->waiter);
  v->wkey = calloc(v->nwaiters + 1, sizeof *v->wkey);
  ordo_req_t *req = calloc(v->nwaiters + 1, sizeof *req);
  if (v->waiter == NULL || v->wkey == NULL || req == NULL) {
    bench_error(row, "out of memory");
    goto fail;
  }

  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.log_wait_ms = 0;
  opts.alarm_per_min = 0;
  int rc = ordo_open(&v->o, "mem://", &opts);
  if (rc != 0) {
    v->o = NULL;
    bench_error(row, "ordo_open: %s", ordo_strerror(rc));
    goto fail;
  }
  if ((rc = ordo_txn_begin(v->o, &v->holder, NULL)) != 0) {
    v->holder = NULL;
    bench_error(row, "ordo_txn_begin: %s", ordo_strerror(rc));
    goto fail;
  }
  for (size_t i = 0; i < v->nwaiters; i++) {
    victim_key(v->wkey[i], 'w', i);
    req[i] = (ordo_req_t)ORDO_REQ_X(v->wkey[i], VICTIM_KEY_LEN);
  }
  if (v->nwaiters > 0 &&
      (rc = ordo_lock_all(v->holder, req, v->nwaiters, ORDO_FOREVER)) != 0) {
    bench_error(row, "ordo_lock_all of %zu keys: %s", v->nwaiters,
                ordo_strerror(rc));
    goto fail;
  }
  for (size_t i = 0; i < v->nwaiters; i++) {
    if ((rc = ordo_txn_begin(v->o, &v->waiter[i], NULL)) != 0) {
      v->waiter[i] = NULL;
      bench_error(row, "ordo_txn_begin: %s", ordo_strerror(rc));
      goto fail;
    }
    rc = ordo_lock_all_async(v->waiter[i], &req[i], 1, ORDO_FOREVER,
                             victim_waiter_done, v);
    if (rc != ORDO_PENDING) {
      bench_error(row,
                  "ordo_lock_all_async returned %d (%s), expected "
                  "ORDO_PENDING",
                  rc, rc < 0 ? ordo_strerror(rc) : "granted");
      if (rc == 0)
        ordo_unlock_all(v->waiter[i]);
      goto fail;
    }
    v->nqueued++;
  }
  ordo_stats_t s;
  ordo_stats(v->o, &s);
  if (s.waiting != v->nqueued) {
    bench_error(row, "%llu requests waiting after setup, expected %zu",
                (unsigned long long)s.waiting, v->nqueued);
    goto fail;
  }
  if ((rc = pthread_create(&v->helper, NULL, victim_helper, v)) != 0) {
    bench_error(row, "pthread_create: %s", strerror(rc));
    goto fail;
  }
  v->helper_started = 1;
  free(req);
  *state = v;
  return 0;

fail:
  free(req);
  victim_free(v);
  return -1;
}

void victim_teardown(const bench_row_t *row, void *state) {
  (void)row;
  victim_free(state);
}

/* Waits until the helper's request is queued, then lets its spin end.
 * Returns 0, or -1 if it never queued. */
static int victim_wait_blocked(victim_t *v) {
  ordo_stats_t s;
  double limit = bench_now() + VICTIM_BLOCK_LIMIT_S;
  for (;;) {
    ordo_stats(v->o, &s);
    if (s.waiting == v->nqueued + 1)
      break;
    if (bench_now() > limit) {
      bench_error(v->row,
                  "the helper's request did not queue within %.0f s "
                  "(%llu waiting, expected %zu)",
                  VICTIM_BLOCK_LIMIT_S, (unsigned long long)s.waiting,
                  v->nqueued + 1);
      return -1;
    }
  }
  if (v->settle_s > 0)
    bench_sleep(v->settle_s);
  return 0;
}

static void victim_go(victim_t *v, ordo_txn_t *t, const uint8_t *key) {
  v->cmd_txn = t;
  v->cmd_key = key;
  sem_post(&v->go);
}

static int victim_begin2(victim_t *v, ordo_txn_t **t1, ordo_txn_t **t2) {
  int rc = ordo_txn_begin(v->o, t1, NULL);
  if (rc != 0) {
    bench_error(v->row, "ordo_txn_begin: %s", ordo_strerror(rc));
    return -1;
  }
  if ((rc = ordo_txn_begin(v->o, t2, NULL)) != 0) {
    bench_error(v->row, "ordo_txn_begin: %s", ordo_strerror(rc));
    ordo_txn_end(*t1);
    return -1;
  }
  return 0;
}

/* One deadlock sample in seconds, or a negative value on failure. */
static double victim_one_deadlock(victim_t *v) {
  ordo_txn_t *t1, *t2;
  double dt = -1;
  if (victim_begin2(v, &t1, &t2) != 0)
    return -1;
  int rc;
  if ((rc = ordo_lock(t1, v->ka, VICTIM_KEY_LEN, ORDO_MODE_X, 0)) != 0 ||
      (rc = ordo_lock(t2, v->kb, VICTIM_KEY_LEN, ORDO_MODE_X, 0)) != 0) {
    bench_error(v->row, "ordo_lock of a free key: %s", ordo_strerror(rc));
    goto out;
  }
  victim_go(v, t1, v->kb);
  if (victim_wait_blocked(v) != 0) {
    /* The helper's call is still in flight: nothing can be ended safely. */
    exit(1);
  }
  double t0 = bench_now();
  rc = ordo_lock(t2, v->ka, VICTIM_KEY_LEN, ORDO_MODE_X, ORDO_FOREVER);
  double t1r = bench_now();
  if (rc != ORDO_EDEADLK) {
    /* Not the victim: give a back so the helper is not left waiting. */
    bench_error(v->row,
                "the youngest txn's ordo_lock returned %d (%s), "
                "expected ORDO_EDEADLK",
                rc, rc < 0 ? ordo_err_name(rc) : "granted");
    ordo_unlock_all(t2);
    victim_sem_wait(&v->done);
    goto out;
  }
  victim_sem_wait(&v->done);
  if (v->cmd_rc != 0 || v->cmd_unlock_rc != 2) {
    bench_error(v->row,
                "the older txn's ordo_lock returned %d (%s), then "
                "ordo_unlock_all %d; expected 0 and 2",
                v->cmd_rc, v->cmd_rc < 0 ? ordo_err_name(v->cmd_rc) : "-",
                v->cmd_unlock_rc);
    goto out;
  }
  dt = t1r - t0;
out:
  ordo_txn_end(t2);
  ordo_txn_end(t1);
  return dt;
}

/* One hand-off sample in seconds, or a negative value on failure. */
static double victim_one_handoff(victim_t *v) {
  ordo_txn_t *ta, *tb;
  double dt = -1;
  if (victim_begin2(v, &ta, &tb) != 0)
    return -1;
  int rc = ordo_lock(ta, v->ka, VICTIM_KEY_LEN, ORDO_MODE_X, 0);
  if (rc != 0) {
    bench_error(v->row, "ordo_lock of a free key: %s", ordo_strerror(rc));
    goto out;
  }
  victim_go(v, tb, v->ka);
  if (victim_wait_blocked(v) != 0)
    exit(1);
  double t0 = bench_now();
  rc = ordo_unlock_all(ta);
  victim_sem_wait(&v->done);
  if (rc != 1 || v->cmd_rc != 0 || v->cmd_unlock_rc != 1) {
    bench_error(v->row,
                "hand-off: ordo_unlock_all %d, the waiter's ordo_lock "
                "%d, its ordo_unlock_all %d; expected 1, 0, 1",
                rc, v->cmd_rc, v->cmd_unlock_rc);
    goto out;
  }
  dt = v->cmd_ret - t0;
out:
  ordo_txn_end(tb);
  ordo_txn_end(ta);
  return dt;
}

static int victim_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The nearest-rank quantile of sorted v. */
static double victim_quantile(const double *v, size_t n, double q) {
  size_t rank = (size_t)ceil(q * (double)n);
  if (rank < 1)
    rank = 1;
  return v[rank - 1];
}

static int victim_run(const bench_row_t *row, void *state, int deadlock,
                      double seconds, double *out) {
  victim_t *v = state;
  size_t n = (size_t)lround(seconds * VICTIM_SAMPLES_PER_S);
  if (n < VICTIM_MIN_SAMPLES)
    n = VICTIM_MIN_SAMPLES;
  if (n > v->cap) {
    double *p = realloc(v->sample, n * sizeof *p);
    if (p == NULL) {
      bench_error(row, "out of memory");
      return -1;
    }
    v->sample = p;
    v->cap = n;
  }
  ordo_stats_t s0, s1;
  ordo_stats(v->o, &s0);
  for (size_t i = 0; i < n; i++) {
    double dt = deadlock ? victim_one_deadlock(v) : victim_one_handoff(v);
    if (dt < 0)
      return -1;
    v->sample[i] = dt * 1e6;
  }
  ordo_stats(v->o, &s1);
  uint64_t want = deadlock ? n : 0;
  if (s1.deadlocks - s0.deadlocks != want) {
    bench_error(row, "%llu deadlocks in %zu %s samples, expected %llu",
                (unsigned long long)(s1.deadlocks - s0.deadlocks), n,
                deadlock ? "deadlock" : "hand-off", (unsigned long long)want);
    return -1;
  }
  if (s1.waiting != v->nqueued || atomic_load(&v->fired) != 0) {
    bench_error(row,
                "%llu requests waiting and %zu callbacks fired; "
                "expected %zu and 0",
                (unsigned long long)s1.waiting, atomic_load(&v->fired),
                v->nqueued);
    return -1;
  }
  qsort(v->sample, n, sizeof *v->sample, victim_cmp);
  *out = victim_quantile(v->sample, n, 0.99);
  bench_extra(row, "p50_us", victim_quantile(v->sample, n, 0.50));
  bench_extra(row, "samples", (double)n);
  if (deadlock) {
    uint64_t h[ORDO_HIST_BUCKETS];
    for (int i = 0; i < ORDO_HIST_BUCKETS; i++)
      h[i] = s1.detect_hist[i] - s0.detect_hist[i];
    bench_extra(row, "engine_p99_us", (double)ordo_hist_quantile(h, 0.99));
  }
  return 0;
}

int victim_run_deadlock(const bench_row_t *row, void *state, double seconds,
                        double *out) {
  return victim_run(row, state, 1, seconds, out);
}

int victim_run_handoff(const bench_row_t *row, void *state, double seconds,
                       double *out) {
  return victim_run(row, state, 0, seconds, out);
}
