/*
 * conformance.c -- the backend conformance suite: the semantics every place
 * must keep, written once against the public API and run against a URL
 * (argv[1], else $ORDO_TEST_URL, else mem:// with a long starvation bound).
 *
 * Each backend declares its capabilities (ordo_caps), and test_caps pins
 * them: the set every scheme must declare is written below, so a backend
 * that loses (or gains) a bit fails here, not by a case quietly changing
 * what it checks. No case skips. A case about a capability checks the
 * capability where the backend declares it, and where it does not, what the
 * backend promises instead: ORDO_ENOTSUP from ordo_cancel and
 * ordo_lock_all_async, and on postgres:// (no ORDO_CAP_WAIT_HOLDS_NOTHING)
 * a waiting set that holds the prefix it has taken in its own order; on a
 * sharded ordod:// place (two or more addresses, src/backend/shards.c),
 * likewise, the groups it took on the shards ranked below the one where it
 * waits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"

#include <limits.h>
#include <string.h>

/* The value postgres:// locks for a key (src/backend/postgres.c): its
 * waiting sets are taken in the order of these values. */
int64_t ordo__pg_key_value(const void *key, size_t len);
/* Whether a URL names a sharded ordod:// place, and a key's shard there
 * (src/backend/shards.h). */
bool ordo__shards_multi(const char *url);
size_t ordo__shard_place(const char *const *names, size_t n, const void *key,
                         size_t len);
/* A sharded place declares ordod's set less ORDO_CAP_WAIT_HOLDS_NOTHING: a
 * lock_all that waits on one shard holds what it took on those below. */
#define SHARDS_CAPS                                                            \
  (ORDO_CAP_SHARED | ORDO_CAP_SERVER_WAIT | ORDO_CAP_FENCE |                   \
   ORDO_CAP_FENCE_DURABLE | ORDO_CAP_INCREMENTAL | ORDO_CAP_REENTRANT |        \
   ORDO_CAP_UPGRADE)

/* The default sets the starvation bound long, as tests/CMakeLists.txt does:
 * see test_waiter_holds_nothing. */
static const char *URL = "mem://?starvation_us=2000000";
static ordo_t *O;

/* The capabilities each scheme declares (docs/backend-*.md say why). */
static const struct {
  const char *scheme;
  unsigned caps;
} PINNED[] = {
    {"mem://", ORDO_CAP_SHARED | ORDO_CAP_SERVER_WAIT | ORDO_CAP_FENCE |
                   ORDO_CAP_CANCEL | ORDO_CAP_INCREMENTAL | ORDO_CAP_ASYNC |
                   ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE |
                   ORDO_CAP_WAIT_HOLDS_NOTHING},
    {"ordod://", ORDO_CAP_SHARED | ORDO_CAP_SERVER_WAIT | ORDO_CAP_FENCE |
                     ORDO_CAP_FENCE_DURABLE | ORDO_CAP_INCREMENTAL |
                     ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE |
                     ORDO_CAP_WAIT_HOLDS_NOTHING},
    {"redis://", ORDO_CAP_SHARED | ORDO_CAP_FENCE | ORDO_CAP_INCREMENTAL |
                     ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE |
                     ORDO_CAP_WAIT_HOLDS_NOTHING},
    {"redis-sentinel://", ORDO_CAP_SHARED | ORDO_CAP_FENCE |
                              ORDO_CAP_INCREMENTAL | ORDO_CAP_REENTRANT |
                              ORDO_CAP_UPGRADE | ORDO_CAP_WAIT_HOLDS_NOTHING},
    {"redlock://", ORDO_CAP_SHARED | ORDO_CAP_FENCE | ORDO_CAP_INCREMENTAL |
                       ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE |
                       ORDO_CAP_WAIT_HOLDS_NOTHING},
    {"redis-cluster://", ORDO_CAP_SHARED | ORDO_CAP_FENCE |
                             ORDO_CAP_INCREMENTAL | ORDO_CAP_REENTRANT |
                             ORDO_CAP_UPGRADE},
    {"postgres:", ORDO_CAP_SHARED | ORDO_CAP_FENCE | ORDO_CAP_FENCE_DURABLE |
                      ORDO_CAP_INCREMENTAL | ORDO_CAP_REENTRANT |
                      ORDO_CAP_UPGRADE},
    {"postgresql://", ORDO_CAP_SHARED | ORDO_CAP_FENCE |
                          ORDO_CAP_FENCE_DURABLE | ORDO_CAP_INCREMENTAL |
                          ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE},
    {"etcd://", ORDO_CAP_SHARED | ORDO_CAP_FENCE | ORDO_CAP_FENCE_DURABLE |
                    ORDO_CAP_INCREMENTAL | ORDO_CAP_REENTRANT |
                    ORDO_CAP_UPGRADE | ORDO_CAP_WAIT_HOLDS_NOTHING},
};

static bool has(unsigned cap) {
  return (ordo_caps(O) & cap) != 0;
}

/* A capability with no "absent" behaviour of its own: every pinned backend
 * declares it, so a backend without it fails the case (and test_caps). */
#define MUST(cap)                                                              \
  do {                                                                         \
    if (!has(cap))                                                             \
      fail_msg("%s does not declare " #cap, URL);                              \
  } while (0)

static int setup(void **state) {
  (void)state;
  if (ordo_open(&O, URL, NULL) != 0)
    return -1;
  tu_watchdog_start(O, 30, "conformance case");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tu_watchdog_stop();
  ordo_close(O);
  O = NULL;
  return 0;
}

static ordo_txn_t *txn(void) {
  ordo_txn_t *t = NULL;
  if (ordo_txn_begin(O, &t, NULL) != 0)
    abort(); /* also called from worker threads, where cmocka cannot */
  return t;
}

/* Is key free for X, as another txn sees it? */
static bool free_for_other(const char *key) {
  ordo_txn_t *o = txn();
  int rc = ordo_lock(o, key, strlen(key), ORDO_MODE_X, 0);
  ordo_txn_end(o);
  return rc == 0;
}

static void test_caps(void **state) {
  (void)state;
  const char *url = URL[0] ? URL : "mem://";
  if (ordo__shards_multi(url)) {
    if (ordo_caps(O) != SHARDS_CAPS)
      fail_msg("%s declares capabilities 0x%x, pinned 0x%x", URL, ordo_caps(O),
               SHARDS_CAPS);
    return;
  }
  for (size_t i = 0; i < sizeof PINNED / sizeof PINNED[0]; i++)
    if (strncmp(url, PINNED[i].scheme, strlen(PINNED[i].scheme)) == 0) {
      if (ordo_caps(O) != PINNED[i].caps)
        fail_msg("%s declares capabilities 0x%x, pinned 0x%x", URL,
                 ordo_caps(O), PINNED[i].caps);
      return;
    }
  fail_msg("no capabilities are pinned for %s: add its scheme to PINNED", URL);
}

static void test_lock_unlock(void **state) {
  (void)state;
  ordo_txn_t *t = txn();
  ordo_req_t r[] = {ORDO_REQ_X("c1", 2), ORDO_REQ_X("c2", 2)};
  assert_int_equal(ordo_lock_all(t, r, 2, 1000), 0);
  assert_int_equal(ordo_held(t, "c1", 2, NULL), 1);
  assert_false(free_for_other("c1"));
  assert_false(free_for_other("c2"));
  assert_int_equal(ordo_unlock_all(t), 2);
  assert_true(free_for_other("c1"));
  assert_true(free_for_other("c2"));
  assert_int_equal(ordo_unlock_all(t), 0);
  ordo_txn_end(t);
}

static void test_bad_keys(void **state) {
  (void)state;
  ordo_txn_t *t = txn();
  assert_int_equal(ordo_lock(t, "", 0, ORDO_MODE_X, 0), ORDO_EINVAL);
  assert_int_equal(ordo_lock(t, NULL, 3, ORDO_MODE_X, 0), ORDO_EINVAL);
  static char big[ORDO_KEY_MAX_DEFAULT + 1];
  assert_int_equal(ordo_lock(t, big, sizeof big, ORDO_MODE_X, 0), ORDO_EINVAL);
  ordo_req_t bad[] = {ORDO_REQ_X("ok", 2), {"", 0, ORDO_MODE_X}};
  assert_int_equal(ordo_lock_all(t, bad, 2, 0), ORDO_EINVAL);
  assert_int_equal(ordo_held(t, "ok", 2, NULL), 0); /* took nothing */
  /* Binary keys, NULs and 0xff included, are keys like any other. */
  assert_int_equal(ordo_lock(t, "\0\xff\0", 3, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_held(t, "\0\xff\0", 3, NULL), 1);
  assert_int_equal(ordo_held(t, "\0\xff", 2, NULL), 0);
  ordo_txn_end(t);
}

static void test_dedupe(void **state) {
  (void)state;
  ordo_txn_t *t = txn();
  ordo_req_t r[] = {ORDO_REQ_X("d2", 2), ORDO_REQ_X("d1", 2),
                    ORDO_REQ_X("d2", 2), ORDO_REQ_X("d1", 2)};
  assert_int_equal(ordo_lock_all(t, r, 4, 1000), 0);
  assert_int_equal(ordo_held(t, "d1", 2, NULL), 1);
  assert_int_equal(ordo_held(t, "d2", 2, NULL), 1);
  assert_int_equal(ordo_unlock_all(t), 2);
  MUST(ORDO_CAP_SHARED);
  ordo_req_t m[] = {ORDO_REQ_S("d1", 2), ORDO_REQ_X("d1", 2)};
  ordo_mode_t mode;
  assert_int_equal(ordo_lock_all(t, m, 2, 1000), 0);
  assert_int_equal(ordo_held(t, "d1", 2, &mode), 1);
  assert_int_equal(mode, ORDO_MODE_X); /* the strongest mode wins */
  ordo_txn_end(t);
}

static void test_all_or_nothing(void **state) {
  (void)state;
  ordo_txn_t *h = txn(), *t = txn();
  assert_int_equal(ordo_lock(h, "n3", 2, ORDO_MODE_X, 0), 0);
  ordo_req_t r[] = {ORDO_REQ_X("n1", 2), ORDO_REQ_X("n2", 2),
                    ORDO_REQ_X("n3", 2)};
  uint64_t t0 = tu_now_ns();
  assert_int_equal(ordo_lock_all(t, r, 3, 100), ORDO_ETIMEDOUT);
  uint64_t ms = (tu_now_ns() - t0) / 1000000;
  assert_true(ms >= 90);               /* it waited its bound... */
  assert_true(ms < 100 + tu_ms(2000)); /* ...and did not hang */
  assert_int_equal(ordo_held(t, "n1", 2, NULL), 0);
  assert_true(free_for_other("n1"));
  assert_true(free_for_other("n2"));
  assert_int_equal(ordo_lock_all(t, r, 3, 0), ORDO_ETIMEDOUT); /* try once */
  ordo_txn_end(h);
  assert_int_equal(ordo_lock_all(t, r, 3, 0), 0);
  ordo_txn_end(t);
}

/* Is key held by another txn, waited for (bounded) because the holder may
 * not have taken it yet? */
static bool becomes_taken(const char *key) {
  uint64_t end = tu_now_ns() + tu_ms(5000) * 1000000u;
  while (tu_now_ns() < end) {
    if (!free_for_other(key))
      return true;
    tu_sleep_us(1000);
  }
  return false;
}

/* The rank (shard order: names sorted bytewise) of key's shard in the
 * sharded URL. */
static int shard_rank(const char *key) {
  char buf[512];
  const char *rest = URL + 8, *hp = rest;
  size_t alen = strcspn(rest, "?");
  for (const char *q = rest; q < rest + alen; q++)
    if (*q == '@')
      hp = q + 1;
  snprintf(buf, sizeof buf, "%.*s", (int)(rest + alen - hp), hp);
  const char *names[16];
  size_t n = 0;
  for (char *sv, *tok = strtok_r(buf, ",", &sv); tok && n < 16;
       tok = strtok_r(NULL, ",", &sv))
    names[n++] = tok;
  const char *mine = names[ordo__shard_place(names, n, key, strlen(key))];
  int rank = 0;
  for (size_t i = 0; i < n; i++)
    rank += strcmp(names[i], mine) < 0;
  return rank;
}

static void test_waiter_holds_nothing(void **state) {
  (void)state;
  const char *k1 = "w1", *k2 = "w2";
  bool holds_nothing = has(ORDO_CAP_WAIT_HOLDS_NOTHING);
  if (!holds_nothing && ordo__pg_key_value(k1, 2) > ordo__pg_key_value(k2, 2)) {
    /* postgres:// takes a set in the order of the keys' values: make k1
     * the one it takes first, so the prefix it holds while it waits for
     * k2 is k1. */
    k1 = "w2";
    k2 = "w1";
  }
  static char s1[3], s2[3];
  if (!holds_nothing && ordo__shards_multi(URL)) {
    /* A sharded place takes a set's groups in shard order: k1 on a shard
     * ranked below k2's, so that the group it holds while it waits for k2
     * is k1's. */
    for (int i = 0; i < 10 && !s1[0]; i++)
      for (int j = 0; j < 10 && !s1[0]; j++) {
        char a[3] = {'w', (char)('0' + i), 0}, b[3] = {'w', (char)('0' + j), 0};
        if (shard_rank(a) < shard_rank(b)) {
          memcpy(s1, a, 3);
          memcpy(s2, b, 3);
        }
      }
    assert_true(s1[0] != 0); /* 10 keys all on one shard: (1/3)^9 */
    k1 = s1;
    k2 = s2;
  }
  ordo_txn_t *h = txn();
  assert_int_equal(ordo_lock(h, k2, 2, ORDO_MODE_X, 0), 0);
  tu_locker w = {.t = txn(),
                 .reqs = {{k1, 2, ORDO_MODE_X}, {k2, 2, ORDO_MODE_X}},
                 .n = 2,
                 .timeout_ms = ORDO_FOREVER};
  tu_locker_start(&w);
  if (holds_nothing) {
    /* Every such backend counts its blocked calls in ordo_stats. */
    assert_true(tu_wait_waiting(O, 1));
    /* Within the starvation bound (the URL sets it long where it can): past
     * it, the waiter reserves k1 and this would rightly fail. */
    assert_true(free_for_other(k1));
    assert_false(atomic_load(&w.done));
  } else {
    /* The documented exception (docs/backend-postgres.md): the waiting set
     * holds the prefix it took, k1, and not k2. */
    assert_true(becomes_taken(k1));
    assert_false(atomic_load(&w.done));
  }
  ordo_unlock_all(h);
  assert_int_equal(tu_locker_join(&w), 0);
  assert_int_equal(ordo_held(w.t, k1, 2, NULL), 1);
  assert_int_equal(ordo_held(w.t, k2, 2, NULL), 1);
  ordo_txn_end(w.t);
  ordo_txn_end(h);
}

static void test_reentrant(void **state) {
  (void)state;
  MUST(ORDO_CAP_REENTRANT);
  ordo_txn_t *t = txn();
  for (int i = 0; i < 3; i++)
    assert_int_equal(ordo_lock(t, "r", 1, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_held(t, "r", 1, NULL), 3);
  assert_int_equal(ordo_unlock(t, "r", 1), 0);
  assert_int_equal(ordo_unlock(t, "r", 1), 0);
  assert_false(free_for_other("r"));
  assert_int_equal(ordo_unlock(t, "r", 1), 0);
  assert_true(free_for_other("r"));
  assert_int_equal(ordo_unlock(t, "r", 1), ORDO_ENOTHELD);
  ordo_txn_end(t);
}

static void test_shared(void **state) {
  (void)state;
  MUST(ORDO_CAP_SHARED);
  ordo_txn_t *a = txn(), *b = txn(), *c = txn();
  assert_int_equal(ordo_lock(a, "s", 1, ORDO_MODE_S, 0), 0);
  assert_int_equal(ordo_lock(b, "s", 1, ORDO_MODE_S, 0), 0);
  assert_int_equal(ordo_lock(c, "s", 1, ORDO_MODE_X, 0), ORDO_ETIMEDOUT);
  ordo_txn_end(a);
  assert_int_equal(ordo_lock(c, "s", 1, ORDO_MODE_X, 0), ORDO_ETIMEDOUT);
  ordo_txn_end(b);
  assert_int_equal(ordo_lock(c, "s", 1, ORDO_MODE_X, 0), 0);
  ordo_txn_end(c);
}

static void test_upgrade(void **state) {
  (void)state;
  MUST(ORDO_CAP_UPGRADE);
  ordo_txn_t *a = txn(), *b = txn();
  ordo_mode_t m;
  /* A sole S holder upgrades at once. */
  assert_int_equal(ordo_lock(a, "u", 1, ORDO_MODE_S, 0), 0);
  assert_int_equal(ordo_lock(a, "u", 1, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_held(a, "u", 1, &m), 2);
  assert_int_equal(m, ORDO_MODE_X);
  ordo_unlock_all(a);
  /* With another S holder it waits, keeping its S, until that one goes. */
  assert_int_equal(ordo_lock(a, "u", 1, ORDO_MODE_S, 0), 0);
  assert_int_equal(ordo_lock(b, "u", 1, ORDO_MODE_S, 0), 0);
  assert_int_equal(ordo_lock(a, "u", 1, ORDO_MODE_X, 50), ORDO_ETIMEDOUT);
  assert_int_equal(ordo_held(a, "u", 1, &m), 1);
  assert_int_equal(m, ORDO_MODE_S);
  ordo_txn_end(b);
  assert_int_equal(ordo_lock(a, "u", 1, ORDO_MODE_X, 1000), 0);
  ordo_txn_end(a);
}

static void test_cancel(void **state) {
  (void)state;
  ordo_txn_t *h = txn();
  assert_int_equal(ordo_lock(h, "x", 1, ORDO_MODE_X, 0), 0);
  if (!has(ORDO_CAP_CANCEL)) {
    /* Refused, on an idle txn and a holding one alike, and harmless. */
    ordo_txn_t *t = txn();
    assert_int_equal(ordo_cancel(t), ORDO_ENOTSUP);
    assert_int_equal(ordo_cancel(h), ORDO_ENOTSUP);
    assert_int_equal(ordo_held(h, "x", 1, NULL), 1);
    assert_int_equal(ordo_lock(t, "v", 1, ORDO_MODE_X, 0), 0);
    ordo_txn_end(t);
    ordo_txn_end(h);
    return;
  }
  MUST(ORDO_CAP_SERVER_WAIT);
  tu_locker w = {.t = txn(),
                 .reqs = {ORDO_REQ_X("v", 1), ORDO_REQ_X("x", 1)},
                 .n = 2,
                 .timeout_ms = ORDO_FOREVER};
  tu_locker_start(&w);
  assert_true(tu_wait_waiting(O, 1));
  assert_int_equal(ordo_cancel(w.t), 0);
  assert_int_equal(tu_locker_join(&w), ORDO_ECANCELED);
  assert_int_equal(ordo_held(w.t, "v", 1, NULL), 0);
  assert_true(free_for_other("v"));
  assert_int_equal(ordo_cancel(w.t), ORDO_ENOTHELD);
  ordo_txn_end(w.t);
  ordo_txn_end(h);
}

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls, status;
} box_t;

static void box_done(ordo_txn_t *t, int status, void *arg) {
  (void)t;
  box_t *b = arg;
  pthread_mutex_lock(&b->mu);
  b->calls++;
  b->status = status;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

static int box_wait(box_t *b) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 5;
  pthread_mutex_lock(&b->mu);
  while (b->calls == 0 && pthread_cond_timedwait(&b->cv, &b->mu, &ts) == 0)
    ;
  int calls = b->calls;
  pthread_mutex_unlock(&b->mu);
  return calls;
}

static void test_async(void **state) {
  (void)state;
  box_t b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 99};
  ordo_txn_t *h = txn(), *t = txn();
  ordo_req_t r[] = {ORDO_REQ_X("p", 1), ORDO_REQ_X("q", 1)};
  if (!has(ORDO_CAP_ASYNC)) {
    /* Refused before anything is asked: nothing held, no callback. */
    assert_int_equal(ordo_lock_all_async(t, r, 2, 1000, box_done, &b),
                     ORDO_ENOTSUP);
    assert_int_equal(ordo_held(t, "p", 1, NULL), 0);
    assert_true(free_for_other("p"));
    assert_int_equal(ordo_lock_all(t, r, 2, 1000), 0); /* the txn works on */
    ordo_txn_end(t);
    ordo_txn_end(h);
    assert_int_equal(b.calls, 0);
    return;
  }
  assert_int_equal(ordo_lock_all_async(t, r, 2, 1000, box_done, &b), 0);
  assert_int_equal(b.calls, 0); /* granted at once: no callback */
  ordo_unlock_all(t);
  assert_int_equal(ordo_lock(h, "q", 1, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_lock_all_async(t, r, 2, 5000, box_done, &b),
                   ORDO_PENDING);
  ordo_unlock_all(h);
  assert_int_equal(box_wait(&b), 1);
  assert_int_equal(b.status, 0);
  assert_int_equal(ordo_held(t, "p", 1, NULL), 1);
  ordo_unlock_all(t);
  /* The deadline passes: ETIMEDOUT through the callback, nothing held. */
  b.calls = 0;
  assert_int_equal(ordo_lock(h, "q", 1, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_lock_all_async(t, r, 2, 30, box_done, &b),
                   ORDO_PENDING);
  assert_int_equal(box_wait(&b), 1);
  assert_int_equal(b.status, ORDO_ETIMEDOUT);
  assert_int_equal(ordo_held(t, "p", 1, NULL), 0);
  /* A call that fails never calls back. */
  b.calls = 0;
  ordo_req_t bad = {"", 0, ORDO_MODE_X};
  assert_int_equal(ordo_lock_all_async(t, &bad, 1, 10, box_done, &b),
                   ORDO_EINVAL);
  assert_int_equal(b.calls, 0);
  ordo_txn_end(t);
  ordo_txn_end(h);
}

static void test_fence(void **state) {
  (void)state;
  MUST(ORDO_CAP_FENCE);
  ordo_txn_t *a = txn(), *b = txn();
  uint64_t last = 0;
  for (int i = 0; i < 50; i++) {
    ordo_txn_t *t = (i & 1) ? a : b;
    uint64_t f;
    assert_int_equal(ordo_lock(t, "f", 1, ORDO_MODE_X, 1000), 0);
    assert_int_equal(ordo_fence(t, "f", 1, &f), 0);
    assert_true(f > last); /* strictly increasing, whoever holds */
    last = f;
    ordo_unlock_all(t);
  }
  uint64_t f;
  assert_int_equal(ordo_fence(a, "f", 1, &f), ORDO_ENOTHELD);
  ordo_txn_end(a);
  ordo_txn_end(b);
}

static void test_incremental(void **state) {
  (void)state;
  MUST(ORDO_CAP_INCREMENTAL);
  ordo_txn_t *t = txn();
  ordo_req_t r[] = {ORDO_REQ_X("i1", 2), ORDO_REQ_X("i2", 2)};
  assert_int_equal(ordo_lock(t, "i3", 2, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_lock_all(t, r, 2, 0), 0);
  assert_int_equal(ordo_unlock(t, "i1", 2), 0);
  assert_true(free_for_other("i1"));
  assert_false(free_for_other("i2"));
  assert_false(free_for_other("i3"));
  assert_int_equal(ordo_unlock_all(t), 2);
  ordo_txn_end(t);
}

/* Timeouts at their bounds: -1, 0, 1, INT32_MAX and INT64_MAX (LONG_MAX)
 * milliseconds, for ordo_lock_all and ordo_lock. 0 and 1 end soon with
 * ORDO_ETIMEDOUT holding nothing new; -1 and the huge ones wait (a huge one
 * must neither wrap into a deadline in the past nor be refused by the
 * backend's server), and a release grants them. */
typedef struct {
  ordo_txn_t *t;
  long tmo;
  bool one;
  int rc;
  _Atomic int done;
  pthread_t thr;
} tcall;

static int tcall_run(tcall *c) {
  ordo_req_t r[] = {ORDO_REQ_X("tb1", 3), ORDO_REQ_X("tb2", 3)};
  return c->one ? ordo_lock(c->t, "tb2", 3, ORDO_MODE_X, c->tmo)
                : ordo_lock_all(c->t, r, 2, c->tmo);
}

static void *tcall_main(void *arg) {
  tcall *c = arg;
  c->rc = tcall_run(c);
  atomic_store(&c->done, 1);
  return NULL;
}

static void test_timeout_bounds(void **state) {
  (void)state;
  static const long tmos[] = {-1, 0, 1, INT32_MAX, LONG_MAX};
  for (int one = 0; one < 2; one++) {
    for (size_t i = 0; i < sizeof tmos / sizeof tmos[0]; i++) {
      ordo_txn_t *h = txn();
      assert_int_equal(ordo_lock(h, "tb2", 3, ORDO_MODE_X, 0), 0);
      tcall c = {txn(), tmos[i], one != 0, 99, 0, 0};
      if (c.tmo == 0 || c.tmo == 1) {
        uint64_t t0 = tu_now_ns();
        int rc = tcall_run(&c);
        uint64_t ms = (tu_now_ns() - t0) / 1000000u;
        if (rc != ORDO_ETIMEDOUT)
          fail_msg("%s, timeout %ld: %s", one ? "lock" : "lock_all", c.tmo,
                   ordo_err_name(rc));
        assert_true(ms >= (uint64_t)c.tmo);
        assert_true(ms < tu_ms(5000)); /* a bound against a hang */
        assert_int_equal(ordo_held(c.t, "tb1", 3, NULL), 0);
      } else {
        pthread_create(&c.thr, NULL, tcall_main, &c);
        /* Still waiting well after an at-once time-out (or refusal) would
         * have ended it: a lower bound, so the sleep is what is measured. */
        tu_sleep_us(100000);
        if (atomic_load(&c.done))
          fail_msg("%s, timeout %ld ended at once: %s",
                   one ? "lock" : "lock_all", c.tmo, ordo_err_name(c.rc));
        ordo_txn_end(h);
        h = NULL;
        pthread_join(c.thr, NULL);
        if (c.rc != 0)
          fail_msg("%s, timeout %ld: %s after the release",
                   one ? "lock" : "lock_all", c.tmo, ordo_err_name(c.rc));
        assert_int_equal(ordo_held(c.t, "tb2", 3, NULL), 1);
      }
      ordo_txn_end(c.t);
      if (h)
        ordo_txn_end(h);
    }
  }
}

/* Opposite request orders, many times, with no bound: the canonical order
 * makes a deadlock impossible (a hang would trip the watchdog). */
typedef struct {
  int flip;
  long n;
  _Atomic long *owner;
  _Atomic long violations;
} order_arg;

static order_arg g_oa;

static void *order_worker(void *arg) {
  long me = (long)(intptr_t)arg;
  ordo_txn_t *t = txn();
  for (long i = 0; i < g_oa.n; i++) {
    int a = (int)((me + i) & 3), b = (int)((me + i + 1 + (i & 1)) & 3);
    char ka[2] = {'k', (char)('0' + a)}, kb[2] = {'k', (char)('0' + b)};
    ordo_req_t r[2] = {{ka, 2, ORDO_MODE_X}, {kb, 2, ORDO_MODE_X}};
    if (me & 1) {
      ordo_req_t tmp = r[0];
      r[0] = r[1];
      r[1] = tmp;
    }
    if (ordo_lock_all(t, r, 2, ORDO_FOREVER) != 0)
      abort();
    long z = 0;
    if (!atomic_compare_exchange_strong(&g_oa.owner[a], &z, me))
      atomic_fetch_add(&g_oa.violations, 1);
    z = 0;
    if (!atomic_compare_exchange_strong(&g_oa.owner[b], &z, me))
      atomic_fetch_add(&g_oa.violations, 1);
    atomic_store(&g_oa.owner[a], 0);
    atomic_store(&g_oa.owner[b], 0);
    ordo_unlock_all(t);
  }
  ordo_txn_end(t);
  return NULL;
}

static void test_opposite_orders(void **state) {
  (void)state;
  static _Atomic long owner[4];
  g_oa.n = tu_scaled(5000);
  g_oa.owner = owner;
  atomic_store(&g_oa.violations, 0);
  pthread_t thr[4];
  for (long i = 0; i < 4; i++)
    pthread_create(&thr[i], NULL, order_worker, (void *)(intptr_t)(i + 1));
  for (int i = 0; i < 4; i++)
    pthread_join(thr[i], NULL);
  assert_int_equal(atomic_load(&g_oa.violations), 0);
}

int main(int argc, char **argv) {
  if (argc > 1)
    URL = argv[1];
  else if (getenv("ORDO_TEST_URL"))
    URL = getenv("ORDO_TEST_URL");
  print_message("conformance suite on %s\n", URL);
  const struct CMUnitTest tests[] = {
#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
      CASE(test_caps),
      CASE(test_lock_unlock),
      CASE(test_bad_keys),
      CASE(test_dedupe),
      CASE(test_all_or_nothing),
      CASE(test_waiter_holds_nothing),
      CASE(test_reentrant),
      CASE(test_shared),
      CASE(test_upgrade),
      CASE(test_cancel),
      CASE(test_async),
      CASE(test_fence),
      CASE(test_incremental),
      CASE(test_timeout_bounds),
      CASE(test_opposite_orders),
#undef CASE
  };
  return tu_exit(cmocka_run_group_tests_name(URL, tests, NULL, NULL));
}
