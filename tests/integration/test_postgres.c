/*
 * test_postgres.c -- the postgres:// backend (advisory locks) against a
 * real PostgreSQL cluster that tests/integration/pg_it.sh starts
 * (pg_fixture.sh), reached as ORDO_PG_URL (role ordo, password ordo, the
 * cluster's deadlock_timeout 10 ms), with ORDO_PG_PORT its port and
 * ORDO_PG_PID its postmaster. A case
 * that needs the cluster fails, naming the variable, when the wrapper did
 * not export it: it is never skipped.
 *
 * The cases: the key-to-value map's fixed values; URLs; bad input (nothing
 * listening, a wrong password, a missing database) with clear errors in
 * bounded time; the values actually locked (pg_locks shows ordo's
 * key-to-value map); a timeout that takes nothing; timeout_ms against a
 * server that stops answering (its backend stopped: the connection dropped,
 * ORDO_EBACKEND and then ORDO_ELEASE); every call's bound with the whole
 * server frozen by SIGSTOP (issue 18, item 8); a deadlock
 * between incremental calls that PostgreSQL finds, the victim holding
 * nothing when it hears, and ordo_retry finishing both; the fencing pattern
 * with two clients, where a holder whose session was killed writes late
 * and ordo's tokens make the storage refuse it; a session killed on the
 * server (pg_terminate_backend) reported through the lease-lost callback
 * and as ORDO_ELEASE; the server's idle timeouts ending a holder's session
 * (the connection check sends nothing: issue 18, item 10); and the
 * transaction scope. Every wait is bounded,
 * every bound against a hang grows with ORDO_TEST_TIMEOUT_MULT (tu_ms);
 * concurrent cases have the watchdog; a backend this program stops runs
 * again before anything is asserted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>
#include <sys/socket.h>

int64_t ordo__pg_key_value(const void *key, size_t len);

static const char *URL;
static int PORT;

/* The cluster pg_it.sh started: the case fails, naming the variable, when
 * it is not there. */
#define NEED_PG()                                                              \
  do {                                                                         \
    if (!URL || !*URL)                                                         \
      fail_msg("ORDO_PG_URL is not set: pg_it.sh starts the cluster and "      \
               "exports it; run this test through it (ctest does)");           \
  } while (0)

static ordo_t *open_url(const char *fmt, ...) {
  char url[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(url, sizeof url, fmt, ap);
  va_end(ap);
  ordo_t *o = NULL;
  int rc = ordo_open(&o, url, NULL);
  if (rc != 0)
    print_error("ordo_open(%s) -> %s\n", url, ordo_err_name(rc));
  assert_int_equal(rc, 0);
  return o;
}

static ordo_txn_t *txn(ordo_t *o) {
  ordo_txn_t *t = NULL;
  int rc = ordo_txn_begin(o, &t, NULL);
  if (rc != 0)
    print_error("ordo_txn_begin -> %s\n", ordo_err_name(rc));
  assert_int_equal(rc, 0);
  return t;
}

static void dump_text(ordo_t *o, char *buf, size_t cap) {
  FILE *f = tmpfile();
  assert_non_null(f);
  ordo_dump(o, fileno(f));
  rewind(f);
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = 0;
  fclose(f);
}

/* A side session for looking at the server. */
static PGconn *side(void) {
  PGconn *c = PQconnectdb(URL);
  assert_non_null(c);
  if (PQstatus(c) != CONNECTION_OK)
    print_error("side session: %s\n", PQerrorMessage(c));
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  return c;
}

/* Runs sql on c, which must end in want (PGRES_COMMAND_OK,
 * PGRES_TUPLES_OK); returns the rows it touched (PQcmdTuples). */
static long long exec_ok(PGconn *c, const char *sql, ExecStatusType want) {
  PGresult *r = PQexec(c, sql);
  if (PQresultStatus(r) != want)
    print_error("%s: %s %s\n", sql, PQresStatus(PQresultStatus(r)),
                PQresultErrorMessage(r));
  assert_int_equal(PQresultStatus(r), want);
  long long n = atoll(PQcmdTuples(r));
  PQclear(r);
  return n;
}

static long long one_int(PGconn *c, const char *sql) {
  PGresult *r = PQexec(c, sql);
  if (PQresultStatus(r) != PGRES_TUPLES_OK)
    print_error("%s: %s\n", sql, PQresultErrorMessage(r));
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  assert_int_equal(PQntuples(r), 1);
  long long v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  return v;
}

/* The number of advisory locks the server shows for backends other than
 * the side session's. */
static long long advisory_locks(PGconn *c) {
  return one_int(c, "SELECT count(*) FROM pg_locks WHERE locktype = "
                    "'advisory' AND pid <> pg_backend_pid()");
}

static uint64_t ms_since(uint64_t t0) {
  return (tu_now_ns() - t0) / 1000000u;
}

/* ---- URLs and bad input ---------------------------------------------------
 */

/* The key-to-value map is part of the format (docs/backend-postgres.md
 * spells it out for other languages): these values must never change. */
static void test_key_values(void **state) {
  (void)state;
  assert_int_equal(ordo__pg_key_value("a", 1), 6857225946766476583LL);
  assert_int_equal(ordo__pg_key_value("acct:1", 6), -2416821065840834145LL);
  assert_int_equal(ordo__pg_key_value("\0\xff", 2), 6077478251463948767LL);
}

static void test_urls(void **state) {
  (void)state;
  static const char *const bad[] = {
      "postgres:",
      "postgres:   ",
      "postgres:host=x nosuchkeyword=1",
      "postgres:host='unterminated",
      "postgres://h/db?scope=bogus",
      "postgres://h/db?timeout_ms=0",
      "postgres://h/db?timeout_ms=abc",
      "postgres://h/db?lease_ms=5",
      "postgres://h/db?nosuchparam=1",
      "postgre://h/db",
      "postgres://h/db?fence_seq=nodot",
      "postgres://h/db?fence_seq=a.b.c",
      "postgres://h/db?fence_seq=.x",
      "postgres://h/db?fence_seq=x.",
      "postgres://h/db?fence_seq=Public.x",
      "postgres://h/db?fence_seq=s.x');drop",
      "postgres://h/db?fence_seq=s.1x",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ordo_t *o = NULL;
    int rc = ordo_open(&o, bad[i], NULL);
    if (rc != ORDO_EURL)
      print_error("%s -> %s, not EURL\n", bad[i], ordo_err_name(rc));
    assert_int_equal(rc, ORDO_EURL);
  }
  static const char *const good[] = {
      "postgres://u:p@h:5432/db",
      "postgresql://h/db?sslmode=disable&scope=xact&timeout_ms=100",
      "postgres://h/db?application_name=x&lease_ms=3000",
      "postgres://h/db?fence_seq=my_schema.tokens_2",
      "postgres:host=/tmp dbname=x password='a b'",
  };
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    ordo_t *o = open_url("%s", good[i]); /* connects to nothing */
    /* The password is not shown. */
    assert_null(strstr(ordo_url(o), "a b"));
    assert_null(strstr(ordo_url(o), ":p@"));
    ordo_close(o);
  }
}

/* ordo_txn_begin on url fails with want within bound_ms (scaled: a bound
 * against a hang, not a speed), and the dump names why. */
static void begin_fails(const char *url, int want, uint64_t bound_ms,
                        const char *in_dump) {
  ordo_t *o = open_url("%s", url);
  ordo_txn_t *t = NULL;
  uint64_t t0 = tu_now_ns();
  int rc = ordo_txn_begin(o, &t, NULL);
  uint64_t ms = ms_since(t0);
  print_message("%s: %s after %llu ms\n", url, ordo_err_name(rc),
                (unsigned long long)ms);
  assert_int_equal(rc, want);
  assert_true(ms <= tu_ms(bound_ms));
  char buf[4096];
  dump_text(o, buf, sizeof buf);
  if (!strstr(buf, in_dump))
    print_error("the dump lacks '%s':\n%s\n", in_dump, buf);
  assert_non_null(strstr(buf, in_dump));
  ordo_close(o);
}

static void test_bad_input(void **state) {
  (void)state;
  NEED_PG();
  if (PORT <= 0)
    fail_msg("ORDO_PG_PORT is not set: pg_it.sh exports the cluster's port");
  /* A port where nothing listens. */
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  assert_int_equal(getsockname(s, (struct sockaddr *)&a, &len), 0);
  char url[256];
  snprintf(url, sizeof url, "postgres://ordo:ordo@127.0.0.1:%d/x",
           ntohs(a.sin_port));
  begin_fails(url, ORDO_EBACKEND, 3000, "refused");
  close(s);
  snprintf(url, sizeof url, "postgres://ordo:wrong@127.0.0.1:%d/ordo", PORT);
  begin_fails(url, ORDO_EAUTH, 3000, "password authentication failed");
  snprintf(url, sizeof url, "postgres://ordo:ordo@127.0.0.1:%d/nosuchdb", PORT);
  begin_fails(url, ORDO_EBACKEND, 3000, "does not exist");
}

/* ---- Values, timeouts, deadlocks ------------------------------------------
 */

/* pg_locks shows the values of ordo's map, in the mode asked. */
static void test_values(void **state) {
  (void)state;
  NEED_PG();
  ordo_t *o = open_url("%s", URL);
  ordo_txn_t *t = txn(o);
  ordo_req_t r[] = {ORDO_REQ_X("acct:1", 6), ORDO_REQ_S("acct:2", 6)};
  assert_int_equal(ordo_lock_all(t, r, 2, 1000), 0);
  PGconn *c = side();
  char sql[256];
  for (int i = 0; i < 2; i++) {
    int64_t v = ordo__pg_key_value(r[i].key, r[i].len);
    uint64_t u = (uint64_t)v;
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
             "classid = %llu AND objid = %llu AND objsubid = 1 AND mode = "
             "'%s' AND granted",
             (unsigned long long)(u >> 32),
             (unsigned long long)(u & 0xffffffffu),
             i == 0 ? "ExclusiveLock" : "ShareLock");
    assert_int_equal(one_int(c, sql), 1);
  }
  assert_int_equal(ordo_unlock(t, "acct:1", 6), 0);
  assert_int_equal(advisory_locks(c), 1);
  assert_int_equal(ordo_unlock_all(t), 1);
  assert_int_equal(advisory_locks(c), 0);
  PQfinish(c);
  ordo_txn_end(t);
  ordo_close(o);
}

/* A lock_all that times out on its last value holds none of the others,
 * and waited about its bound. */
static void test_timeout(void **state) {
  (void)state;
  NEED_PG();
  ordo_t *o = open_url("%s", URL);
  ordo_txn_t *h = txn(o), *t = txn(o);
  /* h holds the value that sorts last among t's. */
  const char *keys[3] = {"t:a", "t:b", "t:c"};
  int last = 0;
  for (int i = 1; i < 3; i++)
    if (ordo__pg_key_value(keys[i], 3) > ordo__pg_key_value(keys[last], 3))
      last = i;
  assert_int_equal(ordo_lock(h, keys[last], 3, ORDO_MODE_X, 0), 0);
  ordo_req_t r[3];
  for (int i = 0; i < 3; i++)
    r[i] = (ordo_req_t)ORDO_REQ_X(keys[i], 3);
  uint64_t t0 = tu_now_ns();
  assert_int_equal(ordo_lock_all(t, r, 3, 150), ORDO_ETIMEDOUT);
  uint64_t ms = ms_since(t0);
  /* It waited its bound (the server's lock_timeout, less a little: its
   * clock starts when the statement does), and then no hang. */
  assert_true(ms >= 140);
  assert_true(ms < tu_ms(150 + 2000));
  PGconn *c = side();
  assert_int_equal(advisory_locks(c), 1); /* h's alone */
  /* Try once (timeout 0): refused at once, nothing kept either. */
  t0 = tu_now_ns();
  assert_int_equal(ordo_lock_all(t, r, 3, 0), ORDO_ETIMEDOUT);
  assert_true(ms_since(t0) < tu_ms(1000));
  assert_int_equal(advisory_locks(c), 1);
  ordo_txn_end(h);
  assert_int_equal(ordo_lock_all(t, r, 3, 1000), 0);
  assert_int_equal(advisory_locks(c), 3);
  PQfinish(c);
  ordo_txn_end(t);
  ordo_close(o);
}

typedef struct dl_arg {
  ordo_t *o;
  const char *first, *second;
  pthread_barrier_t *both_hold;
  int rc, victim;
  unsigned attempts;
} dl_arg;

/* The body ordo_retry runs: the first key, a rendezvous (first attempt
 * only), the second key; a victim holds nothing when it hears. */
static int dl_body(ordo_txn_t *t, void *arg) {
  dl_arg *a = arg;
  a->attempts++;
  int rc = ordo_lock(t, a->first, strlen(a->first), ORDO_MODE_X, 5000);
  if (rc)
    return rc;
  if (a->attempts == 1)
    pthread_barrier_wait(a->both_hold);
  rc = ordo_lock(t, a->second, strlen(a->second), ORDO_MODE_X, 5000);
  if (rc == ORDO_EDEADLK) {
    a->victim++;
    if (ordo_held(t, a->first, strlen(a->first), NULL) != 0)
      a->victim += 1000; /* still holding: fails the test */
    return rc;
  }
  if (rc)
    return rc;
  ordo_unlock_all(t);
  return 0;
}

static void *dl_main(void *arg) {
  dl_arg *a = arg;
  ordo_txn_t *t = NULL;
  if (ordo_txn_begin(a->o, &t, NULL) != 0) {
    a->rc = ORDO_EBACKEND;
    return NULL;
  }
  ordo_retry_options_t ro;
  ordo_retry_options_init(&ro);
  ro.max_attempts = 10;
  a->rc = ordo_retry(t, &ro, dl_body, a, NULL);
  ordo_txn_end(t);
  return NULL;
}

/* Two incremental txns take two keys in opposite orders: PostgreSQL finds
 * the cycle (deadlock_timeout 10 ms), one of them gets ORDO_EDEADLK with
 * nothing held, and ordo_retry finishes both. */
static void test_deadlock(void **state) {
  (void)state;
  NEED_PG();
  ordo_t *o = open_url("%s", URL);
  tu_watchdog_start(o, 30, "postgres incremental deadlock");
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, 2);
  dl_arg x = {o, "dl:a", "dl:b", &b, -1, 0, 0};
  dl_arg y = {o, "dl:b", "dl:a", &b, -1, 0, 0};
  pthread_t tx, ty;
  assert_int_equal(pthread_create(&tx, NULL, dl_main, &x), 0);
  assert_int_equal(pthread_create(&ty, NULL, dl_main, &y), 0);
  pthread_join(tx, NULL);
  pthread_join(ty, NULL);
  tu_watchdog_stop();
  pthread_barrier_destroy(&b);
  print_message("victims %d + %d, attempts %u + %u\n", x.victim, y.victim,
                x.attempts, y.attempts);
  assert_int_equal(x.rc, 0);
  assert_int_equal(y.rc, 0);
  assert_true(x.victim + y.victim >= 1 && x.victim + y.victim < 1000);
  ordo_stats_t st;
  assert_int_equal(ordo_stats(o, &st), 0);
  assert_true(st.deadlocks >= 1);
  ordo_close(o);
}

/* ---- Fencing, a killed session, the transaction scope ---------------------
 */

/* The pid of the one backend other than c's own that holds an advisory
 * lock (bounded wait until there is exactly one). */
static long long holder_pid(PGconn *c) {
  uint64_t end = tu_now_ns() + tu_ms(5000) * 1000000u;
  for (;;) {
    long long n = one_int(c, "SELECT count(DISTINCT pid) FROM pg_locks WHERE "
                             "locktype = 'advisory' AND pid <> "
                             "pg_backend_pid()");
    if (n == 1)
      break;
    assert_true(tu_now_ns() < end);
    tu_sleep_us(10000);
  }
  return one_int(c, "SELECT min(pid) FROM pg_locks WHERE locktype = "
                    "'advisory' AND pid <> pg_backend_pid()");
}

/* Waits (bounded) until backend pid is gone from pg_stat_activity. */
static void await_backend_gone(PGconn *c, long long pid) {
  char sql[128];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM pg_stat_activity WHERE pid = %lld", pid);
  uint64_t end = tu_now_ns() + tu_ms(5000) * 1000000u;
  while (one_int(c, sql) > 0) {
    assert_true(tu_now_ns() < end);
    tu_sleep_us(10000);
  }
}

/* The storage's guarded write: row 1 takes val only when token is not
 * below the greatest token it has seen. Returns the rows written (1, or
 * 0 when refused). */
static long long fenced_write(PGconn *c, const char *val, uint64_t token) {
  char sql[200];
  snprintf(sql, sizeof sql,
           "UPDATE fenced SET val = '%s', fence = %llu WHERE id = 1 AND "
           "fence <= %llu",
           val, (unsigned long long)token, (unsigned long long)token);
  return exec_ok(c, sql, PGRES_COMMAND_OK);
}

/*
 * The documented pattern, with two clients (two ordo_t): the storage keeps
 * the greatest token it has seen and refuses a write that carries a
 * smaller one. a holds doc:1 and writes; its session is killed (as an
 * administrator or a failover would), so the lock is free although a
 * still believes it holds it; b takes it with a token greater than a's,
 * and writes; a's late write is refused. Each count of rows written
 * follows from the tokens ordo gave: were b's token not greater, b's write
 * would be refused or a's late one taken.
 */
static void test_fencing_pattern(void **state) {
  (void)state;
  NEED_PG();
  PGconn *c = side();
  exec_ok(c,
          "CREATE TABLE IF NOT EXISTS fenced (id int PRIMARY KEY, val text, "
          "fence bigint NOT NULL DEFAULT 0)",
          PGRES_COMMAND_OK);
  exec_ok(c, "DELETE FROM fenced", PGRES_COMMAND_OK);
  assert_int_equal(
      exec_ok(c, "INSERT INTO fenced VALUES (1, '', 0)", PGRES_COMMAND_OK), 1);
  /* A long lease_ms: a's connection is not checked meanwhile, so a does
   * not learn its session is gone until it calls. */
  char url[600];
  snprintf(url, sizeof url, "%s%clease_ms=600000", URL,
           strchr(URL, '?') ? '&' : '?');
  ordo_t *oa = open_url("%s", url), *ob = open_url("%s", url);
  ordo_txn_t *a = txn(oa), *b = txn(ob);
  uint64_t ta, tb;
  assert_int_equal(ordo_lock(a, "doc:1", 5, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_fence(a, "doc:1", 5, &ta), 0);
  assert_int_equal(fenced_write(c, "a1", ta), 1);
  /* b waits for a's lock: it is a's. */
  assert_int_equal(ordo_lock(b, "doc:1", 5, ORDO_MODE_X, 0), ORDO_ETIMEDOUT);
  long long pid = holder_pid(c);
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%lld)::int", pid);
  assert_int_equal(one_int(c, sql), 1);
  await_backend_gone(c, pid);
  assert_int_equal(ordo_held(a, "doc:1", 5, NULL), 1); /* a does not know */
  assert_int_equal(ordo_lock(b, "doc:1", 5, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_fence(b, "doc:1", 5, &tb), 0);
  print_message("a's token %llu, b's %llu\n", (unsigned long long)ta,
                (unsigned long long)tb);
  assert_true(tb > ta);
  assert_int_equal(fenced_write(c, "b1", tb), 1);
  assert_int_equal(fenced_write(c, "a2", ta), 0); /* the stale write */
  assert_int_equal(fenced_write(c, "b2", tb), 1); /* b writes on */
  PGresult *r = PQexec(c, "SELECT val, fence FROM fenced WHERE id = 1");
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  assert_int_equal(PQntuples(r), 1);
  assert_string_equal(PQgetvalue(r, 0, 0), "b2");
  assert_int_equal(strtoull(PQgetvalue(r, 0, 1), NULL, 10), tb);
  PQclear(r);
  /* a learns it at its next call: the connection is gone (ORDO_EBACKEND),
   * and then its lock was (ORDO_ELEASE, once). */
  assert_int_equal(ordo_lock(a, "doc:2", 5, ORDO_MODE_X, 1000), ORDO_EBACKEND);
  assert_int_equal(ordo_held(a, "doc:1", 5, NULL), 0);
  assert_int_equal(ordo_lock(a, "doc:2", 5, ORDO_MODE_X, 1000), ORDO_ELEASE);
  assert_int_equal(ordo_unlock_all(b), 1);
  PQfinish(c);
  ordo_txn_end(a);
  ordo_txn_end(b);
  ordo_close(oa);
  ordo_close(ob);
}

/*
 * timeout_ms bounds every exchange that does not wait for a lock: here the
 * server stops answering (the txn's backend is stopped with SIGSTOP), a try
 * (timeout 0) gets no reply within timeout_ms, and the connection is
 * dropped (no cancel request: libpq 15's blocks): the call returns
 * ORDO_EBACKEND after that bound and no later than a bound against a hang.
 * Nothing is asserted while the backend is stopped; once it runs again it
 * ends (its client has gone) and its lock with it, and the txn's next call
 * says ORDO_ELEASE once.
 */
static void test_timeout_ms(void **state) {
  (void)state;
  NEED_PG();
  /* The bound is also the reconnect's after the ELEASE below: a sanitizer
   * build's connect and SCRAM exchange can take longer than 300 ms (TSan
   * once took it past, and the txn's next lock said EBACKEND), so it is
   * stretched with the other bounds. */
  const long tmo = (long)tu_ms(300);
  char url[600];
  snprintf(url, sizeof url, "%s%ctimeout_ms=%ld&lease_ms=600000", URL,
           strchr(URL, '?') ? '&' : '?', tmo);
  ordo_t *o = open_url("%s", url);
  ordo_txn_t *t = txn(o);
  assert_int_equal(ordo_lock(t, "pgto:1", 6, ORDO_MODE_X, 1000), 0);
  PGconn *c = side();
  long long pid = holder_pid(c);
  int stop_rc = kill((pid_t)pid, SIGSTOP);
  uint64_t t0 = tu_now_ns();
  int rc = stop_rc == 0 ? ordo_lock(t, "pgto:2", 6, ORDO_MODE_X, 0) : 0;
  uint64_t ms = ms_since(t0);
  int cont_rc = stop_rc == 0 ? kill((pid_t)pid, SIGCONT) : 0;
  assert_int_equal(stop_rc, 0);
  assert_int_equal(cont_rc, 0);
  print_message("a try on a stopped backend: %s after %llu ms\n",
                ordo_err_name(rc), (unsigned long long)ms);
  assert_int_equal(rc, ORDO_EBACKEND);
  assert_true(ms >= (uint64_t)(tmo - 20));
  assert_true(ms <= tu_ms((uint64_t)tmo + 2000));
  char buf[4096];
  dump_text(o, buf, sizeof buf);
  if (!strstr(buf, "no reply within the bound"))
    print_error("the dump lacks the reason:\n%s\n", buf);
  assert_non_null(strstr(buf, "no reply within the bound"));
  assert_int_equal(ordo_held(t, "pgto:1", 6, NULL), 0);
  /* The backend runs again, finds its client gone and ends: the lock is
   * free for another, and t hears of it once. */
  await_backend_gone(c, pid);
  ordo_txn_t *u = txn(o);
  assert_int_equal(ordo_lock(u, "pgto:1", 6, ORDO_MODE_X, 0), 0);
  ordo_txn_end(u);
  assert_int_equal(ordo_lock(t, "pgto:1", 6, ORDO_MODE_X, 1000), ORDO_ELEASE);
  assert_int_equal(ordo_lock(t, "pgto:1", 6, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_unlock_all(t), 1);
  PQfinish(c);
  ordo_txn_end(t);
  ordo_close(o);
}

/* The postmaster (pg_it.sh exports its pid). */
static pid_t postmaster(void) {
  const char *s = getenv("ORDO_PG_PID");
  if (!s || atoi(s) <= 0)
    fail_msg("ORDO_PG_PID is not set: pg_it.sh exports the postmaster's pid");
  return (pid_t)atoi(s);
}

/* The parent of pid, from /proc (0 when unknown). */
static pid_t parent_of(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  /* pid (comm) state ppid ...: comm may hold spaces, so read after the
   * last ')'. */
  char *r = strrchr(buf, ')');
  int ppid = 0;
  char st;
  return r && sscanf(r + 1, " %c %d", &st, &ppid) == 2 ? (pid_t)ppid : 0;
}

/* Sends sig to the postmaster and to each of its children (every backend
 * and auxiliary process: each child of the postmaster leads a process
 * group of its own, so one kill of a group would not reach them). The
 * postmaster goes first, so that on SIGSTOP it forks no child that the
 * scan of /proc could miss. 0, or -1 when a kill failed. */
static int signal_server(pid_t pm, int sig) {
  int rc = kill(pm, sig);
  DIR *d = opendir("/proc");
  if (!d)
    return -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    pid_t pid = (pid_t)atoi(e->d_name);
    if (parent_of(pid) == pm && kill(pid, sig) != 0)
      rc = -1;
  }
  closedir(d);
  /* runuser, the postmaster's parent when the tests run as root, stops
   * itself when its child stops: it must run again too, or it would never
   * reap the postmaster. */
  if (sig == SIGCONT) {
    pid_t pp = parent_of(pm);
    if (pp > 1 && pp != getpid())
      kill(pp, SIGCONT);
  }
  return rc;
}

/* Thaws a frozen server when told, or by itself after cap_ms: a call that
 * hangs on the frozen server (the defect) then returns late and fails its
 * bound, rather than hanging the test. */
typedef struct thaw {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool now, by_cap;
  pid_t pm;
  uint64_t cap_ms;
  int rc;
} thaw;

static void *thaw_main(void *arg) {
  thaw *w = arg;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + w->cap_ms * 1000000u;
  ts.tv_sec += (time_t)(ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  pthread_mutex_lock(&w->mu);
  while (!w->now && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0)
    ;
  w->by_cap = !w->now;
  pthread_mutex_unlock(&w->mu);
  w->rc = signal_server(w->pm, SIGCONT);
  return NULL;
}

/*
 * Issue 18, item 8: the whole server frozen (every process of the cluster
 * stopped with SIGSTOP, so the postmaster takes no cancel request either),
 * while txn a holds a key and the renewal thread checks it (lease_ms 600:
 * every 200 ms). A call with a 200 ms timeout returns within 200 ms + the
 * statement slack (50) + timeout_ms, plus a margin against load: b's wait,
 * b's reconnect (bounded by timeout_ms, not libpq's connect_timeout of 2 s
 * at least), and a's own call, which must not be kept waiting by a check
 * of a's connection hung on the server (the renewal thread holds a's mutex
 * through a check). Nothing is asserted while the server is frozen; a
 * thread thaws it after a cap, so the defect fails the bounds instead of
 * hanging. Once thawed, the server ends the sessions whose clients left,
 * and a's key is free again.
 */
static void test_frozen_server(void **state) {
  (void)state;
  NEED_PG();
  const long tmo = 300;
  const uint64_t bound = tu_ms(200 + 50 + (uint64_t)tmo + 500);
  pid_t pm = postmaster();
  ordo_t *o = open_url("%s%ctimeout_ms=%ld&lease_ms=600", URL,
                       strchr(URL, '?') ? '&' : '?', tmo);
  ordo_txn_t *a = txn(o), *b = txn(o), *c = txn(o);
  assert_int_equal(ordo_lock(a, "frz:a", 5, ORDO_MODE_X, 1000), 0);
  /* c holds two keys and unlocks one while the server is frozen: the
   * unlock's exchange drops the connection, which lets go of every hold,
   * and the unlock must not then let go of its key a second time (it did:
   * a double free in let_go, and a hold count that wrapped). */
  assert_int_equal(ordo_lock(c, "frz:d", 5, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_lock(c, "frz:e", 5, ORDO_MODE_X, 1000), 0);
  thaw w = {PTHREAD_MUTEX_INITIALIZER,
            PTHREAD_COND_INITIALIZER,
            false,
            false,
            pm,
            tu_ms(8000),
            -1};
  int stop_rc = signal_server(pm, SIGSTOP);
  pthread_t th;
  int th_rc = pthread_create(&th, NULL, thaw_main, &w);
  int rc_b = 0, rc_b2 = 0, rc_a = 0, rc_c = 0;
  uint64_t ms_b = 0, ms_b2 = 0, ms_a = 0, ms_c = 0;
  if (stop_rc == 0 && th_rc == 0) {
    uint64_t t0 = tu_now_ns();
    rc_b = ordo_lock(b, "frz:b", 5, ORDO_MODE_X, 200);
    ms_b = ms_since(t0);
    t0 = tu_now_ns();
    rc_b2 = ordo_lock(b, "frz:b", 5, ORDO_MODE_X, 200); /* reconnects */
    ms_b2 = ms_since(t0);
    t0 = tu_now_ns();
    rc_a = ordo_lock(a, "frz:c", 5, ORDO_MODE_X, 200);
    ms_a = ms_since(t0);
    t0 = tu_now_ns();
    rc_c = ordo_unlock(c, "frz:d", 5);
    ms_c = ms_since(t0);
  }
  if (th_rc == 0) {
    pthread_mutex_lock(&w.mu);
    w.now = true;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(th, NULL);
  } else {
    signal_server(pm, SIGCONT);
  }
  assert_int_equal(stop_rc, 0);
  assert_int_equal(th_rc, 0);
  assert_int_equal(w.rc, 0);
  print_message("frozen server: b %s after %llu ms, b again %s after %llu ms, "
                "a %s after %llu ms (bound %llu ms)%s\n",
                ordo_err_name(rc_b), (unsigned long long)ms_b,
                ordo_err_name(rc_b2), (unsigned long long)ms_b2,
                ordo_err_name(rc_a), (unsigned long long)ms_a,
                (unsigned long long)bound,
                w.by_cap ? "; thawed by the cap: a call hung" : "");
  assert_false(w.by_cap);
  assert_int_equal(rc_b, ORDO_EBACKEND);
  assert_true(ms_b <= bound);
  assert_int_equal(rc_b2, ORDO_EBACKEND);
  assert_true(ms_b2 <= bound);
  /* a's connection was dropped by its own call (EBACKEND: the renewal
   * thread's check sends nothing, so it waits on nothing), or, had a check
   * dropped it, a's lock is gone (ELEASE). */
  assert_true(rc_a == ORDO_ELEASE || rc_a == ORDO_EBACKEND);
  assert_true(ms_a <= bound + tu_ms((uint64_t)tmo));
  assert_int_equal(ordo_held(a, "frz:a", 5, NULL), 0);
  print_message("frozen server: c's unlock %s after %llu ms\n",
                ordo_err_name(rc_c), (unsigned long long)ms_c);
  assert_true(rc_c == ORDO_EBACKEND || rc_c == ORDO_ELEASE);
  assert_true(ms_c <= bound + tu_ms((uint64_t)tmo));
  assert_int_equal(ordo_held(c, "frz:d", 5, NULL), 0);
  assert_int_equal(ordo_held(c, "frz:e", 5, NULL), 0);
  ordo_txn_end(a);
  ordo_txn_end(b);
  ordo_txn_end(c);
  ordo_close(o);
  /* Thawed, the server ends a's old session, whose client left: the key is
   * free for another (a bounded wait). */
  ordo_t *o2 = open_url("%s", URL);
  ordo_txn_t *u = txn(o2);
  assert_int_equal(ordo_lock(u, "frz:a", 5, ORDO_MODE_X, tu_ms(5000)), 0);
  ordo_txn_end(u);
  ordo_close(o2);
}

typedef struct lost_box {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
} lost_box;

static void on_lost(ordo_txn_t *t, void *arg) {
  (void)t;
  lost_box *b = arg;
  pthread_mutex_lock(&b->mu);
  b->calls++;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

/* The server ends the session (pg_terminate_backend, as an administrator or
 * a failover would): the check at a third of lease_ms finds it, the
 * callback runs, the next call says ORDO_ELEASE once, and the key is free
 * for others at once. */
static void test_session_killed(void **state) {
  (void)state;
  NEED_PG();
  ordo_t *o = open_url("%s%clease_ms=300", URL, strchr(URL, '?') ? '&' : '?');
  lost_box b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  ordo_on_lease_lost(o, on_lost, &b);
  ordo_txn_t *t = txn(o);
  assert_int_equal(ordo_lock(t, "kill:1", 6, ORDO_MODE_X, 1000), 0);
  PGconn *c = side();
  assert_int_equal(one_int(c, "SELECT count(*) FROM (SELECT "
                              "pg_terminate_backend(pid) FROM pg_locks WHERE "
                              "locktype = 'advisory' AND pid <> "
                              "pg_backend_pid()) k"),
                   1);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(5 * tu_mult());
  pthread_mutex_lock(&b.mu);
  while (b.calls == 0 && pthread_cond_timedwait(&b.cv, &b.mu, &ts) == 0)
    ;
  pthread_mutex_unlock(&b.mu);
  assert_int_equal(b.calls, 1);
  assert_int_equal(ordo_held(t, "kill:1", 6, NULL), 0);
  ordo_txn_t *u = txn(o);
  assert_int_equal(ordo_lock(u, "kill:1", 6, ORDO_MODE_X, 0), 0);
  ordo_txn_end(u);
  assert_int_equal(ordo_lock(t, "kill:1", 6, ORDO_MODE_X, 1000), ORDO_ELEASE);
  assert_int_equal(ordo_lock(t, "kill:1", 6, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_unlock_all(t), 1);
  PQfinish(c);
  ordo_txn_end(t);
  ordo_close(o);
}

/* Waits (bounded by ms, scaled) for the lease-lost callback's first call;
 * returns how many came. */
static int await_lost(lost_box *b, uint64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + tu_ms(ms) * 1000000u;
  ts.tv_sec += (time_t)(ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  pthread_mutex_lock(&b->mu);
  while (b->calls == 0 && pthread_cond_timedwait(&b->cv, &b->mu, &ts) == 0)
    ;
  int n = b->calls;
  pthread_mutex_unlock(&b->mu);
  return n;
}

/*
 * Issue 18, item 10: the server's idle timeouts are the administrator's,
 * and ordo's connection check must not defeat them. A txn holds a key
 * past the timeout (500 ms) while the renewal thread checks its connection
 * every 100 ms (lease_ms 300): scope=xact against
 * idle_in_transaction_session_timeout (the transaction stays open while
 * the key is held), scope=session against idle_session_timeout. The check
 * sends nothing (a SELECT 1 would reset the server's idle timer, so the
 * session would never time out), so the server ends the session: the
 * callback hears of it, the dump gives the server's reason, the key is
 * free for others at once, and the txn's next call says ORDO_ELEASE once.
 * The wait for the callback is bounded by 6 timeouts.
 */
static void idle_timeout_case(const char *scope, const char *setting,
                              const char *reason) {
  ordo_t *o = open_url("%s%cscope=%s&lease_ms=300&options=-c%%20%s%%3D500", URL,
                       strchr(URL, '?') ? '&' : '?', scope, setting);
  lost_box b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  ordo_on_lease_lost(o, on_lost, &b);
  ordo_txn_t *t = txn(o);
  uint64_t t0 = tu_now_ns();
  assert_int_equal(ordo_lock(t, "idle:1", 6, ORDO_MODE_X, 1000), 0);
  int calls = await_lost(&b, 3000);
  uint64_t ms = ms_since(t0);
  print_message("scope=%s, %s 500 ms: %s after %llu ms\n", scope, setting,
                calls ? "the session ended, the callback ran"
                      : "the session was kept alive (no callback)",
                (unsigned long long)ms);
  assert_int_equal(calls, 1);
  assert_true(ms >= 450);
  char buf[4096];
  dump_text(o, buf, sizeof buf);
  if (!strstr(buf, reason))
    print_error("the dump lacks '%s':\n%s\n", reason, buf);
  assert_non_null(strstr(buf, reason));
  assert_int_equal(ordo_held(t, "idle:1", 6, NULL), 0);
  ordo_t *o2 = open_url("%s", URL);
  ordo_txn_t *u = txn(o2);
  assert_int_equal(ordo_lock(u, "idle:1", 6, ORDO_MODE_X, 0), 0);
  ordo_txn_end(u);
  ordo_close(o2);
  assert_int_equal(ordo_lock(t, "idle:1", 6, ORDO_MODE_X, 1000), ORDO_ELEASE);
  ordo_txn_end(t);
  ordo_close(o);
}

static void test_idle_timeouts(void **state) {
  (void)state;
  NEED_PG();
  idle_timeout_case("xact", "idle_in_transaction_session_timeout",
                    "idle-in-transaction timeout");
  idle_timeout_case("session", "idle_session_timeout", "idle-session timeout");
}

/* Without the check (a long lease_ms), the holder's own next call finds
 * the killed session: ORDO_EBACKEND with libpq's message in the dump, then
 * ORDO_ELEASE once (its keys went with the session), then it connects
 * again. */
static void test_session_killed_found_by_call(void **state) {
  (void)state;
  NEED_PG();
  ordo_t *o =
      open_url("%s%clease_ms=600000", URL, strchr(URL, '?') ? '&' : '?');
  ordo_txn_t *t = txn(o);
  assert_int_equal(ordo_lock(t, "kill:2", 6, ORDO_MODE_X, 1000), 0);
  PGconn *c = side();
  assert_int_equal(one_int(c, "SELECT count(*) FROM (SELECT "
                              "pg_terminate_backend(pid) FROM pg_locks WHERE "
                              "locktype = 'advisory' AND pid <> "
                              "pg_backend_pid()) k"),
                   1);
  /* The backend is gone once pg_stat_activity stops showing it
   * (bounded); only then is the next call sure to find a dead socket. */
  uint64_t end = tu_now_ns() + tu_ms(5000) * 1000000u;
  while (one_int(c, "SELECT count(*) FROM pg_stat_activity WHERE "
                    "application_name = 'ordo'") > 0) {
    assert_true(tu_now_ns() < end);
    tu_sleep_us(10000);
  }
  assert_int_equal(ordo_lock(t, "kill:3", 6, ORDO_MODE_X, 1000), ORDO_EBACKEND);
  char buf[4096];
  dump_text(o, buf, sizeof buf);
  if (!strstr(buf, "terminat"))
    print_error("the dump lacks libpq's message:\n%s\n", buf);
  assert_non_null(strstr(buf, "terminat"));
  assert_int_equal(ordo_held(t, "kill:2", 6, NULL), 0);
  assert_int_equal(ordo_lock(t, "kill:3", 6, ORDO_MODE_X, 1000), ORDO_ELEASE);
  assert_int_equal(ordo_lock(t, "kill:3", 6, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_unlock_all(t), 1);
  PQfinish(c);
  ordo_txn_end(t);
  ordo_close(o);
}

/* scope=xact: the locks last until ordo_unlock_all commits; one key cannot
 * be let go alone; a failed call keeps what the transaction held before. */
static void test_xact_scope(void **state) {
  (void)state;
  NEED_PG();
  ordo_t *o = open_url("%s%cscope=xact", URL, strchr(URL, '?') ? '&' : '?');
  ordo_txn_t *t = txn(o), *h = txn(o);
  assert_int_equal(ordo_lock(t, "x:1", 3, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_lock(h, "x:2", 3, ORDO_MODE_X, 1000), 0);
  ordo_req_t r[] = {ORDO_REQ_X("x:2", 3), ORDO_REQ_X("x:3", 3)};
  assert_int_equal(ordo_lock_all(t, r, 2, 100), ORDO_ETIMEDOUT);
  PGconn *c = side();
  assert_int_equal(advisory_locks(c), 2); /* t's x:1 and h's x:2 */
  assert_int_equal(ordo_held(t, "x:1", 3, NULL), 1);
  assert_int_equal(ordo_unlock(t, "x:1", 3), ORDO_ENOTSUP);
  assert_int_equal(ordo_lock(t, "x:1", 3, ORDO_MODE_X, 0), 0); /* count 2 */
  assert_int_equal(ordo_unlock(t, "x:1", 3), 0);               /* count 1 */
  assert_int_equal(ordo_unlock_all(t), 1);                     /* COMMIT */
  assert_int_equal(advisory_locks(c), 1);
  assert_int_equal(ordo_unlock_all(h), 1);
  assert_int_equal(advisory_locks(c), 0);
  PQfinish(c);
  ordo_txn_end(t);
  ordo_txn_end(h);
  ordo_close(o);
}

/* One grant of key by t: its token. */
static uint64_t grant_token(ordo_txn_t *t, const char *key) {
  size_t len = strlen(key);
  assert_int_equal(ordo_lock(t, key, len, ORDO_MODE_X, 5000), 0);
  uint64_t tok = 0;
  assert_int_equal(ordo_fence(t, key, len, &tok), 0);
  assert_int_equal(ordo_unlock_all(t), 1);
  return tok;
}

/*
 * Issue 18, item 9: two roles, each with a schema of its own named after
 * it (search_path "$user", public finds it first: PostgreSQL 15's
 * recommended pattern), take turns on one key. Advisory locks are shared
 * by the whole database, so their tokens must come from one sequence: the
 * default public.ordo_fence, made by an administrator (ordo) who lets
 * both use it. An unqualified name would have made one sequence per role,
 * and both would have got 1, 2, ... Then fence_seq names a sequence of
 * the role's own (created by ordo_txn_begin in the role's schema), and the
 * tokens are that sequence's.
 */
static void test_roles_one_sequence(void **state) {
  (void)state;
  NEED_PG();
  PGconn *c = side();
  exec_ok(c,
          "CREATE SEQUENCE IF NOT EXISTS public.ordo_fence; "
          "CREATE ROLE fence_r1 LOGIN PASSWORD 'r1'; "
          "CREATE ROLE fence_r2 LOGIN PASSWORD 'r2'; "
          "CREATE SCHEMA fence_r1 AUTHORIZATION fence_r1; "
          "CREATE SCHEMA fence_r2 AUTHORIZATION fence_r2; "
          "GRANT USAGE ON SEQUENCE public.ordo_fence TO fence_r1, fence_r2",
          PGRES_COMMAND_OK);
  const char *db = strrchr(URL, '/');
  assert_non_null(db);
  db++;
  ordo_t *o1 = open_url("postgres://fence_r1:r1@127.0.0.1:%d/%s", PORT, db);
  ordo_t *o2 = open_url("postgres://fence_r2:r2@127.0.0.1:%d/%s", PORT, db);
  ordo_txn_t *t1 = txn(o1), *t2 = txn(o2);
  uint64_t tok[6];
  for (int i = 0; i < 6; i++)
    tok[i] = grant_token(i % 2 ? t2 : t1, "acct:1");
  print_message("tokens of fence_r1, fence_r2 in turn: %llu %llu %llu %llu "
                "%llu %llu\n",
                (unsigned long long)tok[0], (unsigned long long)tok[1],
                (unsigned long long)tok[2], (unsigned long long)tok[3],
                (unsigned long long)tok[4], (unsigned long long)tok[5]);
  for (int i = 1; i < 6; i++)
    assert_true(tok[i] > tok[i - 1]);
  /* Neither role got a sequence of its own. */
  assert_int_equal(one_int(c, "SELECT count(*) FROM pg_class k JOIN "
                              "pg_namespace n ON n.oid = k.relnamespace "
                              "WHERE k.relkind = 'S' AND n.nspname LIKE "
                              "'fence_r%'"),
                   0);
  ordo_txn_end(t1);
  ordo_txn_end(t2);
  ordo_close(o1);
  ordo_close(o2);
  /* fence_seq: the role's own sequence, created in its schema. */
  o1 = open_url("postgres://fence_r1:r1@127.0.0.1:%d/%s?fence_seq=fence_r1.own",
                PORT, db);
  t1 = txn(o1);
  uint64_t a = grant_token(t1, "acct:1"), b = grant_token(t1, "acct:1");
  assert_true(b > a);
  assert_int_equal(
      one_int(c, "SELECT last_value FROM fence_r1.own WHERE is_called"),
      (long long)b);
  ordo_txn_end(t1);
  ordo_close(o1);
  PQfinish(c);
}

/*
 * test_postgres draw URL N [hold]: N grants of key crash:1 by one txn on
 * URL, each let go at once, printing each grant's token on a line of its
 * own (for pg_fence_crash.sh, which kills the server between two runs).
 * With hold, one more grant is printed and kept until standard input
 * ends: the crash then comes while the key is held (in scope=xact, before
 * the transaction that took it commits). Exit 0, or 1 with the reason on
 * stderr; what happens to the held key once the server is gone does not
 * count.
 */
static int draw_main(const char *url, int n, bool hold) {
  ordo_t *o = NULL;
  ordo_txn_t *t = NULL;
  int rc = ordo_open(&o, url, NULL);
  if (!rc)
    rc = ordo_txn_begin(o, &t, NULL);
  for (int i = 0; !rc && i < n; i++) {
    uint64_t tok = 0;
    rc = ordo_lock(t, "crash:1", 7, ORDO_MODE_X, 5000);
    if (!rc)
      rc = ordo_fence(t, "crash:1", 7, &tok);
    if (!rc)
      rc = ordo_unlock_all(t) == 1 ? 0 : ORDO_EBACKEND;
    if (!rc)
      printf("%llu\n", (unsigned long long)tok);
  }
  if (!rc && hold) {
    uint64_t tok = 0;
    rc = ordo_lock(t, "crash:1", 7, ORDO_MODE_X, 5000);
    if (!rc)
      rc = ordo_fence(t, "crash:1", 7, &tok);
    if (!rc) {
      printf("%llu\n", (unsigned long long)tok);
      fflush(stdout);
      char c;
      while (read(0, &c, 1) > 0)
        ;
    }
  }
  if (rc) {
    fprintf(stderr, "draw: %s\n", ordo_err_name(rc));
    if (o)
      ordo_dump(o, 2);
  }
  if (t)
    ordo_txn_end(t);
  if (o)
    ordo_close(o);
  return rc ? 1 : 0;
}

int main(int argc, char **argv) {
  if ((argc == 4 || argc == 5) && strcmp(argv[1], "draw") == 0)
    return draw_main(argv[2], atoi(argv[3]),
                     argc == 5 && strcmp(argv[4], "hold") == 0);
  URL = getenv("ORDO_PG_URL");
  const char *port = getenv("ORDO_PG_PORT");
  PORT = port ? atoi(port) : 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_key_values),
      cmocka_unit_test(test_urls),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_values),
      cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_timeout_ms),
      cmocka_unit_test(test_frozen_server),
      cmocka_unit_test(test_deadlock),
      cmocka_unit_test(test_fencing_pattern),
      cmocka_unit_test(test_roles_one_sequence),
      cmocka_unit_test(test_session_killed),
      cmocka_unit_test(test_session_killed_found_by_call),
      cmocka_unit_test(test_idle_timeouts),
      cmocka_unit_test(test_xact_scope),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
