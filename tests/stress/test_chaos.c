/*
 * test_chaos.c -- the detection layer under load: 16 threads take 1-3 keys
 * out of 8, one at a time, in random order and random modes, 200,000
 * operations in all (fewer under the sanitizers). Deadlocks happen all the
 * time; the checks are that mutual exclusion never breaks (a register per
 * key counts its S and X holders, and a committer keeps its registers
 * across a yield), that no call outlives its bound (give or take a margin
 * for the scheduler that grows with ORDO_TEST_TIMEOUT_MULT), that
 * the background sweep never finds a cycle the immediate check missed, that
 * every deadlock has exactly one victim (one record per EDEADLK, its victim
 * a member of its cycle), and that every operation ends committed or with a
 * retryable error holding nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"

#include <sched.h>
#include <string.h>

#define THREADS 16
#define KEYS 8
#define BOUND_MS 2000

static ordo_t *g_o;
static _Atomic long g_left;
static _Atomic long g_reg[KEYS]; /* -1: one X holder; n > 0: n S holders */
static _Atomic long g_violations, g_committed, g_victims, g_timeouts, g_overdue,
    g_other;
static _Atomic uint64_t g_max_call_ns;
/* A call that takes longer than this has outlived its bound: BOUND_MS, the
 * engine's own timer, plus room for the scheduler (500 ms, which grows
 * with ORDO_TEST_TIMEOUT_MULT). It guards against a hang, not a speed. */
static uint64_t g_overdue_ns;

static bool reg_enter(int k, ordo_mode_t m) {
  if (m == ORDO_MODE_X) {
    long z = 0;
    return atomic_compare_exchange_strong(&g_reg[k], &z, -1);
  }
  long v = atomic_load(&g_reg[k]);
  while (v >= 0)
    if (atomic_compare_exchange_weak(&g_reg[k], &v, v + 1))
      return true;
  return false;
}

static void reg_leave(int k, ordo_mode_t m) {
  if (m == ORDO_MODE_X)
    atomic_store(&g_reg[k], 0);
  else
    atomic_fetch_sub(&g_reg[k], 1);
}

static uint64_t xs(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void *chaos_worker(void *arg) {
  uint64_t rng = 0x9E3779B97F4A7C15u * (uint64_t)(intptr_t)arg;
  ordo_txn_t *t;
  if (ordo_txn_begin(g_o, &t, NULL) != 0)
    abort();
  static const char *names[KEYS] = {"c0", "c1", "c2", "c3",
                                    "c4", "c5", "c6", "c7"};
  while (atomic_fetch_sub(&g_left, 1) > 0) {
    int n = 1 + (int)(xs(&rng) % 3), keys[3];
    ordo_mode_t modes[3];
    for (int i = 0; i < n; i++) {
      bool dup;
      do {
        keys[i] = (int)(xs(&rng) % KEYS);
        dup = false;
        for (int j = 0; j < i; j++)
          dup |= keys[j] == keys[i];
      } while (dup);
      modes[i] = (xs(&rng) % 3) ? ORDO_MODE_X : ORDO_MODE_S;
    }
    int rc = 0, got = 0;
    for (int i = 0; i < n && rc == 0; i++) {
      uint64_t t0 = tu_now_ns();
      rc = ordo_lock(t, names[keys[i]], 2, modes[i], BOUND_MS);
      uint64_t took = tu_now_ns() - t0;
      if (took > atomic_load(&g_max_call_ns))
        atomic_store(&g_max_call_ns, took);
      if (took > g_overdue_ns)
        atomic_fetch_add(&g_overdue, 1);
      if (rc == 0)
        got++;
    }
    if (rc == ORDO_EDEADLK) {
      /* Every lock of the victim is already gone, taken from it while it
       * waited: it must not touch what they guarded. */
      for (int i = 0; i < got; i++)
        if (ordo_held(t, names[keys[i]], 2, NULL) != 0)
          atomic_fetch_add(&g_violations, 1);
      atomic_fetch_add(&g_victims, 1);
      continue;
    }
    if (rc == 0) {
      /* The commit: with every key held, nobody else may hold one of them
       * in a conflicting mode. The registers stay entered across a yield
       * and a short spin, so that a conflicting holder granted meanwhile
       * finds them taken: entered and left back to back, they would be
       * free again almost always. */
      int entered = 0;
      for (int i = 0; i < n; i++) {
        if (!reg_enter(keys[i], modes[i])) {
          atomic_fetch_add(&g_violations, 1);
          break;
        }
        entered++;
      }
      sched_yield();
      uint64_t until = tu_now_ns() + 2000;
      while (tu_now_ns() < until)
        ;
      for (int i = 0; i < entered; i++)
        reg_leave(keys[i], modes[i]);
      atomic_fetch_add(&g_committed, 1);
    } else if (rc == ORDO_ETIMEDOUT)
      atomic_fetch_add(&g_timeouts, 1);
    else
      atomic_fetch_add(&g_other, 1);
    ordo_unlock_all(t);
  }
  ordo_txn_end(t);
  return NULL;
}

static _Atomic long g_records, g_bad_records;
static void count_record(const ordo_deadlock_t *d, void *arg) {
  (void)arg;
  bool member = false;
  for (size_t i = 0; i < d->nedges && i < ORDO_DL_MAX_EDGES; i++)
    member |= d->edge[i].from == d->victim;
  if (!member)
    g_bad_records++;
  g_records++;
}

static void test_chaos(void **state) {
  (void)state;
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.sweep_ms = 50; /* the backstop runs often: it must find nothing */
  opts.log_wait_ms = 0;
  opts.alarm_per_min = 0;
  assert_int_equal(ordo_open(&g_o, "mem://", &opts), 0);
  ordo_on_deadlock(g_o, count_record, NULL);
  long ops = tu_scaled(200000);
  atomic_store(&g_left, ops);
  g_overdue_ns = ((uint64_t)BOUND_MS + tu_ms(500)) * 1000000u;
  tu_watchdog_start(g_o, 240, "chaos");
  pthread_t thr[THREADS];
  uint64_t t0 = tu_now_ns();
  for (long i = 0; i < THREADS; i++)
    pthread_create(&thr[i], NULL, chaos_worker, (void *)(i + 1));
  for (int i = 0; i < THREADS; i++)
    pthread_join(thr[i], NULL);
  tu_watchdog_stop();
  double secs = (double)(tu_now_ns() - t0) / 1e9;
  ordo_stats_t s;
  ordo_stats(g_o, &s);
  print_message("chaos: %ld ops in %.2f s: %ld committed, %ld victims, %ld "
                "timeouts, %llu reorderings, sweep finds %llu, longest call "
                "%.1f ms\n",
                ops, secs, atomic_load(&g_committed), atomic_load(&g_victims),
                atomic_load(&g_timeouts), (unsigned long long)s.reorders,
                (unsigned long long)s.sweep_finds,
                (double)atomic_load(&g_max_call_ns) / 1e6);
  assert_int_equal(atomic_load(&g_violations), 0);
  assert_int_equal(atomic_load(&g_overdue), 0);
  assert_int_equal(atomic_load(&g_other), 0);
  assert_int_equal(s.sweep_finds, 0);
  assert_int_equal(atomic_load(&g_committed) + atomic_load(&g_victims) +
                       atomic_load(&g_timeouts),
                   ops);
  /* One victim, one record, per deadlock; each victim in its cycle. */
  assert_int_equal(s.deadlocks, atomic_load(&g_victims));
  assert_int_equal(g_records, atomic_load(&g_victims));
  assert_int_equal(g_bad_records, 0);
  assert_int_equal(s.waiting, 0);
  ordo_close(g_o);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_chaos)};
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
