/*
 * table.h -- the lock engine: a striped lock table driven as a grant state
 * machine. See src/core/README.md for the design, the invariants and the
 * lock order. No thread ever blocks inside these functions except on the
 * engine's own short mutexes: a request that cannot be granted at once is
 * queued, and its outcome (granted, timed out, cancelled) is reported later
 * through the owner's event callback.
 */
#ifndef ORDO_CORE_TABLE_H
#define ORDO_CORE_TABLE_H

#include "ordo_int.h"

#include <pthread.h>
#include <sys/queue.h>

typedef struct ordo__table ordo__table;
typedef struct ordo__lock ordo__lock;
typedef struct ordo__hold ordo__hold;
typedef struct ordo__entry ordo__entry;
typedef struct ordo__owner ordo__owner;

/* The event: status is 0 (granted) or ORDO_ETIMEDOUT, ORDO_ECANCELED... It
 * runs on whichever thread made the transition, with no engine lock held. */
typedef void (*ordo__event_cb)(ordo__owner *w, int status, void *arg);

/* Lock objects an owner remembers for its fast path (a power of two). */
#define ORDO__HINTS 32

/* The most holds one owner may have of one key (ordo_held returns the
 * count as an int): a re-lock past it fails with ORDO_ELIMIT, taking
 * nothing. */
#define ORDO__HOLD_MAX INT32_MAX

/* One hold of one key by one owner, with its hold count. */
struct ordo__hold {
  ordo__hold *lnext; /* next holder of the same lock */
  union {
    TAILQ_ENTRY(ordo__hold) tlink; /* the owner's holds, acquisition order */
    ordo__hold *fnext;             /* the owner's free records, while free */
  };
  ordo__lock *lock;
  ordo__owner *owner;
  /* Token of the grant; 0 for a fast-path grant until it is first asked
   * for, when it is drawn under the stripe's mutex (still while held, so
   * a key's tokens still increase along its holders). */
  uint64_t fence;
  uint32_t count;
  uint8_t mode;
  /* The fast path gives it back (it was never a grant): its release is
   * not counted. */
  uint8_t quiet;
};

/* One key of a queued request. */
struct ordo__entry {
  ordo__entry *qprev, *qnext; /* the lock's wait queue, arrival order */
  ordo__lock *lock;
  ordo__owner *owner;
  uint32_t hash;
  uint32_t stripe;
  uint8_t mode;
  uint8_t pinned; /* abort_locked pinned this entry's lock */
  /* The owner already holds this key in this mode or a stronger one (set
   * by ordo__acquire under the key's stripe; the owner's holds do not
   * change while it waits): the key is only counted again, so the entry
   * waits for no one queued (ordo__waits_for_queued). */
  uint8_t covered;
};

enum { ORDO__IDLE = 0, ORDO__WAITING = 1 };

/*
 * ordo__owner -- an engine transaction. Its user (one thread at a time) owns
 * every field while no request is waiting. While one is (state WAITING), the
 * request fields, the hold list and the free holds belong to whichever
 * thread holds the table's wait_mu, which is the only one that may grant,
 * expire or cancel it.
 */
struct ordo__owner {
  ordo__table *tab;
  uint64_t id;
  int priority;
  _Atomic int state; /* ORDO__IDLE or ORDO__WAITING; written under wait_mu */
  int status;        /* outcome of the last request */

  /* Holds, in acquisition order (glibc's <sys/queue.h> lists, as every
   * list of the engine's: one unlink, written once). */
  TAILQ_HEAD(ordo__hold_list, ordo__hold) holds;
  size_t nholds;
  ordo__hold *hfree; /* preallocated hold records, through fnext */
  size_t nfree;
  /* Hold records come in blocks (one malloc for many: a session of a lock
   * server may hold a million), freed when the owner ends. */
  struct ordo__hold_block *blocks;
  size_t nallocated;
  /* The one hold whose time is being sampled, and its grant time. */
  ordo__hold *sampled;
  uint64_t sampled_ns;

  /* The pending request: its entries and the sorted, distinct stripes. */
  ordo__entry *ent;
  size_t nent, capent;
  uint32_t *stripes;
  size_t nstripes;
  uint64_t enq_ns, deadline_ns;
  /* A pin (ordo__owner_pin): the deadline ends no wait before this time;
   * under wait_mu; 0 for none, and 0 again at each new request. */
  uint64_t pin_ns;
  ordo__event_cb cb;
  void *cbarg;
  /* The fast path's counts (requests granted, keys released), written by
   * whoever owns the holds (see above) and read by ordo__table_stats. */
  _Atomic uint64_t fast_acq, fast_rel;
  LIST_ENTRY(ordo__owner) olink; /* the table's owners; under its own_mu */
  /* The lock objects this owner last took on the fast path, by hash: a
   * hint that skips the table's bucket walk (src/core/README.md, "The
   * fast path"). The owner's thread's own; never trusted without checks. */
  struct {
    uint32_t hash;
    ordo__lock *lock;
  } hint[ORDO__HINTS];
  ordo__owner *fire_next; /* a transition's local list of events to fire */
  /* Outcomes on their way to the callback: each transition that puts the
   * owner on a fire list (under wait_mu) adds ORDO__DELIVER_ONE, and
   * fire_all takes it off once the callback has returned, so
   * ordo__owner_fini can wait them out. A count, not a flag: a callback
   * may start a request whose outcome another thread delivers before the
   * first delivery is done. ORDO__DELIVER_END says fini ran from inside a
   * callback of the owner's, and the last delivery then calls on_free. */
  _Atomic unsigned deliver;
  /* Frees the memory the owner lives in, for an owner ended from inside
   * its own outcome event (set by the backend after ordo__owner_init). */
  void (*on_free)(ordo__owner *w);
  long timer_idx; /* slot in the timer heap or -1; under timer_mu */
  /* The pending request is ORDO__WAIT_THREAD's: poke it, don't hand over.
   * Set by ordo__acquire for each request (under wait_mu when it queues),
   * read by wake_one under wait_mu. */
  bool pokeable;
  bool woken; /* poked, and has not tried yet; under wait_mu */

  /* Detection and alarms; under wait_mu while waiting. */
  TAILQ_ENTRY(ordo__owner) wlink; /* the table's list of waiting owners */
  uint64_t visit;                 /* search epoch that last reached it */
  /* The resolution (src/detect) that last reached it from the blocked
   * owner, and that found it reaching that owner: both that resolution's
   * number when it is in the blocked owner's strongly connected part. */
  uint64_t reach_f, reach_b;
  uint64_t alarm_ns;     /* the timer heap's key: the next due time */
  uint64_t dl_edge_ns;   /* when the cycle that made it a victim closed */
  bool use_timer;        /* asynchronous: the timer enforces its deadline */
  bool checked;          /* delayed detection has run for this wait */
  bool logged;           /* this wait was logged as long */
  unsigned aborts;       /* times chosen as a victim (aging) */
  _Atomic uint64_t cost; /* declared work, ORDO_VICTIM_LEAST_WORK */
  uint32_t sample;       /* hold-time sampling counter */
  /* The executor's task this owner's txn belongs to (src/exec), or NULL:
   * written under the executor's mutex; read under it, but for
   * ordo_txn_end's look (atomic) at whether it must be forgotten, whatever
   * thread ends the txn. The engine never reads it. */
  void *_Atomic ext_task;
};

int ordo__table_create(ordo__table **out, const ordo_options_t *opts);
void ordo__table_destroy(ordo__table *tab);

void ordo__owner_init(ordo__table *tab, ordo__owner *w, uint64_t id,
                      int priority);
enum { ORDO__DELIVER_END = 1, ORDO__DELIVER_ONE = 2 };

/*
 * ordo__owner_fini -- ends w: cancels a waiting request (its event fires
 * with ORDO_ECANCELED on this thread), waits until an outcome that another
 * thread is delivering has returned from its callback, releases every hold
 * and frees what the owner allocated. So once it returns, w's event has
 * run exactly once and never runs again. Returns true when the memory w
 * lives in may be freed now; false when it was called from inside w's own
 * outcome event, and then w->on_free(w) runs once that event returns.
 */
bool ordo__owner_fini(ordo__owner *w);

/*
 * How a queued request waits: a property of the request, set anew by each
 * ordo__acquire (one txn may mix the two).
 *   ORDO__WAIT_THREAD -- a thread of the caller waits for the event and
 *     ends the wait itself at its deadline (ordo__abort_wait); the engine
 *     may poke it (the event with ORDO_PENDING, under wait_mu) instead of
 *     handing it its keys, and the thread then calls ordo__retry.
 *   ORDO__WAIT_EVENT -- nobody waits (the asynchronous form): the timer
 *     thread ends the wait at its deadline, and a grant is always handed
 *     over, so the event fires exactly once, with 0 or a negative code.
 */
typedef enum { ORDO__WAIT_THREAD = 0, ORDO__WAIT_EVENT = 1 } ordo__wait_kind;

/*
 * ordo__acquire -- asks for the sorted, distinct keys r[0..n), all or none.
 * Returns 0 when granted at once, ORDO_PENDING when queued (cb will fire
 * exactly once with the outcome, after the engine's locks are let go), or a
 * negative code (no event). kind says who waits (above).
 */
/*
 * ordo__try_one -- the one-key request's short path: grants r at once when
 * its lock object exists with no holder and no waiter (then 0), and
 * otherwise does nothing and returns 1: ask ordo__acquire. It skips the
 * general request's bookkeeping (entries, the stripe set, the grant rules,
 * the wait), which a free key does not need; its grant is the one
 * ordo__acquire would make. (For two keys the same short path saved 2% of
 * a transfer's instructions, too little for a second grant path.)
 */
int ordo__try_one(ordo__owner *w, const ordo_req_t *r);

/* ordo__fast_acquire and ordo__release_all, the fast path's entry points,
 * are inline in core/fast.h. */
#define ORDO__FAST_MAX 4
#define ORDO__FAST_BUSY                                                        \
  2 /* ordo__fast_acquire: a key is held on the fast path */

int ordo__acquire(ordo__owner *w, const ordo_req_t *r, size_t n,
                  uint64_t deadline_ns, ordo__wait_kind kind, ordo__event_cb cb,
                  void *arg);
/*
 * ordo__retry -- a poked waiter tries its whole set again. Returns 0 when
 * granted (no event will fire), ORDO_PENDING when it must wait on, or
 * ORDO_ENOTHELD when the request had already ended (its event is coming).
 * A poke is the event with status ORDO_PENDING; it runs with wait_mu held,
 * so it must only wake the waiting thread.
 */
int ordo__retry(ordo__owner *w);
/* Ends a waiting request with status; 0 if it did, ORDO_ENOTHELD if the
 * request had already ended (its event is then on its way). */
int ordo__abort_wait(ordo__owner *w, int status);
/* Drops one hold of key. */
int ordo__release_one(ordo__owner *w, const void *key, size_t len);
/* Hold count (0 when not held), mode and fencing token of key. */
int ordo__held(ordo__owner *w, const void *key, size_t len, ordo_mode_t *mode,
               uint64_t *fence);

/* Calls fn (ordo_int.h) on each hold of w, in acquisition order, under the
 * table's wait_mu: only w's own thread may call it, and while w waits, a grant
 * to it (made under wait_mu) cannot change the list meanwhile. fn must not call
 * into the engine. */
void ordo__owner_each_hold(ordo__owner *w, ordo__hold_fn fn, void *arg);
/* Keys w holds (w's own thread, as above). */
size_t ordo__owner_nholds(ordo__owner *w);
/* Gives w a new priority, as if it had begun with it: w's own thread, while
 * w holds nothing and waits for nothing (so no cycle names it, and the
 * detector, which reads priorities under wait_mu, sees the old value or the
 * new one). Returns 0, or ORDO_EBUSY and changes nothing. */
int ordo__owner_set_priority(ordo__owner *w, int priority);

void ordo__table_stats(ordo__table *tab, ordo_stats_t *out);

/* ---- The engine behind a place --------------------------------------------
 * A place that runs this engine in process (mem://) names its table and each
 * txn's owner in the parts every place shares (ordo_int.h), so that the lock
 * server (src/server) and the tester reach a txn's holds through the engine's
 * face alone: ordo__owner_each_hold, ordo__owner_nholds,
 * ordo__txn_set_priority and ordo__table_key_each. Both are NULL on a remote
 * place. */
static inline ordo__table *ordo__engine_table(const ordo_t *o) {
  return o->engine;
}
static inline ordo__owner *ordo__engine_owner(const ordo_txn_t *t) {
  return t->engine;
}
/* Pins w's waiting request: its deadline does not end it before until_ns
 * (CLOCK_MONOTONIC; 0 unpins, and a deadline already past then ends it at
 * once). A request of the timer's (ORDO__WAIT_EVENT) only. It is what a
 * distributed deadlock check needs while it confirms a cycle: the edges it
 * has confirmed cannot end by a timeout before the victim is chosen
 * (docs/distributed.md). 0, or ORDO_ENOTHELD when w waits for nothing. */
int ordo__owner_pin(ordo__owner *w, uint64_t until_ns);
/* ordo__owner_set_priority for a txn, whose own priority then says the new
 * one too: 0, ORDO_EBUSY (nothing changed), or ORDO_ENOTSUP on a remote
 * place. */
int ordo__txn_set_priority(ordo_txn_t *t, int priority);

/* ---- Waits outside the engine: executors (src/exec) ----------------------
 * A thread that waits on a future waits outside the engine, so the
 * engine's own search cannot see a cycle that runs through such a wait
 * (a task holding lock L waits on future F, and F's task waits for L).
 * The executor finds those with the engine's graph frozen:
 *
 *   - ordo__table_set_ext registers its hook: at every block event (an
 *     owner queued, after the engine's own check, which found no cycle
 *     through it), under wait_mu, the engine calls on_block(arg, w, rec).
 *     The hook may take the executor's mutex (the lock order is wait_mu,
 *     then the executor's mutex, then one stripe mutex at a time; so the
 *     executor never calls into the engine while it holds its mutex) and
 *     read the graph with ordo__owner_blockers_locked. It returns an owner
 *     to abort as a deadlock victim, or NULL.
 *   - ordo__table_ext_search(tab, fn, arg, rec) runs fn(arg, rec) under
 *     wait_mu, for the executor's own block event (a thread begins to wait
 *     on a future): fn may do what the hook may, and returns a victim or
 *     NULL.
 *
 * A victim is an owner on the cycle. If it waits in the engine
 * (ordo__owner_waiting), its wait ends with ORDO_EDEADLK; either way every
 * lock it holds is released, newest first, under the same hold of wait_mu,
 * as the engine's own victims' are. A victim that does not wait in the
 * engine is a txn whose task waits on a future: its thread must not touch
 * the txn meanwhile (it is asleep in the wait), and the executor ends that
 * wait with ORDO_EDEADLK itself (fn or the hook may signal a condition
 * variable under the executor's mutex). rec, which fn or the hook fills
 * (kind ORDO_DL_MIXED; seq, time_ns, policy and victim are the engine's),
 * enters the deadlock records and goes to ordo_on_deadlock's callback, and
 * the victim counts in the stats' deadlocks. ordo__table_ext_search returns
 * whether a victim was aborted. There is one hook per table: the executors
 * of one place share it. */
typedef ordo__owner *(*ordo__ext_block_fn)(void *arg, ordo__owner *w,
                                           ordo_deadlock_t *rec);
typedef ordo__owner *(*ordo__ext_search_fn)(void *arg, ordo_deadlock_t *rec);
void ordo__table_set_ext(ordo__table *tab, ordo__ext_block_fn on_block,
                         void *arg);
bool ordo__table_ext_search(ordo__table *tab, ordo__ext_search_fn fn,
                            void *arg);
/* Under wait_mu (the hook, or fn): whether w waits in the engine now. */
bool ordo__owner_waiting(const ordo__owner *w);
/* Under wait_mu: whether w waits in the engine with its thread asleep on
 * it (a blocking ordo_lock or ordo_lock_all): an asynchronous request that
 * waits (ordo_lock_all_async) blocks no thread, which runs on. */
bool ordo__owner_thread_waits(const ordo__owner *w);
/* On the owner's own thread, while it waits for nothing: whether it holds
 * one of the keys of r[0..n) (a re-lock or an upgrade). */
bool ordo__owner_holds_any(ordo__owner *w, const ordo_req_t *r, size_t n);
/* Under wait_mu: the owners w waits for (every holder of a key it asks in
 * a conflicting mode, and those queued ahead of it whom it waits for, as
 * the engine's own search counts them), each once, into out[0..max);
 * returns how many there are (which may exceed max), 0 when w is not
 * waiting. */
size_t ordo__owner_blockers_locked(ordo__owner *w, ordo__owner **out,
                                   size_t max);
/* Under wait_mu: as ordo__owner_blockers_locked, the holders alone (the
 * hard edges; the queue ahead is a soft edge, which the engine grants past
 * or reorders, never a reason to abort). */
size_t ordo__owner_holders_locked(ordo__owner *w, ordo__owner **out,
                                  size_t max);
/* Under wait_mu: the member of c[0..n) that the place's victim policy
 * (opts.victim) aborts, as the engine's own detection would choose it among
 * the same members (pins aside: only ordod pins); NULL when n is 0. */
ordo__owner *ordo__victim_pick(ordo__table *tab, ordo__owner **c, size_t n);
/* Records rec (kind ORDO_DL_POOL: no txn is aborted) as a deadlock record
 * and hands it to ordo_on_deadlock's callback: the executor's pool
 * deadlocks. Takes wait_mu: call it with no executor mutex held. */
void ordo__table_add_record(ordo__table *tab, const ordo_deadlock_t *rec);

/* The tester's view (tests/model): ordo__table_tick runs what is due on the
 * manual clock; ordo__table_snapshot lists every lock with holders or
 * waiters. */
typedef struct ordo__snap_item {
  uint64_t owner;
  int mode;
  uint32_t count; /* holders only */
} ordo__snap_item;
typedef void (*ordo__snap_fn)(void *arg, const uint8_t *key, size_t len,
                              const ordo__snap_item *holders, size_t nholders,
                              const ordo__snap_item *queue, size_t nqueue);
int ordo__table_tick(ordo__table *tab);
/* One key's holders and waiters, under its stripe mutex alone (see table.c):
 * for a holder fence and count are its own and waiting is false; for a
 * waiter fence and count are 0 and waiting is true. */
typedef void (*ordo__key_fn)(void *arg, uint64_t owner, int mode,
                             uint64_t fence, uint32_t count, bool waiting);
void ordo__table_key_each(ordo__table *tab, const void *key, size_t len,
                          ordo__key_fn fn, void *arg);
void ordo__table_snapshot(ordo__table *tab, ordo__snap_fn fn, void *arg);
/* Every lock object alive (in the hash chains), stripe by stripe, for the
 * tester: each stripe's empty list first, oldest first (pos 0, 1, ...),
 * then its other objects (pos -1); fast is the fast word's state
 * (ORDO__OBJ_IDLE, _SLOW, or _HELD with the id of the owner that holds it
 * on the fast path in fast_owner). Under each stripe's mutex in turn; it
 * changes nothing, and reads a fast-path holder's record, so call it only
 * while every owner's thread is still. */
enum { ORDO__OBJ_IDLE = 0, ORDO__OBJ_SLOW = 1, ORDO__OBJ_HELD = 2 };
typedef void (*ordo__obj_fn)(void *arg, unsigned stripe, const uint8_t *key,
                             size_t len, int pos, int fast,
                             uint64_t fast_owner);
void ordo__table_objects(ordo__table *tab, ordo__obj_fn fn, void *arg);
void ordo__table_dump(ordo__table *tab, int fd);
int ordo__table_graph(ordo__table *tab, int fd, ordo_graph_fmt_t fmt);
int ordo__table_deadlocks(ordo__table *tab, ordo_deadlock_t *out, size_t max);
void ordo__table_on_deadlock(ordo__table *tab, ordo_deadlock_cb cb, void *arg);
void ordo__table_on_alarm(ordo__table *tab, ordo_alarm_cb cb, void *arg);

#endif /* ORDO_CORE_TABLE_H */
