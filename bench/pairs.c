/*
 * pairs.c -- ordod, ordo's lock server, against redis-server as a lock
 * server: acquire-then-release pairs of random keys, over the network, from
 * one load generator that drives both servers the same way; see README.md
 * (rows ordod_pairs_* and ordod_lock16).
 *
 * The row's setup starts both servers (servers.c) and keeps them for all its
 * runs. A run opens `clients` connections (hiredis) to one server and drives
 * them from this one thread, non-blocking, with poll(2). Each connection
 * sends a batch of `pipeline` pairs' commands at once, reads all the
 * replies, checks them, and sends its next batch:
 *
 *   ordod  LOCK n k1 X ... kn X WAIT 0, then UNLOCK k1 (n = 1) or UNLOCK
 *          (n = 16: every lock of the session)
 *   redis  n = 1:  SET k owner NX PX 30000, then EVALSHA of
 *                  "if redis.call('get',KEYS[1])==ARGV[1] then return
 *                  redis.call('del',KEYS[1]) else return 0 end"
 *          n = 16: EVALSHA of an all-or-nothing acquire (none of the keys
 *                  exists, then SET each with PX), then EVALSHA of a
 *                  release that deletes each key it owns
 *
 * so that a batch is: acquire k1, release k1, acquire k2, release k2, ...
 * The n keys of a pair are distinct, drawn at random from `keys` keys named
 * "lock:000000" ... ; owner is a random string per connection (a session's
 * identity on ordod). The result is pairs/s: pairs whose acquire succeeded,
 * in batches completed within the run's `seconds`, over `seconds`; batches
 * still in flight at the end are drained, checked, and not counted.
 *
 * Every reply is checked. An acquire reply must be a grant (ordod: [lease
 * ms, [key, token, ...]] with our keys in canonical order and tokens > 0;
 * redis: OK, or 1 from the script) or a refusal (ordod: -TIMEOUT; redis: nil,
 * or 0). A refusal is allowed only if another connection had one of the
 * keys in a batch in flight at that moment (in flight when ours was sent,
 * or sent since); refusals are counted (extra busy_pct). A release must
 * report all n keys released when the acquire succeeded, and none when it
 * failed. After each run the server must hold nothing: ordod's INFO shows
 * that it granted exactly the requests we saw granted and released
 * exactly their keys, and that nothing waits; redis's DBSIZE is 0.
 *
 * Extras: busy_pct (refused acquires, % of pairs attempted), server_cpu_pct
 * (the server's CPU time over the run's wall time, all its threads; 100 = one
 * core), client_cpu_pct (this load generator's, the same way).
 *
 * Interface:
 *   pairs_setup(), pairs_teardown()        both servers, the scripts, keys
 *   pairs_run_ordod(), pairs_run_redis()   one timed run against each
 */
#include "servers.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define PAIRS_KEY_LEN 11       /* "lock:012345" */
#define PAIRS_KEY_STRIDE 12    /* with its terminator */
#define PAIRS_MAX_KEYS 1000000 /* six digits in the names */
#define PAIRS_MAX_KPL 16
#define PAIRS_PX "30000"    /* redis: the key's expiry; ordod's lease is the */
#define PAIRS_LEASE 30000   /* same 30 s by default */
#define PAIRS_STALL_MS 5000 /* no reply for this long: the run fails */
#define PAIRS_MAX_ARGS (4 + 2 * PAIRS_MAX_KPL)

enum { PAIRS_ORDOD = 0, PAIRS_REDIS = 1 };

static const char pairs_release1_lua[] =
    "if redis.call('get',KEYS[1])==ARGV[1] then "
    "return redis.call('del',KEYS[1]) else return 0 end";
static const char pairs_acquire_lua[] =
    "if redis.call('exists',unpack(KEYS))>0 then return 0 end "
    "for i=1,#KEYS do redis.call('set',KEYS[i],ARGV[1],'PX',ARGV[2]) end "
    "return 1";
static const char pairs_release_lua[] =
    "local n=0 for i=1,#KEYS do if redis.call('get',KEYS[i])==ARGV[1] then "
    "n=n+redis.call('del',KEYS[i]) end end return n";

typedef struct pairs_state_s {
  bench_server_t srv[2]; /* PAIRS_ORDOD, PAIRS_REDIS */
  redisContext *ctl[2];  /* a control connection to each */
  char sha_release1[41]; /* redis: the scripts' SHA1s */
  char sha_acquire[41];
  char sha_release[41];
  char *keys; /* nkeys names, PAIRS_KEY_STRIDE bytes apart */
  uint32_t nkeys;
  uint64_t seed;
} pairs_state_t;

typedef struct pairs_conn_s {
  redisContext *c;
  uint64_t rng;
  char owner[24];
  uint32_t *key;      /* the batch's pipeline * kpl key numbers */
  unsigned char *got; /* per pair: its acquire succeeded */
  int replies;        /* read of the batch in flight */
  uint64_t sent_seq;  /* when the batch in flight was sent */
  int want_write;     /* output is left to write */
  int done;
} pairs_conn_t;

typedef struct pairs_run_s {
  const bench_row_t *row;
  pairs_state_t *st;
  int side, clients, pipeline, kpl;
  pairs_conn_t *conn;
  uint32_t *inflight; /* per key: in batches in flight (with repeats) */
  uint64_t *done_seq; /* per key: seq of the last completed batch with it */
  uint64_t seq;
  long long pairs, busy; /* in batches completed within the run */
  long long granted;     /* every grant, drained batches too */
} pairs_run_t;

static const char *pairs_side_name(int side) {
  return side == PAIRS_ORDOD ? "ordod" : "redis-server";
}

static const char *pairs_key(const pairs_state_t *st, uint32_t k) {
  return st->keys + (size_t)k * PAIRS_KEY_STRIDE;
}

/* SCRIPT LOAD of src into sha (41 bytes). */
static int pairs_load_script(const bench_row_t *row, redisContext *c,
                             const char *src, char *sha) {
  redisReply *r = redisCommand(c, "SCRIPT LOAD %s", src);
  int ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40;
  if (ok)
    memcpy(sha, r->str, 41);
  else
    bench_error(row, "redis-server: SCRIPT LOAD failed: %s",
                r == NULL                      ? c->errstr
                : r->type == REDIS_REPLY_ERROR ? r->str
                                               : "unexpected reply");
  if (r != NULL)
    freeReplyObject(r);
  return ok ? 0 : -1;
}

void pairs_teardown(const bench_row_t *row, void *state) {
  pairs_state_t *st = state;
  if (st == NULL)
    return;
  for (int i = 0; i < 2; i++) {
    if (st->ctl[i] != NULL)
      redisFree(st->ctl[i]);
    bench_server_stop(row, &st->srv[i]);
  }
  free(st->keys);
  free(st);
}

int pairs_setup(const bench_row_t *row, void **state) {
  pairs_state_t *st = calloc(1, sizeof *st);
  long long nkeys = bench_param_int(row, "keys");
  long long kpl = bench_param_int(row, "keys_per_lock");
  if (st == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  if (nkeys < 2 * kpl || nkeys > PAIRS_MAX_KEYS || kpl < 1 ||
      kpl > PAIRS_MAX_KPL) {
    bench_error(row, "keys must be 2*keys_per_lock..%d, keys_per_lock 1..%d",
                PAIRS_MAX_KEYS, PAIRS_MAX_KPL);
    free(st);
    return -1;
  }
  st->nkeys = (uint32_t)nkeys;
  st->seed = 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid();
  st->keys = malloc((size_t)nkeys * PAIRS_KEY_STRIDE);
  if (st->keys == NULL) {
    bench_error(row, "out of memory");
    free(st);
    return -1;
  }
  for (uint32_t k = 0; k < st->nkeys; k++) {
    char *name = st->keys + (size_t)k * PAIRS_KEY_STRIDE;
    memcpy(name, "lock:", 5);
    for (uint32_t i = 0, v = k; i < 6; i++, v /= 10)
      name[10 - i] = (char)('0' + v % 10);
    name[PAIRS_KEY_LEN] = '\0';
  }
  if (bench_server_start(row, BENCH_SERVER_ORDOD, &st->srv[PAIRS_ORDOD]) != 0 ||
      bench_server_start(row, BENCH_SERVER_REDIS, &st->srv[PAIRS_REDIS]) != 0)
    goto fail;
  for (int i = 0; i < 2; i++) {
    st->ctl[i] = bench_server_connect(&st->srv[i], 5.0);
    if (st->ctl[i] == NULL) {
      bench_error(row, "cannot connect to %s on port %d", pairs_side_name(i),
                  st->srv[i].port);
      goto fail;
    }
  }
  if (pairs_load_script(row, st->ctl[PAIRS_REDIS], pairs_release1_lua,
                        st->sha_release1) != 0 ||
      pairs_load_script(row, st->ctl[PAIRS_REDIS], pairs_acquire_lua,
                        st->sha_acquire) != 0 ||
      pairs_load_script(row, st->ctl[PAIRS_REDIS], pairs_release_lua,
                        st->sha_release) != 0)
    goto fail;
  *state = st;
  return 0;
fail:
  pairs_teardown(row, st);
  return -1;
}

/* ---- One run ------------------------------------------------------------- */

/* Appends the batch's commands and starts writing them. */
static int pairs_send(pairs_run_t *run, pairs_conn_t *cn) {
  const pairs_state_t *st = run->st;
  const char *argv[PAIRS_MAX_ARGS];
  size_t len[PAIRS_MAX_ARGS];
  int kpl = run->kpl;
  char nk[8];
  size_t nklen = (size_t)snprintf(nk, sizeof nk, "%d", kpl);
  size_t olen = strlen(cn->owner);

  for (int p = 0; p < run->pipeline; p++) {
    uint32_t *keys = cn->key + (size_t)p * (size_t)kpl;
    for (int i = 0; i < kpl; i++) {
      uint32_t k;
      int dup;
      do {
        k = (uint32_t)(bench_rng_next(&cn->rng) % st->nkeys);
        dup = 0;
        for (int j = 0; j < i; j++)
          dup |= keys[j] == k;
      } while (dup);
      keys[i] = k;
      run->inflight[k]++;
    }
    int n = 0, m = 0;
    if (run->side == PAIRS_ORDOD) {
      argv[n] = "LOCK", len[n++] = 4;
      argv[n] = nk, len[n++] = nklen;
      for (int i = 0; i < kpl; i++) {
        argv[n] = pairs_key(st, keys[i]), len[n++] = PAIRS_KEY_LEN;
        argv[n] = "X", len[n++] = 1;
      }
      argv[n] = "WAIT", len[n++] = 4;
      argv[n] = "0", len[n++] = 1;
      if (redisAppendCommandArgv(cn->c, n, argv, len) != REDIS_OK)
        goto fail;
      argv[m] = "UNLOCK", len[m++] = 6;
      if (kpl == 1)
        argv[m] = pairs_key(st, keys[0]), len[m++] = PAIRS_KEY_LEN;
    } else if (kpl == 1) {
      const char *k = pairs_key(st, keys[0]);
      const char *set[] = {"SET", k, cn->owner, "NX", "PX", PAIRS_PX};
      size_t setlen[] = {3, PAIRS_KEY_LEN, olen, 2, 2, strlen(PAIRS_PX)};
      if (redisAppendCommandArgv(cn->c, 6, set, setlen) != REDIS_OK)
        goto fail;
      argv[m] = "EVALSHA", len[m++] = 7;
      argv[m] = st->sha_release1, len[m++] = 40;
      argv[m] = "1", len[m++] = 1;
      argv[m] = k, len[m++] = PAIRS_KEY_LEN;
      argv[m] = cn->owner, len[m++] = olen;
    } else {
      argv[n] = "EVALSHA", len[n++] = 7;
      argv[n] = st->sha_acquire, len[n++] = 40;
      argv[n] = nk, len[n++] = nklen;
      for (int i = 0; i < kpl; i++)
        argv[n] = pairs_key(st, keys[i]), len[n++] = PAIRS_KEY_LEN;
      argv[n] = cn->owner, len[n++] = olen;
      argv[n] = PAIRS_PX, len[n++] = strlen(PAIRS_PX);
      if (redisAppendCommandArgv(cn->c, n, argv, len) != REDIS_OK)
        goto fail;
      argv[1] = st->sha_release; /* the same keys, then the owner */
      m = n - 1;
    }
    if (redisAppendCommandArgv(cn->c, m, argv, len) != REDIS_OK)
      goto fail;
  }
  cn->sent_seq = ++run->seq;
  cn->replies = 0;
  int done = 0;
  if (redisBufferWrite(cn->c, &done) != REDIS_OK)
    goto fail;
  cn->want_write = !done;
  return 0;
fail:
  bench_error(run->row, "%s: cannot send: %s", pairs_side_name(run->side),
              cn->c->errstr[0] ? cn->c->errstr : "out of memory");
  return -1;
}

/* 1 if a refusal of pair p of cn is explained: another connection had one
 * of its keys in a batch in flight when cn's batch was sent, or since. */
static int pairs_refusal_explained(const pairs_run_t *run,
                                   const pairs_conn_t *cn, int p) {
  size_t nb = (size_t)run->pipeline * (size_t)run->kpl;
  const uint32_t *keys = cn->key + (size_t)p * (size_t)run->kpl;
  for (int i = 0; i < run->kpl; i++) {
    uint32_t k = keys[i], own = 0;
    for (size_t j = 0; j < nb; j++)
      own += cn->key[j] == k;
    if (run->inflight[k] > own || run->done_seq[k] > cn->sent_seq)
      return 1;
  }
  return 0;
}

static const char *pairs_reply_text(const redisReply *r, char *buf, size_t n) {
  static const char *types[] = {"?",   "string", "array", "integer",
                                "nil", "status", "error"};
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
      r->type == REDIS_REPLY_ERROR)
    snprintf(buf, n, "%s '%.*s'", types[r->type],
             (int)(r->len < 200 ? r->len : 200), r->str);
  else if (r->type == REDIS_REPLY_INTEGER)
    snprintf(buf, n, "integer %lld", r->integer);
  else if (r->type == REDIS_REPLY_ARRAY)
    snprintf(buf, n, "array of %zu", r->elements);
  else
    snprintf(buf, n, "%s", r->type >= 1 && r->type <= 6 ? types[r->type] : "?");
  return buf;
}

/* An acquire's reply: 1 granted, 0 refused, -1 wrong. */
static int pairs_acquired(const pairs_run_t *run, const uint32_t *keys,
                          const redisReply *r) {
  if (run->side == PAIRS_REDIS) {
    if (run->kpl == 1) {
      if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0)
        return 1;
      return r->type == REDIS_REPLY_NIL ? 0 : -1;
    }
    if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1))
      return (int)r->integer;
    return -1;
  }
  if (r->type == REDIS_REPLY_ERROR)
    return strncmp(r->str, "TIMEOUT ", 8) == 0 ? 0 : -1;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      r->element[0]->type != REDIS_REPLY_INTEGER ||
      r->element[0]->integer <= 0 || r->element[0]->integer > PAIRS_LEASE ||
      r->element[1]->type != REDIS_REPLY_ARRAY ||
      r->element[1]->elements != 2 * (size_t)run->kpl)
    return -1;
  /* The keys in canonical order: fixed-width names sort as numbers. */
  uint32_t sorted[PAIRS_MAX_KPL];
  for (int i = 0; i < run->kpl; i++) {
    int j = i;
    while (j > 0 && sorted[j - 1] > keys[i]) {
      sorted[j] = sorted[j - 1];
      j--;
    }
    sorted[j] = keys[i];
  }
  for (int i = 0; i < run->kpl; i++) {
    const redisReply *k = r->element[1]->element[2 * i];
    const redisReply *t = r->element[1]->element[2 * i + 1];
    if (k->type != REDIS_REPLY_STRING || k->len != PAIRS_KEY_LEN ||
        memcmp(k->str, pairs_key(run->st, sorted[i]), PAIRS_KEY_LEN) != 0 ||
        t->type != REDIS_REPLY_INTEGER || t->integer <= 0)
      return -1;
  }
  return 1;
}

/* Checks reply number cn->replies of the batch; 0, or -1 reported. */
static int pairs_reply(pairs_run_t *run, pairs_conn_t *cn,
                       const redisReply *r) {
  int i = cn->replies++, p = i / 2;
  const uint32_t *keys = cn->key + (size_t)p * (size_t)run->kpl;
  char buf[256];
  if (i % 2 == 0) {
    int got = pairs_acquired(run, keys, r);
    if (got < 0) {
      bench_error(run->row, "%s: unexpected reply to the acquire of %s: %s",
                  pairs_side_name(run->side), pairs_key(run->st, keys[0]),
                  pairs_reply_text(r, buf, sizeof buf));
      return -1;
    }
    if (got == 0 && !pairs_refusal_explained(run, cn, p)) {
      bench_error(run->row,
                  "%s: the acquire of %s%s was refused while no other "
                  "client was using %s",
                  pairs_side_name(run->side), pairs_key(run->st, keys[0]),
                  run->kpl > 1 ? " ..." : "",
                  run->kpl > 1 ? "any of the keys" : "it");
      return -1;
    }
    cn->got[p] = (unsigned char)got;
    run->granted += got;
    return 0;
  }
  long long want = cn->got[p] ? run->kpl : 0;
  if (r->type != REDIS_REPLY_INTEGER || r->integer != want) {
    bench_error(run->row,
                "%s: the release of %s%s after %s acquire replied %s, not "
                "%lld",
                pairs_side_name(run->side), pairs_key(run->st, keys[0]),
                run->kpl > 1 ? " ..." : "",
                cn->got[p] ? "a successful" : "a refused",
                pairs_reply_text(r, buf, sizeof buf), want);
    return -1;
  }
  return 0;
}

/* The batch's replies are all in: book it; send the next one before the
 * deadline. */
static int pairs_batch_done(pairs_run_t *run, pairs_conn_t *cn, int counted) {
  size_t nb = (size_t)run->pipeline * (size_t)run->kpl;
  uint64_t seq = ++run->seq;
  for (size_t j = 0; j < nb; j++) {
    run->inflight[cn->key[j]]--;
    run->done_seq[cn->key[j]] = seq;
  }
  if (!counted) {
    cn->done = 1;
    return 0;
  }
  for (int p = 0; p < run->pipeline; p++) {
    run->pairs += cn->got[p];
    run->busy += !cn->got[p];
  }
  return pairs_send(run, cn);
}

/* Reads what is there on cn and handles every complete reply. */
static int pairs_read(pairs_run_t *run, pairs_conn_t *cn, int counted) {
  void *reply;
  if (redisBufferRead(cn->c) != REDIS_OK) {
    bench_error(run->row, "%s: connection lost: %s", pairs_side_name(run->side),
                cn->c->errstr);
    return -1;
  }
  for (;;) {
    if (redisGetReplyFromReader(cn->c, &reply) != REDIS_OK) {
      bench_error(run->row, "%s: bad reply: %s", pairs_side_name(run->side),
                  cn->c->errstr);
      return -1;
    }
    if (reply == NULL)
      return 0;
    if (cn->done || cn->replies >= 2 * run->pipeline) {
      bench_error(run->row, "%s: a reply to no command",
                  pairs_side_name(run->side));
      freeReplyObject(reply);
      return -1;
    }
    int rc = pairs_reply(run, cn, reply);
    freeReplyObject(reply);
    if (rc != 0)
      return -1;
    if (cn->replies == 2 * run->pipeline &&
        pairs_batch_done(run, cn, counted) != 0)
      return -1;
  }
}

/* Opens a connection and makes it non-blocking. */
static redisContext *pairs_connect(const pairs_run_t *run) {
  redisContext *c =
      bench_server_connect(&run->st->srv[run->side], PAIRS_STALL_MS / 1000.0);
  int one = 1;
  if (c == NULL) {
    bench_error(run->row, "cannot connect to %s", pairs_side_name(run->side));
    return NULL;
  }
  int fl = fcntl(c->fd, F_GETFL);
  if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
      setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    bench_error(run->row, "fcntl/setsockopt: %s", strerror(errno));
    redisFree(c);
    return NULL;
  }
  c->flags &= ~REDIS_BLOCK; /* hiredis: EAGAIN is not an error now */
  return c;
}

/* After the run: the server holds nothing, and counted what we did. */
static int pairs_check_server(pairs_run_t *run, long long acquired0,
                              long long released0) {
  redisContext *c = run->st->ctl[run->side];
  if (run->side == PAIRS_REDIS) {
    redisReply *r = redisCommand(c, "DBSIZE");
    int ok = r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 0;
    if (!ok)
      bench_error(run->row, "redis-server: %s after the run, not 0 keys",
                  r == NULL                        ? "no reply to DBSIZE"
                  : r->type == REDIS_REPLY_INTEGER ? "keys left"
                                                   : "bad DBSIZE reply");
    if (r != NULL)
      freeReplyObject(r);
    return ok ? 0 : -1;
  }
  /* lock_acquired counts granted requests, lock_released keys (ordo.h). */
  long long acq = bench_server_info(c, "locks", "lock_acquired") - acquired0;
  long long rel = bench_server_info(c, "locks", "lock_released") - released0;
  long long waiting = bench_server_info(c, "locks", "lock_waiting");
  if (acq != run->granted || rel != run->granted * run->kpl || waiting != 0) {
    bench_error(run->row,
                "ordod after the run: %lld requests granted and %lld keys "
                "released (we were granted %lld requests of %d keys), %lld "
                "waiting",
                acq, rel, run->granted, run->kpl, waiting);
    return -1;
  }
  return 0;
}

static double pairs_thread_cpu(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) != 0)
    return 0;
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int pairs_run(const bench_row_t *row, pairs_state_t *st, int side,
                     double seconds, double *out) {
  pairs_run_t run = {
      .row = row,
      .st = st,
      .side = side,
      .clients = (int)bench_param_int(row, "clients"),
      .pipeline = (int)bench_param_int(row, "pipeline"),
      .kpl = (int)bench_param_int(row, "keys_per_lock"),
  };
  size_t nb = (size_t)run.pipeline * (size_t)run.kpl;
  struct pollfd *fds = NULL;
  long long acquired0 = 0, released0 = 0;
  int rc = -1;

  if (run.clients < 1 || run.pipeline < 1) {
    bench_error(row, "clients and pipeline must be at least 1");
    return -1;
  }
  run.conn = calloc((size_t)run.clients, sizeof *run.conn);
  run.inflight = calloc(st->nkeys, sizeof *run.inflight);
  run.done_seq = calloc(st->nkeys, sizeof *run.done_seq);
  fds = calloc((size_t)run.clients, sizeof *fds);
  if (run.conn == NULL || run.inflight == NULL || run.done_seq == NULL ||
      fds == NULL) {
    bench_error(row, "out of memory");
    goto out;
  }
  for (int i = 0; i < run.clients; i++) {
    pairs_conn_t *cn = &run.conn[i];
    cn->rng = (st->seed += 0x9E3779B97F4A7C15ULL) | 1;
    snprintf(cn->owner, sizeof cn->owner, "owner:%016" PRIx64,
             bench_rng_next(&cn->rng));
    cn->key = calloc(nb, sizeof *cn->key);
    cn->got = calloc((size_t)run.pipeline, 1);
    if (cn->key == NULL || cn->got == NULL) {
      bench_error(row, "out of memory");
      goto out;
    }
    if ((cn->c = pairs_connect(&run)) == NULL)
      goto out;
  }
  if (side == PAIRS_ORDOD &&
      ((acquired0 =
            bench_server_info(st->ctl[side], "locks", "lock_acquired")) < 0 ||
       (released0 =
            bench_server_info(st->ctl[side], "locks", "lock_released")) < 0)) {
    bench_error(row, "ordod: no lock_acquired or lock_released in INFO");
    goto out;
  }

  double cpu0 = bench_server_cpu(&st->srv[side]), me0 = pairs_thread_cpu();
  double t0 = bench_now(), deadline = t0 + seconds, now = t0;
  for (int i = 0; i < run.clients; i++)
    if (pairs_send(&run, &run.conn[i]) != 0)
      goto out;
  for (int active = run.clients; active > 0;) {
    for (int i = 0; i < run.clients; i++) {
      pairs_conn_t *cn = &run.conn[i];
      fds[i].fd = cn->done ? -1 : cn->c->fd;
      fds[i].events = (short)(POLLIN | (cn->want_write ? POLLOUT : 0));
      fds[i].revents = 0;
    }
    int n = poll(fds, (nfds_t)run.clients, PAIRS_STALL_MS);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      bench_error(row, "%s: %s", pairs_side_name(side),
                  n == 0 ? "no reply for 5 s" : strerror(errno));
      goto out;
    }
    now = bench_now();
    int counted = now < deadline;
    for (int i = 0; i < run.clients; i++) {
      pairs_conn_t *cn = &run.conn[i];
      if (fds[i].revents == 0 || cn->done)
        continue;
      if (fds[i].revents & POLLOUT) {
        int done = 0;
        if (redisBufferWrite(cn->c, &done) != REDIS_OK) {
          bench_error(row, "%s: cannot send: %s", pairs_side_name(side),
                      cn->c->errstr);
          goto out;
        }
        cn->want_write = !done;
      }
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
          pairs_read(&run, cn, counted) != 0)
        goto out;
      active -= cn->done;
      if (cn->done)
        fds[i].fd = -1;
    }
  }
  double wall = bench_now() - t0;
  double cpu1 = bench_server_cpu(&st->srv[side]), me1 = pairs_thread_cpu();
  if (pairs_check_server(&run, acquired0, released0) != 0)
    goto out;

  *out = (double)run.pairs / seconds;
  if (run.pairs + run.busy > 0)
    bench_extra(row, "busy_pct",
                100.0 * (double)run.busy / (double)(run.pairs + run.busy));
  if (cpu0 >= 0 && cpu1 >= 0)
    bench_extra(row, "server_cpu_pct", 100.0 * (cpu1 - cpu0) / wall);
  bench_extra(row, "client_cpu_pct", 100.0 * (me1 - me0) / wall);
  rc = 0;
out:
  if (run.conn != NULL)
    for (int i = 0; i < run.clients; i++) {
      if (run.conn[i].c != NULL)
        redisFree(run.conn[i].c);
      free(run.conn[i].key);
      free(run.conn[i].got);
    }
  free(run.conn);
  free(run.inflight);
  free(run.done_seq);
  free(fds);
  return rc;
}

int pairs_run_ordod(const bench_row_t *row, void *state, double seconds,
                    double *out) {
  return pairs_run(row, state, PAIRS_ORDOD, seconds, out);
}

int pairs_run_redis(const bench_row_t *row, void *state, double seconds,
                    double *out) {
  return pairs_run(row, state, PAIRS_REDIS, seconds, out);
}
