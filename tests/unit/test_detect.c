/*
 * test_detect.c -- deadlock detection and recovery, as scenario specs: txns
 * take keys one at a time (ordo_lock) from threads of their own, and every
 * step waits for "this txn is now blocked" (the engine's count of waiting
 * requests), never for time. Each case runs under a watchdog that dumps the
 * lock table.
 *
 * Cases: a 2-cycle; an 8-member ring with exactly one victim; a mixed S/X
 * cycle; two S holders both upgrading; a cycle through a soft edge resolved
 * with no abort; a 4-member soft cycle that takes more than one reordering;
 * a timeout racing detection; every victim policy, priority, and aging; the
 * sweep finding a cycle with the immediate check off; delayed detection;
 * records, the callback, the alarm, the long-wait log, and the graph dump.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"
#include "core/table.h"

#include <string.h>

static ordo_t *O;

static ordo_t *open_opts(const ordo_options_t *opts) {
  ordo_t *o = NULL;
  if (ordo_open(&o, "mem://", opts) != 0)
    abort();
  return o;
}

static int setup(void **state) {
  (void)state;
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.sweep_ms = 0; /* cases that want the sweep turn it on */
  opts.log_wait_ms = 0;
  O = open_opts(&opts);
  tu_watchdog_start(O, 30, "test_detect case");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tu_watchdog_stop();
  ordo_stats_t s;
  ordo_stats(O, &s);
  assert_int_equal(s.waiting, 0);
  assert_int_equal(s.sweep_finds, 0);
  ordo_close(O);
  O = NULL;
  return 0;
}

static ordo_txn_t *txn_p(ordo_t *o, int prio) {
  ordo_txn_t *t = NULL;
  ordo_txn_options_t to = {prio, NULL, 0};
  if (ordo_txn_begin(o, &t, &to) != 0)
    abort();
  return t;
}

static ordo_txn_t *txn(void) {
  return txn_p(O, 0);
}

static void take(ordo_txn_t *t, const char *k, ordo_mode_t m) {
  assert_int_equal(ordo_lock(t, k, strlen(k), m, 0), 0);
}

/* Starts a blocking lock of one key on its own thread and waits until the
 * engine counts `waiting` queued requests. */
static void block_on(tu_locker *l, ordo_txn_t *t, const char *k, ordo_mode_t m,
                     long timeout_ms, uint64_t waiting) {
  *l = (tu_locker){.t = t, .n = 1, .timeout_ms = timeout_ms};
  l->reqs[0] = (ordo_req_t){k, strlen(k), m};
  tu_locker_start(l);
  if (waiting)
    assert_true(tu_wait_waiting(O, waiting));
}

/* Waits (bounded) until locker l is done. */
static bool done_within(tu_locker *l, double s) {
  uint64_t end = tu_now_ns() + (uint64_t)(s * 1e9);
  while (!atomic_load(&l->done)) {
    if (tu_now_ns() > end)
      return false;
    tu_sleep_us(100);
  }
  return true;
}

/*
 * Runs lockers to the end: each that is granted releases everything its
 * txn holds, which lets the next go. Returns how many ended with EDEADLK;
 * every other must end granted.
 */
static int drain(tu_locker *ls, int n) {
  int victims = 0, left = n;
  bool seen[64] = {false};
  uint64_t end = tu_now_ns() + 10000000000u;
  while (left > 0) {
    assert_true(tu_now_ns() < end);
    for (int i = 0; i < n; i++) {
      if (seen[i] || !atomic_load(&ls[i].done))
        continue;
      seen[i] = true;
      left--;
      int rc = tu_locker_join(&ls[i]);
      if (rc == ORDO_EDEADLK)
        victims++;
      else
        assert_int_equal(rc, 0);
      ordo_unlock_all(ls[i].t);
    }
    tu_sleep_us(100);
  }
  return victims;
}

static void test_two_cycle(void **state) {
  (void)state;
  ordo_txn_t *t1 = txn(), *t2 = txn();
  take(t1, "a", ORDO_MODE_X);
  take(t2, "b", ORDO_MODE_X);
  tu_locker l[2];
  block_on(&l[0], t1, "b", ORDO_MODE_X, ORDO_FOREVER, 1);
  block_on(&l[1], t2, "a", ORDO_MODE_X, ORDO_FOREVER, 0);
  /* The youngest (t2) is the victim: it returns EDEADLK holding nothing,
   * and t1 gets b. */
  assert_true(done_within(&l[1], 5));
  assert_int_equal(tu_locker_join(&l[1]), ORDO_EDEADLK);
  assert_int_equal(ordo_held(t2, "b", 1, NULL), 0);
  assert_int_equal(ordo_held(t2, "a", 1, NULL), 0);
  assert_int_equal(tu_locker_join(&l[0]), 0);
  assert_int_equal(ordo_held(t1, "b", 1, NULL), 1);

  ordo_stats_t s;
  ordo_stats(O, &s);
  assert_int_equal(s.deadlocks, 1);
  assert_int_equal(s.victims[ORDO_VICTIM_YOUNGEST], 1);
  ordo_deadlock_t d[4];
  assert_int_equal(ordo_deadlocks(O, d, 4), 1);
  assert_int_equal(d[0].nedges, 2);
  assert_true(d[0].victim == ordo_txn_id(t2));
  assert_int_equal(d[0].policy, ORDO_VICTIM_YOUNGEST);
  assert_int_equal(d[0].found_by_sweep, 0);
  assert_true(d[0].time_ns > 0);
  /* The edges name the keys and the modes: t1 waits for b held by t2, t2
   * for a held by t1. */
  for (size_t i = 0; i < 2; i++) {
    const ordo_dl_edge_t *e = &d[0].edge[i];
    assert_int_equal(e->key_len, 1);
    assert_int_equal(e->mode, ORDO_MODE_X);
    assert_int_equal(e->soft, 0);
    if (e->from == ordo_txn_id(t1)) {
      assert_true(e->to == ordo_txn_id(t2));
      assert_memory_equal(e->key, "b", 1);
    } else {
      assert_true(e->from == ordo_txn_id(t2));
      assert_memory_equal(e->key, "a", 1);
    }
  }
  assert_int_equal(ordo_txn_aborts(t2), 1);
  uint64_t n = 0;
  for (int i = 0; i < ORDO_HIST_BUCKETS; i++)
    n += s.detect_hist[i];
  assert_int_equal(n, 1);
  ordo_txn_end(t1);
  ordo_txn_end(t2);
}

static void test_ring_of_eight(void **state) {
  (void)state;
  enum { N = 8 };
  ordo_txn_t *t[N];
  char keys[N][16];
  for (int i = 0; i < N; i++) {
    t[i] = txn();
    snprintf(keys[i], sizeof keys[i], "r%d", i);
    take(t[i], keys[i], ORDO_MODE_X);
  }
  tu_locker l[N];
  for (int i = 0; i < N; i++)
    block_on(&l[i], t[i], keys[(i + 1) % N], ORDO_MODE_X, ORDO_FOREVER,
             i + 1 < N ? (uint64_t)i + 1 : 0);
  assert_int_equal(drain(l, N), 1);
  ordo_stats_t s;
  ordo_stats(O, &s);
  assert_int_equal(s.deadlocks, 1);
  ordo_deadlock_t d;
  assert_int_equal(ordo_deadlocks(O, &d, 1), 1);
  assert_int_equal(d.nedges, N);
  assert_true(d.victim == ordo_txn_id(t[N - 1]));
  for (int i = 0; i < N; i++)
    ordo_txn_end(t[i]);
}

static void test_mixed_modes(void **state) {
  (void)state;
  ordo_txn_t *t1 = txn(), *t2 = txn();
  take(t1, "a", ORDO_MODE_S);
  take(t2, "b", ORDO_MODE_X);
  tu_locker l[2];
  block_on(&l[0], t1, "b", ORDO_MODE_S, ORDO_FOREVER, 1);
  block_on(&l[1], t2, "a", ORDO_MODE_X, ORDO_FOREVER, 0);
  assert_int_equal(drain(l, 2), 1);
  ordo_deadlock_t d;
  assert_int_equal(ordo_deadlocks(O, &d, 1), 1);
  bool saw_s = false, saw_x = false;
  for (size_t i = 0; i < d.nedges; i++) {
    saw_s |= d.edge[i].mode == ORDO_MODE_S;
    saw_x |= d.edge[i].mode == ORDO_MODE_X;
  }
  assert_true(saw_s && saw_x);
  ordo_txn_end(t1);
  ordo_txn_end(t2);
}

static void test_two_upgraders(void **state) {
  (void)state;
  ordo_txn_t *t1 = txn(), *t2 = txn();
  take(t1, "u", ORDO_MODE_S);
  take(t2, "u", ORDO_MODE_S);
  tu_locker l[2];
  block_on(&l[0], t1, "u", ORDO_MODE_X, ORDO_FOREVER, 1);
  block_on(&l[1], t2, "u", ORDO_MODE_X, ORDO_FOREVER, 0);
  /* One victim (t2, its S released with it); the other gets X. */
  assert_true(done_within(&l[1], 5));
  assert_int_equal(tu_locker_join(&l[1]), ORDO_EDEADLK);
  assert_int_equal(ordo_held(t2, "u", 1, NULL), 0);
  assert_int_equal(tu_locker_join(&l[0]), 0);
  ordo_mode_t m;
  assert_int_equal(ordo_held(t1, "u", 1, &m), 2);
  assert_int_equal(m, ORDO_MODE_X);
  ordo_txn_end(t1);
  ordo_txn_end(t2);
}

/* H holds a; W1 waits for {a, b} (b held by W2); W2 then asks for a and
 * queues behind W1: W2 waits behind W1 (soft), W1 for W2's b (hard). Moving
 * W2 ahead of W1 on a breaks the cycle with no abort. */
static void test_soft_cycle_reordered(void **state) {
  (void)state;
  ordo_txn_t *h = txn(), *w1 = txn(), *w2 = txn();
  take(h, "a", ORDO_MODE_X);
  take(w2, "b", ORDO_MODE_X);
  tu_locker l[2];
  l[0] = (tu_locker){.t = w1,
                     .reqs = {ORDO_REQ_X("a", 1), ORDO_REQ_X("b", 1)},
                     .n = 2,
                     .timeout_ms = ORDO_FOREVER};
  tu_locker_start(&l[0]);
  assert_true(tu_wait_waiting(O, 1));
  block_on(&l[1], w2, "a", ORDO_MODE_X, ORDO_FOREVER, 2);
  ordo_stats_t s;
  ordo_stats(O, &s);
  assert_int_equal(s.reorders, 1);
  assert_int_equal(s.deadlocks, 0);
  /* When h lets go, W2 (moved up) goes first, then W1. */
  ordo_unlock_all(h);
  assert_int_equal(drain(l, 2), 0);
  ordo_stats(O, &s);
  assert_int_equal(s.deadlocks, 0);
  ordo_txn_end(h);
  ordo_txn_end(w1);
  ordo_txn_end(w2);
}

/* Four members, two soft edges: H holds k1 and k3; C holds k2, A holds k4.
 * B waits for {k1, k2}, D for {k3, k4}; A asks for {k1, k3} (behind B and
 * D), C for k3 (behind D and A). Resolving it takes two moves, and nobody
 * is aborted. */
static void test_soft_cycle_two_moves(void **state) {
  (void)state;
  ordo_txn_t *h = txn(), *a = txn(), *b = txn(), *c = txn(), *d = txn();
  take(h, "k1", ORDO_MODE_X);
  take(h, "k3", ORDO_MODE_X);
  take(c, "k2", ORDO_MODE_X);
  take(a, "k4", ORDO_MODE_X);
  tu_locker l[4];
  l[0] = (tu_locker){.t = b,
                     .reqs = {ORDO_REQ_X("k1", 2), ORDO_REQ_X("k2", 2)},
                     .n = 2,
                     .timeout_ms = ORDO_FOREVER};
  tu_locker_start(&l[0]);
  assert_true(tu_wait_waiting(O, 1));
  l[1] = (tu_locker){.t = d,
                     .reqs = {ORDO_REQ_X("k3", 2), ORDO_REQ_X("k4", 2)},
                     .n = 2,
                     .timeout_ms = ORDO_FOREVER};
  tu_locker_start(&l[1]);
  assert_true(tu_wait_waiting(O, 2));
  l[2] = (tu_locker){.t = a,
                     .reqs = {ORDO_REQ_X("k1", 2), ORDO_REQ_X("k3", 2)},
                     .n = 2,
                     .timeout_ms = ORDO_FOREVER};
  tu_locker_start(&l[2]);
  assert_true(tu_wait_waiting(O, 3));
  block_on(&l[3], c, "k3", ORDO_MODE_X, ORDO_FOREVER, 4);
  ordo_stats_t s;
  ordo_stats(O, &s);
  print_message("four-member soft cycle: %llu reorderings\n",
                (unsigned long long)s.reorders);
  assert_true(s.reorders >= 2);
  assert_int_equal(s.deadlocks, 0);
  ordo_unlock_all(h);
  assert_int_equal(drain(l, 4), 0);
  ordo_txn_end(h);
  ordo_txn_end(a);
  ordo_txn_end(b);
  ordo_txn_end(c);
  ordo_txn_end(d);
}

/* A 2-cycle whose members also time out at about the moment the cycle
 * closes: each call sees exactly one outcome, and the engine's counts agree
 * with what the calls saw. */
static void test_timeout_races_detection(void **state) {
  (void)state;
  long rounds = tu_scaled(200);
  int dl = 0, to = 0;
  ordo_stats_t s0, s1;
  ordo_stats(O, &s0);
  for (long r = 0; r < rounds; r++) {
    ordo_txn_t *t1 = txn(), *t2 = txn();
    take(t1, "x", ORDO_MODE_X);
    take(t2, "y", ORDO_MODE_X);
    tu_locker l[2];
    block_on(&l[0], t1, "y", ORDO_MODE_X, 1 + r % 3, 0);
    /* Vary the interleaving: the cycle closes before, at, or after t1's
     * deadline. The assertions hold in every order. */
    tu_sleep_us((r % 5) * 600);
    block_on(&l[1], t2, "x", ORDO_MODE_X, 1 + (r + 1) % 3, 0);
    int rc0 = tu_locker_join(&l[0]), rc1 = tu_locker_join(&l[1]);
    int rcs[2] = {rc0, rc1};
    ordo_txn_t *ts[2] = {t1, t2};
    int victims = 0;
    for (int i = 0; i < 2; i++) {
      assert_true(rcs[i] == 0 || rcs[i] == ORDO_EDEADLK ||
                  rcs[i] == ORDO_ETIMEDOUT);
      if (rcs[i] == ORDO_EDEADLK) {
        victims++;
        dl++;
        /* A victim holds nothing. */
        assert_int_equal(ordo_held(ts[i], "x", 1, NULL), 0);
        assert_int_equal(ordo_held(ts[i], "y", 1, NULL), 0);
      }
      if (rcs[i] == ORDO_ETIMEDOUT)
        to++;
    }
    assert_true(victims <= 1);
    ordo_txn_end(t1);
    ordo_txn_end(t2);
  }
  ordo_stats(O, &s1);
  assert_int_equal(s1.deadlocks - s0.deadlocks, dl);
  assert_int_equal(s1.timeouts - s0.timeouts, to);
  print_message("timeout vs detection: %d victims, %d timeouts in %ld rounds\n",
                dl, to, rounds);
}

/* A 3-ring whose members differ in id, locks held, cost, deadline and
 * priority; returns the victim's index. */
typedef struct {
  int prio[3];
  uint64_t cost[3];
  long timeout_ms[3];
  int extra[3]; /* extra keys held */
} ring_spec;

static int ring_victim(ordo_victim_t policy, const ring_spec *rs,
                       ordo_txn_t *reuse[3]) {
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.victim = policy;
  opts.sweep_ms = 0;
  opts.log_wait_ms = 0;
  ordo_t *o = reuse ? O : open_opts(&opts);
  ordo_t *saved = O;
  O = o;
  ordo_txn_t *t[3];
  char key[3][16];
  for (int i = 0; i < 3; i++) {
    t[i] = reuse ? reuse[i] : txn_p(o, rs->prio[i]);
    ordo_txn_add_cost(t[i], rs->cost[i]);
    snprintf(key[i], sizeof key[i], "q%d", i);
    take(t[i], key[i], ORDO_MODE_X);
    for (int j = 0; j < rs->extra[i]; j++) {
      char e[24];
      snprintf(e, sizeof e, "e%d%d", i, j);
      take(t[i], e, ORDO_MODE_X);
    }
  }
  tu_locker l[3];
  for (int i = 0; i < 3; i++)
    block_on(&l[i], t[i], key[(i + 1) % 3], ORDO_MODE_X, rs->timeout_ms[i],
             i < 2 ? (uint64_t)i + 1 : 0);
  int victim = -1, left = 3;
  bool seen[3] = {false};
  while (left > 0) {
    for (int i = 0; i < 3; i++) {
      if (seen[i] || !atomic_load(&l[i].done))
        continue;
      seen[i] = true;
      left--;
      int rc = tu_locker_join(&l[i]);
      if (rc == ORDO_EDEADLK) {
        assert_int_equal(victim, -1); /* exactly one */
        victim = i;
      } else {
        assert_int_equal(rc, 0);
      }
      ordo_unlock_all(t[i]);
    }
    tu_sleep_us(100);
  }
  if (!reuse) {
    for (int i = 0; i < 3; i++)
      ordo_txn_end(t[i]);
    ordo_close(o);
  }
  O = saved;
  return victim;
}

static void test_victim_policies(void **state) {
  (void)state;
  ring_spec plain = {{0, 0, 0}, {1, 9, 5}, {100000, 50000, 200000}, {2, 0, 1}};
  assert_int_equal(ring_victim(ORDO_VICTIM_YOUNGEST, &plain, NULL), 2);
  assert_int_equal(ring_victim(ORDO_VICTIM_OLDEST, &plain, NULL), 0);
  assert_int_equal(ring_victim(ORDO_VICTIM_FEWEST_LOCKS, &plain, NULL), 1);
  assert_int_equal(ring_victim(ORDO_VICTIM_LEAST_WORK, &plain, NULL), 0);
  assert_int_equal(ring_victim(ORDO_VICTIM_NEAREST_DEADLINE, &plain, NULL), 1);
  int v = ring_victim(ORDO_VICTIM_RANDOM, &plain, NULL);
  assert_true(v >= 0 && v < 3);
  /* Priority is compared first, whatever the policy. */
  ring_spec prio = {{1, 0, 2}, {0, 0, 0}, {100000, 100000, 100000}, {0, 0, 0}};
  assert_int_equal(ring_victim(ORDO_VICTIM_YOUNGEST, &prio, NULL), 1);
  assert_int_equal(ring_victim(ORDO_VICTIM_LOWEST_PRIORITY, &prio, NULL), 1);
  ring_spec low = {{5, 3, 4}, {0, 0, 0}, {100000, 100000, 100000}, {0, 0, 0}};
  assert_int_equal(ring_victim(ORDO_VICTIM_OLDEST, &low, NULL), 1);
}

/* A txn aborted again and again gains priority: the youngest loses the
 * first ring, and the next youngest loses the second. */
static void test_aging(void **state) {
  (void)state;
  ring_spec plain = {{0, 0, 0}, {0, 0, 0}, {100000, 100000, 100000}, {0, 0, 0}};
  ordo_txn_t *t[3] = {txn(), txn(), txn()};
  assert_int_equal(ring_victim(ORDO_VICTIM_YOUNGEST, &plain, t), 2);
  assert_int_equal(ordo_txn_aborts(t[2]), 1);
  assert_int_equal(ring_victim(ORDO_VICTIM_YOUNGEST, &plain, t), 1);
  /* Both have lost once now; the third round is t[0]'s. */
  assert_int_equal(ring_victim(ORDO_VICTIM_YOUNGEST, &plain, t), 0);
  for (int i = 0; i < 3; i++)
    ordo_txn_end(t[i]);
}

/* With the immediate check off (delayed mode, with a delay no test waits
 * out), the background sweep alone finds it. */
static void test_sweep_alone(void **state) {
  (void)state;
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.detect = ORDO_DETECT_DELAYED;
  opts.deadlock_timeout_ms = 3600 * 1000;
  opts.sweep_ms = 20;
  opts.log_wait_ms = 0;
  ordo_t *o = open_opts(&opts);
  ordo_t *saved = O;
  O = o;
  ordo_txn_t *t1 = txn(), *t2 = txn();
  take(t1, "a", ORDO_MODE_X);
  take(t2, "b", ORDO_MODE_X);
  tu_locker l[2];
  block_on(&l[0], t1, "b", ORDO_MODE_X, ORDO_FOREVER, 1);
  block_on(&l[1], t2, "a", ORDO_MODE_X, ORDO_FOREVER, 2);
  assert_int_equal(drain(l, 2), 1);
  ordo_stats_t s;
  ordo_stats(o, &s);
  assert_int_equal(s.sweep_finds, 1);
  assert_int_equal(s.deadlocks, 1);
  ordo_deadlock_t d;
  assert_int_equal(ordo_deadlocks(o, &d, 1), 1);
  assert_int_equal(d.found_by_sweep, 1);
  ordo_txn_end(t1);
  ordo_txn_end(t2);
  ordo_close(o);
  O = saved;
}

/* Delayed mode looks only after deadlock_timeout_ms of waiting. */
static void test_delayed(void **state) {
  (void)state;
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.detect = ORDO_DETECT_DELAYED;
  opts.deadlock_timeout_ms = 50;
  opts.sweep_ms = 0;
  opts.log_wait_ms = 0;
  ordo_t *o = open_opts(&opts);
  ordo_t *saved = O;
  O = o;
  ordo_txn_t *t1 = txn(), *t2 = txn();
  take(t1, "a", ORDO_MODE_X);
  take(t2, "b", ORDO_MODE_X);
  tu_locker l[2];
  block_on(&l[0], t1, "b", ORDO_MODE_X, ORDO_FOREVER, 1);
  uint64_t t0 = tu_now_ns();
  block_on(&l[1], t2, "a", ORDO_MODE_X, ORDO_FOREVER, 2);
  assert_int_equal(drain(l, 2), 1);
  /* Not before the deadlock timeout. */
  assert_true(tu_now_ns() - t0 >= 45000000u);
  ordo_stats_t s;
  ordo_stats(o, &s);
  assert_int_equal(s.deadlocks, 1);
  assert_int_equal(s.sweep_finds, 0);
  ordo_txn_end(t1);
  ordo_txn_end(t2);
  ordo_close(o);
  O = saved;
}

static _Atomic int cb_calls;
static uint64_t cb_victim;
static void on_dl(const ordo_deadlock_t *d, void *arg) {
  (void)arg;
  cb_victim = d->victim;
  atomic_fetch_add(&cb_calls, 1);
}

static _Atomic int alarm_calls;
static char alarm_classes[256];
static void on_alarm(double per_min, const char *classes, void *arg) {
  (void)arg;
  (void)per_min;
  snprintf(alarm_classes, sizeof alarm_classes, "%s", classes);
  atomic_fetch_add(&alarm_calls, 1);
}

/* Records keep the last K; the callback sees each; the alarm names the
 * classes when deadlocks come faster than its threshold. */
static void test_records_callback_alarm(void **state) {
  (void)state;
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.sweep_ms = 0;
  opts.log_wait_ms = 0;
  opts.deadlock_history = 3;
  opts.alarm_per_min = 4;
  opts.alarm_window_s = 60; /* 4 per minute over a minute: 4 deadlocks */
  ordo_t *o = open_opts(&opts);
  ordo_t *saved = O;
  O = o;
  atomic_store(&cb_calls, 0);
  atomic_store(&alarm_calls, 0);
  ordo_on_deadlock(o, on_dl, NULL);
  ordo_on_alarm(o, on_alarm, NULL);
  for (int r = 0; r < 5; r++) {
    ordo_txn_t *t1 = txn(), *t2 = txn();
    take(t1, "acct:1", ORDO_MODE_X);
    take(t2, "user:7", ORDO_MODE_X);
    tu_locker l[2];
    block_on(&l[0], t1, "user:7", ORDO_MODE_X, ORDO_FOREVER, 1);
    block_on(&l[1], t2, "acct:1", ORDO_MODE_X, ORDO_FOREVER, 0);
    assert_int_equal(drain(l, 2), 1);
    assert_int_equal(atomic_load(&cb_calls), r + 1);
    assert_true(cb_victim == ordo_txn_id(t2));
    ordo_txn_end(t1);
    ordo_txn_end(t2);
  }
  ordo_deadlock_t d[8];
  assert_int_equal(ordo_deadlocks(o, d, 8), 3); /* the last 3 */
  assert_true(d[0].seq == 3 && d[1].seq == 4 && d[2].seq == 5);
  assert_int_equal(atomic_load(&alarm_calls), 1); /* raised once */
  assert_non_null(strstr(alarm_classes, "acct"));
  assert_non_null(strstr(alarm_classes, "user"));
  ordo_close(o);
  O = saved;
}

/* The wait-for graph as DOT and JSON, while a txn waits. */
static void test_graph_dump(void **state) {
  (void)state;
  ordo_txn_t *h = txn(), *w = txn();
  take(h, "g1", ORDO_MODE_X);
  tu_locker l;
  block_on(&l, w, "g1", ORDO_MODE_X, ORDO_FOREVER, 1);
  char path[] = "/tmp/ordo-graph-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(ordo_graph_dump(O, fd, ORDO_GRAPH_DOT), 0);
  assert_int_equal(ordo_graph_dump(O, fd, ORDO_GRAPH_JSON), 0);
  char buf[4096] = {0};
  lseek(fd, 0, SEEK_SET);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  unlink(path);
  assert_true(n > 0);
  char edge[64];
  snprintf(edge, sizeof edge, "\"txn %llu\" -> \"txn %llu\"",
           (unsigned long long)ordo_txn_id(w),
           (unsigned long long)ordo_txn_id(h));
  assert_non_null(strstr(buf, "digraph waitfor"));
  assert_non_null(strstr(buf, edge));
  assert_non_null(strstr(buf, "\"key\": \"g1\""));
  ordo_unlock_all(h);
  assert_int_equal(tu_locker_join(&l), 0);
  ordo_txn_end(h);
  ordo_txn_end(w);
}

/* A wait past log_wait_ms is logged (and counted) once. */
static void test_long_wait_logged(void **state) {
  (void)state;
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.sweep_ms = 0;
  opts.log_wait_ms = 20;
  ordo_t *o = open_opts(&opts);
  ordo_t *saved = O;
  O = o;
  ordo_txn_t *h = txn(), *w = txn();
  take(h, "slow", ORDO_MODE_X);
  tu_locker l;
  block_on(&l, w, "slow", ORDO_MODE_X, ORDO_FOREVER, 1);
  ordo_stats_t s;
  uint64_t end = tu_now_ns() + 5000000000u;
  do {
    tu_sleep_us(1000);
    ordo_stats(o, &s);
  } while (s.long_waits == 0 && tu_now_ns() < end);
  assert_int_equal(s.long_waits, 1);
  ordo_unlock_all(h);
  assert_int_equal(tu_locker_join(&l), 0);
  ordo_txn_end(h);
  ordo_txn_end(w);
  ordo_close(o);
  O = saved;
}

/* ---- Waits outside the engine (core/table.h): the executors' face ------
 * A hook plays an executor: txn a's task waits on a future whose task's
 * txn b blocks on a key a holds. */
typedef struct {
  ordo__owner *victim; /* what the hook names when b waits for it alone */
  int calls;
  ordo__owner *seen[4];
  size_t nseen;
} ext_probe;

static ordo__owner *ext_fill(ext_probe *p, ordo__owner *w,
                             ordo_deadlock_t *rec) {
  p->nseen = ordo__owner_blockers_locked(w, p->seen, 4);
  if (!p->victim || p->nseen != 1)
    return NULL;
  rec->kind = ORDO_DL_MIXED;
  rec->nedges = 2;
  rec->edge[0] = (ordo_dl_edge_t){.from = w->id, .to = p->seen[0]->id};
  rec->edge[1] = (ordo_dl_edge_t){.from = p->seen[0]->id, .to = w->id};
  return p->victim;
}

static ordo__owner *ext_hook(void *arg, ordo__owner *w, ordo_deadlock_t *rec) {
  ext_probe *p = arg;
  p->calls++;
  return ext_fill(p, w, rec);
}

typedef struct {
  ext_probe *p;
  ordo__owner *w;
  bool waiting;
} ext_search_arg;

static ordo__owner *ext_search(void *arg, ordo_deadlock_t *rec) {
  ext_search_arg *x = arg;
  x->waiting = ordo__owner_waiting(x->w);
  return ext_fill(x->p, x->w, rec);
}

static void test_ext_waits(void **state) {
  (void)state;
  ordo__table *tab = ordo__engine_table(O);
  ext_probe p = {0};
  ordo__table_set_ext(tab, ext_hook, &p);
  /* At b's block event the hook names a, which waits outside the engine:
   * a's locks go under the same hold of wait_mu, so b is granted. */
  ordo_txn_t *a = txn(), *b = txn();
  take(a, "xa", ORDO_MODE_X);
  take(a, "xl", ORDO_MODE_X);
  p.victim = ordo__engine_owner(a);
  tu_locker lb;
  block_on(&lb, b, "xl", ORDO_MODE_X, 5000, 0);
  assert_true(done_within(&lb, 10));
  assert_int_equal(tu_locker_join(&lb), 0);
  assert_true(p.calls >= 1);
  assert_int_equal(p.nseen, 1);
  assert_ptr_equal(p.seen[0], ordo__engine_owner(a));
  ordo_mode_t m;
  assert_int_equal(ordo_held(a, "xl", 2, &m), 0);
  assert_int_equal(ordo_held(a, "xa", 2, &m), 0);
  ordo_deadlock_t d;
  assert_int_equal(ordo_deadlocks(O, &d, 1), 1);
  assert_int_equal(d.kind, ORDO_DL_MIXED);
  assert_int_equal(d.victim, ordo_txn_id(a));
  assert_int_equal(d.nedges, 2);
  assert_int_equal(d.edge[0].from, ordo_txn_id(b));
  ordo_stats_t st;
  ordo_stats(O, &st);
  assert_int_equal(st.deadlocks, 1);
  ordo_unlock_all(b);
  /* The other way round: b2 blocks first (the hook names nobody), then
   * the executor's own block event searches and names b2, which waits in
   * the engine: its lock returns ORDO_EDEADLK, a2 keeps its key. */
  p.victim = NULL;
  ordo_txn_t *a2 = txn(), *b2 = txn();
  take(a2, "yl", ORDO_MODE_X);
  tu_locker lb2;
  block_on(&lb2, b2, "yl", ORDO_MODE_X, 5000, 1);
  p.victim = ordo__engine_owner(b2);
  ext_search_arg x = {&p, ordo__engine_owner(b2), false};
  assert_true(ordo__table_ext_search(tab, ext_search, &x));
  assert_true(x.waiting);
  assert_true(done_within(&lb2, 10));
  assert_int_equal(tu_locker_join(&lb2), ORDO_EDEADLK);
  assert_int_equal(ordo_held(a2, "yl", 2, &m), 1);
  assert_int_equal(ordo_deadlocks(O, &d, 1), 1);
  assert_int_equal(d.kind, ORDO_DL_MIXED);
  assert_int_equal(d.victim, ordo_txn_id(b2));
  /* Nobody named: nothing aborted, no record. */
  p.victim = NULL;
  x.w = ordo__engine_owner(a2);
  assert_false(ordo__table_ext_search(tab, ext_search, &x));
  assert_false(x.waiting);
  assert_int_equal(ordo_deadlocks(O, &d, 1), 1);
  assert_int_equal(d.victim, ordo_txn_id(b2));
  /* A pool deadlock's record: no victim. */
  ordo_deadlock_t pr = {.kind = ORDO_DL_POOL, .nedges = 1};
  ordo__table_add_record(tab, &pr);
  assert_int_equal(ordo_deadlocks(O, &d, 1), 1);
  assert_int_equal(d.kind, ORDO_DL_POOL);
  assert_int_equal(d.victim, 0);
  ordo__table_set_ext(tab, NULL, NULL);
  ordo_unlock_all(a2);
  ordo_txn_end(a);
  ordo_txn_end(b);
  ordo_txn_end(a2);
  ordo_txn_end(b2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
      CASE(test_two_cycle),
      CASE(test_ring_of_eight),
      CASE(test_mixed_modes),
      CASE(test_two_upgraders),
      CASE(test_soft_cycle_reordered),
      CASE(test_soft_cycle_two_moves),
      CASE(test_timeout_races_detection),
      CASE(test_victim_policies),
      CASE(test_aging),
      CASE(test_sweep_alone),
      CASE(test_delayed),
      CASE(test_records_callback_alarm),
      CASE(test_graph_dump),
      CASE(test_long_wait_logged),
      CASE(test_ext_waits),
#undef CASE
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
