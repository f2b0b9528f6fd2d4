/*
 * probesim.c -- a deterministic discrete-event simulator of ordod's
 * cross-shard deadlock probes (docs/distributed.md, "The simulation"; the
 * protocol is /work/notes/i20/protocol.md's draft), and of the centralized
 * alternative, a coordinator that polls every shard's wait-for edges (as
 * Citus does). See sim/README.md for the model and its assumptions.
 *
 * Everything runs on one simulated clock in nanoseconds, from one event
 * heap ordered by (time, sequence number), with two seeded splitmix64
 * streams (the workload's and the network's): the same options and --seed
 * give the same output byte for byte. The simulator knows the true global
 * wait-for graph at every instant, which is what lets it count phantom aborts
 * (a victim aborted while it was on no live cycle) and missed cycles (a closed
 * cycle still live at the end).
 *
 * Interface: the sim_ functions sim.h declares for central.c and main.c.
 */
#include "sim.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *sim_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) {
    fprintf(stderr, "probesim: out of memory\n");
    exit(2);
  }
  return q;
}

const char *sim_msg_names[] = {MSG_KINDS(MSG_NAME)};

/* splitmix64: small, fast, and the same on every platform. Two streams:
 * the workload's (s->wrng: groups, gids, breakers) and the network's
 * (s->rng: jitter), so that the workload is the same whatever the detector
 * or its bug options do with the network. */
static uint64_t rnd_from(uint64_t *st) {
  uint64_t z = (*st += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static uint64_t rnd(struct sim *s) {
  return rnd_from(&s->rng);
}

static uint64_t wrnd(struct sim *s) {
  return rnd_from(&s->wrng);
}

double sim_wrnd01(struct sim *s) {
  return (double)(wrnd(s) >> 11) * (1.0 / 9007199254740992.0);
}

static int wrndn(struct sim *s, int n) {
  return (int)(wrnd(s) % (uint64_t)n);
}

double sim_rnd01(struct sim *s) {
  return (double)(rnd(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- The event heap, ordered by (time, sequence). ---- */

static bool ev_before(const struct ev *a, const struct ev *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

struct ev *sim_ev_new(int kind, simtime t) {
  struct ev *e = calloc(1, sizeof(*e));
  if (!e) {
    fprintf(stderr, "probesim: out of memory\n");
    exit(2);
  }
  e->kind = kind;
  e->t = t;
  return e;
}

void sim_push(struct sim *s, struct ev *e) {
  e->seq = s->seq++;
  GROW(s->heap, s->nheap, s->capheap);
  size_t i = s->nheap++;
  while (i > 0 && ev_before(e, s->heap[(i - 1) / 2])) {
    s->heap[i] = s->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  s->heap[i] = e;
}

struct ev *sim_pop(struct sim *s) {
  struct ev *top = s->heap[0], *last = s->heap[--s->nheap];
  size_t i = 0, n = s->nheap;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n)
      break;
    if (c + 1 < n && ev_before(s->heap[c + 1], s->heap[c]))
      c++;
    if (!ev_before(s->heap[c], last))
      break;
    s->heap[i] = s->heap[c];
    i = c;
  }
  if (n)
    s->heap[i] = last;
  return top;
}

void sim_at(struct sim *s, int kind, simtime t, int txn, uint32_t wseq,
            int key) {
  struct ev *e = sim_ev_new(kind, t);
  e->txn = txn;
  e->wseq = wseq;
  e->key = key;
  sim_push(s, e);
}

/* send -- puts a message on the network: one-way delay RTT/2 with seeded
 * jitter, and never before the pair's previous message (delivery in order
 * per pair of nodes, as one TCP connection gives). */
void sim_send(struct sim *s, int msg, int from, int to, struct ev *e) {
  double d = s->o.rtt_us * NS_PER_US / 2.0 *
             (1.0 + s->o.jitter * (2.0 * sim_rnd01(s) - 1.0));
  simtime t = s->now + (simtime)d;
  simtime *last = &s->last[(size_t)from * (size_t)s->nodes + (size_t)to];
  if (t < *last)
    t = *last;
  *last = t;
  e->kind = E_MSG;
  e->msg = msg;
  e->from = from;
  e->to = to;
  e->t = t;
  s->msgs[msg]++;
  sim_push(s, e);
}

struct ev *sim_msg_new(int txn, uint32_t wseq) {
  struct ev *e = sim_ev_new(E_MSG, 0);
  e->txn = txn;
  e->wseq = wseq;
  return e;
}

/* ---- The lock managers: keys, holds, waits. ---- */

static int txn_shard_of_wait(struct sim *s, int t) {
  return s->keys[s->tx[t].want].shard;
}

static bool waits_at(struct sim *s, int t, int shard) {
  return s->tx[t].waiting && txn_shard_of_wait(s, t) == shard;
}

int sim_holder_of_wait(struct sim *s, int t) {
  return s->keys[s->tx[t].want].holder;
}

/* gid_younger -- true when a's gid is larger than b's (bytewise order of
 * begin time, then the random half). */
static bool gid_younger(const struct txn *a, const struct txn *b) {
  return a->gid_hi > b->gid_hi ||
         (a->gid_hi == b->gid_hi && a->gid_lo > b->gid_lo);
}

/* pick_victim -- the protocol's rule: the lowest priority, then the youngest
 * gid. Every shard computes it from the hops alone, so every initiator of a
 * cycle picks the same hop. */
int sim_pick_victim(struct sim *s, const struct hop *h, int n) {
  int v = 0;
  for (int i = 1; i < n; i++) {
    if (h[i].prio < h[v].prio ||
        (h[i].prio == h[v].prio &&
         gid_younger(&s->tx[h[i].txn], &s->tx[h[v].txn])))
      v = i;
  }
  return v;
}

/* on_live_cycle -- the simulator's truth: is t on a cycle of the real global
 * wait-for graph now? Each txn waits for one key with one holder, so the
 * graph is functional and a walk from t either comes back or ends. */
bool sim_on_live_cycle(struct sim *s, int t) {
  int x = t;
  for (int steps = 0; steps < 4 * MAXHOPS; steps++) {
    if (!s->tx[x].waiting)
      return false;
    int h = sim_holder_of_wait(s, x);
    if (h < 0)
      return false;
    if (h == t)
      return true;
    x = h;
  }
  return false;
}

static void hold_add(struct sim *s, int t, int k) {
  struct txn *x = &s->tx[t];
  x->hold[x->nhold] = k;
  x->kb_shard[x->nhold] = -1;
  x->nhold++;
  s->keys[k].holder = t;
}

static void shard_wait_del(struct sim *s, int t) {
  struct shard *sh = &s->sh[txn_shard_of_wait(s, t)];
  int i = s->tx[t].widx;
  sh->wait[i] = sh->wait[--sh->nwait];
  s->tx[sh->wait[i]].widx = i;
}

/* heldat -- the distinct shards, other than `except`, where t holds keys:
 * the LOCK's HELDAT hint. Returns how many it wrote into out. */
static int heldat(struct sim *s, int t, int except, int *out) {
  int n = 0;
  for (int i = 0; i < s->tx[t].nhold; i++) {
    int sh = s->keys[s->tx[t].hold[i]].shard;
    bool seen = sh == except;
    for (int j = 0; j < n; j++)
      seen |= out[j] == sh;
    if (!seen)
      out[n++] = sh;
  }
  return n;
}

/* end_wait -- t's wait ends (granted, cancelled, timed out): the shards told
 * it was blocked are told it is not (PEER UNBLOCKED), and its pins go. */
static void end_wait(struct sim *s, int t) {
  struct txn *x = &s->tx[t];
  int at_shard = txn_shard_of_wait(s, t);
  shard_wait_del(s, t);
  if (x->delayed && !s->o.central) {
    int hs[MAXHOLD], n = heldat(s, t, at_shard, hs);
    for (int i = 0; i < n; i++)
      sim_send(s, M_UNBLOCKED, at_shard, hs[i], sim_msg_new(t, x->wseq));
  }
  x->waiting = x->delayed = x->tmo_deferred = false;
  x->pins = 0;
  x->want = -1;
}

static void grant(struct sim *s, int t, int k) {
  hold_add(s, t, k);
  /* A txn of the workload waits for one key at most: once granted, it has
   * all it wants and commits after its work. */
  sim_at(s, E_COMMIT, s->now + (simtime)(s->o.work_us * NS_PER_US), t, 0, -1);
}

static void release_at(struct sim *s, int t, int shard) {
  struct txn *x = &s->tx[t];
  for (int i = 0; i < x->nhold;) {
    int k = x->hold[i];
    if (s->keys[k].shard != shard) {
      i++;
      continue;
    }
    x->nhold--;
    x->hold[i] = x->hold[x->nhold];
    x->kb_shard[i] = x->kb_shard[x->nhold];
    x->kb_wseq[i] = x->kb_wseq[x->nhold];
    struct key *kk = &s->keys[k];
    kk->holder = -1;
    int w = kk->qhead;
    if (w >= 0) {
      kk->qhead = s->tx[w].qnext;
      if (kk->qhead < 0)
        kk->qtail = -1;
      end_wait(s, w);
      grant(s, w, k);
    }
  }
}

static void release_all(struct sim *s, int t) {
  while (s->tx[t].nhold > 0)
    release_at(s, t, s->keys[s->tx[t].hold[0]].shard);
}

static void cancel_wait(struct sim *s, int t) {
  struct key *kk = &s->keys[s->tx[t].want];
  int prev = -1;
  for (int w = kk->qhead; w >= 0; prev = w, w = s->tx[w].qnext) {
    if (w != t)
      continue;
    if (prev < 0)
      kk->qhead = s->tx[w].qnext;
    else
      s->tx[prev].qnext = s->tx[w].qnext;
    if (kk->qtail == t)
      kk->qtail = prev;
    break;
  }
  end_wait(s, t);
}

/* ---- Aborting a victim: confirm, decide, RELEASE, cancel, UNPIN. ---- */

static void pin(struct sim *s, int t) {
  if (s->o.bug_no_pins)
    return;
  if (s->tx[t].pins++ == 0)
    s->tx[t].pin_since = s->now;
}

static void do_timeout(struct sim *s, int t);

static void unpin(struct sim *s, int t, uint32_t wseq) {
  struct txn *x = &s->tx[t];
  if (!x->waiting || x->wseq != wseq || x->pins == 0)
    return;
  if (--x->pins == 0 && x->tmo_deferred)
    do_timeout(s, t);
}

/* hops_stand_at -- checks the hops of sess that are on shard: each names a
 * wait that still stands with its wseq, whose wait-for set still holds the
 * next hop's txn. When they all stand, pins those waits. */
static bool hops_stand_at(struct sim *s, const struct hop *h, int n,
                          int shard) {
  for (int i = 0; i < n; i++) {
    if (h[i].shard != shard)
      continue;
    int t = h[i].txn;
    if (!waits_at(s, t, shard) ||
        (!s->o.bug_no_versions && s->tx[t].wseq != h[i].wseq) ||
        sim_holder_of_wait(s, t) != h[(i + 1) % n].txn)
      return false;
  }
  for (int i = 0; i < n; i++)
    if (h[i].shard == shard)
      pin(s, h[i].txn);
  return true;
}

static void unpin_hops_at(struct sim *s, const struct hop *h, int n,
                          int shard) {
  for (int i = 0; i < n; i++)
    if (h[i].shard == shard)
      unpin(s, h[i].txn, h[i].wseq);
}

/* sim_msg_hops -- a message that carries a copy of the hops h[0..n). */
struct ev *sim_msg_hops(int txn, uint32_t wseq, const struct hop *h, int n) {
  struct ev *m = sim_msg_new(txn, wseq);
  m->nhops = n;
  memcpy(m->hops, h, (size_t)n * sizeof(*h));
  return m;
}

/* unpin_all -- UNPIN on every shard of the session that pinned its hops. */
static void unpin_all(struct sim *s, const struct sess *ss) {
  for (int i = 0; i < ss->nshards; i++) {
    if (!ss->yes[i])
      continue;
    if (ss->shards[i] == ss->V)
      unpin_hops_at(s, ss->hops, ss->nhops, ss->V);
    else
      sim_send(s, M_UNPIN, ss->V, ss->shards[i],
               sim_msg_hops(ss->victim, ss->wseq, ss->hops, ss->nhops));
  }
}

static void finish_abort(struct sim *s, int id) {
  struct sess *ss = &s->ss[id];
  struct txn *v = &s->tx[ss->victim];
  /* The victim's client gets -DEADLOCK now: its wait is cancelled and its
   * locks at V released. That instant ends the detection latency. */
  if (v->waiting)
    cancel_wait(s, ss->victim);
  release_all(s, ss->victim);
  v->state = T_VICTIM;
  if (ss->genuine && v->cyc >= 0) {
    GROW(s->lat, s->nlat, s->caplat);
    s->lat[s->nlat++] = (double)(s->now - s->cy[v->cyc].close_t) / NS_PER_US;
  }
  unpin_all(s, ss);
}

/* decide -- every edge of the cycle has been confirmed (and pinned): this is
 * the abort instant. The truth is checked here, before anything is undone:
 * a victim on no live cycle is a phantom abort. */
static void decide(struct sim *s, int id) {
  struct sess *ss = &s->ss[id];
  struct txn *v = &s->tx[ss->victim];
  v->aborted_wseq = ss->wseq + 1;
  s->victims_total++;
  ss->genuine = sim_on_live_cycle(s, ss->victim);
  if (!ss->genuine)
    s->phantoms++;
  if (v->cyc >= 0) {
    s->cy[v->cyc].victims_all++;
    s->cy[v->cyc].victims += ss->genuine;
  }
  int hs[MAXHOLD], n = heldat(s, ss->victim, ss->V, hs);
  ss->pending = n;
  for (int i = 0; i < n; i++) {
    struct ev *m = sim_msg_new(ss->victim, ss->wseq);
    m->aux = id;
    sim_send(s, M_RELEASE, ss->V, hs[i], m);
  }
  if (n == 0)
    finish_abort(s, id);
}

static int sess_new(struct sim *s, int victim, int V, const struct hop *h,
                    int n) {
  GROW(s->ss, s->nss, s->capss);
  struct sess *ss = &s->ss[s->nss];
  memset(ss, 0, sizeof(*ss));
  ss->victim = victim;
  ss->V = V;
  ss->wseq = s->tx[victim].wseq;
  ss->nhops = n;
  memcpy(ss->hops, h, (size_t)n * sizeof(*h));
  ss->ok = true;
  for (int i = 0; i < n; i++) {
    bool seen = false;
    for (int j = 0; j < ss->nshards; j++)
      seen |= ss->shards[j] == h[i].shard;
    if (!seen)
      ss->shards[ss->nshards++] = h[i].shard;
  }
  return s->nss++;
}

static void probe_start(struct sim *s, int t);

/* same_cycle -- whether hops h name the very waits of session ss. */
static bool same_cycle(const struct sess *ss, const struct hop *h, int n) {
  if (ss->nhops != n)
    return false;
  for (int i = 0; i < n; i++) {
    bool found = false;
    for (int j = 0; j < n; j++)
      found |= ss->hops[j].txn == h[i].txn && ss->hops[j].wseq == h[i].wseq &&
               ss->hops[j].shard == h[i].shard;
    if (!found)
      return false;
  }
  return true;
}

static void confirm_done(struct sim *s, int id) {
  struct sess *ss = &s->ss[id];
  if (ss->ok) {
    decide(s, id);
    return;
  }
  /* Some edge had gone: UNPIN where it was pinned, abort nothing. */
  struct txn *v = &s->tx[ss->victim];
  s->confirms_failed++;
  v->in_abort = false;
  if (v->abort_again && v->waiting && !s->o.central) {
    /* An ABORT for another cycle through this wait was dropped while this
     * confirmation ran; that cycle may stand. Without a new probe from the
     * victim nobody would look again (see sim/README.md, "Findings"). */
    s->reprobes++;
    probe_start(s, ss->victim);
  }
  v->abort_again = false;
  unpin_all(s, ss);
}

/* abort_at_v -- PEER ABORT has reached the victim's shard V (or was found
 * there). A second ABORT for one (gid, wseq) is dropped; so is one whose
 * wait has already ended. Otherwise V confirms every edge with the cycle's
 * shards, itself without a message. `confirm` false: the caller (the local
 * detector, or a bug option) decides at once. */
static void abort_at_v(struct sim *s, int V, const struct hop *h, int n, int vi,
                       bool confirm) {
  int victim = h[vi].txn;
  struct txn *v = &s->tx[victim];
  if (v->in_abort || v->aborted_wseq == h[vi].wseq + 1) {
    s->dup_aborts++;
    if (v->in_abort && !s->o.bug_no_reprobe)
      v->abort_again |= !same_cycle(&s->ss[v->sess], h, n);
    return;
  }
  if (!waits_at(s, victim, V) ||
      (!s->o.bug_no_versions && v->wseq != h[vi].wseq))
    return;
  v->in_abort = true;
  int id = sess_new(s, victim, V, h, n);
  v->sess = id;
  struct sess *ss = &s->ss[id];
  if (!confirm) {
    decide(s, id);
    return;
  }
  for (int i = 0; i < ss->nshards; i++) {
    if (ss->shards[i] == V) {
      ss->yes[i] = hops_stand_at(s, h, n, V);
      ss->ok &= ss->yes[i];
      continue;
    }
    struct ev *m = sim_msg_hops(victim, ss->wseq, h, n);
    m->aux = id;
    m->idx = i;
    sim_send(s, M_CONFIRM, V, ss->shards[i], m);
    ss->pending++;
  }
  if (ss->pending == 0)
    confirm_done(s, id);
}

/* cycle_found -- a probe closed at shard `here`: the victim by the rule, and
 * PEER ABORT to its shard (or straight to it when that is here). */
static void cycle_found(struct sim *s, int here, const struct hop *h, int n) {
  int vi = sim_pick_victim(s, h, n);
  bool confirm =
      !s->o.bug_no_confirm && (!s->o.central || s->o.central_confirm);
  if (h[vi].shard == here) {
    abort_at_v(s, here, h, n, vi, confirm);
    return;
  }
  struct ev *m = sim_msg_hops(h[vi].txn, h[vi].wseq, h, n);
  m->aux = vi;
  sim_send(s, M_ABORT, here, h[vi].shard, m);
}

/* ---- The probes (Chandy-Misra-Haas edge chasing). ---- */

static bool visited(const struct hop *h, int n, int shard, int t) {
  for (int i = 0; i < n; i++)
    if (h[i].shard == shard && h[i].txn == t)
      return true;
  return false;
}

/* known_blocked -- what shard T knows (from PEER BLOCKED) about where t, a
 * holder of a key at T, is blocked: its shard, or -1. */
static int known_blocked(struct sim *s, int t, int T, uint32_t *wseq) {
  struct txn *x = &s->tx[t];
  for (int i = 0; i < x->nhold; i++) {
    if (s->keys[x->hold[i]].shard == T && x->kb_shard[i] >= 0) {
      *wseq = x->kb_wseq[i];
      return x->kb_shard[i];
    }
  }
  return -1;
}

/* extend -- the probe's path ends in a hop whose txn waits at T: follow T's
 * edges, locally while the next txn also waits at T, then by PEER PROBE to
 * the shard where it is known to be blocked. The path closes when the next
 * txn is the initiator (path[0]); a path all on one shard is the local
 * detector's business. */
static void extend(struct sim *s, int T, struct hop *h, int n) {
  for (;;) {
    int x = h[n - 1].txn;
    int nx = sim_holder_of_wait(s, x);
    if (nx < 0)
      return;
    if (nx == h[0].txn) {
      bool local = true;
      for (int i = 0; i < n; i++)
        local &= h[i].shard == T;
      if (!local)
        cycle_found(s, T, h, n);
      return;
    }
    if (n == MAXHOPS)
      return;
    if (waits_at(s, nx, T)) {
      if (visited(h, n, T, nx))
        return;
      h[n++] = (struct hop){T, nx, s->tx[nx].wseq, s->tx[nx].prio};
      continue;
    }
    uint32_t w = 0;
    int U = known_blocked(s, nx, T, &w);
    if (U < 0 || visited(h, n, U, nx))
      return;
    h[n++] = (struct hop){U, nx, w, s->tx[nx].prio};
    sim_send(s, M_PROBE, T, U, sim_msg_hops(nx, w, h, n));
    return;
  }
}

static void probe_start(struct sim *s, int t) {
  if (!s->tx[t].waiting)
    return;
  struct hop h[MAXHOPS];
  int S = txn_shard_of_wait(s, t);
  h[0] = (struct hop){S, t, s->tx[t].wseq, s->tx[t].prio};
  extend(s, S, h, 1);
}

static void on_probe(struct sim *s, struct ev *e) {
  struct hop *last = &e->hops[e->nhops - 1];
  int t = last->txn;
  if (!waits_at(s, t, e->to) ||
      (!s->o.bug_no_versions && s->tx[t].wseq != last->wseq)) {
    s->probes_stale++;
    return;
  }
  extend(s, e->to, e->hops, e->nhops);
}

/* on_blocked -- PEER BLOCKED: remember where the holder is blocked, then
 * probe again from every local waiter on it whose delay has passed. Without
 * this, two waits that start within RTT/2 of each other each probe before
 * the other's BLOCKED has arrived, and their cycle is never found (see
 * --bug-no-reprobe and sim/README.md). */
static void on_blocked(struct sim *s, struct ev *e) {
  struct txn *x = &s->tx[e->txn];
  for (int i = 0; i < x->nhold; i++) {
    struct key *k = &s->keys[x->hold[i]];
    if (k->shard != e->to)
      continue;
    x->kb_shard[i] = e->from;
    x->kb_wseq[i] = e->wseq;
    if (s->o.bug_no_reprobe)
      continue;
    for (int w = k->qhead; w >= 0; w = s->tx[w].qnext)
      if (s->tx[w].delayed)
        probe_start(s, w);
  }
}

static void on_unblocked(struct sim *s, struct ev *e) {
  struct txn *x = &s->tx[e->txn];
  for (int i = 0; i < x->nhold; i++)
    if (s->keys[x->hold[i]].shard == e->to && x->kb_wseq[i] == e->wseq)
      x->kb_shard[i] = -1;
}

static void on_delay(struct sim *s, int t, uint32_t wseq) {
  struct txn *x = &s->tx[t];
  if (!x->waiting || x->wseq != wseq)
    return;
  x->delayed = true;
  int S = txn_shard_of_wait(s, t);
  int hs[MAXHOLD], n = heldat(s, t, S, hs);
  for (int i = 0; i < n; i++)
    sim_send(s, M_BLOCKED, S, hs[i], sim_msg_new(t, wseq));
  probe_start(s, t);
}

/* ---- The local detector: a cycle inside one shard, with no message. ---- */

static void local_detect(struct sim *s, int t) {
  struct hop h[MAXHOPS];
  int S = txn_shard_of_wait(s, t), n = 0, x = t;
  for (;;) {
    h[n++] = (struct hop){S, x, s->tx[x].wseq, s->tx[x].prio};
    int nx = sim_holder_of_wait(s, x);
    if (nx == t) {
      s->local_found++;
      abort_at_v(s, S, h, n, sim_pick_victim(s, h, n), false);
      return;
    }
    if (nx < 0 || n == MAXHOPS || !waits_at(s, nx, S) || visited(h, n, S, nx))
      return;
    x = nx;
  }
}

/* ---- The workload: cycles, chains that end, and breakers. ---- */

static int key_new(struct sim *s, int shard) {
  GROW(s->keys, s->nkeys, s->capkeys);
  s->keys[s->nkeys] = (struct key){shard, -1, -1, -1};
  return s->nkeys++;
}

static int txn_new(struct sim *s, int cyc) {
  GROW(s->tx, s->ntx, s->captx);
  struct txn *x = &s->tx[s->ntx];
  memset(x, 0, sizeof(*x));
  /* gid: 8 bytes of begin time (here the simulated clock plus a fixed
   * epoch), then 8 random bytes. */
  x->gid_hi = 1700000000ULL * 1000000000ULL + (uint64_t)s->now +
              (uint64_t)wrndn(s, 1000);
  x->gid_lo = wrnd(s);
  x->cyc = cyc;
  x->state = T_ACTIVE;
  x->want = -1;
  x->qnext = -1;
  return s->ntx++;
}

/* expected_us -- about how long detection takes, to place the breakers'
 * timeouts before it, around it and after it. */
static double expected_us(const struct opts *o) {
  if (o->central)
    return o->poll_ms * 1000.0 / 2 + 2 * o->rtt_us;
  return o->probe_delay_us + (o->len + 4) * o->rtt_us / 2;
}

/* start_group -- L txns each holding a fresh key on one of `span` random
 * shards; each then asks for the next one's key. A cycle's last asks for the
 * first's; a chain's last asks for nothing and commits after --hold-us. */
static void start_group(struct sim *s, bool cycle) {
  const struct opts *o = &s->o;
  int L = cycle ? o->len : 2 + wrndn(s, o->len - 1);
  int span = o->span < o->shards ? o->span : o->shards;
  int sel[MAXHOPS], cyc = -1;
  for (int i = 0; i < span && i < L; i++) {
    int sh;
    bool dup;
    do {
      sh = wrndn(s, o->shards);
      dup = false;
      for (int j = 0; j < i; j++)
        dup |= sel[j] == sh;
    } while (dup);
    sel[i] = sh;
  }
  if (cycle) {
    cyc = s->ncy++;
    s->cy[cyc] = (struct cycle){.first = s->ntx, .len = L};
  }
  int first = s->ntx, k0 = s->nkeys;
  for (int i = 0; i < L; i++) {
    int t = txn_new(s, cyc);
    if (sim_wrnd01(s) < 0.1)
      s->tx[t].prio = 1; /* a few txns ask for PRIORITY 1 */
    hold_add(s, t, key_new(s, sel[i % (span < L ? span : L)]));
  }
  simtime latest = s->now;
  for (int i = 0; i < L; i++) {
    if (!cycle && i == L - 1) {
      sim_at(s, E_COMMIT,
             s->now + (simtime)(sim_wrnd01(s) * 2 * o->hold_us * NS_PER_US),
             first + i, 0, -1);
      break;
    }
    simtime t = s->now + (simtime)(sim_wrnd01(s) * o->spread_us * NS_PER_US);
    latest = t > latest ? t : latest;
    sim_at(s, E_REQUEST, t, first + i, 0, k0 + (i + 1) % L);
  }
  if (cycle && sim_wrnd01(s) < o->break_frac) {
    /* A breaker: one member times out, from half the expected detection
     * time before the cycle closes to one and a half after. */
    double e = expected_us(o);
    simtime t = latest + (simtime)((sim_wrnd01(s) * 2.0 - 0.5) * e * NS_PER_US);
    int b = first + wrndn(s, L);
    s->cy[cyc].breaker = true;
    s->tx[b].retry = sim_wrnd01(s) < o->retry_frac;
    s->tx[b].retry_after = (simtime)(sim_wrnd01(s) * o->spread_us * NS_PER_US);
    sim_at(s, E_TIMEOUT, t > s->now ? t : s->now, b, 0, -1);
  }
}

static void on_request(struct sim *s, int t, int k) {
  struct txn *x = &s->tx[t];
  struct key *kk = &s->keys[k];
  if (x->state != T_ACTIVE)
    return;
  if (kk->holder < 0) {
    grant(s, t, k);
    return;
  }
  x->want = k;
  x->wseq++;
  x->waiting = true;
  x->qnext = -1;
  if (kk->qtail >= 0)
    s->tx[kk->qtail].qnext = t;
  else
    kk->qhead = t;
  kk->qtail = t;
  struct shard *sh = &s->sh[kk->shard];
  GROW(sh->wait, sh->nwait, sh->capwait);
  x->widx = sh->nwait;
  sh->wait[sh->nwait++] = t;
  if (x->cyc >= 0 && !s->cy[x->cyc].live && sim_on_live_cycle(s, t)) {
    /* The cycle closes now (again, after a retrying breaker). */
    s->cy[x->cyc].closed = s->cy[x->cyc].live = true;
    s->cy[x->cyc].close_t = s->now;
  }
  local_detect(s, t);
  if (!s->o.central && x->waiting)
    sim_at(s, E_DELAY, s->now + (simtime)(s->o.probe_delay_us * NS_PER_US), t,
           x->wseq, -1);
}

/* do_timeout -- a breaker's wait times out: unless a confirmation has pinned
 * it, the wait is cancelled and the txn gives up its keys. */
static void do_timeout(struct sim *s, int t) {
  struct txn *x = &s->tx[t];
  if (x->state != T_ACTIVE)
    return;
  if (x->waiting && x->pins > 0) {
    x->tmo_deferred = true;
    sim_at(s, E_PINCHECK,
           x->pin_since + (simtime)(s->o.pin_bound_ms * NS_PER_MS), t, x->wseq,
           -1);
    return;
  }
  if (x->cyc >= 0 && s->cy[x->cyc].live && sim_on_live_cycle(s, t)) {
    s->cy[x->cyc].broken_after++;
    s->cy[x->cyc].live = false;
  }
  if (x->waiting && x->retry) {
    /* A retrying breaker keeps its key and asks again soon: a new wait,
     * with a new wseq, which may close the cycle again. */
    int k = x->want;
    cancel_wait(s, t);
    x->retry = false;
    sim_at(s, E_REQUEST, s->now + x->retry_after, t, 0, k);
    return;
  }
  if (x->waiting)
    cancel_wait(s, t);
  release_all(s, t);
  x->state = T_TIMEDOUT;
}

static void on_pincheck(struct sim *s, int t, uint32_t wseq) {
  struct txn *x = &s->tx[t];
  if (x->waiting && x->wseq == wseq && x->tmo_deferred &&
      s->now >= x->pin_since + (simtime)(s->o.pin_bound_ms * NS_PER_MS)) {
    x->pins = 0; /* the pin bound has passed: the timeout goes ahead */
    do_timeout(s, t);
  }
}

static void on_msg(struct sim *s, struct ev *e) {
  switch (e->msg) {
  case M_BLOCKED:
    on_blocked(s, e);
    break;
  case M_UNBLOCKED:
    on_unblocked(s, e);
    break;
  case M_PROBE:
    on_probe(s, e);
    break;
  case M_ABORT: {
    bool confirm =
        !s->o.bug_no_confirm && (!s->o.central || s->o.central_confirm);
    abort_at_v(s, e->to, e->hops, e->nhops, e->aux, confirm);
    break;
  }
  case M_CONFIRM: {
    struct ev *r = sim_msg_new(e->txn, e->wseq);
    r->aux = e->aux;
    r->idx = e->idx;
    r->ok = hops_stand_at(s, e->hops, e->nhops, e->to);
    sim_send(s, M_CONFIRM_REPLY, e->to, e->from, r);
    break;
  }
  case M_CONFIRM_REPLY: {
    struct sess *ss = &s->ss[e->aux];
    ss->yes[e->idx] = e->ok;
    ss->ok &= ss->yes[e->idx];
    if (--ss->pending == 0)
      confirm_done(s, e->aux);
    break;
  }
  case M_RELEASE: {
    release_at(s, e->txn, e->to);
    struct ev *r = sim_msg_new(e->txn, e->wseq);
    r->aux = e->aux;
    sim_send(s, M_RELEASE_ACK, e->to, e->from, r);
    break;
  }
  case M_RELEASE_ACK:
    if (--s->ss[e->aux].pending == 0)
      finish_abort(s, e->aux);
    break;
  case M_UNPIN:
    unpin_hops_at(s, e->hops, e->nhops, e->to);
    break;
  }
}

void sim_dispatch(struct sim *s, struct ev *e) {
  switch (e->kind) {
  case E_MSG:
    on_msg(s, e);
    break;
  case E_START:
    start_group(s, e->aux == 1);
    break;
  case E_REQUEST:
    on_request(s, e->txn, e->key);
    break;
  case E_DELAY:
    on_delay(s, e->txn, e->wseq);
    break;
  case E_TIMEOUT:
    do_timeout(s, e->txn);
    break;
  case E_PINCHECK:
    on_pincheck(s, e->txn, e->wseq);
    break;
  case E_COMMIT:
    if (s->tx[e->txn].state == T_ACTIVE && !s->tx[e->txn].waiting) {
      release_all(s, e->txn);
      s->tx[e->txn].state = T_DONE;
    }
    break;
  }
}
