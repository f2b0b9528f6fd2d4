/*
 * model.c -- the reference model of the lock engine (see model.h and
 * tests/model/README.md). Each function is one rule of src/core/README.md
 * or src/detect/README.md, named as there; nothing here knows how the
 * engine is built (stripes, the fast path, the timer heap), only what it
 * must do. Deadlock resolution is not modelled: model_test.c judges the
 * engine's resolution as an oracle and adopts its result.
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
                             bool queued, bool chains);

/* chained(o): some entry f of o, not covered, is reserved against by a
 * starving waiter ahead of it (without chains). */
static bool chained(const model *m, int o) {
  const md_txn *t = &m->t[o];
  for (int i = 0; i < t->nent; i++)
    if (!md_covered(m, o, &t->ent[i]) &&
        reserved_against(m, o, &t->ent[i], true, false))
      return true;
  return false;
}

/* reserved_against(e): a starving waiter ahead of e (all the queue, for a
 * request not queued yet) that e waits for, and, with chains, that is not
 * chained itself. */
static bool reserved_against(const model *m, int s, const md_req *e,
                             bool queued, bool chains) {
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
    if (!chains || !chained(m, q->slot))
      return true;
    md_cov.chained++;
  }
  return false;
}

/* grantable(w): for every entry, no other holder in a conflicting mode, and
 * (covered, or not reserved against). */
static bool grantable(const model *m, int s, bool queued) {
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
        reserved_against(m, s, e, queued, true)) {
      md_cov.reserved++;
      return false;
    }
  }
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

/* wake_queue(key): each waiter in queue order, stopping after the first X
 * that was granted or poked. */
static void wake_queue(model *m, int key) {
  md_key *k = &m->k[key];
  int i = 0;
  while (i < k->nq) {
    int s = k->q[i].slot, mode = k->q[i].mode;
    int next = i + 1 < k->nq ? k->q[i + 1].slot : -1;
    if (wake_one(m, s) != WAKE_NO && mode == ORDO_MODE_X)
      break;
    if (next < 0)
      break;
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
  if (grantable(m, s, false)) {
    md_grant_all(m, s);
    return 0;
  }
  if (deadline <= m->now) {
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

/* abort(w, status): the request leaves every queue, then each of its keys
 * that still has waiters is woken, in entry order. */
static bool abort_wait(model *m, int s, int status) {
  md_txn *t = &m->t[s];
  if (!t->waiting)
    return false;
  dequeue(m, s);
  t->waiting = false;
  m->st.waiting--;
  if (status == ORDO_ETIMEDOUT)
    m->st.timeouts++;
  else if (status == ORDO_ECANCELED)
    m->st.canceled++;
  outcome(m, s, status);
  for (int i = 0; i < t->nent; i++)
    if (m->k[t->ent[i].key].nq > 0)
      wake_queue(m, t->ent[i].key);
  return true;
}

int md_cancel(model *m, int s) {
  return abort_wait(m, s, ORDO_ECANCELED) ? 0 : ORDO_ENOTHELD;
}

/* Drops hold i of slot s whole; its key's waiters are woken. */
static void release_hold(model *m, int s, int i) {
  md_txn *t = &m->t[s];
  int key = t->hold[i].key;
  memmove(&t->hold[i], &t->hold[i + 1],
          (size_t)(t->nhold - i - 1) * sizeof t->hold[0]);
  t->nhold--;
  m->st.released++;
  if (m->k[key].nq > 0)
    wake_queue(m, key);
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
