/*
 * fclient.c -- one client process of the fault harness (docs/reliability.md,
 * tests/faults/run.sh): threads that each, in a loop, lock one of a few
 * keys in X through a remote backend, read the key's fenced register
 * (register.h), write it back plus one with the grant's fencing token,
 * and unlock, logging every call to a history file that check.py reads.
 *
 *   fclient --url URL --dir DIR --proc N [--threads T] [--keys K]
 *           [--max-s S] [--lock-ms L] [--lease-ms L] [--hang-s S]
 *           [--unlock-all 0|1]
 *
 * Each thread writes DIR/hist-N-T.txt, one line per call:
 *   proc thread op call start_ns end_ns rc key token value txn
 * (CLOCK_MONOTONIC; call is begin, lock, read, write, skip, unlock, end;
 * rc an ordo code, or for write 1 accepted and 0 refused). The lease-lost
 * callback writes DIR/lost-N.txt ("t_ns txn"), and ordo_dump's state at
 * the end goes to DIR/dump-N.txt. DIR/progress-N holds the
 * number of locks granted so far (a decimal number, rewritten every 64
 * grants), for the schedule to know when enough were. The process stops
 * when the file DIR/stop appears (run.sh makes it once the schedule is
 * done), or after --max-s seconds. A failed lock is tried again after a
 * jittered 1-10 ms, as a program using ordo_retry would.
 *
 * A holder writes only while its lease is surely valid: no later than half
 * a lease after it sent the lock request (the client's own count, which
 * docs/backend-redis.md says is never the longer one). So any two holders
 * whose writes overlap, and any lost update, are the lock service's fault.
 *
 * --unlock-all 1 releases with ordo_unlock_all instead of ordo_unlock (the
 * txn holds one key, so the two do the same): run.sh's way around an open
 * defect of postgres://, named there.
 *
 * A watchdog fails the process (exit 3) with ordo_dump's state when a call
 * has not returned within --hang-s seconds (times ORDO_TEST_TIMEOUT_MULT):
 * a hang, as against a late return, which check.py counts against the
 * call's bound.
 */
#include "register.h"

#include <ordo.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define MAX_KEYS 64

static const char *g_url, *g_dir;
static int g_proc, g_threads = 4, g_keys = 4;
static long g_max_s = 60, g_lock_ms = 300, g_lease_ms = 1000, g_hang_s = 20,
            g_unlock_all;
static ordo_t *g_o;
static atomic_long g_granted;
static int g_progress_fd = -1;
static char g_stop[4096];
static uint64_t g_deadline;
static freg_t g_reg[MAX_KEYS];
static pthread_mutex_t g_lost_mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *g_lost;

typedef struct worker_s {
  int id;
  pthread_t th;
  FILE *hist;
  uint64_t rng;
  long op;
  /* The call under way, for the watchdog: its start (0: none) and name. */
  _Atomic uint64_t call_start;
  _Atomic(const char *) call_name;
} worker_t;

static worker_t g_w[MAX_THREADS];

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double mult(void) {
  const char *m = getenv("ORDO_TEST_TIMEOUT_MULT");
  double v = m ? atof(m) : 1.0;
  return v >= 1.0 ? v : 1.0;
}

static uint64_t rnd(worker_t *w) {
  /* xorshift64*: the schedule of keys and pauses, not security. */
  w->rng ^= w->rng >> 12;
  w->rng ^= w->rng << 25;
  w->rng ^= w->rng >> 27;
  return w->rng * 0x2545F4914F6CDD1DULL;
}

static void enter(worker_t *w, const char *name) {
  atomic_store(&w->call_name, name);
  atomic_store(&w->call_start, mono_ns());
}

static void leave(worker_t *w) {
  atomic_store(&w->call_start, 0);
}

static void hist(worker_t *w, const char *call, uint64_t s, uint64_t e, int rc,
                 int key, uint64_t token, int64_t value, uint64_t txn) {
  fprintf(w->hist,
          "%d %d %ld %s %" PRIu64 " %" PRIu64 " %d %d %" PRIu64 " %" PRId64
          " %" PRIu64 "\n",
          g_proc, w->id, w->op, call, s, e, rc, key, token, value, txn);
}

static void on_lost(ordo_txn_t *t, void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_lost_mu);
  fprintf(g_lost, "%" PRIu64 " %" PRIu64 "\n", mono_ns(), ordo_txn_id(t));
  pthread_mutex_unlock(&g_lost_mu);
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Ends t, logging the call. */
static void end_txn(worker_t *w, ordo_txn_t **t) {
  uint64_t id = ordo_txn_id(*t), s = mono_ns();
  enter(w, "ordo_txn_end");
  ordo_txn_end(*t);
  leave(w);
  hist(w, "end", s, mono_ns(), 0, -1, 0, 0, id);
  *t = NULL;
}

static void *worker(void *arg) {
  worker_t *w = arg;
  ordo_txn_t *t = NULL;
  char key[32];
  while (mono_ns() < g_deadline) {
    if (!t) {
      uint64_t s = mono_ns();
      enter(w, "ordo_txn_begin");
      int rc = ordo_txn_begin(g_o, &t, NULL);
      leave(w);
      hist(w, "begin", s, mono_ns(), rc, -1, 0, 0, rc ? 0 : ordo_txn_id(t));
      if (rc) {
        t = NULL;
        sleep_us(20000); /* a backend that is down: try again later */
        continue;
      }
    }
    if (access(g_stop, F_OK) == 0)
      break;
    w->op++;
    int k = (int)(rnd(w) % (uint64_t)g_keys);
    int klen = snprintf(key, sizeof key, "fk:%d", k);
    uint64_t txn = ordo_txn_id(t), s = mono_ns();
    enter(w, "ordo_lock");
    int rc = ordo_lock(t, key, (size_t)klen, ORDO_MODE_X, g_lock_ms);
    leave(w);
    uint64_t token = 0;
    if (rc == 0 && ordo_fence(t, key, (size_t)klen, &token) != 0)
      token = 0; /* logged as 0: check.py counts a grant without a token */
    hist(w, "lock", s, mono_ns(), rc, k, token, 0, txn);
    if (rc) {
      if (rc != ORDO_ETIMEDOUT && rc != ORDO_EDEADLK && rc != ORDO_EQUORUM)
        end_txn(w, &t);
      sleep_us(1000 + (long)(rnd(w) % 9000));
      continue;
    }
    long n = atomic_fetch_add(&g_granted, 1) + 1;
    if (n % 64 == 0) {
      char num[32];
      int len = snprintf(num, sizeof num, "%ld\n", n);
      if (pwrite(g_progress_fd, num, (size_t)len, 0) != len) {
        perror("fclient: progress");
        exit(2);
      }
    }
    uint64_t lease_end = s + (uint64_t)g_lease_ms * 500000u;
    int64_t v = 0;
    uint64_t rs = mono_ns();
    int rrc = lease_end > rs ? freg_read(&g_reg[k], &v, NULL) : 1;
    if (rrc < 0) {
      fprintf(stderr, "fclient: register %d: read: %s\n", k, strerror(-rrc));
      exit(2);
    }
    if (rrc == 0) {
      hist(w, "read", rs, mono_ns(), 0, k, token, v, txn);
      if (rnd(w) % 4 == 0)
        sleep_us((long)(rnd(w) % 500)); /* a critical section's work */
      uint64_t ws = mono_ns(), we;
      if (ws < lease_end) {
        int wrc = freg_write(&g_reg[k], token, v, v + 1, &we);
        if (wrc < 0) {
          fprintf(stderr, "fclient: register %d: write: %s\n", k,
                  strerror(-wrc));
          exit(2);
        }
        hist(w, "write", ws, we, wrc, k, token, v + 1, txn);
      } else {
        hist(w, "skip", ws, ws, 0, k, token, v, txn);
      }
    } else {
      hist(w, "skip", rs, rs, 0, k, token, 0, txn);
    }
    s = mono_ns();
    enter(w, "ordo_unlock");
    if (g_unlock_all) {
      rc = ordo_unlock_all(t);
      rc = rc > 0 ? 0 : rc == 0 ? ORDO_ENOTHELD : rc; /* > 0: keys released */
    } else {
      rc = ordo_unlock(t, key, (size_t)klen);
    }
    leave(w);
    hist(w, "unlock", s, mono_ns(), rc, k, token, 0, txn);
    if (rc)
      end_txn(w, &t);
  }
  if (t)
    end_txn(w, &t);
  return NULL;
}

/* The watchdog: a call that has not returned within the hang bound fails
 * the process with the place's state, instead of hanging the test. */
static void *watchdog(void *arg) {
  (void)arg;
  uint64_t hang = (uint64_t)((double)g_hang_s * mult() * 1e9);
  for (;;) {
    sleep_us(100000);
    uint64_t now = mono_ns();
    for (int i = 0; i < g_threads; i++) {
      uint64_t s = atomic_load(&g_w[i].call_start);
      if (s && now > s && now - s > hang) {
        fprintf(stderr,
                "fclient: HANG: proc %d thread %d in %s for %.1f s (bound "
                "%.1f s); the place:\n",
                g_proc, i, atomic_load(&g_w[i].call_name), (now - s) / 1e9,
                hang / 1e9);
        ordo_dump(g_o, 2);
        _exit(3);
      }
    }
  }
  return NULL;
}

static long arg_long(const char *v, const char *name) {
  char *end;
  long x = strtol(v, &end, 10);
  if (*v == 0 || *end || x < 0) {
    fprintf(stderr, "fclient: %s wants a number, not '%s'\n", name, v);
    exit(64);
  }
  return x;
}

int main(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *a = argv[i], *v = argv[i + 1];
    if (!strcmp(a, "--url"))
      g_url = v;
    else if (!strcmp(a, "--dir"))
      g_dir = v;
    else if (!strcmp(a, "--proc"))
      g_proc = (int)arg_long(v, a);
    else if (!strcmp(a, "--threads"))
      g_threads = (int)arg_long(v, a);
    else if (!strcmp(a, "--keys"))
      g_keys = (int)arg_long(v, a);
    else if (!strcmp(a, "--max-s"))
      g_max_s = arg_long(v, a);
    else if (!strcmp(a, "--lock-ms"))
      g_lock_ms = arg_long(v, a);
    else if (!strcmp(a, "--lease-ms"))
      g_lease_ms = arg_long(v, a);
    else if (!strcmp(a, "--hang-s"))
      g_hang_s = arg_long(v, a);
    else if (!strcmp(a, "--unlock-all"))
      g_unlock_all = arg_long(v, a);
    else {
      fprintf(stderr, "fclient: unknown option %s\n", a);
      return 64;
    }
  }
  if (!g_url || !g_dir || g_threads < 1 || g_threads > MAX_THREADS ||
      g_keys < 1 || g_keys > MAX_KEYS) {
    fprintf(stderr, "usage: fclient --url URL --dir DIR --proc N [--threads "
                    "1..64] [--keys 1..64] [--max-s S] [--lock-ms "
                    "L] [--lease-ms L] [--hang-s S] [--unlock-all 0|1]\n");
    return 64;
  }
  char path[4096];
  for (int k = 0; k < g_keys; k++) {
    snprintf(path, sizeof path, "%s/reg-%d", g_dir, k);
    int rc = freg_open(&g_reg[k], path);
    if (rc) {
      fprintf(stderr, "fclient: %s: %s\n", path, strerror(-rc));
      return 2;
    }
  }
  snprintf(g_stop, sizeof g_stop, "%s/stop", g_dir);
  snprintf(path, sizeof path, "%s/progress-%d", g_dir, g_proc);
  g_progress_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (g_progress_fd < 0) {
    perror(path);
    return 2;
  }
  snprintf(path, sizeof path, "%s/lost-%d.txt", g_dir, g_proc);
  g_lost = fopen(path, "w");
  if (!g_lost) {
    perror(path);
    return 2;
  }
  int rc = ordo_open(&g_o, g_url, NULL);
  if (rc) {
    fprintf(stderr, "fclient: ordo_open(%s): %s\n", g_url, ordo_strerror(rc));
    return 2;
  }
  ordo_on_lease_lost(g_o, on_lost, NULL);
  g_deadline = mono_ns() + (uint64_t)g_max_s * 1000000000u;
  pthread_t wd;
  pthread_create(&wd, NULL, watchdog, NULL);
  for (int i = 0; i < g_threads; i++) {
    worker_t *w = &g_w[i];
    w->id = i;
    w->rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(g_proc * MAX_THREADS + i + 1) ^
             mono_ns();
    snprintf(path, sizeof path, "%s/hist-%d-%d.txt", g_dir, g_proc, i);
    w->hist = fopen(path, "w");
    if (!w->hist) {
      perror(path);
      return 2;
    }
    pthread_create(&w->th, NULL, worker, w);
  }
  for (int i = 0; i < g_threads; i++) {
    pthread_join(g_w[i].th, NULL);
    if (fclose(g_w[i].hist) != 0) {
      perror("fclient: history");
      return 2;
    }
  }
  /* The place's state at the end (its last error among it), for a failed
   * run's reader. */
  snprintf(path, sizeof path, "%s/dump-%d.txt", g_dir, g_proc);
  int dfd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (dfd >= 0) {
    ordo_dump(g_o, dfd);
    close(dfd);
  }
  ordo_on_lease_lost(g_o, NULL, NULL);
  ordo_close(g_o);
  pthread_mutex_lock(&g_lost_mu);
  fclose(g_lost);
  pthread_mutex_unlock(&g_lost_mu);
  for (int k = 0; k < g_keys; k++)
    freg_close(&g_reg[k]);
  close(g_progress_fd);
  printf("fclient %d: %ld locks granted\n", g_proc, atomic_load(&g_granted));
  return 0;
}
