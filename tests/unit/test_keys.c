/*
 * test_keys.c -- keys and their canonical order: the comparator, the typed
 * encoders (a property test over 100,000 random pairs of each type: encoded
 * byte order equals natural order), and request normalisation (dedupe, the
 * strongest mode wins, canonical sort).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"
#include "ordo.h"
#include "ordo_int.h"

#include <string.h>

#define PAIRS 100000

static uint64_t rng = 0x853C49E6748FEA9Bu;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Random values with a bias towards the edges, where encoders go wrong. */
static uint64_t rnd_u64(void) {
  switch (rnd() % 8) {
  case 0:
    return rnd() % 512;
  case 1:
    return UINT64_MAX - rnd() % 512;
  case 2:
    return (UINT64_C(1) << 63) + (rnd() % 512) - 256;
  default:
    return rnd();
  }
}

static int sign(int v) {
  return (v > 0) - (v < 0);
}

static void test_cmp_basics(void **state) {
  (void)state;
  assert_true(ordo_key_cmp("a", 1, "b", 1) < 0);
  assert_true(ordo_key_cmp("ab", 2, "a", 1) > 0); /* a proper prefix first */
  assert_true(ordo_key_cmp("a", 1, "ab", 2) < 0);
  assert_int_equal(ordo_key_cmp("abc", 3, "abc", 3), 0);
  /* Unsigned bytes: 0xff sorts after 0x01. */
  assert_true(ordo_key_cmp("\xff", 1, "\x01", 1) > 0);
  assert_true(ordo_key_cmp("\x00", 1, "\x00\x00", 2) < 0);
}

static void test_u64_order(void **state) {
  (void)state;
  for (int i = 0; i < PAIRS; i++) {
    uint64_t a = rnd_u64(), b = rnd_u64();
    uint8_t ea[8], eb[8];
    ordo_key_u64(ea, a);
    ordo_key_u64(eb, b);
    int natural = (a > b) - (a < b);
    assert_int_equal(sign(ordo_key_cmp(ea, 8, eb, 8)), natural);
    assert_true(ordo_key_u64_decode(ea) == a);
  }
}

static void test_i64_order(void **state) {
  (void)state;
  for (int i = 0; i < PAIRS; i++) {
    int64_t a = (int64_t)rnd_u64(), b = (int64_t)rnd_u64();
    uint8_t ea[8], eb[8];
    ordo_key_i64(ea, a);
    ordo_key_i64(eb, b);
    int natural = (a > b) - (a < b);
    assert_int_equal(sign(ordo_key_cmp(ea, 8, eb, 8)), natural);
    assert_true(ordo_key_i64_decode(ea) == a);
  }
  uint8_t lo[8], hi[8];
  ordo_key_i64(lo, INT64_MIN);
  ordo_key_i64(hi, INT64_MAX);
  assert_true(ordo_key_cmp(lo, 8, hi, 8) < 0);
}

/* Random strings over a small alphabet that includes 0x00 and 0xff, so
 * prefixes and escapes are common. */
static size_t rnd_str(uint8_t *s) {
  static const uint8_t alpha[] = {0x00, 0x01, 'a', 'b', 0xfe, 0xff};
  size_t n = rnd() % 6;
  for (size_t i = 0; i < n; i++)
    s[i] = alpha[rnd() % sizeof alpha];
  return n;
}

static int str_natural(const uint8_t *a, size_t an, const uint8_t *b,
                       size_t bn) {
  size_t n = an < bn ? an : bn;
  int c = n ? memcmp(a, b, n) : 0;
  if (c)
    return sign(c);
  return (an > bn) - (an < bn);
}

static void test_string_tuple_order(void **state) {
  (void)state;
  for (int i = 0; i < PAIRS; i++) {
    uint8_t a[8], b[8], ea[32], eb[32];
    size_t an = rnd_str(a), bn = rnd_str(b);
    ordo_tuple_t ta, tb;
    ordo_tuple_init(&ta, ea, sizeof ea);
    ordo_tuple_init(&tb, eb, sizeof eb);
    ordo_tuple_add_str(&ta, a, an);
    ordo_tuple_add_str(&tb, b, bn);
    int la = ordo_tuple_len(&ta), lb = ordo_tuple_len(&tb);
    assert_true(la > 0 && lb > 0);
    assert_int_equal(sign(ordo_key_cmp(ea, (size_t)la, eb, (size_t)lb)),
                     str_natural(a, an, b, bn));
  }
}

/* Composite keys (show_id, seat_id) and (i64, string): tuple order is
 * lexicographic over the elements. */
static void test_composite_tuple_order(void **state) {
  (void)state;
  for (int i = 0; i < PAIRS; i++) {
    uint64_t sa = rnd() % 4, sb = rnd() % 4; /* equal often */
    uint64_t ca = rnd_u64(), cb = rnd_u64();
    uint8_t ea[32], eb[32];
    ordo_tuple_t ta, tb;
    ordo_tuple_init(&ta, ea, sizeof ea);
    ordo_tuple_init(&tb, eb, sizeof eb);
    ordo_tuple_add_u64(&ta, sa);
    ordo_tuple_add_u64(&ta, ca);
    ordo_tuple_add_u64(&tb, sb);
    ordo_tuple_add_u64(&tb, cb);
    int natural = sa != sb ? (sa > sb) - (sa < sb) : (ca > cb) - (ca < cb);
    assert_int_equal(sign(ordo_key_cmp(ea, (size_t)ordo_tuple_len(&ta), eb,
                                       (size_t)ordo_tuple_len(&tb))),
                     natural);
  }
  for (int i = 0; i < PAIRS; i++) {
    int64_t xa = (int64_t)(rnd() % 5) - 2, xb = (int64_t)(rnd() % 5) - 2;
    uint8_t a[8], b[8], ea[48], eb[48];
    size_t an = rnd_str(a), bn = rnd_str(b);
    ordo_tuple_t ta, tb;
    ordo_tuple_init(&ta, ea, sizeof ea);
    ordo_tuple_init(&tb, eb, sizeof eb);
    ordo_tuple_add_i64(&ta, xa);
    ordo_tuple_add_str(&ta, a, an);
    ordo_tuple_add_i64(&tb, xb);
    ordo_tuple_add_str(&tb, b, bn);
    int natural = xa != xb ? (xa > xb) - (xa < xb) : str_natural(a, an, b, bn);
    assert_int_equal(sign(ordo_key_cmp(ea, (size_t)ordo_tuple_len(&ta), eb,
                                       (size_t)ordo_tuple_len(&tb))),
                     natural);
  }
}

static void test_tuple_prefix_and_overflow(void **state) {
  (void)state;
  uint8_t e1[32], e2[32], small[4];
  ordo_tuple_t t1, t2, ts;
  ordo_tuple_init(&t1, e1, sizeof e1);
  ordo_tuple_init(&t2, e2, sizeof e2);
  ordo_tuple_add_u64(&t1, 7);
  ordo_tuple_add_u64(&t2, 7);
  ordo_tuple_add_u64(&t2, 0);
  /* (7) sorts before (7, 0). */
  assert_true(ordo_key_cmp(e1, (size_t)ordo_tuple_len(&t1), e2,
                           (size_t)ordo_tuple_len(&t2)) < 0);
  ordo_tuple_init(&ts, small, sizeof small);
  ordo_tuple_add_u64(&ts, 1);
  assert_int_equal(ordo_tuple_len(&ts), ORDO_ELIMIT);
}

static void test_normalize(void **state) {
  (void)state;
  ordo_req_t r[] = {
      {"b", 1, ORDO_MODE_S},  {"a", 1, ORDO_MODE_S}, {"b", 1, ORDO_MODE_X},
      {"ab", 2, ORDO_MODE_S}, {"a", 1, ORDO_MODE_S},
  };
  size_t n = ordo__reqs_normalize(r, 5);
  assert_int_equal(n, 3);
  assert_memory_equal(r[0].key, "a", 1);
  assert_int_equal(r[0].len, 1);
  assert_int_equal(r[0].mode, ORDO_MODE_S);
  assert_int_equal(r[1].len, 2);
  assert_memory_equal(r[1].key, "ab", 2);
  assert_memory_equal(r[2].key, "b", 1);
  assert_int_equal(r[2].mode, ORDO_MODE_X); /* the strongest mode wins */

  /* A long request takes the heap-sort path: sorted and distinct. */
  enum { N = 200 };
  static uint8_t keys[N][8];
  ordo_req_t big[N];
  for (int i = 0; i < N; i++) {
    ordo_key_u64(keys[i], rnd() % 150);
    big[i] = (ordo_req_t){keys[i], 8, (rnd() & 1) ? ORDO_MODE_X : ORDO_MODE_S};
  }
  size_t m = ordo__reqs_normalize(big, N);
  assert_true(m <= 150);
  for (size_t i = 1; i < m; i++)
    assert_true(ordo_key_cmp(big[i - 1].key, 8, big[i].key, 8) < 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cmp_basics),
      cmocka_unit_test(test_u64_order),
      cmocka_unit_test(test_i64_order),
      cmocka_unit_test(test_string_tuple_order),
      cmocka_unit_test(test_composite_tuple_order),
      cmocka_unit_test(test_tuple_prefix_and_overflow),
      cmocka_unit_test(test_normalize),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
