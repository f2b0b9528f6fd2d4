/*
 * rcluster.c -- the latency of lock_all+unlock_all of 16 keys on a Redis
 * Cluster, seen from one client; see README.md (row rcluster_lock16).
 *
 * The row's setup starts 3 redis-servers with --cluster-enabled yes
 * (servers.c), makes them one cluster of 3 primaries and no replicas
 * (redis-cli --cluster create), waits until each says cluster_state:ok,
 * and keeps it for all its runs. Each run draws 16 distinct keys at random
 * out of `keys` ("bk:0" ...): they lie in 16 slots, almost always on all
 * 3 primaries (a run fails if a sample's keys do not reach every primary
 * more than half the time). One sample is timed (CLOCK_MONOTONIC):
 *
 *   ordo   ordo_lock_all of the 16 in X (timeout 5000 ms) on
 *          redis-cluster://, then ordo_unlock_all (which must release
 *          16): every slot group's ACQUIRE at once, then every RELEASE
 *          at once (rcluster.c, docs/backend-redis.md)
 *   peer   the per-key lock most Redis Cluster clients use: SET key val NX
 *          PX 30000 for each key in order, each to the primary of its slot
 *          (from CLUSTER SLOTS, the slot by CRC16 as the cluster computes
 *          it), one at a time, then DEL of each in the same order; every
 *          SET must answer OK
 *
 * The result is the run's median sample in microseconds (metric "us p50",
 * lower is better); extras p99_us and ops_per_s.
 *
 * Interface:
 *   bench_rcluster_table   the rows (bench.c lists it after its own rows)
 */
#include "servers.h"

#include <ordo.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RCB_NODES 3
#define RCB_KPL 16
#define RCB_KEY_MAX 24
#define RCB_SLOTS 16384

typedef struct rcb_state_s {
  bench_server_t srv[RCB_NODES];
  uint64_t seed;
} rcb_state_t;

/* Redis Cluster's key slot: CRC16/XMODEM of the key, or of its hash tag
 * (the bytes between the first '{' and the next '}', when there are any),
 * modulo 16384 (the cluster specification). */
static unsigned rcb_slot(const char *k, size_t n) {
  const char *o = memchr(k, '{', n);
  if (o) {
    const char *c = memchr(o + 1, '}', n - (size_t)(o + 1 - k));
    if (c && c > o + 1) {
      n = (size_t)(c - o - 1);
      k = o + 1;
    }
  }
  unsigned crc = 0;
  for (size_t i = 0; i < n; i++) {
    crc ^= (unsigned)(unsigned char)k[i] << 8;
    for (int b = 0; b < 8; b++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % RCB_SLOTS;
}

static uint64_t rcb_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void rcb_teardown(const bench_row_t *row, void *state) {
  rcb_state_t *st = state;
  if (st == NULL)
    return;
  for (int i = 0; i < RCB_NODES; i++)
    bench_server_stop(row, &st->srv[i]);
  free(st);
}

/* Every node says cluster_state:ok, within 20 s. */
static int rcb_wait_ok(const bench_row_t *row, rcb_state_t *st) {
  double end = bench_now() + 20.0;
  while (bench_now() < end) {
    int ok = 0;
    for (int i = 0; i < RCB_NODES; i++) {
      redisContext *c = bench_server_connect(&st->srv[i], 2.0);
      redisReply *r = c ? redisCommand(c, "CLUSTER INFO") : NULL;
      if (r && r->type == REDIS_REPLY_STRING &&
          strstr(r->str, "cluster_state:ok"))
        ok++;
      if (r)
        freeReplyObject(r);
      if (c)
        redisFree(c);
    }
    if (ok == RCB_NODES)
      return 0;
    usleep(50000);
  }
  bench_error(row, "the cluster did not reach cluster_state:ok in 20 s");
  return -1;
}

static int rcb_setup(const bench_row_t *row, void **state) {
  static const char *const extra[] = {"--cluster-enabled",
                                      "yes",
                                      "--cluster-config-file",
                                      "nodes.conf",
                                      "--cluster-node-timeout",
                                      "5000",
                                      NULL};
  rcb_state_t *st = calloc(1, sizeof *st);
  if (st == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  for (int i = 0; i < RCB_NODES; i++)
    if (bench_server_start_redis(row, &st->srv[i], extra) != 0) {
      rcb_teardown(row, st);
      return -1;
    }
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "timeout 30 redis-cli --cluster create 127.0.0.1:%d 127.0.0.1:%d "
           "127.0.0.1:%d --cluster-yes >/dev/null 2>&1",
           st->srv[0].port, st->srv[1].port, st->srv[2].port);
  if (system(cmd) != 0) {
    bench_error(row, "redis-cli --cluster create failed: %s", cmd);
    rcb_teardown(row, st);
    return -1;
  }
  if (rcb_wait_ok(row, st) != 0) {
    rcb_teardown(row, st);
    return -1;
  }
  st->seed = 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid();
  *state = st;
  return 0;
}

/* The samples of one run, in nanoseconds. */
typedef struct rcb_samples_s {
  uint64_t *ns;
  size_t n, cap;
} rcb_samples_t;

static int rcb_push(rcb_samples_t *s, uint64_t ns) {
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

static int rcb_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static int rcb_keycmp(const void *a, const void *b) {
  return strcmp(a, b);
}

/* Which node serves each slot (CLUSTER SLOTS of node 0), by index. */
static int rcb_map(const bench_row_t *row, rcb_state_t *st, signed char *map) {
  memset(map, -1, RCB_SLOTS);
  redisContext *c = bench_server_connect(&st->srv[0], 5.0);
  redisReply *r = c ? redisCommand(c, "CLUSTER SLOTS") : NULL;
  int rc = -1;
  if (r && r->type == REDIS_REPLY_ARRAY) {
    for (size_t i = 0; i < r->elements; i++) {
      redisReply *e = r->element[i];
      if (e->elements < 3 || e->element[2]->elements < 2)
        continue;
      int port = (int)e->element[2]->element[1]->integer;
      for (int n = 0; n < RCB_NODES; n++)
        if (st->srv[n].port == port)
          for (long long s = e->element[0]->integer;
               s <= e->element[1]->integer && s < RCB_SLOTS; s++)
            map[s] = (signed char)n;
    }
    rc = 0;
    for (int s = 0; s < RCB_SLOTS; s++)
      if (map[s] < 0)
        rc = -1;
  }
  if (rc != 0)
    bench_error(row, "CLUSTER SLOTS did not cover every slot");
  if (r)
    freeReplyObject(r);
  if (c)
    redisFree(c);
  return rc;
}

/* Draws 16 distinct keys into names, sorted (the order both sides take
 * them in); with tags, key i is "{tags[i % 3]}:bk:N". */
static void rcb_draw(uint64_t *rng, long long nkeys,
                     char names[RCB_KPL][RCB_KEY_MAX],
                     char tags[RCB_NODES][8]) {
  long long pick[RCB_KPL];
  for (int i = 0; i < RCB_KPL;) {
    long long k = (long long)(bench_rng_next(rng) % (uint64_t)nkeys);
    int j = 0;
    while (j < i && pick[j] != k)
      j++;
    if (j == i)
      pick[i++] = k;
  }
  for (int i = 0; i < RCB_KPL; i++)
    if (tags)
      snprintf(names[i], RCB_KEY_MAX, "{%s}:bk:%lld", tags[i % RCB_NODES],
               pick[i]);
    else
      snprintf(names[i], RCB_KEY_MAX, "bk:%lld", pick[i]);
  qsort(names, RCB_KPL, RCB_KEY_MAX, rcb_keycmp);
}

static int rcb_run(const bench_row_t *row, void *state, double seconds,
                   double *out, int peer) {
  rcb_state_t *st = state;
  long long nkeys = bench_param_int(row, "keys");
  char names[RCB_KPL][RCB_KEY_MAX];
  signed char map[RCB_SLOTS];
  redisContext *c[RCB_NODES] = {0};
  rcb_samples_t s = {0};
  ordo_t *o = NULL;
  ordo_txn_t *t = NULL;
  uint64_t rng = (st->seed += 0x9E3779B97F4A7C15ULL) | 1;
  long spread = 0;
  int rc = -1, orc;
  int tagged = (int)bench_param_int(row, "tagged");
  char tags[RCB_NODES][8];
  if (rcb_map(row, st, map) != 0)
    return -1;
  /* tagged: one hash tag per primary ("t<n>", the first whose slot that
   * primary serves), so that the 16 keys make 3 slot groups. */
  for (int n = 0; n < RCB_NODES; n++) {
    tags[n][0] = 0;
    for (int k = 0; k < 100000 && !tags[n][0]; k++) {
      char tg[8];
      snprintf(tg, sizeof tg, "t%d", k);
      if (map[rcb_slot(tg, strlen(tg))] == n)
        memcpy(tags[n], tg, sizeof tg);
    }
  }
  if (peer) {
    for (int i = 0; i < RCB_NODES; i++)
      if ((c[i] = bench_server_connect(&st->srv[i], 5.0)) == NULL) {
        bench_error(row, "cannot connect to node %d", i);
        goto out;
      }
  } else {
    char url[128];
    snprintf(url, sizeof url,
             "redis-cluster://127.0.0.1:%d?lease_ms=30000&timeout_ms=5000",
             st->srv[0].port);
    if ((orc = ordo_open(&o, url, NULL)) != 0 ||
        (orc = ordo_txn_begin(o, &t, NULL)) != 0) {
      bench_error(row, "%s: %s", url, ordo_err_name(orc));
      goto out;
    }
  }
  uint64_t t0 = rcb_ns(), now = t0, end = t0 + (uint64_t)(seconds * 1e9);
  while (now < end) {
    rcb_draw(&rng, nkeys, names, tagged ? tags : NULL);
    int on[RCB_NODES] = {0}, node[RCB_KPL];
    for (int i = 0; i < RCB_KPL; i++) {
      node[i] = map[rcb_slot(names[i], strlen(names[i]))];
      on[node[i]] = 1;
    }
    spread += on[0] && on[1] && on[2];
    uint64_t a = rcb_ns();
    if (peer) {
      for (int i = 0; i < RCB_KPL; i++) {
        redisReply *r =
            redisCommand(c[node[i]], "SET %s 1 NX PX 30000", names[i]);
        int ok =
            r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
        if (r)
          freeReplyObject(r);
        if (!ok) {
          bench_error(row, "peer: SET %s NX was not OK", names[i]);
          goto out;
        }
      }
      for (int i = 0; i < RCB_KPL; i++) {
        redisReply *r = redisCommand(c[node[i]], "DEL %s", names[i]);
        int ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        if (r)
          freeReplyObject(r);
        if (!ok) {
          bench_error(row, "peer: DEL %s did not delete it", names[i]);
          goto out;
        }
      }
    } else {
      ordo_req_t reqs[RCB_KPL];
      for (int i = 0; i < RCB_KPL; i++)
        reqs[i] = (ordo_req_t)ORDO_REQ_X(names[i], strlen(names[i]));
      if ((orc = ordo_lock_all(t, reqs, RCB_KPL, 5000)) != 0) {
        bench_error(row, "ordo_lock_all of 16 keys: %s", ordo_err_name(orc));
        goto out;
      }
      if ((orc = ordo_unlock_all(t)) != RCB_KPL) {
        bench_error(row, "ordo_unlock_all: %d, not 16", orc);
        goto out;
      }
    }
    now = rcb_ns();
    if (rcb_push(&s, now - a) != 0) {
      bench_error(row, "out of memory");
      goto out;
    }
  }
  if (s.n == 0 || 2 * spread < (long)s.n) {
    bench_error(row, "%zu samples, %ld of them on all 3 primaries", s.n,
                spread);
    goto out;
  }
  qsort(s.ns, s.n, sizeof *s.ns, rcb_cmp);
  *out = (double)s.ns[(s.n - 1) / 2] / 1e3;
  size_t r99 = (size_t)ceil(0.99 * (double)s.n);
  bench_extra(row, "p99_us", (double)s.ns[(r99 ? r99 : 1) - 1] / 1e3);
  bench_extra(row, "ops_per_s", (double)s.n / ((double)(now - t0) / 1e9));
  rc = 0;
out:
  if (t)
    ordo_txn_end(t);
  if (o)
    ordo_close(o);
  for (int i = 0; i < RCB_NODES; i++)
    if (c[i])
      redisFree(c[i]);
  free(s.ns);
  return rc;
}

static int rcb_run_ordo(const bench_row_t *row, void *state, double seconds,
                        double *out) {
  return rcb_run(row, state, seconds, out, 0);
}

static int rcb_run_peer(const bench_row_t *row, void *state, double seconds,
                        double *out) {
  return rcb_run(row, state, seconds, out, 1);
}

#define RCB_ROW(id_, title_, tagged_, target_)                                 \
  {                                                                            \
    .id = id_, .title = title_, .metric = "us p50", .higher_is_better = 0,     \
    .peer_name = "per-key SET NX PX, then DEL, key by key to its node",        \
    .target = target_,                                                         \
    .params = {{"keys", 100000, NULL}, {"tagged", tagged_, NULL}},             \
    .setup = rcb_setup, .teardown = rcb_teardown, .run_ordo = rcb_run_ordo,    \
    .run_peer = rcb_run_peer, .extras = {"p99_us", "ops_per_s"},               \
  }

static const bench_row_t rcluster_rows[] = {
    RCB_ROW("rcluster_lock16",
            "redis-cluster:// on 3 primaries, lock+unlock of 16 keys in 16 "
            "slots",
            0, 2.0),
    RCB_ROW("rcluster_lock16_tagged",
            "redis-cluster:// on 3 primaries, lock+unlock of 16 keys under 3 "
            "hash tags (one per primary)",
            1, NAN),
};

const bench_table_t bench_rcluster_table = {
    rcluster_rows, sizeof rcluster_rows / sizeof rcluster_rows[0]};
