/*
 * checkout.c -- ordo example: checkout and refund, the classic deadlock,
 * on PostgreSQL.
 *
 * A checkout locks a SKU's row (shop.skus), then the user's wallet
 * (shop.wallets); a refund the wallet, then the SKU. Run at once, they
 * deadlock, and PostgreSQL fails one (40P01): --naive counts these. By
 * default a request first takes both keys, "sku:<id>" and "wallet:<user>",
 * with ONE ordo_lock_all: one canonical order for every caller in every
 * process, so no cycle can form, and nobody keeps an order in their head.
 * Either way a lock wait is bounded by 200 ms, then the request drops all,
 * sleeps 20-80 ms and retries, at most 3 times, then fails ("503"). The
 * check: stock and wallets agree with the order journal (shop.orders).
 * Schema "shop" is dropped and recreated at every start: use a database
 * meant for tests. README.md: how to run it, and what it prints.
 */
#define _GNU_SOURCE
#define EX_PROG "checkout"
#include "common.h" /* here: the clocks and the hash */
#include <getopt.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <unistd.h>
#include "ordo.h"

#define LOCK_TIMEOUT_MS 200 /* every lock wait, ordo's or PostgreSQL's */
#define MAX_RETRIES 3       /* tries after the first, then "503" */
#define BACKOFF_MIN_MS 20   /* the jittered sleep before a retry */
#define BACKOFF_MAX_MS 80

/* ---- The SQL ------------------------------------------------------------
 * Each worker prepares these once. Quantities and amounts move as signed
 * deltas ($2), so one statement serves checkouts (-) and refunds (+). */
static const struct {
  const char *name, *sql;
} stmts[] = {
    {"lock_sku", "SELECT stock FROM shop.skus WHERE id = $1 FOR UPDATE"},
    {"lock_wallet",
     "SELECT balance FROM shop.wallets WHERE user_id = $1 FOR UPDATE"},
    {"move_stock", "UPDATE shop.skus SET stock = stock + $2 WHERE id = $1"},
    {"move_money",
     "UPDATE shop.wallets SET balance = balance + $2 WHERE user_id = $1"},
    {"journal", "INSERT INTO shop.orders (kind, sku, user_id, qty, amount, "
                "request) VALUES ($1, $2, $3, $4, $5, $6)"},
};
#define NSTMTS (sizeof(stmts) / sizeof(stmts[0]))

/* The schema, reset in one transaction at every start; initial keeps each
 * starting value, so that the check can be read, and rerun, as SQL. */
static const char schema_sql[] =
    "BEGIN; SET LOCAL lock_timeout = '10s'; CREATE SCHEMA IF NOT EXISTS shop;"
    "DROP TABLE IF EXISTS shop.orders, shop.skus, shop.wallets;"
    "CREATE TABLE shop.skus (id int PRIMARY KEY,"
    "  stock bigint NOT NULL CHECK (stock >= 0), initial bigint NOT NULL);"
    "CREATE TABLE shop.wallets (user_id int PRIMARY KEY,"
    "  balance bigint NOT NULL CHECK (balance >= 0), initial bigint NOT NULL);"
    "CREATE TABLE shop.orders (id bigserial PRIMARY KEY,"
    "  kind text NOT NULL CHECK (kind IN ('checkout', 'refund')),"
    "  sku int NOT NULL, user_id int NOT NULL,"
    "  qty int NOT NULL CHECK (qty > 0), amount bigint NOT NULL"
    "  CHECK (amount > 0), request bigint NOT NULL UNIQUE)";
/* The rows' starting values, $1 an int8[] (row i's value at i + 1). */
static const char *const fill_sql[2] = {
    "INSERT INTO shop.skus (id, stock, initial) "
    "SELECT o - 1, v, v FROM unnest($1::int8[]) WITH ORDINALITY AS u(v, o)",
    "INSERT INTO shop.wallets (user_id, balance, initial) "
    "SELECT o - 1, v, v FROM unnest($1::int8[]) WITH ORDINALITY AS u(v, o)"};
/* The invariant (verify): a SKU's stock is its initial stock minus its
 * journalled checkouts plus its refunds, a wallet's balance likewise. Per
 * table: rows, rows that disagree, the sum before, the sum after. */
static const char *const check_sql[2] = {
    "SELECT count(*), count(*) FILTER (WHERE t.stock <> t.initial"
    "   + coalesce(j.d, 0)), coalesce(sum(t.initial), 0),"
    "   coalesce(sum(t.stock), 0)"
    " FROM shop.skus t LEFT JOIN (SELECT sku, sum(CASE kind WHEN"
    "   'checkout' THEN -qty ELSE qty END) AS d FROM shop.orders"
    "   GROUP BY sku) j ON j.sku = t.id",
    "SELECT count(*), count(*) FILTER (WHERE t.balance <> t.initial"
    "   + coalesce(j.d, 0)), coalesce(sum(t.initial), 0),"
    "   coalesce(sum(t.balance), 0)"
    " FROM shop.wallets t LEFT JOIN (SELECT user_id, sum(CASE kind WHEN"
    "   'checkout' THEN -amount ELSE amount END) AS d FROM shop.orders"
    "   GROUP BY user_id) j ON j.user_id = t.user_id"};
/* ... and one journal row, as planned, per request that succeeded. */
static const char journal_sql[] =
    "SELECT request, kind, sku, user_id, qty, amount FROM shop.orders";

/* ---- The requests: request i is the same in every run and mode (plan) -- */
typedef enum kind_e { KIND_CHECKOUT = 0, KIND_REFUND = 1 } kind_t;
static const char *const kind_names[] = {"checkout", "refund"};

typedef struct request_s {
  kind_t kind;
  long sku, user;
  long qty;       /* units of the SKU */
  int64_t amount; /* qty times the SKU's price, in cents */
} request_t;

typedef struct opts_s opts_t;                         /* the flags, below */
enum { OUT_NOT_RUN = 0, OUT_OK = 1, OUT_FAILED = 2 }; /* a request's end */

typedef struct shop_s {
  const opts_t *o;
  int naive;             /* --naive */
  const char *conninfo;  /* what libpq gets for --db */
  char app[64];          /* "ordo-checkout-<pid>": names our connections */
  ordo_t *ordo;          /* the lock place (--naive opens it only to check) */
  _Atomic uint64_t next; /* the next request index to claim */
  uint8_t *outcome;      /* per request: its worker's, main's after joins */
  _Atomic int stop;      /* set after hard_msg: retrying cannot fix it */
  pthread_mutex_t mu;    /* guards go, abort and hard_msg */
  pthread_cond_t cv;     /* announces go or abort */
  int go, abort;
  char hard_msg[400];
} shop_t;

/* One worker: a thread, its connection and its ordo txn. Its own thread
 * writes it (main fills the first fields before), main reads it after the
 * join: no lock. */
typedef struct worker_s {
  shop_t *shop;
  long id; /* 1..workers */
  pthread_t thread;
  PGconn *conn;    /* the shop's tables */
  ordo_txn_t *txn; /* NULL with --naive */
  uint64_t rng;    /* the backoff's jitter: a counter, hashed */
  uint64_t ok, failed, retries, checkouts_ok, refunds_ok;
  uint64_t timeouts;      /* 55P03, or ordo's ETIMEDOUT */
  uint64_t deadlock_errs; /* 40P01 received (ordo's EDEADLK included) */
} worker_t;

/* One statement of a pipeline: a prepared one (stmts[]), or plain sql. */
typedef struct step_s {
  const char *stmt, *sql; /* a name from stmts[]; or BEGIN, COMMIT... */
  int n;
  const char *const *vals;
  int one_row; /* it must return or change exactly one row */
} step_t;

typedef struct args_s { /* one request's text parameters (args_fill) */
  char sku[24], user[24], qty[24], amount[24], request[24];
  char dstock[24], dmoney[24]; /* signed deltas */
} args_t;

enum { TRY_DONE, TRY_RETRY, TRY_HARD }; /* one try's outcome */

/* Below the line: pipe_run sends steps in one round trip, and if one fails
 * rolls back: TRY_RETRY for a deadlock, a lock or serialization timeout,
 * else TRY_HARD; write_steps: the writes in the story's order, COMMIT. */
static int pipe_run(worker_t *w, const step_t *s, int n);
static void args_fill(args_t *a, uint64_t idx, const request_t *r);
static void write_steps(const request_t *r, const args_t *a,
                        const char *vals[4][6], step_t out[4]);
static void shop_hard(shop_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * attempt_ordo -- one try in the default mode. Both keys are taken by one
 * ordo_lock_all, bounded by the lock timeout: ordo sorts the set, and
 * while it waits it holds none of it (postgres:// at most a prefix of the
 * order), so two requests never each hold what the other wants. Then
 * BEGIN, the UPDATEs, the journal row and COMMIT, in one round trip. The
 * UPDATEs still lock their rows in the story's order, but no row lock
 * ever waits: every transaction that changes a row holds its ordo key
 * from before BEGIN until after COMMIT, which is why COMMIT comes first.
 */
static int attempt_ordo(worker_t *w, uint64_t idx, const request_t *r) {
  char sk[32], wk[32];
  int skn = snprintf(sk, sizeof(sk), "sku:%ld", r->sku);
  int wkn = snprintf(wk, sizeof(wk), "wallet:%ld", r->user);
  /* In any order, a refund's too: ordo_lock_all sorts the set. */
  ordo_req_t keys[2] = {ORDO_REQ_X(sk, (size_t)skn),
                        ORDO_REQ_X(wk, (size_t)wkn)};
  int rc = ordo_lock_all(w->txn, keys, 2, LOCK_TIMEOUT_MS);
  w->timeouts += rc == ORDO_ETIMEDOUT;
  w->deadlock_errs += rc == ORDO_EDEADLK; /* cannot be, counted if it were */
  if (rc != 0 && ordo_is_retryable(rc))
    return TRY_RETRY; /* on any error lock_all holds nothing */
  if (rc != 0) {
    shop_hard(w->shop, "ordo_lock_all on %s: %s (%s)", ordo_url(w->shop->ordo),
              ordo_strerror(rc), ordo_err_name(rc));
    return TRY_HARD;
  }
  args_t a;
  args_fill(&a, idx, r);
  const char *vals[4][6];
  step_t steps[5] = {{NULL, "BEGIN", 0, NULL, 0}};
  write_steps(r, &a, vals, steps + 1);
  rc = pipe_run(w, steps, 5);
  ordo_unlock_all(w->txn); /* after COMMIT or ROLLBACK, never before */
  return rc;
}

/*
 * attempt_naive -- one try without ordo: BEGIN and SELECT ... FOR UPDATE
 * the first row, then the second in a round trip of its own (SKU then
 * wallet for a checkout, the reverse for a refund), then the writes and
 * COMMIT. Between the two locks another request can take the second row
 * and wait for the first: PostgreSQL fails one with 40P01 (pipe_run rolls
 * it back). SET lock_timeout bounds every wait by the same 200 ms.
 */
static int attempt_naive(worker_t *w, uint64_t idx, const request_t *r) {
  args_t a;
  args_fill(&a, idx, r);
  const char *sku[1] = {a.sku}, *user[1] = {a.user};
  step_t lock_sku = {"lock_sku", NULL, 1, sku, 1};
  step_t lock_wallet = {"lock_wallet", NULL, 1, user, 1};
  int checkout = r->kind == KIND_CHECKOUT;
  step_t first[2] = {{NULL, "BEGIN", 0, NULL, 0},
                     checkout ? lock_sku : lock_wallet};
  int rc = pipe_run(w, first, 2);
  if (rc == TRY_DONE)
    rc = pipe_run(w, checkout ? &lock_wallet : &lock_sku, 1);
  if (rc != TRY_DONE)
    return rc;
  const char *vals[4][6];
  step_t writes[4];
  write_steps(r, &a, vals, writes);
  return pipe_run(w, writes, 4);
}

/* request_run -- the backstop around request r: after a retryable failure
 * (nothing held) sleep a uniform 20-80 ms, so that colliding requests do
 * not collide again in step; at most MAX_RETRIES times, then "503". */
static void request_run(worker_t *w, uint64_t idx, const request_t *r) {
  for (int tries = 0;; tries++) {
    int rc =
        w->shop->naive ? attempt_naive(w, idx, r) : attempt_ordo(w, idx, r);
    if (rc == TRY_DONE) {
      w->shop->outcome[idx] = OUT_OK;
      w->ok++;
      w->checkouts_ok += r->kind == KIND_CHECKOUT;
      w->refunds_ok += r->kind == KIND_REFUND;
      return;
    }
    if (rc == TRY_HARD)
      return; /* the run stops; this request counts as not run */
    if (tries == MAX_RETRIES) {
      w->shop->outcome[idx] = OUT_FAILED;
      w->failed++;
      return;
    }
    w->retries++;
    uint64_t h = ex_mix64(w->rng++); /* SplitMix64: a hash of a counter */
    ex_sleep_us(1000 * (BACKOFF_MIN_MS +
                        (long)(h % (BACKOFF_MAX_MS - BACKOFF_MIN_MS + 1))));
  }
}

/* ---- plumbing below: flags, connections, schema, check, report ------- */
/*
 * main() parses the flags, opens the lock place, resets the schema on a
 * control connection and reads pg_stat_database.deadlocks; --workers
 * threads (worker_main: each with its own connection and ordo txn) claim
 * request indexes from a shared counter and run them (request_run, above);
 * run() then closes every connection, waits until their server processes
 * are gone, reads the deadlock counter again and checks the tables against
 * the journal (verify).
 */

#define CONNECT_TIMEOUT_S "5" /* libpq's connect_timeout, unless --db says */
#define GONE_WAIT_S 10        /* how long to wait for our backends to exit */

/* The URLs accepted, for error lines. */
#define DB_FORMS                                                               \
  "postgres://USER:PASS@HOST:PORT/DB, postgresql://USER:PASS@HOST:PORT/DB, "   \
  "postgres:CONNINFO (each URI with an optional ?query)"

#define EXIT_OK 0
#define EXIT_FAIL 1  /* the check failed, or the database cannot be used */
#define EXIT_USAGE 2 /* bad flags or URLs */

/* SQLSTATEs after which PostgreSQL has rolled the transaction back. */
#define SQLSTATE_DEADLOCK "40P01"     /* deadlock_detected */
#define SQLSTATE_LOCK_TIMEOUT "55P03" /* lock_not_available */
#define SQLSTATE_SERIALIZE "40001"    /* serialization_failure */

typedef struct opts_s {
  const char *db;      /* --db, required */
  const char *backend; /* --backend, or NULL: the --db database */
  long workers, requests, skus, users;
  int naive, json;
} opts_t;

static void usage(FILE *f) {
  fputs(
      "usage: checkout --db URL [--backend URL] [--naive] [--workers N]\n"
      "                [--requests N] [--skus N] [--users N] [--json]\n"
      "\n"
      "Checkouts (lock the SKU, then the wallet) and refunds (the wallet,\n"
      "then the SKU) at once on PostgreSQL rows. By default each request\n"
      "takes both locks through ordo in canonical order (one ordo_lock_all\n"
      "of sku:<id> and wallet:<user>), so no deadlock can happen; --naive\n"
      "locks the rows with SELECT ... FOR UPDATE in the request's own\n"
      "order, and PostgreSQL finds the deadlocks (40P01). Every lock wait\n"
      "is bounded by 200 ms; after a timeout or a deadlock a request drops\n"
      "everything, sleeps 20-80 ms (jittered) and retries, at most 3 times,\n"
      "then fails (\"503\") holding nothing. At the end, the stock and the\n"
      "wallets must agree with the order journal.\n"
      "\n"
      "  --db URL       the shop's database: postgres://user:pw@host:port/db\n"
      "                 (or postgresql://..., or postgres:CONNINFO). Its\n"
      "                 schema \"shop\" (tables skus, wallets, orders) is\n"
      "                 DROPPED and recreated at every start: use a\n"
      "                 database meant for tests. Required.\n"
      "  --backend URL  where ordo takes its locks: mem://, ordod://...,\n"
      "                 redis://..., postgres://... (default: the --db\n"
      "                 database, as advisory locks); unused with --naive\n"
      "  --naive        no ordo: SELECT ... FOR UPDATE of the SKU then the\n"
      "                 wallet (checkout), the wallet then the SKU (refund)\n"
      "  --workers N    threads, each with its own connection (8)\n"
      "  --requests N   checkouts and refunds in all, a fixed mix (2000)\n"
      "  --skus N       SKUs the requests spread over (4)\n"
      "  --users N      users, one wallet each (4)\n"
      "  --json         one JSON object instead of the summary\n"
      "  -h, --help     this help\n"
      "\n"
      "Exit status: 0 when the tables agree with the journal; 1 when they\n"
      "do not, or the run could not finish (the database cannot be\n"
      "reached, ...); 2 for bad flags or URLs. PostgreSQL looks for a\n"
      "deadlock only after a wait of deadlock_timeout (1 s by default,\n"
      "longer than the 200 ms lock timeout): set it lower (the test\n"
      "cluster has 10ms) to see --naive's deadlocks as deadlocks.\n",
      f);
}

/* Parses a decimal in [min, max] into *out; -1 if it is not one. */
static int parse_long(const char *s, long min, long max, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
    return -1;
  *out = v;
  return 0;
}

static int parse_opts(int argc, char **argv, opts_t *o) {
  static const struct option longs[] = {
      {"db", required_argument, NULL, 'd'},
      {"backend", required_argument, NULL, 'b'},
      {"naive", no_argument, NULL, 'n'},
      {"workers", required_argument, NULL, 'w'},
      {"requests", required_argument, NULL, 'r'},
      {"skus", required_argument, NULL, 's'},
      {"users", required_argument, NULL, 'u'},
      {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  *o = (opts_t){NULL, NULL, 8, 2000, 4, 4, 0, 0};
  int c, li = -1;
  opterr = 0; /* our own error lines */
  while ((c = getopt_long(argc, argv, "h", longs, &li)) != -1) {
    long *num = NULL, max = 0;
    switch (c) {
    case 'd':
      o->db = optarg;
      break;
    case 'b':
      o->backend = optarg;
      break;
    case 'n':
      o->naive = 1;
      break;
    case 'j':
      o->json = 1;
      break;
    case 'h':
      usage(stdout);
      exit(EXIT_OK);
    case 'w':
      num = &o->workers, max = 64; /* each is a connection or two */
      break;
    case 'r':
      num = &o->requests, max = 1000000;
      break;
    case 's':
      num = &o->skus, max = 1000;
      break;
    case 'u':
      num = &o->users, max = 1000;
      break;
    default:
      fprintf(stderr,
              "checkout: unknown flag or missing value: '%s'; see "
              "checkout --help\n",
              argv[optind - 1]);
      return -1;
    }
    if (num != NULL && parse_long(optarg, 1, max, num) != 0) {
      fprintf(stderr, "checkout: --%s wants a number from 1 to %ld, not '%s'\n",
              longs[li].name, max, optarg);
      return -1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "checkout: unexpected argument '%s'; see checkout --help\n",
            argv[optind]);
    return -1;
  }
  if (o->db == NULL) {
    fputs("checkout: --db URL is required (postgres://user:pass@host:port/db, "
          "a database whose schema \"shop\" may be reset)\n",
          stderr);
    return -1;
  }
  return 0;
}

/* plan -- request i: its kind, SKU, user and quantity from a hash of i. */
static request_t plan(const opts_t *o, uint64_t i) {
  uint64_t h = ex_mix64(i);
  request_t r;
  r.kind = (h & 1) ? KIND_REFUND : KIND_CHECKOUT;
  r.sku = (long)((h >> 8) % (uint64_t)o->skus);
  r.user = (long)((h >> 24) % (uint64_t)o->users);
  r.qty = 1 + (long)((h >> 40) % 3);
  r.amount = r.qty * (int64_t)(250 + 125 * r.sku); /* the SKU's price */
  return r;
}

/* Records the first unretryable error and tells every worker to stop. */
static void shop_hard(shop_t *s, const char *fmt, ...) {
  pthread_mutex_lock(&s->mu);
  if (s->hard_msg[0] == '\0') {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->hard_msg, sizeof(s->hard_msg), fmt, ap);
    va_end(ap);
  }
  pthread_mutex_unlock(&s->mu);
  atomic_store(&s->stop, 1);
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  shop_t *s = w->shop;
  /* Wait at the gate, so that every worker starts at once. */
  pthread_mutex_lock(&s->mu);
  while (!s->go && !s->abort)
    pthread_cond_wait(&s->cv, &s->mu);
  int go = s->go;
  pthread_mutex_unlock(&s->mu);
  while (go && !atomic_load(&s->stop)) {
    uint64_t idx = atomic_fetch_add(&s->next, 1);
    if (idx >= (uint64_t)s->o->requests)
      break;
    request_t r = plan(s->o, idx);
    request_run(w, idx, &r);
  }
  return NULL;
}

/* ---- SQL: one request's steps, as a pipeline ---------------------------- */

static int sqlstate_retryable(const char *st) {
  return strcmp(st, SQLSTATE_DEADLOCK) == 0 ||
         strcmp(st, SQLSTATE_LOCK_TIMEOUT) == 0 ||
         strcmp(st, SQLSTATE_SERIALIZE) == 0;
}

/* The first line of libpq's message, without "ERROR:  ". */
static void first_line(const char *m, char *out, size_t cap) {
  if (m == NULL)
    m = "";
  if (strncmp(m, "ERROR:  ", 8) == 0 || strncmp(m, "FATAL:  ", 8) == 0)
    m += 8;
  snprintf(out, cap, "%.*s", (int)strcspn(m, "\n"), m);
}

/*
 * pipe_run -- sends steps[0..n) and a sync in one go (the connection is in
 * pipeline mode: one round trip for the lot) and reads every result.
 * Returns TRY_DONE when each step succeeded. When one failed, PostgreSQL
 * skipped the rest (PGRES_PIPELINE_ABORTED); an open transaction block is
 * then rolled back here, so the caller holds no row lock, and the result
 * is TRY_RETRY for a deadlock, a lock timeout or a serialization failure,
 * TRY_HARD (with the reason in the shop) for anything else.
 */
static int pipe_run(worker_t *w, const step_t *s, int n) {
  PGconn *c = w->conn;
  int broken = 0, failed = -1;
  char st[6] = "", msg[300] = "";
  for (int i = 0; i < n && !broken; i++)
    broken = !(s[i].stmt ? PQsendQueryPrepared(c, s[i].stmt, s[i].n, s[i].vals,
                                               NULL, NULL, 0)
                         : PQsendQueryParams(c, s[i].sql, 0, NULL, NULL, NULL,
                                             NULL, 0));
  broken = broken || !PQpipelineSync(c);
  for (int i = 0; i < n && !broken; i++) {
    PGresult *res = PQgetResult(c);
    if (res == NULL) {
      broken = 1;
      break;
    }
    ExecStatusType rs = PQresultStatus(res);
    if (failed < 0 && rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK) {
      const char *code = PQresultErrorField(res, PG_DIAG_SQLSTATE);
      snprintf(st, sizeof(st), "%s", code ? code : "");
      first_line(PQresultErrorMessage(res), msg, sizeof(msg));
      failed = i;
    } else if (failed < 0 && s[i].one_row &&
               strcmp(PQcmdTuples(res), "1") != 0) {
      snprintf(msg, sizeof(msg), "%s touched %s rows, not 1",
               s[i].stmt ? s[i].stmt : s[i].sql, PQcmdTuples(res));
      failed = i;
    }
    PQclear(res);
    /* A statement's results end with a NULL. */
    while ((res = PQgetResult(c)) != NULL)
      PQclear(res);
  }
  if (!broken) {
    PGresult *res = PQgetResult(c);
    broken = res == NULL || PQresultStatus(res) != PGRES_PIPELINE_SYNC;
    PQclear(res);
  }
  if (broken || PQstatus(c) != CONNECTION_OK) {
    char line[300];
    first_line(PQerrorMessage(c), line, sizeof(line));
    shop_hard(w->shop, "worker %ld lost its connection: %s", w->id, line);
    return TRY_HARD;
  }
  if (failed < 0)
    return TRY_DONE;
  if (strcmp(st, SQLSTATE_DEADLOCK) == 0)
    w->deadlock_errs++;
  else if (strcmp(st, SQLSTATE_LOCK_TIMEOUT) == 0)
    w->timeouts++;
  if (PQtransactionStatus(c) != PQTRANS_IDLE) {
    static const step_t rollback = {NULL, "ROLLBACK", 0, NULL, 0};
    if (pipe_run(w, &rollback, 1) != TRY_DONE)
      return TRY_HARD;
  }
  if (st[0] != '\0' && sqlstate_retryable(st))
    return TRY_RETRY;
  shop_hard(w->shop, "%s failed: %s%s%s%s",
            s[failed].stmt ? s[failed].stmt : s[failed].sql, msg,
            st[0] ? " (SQLSTATE " : "", st, st[0] ? ")" : "");
  return TRY_HARD;
}

static void args_fill(args_t *a, uint64_t idx, const request_t *r) {
  int in = r->kind == KIND_REFUND; /* stock comes back, money goes back */
  snprintf(a->sku, sizeof(a->sku), "%ld", r->sku);
  snprintf(a->user, sizeof(a->user), "%ld", r->user);
  snprintf(a->qty, sizeof(a->qty), "%ld", r->qty);
  snprintf(a->amount, sizeof(a->amount), "%" PRId64, r->amount);
  snprintf(a->request, sizeof(a->request), "%" PRIu64, idx);
  snprintf(a->dstock, sizeof(a->dstock), "%ld", in ? r->qty : -r->qty);
  snprintf(a->dmoney, sizeof(a->dmoney), "%" PRId64,
           in ? r->amount : -r->amount);
}

/*
 * write_steps -- the writes of one request, in the story's order (a
 * checkout touches the SKU first, a refund the wallet first), then the
 * journal row and COMMIT: steps[0..4). vals must outlive the steps.
 */
static void write_steps(const request_t *r, const args_t *a,
                        const char *vals[4][6], step_t out[4]) {
  vals[0][0] = a->sku, vals[0][1] = a->dstock;
  vals[1][0] = a->user, vals[1][1] = a->dmoney;
  vals[2][0] = kind_names[r->kind], vals[2][1] = a->sku;
  vals[2][2] = a->user, vals[2][3] = a->qty;
  vals[2][4] = a->amount, vals[2][5] = a->request;
  step_t stock = {"move_stock", NULL, 2, vals[0], 1};
  step_t money = {"move_money", NULL, 2, vals[1], 1};
  out[0] = r->kind == KIND_CHECKOUT ? stock : money;
  out[1] = r->kind == KIND_CHECKOUT ? money : stock;
  out[2] = (step_t){"journal", NULL, 6, vals[2], 1};
  out[3] = (step_t){NULL, "COMMIT", 0, NULL, 0};
}

/* ---- Connections ------------------------------------------------------- */

/* The conninfo libpq gets for a --db URL; NULL when it is no PostgreSQL
 * URL. postgres:// and postgresql:// URIs are libpq's own;
 * postgres:KEY=VALUE... is a conninfo string after the prefix. */
static const char *db_conninfo(const char *url) {
  if (strncmp(url, "postgres://", 11) == 0 ||
      strncmp(url, "postgresql://", 13) == 0)
    return url;
  if (strncmp(url, "postgres:", 9) == 0)
    return url + 9;
  return NULL;
}

/*
 * same_db_url -- the lock place's URL when --backend is not given: the
 * --db URL itself (ordo's postgres:// backend takes the same forms), with
 * an application_name of the run's, so that the wait for the run's server
 * processes (backends_gone) covers ordo's connections too. A URI gets it
 * as a query parameter, postgres:CONNINFO as one more KEY=VALUE. Returns
 * 0, or -1 when it does not fit in out.
 */
static int same_db_url(const char *db, const char *app, char *out, size_t cap) {
  const char *sep;
  if (db_conninfo(db) != db)
    sep = " "; /* postgres:KEY=VALUE ... */
  else if (strchr(db, '?') != NULL)
    sep = "&";
  else
    sep = "?";
  int n = snprintf(out, cap, "%s%sapplication_name=%s-locks", db, sep, app);
  return n >= 0 && (size_t)n < cap ? 0 : -1;
}

/*
 * check_db_url -- is url something libpq can use? Returns 0, or -1 after a
 * line saying why not. libpq checks a port's digits only when it connects,
 * so they are checked here: a typo is a usage error, not a server that is
 * down.
 */
static int check_db_url(const char *url, const char *shown) {
  const char *ci = db_conninfo(url);
  if (ci == NULL) {
    fprintf(stderr,
            "checkout: bad --db URL '%s': not PostgreSQL; accepted forms "
            "are %s\n",
            shown, DB_FORMS);
    return -1;
  }
  char *err = NULL;
  PQconninfoOption *opts = PQconninfoParse(ci, &err);
  if (opts == NULL) {
    char line[300];
    first_line(err ? err : "out of memory", line, sizeof(line));
    fprintf(stderr, "checkout: bad --db URL '%s': %s; accepted forms are %s\n",
            shown, line, DB_FORMS);
    PQfreemem(err);
    return -1;
  }
  int bad = 0;
  for (PQconninfoOption *p = opts; p->keyword != NULL; p++)
    if (strcmp(p->keyword, "port") == 0 && p->val != NULL &&
        p->val[strspn(p->val, "0123456789,")] != '\0') {
      fprintf(stderr,
              "checkout: bad --db URL '%s': the port '%s' is not a "
              "number; accepted forms are %s\n",
              shown, p->val, DB_FORMS);
      bad = 1;
    }
  PQconninfoFree(opts);
  return bad ? -1 : 0;
}

/*
 * redact -- url with its password shown as ***, for every line printed:
 * the password of user:password@ in a URI, and the value of password=.
 */
static void redact(const char *url, char *out, size_t cap) {
  size_t o = 0;
  const char *p = url;
  const char *auth = strstr(url, "://");
  const char *at = auth ? strchr(auth + 3, '@') : NULL;
  const char *slash = auth ? strchr(auth + 3, '/') : NULL;
  const char *colon = auth ? strchr(auth + 3, ':') : NULL;
  int has_pw = at && colon && colon < at && (!slash || at < slash);
  while (*p != '\0' && o + 1 < cap) {
    if (has_pw && p == colon + 1) {
      o += (size_t)snprintf(out + o, cap - o, "***");
      p = at;
    } else if (strncmp(p, "password=", 9) == 0 &&
               (p == url || strchr("?& :", p[-1]) != NULL)) {
      o += (size_t)snprintf(out + o, cap - o, "password=***");
      p += 9 + strcspn(p + 9, "& ");
    } else {
      out[o++] = *p++;
    }
    if (o >= cap)
      o = cap - 1;
  }
  out[o] = '\0';
}

/* Opens a connection to the shop's database, named app so that the run can
 * tell its own server processes in pg_stat_activity. NULL only when out of
 * memory; otherwise check PQstatus. */
static PGconn *db_connect(const char *conninfo, const char *app) {
  /* connect_timeout first, so that the URL's own wins; application_name
   * after the URL (dbname, expanded), so that ours wins. */
  const char *kw[] = {"connect_timeout", "dbname", "application_name", NULL};
  const char *val[] = {CONNECT_TIMEOUT_S, conninfo, app, NULL};
  return PQconnectdbParams(kw, val, 1);
}

/* The line for a connection that failed: where, libpq's words, and what
 * to check. Exit status 1: the flags were fine, the database is not. */
static int connect_failed(PGconn *c, const char *shown) {
  char why[400];
  const char *m = c ? PQerrorMessage(c) : "out of memory";
  const char *f = strstr(m, "failed: ");
  if (f != NULL && f < m + strcspn(m, "\n"))
    m = f + 8; /* after "connection to server at ... failed: " */
  first_line(m, why, sizeof(why));
  const char *host = c && PQhost(c) ? PQhost(c) : "?";
  const char *port = c && PQport(c) ? PQport(c) : "?";
  const char *db = c && PQdb(c) ? PQdb(c) : "?";
  const char *user = c && PQuser(c) ? PQuser(c) : "?";
  fprintf(stderr,
          "checkout: cannot connect to PostgreSQL at %s port %s (database "
          "'%s', user '%s', --db '%s'): %s; ",
          host, port, db, user, shown, why);
  if (strstr(why, "database") && strstr(why, "does not exist"))
    fprintf(stderr, "create the database (createdb %s) or name another\n", db);
  else if (strstr(why, "password") || strstr(why, "authentication"))
    fprintf(stderr, "check the user name and password in --db\n");
  else
    fprintf(stderr,
            "check that PostgreSQL is running on %s port %s and accepts "
            "connections there\n",
            host, port);
  return EXIT_FAIL;
}

/* Runs sql on the control connection; NULL (after a line) unless it
 * answered want. */
static PGresult *ctl_exec(PGconn *c, const char *sql, ExecStatusType want,
                          const char *doing) {
  PGresult *res = PQexec(c, sql);
  if (res != NULL && PQresultStatus(res) == want)
    return res;
  char line[300];
  first_line(PQerrorMessage(c), line, sizeof(line));
  fprintf(stderr, "checkout: cannot %s: %s\n", doing, line);
  PQclear(res);
  return NULL;
}

/* ---- Setup ---------------------------------------------------------------
 */

/* Writes "{v0,v1,...}" of n longs into a malloc'd string (an int8[]). */
static char *pg_array(const int64_t *v, long n) {
  size_t cap = (size_t)n * 21 + 3, o = 0;
  char *s = malloc(cap);
  if (s == NULL)
    return NULL;
  s[o++] = '{';
  for (long i = 0; i < n; i++)
    o += (size_t)snprintf(s + o, cap - o, "%s%" PRId64, i ? "," : "", v[i]);
  snprintf(s + o, cap - o, "}");
  return s;
}

/*
 * schema_reset -- drops and recreates schema shop's tables, in one
 * transaction, and fills them. Each SKU starts with as much stock as the
 * plan's checkouts of it could take, and each wallet with as much money as
 * its checkouts could spend, so no request is ever refused for want of
 * either (that would be another story); the CHECKs would catch it.
 * initial keeps the starting value beside the current one, so the check
 * at the end can be read (and rerun) as plain SQL.
 */
static int schema_reset(PGconn *c, const opts_t *o) {
  int64_t *stock = calloc((size_t)o->skus, sizeof(int64_t));
  int64_t *money = calloc((size_t)o->users, sizeof(int64_t));
  char *a_stock = NULL, *a_money = NULL;
  int rc = -1;
  if (stock == NULL || money == NULL)
    goto out;
  for (long i = 0; i < o->requests; i++) {
    request_t r = plan(o, (uint64_t)i);
    if (r.kind == KIND_CHECKOUT)
      stock[r.sku] += r.qty, money[r.user] += r.amount;
  }
  a_stock = pg_array(stock, o->skus);
  a_money = pg_array(money, o->users);
  if (a_stock == NULL || a_money == NULL)
    goto out;
  PGresult *res = ctl_exec(
      c, schema_sql, PGRES_COMMAND_OK,
      "reset schema shop (is another checkout running on this database? "
      "may this role create a schema?)");
  if (res == NULL)
    goto out;
  PQclear(res);
  const char *p1[1] = {a_stock}, *p2[1] = {a_money};
  res = PQexecParams(c, fill_sql[0], 1, NULL, p1, NULL, NULL, 0);
  int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
  PQclear(res);
  if (ok) {
    res = PQexecParams(c, fill_sql[1], 1, NULL, p2, NULL, NULL, 0);
    ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
  }
  if (ok) {
    res = ctl_exec(c, "COMMIT", PGRES_COMMAND_OK, "commit the reset");
    ok = res != NULL;
    PQclear(res);
  } else {
    char line[300];
    first_line(PQerrorMessage(c), line, sizeof(line));
    fprintf(stderr, "checkout: cannot fill the shop's tables: %s\n", line);
  }
  if (!ok && PQtransactionStatus(c) != PQTRANS_IDLE)
    PQclear(PQexec(c, "ROLLBACK"));
  rc = ok ? 0 : -1;
out:
  if (rc != 0 &&
      (stock == NULL || money == NULL || a_stock == NULL || a_money == NULL))
    fputs("checkout: out of memory\n", stderr);
  free(stock);
  free(money);
  free(a_stock);
  free(a_money);
  return rc;
}

/* Reads one integer of a one-row query into *v. */
static int ctl_int(PGconn *c, const char *sql, const char *doing, int64_t *v) {
  PGresult *res = ctl_exec(c, sql, PGRES_TUPLES_OK, doing);
  if (res == NULL)
    return -1;
  int ok = PQntuples(res) == 1 && !PQgetisnull(res, 0, 0);
  if (ok)
    *v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
  else
    fprintf(stderr, "checkout: cannot %s: no value\n", doing);
  PQclear(res);
  return ok ? 0 : -1;
}

/*
 * deadlocks_read -- pg_stat_database.deadlocks of this database. A query
 * reads statistics from a snapshot that can be older than the question:
 * clear it first, so that the count is this moment's.
 */
static int deadlocks_read(PGconn *c, int64_t *v) {
  PGresult *res = ctl_exec(c, "SELECT pg_stat_clear_snapshot()",
                           PGRES_TUPLES_OK, "clear the statistics snapshot");
  if (res == NULL)
    return -1;
  PQclear(res);
  return ctl_int(c,
                 "SELECT deadlocks FROM pg_stat_database "
                 "WHERE datname = current_database()",
                 "read pg_stat_database.deadlocks", v);
}

/*
 * backends_gone -- waits (at most GONE_WAIT_S) until no server process of
 * ours is left but the control connection's. A backend adds its deadlocks
 * to pg_stat_database when it exits, which is a little after the client
 * closed the connection: before that, the count is short. Returns how many
 * were left, or -1 when the query failed.
 */
static long backends_gone(PGconn *c, const char *app) {
  char like[80];
  snprintf(like, sizeof(like), "%s-%%", app);
  const char *vals[1] = {like};
  double end = ex_now_s() + GONE_WAIT_S;
  for (;;) {
    PGresult *res = PQexecParams(c,
                                 "SELECT count(*) FROM pg_stat_activity "
                                 "WHERE application_name LIKE $1 "
                                 "AND pid <> pg_backend_pid()",
                                 1, NULL, vals, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
      char line[300];
      first_line(PQerrorMessage(c), line, sizeof(line));
      fprintf(stderr, "checkout: cannot read pg_stat_activity: %s\n", line);
      PQclear(res);
      return -1;
    }
    long n = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    if (n == 0 || ex_now_s() >= end)
      return n;
    ex_sleep_us(10000);
  }
}

/*
 * worker_open -- the worker's connection (lock_timeout set, statements
 * prepared, pipeline mode on) and, in the default mode, its ordo
 * transaction. Returns 0, or the exit status after a line.
 */
static int worker_open(worker_t *w, const char *shown) {
  shop_t *s = w->shop;
  char app[80];
  snprintf(app, sizeof(app), "%.63s-shop", s->app);
  w->conn = db_connect(s->conninfo, app);
  if (w->conn == NULL || PQstatus(w->conn) != CONNECTION_OK)
    return connect_failed(w->conn, shown);
  char set[64];
  snprintf(set, sizeof(set), "SET lock_timeout = '%dms'", LOCK_TIMEOUT_MS);
  PGresult *res = ctl_exec(w->conn, set, PGRES_COMMAND_OK, "set lock_timeout");
  if (res == NULL)
    return EXIT_FAIL;
  PQclear(res);
  for (size_t k = 0; k < NSTMTS; k++) {
    res = PQprepare(w->conn, stmts[k].name, stmts[k].sql, 0, NULL);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    if (!ok) {
      char line[300];
      first_line(PQerrorMessage(w->conn), line, sizeof(line));
      fprintf(stderr, "checkout: cannot prepare %s: %s\n", stmts[k].name, line);
      return EXIT_FAIL;
    }
  }
  /* From here on, a request's statements travel together (pipe_run). */
  if (!PQenterPipelineMode(w->conn)) {
    fputs("checkout: cannot enter pipeline mode (libpq 14 or later is "
          "needed)\n",
          stderr);
    return EXIT_FAIL;
  }
  if (!s->naive) {
    ordo_txn_options_t to = {0, NULL, 0};
    char name[32];
    snprintf(name, sizeof(name), "worker %ld", w->id);
    to.name = name;
    int rc = ordo_txn_begin(s->ordo, &w->txn, &to);
    if (rc != 0) {
      /* postgres:// connects here, so an unreachable lock place shows now. */
      fprintf(stderr,
              "checkout: cannot begin an ordo transaction on %s: %s (%s); "
              "check that the --backend server is running and the URL is "
              "right\n",
              ordo_url(s->ordo), ordo_strerror(rc), ordo_err_name(rc));
      w->txn = NULL;
      return EXIT_FAIL;
    }
  }
  return 0;
}

/* ---- The check -----------------------------------------------------------
 */

typedef struct result_s {
  /* From the workers. */
  uint64_t ok, failed, not_run, retries, timeouts, deadlock_errs;
  uint64_t checkouts_ok, refunds_ok;
  double seconds;
  /* From PostgreSQL. */
  char deadlock_timeout[32]; /* SHOW deadlock_timeout: "10ms" */
  int64_t deadlock_timeout_ms;
  int64_t deadlocks; /* pg_stat_database.deadlocks, after minus before */
  long backends_left;
  /* The invariant. */
  int64_t journal_rows, sku_rows, wallet_rows;
  int64_t bad_skus, bad_wallets; /* rows that disagree with the journal */
  int64_t stock_before, stock_after, money_before, money_after;
  uint64_t misplanned; /* journal rows unlike the plan's request */
  uint64_t phantom;    /* journal rows for requests that did not succeed */
  uint64_t missing;    /* requests that succeeded without a journal row */
  int invariant_ok;
  char why[300]; /* what disagrees, when something does */
} result_t;

/* Appends a reason to r->why. */
static void why_add(result_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void why_add(result_t *r, const char *fmt, ...) {
  size_t n = strlen(r->why);
  if (n > 0 && n + 2 < sizeof(r->why))
    n += (size_t)snprintf(r->why + n, sizeof(r->why) - n, "; ");
  if (n >= sizeof(r->why))
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->why + n, sizeof(r->why) - n, fmt, ap);
  va_end(ap);
}

/*
 * verify -- the invariant: for every SKU, stock = initial - the units its
 * journalled checkouts took + the units its refunds brought back; for
 * every wallet, balance = initial - spent + refunded; and the journal
 * holds exactly one row, as planned, for each request that succeeded and
 * none for a request that failed (503) or never ran. Then no stock and no
 * money was created or lost. Returns 0, or -1 when it could not read.
 */
static int verify(PGconn *c, const shop_t *s, result_t *r) {
  int64_t *out[2][4] = {
      {&r->sku_rows, &r->bad_skus, &r->stock_before, &r->stock_after},
      {&r->wallet_rows, &r->bad_wallets, &r->money_before, &r->money_after}};
  for (int k = 0; k < 2; k++) {
    PGresult *res = ctl_exec(c, check_sql[k], PGRES_TUPLES_OK,
                             k ? "check the wallets" : "check the stock");
    if (res == NULL)
      return -1;
    for (int f = 0; f < 4; f++)
      *out[k][f] = strtoll(PQgetvalue(res, 0, f), NULL, 10);
    PQclear(res);
  }

  /* The journal against the plan and against what the workers saw. */
  PGresult *res = ctl_exec(c, journal_sql, PGRES_TUPLES_OK, "read the journal");
  if (res == NULL)
    return -1;
  uint64_t n = (uint64_t)s->o->requests;
  uint8_t *seen = calloc(n, 1);
  if (seen == NULL) {
    PQclear(res);
    fputs("checkout: out of memory\n", stderr);
    return -1;
  }
  r->journal_rows = PQntuples(res);
  for (int t = 0; t < PQntuples(res); t++) {
    long long idx = strtoll(PQgetvalue(res, t, 0), NULL, 10);
    if (idx < 0 || (uint64_t)idx >= n) {
      r->misplanned++;
      continue;
    }
    request_t p = plan(s->o, (uint64_t)idx);
    if (strcmp(PQgetvalue(res, t, 1), kind_names[p.kind]) != 0 ||
        strtol(PQgetvalue(res, t, 2), NULL, 10) != p.sku ||
        strtol(PQgetvalue(res, t, 3), NULL, 10) != p.user ||
        strtol(PQgetvalue(res, t, 4), NULL, 10) != p.qty ||
        strtoll(PQgetvalue(res, t, 5), NULL, 10) != p.amount)
      r->misplanned++;
    if (s->outcome[idx] != OUT_OK)
      r->phantom++;
    seen[idx] = 1;
  }
  PQclear(res);
  for (uint64_t i = 0; i < n; i++)
    if (s->outcome[i] == OUT_OK && !seen[i])
      r->missing++;
  free(seen);

  if (r->sku_rows != s->o->skus || r->wallet_rows != s->o->users)
    why_add(r, "%" PRId64 " SKU rows and %" PRId64 " wallets, not %ld and %ld",
            r->sku_rows, r->wallet_rows, s->o->skus, s->o->users);
  if (r->bad_skus != 0)
    why_add(r, "%" PRId64 " SKUs' stock disagrees with the journal",
            r->bad_skus);
  if (r->bad_wallets != 0)
    why_add(r, "%" PRId64 " wallets disagree with the journal", r->bad_wallets);
  if (r->misplanned != 0)
    why_add(r, "%" PRIu64 " journal rows are not the planned request",
            r->misplanned);
  if (r->phantom != 0)
    why_add(r, "%" PRIu64 " journal rows for requests that did not succeed",
            r->phantom);
  if (r->missing != 0)
    why_add(r, "%" PRIu64 " successful requests have no journal row",
            r->missing);
  if ((uint64_t)r->journal_rows != r->ok)
    why_add(r, "%" PRId64 " journal rows for %" PRIu64 " successful requests",
            r->journal_rows, r->ok);
  r->invariant_ok = r->why[0] == '\0';
  return 0;
}

/* ---- Reports -------------------------------------------------------------
 */

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      printf("\\%c", ch);
    else if (ch < 0x20)
      printf("\\u%04x", ch);
    else
      putchar(ch);
  }
  putchar('"');
}

static void print_human(const opts_t *o, const char *db, const char *locks,
                        const result_t *r) {
  double rate = r->seconds > 0 ? (double)r->ok / r->seconds : 0;
  printf("checkout: %s mode, %ld workers, %ld requests (checkouts and "
         "refunds) over %ld SKU%s and %ld user%s\n",
         o->naive ? "naive" : "ordo", o->workers, o->requests, o->skus,
         o->skus == 1 ? "" : "s", o->users, o->users == 1 ? "" : "s");
  printf("database  %s (schema shop, reset), deadlock_timeout %s\n", db,
         r->deadlock_timeout);
  if (o->naive)
    printf("locks     rows, SELECT ... FOR UPDATE: SKU then wallet "
           "(checkout), wallet then SKU (refund)\n");
  else
    printf("locks     ordo_lock_all of sku:<id> and wallet:<user> on %s\n",
           locks);
  printf("backstop  lock timeout %d ms; then drop everything, sleep %d-%d "
         "ms, retry at most %d times, then 503\n",
         LOCK_TIMEOUT_MS, BACKOFF_MIN_MS, BACKOFF_MAX_MS, MAX_RETRIES);
  printf("requests  %" PRIu64 " ok (%" PRIu64 " checkouts, %" PRIu64
         " refunds), %" PRIu64 " failed (503), %" PRIu64 " retries; %.2f s, "
         "%.0f/s\n",
         r->ok, r->checkouts_ok, r->refunds_ok, r->failed, r->retries,
         r->seconds, rate);
  if (r->not_run != 0)
    printf("          %" PRIu64 " not run: the run stopped early\n",
           r->not_run);
  printf("timeouts  %" PRIu64 " (%s)\n", r->timeouts,
         o->naive ? "55P03 lock_not_available" : "ordo_lock_all ETIMEDOUT");
  printf("deadlocks %" PRId64 " (pg_stat_database.deadlocks, after minus "
         "before); %" PRIu64 " deadlock errors (40P01) received: %s\n",
         r->deadlocks, r->deadlock_errs,
         (uint64_t)r->deadlocks == r->deadlock_errs ? "they agree"
                                                    : "they differ");
  printf("journal   %" PRId64 " orders; stock %" PRId64 " -> %" PRId64
         " units, wallets %" PRId64 " -> %" PRId64 " cents\n",
         r->journal_rows, r->stock_before, r->stock_after, r->money_before,
         r->money_after);
  if (o->naive && r->deadlock_timeout_ms >= LOCK_TIMEOUT_MS)
    printf("note      deadlock_timeout %s is not below the %d ms lock "
           "timeout, so the cycles end as lock timeouts before PostgreSQL "
           "looks for deadlocks\n",
           r->deadlock_timeout, LOCK_TIMEOUT_MS);
  if (r->invariant_ok)
    printf("invariant: inventory and wallets agree with the journal: OK\n");
  else
    printf("invariant: inventory and wallets agree with the journal: FAIL "
           "(%s)\n",
           r->why);
}

/* One object; "ok" is the exit status's verdict (0 when true). */
static void print_json(const opts_t *o, const char *db, const char *backend,
                       const char *stopped, const result_t *r) {
  printf("{\"example\": \"checkout\", \"mode\": \"%s\", \"db\": ",
         o->naive ? "naive" : "ordo");
  json_str(db);
  printf(", \"backend\": "); /* where the ordo locks are; none in --naive */
  if (o->naive)
    printf("null");
  else
    json_str(backend);
  printf(", \"workers\": %ld, \"requests\": %ld, \"skus\": %ld, \"users\": "
         "%ld, \"lock_timeout_ms\": %d, \"max_retries\": %d, "
         "\"backoff_ms\": [%d, %d], \"deadlock_timeout\": ",
         o->workers, o->requests, o->skus, o->users, LOCK_TIMEOUT_MS,
         MAX_RETRIES, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
  json_str(r->deadlock_timeout);
  printf(", \"requests_ok\": %" PRIu64 ", \"checkouts_ok\": %" PRIu64
         ", \"refunds_ok\": %" PRIu64 ", \"failed\": %" PRIu64
         ", \"not_run\": %" PRIu64 ", \"retries\": %" PRIu64
         ", \"timeouts\": %" PRIu64 ", \"deadlocks\": %" PRId64
         ", \"deadlock_errors\": %" PRIu64 ", \"seconds\": %.3f"
         ", \"journal_rows\": %" PRId64 ", \"stock_before\": %" PRId64
         ", \"stock_after\": %" PRId64 ", \"money_before\": %" PRId64
         ", \"money_after\": %" PRId64 ", \"invariant_ok\": %s, \"why\": ",
         r->ok, r->checkouts_ok, r->refunds_ok, r->failed, r->not_run,
         r->retries, r->timeouts, r->deadlocks, r->deadlock_errs, r->seconds,
         r->journal_rows, r->stock_before, r->stock_after, r->money_before,
         r->money_after, r->invariant_ok ? "true" : "false");
  json_str(r->why);
  printf(", \"stopped\": ");
  if (stopped[0] != '\0')
    json_str(stopped);
  else
    printf("null");
  printf(", \"ok\": %s}\n",
         r->invariant_ok && stopped[0] == '\0' ? "true" : "false");
}

/* ---- Main ----------------------------------------------------------------
 */

/*
 * run -- everything after the flags and URLs were found good, on an open
 * control connection: reset, count, run the workers, count again, check.
 */
static int run(shop_t *s, PGconn *ctl, const char *shown, result_t *r) {
  const opts_t *o = s->o;
  int64_t dl0 = 0, dl1 = 0;
  PGresult *res =
      ctl_exec(ctl,
               "SELECT current_setting('deadlock_timeout'), setting::bigint "
               "FROM pg_settings WHERE name = 'deadlock_timeout'",
               PGRES_TUPLES_OK, "read deadlock_timeout");
  if (res == NULL || PQntuples(res) != 1) {
    PQclear(res);
    return EXIT_FAIL;
  }
  snprintf(r->deadlock_timeout, sizeof(r->deadlock_timeout), "%s",
           PQgetvalue(res, 0, 0));
  r->deadlock_timeout_ms = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
  PQclear(res);
  if (schema_reset(ctl, o) != 0 || deadlocks_read(ctl, &dl0) != 0)
    return EXIT_FAIL;

  worker_t *w = calloc((size_t)o->workers, sizeof(*w));
  if (w == NULL) {
    fputs("checkout: out of memory\n", stderr);
    return EXIT_FAIL;
  }
  int status = EXIT_OK;
  uint64_t seed = ex_mix64((uint64_t)getpid() ^ (uint64_t)(ex_now_s() * 1e9));
  for (long i = 0; i < o->workers && status == EXIT_OK; i++) {
    w[i].shop = s;
    w[i].id = i + 1;
    w[i].rng = ex_mix64(seed + (uint64_t)i);
    status = worker_open(&w[i], shown);
  }
  long started = 0;
  for (; status == EXIT_OK && started < o->workers; started++) {
    int rc = pthread_create(&w[started].thread, NULL, worker_main, &w[started]);
    if (rc != 0) {
      fprintf(stderr, "checkout: cannot start a worker thread: %s\n",
              strerror(rc));
      status = EXIT_FAIL;
      break;
    }
  }
  double t0 = ex_now_s();
  pthread_mutex_lock(&s->mu);
  if (status == EXIT_OK)
    s->go = 1;
  else
    s->abort = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  for (long i = 0; i < started; i++)
    pthread_join(w[i].thread, NULL);
  r->seconds = ex_now_s() - t0;

  /* Close every connection of the run (the ordo transactions' too, on
   * postgres://), then wait for their server processes to exit: only then
   * have they added their deadlocks to pg_stat_database. */
  for (long i = 0; i < o->workers; i++) {
    if (w[i].txn != NULL)
      ordo_txn_end(w[i].txn);
    PQfinish(w[i].conn);
    r->ok += w[i].ok;
    r->failed += w[i].failed;
    r->retries += w[i].retries;
    r->timeouts += w[i].timeouts;
    r->deadlock_errs += w[i].deadlock_errs;
    r->checkouts_ok += w[i].checkouts_ok;
    r->refunds_ok += w[i].refunds_ok;
  }
  free(w);
  if (status != EXIT_OK)
    return status;
  r->not_run = (uint64_t)o->requests - r->ok - r->failed;
  r->backends_left = backends_gone(ctl, s->app);
  if (r->backends_left < 0 || deadlocks_read(ctl, &dl1) != 0 ||
      verify(ctl, s, r) != 0)
    return EXIT_FAIL;
  r->deadlocks = dl1 - dl0;
  if (r->backends_left > 0)
    fprintf(stderr,
            "checkout: %ld of the run's connections were still open on the "
            "server %d s after they closed; the deadlock count may be "
            "short\n",
            r->backends_left, GONE_WAIT_S);
  return EXIT_OK;
}

int main(int argc, char **argv) {
  opts_t o;
  if (parse_opts(argc, argv, &o) != 0)
    return EXIT_USAGE;
  char db_shown[1024];
  redact(o.db, db_shown, sizeof(db_shown));
  if (check_db_url(o.db, db_shown) != 0)
    return EXIT_USAGE;

  shop_t s;
  memset(&s, 0, sizeof(s));
  s.o = &o;
  s.naive = o.naive;
  s.conninfo = db_conninfo(o.db);
  snprintf(s.app, sizeof(s.app), "ordo-checkout-%ld", (long)getpid());
  atomic_init(&s.next, 0);
  atomic_init(&s.stop, 0);

  /* The lock place: --backend, or the shop's own database. */
  char derived[2048];
  const char *backend = o.backend;
  if (backend == NULL) {
    if (same_db_url(o.db, s.app, derived, sizeof(derived)) != 0) {
      fprintf(stderr, "checkout: the --db URL is too long\n");
      return EXIT_USAGE;
    }
    backend = derived;
  }
  int rc = ordo_open(&s.ordo, backend, NULL);
  if (rc != 0) {
    char shown[1024];
    redact(o.backend ? o.backend : db_shown, shown, sizeof(shown));
    if (rc == ORDO_EURL || rc == ORDO_EINVAL) {
      fprintf(stderr, "checkout: bad %s URL '%s': accepted forms are %s\n",
              o.backend ? "--backend" : "--db", shown,
              o.backend ? EX_URL_FORMS : DB_FORMS);
      return EXIT_USAGE;
    }
    fprintf(stderr, "checkout: cannot open the lock place '%s': %s (%s)\n",
            shown, ordo_strerror(rc), ordo_err_name(rc));
    return EXIT_FAIL;
  }
  /* For the report: the lock place, without its password. */
  char locks_shown[1024], locks_json[1024];
  if (o.backend != NULL) {
    redact(ordo_url(s.ordo), locks_shown, sizeof(locks_shown));
    snprintf(locks_json, sizeof(locks_json), "%s", locks_shown);
  } else {
    snprintf(locks_shown, sizeof(locks_shown),
             "the --db database (advisory locks)");
    snprintf(locks_json, sizeof(locks_json), "%s", db_shown);
  }

  size_t n = (size_t)o.requests;
  s.outcome = calloc(n, 1);
  if (s.outcome == NULL) {
    fputs("checkout: out of memory; try fewer --requests\n", stderr);
    ordo_close(s.ordo);
    return EXIT_FAIL;
  }
  pthread_mutex_init(&s.mu, NULL);
  pthread_cond_init(&s.cv, NULL);

  char app[80];
  snprintf(app, sizeof(app), "%.63s-main", s.app);
  PGconn *ctl = db_connect(s.conninfo, app);
  result_t r;
  memset(&r, 0, sizeof(r));
  int status = EXIT_OK;
  if (ctl == NULL || PQstatus(ctl) != CONNECTION_OK) {
    status = connect_failed(ctl, db_shown);
  } else {
    /* DROP TABLE IF EXISTS says NOTICE when there is nothing to drop. */
    PQclear(PQexec(ctl, "SET client_min_messages = warning"));
    status = run(&s, ctl, db_shown, &r);
  }
  PQfinish(ctl);
  ordo_close(s.ordo);

  if (status == EXIT_OK) {
    if (o.json)
      print_json(&o, db_shown, locks_json, s.hard_msg, &r);
    else
      print_human(&o, db_shown, locks_shown, &r);
    if (s.hard_msg[0] != '\0') {
      fprintf(stderr, "checkout: the run stopped early: %s\n", s.hard_msg);
      status = EXIT_FAIL;
    } else if (!r.invariant_ok) {
      status = EXIT_FAIL;
    }
  }
  pthread_mutex_destroy(&s.mu);
  pthread_cond_destroy(&s.cv);
  free(s.outcome);
  return status;
}
