/*
 * test_shards_it.c -- a sharded ordod:// place against 3 real ordod
 * servers, which shards_fixture.sh starts (ORDO_SHARD_PORTS, ORDO_SHARD_PIDS;
 * ORDO_ORDOD names the binary, for a 4th server this test starts and kills
 * itself). What it checks:
 *   - the global txn id: every session a txn opens, on each shard, sends
 *     SESSION GID with the same 32 hex digits (time, then random), and the
 *     server accepts it (the backend fails the call on any reply but +OK);
 *     a LOCK sent while the txn holds keys elsewhere carries HELDAT with
 *     those shards, and a lock_all's LOCKs go in shard order. The commands
 *     are seen by standing in for hiredis's redisAppendCommandArgv
 *     (-Wl,--wrap): a session's gid can be read only on its own connection;
 *   - lock_all all or nothing across shards: a key held on shard B makes a
 *     lock_all over A, B, C take nothing on A and C, and holds from before
 *     the call stay;
 *   - shard order, not URL order: two places whose URLs list the shards in
 *     different orders run a lock_all workload with no deadlock (a watchdog
 *     dumps every shard's GRAPH on a hang);
 *   - a shard that is stopped (SIGSTOP) or killed (kill -9): calls on its
 *     keys fail with ORDO_EBACKEND inside their deadline (a LOCK on a
 *     session there, a session to open, a lock_all), calls on the others
 *     go on; the killed shard's lost lease fires the
 *     txn's lease-lost callback once; stats and graph add up the shards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"
#include "backend/shards.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

static int ports[3];
static pid_t pids[3];
static char names[3][32];     /* "127.0.0.1:PORT", as the URL writes them */
static char url[256];         /* the shards in the fixture's order */
static const char *sorted[3]; /* the names in shard order */

/* ---- Commands seen on the wire (the hiredis stand-in) ------------------- */

typedef struct {
  int port;
  char cmd[16];   /* "SESSION GID" or "LOCK" */
  char arg[160];  /* the gid, or the LOCK's HELDAT ("" without) */
  char first[32]; /* a LOCK's first key */
} seen_cmd;

static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static seen_cmd seen[64];
static int nseen;
static bool recording;

int __real_redisAppendCommandArgv(redisContext *c, int argc, const char **argv,
                                  const size_t *argvlen);
int __wrap_redisAppendCommandArgv(redisContext *c, int argc, const char **argv,
                                  const size_t *argvlen);
int __wrap_redisAppendCommandArgv(redisContext *c, int argc, const char **argv,
                                  const size_t *argvlen) {
  pthread_mutex_lock(&seen_mu);
  if (recording && nseen < 64) {
    seen_cmd *s = &seen[nseen];
    memset(s, 0, sizeof *s);
    s->port = c->tcp.port;
    if (argc == 3 && argvlen[0] == 7 && memcmp(argv[0], "SESSION", 7) == 0 &&
        argvlen[1] == 3 && memcmp(argv[1], "GID", 3) == 0) {
      strcpy(s->cmd, "SESSION GID");
      snprintf(s->arg, sizeof s->arg, "%.*s", (int)argvlen[2], argv[2]);
      nseen++;
    } else if (argc >= 4 && argvlen[0] == 4 &&
               memcmp(argv[0], "LOCK", 4) == 0) {
      strcpy(s->cmd, "LOCK");
      snprintf(s->first, sizeof s->first, "%.*s", (int)argvlen[2], argv[2]);
      for (int i = 2; i + 1 < argc; i++)
        if (argvlen[i] == 6 && memcmp(argv[i], "HELDAT", 6) == 0)
          snprintf(s->arg, sizeof s->arg, "%.*s", (int)argvlen[i + 1],
                   argv[i + 1]);
      nseen++;
    }
  }
  pthread_mutex_unlock(&seen_mu);
  return __real_redisAppendCommandArgv(c, argc, argv, argvlen);
}

static void record(bool on) {
  pthread_mutex_lock(&seen_mu);
  recording = on;
  if (on)
    nseen = 0;
  pthread_mutex_unlock(&seen_mu);
}

/* ---- Helpers ------------------------------------------------------------- */

/* The rank (in shard order) of a name. */
static int rank_of(const char *name) {
  for (int i = 0; i < 3; i++)
    if (strcmp(sorted[i], name) == 0)
      return i;
  return -1;
}

/* A key "prefix<n>" whose shard is the one of rank r. */
static void key_on(int r, const char *prefix, char *out, size_t cap) {
  for (int n = 0;; n++) {
    int len = snprintf(out, cap, "%s%d", prefix, n);
    if ((int)ordo__shard_place(sorted, 3, out, (size_t)len) == r)
      return;
  }
}

static int port_rank(int port) {
  char n[32];
  snprintf(n, sizeof n, "127.0.0.1:%d", port);
  return rank_of(n);
}

static ordo_t *open_url(const char *u) {
  ordo_t *o = NULL;
  int rc = ordo_open(&o, u, NULL);
  if (rc)
    fail_msg("ordo_open(%s): %s", u, ordo_strerror(rc));
  return o;
}

static int str_cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int setup(void **state) {
  (void)state;
  const char *p = getenv("ORDO_SHARD_PORTS"), *q = getenv("ORDO_SHARD_PIDS");
  if (!p || !q || sscanf(p, "%d,%d,%d", &ports[0], &ports[1], &ports[2]) != 3)
    return -1;
  int a, b, c;
  if (sscanf(q, "%d,%d,%d", &a, &b, &c) != 3)
    return -1;
  pids[0] = a;
  pids[1] = b;
  pids[2] = c;
  for (int i = 0; i < 3; i++) {
    snprintf(names[i], sizeof names[i], "127.0.0.1:%d", ports[i]);
    sorted[i] = names[i];
  }
  qsort(sorted, 3, sizeof *sorted, str_cmp);
  snprintf(url, sizeof url, "ordod://%s,%s,%s", names[0], names[1], names[2]);
  return 0;
}

/* ---- The cases ----------------------------------------------------------- */

static void test_gid_and_heldat(void **state) {
  (void)state;
  ordo_t *o = open_url(url);
  char k[3][32];
  for (int r = 0; r < 3; r++)
    key_on(r, "g", k[r], sizeof k[r]);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t before = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0);
  record(true);
  /* One key on the top shard, then a lock_all over all three. */
  assert_int_equal(ordo_lock(t, k[2], strlen(k[2]), ORDO_MODE_X, 5000), 0);
  ordo_req_t r[3] = {{k[0], strlen(k[0]), ORDO_MODE_X},
                     {k[1], strlen(k[1]), ORDO_MODE_S},
                     {k[2], strlen(k[2]), ORDO_MODE_X}};
  assert_int_equal(ordo_lock_all(t, r, 3, 5000), 0);
  record(false);
  /* Sessions: one per shard, each with the same gid. */
  int ng = 0, seen_rank[3] = {0, 0, 0};
  char gid[64] = "";
  for (int i = 0; i < nseen; i++) {
    if (strcmp(seen[i].cmd, "SESSION GID") != 0)
      continue;
    ng++;
    int rk = port_rank(seen[i].port);
    assert_true(rk >= 0);
    seen_rank[rk]++;
    if (!gid[0])
      strcpy(gid, seen[i].arg);
    assert_string_equal(seen[i].arg, gid);
  }
  assert_int_equal(ng, 3);
  assert_int_equal(seen_rank[0] + seen_rank[1] * 10 + seen_rank[2] * 100, 111);
  assert_int_equal(strlen(gid), 32);
  assert_int_equal(strspn(gid, "0123456789abcdef"), 32);
  /* Its first 8 bytes: the begin time, CLOCK_REALTIME ns, big endian. */
  char hi[17];
  memcpy(hi, gid, 16);
  hi[16] = 0;
  uint64_t at = strtoull(hi, NULL, 16);
  assert_true(at >= before && at - before < 60ull * 1000000000u);
  /* The LOCKs: the single key's (no HELDAT), then the lock_all's groups in
   * shard order, each naming the shards held at that moment. */
  int nl = 0;
  const char *want[4];
  char w1[64], w2[96];
  snprintf(w1, sizeof w1, "%s", sorted[2]);
  snprintf(w2, sizeof w2, "%s,%s", sorted[0], sorted[2]);
  want[0] = "";
  want[1] = w1;
  want[2] = w2;
  char w3[128];
  snprintf(w3, sizeof w3, "%s,%s", sorted[0], sorted[1]);
  want[3] = w3;
  int want_rank[4] = {2, 0, 1, 2};
  for (int i = 0; i < nseen; i++) {
    if (strcmp(seen[i].cmd, "LOCK") != 0)
      continue;
    assert_true(nl < 4);
    assert_int_equal(port_rank(seen[i].port), want_rank[nl]);
    if (strcmp(seen[i].arg, want[nl]) != 0)
      fail_msg("LOCK %d on %d: HELDAT '%s', expected '%s'", nl, seen[i].port,
               seen[i].arg, want[nl]);
    nl++;
  }
  assert_int_equal(nl, 4);
  ordo_txn_t *t2;
  assert_int_equal(ordo_txn_begin(o, &t2, NULL), 0);
  record(true);
  assert_int_equal(ordo_lock(t2, "other", 5, ORDO_MODE_S, 5000), 0);
  record(false);
  assert_int_equal(nseen, 2);
  assert_string_equal(seen[0].cmd, "SESSION GID");
  assert_string_not_equal(seen[0].arg, gid); /* another txn, another id */
  ordo_txn_end(t2);
  assert_int_equal(ordo_unlock_all(t), 3); /* keys, one per shard */
  ordo_txn_end(t);
  ordo_close(o);
}

static void test_all_or_nothing(void **state) {
  (void)state;
  ordo_t *o = open_url(url);
  char a[32], b[32], c[32];
  key_on(0, "n", a, sizeof a);
  key_on(1, "n", b, sizeof b);
  key_on(2, "n", c, sizeof c);
  ordo_txn_t *holder, *t, *probe;
  assert_int_equal(ordo_txn_begin(o, &holder, NULL), 0);
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0);
  assert_int_equal(ordo_txn_begin(o, &probe, NULL), 0);
  assert_int_equal(ordo_lock(holder, b, strlen(b), ORDO_MODE_X, 5000), 0);
  /* A hold from before the call, on A: it stays. */
  assert_int_equal(ordo_lock(t, a, strlen(a), ORDO_MODE_X, 5000), 0);
  ordo_req_t r[3] = {{a, strlen(a), ORDO_MODE_X},
                     {b, strlen(b), ORDO_MODE_X},
                     {c, strlen(c), ORDO_MODE_X}};
  uint64_t t0 = tu_now_ns();
  assert_int_equal(ordo_lock_all(t, r, 3, 200), ORDO_ETIMEDOUT);
  assert_true(tu_now_ns() - t0 < tu_ms(5000) * 1000000u);
  ordo_mode_t m;
  assert_int_equal(ordo_held(t, a, strlen(a), &m), 1); /* the earlier hold */
  assert_int_equal(ordo_held(t, b, strlen(b), &m), 0);
  assert_int_equal(ordo_held(t, c, strlen(c), &m), 0);
  /* The server agrees: C is free, A is held once (a try on it fails, and
   * one unlock frees it). */
  assert_int_equal(ordo_lock(probe, c, strlen(c), ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_lock(probe, a, strlen(a), ORDO_MODE_X, 0),
                   ORDO_ETIMEDOUT);
  assert_int_equal(ordo_unlock(t, a, strlen(a)), 0);
  assert_int_equal(ordo_lock(probe, a, strlen(a), ORDO_MODE_X, 0), 0);
  ordo_txn_end(probe);
  /* With B free, the same call takes all three. */
  ordo_txn_end(holder);
  assert_int_equal(ordo_lock_all(t, r, 3, 5000), 0);
  assert_int_equal(ordo_held(t, c, strlen(c), &m), 1);
  ordo_stats_t st;
  assert_int_equal(ordo_stats(o, &st), 0);
  assert_true(st.acquired >= 5); /* summed over the shards */
  assert_true(st.timeouts >= 1);
  ordo_txn_end(t);
  ordo_close(o);
}

typedef struct {
  ordo_t *o;
  int seed;
  _Atomic long *done;
  int fails;
} worker_arg;

#define NK 6
static char wkeys[NK][32];

static void *worker(void *arg) {
  worker_arg *w = arg;
  unsigned s = (unsigned)w->seed * 2654435761u + 1;
  long n = tu_scaled(150);
  for (long i = 0; i < n; i++) {
    ordo_txn_t *t;
    if (ordo_txn_begin(w->o, &t, NULL) != 0) {
      w->fails++;
      return NULL;
    }
    ordo_req_t r[3];
    for (int j = 0; j < 3; j++) {
      s = s * 1103515245u + 12345u;
      int k = (int)((s >> 16) % NK);
      r[j] = (ordo_req_t){wkeys[k], strlen(wkeys[k]), ORDO_MODE_X};
    }
    int rc = ordo_lock_all(t, r, 3, (long)tu_ms(60000));
    if (rc != 0)
      w->fails++;
    ordo_txn_end(t);
    atomic_fetch_add(w->done, 1);
  }
  return NULL;
}

static void test_url_order(void **state) {
  (void)state;
  char url2[256];
  snprintf(url2, sizeof url2, "ordod://%s,%s,%s", names[2], names[0], names[1]);
  ordo_t *o1 = open_url(url), *o2 = open_url(url2);
  for (int i = 0; i < NK; i++)
    key_on(i % 3, "w", wkeys[i], sizeof wkeys[i]);
  /* Two keys per shard, distinct. */
  for (int i = 3; i < NK; i++) {
    char pre[8];
    snprintf(pre, sizeof pre, "v%d_", i);
    key_on(i % 3, pre, wkeys[i], sizeof wkeys[i]);
  }
  _Atomic long done = 0;
  tu_watchdog_start(o1, 60, "lock_all over shards, two URL orders");
  pthread_t th[4];
  worker_arg wa[4];
  for (int i = 0; i < 4; i++) {
    wa[i] = (worker_arg){i % 2 ? o2 : o1, i + 1, &done, 0};
    pthread_create(&th[i], NULL, worker, &wa[i]);
  }
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  tu_watchdog_stop();
  for (int i = 0; i < 4; i++)
    assert_int_equal(wa[i].fails, 0);
  assert_int_equal(atomic_load(&done), 4 * tu_scaled(150));
  ordo_close(o1);
  ordo_close(o2);
}

/* A call on a stopped shard returns by its deadline, or, for a deadline
 * under 2 s, 100 ms past it at most (ordo__od_shard_bound): the grace a
 * live shard's reply gets past the LOCK's WAIT. */
static void assert_inside(uint64_t t0, long deadline_ms) {
  uint64_t el = tu_now_ns() - t0;
  long grace = deadline_ms >= 2000 ? 0 : 100;
  if (el >= (uint64_t)(deadline_ms + grace + tu_ms(30)) * 1000000u)
    fail_msg("the call on the stopped shard took %.0f ms; its deadline was "
             "%ld ms",
             (double)el / 1e6, deadline_ms);
}

static void test_shard_stopped(void **state) {
  (void)state;
  /* timeout_ms 3000: what a one-address place would add to a LOCK's WAIT.
   * On a shard the call's deadline bounds its round trips instead
   * (ordo__od_shard_bound), so a stopped shard cannot hold a call past
   * its deadline. */
  char u[300];
  snprintf(u, sizeof u, "%s?timeout_ms=3000", url);
  ordo_t *o = open_url(u);
  int r1 = rank_of(names[0]) == 1 ? 0 : rank_of(names[1]) == 1 ? 1 : 2;
  char a[32], b[32], b2[32], b3[32], c[32];
  key_on(0, "s", a, sizeof a);
  key_on(1, "s", b, sizeof b);
  key_on(1, "s2_", b2, sizeof b2);
  key_on(1, "s3_", b3, sizeof b3);
  key_on(2, "s", c, sizeof c);
  /* t has a session on the shard ranked 1 (connected, holding nothing);
   * t2 has none there yet. */
  ordo_txn_t *t, *t2;
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0);
  assert_int_equal(ordo_txn_begin(o, &t2, NULL), 0);
  assert_int_equal(ordo_lock(t, b, strlen(b), ORDO_MODE_X, 5000), 0);
  assert_int_equal(ordo_unlock(t, b, strlen(b)), 0);
  assert_int_equal(kill(pids[r1], SIGSTOP), 0);
  /* A LOCK on the session: its reply never comes. */
  uint64_t t0 = tu_now_ns();
  assert_int_equal(ordo_lock(t, b2, strlen(b2), ORDO_MODE_X, 1000),
                   ORDO_EBACKEND);
  assert_inside(t0, 1000);
  /* A long deadline: inside it, no grace past it. */
  char b5[32];
  key_on(1, "s5_", b5, sizeof b5);
  t0 = tu_now_ns();
  assert_int_equal(ordo_lock(t, b5, strlen(b5), ORDO_MODE_X, 2500),
                   ORDO_EBACKEND);
  assert_inside(t0, 2500);
  /* A session to open: the connect's handshake never answers. */
  t0 = tu_now_ns();
  assert_int_equal(ordo_lock(t2, b2, strlen(b2), ORDO_MODE_X, 1000),
                   ORDO_EBACKEND);
  assert_inside(t0, 1000);
  /* The other shards go on. */
  t0 = tu_now_ns();
  assert_int_equal(ordo_lock(t, a, strlen(a), ORDO_MODE_X, 1000), 0);
  assert_int_equal(ordo_lock(t, c, strlen(c), ORDO_MODE_X, 1000), 0);
  assert_true(tu_now_ns() - t0 < tu_ms(1000) * 1000000u);
  /* A lock_all over two shards, one of them stopped, by a txn that holds
   * keys on the others: its LOCK there goes unanswered inside the one
   * deadline, and the stopped shard may yet make the txn a cross-shard
   * victim and have its keys elsewhere released (docs/distributed.md), so
   * the place gives every key back and says ORDO_ELEASE. */
  char a2[32];
  key_on(0, "s2_", a2, sizeof a2);
  ordo_req_t r[2] = {{a2, strlen(a2), ORDO_MODE_X},
                     {b3, strlen(b3), ORDO_MODE_X}};
  t0 = tu_now_ns();
  assert_int_equal(ordo_lock_all(t, r, 2, 1000), ORDO_ELEASE);
  assert_inside(t0, 1000);
  ordo_mode_t m;
  assert_int_equal(ordo_held(t, a2, strlen(a2), &m), 0);
  assert_int_equal(ordo_held(t, a, strlen(a), &m), 0);
  assert_int_equal(ordo_held(t, c, strlen(c), &m), 0);
  /* And a txn that held nothing before keeps its old rule: EBACKEND, and
   * what the call took on the live shard is given back. */
  ordo_txn_t *t3;
  assert_int_equal(ordo_txn_begin(o, &t3, NULL), 0);
  t0 = tu_now_ns();
  assert_int_equal(ordo_lock_all(t3, r, 2, 1000), ORDO_EBACKEND);
  assert_inside(t0, 1000);
  assert_int_equal(ordo_held(t3, a2, strlen(a2), &m), 0);
  ordo_txn_end(t3);
  assert_int_equal(kill(pids[r1], SIGCONT), 0);
  /* Back: the next call reconnects (t held nothing there, so its txn goes
   * on). A key of its own: the LOCKs the stopped shard received are
   * granted to the sessions they came on, now detached until their lease
   * ends. */
  char b4[32];
  key_on(1, "s4_", b4, sizeof b4);
  assert_int_equal(ordo_lock(t, b4, strlen(b4), ORDO_MODE_X, 5000), 0);
  assert_int_equal(ordo_unlock_all(t), 1);
  ordo_txn_end(t);
  ordo_txn_end(t2);
  ordo_close(o);
}

/* ---- A 4th server of our own, to kill -9 ----------------------------------
 */

static pid_t own_pid;
static char own_dir[64];

/* Starts ORDO_ORDOD on a free port; returns the port (0 on failure). */
static int start_own(void) {
  const char *bin = getenv("ORDO_ORDOD");
  if (!bin)
    return 0;
  strcpy(own_dir, "/tmp/ordo_shards_XXXXXX");
  if (!mkdtemp(own_dir))
    return 0;
  char data[96];
  snprintf(data, sizeof data, "%s/data", own_dir);
  int pfd[2];
  if (pipe(pfd) != 0)
    return 0;
  own_pid = fork();
  if (own_pid == 0) {
    dup2(pfd[1], 1);
    int dn = open("/dev/null", O_WRONLY);
    dup2(dn, 2);
    close(pfd[0]);
    execl(bin, bin, "--port", "0", "--dir", data, "--lease-ms", "1000",
          "--verbose", "0", (char *)NULL);
    _exit(127);
  }
  close(pfd[1]);
  FILE *f = fdopen(pfd[0], "r");
  int port = 0;
  char line[64];
  /* ordod prints "ready port=N" once it listens (bounded by the ctest
   * timeout: a server that never prints fails the test there). */
  if (f && fgets(line, sizeof line, f))
    sscanf(line, "ready port=%d", &port);
  if (f)
    fclose(f);
  return port;
}

static _Atomic int lost_calls;
static ordo_txn_t *_Atomic lost_txn;

static void on_lost(ordo_txn_t *t, void *arg) {
  (void)arg;
  atomic_store(&lost_txn, t);
  atomic_fetch_add(&lost_calls, 1);
}

static void test_shard_killed(void **state) {
  (void)state;
  int port = start_own();
  assert_true(port > 0);
  char u[300], own[32];
  snprintf(own, sizeof own, "127.0.0.1:%d", port);
  snprintf(u, sizeof u, "ordod://%s,%s?timeout_ms=300", names[0], own);
  ordo_t *o = open_url(u);
  ordo_on_lease_lost(o, on_lost, NULL);
  const char *two[2] = {names[0], own};
  char ka[32] = "", kx[32] = "", kx2[32] = "";
  for (int n = 0; !ka[0] || !kx[0] || !kx2[0]; n++) {
    char k[32];
    int len = snprintf(k, sizeof k, "d%d", n);
    size_t s = ordo__shard_place(two, 2, k, (size_t)len);
    if (s == 0 && !ka[0])
      strcpy(ka, k);
    else if (s == 1 && !kx[0])
      strcpy(kx, k);
    else if (s == 1 && !kx2[0])
      strcpy(kx2, k);
  }
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0);
  assert_int_equal(ordo_lock(t, ka, strlen(ka), ORDO_MODE_X, 5000), 0);
  assert_int_equal(ordo_lock(t, kx, strlen(kx), ORDO_MODE_X, 5000), 0);
  assert_int_equal(kill(own_pid, SIGKILL), 0);
  assert_int_equal(waitpid(own_pid, NULL, 0), own_pid);
  /* The renewal of the killed shard's session fails: one callback, with
   * the sharded txn (bounded wait: the lease is 1 s). */
  uint64_t end = tu_now_ns() + tu_ms(10000) * 1000000u;
  while (atomic_load(&lost_calls) == 0 && tu_now_ns() < end)
    tu_sleep_us(10000);
  assert_int_equal(atomic_load(&lost_calls), 1);
  assert_ptr_equal(atomic_load(&lost_txn), t);
  /* Calls on its keys: EBACKEND (or the lost lease, once) within bounds. */
  uint64_t t0 = tu_now_ns();
  int rc = ordo_lock(t, kx2, strlen(kx2), ORDO_MODE_X, 200);
  if (rc == ORDO_ELEASE)
    rc = ordo_lock(t, kx2, strlen(kx2), ORDO_MODE_X, 200);
  assert_int_equal(rc, ORDO_EBACKEND);
  assert_true(tu_now_ns() - t0 < tu_ms(2000) * 1000000u);
  /* The live shard goes on: the txn still holds ka there. */
  ordo_mode_t m;
  assert_int_equal(ordo_held(t, ka, strlen(ka), &m), 1);
  assert_int_equal(ordo_unlock(t, ka, strlen(ka)), 0);
  assert_int_equal(ordo_lock(t, ka, strlen(ka), ORDO_MODE_X, 200), 0);
  ordo_stats_t st;
  assert_int_equal(ordo_stats(o, &st), ORDO_EBACKEND); /* one shard is gone */
  assert_true(st.acquired >= 1);                       /* the other's sums */
  ordo_txn_end(t);
  ordo_close(o);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", own_dir);
  assert_int_equal(system(cmd), 0);
}

/* A deadlock inside one shard (two txns, one key at a time): the victim's
 * -DEADLOCK released everything it held there, and the sharded place lets
 * go of what it held on the others too, as one ordod's victim holds
 * nothing. */
static void test_victim_holds_nothing(void **state) {
  (void)state;
  ordo_t *o = open_url(url);
  char x[32], y[32], za[32], zb[32];
  key_on(0, "dx", x, sizeof x);
  key_on(0, "dy", y, sizeof y);
  key_on(1, "dza", za, sizeof za);
  key_on(2, "dzb", zb, sizeof zb);
  ordo_txn_t *a, *b;
  assert_int_equal(ordo_txn_begin(o, &a, NULL), 0);
  assert_int_equal(ordo_txn_begin(o, &b, NULL), 0);
  assert_int_equal(ordo_lock(a, za, strlen(za), ORDO_MODE_X, 5000), 0);
  assert_int_equal(ordo_lock(b, zb, strlen(zb), ORDO_MODE_X, 5000), 0);
  assert_int_equal(ordo_lock(a, x, strlen(x), ORDO_MODE_X, 5000), 0);
  assert_int_equal(ordo_lock(b, y, strlen(y), ORDO_MODE_X, 5000), 0);
  tu_locker w = {.t = a,
                 .reqs = {{y, strlen(y), ORDO_MODE_X}},
                 .n = 1,
                 .timeout_ms = (long)tu_ms(20000)};
  tu_locker_start(&w);
  assert_true(tu_wait_waiting(o, 1));
  int rb = ordo_lock(b, x, strlen(x), ORDO_MODE_X, (long)tu_ms(20000));
  int ra = tu_locker_join(&w);
  /* Exactly one victim; the other gets its key. */
  assert_true((ra == ORDO_EDEADLK) != (rb == ORDO_EDEADLK));
  assert_true(ra == 0 || rb == 0);
  ordo_txn_t *victim = ra == ORDO_EDEADLK ? a : b;
  const char *other_z = victim == a ? za : zb;
  assert_int_equal(ordo_held(victim, other_z, strlen(other_z), NULL), 0);
  assert_true(ordo_txn_aborts(victim) == 1);
  ordo_txn_t *p;
  assert_int_equal(ordo_txn_begin(o, &p, NULL), 0);
  assert_int_equal(ordo_lock(p, other_z, strlen(other_z), ORDO_MODE_X, 0), 0);
  ordo_txn_end(p);
  ordo_txn_end(a);
  ordo_txn_end(b);
  ordo_close(o);
}

static void test_graph(void **state) {
  (void)state;
  ordo_t *o = open_url(url);
  char path[] = "/tmp/ordo_shards_graph_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(ordo_graph_dump(o, fd, ORDO_GRAPH_JSON), 0);
  assert_int_equal(ordo_graph_dump(o, fd, ORDO_GRAPH_DOT), 0);
  char buf[8192];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  assert_true(n > 0);
  buf[n] = 0;
  close(fd);
  unlink(path);
  assert_non_null(strstr(buf, "{\"shards\":[{\"shard\":\""));
  for (int i = 0; i < 3; i++) {
    char c[64];
    snprintf(c, sizeof c, "// shard %s\n", sorted[i]);
    assert_non_null(strstr(buf, c));
  }
  /* The dump: the shards in shard order, each with its own dump. */
  strcpy(path, "/tmp/ordo_shards_graph_XXXXXX");
  fd = mkstemp(path);
  assert_true(fd >= 0);
  ordo_dump(o, fd);
  n = pread(fd, buf, sizeof buf - 1, 0);
  assert_true(n > 0);
  buf[n] = 0;
  close(fd);
  unlink(path);
  assert_non_null(strstr(buf, "3 shards, in shard order"));
  const char *at = buf;
  for (int i = 0; i < 3; i++) {
    char c[64];
    snprintf(c, sizeof c, "-- shard %d: %s\n", i, sorted[i]);
    at = strstr(at, c);
    assert_non_null(at);
  }
  ordo_close(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gid_and_heldat),
      cmocka_unit_test(test_all_or_nothing),
      cmocka_unit_test(test_url_order),
      cmocka_unit_test(test_shard_stopped),
      cmocka_unit_test(test_shard_killed),
      cmocka_unit_test(test_victim_holds_nothing),
      cmocka_unit_test(test_graph),
  };
  return tu_exit(cmocka_run_group_tests(tests, setup, NULL));
}
