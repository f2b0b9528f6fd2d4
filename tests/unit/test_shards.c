/*
 * test_shards.c -- the sharded ordod:// place without servers: the
 * placement function against the test vectors of docs/protocol.md
 * ("## Shards"; tests/unit/test_shards_place.py checks the same table with
 * an implementation of its own), that a 4th shard takes about a quarter of
 * 10,000 keys and moves none between the 3 old ones, which URLs make a
 * sharded place, the capabilities, and that a txn connects nothing until a
 * call touches a shard (then a dead shard is ORDO_EBACKEND).
 * tests/integration/test_shards_it.c runs it against real servers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"
#include "ordo_int.h"
#include "backend/shards.h"

#include <stdio.h>
#include <string.h>

static const char *const names3[] = {"10.0.0.1:7411", "10.0.0.2:7411",
                                     "10.0.0.3:7411"};

/* The table of docs/protocol.md: key, fnv1a64(key), index in names3. */
static const struct {
  const char *key;
  uint64_t fnv;
  size_t shard;
} vectors[] = {
    {"a", 0xaf63dc4c8601ec8cull, 2},
    {"b", 0xaf63df4c8601f1a5ull, 1},
    {"acct:1", 0xeafbf8bdb5cb3773ull, 1},
    {"acct:2", 0xeafbf9bdb5cb3926ull, 0},
    {"acct:3", 0xeafbfabdb5cb3ad9ull, 2},
    {"user:42", 0x6c151ea4dcd221c2ull, 0},
    {"order/7", 0xdeddfa9f34b9990dull, 2},
    {"x", 0xaf63f54c86021707ull, 0},
};

static void test_vectors(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
    const char *k = vectors[i].key;
    assert_true(ordo__shard_fnv1a64(k, strlen(k)) == vectors[i].fnv);
    assert_int_equal(ordo__shard_place(names3, 3, k, strlen(k)),
                     vectors[i].shard);
    /* The answer is a name, not a position: any order of the names. */
    const char *rev[3] = {names3[2], names3[1], names3[0]};
    assert_int_equal(ordo__shard_place(rev, 3, k, strlen(k)),
                     2 - vectors[i].shard);
  }
  /* fmix64 of a known value (murmur3's finalizer). */
  assert_true(ordo__shard_fmix64(0) == 0);
  assert_true(ordo__shard_fmix64(1) == 0xb456bcfc34c2cb2cull);
}

/* A 4th shard takes 20%..30% of 10,000 keys; every key that moves goes to
 * it, none from one old shard to another. */
static void test_add_shard_moves_quarter(void **state) {
  (void)state;
  const char *names4[] = {names3[0], names3[1], names3[2], "10.0.0.4:7411"};
  int moved = 0;
  for (int i = 0; i < 10000; i++) {
    char k[32];
    int n = snprintf(k, sizeof k, "key:%d", i);
    size_t a = ordo__shard_place(names3, 3, k, (size_t)n);
    size_t b = ordo__shard_place(names4, 4, k, (size_t)n);
    if (a != b) {
      assert_int_equal(b, 3);
      moved++;
    }
  }
  assert_in_range(moved, 2000, 3000);
}

static void test_multi_urls(void **state) {
  (void)state;
  assert_true(ordo__shards_multi("ordod://a:1,b:2"));
  assert_true(ordo__shards_multi("ordod://u:p@a:1,b:2?timeout_ms=5"));
  assert_true(ordo__shards_multi("ordod://:p,w@a:1,b:2"));
  assert_false(ordo__shards_multi("ordod://a:1"));
  assert_false(ordo__shards_multi("ordod://:p,w@a:1")); /* a comma: the pw */
  assert_false(ordo__shards_multi("ordod:///tmp/a,b.sock"));
  assert_false(ordo__shards_multi("redis://a:1,b:2"));
  static const char *const bad[] = {
      "ordod://a:1,",        "ordod://,a:1",
      "ordod://a:1,,b:2",    "ordod://a:1,a:1",
      "ordod://a:1,/tmp/s",  "ordod://a:1,b:2?nope=1",
      "ordod://a:1,b:99999", "ordod://a:1,b:2?timeout_ms=0",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ordo_t *o = NULL;
    int rc = ordo_open(&o, bad[i], NULL);
    if (rc != ORDO_EURL)
      fail_msg("%s: %d, expected ORDO_EURL", bad[i], rc);
    assert_null(o);
  }
}

static void test_open_caps_lazy(void **state) {
  (void)state;
  ordo_t *o = NULL;
  /* Port 1 on loopback: nothing listens, so a connect is refused at once. */
  assert_int_equal(
      ordo_open(&o, "ordod://:pw@127.0.0.1:1,127.0.0.2:1?timeout_ms=500", NULL),
      0);
  assert_string_equal(ordo_url(o),
                      "ordod://@127.0.0.1:1,127.0.0.2:1?timeout_ms=500");
  unsigned caps = ordo_caps(o);
  assert_true(caps & ORDO_CAP_SHARED);
  assert_true(caps & ORDO_CAP_FENCE);
  assert_true(caps & ORDO_CAP_REENTRANT);
  assert_false(caps & ORDO_CAP_WAIT_HOLDS_NOTHING);
  assert_false(caps & ORDO_CAP_CANCEL);
  ordo_txn_t *t = NULL;
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0); /* connects nothing */
  ordo_mode_t m;
  assert_int_equal(ordo_held(t, "a", 1, &m), 0);
  assert_int_equal(ordo_unlock(t, "a", 1), ORDO_ENOTHELD);
  assert_int_equal(ordo_unlock_all(t), 0);
  assert_int_equal(ordo_lock(t, "a", 1, ORDO_MODE_X, 100), ORDO_EBACKEND);
  ordo_req_t r[2] = {{"a", 1, ORDO_MODE_X}, {"b", 1, ORDO_MODE_S}};
  assert_int_equal(ordo_lock_all(t, r, 2, 100), ORDO_EBACKEND);
  assert_int_equal(ordo_cancel(t), ORDO_ENOTSUP);
  ordo_txn_end(t);
  ordo_stats_t st;
  assert_int_equal(ordo_stats(o, &st), ORDO_EBACKEND);
  ordo_close(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vectors),
      cmocka_unit_test(test_add_shard_moves_quarter),
      cmocka_unit_test(test_multi_urls),
      cmocka_unit_test(test_open_caps_lazy),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
