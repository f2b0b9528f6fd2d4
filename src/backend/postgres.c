/*
 * postgres.c -- the "postgres://" backend: PostgreSQL advisory locks over
 * libpq, one connection (one server session) per txn. docs/backend-postgres.md
 * has the URL, the design and the trade-offs; this comment is the summary.
 *
 * Keys. Each key is mapped to the 64-bit value actually locked
 * (ordo__pg_key_value: FNV-1a 64 of its bytes, then the SplitMix64
 * finalizer, as a signed bigint). A set is deduplicated by value (the
 * strongest mode wins) and taken in ascending signed order of the values,
 * not of the keys, one by one by a single statement, so that two txns can
 * never wait on each other's values in opposite orders (DESIGN §4: where we
 * do not own the table, keys are taken one by one in the canonical order).
 * Two keys with one value (a collision) share one server lock.
 *
 * Scopes. scope=session (the default): pg_advisory_lock and friends, held
 * until unlocked or until the session ends; one key at a time can be let
 * go. A failed statement keeps what it took (session locks ignore
 * transaction rollback), so the call releases every value it asked for that
 * was not held before (an unlock of a value not held only warns, and the
 * warning is dropped). scope=xact: pg_advisory_xact_lock inside a
 * transaction the first grant opens; each statement runs under a savepoint
 * that a failure rolls back (which lets go exactly what it took); ordo_unlock
 * of a last hold is ORDO_ENOTSUP and ordo_unlock_all commits.
 *
 * Waits run on the server: lock_timeout is the time left (SQLSTATE 55P03,
 * ORDO_ETIMEDOUT) and statement_timeout a little more (57014); a deadline
 * already past tries once with pg_try_advisory_lock. 40P01 (a deadlock the
 * server found among incremental calls) is ORDO_EDEADLK after every lock of
 * the txn was released; 40001 is ORDO_EDEADLK too. Every exchange is bounded
 * on the client as well (non-blocking sends, poll(2) on the socket, a
 * connect made with PQconnectPoll): a server that has not answered by the
 * deadline plus timeout_ms loses the connection, which is dropped rather
 * than cancelled (libpq 15's PQcancel blocks): nothing waits on a frozen
 * or black-holed server.
 *
 * Tokens: nextval of a schema-qualified sequence (fence_seq=schema.name,
 * public.ordo_fence by default; created when first needed), drawn once
 * every lock of the set is granted: strictly increasing for every grant of
 * every key, and never going back, restarts and crashes included, whatever
 * the session's synchronous_commit (lock_sql says how).
 *
 * A lost connection is ORDO_EBACKEND with libpq's message; the server has
 * released the session's locks, so the record is cleared and the txn's next
 * call returns ORDO_ELEASE once. While a txn holds keys, the renewal thread
 * (renewer.c) checks its connection every third of lease_ms, reading what
 * the server sent without sending anything (pg_check: the server's idle
 * timeouts stay the administrator's), and reports a dead one through
 * ordo_on_lease_lost.
 *
 * Lock order: a txn's mu, then the place's rn.mu (renewer.h); nothing else
 * nests.
 */
#include "backend/remote.h"
#include "backend/renewer.h"
#include "ordo_int.h"
#include "ordo_tsa.h"

#include <errno.h>
#include <limits.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PG_MS 1000000u
#define PG_DEFAULT_TIMEOUT_MS 5000L
#define PG_DEFAULT_LEASE_MS 30000L
/* The sequence of fencing tokens unless the URL names another: schema
 * qualified, so that every role draws from the one sequence whatever its
 * search_path (advisory locks are shared by the whole database). */
#define PG_DEFAULT_SEQ "public.ordo_fence"
/* Each part of schema.name: an unquoted identifier as PostgreSQL folds it
 * (NAMEDATALEN - 1 bytes at most). */
#define PG_IDENT_MAX 63
/* statement_timeout is lock_timeout plus this: the lock wait's own error
 * (55P03) comes first whenever one wait is all that is left. */
#define PG_STMT_SLACK_MS 50
/* The longest wait PostgreSQL can be told (lock_timeout and
 * statement_timeout are ints of milliseconds): a longer timeout waits this
 * long, about 24.8 days (docs/backend-postgres.md). */
#define PG_WAIT_MAX_MS ((long)INT_MAX - PG_STMT_SLACK_MS)

/* ---- Keys to values ------------------------------------------------------ */

int64_t ordo__pg_key_value(const void *key, size_t len);

int64_t ordo__pg_key_value(const void *key, size_t len) {
  const uint8_t *k = key;
  uint64_t h = UINT64_C(0xcbf29ce484222325); /* FNV-1a 64 */
  for (size_t i = 0; i < len; i++) {
    h ^= k[i];
    h *= UINT64_C(0x100000001b3);
  }
  /* SplitMix64's finalizer spreads FNV's weak low bits over the word. */
  h += UINT64_C(0x9e3779b97f4a7c15);
  h = (h ^ (h >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  h = (h ^ (h >> 27)) * UINT64_C(0x94d049bb133111eb);
  h ^= h >> 31;
  return (int64_t)h;
}

/* ---- The URL --------------------------------------------------------------
 * postgres://... or postgresql://... (a libpq URI: its own parameters, such
 * as sslmode or application_name, pass through), with ordo's parameters
 * taken out of the query: scope=session|xact, timeout_ms=N (the bound of a
 * connect and of every exchange that does not wait for a lock), lease_ms=N
 * (how often a holding txn's connection is checked: a third of it),
 * fence_seq=schema.name (the sequence of tokens, public.ordo_fence by
 * default).
 * postgres:KEY=VALUE ... is a libpq conninfo string, with no ordo
 * parameters.
 */

typedef struct pg_url {
  char *conninfo; /* what libpq gets; malloc'd */
  bool xact;
  long timeout_ms, lease_ms;
  char seq[2 * PG_IDENT_MAX + 2]; /* schema.name of the token sequence */
} pg_url;

/* Is v[0..len) an unquoted identifier that PostgreSQL keeps as written
 * (lower case, so that folding changes nothing)? */
static bool plain_ident(const char *v, size_t len) {
  if (len == 0 || len > PG_IDENT_MAX || (v[0] >= '0' && v[0] <= '9'))
    return false;
  for (size_t i = 0; i < len; i++)
    if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') ||
          v[i] == '_'))
      return false;
  return true;
}

/* fence_seq=schema.name: both parts plain identifiers (they go into SQL
 * as they are). */
static int take_seq(const char *v, size_t vlen, pg_url *u) {
  const char *dot = memchr(v, '.', vlen);
  if (!dot || !plain_ident(v, (size_t)(dot - v)) ||
      !plain_ident(dot + 1, vlen - (size_t)(dot - v) - 1))
    return ORDO_EURL;
  memcpy(u->seq, v, vlen);
  u->seq[vlen] = 0;
  return 0;
}

/* Takes ordo's parameters out of the query of uri (in place). */
static int take_params(char *uri, pg_url *u) {
  char *q = strchr(uri, '?');
  if (!q)
    return 0;
  char *w = q + 1, *r = q + 1;
  while (*r) {
    size_t len = strcspn(r, "&");
    char *eq = memchr(r, '=', len);
    size_t nlen = eq ? (size_t)(eq - r) : len;
    const char *v = eq ? eq + 1 : "";
    size_t vlen = eq ? len - nlen - 1 : 0;
    int rc = -1;
    if (nlen == 5 && memcmp(r, "scope", 5) == 0) {
      if (vlen == 7 && memcmp(v, "session", 7) == 0)
        u->xact = false, rc = 0;
      else if (vlen == 4 && memcmp(v, "xact", 4) == 0)
        u->xact = true, rc = 0;
      else
        return ORDO_EURL;
    } else if (nlen == 10 && memcmp(r, "timeout_ms", 10) == 0) {
      rc = ordo__parse_long(v, vlen, 1, 3600000L, &u->timeout_ms);
    } else if (nlen == 8 && memcmp(r, "lease_ms", 8) == 0) {
      rc = ordo__parse_long(v, vlen, 30, 86400000L, &u->lease_ms);
    } else if (nlen == 9 && memcmp(r, "fence_seq", 9) == 0) {
      rc = take_seq(v, vlen, u);
    }
    if (rc > 0 || rc < -1)
      return rc;
    if (rc == -1) { /* libpq's: kept */
      if (w != q + 1)
        *w++ = '&';
      memmove(w, r, len);
      w += len;
    }
    r += len;
    if (*r == '&')
      r++;
  }
  *w = 0;
  if (w == q + 1)
    *q = 0; /* nothing left for libpq */
  return 0;
}

static int pg_parse_url(const char *url, pg_url *u) {
  memset(u, 0, sizeof *u);
  u->timeout_ms = PG_DEFAULT_TIMEOUT_MS;
  u->lease_ms = PG_DEFAULT_LEASE_MS;
  snprintf(u->seq, sizeof u->seq, "%s", PG_DEFAULT_SEQ);
  bool uri = strncmp(url, "postgres://", 11) == 0 ||
             strncmp(url, "postgresql://", 13) == 0;
  if (!uri && strncmp(url, "postgres:", 9) != 0)
    return ORDO_EURL;
  u->conninfo = strdup(uri ? url : url + 9);
  if (!u->conninfo)
    return ORDO_ENOMEM;
  int rc = uri ? take_params(u->conninfo, u) : 0;
  char *err = NULL;
  PQconninfoOption *opts = rc ? NULL : PQconninfoParse(u->conninfo, &err);
  if (!rc && !opts)
    rc = err ? ORDO_EURL : ORDO_ENOMEM;
  PQfreemem(err);
  PQconninfoFree(opts);
  if (!rc && !uri && u->conninfo[strspn(u->conninfo, " \t")] == 0)
    rc = ORDO_EURL; /* "postgres:" and nothing */
  if (rc) {
    free(u->conninfo);
    u->conninfo = NULL;
  }
  return rc;
}

/* ---- Places and txns ----------------------------------------------------- */

typedef struct pg_hold {
  ordo__hold k;      /* the key, its hold count, mode and token (remote.h) */
  int64_t v;         /* the value locked for it */
  bool srv_x, srv_s; /* this hold carries v's server lock in X / S */
} pg_hold;

typedef struct pg_place {
  struct ordo_s base;
  pg_url u; /* read-only after open */
  uint64_t lease_ns;
  _Atomic uint64_t next_id;
  _Atomic bool have_seq; /* the token sequence exists */
  _Atomic uint64_t acquired, timeouts, deadlocks, released, keys, lost;
  /* The renewal thread, the txn list and the last failure's text, all
   * under rn.mu (renewer.h). Lock order: a txn's mu, then rn.mu. */
  ordo__renewer rn;
} pg_place;

typedef struct pg_txn {
  struct ordo_txn_s base;
  /* The place's list and renewal state: links under the place's rn.mu,
   * rn.holding and rn.due_ns written under mu. */
  ordo__rn_txn rn;
  /* mu guards c, tc, the settings cache (lock_ms, in_xact) and the record (h,
   * nh, caph). The txn's own thread holds it through each call (a waiting
   * statement included); the renewal thread and ordo_dump only try it.
   * Every helper that touches these requires it (ordo_tsa.h). */
  ordo__mutex mu;
  /* NULL after a loss: the next call connects again. */
  PGconn *c ORDO_GUARDED_BY(mu);
  /* scope=xact: the connection tokens are drawn on (draw_tokens), opened
   * at the first grant; NULL until then and after a failure. */
  PGconn *tc ORDO_GUARDED_BY(mu);
  long lock_ms ORDO_GUARDED_BY(mu); /* lock_timeout as set on c; -1 unknown */
  bool in_xact ORDO_GUARDED_BY(mu); /* scope=xact: a transaction is open */
  /* The server sent a FATAL message on c unasked (noted: the reason the
   * connection ends, which a later "server closed the connection" must
   * not replace in the dump). */
  bool fatal ORDO_GUARDED_BY(mu);
  pg_hold *h ORDO_GUARDED_BY(mu); /* sorted in the canonical key order */
  size_t nh ORDO_GUARDED_BY(mu), caph ORDO_GUARDED_BY(mu);
  /* Written under mu, read without it: atomics, which the analysis does
   * not check. */
  _Atomic bool lease_lost; /* the next call returns ORDO_ELEASE */
  _Atomic int backend_pid;
} pg_txn;

static pg_txn *pt(ordo_txn_t *t) {
  return (pg_txn *)t;
}
static pg_place *pp(ordo_t *o) {
  return (pg_place *)o;
}

/* Keeps the text of the latest failure, for ordo_dump. Takes rn.mu. */
static void note_err(pg_place *p, const char *what, const char *detail)
    ORDO_EXCLUDES(p->rn.mu) {
  char d[240];
  snprintf(d, sizeof d, "%s", detail ? detail : "");
  size_t n = strlen(d);
  while (n > 0 && (d[n - 1] == '\n' || d[n - 1] == ' '))
    d[--n] = 0; /* libpq's messages end in a newline */
  ordo__rn_note(&p->rn, what, d);
}

/* ---- The hold record (caller holds t->mu) -------------------------------- */

static long hold_find(const pg_txn *t, const void *key, size_t len)
    ORDO_REQUIRES(t->mu) {
  return ordo__hold_find(t->h, t->nh, sizeof *t->h, key, len);
}

/* Does some hold carry v's server lock in X (x) or in S (!x)? */
static pg_hold *carrier(pg_txn *t, int64_t v, bool x) ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < t->nh; i++)
    if (t->h[i].v == v && (x ? t->h[i].srv_x : t->h[i].srv_s))
      return &t->h[i];
  return NULL;
}

static void holds_clear(pg_place *p, pg_txn *t) ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < t->nh; i++)
    free(t->h[i].k.key);
  atomic_fetch_sub(&p->keys, t->nh);
  t->nh = 0;
  atomic_store(&t->rn.holding, false);
}

/* ---- Exchanges (caller holds t->mu) ---------------------------------------
 */

/* The notice processor of a txn's connections (arg: the place). Warnings
 * are dropped (the "you don't own a lock" of an undo); a FATAL message is
 * one the server sent unasked before it ended the session (the reason, for
 * the dump: libpq hands it here when no statement is running). Called
 * inside libpq, with the txn's mu held. */
/* quiet kept a FATAL message: set inside libpq, read by the same thread
 * (pg_check) right after. */
static _Thread_local bool fatal_seen;

static void quiet(void *arg, const char *msg) {
  if (strncmp(msg, "FATAL", 5) == 0) {
    note_err(arg, "the server ended the session", msg);
    fatal_seen = true;
  }
}

/* The connection is gone: the server let go of the session's locks. what
 * names the failure for the dump (NULL: already noted). */
static void drop(pg_place *p, pg_txn *t, const char *what)
    ORDO_REQUIRES(t->mu) {
  if (t->c) {
    if (what)
      note_err(p, what, PQerrorMessage(t->c));
    PQfinish(t->c);
    t->c = NULL;
  }
  t->lock_ms = -1;
  t->in_xact = false;
  atomic_store(&t->backend_pid, 0);
  if (t->nh > 0) {
    atomic_fetch_add(&p->lost, 1);
    holds_clear(p, t);
    atomic_store(&t->lease_lost, true);
  }
}

/*
 * open_conn -- a connection to the URL's server, or NULL (the reason in
 * *rc and noted). libpq's connect_timeout counts in whole seconds, at
 * least 2, and PQconnectdb waits in connect and recv without a bound of
 * ours, so the connection is made with PQconnectStartParams and
 * PQconnectPoll, each wait a poll(2) bounded by timeout_ms in all: a server
 * that accepts and never answers (stopped, black-holed) costs no more.
 * The connection is left non-blocking: no write of ours (a large
 * statement, PQfinish's goodbye) can block on a server that stopped
 * reading. A host name is resolved before the first poll, as
 * getaddrinfo(3) does, without our bound.
 */
static PGconn *open_conn(pg_place *p, int *rc) {
  char tmo[24], utmo[24], idle[24], intvl[24];
  long s = (p->u.timeout_ms + 999) / 1000;
  snprintf(tmo, sizeof tmo, "%ld", s < 2 ? 2 : s);
  /* tcp_user_timeout (Linux): unacknowledged data, a keepalive probe
   * included, fails the connection after timeout_ms. Keepalives find a
   * peer that vanished (a host down, a partition) while the connection is
   * idle: first probe after a third of the lease, then every ninth, three
   * probes. */
  snprintf(utmo, sizeof utmo, "%ld", p->u.timeout_ms);
  long li = p->u.lease_ms / 3000, lv = p->u.lease_ms / 9000;
  snprintf(idle, sizeof idle, "%ld", li < 1 ? 1 : li > 60 ? 60 : li);
  snprintf(intvl, sizeof intvl, "%ld", lv < 1 ? 1 : lv > 20 ? 20 : lv);
  /* Ours first, then the URL's (expand_dbname: dbname is the whole URL or
   * conninfo), whose settings win: later ones override earlier. */
  const char *const kw[] = {"connect_timeout",
                            "application_name",
                            "keepalives",
                            "keepalives_idle",
                            "keepalives_interval",
                            "keepalives_count",
                            "tcp_user_timeout",
                            "dbname",
                            NULL};
  const char *const val[] = {tmo, "ordo", "1",           idle, intvl,
                             "3", utmo,   p->u.conninfo, NULL};
  PGconn *c = PQconnectStartParams(kw, val, 1);
  if (!c) {
    *rc = ORDO_ENOMEM;
    return NULL;
  }
  uint64_t until = ordo__now_ns() + (uint64_t)p->u.timeout_ms * PG_MS;
  PostgresPollingStatusType st = PQstatus(c) == CONNECTION_BAD
                                     ? PGRES_POLLING_FAILED
                                     : PGRES_POLLING_WRITING;
  bool late = false;
  while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
    uint64_t now = ordo__now_ns();
    if (now >= until) {
      late = true;
      break;
    }
    int ms = (int)((until - now) / PG_MS) + 1;
    struct pollfd pf = {PQsocket(c),
                        st == PGRES_POLLING_READING ? POLLIN : POLLOUT, 0};
    int n = poll(&pf, 1, ms);
    if (n < 0 && errno != EINTR) {
      st = PGRES_POLLING_FAILED;
      break;
    }
    if (n > 0)
      st = PQconnectPoll(c);
  }
  if (st == PGRES_POLLING_OK && PQsetnonblocking(c, 1) == 0)
    return c;
  const char *m = late ? "no answer within timeout_ms" : PQerrorMessage(c);
  *rc = !late && (strstr(m, "password") || strstr(m, "authentication"))
            ? ORDO_EAUTH
            : ORDO_EBACKEND;
  note_err(p, "connect", m);
  PQfinish(c);
  return NULL;
}

static int connect_txn(pg_place *p, pg_txn *t) ORDO_REQUIRES(t->mu) {
  int rc = 0;
  PGconn *c = open_conn(p, &rc);
  if (!c)
    return rc;
  PQsetNoticeProcessor(c, quiet, p);
  t->c = c;
  t->lock_ms = -1;
  t->in_xact = false;
  t->fatal = false;
  atomic_store(&t->backend_pid, PQbackendPID(c));
  return 0;
}

/*
 * exchange -- sends sql on c and returns its last result (the caller
 * PQclears it), or NULL with *why set when the connection failed; run --
 * the same on a txn's connection, which a failure drops (noted). The exchange,
 * the send included, is bounded by until_ns (ORDO_NO_DEADLINE: none): past it
 * the connection is dropped. libpq 15's PQcancel would block in connect and
 * recv with no timeout on a server that stopped answering (PQcancelCreate,
 * the non-blocking cancel, is libpq 17's), and a server that has not
 * answered by then has lost the session for us anyway: the statement's own
 * timeouts (lock_timeout, statement_timeout) were due timeout_ms earlier.
 */
static PGresult *exchange(PGconn *c, const char *sql, uint64_t until_ns,
                          const char **why) {
  if (!PQsendQuery(c, sql)) {
    *why = "send";
    return NULL;
  }
  PGresult *last = NULL;
  for (;;) {
    /* The connection is non-blocking: what did not fit in the socket's
     * buffer is sent as the server reads it. */
    int fl = PQflush(c);
    if (fl < 0) {
      *why = "send";
      break;
    }
    while (fl == 0 && !PQisBusy(c)) {
      PGresult *r = PQgetResult(c);
      if (!r)
        return last;
      PQclear(last);
      last = r;
    }
    uint64_t now = ordo__now_ns();
    int ms = -1;
    if (until_ns != ORDO_NO_DEADLINE) {
      if (now >= until_ns) {
        *why = "no reply within the bound: the connection was dropped";
        break;
      }
      uint64_t left = (until_ns - now) / PG_MS + 1;
      ms = left > 60000 ? 60000 : (int)left;
    }
    struct pollfd pf = {PQsocket(c), (short)(POLLIN | (fl ? POLLOUT : 0)), 0};
    int n = poll(&pf, 1, ms);
    if (n < 0 && errno != EINTR) {
      *why = "poll";
      break;
    }
    if (n > 0 && (pf.revents & (POLLIN | POLLERR | POLLHUP)) &&
        !PQconsumeInput(c)) {
      *why = "read";
      break;
    }
  }
  PQclear(last);
  return NULL;
}

static PGresult *run(pg_place *p, pg_txn *t, const char *sql, uint64_t until_ns)
    ORDO_REQUIRES(t->mu) {
  const char *why = NULL;
  PGresult *r = exchange(t->c, sql, until_ns, &why);
  if (!r)
    drop(p, t, t->fatal ? NULL : why);
  return r;
}

/* The SQLSTATE of a failed result, "" when there is none. */
static const char *state_of(const PGresult *r) {
  const char *s = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  return s ? s : "";
}

/* Runs sql that must succeed (no rows needed); 0, or an error (noted). */
static int run_ok(pg_place *p, pg_txn *t, const char *sql)
    ORDO_REQUIRES(t->mu) {
  PGresult *r = run(p, t, sql, ordo__now_ns() + p->u.timeout_ms * PG_MS);
  if (!r)
    return ORDO_EBACKEND;
  ExecStatusType st = PQresultStatus(r);
  int rc = 0;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    note_err(p, sql, PQresultErrorMessage(r));
    rc = ORDO_EBACKEND;
  }
  PQclear(r);
  return rc;
}

/* Creates the sequence of fencing tokens once per place (a race with
 * another client creating it is fine). It is looked for first: CREATE ...
 * IF NOT EXISTS needs the right to create in the schema even when the
 * sequence is there, and a role that may only use a sequence an
 * administrator made has no such right. The creation commits
 * synchronously, so that no token drawn later can outlive it in a crash. */
static int ensure_seq(pg_place *p, pg_txn *t) ORDO_REQUIRES(t->mu) {
  if (atomic_load(&p->have_seq))
    return 0;
  char sql[200 + sizeof p->u.seq];
  snprintf(sql, sizeof sql, "SELECT to_regclass('%s') IS NOT NULL", p->u.seq);
  PGresult *r = run(p, t, sql, ordo__now_ns() + p->u.timeout_ms * PG_MS);
  if (!r)
    return ORDO_EBACKEND;
  bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
            strcmp(PQgetvalue(r, 0, 0), "t") == 0;
  PQclear(r);
  if (!ok) {
    snprintf(sql, sizeof sql,
             "SET LOCAL synchronous_commit = on; CREATE SEQUENCE IF NOT "
             "EXISTS %s",
             p->u.seq);
    r = run(p, t, sql, ordo__now_ns() + p->u.timeout_ms * PG_MS);
    if (!r)
      return ORDO_EBACKEND;
    const char *s = state_of(r);
    ok = PQresultStatus(r) == PGRES_COMMAND_OK || strcmp(s, "23505") == 0 ||
         strcmp(s, "42P07") == 0;
    if (!ok)
      note_err(p, sql, PQresultErrorMessage(r));
    PQclear(r);
  }
  if (ok)
    atomic_store(&p->have_seq, true);
  return ok ? 0 : ORDO_EBACKEND;
}

/* Lets go of every server lock of the txn and forgets its record: after a
 * deadlock, and at the end. */
static void release_everything(pg_place *p, pg_txn *t) ORDO_REQUIRES(t->mu) {
  if (t->c) {
    const char *sql =
        t->in_xact ? "ROLLBACK" : "SELECT pg_advisory_unlock_all()";
    PGresult *r = run(p, t, sql, ordo__now_ns() + p->u.timeout_ms * PG_MS);
    PQclear(r);
    t->in_xact = false;
  }
  holds_clear(p, t);
}

/* ---- The renewal hooks: a holding txn's connection is checked ------------
 *
 * The check sends nothing. A statement (the SELECT 1 of old) would reset
 * the server's idle timers, so a holder would never reach the
 * administrator's idle_in_transaction_session_timeout (scope=xact, whose
 * transaction stays open while it holds) or idle_session_timeout
 * (scope=session): the session would be kept alive forever. Instead the
 * check reads what the server sent unasked, without waiting: a session the
 * server ended (a timeout, pg_terminate_backend, a shutdown) has sent its
 * FATAL message (the notice processor keeps it for the dump) and closed
 * the connection, which PQconsumeInput then reports; a peer that vanished
 * fails the socket through keepalives and tcp_user_timeout (open_conn).
 * Reading cannot block (the connection is non-blocking), so a check never
 * holds the txn's mutex against a frozen server.
 */

static bool pg_check(void *place, ordo_txn_t *tx) {
  pg_place *p = place;
  pg_txn *t = pt(tx);
  ordo__mutex_assert_held(&t->mu); /* renewer.c's pass took it */
  if (t->nh == 0 || !t->c)
    return false;
  bool ok = true;
  /* The FATAL message and the close may come in two reads. */
  for (int i = 0; ok && i < 4; i++) {
    struct pollfd pf = {PQsocket(t->c), POLLIN, 0};
    if (poll(&pf, 1, 0) <= 0)
      break; /* nothing sent (or EINTR: look again at the next check) */
    bool got = PQconsumeInput(t->c);
    /* PQconsumeInput only reads; PQisBusy parses what came, and hands a
     * FATAL message to the notice processor. */
    fatal_seen = false;
    (void)PQisBusy(t->c);
    t->fatal = t->fatal || fatal_seen;
    ok = got && PQstatus(t->c) == CONNECTION_OK;
  }
  if (!ok) /* the server's reason, when it gave one, is the one to keep */
    drop(p, t, t->fatal ? NULL : "connection check");
  atomic_store(&t->rn.due_ns, ordo__now_ns() + p->lease_ns / 3);
  return !ok && atomic_load(&t->lease_lost);
}

static uint64_t pg_busy(void *place, ordo__rn_txn *t) {
  ORDO_UNUSED(t);
  return ((pg_place *)place)->lease_ns / 6 + PG_MS;
}

static const ordo__rn_ops pg_rn_ops = {.renew = pg_check, .busy = pg_busy};

/* ---- Open, close, begin, end --------------------------------------------- */

static int pg_open(ordo_t **out, const char *url, const ordo_options_t *opts) {
  ORDO_UNUSED(opts);
  pg_place *p = calloc(1, sizeof *p);
  if (!p)
    return ORDO_ENOMEM;
  int rc = pg_parse_url(url, &p->u);
  if (rc) {
    free(p);
    return rc;
  }
  p->lease_ns = (uint64_t)p->u.lease_ms * PG_MS;
  atomic_init(&p->next_id, 1);
  atomic_init(&p->have_seq, false);
  rc = ordo__rn_start(&p->rn, &pg_rn_ops, p);
  if (rc) {
    free(p->u.conninfo);
    free(p);
    return rc;
  }
  *out = &p->base;
  return 0;
}

static void pg_close(ordo_t *o) {
  pg_place *p = pp(o);
  ordo__rn_stop(&p->rn);
  free(p->u.conninfo);
  free(p);
}

/* A txn is a server session: connected here, so that a bad password or a
 * missing database shows at once. */
static int pg_txn_begin(ordo_t *o, ordo_txn_t **out, int priority) {
  ORDO_UNUSED(priority);
  pg_place *p = pp(o);
  pg_txn *t = calloc(1, sizeof *t);
  if (!t)
    return ORDO_ENOMEM;
  /* No other thread knows t yet, but the exchanges require mu
   * (ordo_tsa.h), so it is made first and held through them. */
  ordo__mutex_init(&t->mu);
  ordo__mutex_lock(&t->mu);
  int rc = connect_txn(p, t);
  if (!rc)
    rc = ensure_seq(p, t);
  if (rc && t->c)
    PQfinish(t->c);
  ordo__mutex_unlock(&t->mu);
  if (rc) {
    ordo__mutex_destroy(&t->mu);
    free(t);
    return rc;
  }
  t->base.id = atomic_fetch_add(&p->next_id, 1);
  atomic_init(&t->lease_lost, false);
  ordo__rn_link(&p->rn, &t->rn, &t->base, &t->mu);
  *out = &t->base;
  return 0;
}

static void pg_txn_end(ordo_txn_t *tx) {
  pg_txn *t = pt(tx);
  pg_place *p = pp(tx->o);
  ordo__rn_unlink(&p->rn, &t->rn);
  ordo__mutex_lock(&t->mu); /* waits out a check in progress */
  /* Closing the session would let go of its locks too, but the server
   * sees the close after the client has moved on: a release it answers
   * first means that the next lock of another session finds them free. */
  if (t->c && t->nh > 0)
    release_everything(p, t);
  holds_clear(p, t);
  if (t->c)
    PQfinish(t->c);
  if (t->tc)
    PQfinish(t->tc);
  free(t->h);
  ordo__mutex_unlock(&t->mu);
  ordo__mutex_destroy(&t->mu);
  free(t);
}

/* ---- lock_all ------------------------------------------------------------ */

typedef struct pg_want {
  int64_t v;
  bool x;
} pg_want;

static int want_cmp(const void *a, const void *b) {
  int64_t x = ((const pg_want *)a)->v, y = ((const pg_want *)b)->v;
  return x < y ? -1 : x > y;
}

/* Appends "{v1,v2,...}" and "{t,f,...}" array literals of w[0..n). */
static void put_arrays(FILE *f, const pg_want *w, size_t n) {
  fputc('\'', f);
  fputc('{', f);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%s%lld", i ? "," : "", (long long)w[i].v);
  fputs("}'::int8[], '{", f);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%s%c", i ? "," : "", w[i].x ? 't' : 'f');
  fputs("}'::bool[]", f);
}

/*
 * The statement that takes w[0..n) in order and returns the ordinal of
 * each value granted, and in session scope a token for it. try: the
 * pg_try_ forms (rows only for what was granted); else the waiting forms
 * (an error takes the lot).
 *
 * Session scope draws the tokens in the statement, durably whatever the
 * session's synchronous_commit: the statement is one implicit transaction,
 * SET LOCAL synchronous_commit = on makes its commit wait for the WAL
 * flush, and a nextval that logs the sequence takes a transaction id, so
 * that the commit is one that flushes. The locks are taken by a scalar
 * subquery (an InitPlan, run to its end before the first outer row) and the
 * tokens drawn by the outer rows, so no nextval runs in a statement that
 * then fails on a later lock: a transaction that rolls back after logging
 * the sequence would flush nothing, and a token covered by that WAL record
 * and handed out by a later transaction (which logs nothing itself) could
 * come out again after a crash. Transaction scope draws its tokens in a
 * transaction of their own on a second connection (draw_tokens): one drawn
 * in the txn's long transaction would be flushed only at its commit.
 */
static char *lock_sql(const pg_place *p, const pg_txn *t, const pg_want *w,
                      size_t n, bool try, long lock_ms) ORDO_REQUIRES(t->mu) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return NULL;
  const char *xa = p->u.xact ? "_xact" : "";
  if (p->u.xact)
    fputs(t->in_xact ? "SAVEPOINT ordo; " : "BEGIN; SAVEPOINT ordo; ", f);
  else
    fputs("SET LOCAL synchronous_commit = on; ", f);
  if (!try && lock_ms != t->lock_ms)
    fprintf(f, "SET%s lock_timeout = %ld; SET%s statement_timeout = %ld; ",
            p->u.xact ? " LOCAL" : "", lock_ms, p->u.xact ? " LOCAL" : "",
            lock_ms ? lock_ms + PG_STMT_SLACK_MS : 0);
  if (p->u.xact)
    fputs("SELECT u.o FROM unnest(", f);
  else
    fprintf(f,
            "SELECT g.o, nextval('%s') FROM unnest((SELECT array_agg(u.o "
            "ORDER BY u.o) FROM unnest(",
            p->u.seq);
  put_arrays(f, w, n);
  if (try)
    fprintf(f,
            ") WITH ORDINALITY AS u(v, x, o) WHERE CASE WHEN u.x THEN "
            "pg_try_advisory%s_lock(u.v) ELSE "
            "pg_try_advisory%s_lock_shared(u.v) END",
            xa, xa);
  else
    fprintf(f,
            ") WITH ORDINALITY AS u(v, x, o) WHERE (CASE WHEN u.x THEN "
            "pg_advisory%s_lock(u.v)::text ELSE "
            "pg_advisory%s_lock_shared(u.v)::text END) IS NOT NULL",
            xa, xa);
  if (!p->u.xact)
    fputs(")) AS g(o)", f);
  fclose(f);
  return buf;
}

/*
 * draw_tokens -- transaction scope: one token for each granted value
 * (granted[i] of w[0..n)) into tok[i], drawn on the txn's token
 * connection in a transaction of its own that commits synchronously (see
 * lock_sql), after every lock of the set was granted. That connection is
 * opened when first needed and again once if a reused one fails (the
 * server may have ended it while it was idle). 0 or ORDO_EBACKEND (noted),
 * each exchange bounded by timeout_ms.
 */
static int draw_tokens(pg_place *p, pg_txn *t, size_t n, const bool *granted,
                       uint64_t *tok) ORDO_REQUIRES(t->mu) {
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    m += granted[i];
  char sql[200 + sizeof p->u.seq];
  snprintf(sql, sizeof sql,
           "SET LOCAL synchronous_commit = on; SELECT nextval('%s') FROM "
           "generate_series(1, %zu)",
           p->u.seq, m);
  for (int attempt = 0; attempt < 2; attempt++) {
    bool fresh = !t->tc;
    if (fresh) {
      int rc = 0;
      if ((t->tc = open_conn(p, &rc)) == NULL)
        return rc;
      PQsetNoticeProcessor(t->tc, quiet, p);
    }
    const char *why = NULL;
    PGresult *r =
        exchange(t->tc, sql, ordo__now_ns() + p->u.timeout_ms * PG_MS, &why);
    if (r && PQresultStatus(r) == PGRES_TUPLES_OK &&
        (size_t)PQntuples(r) == m) {
      for (size_t i = 0, k = 0; i < n; i++)
        if (granted[i])
          tok[i] = strtoull(PQgetvalue(r, (int)k++, 0), NULL, 10);
      PQclear(r);
      return 0;
    }
    if (r) { /* the server refused: no use trying again */
      note_err(p, "token", PQresultErrorMessage(r));
      PQclear(r);
      return ORDO_EBACKEND;
    }
    note_err(p, why, PQerrorMessage(t->tc));
    PQfinish(t->tc);
    t->tc = NULL;
    if (fresh)
      break;
  }
  return ORDO_EBACKEND;
}

/* Session scope: lets go of the values of w[0..n) that the failed call may
 * have taken (granted[i], or all when granted is NULL). */
static void undo_session(pg_place *p, pg_txn *t, const pg_want *w, size_t n,
                         const bool *granted) ORDO_REQUIRES(t->mu) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return;
  fputs("SELECT CASE WHEN u.x THEN pg_advisory_unlock(u.v) ELSE "
        "pg_advisory_unlock_shared(u.v) END FROM unnest(",
        f);
  pg_want *sel = malloc(n * sizeof *sel);
  size_t m = 0;
  for (size_t i = 0; sel && i < n; i++)
    if (!granted || granted[i])
      sel[m++] = w[i];
  put_arrays(f, sel ? sel : w, sel ? m : n);
  fputs(") AS u(v, x)", f);
  fclose(f);
  if (t->c && (!sel || m > 0))
    PQclear(run(p, t, buf, ordo__now_ns() + p->u.timeout_ms * PG_MS));
  free(sel);
  free(buf);
}

/* Maps a failed lock statement's SQLSTATE. */
static int lock_error(pg_place *p, const PGresult *r) {
  const char *s = state_of(r);
  if (strcmp(s, "55P03") == 0 || strcmp(s, "57014") == 0) {
    atomic_fetch_add(&p->timeouts, 1);
    return ORDO_ETIMEDOUT;
  }
  if (strcmp(s, "40P01") == 0 || strcmp(s, "40001") == 0) {
    atomic_fetch_add(&p->deadlocks, 1);
    return ORDO_EDEADLK;
  }
  note_err(p, "lock", PQresultErrorMessage(r));
  return ORDO_EBACKEND;
}

/* Records the grant of r[0..n): tokens by value from w/tok. Caller holds
 * t->mu. */
static void record(pg_place *p, pg_txn *t, const ordo_req_t *r, size_t n,
                   const pg_want *w, const uint64_t *tok, size_t nw,
                   const bool *sent_x, const bool *sent_s, uint8_t **copies)
    ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < n; i++) {
    int64_t v = ordo__pg_key_value(r[i].key, r[i].len);
    uint64_t token = 0;
    for (size_t j = 0; j < nw; j++)
      if (w[j].v == v)
        token = tok[j];
    long at = hold_find(t, r[i].key, r[i].len);
    pg_hold *h;
    if (at >= 0) {
      h = &t->h[at];
      h->k.count++;
      if (r[i].mode > h->k.mode)
        h->k.mode = r[i].mode;
    } else {
      size_t ins = (size_t)(-at - 1);
      memmove(&t->h[ins + 1], &t->h[ins], (t->nh - ins) * sizeof *t->h);
      h = &t->h[ins];
      *h = (pg_hold){{copies[i], r[i].len, 1, r[i].mode, 0}, v, false, false};
      copies[i] = NULL;
      t->nh++;
      atomic_fetch_add(&p->keys, 1);
    }
    if (token)
      h->k.token = token;
    /* The first hold of v in this grant carries what was sent for v. */
    if (sent_x[i] && !carrier(t, v, true))
      h->srv_x = true;
    if (sent_s[i] && !carrier(t, v, false))
      h->srv_s = true;
  }
}

static int pg_lock_all(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                       uint64_t deadline_ns) {
  pg_txn *t = pt(tx);
  pg_place *p = pp(tx->o);
  pg_want *w = malloc(n * sizeof *w);
  uint64_t *tok = calloc(n, sizeof *tok);
  bool *sent_x = calloc(n, sizeof *sent_x), *sent_s = calloc(n, sizeof *sent_s);
  bool *granted = calloc(n, sizeof *granted);
  uint8_t **copies = calloc(n, sizeof *copies);
  char *sql = NULL;
  int rc = 0;
  ordo__mutex_lock(&t->mu);
  if (!w || !tok || !sent_x || !sent_s || !granted || !copies) {
    rc = ORDO_ENOMEM;
    goto out;
  }
  if (atomic_exchange(&t->lease_lost, false)) {
    rc = ORDO_ELEASE;
    goto out;
  }
  if (!t->c && (rc = connect_txn(p, t)) != 0)
    goto out;
  if ((rc = ordo__hold_room((void **)&t->h, &t->caph, t->nh, n,
                            sizeof *t->h)) != 0)
    goto out;
  /* What the server must grant: per value, the strongest mode asked that
   * no hold of this txn already carries. */
  size_t nw = 0;
  if ((rc = ordo__hold_copy_new(t->h, t->nh, sizeof *t->h, r, n, copies)) != 0)
    goto out;
  for (size_t i = 0; i < n; i++) {
    int64_t v = ordo__pg_key_value(r[i].key, r[i].len);
    bool x = r[i].mode == ORDO_MODE_X;
    if (carrier(t, v, true) || (!x && carrier(t, v, false)))
      continue; /* the server already gives this txn v in that mode */
    size_t j = 0;
    while (j < nw && w[j].v != v)
      j++;
    if (j == nw)
      w[nw++] = (pg_want){v, x};
    else
      w[j].x = w[j].x || x;
  }
  qsort(w, nw, sizeof *w, want_cmp);
  for (size_t i = 0; i < n; i++) {
    int64_t v = ordo__pg_key_value(r[i].key, r[i].len);
    for (size_t j = 0; j < nw; j++)
      if (w[j].v == v) {
        sent_x[i] = w[j].x;
        sent_s[i] = !w[j].x;
      }
  }
  if (nw > 0) {
    uint64_t now = ordo__now_ns();
    bool try = deadline_ns != ORDO_NO_DEADLINE && deadline_ns <= now;
    long lock_ms = 0;
    uint64_t until = ORDO_NO_DEADLINE;
    if (deadline_ns != ORDO_NO_DEADLINE && !try) {
      uint64_t left = (deadline_ns - now + PG_MS - 1) / PG_MS;
      lock_ms = left > (uint64_t)PG_WAIT_MAX_MS ? PG_WAIT_MAX_MS : (long)left;
      until = now + (uint64_t)lock_ms * PG_MS +
              (PG_STMT_SLACK_MS + p->u.timeout_ms) * PG_MS;
    } else if (try) {
      until = now + p->u.timeout_ms * PG_MS;
    }
    sql = lock_sql(p, t, w, nw, try, lock_ms);
    if (!sql) {
      rc = ORDO_ENOMEM;
      goto out;
    }
    PGresult *res = run(p, t, sql, until);
    if (!res) {
      rc = ORDO_EBACKEND; /* the connection was dropped, and noted */
      goto out;
    }
    bool ok = PQresultStatus(res) == PGRES_TUPLES_OK;
    size_t rows = ok ? (size_t)PQntuples(res) : 0;
    if (ok) {
      if (!try)
        t->lock_ms = lock_ms;
      if (p->u.xact)
        t->in_xact = true;
      for (size_t k = 0; k < rows; k++) {
        long o = strtol(PQgetvalue(res, (int)k, 0), NULL, 10);
        if (o >= 1 && (size_t)o <= nw) {
          granted[o - 1] = true;
          if (!p->u.xact)
            tok[o - 1] = strtoull(PQgetvalue(res, (int)k, 1), NULL, 10);
        }
      }
    } else {
      rc = lock_error(p, res);
      t->lock_ms = -1; /* the failed statement rolled back the SETs */
    }
    PQclear(res);
    if (ok && rows != nw) {
      rc = ORDO_ETIMEDOUT; /* a try found some value taken */
      atomic_fetch_add(&p->timeouts, 1);
    }
    if (ok && !rc && p->u.xact)
      rc = draw_tokens(p, t, nw, granted, tok); /* a failure rolls back */
    if (rc) {
      if (rc == ORDO_EDEADLK) {
        /* The victim lets go of everything before it hears (DESIGN §5). */
        release_everything(p, t);
      } else if (p->u.xact) {
        run_ok(p, t,
               ok ? "ROLLBACK TO SAVEPOINT ordo; RELEASE SAVEPOINT ordo"
                  : (t->in_xact ? "ROLLBACK TO SAVEPOINT ordo; RELEASE "
                                  "SAVEPOINT ordo"
                                : "ROLLBACK"));
        if (!t->in_xact || !ok)
          t->lock_ms = -1;
      } else {
        undo_session(p, t, w, nw, ok ? granted : NULL);
      }
      goto out;
    }
    if (p->u.xact && run_ok(p, t, "RELEASE SAVEPOINT ordo") != 0) {
      /* Whether the grant stands is not known: the session goes, and with
       * it whatever the transaction held. */
      if (t->c)
        drop(p, t, "RELEASE SAVEPOINT");
      rc = ORDO_EBACKEND;
      goto out;
    }
  }
  record(p, t, r, n, w, tok, nw, sent_x, sent_s, copies);
  atomic_fetch_add(&p->acquired, 1);
  if (!atomic_load(&t->rn.holding) && t->nh > 0) {
    uint64_t due = ordo__now_ns() + p->lease_ns / 3;
    atomic_store(&t->rn.due_ns, due);
    atomic_store(&t->rn.holding, true);
    ordo__rn_kick(&p->rn, due);
  }
out:
  ordo__mutex_unlock(&t->mu);
  for (size_t i = 0; copies && i < n; i++)
    free(copies[i]);
  free(copies);
  free(sql);
  free(w);
  free(tok);
  free(sent_x);
  free(sent_s);
  free(granted);
  return rc;
}

/* ---- unlock, held -------------------------------------------------------- */

/* Lets go of hold i (its last count): its server locks pass to another
 * hold of the same value, or are unlocked. Session scope only. Caller
 * holds t->mu. */
static int let_go(pg_place *p, pg_txn *t, size_t i) ORDO_REQUIRES(t->mu) {
  pg_hold *h = &t->h[i];
  pg_hold *heir = NULL;
  for (size_t j = 0; j < t->nh; j++)
    if (j != i && t->h[j].v == h->v)
      heir = &t->h[j];
  int rc = 0;
  if (heir) {
    heir->srv_x = heir->srv_x || h->srv_x;
    heir->srv_s = heir->srv_s || h->srv_s;
  } else if (h->srv_x || h->srv_s) {
    char sql[160];
    if (h->srv_x && h->srv_s)
      snprintf(sql, sizeof sql,
               "SELECT pg_advisory_unlock(%lld), "
               "pg_advisory_unlock_shared(%lld)",
               (long long)h->v, (long long)h->v);
    else
      snprintf(sql, sizeof sql, "SELECT %s(%lld)",
               h->srv_x ? "pg_advisory_unlock" : "pg_advisory_unlock_shared",
               (long long)h->v);
    if (!t->c)
      rc = ORDO_EBACKEND;
    else
      rc = run_ok(p, t, sql);
    /* An exchange that lost the connection dropped it, and drop() let go
     * of every hold, this one included: nothing is left to remove. */
    if (!t->c)
      return rc ? rc : ORDO_EBACKEND;
  }
  free(h->k.key);
  memmove(&t->h[i], &t->h[i + 1], (t->nh - i - 1) * sizeof *t->h);
  t->nh--;
  atomic_fetch_sub(&p->keys, 1);
  atomic_store(&t->rn.holding, t->nh > 0);
  return rc;
}

static int pg_unlock(ordo_txn_t *tx, const void *key, size_t len) {
  pg_txn *t = pt(tx);
  pg_place *p = pp(tx->o);
  int rc = 0;
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false)) {
    rc = ORDO_ELEASE;
    goto out;
  }
  long at = hold_find(t, key, len);
  if (at < 0) {
    rc = ORDO_ENOTHELD;
    goto out;
  }
  if (t->h[at].k.count > 1) {
    t->h[at].k.count--;
    goto out;
  }
  if (p->u.xact) {
    rc = ORDO_ENOTSUP; /* a transaction lock lasts until the commit */
    goto out;
  }
  rc = let_go(p, t, (size_t)at);
  if (rc == 0)
    atomic_fetch_add(&p->released, 1);
out:
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static int pg_unlock_all(ordo_txn_t *tx) {
  pg_txn *t = pt(tx);
  pg_place *p = pp(tx->o);
  int rc = 0;
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false)) {
    rc = ORDO_ELEASE;
    goto out;
  }
  if (t->nh == 0)
    goto out;
  size_t n = t->nh;
  if (!t->c) {
    rc = ORDO_EBACKEND;
  } else {
    rc = run_ok(p, t, p->u.xact ? "COMMIT" : "SELECT pg_advisory_unlock_all()");
    t->in_xact = false;
    t->lock_ms = p->u.xact ? -1 : t->lock_ms;
  }
  holds_clear(p, t);
  if (rc == 0) {
    rc = (int)n;
    atomic_fetch_add(&p->released, n);
  }
out:
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static int pg_held(ordo_txn_t *tx, const void *key, size_t len,
                   ordo_mode_t *mode, uint64_t *fence) {
  pg_txn *t = pt(tx);
  ordo__mutex_lock(&t->mu);
  int count =
      ordo__hold_report(t->h, t->nh, sizeof *t->h, key, len, mode, fence);
  ordo__mutex_unlock(&t->mu);
  return count;
}

static int pg_stats(ordo_t *o, ordo_stats_t *out) {
  pg_place *p = pp(o);
  memset(out, 0, sizeof *out);
  out->acquired = atomic_load(&p->acquired);
  out->timeouts = atomic_load(&p->timeouts);
  out->deadlocks = atomic_load(&p->deadlocks);
  out->released = atomic_load(&p->released);
  out->locks = atomic_load(&p->keys);
  return 0;
}

/* What this place knows: each txn's session and record (a txn inside a
 * call, perhaps a waiting lock, is named busy, not waited for). */
static void pg_dump(ordo_t *o, int fd) {
  pg_place *p = pp(o);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return;
  fprintf(f, "%s: advisory locks, %s scope; timeout %ld ms\n", o->url,
          p->u.xact ? "transaction" : "session", p->u.timeout_ms);
  ordo__mutex_lock(&p->rn.mu);
  if (p->rn.err[0])
    fprintf(f, "last error: %s\n", p->rn.err);
  ordo__rn_txn *l;
  LIST_FOREACH(l, &p->rn.txns, link) {
    pg_txn *t = pt(l->txn);
    fprintf(f, "txn %llu (server pid %d):", (unsigned long long)t->base.id,
            atomic_load(&t->backend_pid));
    if (!ordo__mutex_trylock(&t->mu)) {
      fputs(" busy (inside a call, perhaps a waiting lock)\n", f);
      continue;
    }
    fprintf(f, " %s, holds %zu key(s)%s\n",
            t->c ? "connected" : "not connected", t->nh,
            atomic_load(&t->lease_lost) ? ", LOCKS LOST" : "");
    for (size_t i = 0; i < t->nh; i++) {
      fputs("  ", f);
      ordo__put_key(f, t->h[i].k.key, t->h[i].k.len);
      fprintf(f, " %s holds=%u value=%lld token=%llu\n",
              t->h[i].k.mode == ORDO_MODE_S ? "S" : "X", t->h[i].k.count,
              (long long)t->h[i].v, (unsigned long long)t->h[i].k.token);
    }
    ordo__mutex_unlock(&t->mu);
  }
  ordo__mutex_unlock(&p->rn.mu);
  fprintf(f,
          "counters: acquired %llu, timeouts %llu, deadlocks %llu, "
          "released %llu, sessions lost while holding %llu\n",
          (unsigned long long)atomic_load(&p->acquired),
          (unsigned long long)atomic_load(&p->timeouts),
          (unsigned long long)atomic_load(&p->deadlocks),
          (unsigned long long)atomic_load(&p->released),
          (unsigned long long)atomic_load(&p->lost));
  fclose(f);
  ordo__write_all(fd, buf, len);
  free(buf);
}

static void pg_on_lease_lost(ordo_t *o, void (*cb)(ordo_txn_t *, void *),
                             void *arg) {
  ordo__rn_on_lost(&pp(o)->rn, cb, arg);
}

const ordo__backend ordo__backend_postgres = {
    .scheme = "postgres",
    .caps = ORDO_CAP_SHARED | ORDO_CAP_FENCE | ORDO_CAP_FENCE_DURABLE |
            ORDO_CAP_INCREMENTAL | ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE,
    .open = pg_open,
    .close = pg_close,
    .txn_begin = pg_txn_begin,
    .txn_end = pg_txn_end,
    .lock_all = pg_lock_all,
    .lock_all_async = NULL,
    .unlock = pg_unlock,
    .unlock_all = pg_unlock_all,
    .cancel = NULL,
    .held = pg_held,
    .stats = pg_stats,
    .dump = pg_dump,
    .on_lease_lost = pg_on_lease_lost,
};
