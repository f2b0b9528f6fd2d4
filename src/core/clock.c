/*
 * clock.c -- monotonic time, deadlines, a per-thread random generator and
 * the log2 histogram bucket. See README.md.
 *
 * Interface: ordo__now_ns, ordo__clock_manual, ordo__clock_set_manual,
 * ordo__clock_advance, ordo__rand64, ordo__hist_bucket, ordo_hist_quantile.
 */
#include "ordo_int.h"

#include <pthread.h>
#include <time.h>

/* The manual clock of the model-based tester (tests/model): while on, time
 * is what the tester says, so nothing sleeps and every run replays. Set
 * once before any table exists; the cost when off is one relaxed load. */
static _Atomic bool manual;
static _Atomic uint64_t manual_ns;

uint64_t ordo__now_ns(void) {
  if (atomic_load_explicit(&manual, memory_order_relaxed))
    return atomic_load_explicit(&manual_ns, memory_order_acquire);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool ordo__clock_manual(void) {
  return atomic_load_explicit(&manual, memory_order_relaxed);
}

void ordo__clock_set_manual(uint64_t start_ns) {
  atomic_store_explicit(&manual_ns, start_ns, memory_order_release);
  atomic_store_explicit(&manual, true, memory_order_release);
}

void ordo__clock_advance(uint64_t ns) {
  atomic_fetch_add_explicit(&manual_ns, ns, memory_order_acq_rel);
}

uint64_t ordo__rand64(void) {
  /* xorshift64*: fast, and good enough for jitter and victim choice. */
  static _Thread_local uint64_t s;
  if (s == 0) {
    s = ordo__now_ns() ^ ((uint64_t)(uintptr_t)&s * 0x9E3779B97F4A7C15u);
    if (s == 0)
      s = 0x2545F4914F6CDD1Du;
  }
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s * 0x2545F4914F6CDD1Du;
}

unsigned ordo__hist_bucket(uint64_t us) {
  /* Bucket 0 holds 0 us; bucket i holds [2^(i-1), 2^i). */
  unsigned b = us ? 64u - (unsigned)__builtin_clzll(us) : 0u;
  return b < ORDO_HIST_BUCKETS ? b : ORDO_HIST_BUCKETS - 1;
}

uint64_t ordo_hist_quantile(const uint64_t hist[ORDO_HIST_BUCKETS], double q) {
  uint64_t total = 0;
  for (unsigned i = 0; i < ORDO_HIST_BUCKETS; i++)
    total += hist[i];
  if (total == 0)
    return 0;
  if (q < 0)
    q = 0;
  if (q > 1)
    q = 1;
  uint64_t want = (uint64_t)(q * (double)total + 0.5);
  if (want == 0)
    want = 1;
  uint64_t seen = 0;
  for (unsigned i = 0; i < ORDO_HIST_BUCKETS; i++) {
    seen += hist[i];
    if (seen >= want)
      return i == 0 ? 0 : (1ull << i) - 1; /* the bucket's upper bound */
  }
  return (1ull << (ORDO_HIST_BUCKETS - 1)) - 1;
}
