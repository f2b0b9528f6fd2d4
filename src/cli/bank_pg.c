/*
 * bank_pg.c -- the driver of `ordo bank --backend postgres://...`: the bank
 * check of DESIGN.md §10 on real rows. The accounts are rows of
 * ordo_bank.accounts, each transfer is one transaction on one of --workers
 * connections that locks its two rows with SELECT ... FOR UPDATE, moves the
 * money and writes one row of ordo_bank.journal, and PostgreSQL's own row
 * locks, deadlock detector and counters are what the run checks. The plan
 * of transfers, the options, the result, the checks both drivers make and
 * the watchdog are the model's (bank_model.h), and the report is
 * bank_report.c's, so both drivers run the same experiment and read the
 * same way. See README.md, "The PostgreSQL ledger", for the design and its
 * invariants (cited here as "ledger invariant N").
 *
 * Interface (bank_pg.h):
 *   bank_driver_pg   the driver (bank_driver_t): claims a PostgreSQL URL
 *                    unless --locks advisory; open, run, verify, close
 *   bank_pg_is_url   does a --backend URL name PostgreSQL
 *
 * Inside, running and reporting are apart: the driver fills a
 * bank_result_t (and its ledger_result_t, what only the ledger counts) and
 * prints nothing but errors. libpq is used directly: one PGconn per worker
 * thread (libpq connections are not shared between threads), and one more,
 * the control connection, for the schema, the counters, the checks and the
 * watchdog's view of pg_locks.
 */
#include "cli/bank_pg.h"

#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ordo.h"

/* ---- URLs and connections -------------------------------------------------
 */

/*
 * How long one connection attempt may take (libpq's connect_timeout, unless
 * the URL sets its own): a server that is down, or a host that drops
 * packets, fails within this instead of hanging the command.
 */
#define LEDGER_CONNECT_TIMEOUT_S "5"
/* How long the run waits for its worker backends to exit (ledger inv. 6). */
#define LEDGER_BACKENDS_GONE_S 10.0
/* The reset's bound on waiting for the tables (another run may hold them). */
#define LEDGER_RESET_LOCK_TIMEOUT "10s"
/* The watchdog's bound on its one query of pg_locks. */
#define LEDGER_DUMP_TIMEOUT_MS 5000

/* The PostgreSQL part of CLI_URL_FORMS, for the ledger's error lines. */
#define LEDGER_URL_FORMS                                                       \
  "postgres://[user[:password]@]host[:port]/db[?options], "                    \
  "postgresql://[user[:password]@]host[:port]/db[?options], "                  \
  "postgres:CONNINFO (postgres:host=H port=P dbname=D user=U password=W)"

/* SQLSTATEs the ledger retries: the transaction was rolled back whole. */
#define SQLSTATE_DEADLOCK "40P01"      /* deadlock_detected */
#define SQLSTATE_SERIALIZATION "40001" /* serialization_failure */
#define SQLSTATE_LOCK_TIMEOUT "55P03"  /* lock_not_available */

int bank_pg_is_url(const char *url) {
  return strncmp(url, "postgres://", 11) == 0 ||
         strncmp(url, "postgresql://", 13) == 0 ||
         strncmp(url, "postgres:", 9) == 0;
}

/*
 * ledger_conninfo -- what libpq is given for url: the URL itself (libpq
 * reads postgres:// and postgresql:// URIs), or, for postgres:CONNINFO, the
 * conninfo string after the prefix.
 */
static const char *ledger_conninfo(const char *url) {
  if (strncmp(url, "postgres:", 9) == 0 && strncmp(url + 9, "//", 2) != 0)
    return url + 9;
  return url;
}

/*
 * ledger_redact -- url for reports and error lines, with every password
 * shown as ***: the user:password@ of a URI (bank_url_redact), and any
 * password=VALUE, in a URI's query or a conninfo string, where VALUE runs
 * to the next '&' or blank, or is a quoted 'string' with \' escapes.
 */
static void ledger_redact(const char *url, char *out, size_t cap) {
  char tmp[1024];
  bank_url_redact(url, tmp, sizeof(tmp));
  size_t o = 0;
  const char *p = tmp;
  while (*p != '\0' && o + 1 < cap) {
    int at_start = p == tmp || p[-1] == ' ' || p[-1] == '\t' || p[-1] == '?' ||
                   p[-1] == '&' || p[-1] == ':';
    if (at_start && strncmp(p, "password", 8) == 0) {
      const char *v = p + 8;
      while (*v == ' ' || *v == '\t')
        v++;
      if (*v == '=') {
        v++;
        while (*v == ' ' || *v == '\t')
          v++;
        if (*v == '\'') {
          for (v++; *v != '\0' && *v != '\''; v++)
            if (*v == '\\' && v[1] != '\0')
              v++;
          if (*v == '\'')
            v++;
        } else {
          v += strcspn(v, "& \t");
        }
        o += (size_t)snprintf(out + o, cap - o, "password=***");
        if (o >= cap)
          o = cap - 1;
        p = v;
        continue;
      }
    }
    out[o++] = *p++;
  }
  out[o < cap ? o : cap - 1] = '\0';
}

/* What the URL names, for error lines: from PQconninfoParse, then libpq's
 * environment defaults. Empty strings when unknown. */
typedef struct ledger_where_s {
  char host[256]; /* "127.0.0.1", or "socket /path" */
  char port[16];
  char dbname[128];
  char user[128];
  int has_timeout; /* the URL gives connect_timeout */
} ledger_where_t;

/* Copies a possibly NULL string, falling back to the environment. */
static void where_set(char *dst, size_t cap, const char *val, const char *env,
                      const char *dflt) {
  const char *e = env ? getenv(env) : NULL;
  snprintf(dst, cap, "%s", val && *val ? val : e && *e ? e : dflt ? dflt : "");
}

/*
 * ledger_parse -- checks that libpq can read conninfo and fills w from it.
 * Returns 0, or -1 after copying libpq's reason into err.
 */
static int ledger_parse(const char *conninfo, ledger_where_t *w, char *err,
                        size_t errcap) {
  memset(w, 0, sizeof(*w));
  char *msg = NULL;
  PQconninfoOption *opts = PQconninfoParse(conninfo, &msg);
  if (opts == NULL) {
    snprintf(err, errcap, "%s", msg ? msg : "out of memory");
    err[strcspn(err, "\n")] = '\0';
    if (msg)
      PQfreemem(msg);
    return -1;
  }
  const char *host = NULL, *hostaddr = NULL, *port = NULL, *db = NULL,
             *user = NULL;
  for (PQconninfoOption *o = opts; o->keyword != NULL; o++) {
    if (o->val == NULL)
      continue;
    if (strcmp(o->keyword, "host") == 0)
      host = o->val;
    else if (strcmp(o->keyword, "hostaddr") == 0)
      hostaddr = o->val;
    else if (strcmp(o->keyword, "port") == 0)
      port = o->val;
    else if (strcmp(o->keyword, "dbname") == 0)
      db = o->val;
    else if (strcmp(o->keyword, "user") == 0)
      user = o->val;
    else if (strcmp(o->keyword, "connect_timeout") == 0 && *o->val)
      w->has_timeout = 1;
  }
  char h[240];
  where_set(h, sizeof(h), host && *host ? host : hostaddr, "PGHOST",
            "the local socket");
  if (h[0] == '/')
    snprintf(w->host, sizeof(w->host), "the socket in %s", h);
  else
    snprintf(w->host, sizeof(w->host), "%s", h);
  where_set(w->port, sizeof(w->port), port, "PGPORT", "5432");
  const char *login = getenv("USER");
  where_set(w->user, sizeof(w->user), user, "PGUSER", login ? login : "");
  where_set(w->dbname, sizeof(w->dbname), db, "PGDATABASE", w->user);
  PQconninfoFree(opts);
  return 0;
}

/*
 * ledger_connect -- opens one connection to conninfo with our
 * application_name (which identifies the run's backends in
 * pg_stat_activity, ledger invariant 6) and, unless the URL has one, a
 * connect_timeout, so that nothing hangs. dbname comes first so that the
 * keywords after it override what the expanded URL says.
 */
static PGconn *ledger_connect(const char *conninfo, const ledger_where_t *w,
                              const char *appname) {
  const char *kw[4] = {"dbname", "application_name", NULL, NULL};
  const char *val[4] = {conninfo, appname, NULL, NULL};
  if (!w->has_timeout) {
    kw[2] = "connect_timeout";
    val[2] = LEDGER_CONNECT_TIMEOUT_S;
  }
  return PQconnectdbParams(kw, val, 1);
}

/*
 * conn_reason -- libpq's message reduced to one line: the first line, after
 * any "connection to server at ... failed: " and the severity, so the
 * error line keeps the server's own words ("database "x" does not exist").
 */
static void conn_reason(const char *msg, char *out, size_t cap) {
  const char *p = msg ? msg : "";
  const char *f = strstr(p, "failed: ");
  size_t first = strcspn(p, "\n");
  if (f != NULL && (size_t)(f - p) < first)
    p = f + 8;
  if (strncmp(p, "FATAL:  ", 8) == 0 || strncmp(p, "ERROR:  ", 8) == 0)
    p += 8;
  snprintf(out, cap, "%.*s", (int)strcspn(p, "\n"), p);
}

/* What went wrong with a connection, and so what the user should do. */
typedef enum conn_fault_e {
  CONN_DOWN,      /* nothing answers at host:port */
  CONN_NOT_PG,    /* something answers, but not PostgreSQL */
  CONN_PASSWORD,  /* the server refused the password */
  CONN_ROLE,      /* no such role */
  CONN_DATABASE,  /* no such database */
  CONN_MALFORMED, /* libpq could not use the URL's values */
  CONN_FULL,      /* too many connections */
  CONN_OTHER
} conn_fault_t;

/*
 * conn_classify -- reads libpq's message. libpq gives a failed connection
 * no SQLSTATE, so the words are all there is; the server's are English
 * unless its lc_messages says otherwise, and then the line still quotes
 * them and falls back to "check the URL".
 */
static conn_fault_t conn_classify(const char *msg) {
  static const struct {
    const char *needle;
    conn_fault_t fault;
  } rules[] = {
      {"password authentication failed", CONN_PASSWORD},
      {"no password supplied", CONN_PASSWORD},
      {"authentication failed", CONN_PASSWORD},
      {"fe_sendauth", CONN_PASSWORD},
      {"SCRAM", CONN_PASSWORD},
      {"role \"", CONN_ROLE},
      {"database \"", CONN_DATABASE},
      {"too many clients", CONN_FULL},
      {"remaining connection slots", CONN_FULL},
      {"Connection refused", CONN_DOWN},
      {"could not connect", CONN_DOWN},
      {"No such file or directory", CONN_DOWN},
      {"timeout expired", CONN_DOWN},
      {"Is the server running", CONN_DOWN},
      {"could not translate host name", CONN_DOWN},
      {"Network is unreachable", CONN_DOWN},
      {"No route to host", CONN_DOWN},
      {"the database system is starting up", CONN_DOWN},
      {"the database system is shutting down", CONN_DOWN},
      {"invalid response to SSL negotiation", CONN_NOT_PG},
      {"expected authentication request", CONN_NOT_PG},
      {"server closed the connection unexpectedly", CONN_NOT_PG},
      {"invalid", CONN_MALFORMED},
      {"missing \"=\"", CONN_MALFORMED},
      {"unterminated quoted string", CONN_MALFORMED},
  };
  if (msg == NULL)
    return CONN_OTHER;
  for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
    if (strstr(msg, rules[i].needle) != NULL)
      return rules[i].fault;
  return CONN_OTHER;
}

/*
 * conn_fail -- prints the one line for a connection that failed and returns
 * the exit status. The four faults a user fixes by starting the server or
 * correcting the URL (down, password or role, database, malformed) are
 * usage errors, status 2, as the issue asks (README.md, invariant 1);
 * a full server or anything else is a failed run, status 1.
 */
static int conn_fail(const char *shown, const ledger_where_t *w,
                     const char *msg) {
  char reason[512];
  conn_reason(msg, reason, sizeof(reason));
  fprintf(stderr,
          "ordo bank: cannot connect to PostgreSQL at %s:%s (database "
          "'%s', user '%s') for '%s': %s; ",
          w->host, w->port, w->dbname, w->user, shown, reason);
  switch (conn_classify(msg)) {
  case CONN_DOWN:
    fprintf(stderr,
            "check that PostgreSQL is running on %s:%s and accepts "
            "connections there\n",
            w->host, w->port);
    return CLI_EXIT_USAGE;
  case CONN_NOT_PG:
    fprintf(stderr,
            "something answers on %s:%s, but not as PostgreSQL does; check "
            "the port\n",
            w->host, w->port);
    return CLI_EXIT_USAGE;
  case CONN_PASSWORD:
    fprintf(stderr,
            "check the password of user '%s' (the URL's user:password@, "
            "password=, PGPASSWORD or ~/.pgpass) and that the role "
            "exists\n",
            w->user);
    return CLI_EXIT_USAGE;
  case CONN_ROLE:
    fprintf(stderr, "check the user name, or create the role '%s'\n", w->user);
    return CLI_EXIT_USAGE;
  case CONN_DATABASE:
    fprintf(stderr,
            "create the database (createdb %s) or name another in the "
            "URL\n",
            w->dbname);
    return CLI_EXIT_USAGE;
  case CONN_MALFORMED:
    fprintf(stderr, "fix the URL; accepted forms are %s\n", LEDGER_URL_FORMS);
    return CLI_EXIT_USAGE;
  case CONN_FULL:
    fputs("try fewer --workers (each is a connection), or raise the "
          "server's max_connections\n",
          stderr);
    return CLI_EXIT_FAIL;
  case CONN_OTHER:
    break;
  }
  fputs("check the URL and the server's log\n", stderr);
  return CLI_EXIT_FAIL;
}

/* The SQLSTATE of a failed result, or "" (a lost connection has none). */
static const char *res_state(const PGresult *res) {
  const char *s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  return s ? s : "";
}

/* Copies conn's error message, reduced to its first line, into out. */
static void conn_error_line(PGconn *conn, char *out, size_t cap) {
  const char *m = PQerrorMessage(conn);
  if (strncmp(m, "ERROR:  ", 8) == 0 || strncmp(m, "FATAL:  ", 8) == 0)
    m += 8;
  snprintf(out, cap, "%.*s", (int)strcspn(m, "\n"), m);
}

/*
 * ctl_exec -- runs sql (no parameters, possibly several statements) on the
 * control connection and checks the last result's status. Returns the
 * result (PQclear it), or NULL after printing one line that says what was
 * being done, what PostgreSQL said and, when hint is given, what to do.
 */
static PGresult *ctl_exec(PGconn *c, const char *sql, ExecStatusType want,
                          const char *doing, const char *hint) {
  PGresult *res = PQexec(c, sql);
  if (res != NULL && PQresultStatus(res) == want)
    return res;
  char line[512];
  conn_error_line(c, line, sizeof(line));
  fprintf(stderr, "ordo bank: cannot %s: %s%s%s%s%s%s\n", doing, line,
          *res_state(res) ? " (SQLSTATE " : "", res_state(res),
          *res_state(res) ? ")" : "", hint ? "; " : "", hint ? hint : "");
  PQclear(res);
  return NULL;
}

/* ---- The run --------------------------------------------------------------
 */

/* The statements each worker prepares once on its connection. */
static const struct {
  const char *name;
  const char *sql;
} ledger_stmts[] = {
    /* Ordered: both rows in one statement, locked in id order (LockRows
     * runs above the sort, so the order is the ORDER BY's). */
    {"lock_both", "SELECT id, balance FROM ordo_bank.accounts "
                  "WHERE id = ANY($1::int[]) ORDER BY id FOR UPDATE"},
    /* Naive: one row at a time, in transfer order. */
    {"lock_one", "SELECT id, balance FROM ordo_bank.accounts "
                 "WHERE id = $1::int FOR UPDATE"},
    /* The new balance is computed by the client from the locked read, so
     * only the row locks keep concurrent transfers from losing updates:
     * a broken lock shows as a total that changed (ledger invariant 3). */
    {"set_balance", "UPDATE ordo_bank.accounts SET balance = $2::bigint "
                    "WHERE id = $1::int"},
    {"journal", "INSERT INTO ordo_bank.journal (src, dst, amount, xfer) "
                "VALUES ($1::int, $2::int, $3::bigint, $4::bigint)"},
};
#define LEDGER_NSTMTS (sizeof(ledger_stmts) / sizeof(ledger_stmts[0]))

/*
 * One worker: a thread and its connection. Each starts a cache line of its
 * own; done is the only field another thread reads while the run goes (the
 * progress thread, relaxed loads); the counters are written by the worker
 * only and read by the main thread after the join.
 */
typedef struct ledger_worker_s {
  alignas(64) _Atomic uint64_t done; /* transfers finished */
  struct ledger_s *lg;
  PGconn *conn;
  uint32_t id;            /* 1..workers */
  uint64_t rng;           /* the backoff's jitter, SplitMix64 state */
  uint64_t retries;       /* sum of attempts - 1 */
  uint64_t deadlock_errs; /* 40P01 received */
  uint64_t timeouts;      /* 55P03 received */
  uint64_t serial_errs;   /* 40001 received */
  uint64_t failed;        /* transfers given up after --attempts */
  char last_state[6];     /* SQLSTATE of the last failed transfer */
} ledger_worker_t;

typedef struct ledger_s {
  const bank_opts_t *opts;
  ordo_retry_options_t retry; /* base and cap of the backoff, as ordo's */
  size_t naccounts;
  uint64_t ntransfers;   /* 2 * opts->transfers */
  uint8_t *committed;    /* per transfer: its COMMIT succeeded; one writer */
  uint64_t *lat_ns;      /* per transfer: written by the worker that claimed */
  _Atomic uint64_t next; /* the next transfer index to claim */
  /*
   * hard (atomic) guards hard_msg: the first worker to swap it from 0 to 1
   * after a non-retryable error writes hard_msg; the main thread reads it
   * after the join. A set hard also stops the claims.
   */
  _Atomic int hard;
  char hard_msg[400];
  ledger_worker_t *w;
  PGconn *ctl; /* the main thread's; the watchdog's once it fires */
  char appname[64];
  int fault_leak, fault_hang; /* ORDO_BANK_FAULT, see ledger_fault() */
  bank_gate_t gate;
} ledger_t;

/* What a ledger run measured beyond bank_result_t. */
typedef struct ledger_result_s {
  bank_result_t *b;          /* victims: 40P01 received; deadlocks: pg_stat's */
  char deadlock_timeout[32]; /* SHOW deadlock_timeout, "10ms" */
  uint64_t serial_errs;      /* 40001 received */
  uint64_t journal_rows;
  uint64_t missing;    /* committed, yet no journal row */
  uint64_t phantom;    /* a journal row for a transfer that did not commit */
  uint64_t misplanned; /* journal rows that disagree with bank_plan */
  uint64_t mismatched; /* accounts whose balance disagrees with the journal */
  uint64_t account_rows;
  long first_bad_id;          /* the first mismatched account, or -1 */
  int64_t first_bad_balance;  /* its balance */
  int64_t first_bad_expected; /* what the journal says it should be */
  long backends_left; /* worker backends still alive after the wait, or -1 */
  char hard_msg[400];
  char last_state[6];
} ledger_result_t;

/* The place of one run: the control connection and the run's state. */
struct bank_place_s {
  const bank_opts_t *opts;
  char shown[1024]; /* the URL, every password as *** (ledger_redact) */
  const char *conninfo;
  ledger_where_t where;
  PGconn *ctl;
  ledger_t lg;
  ledger_result_t lr;
  int64_t dl0, total0; /* the deadlock figure and the total before the run */
};

/* Outcome of one attempt of a transfer. */
enum { XFER_DONE, XFER_RETRY, XFER_HARD };

static int state_retryable(const char *s) {
  return strcmp(s, SQLSTATE_DEADLOCK) == 0 ||
         strcmp(s, SQLSTATE_SERIALIZATION) == 0 ||
         strcmp(s, SQLSTATE_LOCK_TIMEOUT) == 0;
}

/* Records the run's first hard error (see ledger_t.hard) and stops it. */
static void ledger_hard(ledger_t *lg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void ledger_hard(ledger_t *lg, const char *fmt, ...) {
  int none = 0;
  if (!atomic_compare_exchange_strong(&lg->hard, &none, 1))
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(lg->hard_msg, sizeof(lg->hard_msg), fmt, ap);
  va_end(ap);
}

/* ledger_hang -- the "hang" test hook: hold the rows forever (bank_hang). */
_Noreturn static void ledger_hang(void) {
  for (;;)
    pause();
}

/* What pl_run checks of a step's result beyond its status. */
typedef enum pl_check_e {
  CHECK_NONE,
  CHECK_ONE_ROW, /* an UPDATE or INSERT that must touch exactly one row */
  CHECK_COMMIT   /* COMMIT, whose tag must say COMMIT, not ROLLBACK */
} pl_check_t;

/* One statement of a pipeline. */
typedef struct pl_step_s {
  const char *stmt; /* a prepared statement's name, or NULL to run sql */
  const char *sql;  /* BEGIN, COMMIT, ROLLBACK: no parameters */
  int n;
  const char *const *vals;
  ExecStatusType want;
  pl_check_t check;
  const char *what; /* for error lines: "COMMIT" */
} pl_step_t;

/* Ends an open transaction block, aborted or not. */
static const pl_step_t pl_rollback = {
    NULL, "ROLLBACK", 0, NULL, PGRES_COMMAND_OK, CHECK_NONE, "ROLLBACK"};

/* The first line of a failed result's message, without its severity. */
static void res_error_line(const PGresult *res, PGconn *c, char *out,
                           size_t cap) {
  const char *m = res ? PQresultErrorMessage(res) : "";
  if (m == NULL || *m == '\0') {
    conn_error_line(c, out, cap);
    return;
  }
  if (strncmp(m, "ERROR:  ", 8) == 0 || strncmp(m, "FATAL:  ", 8) == 0)
    m += 8;
  snprintf(out, cap, "%.*s", (int)strcspn(m, "\n"), m);
}

/*
 * pl_send -- queues steps[0..n) and a sync on w's connection, which is in
 * pipeline mode: the whole batch costs one round trip. Returns 0, or -1
 * when libpq refused to queue (a broken connection).
 */
static int pl_send(ledger_worker_t *w, const pl_step_t *s, int n) {
  for (int i = 0; i < n; i++) {
    int ok = s[i].stmt ? PQsendQueryPrepared(w->conn, s[i].stmt, s[i].n,
                                             s[i].vals, NULL, NULL, 0)
                       : PQsendQueryParams(w->conn, s[i].sql, 0, NULL, NULL,
                                           NULL, NULL, 0);
    if (!ok)
      return -1;
  }
  return PQpipelineSync(w->conn) ? 0 : -1;
}

/*
 * pl_run -- runs steps[0..n) as one pipeline and reads every result up to
 * the sync. rows (may be NULL) gets the first result with tuples (the
 * caller clears it). Returns XFER_DONE when every step did what it should;
 * otherwise ends the transaction and says whether to retry (ledger
 * invariant 4): after a retryable SQLSTATE (40P01, 40001, 55P03)
 * PostgreSQL has rolled the whole transaction back, the steps after the
 * failed one were skipped (PGRES_PIPELINE_ABORTED), and a ROLLBACK ends the
 * aborted block, so a retry starts clean: XFER_RETRY. Anything else, a lost
 * connection included, is XFER_HARD: the run stops. st gets the SQLSTATE
 * of the failure.
 */
static int pl_run(ledger_worker_t *w, const pl_step_t *s, int n,
                  PGresult **rows, char st[6]) {
  ledger_t *lg = w->lg;
  int failed = -1;      /* the first step that failed, or -1 */
  int bad_check = 0;    /* it ran but its result was wrong */
  char line[300] = "";  /* its message */
  char detail[64] = ""; /* what the check saw */
  st[0] = '\0';
  int broken = pl_send(w, s, n) != 0;
  for (int i = 0; i < n && !broken; i++) {
    PGresult *res = PQgetResult(w->conn);
    if (res == NULL) {
      broken = 1;
      break;
    }
    ExecStatusType rs = PQresultStatus(res);
    if (failed < 0 && rs != s[i].want) {
      failed = i;
      snprintf(st, 6, "%s", res_state(res));
      res_error_line(res, w->conn, line, sizeof(line));
    } else if (failed < 0 && s[i].check == CHECK_ONE_ROW &&
               strcmp(PQcmdTuples(res), "1") != 0) {
      failed = i;
      bad_check = 1;
      snprintf(detail, sizeof(detail), "changed %s rows instead of 1",
               PQcmdTuples(res));
    } else if (failed < 0 && s[i].check == CHECK_COMMIT &&
               strcmp(PQcmdStatus(res), "COMMIT") != 0) {
      failed = i;
      bad_check = 1;
      snprintf(detail, sizeof(detail), "answered %s", PQcmdStatus(res));
    }
    if (failed < 0 && rows != NULL && *rows == NULL && rs == PGRES_TUPLES_OK)
      *rows = res;
    else
      PQclear(res);
    /* Each step's results end with a NULL; a second NULL would mean the
     * connection has nothing more to say. */
    res = PQgetResult(w->conn);
    if (res != NULL) {
      PQclear(res);
      broken = PQstatus(w->conn) != CONNECTION_OK;
    }
  }
  if (!broken) {
    PGresult *res = PQgetResult(w->conn);
    broken = res == NULL || PQresultStatus(res) != PGRES_PIPELINE_SYNC;
    PQclear(res);
  }
  if (broken || PQstatus(w->conn) != CONNECTION_OK) {
    char cl[300];
    conn_error_line(w->conn, cl, sizeof(cl));
    ledger_hard(lg, "worker %u lost its connection during %s: %s", w->id,
                failed >= 0 ? s[failed].what : s[0].what, cl);
    return XFER_HARD;
  }
  if (failed < 0)
    return XFER_DONE;
  if (rows != NULL && *rows != NULL) {
    PQclear(*rows);
    *rows = NULL;
  }
  if (strcmp(st, SQLSTATE_DEADLOCK) == 0)
    w->deadlock_errs++;
  else if (strcmp(st, SQLSTATE_LOCK_TIMEOUT) == 0)
    w->timeouts++;
  else if (strcmp(st, SQLSTATE_SERIALIZATION) == 0)
    w->serial_errs++;
  /* A failed COMMIT has already ended the transaction; after any other
   * failure the block is open (aborted, or intact after a bad check). */
  if (s != &pl_rollback && PQtransactionStatus(w->conn) != PQTRANS_IDLE) {
    char rst[6];
    if (pl_run(w, &pl_rollback, 1, NULL, rst) != XFER_DONE)
      return XFER_HARD; /* pl_run has said why */
  }
  if (!bad_check && state_retryable(st))
    return XFER_RETRY;
  if (bad_check)
    ledger_hard(lg, "%s %s", s[failed].what, detail);
  else
    ledger_hard(lg, "%s failed: %s%s%s%s", s[failed].what, line,
                *st ? " (SQLSTATE " : "", st, *st ? ")" : "");
  return XFER_HARD;
}

/*
 * xfer_rows -- reads the balances of accounts from and to out of a lock
 * statement's rows into bal[0] and bal[1]. Returns 0, or -1 when the rows
 * are not exactly want rows of those accounts.
 */
static int xfer_rows(PGresult *res, int want, size_t from, size_t to,
                     int64_t bal[2]) {
  int n = PQntuples(res);
  if (n != want)
    return -1;
  for (int i = 0; i < n; i++) {
    long long id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
    long long v = strtoll(PQgetvalue(res, i, 1), NULL, 10);
    if (id >= 0 && (size_t)id == from)
      bal[0] = v;
    else if (id >= 0 && (size_t)id == to)
      bal[1] = v;
    else
      return -1;
  }
  return 0;
}

/*
 * ledger_attempt -- one attempt of transfer idx, one transaction in two
 * round trips (three with --naive): [BEGIN, lock both rows in id order
 * (SELECT ... ORDER BY id FOR UPDATE)] (naive: [BEGIN, lock from], [lock
 * to]); then [UPDATE from, UPDATE to, INSERT the journal row, COMMIT], the
 * new balances computed from the locked reads. Each bracket is one pipeline
 * (pl_run). Returns XFER_DONE once COMMIT succeeded, XFER_RETRY after a
 * retryable error (rolled back: nothing moved), XFER_HARD otherwise; st
 * gets the SQLSTATE of a failure.
 */
static int ledger_attempt(ledger_worker_t *w, uint64_t idx, size_t from,
                          size_t to, int64_t amount, char st[6]) {
  ledger_t *lg = w->lg;
  char a_from[24], a_to[24], a_amt[24], a_idx[24], arr[48];
  snprintf(a_from, sizeof(a_from), "%zu", from);
  snprintf(a_to, sizeof(a_to), "%zu", to);
  snprintf(a_amt, sizeof(a_amt), "%" PRId64, amount);
  snprintf(a_idx, sizeof(a_idx), "%" PRIu64, idx);
  snprintf(arr, sizeof(arr), "{%zu,%zu}", from, to);
  const char *v_arr[1] = {arr}, *v_from[1] = {a_from}, *v_to[1] = {a_to};
  int naive = lg->opts->mode == BANK_MODE_NAIVE;

  /* Lock: both rows at once, or (naive) from now and to in its own trip. */
  int64_t bal[2] = {0, 0};
  PGresult *rows = NULL;
  pl_step_t lock[2] = {
      {NULL, "BEGIN", 0, NULL, PGRES_COMMAND_OK, CHECK_NONE, "BEGIN"},
      {naive ? "lock_one" : "lock_both", NULL, 1, naive ? v_from : v_arr,
       PGRES_TUPLES_OK, CHECK_NONE, "SELECT ... FOR UPDATE"}};
  int rc = pl_run(w, lock, 2, &rows, st);
  int bad = rc == XFER_DONE && xfer_rows(rows, naive ? 1 : 2, from, to, bal);
  PQclear(rows);
  rows = NULL;
  if (rc == XFER_DONE && !bad && naive) {
    pl_step_t second = {"lock_one",
                        NULL,
                        1,
                        v_to,
                        PGRES_TUPLES_OK,
                        CHECK_NONE,
                        "SELECT ... FOR UPDATE of the destination"};
    rc = pl_run(w, &second, 1, &rows, st);
    bad = rc == XFER_DONE && xfer_rows(rows, 1, from, to, bal);
    PQclear(rows);
  }
  if (bad) {
    ledger_hard(lg,
                "SELECT ... FOR UPDATE of accounts %zu and %zu did not "
                "return their rows: was ordo_bank.accounts changed during "
                "the run?",
                from, to);
    char rst[6];
    pl_run(w, &pl_rollback, 1, NULL, rst); /* the run stops either way */
    return XFER_HARD;
  }
  if (rc != XFER_DONE)
    return rc;
  if (lg->fault_hang && idx == 0)
    ledger_hang(); /* the test hook: both rows stay locked for good */

  /* Move: the client computes the balances from its locked reads, so only
   * the row locks stand between two transfers and a lost update. */
  char nb[2][24];
  snprintf(nb[0], sizeof(nb[0]), "%" PRId64, bal[0] - amount);
  /* The "leak" test hook credits one unit too many in transfer 0. */
  snprintf(nb[1], sizeof(nb[1]), "%" PRId64,
           bal[1] + amount + (lg->fault_leak && idx == 0 ? 1 : 0));
  const char *set_from[2] = {a_from, nb[0]};
  const char *set_to[2] = {a_to, nb[1]};
  const char *jv[4] = {a_from, a_to, a_amt, a_idx};
  pl_step_t move[4] = {
      {"set_balance", NULL, 2, set_from, PGRES_COMMAND_OK, CHECK_ONE_ROW,
       "UPDATE of the source account"},
      {"set_balance", NULL, 2, set_to, PGRES_COMMAND_OK, CHECK_ONE_ROW,
       "UPDATE of the destination account"},
      {"journal", NULL, 4, jv, PGRES_COMMAND_OK, CHECK_ONE_ROW,
       "INSERT into ordo_bank.journal"},
      {NULL, "COMMIT", 0, NULL, PGRES_COMMAND_OK, CHECK_COMMIT, "COMMIT"}};
  return pl_run(w, move, 4, NULL, st);
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static void *ledger_worker(void *arg) {
  ledger_worker_t *w = arg;
  ledger_t *lg = w->lg;

  int aborted = bank_gate_wait(&lg->gate);
  if (aborted)
    return NULL;

  unsigned max = lg->retry.max_attempts;
  for (;;) {
    if (atomic_load_explicit(&lg->hard, memory_order_relaxed) != 0)
      break;
    /* Claims hand out each index once, consecutively (invariant 5). */
    uint64_t i = atomic_fetch_add_explicit(&lg->next, 1, memory_order_relaxed);
    if (i >= lg->ntransfers)
      break;
    size_t from, to;
    int64_t amount;
    bank_plan(lg->naccounts, i, &from, &to, &amount);
    uint64_t t0 = bank_now_ns();
    char st[6] = "";
    unsigned k = 0;
    int rc;
    for (;;) {
      k++;
      rc = ledger_attempt(w, i, from, to, amount, st);
      if (rc != XFER_RETRY || (max && k >= max) ||
          atomic_load_explicit(&lg->hard, memory_order_relaxed) != 0)
        break;
      /* Full jitter, as ordo_retry: nothing is held while backing off. */
      w->rng = bank_mix64(w->rng);
      long ceil = ordo_retry_ceiling_us(&lg->retry, k);
      sleep_us((long)(w->rng % (uint64_t)ceil));
    }
    lg->lat_ns[i] = bank_now_ns() - t0;
    w->retries += k - 1;
    if (rc == XFER_DONE) {
      lg->committed[i] = 1;
    } else {
      w->failed++;
      memcpy(w->last_state, st, sizeof(w->last_state));
    }
    /* Single writer: a relaxed load and store, no read-modify-write. */
    atomic_store_explicit(
        &w->done, atomic_load_explicit(&w->done, memory_order_relaxed) + 1,
        memory_order_relaxed);
  }
  return NULL;
}

/*
 * ledger_dump -- the watchdog's view of the server (bank_dump_cb): every
 * lock held or awaited by the run's backends, and every lock awaited by
 * anyone, from pg_locks, with who blocks whom (pg_blocking_pids). It runs
 * on the watchdog's thread on the control connection, which the main
 * thread, blocked in a join for good, no longer uses; the query is bounded
 * by statement_timeout.
 */
static void ledger_dump(void *arg) {
  ledger_t *lg = arg;
  char sql[1024];
  char *app = PQescapeLiteral(lg->ctl, lg->appname, strlen(lg->appname));
  snprintf(sql, sizeof(sql),
           "SET statement_timeout = %d; "
           "SELECT l.pid, coalesce(a.application_name, '') AS application, "
           "l.locktype, coalesce(l.relation::regclass::text, '') AS relation, "
           "coalesce(l.page::text || ',' || l.tuple::text, '') AS tuple, "
           "coalesce(l.transactionid::text, l.virtualxid, '') AS xid, "
           "l.mode, l.granted, pg_blocking_pids(l.pid)::text AS blocked_by "
           "FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
           "WHERE a.application_name = %s OR NOT l.granted "
           "ORDER BY l.pid, l.granted DESC, l.locktype",
           LEDGER_DUMP_TIMEOUT_MS, app ? app : "''");
  if (app)
    PQfreemem(app);
  PGresult *res = PQexec(lg->ctl, sql);
  if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK) {
    char line[300];
    conn_error_line(lg->ctl, line, sizeof(line));
    fprintf(stderr, "(pg_locks could not be read: %s)\n", line);
    PQclear(res);
    return;
  }
  int nf = PQnfields(res), nt = PQntuples(res);
  int width[16] = {0};
  if (nf > 16)
    nf = 16;
  for (int f = 0; f < nf; f++) {
    width[f] = (int)strlen(PQfname(res, f));
    for (int t = 0; t < nt; t++)
      if (PQgetlength(res, t, f) > width[f])
        width[f] = PQgetlength(res, t, f);
  }
  for (int f = 0; f < nf; f++)
    fprintf(stderr, "%s%-*s", f ? "  " : "", width[f], PQfname(res, f));
  fputc('\n', stderr);
  for (int t = 0; t < nt; t++) {
    for (int f = 0; f < nf; f++)
      fprintf(stderr, "%s%-*s", f ? "  " : "", width[f], PQgetvalue(res, t, f));
    fputc('\n', stderr);
  }
  fprintf(stderr,
          "(%d locks: those of the run's backends, application_name "
          "%s, and every lock awaited)\n",
          nt, lg->appname);
  PQclear(res);
}

/*
 * ledger_fault -- the test hooks of ORDO_BANK_FAULT that mean something
 * here: "leak" credits one extra unit in transfer 0 (the total and the
 * journal disagree), "hang" keeps transfer 0's rows locked forever (for
 * --watchdog). Another value is ignored with a line.
 */
static void ledger_fault(ledger_t *lg) {
  const char *f = getenv("ORDO_BANK_FAULT");
  if (f == NULL || *f == '\0')
    return;
  if (strcmp(f, "leak") == 0)
    lg->fault_leak = 1;
  else if (strcmp(f, "hang") == 0)
    lg->fault_hang = 1;
  else
    fprintf(stderr,
            "ordo bank: ignoring ORDO_BANK_FAULT='%s': the ledger accepts "
            "leak, hang\n",
            f);
}

/* ---- Setup and checks on the control connection ---------------------------
 */

/*
 * ledger_reset -- creates schema ordo_bank and its tables when missing and
 * resets them: the journal emptied, the accounts 0..n-1 re-inserted with the
 * opening balance (ledger invariant 1). One transaction, so a failed reset
 * leaves the old state, bounded by a lock timeout in case another run holds
 * the tables.
 */
static int ledger_reset(PGconn *c, size_t n) {
  /* CREATE SCHEMA IF NOT EXISTS checks the right to create schemas before
   * it looks, so a role given the schema by an administrator (see the hint)
   * would be refused: look first. */
  PGresult *res = ctl_exec(c, "SELECT to_regnamespace('ordo_bank') IS NULL",
                           PGRES_TUPLES_OK, "look for schema ordo_bank", NULL);
  if (res == NULL)
    return -1;
  int missing = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
  PQclear(res);
  char hint[256];
  snprintf(hint, sizeof(hint),
           "connect as a role that may create a schema in this database, "
           "or have one create it for this role: CREATE SCHEMA ordo_bank "
           "AUTHORIZATION \"%s\"",
           PQuser(c));
  if (missing) {
    res = ctl_exec(c, "CREATE SCHEMA IF NOT EXISTS ordo_bank", PGRES_COMMAND_OK,
                   "create schema ordo_bank", hint);
    if (res == NULL)
      return -1;
    PQclear(res);
  }
  res =
      ctl_exec(c,
               "CREATE TABLE IF NOT EXISTS ordo_bank.accounts ("
               "id int PRIMARY KEY, balance bigint NOT NULL); "
               "CREATE TABLE IF NOT EXISTS ordo_bank.journal ("
               "id bigserial PRIMARY KEY, src int NOT NULL, "
               "dst int NOT NULL, amount bigint NOT NULL, "
               "xfer bigint NOT NULL UNIQUE)",
               PGRES_COMMAND_OK, "create the tables of schema ordo_bank", hint);
  if (res == NULL)
    return -1;
  PQclear(res);
  char sql[512];
  snprintf(sql, sizeof(sql),
           "BEGIN; SET LOCAL lock_timeout = '%s'; "
           "TRUNCATE ordo_bank.journal, ordo_bank.accounts RESTART IDENTITY; "
           "INSERT INTO ordo_bank.accounts (id, balance) "
           "SELECT g, %d FROM generate_series(0, %zu) g; COMMIT",
           LEDGER_RESET_LOCK_TIMEOUT, BANK_OPENING_BALANCE, n - 1);
  res = ctl_exec(c, sql, PGRES_COMMAND_OK,
                 "reset schema ordo_bank (TRUNCATE, then the opening "
                 "balances)",
                 "is another ordo bank running on this database, or were "
                 "the tables changed? DROP SCHEMA ordo_bank CASCADE lets the "
                 "next run create them afresh");
  if (res == NULL) {
    if (PQtransactionStatus(c) != PQTRANS_IDLE)
      PQclear(PQexec(c, "ROLLBACK"));
    return -1;
  }
  PQclear(res);
  return 0;
}

/* Reads one bigint from a one-row result of sql into *v. */
static int ctl_bigint(PGconn *c, const char *sql, const char *doing,
                      int64_t *v) {
  PGresult *res = ctl_exec(c, sql, PGRES_TUPLES_OK, doing, NULL);
  if (res == NULL)
    return -1;
  int ok = PQntuples(res) == 1 && !PQgetisnull(res, 0, 0);
  if (ok)
    *v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
  else
    fprintf(stderr, "ordo bank: cannot %s: no value returned\n", doing);
  PQclear(res);
  return ok ? 0 : -1;
}

/*
 * ledger_deadlocks -- pg_stat_database.deadlocks of the current database,
 * read from a fresh statistics snapshot (ledger invariant 6).
 */
static int ledger_deadlocks(PGconn *c, int64_t *v) {
  PGresult *res =
      ctl_exec(c, "SELECT pg_stat_clear_snapshot()", PGRES_TUPLES_OK,
               "clear the statistics snapshot", NULL);
  if (res == NULL)
    return -1;
  PQclear(res);
  return ctl_bigint(c,
                    "SELECT deadlocks FROM pg_stat_database "
                    "WHERE datname = current_database()",
                    "read pg_stat_database.deadlocks", v);
}

/*
 * ledger_backends_gone -- waits, polling every 10 ms for at most
 * LEDGER_BACKENDS_GONE_S, until pg_stat_activity shows no backend with the
 * run's application_name. A backend flushes its counters (deadlocks among
 * them) as it exits, before it leaves pg_stat_activity, and it exits after,
 * not when, the client closes. Returns how many were left (0), or -1 when
 * the query failed.
 */
static long ledger_backends_gone(ledger_t *lg) {
  const char *vals[1] = {lg->appname};
  double give_up = cli_now() + LEDGER_BACKENDS_GONE_S;
  for (;;) {
    PGresult *res = PQexecParams(lg->ctl,
                                 "SELECT count(*) FROM pg_stat_activity "
                                 "WHERE application_name = $1",
                                 1, NULL, vals, NULL, NULL, 0);
    if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK) {
      char line[300];
      conn_error_line(lg->ctl, line, sizeof(line));
      fprintf(stderr, "ordo bank: cannot read pg_stat_activity: %s\n", line);
      PQclear(res);
      return -1;
    }
    long n = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    if (n == 0 || cli_now() >= give_up)
      return n;
    sleep_us(10000);
  }
}

/*
 * ledger_verify -- reads the journal and the accounts back and checks them
 * against what the workers saw and against the plan (ledger invariant 5):
 * every journal row is a planned transfer (bank_plan's accounts and
 * amount), at most once, exactly for the transfers whose COMMIT succeeded;
 * each account's balance is the opening one plus what the journal moved in,
 * minus what it moved out. The journal is read in single-row mode, so a
 * long run is not held in memory twice. Returns 0, or -1 after one line.
 */
static int ledger_verify(ledger_t *lg, ledger_result_t *r) {
  uint8_t *seen = calloc(lg->ntransfers, 1);
  int64_t *delta = calloc(lg->naccounts, sizeof(*delta));
  if (seen == NULL || delta == NULL) {
    fputs("ordo bank: out of memory for the journal check\n", stderr);
    free(seen);
    free(delta);
    return -1;
  }
  int status = 0;
  if (!PQsendQuery(lg->ctl,
                   "SELECT xfer, src, dst, amount FROM ordo_bank.journal") ||
      !PQsetSingleRowMode(lg->ctl))
    status = -1;
  PGresult *res;
  while (status == 0 && (res = PQgetResult(lg->ctl)) != NULL) {
    ExecStatusType s = PQresultStatus(res);
    if (s == PGRES_SINGLE_TUPLE) {
      long long x = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
      long long src = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
      long long dst = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
      long long amt = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
      r->journal_rows++;
      size_t pf, pt;
      int64_t pa;
      if (x < 0 || (uint64_t)x >= lg->ntransfers) {
        r->misplanned++;
      } else {
        bank_plan(lg->naccounts, (uint64_t)x, &pf, &pt, &pa);
        if ((long long)pf != src || (long long)pt != dst || pa != amt)
          r->misplanned++;
        if (seen[x] < UINT8_MAX)
          seen[x]++;
      }
      if (src >= 0 && (uint64_t)src < lg->naccounts && dst >= 0 &&
          (uint64_t)dst < lg->naccounts) {
        delta[src] -= amt;
        delta[dst] += amt;
      }
    } else if (s != PGRES_TUPLES_OK) {
      status = -1;
    }
    PQclear(res);
  }
  if (status != 0) {
    char line[300];
    conn_error_line(lg->ctl, line, sizeof(line));
    fprintf(stderr, "ordo bank: cannot read ordo_bank.journal back: %s\n",
            line);
    while ((res = PQgetResult(lg->ctl)) != NULL)
      PQclear(res);
  }
  for (uint64_t i = 0; status == 0 && i < lg->ntransfers; i++) {
    if (seen[i] > 1)
      r->b->twice++;
    if (lg->committed[i] && seen[i] == 0)
      r->missing++;
    if (!lg->committed[i] && seen[i] != 0)
      r->phantom++;
  }

  r->first_bad_id = -1;
  if (status == 0) {
    res = ctl_exec(lg->ctl,
                   "SELECT id, balance FROM ordo_bank.accounts ORDER BY id",
                   PGRES_TUPLES_OK, "read ordo_bank.accounts back", NULL);
    if (res == NULL)
      status = -1;
  }
  if (status == 0) {
    r->account_rows = (uint64_t)PQntuples(res);
    for (int t = 0; t < PQntuples(res); t++) {
      long long id = strtoll(PQgetvalue(res, t, 0), NULL, 10);
      int64_t bal = strtoll(PQgetvalue(res, t, 1), NULL, 10);
      r->b->total_after += bal;
      int64_t want = BANK_OPENING_BALANCE +
                     (id >= 0 && (uint64_t)id < lg->naccounts ? delta[id] : 0);
      if (bal != want) {
        if (r->mismatched++ == 0) {
          r->first_bad_id = (long)id;
          r->first_bad_balance = bal;
          r->first_bad_expected = want;
        }
      }
    }
    PQclear(res);
  }
  free(seen);
  free(delta);
  return status;
}

/*
 * ledger_judge -- sets ok and the verdict (ledger invariant 7): every check
 * that failed adds its reason.
 */
static void ledger_judge(const bank_opts_t *o, ledger_result_t *lr) {
  bank_result_t *r = lr->b;
  r->verdict[0] = '\0';
  bank_check_total(r);
  if (lr->account_rows != (uint64_t)o->accounts)
    bank_verdict_add(r, "ordo_bank.accounts has %" PRIu64 " rows, not %ld",
                     lr->account_rows, o->accounts);
  bank_check_count(r);
  if (lr->journal_rows != r->completed)
    bank_verdict_add(r,
                     "the journal has %" PRIu64 " rows for %" PRIu64
                     " committed transfers",
                     lr->journal_rows, r->completed);
  if (r->twice != 0)
    bank_verdict_add(r, "%" PRIu64 " transfers journalled more than once",
                     r->twice);
  if (lr->missing != 0)
    bank_verdict_add(r,
                     "%" PRIu64 " committed transfers missing from the "
                     "journal",
                     lr->missing);
  if (lr->phantom != 0)
    bank_verdict_add(r,
                     "%" PRIu64 " journal rows for transfers whose COMMIT "
                     "did not succeed",
                     lr->phantom);
  if (lr->misplanned != 0)
    bank_verdict_add(r, "%" PRIu64 " journal rows differ from the plan",
                     lr->misplanned);
  if (lr->mismatched != 0)
    bank_verdict_add(r,
                     "%" PRIu64 " accounts disagree with the journal "
                     "(account %ld has %" PRId64 ", the journal says %" PRId64
                     ")",
                     lr->mismatched, lr->first_bad_id, lr->first_bad_balance,
                     lr->first_bad_expected);
  if (r->failed != 0)
    bank_verdict_add(r,
                     "%" PRIu64 " transfers failed after --attempts %ld "
                     "(last SQLSTATE %s)",
                     r->failed, o->attempts,
                     lr->last_state[0] ? lr->last_state : "none");
  if (lr->hard_msg[0] != '\0')
    bank_verdict_add(r, "stopped early: %s", lr->hard_msg);
  if (lr->backends_left != 0)
    bank_verdict_add(r,
                     "%ld worker backends were still in pg_stat_activity "
                     "%.0f s after their connections closed, so the "
                     "deadlock count may be short",
                     lr->backends_left, LEDGER_BACKENDS_GONE_S);
  if (r->deadlocks != r->victims)
    bank_verdict_add(r,
                     "pg_stat_database counted %" PRIu64
                     " deadlocks but the connections received %" PRIu64
                     " deadlock errors (40P01)",
                     r->deadlocks, r->victims);
  bank_check_ordered(o, r);
  if (bank_judged(r))
    snprintf(r->verdict, sizeof(r->verdict),
             "balance conserved, %" PRIu64 "/%" PRIu64
             " transfers, the journal agrees (%" PRIu64 " rows), %" PRIu64
             " deadlocks (= %" PRIu64 " 40P01 errors)",
             r->completed, r->expected, lr->journal_rows, r->deadlocks,
             r->victims);
}

static void ledger_free(ledger_t *lg) {
  free(lg->committed);
  free(lg->lat_ns);
  free(lg->w);
}

/*
 * ledger_workers_open -- one connection per worker, each with the run's
 * application_name, --lock-timeout as its lock_timeout, and the statements
 * prepared once. Returns the exit status; on failure, after one line, the
 * connections opened so far are left for the caller to close.
 */
static int ledger_workers_open(ledger_t *lg, const char *conninfo,
                               const ledger_where_t *where, const char *shown) {
  const bank_opts_t *o = lg->opts;
  /* PostgreSQL's lock_timeout = 0 waits forever; --lock-timeout 0 means
   * "try once", so the shortest wait it has stands for it. */
  long lt = o->lock_timeout_ms > 0 ? o->lock_timeout_ms : 1;
  char set[64];
  snprintf(set, sizeof(set), "SET lock_timeout = %ld", lt);
  for (long i = 0; i < o->workers; i++) {
    ledger_worker_t *w = &lg->w[i];
    w->conn = ledger_connect(conninfo, where, lg->appname);
    if (w->conn == NULL || PQstatus(w->conn) != CONNECTION_OK) {
      fprintf(stderr, "ordo bank: worker %ld of %ld: ", i + 1, o->workers);
      int st =
          conn_fail(shown, where, w->conn ? PQerrorMessage(w->conn) : NULL);
      /* The control connection got through, so a refusal now is the
       * server's limit or state, not the command line. */
      return st == CLI_EXIT_USAGE ? CLI_EXIT_FAIL : st;
    }
    PGresult *res = ctl_exec(w->conn, set, PGRES_COMMAND_OK,
                             "set lock_timeout on a worker's connection", NULL);
    if (res == NULL)
      return CLI_EXIT_FAIL;
    PQclear(res);
    for (size_t k = 0; k < LEDGER_NSTMTS; k++) {
      res = PQprepare(w->conn, ledger_stmts[k].name, ledger_stmts[k].sql, 0,
                      NULL);
      if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK) {
        char line[300];
        conn_error_line(w->conn, line, sizeof(line));
        fprintf(stderr,
                "ordo bank: cannot prepare the statement %s on worker %ld: "
                "%s; DROP SCHEMA ordo_bank CASCADE lets the next run create "
                "its tables afresh\n",
                ledger_stmts[k].name, i + 1, line);
        PQclear(res);
        return CLI_EXIT_FAIL;
      }
      PQclear(res);
    }
    /* From here on every exchange is a pipeline (pl_run): a transfer
     * costs two round trips, and the rows stay locked for one. */
    if (!PQenterPipelineMode(w->conn)) {
      char line[300];
      conn_error_line(w->conn, line, sizeof(line));
      fprintf(stderr,
              "ordo bank: cannot enter pipeline mode on worker %ld: %s "
              "(libpq 14 or later is needed)\n",
              i + 1, line);
      return CLI_EXIT_FAIL;
    }
  }
  return CLI_EXIT_OK;
}

/*
 * bank_pg_open -- the driver's open: parses the URL (a malformed one is
 * usage, ledger invariant 8), opens the control connection, and reads the
 * server's deadlock_timeout for the report. Prints the one error line
 * itself when it fails.
 */
static int bank_pg_open(const bank_opts_t *o, bank_graph_t *g,
                        bank_place_t **out) {
  (void)g; /* bank_pg_check refused --graph */
  bank_place_t *p = calloc(1, sizeof(*p));
  if (p == NULL) {
    fputs("ordo bank: out of memory\n", stderr);
    return CLI_EXIT_FAIL;
  }
  p->opts = o;
  ledger_redact(o->url, p->shown, sizeof(p->shown));
  p->conninfo = ledger_conninfo(o->url);
  char err[512];
  if (ledger_parse(p->conninfo, &p->where, err, sizeof(err)) != 0) {
    fprintf(stderr,
            "ordo bank: malformed PostgreSQL URL '%s': %s; accepted forms "
            "are %s\n",
            p->shown, err, LEDGER_URL_FORMS);
    free(p);
    return CLI_EXIT_USAGE;
  }
  /* The control connection has a name of its own, so that waiting for the
   * workers' backends to be gone does not wait for it. */
  char appname[64];
  snprintf(appname, sizeof(appname), "ordo-bank-%ld-main", (long)getpid());
  p->ctl = ledger_connect(p->conninfo, &p->where, appname);
  int status = CLI_EXIT_OK;
  if (p->ctl == NULL || PQstatus(p->ctl) != CONNECTION_OK)
    status =
        conn_fail(p->shown, &p->where, p->ctl ? PQerrorMessage(p->ctl) : NULL);
  PGresult *res = NULL;
  if (status == CLI_EXIT_OK) {
    res = ctl_exec(p->ctl, "SET client_min_messages = warning",
                   PGRES_COMMAND_OK, "set client_min_messages", NULL);
    if (res == NULL)
      status = CLI_EXIT_FAIL;
    PQclear(res);
  }
  if (status == CLI_EXIT_OK) {
    res = ctl_exec(p->ctl, "SHOW deadlock_timeout", PGRES_TUPLES_OK,
                   "read deadlock_timeout", NULL);
    if (res == NULL || PQntuples(res) != 1)
      status = CLI_EXIT_FAIL;
    else
      snprintf(p->lr.deadlock_timeout, sizeof(p->lr.deadlock_timeout), "%s",
               PQgetvalue(res, 0, 0));
    PQclear(res);
  }
  if (status != CLI_EXIT_OK) {
    PQfinish(p->ctl);
    free(p);
    return status;
  }
  *out = p;
  return CLI_EXIT_OK;
}

/*
 * bank_pg_run -- the run on the open control connection: reset, read the
 * counters, open the workers' connections, run, close them, and fill r's
 * measures (README.md, "The PostgreSQL ledger"). Returns CLI_EXIT_OK when
 * it ran to the end (bank_pg_verify then says whether the check passed),
 * or CLI_EXIT_FAIL after printing why it could not run.
 */
static int bank_pg_run(bank_place_t *p, const char *label, bank_result_t *r) {
  const bank_opts_t *o = p->opts;
  ledger_t *lg = &p->lg;
  ledger_result_t *lr = &p->lr;
  lr->b = r;
  lg->opts = o;
  lg->ctl = p->ctl;
  ordo_retry_options_init(&lg->retry);
  lg->retry.max_attempts = (unsigned)o->attempts;
  lg->naccounts = (size_t)o->accounts;
  lg->ntransfers = 2 * (uint64_t)o->transfers;
  atomic_init(&lg->next, 0);
  atomic_init(&lg->hard, 0);
  snprintf(lg->appname, sizeof(lg->appname), "ordo-bank-%ld", (long)getpid());

  size_t nw = (size_t)o->workers;
  lg->committed = calloc(lg->ntransfers, 1);
  lg->lat_ns = calloc(lg->ntransfers, sizeof(*lg->lat_ns));
  size_t wbytes = nw * sizeof(ledger_worker_t); /* a multiple of 64 */
  lg->w = aligned_alloc(alignof(ledger_worker_t), wbytes);
  if (!lg->committed || !lg->lat_ns || !lg->w) {
    fprintf(stderr,
            "ordo bank: out of memory for %" PRIu64
            " transfers; try smaller --transfers\n",
            lg->ntransfers);
    return CLI_EXIT_FAIL; /* bank_pg_close frees what was allocated */
  }
  memset(lg->w, 0, wbytes);
  uint64_t seed = bank_mix64((uint64_t)getpid() ^ bank_now_ns());
  for (size_t i = 0; i < nw; i++) {
    atomic_init(&lg->w[i].done, 0);
    lg->w[i].lg = lg;
    lg->w[i].id = (uint32_t)(i + 1);
    lg->w[i].rng = bank_mix64(seed + i);
  }
  ledger_fault(lg);

  int status = CLI_EXIT_OK;

  if (ledger_reset(p->ctl, lg->naccounts) != 0 ||
      ctl_bigint(p->ctl,
                 "SELECT coalesce(sum(balance), 0) FROM ordo_bank.accounts",
                 "read the opening total", &p->total0) != 0 ||
      ledger_deadlocks(p->ctl, &p->dl0) != 0)
    status = CLI_EXIT_FAIL;
  if (status == CLI_EXIT_OK)
    status = ledger_workers_open(lg, p->conninfo, &p->where, p->shown);

  bank_crew_t crew = {.work = ledger_worker,
                      .first = lg->w,
                      .stride = sizeof(ledger_worker_t),
                      .done_off = offsetof(ledger_worker_t, done),
                      .n = nw,
                      .gate = &lg->gate,
                      .label = label,
                      .total = lg->ntransfers,
                      .watchdog_s = o->watchdog_s,
                      .what = "the server's lock view (pg_locks)",
                      .dump = ledger_dump,
                      .dump_arg = lg};
  double seconds = 0;
  status = bank_crew_run(&crew, status, &seconds);

  /* Close the workers' connections first: their backends flush their
   * counters as they exit, and only then is the deadlock count whole
   * (ledger invariant 6). */
  for (size_t i = 0; i < nw; i++)
    if (lg->w[i].conn != NULL)
      PQfinish(lg->w[i].conn);

  if (status == CLI_EXIT_OK) {
    char *red = malloc(strlen(p->shown) + 1);
    if (red != NULL)
      strcpy(red, p->shown);
    r->backend = red;
    r->expected = lg->ntransfers;
    r->seconds = seconds;
    r->total_before = p->total0;
    for (uint64_t i = 0; i < lg->ntransfers; i++) {
      if (lg->committed[i]) {
        r->completed++;
        if (lg->naccounts == 2 && (i & 1) == 0)
          r->forward++;
      }
    }
    for (size_t i = 0; i < nw; i++) {
      r->retries += lg->w[i].retries;
      r->timeouts += lg->w[i].timeouts;
      r->victims += lg->w[i].deadlock_errs;
      r->failed += lg->w[i].failed;
      lr->serial_errs += lg->w[i].serial_errs;
      if (lg->w[i].last_state[0] != '\0')
        memcpy(lr->last_state, lg->w[i].last_state, sizeof(lr->last_state));
    }
    if (atomic_load(&lg->hard) != 0)
      snprintf(lr->hard_msg, sizeof(lr->hard_msg), "%s", lg->hard_msg);
    uint64_t claimed = atomic_load(&lg->next);
    if (claimed > lg->ntransfers)
      claimed = lg->ntransfers;
    bank_latency(r, lg->lat_ns, claimed);
  }
  return status;
}

/*
 * bank_pg_verify -- once the workers' connections are closed: waits for
 * their backends to be gone, reads the deadlock figure again, checks the
 * journal and the balances (ledger_verify) and judges r (ledger invariants
 * 5 to 7). Returns CLI_EXIT_FAIL after one line when it cannot read them.
 */
static int bank_pg_verify(bank_place_t *p, bank_result_t *r) {
  ledger_result_t *lr = &p->lr;
  int64_t dl1 = 0;
  lr->backends_left = ledger_backends_gone(&p->lg);
  if (lr->backends_left < 0 || ledger_deadlocks(p->ctl, &dl1) != 0 ||
      ledger_verify(&p->lg, lr) != 0)
    return CLI_EXIT_FAIL;
  r->deadlocks = dl1 >= p->dl0 ? (uint64_t)(dl1 - p->dl0) : 0;
  ledger_judge(p->opts, lr);

  /* How the report names this run (bank_report.c). */
  snprintf(r->place, sizeof(r->place), ", PostgreSQL ledger (locks rows)");
  r->locks = bank_locks_names[BANK_LOCKS_ROWS];
  snprintf(r->deadlock_timeout, sizeof(r->deadlock_timeout), "%s",
           lr->deadlock_timeout);
  bank_count_add(r, "retries", "retries", r->retries, "%s", "");
  bank_count_add(r, "timeouts", "timeouts", r->timeouts,
                 " (55P03 lock_not_available)");
  bank_count_add(r, "serialization_failures", "serialization", lr->serial_errs,
                 " (40001 serialization_failure)");
  bank_count_add(r, "deadlocks", "deadlocks", r->deadlocks,
                 " (pg_stat_database.deadlocks, after minus before)");
  bank_count_add(r, "victims", "victims", r->victims,
                 " (transactions that got 40P01 deadlock_detected)");
  bank_count_add(r, "journal_rows", "journal", lr->journal_rows,
                 " rows; %" PRIu64 " accounts disagree with it",
                 lr->mismatched);
  bank_count_add(r, "duplicate_xfers", NULL, r->twice, "%s", "");
  bank_count_add(r, "mismatched_accounts", NULL, lr->mismatched, "%s", "");
  return CLI_EXIT_OK;
}

static void bank_pg_close(bank_place_t *p) {
  ledger_free(&p->lg);
  PQfinish(p->ctl);
  free(p);
}

/* A PostgreSQL URL, unless --locks advisory asks for ordo's own locks. */
static int bank_pg_claims(const bank_opts_t *o) {
  return bank_pg_is_url(o->url) && o->locks != BANK_LOCKS_ADVISORY;
}

/*
 * bank_pg_check -- the ledger's deadlocks are PostgreSQL's to find (after
 * its own deadlock_timeout), so the flags that tune or draw ordo's
 * detector, and --compare's detect-off run, mean nothing there.
 */
static int bank_pg_check(const bank_opts_t *o) {
  const char *bad = o->compare                           ? "--compare"
                    : o->graph != NULL                   ? "--graph"
                    : o->detect != ORDO_DETECT_IMMEDIATE ? "--detect"
                    : o->deadlock_timeout_ms >= 0        ? "--deadlock-timeout"
                                                         : NULL;
  if (bad == NULL)
    return CLI_EXIT_OK;
  fprintf(stderr,
          "ordo bank: %s cannot be used with the PostgreSQL ledger "
          "(--locks rows, the default for postgres URLs), where "
          "PostgreSQL detects deadlocks itself after its "
          "deadlock_timeout: drop %s, or add --locks advisory\n",
          bad, bad);
  return CLI_EXIT_USAGE;
}

/* The ledger's paragraph of `ordo bank --help`. */
static void bank_pg_usage(FILE *f) {
  fputs("The PostgreSQL ledger: with --backend postgres://user:pass@host:port"
        "/db\n"
        "(or postgresql://, or postgres:host=H port=P dbname=D user=U, a\n"
        "libpq conninfo string) the bank runs on real rows. Each run resets\n"
        "schema ordo_bank (creating it and its tables if missing): it\n"
        "empties ordo_bank.journal and re-inserts ordo_bank.accounts with\n"
        "the opening balances, so point it at a database meant for tests.\n"
        "Each transfer is one transaction on one of --workers connections:\n"
        "SELECT ... FOR UPDATE of both rows in id order (with --naive: from,\n"
        "then to, one statement each), two UPDATEs, one INSERT into the\n"
        "journal (whose unique xfer column refuses a transfer done twice),\n"
        "COMMIT. PostgreSQL finds the deadlocks (40P01, after its\n"
        "deadlock_timeout); 40P01, 40001 and 55P03 (--lock-timeout is the\n"
        "connections' lock_timeout) are rolled back and retried with\n"
        "ordo's backoff. The run passes when the total is unchanged, the\n"
        "journal holds exactly the committed transfers, each balance\n"
        "agrees with it, pg_stat_database's deadlock count equals the 40P01\n"
        "errors received, and, ordered, that count is 0. --watchdog prints\n"
        "the server's pg_locks view. --locks advisory runs the bank above\n"
        "over the postgres:// backend instead. --compare, --graph, --detect\n"
        "and --deadlock-timeout do not apply to the ledger. A server that\n"
        "is down, a wrong password, a missing database or a malformed URL\n"
        "exit with status 2.\n",
        f);
}

const bank_driver_t bank_driver_pg = {
    .name = "postgres rows",
    .claims = bank_pg_claims,
    .check = bank_pg_check,
    .usage = bank_pg_usage,
    .graphs = 0,
    .open = bank_pg_open,
    .run = bank_pg_run,
    .verify = bank_pg_verify,
    .close = bank_pg_close,
};
