/*
 * test_sentinel.c -- the redis-sentinel:// backend against the Sentinel
 * set that tests/integration/sentinel_it.sh starts (sentinel_fixture.sh):
 * ORDO_SN_URL (the sentinels and the master name), ORDO_SN_PRIMARY_PORT,
 * ORDO_SN_PRIMARY_PID and ORDO_SN_REPLICA_PORT. A case whose servers the
 * wrapper did not start fails, naming the variable: it is never skipped.
 *
 * The cases, in this order (the last kills the primary):
 *   test_urls      malformed URLs are ORDO_EURL; a name the sentinels do
 *                  not know, and sentinels that do not listen, fail the
 *                  open with ORDO_EBACKEND within timeout_ms
 *   test_resolves  the place's primary is the sentinels' (a lock taken
 *                  through it is on the primary's keys)
 *   test_failover  a txn takes a key under a 10 s lease; a second txn
 *                  locks and unlocks another in a loop, each call bounded
 *                  by 1 s, while the primary is killed (SIGKILL): every
 *                  call returns within its bound (plus slack), and one
 *                  succeeds again on the new primary (the replica) within
 *                  FAILOVER_BOUND_MS of the kill, which is printed. The
 *                  first txn's next call, well inside its lease, returns
 *                  ORDO_ELEASE whether or not its key was replicated
 *                  (printed too), and once it ends the key can be
 *                  taken again at once.
 * Every bound against a hang grows with ORDO_TEST_TIMEOUT_MULT (tu_ms).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "it_redis.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WRAPPER "sentinel_it.sh"
/* Sentinel's down-after-milliseconds is 1000 and its failover takes a
 * second or two more; the client sees it within this, times MULT. */
#define FAILOVER_BOUND_MS 15000

static void test_urls(void **state) {
  (void)state;
  static const char *bad[] = {
      "redis-sentinel://",
      "redis-sentinel://127.0.0.1:1",           /* no master name */
      "redis-sentinel://127.0.0.1:1/",          /* an empty one */
      "redis-sentinel://127.0.0.1:1/a b",       /* not a plain name */
      "redis-sentinel://127.0.0.1:1,/m",        /* an empty address */
      "redis-sentinel:///tmp/s.sock/m",         /* a socket */
      "redis-sentinel://127.0.0.1:1/m?nope=1",  /* an unknown option */
      "redis-sentinel://127.0.0.1:1/m?tls=1",   /* no TLS to sentinels */
      "redis-sentinel://127.0.0.1:1,:pw@h:2/m", /* credentials late */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ordo_t *o = NULL;
    int rc = ordo_open(&o, bad[i], NULL);
    if (rc != ORDO_EURL)
      fail_msg("%s: %s, not ORDO_EURL", bad[i], ordo_err_name(rc));
  }
  /* No sentinel listens on a port just closed; a name no sentinel knows. */
  char url[512];
  const char *good = it_env("ORDO_SN_URL", WRAPPER);
  const char *slash = strrchr(good, '/');
  assert_non_null(slash);
  snprintf(url, sizeof url, "%.*s/nosuchmaster?timeout_ms=300",
           (int)(slash - good), good);
  ordo_t *o = NULL;
  uint64_t t0 = tu_now_ns();
  assert_int_equal(ordo_open(&o, url, NULL), ORDO_EBACKEND);
  assert_true(it_ms_since(t0) <= tu_ms(300 + 1000));
  t0 = tu_now_ns();
  assert_int_equal(
      ordo_open(&o, "redis-sentinel://127.0.0.1:1/ordo?timeout_ms=300", NULL),
      ORDO_EBACKEND);
  assert_true(it_ms_since(t0) <= tu_ms(300 + 1000));
}

static void test_resolves(void **state) {
  (void)state;
  const char *url = it_env("ORDO_SN_URL", WRAPPER);
  int primary = it_env_port("ORDO_SN_PRIMARY_PORT", WRAPPER);
  ordo_t *o = NULL;
  ordo_txn_t *t = NULL;
  assert_int_equal(ordo_open(&o, url, NULL), 0);
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0);
  assert_int_equal(ordo_lock(t, "sn:where", 8, ORDO_MODE_X, 1000), 0);
  redisContext *c = it_side(primary, NULL);
  assert_int_equal(it_int(c, "EXISTS sn:where"), 1);
  assert_int_equal(ordo_unlock(t, "sn:where", 8), 0);
  assert_int_equal(it_int(c, "EXISTS sn:where"), 0);
  redisFree(c);
  ordo_txn_end(t);
  ordo_close(o);
}

static void test_failover(void **state) {
  (void)state;
  const char *base = it_env("ORDO_SN_URL", WRAPPER);
  int pid = it_env_port("ORDO_SN_PRIMARY_PID", WRAPPER);
  int replica = it_env_port("ORDO_SN_REPLICA_PORT", WRAPPER);
  char url[512];
  snprintf(url, sizeof url, "%s?lease_ms=10000&timeout_ms=1000", base);
  ordo_t *o = NULL;
  ordo_txn_t *holder = NULL, *loop = NULL;
  assert_int_equal(ordo_open(&o, url, NULL), 0);
  assert_int_equal(ordo_txn_begin(o, &holder, NULL), 0);
  assert_int_equal(ordo_txn_begin(o, &loop, NULL), 0);
  assert_int_equal(ordo_lock(holder, "sn:held", 7, ORDO_MODE_X, 1000), 0);
  /* The replica has the key before the kill: WAIT for it, so what the
   * new primary has of it is known (it has it, and it is not kept). */
  redisContext *pc =
      it_side(it_env_port("ORDO_SN_PRIMARY_PORT", WRAPPER), NULL);
  assert_int_equal(it_int(pc, "WAIT 1 2000"), 1);
  redisFree(pc);
  uint64_t held_at = tu_now_ns();
  int ok_before = 0, failed = 0;
  uint64_t kill_at = 0, back_ms = 0;
  uint64_t end = tu_now_ns() + tu_ms(FAILOVER_BOUND_MS + 5000) * 1000000u;
  while (tu_now_ns() < end) {
    uint64_t t0 = tu_now_ns();
    int rc = ordo_lock(loop, "sn:loop", 7, ORDO_MODE_X, 1000);
    /* Each call ends within its bound: 1 s to lock (timeout_ms bounds each
     * exchange and each resolution within it), plus slack. */
    uint64_t ms = it_ms_since(t0);
    if (ms > tu_ms(1000 + 1500))
      fail_msg("a lock took %llu ms (%s)", (unsigned long long)ms,
               ordo_err_name(rc));
    if (rc == 0) {
      int u = ordo_unlock(loop, "sn:loop", 7);
      if (u != 0 && u != ORDO_EBACKEND && u != ORDO_ELEASE)
        fail_msg("unlock: %s", ordo_err_name(u));
      if (kill_at) {
        back_ms = it_ms_since(kill_at);
        break;
      }
      if (++ok_before == 20) {
        assert_int_equal(kill(pid, SIGKILL), 0);
        kill_at = tu_now_ns();
      }
    } else {
      /* Only while the primary is gone, and only as these. */
      assert_true(kill_at != 0);
      if (rc != ORDO_EBACKEND && rc != ORDO_ETIMEDOUT)
        fail_msg("a lock during the failover: %s", ordo_err_name(rc));
      failed++;
    }
  }
  if (back_ms == 0)
    fail_msg("no lock succeeded within %llu ms of the kill",
             (unsigned long long)tu_ms(FAILOVER_BOUND_MS));
  assert_true(back_ms <= tu_ms(FAILOVER_BOUND_MS));
  printf("failover: locks succeed again %llu ms after SIGKILL of the primary"
         " (%d calls failed cleanly meanwhile)\n",
         (unsigned long long)back_ms, failed);
  /* The new primary is the replica, and it has the holder's key. */
  redisContext *rc2 = it_side(replica, NULL);
  long long has = it_int(rc2, "EXISTS sn:held");
  printf("failover: the new primary %s the holder's key\n",
         has ? "has" : "lost");
  /* Within the holder's lease, its next call says the hold is gone. */
  assert_true(it_ms_since(held_at) < 10000);
  assert_int_equal(ordo_lock(holder, "sn:other", 8, ORDO_MODE_X, 1000),
                   ORDO_ELEASE);
  assert_int_equal(ordo_held(holder, "sn:held", 7, NULL), 0);
  /* ...and its end gives the key back on the new primary (lose() keeps it
   * as an orphan, released before the txn's next exchange or at its end):
   * another txn takes it at once, not after the 10 s lease. */
  ordo_txn_end(holder);
  ordo_txn_t *next = NULL;
  assert_int_equal(ordo_txn_begin(o, &next, NULL), 0);
  assert_int_equal(ordo_lock(next, "sn:held", 7, ORDO_MODE_X, 2000), 0);
  assert_int_equal(ordo_unlock(next, "sn:held", 7), 0);
  redisFree(rc2);
  ordo_txn_end(next);
  ordo_txn_end(loop);
  ordo_close(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_urls),
      cmocka_unit_test(test_resolves),
      cmocka_unit_test(test_failover),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
