/*
 * test_ordod_url.c -- the ordod:// backend without a server: which URLs
 * ordo_open accepts (it does not connect; the first txn does) and which it
 * refuses with ORDO_EURL, the redacted URL, the declared capabilities, an
 * unreachable server (ORDO_EBACKEND from ordo_txn_begin and ordo_stats,
 * the reason in the dump), and a lease-lost callback on mem://, which has
 * no leases. What a URL does against a real ordod (a password, a Unix
 * socket, timeout_ms) is tests/integration/test_ordod_backend.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void test_good_urls(void **state) {
  (void)state;
  static const char *const good[] = {
      "ordod://127.0.0.1:7411",
      "ordod://localhost",
      "ordod://db-1.example.com:1",
      "ordod://[::1]:7411",
      "ordod://[::1]",
      "ordod://:secret@127.0.0.1:7411",
      "ordod://user:p%40ss%2Fw@host:65535",
      "ordod:///tmp/ordod.sock",
      "ordod://:pw@/run/ordo%20d.sock",
      "ordod://h:1?lease_ms=1000",
      "ordod://h:1?timeout_ms=250&lease_ms=10",
      "ordod:///s?lease_ms=86400000",
      "ordod://h:1?tls=1", /* TLS, checked against the system's CAs */
      "ordod://h:1?tls=0",
      "ordod://h:1?timeout_ms=250&tls=1&tls_sni=lock.example",
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    ordo_t *o = NULL;
    int rc = ordo_open(&o, good[i], NULL);
    if (rc != 0)
      print_error("%s -> %s\n", good[i], ordo_err_name(rc));
    assert_int_equal(rc, 0);
    ordo_close(o);
  }
}

static void test_bad_urls(void **state) {
  (void)state;
  static const char *const bad[] = {
      "ordod://",
      "ordod://:7411",
      "ordod://h:0",
      "ordod://h:65536",
      "ordod://h:x",
      "ordod://h:1/",
      "ordod://h:1?",
      "ordod://h:1?lease_ms=",
      "ordod://h:1?lease_ms=9",
      "ordod://h:1?lease_ms=86400001",
      "ordod://h:1?timeout_ms=0",
      "ordod://h:1?stripes=16",
      "ordod://h:1?lease_ms=10&",
      "ordod://user@h:1",
      "ordod://:p%4@h:1",
      "ordod://:p%00@h:1",
      "ordod://[::1",
      "ordod://[::1]x",
      "ordod://h$:1",
      "ordod:///",
      "ordod://%2F",
      /* TLS: options without tls=1, a bad tls value, a certificate
       * without its key, a Unix socket, files that do not load. */
      "ordod://h:1?tls_ca=/etc/hosts",
      "ordod://h:1?tls=yes",
      "ordod://h:1?tls=1&tls_cert=/x",
      "ordod://h:1?tls=1&tls_ca=",
      "ordod:///s?tls=1",
      "ordod://h:1?tls=1&tls_ca=/nonexistent/ca.crt",
      "ordod://h:1?tls=1&tls_cert=/nonexistent/c.crt&tls_key=/nonexistent/k",
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

static void test_redacted_and_caps(void **state) {
  (void)state;
  ordo_t *o = NULL;
  assert_int_equal(ordo_open(&o, "ordod://:secret@127.0.0.1:7411", NULL), 0);
  assert_null(strstr(ordo_url(o), "secret"));
  unsigned want = ORDO_CAP_SHARED | ORDO_CAP_SERVER_WAIT | ORDO_CAP_FENCE |
                  ORDO_CAP_FENCE_DURABLE | ORDO_CAP_INCREMENTAL |
                  ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE |
                  ORDO_CAP_WAIT_HOLDS_NOTHING;
  assert_int_equal(ordo_caps(o), want);
  ordo_close(o);
}

/* A Unix socket that is not there: the first txn cannot connect. */
static void test_unreachable(void **state) {
  (void)state;
  char url[256];
  snprintf(url, sizeof url, "ordod:///nonexistent-%ld/ordod.sock",
           (long)getpid());
  ordo_t *o = NULL;
  assert_int_equal(ordo_open(&o, url, NULL), 0);
  ordo_txn_t *t = NULL;
  assert_int_equal(ordo_txn_begin(o, &t, NULL), ORDO_EBACKEND);
  ordo_stats_t st;
  assert_int_equal(ordo_stats(o, &st), ORDO_EBACKEND);
  /* The dump says why, without a server. */
  FILE *f = tmpfile();
  assert_non_null(f);
  ordo_dump(o, fileno(f));
  char buf[2048] = {0};
  rewind(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  assert_true(n > 0);
  assert_non_null(strstr(buf, "last error"));
  ordo_close(o);
}

static void dummy_cb(ordo_txn_t *t, void *arg) {
  (void)t;
  (void)arg;
}

/* mem:// has no leases: registering a callback does nothing. */
static void test_mem_lease_noop(void **state) {
  (void)state;
  ordo_t *o = NULL;
  assert_int_equal(ordo_open(&o, "mem://", NULL), 0);
  ordo_on_lease_lost(o, dummy_cb, NULL);
  ordo_on_lease_lost(NULL, dummy_cb, NULL);
  ordo_close(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good_urls),
      cmocka_unit_test(test_bad_urls),
      cmocka_unit_test(test_redacted_and_caps),
      cmocka_unit_test(test_unreachable),
      cmocka_unit_test(test_mem_lease_noop),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
