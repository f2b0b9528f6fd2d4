/*
 * model.c -- the reference model of the lock engine (see model.h and
 * tests/model/README.md). Each function is one rule of src/core/README.md
 * or src/detect/README.md, named as there; nothing here knows how the
 * engine is built (the timer heap, hold records, hints), only what it must
 * do: of stripes and the fast path, only what the lock objects' contract
 * says (a key's object lives in its stripe's cache; a fast-path hold
 * stays listed). Which grants the fast path made is told by the tester
 * (md_fast_took). Deadlock resolution is not modelled: model_test.c judges
 * the engine's resolution as an oracle and adopts its result.
 *
 * Interface: see model.h.
 */
#include "model.h"

#include <string.h>

/* ---- Helpers ------------------------------------------------------------ */

md_coverage md_cov;

static bool conflicts(int a, int b) {
  return a == ORDO_MODE_X || b == ORDO_MODE_X;
}

static md_hold *find_hold(md_txn *t, int key) {
  for (int i = 0; i < t->nhold; i++)
    if (t->hold[i].key == key)
      return &t->hold[i];
  return NULL;
}

static const md_hold *find_hold_c(const md_txn *t, int key) {
  return find_hold((md_txn *)t, key);
}

static void outcome(model *m, int s, int status) {
  if (m->nout < MD_MAX_OUT)
    m->out[m->nout++] = (md_outcome){s, status};
}

void md_init(model *m, int ntxn, int nkey, uint64_t now, uint64_t bound) {
  memset(m, 0, sizeof *m);
  m->ntxn = ntxn;
  m->nkey = nkey;
  m->now = now;
  m->bound = bound;
  m->max_locks = UINT64_MAX;
  m->empty_cap = MD_KEYS;
  for (int k = 0; k < MD_KEYS; k++)
    m->k[k].fast = -1;
}

void md_objects(model *m, uint64_t max_locks, int empty_cap,
                const int *stripe) {
  m->max_locks = max_locks;
  m->empty_cap = empty_cap;
  for (int k = 0; k < m->nkey; k++)
    m->k[k].stripe = stripe[k];
}

void md_begin(model *m, int s, uint64_t id) {
  memset(&m->t[s], 0, sizeof m->t[s]);
  m->t[s].live = true;
  m->t[s].id = id;
}

int md_normalize(md_req *r, int n) {
  /* Insertion sort by key, then merge equal keys into the strongest mode. */
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && r[j].key < r[j - 1].key; j--) {
      md_req x = r[j];
      r[j] = r[j - 1];
      r[j - 1] = x;
    }
  int out = 0;
  for (int i = 0; i < n; i++) {
    if (out > 0 && r[out - 1].key == r[i].key) {
      if (r[i].mode > r[out - 1].mode)
        r[out - 1].mode = r[i].mode;
      continue;
    }
    r[out++] = r[i];
  }
  return out;
}

/* ---- Who waits for whom (src/core/README.md) ---------------------------- */

/* covered(e): e's owner holds e's key in e's mode or a stronger one. */
bool md_covered(const model *m, int s, const md_req *e) {
  const md_hold *h = find_hold_c(&m->t[s], e->key);
  return h && h->mode >= e->mode;
}

/* waits_for_queued(e, q): q, queued ahead of e, is another owner's, the
 * modes conflict, and e is not covered. (waits_for_hold is the same without
 * the covered part, for holders.) */
static bool waits_for_queued(const model *m, int s, const md_req *e,
                             const md_qent *q) {
  return !md_covered(m, s, e) && q->slot != s && conflicts(e->mode, q->mode);
}

static bool starving(const model *m, int s) {
  return m->now - m->t[s].enq >= m->bound;
}

/* A queue out of arrival order (the detector reordered it). In arrival
 * order the enqueue times only grow along the queue, so a scan may stop at
 * the first waiter that does not starve: nobody behind it has waited
 * longer. */
static bool reordered(const model *m, int key) {
  const md_key *k = &m->k[key];
  for (int i = 1; i < k->nq; i++)
    if (m->t[k->q[i].slot].enq < m->t[k->q[i - 1].slot].enq)
      return true;
  return false;
}

static bool reserved_against(const model *m, int s, const md_req *e,
                             bool queued, bool chains, bool *unsure);

/* chained(o): some entry f of o, not covered, is reserved against by a
 * starving waiter ahead of it (without chains). */
static bool chained(const model *m, int o) {
  const md_txn *t = &m->t[o];
  for (int i = 0; i < t->nent; i++)
    if (!md_covered(m, o, &t->ent[i]) &&
        reserved_against(m, o, &t->ent[i], true, false, NULL))
      return true;
  return false;
}

/* reserved_against(e): a starving waiter ahead of e (all the queue, for a
 * request not queued yet) that e waits for, and, with chains, that is not
 * chained itself. Whether it is chained depends on other keys' queues,
 * which a request's first look (its stripes only, without wait_mu) may
 * not read: with unsure given, that look stops there, reserved and
 * unsure, and ordo__acquire asks again with wait_mu. */
static bool reserved_against(const model *m, int s, const md_req *e,
                             bool queued, bool chains, bool *unsure) {
  const md_key *k = &m->k[e->key];
  bool reord = reordered(m, e->key);
  for (int i = 0; i < k->nq; i++) {
    const md_qent *q = &k->q[i];
    if (queued && q->slot == s)
      break; /* up to e */
    if (!starving(m, q->slot)) {
      if (!reord)
        return false;
      md_cov.reordered_scan++;
      continue;
    }
    if (!waits_for_queued(m, s, e, q))
      continue;
    if (!chains)
      return true;
    if (unsure) {
      *unsure = true;
      return true;
    }
    if (!chained(m, q->slot))
      return true;
    md_cov.chained++;
  }
  return false;
}

/* grantable(w): for every entry, no other holder in a conflicting mode, and
 * (covered, or not reserved against). With unsure, a first look (above). */
static bool grantable_look(const model *m, int s, bool queued, bool *unsure) {
  const md_txn *t = &m->t[s];
  for (int i = 0; i < t->nent; i++) {
    const md_req *e = &t->ent[i];
    for (int o = 0; o < m->ntxn; o++) {
      const md_hold *h = o == s ? NULL : find_hold_c(&m->t[o], e->key);
      if (h && conflicts(e->mode, h->mode))
        return false;
    }
    if (m->k[e->key].nq > 0 && md_covered(m, s, e))
      md_cov.covered++;
    if (m->k[e->key].nq > 0 && !md_covered(m, s, e) &&
        reserved_against(m, s, e, queued, true, unsure)) {
      if (!unsure || !*unsure)
        md_cov.reserved++;
      return false;
    }
  }
  return true;
}

static bool grantable(const model *m, int s, bool queued) {
  return grantable_look(m, s, queued, NULL);
}

/* ---- Lock objects (src/core/README.md, invariant 4) --------------------- */

static bool held_by_any(const model *m, int key) {
  for (int s = 0; s < m->ntxn; s++)
    if (find_hold_c(&m->t[s], key))
      return true;
  return false;
}

static void unlist(model *m, int key) {
  m->k[key].listed = false;
  m->k[key].slow = false;
}

/* evict_one(stripe): the oldest listed object of the stripe is evicted;
 * one the fast path holds is adopted instead (taken off the list, its
 * holder now a listed one) and the next is looked at. */
static bool evict_one(model *m, int stripe) {
  for (;;) {
    int o = -1;
    for (int k = 0; k < m->nkey; k++)
      if (m->k[k].listed && m->k[k].stripe == stripe &&
          (o < 0 || m->k[k].lseq < m->k[o].lseq))
        o = k;
    if (o < 0)
      return false;
    unlist(m, o);
    if (m->k[o].fast >= 0) {
      m->k[o].fast = -1;
      md_cov.evict_adopted++;
      continue;
    }
    m->k[o].live = false;
    m->st.locks--;
    md_cov.evicted++;
    return true;
  }
}

/* retire(key): an object left with no holder and no waiter joins the end
 * of its stripe's list, idle for the fast path; past the stripe's cap the
 * oldest is evicted. */
static void retire(model *m, int key) {
  md_key *k = &m->k[key];
  if (!k->live || k->listed || k->nq > 0 || k->pinned || held_by_any(m, key))
    return;
  k->listed = true;
  k->slow = false;
  k->lseq = ++m->lseq;
  int n = 0;
  for (int o = 0; o < m->nkey; o++)
    n += m->k[o].listed && m->k[o].stripe == k->stripe;
  if (n > m->empty_cap)
    evict_one(m, k->stripe);
}

/* lookup(key): the key's object, if alive, moved off the fast path: a
 * fast-path hold is adopted (off the list); an idle listed object stays
 * listed but slow. */
static bool lookup(model *m, int key) {
  md_key *k = &m->k[key];
  if (!k->live)
    return false;
  if (k->fast >= 0) {
    k->fast = -1;
    unlist(m, key);
  } else if (k->listed) {
    k->slow = true;
  }
  return true;
}

/* lookup_or_create(key): the object found is taken off the list (no
 * eviction may take it while the request uses it); a new one needs room:
 * below max_locks, or an eviction in the key's own stripe. */
static int lookup_or_create(model *m, int key) {
  if (lookup(m, key)) {
    unlist(m, key);
    return 0;
  }
  if (m->st.locks >= m->max_locks && !evict_one(m, m->k[key].stripe))
    return ORDO_ELIMIT;
  m->k[key].live = true;
  m->st.locks++;
  if (m->k[key].lseq)
    md_cov.recreated++; /* it was listed once, so evicted since */
  return 0;
}

bool md_fast_took(model *m, int s) {
  md_fastc *f = &m->fastc;
  if (!f->valid || f->slot != s)
    return false;
  for (int i = 0; i < f->n; i++) {
    md_key *k = &m->k[f->key[i]];
    k->listed = true;
    k->slow = false;
    k->lseq = f->lseq[i];
    k->fast = s;
  }
  f->valid = false;
  return true;
}

/* ---- Transitions -------------------------------------------------------- */

void md_grant_all(model *m, int s) {
  md_txn *t = &m->t[s];
  for (int i = 0; i < t->nent; i++) {
    md_hold *h = find_hold(t, t->ent[i].key);
    if (h) {
      h->count++;
      if (t->ent[i].mode > h->mode) {
        h->mode = t->ent[i].mode; /* an upgrade is a new grant of X */
        h->fresh = true;
        h->seq = ++m->grant_seq;
      }
    } else {
      t->hold[t->nhold++] =
          (md_hold){t->ent[i].key, t->ent[i].mode, 1, true, ++m->grant_seq};
    }
  }
  m->st.acquired++;
}

static void dequeue(model *m, int s) {
  md_txn *t = &m->t[s];
  for (int i = 0; i < t->nent; i++) {
    md_key *k = &m->k[t->ent[i].key];
    int out = 0;
    for (int j = 0; j < k->nq; j++)
      if (k->q[j].slot != s)
        k->q[out++] = k->q[j];
    k->nq = out;
  }
}

/* A waiter leaves with its whole set granted. */
static void grant_waiter(model *m, int s) {
  dequeue(m, s);
  md_grant_all(m, s);
  m->t[s].waiting = false;
  m->t[s].woken = false;
  m->st.waiting--;
}

enum { WAKE_NO, WAKE_GRANTED, WAKE_POKED };

/* wake_one(w): a blocking waiter that has not starved is poked (once until
 * it tries); any other grantable waiter is handed its whole set. */
static int wake_one(model *m, int s) {
  md_txn *t = &m->t[s];
  m->st.wake_asks++;
  if (!grantable(m, s, true))
    return WAKE_NO;
  if (t->kind == MD_THREAD && m->now - t->enq < m->bound) {
    if (!t->woken) {
      t->woken = true;
      m->st.pokes++;
    }
    return WAKE_POKED;
  }
  grant_waiter(m, s);
  m->st.wakeups++;
  outcome(m, s, 0);
  return WAKE_GRANTED;
}

/* holders_block(key, q): a holder of key other than q's own slot holds it
 * in a mode that conflicts with q's (ordo__waits_for_hold). */
static bool holders_block(const model *m, int key, const md_qent *q) {
  for (int o = 0; o < m->ntxn; o++) {
    const md_hold *h = o == q->slot ? NULL : find_hold_c(&m->t[o], key);
    if (h && conflicts(q->mode, h->mode))
      return true;
  }
  return false;
}

/* wake_queue(key): the waiters in queue order, stopping after the first X
 * that was granted or poked. Those that the key's own holders block are
 * passed over without an ask (wake_one would say no to them); while the
 * key is held in X that is everyone but the holder, so only the holder's
 * own queued request, if any, is asked. (Asking every waiter, as the rule
 * was first written, wakes the same ones: a waiter blocked on this key is
 * never grantable. The tester compares the asks with the engine's.) */
static void wake_queue(model *m, int key) {
  md_key *k = &m->k[key];
  for (int o = 0; o < m->ntxn; o++) {
    const md_hold *h = find_hold_c(&m->t[o], key);
    if (!h || h->mode != ORDO_MODE_X)
      continue;
    md_cov.wake_xheld++;
    for (int i = 0; i < k->nq; i++)
      if (k->q[i].slot == o) {
        wake_one(m, o);
        break;
      }
    return;
  }
  int i = 0;
  for (;;) {
    while (i < k->nq && holders_block(m, key, &k->q[i])) {
      md_cov.wake_skipped++;
      i++;
    }
    if (i >= k->nq)
      return;
    int s = k->q[i].slot, mode = k->q[i].mode;
    int next = i + 1 < k->nq ? k->q[i + 1].slot : -1;
    if (wake_one(m, s) != WAKE_NO && mode == ORDO_MODE_X)
      return;
    if (next < 0)
      return;
    /* Find the next entry again: a grant took s's entry out. */
    for (i = 0; i < k->nq && k->q[i].slot != next; i++)
      ;
  }
}

int md_acquire(model *m, int s, const md_req *r, int n, uint64_t deadline,
               int kind) {
  md_txn *t = &m->t[s];
  if (t->waiting)
    return ORDO_EBUSY;
  memcpy(t->ent, r, (size_t)n * sizeof *r);
  t->nent = n;
  for (int i = 0; i < n; i++) {
    md_hold *h = find_hold(t, r[i].key);
    if (h && h->count >= INT32_MAX)
      return ORDO_ELIMIT;
  }
  /* What the fast path of a blocking call would find (md_fast_took). */
  md_fastc *f = &m->fastc;
  f->valid = kind == MD_THREAD;
  f->slot = s;
  f->n = n;
  for (int i = 0; i < n; i++) {
    const md_key *k = &m->k[r[i].key];
    f->valid &= r[i].mode == ORDO_MODE_X && k->live && k->listed &&
                k->fast < 0 && !k->slow;
    f->key[i] = r[i].key;
    f->lseq[i] = k->lseq;
  }
  /* ordo__acquire: each key's object in order, then the grant rules; a
   * first look unsure of a reservation gives the objects back and looks
   * again (with wait_mu). */
  for (bool again = false;; again = true) {
    for (int i = 0; i < n; i++)
      if (lookup_or_create(m, r[i].key) != 0) {
        for (int j = 0; j < i; j++)
          retire(m, r[j].key);
        m->st.limits++;
        md_cov.limited++;
        return ORDO_ELIMIT;
      }
    bool unsure = false;
    if (grantable_look(m, s, false, again ? NULL : &unsure)) {
      md_grant_all(m, s);
      return 0;
    }
    if (unsure) {
      for (int i = 0; i < n; i++)
        retire(m, r[i].key);
      continue;
    }
    break;
  }
  if (deadline <= m->now) {
    for (int i = 0; i < n; i++)
      retire(m, r[i].key);
    m->st.timeouts++;
    return ORDO_ETIMEDOUT;
  }
  for (int i = 0; i < n; i++) {
    md_key *k = &m->k[r[i].key];
    k->q[k->nq++] = (md_qent){s, r[i].mode};
  }
  t->waiting = true;
  t->enq = m->now;
  t->deadline = deadline;
  t->kind = kind;
  t->woken = false;
  m->st.waited++;
  m->st.waiting++;
  return ORDO_PENDING;
}

int md_retry(model *m, int s) {
  md_txn *t = &m->t[s];
  if (!t->waiting)
    return ORDO_ENOTHELD;
  t->woken = false;
  m->st.wake_asks++;
  if (grantable(m, s, true)) {
    grant_waiter(m, s);
    return 0;
  }
  /* Lost the race: pass the wake-up on to the waiters of its keys. */
  for (int i = 0; i < t->nent; i++)
    if (m->k[t->ent[i].key].nq > 0)
      wake_queue(m, t->ent[i].key);
  return ORDO_PENDING;
}

/* abort(w, status): the request leaves every queue; each key left with
 * no waiter is retired at once, in entry order, and each that still has
 * waiters is pinned, then woken, unpinned and retired, in entry order. */
static bool abort_wait(model *m, int s, int status) {
  md_txn *t = &m->t[s];
  if (!t->waiting)
    return false;
  dequeue(m, s);
  for (int i = 0; i < t->nent; i++) {
    md_key *k = &m->k[t->ent[i].key];
    k->pinned = k->nq > 0;
    if (!k->pinned)
      retire(m, t->ent[i].key);
  }
  t->waiting = false;
  m->st.waiting--;
  if (status == ORDO_ETIMEDOUT)
    m->st.timeouts++;
  else if (status == ORDO_ECANCELED)
    m->st.canceled++;
  outcome(m, s, status);
  for (int i = 0; i < t->nent; i++) {
    md_key *k = &m->k[t->ent[i].key];
    if (!k->pinned)
      continue;
    if (k->nq > 0)
      wake_queue(m, t->ent[i].key);
    k->pinned = false;
    retire(m, t->ent[i].key);
  }
  return true;
}

int md_cancel(model *m, int s) {
  return abort_wait(m, s, ORDO_ECANCELED) ? 0 : ORDO_ENOTHELD;
}

/* Drops hold i of slot s whole. A fast-path hold goes back to idle where
 * it is listed (it has no waiters: queueing adopts it); otherwise the key's
 * waiters are woken, or, with none, its object is retired. */
static void release_hold(model *m, int s, int i) {
  md_txn *t = &m->t[s];
  int key = t->hold[i].key;
  memmove(&t->hold[i], &t->hold[i + 1],
          (size_t)(t->nhold - i - 1) * sizeof t->hold[0]);
  t->nhold--;
  m->st.released++;
  if (m->k[key].fast == s) {
    m->k[key].fast = -1;
    return;
  }
  if (m->k[key].nq > 0)
    wake_queue(m, key);
  else
    retire(m, key);
}

int md_unlock(model *m, int s, int key) {
  md_txn *t = &m->t[s];
  for (int i = 0; i < t->nhold; i++) {
    if (t->hold[i].key != key)
      continue;
    if (t->hold[i].count > 1)
      t->hold[i].count--; /* still held: nobody can go */
    else
      release_hold(m, s, i);
    return 0;
  }
  /* ordo__release_one looks the key up to say so, and leaves an idle
   * listed object idle (idle_again): only a fast-path hold is adopted. */
  if (lookup(m, key) && m->k[key].listed)
    m->k[key].slow = false;
  return ORDO_ENOTHELD;
}

int md_unlock_all(model *m, int s) {
  int n = m->t[s].nhold;
  while (m->t[s].nhold > 0)
    release_hold(m, s, m->t[s].nhold - 1); /* newest first */
  return n;
}

void md_end(model *m, int s) {
  abort_wait(m, s, ORDO_ECANCELED);
  md_unlock_all(m, s);
  m->t[s].live = false;
}

void md_tick(model *m) {
  for (;;) {
    int due = -1;
    for (int s = 0; s < m->ntxn; s++)
      if (m->t[s].waiting && m->t[s].deadline <= m->now &&
          (due < 0 || m->t[s].deadline < m->t[due].deadline))
        due = s;
    if (due < 0)
      return;
    abort_wait(m, due, ORDO_ETIMEDOUT);
  }
}

/* ---- The wait-for graph (src/detect/README.md) --------------------------- */

/* edge[a][b]: a waits for b, by a hard edge (b holds a key of a's request
 * in a conflicting mode) or a soft one (b is queued ahead of a on one of
 * a's keys and a waits for it). */
static void graph(const model *m, bool edge[MD_TXNS][MD_TXNS]) {
  memset(edge, 0, sizeof(bool) * MD_TXNS * MD_TXNS);
  for (int a = 0; a < m->ntxn; a++) {
    const md_txn *t = &m->t[a];
    if (!t->waiting)
      continue;
    for (int i = 0; i < t->nent; i++) {
      const md_req *e = &t->ent[i];
      for (int b = 0; b < m->ntxn; b++) {
        const md_hold *h = b == a ? NULL : find_hold_c(&m->t[b], e->key);
        if (h && conflicts(e->mode, h->mode))
          edge[a][b] = true;
      }
      const md_key *k = &m->k[e->key];
      for (int j = 0; j < k->nq && k->q[j].slot != a; j++)
        if (waits_for_queued(m, a, e, &k->q[j]))
          edge[a][k->q[j].slot] = true;
    }
  }
}

/* reach[a][b]: a path a -> ... -> b of one edge or more (Warshall). */
static void closure(const model *m, bool reach[MD_TXNS][MD_TXNS]) {
  graph(m, reach);
  for (int k = 0; k < m->ntxn; k++)
    for (int a = 0; a < m->ntxn; a++)
      if (reach[a][k])
        for (int b = 0; b < m->ntxn; b++)
          if (reach[k][b])
            reach[a][b] = true;
}

bool md_has_cycle(const model *m) {
  bool reach[MD_TXNS][MD_TXNS];
  closure(m, reach);
  for (int a = 0; a < m->ntxn; a++)
    if (reach[a][a])
      return true;
  return false;
}

void md_scc(const model *m, int s, bool in[MD_TXNS]) {
  bool reach[MD_TXNS][MD_TXNS];
  closure(m, reach);
  for (int a = 0; a < MD_TXNS; a++)
    in[a] = a < m->ntxn && (a == s || (reach[s][a] && reach[a][s]));
}

bool md_free_request(const model *m, int s) {
  const md_txn *t = &m->t[s];
  if (!t->waiting)
    return false;
  for (int i = 0; i < t->nent; i++) {
    const md_req *e = &t->ent[i];
    for (int b = 0; b < m->ntxn; b++) {
      const md_hold *h = b == s ? NULL : find_hold_c(&m->t[b], e->key);
      if (h && conflicts(e->mode, h->mode))
        return false;
    }
    const md_key *k = &m->k[e->key];
    for (int j = 0; j < k->nq && k->q[j].slot != s; j++)
      if (conflicts(e->mode, k->q[j].mode))
        return false;
  }
  return true;
}
