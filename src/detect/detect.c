/*
 * detect.c -- deadlock detection and recovery for the lock engine: the
 * wait-for graph read straight off the lock table's holders and queues, the
 * cycle search, the resolution of soft cycles by reordering a queue, victim
 * policies, deadlock records, the deadlock-rate alarm, the long-wait log and
 * the graph dump. See README.md.
 *
 * The graph is never stored: a waiting owner's out-edges are computed when a
 * search reaches it (as PostgreSQL's FindLockCycle does), to every owner that
 * holds one of its keys in a conflicting mode (hard edges) and to every
 * owner queued ahead of it on one of its keys in a conflicting mode (soft
 * edges). Everything here runs under the table's wait_mu, which freezes
 * every queue and every waiting owner's holds; holders of a lock are read
 * under that lock's stripe mutex (lock order: wait_mu, then stripe). The
 * memory a search needs is allocated when the table is made, so detection
 * never fails for want of it: a search that would outgrow it stops and
 * says so, and the sweep and the timeouts remain.
 *
 * Interface: ordo__detect_create, ordo__detect_destroy,
 * ordo__detect_on_block, ordo__detect_sweep, ordo__detect_log_wait,
 * ordo__detect_deliver, ordo__table_graph, ordo__table_deadlocks,
 * ordo__table_on_deadlock, ordo__table_on_alarm.
 */
#include "core/table_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ARENA_EDGES 16384 /* edges one search can hold */
#define MAX_FRAMES 4096   /* depth of one search */
#define CYCLE_MAX 256     /* members of one cycle we can resolve */
#define MAX_REORDERS 8    /* queue moves tried for one soft cycle */

typedef struct dedge {
  ordo__owner *to;
  ordo__lock *lock;
  uint8_t mode; /* the mode the waiter asks for */
  uint8_t soft; /* to is queued ahead, rather than holding */
} dedge;

typedef struct dframe {
  ordo__owner *u;
  size_t begin, next, end; /* u's out-edges in the arena */
} dframe;

typedef struct ordo__detect {
  /* All of it is guarded by the table's wait_mu, but npending, which is
   * also read without it to skip an empty delivery. */
  dedge *arena;
  dframe *frames;
  uint64_t epoch;
  bool truncated; /* the last search ran out of memory */
  /* The cycle the last search found: from[i] waits for edge[i].to. */
  ordo__owner *cfrom[CYCLE_MAX];
  dedge cedge[CYCLE_MAX];
  size_t ncycle;

  ordo_deadlock_t *ring; /* the last deadlock_history records */
  unsigned ring_cap, ring_n, ring_next;
  uint64_t seq;
  /* Records waiting for their callback: reporting, apart from detection,
   * so this grows as needed (a record it cannot hold is counted in
   * undelivered instead). */
  ordo_deadlock_t *pending;
  size_t cappending;
  _Atomic size_t npending;
  uint64_t undelivered;
  ordo_deadlock_cb cb;
  void *cb_arg;

  /* The alarm: deadlocks per second over the window, in a ring. */
  ordo_alarm_cb acb;
  void *acb_arg;
  uint32_t *bucket;
  unsigned nbucket;
  uint64_t bucket_sec; /* the second the newest bucket counts */
  bool alarm_raised;
  _Atomic bool alarm_pending; /* also read without wait_mu, as a hint */
  double alarm_rate;
  char classes[256]; /* key classes of the window's cycles */
} ordo__detect;

int ordo__detect_create(ordo__table *tab) {
  ordo__detect *d = calloc(1, sizeof *d);
  if (!d)
    return ORDO_ENOMEM;
  d->arena = malloc(ARENA_EDGES * sizeof *d->arena);
  d->frames = malloc(MAX_FRAMES * sizeof *d->frames);
  d->ring_cap = tab->opts.deadlock_history ? tab->opts.deadlock_history : 1;
  d->ring = calloc(d->ring_cap, sizeof *d->ring);
  d->nbucket = tab->opts.alarm_window_s ? tab->opts.alarm_window_s : 60;
  d->bucket = calloc(d->nbucket, sizeof *d->bucket);
  atomic_init(&d->npending, 0);
  atomic_init(&d->alarm_pending, false);
  tab->det = d;
  if (!d->arena || !d->frames || !d->ring || !d->bucket)
    return ORDO_ENOMEM;
  return 0;
}

void ordo__detect_destroy(ordo__table *tab) {
  ordo__detect *d = tab->det;
  if (!d)
    return;
  free(d->arena);
  free(d->frames);
  free(d->ring);
  free(d->bucket);
  free(d->pending);
  free(d);
  tab->det = NULL;
}

/* ---- The graph ------------------------------------------------------------
 */

static bool waiting(const ordo__owner *u) {
  return atomic_load_explicit(&u->state, memory_order_relaxed) == ORDO__WAITING;
}

/* Appends u's out-edges to the arena at *pos; false if they did not fit.
 * Edges to owners this search has finished with are left out: nothing
 * reachable from them closes a cycle (or the search would have found it). */
static bool expand(ordo__table *tab, ordo__detect *d, ordo__owner *u,
                   size_t *pos) {
  bool fit = true;
  const uint64_t done = d->epoch | 1;
  for (size_t i = 0; i < u->nent; i++) {
    ordo__entry *e = &u->ent[i];
    ordo__lock *l = e->lock;
    ordo__stripe *st = &tab->stripe[e->stripe];
    /* Holders change under the stripe alone (a grant that barges past
     * the queue), so read them under it. */
    pthread_mutex_lock(&st->mu);
    for (ordo__hold *h = l->holders; h; h = h->lnext) {
      if (h->owner == u || !conflicts(e->mode, h->mode) ||
          h->owner->visit == done)
        continue;
      if (*pos == ARENA_EDGES) {
        fit = false;
        break;
      }
      d->arena[(*pos)++] = (dedge){h->owner, l, e->mode, 0};
    }
    pthread_mutex_unlock(&st->mu);
    /* The queue ahead of u is frozen by wait_mu. Walk it from u towards
     * the head and stop after the first X: an X waiter conflicts with
     * everyone ahead of it, so they are all reachable through it, and a
     * hot key's queue of n costs O(n) per search instead of O(n^2). */
    for (ordo__entry *q = ordo__queue_prev(l, e); q;
         q = ordo__queue_prev(l, q)) {
      if (q->owner == u || !conflicts(e->mode, q->mode))
        continue;
      if (q->owner->visit != done) {
        if (*pos == ARENA_EDGES) {
          fit = false;
          break;
        }
        d->arena[(*pos)++] = (dedge){q->owner, l, e->mode, 1};
      }
      if (q->mode == ORDO_MODE_X)
        break;
    }
  }
  return fit;
}

/*
 * expand_back -- u's in-edges: who waits for u. An owner queued on a key u
 * holds, in a conflicting mode (hard), and one queued behind u on a key u
 * waits for, in a conflicting mode (soft). Only waiting owners are expanded
 * this way, and their holds are frozen by wait_mu as their requests are.
 * Each edge is stored as {to = the waiter, the key, the waiter's mode}.
 */
static bool expand_back(ordo__detect *d, ordo__owner *u, size_t *pos,
                        bool hard_only) {
  const uint64_t done = d->epoch | 1;
  for (const ordo__hold *h = u->hhead; h; h = h->tnext) {
    for (ordo__entry *q = ordo__held_queue(h); q; q = q->qnext) {
      if (q->owner == u || !conflicts(q->mode, h->mode) ||
          q->owner->visit == done)
        continue;
      if (*pos == ARENA_EDGES)
        return false;
      d->arena[(*pos)++] = (dedge){q->owner, h->lock, q->mode, 0};
    }
  }
  for (size_t i = 0; i < u->nent && !hard_only; i++) {
    ordo__entry *e = &u->ent[i];
    for (ordo__entry *q = e->qnext; q; q = q->qnext) {
      if (q->owner == u || !conflicts(q->mode, e->mode) ||
          q->owner->visit == done)
        continue;
      if (*pos == ARENA_EDGES)
        return false;
      d->arena[(*pos)++] = (dedge){q->owner, e->lock, q->mode, 1};
    }
  }
  return true;
}

/*
 * dfs_back -- is there a path of in-edges from root back to root, i.e. a
 * cycle through root? Searching backwards suits the check made when root
 * has just blocked: root is last in every queue it joined, so its only
 * in-edges come from waiters on the keys it holds, usually few, whereas its
 * out-edges can run down a hot key's whole queue. The cycle is stored
 * forwards in d->c*.
 */
static bool dfs_back(ordo__table *tab, ordo__detect *d, ordo__owner *root,
                     bool hard_only) {
  ORDO_UNUSED(tab);
  size_t nframes = 0, pos = 0;
  root->visit = d->epoch;
  d->frames[0] = (dframe){root, 0, 0, 0};
  if (!expand_back(d, root, &pos, hard_only))
    d->truncated = true;
  d->frames[0].end = pos;
  nframes = 1;
  while (nframes > 0) {
    dframe *f = &d->frames[nframes - 1];
    if (f->next == f->end) {
      pos = f->begin;
      f->u->visit = d->epoch | 1;
      nframes--;
      continue;
    }
    dedge *g = &d->arena[f->next++];
    ordo__owner *v = g->to; /* v waits for f->u */
    if (v == root) {
      /* Frame i's current edge says: frames[i+1].u (or root) waits for
       * frames[i].u. Turn it round. */
      d->ncycle = 0;
      for (size_t i = 0; i < nframes && d->ncycle < CYCLE_MAX; i++) {
        dedge *e = &d->arena[d->frames[i].next - 1];
        d->cfrom[d->ncycle] = e->to;
        d->cedge[d->ncycle] =
            (dedge){d->frames[i].u, e->lock, e->mode, e->soft};
        d->ncycle++;
      }
      return true;
    }
    if ((v->visit | 1) == (d->epoch | 1) || !waiting(v))
      continue;
    if (nframes == MAX_FRAMES) {
      d->truncated = true;
      continue;
    }
    v->visit = d->epoch;
    size_t begin = pos;
    if (!expand_back(d, v, &pos, hard_only))
      d->truncated = true;
    d->frames[nframes++] = (dframe){v, begin, begin, pos};
  }
  return false;
}

/* Copies the cycle that runs from frame k up the stack and back into
 * d->cfrom/d->cedge. */
static void take_cycle(ordo__detect *d, size_t k, size_t nframes) {
  d->ncycle = 0;
  for (size_t i = k; i < nframes && d->ncycle < CYCLE_MAX; i++) {
    d->cfrom[d->ncycle] = d->frames[i].u;
    d->cedge[d->ncycle] = d->arena[d->frames[i].next - 1];
    d->ncycle++;
  }
}

/*
 * dfs -- a depth-first search of the wait-for graph from root, following
 * out-edges, for any cycle it can reach (the sweep): an edge to an owner
 * on the search stack closes one. Nodes already reached in this epoch are
 * not entered again: O(nodes + edges) per epoch. Returns true with the
 * cycle in d->c*.
 */
static bool dfs(ordo__table *tab, ordo__detect *d, ordo__owner *root) {
  size_t nframes = 0, pos = 0;
  root->visit = d->epoch;
  d->frames[0] = (dframe){root, 0, 0, 0};
  if (!expand(tab, d, root, &pos))
    d->truncated = true;
  d->frames[0].end = pos;
  nframes = 1;
  while (nframes > 0) {
    dframe *f = &d->frames[nframes - 1];
    if (f->next == f->end) {
      pos = f->begin;             /* its edges are spent: reuse the space */
      f->u->visit = d->epoch | 1; /* done: odd marks "off the stack" */
      nframes--;
      continue;
    }
    ordo__owner *v = d->arena[f->next++].to;
    if (v->visit == d->epoch) {
      /* On the stack: the cycle runs from v's frame to here. */
      for (size_t k = 0; k < nframes; k++)
        if (d->frames[k].u == v) {
          take_cycle(d, k, nframes);
          return true;
        }
    }
    if ((v->visit | 1) == (d->epoch | 1) || !waiting(v))
      continue; /* seen in this epoch, or not waiting: no out-edges */
    if (nframes == MAX_FRAMES) {
      d->truncated = true;
      continue;
    }
    v->visit = d->epoch;
    size_t begin = pos;
    if (!expand(tab, d, v, &pos))
      d->truncated = true;
    d->frames[nframes++] = (dframe){v, begin, begin, pos};
  }
  return false;
}

/* Epochs are even; odd values mark owners whose search is finished. */
static void new_epoch(ordo__detect *d) {
  d->epoch += 2;
}

static bool cycle_through(ordo__table *tab, ordo__detect *d, ordo__owner *w) {
  if (!waiting(w))
    return false;
  new_epoch(d);
  return dfs_back(tab, d, w, false);
}

/* A cycle through w of hard edges alone: holders waiting for each other,
 * which no queue order can undo. */
static bool hard_cycle_through(ordo__table *tab, ordo__detect *d,
                               ordo__owner *w) {
  if (!waiting(w))
    return false;
  new_epoch(d);
  return dfs_back(tab, d, w, true);
}

/* ---- Soft cycles: reorder a queue -------------------------------------------
 */

static ordo__entry *entry_on(ordo__owner *u, const ordo__lock *l) {
  for (size_t i = 0; i < u->nent; i++)
    if (u->ent[i].lock == l)
      return &u->ent[i];
  return NULL;
}

typedef struct move {
  ordo__lock *lock;
  ordo__entry *e, *old_prev;
} move;

/*
 * reorder -- the cycle closes through queue order: try moving waiters ahead
 * of the ones they wait behind, one soft edge at a time, until no cycle
 * through any moved member remains (PostgreSQL's deadlock-soft rule). Only
 * members of the cycle move, and only past each other: nobody outside the
 * cycle is overtaken, so every starving waiter keeps its reservation
 * against everyone else. On failure every move is undone.
 */
static bool reorder(ordo__table *tab, ordo__detect *d, ordo__owner *w,
                    ordo__owner **fire) {
  move mv[MAX_REORDERS];
  size_t nm = 0;
  for (;;) {
    size_t k = 0;
    while (k < d->ncycle && !d->cedge[k].soft)
      k++;
    if (k == d->ncycle || nm == MAX_REORDERS)
      break; /* a hard cycle, or too many moves: abort someone */
    ordo__owner *a = d->cfrom[k], *b = d->cedge[k].to;
    ordo__lock *l = d->cedge[k].lock;
    ordo__entry *ea = entry_on(a, l), *eb = entry_on(b, l);
    if (NEVER(!ea || !eb))
      break;
    ordo__stripe *st = lock_stripe(tab, l);
    pthread_mutex_lock(&st->mu);
    mv[nm++] = (move){l, ea, ordo__queue_prev(l, ea)};
    ordo__queue_unlink(l, ea);
    ordo__queue_insert_after(l, ordo__queue_prev(l, eb), ea);
    l->reordered = 1;
    pthread_mutex_unlock(&st->mu);
    bool cycle = cycle_through(tab, d, w);
    for (size_t i = 0; !cycle && i < nm; i++) {
      /* A move gives the overtaken waiter a new edge: look from it too. */
      ordo__entry *e = mv[i].e;
      cycle = cycle_through(tab, d, e->owner);
      for (ordo__entry *q = e->qnext; !cycle && q; q = q->qnext)
        cycle = cycle_through(tab, d, q->owner);
    }
    if (!cycle) {
      ADD(tab->reorders, (uint64_t)nm);
      /* Waiters that moved up may be grantable now. */
      for (size_t i = 0; i < nm; i++)
        if (mv[i].lock->qhead)
          ordo__wake_queue(tab, mv[i].lock, fire);
      return true;
    }
  }
  while (nm > 0) {
    move *m = &mv[--nm];
    ordo__stripe *st = lock_stripe(tab, m->lock);
    pthread_mutex_lock(&st->mu);
    ordo__queue_unlink(m->lock, m->e);
    ordo__queue_insert_after(m->lock, m->old_prev, m->e);
    pthread_mutex_unlock(&st->mu);
  }
  return false;
}

/* ---- Victims ------------------------------------------------------------
 */

static bool worse(const ordo__table *tab, ordo__owner *a, ordo__owner *b,
                  ordo_victim_t policy) {
  /* Is a a better victim than b? Effective priority first: each abort
   * adds one (aging), so a txn that keeps losing climbs out of reach. */
  long pa = (long)a->priority + (long)a->aborts;
  long pb = (long)b->priority + (long)b->aborts;
  if (pa != pb)
    return pa < pb;
  ORDO_UNUSED(tab);
  switch (policy) {
  case ORDO_VICTIM_OLDEST:
    return a->id < b->id;
  case ORDO_VICTIM_FEWEST_LOCKS:
    if (a->nholds != b->nholds)
      return a->nholds < b->nholds;
    return a->id > b->id;
  case ORDO_VICTIM_LEAST_WORK: {
    uint64_t ca = atomic_load_explicit(&a->cost, memory_order_relaxed);
    uint64_t cb = atomic_load_explicit(&b->cost, memory_order_relaxed);
    if (ca != cb)
      return ca < cb;
    return a->id > b->id;
  }
  case ORDO_VICTIM_NEAREST_DEADLINE:
    if (a->deadline_ns != b->deadline_ns)
      return a->deadline_ns < b->deadline_ns;
    return a->id > b->id;
  case ORDO_VICTIM_YOUNGEST:
  case ORDO_VICTIM_LOWEST_PRIORITY:
  default:
    return a->id > b->id;
  }
}

static ordo__owner *choose_victim(ordo__table *tab, ordo__detect *d) {
  ordo_victim_t policy = tab->opts.victim;
  if (policy == ORDO_VICTIM_RANDOM) {
    /* Uniform among the members of the lowest effective priority. */
    long best = 0;
    size_t n = 0;
    for (size_t i = 0; i < d->ncycle; i++) {
      ordo__owner *u = d->cfrom[i];
      long p = (long)u->priority + (long)u->aborts;
      if (n == 0 || p < best) {
        best = p;
        n = 0;
      }
      if (p == best)
        n++;
    }
    size_t pick = (size_t)(ordo__rand64() % n);
    for (size_t i = 0; i < d->ncycle; i++) {
      ordo__owner *u = d->cfrom[i];
      if ((long)u->priority + (long)u->aborts == best && pick-- == 0)
        return u;
    }
  }
  ordo__owner *v = d->cfrom[0];
  for (size_t i = 1; i < d->ncycle; i++)
    if (worse(tab, d->cfrom[i], v, policy))
      v = d->cfrom[i];
  return v;
}

static void key_class(const ordo__table *tab, const ordo__lock *l, char *out,
                      size_t cap) {
  size_t n = 0;
  for (; n < l->klen && n + 1 < cap; n++) {
    uint8_t c = l->key[n];
    if (c == (uint8_t)tab->opts.order_sep && n > 0)
      break;
    out[n] = (c >= 0x20 && c < 0x7f && c != ',') ? (char)c : '?';
  }
  out[n] = 0;
}

/* Counts a deadlock in the alarm's window and raises the alarm when the
 * rate passes its threshold. */
static void alarm_count(ordo__table *tab, ordo__detect *d, uint64_t now) {
  if (!tab->opts.alarm_per_min)
    return;
  uint64_t sec = now / 1000000000u;
  if (sec > d->bucket_sec) {
    uint64_t gap = sec - d->bucket_sec;
    for (uint64_t i = 1; i <= gap && i <= d->nbucket; i++)
      d->bucket[(d->bucket_sec + i) % d->nbucket] = 0;
    d->bucket_sec = sec;
    if (gap >= d->nbucket)
      d->classes[0] = 0;
  }
  d->bucket[sec % d->nbucket]++;
  uint64_t total = 0;
  for (unsigned i = 0; i < d->nbucket; i++)
    total += d->bucket[i];
  double per_min = (double)total * 60.0 / (double)d->nbucket;
  /* The classes of this cycle join the window's list. */
  for (size_t i = 0; i < d->ncycle; i++) {
    char c[48];
    key_class(tab, d->cedge[i].lock, c, sizeof c);
    size_t cl = strlen(c);
    const char *p = d->classes;
    bool have = false;
    while (*p) {
      const char *q = strchr(p, ',');
      size_t len = q ? (size_t)(q - p) : strlen(p);
      if (len == cl && memcmp(p, c, cl) == 0)
        have = true;
      p += len + (q ? 1 : 0);
    }
    size_t used = strlen(d->classes);
    if (!have && used + cl + 2 < sizeof d->classes) {
      if (used)
        d->classes[used++] = ',';
      memcpy(d->classes + used, c, cl + 1);
    }
  }
  if (per_min >= (double)tab->opts.alarm_per_min) {
    if (!d->alarm_raised) {
      d->alarm_raised = true;
      d->alarm_pending = true;
      d->alarm_rate = per_min;
    }
  } else {
    d->alarm_raised = false;
  }
}

/* Fills a record of the current cycle. */
static void record(ordo__table *tab, ordo__detect *d, ordo__owner *victim,
                   bool by_sweep, uint64_t now, ordo_deadlock_t *r) {
  memset(r, 0, sizeof *r);
  r->seq = ++d->seq;
  r->time_ns = now;
  r->nedges = d->ncycle;
  r->policy = tab->opts.victim;
  r->victim = victim->id;
  r->found_by_sweep = by_sweep;
  for (size_t i = 0; i < d->ncycle && i < ORDO_DL_MAX_EDGES; i++) {
    ordo_dl_edge_t *e = &r->edge[i];
    const dedge *g = &d->cedge[i];
    e->from = d->cfrom[i]->id;
    e->to = g->to->id;
    e->key_len =
        g->lock->klen < ORDO_DL_KEY_MAX ? g->lock->klen : ORDO_DL_KEY_MAX;
    memcpy(e->key, g->lock->key, e->key_len);
    e->mode = (ordo_mode_t)g->mode;
    e->soft = g->soft;
  }
}

/*
 * resolve -- the current cycle (in d->c*): reorder if it closes through
 * queue order and a valid order exists; otherwise abort exactly one victim,
 * which loses its wait and every lock it holds before its event fires.
 */
static void resolve(ordo__table *tab, ordo__detect *d, ordo__owner *w,
                    bool by_sweep, ordo__owner **fire) {
  bool soft = false;
  for (size_t i = 0; i < d->ncycle; i++)
    soft |= d->cedge[i].soft;
  if (soft) {
    /* A cycle of holders alone runs through w as well? Then no order
     * helps, and its victim must come from it: a member that holds
     * nothing (on the cycle by queue order only) would be aborted for
     * nothing, and the holders' cycle found again. */
    if (!hard_cycle_through(tab, d, w)) {
      if (!cycle_through(tab, d, w))
        return;
      if (reorder(tab, d, w, fire))
        return;
      /* Undone: find the cycle again to pick its victim. */
      if (!cycle_through(tab, d, w))
        return;
    }
  }
  uint64_t now = ordo__now_ns();
  ordo__owner *v = choose_victim(tab, d);
  /* The cycle closed with the newest of its edges. */
  uint64_t last = 0;
  for (size_t i = 0; i < d->ncycle; i++)
    if (d->cfrom[i]->enq_ns > last)
      last = d->cfrom[i]->enq_ns;
  ordo_deadlock_t *r = &d->ring[d->ring_next];
  record(tab, d, v, by_sweep, now, r);
  d->ring_next = (d->ring_next + 1) % d->ring_cap;
  if (d->ring_n < d->ring_cap)
    d->ring_n++;
  size_t np = atomic_load_explicit(&d->npending, memory_order_relaxed);
  if (d->cb) {
    if (np == d->cappending) {
      size_t cap = d->cappending ? d->cappending * 2 : 8;
      ordo_deadlock_t *p = realloc(d->pending, cap * sizeof *p);
      if (p) {
        d->pending = p;
        d->cappending = cap;
      }
    }
    if (np < d->cappending) {
      d->pending[np] = *r;
      atomic_store_explicit(&d->npending, np + 1, memory_order_relaxed);
    } else {
      d->undelivered++;
    }
  }
  alarm_count(tab, d, now);
  ADD(tab->deadlocks, 1);
  ADD(tab->victims[tab->opts.victim], 1);
  v->aborts++;
  v->dl_edge_ns = last;
  ordo__abort_locked(tab, v, ORDO_EDEADLK, fire);
  ordo__release_holds_locked(tab, v, fire);
}

/* Can anyone wait for w? Only an owner queued on a key w holds (a hard
 * edge into w), since w itself is last in every queue it just joined. */
static bool awaited(const ordo__owner *w) {
  for (const ordo__hold *h = w->hhead; h; h = h->tnext)
    for (const ordo__entry *q = ordo__held_queue(h); q; q = q->qnext)
      if (q->owner != w)
        return true;
  return false;
}

void ordo__detect_on_block(ordo__table *tab, ordo__owner *w,
                           ordo__owner **fire) {
  ordo__detect *d = tab->det;
  /* Right after w blocked, no edge into w means no cycle through it. A
   * delayed check (w->checked is set) comes when others may have queued
   * behind w, and always searches. */
  if (!w->checked && !awaited(w))
    return;
  /* Each round breaks one cycle through w; a cycle's victim may be w. */
  for (int round = 0; round < 64 && cycle_through(tab, d, w); round++)
    resolve(tab, d, w, false, fire);
}

void ordo__detect_sweep(ordo__table *tab, ordo__owner **fire) {
  ordo__detect *d = tab->det;
  for (int round = 0; round < 64; round++) {
    new_epoch(d);
    bool found = false;
    for (ordo__owner *u = tab->whead; u && !found; u = u->wnext) {
      if ((u->visit | 1) == (d->epoch | 1))
        continue;
      found = dfs(tab, d, u);
    }
    if (!found)
      return;
    /* Missed by the immediate check (or delayed mode's is not due). */
    ADD(tab->sweep_finds, 1);
    resolve(tab, d, d->cfrom[0], true, fire);
  }
}

/* ---- Long waits ----------------------------------------------------------
 */

static void put_key(FILE *f, const uint8_t *k, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\' && k[i] != '"')
      fputc(k[i], f);
    else
      fprintf(f, "\\x%02x", k[i]);
  }
}

void ordo__detect_log_wait(ordo__table *tab, ordo__owner *w) {
  /* As PostgreSQL's log_lock_waits: who waits, for what, behind whom. */
  ADD(tab->long_waits, 1);
  uint64_t ms = (ordo__now_ns() - w->enq_ns) / 1000000u;
  flockfile(stderr);
  fprintf(stderr,
          "ordo: LOG: txn %" PRIu64 " still waiting after %" PRIu64
          " ms for %zu key(s)\n",
          w->id, ms, w->nent);
  for (size_t i = 0; i < w->nent; i++) {
    ordo__entry *e = &w->ent[i];
    ordo__lock *l = e->lock;
    ordo__stripe *st = &tab->stripe[e->stripe];
    fprintf(stderr, "ordo: LOG:   \"");
    put_key(stderr, l->key, l->klen);
    fprintf(stderr, "\" %s; holders:", e->mode == ORDO_MODE_X ? "X" : "S");
    pthread_mutex_lock(&st->mu);
    for (ordo__hold *h = l->holders; h; h = h->lnext)
      fprintf(stderr, " txn %" PRIu64 " %s", h->owner->id,
              h->mode == ORDO_MODE_X ? "X" : "S");
    pthread_mutex_unlock(&st->mu);
    fprintf(stderr, "; queue:");
    for (ordo__entry *q = l->qhead; q; q = q->qnext)
      fprintf(stderr, " txn %" PRIu64 " %s", q->owner->id,
              q->mode == ORDO_MODE_X ? "X" : "S");
    fprintf(stderr, "\n");
  }
  funlockfile(stderr);
}

/* ---- Delivery, records, callbacks -----------------------------------------
 */

void ordo__detect_deliver(ordo__table *tab) {
  ordo__detect *d = tab->det;
  if (atomic_load_explicit(&d->npending, memory_order_relaxed) == 0 &&
      !atomic_load_explicit(&d->alarm_pending, memory_order_relaxed))
    return;
  char classes[sizeof d->classes];
  pthread_mutex_lock(&tab->wait_mu);
  /* Take the whole queue: each record goes to exactly one deliverer. */
  size_t n = atomic_load_explicit(&d->npending, memory_order_relaxed);
  ordo_deadlock_t *local = d->pending;
  d->pending = NULL;
  d->cappending = 0;
  atomic_store_explicit(&d->npending, 0, memory_order_relaxed);
  ordo_deadlock_cb cb = d->cb;
  void *cb_arg = d->cb_arg;
  bool alarm = d->alarm_pending;
  d->alarm_pending = false;
  double rate = d->alarm_rate;
  memcpy(classes, d->classes, sizeof classes);
  ordo_alarm_cb acb = d->acb;
  void *acb_arg = d->acb_arg;
  pthread_mutex_unlock(&tab->wait_mu);
  for (size_t i = 0; cb && i < n; i++)
    cb(&local[i], cb_arg);
  free(local);
  if (alarm) {
    /* Repeated deadlocks are a lock-order bug, not load: name the key
     * classes so the reader knows where to look. */
    fprintf(stderr,
            "ordo: WARNING: %.1f deadlocks per minute (alarm at %u); key "
            "classes: %s -- take these keys in one ordo_lock_all\n",
            rate, tab->opts.alarm_per_min, classes[0] ? classes : "?");
    if (acb)
      acb(rate, classes, acb_arg);
  }
}

int ordo__table_deadlocks(ordo__table *tab, ordo_deadlock_t *out, size_t max) {
  ordo__detect *d = tab->det;
  pthread_mutex_lock(&tab->wait_mu);
  size_t n = d->ring_n < max ? d->ring_n : max;
  /* Oldest first among the newest n. */
  for (size_t i = 0; i < n; i++) {
    size_t idx = (d->ring_next + d->ring_cap - n + i) % d->ring_cap;
    out[i] = d->ring[idx];
  }
  pthread_mutex_unlock(&tab->wait_mu);
  return (int)n;
}

void ordo__table_on_deadlock(ordo__table *tab, ordo_deadlock_cb cb, void *arg) {
  pthread_mutex_lock(&tab->wait_mu);
  tab->det->cb = cb;
  tab->det->cb_arg = arg;
  pthread_mutex_unlock(&tab->wait_mu);
}

void ordo__table_on_alarm(ordo__table *tab, ordo_alarm_cb cb, void *arg) {
  pthread_mutex_lock(&tab->wait_mu);
  tab->det->acb = cb;
  tab->det->acb_arg = arg;
  pthread_mutex_unlock(&tab->wait_mu);
}

/* ---- The graph dump ---------------------------------------------------------
 */

static void json_key(FILE *f, const uint8_t *k, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\' && k[i] != '"')
      fputc(k[i], f);
    else
      fprintf(f, "\\u%04x", k[i]);
  }
}

int ordo__table_graph(ordo__table *tab, int fd, ordo_graph_fmt_t fmt) {
  int dfd = dup(fd);
  FILE *f = dfd >= 0 ? fdopen(dfd, "w") : NULL;
  if (!f) {
    if (dfd >= 0)
      close(dfd);
    return ORDO_EINVAL;
  }
  ordo__detect *d = tab->det;
  pthread_mutex_lock(&tab->wait_mu);
  if (fmt == ORDO_GRAPH_DOT)
    fprintf(f, "digraph waitfor {\n  rankdir=LR;\n  node [shape=box];\n");
  else
    fprintf(f, "{\"edges\": [");
  bool first = true;
  new_epoch(d); /* so that expand leaves no edge out */
  for (ordo__owner *u = tab->whead; u; u = u->wnext) {
    size_t pos = 0;
    expand(tab, d, u, &pos);
    for (size_t i = 0; i < pos; i++) {
      dedge *e = &d->arena[i];
      const char *m = e->mode == ORDO_MODE_X ? "X" : "S";
      if (fmt == ORDO_GRAPH_DOT) {
        fprintf(f, "  \"txn %" PRIu64 "\" -> \"txn %" PRIu64 "\" [label=\"",
                u->id, e->to->id);
        put_key(f, e->lock->key, e->lock->klen);
        fprintf(f, " %s%s\"%s];\n", m, e->soft ? " (queued)" : "",
                e->soft ? ", style=dashed" : "");
      } else {
        fprintf(f, "%s{\"from\": %" PRIu64 ", \"to\": %" PRIu64 ", \"key\": \"",
                first ? "" : ", ", u->id, e->to->id);
        json_key(f, e->lock->key, e->lock->klen);
        fprintf(f, "\", \"mode\": \"%s\", \"soft\": %s}", m,
                e->soft ? "true" : "false");
      }
      first = false;
    }
  }
  if (fmt == ORDO_GRAPH_DOT) {
    fprintf(f, "}\n");
  } else {
    fprintf(f, "], \"waiting\": [");
    first = true;
    for (ordo__owner *u = tab->whead; u; u = u->wnext) {
      fprintf(f, "%s%" PRIu64, first ? "" : ", ", u->id);
      first = false;
    }
    fprintf(f, "]}\n");
  }
  pthread_mutex_unlock(&tab->wait_mu);
  fclose(f);
  return 0;
}
