/*
 * test_rcluster.c -- the redis-cluster:// backend through a failover, on
 * the real cluster that tests/integration/rcluster_failover.sh starts
 * (rcluster_fixture.sh: 3 primaries, 3 replicas, node timeout 1 s). The
 * wrapper exports the URL and, for each case, the nodes it may kill; a
 * case whose variables are missing fails, naming them (never a skip).
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
  assert_int_equal(ordo_txn_begin(oa, &a, 0), 0);
  assert_int_equal(ordo_txn_begin(ob, &b, 0), 0);
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
  if (ordo_txn_begin(w->o, &t, 0) != 0) {
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
  tu_sleep_us(500000);
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
  tu_sleep_us(200000);
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
      cmocka_unit_test(test_lost_lock),
      cmocka_unit_test(test_failover_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
