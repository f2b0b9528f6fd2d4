/*
 * bank_model.h -- the bank check of `ordo bank` as one idea, apart from the
 * places it runs on: the options, the plan of transfers, the result and the
 * checks afterwards (balance unchanged, exclusion, the deadlock count), the
 * workers' start gate and the watchdog, and the face of a driver
 * (bank_driver_t). Every driver (bank_ordo.c over the ordo API, bank_pg.c
 * on PostgreSQL rows) and the report (bank_report.c) build on this file;
 * it builds on nothing of theirs. See README.md.
 *
 * Interface (defined in bank_model.c):
 *   bank_opts_t, bank_mode_t, bank_locks_t   the parsed command line
 *   bank_result_t, bank_count_t              what a run measured
 *   bank_driver_t                            what a driver implements
 *   bank_mode_names, bank_locks_names, bank_detect_names   their names
 *   bank_mix64        the SplitMix64 finalizer
 *   bank_plan         what transfer idx does: its accounts and amount
 *   bank_now_ns       nanoseconds on the monotonic clock
 *   bank_latency      sorts a run's latencies, sets p50 and p99
 *   bank_verdict_add  appends one failed check to a verdict
 *   bank_check_total, bank_check_count, bank_check_ordered, bank_judged
 *                     the checks both drivers make, and the ok they give
 *   bank_count_add    adds one counter row to a result's report
 *   bank_url_redact   a URL with any password replaced by ***
 *   bank_gate_*       the workers' start gate
 *   bank_crew_t, bank_crew_run   a run's worker threads, with the gate, the
 *                     progress bar and the watchdog around them
 *   bank_watchdog_start, bank_watchdog_stop   --watchdog SEC, with a dump
 *                     callback (ordo's lock table, or the server's)
 */
#ifndef ORDO_CLI_BANK_MODEL_H
#define ORDO_CLI_BANK_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli.h"

/*
 * How a transfer takes its two locks: the ordered mode asks for both at once
 * (one ordo_lock_all; on PostgreSQL one SELECT ... ORDER BY id FOR UPDATE),
 * which cannot deadlock; the naive mode asks for them one at a time, from
 * then to, as a program that never heard of lock order would, and so
 * deadlocks whenever two transfers cross.
 */
typedef enum bank_mode_e {
  BANK_MODE_ORDERED = 0,
  BANK_MODE_NAIVE = 1
} bank_mode_t;

extern const char *const bank_mode_names[]; /* indexed by bank_mode_t */

/*
 * --locks, for PostgreSQL URLs only: rows (the ledger of bank_pg.c, where
 * the database's row locks guard real rows) or advisory (bank_ordo.c's run
 * over ordo_open(url), the postgres:// backend's advisory locks).
 */
typedef enum bank_locks_e {
  BANK_LOCKS_ROWS = 0,
  BANK_LOCKS_ADVISORY = 1
} bank_locks_t;

extern const char *const bank_locks_names[]; /* NULL-ended, by bank_locks_t */

/* --detect's values, NULL-ended and indexed by ordo_detect_t. */
extern const char *const bank_detect_names[];

/* Every account opens with this balance, in memory and in the ledger. */
#define BANK_OPENING_BALANCE 1000
#define BANK_MAX_AMOUNT 100
/* --workers' bound: the crew keeps its threads' ids on the stack. */
#define BANK_MAX_WORKERS 1024L

typedef struct bank_opts_s {
  const char *url;          /* backend URL as given (default "mem://") */
  long accounts;            /* 2.. */
  long transfers;           /* each way: the run makes 2 * transfers */
  long workers;             /* 1..1024 */
  long lock_timeout_ms;     /* bound on each lock call; -1 until given */
  long deadlock_timeout_ms; /* opts.deadlock_timeout_ms; -1 until given */
  long attempts;            /* per transfer, 0 = until done; -1 until given */
  long watchdog_s;          /* dump the lock table and exit 3 after this */
  int naive;                /* --naive: one lock call per key */
  int detect;               /* an ordo_detect_t: index in detect_names */
  int compare;              /* --compare: three runs, one table */
  int json;                 /* print one JSON object instead of text */
  int locks;                /* a bank_locks_t; -1 until given */
  const char *graph;        /* --graph FILE, or NULL */
  bank_mode_t mode;         /* from naive, once parsed */
} bank_opts_t;

/*
 * One counter of a result as the report shows it, from retries down to the
 * balance: a line of the summary ("%-13s VALUE NOTE") and a member of the
 * JSON, in the order the driver added them (bank_count_add). The drivers
 * count different things (ordo's owner-word violations, PostgreSQL's
 * 40001 errors and journal rows), so the rows are theirs to list.
 */
typedef struct bank_count_s {
  const char *json;  /* the JSON member's name, or NULL: the summary only */
  const char *label; /* the summary line's name, or NULL: the JSON only */
  uint64_t value;
  char note[80]; /* after the value on the summary line, e.g. " (...)" */
} bank_count_t;

#define BANK_MAX_COUNTS 8

/* What a run measured; filled by a driver's run and verify, then printed. */
typedef struct bank_result_s {
  char *backend; /* the URL without its password; malloc'd */
  uint64_t expected, completed, twice, failed;
  uint64_t forward; /* with 2 accounts: transfers from 0 to 1 */
  double seconds;
  double p50_us, p99_us;
  uint64_t retries, timeouts, deadlocks, victims, violations;
  int64_t total_before, total_after;
  int hard_err; /* a non-retryable error stopped the run, or 0 */
  int last_err; /* the error of some failed transfer, or 0 */
  int ok;
  char verdict[768];
  /* How the report names the place; set by the driver. */
  char place[48];            /* the summary's words after the backend */
  const char *locks;         /* JSON "locks", or NULL for none */
  char deadlock_timeout[32]; /* JSON "deadlock_timeout", or "" for none */
  const char *detect;        /* JSON "detect", or NULL: the place detects */
  bank_count_t count[BANK_MAX_COUNTS];
  size_t ncount;
} bank_result_t;

/* The SplitMix64 finalizer: a bijection that scatters every input bit. */
uint64_t bank_mix64(uint64_t z);

/*
 * bank_plan -- what transfer idx of a ledger of naccounts does: from, to
 * (distinct) and amount (1..BANK_MAX_AMOUNT), a pure function of idx and a
 * fixed seed (README.md, invariant 8). With two accounts even indices go
 * 0 -> 1 and odd ones 1 -> 0, so there are exactly N each way, interleaved.
 */
void bank_plan(size_t naccounts, uint64_t idx, size_t *from, size_t *to,
               int64_t *amount);

uint64_t bank_now_ns(void);

/* Sorts lat_ns[0..n) and sets r's nearest-rank p50 and p99, in us. */
void bank_latency(bank_result_t *r, uint64_t *lat_ns, uint64_t n);

/* Appends "; reason" (or "reason" first) to r->verdict. */
void bank_verdict_add(bank_result_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * The checks both drivers make, each adding its reason to r->verdict when
 * it fails (README.md, invariant 9 and ledger invariant 7): the total is
 * unchanged; every transfer completed; in the ordered mode, no deadlock.
 * bank_judged then sets r->ok (no check failed) and returns it, so that
 * the driver writes its own verdict of a passing run.
 */
void bank_check_total(bank_result_t *r);
void bank_check_count(bank_result_t *r);
void bank_check_ordered(const bank_opts_t *o, bank_result_t *r);
int bank_judged(bank_result_t *r);

/* Adds a counter row to r's report (bank_count_t); note is a format. */
void bank_count_add(bank_result_t *r, const char *json, const char *label,
                    uint64_t value, const char *note, ...)
    __attribute__((format(printf, 5, 6)));

/* Copies url into out (cap bytes) with any user:password@'s password as ***. */
void bank_url_redact(const char *url, char *out, size_t cap);

/* ---- The watchdog (README.md, "The watchdog") ---------------------------- */

/*
 * What the watchdog prints after its line when it fires: ordo's lock table
 * (bank_ordo.c) or the server's lock view (bank_pg.c). It runs on the
 * watchdog's thread while the main thread is blocked in a join that never
 * returns, with no lock of the bank held, and the process ends right after it.
 */
typedef void (*bank_dump_cb)(void *arg);

/*
 * One thread that sleeps in a timed wait on cv until deadline
 * (CLOCK_MONOTONIC), or until the main thread sets cancel after the last
 * worker has exited. It never polls: it wakes once, either cancelled or at
 * the deadline. At the deadline it stops the progress bar, prints one line
 * naming what follows, calls dump, and ends the process with
 * _exit(CLI_EXIT_WATCHDOG).
 */
typedef struct bank_watchdog_s {
  bank_dump_cb dump;
  void *arg;
  const char *what;    /* "lock table": the line says "lock table follows" */
  cli_progress_t *bar; /* started before the watchdog; stopped when it fires */
  long seconds;
  struct timespec deadline; /* CLOCK_MONOTONIC */
  int active;               /* a thread was started and must be joined */
  pthread_t thread;
  /* mu guards cancel; cv announces it. A leaf: see README.md, lock order. */
  ordo__mutex mu;
  pthread_cond_t cv;
  int cancel ORDO_GUARDED_BY(mu);
} bank_watchdog_t;

/*
 * bank_gate_t -- the workers' start gate: a run opens it once every worker
 * exists, so that its clock measures them all working, or aborts it when a
 * worker could not start. mu guards go and abort; cv announces either. A
 * leaf: taken once by the main thread and by each worker before any lock
 * call or statement (README.md, lock order).
 */
typedef struct bank_gate_s {
  ordo__mutex mu;
  pthread_cond_t cv;
  int go ORDO_GUARDED_BY(mu), abort ORDO_GUARDED_BY(mu);
} bank_gate_t;

void bank_gate_init(bank_gate_t *g);
void bank_gate_destroy(bank_gate_t *g);
/* Opens the gate (go) or aborts the run (!go), waking every worker. */
void bank_gate_open(bank_gate_t *g, int go);
/* A worker waits at the gate; returns 1 when the run was aborted. */
int bank_gate_wait(bank_gate_t *g);

/*
 * bank_crew_t -- the workers of one run, started and ended the same way for
 * every driver (bank_crew_run): n threads, worker i running work(first + i
 * * stride), which must wait at gate before its first transfer; the
 * progress bar sums the _Atomic uint64_t at done_off of each worker (its
 * transfers finished, written by that worker alone).
 */
typedef struct bank_crew_s {
  void *(*work)(void *arg);
  void *first;     /* worker 0's struct */
  size_t stride;   /* sizeof one worker's struct */
  size_t done_off; /* offsetof its done counter */
  size_t n;        /* 1..BANK_MAX_WORKERS */
  bank_gate_t *gate;
  const char *label; /* of the progress bar */
  uint64_t total;    /* transfers of the run, for the bar */
  long watchdog_s;   /* --watchdog SEC, 0 for none */
  const char *what;  /* the watchdog's words for what dump prints */
  bank_dump_cb dump;
  void *dump_arg;
} bank_crew_t;

/*
 * bank_crew_run -- starts the crew's threads (when status is CLI_EXIT_OK),
 * the progress bar and the watchdog, opens the gate once every worker
 * exists (or aborts it when one could not start), joins them all, then
 * stops the watchdog and the bar. Sets *seconds to the time from the gate's
 * opening to the last join. Returns status, or CLI_EXIT_FAIL after one line
 * when a thread or the watchdog could not start.
 */
int bank_crew_run(const bank_crew_t *c, int status, double *seconds);

/*
 * bank_watchdog_start -- arms the watchdog for seconds from now, or does
 * nothing when seconds is 0. Returns 0, or an error number when the
 * condition variable (on CLOCK_MONOTONIC), its mutex or the thread could not
 * be set up (then nothing is left to stop, and a line on stderr said so).
 */
int bank_watchdog_start(bank_watchdog_t *wd, long seconds, cli_progress_t *bar,
                        const char *what, bank_dump_cb dump, void *arg);

/*
 * bank_watchdog_stop -- cancels the watchdog and joins it; safe when it was
 * never armed (or zeroed). If it has already fired, the join never returns:
 * the watchdog ends the process.
 */
void bank_watchdog_stop(bank_watchdog_t *wd);

/* ---- A driver (README.md, "Adding a driver") ----------------------------
 */

typedef struct bank_graph_s bank_graph_t; /* --graph FILE: bank_graph.h */
typedef struct bank_place_s bank_place_t; /* a driver's own state of a run */

/*
 * bank_driver_t -- one way of running the bank: its functions, called by
 * the command (bank.c) in this order for each configuration of a run:
 * open, run, verify (only when run returned CLI_EXIT_OK), close (whenever
 * open did). Each returns an exit status and, when it is not CLI_EXIT_OK,
 * has printed the one line that says why. The report (bank_report.c) then
 * prints the results the driver filled.
 */
typedef struct bank_driver_s {
  const char *name; /* "ordo", "postgres rows": for the README and errors */
  /* Does this driver run o (its URL and --locks)? The command asks the
   * drivers of its table in turn and takes the first that says yes. */
  int (*claims)(const bank_opts_t *o);
  /* Refuses, with one line, the flags it cannot honour (CLI_EXIT_USAGE),
   * or returns CLI_EXIT_OK; may be NULL when it honours them all. */
  int (*check)(const bank_opts_t *o);
  /* Its paragraph of `ordo bank --help`, or NULL. */
  void (*usage)(FILE *f);
  /* 1 when it can draw --graph (the JSON then has a "graph" member). */
  int graphs;
  /* Opens the place of one configuration o (settled: bank_configs), with
   * g the --graph file to arm (NULL without --graph). */
  int (*open)(const bank_opts_t *o, bank_graph_t *g, bank_place_t **out);
  /* Runs the workers over the place (the gate, the watchdog, the progress
   * bar labelled label) and fills r's measures. */
  int (*run)(bank_place_t *p, const char *label, bank_result_t *r);
  /* Reads back what the run left, checks it and judges r (ok, verdict,
   * counter rows). */
  int (*verify)(bank_place_t *p, bank_result_t *r);
  /* Releases everything open gave; p may be in any state run left. */
  void (*close)(bank_place_t *p);
} bank_driver_t;

#endif /* ORDO_CLI_BANK_MODEL_H */
