/*
 * central.c -- the centralized alternative to the probes, as Citus does it:
 * one coordinator (node `shards`, one RTT/2 from every shard) polls every
 * shard's wait-for edges every --poll-ms, each poll one request and one
 * reply per shard, builds the global graph from the replies (a snapshot
 * skewed in time, since each shard answers when the poll reaches it), and
 * aborts one victim per cycle by the probes' rule. Without
 * --central-confirm the victim's shard aborts it on the coordinator's word;
 * with it, the victim's shard confirms every edge first, as for a probe.
 * See sim/README.md.
 *
 * Interface: sim_central_owns, sim_central_dispatch.
 */
#include "sim.h"

#include <stdlib.h>

static int edge_cmp(const void *a, const void *b) {
  const struct edge *x = a, *y = b;
  if (x->waiter != y->waiter)
    return x->waiter < y->waiter ? -1 : 1;
  if (x->holder != y->holder)
    return x->holder < y->holder ? -1 : 1;
  if (x->shard != y->shard)
    return x->shard < y->shard ? -1 : 1;
  return x->wseq < y->wseq ? -1 : x->wseq > y->wseq;
}

/* central_search -- the coordinator has every shard's reply of this round: a
 * snapshot skewed by the replies' different times. A depth-first search over
 * it; each back edge is a cycle, whose victim (the same rule) is sent PEER
 * ABORT and taken out of the graph. */
static void central_search(struct sim *s) {
  int C = s->o.shards;
  size_t n = s->nredges;
  qsort(s->redges, n, sizeof(*s->redges), edge_cmp);
  s->round++;
  for (size_t i = n; i-- > 0;) {
    s->adj_first[s->redges[i].waiter] = (int)i;
    s->adj_stamp[s->redges[i].waiter] = s->round;
  }
  /* color: 0 white, 1 on the stack, 2 done; stamped per round by adj_stamp. */
  int stack[MAXHOPS * 4];
  size_t eidx[MAXHOPS * 4];
  for (size_t r = 0; r < n; r++) {
    int root = s->redges[r].waiter;
    if (s->color[root] == s->round * 3 + 2 ||
        s->color[root] == s->round * 3 + 1)
      continue;
    int sp = 0;
    stack[sp] = root;
    eidx[sp] = (size_t)s->adj_first[root];
    s->color[root] = s->round * 3 + 1;
    while (sp >= 0) {
      int u = stack[sp];
      size_t i = eidx[sp];
      if (i >= n || s->redges[i].waiter != u ||
          s->color[u] == s->round * 3 + 2) {
        s->color[u] = s->round * 3 + 2;
        sp--;
        continue;
      }
      eidx[sp]++;
      int v = s->redges[i].holder;
      if (s->color[v] == s->round * 3 + 1) {
        /* A back edge: the cycle is the stack from v to the top. */
        struct hop h[MAXHOPS];
        int k = sp, m = 0;
        while (k >= 0 && stack[k] != v)
          k--;
        if (sp - k + 1 > MAXHOPS)
          continue;
        for (int j = k; j <= sp; j++) {
          const struct edge *ej = &s->redges[eidx[j] - 1];
          h[m++] = (struct hop){ej->shard, ej->waiter, ej->wseq,
                                s->tx[ej->waiter].prio};
        }
        int vi = sim_pick_victim(s, h, m);
        struct ev *msg = sim_msg_hops(h[vi].txn, h[vi].wseq, h, m);
        msg->aux = vi;
        sim_send(s, M_ABORT, C, h[vi].shard, msg);
        s->color[h[vi].txn] = s->round * 3 + 2;
        continue;
      }
      if (s->color[v] == s->round * 3 + 2 || s->adj_stamp[v] != s->round ||
          sp + 1 >= MAXHOPS * 4)
        continue;
      stack[++sp] = v;
      eidx[sp] = (size_t)s->adj_first[v];
      s->color[v] = s->round * 3 + 1;
    }
  }
  s->nredges = 0;
}

static void on_poll_reply(struct sim *s, struct ev *e) {
  for (int i = 0; i < e->nedges; i++) {
    GROW(s->redges, s->nredges, s->capredges);
    s->redges[s->nredges++] = e->edges[i];
  }
  if (--s->poll_pending == 0)
    central_search(s);
}

static void on_poll(struct sim *s, struct ev *e) {
  struct shard *sh = &s->sh[e->to];
  struct ev *r = sim_msg_new(-1, 0);
  int cap = 0;
  for (int i = 0; i < sh->nwait; i++) {
    int w = sh->wait[i], wf[64], n = sim_waits_for(s, w, wf, 64);
    for (int j = 0; j < n; j++) {
      GROW(r->edges, r->nedges, cap);
      r->edges[r->nedges++] = (struct edge){w, wf[j], e->to, s->tx[w].wseq};
    }
  }
  sim_send(s, M_POLL_REPLY, e->to, s->o.shards, r);
}

bool sim_central_owns(const struct ev *e) {
  return e->kind == E_POLL ||
         (e->kind == E_MSG && (e->msg == M_POLL || e->msg == M_POLL_REPLY));
}

/* sim_central_dispatch -- the coordinator's timer (a round of polls, unless
 * the last round's replies are still out), a shard's answer to a poll, and
 * the coordinator's receipt of it. */
void sim_central_dispatch(struct sim *s, struct ev *e) {
  if (e->kind == E_MSG) {
    if (e->msg == M_POLL)
      on_poll(s, e);
    else
      on_poll_reply(s, e);
    return;
  }
  if (s->poll_pending > 0) {
    s->polls_skipped++;
  } else {
    s->polls++;
    s->poll_pending = s->o.shards;
    for (int i = 0; i < s->o.shards; i++)
      sim_send(s, M_POLL, s->o.shards, i, sim_msg_new(-1, 0));
  }
  simtime next = s->now + (simtime)(s->o.poll_ms * NS_PER_MS);
  if (next <= s->horizon)
    sim_at(s, E_POLL, next, -1, 0, -1);
}
