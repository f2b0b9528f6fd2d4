/*
 * pool_join.c -- ordo example: the pool deadlock with no mutex in it. Every
 * worker of a pool runs a task that submits a leaf to the same pool and
 * waits for it (result = pool.submit(leaf).get()), joins nested --depth
 * deep. Once every worker waits, the leaves that would wake them sit in the
 * queue for ever, and no lock detector sees it. An ordo executor finds it
 * at the block event that forms it, and its policy says what then: INLINE
 * runs the leaf on the waiting worker, COMPENSATE starts a spare, FAIL
 * makes the closing wait return ORDO_EDEADLK, REPORT records it and calls
 * ordo_on_deadlock (here main then shuts the pool down). --no-ordo runs the
 * same pattern on a plain pthread pool: it hangs, and a watchdog says so.
 * README.md: flags, output, exit status.
 */
#define EX_PROG "pool_join"
#include "common.h" /* flags, threads, error lines: no locking in it */
#include "ordo.h"

typedef struct plain_s plain_t; /* the --no-ordo pool, below the line */
typedef struct plain_task_s plain_task_t;

typedef struct run_s {
  ordo_t *o;
  ordo_exec_t *e;
  plain_t *plain;         /* --no-ordo: the plain pool instead of e */
  const char *url, *dump; /* --dump dot|json: the graph at detection */
  long policy, workers, depth, tasks, json, no_ordo, watchdog_s;
  pthread_mutex_t mu; /* guards tops_*, detections, finished */
  pthread_cond_t cv;  /* each top-level task's start and end, detections */
  long tops_started, tops_done, detections, finished;
  _Atomic long deadlk, canceled;      /* inner waits that returned those */
  long right, wrong, failed, records; /* the closing waits; the records */
  double t0, secs;
} run_t;

/* A task's run, and its level in its chain (the top-level task is 0, its
 * leaf is depth). main preallocates every chain's jobs, so that a child
 * still queued when its parent's wait failed reads memory that lives. */
typedef struct job_s {
  run_t *r;
  long level;
} job_t;

/* Below the line: the plain pool, the watchdog, flags, report. */
static plain_t *plain_create(long workers);
static plain_task_t *plain_submit(plain_t *p, void *(*fn)(void *), void *arg);
static void *plain_wait(plain_t *p, plain_task_t *t);
static pthread_t watchdog_start(run_t *r);
static void setup(int argc, char **argv, run_t *r);
static void report(const run_t *r, int ok);

/* gate -- a top-level task waits until every worker runs one (or every
 * task has started, when there are fewer), so that the hang forms on each
 * run rather than when the scheduler happens to allow it. */
static void gate(run_t *r) {
  long all = r->tasks < r->workers ? r->tasks : r->workers;
  pthread_mutex_lock(&r->mu);
  if (++r->tops_started >= all)
    pthread_cond_broadcast(&r->cv);
  while (r->tops_started < all)
    pthread_cond_wait(&r->cv, &r->mu); /* the watchdog bounds it */
  pthread_mutex_unlock(&r->mu);
}

/* task -- the seed's line: submit the next level to the same pool and wait
 * for it. A level's value is 1 more than its child's (a leaf's is 1), so a
 * top-level task that ran every level returns depth + 1; an error comes
 * back up as its (negative) code. */
static void *task(void *arg) {
  job_t *j = arg;
  run_t *r = j->r;
  intptr_t v = 1;
  if (j->level == 0)
    gate(r); /* every worker taken before any leaf is queued */
  if (j->level < r->depth) {
    void *cv = NULL;
    if (r->plain != NULL) { /* the pool people write: no rescue */
      cv = plain_wait(r->plain, plain_submit(r->plain, task, j + 1));
    } else {
      ordo_future_t *f;
      int rc = ordo_exec_submit(r->e, task, j + 1, &f);
      if (rc == 0) { /* bounded by the watchdog, as REPORT's waits are */
        rc = ordo_future_wait(f, ORDO_FOREVER, &cv);
        ordo_future_release(f);
      }
      if (rc == ORDO_EDEADLK) /* FAIL: this wait closed the deadlock */
        atomic_fetch_add(&r->deadlk, 1);
      if (rc == ORDO_ECANCELED) /* REPORT: main shut the pool down */
        atomic_fetch_add(&r->canceled, 1);
      cv = rc < 0 ? (void *)(intptr_t)rc : cv;
    }
    v = (intptr_t)cv < 0 ? (intptr_t)cv : (intptr_t)cv + 1;
  }
  if (j->level == 0) {
    pthread_mutex_lock(&r->mu);
    r->tops_done++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
  }
  return (void *)v;
}

/* detected -- ordo_on_deadlock, on the thread that found it: wakes main,
 * which decides what to do about it. */
static void detected(const ordo_deadlock_t *d, void *arg) {
  run_t *r = arg;
  (void)d;
  pthread_mutex_lock(&r->mu);
  r->detections++;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

/* run_ordo -- the executor: submit the top-level tasks, then the closing
 * waits. Under REPORT the hang stays until someone acts: once the record
 * is in, main dumps the graph (--dump) and shuts the pool down now, which
 * cancels the queued tasks, and so every wait on them. */
static int run_ordo(run_t *r, job_t *jobs) {
  ordo_exec_options_t eo;
  ordo_exec_options_init(&eo);
  eo.policy = (ordo_exec_policy_t)r->policy;
  eo.name = "pool_join";
  int rc = ordo_exec_create(&r->e, r->o, (unsigned)r->workers, &eo);
  if (rc < 0)
    return rc;
  ordo_on_deadlock(r->o, detected, r);
  ordo_future_t **f = ex_calloc(r->tasks, sizeof *f, "--tasks");
  for (long i = 0; i < r->tasks; i++)
    if ((rc = ordo_exec_submit(r->e, task, &jobs[i * (r->depth + 1)], &f[i])))
      ex_die("ordo_exec_submit: %s", ordo_strerror(rc));
  pthread_mutex_lock(&r->mu);
  while (r->tops_done < r->tasks && r->detections == 0)
    pthread_cond_wait(&r->cv, &r->mu); /* the watchdog bounds it */
  long found = r->detections;
  pthread_mutex_unlock(&r->mu);
  if (found > 0 && r->dump != NULL)
    ordo_graph_dump(r->o, 2,
                    *r->dump == 'j' ? ORDO_GRAPH_JSON : ORDO_GRAPH_DOT);
  if (found > 0 && r->policy == ORDO_EXEC_REPORT &&
      (rc = ordo_exec_shutdown(r->e, ORDO_EXEC_NOW, ORDO_FOREVER)) < 0)
    ex_die("ordo_exec_shutdown: %s", ordo_strerror(rc));
  for (long i = 0; i < r->tasks; i++) {
    void *v = NULL;
    rc = ordo_future_wait(f[i], ORDO_FOREVER, &v);
    intptr_t got = rc < 0 ? rc : (intptr_t)v;
    r->right += got == r->depth + 1;
    r->failed += got == ORDO_EDEADLK || got == ORDO_ECANCELED;
    ordo_future_release(f[i]);
  }
  r->wrong = r->tasks - r->right - r->failed;
  ordo_exec_destroy(r->e);
  free(f);
  ordo_deadlock_t rec[32];
  int n = ordo_deadlocks(r->o, rec, 32);
  for (int i = 0; i < n; i++)
    r->records += rec[i].kind == ORDO_DL_POOL || rec[i].kind == ORDO_DL_MIXED;
  return 0;
}

/* ok -- every task gave depth + 1, or the hang was found and dealt with:
 * FAIL failed a closing wait (ORDO_EDEADLK), REPORT called back and left a
 * record. INLINE and COMPENSATE must finish every task. */
static int ok(const run_t *r) {
  if (r->wrong > 0)
    return 0;
  if (r->right == r->tasks)
    return 1;
  if (r->policy == ORDO_EXEC_FAIL)
    return r->deadlk > 0 && r->records > 0;
  if (r->policy == ORDO_EXEC_REPORT)
    return r->detections > 0 && r->records > 0;
  return 0;
}

int main(int argc, char **argv) {
  run_t r;
  setup(argc, argv, &r);
  job_t *jobs = ex_calloc(r.tasks * (r.depth + 1), sizeof *jobs, "--tasks");
  for (long i = 0; i < r.tasks * (r.depth + 1); i++)
    jobs[i] = (job_t){&r, i % (r.depth + 1)};
  int rc = ex_open(&r.o, r.url);
  pthread_t dog = watchdog_start(&r);
  r.t0 = ex_now_s();
  if (rc == 0 && r.no_ordo) { /* hangs: the watchdog ends it, exit 1 */
    r.plain = plain_create(r.workers);
    plain_task_t **t = ex_calloc(r.tasks, sizeof *t, "--tasks");
    for (long i = 0; i < r.tasks; i++)
      t[i] = plain_submit(r.plain, task, &jobs[i * (r.depth + 1)]);
    for (long i = 0; i < r.tasks; i++)
      r.right += (intptr_t)plain_wait(r.plain, t[i]) == r.depth + 1;
    r.wrong = r.tasks - r.right;
    free(t); /* the pool stays: its workers sleep until the exit */
  } else if (rc == 0) {
    rc = run_ordo(&r, jobs);
  }
  pthread_mutex_lock(&r.mu);
  r.secs = ex_now_s() - r.t0;
  r.finished = 1; /* the watchdog stands down */
  pthread_cond_broadcast(&r.cv);
  pthread_mutex_unlock(&r.mu);
  pthread_join(dog, NULL); /* it reads r, which ends with main */
  int good = rc == 0 && ok(&r);
  if (rc == ORDO_ENOTSUP) /* a remote place: its waits are not ours */
    fprintf(stderr,
            EX_PROG ": an executor needs a mem:// place, not '%s' (see " EX_PROG
                    " --help)\n",
            ordo_url(r.o));
  else if (rc < 0)
    ex_unusable(r.url, rc);
  else
    report(&r, good);
  ordo_close(r.o); /* NULL when ordo_open failed: nothing */
  free(jobs);
  return rc == ORDO_ENOTSUP ? 2 : good ? 0 : 1;
}

/* ---- plumbing below: the plain pool, the watchdog, flags, report -------- */

/* The pool people write: one mutex, a FIFO of tasks, a condvar for work
 * and one for results. A waiter only sleeps: it never runs queued work.
 * Its threads are never joined: the program exits from its hang. */
struct plain_task_s {
  void *(*fn)(void *);
  void *arg, *value;
  int done;
  plain_task_t *next;
};

struct plain_s {
  pthread_mutex_t mu; /* guards every field below, and each task's */
  pthread_cond_t work, result;
  plain_task_t *head, *tail;
  long queued, waiting, workers;
};

static _Thread_local int plain_in_pool; /* 1 on the pool's workers */

static void *plain_worker(void *arg) {
  plain_t *p = arg;
  plain_in_pool = 1;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->head == NULL)
      pthread_cond_wait(&p->work, &p->mu);
    plain_task_t *t = p->head;
    if ((p->head = t->next) == NULL)
      p->tail = NULL;
    p->queued--;
    pthread_mutex_unlock(&p->mu);
    void *v = t->fn(t->arg);
    pthread_mutex_lock(&p->mu);
    t->value = v, t->done = 1;
    pthread_cond_broadcast(&p->result);
  }
  return NULL;
}

static plain_t *plain_create(long workers) {
  plain_t *p = ex_calloc(1, sizeof *p, "--workers");
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->result, NULL);
  p->workers = workers;
  for (long i = 0; i < workers; i++) {
    pthread_t tid;
    if (pthread_create(&tid, NULL, plain_worker, p) != 0)
      ex_die("cannot start worker %ld; try fewer --workers", i);
    pthread_detach(tid);
  }
  return p;
}

static plain_task_t *plain_submit(plain_t *p, void *(*fn)(void *), void *arg) {
  plain_task_t *t = ex_calloc(1, sizeof *t, "--tasks");
  t->fn = fn, t->arg = arg;
  pthread_mutex_lock(&p->mu);
  *(p->tail ? &p->tail->next : &p->head) = t;
  p->tail = t;
  p->queued++;
  pthread_cond_signal(&p->work);
  pthread_mutex_unlock(&p->mu);
  return t;
}

/* plain_wait -- the future's get(): sleeps until t is done; its value.
 * The watchdog counts the workers among the waiters (main waits too). */
static void *plain_wait(plain_t *p, plain_task_t *t) {
  pthread_mutex_lock(&p->mu);
  p->waiting += plain_in_pool;
  while (!t->done)
    pthread_cond_wait(&p->result, &p->mu);
  p->waiting -= plain_in_pool;
  pthread_mutex_unlock(&p->mu);
  void *v = t->value;
  free(t);
  return v;
}

static const char *const policies[] = {"inline", "compensate", "fail",
                                       "report"};

/* hung -- what the watchdog saw, then exit 1 (the threads are stuck: no
 * cleanup). Through ordo: the wait-for graph (DOT) on stderr. */
static void hung(run_t *r) {
  long waiting = 0, queued = 0;
  if (r->plain != NULL) { /* a stuck pool still lets go of its mutex */
    pthread_mutex_lock(&r->plain->mu);
    waiting = r->plain->waiting, queued = r->plain->queued;
    pthread_mutex_unlock(&r->plain->mu);
    fprintf(stderr,
            EX_PROG ": hang: after %ld s, %ld of %ld workers wait on "
                    "futures, %ld tasks queued that would wake them\n",
            r->watchdog_s, waiting, r->workers, queued);
  } else {
    fprintf(stderr,
            EX_PROG ": hang: no end after %ld s (policy %s); the wait-for "
                    "graph:\n",
            r->watchdog_s, policies[r->policy]);
    ordo_graph_dump(r->o, 2, ORDO_GRAPH_DOT);
  }
  if (r->json)
    printf("{\"example\": \"pool_join\", \"policy\": \"%s\", \"ordo\": %s, "
           "\"workers\": %ld, \"depth\": %ld, \"tasks\": %ld, \"hung\": true, "
           "\"waiting\": %ld, \"queued\": %ld, \"seconds\": %ld, "
           "\"ok\": false}\n",
           r->no_ordo ? "none" : policies[r->policy],
           r->no_ordo ? "false" : "true", r->workers, r->depth, r->tasks,
           waiting, queued, r->watchdog_s);
  fflush(stdout);
  _Exit(1);
}

static void *watchdog(void *arg) {
  run_t *r = arg;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until); /* the condvar's clock */
  until.tv_sec += r->watchdog_s;
  pthread_mutex_lock(&r->mu);
  int rc = 0;
  while (!r->finished && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&r->cv, &r->mu, &until);
  int late = !r->finished;
  pthread_mutex_unlock(&r->mu);
  if (late)
    hung(r);
  return NULL;
}

static pthread_t watchdog_start(run_t *r) {
  pthread_t tid;
  if (pthread_create(&tid, NULL, watchdog, r) != 0)
    ex_die("cannot start the watchdog thread");
  return tid;
}

static const char usage[] =
    "usage: " EX_PROG " [--policy inline|compensate|fail|report] "
    "[--workers N]\n"
    "             [--depth D] [--tasks T] [--watchdog S] [--dump dot|json]\n"
    "             [--no-ordo] [--json]\n"
    "Each of T tasks on a pool of N workers submits a task to the same pool\n"
    "and waits for it, D levels deep (result = pool.submit(leaf).get()).\n"
    "With T >= N every worker waits and the leaves stay queued: a pool\n"
    "deadlock, which the ordo executor finds when it forms.\n"
    "  --policy P         what the executor does then (default inline):\n"
    "                     inline (the waiter runs the leaf), compensate (a\n"
    "                     spare worker), fail (the closing wait returns\n"
    "                     ORDO_EDEADLK), report (a record and the\n"
    "                     ordo_on_deadlock callback; then main shuts the\n"
    "                     pool down)\n"
    "  --workers N        the pool's workers, 1..256 (default 4)\n"
    "  --depth D          nested joins per task, 0..16 (default 1)\n"
    "  --tasks T          top-level tasks, 1..100000 (default N: every\n"
    "                     worker taken)\n"
    "  --watchdog S       a run not over after S s is a hang: print what\n"
    "                     was seen, exit 1 (1..3600, default 5)\n"
    "  --dump dot|json    at detection, write the wait-for graph on stderr\n"
    "  --no-ordo          the same on a plain pthread pool: it hangs\n"
    "  --backend URL      the lock place (default mem://; an executor needs\n"
    "                     mem://, where its waits and the locks are one\n"
    "                     graph)\n"
    "  --json             print one JSON object instead of the summary\n"
    "Exit status: 0 the run finished with every result right, or the\n"
    "deadlock was detected (fail, report); 1 a hang (the watchdog) or a\n"
    "wrong result; 2 bad usage.\n";

/* The flags ex_flags takes, each with its range, in the order of to[]
 * (--policy and --dump take words: setup() takes them out first). */
static const char flags[] = "--workers=1..256 --depth=0..16 --tasks=1..100000 "
                            "--watchdog=1..3600 --no-ordo --json";

/* word -- the word flag name at argv[*i] ("--name W" or "--name=W"), one
 * of words[0..n): its index, -1 when argv[*i] is not that flag; exit 2 on
 * another word. */
static long word(int argc, char **argv, int *i, const char *name,
                 const char *const *words, long n) {
  const char *v = ex_opt(argc, argv, i, name);
  if (v == NULL)
    return -1;
  for (long k = 0; k < n; k++)
    if (strcmp(v, words[k]) == 0)
      return k;
  fprintf(stderr, EX_PROG ": bad value '%s' for %s: one of", v, name);
  for (long k = 0; k < n; k++)
    fprintf(stderr, "%s %s", k ? "," : "", words[k]);
  fputs(" (see " EX_PROG " --help)\n", stderr);
  exit(2);
}

static void setup(int argc, char **argv, run_t *r) {
  static const char *const dumps[] = {"dot", "json"};
  *r = (run_t){.workers = 4, .depth = 1, .watchdog_s = 5};
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  int n = 1;
  for (int i = 1; i < argc; i++) { /* the word flags out, the rest on */
    long k;
    if ((k = word(argc, argv, &i, "--policy", policies, 4)) >= 0)
      r->policy = k;
    else if ((k = word(argc, argv, &i, "--dump", dumps, 2)) >= 0)
      r->dump = dumps[k];
    else
      argv[n++] = argv[i];
  }
  long *const to[] = {&r->workers,    &r->depth,   &r->tasks,
                      &r->watchdog_s, &r->no_ordo, &r->json};
  r->url = ex_flags(n, argv, usage, flags, to);
  r->tasks = r->tasks ? r->tasks : r->workers;
}

static void report(const run_t *r, int ok) {
  const char *policy = r->no_ordo ? "none" : policies[r->policy];
  if (r->json) {
    printf("{\"example\": \"pool_join\", \"policy\": \"%s\", \"ordo\": %s, "
           "\"workers\": %ld, \"depth\": %ld, \"tasks\": %ld, \"hung\": false, "
           "\"right\": %ld, \"failed\": %ld, \"wrong\": %ld, \"deadlk\": %ld, "
           "\"canceled\": %ld, \"detections\": %ld, \"records\": %ld, "
           "\"seconds\": %.6f, \"ok\": %s}\n",
           policy, r->no_ordo ? "false" : "true", r->workers, r->depth,
           r->tasks, r->right, r->failed, r->wrong, (long)r->deadlk,
           (long)r->canceled, r->detections, r->records, r->secs,
           ok ? "true" : "false");
    return;
  }
  printf(EX_PROG ": policy %s, %ld workers, depth %ld, %ld tasks: %ld/%ld "
                 "right, %ld failed (%ld EDEADLK, %ld ECANCELED waits), "
                 "%ld wrong; %ld detections, %ld records; %.1f ms: %s\n",
         policy, r->workers, r->depth, r->tasks, r->right, r->tasks, r->failed,
         (long)r->deadlk, (long)r->canceled, r->wrong, r->detections,
         r->records, r->secs * 1e3, ok ? "OK" : "FAIL");
}
