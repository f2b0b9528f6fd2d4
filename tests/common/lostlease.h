/*
 * lostlease.h -- the shared body of the remote backends' lost-lease timing
 * cases (test_redis, test_redlock, test_ordod_backend: test_lost_in_time).
 * A lost lease must be reported in time however many txns hold: the
 * renewals of LL_HOLDERS holders run at once, and a lease whose end passes
 * is lost then, without waiting for a server. Include after cmocka.h and
 * testutil.h.
 */
#ifndef ORDO_TEST_LOSTLEASE_H
#define ORDO_TEST_LOSTLEASE_H

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "ordo.h"

#define LL_HOLDERS 8

/* When each lease-lost callback came. */
typedef struct ll_log {
  _Atomic int n;
  _Atomic uint64_t at[LL_HOLDERS];
} ll_log;

static void ll_on_lost_at(ordo_txn_t *t, void *arg) {
  (void)t;
  ll_log *l = arg;
  int i = atomic_fetch_add(&l->n, 1);
  if (i < LL_HOLDERS)
    atomic_store(&l->at[i], tu_now_ns());
}

/*
 * LL_HOLDERS txns of o (its lease lease_ms) each lock the key PREFIX:i;
 * then the npids servers in pids are stopped (SIGSTOP), every lease-lost
 * callback is awaited (a bounded wait), and the servers run again. Nothing
 * is asserted while they are stopped. Then every callback must have come
 * within one lease of the stop (each holder's last renewal was before it),
 * plus 300 ms (scaled) for the scheduler, and each txn's next call says
 * ORDO_ELEASE. The txns are ended; o is the caller's. Installs its own
 * lease-lost callback on o.
 */
static void tu_lost_in_time(ordo_t *o, const char *prefix, long lease_ms,
                            const pid_t *pids, int npids) {
  static ll_log log;
  memset(&log, 0, sizeof log);
  ordo_on_lease_lost(o, ll_on_lost_at, &log);
  ordo_txn_t *t[LL_HOLDERS];
  for (int i = 0; i < LL_HOLDERS; i++) {
    char key[32];
    snprintf(key, sizeof key, "%s:%d", prefix, i);
    assert_int_equal(ordo_txn_begin(o, &t[i], NULL), 0);
    assert_int_equal(ordo_lock(t[i], key, strlen(key), ORDO_MODE_X, 1000), 0);
  }
  int stopped = 0, stop_rc = 0;
  for (; stopped < npids && stop_rc == 0; stopped++)
    stop_rc = kill(pids[stopped], SIGSTOP);
  uint64_t stop = tu_now_ns();
  uint64_t end = stop + tu_ms(10000) * 1000000u;
  while (stop_rc == 0 && atomic_load(&log.n) < LL_HOLDERS && tu_now_ns() < end)
    tu_sleep_us(2000); /* a bounded wait for the callbacks */
  int cont_rc = 0;
  for (int i = 0; i < stopped; i++)
    cont_rc |= kill(pids[i], SIGCONT);
  int n = atomic_load(&log.n);
  uint64_t worst = 0;
  for (int i = 0; i < n && i < LL_HOLDERS; i++) {
    uint64_t ms = (atomic_load(&log.at[i]) - stop) / 1000000u;
    print_message("lease-lost callback %d: %llu ms after the stop\n", i + 1,
                  (unsigned long long)ms);
    worst = ms > worst ? ms : worst;
  }
  assert_int_equal(stop_rc, 0);
  assert_int_equal(cont_rc, 0);
  assert_int_equal(n, LL_HOLDERS);
  assert_true(worst <= (uint64_t)lease_ms + tu_ms(300));
  for (int i = 0; i < LL_HOLDERS; i++) {
    assert_int_equal(ordo_unlock_all(t[i]), ORDO_ELEASE);
    ordo_txn_end(t[i]);
  }
}

#endif
