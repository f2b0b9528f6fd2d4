/*
 * curves.c -- how cost grows with size (issue 22, "How cost grows"): four
 * families of rows, one row per point of a curve, each point measured
 * against its peer in the same run; bench/curves.sh draws them as the PNGs
 * of docs/img/ (README.md, "Curves").
 *
 *   curve_lockall_kK   lock_all + unlock_all of K distinct keys, K = 1 ..
 *                      1024, one client: ordod (LOCK K k1 X ... WAIT 0,
 *                      then UNLOCK) against redis-server with one Lua script
 *                      each way (all-or-nothing SET PX, then DEL of what the
 *                      owner holds). Metric: ns per key of one lock+unlock.
 *                      The ordo side also times ordo in-process (mem://,
 *                      ordo_lock_all + ordo_unlock_all) and reports it as the
 *                      extra inproc_ns_per_key.
 *   curve_held_NeE     N = 10^E locks held on distinct keys (E = 3 .. 6; 10^7
 *                      as the opt-in row curve_held_1e7, named in ROWS=):
 *                      the server's RSS growth per held lock in bytes, as
 *                      memory.c measures it, and the extra lock_unlock_us,
 *                      the round trip of a lock+unlock of one more key
 *                      while the N are held. ordod against redis SET NX PX.
 *   curve_waiters_wW   W sessions blocked on one key of ordod (LOCK 1 k X
 *                      WAIT 600000): the time of one release, from the
 *                      holder's UNLOCK until the next waiter has read its
 *                      grant, p50 in us. The woken session's predecessor
 *                      queues again, so the queue stays W long. Peer: a
 *                      redis-server token list, W clients blocked in BLPOP
 *                      and a release that RPUSHes the token. Then every
 *                      session hangs up at once; the extra drain_us is the
 *                      time until the server has dropped them all, per
 *                      session (the cost of a waiter's cancel).
 *   curve_bank_tT      the bank (bank.c), 10,000 accounts, T = 1 .. 64
 *                      workers: ordo against hand-ordered pthread mutexes.
 *
 * The lock_all rows start both servers once per row (each run's keys are
 * all released again); the held and waiter rows start a fresh server for
 * each run, so that one run's memory or queue never carries into the next.
 *
 * The sessions of the waiter rows are file descriptors of this process and
 * of the server: the run raises RLIMIT_NOFILE to its hard limit and fails
 * clearly when W + a margin does not fit (README.md says how far it goes).
 *
 * Quick mode (runs under 0.5 s): held rows hold at most 10^5 locks, waiter
 * rows at most 1,000 waiters; the extras locks and waiters say what a run
 * really held.
 *
 * Interface:
 *   bench_curves_table   the rows (bench.c lists them after its own)
 */
#include "servers.h"

#include <ordo.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#define CURVE_KEYS 100000       /* the key space of the lock_all rows */
#define CURVE_MAX_K 1024        /* ordod's --max-keys default */
#define CURVE_REPLY_S 30.0      /* bound on one reply (hiredis timeout) */
#define CURVE_LEASE "600000"    /* ms: ordod's LEASE and redis's PX */
#define CURVE_BATCH 256         /* held rows: acquires in flight per session */
#define CURVE_PER_SESSION 10000 /* held rows: locks per session at most */
#define CURVE_WAIT_MS "600000"  /* waiter rows: how long a waiter waits */
#define CURVE_FD_MARGIN 64      /* fds a run needs besides its sessions */
#define CURVE_SETTLE_S 60.0     /* bound on the waiters all queueing */
#define CURVE_DRAIN_S 120.0     /* bound on the sessions all gone */
#define CURVE_MAX_SAMPLES 200000
#define CURVE_TIMED_MIN 50 /* samples a run takes at least */

static const char curve_acquire_lua[] =
    "if redis.call('exists',unpack(KEYS))>0 then return 0 end "
    "for i=1,#KEYS do redis.call('set',KEYS[i],ARGV[1],'PX',ARGV[2]) end "
    "return 1";
static const char curve_release_lua[] =
    "local n=0 for i=1,#KEYS do if redis.call('get',KEYS[i])==ARGV[1] then "
    "n=n+redis.call('del',KEYS[i]) end end return n";

static const char *curve_name(bench_server_kind kind) {
  return kind == BENCH_SERVER_ORDOD ? "ordod" : "redis-server";
}

/* Sends argv on c and reads its reply (blocking); NULL after reporting. */
static redisReply *curve_cmd(const bench_row_t *row, bench_server_kind kind,
                             redisContext *c, int argc, const char **argv) {
  redisReply *r = redisCommandArgv(c, argc, argv, NULL);
  if (r == NULL)
    bench_error(row, "%s: no reply to %s: %s", curve_name(kind), argv[0],
                c->errstr);
  else if (r->type == REDIS_REPLY_ERROR) {
    bench_error(row, "%s: %s: %s", curve_name(kind), argv[0], r->str);
    freeReplyObject(r);
    r = NULL;
  }
  return r;
}

/* 1 if r is ordod's grant of n keys: [lease ms > 0, [k1, t1, ...]]. */
static int curve_ordod_granted(const redisReply *r, size_t n) {
  return r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
         r->element[0]->type == REDIS_REPLY_INTEGER &&
         r->element[0]->integer > 0 &&
         r->element[1]->type == REDIS_REPLY_ARRAY &&
         r->element[1]->elements == 2 * n;
}

/* ---- lock_all of k keys ------------------------------------------------- */

/* The names of the key space, "ck:000000" ..., made once per run. */
typedef char curve_key_t[16];

static curve_key_t *curve_keys(void) {
  curve_key_t *k = malloc(CURVE_KEYS * sizeof *k);
  if (k != NULL)
    for (long i = 0; i < CURVE_KEYS; i++)
      snprintf(k[i], sizeof k[i], "ck:%06ld", i);
  return k;
}

/* k distinct keys: consecutive ones from a random start, modulo the space. */
static long curve_first(uint64_t *rng) {
  return (long)(bench_rng_next(rng) % CURVE_KEYS);
}

/* ordo in-process: lock_all + unlock_all of k keys for `seconds`; ns/key. */
static int curve_lockall_inproc(const bench_row_t *row, curve_key_t *names,
                                int k, double seconds, double *out) {
  ordo_t *o = NULL;
  ordo_txn_t *t = NULL;
  ordo_req_t reqs[CURVE_MAX_K];
  uint64_t rng = 0x9E3779B97F4A7C15ULL;
  long iters = 0;
  int rc;
  if ((rc = ordo_open(&o, "mem://", NULL)) != 0 ||
      (rc = ordo_txn_begin(o, &t, NULL)) != 0) {
    bench_error(row, "mem://: %s", ordo_strerror(rc));
    ordo_close(o);
    return -1;
  }
  double t0 = bench_now(), t1 = t0;
  while (t1 - t0 < seconds || iters < CURVE_TIMED_MIN) {
    long first = curve_first(&rng);
    for (int i = 0; i < k; i++) {
      const char *name = names[(first + i) % CURVE_KEYS];
      reqs[i] = (ordo_req_t)ORDO_REQ_X(name, strlen(name));
    }
    if ((rc = ordo_lock_all(t, reqs, (size_t)k, 1000)) != 0) {
      bench_error(row, "ordo_lock_all of %d keys: %s", k, ordo_strerror(rc));
      break;
    }
    if ((rc = ordo_unlock_all(t)) != k) {
      bench_error(row, "ordo_unlock_all released %d keys, not %d", rc, k);
      rc = -1;
      break;
    }
    rc = 0;
    iters++;
    if ((iters & 63) == 0)
      t1 = bench_now();
  }
  t1 = bench_now();
  ordo_txn_end(t);
  ordo_close(o);
  *out = (t1 - t0) * 1e9 / ((double)iters * k);
  return rc == 0 ? 0 : -1;
}

/*
 * curve_lockall_server -- one client's lock_all + unlock_all of k keys on a
 * fresh server for `seconds`, every reply checked; *out = ns per key.
 */
static int curve_lockall_server(const bench_row_t *row, bench_server_kind kind,
                                const bench_server_t *srv, curve_key_t *names,
                                int k, double seconds, double *out) {
  static const char *argv[2 * CURVE_MAX_K + 8];
  char nk[16], sha_acq[41] = "", sha_rel[41] = "";
  uint64_t rng = 0x9E3779B97F4A7C15ULL;
  long iters = 0;
  int rc = -1;
  snprintf(nk, sizeof nk, "%d", k);
  redisContext *c = bench_server_connect(srv, CURVE_REPLY_S);
  if (c == NULL) {
    bench_error(row, "%s: cannot connect", curve_name(kind));
    goto out;
  }
  if (kind == BENCH_SERVER_REDIS) {
    const char *src[2] = {curve_acquire_lua, curve_release_lua};
    char *sha[2] = {sha_acq, sha_rel};
    for (int i = 0; i < 2; i++) {
      const char *load[] = {"SCRIPT", "LOAD", src[i]};
      redisReply *r = curve_cmd(row, kind, c, 3, load);
      if (r == NULL)
        goto out;
      snprintf(sha[i], 41, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
      freeReplyObject(r);
    }
  }
  double t0 = bench_now(), t1 = t0;
  while (t1 - t0 < seconds || iters < CURVE_TIMED_MIN) {
    long first = curve_first(&rng);
    int n = 0, m;
    if (kind == BENCH_SERVER_ORDOD) {
      argv[n++] = "LOCK";
      argv[n++] = nk;
      for (int i = 0; i < k; i++) {
        argv[n++] = names[(first + i) % CURVE_KEYS];
        argv[n++] = "X";
      }
      argv[n++] = "WAIT";
      argv[n++] = "0";
    } else {
      argv[n++] = "EVALSHA";
      argv[n++] = sha_acq;
      argv[n++] = nk;
      for (int i = 0; i < k; i++)
        argv[n++] = names[(first + i) % CURVE_KEYS];
      argv[n++] = "owner:curves";
      argv[n++] = CURVE_LEASE;
    }
    redisReply *r = curve_cmd(row, kind, c, n, argv);
    if (r == NULL)
      goto out;
    int ok = kind == BENCH_SERVER_ORDOD
                 ? curve_ordod_granted(r, (size_t)k)
                 : r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    if (!ok) {
      bench_error(row, "%s: lock_all of %d keys not granted", curve_name(kind),
                  k);
      goto out;
    }
    if (kind == BENCH_SERVER_ORDOD) {
      argv[0] = "UNLOCK";
      m = 1;
    } else {
      argv[1] = sha_rel; /* the same keys and owner; the PX goes unread */
      m = n - 1;
    }
    r = curve_cmd(row, kind, c, m, argv);
    if (r == NULL)
      goto out;
    ok = r->type == REDIS_REPLY_INTEGER && r->integer == k;
    freeReplyObject(r);
    if (!ok) {
      bench_error(row, "%s: unlock of %d keys did not release them all",
                  curve_name(kind), k);
      goto out;
    }
    iters++;
    if ((iters & 15) == 0)
      t1 = bench_now();
  }
  t1 = bench_now();
  *out = (t1 - t0) * 1e9 / ((double)iters * k);
  rc = 0;
out:
  if (c != NULL)
    redisFree(c);
  return rc;
}

/* The lock_all rows' servers, started once per row (index: the kind). */
typedef struct curve_lockall_state_s {
  bench_server_t srv[2];
} curve_lockall_state_t;

static int curve_lockall_setup(const bench_row_t *row, void **state) {
  curve_lockall_state_t *st = calloc(1, sizeof *st);
  if (st == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  if (bench_server_start(row, BENCH_SERVER_ORDOD,
                         &st->srv[BENCH_SERVER_ORDOD]) != 0) {
    free(st);
    return -1;
  }
  if (bench_server_start(row, BENCH_SERVER_REDIS,
                         &st->srv[BENCH_SERVER_REDIS]) != 0) {
    bench_server_stop(row, &st->srv[BENCH_SERVER_ORDOD]);
    free(st);
    return -1;
  }
  *state = st;
  return 0;
}

static void curve_lockall_teardown(const bench_row_t *row, void *state) {
  curve_lockall_state_t *st = state;
  for (int i = 0; i < 2; i++)
    bench_server_stop(row, &st->srv[i]);
  free(st);
}

static int curve_lockall_run(const bench_row_t *row, bench_server_kind kind,
                             const curve_lockall_state_t *st, double seconds,
                             double *out) {
  int k = (int)bench_param_int(row, "keys_per_lock");
  curve_key_t *names = curve_keys();
  double inproc;
  int rc = -1;
  if (names == NULL || k < 1 || k > CURVE_MAX_K) {
    bench_error(row, names == NULL ? "out of memory" : "keys_per_lock 1..1024");
    free(names);
    return -1;
  }
  rc = curve_lockall_server(row, kind, &st->srv[kind], names, k, seconds, out);
  if (rc == 0 && kind == BENCH_SERVER_ORDOD) {
    rc = curve_lockall_inproc(row, names, k, seconds, &inproc);
    if (rc == 0)
      bench_extra(row, "inproc_ns_per_key", inproc);
  }
  free(names);
  return rc;
}

static int curve_lockall_ordod(const bench_row_t *row, void *state,
                               double seconds, double *out) {
  return curve_lockall_run(row, BENCH_SERVER_ORDOD, state, seconds, out);
}

static int curve_lockall_redis(const bench_row_t *row, void *state,
                               double seconds, double *out) {
  return curve_lockall_run(row, BENCH_SERVER_REDIS, state, seconds, out);
}

/* ---- Held locks ---------------------------------------------------------- */

/* The resident set of pid in kB: /proc/PID/statm's second field (pages),
 * the figure VmRSS shows and memory.c reads; -1 when unreadable. */
static long curve_rss_kb(pid_t pid) {
  char path[64];
  long size = 0, resident = -1;
  snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  int got = fscanf(f, "%ld %ld", &size, &resident);
  fclose(f);
  return got == 2 ? resident * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

/* Queues the acquire of key on c (ordod LOCK with a lease, redis SET NX
 * PX). 0, or -1. */
static int curve_append_acquire(redisContext *c, bench_server_kind kind,
                                const char *key) {
  if (kind == BENCH_SERVER_ORDOD) {
    const char *argv[] = {"LOCK", "1", key,     "X",
                          "WAIT", "0", "LEASE", CURVE_LEASE};
    return redisAppendCommandArgv(c, 8, argv, NULL) == REDIS_OK ? 0 : -1;
  }
  const char *argv[] = {"SET", key, "owner:curves", "NX", "PX", CURVE_LEASE};
  return redisAppendCommandArgv(c, 6, argv, NULL) == REDIS_OK ? 0 : -1;
}

/* Reads n replies on c, each a grant of one key. 0, or -1 after
 * reporting. */
static int curve_read_grants(const bench_row_t *row, bench_server_kind kind,
                             redisContext *c, long n) {
  for (long i = 0; i < n; i++) {
    redisReply *r = NULL;
    if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL) {
      bench_error(row, "%s: no reply to an acquire: %s", curve_name(kind),
                  c->errstr);
      return -1;
    }
    int ok = kind == BENCH_SERVER_ORDOD
                 ? curve_ordod_granted(r, 1)
                 : r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    freeReplyObject(r);
    if (!ok) {
      bench_error(row, "%s: an acquire was not granted", curve_name(kind));
      return -1;
    }
  }
  return 0;
}

/* The round trip of one lock+unlock of a key nobody holds, on c, in us:
 * the median of a run of `seconds`. -1 after reporting. */
static double curve_lock_unlock_us(const bench_row_t *row,
                                   bench_server_kind kind, redisContext *c,
                                   double seconds) {
  static double v[CURVE_MAX_SAMPLES];
  int n = 0;
  double t0 = bench_now();
  while ((bench_now() - t0 < seconds || n < CURVE_TIMED_MIN) &&
         n < CURVE_MAX_SAMPLES) {
    double s = bench_now();
    if (curve_append_acquire(c, kind, "free:0") != 0 ||
        curve_read_grants(row, kind, c, 1) != 0)
      return -1;
    const char *ou[] = {"UNLOCK", "free:0"};
    const char *rd[] = {"DEL", "free:0"};
    redisReply *r =
        curve_cmd(row, kind, c, 2, kind == BENCH_SERVER_ORDOD ? ou : rd);
    int ok = r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    if (r != NULL)
      freeReplyObject(r);
    if (!ok) {
      bench_error(row, "%s: the release of free:0 released nothing",
                  curve_name(kind));
      return -1;
    }
    v[n++] = (bench_now() - s) * 1e6;
  }
  for (int i = 1; i < n; i++) /* insertion sort: n is small */
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double x = v[j];
      v[j] = v[j - 1];
      v[j - 1] = x;
    }
  return v[n / 2];
}

/*
 * curve_held_run -- a fresh server, `locks` holds on distinct keys
 * "hk:00000000" ... from ceil(locks / CURVE_PER_SESSION) sessions, checked
 * (ordod: INFO's lock_objects; redis: DBSIZE); *out = RSS growth per hold
 * in bytes. Then the lock+unlock time of one more key.
 */
static int curve_held_run(const bench_row_t *row, bench_server_kind kind,
                          double seconds, double *out) {
  static const char *const ordod_flags[] = {
      "--max-locks", "20000000", "--max-session-locks", "100000", NULL};
  long locks = (long)bench_param_int(row, "locks");
  if (seconds < 0.5 && locks > 100000)
    locks = 100000; /* quick mode */
  int sessions = (int)((locks + CURVE_PER_SESSION - 1) / CURVE_PER_SESSION);
  bench_server_t srv;
  redisContext **conn = calloc((size_t)sessions, sizeof *conn);
  char key[24];
  int rc = -1;
  if (conn == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  if ((kind == BENCH_SERVER_ORDOD
           ? bench_server_start_ordod(row, &srv, 0, ordod_flags)
           : bench_server_start(row, kind, &srv)) != 0) {
    free(conn);
    return -1;
  }
  for (int i = 0; i < sessions; i++)
    if ((conn[i] = bench_server_connect(&srv, CURVE_REPLY_S)) == NULL) {
      bench_error(row, "%s: cannot connect session %d", curve_name(kind), i);
      goto out;
    }
  long rss0 = curve_rss_kb(srv.pid);
  double f0 = bench_now();
  for (long done = 0; done < locks;) {
    redisContext *c = conn[done / CURVE_PER_SESSION];
    long end = (done / CURVE_PER_SESSION + 1) * CURVE_PER_SESSION;
    long nb = CURVE_BATCH;
    if (nb > end - done)
      nb = end - done;
    if (nb > locks - done)
      nb = locks - done;
    for (long i = done; i < done + nb; i++) {
      snprintf(key, sizeof key, "hk:%08ld", i);
      if (curve_append_acquire(c, kind, key) != 0) {
        bench_error(row, "out of memory");
        goto out;
      }
    }
    if (curve_read_grants(row, kind, c, nb) != 0)
      goto out;
    done += nb;
  }
  double fill = bench_now() - f0;
  long long held;
  if (kind == BENCH_SERVER_ORDOD) {
    held = bench_server_info(conn[0], NULL, "lock_objects");
  } else {
    const char *dbsize[] = {"DBSIZE"};
    redisReply *r = curve_cmd(row, kind, conn[0], 1, dbsize);
    held = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r != NULL)
      freeReplyObject(r);
  }
  long rss1 = curve_rss_kb(srv.pid);
  if (held != locks || rss0 < 0 || rss1 < 0) {
    bench_error(row,
                "%s holds %lld keys after the fill, not %ld (or its "
                "VmRSS cannot be read)",
                curve_name(kind), held, locks);
    goto out;
  }
  double lu = curve_lock_unlock_us(row, kind, conn[0], seconds);
  if (lu < 0)
    goto out;
  *out = (double)(rss1 - rss0) * 1024.0 / (double)locks;
  bench_extra(row, "lock_unlock_us", lu);
  bench_extra(row, "locks", (double)held);
  bench_extra(row, "fill_s", fill);
  rc = 0;
out:
  for (int i = 0; i < sessions; i++)
    if (conn[i] != NULL)
      redisFree(conn[i]);
  free(conn);
  bench_server_stop(row, &srv);
  return rc;
}

static int curve_held_ordod(const bench_row_t *row, void *state, double seconds,
                            double *out) {
  (void)state;
  return curve_held_run(row, BENCH_SERVER_ORDOD, seconds, out);
}

static int curve_held_redis(const bench_row_t *row, void *state, double seconds,
                            double *out) {
  (void)state;
  return curve_held_run(row, BENCH_SERVER_REDIS, seconds, out);
}

/* ---- Waiters on one key -------------------------------------------------- */

/* Raises RLIMIT_NOFILE's soft limit to its hard one so that `need` fds fit
 * in this process and in the server it starts (which inherits it). 0, or
 * -1 after reporting. */
static int curve_fd_room(const bench_row_t *row, long need) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    bench_error(row, "getrlimit: %s", strerror(errno));
    return -1;
  }
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
      bench_error(row, "setrlimit: %s", strerror(errno));
      return -1;
    }
  }
  if (rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur < need) {
    bench_error(row,
                "%ld file descriptors needed, RLIMIT_NOFILE's hard limit is "
                "%ld (raise it, e.g. ulimit -Hn, or pick fewer waiters)",
                need, (long)rl.rlim_cur);
    return -1;
  }
  return 0;
}

/* Queues the blocking acquire of the hot key on c and sends it. 0, or -1. */
static int curve_enqueue(redisContext *c, bench_server_kind kind) {
  const char *lk[] = {"LOCK", "1", "hot", "X", "WAIT", CURVE_WAIT_MS};
  const char *bl[] = {"BLPOP", "hot", "0"};
  int rc = kind == BENCH_SERVER_ORDOD ? redisAppendCommandArgv(c, 6, lk, NULL)
                                      : redisAppendCommandArgv(c, 3, bl, NULL);
  int done = 0;
  while (rc == REDIS_OK && !done)
    rc = redisBufferWrite(c, &done);
  return rc == REDIS_OK ? 0 : -1;
}

/* How many sessions wait: ordod's lock_waiting, redis's blocked_clients. */
static long long curve_waiting(redisContext *c, bench_server_kind kind) {
  return kind == BENCH_SERVER_ORDOD
             ? bench_server_info(c, NULL, "lock_waiting")
             : bench_server_info(c, "clients", "blocked_clients");
}

/* 1 if r grants the hot key: ordod's grant, redis's [hot, token]. */
static int curve_hot_granted(const redisReply *r, bench_server_kind kind) {
  if (kind == BENCH_SERVER_ORDOD)
    return curve_ordod_granted(r, 1);
  return r->type == REDIS_REPLY_ARRAY && r->elements == 2;
}

static int curve_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/*
 * curve_waiters_run -- a fresh server; session 0 takes the hot key, W more
 * queue for it; then, for `seconds`, releases: the holder's UNLOCK (redis:
 * RPUSH of the token), epoll until one waiter's grant is readable, read it:
 * that span is one sample. The old holder then queues again. *out = the
 * samples' p50 in us.
 */
static int curve_waiters_run(const bench_row_t *row, bench_server_kind kind,
                             double seconds, double *out) {
  long w = (long)bench_param_int(row, "waiters");
  if (seconds < 0.5 && w > 1000)
    w = 1000; /* quick mode */
  long nc = w + 1, ns = 0;
  char maxc[24];
  snprintf(maxc, sizeof maxc, "%ld", nc + CURVE_FD_MARGIN);
  const char *const ordod_flags[] = {"--maxclients", maxc, NULL};
  static double v[CURVE_MAX_SAMPLES];
  bench_server_t srv;
  redisContext *ctl = NULL, **conn = NULL;
  int ep = -1, rc = -1;

  if (curve_fd_room(row, nc + 2 * CURVE_FD_MARGIN) != 0)
    return -1;
  if ((kind == BENCH_SERVER_ORDOD
           ? bench_server_start_ordod(row, &srv, 0, ordod_flags)
           : bench_server_start(row, kind, &srv)) != 0)
    return -1;
  conn = calloc((size_t)nc, sizeof *conn);
  ctl = bench_server_connect(&srv, CURVE_REPLY_S);
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (conn == NULL || ctl == NULL || ep < 0) {
    bench_error(row, "%s: out of memory, no connection or no epoll",
                curve_name(kind));
    goto out;
  }
  if (kind == BENCH_SERVER_REDIS) {
    const char *cfg[] = {"CONFIG", "SET", "maxclients", maxc};
    redisReply *r = curve_cmd(row, kind, ctl, 4, cfg);
    if (r == NULL)
      goto out;
    freeReplyObject(r);
  }
  /* Session 0 holds: ordod grants its LOCK at once; redis's list is empty,
   * which is the held state (a release pushes the one token). */
  for (long i = 0; i < nc; i++) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
    if ((conn[i] = bench_server_connect(&srv, CURVE_REPLY_S)) == NULL ||
        epoll_ctl(ep, EPOLL_CTL_ADD, conn[i]->fd, &ev) != 0) {
      bench_error(row, "%s: session %ld of %ld: no connection",
                  curve_name(kind), i + 1, nc);
      goto out;
    }
    if (i == 0 && kind == BENCH_SERVER_ORDOD) {
      if (curve_enqueue(conn[0], kind) != 0 ||
          curve_read_grants(row, kind, conn[0], 1) != 0)
        goto out;
    } else if (i > 0 && curve_enqueue(conn[i], kind) != 0) {
      bench_error(row, "%s: session %ld cannot send", curve_name(kind), i);
      goto out;
    }
  }
  /* Wait (bounded) until all w are queued on the server. */
  double q0 = bench_now();
  long long waiting;
  while ((waiting = curve_waiting(ctl, kind)) != w) {
    if (waiting < 0 || bench_now() - q0 > CURVE_SETTLE_S) {
      bench_error(row, "%s: %lld sessions waiting, not %ld", curve_name(kind),
                  waiting, w);
      goto out;
    }
    bench_sleep(0.001);
  }
  long holder = 0;
  double t0 = bench_now();
  while ((bench_now() - t0 < seconds || ns < CURVE_TIMED_MIN) &&
         ns < CURVE_MAX_SAMPLES) {
    const char *ul[] = {"UNLOCK", "hot"};
    const char *rp[] = {"RPUSH", "hot", "token"};
    struct epoll_event ev;
    double s = bench_now();
    redisReply *r =
        curve_cmd(row, kind, conn[holder], kind == BENCH_SERVER_ORDOD ? 2 : 3,
                  kind == BENCH_SERVER_ORDOD ? ul : rp);
    int ok = r != NULL && r->type == REDIS_REPLY_INTEGER;
    if (r != NULL)
      freeReplyObject(r);
    if (!ok)
      goto out;
    int ne;
    do
      ne = epoll_wait(ep, &ev, 1, (int)(CURVE_REPLY_S * 1000));
    while (ne < 0 && errno == EINTR);
    if (ne != 1) {
      bench_error(row, "%s: no waiter was granted the key", curve_name(kind));
      goto out;
    }
    long next = (long)ev.data.u64;
    r = NULL;
    if (next == holder || redisGetReply(conn[next], (void **)&r) != REDIS_OK ||
        r == NULL || !curve_hot_granted(r, kind)) {
      bench_error(row, "%s: session %ld's reply is not a grant",
                  curve_name(kind), next);
      if (r != NULL)
        freeReplyObject(r);
      goto out;
    }
    freeReplyObject(r);
    v[ns++] = (bench_now() - s) * 1e6;
    if (curve_enqueue(conn[holder], kind) != 0)
      goto out;
    holder = next;
  }
  qsort(v, (size_t)ns, sizeof *v, curve_cmp);
  *out = v[ns / 2];
  bench_extra(row, "p99_us", v[(size_t)((double)ns * 0.99)]);
  bench_extra(row, "waiters", (double)w);
  /* The drain: every session but the control one hangs up, each with a
   * request queued (all but the holder); the time until the server counts
   * only the control session, per session, says what dropping a waiter
   * costs against the queue. */
  for (long i = 0; i < nc; i++) {
    redisFree(conn[i]);
    conn[i] = NULL;
  }
  double d0 = bench_now();
  long long left;
  while ((left = kind == BENCH_SERVER_ORDOD
                     ? bench_server_info(ctl, NULL, "sessions")
                     : bench_server_info(ctl, "clients", "connected_clients")) >
         1) {
    if (bench_now() - d0 > CURVE_DRAIN_S) {
      bench_error(row, "%s: %lld sessions left %.0f s after the hang-ups",
                  curve_name(kind), left, CURVE_DRAIN_S);
      goto out;
    }
    bench_sleep(0.001);
  }
  if (left < 0) {
    bench_error(row, "%s: INFO lacks the session count", curve_name(kind));
    goto out;
  }
  bench_extra(row, "drain_us", (bench_now() - d0) * 1e6 / (double)nc);
  rc = 0;
out:
  if (conn != NULL)
    for (long i = 0; i < nc; i++)
      if (conn[i] != NULL)
        redisFree(conn[i]);
  free(conn);
  if (ctl != NULL)
    redisFree(ctl);
  if (ep >= 0)
    close(ep);
  bench_server_stop(row, &srv);
  return rc;
}

static int curve_waiters_ordod(const bench_row_t *row, void *state,
                               double seconds, double *out) {
  (void)state;
  return curve_waiters_run(row, BENCH_SERVER_ORDOD, seconds, out);
}

static int curve_waiters_redis(const bench_row_t *row, void *state,
                               double seconds, double *out) {
  (void)state;
  return curve_waiters_run(row, BENCH_SERVER_REDIS, seconds, out);
}

/* ---- The rows ------------------------------------------------------------ */

#define CURVE_LOCKALL_ROW(k)                                                   \
  {                                                                            \
    .id = "curve_lockall_k" #k,                                                \
    .title = "Curve: lock_all+unlock_all of " #k " keys, one client",          \
    .metric = "ns/key", .higher_is_better = 0,                                 \
    .peer_name = "redis one Lua script each way", .target = NAN,               \
    .params = {{"keys_per_lock", k, NULL}, {"keys", CURVE_KEYS, NULL}},        \
    .setup = curve_lockall_setup, .teardown = curve_lockall_teardown,          \
    .run_ordo = curve_lockall_ordod, .run_peer = curve_lockall_redis,          \
    .extras = {"inproc_ns_per_key"},                                           \
  }

#define CURVE_HELD_ROW(e, n, opt)                                              \
  {                                                                            \
    .id = "curve_held_1e" #e, .title = "Curve: " #n " held locks",             \
    .metric = "bytes/lock", .higher_is_better = 0,                             \
    .peer_name = "redis SET NX PX", .target = NAN,                             \
    .params = {{"locks", n, NULL}}, .run_ordo = curve_held_ordod,              \
    .run_peer = curve_held_redis,                                              \
    .extras = {"lock_unlock_us", "locks", "fill_s"}, .fixed_work = 1,          \
    .opt_in = opt,                                                             \
  }

#define CURVE_WAITERS_ROW(w)                                                   \
  {                                                                            \
    .id = "curve_waiters_w" #w,                                                \
    .title = "Curve: one release with " #w " waiters on the key",              \
    .metric = "us p50", .higher_is_better = 0,                                 \
    .peer_name = "redis BLPOP queue, RPUSH release", .target = NAN,            \
    .params = {{"waiters", w, NULL}}, .run_ordo = curve_waiters_ordod,         \
    .run_peer = curve_waiters_redis,                                           \
    .extras = {"p99_us", "waiters", "drain_us"}, .fixed_work = 1,              \
  }

#define CURVE_BANK_ROW(t)                                                      \
  {                                                                            \
    .id = "curve_bank_t" #t,                                                   \
    .title = "Curve: bank, 10000 accounts, " #t " workers",                    \
    .metric = "transfers/s", .higher_is_better = 1,                            \
    .peer_name = "pthread hand-ordered", .target = NAN,                        \
    .params = {{"accounts", 10000, NULL}, {"workers", t, NULL}},               \
    .run_ordo = bank_run_ordo, .run_peer = bank_run_pthread,                   \
  }

static const bench_row_t curve_rows[] = {
    CURVE_LOCKALL_ROW(1),
    CURVE_LOCKALL_ROW(4),
    CURVE_LOCKALL_ROW(16),
    CURVE_LOCKALL_ROW(64),
    CURVE_LOCKALL_ROW(256),
    CURVE_LOCKALL_ROW(1024),
    CURVE_HELD_ROW(3, 1000, 0),
    CURVE_HELD_ROW(4, 10000, 0),
    CURVE_HELD_ROW(5, 100000, 0),
    CURVE_HELD_ROW(6, 1000000, 0),
    CURVE_HELD_ROW(7, 10000000, 1),
    CURVE_WAITERS_ROW(1),
    CURVE_WAITERS_ROW(10),
    CURVE_WAITERS_ROW(100),
    CURVE_WAITERS_ROW(1000),
    CURVE_WAITERS_ROW(10000),
    CURVE_BANK_ROW(1),
    CURVE_BANK_ROW(2),
    CURVE_BANK_ROW(4),
    CURVE_BANK_ROW(8),
    CURVE_BANK_ROW(16),
    CURVE_BANK_ROW(32),
    CURVE_BANK_ROW(64),
};

const bench_table_t bench_curves_table = {curve_rows, sizeof curve_rows /
                                                          sizeof curve_rows[0]};
