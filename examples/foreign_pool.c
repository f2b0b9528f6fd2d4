/*
 * foreign_pool.c -- ordo example: detection for a thread pool that is not
 * ordo's. This file's pool is the one people write (a mutex, a FIFO, two
 * condvars), and five calls tell ordo what it does: ordo_exec_declare (the
 * pool and its workers), ordo_exec_note_queued / _started / _done (a task's
 * life) and ordo_exec_note_wait_begin / _end (a thread waits for a task).
 * It runs the seed's hang: each of N workers submits a leaf to the same
 * pool and waits for it. With the annotations, ordo sees the hang form:
 *   --policy fail    the wait that would close it is refused (ORDO_EDEADLK):
 *                    that worker does not wait, and the others drain;
 *   --policy report  the record comes to ordo_on_deadlock, which prints it;
 *                    the pool then lets its waiters run queued tasks.
 * Without them (--no-notes) it hangs, and a watchdog says so.
 * README.md: flags, output, exit status.
 */
#define EX_PROG "foreign_pool"
#include "common.h" /* flags, threads, error lines: no locking in it */
#include "ordo.h"

typedef struct ftask_s {
  void *(*fn)(void *);
  void *arg;
  intptr_t value;
  int done;
  struct ftask_s *next, *all; /* the queue; every task, for the free */
} ftask_t;

typedef struct fpool_s {
  ordo_exec_t *note;  /* the annotations' handle; NULL: --no-notes */
  pthread_mutex_t mu; /* guards every field below, and each task's */
  pthread_cond_t work, result;
  ftask_t *head, *tail, *all;
  int stop, help; /* help: waiters run queued tasks (after a report) */
  long workers;
  pthread_t *thread;
} fpool_t;

typedef struct demo_s {
  fpool_t p;
  long workers, policy, no_notes, watchdog_s, deadlk, right, wrong;
  pthread_mutex_t mu; /* guards found, rec, started, tops */
  pthread_cond_t cv;
  int found;
  long started, tops;
  ordo_deadlock_t rec;
} demo_t;

static demo_t demo;

/* fp_run -- runs t on this thread, between its started and done notes. */
static void fp_run(fpool_t *p, ftask_t *t) {
  if (p->note)
    ordo_exec_note_started(p->note, (uintptr_t)t);
  intptr_t v = (intptr_t)t->fn(t->arg);
  if (p->note)
    ordo_exec_note_done(p->note, (uintptr_t)t);
  pthread_mutex_lock(&p->mu);
  t->value = v, t->done = 1;
  pthread_cond_broadcast(&p->result);
  pthread_mutex_unlock(&p->mu);
}

/* fp_pop -- the queue's first task, or NULL. Caller holds p->mu. */
static ftask_t *fp_pop(fpool_t *p) {
  ftask_t *t = p->head;
  if (t != NULL && (p->head = t->next) == NULL)
    p->tail = NULL;
  return t;
}

static void *fp_worker(void *arg) {
  fpool_t *p = arg;
  ftask_t *t;
  pthread_mutex_lock(&p->mu);
  while (!p->stop || p->head != NULL) {
    if ((t = fp_pop(p)) == NULL) {
      pthread_cond_wait(&p->work, &p->mu);
      continue;
    }
    pthread_mutex_unlock(&p->mu);
    fp_run(p, t);
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* fp_submit -- queues fn(arg), noted before a worker can see it (so
 * queued comes before started), and outside the pool's mutex: no ordo call
 * is made under it. */
static ftask_t *fp_submit(fpool_t *p, void *(*fn)(void *), void *arg) {
  ftask_t *t = ex_calloc(1, sizeof *t, "--workers");
  t->fn = fn, t->arg = arg;
  if (p->note)
    ordo_exec_note_queued(p->note, (uintptr_t)t);
  pthread_mutex_lock(&p->mu);
  t->all = p->all, p->all = t;
  *(p->tail ? &p->tail->next : &p->head) = t;
  p->tail = t;
  pthread_cond_signal(&p->work);
  pthread_mutex_unlock(&p->mu);
  return t;
}

/* fp_wait -- get(): the value of t once done, or ORDO_EDEADLK when ordo
 * says this wait would close a pool deadlock (FAIL): then it does not
 * wait. After a report (help), a waiter runs queued tasks meanwhile, its
 * wait noted as over while it does. */
static intptr_t fp_wait(fpool_t *p, ftask_t *t) {
  int rc = p->note ? ordo_exec_note_wait_begin(p->note, (uintptr_t)t) : 0;
  if (rc < 0)
    return rc;
  pthread_mutex_lock(&p->mu);
  ftask_t *other;
  while (!t->done) {
    if (p->help && (other = fp_pop(p)) != NULL) {
      pthread_mutex_unlock(&p->mu);
      if (p->note)
        ordo_exec_note_wait_end(p->note, (uintptr_t)t);
      fp_run(p, other);
      if (p->note)
        ordo_exec_note_wait_begin(p->note, (uintptr_t)t);
      pthread_mutex_lock(&p->mu);
    } else {
      pthread_cond_wait(&p->result, &p->mu);
    }
  }
  pthread_mutex_unlock(&p->mu);
  if (p->note)
    ordo_exec_note_wait_end(p->note, (uintptr_t)t);
  return t->value;
}

/* The seed: a task submits a leaf to its own pool and waits for it. */
static void *leaf(void *arg) {
  (void)arg;
  return (void *)1;
}

static void *top(void *arg) {
  demo_t *d = arg;
  pthread_mutex_lock(&d->mu); /* every worker taken before any leaf */
  if (++d->started == d->workers)
    pthread_cond_broadcast(&d->cv);
  while (d->started < d->workers)
    pthread_cond_wait(&d->cv, &d->mu); /* the watchdog bounds it */
  pthread_mutex_unlock(&d->mu);
  intptr_t v = fp_wait(&d->p, fp_submit(&d->p, leaf, NULL));
  pthread_mutex_lock(&d->mu);
  d->tops++;
  d->deadlk += v == ORDO_EDEADLK;
  d->right += v == 1;
  d->wrong += v != 1 && v != ORDO_EDEADLK;
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
  return (void *)(v < 0 ? v : v + 1);
}

/* found -- ordo_on_deadlock: keep the record, wake main. */
static void found(const ordo_deadlock_t *rec, void *arg) {
  demo_t *d = arg;
  pthread_mutex_lock(&d->mu);
  if (d->found++ == 0)
    d->rec = *rec;
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

/* Below the line: the pool's start and stop, the watchdog, flags, the
 * record's lines. */
static void fp_start(fpool_t *p, long workers);
static void fp_stop(fpool_t *p);
static void watchdog_start(void);
static void setup(int argc, char **argv, demo_t *d);
static void print_record(const ordo_deadlock_t *rec);

int main(int argc, char **argv) {
  demo_t *d = &demo;
  setup(argc, argv, d);
  ordo_t *o;
  int rc = ex_open(&o, "mem://");
  ordo_exec_options_t eo;
  ordo_exec_options_init(&eo);
  eo.policy = d->policy ? ORDO_EXEC_REPORT : ORDO_EXEC_FAIL;
  eo.name = "foreign";
  if (rc == 0 && !d->no_notes)
    rc = ordo_exec_declare(&d->p.note, o, (unsigned)d->workers, &eo);
  if (rc < 0)
    ex_die("ordo_exec_declare: %s", ordo_strerror(rc));
  ordo_on_deadlock(o, found, d);
  watchdog_start();
  fp_start(&d->p, d->workers);
  for (long i = 0; i < d->workers; i++)
    fp_submit(&d->p, top, d); /* every worker taken: the seed */
  pthread_mutex_lock(&d->mu);
  while (d->tops < d->workers && !d->found)
    pthread_cond_wait(&d->cv, &d->mu); /* the watchdog bounds it */
  int report = d->found;
  pthread_mutex_unlock(&d->mu);
  if (report)
    print_record(&d->rec);
  if (report && d->policy) {
    pthread_mutex_lock(&d->p.mu); /* the pool's own way out: help */
    d->p.help = 1;
    pthread_cond_broadcast(&d->p.result);
    pthread_mutex_unlock(&d->p.mu);
  }
  fp_stop(&d->p); /* runs what is queued, joins the workers */
  int ok = d->found > 0 && d->wrong == 0 && d->right + d->deadlk == d->workers;
  printf(EX_PROG ": policy %s, %ld workers: %ld/%ld tasks right, %ld "
                 "refused waits (EDEADLK), %d records: %s\n",
         d->policy ? "report" : "fail", d->workers, d->right, d->workers,
         d->deadlk, d->found, ok ? "OK" : "FAIL");
  if (d->p.note)
    ordo_exec_destroy(d->p.note);
  ordo_close(o);
  return ok ? 0 : 1;
}

/* ---- plumbing below: start and stop, the watchdog, flags, the record ---- */

static void fp_start(fpool_t *p, long workers) {
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->result, NULL);
  p->workers = workers;
  p->thread = ex_calloc(workers, sizeof *p->thread, "--workers");
  for (long i = 0; i < workers; i++)
    if (pthread_create(&p->thread[i], NULL, fp_worker, p) != 0)
      ex_die("cannot start worker %ld; try fewer --workers", i);
}

static void fp_stop(fpool_t *p) {
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  for (long i = 0; i < p->workers; i++)
    pthread_join(p->thread[i], NULL);
  for (ftask_t *t = p->all, *next; t != NULL; t = next)
    next = t->all, free(t);
  free(p->thread);
}

/* The watchdog: not over in watchdog_s is a hang; say what it saw. */
static void *watchdog(void *arg) {
  (void)arg;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += demo.watchdog_s;
  pthread_mutex_lock(&demo.mu);
  int rc = 0;
  while (demo.tops < demo.workers && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&demo.cv, &demo.mu, &until);
  long tops = demo.tops;
  pthread_mutex_unlock(&demo.mu);
  if (rc == ETIMEDOUT && tops < demo.workers) {
    fprintf(stderr,
            EX_PROG ": hang: after %ld s, %ld of %ld tasks done; every "
                    "worker waits for a leaf still queued\n",
            demo.watchdog_s, tops, demo.workers);
    _Exit(1);
  }
  return NULL;
}

static void watchdog_start(void) {
  pthread_t tid;
  if (pthread_create(&tid, NULL, watchdog, NULL) != 0)
    ex_die("cannot start the watchdog thread");
  pthread_detach(tid);
}

static const char usage[] =
    "usage: " EX_PROG " [--policy fail|report] [--workers N] [--no-notes]\n"
    "             [--watchdog S]\n"
    "A plain pthread pool of N workers, each running a task that submits\n"
    "a leaf to the same pool and waits for it, annotated so that ordo sees\n"
    "the pool deadlock form.\n"
    "  --policy P    fail: the closing wait is refused (ORDO_EDEADLK);\n"
    "                report (default): the record is printed, then the\n"
    "                pool lets its waiters run the queued leaves\n"
    "  --workers N   the pool's workers, 1..256 (default 4)\n"
    "  --no-notes    no annotations: the pool hangs\n"
    "  --watchdog S  a run not over after S s is a hang: exit 1 (1..3600,\n"
    "                default 5)\n"
    "Exit status: 0 the hang was caught and every task ended right or\n"
    "refused; 1 a hang or a wrong result; 2 bad usage.\n";

static void setup(int argc, char **argv, demo_t *d) {
  d->workers = 4, d->policy = 1, d->watchdog_s = 5;
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->cv, NULL);
  for (int i = 1; i < argc; i++) {
    const char *v;
    if ((v = ex_opt(argc, argv, &i, "--policy"))) {
      if (strcmp(v, "fail") != 0 && strcmp(v, "report") != 0) {
        fprintf(stderr,
                EX_PROG ": bad value '%s' for --policy: fail or report "
                        "(see " EX_PROG " --help)\n",
                v);
        exit(2);
      }
      d->policy = strcmp(v, "report") == 0;
    } else if ((v = ex_opt(argc, argv, &i, "--workers"))) {
      d->workers = ex_num("--workers", v, 1, 256);
    } else if ((v = ex_opt(argc, argv, &i, "--watchdog"))) {
      d->watchdog_s = ex_num("--watchdog", v, 1, 3600);
    } else if (strcmp(argv[i], "--no-notes") == 0) {
      d->no_notes = 1;
    } else if (strcmp(argv[i], "--help") == 0) {
      fputs(usage, stdout);
      exit(0);
    } else {
      fprintf(stderr,
              EX_PROG ": unknown option '%s': the options are --policy, "
                      "--workers, --no-notes, --watchdog (see " EX_PROG
                      " --help)\n",
              argv[i]);
      exit(2);
    }
  }
}

/* who -- an id of a record as words: txn ids have bit 63 clear; tasks set
 * it, threads outside any task bits 63 and 62, pools 63 and 61
 * (docs/deadlocks.md, "Pool deadlocks"). */
static const char *who(uint64_t id, char buf[40]) {
  const uint64_t task = UINT64_C(1) << 63, thread = UINT64_C(1) << 62,
                 pool = UINT64_C(1) << 61;
  const char *kind = !(id & task)  ? "txn"
                     : id & thread ? "thread"
                     : id & pool   ? "pool"
                                   : "task";
  snprintf(buf, 40, "%s %llu", kind,
           (unsigned long long)(id & ~(task | thread | pool)));
  return buf;
}

/* print_record -- the record as ordo_on_deadlock gave it: who waits for
 * what ("future:<task>", "worker:<pool>"). */
static void print_record(const ordo_deadlock_t *rec) {
  static const char *const kinds[] = {"locks", "pool", "mixed"};
  printf("record %llu: %s deadlock, %zu edges\n", (unsigned long long)rec->seq,
         rec->kind >= 0 && rec->kind <= 2 ? kinds[rec->kind] : "?",
         rec->nedges);
  for (size_t i = 0; i < rec->nedges && i < ORDO_DL_MAX_EDGES; i++) {
    const ordo_dl_edge_t *e = &rec->edge[i];
    char a[40], b[40];
    printf("  %s waits for %s on %.*s\n", who(e->from, a), who(e->to, b),
           (int)e->key_len, (const char *)e->key);
  }
}
