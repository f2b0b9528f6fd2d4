/*
 * table_int.h -- the lock table's data structures, shared by the engine
 * (src/core/table.c) and the detector (src/detect/detect.c), which walks
 * the same queues and holders. See src/core/README.md for the invariants
 * and the lock order; nothing here is public.
 */
#ifndef ORDO_CORE_TABLE_INT_H
#define ORDO_CORE_TABLE_INT_H

#include "core/table.h"
#include "ordo_tsa.h"

#include <stddef.h>

/*
 * A lock object. It is what a held lock costs (with one ordo__hold), so it is
 * kept small: an empty lock on the stripe's cache has no holders and no
 * waiters, and its cache links share their words with those two lists.
 * Read holders and qhead only of a lock that is not listed (every lock an
 * entry or a hold points at is not), or after checking listed.
 *
 * The fast path (src/core/README.md, "The fast path") reads hnext, hash and
 * fast without the stripe's mutex, so those three are atomics and lock
 * objects are never freed while the table lives: an evicted one goes to its
 * stripe's graveyard and is reused for a later key of its size class.
 */
struct ordo__lock {
  _Atomic(ordo__lock *) hnext; /* hash chain (the graveyard's, when dead) */
  union {
    struct {
      ordo__hold *holders;
      ordo__entry *qhead; /* waiters in arrival order (see the queue below) */
    };
    TAILQ_ENTRY(ordo__lock) elink; /* the stripe's empty list, while listed */
    ordo__lock *gnext;             /* the stripe's graveyard, while dead */
  };
  /*
   * The fast word: ORDO__FAST_IDLE (listed, no holder, no waiter: the fast
   * path may take it with one compare-and-swap), ORDO__FAST_SLOW (the
   * stripe's lists are the truth; the fast path keeps off), ORDO__FAST_DEAD
   * (in the graveyard), ORDO__FAST_ADOPTING, or the ordo__hold of the one
   * owner that took it in X on the fast path (the lock stays listed
   * meanwhile). Moved off IDLE only by the fast path or under the stripe's
   * mutex, off a hold only by that hold's owner or under the mutex, and off
   * SLOW, DEAD and ADOPTING only under the mutex.
   */
  _Atomic uintptr_t fast;
  _Atomic uint32_t hash; /* hash_key's: stripe and bucket (stripe_of, ...) */
  uint32_t klen;         /* max_key_len is at most 2^20 */
  /* Wake-ups in progress that will read this lock: only ordo__abort_locked
   * pins, under wait_mu, one lock once each, and unpins before it returns,
   * so at most 1. */
  uint8_t pins;
  /* Written under the stripe's mutex, each a byte of its own (the fast path
   * reads klen and key while another thread may write these). */
  uint8_t xheld;  /* some holder holds X */
  uint8_t listed; /* on the stripe's empty list */
  /* The queue left arrival order (a soft-cycle fix). Written under wait_mu
   * and the stripe, like the queue, so either one is enough to read it. */
  uint8_t reordered;
  uint8_t key[];
};

enum {
  ORDO__FAST_IDLE = 0,
  ORDO__FAST_SLOW = 1,
  ORDO__FAST_DEAD = 2,
  ORDO__FAST_ADOPTING = 3, /* a fast hold is being adopted (inflate) */
  ORDO__FAST_HOLD = 8,     /* this and above: a hold record's address */
  /*
   * Lock objects of at most ORDO__SLAB_BYTES bytes (header and key) come
   * from their stripe's slab, in steps of 8 bytes, with no malloc chunk
   * header and no rounding to 16 (a held lock's object is most of what it
   * costs); larger ones from malloc. A slab object's room is a function of
   * its key's length (it is only reused for keys of its own step), so it
   * needs no field of its own.
   */
  ORDO__SLAB_BYTES = 256,
  ORDO__SLAB_KEY_MAX = ORDO__SLAB_BYTES - offsetof(ordo__lock, key),
  ORDO__SLAB_CLASSES = (ORDO__SLAB_BYTES - offsetof(ordo__lock, key)) / 8 + 1,
  /* Graveyard classes: a slab step each, then malloc'd key room in
   * [2^k, 2^(k+1)). */
  ORDO__KCLASSES = ORDO__SLAB_CLASSES + 22
};

/* A chunk of a stripe's slab of lock objects (kept until the table ends,
 * like every lock object). */
typedef struct ordo__slab {
  struct ordo__slab *next;
  _Alignas(8) unsigned char mem[];
} ordo__slab;

/* A stripe's bucket array. The fast path may read one that has been
 * replaced, so replaced arrays stay (on old) until the table ends. */
typedef struct ordo__bview {
  struct ordo__bview *old;
  uint32_t n;
  _Atomic(ordo__lock *) slot[];
} ordo__bview;

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
   * writing only: readers of statistics load them without it, and the fast
   * path loads bk and the chains it points at. A stripe's mutex is taken
   * after the table's wait_mu and before any stripe with a larger number.
   */
  /* A plain pthread mutex, out of the thread-safety analysis' sight
   * (src/ordo_tsa.h): the slow paths take stripes as a set, in increasing
   * stripe number (lock_stripes), an order the data decides and the
   * analysis cannot express; the functions that need one say so in their
   * comments, and TSan and the Promela models (README.md) watch them. */
  _Alignas(64) pthread_mutex_t mu;
  _Atomic(ordo__bview *) bk;
  uint32_t nlock;
  uint32_t bshift; /* read-only: a hash's bits above the stripe's */
  TAILQ_HEAD(, ordo__lock) empty; /* empty lock objects, oldest first */
  uint32_t nempty;
  uint64_t fence; /* last fencing token granted in this stripe */
  _Atomic uint64_t acquired, released;
  ordo__lock *grave[ORDO__KCLASSES]; /* dead lock objects, by key room */
  /* The slab: its chunks (newest first), the free bytes left in the
   * newest one, and where they start. */
  ordo__slab *slab;
  uint32_t slab_left;
  unsigned char *slab_free;
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
  _Atomic uint64_t live; /* lock objects in the stripes' hash chains */

  /*
   * own_mu guards the list of owners (owners) and the fast path's counters
   * of the owners that ended (fast_acq, fast_rel: written under it, read
   * anywhere). It is a leaf: nothing is taken while it is held.
   */
  ordo__mutex own_mu;
  LIST_HEAD(, ordo__owner) owners;
  _Atomic uint64_t fast_acq, fast_rel;

  /*
   * wait_mu guards every wait queue (a queue changes only under wait_mu
   * and its lock's stripe mutex, so either one suffices to read it), the
   * state of every waiting owner, and the counters below. It is the first
   * engine lock any thread takes; see the lock order at the top of file.
   */
  ordo__mutex wait_mu;
  _Atomic uint64_t acquired_w, waited, timeouts, canceled, limits, wakeups,
      pokes, waiting, max_wait_us, deadlocks;
  /* Waiters asked whether they can go (wake_one's calls): what a wake-up
   * costs, which test_regress checks does not grow with the queue. */
  _Atomic uint64_t wake_asks;
  /* The hot-key spin's rounds and yields (yield_retry, src/backend/mem.c)
   * made before a busy request queues: none for a key the asker holds
   * itself, which test_exec_defects checks (issue 31, defect 7). */
  _Atomic uint64_t fast_waits;
  _Atomic uint64_t wait_hist[ORDO_HIST_BUCKETS];
  _Atomic uint64_t hold_hist[ORDO_HIST_BUCKETS]; /* atomic adds, any thread */

  /* Detection (src/detect/detect.c). wait_mu guards all of it. */
  TAILQ_HEAD(, ordo__owner) waiters; /* waiting owners, in enqueue order */
  struct ordo__detect *det;          /* search memory, records, alarm */
  _Atomic uint64_t reorders, sweep_finds, long_waits;
  _Atomic uint64_t victims[ORDO_VICTIM__COUNT];
  _Atomic uint64_t detect_hist[ORDO_HIST_BUCKETS]; /* any thread */
  /* Waits outside the engine (core/table.h, "Waits outside the engine"):
   * the executors' hook, called at block events under wait_mu. */
  ordo__ext_block_fn ext_block;
  void *ext_arg;

  /*
   * timer_mu guards the deadline heap and the timer thread's state. It is
   * taken after wait_mu, never with a stripe mutex held.
   */
  ordo__mutex timer_mu;
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

/* The stripe's bucket array (caller holds its mutex). */
static inline ordo__bview *stripe_bk(const ordo__stripe *st) {
  return atomic_load_explicit(&((ordo__stripe *)st)->bk, memory_order_relaxed);
}

static inline ordo__stripe *lock_stripe(ordo__table *tab, const ordo__lock *l) {
  return &tab->stripe[stripe_of(tab, l->hash)];
}

static inline bool conflicts(int a, int b) {
  return a == ORDO_MODE_X || b == ORDO_MODE_X;
}

/*
 * Who waits for whom: the one rule that the grant rules (table.c:
 * grantable) and the detector (src/detect/detect.c: its edges) both ask,
 * so that they cannot disagree (src/core/README.md, "Who waits for whom").
 * A waiting entry e, whose owner asks e->mode of e->lock,
 *  - waits for a holder h of that lock when h is another owner's and the
 *    modes conflict (the detector's hard edge);
 *  - waits for an entry q queued ahead of it on that lock when q is
 *    another owner's, the modes conflict, and e is not covered (its owner
 *    does not already hold the lock in e's mode or a stronger one: such a
 *    key is only counted again, and nobody queued can keep it from its
 *    owner). The grant rule holds e back by such a q only while q starves
 *    and is not chained (a reservation); the detector counts it always, as
 *    a soft edge, so that its graph changes at events only.
 */
static inline bool ordo__waits_for_hold(const ordo__entry *e,
                                        const ordo__hold *h) {
  return h->owner != e->owner && conflicts(e->mode, h->mode);
}

static inline bool ordo__waits_for_queued(const ordo__entry *e,
                                          const ordo__entry *q) {
  return !e->covered && q->owner != e->owner && conflicts(e->mode, q->mode);
}

/*
 * A lock's wait queue (caller holds wait_mu and the lock's stripe, or one of
 * them to read it). It is linked forward through qnext from qhead, and
 * backward through qprev, except that the head's qprev is the tail: the
 * lock object keeps no tail pointer of its own (a held lock's object is
 * most of what it costs). Read a previous entry with ordo__queue_prev.
 */
static inline ordo__entry *ordo__queue_tail(const ordo__lock *l) {
  return l->qhead ? l->qhead->qprev : NULL;
}

/* The entry ahead of e in l's queue, or NULL for the head. */
static inline ordo__entry *ordo__queue_prev(const ordo__lock *l,
                                            const ordo__entry *e) {
  return e == l->qhead ? NULL : e->qprev;
}

static inline void ordo__queue_unlink(ordo__lock *l, ordo__entry *e) {
  ordo__entry *head = l->qhead;
  if (e == head) {
    l->qhead = e->qnext;
    if (e->qnext)
      e->qnext->qprev = e->qprev; /* the tail, or the new head itself */
  } else {
    e->qprev->qnext = e->qnext;
    if (e->qnext)
      e->qnext->qprev = e->qprev;
    else
      head->qprev = e->qprev; /* the new tail */
  }
  e->qprev = e->qnext = NULL;
}

/* Puts e right after prev (at the head when prev is NULL). */
static inline void ordo__queue_insert_after(ordo__lock *l, ordo__entry *prev,
                                            ordo__entry *e) {
  if (!prev) {
    e->qnext = l->qhead;
    if (l->qhead) {
      e->qprev = l->qhead->qprev; /* the tail */
      l->qhead->qprev = e;
    } else {
      e->qprev = e; /* alone: its own tail */
    }
    l->qhead = e;
    return;
  }
  e->qprev = prev;
  e->qnext = prev->qnext;
  if (e->qnext)
    e->qnext->qprev = e;
  else
    l->qhead->qprev = e; /* the new tail */
  prev->qnext = e;
}

/*
 * The wait queue of the lock that hold h is of, for a reader that holds
 * wait_mu but not the lock's stripe (the detector, on a waiting owner's
 * holds). A hold the fast path made that has not been adopted (the word is
 * not SLOW) has no waiters (queueing inflates, under wait_mu), and its list
 * word is then an empty-list link, not a queue: it is not read.
 */
static inline ordo__entry *ordo__held_queue(const ordo__hold *h) {
  ordo__lock *l = h->lock;
  if (atomic_load_explicit(&l->fast, memory_order_acquire) != ORDO__FAST_SLOW)
    return NULL;
  return l->qhead;
}

/* Provided by table.c for the detector; caller holds wait_mu. */

/* Ends w's wait with status (see abort_locked); false if it was not
 * waiting. */
bool ordo__abort_locked(ordo__table *tab, ordo__owner *w, int status,
                        ordo__owner **fire) ORDO_REQUIRES(tab->wait_mu);
/* Releases every hold of a waiting owner, newest first, waking the waiters
 * each release can serve. */
void ordo__release_holds_locked(ordo__table *tab, ordo__owner *w,
                                ordo__owner **fire) ORDO_REQUIRES(tab->wait_mu);
/* Runs the events of the owners on the fire list f (no engine lock held). */
void ordo__fire_all(ordo__owner *f);
/* Grants or pokes the waiters of l that can go now. */
void ordo__wake_queue(ordo__table *tab, ordo__lock *l, ordo__owner **fire)
    ORDO_REQUIRES(tab->wait_mu);

/* Provided by src/detect/detect.c. */
int ordo__detect_create(ordo__table *tab);
void ordo__detect_destroy(ordo__table *tab);
/* A txn just blocked (caller holds wait_mu): find and resolve the cycles
 * through w. */
void ordo__detect_on_block(ordo__table *tab, ordo__owner *w, ordo__owner **fire)
    ORDO_REQUIRES(tab->wait_mu);
/* Searches from every waiting owner (caller holds wait_mu). */
void ordo__detect_sweep(ordo__table *tab, ordo__owner **fire)
    ORDO_REQUIRES(tab->wait_mu);
/* Logs w's wait with its holders and waiters (caller holds wait_mu). */
void ordo__detect_log_wait(ordo__table *tab, ordo__owner *w)
    ORDO_REQUIRES(tab->wait_mu);
/* The executors' hook at a block event, after the engine's own check
 * (caller holds wait_mu): aborts the victim it names, if any. */
void ordo__detect_ext_block(ordo__table *tab, ordo__owner *w,
                            ordo__owner **fire) ORDO_REQUIRES(tab->wait_mu);
/* Delivers the records and alarms queued under wait_mu (no lock held). */
void ordo__detect_deliver(ordo__table *tab) ORDO_EXCLUDES(tab->wait_mu);

#endif
