/*
 * table.c -- the lock engine: a striped hash table of lock objects, a wait
 * queue per lock, and the grant protocol that takes a whole set of keys at
 * once or queues it holding nothing. See src/core/README.md for the design,
 * the numbered invariants and the lock order:
 *
 *     wait_mu  ->  stripe mutexes, in increasing stripe number
 *     wait_mu  ->  timer_mu
 *
 * No thread takes wait_mu while it holds a stripe mutex, except with
 * pthread_mutex_trylock, which cannot wait.
 *
 * Interface: ordo__table_create, ordo__table_destroy, ordo__owner_init,
 * ordo__owner_fini, ordo__acquire, ordo__abort_wait, ordo__release_one,
 * ordo__release_all, ordo__held, ordo__table_stats, ordo__table_dump,
 * ordo__table_key_each.
 */
#include "core/fast.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Empty lock objects kept per stripe for reuse before they are freed: a
 * quarter of max_locks over all the stripes, within these bounds (a workload
 * that moves over 10,000 keys then finds its lock objects instead of calling
 * malloc and free for nearly every grant; at most 1 MiB of 56-byte objects
 * with the default 64 stripes). */
#define EMPTY_CACHE_MIN 1
#define EMPTY_CACHE_MAX 256

/* Hold records per block: a new block is as large as what the owner has,
 * within these bounds. */
#define HOLD_BLOCK_MIN 4
#define HOLD_BLOCK_MAX 4096

struct ordo__hold_block {
  struct ordo__hold_block *next;
  ordo__hold h[];
};
#define INITIAL_BUCKETS 16

/* ---- Small helpers --------------------------------------------------------
 */

static void hist_add(_Atomic uint64_t *hist, uint64_t us) {
  ADD(hist[ordo__hist_bucket(us)], 1);
}

/* ---- Lock objects (caller holds the stripe's mutex) ---------------------
 */

ORDO_HOT void empty_unlink(ordo__stripe *st, ordo__lock *l);

/* The fast path's hold h on l becomes a listed holder (caller holds the
 * stripe, and has just taken h's place in l->fast): off the empty list,
 * where the fast path left it, and onto the holder list. */
static void adopt(ordo__stripe *st, ordo__lock *l, ordo__hold *h) {
  empty_unlink(st, l);
  l->holders = h; /* h->lnext is NULL since the fast path took l */
  l->xheld = 1;
}

/* Makes the stripe's lists the whole truth about l (caller holds the
 * stripe): after this, the fast path keeps off l until retire() lists it
 * idle again. */
ORDO_HOT void inflate(ordo__stripe *st, ordo__lock *l) {
  uintptr_t v = atomic_load_explicit(&l->fast, RELAXED);
  while (v != ORDO__FAST_SLOW) {
    /* (Only a holder of the stripe's mutex moves it off SLOW.) An idle
     * lock becomes SLOW at once. A held one is ADOPTING until its lists
     * say so: readers of a held lock's queue under wait_mu alone
     * (ordo__held_queue) see SLOW only once the list word is the queue. */
    ORDO_ASSERT(v == ORDO__FAST_IDLE || v >= ORDO__FAST_HOLD);
    uintptr_t to = v == ORDO__FAST_IDLE ? ORDO__FAST_SLOW : ORDO__FAST_ADOPTING;
    if (atomic_compare_exchange_weak_explicit(&l->fast, &v, to,
                                              memory_order_acq_rel, RELAXED)) {
      if (to == ORDO__FAST_ADOPTING) {
        adopt(st, l, (ordo__hold *)v);
        atomic_store_explicit(&l->fast, ORDO__FAST_SLOW, memory_order_release);
      }
      return;
    }
  }
}

/* The lock of key in stripe st, inflated (caller holds the stripe). */
ORDO_HOT ordo__lock *lookup(ordo__stripe *st, uint32_t h, const void *key,
                            size_t len) {
  ordo__bview *bk = stripe_bk(st);
  ordo__lock *l =
      atomic_load_explicit(&bk->slot[bucket_of(st, h, bk->n)], RELAXED);
  for (; l; l = next_of(l))
    if (hash_of(l) == h && l->klen == len && key_eq(l->key, key, len)) {
      inflate(st, l);
      return l;
    }
  return NULL;
}

ORDO_HOT void empty_unlink(ordo__stripe *st, ordo__lock *l) {
  if (!l->listed)
    return;
  TAILQ_REMOVE(&st->empty, l, elink);
  l->holders = NULL; /* the list's links shared their words */
  l->qhead = NULL;
  l->listed = 0;
  st->nempty--;
}

/* Unlinks l from its hash chain. The fast path may be on l or about to
 * step onto it: l keeps its own link, so such a walk goes on along the
 * chain (or stops at its bound). */
static void hash_remove(ordo__stripe *st, ordo__lock *l) {
  ordo__bview *bk = stripe_bk(st);
  _Atomic(ordo__lock *) *pp = &bk->slot[bucket_of(st, hash_of(l), bk->n)];
  ordo__lock *x;
  while ((x = atomic_load_explicit(pp, RELAXED)) != l)
    pp = &x->hnext;
  atomic_store_explicit(pp, next_of(l), RELAXED);
  st->nlock--;
}

/* The bytes of a slab lock object for a key of len bytes: the header and
 * the key, rounded up to 8 (the header's alignment). */
static size_t slab_bytes(size_t len) {
  return (offsetof(ordo__lock, key) + len + 7) & ~(size_t)7;
}

/* A lock object for a key of len bytes comes from the slab. So does every
 * object whose key is that long: a slab object is only reused for keys of
 * its own step and a malloc'd one only for keys too long for the slab. */
static bool from_slab(size_t len) {
  return len <= ORDO__SLAB_KEY_MAX;
}

/* The room for key bytes of lock object l: its slab step's, or its malloc
 * chunk's, which is at least what it was made for. */
static size_t key_room(ordo__lock *l) {
  if (from_slab(l->klen))
    return slab_bytes(l->klen) - offsetof(ordo__lock, key);
  return malloc_usable_size(l) - offsetof(ordo__lock, key);
}

/* A graveyard class: a slab object's step, or a malloc'd object's room in
 * [2^k, 2^(k+1)). */
static unsigned room_class(size_t len, size_t room) {
  if (from_slab(len))
    return (unsigned)((slab_bytes(len) - slab_bytes(0)) / 8);
  unsigned k = 63u - (unsigned)__builtin_clzll((uint64_t)room);
  k += ORDO__SLAB_CLASSES;
  return k < ORDO__KCLASSES ? k : ORDO__KCLASSES - 1;
}

/* Slab chunks: the first of a stripe is this large, each next one twice
 * the last, up to the most. */
#define SLAB_CHUNK_MIN 1024
#define SLAB_CHUNK_MAX (64 * 1024)

/* A new lock object of n bytes (a multiple of 8, at most ORDO__SLAB_BYTES)
 * from st's slab, or NULL. The rest of a chunk too small for it is left
 * unused (less than ORDO__SLAB_BYTES a chunk). */
static ordo__lock *slab_alloc(ordo__stripe *st, size_t n) {
  if (st->slab_left < n) {
    size_t size =
        st->slab ? 2 * (st->slab_left + (size_t)(st->slab_free - st->slab->mem))
                 : SLAB_CHUNK_MIN;
    if (size > SLAB_CHUNK_MAX)
      size = SLAB_CHUNK_MAX;
    ordo__slab *c = malloc(sizeof *c + size);
    if (!c)
      return NULL;
    c->next = st->slab;
    st->slab = c;
    st->slab_free = c->mem;
    st->slab_left = (uint32_t)size;
  }
  ordo__lock *l = (ordo__lock *)st->slab_free;
  st->slab_free += n;
  st->slab_left -= (uint32_t)n;
  return l;
}

/* Takes l out of the table into the stripe's graveyard (l->fast is DEAD):
 * the fast path may still read its atomics, so it is kept, for a later key
 * it has room for, until the table ends. */
static void bury(ordo__table *tab, ordo__stripe *st, ordo__lock *l) {
  empty_unlink(st, l);
  hash_remove(st, l);
  unsigned k = room_class(l->klen, key_room(l));
  l->gnext = st->grave[k];
  st->grave[k] = l;
  atomic_fetch_sub_explicit(&tab->live, 1, RELAXED);
}

/* How many dead lock objects of a class a new key looks at for room. */
#define GRAVE_LOOK 4

/* A dead lock object of st with room for len key bytes, taken out of the
 * graveyard, or NULL. A slab class's objects all fit (its head is taken);
 * keys of one length (the common case) find one at the head of their
 * class's list, too. */
static ordo__lock *unbury(ordo__stripe *st, size_t len) {
  unsigned k = room_class(len, len);
  if (from_slab(len)) {
    ordo__lock *l = st->grave[k];
    if (l)
      st->grave[k] = l->gnext;
    return l;
  }
  for (unsigned c = k; c < ORDO__KCLASSES && c <= k + 1; c++) {
    ordo__lock **pp = &st->grave[c];
    for (int i = 0; *pp && i < GRAVE_LOOK; i++, pp = &(*pp)->gnext) {
      ordo__lock *l = *pp;
      if (key_room(l) >= len) {
        *pp = l->gnext;
        return l;
      }
    }
  }
  return NULL;
}

/* After a lookup that only read l (caller holds the stripe): a cached
 * empty lock that lookup() made SLOW is idle again, for the fast path to
 * take (else the next lock of the key found it "busy" and spun; the model
 * tester's --strict-yields=busy found it). */
static void idle_again(ordo__lock *l) {
  if (l && l->listed &&
      atomic_load_explicit(&l->fast, RELAXED) == ORDO__FAST_SLOW)
    atomic_store_explicit(&l->fast, ORDO__FAST_IDLE, memory_order_release);
}

/* Evicts the oldest cached empty lock of this stripe; false if none. A
 * lock the fast path holds is on the list too: it is adopted (and so taken
 * off the list) instead. */
static bool evict_one(ordo__table *tab, ordo__stripe *st) {
  ordo__lock *l;
  while ((l = TAILQ_FIRST(&st->empty))) {
    uintptr_t v = atomic_exchange_explicit(&l->fast, ORDO__FAST_DEAD,
                                           memory_order_acq_rel);
    if (v < ORDO__FAST_HOLD) {
      bury(tab, st, l);
      return true;
    }
    adopt(st, l, (ordo__hold *)v); /* DEAD stood for ADOPTING meanwhile */
    atomic_store_explicit(&l->fast, ORDO__FAST_SLOW, memory_order_release);
  }
  return false;
}

/* Puts a lock with no holders and no waiters on the empty list, where the
 * fast path may take it; the list is bounded, so the oldest empty lock is
 * evicted past the table's empty_cap. */
ORDO_HOT void retire(ordo__table *tab, ordo__stripe *st, ordo__lock *l) {
  if (l->listed || l->holders || l->qhead || l->pins)
    return;
  l->listed = 1;
  TAILQ_INSERT_TAIL(&st->empty, l, elink);
  /* Release: a fast-path taker sees every write of the lock's last holder
   * and of this stripe's critical sections before this one. */
  atomic_store_explicit(&l->fast, ORDO__FAST_IDLE, memory_order_release);
  if (++st->nempty > tab->empty_cap)
    evict_one(tab, st);
}

static ordo__bview *bview_new(uint32_t n) {
  ordo__bview *v = calloc(1, sizeof *v + n * sizeof v->slot[0]);
  if (v)
    v->n = n;
  return v;
}

/*
 * A stripe's bucket array grows 4x once it holds more lock objects than
 * buckets. A load of at most 1 keeps the fast path's walk short (with
 * 10,000 keys, a fifth fewer lock objects touched per lookup than a load
 * of 2, each a cache miss); growing 4x keeps the arrays outgrown, which stay
 * until the table ends, at a third of the live one (2x would keep as much
 * again): about 11 bytes a lock in all, against 8 with a load of 2.
 */
static void maybe_grow(ordo__stripe *st) {
  /* The bits above the stripe's number the buckets: at most 2^(32-bshift). */
  ordo__bview *ob = stripe_bk(st);
  uint64_t most = UINT64_C(1) << (32 - st->bshift);
  if (st->nlock <= ob->n || ob->n >= most)
    return;
  ordo__bview *nb = bview_new(
      (uint32_t)(ob->n * UINT64_C(4) < most ? ob->n * UINT64_C(4) : most));
  if (!nb)
    return; /* longer chains, still correct */
  /* Every lock is moved to the new array before it is published; a fast
   * walk on the old one meanwhile may miss its key and go the slow way. */
  for (uint32_t i = 0; i < ob->n; i++) {
    ordo__lock *l = atomic_load_explicit(&ob->slot[i], RELAXED);
    while (l) {
      ordo__lock *next = next_of(l);
      uint32_t j = bucket_of(st, hash_of(l), nb->n);
      atomic_store_explicit(
          &l->hnext, atomic_load_explicit(&nb->slot[j], RELAXED), RELAXED);
      atomic_store_explicit(&nb->slot[j], l, RELAXED);
      l = next;
    }
  }
  nb->old = ob; /* the fast path may still read it: freed with the table */
  atomic_store_explicit(&st->bk, nb, memory_order_release);
}

/* Finds the lock for key or makes it; an empty lock found is taken off the
 * empty list so that no eviction frees it while the caller uses it. */
ORDO_HOT int lookup_or_create(ordo__table *tab, ordo__stripe *st, uint32_t h,
                              const void *key, size_t len, ordo__lock **out) {
  ordo__lock *l = lookup(st, h, key, len);
  if (l) {
    empty_unlink(st, l);
    *out = l;
    return 0;
  }
  uint64_t live =
      atomic_fetch_add_explicit(&tab->live, 1, memory_order_relaxed);
  if (live >= tab->opts.max_locks) {
    /* Make room from this stripe's cache of empty locks, or refuse. */
    if (!evict_one(tab, st)) {
      atomic_fetch_sub_explicit(&tab->live, 1, memory_order_relaxed);
      return ORDO_ELIMIT;
    }
  }
  /* A dead lock object with room for the key, or a new one: the key
   * right after the header's last field, not after its padding (a held
   * lock's object is most of what it costs). */
  l = unbury(st, len);
  if (l) {
    /* The fast path may read its atomics; the rest is this thread's. */
    l->holders = NULL;
    l->qhead = NULL;
    l->pins = 0;
    l->xheld = l->listed = l->reordered = 0;
  } else {
    l = from_slab(len) ? slab_alloc(st, slab_bytes(len))
                       : malloc(offsetof(ordo__lock, key) + len);
    if (!l) {
      atomic_fetch_sub_explicit(&tab->live, 1, RELAXED);
      return ORDO_ENOMEM;
    }
    memset(l, 0, offsetof(ordo__lock, key));
  }
  /* Not IDLE: the caller grants it, queues on it or retires it. */
  atomic_store_explicit(&l->fast, ORDO__FAST_SLOW, RELAXED);
  atomic_store_explicit(&l->hash, h, RELAXED);
  l->klen = (uint32_t)len;
  memcpy(l->key, key, len);
  ordo__bview *bk = stripe_bk(st);
  _Atomic(ordo__lock *) *slot = &bk->slot[bucket_of(st, h, bk->n)];
  atomic_store_explicit(&l->hnext, atomic_load_explicit(slot, RELAXED),
                        RELAXED);
  atomic_store_explicit(slot, l, memory_order_release);
  st->nlock++;
  maybe_grow(st);
  *out = l;
  return 0;
}

/* ---- The grant rules (caller holds the lock's stripe) ---------------------
 */

/* w's hold of l, or NULL. l must not be listed: a listed (idle) lock has no
 * holders, and its holder list's word is then the empty list's link. */
ORDO_HOT ordo__hold *find_hold(const ordo__lock *l, const ordo__owner *w) {
  ORDO_ASSERT(!l->listed);
  for (ordo__hold *h = l->holders; h; h = h->lnext)
    if (h->owner == w)
      return h;
  return NULL;
}

/* Does a holder of e's lock keep e waiting (ordo__waits_for_hold)? */
ORDO_HOT bool holders_block(const ordo__entry *e) {
  const ordo__lock *l = e->lock;
  if (!l->holders)
    return false;
  if (e->mode == ORDO_MODE_S && !l->xheld)
    return false; /* S conflicts only with an X holder */
  for (const ordo__hold *h = l->holders; h; h = h->lnext)
    if (ordo__waits_for_hold(e, h))
      return true;
  return false;
}

/*
 * The starvation bound: how long a waiter waits before it reserves its keys.
 * It is the larger of starvation_us and starvation_holds times the mean
 * sampled hold time: a waiter starves when it has waited longer than the
 * holds it competes with explain, so workloads of long holds (bites of
 * 1-10 ms in the dining philosophers) do not turn nearly every waiter into
 * a reservation that keeps a free key idle. See src/core/README.md, "Why it
 * cannot starve".
 */
static uint64_t starve_bound(const ordo__table *tab) {
  uint64_t m = atomic_load_explicit(&((ordo__table *)tab)->hold_mean_ns,
                                    memory_order_relaxed);
  uint64_t b = tab->starve_holds * m;
  return b > tab->starve_ns ? b : tab->starve_ns;
}

/* How a grant rule is asked: the bound and the clock, read once per
 * question, and whether the asker holds wait_mu. */
typedef struct rule_ctx {
  uint64_t bound, now;
  bool have_wait; /* may read any queue (not only those of its stripes) */
  bool unsure;    /* an answer needed wait_mu: ask again with it */
} rule_ctx;

static bool reserved_against(const ordo__table *tab, const ordo__entry *self,
                             bool queued, rule_ctx *rc, bool chains);

/*
 * Is waiter o held back by the reservation of a starving waiter ahead of it
 * on one of its keys? Then o's own reservations would only chain: its keys
 * would sit idle while it waits for that older waiter anyway, so they are
 * not honoured (see "Why it cannot starve"). Reads o's queues: needs wait_mu.
 */
static bool chained(const ordo__table *tab, const ordo__owner *o,
                    rule_ctx *rc) {
  for (size_t i = 0; i < o->nent; i++) {
    const ordo__entry *f = &o->ent[i];
    if (f->lock->qhead && !f->covered &&
        reserved_against(tab, f, true, rc, false))
      return true;
  }
  return false;
}

/*
 * Is self's lock reserved against it by a starving waiter ahead of it (all
 * of the queue, for a request not queued yet, which comes after them all)?
 * Only a waiter self waits for counts (ordo__waits_for_queued). A waiter
 * starves once it has waited the starvation bound; the queue is in arrival
 * order, so the scan stops at the first waiter that does not. With chains,
 * a starving waiter that is itself held back by an older one's reservation
 * (chained) reserves nothing.
 */
static bool reserved_against(const ordo__table *tab, const ordo__entry *self,
                             bool queued, rule_ctx *rc, bool chains) {
  const ordo__lock *l = self->lock;
  const ordo__entry *stop = queued ? self : NULL;
  for (const ordo__entry *e = l->qhead; e && e != stop; e = e->qnext) {
    if (!rc->now)
      rc->now = ordo__now_ns();
    if (!rc->bound)
      rc->bound = starve_bound(tab); /* read once, when first needed */
    if (rc->now - e->owner->enq_ns < rc->bound) {
      if (!l->reordered)
        return false; /* arrival order: nobody behind has waited longer */
      continue;
    }
    if (!ordo__waits_for_queued(self, e))
      continue;
    if (!chains)
      return true;
    if (!rc->have_wait) {
      /* Whether e is chained depends on queues of other stripes. */
      rc->unsure = true;
      return true;
    }
    if (!chained(tab, e->owner, rc))
      return true;
  }
  return false;
}

ORDO_HOT bool grantable(const ordo__table *tab, const ordo__owner *w,
                        bool queued, rule_ctx *rc) {
  for (size_t i = 0; i < w->nent; i++) {
    const ordo__entry *e = &w->ent[i];
    if (holders_block(e))
      return false;
    /* A covered key (held already in this mode or a stronger one) waits
     * for nobody queued: no reservation applies to it (it would make w
     * wait on a key it holds). */
    if (e->lock->qhead && !e->covered &&
        reserved_against(tab, e, queued, rc, true))
      return false;
  }
  return true;
}

/* Grants one key to w (caller holds its stripe, and w has a free hold). */
ORDO_HOT void grant_one(ordo__table *tab, ordo__stripe *st, ordo__owner *w,
                        ordo__lock *l, int mode, uint64_t *now) {
  /* Off the empty list first: while listed, the holder list's word is a
   * list link. */
  empty_unlink(st, l);
  ordo__hold *h = find_hold(l, w);
  if (h) {
    /* Reentrant: count the hold; an upgrade is a new grant of X. */
    h->count++;
    if (mode > h->mode) {
      h->mode = (uint8_t)mode;
      h->fence = ++st->fence;
      l->xheld = 1;
    }
    return;
  }
  h = w->hfree;
  ORDO_ASSERT(h != NULL);
  w->hfree = h->fnext;
  w->nfree--;
  h->lock = l;
  h->owner = w;
  h->mode = (uint8_t)mode;
  h->count = 1;
  h->fence = ++st->fence;
  if ((w->sample++ & (tab->opts.hold_sample - 1)) == 0 && !w->sampled) {
    if (!*now)
      *now = ordo__now_ns();
    w->sampled = h;
    w->sampled_ns = *now;
  }
  h->lnext = l->holders;
  l->holders = h;
  if (mode == ORDO_MODE_X)
    l->xheld = 1;
  hold_link(w, h);
}

/* The sampled hold of w ends: its time goes into the statistics and the
 * mean hold time. */
void ordo__sample_end(ordo__table *tab, ordo__owner *w) {
  uint64_t held = ordo__now_ns() - w->sampled_ns;
  hist_add(tab->hold_hist, held / 1000);
  uint64_t m = GET(tab->hold_mean_ns);
  atomic_store_explicit(&tab->hold_mean_ns, m ? m - m / 16 + held / 16 : held,
                        memory_order_relaxed);
  w->sampled = NULL;
}

/* Drops a whole hold (caller holds the stripe); the record returns to the
 * owner's free list. */
ORDO_HOT void drop_hold(ordo__table *tab, ordo__stripe *st, ordo__hold *h) {
  ordo__lock *l = h->lock;
  ordo__owner *w = h->owner;
  ordo__hold **pp = &l->holders;
  while (*pp != h)
    pp = &(*pp)->lnext;
  *pp = h->lnext;
  if (h->mode == ORDO_MODE_X)
    l->xheld = 0; /* X is never shared, so it was the only X */
  if (h == w->sampled)
    ordo__sample_end(tab, w);
  if (!h->quiet)
    BUMP(st->released);
  h->quiet = 0;
  hold_unlink(w, h);
}

/* ---- Stripe sets ----------------------------------------------------------
 */

static void lock_stripes(ordo__table *tab, const ordo__owner *w) {
  for (size_t i = 0; i < w->nstripes; i++)
    pthread_mutex_lock(&tab->stripe[w->stripes[i]].mu);
}

static void unlock_stripes(ordo__table *tab, const ordo__owner *w) {
  for (size_t i = w->nstripes; i-- > 0;)
    pthread_mutex_unlock(&tab->stripe[w->stripes[i]].mu);
}

/* ---- The timer heap (caller holds timer_mu) -----------------------------
 */

static void heap_swap(ordo__table *tab, size_t a, size_t b)
    ORDO_REQUIRES(tab->timer_mu) {
  ordo__owner *t = tab->heap[a];
  tab->heap[a] = tab->heap[b];
  tab->heap[b] = t;
  tab->heap[a]->timer_idx = (long)a;
  tab->heap[b]->timer_idx = (long)b;
}

static void heap_up(ordo__table *tab, size_t i) ORDO_REQUIRES(tab->timer_mu) {
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (tab->heap[p]->alarm_ns <= tab->heap[i]->alarm_ns)
      break;
    heap_swap(tab, i, p);
    i = p;
  }
}

static void heap_down(ordo__table *tab, size_t i) ORDO_REQUIRES(tab->timer_mu) {
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= tab->nheap)
      break;
    if (c + 1 < tab->nheap &&
        tab->heap[c + 1]->alarm_ns < tab->heap[c]->alarm_ns)
      c++;
    if (tab->heap[i]->alarm_ns <= tab->heap[c]->alarm_ns)
      break;
    heap_swap(tab, i, c);
    i = c;
  }
}

static void heap_remove(ordo__table *tab, ordo__owner *w)
    ORDO_REQUIRES(tab->timer_mu) {
  if (w->timer_idx < 0)
    return;
  size_t i = (size_t)w->timer_idx;
  w->timer_idx = -1;
  tab->nheap--;
  if (i != tab->nheap) {
    tab->heap[i] = tab->heap[tab->nheap];
    tab->heap[i]->timer_idx = (long)i;
    heap_up(tab, i);
    heap_down(tab, i);
  }
}

static void timer_remove(ordo__table *tab, ordo__owner *w)
    ORDO_EXCLUDES(tab->timer_mu) {
  ordo__mutex_lock(&tab->timer_mu);
  heap_remove(tab, w);
  ordo__mutex_unlock(&tab->timer_mu);
}

/* ---- Transitions (caller holds wait_mu) -----------------------------------
 */

static void dequeue_all(ordo__owner *w) {
  for (size_t i = 0; i < w->nent; i++) {
    ordo__lock *l = w->ent[i].lock;
    ordo__queue_unlink(l, &w->ent[i]);
    if (!l->qhead)
      l->reordered = 0;
  }
}

/* The table's list of waiting owners (caller holds wait_mu). */
static void waiting_add(ordo__table *tab, ordo__owner *w)
    ORDO_REQUIRES(tab->wait_mu) {
  TAILQ_INSERT_TAIL(&tab->waiters, w, wlink);
}

static void waiting_remove(ordo__table *tab, ordo__owner *w)
    ORDO_REQUIRES(tab->wait_mu) {
  TAILQ_REMOVE(&tab->waiters, w, wlink);
}

/* Grants w's whole set (caller holds wait_mu and w's stripes, and has
 * checked that it is grantable) and records the wait. */
static void grant_waiter(ordo__table *tab, ordo__owner *w, uint64_t *now)
    ORDO_REQUIRES(tab->wait_mu) {
  dequeue_all(w);
  for (size_t i = 0; i < w->nent; i++) {
    ordo__entry *e = &w->ent[i];
    grant_one(tab, &tab->stripe[e->stripe], w, e->lock, e->mode, now);
  }
  if (!*now)
    *now = ordo__now_ns();
  uint64_t us = (*now - w->enq_ns) / 1000;
  hist_add(tab->wait_hist, us);
  if (us > GET(tab->max_wait_us))
    atomic_store_explicit(&tab->max_wait_us, us, memory_order_relaxed);
  ADD(tab->acquired_w, 1);
  atomic_fetch_sub_explicit(&tab->waiting, 1, memory_order_relaxed);
  waiting_remove(tab, w);
  w->status = 0;
  w->woken = false;
}

/* Marks an owner's outcome as on its way to its callback (caller holds
 * wait_mu and puts w on a fire list). */
static void deliver_pending(ordo__owner *w) {
  atomic_fetch_add_explicit(&w->deliver, ORDO__DELIVER_ONE, RELAXED);
}

enum { WAKE_NO, WAKE_GRANTED, WAKE_POKED };

/*
 * wake_one -- a release made w's whole set grantable, perhaps. Caller holds
 * wait_mu and no stripe. A waiter with a thread of its own that has not yet
 * starved is not handed the keys: the keys would sit with a thread that is
 * still waking up (or spinning on another CPU) while running threads wait
 * for it, a lock convoy. It is poked to try again itself, and may lose the
 * keys to a request that runs meanwhile; once it starves it is handed them.
 * Every other waiter (starving, or asynchronous, with no thread to poke) is
 * granted here and joins the fire list. Returns what it did.
 */
static int wake_one(ordo__table *tab, ordo__owner *w, ordo__owner **fire)
    ORDO_REQUIRES(tab->wait_mu) {
  rule_ctx rx = {0, 0, true, false};
  ADD(tab->wake_asks, 1);
  lock_stripes(tab, w);
  bool ok = grantable(tab, w, true, &rx);
  bool poke = false;
  if (ok && w->pokeable) {
    if (!rx.now)
      rx.now = ordo__now_ns();
    poke = rx.now - w->enq_ns < starve_bound(tab);
  }
  if (ok && !poke)
    grant_waiter(tab, w, &rx.now);
  unlock_stripes(tab, w);
  if (!ok)
    return WAKE_NO;
  if (poke) {
    if (!w->woken) {
      /* One poke until it has tried: a stream of releases must not turn
       * into a stream of wake-ups. The poke runs under wait_mu, so w
       * cannot end meanwhile. */
      w->woken = true;
      ADD(tab->pokes, 1);
      w->cb(w, ORDO_PENDING, w->cbarg);
    }
    return WAKE_POKED;
  }
  ADD(tab->wakeups, 1);
  timer_remove(tab, w);
  atomic_store_explicit(&w->state, ORDO__IDLE, memory_order_relaxed);
  deliver_pending(w);
  w->fire_next = *fire;
  *fire = w;
  return WAKE_GRANTED;
}

/*
 * ordo__wake_queue -- after l lost a holder or a waiter, grant (or poke) the
 * waiters that can now have their whole set, in arrival order. Only those
 * are woken. Caller holds wait_mu and no stripe; l has waiters, so it cannot
 * be freed (only empty locks are, and its queue cannot change without
 * wait_mu).
 *
 * A waiter that l's own holders block cannot be granted (wake_one would
 * lock its stripes only to say WAKE_NO), so the walk passes over those
 * under l's stripe alone. While l is held in X, that is every waiter but
 * the holder's own, and the holder has at most one pending request: the
 * wake-up is one wake_one, not a walk of the queue. A waiter that leaves a
 * long queue (a hang-up, a timeout) under a holder so costs O(1), not
 * O(queue); before, 10,000 sessions hanging up at once cost O(n^2). The
 * holders cannot gain a waiter's way meanwhile: a release takes wait_mu
 * for its own wake-up after this one, and a new holder only blocks more.
 */
void ordo__wake_queue(ordo__table *tab, ordo__lock *l, ordo__owner **fire)
    ORDO_REQUIRES(tab->wait_mu) {
  ordo__stripe *st = lock_stripe(tab, l);
  pthread_mutex_lock(&st->mu);
  if (l->xheld && l->holders) {
    /* X is never shared: the one holder, whose own entry on l is the only
     * one its hold does not block. */
    ordo__owner *h = l->holders->owner;
    pthread_mutex_unlock(&st->mu);
    if (atomic_load_explicit(&h->state, RELAXED) != ORDO__WAITING)
      return;
    /* Queued on l still: an owner being aborted is WAITING until its
     * wake-ups are done, with its entries unlinked (qprev NULL). */
    for (size_t i = 0; i < h->nent; i++)
      if (h->ent[i].lock == l && h->ent[i].qprev) {
        wake_one(tab, h, fire);
        return;
      }
    return;
  }
  ordo__entry *e = l->qhead;
  for (;;) {
    while (e && holders_block(e))
      e = e->qnext;
    pthread_mutex_unlock(&st->mu);
    if (!e)
      return;
    ordo__entry *next = e->qnext;
    int mode = e->mode;
    if (wake_one(tab, e->owner, fire) != WAKE_NO && mode == ORDO_MODE_X)
      return; /* X is taken (or promised): nobody behind can have l now */
    e = next;
    pthread_mutex_lock(&st->mu);
  }
}

/* The owner whose outcome this thread is delivering now (its callback is
 * running), for an owner ended from inside its own event. */
static _Thread_local ordo__owner *delivering_now;

/*
 * fire_all -- runs the events of a transition's fire list, with no engine
 * lock held. Each owner stays alive until its callback has returned:
 * ordo__owner_fini waits for its deliveries to end (or, called from inside
 * the callback, leaves the freeing to the last of them).
 */
static void fire_all(ordo__owner *f) {
  while (f) {
    ordo__owner *next = f->fire_next;
    ordo__event_cb cb = f->cb;
    void *arg = f->cbarg;
    int st = f->status;
    if (st == ORDO_EDEADLK) {
      /* From the edge that closed the cycle to the victim's return; its
       * locks are all released by now. */
      ordo__table *tab = f->tab;
      hist_add(tab->detect_hist, (ordo__now_ns() - f->dl_edge_ns) / 1000);
    }
    ordo__owner *outer = delivering_now;
    delivering_now = f;
    cb(f, st, arg);
    delivering_now = outer;
    unsigned v = atomic_fetch_sub_explicit(&f->deliver, ORDO__DELIVER_ONE,
                                           memory_order_acq_rel);
    if (v == (ORDO__DELIVER_ONE | ORDO__DELIVER_END))
      f->on_free(f); /* ended from inside a callback: the last one frees */
    f = next;
  }
}

void ordo__fire_all(ordo__owner *f) {
  fire_all(f);
}

/* WAITING -> ended with status; caller holds wait_mu. */
bool ordo__abort_locked(ordo__table *tab, ordo__owner *w, int status,
                        ordo__owner **fire) {
  if (atomic_load_explicit(&w->state, memory_order_relaxed) != ORDO__WAITING)
    return false;
  waiting_remove(tab, w);
  lock_stripes(tab, w);
  dequeue_all(w);
  for (size_t i = 0; i < w->nent; i++) {
    ordo__entry *e = &w->ent[i];
    ordo__lock *l = e->lock;
    e->pinned = l->qhead != NULL;
    if (e->pinned)
      l->pins++; /* Leaving may lift this waiter's reservation of l; a
                  * wake-up of one lock can empty another's queue, so each
                  * stays pinned until its own wake-up is done (at most 1:
                  * see ordo__lock). */
    else
      retire(tab, &tab->stripe[e->stripe], l);
  }
  unlock_stripes(tab, w);
  atomic_fetch_sub_explicit(&tab->waiting, 1, memory_order_relaxed);
  if (status == ORDO_ETIMEDOUT)
    ADD(tab->timeouts, 1);
  else if (status == ORDO_ECANCELED)
    ADD(tab->canceled, 1);
  timer_remove(tab, w);
  w->status = status;
  for (size_t i = 0; i < w->nent; i++) {
    ordo__entry *e = &w->ent[i];
    if (!e->pinned)
      continue;
    ordo__lock *l = e->lock;
    ordo__stripe *st = &tab->stripe[e->stripe];
    if (l->qhead)
      ordo__wake_queue(tab, l, fire);
    pthread_mutex_lock(&st->mu);
    l->pins--;
    retire(tab, st, l);
    pthread_mutex_unlock(&st->mu);
    e->pinned = 0;
  }
  atomic_store_explicit(&w->state, ORDO__IDLE, memory_order_relaxed);
  deliver_pending(w);
  w->fire_next = *fire;
  *fire = w;
  return true;
}

/* ---- The timer thread ---------------------------------------------------
 */

/* The next time the timer must look at waiting owner w: its deadline (if
 * the timer enforces it), its delayed deadlock check, its long-wait log.
 * UINT64_MAX when none is due. */
static uint64_t next_alarm(const ordo__table *tab, const ordo__owner *w) {
  uint64_t t = UINT64_MAX;
  if (w->use_timer)
    t = w->deadline_ns > w->pin_ns ? w->deadline_ns : w->pin_ns;
  if (tab->opts.detect == ORDO_DETECT_DELAYED && !w->checked) {
    uint64_t c = w->enq_ns + (uint64_t)tab->opts.deadlock_timeout_ms * 1000000u;
    if (c < t)
      t = c;
  }
  if (tab->opts.log_wait_ms > 0 && !w->logged) {
    uint64_t c = w->enq_ns + (uint64_t)tab->opts.log_wait_ms * 1000000u;
    if (c < t)
      t = c;
  }
  return t;
}

static bool timer_add(ordo__table *tab, ordo__owner *w)
    ORDO_REQUIRES(tab->wait_mu) ORDO_EXCLUDES(tab->timer_mu);

/* What is due for w now (caller holds wait_mu): its deadline, a delayed
 * check, a log line. Puts it back in the heap for what is left. */
static void alarm_due(ordo__table *tab, ordo__owner *w, ordo__owner **fire)
    ORDO_REQUIRES(tab->wait_mu) {
  if (atomic_load_explicit(&w->state, memory_order_relaxed) != ORDO__WAITING)
    return;
  uint64_t now = ordo__now_ns();
  if (w->use_timer && w->deadline_ns <= now && w->pin_ns <= now) {
    ordo__abort_locked(tab, w, ORDO_ETIMEDOUT, fire);
    return;
  }
  if (tab->opts.detect == ORDO_DETECT_DELAYED && !w->checked &&
      now >= w->enq_ns + (uint64_t)tab->opts.deadlock_timeout_ms * 1000000u) {
    w->checked = true;
    ordo__detect_on_block(tab, w, fire);
  }
  if (atomic_load_explicit(&w->state, memory_order_relaxed) != ORDO__WAITING)
    return;
  if (tab->opts.log_wait_ms > 0 && !w->logged &&
      now >= w->enq_ns + (uint64_t)tab->opts.log_wait_ms * 1000000u) {
    w->logged = true;
    ordo__detect_log_wait(tab, w);
  }
  w->alarm_ns = next_alarm(tab, w);
  if (w->alarm_ns != UINT64_MAX)
    timer_add(tab, w);
}

/*
 * The timer thread: expires the deadlines of asynchronous waits, runs the
 * delayed deadlock checks and the long-wait log, and sweeps the wait-for
 * graph every sweep_ms for cycles the immediate check missed.
 */
static void *timer_main(void *arg) {
  ordo__table *tab = arg;
  uint64_t sweep_ns = (uint64_t)tab->opts.sweep_ms * 1000000u;
  ordo__mutex_lock(&tab->timer_mu);
  tab->next_sweep_ns = sweep_ns ? ordo__now_ns() + sweep_ns : UINT64_MAX;
  for (;;) {
    if (tab->timer_stop)
      break;
    uint64_t now = ordo__now_ns();
    uint64_t d = tab->nheap ? tab->heap[0]->alarm_ns : UINT64_MAX;
    if (tab->next_sweep_ns < d)
      d = tab->next_sweep_ns;
    if (d > now) {
      if (d == UINT64_MAX) {
        ordo__cond_wait(&tab->timer_cv, &tab->timer_mu);
      } else {
        struct timespec ts = {(time_t)(d / 1000000000u),
                              (long)(d % 1000000000u)};
        ordo__cond_timedwait(&tab->timer_cv, &tab->timer_mu, &ts);
      }
      continue;
    }
    /* wait_mu must come first: let go of timer_mu. */
    bool sweep = tab->next_sweep_ns <= now;
    if (sweep)
      tab->next_sweep_ns = now + sweep_ns;
    ordo__mutex_unlock(&tab->timer_mu);
    ordo__owner *fire = NULL;
    ordo__mutex_lock(&tab->wait_mu);
    ordo__mutex_lock(&tab->timer_mu);
    ordo__owner *w = NULL;
    if (tab->nheap && tab->heap[0]->alarm_ns <= ordo__now_ns()) {
      w = tab->heap[0];
      heap_remove(tab, w);
    }
    ordo__mutex_unlock(&tab->timer_mu);
    if (w)
      alarm_due(tab, w, &fire);
    if (sweep)
      ordo__detect_sweep(tab, &fire);
    ordo__mutex_unlock(&tab->wait_mu);
    fire_all(fire);
    ordo__detect_deliver(tab);
    ordo__mutex_lock(&tab->timer_mu);
  }
  ordo__mutex_unlock(&tab->timer_mu);
  return NULL;
}

/*
 * ordo__table_tick -- on the manual clock, what the timer thread would do
 * by now: every alarm due, in the order of its time (deadlines, delayed
 * checks, long-wait logs), then the sweep if one is due. Returns how many
 * alarms it ran. The events fire before it returns, on the caller's thread.
 */
int ordo__table_tick(ordo__table *tab) {
  int n = 0;
  for (;;) {
    ordo__owner *fire = NULL;
    ordo__mutex_lock(&tab->wait_mu);
    ordo__mutex_lock(&tab->timer_mu);
    uint64_t now = ordo__now_ns();
    ordo__owner *w = NULL;
    if (tab->nheap && tab->heap[0]->alarm_ns <= now) {
      w = tab->heap[0];
      heap_remove(tab, w);
    }
    bool sweep = !w && tab->opts.sweep_ms > 0 && tab->next_sweep_ns <= now;
    if (sweep)
      tab->next_sweep_ns = now + (uint64_t)tab->opts.sweep_ms * 1000000u;
    ordo__mutex_unlock(&tab->timer_mu);
    if (w)
      alarm_due(tab, w, &fire);
    if (sweep)
      ordo__detect_sweep(tab, &fire);
    ordo__mutex_unlock(&tab->wait_mu);
    fire_all(fire);
    ordo__detect_deliver(tab);
    if (!w)
      return n;
    n++;
  }
}

/*
 * ordo__table_snapshot -- every lock with a holder or a waiter, for the
 * tester: fn(arg, key, len, holders, nholders, queue, nqueue), holders as
 * (owner id, mode, count) and the queue in order as (owner id, mode),
 * under wait_mu and each stripe in turn. fn must not call into the engine.
 * It changes nothing (no lock leaves the fast path), and a fast-path
 * holder's record is read while its owner may be releasing it: call it only
 * when every owner's thread is still (the tester's quiescent points).
 */
void ordo__table_snapshot(ordo__table *tab, ordo__snap_fn fn, void *arg) {
  enum { MAX = 256 };
  ordo__snap_item hs[MAX], qs[MAX];
  ordo__mutex_lock(&tab->wait_mu);
  for (unsigned s = 0; s < tab->opts.stripes; s++) {
    ordo__stripe *st = &tab->stripe[s];
    pthread_mutex_lock(&st->mu);
    ordo__bview *bk = stripe_bk(st);
    for (uint32_t b = 0; b < bk->n; b++) {
      for (ordo__lock *l = atomic_load_explicit(&bk->slot[b], RELAXED); l;
           l = next_of(l)) {
        /* Looked at, not changed: a lock the fast path holds is reported
         * from its hold record and left on the fast path (inflating it
         * would move it to the slow path and change what is observed). */
        uintptr_t fw = atomic_load_explicit(&l->fast, memory_order_acquire);
        size_t nh = 0, nq = 0;
        if (fw >= ORDO__FAST_HOLD) {
          const ordo__hold *h = (const ordo__hold *)fw;
          hs[nh++] = (ordo__snap_item){h->owner->id, h->mode, h->count};
          fn(arg, l->key, l->klen, hs, nh, qs, 0);
          continue;
        }
        if (fw != ORDO__FAST_SLOW || l->listed || (!l->holders && !l->qhead))
          continue;
        for (ordo__hold *h = l->holders; h && nh < MAX; h = h->lnext)
          hs[nh++] = (ordo__snap_item){h->owner->id, h->mode, h->count};
        for (ordo__entry *e = l->qhead; e && nq < MAX; e = e->qnext)
          qs[nq++] = (ordo__snap_item){e->owner->id, e->mode, 0};
        fn(arg, l->key, l->klen, hs, nh, qs, nq);
      }
    }
    pthread_mutex_unlock(&st->mu);
  }
  ordo__mutex_unlock(&tab->wait_mu);
}

/* ordo__table_objects -- the tester's view of the lock objects (see
 * table.h). A listed object is reported from the empty list (its order is
 * what eviction follows), the others from the hash chains. */
void ordo__table_objects(ordo__table *tab, ordo__obj_fn fn, void *arg) {
  for (unsigned s = 0; s < tab->opts.stripes; s++) {
    ordo__stripe *st = &tab->stripe[s];
    pthread_mutex_lock(&st->mu);
    int pos = 0;
    ordo__lock *l;
    TAILQ_FOREACH(l, &st->empty, elink) {
      uintptr_t fw = atomic_load_explicit(&l->fast, memory_order_acquire);
      fn(arg, s, l->key, l->klen, pos++,
         fw >= ORDO__FAST_HOLD   ? ORDO__OBJ_HELD
         : fw == ORDO__FAST_IDLE ? ORDO__OBJ_IDLE
                                 : ORDO__OBJ_SLOW,
         fw >= ORDO__FAST_HOLD ? ((const ordo__hold *)fw)->owner->id : 0);
    }
    ordo__bview *bk = stripe_bk(st);
    for (uint32_t b = 0; b < bk->n; b++)
      for (l = atomic_load_explicit(&bk->slot[b], RELAXED); l; l = next_of(l))
        if (!l->listed)
          fn(arg, s, l->key, l->klen, -1, ORDO__OBJ_SLOW, 0);
    pthread_mutex_unlock(&st->mu);
  }
}

/* Starts the timer thread once (caller holds timer_mu). */
static bool timer_start(ordo__table *tab) ORDO_REQUIRES(tab->timer_mu) {
  if (tab->timer_started || ordo__clock_manual())
    return true; /* on the manual clock the tester ticks (ordo__table_tick) */
  if (pthread_create(&tab->timer_thr, NULL, timer_main, tab) != 0)
    return false;
  tab->timer_started = true;
  return true;
}

/* Caller holds wait_mu. Returns false if the heap could not grow. */
static bool timer_add(ordo__table *tab, ordo__owner *w)
    ORDO_REQUIRES(tab->wait_mu) ORDO_EXCLUDES(tab->timer_mu) {
  ordo__mutex_lock(&tab->timer_mu);
  bool ok = timer_start(tab);
  if (ok && w->timer_idx >= 0)
    heap_remove(tab, w); /* re-keyed: put it back in its new place */
  if (ok && tab->nheap == tab->capheap) {
    size_t cap = tab->capheap ? tab->capheap * 2 : 64;
    ordo__owner **h = realloc(tab->heap, cap * sizeof *h);
    if (!h)
      ok = false;
    else {
      tab->heap = h;
      tab->capheap = cap;
    }
  }
  if (ok) {
    w->timer_idx = (long)tab->nheap;
    tab->heap[tab->nheap++] = w;
    heap_up(tab, (size_t)w->timer_idx);
    if (w->timer_idx == 0)
      pthread_cond_signal(&tab->timer_cv);
  }
  ordo__mutex_unlock(&tab->timer_mu);
  return ok;
}

/* ---- Public engine calls --------------------------------------------------
 */

int ordo__table_create(ordo__table **out, const ordo_options_t *opts) {
  ordo__table *tab = calloc(1, sizeof *tab);
  if (!tab)
    return ORDO_ENOMEM;
  tab->opts = *opts;
  if (opts->detect == ORDO_DETECT_OFF)
    tab->opts.sweep_ms = 0; /* off means timeouts only: no sweep either */
  tab->starve_ns =
      (uint64_t)(opts->starvation_us < 0 ? 0 : opts->starvation_us) * 1000u;
  tab->starve_holds = opts->starvation_holds;
  size_t cap = opts->max_locks / 4 / opts->stripes;
  tab->empty_cap = (uint32_t)(cap < EMPTY_CACHE_MIN   ? EMPTY_CACHE_MIN
                              : cap > EMPTY_CACHE_MAX ? EMPTY_CACHE_MAX
                                                      : cap);
  tab->smask = opts->stripes - 1;
  tab->stripe = aligned_alloc(64, sizeof(ordo__stripe) * opts->stripes);
  if (!tab->stripe) {
    free(tab);
    return ORDO_ENOMEM;
  }
  memset(tab->stripe, 0, sizeof(ordo__stripe) * opts->stripes);
  TAILQ_INIT(&tab->waiters);
  /* The engine's critical sections are a few hundred instructions: a
   * mutex that spins a little before it sleeps keeps a thread that finds
   * one busy off the futex path, where a preempted holder would cost a
   * system call and a context switch per hand-over. */
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
  for (unsigned i = 0; i < opts->stripes; i++) {
    ordo__stripe *st = &tab->stripe[i];
    pthread_mutex_init(&st->mu, &ma);
    TAILQ_INIT(&st->empty);
    st->bshift = (uint32_t)__builtin_ctz(opts->stripes);
    ordo__bview *bk = bview_new(INITIAL_BUCKETS);
    atomic_init(&st->bk, bk);
    if (!bk) {
      tab->opts.stripes = i + 1;
      pthread_mutexattr_destroy(&ma);
      ordo__table_destroy(tab);
      return ORDO_ENOMEM;
    }
  }
  pthread_mutex_init(&tab->wait_mu.m, &ma);
  pthread_mutexattr_destroy(&ma);
  ordo__mutex_init(&tab->timer_mu);
  ordo__mutex_init(&tab->own_mu);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&tab->timer_cv, &ca);
  pthread_condattr_destroy(&ca);
  if (ordo__detect_create(tab) != 0) {
    ordo__table_destroy(tab);
    return ORDO_ENOMEM;
  }
  *out = tab;
  return 0;
}

void ordo__table_destroy(ordo__table *tab) {
  if (!tab)
    return;
  ordo__mutex_lock(&tab->timer_mu);
  bool started = tab->timer_started;
  tab->timer_stop = true;
  pthread_cond_signal(&tab->timer_cv);
  ordo__mutex_unlock(&tab->timer_mu);
  if (started)
    pthread_join(tab->timer_thr, NULL);
  for (unsigned i = 0; i < tab->opts.stripes; i++) {
    ordo__stripe *st = &tab->stripe[i];
    ordo__bview *bk = stripe_bk(st);
    for (uint32_t b = 0; bk && b < bk->n; b++) {
      ordo__lock *l = atomic_load_explicit(&bk->slot[b], RELAXED);
      while (l) {
        ordo__lock *next = next_of(l);
        if (!from_slab(l->klen))
          free(l);
        l = next;
      }
    }
    for (unsigned c = ORDO__SLAB_CLASSES; c < ORDO__KCLASSES; c++) {
      while (st->grave[c]) {
        ordo__lock *l = st->grave[c];
        st->grave[c] = l->gnext;
        free(l);
      }
    }
    while (st->slab) {
      ordo__slab *c = st->slab;
      st->slab = c->next;
      free(c);
    }
    while (bk) {
      ordo__bview *old = bk->old;
      free(bk);
      bk = old;
    }
    pthread_mutex_destroy(&st->mu);
  }
  free(tab->stripe);
  free(tab->heap);
  ordo__detect_destroy(tab);
  ordo__mutex_destroy(&tab->wait_mu);
  ordo__mutex_destroy(&tab->timer_mu);
  ordo__mutex_destroy(&tab->own_mu);
  pthread_cond_destroy(&tab->timer_cv);
  free(tab);
}

int ordo__owner_set_priority(ordo__owner *w, int priority) {
  ordo__table *tab = w->tab;
  int rc = ORDO_EBUSY;
  ordo__mutex_lock(&tab->wait_mu);
  if (atomic_load(&w->state) == ORDO__IDLE && w->nholds == 0) {
    w->priority = priority;
    rc = 0;
  }
  ordo__mutex_unlock(&tab->wait_mu);
  return rc;
}

int ordo__owner_pin(ordo__owner *w, uint64_t until_ns) {
  ordo__table *tab = w->tab;
  int rc = ORDO_ENOTHELD;
  ordo__mutex_lock(&tab->wait_mu);
  if (atomic_load_explicit(&w->state, memory_order_relaxed) == ORDO__WAITING) {
    w->pin_ns = until_ns;
    rc = 0;
    if (w->use_timer) {
      /* Re-keyed: a pin moves the deadline's alarm later, an unpin back
       * (to now, if the deadline has passed meanwhile). The timer thread
       * reads alarm_ns of the owners in its heap under timer_mu: out of the
       * heap first, then the new key, then back in. */
      ordo__mutex_lock(&tab->timer_mu);
      if (w->timer_idx >= 0)
        heap_remove(tab, w);
      ordo__mutex_unlock(&tab->timer_mu);
      w->alarm_ns = next_alarm(tab, w);
      if (w->alarm_ns != UINT64_MAX)
        timer_add(tab, w);
    }
  }
  ordo__mutex_unlock(&tab->wait_mu);
  return rc;
}

int ordo__txn_set_priority(ordo_txn_t *t, int priority) {
  ordo__owner *w = ordo__engine_owner(t);
  if (!w)
    return ORDO_ENOTSUP;
  int rc = ordo__owner_set_priority(w, priority);
  if (rc == 0)
    t->priority = priority;
  return rc;
}

void ordo__owner_init(ordo__table *tab, ordo__owner *w, uint64_t id,
                      int priority) {
  memset(w, 0, sizeof *w);
  TAILQ_INIT(&w->holds);
  w->tab = tab;
  w->id = id;
  w->priority = priority;
  w->timer_idx = -1;
  atomic_init(&w->state, ORDO__IDLE);
  /* Listed for ordo__table_stats, which sums the fast path's counts. */
  ordo__mutex_lock(&tab->own_mu);
  LIST_INSERT_HEAD(&tab->owners, w, olink);
  ordo__mutex_unlock(&tab->own_mu);
}

bool ordo__owner_fini(ordo__owner *w) {
  ordo__table *tab = w->tab;
  bool inside = false;
  for (;;) {
    ordo__abort_wait(w, ORDO_ECANCELED);
    /* An outcome that another thread's transition put on its fire list
     * before our abort could end the wait: let its callback return first,
     * since fire_all reads w until then (unless that callback is the one
     * running this: then fire_all frees w when it returns). The transition
     * counted its delivery under wait_mu, which abort_wait took after it. */
    if (delivering_now == w) {
      inside = true; /* the callback running this one cannot be waited */
    } else {
      while (atomic_load_explicit(&w->deliver, memory_order_acquire) >=
             ORDO__DELIVER_ONE)
        sched_yield();
    }
    /* The callback may have asked again: cancel that request too. */
    if (inside ||
        atomic_load_explicit(&w->state, memory_order_acquire) == ORDO__IDLE)
      break;
  }
  ordo__release_all(w);
  ordo__mutex_lock(&tab->own_mu);
  LIST_REMOVE(w, olink);
  ADD(tab->fast_acq, GET(w->fast_acq));
  ADD(tab->fast_rel, GET(w->fast_rel));
  ordo__mutex_unlock(&tab->own_mu);
  while (w->blocks) {
    struct ordo__hold_block *b = w->blocks;
    w->blocks = b->next;
    free(b);
  }
  free(w->ent);
  free(w->stripes);
  w->ent = NULL;
  w->stripes = NULL;
  if (inside) {
    /* fire_all reads deliver and on_free once the callback returns. */
    atomic_fetch_or_explicit(&w->deliver, ORDO__DELIVER_END,
                             memory_order_acq_rel);
    return false;
  }
  memset(w, 0, sizeof *w);
  return true;
}

/* Makes room for a request of n keys: entries, stripes and free holds are
 * allocated here, by the requester, so no grant ever allocates. */
static int reserve(ordo__owner *w, size_t n) {
  if (n > w->capent) {
    ordo__entry *e = realloc(w->ent, n * sizeof *e);
    if (!e)
      return ORDO_ENOMEM;
    w->ent = e;
    uint32_t *s = realloc(w->stripes, n * sizeof *s);
    if (!s)
      return ORDO_ENOMEM;
    w->stripes = s;
    w->capent = n;
  }
  if (w->nfree < n) {
    /* A block of at least what is missing, and as many as the owner has
     * already (at most HOLD_BLOCK_MAX), so an owner that holds many keys
     * makes few blocks and one that holds a few wastes little. */
    size_t k = w->nallocated < HOLD_BLOCK_MAX ? w->nallocated : HOLD_BLOCK_MAX;
    if (k < HOLD_BLOCK_MIN)
      k = HOLD_BLOCK_MIN;
    if (k < n - w->nfree)
      k = n - w->nfree;
    struct ordo__hold_block *b = calloc(1, sizeof *b + k * sizeof(ordo__hold));
    if (!b)
      return ORDO_ENOMEM;
    b->next = w->blocks;
    w->blocks = b;
    w->nallocated += k;
    for (size_t i = 0; i < k; i++) {
      b->h[i].fnext = w->hfree;
      w->hfree = &b->h[i];
    }
    w->nfree += k;
  }
  return 0;
}

/* wait_mu is tried with the stripes held (it comes before them in the lock
 * order, so only a try may wait for it there), or taken after letting them
 * go, and have_wait keeps which: a lock state the analysis cannot follow. */
int ordo__acquire(ordo__owner *w, const ordo_req_t *r, size_t n,
                  uint64_t deadline_ns, ordo__wait_kind kind, ordo__event_cb cb,
                  void *arg) ORDO_NO_THREAD_SAFETY_ANALYSIS {
  bool use_timer = kind == ORDO__WAIT_EVENT;
  ordo__table *tab = w->tab;
  if (atomic_load_explicit(&w->state, memory_order_relaxed) != ORDO__IDLE)
    return ORDO_EBUSY;
  int rc = 0;
  if (n > w->capent || n > w->nfree) {
    rc = reserve(w, n);
    if (rc)
      return rc;
  }
  /* The entries and the sorted, distinct stripe set (insertion: requests
   * are short). */
  w->nent = n;
  w->nstripes = 0;
  for (size_t i = 0; i < n; i++) {
    ordo__entry *e = &w->ent[i];
    e->qprev = e->qnext = NULL;
    e->lock = NULL;
    e->owner = w;
    e->mode = (uint8_t)r[i].mode;
    e->hash = hash_key(r[i].key, r[i].len);
    uint32_t sn = e->stripe = stripe_of(tab, e->hash);
    size_t j = w->nstripes;
    while (j > 0 && w->stripes[j - 1] > sn) {
      w->stripes[j] = w->stripes[j - 1];
      j--;
    }
    if (j > 0 && w->stripes[j - 1] == sn) {
      /* Already there: close the gap we opened. */
      for (; j < w->nstripes; j++)
        w->stripes[j] = w->stripes[j + 1];
      continue;
    }
    w->stripes[j] = sn;
    w->nstripes++;
  }

  bool have_wait = false;
  ordo__owner *fire = NULL;
  for (;;) {
    rule_ctx rx = {0, 0, have_wait, false};
    lock_stripes(tab, w);
    size_t made = 0;
    for (; made < n; made++) {
      ordo__entry *e = &w->ent[made];
      rc = lookup_or_create(tab, &tab->stripe[e->stripe], e->hash, r[made].key,
                            r[made].len, &e->lock);
      if (rc)
        break;
      const ordo__hold *held = find_hold(e->lock, w);
      e->covered = held && held->mode >= e->mode;
      if (held && held->count >= ORDO__HOLD_MAX) {
        rc = ORDO_ELIMIT; /* one more hold would not fit its count */
        made++;
        break;
      }
    }
    if (rc == 0 && grantable(tab, w, false, &rx)) {
      for (size_t i = 0; i < n; i++) {
        ordo__entry *e = &w->ent[i];
        grant_one(tab, &tab->stripe[e->stripe], w, e->lock, e->mode, &rx.now);
      }
      BUMP(tab->stripe[w->stripes[0]].acquired);
      unlock_stripes(tab, w);
      if (have_wait)
        ordo__mutex_unlock(&tab->wait_mu);
      return 0;
    }
    uint64_t now = rx.now;
    /* An answer the rules were unsure of without wait_mu is asked again
     * with it, before a deadline can end the call. */
    bool again = rc == 0 && rx.unsure && !have_wait;
    if (rc == 0 && !again && deadline_ns != ORDO_NO_DEADLINE) {
      if (!now)
        now = ordo__now_ns();
      if (deadline_ns <= now)
        rc = ORDO_ETIMEDOUT;
    }
    /* Queueing needs wait_mu, which comes before the stripes. */
    if (rc == 0 && !again && !have_wait) {
      if (ordo__mutex_trylock(&tab->wait_mu))
        have_wait = true;
      else
        again = true;
    }
    if (rc || again) {
      /* Give back what this attempt touched. */
      for (size_t i = 0; i < made; i++)
        retire(tab, &tab->stripe[w->ent[i].stripe], w->ent[i].lock);
      unlock_stripes(tab, w);
      if (rc) {
        if (have_wait)
          ordo__mutex_unlock(&tab->wait_mu);
        if (rc == ORDO_ETIMEDOUT)
          ADD(tab->timeouts, 1);
        else if (rc == ORDO_ELIMIT)
          ADD(tab->limits, 1);
        return rc;
      }
      /* wait_mu comes before the stripes: take it, then start again. */
      if (!have_wait)
        ordo__mutex_lock(&tab->wait_mu);
      have_wait = true;
      continue;
    }
    /* Queue the whole set, holding none of it (unless held from before). */
    if (!now)
      now = ordo__now_ns();
    w->enq_ns = now;
    w->deadline_ns = deadline_ns;
    w->pin_ns = 0;
    w->cb = cb;
    w->cbarg = arg;
    for (size_t i = 0; i < n; i++) {
      ordo__entry *e = &w->ent[i];
      ordo__lock *l = e->lock;
      ordo__queue_insert_after(l, ordo__queue_tail(l), e);
    }
    atomic_store_explicit(&w->state, ORDO__WAITING, memory_order_relaxed);
    unlock_stripes(tab, w);
    ADD(tab->waited, 1);
    ADD(tab->waiting, 1);
    waiting_add(tab, w);
    /* On the manual clock the tick keeps every deadline, a blocking
     * wait's too: its thread then sleeps without one (src/backend/mem.c). */
    w->use_timer = use_timer || ordo__clock_manual();
    w->pokeable = !use_timer;
    w->checked = false;
    w->logged = false;
    w->woken = false;
    w->alarm_ns = next_alarm(tab, w);
    bool ok = true;
    if (w->alarm_ns != UINT64_MAX) {
      ok = timer_add(tab, w);
    } else if (tab->opts.sweep_ms > 0 && !tab->timer_started) {
      /* The sweep runs on the timer thread: start it with the first wait. */
      ordo__mutex_lock(&tab->timer_mu);
      timer_start(tab);
      ordo__mutex_unlock(&tab->timer_mu);
    }
    if (!ok) {
      ordo__abort_locked(tab, w, ORDO_ENOMEM, &fire);
      /* No event for a call that fails: drop w from the fire list. */
      ORDO_ASSERT(fire == w);
      fire = w->fire_next;
      atomic_fetch_sub_explicit(&w->deliver, ORDO__DELIVER_ONE, RELAXED);
      ordo__mutex_unlock(&tab->wait_mu);
      fire_all(fire);
      return ORDO_ENOMEM;
    }
    /* A cycle through w needs an edge into w: someone waiting for a key w
     * holds. w is last in every queue it joined, so without holds there is
     * none, and the search is skipped (src/detect/README.md). */
    if (tab->opts.detect == ORDO_DETECT_IMMEDIATE && w->nholds > 0)
      ordo__detect_on_block(tab, w, &fire);
    /* A cycle through a wait on a future (an executor's) can run through
     * w though it holds nothing: the executor's hook looks (one branch
     * without executors). */
    if (tab->ext_block)
      ordo__detect_ext_block(tab, w, &fire);
    ordo__mutex_unlock(&tab->wait_mu);
    fire_all(fire);
    ordo__detect_deliver(tab);
    return ORDO_PENDING;
  }
}

int ordo__try_one(ordo__owner *w, const ordo_req_t *r) {
  ordo__table *tab = w->tab;
  if (!w->hfree ||
      atomic_load_explicit(&w->state, memory_order_relaxed) != ORDO__IDLE)
    return 1;
  uint32_t h = hash_key(r->key, r->len);
  ordo__stripe *st = &tab->stripe[stripe_of(tab, h)];
  pthread_mutex_lock(&st->mu);
  ordo__lock *l = lookup(st, h, r->key, r->len);
  /* Free and unqueued: what grantable() says yes to at once. */
  int rc = !l || (!l->listed && (l->holders || l->qhead));
  if (rc == 0) {
    uint64_t now = 0;
    grant_one(tab, st, w, l, r->mode, &now);
    BUMP(st->acquired);
  }
  pthread_mutex_unlock(&st->mu);
  return rc;
}

static void release_hold(ordo__table *tab, ordo__hold *h, bool *have_wait,
                         ordo__owner **fire);

/* The end of a run of release_hold calls: wait_mu let go if one took it,
 * then the events they queued. The analysis cannot follow a lock whose
 * state a flag keeps (have_wait): this and release_hold take and let go of
 * wait_mu as the flag says. */
static void releases_done(ordo__table *tab, bool have_wait,
                          ordo__owner *fire) ORDO_NO_THREAD_SAFETY_ANALYSIS {
  if (have_wait)
    ordo__mutex_unlock(&tab->wait_mu);
  fire_all(fire);
}

/* The fast path gives back the holds took[0..got), newest first. A hold
 * that another thread adopted meanwhile is a listed holder now: it joins
 * w's holds and is released the slow way. */
void ordo__fast_give_back(ordo__owner *w, ordo__hold **took, size_t got) {
  bool have_wait = false;
  ordo__owner *fire = NULL;
  while (got > 0) {
    ordo__hold *x = took[--got];
    uintptr_t mine = (uintptr_t)x;
    if (atomic_compare_exchange_strong_explicit(
            &x->lock->fast, &mine, ORDO__FAST_IDLE, memory_order_release,
            RELAXED)) {
      hold_free(w, x);
    } else {
      hold_link(w, x);
      x->quiet = 1;
      release_hold(w->tab, x, &have_wait, &fire);
    }
  }
  releases_done(w->tab, have_wait, fire);
}

int ordo__abort_wait(ordo__owner *w, int status) {
  ordo__table *tab = w->tab;
  ordo__owner *fire = NULL;
  ordo__mutex_lock(&tab->wait_mu);
  bool did = ordo__abort_locked(tab, w, status, &fire);
  ordo__mutex_unlock(&tab->wait_mu);
  fire_all(fire);
  return did ? 0 : ORDO_ENOTHELD;
}

int ordo__retry(ordo__owner *w) {
  ordo__table *tab = w->tab;
  ordo__owner *fire = NULL;
  int rc = ORDO_PENDING;
  ordo__mutex_lock(&tab->wait_mu);
  if (atomic_load_explicit(&w->state, memory_order_relaxed) != ORDO__WAITING) {
    ordo__mutex_unlock(&tab->wait_mu);
    return ORDO_ENOTHELD; /* ended meanwhile: its event is on its way */
  }
  w->woken = false;
  rule_ctx rx = {0, 0, true, false};
  ADD(tab->wake_asks, 1);
  lock_stripes(tab, w);
  bool ok = grantable(tab, w, true, &rx);
  if (ok)
    grant_waiter(tab, w, &rx.now);
  unlock_stripes(tab, w);
  if (ok) {
    timer_remove(tab, w);
    atomic_store_explicit(&w->state, ORDO__IDLE, memory_order_relaxed);
    rc = 0;
  } else {
    /* Lost the race to a request that ran meanwhile. A waiter behind us
     * that we held back (by being poked) may be able to go: pass it on.
     * Our entries keep these locks alive. */
    for (size_t i = 0; i < w->nent; i++)
      if (w->ent[i].lock->qhead)
        ordo__wake_queue(tab, w->ent[i].lock, &fire);
  }
  ordo__mutex_unlock(&tab->wait_mu);
  fire_all(fire);
  return rc;
}

/* Releases hold h whole. A hold the fast path made and nobody adopted goes
 * back with one compare-and-swap (the lock never left the empty list, and
 * has no waiters: queueing adopts). Otherwise this takes the stripe, and
 * wait_mu (once, kept in *have_wait) only when the lock has waiters to
 * hand it to. wait_mu is tried under the stripe, or taken after letting it
 * go, and kept in *have_wait for the caller: a lock state the analysis
 * cannot follow. */

static void release_hold(ordo__table *tab, ordo__hold *h, bool *have_wait,
                         ordo__owner **fire) ORDO_NO_THREAD_SAFETY_ANALYSIS {
  if (fast_release(tab, h))
    return;
  ordo__lock *l = h->lock;
  ordo__stripe *st = lock_stripe(tab, l);
  pthread_mutex_lock(&st->mu);
  inflate(st, l);
  if (l->qhead && !*have_wait) {
    if (!ordo__mutex_trylock(&tab->wait_mu)) {
      pthread_mutex_unlock(&st->mu);
      ordo__mutex_lock(&tab->wait_mu);
      pthread_mutex_lock(&st->mu);
    }
    *have_wait = true;
  }
  bool waiters = l->qhead != NULL;
  drop_hold(tab, st, h);
  if (!waiters)
    retire(tab, st, l);
  pthread_mutex_unlock(&st->mu);
  if (waiters)
    ordo__wake_queue(tab, l, fire);
}

/* What ordo__release_all leaves to the slow path: the rest of w's holds. */
int ordo__release_rest(ordo__owner *w) {
  ordo__table *tab = w->tab;
  bool have_wait = false;
  ordo__owner *fire = NULL;
  int n = 0;
  ordo__hold *h;
  while ((h = TAILQ_LAST(&w->holds, ordo__hold_list))) {
    release_hold(tab, h, &have_wait, &fire);
    n++;
  }
  releases_done(tab, have_wait, fire);
  return n;
}

void ordo__release_holds_locked(ordo__table *tab, ordo__owner *w,
                                ordo__owner **fire) {
  bool have_wait = true;
  ordo__hold *h;
  while ((h = TAILQ_LAST(&w->holds, ordo__hold_list)))
    release_hold(tab, h, &have_wait, fire);
}

/* How many of an owner's newest holds ordo__release_one looks at before it
 * asks the stripe. */
#define RECENT_HOLDS 8

int ordo__release_one(ordo__owner *w, const void *key, size_t len) {
  ordo__table *tab = w->tab;
  uint32_t h = hash_key(key, len);
  /* A key just taken is usually among the owner's newest holds: a single
   * one goes back without the stripe when the fast path made it. (A hold's
   * lock is not reused while held, so its key may be read.) */
  int k = 0;
  for (ordo__hold *x = TAILQ_LAST(&w->holds, ordo__hold_list);
       x && k < RECENT_HOLDS; x = TAILQ_PREV(x, ordo__hold_list, tlink), k++) {
    ordo__lock *l = x->lock;
    if (hash_of(l) == h && l->klen == len && key_eq(l->key, key, len)) {
      if (x->count != 1)
        break;
      bool have_wait = false;
      ordo__owner *fire = NULL;
      release_hold(tab, x, &have_wait, &fire);
      releases_done(tab, have_wait, fire);
      return 0;
    }
  }
  ordo__stripe *st = &tab->stripe[stripe_of(tab, h)];
  pthread_mutex_lock(&st->mu);
  ordo__lock *l = lookup(st, h, key, len);
  ordo__hold *hd = l && !l->listed ? find_hold(l, w) : NULL;
  if (!hd) {
    idle_again(l);
    pthread_mutex_unlock(&st->mu);
    return ORDO_ENOTHELD;
  }
  if (hd->count > 1) {
    hd->count--;
    pthread_mutex_unlock(&st->mu);
    return 0;
  }
  pthread_mutex_unlock(&st->mu);
  /* Only this owner's thread releases its holds, so hd is still ours. */
  bool have_wait = false;
  ordo__owner *fire = NULL;
  release_hold(tab, hd, &have_wait, &fire);
  releases_done(tab, have_wait, fire);
  return 0;
}

/* h's fencing token, drawn now if the fast path granted h (caller is h's
 * owner, or holds h's stripe when locked is true). */
static uint64_t hold_fence(ordo__table *tab, ordo__hold *h, bool locked) {
  if (h->fence)
    return h->fence;
  ordo__stripe *st = lock_stripe(tab, h->lock);
  if (!locked)
    pthread_mutex_lock(&st->mu);
  if (!h->fence)
    h->fence = ++st->fence;
  uint64_t f = h->fence;
  if (!locked)
    pthread_mutex_unlock(&st->mu);
  return f;
}

void ordo__owner_each_hold(ordo__owner *w, ordo__hold_fn fn, void *arg) {
  ordo__mutex_lock(&w->tab->wait_mu);
  ordo__hold *h;
  TAILQ_FOREACH(h, &w->holds, tlink)
  fn(arg, h->lock->key, h->lock->klen, (ordo_mode_t)h->mode,
     hold_fence(w->tab, h, false), h->count);
  ordo__mutex_unlock(&w->tab->wait_mu);
}

bool ordo__owner_holds_any(ordo__owner *w, const ordo_req_t *r, size_t n) {
  /* Its own thread, waiting for nothing: nobody else changes its holds
   * (only a waiting owner is ever made a victim), and a held key's lock
   * object is not evicted. A few holds are walked; past them each key is
   * looked up (one stripe mutex a key), so the cost stays O(n). */
  if (w->nholds == 0)
    return false;
  if (w->nholds > 16) {
    for (size_t i = 0; i < n; i++)
      if (ordo__held(w, r[i].key, r[i].len, NULL, NULL) > 0)
        return true;
    return false;
  }
  ordo__hold *h;
  TAILQ_FOREACH(h, &w->holds, tlink)
  for (size_t i = 0; i < n; i++)
    if (h->lock->klen == r[i].len &&
        memcmp(h->lock->key, r[i].key, r[i].len) == 0)
      return true;
  return false;
}

size_t ordo__owner_nholds(ordo__owner *w) {
  ordo__mutex_lock(&w->tab->wait_mu);
  size_t n = w->nholds;
  ordo__mutex_unlock(&w->tab->wait_mu);
  return n;
}

int ordo__held(ordo__owner *w, const void *key, size_t len, ordo_mode_t *mode,
               uint64_t *fence) {
  ordo__table *tab = w->tab;
  uint32_t h = hash_key(key, len);
  ordo__stripe *st = &tab->stripe[stripe_of(tab, h)];
  int count = 0;
  pthread_mutex_lock(&st->mu);
  ordo__lock *l = lookup(st, h, key, len);
  ordo__hold *hd = l && !l->listed ? find_hold(l, w) : NULL;
  if (hd) {
    count = (int)hd->count;
    if (mode)
      *mode = (ordo_mode_t)hd->mode;
    if (fence)
      *fence = hold_fence(tab, hd, true);
  }
  idle_again(l);
  pthread_mutex_unlock(&st->mu);
  return count;
}

void ordo__table_stats(ordo__table *tab, ordo_stats_t *out) {
  memset(out, 0, sizeof *out);
  for (unsigned i = 0; i < tab->opts.stripes; i++) {
    out->acquired += GET(tab->stripe[i].acquired);
    out->released += GET(tab->stripe[i].released);
  }
  out->acquired += GET(tab->acquired_w);
  ordo__mutex_lock(&tab->own_mu);
  out->acquired += GET(tab->fast_acq);
  out->released += GET(tab->fast_rel);
  ordo__owner *w;
  LIST_FOREACH(w, &tab->owners, olink) {
    out->acquired += GET(w->fast_acq);
    out->released += GET(w->fast_rel);
  }
  ordo__mutex_unlock(&tab->own_mu);
  out->waited = GET(tab->waited);
  out->timeouts = GET(tab->timeouts);
  out->canceled = GET(tab->canceled);
  out->deadlocks = GET(tab->deadlocks);
  out->reorders = GET(tab->reorders);
  out->sweep_finds = GET(tab->sweep_finds);
  out->long_waits = GET(tab->long_waits);
  for (unsigned i = 0; i < ORDO_VICTIM__COUNT; i++)
    out->victims[i] = GET(tab->victims[i]);
  out->limits = GET(tab->limits);
  out->wakeups = GET(tab->wakeups);
  out->pokes = GET(tab->pokes);
  out->locks = GET(tab->live);
  out->waiting = GET(tab->waiting);
  out->max_wait_us = GET(tab->max_wait_us);
  for (unsigned i = 0; i < ORDO_HIST_BUCKETS; i++) {
    out->wait_hist[i] = GET(tab->wait_hist[i]);
    out->hold_hist[i] = GET(tab->hold_hist[i]);
    out->detect_hist[i] = GET(tab->detect_hist[i]);
  }
}

/* ---- Dump -----------------------------------------------------------------
 */

static void put_key(FILE *f, const uint8_t *k, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\')
      fputc(k[i], f);
    else
      fprintf(f, "\\x%02x", k[i]);
  }
}

static bool timed_lock(pthread_mutex_t *mu) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 2;
  return pthread_mutex_timedlock(mu, &ts) == 0;
}

/* wait_mu within 2 s, for the dump: true when taken. */
static bool wait_mu_timed(ordo__table *tab)
    ORDO_TRY_ACQUIRE(true, tab->wait_mu) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 2;
  return ordo__mutex_timedlock(&tab->wait_mu, &ts);
}

/* The analysis cannot follow a lock taken maybe, as have_wait says: a dump
 * takes what it can within its bound. */
void ordo__table_dump(ordo__table *tab, int fd) ORDO_NO_THREAD_SAFETY_ANALYSIS {
  /* A dump serves watchdogs of tests that may already be stuck: it waits
   * at most 2 s for each engine lock and says so when it gives up. */
  int dfd = dup(fd);
  FILE *f = dfd >= 0 ? fdopen(dfd, "w") : NULL;
  if (!f) {
    if (dfd >= 0)
      close(dfd);
    return;
  }
  bool have_wait = wait_mu_timed(tab);
  fprintf(f,
          "ordo lock table: %" PRIu64 " lock objects, %" PRIu64 " waiting%s\n",
          GET(tab->live), GET(tab->waiting),
          have_wait ? "" : " (wait_mu is held elsewhere; queues may move)");
  for (unsigned s = 0; s < tab->opts.stripes; s++) {
    ordo__stripe *st = &tab->stripe[s];
    if (!timed_lock(&st->mu)) {
      fprintf(f, "  stripe %u: mutex held elsewhere for 2 s, skipped\n", s);
      continue;
    }
    ordo__bview *bk = stripe_bk(st);
    for (uint32_t b = 0; b < bk->n; b++) {
      for (ordo__lock *l = atomic_load_explicit(&bk->slot[b], RELAXED); l;
           l = next_of(l)) {
        inflate(st, l); /* a fast-path holder is listed from now on */
        if (l->listed || (!l->holders && !l->qhead))
          continue;
        fprintf(f, "  key \"");
        put_key(f, l->key, l->klen);
        fprintf(f, "\" (stripe %u)\n    holders:", s);
        for (ordo__hold *h = l->holders; h; h = h->lnext)
          fprintf(f, " txn %" PRIu64 " %s x%u", h->owner->id,
                  h->mode == ORDO_MODE_X ? "X" : "S", h->count);
        fprintf(f, "\n    queue:");
        for (ordo__entry *e = l->qhead; e; e = e->qnext)
          fprintf(f, " txn %" PRIu64 " %s", e->owner->id,
                  e->mode == ORDO_MODE_X ? "X" : "S");
        fprintf(f, "\n");
      }
    }
    pthread_mutex_unlock(&st->mu);
  }
  if (have_wait)
    ordo__mutex_unlock(&tab->wait_mu);
  fclose(f);
}

/*
 * ordo__table_key_each -- one key's holders, then its waiters in queue
 * order, for a lock server's HOLDERS: fn(arg, owner id, mode, fence, count,
 * waiting) for each, with fence the holder's token (drawn now if the fast
 * path granted it, as ordo__held does) and 0 for a waiter. It takes the
 * key's stripe mutex alone (holders and queue are written under it; the
 * queue under wait_mu as well), so it costs the key's own holders and
 * waiters, never the table's size, and keeps the lock order (no wait_mu).
 * lookup() moves a fast-path holder to the slow path first, so the holder
 * list is the truth. fn runs under the stripe mutex and must not call into
 * the engine. Added for issue 18 item 5 (ordod's HOLDERS).
 */
void ordo__table_key_each(ordo__table *tab, const void *key, size_t len,
                          ordo__key_fn fn, void *arg) {
  uint32_t h = hash_key(key, len);
  ordo__stripe *st = &tab->stripe[stripe_of(tab, h)];
  pthread_mutex_lock(&st->mu);
  ordo__lock *l = lookup(st, h, key, len);
  if (l && !l->listed) {
    for (ordo__hold *hd = l->holders; hd; hd = hd->lnext)
      fn(arg, hd->owner->id, hd->mode, hold_fence(tab, hd, true), hd->count,
         false);
    for (ordo__entry *e = l->qhead; e; e = e->qnext)
      fn(arg, e->owner->id, e->mode, 0, 0, true);
  }
  idle_again(l);
  pthread_mutex_unlock(&st->mu);
}
