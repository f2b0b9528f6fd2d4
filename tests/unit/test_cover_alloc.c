/*
 * test_cover_alloc.c -- allocation failures, the error paths `make
 * coverage` found no test reaching (docs/coverage.md). The test is linked
 * with --wrap for malloc, calloc and realloc (tests/CMakeLists.txt), so the
 * library's calls come here: armed on the test's own thread, the n-th one
 * from then on returns NULL. Each case sweeps n from 0 until a run sees no
 * failure, and asserts what ordo.h promises at every step: the call fails
 * with ORDO_ENOMEM and leaves nothing taken and the place usable, or (where
 * a failure only costs time, like a hash that could not grow) it succeeds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"

#include <string.h>

/* ---- The allocator's stand-in ------------------------------------------ */

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);

/* Armed on this thread only, so an engine thread's allocation never fails
 * and each run fails the same call. */
static _Thread_local bool armed;
static _Thread_local long countdown; /* calls left before the one to fail */
static _Thread_local long failed;    /* failures made since armed */

static bool fail_now(void) {
  if (!armed)
    return false;
  if (countdown-- != 0)
    return false;
  failed++;
  return true;
}

void *__wrap_malloc(size_t n) {
  return fail_now() ? NULL : __real_malloc(n);
}
void *__wrap_calloc(size_t k, size_t n) {
  return fail_now() ? NULL : __real_calloc(k, n);
}
void *__wrap_realloc(void *p, size_t n) {
  return fail_now() ? NULL : __real_realloc(p, n);
}

static void arm(long n) {
  countdown = n;
  failed = 0;
  armed = true;
}

/* Disarms; true if a failure was made while armed. */
static bool disarm(void) {
  armed = false;
  return failed > 0;
}

/* The sweep's bound: no call here makes this many allocations. */
#define SWEEP_MAX 200

static ordo_t *open_checked(void) {
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.stripes = 4;
  opts.order = ORDO_ORDER_REFUSE;
  ordo_t *o;
  assert_int_equal(ordo_open(&o, "mem://", &opts), 0);
  return o;
}

static ordo_txn_t *begin(ordo_t *o) {
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0);
  return t;
}

/* ---- Cases ----------------------------------------------------------------
 */

/* ordo_open, with the detector and the order checker: each failure is
 * ORDO_ENOMEM with *out NULL; the run that sees none opens a place. */
static void test_open(void **state) {
  (void)state;
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.order = ORDO_ORDER_REFUSE;
  long n = 0;
  for (;; n++) {
    assert_true(n < SWEEP_MAX);
    ordo_t *o = (ordo_t *)&opts;
    arm(n);
    int rc = ordo_open(&o, "mem://", &opts);
    bool hit = disarm();
    if (rc == 0) {
      ordo_close(o);
      if (!hit)
        break;
      continue; /* a failure that only costs time (a hash not grown) */
    }
    assert_true(hit);
    assert_int_equal(rc, ORDO_ENOMEM);
    assert_null(o);
  }
  assert_true(n > 5); /* the place, its table, detector and checker */
}

/* ordo_txn_begin: ORDO_ENOMEM and no handle, then a begin that works. */
static void test_begin(void **state) {
  (void)state;
  ordo_t *o = open_checked();
  long n = 0;
  for (;; n++) {
    assert_true(n < SWEEP_MAX);
    ordo_txn_t *t = NULL;
    arm(n);
    int rc = ordo_txn_begin(o, &t, &(ordo_txn_options_t){.name = "named"});
    bool hit = disarm();
    if (rc == 0) {
      ordo_txn_end(t);
      if (!hit)
        break;
      continue;
    }
    assert_true(hit);
    assert_int_equal(rc, ORDO_ENOMEM);
  }
  assert_true(n >= 1);
  ordo_close(o);
}

#define NKEYS 24 /* more than normalize's 16 on the stack: its heap array */

/* A lock_all of NKEYS new keys of new classes by a txn that holds one key
 * (so the checker adds edges): a failure is ORDO_ENOMEM with none of the
 * new keys held, the old one still held once, and the same call then
 * succeeds unarmed. */
static void test_lock_all(void **state) {
  (void)state;
  uint8_t keys[NKEYS][16];
  ordo_req_t reqs[NKEYS];
  for (int i = 0; i < NKEYS; i++) {
    int len = snprintf((char *)keys[i], sizeof keys[i], "c%02d:%d", i, i);
    reqs[i] = (ordo_req_t){keys[i], (size_t)len, ORDO_MODE_X};
  }
  long n = 0, refused = 0;
  for (;; n++) {
    assert_true(n < SWEEP_MAX);
    ordo_t *o = open_checked();
    ordo_txn_t *t = begin(o);
    assert_int_equal(ordo_lock(t, "held:1", 6, ORDO_MODE_X, 0), 0);
    arm(n);
    int rc = ordo_lock_all(t, reqs, NKEYS, 0);
    bool hit = disarm();
    if (rc != 0) {
      assert_true(hit);
      assert_int_equal(rc, ORDO_ENOMEM);
      refused++;
      for (int i = 0; i < NKEYS; i++)
        assert_int_equal(ordo_held(t, reqs[i].key, reqs[i].len, NULL), 0);
      assert_int_equal(ordo_held(t, "held:1", 6, NULL), 1);
      /* Nothing was left behind: another txn takes every key at once. */
      ordo_txn_t *u = begin(o);
      assert_int_equal(ordo_lock_all(u, reqs, NKEYS, 0), 0);
      ordo_txn_end(u);
      assert_int_equal(ordo_lock_all(t, reqs, NKEYS, 0), 0);
    }
    assert_int_equal(
        ordo_held(t, reqs[NKEYS - 1].key, reqs[NKEYS - 1].len, NULL), 1);
    assert_int_equal(ordo_unlock_all(t), NKEYS + 1);
    ordo_txn_end(t);
    ordo_close(o);
    if (!hit)
      break;
  }
  assert_true(refused >= 3);
}

/* ordo_order_rank: ORDO_ENOMEM, and the prefix is then ranked unarmed. */
static void test_rank(void **state) {
  (void)state;
  long n = 0;
  for (;; n++) {
    assert_true(n < SWEEP_MAX);
    ordo_t *o = open_checked();
    arm(n);
    int rc = ordo_order_rank(o, "acct:", 5, 1);
    bool hit = disarm();
    if (rc != 0) {
      assert_true(hit);
      assert_int_equal(rc, ORDO_ENOMEM);
      assert_int_equal(ordo_order_rank(o, "acct:", 5, 1), 0);
    }
    /* Ranked either way: a rank inversion is refused. */
    assert_int_equal(ordo_order_rank(o, "user:", 5, 0), 0);
    ordo_txn_t *t = begin(o);
    assert_int_equal(ordo_lock(t, "acct:1", 6, ORDO_MODE_X, 0), 0);
    assert_int_equal(ordo_lock(t, "user:1", 6, ORDO_MODE_X, 0), ORDO_EORDER);
    ordo_txn_end(t);
    ordo_close(o);
    if (!hit)
      break;
  }
  assert_true(n >= 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open),
      cmocka_unit_test(test_begin),
      cmocka_unit_test(test_lock_all),
      cmocka_unit_test(test_rank),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
