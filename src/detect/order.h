/*
 * order.h -- the lock-order checker ("lockdep for keys"): a graph of lock
 * classes that reports the first acquisition closing a cycle, or taking a
 * ranked class out of rank order, though no deadlock happened. Internal to
 * the library; see src/detect/README.md, "The lock-order checker".
 *
 * src/core/api.c calls these around the backend, and only when the place's
 * checker exists (o->order != NULL), so a place without one pays one branch:
 *
 *   ordo__order_before     before the backend's lock_all (may refuse)
 *   ordo__order_granted    after it returned 0
 *   ordo__order_released   after an unlock returned 0 (one hold dropped)
 *   ordo__order_released_all  after unlock_all
 *   ordo__order_txn_end    after the backend's txn_end, with the state
 *                          read from t->order_state before it
 */
#ifndef ORDO_DETECT_ORDER_H
#define ORDO_DETECT_ORDER_H

#include "ordo_int.h"

struct ordo__order;

/* Makes the checker of a place opened with opts (opts->order must not be
 * ORDO_ORDER_OFF). Returns 0 or ORDO_ENOMEM. */
int ordo__order_create(struct ordo__order **out, const ordo_options_t *opts);
/* Frees it; every txn of the place must have ended. NULL is a no-op. */
void ordo__order_destroy(struct ordo__order *ck);

/* Registers (or re-ranks) the ranked class of keys that start with prefix.
 * The caller has checked prefix and len. Returns 0 or ORDO_ENOMEM. */
int ordo__order_rank(struct ordo__order *ck, const void *prefix, size_t len,
                     int rank);
/* Sets the report callback; NULL logs one line to stderr instead. */
void ordo__order_set_cb(struct ordo__order *ck, ordo_order_cb cb, void *arg);

/*
 * Checks the acquisition of sorted[0..n) by t, made at file:line (file may
 * be NULL; it must outlive the place, as __FILE__ does). Adds the new class
 * edges, reports what they close, and remembers the request's classes for
 * ordo__order_granted. Returns 0, ORDO_EORDER (refuse mode: nothing was
 * added, the caller must not lock), ORDO_EBUSY (an async request of t is
 * in flight) or ORDO_ENOMEM.
 */
int ordo__order_before(struct ordo__order *ck, ordo_txn_t *t,
                       const ordo_req_t *sorted, size_t n, const char *file,
                       int line);
/* The request that ordo__order_before passed was granted: its keys' classes
 * are held once more each. Cannot fail. */
void ordo__order_granted(struct ordo__order *ck, ordo_txn_t *t,
                         const ordo_req_t *sorted, size_t n);
/* One hold of key was dropped. */
void ordo__order_released(struct ordo__order *ck, ordo_txn_t *t,
                          const void *key, size_t len);
/* Every hold of t was dropped. */
void ordo__order_released_all(struct ordo__order *ck, ordo_txn_t *t);
/* A txn has ended: frees its state (t->order_state, read before the
 * backend's txn_end freed t). It runs after the backend's txn_end because
 * that cancels a pending async request, whose callback still needs the
 * state. */
void ordo__order_txn_end(struct ordo__order *ck, void *state);

/*
 * The asynchronous form, after ordo__order_before returned 0:
 * ordo__order_async_arm sets the request's classes aside with the caller's
 * callback; then the backend is called with ordo__order_async_done as the
 * callback (any arg), which records a grant, then calls the caller's. If
 * the backend answered anything but ORDO_PENDING (no callback will come),
 * ordo__order_async_now(t, rc) ends the request instead.
 */
void ordo__order_async_arm(ordo_txn_t *t, ordo_done_cb cb, void *arg);
void ordo__order_async_now(ordo_txn_t *t, int rc);
void ordo__order_async_done(ordo_txn_t *t, int status, void *arg);

/* Reports made so far (ordo_stats: order_reports). */
uint64_t ordo__order_reports(struct ordo__order *ck);

#endif /* ORDO_DETECT_ORDER_H */
