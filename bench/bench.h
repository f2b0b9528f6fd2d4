/*
 * bench.h -- the types shared by the ordo benchmark harness (bench.c) and
 * its workloads (bank.c, uncontended.c, detect.c, victim.c, pairs.c,
 * redlock.c, ledger.c). See README.md.
 *
 * A row compares ordo with one peer on one workload. The harness owns the
 * schedule (warm-up, alternating ordo and peer runs, medians, the ratio); a
 * workload only supplies two functions that each measure one run and report
 * one number in the row's metric.
 *
 * Interface:
 *   bench_row_t, bench_param_t     a row of the table in bench.c
 *   bench_param_int()              reads a row's numeric parameter
 *   bench_now(), bench_sleep()     CLOCK_MONOTONIC time in seconds
 *   bench_rng_next()               a small per-thread random generator
 *   bench_error()                  reports a failed run on stderr
 *   bench_extra()                  reports a further value of one run
 *   bank_*, uncontended_*,
 *   detect_*, victim_*, pairs_*,
 *   redlock_*, ledger_*            the workloads' entry points
 */
#ifndef ORDO_BENCH_H
#define ORDO_BENCH_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_PARAMS 6
#define BENCH_MAX_EXTRAS 4

/* One named parameter of a row: a number, or a string when str is set. */
typedef struct bench_param_s {
  const char *name; /* NULL ends the list */
  long long value;
  const char *str;
} bench_param_t;

typedef struct bench_row_s bench_row_t;

/*
 * bench_side_cb -- measures one run of one side (ordo or the peer) for about
 * `seconds` and stores the result, in the row's metric, in *out. state is
 * what the row's setup hook returned (NULL without one). Returns 0, or -1
 * after reporting the failure with bench_error(); the harness then stops.
 */
typedef int (*bench_side_cb)(const bench_row_t *row, void *state,
                             double seconds, double *out);

/* Optional hooks run once around all of a row's runs (e.g. start a server). */
typedef int (*bench_setup_cb)(const bench_row_t *row, void **state);
typedef void (*bench_teardown_cb)(const bench_row_t *row, void *state);

struct bench_row_s {
  const char *id;        /* stable; what ROWS= and --rows name */
  const char *title;     /* human-readable, for the table */
  const char *metric;    /* unit of one measurement, e.g. "transfers/s" */
  int higher_is_better;  /* 1: a rate (ratio = ordo / peer); 0: a time */
  const char *peer_name; /* e.g. "pthread hand-ordered" */
  double target;         /* the ratio to reach, or NAN for none */
  bench_param_t params[BENCH_MAX_PARAMS];
  bench_setup_cb setup;       /* may be NULL */
  bench_teardown_cb teardown; /* may be NULL */
  bench_side_cb run_ordo;
  bench_side_cb run_peer;
  /* Names of further values each run may report with bench_extra(), such
   * as "p50_us"; NULL ends the list. Each side's median of each goes in the
   * JSON's "extra" and in a second table. */
  const char *extras[BENCH_MAX_EXTRAS];
};

/* The value of a row's numeric parameter; aborts if the row lacks it. */
long long bench_param_int(const bench_row_t *row, const char *name);

/* Seconds on CLOCK_MONOTONIC, from an arbitrary origin. */
double bench_now(void);
/* Sleeps for `seconds` on CLOCK_MONOTONIC, resuming after signals. */
void bench_sleep(double seconds);

/* xorshift64*: a fast generator, one state word per thread, never 0. */
static inline uint64_t bench_rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* Prints "ordo_bench: <row id>: <message>" on stderr. */
void bench_error(const bench_row_t *row, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Reports a further value of the run in progress, in the side that is
 * running; name must be one of row->extras (aborts otherwise). A value not
 * reported in a run does not count towards that side's median.
 */
void bench_extra(const bench_row_t *row, const char *name, double v);

/* bank.c: transfers between two random accounts; params accounts, workers. */
int bank_run_ordo(const bench_row_t *row, void *state, double seconds,
                  double *out);
int bank_run_pthread(const bench_row_t *row, void *state, double seconds,
                     double *out);

/* uncontended.c: acquire+release of one key by one thread, in ns/op. */
int uncontended_setup(const bench_row_t *row, void **state);
void uncontended_teardown(const bench_row_t *row, void *state);
int uncontended_run_ordo(const bench_row_t *row, void *state, double seconds,
                         double *out);
int uncontended_run_pthread(const bench_row_t *row, void *state, double seconds,
                            double *out);

/* detect.c: throughput with immediate deadlock detection on vs off; params
 * threads, keys (1 for the hot key), parked (0 or 1). */
int detect_hotkey_run_on(const bench_row_t *row, void *state, double seconds,
                         double *out);
int detect_hotkey_run_off(const bench_row_t *row, void *state, double seconds,
                          double *out);
int detect_manykeys_run_on(const bench_row_t *row, void *state, double seconds,
                           double *out);
int detect_manykeys_run_off(const bench_row_t *row, void *state, double seconds,
                            double *out);

/* victim.c: a 2-txn deadlock's victim latency (p99, us) against a plain
 * hand-off, with `waiters` async requests queued meanwhile. */
int victim_setup(const bench_row_t *row, void **state);
void victim_teardown(const bench_row_t *row, void *state);
int victim_run_deadlock(const bench_row_t *row, void *state, double seconds,
                        double *out);
int victim_run_handoff(const bench_row_t *row, void *state, double seconds,
                       double *out);

/* pairs.c: ordod against redis-server, acquire+release pairs of random keys
 * over the network; params clients, pipeline, keys, keys_per_lock. The
 * setup starts both servers (servers.c). */
int pairs_setup(const bench_row_t *row, void **state);
void pairs_teardown(const bench_row_t *row, void *state);
int pairs_run_ordod(const bench_row_t *row, void *state, double seconds,
                    double *out);
int pairs_run_redis(const bench_row_t *row, void *state, double seconds,
                    double *out);

/* redlock.c: the latency of lock_all+unlock_all of k random keys on a
 * redlock:// place of 3 nodes (parallel or sequential) or a redis:// node,
 * one client; params keys_per_lock, nodes, keys. The setup starts the three
 * redis-servers (servers.c). */
int redlock_setup(const bench_row_t *row, void **state);
void redlock_teardown(const bench_row_t *row, void *state);
int redlock_run_parallel(const bench_row_t *row, void *state, double seconds,
                         double *out);
int redlock_run_sequential(const bench_row_t *row, void *state, double seconds,
                           double *out);
int redlock_run_node(const bench_row_t *row, void *state, double seconds,
                     double *out);

/* ledger.c: `ordo bank --backend postgres://...` as a child process, the
 * ledger on real PostgreSQL rows, ordered (both rows in one SELECT ... ORDER
 * BY id FOR UPDATE) or naive (from, then to; PostgreSQL finds the
 * deadlocks); params accounts, workers. The setup starts a throw-away
 * cluster (tests/integration/pg_fixture.sh) with one database per side. */
int ledger_setup(const bench_row_t *row, void **state);
void ledger_teardown(const bench_row_t *row, void *state);
int ledger_run_ordered(const bench_row_t *row, void *state, double seconds,
                       double *out);
int ledger_run_naive(const bench_row_t *row, void *state, double seconds,
                     double *out);

#endif /* ORDO_BENCH_H */
