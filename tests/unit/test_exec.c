/*
 * test_exec.c -- the executor of src/exec: the seed's pool deadlock (N
 * workers each submit a leaf and wait for it) under each policy, joins
 * nested three deep, the mixed lock/future cycle and its one victim, no
 * false report over many waits on running tasks, cancel and shutdown with
 * waits in flight (a running task's waits cancelled), the graph dump, and
 * a foreign pthread pool annotated with the note_* calls. Every case runs
 * under the watchdog of tests/common/testutil.h, which dumps the wait-for
 * graph on a hang. argv[1], if given, runs the cases it matches.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"

#include <inttypes.h>
#include <sched.h>
#include <string.h>

static ordo_t *O;

static int setup(void **state) {
  (void)state;
  return ordo_open(&O, "mem://", NULL);
}

static int teardown(void **state) {
  (void)state;
  ordo_close(O);
  O = NULL;
  return 0;
}

/* ---- Helpers ------------------------------------------------------------ */

static _Atomic int cb_count;
static void count_cb(const ordo_deadlock_t *d, void *arg) {
  (void)d;
  (void)arg;
  atomic_fetch_add(&cb_count, 1);
}

/* The records of kind kind, and the last of them in *last. */
static int records(int kind, ordo_deadlock_t *last) {
  static ordo_deadlock_t r[32];
  int n = ordo_deadlocks(O, r, 32), k = 0;
  assert_true(n >= 0);
  for (int i = 0; i < n; i++)
    if (r[i].kind == kind) {
      k++;
      if (last)
        *last = r[i];
    }
  return k;
}

static bool rec_has_key(const ordo_deadlock_t *d, const char *prefix) {
  size_t n = strlen(prefix);
  for (size_t i = 0; i < d->nedges && i < ORDO_DL_MAX_EDGES; i++)
    if (d->edge[i].key_len >= n && memcmp(d->edge[i].key, prefix, n) == 0)
      return true;
  return false;
}

/* A gate tasks wait at, bounded (a hang fails through the watchdog). */
typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open;
  int arrived;
} gate;
static gate G = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void gate_reset(void) {
  pthread_mutex_lock(&G.mu);
  G.open = 0;
  G.arrived = 0;
  pthread_mutex_unlock(&G.mu);
}
static void gate_pass(void) {
  pthread_mutex_lock(&G.mu);
  G.arrived++;
  pthread_cond_broadcast(&G.cv);
  while (!G.open)
    pthread_cond_wait(&G.cv, &G.mu);
  pthread_mutex_unlock(&G.mu);
}
static void gate_open(void) {
  pthread_mutex_lock(&G.mu);
  G.open = 1;
  pthread_cond_broadcast(&G.cv);
  pthread_mutex_unlock(&G.mu);
}
/* Waits until n have arrived at the gate. */
static void gate_wait_arrived(int n) {
  pthread_mutex_lock(&G.mu);
  while (G.arrived < n)
    pthread_cond_wait(&G.cv, &G.mu);
  pthread_mutex_unlock(&G.mu);
}

/* Waits (bounded) until the future has n waits in flight, read from the
 * JSON dump ("task": id, the waits of each executor). */
static void wait_waiters(int n) {
  uint64_t end = tu_now_ns() + tu_ms(10000) * 1000000u;
  for (;;) {
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(ordo_graph_dump(O, fileno(f), ORDO_GRAPH_JSON), 0);
    char buf[8192];
    rewind(f);
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    buf[k] = 0;
    fclose(f);
    int c = 0;
    for (char *p = buf; (p = strstr(p, "\"waiter\": ")); p++)
      c++;
    if (c >= n)
      return;
    assert_true(tu_now_ns() < end);
    sched_yield();
  }
}

/* The graph dump of this moment, as a string to free. */
static char *dump(ordo_graph_fmt_t fmt) {
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(ordo_graph_dump(O, fileno(f), fmt), 0);
  long n = (fseek(f, 0, SEEK_END), ftell(f));
  char *buf = calloc(1, (size_t)n + 1);
  rewind(f);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return buf;
}

static void *leaf(void *arg) {
  return (void *)((uintptr_t)arg + 1000);
}

/* ---- The seed: N workers each submit a leaf and wait for it ------------- */

#define SEED_N 3
static ordo_exec_t *E;
static pthread_barrier_t seed_bar;
static long seed_timeout;
static int seed_detect = 1;
static _Atomic int seed_rc[SEED_N];

static void *seed_parent(void *arg) {
  uintptr_t i = (uintptr_t)arg;
  /* All N are running before any leaf is queued: the seed's shape. */
  pthread_barrier_wait(&seed_bar);
  ordo_future_t *f;
  assert_int_equal(ordo_exec_submit(E, leaf, (void *)i, &f), 0);
  void *v = NULL;
  int rc = ordo_future_wait(f, seed_timeout, &v);
  if (rc == 0 && (uintptr_t)v != i + 1000)
    rc = 99; /* a wrong value */
  atomic_store(&seed_rc[i], rc);
  ordo_future_release(f);
  return (void *)i;
}

/* Runs the seed; returns how many parents' waits returned each code. */
static void run_seed(ordo_exec_policy_t pol, long timeout_ms, int *ok, int *dl,
                     int *to) {
  ordo_exec_options_t eo;
  ordo_exec_options_init(&eo);
  eo.policy = pol;
  eo.detect = seed_detect;
  assert_int_equal(ordo_exec_create(&E, O, SEED_N, &eo), 0);
  pthread_barrier_init(&seed_bar, NULL, SEED_N);
  seed_timeout = timeout_ms;
  ordo_future_t *p[SEED_N];
  for (uintptr_t i = 0; i < SEED_N; i++)
    assert_int_equal(ordo_exec_submit(E, seed_parent, (void *)i, &p[i]), 0);
  *ok = *dl = *to = 0;
  for (uintptr_t i = 0; i < SEED_N; i++) {
    void *v;
    assert_int_equal(ordo_future_wait(p[i], ORDO_FOREVER, &v), 0);
    assert_int_equal((uintptr_t)v, i);
    int rc = atomic_load(&seed_rc[i]);
    if (rc == 0)
      (*ok)++;
    else if (rc == ORDO_EDEADLK)
      (*dl)++;
    else if (rc == ORDO_ETIMEDOUT)
      (*to)++;
    else
      fail_msg("parent %u: %d", (unsigned)i, rc);
    ordo_future_release(p[i]);
  }
  ordo_exec_destroy(E);
  pthread_barrier_destroy(&seed_bar);
}

static void test_seed_inline(void **state) {
  (void)state;
  tu_watchdog_start(O, 30, "seed inline");
  int ok, dl, to;
  run_seed(ORDO_EXEC_INLINE, ORDO_FOREVER, &ok, &dl, &to);
  assert_int_equal(ok, SEED_N);
  ordo_deadlock_t d;
  assert_int_equal(records(ORDO_DL_POOL, &d), 1);
  assert_true(rec_has_key(&d, "future:"));
  assert_true(rec_has_key(&d, "worker:pool"));
  assert_int_equal(d.victim, 0);
  tu_watchdog_stop();
}

static void test_seed_compensate(void **state) {
  (void)state;
  tu_watchdog_start(O, 30, "seed compensate");
  int ok, dl, to;
  run_seed(ORDO_EXEC_COMPENSATE, ORDO_FOREVER, &ok, &dl, &to);
  assert_int_equal(ok, SEED_N);
  assert_true(records(ORDO_DL_POOL, NULL) >= 1);
  tu_watchdog_stop();
}

static void test_seed_fail(void **state) {
  (void)state;
  tu_watchdog_start(O, 30, "seed fail");
  int ok, dl, to;
  run_seed(ORDO_EXEC_FAIL, ORDO_FOREVER, &ok, &dl, &to);
  /* The closing wait fails; its worker then runs the leaves. */
  assert_int_equal(dl, 1);
  assert_int_equal(ok, SEED_N - 1);
  ordo_deadlock_t d;
  assert_int_equal(records(ORDO_DL_POOL, &d), 1);
  assert_int_equal(d.nedges, 2 * SEED_N); /* N futures, N queued leaves */
  assert_true(rec_has_key(&d, "worker:pool"));
  tu_watchdog_stop();
}

/* The callback dumps the graph as the deadlock is reported: the seed's
 * clue, every worker waiting on a future whose task sits in the queue. */
static char *report_dump;
static void dump_cb(const ordo_deadlock_t *d, void *arg) {
  count_cb(d, arg);
  if (!report_dump)
    report_dump = dump(ORDO_GRAPH_JSON);
}

static int count_of(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p++)
    n++;
  return n;
}

static void test_seed_report(void **state) {
  (void)state;
  tu_watchdog_start(O, 30, "seed report");
  atomic_store(&cb_count, 0);
  report_dump = NULL;
  ordo_on_deadlock(O, dump_cb, NULL);
  int ok, dl, to;
  uint64_t t0 = tu_now_ns();
  run_seed(ORDO_EXEC_REPORT, 300, &ok, &dl, &to);
  /* Reported once; the waits then end by their timeouts, and the first
   * to end frees a worker for the leaves. */
  assert_int_equal(atomic_load(&cb_count), 1);
  assert_int_equal(records(ORDO_DL_POOL, NULL), 1);
  assert_int_equal(dl, 0);
  assert_true(to >= 1);
  assert_int_equal(ok + to, SEED_N);
  assert_true(tu_now_ns() - t0 >= 300 * 1000000u);
  /* N waits on queued tasks, each queued task unblocking one waiter. */
  assert_non_null(report_dump);
  assert_int_equal(count_of(report_dump, "\"state\": \"queued\""), SEED_N);
  assert_int_equal(count_of(report_dump, "\"waiters\": ["), SEED_N);
  free(report_dump);
  ordo_on_deadlock(O, NULL, NULL);
  tu_watchdog_stop();
}

/* detect = 0: no detection at all, so the seed's waits run out of time. */
static void test_seed_detect_off(void **state) {
  (void)state;
  tu_watchdog_start(O, 30, "seed, detection off");
  int ok, dl, to;
  seed_detect = 0;
  run_seed(ORDO_EXEC_FAIL, 100, &ok, &dl, &to);
  seed_detect = 1;
  assert_int_equal(dl, 0);
  assert_true(to >= 1);
  assert_int_equal(ordo_deadlocks(O, (ordo_deadlock_t[1]){0}, 1), 0);
  tu_watchdog_stop();
}

/* Makes E: n workers under policy pol, detection on. */
static void exec_make(ordo_exec_policy_t pol, unsigned n) {
  ordo_exec_options_t eo;
  ordo_exec_options_init(&eo);
  eo.policy = pol;
  assert_int_equal(ordo_exec_create(&E, O, n, &eo), 0);
}

/* ---- Joins nested three deep, one worker --------------------------------- */

static _Atomic int nest_edeadlk, nest_finished;
static long nest_timeout;

static void *nest(void *arg) {
  uintptr_t d = (uintptr_t)arg;
  if (d == 0) {
    atomic_fetch_add(&nest_finished, 1);
    return (void *)(uintptr_t)1;
  }
  ordo_future_t *f;
  assert_int_equal(ordo_exec_submit(E, nest, (void *)(d - 1), &f), 0);
  void *v = NULL;
  int rc = ordo_future_wait(f, nest_timeout, &v);
  ordo_future_release(f);
  if (rc == ORDO_EDEADLK)
    atomic_fetch_add(&nest_edeadlk, 1);
  atomic_fetch_add(&nest_finished, 1);
  if (rc)
    return (void *)(uintptr_t)0;
  return (void *)((uintptr_t)v + 1);
}

static void run_nest(ordo_exec_policy_t pol, long timeout_ms, void **out) {
  exec_make(pol, 1);
  atomic_store(&nest_edeadlk, 0);
  atomic_store(&nest_finished, 0);
  nest_timeout = timeout_ms;
  ordo_future_t *f;
  assert_int_equal(ordo_exec_submit(E, nest, (void *)(uintptr_t)3, &f), 0);
  assert_int_equal(ordo_future_wait(f, ORDO_FOREVER, out), 0);
  ordo_future_release(f);
  /* The levels a failed or timed-out wait left queued still run (each
   * submits the next, so the pool cannot be drained: it would refuse). */
  uint64_t end = tu_now_ns() + tu_ms(20000) * 1000000u;
  while (atomic_load(&nest_finished) < 4) {
    assert_true(tu_now_ns() < end);
    sched_yield();
  }
  assert_int_equal(ordo_exec_shutdown(E, ORDO_EXEC_DRAIN, ORDO_FOREVER), 0);
  ordo_exec_destroy(E);
}

static void test_nested(void **state) {
  (void)state;
  tu_watchdog_start(O, 60, "nested joins");
  void *v;
  /* INLINE: the one worker runs each join's task on its own stack. */
  run_nest(ORDO_EXEC_INLINE, ORDO_FOREVER, &v);
  assert_int_equal((uintptr_t)v, 4);
  assert_int_equal(records(ORDO_DL_POOL, NULL), 3);
  /* COMPENSATE: a spare for each level (max_spare = nworkers = 1, then
   * inline). */
  run_nest(ORDO_EXEC_COMPENSATE, ORDO_FOREVER, &v);
  assert_int_equal((uintptr_t)v, 4);
  assert_int_equal(records(ORDO_DL_POOL, NULL), 6);
  /* FAIL: each level's wait fails in turn; the leaf runs last. */
  run_nest(ORDO_EXEC_FAIL, ORDO_FOREVER, &v);
  assert_int_equal((uintptr_t)v, 0);
  assert_int_equal(atomic_load(&nest_edeadlk), 3);
  assert_int_equal(records(ORDO_DL_POOL, NULL), 9);
  /* REPORT: each level reported, then its wait times out. */
  run_nest(ORDO_EXEC_REPORT, 100, &v);
  assert_int_equal((uintptr_t)v, 0);
  assert_int_equal(records(ORDO_DL_POOL, NULL), 12);
  tu_watchdog_stop();
}

/* A txn of this thread's task that holds lock L. */
static ordo_txn_t *txn_holding_l(void) {
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  assert_int_equal(ordo_lock(t, "L", 1, ORDO_MODE_X, 10), 0);
  return t;
}

/* ---- The mixed lock/future cycle --------------------------------------- */

static _Atomic int mixed_b_rc = 1;
static _Atomic uint64_t mixed_b_txn;
static _Atomic int mixed_b_held_after = -1;

static void *mixed_b(void *arg) {
  (void)arg;
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  atomic_store(&mixed_b_txn, ordo_txn_id(t));
  assert_int_equal(ordo_lock(t, "M", 1, ORDO_MODE_X, 10), 0);
  gate_pass(); /* A holds L now and is about to wait on us */
  int rc = ordo_lock(t, "L", 1, ORDO_MODE_X, 20000);
  atomic_store(&mixed_b_rc, rc);
  /* The victim's locks are released: M too. */
  atomic_store(&mixed_b_held_after, ordo_held(t, "M", 1, NULL));
  ordo_txn_end(t);
  return NULL;
}

static void *mixed_a(void *arg) {
  (void)arg;
  ordo_txn_t *t = txn_holding_l();
  ordo_future_t *f;
  assert_int_equal(ordo_exec_submit(E, mixed_b, NULL, &f), 0);
  gate_wait_arrived(1);
  gate_open();
  int rc = ordo_future_wait(f, 20000, NULL);
  ordo_future_release(f);
  ordo_unlock_all(t);
  ordo_txn_end(t);
  return (void *)(intptr_t)rc;
}

static void test_mixed_cycle(void **state) {
  (void)state;
  tu_watchdog_start(O, 60, "mixed cycle");
  gate_reset();
  assert_int_equal(ordo_exec_create(&E, O, 2, NULL), 0);
  ordo_future_t *fa;
  assert_int_equal(ordo_exec_submit(E, mixed_a, NULL, &fa), 0);
  void *v;
  assert_int_equal(ordo_future_wait(fa, ORDO_FOREVER, &v), 0);
  assert_int_equal((intptr_t)v, 0); /* A's wait went on and ended well */
  ordo_future_release(fa);
  ordo_exec_destroy(E);
  assert_int_equal(atomic_load(&mixed_b_rc), ORDO_EDEADLK);
  assert_int_equal(atomic_load(&mixed_b_held_after), 0);
  ordo_deadlock_t d;
  assert_int_equal(records(ORDO_DL_MIXED, &d), 1);
  assert_int_equal(records(ORDO_DL_POOL, NULL), 0);
  assert_int_equal(d.victim, atomic_load(&mixed_b_txn));
  assert_true(rec_has_key(&d, "future:"));
  assert_true(rec_has_key(&d, "lock"));
  ordo_stats_t s;
  ordo_stats(O, &s);
  assert_int_equal(s.deadlocks, 1);
  tu_watchdog_stop();
}

/* ---- A pool deadlock through a lock ---------------------------------------
 * Two workers: A holds lock L and waits on Q, queued; B waits for L. Both
 * workers are stuck, and Q would unblock them. lock_last: B's lock wait is
 * the block event that forms it (the engine's hook finds it), else A's
 * future wait is. */

static bool lk_lock_last;
static _Atomic int lk_a_rc = 1, lk_b_rc = 1;

static void *lk_b(void *arg) {
  (void)arg;
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  gate_pass(); /* A holds L */
  if (lk_lock_last)
    wait_waiters(1); /* A waits on Q now */
  atomic_store(&lk_b_rc, ordo_lock(t, "L", 1, ORDO_MODE_X, 20000));
  ordo_txn_end(t);
  return NULL;
}

static void *lk_a(void *arg) {
  (void)arg;
  ordo_txn_t *t = txn_holding_l();
  gate_wait_arrived(1); /* B runs: the pool is full */
  gate_open();
  if (!lk_lock_last)
    assert_true(tu_wait_waiting(O, 1)); /* B waits for L now */
  ordo_future_t *q;
  assert_int_equal(ordo_exec_submit(E, leaf, NULL, &q), 0);
  atomic_store(&lk_a_rc, ordo_future_wait(q, 20000, NULL));
  ordo_future_release(q);
  ordo_txn_end(t);
  return NULL;
}

static void run_lock_pool(ordo_exec_policy_t pol, bool lock_last) {
  gate_reset();
  lk_lock_last = lock_last;
  exec_make(pol, 2);
  ordo_future_t *a, *b;
  assert_int_equal(ordo_exec_submit(E, lk_a, NULL, &a), 0);
  assert_int_equal(ordo_exec_submit(E, lk_b, NULL, &b), 0);
  assert_int_equal(ordo_future_wait(a, ORDO_FOREVER, NULL), 0);
  assert_int_equal(ordo_future_wait(b, ORDO_FOREVER, NULL), 0);
  ordo_future_release(a);
  ordo_future_release(b);
  ordo_exec_destroy(E);
  assert_int_equal(atomic_load(&lk_b_rc), 0); /* L, once A let it go */
}

static void test_lock_pool(void **state) {
  (void)state;
  tu_watchdog_start(O, 60, "pool deadlock through a lock");
  ordo_deadlock_t d;
  /* INLINE, closed by A's future wait: A runs Q itself. */
  run_lock_pool(ORDO_EXEC_INLINE, false);
  assert_int_equal(atomic_load(&lk_a_rc), 0);
  assert_int_equal(records(ORDO_DL_POOL, &d), 1);
  assert_true(rec_has_key(&d, "lock"));
  assert_true(rec_has_key(&d, "worker:pool"));
  /* INLINE, closed by B's lock wait: A's wait is told to help. */
  run_lock_pool(ORDO_EXEC_INLINE, true);
  assert_int_equal(atomic_load(&lk_a_rc), 0);
  assert_int_equal(records(ORDO_DL_POOL, &d), 2);
  assert_true(rec_has_key(&d, "lock"));
  /* FAIL, closed by B's lock wait: A's wait on Q fails. */
  run_lock_pool(ORDO_EXEC_FAIL, true);
  assert_int_equal(atomic_load(&lk_a_rc), ORDO_EDEADLK);
  assert_int_equal(records(ORDO_DL_POOL, NULL), 3);
  assert_int_equal(records(ORDO_DL_MIXED, NULL), 0);
  tu_watchdog_stop();
}

/* ---- A cycle of future waits alone ---------------------------------------
 * Two tasks, each waiting on the other's future: no txn to abort, so under
 * FAIL the wait that closes the cycle returns ORDO_EDEADLK. */

static ordo_future_t *cyc_f[2];
static _Atomic int cyc_rc[2];

static void *cyc_task(void *arg) {
  uintptr_t i = (uintptr_t)arg;
  gate_pass(); /* both futures are known */
  atomic_store(&cyc_rc[i], ordo_future_wait(cyc_f[1 - i], 20000, NULL));
  return NULL;
}

static void test_future_cycle(void **state) {
  (void)state;
  tu_watchdog_start(O, 60, "future cycle");
  gate_reset();
  exec_make(ORDO_EXEC_FAIL, 2);
  for (uintptr_t i = 0; i < 2; i++)
    assert_int_equal(ordo_exec_submit(E, cyc_task, (void *)i, &cyc_f[i]), 0);
  gate_wait_arrived(2);
  gate_open();
  assert_int_equal(ordo_exec_shutdown(E, ORDO_EXEC_DRAIN, (long)tu_ms(20000)),
                   0);
  int dl = 0;
  for (int i = 0; i < 2; i++) {
    int rc = atomic_load(&cyc_rc[i]);
    assert_true(rc == 0 || rc == ORDO_EDEADLK);
    dl += rc == ORDO_EDEADLK;
  }
  assert_int_equal(dl, 1);
  ordo_deadlock_t d;
  assert_int_equal(records(ORDO_DL_MIXED, &d), 1);
  assert_int_equal(d.victim, 0);
  assert_int_equal(d.nedges, 2);
  ordo_exec_destroy(E);
  ordo_future_release(cyc_f[0]);
  ordo_future_release(cyc_f[1]);
  tu_watchdog_stop();
}

/* ---- No false report ------------------------------------------------------
 * Two workers. A parent submits its leaf, waits until the leaf runs,
 * submits the next parent (queued: both workers are busy, so the pool is
 * saturated with a queue and every wait searches), then waits on the
 * running leaf, which waits until its parent is about to wait. */

typedef struct chain {
  _Atomic long left;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
} chain;
static chain C = {0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                  false};

typedef struct pair {
  _Atomic int started, waiting;
} pair;

static void spin_until(_Atomic int *flag) {
  uint64_t end = tu_now_ns() + tu_ms(10000) * 1000000u;
  while (!atomic_load(flag)) {
    assert_true(tu_now_ns() < end);
    sched_yield();
  }
}

static void *nf_leaf(void *arg) {
  pair *p = arg;
  atomic_store(&p->started, 1);
  spin_until(&p->waiting);
  return NULL;
}

static void *nf_parent(void *arg) {
  (void)arg;
  pair p = {0, 0};
  ordo_future_t *l, *next;
  assert_int_equal(ordo_exec_submit(E, nf_leaf, &p, &l), 0);
  spin_until(&p.started);
  if (atomic_fetch_sub(&C.left, 2) > 2) {
    assert_int_equal(ordo_exec_submit(E, nf_parent, NULL, &next), 0);
    ordo_future_release(next);
  } else {
    pthread_mutex_lock(&C.mu);
    C.done = true;
    pthread_cond_signal(&C.cv);
    pthread_mutex_unlock(&C.mu);
  }
  atomic_store(&p.waiting, 1);
  assert_int_equal(ordo_future_wait(l, ORDO_FOREVER, NULL), 0);
  ordo_future_release(l);
  return NULL;
}

static void test_no_false_report(void **state) {
  (void)state;
  tu_watchdog_start(O, 120, "no false report");
  atomic_store(&cb_count, 0);
  ordo_on_deadlock(O, count_cb, NULL);
  assert_int_equal(ordo_exec_create(&E, O, 2, NULL), 0);
  atomic_store(&C.left, tu_scaled(100000));
  C.done = false;
  ordo_future_t *f;
  assert_int_equal(ordo_exec_submit(E, nf_parent, NULL, &f), 0);
  ordo_future_release(f);
  pthread_mutex_lock(&C.mu);
  while (!C.done)
    pthread_cond_wait(&C.cv, &C.mu);
  pthread_mutex_unlock(&C.mu);
  assert_int_equal(ordo_exec_shutdown(E, ORDO_EXEC_DRAIN, ORDO_FOREVER), 0);
  ordo_exec_destroy(E);
  assert_int_equal(atomic_load(&cb_count), 0);
  assert_int_equal(ordo_deadlocks(O, (ordo_deadlock_t[1]){0}, 1), 0);
  ordo_on_deadlock(O, NULL, NULL);
  tu_watchdog_stop();
}

/* ---- Cancel and shutdown with waits in flight ---------------------------- */

static void *gated(void *arg) {
  gate_pass();
  return arg;
}

typedef struct waiter {
  pthread_t thr;
  ordo_future_t *f;
  long timeout_ms;
  int rc;
  void *v;
} waiter;

static void *waiter_main(void *arg) {
  waiter *w = arg;
  w->rc = ordo_future_wait(w->f, w->timeout_ms, &w->v);
  return NULL;
}
static void waiter_start(waiter *w, ordo_future_t *f) {
  w->f = f;
  w->timeout_ms = (long)tu_ms(20000);
  w->rc = 1;
  pthread_create(&w->thr, NULL, waiter_main, w);
}

/* Joins thr if it ends within ms (times tu_mult()): whether it did. */
static bool join_within(pthread_t thr, uint64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + tu_ms(ms) * 1000000u;
  ts.tv_sec += (time_t)(ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  return pthread_timedjoin_np(thr, NULL, &ts) == 0;
}

/* One worker running a gated task g (arrived at the gate) and a leaf q
 * queued behind it, with nwait threads waiting: q first, then g. */
static void gated_pair(ordo_future_t **g, ordo_future_t **q, waiter *w,
                       int nwait) {
  gate_reset();
  assert_int_equal(ordo_exec_create(&E, O, 1, NULL), 0);
  assert_int_equal(ordo_exec_submit(E, gated, (void *)7, g), 0);
  assert_int_equal(ordo_exec_submit(E, leaf, (void *)1, q), 0);
  gate_wait_arrived(1);
  waiter_start(&w[0], *q);
  if (nwait > 1)
    waiter_start(&w[1], *g);
  wait_waiters(nwait);
}

static void test_cancel(void **state) {
  (void)state;
  tu_watchdog_start(O, 60, "cancel");
  ordo_future_t *g, *q;
  waiter w[2];
  gated_pair(&g, &q, w, 2);
  /* Running: it runs on, but the wait on it in flight ends (ordo.h: every
   * wait is cancellable). */
  assert_int_equal(ordo_future_cancel(g), ORDO_EBUSY);
  pthread_join(w[1].thr, NULL);
  assert_int_equal(w[1].rc, ORDO_ECANCELED);
  assert_int_equal(ordo_future_cancel(q), 0); /* queued */
  pthread_join(w[0].thr, NULL);
  assert_int_equal(w[0].rc, ORDO_ECANCELED);
  assert_int_equal(ordo_future_done(q), 1);
  assert_int_equal(ordo_future_wait(q, 0, NULL), ORDO_ECANCELED);
  assert_int_equal(ordo_future_wait(g, 0, NULL), ORDO_ETIMEDOUT);
  gate_open();
  void *v = NULL;
  assert_int_equal(ordo_future_wait(g, (long)tu_ms(10000), &v), 0);
  assert_int_equal((uintptr_t)v, 7);          /* it ran to its end */
  assert_int_equal(ordo_future_cancel(g), 0); /* done: nothing changes */
  assert_int_equal(ordo_future_wait(g, 0, NULL), 0);
  ordo_exec_destroy(E);
  /* Futures outlive their executor until released. */
  assert_int_equal(ordo_future_done(g), 1);
  ordo_future_release(g);
  ordo_future_release(q);
  tu_watchdog_stop();
}

/* A task that waits on the future arg and returns the wait's code. */
static void *wait_task(void *arg) {
  return (void *)(intptr_t)ordo_future_wait(arg, (long)tu_ms(20000), NULL);
}

/* ordo_future_cancel of a running task: the task cannot be stopped, but
 * every wait on it in flight ends with ORDO_ECANCELED (ordo.h: every wait
 * is cancellable), a thread's outside tasks and a worker's alike, and the
 * call says ORDO_EBUSY. The task runs on to its end, and a wait begun
 * after the cancel waits for that end. */
static void test_cancel_running(void **state) {
  (void)state;
  tu_watchdog_start(O, 60, "cancel of a running task's waits");
  gate_reset();
  exec_make(ORDO_EXEC_INLINE, 2);
  ordo_future_t *g, *wt;
  assert_int_equal(ordo_exec_submit(E, gated, (void *)7, &g), 0);
  gate_wait_arrived(1); /* g runs */
  assert_int_equal(ordo_exec_submit(E, wait_task, g, &wt), 0);
  waiter w;
  waiter_start(&w, g);
  wait_waiters(2); /* the worker's and the thread's waits on g */
  assert_int_equal(ordo_future_cancel(g), ORDO_EBUSY);
  /* Both waits end now, g still running. */
  bool thread_ended = join_within(w.thr, 5000);
  void *wv = NULL;
  int task_rc = ordo_future_wait(wt, (long)tu_ms(5000), &wv);
  int g_done = ordo_future_done(g);
  /* A wait begun after the cancel is not cancelled. */
  waiter later;
  waiter_start(&later, g);
  wait_waiters(1);
  gate_open(); /* g runs to its end */
  void *v = NULL;
  assert_int_equal(ordo_future_wait(g, (long)tu_ms(10000), &v), 0);
  if (!thread_ended)
    pthread_join(w.thr, NULL); /* g's end ended it */
  pthread_join(later.thr, NULL);
  if (task_rc == ORDO_ETIMEDOUT)
    assert_int_equal(ordo_future_wait(wt, (long)tu_ms(10000), &wv), 0);
  if (!thread_ended || task_rc != 0)
    fail_msg("the waits on a running task did not end on ordo_future_cancel: "
             "the thread's %s, the worker's %s within 5 s",
             thread_ended ? "ended" : "went on",
             task_rc == 0 ? "ended" : "went on");
  assert_int_equal(w.rc, ORDO_ECANCELED);
  assert_int_equal((intptr_t)wv, ORDO_ECANCELED);
  assert_int_equal(g_done, 0);       /* it ran on */
  assert_int_equal((uintptr_t)v, 7); /* to its end */
  assert_int_equal(later.rc, 0);
  assert_int_equal((uintptr_t)later.v, 7);
  ordo_exec_destroy(E);
  ordo_future_release(g);
  ordo_future_release(wt);
  tu_watchdog_stop();
}

static void *destroy_main(void *arg) {
  ordo_exec_destroy(arg);
  return NULL;
}

static void shutdown_case(ordo_exec_shutdown_t how) {
  ordo_future_t *g, *q;
  waiter w[2];
  gated_pair(&g, &q, w, 2);
  /* A task still runs: the bounded shutdown says so. */
  assert_int_equal(ordo_exec_shutdown(E, how, 0), ORDO_ETIMEDOUT);
  ordo_future_t *x;
  assert_int_equal(ordo_exec_submit(E, leaf, NULL, &x), ORDO_ECANCELED);
  if (how == ORDO_EXEC_NOW) {
    pthread_join(w[0].thr, NULL);
    assert_int_equal(w[0].rc, ORDO_ECANCELED);
  }
  gate_open();
  assert_int_equal(ordo_exec_shutdown(E, how, (long)tu_ms(20000)), 0);
  pthread_join(w[1].thr, NULL);
  assert_int_equal(w[1].rc, 0);
  if (how == ORDO_EXEC_DRAIN) {
    pthread_join(w[0].thr, NULL);
    assert_int_equal(w[0].rc, 0);
    assert_int_equal((uintptr_t)w[0].v, 1001);
  }
  ordo_exec_destroy(E);
  ordo_future_release(g);
  ordo_future_release(q);
}

static void test_shutdown(void **state) {
  (void)state;
  tu_watchdog_start(O, 60, "shutdown");
  shutdown_case(ORDO_EXEC_NOW);
  shutdown_case(ORDO_EXEC_DRAIN);
  /* Destroy with a task queued and a wait on it in flight: destroy shuts
   * down NOW, which cancels the queued task (ordo.h), so the wait returns
   * ORDO_ECANCELED; then it joins the worker, whose running task ends.
   * The gate opens only once that wait has ended, so the queued task
   * cannot have run first. */
  ordo_future_t *g, *q;
  waiter wq;
  gated_pair(&g, &q, &wq, 1);
  pthread_t d;
  pthread_create(&d, NULL, destroy_main, E);
  bool cancelled = join_within(wq.thr, 20000);
  gate_open();
  assert_true(cancelled);
  assert_int_equal(wq.rc, ORDO_ECANCELED);
  assert_true(join_within(d, 20000)); /* destroy returned */
  void *v = NULL;
  assert_int_equal(ordo_future_wait(g, 0, &v), 0); /* ran to its end */
  assert_int_equal((uintptr_t)v, 7);
  assert_int_equal(ordo_future_wait(q, 0, NULL), ORDO_ECANCELED);
  ordo_future_release(g);
  ordo_future_release(q);
  tu_watchdog_stop();
}

/* ---- Arguments and places --------------------------------------------------
 */

static void test_args(void **state) {
  (void)state;
  ordo_exec_t *e;
  assert_int_equal(ordo_exec_create(&e, O, 0, NULL), ORDO_EINVAL);
  assert_int_equal(ordo_exec_create(&e, O, 1025, NULL), ORDO_EINVAL);
  assert_int_equal(ordo_exec_create(NULL, O, 1, NULL), ORDO_EINVAL);
  ordo_exec_options_t eo;
  ordo_exec_options_init(&eo);
  eo.policy = ORDO_EXEC_INLINE;
  assert_int_equal(ordo_exec_declare(&e, O, 2, &eo), ORDO_EINVAL);
  eo.policy = ORDO_EXEC_COMPENSATE;
  assert_int_equal(ordo_exec_declare(&e, O, 2, &eo), ORDO_EINVAL);
  eo.policy = (ordo_exec_policy_t)9;
  assert_int_equal(ordo_exec_create(&e, O, 1, &eo), ORDO_EINVAL);
  assert_int_equal(ordo_future_wait(NULL, 0, NULL), ORDO_EINVAL);
  /* max_queue */
  gate_reset();
  ordo_exec_options_init(&eo);
  eo.max_queue = 1;
  assert_int_equal(ordo_exec_create(&e, O, 1, &eo), 0);
  ordo_future_t *g, *q, *x;
  assert_int_equal(ordo_exec_submit(e, gated, NULL, &g), 0);
  gate_wait_arrived(1);
  assert_int_equal(ordo_exec_submit(e, leaf, NULL, &q), 0);
  assert_int_equal(ordo_exec_submit(e, leaf, NULL, &x), ORDO_ELIMIT);
  gate_open();
  assert_int_equal(ordo_exec_shutdown(e, ORDO_EXEC_DRAIN, ORDO_FOREVER), 0);
  ordo_exec_destroy(e);
  ordo_future_release(g);
  ordo_future_release(q);
  /* An executor left alive is destroyed by ordo_close (teardown). */
  assert_int_equal(ordo_exec_create(&e, O, 2, NULL), 0);
}

/* ---- The dump ------------------------------------------------------------ */

static void test_dump(void **state) {
  (void)state;
  tu_watchdog_start(O, 60, "dump");
  char *plain = dump(ORDO_GRAPH_JSON);
  assert_string_equal(plain, "{\"edges\": [], \"waiting\": []}\n");
  free(plain);
  ordo_future_t *g, *q;
  waiter wq;
  gated_pair(&g, &q, &wq, 1);
  char *j = dump(ORDO_GRAPH_JSON);
  assert_non_null(strstr(j, "{\"edges\": [], \"waiting\": [], \"executors\": "
                            "[{\"name\": \"pool\""));
  assert_non_null(strstr(j, "\"unblocks\": [{\"task\": "));
  assert_string_equal(j + strlen(j) - 3, "]}\n");
  free(j);
  char *d = dump(ORDO_GRAPH_DOT);
  assert_non_null(strstr(d, "-> \"worker:pool\" [label=\"queued\""));
  assert_non_null(strstr(d, "future (queued), would unblock"));
  assert_string_equal(d + strlen(d) - 2, "}\n");
  free(d);
  gate_open();
  pthread_join(wq.thr, NULL);
  assert_int_equal(wq.rc, 0);
  ordo_exec_destroy(E);
  ordo_future_release(g);
  ordo_future_release(q);
  /* Without executors again, the engine's dump alone. */
  plain = dump(ORDO_GRAPH_DOT);
  assert_string_equal(plain, "digraph waitfor {\n  rankdir=LR;\n  node "
                             "[shape=box];\n}\n");
  free(plain);
  tu_watchdog_stop();
}

/* ---- A foreign pthread pool ---------------------------------------------- */

#define FP_N 2
typedef struct ftask {
  void *(*fn)(struct ftask *);
  uintptr_t i;
  struct ftask *next;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  int rc;
} ftask;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  ftask *head, *tail;
  bool stop;
  pthread_t thr[FP_N];
  ordo_exec_t *e;
} FP = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, {0}, 0};

static void fp_submit(ftask *t) {
  pthread_mutex_init(&t->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->cv, &ca);
  pthread_condattr_destroy(&ca);
  t->done = false;
  t->next = NULL;
  assert_int_equal(ordo_exec_note_queued(FP.e, (uintptr_t)t), 0);
  pthread_mutex_lock(&FP.mu);
  if (FP.tail)
    FP.tail->next = t;
  else
    FP.head = t;
  FP.tail = t;
  pthread_cond_signal(&FP.cv);
  pthread_mutex_unlock(&FP.mu);
}

static void *fp_worker(void *arg) {
  (void)arg;
  pthread_mutex_lock(&FP.mu);
  for (;;) {
    ftask *t = FP.head;
    if (!t) {
      if (FP.stop)
        break;
      pthread_cond_wait(&FP.cv, &FP.mu);
      continue;
    }
    FP.head = t->next;
    if (!FP.head)
      FP.tail = NULL;
    pthread_mutex_unlock(&FP.mu);
    assert_int_equal(ordo_exec_note_started(FP.e, (uintptr_t)t), 0);
    t->fn(t);
    assert_int_equal(ordo_exec_note_done(FP.e, (uintptr_t)t), 0);
    pthread_mutex_lock(&t->mu);
    t->done = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_lock(&FP.mu);
  }
  pthread_mutex_unlock(&FP.mu);
  return NULL;
}

/* The pool's own join, annotated; bounded by timeout_ms. */
static int fp_join(ftask *t, long timeout_ms) {
  int rc = ordo_exec_note_wait_begin(FP.e, (uintptr_t)t);
  if (rc)
    return rc;
  uint64_t end = tu_now_ns() + (uint64_t)timeout_ms * 1000000u;
  struct timespec ts = {(time_t)(end / 1000000000u), (long)(end % 1000000000u)};
  pthread_mutex_lock(&t->mu);
  while (!t->done && rc == 0)
    if (pthread_cond_timedwait(&t->cv, &t->mu, &ts) != 0)
      rc = ORDO_ETIMEDOUT;
  pthread_mutex_unlock(&t->mu);
  assert_int_equal(ordo_exec_note_wait_end(FP.e, (uintptr_t)t), 0);
  return rc;
}

static pthread_barrier_t fp_bar;
static long fp_timeout;
static ftask fp_leaves[FP_N];
static void *fp_leaf(ftask *t) {
  (void)t;
  return NULL;
}
/* Submits its leaf and joins it; the leaf lives in fp_leaves, which the
 * main thread waits out, so that a parent whose join failed or timed out
 * returns and its thread runs the leaves. */
static void *fp_parent(ftask *t) {
  pthread_barrier_wait(&fp_bar);
  ftask *l = &fp_leaves[t->i];
  l->fn = fp_leaf;
  fp_submit(l);
  t->rc = fp_join(l, fp_timeout);
  return NULL;
}

/* Waits until the pool's task t is done, at most until end_ns
 * (CLOCK_MONOTONIC, t->cv's clock); a task not done by then fails the
 * case. */
static void fp_wait_done(ftask *t, uint64_t end_ns, const char *what, int i) {
  struct timespec ts = {(time_t)(end_ns / 1000000000u),
                        (long)(end_ns % 1000000000u)};
  pthread_mutex_lock(&t->mu);
  while (!t->done && pthread_cond_timedwait(&t->cv, &t->mu, &ts) == 0)
    ;
  bool done = t->done;
  pthread_mutex_unlock(&t->mu);
  if (!done)
    fail_msg("foreign pool: %s %d not done within its bound", what, i);
}

static void run_foreign(ordo_exec_policy_t pol, long timeout_ms, int *dl,
                        int *to) {
  ordo_exec_options_t eo;
  ordo_exec_options_init(&eo);
  eo.policy = pol;
  eo.name = "fp";
  assert_int_equal(ordo_exec_declare(&FP.e, O, FP_N, &eo), 0);
  FP.stop = false;
  pthread_barrier_init(&fp_bar, NULL, FP_N);
  /* Each join waits at most timeout_ms; each of the pool's tasks, whose
   * joins are so bounded, is then done well within the case's bound. */
  fp_timeout = (long)tu_ms((uint64_t)timeout_ms);
  uint64_t end = tu_now_ns() + tu_ms((uint64_t)timeout_ms + 10000) * 1000000u;
  for (int i = 0; i < FP_N; i++)
    pthread_create(&FP.thr[i], NULL, fp_worker, NULL);
  ftask p[FP_N];
  memset(p, 0, sizeof p);
  for (int i = 0; i < FP_N; i++) {
    p[i].fn = fp_parent;
    p[i].i = (uintptr_t)i;
    fp_submit(&p[i]);
  }
  *dl = *to = 0;
  for (int i = 0; i < FP_N; i++) {
    fp_wait_done(&p[i], end, "parent", i);
    if (p[i].rc == ORDO_EDEADLK)
      (*dl)++;
    else if (p[i].rc == ORDO_ETIMEDOUT)
      (*to)++;
    else
      assert_int_equal(p[i].rc, 0);
  }
  for (int i = 0; i < FP_N; i++)
    fp_wait_done(&fp_leaves[i], end, "leaf", i);
  pthread_mutex_lock(&FP.mu);
  FP.stop = true;
  pthread_cond_broadcast(&FP.cv);
  pthread_mutex_unlock(&FP.mu);
  for (int i = 0; i < FP_N; i++)
    pthread_join(FP.thr[i], NULL);
  for (int i = 0; i < FP_N; i++) {
    pthread_mutex_destroy(&p[i].mu);
    pthread_cond_destroy(&p[i].cv);
    pthread_mutex_destroy(&fp_leaves[i].mu);
    pthread_cond_destroy(&fp_leaves[i].cv);
  }
  pthread_barrier_destroy(&fp_bar);
  ordo_exec_destroy(FP.e);
}

static void test_foreign(void **state) {
  (void)state;
  tu_watchdog_start(O, 60, "foreign pool");
  atomic_store(&cb_count, 0);
  ordo_on_deadlock(O, count_cb, NULL);
  int dl, to;
  /* REPORT: the closing note_wait_begin reports; the joins time out. */
  run_foreign(ORDO_EXEC_REPORT, 300, &dl, &to);
  assert_int_equal(atomic_load(&cb_count), 1);
  ordo_deadlock_t d;
  assert_int_equal(records(ORDO_DL_POOL, &d), 1);
  assert_true(rec_has_key(&d, "worker:fp"));
  assert_int_equal(dl, 0);
  assert_true(to >= 1);
  /* FAIL: the closing note_wait_begin says ORDO_EDEADLK: no wait. */
  run_foreign(ORDO_EXEC_FAIL, 300, &dl, &to);
  assert_int_equal(dl, 1);
  assert_int_equal(to, 0);
  assert_int_equal(records(ORDO_DL_POOL, NULL), 2);
  assert_int_equal(atomic_load(&cb_count), 2);
  ordo_on_deadlock(O, NULL, NULL);
  tu_watchdog_stop();
}

int main(int argc, char **argv) {
  if (argc > 1)
    cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_seed_inline, setup, teardown),
      cmocka_unit_test_setup_teardown(test_seed_compensate, setup, teardown),
      cmocka_unit_test_setup_teardown(test_seed_fail, setup, teardown),
      cmocka_unit_test_setup_teardown(test_seed_report, setup, teardown),
      cmocka_unit_test_setup_teardown(test_seed_detect_off, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nested, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mixed_cycle, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lock_pool, setup, teardown),
      cmocka_unit_test_setup_teardown(test_future_cycle, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_false_report, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_running, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shutdown, setup, teardown),
      cmocka_unit_test_setup_teardown(test_args, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dump, setup, teardown),
      cmocka_unit_test_setup_teardown(test_foreign, setup, teardown),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
