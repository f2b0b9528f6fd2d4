/*
 * test_sentinel.c -- the redis-sentinel:// backend against the Sentinel
 * set that tests/integration/sentinel_it.sh starts (sentinel_fixture.sh):
 * ORDO_SN_URL (the sentinels and the master name), ORDO_SN_PRIMARY_PORT,
 * ORDO_SN_PRIMARY_PID, ORDO_SN_REPLICA_PORT and ORDO_SN_SENTINEL_PORT. A case
 * whose servers the wrapper did not start fails, naming the variable: it is
 * never skipped.
 *
 * The cases, in this order (the last kills the primary):
 *   test_urls      malformed URLs are ORDO_EURL; a name the sentinels do
 *                  not know, and sentinels that do not listen, fail the
 *                  open with ORDO_EBACKEND within timeout_ms
 *   test_resolves  the place's primary is the sentinels' (a lock taken
 *                  through it is on the primary's keys, and ordo_dump
 *                  names it)
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
 * Run as "test_sentinel switch", on a set of its own (outside make test:
 * about 17 s, most of it Sentinel's wait before it demotes the old
 * primary; `bash tests/integration/sentinel_it.sh build/tests/test_sentinel
 * switch`):
 *   test_switch    SENTINEL FAILOVER while the old primary stays up (a
 *                  replica now): a lock loop follows to the new primary
 *                  within a few calls, each bounded; a txn holding a key
 *                  across it gets ORDO_ELEASE from its unlock.
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
#include <unistd.h>

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
  char dump[4096], want[64];
  it_dump_text(o, dump, sizeof dump);
  snprintf(want, sizeof want, "primary 127.0.0.1:%d (master ordo, 1 change",
           primary);
  if (!strstr(dump, want))
    fail_msg("ordo_dump does not say \"%s\":\n%s", want, dump);
  redisFree(c);
  ordo_txn_end(t);
  ordo_close(o);
}

/* The failover cases' start: a place on the wrapper's sentinels with a
 * lease of lease_ms, a holder of "sn:held" (on the replica too: WAIT, so
 * what the new primary has of it is known) and a second txn for a loop. */
static void start_holder(long lease_ms, ordo_t **o, ordo_txn_t **holder,
                         ordo_txn_t **loop) {
  char url[512];
  snprintf(url, sizeof url, "%s?lease_ms=%ld&timeout_ms=1000",
           it_env("ORDO_SN_URL", WRAPPER), lease_ms);
  assert_int_equal(ordo_open(o, url, NULL), 0);
  assert_int_equal(ordo_txn_begin(*o, holder, NULL), 0);
  assert_int_equal(ordo_txn_begin(*o, loop, NULL), 0);
  assert_int_equal(ordo_lock(*holder, "sn:held", 7, ORDO_MODE_X, 1000), 0);
  redisContext *pc =
      it_side(it_env_port("ORDO_SN_PRIMARY_PORT", WRAPPER), NULL);
  assert_int_equal(it_int(pc, "WAIT 1 2000"), 1);
  redisFree(pc);
}

static void test_failover(void **state) {
  (void)state;
  int pid = it_env_port("ORDO_SN_PRIMARY_PID", WRAPPER);
  int replica = it_env_port("ORDO_SN_REPLICA_PORT", WRAPPER);
  ordo_t *o = NULL;
  ordo_txn_t *holder = NULL, *loop = NULL;
  start_holder(10000, &o, &holder, &loop);
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

/* ROLE of the node on port: true when it says master. */
static bool is_master(int port) {
  struct timeval tv = {1, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  bool yes = false;
  if (c && !c->err) {
    redisSetTimeout(c, tv);
    redisReply *r = redisCommand(c, "ROLE");
    yes = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
          r->element[0]->type == REDIS_REPLY_STRING &&
          strcmp(r->element[0]->str, "master") == 0;
    freeReplyObject(r);
  }
  redisFree(c);
  return yes;
}

static void test_switch(void **state) {
  (void)state;
  int primary = it_env_port("ORDO_SN_PRIMARY_PORT", WRAPPER);
  int replica = it_env_port("ORDO_SN_REPLICA_PORT", WRAPPER);
  int sentinel = it_env_port("ORDO_SN_SENTINEL_PORT", WRAPPER);
  ordo_t *o = NULL;
  ordo_txn_t *holder = NULL, *loop = NULL;
  /* A lease longer than Sentinel takes to demote the old primary (about
   * 11 s here: it waits for the node to report its old role for a while). */
  start_holder(30000, &o, &holder, &loop);
  assert_int_equal(ordo_lock(loop, "sn:loop", 7, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_unlock(loop, "sn:loop", 7), 0);
  uint64_t held_at = tu_now_ns();
  /* The old primary stays up, demoted to a replica of the new one. */
  redisContext *sc = it_side(sentinel, NULL);
  redisReply *r = redisCommand(sc, "SENTINEL FAILOVER ordo");
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_STATUS);
  freeReplyObject(r);
  redisFree(sc);
  uint64_t t0 = tu_now_ns(), end = t0 + tu_ms(30000) * 1000000u;
  while (tu_now_ns() < end && (is_master(primary) || !is_master(replica)))
    usleep(20000);
  assert_true(is_master(replica));
  assert_false(is_master(primary));
  printf("switch: the roles changed %llu ms after SENTINEL FAILOVER\n",
         (unsigned long long)it_ms_since(t0));
  /* The loop's txn follows: its next lock is on the new primary, within a
   * few calls (a -READONLY reply or a killed connection, then the
   * sentinels asked again). */
  int rc = -1;
  for (int i = 0; i < 20 && rc != 0; i++) {
    uint64_t c0 = tu_now_ns();
    rc = ordo_lock(loop, "sn:loop", 7, ORDO_MODE_X, 1000);
    if (it_ms_since(c0) > tu_ms(2500))
      fail_msg("a lock took %llu ms", (unsigned long long)it_ms_since(c0));
    if (rc != 0 && rc != ORDO_EBACKEND && rc != ORDO_ETIMEDOUT)
      fail_msg("a lock after the switch: %s", ordo_err_name(rc));
  }
  assert_int_equal(rc, 0);
  redisContext *nc = it_side(replica, NULL);
  assert_int_equal(it_int(nc, "EXISTS sn:loop"), 1);
  assert_int_equal(ordo_unlock(loop, "sn:loop", 7), 0);
  printf("switch: the new primary %s the holder's key\n",
         it_int(nc, "EXISTS sn:held") ? "has" : "lost");
  redisFree(nc);
  /* The holder's key was taken on the old primary: not kept. */
  assert_true(it_ms_since(held_at) < 30000);
  assert_int_equal(ordo_unlock(holder, "sn:held", 7), ORDO_ELEASE);
  ordo_txn_end(holder);
  ordo_txn_end(loop);
  ordo_close(o);
}

/* "test_sentinel" runs the URL, resolution and SIGKILL cases;
 * "test_sentinel switch" the SENTINEL FAILOVER one (a set of its own:
 * Sentinel waits twice failover-timeout before it fails a master over
 * again). */
int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_urls),
      cmocka_unit_test(test_resolves),
      cmocka_unit_test(test_failover),
  };
  const struct CMUnitTest switch_tests[] = {
      cmocka_unit_test(test_switch),
  };
  if (argc > 1 && strcmp(argv[1], "switch") == 0)
    return tu_exit(cmocka_run_group_tests(switch_tests, NULL, NULL));
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
