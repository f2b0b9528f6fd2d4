/*
 * mem.c -- the in-process backend, "mem://": the engine of src/core behind
 * the common backend interface. Blocking calls wait on the txn's own
 * condition variable for the engine's event; the asynchronous form passes
 * the event straight to the caller's callback. See src/backend/README.md.
 *
 * Interface: ordo__backend_mem.
 */
#include "core/table.h"

#include <errno.h>
#include <string.h>
#include <time.h>

typedef struct mem_place {
  struct ordo_s base;
  ordo__table *tab;
  _Atomic uint64_t next_id;
} mem_place;

typedef struct mem_txn {
  struct ordo_txn_s base;
  ordo__owner ow;
  /*
   * mu guards done and status: the engine's event sets them from whatever
   * thread granted, expired or cancelled the request, and the waiting
   * thread reads them. mu is a leaf: nothing else is locked while it is
   * held, and the engine fires events with none of its own locks held.
   */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  int status;
  ordo_done_cb ucb; /* the async caller's callback, set before queueing */
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
  *out = &p->base;
  return 0;
}

static void mem_close(ordo_t *o) {
  mem_place *p = (mem_place *)o;
  ordo__table_destroy(p->tab);
  free(p);
}

static int mem_txn_begin(ordo_t *o, ordo_txn_t **out, int priority) {
  mem_place *p = (mem_place *)o;
  mem_txn *t = calloc(1, sizeof *t);
  if (!t)
    return ORDO_ENOMEM;
  t->base.id = atomic_fetch_add(&p->next_id, 1);
  ordo__owner_init(p->tab, &t->ow, t->base.id, priority);
  pthread_mutex_init(&t->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->cv, &ca);
  pthread_condattr_destroy(&ca);
  *out = &t->base;
  return 0;
}

static void mem_txn_end(ordo_txn_t *tx) {
  mem_txn *t = mt(tx);
  ordo__owner_fini(&t->ow);
  /* Taking mu once more waits out an event that is still signalling. */
  pthread_mutex_lock(&t->mu);
  pthread_mutex_unlock(&t->mu);
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
}

/* The event of a blocking call: hand the status to the waiting thread. The
 * signal is sent before mu is let go, so the waiter cannot free t first. */
static void mem_wake(ordo__owner *w, int status, void *arg) {
  ORDO_UNUSED(w);
  mem_txn *t = arg;
  pthread_mutex_lock(&t->mu);
  t->status = status;
  t->done = 1;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static int mem_lock_all(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                        uint64_t deadline_ns) {
  mem_txn *t = mt(tx);
  int rc = ordo__acquire(&t->ow, r, n, deadline_ns, false, mem_wake, t);
  if (rc != ORDO_PENDING)
    return rc;
  bool expired = false;
  pthread_mutex_lock(&t->mu);
  while (!t->done) {
    if (deadline_ns == ORDO_NO_DEADLINE || expired) {
      pthread_cond_wait(&t->cv, &t->mu);
      continue;
    }
    struct timespec ts = {(time_t)(deadline_ns / 1000000000u),
                          (long)(deadline_ns % 1000000000u)};
    if (pthread_cond_timedwait(&t->cv, &t->mu, &ts) == ETIMEDOUT && !t->done) {
      /* Our deadline: end the wait ourselves. If a grant or a cancel won
       * the race, its event is on its way and we wait for it. */
      pthread_mutex_unlock(&t->mu);
      ordo__abort_wait(&t->ow, ORDO_ETIMEDOUT);
      pthread_mutex_lock(&t->mu);
      expired = true;
    }
  }
  t->done = 0;
  rc = t->status;
  pthread_mutex_unlock(&t->mu);
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
  return ordo__acquire(&t->ow, r, n, deadline_ns, true, mem_async_fire, t);
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

static int mem_stats(ordo_t *o, ordo_stats_t *out) {
  ordo__table_stats(((mem_place *)o)->tab, out);
  return 0;
}

static void mem_dump(ordo_t *o, int fd) {
  ordo__table_dump(((mem_place *)o)->tab, fd);
}

const ordo__backend ordo__backend_mem = {
    .scheme = "mem",
    .caps = ORDO_CAP_SHARED | ORDO_CAP_SERVER_WAIT | ORDO_CAP_FENCE |
            ORDO_CAP_CANCEL | ORDO_CAP_INCREMENTAL | ORDO_CAP_ASYNC |
            ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE,
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
};
