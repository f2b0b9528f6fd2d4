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
 * ordo__table_on_deadlock, ordo__table_on_alarm; for the executors
 * (src/exec), ordo__detect_ext_block, ordo__table_set_ext,
 * ordo__table_ext_search, ordo__owner_waiting, ordo__owner_blockers_locked,
 * ordo__table_add_record.
 */
#include "core/table_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ARENA_EDGES 16384 /* edges one search can hold */
#define MAX_FRAMES 4096   /* depth of one search */
#define CYCLE_MAX 256     /* members of one cycle we can resolve */
/* The search for a queue order that breaks a soft cycle (reorder): at most
 * this many constraints ("a before b on l") at once, this many orders
 * tested for one cycle, queues of this many entries in all, and this many
 * locks. Past them the search gives up, as if no order existed. */
#define MAX_CONSTRAINTS 8
#define MAX_TESTS 128
#define SNAP_ENTRIES 4096
#define SNAP_LOCKS 32
/* The long-wait log: bytes of records waiting to be written, records a
 * second, and what one record names (keys of the wait, holders and waiters
 * of each key, bytes of each key); a longer list is counted, up to
 * LOG_COUNT_MAX ("100000+"), so a record costs the same whatever the
 * queue's length, within that bound. */
#define LOG_BUF 8192
#define LOG_PER_SEC 10
#define LOG_KEYS 4
#define LOG_NAMED 4
#define LOG_KEY_BYTES 64
#define LOG_COUNT_MAX 100000

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

/* One constraint of the reorder search: entry a goes before entry b in
 * lock's queue (b is moved back behind a). */
typedef struct dcon {
  ordo__lock *lock;
  ordo__entry *a, *b;
} dcon;

/* A queue as it was before the search touched it: snap[begin, begin+n). */
typedef struct dsnap {
  ordo__lock *lock;
  size_t begin, n;
  bool reordered; /* its flag before the search */
  bool changed;   /* the order the search kept differs from this one */
} dsnap;

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

  /* The reorder search's memory (reorder): constraints, the queues it
   * touched as they were, and the soft edges of the cycle each level of
   * the search branches on. */
  dcon con[MAX_CONSTRAINTS];
  size_t ncon;
  dsnap snaps[SNAP_LOCKS];
  size_t nsnaps, nsnap;
  ordo__entry **snap;  /* SNAP_ENTRIES */
  ordo__entry **order; /* SNAP_ENTRIES: one queue's new order */
  uint8_t *placed;     /* SNAP_ENTRIES */
  ordo__owner **work;  /* MAX_FRAMES: the reach of the blocked owner */
  uint64_t scc_id;     /* the current resolution's number */
  dedge *branch;       /* MAX_CONSTRAINTS * CYCLE_MAX */
  ordo__owner **bfrom; /* MAX_CONSTRAINTS * CYCLE_MAX */
  unsigned tests;

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

  /* The long-wait log (ordo__detect_log_wait): records are composed under
   * wait_mu into logbuf, preallocated here, and written by
   * ordo__detect_deliver once the locks are let go. At most LOG_PER_SEC
   * records a second; the rest are counted in log_dropped and said in one
   * line before the next record. log_pending is also read without wait_mu,
   * as a hint. */
  char logbuf[LOG_BUF];
  size_t loglen;
  uint64_t log_sec;    /* the second log_in_sec counts */
  unsigned log_in_sec; /* records composed in that second */
  uint64_t log_dropped;
  _Atomic bool log_pending;
} ordo__detect;

int ordo__detect_create(ordo__table *tab) {
  ordo__detect *d = calloc(1, sizeof *d);
  if (!d)
    return ORDO_ENOMEM;
  d->arena = malloc(ARENA_EDGES * sizeof *d->arena);
  d->frames = malloc(MAX_FRAMES * sizeof *d->frames);
  d->snap = malloc(SNAP_ENTRIES * sizeof *d->snap);
  d->order = malloc(SNAP_ENTRIES * sizeof *d->order);
  d->placed = malloc(SNAP_ENTRIES);
  d->work = malloc(MAX_FRAMES * sizeof *d->work);
  d->branch = malloc(MAX_CONSTRAINTS * CYCLE_MAX * sizeof *d->branch);
  d->bfrom = malloc(MAX_CONSTRAINTS * CYCLE_MAX * sizeof *d->bfrom);
  d->ring_cap = tab->opts.deadlock_history ? tab->opts.deadlock_history : 1;
  d->ring = calloc(d->ring_cap, sizeof *d->ring);
  d->nbucket = tab->opts.alarm_window_s ? tab->opts.alarm_window_s : 60;
  d->bucket = calloc(d->nbucket, sizeof *d->bucket);
  atomic_init(&d->npending, 0);
  atomic_init(&d->alarm_pending, false);
  atomic_init(&d->log_pending, false);
  tab->det = d;
  if (!d->arena || !d->frames || !d->ring || !d->bucket || !d->snap ||
      !d->order || !d->placed || !d->branch || !d->bfrom || !d->work)
    return ORDO_ENOMEM;
  return 0;
}

void ordo__detect_destroy(ordo__table *tab) {
  ordo__detect *d = tab->det;
  if (!d)
    return;
  free(d->arena);
  free(d->frames);
  free(d->snap);
  free(d->order);
  free(d->placed);
  free(d->work);
  free(d->branch);
  free(d->bfrom);
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
      if (!ordo__waits_for_hold(e, h) || h->owner->visit == done)
        continue;
      if (*pos == ARENA_EDGES) {
        fit = false;
        break;
      }
      d->arena[(*pos)++] = (dedge){h->owner, l, e->mode, 0};
    }
    pthread_mutex_unlock(&st->mu);
    /* The queue ahead of u is frozen by wait_mu. Walk it from u towards
     * the head and stop after the first X that is not covered: such a
     * waiter conflicts with, and so waits for, everyone ahead of it, so
     * they are all reachable through it, and a hot key's queue of n costs
     * O(n) per search instead of O(n^2). A covered entry waits for nobody
     * queued, so it has no soft edges at all. */
    for (ordo__entry *q = e->covered ? NULL : ordo__queue_prev(l, e); q;
         q = ordo__queue_prev(l, q)) {
      if (!ordo__waits_for_queued(e, q))
        continue;
      if (q->owner->visit != done) {
        if (*pos == ARENA_EDGES) {
          fit = false;
          break;
        }
        d->arena[(*pos)++] = (dedge){q->owner, l, e->mode, 1};
      }
      if (q->mode == ORDO_MODE_X && !q->covered)
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
  for (const ordo__hold *h = TAILQ_FIRST(&u->holds); h;
       h = TAILQ_NEXT(h, tlink)) {
    for (ordo__entry *q = ordo__held_queue(h); q; q = q->qnext) {
      if (!ordo__waits_for_hold(q, h) || q->owner->visit == done)
        continue;
      if (*pos == ARENA_EDGES)
        return false;
      d->arena[(*pos)++] = (dedge){q->owner, h->lock, q->mode, 0};
    }
  }
  for (size_t i = 0; i < u->nent && !hard_only; i++) {
    ordo__entry *e = &u->ent[i];
    for (ordo__entry *q = e->qnext; q; q = q->qnext) {
      if (!ordo__waits_for_queued(q, e) || q->owner->visit == done)
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

/* ---- Soft cycles: reorder the queues -------------------------------------
 *
 * A cycle with a soft edge a -> b (a queued behind b on lock l) may go away
 * if a goes before b in l's queue. The search (PostgreSQL's deadlock.c does
 * the same with its TopoSort over "soft" edges) tries sets of such
 * constraints, fewest first: each set is applied to the queues it names,
 * from their order before the search, and the whole waiting graph is
 * searched for a cycle; the first set that leaves none is kept. A queue's
 * new order is a stable topological sort of its old one: each next place
 * goes to the earliest entry (in the old order) whose constraints are met,
 * so an entry moves back only behind the entries a constraint puts ahead
 * of it, and no entry moves ahead of one it was behind unless a constraint
 * says so. The entries moved back are members of the cycles found, so
 * nobody off them is overtaken, and every starving waiter off them keeps
 * its place and its reservation.
 */

static ordo__entry *entry_on(ordo__owner *u, const ordo__lock *l) {
  for (size_t i = 0; i < u->nent; i++)
    if (u->ent[i].lock == l)
      return &u->ent[i];
  return NULL;
}

/* The snapshot of l's queue, taken now if this is its first constraint;
 * NULL when the search's memory is full. Caller holds wait_mu (the queue is
 * frozen). */
static dsnap *snap_of(ordo__detect *d, ordo__lock *l) {
  for (size_t i = 0; i < d->nsnaps; i++)
    if (d->snaps[i].lock == l)
      return &d->snaps[i];
  if (d->nsnaps == SNAP_LOCKS)
    return NULL;
  size_t n = 0;
  for (ordo__entry *e = l->qhead; e; e = e->qnext)
    n++;
  if (d->nsnap + n > SNAP_ENTRIES)
    return NULL;
  dsnap *sn = &d->snaps[d->nsnaps++];
  *sn = (dsnap){l, d->nsnap, n, l->reordered != 0, false};
  for (ordo__entry *e = l->qhead; e; e = e->qnext)
    d->snap[d->nsnap++] = e;
  return sn;
}

/* Relinks l's queue in the order of list[0..n), under l's stripe. */
static void relink(ordo__table *tab, ordo__lock *l, ordo__entry **list,
                   size_t n, bool reordered) {
  ordo__stripe *st = lock_stripe(tab, l);
  pthread_mutex_lock(&st->mu);
  l->qhead = NULL;
  ordo__entry *tail = NULL;
  for (size_t i = 0; i < n; i++) {
    ordo__queue_insert_after(l, tail, list[i]);
    tail = list[i];
  }
  l->reordered = reordered;
  pthread_mutex_unlock(&st->mu);
}

/* Must e wait for a constraint's a not yet placed? */
static bool held_back(const ordo__detect *d, const dsnap *sn,
                      const ordo__entry *e) {
  for (size_t c = 0; c < d->ncon; c++) {
    if (d->con[c].lock != sn->lock || d->con[c].b != e)
      continue;
    for (size_t k = 0; k < sn->n; k++)
      if (d->snap[sn->begin + k] == d->con[c].a && !d->placed[k])
        return true;
  }
  return false;
}

/* Orders one snapshot's queue under the constraints (the stable sort
 * above) and relinks it; false when the constraints contradict. */
static bool apply_one(ordo__table *tab, ordo__detect *d, const dsnap *sn) {
  memset(d->placed, 0, sn->n);
  size_t out = 0, lo = 0; /* lo: the first entry not placed */
  bool moved = false;
  while (out < sn->n) {
    while (lo < sn->n && d->placed[lo])
      lo++;
    /* Only a constraint's b is ever held back (at most MAX_CONSTRAINTS
     * of them), so this scan is short. */
    size_t k = lo;
    while (k < sn->n &&
           (d->placed[k] || held_back(d, sn, d->snap[sn->begin + k])))
      k++;
    if (k == sn->n)
      return false; /* every entry left waits for another: a cycle */
    if (k != out)
      moved = true;
    d->placed[k] = 1;
    d->order[out++] = d->snap[sn->begin + k];
  }
  relink(tab, sn->lock, d->order, sn->n, sn->reordered || moved);
  ((dsnap *)sn)->changed = moved;
  return true;
}

/* Puts every touched queue back as it was before the search. */
static void restore_all(ordo__table *tab, ordo__detect *d) {
  for (size_t i = 0; i < d->nsnaps; i++) {
    dsnap *sn = &d->snaps[i];
    relink(tab, sn->lock, d->snap + sn->begin, sn->n, sn->reordered);
  }
}

static bool dfs(ordo__table *tab, ordo__detect *d, ordo__owner *root);
static bool expand(ordo__table *tab, ordo__detect *d, ordo__owner *u,
                   size_t *pos);
static bool expand_back(ordo__detect *d, ordo__owner *u, size_t *pos,
                        bool hard_only);

/*
 * scc_of -- marks the owners in w's strongly connected part of the graph:
 * those w reaches (reach_f) that also reach w (reach_b). Before w blocked
 * the graph had no cycle (invariant 2), so every cycle runs through w and
 * lies in this part; the reorder search moves back only its members, so an
 * owner off every cycle is never overtaken. Bounded by the search's
 * memory, like the searches: an owner past it counts as off the part.
 */
static void scc_of(ordo__table *tab, ordo__detect *d, ordo__owner *w) {
  uint64_t id = ++d->scc_id;
  for (int back = 0; back < 2; back++) {
    new_epoch(d); /* expand's pruning skips no one in a fresh epoch */
    size_t nw = 0;
    d->work[nw++] = w;
    if (back)
      w->reach_b = id;
    else
      w->reach_f = id;
    for (size_t i = 0; i < nw; i++) {
      ordo__owner *u = d->work[i];
      if (!waiting(u))
        continue; /* no out-edges; its in-edges make no cycle through w */
      size_t pos = 0;
      if (back)
        expand_back(d, u, &pos, false);
      else
        expand(tab, d, u, &pos);
      for (size_t k = 0; k < pos && nw < MAX_FRAMES; k++) {
        ordo__owner *v = d->arena[k].to;
        uint64_t *mark = back ? &v->reach_b : &v->reach_f;
        if (*mark != id) {
          *mark = id;
          d->work[nw++] = v;
        }
      }
    }
  }
}

static bool in_scc(const ordo__detect *d, const ordo__owner *u) {
  return u->reach_f == d->scc_id && u->reach_b == d->scc_id;
}

/* Is there any cycle among the waiting owners (one epoch over them all)?
 * Before the search the only cycles run through the owner that just
 * blocked (invariant 2), so this sees every cycle a constraint set leaves
 * or makes. */
static bool any_cycle(ordo__table *tab, ordo__detect *d) {
  new_epoch(d);
  for (ordo__owner *u = TAILQ_FIRST(&tab->waiters); u; u = TAILQ_NEXT(u, wlink))
    if ((u->visit | 1) != (d->epoch | 1) && dfs(tab, d, u))
      return true;
  return false;
}

/* Tries the current constraints; true when they leave no cycle (and stay
 * applied). Otherwise the cycle found is in d->c*. */
static bool test_constraints(ordo__table *tab, ordo__detect *d) {
  d->tests++;
  for (size_t i = 0; i < d->nsnaps; i++)
    if (!apply_one(tab, d, &d->snaps[i])) {
      restore_all(tab, d);
      d->ncycle = 0; /* contradicting constraints: nothing to branch on */
      return false;
    }
  if (!any_cycle(tab, d))
    return true;
  restore_all(tab, d);
  return false;
}

/*
 * search -- tries every set of up to depth more constraints, each the
 * reversal of a soft edge of the cycle that the set before it left.
 * Returns true with the queues in the winning order.
 */
static bool search(ordo__table *tab, ordo__detect *d, size_t depth) {
  if (d->tests >= MAX_TESTS)
    return false;
  if (test_constraints(tab, d))
    return true;
  if (depth == 0 || d->ncon == MAX_CONSTRAINTS)
    return false;
  /* The cycle's soft edges, kept at this level: deeper levels find
   * cycles of their own. */
  dedge *br = d->branch + d->ncon * CYCLE_MAX;
  ordo__owner **bf = d->bfrom + d->ncon * CYCLE_MAX;
  size_t nb = 0;
  for (size_t i = 0; i < d->ncycle; i++)
    if (d->cedge[i].soft) {
      bf[nb] = d->cfrom[i];
      br[nb++] = d->cedge[i];
    }
  for (size_t i = 0; i < nb && d->tests < MAX_TESTS; i++) {
    ordo__entry *a = entry_on(bf[i], br[i].lock);
    ordo__entry *b = entry_on(br[i].to, br[i].lock);
    if (NEVER(!a || !b))
      continue;
    bool dup = false;
    for (size_t c = 0; c < d->ncon; c++)
      dup |= d->con[c].a == a && d->con[c].b == b;
    /* Only a member of the blocked owner's part is moved back. */
    if (dup || !in_scc(d, b->owner) || !snap_of(d, br[i].lock))
      continue;
    d->con[d->ncon++] = (dcon){br[i].lock, a, b};
    if (search(tab, d, depth - 1))
      return true;
    d->ncon--;
  }
  return false;
}

/*
 * reorder -- the cycle (in d->c*) closes through queue order: look for a
 * set of constraints, fewest first (iterative deepening), whose queue
 * orders leave no cycle. On success the queues keep that order and those
 * whose waiters moved up are woken; on failure every queue is as it was.
 */
static int snap_key_cmp(const void *x, const void *y) {
  const ordo__lock *a = ((const dsnap *)x)->lock, *b = ((const dsnap *)y)->lock;
  return ordo_key_cmp(a->key, a->klen, b->key, b->klen);
}

static bool reorder(ordo__table *tab, ordo__detect *d, ordo__owner *w,
                    ordo__owner **fire) ORDO_REQUIRES(tab->wait_mu) {
  d->ncon = d->nsnaps = d->nsnap = 0;
  d->tests = 0;
  scc_of(tab, d, w);
  /* Depth 0 would test the queues as they are: the cycle is there. */
  dedge first[CYCLE_MAX];
  ordo__owner *ffrom[CYCLE_MAX];
  size_t nfirst = d->ncycle;
  memcpy(first, d->cedge, nfirst * sizeof *first);
  memcpy(ffrom, d->cfrom, nfirst * sizeof *ffrom);
  bool ok = false;
  for (size_t depth = 0; depth < MAX_CONSTRAINTS && !ok; depth++) {
    for (size_t i = 0; i < nfirst && !ok && d->tests < MAX_TESTS; i++) {
      if (!first[i].soft)
        continue;
      ordo__entry *a = entry_on(ffrom[i], first[i].lock);
      ordo__entry *b = entry_on(first[i].to, first[i].lock);
      if (NEVER(!a || !b) || !in_scc(d, b->owner) || !snap_of(d, first[i].lock))
        continue;
      d->ncon = 0;
      d->con[d->ncon++] = (dcon){first[i].lock, a, b};
      ok = search(tab, d, depth);
    }
  }
  if (!ok) {
    /* Every queue is as it was (test_constraints restored it). */
    d->ncycle = nfirst;
    memcpy(d->cedge, first, nfirst * sizeof *first);
    memcpy(d->cfrom, ffrom, nfirst * sizeof *ffrom);
    return false;
  }
  ADD(tab->reorders, (uint64_t)d->ncon);
  /* Waiters that moved up may be grantable now: the queues whose order
   * changed are woken in the canonical order of their keys, so the
   * outcome does not depend on which the search touched first. */
  qsort(d->snaps, d->nsnaps, sizeof *d->snaps, snap_key_cmp);
  for (size_t i = 0; i < d->nsnaps; i++)
    if (d->snaps[i].changed && d->snaps[i].lock->qhead)
      ordo__wake_queue(tab, d->snaps[i].lock, fire);
  return true;
}

/*
 * A txn that holds nothing is never a victim (README, invariant 6): it has
 * no hard in-edges, so moved to the end of every queue it is in it has no
 * in-edges at all and is on no cycle, and the move makes no cycle
 * elsewhere (the others keep their order). Moving it back overtakes
 * nobody. Among the cycle's members that hold nothing, the policy's
 * choice moves. Returns false when every member holds something.
 */
static bool worse(const ordo__table *tab, ordo__owner *a, ordo__owner *b,
                  ordo_victim_t policy);

static bool move_back_nothing_holder(ordo__table *tab, ordo__detect *d,
                                     ordo__owner **fire)
    ORDO_REQUIRES(tab->wait_mu) {
  ordo__owner *m = NULL;
  for (size_t i = 0; i < d->ncycle; i++) {
    ordo__owner *u = d->cfrom[i];
    if (u->nholds == 0 && (!m || worse(tab, u, m, tab->opts.victim)))
      m = u;
  }
  if (!m)
    return false;
  for (size_t i = 0; i < m->nent; i++) {
    ordo__entry *e = &m->ent[i];
    ordo__lock *l = e->lock;
    if (ordo__queue_tail(l) == e)
      continue;
    ordo__stripe *st = lock_stripe(tab, l);
    pthread_mutex_lock(&st->mu);
    ordo__queue_unlink(l, e);
    ordo__queue_insert_after(l, ordo__queue_tail(l), e);
    l->reordered = 1;
    pthread_mutex_unlock(&st->mu);
  }
  ADD(tab->reorders, 1);
  for (size_t i = 0; i < m->nent; i++)
    if (m->ent[i].lock->qhead)
      ordo__wake_queue(tab, m->ent[i].lock, fire);
  return true;
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

/* Whether u's wait is pinned now (ordo__owner_pin: a cross-shard
 * confirmation of ordod's holds it as an edge of another cycle). */
static bool pinned_now(const ordo__owner *u, uint64_t now) {
  return u->pin_ns != 0 && u->pin_ns > now;
}

/*
 * choose_victim -- the policy's member of the cycle. A member whose wait is
 * pinned is passed over while another can go: a pin means a cross-shard
 * abort is confirming a cycle through that wait, and aborting it here
 * would make that abort needless (a phantom, docs/distributed.md). Only
 * ordod pins; in-process places never do, and pay one test per member.
 */
static ordo__owner *choose_victim(ordo__table *tab, ordo__detect *d) {
  ordo_victim_t policy = tab->opts.victim;
  uint64_t now = 0;
  bool skip_pinned = false;
  for (size_t i = 0; i < d->ncycle; i++)
    if (d->cfrom[i]->pin_ns != 0) {
      now = ordo__now_ns();
      break;
    }
  if (now)
    for (size_t i = 0; i < d->ncycle && !skip_pinned; i++)
      skip_pinned = !pinned_now(d->cfrom[i], now);
  if (policy == ORDO_VICTIM_RANDOM) {
    /* Uniform among the members of the lowest effective priority. */
    long best = 0;
    size_t n = 0;
    for (size_t i = 0; i < d->ncycle; i++) {
      ordo__owner *u = d->cfrom[i];
      if (skip_pinned && pinned_now(u, now))
        continue;
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
      if (skip_pinned && pinned_now(u, now))
        continue;
      if ((long)u->priority + (long)u->aborts == best && pick-- == 0)
        return u;
    }
  }
  ordo__owner *v = NULL;
  for (size_t i = 0; i < d->ncycle; i++) {
    ordo__owner *u = d->cfrom[i];
    if (skip_pinned && pinned_now(u, now))
      continue;
    if (!v || worse(tab, u, v, policy))
      v = u;
  }
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

/* Queues a copy of r for the callback, when there is one (reporting, apart
 * from detection: the queue grows as needed, and a record it cannot hold
 * is counted in undelivered). Caller holds wait_mu. */
static void pending_push(ordo__detect *d, const ordo_deadlock_t *r) {
  if (!d->cb)
    return;
  size_t np = atomic_load_explicit(&d->npending, memory_order_relaxed);
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

/*
 * resolve -- the current cycle (in d->c*): reorder if it closes through
 * queue order and a valid order exists; otherwise abort exactly one victim,
 * which loses its wait and every lock it holds before its event fires.
 */
static void resolve(ordo__table *tab, ordo__detect *d, ordo__owner *w,
                    bool by_sweep, ordo__owner **fire)
    ORDO_REQUIRES(tab->wait_mu) {
  bool soft = false, pinned = false;
  uint64_t t = 0;
  for (size_t i = 0; i < d->ncycle; i++) {
    soft |= d->cedge[i].soft;
    if (d->cfrom[i]->pin_ns != 0) {
      t = t ? t : ordo__now_ns();
      pinned |= pinned_now(d->cfrom[i], t);
    }
  }
  /* A reorder moves waits in their queues: one that is pinned is an edge
   * a cross-shard abort has confirmed (ordod), so a cycle through one is
   * broken by a victim instead, chosen among the unpinned. */
  if (soft && !pinned) {
    /* A cycle of holders alone runs through w as well? Then no order
     * helps, and its victim must come from it: a member that holds
     * nothing (on the cycle by queue order only) would be aborted for
     * nothing, and the holders' cycle found again. */
    if (!hard_cycle_through(tab, d, w)) {
      if (!cycle_through(tab, d, w))
        return;
      if (reorder(tab, d, w, fire))
        return;
      /* No order found: a member that holds nothing moves back, which
       * always breaks its cycle; else someone is aborted. */
      if (move_back_nothing_holder(tab, d, fire))
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
  pending_push(d, r);
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
  for (const ordo__hold *h = TAILQ_FIRST(&w->holds); h;
       h = TAILQ_NEXT(h, tlink))
    for (const ordo__entry *q = ordo__held_queue(h); q; q = q->qnext)
      if (ordo__waits_for_hold(q, h))
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
    for (ordo__owner *u = TAILQ_FIRST(&tab->waiters); u && !found;
         u = TAILQ_NEXT(u, wlink)) {
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

/* ---- Waits outside the engine: executors ---------------------------------
 * core/table.h, "Waits outside the engine". The executor's search runs
 * under wait_mu, so the lock edges it reads are those of one moment, and
 * its victim is aborted under the same hold: the cycle it found is whole
 * when the victim loses its locks.
 */

/* A record the executor filled, entered as the engine's own are. */
static void record_ext(ordo__table *tab, ordo__detect *d,
                       const ordo_deadlock_t *rec, uint64_t now)
    ORDO_REQUIRES(tab->wait_mu) {
  ordo_deadlock_t *r = &d->ring[d->ring_next];
  *r = *rec;
  r->seq = ++d->seq;
  r->time_ns = now;
  r->policy = tab->opts.victim;
  if (r->nedges > ORDO_DL_MAX_EDGES && r->kind == ORDO_DL_LOCKS)
    r->nedges = ORDO_DL_MAX_EDGES;
  d->ring_next = (d->ring_next + 1) % d->ring_cap;
  if (d->ring_n < d->ring_cap)
    d->ring_n++;
  pending_push(d, r);
}

/* The executor's victim v of a mixed cycle: its wait ends (if it waits in
 * the engine) and its locks go, as resolve does for the engine's own. */
static void abort_ext(ordo__table *tab, ordo__detect *d, ordo__owner *v,
                      ordo_deadlock_t *rec, ordo__owner **fire)
    ORDO_REQUIRES(tab->wait_mu) {
  uint64_t now = ordo__now_ns();
  rec->victim = v->id;
  record_ext(tab, d, rec, now);
  alarm_count(tab, d, now);
  ADD(tab->deadlocks, 1);
  ADD(tab->victims[tab->opts.victim], 1);
  v->aborts++;
  if (waiting(v)) {
    v->dl_edge_ns = now;
    ordo__abort_locked(tab, v, ORDO_EDEADLK, fire);
  }
  ordo__release_holds_locked(tab, v, fire);
}

void ordo__detect_ext_block(ordo__table *tab, ordo__owner *w,
                            ordo__owner **fire) {
  if (!tab->ext_block || !waiting(w))
    return;
  ordo_deadlock_t rec;
  memset(&rec, 0, sizeof rec);
  ordo__owner *v = tab->ext_block(tab->ext_arg, w, &rec);
  if (v)
    abort_ext(tab, tab->det, v, &rec, fire);
}

void ordo__table_set_ext(ordo__table *tab, ordo__ext_block_fn on_block,
                         void *arg) {
  ordo__mutex_lock(&tab->wait_mu);
  tab->ext_block = on_block;
  tab->ext_arg = arg;
  ordo__mutex_unlock(&tab->wait_mu);
}

bool ordo__table_ext_search(ordo__table *tab, ordo__ext_search_fn fn,
                            void *arg) {
  ordo__owner *fire = NULL;
  ordo_deadlock_t rec;
  memset(&rec, 0, sizeof rec);
  ordo__mutex_lock(&tab->wait_mu);
  ordo__owner *v = fn(arg, &rec);
  if (v)
    abort_ext(tab, tab->det, v, &rec, &fire);
  ordo__mutex_unlock(&tab->wait_mu);
  ordo__fire_all(fire);
  ordo__detect_deliver(tab);
  return v != NULL;
}

bool ordo__owner_waiting(const ordo__owner *w) {
  return waiting(w);
}

bool ordo__owner_thread_waits(const ordo__owner *w) {
  return waiting(w) && w->pokeable; /* ORDO__WAIT_THREAD: a thread sleeps */
}

/* Adds u to out[0..*n) unless it is there; counts past max. */
static void blocker_add(ordo__owner **out, size_t max, size_t *n,
                        ordo__owner *u) {
  for (size_t i = 0; i < *n && i < max; i++)
    if (out[i] == u)
      return;
  if (*n < max)
    out[*n] = u;
  (*n)++;
}

static size_t blockers(ordo__owner *w, ordo__owner **out, size_t max,
                       bool queued_too) {
  ordo__table *tab = w->tab;
  size_t n = 0;
  if (!waiting(w))
    return 0;
  /* The same edges expand() follows: the holders that conflict, read
   * under their stripe, and the queue ahead, frozen by wait_mu. */
  for (size_t i = 0; i < w->nent; i++) {
    ordo__entry *e = &w->ent[i];
    ordo__lock *l = e->lock;
    ordo__stripe *st = &tab->stripe[e->stripe];
    pthread_mutex_lock(&st->mu);
    for (ordo__hold *h = l->holders; h; h = h->lnext)
      if (ordo__waits_for_hold(e, h) && h->owner != w)
        blocker_add(out, max, &n, h->owner);
    pthread_mutex_unlock(&st->mu);
    if (!queued_too)
      continue;
    for (ordo__entry *q = e->covered ? NULL : ordo__queue_prev(l, e); q;
         q = ordo__queue_prev(l, q))
      if (ordo__waits_for_queued(e, q) && q->owner != w)
        blocker_add(out, max, &n, q->owner);
  }
  return n;
}

size_t ordo__owner_blockers_locked(ordo__owner *w, ordo__owner **out,
                                   size_t max) {
  return blockers(w, out, max, true);
}

size_t ordo__owner_holders_locked(ordo__owner *w, ordo__owner **out,
                                  size_t max) {
  return blockers(w, out, max, false);
}

ordo__owner *ordo__victim_pick(ordo__table *tab, ordo__owner **c, size_t n) {
  ordo_victim_t policy = tab->opts.victim;
  if (n == 0)
    return NULL;
  if (policy == ORDO_VICTIM_RANDOM) {
    /* Uniform among the members of the lowest effective priority, as
     * choose_victim. */
    long best = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      long p = (long)c[i]->priority + (long)c[i]->aborts;
      if (k == 0 || p < best) {
        best = p;
        k = 0;
      }
      if (p == best)
        k++;
    }
    size_t pick = (size_t)(ordo__rand64() % k);
    for (size_t i = 0; i < n; i++)
      if ((long)c[i]->priority + (long)c[i]->aborts == best && pick-- == 0)
        return c[i];
  }
  ordo__owner *v = NULL;
  for (size_t i = 0; i < n; i++)
    if (!v || worse(tab, c[i], v, policy))
      v = c[i];
  return v;
}

void ordo__table_add_record(ordo__table *tab, const ordo_deadlock_t *rec) {
  ordo__mutex_lock(&tab->wait_mu);
  record_ext(tab, tab->det, rec, ordo__now_ns());
  ordo__mutex_unlock(&tab->wait_mu);
  ordo__detect_deliver(tab);
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

/* Appends to the log buffer like snprintf; false once it does not fit
 * (the caller then goes back to the record's start). */
static bool log_put(ordo__detect *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool log_put(ordo__detect *d, const char *fmt, ...) {
  size_t room = sizeof d->logbuf - d->loglen;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(d->logbuf + d->loglen, room, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= room)
    return false;
  d->loglen += (size_t)n;
  return true;
}

/* A key as the log shows it: printable bytes as they are, the others as
 * \xHH, and at most LOG_KEY_BYTES of it. */
static bool log_key(ordo__detect *d, const uint8_t *k, size_t n) {
  bool ok = true;
  size_t shown = n < LOG_KEY_BYTES ? n : LOG_KEY_BYTES;
  for (size_t i = 0; ok && i < shown; i++) {
    if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\' && k[i] != '"')
      ok = log_put(d, "%c", k[i]);
    else
      ok = log_put(d, "\\x%02x", k[i]);
  }
  if (ok && shown < n)
    ok = log_put(d, "...(%zu bytes)", n);
  return ok;
}

/*
 * ordo__detect_log_wait -- w has waited log_wait_ms (caller holds wait_mu).
 * As PostgreSQL's log_lock_waits: who waits, for what, behind whom; but
 * bounded, since a key with 10,000 waiters would otherwise log 10,000
 * waiters for each of them: per key the first LOG_NAMED holders and
 * waiters and the count of the rest, for the first LOG_KEYS keys, and at
 * most LOG_PER_SEC records a second (the others counted, and said in one
 * line before the next record). The record goes to a buffer preallocated
 * in the detector and is written by ordo__detect_deliver with no engine
 * lock held, so a slow stderr never slows a hand-off.
 */
void ordo__detect_log_wait(ordo__table *tab, ordo__owner *w) {
  ordo__detect *d = tab->det;
  ADD(tab->long_waits, 1);
  uint64_t now = ordo__now_ns();
  uint64_t sec = now / 1000000000u;
  if (sec != d->log_sec) {
    d->log_sec = sec;
    d->log_in_sec = 0;
  }
  if (d->log_in_sec >= LOG_PER_SEC) {
    d->log_dropped++;
    return;
  }
  size_t mark = d->loglen;
  bool ok = true;
  if (d->log_dropped)
    ok = log_put(d,
                 "ordo: LOG: %" PRIu64 " more long wait(s) not logged (at "
                 "most %d a second)\n",
                 d->log_dropped, LOG_PER_SEC);
  uint64_t ms = (now - w->enq_ns) / 1000000u;
  ok = ok && log_put(d,
                     "ordo: LOG: txn %" PRIu64 " still waiting after %" PRIu64
                     " ms for %zu key(s)\n",
                     w->id, ms, w->nent);
  for (size_t i = 0; ok && i < w->nent && i < LOG_KEYS; i++) {
    ordo__entry *e = &w->ent[i];
    ordo__lock *l = e->lock;
    ordo__stripe *st = &tab->stripe[e->stripe];
    ok = log_put(d, "ordo: LOG:   \"") && log_key(d, l->key, l->klen) &&
         log_put(d, "\" %s; holders:", e->mode == ORDO_MODE_X ? "X" : "S");
    size_t n = 0;
    pthread_mutex_lock(&st->mu);
    for (ordo__hold *h = l->holders; ok && h && n < LOG_COUNT_MAX;
         h = h->lnext, n++)
      if (n < LOG_NAMED)
        ok = log_put(d, " txn %" PRIu64 " %s", h->owner->id,
                     h->mode == ORDO_MODE_X ? "X" : "S");
    pthread_mutex_unlock(&st->mu);
    if (ok && n > LOG_NAMED)
      ok = log_put(d, " and %zu%s more", n - LOG_NAMED,
                   n == LOG_COUNT_MAX ? "+" : "");
    /* The queue is written under wait_mu (and the stripe): wait_mu is
     * enough to read it. */
    ok = ok && log_put(d, "; queue:");
    n = 0;
    for (ordo__entry *q = l->qhead; ok && q && n < LOG_COUNT_MAX;
         q = q->qnext, n++)
      if (n < LOG_NAMED)
        ok = log_put(d, " txn %" PRIu64 " %s", q->owner->id,
                     q->mode == ORDO_MODE_X ? "X" : "S");
    if (ok && n > LOG_NAMED)
      ok = log_put(d, " and %zu%s more", n - LOG_NAMED,
                   n == LOG_COUNT_MAX ? "+" : "");
    ok = ok && log_put(d, "\n");
  }
  if (ok && w->nent > LOG_KEYS)
    ok = log_put(d, "ordo: LOG:   and %zu more key(s)\n", w->nent - LOG_KEYS);
  if (!ok) {
    /* The buffer is full until the next delivery: this one is counted. */
    d->loglen = mark;
    d->log_dropped++;
    return;
  }
  d->log_dropped = 0;
  d->log_in_sec++;
  atomic_store_explicit(&d->log_pending, true, memory_order_relaxed);
}

/* ---- Delivery, records, callbacks -----------------------------------------
 */

void ordo__detect_deliver(ordo__table *tab) {
  ordo__detect *d = tab->det;
  if (atomic_load_explicit(&d->npending, memory_order_relaxed) == 0 &&
      !atomic_load_explicit(&d->alarm_pending, memory_order_relaxed) &&
      !atomic_load_explicit(&d->log_pending, memory_order_relaxed))
    return;
  char classes[sizeof d->classes];
  char logbuf[LOG_BUF];
  ordo__mutex_lock(&tab->wait_mu);
  /* The long-wait log's records, written below with no lock held. */
  size_t loglen = d->loglen;
  memcpy(logbuf, d->logbuf, loglen);
  d->loglen = 0;
  atomic_store_explicit(&d->log_pending, false, memory_order_relaxed);
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
  ordo__mutex_unlock(&tab->wait_mu);
  if (loglen)
    fwrite(logbuf, 1, loglen, stderr);
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
  ordo__mutex_lock(&tab->wait_mu);
  size_t n = d->ring_n < max ? d->ring_n : max;
  /* Oldest first among the newest n. */
  for (size_t i = 0; i < n; i++) {
    size_t idx = (d->ring_next + d->ring_cap - n + i) % d->ring_cap;
    out[i] = d->ring[idx];
  }
  ordo__mutex_unlock(&tab->wait_mu);
  return (int)n;
}

void ordo__table_on_deadlock(ordo__table *tab, ordo_deadlock_cb cb, void *arg) {
  ordo__mutex_lock(&tab->wait_mu);
  tab->det->cb = cb;
  tab->det->cb_arg = arg;
  ordo__mutex_unlock(&tab->wait_mu);
}

void ordo__table_on_alarm(ordo__table *tab, ordo_alarm_cb cb, void *arg) {
  ordo__mutex_lock(&tab->wait_mu);
  tab->det->acb = cb;
  tab->det->acb_arg = arg;
  ordo__mutex_unlock(&tab->wait_mu);
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
  ordo__mutex_lock(&tab->wait_mu);
  if (fmt == ORDO_GRAPH_DOT)
    fprintf(f, "digraph waitfor {\n  rankdir=LR;\n  node [shape=box];\n");
  else
    fprintf(f, "{\"edges\": [");
  bool first = true;
  new_epoch(d); /* so that expand leaves no edge out */
  for (ordo__owner *u = TAILQ_FIRST(&tab->waiters); u;
       u = TAILQ_NEXT(u, wlink)) {
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
    for (ordo__owner *u = TAILQ_FIRST(&tab->waiters); u;
         u = TAILQ_NEXT(u, wlink)) {
      fprintf(f, "%s%" PRIu64, first ? "" : ", ", u->id);
      first = false;
    }
    fprintf(f, "]}\n");
  }
  ordo__mutex_unlock(&tab->wait_mu);
  fclose(f);
  return 0;
}
