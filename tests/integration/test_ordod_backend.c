/*
 * test_ordod_backend.c -- the ordod:// backend against a real ordod that
 * tests/integration/ordod_it.sh starts (ordod_fixture.sh): with the
 * password ORDO_OD_PASS ("s3cret"), on the TCP port ORDO_OD_PORT and the
 * Unix socket ORDO_OD_SOCK, with --max-keys ORDO_OD_MAX_KEYS and
 * --max-session-locks ORDO_OD_MAX_SESSION_LOCKS; ORDO_OD_PID is its
 * process. A case whose variable the wrapper did not export fails, naming
 * it: nothing here is skipped.
 *
 * The cases, each through the backend's calls and each asserting what the
 * server then does: the password (a wrong one and none are ORDO_EAUTH with
 * the server's reason in the dump; with it, or with a user before it, the
 * locks are the server's, seen by another place); the Unix socket (a lock
 * taken there is held against a place on TCP, and the tokens of the two
 * come from one counter); a deadlock between two places' txns that take
 * keys one at a time (ORDO_EDEADLK for the one of lower priority, holding
 * nothing, while the other gets its key); the server's limits (keys in one
 * LOCK, keys one session holds: ORDO_ELIMIT, nothing new held, what was
 * held kept); and timeout_ms against a server that stops answering
 * (SIGSTOP: ORDO_EBACKEND once timeout_ms has passed, then ORDO_ELEASE
 * once, the server having released the session); 8 holders of a short
 * lease with the server stopped, each told of its lost lease within a
 * lease. Every wait is bounded,
 * every bound against a hang grows with ORDO_TEST_TIMEOUT_MULT (tu_ms);
 * nothing is asserted while the server is stopped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"
#include "../common/lostlease.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define WRAPPER "ordod_it.sh"

/* An environment variable ordod_it.sh exports; the case fails, naming it,
 * when it is missing. */
static const char *env(const char *name) {
  const char *s = getenv(name);
  if (!s || !*s)
    fail_msg("%s is not set: " WRAPPER " starts ordod and exports it; run "
             "this test through it (ctest does)",
             name);
  return s;
}

static long env_num(const char *name) {
  const char *s = env(name);
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || v <= 0)
    fail_msg("%s is '%s', not a positive number (" WRAPPER " exports it)", name,
             s);
  return v;
}

/* "ordod://:PASS@127.0.0.1:PORT" + query, over TCP. */
static void tcp_url(char *buf, size_t cap, const char *userinfo,
                    const char *query) {
  snprintf(buf, cap, "ordod://%s127.0.0.1:%ld%s", userinfo,
           env_num("ORDO_OD_PORT"), query);
}

static ordo_t *open_url(const char *url) {
  ordo_t *o = NULL;
  int rc = ordo_open(&o, url, NULL);
  if (rc != 0)
    print_error("ordo_open(%s) -> %s\n", url, ordo_err_name(rc));
  assert_int_equal(rc, 0);
  return o;
}

/* The place every case but the password's uses: the right password, over
 * TCP, plus query. */
static ordo_t *open_tcp(const char *query) {
  char url[256], ui[128];
  snprintf(ui, sizeof ui, ":%s@", env("ORDO_OD_PASS"));
  tcp_url(url, sizeof url, ui, query);
  return open_url(url);
}

static ordo_t *open_sock(const char *query) {
  char url[512];
  snprintf(url, sizeof url, "ordod://:%s@%s%s", env("ORDO_OD_PASS"),
           env("ORDO_OD_SOCK"), query);
  return open_url(url);
}

static ordo_txn_t *txn_prio(ordo_t *o, int priority) {
  ordo_txn_options_t opts = {priority, NULL, 0};
  ordo_txn_t *t = NULL;
  int rc = ordo_txn_begin(o, &t, &opts);
  if (rc != 0)
    print_error("ordo_txn_begin -> %s\n", ordo_err_name(rc));
  assert_int_equal(rc, 0);
  return t;
}

static ordo_txn_t *txn(ordo_t *o) {
  return txn_prio(o, 0);
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

static uint64_t ms_since(uint64_t t0) {
  return (tu_now_ns() - t0) / 1000000u;
}

/* Is key free for X, as a txn of another place sees it (one try)? */
static bool free_for_other(const char *key) {
  ordo_t *o = open_tcp("");
  ordo_txn_t *t = txn(o);
  int rc = ordo_lock(t, key, strlen(key), ORDO_MODE_X, 0);
  ordo_txn_end(t);
  ordo_close(o);
  if (rc != 0 && rc != ORDO_ETIMEDOUT)
    fail_msg("a try of %s: %s", key, ordo_err_name(rc));
  return rc == 0;
}

/* ---- The password ------------------------------------------------------- */

/* ordo_txn_begin on url fails with ORDO_EAUTH (bounded), and the dump gives
 * the server's reason. */
static void auth_fails(const char *url, const char *reason) {
  ordo_t *o = open_url(url);
  ordo_txn_t *t = NULL;
  uint64_t t0 = tu_now_ns();
  int rc = ordo_txn_begin(o, &t, NULL);
  uint64_t ms = ms_since(t0);
  print_message("%s: %s after %llu ms\n", url, ordo_err_name(rc),
                (unsigned long long)ms);
  assert_int_equal(rc, ORDO_EAUTH);
  assert_null(t);
  assert_true(ms <= tu_ms(2000));
  char buf[4096];
  dump_text(o, buf, sizeof buf);
  if (!strstr(buf, reason))
    print_error("the dump lacks '%s':\n%s\n", reason, buf);
  assert_non_null(strstr(buf, reason));
  assert_null(strstr(buf, env("ORDO_OD_PASS"))); /* never shown */
  ordo_close(o);
}

static void test_password(void **state) {
  (void)state;
  char url[256], ui[128];
  tcp_url(url, sizeof url, ":wrong@", "");
  auth_fails(url, "WRONGPASS");
  tcp_url(url, sizeof url, "", ""); /* none: the server says NOAUTH */
  auth_fails(url, "NOAUTH");
  /* The password alone, and after a user name (AUTH user password; ordod
   * has one user). With it the lock is the server's: another place's try
   * is refused until it is let go. */
  static const char *const users[] = {"", "anyone"};
  for (int i = 0; i < 2; i++) {
    snprintf(ui, sizeof ui, "%s:%s@", users[i], env("ORDO_OD_PASS"));
    tcp_url(url, sizeof url, ui, "");
    ordo_t *o = open_url(url);
    assert_null(strstr(ordo_url(o), env("ORDO_OD_PASS")));
    ordo_txn_t *t = txn(o);
    assert_int_equal(ordo_lock(t, "pw", 2, ORDO_MODE_X, 1000), 0);
    assert_false(free_for_other("pw"));
    assert_int_equal(ordo_unlock_all(t), 1);
    assert_true(free_for_other("pw"));
    ordo_txn_end(t);
    ordo_close(o);
  }
}

/* ---- The Unix socket ---------------------------------------------------- */

/* A lock taken over the socket is the same server's as one over TCP: held
 * against it, and its tokens from the same counter. */
static void test_unix_socket(void **state) {
  (void)state;
  ordo_t *os = open_sock(""), *ot = open_tcp("");
  ordo_txn_t *s = txn(os), *t = txn(ot);
  uint64_t ts, tt;
  assert_int_equal(ordo_lock(s, "sock", 4, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_fence(s, "sock", 4, &ts), 0);
  assert_int_equal(ordo_lock(t, "sock", 4, ORDO_MODE_X, 0), ORDO_ETIMEDOUT);
  assert_int_equal(ordo_unlock(s, "sock", 4), 0);
  assert_int_equal(ordo_lock(t, "sock", 4, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_fence(t, "sock", 4, &tt), 0);
  assert_true(tt > ts);
  /* And the other way round. */
  assert_int_equal(ordo_lock(s, "sock", 4, ORDO_MODE_X, 0), ORDO_ETIMEDOUT);
  assert_int_equal(ordo_unlock_all(t), 1);
  assert_int_equal(ordo_lock(s, "sock", 4, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_fence(s, "sock", 4, &ts), 0);
  assert_true(ts > tt);
  assert_int_equal(ordo_unlock_all(s), 1);
  ordo_txn_end(s);
  ordo_txn_end(t);
  ordo_close(os);
  ordo_close(ot);
}

/* ---- A deadlock ------------------------------------------------------------
 */

typedef struct {
  ordo_txn_t *t;
  int rc;
} locker;

static void *lock_b(void *arg) {
  locker *l = arg;
  l->rc = ordo_lock(l->t, "dl:b", 4, ORDO_MODE_X, (long)tu_ms(10000));
  return NULL;
}

/* Two places (one over TCP, one over the socket), a txn each, take two
 * keys one at a time in opposite orders. The server finds the cycle when
 * the second waits; the victim is the txn of lower priority (PRIORITY is
 * compared first): its call says ORDO_EDEADLK, it holds nothing then (its
 * key went to the other, whose wait ends with the grant), and the server
 * counts the deadlock. */
static void test_deadlock(void **state) {
  (void)state;
  ordo_t *o1 = open_tcp(""), *o2 = open_sock("");
  tu_watchdog_start(o1, 30, "ordod: a two-txn deadlock");
  ordo_stats_t st0, st1;
  assert_int_equal(ordo_stats(o1, &st0), 0);
  ordo_txn_t *hi = txn_prio(o1, 10), *lo = txn_prio(o2, 0);
  assert_int_equal(ordo_lock(hi, "dl:a", 4, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_lock(lo, "dl:b", 4, ORDO_MODE_X, 1000), 0);
  locker l = {hi, 1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, lock_b, &l), 0);
  /* hi waits for dl:b (the server's count of waiting requests says so);
   * then lo closes the cycle. */
  bool waiting = tu_wait_waiting(o1, 1);
  int rc =
      waiting ? ordo_lock(lo, "dl:a", 4, ORDO_MODE_X, (long)tu_ms(10000)) : 1;
  int lo_holds = ordo_held(lo, "dl:b", 4, NULL);
  if (!waiting)
    ordo_unlock_all(lo); /* let hi's wait end before the join */
  pthread_join(th, NULL);
  tu_watchdog_stop();
  assert_true(waiting);
  print_message("lo: %s, hi: %s\n", ordo_err_name(rc), ordo_err_name(l.rc));
  assert_int_equal(rc, ORDO_EDEADLK);
  assert_int_equal(lo_holds, 0);
  assert_int_equal(ordo_txn_aborts(lo), 1);
  assert_int_equal(l.rc, 0);
  assert_int_equal(ordo_held(hi, "dl:a", 4, NULL), 1);
  assert_int_equal(ordo_held(hi, "dl:b", 4, NULL), 1);
  assert_int_equal(ordo_txn_aborts(hi), 0);
  assert_int_equal(ordo_stats(o1, &st1), 0);
  assert_true(st1.deadlocks >= st0.deadlocks + 1);
  /* The victim starts again, and waits its turn. */
  assert_int_equal(ordo_lock(lo, "dl:a", 4, ORDO_MODE_X, 0), ORDO_ETIMEDOUT);
  assert_int_equal(ordo_unlock_all(hi), 2);
  assert_int_equal(ordo_lock(lo, "dl:a", 4, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_unlock_all(lo), 1);
  ordo_txn_end(hi);
  ordo_txn_end(lo);
  ordo_close(o1);
  ordo_close(o2);
}

/* ---- The server's limits ---------------------------------------------------
 */

/* One LOCK of more keys than --max-keys, and a session that would hold
 * more than --max-session-locks: ORDO_ELIMIT, nothing of that call held,
 * what was held before kept. */
static void test_limits(void **state) {
  (void)state;
  long max_keys = env_num("ORDO_OD_MAX_KEYS");
  long max_sess = env_num("ORDO_OD_MAX_SESSION_LOCKS");
  assert_true(max_keys >= 1 && max_keys < max_sess && max_sess <= 60);
  ordo_t *o = open_tcp("");
  ordo_txn_t *t = txn(o);
  static char names[64][8];
  ordo_req_t r[64];
  for (int i = 0; i < 64; i++) {
    snprintf(names[i], sizeof names[i], "lim:%02d", i);
    r[i] = (ordo_req_t)ORDO_REQ_X(names[i], strlen(names[i]));
  }
  /* Keys in one LOCK. */
  assert_int_equal(ordo_lock_all(t, r, (size_t)max_keys + 1, 1000),
                   ORDO_ELIMIT);
  for (long i = 0; i <= max_keys; i++) {
    assert_int_equal(ordo_held(t, names[i], strlen(names[i]), NULL), 0);
    assert_true(free_for_other(names[i]));
  }
  assert_int_equal(ordo_lock_all(t, r, (size_t)max_keys, 1000), 0);
  /* Keys one session holds: up to the limit, a LOCK at a time. */
  long held = max_keys;
  while (held < max_sess) {
    long n = max_sess - held < max_keys ? max_sess - held : max_keys;
    assert_int_equal(ordo_lock_all(t, r + held, (size_t)n, 1000), 0);
    held += n;
  }
  const char *extra = names[max_sess];
  assert_int_equal(ordo_lock(t, extra, strlen(extra), ORDO_MODE_X, 1000),
                   ORDO_ELIMIT);
  assert_int_equal(ordo_held(t, extra, strlen(extra), NULL), 0);
  assert_true(free_for_other(extra));
  for (long i = 0; i < max_sess; i++) {
    assert_int_equal(ordo_held(t, names[i], strlen(names[i]), NULL), 1);
    assert_false(free_for_other(names[i]));
  }
  /* One let go makes room for one. */
  assert_int_equal(ordo_unlock(t, names[0], strlen(names[0])), 0);
  assert_int_equal(ordo_lock(t, extra, strlen(extra), ORDO_MODE_X, 1000), 0);
  char buf[8192], want[32];
  dump_text(o, buf, sizeof buf);
  snprintf(want, sizeof want, "holds %ld key(s)", max_sess);
  assert_non_null(strstr(buf, want));
  assert_int_equal(ordo_unlock_all(t), (int)max_sess);
  ordo_txn_end(t);
  ordo_close(o);
}

/* ---- timeout_ms against a stopped server ---------------------------------
 */

/* The server stops answering (SIGSTOP). With timeout_ms=300 a LOCK that
 * tries once (WAIT 0) reads its reply 0 + 300 ms and no longer, and a new
 * session's connect-time commands 300 ms: both ORDO_EBACKEND, once that
 * bound has passed. The lease is 10 s, so no renewal comes in between.
 * Nothing is asserted while the server is stopped. Running again, the
 * server sees the dropped connection and ends the session: its lock goes
 * to a waiter, and the txn's next call says ORDO_ELEASE once. */
static void test_timeout_ms(void **state) {
  (void)state;
  const uint64_t tmo = 300;
  pid_t pid = (pid_t)env_num("ORDO_OD_PID");
  ordo_t *o = open_tcp("?timeout_ms=300&lease_ms=10000");
  ordo_txn_t *t = txn(o), *u = NULL;
  assert_int_equal(ordo_lock(t, "stop", 4, ORDO_MODE_X, 1000), 0);
  int stop_rc = kill(pid, SIGSTOP);
  int lock_rc = 0, begin_rc = 0;
  uint64_t lock_ms = 0, begin_ms = 0;
  if (stop_rc == 0) {
    uint64_t t0 = tu_now_ns();
    lock_rc = ordo_lock(t, "stop2", 5, ORDO_MODE_X, 0);
    lock_ms = ms_since(t0);
    t0 = tu_now_ns();
    begin_rc = ordo_txn_begin(o, &u, NULL);
    begin_ms = ms_since(t0);
  }
  int cont_rc = stop_rc == 0 ? kill(pid, SIGCONT) : 0;
  assert_int_equal(stop_rc, 0);
  assert_int_equal(cont_rc, 0);
  print_message("on a stopped server: LOCK %s after %llu ms, begin %s after "
                "%llu ms\n",
                ordo_err_name(lock_rc), (unsigned long long)lock_ms,
                ordo_err_name(begin_rc), (unsigned long long)begin_ms);
  assert_int_equal(lock_rc, ORDO_EBACKEND);
  assert_int_equal(begin_rc, ORDO_EBACKEND);
  assert_null(u);
  /* Each waited its timeout_ms (less a little: the socket's timer), then
   * did not hang. */
  assert_true(lock_ms >= tmo - 20 && lock_ms <= tu_ms(tmo + 2000));
  assert_true(begin_ms >= tmo - 20 && begin_ms <= tu_ms(tmo + 2000));
  assert_int_equal(ordo_held(t, "stop", 4, NULL), 0);
  /* The server, running again, ends t's session: another gets the key
   * (waiting for it, bounded), and t hears of it once. */
  ordo_t *o2 = open_tcp("");
  ordo_txn_t *v = txn(o2);
  assert_int_equal(ordo_lock(v, "stop", 4, ORDO_MODE_X, (long)tu_ms(5000)), 0);
  assert_int_equal(ordo_lock(t, "stop", 4, ORDO_MODE_X, 0), ORDO_ELEASE);
  assert_int_equal(ordo_lock(t, "stop", 4, ORDO_MODE_X, 0), ORDO_ETIMEDOUT);
  assert_int_equal(ordo_unlock_all(v), 1);
  assert_int_equal(ordo_lock(t, "stop", 4, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_unlock_all(t), 1);
  ordo_txn_end(v);
  ordo_txn_end(t);
  ordo_close(o2);
  ordo_close(o);
}

/*
 * A lost lease is reported in time however many txns hold (issue 18, item
 * 13): 8 holders of a 600 ms lease and the server stopped (SIGSTOP). The
 * EXTENDs ran one after another, each waiting two thirds of the lease for
 * the stopped server, so the later holders heard seconds late; now they
 * are sent at once and read by one poll(2), and every callback comes
 * within a lease of the stop (each holder's last renewal was before it),
 * plus 300 ms for the scheduler (scaled). Nothing is asserted while the
 * server is stopped; about 0.6 s.
 */
static void test_lost_in_time(void **state) {
  (void)state;
  pid_t pid = (pid_t)env_num("ORDO_OD_PID");
  ordo_t *o = open_tcp("?lease_ms=600");
  tu_lost_in_time(o, "ol", 600, &pid, 1);
  ordo_close(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_password),   cmocka_unit_test(test_unix_socket),
      cmocka_unit_test(test_deadlock),   cmocka_unit_test(test_limits),
      cmocka_unit_test(test_timeout_ms), cmocka_unit_test(test_lost_in_time),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
