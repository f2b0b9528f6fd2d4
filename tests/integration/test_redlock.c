/*
 * test_redlock.c -- the redlock:// backend against real redis-server
 * processes that tests/integration/redlock_it.sh starts (redis_fixture.sh):
 * five plain nodes (ORDO_RL_PORTS, ORDO_RL_PIDS, comma-separated) and three
 * with the password "s3cret" (ORDO_RL_AUTH_PORTS). A case whose nodes the
 * wrapper did not start fails, naming the variable: it is never skipped.
 *
 * The cases: malformed URLs; unreachable nodes, ports where no Redis
 * listens and listeners that never answer (a clean ORDO_EQUORUM, never a
 * wait beyond the acquisition timeout, and a majority that decides without
 * the silent node); wrong passwords and users; the URL's node forms run
 * against the nodes (a database, Unix sockets, user:password) and its
 * modes (sequential asks every node key by key, parallel once per node);
 * the tokens a single owner gets, which must increase even when one node
 * forgot its counters and another is stopped; a stale holder (its process
 * stopped past its lease) that can neither unlock nor extend the next
 * holder's lock, on any node; an upgrade from S to X that some nodes
 * granted but no majority did, taken back to S; owner values from
 * getrandom(2) only; an unlock after SCRIPT FLUSH; the per-node timeout
 * with one node stopped (a try returns at once); a black-holed node; 8
 * holders whose leases are lost with two nodes of three stopped, each told
 * within a lease; a node restarted empty (a redis-server of the case's
 * own), left out for a lease; and one node stopped
 * (SIGSTOP) for longer than the lease under six workers, with an owner
 * register that checks every grant and its token: never two holders of a
 * key at once, every token a node's counter, every grant counted by a
 * majority's counters. Every wait is bounded, every bound against a hang
 * grows with ORDO_TEST_TIMEOUT_MULT (tu_ms); the concurrent case has a
 * watchdog that dumps the place. A node this program stops runs again
 * before anything is asserted (and redlock_it.sh lets it run again in any
 * case).
 *
 * Run as "test_redlock --stale-child URL KEY" it is the stale holder's
 * process (test_stale_holder).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "it_redis.h"
#include "../common/lostlease.h"

#include <arpa/inet.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

static int PORT[5], AUTH[3];
static pid_t PID[5];
static int NPORT, NAUTH;

/* The case needs the first n plain nodes (their ports and pids) or the
 * three with a password: it fails, naming the variables, when the wrapper
 * did not export them. */
static void need_plain(int n) {
  if (NPORT < n)
    fail_msg("ORDO_RL_PORTS and ORDO_RL_PIDS name %d nodes ('%s', '%s'), "
             "%d needed: redlock_it.sh starts them and exports both",
             NPORT, getenv("ORDO_RL_PORTS") ? getenv("ORDO_RL_PORTS") : "",
             getenv("ORDO_RL_PIDS") ? getenv("ORDO_RL_PIDS") : "", n);
}

static void need_auth(void) {
  if (NAUTH < 3)
    fail_msg("ORDO_RL_AUTH_PORTS names %d nodes ('%s'), 3 needed: "
             "redlock_it.sh starts them and exports it",
             NAUTH,
             getenv("ORDO_RL_AUTH_PORTS") ? getenv("ORDO_RL_AUTH_PORTS") : "");
}

static int parse_list(const char *env, long *out, int cap) {
  const char *s = getenv(env);
  int n = 0;
  while (s && *s && n < cap) {
    char *end;
    out[n++] = strtol(s, &end, 10);
    s = *end == ',' ? end + 1 : end;
    if (end == s && *s)
      break;
  }
  return n;
}

/* "redlock://127.0.0.1:P1,...,127.0.0.1:Pn" + query, over the first n
 * plain nodes (or the given ports). */
static void url_of(char *buf, size_t cap, const int *ports, int n,
                   const char *userinfo, const char *query) {
  size_t o = (size_t)snprintf(buf, cap, "redlock://");
  for (int i = 0; i < n; i++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%s127.0.0.1:%d", i ? "," : "",
                          userinfo ? userinfo : "", ports[i]);
  snprintf(buf + o, cap - o, "%s", query ? query : "");
}

static ordo_t *open_url(const char *url) {
  ordo_t *o = NULL;
  int rc = ordo_open(&o, url, NULL);
  if (rc != 0)
    print_error("ordo_open(%s) -> %s\n", url, ordo_err_name(rc));
  assert_int_equal(rc, 0);
  return o;
}

static ordo_txn_t *txn(ordo_t *o) {
  ordo_txn_t *t = NULL;
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0);
  return t;
}

/* The fields of the lock hash key on a node: their count, and in *modes
 * the first letter of each value (its mode), up to cap - 1 of them. */
static size_t fields(redisContext *c, const char *key, char *modes,
                     size_t cap) {
  redisReply *r = redisCommand(c, "HGETALL %s", key);
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_ARRAY);
  size_t n = r->elements / 2, m = 0;
  for (size_t i = 0; i < n && m + 1 < cap; i++)
    modes[m++] = r->element[2 * i + 1]->str[0];
  if (cap)
    modes[m] = 0;
  freeReplyObject(r);
  return n;
}

/* ---- URLs ------------------------------------------------------------------
 */

static void test_urls(void **state) {
  (void)state;
  static const char *const bad[] = {
      "redlock://",
      "redlock://127.0.0.1:1,",
      "redlock://,127.0.0.1:1",
      "redlock://127.0.0.1:1,,127.0.0.1:2",
      "redlock://127.0.0.1:99999",
      "redlock://127.0.0.1:x",
      "redlock://127.0.0.1:1?",
      "redlock://127.0.0.1:1?lease_ms=abc",
      "redlock://127.0.0.1:1?lease_ms=5",
      "redlock://127.0.0.1:1?timeout_ms=0",
      "redlock://127.0.0.1:1?mode=fastest",
      "redlock://127.0.0.1:1?bogus=1",
      "redlock://127.0.0.1:1?lease_ms=100&",
      "redlock://127.0.0.1:1,127.0.0.1:1,127.0.0.1:2", /* one node twice */
      "redlock://127.0.0.1:1/0,127.0.0.1:1/1,127.0.0.1:2",
      "redlock://user@127.0.0.1:1",
      "redlock://127.0.0.1:1/x",
      "redlock://bad host:1",
      "redis://127.0.0.1:1,127.0.0.1:2", /* a list is redlock's only */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ordo_t *o = NULL;
    int rc = ordo_open(&o, bad[i], NULL);
    if (rc != ORDO_EURL)
      print_error("%s -> %s, not EURL\n", bad[i], ordo_err_name(rc));
    assert_int_equal(rc, ORDO_EURL);
    assert_null(o);
  }
  /* Sixteen nodes: one more than a place may have. */
  char many[512];
  size_t o = (size_t)snprintf(many, sizeof many, "redlock://");
  for (int i = 0; i < 16; i++)
    o += (size_t)snprintf(many + o, sizeof many - o, "%s127.0.0.1:%d",
                          i ? "," : "", 7000 + i);
  ordo_t *p = NULL;
  assert_int_equal(ordo_open(&p, many, NULL), ORDO_EURL);
  static const char *const good[] = {
      "redlock://127.0.0.1:1",
      ("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?lease_ms=1000&"
       "timeout_ms=500&mode=sequential"),
      "redlock://:pw@127.0.0.1:1,u:pw@[::1]:2/3,/tmp/x.sock?mode=parallel",
  };
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    p = open_url(good[i]); /* opening connects to nothing */
    ordo_close(p);
  }
}

/* ---- Bad input -------------------------------------------------------------
 */

/* A listening socket that never accepts nor answers, and a bound one that
 * does not listen (connections to it are refused). */
static int socket_on_port(bool do_listen, int *port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(s >= 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  assert_int_equal(getsockname(s, (struct sockaddr *)&a, &len), 0);
  if (do_listen)
    assert_int_equal(listen(s, 4), 0);
  *port = ntohs(a.sin_port);
  return s;
}

/* lock_all on url returns want, within bound_ms (scaled by
 * ORDO_TEST_TIMEOUT_MULT: a bound against a hang, not a speed). */
static void lock_fails(const char *url, int want, uint64_t bound_ms,
                       const char *in_dump) {
  ordo_t *o = open_url(url);
  ordo_txn_t *t = txn(o);
  uint64_t t0 = tu_now_ns();
  int rc = ordo_lock(t, "bi", 2, ORDO_MODE_X, 5000);
  uint64_t ms = it_ms_since(t0);
  print_message("%s: %s after %llu ms\n", url, ordo_err_name(rc),
                (unsigned long long)ms);
  assert_int_equal(rc, want);
  assert_true(ms <= tu_ms(bound_ms));
  assert_int_equal(ordo_held(t, "bi", 2, NULL), 0);
  char buf[4096];
  it_dump_text(o, buf, sizeof buf);
  if (in_dump && !strstr(buf, in_dump))
    print_error("the dump lacks '%s':\n%s\n", in_dump, buf);
  assert_true(!in_dump || strstr(buf, in_dump));
  ordo_txn_end(t);
  ordo_close(o);
}

/* Owner values guard release and extend (issue 18, item 1): they come
 * from getrandom(2), and without it (ENOSYS, it_redis.h's getrandom) the
 * txn is refused, never named by a predictable generator. */
static void test_owner_random(void **state) {
  (void)state;
  need_plain(3);
  char url[512];
  url_of(url, sizeof url, PORT, 3, NULL, NULL);
  ordo_t *o = open_url(url);
  it_owner_random(o);
  ordo_close(o);
}

static void test_unreachable(void **state) {
  (void)state;
  need_plain(2);
  int refused, silent;
  int s1 = socket_on_port(false, &refused);
  int s2 = socket_on_port(true, &silent);
  char url[512];
  /* No node at all: TEST-NET-1 (no answer, or no route), nothing
   * listening, a listener that never answers. The acquisition timeout
   * (400 ms) bounds it, plus one exchange (node_timeout_ms, 50 ms by
   * default for this lease). */
  snprintf(url, sizeof url,
           "redlock://192.0.2.1:6379,127.0.0.1:%d,127.0.0.1:%d"
           "?lease_ms=600&timeout_ms=400",
           refused, silent);
  lock_fails(url, ORDO_EQUORUM, 400 + 200 + 300, "no majority");
  /* One good node of three is not a majority either. */
  snprintf(url, sizeof url,
           "redlock://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d"
           "?lease_ms=600&timeout_ms=400",
           PORT[0], refused, silent);
  lock_fails(url, ORDO_EQUORUM, 400 + 200 + 300, NULL);
  /* Two of three are: granted as soon as they answer, the silent node not
   * waited for. With node_timeout_ms=2000 an exchange's bound is 2 s, and
   * the silent node would hold the try that long: the call must return
   * before that event. This is no speed: two local nodes answer in
   * milliseconds, and the 2 s is the URL's, the same on any machine. */
  snprintf(url, sizeof url,
           "redlock://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d"
           "?lease_ms=6000&timeout_ms=400&node_timeout_ms=2000",
           PORT[0], PORT[1], silent);
  ordo_t *o = open_url(url);
  ordo_txn_t *t = txn(o);
  uint64_t t0 = tu_now_ns();
  assert_int_equal(ordo_lock(t, "bi2", 3, ORDO_MODE_X, (long)tu_ms(2000)), 0);
  uint64_t ms = it_ms_since(t0);
  print_message("granted by two of three, the third silent: %llu ms\n",
                (unsigned long long)ms);
  assert_true(ms < 2000); /* before the silent node's exchange ran out */
  assert_int_equal(ordo_unlock_all(t), 1);
  ordo_txn_end(t);
  ordo_close(o);
  close(s1);
  close(s2);
}

static void test_password(void **state) {
  (void)state;
  need_auth();
  char url[512];
  url_of(url, sizeof url, AUTH, 3, ":wrong@", "?timeout_ms=500");
  lock_fails(url, ORDO_EAUTH, 500 + 500, "WRONGPASS");
  url_of(url, sizeof url, AUTH, 3, NULL, "?timeout_ms=500");
  lock_fails(url, ORDO_EAUTH, 500 + 500, "NOAUTH");
  /* The user goes to AUTH too: the right password for a user the nodes
   * do not know is refused, the same for their "default" user is taken,
   * as is the password alone. */
  url_of(url, sizeof url, AUTH, 3, "nobody:s3cret@", "?timeout_ms=500");
  lock_fails(url, ORDO_EAUTH, 500 + 500, "WRONGPASS");
  static const char *const users[] = {":s3cret@", "default:s3cret@"};
  ordo_t *o;
  ordo_txn_t *t;
  for (int u = 0; u < 2; u++) {
    url_of(url, sizeof url, AUTH, 3, users[u], "?timeout_ms=500");
    o = open_url(url);
    t = txn(o);
    assert_int_equal(ordo_lock(t, "pw", 2, ORDO_MODE_X, 1000), 0);
    /* Taken on the nodes themselves (a majority at least; the third may
     * answer later). */
    int have = 0;
    for (int i = 0; i < 3; i++) {
      redisContext *c = it_side(AUTH[i], "s3cret");
      char modes[8];
      have += fields(c, "pw", modes, sizeof modes) == 1;
      redisFree(c);
    }
    assert_true(have >= 2);
    assert_int_equal(ordo_unlock_all(t), 1);
    ordo_txn_end(t);
    ordo_close(o);
  }
  /* One node of three with the wrong password: the other two grant, and
   * the dump names the refusal. */
  snprintf(url, sizeof url,
           "redlock://:s3cret@127.0.0.1:%d,:s3cret@127.0.0.1:%d,"
           ":wrong@127.0.0.1:%d?timeout_ms=500",
           AUTH[0], AUTH[1], AUTH[2]);
  o = open_url(url);
  t = txn(o);
  /* The majority may decide before the refusal arrives; a later exchange
   * reads it. Bounded: 50 rounds. */
  char buf[4096] = "";
  for (int i = 0; i < 50 && !strstr(buf, "WRONGPASS"); i++) {
    assert_int_equal(ordo_lock(t, "pw", 2, ORDO_MODE_X, 1000), 0);
    assert_int_equal(ordo_unlock_all(t), 1);
    it_dump_text(o, buf, sizeof buf);
  }
  assert_non_null(strstr(buf, "WRONGPASS"));
  ordo_txn_end(t);
  ordo_close(o);
}

/* ---- A stale holder --------------------------------------------------------
 */

/* A holder on three nodes is stopped (SIGSTOP) past its 300 ms lease, its
 * renewal thread with it. Another takes the key; once the stale process
 * runs again, its renewal finds the keys gone and its unlock says
 * ORDO_ELEASE; on every node the key is the new holder's alone, and its
 * expiry was not stretched by the stale renewal. */
static void test_stale_holder(void **state) {
  (void)state;
  need_plain(3);
  char url[512];
  url_of(url, sizeof url, PORT, 3, NULL, "?lease_ms=300&timeout_ms=3000");
  ordo_t *o = open_url(url);
  ordo_txn_t *t = txn(o);
  it_stale_holder(url, "sh", t);
  assert_int_equal(ordo_held(t, "sh", 2, NULL), 1);
  /* On every node the key is t's alone or absent (a node where the stale
   * lease was renewed last may have refused t, which a majority did not),
   * and its expiry is t's lease, not stretched by the stale renewal. */
  int have = 0;
  for (int i = 0; i < 3; i++) {
    redisContext *c = it_side(PORT[i], NULL);
    char modes[8];
    size_t nf = fields(c, "sh", modes, sizeof modes);
    assert_true(nf <= 1);
    if (nf == 1) {
      have++;
      assert_string_equal(modes, "X");
      long long ms = it_int(c, "PTTL sh");
      assert_true(ms > 0 && ms <= 300);
    }
    redisFree(c);
  }
  assert_true(have >= 2);
  /* Still ours: another owner is refused. */
  ordo_txn_t *u = txn(o);
  assert_int_equal(ordo_lock(u, "sh", 2, ORDO_MODE_X, 0), ORDO_ETIMEDOUT);
  ordo_txn_end(u);
  assert_int_equal(ordo_unlock(t, "sh", 2), 0);
  ordo_txn_end(t);
  ordo_close(o);
}

/* ---- An upgrade no majority granted ----------------------------------------
 */

/* t holds "up" in S on three nodes; another owner holds it in S on nodes
 * 2 and 3 only (put there by the script, as a partial grant of someone
 * else's). t asks for X: node 1 grants the upgrade, nodes 2 and 3 refuse,
 * so the call times out, and node 1 must be back to S for t (a reader
 * there is not shut out), while t keeps its S hold. */
static void test_partial_upgrade(void **state) {
  (void)state;
  need_plain(3);
  char url[512];
  url_of(url, sizeof url, PORT, 3, NULL, "?lease_ms=1000&timeout_ms=300");
  ordo_t *o = open_url(url);
  ordo_txn_t *t = txn(o);
  assert_int_equal(ordo_lock(t, "up", 2, ORDO_MODE_S, 1000), 0);
  /* The other owner's S on nodes 2 and 3 (through the backend too: a
   * second place over those two nodes alone). */
  char url2[256];
  url_of(url2, sizeof url2, PORT + 1, 2, NULL, "?lease_ms=5000");
  ordo_t *o2 = open_url(url2);
  ordo_txn_t *r2 = txn(o2);
  assert_int_equal(ordo_lock(r2, "up", 2, ORDO_MODE_S, 1000), 0);
  assert_int_equal(ordo_lock(t, "up", 2, ORDO_MODE_X, 300), ORDO_ETIMEDOUT);
  ordo_mode_t m;
  assert_int_equal(ordo_held(t, "up", 2, &m), 1);
  assert_int_equal(m, ORDO_MODE_S);
  redisContext *c = it_side(PORT[0], NULL);
  char modes[8];
  assert_int_equal(fields(c, "up", modes, sizeof modes), 1);
  assert_string_equal(modes, "S"); /* not left in X */
  redisFree(c);
  /* A reader gets all three nodes. */
  ordo_txn_t *r3 = txn(o);
  assert_int_equal(ordo_lock(r3, "up", 2, ORDO_MODE_S, 500), 0);
  for (int i = 0; i < 3; i++) {
    c = it_side(PORT[i], NULL);
    size_t want = i == 0 ? 2 : 3;
    assert_int_equal(fields(c, "up", modes, sizeof modes), want);
    assert_null(strchr(modes, 'X'));
    redisFree(c);
  }
  ordo_txn_end(r3);
  ordo_txn_end(r2);
  ordo_close(o2);
  assert_int_equal(ordo_unlock_all(t), 1);
  ordo_txn_end(t);
  ordo_close(o);
}

/* ---- The URL's node forms and modes, run -----------------------------------
 */

/* Script calls node c has counted since its last CONFIG RESETSTAT
 * (EVALSHA, and EVAL after a NOSCRIPT). */
static long long node_scripts(redisContext *c) {
  redisReply *r = redisCommand(c, "INFO commandstats");
  assert_non_null(r);
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

static void ok_reply(redisContext *c, const char *cmd) {
  redisReply *r = redisCommand(c, cmd);
  assert_non_null(r);
  if (r->type == REDIS_REPLY_ERROR)
    print_error("%s: %s\n", cmd, r->str);
  assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
  freeReplyObject(r);
}

/* Waits (bounded) until node port shows `want` of keys[0..n) in database
 * db: a node that did not decide a call runs its script a little later
 * (before the next command of that txn on it). */
static bool await_keys(int port, int db, const char *const *keys, int n,
                       int want) {
  redisContext *c = it_side(port, NULL);
  char sel[16];
  snprintf(sel, sizeof sel, "SELECT %d", db);
  ok_reply(c, sel);
  uint64_t end = tu_now_ns() + tu_ms(3000) * 1000000u;
  int have;
  for (;;) {
    have = 0;
    for (int i = 0; i < n; i++)
      have += (int)it_int(c, "EXISTS %s", keys[i]);
    if (have == want || tu_now_ns() >= end)
      break;
    tu_sleep_us(5000);
  }
  redisFree(c);
  if (have != want)
    print_error("node %d, db %d: %d of the keys, not %d\n", port, db, have,
                want);
  return have == want;
}

/*
 * The per-node timeout (issue 18, item 11): with one node of three stopped
 * (SIGSTOP), a try (timeout 0) of a key someone holds returns at once, and
 * a lock with a 1 s timeout returns at its timeout plus at most one small
 * exchange. The lease is 6 s: the exchange's bound was a third of it, 2 s,
 * and the undo of each failed try waited that long for confirmations that
 * never came (nodes that never granted answer 0, the stopped one nothing):
 * the try took 2 s and the lock 3 s. The default per-node timeout is a
 * two-hundredth of the lease within [50 ms, 250 ms]; node_timeout_ms sets
 * it. Nothing is asserted while the node is stopped. The bounds are
 * against hangs (scaled), far above what the fix takes (milliseconds).
 */
static void test_node_timeout(void **state) {
  (void)state;
  need_plain(3);
  char url[512];
  url_of(url, sizeof url, PORT, 3, NULL, "?lease_ms=6000");
  ordo_t *o = open_url(url);
  ordo_txn_t *a = txn(o), *b = txn(o);
  assert_int_equal(ordo_lock(a, "n11", 3, ORDO_MODE_X, (long)tu_ms(2000)), 0);
  /* b's connections are open before the node stops. */
  assert_int_equal(ordo_lock(b, "n11:b", 5, ORDO_MODE_X, (long)tu_ms(2000)), 0);
  assert_int_equal(kill(PID[2], SIGSTOP), 0);
  uint64_t t0 = tu_now_ns();
  int try_rc = ordo_lock(b, "n11", 3, ORDO_MODE_X, 0);
  uint64_t try_ms = it_ms_since(t0);
  t0 = tu_now_ns();
  int lock_rc = ordo_lock(b, "n11", 3, ORDO_MODE_X, 1000);
  uint64_t lock_ms = it_ms_since(t0);
  t0 = tu_now_ns();
  int unlock_rc = ordo_unlock_all(a);
  uint64_t unlock_ms = it_ms_since(t0);
  int cont_rc = kill(PID[2], SIGCONT);
  print_message("one node of three stopped: try %s in %llu ms, lock (1 s) %s "
                "in %llu ms, unlock_all %d in %llu ms\n",
                ordo_err_name(try_rc), (unsigned long long)try_ms,
                ordo_err_name(lock_rc), (unsigned long long)lock_ms, unlock_rc,
                (unsigned long long)unlock_ms);
  assert_int_equal(cont_rc, 0);
  assert_int_equal(try_rc, ORDO_ETIMEDOUT);
  assert_true(try_ms < tu_ms(500));
  assert_int_equal(lock_rc, ORDO_ETIMEDOUT);
  assert_true(lock_ms >= 1000);
  assert_true(lock_ms < 1000 + tu_ms(500));
  assert_int_equal(unlock_rc, 1);
  assert_true(unlock_ms < tu_ms(500));
  assert_int_equal(ordo_unlock_all(b), 1);
  ordo_txn_end(a);
  ordo_txn_end(b);
  ordo_close(o);
  /* The option: a number of milliseconds, at least 1. */
  url_of(url, sizeof url, PORT, 3, NULL, "?lease_ms=6000&node_timeout_ms=30");
  o = open_url(url);
  ordo_close(o);
  url_of(url, sizeof url, PORT, 3, NULL, "?node_timeout_ms=0");
  assert_int_equal(ordo_open(&o, url, NULL), ORDO_EURL);
}

/*
 * A black-holed node (issue 18, item 16): the proxy (it_redis.h) accepts
 * its connections and never reads or writes. Two real nodes decide every
 * call, and the silent one's connection owed a reply for every exchange,
 * for ever: it was never closed, and hiredis's output buffer grew with
 * each request. Now a connection that owes more than a few replies is
 * closed and opened again at the next exchange: over 30 lock/unlock
 * rounds the proxy sees more than one connection, and every round still
 * succeeds. About 0.1 s.
 */
static void test_black_hole(void **state) {
  (void)state;
  need_plain(2);
  static it_proxy px;
  it_proxy_start(&px, PORT[0]);
  atomic_store(&px.mode, IT_BLACKHOLE);
  int ports[3] = {PORT[0], PORT[1], px.port};
  char url[512];
  url_of(url, sizeof url, ports, 3, NULL, "?lease_ms=2000");
  ordo_t *o = open_url(url);
  ordo_txn_t *t = txn(o);
  int bad = 0, last = 0;
  for (int i = 0; i < 30; i++) {
    int rc = ordo_lock(t, "bh:1", 4, ORDO_MODE_X, (long)tu_ms(1000));
    int un = rc == 0 ? ordo_unlock_all(t) : rc;
    if (rc != 0 || un != 1) {
      bad++;
      last = rc != 0 ? rc : un;
    }
  }
  char dump[4096];
  it_dump_text(o, dump, sizeof dump);
  ordo_txn_end(t);
  ordo_close(o);
  unsigned conns = atomic_load(&px.accepted);
  it_proxy_stop(&px);
  print_message("30 rounds beside a black-holed node: %d failed (last %s), "
                "%u connections to it\n",
                bad, ordo_err_name(last), conns);
  assert_int_equal(bad, 0);
  assert_true(conns >= 2);
  assert_non_null(strstr(dump, "no reply to the last exchanges"));
}

/*
 * A lost lease is reported in time however many txns hold (issue 18, item
 * 13): 8 holders of a 600 ms lease on 3 nodes, two of them stopped
 * (SIGSTOP), so no majority confirms any renewal. Renewed one after
 * another, each renewal waited for the stopped nodes, and the later
 * holders heard late; now they are renewed at once and every lease is lost
 * at its end, without waiting for the nodes any longer: every callback
 * comes within one lease of the stop (each holder's last renewal was
 * before it). The bound allows the scheduler 300 ms (scaled): one after
 * another, the second holder heard 1.2 s after the stop. Nothing is
 * asserted while the nodes are stopped; about 0.6 s.
 */
static void test_lost_in_time(void **state) {
  (void)state;
  need_plain(3);
  const long lease_ms = 600;
  char url[512], q[64];
  snprintf(q, sizeof q, "?lease_ms=%ld", lease_ms);
  url_of(url, sizeof url, PORT, 3, NULL, q);
  ordo_t *o = open_url(url);
  tu_lost_in_time(o, "rll", lease_ms, PID, 2);
  ordo_close(o);
}

/* A redis-server of this case's own on port, in dir, without persistence
 * (as the fixture's), killed with the test if the test dies
 * (PR_SET_PDEATHSIG). Waits (bounded) until it answers PING; returns its
 * pid, or -1 with why printed. */
static pid_t own_node(int port, const char *dir) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char ps[16], logf[300];
    snprintf(ps, sizeof ps, "%d", port);
    snprintf(logf, sizeof logf, "%s/log", dir);
    FILE *f = freopen(logf, "a", stdout);
    (void)f;
    dup2(1, 2);
    execlp("redis-server", "redis-server", "--port", ps, "--save", "",
           "--appendonly", "no", "--dir", dir, "--bind", "127.0.0.1",
           "--daemonize", "no", (char *)NULL);
    _exit(127);
  }
  uint64_t end = tu_now_ns() + tu_ms(10000) * 1000000u;
  while (tu_now_ns() < end) {
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && !c->err) {
      redisReply *r = redisCommand(c, "PING");
      bool up = r && r->type == REDIS_REPLY_STATUS;
      if (r)
        freeReplyObject(r);
      redisFree(c);
      if (up)
        return pid;
    } else if (c) {
      redisFree(c);
    }
    if (waitpid(pid, NULL, WNOHANG) == pid) {
      print_error("redis-server on port %d exited at start (log in %s)\n", port,
                  dir);
      return -1;
    }
    tu_sleep_us(20000);
  }
  print_error("redis-server on port %d did not answer PING\n", port);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return -1;
}

/*
 * A node restarted empty (issue 18, item 16): w holds "rst" on nodes B and
 * C (A lost its entry, as a node that never heard of the grant), then C is
 * killed and started again, empty, on the same port. Counting C's vote at
 * once, z got A and C, a majority, while w still held the key. C's run_id
 * changed: it is left out of every decision for one lease, so z's try
 * fails; after that lease (w's lock lapsed everywhere) it is counted
 * again. C is this case's own redis-server, so that it can restart it.
 * About 1.3 s.
 */
static void test_node_restarted(void **state) {
  (void)state;
  need_plain(2);
  char dir[] = "/tmp/ordo-rl-XXXXXX";
  assert_non_null(mkdtemp(dir));
  int s0 = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  assert_int_equal(bind(s0, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(getsockname(s0, (struct sockaddr *)&a, &alen), 0);
  int cport = ntohs(a.sin_port);
  close(s0);
  pid_t c = own_node(cport, dir);
  assert_true(c > 0);
  int ports[3] = {PORT[0], PORT[1], cport};
  char url[512];
  url_of(url, sizeof url, ports, 3, NULL, "?lease_ms=1000");
  ordo_t *o = open_url(url);
  ordo_txn_t *w = txn(o), *z = txn(o);
  /* The place must have seen C's run_id before the restart (a node's
   * INFO may come after the call it went with was decided, and is read
   * by the next exchange): w locks and unlocks another key until the dump
   * names it, bounded (that it did is asserted at the end: the parent
   * commit names none, and its failure is the double grant below). */
  char dump[4096], cname[64];
  snprintf(cname, sizeof cname, "node 127.0.0.1:%d: run_id ", cport);
  uint64_t end = tu_now_ns() + tu_ms(2000) * 1000000u;
  bool seen = false;
  while (!seen && tu_now_ns() < end) {
    assert_int_equal(ordo_lock(w, "rst:w", 5, ORDO_MODE_X, (long)tu_ms(2000)),
                     0);
    assert_int_equal(ordo_unlock_all(w), 1);
    it_dump_text(o, dump, sizeof dump);
    const char *at = strstr(dump, cname);
    seen = at && at[strlen(cname)] != '(';
    if (!seen)
      tu_sleep_us(5000);
  }
  int w_rc = ordo_lock(w, "rst", 3, ORDO_MODE_X, (long)tu_ms(2000));
  redisContext *ca = it_side(PORT[0], NULL);
  long long del = it_int(ca, "DEL rst"); /* A never heard of it */
  redisFree(ca);
  kill(c, SIGKILL);
  waitpid(c, NULL, 0);
  pid_t c2 = own_node(cport, dir); /* the same port, empty */
  int z_rc = c2 > 0 ? ordo_lock(z, "rst", 3, ORDO_MODE_X, 0) : 1;
  it_dump_text(o, dump, sizeof dump);
  int w_un = ordo_unlock_all(w);
  /* A lease later C counts again: z takes the key (w let it go). */
  int z_later =
      c2 > 0 ? ordo_lock(z, "rst", 3, ORDO_MODE_X, (long)tu_ms(3000)) : 1;
  ordo_txn_end(w);
  ordo_txn_end(z);
  ordo_close(o);
  if (c2 > 0) {
    kill(c2, SIGKILL);
    waitpid(c2, NULL, 0);
  }
  char logf[300];
  snprintf(logf, sizeof logf, "%s/log", dir);
  unlink(logf);
  rmdir(dir);
  print_message("after node C restarted empty: z's try %s, w's unlock %d, "
                "z a lease later %s\n",
                z_rc == 1 ? "not run" : ordo_err_name(z_rc), w_un,
                z_later == 1 ? "not run" : ordo_err_name(z_later));
  assert_int_equal(w_rc, 0);
  assert_int_equal(del, 1);
  assert_true(c2 > 0);
  assert_int_equal(z_rc, ORDO_ETIMEDOUT); /* never two holders */
  assert_true(seen);
  assert_non_null(strstr(dump, "restarted: left out of decisions"));
  assert_int_equal(z_later, 0);
}

/* SCRIPT FLUSH on the first n nodes: the scripts are gone from their
 * caches, as after a restart or a failover. */
static void flush_scripts(int n) {
  for (int i = 0; i < n; i++) {
    redisContext *c = it_side(PORT[i], NULL);
    ok_reply(c, "SCRIPT FLUSH");
    redisFree(c);
  }
}

/*
 * An unlock after SCRIPT FLUSH (issue 18, item 12) must release: every node
 * answers NOSCRIPT to the EVALSHA, and the release must then send the
 * script's text (EVAL). Counted as "did not answer", the NOSCRIPTs let the
 * unlock succeed inside the validity while the keys stayed locked on every
 * node for the whole lease (30 s here: far past the 3 s await_keys waits).
 * A lock after the flush is granted too, and so is an unlock_all.
 */
static void test_script_flush(void **state) {
  (void)state;
  need_plain(3);
  char url[512];
  url_of(url, sizeof url, PORT, 3, NULL, NULL);
  ordo_t *o = open_url(url);
  ordo_txn_t *t = txn(o);
  const char *k1[1] = {"nsf:1"}, *k2[1] = {"nsf:2"};
  assert_int_equal(ordo_lock(t, "nsf:1", 5, ORDO_MODE_X, (long)tu_ms(2000)), 0);
  flush_scripts(3);
  assert_int_equal(ordo_unlock(t, "nsf:1", 5), 0);
  for (int i = 0; i < 3; i++)
    assert_true(await_keys(PORT[i], 0, k1, 1, 0));
  flush_scripts(3);
  assert_int_equal(ordo_lock(t, "nsf:2", 5, ORDO_MODE_X, (long)tu_ms(2000)), 0);
  for (int i = 0; i < 3; i++)
    assert_true(await_keys(PORT[i], 0, k2, 1, 1));
  flush_scripts(3);
  assert_int_equal(ordo_unlock_all(t), 1);
  for (int i = 0; i < 3; i++)
    assert_true(await_keys(PORT[i], 0, k2, 1, 0));
  ordo_txn_end(t);
  ordo_close(o);
}

/* A database on every node ("/3"): the keys go there, never to db 0, and
 * the release takes them from there. */
static void test_url_db(void **state) {
  (void)state;
  need_plain(3);
  char url[512];
  snprintf(url, sizeof url,
           "redlock://127.0.0.1:%d/3,127.0.0.1:%d/3,127.0.0.1:%d/3"
           "?lease_ms=600000",
           PORT[0], PORT[1], PORT[2]);
  ordo_t *o = open_url(url);
  ordo_txn_t *t = txn(o);
  static const char *const keys[] = {"db:a", "db:b"};
  ordo_req_t r[] = {ORDO_REQ_X("db:a", 4), ORDO_REQ_S("db:b", 4)};
  assert_int_equal(ordo_lock_all(t, r, 2, 1000), 0);
  for (int i = 0; i < 3; i++) {
    assert_true(await_keys(PORT[i], 3, keys, 2, 2));
    assert_true(await_keys(PORT[i], 0, keys, 2, 0));
  }
  assert_int_equal(ordo_unlock_all(t), 2);
  for (int i = 0; i < 3; i++)
    assert_true(await_keys(PORT[i], 3, keys, 2, 0));
  ordo_txn_end(t);
  ordo_close(o);
}

/* Unix-socket nodes (each fixture server listens on one too: CONFIG GET
 * unixsocket names it), two of them beside one TCP node. The key goes to
 * the socket nodes, and is held against a place that reaches the same
 * three nodes by TCP. */
static void test_url_unix_sockets(void **state) {
  (void)state;
  need_plain(3);
  char path[2][256];
  for (int i = 0; i < 2; i++) {
    redisContext *c = it_side(PORT[i], NULL);
    redisReply *r = redisCommand(c, "CONFIG GET unixsocket");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 2);
    assert_true(r->element[1]->len > 0);
    snprintf(path[i], sizeof path[i], "%s", r->element[1]->str);
    freeReplyObject(r);
    redisFree(c);
  }
  char url[768], tcp[512];
  snprintf(url, sizeof url, "redlock://%s,%s,127.0.0.1:%d?lease_ms=600000",
           path[0], path[1], PORT[2]);
  url_of(tcp, sizeof tcp, PORT, 3, NULL, "?lease_ms=600000");
  ordo_t *o = open_url(url), *o2 = open_url(tcp);
  ordo_txn_t *t = txn(o), *u = txn(o2);
  static const char *const keys[] = {"sock"};
  assert_int_equal(ordo_lock(t, "sock", 4, ORDO_MODE_X, 1000), 0);
  for (int i = 0; i < 3; i++)
    assert_true(await_keys(PORT[i], 0, keys, 1, 1));
  assert_int_equal(ordo_lock(u, "sock", 4, ORDO_MODE_X, 0), ORDO_ETIMEDOUT);
  assert_int_equal(ordo_unlock_all(t), 1);
  assert_int_equal(ordo_lock(u, "sock", 4, ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_unlock_all(u), 1);
  ordo_txn_end(t);
  ordo_txn_end(u);
  ordo_close(o);
  ordo_close(o2);
}

/* Waits (bounded) until node c has counted want script calls since its
 * last CONFIG RESETSTAT (a late node runs its scripts a little later);
 * returns the count then. */
static long long await_scripts(redisContext *c, long long want) {
  uint64_t end = tu_now_ns() + tu_ms(3000) * 1000000u;
  long long n;
  while ((n = node_scripts(c)) < want && tu_now_ns() < end)
    tu_sleep_us(5000);
  return n;
}

/* mode=sequential takes key by key, node by node: a lock_all of three keys
 * is three script calls on every node, and its tokens are the greatest of
 * every node's (each is asked). mode=parallel (the default) sends one
 * script to each node for the lot. Either way the grant's tokens are then
 * written back to every node (FENCEMAX: one more script call). The lease
 * is 10 min: no renewal (a script call too) comes in between. */
static void test_url_modes(void **state) {
  (void)state;
  need_plain(3);
  static const char *const modes[] = {"sequential", "parallel"};
  static const long long per_lock[] = {3 + 1, 1 + 1};
  for (int m = 0; m < 2; m++) {
    char q[64], url[512], keys[3][8];
    snprintf(q, sizeof q, "?lease_ms=600000&mode=%s", modes[m]);
    url_of(url, sizeof url, PORT, 3, NULL, q);
    ordo_t *o = open_url(url);
    ordo_txn_t *t = txn(o);
    ordo_req_t r[3];
    for (int k = 0; k < 3; k++) {
      snprintf(keys[k], sizeof keys[k], "m%d:%c", m, 'a' + k);
      r[k] = (ordo_req_t)ORDO_REQ_X(keys[k], 4);
    }
    redisContext *c[3];
    for (int i = 0; i < 3; i++) {
      c[i] = it_side(PORT[i], NULL);
      ok_reply(c[i], "CONFIG RESETSTAT");
    }
    /* First connected, the scripts loaded, and that lock and unlock run
     * on every node (the ACQUIREs, the FENCEMAX, then one RELEASE, and one
     * EVAL more where a NOSCRIPT came: the sequential mode does not load
     * the scripts first); then counted from nought. */
    assert_int_equal(ordo_lock_all(t, r, 3, 1000), 0);
    assert_int_equal(ordo_unlock_all(t), 3);
    for (int i = 0; i < 3; i++) {
      assert_true(await_scripts(c[i], per_lock[m] + 1) >= per_lock[m] + 1);
      ok_reply(c[i], "CONFIG RESETSTAT");
    }
    /* Node 3 says a key's counter is far ahead (as after grants the
     * others missed). */
    char fk[40];
    snprintf(fk, sizeof fk, "SET {%s}:ordo:fence 1000", keys[2]);
    ok_reply(c[2], fk);
    assert_int_equal(ordo_lock_all(t, r, 3, 1000), 0);
    uint64_t tok = 0;
    assert_int_equal(ordo_fence(t, keys[2], 4, &tok), 0);
    for (int i = 0; i < 3; i++) {
      long long n = await_scripts(c[i], per_lock[m]);
      print_message("mode=%s: node %d ran %lld script calls for a lock_all "
                    "of 3 keys\n",
                    modes[m], i + 1, n);
      assert_int_equal(n, per_lock[m]);
    }
    if (m == 0)
      assert_int_equal(tok, 1001); /* node 3's, the greatest */
    char buf[4096];
    it_dump_text(o, buf, sizeof buf);
    assert_true((strstr(buf, "sequential (bench only)") != NULL) == (m == 0));
    assert_int_equal(ordo_unlock_all(t), 3);
    for (int i = 0; i < 3; i++)
      redisFree(c[i]);
    ordo_txn_end(t);
    ordo_close(o);
  }
}

/* ---- The tokens of a single owner ------------------------------------------
 */

/*
 * What the tokens promise (docs/backend-redlock.md, "Fencing tokens"): a
 * grant reports the greatest counter among the nodes that granted it. With
 * one owner every node grants every request (in order, on its connection),
 * so the counters move together, except on a node that missed grants or
 * forgot them; any majority then still includes a node that saw every
 * grant while no more than a minority lags, and the tokens increase. Here
 * node 1 forgets its counter (as a restart without its data would) and
 * node 3 is stopped (SIGSTOP), so that each grant is decided by nodes 1
 * and 2 alone: its token must be node 2's, greater than the last, never
 * node 1's restarted count. Then node 3 runs again and catches up.
 */
#define TK_ROUNDS 5
static void test_tokens_one_owner(void **state) {
  (void)state;
  need_plain(3);
  char url[512];
  url_of(url, sizeof url, PORT, 3, NULL, "?lease_ms=600000&timeout_ms=3000");
  ordo_t *o = open_url(url);
  ordo_txn_t *t = txn(o);
  uint64_t tok[3 * TK_ROUNDS] = {0};
  int rc[3 * TK_ROUNDS];
  int n = 0;
  for (int i = 0; i < TK_ROUNDS; i++, n++) {
    rc[n] = ordo_lock(t, "tk", 2, ORDO_MODE_X, 1000);
    if (rc[n] == 0 && ordo_fence(t, "tk", 2, &tok[n]) == 0)
      rc[n] = ordo_unlock(t, "tk", 2);
  }
  redisContext *c1 = it_side(PORT[0], NULL);
  /* Node 1 forgets; node 3's last RELEASE may still be on its way, and
   * is let arrive before the stop. */
  assert_int_equal(it_int(c1, "DEL {tk}:ordo:fence"), 1);
  redisFree(c1);
  redisContext *c3 = it_side(PORT[2], NULL);
  uint64_t end = tu_now_ns() + tu_ms(3000) * 1000000u;
  while (it_int(c3, "EXISTS tk") != 0) {
    assert_true(tu_now_ns() < end);
    tu_sleep_us(10000);
  }
  redisFree(c3);
  /* No assertion until node 3 runs again. */
  int stop_rc = kill(PID[2], SIGSTOP);
  for (int i = 0; stop_rc == 0 && i < TK_ROUNDS; i++, n++) {
    rc[n] = ordo_lock(t, "tk", 2, ORDO_MODE_X, 1000);
    if (rc[n] == 0 && ordo_fence(t, "tk", 2, &tok[n]) == 0)
      rc[n] = ordo_unlock(t, "tk", 2);
  }
  int cont_rc = kill(PID[2], SIGCONT);
  assert_int_equal(stop_rc, 0);
  assert_int_equal(cont_rc, 0);
  for (int i = 0; i < TK_ROUNDS; i++, n++) {
    rc[n] = ordo_lock(t, "tk", 2, ORDO_MODE_X, 1000);
    if (rc[n] == 0 && ordo_fence(t, "tk", 2, &tok[n]) == 0)
      rc[n] = ordo_unlock(t, "tk", 2);
  }
  for (int i = 0; i < n; i++) {
    print_message("round %d: %s, token %llu\n", i + 1, ordo_err_name(rc[i]),
                  (unsigned long long)tok[i]);
    assert_int_equal(rc[i], 0);
    assert_true(tok[i] > 0);
    if (i > 0)
      assert_true(tok[i] > tok[i - 1]);
  }
  ordo_txn_end(t);
  ordo_close(o);
}

/* ---- One node stopped past the lease, an owner register --------------------
 */

#define SR_KEYS 6
#define SR_WORKERS 6

typedef struct sr_slot {
  _Atomic uint64_t owner;  /* the holder's worker number + 1, 0: none */
  _Atomic uint64_t token;  /* the last grant's token */
  _Atomic uint64_t hi;     /* the greatest token any grant reported */
  _Atomic uint64_t grants; /* the grants of this key */
} sr_slot;

typedef struct sr_shared {
  ordo_t *o;
  sr_slot reg[SR_KEYS];
  _Atomic bool stop;
  _Atomic uint64_t grants, timeouts, regressions, long_holds;
  _Atomic uint64_t violations, errors, bad_tokens;
  _Atomic int last_error;
  long hold_long_us; /* a long hold: 0.4 lease; set before the workers */
  char what[256];    /* the first violation, written once */
  _Atomic bool what_set;
} sr_shared;

typedef struct sr_worker {
  sr_shared *s;
  int id;
  pthread_t th;
} sr_worker;

static void sr_note(sr_shared *s, const char *fmt, ...) {
  bool no = false;
  if (!atomic_compare_exchange_strong(&s->what_set, &no, true))
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->what, sizeof s->what, fmt, ap);
  va_end(ap);
}

static void *sr_main(void *arg) {
  sr_worker *w = arg;
  sr_shared *s = w->s;
  uint64_t me = (uint64_t)w->id + 1, seed = me * 0x9E3779B97F4A7C15ull;
  ordo_txn_t *t = NULL;
  if (ordo_txn_begin(s->o, &t, NULL) != 0) {
    atomic_fetch_add(&s->errors, 1);
    return NULL;
  }
  unsigned n = 0;
  while (!atomic_load(&s->stop)) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    int a = (int)(seed % SR_KEYS), b = (int)((seed >> 8) % (SR_KEYS - 1));
    if (b >= a)
      b++;
    char ka[8], kb[8];
    snprintf(ka, sizeof ka, "sr:%d", a);
    snprintf(kb, sizeof kb, "sr:%d", b);
    ordo_req_t r[2] = {ORDO_REQ_X(ka, strlen(ka)), ORDO_REQ_X(kb, strlen(kb))};
    int rc = ordo_lock_all(t, r, 2, 3000);
    if (rc == ORDO_ETIMEDOUT) {
      atomic_fetch_add(&s->timeouts, 1);
      continue;
    }
    if (rc != 0) {
      atomic_fetch_add(&s->errors, 1);
      atomic_store(&s->last_error, rc);
      continue;
    }
    int ks[2] = {a, b};
    const char *names[2] = {ka, kb};
    for (int i = 0; i < 2; i++) {
      uint64_t none = 0, tok = 0;
      if (!atomic_compare_exchange_strong(&s->reg[ks[i]].owner, &none, me)) {
        atomic_fetch_add(&s->violations, 1);
        sr_note(s, "worker %d was granted %s while worker %llu held it", w->id,
                names[i], (unsigned long long)none - 1);
      }
      if (ordo_fence(t, names[i], strlen(names[i]), &tok) != 0 || tok == 0) {
        atomic_fetch_add(&s->bad_tokens, 1);
        sr_note(s, "worker %d: no token for %s", w->id, names[i]);
      }
      /* Counted (they must not happen: test_node_stopped says why), and
       * the greatest kept for the check against the nodes' counters. */
      uint64_t prev = atomic_exchange(&s->reg[ks[i]].token, tok);
      if (tok <= prev)
        atomic_fetch_add(&s->regressions, 1);
      uint64_t hi = atomic_load(&s->reg[ks[i]].hi);
      while (tok > hi &&
             !atomic_compare_exchange_weak(&s->reg[ks[i]].hi, &hi, tok))
        ;
      atomic_fetch_add(&s->reg[ks[i]].grants, 1);
    }
    atomic_fetch_add(&s->grants, 1);
    /* Mostly short holds; every eighth outlives a third of the lease, so
     * renewals run while the node is stopped. */
    if (++n % 8 == 0) {
      atomic_fetch_add(&s->long_holds, 1);
      tu_sleep_us(s->hold_long_us);
    } else {
      tu_sleep_us((long)(seed % 2000));
    }
    for (int i = 0; i < 2; i++) {
      uint64_t mine = me;
      if (!atomic_compare_exchange_strong(&s->reg[ks[i]].owner, &mine, 0)) {
        atomic_fetch_add(&s->violations, 1);
        sr_note(s, "worker %d held %s but the register says worker %llu", w->id,
                names[i], (unsigned long long)mine - 1);
      }
    }
    rc = ordo_unlock_all(t);
    if (rc != 2) {
      atomic_fetch_add(&s->errors, 1);
      atomic_store(&s->last_error, rc);
    }
  }
  ordo_txn_end(t);
  return NULL;
}

/* Waits (bounded) until at least n grants happened. */
static bool sr_wait_grants(sr_shared *s, uint64_t n, int ms) {
  uint64_t end = tu_now_ns() + tu_ms((uint64_t)ms) * 1000000u;
  while (atomic_load(&s->grants) < n) {
    if (tu_now_ns() >= end)
      return false;
    tu_sleep_us(2000);
  }
  return true;
}

/* Key k's fencing counter on every node (0 where there is none yet). */
static void sr_counters(long long out[5][SR_KEYS]) {
  for (int i = 0; i < 5; i++) {
    redisContext *c = it_side(PORT[i], NULL);
    for (int k = 0; k < SR_KEYS; k++) {
      redisReply *r = redisCommand(c, "GET {sr:%d}:ordo:fence", k);
      assert_non_null(r);
      assert_true(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL);
      out[i][k] = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
      freeReplyObject(r);
    }
    redisFree(c);
  }
}

/*
 * Six workers contend on a few keys while node 5 of 5 is stopped for 1.5
 * leases. A try that no majority granted still INCRs the nodes that
 * granted it, so the nodes' counters of a key drift apart; before issue
 * 18 (item 15) a grant decided by three nodes that were behind took a
 * token below the last one (13 to 36 such regressions a run). Each grant
 * now writes its token back to every node's counter (FENCEMAX, a max), so
 * every later majority shares a node whose counter is at least that
 * token: the register must see the tokens of each key strictly increase
 * (regressions 0). What the design promises besides is asserted against
 * the nodes' own counters afterwards: no token is above the greatest
 * counter of its key; and every grant took a token (INCR) on a majority,
 * so a key's counters moved, summed over the nodes, by three per grant at
 * least. (test_tokens_one_owner has the case of a single owner.)
 */
static void test_node_stopped(void **state) {
  (void)state;
  need_plain(5);
  /* The lease grows with the sanitizers' slowdown (ORDO_TEST_TIMEOUT_MULT):
   * the shared renewal thread must run within two thirds of a lease, and
   * under ASan, beside another suite, it once did not within 1 s. The node
   * stays stopped for 1.5 leases all the same. */
  const char *mult_env = getenv("ORDO_TEST_TIMEOUT_MULT");
  long mult = mult_env && atol(mult_env) > 1 ? atol(mult_env) : 1;
  const long lease_ms = 1000 * mult;
  char url[512], query[64];
  snprintf(query, sizeof query, "?lease_ms=%ld&timeout_ms=%ld", lease_ms,
           3 * lease_ms);
  url_of(url, sizeof url, PORT, 5, NULL, query);
  static sr_shared s;
  memset(&s, 0, sizeof s);
  static long long base[5][SR_KEYS], after[5][SR_KEYS];
  sr_counters(base);
  s.o = open_url(url);
  tu_watchdog_start(s.o, 60, "redlock: a node stopped past the lease");
  s.hold_long_us = 400 * 1000 * mult;
  sr_worker w[SR_WORKERS];
  for (int i = 0; i < SR_WORKERS; i++) {
    w[i] = (sr_worker){&s, i, 0};
    assert_int_equal(pthread_create(&w[i].th, NULL, sr_main, &w[i]), 0);
  }
  bool ok = sr_wait_grants(&s, 40, 20000);
  /* Node 5 stops for 1.5 leases: the keys it holds for anyone outlive
   * their leases there, and its votes are missing meanwhile. */
  assert_int_equal(kill(PID[4], SIGSTOP), 0);
  uint64_t at_stop = atomic_load(&s.grants), t_stop = tu_now_ns();
  tu_sleep_us(1500 * lease_ms);
  uint64_t during = atomic_load(&s.grants) - at_stop;
  assert_int_equal(kill(PID[4], SIGCONT), 0);
  uint64_t stopped_ms = it_ms_since(t_stop);
  uint64_t at_cont = atomic_load(&s.grants);
  ok = ok && sr_wait_grants(&s, at_cont + 40, 20000);
  atomic_store(&s.stop, true);
  for (int i = 0; i < SR_WORKERS; i++)
    pthread_join(w[i].th, NULL);
  tu_watchdog_stop();
  print_message("grants %llu (%llu while node 5 was stopped %llu ms), "
                "timeouts %llu, long holds %llu, token regressions %llu, "
                "errors %llu (last %s), violations %llu%s%s\n",
                (unsigned long long)atomic_load(&s.grants),
                (unsigned long long)during, (unsigned long long)stopped_ms,
                (unsigned long long)atomic_load(&s.timeouts),
                (unsigned long long)atomic_load(&s.long_holds),
                (unsigned long long)atomic_load(&s.regressions),
                (unsigned long long)atomic_load(&s.errors),
                ordo_err_name(atomic_load(&s.last_error)),
                (unsigned long long)atomic_load(&s.violations),
                s.what_set ? ": " : "", s.what_set ? s.what : "");
  if (atomic_load(&s.errors) > 0)
    ordo_dump(s.o, 2); /* the place's last failure: which node, and why */
  assert_true(ok);
  assert_true(during > 0); /* four of five still decide */
  assert_true(stopped_ms >= (uint64_t)lease_ms);
  assert_int_equal(atomic_load(&s.violations), 0);
  assert_int_equal(atomic_load(&s.bad_tokens), 0);
  assert_int_equal(atomic_load(&s.regressions), 0);
  assert_int_equal(atomic_load(&s.errors), 0);
  ordo_close(s.o);
  sr_counters(after);
  for (int k = 0; k < SR_KEYS; k++) {
    long long top = 0, moved = 0;
    for (int i = 0; i < 5; i++) {
      top = after[i][k] > top ? after[i][k] : top;
      moved += after[i][k] - base[i][k];
    }
    uint64_t hi = atomic_load(&s.reg[k].hi), g = atomic_load(&s.reg[k].grants);
    print_message("sr:%d: %llu grants, tokens up to %llu; counters up to "
                  "%lld, moved %lld in all\n",
                  k, (unsigned long long)g, (unsigned long long)hi, top, moved);
    assert_true(hi <= (uint64_t)top);
    assert_true(moved >= 3 * (long long)g);
  }
  /* Nothing of ours is left on any node, the stopped one included, once
   * its leases ran out there. */
  for (int i = 0; i < 5; i++) {
    redisContext *c = it_side(PORT[i], NULL);
    uint64_t end = tu_now_ns() + tu_ms(3000) * 1000000u;
    for (;;) {
      size_t live = 0;
      char modes[8];
      for (int k = 0; k < SR_KEYS; k++) {
        char key[8];
        snprintf(key, sizeof key, "sr:%d", k);
        live += fields(c, key, modes, sizeof modes);
      }
      if (live == 0)
        break;
      assert_true(tu_now_ns() < end);
      tu_sleep_us(50 * 1000);
    }
    redisFree(c);
  }
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--stale-child") == 0)
    return it_stale_child(argv[2], argv[3]);
  long v[8];
  NPORT = parse_list("ORDO_RL_PORTS", v, 5);
  for (int i = 0; i < NPORT; i++)
    PORT[i] = (int)v[i];
  int np = parse_list("ORDO_RL_PIDS", v, 5);
  for (int i = 0; i < np; i++)
    PID[i] = (pid_t)v[i];
  if (np < NPORT)
    NPORT = np;
  NAUTH = parse_list("ORDO_RL_AUTH_PORTS", v, 3);
  for (int i = 0; i < NAUTH; i++)
    AUTH[i] = (int)v[i];
  /* ORDO_TEST_FILTER=pattern runs only the cases it names (cmocka's
   * wildcards), for a quick run of one case. */
  if (getenv("ORDO_TEST_FILTER"))
    cmocka_set_test_filter(getenv("ORDO_TEST_FILTER"));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_urls),
      cmocka_unit_test(test_owner_random),
      cmocka_unit_test(test_unreachable),
      cmocka_unit_test(test_password),
      cmocka_unit_test(test_url_db),
      cmocka_unit_test(test_url_unix_sockets),
      cmocka_unit_test(test_url_modes),
      cmocka_unit_test(test_tokens_one_owner),
      cmocka_unit_test(test_stale_holder),
      cmocka_unit_test(test_partial_upgrade),
      cmocka_unit_test(test_script_flush),
      cmocka_unit_test(test_node_timeout),
      cmocka_unit_test(test_black_hole),
      cmocka_unit_test(test_lost_in_time),
      cmocka_unit_test(test_node_restarted),
      cmocka_unit_test(test_node_stopped),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
