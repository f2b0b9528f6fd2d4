/*
 * retry.c -- ordo_retry: full-jitter exponential backoff around a body that
 * locks, retrying only retryable errors and never while holding anything.
 * See src/core/README.md.
 *
 * Interface: ordo_retry_options_init, ordo_retry, ordo_retry_ceiling_us.
 */
#include "ordo_int.h"

#include <errno.h>
#include <time.h>

void ordo_retry_options_init(ordo_retry_options_t *r) {
  r->base_us = 1000;
  r->cap_us = 100000;
  r->max_attempts = 10;
}

long ordo_retry_ceiling_us(const ordo_retry_options_t *r, unsigned k) {
  /* base * 2^(k-1), capped, computed without overflow. */
  long c = r->base_us > 0 ? r->base_us : 1;
  for (unsigned i = 1; i < k && c < r->cap_us; i++)
    c = c > r->cap_us / 2 ? r->cap_us : c * 2;
  return c < r->cap_us ? c : r->cap_us;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

int ordo_retry(ordo_txn_t *t, const ordo_retry_options_t *ro, ordo_body_cb body,
               void *arg, unsigned *attempts) {
  if (!t || !body)
    return ORDO_EINVAL;
  ordo_retry_options_t def;
  if (!ro) {
    ordo_retry_options_init(&def);
    ro = &def;
  }
  unsigned k = 0;
  int rc;
  for (;;) {
    k++;
    rc = body(t, arg);
    if (rc >= 0 || !ordo_is_retryable(rc))
      break;
    /* Never back off holding anything: others may need it meanwhile. */
    ordo_unlock_all(t);
    if (ro->max_attempts && k >= ro->max_attempts)
      break;
    atomic_fetch_add_explicit(&t->o->retries, 1, memory_order_relaxed);
    long ceil = ordo_retry_ceiling_us(ro, k);
    sleep_us((long)(ordo__rand64() % (uint64_t)ceil));
  }
  if (attempts)
    *attempts = k;
  return rc;
}
