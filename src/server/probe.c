/*
 * probe.c -- deadlocks across shards of ordod: the peer links between
 * servers and the edge-chasing probes (Chandy-Misra-Haas) that find a cycle
 * no one shard sees, with versioned edges, a confirmation that pins the
 * cycle's waits and freezes their holders per abort, and one victim per
 * cycle whose abort takes effect at its own shard before any of its keys
 * goes elsewhere. The protocol is docs/distributed.md ("The servers'
 * side"); its model is probe.pml beside this file; this is its server side.
 * src/server/README.md ("Shards and probes") has the invariants.
 *
 * A shard's name is "host:port" as clients and peers write it. Each server
 * keeps one outbound link to each peer (--peers) and sends PEER messages on
 * it; every message is answered on the same link, in order, with one line,
 * which the link's reader matches with what it asked (a FIFO per link).
 * Everything here runs on the loop thread.
 *
 * Interface: srv_probe_init, srv_probe_close, srv_probe_gid_set,
 * srv_probe_gid_attached,
 * srv_probe_sess_drop, srv_probe_wait_begin, srv_probe_wait_end,
 * srv_probe_holds_sess, srv_probe_victim_hold, srv_probe_victim_told,
 * srv_probe_lock_check, srv_probe_unlocked, srv_probe_conn_closed,
 * srv_probe_cmd,
 * srv_probe_info, srv_probe_deadlocks.
 */
#include "server/server.h"

#include "core/table.h"

#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PR_MAX_HOPS 16
#define PR_REPROBE_MAX_MS 500 /* a waiter probes again at most this late */
#define PR_CONFIRM_MS 1000    /* a confirmation's bound */
#define PR_PIN_MS 2000        /* a pin's or a freeze's bound, unless renewed */
#define PR_PIN_RENEW_MS 500   /* renewal while releases are outstanding */
#define PR_BACKOFF_MAX_MS 1000
#define PR_PINS_PER_SESS 64      /* pins and freezes on one session */
#define PR_RELEASE_SEEN 1024     /* RELEASE ids remembered per peer */
#define PR_LINE_MAX 512          /* an answer line kept (the rest is skipped) */
#define PR_UNPIN_PENDING 256     /* UNPINs kept to say again per peer */
#define PR_PEER_CONNS 8          /* a peer's open links remembered */
#define PR_LINK_QUEUE (4u << 20) /* bytes queued on a link, at most */

/* One hop of a probe's path: txn gid, waiting at shard with wseq, waits
 * for next. prio is gid's PRIORITY, for the victim rule. */
typedef struct pr_hop {
  int shard; /* index in the shard table: 0 is this server */
  uint8_t gid[ORDOD_GID_BYTES], next[ORDOD_GID_BYTES];
  uint64_t wseq;
  long prio;
} pr_hop;

/* What an answer on a link is about: one per message sent, in order. */
enum { ASK_NONE, ASK_BLOCKED, ASK_CONFIRM, ASK_RELEASE, ASK_UNPIN };
typedef struct pr_ask {
  int kind;
  uint64_t a, b; /* BLOCKED: session id, wseq; CONFIRM, RELEASE: abort id */
} pr_ask;

/* A BLOCKED entry: what a peer told us of a txn blocked there. The gid
 * comes first: the map by gid finds it at offset 0. */
typedef struct pr_remote {
  uint8_t gid[ORDOD_GID_BYTES];
  int shard;
  uint64_t wseq;
  uint64_t conn; /* the connection (a link of the peer's) that said it */
  /* A LOCK or UNLOCK of the txn here since: its client is no longer
   * blocked at that shard, so a RELEASE of that wait must not act here. */
  bool touched;
  struct pr_remote *hnext;      /* the map by gid */
  TAILQ_ENTRY(pr_remote) plink; /* its peer's entries */
} pr_remote;

typedef struct peer {
  srv *s;
  int idx;
  char name[ORDOD_SHARD_NAME];
  struct sockaddr_storage addr;
  uv_tcp_t tcp;
  uv_connect_t creq;
  uv_timer_t retry;
  bool up, busy; /* connected; a connect or close in progress */
  bool closing;  /* uv_close called, its callback not yet run */
  unsigned backoff_ms;
  char rbuf[4096];
  /* Our link's answers: the questions asked, oldest first (a ring), and
   * the answer line being read. */
  pr_ask *ask;
  size_t ask_head, ask_n, ask_cap;
  char line[PR_LINE_MAX];
  size_t line_len;
  /* Its links to us: the connections that said HELLO with its name and
   * are open, oldest first (at most PR_PEER_CONNS), and the current one
   * (the latest still open; 0: none), whose BLOCKEDs alone are taken; and
   * the entries its links gave, each of which goes with its connection. */
  uint64_t in_conns[PR_PEER_CONNS];
  int nin;
  uint64_t in_conn;
  TAILQ_HEAD(, pr_remote) remotes;
  size_t nremote;
  /* Its aborts' RELEASEs done here (a ring of ids). */
  uint64_t seen[PR_RELEASE_SEEN];
  size_t nseen;
  /* Our UNPINs it has not answered (a link broke, or was down): said again
   * on the next link while their pins could still hold there, so that a
   * dead abort's pin does not make its waits' other cycles give way for
   * its whole bound. A ring of ids with the time each pin ends there. */
  struct {
    uint64_t id, until_ms;
  } unpin[PR_UNPIN_PENDING];
  size_t nunpin;
} peer;

/* A pin or a freeze of abort (origin, id) on a session. */
enum { PIN_WAIT = 1, PIN_FREEZE = 2 };
typedef struct pr_pin {
  int origin;
  uint64_t id;
  uint64_t until_ms;
  uint64_t since_ms; /* renewals never take it past a lease from here */
  uint64_t wseq;     /* PIN_WAIT: the wait pinned */
  int kind;
} pr_pin;

/* probe.c's part of a session with a global id. The gid comes first: the
 * map by gid finds it at offset 0. */
struct srv_psess {
  uint8_t gid[ORDOD_GID_BYTES];
  sess *ss;
  struct srv_psess *gnext; /* the map by gid */
  /* Per shard: 0 not told of this wait, 1 BLOCKED sent (its answer due),
   * 2 acknowledged. nshard bytes. */
  uint8_t *told;
  int *held; /* the current wait's HELDAT, as peer indices */
  int nheld;
  pr_pin *pins;
  int npins, cpins;
  TAILQ_ENTRY(srv_psess) pinlink; /* on the list of pinned sessions */
  bool on_pinlist;
  uint64_t walk; /* the walk that last visited it */
  /* A RELEASE let its keys go: its next LOCK hears -DEADLOCK. */
  bool xreleased;
  uint32_t xreleased_attempt; /* a LOCK of a later attempt is not told */
  char xreleased_by[ORDOD_SHARD_NAME];
};
typedef struct srv_psess psess;

/* An abort of a cross-shard cycle's victim, at the victim's shard. */
enum { AB_CONFIRMING, AB_RELEASING };
typedef struct pr_abort {
  uint64_t id;
  uint64_t vsess;   /* the victim's session id here */
  uint32_t attempt; /* its LOCK's ATTEMPT (0: none) */
  uint8_t victim[ORDOD_GID_BYTES];
  uint64_t wseq;
  pr_hop hop[PR_MAX_HOPS];
  int nhops;
  uint8_t *asked; /* per shard: CONFIRM asked (1), said yes (2) */
  int want, yes;
  /* Per shard: 0 none, 1 to send, 2 sent, 3 answered, 4 not confirmed
   * (answered with an error, its link down for PR_CONFIRM_MS, or the
   * answer's bound passed): the victim's answer names those. */
  uint8_t *rel;
  int rel_left;
  int phase;
  bool event_seen; /* the victim's -DEADLOCK waits for the releases */
  /* CONFIRMING: its bound. RELEASING: when the pins are renewed next, and
   * when the victim is answered at the latest (one lease after the abort
   * took effect: a shard that has not answered by then is named in it). */
  uint64_t deadline_ms, renew_ms, hold_end_ms, effect_ms;
  struct pr_abort *next;
} pr_abort;

struct srv_probe {
  srv *s;
  /* shard[0] is this server (no link); 1..n the peers, by --peers. */
  peer *shard;
  int nshard;
  pr_remote **rmap; /* BLOCKED entries by gid */
  size_t rmap_cap, nremote;
  psess **gmap; /* sessions with a gid, by gid */
  size_t gmap_cap, ngid;
  TAILQ_HEAD(, srv_psess) pinned; /* sessions with a pin or a freeze */
  pr_abort *aborts;
  uint64_t next_abort_id;
  uint64_t next_walk;
  uv_timer_t tick;            /* probes due, bounds of aborts and pins */
  TAILQ_HEAD(, sess) waiting; /* sessions with a gid that wait */
  uint64_t probes_sent, probes_received, probes_stale, deadlocks,
      confirms_failed, messages_dropped, blocked_refused, aborts_yielded,
      releases_done, releases_repeated, releases_stale;
};

static void tick_arm(srv_probe *p);

/* ---- Maps by gid -----------------------------------------------------------
 * Two chained maps keyed by a gid's random half: the BLOCKED entries and
 * this server's sessions with a gid. An item's gid is at offset 0 and its
 * chain link at next_off.
 */

static size_t gid_slot(const uint8_t *gid, size_t cap) {
  uint64_t h;
  memcpy(&h, gid + 8, 8);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return (size_t)(h ^ (h >> 32)) & (cap - 1);
}

#define NEXT(x, off) (*(void **)((char *)(x) + (off)))

/* Grows a map to twice its slots once it holds as many items (a failed
 * allocation keeps the old one: longer chains, no failure). */
static void map_grow(void ***map, size_t *cap, size_t n, size_t next_off) {
  if (*map && n < *cap)
    return;
  size_t nc = *cap ? *cap * 2 : 64;
  void **m = calloc(nc, sizeof *m);
  if (!m)
    return;
  for (size_t i = 0; *map && i < *cap; i++)
    for (void *x = (*map)[i], *nx; x; x = nx) {
      nx = NEXT(x, next_off);
      size_t k = gid_slot(x, nc);
      NEXT(x, next_off) = m[k];
      m[k] = x;
    }
  free(*map);
  *map = m;
  *cap = nc;
}

static void map_put(void ***map, size_t *cap, size_t *n, void *x,
                    size_t next_off) {
  map_grow(map, cap, *n + 1, next_off);
  size_t k = gid_slot(x, *cap);
  NEXT(x, next_off) = (*map)[k];
  (*map)[k] = x;
  (*n)++;
}

static void map_del(void **map, size_t cap, size_t *n, void *x,
                    size_t next_off) {
  if (!map)
    return;
  for (void **pp = &map[gid_slot(x, cap)]; *pp; pp = &NEXT(*pp, next_off))
    if (*pp == x) {
      *pp = NEXT(x, next_off);
      (*n)--;
      return;
    }
}

#define RNEXT offsetof(pr_remote, hnext)
#define GNEXT offsetof(psess, gnext)

/* The session with this gid that waits here with this wseq (a wseq is
 * unique on a server), or NULL. */
static sess *waiter_of(srv_probe *p, const uint8_t *gid, uint64_t wseq) {
  if (!p->gmap)
    return NULL;
  for (psess *x = p->gmap[gid_slot(gid, p->gmap_cap)]; x; x = x->gnext)
    if (memcmp(x->gid, gid, ORDOD_GID_BYTES) == 0 && x->ss->waiting &&
        x->ss->gen == wseq && !x->ss->closing)
      return x->ss;
  return NULL;
}

sess *srv_probe_gid_attached(srv *s, const uint8_t *gid, const sess *except) {
  srv_probe *p = s->probe;
  if (!p || !p->gmap)
    return NULL;
  for (psess *x = p->gmap[gid_slot(gid, p->gmap_cap)]; x; x = x->gnext)
    if (x->ss != except && x->ss->c && !x->ss->closing &&
        memcmp(x->gid, gid, ORDOD_GID_BYTES) == 0)
      return x->ss;
  return NULL;
}

void srv_probe_gid_set(srv *s, sess *ss) {
  srv_probe *p = s->probe;
  if (!p || ss->pr || !ss->have_gid)
    return;
  psess *x = calloc(1, sizeof *x);
  uint8_t *told = calloc((size_t)p->nshard, 1);
  int *held = calloc((size_t)p->nshard, sizeof *held);
  if (!x || !told || !held) {
    free(x);
    free(told);
    free(held);
    return; /* no probe finds it: its cycles are left to the timeouts */
  }
  memcpy(x->gid, ss->gid, ORDOD_GID_BYTES);
  x->ss = ss;
  x->told = told;
  x->held = held;
  ss->pr = x;
  map_put((void ***)&p->gmap, &p->gmap_cap, &p->ngid, x, GNEXT);
}

/* ---- Shards and links ------------------------------------------------------
 */

static int shard_by_name(srv_probe *p, const char *name, size_t len) {
  for (int i = 0; i < p->nshard; i++)
    if (strlen(p->shard[i].name) == len &&
        memcmp(p->shard[i].name, name, len) == 0)
      return i;
  return -1;
}

static void link_connect(peer *pe);
static void link_lost_asks(peer *pe);
static void link_up_resend(peer *pe);
static void answer(peer *pe, const char *line, size_t len);

static void retry_fired(uv_timer_t *t) {
  link_connect(t->data);
}

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

/* The link is gone: what it still had to answer fails (link_lost_asks),
 * and it is dialled again after the backoff. */
static void link_down(peer *pe) {
  if (pe->closing)
    return;
  bool was_up = pe->up;
  pe->up = false;
  pe->busy = true;
  pe->closing = true;
  pe->line_len = 0;
  uv_close((uv_handle_t *)&pe->tcp, link_closed);
  if (was_up || pe->ask_n)
    link_lost_asks(pe);
}

static void link_alloc(uv_handle_t *h, size_t n, uv_buf_t *b) {
  peer *pe = h->data;
  (void)n;
  *b = uv_buf_init(pe->rbuf, sizeof pe->rbuf);
}

/* The peer's answers, one line each, to what we asked, in order. */
static void link_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  peer *pe = st->data;
  if (n < 0) {
    link_down(pe);
    return;
  }
  for (ssize_t i = 0; i < n && pe->up; i++) {
    char ch = b->base[i];
    if (ch == '\n') {
      size_t len = pe->line_len;
      if (len > 0 && pe->line[len - 1] == '\r')
        len--;
      pe->line_len = 0;
      answer(pe, pe->line, len);
      continue;
    }
    if (pe->line_len < sizeof pe->line)
      pe->line[pe->line_len++] = ch;
  }
}

typedef struct link_wreq {
  uv_write_t w;
  char data[];
} link_wreq;

static void link_written(uv_write_t *w, int status) {
  (void)status; /* a failed write shows as a read error: link_down */
  free(w);
}

static bool ask_push(peer *pe, pr_ask a) {
  if (pe->ask_n == pe->ask_cap) {
    size_t nc = pe->ask_cap ? pe->ask_cap * 2 : 64;
    pr_ask *q = malloc(nc * sizeof *q);
    if (!q)
      return false;
    for (size_t i = 0; i < pe->ask_n; i++)
      q[i] = pe->ask[(pe->ask_head + i) % pe->ask_cap];
    free(pe->ask);
    pe->ask = q;
    pe->ask_cap = nc;
    pe->ask_head = 0;
  }
  pe->ask[(pe->ask_head + pe->ask_n) % pe->ask_cap] = a;
  pe->ask_n++;
  return true;
}

/*
 * link_send -- sends one message (o) on the link to shard and records
 * what its answer will be about. false when it was not sent (the link is
 * down, or no memory): then nothing was recorded, and the caller keeps
 * whatever says it must be sent again.
 */
static bool link_send(srv_probe *p, int shard, ordo__out *o, pr_ask a) {
  peer *pe = &p->shard[shard];
  if (shard <= 0 || !pe->up || o->oom ||
      uv_stream_get_write_queue_size((uv_stream_t *)&pe->tcp) > PR_LINK_QUEUE) {
    /* Down, or a peer that does not read (stopped): what was not sent is
     * said again later by whoever needs it; memory stays bounded. */
    p->messages_dropped++;
    return false;
  }
  link_wreq *r = malloc(sizeof *r + o->len);
  if (!r || !ask_push(pe, a)) {
    free(r);
    p->messages_dropped++;
    return false;
  }
  memcpy(r->data, o->buf, o->len);
  uv_buf_t b = uv_buf_init(r->data, (unsigned)o->len);
  if (uv_write(&r->w, (uv_stream_t *)&pe->tcp, &b, 1, link_written) != 0) {
    /* The link is closing; its reader's error brings link_down (never
     * called from here: the callers walk lists link_down changes). */
    free(r);
    pe->ask_n--; /* the one just pushed */
    p->messages_dropped++;
    return false;
  }
  return true;
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
  pe->line_len = 0;
  uv_read_start((uv_stream_t *)&pe->tcp, link_alloc, link_read);
  srv *s = pe->s;
  ordo__out o = {0};
  if (s->cfg.requirepass[0]) {
    ordo__out_array(&o, 2);
    ordo__out_bulk(&o, "AUTH", 4);
    ordo__out_bulk(&o, s->cfg.requirepass, strlen(s->cfg.requirepass));
    link_send(s->probe, pe->idx, &o, (pr_ask){ASK_NONE, 0, 0});
    ordo__out_free(&o);
    o = (ordo__out){0};
  }
  ordo__out_array(&o, 3);
  ordo__out_bulk(&o, "PEER", 4);
  ordo__out_bulk(&o, "HELLO", 5);
  ordo__out_bulk(&o, s->probe->shard[0].name, strlen(s->probe->shard[0].name));
  link_send(s->probe, pe->idx, &o, (pr_ask){ASK_NONE, 0, 0});
  ordo__out_free(&o);
  srv_log(s, 1, "peer %s: linked", pe->name);
  if (pe->up)
    link_up_resend(pe);
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

/* ---- Messages --------------------------------------------------------------
 */

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

/* A message of the form PEER verb [u64] ... built by the callers below. */
static void msg_head(ordo__out *o, size_t argc, const char *verb) {
  ordo__out_array(o, argc);
  ordo__out_bulk(o, "PEER", 4);
  ordo__out_bulk(o, verb, strlen(verb));
}

static bool arg_u64(const ordo__resp_arg *a, uint64_t *v) {
  if (a->len == 0 || a->len > 20)
    return false;
  uint64_t x = 0;
  for (size_t i = 0; i < a->len; i++) {
    if (a->ptr[i] < '0' || a->ptr[i] > '9')
      return false;
    uint64_t d = (uint64_t)(a->ptr[i] - '0');
    if (x > (UINT64_MAX - d) / 10)
      return false;
    x = x * 10 + d;
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

/* Whether hops chain (each one's next is the following one's txn), and,
 * closed, whether the last one's next is the first's txn: a forged or
 * garbled path is not acted on. */
static bool hops_chain(const pr_hop *h, int n, bool closed) {
  if (n < 1 || (closed && n < 2))
    return false;
  for (int i = 0; i + 1 < n; i++)
    if (memcmp(h[i].next, h[i + 1].gid, ORDOD_GID_BYTES) != 0)
      return false;
  return !closed || memcmp(h[n - 1].next, h[0].gid, ORDOD_GID_BYTES) == 0;
}

/* ---- Whom a wait waits for -------------------------------------------------
 * A growable list: every blocker counts, however many share a key (a cap
 * would lose the cycle that goes through the one left out).
 */

typedef struct sess_list {
  sess **v;
  size_t n, cap;
  bool oom;
} sess_list;

static void list_add(sess_list *l, sess *x) {
  if (l->n > 0 && l->v[l->n - 1] == x)
    return; /* the same holder of the next key: the common repeat */
  if (l->n == l->cap) {
    size_t nc = l->cap ? l->cap * 2 : 16;
    sess **v = realloc(l->v, nc * sizeof *v);
    if (!v) {
      l->oom = true;
      return;
    }
    l->v = v;
    l->cap = nc;
  }
  l->v[l->n++] = x;
}

typedef struct waitfor {
  srv *s;
  sess *self;
  ordo_mode_t mode;
  bool seen_self;
  sess_list *out;
} waitfor;

/* Whom a waiting session waits for here: the sessions that hold one of its
 * keys in a mode that conflicts with its own, and those queued ahead of it
 * in one (the engine's grant rules serve a queue in order). */
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
  if (o)
    list_add(w->out, o);
}

static int ptr_cmp(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (sess *const *)a,
            y = (uintptr_t) * (sess *const *)b;
  return x < y ? -1 : x > y;
}

/* Every blocker of a's wait here, each once (sorted and made unique at the
 * end: O(k log k) for k blockers, so a key held by thousands of readers
 * costs a probe little). */
static void waits_for(srv *s, sess *a, sess_list *out) {
  waitfor w = {.s = s, .self = a, .out = out};
  for (size_t i = 0; i < a->nreq; i++) {
    w.mode = a->req[i].mode;
    w.seen_self = false;
    ordo__table_key_each(ordo__engine_table(s->o), a->req[i].key, a->req[i].len,
                         waitfor_key, &w);
  }
  if (out->n < 2)
    return;
  qsort(out->v, out->n, sizeof *out->v, ptr_cmp);
  size_t k = 1;
  for (size_t i = 1; i < out->n; i++)
    if (out->v[i] != out->v[k - 1])
      out->v[k++] = out->v[i];
  out->n = k;
}

/* The session the hop's waiter waits for here whose gid is next, or
 * NULL: the hop's edge stands when it is not NULL. */
static sess *hop_holder(srv *s, sess *a, const uint8_t *next) {
  sess_list l = {0};
  waits_for(s, a, &l);
  sess *b = NULL;
  for (size_t i = 0; i < l.n && !b; i++)
    if (l.v[i]->have_gid && memcmp(l.v[i]->gid, next, ORDOD_GID_BYTES) == 0)
      b = l.v[i];
  free(l.v);
  return b;
}

/* ---- Pins and freezes ------------------------------------------------------
 * Each is a record (origin, id, until, kind) on a session: the engine pin
 * of a wait is the latest until of its PIN_WAIT records, a session is
 * frozen while it has a PIN_FREEZE record, and one abort's records go
 * alone (defect 2 of issue 30: a pin that was one deadline let one
 * abort's UNPIN lift another's). While a session has a record, what would
 * end it waits (srv_probe_holds_sess).
 */

/* Applies x's PIN_WAIT records to its wait in the engine: 0 when it has a
 * record and the engine still has that wait, else an error (the wait has
 * ended; a call with no record unpins). */
static int pin_apply(srv_probe *p, psess *x) {
  sess *ss = x->ss;
  uint64_t until = 0;
  for (int i = 0; i < x->npins; i++)
    if ((x->pins[i].kind & PIN_WAIT) && ss->waiting &&
        x->pins[i].wseq == ss->gen && x->pins[i].until_ms > until)
      until = x->pins[i].until_ms;
  if (!ss->txn || !ss->waiting)
    return ORDO_ENOTHELD;
  uint64_t now = srv_now_ms();
  uint64_t ns = 0;
  if (until > 0)
    ns = ordo__now_ns() + (until > now ? until - now : 0) * 1000000u;
  (void)p;
  return ordo__owner_pin(ordo__engine_owner(ss->txn), ns);
}

static void frozen_update(psess *x) {
  bool f = false;
  for (int i = 0; i < x->npins; i++)
    f |= (x->pins[i].kind & PIN_FREEZE) != 0;
  if (x->ss->frozen && !f)
    srv_sess_thaw(x->ss);
  x->ss->frozen = f;
}

static bool pin_add(srv_probe *p, psess *x, int origin, uint64_t id, int kind,
                    uint64_t wseq, uint64_t until_ms) {
  for (int i = 0; i < x->npins; i++)
    if (x->pins[i].origin == origin && x->pins[i].id == id &&
        x->pins[i].kind == kind && x->pins[i].wseq == wseq) {
      x->pins[i].until_ms = until_ms;
      return true;
    }
  if (x->npins >= PR_PINS_PER_SESS)
    return false;
  if (x->npins == x->cpins) {
    int nc = x->cpins ? x->cpins * 2 : 4;
    pr_pin *v = realloc(x->pins, (size_t)nc * sizeof *v);
    if (!v)
      return false;
    x->pins = v;
    x->cpins = nc;
  }
  x->pins[x->npins++] =
      (pr_pin){origin, id, until_ms, srv_now_ms(), wseq, kind};
  if (!x->on_pinlist) {
    x->on_pinlist = true;
    TAILQ_INSERT_TAIL(&p->pinned, x, pinlink);
  }
  if (kind == PIN_FREEZE)
    x->ss->frozen = true;
  return true;
}

/* Drops x's records that match (origin, id; any abort when all) or whose
 * bound passed (expired), then applies what is left: the engine pin, the
 * freeze, and, once x has none, an end that waited. */
static void pin_drop(srv_probe *p, psess *x, int origin, uint64_t id,
                     bool all_of_origin, uint64_t expired_before) {
  int k = 0;
  bool had_wait = false;
  for (int i = 0; i < x->npins; i++) {
    pr_pin *q = &x->pins[i];
    bool drop = (q->origin == origin && (all_of_origin || q->id == id)) ||
                (expired_before && q->until_ms <= expired_before);
    if (drop)
      had_wait |= (q->kind & PIN_WAIT) != 0;
    else
      x->pins[k++] = *q;
  }
  if (k == x->npins)
    return;
  x->npins = k;
  if (had_wait && x->ss->waiting)
    (void)pin_apply(p, x);
  frozen_update(x);
  if (x->npins == 0 && x->on_pinlist) {
    x->on_pinlist = false;
    TAILQ_REMOVE(&p->pinned, x, pinlink);
    srv_sess_unheld(p->s, x->ss); /* may end the session */
  }
}

/* Drops abort (origin, id)'s records from every session here. */
static void unpin_here(srv_probe *p, int origin, uint64_t id) {
  psess *x = TAILQ_FIRST(&p->pinned), *nx;
  for (; x; x = nx) {
    nx = TAILQ_NEXT(x, pinlink);
    pin_drop(p, x, origin, id, false, 0);
  }
}

/* Renews abort (origin, id)'s records here until until_ms. */
static void renew_here(srv_probe *p, int origin, uint64_t id,
                       uint64_t until_ms) {
  psess *x;
  TAILQ_FOREACH(x, &p->pinned, pinlink) {
    bool wait = false;
    for (int i = 0; i < x->npins; i++)
      if (x->pins[i].origin == origin && x->pins[i].id == id) {
        /* The origin renews while the victim's answer waits, for a lease
         * at most; past that this shard stops listening (a peer that
         * kept renewing would hold a wait and a holder for good). */
        uint64_t cap =
            x->pins[i].since_ms + (uint64_t)p->s->cfg.lease_ms + PR_PIN_MS;
        x->pins[i].until_ms = until_ms < cap ? until_ms : cap;
        wait |= (x->pins[i].kind & PIN_WAIT) != 0;
      }
    if (wait && x->ss->waiting)
      (void)pin_apply(p, x);
  }
}

bool srv_probe_holds_sess(srv *s, sess *ss) {
  return s->probe && ss->pr && ss->pr->npins > 0;
}

/* Is ss's current wait pinned by an abort other than (origin, id)? */
static bool pinned_by_other(psess *x, int origin, uint64_t id) {
  for (int i = 0; i < x->npins; i++) {
    const pr_pin *q = &x->pins[i];
    if ((q->kind & PIN_WAIT) && q->wseq == x->ss->gen &&
        !(q->origin == origin && q->id == id))
      return true;
  }
  return false;
}

/*
 * confirm_hops -- this shard's hops of abort (origin, id)'s cycle, one by
 * one: pin the waiter's wait (which fails if the engine has ended it: a
 * timeout the loop has not heard of yet), then check the edge, then freeze
 * the session it waits for. All stand: true, with the records in place.
 * Else false, and nothing of (origin, id) stays here.
 */
static bool confirm_hops(srv_probe *p, int origin, uint64_t id, const pr_hop *h,
                         int n) {
  uint64_t until = srv_now_ms() + PR_PIN_MS;
  for (int i = 0; i < n; i++) {
    if (h[i].shard != 0)
      continue;
    sess *a = waiter_of(p, h[i].gid, h[i].wseq);
    sess *b = NULL;
    if (!a || !a->pr || !a->txn ||
        !pin_add(p, a->pr, origin, id, PIN_WAIT, h[i].wseq, until) ||
        pin_apply(p, a->pr) != 0 || !(b = hop_holder(p->s, a, h[i].next)) ||
        !b->pr || !pin_add(p, b->pr, origin, id, PIN_FREEZE, 0, until)) {
      unpin_here(p, origin, id);
      return false;
    }
  }
  tick_arm(p);
  return true;
}

/* ---- BLOCKED entries -------------------------------------------------------
 */

static void remote_free(srv_probe *p, pr_remote *r) {
  peer *pe = &p->shard[r->shard];
  map_del((void **)p->rmap, p->rmap_cap, &p->nremote, r, RNEXT);
  TAILQ_REMOVE(&pe->remotes, r, plink);
  pe->nremote--;
  free(r);
}

/* Forgets every entry a peer's link gave: that link is gone or replaced,
 * and the peer says again on its new link what still holds. */
static void remotes_drop(srv_probe *p, peer *pe) {
  pr_remote *r;
  while ((r = TAILQ_FIRST(&pe->remotes)) != NULL)
    remote_free(p, r);
}

static pr_remote *remote_of(srv_probe *p, const uint8_t *gid, int shard) {
  if (!p->rmap)
    return NULL;
  for (pr_remote *r = p->rmap[gid_slot(gid, p->rmap_cap)]; r; r = r->hnext)
    if (r->shard == shard && memcmp(r->gid, gid, ORDOD_GID_BYTES) == 0)
      return r;
  return NULL;
}

/* Drops the entries a peer's link (conn id) gave. */
static void remotes_drop_conn(srv_probe *p, peer *pe, uint64_t id) {
  pr_remote *r = TAILQ_FIRST(&pe->remotes), *nx;
  for (; r; r = nx) {
    nx = TAILQ_NEXT(r, plink);
    if (r->conn == id)
      remote_free(p, r);
  }
}

void srv_probe_conn_closed(srv *s, conn *c) {
  srv_probe *p = s->probe;
  if (!p || c->peer <= 0 || c->peer >= p->nshard)
    return;
  peer *pe = &p->shard[c->peer];
  int k = 0;
  for (int i = 0; i < pe->nin; i++)
    if (pe->in_conns[i] != c->id)
      pe->in_conns[k++] = pe->in_conns[i];
  pe->nin = k;
  /* The latest link still open is the peer's again (a connection that
   * said HELLO with its name and left must not silence its real link). */
  if (pe->in_conn == c->id)
    pe->in_conn = k ? pe->in_conns[k - 1] : 0;
  remotes_drop_conn(p, pe, c->id);
}

/* A LOCK or UNLOCK of ss here: a RELEASE of a wait elsewhere that its
 * peers told us of no longer acts on it (its client is not blocked there
 * any more, whatever that shard believes). */
static void sess_acts(srv_probe *p, sess *ss) {
  if (!p->rmap || !ss->have_gid)
    return;
  for (pr_remote *r = p->rmap[gid_slot(ss->gid, p->rmap_cap)]; r; r = r->hnext)
    if (memcmp(r->gid, ss->gid, ORDOD_GID_BYTES) == 0)
      r->touched = true;
}

/* ---- Telling where a txn waits ---------------------------------------------
 */

static void blocked_send(srv_probe *p, sess *ss, int sh) {
  ordo__out o = {0};
  msg_head(&o, 5, "BLOCKED");
  out_gid(&o, ss->gid);
  out_u64(&o, ss->gen);
  ordo__out_bulk(&o, p->shard[0].name, strlen(p->shard[0].name));
  if (link_send(p, sh, &o, (pr_ask){ASK_BLOCKED, ss->id, ss->gen}))
    ss->pr->told[sh] = 1;
  ordo__out_free(&o);
}

/* Tells each shard of the wait's HELDAT that has not got it yet. A waiter
 * whose client has left (its end waits for a pin) is not told of again: a
 * RELEASE of that wait must find no entry on a shard where the client may
 * act on its own now. */
static void blocked_tell(srv_probe *p, sess *ss) {
  psess *x = ss->pr;
  if (!ss->c)
    return;
  for (int i = 0; i < x->nheld; i++)
    if (x->told[x->held[i]] == 0)
      blocked_send(p, ss, x->held[i]);
}

/* ---- Probes ----------------------------------------------------------------
 */

static void cycle_found(srv_probe *p, pr_hop *h, int n);

static void probe_send(srv_probe *p, int shard, const uint8_t *init,
                       const pr_remote *to, const pr_hop *h, int n) {
  ordo__out o = {0};
  msg_head(&o, 6 + (size_t)n * HOP_ARGS, "PROBE");
  out_gid(&o, init);
  out_gid(&o, to->gid);
  out_u64(&o, to->wseq);
  out_hops(p, &o, h, n);
  if (link_send(p, shard, &o, (pr_ask){ASK_NONE, 0, 0}))
    p->probes_sent++;
  ordo__out_free(&o);
}

/* ---- The walk --------------------------------------------------------------
 * A probe's walk at this shard is a depth-first search from the path's
 * last txn through the txns that wait here. Each key it meets is read from
 * the engine once per walk (wk_key: its holders, and its queue in order),
 * and each part of a queue is expanded once per mode: the blockers of a
 * waiter ahead in a queue are among those of a waiter behind it (for an X
 * waiter, every entry ahead; for an S one, the X entries ahead), so once
 * the waiter behind was expanded, the one ahead adds nothing from that
 * key. With visit marks, a walk costs the entries of the keys it meets,
 * not their square: n sharded txns queued on one hot key cost O(n) a walk.
 */

typedef struct wk_ent {
  uint64_t owner;
  int mode;
} wk_ent;

typedef struct wk_key {
  const char *key;
  size_t len;
  uint64_t h;
  wk_ent *hold, *queue;
  size_t nhold, nqueue, chold, cqueue;
  bool held_x, held_s; /* the holders expanded for an X / an S waiter */
  size_t exp_x, exp_s; /* the queue expanded up to here, per mode */
  struct wk_key *next;
} wk_key;

#define WK_SLOTS 64
typedef struct pr_walk {
  uint64_t id;
  const uint8_t *init;
  wk_key *slot[WK_SLOTS];
  bool oom;
} pr_walk;

static void wk_push(wk_ent **v, size_t *n, size_t *cap, wk_ent e, bool *oom) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 8;
    wk_ent *x = realloc(*v, nc * sizeof *x);
    if (!x) {
      *oom = true;
      return;
    }
    *v = x;
    *cap = nc;
  }
  (*v)[(*n)++] = e;
}

typedef struct wk_fill {
  wk_key *k;
  pr_walk *w;
} wk_fill;

static void wk_key_item(void *arg, uint64_t owner, int mode, uint64_t fence,
                        uint32_t count, bool waiting) {
  wk_fill *f = arg;
  (void)fence;
  (void)count;
  if (waiting)
    wk_push(&f->k->queue, &f->k->nqueue, &f->k->cqueue, (wk_ent){owner, mode},
            &f->w->oom);
  else
    wk_push(&f->k->hold, &f->k->nhold, &f->k->chold, (wk_ent){owner, mode},
            &f->w->oom);
}

/* The key's entries as the engine has them now, read once per walk. */
static wk_key *wk_key_get(srv_probe *p, pr_walk *w, const char *key,
                          size_t len) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
  for (size_t i = 0; i < len; i++)
    h = (h ^ (uint8_t)key[i]) * 0x100000001b3ull;
  for (wk_key *k = w->slot[h % WK_SLOTS]; k; k = k->next)
    if (k->h == h && k->len == len && memcmp(k->key, key, len) == 0)
      return k;
  wk_key *k = calloc(1, sizeof *k);
  if (!k) {
    w->oom = true;
    return NULL;
  }
  k->key = key; /* a waiter's copy, alive for the walk (loop thread) */
  k->len = len;
  k->h = h;
  wk_fill f = {k, w};
  ordo__table_key_each(ordo__engine_table(p->s->o), key, len, wk_key_item, &f);
  k->next = w->slot[h % WK_SLOTS];
  w->slot[h % WK_SLOTS] = k;
  return k;
}

static void wk_free(pr_walk *w) {
  for (int i = 0; i < WK_SLOTS; i++)
    for (wk_key *k = w->slot[i], *n; k; k = n) {
      n = k->next;
      free(k->hold);
      free(k->queue);
      free(k);
    }
}

/* The blockers of waiter a that this walk has not expanded yet, into l. */
static void wk_blockers(srv_probe *p, pr_walk *w, sess *a, sess_list *l) {
  for (size_t i = 0; i < a->nreq; i++) {
    wk_key *k = wk_key_get(p, w, a->req[i].key, a->req[i].len);
    if (!k)
      continue;
    bool x = a->req[i].mode == ORDO_MODE_X;
    size_t q = 0;
    while (q < k->nqueue && k->queue[q].owner != a->id)
      q++; /* its own place in the queue (the end if the engine moved it) */
    bool *held = x ? &k->held_x : &k->held_s;
    if (!*held) {
      *held = true;
      for (size_t j = 0; j < k->nhold; j++)
        if (k->hold[j].owner != a->id &&
            (x || k->hold[j].mode == ORDO_MODE_X)) {
          sess *b = srv_sess_find(p->s, k->hold[j].owner);
          if (b)
            list_add(l, b);
        }
    }
    size_t *exp = x ? &k->exp_x : &k->exp_s;
    for (size_t j = *exp; j < q; j++)
      if (k->queue[j].owner != a->id &&
          (x || k->queue[j].mode == ORDO_MODE_X)) {
        sess *b = srv_sess_find(p->s, k->queue[j].owner);
        if (b)
          list_add(l, b);
      }
    if (q > *exp)
      *exp = q;
  }
}

/*
 * probe_walk -- follows a's edges here, a being the path's last txn
 * (waiting at this shard): closes the cycle when an edge reaches the
 * initiator, goes on through txns waiting here, and sends the probe on to
 * every shard where a txn waited for is blocked. A depth-first search that
 * reaches a txn explores all it waits for then, so a cycle through init is
 * found if one exists here; every txn is handled once a walk.
 */
static void probe_walk(srv_probe *p, pr_walk *w, sess *a, pr_hop *h, int n) {
  if (n >= PR_MAX_HOPS)
    return;
  a->pr->walk = w->id;
  sess_list l = {0};
  wk_blockers(p, w, a, &l);
  for (size_t i = 0; i < l.n; i++) {
    sess *b = l.v[i];
    if (!b->have_gid || !b->pr)
      continue; /* not a txn of a sharded place: it waits nowhere else */
    pr_hop *x = &h[n];
    x->shard = 0;
    memcpy(x->gid, a->gid, ORDOD_GID_BYTES);
    x->wseq = a->gen;
    x->prio = a->txn ? a->txn->priority : 0;
    memcpy(x->next, b->gid, ORDOD_GID_BYTES);
    if (memcmp(b->gid, w->init, ORDOD_GID_BYTES) == 0) {
      bool across = false;
      for (int j = 0; j <= n; j++)
        across |= h[j].shard != 0;
      if (across) /* one wholly inside this shard is the engine's */
        cycle_found(p, h, n + 1);
      continue;
    }
    if (b->pr->walk == w->id)
      continue; /* handled in this walk already */
    bool seen = false;
    for (int j = 0; j < n; j++)
      if (memcmp(h[j].gid, b->gid, ORDOD_GID_BYTES) == 0)
        seen = true;
    if (seen)
      continue;
    if (b->waiting) {
      /* A chain inside this shard; a cycle wholly inside it is the
       * engine's to find. */
      probe_walk(p, w, b, h, n + 1);
      continue;
    }
    b->pr->walk = w->id;
    /* Blocked elsewhere: on each shard that says so (a txn waits in one
     * place, but an UNBLOCKED may not have come yet: a stale probe is
     * dropped there). */
    if (p->rmap)
      for (pr_remote *r = p->rmap[gid_slot(b->gid, p->rmap_cap)]; r;
           r = r->hnext)
        if (memcmp(r->gid, b->gid, ORDOD_GID_BYTES) == 0)
          probe_send(p, r->shard, w->init, r, h, n + 1);
  }
  free(l.v);
}

static void walk_from(srv_probe *p, const uint8_t *init, sess *a, pr_hop *h,
                      int n) {
  pr_walk w = {.id = ++p->next_walk, .init = init};
  probe_walk(p, &w, a, h, n);
  wk_free(&w);
}

/* A waiter's wait has lasted the probe delay (or a BLOCKED came): it says
 * where it waits to the shards where it holds keys, and starts a probe,
 * if it holds keys elsewhere. A cycle across shards has such a member
 * wherever a hop enters a shard, and each of those probes again while it
 * waits, so a waiter that holds nothing elsewhere need not start walks of
 * its own (a hot key's queue of them would cost a walk each). */
static void probe_start(srv_probe *p, sess *a) {
  blocked_tell(p, a);
  if (a->pr->nheld == 0)
    return;
  pr_hop h[PR_MAX_HOPS];
  walk_from(p, a->gid, a, h, 0);
}

/* ---- The victim and its abort ----------------------------------------------
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

static void abort_begin(srv_probe *p, const pr_hop *h, int n, int v);

static void cycle_found(srv_probe *p, pr_hop *h, int n) {
  int v = victim_of(h, n);
  if (h[v].shard == 0) {
    abort_begin(p, h, n, v);
    return;
  }
  ordo__out o = {0};
  msg_head(&o, 5 + (size_t)n * HOP_ARGS, "ABORT");
  out_gid(&o, h[v].gid);
  out_u64(&o, h[v].wseq);
  out_hops(p, &o, h, n);
  link_send(p, h[v].shard, &o, (pr_ask){ASK_NONE, 0, 0});
  ordo__out_free(&o);
}

static pr_abort *abort_by_id(srv_probe *p, uint64_t id) {
  for (pr_abort *a = p->aborts; a; a = a->next)
    if (a->id == id)
      return a;
  return NULL;
}

/* UNPIN on every shard asked, its records here, and the abort goes. */
/* Keeps an UNPIN to say again on sh's next link (the oldest goes when
 * the ring is full: its pin ends by its bound). */
static void unpin_keep(peer *pe, uint64_t id) {
  pe->unpin[pe->nunpin % PR_UNPIN_PENDING].id = id;
  pe->unpin[pe->nunpin % PR_UNPIN_PENDING].until_ms =
      srv_now_ms() + (uint64_t)pe->s->cfg.lease_ms + PR_PIN_MS;
  pe->nunpin++;
}

static void unpin_send(srv_probe *p, int sh, uint64_t id) {
  ordo__out o = {0};
  msg_head(&o, 3, "UNPIN");
  out_u64(&o, id);
  if (!link_send(p, sh, &o, (pr_ask){ASK_UNPIN, id, 0}))
    unpin_keep(&p->shard[sh], id);
  ordo__out_free(&o);
}

static void abort_end(srv_probe *p, pr_abort *a) {
  for (int sh = 1; sh < p->nshard; sh++)
    if (a->asked[sh])
      unpin_send(p, sh, a->id);
  sess *vs = srv_sess_find(p->s, a->vsess);
  if (vs)
    vs->probe_aborting = false;
  for (pr_abort **pp = &p->aborts; *pp; pp = &(*pp)->next)
    if (*pp == a) {
      *pp = a->next;
      break;
    }
  uint64_t id = a->id;
  free(a->asked);
  free(a->rel);
  free(a);
  unpin_here(p, 0, id); /* last: it may end a session that waited */
}

static void abort_fail(srv_probe *p, pr_abort *a) {
  p->confirms_failed++;
  abort_end(p, a);
}

static void abort_effect(srv_probe *p, pr_abort *a);

/*
 * abort_begin -- the victim waits here: confirm the cycle (pin this
 * shard's hops, then CONFIRM on every other shard of the cycle, each once
 * however many shards the place has) before anything is aborted.
 */
static void abort_begin(srv_probe *p, const pr_hop *h, int n, int v) {
  sess *vs = waiter_of(p, h[v].gid, h[v].wseq);
  if (!vs || vs->probe_aborting)
    return; /* gone, or another initiator's report of the same cycle */
  pr_abort *a = calloc(1, sizeof *a);
  uint8_t *asked = calloc((size_t)p->nshard, 1);
  uint8_t *rel = calloc((size_t)p->nshard, 1);
  if (!a || !asked || !rel) {
    free(a);
    free(asked);
    free(rel);
    return; /* found again by the next probe */
  }
  /* Unique across this server's restarts: its fencing epoch leads. */
  a->id = p->s->epoch << 40 | (++p->next_abort_id & ((1ull << 40) - 1));
  a->asked = asked;
  a->rel = rel;
  a->vsess = vs->id;
  a->attempt = vs->attempt;
  memcpy(a->victim, h[v].gid, ORDOD_GID_BYTES);
  a->wseq = h[v].wseq;
  memcpy(a->hop, h, (size_t)n * sizeof *h);
  a->nhops = n;
  a->phase = AB_CONFIRMING;
  a->deadline_ms = srv_now_ms() + PR_CONFIRM_MS;
  if (!confirm_hops(p, 0, a->id, h, n)) {
    p->confirms_failed++;
    free(asked);
    free(rel);
    free(a);
    return;
  }
  a->next = p->aborts;
  p->aborts = a;
  vs->probe_aborting = true;
  for (int i = 0; i < n; i++) {
    int sh = h[i].shard;
    if (sh == 0 || a->asked[sh])
      continue;
    ordo__out o = {0};
    msg_head(&o, 4 + (size_t)n * HOP_ARGS, "CONFIRM");
    out_u64(&o, a->id);
    out_hops(p, &o, h, n);
    bool sent = link_send(p, sh, &o, (pr_ask){ASK_CONFIRM, a->id, 0});
    ordo__out_free(&o);
    if (!sent) {
      abort_fail(p, a); /* a shard we cannot ask cannot say yes */
      return;
    }
    a->asked[sh] = 1;
    a->want++;
  }
  if (a->want == 0)
    abort_effect(p, a);
  else
    tick_arm(p);
}

static void release_send(srv_probe *p, pr_abort *a, int sh) {
  ordo__out o = {0};
  msg_head(&o, 6, "RELEASE");
  out_u64(&o, a->id);
  out_gid(&o, a->victim);
  out_u64(&o, a->wseq);
  out_u64(&o, a->attempt);
  if (link_send(p, sh, &o, (pr_ask){ASK_RELEASE, a->id, 0}))
    a->rel[sh] = 2;
  ordo__out_free(&o);
}

static void abort_answer_if_done(srv_probe *p, pr_abort *a);

/*
 * abort_effect -- every shard confirmed: the abort takes effect here
 * first. The engine ends the victim's wait (so its LOCK can no longer be
 * granted) or refuses because the wait has ended meanwhile (then nothing
 * else happens). Only then do its keys go: here at once, on its other
 * shards by RELEASE; its -DEADLOCK waits for every RELEASE's answer.
 */
static void abort_effect(srv_probe *p, pr_abort *a) {
  srv *s = p->s;
  sess *vs = srv_sess_find(s, a->vsess);
  if (!vs || !vs->waiting || vs->gen != a->wseq || !vs->txn || !vs->pr) {
    abort_end(p, a); /* its wait ended meanwhile: nothing to abort */
    return;
  }
  if (pinned_by_other(vs->pr, 0, a->id)) {
    /* Another abort's cycle goes through the victim: that abort's victim
     * is a better one by the same rule (both cycles hold both), so it
     * goes first; this cycle, if it still stands, is found again. */
    p->aborts_yielded++;
    abort_end(p, a);
    return;
  }
  /* The reply names the cycle (server.c's answer reads xcycle). */
  size_t used = 0;
  char hops[PR_MAX_HOPS * (2 * ORDOD_GID_HEX + ORDOD_SHARD_NAME + 28)];
  size_t hused = 0;
  vs->xcycle[0] = 0;
  hops[0] = 0;
  for (int i = 0; i < a->nhops; i++) {
    char g[ORDOD_GID_HEX + 1], t[ORDOD_GID_HEX + 1];
    srv_gid_hex(a->hop[i].gid, g);
    srv_gid_hex(a->hop[i].next, t);
    const char *nm = p->shard[a->hop[i].shard].name;
    int w = snprintf(vs->xcycle + used, sizeof vs->xcycle - used,
                     "%s%s at %s waits for %s", i ? ", " : "", g, nm, t);
    if (w > 0 && (size_t)w < sizeof vs->xcycle - used)
      used += (size_t)w;
    w = snprintf(hops + hused, sizeof hops - hused, "%s%s@%s#%llu>%s",
                 i ? "," : "", g, nm, (unsigned long long)a->hop[i].wseq, t);
    if (w > 0 && (size_t)w < sizeof hops - hused)
      hused += (size_t)w;
  }
  if (ordo__abort_wait(ordo__engine_owner(vs->txn), ORDO_EDEADLK) != 0) {
    vs->xcycle[0] = 0; /* granted, or the engine's own victim, meanwhile */
    abort_end(p, a);
    return;
  }
  /* It took effect: for the fault harness's checker, the moment and the
   * cycle (docs/reliability.md). */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char vg[ORDOD_GID_HEX + 1];
  srv_gid_hex(a->victim, vg);
  srv_log(s, 1, "xabort victim=%s wseq=%llu shard=%s t_mono_ns=%llu hops=%s",
          vg, (unsigned long long)a->wseq, p->shard[0].name,
          (unsigned long long)ts.tv_sec * 1000000000ull +
              (unsigned long long)ts.tv_nsec,
          hops);
  p->deadlocks++;
  (void)ordo_unlock_all(vs->txn); /* its keys here go at once */
  a->phase = AB_RELEASING;
  uint64_t now = srv_now_ms();
  a->renew_ms = now + PR_PIN_RENEW_MS;
  a->hold_end_ms = now + (uint64_t)s->cfg.lease_ms;
  a->effect_ms = now;
  /* Its keys elsewhere: the shards of its HELDAT, as its LOCK gave it. A
   * victim whose client has left needs none: that client gives its keys
   * back itself (it heard nothing, so to it the LOCK failed), or they go
   * with its sessions, and a RELEASE could only race what it does next. */
  psess *x = vs->pr;
  for (int i = 0; vs->c && i < x->nheld; i++) {
    int sh = x->held[i];
    if (a->rel[sh])
      continue;
    a->rel[sh] = 1;
    a->rel_left++;
    release_send(p, a, sh);
  }
  abort_answer_if_done(p, a);
  tick_arm(p);
}

/* Every RELEASE answered and the victim's event seen: its -DEADLOCK is
 * written now (srv_lock_answer, which calls srv_probe_victim_told). */
/* The shards that did not confirm the release of the victim's keys there,
 * at the end of the cycle its -DEADLOCK names. */
static void note_unconfirmed(srv_probe *p, pr_abort *a, sess *vs) {
  size_t used = strlen(vs->xcycle);
  bool first = true;
  for (int sh = 1; sh < p->nshard; sh++) {
    if (a->rel[sh] != 4)
      continue;
    int w =
        snprintf(vs->xcycle + used, sizeof vs->xcycle - used, "%s%s",
                 first ? "; its keys were not confirmed released on " : ", ",
                 p->shard[sh].name);
    first = false;
    if (w > 0 && (size_t)w < sizeof vs->xcycle - used)
      used += (size_t)w;
  }
}

static void abort_answer_if_done(srv_probe *p, pr_abort *a) {
  if (a->rel_left > 0)
    return;
  sess *vs = srv_sess_find(p->s, a->vsess);
  if (!vs) {
    abort_end(p, a); /* the victim's session is gone: nobody to tell */
    return;
  }
  if (a->event_seen) {
    note_unconfirmed(p, a, vs);
    srv_lock_answer(p->s, vs); /* -> srv_probe_victim_told -> abort_end */
  }
  /* Else the event is on its way: wake_cb asks srv_probe_victim_hold,
   * which says to answer at once. */
}

bool srv_probe_victim_hold(srv *s, sess *vs) {
  srv_probe *p = s->probe;
  if (!p)
    return false;
  for (pr_abort *a = p->aborts; a; a = a->next)
    if (a->phase == AB_RELEASING && a->vsess == vs->id) {
      a->event_seen = true;
      if (a->rel_left > 0)
        return true;
      note_unconfirmed(p, a, vs);
      return false;
    }
  return false;
}

void srv_probe_victim_told(srv *s, sess *vs) {
  srv_probe *p = s->probe;
  if (!p)
    return;
  for (pr_abort *a = p->aborts; a; a = a->next)
    if (a->phase == AB_RELEASING && a->vsess == vs->id) {
      abort_end(p, a);
      return;
    }
}

/* ---- Answers on our links --------------------------------------------------
 */

static void confirm_answer(srv_probe *p, uint64_t id, bool yes) {
  pr_abort *a = abort_by_id(p, id);
  if (!a || a->phase != AB_CONFIRMING)
    return;
  if (!yes) {
    abort_fail(p, a);
    return;
  }
  if (++a->yes < a->want)
    return;
  /* Past its bound, the pins given first may be near theirs: a late yes
   * counts as no (the tick that would have failed it had not run yet). */
  if (srv_now_ms() > a->deadline_ms)
    abort_fail(p, a);
  else
    abort_effect(p, a);
}

static void release_answer(srv_probe *p, int sh, uint64_t id, bool ok) {
  pr_abort *a = abort_by_id(p, id);
  if (!a || a->phase != AB_RELEASING || a->rel[sh] != 2)
    return;
  a->rel[sh] = ok ? 3 : 4;
  a->rel_left--;
  abort_answer_if_done(p, a);
}

static void answer(peer *pe, const char *line, size_t len) {
  srv_probe *p = pe->s->probe;
  if (pe->ask_n == 0) {
    srv_log(pe->s, 0, "peer %s: an answer to nothing asked: %.*s; relinking",
            pe->name, (int)(len > 80 ? 80 : len), line);
    link_down(pe);
    return;
  }
  pr_ask a = pe->ask[pe->ask_head];
  pe->ask_head = (pe->ask_head + 1) % pe->ask_cap;
  pe->ask_n--;
  bool err = len == 0 || line[0] == '-';
  if (err && a.kind != ASK_BLOCKED)
    srv_log(pe->s, 0, "peer %s: %.*s", pe->name, (int)(len > 200 ? 200 : len),
            line);
  switch (a.kind) {
  case ASK_BLOCKED: {
    sess *ss = srv_sess_find(pe->s, a.a);
    if (!ss || !ss->pr || !ss->waiting || ss->gen != a.b)
      break; /* that wait is over: its UNBLOCKED followed on this link */
    if (err) {
      /* -BUSY: the peer's table for us is full. Tell it again at the next
       * probe tick; a drop would be a missed cycle. */
      ss->pr->told[pe->idx] = 0;
      p->blocked_refused++;
    } else {
      ss->pr->told[pe->idx] = 2;
    }
    break;
  }
  case ASK_CONFIRM:
    confirm_answer(p, a.a,
                   !err && len == 2 && line[0] == ':' && line[1] == '1');
    break;
  case ASK_RELEASE:
    /* An error answer means the peer let nothing go (a peer that refuses
     * our link, say): the victim is answered, naming that shard, and its
     * own client gives its keys there back. */
    release_answer(p, pe->idx, a.a, !err);
    break;
  default:
    break;
  }
}

/* The link broke: whatever it had to answer fails. A BLOCKED is told again
 * on the next link, a CONFIRM counts as no, a RELEASE is sent again. */
static void link_lost_asks(peer *pe) {
  srv_probe *p = pe->s->probe;
  while (pe->ask_n > 0) {
    pr_ask a = pe->ask[pe->ask_head];
    pe->ask_head = (pe->ask_head + 1) % pe->ask_cap;
    pe->ask_n--;
    if (a.kind == ASK_CONFIRM) {
      confirm_answer(p, a.a, false);
    } else if (a.kind == ASK_RELEASE) {
      pr_abort *ab = abort_by_id(p, a.a);
      if (ab && ab->rel[pe->idx] == 2)
        ab->rel[pe->idx] = 1;
    } else if (a.kind == ASK_UNPIN) {
      unpin_keep(pe, a.a);
    }
  }
  /* The peer drops what this link told it: every waiter here tells it
   * again. */
  sess *ss;
  TAILQ_FOREACH(ss, &p->waiting, plink)
  if (ss->pr)
    ss->pr->told[pe->idx] = 0;
}

/* A new link: say again what the peer must know. */
static void link_up_resend(peer *pe) {
  srv_probe *p = pe->s->probe;
  sess *ss;
  TAILQ_FOREACH(ss, &p->waiting, plink) {
    if (!ss->pr || ss->probe_every_ms == 0 || !ss->c)
      continue; /* not past its probe delay yet, or its client left */
    for (int i = 0; i < ss->pr->nheld; i++)
      if (ss->pr->held[i] == pe->idx && ss->pr->told[pe->idx] == 0)
        blocked_send(p, ss, pe->idx);
  }
  for (pr_abort *a = p->aborts; a; a = a->next) {
    sess *vs = srv_sess_find(p->s, a->vsess);
    if (a->phase == AB_RELEASING && a->rel[pe->idx] == 1 && vs && vs->c)
      release_send(p, a, pe->idx);
  }
  /* UNPINs a broken link lost, while their pins may still hold there. */
  size_t n = pe->nunpin < PR_UNPIN_PENDING ? pe->nunpin : PR_UNPIN_PENDING;
  uint64_t now = srv_now_ms(), keep[PR_UNPIN_PENDING];
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (pe->unpin[i].until_ms > now)
      keep[k++] = pe->unpin[i].id;
  pe->nunpin = 0;
  for (size_t i = 0; i < k && pe->up; i++)
    unpin_send(p, pe->idx, keep[i]);
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
  for (pr_abort *a = p->aborts; a; a = a->next) {
    if (a->phase == AB_CONFIRMING && a->deadline_ms < due)
      due = a->deadline_ms;
    if (a->phase == AB_RELEASING && a->renew_ms < due)
      due = a->renew_ms;
  }
  psess *x;
  TAILQ_FOREACH(x, &p->pinned, pinlink)
  for (int i = 0; i < x->npins; i++)
    if (x->pins[i].until_ms < due)
      due = x->pins[i].until_ms;
  if (due == UINT64_MAX)
    uv_timer_stop(&p->tick);
  else
    uv_timer_start(&p->tick, tick_fired, due > now ? due - now : 0, 0);
}

/*
 * abort_releasing_tick -- an abort whose releases are outstanding (a
 * stopped or cut-off shard): the cycle's pins and freezes are renewed, so
 * that what they hold back still comes after the victim's answer; a
 * victim whose client left needs no more releases (its client gives its
 * keys back, or they go with its sessions); and at hold_end_ms the victim
 * is answered anyway, naming the shards that did not confirm.
 */
static void abort_releasing_tick(srv_probe *p, pr_abort *a, uint64_t now) {
  a->renew_ms = now + PR_PIN_RENEW_MS;
  for (int sh = 1; sh < p->nshard; sh++) {
    if (!a->asked[sh])
      continue;
    ordo__out o = {0};
    msg_head(&o, 3, "PIN");
    out_u64(&o, a->id);
    link_send(p, sh, &o, (pr_ask){ASK_NONE, 0, 0});
    ordo__out_free(&o);
  }
  renew_here(p, 0, a->id, now + PR_PIN_MS);
  sess *vs = srv_sess_find(p->s, a->vsess);
  bool left = !vs || !vs->c;
  /* A RELEASE a full link could not take is tried again. */
  for (int sh = 1; !left && sh < p->nshard; sh++)
    if (a->rel[sh] == 1 && p->shard[sh].up)
      release_send(p, a, sh);
  for (int sh = 1; sh < p->nshard; sh++) {
    bool give_up = false;
    if (a->rel[sh] == 1)
      /* Not sent: its link down (a shard killed, or cut off) for a
       * confirmation's bound, or a victim whose client left (its client
       * gives its keys back itself). */
      give_up = left || now >= a->effect_ms + PR_CONFIRM_MS;
    else if (a->rel[sh] == 2)
      /* Sent, unanswered (a stopped shard): until the answer's bound. */
      give_up = !left && now >= a->hold_end_ms;
    if (give_up) {
      a->rel[sh] = 4;
      a->rel_left--;
    }
  }
  abort_answer_if_done(p, a);
}

static void tick_fired(uv_timer_t *t) {
  srv_probe *p = t->data;
  uint64_t now = srv_now_ms();
  /* Pins and freezes past their bound: a lost UNPIN holds nothing long. */
  psess *x = TAILQ_FIRST(&p->pinned), *nx;
  for (; x; x = nx) {
    nx = TAILQ_NEXT(x, pinlink);
    pin_drop(p, x, -1, 0, false, now + 1);
  }
  sess *ss, *sn;
  for (ss = TAILQ_FIRST(&p->waiting); ss; ss = sn) {
    sn = TAILQ_NEXT(ss, plink);
    if (ss->probe_due_ms > now)
      continue;
    probe_start(p, ss);
    /* Probe again while it waits: a probe lost with a link, or one that
     * went out before a peer's BLOCKED came, must not leave a cycle. */
    unsigned d = ss->probe_every_ms ? ss->probe_every_ms * 2 : 2;
    ss->probe_every_ms = d > PR_REPROBE_MAX_MS ? PR_REPROBE_MAX_MS : d;
    ss->probe_due_ms = now + ss->probe_every_ms;
  }
  for (pr_abort *a = p->aborts, *na; a; a = na) {
    na = a->next;
    if (a->phase == AB_CONFIRMING && a->deadline_ms <= now) {
      abort_fail(p, a);
    } else if (a->phase == AB_RELEASING && a->renew_ms <= now) {
      abort_releasing_tick(p, a, now);
    }
  }
  tick_arm(p);
}

void srv_probe_wait_begin(srv *s, sess *ss) {
  srv_probe *p = s->probe;
  if (!p || !ss->have_gid || !ss->pr || ss->probe_listed)
    return;
  psess *x = ss->pr;
  ss->probe_listed = true;
  ss->probe_aborting = false;
  ss->probe_every_ms = 0;
  ss->probe_due_ms = srv_now_ms() + (uint64_t)s->cfg.probe_delay_ms;
  /* The wait's HELDAT, as peer indices (its own name and names not of
   * --peers are passed over). */
  memset(x->told, 0, (size_t)p->nshard);
  x->nheld = 0;
  for (const char *q = ss->heldat ? ss->heldat : ""; *q;) {
    const char *e = strchr(q, ',');
    size_t len = e ? (size_t)(e - q) : strlen(q);
    int sh = shard_by_name(p, q, len);
    bool dup = false;
    for (int i = 0; i < x->nheld; i++)
      dup |= x->held[i] == sh;
    if (sh > 0 && !dup)
      x->held[x->nheld++] = sh;
    q += len;
    if (*q == ',')
      q++;
  }
  TAILQ_INSERT_TAIL(&p->waiting, ss, plink);
  tick_arm(p);
}

void srv_probe_wait_end(srv *s, sess *ss) {
  srv_probe *p = s->probe;
  if (!p || !ss->probe_listed)
    return;
  ss->probe_listed = false;
  TAILQ_REMOVE(&p->waiting, ss, plink);
  psess *x = ss->pr;
  for (int i = 0; x && i < x->nheld; i++) {
    int sh = x->held[i];
    if (x->told[sh] == 0)
      continue;
    /* Sent, answered or not: on the same link, after it. */
    ordo__out o = {0};
    msg_head(&o, 5, "UNBLOCKED");
    out_gid(&o, ss->gid);
    out_u64(&o, ss->gen);
    ordo__out_bulk(&o, p->shard[0].name, strlen(p->shard[0].name));
    link_send(p, sh, &o, (pr_ask){ASK_NONE, 0, 0});
    ordo__out_free(&o);
    x->told[sh] = 0;
  }
}

void srv_probe_sess_drop(srv *s, sess *ss) {
  srv_probe *p = s->probe;
  psess *x = ss->pr;
  if (!p || !x)
    return;
  if (x->on_pinlist) {
    x->on_pinlist = false;
    TAILQ_REMOVE(&p->pinned, x, pinlink);
  }
  map_del((void **)p->gmap, p->gmap_cap, &p->ngid, x, GNEXT);
  free(x->told);
  free(x->held);
  free(x->pins);
  free(x);
  ss->pr = NULL;
}

void srv_probe_unlocked(srv *s, sess *ss, bool all) {
  if (!s->probe || !ss->pr)
    return;
  sess_acts(s->probe, ss);
  if (all)
    ss->pr->xreleased = false; /* its client knows it holds nothing here */
}

bool srv_probe_lock_check(srv *s, conn *c, sess *ss, uint32_t attempt) {
  if (!s->probe || !ss->pr)
    return true;
  sess_acts(s->probe, ss);
  if (!ss->pr->xreleased)
    return true;
  ss->pr->xreleased = false;
  if (attempt && ss->pr->xreleased_attempt &&
      attempt > ss->pr->xreleased_attempt)
    return true; /* its client gave everything back since: nothing to say */
  ordo__out_error(&c->out, "DEADLOCK",
                  "this txn was the victim of a cross-shard deadlock at %s, "
                  "and its keys on this shard were released; retry",
                  ss->pr->xreleased_by);
  return false;
}

/* ---- PEER commands ---------------------------------------------------------
 */

static bool is(const ordo__resp_arg *a, const char *w) {
  return a->len == strlen(w) && strncasecmp(a->ptr, w, a->len) == 0;
}

static bool seen_release(peer *pe, uint64_t id) {
  size_t n = pe->nseen < PR_RELEASE_SEEN ? pe->nseen : PR_RELEASE_SEEN;
  for (size_t i = 0; i < n; i++)
    if (pe->seen[i] == id)
      return true;
  pe->seen[pe->nseen++ % PR_RELEASE_SEEN] = id;
  return false;
}

/*
 * release_victim -- RELEASE of abort (origin, id) of txn gid, whose wait
 * at origin was wseq in its attempt `attempt` (0: its LOCK named none).
 * Every key goes of each of the victim's sessions here that is still in
 * that attempt (a session whose LOCKs named a later one belongs to a
 * retry: its client gave everything back, and what it holds now is not
 * the victim's); a session whose LOCKs named no attempt lets its keys go
 * only while the peer's entry of that very wait stands untouched by a LOCK
 * or UNLOCK of the txn here since (entry_ok). A wait of it here, which its
 * client should not have, ends first; each session released hears
 * -DEADLOCK at its next LOCK of that attempt. Returns the keys let go, or
 * -1 when nothing of the victim's was here to release.
 */
static long release_victim(srv_probe *p, int origin, uint64_t id,
                           const uint8_t *gid, uint32_t attempt,
                           bool entry_ok) {
  long n = 0;
  bool any = false;
  if (!p->gmap)
    return 0;
  psess *x = p->gmap[gid_slot(gid, p->gmap_cap)];
  for (psess *nx; x; x = nx) {
    nx = x->gnext;
    sess *ss = x->ss;
    if (memcmp(x->gid, gid, ORDOD_GID_BYTES) != 0 || !ss->txn || ss->closing)
      continue;
    if (ss->attempt ? ss->attempt > attempt : !entry_ok)
      continue; /* a later attempt's, or a client that acted here since */
    any = true;
    if (ss->waiting) {
      snprintf(ss->xcycle, sizeof ss->xcycle,
               "its keys on this shard were released for a cross-shard "
               "deadlock at %s",
               p->shard[origin].name);
      if (ordo__abort_wait(ordo__engine_owner(ss->txn), ORDO_EDEADLK) != 0)
        ss->xcycle[0] = 0;
    }
    int k = ordo_unlock_all(ss->txn);
    if (k > 0)
      n += k;
    x->xreleased = true;
    x->xreleased_attempt = attempt;
    snprintf(x->xreleased_by, sizeof x->xreleased_by, "%s",
             p->shard[origin].name);
    /* Its keys are gone: a freeze of this abort on it holds nothing back
     * any more, and would only keep its client's UNLOCK waiting. */
    pin_drop(p, x, origin, id, false, 0);
  }
  return any ? n : -1;
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
  uint64_t a, b, att;
  if (is(&argv[1], "HELLO") && n == 1) {
    int sh = shard_by_name(p, v[0].ptr, v[0].len);
    if (sh <= 0) {
      ordo__out_error(&c->out, "ERR", "'%.*s' is not one of --peers",
                      (int)v[0].len, v[0].ptr);
      return;
    }
    /* This link is the peer's current one now: the peer says on it again
     * what still holds; what its other links said goes with them. */
    peer *pe = &p->shard[sh];
    bool known = false;
    for (int i = 0; i < pe->nin; i++)
      known |= pe->in_conns[i] == c->id;
    if (!known) {
      if (pe->nin == PR_PEER_CONNS) {
        memmove(pe->in_conns, pe->in_conns + 1,
                (PR_PEER_CONNS - 1) * sizeof *pe->in_conns);
        pe->nin--;
      }
      pe->in_conns[pe->nin++] = c->id;
    }
    pe->in_conn = c->id;
    c->peer = sh;
    ordo__out_simple(&c->out, "OK");
    return;
  }
  if (c->peer <= 0) {
    ordo__out_error(&c->out, "ERR", "PEER HELLO name first");
    return;
  }
  int from = c->peer;
  peer *pe = &p->shard[from];
  bool current = pe->in_conn == c->id;
  if ((is(&argv[1], "BLOCKED") || is(&argv[1], "UNBLOCKED")) && n == 3 &&
      srv_gid_parse(v[0].ptr, v[0].len, gid) && arg_u64(&v[1], &a)) {
    if (shard_by_name(p, v[2].ptr, v[2].len) != from) {
      ordo__out_error(
          &c->out, "ERR", "%.*s names shard '%.*s' on the link of '%s'",
          (int)argv[1].len, argv[1].ptr, (int)v[2].len, v[2].ptr, pe->name);
      return;
    }
    pr_remote *r = remote_of(p, gid, from);
    if (is(&argv[1], "UNBLOCKED")) {
      if (r && r->wseq == a)
        remote_free(p, r);
    } else if (!current) {
      /* Another of its links is its current one (a HELLO came since):
       * not taken, and said so, so that it is said again. */
      ordo__out_error(&c->out, "BUSY",
                      "this is not %s's current link; say it again", pe->name);
      return;
    } else {
      if (!r && pe->nremote >= s->cfg.peer_blocked_max) {
        ordo__out_error(&c->out, "BUSY",
                        "%zu blocked txns of %s are known here "
                        "(--peer-blocked-max); say it again later",
                        pe->nremote, pe->name);
        return;
      }
      if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) {
          ordo__out_error(&c->out, "BUSY", "out of memory; say it again later");
          return;
        }
        memcpy(r->gid, gid, sizeof gid);
        r->shard = from;
        map_put((void ***)&p->rmap, &p->rmap_cap, &p->nremote, r, RNEXT);
        TAILQ_INSERT_TAIL(&pe->remotes, r, plink);
        pe->nremote++;
      }
      r->wseq = a;
      r->conn = c->id;
      r->touched = false;
      /* Waiters here that have waited long enough probe now: their own
       * probes may have gone out before this came. */
      sess *ss;
      TAILQ_FOREACH(ss, &p->waiting, plink)
      if (ss->probe_every_ms)
        ss->probe_due_ms = 0;
      tick_arm(p);
    }
  } else if (is(&argv[1], "PROBE") && n >= 4 &&
             srv_gid_parse(v[0].ptr, v[0].len, gid) &&
             srv_gid_parse(v[1].ptr, v[1].len, g2) && arg_u64(&v[2], &a) &&
             parse_hops(p, &v[3], n - 3, h, &nh) && nh > 0 &&
             hops_chain(h, nh, false) &&
             memcmp(h[nh - 1].next, g2, ORDOD_GID_BYTES) == 0) {
    p->probes_received++;
    sess *x = waiter_of(p, g2, a);
    if (!x || !x->pr)
      p->probes_stale++;
    else
      walk_from(p, gid, x, h, nh);
  } else if (is(&argv[1], "ABORT") && n >= 3 &&
             srv_gid_parse(v[0].ptr, v[0].len, gid) && arg_u64(&v[1], &a) &&
             parse_hops(p, &v[2], n - 2, h, &nh) && hops_chain(h, nh, true)) {
    int vi = -1;
    for (int i = 0; i < nh; i++)
      if (h[i].shard == 0 && memcmp(h[i].gid, gid, sizeof gid) == 0 &&
          h[i].wseq == a)
        vi = i;
    /* Only the cycle's own choice: a message naming another victim is
     * not acted on. */
    if (vi >= 0 && victim_of(h, nh) == vi)
      abort_begin(p, h, nh, vi);
  } else if (is(&argv[1], "CONFIRM") && n >= 2 && arg_u64(&v[0], &a) &&
             parse_hops(p, &v[1], n - 1, h, &nh) && hops_chain(h, nh, true)) {
    ordo__out_int(&c->out, confirm_hops(p, from, a, h, nh) ? 1 : 0);
    return;
  } else if (is(&argv[1], "PIN") && n == 1 && arg_u64(&v[0], &a)) {
    renew_here(p, from, a, srv_now_ms() + PR_PIN_MS);
    tick_arm(p);
  } else if (is(&argv[1], "UNPIN") && n == 1 && arg_u64(&v[0], &a)) {
    unpin_here(p, from, a);
  } else if (is(&argv[1], "RELEASE") && n == 4 && arg_u64(&v[0], &a) &&
             srv_gid_parse(v[1].ptr, v[1].len, gid) && arg_u64(&v[2], &b) &&
             arg_u64(&v[3], &att) && att <= UINT32_MAX) {
    /* Once per abort; only what the victim's attempt holds here (a late
     * RELEASE must take nothing of a retry: docs/distributed.md, step 6). */
    pr_remote *r = remote_of(p, gid, from);
    if (seen_release(pe, a)) {
      p->releases_repeated++;
      ordo__out_int(&c->out, 0);
    } else {
      long k = release_victim(p, from, a, gid, (uint32_t)att,
                              r && r->wseq == b && !r->touched);
      if (k < 0)
        p->releases_stale++;
      else
        p->releases_done++;
      ordo__out_int(&c->out, k < 0 ? 0 : k);
    }
    return;
  } else {
    ordo__out_error(&c->out, "ERR", "bad PEER message '%.*s'", (int)argv[1].len,
                    argv[1].ptr);
    return;
  }
  ordo__out_simple(&c->out, "OK");
}

/* ---- Start-up and INFO -----------------------------------------------------
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
  TAILQ_INIT(&p->pinned);
  for (int i = 0; i <= n; i++) {
    p->shard[i].idx = i;
    TAILQ_INIT(&p->shard[i].remotes);
  }
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
      pe->name[0] = 0;
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
  /* Abort ids start at a random point: one a peer cannot guess names no
   * abort of ours (a forged UNPIN or PIN needs a live one). */
  if (srv_random(&p->next_abort_id, sizeof p->next_abort_id) != 0)
    p->next_abort_id = ordo__now_ns();
  p->next_abort_id &= (1ull << 39) - 1;
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
  for (int i = 0; i < p->nshard; i++) {
    remotes_drop(p, &p->shard[i]);
    free(p->shard[i].ask);
  }
  while (p->aborts) {
    pr_abort *a = p->aborts;
    p->aborts = a->next;
    free(a->asked);
    free(a->rel);
    free(a);
  }
  free(p->rmap);
  free(p->gmap);
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
  size_t pinned = 0, aborts = 0;
  for (int i = 1; p && i < p->nshard; i++)
    up += p->shard[i].up;
  if (p) {
    psess *x;
    TAILQ_FOREACH(x, &p->pinned, pinlink)
    pinned++;
    for (pr_abort *a = p->aborts; a; a = a->next)
      aborts++;
  }
#define PC(f) (unsigned long long)(p ? p->f : 0)
  int n = snprintf(
      buf, cap,
      "# Probes\r\nshard_name:%s\r\npeers:%d\r\npeers_linked:%d\r\n"
      "probe_delay_ms:%ld\r\nprobes_sent:%llu\r\nprobes_received:%llu\r\n"
      "probes_stale:%llu\r\ndeadlocks_cross_shard:%llu\r\n"
      "confirms_failed:%llu\r\naborts_yielded:%llu\r\n"
      "aborts_in_progress:%zu\r\nsessions_pinned:%zu\r\n"
      "blocked_entries:%zu\r\nblocked_refused:%llu\r\n"
      "releases_done:%llu\r\nreleases_repeated:%llu\r\n"
      "releases_stale:%llu\r\n"
      "peer_messages_dropped:%llu\r\n\r\n",
      p ? p->shard[0].name : "", p ? p->nshard - 1 : 0, up,
      s->cfg.probe_delay_ms, PC(probes_sent), PC(probes_received),
      PC(probes_stale), PC(deadlocks), PC(confirms_failed), PC(aborts_yielded),
      aborts, pinned, p ? p->nremote : 0, PC(blocked_refused),
      PC(releases_done), PC(releases_repeated), PC(releases_stale),
      PC(messages_dropped));
#undef PC
  return n < 0 ? 0 : (size_t)n;
}
