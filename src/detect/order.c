/*
 * order.c -- the lock-order checker, a lockdep for keys: a per-place graph
 * of lock classes whose edges say "a txn holding a key of class A asked for
 * a key of class B", with the file:line of the acquisition that first added
 * each edge. The first acquisition that closes a cycle in that graph, or
 * asks a ranked class while holding one of no lower rank, is reported once,
 * though no deadlock happened. The idea is Linux's lockdep (lock classes,
 * dependency chains checked when they are first seen); the code is ours.
 * See src/detect/README.md, "The lock-order checker".
 *
 * Interface: ordo__order_create, ordo__order_destroy, ordo__order_rank,
 * ordo__order_set_cb, ordo__order_before, ordo__order_granted,
 * ordo__order_released, ordo__order_released_all, ordo__order_txn_end,
 * ordo__order_async_arm, ordo__order_async_now, ordo__order_async_done,
 * ordo__order_reports.
 */
#include "detect/order.h"
#include "ordo_tsa.h"

#include <pthread.h>
#include <string.h>

#define NIL UINT32_MAX
/* Reports one acquisition can make; past them, the other violations it
 * finds are left for the next acquisition that repeats them (README,
 * invariant 5). Each report is about 2.3 KB of stack. */
#define REPORTS_PER_CALL 4
/* Classes the checker tracks; keys of classes past it are not checked
 * (lockdep has the same kind of bound). Keys without the separator are
 * each their own class, so this bounds the memory such keys can take. */
#define MAX_CLASSES 65536u
#define NAME_MAX_OUT ((int)sizeof(((ordo_order_edge_t *)0)->from))

typedef struct order_class {
  uint8_t *name;      /* the prefix's bytes, owned (ranked: the prefix) */
  uint32_t len;       /* bytes in name */
  uint32_t hnext;     /* the class hash's chain (unranked classes only) */
  uint64_t hash;      /* of name (unranked classes only) */
  uint32_t first_out; /* the newest edge out of this class, or NIL */
  uint32_t seen;      /* the search epoch that last reached it */
  uint32_t via;       /* the edge that search reached it by */
  uint32_t mark;      /* the dedupe epoch that last listed it */
  bool ranked;
  int rank; /* when ranked */
} order_class;

typedef struct order_edge {
  uint32_t from, to;
  uint32_t next_out; /* the next older edge out of from, or NIL */
  uint32_t hnext;    /* the edge hash's chain */
  const char *file;  /* the acquisition that added it (NULL: unknown) */
  int line;
} order_edge;

struct ordo__order {
  ordo_order_mode_t mode;   /* read-only */
  char sep;                 /* read-only */
  _Atomic uint64_t reports; /* relaxed adds */
  /*
   * mu guards every field below. It is a leaf: api.c takes it (through
   * these functions) with no engine lock held, and nothing else is locked
   * while it is held (the allocator's own locks aside). Reports are
   * delivered after it is let go. Every helper below that touches these
   * requires it (ordo_tsa.h).
   */
  ordo__mutex mu;
  ordo_order_cb cb ORDO_GUARDED_BY(mu);
  void *cb_arg ORDO_GUARDED_BY(mu);
  /* Classes by id. */
  order_class *cls ORDO_GUARDED_BY(mu) ORDO_PT_GUARDED_BY(mu);
  uint32_t ncls ORDO_GUARDED_BY(mu), cap_cls ORDO_GUARDED_BY(mu);
  /* The search's scratch, cap_cls entries. */
  uint32_t *queue ORDO_GUARDED_BY(mu) ORDO_PT_GUARDED_BY(mu);
  /* Hash of unranked classes: chain heads. */
  uint32_t *cls_head ORDO_GUARDED_BY(mu) ORDO_PT_GUARDED_BY(mu);
  uint32_t cls_mask ORDO_GUARDED_BY(mu);
  /* Ids of the ranked classes. */
  uint32_t *ranked ORDO_GUARDED_BY(mu) ORDO_PT_GUARDED_BY(mu);
  uint32_t nranked ORDO_GUARDED_BY(mu), cap_ranked ORDO_GUARDED_BY(mu);
  /* Edges by id, in the order they were added. */
  order_edge *edge ORDO_GUARDED_BY(mu) ORDO_PT_GUARDED_BY(mu);
  uint32_t nedge ORDO_GUARDED_BY(mu), cap_edge ORDO_GUARDED_BY(mu);
  /* Hash of edges by (from, to): chain heads. */
  uint32_t *edge_head ORDO_GUARDED_BY(mu) ORDO_PT_GUARDED_BY(mu);
  uint32_t edge_mask ORDO_GUARDED_BY(mu);
  /* Reported closing edges, open addressing. */
  uint64_t *rep ORDO_GUARDED_BY(mu) ORDO_PT_GUARDED_BY(mu);
  uint32_t nrep ORDO_GUARDED_BY(mu), rep_mask ORDO_GUARDED_BY(mu);
  uint32_t epoch ORDO_GUARDED_BY(mu);      /* of the last search */
  uint32_t mark_epoch ORDO_GUARDED_BY(mu); /* of the last dedupe */
  bool limit_logged ORDO_GUARDED_BY(mu);   /* MAX_CLASSES was reached, said */
};
#define REP_EMPTY UINT64_MAX

/* A txn's state, t->order_state: only t's thread touches it, and the
 * async callback while t accepts nothing but ordo_cancel (README,
 * invariant 1). */
typedef struct order_held {
  uint32_t cls;
  uint32_t count; /* holds of keys of cls, > 0 */
} order_held;

typedef struct order_txn {
  order_held *held; /* the classes held now */
  size_t nheld, cap_held;
  bool untracked; /* holds a key of a class past MAX_CLASSES */
  uint32_t *pend; /* the classes of the request in flight, by key */
  size_t npend, cap_pend;
  uint32_t *dist; /* scratch of ordo__order_before: distinct classes */
  size_t cap_dist;
  /* The async request: its classes, set aside from pend by
   * ordo__order_async_arm so that nothing else writes them, and the
   * caller's callback. armed is set by the txn's thread and cleared by
   * whoever ends the request (the callback, or ordo__order_async_now). */
  uint32_t *apend;
  size_t napend, cap_apend;
  ordo_done_cb ucb;
  void *uarg;
  _Atomic bool armed;
} order_txn;

/* ---- Small helpers ---------------------------------------------------- */

static uint64_t hash_bytes(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

static uint64_t pair_key(uint32_t from, uint32_t to) {
  return (uint64_t)from << 32 | to;
}

static uint32_t pair_hash(uint32_t from, uint32_t to) {
  uint64_t h = pair_key(from, to) * 0x9E3779B97F4A7C15ull;
  return (uint32_t)(h >> 32);
}

/* Grows *arr (of *cap elements of size sz) to hold need; 0 or -1. */
static int grow(void **arr, size_t *cap, size_t need, size_t sz) {
  if (need <= *cap)
    return 0;
  size_t c = *cap ? *cap : 8;
  while (c < need)
    c *= 2;
  void *p = realloc(*arr, c * sz);
  if (!p)
    return -1;
  *arr = p;
  *cap = c;
  return 0;
}

/* ---- Classes ------------------------------------------------------------ */
/* Classes, edges, reported edges and the search: every function from here
 * to "Reporting" runs with ck->mu held, and says so (ORDO_REQUIRES). */

static int cls_rehash(struct ordo__order *ck, uint32_t buckets)
    ORDO_REQUIRES(ck->mu) {
  uint32_t *h = malloc(buckets * sizeof *h);
  if (!h)
    return -1;
  for (uint32_t i = 0; i < buckets; i++)
    h[i] = NIL;
  for (uint32_t i = 0; i < ck->ncls; i++) {
    order_class *c = &ck->cls[i];
    if (c->ranked)
      continue;
    uint32_t b = (uint32_t)c->hash & (buckets - 1);
    c->hnext = h[b];
    h[b] = i;
  }
  free(ck->cls_head);
  ck->cls_head = h;
  ck->cls_mask = buckets - 1;
  return 0;
}

/* Adds a class; returns its id, or NIL (no memory, or MAX_CLASSES). */
static uint32_t cls_new(struct ordo__order *ck, const void *name, uint32_t len,
                        bool ranked, int rank, uint64_t hash)
    ORDO_REQUIRES(ck->mu) {
  if (ck->ncls >= MAX_CLASSES)
    return NIL;
  if (ck->ncls == ck->cap_cls) {
    uint32_t cap = ck->cap_cls ? ck->cap_cls * 2 : 64;
    order_class *c = realloc(ck->cls, cap * sizeof *c);
    if (!c)
      return NIL;
    ck->cls = c;
    uint32_t *q = realloc(ck->queue, cap * sizeof *q);
    if (!q)
      return NIL;
    ck->queue = q;
    ck->cap_cls = cap;
  }
  uint8_t *copy = malloc(len ? len : 1);
  if (!copy)
    return NIL;
  memcpy(copy, name, len);
  uint32_t id = ck->ncls++;
  order_class *c = &ck->cls[id];
  memset(c, 0, sizeof *c);
  c->name = copy;
  c->len = len;
  c->hash = hash;
  c->first_out = NIL;
  c->via = NIL;
  c->ranked = ranked;
  c->rank = rank;
  if (!ranked) {
    uint32_t b = (uint32_t)hash & ck->cls_mask;
    c->hnext = ck->cls_head[b];
    ck->cls_head[b] = id;
    /* A longer chain only costs time, so a failed rehash is harmless. */
    if (ck->ncls > ck->cls_mask + 1)
      (void)cls_rehash(ck, (ck->cls_mask + 1) * 2);
  }
  return id;
}

/*
 * class_of -- the class of key: the ranked class of the longest registered
 * prefix it starts with, else its prefix up to the separator (all of it if
 * there is none). With intern, a class seen for the first time is made;
 * NIL when it is not known (or could not be made). Caller holds mu.
 */
static uint32_t class_of(struct ordo__order *ck, const void *key, size_t len,
                         bool intern) ORDO_REQUIRES(ck->mu) {
  uint32_t best = NIL;
  for (uint32_t i = 0; i < ck->nranked; i++) {
    const order_class *c = &ck->cls[ck->ranked[i]];
    if (c->len <= len && (best == NIL || c->len > ck->cls[best].len) &&
        memcmp(key, c->name, c->len) == 0)
      best = ck->ranked[i];
  }
  if (best != NIL)
    return best;
  const uint8_t *sep = memchr(key, (unsigned char)ck->sep, len);
  size_t plen = sep ? (size_t)(sep - (const uint8_t *)key) : len;
  uint64_t h = hash_bytes(key, plen);
  for (uint32_t i = ck->cls_head[(uint32_t)h & ck->cls_mask]; i != NIL;
       i = ck->cls[i].hnext) {
    const order_class *c = &ck->cls[i];
    if (c->hash == h && c->len == plen && memcmp(c->name, key, plen) == 0)
      return i;
  }
  if (!intern)
    return NIL;
  return cls_new(ck, key, (uint32_t)plen, false, 0, h);
}

/* Writes the class's printable name: bytes outside ASCII's printable range
 * (and the backslash) as \xNN, cut to fit out. */
static void class_name(const struct ordo__order *ck, uint32_t id,
                       char out[NAME_MAX_OUT]) ORDO_REQUIRES(ck->mu) {
  const order_class *c = &ck->cls[id];
  int o = 0;
  if (c->ranked)
    o = snprintf(out, (size_t)NAME_MAX_OUT, "rank:%d ", c->rank);
  if (o < 0 || o >= NAME_MAX_OUT)
    o = NAME_MAX_OUT - 1;
  for (uint32_t i = 0; i < c->len; i++) {
    uint8_t b = c->name[i];
    if (b >= 0x20 && b < 0x7f && b != '\\') {
      if (o + 1 >= NAME_MAX_OUT)
        break;
      out[o++] = (char)b;
    } else {
      if (o + 4 >= NAME_MAX_OUT)
        break;
      static const char hex[] = "0123456789abcdef";
      out[o++] = '\\';
      out[o++] = 'x';
      out[o++] = hex[b >> 4];
      out[o++] = hex[b & 15];
    }
  }
  out[o] = 0;
}

/* ---- Edges -------------------------------------------------------------- */

static uint32_t edge_find(const struct ordo__order *ck, uint32_t from,
                          uint32_t to) ORDO_REQUIRES(ck->mu) {
  for (uint32_t i = ck->edge_head[pair_hash(from, to) & ck->edge_mask];
       i != NIL; i = ck->edge[i].hnext)
    if (ck->edge[i].from == from && ck->edge[i].to == to)
      return i;
  return NIL;
}

/* Makes room for more new edges, so that edge_add cannot fail and no
 * rehash happens between an edge_add and its edge_pop. 0 or -1. */
static int edge_reserve(struct ordo__order *ck, size_t more)
    ORDO_REQUIRES(ck->mu) {
  size_t need = (size_t)ck->nedge + more;
  if (need >= NIL)
    return -1;
  size_t cap = ck->cap_edge;
  if (grow((void **)&ck->edge, &cap, need, sizeof *ck->edge))
    return -1;
  ck->cap_edge = (uint32_t)cap;
  uint32_t buckets = ck->edge_mask + 1;
  if (need <= (size_t)buckets * 2)
    return 0;
  while ((size_t)buckets * 2 < need)
    buckets *= 2;
  uint32_t *h = malloc(buckets * sizeof *h);
  if (!h)
    return -1;
  for (uint32_t i = 0; i < buckets; i++)
    h[i] = NIL;
  /* Oldest first, so each chain keeps newest-first order. */
  for (uint32_t i = 0; i < ck->nedge; i++) {
    uint32_t b = pair_hash(ck->edge[i].from, ck->edge[i].to) & (buckets - 1);
    ck->edge[i].hnext = h[b];
    h[b] = i;
  }
  free(ck->edge_head);
  ck->edge_head = h;
  ck->edge_mask = buckets - 1;
  return 0;
}

static void edge_add(struct ordo__order *ck, uint32_t from, uint32_t to,
                     const char *file, int line) ORDO_REQUIRES(ck->mu) {
  ORDO_ASSERT(ck->nedge < ck->cap_edge);
  uint32_t id = ck->nedge++;
  order_edge *e = &ck->edge[id];
  uint32_t b = pair_hash(from, to) & ck->edge_mask;
  e->from = from;
  e->to = to;
  e->file = file;
  e->line = line;
  e->next_out = ck->cls[from].first_out;
  ck->cls[from].first_out = id;
  e->hnext = ck->edge_head[b];
  ck->edge_head[b] = id;
}

/* Takes back the newest edge. Edges are only ever taken back newest first,
 * so it is the head of its class's list and of its hash chain. */
static void edge_pop(struct ordo__order *ck) ORDO_REQUIRES(ck->mu) {
  uint32_t id = --ck->nedge;
  order_edge *e = &ck->edge[id];
  uint32_t b = pair_hash(e->from, e->to) & ck->edge_mask;
  ORDO_ASSERT(ck->cls[e->from].first_out == id && ck->edge_head[b] == id);
  ck->cls[e->from].first_out = e->next_out;
  ck->edge_head[b] = e->hnext;
}

/* ---- Reported closing edges -------------------------------------------- */

static int rep_reserve(struct ordo__order *ck, uint32_t more)
    ORDO_REQUIRES(ck->mu) {
  uint32_t size = ck->rep_mask + 1;
  if ((uint64_t)(ck->nrep + more) * 2 <= size)
    return 0;
  uint32_t nsize = size * 2;
  uint64_t *r = malloc(nsize * sizeof *r);
  if (!r)
    return -1;
  for (uint32_t i = 0; i < nsize; i++)
    r[i] = REP_EMPTY;
  for (uint32_t i = 0; i < size; i++) {
    if (ck->rep[i] == REP_EMPTY)
      continue;
    uint32_t j = (uint32_t)((ck->rep[i] * 0x9E3779B97F4A7C15ull) >> 32);
    while (r[j & (nsize - 1)] != REP_EMPTY)
      j++;
    r[j & (nsize - 1)] = ck->rep[i];
  }
  free(ck->rep);
  ck->rep = r;
  ck->rep_mask = nsize - 1;
  return 0;
}

/* Looks up (from, to); with add, records it if absent. True if present. */
static bool rep_seen(struct ordo__order *ck, uint32_t from, uint32_t to,
                     bool add) ORDO_REQUIRES(ck->mu) {
  uint64_t k = pair_key(from, to);
  uint32_t j = (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32);
  for (;; j++) {
    uint64_t *s = &ck->rep[j & ck->rep_mask];
    if (*s == k)
      return true;
    if (*s == REP_EMPTY) {
      if (add) {
        *s = k;
        ck->nrep++;
      }
      return false;
    }
  }
}

/* ---- The search ---------------------------------------------------------
 * Breadth first from src over the edges, so the cycle reported is a
 * shortest one. Each class reached records the edge it was reached by
 * (via); the path back from dst follows them. Needs no memory but the
 * queue, which has a slot per class.
 */
static bool reaches(struct ordo__order *ck, uint32_t src, uint32_t dst)
    ORDO_REQUIRES(ck->mu) {
  if (++ck->epoch == 0) {
    for (uint32_t i = 0; i < ck->ncls; i++)
      ck->cls[i].seen = 0;
    ck->epoch = 1;
  }
  uint32_t head = 0, tail = 0;
  ck->queue[tail++] = src;
  ck->cls[src].seen = ck->epoch;
  ck->cls[src].via = NIL;
  while (head < tail) {
    uint32_t v = ck->queue[head++];
    for (uint32_t e = ck->cls[v].first_out; e != NIL;
         e = ck->edge[e].next_out) {
      uint32_t w = ck->edge[e].to;
      if (ck->cls[w].seen == ck->epoch)
        continue;
      ck->cls[w].seen = ck->epoch;
      ck->cls[w].via = e;
      if (w == dst)
        return true;
      ck->queue[tail++] = w;
    }
  }
  return false;
}

static void fill_edge(const struct ordo__order *ck, ordo_order_edge_t *re,
                      uint32_t from, uint32_t to, const char *file, int line)
    ORDO_REQUIRES(ck->mu) {
  class_name(ck, from, re->from);
  class_name(ck, to, re->to);
  re->file = file ? file : "?";
  re->line = line;
}

/*
 * report_cycle -- after reaches(ck, to, from) found a path, writes the
 * cycle it closes with the new edge from -> to: the path's edges from `to`
 * on, then the new edge last. A cycle longer than ORDO_ORDER_MAX_EDGES
 * keeps the path's first edges and the new one.
 */
static void report_cycle(struct ordo__order *ck, ordo_order_report_t *r,
                         uint32_t from, uint32_t to, const char *file, int line)
    ORDO_REQUIRES(ck->mu) {
  /* The path back from `from` to `to`, newest edge first, into the queue
   * (the search is over, so its slots are free). */
  uint32_t k = 0;
  for (uint32_t e = ck->cls[from].via; e != NIL;
       e = ck->cls[ck->edge[e].from].via)
    ck->queue[k++] = e;
  memset(r, 0, sizeof *r);
  size_t keep = k < ORDO_ORDER_MAX_EDGES - 1 ? k : ORDO_ORDER_MAX_EDGES - 1;
  for (size_t i = 0; i < keep; i++) {
    const order_edge *e = &ck->edge[ck->queue[k - 1 - i]];
    fill_edge(ck, &r->edge[i], e->from, e->to, e->file, e->line);
  }
  fill_edge(ck, &r->edge[keep], from, to, file, line);
  r->nedges = keep + 1;
}

/* ---- Reporting ---------------------------------------------------------
 * Apart from the search: runs with no lock held.
 */
static void log_report(const ordo_order_report_t *r) {
  char buf[ORDO_ORDER_MAX_EDGES * 180 + 96];
  size_t cap = sizeof buf, o = 0;
  int w = snprintf(buf, cap, "ordo: lock %s inversion in txn %llu: ",
                   r->rank_inversion ? "rank" : "order",
                   (unsigned long long)r->txn);
  o = w > 0 ? (size_t)w : 0;
  for (size_t i = 0; i < r->nedges && o < cap; i++) {
    const ordo_order_edge_t *e = &r->edge[i];
    w = snprintf(buf + o, cap - o, "%s%s -> %s (%s:%d)", i ? ", " : "", e->from,
                 e->to, e->file, e->line);
    if (w < 0)
      break;
    o += (size_t)w;
  }
  if (o >= cap - 1)
    o = cap - 2;
  buf[o++] = '\n';
  /* One write, so that lines of several threads do not interleave. */
  fwrite(buf, 1, o, stderr);
}

static void deliver(struct ordo__order *ck, ordo_order_report_t *r, size_t n,
                    uint64_t txn, ordo_order_cb cb, void *arg) {
  for (size_t i = 0; i < n; i++) {
    r[i].txn = txn;
    atomic_fetch_add_explicit(&ck->reports, 1, memory_order_relaxed);
    if (cb)
      cb(&r[i], arg);
    else
      log_report(&r[i]);
  }
}

/* ---- The interface ------------------------------------------------------ */

int ordo__order_create(struct ordo__order **out, const ordo_options_t *opts) {
  struct ordo__order *ck = calloc(1, sizeof *ck);
  if (!ck)
    return ORDO_ENOMEM;
  if (ordo__mutex_init(&ck->mu) != 0) {
    free(ck);
    return ORDO_ENOMEM;
  }
  ck->mode = opts->order;
  ck->sep = opts->order_sep;
  atomic_init(&ck->reports, 0);
  /* No other thread knows ck yet, but the helpers require mu (ordo_tsa.h):
   * it is held for the set-up all the same. */
  ordo__mutex_lock(&ck->mu);
  ck->edge_mask = 255;
  ck->rep_mask = 63;
  ck->edge_head = malloc((ck->edge_mask + 1) * sizeof *ck->edge_head);
  ck->rep = malloc((ck->rep_mask + 1) * sizeof *ck->rep);
  bool ok = ck->edge_head && ck->rep && cls_rehash(ck, 64) == 0;
  for (uint32_t i = 0; ok && i <= ck->edge_mask; i++)
    ck->edge_head[i] = NIL;
  for (uint32_t i = 0; ok && i <= ck->rep_mask; i++)
    ck->rep[i] = REP_EMPTY;
  ordo__mutex_unlock(&ck->mu);
  if (!ok) {
    ordo__order_destroy(ck);
    return ORDO_ENOMEM;
  }
  *out = ck;
  return 0;
}

void ordo__order_destroy(struct ordo__order *ck) {
  if (!ck)
    return;
  ordo__mutex_destroy(&ck->mu);
  for (uint32_t i = 0; i < ck->ncls; i++)
    free(ck->cls[i].name);
  free(ck->cls);
  free(ck->queue);
  free(ck->cls_head);
  free(ck->ranked);
  free(ck->edge);
  free(ck->edge_head);
  free(ck->rep);
  free(ck);
}

int ordo__order_rank(struct ordo__order *ck, const void *prefix, size_t len,
                     int rank) {
  int rc = 0;
  ordo__mutex_lock(&ck->mu);
  for (uint32_t i = 0; i < ck->nranked; i++) {
    order_class *c = &ck->cls[ck->ranked[i]];
    if (c->len == len && memcmp(c->name, prefix, len) == 0) {
      c->rank = rank; /* re-ranked: edges already seen stay */
      goto out;
    }
  }
  size_t cap = ck->cap_ranked;
  if (grow((void **)&ck->ranked, &cap, (size_t)ck->nranked + 1,
           sizeof *ck->ranked)) {
    rc = ORDO_ENOMEM;
    goto out;
  }
  ck->cap_ranked = (uint32_t)cap;
  uint32_t id = cls_new(ck, prefix, (uint32_t)len, true, rank, 0);
  if (id == NIL) {
    rc = ck->ncls >= MAX_CLASSES ? ORDO_ELIMIT : ORDO_ENOMEM;
    goto out;
  }
  ck->ranked[ck->nranked++] = id;
out:
  ordo__mutex_unlock(&ck->mu);
  return rc;
}

void ordo__order_set_cb(struct ordo__order *ck, ordo_order_cb cb, void *arg) {
  ordo__mutex_lock(&ck->mu);
  ck->cb = cb;
  ck->cb_arg = arg;
  ordo__mutex_unlock(&ck->mu);
}

uint64_t ordo__order_reports(struct ordo__order *ck) {
  return atomic_load_explicit(&ck->reports, memory_order_relaxed);
}

/* t's state, made on first use; NULL if there is no memory. */
static order_txn *txn_state(ordo_txn_t *t) {
  if (!t->order_state)
    t->order_state = calloc(1, sizeof(order_txn));
  return t->order_state;
}

/* Room for a request of n keys and for the classes it may add to those
 * held, so that ordo__order_granted cannot fail. 0 or -1. */
static int txn_reserve(order_txn *s, size_t n) {
  if (grow((void **)&s->pend, &s->cap_pend, n, sizeof *s->pend) ||
      grow((void **)&s->dist, &s->cap_dist, n, sizeof *s->dist))
    return -1;
  return grow((void **)&s->held, &s->cap_held, s->nheld + n, sizeof *s->held);
}

int ordo__order_before(struct ordo__order *ck, ordo_txn_t *t,
                       const ordo_req_t *sorted, size_t n, const char *file,
                       int line) {
  order_txn *s = txn_state(t);
  if (!s)
    return ORDO_ENOMEM;
  /* An async request is in flight: the backend would refuse this one, and
   * its callback may be writing s->held. */
  if (atomic_load_explicit(&s->armed, memory_order_acquire))
    return ORDO_EBUSY;
  if (txn_reserve(s, n) != 0)
    return ORDO_ENOMEM;
  ordo_order_report_t rep[REPORTS_PER_CALL];
  size_t nrep = 0;
  bool refused = false, limit = false;
  int rc = 0;

  ordo__mutex_lock(&ck->mu);
  /* The request's classes, and the distinct ones among them. */
  if (++ck->mark_epoch == 0) {
    for (uint32_t i = 0; i < ck->ncls; i++)
      ck->cls[i].mark = 0;
    ck->mark_epoch = 1;
  }
  size_t ndist = 0;
  s->npend = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t c = class_of(ck, sorted[i].key, sorted[i].len, true);
    if (c == NIL && ck->ncls < MAX_CLASSES) {
      rc = ORDO_ENOMEM;
      goto out;
    }
    s->pend[s->npend++] = c; /* NIL past MAX_CLASSES: not checked */
    if (c == NIL) {
      limit |= !ck->limit_logged;
      ck->limit_logged = true;
    } else if (ck->cls[c].mark != ck->mark_epoch) {
      ck->cls[c].mark = ck->mark_epoch;
      s->dist[ndist++] = c;
    }
  }
  if (s->nheld == 0 || ndist == 0)
    goto out; /* holds nothing: no edge */
  if (edge_reserve(ck, s->nheld * ndist) != 0 ||
      rep_reserve(ck, REPORTS_PER_CALL) != 0) {
    rc = ORDO_ENOMEM;
    goto out;
  }
  uint32_t first_new = ck->nedge;
  for (size_t i = 0; i < s->nheld; i++) {
    uint32_t h = s->held[i].cls;
    for (size_t j = 0; j < ndist; j++) {
      uint32_t c = s->dist[j];
      /* Same class held and asked: no edge (README, invariant 2). */
      if (c == h || edge_find(ck, h, c) != NIL)
        continue;
      const order_class *hc = &ck->cls[h], *cc = &ck->cls[c];
      bool inverted = hc->ranked && cc->ranked && cc->rank <= hc->rank;
      if (inverted || reaches(ck, c, h)) {
        if (!rep_seen(ck, h, c, false)) {
          if (nrep == REPORTS_PER_CALL) {
            /* No room to report it now: leave the edge out, so the next
             * acquisition that repeats it finds it again. */
            refused |= ck->mode == ORDO_ORDER_REFUSE;
            continue;
          }
          ordo_order_report_t *r = &rep[nrep++];
          if (inverted) {
            memset(r, 0, sizeof *r);
            fill_edge(ck, &r->edge[0], h, c, file, line);
            r->nedges = 1;
            r->rank_inversion = 1;
          } else {
            report_cycle(ck, r, h, c, file, line);
          }
          rep_seen(ck, h, c, true);
        }
        if (ck->mode == ORDO_ORDER_REFUSE) {
          refused = true;
          continue;
        }
      }
      edge_add(ck, h, c, file, line);
    }
  }
  /* Refused: the call takes nothing, so it leaves no edge either. */
  if (refused) {
    while (ck->nedge > first_new)
      edge_pop(ck);
    rc = ORDO_EORDER;
  }
out:;
  ordo_order_cb cb = ck->cb;
  void *arg = ck->cb_arg;
  ordo__mutex_unlock(&ck->mu);
  if (limit)
    fprintf(stderr,
            "ordo: lock-order checker: %u classes; keys of new "
            "classes are not checked\n",
            MAX_CLASSES);
  deliver(ck, rep, nrep, t->id, cb, arg);
  if (rc)
    s->npend = 0;
  return rc;
}

/* Counts one more hold of class c; room was made by txn_reserve. */
static void hold_class(order_txn *s, uint32_t c) {
  if (c == NIL) {
    s->untracked = true;
    return;
  }
  for (size_t i = 0; i < s->nheld; i++) {
    if (s->held[i].cls == c) {
      s->held[i].count++;
      return;
    }
  }
  if (NEVER(s->nheld == s->cap_held))
    return;
  s->held[s->nheld].cls = c;
  s->held[s->nheld].count = 1;
  s->nheld++;
}

void ordo__order_granted(struct ordo__order *ck, ordo_txn_t *t,
                         const ordo_req_t *sorted, size_t n) {
  ORDO_UNUSED(ck);
  ORDO_UNUSED(sorted);
  order_txn *s = t->order_state;
  if (NEVER(!s || s->npend != n))
    return;
  for (size_t i = 0; i < s->npend; i++)
    hold_class(s, s->pend[i]);
  s->npend = 0;
}

void ordo__order_released(struct ordo__order *ck, ordo_txn_t *t,
                          const void *key, size_t len) {
  order_txn *s = t->order_state;
  if (!s || s->nheld == 0)
    return;
  size_t i = 0;
  if (s->nheld > 1 || s->untracked) {
    /* The unlock succeeded, so key was held and its class is listed; with
     * one class listed (and no untracked key) it can only be that one. */
    ordo__mutex_lock(&ck->mu);
    uint32_t c = class_of(ck, key, len, false);
    ordo__mutex_unlock(&ck->mu);
    while (i < s->nheld && s->held[i].cls != c)
      i++;
    if (i == s->nheld)
      return; /* a class past MAX_CLASSES, or re-ranked since the lock */
  }
  if (--s->held[i].count == 0)
    s->held[i] = s->held[--s->nheld];
}

void ordo__order_released_all(struct ordo__order *ck, ordo_txn_t *t) {
  ORDO_UNUSED(ck);
  order_txn *s = t->order_state;
  if (s) {
    s->nheld = 0;
    s->untracked = false;
  }
}

void ordo__order_txn_end(struct ordo__order *ck, void *state) {
  ORDO_UNUSED(ck);
  order_txn *s = state;
  if (!s)
    return;
  free(s->held);
  free(s->pend);
  free(s->dist);
  free(s->apend);
  free(s);
}

void ordo__order_async_arm(ordo_txn_t *t, ordo_done_cb cb, void *arg) {
  order_txn *s = t->order_state;
  if (NEVER(!s))
    return;
  /* Swap the buffers: the request's classes move aside, and the next
   * ordo__order_before writes the other buffer. */
  uint32_t *p = s->apend;
  size_t cap = s->cap_apend;
  s->apend = s->pend;
  s->napend = s->npend;
  s->cap_apend = s->cap_pend;
  s->pend = p;
  s->npend = 0;
  s->cap_pend = cap;
  s->ucb = cb;
  s->uarg = arg;
  atomic_store_explicit(&s->armed, true, memory_order_relaxed);
}

/* Ends the armed request: its classes are held if status is 0. */
static void async_end(order_txn *s, int status) {
  if (status == 0)
    for (size_t i = 0; i < s->napend; i++)
      hold_class(s, s->apend[i]);
  s->napend = 0;
  s->ucb = NULL;
  atomic_store_explicit(&s->armed, false, memory_order_release);
}

void ordo__order_async_now(ordo_txn_t *t, int rc) {
  order_txn *s = t->order_state;
  if (ALWAYS(s) && rc != ORDO_PENDING)
    async_end(s, rc);
}

void ordo__order_async_done(ordo_txn_t *t, int status, void *arg) {
  ORDO_UNUSED(arg);
  order_txn *s = t->order_state;
  /* Read before the call: the callback may start another request. */
  ordo_done_cb cb = s->ucb;
  void *uarg = s->uarg;
  async_end(s, status);
  cb(t, status, uarg);
}
