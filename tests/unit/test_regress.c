/*
 * test_regress.c -- the engine's defects that a hostile review found, one
 * case each, every one failing on the code before its fix: a txn mixing
 * blocking and async calls (a poked async request), false deadlocks from
 * soft edges on a key the waiter already holds, a soft cycle that the
 * reorder gave up on (and aborted a txn that held nothing), a use after
 * free when a txn ends while its async grant is delivered, a reorder that
 * overtook waiters off the cycle, timeouts that overflowed, hold counts
 * that wrapped. Every case runs under a watchdog that dumps the lock table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"
#include <limits.h>
#include "core/table.h"
#include "core/table_int.h"

#include <inttypes.h>
#include <sched.h>
#include <string.h>

static ordo_t *O;

/* A long starvation bound: no waiter here starves by accident, so every
 * wake-up of a thread's waiter is a poke and every async one a hand-over,
 * whatever the machine's speed. */
static int setup(void **state) {
  (void)state;
  if (ordo_open(&O, "mem://?starvation_us=60000000&starvation_holds=0", NULL) !=
      0)
    return -1;
  tu_watchdog_start(O, 30, "test_regress case");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tu_watchdog_stop();
  ordo_stats_t s;
  ordo_stats(O, &s);
  assert_int_equal(s.waiting, 0);
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

static bool free_for_other(const char *key) {
  ordo_txn_t *o = txn();
  int rc = ordo_lock(o, key, strlen(key), ORDO_MODE_X, 0);
  ordo_txn_end(o);
  return rc == 0;
}

static uint64_t deadlocks(void) {
  ordo_stats_t s;
  ordo_stats(O, &s);
  return s.deadlocks;
}

/* ---- An async callback's box -------------------------------------------- */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls, status, order;
  ordo_txn_t *unlock; /* unlock_all this txn inside the callback */
  _Atomic int *seq;   /* the order of grants, shared by several boxes */
} box_t;

#define BOX_INIT                                                               \
  { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 99, 0, NULL, NULL }

static void box_cb(ordo_txn_t *t, int status, void *arg) {
  (void)t;
  box_t *b = arg;
  /* Never under an engine mutex: this takes the table's wait_mu, which
   * would hang a callback that runs under it. */
  ordo_deadlocks(O, NULL, 0);
  if (b->unlock && status == 0)
    ordo_unlock_all(b->unlock); /* the docs allow it */
  pthread_mutex_lock(&b->mu);
  b->calls++;
  b->status = status;
  if (b->seq)
    b->order = atomic_fetch_add(b->seq, 1) + 1;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

/* The number of calls once there is one (or after 5 s times the factor). */
static int box_wait(box_t *b) {
  uint64_t end = tu_now_ns() + tu_ms(5000) * 1000000u;
  pthread_mutex_lock(&b->mu);
  while (b->calls == 0 && tu_now_ns() < end) {
    pthread_mutex_unlock(&b->mu);
    tu_sleep_us(200);
    pthread_mutex_lock(&b->mu);
  }
  int calls = b->calls;
  pthread_mutex_unlock(&b->mu);
  return calls;
}

/* ---- 1. One txn mixing blocking and async calls --------------------------
 * A blocking call's slow path marked the txn pokeable for good, even when
 * its grant came at once; the txn's next async request was then poked
 * (its callback saw ORDO_PENDING, under wait_mu, and fired twice) instead
 * of being handed its keys. */
static void test_mixed_blocking_then_async(void **state) {
  (void)state;
  ordo_txn_t *t = txn(), *h = txn();
  /* A key with no lock object yet: the blocking call takes the slow path,
   * and is granted at once. */
  assert_int_equal(ordo_lock(t, "fresh", 5, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_unlock_all(t), 1);
  assert_int_equal(ordo_lock(h, "q", 1, ORDO_MODE_X, 0), 0);
  box_t b = BOX_INIT;
  b.unlock = t;
  ordo_req_t r[] = {ORDO_REQ_X("p", 1), ORDO_REQ_X("q", 1)};
  assert_int_equal(ordo_lock_all_async(t, r, 2, 10000, box_cb, &b),
                   ORDO_PENDING);
  assert_int_equal(ordo_unlock_all(h), 1); /* hands t its keys */
  assert_int_equal(box_wait(&b), 1);
  assert_int_equal(b.status, 0);
  /* The callback let them go again; nothing is left queued. */
  assert_true(free_for_other("p"));
  assert_true(free_for_other("q"));
  /* And once more the other way round: async, then blocking. */
  assert_int_equal(ordo_lock(h, "q", 1, ORDO_MODE_X, 0), 0);
  box_t b2 = BOX_INIT;
  assert_int_equal(ordo_lock_all_async(t, r, 2, 10000, box_cb, &b2),
                   ORDO_PENDING);
  assert_int_equal(ordo_unlock_all(h), 1);
  assert_int_equal(box_wait(&b2), 1);
  assert_int_equal(b2.status, 0);
  assert_int_equal(ordo_unlock_all(t), 2);
  assert_int_equal(ordo_lock(t, "q", 1, ORDO_MODE_X, 1000), 0);
  ordo_txn_end(t);
  ordo_txn_end(h);
  assert_int_equal(b.calls, 1);
  assert_int_equal(b2.calls, 1);
}

/* ---- 2. No soft edge from a key the waiter already holds ----------------
 * w holds k; n txns queue for k; w asks {k, m} while h holds m. w waits for
 * h alone: the grant rule never makes it wait for those queued on a key it
 * holds in a covering mode, so the detector must not see w -> q either. */
typedef struct {
  ordo_txn_t *t;
  ordo_req_t r[2];
  size_t n;
  bool keep; /* keep what it took (else let all of the txn's holds go) */
  int rc;
  pthread_t thr;
} job_t;

static void *job_main(void *arg) {
  job_t *j = arg;
  j->rc = ordo_lock_all(j->t, j->r, j->n, ORDO_FOREVER);
  if (j->rc == 0 && !j->keep)
    ordo_unlock_all(j->t);
  return NULL;
}

static void job_start(job_t *j, ordo_txn_t *t, const char *k1, const char *k2) {
  j->t = t;
  j->n = k2 ? 2 : 1;
  j->r[0] = (ordo_req_t){k1, strlen(k1), ORDO_MODE_X};
  if (k2)
    j->r[1] = (ordo_req_t){k2, strlen(k2), ORDO_MODE_X};
  j->keep = false;
  j->rc = 99;
  pthread_create(&j->thr, NULL, job_main, j);
}

static void test_no_soft_edge_from_held_key(void **state) {
  (void)state;
  enum { N = 20 };
  ordo_txn_t *w = txn(), *h = txn();
  assert_int_equal(ordo_lock(w, "k", 1, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_lock(h, "m", 1, ORDO_MODE_X, 0), 0);
  static job_t q[N];
  for (int i = 0; i < N; i++) {
    job_start(&q[i], txn(), "k", NULL);
    assert_true(tu_wait_waiting(O, (uint64_t)i + 1));
  }
  /* w asks k again (reentrant) and m, one request. */
  job_t jw;
  jw.t = w;
  jw.n = 2;
  jw.r[0] = (ordo_req_t)ORDO_REQ_X("k", 1);
  jw.r[1] = (ordo_req_t)ORDO_REQ_X("m", 1);
  jw.keep = false;
  jw.rc = 99;
  pthread_create(&jw.thr, NULL, job_main, &jw);
  assert_true(tu_wait_waiting(O, N + 1));
  assert_int_equal(deadlocks(), 0); /* there is no cycle */
  assert_int_equal(ordo_unlock_all(h), 1);
  pthread_join(jw.thr, NULL);
  assert_int_equal(jw.rc, 0); /* and job_main let k and m go */
  for (int i = 0; i < N; i++) {
    pthread_join(q[i].thr, NULL);
    assert_int_equal(q[i].rc, 0);
    ordo_txn_end(q[i].t);
  }
  assert_int_equal(deadlocks(), 0);
  ordo_txn_end(w);
  ordo_txn_end(h);
}

/* ---- 3. A soft cycle that an order fixes, and nothing-holders spared -----
 * H holds k, W holds j, A and B each ask {j, k}, then W asks k. W waits
 * behind A and B on k (soft), A and B wait for W's j (hard). W moved ahead
 * of them on k fixes it: no victim. The old reorder moved one soft edge at
 * a time (B before A, then A before B, ...), gave up after 8 and aborted B,
 * which held nothing. */
static void test_soft_cycle_reordered(void **state) {
  (void)state;
  ordo_txn_t *H = txn(), *W = txn(), *A = txn(), *B = txn();
  assert_int_equal(ordo_lock(H, "k", 1, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_lock(W, "j", 1, ORDO_MODE_X, 0), 0);
  job_t ja, jb, jw;
  job_start(&ja, A, "j", "k");
  assert_true(tu_wait_waiting(O, 1));
  job_start(&jb, B, "j", "k");
  assert_true(tu_wait_waiting(O, 2));
  job_start(&jw, W, "k", NULL);
  assert_true(tu_wait_waiting(O, 3));
  assert_int_equal(deadlocks(), 0);
  assert_int_equal(ordo_txn_aborts(B), 0);
  assert_int_equal(ordo_txn_aborts(A), 0);
  assert_int_equal(ordo_unlock_all(H), 1);
  pthread_join(jw.thr, NULL);
  assert_int_equal(jw.rc, 0);
  /* W's job let k go and j, held from before, with it. */
  assert_int_equal(ordo_unlock_all(W), 0);
  pthread_join(ja.thr, NULL);
  pthread_join(jb.thr, NULL);
  assert_int_equal(ja.rc, 0);
  assert_int_equal(jb.rc, 0);
  assert_int_equal(deadlocks(), 0);
  ordo_txn_end(H);
  ordo_txn_end(W);
  ordo_txn_end(A);
  ordo_txn_end(B);
}

/* A txn that holds nothing is never a victim: moving it behind the others
 * breaks its cycles. Here T holds nothing and asks {a, b}; U holds a and
 * asks b... behind T (soft), while T waits for U's a (hard). Whatever the
 * policy, T is not aborted, and neither is U: T moves behind U on b. */
static void test_nothing_holder_never_victim(void **state) {
  (void)state;
  static const ordo_victim_t policies[] = {ORDO_VICTIM_YOUNGEST,
                                           ORDO_VICTIM_OLDEST,
                                           ORDO_VICTIM_FEWEST_LOCKS,
                                           ORDO_VICTIM_LEAST_WORK,
                                           ORDO_VICTIM_NEAREST_DEADLINE,
                                           ORDO_VICTIM_LOWEST_PRIORITY,
                                           ORDO_VICTIM_RANDOM};
  for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
    ordo_options_t opts;
    ordo_options_init(&opts);
    opts.starvation_us = 60000000;
    opts.starvation_holds = 0;
    opts.victim = policies[p];
    ordo_t *o = NULL;
    assert_int_equal(ordo_open(&o, "mem://", &opts), 0);
    ordo_t *saved = O;
    O = o;
    tu_watchdog_target(o);
    /* T is the younger and has the lower priority: every policy but
     * OLDEST would pick it from a cycle of two, and FEWEST_LOCKS above
     * all. */
    ordo_txn_options_t lo = {-5, "T", 0};
    ordo_txn_t *G = txn(), *U = txn(), *T = NULL;
    assert_int_equal(ordo_txn_begin(o, &T, &lo), 0);
    assert_int_equal(ordo_lock(G, "b", 1, ORDO_MODE_X, 0), 0);
    assert_int_equal(ordo_lock(U, "a", 1, ORDO_MODE_X, 0), 0);
    job_t jt, ju;
    job_start(&jt, T, "a", "b"); /* queued on a (U holds) and b (G) */
    assert_true(tu_wait_waiting(o, 1));
    job_start(&ju, U, "b", NULL); /* behind T on b: the cycle closes */
    assert_true(tu_wait_waiting(o, 2));
    ordo_stats_t s;
    ordo_stats(o, &s);
    assert_int_equal(s.deadlocks, 0);
    assert_int_equal(ordo_txn_aborts(T), 0);
    assert_int_equal(ordo_unlock_all(G), 1);
    pthread_join(ju.thr, NULL);
    /* U got b first (T had moved behind it) and let a and b go. */
    assert_int_equal(ju.rc, 0);
    assert_int_equal(ordo_unlock_all(U), 0);
    pthread_join(jt.thr, NULL);
    assert_int_equal(jt.rc, 0);
    ordo_stats(o, &s);
    assert_int_equal(s.deadlocks, 0);
    ordo_txn_end(T);
    ordo_txn_end(U);
    ordo_txn_end(G);
    O = saved;
    tu_watchdog_target(O);
    ordo_close(o);
  }
}

/* ---- 4. A txn ended while its async grant is being delivered ------------
 * The grant is made on one thread (a release) while another ends the txn:
 * ordo_txn_end must not free what the grant's delivery still reads, and
 * once it returns, the callback has run exactly once. */
static struct {
  pthread_barrier_t go, done;
  ordo_txn_t *h;
  _Atomic bool stop;
} g_race;

/* A thread that only burns CPU: with more runnable threads than CPUs, the
 * releaser is preempted now and then between its grant and the grant's
 * delivery, which is the window this case is about. */
static void *race_noise(void *arg) {
  (void)arg;
  while (!atomic_load_explicit(&g_race.stop, memory_order_relaxed))
    ;
  return NULL;
}

static void *race_releaser(void *arg) {
  (void)arg;
  for (;;) {
    pthread_barrier_wait(&g_race.go);
    if (atomic_load(&g_race.stop))
      return NULL;
    ordo_unlock_all(g_race.h); /* grants the async waiter */
    pthread_barrier_wait(&g_race.done);
  }
}

typedef struct {
  _Atomic int calls;
  _Atomic int status;
} race_box;

static void race_cb(ordo_txn_t *t, int status, void *arg) {
  (void)t;
  race_box *b = arg;
  atomic_store(&b->status, status);
  atomic_fetch_add(&b->calls, 1);
}

static void test_txn_end_during_async_grant(void **state) {
  (void)state;
  long rounds = tu_scaled(200000);
  pthread_barrier_init(&g_race.go, NULL, 2);
  pthread_barrier_init(&g_race.done, NULL, 2);
  g_race.h = txn();
  atomic_store(&g_race.stop, false);
  pthread_t thr, noise[2];
  pthread_create(&thr, NULL, race_releaser, NULL);
  for (int i = 0; i < 2; i++)
    pthread_create(&noise[i], NULL, race_noise, NULL);
  ordo_req_t r = ORDO_REQ_X("race", 4);
  long bad = 0, granted = 0, canceled = 0;
  for (long i = 0; i < rounds; i++) {
    if (ordo_lock_all(g_race.h, &r, 1, 0) != 0)
      abort();
    ordo_txn_t *t = txn();
    race_box b = {0, 99};
    if (ordo_lock_all_async(t, &r, 1, 60000, race_cb, &b) != ORDO_PENDING)
      abort();
    pthread_barrier_wait(&g_race.go);
    ordo_txn_end(t); /* races the grant */
    /* Returned: the callback has run, once. */
    if (atomic_load(&b.calls) != 1)
      bad++;
    else if (atomic_load(&b.status) == 0)
      granted++;
    else if (atomic_load(&b.status) == ORDO_ECANCELED)
      canceled++;
    else
      bad++;
    pthread_barrier_wait(&g_race.done);
  }
  atomic_store(&g_race.stop, true);
  pthread_barrier_wait(&g_race.go);
  pthread_join(thr, NULL);
  for (int i = 0; i < 2; i++)
    pthread_join(noise[i], NULL);
  print_message("%ld rounds: %ld granted first, %ld cancelled first\n", rounds,
                granted, canceled);
  assert_int_equal(bad, 0);
  ordo_txn_end(g_race.h);
  pthread_barrier_destroy(&g_race.go);
  pthread_barrier_destroy(&g_race.done);
}

/* The same contract seen from inside: a callback may end its own txn; the
 * txn is freed once the callback returns (ASan checks that nothing reads
 * it after, and that nothing leaks). */
static void end_in_cb(ordo_txn_t *t, int status, void *arg) {
  race_box *b = arg;
  atomic_store(&b->status, status);
  ordo_txn_end(t);
  atomic_fetch_add(&b->calls, 1);
}

static void test_txn_end_inside_callback(void **state) {
  (void)state;
  ordo_txn_t *h = txn();
  ordo_req_t r[] = {ORDO_REQ_X("e1", 2), ORDO_REQ_X("e2", 2)};
  for (int i = 0; i < 50; i++) {
    assert_int_equal(ordo_lock(h, "e2", 2, ORDO_MODE_X, 0), 0);
    ordo_txn_t *t = txn();
    race_box b = {0, 99};
    assert_int_equal(ordo_lock_all_async(t, r, 2, 60000, end_in_cb, &b),
                     ORDO_PENDING);
    assert_int_equal(ordo_unlock_all(h),
                     1); /* grants t: its callback ends it */
    assert_int_equal(atomic_load(&b.calls), 1);
    assert_int_equal(atomic_load(&b.status), 0);
    /* Ended with the grant in hand: both keys are free again. */
    assert_true(free_for_other("e1"));
    assert_true(free_for_other("e2"));
  }
  /* And a time-out delivered by the timer thread. */
  assert_int_equal(ordo_lock(h, "e2", 2, ORDO_MODE_X, 0), 0);
  ordo_txn_t *t = txn();
  race_box b = {0, 99};
  assert_int_equal(ordo_lock_all_async(t, r, 2, 5, end_in_cb, &b),
                   ORDO_PENDING);
  uint64_t end = tu_now_ns() + tu_ms(5000) * 1000000u;
  while (atomic_load(&b.calls) == 0 && tu_now_ns() < end)
    tu_sleep_us(500);
  assert_int_equal(atomic_load(&b.calls), 1);
  assert_int_equal(atomic_load(&b.status), ORDO_ETIMEDOUT);
  ordo_txn_end(h);
}

/* ---- 5. A reorder overtakes only members of the cycle ----------------------
 * l's queue is [B(S), X(S), A(X)]: A (holding a) waits behind B on l, and B
 * waits for A's a; X, off the cycle, waits for l alone (and not for B: both
 * ask S). The fix puts A before B by moving B behind A, not A in front of
 * B: X keeps its place, so when l's holder lets go, X is first. (The old
 * reorder put A at the head, past X.) Async waiters: each release hands
 * over in queue order. */
static void test_reorder_keeps_others_place(void **state) {
  (void)state;
  ordo_txn_t *H = txn(), *A = txn(), *B = txn(), *X = txn();
  assert_int_equal(ordo_lock(H, "l", 1, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_lock(A, "a", 1, ORDO_MODE_X, 0), 0);
  _Atomic int seq = 0;
  box_t bb = BOX_INIT, bx = BOX_INIT, ba = BOX_INIT;
  bb.seq = bx.seq = ba.seq = &seq;
  ordo_req_t rb[] = {ORDO_REQ_X("a", 1), ORDO_REQ_S("l", 1)};
  ordo_req_t rs = ORDO_REQ_S("l", 1), rx = ORDO_REQ_X("l", 1);
  assert_int_equal(ordo_lock_all_async(B, rb, 2, 60000, box_cb, &bb),
                   ORDO_PENDING);
  assert_int_equal(ordo_lock_all_async(X, &rs, 1, 60000, box_cb, &bx),
                   ORDO_PENDING);
  assert_int_equal(ordo_lock_all_async(A, &rx, 1, 60000, box_cb, &ba),
                   ORDO_PENDING);
  assert_int_equal(deadlocks(), 0); /* the soft cycle was reordered */
  ordo_stats_t s;
  ordo_stats(O, &s);
  assert_true(s.reorders >= 1);
  assert_int_equal(ordo_unlock_all(H), 1);
  assert_int_equal(box_wait(&bx), 1);
  assert_int_equal(bx.status, 0);
  assert_int_equal(bx.order, 1); /* X first: nobody overtook it */
  assert_int_equal(ba.calls, 0);
  assert_int_equal(ordo_unlock_all(X), 1);
  assert_int_equal(box_wait(&ba), 1);
  assert_int_equal(ba.order, 2);
  assert_int_equal(ordo_unlock_all(A), 2);
  assert_int_equal(box_wait(&bb), 1);
  assert_int_equal(bb.order, 3);
  assert_int_equal(bb.status, 0);
  assert_int_equal(deadlocks(), 0);
  ordo_txn_end(B);
  ordo_txn_end(A);
  ordo_txn_end(X);
  ordo_txn_end(H);
}

/* ---- 6. Timeouts at their bounds -----------------------------------------
 * Every call that takes milliseconds, at -1, 0, 1, INT32_MAX and INT64_MAX
 * (LONG_MAX here): -1 and the two huge ones wait (a huge one used to
 * overflow into a deadline in the past), 0 tries once, 1 waits about 1 ms.
 * A waiting call is ended by a release. */
typedef struct {
  int which; /* 0 lock_all, 1 lock, 2 lock_all_at, 3 lock_at, 4 async */
  long timeout;
  ordo_txn_t *t;
  int rc;
  _Atomic int done;
  box_t box;
  pthread_t thr;
} tcall;

static int call_with(tcall *c) {
  ordo_req_t r[] = {ORDO_REQ_X("tk", 2), ORDO_REQ_X("tk2", 3)};
  switch (c->which) {
  case 0:
    return ordo_lock_all(c->t, r, 2, c->timeout);
  case 1:
    return ordo_lock(c->t, "tk", 2, ORDO_MODE_X, c->timeout);
  case 2:
    return ordo_lock_all_at(c->t, r, 2, c->timeout, __FILE__, __LINE__);
  case 3:
    return ordo_lock_at(c->t, "tk", 2, ORDO_MODE_X, c->timeout, __FILE__,
                        __LINE__);
  default: {
    int rc = ordo_lock_all_async(c->t, r, 2, c->timeout, box_cb, &c->box);
    if (rc != ORDO_PENDING)
      return rc;
    box_wait(&c->box); /* bounded; the case checks the call count */
    return c->box.calls ? c->box.status : ORDO_PENDING;
  }
  }
}

static void *tcall_main(void *arg) {
  tcall *c = arg;
  c->rc = call_with(c);
  atomic_store(&c->done, 1);
  return NULL;
}

static void test_timeout_bounds(void **state) {
  (void)state;
  static const long timeouts[] = {-1, 0, 1, INT32_MAX, LONG_MAX};
  for (int which = 0; which < 5; which++) {
    for (size_t i = 0; i < sizeof timeouts / sizeof timeouts[0]; i++) {
      long tmo = timeouts[i];
      ordo_txn_t *h = txn();
      assert_int_equal(ordo_lock(h, "tk", 2, ORDO_MODE_X, 0), 0);
      tcall c = {which, tmo, txn(), 99, 0, BOX_INIT, 0};
      uint64_t t0 = tu_now_ns();
      if (tmo == 0 || tmo == 1) {
        /* Ends by itself, soon, holding nothing. */
        int rc = call_with(&c);
        uint64_t ms = (tu_now_ns() - t0) / 1000000u;
        if (rc != ORDO_ETIMEDOUT)
          fail_msg("call %d, timeout %ld: %s", which, tmo, ordo_err_name(rc));
        assert_true(ms >= (uint64_t)tmo);
        assert_true(ms < tu_ms(2000)); /* a bound against a hang */
        assert_int_equal(ordo_held(c.t, "tk2", 3, NULL), 0);
      } else {
        /* Waits: queued, still waiting, then granted by the release. */
        pthread_create(&c.thr, NULL, tcall_main, &c);
        assert_true(tu_wait_waiting(O, 1));
        /* Still waiting long after an at-once time-out would have ended
         * it: a lower bound, so the sleep is the thing measured. */
        tu_sleep_us(20000);
        if (atomic_load(&c.done))
          fail_msg("call %d, timeout %ld ended at once: %s", which, tmo,
                   ordo_err_name(c.rc));
        assert_int_equal(ordo_unlock_all(h), 1);
        pthread_join(c.thr, NULL);
        if (c.rc != 0)
          fail_msg("call %d, timeout %ld: %s", which, tmo, ordo_err_name(c.rc));
        assert_int_equal(ordo_held(c.t, "tk", 2, NULL), 1);
      }
      ordo_txn_end(c.t);
      ordo_txn_end(h);
    }
  }
}

/* The Banker's pool takes milliseconds too. */
typedef struct {
  ordo_pool_t *p;
  ordo_txn_t *b;
  long tmo;
  int rc;
  _Atomic int done;
} pool_wait;

static void *pool_waiter(void *arg) {
  pool_wait *w = arg;
  w->rc = ordo_pool_acquire(w->p, w->b, 1, w->tmo);
  atomic_store(&w->done, 1);
  return NULL;
}

static void test_pool_timeout_bounds(void **state) {
  (void)state;
  static const long timeouts[] = {-1, 0, 1, INT32_MAX, LONG_MAX};
  for (size_t i = 0; i < sizeof timeouts / sizeof timeouts[0]; i++) {
    ordo_pool_t *p = NULL;
    assert_int_equal(ordo_pool_create(&p, 1), 0);
    ordo_txn_t *a = txn(), *b = txn();
    assert_int_equal(ordo_pool_declare(p, a, 1), 0);
    assert_int_equal(ordo_pool_declare(p, b, 1), 0);
    assert_int_equal(ordo_pool_acquire(p, a, 1, 0), 0);
    long tmo = timeouts[i];
    if (tmo == 0 || tmo == 1) {
      uint64_t t0 = tu_now_ns();
      assert_int_equal(ordo_pool_acquire(p, b, 1, tmo), ORDO_ETIMEDOUT);
      uint64_t ms = (tu_now_ns() - t0) / 1000000u;
      assert_true(ms >= (uint64_t)tmo && ms < tu_ms(2000));
    } else {
      /* Still waiting long after an at-once time-out would have ended
       * it (a lower bound, so the sleep is the thing measured); then a
       * release grants it. */
      pool_wait w = {p, b, tmo, 99, 0};
      pthread_t thr;
      pthread_create(&thr, NULL, pool_waiter, &w);
      tu_sleep_us(50000);
      if (atomic_load(&w.done))
        fail_msg("pool acquire, timeout %ld ended at once: %s", tmo,
                 ordo_err_name(w.rc));
      assert_int_equal(ordo_pool_release(p, a, 1), 0);
      pthread_join(thr, NULL);
      assert_int_equal(w.rc, 0);
      assert_int_equal(ordo_pool_release(p, b, 1), 0);
    }
    ordo_pool_leave(p, a);
    ordo_pool_leave(p, b);
    ordo_txn_end(a);
    ordo_txn_end(b);
    ordo_pool_destroy(p);
  }
}

/* ---- 7. Hold counts do not wrap ------------------------------------------
 * A hold's count is refused past ORDO__HOLD_MAX (ordo_held returns an int:
 * a count past INT32_MAX read as a negative "error"). Counting to it takes
 * 2^31 re-locks, so the case sets the count near it through the engine's
 * own structures, as a re-lock loop would leave it. */
static void test_hold_count_limit(void **state) {
  (void)state;
  ordo_options_t opts;
  ordo_options_init(&opts);
  ordo__table *tab = NULL;
  assert_int_equal(ordo__table_create(&tab, &opts), 0);
  ordo__owner w;
  ordo__owner_init(tab, &w, 1, 0);
  ordo_req_t r = ORDO_REQ_X("cnt", 3);
  assert_int_equal(ordo__acquire(&w, &r, 1, 0, ORDO__WAIT_EVENT, NULL, NULL),
                   0);
  assert_non_null(TAILQ_FIRST(&w.holds));
  TAILQ_FIRST(&w.holds)->count = ORDO__HOLD_MAX - 1;
  assert_int_equal(ordo__acquire(&w, &r, 1, 0, ORDO__WAIT_EVENT, NULL, NULL),
                   0);
  assert_int_equal(ordo__held(&w, "cnt", 3, NULL, NULL), ORDO__HOLD_MAX);
  /* One more is refused, and the hold is as it was. */
  assert_int_equal(ordo__acquire(&w, &r, 1, 0, ORDO__WAIT_EVENT, NULL, NULL),
                   ORDO_ELIMIT);
  assert_int_equal(ordo__held(&w, "cnt", 3, NULL, NULL), ORDO__HOLD_MAX);
  /* A set with that key is refused whole: the other key is not taken. */
  ordo_req_t two[] = {ORDO_REQ_X("cnt", 3), ORDO_REQ_X("cnu", 3)};
  assert_int_equal(ordo__acquire(&w, two, 2, 0, ORDO__WAIT_EVENT, NULL, NULL),
                   ORDO_ELIMIT);
  assert_int_equal(ordo__held(&w, "cnu", 3, NULL, NULL), 0);
  assert_int_equal(ordo__release_one(&w, "cnt", 3), 0);
  assert_int_equal(ordo__held(&w, "cnt", 3, NULL, NULL), ORDO__HOLD_MAX - 1);
  ordo__owner_fini(&w);
  ordo__table_destroy(tab);
}

/* An idle lock object kept for reuse shares its holder list's word with
 * the empty list's link: asking whether a txn holds such a key, or
 * releasing it, must not read that word as holders. Many idle keys, then
 * each asked about and released. */
static void test_idle_lock_not_read_as_held(void **state) {
  (void)state;
  ordo_txn_t *t = txn(), *u = txn();
  char key[16];
  for (int i = 0; i < 200; i++) {
    int n = snprintf(key, sizeof key, "idle%d", i);
    assert_int_equal(ordo_lock(t, key, (size_t)n, ORDO_MODE_S, 0), 0);
    assert_int_equal(ordo_unlock(t, key, (size_t)n), 0);
  }
  for (int i = 0; i < 200; i++) {
    int n = snprintf(key, sizeof key, "idle%d", i);
    assert_int_equal(ordo_held(u, key, (size_t)n, NULL), 0);
    assert_int_equal(ordo_held(t, key, (size_t)n, NULL), 0);
    assert_int_equal(ordo_unlock(t, key, (size_t)n), ORDO_ENOTHELD);
  }
  ordo_txn_end(t);
  ordo_txn_end(u);
}

/* Lock objects of short keys come from the stripe's slab, in steps of 8
 * bytes, and long keys' from malloc; an evicted one is reused only for a
 * key it has room for. Keys of every length on both sides of the slab's
 * bound, held together in one stripe while the previous round's are
 * evicted and their objects reused (in the other order each round): a
 * held key whose object overlapped another's would break that one's links
 * or bytes, so every held key must still be found, whole, and listed with
 * its own bytes. */
enum { SLAB_TEST_LENS = 260 };
typedef struct {
  unsigned char (*keys)[SLAB_TEST_LENS];
  size_t seen;
} slab_check;

static void slab_check_hold(void *arg, const void *key, size_t len,
                            ordo_mode_t mode, uint64_t fence, unsigned count) {
  slab_check *c = arg;
  (void)mode;
  (void)fence;
  assert_int_equal(count, 1);
  assert_true(len >= 1 && len <= SLAB_TEST_LENS);
  assert_memory_equal(key, c->keys[len - 1], len);
  c->seen++;
}

static void test_lock_objects_slab_and_malloc(void **state) {
  (void)state;
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.stripes = 1;
  opts.max_locks = 2 * SLAB_TEST_LENS; /* a quarter cached: the rest reused */
  ordo__table *tab = NULL;
  assert_int_equal(ordo__table_create(&tab, &opts), 0);
  ordo__owner w;
  ordo__owner_init(tab, &w, 1, 0);
  /* keys[len - 1] is the key of len bytes. */
  static unsigned char keys[SLAB_TEST_LENS][SLAB_TEST_LENS];
  for (int round = 0; round < 8; round++) {
    for (size_t k = 0; k < SLAB_TEST_LENS; k++) {
      size_t len = round % 2 ? SLAB_TEST_LENS - k : k + 1;
      /* A key of its own per round and length, every byte of it set. */
      for (size_t b = 0; b < len; b++)
        keys[len - 1][b] = (unsigned char)(round * 37 + len * 11 + b);
      ordo_req_t r = {keys[len - 1], len, ORDO_MODE_X};
      assert_int_equal(
          ordo__acquire(&w, &r, 1, 0, ORDO__WAIT_EVENT, NULL, NULL), 0);
    }
    for (size_t len = 1; len <= SLAB_TEST_LENS; len++) {
      unsigned char *key = keys[len - 1];
      assert_int_equal(ordo__held(&w, key, len, NULL, NULL), 1);
      /* The last byte counts: a key that differs only there is not held. */
      key[len - 1] ^= 0x80;
      assert_int_equal(ordo__held(&w, key, len, NULL, NULL), 0);
      key[len - 1] ^= 0x80;
    }
    slab_check c = {keys, 0};
    ordo__owner_each_hold(&w, slab_check_hold, &c);
    assert_int_equal(c.seen, SLAB_TEST_LENS);
    for (size_t len = 1; len <= SLAB_TEST_LENS; len++)
      assert_int_equal(ordo__release_one(&w, keys[len - 1], len), 0);
  }
  ordo__owner_fini(&w);
  ordo__table_destroy(tab);
}

/* The documented no-ops, and the engine's face that the lock server uses
 * instead of mem.c: a mem:// place and txn name their table and owner, and
 * a txn takes a new priority only while it holds nothing. */
static void test_engine_face(void **state) {
  (void)state;
  ordo_close(NULL);
  ordo_txn_end(NULL);
  assert_non_null(ordo__engine_table(O));
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  ordo__owner *w = ordo__engine_owner(t);
  assert_non_null(w);
  assert_true(w->tab == ordo__engine_table(O));
  assert_int_equal(ordo__txn_set_priority(t, 7), 0);
  assert_int_equal(t->priority, 7);
  assert_int_equal(w->priority, 7);
  assert_int_equal(ordo_lock(t, "face", 4, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo__owner_nholds(w), 1);
  assert_int_equal(ordo__txn_set_priority(t, 9), ORDO_EBUSY);
  assert_int_equal(t->priority, 7);
  assert_int_equal(ordo_unlock_all(t), 1);
  assert_int_equal(ordo__txn_set_priority(t, 9), 0);
  assert_int_equal(w->priority, 9);
  ordo_txn_end(t);
}

static _Atomic int pin_status = 1;
static void pin_event(ordo__owner *w, int status, void *arg) {
  (void)w;
  (void)arg;
  atomic_store(&pin_status, status);
}

/* A pinned wait outlives its deadline until the pin ends; unpinned, a
 * deadline already past ends it at once (the timer re-keys it both ways).
 * The distributed deadlock check pins the waits of a cycle it confirms. */
static void test_pin_holds_deadline(void **state) {
  (void)state;
  ordo_options_t opts;
  ordo_options_init(&opts);
  ordo__table *tab = NULL;
  assert_int_equal(ordo__table_create(&tab, &opts), 0);
  ordo__owner a, b;
  ordo__owner_init(tab, &a, 1, 0);
  ordo__owner_init(tab, &b, 2, 0);
  ordo_req_t r = ORDO_REQ_X("pin", 3);
  assert_int_equal(ordo__acquire(&a, &r, 1, 0, ORDO__WAIT_EVENT, NULL, NULL),
                   0);
  assert_int_equal(ordo__owner_pin(&b, 1), ORDO_ENOTHELD); /* not waiting */
  atomic_store(&pin_status, 1);
  uint64_t t0 = ordo__now_ns();
  assert_int_equal(ordo__acquire(&b, &r, 1, t0 + 20 * 1000000u,
                                 ORDO__WAIT_EVENT, pin_event, NULL),
                   ORDO_PENDING);
  assert_int_equal(ordo__owner_pin(&b, UINT64_MAX), 0);
  /* Well past the deadline, the pinned wait still waits. */
  while (ordo__now_ns() < t0 + 200 * 1000000u)
    assert_int_equal(atomic_load(&pin_status), 1);
  assert_int_equal(ordo__owner_pin(&b, 0), 0);
  uint64_t end = ordo__now_ns() + tu_ms(5000) * 1000000u;
  while (atomic_load(&pin_status) == 1 && ordo__now_ns() < end)
    sched_yield();
  assert_int_equal(atomic_load(&pin_status), ORDO_ETIMEDOUT);
  assert_int_equal(ordo__owner_pin(&b, 1), ORDO_ENOTHELD);
  (void)ordo__owner_fini(&b);
  (void)ordo__owner_fini(&a);
  ordo__table_destroy(tab);
}

static _Atomic long cancel_events;
static void cancel_event(ordo__owner *w, int status, void *arg) {
  (void)w;
  (void)arg;
  if (status == ORDO_ECANCELED)
    atomic_fetch_add(&cancel_events, 1);
}

/* n waiters on one key behind its holder (X, or S with X waiters), all
 * cancelled one by one: returns the waiters asked whether they could go. */
static uint64_t cancel_all_asks(ordo_mode_t held, size_t n) {
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.sweep_ms = 0;
  ordo__table *tab = NULL;
  assert_int_equal(ordo__table_create(&tab, &opts), 0);
  ordo__owner *w = calloc(n + 1, sizeof *w);
  assert_non_null(w);
  ordo_req_t h = {"q", 1, held}, x = ORDO_REQ_X("q", 1);
  ordo__owner_init(tab, &w[0], 1, 0);
  assert_int_equal(ordo__acquire(&w[0], &h, 1, 0, ORDO__WAIT_EVENT, NULL, NULL),
                   0);
  uint64_t deadline = ordo__now_ns() + UINT64_C(600) * 1000000000u;
  for (size_t i = 1; i <= n; i++) {
    ordo__owner_init(tab, &w[i], i + 1, 0);
    assert_int_equal(ordo__acquire(&w[i], &x, 1, deadline, ORDO__WAIT_EVENT,
                                   cancel_event, NULL),
                     ORDO_PENDING);
  }
  atomic_store(&cancel_events, 0);
  uint64_t a0 = atomic_load(&tab->wake_asks);
  /* From the head: each leaves a queue of all the rest behind it. */
  for (size_t i = 1; i <= n; i++)
    assert_int_equal(ordo__abort_wait(&w[i], ORDO_ECANCELED), 0);
  uint64_t asks = atomic_load(&tab->wake_asks) - a0;
  assert_int_equal(atomic_load(&cancel_events), (long)n);
  for (size_t i = 0; i <= n; i++)
    (void)ordo__owner_fini(&w[i]);
  free(w);
  ordo__table_destroy(tab);
  return asks;
}

/* A waiter that leaves a long queue under a holder costs O(1), not
 * O(queue): no waiter that the holder blocks is asked whether it can go.
 * At the parent every cancel asked each waiter behind it (n^2 / 2 asks:
 * 10,000 sessions of ordod hanging up at once took 200 us each, and its
 * shutdown 4.9 s). */
static void test_cancel_cost_flat(void **state) {
  (void)state;
  const size_t n = (size_t)tu_scaled(2000);
  uint64_t xa = cancel_all_asks(ORDO_MODE_X, n);
  uint64_t sa = cancel_all_asks(ORDO_MODE_S, n);
  printf("asks for %zu cancels: %" PRIu64 " under X, %" PRIu64 " under S\n", n,
         xa, sa);
  assert_true(xa <= n);
  assert_true(sa <= n);
}

/* argv[1], if given, runs the cases it matches (cmocka's filter). */
int main(int argc, char **argv) {
  if (argc > 1)
    cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
      CASE(test_mixed_blocking_then_async),
      CASE(test_no_soft_edge_from_held_key),
      CASE(test_soft_cycle_reordered),
      CASE(test_nothing_holder_never_victim),
      CASE(test_txn_end_during_async_grant),
      CASE(test_txn_end_inside_callback),
      CASE(test_reorder_keeps_others_place),
      CASE(test_timeout_bounds),
      CASE(test_pool_timeout_bounds),
      CASE(test_hold_count_limit),
      CASE(test_idle_lock_not_read_as_held),
      CASE(test_lock_objects_slab_and_malloc),
      CASE(test_engine_face),
      CASE(test_pin_holds_deadline),
      CASE(test_cancel_cost_flat),
#undef CASE
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
