/*
 * exec.c -- the executor (issue 21): what submitting a task and waiting for
 * its future costs, against the thread pool people write, and what its
 * pool-deadlock detection costs; see README.md (rows exec_submit_wait_w*
 * and exec_detect_cost).
 *
 * The workload, the same for every side: `clients` threads outside the
 * pool, each in a loop until the run ends: submit a batch of `batch`
 * tasks, then wait for each future in turn and release it. A task returns
 * its argument plus one, and the client checks every value. The pool has
 * `workers` threads. Value: tasks done per second over the run, from the
 * start barrier to the last client's last batch.
 *
 *   exec_submit_wait_w2, _w8
 *     ordo  an ordo executor (ordo_exec_create on a fresh mem:// place,
 *           default options: policy INLINE, detection on);
 *     peer  this file's plain pool: one mutex and one condvar over a FIFO
 *           of tasks, a future being a mutex, a condvar and a done flag
 *           of its own (std::promise's shape), each task one malloc.
 *   exec_detect_cost
 *     ordo  the executor with opts.detect = 1, peer the same with
 *           opts.detect = 0: the detection's cost at each block event.
 *
 * Each run makes its pool and its place and ends them after it: a run
 * fails if a value is wrong, a call fails, or a place records a deadlock.
 *
 * Interface:
 *   bench_exec_table   the rows (bench.c lists them after its own rows)
 */
#include "bench.h"

#include <ordo.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EX_BATCH_MAX 64

/* ---- The peer: the pool people write --------------------------------------
 */

typedef struct pp_task_s {
  void *(*fn)(void *);
  void *arg, *value;
  pthread_mutex_t mu; /* guards done, value */
  pthread_cond_t cv;
  int done;
  struct pp_task_s *next; /* the queue, under the pool's mu */
} pp_task_t;

typedef struct pp_pool_s {
  pthread_mutex_t mu; /* guards head, tail, stop */
  pthread_cond_t work;
  pp_task_t *head, *tail;
  int stop;
  size_t n;
  pthread_t *thread;
} pp_pool_t;

static void *pp_worker(void *arg) {
  pp_pool_t *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    while (p->head == NULL && !p->stop)
      pthread_cond_wait(&p->work, &p->mu);
    pp_task_t *t = p->head;
    if (t == NULL) { /* stopped, and nothing queued */
      pthread_mutex_unlock(&p->mu);
      return NULL;
    }
    if ((p->head = t->next) == NULL)
      p->tail = NULL;
    pthread_mutex_unlock(&p->mu);
    void *v = t->fn(t->arg);
    pthread_mutex_lock(&t->mu);
    t->value = v, t->done = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
  }
}

static int pp_create(pp_pool_t *p, size_t n) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  if ((p->thread = calloc(n, sizeof *p->thread)) == NULL)
    return -1;
  for (; p->n < n; p->n++)
    if (pthread_create(&p->thread[p->n], NULL, pp_worker, p) != 0)
      return -1;
  return 0;
}

static void pp_destroy(pp_pool_t *p) {
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  for (size_t i = 0; i < p->n; i++)
    pthread_join(p->thread[i], NULL);
  free(p->thread);
  pthread_cond_destroy(&p->work);
  pthread_mutex_destroy(&p->mu);
}

static pp_task_t *pp_submit(pp_pool_t *p, void *(*fn)(void *), void *arg) {
  pp_task_t *t = malloc(sizeof *t);
  if (t == NULL)
    return NULL;
  *t = (pp_task_t){.fn = fn, .arg = arg};
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  pthread_mutex_lock(&p->mu);
  *(p->tail ? &p->tail->next : &p->head) = t;
  p->tail = t;
  pthread_cond_signal(&p->work);
  pthread_mutex_unlock(&p->mu);
  return t;
}

/* pp_get -- waits for t, frees it, returns its value. */
static void *pp_get(pp_task_t *t) {
  pthread_mutex_lock(&t->mu);
  while (!t->done)
    pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
  void *v = t->value;
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  free(t);
  return v;
}

/* ---- One run: clients on a pool of either kind ----------------------------
 */

enum { EX_ORDO, EX_PLAIN };

typedef struct ex_run_s {
  const bench_row_t *row;
  int kind;
  ordo_exec_t *e; /* EX_ORDO */
  pp_pool_t pp;   /* EX_PLAIN */
  size_t batch;
  pthread_barrier_t start;
  atomic_int stop;
} ex_run_t;

typedef struct ex_client_s {
  _Alignas(64) ex_run_t *r;
  pthread_t tid;
  uint64_t base;      /* the client's task arguments start here */
  uint64_t done;      /* tasks done and checked */
  const char *failed; /* the call that failed, or NULL */
  int rc;
} ex_client_t;

static void *ex_plus_one(void *arg) {
  return (void *)((uintptr_t)arg + 1);
}

/* ex_batch_ordo -- one batch through the executor: 0, or -1 with c's
 * failure set. */
static int ex_batch_ordo(ex_client_t *c, uintptr_t arg0) {
  ordo_future_t *f[EX_BATCH_MAX];
  size_t n = c->r->batch, k;
  int rc = 0;
  for (k = 0; k < n && rc == 0; k++)
    if ((rc = ordo_exec_submit(c->r->e, ex_plus_one, (void *)(arg0 + k),
                               &f[k])) < 0)
      c->failed = "ordo_exec_submit", c->rc = rc;
  size_t queued = rc == 0 ? n : k - 1;
  for (k = 0; k < queued; k++) {
    void *v = NULL;
    int w = ordo_future_wait(f[k], 10000, &v);
    if (w < 0 && c->failed == NULL)
      c->failed = "ordo_future_wait", c->rc = w;
    else if (w == 0 && (uintptr_t)v != arg0 + k + 1 && c->failed == NULL)
      c->failed = "a task's value", c->rc = 0;
    ordo_future_release(f[k]);
  }
  return c->failed ? -1 : 0;
}

static int ex_batch_plain(ex_client_t *c, uintptr_t arg0) {
  pp_task_t *t[EX_BATCH_MAX];
  size_t n = c->r->batch, k;
  for (k = 0; k < n; k++)
    if ((t[k] = pp_submit(&c->r->pp, ex_plus_one, (void *)(arg0 + k))) == NULL)
      break;
  if (k < n)
    c->failed = "malloc";
  for (size_t i = 0; i < k; i++)
    if ((uintptr_t)pp_get(t[i]) != arg0 + i + 1 && c->failed == NULL)
      c->failed = "a task's value";
  return c->failed ? -1 : 0;
}

static void *ex_client(void *arg) {
  ex_client_t *c = arg;
  ex_run_t *r = c->r;
  pthread_barrier_wait(&r->start);
  while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
    uintptr_t arg0 = (uintptr_t)(c->base + c->done);
    int rc =
        r->kind == EX_ORDO ? ex_batch_ordo(c, arg0) : ex_batch_plain(c, arg0);
    if (rc < 0) {
      atomic_store(&r->stop, 1);
      break;
    }
    c->done += r->batch;
  }
  return NULL;
}

/* ex_run -- one run of `seconds`: a pool (an executor with detection
 * `detect`, or the plain one), clients, tasks/s into *out. */
static int ex_run(const bench_row_t *row, int kind, int detect, double seconds,
                  double *out) {
  size_t workers = (size_t)bench_param_int(row, "workers");
  size_t clients = (size_t)bench_param_int(row, "clients");
  ex_run_t r = {.row = row, .kind = kind};
  r.batch = (size_t)bench_param_int(row, "batch");
  ordo_t *o = NULL;
  int rc = 0;
  if (kind == EX_ORDO) {
    ordo_exec_options_t eo;
    ordo_exec_options_init(&eo);
    eo.detect = detect;
    eo.name = "bench";
    if ((rc = ordo_open(&o, "mem://", NULL)) < 0 ||
        (rc = ordo_exec_create(&r.e, o, (unsigned)workers, &eo)) < 0) {
      bench_error(row, "ordo_open/ordo_exec_create: %s", ordo_strerror(rc));
      ordo_close(o);
      return -1;
    }
  } else if (pp_create(&r.pp, workers) != 0) {
    bench_error(row, "cannot start the plain pool's workers");
    pp_destroy(&r.pp);
    return -1;
  }
  ex_client_t *c = calloc(clients, sizeof *c);
  if (c == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  pthread_barrier_init(&r.start, NULL, (unsigned)clients + 1);
  size_t started = 0;
  for (; started < clients; started++) {
    c[started] = (ex_client_t){.r = &r, .base = (uint64_t)started << 40};
    if (pthread_create(&c[started].tid, NULL, ex_client, &c[started]) != 0)
      break;
  }
  if (started < clients) { /* the barrier would never open: abort */
    bench_error(row, "cannot start client thread %zu", started);
    abort();
  }
  pthread_barrier_wait(&r.start);
  double t0 = bench_now();
  bench_sleep(seconds);
  atomic_store(&r.stop, 1);
  uint64_t done = 0;
  const char *failed = NULL;
  int frc = 0;
  for (size_t i = 0; i < clients; i++) {
    pthread_join(c[i].tid, NULL);
    done += c[i].done;
    if (c[i].failed != NULL && failed == NULL)
      failed = c[i].failed, frc = c[i].rc;
  }
  double secs = bench_now() - t0;
  pthread_barrier_destroy(&r.start);
  free(c);
  int deadlocks = 0;
  if (kind == EX_ORDO) {
    ordo_deadlock_t rec[1];
    rc = ordo_exec_shutdown(r.e, ORDO_EXEC_DRAIN, 10000);
    ordo_exec_destroy(r.e);
    deadlocks = ordo_deadlocks(o, rec, 1);
    ordo_close(o);
    if (rc < 0 && failed == NULL)
      failed = "ordo_exec_shutdown", frc = rc;
  } else {
    pp_destroy(&r.pp);
  }
  if (failed != NULL) {
    bench_error(row, "%s failed%s%s", failed, frc ? ": " : "",
                frc ? ordo_strerror(frc) : "");
    return -1;
  }
  if (deadlocks != 0) {
    bench_error(row, "a deadlock-free workload left %d records", deadlocks);
    return -1;
  }
  *out = (double)done / secs;
  return 0;
}

static int ex_run_ordo(const bench_row_t *row, void *state, double seconds,
                       double *out) {
  (void)state;
  return ex_run(row, EX_ORDO, 1, seconds, out);
}

static int ex_run_plain(const bench_row_t *row, void *state, double seconds,
                        double *out) {
  (void)state;
  return ex_run(row, EX_PLAIN, 0, seconds, out);
}

static int ex_run_undetected(const bench_row_t *row, void *state,
                             double seconds, double *out) {
  (void)state;
  return ex_run(row, EX_ORDO, 0, seconds, out);
}

#define EX_ROW(id_, title_, workers_, peer_, peer_name_, target_)              \
  {                                                                            \
    .id = id_, .title = title_, .metric = "tasks/s", .higher_is_better = 1,    \
    .peer_name = peer_name_, .target = target_,                                \
    .params = {{"workers", workers_, NULL},                                    \
               {"clients", 2, NULL},                                           \
               {"batch", 16, NULL}},                                           \
    .run_ordo = ex_run_ordo, .run_peer = peer_,                                \
  }

static const bench_row_t exec_rows[] = {
    EX_ROW("exec_submit_wait_w2",
           "Executor submit+wait, batches of 16, 2 clients, 2 workers", 2,
           ex_run_plain, "pthread pool (mutex/condvar queue)", 0.8),
    EX_ROW("exec_submit_wait_w8",
           "Executor submit+wait, batches of 16, 2 clients, 8 workers", 8,
           ex_run_plain, "pthread pool (mutex/condvar queue)", 0.8),
    EX_ROW("exec_detect_cost",
           "Executor submit+wait, 4 workers, pool-deadlock detection on", 4,
           ex_run_undetected, "detection off", 0.95),
};

const bench_table_t bench_exec_table = {exec_rows,
                                        sizeof exec_rows / sizeof exec_rows[0]};
