/*
 * philo.c -- the dining philosophers of Howard Hinnant's "Dining
 * Philosophers Rebooted", a family of rows of the benchmark harness; see
 * README.md.
 *
 * N diners sit at a round table with N forks; fork i lies between diner i
 * and diner i+1 (mod N), so diner i eats with forks i-1 and i. No diner ever
 * thinks: each repeatedly takes its two forks, eats one bite of busy work (a
 * random 1-10 ms, spinning on CLOCK_MONOTONIC, never sleeping), puts the
 * forks down, and asks again, until it has eaten its share (300 ms in a
 * full-length run). A run's value is its wall time in seconds, from the
 * first diner's start to the last diner's last bite. The forks are taken
 *
 *   - through ordo: one ordo_lock_all of the two forks' keys, in the random
 *     order the diner drew them, on a "mem://" place with default options
 *     (one txn per diner; $PHILO_URL, if set, names another place, such as
 *     mem://?starvation_holds=0 to compare the grant rules), then
 *     ordo_unlock_all;
 *   - through std::scoped_lock of two std::mutex, in the same random order
 *     (philo_peer.cc, C++17, libstdc++'s std::lock);
 *   - through two pthread mutexes, the lower-numbered fork first (the
 *     classic ordered solution, which holds one fork while it waits for the
 *     other).
 *
 * With busy eating and no thinking the run is bounded by the CPUs: at most
 * min(CPUs, N/2) diners eat at once, so the wall time can be no shorter
 * than N x share / min(CPUs, N/2). What a lock can lose is the time when a
 * CPU could have fed a diner whose forks were free and did not: a hand-over
 * to a thread still waking up, a waiter spinning on a CPU an eater needed,
 * a neighbour kept out by one that holds a fork while it waits.
 *
 * Every bite checks that no other diner is eating with either fork at the
 * same time (each fork records its eater); a diner that finds one fails the
 * run. Each diner must end having eaten exactly its share.
 *
 * Interface:
 *   bench_philo_table      the rows philo_scoped_d* and philo_ordered_d*
 *   philo_count(), philo_diner(), philo_start(), philo_hungry(),
 *   philo_pick(), philo_now_ns(), philo_eat()
 *                          one run's shared parts, for the C++ side
 *                          (philo_peer.cc: philo_run_scoped_lock())
 */
#include "bench.h"

#include <ordo.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One fork per cache line, for every side alike. */
typedef struct philo_fork_s {
  _Alignas(64) pthread_mutex_t mu; /* the ordered peer's lock */
  atomic_int eater;                /* the diner eating with it, or -1 */
  uint8_t key[8];                  /* ordo_key_u64(fork number) */
} philo_fork_t;

/* A diner's own state, on its own cache lines; written by its thread only,
 * read by the driver after the join. */
struct philo_diner_s {
  _Alignas(64) philo_t *p;
  pthread_t tid;
  int id;
  size_t left, right; /* fork numbers: id-1 and id (mod N) */
  uint64_t rng;
  int64_t eaten_ns;    /* eaten so far; ends equal to p->share_ns */
  int64_t meals;       /* bites eaten */
  int64_t wait_ns;     /* time spent asking for forks, in all */
  int64_t max_wait_ns; /* the longest single ask */
  int64_t start_ns;    /* when it passed the start barrier */
  int64_t done_ns;     /* when its last bite ended */
  const char *failed;  /* the call that failed, or NULL */
  int rc;              /* what it returned */
};

struct philo_s {
  const bench_row_t *row;
  size_t n;
  int64_t share_ns; /* what each diner must eat */
  int64_t bite_min_ns, bite_max_ns;
  philo_fork_t *fork;
  philo_diner_t *diner;
  ordo_t *o; /* the place; NULL in the peers' runs */
  pthread_barrier_t start;
  atomic_int stop; /* set by a failure: every diner stops */
};

typedef enum philo_side_e {
  PHILO_ORDO,
  PHILO_SCOPED,
  PHILO_ORDERED
} philo_side_t;

/* ---- The parts every side shares ---------------------------------------- */

int64_t philo_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

size_t philo_count(const philo_t *p) {
  return p->n;
}

philo_diner_t *philo_diner(philo_t *p, size_t i) {
  return &p->diner[i];
}

static void philo_fail(philo_diner_t *d, const char *call, int rc) {
  if (d->failed == NULL) {
    d->failed = call;
    d->rc = rc;
  }
  atomic_store(&d->p->stop, 1);
}

/*
 * philo_start -- waits until every diner of the run is seated, then notes
 * the time. Every diner calls it once, before its first ask, whatever
 * happened before (a diner that failed to begin its txn still sits down, so
 * that the others are not left waiting at the barrier).
 */
void philo_start(philo_diner_t *d) {
  pthread_barrier_wait(&d->p->start);
  d->start_ns = philo_now_ns();
}

/* Whether the diner has more to eat (and the run has not failed). */
int philo_hungry(const philo_diner_t *d) {
  return d->eaten_ns < d->p->share_ns &&
         !atomic_load_explicit(&d->p->stop, memory_order_relaxed);
}

/* The diner's two forks in a random order: the order it asks for them in. */
void philo_pick(philo_diner_t *d, size_t *first, size_t *second) {
  int swap = (int)(bench_rng_next(&d->rng) >> 63);
  *first = swap ? d->right : d->left;
  *second = swap ? d->left : d->right;
}

/* Marks the fork as eaten with by d; fails the run if someone else is. */
static void philo_fork_take(philo_diner_t *d, size_t f) {
  int none = -1;
  if (!atomic_compare_exchange_strong(&d->p->fork[f].eater, &none, d->id))
    philo_fail(d, "two diners ate with one fork", none);
}

static void philo_fork_put(philo_diner_t *d, size_t f) {
  int me = d->id;
  if (!atomic_compare_exchange_strong(&d->p->fork[f].eater, &me, -1))
    philo_fail(d, "two diners ate with one fork", me);
}

/*
 * philo_eat -- one bite, with both forks held: records the wait that began
 * at asked_ns, checks that no one else eats with the forks, and spins on
 * the clock for a random 1-10 ms (less for the last bite, so that every
 * diner eats exactly its share).
 */
void philo_eat(philo_diner_t *d, int64_t asked_ns) {
  philo_t *p = d->p;
  int64_t t0 = philo_now_ns();
  int64_t wait = t0 - asked_ns;
  d->wait_ns += wait;
  if (wait > d->max_wait_ns)
    d->max_wait_ns = wait;
  d->meals++;

  philo_fork_take(d, d->left);
  philo_fork_take(d, d->right);
  uint64_t span = (uint64_t)(p->bite_max_ns - p->bite_min_ns) + 1;
  int64_t bite = p->bite_min_ns + (int64_t)(bench_rng_next(&d->rng) % span);
  if (bite > p->share_ns - d->eaten_ns)
    bite = p->share_ns - d->eaten_ns;
  int64_t end = t0 + bite, now;
  do
    now = philo_now_ns();
  while (now < end);
  d->eaten_ns += bite;
  philo_fork_put(d, d->right);
  philo_fork_put(d, d->left);
  if (d->eaten_ns >= p->share_ns)
    d->done_ns = now;
}

/* ---- The sides ------------------------------------------------------------
 */

static void *philo_diner_ordo(void *arg) {
  philo_diner_t *d = arg;
  philo_t *p = d->p;
  ordo_txn_t *t = NULL;

  int rc = ordo_txn_begin(p->o, &t, NULL);
  if (rc != 0) {
    t = NULL;
    philo_fail(d, "ordo_txn_begin", rc);
  }
  philo_start(d);
  while (t != NULL && philo_hungry(d)) {
    size_t a, b;
    philo_pick(d, &a, &b);
    /* Unordered on purpose: putting the keys in order is ordo's job. */
    ordo_req_t r[2] = {ORDO_REQ_X(p->fork[a].key, 8),
                       ORDO_REQ_X(p->fork[b].key, 8)};
    int64_t asked = philo_now_ns();
    rc = ordo_lock_all(t, r, 2, ORDO_FOREVER);
    if (rc != 0) {
      philo_fail(d, "ordo_lock_all", rc);
      break;
    }
    philo_eat(d, asked);
    rc = ordo_unlock_all(t);
    if (rc != 2) {
      philo_fail(d, "ordo_unlock_all", rc);
      break;
    }
  }
  if (t != NULL)
    ordo_txn_end(t);
  return NULL;
}

static void *philo_diner_ordered(void *arg) {
  philo_diner_t *d = arg;
  philo_t *p = d->p;
  int rc;

  philo_start(d);
  while (philo_hungry(d)) {
    size_t a, b;
    philo_pick(d, &a, &b); /* drawn as the other sides do, then ordered */
    size_t lo = a < b ? a : b, hi = a < b ? b : a;
    int64_t asked = philo_now_ns();
    if ((rc = pthread_mutex_lock(&p->fork[lo].mu)) != 0) {
      philo_fail(d, "pthread_mutex_lock", rc);
      break;
    }
    if ((rc = pthread_mutex_lock(&p->fork[hi].mu)) != 0) {
      pthread_mutex_unlock(&p->fork[lo].mu);
      philo_fail(d, "pthread_mutex_lock", rc);
      break;
    }
    philo_eat(d, asked);
    pthread_mutex_unlock(&p->fork[hi].mu);
    pthread_mutex_unlock(&p->fork[lo].mu);
  }
  return NULL;
}

/*
 * philo_share_ns -- what each diner eats in a run of `seconds`: eat_ms at
 * the harness's full-length run (full_run_ms, 500) or longer; in shorter
 * runs (--quick, and every warm-up) in proportion, so that --quick stays
 * short. The harness's own `seconds` is otherwise ignored: a run lasts as
 * long as the diners take to eat.
 */
static int64_t philo_share_ns(const bench_row_t *row, double seconds) {
  double eat_ms = (double)bench_param_int(row, "eat_ms");
  double full_s = (double)bench_param_int(row, "full_run_ms") / 1000.0;
  double scale = seconds < full_s ? seconds / full_s : 1.0;
  return (int64_t)llround(eat_ms * scale * 1e6);
}

/*
 * philo_run -- one run of one side. Everything is built afresh (forks,
 * mutexes, the ordo place) so that runs inherit nothing from each other.
 */
static int philo_run(const bench_row_t *row, philo_side_t side, double seconds,
                     double *out) {
  long long n = bench_param_int(row, "diners");
  long long bmin = bench_param_int(row, "bite_min_ms");
  long long bmax = bench_param_int(row, "bite_max_ms");
  if (n < 2 || bmin < 1 || bmax < bmin) {
    bench_error(row, "needs diners >= 2 and 1 <= bite_min_ms <= bite_max_ms");
    return -1;
  }

  philo_t p;
  memset(&p, 0, sizeof p);
  p.row = row;
  p.n = (size_t)n;
  p.share_ns = philo_share_ns(row, seconds);
  if (p.share_ns < 1)
    p.share_ns = 1;
  p.bite_min_ns = bmin * 1000000;
  p.bite_max_ns = bmax * 1000000;
  p.fork = aligned_alloc(64, p.n * sizeof *p.fork);
  p.diner = aligned_alloc(64, p.n * sizeof *p.diner);
  if (p.fork == NULL || p.diner == NULL) {
    bench_error(row, "out of memory");
    free(p.fork);
    free(p.diner);
    return -1;
  }
  for (size_t i = 0; i < p.n; i++) {
    pthread_mutex_init(&p.fork[i].mu, NULL);
    atomic_init(&p.fork[i].eater, -1);
    ordo_key_u64(p.fork[i].key, i);
  }
  for (size_t i = 0; i < p.n; i++) {
    philo_diner_t *d = &p.diner[i];
    memset(d, 0, sizeof *d);
    d->p = &p;
    d->id = (int)i;
    d->left = (i + p.n - 1) % p.n;
    d->right = i;
    /* Fresh draws every run: bites and fork orders differ run to run. */
    d->rng =
        ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)philo_now_ns();
    if (d->rng == 0)
      d->rng = 1;
  }
  atomic_init(&p.stop, 0);

  int rc = 0;
  if (side == PHILO_ORDO &&
      (rc =
           ordo_open(&p.o, getenv("PHILO_URL") ? getenv("PHILO_URL") : "mem://",
                     NULL)) != 0) {
    bench_error(row, "ordo_open: %s", ordo_strerror(rc));
    p.o = NULL;
    goto done;
  }
  pthread_barrier_init(&p.start, NULL, (unsigned)p.n);

  if (side == PHILO_SCOPED) {
    rc = philo_run_scoped_lock(&p);
  } else {
    for (size_t i = 0; i < p.n; i++) {
      rc = pthread_create(&p.diner[i].tid, NULL,
                          side == PHILO_ORDO ? philo_diner_ordo
                                             : philo_diner_ordered,
                          &p.diner[i]);
      if (rc != 0) {
        /* The diners already seated wait at the barrier for ever. */
        bench_error(row, "pthread_create: %s", strerror(rc));
        exit(1);
      }
    }
    for (size_t i = 0; i < p.n; i++)
      pthread_join(p.diner[i].tid, NULL);
  }
  pthread_barrier_destroy(&p.start);
  if (rc != 0) {
    rc = -1;
    goto done;
  }

  const char *name = side == PHILO_ORDO     ? "ordo"
                     : side == PHILO_SCOPED ? "scoped_lock"
                                            : "ordered";
  for (size_t i = 0; i < p.n; i++) {
    philo_diner_t *d = &p.diner[i];
    if (d->failed == NULL)
      continue;
    int e = d->rc;
    if (strncmp(d->failed, "ordo_", 5) == 0 && e < 0)
      bench_error(row, "%s run: diner %zu: %s: %s (%s)", name, i, d->failed,
                  ordo_err_name(e), ordo_strerror(e));
    else if (strncmp(d->failed, "ordo_", 5) == 0)
      bench_error(row, "%s run: diner %zu: %s returned %d", name, i, d->failed,
                  e);
    else if (strncmp(d->failed, "pthread_", 8) == 0)
      bench_error(row, "%s run: diner %zu: %s: %s", name, i, d->failed,
                  strerror(e));
    else
      bench_error(row, "%s run: diner %zu: %s (the other was diner %d)", name,
                  i, d->failed, e);
    rc = -1;
    goto done;
  }

  int64_t t0 = INT64_MAX, t1 = INT64_MIN, first_done = INT64_MAX;
  int64_t max_wait = 0, wait = 0, meals = 0, min_meals = INT64_MAX;
  for (size_t i = 0; i < p.n; i++) {
    philo_diner_t *d = &p.diner[i];
    if (d->eaten_ns != p.share_ns) {
      bench_error(row, "%s run: diner %zu ate %lld ns, not %lld", name, i,
                  (long long)d->eaten_ns, (long long)p.share_ns);
      rc = -1;
      goto done;
    }
    t0 = d->start_ns < t0 ? d->start_ns : t0;
    t1 = d->done_ns > t1 ? d->done_ns : t1;
    first_done = d->done_ns < first_done ? d->done_ns : first_done;
    max_wait = d->max_wait_ns > max_wait ? d->max_wait_ns : max_wait;
    min_meals = d->meals < min_meals ? d->meals : min_meals;
    wait += d->wait_ns;
    meals += d->meals;
  }
  double wall = (double)(t1 - t0) / 1e9;
  *out = wall;
  bench_extra(row, "max_wait_ms", (double)max_wait / 1e6);
  bench_extra(row, "mean_wait_ms", (double)wait / (double)meals / 1e6);
  bench_extra(row, "min_meals", (double)min_meals);
  bench_extra(row, "first_done_pct",
              100.0 * (double)(first_done - t0) / (double)(t1 - t0));
  rc = 0;

done:
  if (p.o != NULL)
    ordo_close(p.o);
  for (size_t i = 0; i < p.n; i++)
    pthread_mutex_destroy(&p.fork[i].mu);
  free(p.fork);
  free(p.diner);
  return rc == 0 ? 0 : -1;
}

static int philo_run_ordo(const bench_row_t *row, void *state, double seconds,
                          double *out) {
  (void)state;
  return philo_run(row, PHILO_ORDO, seconds, out);
}

static int philo_run_scoped(const bench_row_t *row, void *state, double seconds,
                            double *out) {
  (void)state;
  return philo_run(row, PHILO_SCOPED, seconds, out);
}

static int philo_run_ordered(const bench_row_t *row, void *state,
                             double seconds, double *out) {
  (void)state;
  return philo_run(row, PHILO_ORDERED, seconds, out);
}

/* ---- The rows -------------------------------------------------------------
 */

#define PHILO_ROW(id_, diners, peer_, run_peer_, target_)                      \
  {                                                                            \
    .id = id_, .title = "Dining philosophers, " #diners " diners",             \
    .metric = "s", .higher_is_better = 0, .peer_name = peer_,                  \
    .target = target_,                                                         \
    .params = {{"diners", diners, NULL},                                       \
               {"eat_ms", 300, NULL},                                          \
               {"bite_min_ms", 1, NULL},                                       \
               {"bite_max_ms", 10, NULL},                                      \
               {"full_run_ms", 500, NULL}},                                    \
    .run_ordo = philo_run_ordo, .run_peer = run_peer_,                         \
    .extras = {"max_wait_ms", "mean_wait_ms", "min_meals", "first_done_pct"},  \
    .fixed_work = 1,                                                           \
  }
#define PHILO_SCOPED_ROW(id_, diners)                                          \
  PHILO_ROW(id_, diners, "std::scoped_lock", philo_run_scoped, 1.0)
#define PHILO_ORDERED_ROW(id_, diners)                                         \
  PHILO_ROW(id_, diners, "pthread, lower fork first", philo_run_ordered, NAN)

static const bench_row_t philo_rows[] = {
    PHILO_SCOPED_ROW("philo_scoped_d5", 5),
    PHILO_SCOPED_ROW("philo_scoped_d9", 9),
    PHILO_SCOPED_ROW("philo_scoped_d16", 16),
    PHILO_SCOPED_ROW("philo_scoped_d32", 32),
    PHILO_ORDERED_ROW("philo_ordered_d5", 5),
    PHILO_ORDERED_ROW("philo_ordered_d9", 9),
    PHILO_ORDERED_ROW("philo_ordered_d16", 16),
    PHILO_ORDERED_ROW("philo_ordered_d32", 32),
};

const bench_table_t bench_philo_table = {philo_rows, sizeof philo_rows /
                                                         sizeof philo_rows[0]};
