/*
 * bdb.c -- the bank against Berkeley DB's lock subsystem, against one global
 * mutex, and at 10,000 accounts against hand-ordered mutexes: a family of
 * rows of its own (bench_bdb_table); see README.md, "bank_bdb_...,
 * bank_gmutex_..., bank_a10000_...".
 *
 * The workload is bank.c's: each worker moves one unit between two distinct
 * random accounts, with nothing inside the lock but the two balance updates.
 * ordo's side is always bank_run_ordo(). The Berkeley DB side plugs a
 * bank_scheme_t into bank_run_scheme(), so that both sides share the
 * accounts, the draws, the workers, the clock and the balance check:
 *
 *   - per run, a DB_ENV opened with DB_CREATE | DB_INIT_LOCK | DB_PRIVATE |
 *     DB_THREAD in the row's temporary folder (its setup makes it, its
 *     teardown removes it), set_lk_detect(DB_LOCK_DEFAULT) so that the
 *     deadlock detector runs whenever a request blocks, and lock, locker and
 *     object tables sized up front for the accounts and workers;
 *   - per worker, one locker id (lock_id);
 *   - per transfer, one lock_vec of two DB_LOCK_GET requests in
 *     DB_LOCK_WRITE, lower account first, on DBTs that hold the account
 *     index; the two balance updates; one lock_vec of DB_LOCK_PUT_ALL. A
 *     DB_LOCK_DEADLOCK (none can happen in ascending order, but the
 *     detector is on) releases what the locker holds and retries.
 *
 * Every row lists the extra values max_wait_us and waits_per_xfer, so every
 * side of every row times each acquire with bank.c's wait clock, and
 * ordo's side reports its requests that queued per transfer. The Berkeley
 * DB side reports waits_per_xfer too (lock requests that waited, from
 * lock_stat, per transfer), and deadlocks (DB_LOCK_DEADLOCK answers
 * received in the run).
 *
 * Interface: bench_bdb_table (the rows; bench.c lists them after its own).
 */
#include "bench.h"

#include <db.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What a row's setup makes: the folder every run's environment lives in. */
typedef struct bdb_state_s {
  char dir[4096];
} bdb_state_t;

/* One run: the environment and what its workers add up. */
typedef struct bdb_run_s {
  DB_ENV *env;
  atomic_ullong deadlocks; /* DB_LOCK_DEADLOCK answers, all workers */
} bdb_run_t;

/* One worker: its locker and its two prepared requests. */
typedef struct bdb_worker_s {
  _Alignas(64) bdb_run_t *run;
  DB_ENV *env;
  u_int32_t locker;
  uint64_t lo_key, hi_key; /* the account indexes the DBTs point at */
  DBT lo_obj, hi_obj;
  DB_LOCKREQ get[2]; /* lower account first */
  DB_LOCKREQ put;    /* DB_LOCK_PUT_ALL */
  uint64_t deadlocks;
} bdb_worker_t;

/* Removes the folder and whatever Berkeley DB may have left in it. */
static void bdb_rmdir(const char *dir) {
  DIR *d = opendir(dir);
  if (d != NULL) {
    struct dirent *e;
    char path[4096 + 256 + 2];
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
        continue;
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(dir);
}

static int bdb_setup(const bench_row_t *row, void **state) {
  bdb_state_t *s = calloc(1, sizeof *s);
  if (s == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  const char *tmp = getenv("TMPDIR");
  if (tmp == NULL || *tmp == '\0')
    tmp = "/tmp";
  snprintf(s->dir, sizeof s->dir, "%s/ordo_bench_bdb.XXXXXX", tmp);
  if (mkdtemp(s->dir) == NULL) {
    bench_error(row, "mkdtemp %s: %s", s->dir, strerror(errno));
    free(s);
    return -1;
  }
  *state = s;
  return 0;
}

static void bdb_teardown(const bench_row_t *row, void *state) {
  (void)row;
  bdb_state_t *s = state;
  if (s == NULL)
    return;
  bdb_rmdir(s->dir);
  free(s);
}

/*
 * bdb_open -- a fresh environment for one run, as ordo's side opens a fresh
 * mem:// place. Each table holds every account at once, with room to spare
 * (a worker holds at most 2 locks and waits for at most 1), and is allocated
 * in full at open (set_memory_init), so that no run grows a region.
 */
static int bdb_open(const bench_row_t *row, void *state, size_t accounts,
                    int workers, void **out) {
  bdb_state_t *s = state;
  bdb_run_t *r = calloc(1, sizeof *r);
  if (r == NULL)
    return ENOMEM;
  atomic_init(&r->deadlocks, 0);
  u_int32_t objects = (u_int32_t)accounts + 2 * (u_int32_t)workers + 64;
  u_int32_t locks = objects;
  u_int32_t lockers = 2 * (u_int32_t)workers + 64;
  DB_ENV *env = NULL;
  int rc = db_env_create(&env, 0);
  if (rc != 0) {
    free(r);
    return rc;
  }
  env->set_errfile(env, stderr);
  env->set_errpfx(env, row->id);
  if ((rc = env->set_lk_detect(env, DB_LOCK_DEFAULT)) != 0 ||
      (rc = env->set_lk_max_locks(env, locks)) != 0 ||
      (rc = env->set_lk_max_objects(env, objects)) != 0 ||
      (rc = env->set_lk_max_lockers(env, lockers)) != 0 ||
      (rc = env->set_memory_init(env, DB_MEM_LOCK, locks)) != 0 ||
      (rc = env->set_memory_init(env, DB_MEM_LOCKOBJECT, objects)) != 0 ||
      (rc = env->set_memory_init(env, DB_MEM_LOCKER, lockers)) != 0 ||
      (rc = env->open(env, s->dir,
                      DB_CREATE | DB_INIT_LOCK | DB_PRIVATE | DB_THREAD, 0)) !=
          0) {
    env->close(env, 0);
    free(r);
    return rc;
  }
  r->env = env;
  *out = r;
  return 0;
}

static int bdb_begin(void *run, void **out) {
  bdb_run_t *r = run;
  bdb_worker_t *w = aligned_alloc(64, sizeof *w);
  if (w == NULL)
    return ENOMEM;
  memset(w, 0, sizeof *w);
  w->run = r;
  w->env = r->env;
  int rc = r->env->lock_id(r->env, &w->locker);
  if (rc != 0) {
    free(w);
    return rc;
  }
  w->lo_obj.data = &w->lo_key;
  w->lo_obj.size = sizeof w->lo_key;
  w->hi_obj.data = &w->hi_key;
  w->hi_obj.size = sizeof w->hi_key;
  w->get[0].op = DB_LOCK_GET;
  w->get[0].mode = DB_LOCK_WRITE;
  w->get[0].obj = &w->lo_obj;
  w->get[1].op = DB_LOCK_GET;
  w->get[1].mode = DB_LOCK_WRITE;
  w->get[1].obj = &w->hi_obj;
  w->put.op = DB_LOCK_PUT_ALL;
  *out = w;
  return 0;
}

static int bdb_unlock(void *worker) {
  bdb_worker_t *w = worker;
  DB_LOCKREQ *failed = NULL;
  return w->env->lock_vec(w->env, w->locker, 0, &w->put, 1, &failed);
}

static int bdb_lock(void *worker, size_t lo, size_t hi) {
  bdb_worker_t *w = worker;
  DB_LOCKREQ *failed = NULL;
  w->lo_key = lo;
  w->hi_key = hi;
  for (;;) {
    int rc = w->env->lock_vec(w->env, w->locker, 0, w->get, 2, &failed);
    if (rc != DB_LOCK_DEADLOCK)
      return rc;
    /* The victim keeps what lock_vec granted before the failed request:
     * let it go, and ask again. */
    w->deadlocks++;
    if ((rc = bdb_unlock(w)) != 0)
      return rc;
  }
}

static void bdb_end(void *run, void *worker) {
  bdb_run_t *r = run;
  bdb_worker_t *w = worker;
  bdb_unlock(w); /* nothing is held unless the loop failed */
  r->env->lock_id_free(r->env, w->locker);
  atomic_fetch_add(&r->deadlocks, w->deadlocks);
  free(w);
}

static int bdb_close(const bench_row_t *row, void *run) {
  bdb_run_t *r = run;
  DB_LOCK_STAT *st = NULL;
  int ret = 0;
  int rc = r->env->lock_stat(r->env, &st, 0);
  if (rc != 0) {
    bench_error(row, "bdb lock_stat: %s", db_strerror(rc));
    ret = -1;
  } else {
    /* Two DB_LOCK_GET requests per transfer (and per retry). */
    if (st->st_nrequests > 0)
      bench_extra(row, "waits_per_xfer",
                  2.0 * (double)st->st_lock_wait / (double)st->st_nrequests);
    free(st);
  }
  bench_extra(row, "deadlocks", (double)atomic_load(&r->deadlocks));
  if ((rc = r->env->close(r->env, 0)) != 0) {
    bench_error(row, "bdb close: %s", db_strerror(rc));
    ret = -1;
  }
  free(r);
  return ret;
}

static const char *bdb_strerror(int rc) {
  return db_strerror(rc);
}

static const bank_scheme_t bdb_scheme = {
    .name = "bdb",
    .open = bdb_open,
    .begin = bdb_begin,
    .end = bdb_end,
    .lock = bdb_lock,
    .unlock = bdb_unlock,
    .close = bdb_close,
    .strerror = bdb_strerror,
};

static int bdb_run(const bench_row_t *row, void *state, double seconds,
                   double *out) {
  return bank_run_scheme(row, &bdb_scheme, state, seconds, out);
}

#define BDB_PARAMS(accounts, workers)                                          \
  .title = "Bank transfers, " #accounts " accounts, " #workers " workers",     \
  .metric = "transfers/s", .higher_is_better = 1,                              \
  .params = {{"accounts", accounts, NULL}, {"workers", workers, NULL}}

/* ordo against Berkeley DB's lock_vec, detection on every block. */
#define BDB_ROW(id_, accounts, workers)                                        \
  {                                                                            \
    .id = id_, BDB_PARAMS(accounts, workers),                                  \
    .peer_name = "Berkeley DB lock_vec", .target = 5.0, .setup = bdb_setup,    \
    .teardown = bdb_teardown, .run_ordo = bank_run_ordo, .run_peer = bdb_run,  \
    .extras = {"max_wait_us", "waits_per_xfer", "deadlocks"},                  \
  }

/* ordo against one pthread mutex for the whole bank. */
#define GMUTEX_ROW(id_, accounts, workers, target_)                            \
  {                                                                            \
    .id = id_, BDB_PARAMS(accounts, workers),                                  \
    .peer_name = "one global pthread mutex", .target = target_,                \
    .run_ordo = bank_run_ordo, .run_peer = bank_run_gmutex,                    \
    .extras = {"max_wait_us", "waits_per_xfer"},                               \
  }

/* bench.c's bank rows (hand-ordered mutexes) at 10,000 accounts. */
#define HAND_ROW(id_, accounts, workers, target_)                              \
  {                                                                            \
    .id = id_, BDB_PARAMS(accounts, workers),                                  \
    .peer_name = "pthread hand-ordered", .target = target_,                    \
    .run_ordo = bank_run_ordo, .run_peer = bank_run_pthread,                   \
    .extras = {"max_wait_us", "waits_per_xfer"},                               \
  }

static const bench_row_t bdb_rows[] = {
    BDB_ROW("bank_bdb_a2_w2", 2, 2),
    BDB_ROW("bank_bdb_a2_w8", 2, 8),
    BDB_ROW("bank_bdb_a64_w2", 64, 2),
    BDB_ROW("bank_bdb_a64_w8", 64, 8),
    BDB_ROW("bank_bdb_a10000_w2", 10000, 2),
    BDB_ROW("bank_bdb_a10000_w8", 10000, 8),
    GMUTEX_ROW("bank_gmutex_a2_w2", 2, 2, 0.4),
    GMUTEX_ROW("bank_gmutex_a2_w8", 2, 8, 0.4),
    GMUTEX_ROW("bank_gmutex_a64_w2", 64, 2, NAN),
    GMUTEX_ROW("bank_gmutex_a64_w8", 64, 8, NAN),
    GMUTEX_ROW("bank_gmutex_a10000_w2", 10000, 2, NAN),
    GMUTEX_ROW("bank_gmutex_a10000_w8", 10000, 8, NAN),
    HAND_ROW("bank_a10000_w2", 10000, 2, 0.25),
    HAND_ROW("bank_a10000_w8", 10000, 8, 0.25),
};

const bench_table_t bench_bdb_table = {bdb_rows,
                                       sizeof bdb_rows / sizeof bdb_rows[0]};
