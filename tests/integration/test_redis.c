/*
 * test_redis.c -- the redis:// backend against real redis-server processes
 * that tests/integration/redis_it.sh starts (redis_fixture.sh): one plain
 * (ORDO_REDIS_PORT, ORDO_REDIS_SOCK, ORDO_REDIS_PID), one with a password
 * (ORDO_REDIS_AUTH_PORT, password "s3cret") and, when the wrapper could
 * start it, a one-node Cluster owning every slot (ORDO_REDIS_CLUSTER_PORT).
 * A case whose server is missing is skipped.
 *
 * The cases: URLs, capabilities and the calls this backend lacks; the
 * scripts' SHA-1 names against the server's own; the key layout (the lock
 * hash, the fencing counter beside it, the lease on the key); a Unix
 * socket and a database; the renewal thread keeping a short lease alive;
 * a lost lease (the key deleted under it) reported through the callback
 * and as ORDO_ELEASE; a stale holder, both as a script run by hand and as
 * a stopped process, that cannot unlock or extend the next holder's lock;
 * bad input (unreachable host, nothing listening, a listener that never
 * answers, wrong or missing password, a bad database, a key that holds
 * other data, a server that stops answering); connections the server
 * closes for idleness; 20 waiters and one release (no storm); and the
 * Cluster's CROSSSLOT. Every wait is bounded.
 *
 * Run as "test_redis --stale-child URL KEY" it is the stale holder's
 * process (test_stale_holder_process).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "it_redis.h"
#include "backend/redis_script.h"
#include "backend/remote.h"

#include <arpa/inet.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

static int PORT, AUTH_PORT, CLUSTER_PORT;
static const char *SOCK;
static pid_t REDIS_PID;

#define NEED_PORT(p)                                                           \
  do {                                                                         \
    if ((p) == 0) {                                                            \
      print_message("no server for this case: skipped\n");                     \
      skip();                                                                  \
    }                                                                          \
  } while (0)

static ordo_t *open_url(const char *fmt, ...) {
  char url[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(url, sizeof url, fmt, ap);
  va_end(ap);
  ordo_t *o = NULL;
  int rc = ordo_open(&o, url, NULL);
  if (rc != 0)
    print_error("ordo_open(%s) -> %s\n", url, ordo_err_name(rc));
  assert_int_equal(rc, 0);
  return o;
}

static ordo_txn_t *txn(ordo_t *o) {
  ordo_txn_t *t = NULL;
  int rc = ordo_txn_begin(o, &t, NULL);
  if (rc != 0)
    print_error("ordo_txn_begin -> %s\n", ordo_err_name(rc));
  assert_int_equal(rc, 0);
  return t;
}

/* Is key free for X, as another txn of o sees it? */
static bool free_for_other(ordo_t *o, const char *key) {
  ordo_txn_t *t = txn(o);
  int rc = ordo_lock(t, key, strlen(key), ORDO_MODE_X, 0);
  ordo_txn_end(t);
  return rc == 0;
}

static redisReply *cmd(redisContext *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(c, fmt, ap);
  va_end(ap);
  assert_non_null(r);
  return r;
}

/* ---- Without a server ------------------------------------------------------
 */

static void test_urls(void **state) {
  (void)state;
  static const char *const good[] = {
      "redis://127.0.0.1:6379",
      "redis://localhost",
      "redis://h:1/0",
      "redis://h:1/15",
      "redis://[::1]:6379/2",
      "redis://:secret@127.0.0.1:6379",
      "redis://default:p%40ss%2Fw@h:65535/3",
      "redis:///tmp/redis.sock",
      "redis://:pw@/run/re%20dis.sock?db=4",
      "redis://h?lease_ms=1000&timeout_ms=250",
      "redis://h:1?db=2",
      "redis:///s?lease_ms=86400000",
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    ordo_t *o = NULL;
    int rc = ordo_open(&o, good[i], NULL);
    if (rc != 0)
      print_error("%s -> %s\n", good[i], ordo_err_name(rc));
    assert_int_equal(rc, 0);
    ordo_close(o);
  }
  static const char *const bad[] = {
      "redis://",
      "redis://:6379",
      "redis://h:0",
      "redis://h:65536",
      "redis://h:x",
      "redis://h:1/",
      "redis://h:1/x",
      "redis://h:1/2?db=3",
      "redis://h:1?",
      "redis://h:1?lease_ms=9",
      "redis://h:1?timeout_ms=0",
      "redis://h:1?lease_ms=10&",
      "redis://h:1?stripes=16",
      "redis://user@h:1",
      "redis://:p%4@h:1",
      "redis://:p%00@h:1",
      "redis://[::1",
      "redis://h$:1",
      "redis:///",
      "rediss://h:1",
      "redis:/h:1",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ordo_t *o = NULL;
    int rc = ordo_open(&o, bad[i], NULL);
    if (rc != ORDO_EURL)
      print_error("%s -> %s\n", bad[i], ordo_err_name(rc));
    assert_int_equal(rc, ORDO_EURL);
    assert_null(o);
  }
}

static void test_caps_and_unsupported(void **state) {
  (void)state;
  ordo_t *o = NULL;
  assert_int_equal(ordo_open(&o, "redis://user:secret@127.0.0.1:1/2", NULL), 0);
  assert_null(strstr(ordo_url(o), "secret"));
  assert_string_equal(ordo_url(o), "redis://user@127.0.0.1:1/2");
  assert_int_equal(ordo_caps(o), ORDO_CAP_SHARED | ORDO_CAP_FENCE |
                                     ORDO_CAP_INCREMENTAL | ORDO_CAP_REENTRANT |
                                     ORDO_CAP_UPGRADE);
  assert_int_equal(ordo_graph_dump(o, 2, ORDO_GRAPH_DOT), ORDO_ENOTSUP);
  assert_int_equal(ordo_deadlocks(o, NULL, 0), ORDO_ENOTSUP);
  ordo_close(o);
}

/* SHA-1 test vectors of FIPS 180 (one block, two blocks, empty). */
static void test_sha1(void **state) {
  (void)state;
  char h[41];
  ordo__rs_sha1_hex("abc", 3, h);
  assert_string_equal(h, "a9993e364706816aba3e25717850c26c9cd0d89d");
  ordo__rs_sha1_hex("", 0, h);
  assert_string_equal(h, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  ordo__rs_sha1_hex(two, strlen(two), h);
  assert_string_equal(h, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

static void test_names(void **state) {
  (void)state;
  char out[64];
  size_t n = ordo__rs_fence_key("acct:1", 6, out);
  assert_int_equal(n, 19);
  assert_memory_equal(out, "{acct:1}:ordo:fence", n);
  n = ordo__rs_fence_key("{u7}:acct:1", 11, out);
  assert_memory_equal(out, "{u7}:acct:1:ordo:fence", n);
  n = ordo__rs_fence_key("a{}b", 4, out); /* an empty tag is no tag */
  assert_memory_equal(out, "a{}b:ordo:fence", n);
  n = ordo__rs_fence_key("a{b", 3, out);
  assert_memory_equal(out, "{a{b}:ordo:fence", n);
  assert_true(ordo__rs_key_reserved("x:ordo:fence", 12));
  assert_false(ordo__rs_key_reserved("x:ordo:fenc", 11));
  assert_int_equal(ordo__rs_channel_prefix(3, out), 11);
  assert_memory_equal(out, "ordo:rel:3:", 11);
  /* Cluster slots, as CLUSTER KEYSLOT gives them. */
  assert_int_equal(ordo__rs_slot("foo", 3), 12182);
  assert_int_equal(ordo__rs_slot("{user1000}.following", 21),
                   ordo__rs_slot("user1000", 8));
  assert_int_equal(ordo__rs_slot("acct:1", 6),
                   ordo__rs_slot("{acct:1}:ordo:fence", 19));
}

/* ---- One server ------------------------------------------------------------
 */

static void test_script_names(void **state) {
  (void)state;
  NEED_PORT(PORT);
  redisContext *c = it_side(PORT, NULL);
  for (int i = 0; i < ORDO__RS_NSCRIPTS; i++) {
    redisReply *r = cmd(c, "SCRIPT LOAD %s", ordo__rs_script_text(i));
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, ordo__rs_script_sha(i));
    freeReplyObject(r);
  }
  redisFree(c);
}

static void test_layout(void **state) {
  (void)state;
  NEED_PORT(PORT);
  ordo_t *o = open_url("redis://127.0.0.1:%d?lease_ms=1000", PORT);
  ordo_txn_t *t = txn(o);
  assert_int_equal(ordo_lock(t, "lay", 3, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_lock(t, "lay", 3, ORDO_MODE_X, 1000), 0);
  uint64_t tok;
  assert_int_equal(ordo_fence(t, "lay", 3, &tok), 0);
  redisContext *c = it_side(PORT, NULL);
  redisReply *r = cmd(c, "HGETALL lay");
  assert_int_equal(r->type, REDIS_REPLY_ARRAY);
  assert_int_equal(r->elements, 2); /* one owner, whatever its holds */
  assert_int_equal(r->element[0]->len, 32);
  assert_int_equal(r->element[1]->str[0], 'X');
  freeReplyObject(r);
  long long pttl = it_int(c, "PTTL lay");
  assert_true(pttl > 0 && pttl <= 1000);
  r = cmd(c, "GET {lay}:ordo:fence");
  assert_int_equal(r->type, REDIS_REPLY_STRING);
  assert_int_equal(strtoull(r->str, NULL, 10), tok);
  freeReplyObject(r);
  assert_int_equal(it_int(c, "TTL {lay}:ordo:fence"), -1); /* kept */
  assert_int_equal(ordo_unlock(t, "lay", 3), 0);
  assert_int_equal(it_int(c, "EXISTS lay"), 1); /* one hold left */
  assert_int_equal(ordo_unlock(t, "lay", 3), 0);
  assert_int_equal(it_int(c, "EXISTS lay"), 0);
  /* The names of counters are not keys one can lock. */
  assert_int_equal(ordo_lock(t, "x:ordo:fence", 12, ORDO_MODE_X, 0),
                   ORDO_EINVAL);
  redisFree(c);
  ordo_txn_end(t);
  ordo_close(o);
}

static void test_unix_socket_and_db(void **state) {
  (void)state;
  NEED_PORT(PORT);
  redisContext *c = it_side(PORT, NULL);
  const char *urls[2];
  char u1[300], u2[300];
  snprintf(u1, sizeof u1, "redis://%s?db=2&lease_ms=1000", SOCK);
  snprintf(u2, sizeof u2, "redis://127.0.0.1:%d/2?lease_ms=1000", PORT);
  urls[0] = u1;
  urls[1] = u2;
  for (int i = 0; i < 2; i++) {
    ordo_t *o = open_url("%s", urls[i]);
    ordo_txn_t *t = txn(o);
    assert_int_equal(ordo_lock(t, "dbkey", 5, ORDO_MODE_X, 1000), 0);
    assert_int_equal(it_int(c, "EXISTS dbkey"), 0); /* not in db 0 */
    freeReplyObject(cmd(c, "SELECT 2"));
    assert_int_equal(it_int(c, "EXISTS dbkey"), 1);
    freeReplyObject(cmd(c, "SELECT 0"));
    assert_int_equal(ordo_unlock_all(t), 1);
    ordo_txn_end(t);
    ordo_close(o);
  }
  redisFree(c);
}

static void test_watchdog_renews(void **state) {
  (void)state;
  NEED_PORT(PORT);
  ordo_t *o = open_url("redis://127.0.0.1:%d?lease_ms=300", PORT);
  ordo_txn_t *t = txn(o);
  assert_int_equal(ordo_lock(t, "wd", 2, ORDO_MODE_X, 1000), 0);
  tu_sleep_us(1000000); /* over three leases */
  assert_false(free_for_other(o, "wd"));
  redisContext *c = it_side(PORT, NULL);
  assert_true(it_int(c, "PTTL wd") > 0);
  assert_int_equal(ordo_unlock(t, "wd", 2), 0);
  assert_true(free_for_other(o, "wd"));
  /* Released, it is renewed no more: a lock of 1 s is gone 0.5 s later. */
  redisFree(c);
  ordo_txn_end(t);
  ordo_close(o);
}

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
  ordo_txn_t *t;
} lost_box;

static void on_lost(ordo_txn_t *t, void *arg) {
  lost_box *b = arg;
  pthread_mutex_lock(&b->mu);
  b->calls++;
  b->t = t;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

static void test_lease_lost(void **state) {
  (void)state;
  NEED_PORT(PORT);
  ordo_t *o = open_url("redis://127.0.0.1:%d?lease_ms=300", PORT);
  lost_box b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL};
  ordo_on_lease_lost(o, on_lost, &b);
  ordo_txn_t *t = txn(o);
  ordo_req_t r[] = {ORDO_REQ_X("ll1", 3), ORDO_REQ_X("ll2", 3)};
  assert_int_equal(ordo_lock_all(t, r, 2, 1000), 0);
  redisContext *c = it_side(PORT, NULL);
  assert_int_equal(it_int(c, "DEL ll1"), 1); /* as a failover might */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 3;
  pthread_mutex_lock(&b.mu);
  while (b.calls == 0 && pthread_cond_timedwait(&b.cv, &b.mu, &ts) == 0)
    ;
  pthread_mutex_unlock(&b.mu);
  assert_int_equal(b.calls, 1);
  assert_ptr_equal(b.t, t);
  assert_int_equal(ordo_held(t, "ll2", 3, NULL), 0);
  assert_int_equal(it_int(c, "EXISTS ll2"), 0); /* the rest was let go */
  char buf[8192];
  it_dump_text(o, buf, sizeof buf);
  assert_non_null(strstr(buf, "lease lost"));
  assert_non_null(strstr(buf, "ll1"));
  assert_int_equal(ordo_lock_all(t, r, 2, 1000), ORDO_ELEASE); /* once */
  assert_int_equal(ordo_lock_all(t, r, 2, 1000), 0);
  assert_int_equal(ordo_unlock_all(t), 2);
  redisFree(c);
  ordo_txn_end(t);
  ordo_close(o);
}

/* The stale holder as a script run by hand: its lease runs out, another
 * takes the key, and its RELEASE and EXTEND change nothing. */
static void test_stale_holder_script(void **state) {
  (void)state;
  NEED_PORT(PORT);
  const char *stale = "0123456789abcdef0123456789abcdef";
  redisContext *c = it_side(PORT, NULL);
  redisReply *r = cmd(c, "EVAL %s 2 st {st}:ordo:fence %s 200 X",
                      ordo__rs_script_text(ORDO__RS_ACQUIRE), stale);
  assert_int_equal(r->type, REDIS_REPLY_ARRAY);
  assert_int_equal(r->elements, 3);
  assert_int_equal(r->element[0]->integer, 1);
  long long stale_tok = r->element[2]->integer;
  freeReplyObject(r);
  ordo_t *o = open_url("redis://127.0.0.1:%d?lease_ms=1000", PORT);
  ordo_txn_t *t = txn(o);
  /* Held: the next holder waits until the stale lease runs out. */
  uint64_t t0 = tu_now_ns();
  assert_int_equal(ordo_lock(t, "st", 2, ORDO_MODE_X, 2000), 0);
  assert_true(it_ms_since(t0) >= 100);
  uint64_t tok;
  assert_int_equal(ordo_fence(t, "st", 2, &tok), 0);
  assert_true(tok > (uint64_t)stale_tok);
  assert_int_equal(it_int(c, "EVAL %s 1 st %s ordo:rel:0:",
                          ordo__rs_script_text(ORDO__RS_RELEASE), stale),
                   0);
  r = cmd(c, "EVAL %s 1 st %s 5000", ordo__rs_script_text(ORDO__RS_EXTEND),
          stale);
  assert_int_equal(r->type, REDIS_REPLY_ARRAY);
  assert_int_equal(r->elements, 2); /* key 1 is not the stale owner's */
  assert_int_equal(r->element[1]->integer, 1);
  freeReplyObject(r);
  assert_false(free_for_other(o, "st"));
  long long pttl = it_int(c, "PTTL st");
  assert_true(pttl > 0 && pttl <= 1000); /* not stretched to 5 s */
  assert_int_equal(ordo_unlock(t, "st", 2), 0);
  redisFree(c);
  ordo_txn_end(t);
  ordo_close(o);
}

/* The stale holder as a process stopped (SIGSTOP) past its lease: its
 * renewal thread is stopped with it. Another takes the key; once the
 * process runs again its unlock says ORDO_ELEASE and the new holder keeps
 * the key. */
static void test_stale_holder_process(void **state) {
  (void)state;
  NEED_PORT(PORT);
  char url[128];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d?lease_ms=300", PORT);
  ordo_t *o = open_url("%s", url);
  ordo_txn_t *t = txn(o);
  it_stale_holder(url, "sp", t);
  assert_false(free_for_other(o, "sp")); /* still the new holder's */
  assert_int_equal(ordo_held(t, "sp", 2, NULL), 1);
  assert_int_equal(ordo_unlock(t, "sp", 2), 0);
  ordo_txn_end(t);
  ordo_close(o);
}

/* ---- Bad input --------------------------------------------------------------
 */

/* ordo_txn_begin on url fails with want within bound_ms. */
static void begin_fails(const char *url, int want, uint64_t bound_ms,
                        const char *in_dump) {
  ordo_t *o = NULL;
  assert_int_equal(ordo_open(&o, url, NULL), 0);
  ordo_txn_t *t = NULL;
  uint64_t t0 = tu_now_ns();
  int rc = ordo_txn_begin(o, &t, NULL);
  uint64_t ms = it_ms_since(t0);
  print_message("%s: %s after %llu ms\n", url, ordo_err_name(rc),
                (unsigned long long)ms);
  assert_int_equal(rc, want);
  assert_true(ms <= bound_ms);
  char buf[8192];
  it_dump_text(o, buf, sizeof buf);
  if (in_dump && !strstr(buf, in_dump))
    print_error("the dump lacks '%s':\n%s\n", in_dump, buf);
  assert_true(!in_dump || strstr(buf, in_dump));
  ordo_close(o);
}

static void test_unreachable(void **state) {
  (void)state;
  /* TEST-NET-1: no host answers there (or no route: an error at once). */
  begin_fails("redis://192.0.2.1:6379?timeout_ms=300", ORDO_EBACKEND, 1300,
              "last error: connect");
  char url[256];
  snprintf(url, sizeof url, "redis:///nonexistent-%ld/redis.sock",
           (long)getpid());
  begin_fails(url, ORDO_EBACKEND, 1000, "No such file");
}

/* A port where nothing listens, and one where a listener never answers. */
static void test_no_redis_there(void **state) {
  (void)state;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  assert_int_equal(getsockname(s, (struct sockaddr *)&a, &len), 0);
  int port = ntohs(a.sin_port);
  char url[128];
  /* Bound, not listening: refused. */
  snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout_ms=300", port);
  begin_fails(url, ORDO_EBACKEND, 1000, "refused");
  /* Listening, never accepting nor answering: the bound is timeout_ms. */
  assert_int_equal(listen(s, 4), 0);
  begin_fails(url, ORDO_EBACKEND, 1300, "no reply within 300 ms");
  close(s);
}

static void test_password(void **state) {
  (void)state;
  NEED_PORT(AUTH_PORT);
  char url[160];
  snprintf(url, sizeof url, "redis://:wrong@127.0.0.1:%d?timeout_ms=1000",
           AUTH_PORT);
  begin_fails(url, ORDO_EAUTH, 1000, "WRONGPASS");
  snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout_ms=1000", AUTH_PORT);
  begin_fails(url, ORDO_EAUTH, 1000, "NOAUTH");
  static const char *const good[] = {"redis://:s3cret@127.0.0.1:%d",
                                     "redis://default:s3cret@127.0.0.1:%d/1"};
  for (int i = 0; i < 2; i++) {
    ordo_t *o = open_url(good[i], AUTH_PORT);
    ordo_txn_t *t = txn(o);
    assert_int_equal(ordo_lock(t, "pw", 2, ORDO_MODE_X, 1000), 0);
    assert_int_equal(ordo_unlock_all(t), 1);
    ordo_txn_end(t);
    ordo_close(o);
  }
  /* A password to a server that asks none. */
  if (PORT) {
    snprintf(url, sizeof url, "redis://:s3cret@127.0.0.1:%d", PORT);
    begin_fails(url, ORDO_EAUTH, 1000, "AUTH");
  }
}

static void test_bad_db_and_wrongtype(void **state) {
  (void)state;
  NEED_PORT(PORT);
  char url[160];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/99", PORT);
  begin_fails(url, ORDO_EBACKEND, 1000, "SELECT");
  redisContext *c = it_side(PORT, NULL);
  freeReplyObject(cmd(c, "SET strkey hello"));
  freeReplyObject(cmd(c, "HSET {wt}:ordo:fence a b"));
  ordo_t *o = open_url("redis://127.0.0.1:%d?lease_ms=1000", PORT);
  ordo_txn_t *t = txn(o);
  ordo_req_t r[] = {ORDO_REQ_X("okkey", 5), ORDO_REQ_X("strkey", 6)};
  assert_int_equal(ordo_lock_all(t, r, 2, 100), ORDO_EINVAL);
  assert_int_equal(it_int(c, "EXISTS okkey"), 0); /* nothing taken */
  char buf[8192];
  it_dump_text(o, buf, sizeof buf);
  assert_non_null(strstr(buf, "WRONGTYPE"));
  /* A fencing counter that is not a count: refused before any lock key is
   * written. */
  ordo_req_t r2[] = {ORDO_REQ_X("okkey", 5), ORDO_REQ_X("wt", 2)};
  assert_int_equal(ordo_lock_all(t, r2, 2, 100), ORDO_EINVAL);
  assert_int_equal(it_int(c, "EXISTS okkey"), 0);
  assert_int_equal(ordo_lock_all(t, r, 1, 100), 0); /* okkey alone */
  ordo_txn_end(t);
  freeReplyObject(cmd(c, "DEL strkey {wt}:ordo:fence"));
  redisFree(c);
  ordo_close(o);
}

/* A server that stops answering (SIGSTOP): a call returns within
 * timeout_ms, not later. */
static void test_server_stops(void **state) {
  (void)state;
  NEED_PORT(PORT);
  if (REDIS_PID <= 0)
    skip();
  ordo_t *o =
      open_url("redis://127.0.0.1:%d?timeout_ms=300&lease_ms=30000", PORT);
  ordo_txn_t *t = txn(o);
  assert_int_equal(kill(REDIS_PID, SIGSTOP), 0);
  uint64_t t0 = tu_now_ns();
  int rc = ordo_lock(t, "stopped", 7, ORDO_MODE_X, 100);
  uint64_t ms = it_ms_since(t0);
  assert_int_equal(kill(REDIS_PID, SIGCONT), 0);
  print_message("lock on a stopped server: %s after %llu ms\n",
                ordo_err_name(rc), (unsigned long long)ms);
  assert_int_equal(rc, ORDO_EBACKEND);
  assert_true(ms >= 250 && ms <= 1300);
  char buf[8192];
  it_dump_text(o, buf, sizeof buf);
  assert_non_null(strstr(buf, "no reply within"));
  /* The server ran that ACQUIRE when it woke; whatever it granted is
   * released by the txn's next call, not left for the 30 s lease. */
  redisContext *c = it_side(PORT, NULL);
  assert_int_equal(it_int(c, "EXISTS stopped"), 1);
  assert_int_equal(ordo_unlock_all(t), 0);
  assert_int_equal(it_int(c, "EXISTS stopped"), 0);
  redisFree(c);
  ordo_txn_end(t);
  ordo_close(o);
}

/* A write to a peer that has gone is an error, not a SIGPIPE: with the
 * signal's default action (which ends the process) in force, a request
 * sent to a closed socket fails with EPIPE and the process goes on. */
static void test_no_sigpipe(void **state) {
  (void)state;
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  redisContext *c = redisConnectFd(sv[0]);
  assert_non_null(c);
  assert_int_equal(c->err, 0);
  close(sv[1]);
  assert_int_equal(redisAppendCommand(c, "PING"), REDIS_OK);
  void (*old)(int) = signal(SIGPIPE, SIG_DFL);
  int done = 1;
  int rc = ordo__redis_flush(c, &done);
  signal(SIGPIPE, old);
  assert_int_equal(rc, -1);
  assert_int_equal(done, 0);
  assert_int_equal(c->err, REDIS_ERR_IO);
  assert_string_equal(c->errstr, strerror(EPIPE));
  redisFree(c);
}

/* The server closes idle connections (CONFIG SET timeout 1): the next
 * script runs again on a new one, and the next wait subscribes again. */
static void test_idle_connections(void **state) {
  (void)state;
  NEED_PORT(PORT);
  redisContext *c = it_side(PORT, NULL);
  freeReplyObject(cmd(c, "CONFIG SET timeout 1"));
  redisFree(c); /* it would be closed too */
  ordo_t *o = open_url("redis://127.0.0.1:%d?lease_ms=1000", PORT);
  ordo_txn_t *t = txn(o), *h = txn(o);
  assert_int_equal(ordo_lock(h, "idle2", 5, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_lock(t, "idle2", 5, ORDO_MODE_X, 200),
                   ORDO_ETIMEDOUT); /* it subscribed once */
  tu_sleep_us(2600000);             /* the server's idle timeout strikes */
  assert_int_equal(ordo_lock(t, "idle1", 5, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_unlock(t, "idle1", 5), 0);
  tu_sleep_us(2600000);
  assert_int_equal(ordo_lock(t, "idle2", 5, ORDO_MODE_X, 200), ORDO_ETIMEDOUT);
  char buf[8192];
  it_dump_text(o, buf, sizeof buf);
  assert_null(strstr(buf, "last error: Pub/Sub")); /* it subscribed again */
  assert_int_equal(ordo_unlock_all(h), 1);         /* renewed all along */
  c = it_side(PORT, NULL);
  freeReplyObject(cmd(c, "CONFIG SET timeout 0"));
  redisFree(c);
  ordo_txn_end(t);
  ordo_txn_end(h);
  ordo_close(o);
}

/* ---- 20 waiters, one release --------------------------------------------- */

/* Script calls the server has counted (EVALSHA, and EVAL after NOSCRIPT). */
static long long script_calls(redisContext *c) {
  redisReply *r = cmd(c, "INFO commandstats");
  assert_int_equal(r->type, REDIS_REPLY_STRING);
  long long n = 0;
  static const char *const names[] = {"cmdstat_evalsha:calls=",
                                      "cmdstat_eval:calls="};
  for (int i = 0; i < 2; i++) {
    const char *s = strstr(r->str, names[i]);
    if (s)
      n += strtoll(s + strlen(names[i]), NULL, 10);
  }
  freeReplyObject(r);
  return n;
}

#define NWAITERS 20

typedef struct {
  ordo_txn_t *t;
  int rc;
  pthread_t thr;
} waiter;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool measured;
  _Atomic int winners;
  _Atomic int inside;
  _Atomic int violations;
} g_storm = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0, 0, 0};

static void *storm_waiter(void *arg) {
  waiter *w = arg;
  w->rc = ordo_lock(w->t, "storm", 5, ORDO_MODE_X, 20000);
  if (w->rc != 0)
    return NULL;
  if (atomic_fetch_add(&g_storm.inside, 1) != 0)
    atomic_fetch_add(&g_storm.violations, 1);
  if (atomic_fetch_add(&g_storm.winners, 1) == 0) {
    /* The first winner holds until the count is taken. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_mutex_lock(&g_storm.mu);
    while (!g_storm.measured &&
           pthread_cond_timedwait(&g_storm.cv, &g_storm.mu, &ts) == 0)
      ;
    pthread_mutex_unlock(&g_storm.mu);
  }
  atomic_fetch_sub(&g_storm.inside, 1);
  ordo_unlock(w->t, "storm", 5);
  return NULL;
}

static void test_storm(void **state) {
  (void)state;
  NEED_PORT(PORT);
  ordo_t *o = open_url("redis://127.0.0.1:%d?lease_ms=1000", PORT);
  redisContext *c = it_side(PORT, NULL);
  ordo_txn_t *h = txn(o);
  assert_int_equal(ordo_lock(h, "storm", 5, ORDO_MODE_X, 0), 0);
  static waiter w[NWAITERS];
  for (int i = 0; i < NWAITERS; i++)
    w[i].t = txn(o);
  for (int i = 0; i < NWAITERS; i++)
    pthread_create(&w[i].thr, NULL, storm_waiter, &w[i]);
  assert_true(tu_wait_waiting(o, NWAITERS));
  /* Every waiter subscribed; after 1.5 s their fallback polls have backed
   * off to their ceiling. */
  tu_sleep_us(1500000);
  long long b0 = script_calls(c);
  tu_sleep_us(200000);
  long long base = script_calls(c) - b0;
  ordo_stats_t s0, s1;
  ordo_stats(o, &s0);
  long long c0 = script_calls(c);
  assert_int_equal(ordo_unlock_all(h), 1);
  tu_sleep_us(200000);
  long long storm = script_calls(c) - c0;
  ordo_stats(o, &s1);
  print_message("script calls in 200 ms: %lld before the release (fallback "
                "polls and renewals), %lld after it (the release included); "
                "%llu waiters woken by the release\n",
                base, storm, (unsigned long long)(s1.wakeups - s0.wakeups));
  pthread_mutex_lock(&g_storm.mu);
  g_storm.measured = true;
  pthread_cond_broadcast(&g_storm.cv);
  pthread_mutex_unlock(&g_storm.mu);
  for (int i = 0; i < NWAITERS; i++)
    pthread_join(w[i].thr, NULL);
  /* One try per waiter plus a few: far below one per waiter per waiter. */
  assert_true(storm <= 1 + NWAITERS + 15);
  assert_true(s1.wakeups - s0.wakeups >= NWAITERS / 2);
  for (int i = 0; i < NWAITERS; i++) {
    assert_int_equal(w[i].rc, 0);
    ordo_txn_end(w[i].t);
  }
  assert_int_equal(atomic_load(&g_storm.violations), 0);
  assert_int_equal(atomic_load(&g_storm.winners), NWAITERS);
  ordo_txn_end(h);
  redisFree(c);
  ordo_close(o);
}

/* ---- Cluster ----------------------------------------------------------------
 */

static void test_cluster(void **state) {
  (void)state;
  NEED_PORT(CLUSTER_PORT);
  ordo_t *o = open_url("redis://127.0.0.1:%d?lease_ms=300", CLUSTER_PORT);
  lost_box b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL};
  ordo_on_lease_lost(o, on_lost, &b);
  ordo_txn_t *t = txn(o);
  ordo_req_t cross[] = {ORDO_REQ_X("{a}1", 4), ORDO_REQ_X("{b}2", 4)};
  assert_int_equal(ordo_lock_all(t, cross, 2, 100), ORDO_EINVAL);
  char buf[8192];
  it_dump_text(o, buf, sizeof buf);
  assert_non_null(strstr(buf, "CROSSSLOT"));
  ordo_req_t same[] = {ORDO_REQ_X("{u1}:acct:1", 11),
                       ORDO_REQ_X("{u1}:acct:2", 11)};
  assert_int_equal(ordo_lock_all(t, same, 2, 1000), 0);
  /* A key without a tag: its counter wraps it in one, same slot. */
  assert_int_equal(ordo_lock(t, "plain:key", 9, ORDO_MODE_X, 1000), 0);
  /* Held in two slots: renewed (and at last released) one slot at a
   * time. */
  tu_sleep_us(700000);
  assert_int_equal(b.calls, 0);
  assert_false(free_for_other(o, "plain:key"));
  assert_false(free_for_other(o, "{u1}:acct:2"));
  assert_int_equal(ordo_unlock_all(t), 3);
  assert_true(free_for_other(o, "plain:key"));
  ordo_txn_end(t);
  ordo_close(o);
  char url[128];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/1", CLUSTER_PORT);
  begin_fails(url, ORDO_EBACKEND, 1000, "SELECT");
}

static int env_int(const char *name) {
  const char *s = getenv(name);
  return s ? atoi(s) : 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--stale-child") == 0)
    return it_stale_child(argv[2], argv[3]);
  signal(SIGPIPE, SIG_IGN); /* the side connections' writes */
  PORT = env_int("ORDO_REDIS_PORT");
  AUTH_PORT = env_int("ORDO_REDIS_AUTH_PORT");
  CLUSTER_PORT = env_int("ORDO_REDIS_CLUSTER_PORT");
  REDIS_PID = (pid_t)env_int("ORDO_REDIS_PID");
  SOCK = getenv("ORDO_REDIS_SOCK") ? getenv("ORDO_REDIS_SOCK") : "/nonexistent";
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_urls),
      cmocka_unit_test(test_caps_and_unsupported),
      cmocka_unit_test(test_sha1),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_script_names),
      cmocka_unit_test(test_layout),
      cmocka_unit_test(test_unix_socket_and_db),
      cmocka_unit_test(test_watchdog_renews),
      cmocka_unit_test(test_lease_lost),
      cmocka_unit_test(test_stale_holder_script),
      cmocka_unit_test(test_stale_holder_process),
      cmocka_unit_test(test_unreachable),
      cmocka_unit_test(test_no_redis_there),
      cmocka_unit_test(test_password),
      cmocka_unit_test(test_bad_db_and_wrongtype),
      cmocka_unit_test(test_server_stops),
      cmocka_unit_test(test_no_sigpipe),
      cmocka_unit_test(test_idle_connections),
      cmocka_unit_test(test_storm),
      cmocka_unit_test(test_cluster),
  };
  return cmocka_run_group_tests_name("redis://", tests, NULL, NULL);
}
