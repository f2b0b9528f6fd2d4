/*
 * etcd.c -- the etcd:// row (see README.md): one client's lock_all of 16
 * keys and unlock_all on etcd:// (src/backend/etcd.c: one Txn, then one Txn
 * of deletes), against 16 per-key locks taken the way etcd's own
 * concurrency.Mutex takes them, written here as redlock.c writes its
 * sequential peer: for each key in order, one Txn that puts
 * "key/<lease>" with the session's lease if absent and reads the prefix's
 * first holder by create revision (its owner: this client, uncontended, so
 * no watch of a predecessor follows), then at unlock a delete of each.
 * Both sides talk to etcd's JSON gateway with libcurl and json-c, on one
 * etcd member started by the setup (a free loopback port, its data dir on
 * /dev/shm, heartbeat 50 ms).
 *
 * The result is the run's median sample in microseconds (metric "us p50",
 * lower is better; the ratio is peer / ordo).
 *
 * Interface: bench_etcd_table.
 */
#include "bench.h"
#include "servers.h"

#include <ordo.h>

#include <curl/curl.h>
#include <json-c/json.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct et_state {
  pid_t pid;
  int port;
  char dir[64];
} et_state;

typedef struct et_body {
  char *d;
  size_t n;
} et_body;

static size_t et_take(char *d, size_t sz, size_t nm, void *arg) {
  et_body *b = arg;
  char *nd = realloc(b->d, b->n + sz * nm + 1);
  if (!nd)
    return 0;
  memcpy(nd + b->n, d, sz * nm);
  b->d = nd;
  b->n += sz * nm;
  b->d[b->n] = 0;
  return sz * nm;
}

/* POSTs body to the member's path: the parsed answer, or NULL. */
static json_object *et_post(CURL *c, int port, const char *path,
                            const char *body) {
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
  et_body b = {0};
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, et_take);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  json_object *j = NULL;
  if (curl_easy_perform(c) == CURLE_OK && b.d)
    j = json_tokener_parse(b.d);
  free(b.d);
  if (j && json_object_object_get_ex(j, "error", NULL)) {
    json_object_put(j);
    j = NULL;
  }
  return j;
}

static void et_teardown(const bench_row_t *row, void *state) {
  (void)row;
  et_state *s = state;
  if (!s)
    return;
  if (s->pid > 0) {
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
  }
  bench_rm_tree(s->dir);
  free(s);
}

/* Starts one etcd member and waits (10 s at most) until it grants a
 * lease. */
static int et_setup(const bench_row_t *row, void **state) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  et_state *s = calloc(1, sizeof *s);
  if (!s) {
    bench_error(row, "out of memory");
    return -1;
  }
  snprintf(s->dir, sizeof s->dir, "/dev/shm/ordo-bench-etcd.XXXXXX");
  if (!mkdtemp(s->dir)) {
    snprintf(s->dir, sizeof s->dir, "/tmp/ordo-bench-etcd.XXXXXX");
    if (!mkdtemp(s->dir)) {
      s->dir[0] = 0;
      bench_error(row, "mkdtemp failed");
      et_teardown(row, s);
      return -1;
    }
  }
  s->port = bench_free_port();
  int peer = bench_free_port();
  char data[96], curls[64], purls[64], cluster[96], log[96];
  snprintf(data, sizeof data, "%s/data", s->dir);
  snprintf(log, sizeof log, "%s/log", s->dir);
  snprintf(curls, sizeof curls, "http://127.0.0.1:%d", s->port);
  snprintf(purls, sizeof purls, "http://127.0.0.1:%d", peer);
  snprintf(cluster, sizeof cluster, "b=%s", purls);
  s->pid = fork();
  if (s->pid == 0) {
    FILE *f = freopen(log, "w", stdout);
    if (f)
      dup2(fileno(f), 2);
    execlp("etcd", "etcd", "--name", "b", "--data-dir", data,
           "--listen-client-urls", curls, "--advertise-client-urls", curls,
           "--listen-peer-urls", purls, "--initial-advertise-peer-urls", purls,
           "--initial-cluster", cluster, "--heartbeat-interval", "50",
           "--election-timeout", "500", (char *)NULL);
    _exit(127);
  }
  CURL *c = curl_easy_init();
  double end = bench_now() + 10;
  json_object *j = NULL;
  while (c && !j && bench_now() < end) {
    j = et_post(c, s->port, "/v3/lease/grant", "{\"TTL\":5}");
    if (!j)
      bench_sleep(0.05);
  }
  if (c)
    curl_easy_cleanup(c);
  if (!j) {
    bench_error(row, "etcd did not answer on port %d within 10 s (%s)", s->port,
                log);
    et_teardown(row, s);
    return -1;
  }
  json_object_put(j);
  *state = s;
  return 0;
}

static int et_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Records the samples' median as *out and the p99 as an extra. */
static int et_report(const bench_row_t *row, double *us, size_t n,
                     double elapsed, double *out) {
  if (n == 0) {
    bench_error(row, "no sample");
    return -1;
  }
  qsort(us, n, sizeof *us, et_cmp);
  *out = us[n / 2];
  bench_extra(row, "p99_us", us[(size_t)((double)(n - 1) * 0.99)]);
  bench_extra(row, "ops_per_s", (double)n / elapsed);
  return 0;
}

static int et_run_ordo(const bench_row_t *row, void *state, double seconds,
                       double *out) {
  et_state *s = state;
  int k = (int)bench_param_int(row, "keys_per_lock");
  char url[128];
  snprintf(url, sizeof url, "etcd://127.0.0.1:%d?lease_ms=5000", s->port);
  ordo_t *o;
  ordo_txn_t *t;
  int rc = ordo_open(&o, url, NULL);
  if (rc) {
    bench_error(row, "ordo_open(%s): %s", url, ordo_err_name(rc));
    return -1;
  }
  if ((rc = ordo_txn_begin(o, &t, NULL)) != 0) {
    bench_error(row, "ordo_txn_begin: %s", ordo_err_name(rc));
    ordo_close(o);
    return -1;
  }
  char names[16][16];
  ordo_req_t r[16];
  size_t cap = 1 << 16, n = 0;
  double *us = malloc(cap * sizeof *us);
  double start = bench_now(), stop = start + seconds;
  unsigned round = 0;
  while (us && bench_now() < stop && n < cap) {
    round++;
    for (int i = 0; i < k; i++) {
      snprintf(names[i], sizeof names[i], "b%u.%02d", round % 64, i);
      r[i] = (ordo_req_t){names[i], strlen(names[i]), ORDO_MODE_X};
    }
    double t0 = bench_now();
    rc = ordo_lock_all(t, r, (size_t)k, 5000);
    if (rc == 0)
      rc = ordo_unlock_all(t) == k ? 0 : ORDO_EBACKEND;
    if (rc) {
      bench_error(row, "ordo lock_all/unlock_all: %s", ordo_err_name(rc));
      break;
    }
    us[n++] = (bench_now() - t0) * 1e6;
  }
  double elapsed = bench_now() - start;
  ordo_txn_end(t);
  ordo_close(o);
  int ret = rc ? -1 : et_report(row, us, n, elapsed, out);
  free(us);
  return ret;
}

/* The peer's key of name under the session's lease: "name/<lease hex>",
 * as concurrency.Mutex names its waiters. */
static char *et_b64(const char *s, size_t n) {
  char *o = malloc(4 * ((n + 2) / 3) + 1);
  if (o)
    EVP_EncodeBlock((unsigned char *)o, (const unsigned char *)s, (int)n);
  return o;
}

/* One Mutex.Lock, uncontended: the Txn "if create_revision(myKey) == 0
 * then put myKey with the lease, and range the prefix's first key by
 * create revision", and a check that the owner is this client. */
static int et_mutex_lock(CURL *c, int port, const char *pfx, long long lease) {
  char my[96], end[96];
  snprintf(my, sizeof my, "%.40s/%llx", pfx, lease);
  snprintf(end, sizeof end, "%.40s0", pfx); /* the end of "pfx/" */
  char *bk = et_b64(my, strlen(my)), *bv = et_b64("", 0);
  char pre[100];
  snprintf(pre, sizeof pre, "%.40s/", pfx);
  char *bp = et_b64(pre, strlen(pre)), *be = et_b64(end, strlen(end));
  char body[1024];
  snprintf(body, sizeof body,
           "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":"
           "\"EQUAL\",\"create_revision\":0}],\"success\":[{\"request_put\":{"
           "\"key\":\"%s\",\"value\":\"%s\",\"lease\":%lld}},{\"request_range\""
           ":{\"key\":\"%s\",\"range_end\":\"%s\",\"sort_order\":\"ASCEND\","
           "\"sort_target\":\"CREATE\",\"limit\":1}}],\"failure\":[{\"request_"
           "range\":{\"key\":\"%s\"}}]}",
           bk, bk, bv, lease, bp, be, bk);
  free(bk);
  free(bv);
  free(bp);
  free(be);
  json_object *j = et_post(c, port, "/v3/kv/txn", body);
  if (!j)
    return -1;
  /* The owner (the first key by create revision) must be myKey. */
  json_object *resps, *rr, *kvs, *x;
  int ok = json_object_object_get_ex(j, "succeeded", &x) &&
           json_object_get_boolean(x) &&
           json_object_object_get_ex(j, "responses", &resps) &&
           json_object_array_length(resps) == 2 &&
           json_object_object_get_ex(json_object_array_get_idx(resps, 1),
                                     "response_range", &rr) &&
           json_object_object_get_ex(rr, "kvs", &kvs) &&
           json_object_array_length(kvs) == 1;
  json_object_put(j);
  return ok ? 0 : -1;
}

static int et_mutex_unlock(CURL *c, int port, const char *pfx,
                           long long lease) {
  char my[96];
  snprintf(my, sizeof my, "%.40s/%llx", pfx, lease);
  char *bk = et_b64(my, strlen(my));
  char body[256];
  snprintf(body, sizeof body, "{\"key\":\"%s\"}", bk);
  free(bk);
  json_object *j = et_post(c, port, "/v3/kv/deleterange", body);
  if (!j)
    return -1;
  json_object_put(j);
  return 0;
}

static int et_run_peer(const bench_row_t *row, void *state, double seconds,
                       double *out) {
  et_state *s = state;
  int k = (int)bench_param_int(row, "keys_per_lock");
  CURL *c = curl_easy_init();
  json_object *g =
      c ? et_post(c, s->port, "/v3/lease/grant", "{\"TTL\":60}") : NULL;
  json_object *id;
  if (!g || !json_object_object_get_ex(g, "ID", &id)) {
    bench_error(row, "the peer's session lease was not granted");
    json_object_put(g);
    if (c)
      curl_easy_cleanup(c);
    return -1;
  }
  long long lease = (long long)json_object_get_int64(id);
  json_object_put(g);
  size_t cap = 1 << 16, n = 0;
  double *us = malloc(cap * sizeof *us);
  double start = bench_now(), stop = start + seconds;
  unsigned round = 0;
  int rc = 0;
  char pfx[16][32];
  while (us && bench_now() < stop && n < cap && !rc) {
    round++;
    for (int i = 0; i < k; i++)
      snprintf(pfx[i], sizeof pfx[i], "m/b%u.%02d", round % 64, i);
    double t0 = bench_now();
    for (int i = 0; i < k && !rc; i++)
      rc = et_mutex_lock(c, s->port, pfx[i], lease);
    for (int i = 0; i < k && !rc; i++)
      rc = et_mutex_unlock(c, s->port, pfx[i], lease);
    if (rc)
      bench_error(row, "the Mutex peer failed on round %u", round);
    else
      us[n++] = (bench_now() - t0) * 1e6;
  }
  double elapsed = bench_now() - start;
  char body[64];
  snprintf(body, sizeof body, "{\"ID\":%lld}", lease);
  json_object_put(et_post(c, s->port, "/v3/lease/revoke", body));
  curl_easy_cleanup(c);
  int ret = rc ? -1 : et_report(row, us, n, elapsed, out);
  free(us);
  return ret;
}

static const bench_row_t etcd_rows[] = {
    {
        .id = "etcd_lock16",
        .title = "etcd:// on 1 member, lock_all+unlock_all of 16 keys",
        .metric = "us p50",
        .higher_is_better = 0,
        .peer_name = "16 concurrency.Mutex locks, key by key",
        .target = 3.0,
        .params = {{"keys_per_lock", 16, NULL}},
        .setup = et_setup,
        .teardown = et_teardown,
        .run_ordo = et_run_ordo,
        .run_peer = et_run_peer,
        .extras = {"p99_us", "ops_per_s"},
    },
};

const bench_table_t bench_etcd_table = {etcd_rows,
                                        sizeof etcd_rows / sizeof etcd_rows[0]};
