/*
 * server.c -- ordod: the loop, connections and their turns, sessions,
 * resume tokens and leases, the engine's events and lock-order reports,
 * kills and the long-wait log, the fencing epoch, start-up and shutdown;
 * the TLS listener and its connections' hooks (their SSL is tls.c's).
 * The commands are in commands.c. See README.md.
 *
 * Interface: main, srv_log, srv_now_ms, srv_sess_find, srv_sess_by_token,
 * srv_sess_make_resumable, srv_random, srv_sess_renew, srv_sess_attach,
 * srv_event_push, srv_conf_parse_file, srv_conf_set, srv_order_name,
 * srv_conn_kill, srv_sess_kill, srv_wait_begin, srv_wait_end,
 * srv_wait_rearm. The metrics port and the status page are in http.c.
 */
#include "server/server.h"

#include "core/table.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <poll.h>
#include <unistd.h>

/* ---- Logging and time -------------------------------------------------- */

void srv_log(srv *s, int level, const char *fmt, ...) {
  if (level > s->cfg.verbose)
    return;
  static const char *names[] = {"WARNING", "INFO", "DEBUG"};
  char buf[4096]; /* a cross-shard abort's line names up to 16 hops */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "ordod: %s %s\n",
          names[level < 0   ? 0
                : level > 2 ? 2
                            : level],
          buf);
}

uint64_t srv_now_ms(void) {
  return ordo__now_ns() / 1000000u;
}

/* ---- Sessions -------------------------------------------------------------
 */

static size_t smap_slot(const srv *s, uint64_t id) {
  return (size_t)((id * 0x9E3779B97F4A7C15u) >> 7) & (s->smap_cap - 1);
}

sess *srv_sess_find(srv *s, uint64_t id) {
  for (sess *ss = s->smap[smap_slot(s, id)]; ss; ss = ss->hnext)
    if (ss->id == id)
      return ss;
  return NULL;
}

/* ---- Resume tokens ---------------------------------------------------------
 *
 * A resume token is a bearer secret: whoever shows it takes the session and
 * its locks. So it is 128 bits from the kernel's generator (getrandom(2)),
 * never from ordo__rand64, whose xorshift state one token's bits give away.
 * Tokens are found through a chained hash keyed by SipHash-2-4 (Aumasson and
 * Bernstein, 2012) with a secret key drawn at start-up, and compared in
 * constant time, so neither the lookup's path nor the compare tells a client
 * how much of a guess was right.
 */

int srv_random(void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom((char *)buf + got, n - got, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    got += (size_t)r;
  }
  return 0;
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                               \
  do {                                                                         \
    v0 += v1;                                                                  \
    v1 = ROTL(v1, 13);                                                         \
    v1 ^= v0;                                                                  \
    v0 = ROTL(v0, 32);                                                         \
    v2 += v3;                                                                  \
    v3 = ROTL(v3, 16);                                                         \
    v3 ^= v2;                                                                  \
    v0 += v3;                                                                  \
    v3 = ROTL(v3, 21);                                                         \
    v3 ^= v0;                                                                  \
    v2 += v1;                                                                  \
    v1 = ROTL(v1, 17);                                                         \
    v1 ^= v2;                                                                  \
    v2 = ROTL(v2, 32);                                                         \
  } while (0)

/* siphash24 -- SipHash-2-4 of p[0..n) under the 128-bit key k. */
static uint64_t siphash24(const uint64_t k[2], const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t v0 = k[0] ^ 0x736f6d6570736575ull, v1 = k[1] ^ 0x646f72616e646f6dull,
           v2 = k[0] ^ 0x6c7967656e657261ull, v3 = k[1] ^ 0x7465646279746573ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t m = 0;
    for (int j = 7; j >= 0; j--)
      m = m << 8 | b[i + (size_t)j];
    v3 ^= m;
    SIPROUND;
    SIPROUND;
    v0 ^= m;
  }
  uint64_t last = (uint64_t)n << 56;
  for (size_t j = 0; i + j < n; j++)
    last |= (uint64_t)b[i + j] << (8 * j);
  v3 ^= last;
  SIPROUND;
  SIPROUND;
  v0 ^= last;
  v2 ^= 0xff;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  return v0 ^ v1 ^ v2 ^ v3;
}
#undef SIPROUND
#undef ROTL

/* Equal, in time that depends on n only. */
static bool token_equal(const char *a, const char *b, size_t n) {
  unsigned char d = 0;
  for (size_t i = 0; i < n; i++)
    d |= (unsigned char)(a[i] ^ b[i]);
  return d == 0;
}

sess *srv_sess_by_token(srv *s, const char *token, size_t len) {
  if (len != ORDOD_TOKEN_HEX || s->tmap_cap == 0)
    return NULL;
  uint64_t h = siphash24(s->token_key, token, len);
  for (sess *ss = s->tmap[h & (s->tmap_cap - 1)]; ss; ss = ss->tnext)
    if (token_equal(ss->token, token, len) && ss->resumable && !ss->closing)
      return ss;
  return NULL;
}

static void tmap_remove(srv *s, sess *ss) {
  if (!ss->token[0] || s->tmap_cap == 0)
    return;
  sess **pp = &s->tmap[ss->token_hash & (s->tmap_cap - 1)];
  while (*pp && *pp != ss)
    pp = &(*pp)->tnext;
  if (*pp) {
    *pp = ss->tnext;
    s->ntok--;
  }
  ss->tnext = NULL;
}

int srv_sess_make_resumable(srv *s, sess *ss) {
  if (ss->resumable)
    return 0;
  unsigned char b[ORDOD_TOKEN_BYTES];
  if (srv_random(b, sizeof b) != 0)
    return -1;
  /* Grow the map at a load of 1 (before taking the token, so a failure
   * leaves the session as it was). */
  if (s->ntok + 1 > s->tmap_cap) {
    size_t cap = s->tmap_cap ? s->tmap_cap * 2 : 64;
    sess **m = calloc(cap, sizeof *m);
    if (!m)
      return -1;
    for (size_t i = 0; i < s->tmap_cap; i++)
      for (sess *x = s->tmap[i], *n; x; x = n) {
        n = x->tnext;
        x->tnext = m[x->token_hash & (cap - 1)];
        m[x->token_hash & (cap - 1)] = x;
      }
    free(s->tmap);
    s->tmap = m;
    s->tmap_cap = cap;
  }
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof b; i++) {
    ss->token[2 * i] = hex[b[i] >> 4];
    ss->token[2 * i + 1] = hex[b[i] & 15];
  }
  ss->token[ORDOD_TOKEN_HEX] = 0;
  ss->token_hash = siphash24(s->token_key, ss->token, ORDOD_TOKEN_HEX);
  size_t k = ss->token_hash & (s->tmap_cap - 1);
  ss->tnext = s->tmap[k];
  s->tmap[k] = ss;
  s->ntok++;
  ss->resumable = true;
  return 0;
}

static void smap_remove(srv *s, sess *ss) {
  sess **pp = &s->smap[smap_slot(s, ss->id)];
  while (*pp && *pp != ss)
    pp = &(*pp)->hnext;
  if (*pp)
    *pp = ss->hnext;
  s->nsess--;
}

static void lease_fired(uv_timer_t *t);
static void conn_flush(conn *c);

static void sess_free_cb(uv_handle_t *h) {
  sess *ss = h->data;
  free(ss->req);
  free(ss->keybuf);
  free(ss->heldat);
  free(ss);
}

/* Ends a session: its wait is cancelled and its locks released (all by
 * ordo_txn_end), and it leaves the map. */
void srv_sess_drop(srv *s, sess *ss) {
  if (ss->closing)
    return;
  ss->closing = true;
  if (ss->waiting) {
    srv_probe_wait_end(s, ss);
    srv_wait_end(s, ss, ss->killed ? "killed" : "ended");
  }
  srv_probe_sess_drop(s, ss);
  smap_remove(s, ss);
  tmap_remove(s, ss);
  if (ss->recheck) {
    TAILQ_REMOVE(&s->recheck, ss, rlink);
    ss->recheck = false;
  }
  uv_timer_stop(&ss->lease_timer);
  ordo_txn_end(ss->txn); /* a pending LOCK's cancel event is ignored: the
                            session is gone from the map */
  ss->txn = NULL;
  uv_close((uv_handle_t *)&ss->lease_timer, sess_free_cb);
}

static sess *sess_new(srv *s) {
  sess *ss = calloc(1, sizeof *ss);
  if (!ss)
    return NULL;
  ordo_txn_options_t to = {0, NULL, 0};
  if (ordo_txn_begin(s->o, &ss->txn, &to) != 0) {
    free(ss);
    return NULL;
  }
  /* A session's id is its txn's: the engine's records and graphs name
   * txns, and so they name sessions. */
  ss->id = ordo_txn_id(ss->txn);
  ss->lease_ms = s->cfg.lease_ms;
  uv_timer_init(s->loop, &ss->lease_timer);
  ss->lease_timer.data = ss;
  /* Grow the map at a load of 1. */
  if (s->nsess + 1 > s->smap_cap) {
    size_t cap = s->smap_cap * 2;
    sess **m = calloc(cap, sizeof *m);
    if (m) {
      sess **old = s->smap;
      size_t oc = s->smap_cap;
      s->smap = m;
      s->smap_cap = cap;
      for (size_t i = 0; i < oc; i++)
        for (sess *x = old[i], *n; x; x = n) {
          n = x->hnext;
          size_t k = smap_slot(s, x->id);
          x->hnext = s->smap[k];
          s->smap[k] = x;
        }
      free(old);
    }
  }
  size_t k = smap_slot(s, ss->id);
  ss->hnext = s->smap[k];
  s->smap[k] = ss;
  s->nsess++;
  srv_sess_renew(ss);
  return ss;
}

void srv_sess_renew(sess *ss) {
  ss->expires_ms = srv_now_ms() + (uint64_t)ss->lease_ms;
  uv_timer_start(&ss->lease_timer, lease_fired, (uint64_t)ss->lease_ms, 0);
}

void srv_sess_attach(conn *c, sess *ss) {
  ss->c = c;
  c->sess = ss;
  srv_sess_renew(ss);
}

/* lease_expire -- the lease is over: release everything. A detached
 * session ends here, waiting or not: its lease counts from the moment it
 * detached, so a client that crashed inside a LOCK frees its locks one
 * lease later, and its wait is cancelled with them (ordo_txn_end). */
static void lease_expire(srv *s, sess *ss) {
  if (srv_probe_holds_sess(s, ss)) {
    /* A cycle being aborted pins it: its end waits (srv_sess_unheld), so
     * the cycle the abort confirmed is whole when the abort takes effect. */
    ss->lease_deferred = true;
    return;
  }
  s->lease_expiries++;
  if (!ss->c) {
    srv_log(s, 1, "session %llu: lease ran out while detached; ended",
            (unsigned long long)ss->id);
    srv_sess_drop(s, ss);
    return;
  }
  /* Name the keys it loses, for a RESP3 client's push message. */
  conn *c = ss->c;
  if (c->resp == 3 && ordo__owner_nholds(ordo__engine_owner(ss->txn)) > 0) {
    /* A RESP3 client hears at once which keys it lost. */
    srv_held_write(&c->out, s, ss, true);
  }
  int n = ordo_unlock_all(ss->txn);
  if (n > 0) {
    ss->lease_lost = true;
    srv_log(s, 1, "session %llu: lease ran out; %d lock(s) released",
            (unsigned long long)ss->id, n);
    conn_flush(c);
  }
}

static void conn_close(conn *c);

bool srv_conn_gone(conn *c) {
  uv_os_fd_t fd;
  if (c->closing)
    return true;
  if (uv_fileno(&c->h.handle, &fd) != 0)
    return false;
  struct pollfd pf = {.fd = fd, .events = POLLRDHUP};
  if (poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
    conn_close(c);
    return true;
  }
  return false;
}

/* Bytes the kernel holds for c that the loop has not read yet. */
static size_t conn_unread(conn *c) {
  uv_os_fd_t fd;
  int n = 0;
  if (uv_fileno(&c->h.handle, &fd) != 0 || ioctl(fd, FIONREAD, &n) != 0)
    return 0;
  return n > 0 ? (size_t)n : 0;
}

/* Decides, after this turn's reads, the leases that ran out while their
 * connection had unread bytes: one that a request renewed meanwhile, or
 * whose connection now has requests waiting for their turn, lives on. */
static void recheck_cb(uv_check_t *h) {
  srv *s = h->data;
  sess *ss;
  while ((ss = TAILQ_FIRST(&s->recheck)) != NULL) {
    TAILQ_REMOVE(&s->recheck, ss, rlink);
    ss->recheck = false;
    if (srv_now_ms() < ss->expires_ms || (ss->waiting && ss->c))
      continue; /* renewed: its timer runs again */
    if (ss->c && ss->c->deferred) {
      srv_sess_renew(ss);
      continue;
    }
    lease_expire(s, ss);
  }
  uv_check_stop(h);
}

/* The lease timer. A waiting LOCK of an attached session keeps its lease
 * alive; a detached session's runs out, waiting or not. The lease never
 * runs out because the loop was busy with others: a timer that fires
 * before the lease the last command gave waits out the rest; requests of
 * the session's connection that wait for their turn count as activity
 * (they renew it when they run); and bytes the kernel holds for it that the
 * loop has not read yet are read first (recheck_cb decides after this
 * turn's reads). */
static void lease_fired(uv_timer_t *t) {
  sess *ss = t->data;
  srv *s = t->loop->data;
  if (ss->waiting && ss->c) {
    srv_sess_renew(ss);
    return;
  }
  uint64_t now = srv_now_ms();
  if (now < ss->expires_ms) {
    /* The loop reads its clock once a turn, and every command renews the
     * timer from that reading: a turn that ran long (a pipeline of
     * thousands of commands, under a sanitizer) fires it before the lease
     * the last command gave. expires_ms is the lease: wait out the rest. */
    uv_timer_start(&ss->lease_timer, lease_fired, ss->expires_ms - now, 0);
    return;
  }
  conn *c = ss->c;
  if (c && !c->closing) {
    if (c->deferred) {
      srv_sess_renew(ss);
      return;
    }
    if (!ss->recheck && conn_unread(c) > 0) {
      ss->recheck = true;
      TAILQ_INSERT_TAIL(&s->recheck, ss, rlink);
      uv_check_start(&s->recheck_h, recheck_cb);
      return;
    }
  }
  lease_expire(s, ss);
}

/* ---- Engine events --------------------------------------------------------
 */

void srv_event_push(srv *s, uint64_t sess_id, uint64_t gen, int status) {
  ordo__mutex_lock(&s->ev_mu);
  if (s->nevq == s->capevq) {
    size_t cap = s->capevq ? s->capevq * 2 : 64;
    srv_event *q = realloc(s->evq, cap * sizeof *q);
    if (q) {
      s->evq = q;
      s->capevq = cap;
    }
  }
  if (s->nevq < s->capevq)
    s->evq[s->nevq++] = (srv_event){sess_id, gen, status};
  ordo__mutex_unlock(&s->ev_mu);
  uv_async_send(&s->wake);
}

static void conn_process(conn *c);
static void turn_cb(uv_idle_t *h);

/* " (gid HEX)" for a session with a global id, else "". */
static void sess_gid_tag(srv *s, uint64_t id, char *out, size_t cap) {
  sess *x = srv_sess_find(s, id);
  out[0] = 0;
  if (x && x->have_gid) {
    char hex[ORDOD_GID_HEX + 1];
    srv_gid_hex(x->gid, hex);
    snprintf(out, cap, " (gid %s)", hex);
  }
}

/*
 * deadlock_record -- the cycle ss was the victim of, as its -DEADLOCK
 * names it, into cyc: a cross-shard one's (xvictim) from probe.c, the
 * engine's newest record otherwise, each txn by session id and, when it
 * has one, by global id. Also enters it in the server's deadlock history
 * (DEADLOCKS) and logs it.
 */
static void deadlock_record(srv *s, sess *ss, bool xvictim, char *cyc,
                            size_t cap) {
  ordo_deadlock_t d;
  cyc[0] = 0;
  if (xvictim) {
    snprintf(cyc, cap, "%s", ss->xcycle);
  } else if (ordo_deadlocks(s->o, &d, 1) == 1) {
    size_t used = 0;
    for (size_t k = 0; k < d.nedges && k < ORDO_DL_MAX_EDGES; k++) {
      /* A sharded txn is named by its global id too. */
      char gf[ORDOD_GID_HEX + 8] = "", gt[ORDOD_GID_HEX + 8] = "";
      sess_gid_tag(s, d.edge[k].from, gf, sizeof gf);
      sess_gid_tag(s, d.edge[k].to, gt, sizeof gt);
      int w =
          snprintf(cyc + used, cap - used, "%s%llu%s waits for %llu%s on %.*s",
                   k ? ", " : "", (unsigned long long)d.edge[k].from, gf,
                   (unsigned long long)d.edge[k].to, gt, (int)d.edge[k].key_len,
                   (char *)d.edge[k].key);
      if (w < 0 || (size_t)w >= cap - used)
        break;
      used += (size_t)w;
    }
  }
  srv_dl *r = &s->dl[s->ndl % SRV_DL_HISTORY];
  memset(r, 0, sizeof *r);
  r->seq = ++s->ndl;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  r->time_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
  r->cross_shard = xvictim;
  r->victim = ss->id;
  r->have_gid = ss->have_gid;
  memcpy(r->gid, ss->gid, sizeof r->gid);
  snprintf(r->cycle, sizeof r->cycle, "%s", cyc);
  char g[ORDOD_GID_HEX + 8] = "";
  sess_gid_tag(s, ss->id, g, sizeof g);
  srv_log(s, 1, "deadlock %llu: %svictim session %llu%s; cycle: %s",
          (unsigned long long)r->seq, xvictim ? "cross-shard, " : "",
          (unsigned long long)ss->id, g, cyc);
}

/* lock_answer -- writes the answer of ss's LOCK that ended with status
 * (deadlock_record has named the cycle of a victim in cyc), then its
 * requests that queued behind it run. */
static void lock_answer(srv *s, sess *ss, int status, bool xvictim,
                        const char *cyc) {
  conn *c = ss->c;
  if (status == 0) {
    s->lock_grants++;
    if (c)
      srv_lock_reply(c, ss);
  } else if (c) {
    if (status == ORDO_ETIMEDOUT) {
      s->lock_timeouts++;
      ordo__out_error(&c->out, "TIMEOUT",
                      "the keys could not be had within WAIT; nothing "
                      "is held for this LOCK");
    } else if (status == ORDO_EDEADLK) {
      ordo__out_error(&c->out, "DEADLOCK",
                      "chosen as the victim of a %sdeadlock; every lock "
                      "of this session was released; retry. cycle: %s",
                      xvictim ? "cross-shard " : "", cyc);
    } else {
      ordo__out_error(&c->out, "ERR", "the LOCK ended: %s",
                      ordo_strerror(status));
    }
  } else if (status == ORDO_ETIMEDOUT) {
    s->lock_timeouts++;
  }
  ss->xcycle[0] = 0;
  ss->xhold = false;
  if (c)
    conn_flush(c);
  if (xvictim)
    srv_probe_victim_told(s, ss); /* its pins go: after the answer */
  if (c && !c->closing)
    conn_process(c); /* requests that queued behind the LOCK */
}

void srv_lock_answer(srv *s, sess *ss) {
  if (!ss->xhold)
    return;
  char cyc[1024] = "";
  deadlock_record(s, ss, true, cyc, sizeof cyc);
  lock_answer(s, ss, ORDO_EDEADLK, true, cyc);
}

/* Drains the event queue on the loop thread: each answers a waiting LOCK. */
static void wake_cb(uv_async_t *a) {
  srv *s = a->data;
  for (;;) {
    ordo__mutex_lock(&s->ev_mu);
    srv_event *q = s->evq;
    size_t n = s->nevq;
    s->evq = NULL;
    s->nevq = s->capevq = 0;
    ordo__mutex_unlock(&s->ev_mu);
    if (n == 0) {
      free(q);
      return;
    }
    for (size_t i = 0; i < n; i++) {
      sess *ss = srv_sess_find(s, q[i].sess_id);
      if (!ss || !ss->waiting || ss->gen != q[i].gen)
        continue; /* a stale event: the session or its LOCK is gone */
      ss->waiting = false;
      srv_probe_wait_end(s, ss);
      srv_wait_end(s, ss,
                   q[i].status == 0                ? "granted"
                   : q[i].status == ORDO_ETIMEDOUT ? "timeout"
                   : q[i].status == ORDO_EDEADLK   ? "deadlock"
                                                   : "error");
      /* The wait kept the lease alive; the lease runs anew from its end,
       * so a grant is never lost to a lease that ran out meanwhile. A
       * detached session's lease is left alone: it counts from the detach,
       * and a grant nobody is there to hear does not stretch it. */
      if (ss->c)
        srv_sess_renew(ss);
      /* A cross-shard victim (probe.c): its keys here went when its abort
       * took effect; this makes sure of it before the answer says so. */
      bool xvictim = q[i].status == ORDO_EDEADLK && ss->xcycle[0];
      if (xvictim)
        (void)ordo_unlock_all(ss->txn);
      if (q[i].status == ORDO_EDEADLK)
        s->deadlock_victims++;
      if (xvictim && srv_probe_victim_hold(s, ss)) {
        /* Its keys on other shards are not all gone yet: its answer, and
         * the record that names its cycle, wait for them
         * (srv_lock_answer); so do its later requests. */
        ss->xhold = true;
        continue;
      }
      char cyc[1024] = "";
      if (q[i].status == ORDO_EDEADLK)
        deadlock_record(s, ss, xvictim, cyc, sizeof cyc);
      lock_answer(s, ss, q[i].status, xvictim, cyc);
    }
    free(q);
  }
}

/* ---- Connections ----------------------------------------------------------
 */

/* Called once for each of the connection's handles (the socket, and the
 * linger timer if it was started); the last one frees it. */
static void conn_free_cb(uv_handle_t *h) {
  conn *c = h->data;
  srv *s = c->s;
  if (--c->open_handles > 0)
    return;
  LIST_REMOVE(c, link);
  s->nconns--;
  free(c->in);
  ordo__out_free(&c->out);
  srv_tls_free(c->tls);
  free(c->tls_rbuf);
  free(c);
}

/* Ends what the connection speaks for: it runs no request more, leaves the
 * deferred list, and its session ends or, if resumable, detaches. */
static void conn_detach(conn *c) {
  if (c->closing)
    return;
  c->closing = true;
  if (c->deferred) {
    TAILQ_REMOVE(&c->s->deferred, c, dlink);
    c->s->ndeferred--;
    c->deferred = false;
  }
  sess *ss = c->sess;
  if (ss) {
    ss->c = NULL;
    c->sess = NULL;
    if (ss->resumable && !ss->lease_lost) {
      srv_log(c->s, 1, "session %llu detached; resumable until its lease ends",
              (unsigned long long)ss->id);
      srv_sess_renew(ss);
    } else if (srv_probe_holds_sess(c->s, ss)) {
      /* A cycle being aborted pins it: it ends when the abort lets it go
       * (srv_sess_unheld), so the cycle is whole when the abort takes
       * effect; its lease keeps counting meanwhile. */
      ss->end_deferred = true;
    } else {
      srv_sess_drop(c->s, ss);
    }
  }
}

static void conn_close(conn *c) {
  if (c->closed)
    return;
  if (c->peer)
    srv_probe_conn_closed(c->s, c);
  conn_detach(c);
  c->closed = true;
  if (c->lingering)
    uv_close((uv_handle_t *)&c->linger, conn_free_cb);
  uv_close(&c->h.handle, conn_free_cb);
}

static void linger_done(uv_timer_t *t) {
  conn_close(t->data);
}

static void linger_shut(uv_shutdown_t *r, int status) {
  /* UV_ECANCELED: conn_close came first and the handles are closing. */
  if (status < 0 && status != UV_ECANCELED)
    conn_close(r->data);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void read_cb(uv_stream_t *st, ssize_t n, const uv_buf_t *b);
static void conn_tls_send(conn *c);
static void conn_tls_pump(conn *c);

/* Closes c after its last reply (see ORDOD_LINGER_MS): the session ends
 * now, the reply and a FIN go out, and the connection is freed when the
 * peer closes its side or the linger bound is reached. */
static void conn_linger(conn *c) {
  conn_flush(c);
  if (c->closing) /* the flush found it cut off */
    return;
  if (c->tls) {
    /* The reply's records, then close_notify, then the FIN. */
    srv_tls_shutdown(c->tls);
    conn_tls_send(c);
    if (c->closing)
      return;
  }
  conn_detach(c);
  c->inlen = 0;
  c->need = 0;
  if (uv_timer_init(c->s->loop, &c->linger) != 0) {
    conn_close(c);
    return;
  }
  c->linger.data = c;
  c->shut.data = c;
  c->lingering = true;
  c->open_handles++;
  uv_timer_start(&c->linger, linger_done, ORDOD_LINGER_MS, 0);
  if (uv_shutdown(&c->shut, &c->h.stream, linger_shut) != 0) {
    conn_close(c);
    return;
  }
  /* Reading may have been stopped (a deferred connection); it drains now. */
  uv_read_start(&c->h.stream, alloc_cb, read_cb);
}

typedef struct wreq {
  uv_write_t w;
  conn *c;
  size_t n;
  char data[];
} wreq;

static void write_done(uv_write_t *w, int status) {
  wreq *r = (wreq *)w;
  conn *c = r->c;
  c->writing -= r->n;
  free(r);
  if (status < 0)
    conn_close(c);
}

/* Queues r's bytes on c's socket; false (r freed, c closed) when libuv
 * refuses them. */
static bool conn_write(conn *c, wreq *r) {
  uv_buf_t b = uv_buf_init(r->data, (unsigned)r->n);
  if (uv_write(&r->w, &c->h.stream, &b, 1, write_done) != 0) {
    free(r);
    conn_close(c);
    return false;
  }
  c->writing += r->n;
  return true;
}

/* ---- TLS connections (tls.c; README.md, "TLS") ---------------------------
 *
 * A connection accepted on --tls-port reads ciphertext into its tls_rbuf,
 * which goes to its SSL; the plaintext that comes out is appended to in,
 * where the plain path (conn_got, conn_process) takes it as if the socket
 * had given it. Replies go from out into the SSL, and the ciphertext from
 * the SSL to the socket. A plain connection never comes here.
 */

/* Writes the ciphertext the SSL has queued. What is pending may pass the
 * plain output limit by the records' overhead (a twentieth, and 16 KiB for
 * the handshake's certificates); past that the client is cut off as a
 * plain one is. */
static void conn_tls_send(conn *c) {
  size_t n = srv_tls_pending(c->tls);
  if (n == 0 || c->closed)
    return;
  size_t max_output = c->authed ? c->s->cfg.max_output : ORDOD_PREAUTH_OUTPUT;
  max_output += max_output / 20 + 16384;
  if (c->writing + n > max_output) {
    srv_log(c->s, 1, "client %llu: %zu TLS bytes pending (limit %zu%s); closed",
            (unsigned long long)c->id, c->writing + n, max_output,
            c->authed ? "" : " before AUTH");
    c->s->output_cutoffs++;
    conn_close(c);
    return;
  }
  wreq *r = malloc(sizeof *r + n);
  if (!r) {
    conn_close(c);
    return;
  }
  r->c = c;
  r->n = srv_tls_take(c->tls, r->data, n);
  conn_write(c, r);
}

/* conn_flush for a TLS connection: the replies into the SSL (they wait in
 * out until the handshake is done), then its records to the socket. */
static void conn_tls_flush(conn *c) {
  char why[256];
  while (c->out.len > 0) {
    long w = srv_tls_write(c->tls, c->out.buf, c->out.len, why, sizeof why);
    if (w < 0) {
      srv_log(c->s, 2, "client %llu (%s): TLS: %s; closed",
              (unsigned long long)c->id, c->addr, why);
      conn_close(c);
      return;
    }
    if (w == 0)
      break;
    ordo__out_consume(&c->out, (size_t)w);
  }
  conn_tls_send(c);
}

static void conn_in_room(conn *c, uv_buf_t *b);
static void conn_got(conn *c, size_t n);

/* Takes the plaintext the SSL has into in, running the requests as the
 * plain path does after a read, until the SSL has no more, the connection
 * is deferred (turn_cb pumps it again) or closing. A TLS error, a
 * close_notify or a failed handshake closes the connection (logged at
 * debug: a stranger's garbage is no warning). */
static void conn_tls_pump(conn *c) {
  char why[256];
  bool was_ready = srv_tls_ready(c->tls);
  while (!c->closing && !c->deferred) {
    uv_buf_t b;
    conn_in_room(c, &b);
    if (!b.base) {
      conn_close(c);
      return;
    }
    long r = srv_tls_read(c->tls, b.base, b.len, why, sizeof why);
    if (r < 0) {
      srv_log(c->s, 2, "client %llu (%s): TLS: %s; closed",
              (unsigned long long)c->id, c->addr, why);
      conn_tls_send(c); /* the alert, if OpenSSL wrote one */
      conn_close(c);
      return;
    }
    if (!was_ready && srv_tls_ready(c->tls)) {
      was_ready = true;
      srv_log(c->s, 2, "client %llu (%s): TLS handshake done",
              (unsigned long long)c->id, c->addr);
    }
    if (r == 0)
      break;
    conn_got(c, (size_t)r);
  }
  if (!c->closing)
    conn_tls_send(c); /* handshake messages, session tickets */
}

/* Every second: a TLS connection whose handshake is not done
 * ORDOD_TLS_HANDSHAKE_MS after its accept is dropped, so a peer that
 * connects and says nothing holds no slot for long. */
static void tls_timer_cb(uv_timer_t *t) {
  srv *s = t->data;
  uint64_t now = srv_now_ms();
  conn *c;
  LIST_FOREACH(c, &s->conns, link)
  if (c->tls && !c->closing && !srv_tls_ready(c->tls) &&
      now - c->created_ms >= ORDOD_TLS_HANDSHAKE_MS) {
    srv_log(s, 2, "client %llu (%s): no TLS handshake in %d ms; closed",
            (unsigned long long)c->id, c->addr, ORDOD_TLS_HANDSHAKE_MS);
    conn_close(c);
  }
}

/* Hands pending replies to the socket: try a direct write first, then
 * queue the rest. A client that does not read its replies is cut off once
 * max_output bytes are pending. */
static void conn_flush(conn *c) {
  if (c->closing)
    return;
  if (c->out.oom) {
    conn_close(c);
    return;
  }
  if (c->tls) {
    conn_tls_flush(c);
    return;
  }
  if (c->out.len == 0)
    return;
  if (c->writing == 0) {
    uv_buf_t b = uv_buf_init(c->out.buf, (unsigned)c->out.len);
    int n = uv_try_write(&c->h.stream, &b, 1);
    if (n > 0)
      ordo__out_consume(&c->out, (size_t)n);
    else if (n < 0 && n != UV_EAGAIN) {
      conn_close(c);
      return;
    }
    if (c->out.len == 0)
      return;
  }
  size_t max_output = c->authed ? c->s->cfg.max_output : ORDOD_PREAUTH_OUTPUT;
  if (c->writing + c->out.len > max_output) {
    srv_log(c->s, 1,
            "client %llu: %zu reply bytes pending (limit %zu%s); "
            "closed",
            (unsigned long long)c->id, c->writing + c->out.len, max_output,
            c->authed ? "" : " before AUTH");
    c->s->output_cutoffs++;
    conn_close(c);
    return;
  }
  wreq *r = malloc(sizeof *r + c->out.len);
  if (!r) {
    conn_close(c);
    return;
  }
  r->c = c;
  r->n = c->out.len;
  memcpy(r->data, c->out.buf, c->out.len);
  if (!conn_write(c, r))
    return;
  ordo__out_consume(&c->out, c->out.len);
}

/* Puts c on the deferred list: its requests left over run in the next turn
 * (turn_cb), and it reads nothing until they have, so its buffer stays
 * bounded. */
static void conn_defer(conn *c) {
  srv *s = c->s;
  if (c->deferred || c->closing)
    return;
  c->deferred = true;
  TAILQ_INSERT_TAIL(&s->deferred, c, dlink);
  s->ndeferred++;
  uv_read_stop(&c->h.stream);
  uv_idle_start(&s->turn, turn_cb);
}

void srv_sess_thaw(sess *ss) {
  ss->frozen = false;
  if (ss->c && !ss->c->closing && ss->c->inlen > 0)
    conn_defer(ss->c); /* its requests run in the next turn */
}

void srv_sess_unheld(srv *s, sess *ss) {
  if (ss->closing)
    return;
  if (ss->kill_deferred) {
    ss->kill_deferred = false;
    srv_sess_kill(s, ss, ss->kill_by, strlen(ss->kill_by), NULL);
  } else if (ss->end_deferred && !ss->c) {
    srv_log(s, 2, "session %llu: its pins are gone; ended as its client left",
            (unsigned long long)ss->id);
    srv_sess_drop(s, ss);
  } else if (ss->lease_deferred) {
    ss->lease_deferred = false;
    if (srv_now_ms() >= ss->expires_ms && !(ss->waiting && ss->c))
      lease_expire(s, ss);
  }
}

/* One turn's budget for each connection deferred before this turn (one
 * that has more again goes to the back, for the next turn), between which
 * the loop serves every other client's reads and timers. */
static void turn_cb(uv_idle_t *h) {
  srv *s = h->data;
  for (size_t n = s->ndeferred; n > 0; n--) {
    conn *c = TAILQ_FIRST(&s->deferred);
    if (!c)
      break;
    TAILQ_REMOVE(&s->deferred, c, dlink);
    s->ndeferred--;
    c->deferred = false;
    conn_process(c);
    if (!c->closing && !c->deferred) {
      uv_read_start(&c->h.stream, alloc_cb, read_cb);
      if (c->tls && srv_tls_has_plain(c->tls))
        conn_tls_pump(c); /* plaintext the SSL kept while it was deferred */
    }
  }
  if (TAILQ_EMPTY(&s->deferred))
    uv_idle_stop(h);
}

/* Parses and runs the complete requests in the input buffer, unless a
 * LOCK of this session is waiting (then they wait behind it, as Redis's
 * blocked clients do): at most one turn's budget of them (ORDOD_TURN_*),
 * the rest in a later turn (conn_defer). The output limit is checked after each
 * one, so a client that does not read is cut off as soon as its pending replies
 * pass it, not after a whole read's worth of them. */
static bool arg_eq(const ordo__resp_arg *a, const char *w) {
  return a->len == strlen(w) && strncasecmp(a->ptr, w, a->len) == 0;
}

static void conn_process(conn *c) {
  srv *s = c->s;
  size_t off = 0, ran = 0, wrote = 0;
  bool more = false;
  while (!c->closing && off < c->inlen &&
         !(c->sess && (c->sess->waiting || c->sess->xhold))) {
    /* A frozen session (probe.c: a cycle being aborted waits for it) runs
     * only what cannot break the cycle: EXTEND and PING, so that a long
     * confirmation never costs it its lease. Only a multibulk request is
     * looked at (an inline one is decoded in place, once). */
    bool frozen = c->sess && c->sess->frozen;
    if (frozen && c->in[off] != '*')
      break;
    if (c->inlen - off < c->need)
      break;
    if (ran == ORDOD_TURN_REQUESTS || wrote >= ORDOD_TURN_OUTPUT) {
      more = true;
      break;
    }
    size_t argc = 0, need = 0;
    const char *err = NULL;
    /* Limits per request, since an AUTH in a pipeline lifts them for the
     * requests after it. */
    bool pre = !c->authed;
    ordo__resp_limits lim = {s->max_args, s->cfg.max_request, 65536,
                             s->cfg.max_request};
    if (pre)
      lim = (ordo__resp_limits){ORDOD_PREAUTH_ARGS, ORDOD_PREAUTH_REQUEST,
                                ORDOD_PREAUTH_REQUEST, ORDOD_PREAUTH_REQUEST};
    long n = ordo__resp_parse(c->in + off, c->inlen - off, &lim, s->argv, &argc,
                              &need, &err);
    if (n == 0) {
      c->need = need;
      break;
    }
    c->need = 0;
    if (frozen && n > 0 &&
        !(argc > 0 &&
          (arg_eq(&s->argv[0], "EXTEND") || arg_eq(&s->argv[0], "PING"))))
      break; /* parsed, not consumed: it runs once the freeze ends */
    if (n < 0) {
      /* A connection that breaks the protocol is told why and closed;
       * nothing else changes. */
      s->protocol_errors++;
      if (pre && n == ORDO__RESP_ELIMIT)
        ordo__out_error(&c->out, "NOAUTH",
                        "before AUTH a request is at most %d bytes and %d "
                        "arguments (%s); closed",
                        ORDOD_PREAUTH_REQUEST, ORDOD_PREAUTH_ARGS,
                        err ? err : "too large");
      else
        ordo__out_error(&c->out, n == ORDO__RESP_ELIMIT ? "LIMIT" : "ERR", "%s",
                        err ? err : "Protocol error");
      conn_linger(c);
      return;
    }
    off += (size_t)n;
    ran++;
    if (argc > 0) {
      s->total_cmds++;
      size_t before = c->out.len;
      srv_dispatch(c, argc, s->argv);
      wrote += c->out.len > before ? c->out.len - before : 0;
      if (c->closing_after_reply) {
        conn_linger(c);
        return;
      }
      size_t lim = c->authed ? s->cfg.max_output : ORDOD_PREAUTH_OUTPUT;
      if (c->writing + c->out.len > lim) {
        conn_flush(c); /* writes what the socket takes; cuts off past lim */
        if (c->closing)
          return;
      }
    }
  }
  if (off > 0) {
    memmove(c->in, c->in + off, c->inlen - off);
    c->inlen -= off;
    if (c->need > off)
      c->need -= off;
  }
  conn_flush(c);
  if (more)
    conn_defer(c);
}

/* The room at the end of c's input buffer, grown within its bounds; a NULL
 * base when no memory. */
static void conn_in_room(conn *c, uv_buf_t *b) {
  size_t want = c->inlen + 65536;
  if (want > c->s->cfg.max_request + 65536)
    want = c->s->cfg.max_request + 65536;
  /* Before AUTH the buffer holds one request of the pre-auth bound and one
   * byte more (so that a request past it is seen as such). */
  if (!c->authed && want > ORDOD_PREAUTH_REQUEST + 1)
    want = c->inlen >= ORDOD_PREAUTH_REQUEST + 1 ? c->inlen + 1
                                                 : ORDOD_PREAUTH_REQUEST + 1;
  if (c->incap < want) {
    char *p = realloc(c->in, want);
    if (!p) {
      b->base = NULL;
      b->len = 0;
      return;
    }
    c->in = p;
    c->incap = want;
  }
  b->base = c->in + c->inlen;
  b->len = c->incap - c->inlen;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  conn *c = h->data;
  (void)suggested;
  if (c->tls) {
    b->base = c->tls_rbuf;
    b->len = ORDOD_TLS_RBUF;
    return;
  }
  conn_in_room(c, b);
}

/* A connection that has not authenticated sent more than one pre-auth
 * request can hold: told so, and closed. */
static void preauth_refuse(conn *c) {
  c->s->protocol_errors++;
  ordo__out_error(&c->out, "NOAUTH",
                  "before AUTH a request is at most %d bytes; closed",
                  ORDOD_PREAUTH_REQUEST);
  conn_linger(c);
}

static void read_cb(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  conn *c = st->data;
  if (n < 0) {
    conn_close(c);
    return;
  }
  if (n == 0)
    return;
  if (c->lingering) {
    c->lingered += (size_t)n;
    c->inlen = 0;
    if (c->lingered > ORDOD_LINGER_BYTES)
      conn_close(c);
    return;
  }
  if (c->tls) {
    if (srv_tls_feed(c->tls, b->base, (size_t)n) != 0)
      conn_close(c);
    else
      conn_tls_pump(c);
    return;
  }
  conn_got(c, (size_t)n);
}

/* n bytes were added at the end of c's input: runs what they complete. */
static void conn_got(conn *c, size_t n) {
  c->inlen += n;
  if (!c->authed && c->inlen > ORDOD_PREAUTH_REQUEST) {
    /* Bytes past one pre-auth request: process what parses (an AUTH among
     * them lifts the bound), and refuse the rest if it is still too much. */
    conn_process(c);
    if (!c->closing && !c->authed && !c->deferred &&
        c->inlen > ORDOD_PREAUTH_REQUEST) {
      preauth_refuse(c);
      return;
    }
    return;
  }
  if (c->inlen >= c->incap && c->inlen > c->s->cfg.max_request) {
    ordo__out_error(&c->out, "LIMIT", "request larger than %zu bytes",
                    c->s->cfg.max_request);
    conn_linger(c);
    return;
  }
  conn_process(c);
}

static void on_connection(uv_stream_t *server, int status) {
  srv *s = server->data;
  if (status < 0)
    return;
  conn *c = calloc(1, sizeof *c);
  if (!c)
    return;
  c->s = s;
  c->resp = 2;
  c->id = ++s->next_conn_id;
  c->created_ms = srv_now_ms();
  c->h.handle.data = c;
  c->open_handles = 1;
  bool is_tls = server == (uv_stream_t *)&s->tls_tcp;
  bool is_tcp = is_tls || server == (uv_stream_t *)&s->tcp;
  if (is_tcp)
    uv_tcp_init(s->loop, &c->h.tcp);
  else
    uv_pipe_init(s->loop, &c->h.pipe, 0);
  LIST_INSERT_HEAD(&s->conns, c, link);
  s->nconns++;
  if (uv_accept(server, &c->h.stream) != 0) {
    conn_close(c);
    return;
  }
  if (is_tls) {
    c->tls = srv_tls_new(s->tls_ctx);
    c->tls_rbuf = malloc(ORDOD_TLS_RBUF);
    if (!c->tls || !c->tls_rbuf) {
      conn_close(c);
      return;
    }
  }
  s->total_conns++;
  if (is_tcp) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0) {
      char ip[48] = "?";
      int port = 0;
      if (ss.ss_family == AF_INET) {
        uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
      } else if (ss.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
      }
      snprintf(c->addr, sizeof c->addr, "%s:%d", ip, port);
    }
    /* Dead peers are found by TCP keepalive. */
    uv_tcp_keepalive(&c->h.tcp, 1, 60);
    uv_tcp_nodelay(&c->h.tcp, 1);
  } else {
    snprintf(c->addr, sizeof c->addr, "unix");
  }
  srv_acl_conn_init(c); /* the default user, authenticated if it needs no
                          password */
  if (s->nconns > s->cfg.maxclients) {
    /* Refused, but told why: the limit stays below the fd limit. */
    s->rejected_conns++;
    ordo__out_error(&c->out, "LIMIT", "max number of clients reached (%d)",
                    s->cfg.maxclients);
    conn_flush(c);
    conn_close(c);
    return;
  }
  c->sess = sess_new(s);
  if (!c->sess) {
    conn_close(c);
    return;
  }
  c->sess->c = c;
  uv_read_start(&c->h.stream, alloc_cb, read_cb);
}

/* ---- Kills ----------------------------------------------------------------
 */

void srv_conn_kill(conn *c) {
  srv_log(c->s, 1, "client %llu: killed (CLIENT KILL)",
          (unsigned long long)c->id);
  conn_close(c);
}

void srv_sess_kill(srv *s, sess *ss, const char *by, size_t by_len,
                   const conn *self) {
  if (srv_probe_holds_sess(s, ss)) {
    /* A cycle being aborted pins it: the kill, and its -KILLED, wait until
     * the abort lets it go (srv_sess_unheld), so the cycle is whole when
     * the abort takes effect. */
    ss->kill_deferred = true;
    snprintf(ss->kill_by, sizeof ss->kill_by, "%.*s", (int)by_len, by);
    return;
  }
  conn *c = ss->c;
  uint64_t id = ss->id;
  srv_log(s, 1, "session %llu: killed by %.*s (SESSION KILL)",
          (unsigned long long)id, (int)by_len, by);
  /* The session ends now, resumable or not: its locks go (the engine wakes
   * whom they unblock) and a waiting LOCK is cancelled. */
  ss->killed = true;
  if (c) {
    c->sess = NULL;
    ss->c = NULL;
  }
  srv_sess_drop(s, ss);
  if (!c || c == self)
    return;
  /* Its connection hears why, as the answer to its pending LOCK or, in
   * RESP2, to its next command, and is closed after it (conn_linger, so
   * the reply is not lost to a reset). */
  ordo__out_error(&c->out, "KILLED",
                  "session %llu was killed by %.*s (SESSION KILL)",
                  (unsigned long long)id, (int)by_len, by);
  conn_linger(c);
}

/* ---- The long-wait log (LOCKWAITS) -----------------------------------------
 *
 * Every waiting LOCK is on s->lwq, in the order the waits began, so with
 * one bound the first on the list is the next to pass it, and one timer
 * serves them all. When a wait passes --log-lock-waits it leaves the list
 * (it is logged once), and its blocker chain is read from the engine, as
 * PostgreSQL's log_lock_waits names the process holding the lock and the
 * wait queue: for each key it waits for, the key's holders and queue
 * (ordo__table_key_each, under that key's stripe mutex alone), then the
 * same for each holder that waits in turn, breadth first, at most
 * LW_CHAIN sessions.
 */
#define LW_CHAIN 16
#define LW_KEYS_SHOWN 4

typedef struct lw_line {
  char held[256], queue[256];
  size_t hused, qused;
  uint64_t self;
  uint64_t follow[LW_CHAIN]; /* holders other than the waiter */
  size_t nfollow;
} lw_line;

static void lw_put(char *b, size_t cap, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void lw_put(char *b, size_t cap, size_t *used, const char *fmt, ...) {
  if (*used >= cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(b + *used, cap - *used, fmt, ap);
  va_end(ap);
  if (w > 0)
    *used = *used + (size_t)w < cap ? *used + (size_t)w : cap - 1;
}

/* Under the key's stripe mutex: only appends to l's buffers. */
static void lw_key_item(void *arg, uint64_t owner, int mode, uint64_t fence,
                        uint32_t count, bool waiting) {
  lw_line *l = arg;
  (void)fence;
  (void)count;
  const char *m = mode == ORDO_MODE_S ? "S" : "X";
  if (waiting) {
    lw_put(l->queue, sizeof l->queue, &l->qused, "%s%llu %s",
           l->qused ? ", " : "", (unsigned long long)owner, m);
    return;
  }
  lw_put(l->held, sizeof l->held, &l->hused, "%s%llu %s", l->hused ? ", " : "",
         (unsigned long long)owner, m);
  if (owner != l->self && l->nfollow < LW_CHAIN)
    l->follow[l->nfollow++] = owner;
}

/* The blocker chain of ss into out, one line a waiting session, breadth
 * first: queue holds the session ids seen, in the order they are shown. */
static void lw_chain(srv *s, sess *ss, char *out, size_t cap) {
  uint64_t queue[LW_CHAIN];
  size_t nt = 1, used = 0;
  queue[0] = ss->id;
  out[0] = 0;
  for (size_t i = 0; i < nt; i++) {
    sess *x = srv_sess_find(s, queue[i]);
    if (!x || !x->waiting || !x->req)
      continue;
    char g[ORDOD_GID_HEX + 8];
    sess_gid_tag(s, x->id, g, sizeof g);
    lw_put(out, cap, &used, "%ssession %llu%s waits for", used ? "\n" : "",
           (unsigned long long)x->id, g);
    for (size_t k = 0; k < x->nreq && k < LW_KEYS_SHOWN; k++) {
      lw_line l;
      memset(&l, 0, sizeof l);
      l.self = x->id;
      ordo__table_key_each(ordo__engine_table(s->o), x->req[k].key,
                           x->req[k].len, lw_key_item, &l);
      lw_put(out, cap, &used, "%s %.*s %s: held by %s; wait queue: %s",
             k ? ";" : "", (int)x->req[k].len, (const char *)x->req[k].key,
             x->req[k].mode == ORDO_MODE_S ? "S" : "X",
             l.hused ? l.held : "none", l.qused ? l.queue : "none");
      for (size_t f = 0; f < l.nfollow; f++) {
        bool seen = false;
        for (size_t j = 0; j < nt; j++)
          seen = seen || queue[j] == l.follow[f];
        if (!seen && nt < LW_CHAIN)
          queue[nt++] = l.follow[f];
      }
    }
    if (x->nreq > LW_KEYS_SHOWN)
      lw_put(out, cap, &used, "; and %zu more key(s)", x->nreq - LW_KEYS_SHOWN);
  }
}

/* ss's wait passed the bound: an entry in the log, and a line in the
 * server's log. */
static void lw_record(srv *s, sess *ss, uint64_t now) {
  srv_lw *r = &s->lw[s->nlw % SRV_LW_HISTORY];
  memset(r, 0, sizeof *r);
  r->seq = ++s->nlw;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t real = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
  r->start_ms = ss->wait_start_ms;
  r->time_ms = real - (now - ss->wait_start_ms);
  r->sess = ss->id;
  r->have_gid = ss->have_gid;
  memcpy(r->gid, ss->gid, sizeof r->gid);
  r->state = "waiting";
  r->nkeys = ss->nreq;
  size_t used = 0;
  for (size_t k = 0; k < ss->nreq && k < SRV_LW_KEYS; k++) {
    size_t n = ss->req[k].len;
    if (used + n > sizeof r->kbuf)
      break;
    memcpy(r->kbuf + used, ss->req[k].key, n);
    r->klen[k] = (uint16_t)n;
    r->nshown = k + 1;
    used += n;
  }
  lw_chain(s, ss, r->chain, sizeof r->chain);
  ss->lw_seq = r->seq;
  /* One line for the log: the chain's lines joined by " | ". */
  char line[sizeof r->chain];
  snprintf(line, sizeof line, "%s", r->chain);
  for (char *p = line; (p = strchr(p, '\n')) != NULL;)
    *p = '|';
  char g[ORDOD_GID_HEX + 8];
  sess_gid_tag(s, ss->id, g, sizeof g);
  srv_log(s, 1,
          "session %llu%s still waiting after %llu ms for %zu key(s) "
          "(--log-lock-waits %ld); blocker chain: %s",
          (unsigned long long)ss->id, g,
          (unsigned long long)(now - ss->wait_start_ms), ss->nreq,
          s->cfg.log_lock_waits_ms, line);
}

static void lw_fired(uv_timer_t *t) {
  srv *s = t->data;
  long ms = s->cfg.log_lock_waits_ms;
  uint64_t now = srv_now_ms();
  sess *ss;
  while (ms > 0 && (ss = TAILQ_FIRST(&s->lwq)) != NULL &&
         ss->wait_start_ms + (uint64_t)ms <= now) {
    TAILQ_REMOVE(&s->lwq, ss, lwlink);
    ss->lw_listed = false;
    lw_record(s, ss, now);
  }
  srv_wait_rearm(s);
}

void srv_wait_rearm(srv *s) {
  uv_timer_stop(&s->lw_timer);
  sess *ss = TAILQ_FIRST(&s->lwq);
  long ms = s->cfg.log_lock_waits_ms;
  if (ms <= 0 || !ss)
    return;
  uint64_t due = ss->wait_start_ms + (uint64_t)ms, now = srv_now_ms();
  uv_timer_start(&s->lw_timer, lw_fired, due > now ? due - now : 0, 0);
}

void srv_wait_begin(srv *s, sess *ss) {
  ss->wait_start_ms = srv_now_ms();
  ss->lw_seq = 0;
  if (ss->lw_listed)
    TAILQ_REMOVE(&s->lwq, ss, lwlink);
  ss->lw_listed = true;
  TAILQ_INSERT_TAIL(&s->lwq, ss, lwlink);
  if (TAILQ_FIRST(&s->lwq) == ss)
    srv_wait_rearm(s);
}

void srv_wait_end(srv *s, sess *ss, const char *state) {
  if (ss->lw_listed) {
    bool first = TAILQ_FIRST(&s->lwq) == ss;
    TAILQ_REMOVE(&s->lwq, ss, lwlink);
    ss->lw_listed = false;
    if (first)
      srv_wait_rearm(s);
  }
  if (ss->lw_seq) {
    srv_lw *r = &s->lw[(ss->lw_seq - 1) % SRV_LW_HISTORY];
    if (r->seq == ss->lw_seq) {
      r->state = state;
      r->waited_ms = srv_now_ms() - ss->wait_start_ms;
    }
    ss->lw_seq = 0;
  }
}

/* ---- The fencing epoch and the restart delay ------------------------------
 */

static int fsync_path(const char *path, int flags) {
  int fd = open(path, flags);
  if (fd < 0)
    return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

/*
 * Fencing tokens are epoch << 40 | the engine's token, and the epoch is
 * reserved in --dir/ordod.state, fsync'd (file and folder) before the
 * server takes its first client: every token of this run is larger than
 * every token of any earlier one, kill -9 included. The same file says
 * whether the last run stopped cleanly.
 */
static int state_open(srv *s, bool *unclean) {
  char path[600], tmp[610];
  snprintf(path, sizeof path, "%s/ordod.state", s->cfg.dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  uint64_t epoch = 0;
  int clean = 1;
  FILE *f = fopen(path, "r");
  *unclean = false;
  if (f) {
    unsigned long long e = 0;
    if (fscanf(f, "epoch %llu clean %d", &e, &clean) == 2) {
      epoch = e;
      *unclean = clean == 0;
    }
    fclose(f);
  }
  s->epoch = epoch + 1;
  if (s->epoch >= (1u << 23)) {
    fprintf(stderr, "ordod: the fencing epoch in %s is exhausted\n", path);
    return -1;
  }
  f = fopen(tmp, "w");
  if (!f)
    return -1;
  fprintf(f, "epoch %llu clean 0\n", (unsigned long long)s->epoch);
  if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
    fclose(f);
    return -1;
  }
  fclose(f);
  if (rename(tmp, path) != 0)
    return -1;
  return fsync_path(s->cfg.dir, O_RDONLY | O_DIRECTORY);
}

static void state_close_clean(srv *s) {
  char path[600], tmp[610];
  snprintf(path, sizeof path, "%s/ordod.state", s->cfg.dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f)
    return;
  fprintf(f, "epoch %llu clean 1\n", (unsigned long long)s->epoch);
  fflush(f);
  fsync(fileno(f));
  fclose(f);
  rename(tmp, path);
  fsync_path(s->cfg.dir, O_RDONLY | O_DIRECTORY);
}

/* ---- Configuration --------------------------------------------------------
 */

const char *srv_order_name(ordo_order_mode_t m) {
  return m == ORDO_ORDER_WARN     ? "warn"
         : m == ORDO_ORDER_REFUSE ? "refuse"
                                  : "off";
}

static void conf_defaults(srv_config *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->bind, sizeof c->bind, "127.0.0.1");
  c->port = ORDOD_DEFAULT_PORT;
  snprintf(c->dir, sizeof c->dir, "./ordod-data");
  c->maxclients = 10000;
  c->lease_ms = 30000;
  c->max_keys = 1024;
  c->max_key_len = ORDO_KEY_MAX_DEFAULT;
  c->max_request = 4u << 20;
  c->max_output = 4u << 20;
  c->max_session_locks = 100000;
  c->max_locks = 1000000;
  c->order = ORDO_ORDER_OFF;
  c->starvation_us = 1000;
  c->starvation_holds = 8;
  c->verbose = 1;
  c->probe_delay_ms = 1;
  c->peer_blocked_max = 65536;
  c->metrics_port = -1;
  snprintf(c->metrics_bind, sizeof c->metrics_bind, "127.0.0.1");
  c->log_lock_waits_ms = 1000;
  c->tls_port = -1;
  c->tls_auth = SRV_TLS_AUTH_YES;
}

/* One option by name; 0, or -1 with err set. Shared by flags, the config
 * file and CONFIG SET (which applies it to a copy, and takes the fields
 * that may change at run time from it). */
int srv_conf_set(srv_config *c, const char *name, const char *val, char *err,
                 size_t errlen) {
  char *end = NULL;
  long long v = 0;
  bool num = val && *val;
  if (num) {
    errno = 0;
    v = strtoll(val, &end, 10);
    num = !errno && end && *end == 0;
  }
#define IS(n) (strcmp(name, n) == 0)
#define NUM(lo, hi)                                                            \
  if (!num || v < (lo) || v > (hi)) {                                          \
    snprintf(err, errlen, "--%s wants a number in %lld..%lld, got '%s'", name, \
             (long long)(lo), (long long)(hi), val ? val : "");                \
    return -1;                                                                 \
  }
  /* A string option must have a value that fits its field: a bare
   * 'requirepass' line once set the password "(null)", and a longer one
   * was cut short without a word. */
#define STR(field)                                                             \
  if (!val || strlen(val) >= sizeof(field)) {                                  \
    snprintf(err, errlen, "--%s wants a value of at most %zu bytes", name,     \
             sizeof(field) - 1);                                               \
    return -1;                                                                 \
  }                                                                            \
  snprintf(field, sizeof(field), "%s", val)
  if (IS("port")) {
    NUM(0, 65535);
    c->port = (int)v;
  } else if (IS("bind")) {
    STR(c->bind);
  } else if (IS("unixsocket")) {
    STR(c->unixsocket);
  } else if (IS("requirepass")) {
    STR(c->requirepass);
  } else if (IS("aclfile")) {
    STR(c->aclfile);
  } else if (IS("dir")) {
    STR(c->dir);
  } else if (IS("maxclients")) {
    NUM(1, 1000000);
    c->maxclients = (int)v;
  } else if (IS("lease-ms")) {
    NUM(10, 86400000);
    c->lease_ms = (long)v;
  } else if (IS("max-keys")) {
    NUM(1, 65536);
    c->max_keys = (size_t)v;
  } else if (IS("max-request")) {
    NUM(1024, 1 << 30);
    c->max_request = (size_t)v;
  } else if (IS("max-output")) {
    NUM(1024, 1 << 30);
    c->max_output = (size_t)v;
  } else if (IS("max-session-locks")) {
    NUM(1, 100000000);
    c->max_session_locks = (size_t)v;
  } else if (IS("max-locks")) {
    NUM(1, 1000000000);
    c->max_locks = (size_t)v;
  } else if (IS("order")) {
    int m = -1;
    for (int i = ORDO_ORDER_OFF; i <= ORDO_ORDER_REFUSE; i++)
      if (val && strcmp(val, srv_order_name((ordo_order_mode_t)i)) == 0)
        m = i;
    if (m < 0) {
      snprintf(err, errlen, "--order wants off, warn or refuse, got '%s'",
               val ? val : "");
      return -1;
    }
    c->order = (ordo_order_mode_t)m;
  } else if (IS("starvation-us")) {
    NUM(0, 60000000);
    c->starvation_us = (long)v;
  } else if (IS("starvation-holds")) {
    NUM(0, 1000000);
    c->starvation_holds = (unsigned)v;
  } else if (IS("verbose")) {
    NUM(0, 2);
    c->verbose = (int)v;
  } else if (IS("no-restart-delay")) {
    c->no_restart_delay = true;
  } else if (IS("peers")) {
    if (!val || strlen(val) >= sizeof c->peers) {
      snprintf(err, errlen, "--peers wants host:port[,host:port...]");
      return -1;
    }
    snprintf(c->peers, sizeof c->peers, "%s", val);
  } else if (IS("shard-name")) {
    if (!val || !*val || strlen(val) >= sizeof c->shard_name) {
      snprintf(err, errlen, "--shard-name wants host:port as peers write it");
      return -1;
    }
    snprintf(c->shard_name, sizeof c->shard_name, "%s", val);
  } else if (IS("probe-delay")) {
    NUM(0, 60000);
    c->probe_delay_ms = (long)v;
  } else if (IS("peer-blocked-max")) {
    NUM(1, 100000000);
    c->peer_blocked_max = (size_t)v;
  } else if (IS("metrics-port")) {
    NUM(0, 65535);
    c->metrics_port = (int)v;
  } else if (IS("metrics-bind")) {
    if (!val || !*val || strlen(val) >= sizeof c->metrics_bind) {
      snprintf(err, errlen, "--metrics-bind wants an address");
      return -1;
    }
    snprintf(c->metrics_bind, sizeof c->metrics_bind, "%s", val);
  } else if (IS("deadlock-timeout")) {
    NUM(1, 86400000);
    c->deadlock_timeout_ms = (long)v;
  } else if (IS("log-lock-waits")) {
    NUM(0, 86400000);
    c->log_lock_waits_ms = (long)v;
  } else if (IS("tls-port")) {
    NUM(0, 65535);
    c->tls_port = (int)v;
  } else if (IS("tls-cert-file") || IS("tls-key-file") ||
             IS("tls-ca-cert-file")) {
    char *dst = IS("tls-cert-file")  ? c->tls_cert
                : IS("tls-key-file") ? c->tls_key
                                     : c->tls_ca;
    if (!val || !*val || strlen(val) >= sizeof c->tls_cert) {
      snprintf(err, errlen, "--%s wants a file name", name);
      return -1;
    }
    snprintf(dst, sizeof c->tls_cert, "%s", val);
  } else if (IS("tls-auth-clients")) {
    int m = srv_tls_auth_parse(val);
    if (m < 0) {
      snprintf(err, errlen,
               "--tls-auth-clients wants yes, no or optional, got '%s'",
               val ? val : "");
      return -1;
    }
    c->tls_auth = m;
  } else {
    snprintf(err, errlen, "unknown option '%s' (see ordod --help)", name);
    return -1;
  }
#undef IS
#undef NUM
#undef STR
  return 0;
}

int srv_conf_parse_file(srv_config *cfg, const char *path, char *err,
                        size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "cannot read config file %s: %s", path,
             strerror(errno));
    return -1;
  }
  char line[1024];
  int lineno = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p == '#' || *p == '\n' || *p == 0)
      continue;
    char *nl = strchr(p, '\n');
    if (nl)
      *nl = 0;
    char *sp = strpbrk(p, " \t");
    char *val = NULL;
    if (sp) {
      *sp = 0;
      val = sp + 1;
      while (*val == ' ' || *val == '\t')
        val++;
    }
    char e[256];
    if (srv_conf_set(cfg, p, val, e, sizeof e) != 0) {
      snprintf(err, errlen, "%s:%d: %s", path, lineno, e);
      fclose(f);
      return -1;
    }
  }
  fclose(f);
  return 0;
}

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: ordod [options]\n\n"
      "ordo's lock server: the ordo engine behind the Redis protocol.\n\n"
      "  --port N            TCP port (default %d; 0 = any free port)\n"
      "  --bind ADDR         address to listen on (default 127.0.0.1); a\n"
      "                      non-loopback address needs --requirepass\n"
      "  --unixsocket PATH   also listen on a Unix socket\n"
      "  --requirepass PASS  clients must AUTH first (the default user's\n"
      "                      password)\n"
      "  --aclfile FILE      users, one 'user NAME RULE...' a line in Redis's\n"
      "                      ACL syntax: on/off, >pass, #sha256, nopass,\n"
      "                      ~pattern, allkeys, resetkeys, +@class, -@class,\n"
      "                      +cmd, -cmd (docs/protocol.md, \"Users and "
      "ACLs\")\n"
      "  --dir DIR           state folder: the fencing epoch (default "
      "./ordod-data)\n"
      "  --maxclients N      connections at once (default 10000, kept below\n"
      "                      the file-descriptor limit)\n"
      "  --lease-ms MS       a session's lease (default 30000)\n"
      "  --no-restart-delay  after an unclean stop, grant at once instead of\n"
      "                      waiting one lease length\n"
      "  --max-keys N        keys in one LOCK (default 1024)\n"
      "  --max-request N     bytes in one request (default 4194304)\n"
      "  --max-output N      pending reply bytes per client (default 4194304)\n"
      "  --max-session-locks N  keys held by one session (default 100000)\n"
      "  --max-locks N       lock objects alive at once in the engine, held,\n"
      "                      awaited or cached (default 1000000); past it a\n"
      "                      LOCK of a new key gets -LIMIT\n"
      "  --order MODE        the lock-order checker: off (default), warn\n"
      "                      (log an inversion of key classes, then lock)\n"
      "                      or refuse (log it and answer -ORDER, taking\n"
      "                      nothing); a key's class is its prefix up to ':'\n"
      "  --starvation-us N   a waiter older than this reserves its keys\n"
      "                      (default 1000; see src/core/README.md)\n"
      "  --starvation-holds N  ...or after N mean hold times, if longer\n"
      "                      (default 8; 0: --starvation-us alone)\n"
      "  --config FILE       read options from FILE (one 'name value' a line;\n"
      "                      flags win)\n"
      "  --verbose N         0 warnings, 1 info (default), 2 debug; 0 also\n"
      "                      turns off the engine's long-wait log\n"
      "  --peers LIST        the other shards, [name=]host:port,... (with\n"
      "                      this server's --requirepass): deadlocks across\n"
      "                      shards are found by probes (docs/distributed.md)\n"
      "  --shard-name NAME   this shard's name as clients and peers write it\n"
      "                      (default BIND:PORT)\n"
      "  --probe-delay MS    a wait this old is probed (default 1; 0: at "
      "once)\n"
      "  --peer-blocked-max N  blocked txns of one peer known here (default\n"
      "                      65536); past it the peer hears -BUSY\n"
      "  --deadlock-timeout MS  search for a deadlock only after a wait\n"
      "                      this long (as PostgreSQL's deadlock_timeout;\n"
      "                      default: at once, when a txn blocks)\n",
      ORDOD_DEFAULT_PORT);
  fprintf(
      f,
      "  --metrics-port N    serve /metrics (Prometheus) and a status page\n"
      "                      over HTTP on this port (0 = any free port;\n"
      "                      default: none); see docs/metrics.md\n"
      "  --metrics-bind ADDR its address (default 127.0.0.1); a non-loopback\n"
      "                      address needs --requirepass\n"
      "  --log-lock-waits MS  a LOCK waiting this long is logged, with its\n"
      "                      blocker chain, and kept for LOCKWAITS (default\n"
      "                      1000; 0: off)\n"
      "  --tls-port N        also listen for TLS on this port (0 = any free\n"
      "                      port; off by default); plain --port stays\n"
      "  --tls-cert-file F   the server's certificate chain (PEM)\n"
      "  --tls-key-file F    its private key (PEM)\n"
      "  --tls-ca-cert-file F  the CA that signs client certificates\n"
      "  --tls-auth-clients yes|no|optional  a client certificate signed\n"
      "                      by that CA is required (yes, default), not\n"
      "                      asked for (no), or checked if given\n"
      "  --help              this text\n\n"
      "Once it accepts connections it prints 'ready port=N' on stdout,\n"
      "then 'tls port=N' with --tls-port and 'metrics port=N' with\n"
      "--metrics-port.\n"
      "Commands: docs/protocol.md, or COMMAND DOCS.\n");
}

/* ---- Start-up and shutdown ------------------------------------------------
 */

static void stop_cb(uv_signal_t *h, int sig) {
  srv *s = h->data;
  srv_log(s, 1, "signal %d: shutting down", sig);
  s->stopping = true;
  uv_stop(s->loop);
}

/* The lock-order checker found an inversion. It calls this from inside
 * ordo_lock_all_async, which only the loop thread calls, so it may log and
 * keep the line for cmd_lock's -ORDER reply. */
static void order_report(const ordo_order_report_t *r, void *arg) {
  srv *s = arg;
  char *b = s->order_last;
  size_t used = 0, cap = sizeof s->order_last;
  b[0] = 0;
  for (size_t i = 0; i < r->nedges && i < ORDO_ORDER_MAX_EDGES; i++) {
    int w = snprintf(b + used, cap - used, "%s%s -> %s", i ? ", " : "",
                     r->edge[i].from, r->edge[i].to);
    if (w < 0 || (size_t)w >= cap - used)
      break;
    used += (size_t)w;
  }
  srv_log(s, 0, "session %llu: lock order %s of key classes: %s (--order %s)",
          (unsigned long long)r->txn,
          r->rank_inversion ? "rank inversion" : "inversion", b,
          srv_order_name(s->cfg.order));
}

static bool loopback(const char *addr) {
  return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0 ||
         strcmp(addr, "localhost") == 0;
}

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

/* Opens the --tls-port listener on the --bind address (addr, whose port
 * is replaced) with the context from the TLS files; 0, or -1 after saying
 * why on stderr (a bad file is named, with OpenSSL's reason). */
static int tls_listen(srv *s, struct sockaddr_storage *addr) {
  char err[1024];
  s->tls_ctx = srv_tls_ctx_new(&s->cfg, err, sizeof err);
  if (!s->tls_ctx) {
    fprintf(stderr, "ordod: %s\n", err);
    return -1;
  }
  if (addr->ss_family == AF_INET6)
    ((struct sockaddr_in6 *)addr)->sin6_port = htons((uint16_t)s->cfg.tls_port);
  else
    ((struct sockaddr_in *)addr)->sin_port = htons((uint16_t)s->cfg.tls_port);
  uv_tcp_init(s->loop, &s->tls_tcp);
  s->tls_tcp.data = s;
  int rc;
  if ((rc = uv_tcp_bind(&s->tls_tcp, (struct sockaddr *)addr, 0)) != 0 ||
      (rc = uv_listen((uv_stream_t *)&s->tls_tcp, 511, on_connection)) != 0) {
    fprintf(stderr, "ordod: cannot listen for TLS on %s:%d: %s\n", s->cfg.bind,
            s->cfg.tls_port, uv_strerror(rc));
    return -1;
  }
  struct sockaddr_storage bound;
  int blen = sizeof bound;
  if (uv_tcp_getsockname(&s->tls_tcp, (struct sockaddr *)&bound, &blen) == 0)
    s->cfg.tls_port = ntohs(bound.ss_family == AF_INET6
                                ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                : ((struct sockaddr_in *)&bound)->sin_port);
  uv_timer_init(s->loop, &s->tls_timer);
  s->tls_timer.data = s;
  uv_timer_start(&s->tls_timer, tls_timer_cb, 1000, 1000);
  s->have_tls = true;
  srv_log(s, 1, "listening for TLS on %s:%d (client certificates: %s)",
          s->cfg.bind, s->cfg.tls_port, srv_tls_auth_name(s->cfg.tls_auth));
  return 0;
}

int main(int argc, char **argv) {
  static srv S;
  srv *s = &S;
  conf_defaults(&s->cfg);
  static struct option longopts[] = {
      {"port", required_argument, 0, 0},
      {"bind", required_argument, 0, 0},
      {"unixsocket", required_argument, 0, 0},
      {"requirepass", required_argument, 0, 0},
      {"aclfile", required_argument, 0, 0},
      {"dir", required_argument, 0, 0},
      {"maxclients", required_argument, 0, 0},
      {"lease-ms", required_argument, 0, 0},
      {"max-keys", required_argument, 0, 0},
      {"max-request", required_argument, 0, 0},
      {"max-output", required_argument, 0, 0},
      {"max-session-locks", required_argument, 0, 0},
      {"max-locks", required_argument, 0, 0},
      {"order", required_argument, 0, 0},
      {"starvation-us", required_argument, 0, 0},
      {"starvation-holds", required_argument, 0, 0},
      {"verbose", required_argument, 0, 0},
      {"peers", required_argument, 0, 0},
      {"shard-name", required_argument, 0, 0},
      {"probe-delay", required_argument, 0, 0},
      {"peer-blocked-max", required_argument, 0, 0},
      {"deadlock-timeout", required_argument, 0, 0},
      {"metrics-port", required_argument, 0, 0},
      {"metrics-bind", required_argument, 0, 0},
      {"log-lock-waits", required_argument, 0, 0},
      {"tls-port", required_argument, 0, 0},
      {"tls-cert-file", required_argument, 0, 0},
      {"tls-key-file", required_argument, 0, 0},
      {"tls-ca-cert-file", required_argument, 0, 0},
      {"tls-auth-clients", required_argument, 0, 0},
      {"no-restart-delay", no_argument, 0, 0},
      {"config", required_argument, 0, 0},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  /* The config file first, so that flags win. */
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--config") == 0) {
      char err[512];
      if (srv_conf_parse_file(&s->cfg, argv[i + 1], err, sizeof err) != 0) {
        fprintf(stderr, "ordod: %s\n", err);
        return 2;
      }
      snprintf(s->cfg.config, sizeof s->cfg.config, "%s", argv[i + 1]);
    }
  int idx = 0, ch;
  opterr = 0;
  while ((ch = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
    if (ch == 'h') {
      usage(stdout);
      return 0;
    }
    if (ch == '?') {
      fprintf(stderr,
              "ordod: unknown or incomplete option '%s' (see ordod "
              "--help)\n",
              argv[optind - 1]);
      return 2;
    }
    const char *name = longopts[idx].name;
    if (strcmp(name, "config") == 0)
      continue;
    char err[256];
    if (srv_conf_set(&s->cfg, name, optarg, err, sizeof err) != 0) {
      fprintf(stderr, "ordod: %s\n", err);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "ordod: unexpected argument '%s' (see ordod --help)\n",
            argv[optind]);
    return 2;
  }
  {
    /* All of the file or nothing: a bad line stops the start. */
    char err[768];
    if (srv_acl_load(&s->acl, s->cfg.aclfile, s->cfg.requirepass, err,
                     sizeof err) != 0) {
      fprintf(stderr, "ordod: %s\n", err);
      return 2;
    }
  }
  if (!loopback(s->cfg.bind) && srv_acl_open(s->acl)) {
    fprintf(stderr,
            "ordod: refusing to listen on %s without --requirepass (or "
            "an --aclfile default user with a password): anyone who can "
            "reach it could take and release locks\n",
            s->cfg.bind);
    srv_acl_free(s->acl);
    return 2;
  }
  if (s->cfg.metrics_port >= 0 && !loopback(s->cfg.metrics_bind) &&
      srv_acl_open(s->acl)) {
    fprintf(stderr,
            "ordod: refusing to serve metrics on %s without --requirepass (or "
            "an --aclfile default user with a password): the status page "
            "names every session and key\n",
            s->cfg.metrics_bind);
    srv_acl_free(s->acl);
    return 2;
  }
  /* Keep maxclients below the descriptor limit, so that a refused client
   * can still be told so. */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    long cap = (long)rl.rlim_cur - 64;
    if (cap < 1)
      cap = 1;
    if (s->cfg.maxclients > cap) {
      srv_log(s, 0,
              "maxclients %d lowered to %ld: the file-descriptor limit "
              "is %ld",
              s->cfg.maxclients, cap, (long)rl.rlim_cur);
      s->cfg.maxclients = (int)cap;
    }
  }
  if (mkdir(s->cfg.dir, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "ordod: cannot create --dir %s: %s\n", s->cfg.dir,
            strerror(errno));
    return 2;
  }
  bool unclean = false;
  if (state_open(s, &unclean) != 0) {
    fprintf(stderr, "ordod: cannot write the fencing epoch in %s: %s\n",
            s->cfg.dir, strerror(errno));
    return 1;
  }
  s->started_ms = srv_now_ms();
  if (unclean && !s->cfg.no_restart_delay) {
    /* Holders from before the crash may still act for up to a lease. */
    s->grant_after_ms = s->started_ms + (uint64_t)s->cfg.lease_ms;
    srv_log(s, 0,
            "the last run did not stop cleanly: no lock is granted "
            "for %ld ms (--no-restart-delay skips this)",
            s->cfg.lease_ms);
  }
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.max_key_len = s->cfg.max_key_len;
  opts.starvation_us = s->cfg.starvation_us;
  opts.starvation_holds = s->cfg.starvation_holds;
  opts.max_locks = s->cfg.max_locks;
  opts.order = s->cfg.order;
  /* The engine's long-wait log is information: --verbose 0 (warnings
   * only) turns it off. */
  if (s->cfg.verbose < 1)
    opts.log_wait_ms = 0;
  if (s->cfg.deadlock_timeout_ms > 0) {
    /* A wait is searched once it is this old, as PostgreSQL's
     * deadlock_timeout. The background sweep, which finds the cycles that no
     * wait's own search saw, stays on (a cycle it alone can see would
     * otherwise last for ever) but runs no more often than that: its first
     * run comes that long after the server's first wait. */
    opts.detect = ORDO_DETECT_DELAYED;
    opts.deadlock_timeout_ms = s->cfg.deadlock_timeout_ms;
    if (opts.sweep_ms < s->cfg.deadlock_timeout_ms)
      opts.sweep_ms = s->cfg.deadlock_timeout_ms;
  }
  if (ordo_open(&s->o, "mem://", &opts) != 0) {
    fprintf(stderr, "ordod: cannot open the lock engine\n");
    return 1;
  }
  if (s->cfg.order != ORDO_ORDER_OFF)
    ordo_on_order(s->o, order_report, s);
  s->max_args = s->cfg.max_keys * 2 + 16;
  s->argv = calloc(s->max_args, sizeof *s->argv);
  s->smap_cap = 1024;
  s->smap = calloc(s->smap_cap, sizeof *s->smap);
  if (srv_random(s->token_key, sizeof s->token_key) != 0) {
    fprintf(stderr, "ordod: getrandom gave no bytes for the token key: %s\n",
            strerror(errno));
    return 1;
  }
  ordo__mutex_init(&s->ev_mu);
  s->loop = uv_default_loop();
  s->loop->data = s;
  uv_async_init(s->loop, &s->wake, wake_cb);
  s->wake.data = s;
  TAILQ_INIT(&s->deferred);
  TAILQ_INIT(&s->recheck);
  TAILQ_INIT(&s->lwq);
  uv_timer_init(s->loop, &s->lw_timer);
  s->lw_timer.data = s;
  uv_idle_init(s->loop, &s->turn);
  s->turn.data = s;
  uv_check_init(s->loop, &s->recheck_h);
  s->recheck_h.data = s;
  uv_signal_init(s->loop, &s->sigterm);
  uv_signal_init(s->loop, &s->sigint);
  s->sigterm.data = s->sigint.data = s;
  uv_signal_start(&s->sigterm, stop_cb, SIGTERM);
  uv_signal_start(&s->sigint, stop_cb, SIGINT);
  signal(SIGPIPE, SIG_IGN);

  struct sockaddr_storage addr;
  int rc =
      strchr(s->cfg.bind, ':')
          ? uv_ip6_addr(s->cfg.bind, s->cfg.port, (struct sockaddr_in6 *)&addr)
          : uv_ip4_addr(strcmp(s->cfg.bind, "localhost") == 0 ? "127.0.0.1"
                                                              : s->cfg.bind,
                        s->cfg.port, (struct sockaddr_in *)&addr);
  if (rc != 0) {
    fprintf(stderr, "ordod: bad --bind address '%s'\n", s->cfg.bind);
    return 2;
  }
  uv_tcp_init(s->loop, &s->tcp);
  s->tcp.data = s;
  if ((rc = uv_tcp_bind(&s->tcp, (struct sockaddr *)&addr, 0)) != 0 ||
      (rc = uv_listen((uv_stream_t *)&s->tcp, 511, on_connection)) != 0) {
    fprintf(stderr, "ordod: cannot listen on %s:%d: %s\n", s->cfg.bind,
            s->cfg.port, uv_strerror(rc));
    return 1;
  }
  s->have_tcp = true;
  int port = s->cfg.port;
  struct sockaddr_storage bound;
  int blen = sizeof bound;
  if (uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&bound, &blen) == 0)
    port = ntohs(bound.ss_family == AF_INET6
                     ? ((struct sockaddr_in6 *)&bound)->sin6_port
                     : ((struct sockaddr_in *)&bound)->sin_port);
  s->cfg.port = port;
  if (s->cfg.unixsocket[0]) {
    unlink(s->cfg.unixsocket);
    uv_pipe_init(s->loop, &s->unix_sock, 0);
    s->unix_sock.data = s;
    /* bind(2) creates the socket file with mode 0777 less the umask, and a
     * chmod after it would leave a window in which anyone could connect:
     * so the umask is 0077 around the bind, and the file is 0700 from its
     * first moment. The umask is the process's, but no other thread
     * creates files (the engine's timer thread never does). */
    mode_t old_mask = umask(0077);
    rc = uv_pipe_bind(&s->unix_sock, s->cfg.unixsocket);
    umask(old_mask);
    if (rc != 0 || (rc = uv_listen((uv_stream_t *)&s->unix_sock, 511,
                                   on_connection)) != 0) {
      fprintf(stderr, "ordod: cannot listen on %s: %s\n", s->cfg.unixsocket,
              uv_strerror(rc));
      return 1;
    }
    s->have_unix = true;
  }
  srv_log(s, 1, "listening on %s:%d%s%s, fencing epoch %llu", s->cfg.bind, port,
          s->have_unix ? " and " : "", s->have_unix ? s->cfg.unixsocket : "",
          (unsigned long long)s->epoch);
  if (s->cfg.tls_port >= 0 && tls_listen(s, &addr) != 0)
    return 2;
  {
    char perr[512];
    if (srv_probe_init(s, perr, sizeof perr) != 0) {
      fprintf(stderr, "ordod: %s\n", perr);
      return 2;
    }
  }
  if (s->cfg.metrics_port >= 0) {
    char herr[512];
    if (srv_http_start(s, herr, sizeof herr) != 0) {
      fprintf(stderr, "ordod: %s\n", herr);
      return 1;
    }
  }
  /* 'ready' first, since a reader may take only the first line (the
   * test fixtures do); all go out in one write. */
  printf("ready port=%d\n", port);
  if (s->have_tls)
    printf("tls port=%d\n", s->cfg.tls_port);
  if (s->http)
    printf("metrics port=%d\n", srv_http_port(s));
  fflush(stdout);

  uv_run(s->loop, UV_RUN_DEFAULT);

  /* Clean shutdown: every session ends (its locks released), then the
   * state file says the stop was clean. */
  srv_http_close(s);
  conn *c;
  LIST_FOREACH(c, &s->conns, link)
  conn_close(c);
  for (size_t i = 0; i < s->smap_cap; i++)
    while (s->smap[i])
      srv_sess_drop(s, s->smap[i]);
  uv_walk(s->loop, close_walk, NULL);
  uv_run(s->loop, UV_RUN_DEFAULT);
  uv_loop_close(s->loop);
  srv_probe_close(s);
  srv_tls_ctx_free(s->tls_ctx);
  ordo_close(s->o);
  state_close_clean(s);
  if (s->have_unix)
    unlink(s->cfg.unixsocket);
  free(s->argv);
  free(s->smap);
  free(s->tmap);
  free(s->evq);
  srv_acl_free(s->acl);
  ordo__mutex_destroy(&s->ev_mu);
  srv_log(s, 1, "stopped cleanly");
  return 0;
}
