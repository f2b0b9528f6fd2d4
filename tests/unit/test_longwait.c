/*
 * test_longwait.c -- the long-wait log costs a hand-off the same however
 * long the key's queue is, and writes bounded, rate-limited records (issue
 * 18 item 6). At the parent each waiter that passed log_wait_ms logged the
 * key's whole queue, under wait_mu, on the hand-off's path: a hand-off cost
 * O(queue), and 8,000 waiters filled the disk.
 *
 * The place runs on the manual clock (ordo__clock_set_manual), so which
 * waiter passes log_wait_ms is exact: N + M waiters queue on one key X,
 * 1 ms of manual time apart (and 10,000 - N on another key, so that both
 * rounds have as many waiters in all), with log_wait_ms longer than the
 * whole queue took; then each step advances the clock 1 ms (the waiter queued
 * first among those still waiting passes log_wait_ms), ticks the engine (which
 * logs it), and releases the key, whose next waiter is granted. The time
 * of each step is measured on the real clock, and the median step with
 * N = 1,000 and N = 10,000 waiters behind (of the fastest of five
 * alternated rounds) must agree within 20% (2x under ASan; a ratio
 * within one run, as the issue asks: an order-of-magnitude check, with
 * samples large enough to be stable). The log goes to a pipe that a thread
 * reads and counts, and its bytes and lines are checked: at most 10 records a
 * second of manual time, lines of bounded length, the suppressed ones counted.
 */
/* Whether this build runs under ThreadSanitizer (clang's feature test,
 * or gcc's macro). */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ORDO_TEST_UNDER_TSAN 1
#endif
#endif
#if !defined(ORDO_TEST_UNDER_TSAN) && defined(__SANITIZE_THREAD__)
#define ORDO_TEST_UNDER_TSAN 1
#endif
#ifndef ORDO_TEST_UNDER_TSAN
#define ORDO_TEST_UNDER_TSAN 0
#endif
/* And under AddressSanitizer (the same two ways). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ORDO_TEST_UNDER_ASAN 1
#endif
#endif
#if !defined(ORDO_TEST_UNDER_ASAN) && defined(__SANITIZE_ADDRESS__)
#define ORDO_TEST_UNDER_ASAN 1
#endif
#ifndef ORDO_TEST_UNDER_ASAN
#define ORDO_TEST_UNDER_ASAN 0
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"

#include "core/table.h"
#include "ordo_int.h"

#include <string.h>
#include <sys/ioctl.h>

#define MS UINT64_C(1000000)
#define LOG_WAIT_MS 20000 /* longer than the longest queue takes to form */

typedef struct round_t {
  ordo_txn_t **t;
  size_t n;
  _Atomic long granted; /* index of the last waiter granted */
  _Atomic int bad;      /* a callback with an error */
} round_t;

typedef struct waiter_arg {
  round_t *r;
  long i;
} waiter_arg;

static void on_grant(ordo_txn_t *t, int status, void *arg) {
  (void)t;
  waiter_arg *a = arg;
  if (status != 0)
    atomic_store(&a->r->bad, status);
  else
    atomic_store(&a->r->granted, a->i);
}

/* stderr goes to a pipe while the rounds run, and this thread reads it:
 * it counts every byte and keeps the first KEEP of them for the checks of
 * the lines, so that a log of hundreds of megabytes (the parent's) costs
 * no disk. */
#define KEEP (256u << 10)
typedef struct sink_t {
  int fd;
  _Atomic size_t bytes;
  char text[KEEP + 1];
  size_t kept;
  pthread_t thr;
} sink_t;

static void *sink_main(void *arg) {
  sink_t *k = arg;
  char buf[65536];
  for (;;) {
    ssize_t n = read(k->fd, buf, sizeof buf);
    if (n <= 0)
      return NULL;
    size_t take = KEEP - k->kept < (size_t)n ? KEEP - k->kept : (size_t)n;
    memcpy(k->text + k->kept, buf, take);
    k->kept += take;
    atomic_fetch_add(&k->bytes, (size_t)n);
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* One round: n waiters on "hot" behind its holder, plus m more that the m
 * steps grant, then cold waiters on "cold" behind a holder of their own;
 * the steps' times go to out[0..m). Returns the bytes logged. The cold
 * waiters make both rounds' timer heaps (one alarm per waiter) and lock
 * tables the same size, so that the rounds differ in the hot queue's
 * length alone: the engine's timer heap costs O(log waiters) a pop, which
 * is not what is measured. They queue last, so they pass log_wait_ms only
 * after the steps. */
static size_t one_round(size_t n, size_t cold, size_t m, uint64_t *out,
                        sink_t *sink) {
  ordo__clock_set_manual(UINT64_C(1) << 40);
  ordo_options_t opts;
  ordo_options_init(&opts);
  opts.log_wait_ms = LOG_WAIT_MS;
  opts.sweep_ms = 0; /* a sweep walks every waiter: not what is measured */
  ordo_t *o = NULL;
  assert_int_equal(ordo_open(&o, "mem://", &opts), 0);
  tu_watchdog_target(o);
  ordo__table *tab = ordo__engine_table(o);
  size_t hot = n + m + 1, total = hot + cold + 1;
  round_t r = {calloc(total, sizeof(ordo_txn_t *)), total, -1, 0};
  waiter_arg *args = calloc(total, sizeof *args);
  assert_non_null(r.t);
  assert_non_null(args);
  for (size_t i = 0; i < total; i++) {
    bool is_hot = i < hot;
    ordo_req_t req = {is_hot ? "hot" : "cold", is_hot ? 3 : 4, ORDO_MODE_X};
    assert_int_equal(ordo_txn_begin(o, &r.t[i], NULL), 0);
    args[i] = (waiter_arg){&r, is_hot ? (long)i : -2};
    int rc = ordo_lock_all_async(r.t[i], &req, 1, -1, on_grant, &args[i]);
    assert_int_equal(rc, i == 0 || i == hot ? 0 : ORDO_PENDING);
    ordo__clock_advance(MS);
  }
  /* Waiter 1, queued first, passes log_wait_ms at the first step. */
  ordo__clock_advance((uint64_t)LOG_WAIT_MS * MS - total * MS);
  fflush(stderr);
  size_t log0 = atomic_load(&sink->bytes);
  for (size_t k = 0; k < m; k++) {
    uint64_t t0 = tu_now_ns();
    ordo__clock_advance(MS);
    ordo__table_tick(tab);
    assert_int_equal(ordo_unlock(r.t[k], "hot", 3), 0);
    out[k] = tu_now_ns() - t0;
    assert_int_equal(atomic_load(&r.bad), 0);
    assert_int_equal(atomic_load(&r.granted), (long)k + 1);
  }
  /* Bytes written to the pipe are the sink's once it has read them: the
   * engine's fwrite has returned, so a bounded wait for them suffices. */
  fflush(stderr);
  uint64_t end = tu_now_ns() + tu_ms(10000) * MS;
  int avail = 1;
  while (avail > 0 && tu_now_ns() < end) {
    if (ioctl(2, FIONREAD, &avail) != 0)
      avail = 0;
    if (avail > 0)
      tu_sleep_us(1000);
  }
  size_t logged = atomic_load(&sink->bytes) - log0;
  for (size_t i = 0; i < total; i++)
    ordo_txn_end(r.t[i]);
  ordo_close(o);
  free(r.t);
  free(args);
  return logged;
}

static void test_handoff_cost_flat(void **state) {
  (void)state;
  static sink_t sink;
  int p[2];
  assert_int_equal(pipe(p), 0);
  sink.fd = p[0];
  assert_int_equal(pthread_create(&sink.thr, NULL, sink_main, &sink), 0);
  fflush(stderr);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_true(dup2(p[1], 2) == 2);
  close(p[1]);
  tu_watchdog_start(NULL, 150, "the hand-off rounds");
  const size_t m = (size_t)tu_scaled(2000);
  const size_t ns[2] = {1000, 10000};
  enum { ROUNDS = 5 };
  uint64_t *steps[2];
  size_t logged[2] = {0, 0};
  for (int j = 0; j < 2; j++) {
    steps[j] = calloc(ROUNDS * m, sizeof(uint64_t));
    assert_non_null(steps[j]);
  }
  /* Alternated, so a slow spell of the machine falls on both. */
  for (int rd = 0; rd < ROUNDS; rd++)
    for (int j = 0; j < 2; j++)
      logged[j] +=
          one_round(ns[j], ns[1] - ns[j], m, steps[j] + (size_t)rd * m, &sink);
  tu_watchdog_stop();
  fflush(stderr);
  assert_true(dup2(saved, 2) == 2); /* closes the pipe's last writer */
  close(saved);
  assert_int_equal(pthread_join(sink.thr, NULL), 0);
  close(sink.fd);
  /* Each queue length's cost is its fastest round's median: noise only
   * adds time (a slow spell of the shared machine, a sanitizer's
   * bookkeeping), and pooling the rounds let one slow round move the
   * median by 20% under ASan with both costs equal. */
  double med[2];
  for (int j = 0; j < 2; j++) {
    med[j] = 0;
    for (int rd = 0; rd < ROUNDS; rd++) {
      uint64_t *r = steps[j] + (size_t)rd * m;
      qsort(r, m, sizeof(uint64_t), cmp_u64);
      if (rd == 0 || (double)r[m / 2] < med[j])
        med[j] = (double)r[m / 2];
    }
  }
  /* The log: at most 10 records a second of manual time, lines of bounded
   * length, the suppressed ones said. Each round is a place of its own
   * whose m steps are m ms of manual time, so it touches at most
   * ceil(m / 1000) + 1 of the limiter's one-second windows (a round of
   * 500 ms may straddle two: 20 records, as TSan's scale showed). */
  size_t secs = ROUNDS * 2 * ((m + 999) / 1000 + 1);
  sink.text[sink.kept] = 0;
  size_t records = 0, longest = 0, dropped_notes = 0;
  for (char *q = sink.text, *nl; *q; q = nl + 1) {
    nl = strchr(q, '\n');
    if (!nl)
      break; /* the kept text may end inside a line */
    size_t l = (size_t)(nl - q);
    longest = l > longest ? l : longest;
    if (strncmp(q, "ordo: LOG: txn ", 15) == 0)
      records++;
    if (strncmp(q, "ordo: LOG: ", 11) == 0 &&
        strstr(q, " not logged (at most 10 a second)") &&
        strstr(q, " not logged (at most 10 a second)") < nl)
      dropped_notes++;
  }
  printf("median hand-off (fastest round): %.0f ns with %zu waiters, %.0f ns "
         "with %zu "
         "(ratio %.2f); log: %zu + %zu bytes, %zu records and %zu notes in "
         "the first %zu bytes, longest line %zu bytes\n",
         med[0], ns[0], med[1], ns[1], med[1] / med[0], logged[0], logged[1],
         records, dropped_notes, sink.kept, longest);
  /* Under ThreadSanitizer a step's time is mostly the sanitizer's own
   * (its shadow memory and happens-before bookkeeping, which vary with
   * the footprint of the 10,000 waiters' threads), and the ratio of two
   * equal costs has measured 0.80: the bound is checked in the other
   * builds (gcc 1.00-1.09, ASan 0.80-1.46 under load), where the time is the
   * engine's; TSan still runs the rounds for races, and the log's checks
   * below. */
#if !ORDO_TEST_UNDER_TSAN
  /* Growth with the queue is the defect: within 20%. A longer queue that
   * comes out cheaper is noise, not a cost that grows (a clean-clone run
   * of the gcc build, beside other tests, measured 0.82): bounded loosely,
   * against a measurement gone wrong. Under ASan, whose allocator and
   * shadow add their own time, equal costs have read 0.80 to 1.46 on a
   * loaded machine (a clean-clone make test failed at 1.46): there the
   * bound is 2, which still fails the defect itself (a hand-off that walks
   * the queue costs 10 times as much with 10 times the waiters). */
  const double grow = ORDO_TEST_UNDER_ASAN ? 2.0 : 1.2;
  assert_true(med[1] <= grow * med[0]);
  assert_true(med[0] <= 1.5 * grow / 1.2 * med[1]);
#endif
  assert_true(logged[0] + logged[1] <= 128u << 10);
  assert_true(records > 0);
  assert_true(records <= 10 * secs);
  assert_true(dropped_notes > 0);
  assert_true(longest <= 512);
  free(steps[0]);
  free(steps[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handoff_cost_flat),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
