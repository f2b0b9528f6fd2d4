/*
 * test_cover_detect.c -- the lock-order checker's paths that test_order.c
 * does not reach, found by `make coverage` (docs/coverage.md): its tables
 * growing (more than 64 classes, 512 edges, 32 reported edges), a cycle
 * longer than a report holds, more violations in one call than a call
 * reports, class names cut to fit, a re-ranked prefix, the class limit
 * (65536), and a log line longer than its buffer. Each case opens its own
 * place through the public API and asserts what the checker must say.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"

#include <fcntl.h>
#include <string.h>

/* ---- Fixture: a place with the checker, and the reports it made -------- */

#define MAX_REPORTS 64
static ordo_t *O;
static ordo_order_report_t rep[MAX_REPORTS];
static int nrep; /* reports received; the checker calls back on our thread */

static void on_order(const ordo_order_report_t *r, void *arg) {
  assert_ptr_equal(arg, &nrep);
  if (nrep < MAX_REPORTS)
    rep[nrep] = *r;
  nrep++;
}

static void open_place(ordo_order_mode_t mode) {
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.stripes = 8;
  opts.order = mode;
  assert_int_equal(ordo_open(&O, "mem://", &opts), 0);
  ordo_on_order(O, on_order, &nrep);
  nrep = 0;
  tu_watchdog_start(O, 30, "test_cover_detect case");
}

static int setup_warn(void **state) {
  (void)state;
  open_place(ORDO_ORDER_WARN);
  return 0;
}

static int setup_refuse(void **state) {
  (void)state;
  open_place(ORDO_ORDER_REFUSE);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tu_watchdog_stop();
  ordo_close(O);
  O = NULL;
  return 0;
}

static ordo_txn_t *txn(void) {
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(O, &t, NULL), 0);
  return t;
}

static void lock_key(ordo_txn_t *t, const char *k) {
  assert_int_equal(ordo_lock(t, k, strlen(k), ORDO_MODE_X, 0), 0);
}

/* Takes a then b in one txn, one at a time: the edge class(a) -> class(b). */
static void in_order(const char *a, const char *b) {
  ordo_txn_t *t = txn();
  lock_key(t, a);
  lock_key(t, b);
  ordo_txn_end(t);
}

static bool held(ordo_txn_t *t, const char *k) {
  return ordo_held(t, k, strlen(k), NULL) > 0;
}

/* ---- The tables grow ----------------------------------------------------- */

/* 30 classes held one at a time (435 edges among them), then 30 more in one
 * lock_all (900 edges from each held class to each new one): the edge table
 * grows past its 512 slots in one call, and the class hash past its 64
 * buckets. The order is consistent, so nothing is reported; the edges made
 * before the growth are still found after it: the inverse of one of them is
 * reported as a cycle of two. */
static void test_tables_grow(void **state) {
  (void)state;
  ordo_txn_t *t = txn();
  char k[32];
  for (int i = 0; i < 30; i++) {
    snprintf(k, sizeof k, "a%02d:1", i);
    lock_key(t, k);
  }
  uint8_t keys[30][8];
  ordo_req_t reqs[30];
  for (int i = 0; i < 30; i++) {
    snprintf((char *)keys[i], sizeof keys[i], "b%02d:1", i);
    reqs[i] = (ordo_req_t){keys[i], strlen((char *)keys[i]), ORDO_MODE_X};
  }
  assert_int_equal(ordo_lock_all(t, reqs, 30, 0), 0);
  assert_int_equal(nrep, 0);
  assert_true(held(t, "a00:1") && held(t, "b29:1"));
  ordo_txn_end(t);

  in_order("b05:2", "a03:2");
  assert_int_equal(nrep, 1);
  assert_int_equal(rep[0].nedges, 2);
  assert_string_equal(rep[0].edge[0].from, "a03");
  assert_string_equal(rep[0].edge[0].to, "b05");
  assert_string_equal(rep[0].edge[1].from, "b05");
  assert_string_equal(rep[0].edge[1].to, "a03");
}

/* 40 inversions, each reported once: the set of reported edges grows past
 * its 32 entries, and a repeat of an early one after the growth is still
 * known (no second report). */
static void test_reported_set_grows(void **state) {
  (void)state;
  char a[16], b[16];
  for (int i = 0; i < 40; i++) {
    snprintf(a, sizeof a, "x%d:1", i);
    snprintf(b, sizeof b, "y%d:1", i);
    in_order(a, b);
    in_order(b, a);
    assert_int_equal(nrep, i + 1);
  }
  in_order("y0:2", "x0:2");
  in_order("y39:2", "x39:2");
  assert_int_equal(nrep, 40);
  ordo_stats_t s;
  assert_int_equal(ordo_stats(O, &s), 0);
  assert_int_equal(s.order_reports, 40);
}

/* The txn holds r0..r5 (one lock_all: no edges among them), each q_i was
 * taken before r_i, and the txn now asks q0..q5 in one lock_all: every
 * r_i -> q_i closes a cycle. A call reports four (its limit). */
static ordo_txn_t *six_inversions(int *rc) {
  char a[16], b[16];
  for (int i = 0; i < 6; i++) {
    snprintf(a, sizeof a, "q%d:1", i);
    snprintf(b, sizeof b, "r%d:1", i);
    in_order(a, b);
  }
  uint8_t rk[6][8], qk[6][8];
  ordo_req_t rr[6], qr[6];
  for (int i = 0; i < 6; i++) {
    snprintf((char *)rk[i], sizeof rk[i], "r%d:2", i);
    snprintf((char *)qk[i], sizeof qk[i], "q%d:2", i);
    rr[i] = (ordo_req_t){rk[i], 4, ORDO_MODE_X};
    qr[i] = (ordo_req_t){qk[i], 4, ORDO_MODE_X};
  }
  ordo_txn_t *t = txn();
  assert_int_equal(ordo_lock_all(t, rr, 6, 0), 0);
  *rc = ordo_lock_all(t, qr, 6, 0);
  return t;
}

/* In warn mode the call goes on: four reports, every key granted. */
static void test_reports_per_call(void **state) {
  (void)state;
  int rc;
  ordo_txn_t *t = six_inversions(&rc);
  assert_int_equal(rc, 0);
  assert_int_equal(nrep, 4);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(rep[i].txn, ordo_txn_id(t));
    assert_int_equal(rep[i].edge[rep[i].nedges - 1].from[0], 'r');
    assert_int_equal(rep[i].edge[rep[i].nedges - 1].to[0], 'q');
  }
  assert_true(held(t, "q0:2") && held(t, "q5:2"));
  ordo_txn_end(t);
}

/* In refuse mode the call is refused whole: ORDO_EORDER, nothing of it
 * held, no edge of it left. Its first report is r0 -> q0, a cycle of two;
 * the later ones close longer cycles through the edges the call itself had
 * added (r0 -> q1, ...) before it was refused. r4 -> q4 is among those left
 * out: the next acquisition that repeats it reports it, and one already
 * reported (r0 -> q0) is refused again without a second report. */
static void test_reports_per_call_refused(void **state) {
  (void)state;
  int rc;
  ordo_txn_t *t = six_inversions(&rc);
  assert_int_equal(rc, ORDO_EORDER);
  assert_int_equal(nrep, 4);
  assert_int_equal(rep[0].nedges, 2);
  assert_string_equal(rep[0].edge[1].from, "r0");
  assert_string_equal(rep[0].edge[1].to, "q0");
  for (int i = 0; i < 4; i++) {
    const ordo_order_edge_t *last = &rep[i].edge[rep[i].nedges - 1];
    assert_true(last->from[0] == 'r' && last->to[0] == 'q');
    assert_false(strcmp(last->from, "r4") == 0 && strcmp(last->to, "q4") == 0);
  }
  assert_false(held(t, "q0:2"));
  assert_false(held(t, "q5:2"));
  assert_true(held(t, "r0:2"));
  ordo_txn_end(t);

  t = txn();
  lock_key(t, "r4:3");
  assert_int_equal(ordo_lock(t, "q4:3", 4, ORDO_MODE_X, 0), ORDO_EORDER);
  assert_int_equal(nrep, 5);
  assert_string_equal(rep[4].edge[1].from, "r4");
  ordo_txn_end(t);
  t = txn();
  lock_key(t, "r0:3");
  assert_int_equal(ordo_lock(t, "q0:3", 4, ORDO_MODE_X, 0), ORDO_EORDER);
  assert_int_equal(nrep, 5);
  ordo_txn_end(t);
  in_order("q0:4", "r0:4");
  assert_int_equal(nrep, 5);
}

/* ---- What a report holds ---------------------------------------------------
 */

/* A chain c00 -> c01 -> ... -> c19, then c19 -> c00: the search walks 19
 * edges, and the cycle of 20 is cut to the report's 16: the path's first 15
 * edges, in order from c00, then the new edge. */
static void test_long_cycle(void **state) {
  (void)state;
  char a[16], b[16];
  for (int i = 0; i < 19; i++) {
    snprintf(a, sizeof a, "c%02d:1", i);
    snprintf(b, sizeof b, "c%02d:1", i + 1);
    in_order(a, b);
  }
  assert_int_equal(nrep, 0);
  in_order("c19:2", "c00:2");
  assert_int_equal(nrep, 1);
  assert_int_equal(rep[0].nedges, ORDO_ORDER_MAX_EDGES);
  assert_int_equal(rep[0].rank_inversion, 0);
  for (int i = 0; i < ORDO_ORDER_MAX_EDGES - 1; i++) {
    snprintf(a, sizeof a, "c%02d", i);
    snprintf(b, sizeof b, "c%02d", i + 1);
    assert_string_equal(rep[0].edge[i].from, a);
    assert_string_equal(rep[0].edge[i].to, b);
  }
  assert_string_equal(rep[0].edge[ORDO_ORDER_MAX_EDGES - 1].from, "c19");
  assert_string_equal(rep[0].edge[ORDO_ORDER_MAX_EDGES - 1].to, "c00");
}

/* A class name longer than a report's 63 characters is cut: printable
 * bytes to 63, and an escaped byte (\xNN, four characters) left out whole
 * when it does not fit. */
static void test_long_names(void **state) {
  (void)state;
  char longp[80], binp[80];
  memset(longp, 'p', 70);
  memcpy(longp + 70, ":1", 3);
  memset(binp, 'b', 61);
  binp[61] = 0x01; /* 61 + 4 > 63: cut before it */
  memcpy(binp + 62, ":1", 3);
  in_order(longp, binp);
  in_order(binp, longp);
  assert_int_equal(nrep, 1);
  char want_p[64], want_b[64];
  memset(want_p, 'p', 63);
  want_p[63] = 0;
  memset(want_b, 'b', 61);
  want_b[61] = 0;
  assert_string_equal(rep[0].edge[0].from, want_p);
  assert_string_equal(rep[0].edge[0].to, want_b);
  assert_string_equal(rep[0].edge[1].from, want_b);
  assert_string_equal(rep[0].edge[1].to, want_p);
}

/* A prefix ranked again takes its new rank: acct (1) before sess (2) is
 * fine, and after acct is re-ranked 3 it is a rank inversion. The edges
 * seen before stay: acct -> user, taken at ranks 1 and 2, is not reported
 * again. */
static void test_rerank(void **state) {
  (void)state;
  assert_int_equal(ordo_order_rank(O, "acct:", 5, 1), 0);
  assert_int_equal(ordo_order_rank(O, "user:", 5, 2), 0);
  assert_int_equal(ordo_order_rank(O, "sess:", 5, 2), 0);
  in_order("acct:1", "user:1");
  assert_int_equal(nrep, 0);
  assert_int_equal(ordo_order_rank(O, "acct:", 5, 3), 0);
  in_order("acct:2", "user:2");
  assert_int_equal(nrep, 0);
  in_order("acct:3", "sess:1");
  assert_int_equal(nrep, 1);
  assert_int_equal(rep[0].rank_inversion, 1);
  assert_int_equal(rep[0].nedges, 1);
  assert_string_equal(rep[0].edge[0].from, "rank:3 acct:");
  assert_string_equal(rep[0].edge[0].to, "rank:2 sess:");
}

/* ---- Without a callback: the log line ----------------------------------- */

/* Runs fn with stderr sent to a temporary file; returns what it wrote (at
 * most cap - 1 bytes, NUL-terminated). */
static size_t capture_stderr(void (*fn)(void), char *out, size_t cap) {
  char path[] = "/tmp/ordo-cover-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  fflush(stderr);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_int_equal(dup2(fd, 2), 2);
  fn();
  fflush(stderr);
  assert_int_equal(dup2(saved, 2), 2);
  close(saved);
  off_t len = lseek(fd, 0, SEEK_END);
  assert_true(len >= 0);
  size_t n = (size_t)len < cap - 1 ? (size_t)len : cap - 1;
  assert_int_equal(pread(fd, out, n, 0), (ssize_t)n);
  out[n] = 0;
  close(fd);
  return (size_t)len;
}

/* A site whose file name is 300 characters long. */
static char long_file[301];

static void long_cycle_logged(void) {
  char a[16], b[16];
  for (int i = 0; i < 19; i++) {
    snprintf(a, sizeof a, "d%02d:1", i);
    snprintf(b, sizeof b, "d%02d:1", i + 1);
    ordo_txn_t *t = txn();
    assert_int_equal(ordo_lock_at(t, a, 5, ORDO_MODE_X, 0, long_file, i), 0);
    assert_int_equal(ordo_lock_at(t, b, 5, ORDO_MODE_X, 0, long_file, i), 0);
    ordo_txn_end(t);
  }
  ordo_txn_t *t = txn();
  assert_int_equal(ordo_lock_at(t, "d19:2", 5, ORDO_MODE_X, 0, long_file, 99),
                   0);
  assert_int_equal(ordo_lock_at(t, "d00:2", 5, ORDO_MODE_X, 0, long_file, 99),
                   0);
  ordo_txn_end(t);
}

/* A report of 16 edges with those sites is far longer than the log line's
 * buffer (16 * 180 + 96 bytes): the line is cut to it, still one line,
 * still ending in a newline, and still counted. */
static void test_log_line_cut(void **state) {
  (void)state;
  memset(long_file, 'f', sizeof long_file - 1);
  ordo_on_order(O, NULL, NULL);
  static char out[8192];
  size_t len = capture_stderr(long_cycle_logged, out, sizeof out);
  assert_int_equal(nrep, 0);
  const size_t cap = ORDO_ORDER_MAX_EDGES * 180 + 96;
  assert_int_equal(len, cap - 1);
  assert_int_equal(out[len - 1], '\n');
  assert_ptr_equal(strchr(out, '\n'), out + len - 1);
  assert_memory_equal(out, "ordo: lock order inversion in txn ", 34);
  assert_non_null(strstr(out, "d00 -> d01 ("));
  ordo_stats_t s;
  assert_int_equal(ordo_stats(O, &s), 0);
  assert_int_equal(s.order_reports, 1);
}

/* ---- The class limit ------------------------------------------------------
 */

#define MAX_CLASSES 65536 /* src/detect/order.c */
#define BATCH 1024

/* Makes classes k0 .. k(n-1) (keys without a separator are their own
 * class), BATCH keys per lock_all. */
static void make_classes(int n) {
  static uint8_t keys[BATCH][8];
  static ordo_req_t reqs[BATCH];
  ordo_txn_t *t = txn();
  for (int base = 0; base < n; base += BATCH) {
    int m = n - base < BATCH ? n - base : BATCH;
    for (int i = 0; i < m; i++) {
      int len = snprintf((char *)keys[i], sizeof keys[i], "k%d", base + i);
      reqs[i] = (ordo_req_t){keys[i], (size_t)len, ORDO_MODE_X};
    }
    assert_int_equal(ordo_lock_all(t, reqs, (size_t)m, 0), 0);
    assert_int_equal(ordo_unlock_all(t), m);
  }
  ordo_txn_end(t);
}

static void past_the_limit(void) {
  ordo_txn_t *t = txn();
  lock_key(t, "k1");
  /* Two keys of new classes: neither is checked, the limit is said once. */
  lock_key(t, "new:1");
  lock_key(t, "newer:1");
  /* Their unlocks find no class to count down, and change nothing. */
  assert_int_equal(ordo_unlock(t, "new:1", 5), 0);
  assert_int_equal(ordo_unlock(t, "newer:1", 7), 0);
  assert_true(held(t, "k1"));
  ordo_txn_end(t);
}

/* At 65536 classes a new key's class is not made: its lock goes on
 * unchecked, one line on stderr says so (once), and a new rank is refused
 * with ORDO_ELIMIT. Classes made before the limit are still checked. */
static void test_class_limit(void **state) {
  (void)state;
  make_classes(MAX_CLASSES);
  assert_int_equal(ordo_order_rank(O, "acct:", 5, 1), ORDO_ELIMIT);
  static char out[4096];
  capture_stderr(past_the_limit, out, sizeof out);
  assert_string_equal(out, "ordo: lock-order checker: 65536 classes; keys of "
                           "new classes are not checked\n");
  assert_int_equal(nrep, 0);
  in_order("k1", "k2");
  in_order("k2", "k1");
  assert_int_equal(nrep, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_tables_grow, setup_warn, teardown),
      cmocka_unit_test_setup_teardown(test_reported_set_grows, setup_warn,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_reports_per_call, setup_warn,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_reports_per_call_refused,
                                      setup_refuse, teardown),
      cmocka_unit_test_setup_teardown(test_long_cycle, setup_warn, teardown),
      cmocka_unit_test_setup_teardown(test_long_names, setup_warn, teardown),
      cmocka_unit_test_setup_teardown(test_rerank, setup_warn, teardown),
      cmocka_unit_test_setup_teardown(test_log_line_cut, setup_warn, teardown),
      cmocka_unit_test_setup_teardown(test_class_limit, setup_warn, teardown),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
