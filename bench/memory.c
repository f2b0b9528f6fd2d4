/*
 * memory.c -- what a held lock costs a lock server in memory: ordod holding
 * 1,000,000 locks on distinct keys against redis-server holding the same
 * keys set with SET NX PX; see README.md (row memory_1m_locks).
 *
 * Each run starts its server fresh (servers.c), opens `sessions`
 * connections (hiredis, blocking) and PINGs each, reads the server's RSS
 * (VmRSS of /proc/PID/status, the same way for both), then creates `keys`
 * holds on distinct keys "lk:0000000" ... "lk:0999999" (7 digits, so at
 * most 10^7 keys, all of one length), keys/sessions consecutive keys per
 * connection, MEMORY_GROUP connections at a time with MEMORY_BATCH
 * acquires in flight on each (see memory_fill()):
 *
 *   ordod  LOCK 1 k X WAIT 0 LEASE 600000
 *   redis  SET k owner NX PX 600000 (owner: a random string per
 *          connection, as in pairs.c)
 *
 * It checks every reply (ordod: [lease ms, [k, token > 0]]; redis: OK),
 * checks that the server really holds them all (ordod: INFO's granted
 * minus released requests, and its lock objects, both exactly `keys`,
 * nothing waiting, every session still there; redis: DBSIZE), reads the
 * RSS again, and reports (after - before) / keys in bytes. The connections
 * are then closed and the server stopped. A run lasts as long as filling
 * the server takes; `seconds` only tells quick mode (runs under 0.5 s) from
 * full mode: quick mode holds a tenth of `keys` (and uses a tenth of the
 * sessions), since the metric is per lock and the fill dominates its time.
 *
 * Each session holds keys / sessions locks: ordod's per-session index makes
 * that cheap now (it was a linear search, O(n^2) per session, before), but a
 * session may hold at most --max-session-locks keys (100,000 by default);
 * bench_server_start() passes no flags.
 *
 * Extras: keys (what the server reported holding), rss_mib (its RSS after
 * the fill), fill_s (seconds to create the holds), conn_kib (RSS growth per
 * connection while connecting, before any hold; not part of the metric).
 *
 * Interface:
 *   bench_memory_table   the row (bench.c lists it after its own rows)
 */
#include "servers.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMORY_BATCH 32       /* acquires in flight on one connection */
#define MEMORY_GROUP 16       /* connections filled at once */
#define MEMORY_REPLY_S 30.0   /* bound on one reply (hiredis timeout) */
#define MEMORY_LEASE "600000" /* ms: ordod's LEASE and redis's PX */
#define MEMORY_KEY_FMT "lk:%07ld"
#define MEMORY_KEY_MAX 24   /* "lk:" and any long */
#define MEMORY_OWNER_MAX 24 /* "owner:" and 16 hex digits */

/* VmRSS of pid in kB from /proc/PID/status, or -1. */
static long memory_rss_kb(pid_t pid) {
  char path[64], line[256];
  long kb = -1;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "VmRSS:", 6) == 0) {
      kb = strtol(line + 6, NULL, 10);
      break;
    }
  fclose(f);
  return kb;
}

/* Queues the acquire of key on c. 0, or -1 (out of memory). */
static int memory_append(redisContext *c, bench_server_kind kind,
                         const char *key, const char *owner) {
  if (kind == BENCH_SERVER_ORDOD) {
    const char *argv[] = {"LOCK", "1", key,     "X",
                          "WAIT", "0", "LEASE", MEMORY_LEASE};
    return redisAppendCommandArgv(c, 8, argv, NULL) == REDIS_OK ? 0 : -1;
  }
  const char *argv[] = {"SET", key, owner, "NX", "PX", MEMORY_LEASE};
  return redisAppendCommandArgv(c, 6, argv, NULL) == REDIS_OK ? 0 : -1;
}

/* 1 if r grants key: ordod [lease ms > 0, [key, token > 0]], redis OK. */
static int memory_granted(const redisReply *r, bench_server_kind kind,
                          const char *key) {
  if (kind == BENCH_SERVER_REDIS)
    return r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      r->element[0]->type != REDIS_REPLY_INTEGER ||
      r->element[0]->integer <= 0 || r->element[1]->type != REDIS_REPLY_ARRAY ||
      r->element[1]->elements != 2)
    return 0;
  const redisReply *k = r->element[1]->element[0];
  const redisReply *t = r->element[1]->element[1];
  return k->type == REDIS_REPLY_STRING && k->len == strlen(key) &&
         memcmp(k->str, key, k->len) == 0 && t->type == REDIS_REPLY_INTEGER &&
         t->integer > 0;
}

/* Reads and checks the replies to the acquires of keys [lo, hi) on c. 0,
 * or -1 after reporting. */
static int memory_replies(const bench_row_t *row, bench_server_kind kind,
                          redisContext *c, long lo, long hi) {
  const char *name = kind == BENCH_SERVER_ORDOD ? "ordod" : "redis-server";
  char key[MEMORY_KEY_MAX];
  for (long i = lo; i < hi; i++) {
    redisReply *r = NULL;
    if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL) {
      bench_error(row, "%s: no reply to the acquire of key %ld: %s", name, i,
                  c->errstr);
      return -1;
    }
    snprintf(key, sizeof key, MEMORY_KEY_FMT, i);
    int ok = memory_granted(r, kind, key);
    if (!ok)
      bench_error(row, "%s: the acquire of %s was not granted: %s", name, key,
                  r->type == REDIS_REPLY_ERROR    ? r->str
                  : r->type == REDIS_REPLY_NIL    ? "nil (the key was set)"
                  : r->type == REDIS_REPLY_STATUS ? r->str
                                                  : "an unexpected reply");
    freeReplyObject(r);
    if (!ok)
      return -1;
  }
  return 0;
}

/*
 * memory_fill -- creates per holds on each of the n connections c[], on
 * keys [first + i * per, first + (i + 1) * per) for connection i: in rounds
 * of MEMORY_BATCH acquires sent on every connection, then every reply read
 * and checked. So MEMORY_BATCH x n requests are in flight while no
 * connection's buffers grow past one batch. 0, or -1 after reporting.
 */
static int memory_fill(const bench_row_t *row, bench_server_kind kind,
                       redisContext **c, char (*owner)[MEMORY_OWNER_MAX], int n,
                       long first, long per) {
  const char *name = kind == BENCH_SERVER_ORDOD ? "ordod" : "redis-server";
  char key[MEMORY_KEY_MAX];
  for (long off = 0; off < per; off += MEMORY_BATCH) {
    long nb = per - off < MEMORY_BATCH ? per - off : MEMORY_BATCH;
    for (int j = 0; j < n; j++) {
      long lo = first + j * per + off;
      for (long i = lo; i < lo + nb; i++) {
        snprintf(key, sizeof key, MEMORY_KEY_FMT, i);
        if (memory_append(c[j], kind, key, owner[j]) != 0) {
          bench_error(row, "out of memory");
          return -1;
        }
      }
      int done = 0;
      while (!done)
        if (redisBufferWrite(c[j], &done) != REDIS_OK) {
          bench_error(row, "%s: cannot send: %s", name, c[j]->errstr);
          return -1;
        }
    }
    for (int j = 0; j < n; j++) {
      long lo = first + j * per + off;
      if (memory_replies(row, kind, c[j], lo, lo + nb) != 0)
        return -1;
    }
  }
  return 0;
}

/* How many holds the server has: ordod's granted - released requests
 * (checked against its lock objects, its waiters and its sessions), redis's
 * DBSIZE. The count, or -1 after reporting. */
static long long memory_held(const bench_row_t *row, bench_server_kind kind,
                             redisContext *c, long long keys, int sessions) {
  if (kind == BENCH_SERVER_REDIS) {
    redisReply *r = redisCommand(c, "DBSIZE");
    long long n = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r != NULL)
      freeReplyObject(r);
    if (n < 0)
      bench_error(row, "redis-server: no usable reply to DBSIZE");
    return n;
  }
  long long acq = bench_server_info(c, NULL, "lock_acquired");
  long long rel = bench_server_info(c, NULL, "lock_released");
  long long obj = bench_server_info(c, NULL, "lock_objects");
  long long wait = bench_server_info(c, NULL, "lock_waiting");
  long long sess = bench_server_info(c, NULL, "sessions");
  if (acq < 0 || rel < 0 || obj < 0 || wait < 0 || sess < 0) {
    bench_error(row, "ordod: INFO lacks lock_acquired, lock_released, "
                     "lock_objects, lock_waiting or sessions");
    return -1;
  }
  if (obj != keys || wait != 0 || sess < sessions) {
    bench_error(row,
                "ordod after the fill: %lld lock objects (not %lld), %lld "
                "waiting, %lld sessions (not %d)",
                obj, keys, wait, sess, sessions);
    return -1;
  }
  return acq - rel;
}

/*
 * memory_run -- one run of one side: a fresh server, `sessions`
 * connections, `keys` holds; *out = RSS growth per hold in bytes.
 */
static int memory_run(const bench_row_t *row, bench_server_kind kind,
                      double seconds, double *out) {
  const char *name = kind == BENCH_SERVER_ORDOD ? "ordod" : "redis-server";
  long keys = (long)bench_param_int(row, "keys");
  int sessions = (int)bench_param_int(row, "sessions");
  if (seconds < 0.5) { /* quick mode: a tenth, the same shape */
    keys /= 10;
    sessions = sessions / 10 > 0 ? sessions / 10 : 1;
  }
  bench_server_t srv;
  redisContext **conn = NULL;
  char(*owner)[MEMORY_OWNER_MAX] = NULL;
  uint64_t rng = (uint64_t)(bench_now() * 1e9) | 1;
  int rc = -1;

  if (keys < 1 || keys > 10000000 || sessions < 1 || keys % sessions != 0) {
    bench_error(row, "keys must be a multiple of sessions, 1..10^7");
    return -1;
  }
  if (bench_server_start(row, kind, &srv) != 0)
    return -1;
  conn = calloc((size_t)sessions, sizeof *conn);
  owner = calloc((size_t)sessions, sizeof *owner);
  if (conn == NULL || owner == NULL) {
    bench_error(row, "out of memory");
    goto out;
  }
  long rss_fresh = memory_rss_kb(srv.pid);
  for (int i = 0; i < sessions; i++) {
    snprintf(owner[i], sizeof owner[i], "owner:%016" PRIx64,
             bench_rng_next(&rng));
    conn[i] = bench_server_connect(&srv, MEMORY_REPLY_S);
    redisReply *r = conn[i] != NULL ? redisCommand(conn[i], "PING") : NULL;
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS &&
             strcmp(r->str, "PONG") == 0;
    if (r != NULL)
      freeReplyObject(r);
    if (!ok) {
      bench_error(row, "%s: connection %d of %d: no PONG", name, i + 1,
                  sessions);
      goto out;
    }
  }
  long rss0 = memory_rss_kb(srv.pid);
  if (rss_fresh < 0 || rss0 < 0) {
    bench_error(row, "%s: cannot read VmRSS of pid %d", name, (int)srv.pid);
    goto out;
  }

  long per = keys / sessions;
  double t0 = bench_now();
  for (int g = 0; g < sessions; g += MEMORY_GROUP) {
    int n = sessions - g < MEMORY_GROUP ? sessions - g : MEMORY_GROUP;
    if (memory_fill(row, kind, conn + g, owner + g, n, (long)g * per, per) != 0)
      goto out;
  }
  double fill = bench_now() - t0;

  long long held = memory_held(row, kind, conn[0], keys, sessions);
  if (held < 0)
    goto out;
  if (held != keys) {
    bench_error(row, "%s holds %lld keys after the fill, not %ld", name, held,
                keys);
    goto out;
  }
  long rss1 = memory_rss_kb(srv.pid);
  if (rss1 < 0) {
    bench_error(row, "%s: cannot read VmRSS of pid %d", name, (int)srv.pid);
    goto out;
  }
  *out = (double)(rss1 - rss0) * 1024.0 / (double)keys;
  bench_extra(row, "keys", (double)held);
  bench_extra(row, "rss_mib", (double)rss1 / 1024.0);
  bench_extra(row, "fill_s", fill);
  bench_extra(row, "conn_kib", (double)(rss0 - rss_fresh) / sessions);
  rc = 0;
out:
  if (conn != NULL)
    for (int i = 0; i < sessions; i++)
      if (conn[i] != NULL)
        redisFree(conn[i]);
  free(conn);
  free(owner);
  bench_server_stop(row, &srv);
  return rc;
}

static int memory_run_ordod(const bench_row_t *row, void *state, double seconds,
                            double *out) {
  (void)state;
  return memory_run(row, BENCH_SERVER_ORDOD, seconds, out);
}

static int memory_run_redis(const bench_row_t *row, void *state, double seconds,
                            double *out) {
  (void)state;
  return memory_run(row, BENCH_SERVER_REDIS, seconds, out);
}

static const bench_row_t memory_rows[] = {
    {
        .id = "memory_1m_locks",
        .title = "Memory of 1,000,000 held locks on distinct keys",
        .metric = "bytes/lock",
        .higher_is_better = 0,
        .peer_name = "redis SET NX PX",
        /* At most 100 bytes a lock against redis-server's 148-166 (issue
         * 22): its 148 over 100. */
        .target = 1.48,
        .params = {{"keys", 1000000, NULL}, {"sessions", 1000, NULL}},
        .run_ordo = memory_run_ordod,
        .run_peer = memory_run_redis,
        .extras = {"keys", "rss_mib", "fill_s", "conn_kib"},
        .fixed_work = 1,
    },
};

const bench_table_t bench_memory_table = {
    memory_rows, sizeof memory_rows / sizeof memory_rows[0]};
