/*
 * model.h -- the reference model of the lock engine's grant protocol: an
 * executable copy of DESIGN §3-5 as src/core/README.md ("The grant
 * protocol", "Who waits for whom", "Why it cannot starve", "Why no wake-up
 * is lost") and src/detect/README.md ("The wait-for graph") state it,
 * written for clarity, not speed. model_test.c runs the same calls against
 * a real mem:// place and this model and compares them after every step.
 * See tests/model/README.md.
 *
 * Txns are named by their slot (0..ntxn-1); keys by their index (0..nkey-1),
 * and the driver's key table is sorted by ordo_key_cmp, so a request
 * sorted by index is in the canonical order. Time is the manual clock's.
 *
 * Interface: md_init, md_objects, md_fast_took, md_begin, md_normalize,
 * md_acquire, md_retry,
 * md_cancel, md_unlock, md_unlock_all, md_end, md_tick, md_has_cycle,
 * md_scc, md_free_request, md_covered, md_grant_all, md_cov.
 */
#ifndef ORDO_TESTS_MODEL_H
#define ORDO_TESTS_MODEL_H

#include "ordo.h"

#include <stdbool.h>
#include <stdint.h>

#define MD_TXNS 6 /* txn slots at most */
#define MD_KEYS 5 /* keys at most */
#define MD_SET 3  /* keys in one request at most (after dedupe) */
#define MD_NO_DEADLINE UINT64_MAX

/* A request names a key (index) and a mode (ORDO_MODE_S or ORDO_MODE_X). */
typedef struct md_req {
  int key;
  int mode;
} md_req;

/* One hold: key, mode, re-lock count. fresh marks a new grant (or an
 * upgrade, which draws a new fencing token) that the driver has not yet
 * read the token of; seq orders fresh grants among themselves. */
typedef struct md_hold {
  int key;
  int mode;
  uint32_t count;
  bool fresh;
  uint64_t seq;
} md_hold;

enum { MD_THREAD = 0, MD_EVENT = 1 }; /* who waits: a blocking call, async */

typedef struct md_txn {
  bool live;
  uint64_t id;
  md_hold hold[MD_KEYS]; /* in acquisition order */
  int nhold;
  /* The one pending request (or the last one asked, when not waiting). */
  bool waiting;
  md_req ent[MD_SET];
  int nent;
  uint64_t enq, deadline;
  int kind;
  bool woken; /* poked, and not yet retried */
} md_txn;

/* A queue entry: the waiting slot and the mode it asks. */
typedef struct md_qent {
  int slot;
  int mode;
} md_qent;

/*
 * A key's queue, and its lock object (src/core/README.md, invariant 4;
 * docs/backend-mem.md, "Capabilities"): alive or not; an empty one (no
 * holder, no waiter) is listed on its stripe's empty list, oldest first
 * (lseq orders it), and evicted from there, oldest first, past the
 * stripe's cap or when a new object is needed at max_locks. A listed
 * object may be held on the fast path (fast: the slot, else -1): it stays
 * listed meanwhile, and a lookup or an eviction that meets it adopts it
 * (takes it off the list). slow: listed, but a lookup inflated it, so the
 * fast path keeps off it until it is listed anew.
 */
typedef struct md_key {
  md_qent q[MD_TXNS]; /* in queue order, head first */
  int nq;
  int stripe;
  bool live, listed, slow, pinned;
  int fast;
  uint64_t lseq;
} md_key;

/* The counters of ordo_stats_t that the model keeps, and the engine's
 * count of wake_one's asks (ordo__table's wake_asks). */
typedef struct md_stats {
  uint64_t acquired, waited, timeouts, canceled, deadlocks, reorders, pokes,
      wakeups, released, waiting, limits, locks, wake_asks;
} md_stats;

/* The last blocking request, as the fast path would have found it: every
 * key X, its object listed and idle (then it may have been granted with
 * no lock at all, and its objects stayed listed where they were). */
typedef struct md_fastc {
  bool valid;
  int slot, n;
  int key[MD_SET];
  uint64_t lseq[MD_SET];
} md_fastc;

/* An outcome event: slot's request ended with status (0 or negative). */
typedef struct md_outcome {
  int slot;
  int status;
} md_outcome;

#define MD_MAX_OUT 64

typedef struct model {
  int ntxn, nkey;
  uint64_t now;   /* the manual clock, ns */
  uint64_t bound; /* the starvation bound, ns */
  md_txn t[MD_TXNS];
  md_key k[MD_KEYS];
  md_stats st;
  uint64_t grant_seq;
  /* Lock objects: the most alive at once, the empty ones kept per stripe,
   * the last list position given. */
  uint64_t max_locks, lseq;
  int empty_cap;
  md_fastc fastc;
  /* Outcome events since the driver last took them (md_outcomes_take). */
  md_outcome out[MD_MAX_OUT];
  int nout;
} model;

/* How often the rules that are hard to reach decided a question (counted by
 * the model, to show a run exercised them): a reservation held a request
 * back; a chained waiter's reservation was not honoured; a covered key
 * skipped the reservations; a scan went on past a waiter that had not
 * starved, in a reordered queue. */
typedef struct md_coverage {
  uint64_t reserved, chained, covered, reordered_scan;
  /* Lock objects: evicted (for room or past a stripe's cap), made anew
   * for a key whose object had been evicted, requests refused at
   * max_locks, fast-path holds adopted by an eviction. */
  uint64_t evicted, recreated, limited, evict_adopted;
  /* Wake-ups: waiters passed over because the key's holders block them,
   * and walks cut to the X holder's own request. */
  uint64_t wake_skipped, wake_xheld;
} md_coverage;
extern md_coverage md_cov;

void md_init(model *m, int ntxn, int nkey, uint64_t now, uint64_t bound);
/* The lock objects' limits, and each key's stripe (stripe[k]). */
void md_objects(model *m, uint64_t max_locks, int empty_cap, const int *stripe);
/* The engine took slot s's last request (granted at once) on the fast
 * path: its objects stay listed where they were, held by s. false when
 * the fast path could not have taken it (m->fastc). */
bool md_fast_took(model *m, int s);
/* A new txn in slot s (the slot's previous one has ended). */
void md_begin(model *m, int s, uint64_t id);
/* Sorts r[0..n) by key and merges duplicates (the strongest mode wins), as
 * the public calls do; returns the new count. */
int md_normalize(md_req *r, int n);
/*
 * md_acquire -- slot s asks the normalized r[0..n): 0 when granted at once,
 * ORDO_PENDING when queued, ORDO_ETIMEDOUT when not grantable and the
 * deadline has passed, ORDO_ELIMIT past the hold limit or when a key's
 * object cannot be made within max_locks (nothing is granted or queued;
 * the objects it looked up are listed again).
 */
int md_acquire(model *m, int s, const md_req *r, int n, uint64_t deadline,
               int kind);
/* A poked slot's own try: 0 granted, ORDO_PENDING waits on, ORDO_ENOTHELD
 * when its request had already ended (its outcome came). */
int md_retry(model *m, int s);
int md_cancel(model *m, int s);
int md_unlock(model *m, int s, int key);
int md_unlock_all(model *m, int s);
void md_end(model *m, int s);
/* The clock moved to m->now: every request due times out, in deadline
 * order. */
void md_tick(model *m);

/* The wait-for graph (hard and soft edges, DESIGN §5). */
bool md_has_cycle(const model *m);
/* in[i] = slot i is in the strongly connected part of the graph that holds
 * slot s. */
void md_scc(const model *m, int s, bool in[MD_TXNS]);
/* Slot s waits, and none of its keys has a holder it waits for or any
 * other waiter ahead in a conflicting mode: it must have been woken. */
bool md_free_request(const model *m, int s);
bool md_covered(const model *m, int s, const md_req *e);
/* Grants slot s's request entries (its holds grow) and counts the grant. */
void md_grant_all(model *m, int s);

#endif
