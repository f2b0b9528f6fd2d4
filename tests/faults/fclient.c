/*
 * fclient.c -- one client process of the fault harness (docs/reliability.md,
 * tests/faults/run.sh): threads that each, in a loop, lock one of a few
 * keys in X through a remote backend, read the key's fenced register
 * (register.h), write it back plus one with the grant's fencing token,
 * and unlock, logging every call to a history file that check.py reads.
 *
 *   fclient --url URL --dir DIR --proc N [--threads T] [--keys K]
 *           [--max-s S] [--lock-ms L] [--lease-ms L] [--hang-s S]
 *           [--unlock-all 0|1] [--multi M] [--key-prefix P]
 *   fclient --url URL --keys K [--key-prefix P] --placement
 *
 * Each thread writes DIR/hist-N-T.txt, one line per call:
 *   proc thread op call start_ns end_ns rc key token value txn gid
 * (CLOCK_MONOTONIC; call is begin, lock, read, write, skip, unlock,
 * unlockall, end; rc an ordo code, or for write 1 accepted and 0 refused;
 * gid the txn's global id on a sharded ordod:// place, "-" elsewhere).
 * Lines are written whole as each call returns (line-buffered), so a
 * client killed with -9 loses at most the line of the call it was in. The
 * lease-lost callback writes DIR/lost-N.txt ("t_ns txn gid"), and
 * ordo_dump's state at the end goes to DIR/dump-N.txt. DIR/progress-N holds
 * the
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
 * --multi M (M >= 1) is the sharded harness's mode (shards.sh): each unit
 * of work is one txn that takes M distinct keys of the K *one at a time*,
 * in a random order, with ordo_lock (so txns close cycles across shards,
 * which only the probes can break), then reads and writes each key's
 * register with that key's token, then unlocks them one by one and ends
 * the txn. A failed lock (a deadlock victim, a lost lease, a timeout, a
 * shard down) gives back everything with ordo_unlock_all (logged as
 * unlockall), backs off a full-jitter 0..min(100 ms, 2^attempt ms), and
 * tries the same txn again, as ordo_retry does; an error that is not
 * retryable ends the txn, and the next unit begins another. In this mode a
 * holder writes whenever it has been told it holds the key (no half-lease
 * rule): a txn waits for its later keys for seconds while its client
 * renews the lease, and check.py's exclusion check follows what each txn
 * was told, charging a pause or kill of the key's shard, the one way a
 * renewed lease can still run out. The watchdog also writes DIR/busy-N
 * every 10 ms: the age in ms of this process's oldest ordo_lock under way
 * (0: none), which the harness awaits to kill a client while a txn of it
 * waits, likely on a cycle being confirmed.
 *
 * --placement prints, for each key 0..K-1, "k shard-name" (the library's
 * rendezvous placement over the URL's shard names) and exits: the
 * harness's and the checker's one source of where a key lives.
 *
 * A watchdog fails the process (exit 3) with ordo_dump's state when a call
 * has not returned within --hang-s seconds (times ORDO_TEST_TIMEOUT_MULT):
 * a hang, as against a late return, which check.py counts against the
 * call's bound.
 */
#include "register.h"

#include <ordo.h>

#include "backend/shards.h" /* the placement and the txn's gid */

#include <errno.h>
#include <stdbool.h>
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
            g_unlock_all, g_multi;
static const char *g_prefix = "fk:";
static int g_busy_fd = -1;
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

/* The txn's global id for the history ("-" when the place has none). */
static const char *gid_of(const ordo_txn_t *t) {
  const char *g = t ? ordo__shards_txn_gid(t) : NULL;
  return g ? g : "-";
}

static void hist(worker_t *w, const char *call, uint64_t s, uint64_t e, int rc,
                 int key, uint64_t token, int64_t value, uint64_t txn,
                 const char *gid) {
  fprintf(w->hist,
          "%d %d %ld %s %" PRIu64 " %" PRIu64 " %d %d %" PRIu64 " %" PRId64
          " %" PRIu64 " %s\n",
          g_proc, w->id, w->op, call, s, e, rc, key, token, value, txn, gid);
}

static void on_lost(ordo_txn_t *t, void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_lost_mu);
  fprintf(g_lost, "%" PRIu64 " %" PRIu64 " %s\n", mono_ns(), ordo_txn_id(t),
          gid_of(t));
  fflush(g_lost);
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
  char gid[64];
  snprintf(gid, sizeof gid, "%s", gid_of(*t));
  enter(w, "ordo_txn_end");
  ordo_txn_end(*t);
  leave(w);
  hist(w, "end", s, mono_ns(), 0, -1, 0, 0, id, gid);
  *t = NULL;
}

/* Counts one grant, and every 64 tells the schedule (progress-N). */
static void granted_one(void) {
  long n = atomic_fetch_add(&g_granted, 1) + 1;
  if (n % 64 == 0) {
    char num[32];
    int len = snprintf(num, sizeof num, "%ld\n", n);
    if (pwrite(g_progress_fd, num, (size_t)len, 0) != len) {
      perror("fclient: progress");
      exit(2);
    }
  }
}

/* Begins *t (logged); 0, or the error after a pause (a backend that is
 * down: the caller tries again later). */
static int begin_txn(worker_t *w, ordo_txn_t **t) {
  uint64_t s = mono_ns();
  enter(w, "ordo_txn_begin");
  int rc = ordo_txn_begin(g_o, t, NULL);
  leave(w);
  hist(w, "begin", s, mono_ns(), rc, -1, 0, 0, rc ? 0 : ordo_txn_id(*t),
       rc ? "-" : gid_of(*t));
  if (rc) {
    *t = NULL;
    sleep_us(20000);
  }
  return rc;
}

/*
 * worker_multi -- the --multi mode (see the header): one txn per unit of
 * work, its keys taken one at a time in a random order, retried on the
 * same txn after a failure as ordo_retry would.
 */
static void *worker_multi(worker_t *w) {
  ordo_txn_t *t = NULL;
  int keys[MAX_KEYS], perm[MAX_KEYS];
  uint64_t tokens[MAX_KEYS];
  char key[64];
  unsigned attempt = 0;
  while (mono_ns() < g_deadline && access(g_stop, F_OK) != 0) {
    if (!t) {
      if (begin_txn(w, &t) != 0)
        continue;
      attempt = 0;
    }
    w->op++;
    uint64_t txn = ordo_txn_id(t);
    const char *gid = gid_of(t);
    /* M distinct keys in a random order: a partial Fisher-Yates shuffle. */
    for (int i = 0; i < g_keys; i++)
      perm[i] = i;
    for (int i = 0; i < (int)g_multi; i++) {
      int j = i + (int)(rnd(w) % (uint64_t)(g_keys - i));
      int x = perm[i];
      perm[i] = perm[j];
      perm[j] = x;
      keys[i] = perm[i];
    }
    int held = 0, rc = 0;
    for (; held < (int)g_multi; held++) {
      int k = keys[held];
      int klen = snprintf(key, sizeof key, "%s%d", g_prefix, k);
      uint64_t s = mono_ns(), token = 0;
      enter(w, "ordo_lock");
      rc = ordo_lock(t, key, (size_t)klen, ORDO_MODE_X, g_lock_ms);
      leave(w);
      if (rc == 0 && ordo_fence(t, key, (size_t)klen, &token) != 0)
        token = 0; /* logged as 0: check.py counts a grant without a token */
      hist(w, "lock", s, mono_ns(), rc, k, token, 0, txn, gid);
      if (rc)
        break;
      tokens[held] = token;
      granted_one();
    }
    if (rc) {
      /* Give everything back (the server may have let it go already: a
       * victim's keys go everywhere), then back off and try again. */
      uint64_t s = mono_ns();
      enter(w, "ordo_unlock_all");
      int n = ordo_unlock_all(t);
      leave(w);
      hist(w, "unlockall", s, mono_ns(), n < 0 ? n : 0, -1, 0, n < 0 ? 0 : n,
           txn, gid);
      if (!ordo_is_retryable(rc) || n < 0) {
        end_txn(w, &t);
        sleep_us(1000 + (long)(rnd(w) % 9000));
        continue;
      }
      long cap = attempt >= 7 ? 100000 : 1000L << attempt;
      if (cap > 100000)
        cap = 100000;
      attempt++;
      sleep_us((long)(rnd(w) % (uint64_t)cap));
      continue;
    }
    /* Every key held: each register read and written with its own token. */
    for (int i = 0; i < held; i++) {
      int k = keys[i];
      int64_t v = 0;
      uint64_t rs = mono_ns();
      int rrc = freg_read(&g_reg[k], &v, NULL);
      if (rrc < 0) {
        fprintf(stderr, "fclient: register %d: read: %s\n", k, strerror(-rrc));
        exit(2);
      }
      hist(w, "read", rs, mono_ns(), 0, k, tokens[i], v, txn, gid);
      if (rnd(w) % 4 == 0)
        sleep_us((long)(rnd(w) % 500)); /* a critical section's work */
      uint64_t ws = mono_ns(), we;
      int wrc = freg_write(&g_reg[k], tokens[i], v, v + 1, &we);
      if (wrc < 0) {
        fprintf(stderr, "fclient: register %d: write: %s\n", k, strerror(-wrc));
        exit(2);
      }
      hist(w, "write", ws, we, wrc, k, tokens[i], v + 1, txn, gid);
    }
    int bad = 0;
    for (int i = held - 1; i >= 0; i--) {
      int k = keys[i];
      int klen = snprintf(key, sizeof key, "%s%d", g_prefix, k);
      uint64_t s = mono_ns();
      enter(w, "ordo_unlock");
      rc = ordo_unlock(t, key, (size_t)klen);
      leave(w);
      hist(w, "unlock", s, mono_ns(), rc, k, tokens[i], 0, txn, gid);
      bad |= rc != 0;
    }
    (void)bad; /* a failed unlock: the key went with the session anyway */
    end_txn(w, &t);
  }
  if (t)
    end_txn(w, &t);
  return NULL;
}

static void *worker(void *arg) {
  worker_t *w = arg;
  if (g_multi)
    return worker_multi(w);
  ordo_txn_t *t = NULL;
  char key[64];
  while (mono_ns() < g_deadline) {
    if (!t && begin_txn(w, &t) != 0)
      continue; /* a backend that is down: try again later */
    if (access(g_stop, F_OK) == 0)
      break;
    w->op++;
    int k = (int)(rnd(w) % (uint64_t)g_keys);
    int klen = snprintf(key, sizeof key, "%s%d", g_prefix, k);
    uint64_t txn = ordo_txn_id(t), s = mono_ns();
    const char *gid = gid_of(t);
    enter(w, "ordo_lock");
    int rc = ordo_lock(t, key, (size_t)klen, ORDO_MODE_X, g_lock_ms);
    leave(w);
    uint64_t token = 0;
    if (rc == 0 && ordo_fence(t, key, (size_t)klen, &token) != 0)
      token = 0; /* logged as 0: check.py counts a grant without a token */
    hist(w, "lock", s, mono_ns(), rc, k, token, 0, txn, gid);
    if (rc) {
      if (rc != ORDO_ETIMEDOUT && rc != ORDO_EDEADLK && rc != ORDO_EQUORUM)
        end_txn(w, &t);
      sleep_us(1000 + (long)(rnd(w) % 9000));
      continue;
    }
    granted_one();
    uint64_t lease_end = s + (uint64_t)g_lease_ms * 500000u;
    int64_t v = 0;
    uint64_t rs = mono_ns();
    int rrc = lease_end > rs ? freg_read(&g_reg[k], &v, NULL) : 1;
    if (rrc < 0) {
      fprintf(stderr, "fclient: register %d: read: %s\n", k, strerror(-rrc));
      exit(2);
    }
    if (rrc == 0) {
      hist(w, "read", rs, mono_ns(), 0, k, token, v, txn, gid);
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
        hist(w, "write", ws, we, wrc, k, token, v + 1, txn, gid);
      } else {
        hist(w, "skip", ws, ws, 0, k, token, v, txn, gid);
      }
    } else {
      hist(w, "skip", rs, rs, 0, k, token, 0, txn, gid);
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
    hist(w, "unlock", s, mono_ns(), rc, k, token, 0, txn, gid);
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
    sleep_us(g_busy_fd >= 0 ? 10000 : 100000);
    uint64_t now = mono_ns(), oldest = 0;
    for (int i = 0; i < g_threads; i++) {
      uint64_t s = atomic_load(&g_w[i].call_start);
      const char *name = atomic_load(&g_w[i].call_name);
      if (s && now > s && name && strcmp(name, "ordo_lock") == 0 &&
          now - s > oldest)
        oldest = now - s;
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
    if (g_busy_fd >= 0) {
      /* One fixed-width line, rewritten in place: a reader sees a whole
       * number or, rarely, a torn one that it reads again. */
      char num[24];
      int len = snprintf(num, sizeof num, "%10llu\n",
                         (unsigned long long)(oldest / 1000000u));
      if (pwrite(g_busy_fd, num, (size_t)len, 0) != len) {
        perror("fclient: busy");
        _exit(2);
      }
    }
  }
  return NULL;
}

/* --placement: "k shard-name" for each key, by the library's placement
 * over the shard names of an ordod://a1,a2,... URL (as shards.c reads it:
 * after the last '@', up to '?'). */
static int print_placement(void) {
  const char *rest = strncmp(g_url, "ordod://", 8) == 0 ? g_url + 8 : NULL;
  if (!rest) {
    fprintf(stderr, "fclient: --placement wants an ordod:// URL\n");
    return 64;
  }
  size_t alen = strcspn(rest, "?");
  const char *hp = rest;
  for (const char *q = rest; q < rest + alen; q++)
    if (*q == '@')
      hp = q + 1;
  char buf[4096];
  snprintf(buf, sizeof buf, "%.*s", (int)(rest + alen - hp), hp);
  const char *names[64];
  size_t n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && n < 64;
       tok = strtok_r(NULL, ",", &save))
    names[n++] = tok;
  if (n == 0)
    return 64;
  char key[64];
  for (int k = 0; k < g_keys; k++) {
    int klen = snprintf(key, sizeof key, "%s%d", g_prefix, k);
    printf("%d %s\n", k, names[ordo__shard_place(names, n, key, (size_t)klen)]);
  }
  return 0;
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
  bool placement = false;
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(a, "--placement")) {
      placement = true;
      i--; /* a flag: no value */
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "fclient: %s wants a value\n", a);
      return 64;
    }
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
    else if (!strcmp(a, "--multi"))
      g_multi = arg_long(v, a);
    else if (!strcmp(a, "--key-prefix"))
      g_prefix = v;
    else {
      fprintf(stderr, "fclient: unknown option %s\n", a);
      return 64;
    }
  }
  if (placement && g_url && g_keys >= 1 && g_keys <= MAX_KEYS)
    return print_placement();
  if (!g_url || !g_dir || g_threads < 1 || g_threads > MAX_THREADS ||
      g_keys < 1 || g_keys > MAX_KEYS || g_multi > g_keys ||
      strlen(g_prefix) > 40) {
    fprintf(stderr, "usage: fclient --url URL --dir DIR --proc N [--threads "
                    "1..64] [--keys 1..64] [--max-s S] [--lock-ms "
                    "L] [--lease-ms L] [--hang-s S] [--unlock-all 0|1] "
                    "[--multi 0..K] [--key-prefix P]\n"
                    "       fclient --url URL --keys K [--key-prefix P] "
                    "--placement\n");
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
  if (g_multi) {
    snprintf(path, sizeof path, "%s/busy-%d", g_dir, g_proc);
    g_busy_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (g_busy_fd < 0) {
      perror(path);
      return 2;
    }
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
    /* Whole lines as calls return: a kill -9 loses only the call under
     * way, whose start no line had told anyway. */
    setvbuf(w->hist, NULL, _IOLBF, 0);
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
