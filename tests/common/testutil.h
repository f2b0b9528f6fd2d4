/*
 * testutil.h -- what every concurrent test shares: a watchdog that fails the
 * test with a dump of the lock table instead of letting it hang, a scale
 * factor that sanitizer builds use to run fewer operations, and bounded
 * waits on engine events (never a bare sleep).
 */
#ifndef ORDO_TESTUTIL_H
#define ORDO_TESTUTIL_H

#include "ordo.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t tu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void tu_sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* Operation counts are multiplied by ORDO_TEST_SCALE (default 1). */
static inline long tu_scaled(long n) {
  const char *s = getenv("ORDO_TEST_SCALE");
  double f = s ? atof(s) : 1.0;
  if (f <= 0)
    f = 1.0;
  long v = (long)((double)n * f);
  return v > 0 ? v : 1;
}

/* ---- Skips -------------------------------------------------------------
 * A case may skip only where a named thing is really absent from this
 * machine (no pseudo-terminal, not root): TU_SKIP(why, ...) prints
 * "SKIP: why" and counts the skip, then leaves the case through cmocka's
 * skip(). A missing server, port or capability is not such a thing: the
 * fixtures start every server a suite needs, and a backend's capabilities
 * are pinned by the conformance suite, so those fail instead. Nothing calls
 * cmocka's skip() bare (tests/scripts/check_tests.sh looks).
 *
 * Every suite's main ends with
 *     return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
 * which returns the failure count when a case failed, else TU_SKIP_RC when
 * one skipped, else 0. ctest reads TU_SKIP_RC as "skipped" (every test has
 * SKIP_RETURN_CODE 77, tests/CMakeLists.txt), so a skip shows in its
 * summary and in the count `make test` prints last. Scripts exit 77 the
 * same way (tests/cli/lib.sh's skip, tests/integration/ordod_proc.py). */
#define TU_SKIP_RC 77
static int tu_skips;
#define TU_SKIP(...)                                                           \
  do {                                                                         \
    fprintf(stderr, "SKIP: " __VA_ARGS__);                                     \
    fputc('\n', stderr);                                                       \
    tu_skips++;                                                                \
    skip();                                                                    \
  } while (0)

static inline int tu_exit(int failures) {
  if (failures)
    return failures;
  return tu_skips ? TU_SKIP_RC : 0;
}

/* The factor every bound on elapsed time grows by: ORDO_TEST_TIMEOUT_MULT
 * (scripts/test.sh sets it for the sanitizer builds), 1 when unset. A test
 * that asserts "within N ms" writes tu_ms(N), and asserts it only as a
 * bound against a hang, never as a speed. */
static inline double tu_mult(void) {
  const char *m = getenv("ORDO_TEST_TIMEOUT_MULT");
  double mult = m ? atof(m) : 1.0;
  return mult > 0 ? mult : 1.0;
}
static inline uint64_t tu_ms(uint64_t ms) {
  return (uint64_t)((double)ms * tu_mult());
}

/* ---- Watchdog ---------------------------------------------------------
 * tu_watchdog_start(o, seconds, what): if tu_watchdog_stop() has not been
 * called within the bound, prints what timed out, the lock table and the
 * wait-for graph (ordo_graph_dump), then aborts the test process.
 */
typedef struct {
  pthread_t thr;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
  ordo_t *o;
  double seconds;
  const char *what;
} tu_watchdog;

static tu_watchdog tu_wd;

static void *tu_watchdog_main(void *arg) {
  (void)arg;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)tu_wd.seconds;
  pthread_mutex_lock(&tu_wd.mu);
  while (!tu_wd.stop) {
    if (pthread_cond_timedwait(&tu_wd.cv, &tu_wd.mu, &ts) != 0 && !tu_wd.stop) {
      fprintf(stderr,
              "WATCHDOG: '%s' did not finish within %.0f s; lock table:\n",
              tu_wd.what, tu_wd.seconds);
      if (tu_wd.o) {
        ordo_dump(tu_wd.o, 2);
        /* The wait-for graph too: an executor's waits on futures and its
         * queue show only there. */
        fprintf(stderr, "wait-for graph:\n");
        ordo_graph_dump(tu_wd.o, 2, ORDO_GRAPH_DOT);
      }
      fflush(stderr);
      abort();
    }
  }
  pthread_mutex_unlock(&tu_wd.mu);
  return NULL;
}

static inline void tu_watchdog_start(ordo_t *o, double seconds,
                                     const char *what) {
  tu_wd.stop = false;
  tu_wd.o = o;
  tu_wd.seconds = seconds * tu_mult();
  tu_wd.what = what;
  pthread_mutex_init(&tu_wd.mu, NULL);
  pthread_cond_init(&tu_wd.cv, NULL);
  pthread_create(&tu_wd.thr, NULL, tu_watchdog_main, NULL);
}

/* The place whose lock table a firing watchdog dumps, for a case that
 * opens a place of its own. */
static inline void tu_watchdog_target(ordo_t *o) {
  pthread_mutex_lock(&tu_wd.mu);
  tu_wd.o = o;
  pthread_mutex_unlock(&tu_wd.mu);
}

static inline void tu_watchdog_stop(void) {
  pthread_mutex_lock(&tu_wd.mu);
  tu_wd.stop = true;
  pthread_cond_signal(&tu_wd.cv);
  pthread_mutex_unlock(&tu_wd.mu);
  pthread_join(tu_wd.thr, NULL);
  pthread_mutex_destroy(&tu_wd.mu);
  pthread_cond_destroy(&tu_wd.cv);
}

/* Waits (bounded, 5 s times tu_mult()) until the engine reports exactly n
 * queued requests; returns false on time-out. This is the "this txn is now
 * blocked" event. A request is counted when it is queued, and the deadlock
 * check that follows runs under the same hold of the engine's slow-path lock;
 * reading the deadlock records takes that lock, so it returns only once that
 * check is over. */
static inline bool tu_wait_waiting(ordo_t *o, uint64_t n) {
  uint64_t end = tu_now_ns() + tu_ms(5000) * 1000000u;
  ordo_stats_t s;
  while (tu_now_ns() < end) {
    ordo_stats(o, &s);
    if (s.waiting == n) {
      ordo_deadlocks(o, NULL, 0);
      return true;
    }
    tu_sleep_us(100);
  }
  return false;
}

/* A thread that runs one lock_all and records the result. */
typedef struct {
  ordo_txn_t *t;
  ordo_req_t reqs[8];
  size_t n;
  long timeout_ms;
  _Atomic int done;
  int rc;
  pthread_t thr;
} tu_locker;

static void *tu_locker_main(void *arg) {
  tu_locker *l = arg;
  l->rc = ordo_lock_all(l->t, l->reqs, l->n, l->timeout_ms);
  atomic_store(&l->done, 1);
  return NULL;
}

static inline void tu_locker_start(tu_locker *l) {
  atomic_store(&l->done, 0);
  pthread_create(&l->thr, NULL, tu_locker_main, l);
}

static inline int tu_locker_join(tu_locker *l) {
  pthread_join(l->thr, NULL);
  return l->rc;
}

#endif
