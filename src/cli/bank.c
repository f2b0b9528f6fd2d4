/*
 * bank.c -- the command `ordo bank`, the bank check of DESIGN.md §10. This
 * file is the command only: the flag table (parsed by flags.c), the help,
 * the settling of the options into the runs to make (bank_configs), and
 * the choice of a driver by the URL (bank_drivers[], bank_driver_for). The
 * check itself is the model's (bank_model.c), the runs are the drivers'
 * (bank_ordo.c over the ordo API, bank_pg.c on PostgreSQL rows), the report
 * is bank_report.c's and the --graph file bank_graph.c's. See README.md for
 * the design, the invariants (numbered there and cited here as "invariant
 * N") and "Adding a driver".
 *
 * Interface:
 *   cli_bank_main    runs `ordo bank [options]`, returns the exit status
 *   cli_bank_usage   prints the help of `ordo bank`, every flag
 */
#include "cli/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/bank_graph.h"
#include "cli/bank_model.h"
#include "cli/bank_ordo.h"
#include "cli/bank_pg.h"
#include "cli/bank_report.h"
#include "cli/flags.h"
#include "ordo.h"

/* ---- Drivers (README.md, "Adding a driver") -------------------------------
 */

/*
 * The drivers, asked in this order whether they run a configuration; the
 * first that claims it runs it. The ordo driver claims every URL (ordo_open
 * tells a bad one), so it comes last.
 */
static const bank_driver_t *const bank_drivers[] = {&bank_driver_pg,
                                                    &bank_driver_ordo};
#define BANK_NDRIVERS (sizeof(bank_drivers) / sizeof(bank_drivers[0]))

static const bank_driver_t *bank_driver_for(const bank_opts_t *o) {
  for (size_t i = 0; i + 1 < BANK_NDRIVERS; i++)
    if (bank_drivers[i]->claims(o))
      return bank_drivers[i];
  return bank_drivers[BANK_NDRIVERS - 1];
}

/* ---- Options of ordo bank -------------------------------------------------
 */

/* bank_mode_t, bank_locks_t and their names are the model's (bank_model.h),
 * and so are --detect's, bank_detect_names. */

#define BANK_DEFAULT_TIMEOUT_MS 5000L
/* The lock timeout of --compare's detect-off run, unless --lock-timeout. */
#define BANK_COMPARE_OFF_TIMEOUT_MS 50L

/* bank_opts_t is in bank_model.h. */

static void bank_opts_init(bank_opts_t *o) {
  o->url = "mem://";
  o->accounts = 2;
  o->transfers = 1000;
  o->workers = 8;
  o->lock_timeout_ms = -1;
  o->deadlock_timeout_ms = -1;
  o->attempts = -1;
  o->watchdog_s = 0;
  o->naive = 0;
  o->detect = ORDO_DETECT_IMMEDIATE;
  o->compare = 0;
  o->json = 0;
  o->locks = -1;
  o->graph = NULL;
  o->mode = BANK_MODE_ORDERED;
}

#define BANK_MAX_ACCOUNTS 1000000L
#define BANK_MAX_TRANSFERS 10000000L
#define BANK_MAX_TIMEOUT_MS 3600000L
#define BANK_MAX_WATCHDOG_S 86400L
#define BANK_MAX_ATTEMPTS 1000000L
/* ordo_retry's default, for the ordered mode; the naive mode retries until
 * a transfer is done, since deadlocks are what it is for. */
#define BANK_DEFAULT_ATTEMPTS 10L

static const cli_flag_t bank_flag_rows[] = {
    {"--backend", NULL, "URL", FLAG_STR, offsetof(bank_opts_t, url), 0, 0, NULL,
     "where the locks live (default mem://); accepted forms: " CLI_URL_FORMS
     "; options in the URL's query (mem://?detect=off&victim=oldest) win "
     "over the flags below, and the report shows a detect= of the URL; a "
     "PostgreSQL URL runs the ledger on real rows (see below)"},
    {"--locks", NULL, "KIND", FLAG_ENUM, offsetof(bank_opts_t, locks), 0, 0,
     bank_locks_names,
     "only with a PostgreSQL URL: rows (the default: the ledger, each "
     "transfer one transaction that locks its two rows of "
     "ordo_bank.accounts with SELECT ... FOR UPDATE, PostgreSQL detecting "
     "the deadlocks; the run resets schema ordo_bank) or advisory (the bank "
     "over ordo_open(URL), the postgres:// backend's advisory locks)"},
    {"--accounts", NULL, "N", FLAG_NUM, offsetof(bank_opts_t, accounts), 2,
     BANK_MAX_ACCOUNTS, NULL,
     "accounts in the ledger, 2..1000000 (default 2); with 2, transfers go "
     "both ways between them, with more, between random distinct pairs"},
    {"--transfers", NULL, "N", FLAG_NUM, offsetof(bank_opts_t, transfers), 1,
     BANK_MAX_TRANSFERS, NULL,
     "transfers each way, 1..10000000 (default 1000): the run makes 2 x N"},
    {"--workers", NULL, "N", FLAG_NUM, offsetof(bank_opts_t, workers), 1,
     BANK_MAX_WORKERS, NULL, "worker threads, 1..1024 (default 8)"},
    {"--lock-timeout", NULL, "MS", FLAG_NUM,
     offsetof(bank_opts_t, lock_timeout_ms), 0, BANK_MAX_TIMEOUT_MS, NULL,
     "bound on each lock call in milliseconds, 0..3600000 (default 5000, "
     "and 50 in the detect-off run of --compare; 0 tries once)"},
    {"--attempts", NULL, "N", FLAG_NUM, offsetof(bank_opts_t, attempts), 0,
     BANK_MAX_ATTEMPTS, NULL,
     "attempts per transfer, 0..1000000, 0 meaning until it succeeds "
     "(default 10, and 0 with --naive, where a victim may lose several "
     "times in a row); between attempts ordo_retry releases everything and "
     "backs off"},
    {"--naive", NULL, NULL, FLAG_BOOL, offsetof(bank_opts_t, naive), 0, 0, NULL,
     "take the two accounts one at a time with ordo_lock, from then to, "
     "yielding the processor in between, instead of both in one "
     "ordo_lock_all: crossing transfers deadlock, detection (or the lock "
     "timeout) breaks the cycles and the victims retry; the run may then "
     "count deadlocks and still pass"},
    {"--detect", NULL, "MODE", FLAG_ENUM, offsetof(bank_opts_t, detect), 0, 0,
     bank_detect_names,
     "deadlock detection: immediate (the default: search when a txn blocks "
     "while holding keys), delayed (search after --deadlock-timeout of "
     "waiting), or off (no search and no background sweep: only lock "
     "timeouts end a deadlock)"},
    {"--deadlock-timeout", NULL, "MS", FLAG_NUM,
     offsetof(bank_opts_t, deadlock_timeout_ms), 0, BANK_MAX_TIMEOUT_MS, NULL,
     "with --detect delayed, how long a txn waits before its search runs, "
     "0..3600000 ms (default 5 here, where every naive deadlock lasts that "
     "long; the engine's own default is 1000)"},
    {"--compare", NULL, NULL, FLAG_BOOL, offsetof(bank_opts_t, compare), 0, 0,
     NULL,
     "run three configurations in turn with the other flags: ordered; naive "
     "with detection (immediate); naive with detection off, ended by lock "
     "timeouts (--lock-timeout, or 50 ms); print one table (or, with "
     "--json, {\"compare\": [three results]}); exit 0 only if all three "
     "pass; cannot be combined with --naive or --detect. The third run "
     "pays a whole lock timeout per deadlock, and naive deadlocks feed "
     "each other: on 2 cores it takes about a minute with the defaults, "
     "and 3 to 10 s with --transfers 100"},
    {"--graph", NULL, "FILE", FLAG_STR, offsetof(bank_opts_t, graph), 0, 0,
     NULL,
     "write the cycle of the run's first deadlock, from the engine's "
     "deadlock record, to FILE as a Graphviz DOT digraph (edges labelled "
     "with key and mode, dashed when the waiter is only queued behind the "
     "other, the victim in red), followed by the live wait-for graph of "
     "that moment as DOT comments; an empty digraph when no deadlock "
     "happened. Render with: dot -Tpng FILE -o cycle.png"},
    {"--watchdog", NULL, "SEC", FLAG_NUM, offsetof(bank_opts_t, watchdog_s), 0,
     BANK_MAX_WATCHDOG_S, NULL,
     "when a run has not finished SEC seconds after its transfers start, "
     "print the lock table (holders and queues) on stderr and exit with "
     "status 3; 0..86400 (default 0: no watchdog); with --compare each of "
     "the three runs has its own SEC"},
    {"--json", NULL, NULL, FLAG_BOOL, offsetof(bank_opts_t, json), 0, 0, NULL,
     "print one JSON object on stdout instead of the summary"},
    {"--help", "-h", NULL, FLAG_HELP, 0, 0, 0, NULL,
     "print this help and exit"},
};

static const cli_flags_t bank_flags = {
    "bank", bank_flag_rows, sizeof(bank_flag_rows) / sizeof(bank_flag_rows[0])};

void cli_bank_usage(FILE *f) {
  fputs("usage: ordo bank [--backend URL] [--locks rows|advisory]\n"
        "                 [--accounts N] [--transfers N]\n"
        "                 [--workers N] [--lock-timeout MS] [--attempts N]\n"
        "                 [--naive] [--detect immediate|delayed|off]\n"
        "                 [--deadlock-timeout MS] [--compare] [--graph FILE]\n"
        "                 [--watchdog SEC] [--json]\n"
        "\n"
        "The bank check: workers move random amounts between accounts at\n"
        "once, each transfer locking both accounts (X mode) inside\n"
        "ordo_retry, which backs off and retries time-outs and deadlock\n"
        "victims. By default a transfer takes both keys with one\n"
        "ordo_lock_all, which cannot deadlock; with --naive it takes them one\n"
        "at a time, which does. The run passes when the total balance is\n"
        "unchanged, every transfer completed exactly once, no two workers\n"
        "were inside one account at once and, in the ordered mode only, the\n"
        "engine counted no deadlock. A progress bar is drawn on stderr when\n"
        "it is a terminal.\n"
        "\n"
        "Options:\n",
        f);
  cli_flags_usage(f, &bank_flags);
  fputs("\n"
        "Output: mode and detection, transfers done, seconds, transfers/s,\n"
        "p50/p99 latency per transfer (retries and backoff included),\n"
        "retries, timeouts, deadlocks (the engine's count), victims (lock\n"
        "calls that returned EDEADLK), the total before and after, and a\n"
        "verdict line. --json prints the same as one object.\n"
        "Exit status: 0 the check passed, 1 it failed (or the backend could\n"
        "not be used), 2 bad usage, 3 the watchdog fired: the run had not\n"
        "finished within --watchdog SEC seconds; stderr then holds one\n"
        "'ordo bank: watchdog: ...' line and the lock table, stdout nothing.\n"
        "\n",
        f);
  /* A driver with a paragraph of its own says there what it does apart. */
  for (size_t i = 0; i < BANK_NDRIVERS; i++)
    if (bank_drivers[i]->usage != NULL)
      bank_drivers[i]->usage(f);
  fputs("\n"
        "Examples:\n"
        "  ordo bank --naive                  deadlocks, detected and retried\n"
        "  ordo bank --naive --detect off --lock-timeout 20\n"
        "                                     the same, ended by time-outs\n"
        "  ordo bank --compare                the three side by side\n"
        "  ordo bank --naive --graph cycle.dot && dot -Tpng cycle.dot -o "
        "c.png\n"
        "  ordo bank --backend postgres://me:pw@localhost/test --naive\n"
        "                                     PostgreSQL's own deadlocks\n",
        f);
}

/*
 * bank_parse -- fills o from argv and settles what depends on more than one
 * flag. Returns PARSE_OK, PARSE_HELP or PARSE_ERR (after its one line).
 */
static int bank_parse(int argc, char **argv, bank_opts_t *o) {
  int rc = cli_flags_parse(&bank_flags, argc, argv, o);
  if (rc != PARSE_OK)
    return rc;
  /* --compare chooses each run's mode and detection itself. Detect is
   * "given" when it is not the default; --detect immediate is harmless. */
  if (o->compare && (o->naive || o->detect != ORDO_DETECT_IMMEDIATE)) {
    fprintf(stderr,
            "ordo bank: %s cannot be combined with --compare, which runs "
            "its own three modes (ordered; naive, detect immediate; naive, "
            "detect off): drop %s\n",
            o->naive ? "--naive" : "--detect",
            o->naive ? "--naive" : "--detect");
    return PARSE_ERR;
  }
  o->mode = o->naive ? BANK_MODE_NAIVE : BANK_MODE_ORDERED;
  /* --locks chooses between two ways of using PostgreSQL; any other place
   * has only one, so the flag there is a mistake worth naming. */
  if (!bank_pg_is_url(o->url) && o->locks >= 0) {
    char shown[512];
    bank_url_redact(o->url, shown, sizeof(shown));
    fprintf(stderr,
            "ordo bank: --locks applies only to PostgreSQL backends "
            "(postgres://, postgresql://, postgres:CONNINFO), not '%s': "
            "drop --locks\n",
            shown);
    return PARSE_ERR;
  }
  /* The driver that will run o refuses what it cannot honour. */
  const bank_driver_t *d = bank_driver_for(o);
  if (d->check != NULL && d->check(o) != CLI_EXIT_OK)
    return PARSE_ERR;
  return PARSE_OK;
}

/* The three configurations of --compare, in the order they run. */
#define BANK_NCOMPARE 3

static const char *const bank_compare_labels[BANK_NCOMPARE] = {
    "bank ordered", "bank naive", "bank naive/off"};

/*
 * url_detect -- the detection a "detect=NAME" option in url's query asks for,
 * or -1 when there is none. ordo_open applies the query over the options the
 * flags built, so this is what the run really uses and what the report must
 * say; a bad NAME is left for ordo_open to refuse.
 */
static int url_detect(const char *url) {
  const char *q = strchr(url, '?');
  int found = -1;
  while (q != NULL) {
    q++;
    size_t len = strcspn(q, "&");
    if (len > 7 && strncmp(q, "detect=", 7) == 0) {
      for (int i = 0; bank_detect_names[i] != NULL; i++)
        if (strlen(bank_detect_names[i]) == len - 7 &&
            strncmp(q + 7, bank_detect_names[i], len - 7) == 0)
          found = i;
    }
    q = q[len] == '&' ? q + len : NULL;
  }
  return found;
}

/* Settles the attempts per transfer of a configuration whose mode is set. */
static void bank_attempts(bank_opts_t *c) {
  if (c->attempts < 0)
    c->attempts = c->mode == BANK_MODE_NAIVE ? 0 : BANK_DEFAULT_ATTEMPTS;
}

/*
 * bank_configs -- the runs the options ask for, each a full copy of o with
 * its mode, detection, lock timeout and attempts settled: one, or the three
 * of --compare. A detect= in the URL's query wins over the flags (and over
 * --compare's choices), as it does inside ordo_open. Returns how many.
 */
static size_t bank_configs(const bank_opts_t *o,
                           bank_opts_t cfg[BANK_NCOMPARE]) {
  long given = o->lock_timeout_ms;
  int forced = url_detect(o->url);
  for (size_t i = 0; i < BANK_NCOMPARE; i++) {
    cfg[i] = *o;
    cfg[i].lock_timeout_ms = given >= 0 ? given : BANK_DEFAULT_TIMEOUT_MS;
  }
  if (!o->compare) {
    if (forced >= 0)
      cfg[0].detect = forced;
    bank_attempts(&cfg[0]);
    return 1;
  }
  cfg[0].mode = BANK_MODE_ORDERED;
  cfg[0].detect = ORDO_DETECT_IMMEDIATE;
  cfg[1].mode = BANK_MODE_NAIVE;
  cfg[1].detect = ORDO_DETECT_IMMEDIATE;
  cfg[2].mode = BANK_MODE_NAIVE;
  cfg[2].detect = ORDO_DETECT_OFF;
  cfg[2].lock_timeout_ms = given >= 0 ? given : BANK_COMPARE_OFF_TIMEOUT_MS;
  for (size_t i = 0; i < BANK_NCOMPARE; i++) {
    if (forced >= 0)
      cfg[i].detect = forced;
    bank_attempts(&cfg[i]);
  }
  return BANK_NCOMPARE;
}

/*
 * bank_once -- one whole run of the configuration o by driver d: open,
 * run, verify, close. Fills r and returns the first status that is not
 * CLI_EXIT_OK, each having printed its line.
 */
static int bank_once(const bank_driver_t *d, const bank_opts_t *o,
                     bank_graph_t *g, const char *label, bank_result_t *r) {
  bank_place_t *p;
  int status = d->open(o, g, &p);
  if (status != CLI_EXIT_OK)
    return status;
  status = d->run(p, label, r);
  if (status == CLI_EXIT_OK)
    status = d->verify(p, r);
  d->close(p);
  return status;
}

int cli_bank_main(int argc, char **argv) {
  bank_opts_t o;
  bank_opts_init(&o);
  switch (bank_parse(argc, argv, &o)) {
  case PARSE_HELP:
    cli_bank_usage(stdout);
    return CLI_EXIT_OK;
  case PARSE_ERR:
    return CLI_EXIT_USAGE;
  default:
    break;
  }

  bank_opts_t cfg[BANK_NCOMPARE];
  size_t n = bank_configs(&o, cfg);
  /* A PostgreSQL URL runs the ledger on its rows unless --locks advisory
   * asks for ordo's own locks over the postgres:// backend (bank_parse has
   * had the driver refuse the flags it cannot honour, --compare among
   * them for the ledger). */
  const bank_driver_t *d = bank_driver_for(&o);
  bank_graph_t graph;
  bank_graph_t *g = NULL;
  if (o.graph != NULL) {
    if (bank_graph_open(&graph, o.graph) != CLI_EXIT_OK)
      return CLI_EXIT_FAIL;
    g = &graph;
  }
  bank_result_t r[BANK_NCOMPARE];
  memset(r, 0, sizeof(r));
  int status = CLI_EXIT_OK;
  for (size_t i = 0; i < n && status == CLI_EXIT_OK; i++)
    status = bank_once(d, &cfg[i], g, n == 1 ? "bank" : bank_compare_labels[i],
                       &r[i]);
  if (g != NULL) {
    int gs = bank_graph_close(g);
    if (status == CLI_EXIT_OK)
      status = gs;
  }
  if (status == CLI_EXIT_OK) {
    if (n == 1)
      bank_report(&cfg[0], &r[0], g, d->graphs);
    else
      bank_report_compare(cfg, r, n, g);
    if (fflush(stdout) != 0) {
      fprintf(stderr, "ordo bank: cannot write the report: %s\n",
              strerror(errno));
      status = CLI_EXIT_FAIL;
    }
  }
  int ok = 1;
  for (size_t i = 0; i < n; i++) {
    ok = ok && r[i].ok;
    free(r[i].backend);
  }
  if (status != CLI_EXIT_OK)
    return status;
  return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
