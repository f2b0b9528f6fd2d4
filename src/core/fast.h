/*
 * fast.h -- the engine's fast path (src/core/README.md, "The fast path"),
 * inline, for table.c and for the blocking calls of src/backend/mem.c: an
 * uncontended lock and unlock are short enough that a call from mem.c into
 * table.c, and its frame, showed. Nothing here takes a mutex; what the
 * fast path cannot do it leaves to table.c's slow paths, declared below.
 */
#ifndef ORDO_CORE_FAST_H
#define ORDO_CORE_FAST_H

#include "core/table_int.h"

#include <string.h>

/* The few small functions of the path every grant takes: inlined, since
 * their calls were a tenth of an uncontended lock and unlock. */
#define ORDO_HOT static inline __attribute__((always_inline))
/* The fast path walks at most this many lock objects of a chain (chains
 * average at most two; a longer walk goes the slow way). */
#define FAST_WALK 8

/* table.c's, for the fast path's rare turns. */

/* The sampled hold of w ends: its time goes into the statistics and the
 * mean hold time. */
void ordo__sample_end(ordo__table *tab, ordo__owner *w);
/* The fast path gives back the holds took[0..got), newest first. A hold
 * that another thread adopted meanwhile is a listed holder now: it joins
 * w's holds and is released the slow way. */
void ordo__fast_give_back(ordo__owner *w, ordo__hold **took, size_t got);
/* Releases the rest of w's holds the slow way; returns how many. */
int ordo__release_rest(ordo__owner *w);

ORDO_HOT uint32_t hash_key(const void *key, size_t n) {
  /* A multiply-xorshift hash over 8-byte words; keys are short. */
  const uint8_t *p = key;
  uint64_t h = 0x9E3779B97F4A7C15u ^ (uint64_t)n;
  if (n == 8) {
    /* The commonest key (ordo_key_u64's): the loop below once, no tail. */
    uint64_t v;
    memcpy(&v, p, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9u;
    h ^= h >> 31;
    h *= 0x94D049BB133111EBu;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9u;
    return (uint32_t)(h >> 32);
  }
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9u;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++)
    v |= (uint64_t)p[i] << (8 * i);
  h = (h ^ v) * 0x94D049BB133111EBu;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9u;
  return (uint32_t)(h >> 32);
}

/* Are the len-byte keys a and b equal? Two 8-byte loads (overlapping below
 * 16 bytes) for the common keys of 8 to 16 bytes, memcmp for the rest. */
static inline bool key_eq(const uint8_t *a, const uint8_t *b, size_t len) {
  if (len >= 8 && len <= 16) {
    uint64_t a0, b0, a1, b1;
    memcpy(&a0, a, 8);
    memcpy(&b0, b, 8);
    memcpy(&a1, a + len - 8, 8);
    memcpy(&b1, b + len - 8, 8);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }
  return memcmp(a, b, len) == 0;
}

#define RELAXED memory_order_relaxed

static inline ordo__lock *next_of(const ordo__lock *l) {
  return atomic_load_explicit(&((ordo__lock *)l)->hnext, RELAXED);
}

static inline uint32_t hash_of(const ordo__lock *l) {
  return atomic_load_explicit(&((ordo__lock *)l)->hash, RELAXED);
}

/* Appends h to w's holds (acquisition order). */
ORDO_HOT void hold_link(ordo__owner *w, ordo__hold *h) {
  TAILQ_INSERT_TAIL(&w->holds, h, tlink);
  w->nholds++;
}

/* Puts hold record h (on no list) back on w's free list. */
ORDO_HOT void hold_free(ordo__owner *w, ordo__hold *h) {
  h->lock = NULL;
  h->fnext = w->hfree;
  w->hfree = h;
  w->nfree++;
}

/* Takes h off its owner's hold list and back to the free list. */
ORDO_HOT void hold_unlink(ordo__owner *w, ordo__hold *h) {
  TAILQ_REMOVE(&w->holds, h, tlink);
  w->nholds--;
  hold_free(w, h);
}

ORDO_HOT _Atomic(ordo__lock *) *fast_slot(ordo__table *tab, uint32_t h) {
  ordo__stripe *st = &tab->stripe[stripe_of(tab, h)];
  ordo__bview *bk = atomic_load_explicit(&st->bk, memory_order_acquire);
  return &bk->slot[bucket_of(st, h, bk->n)];
}

/* The owner's hint for hash h: a lock object it took before under this
 * hash, or NULL. It may have been evicted and reused since (lock objects
 * stay memory of the table), so its hash and word are checked like a
 * walk's, and its key after the CAS. */
ORDO_HOT ordo__lock *fast_hint(const ordo__owner *w, uint32_t h) {
  return w->hint[h & (ORDO__HINTS - 1)].hash == h
             ? w->hint[h & (ORDO__HINTS - 1)].lock
             : NULL;
}

/* The lock object of hash h along the chain from l, or NULL. */
ORDO_HOT ordo__lock *fast_walk(ordo__lock *l, uint32_t h) {
  for (int k = 0; l && hash_of(l) != h; k++)
    l = k + 1 < FAST_WALK
            ? atomic_load_explicit(&l->hnext, memory_order_acquire)
            : NULL;
  return l;
}

/* Whether w's hint l is still the lock object of hash h: an evicted one
 * keeps its hash but is DEAD, and is not (the model tester found a dead
 * hint answered BUSY, a spin and three yields for a key nobody held). */
ORDO_HOT bool fast_hint_holds(const ordo__lock *l, uint32_t h) {
  return l && hash_of(l) == h &&
         atomic_load_explicit(&((ordo__lock *)l)->fast, RELAXED) !=
             ORDO__FAST_DEAD;
}

/* The lock object of the key of hash h, found without a mutex (w's hint
 * if it still has that hash, else the bucket's chain), or NULL. */
ORDO_HOT ordo__lock *fast_find(ordo__table *tab, ordo__owner *w, uint32_t h) {
  ordo__lock *l = fast_hint(w, h);
  if (fast_hint_holds(l, h))
    return l;
  return fast_walk(
      atomic_load_explicit(fast_slot(tab, h), memory_order_acquire), h);
}

/* Takes l for w with hold record h (still on w's free list): true if the
 * CAS won. Everything an adopter reads of h is written before it. */
ORDO_HOT bool fast_take(ordo__owner *w, ordo__hold *h, ordo__lock *l) {
  h->lnext = NULL;
  h->lock = l;
  h->owner = w;
  h->mode = ORDO_MODE_X;
  h->count = 1;
  h->fence = 0;
  uintptr_t idle = ORDO__FAST_IDLE;
  return atomic_compare_exchange_strong_explicit(&l->fast, &idle, (uintptr_t)h,
                                                 memory_order_acq_rel, RELAXED);
}

/* Is l idle, for the fast path to take? */
ORDO_HOT bool fast_idle(const ordo__lock *l) {
  return atomic_load_explicit(&((ordo__lock *)l)->fast, RELAXED) ==
         ORDO__FAST_IDLE;
}

/* Is l, taken, the lock of key r (hash hv)? Ours now: it cannot be reused
 * for another key meanwhile, so its key may be read. */
ORDO_HOT bool fast_match(const ordo__lock *l, uint32_t hv,
                         const ordo_req_t *r) {
  return hash_of(l) == hv && l->klen == r->len &&
         key_eq(l->key, r->key, r->len);
}

/* h, taken off w's free list, joins w's holds (and may be sampled); its
 * lock (of hash hv) becomes w's hint for the hash. */
ORDO_HOT void fast_granted(ordo__table *tab, ordo__owner *w, ordo__hold *h,
                           uint32_t hv, uint64_t *now) {
  hold_link(w, h);
  w->hint[hv & (ORDO__HINTS - 1)].hash = hv;
  w->hint[hv & (ORDO__HINTS - 1)].lock = h->lock;
  if ((w->sample++ & (tab->opts.hold_sample - 1)) == 0 && !w->sampled) {
    if (!*now)
      *now = ordo__now_ns();
    w->sampled = h;
    w->sampled_ns = *now;
  }
}

/*
 * ordo__fast_acquire -- the fast path: grants the sorted, distinct X keys
 * r[0..n) (n <= ORDO__FAST_MAX) with one compare-and-swap each and no
 * mutex, when each has an idle lock object; then 0. Otherwise it takes
 * nothing (what it took is given back) and returns ORDO__FAST_BUSY when
 * what stopped it was a key that is held or has waiters (worth asking
 * again once its holders have run), or 1 (a key with no lock object yet,
 * an S request...): ask ordo__acquire. It never waits, so it cannot hold
 * while it waits.
 *
 * For each key: the hash, the stripe's bucket array, a bounded walk of the
 * chain comparing hashes only, then CAS(fast, IDLE -> our hold record). The
 * key is compared after the CAS, when the lock object is ours and so can no
 * longer be evicted and reused for another key (a walk without the stripe
 * may end on a lock object that was reused meanwhile; then we give it
 * back). See src/core/README.md, "The fast path".
 */
ORDO_HOT int ordo__fast_acquire(ordo__owner *w, const ordo_req_t *r, size_t n) {
  ordo__table *tab = w->tab;
  if (n > ORDO__FAST_MAX || w->nfree < n ||
      atomic_load_explicit(&w->state, RELAXED) != ORDO__IDLE)
    return 1;
  uint64_t now = 0;
  uint32_t hv;
  ordo__hold *h = w->hfree; /* the next free record, still on the list */
  if (n == 1) {
    /* The commonest request, without the arrays below. */
    ordo__lock *l;
    if (r->mode != ORDO_MODE_X ||
        !(l = fast_find(tab, w, hv = hash_key(r->key, r->len))))
      return 1;
    if (!fast_idle(l) || !fast_take(w, h, l))
      return ORDO__FAST_BUSY;
    w->hfree = h->fnext;
    w->nfree--;
    if (!fast_match(l, hv, r)) {
      ordo__fast_give_back(w, &h, 1);
      return 1;
    }
    fast_granted(tab, w, h, hv, &now);
    BUMP(w->fast_acq);
    return 0;
  }
  /* First find every key's lock object and look at its word: a request
   * that would give back what it took (a key held, or SLOW after a wait)
   * goes the slow way before it takes anything. */
  ordo__lock *lk[ORDO__FAST_MAX];
  uint32_t hs[ORDO__FAST_MAX];
  /* The keys' lock objects are far apart in memory (a transfer between two
   * of 10,000 accounts): every key's loads start before any is waited on.
   * First the hint or the bucket of each key, then the chains' heads. */
  _Atomic(ordo__lock *) *sp[ORDO__FAST_MAX];
  for (size_t i = 0; i < n; i++) {
    if (r[i].mode != ORDO_MODE_X)
      return 1;
    uint32_t h = hs[i] = hash_key(r[i].key, r[i].len);
    ordo__lock *l = lk[i] = fast_hint(w, h);
    sp[i] = fast_slot(tab, h);
    __builtin_prefetch(l ? (const void *)l : (const void *)sp[i]);
  }
  for (size_t i = 0; i < n; i++) {
    if (fast_hint_holds(lk[i], hs[i])) {
      sp[i] = NULL; /* the hint holds */
      continue;
    }
    lk[i] = atomic_load_explicit(sp[i], memory_order_acquire);
    if (lk[i])
      __builtin_prefetch(lk[i]);
  }
  int why = 0;
  for (size_t i = 0; i < n; i++) {
    if (sp[i] && !(lk[i] = fast_walk(lk[i], hs[i])))
      return 1;
    if (!fast_idle(lk[i]))
      why = ORDO__FAST_BUSY;
  }
  if (why)
    return why;
  ordo__hold *took[ORDO__FAST_MAX];
  size_t got = 0;
  for (size_t i = 0; i < n && !why; i++) {
    if (!fast_take(w, h, lk[i])) {
      why = ORDO__FAST_BUSY;
      break;
    }
    took[got++] = h;
    h = h->fnext;
    if (!fast_match(lk[i], hs[i], &r[i]))
      why = 1;
  }
  /* The records taken leave the free list (h is the first one left). */
  w->hfree = h;
  w->nfree -= got;
  if (why) {
    ordo__fast_give_back(w, took, got);
    return why;
  }
  for (size_t i = 0; i < got; i++)
    fast_granted(tab, w, took[i], hs[i], &now);
  BUMP(w->fast_acq);
  return 0;
}

/* A hold the fast path made and nobody adopted goes back with one
 * compare-and-swap: the lock never left the empty list, and has no waiters
 * (queueing adopts). False when the slow way must release it. */
ORDO_HOT bool fast_release(ordo__table *tab, ordo__hold *h) {
  ordo__lock *l = h->lock;
  uintptr_t mine = (uintptr_t)h;
  if (atomic_load_explicit(&l->fast, RELAXED) != mine ||
      !atomic_compare_exchange_strong_explicit(&l->fast, &mine, ORDO__FAST_IDLE,
                                               memory_order_release, RELAXED))
    return false;
  /* l may be evicted and reused from here on: not read again. */
  ordo__owner *w = h->owner;
  if (h == w->sampled)
    ordo__sample_end(tab, w);
  BUMP(w->fast_rel);
  hold_unlink(w, h);
  return true;
}

/* ordo__release_all -- drops every hold of w, newest first; returns how
 * many keys were released. */
ORDO_HOT int ordo__release_all(ordo__owner *w) {
  int n = 0;
  ordo__hold *h;
  while ((h = TAILQ_LAST(&w->holds, ordo__hold_list)) &&
         fast_release(w->tab, h))
    n++;
  return h ? n + ordo__release_rest(w) : n;
}

#endif /* ORDO_CORE_FAST_H */
