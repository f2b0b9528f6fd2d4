/*
 * ordod.c -- the "ordod://" backend: a client of ordod, ordo's lock server
 * (docs/protocol.md), over hiredis. Each txn is one server session on a
 * connection of its own; the txn keeps a local record of what it holds (hold
 * counts, modes, fencing tokens) in step with its LOCK and UNLOCK replies,
 * and one renewal thread per place keeps the leases of holding txns alive
 * with EXTEND and reports a lost lease. See src/backend/README.md ("ordod.c")
 * for the design, the invariants and the lock order.
 *
 * URLs:
 *   ordod://[[user]:password@]host[:port][?lease_ms=N&timeout_ms=N]
 *   ordod://[[user]:password@]/path/to/socket[?lease_ms=N&timeout_ms=N]
 *   ordod://host:port?tls=1[&tls_ca=FILE&tls_cert=FILE&tls_key=FILE
 *       &tls_sni=NAME]  (TLS to ordod's --tls-port, over tls.c)
 * (IPv6 hosts in brackets; the port defaults to 7411; the password and the
 * socket path are percent-decoded.)
 *
 * Interface: ordo__backend_ordod, and for the sharded place (shards.c) the
 * hooks of ordod.h: a txn begun with a global id (SESSION GID on each of
 * its sessions) and an owner, and a LOCK with HELDAT.
 */
#include "ordo_int.h"
#include "ordo_tsa.h"
#include "backend/ordod.h"
#include "backend/remote.h"
#include "backend/renewer.h"
#include "backend/tls.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define OD_DEFAULT_PORT 7411
#define OD_DEFAULT_TIMEOUT_MS 5000L
/* The lease assumed until a server tells us its own (its default). */
#define OD_DEFAULT_LEASE_MS 30000L
#define OD_MS 1000000u /* nanoseconds in a millisecond */
/* A shard's round trips are bounded by the call's deadline (ordod.h,
 * ordo__od_shard_bound): the LOCK's WAIT leaves a twentieth of what is
 * left (at most 1 s) for the reply, and the reply has at least 100 ms (or
 * timeout_ms, when smaller) past the WAIT: a shorter grace would take a
 * loaded but live shard for a dead one, and that costs the txn its
 * session there. */
#define OD_SHARD_GRACE_MS 100L
#define OD_SHARD_MARGIN_MAX_MS 1000L

/* ---- The URL ------------------------------------------------------------- */

typedef struct od_url {
  bool unix_sock;
  char host[256]; /* TCP: a name or an address, brackets stripped */
  int port;
  char path[108]; /* Unix socket: sizeof(sun_path) */
  char user[128];
  char pass[256];
  bool have_pass;
  long lease_ms;   /* 0: the server's own lease */
  long timeout_ms; /* connect and command bound (a LOCK adds its WAIT) */
  ordo__tls_opts tls;
} od_url;

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Percent-decodes s[0..n) into out (cap bytes with the NUL). */
static int pct_decode(const char *s, size_t n, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= n)
        return ORDO_EURL;
      int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
      if (hi < 0 || lo < 0 || (hi | lo) == 0)
        return ORDO_EURL; /* a bad escape, or a NUL */
      c = (char)(hi * 16 + lo);
      i += 2;
    }
    if (o + 1 >= cap)
      return ORDO_EURL;
    out[o++] = c;
  }
  out[o] = 0;
  return 0;
}

static int parse_query(const char *q, od_url *u) {
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
      return ORDO_EURL; /* a trailing '&' */
  }
  return 0;
}

/* A host name or IPv4 address: letters, digits, '.', '-', '_'. */
static bool host_ok(const char *s, size_t n, bool v6) {
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
              (v6 && (c == ':' || c == '%'));
    if (!ok)
      return false;
  }
  return true;
}

/*
 * od_parse_url -- fills u from an ordod:// URL (the forms in the header).
 * Returns 0 or ORDO_EURL.
 */
static int od_parse_url(const char *url, od_url *u) {
  memset(u, 0, sizeof *u);
  u->port = OD_DEFAULT_PORT;
  u->timeout_ms = OD_DEFAULT_TIMEOUT_MS;
  if (strncmp(url, "ordod://", 8) != 0)
    return ORDO_EURL;
  const char *rest = url + 8;
  size_t alen = strcspn(rest, "?");
  if (rest[alen] == '?') {
    if (rest[alen + 1] == 0)
      return ORDO_EURL;
    int rc = parse_query(rest + alen + 1, u);
    if (rc == 0)
      rc = ordo__tls_opts_check(&u->tls);
    if (rc)
      return rc;
  }
  /* The user info ends at the last '@' (a password may not hold one but
   * percent-encoded). */
  const char *at = NULL;
  for (const char *p = rest; p < rest + alen; p++)
    if (*p == '@')
      at = p;
  const char *hp = rest;
  if (at) {
    const char *colon = memchr(rest, ':', (size_t)(at - rest));
    if (!colon)
      return ORDO_EURL; /* a user without a password means nothing here */
    if (pct_decode(rest, (size_t)(colon - rest), u->user, sizeof u->user) ||
        pct_decode(colon + 1, (size_t)(at - colon - 1), u->pass,
                   sizeof u->pass))
      return ORDO_EURL;
    u->have_pass = true;
    hp = at + 1;
  }
  size_t hlen = (size_t)(rest + alen - hp);
  if (hlen > 0 && hp[0] == '/') {
    if (u->tls.on)
      return ORDO_EURL; /* TLS is for TCP; a Unix socket is local already */
    u->unix_sock = true;
    if (hlen < 2 || pct_decode(hp, hlen, u->path, sizeof u->path))
      return ORDO_EURL;
    return 0;
  }
  const char *host = hp, *port = NULL;
  size_t nh;
  bool v6 = false;
  if (hlen > 0 && hp[0] == '[') {
    const char *rb = memchr(hp, ']', hlen);
    if (!rb)
      return ORDO_EURL;
    host = hp + 1;
    nh = (size_t)(rb - host);
    v6 = true;
    if (rb + 1 < hp + hlen) {
      if (rb[1] != ':')
        return ORDO_EURL;
      port = rb + 2;
    }
  } else {
    const char *colon = memchr(hp, ':', hlen);
    nh = colon ? (size_t)(colon - hp) : hlen;
    port = colon ? colon + 1 : NULL;
  }
  if (!host_ok(host, nh, v6) || nh >= sizeof u->host)
    return ORDO_EURL;
  memcpy(u->host, host, nh);
  u->host[nh] = 0;
  if (port) {
    long v;
    if (ordo__parse_long(port, (size_t)(hp + hlen - port), 1, 65535, &v))
      return ORDO_EURL;
    u->port = (int)v;
  }
  return 0;
}

/* ---- Places and txns ----------------------------------------------------- */

/* One key the txn holds: its own copy, hold count, strongest mode and the
 * fencing token of its latest grant. */
typedef ordo__hold od_hold; /* remote.h */

typedef struct od_txn od_txn;
typedef void (*od_lost_cb)(ordo_txn_t *t, void *arg);

typedef struct od_place {
  struct ordo_s base;
  od_url u;              /* read-only after open */
  ordo__tls_client *tls; /* with tls=1: the context, made at open */
  _Atomic uint64_t next_id;
  /*
   * The renewal thread, the txn list and the last failure's text, all
   * under rn.mu (renewer.h). Lock order: a txn's mu, then rn.mu (README,
   * "Lock order"); with rn.mu held a txn's mu is only ever tried
   * (ordo__mutex_trylock), never waited for.
   */
  ordo__renewer rn;
  /*
   * ctl_mu guards ctl, the place's own session for INFO and GRAPH (stats,
   * graph, dump), connected when first needed, and ctl_tmo. It comes
   * before rn.mu (note_err takes rn.mu while it is held) and after no other.
   * ctl_call requires it (ordo_tsa.h).
   */
  ordo__mutex ctl_mu ORDO_ACQUIRED_BEFORE(rn.mu);
  redisContext *ctl ORDO_GUARDED_BY(ctl_mu);
  long ctl_tmo ORDO_GUARDED_BY(ctl_mu);
} od_place;

struct od_txn {
  struct ordo_txn_s base;
  /* The place's list and renewal state: links under the place's rn.mu,
   * rn.holding written under mu. Due a third of the lease after
   * renewed_ns (od_due). */
  ordo__rn_txn rn;
  /*
   * mu guards c, tmo and the hold record (h, nh, caph). The txn's own
   * thread holds it for the whole of each call, a blocking LOCK included;
   * the renewer only tries it, so it never waits behind a LOCK (the
   * server keeps a waiting session's lease alive by itself). Every helper
   * that touches these requires it (ordo_tsa.h).
   */
  ordo__mutex mu;
  /* NULL when the connection was lost: the next LOCK reconnects. */
  redisContext *c ORDO_GUARDED_BY(mu);
  long tmo ORDO_GUARDED_BY(mu); /* c's socket timeout, ms; 0 none, -1 unknown */
  od_hold *h ORDO_GUARDED_BY(mu); /* sorted in the canonical key order */
  size_t nh ORDO_GUARDED_BY(mu), caph ORDO_GUARDED_BY(mu);
  /* Written under mu, read by the renewer without it: atomics, which the
   * analysis does not check. */
  _Atomic bool lease_lost; /* the next call returns ORDO_ELEASE */
  /* The last LOCK was sent and its answer never came (the txn's thread
   * only): the server may have acted on it (ordo__od_txn_unanswered). */
  bool unanswered;
  _Atomic uint64_t renewed_ns; /* when the server last renewed the lease */
  _Atomic uint64_t lease_ns;   /* the session's lease length */
  _Atomic unsigned aborts;     /* -DEADLOCK replies */
  _Atomic uint64_t sess_id;    /* the server's id of the session, for dumps */
  /* Set at begin, read-only after: the global txn id sent with SESSION GID
   * on each session ("" for none, as a plain ordod:// txn has), and the
   * sharded txn this one is a part of (ordod.h). */
  char gid[ORDO__OD_GID_LEN + 1];
  void *owner;
};

static od_txn *ot(ordo_txn_t *t) {
  return (od_txn *)t;
}
static od_place *op(ordo_t *o) {
  return (od_place *)o;
}

/* Keeps the text of the latest failure, for ordo_dump. Takes rn.mu. */
static void note_err(od_place *p, const char *what, const char *detail)
    ORDO_EXCLUDES(p->rn.mu) {
  ordo__rn_note(&p->rn, what, detail);
}

/* ---- Talking to the server ------------------------------------------------
 * Requests go out through ordo__redis_flush (send(2) with MSG_NOSIGNAL), so
 * that a server that has gone is an error and never a SIGPIPE; hiredis
 * reads the replies.
 */

/* Sends one command and reads its reply; NULL when the connection failed
 * (c->err says why, and c can only be freed). */
/*
 * readable_by -- whether c has a reply to read before until_ns
 * (CLOCK_MONOTONIC; 0: no bound here). poll's timer is a high-resolution
 * one; the socket's SO_RCVTIMEO, which stays the bound of a reply that
 * comes in parts, runs late by a few percent on a loaded VM, too late for
 * a bound that is a call's deadline. False on timeout, with c's error set.
 */
static bool readable_by(redisContext *c, uint64_t until_ns) {
  if (!until_ns || (c->reader && c->reader->pos < c->reader->len))
    return true;
  for (;;) {
    uint64_t now = ordo__now_ns();
    int ms = now >= until_ns ? 0 : (int)((until_ns - now + OD_MS - 1) / OD_MS);
    struct pollfd pf = {.fd = c->fd, .events = POLLIN};
    int k = poll(&pf, 1, ms);
    if (k > 0)
      return true;
    if (k == 0 || errno != EINTR) {
      c->err = REDIS_ERR_IO;
      snprintf(c->errstr, sizeof c->errstr, "no reply by the call's deadline");
      return false;
    }
  }
}

/* Sends a command and reads its reply, by until_ns when it is not 0. */
static redisReply *od_call_by(redisContext *c, int argc, const char **argv,
                              const size_t *lens, uint64_t until_ns) {
  if (redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK)
    return NULL;
  int done = 0;
  if (ordo__redis_flush(c, &done) != 0)
    return NULL;
  void *r = NULL;
  if (!readable_by(c, until_ns) || redisGetReply(c, &r) != REDIS_OK)
    return NULL;
  return r;
}

static redisReply *od_call(redisContext *c, int argc, const char **argv,
                           const size_t *lens) {
  return od_call_by(c, argc, argv, lens, 0);
}

/* Sets c's socket timeout (0: none) unless it is set already. */
static int set_tmo(redisContext *c, long *cur, long ms) {
  if (*cur == ms)
    return 0;
  struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
  if (redisSetTimeout(c, tv) != REDIS_OK)
    return -1;
  *cur = ms;
  return 0;
}

/* The error codes of docs/protocol.md, and what each means here. */
static const struct {
  const char *code;
  int err;
} err_map[] = {
    {"TIMEOUT", ORDO_ETIMEDOUT}, {"DEADLOCK", ORDO_EDEADLK},
    {"LEASE", ORDO_ELEASE},      {"LIMIT", ORDO_ELIMIT},
    {"NOAUTH", ORDO_EAUTH},      {"WRONGPASS", ORDO_EAUTH},
    {"ORDER", ORDO_EORDER},      {"BUSY", ORDO_EBUSY},
};

/* The ordo code of an error reply ("-CODE message"); EBACKEND for -ERR and
 * anything unknown. */
static int map_err(const redisReply *r) {
  size_t n = strcspn(r->str, " ");
  for (size_t i = 0; i < sizeof err_map / sizeof err_map[0]; i++)
    if (strlen(err_map[i].code) == n && memcmp(r->str, err_map[i].code, n) == 0)
      return err_map[i].err;
  return ORDO_EBACKEND;
}

/*
 * od_connect -- opens a session: connects within tmo_ms (timeout_ms, or a
 * sharded call's bound), AUTHs when the
 * URL has a password, sets the lease when the URL asks, learns the lease's
 * length from EXTEND and the session's id from SESSION ID, and sends
 * SESSION GID when gid is not empty (all pipelined, one round trip). Returns 0
 * with *out, *lease_ms and *sess_id, or ORDO_EBACKEND (unreachable; the text is
 * kept for ordo_dump), ORDO_EAUTH or ORDO_ENOMEM.
 */
static int od_connect(od_place *p, redisContext **out, long *lease_ms,
                      uint64_t *sess_id, const char *gid, long tmo_ms) {
  const od_url *u = &p->u;
  uint64_t until = ordo__now_ns() + (uint64_t)tmo_ms * OD_MS;
  struct timeval tv = {(time_t)(tmo_ms / 1000),
                       (suseconds_t)(tmo_ms % 1000) * 1000};
  redisContext *c;
  if (p->tls) {
    /* TLS (tls.c): hiredis speaks plaintext on a local socket, so
     * everything below works as over TCP; the TCP socket has keepalive. */
    char err[512];
    int fd =
        ordo__tls_connect(p->tls, u->host, u->port, tmo_ms, err, sizeof err);
    if (fd < 0) {
      note_err(p, "connect", err);
      return ORDO_EBACKEND;
    }
    c = redisConnectFd(fd);
    if (!c)
      close(fd);
  } else {
    c = u->unix_sock ? redisConnectUnixWithTimeout(u->path, tv)
                     : redisConnectWithTimeout(u->host, u->port, tv);
  }
  if (!c)
    return ORDO_ENOMEM;
  if (c->err) {
    note_err(p, "connect", c->errstr);
    redisFree(c);
    return ORDO_EBACKEND;
  }
  if (redisSetTimeout(c, tv) != REDIS_OK) {
    note_err(p, "connect", "cannot set the socket timeout");
    redisFree(c);
    return ORDO_EBACKEND;
  }
  /* A LOCK without WAIT reads with no timeout: TCP keepalive ends it if
   * the server's host vanishes without a word. */
  if (!u->unix_sock && !p->tls)
    redisEnableKeepAlive(c);
  const char *av[3];
  size_t al[3];
  int n = 0, expect = 2, before = 0; /* before: replies ahead of EXTEND's */
  if (u->have_pass) {
    av[n++] = "AUTH";
    if (u->user[0])
      av[n++] = u->user;
    av[n++] = u->pass;
    for (int i = 0; i < n; i++)
      al[i] = strlen(av[i]);
    redisAppendCommandArgv(c, n, av, al);
    expect = 3;
    before = 1;
  }
  char lease[24];
  av[0] = "EXTEND";
  al[0] = 6;
  n = 1;
  if (u->lease_ms) {
    al[1] = (size_t)snprintf(lease, sizeof lease, "%ld", u->lease_ms);
    av[n++] = lease;
  }
  redisAppendCommandArgv(c, n, av, al);
  av[0] = "SESSION";
  av[1] = "ID";
  al[0] = 7;
  al[1] = 2;
  redisAppendCommandArgv(c, 2, av, al);
  if (gid && gid[0]) {
    const char *gv[3] = {"SESSION", "GID", gid};
    size_t gl[3] = {7, 3, strlen(gid)};
    redisAppendCommandArgv(c, 3, gv, gl);
    expect++;
  }
  int rc = 0, done = 0;
  bool sent = ordo__redis_flush(c, &done) == 0;
  if (!sent) {
    note_err(p, "connect", c->errstr);
    rc = ORDO_EBACKEND;
  }
  for (int i = 0; sent && i < expect; i++) {
    void *vr = NULL;
    if (!readable_by(c, until) || redisGetReply(c, &vr) != REDIS_OK) {
      note_err(p, "connect", c->errstr);
      rc = ORDO_EBACKEND;
      break;
    }
    redisReply *r = vr;
    /* -1 AUTH, 0 EXTEND, 1 SESSION ID, 2 SESSION GID */
    int which = i - before;
    if (r->type == REDIS_REPLY_ERROR) {
      if (rc == 0) {
        note_err(p,
                 which < 0    ? "AUTH"
                 : which == 0 ? "EXTEND"
                              : "SESSION",
                 r->str);
        /* A refused AUTH (or none where one is needed) is EAUTH. */
        rc = (which < 0 || map_err(r) == ORDO_EAUTH) ? ORDO_EAUTH
                                                     : ORDO_EBACKEND;
      }
    } else if (which == 2) {
      if (rc == 0 && r->type != REDIS_REPLY_STATUS) {
        note_err(p, "SESSION GID", "the reply is not +OK");
        rc = ORDO_EBACKEND;
      }
    } else if (which >= 0 && r->type != REDIS_REPLY_INTEGER) {
      if (rc == 0) {
        note_err(p, which == 0 ? "EXTEND" : "SESSION",
                 "the reply is not an integer: is this ordod?");
        rc = ORDO_EBACKEND;
      }
    } else if (which == 0 && r->integer > 0) {
      *lease_ms = (long)r->integer;
    } else if (which == 1) {
      *sess_id = (uint64_t)r->integer;
    }
    freeReplyObject(r);
  }
  if (rc) {
    redisFree(c);
    return rc;
  }
  *out = c;
  return 0;
}

/* ---- The hold record (caller holds t->mu) -------------------------------- */

static long hold_find(const od_txn *t, const void *key, size_t len)
    ORDO_REQUIRES(t->mu) {
  return ordo__hold_find(t->h, t->nh, sizeof *t->h, key, len);
}

static void hold_remove(od_txn *t, size_t i) ORDO_REQUIRES(t->mu) {
  free(t->h[i].key);
  memmove(&t->h[i], &t->h[i + 1], (t->nh - i - 1) * sizeof *t->h);
  t->nh--;
}

/* Forgets every hold: the server released them, or will at disconnect. */
static void holds_clear(od_txn *t) ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < t->nh; i++)
    free(t->h[i].key);
  t->nh = 0;
  atomic_store(&t->rn.holding, false);
}

/*
 * conn_lost -- the connection failed: frees it (the server ends the
 * session, and with it every lock, when it sees the close) and forgets the
 * holds. Returns how many keys were held. Caller holds t->mu.
 */
static size_t conn_lost(od_place *p, od_txn *t, const char *what)
    ORDO_REQUIRES(t->mu) {
  note_err(p, what, t->c->errstr[0] ? t->c->errstr : "connection lost");
  redisFree(t->c);
  t->c = NULL;
  t->tmo = -1;
  size_t had = t->nh;
  holds_clear(t);
  return had;
}

/* ---- Lease renewal ----------------------------------------------------------
 * The hooks of the place's renewal thread (renewer.c): it sleeps until the
 * earliest renewal is due (a third of a lease after the server last heard
 * from a holding txn), and od_renew sends EXTEND on the txn's connection.
 * README, "ordod.c".
 */

static bool od_renewed(od_place *p, od_txn *t, redisReply *r, uint64_t sent)
    ORDO_REQUIRES(t->mu);

/* The bound of t's EXTEND: two thirds of the lease (past that it has run
 * out on the server anyway), at most timeout_ms, at least 10 ms. */
static long renew_tmo(od_place *p, od_txn *t) {
  long lease_ms = (long)(atomic_load(&t->lease_ns) / OD_MS);
  long tmo = lease_ms * 2 / 3;
  if (tmo > p->u.timeout_ms)
    tmo = p->u.timeout_ms;
  return tmo < 10 ? 10 : tmo;
}

/*
 * od_renew -- EXTENDs t's lease. Caller holds t->mu (not p->rn.mu). The read
 * is bounded by two thirds of the lease: past that the lease has run out
 * on the server anyway. Returns true when the lease is lost: the server
 * said -LEASE, or the connection failed; t's holds are then forgotten and
 * its next call returns ORDO_ELEASE.
 */
static bool od_renew(void *place, ordo_txn_t *tx) {
  od_place *p = place;
  od_txn *t = ot(tx);
  ordo__mutex_assert_held(&t->mu); /* renewer.c's pass took it */
  if (!t->c || t->nh == 0)
    return false;
  long tmo = renew_tmo(p, t);
  const char *av[1] = {"EXTEND"};
  size_t al[1] = {6};
  uint64_t sent = ordo__now_ns();
  redisReply *r =
      set_tmo(t->c, &t->tmo, tmo) == 0 ? od_call(t->c, 1, av, al) : NULL;
  return od_renewed(p, t, r, sent);
}

/*
 * od_renewed -- what the EXTEND of t sent at sent got: r, or NULL when the
 * connection failed or no reply came in time (the connection is then out
 * of step and dropped). Frees r. Returns true when the lease is lost.
 * Caller holds t->mu.
 */
static bool od_renewed(od_place *p, od_txn *t, redisReply *r, uint64_t sent)
    ORDO_REQUIRES(t->mu) {
  if (!r) {
    conn_lost(p, t, "EXTEND");
    atomic_store(&t->lease_lost, true);
    return true;
  }
  bool lost = false;
  if (r->type == REDIS_REPLY_INTEGER) {
    atomic_store(&t->renewed_ns, sent);
    if (r->integer >= 10)
      atomic_store(&t->lease_ns, (uint64_t)r->integer * OD_MS);
  } else {
    /* -LEASE: the locks are gone. Anything else is not an answer we can
     * trust either: drop the session, which releases whatever it held. */
    note_err(p, "EXTEND",
             r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    if (r->type == REDIS_REPLY_ERROR && map_err(r) == ORDO_ELEASE) {
      holds_clear(t);
    } else {
      redisFree(t->c);
      t->c = NULL;
      t->tmo = -1;
      holds_clear(t);
    }
    atomic_store(&t->lease_lost, true);
    lost = true;
  }
  freeReplyObject(r);
  return lost;
}

/*
 * od_renew_many -- the EXTENDs of ts[0..n) at once (the renew_many hook of
 * renewer.h): each is written on its txn's connection, then one poll(2)
 * reads them all, each bounded as od_renew's (renew_tmo), so that a server
 * that stopped answering holds every renewal for the same time and none
 * waits behind another (renewed one after another, 8 holders of a 600 ms
 * lease heard of their lost leases up to 3 s late). Each outcome is
 * od_renew's (od_renewed). Each bound is the txn's own, which until never
 * cuts short: a reply cut short would leave its connection out of step,
 * and the lease lost; a txn left out of the batch waits at most one bound.
 * Caller holds each txn's mu.
 */
static void od_renew_many(void *place, ordo_txn_t *const *ts, size_t n,
                          uint64_t until, bool *lostv) {
  od_place *p = place;
  ORDO_UNUSED(until);
  struct pollfd *fds = calloc(n, sizeof *fds);
  size_t *who = calloc(n, sizeof *who);
  uint64_t *sent = calloc(n, sizeof *sent), *dl = calloc(n, sizeof *dl);
  redisReply **rep = calloc(n, sizeof *rep);
  bool *live = calloc(n, sizeof *live);
  if (!fds || !who || !sent || !dl || !rep || !live) {
    for (size_t i = 0; i < n; i++)
      lostv[i] = od_renew(p, ts[i]);
    goto out;
  }
  const char *av[1] = {"EXTEND"};
  size_t al[1] = {6};
  for (size_t i = 0; i < n; i++) {
    od_txn *t = ot(ts[i]);
    ordo__mutex_assert_held(&t->mu); /* renewer.c's pass took it */
    lostv[i] = false;
    if (!t->c || t->nh == 0)
      continue;
    sent[i] = ordo__now_ns();
    dl[i] = sent[i] + (uint64_t)renew_tmo(p, t) * OD_MS;
    int done = 0;
    live[i] = redisAppendCommandArgv(t->c, 1, av, al) == REDIS_OK &&
              ordo__redis_flush(t->c, &done) == 0 && done;
    if (!live[i])
      lostv[i] = od_renewed(p, t, NULL, sent[i]);
  }
  for (;;) {
    size_t m = 0;
    uint64_t now = ordo__now_ns(), first = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
      if (!live[i])
        continue;
      od_txn *t = ot(ts[i]);
      ordo__mutex_assert_held(&t->mu);
      if (now >= dl[i]) {
        live[i] = false; /* no reply in time: od_renewed drops it */
        continue;
      }
      first = dl[i] < first ? dl[i] : first;
      fds[m] = (struct pollfd){t->c->fd, POLLIN, 0};
      who[m++] = i;
    }
    if (m == 0)
      break;
    int ms = (int)((first - now + OD_MS - 1) / OD_MS);
    int pr = poll(fds, (nfds_t)m, ms);
    if (pr < 0 && errno != EINTR)
      break; /* the ones still live count as not answered */
    for (size_t j = 0; pr > 0 && j < m; j++) {
      if (!fds[j].revents)
        continue;
      size_t i = who[j];
      od_txn *t = ot(ts[i]);
      ordo__mutex_assert_held(&t->mu);
      void *r = NULL;
      /* The socket has data (or is closed): this read does not block, and
       * the reader parses without I/O. */
      if (redisBufferRead(t->c) != REDIS_OK ||
          redisReaderGetReply(t->c->reader, &r) != REDIS_OK) {
        live[i] = false;
        continue;
      }
      if (r) {
        rep[i] = r;
        live[i] = false;
      }
    }
  }
  for (size_t i = 0; i < n; i++) {
    od_txn *t = ot(ts[i]);
    ordo__mutex_assert_held(&t->mu);
    if (t->c && t->nh > 0 && sent[i])
      lostv[i] = od_renewed(p, t, rep[i], sent[i]);
  }
out:
  free(fds);
  free(who);
  free(sent);
  free(dl);
  free(rep);
  free(live);
}

/* ---- The vtable -------------------------------------------------------------
 */

/* A txn's renewal is due a third of its lease after the server last
 * renewed it. */
static uint64_t od_due(void *place, ordo__rn_txn *l) {
  ORDO_UNUSED(place);
  od_txn *t = ot(l->txn);
  return atomic_load(&t->renewed_ns) + atomic_load(&t->lease_ns) / 3;
}

/* A due txn inside a call (which renews the lease itself) is looked at
 * again a sixth of its lease later. */
static uint64_t od_busy(void *place, ordo__rn_txn *l) {
  ORDO_UNUSED(place);
  return atomic_load(&ot(l->txn)->lease_ns) / 6 + OD_MS;
}

/* With renew_many, a txn due within a twentieth of the URL's lease (or of
 * 10 s, when the server's lease is used) joins a batch. */
static uint64_t od_early(void *place) {
  long lease_ms = ((od_place *)place)->u.lease_ms;
  return (uint64_t)(lease_ms ? lease_ms : 10000) * OD_MS / 20;
}

static const ordo__rn_ops od_rn_ops = {.renew = od_renew,
                                       .due = od_due,
                                       .busy = od_busy,
                                       .renew_many = od_renew_many,
                                       .early = od_early};

static int od_open(ordo_t **out, const char *url, const ordo_options_t *opts) {
  ORDO_UNUSED(opts);
  od_place *p = calloc(1, sizeof *p);
  if (!p)
    return ORDO_ENOMEM;
  int rc = od_parse_url(url, &p->u);
  if (rc) {
    free(p);
    return rc;
  }
  if (p->u.tls.on) {
    /* A file that cannot be read, or holds no certificate or key, makes
     * the URL unusable: ORDO_EURL, as for a malformed one. */
    char err[512];
    p->tls = ordo__tls_client_new(&p->u.tls, err, sizeof err);
    if (!p->tls) {
      free(p);
      return ORDO_EURL;
    }
  }
  atomic_init(&p->next_id, 1);
  p->ctl_tmo = -1;
  ordo__mutex_init(&p->ctl_mu);
  rc = ordo__rn_start(&p->rn, &od_rn_ops, p);
  if (rc) {
    ordo__mutex_destroy(&p->ctl_mu);
    ordo__tls_client_free(p->tls);
    free(p);
    return rc;
  }
  *out = &p->base;
  return 0;
}

static void od_close(ordo_t *o) {
  od_place *p = op(o);
  ordo__rn_stop(&p->rn);
  if (p->ctl)
    redisFree(p->ctl);
  ordo__mutex_destroy(&p->ctl_mu);
  ordo__tls_client_free(p->tls);
  free(p);
}

int ordo__od_txn_begin(ordo_t *o, ordo_txn_t **out, const char *gid,
                       void *owner, long connect_ms) {
  od_place *p = op(o);
  if (connect_ms <= 0 || connect_ms > p->u.timeout_ms)
    connect_ms = p->u.timeout_ms;
  od_txn *t = calloc(1, sizeof *t);
  if (!t)
    return ORDO_ENOMEM;
  if (gid)
    snprintf(t->gid, sizeof t->gid, "%s", gid);
  t->owner = owner;
  long lease_ms = OD_DEFAULT_LEASE_MS;
  uint64_t sid = 0;
  int rc = od_connect(p, &t->c, &lease_ms, &sid, t->gid, connect_ms);
  if (rc) {
    free(t);
    return rc;
  }
  atomic_init(&t->sess_id, sid);
  t->tmo = connect_ms; /* the socket's timeout now */
  t->base.id = atomic_fetch_add(&p->next_id, 1);
  ordo__mutex_init(&t->mu);
  atomic_init(&t->lease_lost, false);
  atomic_init(&t->renewed_ns, ordo__now_ns());
  atomic_init(&t->lease_ns, (uint64_t)lease_ms * OD_MS);
  atomic_init(&t->aborts, 0);
  ordo__rn_link(&p->rn, &t->rn, &t->base, &t->mu);
  *out = &t->base;
  return 0;
}

static int od_txn_begin(ordo_t *o, ordo_txn_t **out, int priority) {
  ORDO_UNUSED(priority); /* sent with each LOCK: api.c keeps it in base */
  return ordo__od_txn_begin(o, out, NULL, NULL, 0);
}

void *ordo__od_txn_owner(const ordo_txn_t *t) {
  return ((const od_txn *)t)->owner;
}

bool ordo__od_txn_holding(const ordo_txn_t *t) {
  return atomic_load(&((const od_txn *)t)->rn.holding);
}

bool ordo__od_txn_unanswered(const ordo_txn_t *t) {
  return ((const od_txn *)t)->unanswered;
}

static void od_txn_end(ordo_txn_t *tx) {
  od_txn *t = ot(tx);
  od_place *p = op(tx->o);
  ordo__rn_unlink(&p->rn, &t->rn);
  /* Waits out a renewal in progress; after it no other thread knows t. */
  ordo__mutex_lock(&t->mu);
  if (t->c && t->nh > 0) {
    /* Released before we return, so that the next LOCK of another
     * session cannot reach the server before our close does. */
    const char *av[1] = {"UNLOCK"};
    size_t al[1] = {6};
    if (set_tmo(t->c, &t->tmo, p->u.timeout_ms) == 0) {
      redisReply *r = od_call(t->c, 1, av, al);
      if (r)
        freeReplyObject(r);
    }
  }
  if (t->c)
    redisFree(t->c);
  holds_clear(t);
  free(t->h);
  ordo__mutex_unlock(&t->mu);
  ordo__mutex_destroy(&t->mu);
  free(t);
}

/* Reconnects a txn whose connection was lost, within tmo_ms. Caller holds
 * t->mu. */
static int ensure_conn(od_place *p, od_txn *t, long tmo_ms)
    ORDO_REQUIRES(t->mu) {
  if (t->c)
    return 0;
  long lease_ms = (long)(atomic_load(&t->lease_ns) / OD_MS);
  uint64_t sid = 0;
  int rc = od_connect(p, &t->c, &lease_ms, &sid, t->gid, tmo_ms);
  if (rc)
    return rc;
  atomic_store(&t->sess_id, sid);
  t->tmo = tmo_ms; /* the socket's timeout now */
  atomic_store(&t->lease_ns, (uint64_t)lease_ms * OD_MS);
  return 0;
}

/*
 * record_grant -- enters a LOCK's reply into t's holds. copies[i] is a copy
 * of r[i]'s key made before the LOCK when t did not hold it, else NULL;
 * used copies are set to NULL. Returns 0, or ORDO_EBACKEND when the reply
 * is not the one docs/protocol.md describes (nothing is recorded then).
 * Caller holds t->mu; t->h has room for n more entries.
 */
static int record_grant(od_txn *t, const ordo_req_t *r, size_t n,
                        const redisReply *rep, uint8_t **copies)
    ORDO_REQUIRES(t->mu) {
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
      rep->element[0]->type != REDIS_REPLY_INTEGER ||
      rep->element[1]->type != REDIS_REPLY_ARRAY ||
      rep->element[1]->elements != 2 * n)
    return ORDO_EBACKEND;
  const redisReply *kv = rep->element[1];
  /* The reply is in the canonical order, as r is. */
  for (size_t i = 0; i < n; i++) {
    const redisReply *k = kv->element[2 * i], *f = kv->element[2 * i + 1];
    if (k->type != REDIS_REPLY_STRING || f->type != REDIS_REPLY_INTEGER ||
        k->len != r[i].len || memcmp(k->str, r[i].key, k->len) != 0)
      return ORDO_EBACKEND;
  }
  for (size_t i = 0; i < n; i++) {
    uint64_t token = (uint64_t)kv->element[2 * i + 1]->integer;
    long at = hold_find(t, r[i].key, r[i].len);
    if (at >= 0) {
      od_hold *h = &t->h[at];
      h->count++;
      if (r[i].mode > h->mode)
        h->mode = r[i].mode;
      h->token = token;
      continue;
    }
    size_t ins = (size_t)(-at - 1);
    memmove(&t->h[ins + 1], &t->h[ins], (t->nh - ins) * sizeof *t->h);
    t->h[ins] = (od_hold){copies[i], r[i].len, 1, r[i].mode, token};
    copies[i] = NULL;
    t->nh++;
  }
  /* The lease's remaining validity: a LOCK that waited long may have been
   * renewed last well before its grant. Renewal is due as if the lease had
   * been renewed at now + remaining - length, or at sent if that is later. */
  uint64_t now = ordo__now_ns(), len = atomic_load(&t->lease_ns);
  uint64_t left = rep->element[0]->integer > 0
                      ? (uint64_t)rep->element[0]->integer * OD_MS
                      : 0;
  uint64_t eff = now + left > len ? now + left - len : 0;
  if (eff < atomic_load(&t->renewed_ns))
    atomic_store(&t->renewed_ns, eff);
  return 0;
}

/* ordod.h; OD_SHARD_GRACE_MS above. */
long ordo__od_shard_bound(ordo_t *o, uint64_t deadline_ns, long *wait_ms) {
  long tmo = op(o)->u.timeout_ms;
  uint64_t now = ordo__now_ns();
  long left =
      deadline_ns > now ? (long)((deadline_ns - now + OD_MS - 1) / OD_MS) : 0;
  if (deadline_ns == ORDO_NO_DEADLINE) {
    if (wait_ms)
      *wait_ms = -1;
    return tmo;
  }
  long margin = left / 20;
  if (margin > OD_SHARD_MARGIN_MAX_MS)
    margin = OD_SHARD_MARGIN_MAX_MS;
  long wait = left - margin;
  if (wait_ms)
    *wait_ms = wait;
  long grace = tmo < OD_SHARD_GRACE_MS ? tmo : OD_SHARD_GRACE_MS;
  return left > wait + grace ? left : wait + grace;
}

/*
 * od_lock -- LOCK n k1 X|S ... [WAIT ms] [PRIORITY p] [HELDAT h] (h and
 * sharded given by the sharded place alone: ordo__od_lock_heldat). The
 * keys come sorted and distinct (api.c). The deadline becomes the
 * remaining whole milliseconds (rounded up), ORDO_NO_DEADLINE no WAIT at
 * all; the socket's read timeout is WAIT plus timeout_ms, or none, never
 * below WAIT, since hiredis drops a connection whose read timed out. On a
 * shard (sharded), the reconnect and the reply are bounded by the deadline
 * instead (ordo__od_shard_bound: a shard that is down fails the call inside
 * it), and WAIT leaves room for the reply. Everything that can fail for
 * want of memory is allocated before the LOCK is sent, so a grant is
 * always recorded.
 */
static int od_lock(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                   uint64_t deadline_ns, const char *heldat, uint32_t attempt,
                   bool sharded) {
  od_txn *t = ot(tx);
  od_place *p = op(tx->o);
  size_t argc = 2 + 2 * n + 8;
  const char **av = malloc(argc * sizeof *av);
  size_t *al = malloc(argc * sizeof *al);
  uint8_t **copies = calloc(n, sizeof *copies);
  if (!av || !al || !copies) {
    free(av);
    free(al);
    free(copies);
    return ORDO_ENOMEM;
  }
  int rc = 0;
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false)) {
    rc = ORDO_ELEASE;
    goto out;
  }
  if ((rc = ordo__hold_room((void **)&t->h, &t->caph, t->nh, n,
                            sizeof *t->h)) != 0)
    goto out;
  if ((rc = ordo__hold_copy_new(t->h, t->nh, sizeof *t->h, r, n, copies)) != 0)
    goto out;
  if ((rc = ensure_conn(p, t,
                        sharded ? ordo__od_shard_bound(tx->o, deadline_ns, NULL)
                                : p->u.timeout_ms)) != 0)
    goto out;
  char nbuf[24], wbuf[24], pbuf[24], abuf[24];
  size_t a = 0;
  av[a] = "LOCK";
  al[a++] = 4;
  av[a] = nbuf;
  al[a++] = (size_t)snprintf(nbuf, sizeof nbuf, "%zu", n);
  for (size_t i = 0; i < n; i++) {
    av[a] = r[i].key;
    al[a++] = r[i].len;
    av[a] = r[i].mode == ORDO_MODE_S ? "S" : "X";
    al[a++] = 1;
  }
  long tmo = 0; /* no deadline: wait as long as the server makes us */
  if (deadline_ns != ORDO_NO_DEADLINE) {
    uint64_t now = ordo__now_ns();
    uint64_t wait =
        deadline_ns > now ? (deadline_ns - now + OD_MS - 1) / OD_MS : 0;
    tmo = (long)wait + p->u.timeout_ms;
    if (sharded) {
      long w;
      tmo = ordo__od_shard_bound(tx->o, deadline_ns, &w);
      wait = (uint64_t)w;
    }
    av[a] = "WAIT";
    al[a++] = 4;
    av[a] = wbuf;
    al[a++] =
        (size_t)snprintf(wbuf, sizeof wbuf, "%llu", (unsigned long long)wait);
  }
  if (tx->priority != 0) {
    av[a] = "PRIORITY";
    al[a++] = 8;
    av[a] = pbuf;
    al[a++] = (size_t)snprintf(pbuf, sizeof pbuf, "%d", tx->priority);
  }
  if (heldat && heldat[0]) {
    av[a] = "HELDAT";
    al[a++] = 6;
    av[a] = heldat;
    al[a++] = strlen(heldat);
  }
  if (attempt) {
    av[a] = "ATTEMPT";
    al[a++] = 7;
    av[a] = abuf;
    al[a++] = (size_t)snprintf(abuf, sizeof abuf, "%u", attempt);
  }
  bool was_holding = t->nh > 0;
  t->unanswered = false;
  uint64_t sent = ordo__now_ns();
  uint64_t until = sharded && tmo ? sent + (uint64_t)tmo * OD_MS : 0;
  redisReply *rep = set_tmo(t->c, &t->tmo, tmo) == 0
                        ? od_call_by(t->c, (int)a, av, al, until)
                        : NULL;
  if (!rep) {
    t->unanswered = true;
    /* Whatever the txn held went with the session. */
    if (conn_lost(p, t, "LOCK") > 0)
      atomic_store(&t->lease_lost, true);
    rc = ORDO_EBACKEND;
    goto out;
  }
  atomic_store(&t->renewed_ns, sent); /* record_grant may move it back */
  if (rep->type == REDIS_REPLY_ERROR) {
    rc = map_err(rep);
    if (rc == ORDO_EBACKEND || rc == ORDO_EBUSY)
      note_err(p, "LOCK", rep->str);
    if (rc == ORDO_EDEADLK) {
      atomic_fetch_add(&t->aborts, 1);
      holds_clear(t); /* a victim's locks are all released */
    } else if (rc == ORDO_ELEASE) {
      holds_clear(t);
    }
  } else if ((rc = record_grant(t, r, n, rep, copies)) != 0) {
    /* We cannot tell what we hold: end the session, which releases it. */
    note_err(p, "LOCK", "the reply is not the one docs/protocol.md gives");
    redisFree(t->c);
    t->c = NULL;
    t->tmo = -1;
    holds_clear(t);
    if (was_holding)
      atomic_store(&t->lease_lost, true);
  }
  freeReplyObject(rep);
  if (rc == 0 && !was_holding) {
    atomic_store(&t->rn.holding, true);
    ordo__rn_kick(&p->rn,
                  atomic_load(&t->renewed_ns) + atomic_load(&t->lease_ns) / 3);
  }
out:
  ordo__mutex_unlock(&t->mu);
  for (size_t i = 0; i < n; i++)
    free(copies[i]);
  free(copies);
  free(av);
  free(al);
  return rc;
}

int ordo__od_lock_heldat(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                         uint64_t deadline_ns, const char *heldat,
                         uint32_t attempt) {
  return od_lock(tx, r, n, deadline_ns, heldat, attempt, true);
}

static int od_lock_all(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                       uint64_t deadline_ns) {
  return od_lock(tx, r, n, deadline_ns, NULL, 0, false);
}

static int od_unlock(ordo_txn_t *tx, const void *key, size_t len) {
  od_txn *t = ot(tx);
  od_place *p = op(tx->o);
  int rc = 0;
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false)) {
    rc = ORDO_ELEASE;
    goto out;
  }
  long at = hold_find(t, key, len);
  if (at < 0 || !t->c) {
    rc = ORDO_ENOTHELD; /* the record is in step: no need to ask */
    goto out;
  }
  const char *av[2] = {"UNLOCK", key};
  size_t al[2] = {6, len};
  uint64_t sent = ordo__now_ns();
  redisReply *rep = set_tmo(t->c, &t->tmo, p->u.timeout_ms) == 0
                        ? od_call(t->c, 2, av, al)
                        : NULL;
  if (!rep) {
    if (conn_lost(p, t, "UNLOCK") > 1)
      atomic_store(&t->lease_lost, true); /* the others went too */
    rc = ORDO_EBACKEND;
    goto out;
  }
  atomic_store(&t->renewed_ns, sent);
  if (rep->type == REDIS_REPLY_INTEGER && rep->integer == 1) {
    if (--t->h[at].count == 0)
      hold_remove(t, (size_t)at);
  } else if (rep->type == REDIS_REPLY_INTEGER) {
    hold_remove(t, (size_t)at); /* the server says it is not held */
    rc = ORDO_ENOTHELD;
  } else if (rep->type == REDIS_REPLY_ERROR &&
             (rc = map_err(rep)) == ORDO_ELEASE) {
    holds_clear(t);
  } else {
    note_err(p, "UNLOCK",
             rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    rc = ORDO_EBACKEND;
  }
  freeReplyObject(rep);
  atomic_store(&t->rn.holding, t->nh > 0);
out:
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static int od_unlock_all(ordo_txn_t *tx) {
  od_txn *t = ot(tx);
  od_place *p = op(tx->o);
  int rc = 0;
  ordo__mutex_lock(&t->mu);
  if (atomic_exchange(&t->lease_lost, false)) {
    rc = ORDO_ELEASE;
    goto out;
  }
  if (t->nh == 0 || !t->c)
    goto out; /* nothing held: no need to ask */
  const char *av[1] = {"UNLOCK"};
  size_t al[1] = {6};
  uint64_t sent = ordo__now_ns();
  redisReply *rep = set_tmo(t->c, &t->tmo, p->u.timeout_ms) == 0
                        ? od_call(t->c, 1, av, al)
                        : NULL;
  if (!rep) {
    conn_lost(p, t, "UNLOCK");
    rc = ORDO_EBACKEND;
    goto out;
  }
  atomic_store(&t->renewed_ns, sent);
  if (rep->type == REDIS_REPLY_INTEGER) {
    rc = (int)rep->integer;
    holds_clear(t);
  } else if (rep->type == REDIS_REPLY_ERROR &&
             (rc = map_err(rep)) == ORDO_ELEASE) {
    holds_clear(t);
  } else {
    note_err(p, "UNLOCK",
             rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    rc = ORDO_EBACKEND;
  }
  freeReplyObject(rep);
out:
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static int od_held(ordo_txn_t *tx, const void *key, size_t len,
                   ordo_mode_t *mode, uint64_t *fence) {
  od_txn *t = ot(tx);
  ordo__mutex_lock(&t->mu);
  int count =
      ordo__hold_report(t->h, t->nh, sizeof *t->h, key, len, mode, fence);
  ordo__mutex_unlock(&t->mu);
  return count;
}

/*
 * ctl_call -- one command on the place's own session, connected (again)
 * when needed. Caller holds ctl_mu. NULL when the server cannot be reached
 * (the text is kept for ordo_dump).
 */
static redisReply *ctl_call(od_place *p, int argc, const char **av,
                            const size_t *al) ORDO_REQUIRES(p->ctl_mu) {
  if (!p->ctl) {
    long lease_ms;
    uint64_t sid;
    if (od_connect(p, &p->ctl, &lease_ms, &sid, NULL, p->u.timeout_ms) != 0)
      return NULL;
    p->ctl_tmo = p->u.timeout_ms;
  }
  redisReply *r = set_tmo(p->ctl, &p->ctl_tmo, p->u.timeout_ms) == 0
                      ? od_call(p->ctl, argc, av, al)
                      : NULL;
  if (!r) {
    note_err(p, av[0], p->ctl->errstr[0] ? p->ctl->errstr : "failed");
    redisFree(p->ctl);
    p->ctl = NULL;
  }
  return r;
}

/* The counters of INFO that have a field of ordo_stats_t. */
static const struct {
  const char *name;
  size_t off;
} info_fields[] = {
    {"lock_acquired", offsetof(ordo_stats_t, acquired)},
    {"lock_waited", offsetof(ordo_stats_t, waited)},
    {"lock_timeouts", offsetof(ordo_stats_t, timeouts)},
    {"lock_released", offsetof(ordo_stats_t, released)},
    {"lock_wakeups", offsetof(ordo_stats_t, wakeups)},
    {"lock_pokes", offsetof(ordo_stats_t, pokes)},
    {"lock_objects", offsetof(ordo_stats_t, locks)},
    {"lock_waiting", offsetof(ordo_stats_t, waiting)},
    {"deadlocks", offsetof(ordo_stats_t, deadlocks)},
    {"reorders", offsetof(ordo_stats_t, reorders)},
    {"sweep_finds", offsetof(ordo_stats_t, sweep_finds)},
    {"long_waits", offsetof(ordo_stats_t, long_waits)},
    {"max_wait_us", offsetof(ordo_stats_t, max_wait_us)},
};

/* Fills out from INFO's "name:value" lines: the server's counters, which
 * count every session of the server, not this place's alone. */
static void parse_info(const char *s, size_t len, ordo_stats_t *out) {
  const char *end = s + len;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *le = nl ? nl : end;
    const char *colon = memchr(s, ':', (size_t)(le - s));
    if (colon && s[0] != '#') {
      size_t nlen = (size_t)(colon - s);
      for (size_t i = 0; i < sizeof info_fields / sizeof info_fields[0]; i++)
        if (strlen(info_fields[i].name) == nlen &&
            memcmp(info_fields[i].name, s, nlen) == 0) {
          uint64_t v = 0;
          for (const char *q = colon + 1; q < le && *q >= '0' && *q <= '9'; q++)
            v = v * 10 + (uint64_t)(*q - '0');
          memcpy((char *)out + info_fields[i].off, &v, sizeof v);
        }
    }
    s = le + 1;
  }
}

static int od_stats(ordo_t *o, ordo_stats_t *out) {
  od_place *p = op(o);
  memset(out, 0, sizeof *out);
  const char *av[1] = {"INFO"};
  size_t al[1] = {4};
  ordo__mutex_lock(&p->ctl_mu);
  redisReply *r = ctl_call(p, 1, av, al);
  int rc = ORDO_EBACKEND;
  if (r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)) {
    parse_info(r->str, r->len, out);
    rc = 0;
  } else if (r) {
    note_err(p, "INFO", r->type == REDIS_REPLY_ERROR ? r->str : "no text");
  }
  if (r)
    freeReplyObject(r);
  ordo__mutex_unlock(&p->ctl_mu);
  return rc;
}

static int od_graph(ordo_t *o, int fd, ordo_graph_fmt_t fmt) {
  od_place *p = op(o);
  const char *av[2] = {"GRAPH", fmt == ORDO_GRAPH_JSON ? "JSON" : "DOT"};
  size_t al[2] = {5, strlen(av[1])};
  ordo__mutex_lock(&p->ctl_mu);
  redisReply *r = ctl_call(p, 2, av, al);
  int rc = ORDO_EBACKEND;
  if (r && r->type == REDIS_REPLY_STRING)
    rc = ordo__write_all(fd, r->str, r->len);
  else if (r)
    note_err(p, "GRAPH", r->type == REDIS_REPLY_ERROR ? r->str : "no text");
  if (r)
    freeReplyObject(r);
  ordo__mutex_unlock(&p->ctl_mu);
  return rc;
}

/*
 * od_dump -- what this place knows (each txn's holds, from its own record;
 * a txn inside a call is named as busy rather than waited for) and the
 * server's wait-for graph of the moment (GRAPH DOT). Every wait is bounded:
 * txns are only tried, and the server's reply by timeout_ms.
 */
static void od_dump(ordo_t *o, int fd) {
  od_place *p = op(o);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return;
  fprintf(f,
          "%s: lease renewed at a third of each session's lease; "
          "timeout %ld ms\n",
          o->url, p->u.timeout_ms);
  ordo__mutex_lock(&p->rn.mu);
  if (p->rn.err[0])
    fprintf(f, "last error: %s\n", p->rn.err);
  ordo__rn_txn *l;
  LIST_FOREACH(l, &p->rn.txns, link) {
    od_txn *t = ot(l->txn);
    fprintf(
        f, "txn %llu%s%s%s (server: txn %llu):", (unsigned long long)t->base.id,
        t->base.name[0] ? " \"" : "", t->base.name, t->base.name[0] ? "\"" : "",
        (unsigned long long)atomic_load(&t->sess_id));
    if (!ordo__mutex_trylock(&t->mu)) {
      fputs(" busy (inside a call, perhaps a waiting LOCK)\n", f);
      continue;
    }
    fprintf(f, " %s, lease %llu ms, holds %zu key(s)%s\n",
            t->c ? "connected" : "not connected",
            (unsigned long long)(atomic_load(&t->lease_ns) / OD_MS), t->nh,
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
  fputs("server wait-for graph (GRAPH DOT):\n", f);
  fclose(f);
  ordo__write_all(fd, buf, len);
  free(buf);
  if (od_graph(o, fd, ORDO_GRAPH_DOT) != 0) {
    char line[320];
    ordo__mutex_lock(&p->rn.mu);
    int n = snprintf(line, sizeof line, "(unavailable: %s)\n", p->rn.err);
    ordo__mutex_unlock(&p->rn.mu);
    ordo__write_all(fd, line, n > 0 && (size_t)n < sizeof line ? (size_t)n : 0);
  }
}

static void od_on_lease_lost(ordo_t *o, od_lost_cb cb, void *arg) {
  od_place *p = op(o);
  ordo__rn_on_lost(&p->rn, cb, arg);
}

static unsigned od_txn_aborts(const ordo_txn_t *tx) {
  return atomic_load(&((od_txn *)tx)->aborts);
}

const ordo__backend ordo__backend_ordod = {
    .scheme = "ordod",
    .caps = ORDO_CAP_SHARED | ORDO_CAP_SERVER_WAIT | ORDO_CAP_FENCE |
            ORDO_CAP_FENCE_DURABLE | ORDO_CAP_INCREMENTAL | ORDO_CAP_REENTRANT |
            ORDO_CAP_UPGRADE | ORDO_CAP_WAIT_HOLDS_NOTHING,
    .open = od_open,
    .close = od_close,
    .txn_begin = od_txn_begin,
    .txn_end = od_txn_end,
    .lock_all = od_lock_all,
    .lock_all_async = NULL, /* not yet: ORDO_ENOTSUP */
    .unlock = od_unlock,
    .unlock_all = od_unlock_all,
    .cancel = NULL, /* not yet: ORDO_ENOTSUP */
    .held = od_held,
    .stats = od_stats,
    .dump = od_dump,
    .graph = od_graph,
    .txn_aborts = od_txn_aborts,
    .on_lease_lost = od_on_lease_lost,
};
