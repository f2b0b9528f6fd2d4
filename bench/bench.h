/*
 * bench.h -- the types shared by the ordo benchmark harness (bench.c) and
 * its workloads (bank.c, uncontended.c, detect.c, victim.c, pairs.c,
 * redlock.c, ledger.c, shards.c, exec.c, ...). See README.md.
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
 *   bench_program_path()           where a program of the build is
 *   bench_rng_next()               a small per-thread random generator
 *   bench_error()                  reports a failed run on stderr
 *   bench_extra()                  reports a further value of one run
 *   bench_count_start(), _stop()   bracket a count hook's counted loop
 *   bank_*, uncontended_*,
 *   detect_*, victim_*, pairs_*,
 *   redlock_*, ledger_*            the workloads' entry points
 */
#ifndef ORDO_BENCH_H
#define ORDO_BENCH_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_PARAMS 6
#define BENCH_MAX_EXTRAS 8

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

/*
 * bench_count_cb -- runs exactly `iters` iterations of one side's loop, for
 * an instruction count (ordo_bench --count, under valgrind's callgrind; see
 * README.md, "Instruction counts"). It prepares as a timed run would (opens
 * the place, begins the txn), runs a few iterations uncounted so that lazy
 * symbol binding and first allocations stay out of the figure, then brackets
 * exactly the `iters` iterations with bench_count_start() and
 * bench_count_stop(), and nothing else. Returns 0, or -1 after bench_error().
 */
typedef int (*bench_count_cb)(const bench_row_t *row, void *state,
                              uint64_t iters);

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
  /* Optional, for single-threaded rows whose loop is deterministic: a fixed
   * number of iterations of each side, counted by callgrind. Both or
   * neither. */
  bench_count_cb count_ordo;
  bench_count_cb count_peer;
  /* 1 for a row whose run does a fixed amount of work (it ignores
   * `seconds`: a million locks, a dinner, a ledger of N transfers): it gets
   * no warm-up run (its setup warms up) and BENCH_RUNS_FIXED_FULL recorded
   * runs per side in full mode, BENCH_RUNS_FIXED_QUICK in quick mode (or
   * --runs), so that `make bench` keeps its time budget. */
  int fixed_work;
  /* 1 for a row too slow or heavy for the default run (curve_held_1e7): it
   * runs only when ROWS= / --rows names it. */
  int opt_in;
};

/* A family of rows defined in a file of its own (bench.c lists the
 * families it knows, weakly, after its own table). */
typedef struct bench_table_s {
  const bench_row_t *rows;
  size_t n;
} bench_table_t;

/* The value of a row's numeric parameter; aborts if the row lacks it. */
long long bench_param_int(const bench_row_t *row, const char *name);

/* Seconds on CLOCK_MONOTONIC, from an arbitrary origin. */
double bench_now(void);
/* Sleeps for `seconds` on CLOCK_MONOTONIC, resuming after signals. */
void bench_sleep(double seconds);
/* Removes the folder dir and everything below it, as far as it can; an
 * empty name (no folder made) does nothing. */
void bench_rm_tree(const char *dir);

/* A program of the build the harness runs, into buf: $env when set, else
 * built (the path CMake gave, or NULL), else `name` beside the folder of
 * this program (build/bench/../name). 0, or -1 when that is not an
 * executable. */
int bench_program_path(char *buf, size_t n, const char *env, const char *built,
                       const char *name);

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

/*
 * Bracket the counted iterations of a bench_count_cb: start turns callgrind's
 * instrumentation on, stop turns it off and has callgrind dump the count,
 * labelled with the row, the side and the iterations. Outside callgrind they
 * do nothing.
 */
void bench_count_start(void);
void bench_count_stop(void);

/* bank.c: transfers between two random accounts; params accounts, workers.
 * A row that lists the extra "max_wait_us" has every side time each acquire
 * (with the ticks of the main thread, no clock read per transfer) and
 * report the longest; one that lists "waits_per_xfer" has ordo's side
 * report its requests that queued per transfer. */
int bank_run_ordo(const bench_row_t *row, void *state, double seconds,
                  double *out);
int bank_run_pthread(const bench_row_t *row, void *state, double seconds,
                     double *out);
int bank_run_gmutex(const bench_row_t *row, void *state, double seconds,
                    double *out);

/*
 * bank_scheme_t -- a peer's way of locking two accounts, defined in a file
 * of its own (bdb.c) and run by bank_run_scheme() with the same accounts,
 * draws, workers, clock and balance check as the sides of bank.c. Every hook
 * but end returns 0 or a code that strerror() explains.
 */
typedef struct bank_scheme_s {
  const char *name; /* for messages, e.g. "bdb" */
  /* Once per run, before the workers start: *run gets the run's state.
   * state is what the row's setup hook returned. */
  int (*open)(const bench_row_t *row, void *state, size_t accounts, int workers,
              void **run);
  /* On each worker's thread, before the start barrier and after its loop. */
  int (*begin)(void *run, void **worker);
  void (*end)(void *run, void *worker);
  /* Takes accounts lo < hi exclusively. After an error the run fails, and
   * end() must let go of whatever the worker still holds. */
  int (*lock)(void *worker, size_t lo, size_t hi);
  int (*unlock)(void *worker);
  /* Once per run, after the workers are joined (and after a failure): may
   * report extra values, frees the run. Returns 0, or -1 after
   * bench_error(). */
  int (*close)(const bench_row_t *row, void *run);
  const char *(*strerror)(int rc);
} bank_scheme_t;

int bank_run_scheme(const bench_row_t *row, const bank_scheme_t *scheme,
                    void *state, double seconds, double *out);

/* uncontended.c: acquire+release of one key by one thread, in ns/op. */
int uncontended_setup(const bench_row_t *row, void **state);
void uncontended_teardown(const bench_row_t *row, void *state);
int uncontended_run_ordo(const bench_row_t *row, void *state, double seconds,
                         double *out);
int uncontended_run_pthread(const bench_row_t *row, void *state, double seconds,
                            double *out);
int uncontended_count_ordo(const bench_row_t *row, void *state, uint64_t iters);
int uncontended_count_pthread(const bench_row_t *row, void *state,
                              uint64_t iters);

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

/* ledger.c, for shards.c: the same cluster as ledger_setup() (shared with
 * the other PostgreSQL rows; ledger_teardown() keeps or stops it) without
 * the calibration, and the URL of its database ordo (role ordo, a
 * superuser: it may SET deadlock_timeout). */
int ledger_cluster_setup(const bench_row_t *row, void **state);
const char *ledger_cluster_url(const void *state);

/* What one run of `ordo bank --json` reported (ledger.c). */
typedef struct ledger_report_s {
  double transfers, seconds, retries, deadlocks;
  int ok;
  char verdict[256];
} ledger_report_t;

/* ledger.c, shared with pgbench.c (which runs pgbench on a ledger row's
 * cluster; state is what ledger_setup() made). ledger_exec runs argv
 * (from PATH) with stdin from /dev/null, its stdout and stderr captured
 * (truncated to outcap and errcap), bounded by timeout seconds: 0 when it
 * ended by itself, with its wait status in *status; -1 after bench_error().
 * ledger_status_text: "status N" or "signal N". naive: 0 for the ordered
 * side, 1 for the naive one. ledger_side_url: the side's database;
 * ledger_side_rate: its calibrated transfers/s; ledger_side_transfers: N,
 * the transfers each way of a run of `seconds` (2N in all);
 * ledger_side_bank: one `ordo bank` of N each way, checked (0, or -1 after
 * bench_error()). */
int ledger_exec(const bench_row_t *row, char *const argv[], double timeout,
                char *out, size_t outcap, char *err, size_t errcap,
                int *status);
const char *ledger_status_text(int status, char *buf, size_t n);
/* ledger_psql: sql run by psql on url (-X -q -At, stopping at the first
 * error), its output in out: 0, or -1 after bench_error() with psql's
 * stderr. */
int ledger_psql(const bench_row_t *row, const char *url, const char *sql,
                char *out, size_t outcap);
const char *ledger_side_url(const void *state, int naive);
double ledger_side_rate(const void *state, int naive);
long ledger_side_transfers(const void *state, int naive, double seconds);
int ledger_side_bank(const bench_row_t *row, const void *state, int naive,
                     long n, ledger_report_t *rep);

/* philo.c, philo_peer.cc: Hinnant's dining philosophers; N diners eat a
 * share of busy bites each, taking two forks per bite; a run's value is its
 * wall time. philo.c holds the rows (bench_philo_table), the ordo side and
 * the ordered-pthread side; philo_peer.cc the std::scoped_lock side, which
 * reaches one run's shared parts through the calls below. */
typedef struct philo_s philo_t;             /* one run's table */
typedef struct philo_diner_s philo_diner_t; /* one diner of it */
size_t philo_count(const philo_t *p);
philo_diner_t *philo_diner(philo_t *p, size_t i);
/* Waits at the run's start barrier, once per diner, before its first ask. */
void philo_start(philo_diner_t *d);
/* 1 while the diner has more to eat and the run has not failed. */
int philo_hungry(const philo_diner_t *d);
/* The diner's two fork numbers, in the random order it asks for them. */
void philo_pick(philo_diner_t *d, size_t *first, size_t *second);
int64_t philo_now_ns(void); /* CLOCK_MONOTONIC in ns */
/* One bite with both forks held: records the wait since asked_ns, checks
 * that no other diner uses the forks, and spins for the bite's length. */
void philo_eat(philo_diner_t *d, int64_t asked_ns);
/* philo_peer.cc: runs every diner of p on std::mutex forks taken with
 * std::scoped_lock, one std::thread each; returns 0, or -1 after a
 * message on stderr. */
int philo_run_scoped_lock(philo_t *p);

#endif /* ORDO_BENCH_H */
