/*
 * test_order.c -- the lock-order checker (src/detect/README.md, "The
 * lock-order checker"): inversions of two and three classes reported with
 * every edge's site, lock_all batches and same-class keys left alone,
 * consistent orders never reported (from several threads), refuse mode,
 * one report per inversion, rank inversions, classes by separator, reentrant
 * holds, the asynchronous form, the log line, and off by default. Every case
 * opens its own place and runs under a watchdog.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"

#include <string.h>

/* ---- Fixture: a place and the reports its callback received ------------ */

#define MAX_REPORTS 16
static ordo_t *O;
static pthread_mutex_t rep_mu = PTHREAD_MUTEX_INITIALIZER;
static ordo_order_report_t rep[MAX_REPORTS];
static int nrep; /* reports received, under rep_mu */
/* Reports that went to the log instead (no callback set), as counted from
 * the log's own lines by the case that read them. */
static int nlogged;

static void on_order(const ordo_order_report_t *r, void *arg) {
  assert_ptr_equal(arg, &nrep);
  pthread_mutex_lock(&rep_mu);
  if (nrep < MAX_REPORTS)
    rep[nrep] = *r;
  nrep++;
  pthread_mutex_unlock(&rep_mu);
}

static int reports(void) {
  pthread_mutex_lock(&rep_mu);
  int n = nrep;
  pthread_mutex_unlock(&rep_mu);
  return n;
}

static uint64_t stat_reports(void) {
  ordo_stats_t s;
  assert_int_equal(ordo_stats(O, &s), 0);
  return s.order_reports;
}

/* Opens O with the checker in mode (sep as given) and the callback. */
static void open_place(ordo_order_mode_t mode, char sep) {
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.stripes = 8;
  opts.order = mode;
  opts.order_sep = sep;
  assert_int_equal(ordo_open(&O, "mem://", &opts), 0);
  ordo_on_order(O, on_order, &nrep);
  nrep = 0;
  nlogged = 0;
  tu_watchdog_start(O, 20, "test_order case");
}

static int setup_warn(void **state) {
  (void)state;
  open_place(ORDO_ORDER_WARN, ':');
  return 0;
}

static int setup_refuse(void **state) {
  (void)state;
  open_place(ORDO_ORDER_REFUSE, ':');
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tu_watchdog_stop();
  /* Every report was counted, and no more: each one the callback saw, and
   * each one a case found in the log. */
  assert_int_equal(stat_reports(), (uint64_t)(reports() + nlogged));
  ordo_close(O);
  O = NULL;
  return 0;
}

static ordo_txn_t *txn(void) {
  ordo_txn_t *t = NULL;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  return t;
}

/* Takes key X at once, from this line of the test (*line gets it). */
#define LOCK_HERE(t, key, line)                                                \
  (*(line) = __LINE__, ORDO_LOCK((t), (key), strlen(key), ORDO_MODE_X, 0))

static void plain_lock(ordo_txn_t *t, const char *key) {
  assert_int_equal(ordo_lock(t, key, strlen(key), ORDO_MODE_X, 0), 0);
}

/* Holds first, then asks second, in a txn of its own. */
static void in_order(const char *first, const char *second) {
  ordo_txn_t *t = txn();
  plain_lock(t, first);
  plain_lock(t, second);
  ordo_txn_end(t);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void assert_edge(const ordo_order_edge_t *e, const char *from,
                        const char *to, int line) {
  assert_string_equal(e->from, from);
  assert_string_equal(e->to, to);
  assert_non_null(e->file);
  assert_true(ends_with(e->file, "test_order.c"));
  assert_int_equal(e->line, line);
}

/* ---- Cases -------------------------------------------------------------- */

/* acct then user in one txn, later user then acct in another: reported
 * with both sites, and the second lock is still taken (warn). */
static void test_two_classes(void **state) {
  (void)state;
  int l1, l2, l3, l4;
  ordo_txn_t *a = txn();
  assert_int_equal(LOCK_HERE(a, "acct:1", &l1), 0);
  assert_int_equal(LOCK_HERE(a, "user:1", &l2), 0);
  ordo_txn_end(a);
  assert_int_equal(reports(), 0);

  ordo_txn_t *b = txn();
  assert_int_equal(LOCK_HERE(b, "user:2", &l3), 0);
  assert_int_equal(LOCK_HERE(b, "acct:2", &l4), 0);
  assert_int_equal(reports(), 1);
  const ordo_order_report_t *r = &rep[0];
  assert_int_equal(r->nedges, 2);
  assert_int_equal(r->rank_inversion, 0);
  assert_int_equal(r->txn, ordo_txn_id(b));
  assert_edge(&r->edge[0], "acct", "user", l2); /* where it was first seen */
  assert_edge(&r->edge[1], "user", "acct", l4); /* the new edge, last */
  assert_int_equal(ordo_held(b, "acct:2", 6, NULL), 1);
  assert_int_equal(stat_reports(), 1);
  (void)l1;
  (void)l3;
  ordo_txn_end(b);
}

/* One txn, at different times: the same inversion. */
static void test_two_classes_one_txn(void **state) {
  (void)state;
  ordo_txn_t *t = txn();
  in_order("acct:1", "user:1");
  plain_lock(t, "user:7");
  plain_lock(t, "acct:7");
  assert_int_equal(reports(), 1);
  /* The plain calls pass no site. */
  assert_string_equal(rep[0].edge[0].file, "?");
  assert_int_equal(rep[0].edge[0].line, 0);
  ordo_txn_end(t);
}

/* a -> b, b -> c, then c -> a closes a cycle of three edges. */
static void test_three_classes(void **state) {
  (void)state;
  int lab, lbc, lca, unused;
  ordo_txn_t *t = txn();
  assert_int_equal(LOCK_HERE(t, "a:1", &unused), 0);
  assert_int_equal(LOCK_HERE(t, "b:1", &lab), 0);
  assert_int_equal(ordo_unlock_all(t), 2);
  assert_int_equal(LOCK_HERE(t, "b:1", &unused), 0);
  assert_int_equal(LOCK_HERE(t, "c:1", &lbc), 0);
  assert_int_equal(ordo_unlock_all(t), 2);
  assert_int_equal(reports(), 0);
  assert_int_equal(LOCK_HERE(t, "c:1", &unused), 0);
  assert_int_equal(LOCK_HERE(t, "a:1", &lca), 0);
  assert_int_equal(reports(), 1);
  assert_int_equal(rep[0].nedges, 3);
  assert_edge(&rep[0].edge[0], "a", "b", lab);
  assert_edge(&rep[0].edge[1], "b", "c", lbc);
  assert_edge(&rep[0].edge[2], "c", "a", lca);
  ordo_txn_end(t);
}

/* Keys taken together add no edges among themselves, in any order. */
static void test_lock_all_batches(void **state) {
  (void)state;
  ordo_txn_t *t = txn();
  ordo_req_t ab[2] = {ORDO_REQ_X("a:1", 3), ORDO_REQ_X("b:1", 3)};
  ordo_req_t ba[2] = {ORDO_REQ_X("b:2", 3), ORDO_REQ_X("a:2", 3)};
  assert_int_equal(ORDO_LOCK_ALL(t, ab, 2, 0), 0);
  assert_int_equal(ordo_unlock_all(t), 2);
  assert_int_equal(ORDO_LOCK_ALL(t, ba, 2, 0), 0);
  assert_int_equal(ordo_unlock_all(t), 2);
  /* Nor do two batches in a row when both hold the same classes: only the
   * classes held before a call lead to the ones it asks. */
  assert_int_equal(ordo_lock_all(t, ab, 2, 0), 0);
  ordo_txn_end(t);
  assert_int_equal(reports(), 0);
  assert_int_equal(stat_reports(), 0);
}

/* Keys of one class taken one at a time, in either order: no edge. */
static void test_same_class(void **state) {
  (void)state;
  in_order("acct:1", "acct:2");
  in_order("acct:2", "acct:1");
  assert_int_equal(reports(), 0);
}

/* "acct:1" and "acct:2" are one class: the inversion is seen across keys;
 * a key without the separator is its own class. */
static void test_class_by_separator(void **state) {
  (void)state;
  in_order("acct:1", "user:1");
  in_order("user:9", "acct:7");
  assert_int_equal(reports(), 1);
  assert_string_equal(rep[0].edge[0].from, "acct");
  assert_string_equal(rep[0].edge[1].from, "user");
  in_order("alpha", "beta");
  in_order("beta", "alpha");
  assert_int_equal(reports(), 2);
  assert_string_equal(rep[1].edge[0].from, "alpha");
  assert_string_equal(rep[1].edge[0].to, "beta");
}

/* Another separator, given in the URL's query (with order=warn). */
static void test_separator_option(void **state) {
  (void)state;
  ordo_close(O);
  assert_int_equal(ordo_open(&O, "mem://?order=warn&order_sep=/", NULL), 0);
  ordo_on_order(O, on_order, &nrep);
  tu_wd.o = O;
  in_order("acct/1", "user/1");
  in_order("user/2", "acct/2");
  in_order("x:1", "y:1"); /* ':' is an ordinary byte now */
  in_order("x:2", "x:1");
  assert_int_equal(reports(), 1);
  assert_string_equal(rep[0].edge[0].from, "acct");
  assert_string_equal(rep[0].edge[0].to, "user");
}

/* Binary class names are written printable. */
static void test_binary_class_name(void **state) {
  (void)state;
  in_order("\x01q:1", "r\\:1");
  in_order("r\\:2", "\x01q:2");
  assert_int_equal(reports(), 1);
  assert_string_equal(rep[0].edge[0].from, "\\x01q");
  assert_string_equal(rep[0].edge[0].to, "r\\x5c");
}

/* A consistent order, many times, from several threads: never reported. */
#define THREADS 4
static void *consistent_main(void *arg) {
  long id = (long)arg;
  long n = tu_scaled(300);
  ordo_txn_t *t = txn();
  for (long i = 0; i < n; i++) {
    char a[32], u[32], s[32];
    snprintf(a, sizeof a, "acct:%ld", (id * 7 + i) % 16);
    snprintf(u, sizeof u, "user:%ld", (id * 3 + i) % 16);
    snprintf(s, sizeof s, "sess:%ld", i % 8);
    if (ORDO_LOCK(t, a, strlen(a), ORDO_MODE_X, ORDO_FOREVER) != 0)
      abort();
    if (i % 2 && ORDO_LOCK(t, u, strlen(u), ORDO_MODE_X, ORDO_FOREVER) != 0)
      abort();
    if (ORDO_LOCK(t, s, strlen(s), ORDO_MODE_S, ORDO_FOREVER) != 0)
      abort();
    ordo_unlock_all(t);
  }
  ordo_txn_end(t);
  return NULL;
}

static void test_consistent_order(void **state) {
  (void)state;
  pthread_t thr[THREADS];
  for (long i = 0; i < THREADS; i++)
    pthread_create(&thr[i], NULL, consistent_main, (void *)i);
  for (int i = 0; i < THREADS; i++)
    pthread_join(thr[i], NULL);
  assert_int_equal(reports(), 0);
  assert_int_equal(stat_reports(), 0);
}

/* Refuse: the call returns ORDO_EORDER and takes nothing; the edge it
 * would have added is not in the graph; it is reported once. */
static void test_refuse(void **state) {
  (void)state;
  in_order("acct:1", "user:1");
  ordo_txn_t *t = txn();
  plain_lock(t, "user:2");
  int line;
  assert_int_equal(LOCK_HERE(t, "acct:2", &line), ORDO_EORDER);
  assert_int_equal(ordo_held(t, "acct:2", 6, NULL), 0);
  ordo_txn_t *other = txn();
  plain_lock(other, "acct:2"); /* free for another txn */
  ordo_txn_end(other);
  assert_int_equal(reports(), 1);
  assert_int_equal(rep[0].nedges, 2);
  assert_int_equal(rep[0].edge[1].line, line);
  /* Again: refused again, not reported again. */
  ordo_req_t r[2] = {ORDO_REQ_X("acct:3", 6), ORDO_REQ_X("zzz:1", 5)};
  assert_int_equal(ordo_lock_all(t, r, 2, 0), ORDO_EORDER);
  assert_int_equal(ordo_held(t, "zzz:1", 5, NULL), 0);
  assert_int_equal(reports(), 1);
  /* The refused call left no edge: not user -> acct (else x -> user would
   * close x -> user -> acct -> x), nor user -> zzz (else zzz -> user would
   * close a cycle). */
  in_order("acct:1", "x:1");
  in_order("x:1", "user:1");
  in_order("zzz:1", "user:1");
  assert_int_equal(reports(), 1);
  /* t still holds user:2 only, and can go on in the right order. */
  assert_int_equal(ordo_held(t, "user:2", 6, NULL), 1);
  plain_lock(t, "w:4");
  assert_int_equal(stat_reports(), 1);
  ordo_txn_end(t);
}

/* Warn: the lock is taken and the inversion reported once, however often
 * it is repeated, by whatever txn. */
static void test_warn_once(void **state) {
  (void)state;
  in_order("acct:1", "user:1");
  for (int i = 0; i < 5; i++) {
    ordo_txn_t *t = txn();
    plain_lock(t, "user:1");
    assert_int_equal(ordo_lock(t, "acct:1", 6, ORDO_MODE_X, 0), 0);
    assert_int_equal(ordo_held(t, "acct:1", 6, NULL), 1);
    ordo_txn_end(t);
  }
  assert_int_equal(reports(), 1);
  assert_int_equal(stat_reports(), 1);
}

/* Ranked classes must be taken in increasing rank; the longest registered
 * prefix wins. */
static void test_rank_inversion(void **state) {
  (void)state;
  assert_int_equal(ordo_order_rank(O, "acct:", 5, 1), 0);
  assert_int_equal(ordo_order_rank(O, "user:", 5, 2), 0);
  assert_int_equal(ordo_order_rank(O, "acct:vip:", 9, 5), 0);
  assert_int_equal(ordo_order_rank(O, NULL, 1, 1), ORDO_EINVAL);
  assert_int_equal(ordo_order_rank(O, "x", 0, 1), ORDO_EINVAL);
  in_order("acct:1", "user:1"); /* 1 then 2: fine */
  assert_int_equal(reports(), 0);
  int line;
  ordo_txn_t *t = txn();
  plain_lock(t, "user:1");
  assert_int_equal(LOCK_HERE(t, "acct:2", &line), 0);
  assert_int_equal(reports(), 1);
  assert_int_equal(rep[0].rank_inversion, 1);
  assert_int_equal(rep[0].nedges, 1);
  assert_edge(&rep[0].edge[0], "rank:2 user:", "rank:1 acct:", line);
  ordo_txn_end(t);
  /* acct:vip:1 is of rank 5, so user after it inverts too. */
  in_order("acct:vip:1", "user:3");
  assert_int_equal(reports(), 2);
  assert_int_equal(rep[1].rank_inversion, 1);
  assert_string_equal(rep[1].edge[0].from, "rank:5 acct:vip:");
  assert_string_equal(rep[1].edge[0].to, "rank:2 user:");
  /* Equal ranks of two classes are an inversion as well. */
  assert_int_equal(ordo_order_rank(O, "sess:", 5, 2), 0);
  in_order("sess:1", "user:1");
  assert_int_equal(reports(), 3);
  assert_int_equal(rep[2].rank_inversion, 1);
}

/* A key locked twice and unlocked once keeps its class held. */
static void test_reentrant_holds(void **state) {
  (void)state;
  ordo_txn_t *t = txn();
  plain_lock(t, "acct:1");
  plain_lock(t, "acct:1");
  assert_int_equal(ordo_unlock(t, "acct:1", 6), 0);
  plain_lock(t, "user:1"); /* adds acct -> user */
  assert_int_equal(ordo_unlock(t, "user:1", 6), 0);
  assert_int_equal(ordo_unlock(t, "acct:1", 6), 0);
  plain_lock(t, "sess:1"); /* acct is no longer held: no acct -> sess */
  assert_int_equal(ordo_unlock(t, "acct:1", 6), ORDO_ENOTHELD);
  ordo_txn_end(t);
  in_order("sess:2", "acct:2");
  assert_int_equal(reports(), 0);
  in_order("user:2", "acct:2");
  assert_int_equal(reports(), 1);
  assert_string_equal(rep[0].edge[0].from, "acct");
  assert_string_equal(rep[0].edge[0].to, "user");
}

/* Two keys of one class held; unlocking one keeps the class. */
static void test_class_count(void **state) {
  (void)state;
  ordo_txn_t *t = txn();
  plain_lock(t, "acct:1");
  plain_lock(t, "acct:2");
  plain_lock(t, "sess:1");
  assert_int_equal(ordo_unlock(t, "acct:1", 6), 0);
  plain_lock(t, "user:1"); /* acct -> user and sess -> user */
  ordo_txn_end(t);
  in_order("user:2", "acct:2");
  in_order("user:2", "sess:2");
  assert_int_equal(reports(), 2);
}

/* The asynchronous form: a grant reported later through the callback is
 * counted as held, and ending a txn with a request pending is safe. */
typedef struct {
  _Atomic int done;
  int status;
} async_box;

static void async_cb(ordo_txn_t *t, int status, void *arg) {
  (void)t;
  async_box *b = arg;
  b->status = status;
  atomic_store(&b->done, 1);
}

/* Waits (bounded: 5 s, times ORDO_TEST_TIMEOUT_MULT) for b's callback. */
static bool wait_done(async_box *b) {
  uint64_t end = tu_now_ns() + tu_ms(5000) * 1000000u;
  while (!atomic_load(&b->done))
    if (tu_now_ns() > end)
      return false;
    else
      tu_sleep_us(100);
  return true;
}

static void test_async(void **state) {
  (void)state;
  ordo_txn_t *holder = txn(), *t = txn();
  plain_lock(holder, "user:1");
  ordo_req_t acct = ORDO_REQ_X("acct:1", 6), user = ORDO_REQ_X("user:1", 6);
  async_box b0 = {0, 99}, b1 = {0, 99};
  assert_int_equal(ordo_lock_all_async(t, &acct, 1, 5000, async_cb, &b0), 0);
  assert_int_equal(ordo_lock_all_async(t, &user, 1, 5000, async_cb, &b1),
                   ORDO_PENDING);
  /* In flight: the txn takes nothing else (and the checker's state of the
   * pending request is left alone). */
  assert_int_equal(ordo_lock(t, "z:1", 3, ORDO_MODE_X, 0), ORDO_EBUSY);
  assert_int_equal(ordo_unlock_all(holder), 1);
  assert_true(wait_done(&b1));
  assert_int_equal(b1.status, 0);
  assert_int_equal(atomic_load(&b0.done), 0); /* granted at once: no call */
  plain_lock(t, "x:1"); /* user (granted late) and acct -> x */
  ordo_txn_end(t);
  in_order("x:2", "user:2");
  assert_int_equal(reports(), 1);
  assert_int_equal(rep[0].nedges, 2);
  assert_string_equal(rep[0].edge[0].from, "user");
  assert_string_equal(rep[0].edge[0].to, "x");

  /* A request still pending when its txn ends: cancelled, the callback
   * runs (through the checker's wrapper) before the txn is gone. */
  plain_lock(holder, "y:1");
  t = txn();
  async_box b2 = {0, 99};
  ordo_req_t y = ORDO_REQ_X("y:1", 3);
  assert_int_equal(ordo_lock_all_async(t, &y, 1, ORDO_FOREVER, async_cb, &b2),
                   ORDO_PENDING);
  ordo_txn_end(t);
  assert_true(wait_done(&b2));
  assert_int_equal(b2.status, ORDO_ECANCELED);
  ordo_txn_end(holder);
}

/* Without a callback, a report is one line on stderr; plain calls show
 * their site as ?:0. */
static void test_log_line(void **state) {
  (void)state;
  ordo_on_order(O, NULL, NULL);
  char path[] = "/tmp/ordo_order_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  in_order("acct:1", "user:1");
  in_order("user:2", "acct:2");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char buf[512] = {0};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  assert_true(n > 0);
  assert_non_null(strstr(buf, ": acct -> user (?:0), user -> acct (?:0)\n"));
  /* The report went to the log, and only there: one line, not the callback
   * (removed above). Teardown then checks the count against that line. */
  const char *head = "ordo: lock order inversion in txn ";
  for (const char *p = strstr(buf, head); p; p = strstr(p + 1, head))
    nlogged++;
  assert_int_equal(nlogged, 1);
  assert_int_equal(reports(), 0);
  assert_int_equal(stat_reports(), 1);
}

/* Off by default: nothing is checked, counted or called back. */
static void test_off_by_default(void **state) {
  (void)state;
  assert_int_equal(ordo_open(&O, "mem://", NULL), 0);
  tu_watchdog_start(O, 20, "test_order off");
  nrep = 0;
  nlogged = 0;
  ordo_on_order(O, on_order, &nrep);
  assert_int_equal(ordo_order_rank(O, "acct:", 5, 1), 0); /* a no-op */
  in_order("acct:1", "user:1");
  in_order("user:1", "acct:1");
  assert_int_equal(reports(), 0);
  assert_int_equal(stat_reports(), 0);
  ordo_options_t opts;
  ordo_options_init(&opts);
  assert_int_equal(opts.order, ORDO_ORDER_OFF);
  assert_int_equal(opts.order_sep, ':');
}

/* Options: bad modes and URL values are refused. */
static void test_options(void **state) {
  (void)state;
  ordo_t *p = NULL;
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.order = (ordo_order_mode_t)7;
  assert_int_equal(ordo_open(&p, "mem://", &opts), ORDO_EINVAL);
  assert_int_equal(ordo_open(&p, "mem://?order=loud", NULL), ORDO_EURL);
  assert_int_equal(ordo_open(&p, "mem://?order_sep=ab", NULL), ORDO_EURL);
  assert_int_equal(ordo_open(&p, "mem://?order=refuse", NULL), 0);
  ordo_txn_t *t = NULL;
  assert_int_equal(ordo_txn_begin(p, &t, NULL), 0);
  assert_int_equal(ordo_lock(t, "a:1", 3, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_lock(t, "b:1", 3, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_unlock_all(t), 2);
  assert_int_equal(ordo_lock(t, "b:1", 3, ORDO_MODE_X, 0), 0);
  ordo_on_order(p, on_order, &nrep);
  assert_int_equal(ordo_lock(t, "a:1", 3, ORDO_MODE_X, 0), ORDO_EORDER);
  ordo_txn_end(t);
  ordo_stats_t ps;
  assert_int_equal(ordo_stats(p, &ps), 0);
  assert_int_equal(ps.order_reports, 1); /* p counted the report it made */
  ordo_close(p);
  assert_int_equal(reports(), 1);
  /* That report was p's, not O's: teardown checks O's own count (none)
   * against its callback's. */
  nrep = 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_two_classes, setup_warn, teardown),
      cmocka_unit_test_setup_teardown(test_two_classes_one_txn, setup_warn,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_three_classes, setup_warn, teardown),
      cmocka_unit_test_setup_teardown(test_lock_all_batches, setup_warn,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_same_class, setup_warn, teardown),
      cmocka_unit_test_setup_teardown(test_class_by_separator, setup_warn,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_separator_option, setup_warn,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_binary_class_name, setup_warn,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_consistent_order, setup_refuse,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_refuse, setup_refuse, teardown),
      cmocka_unit_test_setup_teardown(test_warn_once, setup_warn, teardown),
      cmocka_unit_test_setup_teardown(test_rank_inversion, setup_warn,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_reentrant_holds, setup_warn,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_class_count, setup_warn, teardown),
      cmocka_unit_test_setup_teardown(test_async, setup_warn, teardown),
      cmocka_unit_test_setup_teardown(test_log_line, setup_warn, teardown),
      cmocka_unit_test_teardown(test_off_by_default, teardown),
      cmocka_unit_test_setup_teardown(test_options, setup_warn, teardown),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
