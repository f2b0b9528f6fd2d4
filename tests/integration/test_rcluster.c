/*
 * test_rcluster.c -- the redis-cluster:// backend through a failover, on
 * the real cluster that tests/integration/rcluster_failover.sh starts
 * (rcluster_fixture.sh: 3 primaries, 3 replicas, node timeout 1 s). The
 * wrapper exports the URL and, for each case, the nodes it may kill; a
 * case whose variables are missing fails, naming them (never a skip).
 *
 * test_moved_ask: a slot migrated from one primary to another under a
 * place: -ASK during the migration, -MOVED after it (the case's comment).
 *
 * test_lost_lock: what asynchronous replication can lose, shown on
 * purpose. The replica of the primary that serves ORDO_RC_LOSS_KEY is
 * stopped (SIGSTOP) and its primary drops the replication link (CLIENT
 * KILL TYPE replica), so the next write is on the primary only; A takes
 * the key, the primary is killed (SIGKILL) and the replica runs again and
 * is promoted. Then B is granted the key while A still believes it holds
 * it, B's fencing token is not above A's (the counter's INCR was lost with
 * the lock), and A is told its lease is lost (the lease-lost callback)
 * within a lease, and its unlock says ORDO_ELEASE. docs/backend-redis.md
 * ("Redis Cluster") writes this down.
 *
 * test_failover_loop: 4 workers lock 3 of 12 keys spread over the 3
 * primaries, in a loop, while the primary ORDO_RC_LOOP_PID is killed
 * (SIGKILL) and its replica is promoted. Every call must return within its
 * bound (lock_all: its timeout plus two exchange bounds; unlock: two
 * exchange bounds), with success or one of ORDO_ETIMEDOUT, ORDO_EBACKEND,
 * ORDO_ELEASE; and the loop must go on after the failover (successes
 * after the kill on keys of every slot group, the victim's included).
 * How long calls failed and how many holders overlapped (a lease lost
 * while the primary was gone: the holder is told ORDO_ELEASE) is printed,
 * not asserted.
 */
#include "it_redis.h"

#include <stdlib.h>

#define RC_LEASE_MS 1000
#define RC_TIMEOUT_MS 1500
#define IO (RC_LEASE_MS / 3) /* rcluster.c's exchange bound */

static const char *URL;

static const char *env_or_fail(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v)
    fail_msg("%s is not set (rcluster_failover.sh exports it)", name);
  return v;
}

static ordo_t *open_url(int lease_ms) {
  char url[512];
  snprintf(url, sizeof url, "%s%slease_ms=%d&timeout_ms=%d", URL,
           strchr(URL, '?') ? "&" : "?", lease_ms, RC_TIMEOUT_MS);
  ordo_t *o = NULL;
  assert_int_equal(ordo_open(&o, url, NULL), 0);
  return o;
}

static void on_lost(ordo_txn_t *t, void *arg) {
  (void)t;
  atomic_store((_Atomic uint64_t *)arg, tu_now_ns());
}

/* The node id of the node on port (CLUSTER MYID) into id. */
static void node_id(int port, char id[64]) {
  redisContext *c = it_side(port, NULL);
  redisReply *r = redisCommand(c, "CLUSTER MYID");
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_STRING);
  snprintf(id, 64, "%s", r->str);
  freeReplyObject(r);
  redisFree(c);
}

static void setslot(int port, const char *fmt, unsigned slot, const char *id) {
  redisContext *c = it_side(port, NULL);
  char cmd[160];
  snprintf(cmd, sizeof cmd, fmt, slot, id);
  redisReply *r = redisCommand(c, cmd);
  assert_non_null(r);
  if (r->type != REDIS_REPLY_STATUS)
    print_error("%s on %d: %s\n", cmd, port,
                r->type == REDIS_REPLY_ERROR ? r->str : "?");
  assert_int_equal(r->type, REDIS_REPLY_STATUS);
  freeReplyObject(r);
  redisFree(c);
}

/* How many MOVED and ASK replies the place followed (ordo_dump's text). */
static void redirects(ordo_t *o, unsigned long *moved, unsigned long *ask) {
  char buf[4096];
  it_dump_text(o, buf, sizeof buf);
  const char *m = strstr(buf, " MOVED, ");
  assert_non_null(m);
  const char *b = m;
  while (b > buf && b[-1] >= '0' && b[-1] <= '9')
    b--;
  *moved = strtoul(b, NULL, 10);
  *ask = strtoul(m + 8, NULL, 10);
}

/*
 * test_moved_ask: the slot of ORDO_RC_MIG_KEY is migrated from its primary
 * (ORDO_RC_MIG_SRC_PORT) to another (ORDO_RC_MIG_DST_PORT) while H holds
 * the key: H's lock key and its counter are moved (MIGRATE) with the slot
 * MIGRATING on the source and IMPORTING on the target. T's try is then
 * answered by the target through -ASK (ASKING, then the script): held by
 * H. H's unlock goes the same way and releases the key. Once the slot is
 * the target's (SETSLOT NODE on every primary), T's place, whose map still
 * names the source, follows -MOVED and is granted, with the next token of
 * the moved counter. A key that is absent while its slot migrates cannot
 * be taken until the migration ends: the importing node answers a script
 * over the key and its counter with -TRYAGAIN unless both are there, and
 * ordo tries again within the deadline (docs/backend-redis.md).
 */
static void test_moved_ask(void **state) {
  (void)state;
  const char *key = env_or_fail("ORDO_RC_MIG_KEY");
  int src = atoi(env_or_fail("ORDO_RC_MIG_SRC_PORT"));
  int dst = atoi(env_or_fail("ORDO_RC_MIG_DST_PORT"));
  int other = atoi(env_or_fail("ORDO_RC_MIG_OTHER_PORT"));
  unsigned slot = (unsigned)atoi(env_or_fail("ORDO_RC_MIG_SLOT"));
  char sid[64], did[64];
  node_id(src, sid);
  node_id(dst, did);
  ordo_t *o = open_url(RC_LEASE_MS);
  ordo_txn_t *h = NULL, *t = NULL;
  assert_int_equal(ordo_txn_begin(o, &h, NULL), 0);
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0);
  ordo_req_t r = ORDO_REQ_X(key, strlen(key));
  assert_int_equal(ordo_lock_all(h, &r, 1, 2000), 0);
  setslot(dst, "CLUSTER SETSLOT %u IMPORTING %s", slot, sid);
  setslot(src, "CLUSTER SETSLOT %u MIGRATING %s", slot, did);
  char fence[256];
  snprintf(fence, sizeof fence, "{%s}:ordo:fence", key);
  redisContext *c = it_side(src, NULL);
  redisReply *x = redisCommand(c, "MIGRATE 127.0.0.1 %d %s 0 5000 KEYS %s %s",
                               dst, "", key, fence);
  assert_non_null(x);
  if (x->type != REDIS_REPLY_STATUS)
    print_error("MIGRATE: %s\n", x->type == REDIS_REPLY_ERROR ? x->str : "?");
  assert_int_equal(x->type, REDIS_REPLY_STATUS);
  freeReplyObject(x);
  redisFree(c);
  unsigned long m0, a0, m1, a1, m2, a2;
  redirects(o, &m0, &a0);
  assert_int_equal(ordo_lock_all(t, &r, 1, 0), ORDO_ETIMEDOUT);
  assert_int_equal(ordo_unlock_all(h), 1);
  redirects(o, &m1, &a1);
  assert_true(a1 >= a0 + 2);
  setslot(dst, "CLUSTER SETSLOT %u NODE %s", slot, did);
  setslot(src, "CLUSTER SETSLOT %u NODE %s", slot, did);
  setslot(other, "CLUSTER SETSLOT %u NODE %s", slot, did);
  assert_int_equal(ordo_lock_all(t, &r, 1, 2000), 0);
  uint64_t tok = 0;
  assert_int_equal(ordo_fence(t, key, strlen(key), &tok), 0);
  assert_int_equal(ordo_unlock_all(t), 1);
  redirects(o, &m2, &a2);
  assert_true(m2 >= m1 + 1);
  /* The counter came along: the second grant's token is 2. */
  assert_int_equal(tok, 2);
  printf("# moved/ask: %lu ASK, %lu MOVED followed; token %llu\n", a2 - a0,
         m2 - m0, (unsigned long long)tok);
  ordo_txn_end(h);
  ordo_txn_end(t);
  ordo_close(o);
}

static void test_lost_lock(void **state) {
  (void)state;
  const char *key = env_or_fail("ORDO_RC_LOSS_KEY");
  int pport = atoi(env_or_fail("ORDO_RC_LOSS_PRIMARY_PORT"));
  pid_t ppid = (pid_t)atoi(env_or_fail("ORDO_RC_LOSS_PRIMARY_PID"));
  pid_t rpid = (pid_t)atoi(env_or_fail("ORDO_RC_LOSS_REPLICA_PID"));
  const int lease = 4000;
  ordo_t *oa = open_url(lease), *ob = open_url(lease);
  _Atomic uint64_t lost_at = 0;
  ordo_on_lease_lost(oa, on_lost, (void *)&lost_at);
  ordo_txn_t *a = NULL, *b = NULL;
  assert_int_equal(ordo_txn_begin(oa, &a, NULL), 0);
  assert_int_equal(ordo_txn_begin(ob, &b, NULL), 0);
  ordo_req_t r = ORDO_REQ_X(key, strlen(key));
  /* Nothing is asserted between the replica's SIGSTOP and its SIGCONT, so
   * that a failure never leaves it stopped. */
  redisContext *side = it_side(pport, NULL);
  kill(rpid, SIGSTOP);
  long long dropped = it_int(side, "CLIENT KILL TYPE replica");
  int rca = ordo_lock_all(a, &r, 1, 2000);
  uint64_t ta = 0;
  int fa = ordo_fence(a, key, strlen(key), &ta);
  redisFree(side);
  kill(ppid, SIGKILL);
  uint64_t killed = tu_now_ns();
  kill(rpid, SIGCONT);
  assert_int_equal(dropped, 1);
  assert_int_equal(rca, 0);
  assert_int_equal(fa, 0);
  /* B asks until the replica is promoted (a failover takes about two node
   * timeouts), bounded. */
  int rcb = ORDO_ETIMEDOUT;
  while (it_ms_since(killed) < tu_ms(15000)) {
    rcb = ordo_lock_all(b, &r, 1, 1000);
    if (rcb == 0)
      break;
    assert_true(rcb == ORDO_ETIMEDOUT || rcb == ORDO_EBACKEND);
  }
  assert_int_equal(rcb, 0);
  uint64_t granted = it_ms_since(killed);
  uint64_t tb = 0;
  assert_int_equal(ordo_fence(b, key, strlen(key), &tb), 0);
  /* The lock was lost with the primary: A's grant never reached the
   * replica, so the new primary gave the key to B while A's lease (4 s)
   * still runs, and B's token is not above A's. */
  assert_true(tb <= ta);
  /* A's next renewal finds the key is B's: told within a lease of B's
   * grant. */
  uint64_t since = tu_now_ns();
  while (atomic_load(&lost_at) == 0 && it_ms_since(since) < tu_ms(2 * lease))
    tu_sleep_us(10000);
  assert_true(atomic_load(&lost_at) != 0);
  uint64_t told = (atomic_load(&lost_at) - killed) / 1000000u;
  assert_int_equal(ordo_unlock_all(a), ORDO_ELEASE);
  assert_int_equal(ordo_unlock_all(b), 1);
  printf("# lost lock: A token %llu; B granted %llu ms after the kill, "
         "token %llu; A told of its lost lease %llu ms after the kill\n",
         (unsigned long long)ta, (unsigned long long)granted,
         (unsigned long long)tb, (unsigned long long)told);
  ordo_txn_end(a);
  ordo_txn_end(b);
  ordo_close(oa);
  ordo_close(ob);
}

/* ---- The loop ---------------------------------------------------------- */

#define LW 4
#define LK 12

typedef struct loop_w {
  ordo_t *o;
  int id;
  _Atomic bool *stop;
  _Atomic int *owner; /* LK entries: who is inside key i, 0 for nobody */
  uint64_t kill_ns;   /* written before the kill, read after it */
  _Atomic uint64_t *killed;
  unsigned seed;
  /* Results, read after the join. */
  long ok, ok_after, timeouts, backend, lease, other, overlaps;
  int other_rc;
  uint64_t max_lock_ms, max_unlock_ms, last_ok_ns;
  bool after_on[LK];
} loop_w;

static char KEYS[LK][16];

static void *loop_run(void *arg) {
  loop_w *w = arg;
  ordo_txn_t *t = NULL;
  if (ordo_txn_begin(w->o, &t, NULL) != 0) {
    w->other++;
    return NULL;
  }
  while (!atomic_load(w->stop)) {
    int k[3];
    k[0] = (int)(rand_r(&w->seed) % LK);
    do
      k[1] = (int)(rand_r(&w->seed) % LK);
    while (k[1] == k[0]);
    do
      k[2] = (int)(rand_r(&w->seed) % LK);
    while (k[2] == k[0] || k[2] == k[1]);
    ordo_req_t r[3];
    for (int i = 0; i < 3; i++)
      r[i] = (ordo_req_t)ORDO_REQ_X(KEYS[k[i]], strlen(KEYS[k[i]]));
    uint64_t t0 = tu_now_ns();
    int rc = ordo_lock_all(t, r, 3, RC_TIMEOUT_MS);
    uint64_t ms = it_ms_since(t0);
    if (ms > w->max_lock_ms)
      w->max_lock_ms = ms;
    if (rc == 0) {
      for (int i = 0; i < 3; i++) {
        int expect = 0;
        if (!atomic_compare_exchange_strong(&w->owner[k[i]], &expect, w->id))
          w->overlaps++;
      }
      tu_sleep_us(500);
      for (int i = 0; i < 3; i++) {
        int expect = w->id;
        atomic_compare_exchange_strong(&w->owner[k[i]], &expect, 0);
      }
      t0 = tu_now_ns();
      int u = ordo_unlock_all(t);
      ms = it_ms_since(t0);
      if (ms > w->max_unlock_ms)
        w->max_unlock_ms = ms;
      if (u == 3) {
        w->ok++;
        uint64_t kn = atomic_load(w->killed);
        if (kn && t0 > kn) {
          w->ok_after++;
          for (int i = 0; i < 3; i++)
            w->after_on[k[i]] = true;
        }
        w->last_ok_ns = tu_now_ns();
      } else {
        rc = u;
      }
    }
    if (rc == 0 || rc == 3)
      continue;
    if (rc == ORDO_ETIMEDOUT)
      w->timeouts++;
    else if (rc == ORDO_EBACKEND)
      w->backend++;
    else if (rc == ORDO_ELEASE)
      w->lease++;
    else {
      w->other++;
      w->other_rc = rc;
    }
  }
  ordo_txn_end(t);
  return NULL;
}

static void test_failover_loop(void **state) {
  (void)state;
  pid_t victim = (pid_t)atoi(env_or_fail("ORDO_RC_LOOP_PID"));
  for (int i = 0; i < LK; i++)
    snprintf(KEYS[i], sizeof KEYS[i], "loop:%d", i);
  ordo_t *o = open_url(RC_LEASE_MS);
  _Atomic bool stop = false;
  _Atomic int owner[LK] = {0};
  _Atomic uint64_t killed = 0;
  loop_w w[LW];
  pthread_t th[LW];
  memset(w, 0, sizeof w);
  for (int i = 0; i < LW; i++) {
    w[i].o = o;
    w[i].id = i + 1;
    w[i].stop = &stop;
    w[i].owner = owner;
    w[i].killed = &killed;
    w[i].seed = (unsigned)(i * 7919 + 1);
    assert_int_equal(pthread_create(&th[i], NULL, loop_run, &w[i]), 0);
  }
  /* The kill lands in a running loop: every worker has finished some
   * cycles first (read as after_on is below), waited for within a bound;
   * the checks below judge the run either way. */
  uint64_t w0 = tu_now_ns();
  bool going = false;
  while (!going && it_ms_since(w0) < tu_ms(15000)) {
    tu_sleep_us(10000);
    going = true;
    for (int i = 0; i < LW; i++)
      going = going && w[i].ok >= 20;
  }
  kill(victim, SIGKILL);
  uint64_t kn = tu_now_ns();
  atomic_store(&killed, kn);
  /* Run until every key was locked again after the kill (the victim's
   * slots are served by its promoted replica), bounded. */
  bool all = false;
  while (!all && it_ms_since(kn) < tu_ms(15000)) {
    tu_sleep_us(50000);
    all = true;
    for (int k = 0; k < LK && all; k++) {
      bool on = false;
      for (int i = 0; i < LW; i++)
        on |= w[i].after_on[k]; /* a benign race: read again next round */
      all = on;
    }
  }
  uint64_t took = it_ms_since(kn);
  atomic_store(&stop, true);
  long ok = 0, after = 0, to = 0, be = 0, le = 0, other = 0, ov = 0;
  uint64_t mx = 0, mxu = 0;
  for (int i = 0; i < LW; i++) {
    assert_int_equal(pthread_join(th[i], NULL), 0);
    ok += w[i].ok;
    after += w[i].ok_after;
    to += w[i].timeouts;
    be += w[i].backend;
    le += w[i].lease;
    ov += w[i].overlaps;
    if (w[i].other)
      print_error("worker %d: %ld calls failed with %s\n", i, w[i].other,
                  ordo_err_name(w[i].other_rc));
    other += w[i].other;
    mx = w[i].max_lock_ms > mx ? w[i].max_lock_ms : mx;
    mxu = w[i].max_unlock_ms > mxu ? w[i].max_unlock_ms : mxu;
  }
  printf("# failover loop: %ld cycles (%ld after the kill), every key "
         "locked again %llu ms after the kill; failed calls: %ld timed out, "
         "%ld EBACKEND, %ld ELEASE; longest lock_all %llu ms, unlock %llu "
         "ms; %ld overlapping holds\n",
         ok, after, (unsigned long long)took, to, be, le,
         (unsigned long long)mx, (unsigned long long)mxu, ov);
  assert_true(all);
  assert_int_equal(other, 0);
  /* An exchange is bounded by a third of the lease (IO). lock_all: its
   * timeout, the try in flight (one IO) and the undo of the groups it took
   * (each group retried for one IO, its last exchange one more); unlock:
   * its 3 groups so. 300 ms for the machine. */
  assert_true(mx <= tu_ms(RC_TIMEOUT_MS + 7 * IO + 300));
  assert_true(mxu <= tu_ms(6 * IO + 300));
  ordo_close(o);
}

int main(void) {
  URL = getenv("ORDO_RC_URL");
  if (!URL) {
    fprintf(stderr, "ORDO_RC_URL is not set (rcluster_failover.sh)\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_moved_ask),
      cmocka_unit_test(test_lost_lock),
      cmocka_unit_test(test_failover_loop),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
