/*
 * exec.c -- executors: thread pools whose future waits are in the lock
 * place's wait-for graph, pool-deadlock detection at the block event that
 * forms one, mixed lock/future cycles, the policies, foreign pools' notes,
 * and the executors' part of the graph dump. See README.md.
 *
 * Interface: ordo_exec_options_init, ordo_exec_create, ordo_exec_submit,
 * ordo_future_wait, ordo_future_cancel, ordo_future_done,
 * ordo_future_release, ordo_exec_shutdown, ordo_exec_destroy,
 * ordo_exec_declare, ordo_exec_note_queued, ordo_exec_note_started,
 * ordo_exec_note_done, ordo_exec_note_wait_begin, ordo_exec_note_wait_end;
 * ordo__exec_cur, ordo__exec_txn_begun, ordo__exec_txn_ending,
 * ordo__exec_place_close, ordo__exec_graph.
 */
#include "core/table.h"
#include "ordo_tsa.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#define XOWN 8      /* txns one task keeps while it runs (README, limits) */
#define XBLOCK 64   /* blockers read of one lock wait */
#define XFRAMES 256 /* depth of one mixed search */
#define XARENA 4096 /* edges one mixed search holds */
#define XVISIT 1024 /* nodes one mixed search visits */
#define XHASH0 64   /* a foreign pool's first hash size */
#define XWORKERS_MAX 1024
/* Looks at a running task's state before a wait sleeps (a few us). */
#define WAIT_SPIN 200
/* A worker's future wait in a saturated pool with a queue looks again for a
 * pool deadlock after 1 ms, doubling to this: one can form with no block
 * event (a holder outside the pool lets go of a lock a worker waits for,
 * which then waits for the other workers alone: issue 31, defect 3). */
#define XRECHECK_MAX_MS 100
/* INLINE helps on the actor's own stack, one level per nested help (about
 * 2 KB each): past this depth the wait fails with ORDO_EDEADLK instead of
 * overflowing the worker's stack (README, "Policies"). */
#define XINLINE_MAX_DEPTH 256

/* The id scheme of records and dumps (README, "Ids"): txn ids as the
 * engine gives them (bit 63 clear), tasks with bit 63 set, threads that
 * wait outside any task with bits 63 and 62, pools with 63 and 61. */
#define ID_TASK (UINT64_C(1) << 63)
#define ID_THREAD (ID_TASK | UINT64_C(1) << 62)
#define ID_POOL (ID_TASK | UINT64_C(1) << 61)

enum { X_QUEUED = 0, X_RUNNING = 1, X_DONE = 2, X_CANCELED = 3 };
/* What a detection asks of the wait it picked (its actor). */
enum { XA_NONE = 0, XA_INLINE, XA_SPAWN, XA_FAIL, XA_REPORT };

typedef struct xwait xwait;
typedef struct ordo__xplace xplace;

/* A task, which is also its future (a foreign pool's task is a record of
 * the same kind, named by the pool's key). The fields marked "mu" are
 * under the place's executor mutex xplace.mu. */
struct ordo_future_s {
  ordo_exec_t *e;    /* read-only */
  uint64_t id;       /* read-only: ID_TASK | a number */
  ordo_task_fn fn;   /* read-only */
  void *arg;         /* read-only */
  uintptr_t key;     /* read-only: a foreign pool's name of the task */
  _Atomic int state; /* X_*; written under mu */
  _Atomic int refs;  /* the submitter's, the executor's, each wait's */
  void *value;       /* mu; read-only once state is X_DONE */
  /* mu: the pool's queue while queued; its list of running tops while it
   * runs with no parent. */
  TAILQ_ENTRY(ordo_future_s) qlink;
  /* mu, while running: the task on whose stack it runs inline (NULL for a
   * worker's own task), the one running inline on its stack, the chain's
   * first (the worker's own task). */
  struct ordo_future_s *parent, *child, *top;
  xwait *wait;            /* mu: the future wait its thread is in */
  ordo__owner *own[XOWN]; /* mu: the txns begun while it runs */
  unsigned nown;
  unsigned nwaiters;           /* mu: waits on it in flight */
  struct ordo_future_s *saved; /* its thread's current task before it */
  struct ordo_future_s *hnext; /* mu: a foreign pool's hash chain */
  uint64_t mark;               /* mu: a search's epoch */
  pthread_cond_t cv;           /* its waiters, on mu */
};

TAILQ_HEAD(xtask_list, ordo_future_s);

/* One thread's wait on one task, on that thread's stack (a foreign
 * pool's: allocated at wait_begin). Under mu but for the fields the
 * waiting thread alone uses. */
struct xwait {
  ordo_future_t *target;
  ordo_future_t *self;    /* the thread's current task, NULL outside tasks */
  uint64_t tid;           /* ID_THREAD | n when self is NULL */
  int action;             /* XA_*: set by a detection, taken by the waiter */
  ordo_future_t *help;    /* XA_INLINE: the queued task to run */
  bool rec_set;           /* rec holds a record to add */
  bool reported;          /* a REPORT detection picked it; it waits on */
  bool counted;           /* counted in xplace.nwaits */
  bool cancelled;         /* ordo_future_cancel of its running target */
  uint64_t seq;           /* its registration's number (xplace.next_wait) */
  LIST_ENTRY(xwait) link; /* the target's executor's waits */
  xwait *tnext;           /* a foreign waiter's own waits (thread-local) */
  ordo_deadlock_t rec;
};

struct ordo_exec_s {
  xplace *xp;               /* read-only */
  uint64_t pid;             /* read-only: ID_POOL | n */
  char name[32];            /* read-only */
  ordo_exec_options_t opts; /* read-only; opts.name points at name */
  bool foreign;             /* read-only */
  unsigned nworkers;        /* read-only */
  /* The rest under xp->mu. */
  struct xtask_list queue; /* queued tasks, FIFO */
  size_t nqueued;
  struct xtask_list running; /* tasks running on a worker's own stack */
  unsigned nbusy;            /* = length of running */
  unsigned nalive;           /* workers alive or reserved (spares too) */
  unsigned nspare;
  unsigned nidle; /* workers in work_cv */
  /* The last pool deadlock a REPORT detection recorded, by the waits that
   * made it (pool_sig); 0 once a search found the pool not deadlocked. A
   * search that finds the same waits stuck again says nothing; another
   * formation, even of the same workers, is reported again. */
  uint64_t rep_sig;
  /* The one future wait of a worker of this pool that looks again for a
   * pool deadlock while the pool is saturated (README, "When the search
   * runs"): the others sleep until their deadline. NULL when none has the
   * duty; it passes on when that wait ends. */
  struct xwait *rechecker;
  bool shut;
  pthread_cond_t work_cv;   /* workers wait for tasks */
  pthread_cond_t idle_cv;   /* shutdown and destroy wait for the workers */
  LIST_HEAD(, xwait) waits; /* waits on its tasks in flight */
  pthread_t *thr;           /* the nworkers base workers */
  unsigned nstarted;
  ordo_future_t **fh; /* a foreign pool's tasks by key */
  size_t fcap, fcount;
  LIST_ENTRY(ordo_exec_s) link;
};

/* A node of the mixed search: the thread running a chain of tasks (its
 * top task), or a txn outside any task. */
typedef struct xnode {
  ordo_future_t *top;
  ordo__owner *own;
} xnode;

typedef struct xedge {
  xnode to;
  uint64_t from_id, to_id;
  ordo__owner *waiter; /* a lock edge's waiting txn, else NULL */
} xedge;

typedef struct xframe {
  xnode n;
  size_t begin, next, end;
} xframe;

struct ordo__xplace {
  ordo_t *o;        /* read-only */
  ordo__table *tab; /* read-only */
  /* mu guards every executor's state below and in ordo_exec_s and
   * ordo_future_s. Lock order: the engine's wait_mu, then mu, then (inside
   * ordo__owner_blockers_locked) one stripe mutex; so nothing here calls an
   * engine or ordo_* lock function with mu held. */
  ordo__mutex mu;
  LIST_HEAD(, ordo_exec_s) execs;
  uint64_t next_task, next_pool, next_thread, epoch, next_wait;
  /* Future waits in flight on pools with detection on: read without mu
   * by the block hook to skip a place with none. */
  _Atomic unsigned nwaits;
  _Atomic bool hooked; /* the engine's block hook is set */
  /* The mixed search's memory, preallocated so that detection never
   * allocates (STYLE.md, point 6). */
  xedge arena[XARENA];
  xframe frames[XFRAMES];
  xnode visited[XVISIT];
  size_t nvisited;
  ordo__owner *blk[XBLOCK];
  ordo__owner *cand[XFRAMES]; /* a mixed cycle's txns that wait on locks */
};

_Thread_local ordo_future_t *ordo__exec_cur;
/* A foreign pool's waits that this thread has begun (note_wait_begin). */
static _Thread_local xwait *tls_fwaits;

static pthread_condattr_t mono_attr;
static pthread_once_t mono_once = PTHREAD_ONCE_INIT;
static void mono_init(void) {
  pthread_condattr_init(&mono_attr);
  pthread_condattr_setclock(&mono_attr, CLOCK_MONOTONIC);
}
static void cond_init(pthread_cond_t *cv) {
  pthread_once(&mono_once, mono_init);
  pthread_cond_init(cv, &mono_attr);
}

/* CLOCK_MONOTONIC itself, not ordo__now_ns: the condition variables wait
 * on it, and the tester's manual clock (tests/model) must not move them. */
static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ordo__deadline_ns on that clock: ORDO_NO_DEADLINE for a negative or
 * an overlong timeout. */
static uint64_t mono_deadline(long timeout_ms) {
  if (timeout_ms < 0 || (uint64_t)timeout_ms > ORDO__TIMEOUT_MAX_MS)
    return ORDO_NO_DEADLINE;
  return mono_ns() + (uint64_t)timeout_ms * 1000000u;
}

/* Waits on cv until deadline_ns (CLOCK_MONOTONIC): false on time-out. */
static bool cond_until(pthread_cond_t *cv, ordo__mutex *mu,
                       uint64_t deadline_ns) ORDO_REQUIRES(*mu) {
  if (deadline_ns == ORDO_NO_DEADLINE) {
    ordo__cond_wait(cv, mu);
    return true;
  }
  struct timespec ts = {(time_t)(deadline_ns / 1000000000u),
                        (long)(deadline_ns % 1000000000u)};
  return ordo__cond_timedwait(cv, mu, &ts) != ETIMEDOUT;
}

static const char *policy_name(ordo_exec_policy_t p) {
  static const char *const n[] = {"inline", "compensate", "fail", "report"};
  return (unsigned)p < 4 ? n[p] : "?";
}

/* ---- Futures' lives ------------------------------------------------------ */

static void fut_ref(ordo_future_t *f) {
  atomic_fetch_add(&f->refs, 1);
}

static void fut_unref(ordo_future_t *f) {
  if (atomic_fetch_sub(&f->refs, 1) == 1) {
    pthread_cond_destroy(&f->cv);
    free(f);
  }
}

static ordo_future_t *fut_new(ordo_exec_t *e, ordo_task_fn fn, void *arg,
                              uintptr_t key, int refs) {
  ordo_future_t *f = calloc(1, sizeof *f);
  if (!f)
    return NULL;
  f->e = e;
  f->fn = fn;
  f->arg = arg;
  f->key = key;
  atomic_init(&f->state, X_QUEUED);
  atomic_init(&f->refs, refs);
  cond_init(&f->cv);
  return f;
}

static int fstate(const ordo_future_t *f) {
  return atomic_load(&f->state);
}

static ordo_future_t *innermost(ordo_future_t *t) {
  while (t->child)
    t = t->child;
  return t;
}

static bool running_on(const ordo_future_t *t, const ordo_exec_t *p) {
  return fstate(t) == X_RUNNING && t->top && t->top->e == p;
}

/* ---- The place's executor state ------------------------------------------ */

static ordo__owner *on_block(void *arg, ordo__owner *w, ordo_deadlock_t *rec);
static void recheck_pass_locked(xplace *xp, ordo_exec_t *p, const xwait *skip)
    ORDO_REQUIRES(xp->mu);

/* The place's executor state, made by its first executor. */
static xplace *place_get(ordo_t *o) {
  xplace *xp = atomic_load(&o->exec);
  if (xp)
    return xp;
  xp = calloc(1, sizeof *xp);
  if (!xp)
    return NULL;
  xp->o = o;
  xp->tab = ordo__engine_table(o);
  /* Adaptive (glibc): a thread that finds mu taken spins a little before
   * it sleeps. mu's holds are short (a queue step, a state change, a
   * wait's registration) and taken by every submit, start, finish and
   * wait, so a sleep and a wake-up on each contended one cost more than
   * the hold itself. */
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
  pthread_mutex_init(&xp->mu.m, &ma);
  pthread_mutexattr_destroy(&ma);
  LIST_INIT(&xp->execs);
  atomic_init(&xp->nwaits, 0);
  atomic_init(&xp->hooked, false);
  xplace *expect = NULL;
  if (!atomic_compare_exchange_strong(&o->exec, &expect, xp)) {
    ordo__mutex_destroy(&xp->mu);
    free(xp);
    return expect;
  }
  return xp;
}

/* Hooks the engine's block events, once, when the place's first executor
 * with detection on is made: a place whose executors all have detect = 0
 * (the bench's "off" row) costs the engine nothing. */
static void place_hook(xplace *xp) {
  if (!atomic_exchange(&xp->hooked, true))
    ordo__table_set_ext(xp->tab, on_block, xp);
}

void ordo__exec_place_close(ordo_t *o) {
  xplace *xp = atomic_load(&o->exec);
  if (!xp)
    return;
  for (;;) {
    ordo__mutex_lock(&xp->mu);
    ordo_exec_t *e = LIST_FIRST(&xp->execs);
    ordo__mutex_unlock(&xp->mu);
    if (!e)
      break;
    ordo_exec_destroy(e);
  }
  if (atomic_load(&xp->hooked))
    ordo__table_set_ext(xp->tab, NULL, NULL);
  ordo__mutex_destroy(&xp->mu);
  free(xp);
  atomic_store(&o->exec, NULL);
}

/* ---- Txns begun inside tasks ------------------------------------------- */

void ordo__exec_txn_begun(ordo_txn_t *t) {
  ordo_future_t *cur = ordo__exec_cur;
  ordo__owner *w = ordo__engine_owner(t);
  if (!w || !cur->e->opts.detect || cur->e->xp->o != t->o)
    return;
  xplace *xp = cur->e->xp;
  ordo__mutex_lock(&xp->mu);
  if (cur->nown < XOWN) {
    cur->own[cur->nown++] = w;
    w->ext_task = cur;
  }
  ordo__mutex_unlock(&xp->mu);
}

static void owner_forget_locked(xplace *xp, ordo__owner *w)
    ORDO_REQUIRES(xp->mu) {
  ORDO_UNUSED(xp); /* named for the analysis alone */
  ordo_future_t *t = w->ext_task;
  if (!t)
    return;
  for (unsigned i = 0; i < t->nown; i++)
    if (t->own[i] == w) {
      t->own[i] = t->own[--t->nown];
      break;
    }
  w->ext_task = NULL;
}

void ordo__exec_txn_ending(ordo_txn_t *t) {
  ordo__owner *w = ordo__engine_owner(t);
  xplace *xp = atomic_load(&t->o->exec);
  /* A txn no task began (the common case on a place with executors) costs
   * one atomic look, no mutex. */
  if (!w || !xp || !atomic_load_explicit(&w->ext_task, memory_order_relaxed))
    return;
  ordo__mutex_lock(&xp->mu);
  owner_forget_locked(xp, w);
  ordo__mutex_unlock(&xp->mu);
}

/* ---- Running tasks ------------------------------------------------------ */

static void start_locked(xplace *xp, ordo_future_t *f, ordo_future_t *parent)
    ORDO_REQUIRES(xp->mu) {
  ORDO_UNUSED(xp); /* named for the analysis alone */
  ordo_exec_t *e = f->e;
  atomic_store(&f->state, X_RUNNING);
  f->parent = parent;
  f->child = NULL;
  f->wait = NULL;
  f->nown = 0;
  if (parent) {
    parent->child = f;
    f->top = parent->top;
  } else {
    f->top = f;
    TAILQ_INSERT_TAIL(&e->running, f, qlink);
    e->nbusy++;
  }
}

/* The task is over: its txns are no longer its. Returns whether waiters
 * are to be woken (a broadcast of f->cv, which the caller may make after
 * it lets mu go: a wait checks the state under mu before it sleeps, so it
 * cannot miss it). The caller drops the executor's reference after. */
static bool finish_quiet_locked(xplace *xp, ordo_future_t *f, void *value)
    ORDO_REQUIRES(xp->mu) {
  ordo_exec_t *e = f->e;
  f->value = value;
  while (f->nown)
    owner_forget_locked(xp, f->own[f->nown - 1]);
  if (f->parent) {
    f->parent->child = NULL;
  } else {
    TAILQ_REMOVE(&e->running, f, qlink);
    e->nbusy--;
  }
  f->top = f->parent = NULL;
  atomic_store(&f->state, X_DONE);
  if (e->shut)
    pthread_cond_broadcast(&e->idle_cv);
  return f->nwaiters > 0; /* a wait registers under mu before it sleeps */
}

static void finish_locked(xplace *xp, ordo_future_t *f, void *value)
    ORDO_REQUIRES(xp->mu) {
  if (finish_quiet_locked(xp, f, value))
    pthread_cond_broadcast(&f->cv);
}

static void dequeue_locked(xplace *xp, ordo_future_t *f) ORDO_REQUIRES(xp->mu) {
  ORDO_UNUSED(xp); /* named for the analysis alone */
  TAILQ_REMOVE(&f->e->queue, f, qlink);
  f->e->nqueued--;
}

/* Runs f, which start_locked made running on this thread; mu is let go
 * while f's function runs. */
static void run_started_locked(xplace *xp, ordo_future_t *f)
    ORDO_REQUIRES(xp->mu) {
  ordo__mutex_unlock(&xp->mu);
  ordo_future_t *saved = ordo__exec_cur;
  ordo__exec_cur = f;
  void *v = f->fn(f->arg);
  ordo__exec_cur = saved;
  ordo__mutex_lock(&xp->mu);
  if (finish_quiet_locked(xp, f, v)) {
    /* Wake the waiters with mu let go, so that they do not wake only to
     * wait for it while this worker makes the system call. */
    ordo__mutex_unlock(&xp->mu);
    pthread_cond_broadcast(&f->cv);
    ordo__mutex_lock(&xp->mu);
  }
  fut_unref(f); /* the executor's reference */
}

typedef struct xworker {
  ordo_exec_t *e;
  bool spare;
} xworker;

static void *worker_main(void *arg) {
  xworker wk = *(xworker *)arg;
  free(arg);
  ordo_exec_t *e = wk.e;
  xplace *xp = e->xp;
  ordo__mutex_lock(&xp->mu);
  for (;;) {
    ordo_future_t *f = TAILQ_FIRST(&e->queue);
    if (f) {
      dequeue_locked(xp, f);
      start_locked(xp, f, NULL);
      recheck_pass_locked(xp, e, NULL); /* the last free worker is busy */
      run_started_locked(xp, f);
      continue;
    }
    /* A spare leaves once the queue is empty: the pool is back to its
     * nworkers. */
    if (e->shut || wk.spare)
      break;
    e->nidle++;
    ordo__cond_wait(&e->work_cv, &xp->mu);
    e->nidle--;
  }
  e->nalive--;
  if (wk.spare)
    e->nspare--;
  pthread_cond_broadcast(&e->idle_cv);
  ordo__mutex_unlock(&xp->mu);
  return NULL;
}

/* Starts a spare whose place (nalive, nspare) a detection reserved;
 * false when no thread could be started (the reservation is undone). */
static bool spare_start(ordo_exec_t *e) {
  xworker *wk = malloc(sizeof *wk);
  pthread_t thr;
  pthread_attr_t at;
  bool ok = false;
  if (wk) {
    wk->e = e;
    wk->spare = true;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    ok = pthread_create(&thr, &at, worker_main, wk) == 0;
    pthread_attr_destroy(&at);
    if (!ok)
      free(wk);
  }
  if (!ok) {
    ordo__mutex_lock(&e->xp->mu);
    e->nalive--;
    e->nspare--;
    pthread_cond_broadcast(&e->idle_cv);
    ordo__mutex_unlock(&e->xp->mu);
  }
  return ok;
}

/* ---- Detection: pool deadlocks ------------------------------------------- */

static void rec_edge(ordo_deadlock_t *r, uint64_t from, uint64_t to,
                     const char *key, ordo_mode_t mode) {
  if (r->nedges < ORDO_DL_MAX_EDGES) {
    ordo_dl_edge_t *d = &r->edge[r->nedges];
    d->from = from;
    d->to = to;
    size_t n = strlen(key);
    if (n > ORDO_DL_KEY_MAX)
      n = ORDO_DL_KEY_MAX;
    memcpy(d->key, key, n);
    d->key_len = n;
    d->mode = mode;
    d->soft = 0;
  }
  r->nedges++;
}

static void rec_future_edge(ordo_deadlock_t *r, uint64_t from,
                            const ordo_future_t *to) {
  char k[48];
  snprintf(k, sizeof k, "future:%" PRIu64, to->id & ~ID_TASK);
  rec_edge(r, from, to->id, k, ORDO_MODE_X);
}

static void rec_init(ordo_deadlock_t *r, int kind) {
  memset(r, 0, sizeof *r);
  r->kind = kind;
}

static uint64_t waiter_id(const xwait *w) {
  return w->self ? w->self->id : w->tid;
}

/* A txn among the chain's of top t whose wait holds the thread asleep
 * (a blocking ordo_lock or ordo_lock_all), or NULL. A pending
 * ordo_lock_all_async request waits, but its thread runs on: it is no
 * blocked worker (issue 31, defects 4 and 5), and the txn's wait is the
 * engine's to judge. */
static ordo__owner *chain_lock_wait(ordo_future_t *top) {
  for (ordo_future_t *c = top; c; c = c->child)
    for (unsigned i = 0; i < c->nown; i++)
      if (ordo__owner_thread_waits(c->own[i]))
        return c->own[i];
  return NULL;
}

/* Whether the worker running top t can make no progress while every
 * worker of p still marked with ep cannot: its innermost task waits on a
 * task queued on p, on a task running on such a worker, or on a lock one
 * of whose holders is a txn of such a worker. Under wait_mu and mu. */
static bool stuck(xplace *xp, ordo_exec_t *p, ordo_future_t *t, uint64_t ep)
    ORDO_REQUIRES(xp->mu) {
  ordo_future_t *in = innermost(t);
  if (in->wait) {
    xwait *w = in->wait;
    ordo_future_t *x = w->target;
    if (w->action != XA_NONE || w->cancelled)
      return false; /* about to act on an earlier detection, or ending */
    int st = fstate(x);
    if (st == X_QUEUED)
      return x->e == p;
    return running_on(x, p) && x->top->mark == ep;
  }
  ordo__owner *ow = chain_lock_wait(t);
  if (!ow)
    return false;
  /* A lock wait is granted only once every conflicting holder lets go:
   * one holder that is a stuck worker's txn holds it for good. (The queue
   * ahead is a soft edge the engine may grant past: not counted.) */
  size_t n = ordo__owner_holders_locked(ow, xp->blk, XBLOCK);
  for (size_t i = 0; i < n && i < XBLOCK; i++) {
    ordo_future_t *b = xp->blk[i]->ext_task;
    if (b && running_on(b, p) && b->top->mark == ep)
      return true;
  }
  return false;
}

/* The queued task of p at the end of the chain of waits from wait w, or
 * the first queued task of p that a stuck worker waits on. */
static ordo_future_t *help_for(ordo_exec_t *p, xwait *w) {
  ordo_future_t *x = w->target;
  for (unsigned i = 0; i <= p->nbusy && fstate(x) == X_RUNNING && x->top; i++) {
    ordo_future_t *in = innermost(x->top);
    if (!in->wait)
      break;
    x = in->wait->target;
  }
  if (fstate(x) == X_QUEUED && x->e == p)
    return x;
  ordo_future_t *t;
  TAILQ_FOREACH(t, &p->running, qlink) {
    ordo_future_t *in = innermost(t);
    if (in->wait && fstate(in->wait->target) == X_QUEUED &&
        in->wait->target->e == p)
      return in->wait->target;
  }
  return NULL;
}

static void pool_record(xplace *xp, ordo_exec_t *p, ordo_deadlock_t *r)
    ORDO_REQUIRES(xp->mu) {
  rec_init(r, ORDO_DL_POOL);
  char wk[48];
  snprintf(wk, sizeof wk, "worker:%s", p->name);
  ordo_future_t *t;
  TAILQ_FOREACH(t, &p->running, qlink) {
    ordo_future_t *in = innermost(t);
    if (in->wait) {
      rec_future_edge(r, in->id, in->wait->target);
      continue;
    }
    ordo__owner *ow = chain_lock_wait(t);
    size_t n = ow ? ordo__owner_blockers_locked(ow, xp->blk, XBLOCK) : 0;
    for (size_t i = 0; i < n && i < XBLOCK; i++)
      rec_edge(r, ow->id, xp->blk[i]->id, "lock", ORDO_MODE_X);
  }
  /* Each queued task a stuck worker waits on, once, to the pool. */
  uint64_t ep = ++xp->epoch;
  TAILQ_FOREACH(t, &p->running, qlink) {
    ordo_future_t *in = innermost(t);
    ordo_future_t *x = in->wait ? in->wait->target : NULL;
    if (x && fstate(x) == X_QUEUED && x->mark != ep) {
      x->mark = ep;
      rec_edge(r, x->id, p->pid, wk, ORDO_MODE_X);
    }
  }
}

/*
 * pool_check -- is p in a pool deadlock now? Every worker busy, and the
 * greatest set of its workers each stuck (above) on the others or on p's
 * queue is all of them, and one of them waits on a task in the queue.
 * Then the detection picks its actor, the wait that acts on it: closer,
 * the wait that formed it, when it is one of them, else a stuck worker's
 * wait on a queued task, and gives it the record and the policy's action
 * (README, "Policies"). Under wait_mu and mu; allocates nothing.
 */
static uint64_t sig_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

/* The waits that hold p's workers, as one number: each top's future wait
 * (its registration) or lock wait (its owner and the time it queued). */
static uint64_t pool_sig(xplace *xp, ordo_exec_t *p) ORDO_REQUIRES(xp->mu) {
  (void)xp;
  uint64_t h = 0x84222325cbf29ce4ull;
  ordo_future_t *t;
  TAILQ_FOREACH(t, &p->running, qlink) {
    ordo_future_t *in = innermost(t);
    if (in->wait) {
      h = sig_mix(h, in->wait->seq);
      continue;
    }
    ordo__owner *ow = chain_lock_wait(t);
    if (ow)
      h = sig_mix(sig_mix(h, ow->id), ow->enq_ns);
  }
  return h ? h : 1;
}

static void pool_check(xplace *xp, ordo_exec_t *p, xwait *closer)
    ORDO_REQUIRES(xp->mu) {
  if (!p->opts.detect || p->nbusy < p->nalive || p->nqueued == 0) {
    p->rep_sig = 0;
    return;
  }
  ordo_future_t *t;
  /* A detection's action not yet taken: that formation is being dealt
   * with, and what it leaves is judged once it is. */
  TAILQ_FOREACH(t, &p->running, qlink) {
    ordo_future_t *in = innermost(t);
    if (in->wait && in->wait->action != XA_NONE)
      return;
  }
  uint64_t ep = ++xp->epoch;
  TAILQ_FOREACH(t, &p->running, qlink) t->mark = ep;
  for (bool changed = true; changed;) {
    changed = false;
    TAILQ_FOREACH(t, &p->running, qlink) {
      if (t->mark == ep && !stuck(xp, p, t, ep)) {
        t->mark = 0;
        changed = true;
      }
    }
  }
  xwait *actor = NULL;
  TAILQ_FOREACH(t, &p->running, qlink) {
    if (t->mark != ep) {
      p->rep_sig = 0; /* not deadlocked: a later formation is a new one */
      return;
    }
    ordo_future_t *in = innermost(t);
    if (!in->wait)
      continue;
    if (in->wait == closer)
      actor = closer;
    else if (!actor && fstate(in->wait->target) == X_QUEUED)
      actor = in->wait;
  }
  if (!actor || !help_for(p, actor)) {
    p->rep_sig = 0;
    return; /* no queued task holds it up: not a pool deadlock */
  }
  /* Reported already, and the same waits still hold it: the same deadlock,
   * seen by a later search of its formation (issue 31, defect 6: a mark on
   * one wait for its whole life missed a formation that came again). */
  uint64_t sig = pool_sig(xp, p);
  if (p->opts.policy == ORDO_EXEC_REPORT && sig == p->rep_sig)
    return;
  pool_record(xp, p, &actor->rec);
  actor->rec_set = true;
  ordo_exec_policy_t pol = p->opts.policy;
  if (pol == ORDO_EXEC_COMPENSATE) {
    if (p->nspare < p->opts.max_spare && !p->foreign) {
      /* Reserved now, so that the next block event sees a free worker
       * coming and does not start another. */
      p->nspare++;
      p->nalive++;
      actor->action = XA_SPAWN;
    } else {
      pol = ORDO_EXEC_INLINE; /* no spare left: help as INLINE does */
    }
  }
  if (pol == ORDO_EXEC_INLINE) {
    unsigned depth = 0;
    for (ordo_future_t *c = actor->self; c && c->parent; c = c->parent)
      depth++;
    if (depth >= XINLINE_MAX_DEPTH)
      pol = ORDO_EXEC_FAIL; /* no stack left to help on: fail the wait */
  }
  switch (pol) {
  case ORDO_EXEC_COMPENSATE:
    break; /* the spare is reserved above */
  case ORDO_EXEC_INLINE:
    actor->action = XA_INLINE;
    /* The actor acts after it lets mu go (flush_record), when the task may
     * have been cancelled, released or started meanwhile: a reference
     * keeps its memory, and act_locked runs it only if it is still queued
     * (issue 31, defect 1). */
    actor->help = help_for(p, actor);
    if (actor->help)
      fut_ref(actor->help);
    break;
  case ORDO_EXEC_FAIL:
    actor->action = XA_FAIL;
    break;
  case ORDO_EXEC_REPORT:
    actor->action = XA_REPORT;
    p->rep_sig = sig;
    break;
  }
  if (actor != closer)
    pthread_cond_broadcast(&actor->target->cv);
}

/* ---- Detection: mixed lock/future cycles -------------------------------- */

/* What an owner stands for in the mixed graph: the thread of its task's
 * chain, or the txn itself when it belongs to no task. */
static xnode node_of_owner(ordo__owner *w) {
  ordo_future_t *t = w->ext_task;
  if (t && fstate(t) == X_RUNNING && t->top)
    return (xnode){t->top, NULL};
  return (xnode){NULL, w};
}

static bool node_eq(xnode a, xnode b) {
  return a.top == b.top && a.own == b.own;
}

static bool visit(xplace *xp, xnode n) ORDO_REQUIRES(xp->mu) {
  for (size_t i = 0; i < xp->nvisited; i++)
    if (node_eq(xp->visited[i], n))
      return false;
  if (xp->nvisited == XVISIT)
    return false;
  xp->visited[xp->nvisited++] = n;
  return true;
}

/* Adds the edges out of n to the arena from *pos: a thread's future wait
 * on a running task (to that task's thread), and a lock wait's blockers. */
static bool expand(xplace *xp, xnode n, size_t *pos) ORDO_REQUIRES(xp->mu) {
  ordo__owner *ow = n.own;
  if (n.top) {
    ordo_future_t *in = innermost(n.top);
    if (in->wait) {
      ordo_future_t *x = in->wait->target;
      if (in->wait->action != XA_NONE || in->wait->cancelled ||
          fstate(x) != X_RUNNING || !x->top)
        return true;
      if (*pos == XARENA)
        return false;
      xp->arena[(*pos)++] = (xedge){{x->top, NULL}, in->id, x->id, NULL};
      return true;
    }
    ow = chain_lock_wait(n.top);
  }
  if (!ow || !ordo__owner_waiting(ow))
    return true;
  /* The holders alone: a request queued ahead is a soft edge, which the
   * engine grants past or reorders, never a reason to abort a txn. */
  size_t k = ordo__owner_holders_locked(ow, xp->blk, XBLOCK);
  for (size_t i = 0; i < k && i < XBLOCK; i++) {
    if (*pos == XARENA)
      return false;
    xp->arena[(*pos)++] =
        (xedge){node_of_owner(xp->blk[i]), ow->id, xp->blk[i]->id, ow};
  }
  return true;
}

/*
 * mixed_search -- a depth-first search from start for a path back to it
 * through future waits on running tasks and lock waits (their holders:
 * hard edges only). On a cycle it fills rec (kind ORDO_DL_MIXED) and
 * returns true with *victim the txn to abort: the one the place's victim
 * policy picks among the cycle's txns that wait on a lock
 * (ordo__victim_pick); NULL when no lock wait is on it (a cycle of futures
 * alone). Under wait_mu and mu.
 */
static bool mixed_search(xplace *xp, xnode start, ordo_deadlock_t *rec,
                         ordo__owner **victim) ORDO_REQUIRES(xp->mu) {
  xp->nvisited = 0;
  visit(xp, start);
  size_t pos = 0, depth = 0;
  xp->frames[0] = (xframe){start, 0, 0, 0};
  if (!expand(xp, start, &pos))
    return false;
  xp->frames[0].end = pos;
  for (;;) {
    xframe *fr = &xp->frames[depth];
    if (fr->next == fr->end) {
      if (depth == 0)
        return false;
      pos = fr->begin;
      depth--;
      continue;
    }
    xedge *e = &xp->arena[fr->begin + fr->next++];
    if (node_eq(e->to, start))
      break;
    if (depth + 1 == XFRAMES || !visit(xp, e->to))
      continue;
    size_t b = pos;
    if (!expand(xp, e->to, &pos))
      return false;
    xp->frames[++depth] = (xframe){e->to, b, 0, pos - b};
  }
  rec_init(rec, ORDO_DL_MIXED);
  size_t ncand = 0;
  for (size_t i = 0; i <= depth; i++) {
    xframe *fr = &xp->frames[i];
    xedge *e = &xp->arena[fr->begin + fr->next - 1];
    if (e->waiter) {
      rec_edge(rec, e->from_id, e->to_id, "lock", ORDO_MODE_X);
      bool dup = false;
      for (size_t j = 0; j < ncand; j++)
        dup = dup || xp->cand[j] == e->waiter;
      if (!dup)
        xp->cand[ncand++] = e->waiter;
    } else {
      char k[48];
      snprintf(k, sizeof k, "future:%" PRIu64, e->to_id & ~ID_TASK);
      rec_edge(rec, e->from_id, e->to_id, k, ORDO_MODE_X);
    }
  }
  /* The place's victim policy among the txns that wait on a lock, as the
   * engine's own detection would choose (NULL: futures alone). */
  *victim = ordo__victim_pick(xp->tab, xp->cand, ncand);
  return true;
}

/* The engine's hook at every lock block event (under wait_mu). */
static ordo__owner *on_block(void *arg, ordo__owner *w, ordo_deadlock_t *rec) {
  xplace *xp = arg;
  if (atomic_load(&xp->nwaits) == 0)
    return NULL; /* no future wait: no cycle through one */
  ordo__owner *victim = NULL;
  ordo__mutex_lock(&xp->mu);
  ordo_future_t *t = w->ext_task;
  ordo_exec_t *p = t && fstate(t) == X_RUNNING && t->top ? t->top->e : NULL;
  if (!p || p->opts.detect) {
    if (!mixed_search(xp, node_of_owner(w), rec, &victim) && p && !p->foreign)
      pool_check(xp, p, NULL);
  }
  ordo__mutex_unlock(&xp->mu);
  return victim;
}

/* The search at a future wait's block event (under wait_mu). */
static ordo__owner *on_wait(void *arg, ordo_deadlock_t *rec) {
  xwait *w = arg;
  xplace *xp = w->target->e->xp;
  ordo__owner *victim = NULL;
  ordo__mutex_lock(&xp->mu);
  ordo_future_t *top = w->self->top;
  if (top && fstate(w->target) != X_DONE && w->action == XA_NONE &&
      !w->cancelled) {
    if (mixed_search(xp, (xnode){top, NULL}, rec, &victim)) {
      if (!victim) {
        /* A cycle of future waits alone: no txn to abort, so the wait
         * that closed it is its only way out (README, "Mixed cycles").
         * Recorded once per wait: a recheck of the same wait finds the
         * same cycle. */
        bool fail = top->e->opts.policy == ORDO_EXEC_FAIL;
        if (fail || !w->reported) {
          w->rec = *rec;
          w->rec_set = true;
          w->action = fail ? XA_FAIL : XA_REPORT;
        }
      }
    } else {
      pool_check(xp, top->e, w);
    }
  }
  ordo__mutex_unlock(&xp->mu);
  return victim;
}

/* Whether a wait that blocks now could close a pool deadlock or a mixed
 * cycle, so that it must search: its thread is a worker (or a foreign
 * pool's) whose pool is saturated with a queue, or whose chain holds txns
 * or is waited on. One look under mu; the search looks again. */
static bool need_search_locked(xplace *xp, xwait *w) ORDO_REQUIRES(xp->mu) {
  ORDO_UNUSED(xp); /* named for the analysis alone */
  ordo_future_t *top = w->self ? w->self->top : NULL;
  if (!top || !top->e->opts.detect || !w->target->e->opts.detect)
    return false;
  ordo_exec_t *p = top->e;
  if (p->nbusy >= p->nalive && p->nqueued > 0)
    return true;
  for (ordo_future_t *c = top; c; c = c->child)
    if (c->nown || c->nwaiters)
      return true;
  return false;
}

/* ---- Waits ------------------------------------------------------------- */

/* No free worker, none reserved, and a queue: the only state in which a
 * pool deadlock can form without a block event of the pool. */
static bool saturated(const ordo_exec_t *p) {
  return !p->foreign && p->opts.detect && p->nbusy >= p->nalive &&
         p->nqueued > 0;
}

/* Gives the recheck duty of saturated pool p to a worker's future wait
 * other than skip (woken, it takes the duty in wait_loop): called when the
 * pool becomes saturated, or when the wait that had the duty ends. */
static void recheck_pass_locked(xplace *xp, ordo_exec_t *p, const xwait *skip)
    ORDO_REQUIRES(xp->mu) {
  if (p->rechecker || !saturated(p) || atomic_load(&xp->nwaits) == 0)
    return;
  ordo_future_t *t;
  TAILQ_FOREACH(t, &p->running, qlink) {
    ordo_future_t *in = innermost(t);
    if (in->wait && in->wait != skip && !in->wait->cancelled) {
      pthread_cond_broadcast(&in->wait->target->cv);
      return;
    }
  }
}

/* The thread's current task, if it is a task of xp's place: a task of
 * another place is under another mutex, and its waits are not this
 * place's to see. */
static ordo_future_t *self_on(const xplace *xp) {
  ordo_future_t *cur = ordo__exec_cur;
  return cur && cur->e->xp == xp ? cur : NULL;
}

static void wait_register_locked(xplace *xp, xwait *w) ORDO_REQUIRES(xp->mu) {
  ordo_future_t *f = w->target;
  w->action = XA_NONE;
  w->help = NULL;
  w->rec_set = false;
  w->reported = false;
  w->cancelled = false;
  w->seq = ++xp->next_wait;
  if (!w->self)
    w->tid = ID_THREAD | ++xp->next_thread;
  else
    w->self->wait = w;
  f->nwaiters++;
  LIST_INSERT_HEAD(&f->e->waits, w, link);
  w->counted = f->e->opts.detect != 0;
  if (w->counted)
    atomic_fetch_add(&xp->nwaits, 1);
}

static void wait_unregister_locked(xplace *xp, xwait *w) ORDO_REQUIRES(xp->mu) {
  if (w->help) {
    fut_unref(w->help); /* an INLINE action the wait ended before taking */
    w->help = NULL;
  }
  if (w->action == XA_SPAWN) {
    /* A spare reserved for this wait, which ended (done, cancelled, timed
     * out) before it acted: the reservation is given back, or nalive
     * would stay one too high for good (destroy would wait for a worker
     * that never comes). */
    ordo_exec_t *p = w->self->top->e;
    p->nalive--;
    p->nspare--;
    pthread_cond_broadcast(&p->idle_cv);
  }
  w->action = XA_NONE;
  ordo_exec_t *rp = w->self && w->self->top ? w->self->top->e : NULL;
  if (rp && rp->rechecker == w) {
    rp->rechecker = NULL;
    recheck_pass_locked(xp, rp, w);
  }
  LIST_REMOVE(w, link);
  w->target->nwaiters--;
  if (w->target->e->shut)
    pthread_cond_broadcast(&w->target->e->idle_cv);
  if (w->self && w->self->wait == w)
    w->self->wait = NULL;
  if (w->counted)
    atomic_fetch_sub(&xp->nwaits, 1);
}

/* Adds the record a detection left in w, with no executor lock held. */
static void flush_record(xplace *xp, xwait *w) ORDO_REQUIRES(xp->mu) {
  if (!w->rec_set)
    return;
  w->rec_set = false;
  ordo__mutex_unlock(&xp->mu);
  ordo__table_add_record(xp->tab, &w->rec);
  ordo__mutex_lock(&xp->mu);
}

/* Does what a detection asked of w: 0 to wait on, or the wait's code.
 * w->action stays set until the action is under way, so that a search
 * made meanwhile (mu is let go to add the record) does not count w as
 * stuck and find the same deadlock again. */
static int act_locked(xplace *xp, xwait *w) ORDO_REQUIRES(xp->mu) {
  int a = w->action;
  w->reported = w->reported || a == XA_REPORT;
  flush_record(xp, w);
  ordo_future_t *help = w->help, *held = w->help;
  w->help = NULL;
  if (a == XA_FAIL)
    return ORDO_EDEADLK; /* the caller unregisters w, action and all */
  if (a == XA_SPAWN) {
    ordo_exec_t *p = w->self->top->e;
    ordo__mutex_unlock(&xp->mu);
    bool ok = spare_start(p);
    ordo__mutex_lock(&xp->mu);
    if (!ok) {
      help = help_for(p, w);
      a = XA_INLINE;
    }
  }
  if (a == XA_INLINE && help && fstate(help) == X_QUEUED) {
    dequeue_locked(xp, help);
    start_locked(xp, help, w->self);
    w->action = XA_NONE;
    run_started_locked(xp, help);
  }
  if (held)
    fut_unref(held); /* the detection's reference (pool_check) */
  w->action = XA_NONE;
  return 0;
}

/* Waits under mu until w's target is over, the deadline passes, or a
 * detection says otherwise. */
static int wait_loop(xplace *xp, xwait *w, uint64_t deadline_ns)
    ORDO_REQUIRES(xp->mu) {
  bool searched = false;
  uint64_t recheck_ms = 0;
  for (;;) {
    int st = fstate(w->target);
    if (st == X_DONE)
      return 0;
    if (st == X_CANCELED || w->cancelled)
      return ORDO_ECANCELED;
    if (w->action != XA_NONE) {
      int a = w->action;
      int rc = act_locked(xp, w);
      if (rc)
        return rc;
      /* After helping (or starting a spare) it blocks again: a new block
       * event. After a report it goes on waiting as it was. */
      searched = a == XA_REPORT;
      continue;
    }
    if (!searched) {
      searched = true;
      if (need_search_locked(xp, w)) {
        ordo__mutex_unlock(&xp->mu);
        ordo__table_ext_search(xp->tab, on_wait, w);
        ordo__mutex_lock(&xp->mu);
        continue;
      }
    }
    uint64_t now = mono_ns();
    if (deadline_ns != ORDO_NO_DEADLINE && now >= deadline_ns)
      return ORDO_ETIMEDOUT;
    /* A wait that could be part of a pool deadlock (its pool saturated,
     * with a queue) looks again after a while: one can form without a
     * block event (a holder outside the pool lets go of a lock a worker
     * waits for). 1 ms, doubling to XRECHECK_MAX_MS. */
    uint64_t until = deadline_ns;
    ordo_exec_t *own = w->self && w->self->top ? w->self->top->e : NULL;
    bool recheck = own && saturated(own) &&
                   (!own->rechecker || own->rechecker == w) &&
                   need_search_locked(xp, w);
    if (recheck) {
      own->rechecker = w;
      recheck_ms = recheck_ms ? recheck_ms * 2 : 1;
      if (recheck_ms > XRECHECK_MAX_MS)
        recheck_ms = XRECHECK_MAX_MS;
      uint64_t r = now + recheck_ms * 1000000u;
      if (r < until)
        until = r;
    } else {
      recheck_ms = 0;
      if (own && own->rechecker == w)
        own->rechecker = NULL; /* the pool is no longer saturated */
    }
    cond_until(&w->target->cv, &xp->mu, until);
    if (recheck && until != deadline_ns && mono_ns() >= until)
      searched = false; /* the recheck's time: search again */
  }
}

int ordo_future_wait(ordo_future_t *f, long timeout_ms, void **value) {
  if (!f)
    return ORDO_EINVAL;
  int st = fstate(f);
  if (st == X_DONE) {
    if (value)
      *value = f->value;
    return 0;
  }
  if (st == X_CANCELED)
    return ORDO_ECANCELED;
  if (timeout_ms == 0)
    return ORDO_ETIMEDOUT;
  /* A task that runs already is often about to be done: look a few
   * microseconds before registering and sleeping, as an adaptive mutex
   * spins before its futex (a sleep and a wake-up cost more than that). */
  for (int i = 0; i < WAIT_SPIN && st == X_RUNNING; i++) {
    ordo__cpu_relax();
    st = fstate(f);
  }
  if (st == X_DONE) {
    if (value)
      *value = f->value;
    return 0;
  }
  uint64_t deadline = mono_deadline(timeout_ms);
  xplace *xp = f->e->xp;
  xwait w;
  w.target = f;
  w.self = self_on(xp);
  fut_ref(f);
  ordo__mutex_lock(&xp->mu);
  wait_register_locked(xp, &w);
  int rc = wait_loop(xp, &w, deadline);
  wait_unregister_locked(xp, &w);
  flush_record(xp, &w);
  if (rc == 0 && value)
    *value = f->value;
  ordo__mutex_unlock(&xp->mu);
  fut_unref(f);
  return rc;
}

int ordo_future_cancel(ordo_future_t *f) {
  if (!f)
    return ORDO_EINVAL;
  int st = fstate(f);
  if (st == X_DONE || st == X_CANCELED)
    return 0;
  xplace *xp = f->e->xp;
  int rc = 0;
  ordo__mutex_lock(&xp->mu);
  st = fstate(f);
  if (st == X_RUNNING) {
    /* A running task cannot be stopped, but every wait on it can: the
     * waits in flight end with ORDO_ECANCELED, the task runs on (ordo.h:
     * every wait is cancellable), and EBUSY says it runs on. */
    xwait *w;
    LIST_FOREACH(w, &f->e->waits, link)
    if (w->target == f)
      w->cancelled = true;
    if (f->nwaiters)
      pthread_cond_broadcast(&f->cv);
    rc = ORDO_EBUSY;
  } else if (st == X_QUEUED && !f->e->foreign) {
    dequeue_locked(xp, f);
    atomic_store(&f->state, X_CANCELED);
    pthread_cond_broadcast(&f->cv);
    if (f->e->shut)
      pthread_cond_broadcast(&f->e->idle_cv);
    fut_unref(f); /* the executor's; the caller's is still held */
  }
  ordo__mutex_unlock(&xp->mu);
  return rc;
}

int ordo_future_done(const ordo_future_t *f) {
  return f && fstate(f) >= X_DONE;
}

void ordo_future_release(ordo_future_t *f) {
  if (f)
    fut_unref(f);
}

/* ---- Executors ----------------------------------------------------------- */

void ordo_exec_options_init(ordo_exec_options_t *opts) {
  if (!opts)
    return;
  memset(opts, 0, sizeof *opts);
  opts->policy = ORDO_EXEC_INLINE;
  opts->max_spare = 0; /* 0 here means nworkers, fixed at create */
  opts->detect = 1;
  opts->name = "pool";
}

static int exec_new(ordo_exec_t **out, ordo_t *o, unsigned nworkers,
                    const ordo_exec_options_t *opts, bool foreign) {
  if (!out || !o || nworkers == 0 || nworkers > XWORKERS_MAX)
    return ORDO_EINVAL;
  if (!ordo__engine_table(o))
    return ORDO_ENOTSUP;
  ordo_exec_options_t d;
  ordo_exec_options_init(&d);
  if (foreign)
    d.policy = ORDO_EXEC_REPORT;
  if (opts)
    d = *opts;
  if ((unsigned)d.policy > ORDO_EXEC_REPORT)
    return ORDO_EINVAL;
  if (foreign && d.policy != ORDO_EXEC_FAIL && d.policy != ORDO_EXEC_REPORT)
    return ORDO_EINVAL;
  xplace *xp = place_get(o);
  if (!xp)
    return ORDO_ENOMEM;
  ordo_exec_t *e = calloc(1, sizeof *e);
  if (!e)
    return ORDO_ENOMEM;
  e->xp = xp;
  e->foreign = foreign;
  e->nworkers = nworkers;
  e->opts = d;
  snprintf(e->name, sizeof e->name, "%s", d.name ? d.name : "pool");
  /* The name goes into DOT and JSON strings unquoted: keep it printable
   * and free of quotes and backslashes. */
  for (char *c = e->name; *c; c++)
    if (*c < 0x20 || *c > 0x7e || *c == '"' || *c == '\\')
      *c = '_';
  e->opts.name = e->name;
  if (e->opts.max_spare == 0)
    e->opts.max_spare = nworkers;
  TAILQ_INIT(&e->queue);
  TAILQ_INIT(&e->running);
  LIST_INIT(&e->waits);
  cond_init(&e->work_cv);
  cond_init(&e->idle_cv);
  e->nalive = nworkers;
  if (foreign) {
    e->fcap = XHASH0;
    e->fh = calloc(e->fcap, sizeof *e->fh);
  } else {
    e->thr = calloc(nworkers, sizeof *e->thr);
  }
  if (foreign ? !e->fh : !e->thr) {
    free(e->fh);
    free(e->thr);
    pthread_cond_destroy(&e->work_cv);
    pthread_cond_destroy(&e->idle_cv);
    free(e);
    return ORDO_ENOMEM;
  }
  if (e->opts.detect)
    place_hook(xp);
  ordo__mutex_lock(&xp->mu);
  e->pid = ID_POOL | ++xp->next_pool;
  LIST_INSERT_HEAD(&xp->execs, e, link);
  ordo__mutex_unlock(&xp->mu);
  *out = e;
  return 0;
}

int ordo_exec_create(ordo_exec_t **out, ordo_t *o, unsigned nworkers,
                     const ordo_exec_options_t *opts) {
  int rc = exec_new(out, o, nworkers, opts, false);
  if (rc)
    return rc;
  ordo_exec_t *e = *out;
  for (unsigned i = 0; i < nworkers; i++) {
    xworker *wk = malloc(sizeof *wk);
    if (!wk || (wk->e = e, wk->spare = false,
                pthread_create(&e->thr[i], NULL, worker_main, wk) != 0)) {
      free(wk);
      ordo__mutex_lock(&e->xp->mu);
      e->nalive -= nworkers - i;
      ordo__mutex_unlock(&e->xp->mu);
      ordo_exec_destroy(e);
      *out = NULL;
      return ORDO_ENOMEM;
    }
    e->nstarted = i + 1;
  }
  return 0;
}

int ordo_exec_submit(ordo_exec_t *e, ordo_task_fn fn, void *arg,
                     ordo_future_t **fut) {
  if (!e || !fn || !fut || e->foreign)
    return ORDO_EINVAL;
  ordo_future_t *f = fut_new(e, fn, arg, 0, 2);
  if (!f)
    return ORDO_ENOMEM;
  xplace *xp = e->xp;
  ordo__mutex_lock(&xp->mu);
  int rc = 0;
  if (e->shut)
    rc = ORDO_ECANCELED;
  else if (e->opts.max_queue && e->nqueued >= e->opts.max_queue)
    rc = ORDO_ELIMIT;
  if (rc) {
    ordo__mutex_unlock(&xp->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
    return rc;
  }
  f->id = ID_TASK | ++xp->next_task;
  TAILQ_INSERT_TAIL(&e->queue, f, qlink);
  e->nqueued++;
  if (e->nidle)
    pthread_cond_signal(&e->work_cv);
  else
    recheck_pass_locked(xp, e, NULL);
  ordo__mutex_unlock(&xp->mu);
  *fut = f;
  return 0;
}

/* Cancels every queued task (ORDO_EXEC_NOW). */
static void cancel_queue_locked(xplace *xp, ordo_exec_t *e)
    ORDO_REQUIRES(xp->mu) {
  ordo_future_t *f;
  while ((f = TAILQ_FIRST(&e->queue))) {
    dequeue_locked(xp, f);
    atomic_store(&f->state, X_CANCELED);
    pthread_cond_broadcast(&f->cv);
    fut_unref(f);
  }
}

int ordo_exec_shutdown(ordo_exec_t *e, ordo_exec_shutdown_t how,
                       long timeout_ms) {
  if (!e || (how != ORDO_EXEC_DRAIN && how != ORDO_EXEC_NOW))
    return ORDO_EINVAL;
  uint64_t deadline = mono_deadline(timeout_ms);
  xplace *xp = e->xp;
  int rc = 0;
  ordo__mutex_lock(&xp->mu);
  e->shut = true;
  if (how == ORDO_EXEC_NOW && !e->foreign)
    cancel_queue_locked(xp, e);
  pthread_cond_broadcast(&e->work_cv);
  while (!e->foreign && (e->nbusy > 0 || e->nqueued > 0)) {
    if (deadline != ORDO_NO_DEADLINE && mono_ns() >= deadline) {
      rc = ORDO_ETIMEDOUT;
      break;
    }
    cond_until(&e->idle_cv, &xp->mu, deadline);
  }
  ordo__mutex_unlock(&xp->mu);
  return rc;
}

void ordo_exec_destroy(ordo_exec_t *e) {
  if (!e)
    return;
  xplace *xp = e->xp;
  ordo_exec_shutdown(e, ORDO_EXEC_NOW, ORDO_FOREVER);
  for (unsigned i = 0; i < e->nstarted; i++)
    pthread_join(e->thr[i], NULL);
  ordo__mutex_lock(&xp->mu);
  /* Spares are detached: wait until the last has left, and until every
   * wait on a task of e, woken by the shutdown, has left e's list. */
  while ((!e->foreign && e->nalive > 0) ||
         (!e->foreign && !LIST_EMPTY(&e->waits)))
    ordo__cond_wait(&e->idle_cv, &xp->mu);
  LIST_REMOVE(e, link);
  for (size_t i = 0; e->fh && i < e->fcap; i++) {
    ordo_future_t *f;
    while ((f = e->fh[i])) {
      e->fh[i] = f->hnext;
      if (fstate(f) == X_QUEUED)
        dequeue_locked(xp, f);
      else if (fstate(f) == X_RUNNING && !f->parent)
        TAILQ_REMOVE(&e->running, f, qlink);
      /* A foreign task never noted done: its txns are no longer a task's
       * (invariant 5), so no search reads this record again. */
      while (f->nown)
        owner_forget_locked(xp, f->own[f->nown - 1]);
      atomic_store(&f->state, X_CANCELED);
      fut_unref(f);
    }
  }
  ordo__mutex_unlock(&xp->mu);
  pthread_cond_destroy(&e->work_cv);
  pthread_cond_destroy(&e->idle_cv);
  free(e->fh);
  free(e->thr);
  free(e);
}

/* ---- Foreign pools ----------------------------------------------------- */

int ordo_exec_declare(ordo_exec_t **out, ordo_t *o, unsigned nworkers,
                      const ordo_exec_options_t *opts) {
  return exec_new(out, o, nworkers, opts, true);
}

static size_t fslot(const ordo_exec_t *e, uintptr_t key) {
  uint64_t h = (uint64_t)key * UINT64_C(0x9e3779b97f4a7c15);
  return (size_t)(h >> 32) & (e->fcap - 1);
}

static ordo_future_t *ffind(const ordo_exec_t *e, uintptr_t key) {
  ordo_future_t *f = e->fh[fslot(e, key)];
  while (f && f->key != key)
    f = f->hnext;
  return f;
}

static void fremove(ordo_exec_t *e, ordo_future_t *f) {
  ordo_future_t **pp = &e->fh[fslot(e, f->key)];
  while (*pp != f)
    pp = &(*pp)->hnext;
  *pp = f->hnext;
  e->fcount--;
}

/* Grows the hash to keep chains short; false (and no change) on ENOMEM. */
static bool fgrow(ordo_exec_t *e) {
  if (e->fcount < e->fcap)
    return true;
  size_t ncap = e->fcap * 2;
  ordo_future_t **nh = calloc(ncap, sizeof *nh);
  if (!nh)
    return false;
  ordo_future_t **old = e->fh;
  size_t ocap = e->fcap;
  e->fh = nh;
  e->fcap = ncap;
  for (size_t i = 0; i < ocap; i++) {
    ordo_future_t *f = old[i], *nx;
    for (; f; f = nx) {
      nx = f->hnext;
      size_t s = fslot(e, f->key);
      f->hnext = nh[s];
      nh[s] = f;
    }
  }
  free(old);
  return true;
}

int ordo_exec_note_queued(ordo_exec_t *e, uintptr_t task) {
  if (!e || !e->foreign || !task)
    return ORDO_EINVAL;
  ordo_future_t *f = fut_new(e, NULL, NULL, task, 1);
  if (!f)
    return ORDO_ENOMEM;
  xplace *xp = e->xp;
  int rc = 0;
  ordo__mutex_lock(&xp->mu);
  if (ffind(e, task))
    rc = ORDO_EINVAL;
  else if (!fgrow(e))
    rc = ORDO_ENOMEM;
  if (!rc) {
    f->id = ID_TASK | ++xp->next_task;
    size_t s = fslot(e, task);
    f->hnext = e->fh[s];
    e->fh[s] = f;
    e->fcount++;
    TAILQ_INSERT_TAIL(&e->queue, f, qlink);
    e->nqueued++;
  }
  ordo__mutex_unlock(&xp->mu);
  if (rc)
    fut_unref(f);
  return rc;
}

/* note_started (start) and note_done: the task's state moves from queued
 * to running on this thread, or from running here to done. */
static int fnote_run(ordo_exec_t *e, uintptr_t task, bool start) {
  if (!e || !e->foreign || !task)
    return ORDO_EINVAL;
  xplace *xp = e->xp;
  int rc = 0;
  ordo__mutex_lock(&xp->mu);
  ordo_future_t *f = ffind(e, task);
  ordo_future_t *cur = ordo__exec_cur;
  if (!f || fstate(f) != (start ? X_QUEUED : X_RUNNING) ||
      (!start && cur != f)) {
    rc = ORDO_EINVAL;
  } else if (start) {
    dequeue_locked(xp, f);
    /* Started on a thread that runs another task of this pool: the pool
     * runs it inline, on the same worker. */
    bool nested = cur && cur->e == e && fstate(cur) == X_RUNNING && !cur->child;
    start_locked(xp, f, nested ? cur : NULL);
    f->saved = cur;
    ordo__exec_cur = f;
  } else {
    ordo__exec_cur = f->saved;
    finish_locked(xp, f, NULL);
    fremove(e, f);
  }
  ordo__mutex_unlock(&xp->mu);
  if (!rc && !start)
    fut_unref(f);
  return rc;
}

int ordo_exec_note_started(ordo_exec_t *e, uintptr_t task) {
  return fnote_run(e, task, true);
}

int ordo_exec_note_done(ordo_exec_t *e, uintptr_t task) {
  return fnote_run(e, task, false);
}

int ordo_exec_note_wait_begin(ordo_exec_t *e, uintptr_t task) {
  if (!e || !e->foreign || !task)
    return ORDO_EINVAL;
  xwait *w = malloc(sizeof *w);
  if (!w)
    return ORDO_ENOMEM;
  xplace *xp = e->xp;
  int rc = 0;
  ordo__mutex_lock(&xp->mu);
  ordo_future_t *f = ffind(e, task);
  if (!f || fstate(f) >= X_DONE) {
    /* Done already (or never noted): nothing to wait for. */
    ordo__mutex_unlock(&xp->mu);
    free(w);
    return 0;
  }
  fut_ref(f);
  w->target = f;
  w->self = self_on(xp);
  wait_register_locked(xp, w);
  if (need_search_locked(xp, w)) {
    ordo__mutex_unlock(&xp->mu);
    ordo__table_ext_search(xp->tab, on_wait, w);
    ordo__mutex_lock(&xp->mu);
  }
  if (w->action != XA_NONE) {
    /* Only FAIL and REPORT reach a foreign pool; the action stays set
     * while the record is added (act_locked says why). */
    int a = w->action;
    w->reported = a == XA_REPORT;
    flush_record(xp, w);
    w->action = XA_NONE;
    if (a == XA_FAIL)
      rc = ORDO_EDEADLK;
  }
  if (rc) {
    wait_unregister_locked(xp, w);
    ordo__mutex_unlock(&xp->mu);
    fut_unref(f);
    free(w);
    return rc;
  }
  w->tnext = tls_fwaits;
  tls_fwaits = w;
  ordo__mutex_unlock(&xp->mu);
  return 0;
}

int ordo_exec_note_wait_end(ordo_exec_t *e, uintptr_t task) {
  if (!e || !e->foreign || !task)
    return ORDO_EINVAL;
  xwait **pp = &tls_fwaits;
  while (*pp && ((*pp)->target->e != e || (*pp)->target->key != task))
    pp = &(*pp)->tnext;
  xwait *w = *pp;
  if (!w)
    return 0; /* its begin found the task done: no wait was noted */
  *pp = w->tnext;
  xplace *xp = e->xp;
  ordo__mutex_lock(&xp->mu);
  wait_unregister_locked(xp, w);
  flush_record(xp, w); /* a detection that picked this wait to act */
  w->action = XA_NONE;
  ordo__mutex_unlock(&xp->mu);
  fut_unref(w->target);
  free(w);
  return 0;
}

/* ---- The dump ---------------------------------------------------------- */

static const char *state_name(int st) {
  static const char *const n[] = {"queued", "running", "done", "canceled"};
  return (unsigned)st < 4 ? n[st] : "?";
}

/* A node's name in both formats: "task <n>" or "thread <n>" (the ids'
 * numbers without their kind bits, which JSON's doubles could not hold). */
static void node_name(FILE *f, uint64_t id) {
  if ((id & ID_THREAD) == ID_THREAD)
    fprintf(f, "\"thread %" PRIu64 "\"", id & ~ID_THREAD);
  else
    fprintf(f, "\"task %" PRIu64 "\"", id & ~ID_TASK);
}

static uint64_t task_no(const ordo_future_t *t) {
  return t->id & ~ID_TASK;
}

static void dot_exec(FILE *f, ordo_exec_t *e) {
  fprintf(f,
          "  \"worker:%s\" [shape=ellipse, label=\"worker:%s\\n%u workers, "
          "%u busy, %s\"];\n",
          e->name, e->name, e->nalive, e->nbusy, policy_name(e->opts.policy));
  ordo_future_t *t;
  TAILQ_FOREACH(t, &e->queue, qlink) {
    fprintf(f, "  ");
    node_name(f, t->id);
    fprintf(f, " -> \"worker:%s\" [label=\"queued\", style=dashed];\n",
            e->name);
  }
  xwait *w;
  LIST_FOREACH(w, &e->waits, link) {
    fprintf(f, "  ");
    node_name(f, waiter_id(w));
    fprintf(f, " -> ");
    node_name(f, w->target->id);
    fprintf(f, " [label=\"future (%s)%s\"];\n", state_name(fstate(w->target)),
            fstate(w->target) == X_QUEUED ? ", would unblock" : "");
  }
}

/* In JSON tasks are their numbers, waiters their names (a waiter may be
 * a thread outside tasks). */
static void json_exec(FILE *f, ordo_exec_t *e) {
  fprintf(f,
          "{\"name\": \"%s\", \"workers\": %u, \"busy\": %u, "
          "\"policy\": \"%s\", \"queue\": [",
          e->name, e->nalive, e->nbusy, policy_name(e->opts.policy));
  ordo_future_t *t;
  bool first = true;
  TAILQ_FOREACH(t, &e->queue, qlink) {
    fprintf(f, "%s%" PRIu64, first ? "" : ", ", task_no(t));
    first = false;
  }
  fprintf(f, "], \"running\": [");
  first = true;
  TAILQ_FOREACH(t, &e->running, qlink) {
    for (ordo_future_t *c = t; c; c = c->child) {
      fprintf(f, "%s%" PRIu64, first ? "" : ", ", task_no(c));
      first = false;
    }
  }
  fprintf(f, "], \"waits\": [");
  first = true;
  xwait *w;
  LIST_FOREACH(w, &e->waits, link) {
    fprintf(f, "%s{\"waiter\": ", first ? "" : ", ");
    node_name(f, waiter_id(w));
    fprintf(f, ", \"task\": %" PRIu64 ", \"state\": \"%s\"}",
            task_no(w->target), state_name(fstate(w->target)));
    first = false;
  }
  /* Which queued task would unblock whom: each queued task's waiters. */
  fprintf(f, "], \"unblocks\": [");
  first = true;
  TAILQ_FOREACH(t, &e->queue, qlink) {
    if (!t->nwaiters)
      continue;
    fprintf(f, "%s{\"task\": %" PRIu64 ", \"waiters\": [", first ? "" : ", ",
            task_no(t));
    bool f2 = true;
    LIST_FOREACH(w, &e->waits, link) {
      if (w->target == t) {
        fprintf(f, "%s", f2 ? "" : ", ");
        node_name(f, waiter_id(w));
        f2 = false;
      }
    }
    fprintf(f, "]}");
    first = false;
  }
  fprintf(f, "]}");
}

bool ordo__exec_graph(ordo_t *o, FILE *f, ordo_graph_fmt_t fmt) {
  xplace *xp = atomic_load(&o->exec);
  if (!xp)
    return false;
  ordo__mutex_lock(&xp->mu);
  bool any = !LIST_EMPTY(&xp->execs);
  if (!f) {
    ordo__mutex_unlock(&xp->mu);
    return any;
  }
  if (any && fmt == ORDO_GRAPH_JSON)
    fprintf(f, ", \"executors\": [");
  bool first = true;
  ordo_exec_t *e;
  LIST_FOREACH(e, &xp->execs, link) {
    if (fmt == ORDO_GRAPH_DOT) {
      dot_exec(f, e);
    } else {
      fprintf(f, "%s", first ? "" : ", ");
      json_exec(f, e);
    }
    first = false;
  }
  if (any && fmt == ORDO_GRAPH_JSON)
    fprintf(f, "]");
  ordo__mutex_unlock(&xp->mu);
  return any;
}
