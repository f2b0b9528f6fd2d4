/*
 * cli.h -- declarations shared by the files of the `ordo` command: the exit
 * statuses, the subcommand entry points, and the progress bar. See README.md.
 *
 * Only include/ordo.h of the library is used here; the command is a client of
 * the public API like any other program. (src/ordo_tsa.h, the lock
 * annotations, is a header of macros and inline pthread wrappers: no
 * library code.)
 */
#ifndef ORDO_CLI_H
#define ORDO_CLI_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "ordo_tsa.h"

/*
 * Exit statuses, the same for every subcommand but `ordo lock` (README.md,
 * invariant 1): 0 when the command did what it checks, 1 when the check
 * failed or the backend could not be used, 2 when the command line was
 * wrong, 3 when a watchdog (`ordo bank --watchdog SEC`) found the run still
 * going after SEC seconds and printed the lock table. `ordo lock` exits
 * with its command's status, so its own are those of sysexits.h: 64
 * (EX_USAGE), 69 (EX_UNAVAILABLE), 75 (EX_TEMPFAIL).
 */
enum {
  CLI_EXIT_OK = 0,
  CLI_EXIT_FAIL = 1,
  CLI_EXIT_USAGE = 2,
  CLI_EXIT_WATCHDOG = 3
};

/*
 * The backend URL forms this build accepts, quoted in usage errors and help.
 * Grow it as backends land in src/backend.
 */
#define CLI_URL_FORMS                                                          \
  "mem://[?options], ordod://[:password@]host[:port][?options], "              \
  "ordod://...?tls=1&tls_ca=FILE (TLS, to ordod's TLS port; also "             \
  "tls_cert=FILE, tls_key=FILE, tls_sni=NAME), "                               \
  "ordod://[:password@]/path/to/socket[?options], "                            \
  "redis://[:password@]host[:port][/db][?options], "                           \
  "rediss://[:password@]host[:port][/db][?options] (TLS; the same tls_* "      \
  "options), "                                                                 \
  "redis://[:password@]/path/to/socket[?options], "                            \
  "redlock://host:port,host:port,...[?options] (TLS: tls=1 and tls_*), "       \
  "redis-cluster://host:port[,host:port...][?options] (seed nodes), "          \
  "redis-sentinel://host:port[,host:port...]/master-name[?options], "          \
  "etcd://host:port[,host:port...][?options], "                                \
  "postgres://[user[:password]@]host[:port]/db[?options] (or "                 \
  "postgresql://), postgres:CONNINFO (a libpq conninfo string: "               \
  "postgres:host=H port=P dbname=D user=U)"

/*
 * A subcommand: main.c keeps a table of these. run() gets argv with argv[0]
 * being the subcommand's own name and returns an exit status; usage() prints
 * the full help (every flag) to f.
 */
typedef struct cli_cmd_s {
  const char *name;
  const char *summary; /* one line for `ordo --help` */
  int (*run)(int argc, char **argv);
  void (*usage)(FILE *f);
} cli_cmd_t;

/* bank.c: `ordo bank`; the bank's model, drivers and report are bank_*.c
 * (README.md, "Adding a driver") */
int cli_bank_main(int argc, char **argv);
void cli_bank_usage(FILE *f);
/* graph.c: `ordo graph` */
int cli_graph_main(int argc, char **argv);
void cli_graph_usage(FILE *f);

/* lock.c: `ordo lock`, a command run while keys are held */
int cli_lock_main(int argc, char **argv);
void cli_lock_usage(FILE *f);

/* ---- progress.c ---------------------------------------------------------- */

/* Returns how much work is done so far; called from the progress thread. */
typedef uint64_t (*cli_progress_read_cb)(void *arg);

/*
 * A progress bar on stderr, redrawn by its own thread at most 10 times a
 * second, and only when stderr is a terminal. The workers it reports on never
 * touch it: the thread polls read(arg), so the bar costs them nothing.
 */
typedef struct cli_progress_s {
  /* public, read-only after cli_progress_start */
  const char *label;
  uint64_t total;
  cli_progress_read_cb read;
  void *arg;
  /* private */
  int active; /* a thread was started and must be joined */
  pthread_t thread;
  struct timespec t0;
  /* mu guards stop; cv wakes the thread early when stop is set. */
  ordo__mutex mu;
  pthread_cond_t cv;
  int stop ORDO_GUARDED_BY(mu);
} cli_progress_t;

/*
 * Starts the bar when stderr is a terminal; otherwise (or if the thread cannot
 * be started) does nothing, since a bar is never worth failing a run for.
 */
void cli_progress_start(cli_progress_t *p, const char *label, uint64_t total,
                        cli_progress_read_cb read, void *arg);
/* Stops and joins the thread and erases the bar; safe if it never started. */
void cli_progress_stop(cli_progress_t *p);

/* Seconds on the monotonic clock; the CLI's one time source. */
double cli_now(void);

#endif /* ORDO_CLI_H */
