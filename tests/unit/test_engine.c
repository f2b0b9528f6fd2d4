/*
 * test_engine.c -- what is particular to the in-process engine (the
 * semantics every backend shares are in tests/conformance): open and URLs,
 * errors, reentrant fencing tokens, two upgraders, the lock bound, the async
 * form's one-wake-per-release, stats, and ordo_retry's backoff bounds. Every
 * case runs under a watchdog that dumps the lock table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"

#include <sched.h>
#include <string.h>

static ordo_t *O;

static int setup(void **state) {
  (void)state;
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.stripes = 8;
  /* The starvation bound is starvation_us alone (1 ms): the cases that wait
   * past it (a hand-over in test_stats, a reentrant hold past a starving
   * waiter) must not hang on how long a sampled hold happened to last on a
   * loaded machine (a preempted holder makes the mean, and 8 times it, ms). */
  opts.starvation_holds = 0;
  if (ordo_open(&O, "mem://", &opts) != 0)
    return -1;
  tu_watchdog_start(O, 20, "test_engine case");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tu_watchdog_stop();
  ordo_stats_t s;
  ordo_stats(O, &s);
  /* Nothing may be left queued once every txn has ended. */
  assert_int_equal(s.waiting, 0);
  ordo_close(O);
  O = NULL;
  return 0;
}

static ordo_txn_t *txn(void) {
  ordo_txn_t *t = NULL;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  return t;
}

/* Is key free, as another txn sees it? (tries X once) */
static bool free_for_other(const char *key) {
  ordo_txn_t *o = txn();
  int rc = ordo_lock(o, key, strlen(key), ORDO_MODE_X, 0);
  ordo_txn_end(o);
  return rc == 0;
}

static void test_errors_and_urls(void **state) {
  (void)state;
  assert_string_equal(ordo_err_name(ORDO_ETIMEDOUT), "ETIMEDOUT");
  assert_string_equal(ordo_err_name(ORDO_EDEADLK), "EDEADLK");
  assert_true(strlen(ordo_strerror(ORDO_ELIMIT)) > 0);
  assert_true(ordo_is_retryable(ORDO_ETIMEDOUT));
  assert_true(ordo_is_retryable(ORDO_EDEADLK));
  assert_true(ordo_is_retryable(ORDO_ELEASE));
  assert_false(ordo_is_retryable(ORDO_EINVAL));
  assert_false(ordo_is_retryable(ORDO_ECANCELED));
  assert_false(ordo_is_retryable(0));

  ordo_t *o = NULL;
  assert_int_equal(ordo_open(&o, "nope://x", NULL), ORDO_EURL);
  assert_int_equal(ordo_open(&o, "mem://junk", NULL), ORDO_EURL);
  assert_int_equal(ordo_open(&o, "mem://?bogus=1", NULL), ORDO_EURL);
  assert_int_equal(ordo_open(&o, "mem://?stripes=3", NULL), ORDO_EINVAL);
  assert_int_equal(ordo_open(&o, "mem://?stripes=16&starvation_us=50", NULL),
                   0);
  assert_string_equal(ordo_url(o), "mem://?stripes=16&starvation_us=50");
  assert_true(ordo_caps(o) & ORDO_CAP_ASYNC);
  ordo_close(o);
  assert_int_equal(ordo_open(&o, NULL, NULL), 0);
  ordo_close(o);

  ordo_txn_t *t = txn();
  /* Empty keys, over-long keys, bad modes are refused. */
  assert_int_equal(ordo_lock(t, "", 0, ORDO_MODE_X, 0), ORDO_EINVAL);
  static char big[ORDO_KEY_MAX_DEFAULT + 1];
  assert_int_equal(ordo_lock(t, big, sizeof big, ORDO_MODE_X, 0), ORDO_EINVAL);
  assert_int_equal(ordo_lock(t, "k", 1, (ordo_mode_t)7, 0), ORDO_EINVAL);
  assert_int_equal(ordo_unlock(t, "k", 1), ORDO_ENOTHELD);
  /* Binary keys are fine, NULs included. */
  assert_int_equal(ordo_lock(t, "\0\xff\0", 3, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_held(t, "\0\xff\0", 3, NULL), 1);
  assert_int_equal(ordo_unlock_all(t), 1);
  ordo_txn_end(t);
}

static void test_reentrancy(void **state) {
  (void)state;
  ordo_txn_t *t = txn();
  for (int i = 0; i < 3; i++)
    assert_int_equal(ordo_lock(t, "r", 1, ORDO_MODE_X, 0), 0);
  ordo_req_t r[] = {ORDO_REQ_X("r", 1), ORDO_REQ_X("q", 1)};
  assert_int_equal(ordo_lock_all(t, r, 2, 0), 0);
  assert_int_equal(ordo_held(t, "r", 1, NULL), 4);
  assert_int_equal(ordo_held(t, "q", 1, NULL), 1);
  uint64_t f1, f2;
  assert_int_equal(ordo_fence(t, "r", 1, &f1), 0);
  for (int i = 0; i < 3; i++)
    assert_int_equal(ordo_unlock(t, "r", 1), 0);
  assert_int_equal(ordo_held(t, "r", 1, NULL), 1);
  assert_false(free_for_other("r"));
  /* A reentrant hold keeps the grant's token. */
  assert_int_equal(ordo_fence(t, "r", 1, &f2), 0);
  assert_true(f1 == f2);
  assert_int_equal(ordo_unlock(t, "r", 1), 0);
  assert_int_equal(ordo_held(t, "r", 1, NULL), 0);
  assert_true(free_for_other("r"));
  assert_int_equal(ordo_unlock(t, "r", 1), ORDO_ENOTHELD);
  ordo_txn_end(t); /* releases q */
  assert_true(free_for_other("q"));
}

/* A key its owner holds is counted again at once, even past a waiter that
 * has starved (a reservation is against new grants; this one would make
 * the owner wait on itself and cost a deadlock victim). The waiter also
 * wants a free key, p: that it is refused to others once the waiter has
 * starved shows the reservation is really in force when the owner's
 * request passes it (ordo_stats_t has no count of reservations). */
static void test_reentrant_past_starving_waiter(void **state) {
  (void)state;
  ordo_txn_t *a = txn(), *b = txn();
  assert_int_equal(ordo_lock(a, "k", 1, ORDO_MODE_X, 0), 0);
  tu_locker w = {.t = b,
                 .reqs = {ORDO_REQ_X("k", 1), ORDO_REQ_X("p", 1)},
                 .n = 2,
                 .timeout_ms = ORDO_FOREVER};
  tu_locker_start(&w);
  assert_true(tu_wait_waiting(O, 1));
  /* Past the starvation bound (1 ms: starvation_holds is 0, so hold times
   * do not scale it). Time itself is what this sleep waits for. */
  tu_sleep_us(5000);
  /* The waiter has starved and reserved its keys: p, free, is refused. */
  assert_false(free_for_other("p"));
  assert_int_equal(ordo_lock(a, "k", 1, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_held(a, "k", 1, NULL), 2);
  /* A new key of the same request is still a new grant: not refused for
   * the reservation of another key. */
  ordo_req_t r[] = {ORDO_REQ_X("k", 1), ORDO_REQ_X("m", 1)};
  assert_int_equal(ordo_lock_all(a, r, 2, 0), 0);
  assert_int_equal(ordo_held(a, "k", 1, NULL), 3);
  assert_int_equal(ordo_unlock_all(a), 2);
  assert_int_equal(tu_locker_join(&w), 0);
  assert_int_equal(ordo_held(b, "k", 1, NULL), 1);
  assert_int_equal(ordo_held(b, "p", 1, NULL), 1);
  ordo_txn_end(b);
  ordo_txn_end(a);
}

/* Two keys of one 32-bit hash (found by search: the engine's hash of both
 * "acct:0021809" and "acct:0182142" is 0x07b15aae) share a stripe and a
 * bucket, and the fast path's walk, which compares hashes only, stops at
 * whichever lock object comes first. Each must still be a lock of its own,
 * whether the other is idle (the fast path takes the wrong object, sees
 * the key differ after the compare-and-swap, and gives it back) or held. */
static void test_fast_path_hash_collision(void **state) {
  (void)state;
  const char *k1 = "acct:0021809", *k2 = "acct:0182142";
  size_t n = strlen(k1);
  ordo_txn_t *a = txn(), *b = txn();
  for (int round = 0; round < 3; round++) {
    /* k2 idle: taking k1 must not take (or leave taken) k2. */
    assert_int_equal(ordo_lock(a, k1, n, ORDO_MODE_X, 0), 0);
    assert_false(free_for_other(k1));
    assert_true(free_for_other(k2));
    assert_int_equal(ordo_held(a, k2, n, NULL), 0);
    /* k1 held: k2 is still free to take, and taking it leaves k1 alone. */
    assert_int_equal(ordo_lock(b, k2, n, ORDO_MODE_X, 0), 0);
    assert_int_equal(ordo_held(a, k1, n, NULL), 1);
    assert_int_equal(ordo_held(b, k2, n, NULL), 1);
    assert_false(free_for_other(k2));
    assert_int_equal(ordo_unlock_all(a), 1);
    /* k2 held: k1 is free again, and k2 stays b's. */
    assert_true(free_for_other(k1));
    assert_int_equal(ordo_held(b, k2, n, NULL), 1);
    assert_int_equal(ordo_unlock_all(b), 1);
    assert_true(free_for_other(k1) && free_for_other(k2));
  }
  ordo_txn_end(a);
  ordo_txn_end(b);
}

static void test_two_upgraders_block(void **state) {
  (void)state;
  /* Two S holders both asking X wait for each other; with detection off
   * (tests/unit/test_detect.c has it on) their timeouts end it, and each
   * keeps its S. */
  ordo_t *saved = O;
  assert_int_equal(ordo_open(&O, "mem://?detect=off&sweep_ms=0", NULL), 0);
  ordo_txn_t *a = txn(), *b = txn();
  assert_int_equal(ordo_lock(a, "u", 1, ORDO_MODE_S, 0), 0);
  assert_int_equal(ordo_lock(b, "u", 1, ORDO_MODE_S, 0), 0);
  tu_locker ua = {
      .t = a, .reqs = {ORDO_REQ_X("u", 1)}, .n = 1, .timeout_ms = 100};
  tu_locker ub = {
      .t = b, .reqs = {ORDO_REQ_X("u", 1)}, .n = 1, .timeout_ms = 100};
  tu_locker_start(&ua);
  tu_locker_start(&ub);
  assert_int_equal(tu_locker_join(&ua), ORDO_ETIMEDOUT);
  assert_int_equal(tu_locker_join(&ub), ORDO_ETIMEDOUT);
  assert_int_equal(ordo_held(a, "u", 1, NULL), 1);
  ordo_txn_end(a);
  ordo_txn_end(b);
  ordo_close(O);
  O = saved;
}

static void test_lock_bound(void **state) {
  (void)state;
  ordo_t *o;
  assert_int_equal(ordo_open(&o, "mem://?max_locks=100&stripes=4", NULL), 0);
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0);
  uint8_t k[8];
  for (uint64_t i = 0; i < 100; i++) {
    ordo_key_u64(k, i);
    assert_int_equal(ordo_lock(t, k, 8, ORDO_MODE_X, 0), 0);
  }
  ordo_key_u64(k, 100);
  assert_int_equal(ordo_lock(t, k, 8, ORDO_MODE_X, 0), ORDO_ELIMIT);
  /* A set that crosses the bound takes nothing. */
  uint8_t k2[8];
  ordo_key_u64(k2, 5);
  ordo_req_t r[] = {{k, 8, ORDO_MODE_X}, {k2, 8, ORDO_MODE_X}};
  assert_int_equal(ordo_lock_all(t, r, 2, 0), ORDO_ELIMIT);
  assert_int_equal(ordo_held(t, k2, 8, NULL), 1); /* held from before */
  ordo_stats_t s;
  ordo_stats(o, &s);
  assert_true(s.locks <= 100);
  assert_int_equal(s.limits, 2);
  assert_int_equal(ordo_unlock_all(t), 100);
  /* Room again. */
  assert_int_equal(ordo_lock(t, k, 8, ORDO_MODE_X, 0), 0);
  ordo_txn_end(t);
  ordo_close(o);
}

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
  int status;
} async_box;

static void async_done(ordo_txn_t *t, int status, void *arg) {
  (void)t;
  async_box *b = arg;
  pthread_mutex_lock(&b->mu);
  b->calls++;
  b->status = status;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

/* Many async waiters on one key, granted one per release, in order. */
static void test_async_many(void **state) {
  (void)state;
  enum { N = 200 };
  static async_box box[N];
  static ordo_txn_t *ts[N];
  ordo_txn_t *h = txn();
  assert_int_equal(ordo_lock(h, "hot", 3, ORDO_MODE_X, 0), 0);
  ordo_req_t r = ORDO_REQ_X("hot", 3);
  for (int i = 0; i < N; i++) {
    box[i] =
        (async_box){PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 99};
    ts[i] = txn();
    assert_int_equal(
        ordo_lock_all_async(ts[i], &r, 1, 10000, async_done, &box[i]),
        ORDO_PENDING);
  }
  ordo_stats_t s0, s1;
  ordo_stats(O, &s0);
  ordo_unlock_all(h);
  for (int i = 0; i < N; i++) {
    /* The release granted exactly the next one in arrival order. */
    assert_int_equal(box[i].calls, 1);
    assert_int_equal(box[i].status, 0);
    if (i + 1 < N)
      assert_int_equal(box[i + 1].calls, 0);
    ordo_unlock_all(ts[i]);
  }
  ordo_stats(O, &s1);
  assert_int_equal(s1.wakeups - s0.wakeups, N);
  for (int i = 0; i < N; i++)
    ordo_txn_end(ts[i]);
  ordo_txn_end(h);
}

static int retry_body(ordo_txn_t *t, void *arg) {
  int *left = arg;
  /* Take a key, then fail retryably while holding it: ordo_retry must
   * release it before it backs off. */
  int rc = ordo_lock(t, "held", 4, ORDO_MODE_X, 0);
  if (rc)
    return rc;
  if ((*left)-- > 0)
    return ORDO_ETIMEDOUT;
  return 0;
}

static int retry_fatal(ordo_txn_t *t, void *arg) {
  (void)t;
  int *calls = arg;
  (*calls)++;
  return ORDO_EINVAL;
}

static void test_retry(void **state) {
  (void)state;
  ordo_retry_options_t ro;
  ordo_retry_options_init(&ro);
  ro.base_us = 100;
  ro.cap_us = 1000;
  ro.max_attempts = 10;
  /* The ceiling doubles from base and stops at cap. */
  assert_int_equal(ordo_retry_ceiling_us(&ro, 1), 100);
  assert_int_equal(ordo_retry_ceiling_us(&ro, 2), 200);
  assert_int_equal(ordo_retry_ceiling_us(&ro, 4), 800);
  assert_int_equal(ordo_retry_ceiling_us(&ro, 5), 1000);
  assert_int_equal(ordo_retry_ceiling_us(&ro, 60), 1000);

  ordo_txn_t *t = txn();
  int left = 3;
  unsigned attempts = 0;
  ordo_stats_t s0, s1;
  ordo_stats(O, &s0);
  uint64_t t0 = tu_now_ns();
  assert_int_equal(ordo_retry(t, &ro, retry_body, &left, &attempts), 0);
  uint64_t us = (tu_now_ns() - t0) / 1000;
  assert_int_equal(attempts, 4);
  /* Backoff slept at most the ceilings' sum (100+200+400 us), give or take
   * the scheduler: a bound against a backoff that ignores its ceiling, so
   * the slack grows with ORDO_TEST_TIMEOUT_MULT. */
  assert_true(us < 700 + tu_ms(200) * 1000);
  ordo_stats(O, &s1);
  assert_int_equal(s1.retries - s0.retries, 3);
  assert_int_equal(ordo_held(t, "held", 4, NULL), 1);
  ordo_unlock_all(t);

  /* Gives up after max_attempts, holding nothing. */
  left = 100;
  ro.max_attempts = 5;
  assert_int_equal(ordo_retry(t, &ro, retry_body, &left, &attempts),
                   ORDO_ETIMEDOUT);
  assert_int_equal(attempts, 5);
  assert_int_equal(ordo_held(t, "held", 4, NULL), 0);
  /* A non-retryable error is returned at once. */
  int calls = 0;
  assert_int_equal(ordo_retry(t, &ro, retry_fatal, &calls, &attempts),
                   ORDO_EINVAL);
  assert_int_equal(calls, 1);
  ordo_txn_end(t);
}

static void test_stats(void **state) {
  (void)state;
  ordo_txn_t *h = txn(), *t = txn();
  ordo_stats_t s0, s1;
  ordo_stats(O, &s0);
  for (int i = 0; i < 10; i++) {
    assert_int_equal(ordo_lock(t, "s", 1, ORDO_MODE_X, 0), 0);
    ordo_unlock_all(t);
  }
  assert_int_equal(ordo_lock(h, "s", 1, ORDO_MODE_X, 0), 0);
  tu_locker w = {
      .t = t, .reqs = {ORDO_REQ_X("s", 1)}, .n = 1, .timeout_ms = ORDO_FOREVER};
  tu_locker_start(&w);
  assert_true(tu_wait_waiting(O, 1));
  tu_sleep_us(2000); /* so the wait is measurable: at least 2 ms */
  ordo_unlock_all(h);
  assert_int_equal(tu_locker_join(&w), 0);
  ordo_unlock_all(t);
  ordo_stats(O, &s1);
  assert_int_equal(s1.acquired - s0.acquired, 12);
  assert_int_equal(s1.released - s0.released, 12);
  assert_int_equal(s1.waited - s0.waited, 1);
  assert_int_equal(s1.wakeups - s0.wakeups, 1);
  assert_true(s1.max_wait_us >= 2000);
  uint64_t n = 0;
  for (int i = 0; i < ORDO_HIST_BUCKETS; i++)
    n += s1.wait_hist[i];
  assert_int_equal(n, 1);
  assert_true(ordo_hist_quantile(s1.wait_hist, 0.5) >= 2000);
  ordo_txn_end(h);
  ordo_txn_end(t);
}

/*
 * The fast path (src/core/README.md) against eviction and reuse: 4 threads
 * take 2 of 256 keys (1 to 40 bytes, so several size classes) over and
 * over on a table that caches at most 16 empty locks per stripe, so lock
 * objects are evicted into the graveyard and reused for other keys all the
 * time while fast-path walks may be on them. The ways in: lock_all of two,
 * one key then the other (canonical order), a reentrant hold (adopted by
 * the slow path), a fencing token (drawn late), unlock by key. Mutual
 * exclusion is checked with an atomic per key, and a plain counter per key
 * that only a holder writes (ThreadSanitizer reports a race if a hand-over
 * misses its happens-before); tokens of a key must strictly increase.
 */
enum { CH_KEYS = 256, CH_THREADS = 4 };
typedef struct {
  ordo_t *o;
  long iters;
  _Atomic int in[CH_KEYS];
  uint64_t count[CH_KEYS];      /* written by the key's holder only */
  uint64_t last_fence[CH_KEYS]; /* likewise */
  char key[CH_KEYS][40];
  size_t len[CH_KEYS];
  _Atomic long bad, held, errors, victims, done;
  _Atomic int last_error; /* the code (or -1000 - step) of the last one */
} churn_t;

typedef struct {
  churn_t *c;
  int me;
} churn_arg;

static void churn_enter(churn_t *c, int k, int me) {
  if (atomic_exchange(&c->in[k], me) != 0)
    atomic_fetch_add(&c->bad, 1);
  c->count[k]++;
}

static void churn_leave(churn_t *c, int k, int me) {
  if (atomic_exchange(&c->in[k], 0) != me)
    atomic_fetch_add(&c->bad, 1);
  atomic_fetch_add(&c->held, 1);
}

static void *churn_main(void *arg) {
  churn_arg *a = arg;
  churn_t *c = a->c;
  int me = a->me;
  ordo_txn_t *t = NULL;
  if (ordo_txn_begin(c->o, &t, NULL) != 0) {
    atomic_fetch_add(&c->errors, 1);
    return NULL;
  }
  uint64_t x = 0x9E3779B97F4A7C15u * (uint64_t)me;
  for (long i = 0; i < c->iters; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    int ka = (int)(x % CH_KEYS), kb = (int)((x >> 20) % CH_KEYS);
    if (ka == kb)
      kb = (kb + 1) % CH_KEYS;
    if (ordo_key_cmp(c->key[ka], c->len[ka], c->key[kb], c->len[kb]) > 0) {
      int tmp = ka;
      ka = kb;
      kb = tmp;
    }
    ordo_req_t r[2] = {{c->key[ka], c->len[ka], ORDO_MODE_X},
                       {c->key[kb], c->len[kb], ORDO_MODE_X}};
    int kind = (int)((x >> 40) % 8), rc = 0;
    if (kind <= 3) {
      rc = ordo_lock_all(t, r, 2, ORDO_FOREVER);
    } else if (kind <= 5) {
      rc = ordo_lock(t, r[0].key, r[0].len, ORDO_MODE_X, ORDO_FOREVER);
      if (rc == 0)
        rc = ordo_lock(t, r[1].key, r[1].len, ORDO_MODE_X, ORDO_FOREVER);
    } else if (kind == 6) {
      rc = ordo_lock_all(t, r, 2, ORDO_FOREVER);
      if (rc == 0) /* reentrant: the slow path adopts the fast hold */
        rc = ordo_lock(t, r[1].key, r[1].len, ORDO_MODE_X, ORDO_FOREVER);
      if (rc == 0 && ordo_unlock(t, r[1].key, r[1].len) != 0)
        rc = ORDO_EINVAL;
    } else {
      rc = ordo_lock_all(t, r, 2, ORDO_FOREVER);
    }
    if (rc == ORDO_EDEADLK) {
      /* A soft cycle (queue order) that 8 moves did not fix costs a victim
       * (src/detect/README.md, "Resolving a cycle"); it holds nothing now. */
      atomic_fetch_add(&c->victims, 1);
      if (ordo_unlock_all(t) != 0)
        atomic_fetch_add(&c->errors, 1);
      continue;
    }
    if (rc != 0) {
      atomic_fetch_add(&c->errors, 1);
      atomic_store(&c->last_error, rc);
      ordo_unlock_all(t);
      continue;
    }
    churn_enter(c, ka, me);
    churn_enter(c, kb, me);
    atomic_fetch_add(&c->done, 1);
    if (kind == 7) {
      uint64_t tok = 0;
      if (ordo_fence(t, r[0].key, r[0].len, &tok) != 0 ||
          tok <= c->last_fence[ka])
        atomic_fetch_add(&c->bad, 1);
      c->last_fence[ka] = tok;
    }
    if ((x >> 50) % 16 == 0)
      sched_yield();
    churn_leave(c, ka, me);
    churn_leave(c, kb, me);
    if (kind >= 4 && kind <= 5) {
      if ((rc = ordo_unlock(t, r[1].key, r[1].len)) != 0 ||
          (rc = ordo_unlock(t, r[0].key, r[0].len)) != 0) {
        atomic_fetch_add(&c->errors, 1);
        atomic_store(&c->last_error, rc);
      }
    } else if ((rc = ordo_unlock_all(t)) != 2) {
      atomic_fetch_add(&c->errors, 1);
      atomic_store(&c->last_error, -1000 - rc);
    }
  }
  ordo_txn_end(t);
  return NULL;
}

static void test_fast_path_churn(void **state) {
  (void)state;
  static churn_t c;
  memset(&c, 0, sizeof c);
  assert_int_equal(ordo_open(&c.o, "mem://?max_locks=128&stripes=2", NULL), 0);
  tu_watchdog_target(c.o); /* a hang dumps this place's table */
  c.iters = tu_scaled(20000);
  for (int k = 0; k < CH_KEYS; k++) {
    c.len[k] = 1 + (size_t)k % 40;
    for (size_t j = 0; j < c.len[k]; j++)
      c.key[k][j] = (char)('a' + (k * 7 + (int)j) % 26);
    c.key[k][0] = (char)k; /* distinct (and binary) first bytes */
  }
  ordo_stats_t s0, s1;
  ordo_stats(c.o, &s0);
  pthread_t thr[CH_THREADS];
  churn_arg args[CH_THREADS];
  for (int i = 0; i < CH_THREADS; i++) {
    args[i] = (churn_arg){&c, i + 1};
    assert_int_equal(pthread_create(&thr[i], NULL, churn_main, &args[i]), 0);
  }
  for (int i = 0; i < CH_THREADS; i++)
    pthread_join(thr[i], NULL);
  ordo_stats(c.o, &s1);
  if (atomic_load(&c.errors))
    print_message("churn: %ld errors, the last %d (%s)\n",
                  atomic_load(&c.errors), atomic_load(&c.last_error),
                  ordo_strerror(atomic_load(&c.last_error)));
  assert_int_equal(atomic_load(&c.errors), 0);
  assert_int_equal(atomic_load(&c.bad), 0);
  uint64_t sum = 0;
  for (int k = 0; k < CH_KEYS; k++)
    sum += c.count[k];
  long victims = atomic_load(&c.victims), done = atomic_load(&c.done);
  assert_true(victims * 100 < CH_THREADS * c.iters); /* rare */
  assert_int_equal(done + victims, CH_THREADS * c.iters);
  assert_int_equal(sum, (uint64_t)(2 * done));
  assert_int_equal(atomic_load(&c.held), (long)sum);
  /* Every key taken was released and counted; so was the one key a
   * victim may have held (kinds 4 and 5) without entering it. */
  uint64_t released = s1.released - s0.released;
  if (released < sum || released > sum + (uint64_t)victims)
    print_message("churn: %lu keys released, %lu entered, %ld victims\n",
                  (unsigned long)released, (unsigned long)sum, victims);
  assert_true(released >= sum && released <= sum + (uint64_t)victims);
  assert_true(s1.locks <= 128);
  assert_int_equal(s1.waiting, 0);
  tu_watchdog_target(O);
  ordo_close(c.o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_errors_and_urls, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reentrancy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reentrant_past_starving_waiter,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_two_upgraders_block, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_lock_bound, setup, teardown),
      cmocka_unit_test_setup_teardown(test_async_many, setup, teardown),
      cmocka_unit_test_setup_teardown(test_retry, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fast_path_churn, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fast_path_hash_collision, setup,
                                      teardown),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
