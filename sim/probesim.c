/*
 * probesim.c -- a deterministic discrete-event simulator of ordod's
 * cross-shard deadlock probes (docs/distributed.md, "The servers' side" is
 * the protocol it follows, "The simulation" what it shows), and of the
 * centralized alternative, a coordinator that polls every shard's wait-for
 * edges (as Citus does). See sim/README.md for the model and its
 * assumptions.
 *
 * Everything runs on one simulated clock in nanoseconds, from one event
 * heap ordered by (time, sequence number), with three seeded splitmix64
 * streams (the workload's, the network's and the faults'): the same options
 * and --seed give the same output byte for byte. The simulator knows the
 * true global wait-for graph at every instant, which is what lets it count
 * phantom aborts (a victim aborted while it was on no live cycle), missed
 * cycles (a closed cycle still live at the end, or for longer than a
 * bound), and two holders (a txn that runs believing it holds a key that
 * its shard gave to another or let go of).
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

/* The protocol's fixed bounds (docs/distributed.md): the re-dial of a
 * broken link, the probe ticks' ceiling, the pins' renewal period. */
#define REDIAL_MIN (50 * NS_PER_MS)
#define REDIAL_MAX (1000 * NS_PER_MS)
#define TICK_FIRST (2 * NS_PER_MS)
#define TICK_MAX (500 * NS_PER_MS)
#define RENEW_EVERY (500 * NS_PER_MS)
/* The simulator's own bound on a wait-for set (a key's holders and the
 * waiters queued ahead): the workload never comes near it. */
#define WFMAX 32

/* What the event being handled does to a cycle it breaks. */
enum { CAUSE_OTHER, CAUSE_TIMEOUT, CAUSE_FAULT, CAUSE_VICTIM };

static void fatal(const char *what) {
  fprintf(stderr, "probesim: %s\n", what);
  exit(2);
}

void *sim_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q)
    fatal("out of memory");
  return q;
}

const char *sim_msg_names[] = {MSG_KINDS(MSG_NAME)};

/* splitmix64: small, fast, and the same on every platform. Three streams:
 * the workload's (s->wrng: groups, gids, breakers), the network's (s->rng:
 * jitter) and the faults' (s->frng), so that the workload is the same
 * whatever the detector, its bug options or the faults do, and a run with
 * no fault draws nothing from the faults' stream. */
static uint64_t rnd_from(uint64_t *st) {
  uint64_t z = (*st += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static double to01(uint64_t x) {
  return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

static uint64_t wrnd(struct sim *s) {
  return rnd_from(&s->wrng);
}

double sim_wrnd01(struct sim *s) {
  return to01(wrnd(s));
}

static int wrndn(struct sim *s, int n) {
  return (int)(wrnd(s) % (uint64_t)n);
}

double sim_rnd01(struct sim *s) {
  return to01(rnd_from(&s->rng));
}

static double frnd01(struct sim *s) {
  return to01(rnd_from(&s->frng));
}

static int frndn(struct sim *s, int n) {
  return (int)(rnd_from(&s->frng) % (uint64_t)n);
}

/* ---- The event heap, ordered by (time, sequence). ---- */

static bool ev_before(const struct ev *a, const struct ev *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

struct ev *sim_ev_new(int kind, simtime t) {
  struct ev *e = calloc(1, sizeof(*e));
  if (!e)
    fatal("out of memory");
  e->kind = kind;
  e->t = t;
  e->home = -1;
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

/* at_home -- a timer or a client's request that the shard `home` handles:
 * while that shard is frozen it waits (see sim_defer_frozen). */
static struct ev *at_home(struct sim *s, int kind, simtime t, int home,
                          int txn) {
  struct ev *e = sim_ev_new(kind, t);
  e->home = home;
  e->txn = txn;
  sim_push(s, e);
  return e;
}

/* ---- The network: links, their breaks, delays and re-dials. ---- */

static bool is_shard(const struct sim *s, int n) {
  return n >= 0 && n < s->o.shards;
}

#define LINKS_PER_BLOCK 4096

static size_t link_slot(const struct sim *s, uint64_t key) {
  uint64_t h = key * 0x9e3779b97f4a7c15ULL;
  return (size_t)(h >> 20) & (s->lcap - 1);
}

/* link_of -- lf's link to lt, made (up, generation 0) the first time it is
 * asked for. Its address stays valid for the whole run. */
static struct link *link_of(struct sim *s, int lf, int lt) {
  uint64_t key = 1 + (uint64_t)lf * (uint64_t)s->nodes + (uint64_t)lt;
  size_t i = s->lcap ? link_slot(s, key) : 0;
  while (s->lcap && s->lkey[i] != 0) {
    if (s->lkey[i] == key) {
      size_t n = (size_t)s->lidx[i];
      return &s->lblock[n / LINKS_PER_BLOCK][n % LINKS_PER_BLOCK];
    }
    i = (i + 1) & (s->lcap - 1);
  }
  if (2 * (s->nlinks + 1) > s->lcap) {
    /* Grow the map (the links themselves stay where they are). */
    size_t ocap = s->lcap;
    uint64_t *okey = s->lkey;
    int32_t *oidx = s->lidx;
    s->lcap = ocap ? 2 * ocap : 1024;
    s->lkey = calloc(s->lcap, sizeof(*s->lkey));
    s->lidx = sim_xrealloc(NULL, s->lcap * sizeof(*s->lidx));
    if (!s->lkey)
      fatal("out of memory");
    for (size_t j = 0; j < ocap; j++) {
      if (okey[j] == 0)
        continue;
      size_t k = link_slot(s, okey[j]);
      while (s->lkey[k] != 0)
        k = (k + 1) & (s->lcap - 1);
      s->lkey[k] = okey[j];
      s->lidx[k] = oidx[j];
    }
    free(okey);
    free(oidx);
    return link_of(s, lf, lt);
  }
  size_t n = s->nlinks++;
  if (n % LINKS_PER_BLOCK == 0) {
    s->lblock =
        sim_xrealloc(s->lblock, (n / LINKS_PER_BLOCK + 1) * sizeof(*s->lblock));
    s->lblock[n / LINKS_PER_BLOCK] =
        calloc(LINKS_PER_BLOCK, sizeof(struct link));
    if (!s->lblock[n / LINKS_PER_BLOCK])
      fatal("out of memory");
  }
  s->lkey[i] = key;
  s->lidx[i] = (int32_t)n;
  return &s->lblock[n / LINKS_PER_BLOCK][n % LINKS_PER_BLOCK];
}

/* net_send -- puts a message from `from` to `to` on lf's link to lt (a
 * question rides its sender's link, an answer the asker's). One-way delay
 * RTT/2 with seeded jitter, plus a delay spike sometimes, and never before
 * the previous message the same way on the same connection (delivery in
 * order, as TCP gives, so a spike holds back what follows it). A link that
 * is down drops the message, which its sender learns at once (false). A
 * link may break while the message travels: it is lost, with everything
 * else in flight on that link. */
static bool net_send(struct sim *s, int msg, int from, int to, int lf, int lt,
                     struct ev *e) {
  struct link *L = link_of(s, lf, lt);
  bool peers = is_shard(s, lf) && is_shard(s, lt);
  e->kind = E_MSG;
  e->msg = msg;
  e->from = from;
  e->to = to;
  e->lf = lf;
  e->lt = lt;
  e->home = is_shard(s, to) ? to : -1;
  if (peers && L->down) {
    s->msgs_dropped++;
    free(e);
    return false;
  }
  e->gen = L->gen;
  double d = s->o.rtt_us * NS_PER_US / 2.0 *
             (1.0 + s->o.jitter * (2.0 * sim_rnd01(s) - 1.0));
  if (s->o.spike > 0 && frnd01(s) < s->o.spike) {
    d += s->o.spike_ms * NS_PER_MS * (0.5 + frnd01(s));
    s->spikes++;
  }
  /* One order per connection and direction: a question and the answers to
   * it ride lf's link, the other shard's own questions its own link. */
  simtime t = s->now + (simtime)d;
  simtime *last = &L->last[from == lf ? 0 : 1];
  if (t < *last)
    t = *last;
  *last = t;
  e->t = t;
  if (peers && s->o.link_break > 0 && frnd01(s) < s->o.link_break) {
    struct ev *b = sim_ev_new(
        E_LINKBREAK, s->now + (simtime)((double)(t - s->now) * frnd01(s)));
    b->lf = lf;
    b->lt = lt;
    b->gen = L->gen;
    sim_push(s, b);
  }
  s->msgs[msg]++;
  sim_push(s, e);
  return true;
}

/* sim_send -- a question, or a message nobody answers, on from's link. */
bool sim_send(struct sim *s, int msg, int from, int to, struct ev *e) {
  return net_send(s, msg, from, to, from, to, e);
}

/* answer -- the answer to message q, on the link q came by. */
static bool answer(struct sim *s, int msg, const struct ev *q, struct ev *a) {
  return net_send(s, msg, q->to, q->from, q->lf, q->lt, a);
}

struct ev *sim_msg_new(int txn, uint32_t wseq) {
  struct ev *e = sim_ev_new(E_MSG, 0);
  e->txn = txn;
  e->wseq = wseq;
  return e;
}

/* sim_msg_hops -- a message that carries a copy of the hops h[0..n). */
struct ev *sim_msg_hops(int txn, uint32_t wseq, const struct hop *h, int n) {
  struct ev *m = sim_msg_new(txn, wseq);
  m->nhops = n;
  memcpy(m->hops, h, (size_t)n * sizeof(*h));
  return m;
}

/* on_linkbreak -- the link loses what is in flight on it (the messages carry
 * the old generation), and its peer forgets what it was told on it (the
 * BLOCKED entries, checked against the generation). Its owner sees the
 * break (E_LINKFAIL) and dials again after 50 ms, doubling to 1 s while
 * the link keeps breaking within a second of coming up. */
static void on_linkbreak(struct sim *s, struct ev *e) {
  struct link *L = link_of(s, e->lf, e->lt);
  if (L->down || L->gen != e->gen)
    return;
  L->gen++;
  L->down = true;
  L->nblocked = 0;
  if (L->backoff > 0 && s->now - L->last_up < REDIAL_MAX)
    L->backoff = 2 * L->backoff < REDIAL_MAX ? 2 * L->backoff : REDIAL_MAX;
  else
    L->backoff = REDIAL_MIN;
  s->link_breaks++;
  struct ev *f = at_home(s, E_LINKFAIL, s->now, e->lf, -1);
  f->lf = e->lf;
  f->lt = e->lt;
  f = at_home(s, E_LINKUP, s->now + L->backoff, e->lf, -1);
  f->lf = e->lf;
  f->lt = e->lt;
}

/* ---- The lock managers: keys, holds, waits, sessions. ---- */

static int wait_shard(struct sim *s, int t) {
  return s->keys[s->tx[t].want].shard;
}

static bool waits_at(struct sim *s, int t, int shard) {
  return s->tx[t].waiting && wait_shard(s, t) == shard;
}

static struct slot *slot_of(struct sim *s, int t, int shard, bool create) {
  struct txn *x = &s->tx[t];
  for (int i = 0; i < x->nslot; i++)
    if (x->slot[i].shard == shard)
      return &x->slot[i];
  if (!create)
    return NULL;
  if (x->nslot == MAXSLOT)
    fatal("a txn on more shards than MAXSLOT");
  struct slot *sl = &x->slot[x->nslot++];
  memset(sl, 0, sizeof(*sl));
  sl->shard = shard;
  sl->kb_from = -1;
  sl->req_deferred = -1;
  return sl;
}

static bool holds(struct sim *s, int t, int k) {
  const struct key *kk = &s->keys[k];
  for (int i = 0; i < kk->nholders; i++)
    if (kk->holders[i] == t)
      return true;
  return false;
}

static bool holds_at(struct sim *s, int t, int shard) {
  const struct txn *x = &s->tx[t];
  for (int i = 0; i < x->nhold; i++)
    if (s->keys[x->hold[i]].shard == shard)
      return true;
  return false;
}

/* sim_waits_for -- the txns t waits for: every holder of its key whose mode
 * conflicts with t's, and every waiter queued ahead of it (the engine
 * grants a queue in order). Writes them to out; returns how many. */
int sim_waits_for(struct sim *s, int t, int *out, int max) {
  const struct txn *x = &s->tx[t];
  int n = 0;
  if (!x->waiting)
    return 0;
  const struct key *k = &s->keys[x->want];
  for (int i = 0; i < k->nholders; i++) {
    int h = k->holders[i];
    if (h != t && (x->wmode == MODE_X || k->mode == MODE_X)) {
      if (n == max)
        fatal("a wait-for set larger than WFMAX");
      out[n++] = h;
    }
  }
  for (int w = k->qhead; w >= 0 && w != t; w = s->tx[w].qnext) {
    if (n == max)
      fatal("a wait-for set larger than WFMAX");
    out[n++] = w;
  }
  return n;
}

static bool waits_for(struct sim *s, int t, int u) {
  int wf[WFMAX], n = sim_waits_for(s, t, wf, WFMAX);
  for (int i = 0; i < n; i++)
    if (wf[i] == u)
      return true;
  return false;
}

/* gid_younger -- true when a's gid is larger than b's (bytewise order of
 * begin time, then the random half). */
static bool gid_younger(const struct txn *a, const struct txn *b) {
  return a->gid_hi > b->gid_hi ||
         (a->gid_hi == b->gid_hi && a->gid_lo > b->gid_lo);
}

static bool better_victim(struct sim *s, const struct hop *a,
                          const struct hop *b) {
  return a->prio < b->prio ||
         (a->prio == b->prio && gid_younger(&s->tx[a->txn], &s->tx[b->txn]));
}

/* pick_victim -- the protocol's rule: the lowest priority, then the youngest
 * gid. Every shard computes it from the hops alone, so every initiator of a
 * cycle picks the same hop. */
int sim_pick_victim(struct sim *s, const struct hop *h, int n) {
  int v = 0;
  for (int i = 1; i < n; i++)
    if (better_victim(s, &h[i], &h[v]))
      v = i;
  return v;
}

/* reach -- whether a walk along wait-for edges from x comes to target,
 * marking what it saw so that each txn is walked once. */
static bool reach(struct sim *s, int x, int target) {
  int wf[WFMAX], n = sim_waits_for(s, x, wf, WFMAX);
  for (int i = 0; i < n; i++) {
    if (wf[i] == target)
      return true;
    if (s->mark[wf[i]] == s->stamp)
      continue;
    s->mark[wf[i]] = s->stamp;
    if (reach(s, wf[i], target))
      return true;
  }
  return false;
}

/* on_live_cycle -- the simulator's truth: is t on a cycle of the real global
 * wait-for graph now? */
bool sim_on_live_cycle(struct sim *s, int t) {
  s->stamp++;
  s->mark[t] = s->stamp;
  return reach(s, t, t);
}

/* sim_cycle_stands -- whether every edge of designed cycle c stands now. */
bool sim_cycle_stands(struct sim *s, const struct cycle *c) {
  for (int i = 0; i < c->n; i++)
    if (!waits_for(s, c->mem[i], c->mem[(i + 1) % c->n]))
      return false;
  return true;
}

/* cycles_recheck -- t's wait or holds changed: each of its designed cycles
 * that stood may have been broken, by what the event being handled is. */
static void cycles_recheck(struct sim *s, int t) {
  const struct txn *x = &s->tx[t];
  for (int i = 0; i < x->ncyc; i++) {
    struct cycle *c = &s->cy[x->cyc[i]];
    if (!c->live || sim_cycle_stands(s, c))
      continue;
    c->live = false;
    simtime d = s->now - c->close_t;
    if (d > c->longest)
      c->longest = d;
    if (d > (simtime)(s->o.miss_bound_ms * NS_PER_MS))
      c->over_bound = true;
    if (s->cause == CAUSE_TIMEOUT)
      c->broken_timeout++;
    else if (s->cause == CAUSE_FAULT)
      c->broken_fault++;
  }
}

/* ---- What clients believe they hold, and the two-holders check. ---- */

static bool running(struct sim *s, int t) {
  return s->tx[t].state == T_ACTIVE && !s->tx[t].blocked;
}

static void bel_add(struct sim *s, int t, int k) {
  struct txn *x = &s->tx[t];
  struct key *kk = &s->keys[k];
  if (kk->nbel == MAXSHARE)
    fatal("more believers of a key than MAXSHARE");
  x->bel_bad[x->nbel] = false;
  x->bel[x->nbel++] = k;
  kk->bel[kk->nbel++] = t;
}

static void bel_del(struct sim *s, int t, int i) {
  struct txn *x = &s->tx[t];
  struct key *kk = &s->keys[x->bel[i]];
  for (int j = 0; j < kk->nbel; j++)
    if (kk->bel[j] == t) {
      kk->bel[j] = kk->bel[--kk->nbel];
      break;
    }
  x->nbel--;
  x->bel[i] = x->bel[x->nbel];
  x->bel_bad[i] = x->bel_bad[x->nbel];
}

/* bel_clear_at -- t's client stops believing it holds its keys at shard (-1:
 * everywhere): it released them, gave up, was told -DEADLOCK, went away, or
 * its lease there ran out (the lease is the contract, behind fencing). */
static void bel_clear_at(struct sim *s, int t, int shard) {
  struct txn *x = &s->tx[t];
  for (int i = x->nbel; i-- > 0;)
    if (shard < 0 || s->keys[x->bel[i]].shard == shard)
      bel_del(s, t, i);
}

/* two_holders_check -- a running client that believes it holds a key its
 * shard does not give it: the shard gave it to another txn, or let it go so
 * that the next to ask gets it. Each (client, key) counts once. */
static void two_holders_check(struct sim *s, int t) {
  struct txn *x = &s->tx[t];
  if (!running(s, t))
    return;
  for (int i = 0; i < x->nbel; i++)
    if (!x->bel_bad[i] && !holds(s, t, x->bel[i])) {
      x->bel_bad[i] = true;
      s->two_holders++;
    }
}

/* ---- Holds and waits in the engine. ---- */

static void hold_add(struct sim *s, int t, int k, int mode) {
  struct txn *x = &s->tx[t];
  struct key *kk = &s->keys[k];
  if (x->nhold == MAXHOLD || kk->nholders == MAXSHARE)
    fatal("more holds than MAXHOLD or MAXSHARE");
  x->hold[x->nhold++] = k;
  if (kk->nholders == 0)
    kk->mode = mode;
  kk->holders[kk->nholders++] = t;
  slot_of(s, t, kk->shard, true);
}

static void shard_wait_del(struct sim *s, int t) {
  struct shard *sh = &s->sh[wait_shard(s, t)];
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

static void recheck_now(struct sim *s, int t, int shard);

static void rec_drop(struct sim *s, int t, int sess, int shard, int kind);

/* end_wait -- t's wait ends (granted, cancelled, timed out, aborted): the
 * shards told it was blocked are told it is not (PEER UNBLOCKED), its pins
 * go with it, and what they held back at that shard may go ahead. */
static void end_wait(struct sim *s, int t) {
  struct txn *x = &s->tx[t];
  int S = wait_shard(s, t);
  shard_wait_del(s, t);
  for (int i = 0; i < x->nslot; i++) {
    struct slot *sl = &x->slot[i];
    if (x->delayed && !s->o.central && sl->shard != S && sl->told != TOLD_NOT &&
        sl->told_wseq == x->wseq)
      sim_send(s, M_UNBLOCKED, S, sl->shard, sim_msg_new(t, x->wseq));
    sl->told = TOLD_NOT;
  }
  x->waiting = x->delayed = x->tmo_deferred = x->local_skipped = false;
  x->want = -1;
  rec_drop(s, t, -2, -1, R_PIN);
  recheck_now(s, t, S);
  cycles_recheck(s, t);
}

static void grant(struct sim *s, int t, int k, int mode) {
  struct txn *x = &s->tx[t];
  hold_add(s, t, k, mode);
  if (x->state != T_ACTIVE)
    return; /* a client gone: its session's end will let it go */
  x->blocked = false;
  /* The client hears its grant: it believes it holds k, and runs. */
  bel_add(s, t, k);
  two_holders_check(s, t);
  /* A txn of the workload waits for one key at most: once granted, it has
   * all it wants and commits after its work. */
  sim_at(s, E_COMMIT, s->now + (simtime)(s->o.work_us * NS_PER_US), t, 0, -1);
}

/* grant_queue -- grants k's queue in order while its head is compatible with
 * the holders; another client running in the belief that it holds k is
 * then a second holder. */
static void grant_queue(struct sim *s, int k) {
  struct key *kk = &s->keys[k];
  while (kk->qhead >= 0) {
    int w = kk->qhead;
    int m = s->tx[w].wmode;
    if (kk->nholders > 0 && (kk->mode == MODE_X || m == MODE_X))
      break;
    kk->qhead = s->tx[w].qnext;
    if (kk->qhead < 0)
      kk->qtail = -1;
    end_wait(s, w);
    grant(s, w, k, m);
    for (int i = 0; i < kk->nbel; i++)
      if (kk->bel[i] != w)
        two_holders_check(s, kk->bel[i]);
  }
}

static void release_at(struct sim *s, int t, int shard) {
  struct txn *x = &s->tx[t];
  int freed[MAXHOLD], nf = 0;
  for (int i = 0; i < x->nhold;) {
    int k = x->hold[i];
    struct key *kk = &s->keys[k];
    if (kk->shard != shard) {
      i++;
      continue;
    }
    x->hold[i] = x->hold[--x->nhold];
    for (int j = 0; j < kk->nholders; j++)
      if (kk->holders[j] == t) {
        kk->holders[j] = kk->holders[--kk->nholders];
        break;
      }
    freed[nf++] = k;
  }
  cycles_recheck(s, t);
  for (int i = 0; i < nf; i++)
    grant_queue(s, freed[i]);
}

static void cancel_wait(struct sim *s, int t) {
  int k = s->tx[t].want;
  struct key *kk = &s->keys[k];
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
  grant_queue(s, k); /* those queued behind t may go now */
}

/* ---- Pins and freezes, per abort, with a bound and renewal. ---- */

static simtime pin_bound(const struct sim *s) {
  return (simtime)(s->o.pin_bound_ms * NS_PER_MS);
}

/* rec_add -- pins t's wait (R_PIN) or freezes t's session (R_FREEZE) at
 * shard under abort sess, for the pin bound. Under --bug-one-pin a wait or a
 * session has one deadline, as before the fix: a pin pushes out every
 * record's end at once (each still names its abort, for the give-up rule
 * of take_effect alone), and any abort's UNPIN clears them all. */
static void rec_add(struct sim *s, int sess, int t, int shard, int kind) {
  if (s->o.bug_no_pins)
    return;
  if (s->o.bug_one_pin)
    for (int r = s->tx[t].recs; r >= 0; r = s->recs[r].next)
      if (s->recs[r].kind == kind && s->recs[r].shard == shard)
        s->recs[r].until = s->now + pin_bound(s);
  int r = s->freerec;
  if (r >= 0) {
    s->freerec = s->recs[r].next;
  } else {
    GROW(s->recs, s->nrecs, s->caprecs);
    r = s->nrecs++;
  }
  s->recs[r] =
      (struct rec){sess, t, shard, kind, s->tx[t].recs, s->now + pin_bound(s)};
  s->tx[t].recs = r;
}

/* rec_drop -- drops t's records of abort sess (-2: any abort's) at shard
 * (-1: any) of kind (-1: any). */
static void rec_drop(struct sim *s, int t, int sess, int shard, int kind) {
  int *p = &s->tx[t].recs;
  while (*p >= 0) {
    struct rec *r = &s->recs[*p];
    if ((sess == -2 || r->sess == sess) && (shard < 0 || r->shard == shard) &&
        (kind < 0 || r->kind == kind)) {
      int dead = *p;
      *p = r->next;
      s->recs[dead].next = s->freerec;
      s->freerec = dead;
    } else {
      p = &r->next;
    }
  }
}

/* rec_unpin -- abort sess's UNPIN, or its failed confirmation, drops its own
 * records. Under --bug-one-pin an UNPIN names no owner: it drops the wait's
 * or the session's deadline whoever set it. */
static void rec_unpin(struct sim *s, int t, int sess, int shard, int kind) {
  rec_drop(s, t, s->o.bug_one_pin ? -2 : sess, shard, kind);
}

/* rec_held -- whether t has a record of kind at shard still in force, other
 * than abort `except`'s; *until gets the earliest end among them. */
static bool rec_held(struct sim *s, int t, int shard, int kind, int except,
                     simtime *until) {
  bool any = false;
  for (int r = s->tx[t].recs; r >= 0; r = s->recs[r].next) {
    const struct rec *x = &s->recs[r];
    if (x->kind != kind || x->shard != shard || x->until <= s->now ||
        (except >= 0 && x->sess == except))
      continue;
    if (!any || x->until < *until)
      *until = x->until;
    any = true;
  }
  return any;
}

static void rec_renew(struct sim *s, int t, int sess, int shard) {
  for (int r = s->tx[t].recs; r >= 0; r = s->recs[r].next)
    if ((s->o.bug_one_pin || s->recs[r].sess == sess) &&
        s->recs[r].shard == shard && s->recs[r].until > s->now)
      s->recs[r].until = s->now + pin_bound(s);
}

static bool pinned(struct sim *s, int t, simtime *until) {
  return s->tx[t].waiting && rec_held(s, t, wait_shard(s, t), R_PIN, -1, until);
}

static bool frozen(struct sim *s, int t, int shard, simtime *until) {
  return rec_held(s, t, shard, R_FREEZE, -1, until);
}

/* end_held_back -- whether what would end t's session at shard (its
 * connection closing, its lease) waits: while its wait there is pinned or
 * its session there frozen. Under --bug-no-defer nothing waits; under
 * --bug-release-first a freeze holds back the session's requests but not
 * its end, as in the code before the fix. */
static bool end_held_back(struct sim *s, int t, int shard, simtime *until) {
  if (s->o.bug_no_defer)
    return false;
  simtime u1 = 0, u2 = 0;
  bool p = waits_at(s, t, shard) && pinned(s, t, &u1);
  bool f = !s->o.bug_release_first && frozen(s, t, shard, &u2);
  if (p && f)
    *until = u1 < u2 ? u1 : u2;
  else if (p || f)
    *until = p ? u1 : u2;
  return p || f;
}

/* recheck_at -- an E_RECCHECK for t at shard when `until` has passed. */
static void recheck_at(struct sim *s, int t, int shard, simtime until) {
  struct slot *sl = slot_of(s, t, shard, true);
  if (sl->recheck > s->now && sl->recheck <= until)
    return;
  sl->recheck = until;
  struct ev *e = at_home(s, E_RECCHECK, until, shard, t);
  e->key = shard;
}

/* recheck_now -- t's pins or freezes at shard went: what they held back
 * there is looked at again, after what is being handled now. */
static void recheck_now(struct sim *s, int t, int shard) {
  struct ev *e = at_home(s, E_RECCHECK, s->now, shard, t);
  e->key = shard;
}

/* ---- Clients and their sessions. ---- */

/* client_op -- the client asks shard for a release, or its session there
 * ends; each shard handles its part when it gets it. */
static void client_op(struct sim *s, int t, int shard, int op) {
  struct ev *e = at_home(s, E_CLIENTOP, s->now, shard, t);
  e->key = shard;
  e->aux = op;
}

/* client_gives_up -- t's client stops: it gives up every key it holds. */
static void client_gives_up(struct sim *s, int t, int state) {
  struct txn *x = &s->tx[t];
  bel_clear_at(s, t, -1);
  x->blocked = false;
  x->state = state;
  for (int i = 0; i < x->nslot; i++)
    if (holds_at(s, t, x->slot[i].shard))
      client_op(s, t, x->slot[i].shard, OP_RELEASE);
}

/* session_end -- t's session at shard ends: its wait there is cancelled and
 * its keys there go. A client whose LOCK so failed gives up the rest. */
static void session_end(struct sim *s, int t, int shard) {
  struct txn *x = &s->tx[t];
  int save = s->cause;
  s->cause = CAUSE_FAULT;
  slot_of(s, t, shard, true)->ended = true;
  bool waited = waits_at(s, t, shard);
  if (waited)
    cancel_wait(s, t);
  release_at(s, t, shard);
  if (waited && x->state == T_ACTIVE)
    client_gives_up(s, t, T_GONE);
  s->cause = save;
}

static void do_timeout(struct sim *s, int t);
static void on_request(struct sim *s, int t, int k);
static void local_detect(struct sim *s, int t);

/* settle -- looks again at what t's pins and freezes at shard held back (a
 * timeout, a LOCK, a release, a session's end, a local detection), and
 * does what may go ahead; the rest is looked at again when the earliest
 * record holding it runs out, unless renewed or dropped before. */
static void settle(struct sim *s, int t, int shard) {
  struct txn *x = &s->tx[t];
  struct slot *sl = slot_of(s, t, shard, true);
  simtime next = 0, u = 0;
#define LATER(u) (next = (next == 0 || (u) < next) ? (u) : next)
  if (x->tmo_deferred && waits_at(s, t, shard)) {
    if (pinned(s, t, &u)) {
      LATER(u);
    } else {
      x->tmo_deferred = false;
      do_timeout(s, t);
    }
  }
  if (sl->req_deferred >= 0) {
    if (frozen(s, t, shard, &u)) {
      LATER(u);
    } else {
      int k = sl->req_deferred;
      sl->req_deferred = -1;
      on_request(s, t, k);
    }
  }
  if (sl->rel_deferred) {
    if (frozen(s, t, shard, &u)) {
      LATER(u);
    } else {
      sl->rel_deferred = false;
      release_at(s, t, shard);
    }
  }
  if (sl->end_deferred) {
    if (end_held_back(s, t, shard, &u)) {
      LATER(u);
    } else {
      sl->end_deferred = false;
      session_end(s, t, shard);
    }
  }
  if (x->local_skipped && waits_at(s, t, shard) && !pinned(s, t, &u)) {
    x->local_skipped = false;
    local_detect(s, t);
  }
#undef LATER
  if (next)
    recheck_at(s, t, shard, next);
}

/* on_clientop -- a client's release, or its session's end, reaches shard.
 * A release waits while the session is frozen (its requests wait); an end
 * waits while the session is pinned or frozen (docs/distributed.md, 4.). */
static void on_clientop(struct sim *s, int t, int shard, int op) {
  struct slot *sl = slot_of(s, t, shard, true);
  simtime u = 0;
  if (sl->ended)
    return;
  if (op == OP_RELEASE) {
    if (frozen(s, t, shard, &u)) {
      sl->rel_deferred = true;
      recheck_at(s, t, shard, u);
      return;
    }
    release_at(s, t, shard);
    return;
  }
  if (end_held_back(s, t, shard, &u)) {
    if (!sl->end_deferred)
      s->sessions_deferred++;
    sl->end_deferred = true;
    recheck_at(s, t, shard, u);
    return;
  }
  session_end(s, t, shard);
}

/* on_disconnect -- t's client goes away, possibly mid-confirmation: every
 * session of it ends, each at its shard, when nothing holds it back. */
static void on_disconnect(struct sim *s, int t) {
  struct txn *x = &s->tx[t];
  if (x->state != T_ACTIVE)
    return;
  s->disconnects++;
  bel_clear_at(s, t, -1);
  x->blocked = false;
  x->state = T_GONE;
  for (int i = 0; i < x->nslot; i++)
    client_op(s, t, x->slot[i].shard, OP_END);
}

/* on_lease -- t's session at shard reaches its lease: its client no longer
 * counts on its keys there, and the session ends when nothing holds it. */
static void on_lease(struct sim *s, int t, int shard) {
  struct txn *x = &s->tx[t];
  struct slot *sl = slot_of(s, t, shard, false);
  if (x->state != T_ACTIVE || !sl || sl->ended ||
      (!holds_at(s, t, shard) && !waits_at(s, t, shard)))
    return;
  s->leases++;
  bel_clear_at(s, t, shard);
  on_clientop(s, t, shard, OP_END);
}

/* ---- Aborting a victim: confirm, abort at V, RELEASE, answer, UNPIN. ---- */

static void act_del(struct sim *s, int V, int id) {
  struct shard *sh = &s->sh[V];
  for (int i = 0; i < sh->nact; i++)
    if (sh->act[i] == id) {
      sh->act[i] = sh->act[--sh->nact];
      return;
    }
}

/* confirm_at -- shard checks and pins its hops of abort id, one by one: it
 * pins the waiter's wait (which fails if the wait has ended), checks the
 * edge, and freezes the session waited for. All stand: true. Else nothing
 * of id stays there. */
static bool confirm_at(struct sim *s, int id, int shard) {
  struct hop h[MAXHOPS];
  int n = s->ss[id].nhops;
  memcpy(h, s->ss[id].hops, sizeof(h));
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    if (h[i].shard != shard)
      continue;
    int t = h[i].txn, nt = h[(i + 1) % n].txn;
    if (!waits_at(s, t, shard) ||
        (!s->o.bug_no_versions && s->tx[t].wseq != h[i].wseq)) {
      ok = false;
      break;
    }
    rec_add(s, id, t, shard, R_PIN);
    if (!waits_for(s, t, nt)) {
      ok = false;
      break;
    }
    rec_add(s, id, nt, shard, R_FREEZE);
  }
  if (!ok) {
    for (int i = 0; i < n; i++)
      if (h[i].shard == shard) {
        rec_unpin(s, h[i].txn, id, shard, R_PIN);
        rec_unpin(s, h[(i + 1) % n].txn, id, shard, R_FREEZE);
        recheck_now(s, h[i].txn, shard);
        recheck_now(s, h[(i + 1) % n].txn, shard);
      }
  }
  return ok;
}

/* unpin_at -- shard drops abort id's pins and freezes; what they held back
 * there is looked at again. */
static void unpin_at(struct sim *s, const struct hop *h, int n, int id,
                     int shard) {
  for (int i = 0; i < n; i++) {
    if (h[i].shard != shard)
      continue;
    int t = h[i].txn, nt = h[(i + 1) % n].txn;
    rec_unpin(s, t, id, shard, R_PIN);
    rec_unpin(s, nt, id, shard, R_FREEZE);
    recheck_now(s, t, shard);
    recheck_now(s, nt, shard);
  }
}

static void renew_at(struct sim *s, const struct hop *h, int n, int id,
                     int shard) {
  for (int i = 0; i < n; i++)
    if (h[i].shard == shard) {
      rec_renew(s, h[i].txn, id, shard);
      rec_renew(s, h[(i + 1) % n].txn, id, shard);
    }
}

/* unpin_all -- UNPIN on every shard asked to confirm (V itself in place). */
static void unpin_all(struct sim *s, int id) {
  struct sess *ss = &s->ss[id];
  for (int i = 0; i < ss->nshards; i++) {
    if (!ss->asked[i])
      continue;
    if (ss->shards[i] == ss->V) {
      unpin_at(s, ss->hops, ss->nhops, id, ss->V);
      continue;
    }
    struct ev *m = sim_msg_hops(ss->victim, ss->wseq, ss->hops, ss->nhops);
    m->aux = id;
    sim_send(s, M_UNPIN, ss->V, ss->shards[i], m);
  }
}

static void probe_start(struct sim *s, int t);

/* abort_over -- the abort is over at V, whatever its outcome: UNPIN
 * everywhere, and the victim may be the victim of another abort. */
static void abort_over(struct sim *s, int id) {
  struct sess *ss = &s->ss[id];
  ss->phase = P_DONE;
  act_del(s, ss->V, id);
  s->tx[ss->victim].in_abort = false;
  unpin_all(s, id);
}

/* abort_fail -- the confirmation failed (a :0, a broken link, the bound), or
 * the abort gave up: nothing aborted. */
static void abort_fail(struct sim *s, int id) {
  int victim = s->ss[id].victim;
  struct txn *v = &s->tx[victim];
  abort_over(s, id);
  bool again = v->abort_again && v->waiting && !s->o.central;
  v->abort_again = false;
  if (again) {
    /* An ABORT for another cycle through this wait was dropped while this
     * confirmation ran; that cycle may stand. Probe from the victim now
     * rather than at its next tick (see sim/README.md, "Findings"). */
    s->reprobes++;
    probe_start(s, victim);
  }
}

/* abort_truth -- the abort instant: the truth is checked here, before
 * anything is undone. A victim on no live cycle is a phantom abort; each
 * designed cycle it is on that stands gets a victim. */
static void abort_truth(struct sim *s, int id) {
  struct sess *ss = &s->ss[id];
  struct txn *v = &s->tx[ss->victim];
  v->aborted_wseq = ss->wseq + 1;
  s->victims_total++;
  ss->genuine = sim_on_live_cycle(s, ss->victim);
  if (!ss->genuine)
    s->phantoms++;
  for (int i = 0; i < v->ncyc; i++) {
    struct cycle *c = &s->cy[v->cyc[i]];
    if (c->live) {
      c->victims++;
      c->victims_all++;
      ss->res_close[ss->nres++] = c->close_t;
    } else if (!ss->genuine && c->closed) {
      c->victims_all++;
    }
  }
}

static void send_release(struct sim *s, int id, int i) {
  struct sess *ss = &s->ss[id];
  struct ev *m = sim_msg_new(ss->victim, ss->wseq);
  m->aux = id;
  m->idx = i;
  sim_send(s, M_RELEASE, ss->V, ss->rel[i], m);
}

/* send_releases -- RELEASE to each shard of the victim's HELDAT; one not
 * sent (the link is down) goes again on the new link. */
static void send_releases(struct sim *s, int id) {
  struct sess *ss = &s->ss[id];
  ss->nrel = heldat(s, ss->victim, ss->V, ss->rel);
  for (int i = 0; i < ss->nrel; i++)
    send_release(s, id, i);
}

/* victim_told -- every RELEASE was answered: the victim's -DEADLOCK (the end
 * of the detection latency), then UNPIN on every shard of the cycle, so
 * that what the pins held back comes after the abort. */
static void victim_told(struct sim *s, int id) {
  struct sess *ss = &s->ss[id];
  struct txn *v = &s->tx[ss->victim];
  if (ss->genuine)
    for (int i = 0; i < ss->nres; i++) {
      GROW(s->lat, s->nlat, s->caplat);
      s->lat[s->nlat++] = (double)(s->now - ss->res_close[i]) / NS_PER_US;
    }
  if (v->state == T_ACTIVE) {
    bel_clear_at(s, ss->victim, -1);
    v->blocked = false;
    v->state = T_VICTIM;
  }
  abort_over(s, id);
}

/* abort_engine -- the engine at V aborts the victim's wait: its client can
 * no longer be granted there, and its keys at V go at once. */
static void abort_engine(struct sim *s, int id) {
  struct sess *ss = &s->ss[id];
  int save = s->cause;
  s->cause = CAUSE_VICTIM;
  s->tx[ss->victim].aborted = true;
  cancel_wait(s, ss->victim);
  release_at(s, ss->victim, ss->V);
  s->cause = save;
}

static void release_first_done(struct sim *s, int id);

/* only_orphans -- whether every pin on t's wait at V but abort id's belongs
 * to an abort that is over: its UNPIN was lost, and the pin stays until its
 * bound. What the simulator alone can see; a shard cannot tell. */
static bool only_orphans(struct sim *s, int t, int V, int id) {
  for (int r = s->tx[t].recs; r >= 0; r = s->recs[r].next) {
    const struct rec *x = &s->recs[r];
    if (x->kind == R_PIN && x->shard == V && x->sess != id &&
        x->until > s->now && (x->sess < 0 || s->ss[x->sess].phase != P_DONE))
      return false;
  }
  return true;
}

/* take_effect -- every edge stands and is pinned: the abort takes effect at
 * V first (docs/distributed.md, 5.), unless another abort in progress pins
 * the victim's wait (its victim is a better one, and goes first; not under
 * --bug-no-giveup) or the wait has ended meanwhile. Then RELEASE to the
 * victim's other shards, and its answer when they are all answered. Under
 * --bug-release-first the RELEASEs go first and the abort at V waits for their
 * answers (at most PR_CONFIRM_MS, as the code before the fix waited for
 * RELEASED). */
static void take_effect(struct sim *s, int id) {
  struct sess *ss = &s->ss[id];
  int victim = ss->victim, V = ss->V;
  simtime u = 0;
  if (!s->o.bug_no_giveup && rec_held(s, victim, V, R_PIN, id, &u)) {
    s->gave_up++;
    s->gave_up_orphan += only_orphans(s, victim, V, id);
    abort_fail(s, id);
    return;
  }
  if (!waits_at(s, victim, V) || s->tx[victim].wseq != ss->wseq) {
    s->ended_first++;
    abort_over(s, id);
    return;
  }
  abort_truth(s, id);
  if (s->o.bug_release_first) {
    ss->phase = P_RELEASE_FIRST;
    send_releases(s, id);
    if (s->ss[id].nrel == 0) {
      release_first_done(s, id);
      return;
    }
    struct ev *e =
        at_home(s, E_CONFIRMBOUND,
                s->now + (simtime)(s->o.confirm_ms * NS_PER_MS), V, victim);
    e->aux = id;
    e->idx = 1; /* the RELEASED bound, not the confirmation's */
    return;
  }
  abort_engine(s, id);
  ss = &s->ss[id];
  ss->phase = P_RELEASE;
  send_releases(s, id);
  if (ss->nrel == 0) {
    victim_told(s, id);
    return;
  }
  at_home(s, E_RENEW, s->now + RENEW_EVERY, V, victim)->aux = id;
}

/* release_first_done -- under --bug-release-first, the RELEASEs were
 * answered (or the bound passed): the abort at V, if the wait still stands.
 * If it was granted meanwhile, its client runs believing it holds the keys
 * RELEASE gave away. */
static void release_first_done(struct sim *s, int id) {
  struct sess *ss = &s->ss[id];
  if (ss->phase != P_RELEASE_FIRST)
    return;
  if (waits_at(s, ss->victim, ss->V) && s->tx[ss->victim].wseq == ss->wseq) {
    abort_engine(s, id);
    victim_told(s, id);
    return;
  }
  s->ended_first++;
  abort_over(s, id);
}

/* confirmed -- every shard said :1. Within PR_CONFIRM_MS of its start, every
 * pin is still in force (each lasts PR_PIN_MS from when it was set, after
 * the start); a V that was frozen past the bound gives up instead. */
static void confirmed(struct sim *s, int id) {
  if (s->now - s->ss[id].start > (simtime)(s->o.confirm_ms * NS_PER_MS)) {
    s->confirms_failed++;
    abort_fail(s, id);
    return;
  }
  take_effect(s, id);
}

static int sess_new(struct sim *s, int victim, int V, const struct hop *h,
                    int n) {
  GROW(s->ss, s->nss, s->capss);
  struct sess *ss = &s->ss[s->nss];
  memset(ss, 0, sizeof(*ss));
  ss->victim = victim;
  ss->V = V;
  ss->wseq = s->tx[victim].wseq;
  ss->start = s->now;
  ss->nhops = n;
  memcpy(ss->hops, h, (size_t)n * sizeof(*h));
  for (int i = 0; i < n; i++) {
    bool seen = false;
    for (int j = 0; j < ss->nshards; j++)
      seen |= ss->shards[j] == h[i].shard;
    if (!seen)
      ss->shards[ss->nshards++] = h[i].shard;
  }
  struct shard *sh = &s->sh[V];
  GROW(sh->act, sh->nact, sh->capact);
  sh->act[sh->nact++] = s->nss;
  return s->nss++;
}

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

/* abort_at_v -- PEER ABORT has reached the victim's shard V (or was found
 * there). A second ABORT for one (gid, wseq) is dropped; so is one whose
 * wait has already ended. Otherwise V starts abort (V, id): it pins its own
 * hops, then sends CONFIRM to every other shard of the cycle. `confirm`
 * false: the caller (the local detector, or a bug option) decides at once. */
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
  if (!confirm) {
    take_effect(s, id);
    return;
  }
  struct sess *ss = &s->ss[id];
  ss->phase = P_CONFIRM;
  at_home(s, E_CONFIRMBOUND, s->now + (simtime)(s->o.confirm_ms * NS_PER_MS), V,
          victim)
      ->aux = id;
  for (int i = 0; i < ss->nshards; i++)
    if (ss->shards[i] == V) {
      ss->asked[i] = ss->answered[i] = true;
      ss->yes[i] = confirm_at(s, id, V);
      if (!ss->yes[i]) {
        s->confirms_failed++;
        abort_fail(s, id);
        return;
      }
    }
  for (int i = 0; i < ss->nshards; i++) {
    if (ss->shards[i] == V)
      continue;
    struct ev *m = sim_msg_hops(victim, ss->wseq, h, n);
    m->aux = id;
    m->idx = i;
    ss->asked[i] = true;
    if (!sim_send(s, M_CONFIRM, V, ss->shards[i], m)) {
      s->confirms_failed++;
      abort_fail(s, id);
      return;
    }
    ss->pending++;
  }
  if (ss->pending == 0)
    confirmed(s, id);
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

static void on_confirm_reply(struct sim *s, struct ev *e) {
  int id = e->aux;
  struct sess *ss = &s->ss[id];
  if (ss->phase != P_CONFIRM || ss->answered[e->idx])
    return;
  ss->answered[e->idx] = true;
  ss->yes[e->idx] = e->ok;
  ss->pending--;
  if (!e->ok) {
    s->confirms_failed++;
    abort_fail(s, id);
    return;
  }
  if (ss->pending == 0)
    confirmed(s, id);
}

/* on_release -- RELEASE at R: the victim's keys here go (once per abort),
 * and a wait of it here ends; the answer rides V's link back. */
static void on_release(struct sim *s, struct ev *e) {
  struct sess *ss = &s->ss[e->aux];
  int victim = ss->victim;
  if (!ss->rel_applied[e->idx]) {
    ss->rel_applied[e->idx] = true;
    int save = s->cause;
    s->cause = CAUSE_VICTIM;
    if (waits_at(s, victim, e->to))
      cancel_wait(s, victim);
    release_at(s, victim, e->to);
    s->cause = save;
  }
  struct ev *r = sim_msg_new(victim, e->wseq);
  r->aux = e->aux;
  r->idx = e->idx;
  answer(s, M_RELEASE_ACK, e, r);
}

static void on_release_ack(struct sim *s, struct ev *e) {
  struct sess *ss = &s->ss[e->aux];
  if ((ss->phase != P_RELEASE && ss->phase != P_RELEASE_FIRST) ||
      ss->rel_ans[e->idx])
    return;
  ss->rel_ans[e->idx] = true;
  for (int i = 0; i < ss->nrel; i++)
    if (!ss->rel_ans[i])
      return;
  if (ss->phase == P_RELEASE)
    victim_told(s, e->aux);
  else
    release_first_done(s, e->aux);
}

/* on_renew -- while its RELEASEs are out, V keeps the abort's pins and
 * freezes: its own in place, the others' by PIN. */
static void on_renew(struct sim *s, int id) {
  struct sess *ss = &s->ss[id];
  if (ss->phase != P_RELEASE)
    return;
  for (int i = 0; i < ss->nshards; i++) {
    if (!ss->yes[i])
      continue;
    if (ss->shards[i] == ss->V) {
      renew_at(s, ss->hops, ss->nhops, id, ss->V);
      continue;
    }
    struct ev *m = sim_msg_hops(ss->victim, ss->wseq, ss->hops, ss->nhops);
    m->aux = id;
    sim_send(s, M_PIN, ss->V, ss->shards[i], m);
  }
  at_home(s, E_RENEW, s->now + RENEW_EVERY, ss->V, ss->victim)->aux = id;
}

static void on_confirm_bound(struct sim *s, int id, bool released) {
  struct sess *ss = &s->ss[id];
  if (!released && ss->phase == P_CONFIRM) {
    s->confirms_failed++;
    abort_fail(s, id);
  } else if (released && ss->phase == P_RELEASE_FIRST) {
    release_first_done(s, id);
  }
}

/* ---- The probes (Chandy-Misra-Haas edge chasing). ---- */

static bool visited(const struct hop *h, int n, int shard, int t) {
  for (int i = 0; i < n; i++)
    if (h[i].shard == shard && h[i].txn == t)
      return true;
  return false;
}

/* entry_valid -- R's BLOCKED entry in slot sl came on a link that has not
 * broken since (R drops a peer's entries with its link). */
static bool entry_valid(struct sim *s, const struct slot *sl, int R) {
  if (sl->kb_from < 0)
    return false;
  const struct link *L = link_of(s, sl->kb_from, R);
  return !L->down && L->gen == sl->kb_gen;
}

/* known_blocked -- what shard T knows (from PEER BLOCKED) about where t, a
 * holder of a key at T, is blocked: its shard, or -1. */
static int known_blocked(struct sim *s, int t, int T, uint32_t *wseq) {
  struct slot *sl = slot_of(s, t, T, false);
  if (!sl || !entry_valid(s, sl, T))
    return -1;
  *wseq = sl->kb_wseq;
  return sl->kb_from;
}

/* extend -- the probe's path ends in a hop whose txn waits at T: follow
 * every edge of it at T, locally while the next txn also waits at T, then
 * by PEER PROBE to the shard where it is known to be blocked. An edge back
 * to the initiator (path[0]) closes a cycle; a path all on one shard is the
 * local detector's business. */
static void extend(struct sim *s, int T, struct hop *h, int n) {
  int wf[WFMAX], m = sim_waits_for(s, h[n - 1].txn, wf, WFMAX);
  for (int i = 0; i < m; i++) {
    int nx = wf[i];
    if (nx == h[0].txn) {
      bool local = true;
      for (int j = 0; j < n; j++)
        local &= h[j].shard == T;
      if (!local)
        cycle_found(s, T, h, n);
      continue;
    }
    if (n == MAXHOPS)
      continue;
    if (waits_at(s, nx, T)) {
      if (visited(h, n, T, nx))
        continue;
      h[n] = (struct hop){T, nx, s->tx[nx].wseq, s->tx[nx].prio};
      extend(s, T, h, n + 1);
      continue;
    }
    uint32_t w = 0;
    int U = known_blocked(s, nx, T, &w);
    if (U < 0 || visited(h, n, U, nx))
      continue;
    h[n] = (struct hop){U, nx, w, s->tx[nx].prio};
    sim_send(s, M_PROBE, T, U, sim_msg_hops(nx, w, h, n + 1));
  }
}

static void probe_start(struct sim *s, int t) {
  if (!s->tx[t].waiting)
    return;
  struct hop h[MAXHOPS];
  int S = wait_shard(s, t);
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

/* tell_blocked -- t waits at S: BLOCKED to each shard of its HELDAT that
 * does not have it yet. A shard has it when it answered +OK on the link as
 * it is now; one not sent (the link is down), answered -BUSY, or whose
 * link broke since, is told again on the next tick or the new link. Under
 * --bug-told-on-drop a shard counts as told once a BLOCKED was handed to
 * the link, whatever became of it. Returns how many were sent. */
static int tell_blocked(struct sim *s, int t, int only) {
  struct txn *x = &s->tx[t];
  int S = wait_shard(s, t), hs[MAXHOLD], n = heldat(s, t, S, hs), sent = 0;
  for (int i = 0; i < n; i++) {
    int R = hs[i];
    if (only >= 0 && R != only)
      continue;
    struct slot *sl = slot_of(s, t, R, true);
    uint32_t gen = link_of(s, S, R)->gen;
    bool has = sl->told != TOLD_NOT && sl->told_wseq == x->wseq &&
               (s->o.bug_told_on_drop || sl->told_gen == gen);
    if (has)
      continue;
    struct ev *m = sim_msg_new(t, x->wseq);
    bool ok = sim_send(s, M_BLOCKED, S, R, m);
    sl->told_wseq = x->wseq;
    sl->told_gen = gen;
    sl->told = s->o.bug_told_on_drop ? TOLD_YES : ok ? TOLD_PENDING : TOLD_NOT;
    sent += ok;
  }
  return sent;
}

/* on_blocked -- PEER BLOCKED at R: remember where the holder is blocked (one
 * entry per (gid, sender), at most --peer-blocked-max per peer: -BUSY
 * beyond), then probe again from every local waiter on it whose delay has
 * passed. Without this, two waits that start within RTT/2 of each other
 * each probe before the other's BLOCKED has arrived, and their cycle waits
 * for the next tick (see --bug-no-reprobe and sim/README.md). */
static void on_blocked(struct sim *s, struct ev *e) {
  int t = e->txn, R = e->to, S = e->from;
  struct slot *sl = slot_of(s, t, R, true);
  struct link *L = link_of(s, S, R);
  bool mine = entry_valid(s, sl, R) && sl->kb_from == S;
  struct ev *r = sim_msg_new(t, e->wseq);
  r->ok = mine || (int)L->nblocked < s->o.peer_blocked_max;
  answer(s, M_BLOCKED_REPLY, e, r);
  if (!r->ok) {
    s->busy++;
    return;
  }
  if (!mine) {
    if (entry_valid(s, sl, R))
      link_of(s, sl->kb_from, R)->nblocked--;
    L->nblocked++;
  }
  sl->kb_from = S;
  sl->kb_wseq = e->wseq;
  sl->kb_gen = e->gen;
  if (s->o.bug_no_reprobe)
    return;
  struct txn *x = &s->tx[t];
  for (int i = 0; i < x->nhold; i++) {
    struct key *k = &s->keys[x->hold[i]];
    if (k->shard != R)
      continue;
    for (int w = k->qhead; w >= 0; w = s->tx[w].qnext)
      if (s->tx[w].delayed)
        probe_start(s, w);
  }
}

/* on_blocked_reply -- R's answer to BLOCKED, on S's link: +OK, it has it;
 * -BUSY, it does not. */
static void on_blocked_reply(struct sim *s, struct ev *e) {
  struct slot *sl = slot_of(s, e->txn, e->from, false);
  if (s->o.bug_told_on_drop || !sl || sl->told != TOLD_PENDING ||
      sl->told_wseq != e->wseq || sl->told_gen != e->gen)
    return;
  sl->told = e->ok ? TOLD_YES : TOLD_NOT;
}

/* on_unblocked -- forgets (gid, sender) if its wseq is that one; an
 * UNBLOCKED from another shard than the entry's never erases it. */
static void on_unblocked(struct sim *s, struct ev *e) {
  struct slot *sl = slot_of(s, e->txn, e->to, false);
  if (!sl || !entry_valid(s, sl, e->to) || sl->kb_from != e->from ||
      sl->kb_wseq != e->wseq)
    return;
  link_of(s, e->from, e->to)->nblocked--;
  sl->kb_from = -1;
}

/* on_tick -- a wait's probe tick: the first when it has lasted
 * --probe-delay (BLOCKED to its HELDAT, and a probe), then every 2, 4, ...
 * up to 500 ms while it lasts (BLOCKED where not told, and a probe), so
 * that a lost message delays a detection but does not lose it. Under
 * --bug-no-reprobe, the first alone. */
static void on_tick(struct sim *s, struct ev *e) {
  int t = e->txn;
  struct txn *x = &s->tx[t];
  if (!x->waiting || x->wseq != e->wseq)
    return;
  bool first = !x->delayed;
  x->delayed = true;
  int sent = tell_blocked(s, t, -1);
  if (!first) {
    s->blocked_resent += (uint64_t)sent;
    s->tick_probes++;
  }
  probe_start(s, t);
  if (s->o.bug_no_reprobe)
    return;
  struct ev *n = at_home(s, E_TICK, s->now + x->tick, wait_shard(s, t), t);
  n->wseq = x->wseq;
  x->tick = 2 * x->tick < TICK_MAX ? 2 * x->tick : TICK_MAX;
}

/* on_linkfail -- S sees its link to R break: a CONFIRM unanswered on it
 * fails its abort; BLOCKED and RELEASE unanswered go again on the new link. */
static void on_linkfail(struct sim *s, int S, int R) {
  struct shard *sh = &s->sh[S];
  int n = sh->nact, *ids = sim_xrealloc(NULL, (size_t)n * sizeof(int));
  if (n > 0) /* a copy: a failed abort leaves the list, a re-probe joins it */
    memcpy(ids, sh->act, (size_t)n * sizeof(int));
  for (int j = 0; j < n; j++) {
    struct sess *ss = &s->ss[ids[j]];
    if (ss->phase != P_CONFIRM)
      continue;
    for (int i = 0; i < ss->nshards; i++)
      if (ss->shards[i] == R && ss->asked[i] && !ss->answered[i]) {
        s->confirms_failed++;
        abort_fail(s, ids[j]);
        break;
      }
  }
  free(ids);
}

/* on_linkup -- S's re-dial to R succeeded: HELLO, then what R must know
 * again, every BLOCKED S stands by and every RELEASE not yet answered. */
static void on_linkup(struct sim *s, int S, int R) {
  struct link *L = link_of(s, S, R);
  L->down = false;
  L->last_up = s->now;
  sim_send(s, M_HELLO, S, R, sim_msg_new(-1, 0));
  struct shard *sh = &s->sh[S];
  for (int i = 0; i < sh->nwait; i++)
    if (s->tx[sh->wait[i]].delayed)
      s->blocked_resent += (uint64_t)tell_blocked(s, sh->wait[i], R);
  for (int j = 0; j < sh->nact; j++) {
    struct sess *ss = &s->ss[sh->act[j]];
    if (ss->phase != P_RELEASE && ss->phase != P_RELEASE_FIRST)
      continue;
    for (int i = 0; i < ss->nrel; i++)
      if (ss->rel[i] == R && !ss->rel_ans[i]) {
        s->releases_resent++;
        send_release(s, sh->act[j], i);
      }
  }
}

/* ---- The local detector: a cycle inside one shard, with no message. ---- */

/* local_walk -- a depth-first walk along the waits at S from the path's
 * last hop; true when it comes back to h[0], with the cycle in h[0..*n). */
static bool local_walk(struct sim *s, int S, struct hop *h, int *n) {
  int wf[WFMAX], m = sim_waits_for(s, h[*n - 1].txn, wf, WFMAX);
  for (int i = 0; i < m; i++) {
    int y = wf[i];
    if (y == h[0].txn)
      return true;
    if (*n == MAXHOPS || !waits_at(s, y, S) || visited(h, *n, S, y))
      continue;
    h[(*n)++] = (struct hop){S, y, s->tx[y].wseq, s->tx[y].prio};
    if (local_walk(s, S, h, n))
      return true;
    (*n)--;
  }
  return false;
}

/* local_detect -- a wait that starts at S looks for a cycle inside S, and
 * goes on until none is left through it (a wait may close two at once).
 * Each victim is picked by the rule among the members whose waits no abort
 * has pinned (the engine passes a pinned wait over); when every member of a
 * cycle is pinned, the detection runs again as the pins go. */
static void local_detect(struct sim *s, int t) {
  while (s->tx[t].waiting) {
    struct hop h[MAXHOPS];
    int S = wait_shard(s, t), n = 1;
    h[0] = (struct hop){S, t, s->tx[t].wseq, s->tx[t].prio};
    if (!local_walk(s, S, h, &n))
      return;
    int vi = -1;
    simtime u = 0;
    for (int i = 0; i < n; i++) {
      if (pinned(s, h[i].txn, &u)) {
        s->tx[h[i].txn].local_skipped = true;
        recheck_at(s, h[i].txn, S, u);
        continue;
      }
      if (vi < 0 || better_victim(s, &h[i], &h[vi]))
        vi = i;
    }
    if (vi < 0)
      return;
    s->local_found++;
    int victim = h[vi].txn;
    abort_at_v(s, S, h, n, vi, false);
    if (s->tx[victim].waiting && waits_at(s, victim, S))
      return; /* not aborted (already in an abort): no progress to make */
  }
}

/* ---- The workload: cycles, double cycles, chains, breakers, faults. ---- */

static int key_new(struct sim *s, int shard) {
  GROW(s->keys, s->nkeys, s->capkeys);
  s->keys[s->nkeys] = (struct key){.shard = shard, .qhead = -1, .qtail = -1};
  return s->nkeys++;
}

static int txn_new(struct sim *s) {
  GROW(s->tx, s->ntx, s->captx);
  struct txn *x = &s->tx[s->ntx];
  memset(x, 0, sizeof(*x));
  /* gid: 8 bytes of begin time (here the simulated clock plus a fixed
   * epoch), then 8 random bytes. */
  x->gid_hi = 1700000000ULL * 1000000000ULL + (uint64_t)s->now +
              (uint64_t)wrndn(s, 1000);
  x->gid_lo = wrnd(s);
  x->state = T_ACTIVE;
  x->want = -1;
  x->qnext = -1;
  x->recs = -1;
  if (sim_wrnd01(s) < 0.1)
    x->prio = 1; /* a few txns ask for PRIORITY 1 */
  return s->ntx++;
}

/* expected_us -- about how long detection takes, to place the breakers'
 * timeouts and the faults before it, around it and after it. */
static double expected_us(const struct opts *o) {
  if (o->central)
    return o->poll_ms * 1000.0 / 2 + 2 * o->rtt_us;
  return o->probe_delay_us + (o->len + 4) * o->rtt_us / 2;
}

/* pick_shards -- n distinct random shards (at most all of them). */
static int pick_shards(struct sim *s, int n, int *sel) {
  if (n > s->o.shards)
    n = s->o.shards;
  for (int i = 0; i < n; i++) {
    bool dup;
    do {
      sel[i] = wrndn(s, s->o.shards);
      dup = false;
      for (int j = 0; j < i; j++)
        dup |= sel[j] == sel[i];
    } while (dup);
  }
  return n;
}

static int cycle_new(struct sim *s, const int *mem, int n) {
  int c = s->ncy++;
  s->cy[c] = (struct cycle){.n = n};
  memcpy(s->cy[c].mem, mem, (size_t)n * sizeof(int));
  for (int i = 0; i < n; i++) {
    struct txn *x = &s->tx[mem[i]];
    x->cyc[x->ncyc++] = c;
  }
  return c;
}

/* plan_faults -- the faults a cycle group meets, drawn from the faults'
 * stream: a freeze of one of its shards, its member's client going away,
 * a member's session on one of its keys' shards reaching its lease; each
 * at a random instant from half the expected detection time before the
 * group's last request to one and a half after it, as the breakers. */
static void plan_faults(struct sim *s, int first, int ntx, simtime latest) {
  const struct opts *o = &s->o;
  double e = expected_us(o);
#define WHEN() (latest + (simtime)((frnd01(s) * 2.0 - 0.5) * e * NS_PER_US))
  if (o->freeze > 0 && frnd01(s) < o->freeze) {
    int t = first + frndn(s, ntx);
    struct txn *x = &s->tx[t];
    struct ev *f = sim_ev_new(E_FREEZE, WHEN());
    f->key = x->slot[frndn(s, x->nslot)].shard;
    f->dur = (simtime)(frnd01(s) * 2 * o->freeze_ms * NS_PER_MS);
    f->t = f->t > s->now ? f->t : s->now;
    sim_push(s, f);
  }
  if (o->disconnect > 0 && frnd01(s) < o->disconnect) {
    simtime t = WHEN();
    sim_at(s, E_DISCONNECT, t > s->now ? t : s->now, first + frndn(s, ntx), 0,
           -1);
  }
  if (o->lease > 0 && frnd01(s) < o->lease) {
    int t = first + frndn(s, ntx);
    struct txn *x = &s->tx[t];
    int shard = s->keys[x->hold[frndn(s, x->nhold)]].shard;
    simtime w = WHEN();
    at_home(s, E_LEASE, w > s->now ? w : s->now, shard, t)->key = shard;
  }
#undef WHEN
}

/* breaker -- one of a cycle group's n members (first, first + 1, ...)
 * times out, from half the expected detection time before the group's last
 * request to one and a half after: some timeouts come first and some race
 * the detection. Its WAIT is the server's timer at the shard of the key it
 * asks for, want[member]. */
static void breaker(struct sim *s, int first, int n, const int *want,
                    simtime latest) {
  const struct opts *o = &s->o;
  double e = expected_us(o);
  simtime t = latest + (simtime)((sim_wrnd01(s) * 2.0 - 0.5) * e * NS_PER_US);
  int b = wrndn(s, n);
  struct txn *x = &s->tx[first + b];
  x->retry = sim_wrnd01(s) < o->retry_frac;
  x->retry_after = (simtime)(sim_wrnd01(s) * o->spread_us * NS_PER_US);
  at_home(s, E_TIMEOUT, t > s->now ? t : s->now, s->keys[want[b]].shard,
          first + b);
}

static void request_at(struct sim *s, simtime t, int txn, int key) {
  at_home(s, E_REQUEST, t, s->keys[key].shard, txn)->key = key;
}

/* start_double -- two cycles of L that share their member M: M holds mA and
 * mB and asks for k, which P_A and P_B hold in shared mode; P_A heads a
 * chain of L - 1 txns whose last asks for mA, P_B one whose last asks for
 * mB. M is on both cycles at once: a txn with two edges out. */
static void start_double(struct sim *s) {
  const struct opts *o = &s->o;
  int L = o->len, nk = 2 * L - 1, nt = 2 * L - 1;
  int sel[2 * MAXHOPS], span = o->span < o->shards ? o->span : o->shards;
  int nsel = pick_shards(s, 2 * span - 1 < nk ? 2 * span - 1 : nk, sel);
  int k0 = s->nkeys, first = s->ntx;
  for (int i = 0; i < nk; i++)
    key_new(s, sel[i % nsel]);
  for (int i = 0; i < nt; i++)
    txn_new(s);
  /* Keys: k0 = mA, k0+1 = mB, k0+2 = k, then A's chain, then B's. Txns:
   * first = M, then P_A and A's chain, then P_B and B's chain. */
  int M = first, kA = k0, kB = k0 + 1, kk = k0 + 2;
  hold_add(s, M, kA, MODE_X);
  hold_add(s, M, kB, MODE_X);
  bel_add(s, M, kA);
  bel_add(s, M, kB);
  int memA[MAXHOPS], memB[MAXHOPS], want[2 * MAXHOPS];
  want[0] = kk;
  for (int side = 0; side < 2; side++) {
    int *mem = side ? memB : memA, home = side ? kB : kA;
    int t0 = first + 1 + side * (L - 1), c0 = k0 + 3 + side * (L - 2);
    mem[0] = M;
    for (int i = 0; i < L - 1; i++) {
      int t = t0 + i, held = i == 0 ? kk : c0 + i - 1;
      hold_add(s, t, held, i == 0 ? MODE_S : MODE_X);
      bel_add(s, t, held);
      want[t - first] = i == L - 2 ? home : c0 + i;
      mem[i + 1] = t;
    }
  }
  int ca = cycle_new(s, memA, L);
  cycle_new(s, memB, L);
  (void)ca;
  simtime latest = s->now;
  for (int i = 0; i < nt; i++) {
    simtime t = s->now + (simtime)(sim_wrnd01(s) * o->spread_us * NS_PER_US);
    latest = t > latest ? t : latest;
    request_at(s, t, first + i, want[i]);
  }
  if (sim_wrnd01(s) < o->break_frac)
    breaker(s, first, nt, want, latest);
  plan_faults(s, first, nt, latest);
}

/* start_group -- L txns each holding a fresh key on one of `span` random
 * shards; each then asks for the next one's key. A cycle's last asks for the
 * first's; a chain's last asks for nothing and commits after --hold-us. */
static void start_group(struct sim *s, bool cycle) {
  const struct opts *o = &s->o;
  if (cycle && o->overlap > 0 && sim_wrnd01(s) < o->overlap) {
    start_double(s);
    return;
  }
  int L = cycle ? o->len : 2 + wrndn(s, o->len - 1);
  int span = o->span < o->shards ? o->span : o->shards;
  int sel[MAXHOPS], nsel = pick_shards(s, span < L ? span : L, sel);
  int first = s->ntx, k0 = s->nkeys;
  for (int i = 0; i < L; i++) {
    int t = txn_new(s);
    int k = key_new(s, sel[i % nsel]);
    hold_add(s, t, k, MODE_X);
    bel_add(s, t, k);
  }
  if (cycle) {
    int mem[MAXHOPS];
    for (int i = 0; i < L; i++)
      mem[i] = first + i;
    cycle_new(s, mem, L);
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
    request_at(s, t, first + i, k0 + (i + 1) % L);
  }
  if (cycle && sim_wrnd01(s) < o->break_frac) {
    int want[MAXHOPS];
    for (int i = 0; i < L; i++)
      want[i] = k0 + (i + 1) % L;
    breaker(s, first, L, want, latest);
  }
  if (cycle)
    plan_faults(s, first, L, latest);
}

/* on_request -- t's LOCK on k reaches k's shard: granted at once when k's
 * queue is empty and its holders compatible, else t waits. A LOCK from a
 * frozen session waits for the freeze to go. */
static void on_request(struct sim *s, int t, int k) {
  struct txn *x = &s->tx[t];
  struct key *kk = &s->keys[k];
  if (x->state != T_ACTIVE)
    return;
  struct slot *sl = slot_of(s, t, kk->shard, true);
  simtime u = 0;
  if (sl->ended) {
    client_gives_up(s, t, T_GONE); /* its lease ran out: ORDO_ELEASE */
    return;
  }
  x->blocked = true;
  if (frozen(s, t, kk->shard, &u)) {
    sl->req_deferred = k;
    recheck_at(s, t, kk->shard, u);
    return;
  }
  x->wmode = MODE_X;
  if (kk->qhead < 0 && (kk->nholders == 0)) {
    grant(s, t, k, MODE_X);
    return;
  }
  x->want = k;
  x->wseq++;
  x->waiting = true;
  x->qnext = -1;
  x->tick = TICK_FIRST;
  if (kk->qtail >= 0)
    s->tx[kk->qtail].qnext = t;
  else
    kk->qhead = t;
  kk->qtail = t;
  struct shard *sh = &s->sh[kk->shard];
  GROW(sh->wait, sh->nwait, sh->capwait);
  x->widx = sh->nwait;
  sh->wait[sh->nwait++] = t;
  for (int i = 0; i < x->ncyc; i++) {
    struct cycle *c = &s->cy[x->cyc[i]];
    if (!c->live && sim_cycle_stands(s, c)) {
      /* The cycle closes now (again, after a retrying breaker). */
      c->closed = c->live = true;
      c->close_t = s->now;
    }
  }
  local_detect(s, t);
  if (!s->o.central && x->waiting) {
    struct ev *e =
        at_home(s, E_TICK, s->now + (simtime)(s->o.probe_delay_us * NS_PER_US),
                kk->shard, t);
    e->wseq = x->wseq;
  }
}

/* do_timeout -- a breaker's wait times out: unless an abort has pinned it,
 * the wait is cancelled, and the client asks again (keeping its key) or
 * gives up its keys. */
static void do_timeout(struct sim *s, int t) {
  struct txn *x = &s->tx[t];
  simtime u = 0;
  if (x->state != T_ACTIVE)
    return;
  if (x->waiting && pinned(s, t, &u)) {
    x->tmo_deferred = true;
    recheck_at(s, t, wait_shard(s, t), u);
    return;
  }
  int save = s->cause;
  s->cause = CAUSE_TIMEOUT;
  if (x->waiting && x->retry) {
    /* A retrying breaker keeps its key and asks again soon: a new wait,
     * with a new wseq, which may close the cycle again. */
    int k = x->want;
    cancel_wait(s, t);
    x->blocked = false;
    x->retry = false;
    request_at(s, s->now + x->retry_after, t, k);
    s->cause = save;
    return;
  }
  if (x->waiting)
    cancel_wait(s, t);
  client_gives_up(s, t, T_TIMEDOUT);
  s->cause = save;
}

/* ---- The dispatch. ---- */

/* sim_defer_frozen -- an event that a frozen shard would handle waits until
 * the shard resumes: it handles nothing meanwhile, and its timers fire late.
 * Returns true when it put e back. */
bool sim_defer_frozen(struct sim *s, struct ev *e) {
  if (e->home < 0 || e->home >= s->o.shards ||
      s->sh[e->home].frozen_until <= s->now)
    return false;
  e->t = s->sh[e->home].frozen_until;
  sim_push(s, e);
  return true;
}

static void on_msg(struct sim *s, struct ev *e) {
  if (is_shard(s, e->lf) && is_shard(s, e->lt) &&
      link_of(s, e->lf, e->lt)->gen != e->gen) {
    s->msgs_lost++; /* its link broke while it travelled */
    return;
  }
  switch (e->msg) {
  case M_BLOCKED:
    on_blocked(s, e);
    break;
  case M_BLOCKED_REPLY:
    on_blocked_reply(s, e);
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
    r->ok = confirm_at(s, e->aux, e->to);
    answer(s, M_CONFIRM_REPLY, e, r);
    break;
  }
  case M_CONFIRM_REPLY:
    on_confirm_reply(s, e);
    break;
  case M_RELEASE:
    on_release(s, e);
    break;
  case M_RELEASE_ACK:
    on_release_ack(s, e);
    break;
  case M_PIN:
    renew_at(s, e->hops, e->nhops, e->aux, e->to);
    break;
  case M_UNPIN:
    unpin_at(s, e->hops, e->nhops, e->aux, e->to);
    break;
  case M_HELLO:
    break;
  }
}

void sim_dispatch(struct sim *s, struct ev *e) {
  s->cause = CAUSE_OTHER;
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
  case E_TICK:
    on_tick(s, e);
    break;
  case E_TIMEOUT:
    do_timeout(s, e->txn);
    break;
  case E_RECCHECK:
    settle(s, e->txn, e->key);
    break;
  case E_COMMIT: {
    struct txn *x = &s->tx[e->txn];
    if (x->state == T_ACTIVE && !x->waiting && !x->blocked)
      client_gives_up(s, e->txn, T_DONE);
    break;
  }
  case E_CLIENTOP:
    on_clientop(s, e->txn, e->key, e->aux);
    break;
  case E_CONFIRMBOUND:
    on_confirm_bound(s, e->aux, e->idx == 1);
    break;
  case E_RENEW:
    on_renew(s, e->aux);
    break;
  case E_LINKBREAK:
    on_linkbreak(s, e);
    break;
  case E_LINKFAIL:
    on_linkfail(s, e->lf, e->lt);
    break;
  case E_LINKUP:
    on_linkup(s, e->lf, e->lt);
    break;
  case E_FREEZE: {
    struct shard *sh = &s->sh[e->key];
    if (s->now + e->dur > sh->frozen_until)
      sh->frozen_until = s->now + e->dur;
    s->freezes++;
    break;
  }
  case E_DISCONNECT:
    on_disconnect(s, e->txn);
    break;
  case E_LEASE:
    on_lease(s, e->txn, e->key);
    break;
  }
}
