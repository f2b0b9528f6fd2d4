/*
 * table_int.h -- the lock table's data structures, shared by the engine
 * (src/core/table.c) and the detector (src/detect/detect.c), which walks
 * the same queues and holders. See src/core/README.md for the invariants
 * and the lock order; nothing here is public.
 */
#ifndef ORDO_CORE_TABLE_INT_H
#define ORDO_CORE_TABLE_INT_H

#include "core/table.h"

/*
 * A lock object. It is what a held lock costs (with one ordo__hold), so it is
 * kept small: an empty lock on the stripe's cache has no holders and no
 * waiters, and its cache links share their words with those two lists.
 * Read holders and qhead only of a lock that is not listed (every lock an
 * entry or a hold points at is not), or after checking listed.
 */
struct ordo__lock {
  ordo__lock *hnext; /* hash chain */
  union {
    struct {
      ordo__hold *holders;
      ordo__entry *qhead; /* waiters in arrival order; qtail below */
    };
    struct {
      ordo__lock *eprev, *enext; /* the stripe's empty list, while listed */
    };
  };
  ordo__entry *qtail;
  uint32_t hash; /* hash_key's: stripe and bucket (stripe_of, bucket_of) */
  uint32_t pins; /* wake-ups in progress that will read this lock */
  /* One word, all of it written under the stripe's mutex. */
  uint32_t klen : 24;  /* max_key_len is at most 2^20 */
  uint32_t xheld : 1;  /* some holder holds X */
  uint32_t listed : 1; /* on the stripe's empty list */
  /* The queue left arrival order (a soft-cycle fix). Written under wait_mu
   * and the stripe, like the queue, so either one is enough to read it:
   * a byte of its own, since the word above changes under the stripe alone. */
  uint8_t reordered;
  uint8_t key[];
};

/* Counters written under a stripe's mutex and read anywhere: relaxed atomic
 * stores of a plain read-modify-write, since only one writer exists. */
#define BUMP(field)                                                            \
  atomic_store_explicit(                                                       \
      &(field), atomic_load_explicit(&(field), memory_order_relaxed) + 1,      \
      memory_order_relaxed)
#define ADD(field, v)                                                          \
  atomic_fetch_add_explicit(&(field), (v), memory_order_relaxed)
#define GET(field) atomic_load_explicit(&(field), memory_order_relaxed)

typedef struct ordo__stripe {
  /*
   * mu guards every field below it except the atomics, which it guards for
   * writing only: readers of statistics load them without it. A stripe's
   * mutex is taken after the table's wait_mu and before any stripe with a
   * larger number.
   */
  _Alignas(64) pthread_mutex_t mu;
  ordo__lock **bucket;
  uint32_t nbucket, nlock;
  uint32_t bshift;           /* read-only: a hash's bits above the stripe's */
  ordo__lock *ehead, *etail; /* empty lock objects, oldest first */
  uint32_t nempty;
  uint64_t fence; /* last fencing token granted in this stripe */
  _Atomic uint64_t acquired, released;
} ordo__stripe;

struct ordo__table {
  ordo_options_t opts;   /* read-only */
  uint64_t starve_ns;    /* read-only: the starvation bound's floor */
  uint64_t starve_holds; /* read-only: ...or this many mean hold times */
  /* The mean of the sampled hold times (an average over about the last 16
   * samples): relaxed loads and stores from any thread, since a lost update
   * only delays the average a little. */
  _Atomic uint64_t hold_mean_ns;
  uint32_t smask;     /* read-only: stripes - 1 */
  uint32_t empty_cap; /* read-only: empty lock objects cached per stripe */
  ordo__stripe *stripe;
  _Atomic uint64_t live; /* lock objects allocated */

  /*
   * wait_mu guards every wait queue (a queue changes only under wait_mu
   * and its lock's stripe mutex, so either one suffices to read it), the
   * state of every waiting owner, and the counters below. It is the first
   * engine lock any thread takes; see the lock order at the top of file.
   */
  pthread_mutex_t wait_mu;
  _Atomic uint64_t acquired_w, waited, timeouts, canceled, limits, wakeups,
      pokes, waiting, max_wait_us, deadlocks;
  _Atomic uint64_t wait_hist[ORDO_HIST_BUCKETS];
  _Atomic uint64_t hold_hist[ORDO_HIST_BUCKETS]; /* atomic adds, any thread */

  /* Detection (src/detect/detect.c). wait_mu guards all of it. */
  ordo__owner *whead, *wtail; /* waiting owners, in enqueue order */
  struct ordo__detect *det;   /* search memory, records, alarm */
  _Atomic uint64_t reorders, sweep_finds, long_waits;
  _Atomic uint64_t victims[ORDO_VICTIM__COUNT];
  _Atomic uint64_t detect_hist[ORDO_HIST_BUCKETS]; /* any thread */

  /*
   * timer_mu guards the deadline heap and the timer thread's state. It is
   * taken after wait_mu, never with a stripe mutex held.
   */
  pthread_mutex_t timer_mu;
  pthread_cond_t timer_cv;
  ordo__owner **heap; /* waiting owners by alarm_ns */
  size_t nheap, capheap;
  bool timer_started, timer_stop;
  uint64_t next_sweep_ns; /* the timer thread's own */
  pthread_t timer_thr;
};

/* A key's hash picks its stripe with its low bits and its bucket in the
 * stripe with the bits above those. */
static inline uint32_t stripe_of(const ordo__table *tab, uint32_t h) {
  return h & tab->smask;
}

static inline uint32_t bucket_of(const ordo__stripe *st, uint32_t h,
                                 uint32_t nbucket) {
  return (h >> st->bshift) & (nbucket - 1);
}

static inline ordo__stripe *lock_stripe(ordo__table *tab, const ordo__lock *l) {
  return &tab->stripe[stripe_of(tab, l->hash)];
}

static inline bool conflicts(int a, int b) {
  return a == ORDO_MODE_X || b == ORDO_MODE_X;
}

/* A lock's wait queue (caller holds wait_mu and the lock's stripe). */
static inline void ordo__queue_unlink(ordo__lock *l, ordo__entry *e) {
  if (e->qprev)
    e->qprev->qnext = e->qnext;
  else
    l->qhead = e->qnext;
  if (e->qnext)
    e->qnext->qprev = e->qprev;
  else
    l->qtail = e->qprev;
  e->qprev = e->qnext = NULL;
}

/* Puts e right after prev (at the head when prev is NULL). */
static inline void ordo__queue_insert_after(ordo__lock *l, ordo__entry *prev,
                                            ordo__entry *e) {
  e->qprev = prev;
  e->qnext = prev ? prev->qnext : l->qhead;
  if (e->qnext)
    e->qnext->qprev = e;
  else
    l->qtail = e;
  if (prev)
    prev->qnext = e;
  else
    l->qhead = e;
}

/* Provided by table.c for the detector; caller holds wait_mu. */

/* Ends w's wait with status (see abort_locked); false if it was not
 * waiting. */
bool ordo__abort_locked(ordo__table *tab, ordo__owner *w, int status,
                        ordo__owner **fire);
/* Releases every hold of a waiting owner, newest first, waking the waiters
 * each release can serve. */
void ordo__release_holds_locked(ordo__table *tab, ordo__owner *w,
                                ordo__owner **fire);
/* Grants or pokes the waiters of l that can go now. */
void ordo__wake_queue(ordo__table *tab, ordo__lock *l, ordo__owner **fire);

/* Provided by src/detect/detect.c. */
int ordo__detect_create(ordo__table *tab);
void ordo__detect_destroy(ordo__table *tab);
/* A txn just blocked (caller holds wait_mu): find and resolve the cycles
 * through w. */
void ordo__detect_on_block(ordo__table *tab, ordo__owner *w,
                           ordo__owner **fire);
/* Searches from every waiting owner (caller holds wait_mu). */
void ordo__detect_sweep(ordo__table *tab, ordo__owner **fire);
/* Logs w's wait with its holders and waiters (caller holds wait_mu). */
void ordo__detect_log_wait(ordo__table *tab, ordo__owner *w);
/* Delivers the records and alarms queued under wait_mu (no lock held). */
void ordo__detect_deliver(ordo__table *tab);

#endif
