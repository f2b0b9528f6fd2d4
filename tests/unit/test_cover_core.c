/*
 * test_cover_core.c -- the engine's paths that the other suites do not
 * reach, found by `make coverage` (docs/coverage.md): every error code's
 * name, message and retry flag; every option and URL option refused with
 * the code ordo.h gives; every call's bad arguments (a NULL handle, a bad
 * key), each refused with nothing taken; and ordo_dump's table, with a
 * holder, a waiter and a key that needs escaping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"

#include <string.h>
#include <sys/wait.h>

#include "ordo_int.h"

/* ---- Errors ------------------------------------------------------------ */

/* Each code of ORDO_ERRNO_MAP has its own message, its name, and its retry
 * flag; 0, ORDO_PENDING and a code outside the map have theirs. */
static void test_error_codes(void **state) {
  (void)state;
  int n = 0;
#define CHECK_ERR(name, val, retry, msg)                                       \
  assert_int_equal(ORDO_E##name, val);                                         \
  assert_string_equal(ordo_strerror(val), msg);                                \
  assert_string_equal(ordo_err_name(val), "E" #name);                          \
  assert_int_equal(ordo_is_retryable(val), retry);                             \
  n++;
  ORDO_ERRNO_MAP(CHECK_ERR)
#undef CHECK_ERR
  assert_true(n >= 10);
  assert_string_equal(ordo_strerror(0), "success");
  assert_string_equal(ordo_err_name(0), "OK");
  assert_int_equal(ordo_is_retryable(0), 0);
  assert_string_equal(ordo_strerror(ORDO_PENDING),
                      "queued; the callback will report the outcome");
  assert_string_equal(ordo_err_name(ORDO_PENDING), "PENDING");
  assert_string_equal(ordo_strerror(-9999), "unknown error");
  assert_string_equal(ordo_err_name(-9999), "EUNKNOWN");
  assert_int_equal(ordo_is_retryable(-9999), 0);
}

/* An internal assertion that fails says what and where on stderr, then
 * aborts: run in a child, which must die of SIGABRT. */
static void test_assert_fail(void **state) {
  (void)state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    ordo__assert_fail("x == 1", "f.c", 7);
    _exit(0); /* not reached: ordo__assert_fail aborts */
  }
  close(fds[1]);
  char buf[128];
  ssize_t got = 0, r;
  while ((r = read(fds[0], buf + got, sizeof buf - 1 - (size_t)got)) > 0)
    got += r;
  close(fds[0]);
  buf[got > 0 ? got : 0] = 0;
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), SIGABRT);
  assert_string_equal(buf, "ordo: assertion failed: x == 1 (f.c:7)\n");
}

/* ---- Options ------------------------------------------------------------ */

/* ordo_open with opts changed by fn must fail with want, and set *out to
 * NULL (never leave a caller's old pointer there). */
static void open_refused(void (*fn)(ordo_options_t *), const char *url,
                         int want) {
  ordo_options_t opts;
  ordo_options_init(&opts);
  if (fn)
    fn(&opts);
  ordo_t *o = (ordo_t *)&opts; /* a stale pointer, to be overwritten */
  assert_int_equal(ordo_open(&o, url, &opts), want);
  assert_null(o);
}

static void bad_hold_sample(ordo_options_t *o) {
  o->hold_sample = 3;
}
static void bad_max_locks(ordo_options_t *o) {
  o->max_locks = 0;
}
static void bad_key_len(ordo_options_t *o) {
  o->max_key_len = (1u << 20) + 1;
}
static void bad_spin(ordo_options_t *o) {
  o->spin_us = 1000001;
}
static void bad_holds(ordo_options_t *o) {
  o->starvation_holds = 1000001;
}
static void bad_history(ordo_options_t *o) {
  o->deadlock_history = 0;
}
static void bad_window(ordo_options_t *o) {
  o->alarm_window_s = 86401;
}
static void bad_sweep(ordo_options_t *o) {
  o->sweep_ms = -1;
}

static const struct {
  void (*fn)(ordo_options_t *);
  const char *url;
  int want;
} refused[] = {
    {bad_hold_sample, "mem://", ORDO_EINVAL},
    {bad_max_locks, "mem://", ORDO_EINVAL},
    {bad_key_len, "mem://", ORDO_EINVAL},
    {bad_spin, "mem://", ORDO_EINVAL},
    {bad_holds, "mem://", ORDO_EINVAL},
    {bad_history, "mem://", ORDO_EINVAL},
    {bad_window, "mem://", ORDO_EINVAL},
    {bad_sweep, "mem://", ORDO_EINVAL},
    /* The same checks apply to what a URL's query sets. */
    {NULL, "mem://?hold_sample=3", ORDO_EINVAL},
    {NULL, "mem://?alarm_window_s=0", ORDO_EINVAL},
    /* A query that cannot be read is ORDO_EURL. */
    {NULL, "mem://?stripes=", ORDO_EURL},
    {NULL, "mem://?max_locks=-1", ORDO_EURL},
    {NULL, "mem://?victim=eldest", ORDO_EURL},
};

static void test_bad_options(void **state) {
  (void)state;
  assert_int_equal(ordo_open(NULL, "mem://", NULL), ORDO_EINVAL);
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    open_refused(refused[i].fn, refused[i].url, refused[i].want);
}

/* Options a URL sets take effect: max_key_len=4 refuses a five-byte key
 * (and takes a four-byte one); a victim named in the URL is accepted. */
static void test_url_options(void **state) {
  (void)state;
  ordo_t *o;
  assert_int_equal(
      ordo_open(&o,
                "mem://?max_key_len=4&hold_sample=2&alarm_window_s="
                "5&victim=oldest",
                NULL),
      0);
  ordo_txn_t *t;
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0);
  assert_int_equal(ordo_lock(t, "abcde", 5, ORDO_MODE_X, 0), ORDO_EINVAL);
  assert_int_equal(ordo_held(t, "abcd", 4, NULL), 0);
  assert_int_equal(ordo_lock(t, "abcd", 4, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_held(t, "abcd", 4, NULL), 1);
  ordo_txn_end(t);
  ordo_close(o);
}

/* ---- Bad arguments ---------------------------------------------------------
 */

static void noop_cb(ordo_txn_t *t, int status, void *arg) {
  (void)t;
  (void)status;
  (void)arg;
  fail_msg("a refused request must not call back");
}

/* Every call given a NULL handle or a bad key refuses with ORDO_EINVAL,
 * and the txn holds what it held before (one key, once). */
static void test_bad_arguments(void **state) {
  (void)state;
  ordo_t *o;
  assert_int_equal(ordo_open(&o, "mem://", NULL), 0);
  ordo_txn_t *t, *sentinel = (ordo_txn_t *)&o;
  ordo_txn_t *t2 = sentinel;
  assert_int_equal(ordo_txn_begin(NULL, &t2, NULL), ORDO_EINVAL);
  assert_int_equal(ordo_txn_begin(o, NULL, NULL), ORDO_EINVAL);
  assert_ptr_equal(t2, sentinel);
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0);
  assert_int_equal(ordo_lock(t, "k", 1, ORDO_MODE_X, 0), 0);

  ordo_req_t good = {"a", 1, ORDO_MODE_X};
  ordo_req_t two[2] = {{"a", 1, ORDO_MODE_X}, {"b", 1, ORDO_MODE_X}};
  assert_int_equal(ordo_lock(NULL, "a", 1, ORDO_MODE_X, 0), ORDO_EINVAL);
  assert_int_equal(ordo_lock(t, NULL, 1, ORDO_MODE_X, 0), ORDO_EINVAL);
  assert_int_equal(ordo_lock_all(NULL, &good, 1, 0), ORDO_EINVAL);
  assert_int_equal(ordo_lock_all(t, NULL, 1, 0), ORDO_EINVAL);
  assert_int_equal(ordo_lock_all(NULL, two, 2, 0), ORDO_EINVAL);
  assert_int_equal(ordo_lock_all(t, NULL, 2, 0), ORDO_EINVAL);
  assert_int_equal(ordo_lock_at(NULL, "a", 1, ORDO_MODE_X, 0, "f.c", 1),
                   ORDO_EINVAL);
  assert_int_equal(ordo_lock_all_async(t, &good, 1, 0, NULL, NULL),
                   ORDO_EINVAL);
  assert_int_equal(ordo_lock_all_async(t, NULL, 2, 0, noop_cb, NULL),
                   ORDO_EINVAL);
  /* No request at all is a success that takes nothing. */
  assert_int_equal(ordo_lock_all(t, NULL, 0, 0), 0);

  assert_int_equal(ordo_unlock(NULL, "k", 1), ORDO_EINVAL);
  assert_int_equal(ordo_unlock(t, "k", 0), ORDO_EINVAL);
  assert_int_equal(ordo_unlock(t, NULL, 1), ORDO_EINVAL);
  assert_int_equal(ordo_unlock_all(NULL), ORDO_EINVAL);
  assert_int_equal(ordo_cancel(NULL), ORDO_EINVAL);
  assert_int_equal(ordo_held(NULL, "k", 1, NULL), ORDO_EINVAL);
  assert_int_equal(ordo_held(t, "k", 0, NULL), ORDO_EINVAL);
  uint64_t tok = 7;
  assert_int_equal(ordo_fence(NULL, "k", 1, &tok), ORDO_EINVAL);
  assert_int_equal(ordo_fence(t, "k", 1, NULL), ORDO_EINVAL);
  assert_int_equal(ordo_fence(t, NULL, 1, &tok), ORDO_EINVAL);
  assert_int_equal(tok, 7);
  ordo_stats_t s;
  assert_int_equal(ordo_stats(NULL, &s), ORDO_EINVAL);
  assert_int_equal(ordo_stats(o, NULL), ORDO_EINVAL);
  assert_int_equal(ordo_txn_id(NULL), 0);
  /* Ending or closing nothing is a no-op. */
  ordo_txn_end(NULL);
  ordo_close(NULL);

  ordo_mode_t m;
  assert_int_equal(ordo_held(t, "k", 1, &m), 1);
  assert_int_equal(m, ORDO_MODE_X);
  assert_int_equal(ordo_held(t, "a", 1, NULL), 0);
  assert_int_equal(ordo_held(t, "b", 1, NULL), 0);
  assert_int_equal(ordo_unlock_all(t), 1);
  ordo_txn_end(t);
  ordo_close(o);
}

/* ---- The dump -------------------------------------------------------------
 */

/* The waiter's callback, and a bounded wait for it on a condition. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, status;
} async_box;

static void box_cb(ordo_txn_t *t, int status, void *arg) {
  (void)t;
  async_box *b = arg;
  pthread_mutex_lock(&b->mu);
  b->status = status;
  b->done = 1;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

/* True once b's callback has run, within 5 s (times the test's factor). */
static bool box_wait(async_box *b) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + tu_ms(5000) * 1000000u;
  ts.tv_sec += (time_t)(ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  pthread_mutex_lock(&b->mu);
  int rc = 0;
  while (!b->done && rc == 0)
    rc = pthread_cond_timedwait(&b->cv, &b->mu, &ts);
  bool done = b->done;
  pthread_mutex_unlock(&b->mu);
  return done;
}

/* ordo_dump lists each key with holders or waiters, its holders with mode
 * and count, its queue, and writes a key's bytes outside printable ASCII
 * (and the backslash) as \xNN. */
static void test_dump(void **state) {
  (void)state;
  ordo_t *o;
  assert_int_equal(ordo_open(&o, "mem://?stripes=1", NULL), 0);
  ordo_txn_t *a, *b;
  assert_int_equal(ordo_txn_begin(o, &a, NULL), 0);
  assert_int_equal(ordo_txn_begin(o, &b, NULL), 0);
  const uint8_t key[] = {'k', 0x01, '\\', 'z'};
  assert_int_equal(ordo_lock(a, key, sizeof key, ORDO_MODE_X, 0), 0);
  assert_int_equal(ordo_lock(a, key, sizeof key, ORDO_MODE_X, 0), 0);
  async_box box = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 1};
  ordo_req_t r = {key, sizeof key, ORDO_MODE_X};
  assert_int_equal(ordo_lock_all_async(b, &r, 1, -1, box_cb, &box),
                   ORDO_PENDING);

  char path[] = "/tmp/ordo-cover-dump-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  ordo_dump(o, fd);
  char out[1024];
  ssize_t n = pread(fd, out, sizeof out - 1, 0);
  close(fd);
  assert_true(n > 0);
  out[n] = 0;
  char want[256];
  snprintf(want, sizeof want,
           "ordo lock table: 1 lock objects, 1 waiting\n"
           "  key \"k\\x01\\x5cz\" (stripe 0)\n"
           "    holders: txn %llu X x2\n"
           "    queue: txn %llu X\n",
           (unsigned long long)ordo_txn_id(a),
           (unsigned long long)ordo_txn_id(b));
  assert_string_equal(out, want);

  assert_int_equal(ordo_unlock_all(a), 1);
  assert_true(box_wait(&box));
  assert_int_equal(box.status, 0);
  ordo_txn_end(a);
  ordo_txn_end(b);
  ordo_close(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_error_codes),   cmocka_unit_test(test_assert_fail),
      cmocka_unit_test(test_bad_options),   cmocka_unit_test(test_url_options),
      cmocka_unit_test(test_bad_arguments), cmocka_unit_test(test_dump),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
