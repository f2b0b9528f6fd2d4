/*
 * redlock.c -- the latency of ordo's Redis-backed lock places, seen from one
 * client; see README.md (rows redlock_par_vs_seq_* and redlock_vs_node_*).
 *
 * The row's setup starts `nodes` (3) throw-away redis-servers (servers.c)
 * and keeps them for all its runs. A run opens its own place on them with
 * ordo_open, begins one txn, and loops until `seconds` have passed: it draws
 * `keys_per_lock` distinct keys at random out of `keys` ("bk:0" ...), and
 * times ordo_lock_all of them all in X (timeout 5000 ms) followed by
 * ordo_unlock_all as one sample (CLOCK_MONOTONIC). The places compared:
 *
 *   parallel    redlock://n1,n2,n3 (the default mode): one acquire script
 *               with every key on every node at once, decided at a majority
 *   sequential  the same URL with mode=sequential: key by key, node by node,
 *               the way a Redlock client that locks one resource at a time
 *               would take a set of keys; it exists in ordo for this
 *               comparison only
 *   node        redis://n1: one script on one node, no quorum
 *
 * The place is opened inside the run, not in the setup, so that each run
 * starts from the same state; the harness's warm-up run absorbs what the
 * first connections cost the servers. With one client nothing contends, so
 * every lock_all must be granted and every unlock_all must release exactly
 * the keys taken; anything else fails the run. After the place is closed,
 * no node may still hold the last sample's keys (the release reached every
 * node, not only a majority).
 *
 * The result is the run's median sample in microseconds (metric "us p50",
 * lower is better); extras p99_us (nearest rank) and ops_per_s (samples
 * over the run's elapsed time), and ping_us: the median round trip of a
 * bare PING made the way the place reaches the nodes (redlock_ping), for a
 * fifth of the run's time after the samples. ping_us is the floor under
 * the row: what any client pays on this machine before a script runs, so
 * the two sides' ping_us say how high the ratio could go here.
 *
 * Interface:
 *   redlock_setup(), redlock_teardown()   the redis-servers
 *   redlock_run_parallel()                one run on redlock:// (parallel)
 *   redlock_run_sequential()              one run on redlock://, sequential
 *   redlock_run_node()                    one run on redis:// (first node)
 */
#include "servers.h"

#include <ordo.h>

#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REDLOCK_MAX_NODES 7
#define REDLOCK_MAX_KPL 16
#define REDLOCK_KEY_MAX 16             /* "bk:" and up to 12 digits */
#define REDLOCK_LEASE "lease_ms=30000" /* long enough that no renewal runs */
#define REDLOCK_TIMEOUT_MS 5000L
#define REDLOCK_URL_MAX 256

typedef enum redlock_kind_e {
  REDLOCK_PARALLEL,
  REDLOCK_SEQUENTIAL,
  REDLOCK_NODE,
} redlock_kind;

typedef struct redlock_state_s {
  int nodes;
  bench_server_t srv[REDLOCK_MAX_NODES];
  uint64_t seed; /* advanced per run, so that runs draw different keys */
} redlock_state_t;

/* The samples of one run, in nanoseconds; grows by doubling. */
typedef struct redlock_samples_s {
  uint64_t *ns;
  size_t n, cap;
} redlock_samples_t;

static const char *redlock_kind_name(redlock_kind kind) {
  return kind == REDLOCK_PARALLEL     ? "redlock parallel"
         : kind == REDLOCK_SEQUENTIAL ? "redlock sequential"
                                      : "redis node";
}

int redlock_setup(const bench_row_t *row, void **state) {
  int nodes = (int)bench_param_int(row, "nodes");
  if (nodes < 1 || nodes > REDLOCK_MAX_NODES) {
    bench_error(row, "nodes must be 1..%d", REDLOCK_MAX_NODES);
    return -1;
  }
  redlock_state_t *st = calloc(1, sizeof *st);
  if (st == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  st->nodes = nodes;
  for (int i = 0; i < nodes; i++)
    if (bench_server_start(row, BENCH_SERVER_REDIS, &st->srv[i]) != 0) {
      /* bench_server_start leaves nothing of its own running; stop the
       * nodes started before it. */
      redlock_teardown(row, st);
      return -1;
    }
  st->seed = 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid();
  *state = st;
  return 0;
}

void redlock_teardown(const bench_row_t *row, void *state) {
  redlock_state_t *st = state;
  if (st == NULL)
    return;
  /* Safe on the nodes a failed setup never started. */
  for (int i = 0; i < st->nodes; i++)
    bench_server_stop(row, &st->srv[i]);
  free(st);
}

/* The URL of the place that kind names, on st's nodes. */
static void redlock_url(const redlock_state_t *st, redlock_kind kind, char *buf,
                        size_t n) {
  size_t used = 0;
  if (kind == REDLOCK_NODE) {
    snprintf(buf, n, "redis://127.0.0.1:%d?" REDLOCK_LEASE, st->srv[0].port);
    return;
  }
  used += (size_t)snprintf(buf, n, "redlock://");
  for (int i = 0; i < st->nodes && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s127.0.0.1:%d",
                             i ? "," : "", st->srv[i].port);
  if (used < n)
    snprintf(buf + used, n - used, "?" REDLOCK_LEASE "%s",
             kind == REDLOCK_SEQUENTIAL ? "&mode=sequential" : "");
}

static int redlock_push(redlock_samples_t *s, uint64_t ns) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 4096;
    uint64_t *p = realloc(s->ns, cap * sizeof *p);
    if (p == NULL)
      return -1;
    s->ns = p;
    s->cap = cap;
  }
  s->ns[s->n++] = ns;
  return 0;
}

static int redlock_cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The nearest-rank quantile of sorted v (n >= 1), in microseconds. */
static double redlock_quantile_us(const uint64_t *v, size_t n, double q) {
  size_t rank = (size_t)ceil(q * (double)n);
  if (rank < 1)
    rank = 1;
  return (double)v[rank - 1] / 1e3;
}

static uint64_t redlock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Draws kpl distinct key numbers below nkeys into pick (kpl is small, so a
 * linear check for repeats is cheaper than anything cleverer). */
static void redlock_draw(uint64_t *rng, long long nkeys, int kpl,
                         long long *pick) {
  for (int i = 0; i < kpl;) {
    long long k = (long long)(bench_rng_next(rng) % (uint64_t)nkeys);
    int j = 0;
    while (j < i && pick[j] != k)
      j++;
    if (j == i)
      pick[i++] = k;
  }
}

/* 0 if no node holds any of the kpl keys of names; else reports, -1. */
static int redlock_check_nodes(const bench_row_t *row,
                               const redlock_state_t *st, redlock_kind kind,
                               char names[][REDLOCK_KEY_MAX], int kpl) {
  const char *argv[1 + REDLOCK_MAX_KPL];
  size_t len[1 + REDLOCK_MAX_KPL];
  argv[0] = "EXISTS";
  len[0] = 6;
  for (int i = 0; i < kpl; i++) {
    argv[1 + i] = names[i];
    len[1 + i] = strlen(names[i]);
  }
  for (int i = 0; i < st->nodes; i++) {
    redisContext *c = bench_server_connect(&st->srv[i], 5.0);
    if (c == NULL) {
      bench_error(row, "cannot connect to redis-server on port %d",
                  st->srv[i].port);
      return -1;
    }
    redisReply *r = redisCommandArgv(c, 1 + kpl, argv, len);
    int ok = r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 0;
    if (!ok)
      bench_error(row,
                  "%s: after the run, redis-server on port %d %s the last "
                  "sample's keys (%s ...)",
                  redlock_kind_name(kind), st->srv[i].port,
                  r == NULL                        ? "did not answer EXISTS of"
                  : r->type == REDIS_REPLY_INTEGER ? "still holds some of"
                                                   : "gave a bad reply about",
                  names[0]);
    if (r != NULL)
      freeReplyObject(r);
    redisFree(c);
    if (!ok)
      return -1;
  }
  return 0;
}

/* A node's PINGs sent but not yet answered; a late node's answer of one
 * round is read in the next, as a late node's reply is by ordo's client. */
typedef struct redlock_pinger_s {
  redisContext *c[REDLOCK_MAX_NODES];
  int pending[REDLOCK_MAX_NODES];
} redlock_pinger_t;

/* Reads what node i has sent. -1 on a dead connection or a reply that is
 * not PONG. */
static int redlock_ping_read(redlock_pinger_t *pg, int i) {
  void *r;
  if (redisBufferRead(pg->c[i]) != REDIS_OK)
    return -1;
  while (pg->pending[i] > 0) {
    if (redisGetReplyFromReader(pg->c[i], &r) != REDIS_OK)
      return -1;
    if (r == NULL)
      break;
    int pong = ((redisReply *)r)->type == REDIS_REPLY_STATUS &&
               strcmp(((redisReply *)r)->str, "PONG") == 0;
    freeReplyObject(r);
    if (!pong)
      return -1;
    pg->pending[i]--;
  }
  return 0;
}

/* Sends one PING to node j. */
static int redlock_ping_send(redlock_pinger_t *pg, int j) {
  int done = 0;
  if (redisAppendCommand(pg->c[j], "PING") != REDIS_OK)
    return -1;
  pg->pending[j]++;
  while (!done)
    if (redisBufferWrite(pg->c[j], &done) != REDIS_OK)
      return -1;
  return 0;
}

/* Waits until `need` of nodes [from, to) have answered everything sent to
 * them, reading what any of them sends. Bounded by a 5 s poll per wait. */
static int redlock_ping_wait(redlock_pinger_t *pg, int from, int to, int need) {
  for (;;) {
    int have = 0, nf = to - from;
    struct pollfd pf[REDLOCK_MAX_NODES];
    for (int j = 0; j < nf; j++) {
      have += pg->pending[from + j] == 0;
      pf[j] = (struct pollfd){.fd = pg->c[from + j]->fd, .events = POLLIN};
    }
    if (have >= need)
      return 0;
    if (poll(pf, (nfds_t)nf, 5000) <= 0)
      return -1;
    for (int j = 0; j < nf; j++)
      if ((pf[j].revents & (POLLIN | POLLHUP | POLLERR)) &&
          redlock_ping_read(pg, from + j) != 0)
        return -1;
  }
}

/* One round: PING to nodes [0, n) at once, done when `need` have answered,
 * or (seq) to one node after the other until `need` have. */
static int redlock_ping_round(redlock_pinger_t *pg, int n, int need, int seq) {
  if (seq) {
    for (int i = 0; i < need; i++)
      if (redlock_ping_send(pg, i) != 0 || redlock_ping_wait(pg, i, i + 1, 1))
        return -1;
    return 0;
  }
  for (int j = 0; j < n; j++)
    if (redlock_ping_send(pg, j) != 0)
      return -1;
  return redlock_ping_wait(pg, 0, n, need);
}

/*
 * redlock_ping -- the floor under kind's samples: for `seconds`, the round
 * trip of a bare PING made as kind reaches the nodes: one node (node); all
 * nodes at once, done when a majority answered (parallel); node after node
 * until a majority answered (sequential). A blocking hiredis connection
 * per node, driven by poll(2) as ordo's client drives its own. *p50 gets
 * the median in microseconds. 0, or -1 after reporting.
 */
static int redlock_ping(const bench_row_t *row, const redlock_state_t *st,
                        redlock_kind kind, double seconds, double *p50) {
  redlock_pinger_t pg = {0};
  redlock_samples_t s = {0};
  int n = kind == REDLOCK_NODE ? 1 : st->nodes;
  int need = kind == REDLOCK_NODE ? 1 : st->nodes / 2 + 1;
  int rc = -1;
  for (int i = 0; i < n; i++)
    if ((pg.c[i] = bench_server_connect(&st->srv[i], 5.0)) == NULL) {
      bench_error(row, "%s: PING floor: cannot connect to port %d",
                  redlock_kind_name(kind), st->srv[i].port);
      goto out;
    }
  uint64_t end = redlock_ns() + (uint64_t)(seconds * 1e9);
  do {
    uint64_t a = redlock_ns();
    if (redlock_ping_round(&pg, n, need, kind == REDLOCK_SEQUENTIAL) != 0) {
      bench_error(row, "%s: PING floor: a node failed or did not answer",
                  redlock_kind_name(kind));
      goto out;
    }
    if (redlock_push(&s, redlock_ns() - a) != 0) {
      bench_error(row, "out of memory");
      goto out;
    }
  } while (redlock_ns() < end);
  qsort(s.ns, s.n, sizeof *s.ns, redlock_cmp_u64);
  *p50 = redlock_quantile_us(s.ns, s.n, 0.50);
  rc = 0;
out:
  for (int i = 0; i < n; i++)
    if (pg.c[i] != NULL)
      redisFree(pg.c[i]);
  free(s.ns);
  return rc;
}

static int redlock_run(const bench_row_t *row, redlock_state_t *st,
                       redlock_kind kind, double seconds, double *out) {
  int kpl = (int)bench_param_int(row, "keys_per_lock");
  long long nkeys = bench_param_int(row, "keys");
  char url[REDLOCK_URL_MAX], names[REDLOCK_MAX_KPL][REDLOCK_KEY_MAX];
  long long pick[REDLOCK_MAX_KPL];
  ordo_req_t reqs[REDLOCK_MAX_KPL];
  redlock_samples_t s = {0};
  ordo_t *o = NULL;
  ordo_txn_t *t = NULL;
  uint64_t rng = (st->seed += 0x9E3779B97F4A7C15ULL) | 1;
  uint64_t t0, end, now;
  double elapsed;
  int rc = -1, orc;

  if (kpl < 1 || kpl > REDLOCK_MAX_KPL || nkeys < kpl) {
    bench_error(row, "keys_per_lock must be 1..%d and at most keys",
                REDLOCK_MAX_KPL);
    return -1;
  }
  redlock_url(st, kind, url, sizeof url);
  if ((orc = ordo_open(&o, url, NULL)) != 0) {
    bench_error(row, "ordo_open(%s): %s", url, ordo_err_name(orc));
    return -1;
  }
  if ((orc = ordo_txn_begin(o, &t, NULL)) != 0) {
    bench_error(row, "%s: ordo_txn_begin: %s", redlock_kind_name(kind),
                ordo_err_name(orc));
    goto out;
  }

  t0 = now = redlock_ns();
  end = t0 + (uint64_t)(seconds * 1e9);
  while (now < end) {
    redlock_draw(&rng, nkeys, kpl, pick);
    for (int i = 0; i < kpl; i++) {
      snprintf(names[i], sizeof names[i], "bk:%lld", pick[i]);
      reqs[i] = (ordo_req_t)ORDO_REQ_X(names[i], strlen(names[i]));
    }
    uint64_t a = redlock_ns();
    orc = ordo_lock_all(t, reqs, (size_t)kpl, REDLOCK_TIMEOUT_MS);
    if (orc != 0) {
      bench_error(row, "%s: ordo_lock_all of %d keys: %s",
                  redlock_kind_name(kind), kpl, ordo_err_name(orc));
      goto out;
    }
    orc = ordo_unlock_all(t);
    now = redlock_ns();
    if (orc < 0) {
      bench_error(row, "%s: ordo_unlock_all: %s", redlock_kind_name(kind),
                  ordo_err_name(orc));
      goto out;
    }
    if (orc != kpl) {
      bench_error(row, "%s: ordo_unlock_all released %d keys, not %d",
                  redlock_kind_name(kind), orc, kpl);
      goto out;
    }
    if (redlock_push(&s, now - a) != 0) {
      bench_error(row, "out of memory");
      goto out;
    }
  }
  elapsed = (double)(now - t0) / 1e9;

  ordo_txn_end(t);
  t = NULL;
  ordo_close(o);
  o = NULL;
  if (redlock_check_nodes(row, st, kind, names, kpl) != 0)
    goto out;

  if (s.n == 0) {
    bench_error(row, "%s: no sample in %.3f s", redlock_kind_name(kind),
                seconds);
    goto out;
  }
  qsort(s.ns, s.n, sizeof *s.ns, redlock_cmp_u64);
  *out = redlock_quantile_us(s.ns, s.n, 0.50);
  bench_extra(row, "p99_us", redlock_quantile_us(s.ns, s.n, 0.99));
  bench_extra(row, "ops_per_s", (double)s.n / elapsed);
  double ping;
  if (redlock_ping(row, st, kind, seconds / 5, &ping) != 0)
    goto out;
  bench_extra(row, "ping_us", ping);
  rc = 0;
out:
  if (t != NULL)
    ordo_txn_end(t);
  if (o != NULL)
    ordo_close(o);
  free(s.ns);
  return rc;
}

int redlock_run_parallel(const bench_row_t *row, void *state, double seconds,
                         double *out) {
  return redlock_run(row, state, REDLOCK_PARALLEL, seconds, out);
}

int redlock_run_sequential(const bench_row_t *row, void *state, double seconds,
                           double *out) {
  return redlock_run(row, state, REDLOCK_SEQUENTIAL, seconds, out);
}

int redlock_run_node(const bench_row_t *row, void *state, double seconds,
                     double *out) {
  return redlock_run(row, state, REDLOCK_NODE, seconds, out);
}
