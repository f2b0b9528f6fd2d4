/*
 * redlock.c -- the "redlock://" backend: locks on N independent Redis nodes,
 * granted when a majority of them grants. Every lock_all runs the ACQUIRE
 * script of redis_script.c on every node at once (one non-blocking hiredis
 * connection per node and txn, all driven by one poll(2) loop), and decides
 * as soon as a majority has answered either way. A grant is valid for
 * lease - elapsed - drift (drift = 1% of the lease + 2 ms); a failed try is
 * released on every node and tried again after a fully jittered sleep until
 * the acquisition timeout. A renewal thread extends every held key on every
 * node at a third of the lease; the lease is lost when a majority no longer
 * confirms. Fencing tokens are best effort: the greatest token among the
 * granting nodes (docs/backend-redlock.md says what that does not promise).
 *
 * URL:
 *   redlock://h1:p1,h2:p2,h3:p3[?lease_ms=N&timeout_ms=N&node_timeout_ms=N
 *             &mode=sequential][&tls=1&tls_ca=FILE&tls_cert=FILE&tls_key=FILE
 *             &tls_sni=NAME]
 * Each node takes the forms of redis:// ("[[user]:password@]host[:port]
 * [/db]"). timeout_ms is the acquisition timeout (10,000 ms by default);
 * node_timeout_ms bounds each exchange with the nodes (a two-hundredth of
 * the lease, within [50 ms, 250 ms], by default: much smaller than the
 * lease, as the Redlock algorithm asks);
 * mode=sequential (key by key, node by node) exists for the bench only.
 * tls=1 speaks TLS to every node (tls.c), each connect and handshake
 * bounded by node_timeout_ms; they are done one node after another, at a
 * txn's first exchange with each.
 *
 * Lock order: a txn's mu, then the place's mu (as in redis.c); the renewer
 * only tries a txn's mu.
 *
 * Interface: ordo__backend_redlock.
 */
#include "ordo_tsa.h"
#include "backend/redis_script.h"
#include "backend/remote.h"
#include "backend/renewer.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RL_DEFAULT_LEASE_MS 30000L
#define RL_DEFAULT_TIMEOUT_MS 10000L
#define RL_MAX_NODES 15
#define RL_MS 1000000u
#define RL_RETRY_BASE_MS 10
#define RL_RETRY_CAP_MS 200

/* ---- The URL ------------------------------------------------------------- */

typedef struct rl_url {
  ordo__rs_node node[RL_MAX_NODES];
  size_t n;
  long lease_ms;
  long timeout_ms;      /* acquisition timeout */
  long node_timeout_ms; /* each exchange's bound; 0: from the lease */
  bool sequential;
  ordo__tls_opts tls;
} rl_url;

static int parse_query(const char *q, rl_url *u) {
  while (*q) {
    size_t len = strcspn(q, "&");
    const char *eq = memchr(q, '=', len);
    if (!eq)
      return ORDO_EURL;
    size_t nlen = (size_t)(eq - q), vlen = len - nlen - 1;
    int rc;
    if (nlen == 8 && memcmp(q, "lease_ms", 8) == 0) {
      rc = ordo__parse_long(eq + 1, vlen, 10, 86400000L, &u->lease_ms);
    } else if (nlen == 10 && memcmp(q, "timeout_ms", 10) == 0) {
      rc = ordo__parse_long(eq + 1, vlen, 1, 3600000L, &u->timeout_ms);
    } else if (nlen == 15 && memcmp(q, "node_timeout_ms", 15) == 0) {
      rc = ordo__parse_long(eq + 1, vlen, 1, 3600000L, &u->node_timeout_ms);
    } else if (nlen == 4 && memcmp(q, "mode", 4) == 0) {
      rc = 0;
      if (vlen == 10 && memcmp(eq + 1, "sequential", 10) == 0)
        u->sequential = true;
      else if (vlen == 8 && memcmp(eq + 1, "parallel", 8) == 0)
        u->sequential = false;
      else
        rc = ORDO_EURL;
    } else if ((rc = ordo__tls_opt(&u->tls, q, nlen, eq + 1, vlen)) == 1) {
      rc = ORDO_EURL;
    }
    if (rc)
      return rc;
    q += len;
    if (*q == '&' && *++q == 0)
      return ORDO_EURL;
  }
  return 0;
}

static int rl_parse_url(const char *url, rl_url *u) {
  memset(u, 0, sizeof *u);
  u->lease_ms = RL_DEFAULT_LEASE_MS;
  u->timeout_ms = RL_DEFAULT_TIMEOUT_MS;
  if (strncmp(url, "redlock://", 10) != 0)
    return ORDO_EURL;
  const char *rest = url + 10;
  size_t alen = strcspn(rest, "?");
  const char *s = rest, *end = rest + alen;
  while (s <= end) {
    size_t len = strcspn(s, ",?");
    if (s + len > end)
      len = (size_t)(end - s);
    if (len == 0 || u->n == RL_MAX_NODES)
      return ORDO_EURL;
    ordo__rs_node *nd = &u->node[u->n++];
    int rc = ordo__rs_parse_node(s, len, nd);
    if (rc)
      return rc;
    if (nd->unix_sock && !nd->db_set)
      nd->db = 0;
    /* One server named twice (even with two databases) would count twice
     * toward a majority that it alone then decides. Two names of one host
     * are not caught. */
    for (size_t j = 0; j + 1 < u->n; j++) {
      const ordo__rs_node *o = &u->node[j];
      if (o->unix_sock == nd->unix_sock &&
          (nd->unix_sock
               ? strcmp(o->path, nd->path) == 0
               : o->port == nd->port && strcmp(o->host, nd->host) == 0))
        return ORDO_EURL;
    }
    s += len + 1;
  }
  if (rest[alen] == '?') {
    if (rest[alen + 1] == 0)
      return ORDO_EURL;
    int rc = parse_query(rest + alen + 1, u);
    if (rc)
      return rc;
  }
  return 0;
}

/* ---- Places and txns ----------------------------------------------------- */

typedef ordo__hold rl_hold; /* remote.h */

typedef struct rl_txn rl_txn;
typedef void (*rl_lost_cb)(ordo_txn_t *t, void *arg);

typedef struct rl_place {
  struct ordo_s base;
  rl_url u;
  ordo__tls_client *tls; /* tls=1: the context, made at open */
  size_t quorum;         /* n / 2 + 1 */
  char chan[32];
  size_t chanlen;
  uint64_t lease_ns, drift_ns, io_ns;
  _Atomic uint64_t next_id;
  _Atomic uint64_t acquired, waited, timeouts, released, keys, retries;
  /* Calls between their first failed try and their end: ordo_stats's
   * waiting, the "this txn is now blocked" event tests wait for. */
  _Atomic uint64_t waiting;
  /* The renewal thread, the txn list and the last failure's text, all
   * under rn.mu (renewer.h). Lock order: a txn's mu, then rn.mu. */
  ordo__renewer rn;
  /* ids_mu guards run_id: each node's run_id (INFO server) as first seen
   * on a fresh connection, "" until then. A leaf: nothing is taken under
   * it. out_until[i] (atomic): node i is left out of every decision until
   * then, one lease after it was seen restarted (a new run_id). */
  ordo__mutex ids_mu;
  char run_id[RL_MAX_NODES][41] ORDO_GUARDED_BY(ids_mu);
  _Atomic uint64_t out_until[RL_MAX_NODES];
} rl_place;

struct rl_txn {
  struct ordo_txn_s base;
  /* The place's list and renewal state: links under the place's rn.mu,
   * rn.holding and rn.due_ns written under mu. */
  ordo__rn_txn rn;
  /* mu guards the connections (c, loaded, node_err) and the hold record
   * (h, nh, caph). The txn's own thread holds it through each call except
   * while lock_all sleeps between tries; the renewer and ordo_dump only
   * try it. Every helper that touches these requires it (ordo_tsa.h). */
  ordo__mutex mu;
  ordo__rs_conn c[RL_MAX_NODES] ORDO_GUARDED_BY(mu);
  /* The scripts were loaded on c[i]. */
  bool loaded[RL_MAX_NODES] ORDO_GUARDED_BY(mu);
  /* c[i] is fresh: its first reply is INFO server, whose run_id is still
   * to be compared (check_run_id). */
  bool id_pending[RL_MAX_NODES] ORDO_GUARDED_BY(mu);
  /* Why c[i] failed in the last exchange (ORDO_EAUTH: its password was
   * refused), 0 when it did not. */
  int node_err[RL_MAX_NODES] ORDO_GUARDED_BY(mu);
  rl_hold *h ORDO_GUARDED_BY(mu);
  size_t nh ORDO_GUARDED_BY(mu), caph ORDO_GUARDED_BY(mu);
  char owner[33]; /* read-only after begin */
  /* Written under mu, read by the renewer without it: atomics, which the
   * analysis does not check. */
  _Atomic bool lease_lost;
  _Atomic uint64_t renewed_ns;
};

static rl_txn *rt(ordo_txn_t *t) {
  return (rl_txn *)t;
}
static rl_place *rp(ordo_t *o) {
  return (rl_place *)o;
}

/* Keeps the text of the latest failure, for ordo_dump. Takes rn.mu. */
static void note_err(rl_place *p, const char *what, const char *detail)
    ORDO_EXCLUDES(p->rn.mu) {
  ordo__rn_note(&p->rn, what, detail);
}

/* ---- The hold record (caller holds t->mu) -------------------------------- */

static long hold_find(const rl_txn *t, const void *key, size_t len)
    ORDO_REQUIRES(t->mu) {
  return ordo__hold_find(t->h, t->nh, sizeof *t->h, key, len);
}

static void hold_remove(rl_place *p, rl_txn *t, size_t i) ORDO_REQUIRES(t->mu) {
  free(t->h[i].key);
  memmove(&t->h[i], &t->h[i + 1], (t->nh - i - 1) * sizeof *t->h);
  t->nh--;
  atomic_fetch_sub(&p->keys, 1);
  atomic_store(&t->rn.holding, t->nh > 0);
}

static void holds_clear(rl_place *p, rl_txn *t) ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < t->nh; i++)
    free(t->h[i].key);
  atomic_fetch_sub(&p->keys, t->nh);
  t->nh = 0;
  atomic_store(&t->rn.holding, false);
}

/* ---- Exchanges on every node at once (caller holds t->mu) ----------------
 * A fresh connection loads the three scripts first (SCRIPT LOAD, in the
 * same round trip), so EVALSHA finds them; a NOSCRIPT later (SCRIPT FLUSH,
 * a failover) sends the script's text with EVAL on that node, within the
 * same exchange's deadline, which runs it and loads it again: counting a
 * NOSCRIPT as "did not answer" made an unlock inside the validity succeed
 * while the keys stayed locked for the whole lease.
 */

enum { EX_ALL, EX_ACQUIRE, EX_FLUSHED };

typedef struct rl_ex {
  rl_place *p;
  rl_txn *t;
  int kind;
  int which;
  long m; /* RELEASE: the count that confirms every key */
  size_t n, q;
} rl_ex;

/*
 * check_run_id -- node i's run_id from an INFO server reply r. A run_id
 * that differs from the one seen before means the node restarted, and a
 * node without persistence comes back empty: a lock it had granted is
 * gone there, and with its vote another owner could take a majority. So it
 * is left out of every decision for one lease, after which every lock it
 * had granted has lapsed everywhere (the delayed restart of the Redlock
 * algorithm, done by the client).
 */
static void check_run_id(rl_place *p, size_t i, const redisReply *r)
    ORDO_EXCLUDES(p->ids_mu) {
  if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS))
    return;
  const char *s = strstr(r->str, "run_id:");
  if (!s)
    return;
  s += 7;
  char id[41];
  size_t n = 0;
  while (n < 40 &&
         ((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
    n++;
  memcpy(id, s, n);
  id[n] = 0;
  bool restarted = false;
  ordo__mutex_lock(&p->ids_mu);
  if (p->run_id[i][0] && strcmp(p->run_id[i], id) != 0) {
    atomic_store(&p->out_until[i], ordo__now_ns() + p->lease_ns);
    restarted = true;
  }
  memcpy(p->run_id[i], id, n + 1);
  ordo__mutex_unlock(&p->ids_mu);
  if (restarted) {
    char what[80];
    const ordo__rs_node *nd = &p->u.node[i];
    if (nd->unix_sock)
      snprintf(what, sizeof what, "node %.60s", nd->path);
    else
      snprintf(what, sizeof what, "node %.60s:%d", nd->host, nd->port);
    note_err(p, what, "restarted (its run_id changed): left out for a lease");
  }
}

/* Node i is left out of decisions now (check_run_id). */
static bool node_out(rl_place *p, size_t i) {
  return ordo__now_ns() < atomic_load(&p->out_until[i]);
}

/* The run_id of a fresh connection k to node i, once its INFO reply is
 * there. Caller holds t->mu. */
static void take_run_id(rl_place *p, rl_txn *t, size_t i) ORDO_REQUIRES(t->mu) {
  ordo__rs_conn *k = &t->c[i];
  if (!t->id_pending[i] || !ordo__rs_open(k))
    return;
  if (k->first) {
    /* It came after its exchange was decided (ordo__rs_conn's first). */
    t->id_pending[i] = false;
    check_run_id(p, i, k->first);
    freeReplyObject(k->first);
    k->first = NULL;
  } else if (k->want > 0 && k->got >= 1 && !k->keep_first) {
    t->id_pending[i] = false;
    check_run_id(p, i, k->rep[0]);
  }
}

/* Does the last reply of k grant (ACQUIRE) or confirm (EXTEND: no key
 * lost; RELEASE: any integer)? */
static bool reply_ok(const redisReply *r, int which) {
  if (!r)
    return false;
  if (which == ORDO__RS_ACQUIRE)
    return r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
           r->element[0]->type == REDIS_REPLY_INTEGER &&
           r->element[0]->integer == 1;
  if (which == ORDO__RS_EXTEND)
    return r->type == REDIS_REPLY_ARRAY && r->elements == 1;
  return r->type == REDIS_REPLY_INTEGER;
}

/* The enough predicate: ACQUIRE decides once a majority granted or more
 * than n - q cannot grant; RELEASE and EXTEND once a majority confirmed
 * and every command is written (the late nodes still run it). */
static bool ex_enough(void *arg) {
  rl_ex *e = arg;
  size_t ok = 0, no = 0;
  bool flushed = true;
  for (size_t i = 0; i < e->n; i++) {
    const ordo__rs_conn *k = &e->t->c[i];
    ordo__mutex_assert_held(&e->t->mu); /* the exchange's caller holds it */
    take_run_id(e->p, e->t, i);
    if (node_out(e->p, i)) {
      no++; /* restarted a lease ago at most: it cannot vote */
    } else if (!ordo__rs_open(k)) {
      no++;
    } else if (k->got == k->want && k->want > 0) {
      const redisReply *x = k->rep[k->want - 1];
      if (x && x->type == REDIS_REPLY_ERROR &&
          strncmp(x->str, "NOSCRIPT", 8) == 0) {
        flushed = false; /* not an answer yet: its EVAL follows */
        continue;
      }
      bool g = e->which == ORDO__RS_RELEASE
                   ? x && x->type == REDIS_REPLY_INTEGER && x->integer == e->m
                   : reply_ok(x, e->which);
      if (g)
        ok++;
      else
        no++;
    } else if (!k->flushed || k->connecting) {
      flushed = false;
    }
  }
  if (e->kind == EX_ACQUIRE)
    return ok >= e->q || no > e->n - e->q;
  return ok >= e->q && flushed;
}

/* The replies a node's connection may owe from earlier exchanges before it
 * is closed: a node that answers nothing (stopped, or black-holed: the
 * connection accepted, nothing read) would otherwise keep the connection
 * for ever, its replies owed and hiredis's output buffer growing with
 * every exchange (issue 18, item 16). A slow node's late replies pay the
 * count back as they come. */
#define RL_MAX_OWED 8

/* Names node i for a message. */
static void node_name(const rl_place *p, size_t i, char *what, size_t cap) {
  const ordo__rs_node *nd = &p->u.node[i];
  if (nd->unix_sock)
    snprintf(what, cap, "node %.60s", nd->path);
  else
    snprintf(what, cap, "node %.60s:%d", nd->host, nd->port);
}

/*
 * qe_prepare -- the first half of quorum_eval: on every node, connects
 * (closed connections, and one that owes more than RL_MAX_OWED replies),
 * loads the scripts on a fresh connection, and appends script which.
 * base[i] gets how many replies come before the script's.
 */
static void qe_prepare(rl_place *p, rl_txn *t, int which, int nkeys, int argc,
                       const char **av, const size_t *al, unsigned *base)
    ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < p->u.n; i++) {
    base[i] = 0;
    ordo__rs_conn *k = &t->c[i];
    if (ordo__rs_open(k) && k->skip > RL_MAX_OWED) {
      char what[80];
      node_name(p, i, what, sizeof what);
      note_err(p, what, "no reply to the last exchanges: connection closed");
      ordo__rs_close(k);
    }
    if (!ordo__rs_open(k)) {
      t->loaded[i] = false;
      if (ordo__rs_connect(k, &p->u.node[i], true) != 0)
        continue;
    }
    if (!t->loaded[i]) {
      /* A fresh connection: its node's run_id first (check_run_id), then
       * the scripts. */
      const char *ia[2] = {"INFO", "server"};
      size_t il[2] = {4, 6};
      t->id_pending[i] = ordo__rs_append(k, 2, ia, il) == 0;
      k->keep_first = t->id_pending[i];
      base[i] = t->id_pending[i] ? 1 : 0;
      for (int s = 0; s < ORDO__RS_NSCRIPTS; s++) {
        const char *la[3] = {"SCRIPT", "LOAD", ordo__rs_script_text(s)};
        size_t ll[3] = {6, 4, strlen(la[2])};
        if (ordo__rs_append(k, 3, la, ll) != 0)
          break;
        base[i]++;
      }
      t->loaded[i] = true;
    }
    if (ordo__rs_open(k))
      ordo__rs_append_script(k, which, nkeys, argc, av, al);
  }
}

/*
 * qe_collect -- the second half of quorum_eval, after the run: out[i] gets
 * node i's reply or NULL; a node that answered NOSCRIPT is sent the text
 * (EVAL) and waited for until deadline_ns.
 */
static void qe_collect(rl_place *p, rl_txn *t, int which, int nkeys, int argc,
                       const char **av, const size_t *al, uint64_t deadline_ns,
                       const unsigned *base, redisReply **out)
    ORDO_REQUIRES(t->mu) {
  size_t n = p->u.n;
  bool again[RL_MAX_NODES] = {0}, any = false;
  for (size_t i = 0; i < n; i++) {
    ordo__rs_conn *k = &t->c[i];
    out[i] = NULL;
    t->node_err[i] = 0;
    take_run_id(p, t, i);
    if (!ordo__rs_open(k)) {
      t->loaded[i] = false;
      if (k->err) {
        char what[80];
        t->node_err[i] = k->err;
        node_name(p, i, what, sizeof what);
        note_err(p, what, k->errstr);
      }
      continue;
    }
    if (k->got == k->want && k->want == base[i] + 1) {
      redisReply *r = ordo__rs_take(k, base[i]);
      if (r && r->type == REDIS_REPLY_ERROR &&
          strncmp(r->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(r);
        ordo__rs_done(k);
        again[i] = ordo__rs_append_eval(k, which, nkeys, argc, av, al) == 0;
        any |= again[i];
        continue;
      }
      out[i] = r;
    }
    ordo__rs_done(k);
  }
  /* A node restarted a lease ago at most has not answered, as far as any
   * decision goes (its script ran all the same: an undo goes there too). */
  for (size_t i = 0; i < n; i++)
    if (out[i] && node_out(p, i)) {
      freeReplyObject(out[i]);
      out[i] = NULL;
    }
  if (!any)
    return;
  /* The nodes that had lost the script run its text; the others are not
   * waited for again (NULL entries are passed over). */
  ordo__rs_conn *ks2[RL_MAX_NODES] = {0};
  for (size_t i = 0; i < n; i++)
    ks2[i] = again[i] ? &t->c[i] : NULL;
  ordo__rs_run(ks2, n, deadline_ns, NULL, NULL);
  for (size_t i = 0; i < n; i++) {
    ordo__rs_conn *k = &t->c[i];
    if (!again[i])
      continue;
    if (!ordo__rs_open(k)) {
      t->loaded[i] = false;
      continue;
    }
    if (k->got == k->want && k->want == 1)
      out[i] = ordo__rs_take(k, 0);
    ordo__rs_done(k);
  }
}

/*
 * quorum_eval -- script which on every node, bounded by deadline_ns; out[i]
 * gets node i's reply (the caller frees it) or NULL (failed, or not yet
 * answered when the decision came). kind says when to stop early.
 */
static int quorum_eval(rl_place *p, rl_txn *t, int which, int nkeys, int argc,
                       const char **av, const size_t *al, uint64_t deadline_ns,
                       int kind, redisReply **out) ORDO_REQUIRES(t->mu) {
  size_t n = p->u.n;
  ordo__rs_conn *ks[RL_MAX_NODES] = {0};
  unsigned base[RL_MAX_NODES];
  qe_prepare(p, t, which, nkeys, argc, av, al, base);
  for (size_t i = 0; i < n; i++)
    ks[i] = &t->c[i];
  rl_ex e = {p, t,        kind, which, which == ORDO__RS_RELEASE ? nkeys : 0,
             n, p->quorum};
  ordo__rs_run(ks, n, deadline_ns, kind == EX_ALL ? NULL : ex_enough, &e);
  qe_collect(p, t, which, nkeys, argc, av, al, deadline_ns, base, out);
  return 0;
}

/* The enough predicate of quorum_send: every command is written. */
static bool all_written(void *arg) {
  rl_ex *e = arg;
  for (size_t i = 0; i < e->n; i++) {
    const ordo__rs_conn *k = &e->t->c[i];
    if (ordo__rs_open(k) && (!k->flushed || k->connecting))
      return false;
  }
  return true;
}

/*
 * quorum_send -- script which on the nodes in mask that are connected,
 * without waiting for any reply: the commands are written (bounded by one
 * exchange's time when a socket's buffer is full) and their replies are
 * thrown away when they come, before the next exchange's. The undo of a
 * failed try uses it: it needs no answer (a node that never granted
 * replies 0, a stopped node none at all), and waiting for a majority of
 * confirmations held a try with timeout 0 for the whole exchange bound.
 * With text, the script goes as EVAL (its text) rather than EVALSHA.
 */
static void quorum_send(rl_place *p, rl_txn *t, int which, int nkeys, int argc,
                        const char **av, const size_t *al, const bool *mask,
                        bool text) ORDO_REQUIRES(t->mu) {
  size_t n = p->u.n;
  ordo__rs_conn *ks[RL_MAX_NODES] = {0};
  bool any = false;
  for (size_t i = 0; i < n; i++) {
    ordo__rs_conn *k = &t->c[i];
    if (!mask[i] || !ordo__rs_open(k) || k->connecting)
      continue; /* a node not connected cannot have granted this try */
    if ((text ? ordo__rs_append_eval(k, which, nkeys, argc, av, al)
              : ordo__rs_append_script(k, which, nkeys, argc, av, al)) == 0) {
      ks[i] = k;
      any = true;
    }
  }
  if (!any)
    return;
  rl_ex e = {p, t, EX_ALL, which, 0, n, p->quorum};
  ordo__rs_run(ks, n, ordo__now_ns() + p->io_ns, all_written, &e);
  for (size_t i = 0; i < n; i++)
    if (ks[i] && ordo__rs_open(ks[i]))
      ordo__rs_done(ks[i]);
}

static void free_replies(redisReply **r, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (r[i]) {
      freeReplyObject(r[i]);
      r[i] = NULL;
    }
}

/* RELEASE of keys[0..m) on every node. *confirmed gets how many nodes
 * answered with every key still ours, *answered how many answered. */
static void release_keys(rl_place *p, rl_txn *t, const void *const *keys,
                         const size_t *lens, size_t m, size_t *confirmed,
                         size_t *answered) ORDO_REQUIRES(t->mu) {
  *confirmed = *answered = 0;
  if (m == 0)
    return;
  const char **av = malloc((m + 2) * sizeof *av);
  size_t *al = malloc((m + 2) * sizeof *al);
  if (!av || !al) {
    free(av);
    free(al);
    return;
  }
  for (size_t i = 0; i < m; i++) {
    av[i] = keys[i];
    al[i] = lens[i];
  }
  av[m] = t->owner;
  al[m] = 32;
  av[m + 1] = p->chan;
  al[m + 1] = p->chanlen;
  redisReply *out[RL_MAX_NODES];
  quorum_eval(p, t, ORDO__RS_RELEASE, (int)m, (int)m + 2, av, al,
              ordo__now_ns() + p->io_ns, EX_FLUSHED, out);
  for (size_t i = 0; i < p->u.n; i++) {
    if (out[i] && out[i]->type == REDIS_REPLY_INTEGER) {
      (*answered)++;
      if ((size_t)out[i]->integer == m)
        (*confirmed)++;
    }
  }
  free_replies(out, p->u.n);
  free(av);
  free(al);
}

static void release_all(rl_place *p, rl_txn *t, size_t *confirmed,
                        size_t *answered) ORDO_REQUIRES(t->mu) {
  size_t m = t->nh ? t->nh : 1;
  const void **keys = malloc(m * sizeof *keys);
  size_t *lens = malloc(m * sizeof *lens);
  *confirmed = *answered = 0;
  if (keys && lens) {
    for (size_t i = 0; i < t->nh; i++) {
      keys[i] = t->h[t->nh - 1 - i].key;
      lens[i] = t->h[t->nh - 1 - i].len;
    }
    release_keys(p, t, keys, lens, t->nh, confirmed, answered);
  }
  free(keys);
  free(lens);
}

/*
 * release_status -- what a RELEASE that c nodes confirmed (every key still
 * ours) and a nodes answered says of the holds just let go, judged by the
 * renewal's rule: they were lost only when more than n - q nodes answered
 * that some key was no longer ours (another owner could have had a
 * majority), or when the validity of the last majority grant or renewal
 * had run out. Within the validity, nodes that did not answer (dead or cut
 * off) cannot have granted the keys to anyone else, so the release counts:
 * after two of five nodes die mid-hold, the keys may be confirmed on two
 * of the three left and were still safely held. Past the validity: ELEASE
 * when a majority answered, EQUORUM when it did not. Caller holds t->mu,
 * before the record is cleared.
 */
static int release_status(rl_place *p, rl_txn *t, size_t c, size_t a)
    ORDO_REQUIRES(t->mu) {
  if (c >= p->quorum)
    return 0;
  if (a - c > p->u.n - p->quorum)
    return ORDO_ELEASE;
  uint64_t valid_to = atomic_load(&t->renewed_ns) + p->lease_ns - p->drift_ns;
  if (ordo__now_ns() < valid_to)
    return 0;
  return a >= p->quorum ? ORDO_ELEASE : ORDO_EQUORUM;
}

/* ---- Lease renewal (as in redis.c) ------------------------------------------
 */

/* t's lease is lost: releases what may still be t's, forgets every hold
 * and marks t so its next call returns ORDO_ELEASE. Caller holds t->mu. */
static void lose(rl_place *p, rl_txn *t, const char *why) ORDO_REQUIRES(t->mu) {
  char msg[256];
  snprintf(msg, sizeof msg, "txn %llu: %s", (unsigned long long)t->base.id,
           why);
  note_err(p, "lease lost", msg);
  /* The release is written to every node without waiting for a reply:
   * the renewal thread waits for no node when it finds a lease lost (the
   * nodes may be the ones that stopped); what is not released lapses. */
  const char **av = malloc((t->nh + 2) * sizeof *av);
  size_t *al = malloc((t->nh + 2) * sizeof *al);
  if (t->nh > 0 && av && al) {
    bool all[RL_MAX_NODES];
    for (size_t i = 0; i < p->u.n; i++)
      all[i] = true;
    for (size_t i = 0; i < t->nh; i++) {
      av[i] = (const char *)t->h[i].key;
      al[i] = t->h[i].len;
    }
    av[t->nh] = t->owner;
    al[t->nh] = 32;
    av[t->nh + 1] = p->chan;
    al[t->nh + 1] = p->chanlen;
    quorum_send(p, t, ORDO__RS_RELEASE, (int)t->nh, (int)t->nh + 2, av, al, all,
                false);
  }
  free(av);
  free(al);
  holds_clear(p, t);
  atomic_store(&t->rn.lease_end_ns, 0);
  atomic_store(&t->lease_lost, true);
}

static bool rl_outcome(rl_place *p, rl_txn *t, size_t ok, size_t denied,
                       uint64_t sent, uint64_t lease_end) ORDO_REQUIRES(t->mu);

/*
 * rl_renew -- EXTEND of every hold on every node. Renewed when a majority
 * confirms every key; lost when more than n - q nodes say some key is no
 * longer ours, or when the lease (less the drift) ran out before a
 * majority confirmed; otherwise tried again a tenth of a lease later.
 */
static bool rl_renew(void *place, ordo_txn_t *tx) {
  rl_place *p = place;
  rl_txn *t = rt(tx);
  ordo__mutex_assert_held(&t->mu); /* renewer.c's pass took it */
  if (t->nh == 0)
    return false;
  size_t m = t->nh;
  const char **av = malloc((m + 2) * sizeof *av);
  size_t *al = malloc((m + 2) * sizeof *al);
  uint64_t sent = ordo__now_ns();
  uint64_t lease_end = atomic_load(&t->renewed_ns) + p->lease_ns - p->drift_ns;
  size_t ok = 0, denied = 0;
  if (av && al) {
    for (size_t i = 0; i < m; i++) {
      av[i] = (const char *)t->h[i].key;
      al[i] = t->h[i].len;
    }
    char lease[24];
    av[m] = t->owner;
    al[m] = 32;
    av[m + 1] = lease;
    al[m + 1] = (size_t)snprintf(lease, sizeof lease, "%ld", p->u.lease_ms);
    redisReply *out[RL_MAX_NODES];
    uint64_t dl = sent + p->io_ns < lease_end ? sent + p->io_ns : lease_end;
    quorum_eval(p, t, ORDO__RS_EXTEND, (int)m, (int)m + 2, av, al, dl,
                EX_FLUSHED, out);
    for (size_t i = 0; i < p->u.n; i++) {
      if (reply_ok(out[i], ORDO__RS_EXTEND))
        ok++;
      else if (out[i] && out[i]->type == REDIS_REPLY_ARRAY)
        denied++;
    }
    free_replies(out, p->u.n);
  }
  free(av);
  free(al);
  return rl_outcome(p, t, ok, denied, sent, lease_end);
}

/*
 * rl_outcome -- what a renewal of t sent at sent said: ok nodes confirmed
 * every key, denied said some key was no longer ours. Renewed when a
 * majority confirmed in time; lost when more than n - q denied, or when
 * the lease (less the drift, lease_end) runs out before the next try;
 * otherwise tried again a tenth of a lease later. Returns true when lost.
 */
static bool rl_outcome(rl_place *p, rl_txn *t, size_t ok, size_t denied,
                       uint64_t sent, uint64_t lease_end) ORDO_REQUIRES(t->mu) {
  uint64_t now = ordo__now_ns();
  if (ok >= p->quorum && now < sent + p->lease_ns - p->drift_ns) {
    atomic_store(&t->renewed_ns, sent);
    atomic_store(&t->rn.lease_end_ns, sent + p->lease_ns - p->drift_ns);
    atomic_store(&t->rn.due_ns, sent + p->lease_ns / 3);
    return false;
  }
  if (denied > p->u.n - p->quorum) {
    lose(p, t, "a majority of the nodes no longer holds the keys for it");
    return true;
  }
  uint64_t again = now + p->lease_ns / 10;
  if (again + p->lease_ns / 10 >= lease_end) {
    lose(p, t, "no majority confirmed the renewal before the lease ran out");
    return true;
  }
  atomic_store(&t->rn.due_ns, again);
  return false;
}

/* One txn's part in a batch of renewals (rl_renew_many). */
typedef struct rl_rn {
  rl_txn *t;
  const char **av; /* the keys, the owner, the lease; NULL: not renewed */
  size_t *al;
  uint64_t sent, lease_end;
  unsigned base[RL_MAX_NODES];
} rl_rn;

typedef struct rl_many {
  rl_place *p;
  rl_rn *m;
  size_t n;
} rl_many;

/* The enough predicate of a batch: every txn's EXTEND is decided (as
 * quorum_eval's EX_FLUSHED decides one). */
static bool many_enough(void *arg) {
  rl_many *e = arg;
  for (size_t j = 0; j < e->n; j++) {
    if (!e->m[j].av)
      continue;
    rl_ex x = {e->p, e->m[j].t, EX_FLUSHED,  ORDO__RS_EXTEND,
               0,    e->p->u.n, e->p->quorum};
    if (!ex_enough(&x))
      return false;
  }
  return true;
}

/*
 * rl_renew_many -- the EXTENDs of ts[0..n) on every node, all at once (the
 * renew_many hook of renewer.h): every txn's connections to every node in
 * one ordo__rs_run, ended when each txn's renewal is decided, at the
 * per-node timeout, at until, or at the earliest lease end among them
 * (then lost without waiting for the nodes any longer). Each txn's outcome
 * is rl_renew's (rl_outcome). Caller holds each txn's mu.
 */
static void rl_renew_many(void *place, ordo_txn_t *const *ts, size_t n,
                          uint64_t until, bool *lostv) {
  rl_place *p = place;
  size_t nn = p->u.n;
  rl_rn *m = calloc(n, sizeof *m);
  ordo__rs_conn **ks = calloc(n * nn, sizeof *ks);
  if (!m || !ks) {
    free(m);
    free(ks);
    for (size_t i = 0; i < n; i++)
      lostv[i] = rl_renew(p, ts[i]);
    return;
  }
  char lease[24];
  size_t ll = (size_t)snprintf(lease, sizeof lease, "%ld", p->u.lease_ms);
  uint64_t now = ordo__now_ns(), dl = now + p->io_ns;
  dl = until < dl ? until : dl;
  for (size_t i = 0; i < n; i++) {
    rl_txn *t = rt(ts[i]);
    ordo__mutex_assert_held(&t->mu); /* renewer.c's pass took it */
    lostv[i] = false;
    m[i].t = t;
    if (t->nh == 0)
      continue;
    m[i].sent = now;
    m[i].lease_end = atomic_load(&t->renewed_ns) + p->lease_ns - p->drift_ns;
    const char **av = malloc((t->nh + 2) * sizeof *av);
    size_t *al = malloc((t->nh + 2) * sizeof *al);
    if (!av || !al) {
      free(av);
      free(al);
      continue; /* not renewed now: tried again (rl_outcome) */
    }
    for (size_t j = 0; j < t->nh; j++) {
      av[j] = (const char *)t->h[j].key;
      al[j] = t->h[j].len;
    }
    av[t->nh] = t->owner;
    al[t->nh] = 32;
    av[t->nh + 1] = lease;
    al[t->nh + 1] = ll;
    m[i].av = av;
    m[i].al = al;
    if (m[i].lease_end < dl)
      dl = m[i].lease_end;
    qe_prepare(p, t, ORDO__RS_EXTEND, (int)t->nh, (int)t->nh + 2, av, al,
               m[i].base);
    for (size_t j = 0; j < nn; j++)
      ks[i * nn + j] = &t->c[j];
  }
  rl_many e = {p, m, n};
  ordo__rs_run(ks, n * nn, dl, many_enough, &e);
  for (size_t i = 0; i < n; i++) {
    rl_txn *t = m[i].t;
    ordo__mutex_assert_held(&t->mu); /* renewer.c's pass took it */
    if (t->nh == 0)
      continue;
    size_t ok = 0, denied = 0;
    if (m[i].av) {
      redisReply *out[RL_MAX_NODES];
      qe_collect(p, t, ORDO__RS_EXTEND, (int)t->nh, (int)t->nh + 2, m[i].av,
                 m[i].al, dl, m[i].base, out);
      for (size_t j = 0; j < nn; j++) {
        if (reply_ok(out[j], ORDO__RS_EXTEND))
          ok++;
        else if (out[j] && out[j]->type == REDIS_REPLY_ARRAY)
          denied++;
      }
      free_replies(out, nn);
    }
    lostv[i] = rl_outcome(p, t, ok, denied, m[i].sent, m[i].lease_end);
    free(m[i].av);
    free(m[i].al);
  }
  free(m);
  free(ks);
}

/* With renew_many, a txn due within a twentieth of a lease joins a batch. */
static uint64_t rl_early(void *place) {
  return ((rl_place *)place)->lease_ns / 20;
}

/* ---- Open, close, begin, end --------------------------------------------- */

/* A due txn inside an exchange is looked at again a thirtieth of a lease
 * later. */
static uint64_t rl_busy(void *place, ordo__rn_txn *t) {
  ORDO_UNUSED(t);
  return ((rl_place *)place)->lease_ns / 30 + RL_MS;
}

static const ordo__rn_ops rl_rn_ops = {.renew = rl_renew,
                                       .busy = rl_busy,
                                       .renew_many = rl_renew_many,
                                       .early = rl_early};

static int rl_open(ordo_t **out, const char *url, const ordo_options_t *opts) {
  ORDO_UNUSED(opts);
  rl_place *p = calloc(1, sizeof *p);
  if (!p)
    return ORDO_ENOMEM;
  int rc = rl_parse_url(url, &p->u);
  if (rc) {
    free(p);
    return rc;
  }
  p->quorum = p->u.n / 2 + 1;
  p->chanlen = ordo__rs_channel_prefix(p->u.node[0].db, p->chan);
  p->lease_ns = (uint64_t)p->u.lease_ms * RL_MS;
  p->drift_ns = p->lease_ns / 100 + 2 * RL_MS;
  /* Each exchange with the nodes: node_timeout_ms, or by default a
   * two-hundredth of the lease within [50 ms, 250 ms] (and no more than a
   * third of a very short lease). The Redlock algorithm asks for a per-node
   * timeout much smaller than the lease (tens of milliseconds for 10 s):
   * it bounds how long a stopped node can hold a call (it was a third of
   * the lease, up to 2 s, and with one node stopped a try with timeout 0
   * took 2 s). */
  if (p->u.node_timeout_ms > 0) {
    p->io_ns = (uint64_t)p->u.node_timeout_ms * RL_MS;
  } else {
    p->io_ns = p->lease_ns / 200;
    if (p->io_ns < 50 * (uint64_t)RL_MS)
      p->io_ns = 50 * (uint64_t)RL_MS;
    if (p->io_ns > 250 * (uint64_t)RL_MS)
      p->io_ns = 250 * (uint64_t)RL_MS;
    if (p->io_ns > p->lease_ns / 3)
      p->io_ns = p->lease_ns / 3;
  }
  rc = ordo__rs_tls_open(&p->u.tls, p->u.node, p->u.n, (long)(p->io_ns / RL_MS),
                         &p->tls);
  if (rc) {
    free(p);
    return rc;
  }
  atomic_init(&p->next_id, 1);
  ordo__mutex_init(&p->ids_mu);
  for (size_t i = 0; i < RL_MAX_NODES; i++)
    atomic_init(&p->out_until[i], 0);
  ordo__rs_script_sha(0); /* computes the names once, before any thread */
  rc = ordo__rn_start(&p->rn, &rl_rn_ops, p);
  if (rc) {
    ordo__mutex_destroy(&p->ids_mu);
    ordo__tls_client_free(p->tls);
    free(p);
    return rc;
  }
  *out = &p->base;
  return 0;
}

static void rl_close(ordo_t *o) {
  rl_place *p = rp(o);
  ordo__rn_stop(&p->rn);
  ordo__mutex_destroy(&p->ids_mu);
  ordo__tls_client_free(p->tls);
  free(p);
}

/* A txn connects lazily: a node down at begin is simply one that fails
 * its first exchanges (the quorum decides, not the begin). A wrong
 * password is found by the first exchange too. */
static int rl_txn_begin(ordo_t *o, ordo_txn_t **out, int priority) {
  ORDO_UNUSED(priority);
  rl_place *p = rp(o);
  rl_txn *t = calloc(1, sizeof *t);
  if (!t)
    return ORDO_ENOMEM;
  /* An owner value must be unguessable: without the kernel's random bits
   * there is no txn (ordo__rs_new_owner says why). */
  if (ordo__rs_new_owner(t->owner) != 0) {
    note_err(p, "owner", "getrandom(2) gave no random bits");
    free(t);
    return ORDO_EBACKEND;
  }
  for (size_t i = 0; i < RL_MAX_NODES; i++)
    ordo__rs_conn_init(&t->c[i]);
  t->base.id = atomic_fetch_add(&p->next_id, 1);
  ordo__mutex_init(&t->mu);
  atomic_init(&t->lease_lost, false);
  atomic_init(&t->renewed_ns, ordo__now_ns());
  ordo__rn_link(&p->rn, &t->rn, &t->base, &t->mu);
  *out = &t->base;
  return 0;
}

static void rl_txn_end(ordo_txn_t *tx) {
  rl_txn *t = rt(tx);
  rl_place *p = rp(tx->o);
  ordo__rn_unlink(&p->rn, &t->rn);
  ordo__mutex_lock(&t->mu);
  if (t->nh > 0) {
    size_t c, a;
    release_all(p, t, &c, &a);
  }
  holds_clear(p, t);
  for (size_t i = 0; i < p->u.n; i++)
    ordo__rs_close(&t->c[i]);
  free(t->h);
  ordo__mutex_unlock(&t->mu);
  ordo__mutex_destroy(&t->mu);
  free(t);
}

/* ---- lock_all --------------------------------------------------------------
 */

enum { TRY_GRANTED, TRY_HELD, TRY_NOQUORUM, TRY_FAILED };

/* Records a grant: tokens[i] is the greatest token of key i among the
 * granting nodes. copies[i] (keys not yet held) move into the record.
 * Caller holds t->mu, as for everything below. */
static void record_grant(rl_place *p, rl_txn *t, const ordo_req_t *r, size_t n,
                         const uint64_t *tokens, uint8_t **copies)
    ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < n; i++) {
    long at = hold_find(t, r[i].key, r[i].len);
    if (at >= 0) {
      rl_hold *h = &t->h[at];
      h->count++;
      if (r[i].mode > h->mode)
        h->mode = r[i].mode;
      h->token = tokens[i];
      continue;
    }
    size_t ins = (size_t)(-at - 1);
    memmove(&t->h[ins + 1], &t->h[ins], (t->nh - ins) * sizeof *t->h);
    t->h[ins] = (rl_hold){copies[i], r[i].len, 1, r[i].mode, tokens[i]};
    copies[i] = NULL;
    t->nh++;
    atomic_fetch_add(&p->keys, 1);
  }
}

/*
 * undo_try -- what a failed try may have taken on some nodes, given back on
 * the nodes in mask (those that granted it or did not answer): the keys of
 * r that t did not hold before are released, and a key t held in S and
 * asked for in X (an upgrade some nodes may have granted) is set back to S
 * by EXTEND with modes, so that readers are not shut out of those nodes by
 * an upgrade no majority granted. Nothing waits for a reply (quorum_send).
 */
static void undo_try(rl_place *p, rl_txn *t, const ordo_req_t *r, size_t n,
                     uint8_t **copies, const bool *mask) ORDO_REQUIRES(t->mu) {
  const char **av = malloc((n + 3) * sizeof *av);
  size_t *al = malloc((n + 3) * sizeof *al);
  char *modes = malloc(n + 1);
  size_t m = 0;
  if (!av || !al || !modes)
    goto out;
  for (size_t i = n; i-- > 0;)
    if (copies[i]) {
      av[m] = r[i].key;
      al[m++] = r[i].len;
    }
  if (m > 0) {
    av[m] = t->owner;
    al[m] = 32;
    av[m + 1] = p->chan;
    al[m + 1] = p->chanlen;
    quorum_send(p, t, ORDO__RS_RELEASE, (int)m, (int)m + 2, av, al, mask,
                false);
  }
  m = 0;
  for (size_t i = 0; i < n; i++) {
    long at = copies[i] ? -1 : hold_find(t, r[i].key, r[i].len);
    if (at >= 0 && r[i].mode == ORDO_MODE_X && t->h[at].mode == ORDO_MODE_S) {
      av[m] = r[i].key;
      al[m] = r[i].len;
      modes[m++] = 'S';
    }
  }
  if (m > 0) {
    char lease[24];
    av[m] = t->owner;
    al[m] = 32;
    av[m + 1] = lease;
    al[m + 1] = (size_t)snprintf(lease, sizeof lease, "%ld", p->u.lease_ms);
    av[m + 2] = modes;
    al[m + 2] = m;
    quorum_send(p, t, ORDO__RS_EXTEND, (int)m, (int)m + 3, av, al, mask, false);
  }
out:
  free(av);
  free(al);
  free(modes);
}

/* Sequential mode (bench only): node by node, key by key, each an
 * exchange of its own; a node grants when it granted every key. */
static void sequential_try(rl_place *p, rl_txn *t, const ordo_req_t *r,
                           size_t n, const char **av, const size_t *al,
                           redisReply **out, uint64_t *tokens, size_t *ok)
    ORDO_REQUIRES(t->mu) {
  const char *a1[5];
  size_t l1[5];
  ORDO_UNUSED(r);
  *ok = 0;
  for (size_t i = 0; i < p->u.n; i++) {
    out[i] = NULL;
    bool all = true;
    for (size_t j = 0; j < n && all; j++) {
      a1[0] = av[2 * j];
      l1[0] = al[2 * j];
      a1[1] = av[2 * j + 1];
      l1[1] = al[2 * j + 1];
      a1[2] = av[2 * n];
      l1[2] = al[2 * n];
      a1[3] = av[2 * n + 1];
      l1[3] = al[2 * n + 1];
      a1[4] = av[2 * n + 2] + j;
      l1[4] = 1;
      redisReply *rep[RL_MAX_NODES] = {0};
      ordo__rs_conn *k = &t->c[i];
      if (!ordo__rs_open(k) && ordo__rs_connect(k, &p->u.node[i], true) != 0) {
        all = false;
        break;
      }
      t->loaded[i] = false; /* ordo__rs_eval reloads on NOSCRIPT */
      ordo__rs_eval(&k, 1, ORDO__RS_ACQUIRE, 2, 5, a1, l1,
                    ordo__now_ns() + p->io_ns, rep);
      if (reply_ok(rep[0], ORDO__RS_ACQUIRE) && rep[0]->elements >= 3) {
        uint64_t tok = (uint64_t)rep[0]->element[2]->integer;
        tokens[j] = tok > tokens[j] ? tok : tokens[j];
      } else {
        all = false;
      }
      if (rep[0])
        freeReplyObject(rep[0]);
    }
    if (all)
      (*ok)++;
  }
}

/*
 * write_back -- raises every node's fence counter of each granted key to
 * the grant's token (FENCEMAX, a max), without waiting for replies. A try
 * that failed still INCRed the nodes that granted it, so the counters of
 * a key drift apart, and the max over a later majority could be lower than
 * a token handed out before (W got 17, then Z got 3). Every later grant of
 * the key needs a majority that shares a node with this grant's majority;
 * on that node this write comes before this txn's release (one connection,
 * in order), so the later grant's INCR there, and its token, exceed this
 * one. Sent as EVAL (the text), so a node that lost its scripts still
 * takes it. av and al are lock_all's (each key's counter at 2i + 1).
 */
static void write_back(rl_place *p, rl_txn *t, size_t n, const char **av,
                       const size_t *al, const uint64_t *tokens)
    ORDO_REQUIRES(t->mu) {
  const char **v = malloc(2 * n * sizeof *v);
  size_t *l = malloc(2 * n * sizeof *l);
  char(*num)[24] = malloc(n * sizeof *num);
  if (v && l && num) {
    bool all[RL_MAX_NODES];
    for (size_t i = 0; i < p->u.n; i++)
      all[i] = true;
    for (size_t i = 0; i < n; i++) {
      v[i] = av[2 * i + 1];
      l[i] = al[2 * i + 1];
      v[n + i] = num[i];
      l[n + i] = (size_t)snprintf(num[i], sizeof num[i], "%llu",
                                  (unsigned long long)tokens[i]);
    }
    quorum_send(p, t, ORDO__RS_FENCEMAX, (int)n, (int)(2 * n), v, l, all, true);
  }
  free(v);
  free(l);
  free(num);
}

/*
 * one_try -- ACQUIRE on every node at once, decided by the first majority.
 * On TRY_GRANTED the grant is recorded; otherwise what was taken is
 * released on every node. *rc is set on TRY_FAILED (error replies from a
 * majority).
 */
static int one_try(rl_place *p, rl_txn *t, const ordo_req_t *r, size_t n,
                   const char **av, const size_t *al, uint8_t **copies,
                   uint64_t *tokens, int *rc) ORDO_REQUIRES(t->mu) {
  redisReply *out[RL_MAX_NODES];
  uint64_t sent = ordo__now_ns();
  size_t ok = 0, answered = 0, errs = 0;
  int err = 0;
  /* The nodes an undo goes to: those that granted or did not answer. */
  bool mask[RL_MAX_NODES];
  for (size_t i = 0; i < p->u.n; i++)
    mask[i] = true;
  memset(tokens, 0, n * sizeof *tokens);
  if (p->u.sequential) {
    sequential_try(p, t, r, n, av, al, out, tokens, &ok);
    answered = p->u.n;
  } else {
    quorum_eval(p, t, ORDO__RS_ACQUIRE, (int)(2 * n), (int)(2 * n + 3), av, al,
                sent + p->io_ns, EX_ACQUIRE, out);
    for (size_t i = 0; i < p->u.n; i++) {
      redisReply *x = out[i];
      if (!x && t->node_err[i] == ORDO_EAUTH) {
        /* A refused password is an answer, and not one a retry changes. */
        errs++;
        if (!err)
          err = ORDO_EAUTH;
        continue;
      }
      if (!x) {
        if (node_out(p, i))
          answered++; /* it may answer, but cannot grant for a lease */
        continue;
      }
      if (x->type == REDIS_REPLY_ERROR) {
        mask[i] = false; /* refused: the script wrote nothing */
        errs++;
        if (!err)
          err = ordo__rs_err_code(x);
        note_err(p, "ACQUIRE", x->str);
        continue;
      }
      answered++;
      mask[i] = reply_ok(x, ORDO__RS_ACQUIRE);
      if (reply_ok(x, ORDO__RS_ACQUIRE) && x->elements == n + 2) {
        ok++;
        for (size_t j = 0; j < n; j++) {
          const redisReply *e = x->element[2 + j];
          uint64_t tok =
              e->type == REDIS_REPLY_INTEGER ? (uint64_t)e->integer : 0;
          tokens[j] = tok > tokens[j] ? tok : tokens[j];
        }
      }
    }
    free_replies(out, p->u.n);
  }
  uint64_t elapsed = ordo__now_ns() - sent;
  if (ok >= p->quorum && elapsed + p->drift_ns < p->lease_ns) {
    record_grant(p, t, r, n, tokens, copies);
    write_back(p, t, n, av, al, tokens);
    return TRY_GRANTED;
  }
  undo_try(p, t, r, n, copies, mask);
  if (errs >= p->quorum) {
    *rc = err == ORDO_EAUTH || err == ORDO_EINVAL || err == ORDO_ELIMIT
              ? err
              : ORDO_EBACKEND;
    return TRY_FAILED;
  }
  if (answered + errs < p->quorum)
    return TRY_NOQUORUM;
  return TRY_HELD;
}

static int rl_lock_all(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                       uint64_t deadline_ns) {
  rl_txn *t = rt(tx);
  rl_place *p = rp(tx->o);
  size_t fence_bytes = 0;
  for (size_t i = 0; i < n; i++) {
    if (ordo__rs_key_reserved(r[i].key, r[i].len))
      return ORDO_EINVAL;
    fence_bytes += r[i].len + ORDO__RS_FENCE_EXTRA;
  }
  size_t argc = 2 * n + 3;
  const char **av = malloc(argc * sizeof *av);
  size_t *al = malloc(argc * sizeof *al);
  uint8_t **copies = calloc(n, sizeof *copies);
  char *fences = malloc(fence_bytes);
  char *modes = malloc(n);
  uint64_t *tokens = malloc(n * sizeof *tokens);
  int rc = 0;
  if (!av || !al || !copies || !fences || !modes || !tokens) {
    rc = ORDO_ENOMEM;
    goto out;
  }
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
  uint64_t until =
      ordo__now_ns() + (uint64_t)p->u.timeout_ms * RL_MS; /* acquisition */
  if (deadline_ns < until)
    until = deadline_ns;
  bool was_holding = t->nh > 0, waited = false;
  uint64_t cap_ms = RL_RETRY_BASE_MS;
  for (;;) {
    uint64_t sent = ordo__now_ns();
    int what = one_try(p, t, r, n, av, al, copies, tokens, &rc);
    if (what == TRY_GRANTED) {
      atomic_fetch_add(&p->acquired, 1);
      if (!was_holding) {
        atomic_store(&t->renewed_ns, sent);
        atomic_store(&t->rn.lease_end_ns, sent + p->lease_ns - p->drift_ns);
        atomic_store(&t->rn.due_ns, sent + p->lease_ns / 3);
        atomic_store(&t->rn.holding, true);
        ordo__rn_kick(&p->rn, sent + p->lease_ns / 3);
      }
      break;
    }
    if (what == TRY_FAILED)
      break;
    uint64_t now = ordo__now_ns();
    if (now >= until) {
      rc = what == TRY_NOQUORUM ? ORDO_EQUORUM : ORDO_ETIMEDOUT;
      if (rc == ORDO_ETIMEDOUT)
        atomic_fetch_add(&p->timeouts, 1);
      else
        note_err(p, "ACQUIRE", "no majority of the nodes answered");
      break;
    }
    if (!waited) {
      waited = true;
      atomic_fetch_add(&p->waited, 1);
      atomic_fetch_add(&p->waiting, 1);
    }
    atomic_fetch_add(&p->retries, 1);
    /* Full jitter: uniform in [0, cap), cap doubling up to its bound. */
    uint64_t sleep_ns = ordo__rand64() % (cap_ms * RL_MS) + 1;
    cap_ms = cap_ms * 2 > RL_RETRY_CAP_MS ? RL_RETRY_CAP_MS : cap_ms * 2;
    if (now + sleep_ns > until)
      sleep_ns = until - now;
    struct timespec ts = {(time_t)(sleep_ns / 1000000000u),
                          (long)(sleep_ns % 1000000000u)};
    ordo__mutex_unlock(&t->mu);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
      ;
    ordo__mutex_lock(&t->mu);
    if (atomic_exchange(&t->lease_lost, false)) {
      rc = ORDO_ELEASE;
      break;
    }
  }
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
  return rc;
}

/* ---- unlock, held -------------------------------------------------------- */

static int rl_unlock(ordo_txn_t *tx, const void *key, size_t len) {
  rl_txn *t = rt(tx);
  rl_place *p = rp(tx->o);
  int rc = 0;
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false)) {
    rc = ORDO_ELEASE;
    goto out;
  }
  long at = hold_find(t, key, len);
  if (at < 0) {
    rc = ORDO_ENOTHELD;
    goto out;
  }
  if (t->h[at].count > 1) {
    t->h[at].count--;
    goto out;
  }
  const void *keys[1] = {key};
  size_t lens[1] = {len}, c, a;
  release_keys(p, t, keys, lens, 1, &c, &a);
  rc = release_status(p, t, c, a);
  hold_remove(p, t, (size_t)at);
  if (rc == 0)
    atomic_fetch_add(&p->released, 1);
out:
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static int rl_unlock_all(ordo_txn_t *tx) {
  rl_txn *t = rt(tx);
  rl_place *p = rp(tx->o);
  int rc = 0;
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false)) {
    rc = ORDO_ELEASE;
    goto out;
  }
  if (t->nh == 0)
    goto out;
  size_t c, a;
  release_all(p, t, &c, &a);
  rc = release_status(p, t, c, a);
  if (rc == 0) {
    rc = (int)t->nh;
    atomic_fetch_add(&p->released, t->nh);
  }
  holds_clear(p, t);
out:
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static int rl_held(ordo_txn_t *tx, const void *key, size_t len,
                   ordo_mode_t *mode, uint64_t *fence) {
  rl_txn *t = rt(tx);
  ordo__mutex_lock(&t->mu);
  int count =
      ordo__hold_report(t->h, t->nh, sizeof *t->h, key, len, mode, fence);
  ordo__mutex_unlock(&t->mu);
  return count;
}

static int rl_stats(ordo_t *o, ordo_stats_t *out) {
  rl_place *p = rp(o);
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

static void rl_dump(ordo_t *o, int fd) {
  rl_place *p = rp(o);
  char buf[1024];
  ordo__mutex_lock(&p->rn.mu);
  int len = snprintf(buf, sizeof buf,
                     "%s: %zu nodes, quorum %zu, lease %ld ms, acquisition "
                     "timeout %ld ms%s\n%s%s%s",
                     o->url, p->u.n, p->quorum, p->u.lease_ms, p->u.timeout_ms,
                     p->u.sequential ? ", sequential (bench only)" : "",
                     p->rn.err[0] ? "last error: " : "", p->rn.err,
                     p->rn.err[0] ? "\n" : "");
  ordo__mutex_unlock(&p->rn.mu);
  if (len > (int)sizeof buf - 1)
    len = (int)sizeof buf - 1;
  if (len > 0)
    ordo__write_all(fd, buf, (size_t)len);
  /* Each node's run_id as this place knows it, and whether it is left out
   * (restarted less than a lease ago). */
  uint64_t now = ordo__now_ns();
  for (size_t i = 0; i < p->u.n; i++) {
    char what[80], id[41];
    node_name(p, i, what, sizeof what);
    ordo__mutex_lock(&p->ids_mu);
    memcpy(id, p->run_id[i], sizeof id);
    ordo__mutex_unlock(&p->ids_mu);
    uint64_t out = atomic_load(&p->out_until[i]);
    len = snprintf(buf, sizeof buf, "%s: run_id %s%s\n", what,
                   id[0] ? id : "(not seen yet)",
                   out > now ? ", restarted: left out of decisions" : "");
    if (len > (int)sizeof buf - 1)
      len = (int)sizeof buf - 1;
    if (len > 0)
      ordo__write_all(fd, buf, (size_t)len);
  }
}

static void rl_on_lease_lost(ordo_t *o, rl_lost_cb cb, void *arg) {
  rl_place *p = rp(o);
  ordo__rn_on_lost(&p->rn, cb, arg);
}

const ordo__backend ordo__backend_redlock = {
    .scheme = "redlock",
    .caps = ORDO_CAP_SHARED | ORDO_CAP_FENCE | ORDO_CAP_INCREMENTAL |
            ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE | ORDO_CAP_WAIT_HOLDS_NOTHING,
    .open = rl_open,
    .close = rl_close,
    .txn_begin = rl_txn_begin,
    .txn_end = rl_txn_end,
    .lock_all = rl_lock_all,
    .lock_all_async = NULL,
    .unlock = rl_unlock,
    .unlock_all = rl_unlock_all,
    .cancel = NULL,
    .held = rl_held,
    .stats = rl_stats,
    .dump = rl_dump,
    .graph = NULL,
    .on_lease_lost = rl_on_lease_lost,
};
