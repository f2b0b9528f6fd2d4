/*
 * uncontended.c -- the uncontended workload of the benchmark harness; see
 * README.md.
 *
 * One thread acquires and releases one key in a loop, with no other thread
 * asking for it: ordo_lock(t, key, 8, ORDO_MODE_X, ORDO_FOREVER) then
 * ordo_unlock_all(t), against pthread_mutex_lock then pthread_mutex_unlock of
 * one mutex. The result is nanoseconds per acquire+release pair.
 *
 * A second thread stays alive, blocked in read(2) on a pipe, for the whole
 * row: with only one thread, glibc skips the atomic instructions of its
 * locks, which no program that needs a lock manager would see.
 *
 * The same loops also run a fixed number of times for callgrind's
 * instruction count (ordo_bench --count; README.md, "Instruction counts"),
 * a figure that machine noise does not move.
 *
 * Interface:
 *   uncontended_setup(), uncontended_teardown()   the idle second thread
 *   uncontended_run_ordo(), uncontended_run_pthread()   one timed run
 *   uncontended_count_ordo(), uncontended_count_pthread()   a counted run
 */
#include "bench.h"

#include <ordo.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Pairs between two clock reads: long enough that the reads cost nothing. */
#define UNCONTENDED_BATCH 1024
/* Uncounted pairs before an instruction count starts. */
#define UNCONTENDED_COUNT_WARMUP 1000

/*
 * The key, at an address that neither the command line nor the stack moves:
 * glibc's memcmp takes a longer path when an operand lies near the end of a
 * page, so a key on the stack made the instruction count depend on the
 * length of argv (by 4 of about 780 per pair). One thread uses it at a time.
 */
static _Alignas(64) uint8_t uncontended_key[8];

typedef struct uncontended_s {
  int pipe_fd[2];
  pthread_t idler;
} uncontended_t;

/* Blocks until the write end of the pipe is closed. */
static void *uncontended_idle(void *arg) {
  uncontended_t *u = arg;
  char c;
  ssize_t n;
  do {
    n = read(u->pipe_fd[0], &c, 1);
  } while (n < 0 && errno == EINTR);
  return NULL;
}

int uncontended_setup(const bench_row_t *row, void **state) {
  uncontended_t *u = calloc(1, sizeof *u);
  if (u == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  if (pipe(u->pipe_fd) != 0) {
    bench_error(row, "pipe: %s", strerror(errno));
    free(u);
    return -1;
  }
  int rc = pthread_create(&u->idler, NULL, uncontended_idle, u);
  if (rc != 0) {
    bench_error(row, "pthread_create: %s", strerror(rc));
    close(u->pipe_fd[0]);
    close(u->pipe_fd[1]);
    free(u);
    return -1;
  }
  *state = u;
  return 0;
}

void uncontended_teardown(const bench_row_t *row, void *state) {
  uncontended_t *u = state;
  (void)row;
  close(u->pipe_fd[1]);
  pthread_join(u->idler, NULL);
  close(u->pipe_fd[0]);
  free(u);
}

/* Opens a mem:// place and begins one txn on it. */
static int uncontended_open(const bench_row_t *row, ordo_t **o,
                            ordo_txn_t **t) {
  int rc;
  *o = NULL;
  *t = NULL;
  if ((rc = ordo_open(o, "mem://", NULL)) != 0) {
    bench_error(row, "ordo_open: %s", ordo_strerror(rc));
    return -1;
  }
  if ((rc = ordo_txn_begin(*o, t, NULL)) != 0) {
    bench_error(row, "ordo_txn_begin: %s", ordo_strerror(rc));
    ordo_close(*o);
    return -1;
  }
  return 0;
}

static void uncontended_close(ordo_t *o, ordo_txn_t *t) {
  ordo_txn_end(t);
  ordo_close(o);
}

/*
 * uncontended_ordo_pairs -- n acquire+release pairs of key by t: the loop
 * that both the timed run and the instruction count run. Returns 0, or -1
 * after reporting the failure.
 */
static int uncontended_ordo_pairs(const bench_row_t *row, ordo_txn_t *t,
                                  const uint8_t *key, uint64_t n) {
  int rc;
  for (uint64_t i = 0; i < n; i++) {
    if ((rc = ordo_lock(t, key, 8, ORDO_MODE_X, ORDO_FOREVER)) != 0) {
      bench_error(row, "ordo_lock: %s", ordo_strerror(rc));
      return -1;
    }
    if ((rc = ordo_unlock_all(t)) != 1) {
      bench_error(row, "ordo_unlock_all returned %d (%s)", rc,
                  rc < 0 ? ordo_strerror(rc) : "expected 1");
      return -1;
    }
  }
  return 0;
}

/* The peer's loop: n lock+unlock pairs of mu. */
static int uncontended_mutex_pairs(const bench_row_t *row, pthread_mutex_t *mu,
                                   uint64_t n) {
  int rc;
  for (uint64_t i = 0; i < n; i++) {
    if ((rc = pthread_mutex_lock(mu)) != 0) {
      bench_error(row, "pthread_mutex_lock: %s", strerror(rc));
      return -1;
    }
    pthread_mutex_unlock(mu);
  }
  return 0;
}

int uncontended_run_ordo(const bench_row_t *row, void *state, double seconds,
                         double *out) {
  (void)state;
  ordo_t *o;
  ordo_txn_t *t;
  const uint8_t *key = uncontended_key;

  ordo_key_u64(uncontended_key, 1);
  if (uncontended_open(row, &o, &t) != 0)
    return -1;

  uint64_t n = 0;
  double t0 = bench_now(), t1;
  double deadline = t0 + seconds;
  do {
    if (uncontended_ordo_pairs(row, t, key, UNCONTENDED_BATCH) != 0) {
      uncontended_close(o, t);
      return -1;
    }
    n += UNCONTENDED_BATCH;
    t1 = bench_now();
  } while (t1 < deadline);

  uncontended_close(o, t);
  *out = (t1 - t0) * 1e9 / (double)n;
  return 0;
}

int uncontended_run_pthread(const bench_row_t *row, void *state, double seconds,
                            double *out) {
  (void)state;
  pthread_mutex_t mu;

  pthread_mutex_init(&mu, NULL);
  uint64_t n = 0;
  double t0 = bench_now(), t1;
  double deadline = t0 + seconds;
  do {
    if (uncontended_mutex_pairs(row, &mu, UNCONTENDED_BATCH) != 0) {
      pthread_mutex_destroy(&mu);
      return -1;
    }
    n += UNCONTENDED_BATCH;
    t1 = bench_now();
  } while (t1 < deadline);

  pthread_mutex_destroy(&mu);
  *out = (t1 - t0) * 1e9 / (double)n;
  return 0;
}

/*
 * The instruction counts: the same loops, exactly iters pairs between the
 * markers, after UNCONTENDED_COUNT_WARMUP uncounted pairs (the first call of
 * each function binds its symbol, the first lock allocates the key's entry).
 */
int uncontended_count_ordo(const bench_row_t *row, void *state,
                           uint64_t iters) {
  (void)state;
  ordo_t *o;
  ordo_txn_t *t;
  const uint8_t *key = uncontended_key;
  int rc;

  ordo_key_u64(uncontended_key, 1);
  if (uncontended_open(row, &o, &t) != 0)
    return -1;
  rc = uncontended_ordo_pairs(row, t, key, UNCONTENDED_COUNT_WARMUP);
  if (rc == 0) {
    bench_count_start();
    rc = uncontended_ordo_pairs(row, t, key, iters);
    bench_count_stop();
  }
  uncontended_close(o, t);
  return rc;
}

int uncontended_count_pthread(const bench_row_t *row, void *state,
                              uint64_t iters) {
  (void)state;
  pthread_mutex_t mu;
  int rc;

  pthread_mutex_init(&mu, NULL);
  rc = uncontended_mutex_pairs(row, &mu, UNCONTENDED_COUNT_WARMUP);
  if (rc == 0) {
    bench_count_start();
    rc = uncontended_mutex_pairs(row, &mu, iters);
    bench_count_stop();
  }
  pthread_mutex_destroy(&mu);
  return rc;
}
