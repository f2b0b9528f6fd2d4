/*
 * renewer.c -- the lease-renewal thread of a remote place (renewer.h).
 *
 * Interface: ordo__rn_start, ordo__rn_stop, ordo__rn_link, ordo__rn_unlink,
 * ordo__rn_kick, ordo__rn_on_lost, ordo__rn_note.
 */
#include "renewer.h"

#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "../ordo_int.h"

/* When t's renewal is due. Caller holds r->mu, which keeps t linked. */
static uint64_t due_of(ordo__renewer *r, ordo__rn_txn *t) ORDO_REQUIRES(r->mu) {
  return r->ops->due ? r->ops->due(r->place, t) : atomic_load(&t->due_ns);
}

static uint64_t min64(uint64_t a, uint64_t b) {
  return a < b ? a : b;
}

/*
 * One pass over the list: renews each due txn, calls the callback for each
 * lost one, and returns the earliest due time left (UINT64_MAX: none).
 * Caller holds r->mu; it is let go around each renewal and callback.
 */
static uint64_t pass(ordo__renewer *r) ORDO_REQUIRES(r->mu) {
  uint64_t next = UINT64_MAX;
  ordo__rn_txn *t = LIST_FIRST(&r->txns);
  while (t && !r->stop) {
    uint64_t now = ordo__now_ns();
    if (!atomic_load(&t->holding) || t->cb_running) {
      t = LIST_NEXT(t, link);
      continue;
    }
    uint64_t due = due_of(r, t);
    if (due > now) {
      next = min64(next, due);
      t = LIST_NEXT(t, link);
      continue;
    }
    if (!ordo__mutex_trylock(t->mu)) {
      /* Inside a call (bounded by the backend's timeout): look again. */
      next = min64(next, now + r->ops->busy(r->place, t));
      t = LIST_NEXT(t, link);
      continue;
    }
    /* t's mu keeps t alive: its txn_end takes it before it frees t. */
    ordo__mutex_unlock(&r->mu);
    bool lost = r->ops->renew(r->place, t->txn);
    ordo__mutex_lock(&r->mu);
    if (!t->linked) {
      /* Ending: its txn_end waits for t's mu, and its link is stale. */
      ordo__mutex_unlock(t->mu);
      t = LIST_FIRST(&r->txns);
      continue;
    }
    if (!lost) {
      if (atomic_load(&t->holding))
        next = min64(next, due_of(r, t));
      ordo__mutex_unlock(t->mu);
      t = LIST_NEXT(t, link);
      continue;
    }
    void (*cb)(ordo_txn_t *, void *) = r->lost_cb;
    void *cb_arg = r->lost_arg;
    ordo__mutex_unlock(t->mu);
    if (!cb) {
      t = LIST_NEXT(t, link);
      continue;
    }
    /* The callback runs with no lock held; cb_running keeps t alive. */
    t->cb_running = true;
    ordo__mutex_unlock(&r->mu);
    cb(t->txn, cb_arg);
    ordo__mutex_lock(&r->mu);
    t->cb_running = false;
    ordo__rn_txn *nx = t->linked ? LIST_NEXT(t, link) : LIST_FIRST(&r->txns);
    pthread_cond_broadcast(&r->cb_done);
    t = nx;
  }
  return next;
}

/* The most txns one batch renews at once (renew_many); more due at once
 * go in the next batch, right after. A fixed array: a renewal allocates
 * nothing in the renewer. */
#define RN_BATCH 64

/* A batch holds the mus of many txns, tried one by one in a loop and let
 * go in another: a set of locks the analysis cannot follow, so these two
 * are outside it (each member's mu is held from batch_try's success to
 * its batch_unlock, and the hooks assert it). */
static bool batch_try(ordo__rn_txn *t) ORDO_NO_THREAD_SAFETY_ANALYSIS {
  return ordo__mutex_trylock(t->mu);
}
static void batch_unlock(ordo__rn_txn *t) ORDO_NO_THREAD_SAFETY_ANALYSIS {
  ordo__mutex_unlock(t->mu);
}

/*
 * pass_many -- one pass for a backend with renew_many: every holding txn
 * that is due, or due within early, and whose mu it can take without
 * waiting, joins one batch, renewed at once. The batch is cut (until) no
 * later than halfway from the due time of any other holding txn not yet
 * due to the end of its lease, so that it still has half its margin for
 * its own renewal; the backend also ends each exchange at its txn's lease
 * end. Then the callback runs, with no lock held, for each txn whose lease
 * was lost.
 * Returns the earliest due time left (UINT64_MAX: none). Caller holds
 * r->mu; it is let go around the batch and each callback.
 */
static uint64_t pass_many(ordo__renewer *r) ORDO_REQUIRES(r->mu) {
  /* A txn renewed in this pass waits for the next one (its due time may
   * be close, after a failed try): no pass can spin on one txn. */
  uint64_t stamp = ++r->passes;
  for (;;) {
    ordo__rn_txn *b[RN_BATCH];
    ordo_txn_t *bt[RN_BATCH];
    bool lost[RN_BATCH];
    size_t n = 0;
    uint64_t now = ordo__now_ns(), next = UINT64_MAX, until = UINT64_MAX;
    uint64_t early = r->ops->early ? r->ops->early(r->place) : 0;
    for (ordo__rn_txn *t = LIST_FIRST(&r->txns); t && !r->stop;
         t = LIST_NEXT(t, link)) {
      if (!atomic_load(&t->holding) || t->cb_running)
        continue;
      uint64_t due = due_of(r, t), end = atomic_load(&t->lease_end_ns);
      uint64_t cut = end > due ? due + (end - due) / 2 : due;
      if (due > now + early || t->batched == stamp) {
        next = min64(next, due);
        until = min64(until, cut);
        continue;
      }
      /* The ones below set no cut: their time may have passed already
       * (a cut in the past would fail the whole batch), one beyond the
       * batch's room goes in the next batch at once, and one inside a
       * call cannot be renewed before the call ends anyway. */
      if (n == RN_BATCH)
        continue; /* the next batch, at once */
      if (!batch_try(t)) {
        /* Inside a call (bounded by the backend's timeout): look again. */
        next = min64(next, now + r->ops->busy(r->place, t));
        continue;
      }
      t->batched = stamp;
      b[n] = t;
      bt[n++] = t->txn;
    }
    if (n == 0 || r->stop) {
      for (size_t i = 0; i < n; i++)
        batch_unlock(b[i]);
      return next;
    }
    /* Each member's mu keeps it alive: its txn_end takes it before it
     * frees the member. */
    ordo__mutex_unlock(&r->mu);
    r->ops->renew_many(r->place, bt, n, until, lost);
    ordo__mutex_lock(&r->mu);
    void (*cb)(ordo_txn_t *, void *) = r->lost_cb;
    void *cb_arg = r->lost_arg;
    size_t nl = 0;
    for (size_t i = 0; i < n; i++) {
      ordo__rn_txn *t = b[i];
      /* An ending txn (unlinked meanwhile) waits for its mu: no callback. */
      bool call = lost[i] && cb && t->linked;
      if (call) {
        t->cb_running = true; /* keeps t alive once its mu is let go */
        b[nl++] = t;
      }
      batch_unlock(t);
    }
    for (size_t i = 0; i < nl; i++) {
      ordo__rn_txn *t = b[i];
      ordo__mutex_unlock(&r->mu);
      cb(t->txn, cb_arg);
      ordo__mutex_lock(&r->mu);
      t->cb_running = false;
      pthread_cond_broadcast(&r->cb_done);
    }
  }
}

/* The thread starts with every signal blocked (ordo__rn_start): signals
 * are for the program's own threads. */
static void *renewer_main(void *arg) {
  ordo__renewer *r = arg;
  ordo__mutex_lock(&r->mu);
  while (!r->stop) {
    r->in_pass = true;
    r->kicked = false;
    uint64_t next = r->ops->renew_many ? pass_many(r) : pass(r);
    r->in_pass = false;
    if (r->stop)
      break;
    if (r->kicked)
      continue; /* a txn began to hold behind the pass */
    r->sleep_until = next;
    if (next == UINT64_MAX) {
      ordo__cond_wait(&r->wake, &r->mu);
    } else {
      struct timespec ts = {(time_t)(next / 1000000000u),
                            (long)(next % 1000000000u)};
      ordo__cond_timedwait(&r->wake, &r->mu, &ts);
    }
    r->sleep_until = 0;
  }
  ordo__mutex_unlock(&r->mu);
  return NULL;
}

int ordo__rn_start(ordo__renewer *r, const ordo__rn_ops *ops, void *place) {
  LIST_INIT(&r->txns);
  r->lost_cb = NULL;
  r->lost_arg = NULL;
  r->stop = r->in_pass = r->kicked = false;
  r->sleep_until = UINT64_MAX;
  r->passes = 0;
  r->err[0] = 0;
  r->ops = ops;
  r->place = place;
  ordo__mutex_init(&r->mu);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r->wake, &ca);
  pthread_condattr_destroy(&ca);
  pthread_cond_init(&r->cb_done, NULL);
  /* Created with every signal blocked, so that not even in its first
   * instants can it take a process-directed signal that a thread of the
   * program waits for with sigwait. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&r->thread, NULL, renewer_main, r);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    pthread_cond_destroy(&r->wake);
    pthread_cond_destroy(&r->cb_done);
    ordo__mutex_destroy(&r->mu);
    return ORDO_ENOMEM;
  }
  return 0;
}

void ordo__rn_stop(ordo__renewer *r) {
  ordo__mutex_lock(&r->mu);
  ORDO_ASSERT(LIST_EMPTY(&r->txns)); /* every txn must have ended */
  r->stop = true;
  pthread_cond_signal(&r->wake);
  ordo__mutex_unlock(&r->mu);
  pthread_join(r->thread, NULL);
  pthread_cond_destroy(&r->wake);
  pthread_cond_destroy(&r->cb_done);
  ordo__mutex_destroy(&r->mu);
}

void ordo__rn_link(ordo__renewer *r, ordo__rn_txn *t, ordo_txn_t *txn,
                   ordo__mutex *mu) {
  t->txn = txn;
  t->mu = mu;
  t->cb_running = false;
  t->batched = 0;
  atomic_init(&t->holding, false);
  atomic_init(&t->due_ns, UINT64_MAX);
  atomic_init(&t->lease_end_ns, 0);
  ordo__mutex_lock(&r->mu);
  LIST_INSERT_HEAD(&r->txns, t, link);
  t->linked = true;
  ordo__mutex_unlock(&r->mu);
}

void ordo__rn_unlink(ordo__renewer *r, ordo__rn_txn *t) {
  ordo__mutex_lock(&r->mu);
  LIST_REMOVE(t, link);
  t->linked = false;
  while (t->cb_running)
    ordo__cond_wait(&r->cb_done, &r->mu);
  ordo__mutex_unlock(&r->mu);
}

void ordo__rn_kick(ordo__renewer *r, uint64_t due) {
  ordo__mutex_lock(&r->mu);
  if (r->in_pass)
    r->kicked = true; /* the pass may have gone past the txn already */
  else if (due < r->sleep_until)
    pthread_cond_signal(&r->wake);
  ordo__mutex_unlock(&r->mu);
}

void ordo__rn_on_lost(ordo__renewer *r, void (*cb)(ordo_txn_t *, void *),
                      void *arg) {
  ordo__mutex_lock(&r->mu);
  r->lost_cb = cb;
  r->lost_arg = arg;
  ordo__mutex_unlock(&r->mu);
}

void ordo__rn_note(ordo__renewer *r, const char *what, const char *detail) {
  ordo__mutex_lock(&r->mu);
  snprintf(r->err, sizeof r->err, "%s: %s", what, detail);
  ordo__mutex_unlock(&r->mu);
}
