/*
 * test_pool.c -- the Banker's pool of src/avoid: textbook safe and unsafe
 * states, try-once against waiting, grants on behalf of the waiter (only the
 * granted ones wake), bad input that changes nothing, and a random run of 8
 * threads whose every grant is checked safe by the pool's independent
 * textbook check. Blocking steps synchronise on the pool's own count of
 * waiting acquires, never on a sleep. Every case runs under a watchdog that
 * prints the pool's state and aborts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"
#include "avoid/pool.h"

#include <inttypes.h>
#include <sched.h>
#include <string.h>

static ordo_t *O;

/* ---- A watchdog that prints the pool ------------------------------------ */

static struct {
  pthread_t thr;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
  bool running; /* main thread only: a case failed before wd_stop */
  ordo_pool_t *p;
  double seconds;
  const char *what;
} wd;

static void *wd_main(void *arg) {
  (void)arg;
  uint64_t end = tu_now_ns() + (uint64_t)(wd.seconds * 1e9);
  struct timespec ts = {(time_t)(end / 1000000000u), (long)(end % 1000000000u)};
  pthread_mutex_lock(&wd.mu);
  while (!wd.stop) {
    if (pthread_cond_timedwait(&wd.cv, &wd.mu, &ts) != 0 && !wd.stop) {
      fprintf(stderr, "WATCHDOG: '%s' did not finish within %.0f s; pool:\n",
              wd.what, wd.seconds);
      fflush(stderr);
      ordo__pool_dump(wd.p, 2);
      abort();
    }
  }
  pthread_mutex_unlock(&wd.mu);
  return NULL;
}

static void wd_start(ordo_pool_t *p, double seconds, const char *what) {
  const char *m = getenv("ORDO_TEST_TIMEOUT_MULT");
  double mult = m ? atof(m) : 1.0;
  wd.stop = false;
  wd.p = p;
  wd.seconds = seconds * (mult > 0 ? mult : 1.0);
  wd.what = what;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&wd.mu, NULL);
  pthread_cond_init(&wd.cv, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&wd.thr, NULL, wd_main, NULL) != 0)
    abort();
  wd.running = true;
}

static void wd_stop(void) {
  if (!wd.running)
    return;
  wd.running = false;
  pthread_mutex_lock(&wd.mu);
  wd.stop = true;
  pthread_cond_signal(&wd.cv);
  pthread_mutex_unlock(&wd.mu);
  pthread_join(wd.thr, NULL);
  pthread_mutex_destroy(&wd.mu);
  pthread_cond_destroy(&wd.cv);
}

/* ---- Helpers ------------------------------------------------------------- */

static int setup(void **state) {
  (void)state;
  return ordo_open(&O, "mem://", NULL) == 0 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  wd_stop(); /* a failed case longjmps past its own wd_stop */
  ordo_close(O);
  O = NULL;
  return 0;
}

static ordo_txn_t *txn(void) {
  ordo_txn_t *t = NULL;
  if (ordo_txn_begin(O, &t, NULL) != 0)
    abort(); /* also called from worker threads, where cmocka cannot */
  return t;
}

static ordo_pool_t *pool(uint64_t units) {
  ordo_pool_t *p = NULL;
  assert_int_equal(ordo_pool_create(&p, units), 0);
  return p;
}

/* A client that declares claim and then takes held units. */
static ordo_txn_t *client(ordo_pool_t *p, uint64_t claim, uint64_t held) {
  ordo_txn_t *t = txn();
  assert_int_equal(ordo_pool_declare(p, t, claim), 0);
  if (held > 0)
    assert_int_equal(ordo_pool_acquire(p, t, held, 0), 0);
  assert_true(ordo__pool_is_safe(p));
  return t;
}

static void done(ordo_pool_t *p, ordo_txn_t *t) {
  assert_int_equal(ordo_pool_leave(p, t), 0);
  ordo_txn_end(t);
}

/* Waits (bounded, 5 s) until exactly n acquires are queued in p. */
static bool wait_waiting(ordo_pool_t *p, size_t n) {
  uint64_t end = tu_now_ns() + 5000000000u;
  while (tu_now_ns() < end) {
    if (ordo__pool_waiting(p) == n)
      return true;
    tu_sleep_us(100);
  }
  return false;
}

/* A thread that runs one acquire and records the result. */
typedef struct {
  ordo_pool_t *p;
  ordo_txn_t *t;
  uint64_t n;
  long timeout_ms;
  int rc;
  _Atomic int done;
  pthread_t thr;
} acquirer;

static void *acquirer_main(void *arg) {
  acquirer *a = arg;
  a->rc = ordo_pool_acquire(a->p, a->t, a->n, a->timeout_ms);
  atomic_store(&a->done, 1);
  return NULL;
}

static void acquirer_start(acquirer *a) {
  atomic_store(&a->done, 0);
  if (pthread_create(&a->thr, NULL, acquirer_main, a) != 0)
    abort();
}

static int acquirer_join(acquirer *a) {
  pthread_join(a->thr, NULL);
  return a->rc;
}

/* ---- Textbook states ----------------------------------------------------- */

/* Silberschatz's classic: 12 units; A claims 10 and holds 5, B claims 4 and
 * holds 2, C claims 9 and holds 2; 3 are free. Safe, by <B, A, C>. C asking
 * one more would leave 2 free and needs A 5, B 2, C 6: B can finish (4
 * free), then nobody: unsafe, so it is refused though a unit is free. B
 * asking its last 2 is safe (B finishes with 1 free, then A, then C). */
static void test_textbook_silberschatz(void **state) {
  (void)state;
  ordo_pool_t *p = pool(12);
  wd_start(p, 20, "textbook silberschatz");
  ordo_txn_t *a = client(p, 10, 5);
  ordo_txn_t *b = client(p, 4, 2);
  ordo_txn_t *c = client(p, 9, 2);
  assert_int_equal(ordo_pool_available(p), 3);
  assert_true(ordo__pool_is_safe(p));

  assert_int_equal(ordo_pool_acquire(p, c, 1, 0), ORDO_ETIMEDOUT);
  assert_int_equal(ordo_pool_available(p), 3); /* nothing changed */
  assert_int_equal(ordo__pool_waiting(p), 0);  /* try-once never queues */
  /* A asking 2 is unsafe too: 1 free against needs of A 3, B 2, C 7. */
  assert_int_equal(ordo_pool_acquire(p, a, 2, 0), ORDO_ETIMEDOUT);

  assert_int_equal(ordo_pool_acquire(p, b, 2, 0), 0);
  assert_int_equal(ordo_pool_available(p), 1);
  assert_true(ordo__pool_is_safe(p));
  /* B finishes and gives back 4: 5 free. C's 1 is still unsafe (4 free
   * against A 5, C 6), but A may take the rest of its claim: it can then
   * finish, and after it C. Once A gives everything back, C's 1 is safe. */
  assert_int_equal(ordo_pool_release(p, b, 4), 0);
  assert_int_equal(ordo_pool_acquire(p, c, 1, 0), ORDO_ETIMEDOUT);
  assert_int_equal(ordo_pool_acquire(p, a, 5, 0), 0);
  assert_int_equal(ordo_pool_available(p), 0);
  assert_true(ordo__pool_is_safe(p));
  assert_int_equal(ordo_pool_release(p, a, 10), 0);
  assert_int_equal(ordo_pool_acquire(p, c, 1, 0), 0);
  assert_int_equal(ordo_pool_available(p), 9);
  assert_true(ordo__pool_is_safe(p));

  done(p, a);
  done(p, b);
  done(p, c);
  assert_int_equal(ordo_pool_available(p), 12);
  wd_stop();
  ordo_pool_destroy(p);
}

/* Our own: 6 units and three clients claiming 5 each cannot each hold 2.
 * With A at 2 (4 free), B asking 2 would leave 2 free against needs of 3, 3
 * and 5: nobody could finish. B may have 1 (3 free: A 3, then B 4, then C).
 * The same request is safe or not depending only on the others. */
static void test_unsafe_equal_claims(void **state) {
  (void)state;
  ordo_pool_t *p = pool(6);
  wd_start(p, 20, "unsafe equal claims");
  ordo_txn_t *a = client(p, 5, 2);
  ordo_txn_t *b = client(p, 5, 0);
  ordo_txn_t *c = client(p, 5, 0);
  assert_int_equal(ordo_pool_acquire(p, b, 2, 0), ORDO_ETIMEDOUT);
  assert_int_equal(ordo_pool_acquire(p, b, 1, 0), 0);
  assert_int_equal(ordo_pool_available(p), 3);
  /* Now anything for C is unsafe: C 1 leaves 2 free against A 3, B 4. */
  assert_int_equal(ordo_pool_acquire(p, c, 1, 0), ORDO_ETIMEDOUT);
  /* A can take its whole claim: it then finishes, and so can the rest. */
  assert_int_equal(ordo_pool_acquire(p, a, 3, 0), 0);
  assert_int_equal(ordo_pool_available(p), 0);
  assert_true(ordo__pool_is_safe(p));
  /* A full pool refuses at once, claim or not. */
  assert_int_equal(ordo_pool_acquire(p, b, 1, 0), ORDO_ETIMEDOUT);
  done(p, a);
  assert_int_equal(ordo_pool_acquire(p, c, 1, 0), 0);
  done(p, b);
  done(p, c);
  assert_int_equal(ordo_pool_available(p), 6);

  /* A single client may hold its whole claim, up to every unit. */
  ordo_txn_t *d = client(p, 6, 6);
  assert_int_equal(ordo_pool_available(p), 0);
  done(p, d);
  wd_stop();
  ordo_pool_destroy(p);
}

/* Declaring again with nothing held changes the claim; holding, it is
 * refused; after leave the claim is forgotten. */
static void test_redeclare_and_leave(void **state) {
  (void)state;
  ordo_pool_t *p = pool(8);
  wd_start(p, 20, "redeclare and leave");
  ordo_txn_t *a = client(p, 3, 0);
  assert_int_equal(ordo_pool_acquire(p, a, 4, 0), ORDO_EINVAL);
  assert_int_equal(ordo_pool_declare(p, a, 6), 0);
  assert_int_equal(ordo_pool_acquire(p, a, 4, 0), 0);
  assert_int_equal(ordo_pool_declare(p, a, 8), ORDO_EBUSY);
  assert_int_equal(ordo_pool_declare(p, a, 2), ORDO_EBUSY);
  assert_int_equal(ordo_pool_release(p, a, 4), 0);
  assert_int_equal(ordo_pool_declare(p, a, 2), 0);
  assert_int_equal(ordo_pool_acquire(p, a, 3, 0), ORDO_EINVAL);
  assert_int_equal(ordo_pool_acquire(p, a, 2, 0), 0);
  assert_int_equal(ordo_pool_leave(p, a), 0);
  assert_int_equal(ordo_pool_available(p), 8);
  /* Forgotten: acquire, release and leave see an undeclared client. */
  assert_int_equal(ordo_pool_acquire(p, a, 1, 0), ORDO_EINVAL);
  assert_int_equal(ordo_pool_release(p, a, 1), ORDO_EINVAL);
  assert_int_equal(ordo_pool_leave(p, a), ORDO_EINVAL);
  ordo_txn_end(a);
  wd_stop();
  ordo_pool_destroy(p);
}

/* ---- Try-once against waiting -------------------------------------------- */

/* In the textbook state, C's unsafe request waits. B finishing is not
 * enough (5 free, C's 1 leaves 4 against A 5, C 6); A's release of 5 is,
 * and the releaser grants it before the waiter runs. */
static void test_wait_until_safe(void **state) {
  (void)state;
  ordo_pool_t *p = pool(12);
  wd_start(p, 20, "wait until safe");
  ordo_txn_t *a = client(p, 10, 5);
  ordo_txn_t *b = client(p, 4, 2);
  ordo_txn_t *c = client(p, 9, 2);
  acquirer w = {.p = p, .t = c, .n = 1, .timeout_ms = ORDO_FOREVER};
  acquirer_start(&w);
  assert_true(wait_waiting(p, 1));
  assert_int_equal(ordo_pool_available(p), 3); /* a waiter holds nothing */
  /* While C waits, a second acquire of the same txn is refused, and C
   * cannot leave or declare again. */
  assert_int_equal(ordo_pool_acquire(p, c, 1, 0), ORDO_EBUSY);
  assert_int_equal(ordo_pool_leave(p, c), ORDO_EBUSY);
  assert_int_equal(ordo_pool_declare(p, c, 9), ORDO_EBUSY);
  /* A safe request is granted past the waiter. */
  assert_int_equal(ordo_pool_acquire(p, b, 2, 0), 0);
  assert_int_equal(ordo_pool_leave(p, b), 0);
  /* The pass ran inside leave: C is still unsafe, so still queued. */
  assert_int_equal(ordo__pool_waiting(p), 1);
  assert_int_equal(atomic_load(&w.done), 0);
  assert_int_equal(ordo_pool_available(p), 5);

  assert_int_equal(ordo_pool_release(p, a, 5), 0);
  /* Granted inside release, on C's behalf: 10 - 1 free now. */
  assert_int_equal(ordo__pool_waiting(p), 0);
  assert_int_equal(ordo_pool_available(p), 9);
  assert_int_equal(acquirer_join(&w), 0);
  assert_true(ordo__pool_is_safe(p));
  assert_int_equal(ordo_pool_release(p, c, 3), 0); /* it holds 2 + 1 */
  ordo_txn_end(b);
  done(p, a);
  done(p, c);
  assert_int_equal(ordo_pool_available(p), 12);
  wd_stop();
  ordo_pool_destroy(p);
}

/* A bounded wait that never becomes safe times out holding nothing new and
 * leaves the queue; a later release grants nobody by mistake. */
static void test_timed_wait_times_out(void **state) {
  (void)state;
  ordo_pool_t *p = pool(4);
  wd_start(p, 20, "timed wait times out");
  ordo_txn_t *a = client(p, 4, 3);
  ordo_txn_t *b = client(p, 2, 0);
  uint64_t t0 = tu_now_ns();
  assert_int_equal(ordo_pool_acquire(p, b, 1, 50), ORDO_ETIMEDOUT);
  assert_true(tu_now_ns() - t0 >= 50u * 1000000u);
  assert_int_equal(ordo__pool_waiting(p), 0);
  assert_int_equal(ordo_pool_available(p), 1);
  assert_int_equal(ordo_pool_release(p, a, 1), 0);
  assert_int_equal(ordo_pool_available(p), 2);
  assert_int_equal(ordo_pool_release(p, b, 1), ORDO_EINVAL); /* holds 0 */
  /* Now B's 1 is safe: it leaves 1 free, B needs 1 and finishes, giving
   * back 2, and then A's need of 2 fits. */
  assert_int_equal(ordo_pool_acquire(p, b, 1, 50), 0);
  done(p, a);
  done(p, b);
  wd_stop();
  ordo_pool_destroy(p);
}

/* Two waiters; a release that makes only the older one safe grants it and
 * wakes it alone; the other stays queued until a later release. */
static void test_wake_only_the_granted(void **state) {
  (void)state;
  ordo_pool_t *p = pool(10);
  wd_start(p, 20, "wake only the granted");
  ordo_txn_t *h = client(p, 10, 10); /* holds everything */
  ordo_txn_t *x = client(p, 4, 0);
  ordo_txn_t *y = client(p, 8, 0);
  acquirer wx = {.p = p, .t = x, .n = 4, .timeout_ms = ORDO_FOREVER};
  acquirer wy = {.p = p, .t = y, .n = 8, .timeout_ms = ORDO_FOREVER};
  acquirer_start(&wx);
  assert_true(wait_waiting(p, 1));
  acquirer_start(&wy);
  assert_true(wait_waiting(p, 2));
  /* 5 free with H needing 5: X's 4 is safe (X finishes, 5 free again);
   * Y's 8 does not fit. */
  assert_int_equal(ordo_pool_release(p, h, 5), 0);
  assert_int_equal(ordo__pool_waiting(p), 1);
  assert_int_equal(acquirer_join(&wx), 0);
  assert_int_equal(atomic_load(&wy.done), 0);
  assert_int_equal(ordo_pool_available(p), 1);
  /* X leaves: 5 free, Y's 8 still does not fit. H leaves: Y is granted. */
  assert_int_equal(ordo_pool_leave(p, x), 0);
  assert_int_equal(ordo__pool_waiting(p), 1);
  assert_int_equal(ordo_pool_leave(p, h), 0);
  assert_int_equal(acquirer_join(&wy), 0);
  assert_int_equal(ordo_pool_available(p), 2);
  ordo_txn_end(x);
  ordo_txn_end(h);
  done(p, y);
  wd_stop();
  ordo_pool_destroy(p);
}

/* ---- Bad input ----------------------------------------------------------- */

/* Each bad call returns a clear error and changes nothing. */
static void test_bad_input(void **state) {
  (void)state;
  ordo_pool_t *p = NULL;
  assert_int_equal(ordo_pool_create(&p, 0), ORDO_EINVAL);
  assert_int_equal(ordo_pool_create(NULL, 4), ORDO_EINVAL);
  p = pool(5);
  wd_start(p, 20, "bad input");
  ordo_txn_t *a = client(p, 3, 2);
  ordo_txn_t *u = txn(); /* never declared */

  assert_int_equal(ordo_pool_declare(p, u, 6), ORDO_EINVAL);    /* > units */
  assert_int_equal(ordo_pool_declare(p, u, 0), ORDO_EINVAL);    /* nothing */
  assert_int_equal(ordo_pool_acquire(p, u, 1, 0), ORDO_EINVAL); /* undecl. */
  assert_int_equal(ordo_pool_acquire(p, u, 1, 100), ORDO_EINVAL);
  assert_int_equal(ordo_pool_release(p, u, 1), ORDO_EINVAL);
  assert_int_equal(ordo_pool_leave(p, u), ORDO_EINVAL);
  assert_int_equal(ordo_pool_acquire(p, a, 2, 0), ORDO_EINVAL); /* 2 > 3-2 */
  assert_int_equal(ordo_pool_acquire(p, a, 2, ORDO_FOREVER), ORDO_EINVAL);
  assert_int_equal(ordo_pool_release(p, a, 3), ORDO_EINVAL); /* holds 2 */
  assert_int_equal(ordo_pool_declare(p, a, 9), ORDO_EINVAL);
  assert_int_equal(ordo_pool_declare(p, a, 3), ORDO_EBUSY); /* holds 2 */
  assert_int_equal(ordo_pool_declare(NULL, a, 1), ORDO_EINVAL);
  assert_int_equal(ordo_pool_acquire(p, NULL, 1, 0), ORDO_EINVAL);
  assert_int_equal(ordo_pool_release(p, NULL, 1), ORDO_EINVAL);
  assert_int_equal(ordo_pool_leave(NULL, a), ORDO_EINVAL);

  /* Nothing changed: A still holds exactly 2 of a claim of 3. */
  assert_int_equal(ordo_pool_available(p), 3);
  assert_int_equal(ordo__pool_waiting(p), 0);
  assert_true(ordo__pool_is_safe(p));
  assert_int_equal(ordo_pool_acquire(p, a, 1, 0), 0);
  assert_int_equal(ordo_pool_release(p, a, 3), 0);
  /* n == 0 is a no-op for a declared client. */
  assert_int_equal(ordo_pool_acquire(p, a, 0, 0), 0);
  assert_int_equal(ordo_pool_release(p, a, 0), 0);
  assert_int_equal(ordo_pool_available(p), 5);

  /* Txn ids are unique per ordo_t only: a txn of another place with the
   * same id is another client. */
  ordo_t *o2 = NULL;
  assert_int_equal(ordo_open(&o2, "mem://", NULL), 0);
  ordo_txn_t *other = NULL;
  do {
    if (other)
      ordo_txn_end(other);
    assert_int_equal(ordo_txn_begin(o2, &other, NULL), 0);
  } while (ordo_txn_id(other) < ordo_txn_id(a));
  if (ordo_txn_id(other) == ordo_txn_id(a))
    assert_int_equal(ordo_pool_acquire(p, other, 1, 0), ORDO_EINVAL);
  ordo_txn_end(other);
  ordo_close(o2);

  ordo_txn_end(u);
  done(p, a);
  wd_stop();
  ordo_pool_destroy(p);
}

/* ---- The random run ------------------------------------------------------ */

#define RUN_THREADS 8
#define RUN_UNITS 16

static pthread_barrier_t run_start; /* every worker starts at once */

typedef struct {
  ordo_pool_t *p;
  ordo_txn_t *t;
  long ops;
  uint64_t rng;
  long grants, refusals, failures;
  char why[160];
} worker;

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void worker_fail(worker *w, const char *what, int rc) {
  if (w->failures++ == 0)
    snprintf(w->why, sizeof w->why, "txn %" PRIu64 ": %s (rc %d, %s)",
             ordo_txn_id(w->t), what, rc, ordo_err_name(rc));
}

/* Random declares, acquires (timeouts of 0..4 ms, now and then forever),
 * releases and leaves; every grant is followed by the textbook check. */
static void *worker_main(void *arg) {
  worker *w = arg;
  uint64_t claim = 0, held = 0;
  pthread_barrier_wait(&run_start);
  for (long i = 0; i < w->ops; i++) {
    unsigned r = (unsigned)(next_rand(&w->rng) % 100);
    int rc;
    if (claim == 0) {
      claim = 1 + next_rand(&w->rng) % RUN_UNITS;
      if ((rc = ordo_pool_declare(w->p, w->t, claim)) != 0)
        worker_fail(w, "declare", rc);
    } else if (r < 50 && held < claim) {
      uint64_t n = 1 + next_rand(&w->rng) % (claim - held);
      long to = (long)(next_rand(&w->rng) % 5);
      if (next_rand(&w->rng) % 32 == 0)
        to = ORDO_FOREVER;
      rc = ordo_pool_acquire(w->p, w->t, n, to);
      if (rc == 0) {
        held += n;
        w->grants++;
        if (!ordo__pool_is_safe(w->p))
          worker_fail(w, "unsafe state after a grant", 0);
        sched_yield(); /* hold a moment, so that others meet the state */
      } else if (rc == ORDO_ETIMEDOUT && to != ORDO_FOREVER) {
        w->refusals++;
      } else {
        worker_fail(w, "acquire", rc);
      }
    } else if (r < 85 && held > 0) {
      uint64_t n = 1 + next_rand(&w->rng) % held;
      if ((rc = ordo_pool_release(w->p, w->t, n)) != 0)
        worker_fail(w, "release", rc);
      held -= n;
      if (!ordo__pool_is_safe(w->p))
        worker_fail(w, "unsafe state after a release", 0);
    } else if (r < 93) {
      if ((rc = ordo_pool_leave(w->p, w->t)) != 0)
        worker_fail(w, "leave", rc);
      claim = held = 0;
    } else {
      uint64_t c = 1 + next_rand(&w->rng) % RUN_UNITS;
      rc = ordo_pool_declare(w->p, w->t, c);
      if (held > 0 && rc != ORDO_EBUSY)
        worker_fail(w, "declare while holding", rc);
      else if (held == 0 && rc != 0)
        worker_fail(w, "declare again", rc);
      else if (rc == 0)
        claim = c;
    }
  }
  if (claim > 0) {
    int rc = ordo_pool_leave(w->p, w->t);
    if (rc != 0)
      worker_fail(w, "final leave", rc);
  }
  return NULL;
}

static void test_random_run(void **state) {
  (void)state;
  ordo_pool_t *p = pool(RUN_UNITS);
  wd_start(p, 100, "random run");
  long total = tu_scaled(20000);
  const char *s = getenv("ORDO_TEST_SEED");
  uint64_t seed = s ? strtoull(s, NULL, 0) : tu_now_ns();
  fprintf(stderr, "random run: %ld ops, seed %" PRIu64 "\n", total, seed);
  worker w[RUN_THREADS];
  pthread_t thr[RUN_THREADS];
  pthread_barrier_init(&run_start, NULL, RUN_THREADS);
  for (int i = 0; i < RUN_THREADS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].p = p;
    w[i].t = txn();
    w[i].ops = total / RUN_THREADS;
    w[i].rng = (seed + (uint64_t)i + 1) * 0x9E3779B97F4A7C15u;
    if (w[i].rng == 0)
      w[i].rng = 1;
    if (pthread_create(&thr[i], NULL, worker_main, &w[i]) != 0)
      abort();
  }
  long grants = 0, refusals = 0, failures = 0;
  for (int i = 0; i < RUN_THREADS; i++) {
    pthread_join(thr[i], NULL);
    grants += w[i].grants;
    refusals += w[i].refusals;
    failures += w[i].failures;
    if (w[i].failures)
      fprintf(stderr, "  %s\n", w[i].why);
  }
  pthread_barrier_destroy(&run_start);
  uint64_t pg, pw, pt;
  ordo__pool_counters(p, &pg, &pw, &pt);
  fprintf(stderr,
          "random run: %ld grants, %ld timed out; the pool counted %" PRIu64
          " grants, %" PRIu64 " waits, %" PRIu64 " time-outs\n",
          grants, refusals, pg, pw, pt);
  assert_int_equal(pg, (uint64_t)grants);
  assert_int_equal(pt, (uint64_t)refusals);
  assert_int_equal(failures, 0);
  assert_true(grants > 0);
  assert_int_equal(ordo_pool_available(p), RUN_UNITS);
  assert_int_equal(ordo__pool_waiting(p), 0);
  assert_true(ordo__pool_is_safe(p));
  for (int i = 0; i < RUN_THREADS; i++)
    ordo_txn_end(w[i].t);
  wd_stop();
  ordo_pool_destroy(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_textbook_silberschatz, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_unsafe_equal_claims, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_redeclare_and_leave, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_wait_until_safe, setup, teardown),
      cmocka_unit_test_setup_teardown(test_timed_wait_times_out, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_wake_only_the_granted, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
      cmocka_unit_test_setup_teardown(test_random_run, setup, teardown),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
