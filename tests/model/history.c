/*
 * history.c -- the history checker (tests/model/README.md): T threads, each
 * with a txn of its own on one mem:// place with the default options (the
 * real clock, spinning, the starvation bound from hold times), run random
 * ordo_lock, ordo_lock_all, ordo_unlock and ordo_unlock_all on K keys and
 * log every call: a global sequence number taken just before it and just
 * after it returns, its result, and the fencing token of each key it was
 * granted. Then the log is checked:
 *
 *   1. No two txns' holds of a key overlap in conflicting modes. A hold is
 *      certainly in place over [the response of the call that granted it,
 *      the invocation of the call that released it] (an unlock, an
 *      unlock_all, the ORDO_EDEADLK that released everything, txn_end).
 *   2. Every grant was grantable at some moment of its call: no union of
 *      other txns' conflicting holds covers its whole [invocation,
 *      response].
 *   3. Fencing tokens of a key are distinct and increase in grant order:
 *      a grant whose response precedes another's invocation has the
 *      smaller token.
 *
 * Each thread also checks, after every call, that the engine's list of its
 * holds (ordo__owner_each_hold) agrees with
 * its own count of what it holds (so a failed call holds nothing new, and
 * a deadlock victim holds nothing). A watchdog dumps the lock table if the
 * run hangs. --selftest feeds the checker histories that break each rule
 * (and one that breaks none) and fails unless it tells them apart; every
 * run does it first, so the checker itself can fail.
 *
 *   model_history [--threads T] [--keys K] [--ops N] [--seed S] [--selftest]
 */
#include "../common/testutil.h"
#include "core/table.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#define MAX_THREADS 16
#define MAX_KEYS 8
#define SET 3

static const char *const KEYS[MAX_KEYS] = {"h:a", "h:b", "h:c", "h:d",
                                           "h:e", "h:f", "h:g", "h:h"};

enum { OP_LOCK, OP_UNLOCK, OP_UNLOCK_ALL, OP_END };

/* One logged call. A lock's keys are the request as the engine sees it
 * (sorted, merged); an unlock's key is key[0]. */
typedef struct hev {
  uint64_t inv, resp;
  uint8_t op, n;
  uint8_t key[SET], mode[SET];
  int rc;
  uint64_t tok[SET];
} hev;

typedef struct hlog {
  hev *ev;
  size_t n, cap;
} hlog;

static void log_add(hlog *l, const hev *e) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 1024;
    l->ev = realloc(l->ev, l->cap * sizeof *l->ev);
    if (!l->ev) {
      fprintf(stderr, "model_history: out of memory\n");
      abort();
    }
  }
  l->ev[l->n++] = *e;
}

/* ---- The checker --------------------------------------------------------- */

/* A hold of key by thr in mode over [s, e]; tok its token, inv the
 * invocation of the call that granted it. */
typedef struct ival {
  uint64_t s, e, inv, tok;
  int thr, key, mode;
} ival;

typedef struct ivals {
  ival *v;
  size_t n, cap;
} ivals;

static void iv_add(ivals *a, ival x) {
  if (a->n == a->cap) {
    a->cap = a->cap ? a->cap * 2 : 1024;
    a->v = realloc(a->v, a->cap * sizeof *a->v);
    if (!a->v)
      abort();
  }
  a->v[a->n++] = x;
}

static int iv_by_start(const void *a, const void *b) {
  const ival *x = a, *y = b;
  return x->s < y->s ? -1 : x->s > y->s;
}

static bool conflicts(int a, int b) {
  return a == ORDO_MODE_X || b == ORDO_MODE_X;
}

typedef struct verdict {
  int overlaps, ungrantable, tokens, open;
  char first[512];
} verdict;

static void note(verdict *v, int *count, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(verdict *v, int *count, const char *fmt, ...) {
  if ((*count)++ == 0 && !v->first[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->first, sizeof v->first, fmt, ap);
    va_end(ap);
  }
}

/* Builds the hold intervals from each thread's log. A key's count goes up
 * with each grant and down with each unlock; a first grant opens an
 * interval in its mode, an upgrade (S held, X granted) opens an X one
 * beside it, and the release of the last count closes both. */
static void intervals(hlog *logs, int nthr, int nkey, ivals *out, verdict *v) {
  for (int t = 0; t < nthr; t++) {
    uint32_t count[MAX_KEYS] = {0};
    int mode[MAX_KEYS] = {0};
    size_t open[MAX_KEYS][2];
    int nopen[MAX_KEYS] = {0};
    for (size_t i = 0; i < logs[t].n; i++) {
      const hev *e = &logs[t].ev[i];
      bool drop_all = e->op == OP_UNLOCK_ALL || e->op == OP_END ||
                      (e->op == OP_LOCK && e->rc == ORDO_EDEADLK);
      if (e->op == OP_LOCK && e->rc == 0) {
        for (int j = 0; j < e->n; j++) {
          int k = e->key[j];
          if (count[k] == 0 || e->mode[j] > mode[k]) {
            open[k][nopen[k]++] = out->n;
            iv_add(out, (ival){e->resp, UINT64_MAX, e->inv, e->tok[j], t, k,
                               e->mode[j]});
            if (e->mode[j] > mode[k])
              mode[k] = e->mode[j];
          }
          count[k]++;
        }
      } else if (e->op == OP_UNLOCK && e->rc == 0) {
        int k = e->key[0];
        if (count[k] > 0 && --count[k] == 0) {
          for (int j = 0; j < nopen[k]; j++)
            out->v[open[k][j]].e = e->inv;
          nopen[k] = 0;
          mode[k] = 0;
        }
      }
      if (drop_all) {
        for (int k = 0; k < nkey; k++) {
          for (int j = 0; j < nopen[k]; j++)
            out->v[open[k][j]].e = e->inv;
          nopen[k] = 0;
          count[k] = 0;
          mode[k] = 0;
        }
      }
    }
    for (int k = 0; k < nkey; k++)
      if (nopen[k])
        note(v, &v->open, "thread %d still holds %s at the end", t, KEYS[k]);
  }
}

/* Rule 1: a sweep over each key's intervals by start; every interval still
 * open when another starts is checked against it. */
static void check_overlaps(ivals *a, int nkey, verdict *v) {
  qsort(a->v, a->n, sizeof *a->v, iv_by_start);
  for (int k = 0; k < nkey; k++) {
    const ival *act[MAX_THREADS * 4];
    size_t nact = 0;
    for (size_t i = 0; i < a->n; i++) {
      const ival *x = &a->v[i];
      if (x->key != k)
        continue;
      size_t keep = 0;
      for (size_t j = 0; j < nact; j++)
        if (act[j]->e > x->s)
          act[keep++] = act[j];
      nact = keep;
      for (size_t j = 0; j < nact; j++)
        if (act[j]->thr != x->thr && conflicts(act[j]->mode, x->mode))
          note(v, &v->overlaps,
               "%s: thread %d held %s over [%" PRIu64 ", %" PRIu64
               "] while thread %d held %s over [%" PRIu64 ", %" PRIu64 "]",
               KEYS[k], act[j]->thr, act[j]->mode == ORDO_MODE_X ? "X" : "S",
               act[j]->s, act[j]->e, x->thr, x->mode == ORDO_MODE_X ? "X" : "S",
               x->s, x->e);
      if (nact < sizeof act / sizeof act[0])
        act[nact++] = x;
    }
  }
}

/* The intervals of each (key, thread), by start: one thread's holds of a
 * key follow each other (an upgrade's X interval ends with its S one), so
 * those that meet a window are found by a binary search and a short walk
 * back. */
typedef struct ivindex {
  const ival **v[MAX_KEYS][MAX_THREADS];
  size_t n[MAX_KEYS][MAX_THREADS];
} index_t;

static void index_build(const ivals *a, int nthr, int nkey, index_t *ix) {
  memset(ix, 0, sizeof *ix);
  for (size_t i = 0; i < a->n; i++)
    ix->n[a->v[i].key][a->v[i].thr]++;
  for (int k = 0; k < nkey; k++)
    for (int t = 0; t < nthr; t++) {
      ix->v[k][t] = malloc((ix->n[k][t] + 1) * sizeof(ival *));
      ix->n[k][t] = 0;
    }
  for (size_t i = 0; i < a->n; i++) /* a is sorted by start */
    ix->v[a->v[i].key][a->v[i].thr][ix->n[a->v[i].key][a->v[i].thr]++] =
        &a->v[i];
}

static void index_free(index_t *ix, int nthr, int nkey) {
  for (int k = 0; k < nkey; k++)
    for (int t = 0; t < nthr; t++)
      free(ix->v[k][t]);
}

/* Rule 2: for each grant, the other threads' conflicting holds of its keys
 * that meet its [inv, resp], merged: if they cover it whole, the grant had
 * no moment to happen in. Keys the thread held already in the mode it
 * asked (only counted again) are left out. */
static void check_grantable(hlog *logs, int nthr, const index_t *ix,
                            verdict *v) {
  for (int t = 0; t < nthr; t++) {
    uint32_t count[MAX_KEYS] = {0};
    int mode[MAX_KEYS] = {0};
    for (size_t i = 0; i < logs[t].n; i++) {
      const hev *e = &logs[t].ev[i];
      if (e->op == OP_LOCK && e->rc == 0) {
        ival cov[256];
        size_t nc = 0;
        for (int j = 0; j < e->n; j++) {
          int k = e->key[j];
          if (count[k] && mode[k] >= e->mode[j])
            continue;
          for (int o = 0; o < nthr; o++) {
            if (o == t)
              continue;
            const ival **l = ix->v[k][o];
            size_t lo = 0, hi = ix->n[k][o]; /* first with s >= resp */
            while (lo < hi) {
              size_t mid = (lo + hi) / 2;
              if (l[mid]->s < e->resp)
                lo = mid + 1;
              else
                hi = mid;
            }
            for (size_t x = lo; x-- > 0 && nc < 256;) {
              if (l[x]->e <= e->inv && (x == 0 || l[x - 1]->e <= e->inv))
                break;
              if (l[x]->e > e->inv && conflicts(l[x]->mode, e->mode[j]))
                cov[nc++] = *l[x];
            }
          }
        }
        qsort(cov, nc, sizeof *cov, iv_by_start);
        uint64_t reach = 0;
        bool started = false;
        for (size_t x = 0; x < nc; x++) {
          if (!started) {
            if (cov[x].s >= e->inv)
              break; /* a moment right after the invocation was free */
            started = true;
            reach = cov[x].e;
          } else if (cov[x].s < reach) {
            if (cov[x].e > reach)
              reach = cov[x].e;
          } else {
            break; /* a gap */
          }
        }
        if (started && reach > e->resp)
          note(v, &v->ungrantable,
               "thread %d was granted %s at no free moment of [%" PRIu64
               ", %" PRIu64 "]",
               t, KEYS[e->key[0]], e->inv, e->resp);
        for (int j = 0; j < e->n; j++) {
          count[e->key[j]]++;
          if (e->mode[j] > mode[e->key[j]])
            mode[e->key[j]] = e->mode[j];
        }
      } else if (e->op == OP_UNLOCK && e->rc == 0) {
        if (count[e->key[0]] > 0 && --count[e->key[0]] == 0)
          mode[e->key[0]] = 0;
      }
      if (e->op == OP_UNLOCK_ALL || e->op == OP_END ||
          (e->op == OP_LOCK && e->rc == ORDO_EDEADLK)) {
        memset(count, 0, sizeof count);
        memset(mode, 0, sizeof mode);
      }
    }
  }
}

static int iv_by_resp(const void *a, const void *b) {
  const ival *x = a, *y = b;
  return x->s < y->s ? -1 : x->s > y->s; /* s is the grant's response */
}

static int iv_by_inv(const void *a, const void *b) {
  const ival *x = a, *y = b;
  return x->inv < y->inv ? -1 : x->inv > y->inv;
}

static int u64_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Rule 3, per key: tokens distinct, and for grants g1, g2 with
 * resp(g1) < inv(g2), tok(g1) < tok(g2) (a sweep over the grants by
 * invocation, keeping the largest token of those already answered). */
static void check_tokens(const ivals *a, int nkey, verdict *v) {
  for (int k = 0; k < nkey; k++) {
    ival *g = NULL, *h = NULL;
    size_t n = 0;
    for (size_t i = 0; i < a->n; i++)
      n += a->v[i].key == k;
    if (n == 0)
      continue;
    g = malloc(n * sizeof *g);
    h = malloc(n * sizeof *h);
    uint64_t *toks = malloc(n * sizeof *toks);
    size_t m = 0;
    for (size_t i = 0; i < a->n; i++)
      if (a->v[i].key == k)
        g[m++] = a->v[i];
    memcpy(h, g, n * sizeof *g);
    for (size_t i = 0; i < n; i++)
      toks[i] = g[i].tok;
    qsort(toks, n, sizeof *toks, u64_cmp);
    for (size_t i = 0; i < n; i++)
      if (toks[i] == 0 || (i > 0 && toks[i] == toks[i - 1]))
        note(v, &v->tokens, "%s: token %" PRIu64 " %s", KEYS[k], toks[i],
             toks[i] ? "granted twice" : "is zero");
    qsort(g, n, sizeof *g, iv_by_resp);
    qsort(h, n, sizeof *h, iv_by_inv);
    uint64_t best = 0;
    const ival *bestv = NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
      while (j < n && g[j].s < h[i].inv) {
        if (g[j].tok > best) {
          best = g[j].tok;
          bestv = &g[j];
        }
        j++;
      }
      if (bestv && best >= h[i].tok)
        note(v, &v->tokens,
             "%s: thread %d's grant answered at %" PRIu64 " has token %" PRIu64
             ", thread %d's asked later at %" PRIu64 " has %" PRIu64,
             KEYS[k], bestv->thr, bestv->s, best, h[i].thr, h[i].inv, h[i].tok);
    }
    free(g);
    free(h);
    free(toks);
  }
}

static verdict check(hlog *logs, int nthr, int nkey) {
  verdict v;
  memset(&v, 0, sizeof v);
  ivals a = {0};
  intervals(logs, nthr, nkey, &a, &v);
  check_overlaps(&a, nkey, &v); /* sorts a by start */
  index_t *ix = malloc(sizeof *ix);
  index_build(&a, nthr, nkey, ix);
  check_grantable(logs, nthr, ix, &v);
  index_free(ix, nthr, nkey);
  free(ix);
  check_tokens(&a, nkey, &v);
  free(a.v);
  return v;
}

/* ---- The self-test ----------------------------------------------------------
 */

static hev ev_lock(uint64_t inv, uint64_t resp, int key, int mode, int rc,
                   uint64_t tok) {
  hev e;
  memset(&e, 0, sizeof e);
  e.inv = inv;
  e.resp = resp;
  e.op = OP_LOCK;
  e.n = 1;
  e.key[0] = (uint8_t)key;
  e.mode[0] = (uint8_t)mode;
  e.rc = rc;
  e.tok[0] = tok;
  return e;
}

static hev ev_unlock(uint64_t inv, uint64_t resp, int key) {
  hev e;
  memset(&e, 0, sizeof e);
  e.inv = inv;
  e.resp = resp;
  e.op = OP_UNLOCK;
  e.key[0] = (uint8_t)key;
  return e;
}

typedef struct scase {
  const char *name;
  hev t0[4], t1[4], t2[4];
  int n0, n1, n2;
  int want; /* 0 none, 1 overlap, 2 ungrantable, 3 tokens */
} scase;

static int selftest(void) {
  enum { X = ORDO_MODE_X, S = ORDO_MODE_S };
  const scase cases[] = {
      {"clean: X then X, S with S",
       {ev_lock(1, 2, 0, X, 0, 1), ev_unlock(3, 4, 0),
        ev_lock(9, 10, 1, S, 0, 3), ev_unlock(13, 14, 1)},
       {ev_lock(5, 6, 0, X, 0, 2), ev_unlock(7, 8, 0),
        ev_lock(11, 12, 1, S, 0, 4), ev_unlock(15, 16, 1)},
       {{0}},
       4,
       4,
       0,
       0},
      {"two X holds overlap",
       {ev_lock(1, 2, 0, X, 0, 1), ev_unlock(7, 8, 0)},
       {ev_lock(3, 4, 0, X, 0, 2), ev_unlock(5, 6, 0)},
       {{0}},
       2,
       2,
       0,
       1},
      {"S and X overlap",
       {ev_lock(1, 2, 0, S, 0, 1), ev_unlock(7, 8, 0)},
       {ev_lock(3, 4, 0, X, 0, 2), ev_unlock(5, 6, 0)},
       {{0}},
       2,
       2,
       0,
       1},
      {"X granted while two S holds cover its whole call",
       {ev_lock(1, 2, 0, S, 0, 1), ev_unlock(9, 10, 0)},
       {ev_lock(7, 16, 0, X, 0, 3), ev_unlock(17, 18, 0)},
       {ev_lock(5, 6, 0, S, 0, 2), ev_unlock(19, 20, 0)},
       2,
       2,
       2,
       2},
      {"a later grant has a smaller token",
       {ev_lock(1, 2, 0, X, 0, 5), ev_unlock(3, 4, 0)},
       {ev_lock(5, 6, 0, X, 0, 4), ev_unlock(7, 8, 0)},
       {{0}},
       2,
       2,
       0,
       3},
      {"a token granted twice",
       {ev_lock(1, 2, 0, S, 0, 5), ev_unlock(5, 6, 0)},
       {ev_lock(3, 4, 0, S, 0, 5), ev_unlock(7, 8, 0)},
       {{0}},
       2,
       2,
       0,
       3},
  };
  int bad = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const scase *sc = &cases[c];
    hlog logs[3] = {{0}};
    for (int i = 0; i < sc->n0; i++)
      log_add(&logs[0], &sc->t0[i]);
    for (int i = 0; i < sc->n1; i++)
      log_add(&logs[1], &sc->t1[i]);
    for (int i = 0; i < sc->n2; i++)
      log_add(&logs[2], &sc->t2[i]);
    verdict v = check(logs, 3, 2);
    int got[4] = {v.overlaps == 0 && v.ungrantable == 0 && v.tokens == 0 &&
                      v.open == 0,
                  v.overlaps > 0, v.ungrantable > 0, v.tokens > 0};
    if (!got[sc->want] || (sc->want == 0 && !got[0])) {
      fprintf(stderr,
              "model_history: self-test '%s' wrong (overlaps %d, "
              "ungrantable %d, tokens %d, open %d)\n",
              sc->name, v.overlaps, v.ungrantable, v.tokens, v.open);
      bad++;
    }
    for (int i = 0; i < 3; i++)
      free(logs[i].ev);
  }
  if (bad == 0)
    printf("self-test: the checker tells %zu histories apart\n",
           sizeof cases / sizeof cases[0]);
  return bad;
}

/* ---- The run ----------------------------------------------------------------
 */

typedef struct worker {
  int idx, nkey;
  long ops;
  uint64_t seed;
  ordo_t *o;
  _Atomic uint64_t *seq;
  hlog log;
  int errors;
  char err[256];
  pthread_t thr;
  uint64_t grants, deadlocks, timeouts;
} worker;

static uint64_t xs(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void werr(worker *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void werr(worker *w, const char *fmt, ...) {
  if (w->errors++ == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
  }
}

/* The engine's list of a txn's holds (ordo__owner_each_hold: key, mode,
 * token, count). It reads the owner's own records and, unlike ordo_held
 * and ordo_fence, leaves a fast-path hold where the fast path put it, so
 * the checks do not keep every key off the fast path. */
typedef struct heldv {
  uint32_t count[MAX_KEYS];
  int mode[MAX_KEYS];
  uint64_t tok[MAX_KEYS];
  int bad;
} heldv;

static void held_cb(void *arg, const void *key, size_t len, ordo_mode_t mode,
                    uint64_t fence, unsigned count) {
  heldv *h = arg;
  for (int k = 0; k < MAX_KEYS; k++)
    if (strlen(KEYS[k]) == len && memcmp(KEYS[k], key, len) == 0) {
      if (h->count[k])
        h->bad++; /* listed twice */
      h->count[k] = count;
      h->mode[k] = (int)mode;
      h->tok[k] = fence;
      return;
    }
  h->bad++;
}

/* The engine's view of this txn's holds against the thread's own; fills
 * the tokens of what it holds. */
static void agree(worker *w, ordo_txn_t *t, const uint32_t *count,
                  const int *mode, const char *after, heldv *h) {
  memset(h, 0, sizeof *h);
  ordo__owner_each_hold(ordo__engine_owner(t), held_cb, h);
  if (h->bad)
    werr(w, "after %s, the engine lists a key twice or an unknown one", after);
  for (int k = 0; k < w->nkey; k++)
    if (h->count[k] != count[k] || (count[k] > 0 && h->mode[k] != mode[k]))
      werr(w, "after %s, the engine holds %s %u %s, the thread counts %u %s",
           after, KEYS[k], h->count[k], h->mode[k] == ORDO_MODE_X ? "X" : "S",
           count[k], mode[k] == ORDO_MODE_X ? "X" : "S");
}

static void *worker_main(void *arg) {
  worker *w = arg;
  uint64_t g = w->seed | 1;
  ordo_txn_t *t;
  if (ordo_txn_begin(w->o, &t, NULL) != 0) {
    werr(w, "ordo_txn_begin failed");
    return NULL;
  }
  uint32_t count[MAX_KEYS] = {0};
  int mode[MAX_KEYS] = {0};
  for (long i = 0; i < w->ops; i++) {
    int nheld = 0;
    for (int k = 0; k < w->nkey; k++)
      nheld += count[k] > 0;
    hev e;
    memset(&e, 0, sizeof e);
    int p = (int)(xs(&g) % 100);
    if (i > 0 && i % 500 == 0) {
      e.op = OP_END;
    } else if (nheld == 0 || p < 50) {
      e.op = OP_LOCK;
      int n = 1 + (int)(xs(&g) % SET);
      ordo_req_t req[SET];
      for (int j = 0; j < n; j++) {
        int k = (int)(xs(&g) % (uint64_t)w->nkey);
        int m = xs(&g) % 100 < 40 ? ORDO_MODE_S : ORDO_MODE_X;
        req[j] = (ordo_req_t){KEYS[k], strlen(KEYS[k]), (ordo_mode_t)m};
        e.key[j] = (uint8_t)k;
        e.mode[j] = (uint8_t)m;
      }
      /* The request as the engine takes it: sorted, merged. */
      int m = 0;
      for (int j = 0; j < n; j++) {
        int at = -1;
        for (int x = 0; x < m; x++)
          if (e.key[x] == e.key[j])
            at = x;
        if (at >= 0) {
          if (e.mode[j] > e.mode[at])
            e.mode[at] = e.mode[j];
          continue;
        }
        e.key[m] = e.key[j];
        e.mode[m++] = e.mode[j];
      }
      for (int x = 1; x < m; x++)
        for (int y = x; y > 0 && e.key[y] < e.key[y - 1]; y--) {
          uint8_t tk = e.key[y], tm = e.mode[y];
          e.key[y] = e.key[y - 1];
          e.mode[y] = e.mode[y - 1];
          e.key[y - 1] = tk;
          e.mode[y - 1] = tm;
        }
      e.n = (uint8_t)m;
      int q = (int)(xs(&g) % 100);
      long tmo = q < 20 ? 0 : q < 85 ? 1 + (long)(xs(&g) % 5) : ORDO_FOREVER;
      e.inv = atomic_fetch_add(w->seq, 1);
      e.rc = n == 1 ? ordo_lock(t, req[0].key, req[0].len, req[0].mode, tmo)
                    : ordo_lock_all(t, req, (size_t)n, tmo);
      e.resp = atomic_fetch_add(w->seq, 1);
      if (e.rc == 0) {
        w->grants++;
        for (int j = 0; j < e.n; j++) {
          int k = e.key[j];
          count[k]++;
          if (e.mode[j] > mode[k])
            mode[k] = e.mode[j];
        }
      } else if (e.rc == ORDO_EDEADLK) {
        w->deadlocks++;
        memset(count, 0, sizeof count);
        memset(mode, 0, sizeof mode);
      } else if (e.rc == ORDO_ETIMEDOUT) {
        w->timeouts++;
      } else {
        werr(w, "a lock returned %s", ordo_err_name(e.rc));
      }
      heldv h;
      agree(w, t, count, mode, "a lock", &h);
      for (int j = 0; e.rc == 0 && j < e.n; j++)
        e.tok[j] = h.tok[e.key[j]];
    } else if (p < 85) {
      e.op = OP_UNLOCK;
      int k;
      do
        k = (int)(xs(&g) % (uint64_t)w->nkey);
      while (count[k] == 0);
      e.key[0] = (uint8_t)k;
      e.inv = atomic_fetch_add(w->seq, 1);
      e.rc = ordo_unlock(t, KEYS[k], strlen(KEYS[k]));
      e.resp = atomic_fetch_add(w->seq, 1);
      if (e.rc != 0)
        werr(w, "ordo_unlock of a held key returned %s", ordo_err_name(e.rc));
      else if (--count[k] == 0)
        mode[k] = 0;
      heldv h;
      agree(w, t, count, mode, "an unlock", &h);
    } else {
      e.op = OP_UNLOCK_ALL;
      e.inv = atomic_fetch_add(w->seq, 1);
      e.rc = ordo_unlock_all(t);
      e.resp = atomic_fetch_add(w->seq, 1);
      if (e.rc != nheld)
        werr(w, "ordo_unlock_all released %d keys of %d", e.rc, nheld);
      memset(count, 0, sizeof count);
      memset(mode, 0, sizeof mode);
      heldv h;
      agree(w, t, count, mode, "unlock_all", &h);
    }
    if (e.op == OP_END) {
      e.inv = atomic_fetch_add(w->seq, 1);
      ordo_txn_end(t);
      e.resp = atomic_fetch_add(w->seq, 1);
      memset(count, 0, sizeof count);
      memset(mode, 0, sizeof mode);
      if (ordo_txn_begin(w->o, &t, NULL) != 0) {
        werr(w, "ordo_txn_begin failed");
        return NULL;
      }
    }
    log_add(&w->log, &e);
  }
  hev e;
  memset(&e, 0, sizeof e);
  e.op = OP_END;
  e.inv = atomic_fetch_add(w->seq, 1);
  ordo_txn_end(t);
  e.resp = atomic_fetch_add(w->seq, 1);
  log_add(&w->log, &e);
  return NULL;
}

int main(int argc, char **argv) {
  int nthr = 4, nkey = 4;
  long ops = 150000;
  uint64_t seed = tu_now_ns();
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      nthr = atoi(argv[++i]);
    else if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc)
      nkey = atoi(argv[++i]);
    else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
      ops = atol(argv[++i]);
    else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
      seed = strtoull(argv[++i], NULL, 0);
    else if (strcmp(argv[i], "--selftest") == 0)
      return selftest() ? 1 : 0;
    else {
      fprintf(stderr, "usage: model_history [--threads T] [--keys K] "
                      "[--ops N] [--seed S] [--selftest]\n");
      return 2;
    }
  }
  if (nthr < 1 || nthr > MAX_THREADS || nkey < 1 || nkey > MAX_KEYS ||
      ops < 1) {
    fprintf(stderr, "model_history: bad --threads, --keys or --ops\n");
    return 2;
  }
  if (selftest())
    return 1;
  ops = tu_scaled(ops);
  printf("seed %" PRIu64 ": %d threads, %d keys, %ld calls each\n", seed, nthr,
         nkey, ops);
  fflush(stdout);
  /* The defaults (the real clock, spinning, the starvation bound from
   * hold times), but the deadlock-rate alarm: this run deadlocks on
   * purpose, and the alarm's warning is not under test. */
  ordo_options_t opt;
  ordo_options_init(&opt);
  opt.alarm_per_min = 0;
  ordo_t *o;
  if (ordo_open(&o, "mem://", &opt) != 0) {
    fprintf(stderr, "model_history: ordo_open failed\n");
    return 1;
  }
  tu_watchdog_start(o, 120, "model_history's threads");
  _Atomic uint64_t seq = 1;
  worker w[MAX_THREADS];
  memset(w, 0, sizeof w);
  uint64_t t0 = tu_now_ns();
  for (int i = 0; i < nthr; i++) {
    w[i] = (worker){.idx = i, .nkey = nkey, .ops = ops, .o = o, .seq = &seq};
    w[i].seed = seed * 0x9E3779B97F4A7C15u + (uint64_t)i * 0xBF58476D1CE4E5B9u;
    pthread_create(&w[i].thr, NULL, worker_main, &w[i]);
  }
  for (int i = 0; i < nthr; i++)
    pthread_join(w[i].thr, NULL);
  tu_watchdog_stop();
  double secs = (double)(tu_now_ns() - t0) / 1e9;
  int failed = 0;
  uint64_t grants = 0, deadlocks = 0, timeouts = 0, calls = 0;
  hlog logs[MAX_THREADS];
  for (int i = 0; i < nthr; i++) {
    if (w[i].errors) {
      fprintf(stderr, "FAIL: thread %d: %s (%d such)\n", i, w[i].err,
              w[i].errors);
      failed = 1;
    }
    logs[i] = w[i].log;
    grants += w[i].grants;
    deadlocks += w[i].deadlocks;
    timeouts += w[i].timeouts;
    calls += w[i].log.n;
  }
  ordo_stats_t st;
  ordo_stats(o, &st);
  ordo_close(o);
  verdict v = check(logs, nthr, nkey);
  if (v.overlaps || v.ungrantable || v.tokens || v.open) {
    fprintf(stderr,
            "FAIL: the history breaks the rules: %d overlapping holds, %d "
            "grants with no free moment, %d token faults, %d holds left "
            "open; the first: %s\n",
            v.overlaps, v.ungrantable, v.tokens, v.open, v.first);
    failed = 1;
  }
  if (st.sweep_finds != 0) {
    fprintf(stderr, "FAIL: the sweep found %" PRIu64 " cycle(s)\n",
            st.sweep_finds);
    failed = 1;
  }
  /* The run must have contended: a history of uncontended grants checks
   * little. */
  if (st.waited == 0 || deadlocks == 0) {
    fprintf(stderr,
            "FAIL: no contention (waited %" PRIu64 ", deadlocks %" PRIu64
            "): the run checked nothing hard\n",
            st.waited, deadlocks);
    failed = 1;
  }
  printf("%s: %" PRIu64 " calls in %.1f s, %" PRIu64 " grants, %" PRIu64
         " waited, %" PRIu64 " deadlock victims, %" PRIu64 " timeouts, %" PRIu64
         " pokes, %" PRIu64 " hand-overs\n",
         failed ? "FAIL" : "pass", calls, secs, grants, st.waited, deadlocks,
         timeouts, st.pokes, st.wakeups);
  for (int i = 0; i < nthr; i++)
    free(logs[i].ev);
  return failed;
}
