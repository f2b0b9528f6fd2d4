/*
 * renewer.h -- the lease-renewal thread shared by the remote backends
 * (ordod.c, redis.c, redlock.c).
 *
 * A place keeps one ordo__renewer; each of its txns embeds an ordo__rn_txn
 * and links it at begin. The thread sleeps until the earliest renewal is
 * due, then calls the backend's renew hook for each due txn whose mu it can
 * take without waiting (a txn inside a call is looked at again soon), and
 * calls the place's lease-lost callback, with no lock held, for a txn whose
 * renewal says the lease is gone. A backend that gives renew_many renews
 * every due txn (and those due within early) at once, on all their
 * connections together, instead of one after another: one renewal that
 * waits for a stopped server then delays no other txn's (issue 18, item
 * 13: with 8 holders, the 8th heard of its lost lease 4.5 leases late). The
 * same mutex guards the place's txn list, so a backend's dump walks the list
 * under it, and the text of the place's last failure (ordo__rn_note), which is
 * written from under a txn's mu.
 *
 * Lock order: a txn's mu, then the renewer's mu. With the renewer's mu held
 * a txn's mu is only ever tried, never waited for; the renew hook runs with
 * the txn's mu held and the renewer's mu not held; the callback runs with
 * neither. A batch (renew_many) holds the mus of several txns at once, each
 * taken by a try, so no thread waits for one of them while holding
 * another, and no cycle can go through them.
 *
 * The mutexes are ordo__mutex (ordo_tsa.h), checked by Clang's analysis
 * where it can follow them: the functions below say which lock their
 * caller holds or must not hold. What it cannot follow: a link's fields
 * are guarded by the renewer's mu, a lock of another struct, which no
 * attribute can name from the link; a txn's mu reaches the renewer as a
 * pointer, so the order "txn's mu, then the renewer's" is in comments only;
 * and the hooks are called through pointers, so each says with
 * ordo__mutex_assert_held what its caller holds.
 */
#ifndef ORDO_BACKEND_RENEWER_H
#define ORDO_BACKEND_RENEWER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "ordo.h"
#include "ordo_tsa.h"

typedef struct ordo__rn_txn ordo__rn_txn;

struct ordo__rn_txn {
  /* Guarded by the renewer's mu (not named in attributes: it is another
   * struct's). */
  LIST_ENTRY(ordo__rn_txn) link;
  bool linked;      /* in the list: the thread may visit it */
  bool cb_running;  /* the lease-lost callback runs for it now */
  uint64_t batched; /* the pass that last renewed it (renew_many) */
  /* Read-only while linked. */
  ordo_txn_t *txn; /* the backend's txn, given to the hooks */
  ordo__mutex *mu; /* the txn's mu: held by renew, only tried here */
  /* Written under *mu, read by the thread without it: atomics, which the
   * analysis does not check. */
  _Atomic bool holding;    /* some key is held: renewals are due */
  _Atomic uint64_t due_ns; /* the next renewal (unless a due hook says) */
  /* When the lease runs out by the client's count, 0 when the backend does
   * not say: a batch of renewals is cut before another txn's renewal would
   * come too late (renewer.c, "pass"). */
  _Atomic uint64_t lease_end_ns;
};

typedef struct ordo__rn_ops {
  /* Renews every hold of t; called with t's mu held and nothing else (the
   * hook says so with ordo__mutex_assert_held: a call through a pointer is
   * not checked).
   * Returns true when the lease was lost (the backend has already marked
   * the txn and let its holds go). Sets t's next due time otherwise. */
  bool (*renew)(void *place, ordo_txn_t *t);
  /* When t's renewal is due; NULL reads due_ns. */
  uint64_t (*due)(void *place, ordo__rn_txn *t);
  /* How long to wait before looking again at a due txn that is inside a
   * call (its mu is taken). */
  uint64_t (*busy)(void *place, ordo__rn_txn *t);
  /* Optional (NULL: renew, one txn after another). Renews ts[0..n) at
   * once, each with its mu held by the caller (and nothing else), no
   * exchange going on past until_ns where the backend can cut one short
   * (ordod.c cannot: a reply cut short leaves the session out of step, so
   * it runs each exchange to its own bound); sets lost[i] as renew's
   * result for ts[i]. A lease whose end (by the client's count) passes
   * meanwhile is lost then, whatever the server does. */
  void (*renew_many)(void *place, ordo_txn_t *const *ts, size_t n,
                     uint64_t until_ns, bool *lost);
  /* With renew_many: how much before its due time a txn's renewal may be
   * made, to join a batch (NULL: 0). */
  uint64_t (*early)(void *place);
} ordo__rn_ops;

typedef struct ordo__renewer {
  /*
   * mu guards: txns and every link's link, linked, cb_running and
   * batched;
   * the callback (lost_cb, lost_arg); the thread's state (stop, in_pass,
   * kicked, sleep_until); and err. wake wakes the thread (its clock is
   * CLOCK_MONOTONIC); cb_done wakes an unlink waiting for a callback on its
   * txn to return. Lock order: a txn's mu, then mu.
   */
  ordo__mutex mu;
  pthread_cond_t wake, cb_done;
  LIST_HEAD(, ordo__rn_txn) txns ORDO_GUARDED_BY(mu);
  void (*lost_cb)(ordo_txn_t *t, void *arg) ORDO_GUARDED_BY(mu);
  void *lost_arg ORDO_GUARDED_BY(mu);
  bool stop ORDO_GUARDED_BY(mu), in_pass ORDO_GUARDED_BY(mu),
      kicked ORDO_GUARDED_BY(mu);
  /* The thread's wake-up, UINT64_MAX: none. */
  uint64_t sleep_until ORDO_GUARDED_BY(mu);
  /* Passes begun (renew_many's batches are stamped with it). */
  uint64_t passes ORDO_GUARDED_BY(mu);
  /* The place's last failure, for dumps. */
  char err[320] ORDO_GUARDED_BY(mu);
  /* Read-only after start. */
  const ordo__rn_ops *ops;
  void *place;
  pthread_t thread;
} ordo__renewer;

/* Starts the thread (with every signal blocked). 0 or ORDO_ENOMEM; on
 * failure nothing is left to stop. */
int ordo__rn_start(ordo__renewer *r, const ordo__rn_ops *ops, void *place);
/* Stops and joins the thread; every txn must have been unlinked. */
void ordo__rn_stop(ordo__renewer *r) ORDO_EXCLUDES(r->mu);
/* Links t (holding nothing yet) into the list. */
void ordo__rn_link(ordo__renewer *r, ordo__rn_txn *t, ordo_txn_t *txn,
                   ordo__mutex *mu) ORDO_EXCLUDES(r->mu);
/* Unlinks t and waits out a lease-lost callback running for it. The caller
 * then takes t's mu once to wait out a renewal in progress; after that no
 * other thread knows t. Caller holds no lock. */
void ordo__rn_unlink(ordo__renewer *r, ordo__rn_txn *t) ORDO_EXCLUDES(r->mu);
/* A txn began to hold; its renewal is due at due. Caller holds at most a
 * txn's mu. */
void ordo__rn_kick(ordo__renewer *r, uint64_t due) ORDO_EXCLUDES(r->mu);
/* Sets the lease-lost callback. */
void ordo__rn_on_lost(ordo__renewer *r, void (*cb)(ordo_txn_t *, void *),
                      void *arg) ORDO_EXCLUDES(r->mu);
/* Keeps "what: detail" as the place's last failure. Takes mu. */
void ordo__rn_note(ordo__renewer *r, const char *what, const char *detail)
    ORDO_EXCLUDES(r->mu);

#endif
