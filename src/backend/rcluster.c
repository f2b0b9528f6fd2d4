/*
 * rcluster.c -- the "redis-cluster://" backend: locks on a Redis Cluster,
 * each key on the primary that serves its hash slot. The ACQUIRE, RELEASE
 * and EXTEND scripts of redis_script.c run per slot group: all keys of a
 * request that hash to one slot (CRC16/XMODEM mod 16384, hash tags as
 * Redis defines them, ordo__rs_slot) go in one script call, with each
 * key's fencing counter, which ordo__rs_fence_key names inside the key's
 * slot. A request whose keys span slots first asks every group at once
 * (each node's groups pipelined, all nodes in one poll loop); what follows
 * the first group not granted, in the canonical order (slot, key), is
 * given back, and from that group on the set is taken group by group:
 * blocked on a group, it keeps the groups before it and waits (polling
 * with full jitter, as redlock.c does) for this one, up to its one
 * deadline; at the deadline every group it took is given back: all or
 * nothing. A set that fits one slot is one round trip. RELEASE and EXTEND
 * go to every group at once; RELEASE publishes nothing (no channel
 * prefix), since nobody subscribes.
 * See docs/backend-redis.md, "Redis Cluster".
 *
 * Slots are found with CLUSTER SLOTS from the seed nodes (or any node
 * seen since); -MOVED updates the slot's entry and has the map read again
 * before the next exchange; -ASK sends ASKING then the command to the node
 * named, once; a connection error, -CLUSTERDOWN, -TRYAGAIN, -LOADING or
 * -READONLY (a primary demoted by a failover) closes the connection, reads
 * the map again and tries again after a short backoff (full jitter, from
 * 5 ms doubling to 100 ms), until the call's bound (a lock_all's deadline,
 * one exchange bound for a release or a renewal) and at most RC_TRIES
 * times.
 *
 * URL:
 *   redis-cluster://[[user]:password@]host:port[,host:port...][?lease_ms=N
 *                  &timeout_ms=N][&tls=1&tls_ca=FILE&...]
 * The first seed's user and password are used on every node.
 *
 * Lock order: a txn's mu, then the place's map_mu (a leaf) or rn.mu.
 *
 * Interface: ordo__backend_rcluster.
 */
#include "ordo_tsa.h"
#include "backend/redis_script.h"
#include "backend/remote.h"
#include "backend/renewer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RC_DEFAULT_LEASE_MS 30000L
#define RC_DEFAULT_TIMEOUT_MS 10000L
#define RC_MAX_SEEDS 16
#define RC_MAX_NODES 64
#define RC_SLOTS 16384
#define RC_MS 1000000u
#define RC_TRIES 64
#define RC_RETRY_BASE_MS 5
#define RC_RETRY_CAP_MS 100

/* ---- The URL ------------------------------------------------------------- */

typedef struct rc_url {
  ordo__rs_node seed[RC_MAX_SEEDS];
  size_t n;
  long lease_ms;
  long timeout_ms;
  ordo__tls_opts tls;
} rc_url;

static int rc_parse_query(const char *q, rc_url *u) {
  while (*q) {
    size_t len = strcspn(q, "&");
    const char *eq = memchr(q, '=', len);
    if (!eq)
      return ORDO_EURL;
    size_t nlen = (size_t)(eq - q), vlen = len - nlen - 1;
    int rc;
    if (nlen == 8 && memcmp(q, "lease_ms", 8) == 0)
      rc = ordo__parse_long(eq + 1, vlen, 10, 86400000L, &u->lease_ms);
    else if (nlen == 10 && memcmp(q, "timeout_ms", 10) == 0)
      rc = ordo__parse_long(eq + 1, vlen, 1, 3600000L, &u->timeout_ms);
    else if ((rc = ordo__tls_opt(&u->tls, q, nlen, eq + 1, vlen)) == 1)
      rc = ORDO_EURL;
    if (rc)
      return rc;
    q += len;
    if (*q == '&' && *++q == 0)
      return ORDO_EURL;
  }
  return 0;
}

static int rc_parse_url(const char *url, rc_url *u) {
  memset(u, 0, sizeof *u);
  u->lease_ms = RC_DEFAULT_LEASE_MS;
  u->timeout_ms = RC_DEFAULT_TIMEOUT_MS;
  if (strncmp(url, "redis-cluster://", 16) != 0)
    return ORDO_EURL;
  const char *rest = url + 16;
  size_t alen = strcspn(rest, "?");
  const char *s = rest, *end = rest + alen;
  while (s <= end) {
    size_t len = strcspn(s, ",?");
    if (s + len > end)
      len = (size_t)(end - s);
    if (len == 0 || u->n == RC_MAX_SEEDS)
      return ORDO_EURL;
    ordo__rs_node *nd = &u->seed[u->n++];
    int rc = ordo__rs_parse_node(s, len, nd);
    /* A cluster has one database and is reached over TCP. */
    if (rc == 0 && (nd->unix_sock || nd->db_set))
      rc = ORDO_EURL;
    if (rc)
      return rc;
    s += len + 1;
  }
  if (rest[alen] == '?') {
    if (rest[alen + 1] == 0)
      return ORDO_EURL;
    return rc_parse_query(rest + alen + 1, u);
  }
  return 0;
}

/* ---- Places and txns ----------------------------------------------------- */

typedef struct rc_place {
  struct ordo_s base;
  rc_url u;
  ordo__tls_client *tls;
  char chan[32];
  size_t chanlen;
  uint64_t lease_ns, io_ns;
  _Atomic uint64_t next_id;
  _Atomic uint64_t acquired, waited, timeouts, released, keys, retries;
  _Atomic uint64_t moved, asked, refreshes;
  _Atomic uint64_t waiting;
  /* A refresh of the slot map is due before the next exchange (MOVED, a
   * failed node). */
  _Atomic bool stale;
  ordo__renewer rn;
  /* map_mu guards the node table (node[0..nn): append-only, so an index
   * names one node for the place's life; the seeds come first) and the
   * slot map (slot[s]: the index of the primary serving slot s, -1 when
   * unknown). A leaf: no lock is taken under it, and no I/O is done. */
  ordo__mutex map_mu;
  ordo__rs_node node[RC_MAX_NODES] ORDO_GUARDED_BY(map_mu);
  size_t nn ORDO_GUARDED_BY(map_mu);
  int16_t slot[RC_SLOTS] ORDO_GUARDED_BY(map_mu);
} rc_place;

typedef struct rc_txn {
  struct ordo_txn_s base;
  ordo__rn_txn rn;
  /* mu guards the connections (one per node of the table, opened when
   * first needed) and the hold record. The txn's own thread holds it
   * through each call except while lock_all sleeps between tries; the
   * renewer only tries it. */
  ordo__mutex mu;
  ordo__rs_conn c[RC_MAX_NODES] ORDO_GUARDED_BY(mu);
  ordo__hold *h ORDO_GUARDED_BY(mu);
  size_t nh ORDO_GUARDED_BY(mu), caph ORDO_GUARDED_BY(mu);
  char owner[33]; /* read-only after begin */
  _Atomic bool lease_lost;
  _Atomic uint64_t renewed_ns;
} rc_txn;

static rc_txn *ct(ordo_txn_t *t) {
  return (rc_txn *)t;
}
static rc_place *cp(ordo_t *o) {
  return (rc_place *)o;
}

static void note_err(rc_place *p, const char *what, const char *detail)
    ORDO_EXCLUDES(p->rn.mu) {
  ordo__rn_note(&p->rn, what, detail);
}

/* Sleeps ns (EINTR resumed). */
static void nap(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* ---- The slot map ---------------------------------------------------------
 */

/* The index of node host:port, added to the table when new (with the
 * seeds' credentials and TLS); -1 when the table is full. */
static int node_index(rc_place *p, const char *host, size_t hl, int port)
    ORDO_REQUIRES(p->map_mu) {
  for (size_t i = 0; i < p->nn; i++)
    if (p->node[i].port == port && strlen(p->node[i].host) == hl &&
        memcmp(p->node[i].host, host, hl) == 0)
      return (int)i;
  if (p->nn == RC_MAX_NODES || hl >= sizeof p->node[0].host)
    return -1;
  ordo__rs_node *nd = &p->node[p->nn];
  *nd = p->u.seed[0];
  memcpy(nd->host, host, hl);
  nd->host[hl] = 0;
  nd->port = port;
  return (int)p->nn++;
}

/* The primary of slot s, -1 when unknown. */
static int slot_node(rc_place *p, unsigned s) ORDO_EXCLUDES(p->map_mu) {
  ordo__mutex_lock(&p->map_mu);
  int i = p->slot[s];
  ordo__mutex_unlock(&p->map_mu);
  return i;
}

/* Installs a CLUSTER SLOTS reply r got from node `from`. Returns true when
 * it was one. */
static bool install_slots(rc_place *p, const redisReply *r, int from)
    ORDO_EXCLUDES(p->map_mu) {
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements == 0)
    return false;
  ordo__mutex_lock(&p->map_mu);
  for (size_t i = 0; i < r->elements; i++) {
    const redisReply *e = r->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->type != REDIS_REPLY_INTEGER ||
        e->element[2]->type != REDIS_REPLY_ARRAY ||
        e->element[2]->elements < 2 ||
        e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
        e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
      continue;
    long long lo = e->element[0]->integer, hi = e->element[1]->integer;
    const redisReply *h = e->element[2]->element[0];
    int port = (int)e->element[2]->element[1]->integer;
    /* An empty address means "the node you asked" (Redis 7: unknown
     * endpoint). */
    const char *host = h->len ? h->str : p->node[from].host;
    size_t hl = h->len ? h->len : strlen(host);
    int idx = node_index(p, host, hl, port);
    for (long long s = lo; s <= hi && s < RC_SLOTS && s >= 0; s++)
      p->slot[s] = (int16_t)idx;
  }
  ordo__mutex_unlock(&p->map_mu);
  return true;
}

/*
 * refresh -- reads the slot map with CLUSTER SLOTS from the first node of
 * the table that answers within one exchange bound each. Done with a
 * connection of its own (t's are left as they are). Caller holds t's mu
 * or nothing; no other lock.
 */
static int refresh(rc_place *p) ORDO_EXCLUDES(p->map_mu) {
  atomic_fetch_add(&p->refreshes, 1);
  ordo__mutex_lock(&p->map_mu);
  size_t nn = p->nn;
  ordo__mutex_unlock(&p->map_mu);
  for (size_t i = 0; i < nn; i++) {
    ordo__rs_node nd;
    ordo__mutex_lock(&p->map_mu);
    nd = p->node[i];
    ordo__mutex_unlock(&p->map_mu);
    ordo__rs_conn k;
    ordo__rs_conn_init(&k);
    if (ordo__rs_connect(&k, &nd, false) != 0)
      continue;
    const char *av[2] = {"CLUSTER", "SLOTS"};
    size_t al[2] = {7, 5};
    bool ok = false;
    if (ordo__rs_append(&k, 2, av, al) == 0) {
      ordo__rs_conn *ks[1] = {&k};
      ordo__rs_run(ks, 1, ordo__now_ns() + p->io_ns, NULL, NULL);
      if (ordo__rs_open(&k) && k.got == k.want && k.want >= 1) {
        redisReply *r = ordo__rs_take(&k, k.want - 1);
        ok = install_slots(p, r, (int)i);
        if (r && r->type == REDIS_REPLY_ERROR)
          note_err(p, "CLUSTER SLOTS", r->str);
        if (r)
          freeReplyObject(r);
      } else if (k.err) {
        note_err(p, "CLUSTER SLOTS", k.errstr);
      }
    }
    ordo__rs_close(&k);
    if (ok) {
      atomic_store(&p->stale, false);
      return 0;
    }
  }
  return ORDO_EBACKEND;
}

/* Reads "MOVED <slot> <host>:<port>" or "ASK ..." (the part after the
 * code) into the node's index; -1 when it is not one. */
static int redirect_node(rc_place *p, const char *s) ORDO_EXCLUDES(p->map_mu) {
  const char *sp = strchr(s, ' ');
  if (!sp || !(sp = strchr(sp + 1, ' ')))
    return -1;
  const char *addr = sp + 1, *colon = strrchr(addr, ':');
  if (!colon)
    return -1;
  int port = atoi(colon + 1);
  if (port <= 0 || port > 65535)
    return -1;
  ordo__mutex_lock(&p->map_mu);
  int i = node_index(p, addr, (size_t)(colon - addr), port);
  ordo__mutex_unlock(&p->map_mu);
  return i;
}

/* ---- One script on the node of a slot -------------------------------------
 */

/* An error reply that a failover or a resharding explains, to be tried
 * again after the map is read again. */
static bool transient(const redisReply *r) {
  static const char *const codes[] = {"CLUSTERDOWN", "TRYAGAIN", "LOADING",
                                      "READONLY", "MASTERDOWN"};
  for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
    if (strncmp(r->str, codes[i], strlen(codes[i])) == 0)
      return true;
  return false;
}

/*
 * node_exchange -- script which (EVALSHA, then EVAL on NOSCRIPT) on node i
 * over t's connection to it, preceded by ASKING when asking, within one
 * exchange bound. Returns the reply (the caller frees it), or NULL with
 * the connection closed (it failed, or did not answer in time: whether
 * the script ran is then unknown).
 */
static redisReply *node_exchange(rc_place *p, rc_txn *t, int i, bool asking,
                                 int which, int nkeys, int argc,
                                 const char **av, const size_t *al)
    ORDO_REQUIRES(t->mu) {
  ordo__rs_conn *k = &t->c[i];
  if (!ordo__rs_open(k)) {
    ordo__rs_node nd;
    ordo__mutex_lock(&p->map_mu);
    nd = p->node[i];
    ordo__mutex_unlock(&p->map_mu);
    if (ordo__rs_connect(k, &nd, false) != 0)
      return NULL;
  }
  uint64_t dl = ordo__now_ns() + p->io_ns;
  for (int text = 0; text < 2; text++) {
    static const char *ask[1] = {"ASKING"};
    static const size_t askl[1] = {6};
    if (asking && ordo__rs_append(k, 1, ask, askl) != 0)
      return NULL;
    int rc = text ? ordo__rs_append_eval(k, which, nkeys, argc, av, al)
                  : ordo__rs_append_script(k, which, nkeys, argc, av, al);
    if (rc)
      return NULL;
    ordo__rs_conn *ks[1] = {k};
    ordo__rs_run(ks, 1, dl, NULL, NULL);
    if (!ordo__rs_open(k))
      return NULL;
    if (k->got != k->want) {
      ordo__rs_close(k); /* late: the connection is out of step */
      return NULL;
    }
    redisReply *r = ordo__rs_take(k, k->want - 1);
    ordo__rs_done(k);
    if (r && r->type == REDIS_REPLY_ERROR &&
        strncmp(r->str, "NOSCRIPT", 8) == 0 && !text) {
      freeReplyObject(r);
      continue;
    }
    return r;
  }
  return NULL;
}

/*
 * slot_eval -- script which on the primary of slot s, following MOVED and
 * ASK and riding out a failover: a redirection is always followed, a
 * failure tried again until until_ns; at most RC_TRIES exchanges in all (a
 * bound on redirection loops). *out
 * gets the reply (the caller frees it; an error reply other than a redirection
 * or a transient one is returned as it is). Returns 0, or ORDO_EBACKEND when no
 * node answered in the end (*maybe is then set if a script may have run).
 */
static int slot_eval(rc_place *p, rc_txn *t, unsigned s, int which, int nkeys,
                     int argc, const char **av, const size_t *al,
                     uint64_t until_ns, redisReply **out, bool *maybe)
    ORDO_REQUIRES(t->mu) {
  int ask = -1;
  uint64_t backoff_ms = RC_RETRY_BASE_MS;
  *out = NULL;
  bool redirected = false;
  for (int tries = 0; tries < RC_TRIES; tries++) {
    /* A redirection is followed whatever the deadline (a try with timeout
     * 0 included); a failure is tried again only before it. */
    if (tries > 0 && !redirected && ordo__now_ns() >= until_ns)
      break;
    redirected = false;
    if (atomic_load(&p->stale))
      refresh(p);
    int i = ask >= 0 ? ask : slot_node(p, s);
    if (i < 0) {
      atomic_store(&p->stale, true);
      nap((uint64_t)(ordo__rand64() % (backoff_ms * RC_MS)) + 1);
      backoff_ms =
          backoff_ms * 2 > RC_RETRY_CAP_MS ? RC_RETRY_CAP_MS : backoff_ms * 2;
      continue;
    }
    redisReply *r =
        node_exchange(p, t, i, ask >= 0, which, nkeys, argc, av, al);
    ask = -1;
    if (r && r->type == REDIS_REPLY_ERROR &&
        strncmp(r->str, "MOVED ", 6) == 0) {
      atomic_fetch_add(&p->moved, 1);
      int j = redirect_node(p, r->str);
      if (j >= 0) {
        ordo__mutex_lock(&p->map_mu);
        p->slot[s] = (int16_t)j;
        ordo__mutex_unlock(&p->map_mu);
      }
      atomic_store(&p->stale, true);
      freeReplyObject(r);
      redirected = true;
      continue;
    }
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "ASK ", 4) == 0) {
      atomic_fetch_add(&p->asked, 1);
      ask = redirect_node(p, r->str);
      freeReplyObject(r);
      redirected = true;
      continue;
    }
    if (r && !(r->type == REDIS_REPLY_ERROR && transient(r))) {
      *out = r;
      return 0;
    }
    /* No answer, or a node that cannot serve the slot now (a failover):
     * the map is read again after a backoff. */
    if (r) {
      note_err(p, "cluster", r->str);
      freeReplyObject(r);
    } else {
      *maybe = true;
      note_err(p, "cluster", t->c[i].err ? t->c[i].errstr : "no reply");
    }
    ordo__rs_close(&t->c[i]);
    atomic_store(&p->stale, true);
    nap((uint64_t)(ordo__rand64() % (backoff_ms * RC_MS)) + 1);
    backoff_ms =
        backoff_ms * 2 > RC_RETRY_CAP_MS ? RC_RETRY_CAP_MS : backoff_ms * 2;
  }
  return ORDO_EBACKEND;
}

/* ---- Slot groups ------------------------------------------------------------
 * A group is a run of keys of one slot in the canonical order (slot, key);
 * ord[] holds the indexes of the keys in that order. A group's script is
 * an rc_call. A batch of calls goes out all at once (parallel_eval: each
 * node's calls pipelined on its connection, every node in one poll loop),
 * and the calls the batch could not settle (no answer, a redirection, a
 * lost script, a failover) are then made one by one with slot_eval.
 */

typedef struct rc_key {
  unsigned slot;
  size_t i;
} rc_key;

typedef struct rc_call {
  unsigned slot;
  size_t from, to; /* its keys: ord[from..to) */
  int nkeys, argc;
  const char **av; /* its arguments, in the caller's buffers */
  const size_t *al;
  /* The outcome: the reply (NULL when none), and whether the script may
   * have run even so (it was sent and not answered). */
  redisReply *rep;
  bool maybe;
  int node;     /* parallel_eval's: the node it went to, -1: not sent */
  unsigned idx; /* ...and the place of its reply there */
} rc_call;

static int key_cmp(const void *a, const void *b) {
  const rc_key *x = a, *y = b;
  if (x->slot != y->slot)
    return x->slot < y->slot ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i; /* the caller's key order */
}

/* Sorts the n keys (given by key and len) into the canonical order. */
static void order_keys(const void *const *keys, const size_t *lens, size_t n,
                       rc_key *ord) {
  for (size_t i = 0; i < n; i++)
    ord[i] = (rc_key){ordo__rs_slot(keys[i], lens[i]), i};
  qsort(ord, n, sizeof *ord, key_cmp);
}

/* Cuts ord[0..n) into groups: calls[0..G), G returned (calls has room for
 * n). */
static size_t make_calls(const rc_key *ord, size_t n, rc_call *calls) {
  size_t nc = 0;
  for (size_t g = 0; g < n;) {
    size_t e = g + 1;
    while (e < n && ord[e].slot == ord[g].slot)
      e++;
    calls[nc++] = (rc_call){.slot = ord[g].slot, .from = g, .to = e};
    g = e;
  }
  return nc;
}

/*
 * parallel_eval -- script which of every call at once, within one exchange
 * bound. Each call's rep gets its reply, or NULL: not sent (its slot's node
 * is unknown or cannot be reached), not answered in time or its connection
 * failed (maybe is then set), or answered with a redirection, NOSCRIPT or
 * a transient error (the script did not run; a MOVED or a transient error
 * has the map read again before the next exchange).
 */
static void parallel_eval(rc_place *p, rc_txn *t, int which, rc_call *calls,
                          size_t nc) ORDO_REQUIRES(t->mu) {
  ordo__rs_conn *ks[RC_MAX_NODES] = {0};
  if (atomic_load(&p->stale))
    refresh(p);
  for (size_t c = 0; c < nc; c++) {
    rc_call *x = &calls[c];
    x->rep = NULL;
    x->maybe = false;
    x->node = slot_node(p, x->slot);
    if (x->node < 0)
      continue;
    ordo__rs_conn *k = &t->c[x->node];
    if (!ordo__rs_open(k)) {
      ordo__rs_node nd;
      ordo__mutex_lock(&p->map_mu);
      nd = p->node[x->node];
      ordo__mutex_unlock(&p->map_mu);
      if (ordo__rs_connect(k, &nd, false) != 0) {
        x->node = -1;
        continue;
      }
    }
    if (ordo__rs_append_script(k, which, x->nkeys, x->argc, x->av, x->al) !=
        0) {
      x->node = -1;
      continue;
    }
    x->idx = k->want - 1;
    ks[x->node] = k;
  }
  ordo__rs_run(ks, RC_MAX_NODES, ordo__now_ns() + p->io_ns, NULL, NULL);
  for (size_t c = 0; c < nc; c++) {
    rc_call *x = &calls[c];
    if (x->node < 0)
      continue;
    ordo__rs_conn *k = &t->c[x->node];
    redisReply *r = ordo__rs_open(k) ? ordo__rs_take(k, x->idx) : NULL;
    if (!r) {
      x->maybe = true;
      continue;
    }
    if (r->type == REDIS_REPLY_ERROR &&
        (strncmp(r->str, "MOVED ", 6) == 0 || strncmp(r->str, "ASK ", 4) == 0 ||
         strncmp(r->str, "NOSCRIPT", 8) == 0 || transient(r))) {
      if (r->str[0] != 'N' || r->str[1] != 'O')
        atomic_store(&p->stale, true);
      freeReplyObject(r);
      continue;
    }
    x->rep = r;
  }
  for (size_t i = 0; i < RC_MAX_NODES; i++)
    if (ks[i] && ordo__rs_open(ks[i]))
      ordo__rs_done(ks[i]);
}

/*
 * settle -- the calls of a batch, all at once, then one by one (slot_eval,
 * bounded by until_ns) for those the batch left without a reply. A set
 * of one group goes to slot_eval at once: one round trip either way.
 */
static void settle(rc_place *p, rc_txn *t, int which, rc_call *calls, size_t nc,
                   uint64_t until_ns) ORDO_REQUIRES(t->mu) {
  if (nc > 1)
    parallel_eval(p, t, which, calls, nc);
  for (size_t c = 0; c < nc; c++) {
    rc_call *x = &calls[c];
    if (nc > 1 && x->rep)
      continue;
    bool maybe = false;
    slot_eval(p, t, x->slot, which, x->nkeys, x->argc, x->av, x->al, until_ns,
              &x->rep, &maybe);
    x->maybe |= maybe;
  }
}

static void free_calls(rc_call *calls, size_t nc) {
  for (size_t c = 0; c < nc; c++)
    if (calls[c].rep) {
      freeReplyObject(calls[c].rep);
      calls[c].rep = NULL;
    }
}

/*
 * groups_script -- RELEASE (owner, channel) or EXTEND (owner, lease[,
 * modes]) of keys[0..n), one call per group, all at once (settle).
 * *confirmed gets how many keys the nodes said were still ours, *denied
 * how many groups answered with some key not ours, *silent how many
 * groups got no answer.
 */
static void groups_script(rc_place *p, rc_txn *t, int which,
                          const void *const *keys, const size_t *lens,
                          const char *modes, size_t n, size_t *confirmed,
                          size_t *denied, size_t *silent) ORDO_REQUIRES(t->mu) {
  *confirmed = *denied = *silent = 0;
  if (n == 0)
    return;
  rc_key *ord = malloc(n * sizeof *ord);
  rc_call *calls = malloc(n * sizeof *calls);
  const char **av = malloc(4 * n * sizeof *av);
  size_t *al = malloc(4 * n * sizeof *al);
  char *gm = malloc(n);
  char lease[24];
  size_t ll = (size_t)snprintf(lease, sizeof lease, "%ld", p->u.lease_ms);
  size_t nc = 0;
  if (!ord || !calls || !av || !al || !gm) {
    *silent = n;
    goto out;
  }
  order_keys(keys, lens, n, ord);
  nc = make_calls(ord, n, calls);
  size_t at = 0;
  for (size_t c = 0; c < nc; c++) {
    rc_call *x = &calls[c];
    size_t m = x->to - x->from;
    x->av = &av[at];
    x->al = &al[at];
    for (size_t j = 0; j < m; j++) {
      av[at + j] = keys[ord[x->from + j].i];
      al[at + j] = lens[ord[x->from + j].i];
      if (modes)
        gm[x->from + j] = modes[ord[x->from + j].i];
    }
    av[at + m] = t->owner;
    al[at + m] = 32;
    x->nkeys = (int)m;
    x->argc = (int)m + 2;
    if (which == ORDO__RS_RELEASE) {
      av[at + m + 1] = p->chan;
      al[at + m + 1] = p->chanlen;
    } else {
      av[at + m + 1] = lease;
      al[at + m + 1] = ll;
      if (modes) {
        av[at + m + 2] = &gm[x->from];
        al[at + m + 2] = m;
        x->argc++;
      }
    }
    at += (size_t)x->argc;
  }
  settle(p, t, which, calls, nc, ordo__now_ns() + p->io_ns);
  for (size_t c = 0; c < nc; c++) {
    const redisReply *r = calls[c].rep;
    size_t m = calls[c].to - calls[c].from;
    if (!r) {
      (*silent)++;
    } else if (which == ORDO__RS_RELEASE && r->type == REDIS_REPLY_INTEGER) {
      *confirmed += (size_t)r->integer;
      if ((size_t)r->integer != m)
        (*denied)++;
    } else if (which == ORDO__RS_EXTEND && r->type == REDIS_REPLY_ARRAY &&
               r->elements >= 1) {
      *confirmed += m - (r->elements - 1);
      if (r->elements > 1)
        (*denied)++;
    } else {
      if (r->type == REDIS_REPLY_ERROR)
        note_err(p, which == ORDO__RS_RELEASE ? "RELEASE" : "EXTEND", r->str);
      (*silent)++;
    }
  }
out:
  if (calls)
    free_calls(calls, nc);
  free(ord);
  free(calls);
  free(av);
  free(al);
  free(gm);
}

/* ---- The hold record (caller holds t->mu) -------------------------------- */

static void holds_clear(rc_place *p, rc_txn *t) ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < t->nh; i++)
    free(t->h[i].key);
  atomic_fetch_sub(&p->keys, t->nh);
  t->nh = 0;
  atomic_store(&t->rn.holding, false);
}

/* RELEASE of every hold; the counts as groups_script's. */
static void release_all(rc_place *p, rc_txn *t, size_t *c, size_t *d, size_t *s)
    ORDO_REQUIRES(t->mu) {
  size_t m = t->nh ? t->nh : 1;
  const void **keys = malloc(m * sizeof *keys);
  size_t *lens = malloc(m * sizeof *lens);
  *c = *d = *s = 0;
  if (keys && lens) {
    for (size_t i = 0; i < t->nh; i++) {
      keys[i] = t->h[i].key;
      lens[i] = t->h[i].len;
    }
    groups_script(p, t, ORDO__RS_RELEASE, keys, lens, NULL, t->nh, c, d, s);
  } else {
    *s = 1;
  }
  free(keys);
  free(lens);
}

/*
 * release_status -- what a release said of the holds let go: lost
 * (ORDO_ELEASE) when a node said some key was no longer ours; when a
 * group got no answer, fine within the lease (nobody else can have been
 * granted it on a node that still has our entry) and ORDO_EBACKEND after.
 */
static int release_status(rc_place *p, rc_txn *t, size_t denied, size_t silent)
    ORDO_REQUIRES(t->mu) {
  if (denied > 0)
    return ORDO_ELEASE;
  if (silent > 0 && ordo__now_ns() >= atomic_load(&t->renewed_ns) + p->lease_ns)
    return ORDO_EBACKEND;
  return 0;
}

/* ---- Lease renewal ---------------------------------------------------------
 */

static void lose(rc_place *p, rc_txn *t, const char *why) ORDO_REQUIRES(t->mu) {
  char msg[256];
  snprintf(msg, sizeof msg, "txn %llu: %s", (unsigned long long)t->base.id,
           why);
  note_err(p, "lease lost", msg);
  size_t c, d, s;
  release_all(p, t, &c, &d, &s);
  holds_clear(p, t);
  atomic_store(&t->rn.lease_end_ns, 0);
  atomic_store(&t->lease_lost, true);
}

/*
 * rc_renew -- EXTEND of every hold, group by group. Renewed when every
 * group confirmed every key; lost when a group says a key is no longer
 * ours, or when the lease runs out before every group confirmed; tried
 * again a tenth of a lease later otherwise.
 */
static bool rc_renew(void *place, ordo_txn_t *tx) {
  rc_place *p = place;
  rc_txn *t = ct(tx);
  ordo__mutex_assert_held(&t->mu); /* renewer.c's pass took it */
  if (t->nh == 0)
    return false;
  const void **keys = malloc(t->nh * sizeof *keys);
  size_t *lens = malloc(t->nh * sizeof *lens);
  uint64_t sent = ordo__now_ns();
  size_t c = 0, d = 0, s = 1;
  if (keys && lens) {
    for (size_t i = 0; i < t->nh; i++) {
      keys[i] = t->h[i].key;
      lens[i] = t->h[i].len;
    }
    groups_script(p, t, ORDO__RS_EXTEND, keys, lens, NULL, t->nh, &c, &d, &s);
  }
  free(keys);
  free(lens);
  uint64_t now = ordo__now_ns();
  if (d > 0) {
    lose(p, t, "a node no longer holds some key for it (a failover?)");
    return true;
  }
  if (s == 0) {
    atomic_store(&t->renewed_ns, sent);
    atomic_store(&t->rn.lease_end_ns, sent + p->lease_ns);
    atomic_store(&t->rn.due_ns, sent + p->lease_ns / 3);
    return false;
  }
  uint64_t end = atomic_load(&t->renewed_ns) + p->lease_ns;
  if (now + p->lease_ns / 10 >= end) {
    lose(p, t, "the renewal was not confirmed before the lease ran out");
    return true;
  }
  atomic_store(&t->rn.due_ns, now + p->lease_ns / 10);
  return false;
}

static uint64_t rc_busy(void *place, ordo__rn_txn *t) {
  ORDO_UNUSED(t);
  return ((rc_place *)place)->lease_ns / 30 + RC_MS;
}

static const ordo__rn_ops rc_rn_ops = {.renew = rc_renew, .busy = rc_busy};

/* ---- Open, close, begin, end --------------------------------------------- */

static int rc_open(ordo_t **out, const char *url, const ordo_options_t *opts) {
  ORDO_UNUSED(opts);
  rc_place *p = calloc(1, sizeof *p);
  if (!p)
    return ORDO_ENOMEM;
  int rc = rc_parse_url(url, &p->u);
  if (rc) {
    free(p);
    return rc;
  }
  /* No release channel: waiters poll (nobody subscribes), and a PUBLISH
   * on a Cluster is sent to every node over the cluster bus. */
  p->chan[0] = 0;
  p->chanlen = 0;
  p->lease_ns = (uint64_t)p->u.lease_ms * RC_MS;
  /* Each exchange: a third of the lease within [50 ms, 1 s]. */
  p->io_ns = p->lease_ns / 3;
  if (p->io_ns < 50 * (uint64_t)RC_MS)
    p->io_ns = 50 * (uint64_t)RC_MS;
  if (p->io_ns > 1000 * (uint64_t)RC_MS)
    p->io_ns = 1000 * (uint64_t)RC_MS;
  rc = ordo__rs_tls_open(&p->u.tls, p->u.seed, p->u.n, (long)(p->io_ns / RC_MS),
                         &p->tls);
  if (rc) {
    free(p);
    return rc;
  }
  ordo__mutex_init(&p->map_mu);
  ordo__mutex_lock(&p->map_mu);
  for (size_t i = 0; i < p->u.n; i++) {
    p->node[i] = p->u.seed[i];
    p->node[i].tls = p->tls;
  }
  for (size_t i = 0; i < p->u.n; i++)
    p->u.seed[i].tls = p->tls; /* copied into nodes found later */
  p->nn = p->u.n;
  for (size_t s = 0; s < RC_SLOTS; s++)
    p->slot[s] = -1;
  ordo__mutex_unlock(&p->map_mu);
  atomic_init(&p->next_id, 1);
  ordo__rs_script_sha(0);
  /* The map is read once now; a cluster that does not answer yet is
   * read again at the first call. */
  if (refresh(p) != 0)
    atomic_store(&p->stale, true);
  rc = ordo__rn_start(&p->rn, &rc_rn_ops, p);
  if (rc) {
    ordo__mutex_destroy(&p->map_mu);
    ordo__tls_client_free(p->tls);
    free(p);
    return rc;
  }
  *out = &p->base;
  return 0;
}

static void rc_close(ordo_t *o) {
  rc_place *p = cp(o);
  ordo__rn_stop(&p->rn);
  ordo__mutex_destroy(&p->map_mu);
  ordo__tls_client_free(p->tls);
  free(p);
}

static int rc_txn_begin(ordo_t *o, ordo_txn_t **out, int priority) {
  ORDO_UNUSED(priority);
  rc_place *p = cp(o);
  rc_txn *t = calloc(1, sizeof *t);
  if (!t)
    return ORDO_ENOMEM;
  if (ordo__rs_new_owner(t->owner) != 0) {
    note_err(p, "owner", "getrandom(2) gave no random bits");
    free(t);
    return ORDO_EBACKEND;
  }
  for (size_t i = 0; i < RC_MAX_NODES; i++)
    ordo__rs_conn_init(&t->c[i]);
  t->base.id = atomic_fetch_add(&p->next_id, 1);
  ordo__mutex_init(&t->mu);
  atomic_init(&t->lease_lost, false);
  atomic_init(&t->renewed_ns, ordo__now_ns());
  ordo__rn_link(&p->rn, &t->rn, &t->base, &t->mu);
  *out = &t->base;
  return 0;
}

static void rc_txn_end(ordo_txn_t *tx) {
  rc_txn *t = ct(tx);
  rc_place *p = cp(tx->o);
  ordo__rn_unlink(&p->rn, &t->rn);
  ordo__mutex_lock(&t->mu);
  if (t->nh > 0) {
    size_t c, d, s;
    release_all(p, t, &c, &d, &s);
  }
  holds_clear(p, t);
  for (size_t i = 0; i < RC_MAX_NODES; i++)
    ordo__rs_close(&t->c[i]);
  free(t->h);
  ordo__mutex_unlock(&t->mu);
  ordo__mutex_destroy(&t->mu);
  free(t);
}

/* ---- lock_all --------------------------------------------------------------
 */

/* Records the grant of r[0..n): tokens[i] is key i's. copies[i] (keys not
 * yet held) move into the record. */
static void record_grant(rc_place *p, rc_txn *t, const ordo_req_t *r, size_t n,
                         const uint64_t *tokens, uint8_t **copies)
    ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < n; i++) {
    long at = ordo__hold_find(t->h, t->nh, sizeof *t->h, r[i].key, r[i].len);
    if (at >= 0) {
      ordo__hold *h = &t->h[at];
      h->count++;
      if (r[i].mode > h->mode)
        h->mode = r[i].mode;
      h->token = tokens[i];
      continue;
    }
    size_t ins = (size_t)(-at - 1);
    memmove(&t->h[ins + 1], &t->h[ins], (t->nh - ins) * sizeof *t->h);
    t->h[ins] = (ordo__hold){copies[i], r[i].len, 1, r[i].mode, tokens[i]};
    copies[i] = NULL;
    t->nh++;
    atomic_fetch_add(&p->keys, 1);
  }
}

/*
 * undo_groups -- gives back what the calls c with undo[c] of a lock_all
 * took (or may have taken): their new keys are released, and a key t held
 * in S and asked for in X is set back to S (EXTEND with modes). All of
 * them at once (groups_script).
 */
static void undo_groups(rc_place *p, rc_txn *t, const ordo_req_t *r,
                        const rc_key *ord, size_t n, const rc_call *calls,
                        size_t nc, const bool *undo, uint8_t **copies)
    ORDO_REQUIRES(t->mu) {
  const void **keys = malloc((n + 1) * sizeof *keys);
  size_t *lens = malloc((n + 1) * sizeof *lens);
  char *modes = malloc(n + 1);
  size_t m = 0, c, d, s;
  if (!keys || !lens || !modes)
    goto out;
  for (size_t g = 0; g < nc; g++)
    for (size_t j = calls[g].from; undo[g] && j < calls[g].to; j++)
      if (copies[ord[j].i]) {
        keys[m] = r[ord[j].i].key;
        lens[m++] = r[ord[j].i].len;
      }
  groups_script(p, t, ORDO__RS_RELEASE, keys, lens, NULL, m, &c, &d, &s);
  m = 0;
  for (size_t g = 0; g < nc; g++)
    for (size_t j = calls[g].from; undo[g] && j < calls[g].to; j++) {
      const ordo_req_t *q = &r[ord[j].i];
      long at = copies[ord[j].i] ? -1
                                 : ordo__hold_find(t->h, t->nh, sizeof *t->h,
                                                   q->key, q->len);
      if (at >= 0 && q->mode == ORDO_MODE_X && t->h[at].mode == ORDO_MODE_S) {
        keys[m] = q->key;
        lens[m] = q->len;
        modes[m++] = 'S';
      }
    }
  groups_script(p, t, ORDO__RS_EXTEND, keys, lens, modes, m, &c, &d, &s);
out:
  free(keys);
  free(lens);
  free(modes);
}

/* What one ACQUIRE of a group said. */
enum { GR_GRANTED, GR_HELD, GR_FAILED, GR_SILENT };

/*
 * fill_acquire -- the arguments of each call's ACQUIRE (its keys with
 * their fencing counters, then owner, lease and modes), in av, al (room
 * for 5 n), fences and modes (room for n).
 */
static void fill_acquire(rc_place *p, rc_txn *t, const ordo_req_t *r,
                         const rc_key *ord, rc_call *calls, size_t nc,
                         const char **av, size_t *al, char *fences, char *modes,
                         const char *lease, size_t ll) {
  size_t at = 0;
  char *f = fences;
  ORDO_UNUSED(p);
  for (size_t c = 0; c < nc; c++) {
    rc_call *x = &calls[c];
    size_t m = x->to - x->from;
    x->av = &av[at];
    x->al = &al[at];
    for (size_t j = 0; j < m; j++) {
      const ordo_req_t *q = &r[ord[x->from + j].i];
      av[at + 2 * j] = q->key;
      al[at + 2 * j] = q->len;
      size_t fl = ordo__rs_fence_key(q->key, q->len, f);
      av[at + 2 * j + 1] = f;
      al[at + 2 * j + 1] = fl;
      f += fl;
      modes[x->from + j] = q->mode == ORDO_MODE_S ? 'S' : 'X';
    }
    av[at + 2 * m] = t->owner;
    al[at + 2 * m] = 32;
    av[at + 2 * m + 1] = lease;
    al[at + 2 * m + 1] = ll;
    av[at + 2 * m + 2] = &modes[x->from];
    al[at + 2 * m + 2] = m;
    x->nkeys = (int)(2 * m);
    x->argc = (int)(2 * m + 3);
    at += (size_t)x->argc;
  }
}

/*
 * judge -- what call x's reply says (GR_*); on GR_GRANTED tokens[] gets
 * its keys' tokens (by request index), on GR_FAILED *rc says why. The
 * reply is freed.
 */
static int judge(rc_place *p, rc_call *x, const rc_key *ord, uint64_t *tokens,
                 int *rc) {
  redisReply *v = x->rep;
  size_t m = x->to - x->from;
  int what;
  x->rep = NULL;
  if (!v)
    return GR_SILENT;
  if (v->type == REDIS_REPLY_ERROR) {
    note_err(p, "ACQUIRE", v->str);
    *rc = ordo__rs_err_code(v);
    what = GR_FAILED;
  } else if (v->type == REDIS_REPLY_ARRAY && v->elements == m + 2 &&
             v->element[0]->type == REDIS_REPLY_INTEGER &&
             v->element[0]->integer == 1) {
    for (size_t j = 0; j < m; j++) {
      const redisReply *e = v->element[2 + j];
      tokens[ord[x->from + j].i] =
          e->type == REDIS_REPLY_INTEGER ? (uint64_t)e->integer : 0;
    }
    what = GR_GRANTED;
  } else if (v->type == REDIS_REPLY_ARRAY && v->elements >= 1 &&
             v->element[0]->type == REDIS_REPLY_INTEGER &&
             v->element[0]->integer == 0) {
    what = GR_HELD;
  } else {
    *rc = ORDO_EBACKEND;
    what = GR_FAILED;
  }
  freeReplyObject(v);
  return what;
}

/*
 * first_try -- every group's ACQUIRE at once (parallel_eval), when there
 * are several. Returns f, the first call not granted (nc when all were);
 * the calls after f that granted or may have are given back, so that what
 * t keeps is the prefix calls[0..f) in the canonical order, as if it had
 * taken them one by one; *held says whether f answered that it is held.
 * On an error reply every call is given back and *rc set (f is then
 * nc + 1).
 */
static size_t first_try(rc_place *p, rc_txn *t, const ordo_req_t *r,
                        const rc_key *ord, size_t n, rc_call *calls, size_t nc,
                        uint64_t *tokens, uint8_t **copies, bool *held, int *rc)
    ORDO_REQUIRES(t->mu) {
  bool *undo = calloc(nc, sizeof *undo);
  if (!undo) {
    *rc = ORDO_ENOMEM;
    return nc + 1;
  }
  parallel_eval(p, t, ORDO__RS_ACQUIRE, calls, nc);
  size_t f = nc;
  bool failed = false;
  for (size_t c = 0; c < nc; c++) {
    bool maybe = calls[c].maybe;
    int what = judge(p, &calls[c], ord, tokens, rc);
    failed |= what == GR_FAILED;
    if (what != GR_GRANTED && f == nc) {
      f = c;
      *held = what == GR_HELD;
    }
    undo[c] = (what == GR_GRANTED || maybe) && c > f;
  }
  if (failed)
    for (size_t c = 0; c <= f && c < nc; c++)
      undo[c] = true; /* giving back what was not taken changes nothing */
  undo_groups(p, t, r, ord, n, calls, nc, undo, copies);
  free(undo);
  return failed ? nc + 1 : f;
}

static int rc_lock_all(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                       uint64_t deadline_ns) {
  rc_txn *t = ct(tx);
  rc_place *p = cp(tx->o);
  size_t fence_bytes = 0;
  for (size_t i = 0; i < n; i++) {
    if (ordo__rs_key_reserved(r[i].key, r[i].len))
      return ORDO_EINVAL;
    fence_bytes += r[i].len + ORDO__RS_FENCE_EXTRA;
  }
  const char **av = malloc(5 * n * sizeof *av);
  size_t *al = malloc(5 * n * sizeof *al);
  uint8_t **copies = calloc(n, sizeof *copies);
  char *fences = malloc(fence_bytes);
  char *modes = malloc(n);
  uint64_t *tokens = calloc(n, sizeof *tokens);
  rc_key *ord = malloc(n * sizeof *ord);
  rc_call *calls = malloc(n * sizeof *calls);
  bool *undo = calloc(n, sizeof *undo);
  const void **keys = malloc(n * sizeof *keys);
  size_t *lens = malloc(n * sizeof *lens);
  int rc = 0;
  if (!av || !al || !copies || !fences || !modes || !tokens || !ord || !calls ||
      !undo || !keys || !lens) {
    rc = ORDO_ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    keys[i] = r[i].key;
    lens[i] = r[i].len;
  }
  order_keys(keys, lens, n, ord);
  size_t nc = make_calls(ord, n, calls);
  char lease[24];
  size_t ll = (size_t)snprintf(lease, sizeof lease, "%ld", p->u.lease_ms);
  fill_acquire(p, t, r, ord, calls, nc, av, al, fences, modes, lease, ll);
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false)) {
    rc = ORDO_ELEASE;
    goto unlock;
  }
  if ((rc = ordo__hold_room((void **)&t->h, &t->caph, t->nh, n,
                            sizeof *t->h)) != 0)
    goto unlock;
  if ((rc = ordo__hold_copy_new(t->h, t->nh, sizeof *t->h, r, n, copies)) != 0)
    goto unlock;
  uint64_t until = ordo__now_ns() + (uint64_t)p->u.timeout_ms * RC_MS;
  if (deadline_ns < until)
    until = deadline_ns;
  bool was_holding = t->nh > 0, waited = false;
  uint64_t first_ns = ordo__now_ns(); /* when the first group was taken */
  size_t c = 0;
  /* The first try said the group it stopped at is held: wait before
   * asking again. */
  bool held = false;
  if (nc > 1) {
    c = first_try(p, t, r, ord, n, calls, nc, tokens, copies, &held, &rc);
    if (c > nc)
      goto done;
  }
  for (; c < nc; c++) {
    uint64_t cap_ms = RC_RETRY_BASE_MS;
    int what;
    for (;;) {
      uint64_t sent = ordo__now_ns();
      rc_call *x = &calls[c];
      x->maybe = false;
      if (held) {
        held = false;
        what = GR_HELD;
      } else if (slot_eval(p, t, x->slot, ORDO__RS_ACQUIRE, x->nkeys, x->argc,
                           x->av, x->al, until, &x->rep, &x->maybe) != 0) {
        rc = ORDO_EBACKEND;
        what = GR_FAILED;
        break;
      } else {
        what = judge(p, x, ord, tokens, &rc);
      }
      if (what == GR_GRANTED && c == 0)
        first_ns = sent;
      if (what != GR_HELD)
        break;
      uint64_t now = ordo__now_ns();
      if (now >= until) {
        rc = ORDO_ETIMEDOUT;
        atomic_fetch_add(&p->timeouts, 1);
        break;
      }
      if (!waited) {
        waited = true;
        atomic_fetch_add(&p->waited, 1);
        atomic_fetch_add(&p->waiting, 1);
      }
      atomic_fetch_add(&p->retries, 1);
      /* The groups taken are kept while this one is waited for, and
       * renewed here: the record (what the renewer renews) has them only
       * once the whole set is granted. */
      if (c > 0 && now - first_ns >= p->lease_ns / 3) {
        size_t cc, d, s, m = calls[c].from;
        for (size_t j = 0; j < m; j++) {
          keys[j] = r[ord[j].i].key;
          lens[j] = r[ord[j].i].len;
        }
        groups_script(p, t, ORDO__RS_EXTEND, keys, lens, NULL, m, &cc, &d, &s);
        if (d == 0 && s == 0)
          first_ns = now;
      }
      uint64_t sleep_ns = ordo__rand64() % (cap_ms * RC_MS) + 1;
      cap_ms = cap_ms * 2 > RC_RETRY_CAP_MS ? RC_RETRY_CAP_MS : cap_ms * 2;
      if (now + sleep_ns > until)
        sleep_ns = until - now;
      ordo__mutex_unlock(&t->mu);
      nap(sleep_ns);
      ordo__mutex_lock(&t->mu);
      if (atomic_exchange(&t->lease_lost, false)) {
        what = GR_FAILED;
        rc = ORDO_ELEASE;
        break;
      }
    }
    if (what != GR_GRANTED) {
      /* All or nothing: the groups taken, and this one if it may have
       * been (its answer was lost). */
      for (size_t g = 0; g < nc; g++)
        undo[g] = g < c || (g == c && calls[c].maybe);
      undo_groups(p, t, r, ord, n, calls, nc, undo, copies);
      goto done;
    }
  }
  record_grant(p, t, r, n, tokens, copies);
  atomic_fetch_add(&p->acquired, 1);
  if (!was_holding) {
    atomic_store(&t->renewed_ns, first_ns);
    atomic_store(&t->rn.lease_end_ns, first_ns + p->lease_ns);
    atomic_store(&t->rn.due_ns, first_ns + p->lease_ns / 3);
    atomic_store(&t->rn.holding, true);
    ordo__rn_kick(&p->rn, first_ns + p->lease_ns / 3);
  }
done:
  if (waited)
    atomic_fetch_sub(&p->waiting, 1);
unlock:
  ordo__mutex_unlock(&t->mu);
out:
  for (size_t i = 0; copies && i < n; i++)
    free(copies[i]);
  free(copies);
  free(av);
  free(al);
  free(fences);
  free(modes);
  free(tokens);
  free(ord);
  free(calls);
  free(undo);
  free(keys);
  free(lens);
  return rc;
}

/* ---- unlock, held, stats, dump ------------------------------------------- */

static int rc_unlock(ordo_txn_t *tx, const void *key, size_t len) {
  rc_txn *t = ct(tx);
  rc_place *p = cp(tx->o);
  int rc = 0;
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false)) {
    rc = ORDO_ELEASE;
    goto out;
  }
  long at = ordo__hold_find(t->h, t->nh, sizeof *t->h, key, len);
  if (at < 0) {
    rc = ORDO_ENOTHELD;
    goto out;
  }
  if (t->h[at].count > 1) {
    t->h[at].count--;
    goto out;
  }
  const void *keys[1] = {key};
  size_t lens[1] = {len}, c, d, s;
  groups_script(p, t, ORDO__RS_RELEASE, keys, lens, NULL, 1, &c, &d, &s);
  rc = release_status(p, t, d, s);
  free(t->h[at].key);
  memmove(&t->h[at], &t->h[at + 1], (t->nh - (size_t)at - 1) * sizeof *t->h);
  t->nh--;
  atomic_fetch_sub(&p->keys, 1);
  atomic_store(&t->rn.holding, t->nh > 0);
  if (rc == 0)
    atomic_fetch_add(&p->released, 1);
out:
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static int rc_unlock_all(ordo_txn_t *tx) {
  rc_txn *t = ct(tx);
  rc_place *p = cp(tx->o);
  int rc = 0;
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false)) {
    rc = ORDO_ELEASE;
    goto out;
  }
  if (t->nh == 0)
    goto out;
  size_t c, d, s;
  release_all(p, t, &c, &d, &s);
  rc = release_status(p, t, d, s);
  if (rc == 0) {
    rc = (int)t->nh;
    atomic_fetch_add(&p->released, t->nh);
  }
  holds_clear(p, t);
out:
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static int rc_held(ordo_txn_t *tx, const void *key, size_t len,
                   ordo_mode_t *mode, uint64_t *fence) {
  rc_txn *t = ct(tx);
  ordo__mutex_lock(&t->mu);
  int count =
      ordo__hold_report(t->h, t->nh, sizeof *t->h, key, len, mode, fence);
  ordo__mutex_unlock(&t->mu);
  return count;
}

static int rc_stats(ordo_t *o, ordo_stats_t *out) {
  rc_place *p = cp(o);
  memset(out, 0, sizeof *out);
  out->acquired = atomic_load(&p->acquired);
  out->waited = atomic_load(&p->waited);
  out->timeouts = atomic_load(&p->timeouts);
  out->released = atomic_load(&p->released);
  out->pokes = atomic_load(&p->retries);
  out->locks = atomic_load(&p->keys);
  out->waiting = atomic_load(&p->waiting);
  return 0;
}

static void rc_dump(ordo_t *o, int fd) {
  rc_place *p = cp(o);
  char buf[1024];
  ordo__mutex_lock(&p->map_mu);
  size_t nn = p->nn, primaries = 0;
  bool seen[RC_MAX_NODES] = {0};
  for (size_t s = 0; s < RC_SLOTS; s++)
    if (p->slot[s] >= 0 && !seen[p->slot[s]]) {
      seen[p->slot[s]] = true;
      primaries++;
    }
  ordo__mutex_unlock(&p->map_mu);
  ordo__mutex_lock(&p->rn.mu);
  int len = snprintf(
      buf, sizeof buf,
      "%s: %zu nodes known, %zu serving slots, lease %ld ms, acquisition "
      "timeout %ld ms, %llu MOVED, %llu ASK, %llu map reads\n%s%s%s",
      o->url, nn, primaries, p->u.lease_ms, p->u.timeout_ms,
      (unsigned long long)atomic_load(&p->moved),
      (unsigned long long)atomic_load(&p->asked),
      (unsigned long long)atomic_load(&p->refreshes),
      p->rn.err[0] ? "last error: " : "", p->rn.err, p->rn.err[0] ? "\n" : "");
  ordo__mutex_unlock(&p->rn.mu);
  if (len > (int)sizeof buf - 1)
    len = (int)sizeof buf - 1;
  if (len > 0)
    ordo__write_all(fd, buf, (size_t)len);
}

static void rc_on_lease_lost(ordo_t *o, void (*cb)(ordo_txn_t *, void *),
                             void *arg) {
  ordo__rn_on_lost(&cp(o)->rn, cb, arg);
}

const ordo__backend ordo__backend_rcluster = {
    .scheme = "redis-cluster",
    .caps = ORDO_CAP_SHARED | ORDO_CAP_FENCE | ORDO_CAP_INCREMENTAL |
            ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE,
    .open = rc_open,
    .close = rc_close,
    .txn_begin = rc_txn_begin,
    .txn_end = rc_txn_end,
    .lock_all = rc_lock_all,
    .lock_all_async = NULL,
    .unlock = rc_unlock,
    .unlock_all = rc_unlock_all,
    .cancel = NULL,
    .held = rc_held,
    .stats = rc_stats,
    .dump = rc_dump,
    .graph = NULL,
    .on_lease_lost = rc_on_lease_lost,
};
