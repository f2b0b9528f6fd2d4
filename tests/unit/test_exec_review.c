/*
 * test_exec_review.c -- a hostile review of src/exec after issue 31's
 * fixes: each case is one finding, written as the behaviour ordo.h and
 * src/exec/README.md promise, so that it fails while the finding stands.
 *
 * Some cases need one thread's search to run after another thread's
 * action, in a window that is otherwise microseconds wide. They open it
 * with the engine's own dump: ordo_dump writes to the caller's fd with the
 * engine's wait_mu held, so a dump into a full pipe holds wait_mu until the
 * pipe is drained (wmu_hold). A thread that then starts a future wait
 * registers it and sleeps in the futex of wait_mu before its search, which
 * /proc/self/task/<tid>/syscall shows (futex, the address of wait_mu).
 * No case sleeps to synchronise: each waits, bounded, for an event.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"
#include "core/table.h"
#include "core/table_int.h"

#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static ordo_t *O;
static ordo_exec_t *E;
/* A case that found the place unable to close (a destroy that cannot
 * return) leaves it open, so that the suite goes on. */
static bool keep_open;
static bool wd_on;

static int setup(void **state) {
  (void)state;
  keep_open = false;
  return ordo_open(&O, "mem://", NULL);
}

static int teardown(void **state) {
  (void)state;
  if (wd_on) {
    tu_watchdog_stop();
    wd_on = false;
  }
  if (!keep_open)
    ordo_close(O);
  O = NULL;
  return 0;
}

static void wd_start(double s, const char *what) {
  tu_watchdog_start(O, s, what);
  wd_on = true;
}

static void wd_stop(void) {
  if (wd_on)
    tu_watchdog_stop();
  wd_on = false;
}

/* A failed expectation: the watchdog goes first, so that it cannot fire in
 * a later case. */
#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      wd_stop();                                                               \
      fail_msg(__VA_ARGS__);                                                   \
    }                                                                          \
  } while (0)

/* ---- Helpers ------------------------------------------------------------ */

static int my_tid(void) {
  return (int)syscall(SYS_gettid);
}

static uint64_t deadline_in(uint64_t ms) {
  return tu_now_ns() + tu_ms(ms) * 1000000u;
}

/* Waits (bounded) until *flag is set. */
static bool spin_until(_Atomic int *flag) {
  uint64_t end = deadline_in(10000);
  while (!atomic_load(flag)) {
    if (tu_now_ns() >= end)
      return false;
    sched_yield();
  }
  return true;
}

/* The system call thread tid sleeps in and its first argument; -1 while it
 * runs (or cannot be read). */
static long thread_syscall(int tid, unsigned long *arg0) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  long nr;
  unsigned long a0 = 0;
  if (sscanf(buf, "%ld %lx", &nr, &a0) < 1)
    return -1; /* "running" */
  if (arg0)
    *arg0 = a0;
  return nr;
}

/* Waits (bounded) until thread tid sleeps in system call nr, on the futex
 * word addr when addr is not 0, or on any other word when not_addr is set. */
static bool wait_sleeping(int tid, long nr, unsigned long addr,
                          unsigned long not_addr) {
  uint64_t end = deadline_in(10000);
  while (tu_now_ns() < end) {
    unsigned long a0 = 0;
    if (thread_syscall(tid, &a0) == nr && (!addr || a0 == addr) &&
        (!not_addr || a0 != not_addr))
      return true;
    tu_sleep_us(100);
  }
  return false;
}

/* The engine's wait_mu, as the futex word a thread that waits for it
 * sleeps on. */
static unsigned long wait_mu_word(void) {
  return (unsigned long)&ordo__engine_table(O)->wait_mu.m;
}

/* The executors' mutex (xplace.mu), as a futex word: the head of struct
 * ordo__xplace (src/exec/exec.c) is mirrored here. */
struct xplace_head {
  ordo_t *o;
  ordo__table *tab;
  ordo__mutex mu;
};
static unsigned long exec_mu_word(void) {
  struct xplace_head *xp = (struct xplace_head *)atomic_load(&O->exec);
  return (unsigned long)&xp->mu.m;
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

static int count_of(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p++)
    n++;
  return n;
}

/* Waits (bounded) until the dump shows at least n future waits. */
static bool wait_waits(int n) {
  uint64_t end = deadline_in(10000);
  while (tu_now_ns() < end) {
    char *j = dump(ORDO_GRAPH_JSON);
    int c = count_of(j, "\"waiter\": ");
    free(j);
    if (c >= n)
      return true;
    tu_sleep_us(200);
  }
  return false;
}

/* The "workers" of the first executor in the JSON dump (its nalive). */
static int dump_workers(void) {
  char *j = dump(ORDO_GRAPH_JSON);
  char *p = strstr(j, "\"workers\": ");
  int n = p ? atoi(p + strlen("\"workers\": ")) : -1;
  free(j);
  return n;
}

/* The records of kind kind. */
static int records(int kind) {
  static ordo_deadlock_t r[64];
  int n = ordo_deadlocks(O, r, 64), k = 0;
  for (int i = 0; i < n; i++)
    k += r[i].kind == kind;
  return k;
}

static _Atomic int cb_count;
static void count_cb(const ordo_deadlock_t *d, void *arg) {
  (void)d;
  (void)arg;
  atomic_fetch_add(&cb_count, 1);
}

static void *leaf(void *arg) {
  return arg;
}

/* ---- Holding the engine's wait_mu ------------------------------------------
 * ordo_dump takes wait_mu and writes through a stdio buffer to the caller's
 * fd: with 256 keys held its output passes the buffer, and with the pipe
 * full the first flush sleeps in write(2), wait_mu held, until the pipe is
 * read. */

typedef struct wmu_hold {
  int rfd, wfd;
  pthread_t thr;
  _Atomic int tid, done;
  ordo_txn_t *bulk;
} wmu_hold;

static void *wmu_dumper(void *arg) {
  wmu_hold *h = arg;
  atomic_store(&h->tid, my_tid());
  ordo_dump(O, h->wfd);
  atomic_store(&h->done, 1);
  return NULL;
}

static void wmu_hold_start(wmu_hold *h) {
  memset(h, 0, sizeof *h);
  assert_int_equal(ordo_txn_begin(O, &h->bulk, NULL), 0);
  for (int i = 0; i < 256; i++) {
    char k[16];
    int n = snprintf(k, sizeof k, "bulk-%03d", i);
    assert_int_equal(ordo_lock(h->bulk, k, (size_t)n, ORDO_MODE_X, 0), 0);
  }
  int p[2];
  assert_int_equal(pipe(p), 0);
  h->rfd = p[0];
  h->wfd = p[1];
  (void)fcntl(h->wfd, F_SETPIPE_SZ, 4096);
  /* Fill it to the last byte: any write then sleeps. */
  assert_int_equal(fcntl(h->wfd, F_SETFL, O_NONBLOCK), 0);
  char junk[4096];
  memset(junk, 'x', sizeof junk);
  while (write(h->wfd, junk, sizeof junk) > 0)
    ;
  while (write(h->wfd, junk, 1) > 0)
    ;
  assert_int_equal(fcntl(h->wfd, F_SETFL, 0), 0);
  assert_int_equal(pthread_create(&h->thr, NULL, wmu_dumper, h), 0);
  assert_true(spin_until(&h->tid));
  assert_true(wait_sleeping(atomic_load(&h->tid), SYS_write, 0, 0));
}

static void wmu_hold_end(wmu_hold *h) {
  assert_int_equal(fcntl(h->rfd, F_SETFL, O_NONBLOCK), 0);
  uint64_t end = deadline_in(10000);
  char buf[8192];
  while (!atomic_load(&h->done)) {
    assert_true(tu_now_ns() < end);
    struct pollfd pf = {h->rfd, POLLIN, 0};
    (void)poll(&pf, 1, 10);
    while (read(h->rfd, buf, sizeof buf) > 0)
      ;
  }
  pthread_join(h->thr, NULL);
  close(h->rfd);
  close(h->wfd);
  ordo_txn_end(h->bulk);
}

/* A task that waits, when told, on the future in target. */
typedef struct ctl {
  _Atomic int started, go, tid, rc, calling;
  ordo_future_t *target;
} ctl;

static void *ctl_task(void *arg) {
  ctl *c = arg;
  atomic_store(&c->tid, my_tid());
  atomic_store(&c->started, 1);
  if (!spin_until(&c->go))
    return NULL;
  atomic_store(&c->calling, 1);
  atomic_store(&c->rc, ordo_future_wait(c->target, (long)tu_ms(10000), NULL));
  return NULL;
}

/* ordo_exec_destroy on a thread of its own, so that a destroy that cannot
 * return fails the case instead of hanging it. */
static _Atomic int destroyed;
static void *destroy_main(void *arg) {
  ordo_exec_destroy(arg);
  atomic_store(&destroyed, 1);
  return NULL;
}

static bool destroy_bounded(ordo_exec_t *e, uint64_t ms) {
  pthread_t thr;
  atomic_store(&destroyed, 0);
  assert_int_equal(pthread_create(&thr, NULL, destroy_main, e), 0);
  uint64_t end = deadline_in(ms);
  while (!atomic_load(&destroyed) && tu_now_ns() < end)
    tu_sleep_us(1000);
  if (!atomic_load(&destroyed)) {
    pthread_detach(thr);
    return false;
  }
  pthread_join(thr, NULL);
  return true;
}

/* ---- 1. COMPENSATE: a spare reserved for a wait that then ends -------------
 * pool_check reserves the spare (nspare++, nalive++) when it gives the
 * actor XA_SPAWN; only spare_start, run by act_locked, starts it or gives
 * the reservation back. wait_loop looks at the target's state and at
 * w->cancelled before the action, and the detection counts a cancelled wait
 * as stuck: a wait cancelled (ordo_future_cancel of its running target)
 * before its search runs is made the actor, returns ORDO_ECANCELED, and the
 * reservation stays forever: the pool counts a worker that does not exist
 * (nbusy < nalive: no pool deadlock of this pool is found again), and
 * ordo_exec_destroy waits for nalive == 0 for good. */
static void test_spawn_reservation_leaks(void **state) {
  (void)state;
  wd_start(60, "spawn reservation");
  ordo_exec_options_t eo;
  ordo_exec_options_init(&eo);
  eo.policy = ORDO_EXEC_COMPENSATE;
  assert_int_equal(ordo_exec_create(&E, O, 2, &eo), 0);
  static ctl a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  ordo_future_t *fa, *fb, *fz;
  assert_int_equal(ordo_exec_submit(E, ctl_task, &a, &fa), 0);
  assert_int_equal(ordo_exec_submit(E, ctl_task, &b, &fb), 0);
  assert_true(spin_until(&a.started) && spin_until(&b.started));
  assert_int_equal(ordo_exec_submit(E, leaf, NULL, &fz), 0); /* queued */
  a.target = fb; /* A waits on B, running */
  b.target = fz; /* B waits on Z, queued: the pool deadlock */
  wmu_hold h;
  wmu_hold_start(&h);
  unsigned long W = wait_mu_word();
  /* A registers its wait and sleeps on wait_mu before its search; then B
   * does (after A in the futex's queue). */
  atomic_store(&a.go, 1);
  EXPECT(wait_sleeping(atomic_load(&a.tid), SYS_futex, W, 0),
         "task A did not reach its search");
  atomic_store(&b.go, 1);
  EXPECT(wait_sleeping(atomic_load(&b.tid), SYS_futex, W, 0),
         "task B did not reach its search");
  /* A's wait ends here (ordo.h: the waits on a running task can be
   * cancelled); its search has not run yet. */
  EXPECT(ordo_future_cancel(fb) == ORDO_EBUSY, "cancel of a running task");
  wmu_hold_end(&h);
  EXPECT(ordo_future_wait(fa, (long)tu_ms(10000), NULL) == 0, "A ended");
  EXPECT(ordo_future_wait(fb, (long)tu_ms(10000), NULL) == 0, "B ended");
  EXPECT(atomic_load(&a.rc) == ORDO_ECANCELED, "A's wait: %s",
         ordo_err_name(atomic_load(&a.rc)));
  EXPECT(atomic_load(&b.rc) == 0, "B's wait: %s",
         ordo_err_name(atomic_load(&b.rc)));
  /* Every task is over and the queue is empty: any spare has left, and
   * the pool is back to its 2 workers. */
  uint64_t end = deadline_in(2000);
  while (dump_workers() != 2 && tu_now_ns() < end)
    tu_sleep_us(1000);
  int nw = dump_workers();
  bool gone = destroy_bounded(E, 3000);
  keep_open = !gone; /* ordo_close would hang in ordo_exec_destroy */
  EXPECT(nw == 2 && gone,
         "every task is done and the queue empty, yet the pool counts %d "
         "workers (2 made, no spare running), and ordo_exec_destroy %s: the "
         "spare reserved for A's cancelled wait was never started nor given "
         "back",
         nw, gone ? "returned" : "has not returned after 3000 ms");
  ordo_future_release(fa);
  ordo_future_release(fb);
  ordo_future_release(fz);
  wd_stop();
}

/* ---- 2. A cancelled wait is still an edge: a false mixed victim -------------
 * A holds L and waits on B's future; B waits for L: a mixed cycle. The wait
 * is cancelled (ordo_future_cancel of B, running) before its search runs:
 * A's wait is over, A goes on and lets L go, and B gets L. But expand()
 * and stuck() look at w->action and the target's state, never at
 * w->cancelled, so the search still sees A -> B and aborts B's txn. */

static ordo_future_t *cv_fb;
static _Atomic int cv_holds, cv_go, cv_tid, cv_a_rc = 1, cv_b_rc = 1;

static void *cv_a(void *arg) {
  (void)arg;
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  assert_int_equal(ordo_lock(t, "L", 1, ORDO_MODE_X, 0), 0);
  atomic_store(&cv_tid, my_tid());
  atomic_store(&cv_holds, 1);
  if (spin_until(&cv_go))
    atomic_store(&cv_a_rc, ordo_future_wait(cv_fb, (long)tu_ms(10000), NULL));
  ordo_txn_end(t); /* L goes */
  return NULL;
}

static void *cv_b(void *arg) {
  (void)arg;
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  if (spin_until(&cv_holds))
    atomic_store(&cv_b_rc,
                 ordo_lock(t, "L", 1, ORDO_MODE_X, (long)tu_ms(10000)));
  ordo_txn_end(t);
  return NULL;
}

static void test_cancelled_wait_mixed_victim(void **state) {
  (void)state;
  wd_start(60, "cancelled wait, mixed victim");
  assert_int_equal(ordo_exec_create(&E, O, 2, NULL), 0);
  ordo_future_t *fa;
  assert_int_equal(ordo_exec_submit(E, cv_a, NULL, &fa), 0);
  assert_int_equal(ordo_exec_submit(E, cv_b, NULL, &cv_fb), 0);
  assert_true(spin_until(&cv_holds));
  assert_true(tu_wait_waiting(O, 1)); /* B waits for L */
  wmu_hold h;
  wmu_hold_start(&h);
  atomic_store(&cv_go, 1);
  EXPECT(wait_sleeping(atomic_load(&cv_tid), SYS_futex, wait_mu_word(), 0),
         "task A did not reach its search");
  EXPECT(ordo_future_cancel(cv_fb) == ORDO_EBUSY, "cancel of B, running");
  wmu_hold_end(&h);
  EXPECT(ordo_future_wait(fa, (long)tu_ms(10000), NULL) == 0, "A ended");
  EXPECT(ordo_future_wait(cv_fb, (long)tu_ms(10000), NULL) == 0, "B ended");
  EXPECT(atomic_load(&cv_a_rc) == ORDO_ECANCELED, "A's wait: %s",
         ordo_err_name(atomic_load(&cv_a_rc)));
  int mixed = records(ORDO_DL_MIXED);
  EXPECT(atomic_load(&cv_b_rc) == 0 && mixed == 0,
         "B's ordo_lock returned %s and %d mixed record(s) were left: B was "
         "made the victim of a cycle through A's wait, which "
         "ordo_future_cancel had ended before the search ran",
         ordo_err_name(atomic_load(&cv_b_rc)), mixed);
  ordo_exec_destroy(E);
  ordo_future_release(fa);
  ordo_future_release(cv_fb);
  wd_stop();
}

/* ---- 3. A queue-order (soft) edge makes a mixed victim ---------------------
 * Z, outside the pool, holds L in S. T1's txn Y asks {L, M} in X (M is
 * T3's), T2's txn X asks L in X: X waits for Z (held) and is queued behind
 * Y (a soft edge). T3 then waits on T2's future. The executor's search
 * reads ordo__owner_blockers_locked, which names Y among X's blockers,
 * and finds T2 -> T1 -> T3 -> T2, aborting X. But the engine grants past a
 * waiter that has not starved (src/detect/README.md, "The wait-for
 * graph"), and resolves a soft cycle by reordering, never by an abort: when
 * Z lets L go, X is granted, T2 ends, T3's wait ends, and Y gets both. */

static ordo_future_t *se_f2;
static _Atomic int se_stage, se_t3_tid, se_t3_calling;
static _Atomic int se_rc1 = 1, se_rc2 = 1, se_rc3 = 1;

static void *se_t1(void *arg) {
  (void)arg;
  ordo_txn_t *y;
  assert_int_equal(ordo_txn_begin(O, &y, NULL), 0);
  ordo_req_t r[2] = {{"L", 1, ORDO_MODE_X}, {"M", 1, ORDO_MODE_X}};
  atomic_store(&se_rc1, ordo_lock_all(y, r, 2, (long)tu_ms(10000)));
  ordo_txn_end(y);
  return NULL;
}

static void *se_t2(void *arg) {
  (void)arg;
  ordo_txn_t *x;
  assert_int_equal(ordo_txn_begin(O, &x, NULL), 0);
  if (spin_until(&se_stage))
    atomic_store(&se_rc2,
                 ordo_lock(x, "L", 1, ORDO_MODE_X, (long)tu_ms(10000)));
  ordo_txn_end(x);
  return NULL;
}

static void *se_t3(void *arg) {
  _Atomic int *holds = arg;
  ordo_txn_t *h;
  assert_int_equal(ordo_txn_begin(O, &h, NULL), 0);
  assert_int_equal(ordo_lock(h, "M", 1, ORDO_MODE_X, 0), 0);
  atomic_store(&se_t3_tid, my_tid());
  atomic_store(holds, 1);
  while (atomic_load(&se_stage) < 2)
    sched_yield();
  atomic_store(&se_t3_calling, 1);
  atomic_store(&se_rc3, ordo_future_wait(se_f2, (long)tu_ms(10000), NULL));
  ordo_txn_end(h);
  return NULL;
}

static void test_soft_edge_mixed_victim(void **state) {
  (void)state;
  wd_start(60, "soft edge, mixed victim");
  ordo_txn_t *z;
  assert_int_equal(ordo_txn_begin(O, &z, NULL), 0);
  assert_int_equal(ordo_lock(z, "L", 1, ORDO_MODE_S, 0), 0);
  assert_int_equal(ordo_exec_create(&E, O, 3, NULL), 0);
  static _Atomic int t3_holds;
  atomic_store(&t3_holds, 0);
  ordo_future_t *f1, *f3;
  assert_int_equal(ordo_exec_submit(E, se_t3, &t3_holds, &f3), 0);
  assert_true(spin_until(&t3_holds));
  assert_int_equal(ordo_exec_submit(E, se_t1, NULL, &f1), 0);
  assert_true(tu_wait_waiting(O, 1)); /* Y queued on L and M */
  assert_int_equal(ordo_exec_submit(E, se_t2, NULL, &se_f2), 0);
  atomic_store(&se_stage, 1);
  assert_true(tu_wait_waiting(O, 2)); /* X queued on L, behind Y */
  atomic_store(&se_stage, 2);
  /* T3's wait has searched once it is over (a victim was taken: T2's
   * future is done) or sleeps on a futex that is neither wait_mu nor the
   * executor's mutex: its task's condition. */
  assert_true(spin_until(&se_t3_calling));
  uint64_t end = deadline_in(10000);
  for (;;) {
    if (atomic_load(&se_rc3) != 1)
      break;
    unsigned long a0 = 0;
    if (thread_syscall(atomic_load(&se_t3_tid), &a0) == SYS_futex &&
        a0 != wait_mu_word() && a0 != exec_mu_word())
      break;
    EXPECT(tu_now_ns() < end, "T3's wait neither ended nor slept");
    tu_sleep_us(200);
  }
  ordo_txn_end(z); /* L goes: no cycle is left, if there ever was one */
  EXPECT(ordo_future_wait(f1, (long)tu_ms(10000), NULL) == 0, "T1 ended");
  EXPECT(ordo_future_wait(se_f2, (long)tu_ms(10000), NULL) == 0, "T2 ended");
  EXPECT(ordo_future_wait(f3, (long)tu_ms(10000), NULL) == 0, "T3 ended");
  int mixed = records(ORDO_DL_MIXED);
  EXPECT(atomic_load(&se_rc2) == 0 && mixed == 0,
         "T2's ordo_lock returned %s with %d mixed record(s) (T1 %s, T3 "
         "%s): a txn was aborted for a cycle through a queue-order edge, "
         "which the engine would have granted past",
         ordo_err_name(atomic_load(&se_rc2)), mixed,
         ordo_err_name(atomic_load(&se_rc1)),
         ordo_err_name(atomic_load(&se_rc3)));
  ordo_exec_destroy(E);
  ordo_future_release(f1);
  ordo_future_release(se_f2);
  ordo_future_release(f3);
  wd_stop();
}

/* ---- 4. A cycle of future waits is recorded again at every recheck ---------
 * Two tasks wait on each other. Under INLINE (the default), COMPENSATE and
 * REPORT the cycle "is recorded and the wait goes on" (README, "Mixed
 * cycles"): one detection, one record. Since issue 31 a wait whose chain is
 * waited on searches again after 1 ms, doubling to 100 ms, and each search
 * finds the cycle again and records it again (on_wait gives no sig and no
 * mark to a cycle of futures): about ten records and callbacks a second
 * per waiter, for as long as the waits last. */

static ordo_future_t *fc_f[2];
static _Atomic int fc_ready, fc_rc[2];

static void *fc_task(void *arg) {
  uintptr_t i = (uintptr_t)arg;
  atomic_fetch_add(&fc_ready, 1);
  while (atomic_load(&fc_ready) < 3)
    sched_yield();
  atomic_store(&fc_rc[i], ordo_future_wait(fc_f[1 - i], 400, NULL));
  return NULL;
}

static void test_future_cycle_recorded_once(void **state) {
  (void)state;
  wd_start(60, "future cycle, one record");
  atomic_store(&cb_count, 0);
  ordo_on_deadlock(O, count_cb, NULL);
  assert_int_equal(ordo_exec_create(&E, O, 2, NULL), 0);
  atomic_store(&fc_ready, 0);
  for (uintptr_t i = 0; i < 2; i++)
    assert_int_equal(ordo_exec_submit(E, fc_task, (void *)i, &fc_f[i]), 0);
  atomic_fetch_add(&fc_ready, 1); /* both futures are known */
  EXPECT(ordo_exec_shutdown(E, ORDO_EXEC_DRAIN, (long)tu_ms(10000)) == 0,
         "drain");
  int mixed = records(ORDO_DL_MIXED);
  EXPECT(mixed == 1 && atomic_load(&cb_count) == 1,
         "one cycle of two future waits (each 400 ms, ending %s and %s) left "
         "%d mixed records and %d on_deadlock calls",
         ordo_err_name(atomic_load(&fc_rc[0])),
         ordo_err_name(atomic_load(&fc_rc[1])), mixed, atomic_load(&cb_count));
  ordo_exec_destroy(E);
  ordo_future_release(fc_f[0]);
  ordo_future_release(fc_f[1]);
  ordo_on_deadlock(O, NULL, NULL);
  wd_stop();
}

/* ---- 5. The recheck costs CPU while nothing happens -------------------------
 * A recursive fork-join as deep as the pool: each level submits the next
 * and waits for it; the last submits one more task (queued: the pool is
 * saturated) and works on (here: waits at a gate, outside ordo). No
 * deadlock, and nothing changes. Before issue 31 the waits slept. Now each
 * of the 127 waits searches again every 100 ms (need_search_locked: the
 * pool is saturated with a queue, and each chain is waited on), and each
 * search is a pool_check whose greatest fixed point takes up to 127 passes
 * over the 128 running tops, under the engine's wait_mu. */

#define CPU_N 128
static _Atomic int cpu_started;
static pthread_mutex_t cpu_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cpu_cv = PTHREAD_COND_INITIALIZER;
static bool cpu_open;

static void *cpu_link(void *arg) {
  uintptr_t d = (uintptr_t)arg;
  atomic_fetch_add(&cpu_started, 1);
  ordo_future_t *f;
  if (d == CPU_N - 1) {
    assert_int_equal(ordo_exec_submit(E, leaf, NULL, &f), 0);
    ordo_future_release(f);
    pthread_mutex_lock(&cpu_mu);
    while (!cpu_open)
      pthread_cond_wait(&cpu_cv, &cpu_mu);
    pthread_mutex_unlock(&cpu_mu);
    return NULL;
  }
  assert_int_equal(ordo_exec_submit(E, cpu_link, (void *)(d + 1), &f), 0);
  int rc = ordo_future_wait(f, ORDO_FOREVER, NULL);
  ordo_future_release(f);
  return (void *)(intptr_t)rc;
}

static double cpu_seconds(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

static void test_idle_recheck_cpu(void **state) {
  (void)state;
  wd_start(120, "idle recheck CPU");
  cpu_open = false;
  atomic_store(&cpu_started, 0);
  assert_int_equal(ordo_exec_create(&E, O, CPU_N, NULL), 0);
  ordo_future_t *root;
  assert_int_equal(ordo_exec_submit(E, cpu_link, NULL, &root), 0);
  EXPECT(wait_waits(CPU_N - 1), "the chain of waits did not form");
  /* Let the rechecks' intervals reach their 100 ms, then measure one
   * second in which nothing happens. */
  tu_sleep_us(300000);
  double c0 = cpu_seconds();
  uint64_t t0 = tu_now_ns();
  tu_sleep_us(1000000);
  double used = cpu_seconds() - c0;
  double wall = (double)(tu_now_ns() - t0) / 1e9;
  pthread_mutex_lock(&cpu_mu);
  cpu_open = true;
  pthread_cond_broadcast(&cpu_cv);
  pthread_mutex_unlock(&cpu_mu);
  EXPECT(ordo_future_wait(root, (long)tu_ms(30000), NULL) == 0, "root");
  ordo_future_release(root);
  ordo_exec_destroy(E);
  EXPECT(used < 0.05 * wall,
         "%d workers waiting, nothing changing: the process used %.0f ms of "
         "CPU in %.0f ms (%.0f%% of a core)",
         CPU_N, used * 1e3, wall * 1e3, 100.0 * used / wall);
  wd_stop();
}

/* ---- 5b. A pool with free workers rechecks too ------------------------------
 * src/exec/README.md: "An idle pool, or a pool with a free worker, never
 * rechecks". wait_loop rechecks whenever need_search_locked says so, and it
 * says so for a chain that holds a txn or is waited on, whatever the pool:
 * here a task holding one txn waits on a running task in a pool of 4 with
 * 2 workers free and an empty queue, and its thread wakes for a search
 * (wait_mu, a mixed search) every 100 ms for as long as it waits. */

static _Atomic int rk_tid, rk_waiting;
static pthread_mutex_t rk_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rk_cv = PTHREAD_COND_INITIALIZER;
static bool rk_open;

static void *rk_busy(void *arg) {
  (void)arg;
  pthread_mutex_lock(&rk_mu);
  while (!rk_open)
    pthread_cond_wait(&rk_cv, &rk_mu);
  pthread_mutex_unlock(&rk_mu);
  return NULL;
}

static void *rk_holder(void *arg) {
  ordo_future_t *busy = arg;
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  assert_int_equal(ordo_lock(t, "K", 1, ORDO_MODE_X, 0), 0);
  atomic_store(&rk_tid, my_tid());
  atomic_store(&rk_waiting, 1);
  int rc = ordo_future_wait(busy, (long)tu_ms(30000), NULL);
  ordo_txn_end(t);
  return (void *)(intptr_t)rc;
}

/* The voluntary context switches of thread tid so far. */
static long ctx_switches(int tid) {
  char path[64], line[128];
  snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
  FILE *f = fopen(path, "r");
  long n = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
      break;
  if (f)
    fclose(f);
  return n;
}

static void test_free_worker_rechecks(void **state) {
  (void)state;
  wd_start(60, "free worker rechecks");
  rk_open = false;
  assert_int_equal(ordo_exec_create(&E, O, 4, NULL), 0);
  ordo_future_t *busy, *holder;
  assert_int_equal(ordo_exec_submit(E, rk_busy, NULL, &busy), 0);
  assert_int_equal(ordo_exec_submit(E, rk_holder, busy, &holder), 0);
  assert_true(spin_until(&rk_waiting));
  EXPECT(wait_waits(1), "the holder's wait");
  /* Past the first 127 ms of doubling, then one second. */
  tu_sleep_us(300000);
  int tid = atomic_load(&rk_tid);
  long s0 = ctx_switches(tid);
  uint64_t t0 = tu_now_ns();
  tu_sleep_us(1000000);
  long woke = ctx_switches(tid) - s0;
  double ms = (double)(tu_now_ns() - t0) / 1e6;
  pthread_mutex_lock(&rk_mu);
  rk_open = true;
  pthread_cond_broadcast(&rk_cv);
  pthread_mutex_unlock(&rk_mu);
  void *v = NULL;
  EXPECT(ordo_future_wait(holder, (long)tu_ms(10000), &v) == 0 && v == NULL,
         "the holder's wait ended well");
  ordo_exec_destroy(E);
  ordo_future_release(busy);
  ordo_future_release(holder);
  EXPECT(woke <= 2,
         "a wait in a pool of 4 with 2 workers free and no queue (its task "
         "holds a txn) woke %ld times in %.0f ms while nothing changed",
         woke, ms);
  wd_stop();
}

/* ---- 6. Two pools waiting on each other ------------------------------------
 * P's one worker waits on a task queued on Q, Q's one worker on a task
 * queued on P. In ordo.h's graph a queued task waits for a worker of its
 * pool, so this is the cycle a -> q1 -> worker:Q -> b -> p1 -> worker:P ->
 * a; nothing is found, recorded or helped, and both waits run out of time.
 * A limit, now written in ordo.h as in the README ("Limits"): the case
 * checks what they say (the waits end by their timeouts, nothing is
 * recorded, both pools run tasks again after), so that a change to either
 * side is seen. */

static ordo_exec_t *XP, *XQ;
static _Atomic int xp_started, xp_rc[2];

static void *xp_task(void *arg) {
  uintptr_t i = (uintptr_t)arg;
  atomic_fetch_add(&xp_started, 1);
  while (atomic_load(&xp_started) < 2)
    sched_yield();
  ordo_future_t *f;
  assert_int_equal(ordo_exec_submit(i ? XP : XQ, leaf, NULL, &f), 0);
  atomic_store(&xp_rc[i], ordo_future_wait(f, 300, NULL));
  ordo_future_release(f);
  return NULL;
}

static void test_cross_pool_cycle(void **state) {
  (void)state;
  wd_start(60, "two pools");
  ordo_exec_options_t eo;
  ordo_exec_options_init(&eo);
  eo.name = "P";
  assert_int_equal(ordo_exec_create(&XP, O, 1, &eo), 0);
  eo.name = "Q";
  assert_int_equal(ordo_exec_create(&XQ, O, 1, &eo), 0);
  atomic_store(&xp_started, 0);
  ordo_future_t *a, *b;
  assert_int_equal(ordo_exec_submit(XP, xp_task, (void *)0, &a), 0);
  assert_int_equal(ordo_exec_submit(XQ, xp_task, (void *)1, &b), 0);
  EXPECT(ordo_future_wait(a, (long)tu_ms(10000), NULL) == 0, "a ended");
  EXPECT(ordo_future_wait(b, (long)tu_ms(10000), NULL) == 0, "b ended");
  ordo_deadlock_t r[4];
  int n = ordo_deadlocks(O, r, 4);
  int rc0 = atomic_load(&xp_rc[0]), rc1 = atomic_load(&xp_rc[1]);
  /* One wait runs out of time; the other task then runs, so its wait may
   * end well. */
  EXPECT(n == 0 && (rc0 == ORDO_ETIMEDOUT || rc1 == ORDO_ETIMEDOUT) &&
             (rc0 == 0 || rc0 == ORDO_ETIMEDOUT) &&
             (rc1 == 0 || rc1 == ORDO_ETIMEDOUT),
         "P's worker waited on Q's queue and Q's on P's: waits %s and %s, "
         "%d records (ordo.h: not found; the timeouts end it)",
         ordo_err_name(rc0), ordo_err_name(rc1), n);
  for (int i = 0; i < 2; i++) {
    ordo_future_t *g;
    assert_int_equal(ordo_exec_submit(i ? XQ : XP, leaf, NULL, &g), 0);
    EXPECT(ordo_future_wait(g, (long)tu_ms(10000), NULL) == 0,
           "pool %s runs a task after the cross-pool wait", i ? "Q" : "P");
    ordo_future_release(g);
  }
  ordo_exec_destroy(XP);
  ordo_exec_destroy(XQ);
  ordo_future_release(a);
  ordo_future_release(b);
  wd_stop();
}

/* ---- 7. A foreign pool's deadlock formed by a release ----------------------
 * Issue 31's defect 3 for a foreign pool: A (task 1) holds L in S and
 * waits (note_wait_begin) on task 3, queued; B (task 2) waits for L in X,
 * held by A and by the main thread. Then the main thread lets L go: B
 * waits for A alone, A for the queue, and no worker is free. The fix
 * rechecked in wait_loop, which a foreign pool's waits never enter.
 * Answered otherwise: B's X request is granted only once A lets go too,
 * and A is stuck, so the pool is deadlocked already at A's note_wait_begin
 * (a block event), release or not (the pool check now counts a lock wait
 * stuck when one holder is a stuck worker's txn). The case checks one
 * record at A's block event, none more after main's release, and that
 * everything moves again once the pool's own join ends (B gets L). A
 * formation with no block event at all (a grant to a stuck worker's async
 * request) stays a foreign pool's limit (ordo.h, README "Limits"). */

static ordo_exec_t *FE;
static _Atomic int fr_a_holds, fr_a_go, fr_a_waiting, fr_a_stop, fr_b_rc = 1;

static void *fr_a(void *arg) {
  (void)arg;
  assert_int_equal(ordo_exec_note_started(FE, 1), 0);
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  assert_int_equal(ordo_lock(t, "L", 1, ORDO_MODE_S, 0), 0);
  atomic_store(&fr_a_holds, 1);
  if (spin_until(&fr_a_go)) {
    assert_int_equal(ordo_exec_note_wait_begin(FE, 3), 0);
    atomic_store(&fr_a_waiting, 1);
    /* The pool's own join of task 3 (which no worker is free to run). */
    spin_until(&fr_a_stop);
    assert_int_equal(ordo_exec_note_wait_end(FE, 3), 0);
  }
  ordo_txn_end(t);
  assert_int_equal(ordo_exec_note_done(FE, 1), 0);
  return NULL;
}

static void *fr_b(void *arg) {
  (void)arg;
  assert_int_equal(ordo_exec_note_started(FE, 2), 0);
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  if (spin_until(&fr_a_holds))
    atomic_store(&fr_b_rc,
                 ordo_lock(t, "L", 1, ORDO_MODE_X, (long)tu_ms(10000)));
  ordo_txn_end(t);
  assert_int_equal(ordo_exec_note_done(FE, 2), 0);
  return NULL;
}

static void test_foreign_release_forms(void **state) {
  (void)state;
  wd_start(60, "foreign pool, release");
  ordo_exec_options_t eo;
  ordo_exec_options_init(&eo);
  eo.policy = ORDO_EXEC_REPORT;
  eo.name = "fp";
  assert_int_equal(ordo_exec_declare(&FE, O, 2, &eo), 0);
  ordo_txn_t *m;
  assert_int_equal(ordo_txn_begin(O, &m, NULL), 0);
  assert_int_equal(ordo_lock(m, "L", 1, ORDO_MODE_S, 0), 0);
  for (uintptr_t k = 1; k <= 3; k++)
    assert_int_equal(ordo_exec_note_queued(FE, k), 0);
  pthread_t ta, tb;
  assert_int_equal(pthread_create(&ta, NULL, fr_a, NULL), 0);
  assert_true(spin_until(&fr_a_holds));
  assert_int_equal(pthread_create(&tb, NULL, fr_b, NULL), 0);
  assert_true(tu_wait_waiting(O, 1)); /* B waits for L: main and A hold it */
  atomic_store(&fr_a_go, 1);
  assert_true(spin_until(&fr_a_waiting));
  int before = records(ORDO_DL_POOL);
  ordo_txn_end(m); /* the release that forms it */
  /* Nothing new forms: 300 ms show no second record. */
  uint64_t end = deadline_in(300);
  while (records(ORDO_DL_POOL) == before && tu_now_ns() < end)
    tu_sleep_us(1000);
  int after = records(ORDO_DL_POOL);
  atomic_store(&fr_a_stop, 1);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  EXPECT(atomic_load(&fr_b_rc) == 0, "B got L once A let it go");
  ordo_exec_destroy(FE);
  EXPECT(before == 1 && after == 1,
         "a foreign REPORT pool deadlocked at A's wait (B's X behind A's S, "
         "task 3 queued) left %d record(s) at A's block event and %d after "
         "main's release",
         before, after - before);
  wd_stop();
}

/* ---- 8. INLINE's nested help has no bound but the worker's stack ----------
 * A chain of joins (each task submits the next and waits for it) on a
 * pool of one worker: each level is a pool deadlock that INLINE resolves by
 * running the queued task on the waiting worker's stack, "so nested joins
 * recurse" (README, "Policies"). Each level costs about 1.8 KB of stack
 * (an xwait holds a whole ordo_deadlock_t, 1584 bytes), and nothing bounds
 * the depth: past about 4,500 levels the worker's 8 MB stack overflows and
 * the process dies (SIGSEGV) instead of a wait failing or a spare starting.
 * The chain runs in a child process, so that the crash is a result. */

#define DEEP_N 10000
static ordo_exec_t *DE;

static void *deep_link(void *arg) {
  uintptr_t d = (uintptr_t)arg;
  if (d == 0)
    return (void *)1;
  ordo_future_t *f;
  if (ordo_exec_submit(DE, deep_link, (void *)(d - 1), &f))
    return NULL;
  void *v = NULL;
  int rc = ordo_future_wait(f, ORDO_FOREVER, &v);
  ordo_future_release(f);
  return rc ? NULL : (void *)((uintptr_t)v + 1);
}

/* The child: the chain, then exit 0 whatever its wait returned. */
static int inline_depth_child(void) {
  ordo_t *o;
  ordo_future_t *f;
  void *v = NULL;
  if (ordo_open(&o, "mem://", NULL) || ordo_exec_create(&DE, o, 1, NULL) ||
      ordo_exec_submit(DE, deep_link, (void *)(uintptr_t)DEEP_N, &f))
    return 2;
  (void)ordo_future_wait(f, ORDO_FOREVER, &v);
  /* Everything given back, so that ASan's leak check at exit passes. */
  ordo_future_release(f);
  ordo_exec_destroy(DE);
  ordo_close(o);
  return 0;
}

static void test_inline_depth(void **state) {
  (void)state;
  wd_start(120, "INLINE depth");
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* A fresh process (exec: a sanitizer's runtime starts clean). */
    execl("/proc/self/exe", "unit_exec_review", "--inline-depth-child",
          (char *)NULL);
    _exit(3);
  }
  int st = 0;
  uint64_t end = deadline_in(60000);
  pid_t got;
  while ((got = waitpid(pid, &st, WNOHANG)) == 0 && tu_now_ns() < end)
    tu_sleep_us(1000);
  if (got == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  EXPECT(got == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
         "a chain of %d joins on one INLINE worker: the process %s %d", DEEP_N,
         got != pid        ? "did not end within 60 s; killed, status"
         : WIFSIGNALED(st) ? "died of signal"
                           : "exited with",
         got != pid || WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  wd_stop();
}

/* ---- 9. A mixed cycle's victim ignores the place's victim policy ----------
 * The place is opened with ORDO_VICTIM_OLDEST. T1's txn waits for L1 (T2
 * holds it), T2's waits for L2 (T3 holds it), and T3 waits on T1's future.
 * Two txns on the cycle wait on locks; the engine would abort the older,
 * T1's (detect.c's victim rule: priority, then the policy). mixed_search
 * always takes the youngest, and record_ext writes the place's policy into
 * the record and counts the victim under it (stats.victims[OLDEST]). */

static ordo_future_t *vp_f1;
static _Atomic int vp_stage, vp_rc1 = 1, vp_rc2 = 1, vp_rc3 = 1;
static _Atomic uint64_t vp_id1, vp_id2;

static void *vp_t1(void *arg) {
  (void)arg;
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  atomic_store(&vp_id1, ordo_txn_id(t));
  while (atomic_load(&vp_stage) < 2)
    sched_yield();
  atomic_store(&vp_rc1, ordo_lock(t, "L1", 2, ORDO_MODE_X, (long)tu_ms(10000)));
  ordo_txn_end(t);
  return NULL;
}

static void *vp_t2(void *arg) {
  (void)arg;
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  atomic_store(&vp_id2, ordo_txn_id(t));
  assert_int_equal(ordo_lock(t, "L1", 2, ORDO_MODE_X, 0), 0);
  atomic_store(&vp_stage, 2);
  while (atomic_load(&vp_stage) < 3)
    sched_yield();
  atomic_store(&vp_rc2, ordo_lock(t, "L2", 2, ORDO_MODE_X, (long)tu_ms(10000)));
  ordo_txn_end(t);
  return NULL;
}

static void *vp_t3(void *arg) {
  (void)arg;
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  assert_int_equal(ordo_lock(t, "L2", 2, ORDO_MODE_X, 0), 0);
  atomic_store(&vp_stage, 1);
  while (atomic_load(&vp_stage) < 4)
    sched_yield();
  atomic_store(&vp_rc3, ordo_future_wait(vp_f1, (long)tu_ms(10000), NULL));
  ordo_txn_end(t);
  return NULL;
}

static void test_mixed_victim_policy(void **state) {
  (void)state;
  ordo_close(O);
  ordo_options_t oo;
  ordo_options_init(&oo);
  oo.victim = ORDO_VICTIM_OLDEST;
  assert_int_equal(ordo_open(&O, "mem://", &oo), 0);
  wd_start(60, "mixed victim policy");
  assert_int_equal(ordo_exec_create(&E, O, 3, NULL), 0);
  ordo_future_t *f2, *f3;
  assert_int_equal(ordo_exec_submit(E, vp_t3, NULL, &f3), 0);
  while (atomic_load(&vp_stage) < 1)
    sched_yield(); /* T3 holds L2 */
  assert_int_equal(ordo_exec_submit(E, vp_t1, NULL, &vp_f1), 0);
  while (!atomic_load(&vp_id1))
    sched_yield(); /* T1's txn is the older */
  assert_int_equal(ordo_exec_submit(E, vp_t2, NULL, &f2), 0);
  assert_true(tu_wait_waiting(O, 1)); /* T1 waits for L1 */
  atomic_store(&vp_stage, 3);
  assert_true(tu_wait_waiting(O, 2)); /* T2 waits for L2 */
  atomic_store(&vp_stage, 4);         /* T3 waits on T1: the cycle */
  EXPECT(ordo_future_wait(vp_f1, (long)tu_ms(10000), NULL) == 0, "T1 ended");
  EXPECT(ordo_future_wait(f2, (long)tu_ms(10000), NULL) == 0, "T2 ended");
  EXPECT(ordo_future_wait(f3, (long)tu_ms(10000), NULL) == 0, "T3 ended");
  ordo_deadlock_t r[4];
  int n = ordo_deadlocks(O, r, 4);
  EXPECT(n == 1 && r[0].kind == ORDO_DL_MIXED, "one mixed record: %d", n);
  EXPECT(r[0].victim == atomic_load(&vp_id1),
         "victim policy OLDEST (the record says policy %d): the victim was "
         "txn %" PRIu64 " (T2's, the younger; its lock %s), not txn %" PRIu64
         " (T1's, the older; its lock %s)",
         (int)r[0].policy, r[0].victim, ordo_err_name(atomic_load(&vp_rc2)),
         atomic_load(&vp_id1), ordo_err_name(atomic_load(&vp_rc1)));
  ordo_exec_destroy(E);
  ordo_future_release(vp_f1);
  ordo_future_release(f2);
  ordo_future_release(f3);
  wd_stop();
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--inline-depth-child") == 0)
    return inline_depth_child();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_spawn_reservation_leaks, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_cancelled_wait_mixed_victim, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_soft_edge_mixed_victim, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_future_cycle_recorded_once, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_idle_recheck_cpu, setup, teardown),
      cmocka_unit_test_setup_teardown(test_free_worker_rechecks, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_cross_pool_cycle, setup, teardown),
      cmocka_unit_test_setup_teardown(test_foreign_release_forms, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_inline_depth, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mixed_victim_policy, setup,
                                      teardown),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
