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
 * Interface:
 *   uncontended_setup(), uncontended_teardown()   the idle second thread
 *   uncontended_run_ordo(), uncontended_run_pthread()   one timed run
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

int uncontended_run_ordo(const bench_row_t *row, void *state, double seconds,
                         double *out) {
  (void)state;
  ordo_t *o = NULL;
  ordo_txn_t *t = NULL;
  uint8_t key[8];
  int rc;

  ordo_key_u64(key, 1);
  if ((rc = ordo_open(&o, "mem://", NULL)) != 0) {
    bench_error(row, "ordo_open: %s", ordo_strerror(rc));
    return -1;
  }
  if ((rc = ordo_txn_begin(o, &t, NULL)) != 0) {
    bench_error(row, "ordo_txn_begin: %s", ordo_strerror(rc));
    ordo_close(o);
    return -1;
  }

  uint64_t n = 0;
  double t0 = bench_now(), t1;
  double deadline = t0 + seconds;
  do {
    for (int i = 0; i < UNCONTENDED_BATCH; i++) {
      if ((rc = ordo_lock(t, key, sizeof key, ORDO_MODE_X, ORDO_FOREVER)) !=
          0) {
        bench_error(row, "ordo_lock: %s", ordo_strerror(rc));
        goto fail;
      }
      if ((rc = ordo_unlock_all(t)) != 1) {
        bench_error(row, "ordo_unlock_all returned %d (%s)", rc,
                    rc < 0 ? ordo_strerror(rc) : "expected 1");
        goto fail;
      }
    }
    n += UNCONTENDED_BATCH;
    t1 = bench_now();
  } while (t1 < deadline);

  ordo_txn_end(t);
  ordo_close(o);
  *out = (t1 - t0) * 1e9 / (double)n;
  return 0;

fail:
  ordo_txn_end(t);
  ordo_close(o);
  return -1;
}

int uncontended_run_pthread(const bench_row_t *row, void *state, double seconds,
                            double *out) {
  (void)state;
  pthread_mutex_t mu;
  int rc;

  pthread_mutex_init(&mu, NULL);
  uint64_t n = 0;
  double t0 = bench_now(), t1;
  double deadline = t0 + seconds;
  do {
    for (int i = 0; i < UNCONTENDED_BATCH; i++) {
      if ((rc = pthread_mutex_lock(&mu)) != 0) {
        bench_error(row, "pthread_mutex_lock: %s", strerror(rc));
        pthread_mutex_destroy(&mu);
        return -1;
      }
      pthread_mutex_unlock(&mu);
    }
    n += UNCONTENDED_BATCH;
    t1 = bench_now();
  } while (t1 < deadline);

  pthread_mutex_destroy(&mu);
  *out = (t1 - t0) * 1e9 / (double)n;
  return 0;
}
