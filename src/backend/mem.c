/*
 * mem.c -- the in-process backend, "mem://": the engine of src/core behind
 * the common backend interface. Blocking calls wait on the txn's own
 * condition variable for the engine's event; the asynchronous form passes
 * the event straight to the caller's callback. See src/backend/README.md.
 *
 * Interface: ordo__backend_mem.
 */
#include "core/fast.h"
#include "ordo_tsa.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct mem_place {
  struct ordo_s base;
  ordo__table *tab;
  _Atomic uint64_t next_id;
  /* Waiters spinning now, and how many may (one per spare CPU): spinning
   * where no CPU is free only delays the holder it waits for. */
  _Atomic int spinners;
  int max_spinners; /* read-only after open */
  uint64_t spin_ns; /* read-only after open */
} mem_place;

/* A blocking wait's state: the event moves SPIN to DONE with one atomic
 * exchange and touches the txn no more; a waiter that went to sleep moved
 * SPIN to SLEEP under mu, and then the event signals under mu. */
enum { W_SPIN = 0, W_DONE = 1, W_SLEEP = 2 };

typedef struct mem_txn {
  struct ordo_txn_s base;
  ordo__owner ow;
  /*
   * mu and cv serve a waiter that sleeps: mu guards the move of wstate to
   * W_SLEEP and, after it, to W_DONE, so the event's signal cannot be
   * missed. A waiter that is still spinning needs neither: the event moves
   * wstate from W_SPIN to W_DONE with one compare-and-swap. mu is a leaf:
   * nothing else is locked while it is held. Outcome events take it with
   * no engine lock held; a poke takes it under the engine's wait_mu
   * (lock order wait_mu -> mu), so the waiter never holds mu while it
   * calls into the engine.
   */
  ordo__mutex mu;
  pthread_cond_t cv;
  _Atomic int wstate;   /* W_*: written by the waiter and the event */
  _Atomic bool poked;   /* a poke came: try again */
  _Atomic bool napping; /* idle in its wait now (the tester's view) */
  int status;           /* written by the event before wstate becomes DONE */
  ordo_done_cb ucb;     /* the async caller's callback, set before queueing */
  void *uarg;
} mem_txn;

static mem_txn *mt(ordo_txn_t *t) {
  return (mem_txn *)t;
}

static int mem_open(ordo_t **out, const char *url, const ordo_options_t *opts) {
  ORDO_UNUSED(url);
  mem_place *p = calloc(1, sizeof *p);
  if (!p)
    return ORDO_ENOMEM;
  int rc = ordo__table_create(&p->tab, opts);
  if (rc) {
    free(p);
    return rc;
  }
  atomic_init(&p->next_id, 1);
  atomic_init(&p->spinners, 0);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  p->max_spinners = cpus > 1 ? (int)(cpus - 1) : 0;
  p->spin_ns = (uint64_t)opts->spin_us * 1000u;
  p->base.engine = p->tab;
  *out = &p->base;
  return 0;
}

static void mem_close(ordo_t *o) {
  mem_place *p = (mem_place *)o;
  ordo__table_destroy(p->tab);
  free(p);
}

static void mem_txn_free(ordo__owner *w);

static int mem_txn_begin(ordo_t *o, ordo_txn_t **out, int priority) {
  mem_place *p = (mem_place *)o;
  mem_txn *t = calloc(1, sizeof *t);
  if (!t)
    return ORDO_ENOMEM;
  t->base.id = atomic_fetch_add(&p->next_id, 1);
  ordo__owner_init(p->tab, &t->ow, t->base.id, priority);
  t->ow.on_free = mem_txn_free;
  ordo__mutex_init(&t->mu);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->cv, &ca);
  pthread_condattr_destroy(&ca);
  t->base.engine = &t->ow;
  *out = &t->base;
  return 0;
}

static void mem_txn_free(ordo__owner *w) {
  mem_txn *t = (mem_txn *)((char *)w - offsetof(mem_txn, ow));
  ordo__mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
}

/* ordo__owner_fini waits out an event still on its way (a grant another
 * thread is delivering, mem_wake still signalling), so t may go at once;
 * ended from inside its own callback, t goes when that returns. */
static void mem_txn_end(ordo_txn_t *tx) {
  mem_txn *t = mt(tx);
  if (ordo__owner_fini(&t->ow))
    mem_txn_free(&t->ow);
}

/* The event of a blocking call: hand the status to the waiting thread. A
 * spinning waiter sees DONE after one exchange, with no system call; a
 * sleeping one is signalled before mu is let go, so it cannot free t first. */
static void mem_wake(ordo__owner *w, int status, void *arg) {
  ORDO_UNUSED(w);
  mem_txn *t = arg;
  if (status == ORDO_PENDING) {
    /* A poke (the engine holds wait_mu, so t stays): the waiter should try
     * its set again itself. A spinning waiter sees the flag; a sleeping
     * one is signalled. Both sides write, then read the other's word
     * (sequentially consistent), so one of them sees the other. */
    atomic_store(&t->poked, true);
    if (atomic_load(&t->wstate) == W_SLEEP) {
      ordo__mutex_lock(&t->mu);
      pthread_cond_signal(&t->cv);
      ordo__mutex_unlock(&t->mu);
    }
    return;
  }
  t->status = status;
  int expect = W_SPIN;
  if (atomic_compare_exchange_strong_explicit(&t->wstate, &expect, W_DONE,
                                              memory_order_acq_rel,
                                              memory_order_acquire))
    return; /* the waiter goes on; t stays until fire_all is done with it */
  ordo__mutex_lock(&t->mu);
  atomic_store_explicit(&t->wstate, W_DONE, memory_order_release);
  pthread_cond_signal(&t->cv);
  ordo__mutex_unlock(&t->mu);
}

/* On the manual clock (tests/model) time moves only when the tester says,
 * so a spin also ends after this many rounds: the spinning thread then
 * sleeps instead of holding a CPU until the tester next advances the
 * clock. */
#define MANUAL_SPIN_ROUNDS 512

/*
 * wait_spin -- spins a short while for the outcome, if a spare CPU allows
 * it, answering pokes by trying again. Returns 0 or a final status, or
 * ORDO_PENDING when the caller must go on to sleep.
 */
static int wait_spin(mem_place *p, mem_txn *t, uint64_t deadline_ns) {
  if (p->spin_ns == 0)
    return ORDO_PENDING;
  if (atomic_fetch_add_explicit(&p->spinners, 1, memory_order_relaxed) >=
      p->max_spinners) {
    atomic_fetch_sub_explicit(&p->spinners, 1, memory_order_relaxed);
    return ORDO_PENDING;
  }
  uint64_t end = ordo__now_ns() + p->spin_ns;
  if (end > deadline_ns)
    end = deadline_ns;
  unsigned most = ordo__clock_manual() ? MANUAL_SPIN_ROUNDS : UINT_MAX;
  int rc = ORDO_PENDING;
  atomic_store_explicit(&t->napping, true, memory_order_release);
  for (unsigned i = 1;; i++) {
    if (atomic_load_explicit(&t->wstate, memory_order_acquire) == W_DONE) {
      rc = t->status;
      break;
    }
    if (atomic_load_explicit(&t->poked, memory_order_relaxed)) {
      /* Busy from here until the retry is done (the tester's view). */
      atomic_store_explicit(&t->napping, false, memory_order_release);
      if (atomic_exchange(&t->poked, false)) {
        if (ordo__mem_before_retry)
          ordo__mem_before_retry(&t->base); /* the tester's turn */
        if (ordo__retry(&t->ow) == 0) {
          rc = 0; /* granted by our own try: no event will come */
          break;
        }
      }
      atomic_store_explicit(&t->napping, true, memory_order_release);
    }
    ordo__cpu_relax();
    if ((i & 63) == 0 && (i >= most || ordo__now_ns() >= end))
      break;
  }
  atomic_store_explicit(&t->napping, false, memory_order_release);
  atomic_fetch_sub_explicit(&p->spinners, 1, memory_order_relaxed);
  return rc;
}

static int mem_lock_wait(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                         uint64_t deadline_ns, bool busy);

static int mem_lock_all(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                        uint64_t deadline_ns) {
  int rc = ordo__fast_acquire(&mt(tx)->ow, r, n);
  if (rc == 0)
    return 0; /* idle keys: one compare-and-swap each */
  return mem_lock_wait(tx, r, n, deadline_ns, rc == ORDO__FAST_BUSY);
}

/* How many times a request whose keys are busy yields its CPU and asks
 * the fast path again before it queues. */
#define FAST_YIELDS 3
/* Before them, with a CPU to spare, how many times it asks the fast path
 * again, FAST_SPIN_PAUSES pauses apart (about 8 us here, at 15 ns a pause:
 * 31 us in all at most). Few, sparse asks: each one takes the lock's cache
 * line from its holder, and with two workers on two CPUs, asks 0.5 us
 * apart (64 of them) won half as often as asks 8 us apart (0.53 of
 * hand-ordered pthread against 1.05; 2 accounts, 2 workers), and a gap
 * doubling from 32 pauses came between (0.80). */
#define FAST_SPINS 4
#define FAST_SPIN_PAUSES 512

/*
 * yield_retry -- a key of r is held, or waited for. Its holder lets it go
 * within a few hundred instructions once its thread runs, while a queued
 * wait costs the waiter and the releaser each microseconds (the slow
 * path's mutexes, an adoption, a poke, a wake-up, and the lock stays on
 * the slow path until it is idle again). So yield the CPU (to that holder,
 * when they share one: with more threads than CPUs a holder is often
 * preempted) and ask the fast path again, a few times, before queueing.
 * The fast path takes only idle keys, never one with waiters, so no
 * starving waiter's reservation is passed; the request is queued at most
 * FAST_YIELDS yields later. Only while the mean hold is shorter than the
 * spin (spin_us): a long hold is not let go meanwhile. 0 once granted;
 * nonzero when the caller must queue.
 */
static int yield_retry(mem_txn *t, const ordo_req_t *r, size_t n,
                       uint64_t deadline_ns, uint64_t spin_ns) {
  /* Holds longer than a spin (a dining philosopher eats for milliseconds)
   * are not let go by a yield or three: queue at once, in arrival order. */
  if (GET(t->ow.tab->hold_mean_ns) > spin_ns)
    return 1;
  if (deadline_ns != ORDO_NO_DEADLINE && ordo__now_ns() >= deadline_ns)
    return 1; /* a try: no time to give */
  int rc = ORDO__FAST_BUSY;
  /* With a CPU to spare (one spinner per spare CPU, as wait_spin counts
   * them), the holder is likely running on another one and lets go within
   * its mean hold, which is shorter than the spin or we would not be here:
   * spin for it first, as glibc's adaptive mutex does, so that the grant
   * needs no yield, no queue and no wake-up (the hand-over two workers on
   * two CPUs otherwise pay on most transfers of a hot pair). The bound is
   * a count of pauses (FAST_SPINS above), so the spin reads no clock. */
  mem_place *p = (mem_place *)t->base.o;
  if (atomic_fetch_add_explicit(&p->spinners, 1, memory_order_relaxed) <
      p->max_spinners) {
    for (int i = 0; i < FAST_SPINS && rc == ORDO__FAST_BUSY; i++) {
      ADD(t->ow.tab->fast_waits, 1);
      for (int k = 0; k < FAST_SPIN_PAUSES; k++)
        ordo__cpu_relax();
      rc = ordo__fast_acquire(&t->ow, r, n);
    }
  }
  atomic_fetch_sub_explicit(&p->spinners, 1, memory_order_relaxed);
  for (int i = 0; i < FAST_YIELDS && rc == ORDO__FAST_BUSY; i++) {
    ADD(t->ow.tab->fast_waits, 1);
    sched_yield();
    rc = ordo__fast_acquire(&t->ow, r, n);
  }
  return rc;
}

/* The rest of mem_lock_all, apart so that the fast path's caller stays
 * small: a busy key, a new one, or a wait. */
static __attribute__((noinline)) int
mem_lock_wait(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
              uint64_t deadline_ns, bool busy) {
  uint64_t spin_ns = ((mem_place *)tx->o)->spin_ns;
  /* A key the caller holds itself (a re-lock, an upgrade) is not let go
   * by waiting for it: no spin and no yield, straight to the slow path,
   * which grants a re-lock at once and an upgrade when it can. */
  if (busy && spin_ns && !ordo__owner_holds_any(&mt(tx)->ow, r, n) &&
      yield_retry(mt(tx), r, n, deadline_ns, spin_ns) == 0)
    return 0;
  mem_txn *t = mt(tx);
  if (n == 1 && ordo__try_one(&t->ow, r) == 0)
    return 0; /* a free key: no wait to prepare for */
  mem_place *p = (mem_place *)tx->o;
  atomic_store_explicit(&t->wstate, W_SPIN, memory_order_relaxed);
  atomic_store_explicit(&t->poked, false, memory_order_relaxed);
  /* ORDO__WAIT_THREAD: a thread waits for us, so the engine may poke it
   * rather than hand it the keys (src/core/README.md, "Hand-over and
   * pokes"); the request, not the txn, says so, so a later async request
   * of this txn is handed its keys. */
  int rc =
      ordo__acquire(&t->ow, r, n, deadline_ns, ORDO__WAIT_THREAD, mem_wake, t);
  if (rc != ORDO_PENDING)
    return rc;
  rc = wait_spin(p, t, deadline_ns);
  if (rc != ORDO_PENDING)
    return rc;
  bool expired = false;
  ordo__mutex_lock(&t->mu);
  int expect = W_SPIN;
  if (!atomic_compare_exchange_strong(&t->wstate, &expect, W_SLEEP)) {
    ordo__mutex_unlock(&t->mu); /* the event came meanwhile */
    return t->status;
  }
  while (atomic_load_explicit(&t->wstate, memory_order_acquire) != W_DONE) {
    if (atomic_exchange(&t->poked, false)) {
      ordo__mutex_unlock(&t->mu);
      if (ordo__mem_before_retry)
        ordo__mem_before_retry(tx); /* the tester's turn (tests/model) */
      if (ordo__retry(&t->ow) == 0)
        return 0; /* granted by our own try: no event will come */
      ordo__mutex_lock(&t->mu);
      continue;
    }
    /* On the manual clock the engine's tick keeps the deadline. */
    if (deadline_ns == ORDO_NO_DEADLINE || expired || ordo__clock_manual()) {
      atomic_store_explicit(&t->napping, true, memory_order_release);
      ordo__cond_wait(&t->cv, &t->mu);
      atomic_store_explicit(&t->napping, false, memory_order_release);
      continue;
    }
    struct timespec ts = {(time_t)(deadline_ns / 1000000000u),
                          (long)(deadline_ns % 1000000000u)};
    if (ordo__cond_timedwait(&t->cv, &t->mu, &ts) == ETIMEDOUT &&
        atomic_load_explicit(&t->wstate, memory_order_acquire) != W_DONE) {
      /* Our deadline: end the wait ourselves. If a grant or a cancel won
       * the race, its event is on its way and we wait for it. */
      ordo__mutex_unlock(&t->mu);
      ordo__abort_wait(&t->ow, ORDO_ETIMEDOUT);
      ordo__mutex_lock(&t->mu);
      expired = true;
    }
  }
  rc = t->status;
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static void mem_async_fire(ordo__owner *w, int status, void *arg) {
  ORDO_UNUSED(w);
  mem_txn *t = arg;
  t->ucb(&t->base, status, t->uarg);
}

static int mem_lock_all_async(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                              uint64_t deadline_ns, ordo_done_cb cb,
                              void *arg) {
  mem_txn *t = mt(tx);
  t->ucb = cb;
  t->uarg = arg;
  return ordo__acquire(&t->ow, r, n, deadline_ns, ORDO__WAIT_EVENT,
                       mem_async_fire, t);
}

static int mem_unlock(ordo_txn_t *tx, const void *key, size_t len) {
  return ordo__release_one(&mt(tx)->ow, key, len);
}

static int mem_unlock_all(ordo_txn_t *tx) {
  return ordo__release_all(&mt(tx)->ow);
}

static int mem_cancel(ordo_txn_t *tx) {
  return ordo__abort_wait(&mt(tx)->ow, ORDO_ECANCELED);
}

static int mem_held(ordo_txn_t *tx, const void *key, size_t len,
                    ordo_mode_t *mode, uint64_t *fence) {
  return ordo__held(&mt(tx)->ow, key, len, mode, fence);
}

/* ---- The model-based tester's view (tests/model) ------------------------ */

void (*ordo__mem_before_retry)(ordo_txn_t *t);

int ordo__mem_wait_state(ordo_txn_t *tx) {
  mem_txn *t = mt(tx);
  int st = atomic_load_explicit(&t->wstate, memory_order_acquire);
  if (atomic_load_explicit(&t->poked, memory_order_acquire))
    st |= ORDO__MEM_POKED;
  if (atomic_load_explicit(&t->ow.state, memory_order_acquire) == ORDO__WAITING)
    st |= ORDO__MEM_QUEUED;
  if (atomic_load_explicit(&t->napping, memory_order_acquire))
    st |= ORDO__MEM_NAPPING;
  return st;
}

static int mem_stats(ordo_t *o, ordo_stats_t *out) {
  ordo__table_stats(((mem_place *)o)->tab, out);
  return 0;
}

static void mem_dump(ordo_t *o, int fd) {
  ordo__table_dump(((mem_place *)o)->tab, fd);
}

static int mem_graph(ordo_t *o, int fd, ordo_graph_fmt_t fmt) {
  return ordo__table_graph(((mem_place *)o)->tab, fd, fmt);
}

static int mem_deadlocks(ordo_t *o, ordo_deadlock_t *out, size_t max) {
  return ordo__table_deadlocks(((mem_place *)o)->tab, out, max);
}

static void mem_on_deadlock(ordo_t *o, ordo_deadlock_cb cb, void *arg) {
  ordo__table_on_deadlock(((mem_place *)o)->tab, cb, arg);
}

static void mem_on_alarm(ordo_t *o, ordo_alarm_cb cb, void *arg) {
  ordo__table_on_alarm(((mem_place *)o)->tab, cb, arg);
}

static void mem_txn_add_cost(ordo_txn_t *tx, uint64_t cost) {
  atomic_fetch_add_explicit(&mt(tx)->ow.cost, cost, memory_order_relaxed);
}

static unsigned mem_txn_aborts(const ordo_txn_t *tx) {
  /* Written under the engine's wait_mu while the txn waits; its own
   * thread reads it between calls. */
  return ((const mem_txn *)tx)->ow.aborts;
}

const ordo__backend ordo__backend_mem = {
    .scheme = "mem",
    .caps = ORDO_CAP_SHARED | ORDO_CAP_SERVER_WAIT | ORDO_CAP_FENCE |
            ORDO_CAP_CANCEL | ORDO_CAP_INCREMENTAL | ORDO_CAP_ASYNC |
            ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE | ORDO_CAP_WAIT_HOLDS_NOTHING,
    .open = mem_open,
    .close = mem_close,
    .txn_begin = mem_txn_begin,
    .txn_end = mem_txn_end,
    .lock_all = mem_lock_all,
    .lock_all_async = mem_lock_all_async,
    .unlock = mem_unlock,
    .unlock_all = mem_unlock_all,
    .cancel = mem_cancel,
    .held = mem_held,
    .stats = mem_stats,
    .dump = mem_dump,
    .graph = mem_graph,
    .deadlocks = mem_deadlocks,
    .on_deadlock = mem_on_deadlock,
    .on_alarm = mem_on_alarm,
    .txn_add_cost = mem_txn_add_cost,
    .txn_aborts = mem_txn_aborts,
};
