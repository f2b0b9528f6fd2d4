/*
 * bank.h -- what the two runners of `ordo bank` share: bank.c, the bank over
 * any ordo backend (locks taken through ordo.h), and ledger.c, the ledger on
 * real PostgreSQL rows (--backend postgres://..., locks taken by the
 * database's own row locks). One set of options, one plan of transfers, one
 * result struct and the same verdict, report and watchdog machinery, so the
 * two runs are the same experiment and read the same way. See README.md.
 *
 * Interface (defined in bank.c unless marked ledger.c):
 *   bank_opts_t, bank_mode_t, bank_locks_t   the parsed command line
 *   bank_result_t                            what a run measured
 *   bank_mode_names, bank_locks_names        their names in reports
 *   bank_mix64        the SplitMix64 finalizer
 *   bank_plan         what transfer idx does: its accounts and amount
 *   bank_now_ns       nanoseconds on the monotonic clock
 *   bank_latency      sorts a run's latencies, sets p50 and p99
 *   bank_verdict_add  appends one failed check to a verdict
 *   bank_json_str     writes a JSON string literal
 *   bank_url_redact   a URL with any password replaced by ***
 *   bank_gate_*       the workers' start gate
 *   bank_watchdog_start, bank_watchdog_stop   --watchdog SEC, with a dump
 *                     callback (ordo's lock table, or the server's)
 *   ledger_is_url     ledger.c: does the URL name PostgreSQL
 *   ledger_main       ledger.c: runs the ledger and prints its report
 *   ledger_usage      ledger.c: the ledger's paragraph of the help
 */
#ifndef ORDO_CLI_BANK_H
#define ORDO_CLI_BANK_H

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
 * --locks, for PostgreSQL URLs only: rows (the ledger of ledger.c, where the
 * database's row locks guard real rows) or advisory (bank.c's run over
 * ordo_open(url), the postgres:// backend's advisory locks).
 */
typedef enum bank_locks_e {
  BANK_LOCKS_ROWS = 0,
  BANK_LOCKS_ADVISORY = 1
} bank_locks_t;

extern const char *const bank_locks_names[]; /* NULL-ended, by bank_locks_t */

/* Every account opens with this balance, in memory and in the ledger. */
#define BANK_OPENING_BALANCE 1000
#define BANK_MAX_AMOUNT 100

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

/* What a run measured; filled by bank_run or ledger.c, then printed. */
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

/* Writes s as a JSON string literal. */
void bank_json_str(FILE *f, const char *s);

/* Copies url into out (cap bytes) with any user:password@'s password as ***. */
void bank_url_redact(const char *url, char *out, size_t cap);

/* ---- The watchdog (README.md, "The watchdog") ---------------------------- */

/*
 * What the watchdog prints after its line when it fires: ordo's lock table
 * (bank.c) or the server's lock view (ledger.c). It runs on the watchdog's
 * thread while the main thread is blocked in a join that never returns, with
 * no lock of the bank held, and the process ends right after it.
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

/* ---- ledger.c: the bank on PostgreSQL rows --------------------------------
 */

/* postgres://, postgresql://, or postgres: followed by a libpq conninfo. */
int ledger_is_url(const char *url);

/*
 * ledger_main -- runs the ledger with the settled options o (one
 * configuration of bank_configs) and prints its report; returns the exit
 * status (README.md, "The PostgreSQL ledger").
 */
int ledger_main(const bank_opts_t *o);

/* The ledger's paragraph of `ordo bank --help`. */
void ledger_usage(FILE *f);

#endif /* ORDO_CLI_BANK_H */
