/*
 * probe.c -- deadlocks across shards of ordod: the peer links between
 * servers and the edge-chasing probes (Chandy-Misra-Haas) that find a cycle
 * no one shard sees, with versioned edges, a confirmation that pins the
 * cycle's waits, and one victim per cycle. The protocol is
 * docs/distributed.md; this file is its server side.
 *
 * A shard's name is "host:port" as clients and peers write it. Each server
 * keeps one outbound link to each peer (--peers) and sends it one-way PEER
 * commands; what a peer sends back comes over that peer's own link to us.
 * Everything here runs on the loop thread.
 *
 * Interface: srv_probe_init, srv_probe_close, srv_probe_wait_begin,
 * srv_probe_wait_end, srv_probe_cmd, srv_probe_info.
 */
#include "server/server.h"

#include "core/table.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PR_MAX_HOPS 16
#define PR_REPROBE_MAX_MS 500 /* a waiter probes again at most this late */
#define PR_CONFIRM_MS 1000    /* a confirmation's bound */
#define PR_PIN_MS 2000        /* a pin's bound, should UNPIN be lost */
#define PR_BACKOFF_MAX_MS 1000

/* One hop of a probe's path: txn gid, waiting at shard with wseq, waits
 * for next. prio is gid's PRIORITY, for the victim rule. */
typedef struct pr_hop {
  int shard; /* index in the shard table: 0 is this server */
  uint8_t gid[ORDOD_GID_BYTES], next[ORDOD_GID_BYTES];
  uint64_t wseq;
  long prio;
} pr_hop;

typedef struct peer {
  srv *s;
  char name[ORDOD_SHARD_NAME];
  struct sockaddr_storage addr;
  uv_tcp_t tcp;
  uv_connect_t creq;
  uv_timer_t retry;
  bool up, busy; /* connected; a connect or close in progress */
  bool closing;  /* uv_close called, its callback not yet run */
  unsigned backoff_ms;
  char rbuf[4096];
} peer;

/* What this shard knows of a txn blocked elsewhere: PEER BLOCKED. */
typedef struct pr_remote {
  uint8_t gid[ORDOD_GID_BYTES];
  int shard;
  uint64_t wseq;
  struct pr_remote *next;
} pr_remote;

/* A victim's shard confirming a cycle before it aborts. */
typedef struct pr_abort {
  uint64_t id;
  uint8_t victim[ORDOD_GID_BYTES];
  uint64_t wseq;
  pr_hop hop[PR_MAX_HOPS];
  int nhops;
  int want, yes; /* confirmations asked and granted */
  int release_want, released;
  int phase; /* 0 confirming, 1 releasing, 2 aborted (reply on its way) */
  uint64_t deadline_ms;
  struct pr_abort *next;
} pr_abort;

struct srv_probe {
  srv *s;
  /* shard[0] is this server (no link); 1..n the peers, by --peers. */
  peer *shard;
  int nshard;
  pr_remote *remote;
  pr_abort *aborts;
  uint64_t next_abort_id;
  uv_timer_t tick;            /* probes due, confirmations past their bound */
  TAILQ_HEAD(, sess) waiting; /* sessions with a gid that wait */
  uint64_t probes_sent, probes_received, probes_stale, deadlocks,
      confirms_failed, messages_dropped;
  size_t nfrozen; /* sessions frozen since the count was last found 0 */
};

/* ---- Shards and links ---------------------------------------------------- */

static int shard_by_name(srv_probe *p, const char *name, size_t len) {
  for (int i = 0; i < p->nshard; i++)
    if (strlen(p->shard[i].name) == len &&
        memcmp(p->shard[i].name, name, len) == 0)
      return i;
  return -1;
}

static void link_connect(peer *pe);

static void retry_fired(uv_timer_t *t) {
  link_connect(t->data);
}

static void link_down(peer *pe);

static void link_closed(uv_handle_t *h) {
  peer *pe = h->data;
  pe->busy = false;
  pe->closing = false;
  if (pe->s->stopping)
    return;
  unsigned d = pe->backoff_ms ? pe->backoff_ms : 50;
  pe->backoff_ms = d * 2 > PR_BACKOFF_MAX_MS ? PR_BACKOFF_MAX_MS : d * 2;
  uv_timer_start(&pe->retry, retry_fired, d, 0);
}

static void link_down(peer *pe) {
  if (pe->closing)
    return;
  pe->up = false;
  pe->busy = true;
  pe->closing = true;
  uv_close((uv_handle_t *)&pe->tcp, link_closed);
}

static void link_alloc(uv_handle_t *h, size_t n, uv_buf_t *b) {
  peer *pe = h->data;
  (void)n;
  *b = uv_buf_init(pe->rbuf, sizeof pe->rbuf);
}

/* What a peer answers on our link is +OK to each command: read and
 * dropped; an error (a wrong password) is logged. */
static void link_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  peer *pe = st->data;
  if (n < 0) {
    link_down(pe);
    return;
  }
  if (n > 0 && b->base[0] == '-')
    srv_log(pe->s, 0, "peer %s: %.*s", pe->name,
            (int)(memchr(b->base, '\r', (size_t)n)
                      ? (char *)memchr(b->base, '\r', (size_t)n) - b->base
                      : n),
            b->base);
}

typedef struct link_wreq {
  uv_write_t w;
  char data[];
} link_wreq;

static void link_written(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

/* Sends o's bytes on the link, or drops them when it is down: probes are
 * sent again while their waits last, so a lost one only delays. */
static void link_send(srv_probe *p, int shard, ordo__out *o) {
  peer *pe = &p->shard[shard];
  if (shard <= 0 || !pe->up || o->oom) {
    p->messages_dropped++;
    return;
  }
  link_wreq *r = malloc(sizeof *r + o->len);
  if (!r) {
    p->messages_dropped++;
    return;
  }
  memcpy(r->data, o->buf, o->len);
  uv_buf_t b = uv_buf_init(r->data, (unsigned)o->len);
  if (uv_write(&r->w, (uv_stream_t *)&pe->tcp, &b, 1, link_written) != 0) {
    free(r);
    p->messages_dropped++;
  }
}

static void link_connected(uv_connect_t *c, int status) {
  peer *pe = c->data;
  if (status < 0) {
    link_down(pe);
    return;
  }
  pe->up = true;
  pe->busy = false;
  pe->backoff_ms = 0;
  uv_read_start((uv_stream_t *)&pe->tcp, link_alloc, link_read);
  srv *s = pe->s;
  ordo__out o = {0};
  if (s->cfg.requirepass[0]) {
    ordo__out_array(&o, 2);
    ordo__out_bulk(&o, "AUTH", 4);
    ordo__out_bulk(&o, s->cfg.requirepass, strlen(s->cfg.requirepass));
  }
  ordo__out_array(&o, 3);
  ordo__out_bulk(&o, "PEER", 4);
  ordo__out_bulk(&o, "HELLO", 5);
  ordo__out_bulk(&o, s->probe->shard[0].name, strlen(s->probe->shard[0].name));
  link_send(s->probe, (int)(pe - s->probe->shard), &o);
  ordo__out_free(&o);
  srv_log(s, 1, "peer %s: linked", pe->name);
}

static void link_connect(peer *pe) {
  if (pe->s->stopping)
    return;
  pe->busy = true;
  uv_tcp_init(pe->s->loop, &pe->tcp);
  pe->tcp.data = pe;
  pe->creq.data = pe;
  uv_tcp_nodelay(&pe->tcp, 1);
  if (uv_tcp_connect(&pe->creq, &pe->tcp, (struct sockaddr *)&pe->addr,
                     link_connected) != 0)
    link_down(pe);
}

/* ---- Messages ------------------------------------------------------------ */

/* Sends msg to each shard a HELDAT list names (its own name and names not
 * of --peers are passed over); returns how many it was sent to. */
static int heldat_send(srv_probe *p, const char *heldat, ordo__out *msg) {
  int n = 0;
  for (const char *q = heldat; *q;) {
    const char *e = strchr(q, ',');
    size_t len = e ? (size_t)(e - q) : strlen(q);
    int sh = shard_by_name(p, q, len);
    if (sh > 0) {
      link_send(p, sh, msg);
      n++;
    }
    q += len;
    if (*q == ',')
      q++;
  }
  return n;
}

static void out_u64(ordo__out *o, uint64_t v) {
  char b[24];
  int n = snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  ordo__out_bulk(o, b, (size_t)n);
}

static void out_gid(ordo__out *o, const uint8_t gid[ORDOD_GID_BYTES]) {
  char hex[ORDOD_GID_HEX + 1];
  srv_gid_hex(gid, hex);
  ordo__out_bulk(o, hex, ORDOD_GID_HEX);
}

static void out_hops(srv_probe *p, ordo__out *o, const pr_hop *h, int n) {
  out_u64(o, (uint64_t)n);
  for (int i = 0; i < n; i++) {
    const char *nm = p->shard[h[i].shard].name;
    ordo__out_bulk(o, nm, strlen(nm));
    out_gid(o, h[i].gid);
    out_u64(o, h[i].wseq);
    char b[24];
    int k = snprintf(b, sizeof b, "%ld", h[i].prio);
    ordo__out_bulk(o, b, (size_t)k);
    out_gid(o, h[i].next);
  }
}
enum { HOP_ARGS = 5 };

static bool arg_u64(const ordo__resp_arg *a, uint64_t *v) {
  if (a->len == 0 || a->len > 20)
    return false;
  uint64_t x = 0;
  for (size_t i = 0; i < a->len; i++) {
    if (a->ptr[i] < '0' || a->ptr[i] > '9')
      return false;
    x = x * 10 + (uint64_t)(a->ptr[i] - '0');
  }
  *v = x;
  return true;
}

static bool arg_long(const ordo__resp_arg *a, long *v) {
  char b[24];
  if (a->len == 0 || a->len >= sizeof b)
    return false;
  memcpy(b, a->ptr, a->len);
  b[a->len] = 0;
  char *end;
  *v = strtol(b, &end, 10);
  return *end == 0;
}

/* Reads n hops from argv[0..): false when malformed or naming an unknown
 * shard. */
static bool parse_hops(srv_probe *p, const ordo__resp_arg *argv, size_t argc,
                       pr_hop *h, int *n) {
  uint64_t k;
  if (argc < 1 || !arg_u64(&argv[0], &k) || k > PR_MAX_HOPS ||
      argc != 1 + k * HOP_ARGS)
    return false;
  for (size_t i = 0; i < k; i++) {
    const ordo__resp_arg *a = &argv[1 + i * HOP_ARGS];
    int sh = shard_by_name(p, a[0].ptr, a[0].len);
    if (sh < 0 || !srv_gid_parse(a[1].ptr, a[1].len, h[i].gid) ||
        !arg_u64(&a[2], &h[i].wseq) || !arg_long(&a[3], &h[i].prio) ||
        !srv_gid_parse(a[4].ptr, a[4].len, h[i].next))
      return false;
    h[i].shard = sh;
  }
  *n = (int)k;
  return true;
}

/* ---- This shard's waits ------------------------------------------------- */

static sess *sess_by_gid(srv *s, const uint8_t gid[ORDOD_GID_BYTES]) {
  for (size_t i = 0; i < s->smap_cap; i++)
    for (sess *ss = s->smap[i]; ss; ss = ss->hnext)
      if (ss->have_gid && memcmp(ss->gid, gid, ORDOD_GID_BYTES) == 0)
        return ss;
  return NULL;
}

/* Whom a waiting session waits for here: the sessions that hold one of its
 * keys in a mode that conflicts with its own, and those queued ahead of it
 * in one (the engine's grant rules serve a queue in order). */
typedef struct waitfor {
  srv *s;
  sess *self;
  ordo_mode_t mode;
  bool seen_self;
  sess *out[64];
  int n;
} waitfor;

static void waitfor_key(void *arg, uint64_t owner, int mode, uint64_t fence,
                        uint32_t count, bool waiting) {
  waitfor *w = arg;
  (void)fence;
  (void)count;
  if (owner == w->self->id) {
    if (waiting)
      w->seen_self = true;
    return;
  }
  if (waiting && w->seen_self)
    return; /* behind us: it waits for us, not we for it */
  if (mode != ORDO_MODE_X && w->mode != ORDO_MODE_X)
    return;
  sess *o = srv_sess_find(w->s, owner);
  if (!o)
    return;
  for (int i = 0; i < w->n; i++)
    if (w->out[i] == o)
      return;
  if (w->n < (int)(sizeof w->out / sizeof w->out[0]))
    w->out[w->n++] = o;
}

static int waits_for(srv *s, sess *a, sess **out, int max) {
  waitfor w = {.s = s, .self = a};
  for (size_t i = 0; i < a->nreq; i++) {
    w.mode = a->req[i].mode;
    w.seen_self = false;
    ordo__table_key_each(ordo__engine_table(s->o), a->req[i].key, a->req[i].len,
                         waitfor_key, &w);
  }
  int n = w.n < max ? w.n : max;
  memcpy(out, w.out, (size_t)n * sizeof *out);
  return n;
}

static bool hop_stands(srv *s, const pr_hop *h) {
  sess *a = sess_by_gid(s, h->gid);
  if (!a || !a->waiting || a->gen != h->wseq)
    return false;
  sess *to[64];
  int n = waits_for(s, a, to, 64);
  for (int i = 0; i < n; i++)
    if (to[i]->have_gid && memcmp(to[i]->gid, h->next, ORDOD_GID_BYTES) == 0)
      return true;
  return false;
}

static pr_remote *remote_find(srv_probe *p, const uint8_t *gid) {
  for (pr_remote *r = p->remote; r; r = r->next)
    if (memcmp(r->gid, gid, ORDOD_GID_BYTES) == 0)
      return r;
  return NULL;
}

/* ---- Probes ---------------------------------------------------------------
 */

static void cycle_found(srv_probe *p, pr_hop *h, int n);
static void tick_arm(srv_probe *p);

static void probe_send(srv_probe *p, int shard, const uint8_t *init,
                       const pr_remote *to, const pr_hop *h, int n) {
  ordo__out o = {0};
  ordo__out_array(&o, 6 + (size_t)n * HOP_ARGS);
  ordo__out_bulk(&o, "PEER", 4);
  ordo__out_bulk(&o, "PROBE", 5);
  out_gid(&o, init);
  out_gid(&o, to->gid);
  out_u64(&o, to->wseq);
  out_hops(p, &o, h, n);
  link_send(p, shard, &o);
  ordo__out_free(&o);
  p->probes_sent++;
}

/* Follows a's edges here, a being the path's last txn (waiting at this
 * shard): closes the cycle when an edge reaches the initiator, goes on
 * through txns waiting here, and sends the probe on to the shard where a
 * txn waited for is blocked. */
static void probe_walk(srv_probe *p, const uint8_t *init, sess *a, pr_hop *h,
                       int n) {
  if (n >= PR_MAX_HOPS)
    return;
  sess *to[64];
  int k = waits_for(p->s, a, to, 64);
  for (int i = 0; i < k; i++) {
    sess *b = to[i];
    if (!b->have_gid)
      continue; /* not a txn of a sharded place: it waits nowhere else */
    pr_hop *x = &h[n];
    x->shard = 0;
    memcpy(x->gid, a->gid, ORDOD_GID_BYTES);
    x->wseq = a->gen;
    x->prio = a->txn ? a->txn->priority : 0;
    memcpy(x->next, b->gid, ORDOD_GID_BYTES);
    if (memcmp(b->gid, init, ORDOD_GID_BYTES) == 0) {
      bool across = false;
      for (int j = 0; j <= n; j++)
        across |= h[j].shard != 0;
      if (across) /* one wholly inside this shard is the engine's */
        cycle_found(p, h, n + 1);
      continue;
    }
    bool seen = false;
    for (int j = 0; j < n; j++)
      if (memcmp(h[j].gid, b->gid, ORDOD_GID_BYTES) == 0)
        seen = true;
    if (seen)
      continue;
    if (b->waiting) {
      /* A chain inside this shard; a cycle wholly inside it is the
       * engine's to find. */
      probe_walk(p, init, b, h, n + 1);
      continue;
    }
    pr_remote *r = remote_find(p, b->gid);
    if (r)
      probe_send(p, r->shard, init, r, h, n + 1);
  }
}

/* A waiter's wait has lasted the probe delay: it says where it waits to
 * the shards where it holds keys, and starts a probe. */
static void probe_start(srv_probe *p, sess *a) {
  if (!a->probe_told && a->heldat) {
    a->probe_told = true;
    ordo__out o = {0};
    ordo__out_array(&o, 5);
    ordo__out_bulk(&o, "PEER", 4);
    ordo__out_bulk(&o, "BLOCKED", 7);
    out_gid(&o, a->gid);
    out_u64(&o, a->gen);
    ordo__out_bulk(&o, p->shard[0].name, strlen(p->shard[0].name));
    heldat_send(p, a->heldat, &o);
    ordo__out_free(&o);
  }
  pr_hop h[PR_MAX_HOPS];
  probe_walk(p, a->gid, a, h, 0);
}

/* ---- The victim -----------------------------------------------------------
 */

/* Lowest priority first, then the youngest (the largest gid: its first 8
 * bytes are the begin time). Every shard computes it the same way. */
static int victim_of(const pr_hop *h, int n) {
  int v = 0;
  for (int i = 1; i < n; i++) {
    if (h[i].prio < h[v].prio ||
        (h[i].prio == h[v].prio &&
         memcmp(h[i].gid, h[v].gid, ORDOD_GID_BYTES) > 0))
      v = i;
  }
  return v;
}

static void abort_msg(srv_probe *p, int shard, const pr_hop *h, int n, int v) {
  ordo__out o = {0};
  ordo__out_array(&o, 5 + (size_t)n * HOP_ARGS);
  ordo__out_bulk(&o, "PEER", 4);
  ordo__out_bulk(&o, "ABORT", 5);
  out_gid(&o, h[v].gid);
  out_u64(&o, h[v].wseq);
  out_hops(p, &o, h, n);
  link_send(p, shard, &o);
  ordo__out_free(&o);
}

static void abort_begin(srv_probe *p, const pr_hop *h, int n, int v);

static void cycle_found(srv_probe *p, pr_hop *h, int n) {
  int v = victim_of(h, n);
  if (h[v].shard == 0)
    abort_begin(p, h, n, v);
  else
    abort_msg(p, h[v].shard, h, n, v);
}

static pr_abort *abort_by_id(srv_probe *p, uint64_t id) {
  for (pr_abort *a = p->aborts; a; a = a->next)
    if (a->id == id)
      return a;
  return NULL;
}

static void abort_free(srv_probe *p, pr_abort *a) {
  for (pr_abort **pp = &p->aborts; *pp; pp = &(*pp)->next)
    if (*pp == a) {
      *pp = a->next;
      break;
    }
  free(a);
}

/* Pins (until > 0) or unpins the hops of this shard: each hop's waiter
 * cannot time out, and the txn it waits for cannot release, here, until
 * the victim is aborted or the confirmation given up (or the pin's bound:
 * a lost UNPIN holds nothing for long). */
static void pin_hops(srv *s, const pr_hop *h, int n, uint64_t until_ns) {
  for (int i = 0; i < n; i++) {
    if (h[i].shard != 0)
      continue;
    sess *a = sess_by_gid(s, h[i].gid);
    if (a && a->waiting && a->gen == h[i].wseq && a->txn)
      (void)ordo__owner_pin(ordo__engine_owner(a->txn), until_ns);
    sess *b = sess_by_gid(s, h[i].next);
    if (!b)
      continue;
    if (until_ns) {
      b->frozen = true;
      b->frozen_until_ms = srv_now_ms() + PR_PIN_MS;
      if (s->probe)
        s->probe->nfrozen++;
    } else if (b->frozen) {
      srv_sess_thaw(b);
    }
  }
  if (s->probe)
    tick_arm(s->probe);
}

/* Confirms this shard's hops of a cycle and pins them, in that order per
 * hop: the pin succeeds only while the engine still has the wait (a
 * timeout the engine has taken but the loop not yet heard of fails it),
 * and then the edge is checked. All stand: true, pinned. Else false, and
 * nothing stays pinned. */
static bool confirm_hops(srv *s, const pr_hop *h, int n) {
  uint64_t until = ordo__now_ns() + (uint64_t)PR_PIN_MS * 1000000u;
  for (int i = 0; i < n; i++) {
    if (h[i].shard != 0)
      continue;
    sess *a = sess_by_gid(s, h[i].gid);
    if (!a || !a->waiting || a->gen != h[i].wseq || !a->txn ||
        ordo__owner_pin(ordo__engine_owner(a->txn), until) != 0 ||
        !hop_stands(s, &h[i])) {
      pin_hops(s, h, n, 0);
      return false;
    }
  }
  pin_hops(s, h, n, until); /* and freezes the holders */
  return true;
}

static void unpin_all(srv_probe *p, pr_abort *a) {
  pin_hops(p->s, a->hop, a->nhops, 0);
  bool sent[64] = {false};
  for (int i = 0; i < a->nhops; i++) {
    int sh = a->hop[i].shard;
    if (sh == 0 || sh >= 64 || sent[sh])
      continue;
    sent[sh] = true;
    ordo__out o = {0};
    ordo__out_array(&o, 3 + (size_t)a->nhops * HOP_ARGS);
    ordo__out_bulk(&o, "PEER", 4);
    ordo__out_bulk(&o, "UNPIN", 5);
    out_hops(p, &o, a->hop, a->nhops);
    link_send(p, sh, &o);
    ordo__out_free(&o);
  }
}

static void abort_finish(srv_probe *p, pr_abort *a);

static void abort_begin(srv_probe *p, const pr_hop *h, int n, int v) {
  srv *s = p->s;
  sess *vs = sess_by_gid(s, h[v].gid);
  if (!vs || !vs->waiting || vs->gen != h[v].wseq || vs->probe_aborting)
    return; /* gone, or another initiator's report of the same cycle */
  if (!confirm_hops(s, h, n)) {
    p->confirms_failed++;
    return;
  }
  pr_abort *a = calloc(1, sizeof *a);
  if (!a) {
    pin_hops(s, h, n, 0);
    return;
  }
  a->id = ++p->next_abort_id;
  memcpy(a->victim, h[v].gid, ORDOD_GID_BYTES);
  a->wseq = h[v].wseq;
  memcpy(a->hop, h, (size_t)n * sizeof *h);
  a->nhops = n;
  a->deadline_ms = srv_now_ms() + PR_CONFIRM_MS;
  a->next = p->aborts;
  p->aborts = a;
  vs->probe_aborting = true;
  bool asked[64] = {false};
  for (int i = 0; i < n; i++) {
    int sh = h[i].shard;
    if (sh == 0 || sh >= 64 || asked[sh])
      continue;
    asked[sh] = true;
    a->want++;
    ordo__out o = {0};
    ordo__out_array(&o, 5 + (size_t)n * HOP_ARGS);
    ordo__out_bulk(&o, "PEER", 4);
    ordo__out_bulk(&o, "CONFIRM", 7);
    out_u64(&o, a->id);
    ordo__out_bulk(&o, p->shard[0].name, strlen(p->shard[0].name));
    out_hops(p, &o, h, n);
    link_send(p, sh, &o);
    ordo__out_free(&o);
  }
  if (a->want == 0)
    abort_finish(p, a);
}

/* Every edge of the cycle stands and is pinned: the victim's locks go on
 * every shard where it holds keys, then its wait here ends with
 * -DEADLOCK. */
static void abort_release(srv_probe *p, pr_abort *a) {
  sess *vs = sess_by_gid(p->s, a->victim);
  a->phase = 1;
  a->deadline_ms = srv_now_ms() + PR_CONFIRM_MS;
  if (vs && vs->heldat) {
    ordo__out o = {0};
    ordo__out_array(&o, 5);
    ordo__out_bulk(&o, "PEER", 4);
    ordo__out_bulk(&o, "RELEASE", 7);
    out_u64(&o, a->id);
    ordo__out_bulk(&o, p->shard[0].name, strlen(p->shard[0].name));
    out_gid(&o, a->victim);
    a->release_want = heldat_send(p, vs->heldat, &o);
    ordo__out_free(&o);
  }
  if (a->released >= a->release_want)
    abort_finish(p, a);
}

/* xabort_log -- the fault harness's line for an abort that has just taken
 * effect (tests/faults/check.py reads it: docs/reliability.md), at
 * --verbose 1: the victim, its wait, this shard, the CLOCK_MONOTONIC time,
 * and each hop as gid@shard#wseq>next. */
static void xabort_log(srv_probe *p, const pr_abort *a) {
  if (p->s->cfg.verbose < 1)
    return;
  char line[8192], g[ORDOD_GID_HEX + 1], t[ORDOD_GID_HEX + 1];
  srv_gid_hex(a->victim, g);
  int used = snprintf(line, sizeof line,
                      "ordod: INFO xabort victim=%s wseq=%llu shard=%s "
                      "t_mono_ns=%llu hops=",
                      g, (unsigned long long)a->wseq, p->shard[0].name,
                      (unsigned long long)ordo__now_ns());
  for (int i = 0; i < a->nhops && used > 0 && (size_t)used < sizeof line;
       i++) {
    srv_gid_hex(a->hop[i].gid, g);
    srv_gid_hex(a->hop[i].next, t);
    used += snprintf(line + used, sizeof line - (size_t)used, "%s%s@%s#%llu>%s",
                     i ? "," : "", g, p->shard[a->hop[i].shard].name,
                     (unsigned long long)a->hop[i].wseq, t);
  }
  fprintf(stderr, "%s\n", line);
}

static void abort_finish(srv_probe *p, pr_abort *a) {
  if (a->phase == 0) {
    abort_release(p, a);
    return;
  }
  srv *s = p->s;
  sess *vs = sess_by_gid(s, a->victim);
  if (vs && vs->waiting && vs->gen == a->wseq && vs->txn) {
    /* The reply names the cycle (srv's wake_cb reads xcycle). */
    size_t used = 0;
    vs->xcycle[0] = 0;
    for (int i = 0; i < a->nhops; i++) {
      char g[ORDOD_GID_HEX + 1], t[ORDOD_GID_HEX + 1];
      srv_gid_hex(a->hop[i].gid, g);
      srv_gid_hex(a->hop[i].next, t);
      int w = snprintf(vs->xcycle + used, sizeof vs->xcycle - used,
                       "%s%s at %s waits for %s", i ? ", " : "", g,
                       p->shard[a->hop[i].shard].name, t);
      if (w < 0 || (size_t)w >= sizeof vs->xcycle - used)
        break;
      used += (size_t)w;
    }
    p->deadlocks++;
    srv_log(s, 1, "cross-shard deadlock: victim session %llu; cycle: %s",
            (unsigned long long)vs->id, vs->xcycle);
    if (ordo__abort_wait(ordo__engine_owner(vs->txn), ORDO_EDEADLK) == 0) {
      xabort_log(p, a);
      a->phase = 2; /* aborted: its reply is on its way */
      a->deadline_ms = srv_now_ms() + PR_CONFIRM_MS;
    } else {
      /* The wait ended meanwhile (a grant, or the engine's own victim):
       * nothing was aborted. */
      p->deadlocks--;
      vs->xcycle[0] = 0;
    }
  }
  if (!vs || !vs->xcycle[0]) {
    /* Nothing to abort: let the cycle's waits go at once. */
    if (vs)
      vs->probe_aborting = false;
    unpin_all(p, a);
    abort_free(p, a);
  }
  /* Else the pins hold until the victim's -DEADLOCK is on its way
   * (srv_probe_victim_told): whatever the pins hold back (a timeout, a
   * release) then comes after the abort, to its client too. */
}

void srv_probe_victim_told(srv *s, sess *vs) {
  srv_probe *p = s->probe;
  if (!p || !vs->have_gid)
    return;
  for (pr_abort *a = p->aborts; a; a = a->next)
    if (a->phase == 2 && memcmp(a->victim, vs->gid, ORDOD_GID_BYTES) == 0) {
      vs->probe_aborting = false;
      unpin_all(p, a);
      abort_free(p, a);
      return;
    }
}

/* ---- The loop's hooks ------------------------------------------------------
 */

static void tick_fired(uv_timer_t *t);

static void tick_arm(srv_probe *p) {
  uint64_t now = srv_now_ms(), due = UINT64_MAX;
  sess *ss;
  TAILQ_FOREACH(ss, &p->waiting, plink)
  if (ss->probe_due_ms < due)
    due = ss->probe_due_ms;
  for (pr_abort *a = p->aborts; a; a = a->next)
    if (a->deadline_ms < due)
      due = a->deadline_ms;
  if (p->nfrozen && p->s->smap_cap) {
    bool any = false;
    for (size_t i = 0; i < p->s->smap_cap; i++)
      for (sess *x = p->s->smap[i]; x; x = x->hnext)
        if (x->frozen) {
          any = true;
          if (x->frozen_until_ms < due)
            due = x->frozen_until_ms;
        }
    if (!any)
      p->nfrozen = 0;
  }
  if (due == UINT64_MAX)
    uv_timer_stop(&p->tick);
  else
    uv_timer_start(&p->tick, tick_fired, due > now ? due - now : 0, 0);
}

static void tick_fired(uv_timer_t *t) {
  srv_probe *p = t->data;
  uint64_t now = srv_now_ms();
  if (p->nfrozen)
    for (size_t i = 0; i < p->s->smap_cap; i++)
      for (sess *x = p->s->smap[i]; x; x = x->hnext)
        if (x->frozen && x->frozen_until_ms <= now)
          srv_sess_thaw(x);
  sess *ss;
  TAILQ_FOREACH(ss, &p->waiting, plink) {
    if (ss->probe_due_ms > now)
      continue;
    probe_start(p, ss);
    /* Probe again while it waits: a probe lost with a link, or one that
     * went out before a peer's BLOCKED came, must not leave a cycle. */
    unsigned d = ss->probe_every_ms ? ss->probe_every_ms * 2 : 2;
    ss->probe_every_ms = d > PR_REPROBE_MAX_MS ? PR_REPROBE_MAX_MS : d;
    ss->probe_due_ms = now + ss->probe_every_ms;
  }
  for (pr_abort *a = p->aborts, *nx; a; a = nx) {
    nx = a->next;
    if (a->deadline_ms > now)
      continue;
    if (a->phase == 0) {
      p->confirms_failed++;
      sess *vs = sess_by_gid(p->s, a->victim);
      if (vs)
        vs->probe_aborting = false;
      unpin_all(p, a);
      abort_free(p, a);
    } else if (a->phase == 1) {
      abort_finish(p, a); /* a shard that never acked: its leases end */
    } else {
      sess *vs = sess_by_gid(p->s, a->victim);
      if (vs)
        vs->probe_aborting = false;
      unpin_all(p, a); /* the victim went before its reply */
      abort_free(p, a);
    }
  }
  tick_arm(p);
}

void srv_probe_wait_begin(srv *s, sess *ss) {
  srv_probe *p = s->probe;
  if (!p || !ss->have_gid || ss->probe_listed)
    return;
  ss->probe_listed = true;
  ss->probe_told = false;
  ss->probe_aborting = false;
  ss->probe_every_ms = 0;
  ss->probe_due_ms = srv_now_ms() + (uint64_t)s->cfg.probe_delay_ms;
  TAILQ_INSERT_TAIL(&p->waiting, ss, plink);
  tick_arm(p);
}

void srv_probe_wait_end(srv *s, sess *ss) {
  srv_probe *p = s->probe;
  if (!p || !ss->probe_listed)
    return;
  ss->probe_listed = false;
  TAILQ_REMOVE(&p->waiting, ss, plink);
  if (ss->probe_told && ss->heldat) {
    ordo__out o = {0};
    ordo__out_array(&o, 4);
    ordo__out_bulk(&o, "PEER", 4);
    ordo__out_bulk(&o, "UNBLOCKED", 9);
    out_gid(&o, ss->gid);
    out_u64(&o, ss->gen);
    heldat_send(p, ss->heldat, &o);
    ordo__out_free(&o);
  }
}

/* ---- PEER commands
 * ----------------------------------------------------------- */

static void reply_to(srv_probe *p, int shard, const char *what, uint64_t id,
                     int yes) {
  ordo__out o = {0};
  ordo__out_array(&o, 4);
  ordo__out_bulk(&o, "PEER", 4);
  ordo__out_bulk(&o, what, strlen(what));
  out_u64(&o, id);
  out_u64(&o, (uint64_t)yes);
  link_send(p, shard, &o);
  ordo__out_free(&o);
}

static bool is(const ordo__resp_arg *a, const char *w) {
  return a->len == strlen(w) && strncasecmp(a->ptr, w, a->len) == 0;
}

void srv_probe_cmd(conn *c, size_t argc, ordo__resp_arg *argv) {
  srv *s = c->s;
  srv_probe *p = s->probe;
  if (!p) {
    ordo__out_error(&c->out, "ERR",
                    "this server has no peers (start it with --peers)");
    return;
  }
  const ordo__resp_arg *v = &argv[2];
  size_t n = argc - 2;
  pr_hop h[PR_MAX_HOPS];
  int nh = 0;
  uint8_t gid[ORDOD_GID_BYTES], g2[ORDOD_GID_BYTES];
  uint64_t a, b;
  if (is(&argv[1], "HELLO") && n == 1) {
    c->peer = shard_by_name(p, v[0].ptr, v[0].len) > 0;
    if (!c->peer) {
      ordo__out_error(&c->out, "ERR", "'%.*s' is not one of --peers",
                      (int)v[0].len, v[0].ptr);
      return;
    }
  } else if (!c->peer) {
    ordo__out_error(&c->out, "ERR", "PEER HELLO name first");
    return;
  } else if (is(&argv[1], "BLOCKED") && n == 3 &&
             srv_gid_parse(v[0].ptr, v[0].len, gid) && arg_u64(&v[1], &a)) {
    int sh = shard_by_name(p, v[2].ptr, v[2].len);
    if (sh <= 0) {
      ordo__out_error(&c->out, "ERR", "unknown shard");
      return;
    }
    pr_remote *r = remote_find(p, gid);
    if (!r && (r = calloc(1, sizeof *r)) != NULL) {
      memcpy(r->gid, gid, sizeof gid);
      r->next = p->remote;
      p->remote = r;
    }
    if (r) {
      r->shard = sh;
      r->wseq = a;
      /* Waiters here that wait for it and have waited long enough probe
       * now: their own probes may have gone out before this came. */
      sess *ss;
      TAILQ_FOREACH(ss, &p->waiting, plink)
      if (ss->probe_every_ms)
        ss->probe_due_ms = 0;
      tick_arm(p);
    }
  } else if (is(&argv[1], "UNBLOCKED") && n == 2 &&
             srv_gid_parse(v[0].ptr, v[0].len, gid) && arg_u64(&v[1], &a)) {
    for (pr_remote **pp = &p->remote; *pp; pp = &(*pp)->next)
      if (memcmp((*pp)->gid, gid, sizeof gid) == 0 && (*pp)->wseq == a) {
        pr_remote *r = *pp;
        *pp = r->next;
        free(r);
        break;
      }
  } else if (is(&argv[1], "PROBE") && n >= 4 &&
             srv_gid_parse(v[0].ptr, v[0].len, gid) &&
             srv_gid_parse(v[1].ptr, v[1].len, g2) && arg_u64(&v[2], &a) &&
             parse_hops(p, &v[3], n - 3, h, &nh) && nh > 0) {
    p->probes_received++;
    sess *x = sess_by_gid(s, g2);
    if (!x || !x->waiting || x->gen != a)
      p->probes_stale++;
    else
      probe_walk(p, gid, x, h, nh);
  } else if (is(&argv[1], "ABORT") && n >= 3 &&
             srv_gid_parse(v[0].ptr, v[0].len, gid) && arg_u64(&v[1], &a) &&
             parse_hops(p, &v[2], n - 2, h, &nh)) {
    int vi = -1;
    for (int i = 0; i < nh; i++)
      if (h[i].shard == 0 && memcmp(h[i].gid, gid, sizeof gid) == 0 &&
          h[i].wseq == a)
        vi = i;
    if (vi >= 0)
      abort_begin(p, h, nh, vi);
  } else if (is(&argv[1], "CONFIRM") && n >= 3 && arg_u64(&v[0], &a) &&
             parse_hops(p, &v[2], n - 2, h, &nh)) {
    int from = shard_by_name(p, v[1].ptr, v[1].len);
    int yes = confirm_hops(s, h, nh);
    if (from > 0)
      reply_to(p, from, "CONFIRMED", a, yes);
  } else if (is(&argv[1], "CONFIRMED") && n == 2 && arg_u64(&v[0], &a) &&
             arg_u64(&v[1], &b)) {
    pr_abort *ab = abort_by_id(p, a);
    if (ab && ab->phase == 0) {
      if (!b) {
        p->confirms_failed++;
        sess *vs = sess_by_gid(s, ab->victim);
        if (vs)
          vs->probe_aborting = false;
        unpin_all(p, ab);
        abort_free(p, ab);
      } else if (++ab->yes == ab->want) {
        abort_finish(p, ab);
      }
    }
  } else if (is(&argv[1], "UNPIN") && n >= 1 &&
             parse_hops(p, &v[0], n, h, &nh)) {
    pin_hops(s, h, nh, 0);
  } else if (is(&argv[1], "RELEASE") && n == 3 && arg_u64(&v[0], &a) &&
             srv_gid_parse(v[2].ptr, v[2].len, gid)) {
    int from = shard_by_name(p, v[1].ptr, v[1].len);
    sess *x = sess_by_gid(s, gid);
    if (x && x->txn && !x->waiting)
      (void)ordo_unlock_all(x->txn);
    if (from > 0)
      reply_to(p, from, "RELEASED", a, 1);
  } else if (is(&argv[1], "RELEASED") && n == 2 && arg_u64(&v[0], &a)) {
    pr_abort *ab = abort_by_id(p, a);
    if (ab && ab->phase == 1 && ++ab->released >= ab->release_want)
      abort_finish(p, ab);
  } else {
    ordo__out_error(&c->out, "ERR", "bad PEER message '%.*s'", (int)argv[1].len,
                    argv[1].ptr);
    return;
  }
  ordo__out_simple(&c->out, "OK");
}

/* ---- Start-up and INFO ------------------------------------------------------
 */

static int shard_addr(const char *name, struct sockaddr_storage *out) {
  const char *colon = strrchr(name, ':');
  if (!colon || colon == name || !colon[1])
    return -1;
  char host[256];
  size_t hl = (size_t)(colon - name);
  if (hl >= sizeof host)
    return -1;
  memcpy(host, name, hl);
  host[hl] = 0;
  if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
    memmove(host, host + 1, hl - 2);
    host[hl - 2] = 0;
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  if (getaddrinfo(host, colon + 1, &hints, &res) != 0 || !res)
    return -1;
  memcpy(out, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  return 0;
}

int srv_probe_init(srv *s, char *err, size_t errlen) {
  if (!s->cfg.peers[0])
    return 0;
  srv_probe *p = calloc(1, sizeof *p);
  int n = 1;
  for (const char *q = s->cfg.peers; *q; q++)
    n += *q == ',';
  if (!p || !(p->shard = calloc((size_t)n + 1, sizeof *p->shard))) {
    free(p);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  p->s = s;
  TAILQ_INIT(&p->waiting);
  if (s->cfg.shard_name[0])
    snprintf(p->shard[0].name, sizeof p->shard[0].name, "%s",
             s->cfg.shard_name);
  else
    snprintf(p->shard[0].name, sizeof p->shard[0].name, "%s:%d", s->cfg.bind,
             s->cfg.port);
  p->nshard = 1;
  const char *q = s->cfg.peers;
  while (*q) {
    const char *e = strchr(q, ',');
    size_t len = e ? (size_t)(e - q) : strlen(q);
    if (len == 0 || len >= ORDOD_SHARD_NAME) {
      snprintf(err, errlen, "--peers: an empty or too long shard name");
      goto fail;
    }
    peer *pe = &p->shard[p->nshard];
    /* name=host:port: the peer is called name, and dialled at host:port
     * (a proxy between the shards, say); name alone is both. */
    const char *eq = memchr(q, '=', len);
    size_t nlen = eq ? (size_t)(eq - q) : len;
    char addr[ORDOD_SHARD_NAME];
    snprintf(addr, sizeof addr, "%.*s", (int)(eq ? len - nlen - 1 : len),
             eq ? eq + 1 : q);
    memcpy(pe->name, q, nlen);
    pe->name[nlen] = 0;
    if (nlen == 0 || !addr[0]) {
      snprintf(err, errlen, "--peers: an empty name or address in '%.*s'",
               (int)len, q);
      goto fail;
    }
    if (shard_by_name(p, pe->name, nlen) >= 0) {
      /* This server itself, or a repeat: no link. */
    } else if (shard_addr(addr, &pe->addr) != 0) {
      snprintf(err, errlen,
               "--peers: '%s' is not host:port of a resolvable host", addr);
      goto fail;
    } else {
      pe->s = s;
      p->nshard++;
    }
    q += len;
    if (*q == ',')
      q++;
  }
  uv_timer_init(s->loop, &p->tick);
  p->tick.data = p;
  for (int i = 1; i < p->nshard; i++) {
    uv_timer_init(s->loop, &p->shard[i].retry);
    p->shard[i].retry.data = &p->shard[i];
    link_connect(&p->shard[i]);
  }
  s->probe = p;
  return 0;
fail:
  free(p->shard);
  free(p);
  return -1;
}

void srv_probe_close(srv *s) {
  srv_probe *p = s->probe;
  if (!p)
    return;
  while (p->remote) {
    pr_remote *r = p->remote;
    p->remote = r->next;
    free(r);
  }
  while (p->aborts) {
    pr_abort *a = p->aborts;
    p->aborts = a->next;
    free(a);
  }
  free(p->shard);
  free(p);
  s->probe = NULL;
}

uint64_t srv_probe_deadlocks(srv *s) {
  return s->probe ? s->probe->deadlocks : 0;
}

size_t srv_probe_info(srv *s, char *buf, size_t cap) {
  srv_probe *p = s->probe;
  int up = 0;
  for (int i = 1; p && i < p->nshard; i++)
    up += p->shard[i].up;
  int n = snprintf(
      buf, cap,
      "# Probes\r\nshard_name:%s\r\npeers:%d\r\npeers_linked:%d\r\n"
      "probe_delay_ms:%ld\r\nprobes_sent:%llu\r\nprobes_received:%llu\r\n"
      "probes_stale:%llu\r\ndeadlocks_cross_shard:%llu\r\n"
      "confirms_failed:%llu\r\npeer_messages_dropped:%llu\r\n\r\n",
      p ? p->shard[0].name : "", p ? p->nshard - 1 : 0, up,
      s->cfg.probe_delay_ms, (unsigned long long)(p ? p->probes_sent : 0),
      (unsigned long long)(p ? p->probes_received : 0),
      (unsigned long long)(p ? p->probes_stale : 0),
      (unsigned long long)(p ? p->deadlocks : 0),
      (unsigned long long)(p ? p->confirms_failed : 0),
      (unsigned long long)(p ? p->messages_dropped : 0));
  return n < 0 ? 0 : (size_t)n;
}
