/*
 * pgbench.c -- the PostgreSQL ledger's ordered transfers as `ordo bank`
 * makes them, against pgbench running the same transaction as a script, on
 * the same cluster, database and tables with the same number of
 * connections; see README.md (rows pg_ledger_pgbench_*).
 *
 * The row's setup is ledger.c's (ledger_setup(): a throw-away cluster from
 * tests/integration/pg_fixture.sh in its wrapper mode, databases
 * ledger_ordered and ledger_naive, one calibration run of each side, which
 * also creates schema ordo_bank in each). Then it writes the pgbench script
 * into a temporary folder of its own and reads the cluster's
 * deadlock_timeout (SHOW deadlock_timeout).
 *
 *   ordo  `ordo bank --backend URL --accounts A --workers W --transfers N
 *         --json` on database ledger_ordered, through ledger_side_bank():
 *         N each way (2N in all) from the calibrated rate, as the
 *         pg_ledger_* rows do; the value is the JSON's transfers over its
 *         seconds
 *   peer  `pgbench -n -c W -j J -t T -M prepared -D n=0 -f SCRIPT URL` on
 *         the same database, with T = 2N / W transfers per connection (N
 *         rounded up to make that whole, on both sides), after the tables
 *         were reset as the ledger resets them; the value is pgbench's
 *         "tps = ... (without initial connection time)"; J (param
 *         threads) is W, one thread per connection as the ledger has one
 *         worker thread per connection, so that on a busy machine neither
 *         client gets a smaller share of the CPU for having fewer threads
 *
 * The script is the ledger's transaction (src/cli/bank_pg.c,
 * ledger_attempt()), in the ledger's two round trips, each one pipeline:
 *
 *   [BEGIN; SELECT id, balance FROM ordo_bank.accounts WHERE id =
 *   ANY(ARRAY[:a, :b]::int[]) ORDER BY id FOR UPDATE]
 *   [UPDATE from; UPDATE to; INSERT INTO ordo_bank.journal; COMMIT]
 *
 * with the accounts and the amount drawn as bank_plan() draws them (from
 * uniform, to uniform over the others, amount 1..100) but at random, not
 * from the transfer's index, which pgbench does not have. The UPDATEs
 * compute the balances in SQL (balance - :amount), where the ledger sends
 * the values it computed from the locked read: pgbench cannot keep two
 * rows of a result. The journal's unique xfer is client_id * 10^9 + a
 * counter of the connection's own (-D n=0, then \set n :n + 1).
 *
 * After each pgbench run the tables are checked: the accounts' total is
 * still A x 1000, the journal holds one row per transaction pgbench
 * counted (W x T, none failed), and every balance agrees with the journal.
 * Otherwise, or if pgbench fails, the run fails.
 *
 * Extras: transfers (what a run made: the JSON's transfers, pgbench's
 * processed transactions), naive_tps (ordo side: the naive ledger's rate
 * on the same cluster, from ledger_setup()'s calibration run of 20 or 200
 * transfers each way) and deadlock_timeout_ms (ordo side: the cluster's
 * deadlock_timeout, which paces the naive ledger).
 *
 * Interface:
 *   bench_pgbench_table   the rows (bench.c lists them after its own rows)
 */
#include "bench.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PGB_RUN_S 120.0  /* bound on one pgbench */
#define PGB_OUT_MAX 8192 /* captured stdout of one child */
#define PGB_ERR_MAX 4096 /* captured stderr of one child */
/* src/cli/bank_model.h: BANK_OPENING_BALANCE and BANK_MAX_AMOUNT. */
#define PGB_OPENING_BALANCE 1000
#define PGB_MAX_AMOUNT 100
#define PGB_XFER_STRIDE "1000000000" /* xfer = client_id * this + counter */

typedef struct pgb_state_s {
  void *ledger;       /* ledger_setup()'s: the cluster, calibration */
  char dir[PATH_MAX]; /* temporary folder: the script */
  char script[PATH_MAX + 16];
  double deadlock_timeout_ms;
} pgb_state_t;

/* ---- psql (ledger_psql, ledger.c) ------------------------------------------
 */

/* deadlock_timeout as SHOW prints it ("10ms", "1s", "1min", ...) in ms, or
 * -1. */
static double pgb_duration_ms(const char *text) {
  static const struct {
    const char *unit;
    double ms;
  } units[] = {{"us", 0.001},  {"ms", 1},        {"s", 1000},
               {"min", 60000}, {"h", 3600000.0}, {"d", 86400000.0}};
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || end == text)
    return -1;
  size_t ulen = strcspn(end, "\r\n");
  if (ulen == 0)
    return v * 1000; /* a bare number is in seconds */
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (strlen(units[i].unit) == ulen && strncmp(end, units[i].unit, ulen) == 0)
      return v * units[i].ms;
  return -1;
}

/* ---- The two sides -------------------------------------------------------
 */

/* N, the transfers each way of a run of `seconds` (ledger.c's, from the
 * ordered side's calibration), rounded up so that the 2N transfers split
 * evenly over the connections: both sides then make exactly 2N. */
static long pgb_transfers(const bench_row_t *row, const pgb_state_t *st,
                          double seconds) {
  long clients = (long)bench_param_int(row, "workers");
  long step = clients % 2 == 0 ? clients / 2 : clients;
  long n = ledger_side_transfers(st->ledger, 0, seconds);
  return (n + step - 1) / step * step;
}

static int pgb_run_ordo(const bench_row_t *row, void *state, double seconds,
                        double *out) {
  pgb_state_t *st = state;
  ledger_report_t rep;
  long n = pgb_transfers(row, st, seconds);
  if (ledger_side_bank(row, st->ledger, 0, n, &rep) != 0)
    return -1;
  *out = rep.transfers / rep.seconds;
  bench_extra(row, "transfers", rep.transfers);
  bench_extra(row, "naive_tps", ledger_side_rate(st->ledger, 1));
  bench_extra(row, "deadlock_timeout_ms", st->deadlock_timeout_ms);
  return 0;
}

/* The value after `label` on a line of text, as a number; -1 when absent. */
static double pgb_field(const char *text, const char *label) {
  const char *p = strstr(text, label);
  if (p == NULL)
    return -1;
  char *end;
  double v = strtod(p + strlen(label), &end);
  return end == p + strlen(label) ? -1 : v;
}

/* The ledger's reset (src/cli/bank_pg.c, ledger_reset()): the journal
 * emptied, the accounts back at their opening balance. */
static int pgb_reset(const bench_row_t *row, const char *url, long accounts) {
  char sql[512], out[256];
  snprintf(sql, sizeof sql,
           "BEGIN; SET LOCAL lock_timeout = '10s'; "
           "TRUNCATE ordo_bank.journal, ordo_bank.accounts RESTART IDENTITY; "
           "INSERT INTO ordo_bank.accounts (id, balance) "
           "SELECT g, %d FROM generate_series(0, %ld) g; COMMIT",
           PGB_OPENING_BALANCE, accounts - 1);
  return ledger_psql(row, url, sql, out, sizeof out);
}

/* After a run of `want` transfers: the total, the rows, and each balance
 * against the journal. 0, or -1 after reporting. */
static int pgb_check(const bench_row_t *row, const char *url, long accounts,
                     long long want) {
  char sql[512], out[256];
  long long total = -1, rows = -1, journal = -1, mismatched = -1;
  snprintf(sql, sizeof sql,
           "SELECT (SELECT sum(balance) FROM ordo_bank.accounts), "
           "(SELECT count(*) FROM ordo_bank.accounts), "
           "(SELECT count(*) FROM ordo_bank.journal), "
           "(SELECT count(*) FROM ordo_bank.accounts a WHERE a.balance <> "
           "%d - (SELECT coalesce(sum(amount), 0) FROM ordo_bank.journal j "
           "WHERE j.src = a.id) + (SELECT coalesce(sum(amount), 0) FROM "
           "ordo_bank.journal j WHERE j.dst = a.id))",
           PGB_OPENING_BALANCE);
  if (ledger_psql(row, url, sql, out, sizeof out) != 0)
    return -1;
  if (sscanf(out, "%lld|%lld|%lld|%lld", &total, &rows, &journal,
             &mismatched) != 4) {
    bench_error(row, "pgbench: the check's psql printed '%s'", out);
    return -1;
  }
  if (total != (long long)accounts * PGB_OPENING_BALANCE || rows != accounts ||
      journal != want || mismatched != 0) {
    bench_error(row,
                "pgbench: after the run the accounts hold %lld in %lld "
                "rows (not %lld in %ld), the journal %lld rows (not %lld), "
                "and %lld balances disagree with it",
                total, rows, (long long)accounts * PGB_OPENING_BALANCE,
                accounts, journal, want, mismatched);
    return -1;
  }
  return 0;
}

static int pgb_run_pgbench(const bench_row_t *row, void *state, double seconds,
                           double *out) {
  pgb_state_t *st = state;
  const char *url = ledger_side_url(st->ledger, 0);
  long accounts = (long)bench_param_int(row, "accounts");
  long clients = (long)bench_param_int(row, "workers");
  long per = 2 * pgb_transfers(row, st, seconds) / clients; /* -t */
  char c_arg[24], j_arg[24], t_arg[24], why[48];
  char err[PGB_ERR_MAX];
  char *text = malloc(PGB_OUT_MAX);
  int status = 0, rc = -1;

  if (text == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  if (pgb_reset(row, url, accounts) != 0)
    goto out;
  snprintf(c_arg, sizeof c_arg, "%ld", clients);
  snprintf(j_arg, sizeof j_arg, "%lld", bench_param_int(row, "threads"));
  snprintf(t_arg, sizeof t_arg, "%ld", per);
  char *argv[] = {"pgbench", "-n",       "-c",        c_arg,      "-j", j_arg,
                  "-t",      t_arg,      "-M",        "prepared", "-D", "n=0",
                  "-f",      st->script, (char *)url, NULL};
  if (ledger_exec(row, argv, PGB_RUN_S, text, PGB_OUT_MAX, err, sizeof err,
                  &status) != 0)
    goto out;
  long long want = (long long)clients * per;
  double processed = pgb_field(text, "number of transactions actually "
                                     "processed: ");
  double failed = pgb_field(text, "number of failed transactions: ");
  double tps = pgb_field(text, "tps = ");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      processed != (double)want || failed > 0 || !(tps > 0)) {
    bench_error(row,
                "pgbench ended with %s, %.0f of %lld transactions processed, "
                "%.0f failed%s",
                ledger_status_text(status, why, sizeof why), processed, want,
                failed,
                WIFEXITED(status) && WEXITSTATUS(status) == 127
                    ? "; is pgbench installed (postgresql-contrib)?"
                    : "");
    if (text[0] != '\0')
      fprintf(stderr, "--- its stdout ---\n%s---\n", text);
    if (err[0] != '\0')
      fprintf(stderr, "--- its stderr ---\n%s---\n", err);
    goto out;
  }
  if (pgb_check(row, url, accounts, want) != 0)
    goto out;
  *out = tps;
  bench_extra(row, "transfers", processed);
  rc = 0;
out:
  free(text);
  return rc;
}

/* ---- Setup and teardown ----------------------------------------------------
 */

/* Writes the script for `accounts` accounts to st->script. 0, or -1. */
static int pgb_write_script(const bench_row_t *row, pgb_state_t *st,
                            long accounts) {
  snprintf(st->script, sizeof st->script, "%s/transfer.sql", st->dir);
  FILE *f = fopen(st->script, "w");
  if (f == NULL) {
    bench_error(row, "cannot write %s: %s", st->script, strerror(errno));
    return -1;
  }
  fprintf(f,
          "\\set a random(0, %ld)\n"
          "\\set b random(0, %ld)\n"
          "\\set b CASE WHEN :b >= :a THEN :b + 1 ELSE :b END\n"
          "\\set amount random(1, %d)\n"
          "\\set n :n + 1\n"
          "\\set xfer :client_id * " PGB_XFER_STRIDE " + :n\n"
          "\\startpipeline\n"
          "BEGIN;\n"
          "SELECT id, balance FROM ordo_bank.accounts "
          "WHERE id = ANY(ARRAY[:a, :b]::int[]) ORDER BY id FOR UPDATE;\n"
          "\\endpipeline\n"
          "\\startpipeline\n"
          "UPDATE ordo_bank.accounts SET balance = balance - :amount::bigint "
          "WHERE id = :a::int;\n"
          "UPDATE ordo_bank.accounts SET balance = balance + :amount::bigint "
          "WHERE id = :b::int;\n"
          "INSERT INTO ordo_bank.journal (src, dst, amount, xfer) "
          "VALUES (:a::int, :b::int, :amount::bigint, :xfer::bigint);\n"
          "COMMIT;\n"
          "\\endpipeline\n",
          accounts - 1, accounts - 2, PGB_MAX_AMOUNT);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    bench_error(row, "cannot write %s: %s", st->script, strerror(errno));
    return -1;
  }
  return 0;
}

static void pgb_teardown(const bench_row_t *row, void *state) {
  pgb_state_t *st = state;
  if (st == NULL)
    return;
  if (st->ledger != NULL)
    ledger_teardown(row, st->ledger);
  bench_rm_tree(st->dir);
  free(st);
}

static int pgb_setup(const bench_row_t *row, void **state) {
  const char *tmp = getenv("TMPDIR");
  long accounts = (long)bench_param_int(row, "accounts");
  char out[256];
  pgb_state_t *st = calloc(1, sizeof *st);
  if (st == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  if (accounts < 2) {
    bench_error(row, "accounts must be at least 2");
    goto fail;
  }
  if (ledger_setup(row, &st->ledger) != 0) {
    st->ledger = NULL; /* it tore itself down */
    goto fail;
  }
  snprintf(st->dir, sizeof st->dir, "%s/ordo_bench.XXXXXX",
           tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
  if (mkdtemp(st->dir) == NULL) {
    bench_error(row, "mkdtemp %s: %s", st->dir, strerror(errno));
    st->dir[0] = '\0';
    goto fail;
  }
  if (pgb_write_script(row, st, accounts) != 0 ||
      ledger_psql(row, ledger_side_url(st->ledger, 0), "SHOW deadlock_timeout",
                  out, sizeof out) != 0)
    goto fail;
  st->deadlock_timeout_ms = pgb_duration_ms(out);
  if (st->deadlock_timeout_ms < 0) {
    bench_error(row, "SHOW deadlock_timeout printed '%s'", out);
    goto fail;
  }
  *state = st;
  return 0;
fail:
  pgb_teardown(row, st);
  return -1;
}

/* ---- The rows --------------------------------------------------------------
 */

#define PGBENCH_ROW(id_, accounts)                                             \
  {                                                                            \
    .id = id_,                                                                 \
    .title = "PostgreSQL ledger, " #accounts " accounts, 8 connections, "      \
             "ordo bank vs pgbench",                                           \
    .metric = "transfers/s", .higher_is_better = 1,                            \
    .peer_name = "pgbench, the same transaction", .target = 0.9,               \
    .params = {{"accounts", accounts, NULL},                                   \
               {"workers", 8, NULL},                                           \
               {"threads", 8, NULL}},                                          \
    .setup = pgb_setup, .teardown = pgb_teardown, .run_ordo = pgb_run_ordo,    \
    .run_peer = pgb_run_pgbench,                                               \
    .extras = {"transfers", "naive_tps", "deadlock_timeout_ms"},               \
    .fixed_work = 1,                                                           \
  }

static const bench_row_t pgbench_rows[] = {
    PGBENCH_ROW("pg_ledger_pgbench_a2", 2),
    PGBENCH_ROW("pg_ledger_pgbench_a64", 64),
};

const bench_table_t bench_pgbench_table = {
    pgbench_rows, sizeof pgbench_rows / sizeof pgbench_rows[0]};
