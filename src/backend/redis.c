/*
 * redis.c -- the "redis://" backend: locks on one Redis node, taken all at
 * once by a Lua script (redis_script.c), held under a lease that a renewal
 * thread keeps alive, with a fencing token per grant. Each txn owns a
 * random 128-bit value (its name on the server), a connection for its
 * scripts and, once it has had to wait, a Pub/Sub connection on which it
 * hears of releases. It keeps a local record of what it holds (hold counts,
 * modes, tokens), in step with the scripts' replies. See
 * docs/backend-redis.md for the user's view, and its "Design" for the
 * invariants and the lock order.
 *
 * URLs:
 *   redis://[[user]:password@]host[:port][/db][?lease_ms=N&timeout_ms=N]
 *   redis://[[user]:password@]/path/to/socket[?db=N&lease_ms=N&timeout_ms=N]
 *   rediss://... (TCP forms): TLS, with &tls_ca=FILE&tls_cert=FILE
 *       &tls_key=FILE&tls_sni=NAME (tls.c; docs/backend-redis.md, "TLS")
 *   redis-sentinel://[[user]:password@]host:port[,host:port...]/name[?...]
 *       the primary the sentinels name (rsentinel.c), run as redis:// on
 *       it, with the same options; docs/backend-redis.md, "Redis Sentinel"
 * (IPv6 hosts in brackets; the port defaults to 6379; the user, the password
 * and the socket path are percent-decoded.)
 *
 * Interface: ordo__backend_redis, ordo__backend_rsentinel.
 */
#include "ordo_tsa.h"
#include "backend/redis_script.h"
#include "backend/remote.h"
#include "backend/renewer.h"
#include "backend/rsentinel.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RD_DEFAULT_LEASE_MS 30000L
#define RD_DEFAULT_TIMEOUT_MS 5000L
#define RD_MS 1000000u /* nanoseconds in a millisecond */

/* The fallback poll of a waiter (docs/backend-redis.md, "Waiting"): each
 * sleep is drawn uniformly from [b/2, b] ms, b doubling from FIRST to CAP
 * after each wake-up by the timer. Subscribed, a waiter is woken by the
 * release itself and the poll is only a safety net; without a subscription
 * (its connection failed) the poll is all there is, and is kept short. */
#define RD_POLL_FIRST_MS 100
#define RD_POLL_CAP_MS 1000
#define RD_POLL_BARE_FIRST_MS 10
#define RD_POLL_BARE_CAP_MS 200

/* ---- The URL ------------------------------------------------------------- */

typedef struct rd_url {
  ordo__rs_node node;
  long lease_ms;   /* every owner's lease, renewed at a third */
  long timeout_ms; /* the bound of a connect and of every exchange */
  ordo__tls_opts tls;
} rd_url;

static int parse_query(const char *q, rd_url *u, bool *db_given) {
  while (*q) {
    size_t len = strcspn(q, "&");
    const char *eq = memchr(q, '=', len);
    if (!eq)
      return ORDO_EURL;
    size_t nlen = (size_t)(eq - q), vlen = len - nlen - 1;
    int rc;
    long v = 0;
    if (nlen == 8 && memcmp(q, "lease_ms", 8) == 0) {
      rc = ordo__parse_long(eq + 1, vlen, 10, 86400000L, &u->lease_ms);
    } else if (nlen == 10 && memcmp(q, "timeout_ms", 10) == 0) {
      rc = ordo__parse_long(eq + 1, vlen, 1, 3600000L, &u->timeout_ms);
    } else if (nlen == 2 && memcmp(q, "db", 2) == 0) {
      rc = ordo__parse_long(eq + 1, vlen, 0, 1L << 20, &v);
      u->node.db = (int)v;
      *db_given = true;
    } else if ((rc = ordo__tls_opt(&u->tls, q, nlen, eq + 1, vlen)) == 1) {
      rc = ORDO_EURL;
    }
    if (rc)
      return rc;
    q += len;
    if (*q == '&' && *++q == 0)
      return ORDO_EURL; /* a trailing '&' */
  }
  return 0;
}

/*
 * rd_parse_url -- fills u from a redis:// URL (the forms in the header).
 * A database given both in the path and in the query is refused. Returns 0
 * or ORDO_EURL.
 */
static int rd_parse_url(const char *url, rd_url *u) {
  memset(u, 0, sizeof *u);
  u->lease_ms = RD_DEFAULT_LEASE_MS;
  u->timeout_ms = RD_DEFAULT_TIMEOUT_MS;
  size_t scheme = 8;
  if (strncmp(url, "rediss://", 9) == 0) {
    u->tls.on = true; /* the rest reads as a redis:// URL's */
    scheme = 9;
  } else if (strncmp(url, "redis://", 8) != 0) {
    return ORDO_EURL;
  }
  const char *rest = url + scheme;
  size_t alen = strcspn(rest, "?");
  int rc = ordo__rs_parse_node(rest, alen, &u->node);
  if (rc)
    return rc;
  if (rest[alen] == '?') {
    bool db_given = false;
    if (rest[alen + 1] == 0)
      return ORDO_EURL;
    if ((rc = parse_query(rest + alen + 1, u, &db_given)) != 0)
      return rc;
    if (db_given && u->node.db_set)
      return ORDO_EURL; /* /db and ?db= both */
  }
  return 0;
}

/* ---- Places and txns ----------------------------------------------------- */

/* One key the txn holds: its own copy, hold count, strongest mode and the
 * fencing token of its latest grant. */
typedef ordo__hold rd_hold; /* remote.h */

typedef struct rd_txn rd_txn;
typedef void (*rd_lost_cb)(ordo_txn_t *t, void *arg);

typedef struct rd_place {
  struct ordo_s base;
  rd_url u;              /* read-only after open */
  ordo__tls_client *tls; /* rediss://: the context, made at open */
  /* redis-sentinel://: where the primary is now (rsentinel.h), read-only
   * pointer after open; NULL for redis://, whose node is u.node. */
  ordo__rsn *rsn;
  char chan[32];  /* the release channels' prefix, read-only after open */
  size_t chanlen; /* read-only after open */
  uint64_t lease_ns;
  _Atomic uint64_t next_id;
  _Atomic bool cluster; /* a CROSSSLOT came: scripts go one slot at a time */
  /* Counters of this place's own calls (ordo_stats). */
  _Atomic uint64_t acquired, waited, timeouts, released, wakeups, pokes;
  _Atomic uint64_t waiting, keys, max_wait_us;
  _Atomic uint64_t wait_hist[ORDO_HIST_BUCKETS];
  /*
   * The renewal thread, the txn list and the last failure's text, all under
   * rn.mu (renewer.h). Lock order: a txn's mu, then rn.mu
   * (docs/backend-redis.md, "Lock order"); with rn.mu held a txn's mu is
   * only ever tried, never waited for.
   */
  ordo__renewer rn;
} rd_place;

struct rd_txn {
  struct ordo_txn_s base;
  /* The place's list and renewal state: links under the place's rn.mu,
   * rn.holding and rn.due_ns written under mu. */
  ordo__rn_txn rn;
  /*
   * mu guards c, the hold record (h, nh, caph) and the orphans (orph,
   * norph, caporph). The txn's own thread
   * holds it through each call except while a waiting lock_all sleeps;
   * the renewer and ordo_dump only try it. Every helper that touches these
   * requires it (ordo_tsa.h).
   */
  ordo__mutex mu;
  /* Scripts; closed when lost: the next call reconnects. */
  ordo__rs_conn c ORDO_GUARDED_BY(mu);
  rd_hold *h ORDO_GUARDED_BY(mu); /* sorted in the canonical key order */
  size_t nh ORDO_GUARDED_BY(mu), caph ORDO_GUARDED_BY(mu);
  /* Keys an unanswered ACQUIRE may have granted (not in the record):
   * released before the txn's next exchange (flush_orphans). */
  rd_hold *orph ORDO_GUARDED_BY(mu);
  size_t norph ORDO_GUARDED_BY(mu), caporph ORDO_GUARDED_BY(mu);
  /* Used only by the txn's own thread inside lock_all (and by txn_end):
   * the Pub/Sub connection, opened at the first wait. */
  ordo__rs_conn sub;
  char owner[33]; /* 128 random bits in hex: read-only after begin */
  /* A script of the current keyed_script ran twice: the connection failed
   * under the first, whose effect is then unknown (run_script). */
  bool retried ORDO_GUARDED_BY(mu);
  /* redis-sentinel://: the primary's epoch (rsentinel.h) when c was
   * connected; holds taken under one epoch are never carried to another. */
  uint64_t epoch ORDO_GUARDED_BY(mu);
  /* Written under mu, read by the renewer and ordo_dump without it:
   * atomics, which the analysis does not check. */
  _Atomic bool lease_lost;     /* the next call returns ORDO_ELEASE */
  _Atomic bool in_wait;        /* a lock_all sleeps, mu let go */
  _Atomic uint64_t renewed_ns; /* the oldest renewal among the holds */
};

static rd_txn *rt(ordo_txn_t *t) {
  return (rd_txn *)t;
}
static rd_place *rp(ordo_t *o) {
  return (rd_place *)o;
}

/* Keeps the text of the latest failure, for ordo_dump. Takes rn.mu. */
static void note_err(rd_place *p, const char *what, const char *detail)
    ORDO_EXCLUDES(p->rn.mu) {
  ordo__rn_note(&p->rn, what, detail);
}

static void atomic_max(_Atomic uint64_t *a, uint64_t v) {
  uint64_t cur = atomic_load(a);
  while (cur < v && !atomic_compare_exchange_weak(a, &cur, v))
    ;
}

/* ---- The hold record (caller holds t->mu) -------------------------------- */

static long hold_find(const rd_txn *t, const void *key, size_t len)
    ORDO_REQUIRES(t->mu) {
  return ordo__hold_find(t->h, t->nh, sizeof *t->h, key, len);
}

static void hold_remove(rd_place *p, rd_txn *t, size_t i) ORDO_REQUIRES(t->mu) {
  free(t->h[i].key);
  memmove(&t->h[i], &t->h[i + 1], (t->nh - i - 1) * sizeof *t->h);
  t->nh--;
  atomic_fetch_sub(&p->keys, 1);
  atomic_store(&t->rn.holding, t->nh > 0);
}

/* Forgets every hold. */
static void holds_clear(rd_place *p, rd_txn *t) ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < t->nh; i++)
    free(t->h[i].key);
  atomic_fetch_sub(&p->keys, t->nh);
  t->nh = 0;
  atomic_store(&t->rn.holding, false);
}

/* ---- Exchanges (caller holds t->mu) -------------------------------------- */

/*
 * connect_node -- ordo__rs_connect of k to the place's node: the URL's,
 * or for redis-sentinel:// the primary the sentinels name, asked again
 * (until deadline_ns) when the place is stale; *epoch is then the
 * primary's epoch (0 for redis://). A deadline already past asks no
 * sentinel (the renewal thread's connects: it must not wait).
 */
static int connect_node(rd_place *p, ordo__rs_conn *k, bool select,
                        uint64_t *epoch, uint64_t deadline_ns) {
  *epoch = 0;
  if (!p->rsn)
    return ordo__rs_connect(k, &p->u.node, select);
  ordo__rs_node node = p->u.node;
  int rc = ordo__rsn_node(p->rsn, &node, epoch, deadline_ns, k->errstr);
  return rc ? rc : ordo__rs_connect(k, &node, select);
}

/* Connects t's script connection when it is closed. The handshake is
 * checked by the exchange that follows. A redis-sentinel:// txn whose
 * connection failed has the primary asked for again; one that holds keys
 * is not connected to another primary than the one it took them on
 * (lose_if_over then tells its next call ORDO_ELEASE). */
static int ensure_conn(rd_place *p, rd_txn *t, uint64_t deadline_ns)
    ORDO_REQUIRES(t->mu) {
  if (ordo__rs_open(&t->c))
    return 0;
  if (p->rsn && t->c.err)
    ordo__rsn_stale(p->rsn);
  uint64_t epoch = 0;
  int rc = connect_node(p, &t->c, true, &epoch, deadline_ns);
  if (rc == 0 && p->rsn && t->nh > 0 && epoch != t->epoch) {
    ordo__rs_close(&t->c);
    snprintf(t->c.errstr, sizeof t->c.errstr,
             "the primary changed (failover) while the txn held keys");
    rc = ORDO_EBACKEND;
  }
  if (rc)
    note_err(p, "connect", t->c.errstr);
  else
    t->epoch = epoch;
  return rc;
}

/*
 * run_script -- one script on t's connection within timeout_ms (or by
 * bound_ns when that is sooner). When a connection that was open already
 * fails under it (closed by the server's idle timeout, say), the script is
 * run once more on a new one: each script may run twice for the same owner
 * with the effect of once (ACQUIRE finds the owner's own entry and grants
 * it again, the record counting the reply once; RELEASE and EXTEND find
 * theirs gone or renewed). A script that got no answer in time is not
 * retried. Returns the reply, or NULL with *rc set (the connection is
 * closed then; its text is kept for ordo_dump).
 */
static redisReply *run_script(rd_place *p, rd_txn *t, int which, int nkeys,
                              int argc, const char **av, const size_t *al,
                              uint64_t bound_ns, int *rc) ORDO_REQUIRES(t->mu) {
  uint64_t deadline = ordo__now_ns() + (uint64_t)p->u.timeout_ms * RD_MS;
  if (bound_ns < deadline)
    deadline = bound_ns;
  /* While t holds keys, no exchange outlasts its lease: the renewal thread
   * cannot renew a txn inside a call, and would hear of the lost lease
   * only when the call returned, timeout_ms later (issue 18, item 13: every
   * holder hears within a lease, a busy one too). */
  uint64_t lease_end = atomic_load(&t->renewed_ns) + p->lease_ns;
  if (t->nh > 0 && lease_end < deadline)
    deadline = lease_end;
  bool fresh = !ordo__rs_open(&t->c);
  for (;;) {
    if ((*rc = ensure_conn(p, t, deadline)) != 0)
      return NULL;
    ordo__rs_conn *k = &t->c;
    redisReply *r = NULL;
    *rc = ordo__rs_eval(&k, 1, which, nkeys, argc, av, al, deadline, &r);
    if (p->rsn && ordo__rsn_readonly(r)) {
      /* The primary is a replica now (a failover): as a failed connection,
       * so the sentinels are asked again. */
      snprintf(t->c.errstr, sizeof t->c.errstr, "%s", r->str);
      freeReplyObject(r);
      r = NULL;
      ordo__rs_close(&t->c);
      t->c.err = ORDO_EBACKEND;
    }
    if (r || *rc != 0)
      return r;
    *rc = t->c.err ? t->c.err : ORDO_EBACKEND;
    note_err(p,
             which == ORDO__RS_ACQUIRE   ? "ACQUIRE"
             : which == ORDO__RS_RELEASE ? "RELEASE"
                                         : "EXTEND",
             t->c.errstr[0] ? t->c.errstr : "failed");
    ordo__rs_close(&t->c);
    if (*rc == ORDO_ETIMEDOUT)
      *rc = ORDO_EBACKEND; /* the server did not answer: no second try */
    else if (!fresh && *rc == ORDO_EBACKEND && ordo__now_ns() < deadline) {
      fresh = true;
      t->retried = true;
      continue;
    }
    return NULL;
  }
}

/* A script's reply for the keys idx[0..m) (indexes into the caller's
 * array): 0, or a negative code when the reply is not the documented one. */
typedef int (*rd_fold)(void *arg, const size_t *idx, size_t m,
                       const redisReply *r);

typedef struct rd_slotted {
  unsigned slot;
  size_t i;
} rd_slotted;

static int slotted_cmp(const void *a, const void *b) {
  const rd_slotted *x = a, *y = b;
  if (x->slot != y->slot)
    return x->slot < y->slot ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/*
 * keyed_script -- runs script which (RELEASE or EXTEND) for t over
 * keys[0..n) followed by the arguments a1 and a2: one script, or on a
 * Redis Cluster one per hash slot, since the keys of a txn's holds (taken
 * by several lock_all calls) may lie in several. A place learns that it
 * talks to a Cluster from the first CROSSSLOT reply. fold takes each
 * reply. Returns 0, or the first failure's code (the text is kept).
 */
static int keyed_script(rd_place *p, rd_txn *t, int which,
                        const void *const *keys, const size_t *lens, size_t n,
                        const char *a1, size_t l1, const char *a2, size_t l2,
                        uint64_t bound_ns, rd_fold fold, void *arg)
    ORDO_REQUIRES(t->mu) {
  const char **av = malloc((n + 2) * sizeof *av);
  size_t *al = malloc((n + 2) * sizeof *al);
  size_t *idx = malloc(n * sizeof *idx);
  rd_slotted *sl = malloc(n * sizeof *sl);
  int first = 0;
  if (!av || !al || !idx || !sl) {
    first = ORDO_ENOMEM;
    goto out;
  }
  for (bool cluster = atomic_load(&p->cluster);;) {
    for (size_t i = 0; i < n; i++) {
      sl[i].slot = cluster ? ordo__rs_slot(keys[i], lens[i]) : 0;
      sl[i].i = i;
    }
    if (cluster)
      qsort(sl, n, sizeof *sl, slotted_cmp);
    for (size_t i = 0; i < n; i++)
      idx[i] = sl[i].i;
    bool cross = false;
    for (size_t g = 0, e; g < n && first == 0; g = e) {
      size_t m = 0;
      for (e = g; e < n && sl[e].slot == sl[g].slot; e++, m++) {
        av[m] = keys[idx[e]];
        al[m] = lens[idx[e]];
      }
      av[m] = a1;
      al[m] = l1;
      av[m + 1] = a2;
      al[m + 1] = l2;
      int rc;
      redisReply *r =
          run_script(p, t, which, (int)m, (int)m + 2, av, al, bound_ns, &rc);
      if (!r) {
        first = rc;
        break;
      }
      if (r->type == REDIS_REPLY_ERROR && !cluster &&
          strncmp(r->str, "CROSSSLOT", 9) == 0) {
        cross = true;
      } else if (r->type == REDIS_REPLY_ERROR) {
        note_err(p, which == ORDO__RS_RELEASE ? "RELEASE" : "EXTEND", r->str);
        first = ordo__rs_err_code(r);
      } else if ((first = fold(arg, idx + g, m, r)) != 0) {
        note_err(p, which == ORDO__RS_RELEASE ? "RELEASE" : "EXTEND",
                 "the reply is not the documented one");
        ordo__rs_close(&t->c); /* out of step: start afresh */
      }
      freeReplyObject(r);
      if (cross)
        break;
    }
    if (!cross)
      break;
    atomic_store(&p->cluster, true);
    cluster = true;
  }
out:
  free(av);
  free(al);
  free(idx);
  free(sl);
  return first;
}

static int fold_release(void *arg, const size_t *idx, size_t m,
                        const redisReply *r) {
  ORDO_UNUSED(idx);
  if (r->type != REDIS_REPLY_INTEGER || r->integer < 0 ||
      (size_t)r->integer > m)
    return ORDO_EBACKEND;
  *(size_t *)arg += (size_t)r->integer;
  return 0;
}

/*
 * release_keys -- RELEASE of keys[0..n) (lengths lens) for t. Returns how
 * many were still t's, or a negative code (nothing known: the connection
 * failed, or the server refused).
 */
static int release_keys(rd_place *p, rd_txn *t, const void *const *keys,
                        const size_t *lens, size_t n) ORDO_REQUIRES(t->mu) {
  size_t count = 0;
  t->retried = false;
  int rc =
      keyed_script(p, t, ORDO__RS_RELEASE, keys, lens, n, t->owner, 32, p->chan,
                   p->chanlen, ORDO_NO_DEADLINE, fold_release, &count);
  /* A RELEASE run again after its connection failed finds gone what the
   * first run released, and cannot tell that from a lapsed entry. Within
   * the lease (the client's count of it, never the longer one, less a
   * hundredth for the clocks' rates) no entry of t's can have lapsed, so
   * every key was t's and is released now: the program sees nothing of
   * the lost reply (docs/backend-redis.md, "The scripts"). */
  if (rc == 0 && t->retried && count < n &&
      ordo__now_ns() <
          atomic_load(&t->renewed_ns) + p->lease_ns - p->lease_ns / 100)
    count = n;
  if (count > 0)
    atomic_fetch_add(&p->released, (uint64_t)count);
  return rc ? rc : (int)count;
}

/* RELEASE of everything t holds (reverse canonical order). */
static int release_all(rd_place *p, rd_txn *t) ORDO_REQUIRES(t->mu) {
  const void **keys = malloc((t->nh ? t->nh : 1) * sizeof *keys);
  size_t *lens = malloc((t->nh ? t->nh : 1) * sizeof *lens);
  int rc = ORDO_ENOMEM;
  if (keys && lens) {
    for (size_t i = 0; i < t->nh; i++) {
      keys[i] = t->h[t->nh - 1 - i].key;
      lens[i] = t->h[t->nh - 1 - i].len;
    }
    rc = release_keys(p, t, keys, lens, t->nh);
  }
  free(keys);
  free(lens);
  return rc;
}

/* Removes the orphan that is key (a grant recorded it after all). */
static void orphan_forget(rd_txn *t, const void *key, size_t len)
    ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < t->norph; i++)
    if (ordo_key_cmp(t->orph[i].key, t->orph[i].len, key, len) == 0) {
      free(t->orph[i].key);
      t->orph[i] = t->orph[--t->norph];
      return;
    }
}

/*
 * flush_orphans -- RELEASE of the keys an unanswered ACQUIRE may have
 * granted: only entries of t's own owner value go, so a key someone else
 * holds is not touched. Kept for the next call when the server cannot be
 * reached; they lapse with the lease in any case. Caller holds t->mu.
 */
static void flush_orphans(rd_place *p, rd_txn *t) ORDO_REQUIRES(t->mu) {
  if (t->norph == 0)
    return;
  const void **keys = malloc(t->norph * sizeof *keys);
  size_t *lens = malloc(t->norph * sizeof *lens);
  if (keys && lens) {
    for (size_t i = 0; i < t->norph; i++) {
      keys[i] = t->orph[i].key;
      lens[i] = t->orph[i].len;
    }
    if (release_keys(p, t, keys, lens, t->norph) >= 0) {
      for (size_t i = 0; i < t->norph; i++)
        free(t->orph[i].key);
      t->norph = 0;
    }
  }
  free(keys);
  free(lens);
}

/* ---- Lease renewal ----------------------------------------------------------
 * The hooks of the place's renewal thread (renewer.c): it sleeps until the
 * earliest renewal is due (a third of the lease after the oldest renewal of
 * a holding txn), and rd_renew runs EXTEND over every key of the txn and
 * reports a lost lease. docs/backend-redis.md, "Design".
 */

/* The enough predicate of a send that waits for no reply. */
static bool conn_written(void *arg) {
  const ordo__rs_conn *k = arg;
  return !ordo__rs_open(k) || (k->flushed && !k->connecting);
}

/* RELEASE of everything t holds, written without waiting for its reply
 * (thrown away when it comes): nothing of a lost lease lingers on a
 * server that answers, and nothing waits for one that does not. */
static void release_all_nowait(rd_place *p, rd_txn *t) ORDO_REQUIRES(t->mu) {
  if (t->nh == 0 || !ordo__rs_open(&t->c) || atomic_load(&p->cluster))
    return;
  const char **av = malloc((t->nh + 2) * sizeof *av);
  size_t *al = malloc((t->nh + 2) * sizeof *al);
  if (av && al) {
    for (size_t i = 0; i < t->nh; i++) {
      av[i] = (const char *)t->h[i].key;
      al[i] = t->h[i].len;
    }
    av[t->nh] = t->owner;
    al[t->nh] = 32;
    av[t->nh + 1] = p->chan;
    al[t->nh + 1] = p->chanlen;
    if (ordo__rs_append_script(&t->c, ORDO__RS_RELEASE, (int)t->nh,
                               (int)t->nh + 2, av, al) == 0) {
      ordo__rs_conn *k = &t->c;
      /* One write, no wait: a deadline already reached. */
      ordo__rs_run(&k, 1, ordo__now_ns(), conn_written, k);
      if (ordo__rs_open(k))
        ordo__rs_done(k);
    }
  }
  free(av);
  free(al);
}

/*
 * lose -- t's lease is lost: keeps the text, forgets every hold and marks
 * t so its next call returns ORDO_ELEASE. What may still be t's on the
 * server is released without waiting for the reply (release_all_nowait)
 * and becomes an orphan too, released again before the txn's next
 * exchange (or at its end): the renewal thread waits for no server when
 * it finds a lease lost (the server may be the one that stopped). Caller
 * holds t->mu.
 */
static void lose(rd_place *p, rd_txn *t, const char *why) ORDO_REQUIRES(t->mu) {
  char msg[256];
  snprintf(msg, sizeof msg, "txn %llu: %s", (unsigned long long)t->base.id,
           why);
  note_err(p, "lease lost", msg);
  release_all_nowait(p, t);
  if (t->nh > 0 && ordo__hold_room((void **)&t->orph, &t->caporph, t->norph,
                                   t->nh, sizeof *t->orph) == 0) {
    for (size_t i = 0; i < t->nh; i++) {
      t->orph[t->norph++] =
          (rd_hold){t->h[i].key, t->h[i].len, 0, t->h[i].mode, 0};
      t->h[i].key = NULL; /* moved: holds_clear frees nothing of it */
    }
  }
  holds_clear(p, t);
  atomic_store(&t->rn.lease_end_ns, 0);
  atomic_store(&t->lease_lost, true);
}

/*
 * lease_over -- true when t holds keys and their lease has run out by the
 * client's count (a lease from its last renewal's sending, never the
 * longer view). Caller holds t->mu.
 */
static bool lease_over(const rd_place *p, rd_txn *t) ORDO_REQUIRES(t->mu) {
  return t->nh > 0 &&
         ordo__now_ns() >= atomic_load(&t->renewed_ns) + p->lease_ns;
}

/*
 * lose_if_over -- a call's own check of t's lease, for when the renewal
 * thread has not yet looked at it (a process stopped past its lease and
 * let run again: its own thread may take t->mu before the renewal thread
 * does; or a loaded machine). When the lease has run out by the client's
 * count, does what the renewal thread would (lose) and returns true: the
 * call then returns ORDO_ELEASE itself, so lease_lost is cleared (said
 * once) and the callback is not called (the call tells the program).
 * Without it the call's exchange, bounded by the lease's end (run_script),
 * would be cut at once and the call would say ORDO_EBACKEND of a server
 * that answers: a stale holder is told its lease is gone, whichever thread
 * runs first. Caller holds t->mu.
 */
static bool lose_if_over(rd_place *p, rd_txn *t) ORDO_REQUIRES(t->mu) {
  if (p->rsn && t->nh > 0 && ordo__rsn_epoch(p->rsn) != t->epoch) {
    /* Taken on a primary that is no longer the one (redis-sentinel://):
     * what the new one has of them is not known, so none is kept. */
    lose(p, t, "the primary changed (failover): its holds are not kept");
    atomic_store(&t->lease_lost, false);
    return true;
  }
  if (!lease_over(p, t))
    return false;
  lose(p, t, "the lease ran out by the client's count (a call found it)");
  atomic_store(&t->lease_lost, false);
  return true;
}

typedef struct rd_lost {
  bool *lost; /* per hold: no longer t's */
  size_t n;   /* how many */
} rd_lost;

static int fold_extend(void *arg, const size_t *idx, size_t m,
                       const redisReply *r) {
  rd_lost *l = arg;
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1)
    return ORDO_EBACKEND;
  for (size_t i = 1; i < r->elements; i++) {
    const redisReply *e = r->element[i];
    if (e->type != REDIS_REPLY_INTEGER || e->integer < 1 ||
        (size_t)e->integer > m)
      return ORDO_EBACKEND;
    l->lost[idx[e->integer - 1]] = true;
    l->n++;
  }
  return 0;
}

static bool renew_outcome(rd_place *p, rd_txn *t, int rc, const rd_lost *l,
                          uint64_t sent, uint64_t lease_end)
    ORDO_REQUIRES(t->mu);

/*
 * rd_renew -- EXTENDs every hold of t (the renew hook of renewer.h).
 * Caller holds t->mu (not p->rn.mu).
 * Each exchange is bounded by timeout_ms and by two thirds of the lease.
 * When the server cannot be reached the renewal is tried again a tenth of
 * a lease later, for as long as the lease lasts; when it says some key is
 * no longer t's, or the lease ran out meanwhile, the lease is lost (lose).
 * Returns true when it was lost.
 */
static bool rd_renew(void *place, ordo_txn_t *tx) {
  rd_place *p = place;
  rd_txn *t = rt(tx);
  ordo__mutex_assert_held(&t->mu); /* renewer.c's pass took it */
  if (t->nh == 0)
    return false;
  const void **keys = malloc(t->nh * sizeof *keys);
  size_t *lens = malloc(t->nh * sizeof *lens);
  bool *lost = calloc(t->nh, sizeof *lost);
  uint64_t sent = ordo__now_ns();
  uint64_t lease_end = atomic_load(&t->renewed_ns) + p->lease_ns;
  char lease[24];
  rd_lost l = {lost, 0};
  int rc = ORDO_ENOMEM;
  if (keys && lens && lost) {
    for (size_t i = 0; i < t->nh; i++) {
      keys[i] = t->h[i].key;
      lens[i] = t->h[i].len;
    }
    size_t ll = (size_t)snprintf(lease, sizeof lease, "%ld", p->u.lease_ms);
    rc = keyed_script(p, t, ORDO__RS_EXTEND, keys, lens, t->nh, t->owner, 32,
                      lease, ll, lease_end, fold_extend, &l);
  }
  bool gone = renew_outcome(p, t, rc, &l, sent, lease_end);
  free(keys);
  free(lens);
  free(lost);
  return gone;
}

/*
 * renew_outcome -- what a renewal of t sent at sent said: rc 0 and no key
 * lost, renewed; rc 0 with keys lost (l), the lease is lost; otherwise not
 * renewed, tried again a tenth of a lease later while the lease
 * (lease_end) lasts, else lost. Returns true when it was lost. Caller
 * holds t->mu.
 */
static bool renew_outcome(rd_place *p, rd_txn *t, int rc, const rd_lost *l,
                          uint64_t sent, uint64_t lease_end)
    ORDO_REQUIRES(t->mu) {
  const bool *lost = l->lost;
  bool gone = false;
  if (rc == 0 && l->n == 0) {
    atomic_store(&t->renewed_ns, sent);
    atomic_store(&t->rn.lease_end_ns, sent + p->lease_ns);
    atomic_store(&t->rn.due_ns, sent + p->lease_ns / 3);
  } else if (rc == 0) {
    /* Some keys are no longer ours: name them, then give up the rest. */
    char why[200];
    size_t o = (size_t)snprintf(why, sizeof why, "no longer held:");
    FILE *f = fmemopen(why + o, sizeof why - o, "w");
    for (size_t i = 0; f && i < t->nh; i++)
      if (lost[i]) {
        fputc(' ', f);
        ordo__put_key(f, t->h[i].key, t->h[i].len);
      }
    if (f)
      fclose(f);
    lose(p, t, why);
    gone = true;
  } else {
    /* Not renewed, not refused either: try again while the lease lasts. */
    uint64_t now = ordo__now_ns(), again = now + p->lease_ns / 10;
    if (again + p->lease_ns / 10 >= lease_end) {
      lose(p, t, "the server could not be reached before the lease ran out");
      gone = true;
    } else {
      atomic_store(&t->rn.due_ns, again);
    }
  }
  return gone;
}

/* One txn's part in a batch of renewals (rd_renew_many). */
typedef struct rd_rn {
  rd_txn *t;
  const char **av; /* the keys, the owner, the lease */
  size_t *al;
  bool *lostk; /* per hold: no longer t's */
  rd_lost l;
  uint64_t sent, lease_end;
  bool fresh;  /* its connection was opened for this renewal */
  bool again;  /* sent a second time (EVAL after NOSCRIPT, or reconnected) */
  bool active; /* its reply is awaited */
  bool cross;  /* CROSSSLOT: renewed one slot at a time (rd_renew) */
  int rc;
} rd_rn;

/* Sends m's EXTEND on its txn's connection (opened if closed); false when
 * it could not be sent (m->rc says why). */
static bool rn_send(rd_place *p, rd_txn *t, rd_rn *m, bool eval)
    ORDO_REQUIRES(t->mu) {
  int argc = (int)t->nh + 2;
  if ((m->rc = ensure_conn(p, t, 0)) == 0)
    m->rc = eval ? ordo__rs_append_eval(&t->c, ORDO__RS_EXTEND, (int)t->nh,
                                        argc, m->av, m->al)
                 : ordo__rs_append_script(&t->c, ORDO__RS_EXTEND, (int)t->nh,
                                          argc, m->av, m->al);
  m->active = m->rc == 0;
  return m->active;
}

/* Takes m's reply, if any, after a run; decides whether m is done. */
static void rn_collect(rd_place *p, rd_txn *t, rd_rn *m, uint64_t dl,
                       const size_t *idx) ORDO_REQUIRES(t->mu) {
  ordo__rs_conn *k = &t->c;
  uint64_t now = ordo__now_ns();
  if (!ordo__rs_open(k)) {
    note_err(p, "EXTEND", k->errstr[0] ? k->errstr : "failed");
    /* A connection the server had closed (for idleness, say) is opened
     * again once: EXTEND may run twice with the effect of once. */
    if (!m->fresh && !m->again && now < dl) {
      m->again = m->fresh = true;
      if (rn_send(p, t, m, false))
        return;
    }
    m->rc = k->err && k->err != ORDO_ETIMEDOUT ? k->err : ORDO_EBACKEND;
    m->active = false;
    return;
  }
  if (k->got < k->want) {
    if (now < dl)
      return; /* still awaited */
    char msg[96];
    snprintf(msg, sizeof msg, "no reply before the lease's end or %ld ms",
             p->u.timeout_ms);
    note_err(p, "EXTEND", msg);
    ordo__rs_close(k); /* whether it ran is unknown: start afresh */
    m->rc = ORDO_EBACKEND;
    m->active = false;
    return;
  }
  redisReply *r = ordo__rs_take(k, k->want - 1);
  ordo__rs_done(k);
  m->active = false;
  if (!r) {
    m->rc = ORDO_EBACKEND;
  } else if (r->type == REDIS_REPLY_ERROR &&
             strncmp(r->str, "NOSCRIPT", 8) == 0 && !m->again) {
    m->again = true;
    rn_send(p, t, m, true); /* EVAL loads it again */
  } else if (r->type == REDIS_REPLY_ERROR &&
             strncmp(r->str, "CROSSSLOT", 9) == 0) {
    atomic_store(&p->cluster, true);
    m->cross = true;
  } else if (r->type == REDIS_REPLY_ERROR) {
    note_err(p, "EXTEND", r->str);
    m->rc = ordo__rs_err_code(r);
    if (p->rsn && ordo__rsn_readonly(r)) {
      /* A replica now: the next connect asks the sentinels. */
      ordo__rsn_stale(p->rsn);
      ordo__rs_close(k);
    }
  } else if ((m->rc = fold_extend(&m->l, idx, t->nh, r)) != 0) {
    note_err(p, "EXTEND", "the reply is not the documented one");
    ordo__rs_close(k); /* out of step: start afresh */
  }
  if (r)
    freeReplyObject(r);
}

/*
 * rd_renew_many -- EXTENDs every hold of each txn of ts[0..n) at once (the
 * renew_many hook of renewer.h): one EXTEND on each txn's connection, all
 * driven by one ordo__rs_run, so that a server that stopped answering
 * holds every renewal for the same time and delays none behind another.
 * The run ends no later than until, timeout_ms after it began, or the
 * earliest lease end among them: a lease whose end passes is lost then,
 * without waiting for the server any longer. Each txn's outcome is then
 * rd_renew's (renew_outcome). A Cluster place renews one txn after the
 * other, one slot at a time (rd_renew). Caller holds each txn's mu.
 */
static void rd_renew_many(void *place, ordo_txn_t *const *ts, size_t n,
                          uint64_t until, bool *lostv) {
  rd_place *p = place;
  size_t maxh = 0;
  for (size_t i = 0; i < n; i++) {
    lostv[i] = false;
    size_t nh = rt(ts[i])->nh;
    maxh = nh > maxh ? nh : maxh;
  }
  rd_rn *m = calloc(n, sizeof *m);
  ordo__rs_conn **ks = calloc(n, sizeof *ks);
  size_t *idx = malloc((maxh ? maxh : 1) * sizeof *idx);
  if (atomic_load(&p->cluster) || !m || !ks || !idx) {
    for (size_t i = 0; i < n; i++)
      lostv[i] = rd_renew(p, ts[i]);
    free(m);
    free(ks);
    free(idx);
    return;
  }
  for (size_t j = 0; j < maxh; j++)
    idx[j] = j;
  char lease[24];
  size_t ll = (size_t)snprintf(lease, sizeof lease, "%ld", p->u.lease_ms);
  uint64_t now = ordo__now_ns();
  uint64_t dl = now + (uint64_t)p->u.timeout_ms * RD_MS;
  dl = until < dl ? until : dl;
  for (size_t i = 0; i < n; i++) {
    rd_txn *t = rt(ts[i]);
    ordo__mutex_assert_held(&t->mu); /* renewer.c's pass took it */
    m[i].t = t;
    if (t->nh == 0)
      continue;
    m[i].av = malloc((t->nh + 2) * sizeof *m[i].av);
    m[i].al = malloc((t->nh + 2) * sizeof *m[i].al);
    m[i].lostk = calloc(t->nh, sizeof *m[i].lostk);
    m[i].l = (rd_lost){m[i].lostk, 0};
    m[i].sent = now;
    m[i].lease_end = atomic_load(&t->renewed_ns) + p->lease_ns;
    if (m[i].lease_end < dl)
      dl = m[i].lease_end;
    if (!m[i].av || !m[i].al || !m[i].lostk) {
      m[i].rc = ORDO_ENOMEM;
      continue;
    }
    for (size_t j = 0; j < t->nh; j++) {
      m[i].av[j] = (const char *)t->h[j].key;
      m[i].al[j] = t->h[j].len;
    }
    m[i].av[t->nh] = t->owner;
    m[i].al[t->nh] = 32;
    m[i].av[t->nh + 1] = lease;
    m[i].al[t->nh + 1] = ll;
    m[i].fresh = !ordo__rs_open(&t->c);
    rn_send(p, t, &m[i], false);
  }
  for (;;) {
    bool any = false;
    for (size_t i = 0; i < n; i++) {
      ks[i] = m[i].active ? &m[i].t->c : NULL;
      any |= m[i].active;
    }
    if (!any)
      break;
    ordo__rs_run(ks, n, dl, NULL, NULL);
    for (size_t i = 0; i < n; i++)
      if (m[i].active) {
        rd_txn *t = m[i].t;
        ordo__mutex_assert_held(&t->mu); /* renewer.c's pass took it */
        rn_collect(p, t, &m[i], dl, idx);
      }
  }
  for (size_t i = 0; i < n; i++) {
    rd_txn *t = m[i].t;
    ordo__mutex_assert_held(&t->mu); /* renewer.c's pass took it */
    if (t->nh > 0)
      lostv[i] = m[i].cross ? rd_renew(p, ts[i])
                            : renew_outcome(p, t, m[i].rc, &m[i].l, m[i].sent,
                                            m[i].lease_end);
    free(m[i].av);
    free(m[i].al);
    free(m[i].lostk);
  }
  free(m);
  free(ks);
  free(idx);
}

/* With renew_many, a txn due within a twentieth of a lease joins a batch
 * (a failed renewal is tried again a tenth of a lease later: later than
 * that). */
static uint64_t rd_early(void *place) {
  return ((rd_place *)place)->lease_ns / 20;
}

/* ---- Open, close, begin, end --------------------------------------------- */

/* A due txn inside an exchange (bounded by timeout_ms) is looked at again
 * a thirtieth of a lease later. */
static uint64_t rd_busy(void *place, ordo__rn_txn *t) {
  ORDO_UNUSED(t);
  return ((rd_place *)place)->lease_ns / 30 + RD_MS;
}

static const ordo__rn_ops rd_rn_ops = {.renew = rd_renew,
                                       .busy = rd_busy,
                                       .renew_many = rd_renew_many,
                                       .early = rd_early};

static int rd_open(ordo_t **out, const char *url, const ordo_options_t *opts) {
  ORDO_UNUSED(opts);
  rd_place *p = calloc(1, sizeof *p);
  if (!p)
    return ORDO_ENOMEM;
  int rc;
  if (strncmp(url, "redis-sentinel://", 17) == 0) {
    /* The sentinels and the name in rsentinel.c, the options here. */
    const char *q = "";
    bool db_given = false;
    p->u.lease_ms = RD_DEFAULT_LEASE_MS;
    p->u.timeout_ms = RD_DEFAULT_TIMEOUT_MS;
    rc = ordo__rsn_parse(url, &p->u.node, &q, &p->rsn);
    if (rc == 0 && *q)
      rc = parse_query(q, &p->u, &db_given);
    if (rc == 0 && p->u.tls.on)
      rc = ORDO_EURL; /* no TLS to sentinels (docs/backend-redis.md) */
  } else {
    rc = rd_parse_url(url, &p->u);
  }
  if (rc == 0)
    rc = ordo__rs_tls_open(&p->u.tls, &p->u.node, 1, p->u.timeout_ms, &p->tls);
  if (rc == 0 && p->rsn) {
    /* The primary is found at open: a URL no sentinel answers fails here. */
    ordo__rs_node node = p->u.node;
    uint64_t epoch;
    char err[200];
    rc = ordo__rsn_node(p->rsn, &node, &epoch,
                        ordo__deadline_ns(p->u.timeout_ms), err);
  }
  if (rc) {
    ordo__rsn_free(p->rsn);
    free(p);
    return rc;
  }
  p->chanlen = ordo__rs_channel_prefix(p->u.node.db, p->chan);
  p->lease_ns = (uint64_t)p->u.lease_ms * RD_MS;
  atomic_init(&p->next_id, 1);
  atomic_init(&p->cluster, false);
  ordo__rs_script_sha(0); /* computes the names once, before any thread */
  rc = ordo__rn_start(&p->rn, &rd_rn_ops, p);
  if (rc) {
    ordo__tls_client_free(p->tls);
    free(p);
    return rc;
  }
  *out = &p->base;
  return 0;
}

static void rd_close(ordo_t *o) {
  rd_place *p = rp(o);
  ordo__rn_stop(&p->rn);
  ordo__tls_client_free(p->tls);
  ordo__rsn_free(p->rsn);
  free(p);
}

/*
 * rd_txn_begin -- a txn and its script connection: connect, AUTH and
 * SELECT when the URL asks, and a PING, pipelined, in one round trip bounded
 * by timeout_ms. A refused AUTH or a -NOAUTH is ORDO_EAUTH; anything else
 * that fails is ORDO_EBACKEND, its text kept for ordo_dump.
 */
static int rd_txn_begin(ordo_t *o, ordo_txn_t **out, int priority) {
  ORDO_UNUSED(priority); /* nothing on Redis to give it to */
  rd_place *p = rp(o);
  rd_txn *t = calloc(1, sizeof *t);
  if (!t)
    return ORDO_ENOMEM;
  ordo__rs_conn_init(&t->c);
  ordo__rs_conn_init(&t->sub);
  /* An owner value must be unguessable: without the kernel's random bits
   * there is no txn (ordo__rs_new_owner says why). */
  if (ordo__rs_new_owner(t->owner) != 0) {
    note_err(p, "owner", "getrandom(2) gave no random bits");
    free(t);
    return ORDO_EBACKEND;
  }
  uint64_t deadline = ordo__now_ns() + (uint64_t)p->u.timeout_ms * RD_MS;
  int rc = connect_node(p, &t->c, true, &t->epoch, deadline);
  if (rc == 0) {
    const char *av[1] = {"PING"};
    size_t al[1] = {4};
    rc = ordo__rs_append(&t->c, 1, av, al);
  }
  if (rc == 0) {
    ordo__rs_conn *k = &t->c;
    if (ordo__rs_run(&k, 1, deadline, NULL, NULL) == ORDO_ETIMEDOUT) {
      char msg[96];
      snprintf(msg, sizeof msg, "no reply within %ld ms (timeout_ms)",
               p->u.timeout_ms);
      note_err(p, "connect", msg);
      rc = ORDO_EBACKEND;
    } else if (!ordo__rs_open(&t->c)) {
      rc = t->c.err ? t->c.err : ORDO_EBACKEND;
      note_err(p, "connect", t->c.errstr);
    } else {
      redisReply *r = ordo__rs_take(&t->c, 0);
      ordo__rs_done(&t->c);
      if (!r || r->type == REDIS_REPLY_ERROR) {
        rc = r ? ordo__rs_err_code(r) : ORDO_EBACKEND;
        if (rc != ORDO_EAUTH)
          rc = ORDO_EBACKEND;
        note_err(p, "PING", r ? r->str : "no reply");
      }
      if (r)
        freeReplyObject(r);
    }
  } else {
    note_err(p, "connect", t->c.errstr);
  }
  if (rc) {
    ordo__rs_close(&t->c);
    free(t);
    return rc;
  }
  t->base.id = atomic_fetch_add(&p->next_id, 1);
  ordo__mutex_init(&t->mu);
  atomic_init(&t->lease_lost, false);
  atomic_init(&t->in_wait, false);
  atomic_init(&t->renewed_ns, ordo__now_ns());
  ordo__rn_link(&p->rn, &t->rn, &t->base, &t->mu);
  *out = &t->base;
  return 0;
}

static void rd_txn_end(ordo_txn_t *tx) {
  rd_txn *t = rt(tx);
  rd_place *p = rp(tx->o);
  ordo__rn_unlink(&p->rn, &t->rn);
  /* Waits out a renewal in progress; after it no other thread knows t. */
  ordo__mutex_lock(&t->mu);
  flush_orphans(p, t);
  if (t->nh > 0)
    release_all(p, t); /* bounded by timeout_ms; else the lease lapses */
  holds_clear(p, t);
  ordo__rs_close(&t->c);
  ordo__rs_close(&t->sub);
  for (size_t i = 0; i < t->norph; i++)
    free(t->orph[i].key);
  free(t->orph);
  free(t->h);
  ordo__mutex_unlock(&t->mu);
  ordo__mutex_destroy(&t->mu);
  free(t);
}

/* ---- Waiting ----------------------------------------------------------------
 * A request that finds a key held against it subscribes to the release
 * channel of each such key (on the txn's Pub/Sub connection, waiting for
 * the server's confirmation), then tries again at once (a release between
 * its first try and the subscription would otherwise go unheard), then
 * sleeps until a release message, its deadline, or the jittered fallback
 * poll, whichever comes first, and tries again. docs/backend-redis.md,
 * "Waiting".
 */

typedef struct rd_wait {
  bool *subbed;    /* per request key: its channel is subscribed */
  size_t nsubbed;  /* how many are */
  bool bare;       /* no Pub/Sub in this call: polling only */
  long poll_ms;    /* the fallback poll's current ceiling */
  bool started;    /* counted in waiting */
  uint64_t t0;     /* when it began to wait */
  char *chanbuf;   /* room for one channel name */
  const long *all; /* 1, 2, ..., n: every key of the request */
} rd_wait;

/* True when r is the Pub/Sub reply ["kind", ...]. */
static bool push_is(const redisReply *r, const char *kind) {
  return r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
         r->element[0]->type == REDIS_REPLY_STRING &&
         strcmp(r->element[0]->str, kind) == 0;
}

/* The Pub/Sub connection failed: keeps the text, closes it, polls. */
static void sub_broken(rd_place *p, rd_txn *t, rd_wait *w) {
  note_err(p, "Pub/Sub", t->sub.errstr[0] ? t->sub.errstr : "failed");
  ordo__rs_close(&t->sub);
  w->bare = true;
  w->nsubbed = 0;
  w->poll_ms = RD_POLL_BARE_FIRST_MS;
}

/*
 * subscribe_once -- SUBSCRIBE to the channels of busy[0..nb) not yet
 * subscribed, and the server's confirmation of each, awaited timeout_ms
 * and no later than the call's deadline. Returns how many it subscribed,
 * -1 when the connection failed (t->sub.errstr says how), -2 when the
 * call's deadline came first.
 */
static int subscribe_once(rd_place *p, rd_txn *t, rd_wait *w,
                          const ordo_req_t *r, size_t n, const long *busy,
                          size_t nb, uint64_t deadline_ns) {
  size_t want = 0;
  for (size_t i = 0; i < nb; i++) {
    size_t at = (size_t)(busy[i] - 1);
    if (at >= n || w->subbed[at])
      continue;
    memcpy(w->chanbuf, p->chan, p->chanlen);
    memcpy(w->chanbuf + p->chanlen, r[at].key, r[at].len);
    const char *av[2] = {"SUBSCRIBE", w->chanbuf};
    size_t al[2] = {9, p->chanlen + r[at].len};
    if (ordo__rs_append_loose(&t->sub, 2, av, al) != 0)
      return -1;
    w->subbed[at] = true;
    want++;
  }
  w->nsubbed += want;
  uint64_t deadline = ordo__now_ns() + (uint64_t)p->u.timeout_ms * RD_MS;
  bool cut = deadline_ns < deadline; /* the call's deadline comes first */
  deadline = cut ? deadline_ns : deadline;
  for (size_t left = want; left > 0;) {
    redisReply *m = NULL;
    int rc = ordo__rs_next(&t->sub, deadline, &m);
    if (rc == ORDO_ETIMEDOUT && cut)
      return -2;
    if (rc == ORDO_ETIMEDOUT) {
      snprintf(t->sub.errstr, sizeof t->sub.errstr,
               "SUBSCRIBE: no reply within %ld ms", p->u.timeout_ms);
      return -1;
    }
    if (rc != 0)
      return -1;
    if (push_is(m, "subscribe"))
      left--;
    freeReplyObject(m); /* a message now changes nothing: we try anyway */
  }
  return (int)want;
}

/*
 * subscribe -- subscribes to the release channels of the request's keys
 * listed in busy[0..nb) (1-based indexes) that are not subscribed yet, and
 * waits (timeout_ms, and no later than deadline_ns) for the server to
 * confirm each. A connection that was
 * open already and fails (the server's idle timeout closed it between two
 * waits, say) is opened again once, and everything subscribed anew.
 * Returns true when it subscribed anything (the caller then tries again at
 * once). Caller holds t->mu; the Pub/Sub connection is t's own thread's.
 */
static bool subscribe(rd_place *p, rd_txn *t, rd_wait *w, const ordo_req_t *r,
                      size_t n, const long *busy, size_t nb,
                      uint64_t deadline_ns) ORDO_REQUIRES(t->mu) {
  if (w->bare)
    return false;
  for (int attempt = 0;; attempt++) {
    bool fresh = !ordo__rs_open(&t->sub);
    uint64_t epoch;
    if (fresh && connect_node(p, &t->sub, false, &epoch, deadline_ns) != 0) {
      sub_broken(p, t, w);
      return false;
    }
    int rc = subscribe_once(p, t, w, r, n, busy, nb, deadline_ns);
    if (rc >= 0)
      return rc > 0;
    if (rc == -2) {
      /* Out of time, not broken: the call ends with one last try, and the
       * next wait starts on a new connection. */
      ordo__rs_close(&t->sub);
      w->nsubbed = 0;
      return false;
    }
    if (fresh || attempt > 0) {
      sub_broken(p, t, w);
      return false;
    }
    /* Everything that was subscribed went with the connection. */
    ordo__rs_close(&t->sub);
    memset(w->subbed, 0, n * sizeof *w->subbed);
    w->nsubbed = 0;
    busy = w->all;
    nb = n;
  }
}

/* Sleeps until deadline_ns on the CLOCK_MONOTONIC clock. */
static void sleep_until(uint64_t deadline_ns) {
  struct timespec ts = {(time_t)(deadline_ns / 1000000000u),
                        (long)(deadline_ns % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

/*
 * wait_release -- sleeps until a release message on a subscribed channel or
 * until_ns. Returns true when woken by a message (and reads whatever else
 * has arrived, so that a release of several keys costs one try). Caller
 * does NOT hold t->mu.
 */
static bool wait_release(rd_place *p, rd_txn *t, rd_wait *w, uint64_t until_ns)
    ORDO_EXCLUDES(t->mu) {
  if (w->bare || !ordo__rs_open(&t->sub)) {
    sleep_until(until_ns);
    return false;
  }
  bool woke = false;
  for (;;) {
    redisReply *m = NULL;
    int rc = ordo__rs_next(&t->sub, woke ? 0 : until_ns, &m);
    if (rc == ORDO_ETIMEDOUT)
      return woke;
    if (rc != 0) {
      sub_broken(p, t, w);
      return woke;
    }
    woke |= push_is(m, "message");
    freeReplyObject(m);
  }
}

/* Ends a wait: unsubscribes without waiting for the confirmations (the
 * next wait reads and ignores them), counts the time waited. */
static void wait_end(rd_place *p, rd_txn *t, rd_wait *w) {
  if (w->nsubbed > 0 && ordo__rs_open(&t->sub)) {
    const char *av[1] = {"UNSUBSCRIBE"};
    size_t al[1] = {11};
    if (ordo__rs_append_loose(&t->sub, 1, av, al) == 0) {
      redisReply *m = NULL;
      /* Flushes (the write does not wait); a reply already there is read
       * and dropped. */
      if (ordo__rs_next(&t->sub, 0, &m) == 0)
        freeReplyObject(m);
    } else {
      ordo__rs_close(&t->sub);
    }
  }
  if (w->started) {
    uint64_t us = (ordo__now_ns() - w->t0) / 1000u;
    atomic_fetch_sub(&p->waiting, 1);
    atomic_fetch_add(&p->wait_hist[ordo__hist_bucket(us)], 1);
    atomic_max(&p->max_wait_us, us);
  }
}

/* A draw from [ms/2, ms], in nanoseconds. */
static uint64_t jitter_ns(long ms) {
  uint64_t lo = (uint64_t)ms * RD_MS / 2;
  return lo + ordo__rand64() % (lo + 1);
}

/* ---- lock_all ------------------------------------------------------------ */

/*
 * record_grant -- enters an ACQUIRE grant ({1, lease, token...}) into t's
 * holds. copies[i] is a copy of r[i]'s key made before the script when t
 * did not hold it; used copies are set to NULL. Returns 0, or ORDO_EBACKEND
 * when the reply is not the documented one (nothing recorded). Caller
 * holds t->mu; t->h has room for n more.
 */
static int record_grant(rd_place *p, rd_txn *t, const ordo_req_t *r, size_t n,
                        const redisReply *rep, uint8_t **copies)
    ORDO_REQUIRES(t->mu) {
  if (rep->elements != 2 + n)
    return ORDO_EBACKEND;
  for (size_t i = 0; i < n + 1; i++)
    if (rep->element[1 + i]->type != REDIS_REPLY_INTEGER)
      return ORDO_EBACKEND;
  for (size_t i = 0; i < n; i++) {
    uint64_t token = (uint64_t)rep->element[2 + i]->integer;
    if (t->norph > 0)
      orphan_forget(t, r[i].key, r[i].len);
    long at = hold_find(t, r[i].key, r[i].len);
    if (at >= 0) {
      rd_hold *h = &t->h[at];
      h->count++;
      if (r[i].mode > h->mode)
        h->mode = r[i].mode;
      h->token = token;
      continue;
    }
    size_t ins = (size_t)(-at - 1);
    memmove(&t->h[ins + 1], &t->h[ins], (t->nh - ins) * sizeof *t->h);
    t->h[ins] = (rd_hold){copies[i], r[i].len, 1, r[i].mode, token};
    copies[i] = NULL;
    t->nh++;
    atomic_fetch_add(&p->keys, 1);
  }
  return 0;
}

/* An ACQUIRE's outcome is unknown: the keys it asked for that t did not
 * hold become orphans (copies[i] moves there). Room was made before.
 * Caller holds t->mu. */
static void adopt_orphans(rd_txn *t, const ordo_req_t *r, size_t n,
                          uint8_t **copies) ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < n; i++)
    if (copies[i]) {
      t->orph[t->norph++] = (rd_hold){copies[i], r[i].len, 0, r[i].mode, 0};
      copies[i] = NULL;
    }
}

/* What one ACQUIRE said. */
enum { TRY_GRANTED, TRY_BUSY, TRY_FAILED };

/*
 * try_acquire -- one ACQUIRE of the whole request. On TRY_BUSY, busy[0..*nb)
 * gets the 1-based indexes of the keys held against it and *wait_ms the
 * time until their holders' leases would run out. On TRY_FAILED, *rc says
 * why. Caller holds t->mu.
 */
static int try_acquire(rd_place *p, rd_txn *t, const ordo_req_t *r, size_t n,
                       const char **av, const size_t *al, uint8_t **copies,
                       long *busy, size_t *nb, long *wait_ms, int *rc)
    ORDO_REQUIRES(t->mu) {
  bool was_holding = t->nh > 0;
  uint64_t sent = ordo__now_ns();
  redisReply *rep = run_script(p, t, ORDO__RS_ACQUIRE, (int)(2 * n),
                               (int)(2 * n + 3), av, al, ORDO_NO_DEADLINE, rc);
  if (!rep) {
    adopt_orphans(t, r, n, copies);
    return TRY_FAILED;
  }
  int what = TRY_FAILED;
  if (rep->type == REDIS_REPLY_ERROR) {
    *rc = ordo__rs_err_code(rep);
    note_err(p, "ACQUIRE", rep->str);
  } else if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2 &&
             rep->element[0]->type == REDIS_REPLY_INTEGER &&
             rep->element[1]->type == REDIS_REPLY_INTEGER) {
    if (rep->element[0]->integer == 1) {
      *rc = record_grant(p, t, r, n, rep, copies);
      what = *rc == 0 ? TRY_GRANTED : TRY_FAILED;
    } else if (rep->elements > 2 && rep->elements - 2 <= n) {
      *wait_ms = (long)rep->element[1]->integer;
      *nb = 0;
      for (size_t i = 2; i < rep->elements; i++)
        if (rep->element[i]->type == REDIS_REPLY_INTEGER)
          busy[(*nb)++] = (long)rep->element[i]->integer;
      what = TRY_BUSY;
    } else {
      *rc = ORDO_EBACKEND;
    }
  } else {
    *rc = ORDO_EBACKEND;
  }
  if (what == TRY_FAILED && *rc == ORDO_EBACKEND &&
      rep->type != REDIS_REPLY_ERROR) {
    /* Whether anything was granted cannot be told: start afresh; what
     * may have been granted is released by the next call. */
    note_err(p, "ACQUIRE", "the reply is not the documented one");
    ordo__rs_close(&t->c);
    adopt_orphans(t, r, n, copies);
  }
  freeReplyObject(rep);
  if (what == TRY_GRANTED) {
    atomic_fetch_add(&p->acquired, 1);
    if (!was_holding) {
      atomic_store(&t->renewed_ns, sent);
      atomic_store(&t->rn.lease_end_ns, sent + p->lease_ns);
      atomic_store(&t->rn.due_ns, sent + p->lease_ns / 3);
      atomic_store(&t->rn.holding, true);
      ordo__rn_kick(&p->rn, sent + p->lease_ns / 3);
    }
  }
  return what;
}

/*
 * rd_lock_all -- takes the sorted, distinct keys r[0..n) by ACQUIRE, and
 * while some are held against it, waits (subscribed to their release
 * channels) and tries again, until deadline_ns (docs/backend-redis.md,
 * "Waiting"). Every allocation a grant needs is made before the first script,
 * so a grant is always recorded. Each exchange is bounded by timeout_ms, so a
 * call whose server has stopped answering returns ORDO_EBACKEND at most
 * timeout_ms after the exchange began.
 */
static int rd_lock_all(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                       uint64_t deadline_ns) {
  rd_txn *t = rt(tx);
  rd_place *p = rp(tx->o);
  size_t argc = 2 * n + 3, fence_bytes = 0, maxlen = 0;
  for (size_t i = 0; i < n; i++) {
    if (ordo__rs_key_reserved(r[i].key, r[i].len))
      return ORDO_EINVAL; /* the name of a fencing counter */
    fence_bytes += r[i].len + ORDO__RS_FENCE_EXTRA;
    maxlen = r[i].len > maxlen ? r[i].len : maxlen;
  }
  const char **av = malloc(argc * sizeof *av);
  size_t *al = malloc(argc * sizeof *al);
  uint8_t **copies = calloc(n, sizeof *copies);
  char *fences = malloc(fence_bytes);
  char *modes = malloc(n);
  long *busy = malloc(2 * n * sizeof *busy); /* busy, then 1..n */
  bool *subbed = calloc(n, sizeof *subbed);
  char *chanbuf = malloc(sizeof p->chan + maxlen);
  int rc = 0;
  rd_wait w = {.subbed = subbed,
               .poll_ms = RD_POLL_FIRST_MS,
               .chanbuf = chanbuf,
               .all = busy ? busy + n : NULL};
  if (!av || !al || !copies || !fences || !modes || !busy || !subbed ||
      !chanbuf) {
    rc = ORDO_ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++)
    busy[n + i] = (long)i + 1;
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false) || lose_if_over(p, t)) {
    rc = ORDO_ELEASE;
    goto unlock;
  }
  if ((rc = ordo__hold_room((void **)&t->h, &t->caph, t->nh, n,
                            sizeof *t->h)) != 0)
    goto unlock;
  if ((rc = ordo__hold_room((void **)&t->orph, &t->caporph, t->norph, n,
                            sizeof *t->orph)) != 0)
    goto unlock;
  flush_orphans(p, t);
  if ((rc = ordo__hold_copy_new(t->h, t->nh, sizeof *t->h, r, n, copies)) != 0)
    goto unlock;
  char lease[24];
  char *f = fences;
  for (size_t i = 0; i < n; i++) {
    av[2 * i] = r[i].key;
    al[2 * i] = r[i].len;
    size_t fl = ordo__rs_fence_key(r[i].key, r[i].len, f);
    av[2 * i + 1] = f;
    al[2 * i + 1] = fl;
    f += fl;
    modes[i] = r[i].mode == ORDO_MODE_S ? 'S' : 'X';
  }
  av[2 * n] = t->owner;
  al[2 * n] = 32;
  av[2 * n + 1] = lease;
  al[2 * n + 1] = (size_t)snprintf(lease, sizeof lease, "%ld", p->u.lease_ms);
  av[2 * n + 2] = modes;
  al[2 * n + 2] = n;
  for (;;) {
    size_t nb = 0;
    long wait_ms = 0;
    int what =
        try_acquire(p, t, r, n, av, al, copies, busy, &nb, &wait_ms, &rc);
    if (what != TRY_BUSY)
      break;
    uint64_t now = ordo__now_ns();
    if (now >= deadline_ns) {
      rc = ORDO_ETIMEDOUT;
      atomic_fetch_add(&p->timeouts, 1);
      break;
    }
    if (!w.started) {
      w.started = true;
      w.t0 = now;
      atomic_fetch_add(&p->waited, 1);
      atomic_fetch_add(&p->waiting, 1);
    }
    if (subscribe(p, t, &w, r, n, busy, nb, deadline_ns))
      continue; /* a release may have come before the subscription */
    /* The fallback: the jittered poll, or just after the holders' leases
     * would run out, if that is sooner; never past the deadline. */
    uint64_t until = now + jitter_ns(w.poll_ms);
    if (wait_ms > 0) {
      uint64_t lapse =
          now + (uint64_t)wait_ms * RD_MS + RD_MS +
          ordo__rand64() % ((uint64_t)wait_ms * RD_MS / 16 + RD_MS);
      until = lapse < until ? lapse : until;
    }
    until = deadline_ns < until ? deadline_ns : until;
    atomic_store(&t->in_wait, true);
    ordo__mutex_unlock(&t->mu);
    bool woke = wait_release(p, t, &w, until);
    ordo__mutex_lock(&t->mu);
    atomic_store(&t->in_wait, false);
    if (atomic_exchange(&t->lease_lost, false) || lose_if_over(p, t)) {
      /* The renewer found the lease lost meanwhile, or it ran out before
       * the renewer could look (the next try's exchange would be cut at
       * once). */
      rc = ORDO_ELEASE;
      break;
    }
    if (woke) {
      atomic_fetch_add(&p->wakeups, 1);
    } else if (ordo__now_ns() < deadline_ns) {
      atomic_fetch_add(&p->pokes, 1);
      long cap = w.bare ? RD_POLL_BARE_CAP_MS : RD_POLL_CAP_MS;
      w.poll_ms = w.poll_ms * 2 > cap ? cap : w.poll_ms * 2;
    }
  }
  wait_end(p, t, &w);
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
  free(busy);
  free(subbed);
  free(chanbuf);
  return rc;
}

/* ---- unlock, held -------------------------------------------------------- */

static int rd_unlock(ordo_txn_t *tx, const void *key, size_t len) {
  rd_txn *t = rt(tx);
  rd_place *p = rp(tx->o);
  int rc = 0;
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false) || lose_if_over(p, t)) {
    rc = ORDO_ELEASE;
    goto out;
  }
  flush_orphans(p, t);
  long at = hold_find(t, key, len);
  if (at < 0) {
    rc = ORDO_ENOTHELD; /* the record is in step: no need to ask */
    goto out;
  }
  if (t->h[at].count > 1) {
    t->h[at].count--; /* the server keeps one entry per owner */
    goto out;
  }
  const void *keys[1] = {key};
  size_t lens[1] = {len};
  int n = release_keys(p, t, keys, lens, 1);
  if (n < 0 && lose_if_over(p, t)) {
    /* The RELEASE was cut at the lease's end (or failed after it): by the
     * client's count the lease is gone, which is what the holder must
     * hear, whatever became of the script. */
    rc = ORDO_ELEASE;
  } else if (n == 1) {
    hold_remove(p, t, (size_t)at);
  } else if (n == 0) {
    /* Its lease had run out: another may have held it since. */
    hold_remove(p, t, (size_t)at);
    rc = ORDO_ELEASE;
  } else if (!ordo__rs_open(&t->c)) {
    /* Not known whether it was released: forget it; if it was not, its
     * lease lapses. */
    hold_remove(p, t, (size_t)at);
    rc = n;
  } else {
    rc = n; /* refused: still held */
  }
out:
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static int rd_unlock_all(ordo_txn_t *tx) {
  rd_txn *t = rt(tx);
  rd_place *p = rp(tx->o);
  int rc = 0;
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false) || lose_if_over(p, t)) {
    rc = ORDO_ELEASE;
    goto out;
  }
  flush_orphans(p, t);
  if (t->nh == 0)
    goto out;
  int n = release_all(p, t);
  if (n < 0 && lose_if_over(p, t))
    rc = ORDO_ELEASE; /* cut at the lease's end: as in rd_unlock */
  else if (n >= 0 && (size_t)n == t->nh)
    rc = n;
  else if (n >= 0)
    rc = ORDO_ELEASE; /* some had run out before the release */
  else
    rc = n;
  if (n >= 0 || !ordo__rs_open(&t->c))
    holds_clear(p, t);
out:
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static int rd_held(ordo_txn_t *tx, const void *key, size_t len,
                   ordo_mode_t *mode, uint64_t *fence) {
  rd_txn *t = rt(tx);
  ordo__mutex_lock(&t->mu);
  int count =
      ordo__hold_report(t->h, t->nh, sizeof *t->h, key, len, mode, fence);
  ordo__mutex_unlock(&t->mu);
  return count;
}

/* ---- Stats, dump, callback ----------------------------------------------- */

/* This place's own counters: Redis keeps none for ordo. */
static int rd_stats(ordo_t *o, ordo_stats_t *out) {
  rd_place *p = rp(o);
  memset(out, 0, sizeof *out);
  out->acquired = atomic_load(&p->acquired);
  out->waited = atomic_load(&p->waited);
  out->timeouts = atomic_load(&p->timeouts);
  out->released = atomic_load(&p->released);
  out->wakeups = atomic_load(&p->wakeups);
  out->pokes = atomic_load(&p->pokes);
  out->locks = atomic_load(&p->keys);
  out->waiting = atomic_load(&p->waiting);
  out->max_wait_us = atomic_load(&p->max_wait_us);
  for (int i = 0; i < ORDO_HIST_BUCKETS; i++)
    out->wait_hist[i] = atomic_load(&p->wait_hist[i]);
  return 0;
}

/*
 * rd_dump -- what this place knows: the URL (no password), the last error
 * (a CROSSSLOT or MOVED reply's text, say), and each txn's record. A txn
 * inside an exchange is named busy rather than waited for; a txn asleep in
 * a wait is shown with its holds. It asks the server nothing.
 */
static void rd_dump(ordo_t *o, int fd) {
  rd_place *p = rp(o);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return;
  fprintf(f,
          "%s: lease %ld ms, renewed at a third; timeout %ld ms; release "
          "channels %s<key>\n",
          o->url, p->u.lease_ms, p->u.timeout_ms, p->chan);
  if (p->rsn)
    ordo__rsn_dump(p->rsn, f);
  ordo__mutex_lock(&p->rn.mu);
  if (p->rn.err[0])
    fprintf(f, "last error: %s\n", p->rn.err);
  ordo__rn_txn *l;
  LIST_FOREACH(l, &p->rn.txns, link) {
    rd_txn *t = rt(l->txn);
    fprintf(f,
            "txn %llu%s%s%s (owner %.8s...):", (unsigned long long)t->base.id,
            t->base.name[0] ? " \"" : "", t->base.name,
            t->base.name[0] ? "\"" : "", t->owner);
    if (!ordo__mutex_trylock(&t->mu)) {
      fputs(" busy (inside an exchange with the server)\n", f);
      continue;
    }
    fprintf(f, " %s%s, holds %zu key(s)%s\n",
            ordo__rs_open(&t->c) ? "connected" : "not connected",
            atomic_load(&t->in_wait) ? ", waiting for a release" : "", t->nh,
            atomic_load(&t->lease_lost) ? ", LEASE LOST" : "");
    for (size_t i = 0; i < t->nh; i++) {
      fputs("  ", f);
      ordo__put_key(f, t->h[i].key, t->h[i].len);
      fprintf(f, " %s holds=%u token=%llu\n",
              t->h[i].mode == ORDO_MODE_S ? "S" : "X", t->h[i].count,
              (unsigned long long)t->h[i].token);
    }
    ordo__mutex_unlock(&t->mu);
  }
  ordo__mutex_unlock(&p->rn.mu);
  fprintf(f,
          "counters: acquired %llu, waited %llu, waiting %llu, timeouts "
          "%llu, woken by a release %llu, by the poll %llu\n",
          (unsigned long long)atomic_load(&p->acquired),
          (unsigned long long)atomic_load(&p->waited),
          (unsigned long long)atomic_load(&p->waiting),
          (unsigned long long)atomic_load(&p->timeouts),
          (unsigned long long)atomic_load(&p->wakeups),
          (unsigned long long)atomic_load(&p->pokes));
  fclose(f);
  ordo__write_all(fd, buf, len);
  free(buf);
}

static void rd_on_lease_lost(ordo_t *o, rd_lost_cb cb, void *arg) {
  rd_place *p = rp(o);
  ordo__rn_on_lost(&p->rn, cb, arg);
}

/* The vtable of both schemes: rd_open tells the URLs apart. No async
 * lock, no cancel, no detector: those are ORDO_ENOTSUP. */
// clang-format off
#define RD_BACKEND(name)                                                       \
  {                                                                            \
    .scheme = name,                                                            \
    .caps = ORDO_CAP_SHARED | ORDO_CAP_FENCE | ORDO_CAP_INCREMENTAL |          \
            ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE |                            \
            ORDO_CAP_WAIT_HOLDS_NOTHING,                                       \
    .open = rd_open,                                                           \
    .close = rd_close,                                                         \
    .txn_begin = rd_txn_begin,                                                 \
    .txn_end = rd_txn_end,                                                     \
    .lock_all = rd_lock_all,                                                   \
    .lock_all_async = NULL,                                                    \
    .unlock = rd_unlock,                                                       \
    .unlock_all = rd_unlock_all,                                               \
    .cancel = NULL,                                                            \
    .held = rd_held,                                                           \
    .stats = rd_stats,                                                         \
    .dump = rd_dump,                                                           \
    .graph = NULL,                                                             \
    .on_lease_lost = rd_on_lease_lost,                                         \
  }
// clang-format on

const ordo__backend ordo__backend_redis = RD_BACKEND("redis");

/* redis-sentinel://: the same place, its node the primary the sentinels
 * name (rsentinel.c). */
const ordo__backend ordo__backend_rsentinel = RD_BACKEND("redis-sentinel");
