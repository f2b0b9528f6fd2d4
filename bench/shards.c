/*
 * shards.c -- ordod shards (issue 20): how soon a deadlock that no single
 * shard sees is broken, and what spreading keys over shards costs a
 * lock_all; see README.md (rows xshard_cycle_* and shards_lock*).
 *
 * xshard_cycle_l2, xshard_cycle_l8. The setup starts 3 ordod shards linked
 * by --peers (--probe-delay 1, loopback), 3 more without --peers (the
 * timeout-only baseline) and PostgreSQL (ledger_cluster_setup(): the
 * ledger rows' throw-away cluster). A cycle of length L is L txns, txn i
 * holding key i on shard i % 3 and then asking for key i + 1 (mod L) on
 * its shard, each txn with one raw session per shard it touches (SESSION
 * GID, and HELDAT on its LOCK, as the sharded client does; see
 * docs/protocol.md, "Shards"). Every edge crosses shards, so only the
 * probes can see the cycle. Txn i's gid is younger than txn i - 1's, so the
 * victim is txn L - 1, whose LOCK closes the cycle. One sample is the time
 * from just before that last LOCK is sent to the victim's -DEADLOCK
 * reply (CLOCK_MONOTONIC); the other txns must then all be granted.
 *
 *   ordo  `cycles` cycles one after another on the linked shards. Value:
 *         their p99 in ms (nearest rank); extras p50_ms, samples, rtt_ms
 *         (the median PING round trip to shard 0 on one connection, 200
 *         pings after the cycles), bound_ms = probe delay + 2 ms + L x
 *         rtt_ms, and bound_met (1 when p99 <= bound_ms).
 *   peer  PostgreSQL's own detector: `waves` cycles at once, each of L
 *         sessions in one database, session i holding advisory lock i
 *         (pg_advisory_xact_lock, in a transaction) and asking for lock
 *         i + 1, every session with SET deadlock_timeout = '1s' (the
 *         default; the fixture's cluster runs at 10ms). A sample runs from
 *         the cycle's last request to the error 40P01 of its victim
 *         (exactly one per cycle; the others are granted and roll back).
 *         Value: the p99 in ms; extras p50_ms, samples. Beside it, on the
 *         shards without --peers and at the same time (a thread of its
 *         own), the same `waves` cycles with WAIT 1000 on every LOCK: a
 *         sample runs from the cycle's last LOCK to its first -TIMEOUT
 *         (extras timeout_p50_ms, timeout_p99_ms).
 *
 * Both peers wait about a second by design: a run of the peer is one wave
 * of cycles, so the rows are fixed_work (no warm-up run, 5 runs per side in
 * full mode, 1 in quick mode).
 *
 * shards_lock1, shards_lock16. `clients` threads, each with its own place
 * and one txn, loop on ordo_lock_all of `keys_per_lock` distinct random keys
 * of `keys` in X (timeout 5000 ms) + ordo_unlock_all, which must release
 * them all. ordo: the place ordod://s1,s2,s3 (the 3 linked shards of the
 * setup); peer: ordod://s1 alone. Value: pairs/s over the run.
 *
 * Interface:
 *   bench_shards_table   the rows (bench.c lists them after its own rows)
 */
#include "servers.h"

#include <ordo.h>

#include <errno.h>
#include <libpq-fe.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SH_SHARDS 3
#define SH_MAX_L 16
#define SH_MAX_WAVES 16
#define SH_IO_S 5.0 /* bound on one reply (a hang, not a measurement) */
#define SH_PROBE_DELAY_MS 1
#define SH_WAIT_MS 1000 /* the timeout-only baseline's WAIT */
#define SH_PINGS 200
#define SH_LOCK_TIMEOUT_MS 5000L
#define SH_MAX_KPL 16
#define SH_MAX_CLIENTS 16
#define SH_URL_MAX 256

typedef struct sh_state_s {
  bench_server_t linked[SH_SHARDS]; /* --peers each other */
  bench_server_t solo[SH_SHARDS];   /* no --peers: timeouts only */
  void *pg;                         /* ledger_cluster_setup()'s, or NULL */
  uint64_t seq;                     /* makes gids and keys unique */
} sh_state_t;

/* ---- Servers -------------------------------------------------------------
 */

static void sh_stop(const bench_row_t *row, sh_state_t *st) {
  for (int i = 0; i < SH_SHARDS; i++) {
    bench_server_stop(row, &st->linked[i]);
    bench_server_stop(row, &st->solo[i]);
  }
  if (st->pg != NULL)
    ledger_teardown(row, st->pg);
  free(st);
}

/* Starts 3 shards on free ports; linked: each --peers the other two. */
static int sh_start_shards(const bench_row_t *row, bench_server_t *s,
                           int linked) {
  int port[SH_SHARDS];
  char peers[SH_SHARDS][64], delay[16];
  snprintf(delay, sizeof delay, "%d", SH_PROBE_DELAY_MS);
  for (int i = 0; i < SH_SHARDS; i++)
    if ((port[i] = bench_free_port()) <= 0) {
      bench_error(row, "no free port: %s", strerror(errno));
      return -1;
    }
  for (int i = 0; i < SH_SHARDS; i++) {
    int a = port[(i + 1) % SH_SHARDS], b = port[(i + 2) % SH_SHARDS];
    snprintf(peers[i], sizeof peers[i], "127.0.0.1:%d,127.0.0.1:%d", a, b);
    const char *with[] = {"--peers", peers[i], "--probe-delay", delay, NULL};
    if (bench_server_start_ordod(row, &s[i], port[i], linked ? with : NULL) !=
        0)
      return -1;
  }
  if (!linked)
    return 0;
  /* Every link up before a cycle counts on it. */
  double deadline = bench_now() + 10.0;
  for (int i = 0; i < SH_SHARDS; i++) {
    redisContext *c = bench_server_connect(&s[i], SH_IO_S);
    long long up = -1;
    while (c != NULL &&
           (up = bench_server_info(c, "probes", "peers_linked")) !=
               SH_SHARDS - 1 &&
           bench_now() < deadline)
      bench_sleep(0.01);
    if (c != NULL)
      redisFree(c);
    if (up != SH_SHARDS - 1) {
      bench_error(row, "shard %d: peers_linked %lld, not %d, within 10 s", i,
                  up, SH_SHARDS - 1);
      return -1;
    }
  }
  return 0;
}

static int sh_setup(const bench_row_t *row, void **state, int cycles) {
  sh_state_t *st = calloc(1, sizeof *st);
  if (st == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  st->seq = (uint64_t)getpid() << 32;
  if (sh_start_shards(row, st->linked, 1) != 0 ||
      (cycles && (sh_start_shards(row, st->solo, 0) != 0 ||
                  ledger_cluster_setup(row, &st->pg) != 0))) {
    sh_stop(row, st);
    return -1;
  }
  *state = st;
  return 0;
}

static int sh_cycle_setup(const bench_row_t *row, void **state) {
  return sh_setup(row, state, 1);
}

static int sh_lock_setup(const bench_row_t *row, void **state) {
  return sh_setup(row, state, 0);
}

static void sh_teardown(const bench_row_t *row, void *state) {
  if (state != NULL)
    sh_stop(row, state);
}

/* ---- Samples -------------------------------------------------------------
 */

static int sh_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Nearest rank of the sorted v[0..n). */
static double sh_rank(const double *v, size_t n, double q) {
  size_t k = (size_t)ceil(q * (double)n);
  return v[k > 0 ? k - 1 : 0];
}

/* ---- The cycle on raw sessions -------------------------------------------
 */

/* One txn of a cycle: its session where it holds, and where it waits. */
typedef struct sh_txn_s {
  redisContext *hold, *wait;
} sh_txn_t;

static void sh_txns_free(sh_txn_t *t, int n) {
  for (int i = 0; i < n; i++) {
    if (t[i].hold != NULL)
      redisFree(t[i].hold);
    if (t[i].wait != NULL)
      redisFree(t[i].wait);
    t[i].hold = t[i].wait = NULL;
  }
}

/* A session on s told gid: NULL after bench_error(). */
static redisContext *sh_session(const bench_row_t *row, const bench_server_t *s,
                                const char *gid) {
  redisContext *c = bench_server_connect(s, SH_IO_S);
  if (c == NULL) {
    bench_error(row, "cannot connect to the shard on port %d", s->port);
    return NULL;
  }
  redisReply *r = redisCommand(c, "SESSION GID %s", gid);
  int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
  if (!ok)
    bench_error(row, "SESSION GID: %s", r && r->str ? r->str : c->errstr);
  if (r != NULL)
    freeReplyObject(r);
  if (!ok) {
    redisFree(c);
    return NULL;
  }
  return c;
}

/*
 * Sets up one cycle of n txns on shards s (held keys taken, no wait sent
 * yet): 0, or -1 after bench_error(). Keys are "xc:SEQ:i".
 */
static int sh_cycle_hold(const bench_row_t *row, sh_state_t *st,
                         const bench_server_t *s, int n, sh_txn_t *t,
                         uint64_t *id) {
  *id = st->seq++;
  for (int i = 0; i < n; i++) {
    char gid[33];
    /* Begin time first: txn i is younger than txn i - 1. */
    snprintf(gid, sizeof gid, "%016llx%016llx",
             (unsigned long long)(bench_now() * 1e9) + (unsigned long long)i,
             (unsigned long long)(*id * 0x9E3779B97F4A7C15ULL | 1));
    /* Key j lives on shard j % 3; txn i asks for key (i + 1) % n. */
    const bench_server_t *h = &s[i % SH_SHARDS];
    const bench_server_t *w = &s[((i + 1) % n) % SH_SHARDS];
    if ((t[i].hold = sh_session(row, h, gid)) == NULL ||
        (t[i].wait = sh_session(row, w, gid)) == NULL)
      return -1;
    redisReply *r = redisCommand(t[i].hold, "LOCK 1 xc:%llu:%d X",
                                 (unsigned long long)*id, i);
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY;
    if (!ok)
      bench_error(row, "cycle hold LOCK: %s",
                  r && r->str ? r->str : t[i].hold->errstr);
    if (r != NULL)
      freeReplyObject(r);
    if (!ok)
      return -1;
  }
  return 0;
}

/* Sends txn i's waiting LOCK (with WAIT wait_ms when > 0) without reading
 * its reply: 0, or -1. */
static int sh_cycle_ask(const bench_row_t *row, const bench_server_t *s, int n,
                        sh_txn_t *t, uint64_t id, int i, int wait_ms) {
  char key[48], held[32], wait[16];
  int done = 0;
  snprintf(key, sizeof key, "xc:%llu:%d", (unsigned long long)id, (i + 1) % n);
  snprintf(held, sizeof held, "127.0.0.1:%d", s[i % SH_SHARDS].port);
  snprintf(wait, sizeof wait, "%d", wait_ms);
  const char *argv[] = {"LOCK", "1", key, "X", "HELDAT", held, "WAIT", wait};
  int argc = wait_ms > 0 ? 8 : 6;
  if (redisAppendCommandArgv(t[i].wait, argc, argv, NULL) != REDIS_OK)
    goto fail;
  while (!done)
    if (redisBufferWrite(t[i].wait, &done) != REDIS_OK)
      goto fail;
  return 0;
fail:
  bench_error(row, "cycle LOCK send: %s", t[i].wait->errstr);
  return -1;
}

/* Reads txn i's reply to its waiting LOCK: 1 granted, 0 an error whose
 * text starts with `want`, -1 anything else (after bench_error()). */
static int sh_cycle_reply(const bench_row_t *row, sh_txn_t *t, int i,
                          const char *want) {
  redisReply *r = NULL;
  int rc = -1;
  if (redisGetReply(t[i].wait, (void **)&r) != REDIS_OK || r == NULL) {
    bench_error(row, "cycle txn %d: no reply: %s", i, t[i].wait->errstr);
    return -1;
  }
  if (r->type == REDIS_REPLY_ARRAY)
    rc = 1;
  else if (r->type == REDIS_REPLY_ERROR && want != NULL &&
           strncmp(r->str, want, strlen(want)) == 0)
    rc = 0;
  else
    bench_error(row, "cycle txn %d: %s, not %s", i,
                r->type == REDIS_REPLY_ERROR ? r->str : "an odd reply",
                want ? want : "a grant");
  freeReplyObject(r);
  return rc;
}

/* One cycle on the linked shards: its sample in ms, or -1. */
static double sh_probe_cycle(const bench_row_t *row, sh_state_t *st, int n) {
  sh_txn_t t[SH_MAX_L] = {0};
  uint64_t id;
  double ms = -1;
  if (sh_cycle_hold(row, st, st->linked, n, t, &id) != 0)
    goto out;
  for (int i = 0; i < n - 1; i++)
    if (sh_cycle_ask(row, st->linked, n, t, id, i, 0) != 0)
      goto out;
  double a = bench_now();
  if (sh_cycle_ask(row, st->linked, n, t, id, n - 1, 0) != 0)
    goto out;
  int r = sh_cycle_reply(row, t, n - 1, "DEADLOCK");
  double b = bench_now();
  if (r != 0) {
    if (r == 1)
      bench_error(row, "the youngest txn of the cycle was granted, not the "
                       "victim");
    goto out;
  }
  /* Each txn that is granted lets go of everything (its sessions closed),
   * which the one before it in the cycle waits for. */
  redisFree(t[n - 1].hold);
  redisFree(t[n - 1].wait);
  t[n - 1].hold = t[n - 1].wait = NULL;
  for (int i = n - 2; i >= 0; i--) {
    if (sh_cycle_reply(row, t, i, NULL) != 1)
      goto out;
    sh_txns_free(&t[i], 1);
  }
  ms = (b - a) * 1e3;
out:
  sh_txns_free(t, n);
  return ms;
}

/* The median PING round trip to s in ms, or -1. */
static double sh_rtt(const bench_row_t *row, const bench_server_t *s) {
  double v[SH_PINGS];
  redisContext *c = bench_server_connect(s, SH_IO_S);
  if (c == NULL) {
    bench_error(row, "cannot connect for PING");
    return -1;
  }
  for (int i = 0; i < SH_PINGS; i++) {
    double a = bench_now();
    redisReply *r = redisCommand(c, "PING");
    v[i] = (bench_now() - a) * 1e3;
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL)
      freeReplyObject(r);
    if (!ok) {
      bench_error(row, "PING failed");
      redisFree(c);
      return -1;
    }
  }
  redisFree(c);
  qsort(v, SH_PINGS, sizeof *v, sh_cmp);
  return sh_rank(v, SH_PINGS, 0.5);
}

static int sh_cycle_run_probes(const bench_row_t *row, void *state,
                               double seconds, double *out) {
  sh_state_t *st = state;
  int n = (int)bench_param_int(row, "cycle_txns");
  long cycles = (long)bench_param_int(row, "cycles");
  double *v = calloc((size_t)cycles, sizeof *v);
  int rc = -1;
  (void)seconds; /* fixed work: `cycles` cycles */
  if (v == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  for (long k = 0; k < cycles; k++)
    if ((v[k] = sh_probe_cycle(row, st, n)) < 0)
      goto out;
  double rtt = sh_rtt(row, &st->linked[0]);
  if (rtt < 0)
    goto out;
  qsort(v, (size_t)cycles, sizeof *v, sh_cmp);
  double p99 = sh_rank(v, (size_t)cycles, 0.99);
  double bound = SH_PROBE_DELAY_MS + 2.0 + n * rtt;
  *out = p99;
  bench_extra(row, "p50_ms", sh_rank(v, (size_t)cycles, 0.5));
  bench_extra(row, "samples", (double)cycles);
  bench_extra(row, "rtt_ms", rtt);
  bench_extra(row, "bound_ms", bound);
  bench_extra(row, "bound_met", p99 <= bound ? 1 : 0);
  rc = 0;
out:
  free(v);
  return rc;
}

/* ---- The timeout-only baseline -------------------------------------------
 */

typedef struct sh_wave_s {
  const bench_row_t *row;
  sh_state_t *st;
  int n, waves;
  double ms[SH_MAX_WAVES]; /* one sample per cycle */
  int rc;
} sh_wave_t;

/* `waves` cycles at once on the shards without peers, WAIT on every LOCK:
 * from each cycle's last LOCK to its first -TIMEOUT (txn 0's, the first
 * sent). */
static void *sh_timeout_wave(void *arg) {
  sh_wave_t *w = arg;
  sh_txn_t t[SH_MAX_WAVES][SH_MAX_L];
  uint64_t id[SH_MAX_WAVES];
  double closed[SH_MAX_WAVES];
  memset(t, 0, sizeof t);
  w->rc = -1;
  for (int c = 0; c < w->waves; c++)
    if (sh_cycle_hold(w->row, w->st, w->st->solo, w->n, t[c], &id[c]) != 0)
      goto out;
  for (int c = 0; c < w->waves; c++) {
    for (int i = 0; i < w->n; i++) {
      if (i == w->n - 1)
        closed[c] = bench_now();
      if (sh_cycle_ask(w->row, w->st->solo, w->n, t[c], id[c], i, SH_WAIT_MS) !=
          0)
        goto out;
    }
  }
  for (int c = 0; c < w->waves; c++) {
    if (sh_cycle_reply(w->row, t[c], 0, "TIMEOUT") != 0)
      goto out;
    w->ms[c] = (bench_now() - closed[c]) * 1e3;
    /* The client gives up and lets go: the cycle is broken. */
    sh_txns_free(t[c], w->n);
  }
  w->rc = 0;
out:
  for (int c = 0; c < w->waves; c++)
    sh_txns_free(t[c], w->n);
  return NULL;
}

/* ---- PostgreSQL's detector -----------------------------------------------
 */

/* One session of a PostgreSQL cycle. */
typedef struct sh_pg_s {
  PGconn *c;
  int cycle;
  int state; /* 0 asked, 1 rolling back, 2 done */
} sh_pg_t;

/* Runs sql on c and wants `want`: 0, or -1 after bench_error(). */
static int sh_pg_exec(const bench_row_t *row, PGconn *c, const char *sql,
                      ExecStatusType want) {
  PGresult *r = PQexec(c, sql);
  int ok = PQresultStatus(r) == want;
  if (!ok)
    bench_error(row, "PostgreSQL '%s': %s", sql, PQerrorMessage(c));
  PQclear(r);
  return ok ? 0 : -1;
}

/* Reads what s's socket has; a finished result is handled (a grant: roll
 * back; an error 40P01: the cycle's sample, once; a ROLLBACK's end: done).
 * 0, or -1 after bench_error(). */
static int sh_pg_step(const bench_row_t *row, sh_pg_t *s, double *closed,
                      double *ms, int *victims) {
  if (!PQconsumeInput(s->c)) {
    bench_error(row, "PostgreSQL: %s", PQerrorMessage(s->c));
    return -1;
  }
  while (s->state < 2 && !PQisBusy(s->c)) {
    PGresult *r = PQgetResult(s->c);
    if (r == NULL) { /* the end of one query's results */
      if (s->state == 1) {
        s->state = 2;
        break;
      }
      if (!PQsendQuery(s->c, "ROLLBACK")) {
        bench_error(row, "PostgreSQL ROLLBACK: %s", PQerrorMessage(s->c));
        return -1;
      }
      s->state = 1;
      continue;
    }
    const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    ExecStatusType es = PQresultStatus(r);
    if (s->state == 0 && es == PGRES_FATAL_ERROR && code != NULL &&
        strcmp(code, "40P01") == 0) {
      double now = bench_now();
      if (victims[s->cycle]++ == 0)
        ms[s->cycle] = (now - closed[s->cycle]) * 1e3;
    } else if (es != PGRES_TUPLES_OK && es != PGRES_COMMAND_OK) {
      bench_error(row, "PostgreSQL cycle: %s", PQresultErrorMessage(r));
      PQclear(r);
      return -1;
    }
    PQclear(r);
  }
  return 0;
}

/* `waves` cycles of n sessions at once; ms[c] the sample of cycle c. */
static int sh_pg_wave(const bench_row_t *row, sh_state_t *st, int n, int waves,
                      double *ms) {
  sh_pg_t s[SH_MAX_WAVES * SH_MAX_L];
  double closed[SH_MAX_WAVES];
  int victims[SH_MAX_WAVES] = {0}, total = n * waves, rc = -1;
  char sql[128];
  /* Session k holds advisory lock base + k. */
  unsigned long long base = (unsigned long long)(st->seq & 0xffffffffffULL);
  st->seq += (uint64_t)total;
  memset(s, 0, sizeof s);
  for (int k = 0; k < total; k++) {
    s[k].cycle = k / n;
    s[k].c = PQconnectdb(ledger_cluster_url(st->pg));
    if (PQstatus(s[k].c) != CONNECTION_OK) {
      bench_error(row, "PostgreSQL connect: %s", PQerrorMessage(s[k].c));
      goto out;
    }
    snprintf(sql, sizeof sql, "SET deadlock_timeout = '1s'");
    if (sh_pg_exec(row, s[k].c, sql, PGRES_COMMAND_OK) != 0 ||
        sh_pg_exec(row, s[k].c, "BEGIN", PGRES_COMMAND_OK) != 0)
      goto out;
    snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%llu)",
             base + (unsigned long long)k);
    if (sh_pg_exec(row, s[k].c, sql, PGRES_TUPLES_OK) != 0)
      goto out;
  }
  for (int c = 0; c < waves; c++)
    for (int i = 0; i < n; i++) {
      PGconn *a = s[c * n + i].c;
      snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%llu)",
               base + (unsigned long long)(c * n + (i + 1) % n));
      if (i == n - 1)
        closed[c] = bench_now();
      if (!PQsendQuery(a, sql)) {
        bench_error(row, "PostgreSQL send: %s", PQerrorMessage(a));
        goto out;
      }
    }
  double deadline = bench_now() + 10.0;
  for (;;) {
    struct pollfd p[SH_MAX_WAVES * SH_MAX_L];
    int idx[SH_MAX_WAVES * SH_MAX_L], np = 0;
    for (int k = 0; k < total; k++)
      if (s[k].state < 2) {
        p[np] = (struct pollfd){.fd = PQsocket(s[k].c), .events = POLLIN};
        idx[np++] = k;
      }
    if (np == 0)
      break;
    int left = (int)((deadline - bench_now()) * 1e3);
    if (left <= 0) {
      bench_error(row, "PostgreSQL: %d sessions still waiting after 10 s", np);
      goto out;
    }
    if (poll(p, (nfds_t)np, left) < 0 && errno != EINTR) {
      bench_error(row, "poll: %s", strerror(errno));
      goto out;
    }
    for (int j = 0; j < np; j++)
      if (p[j].revents != 0 &&
          sh_pg_step(row, &s[idx[j]], closed, ms, victims) != 0)
        goto out;
  }
  for (int c = 0; c < waves; c++)
    if (victims[c] != 1) {
      bench_error(row, "PostgreSQL: cycle %d had %d victims, not 1", c,
                  victims[c]);
      goto out;
    }
  rc = 0;
out:
  for (int k = 0; k < total; k++)
    if (s[k].c != NULL)
      PQfinish(s[k].c);
  return rc;
}

static int sh_cycle_run_peers(const bench_row_t *row, void *state,
                              double seconds, double *out) {
  sh_state_t *st = state;
  int n = (int)bench_param_int(row, "cycle_txns");
  int waves = (int)bench_param_int(row, "waves");
  double ms[SH_MAX_WAVES];
  sh_wave_t tw = {.row = row, .st = st, .n = n, .waves = waves, .rc = -1};
  pthread_t th;
  (void)seconds; /* fixed work: one wave of each peer */
  if (n < 2 || n > SH_MAX_L || waves < 1 || waves > SH_MAX_WAVES) {
    bench_error(row, "cycle_txns must be 2..%d and waves 1..%d", SH_MAX_L,
                SH_MAX_WAVES);
    return -1;
  }
  /* The timeout-only baseline's wave waits alongside PostgreSQL's: both
   * spend their second asleep. */
  if (pthread_create(&th, NULL, sh_timeout_wave, &tw) != 0) {
    bench_error(row, "pthread_create failed");
    return -1;
  }
  int rc = sh_pg_wave(row, st, n, waves, ms);
  pthread_join(th, NULL);
  if (rc != 0 || tw.rc != 0)
    return -1;
  qsort(ms, (size_t)waves, sizeof *ms, sh_cmp);
  qsort(tw.ms, (size_t)waves, sizeof *tw.ms, sh_cmp);
  *out = sh_rank(ms, (size_t)waves, 0.99);
  bench_extra(row, "p50_ms", sh_rank(ms, (size_t)waves, 0.5));
  bench_extra(row, "samples", (double)waves);
  bench_extra(row, "timeout_p50_ms", sh_rank(tw.ms, (size_t)waves, 0.5));
  bench_extra(row, "timeout_p99_ms", sh_rank(tw.ms, (size_t)waves, 0.99));
  return 0;
}

/* ---- lock_all over shards ------------------------------------------------
 */

typedef struct sh_client_s {
  const bench_row_t *row;
  const char *url;
  double seconds;
  uint64_t rng;
  long pairs;
  int rc;
} sh_client_t;

static void *sh_client(void *arg) {
  sh_client_t *cl = arg;
  const bench_row_t *row = cl->row;
  int kpl = (int)bench_param_int(row, "keys_per_lock");
  long long nkeys = bench_param_int(row, "keys");
  char names[SH_MAX_KPL][24];
  ordo_req_t reqs[SH_MAX_KPL];
  ordo_t *o = NULL;
  ordo_txn_t *t = NULL;
  int orc;
  cl->rc = -1;
  if ((orc = ordo_open(&o, cl->url, NULL)) != 0) {
    bench_error(row, "ordo_open(%s): %s", cl->url, ordo_err_name(orc));
    return NULL;
  }
  if ((orc = ordo_txn_begin(o, &t, NULL)) != 0) {
    bench_error(row, "ordo_txn_begin: %s", ordo_err_name(orc));
    goto out;
  }
  double end = bench_now() + cl->seconds;
  while (bench_now() < end) {
    for (int i = 0; i < kpl; i++) {
      long long k;
      int again;
      do { /* distinct keys: a duplicate would be merged */
        k = (long long)(bench_rng_next(&cl->rng) % (uint64_t)nkeys);
        snprintf(names[i], sizeof names[i], "sk:%lld", k);
        again = 0;
        for (int j = 0; j < i; j++)
          again |= strcmp(names[i], names[j]) == 0;
      } while (again);
      reqs[i] = (ordo_req_t)ORDO_REQ_X(names[i], strlen(names[i]));
    }
    if ((orc = ordo_lock_all(t, reqs, (size_t)kpl, SH_LOCK_TIMEOUT_MS)) != 0) {
      bench_error(row, "%s: ordo_lock_all of %d keys: %s", cl->url, kpl,
                  ordo_err_name(orc));
      goto out;
    }
    if ((orc = ordo_unlock_all(t)) != kpl) {
      bench_error(row, "%s: ordo_unlock_all gave %d (%s), not %d", cl->url, orc,
                  orc < 0 ? ordo_err_name(orc) : "keys", kpl);
      goto out;
    }
    cl->pairs++;
  }
  cl->rc = 0;
out:
  if (t != NULL)
    ordo_txn_end(t);
  ordo_close(o);
  return NULL;
}

/* `clients` threads on url for `seconds`: pairs/s in *out, or -1. */
static int sh_lock_run(const bench_row_t *row, sh_state_t *st, int shards,
                       double seconds, double *out) {
  int clients = (int)bench_param_int(row, "clients");
  int kpl = (int)bench_param_int(row, "keys_per_lock");
  char url[SH_URL_MAX];
  sh_client_t cl[SH_MAX_CLIENTS];
  pthread_t th[SH_MAX_CLIENTS];
  int started = 0, rc = 0;
  size_t len = (size_t)snprintf(url, sizeof url, "ordod://");
  if (clients < 1 || clients > SH_MAX_CLIENTS || kpl < 1 || kpl > SH_MAX_KPL ||
      bench_param_int(row, "keys") < kpl) {
    bench_error(row, "clients must be 1..%d, keys_per_lock 1..%d",
                SH_MAX_CLIENTS, SH_MAX_KPL);
    return -1;
  }
  for (int i = 0; i < shards; i++)
    len += (size_t)snprintf(url + len, sizeof url - len, "%s127.0.0.1:%d",
                            i ? "," : "", st->linked[i].port);
  double a = bench_now();
  for (int i = 0; i < clients; i++) {
    cl[i] = (sh_client_t){.row = row,
                          .url = url,
                          .seconds = seconds,
                          .rng = (st->seq++ * 0x9E3779B97F4A7C15ULL) | 1};
    if (pthread_create(&th[i], NULL, sh_client, &cl[i]) != 0) {
      bench_error(row, "pthread_create failed");
      rc = -1;
      break;
    }
    started++;
  }
  long pairs = 0;
  for (int i = 0; i < started; i++) {
    pthread_join(th[i], NULL);
    rc |= cl[i].rc;
    pairs += cl[i].pairs;
  }
  double el = bench_now() - a;
  if (rc != 0)
    return -1;
  *out = (double)pairs / el;
  return 0;
}

static int sh_lock_run_shards(const bench_row_t *row, void *state,
                              double seconds, double *out) {
  return sh_lock_run(row, state, SH_SHARDS, seconds, out);
}

static int sh_lock_run_one(const bench_row_t *row, void *state, double seconds,
                           double *out) {
  return sh_lock_run(row, state, 1, seconds, out);
}

/* ---- The rows ------------------------------------------------------------
 */

#define SH_CYCLE_ROW(id_, txns, cycles_, waves_)                               \
  {                                                                            \
    .id = id_,                                                                 \
    .title = "Cross-shard deadlock, " #txns " txns on 3 shards: close to "     \
             "-DEADLOCK",                                                      \
    .metric = "ms p99", .higher_is_better = 0,                                 \
    .peer_name = "PostgreSQL's detector (deadlock_timeout 1s)", .target = NAN, \
    .params = {{"cycle_txns", txns, NULL},                                     \
               {"shards", SH_SHARDS, NULL},                                    \
               {"probe_delay_ms", SH_PROBE_DELAY_MS, NULL},                    \
               {"cycles", cycles_, NULL},                                      \
               {"waves", waves_, NULL}},                                       \
    .setup = sh_cycle_setup, .teardown = sh_teardown,                          \
    .run_ordo = sh_cycle_run_probes, .run_peer = sh_cycle_run_peers,           \
    .extras = {"p50_ms",    "samples",        "rtt_ms",        "bound_ms",     \
               "bound_met", "timeout_p50_ms", "timeout_p99_ms"},               \
    .fixed_work = 1,                                                           \
  }

#define SH_LOCK_ROW(id_, kpl, title_)                                          \
  {                                                                            \
    .id = id_, .title = title_, .metric = "pairs/s", .higher_is_better = 1,    \
    .peer_name = "one ordod", .target = NAN,                                   \
    .params = {{"clients", 8, NULL},                                           \
               {"shards", SH_SHARDS, NULL},                                    \
               {"keys", 100000, NULL},                                         \
               {"keys_per_lock", kpl, NULL}},                                  \
    .setup = sh_lock_setup, .teardown = sh_teardown,                           \
    .run_ordo = sh_lock_run_shards, .run_peer = sh_lock_run_one,               \
  }

static const bench_row_t shards_rows[] = {
    SH_CYCLE_ROW("xshard_cycle_l2", 2, 100, 16),
    SH_CYCLE_ROW("xshard_cycle_l8", 8, 100, 8),
    SH_LOCK_ROW("shards_lock1", 1,
                "ordo_lock_all+unlock_all of 1 key over 3 shards, 8 clients"),
    SH_LOCK_ROW("shards_lock16", 16,
                "ordo_lock_all+unlock_all of 16 keys over 3 shards, 8 clients"),
};

const bench_table_t bench_shards_table = {
    shards_rows, sizeof shards_rows / sizeof shards_rows[0]};
