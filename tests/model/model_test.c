/*
 * model_test.c -- the model-based tester of the lock engine. Seeded,
 * deterministic sequences of public calls run against a real mem:// place
 * and against the reference model (model.c), which are compared after
 * every step; the first mismatch is shrunk by deleting chunks of steps and
 * printed as a replayable test (a small text format that --replay reads,
 * and a list of C calls). See tests/model/README.md for the design.
 *
 *   model_test [--seed S] [--steps N] [--replay FILE] [--json]
 *
 * Determinism comes from three things. The engine runs on its manual clock
 * (ordo__clock_set_manual): time moves only by an advance step, and every
 * deadline lives in the timer heap that ordo__table_tick runs. Each txn's
 * blocking calls run on a worker thread of its own, and after every step
 * the driver waits until the system is quiescent: every worker has
 * returned, or sleeps in the engine with nothing pending, or is parked in
 * ordo__mem_before_retry. Parked (poked) waiters then retry one at a time,
 * lowest txn id first, each retry followed by quiescence and a comparison.
 *
 * Steps run in episodes of EPISODE_STEPS, each in a child process with a
 * fresh place, so a crash, a hang or a sanitizer report in one episode
 * still leaves the steps that led to it, and shrinking replays each
 * candidate in a child of its own.
 *
 * A worker is idle in its wait (asleep, or spinning with the hot-key spin
 * on) when ordo__mem_wait_state has ORDO__MEM_NAPPING: W_SLEEP alone holds
 * from a waiter's first sleep to its return, through a poked waiter's
 * retry too, so it cannot tell a retry that failed and went back to sleep
 * from one still running. Each episode draws spin_us, stripes, max_locks
 * and its keys' lengths (across the lock objects' size classes); every
 * lock object is compared with the model's (ordo__table_objects), and each
 * blocking call's yields (sched_yield, wrapped) with the spin's rules.
 */
#include "core/fast.h" /* hash_key, stripe_of: where a key's object lives */
#include "model.h"
#include "../common/testutil.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

/* ---- Configuration ------------------------------------------------------- */

/* A blocking call's hot-key spin yields at most this many times
 * (src/backend/mem.c, FAST_YIELDS; docs/backend-mem.md, spin_us). */
#define FAST_YIELDS 3
/* --strict-yields: a call must not yield unless a key of it is busy
 * (another txn holds it or waits for it: docs/backend-mem.md, "a request
 * whose keys are busy first yields") or its object is listed slow (a
 * lookup left it so: README.md, "What it found"). --strict-yields=busy
 * allows only the first, and is the default since both cost defects it
 * found are fixed (--no-strict-yields turns the check off). */
enum { STRICT_OFF, STRICT_SLOW, STRICT_BUSY };
static int STRICT_YIELDS = STRICT_BUSY;

#define EPISODE_STEPS 2000
#define MAX_STEPS 100000 /* of one replay file */
#define STARVE_US 5000   /* the starvation bound: 5 ms of the manual clock */
#define MS 1000000ull

/* Key names in the canonical order (checked against ordo_key_cmp at
 * start): an episode takes a subset, in this order, so key indexes sort as
 * keys do. A key may be longer than its name: "b*40" is "b" and 39 dots,
 * 40 bytes, and dots sort before letters, so the order holds. Lengths are
 * drawn across the lock objects' size classes: each 8-byte step of the
 * slab (src/core/table_int.h, ORDO__SLAB_BYTES) and the malloc'd sizes
 * past it, up to max_key_len. */
static const char *const KEY_POOL[] = {"a", "ab", "b", "ba", "c", "ca"};
#define KEY_POOL_N 6
#define KEY_MAX 512 /* the default max_key_len */
#define KEY_PAD '.'
/* Key length bands: the slab's classes, then malloc'd keys of up to 255,
 * up to 511, and of 512 bytes. */
#define SLAB_KEY_MAX ((int)ORDO__SLAB_KEY_MAX)
#define BANDS (ORDO__SLAB_CLASSES + 3)

/* The slab class (0, 1, ...) of a key of len bytes, as table.c's
 * slab_bytes makes it; past the slab, BANDS - 3 and up. */
static int key_band(size_t len) {
  size_t off = offsetof(ordo__lock, key);
  if (len <= ORDO__SLAB_KEY_MAX)
    return (int)((((off + len + 7) & ~(size_t)7) - ((off + 7) & ~(size_t)7)) /
                 8);
  return len < 256 ? BANDS - 3 : len < 512 ? BANDS - 2 : BANDS - 1;
}

/* What an episode's hot-key spin and lock objects are drawn among. */
#define SPIN_CHOICES 3
static const long SPIN_US[SPIN_CHOICES] = {0, 20, 1000000};
#define BIG_MAX_LOCKS 1000000

/* The deterministic victim policies (ORDO_VICTIM_RANDOM is left out). */
static const char *const VICTIM_NAMES[] = {
    "youngest",   "oldest",           "fewest_locks",
    "least_work", "nearest_deadline", "lowest_priority"};
#define VICTIMS_N 6

typedef struct config {
  int ntxn, nkey, victim;
  int key[MD_KEYS];        /* indexes into KEY_POOL, increasing */
  int klen[MD_KEYS];       /* each key's length: its name, then dots */
  char kspec[MD_KEYS][12]; /* "b", or "b*40" */
  char kbytes[MD_KEYS][KEY_MAX + 1];
  long spin_us;       /* ordo_options_t's spin_us */
  uint64_t max_locks; /* and max_locks */
  unsigned stripes;   /* and stripes */
} config;

/* Fills in key k's spec and bytes from its name and length. */
static void key_make(config *c, int k) {
  const char *name = KEY_POOL[c->key[k]];
  size_t nl = strlen(name);
  if ((size_t)c->klen[k] < nl)
    c->klen[k] = (int)nl;
  memset(c->kbytes[k], KEY_PAD, (size_t)c->klen[k]);
  memcpy(c->kbytes[k], name, nl);
  c->kbytes[k][c->klen[k]] = 0;
  if ((size_t)c->klen[k] == nl)
    snprintf(c->kspec[k], sizeof c->kspec[k], "%s", name);
  else
    snprintf(c->kspec[k], sizeof c->kspec[k], "%s*%d", name, c->klen[k]);
}

/* ---- Steps --------------------------------------------------------------- */

enum {
  ST_LOCK,
  ST_LOCK_ALL,
  ST_ASYNC,
  ST_CANCEL,
  ST_UNLOCK,
  ST_UNLOCK_ALL,
  ST_END,
  ST_ADVANCE,
  ST__N
};
static const char *const STEP_NAMES[] = {"lock",   "lock_all", "async",
                                         "cancel", "unlock",   "unlock_all",
                                         "end",    "advance"};

/* One step. key/mode are the request as asked (keys may repeat: the API
 * merges them); tmo is the timeout in ms (-1 forever), or an advance's ms. */
typedef struct step {
  uint8_t kind, slot, n;
  uint8_t key[MD_SET], mode[MD_SET];
  int32_t tmo;
} step;

/* ---- Deterministic random numbers (splitmix64) ----------------------------
 */

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t rng_next(rng *g) {
  uint64_t z = (g->s += 0x9E3779B97F4A7C15u);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}

static int rng_int(rng *g, int n) {
  return (int)(rng_next(g) % (uint64_t)n);
}

/* ---- Text ---------------------------------------------------------------- */

/* A growing text buffer for messages and printed sequences. */
typedef struct sbuf {
  char *p;
  size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k =
        vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0)
      return;
    if (b->p && b->n + (size_t)k < b->cap) {
      b->n += (size_t)k;
      return;
    }
    size_t cap = b->cap ? b->cap * 2 : 1024;
    while (cap < b->n + (size_t)k + 1)
      cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q)
      return;
    b->p = q;
    b->cap = cap;
  }
}

static const char *mode_name(int mode) {
  return mode == ORDO_MODE_X ? "X" : "S";
}

static const char *status_name(int rc) {
  if (rc == 0)
    return "0";
  if (rc == ORDO_PENDING)
    return "PENDING";
  return ordo_err_name(rc);
}

/* Key k as the replay format names it. */
static const char *key_name(const config *c, int k) {
  return c->kspec[k];
}

static void fmt_timeout(sbuf *b, int32_t tmo) {
  if (tmo < 0)
    sb_printf(b, "forever");
  else
    sb_printf(b, "%" PRId32, tmo);
}

/* The replay format: one step a line (see README.md). */
static void fmt_step(sbuf *b, const config *c, const step *st) {
  sb_printf(b, "%s", STEP_NAMES[st->kind]);
  switch (st->kind) {
  case ST_LOCK:
    sb_printf(b, " %d %s %s ", st->slot, key_name(c, st->key[0]),
              mode_name(st->mode[0]));
    fmt_timeout(b, st->tmo);
    break;
  case ST_LOCK_ALL:
  case ST_ASYNC:
    sb_printf(b, " %d ", st->slot);
    for (int i = 0; i < st->n; i++)
      sb_printf(b, "%s%s:%s", i ? "," : "", key_name(c, st->key[i]),
                mode_name(st->mode[i]));
    sb_printf(b, " ");
    fmt_timeout(b, st->tmo);
    break;
  case ST_UNLOCK:
    sb_printf(b, " %d %s", st->slot, key_name(c, st->key[0]));
    break;
  case ST_CANCEL:
  case ST_UNLOCK_ALL:
  case ST_END:
    sb_printf(b, " %d", st->slot);
    break;
  case ST_ADVANCE:
    sb_printf(b, " %" PRId32, st->tmo);
    break;
  }
}

static void fmt_header(sbuf *b, const config *c) {
  sb_printf(b, "model txns=%d keys=", c->ntxn);
  for (int k = 0; k < c->nkey; k++)
    sb_printf(b, "%s%s", k ? "," : "", key_name(c, k));
  sb_printf(b, " victim=%s spin_us=%ld max_locks=%" PRIu64 " stripes=%u\n",
            VICTIM_NAMES[c->victim], c->spin_us, c->max_locks, c->stripes);
}

/* The C form: the calls a regression test makes, marked [t<i>] where they
 * run on slot i's own thread (and may block there). */
static void fmt_c_step(sbuf *b, const config *c, const step *st) {
  (void)c;
  char k0[32];
  snprintf(k0, sizeof k0, "k[%d], strlen(k[%d])", st->key[0], st->key[0]);
  char tmo[24];
  if (st->tmo < 0)
    snprintf(tmo, sizeof tmo, "ORDO_FOREVER");
  else
    snprintf(tmo, sizeof tmo, "%" PRId32, st->tmo);
  switch (st->kind) {
  case ST_LOCK:
    sb_printf(b, "[t%d] ordo_lock(t[%d], %s, ORDO_MODE_%s, %s);\n", st->slot,
              st->slot, k0, mode_name(st->mode[0]), tmo);
    return;
  case ST_LOCK_ALL:
  case ST_ASYNC:
    if (st->kind == ST_ASYNC)
      sb_printf(b, "     ordo_lock_all_async(t[%d], (ordo_req_t[]){", st->slot);
    else
      sb_printf(b, "[t%d] ordo_lock_all(t[%d], (ordo_req_t[]){", st->slot,
                st->slot);
    for (int i = 0; i < st->n; i++)
      sb_printf(b, "%sORDO_REQ_%s(k[%d], strlen(k[%d]))", i ? ", " : "",
                mode_name(st->mode[i]), st->key[i], st->key[i]);
    sb_printf(b, "}, %d, %s%s);\n", st->n, tmo,
              st->kind == ST_ASYNC ? ", cb, NULL" : "");
    return;
  case ST_CANCEL:
    sb_printf(b, "     ordo_cancel(t[%d]);\n", st->slot);
    return;
  case ST_UNLOCK:
    sb_printf(b, "     ordo_unlock(t[%d], %s);\n", st->slot, k0);
    return;
  case ST_UNLOCK_ALL:
    sb_printf(b, "     ordo_unlock_all(t[%d]);\n", st->slot);
    return;
  case ST_END:
    sb_printf(b, "     ordo_txn_end(t[%d]); ordo_txn_begin(o, &t[%d], NULL);\n",
              st->slot, st->slot);
    return;
  case ST_ADVANCE:
    sb_printf(b,
              "     ordo__clock_advance(%" PRId32
              " * 1000000); ordo__table_tick(ordo__engine_table(o));\n",
              st->tmo);
    return;
  }
}

/* The index of the key named s[0..n) in the replay format, or -1. */
static int key_index(const config *c, const char *s, size_t n) {
  for (int k = 0; k < c->nkey; k++)
    if (strlen(key_name(c, k)) == n && memcmp(key_name(c, k), s, n) == 0)
      return k;
  return -1;
}

/* The index of the key whose bytes are s[0..n), or -1. */
static int key_of_bytes(const config *c, const void *s, size_t n) {
  for (int k = 0; k < c->nkey; k++)
    if ((size_t)c->klen[k] == n && memcmp(c->kbytes[k], s, n) == 0)
      return k;
  return -1;
}

/* Parses one line of the replay format; 1 for a step, 0 for a blank or
 * comment line, -1 for an error. */

static int parse_mode(const char *s) {
  return strcmp(s, "X") == 0   ? ORDO_MODE_X
         : strcmp(s, "S") == 0 ? ORDO_MODE_S
                               : -1;
}

static bool parse_timeout(const char *s, int32_t *out) {
  if (strcmp(s, "forever") == 0) {
    *out = -1;
    return true;
  }
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || v < 0 || v > 1000000)
    return false;
  *out = (int32_t)v;
  return true;
}

static int parse_step(const config *c, char *line, step *st) {
  char *tok[5];
  int nt = 0;
  for (char *p = strtok(line, " \t\r\n"); p && nt < 5;
       p = strtok(NULL, " \t\r\n"))
    tok[nt++] = p;
  if (nt == 0 || tok[0][0] == '#')
    return 0;
  memset(st, 0, sizeof *st);
  int kind = -1;
  for (int i = 0; i < ST__N; i++)
    if (strcmp(tok[0], STEP_NAMES[i]) == 0)
      kind = i;
  if (kind < 0 || nt < 2)
    return -1;
  st->kind = (uint8_t)kind;
  if (kind == ST_ADVANCE)
    return nt == 2 && parse_timeout(tok[1], &st->tmo) && st->tmo > 0 ? 1 : -1;
  int slot = atoi(tok[1]);
  if (slot < 0 || slot >= c->ntxn)
    return -1;
  st->slot = (uint8_t)slot;
  switch (kind) {
  case ST_LOCK: {
    int k = nt == 5 ? key_index(c, tok[2], strlen(tok[2])) : -1;
    int m = nt == 5 ? parse_mode(tok[3]) : -1;
    if (k < 0 || m < 0 || !parse_timeout(tok[4], &st->tmo))
      return -1;
    st->n = 1;
    st->key[0] = (uint8_t)k;
    st->mode[0] = (uint8_t)m;
    return 1;
  }
  case ST_LOCK_ALL:
  case ST_ASYNC: {
    if (nt != 4 || !parse_timeout(tok[3], &st->tmo))
      return -1;
    for (char *p = tok[2]; *p;) {
      char *colon = strchr(p, ':');
      if (!colon || st->n == MD_SET)
        return -1;
      int k = key_index(c, p, (size_t)(colon - p));
      int m = colon[1] == 'X'   ? ORDO_MODE_X
              : colon[1] == 'S' ? ORDO_MODE_S
                                : -1;
      if (k < 0 || m < 0 || (colon[2] != ',' && colon[2] != 0))
        return -1;
      st->key[st->n] = (uint8_t)k;
      st->mode[st->n++] = (uint8_t)m;
      p = colon[2] ? colon + 3 : colon + 2;
    }
    return st->n > 0 ? 1 : -1;
  }
  case ST_UNLOCK: {
    int k = nt == 3 ? key_index(c, tok[2], strlen(tok[2])) : -1;
    if (k < 0)
      return -1;
    st->n = 1;
    st->key[0] = (uint8_t)k;
    return 1;
  }
  default:
    return nt == 2 ? 1 : -1;
  }
}

static bool parse_header(char *line, config *c) {
  memset(c, 0, sizeof *c);
  c->victim = -1;
  /* What a header without them (an older replay file) meant. */
  c->spin_us = 0;
  c->max_locks = BIG_MAX_LOCKS;
  c->stripes = 8;
  char *tok = strtok(line, " \t\r\n");
  if (!tok || strcmp(tok, "model") != 0)
    return false;
  while ((tok = strtok(NULL, " \t\r\n"))) {
    if (strncmp(tok, "txns=", 5) == 0) {
      c->ntxn = atoi(tok + 5);
    } else if (strncmp(tok, "victim=", 7) == 0) {
      for (int i = 0; i < VICTIMS_N; i++)
        if (strcmp(tok + 7, VICTIM_NAMES[i]) == 0)
          c->victim = i;
    } else if (strncmp(tok, "spin_us=", 8) == 0) {
      c->spin_us = atol(tok + 8);
    } else if (strncmp(tok, "max_locks=", 10) == 0) {
      c->max_locks = strtoull(tok + 10, NULL, 10);
    } else if (strncmp(tok, "stripes=", 8) == 0) {
      c->stripes = (unsigned)atoi(tok + 8);
    } else if (strncmp(tok, "keys=", 5) == 0) {
      int last = -1;
      for (char *p = tok + 5; *p;) {
        size_t n = strcspn(p, ",");
        size_t nl = strcspn(p, ",*");
        int found = -1;
        for (int i = 0; i < KEY_POOL_N; i++)
          if (strlen(KEY_POOL[i]) == nl && memcmp(KEY_POOL[i], p, nl) == 0)
            found = i;
        if (found <= last || c->nkey == MD_KEYS)
          return false; /* unknown, or out of the canonical order */
        int len = nl < n ? atoi(p + nl + 1) : (int)nl;
        if (len < (int)nl || len > KEY_MAX)
          return false;
        c->key[c->nkey] = last = found;
        c->klen[c->nkey] = len;
        key_make(c, c->nkey++);
        p += n + (p[n] == ',');
      }
    } else {
      return false;
    }
  }
  return c->ntxn >= 1 && c->ntxn <= MD_TXNS && c->nkey >= 1 && c->victim >= 0 &&
         c->max_locks >= 1 && c->stripes >= 1 &&
         (c->stripes & (c->stripes - 1)) == 0;
}

/* ---- Worker threads --------------------------------------------------------
 * A slot is one txn and the worker thread that makes its blocking calls.
 * phase says where the worker is.
 */

enum { PH_IDLE, PH_DISPATCHED, PH_IN_CALL, PH_PARKED };

typedef struct slot {
  int idx;
  ordo_txn_t *t;
  pthread_t thr;
  bool started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool turn, quit; /* under mu */
  /* The command (under mu until the worker copies it). */
  ordo_req_t req[MD_SET];
  size_t n;
  bool single;
  long tmo;
  _Atomic int phase;
  _Atomic int result;
  _Atomic long returns;
  /* Asynchronous requests of this slot: how many returned ORDO_PENDING,
   * and the callbacks that came (any positive status, or one too many, is
   * a failure on its own: cb_bad). */
  _Atomic long issued, cbs;
  _Atomic int cb_status, cb_bad;
  /* sched_yield calls made inside the current blocking call (the hot-key
   * spin's yields, src/backend/mem.c: yield_retry). */
  _Atomic long yields;
} slot;

/* The slot whose worker is inside an ordo call on this thread (NULL while
 * it waits for its turn in before_retry, or outside calls). */
static _Thread_local slot *tls_call;

/* sched_yield, wrapped at link time (-Wl,--wrap=sched_yield): a worker's
 * yields inside its call are counted, so that the driver can check when
 * the hot-key spin yields. */
int __real_sched_yield(void);
int __wrap_sched_yield(void);
int __wrap_sched_yield(void) {
  slot *s = tls_call;
  if (s)
    atomic_fetch_add(&s->yields, 1);
  return __real_sched_yield();
}

/* Pokes that found their waiter spinning (in this child). */
static _Atomic uint64_t spin_pokes;

/* ordo__mem_before_retry: a poked worker parks here until the driver gives
 * it its turn, so retries happen one at a time, in an order the driver
 * chooses (and the model follows). */
static void before_retry(ordo_txn_t *t) {
  slot *s = tls_call;
  if (!s || s->t != t)
    return;
  if ((ordo__mem_wait_state(t) & 3) == 0)
    atomic_fetch_add(&spin_pokes, 1); /* W_SPIN: answered while spinning */
  tls_call = NULL;
  pthread_mutex_lock(&s->mu);
  atomic_store(&s->phase, PH_PARKED);
  while (!s->turn)
    pthread_cond_wait(&s->cv, &s->mu);
  s->turn = false;
  atomic_store(&s->phase, PH_IN_CALL);
  pthread_mutex_unlock(&s->mu);
  tls_call = s;
}

static void *worker_main(void *arg) {
  slot *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (atomic_load(&s->phase) != PH_DISPATCHED && !s->quit)
      pthread_cond_wait(&s->cv, &s->mu);
    if (s->quit)
      break;
    ordo_req_t req[MD_SET];
    memcpy(req, s->req, sizeof req);
    size_t n = s->n;
    bool single = s->single;
    long tmo = s->tmo;
    ordo_txn_t *t = s->t;
    atomic_store(&s->phase, PH_IN_CALL);
    pthread_mutex_unlock(&s->mu);
    tls_call = s;
    int rc = single ? ordo_lock(t, req[0].key, req[0].len, req[0].mode, tmo)
                    : ordo_lock_all(t, req, n, tmo);
    tls_call = NULL;
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->result, rc);
    atomic_fetch_add(&s->returns, 1);
    atomic_store(&s->phase, PH_IDLE);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void async_cb(ordo_txn_t *t, int status, void *arg) {
  (void)t;
  slot *s = arg;
  if (status > 0)
    atomic_store(&s->cb_bad, status); /* a poke reached a callback */
  atomic_store(&s->cb_status, status);
  long n = atomic_fetch_add(&s->cbs, 1) + 1;
  /* The callback may come before ordo_lock_all_async returns (a
   * resolution inside the call), so one ahead of issued is fine. */
  if (n > atomic_load(&s->issued) + 1)
    atomic_store(&s->cb_bad, 1000); /* a second callback */
}

/* ---- A run: one place, its slots and the model ----------------------------
 */

typedef struct counters {
  uint64_t steps, skipped, episodes, oracle, turns, victims, reorders, pokes,
      wakeups, timeouts, canceled, async_cbs, upgrades, grants;
  /* The hot-key spin: episodes with it on, quiescent points with a waiter
   * spinning, pokes answered while spinning, blocking calls that yielded.
   * Lock objects: episodes with a small max_locks, fast-path grants seen,
   * keys by size band (each slab class, then malloc'd sizes). */
  uint64_t spin_episodes, spin_seen, spin_pokes, yield_calls, small_episodes,
      fast_grants, band[BANDS];
  md_coverage cov;
} counters;

typedef struct expect {
  bool busy;     /* a blocking call is out on the worker */
  bool want_ret; /* the model says it has returned, with want_rc */
  int want_rc;
  long returns;          /* returns already matched */
  long cbs;              /* callbacks the model has delivered */
  int cb_status;         /* the last one's status */
  uint64_t gen;          /* txns begun in this slot (priority and cost) */
  uint64_t tok[MD_KEYS]; /* fencing token of each hold */
  /* The call just dispatched may yield at most this many times (checked
   * once it returned or queued); fast: it may have been granted on the
   * fast path (md_fast_took). */
  bool yield_check, fast;
  int yield_max;
  /* The call found no key busy, and none with a slow listed object
   * (--strict-yields). */
  bool yield_unbusy, yield_unslow;
} expect;

typedef struct run {
  config cfg;
  double bound_s; /* how long quiescence may take (real time, x mult) */
  ordo_t *o;
  ordo__table *tab;
  slot sl[MD_TXNS];
  model m;
  expect x[MD_TXNS];
  uint64_t last_tok[MD_KEYS];
  int stripe[MD_KEYS]; /* each key's stripe, by the engine's hash */
  bool failed;
  sbuf msg;
  counters *c;
} run;

static bool fail(run *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool fail(run *r, const char *fmt, ...) {
  if (r->failed)
    return false;
  r->failed = true;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  sb_printf(&r->msg, "%s\n", line);
  return false;
}

static int slot_of_id(const run *r, uint64_t id) {
  for (int s = 0; s < r->cfg.ntxn; s++)
    if (r->m.t[s].live && r->m.t[s].id == id)
      return s;
  return -1;
}

static bool begin_txn(run *r, int s) {
  expect *x = &r->x[s];
  ordo_txn_options_t to = {0};
  to.priority = (int)((s + x->gen) % 2);
  to.cost = (uint64_t)((s * 3 + x->gen * 5) % 7);
  x->gen++;
  ordo_txn_t *t;
  int rc = ordo_txn_begin(r->o, &t, &to);
  if (rc)
    return fail(r, "ordo_txn_begin: %s", ordo_err_name(rc));
  uint64_t id = ordo_txn_id(t);
  if (id != ordo__engine_owner(t)->id)
    return fail(r, "ordo_txn_id %" PRIu64 " != engine owner id", id);
  for (int o = 0; o < r->cfg.ntxn; o++)
    if (r->m.t[o].live && r->m.t[o].id >= id)
      return fail(r, "txn id %" PRIu64 " not above slot %d's %" PRIu64, id, o,
                  r->m.t[o].id);
  pthread_mutex_lock(&r->sl[s].mu);
  r->sl[s].t = t;
  pthread_mutex_unlock(&r->sl[s].mu);
  md_begin(&r->m, s, id);
  memset(x->tok, 0, sizeof x->tok);
  return true;
}

static bool run_open(run *r, const config *cfg, double bound_s, counters *c) {
  memset(r, 0, sizeof *r);
  r->cfg = *cfg;
  r->bound_s = bound_s;
  r->c = c;
  ordo_options_t opt;
  ordo_options_init(&opt);
  opt.stripes = cfg->stripes;
  opt.spin_us = cfg->spin_us;
  opt.max_locks = cfg->max_locks;
  opt.starvation_holds = 0;
  opt.starvation_us = STARVE_US;
  opt.log_wait_ms = 0;
  opt.alarm_per_min = 0;
  opt.detect = ORDO_DETECT_IMMEDIATE;
  opt.sweep_ms = 1000;
  opt.victim = (ordo_victim_t)cfg->victim;
  int rc = ordo_open(&r->o, "mem://", &opt);
  if (rc)
    return fail(r, "ordo_open: %s", ordo_err_name(rc));
  r->tab = ordo__engine_table(r->o);
  md_init(&r->m, cfg->ntxn, cfg->nkey, ordo__now_ns(),
          (uint64_t)STARVE_US * 1000u);
  /* Empty objects kept per stripe, as docs/backend-mem.md says: a quarter
   * of max_locks over the stripes, at least 1 and at most 256. */
  uint64_t cap = cfg->max_locks / 4 / cfg->stripes;
  cap = cap < 1 ? 1 : cap > 256 ? 256 : cap;
  if (cap != r->tab->empty_cap)
    return fail(r, "the engine caches %u empty objects a stripe, not %" PRIu64,
                r->tab->empty_cap, cap);
  for (int k = 1; k < cfg->nkey; k++)
    if (ordo_key_cmp(cfg->kbytes[k - 1], (size_t)cfg->klen[k - 1],
                     cfg->kbytes[k], (size_t)cfg->klen[k]) >= 0)
      return fail(r, "keys %s and %s are not in the canonical order",
                  key_name(cfg, k - 1), key_name(cfg, k));
  for (int k = 0; k < cfg->nkey; k++)
    r->stripe[k] =
        (int)stripe_of(r->tab, hash_key(cfg->kbytes[k], (size_t)cfg->klen[k]));
  md_objects(&r->m, cfg->max_locks, (int)cap, r->stripe);
  for (int s = 0; s < cfg->ntxn; s++) {
    slot *sl = &r->sl[s];
    sl->idx = s;
    pthread_mutex_init(&sl->mu, NULL);
    pthread_cond_init(&sl->cv, NULL);
    if (!begin_txn(r, s))
      return false;
    if (pthread_create(&sl->thr, NULL, worker_main, sl) != 0)
      return fail(r, "pthread_create failed");
    sl->started = true;
  }
  return true;
}

/* The worker's phase moves on here, not when it wakes: a view taken before
 * it runs must not find it parked still. */
static void give_turn(slot *s) {
  pthread_mutex_lock(&s->mu);
  s->turn = true;
  atomic_store(&s->phase, PH_IN_CALL);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* Ends the run: every wait cancelled, every worker back (parked ones given
 * their turns), every txn ended, the place closed. Bounded: a worker that
 * never comes back (a broken engine) is left behind with its place, and
 * the run, already failed, says so. */
static void run_close(run *r) {
  for (int s = 0; s < r->cfg.ntxn; s++)
    if (r->sl[s].t)
      ordo_cancel(r->sl[s].t);
  uint64_t end = tu_now_ns() + (uint64_t)(r->bound_s * tu_mult() * 1e9);
  bool idle = false;
  while (!idle) {
    idle = true;
    for (int s = 0; s < r->cfg.ntxn; s++) {
      int ph = atomic_load(&r->sl[s].phase);
      if (ph == PH_PARKED)
        give_turn(&r->sl[s]);
      if (ph != PH_IDLE)
        idle = false;
    }
    if (idle)
      break;
    if (tu_now_ns() > end) {
      fail(r, "cleanup: a worker did not come back; its place is leaked");
      for (int s = 0; s < r->cfg.ntxn; s++)
        if (r->sl[s].started)
          pthread_detach(r->sl[s].thr);
      return;
    }
    sched_yield();
  }
  for (int s = 0; s < r->cfg.ntxn; s++) {
    slot *sl = &r->sl[s];
    if (sl->t)
      ordo_txn_end(sl->t);
    sl->t = NULL;
    if (sl->started) {
      pthread_mutex_lock(&sl->mu);
      sl->quit = true;
      pthread_cond_broadcast(&sl->cv);
      pthread_mutex_unlock(&sl->mu);
      pthread_join(sl->thr, NULL);
    }
    pthread_mutex_destroy(&sl->mu);
    pthread_cond_destroy(&sl->cv);
  }
  if (r->o) {
    ordo_stats_t st;
    ordo_stats(r->o, &st);
    if (st.sweep_finds != 0)
      fail(r, "the sweep found %" PRIu64 " cycle(s)", st.sweep_finds);
    ordo_close(r->o);
  }
  r->o = NULL;
}

/* ---- Quiescence ------------------------------------------------------------
 */

typedef struct qview {
  int phase, napping, ws;
  long returns, issued, cbs;
} qview;

static void read_view(run *r, qview *v) {
  memset(v, 0, sizeof(qview) * MD_TXNS); /* padding too: views are compared */
  for (int s = 0; s < r->cfg.ntxn; s++) {
    slot *sl = &r->sl[s];
    v[s].phase = atomic_load(&sl->phase);
    v[s].napping = (ordo__mem_wait_state(sl->t) & ORDO__MEM_NAPPING) != 0;
    v[s].ws = ordo__mem_wait_state(sl->t);
    v[s].returns = atomic_load(&sl->returns);
    v[s].issued = atomic_load(&sl->issued);
    v[s].cbs = atomic_load(&sl->cbs);
  }
}

enum { WS_STATE = 3, WS_DONE = 1 };

/* Is the view one of a quiescent system: each worker idle, parked, or
 * asleep in the engine with nothing pending; and the engine's count of
 * waiting requests those sleepers and the outstanding async requests? */
static bool view_quiet(const run *r, const qview *v, const ordo_stats_t *st) {
  long waiting = 0;
  for (int s = 0; s < r->cfg.ntxn; s++) {
    int ws = v[s].ws;
    bool queued = ws & ORDO__MEM_QUEUED;
    switch (v[s].phase) {
    case PH_IDLE:
      break;
    case PH_PARKED:
      /* Still waiting (asleep or spinning), or its outcome delivered
       * meanwhile. */
      if (queued ? (ws & WS_STATE) == WS_DONE : (ws & WS_STATE) != WS_DONE)
        return false;
      waiting += queued;
      break;
    case PH_IN_CALL:
      /* Idle in its wait: asleep, or spinning (the hot-key spin) with no
       * event or poke to act on. Either way it moves only when an event
       * or a poke reaches it, and the view shows those first. */
      if (!v[s].napping || (ws & WS_STATE) == WS_DONE || !queued ||
          (ws & ORDO__MEM_POKED))
        return false;
      waiting++;
      break;
    default:
      return false;
    }
    waiting += v[s].issued - v[s].cbs;
  }
  return (long)st->waiting == waiting;
}

/* Dumps the lock table into the failure message. */
static void dump_into(run *r) {
  FILE *f = tmpfile();
  if (!f)
    return;
  ordo_dump(r->o, fileno(f));
  rewind(f);
  char line[512];
  while (fgets(line, sizeof line, f))
    sb_printf(&r->msg, "  %s", line);
  fclose(f);
}

/* Waits (bounded) for quiescence: a view, the stats, and the view again,
 * equal and quiet. An event reaching a sleeper changes its wait state
 * before it wakes, and a parked or idle worker moves only on the driver's
 * word, so a view that holds across the stats read is a quiescent one. */
static bool quiesce(run *r, const char *where) {
  qview a[MD_TXNS], b[MD_TXNS];
  ordo_stats_t st;
  uint64_t end = tu_now_ns() + (uint64_t)(r->bound_s * tu_mult() * 1e9);
  for (unsigned i = 0;; i++) {
    read_view(r, a);
    ordo_stats(r->o, &st);
    read_view(r, b);
    for (int s = 0; s < r->cfg.ntxn; s++)
      if (atomic_load(&r->sl[s].cb_bad))
        return fail(r, "%s: slot %d's callback got %s", where, s,
                    atomic_load(&r->sl[s].cb_bad) == 1000
                        ? "a second call"
                        : status_name(atomic_load(&r->sl[s].cb_bad)));
    if (memcmp(a, b, sizeof(qview) * (size_t)r->cfg.ntxn) == 0 &&
        view_quiet(r, a, &st)) {
      for (int s = 0; s < r->cfg.ntxn; s++)
        r->c->spin_seen +=
            a[s].phase == PH_IN_CALL && (a[s].ws & WS_STATE) == 0;
      return true;
    }
    if (tu_now_ns() > end) {
      fail(r, "%s: not quiescent within %.1f s (waiting %" PRIu64 ")", where,
           r->bound_s * tu_mult(), st.waiting);
      for (int s = 0; s < r->cfg.ntxn; s++)
        sb_printf(&r->msg,
                  "  slot %d: phase %d napping %d wait state %#x returns %ld "
                  "async %ld/%ld\n",
                  s, b[s].phase, b[s].napping, b[s].ws, b[s].returns, b[s].cbs,
                  b[s].issued);
      dump_into(r);
      return false;
    }
    if (i < 200)
      sched_yield();
    else
      tu_sleep_us(50);
  }
}

/* ---- The engine's state, and the comparison ---------------------------------
 */

#define SNAP_MAX 16
typedef struct ekey {
  int nh, nq;
  ordo__snap_item h[SNAP_MAX], q[SNAP_MAX];
} ekey;

typedef struct esnap {
  const run *r;
  ekey k[MD_KEYS];
  int unknown;
} esnap;

static void snap_cb(void *arg, const uint8_t *key, size_t len,
                    const ordo__snap_item *h, size_t nh,
                    const ordo__snap_item *q, size_t nq) {
  esnap *e = arg;
  int k = key_of_bytes(&e->r->cfg, key, len);
  if (k < 0 || nh > SNAP_MAX || nq > SNAP_MAX) {
    e->unknown++;
    return;
  }
  e->k[k].nh = (int)nh;
  e->k[k].nq = (int)nq;
  memcpy(e->k[k].h, h, nh * sizeof *h);
  memcpy(e->k[k].q, q, nq * sizeof *q);
}

static void take_snapshot(run *r, esnap *e) {
  memset(e, 0, sizeof *e);
  e->r = r;
  ordo__table_snapshot(r->tab, snap_cb, e);
}

static int item_cmp(const void *a, const void *b) {
  const ordo__snap_item *x = a, *y = b;
  return x->owner < y->owner ? -1 : x->owner > y->owner;
}

/* The model's holders of key k as snapshot items, sorted by owner. */
static int model_holders(const model *m, int k, ordo__snap_item *out) {
  int n = 0;
  for (int s = 0; s < m->ntxn; s++)
    for (int i = 0; i < m->t[s].nhold; i++)
      if (m->t[s].hold[i].key == k)
        out[n++] = (ordo__snap_item){m->t[s].id, m->t[s].hold[i].mode,
                                     m->t[s].hold[i].count};
  qsort(out, (size_t)n, sizeof *out, item_cmp);
  return n;
}

static void fmt_items(sbuf *b, const ordo__snap_item *it, int n, bool counts) {
  for (int i = 0; i < n; i++) {
    sb_printf(b, " %" PRIu64 "%s", it[i].owner, mode_name(it[i].mode));
    if (counts)
      sb_printf(b, "x%u", it[i].count);
  }
}

static void fmt_states(run *r, const esnap *e) {
  const model *m = &r->m;
  sb_printf(&r->msg, "  key   model: holders | queue     engine: holders | "
                     "queue\n");
  for (int k = 0; k < r->cfg.nkey; k++) {
    ordo__snap_item mh[MD_TXNS], eh[SNAP_MAX];
    int nmh = model_holders(m, k, mh);
    memcpy(eh, e->k[k].h, sizeof eh);
    qsort(eh, (size_t)e->k[k].nh, sizeof *eh, item_cmp);
    sb_printf(&r->msg, "  %-4s ", key_name(&r->cfg, k));
    fmt_items(&r->msg, mh, nmh, true);
    sb_printf(&r->msg, " |");
    for (int i = 0; i < m->k[k].nq; i++)
      sb_printf(&r->msg, " %" PRIu64 "%s", m->t[m->k[k].q[i].slot].id,
                mode_name(m->k[k].q[i].mode));
    sb_printf(&r->msg, "     ");
    fmt_items(&r->msg, eh, e->k[k].nh, true);
    sb_printf(&r->msg, " |");
    fmt_items(&r->msg, e->k[k].q, e->k[k].nq, false);
    sb_printf(&r->msg, "\n");
  }
  sb_printf(&r->msg, "  slots:");
  for (int s = 0; s < r->cfg.ntxn; s++)
    sb_printf(&r->msg, " %d=txn %" PRIu64 "%s%s", s, m->t[s].id,
              m->t[s].waiting
                  ? (m->t[s].kind == MD_THREAD ? " waits" : " waits(async)")
                  : "",
              m->t[s].woken ? " woken" : "");
  sb_printf(&r->msg, "\n");
}

static bool compare_tables(run *r, const esnap *e, const char *where) {
  const model *m = &r->m;
  if (e->unknown)
    return fail(r, "%s: the snapshot has an unknown key or overflows", where);
  for (int k = 0; k < r->cfg.nkey; k++) {
    ordo__snap_item mh[MD_TXNS], eh[SNAP_MAX];
    int nmh = model_holders(m, k, mh);
    memcpy(eh, e->k[k].h, sizeof eh);
    qsort(eh, (size_t)e->k[k].nh, sizeof *eh, item_cmp);
    bool same = nmh == e->k[k].nh && m->k[k].nq == e->k[k].nq;
    for (int i = 0; same && i < nmh; i++)
      same = mh[i].owner == eh[i].owner && mh[i].mode == eh[i].mode &&
             mh[i].count == eh[i].count;
    for (int i = 0; same && i < m->k[k].nq; i++)
      same = m->t[m->k[k].q[i].slot].id == e->k[k].q[i].owner &&
             m->k[k].q[i].mode == e->k[k].q[i].mode;
    if (!same) {
      fail(r, "%s: key %s differs", where, key_name(&r->cfg, k));
      fmt_states(r, e);
      return false;
    }
  }
  return true;
}

#define CHECK_STAT(name)                                                       \
  do {                                                                         \
    if (st.name != m->st.name)                                                 \
      return fail(r,                                                           \
                  "%s: stats." #name " is %" PRIu64 ", the model's %" PRIu64,  \
                  where, (uint64_t)st.name, (uint64_t)m->st.name);             \
  } while (0)

static bool compare_stats(run *r, const char *where) {
  const model *m = &r->m;
  ordo_stats_t st;
  ordo_stats(r->o, &st);
  /* wake_one's asks: the wake rule's cost (src/core/README.md, step 4). */
  uint64_t asks = GET(r->tab->wake_asks);
  if (asks != m->st.wake_asks)
    return fail(r,
                "%s: the engine asked %" PRIu64 " waiters whether they can "
                "go, the wake rule %" PRIu64,
                where, asks, m->st.wake_asks);
  CHECK_STAT(acquired);
  CHECK_STAT(waited);
  CHECK_STAT(timeouts);
  CHECK_STAT(canceled);
  CHECK_STAT(deadlocks);
  CHECK_STAT(reorders);
  CHECK_STAT(pokes);
  CHECK_STAT(wakeups);
  CHECK_STAT(released);
  CHECK_STAT(waiting);
  CHECK_STAT(limits);
  CHECK_STAT(locks);
  if (st.sweep_finds != 0)
    return fail(r, "%s: the sweep found %" PRIu64 " cycle(s)", where,
                st.sweep_finds);
  return true;
}

/* ---- Lock objects -----------------------------------------------------------
 * ordo__table_objects lists every object alive: each stripe's empty list
 * in order, then the rest. The model predicts all of it (md_key), but for
 * which grants the fast path made, which it learns after each blocking
 * call (md_fast_took).
 */

typedef struct eobj {
  bool live;
  int stripe, pos, fast;
  uint64_t owner;
} eobj;

typedef struct eobjs {
  const config *cfg;
  eobj k[MD_KEYS];
  int n, unknown;
} eobjs;

static void obj_cb(void *arg, unsigned stripe, const uint8_t *key, size_t len,
                   int pos, int fast, uint64_t owner) {
  eobjs *e = arg;
  e->n++;
  int k = key_of_bytes(e->cfg, key, len);
  if (k < 0 || e->k[k].live) {
    e->unknown++;
    return;
  }
  e->k[k] = (eobj){true, (int)stripe, pos, fast, owner};
}

static void take_objects(run *r, eobjs *e) {
  memset(e, 0, sizeof *e);
  e->cfg = &r->cfg;
  ordo__table_objects(r->tab, obj_cb, e);
}

/* The fast word the model expects of key k's listed object. */
static int model_fast(const model *m, int k) {
  return m->k[k].fast >= 0                 ? ORDO__OBJ_HELD
         : m->k[k].listed && !m->k[k].slow ? ORDO__OBJ_IDLE
                                           : ORDO__OBJ_SLOW;
}

static void fmt_objects(run *r, const eobjs *e) {
  static const char *const FW[] = {"idle", "slow", "held"};
  const model *m = &r->m;
  sb_printf(&r->msg, "  key       stripe | model: live  list# fast     | "
                     "engine: live list-pos fast\n");
  for (int k = 0; k < r->cfg.nkey; k++) {
    const md_key *mk = &m->k[k];
    const eobj *ek = &e->k[k];
    char mf[32] = "-", ef[32] = "-", ml[24] = "-", el[24] = "-";
    if (mk->live && mk->fast >= 0)
      snprintf(mf, sizeof mf, "held(%" PRIu64 ")", m->t[mk->fast].id);
    else if (mk->live)
      snprintf(mf, sizeof mf, "%s", FW[model_fast(m, k)]);
    if (ek->live && ek->fast == ORDO__OBJ_HELD)
      snprintf(ef, sizeof ef, "held(%" PRIu64 ")", ek->owner);
    else if (ek->live)
      snprintf(ef, sizeof ef, "%s", FW[ek->fast]);
    if (mk->listed)
      snprintf(ml, sizeof ml, "%" PRIu64, mk->lseq);
    if (ek->live && ek->pos >= 0)
      snprintf(el, sizeof el, "%d", ek->pos);
    sb_printf(
        &r->msg, "  %-9s %6d |        %4d %6s %-8s |         %4d %8s %s\n",
        key_name(&r->cfg, k), mk->stripe, mk->live, ml, mf, ek->live, el, ef);
  }
  sb_printf(&r->msg,
            "  objects: model %" PRIu64 ", engine %d (max_locks %" PRIu64
            ", %d empty a stripe)\n",
            m->st.locks, e->n, m->max_locks, m->empty_cap);
}

/* Each key's object against the model's: alive, in its stripe, listed or
 * not, in list order within the stripe, and its fast word. */
static bool compare_objects(run *r, const char *where) {
  const model *m = &r->m;
  eobjs e;
  take_objects(r, &e);
  bool same = !e.unknown && (uint64_t)e.n == m->st.locks;
  for (int k = 0; same && k < r->cfg.nkey; k++) {
    const md_key *mk = &m->k[k];
    const eobj *ek = &e.k[k];
    same = mk->live == ek->live;
    if (!same || !mk->live)
      continue;
    same = ek->stripe == mk->stripe && (ek->pos >= 0) == mk->listed &&
           ek->fast == model_fast(m, k) &&
           (mk->fast < 0 || ek->owner == m->t[mk->fast].id);
    for (int j = 0; same && j < k; j++)
      if (mk->listed && m->k[j].listed && m->k[j].stripe == mk->stripe)
        same = (ek->pos < e.k[j].pos) == (mk->lseq < m->k[j].lseq);
  }
  if (!same) {
    fail(r, "%s: the lock objects differ%s", where,
         e.unknown ? " (an unknown or repeated key)" : "");
    fmt_objects(r, &e);
    return false;
  }
  return true;
}

/* Each worker's call and each async callback against the model's outcomes,
 * and the parked workers against the model's woken txns. A worker whose
 * request ended while it was woken (poked, then timed out in the same
 * tick, say) may have parked before the end or not; it returns after its
 * turn when it did. */
static bool compare_calls(run *r, const char *where) {
  for (int s = 0; s < r->cfg.ntxn; s++) {
    slot *sl = &r->sl[s];
    expect *x = &r->x[s];
    const md_txn *t = &r->m.t[s];
    int ph = atomic_load(&sl->phase);
    long ret = atomic_load(&sl->returns);
    bool ambiguous = !t->waiting && t->woken;
    if (ph == PH_PARKED && !t->woken)
      return fail(r, "%s: slot %d (txn %" PRIu64 ") retries unpoked", where, s,
                  t->id);
    if (t->waiting && t->woken && ph != PH_PARKED)
      return fail(r,
                  "%s: slot %d (txn %" PRIu64 ") was poked but is not "
                  "retrying",
                  where, s, t->id);
    if (x->want_ret) {
      if (ph == PH_IDLE && ret == x->returns + 1) {
        int rc = atomic_load(&sl->result);
        if (rc != x->want_rc)
          return fail(r,
                      "%s: slot %d (txn %" PRIu64 ")'s call returned %s, "
                      "the model's %s",
                      where, s, t->id, status_name(rc),
                      status_name(x->want_rc));
        x->returns++;
        x->want_ret = false;
        x->busy = false;
      } else if (!(ph == PH_PARKED && ambiguous)) {
        return fail(r,
                    "%s: slot %d (txn %" PRIu64 ")'s call has not returned "
                    "%s (phase %d)",
                    where, s, t->id, status_name(x->want_rc), ph);
      }
    } else if (x->busy) {
      if (ret != x->returns)
        return fail(r,
                    "%s: slot %d (txn %" PRIu64 ")'s call returned %s; "
                    "the model says it waits",
                    where, s, t->id, status_name(atomic_load(&sl->result)));
    } else if (ph != PH_IDLE || ret != x->returns) {
      return fail(r, "%s: slot %d's worker is busy with no call", where, s);
    }
    if (x->yield_check && (ph == PH_IDLE || t->waiting)) {
      /* The call has returned or queued: its yields are all made. */
      long y = atomic_load(&sl->yields);
      x->yield_check = false;
      r->c->yield_calls += y > 0;
      if (y > x->yield_max)
        return fail(r,
                    "%s: slot %d (txn %" PRIu64 ")'s call yielded %ld "
                    "time(s), at most %d (spin_us %ld; a try, or a key it "
                    "holds itself, yields none)",
                    where, s, t->id, y, x->yield_max, r->cfg.spin_us);
      if (y > 0 && x->yield_unbusy &&
          (STRICT_YIELDS == STRICT_BUSY ||
           (STRICT_YIELDS == STRICT_SLOW && x->yield_unslow)))
        return fail(r,
                    "%s: slot %d (txn %" PRIu64 ")'s call yielded %ld "
                    "time(s), though no key of it was held by another or "
                    "waited for%s (--strict-yields)",
                    where, s, t->id, y,
                    x->yield_unslow ? "" : " (a key's object was slow)");
    }
    long cbs = atomic_load(&sl->cbs);
    if (cbs != x->cbs)
      return fail(r,
                  "%s: slot %d (txn %" PRIu64 ") had %ld callback(s), the "
                  "model %ld",
                  where, s, t->id, cbs, x->cbs);
    if (cbs && atomic_load(&sl->cb_status) != x->cb_status)
      return fail(r,
                  "%s: slot %d (txn %" PRIu64 ")'s callback got %s, the "
                  "model's %s",
                  where, s, t->id, status_name(atomic_load(&sl->cb_status)),
                  status_name(x->cb_status));
  }
  return true;
}

/* Each txn's holds as the engine lists them (ordo__owner_each_hold: in
 * acquisition order, which decides the order of unlock_all's releases),
 * against the model's; and their fencing tokens: each new grant (or
 * upgrade) of a key gets a token above every one the key had, in grant
 * order, and a re-lock keeps its token. ordo__owner_each_hold reads the
 * owner's own list under wait_mu; unlike ordo_held or ordo_fence it does
 * not move a fast-path hold onto the lock's list, so the fast path stays
 * as the calls left it. (The worker is idle or waiting: nothing else
 * changes the list meanwhile.) */
typedef struct ehold_list {
  const config *cfg;
  int n, bad;
  struct {
    int key, mode;
    unsigned count;
    uint64_t tok;
  } h[MD_KEYS];
} ehold_list;

static void each_hold_cb(void *arg, const void *key, size_t len,
                         ordo_mode_t mode, uint64_t fence, unsigned count) {
  ehold_list *l = arg;
  int k = key_of_bytes(l->cfg, key, len);
  if (k < 0 || l->n == MD_KEYS) {
    l->bad++;
    return;
  }
  l->h[l->n].key = k;
  l->h[l->n].mode = (int)mode;
  l->h[l->n].count = count;
  l->h[l->n++].tok = fence;
}

typedef struct fresh_hold {
  int slot, key;
  uint64_t seq, tok;
} fresh_hold;

static int fresh_cmp(const void *a, const void *b) {
  const fresh_hold *x = a, *y = b;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  return x->tok < y->tok ? -1 : x->tok > y->tok;
}

static bool compare_holds(run *r, const char *where) {
  fresh_hold fr[MD_TXNS * MD_KEYS];
  int nfr = 0;
  for (int s = 0; s < r->cfg.ntxn; s++) {
    md_txn *t = &r->m.t[s];
    ehold_list l = {.cfg = &r->cfg};
    ordo__owner_each_hold(ordo__engine_owner(r->sl[s].t), each_hold_cb, &l);
    bool same = !l.bad && l.n == t->nhold;
    for (int i = 0; same && i < l.n; i++)
      same = l.h[i].key == t->hold[i].key && l.h[i].mode == t->hold[i].mode &&
             l.h[i].count == t->hold[i].count;
    if (!same) {
      fail(r, "%s: txn %" PRIu64 "'s holds differ (in acquisition order)",
           where, t->id);
      sb_printf(&r->msg, "  model: ");
      for (int i = 0; i < t->nhold; i++)
        sb_printf(&r->msg, " %s %sx%u", key_name(&r->cfg, t->hold[i].key),
                  mode_name(t->hold[i].mode), t->hold[i].count);
      sb_printf(&r->msg, "\n  engine:");
      for (int i = 0; i < l.n; i++)
        sb_printf(&r->msg, " %s %sx%u", key_name(&r->cfg, l.h[i].key),
                  mode_name(l.h[i].mode), l.h[i].count);
      sb_printf(&r->msg, "\n");
      return false;
    }
    for (int i = 0; i < t->nhold; i++) {
      md_hold *h = &t->hold[i];
      uint64_t tok = l.h[i].tok;
      if (h->fresh) {
        fr[nfr++] = (fresh_hold){s, h->key, h->seq, tok};
        h->fresh = false;
        r->c->grants++;
      } else if (tok != r->x[s].tok[h->key]) {
        return fail(r,
                    "%s: txn %" PRIu64 "'s token of %s moved from %" PRIu64
                    " to %" PRIu64,
                    where, t->id, key_name(&r->cfg, h->key),
                    r->x[s].tok[h->key], tok);
      }
    }
  }
  qsort(fr, (size_t)nfr, sizeof *fr, fresh_cmp);
  for (int i = 0; i < nfr; i++) {
    if (fr[i].tok <= r->last_tok[fr[i].key])
      return fail(r,
                  "%s: txn %" PRIu64 "'s new grant of %s has token %" PRIu64
                  ", not above %" PRIu64,
                  where, r->m.t[fr[i].slot].id, key_name(&r->cfg, fr[i].key),
                  fr[i].tok, r->last_tok[fr[i].key]);
    r->last_tok[fr[i].key] = fr[i].tok;
    r->x[fr[i].slot].tok[fr[i].key] = fr[i].tok;
  }
  return true;
}

/* The lost wake-up check: a waiting request that nothing blocks (no holder
 * it waits for, no other waiter ahead in a conflicting mode, on any key)
 * must have been poked; it may not sit queued on free keys. */
static bool check_wakeups(run *r, const char *where) {
  for (int s = 0; s < r->cfg.ntxn; s++)
    if (md_free_request(&r->m, s) && !r->m.t[s].woken) {
      esnap e;
      take_snapshot(r, &e);
      fail(r, "%s: txn %" PRIu64 " sits queued on free keys (lost wake-up)",
           where, r->m.t[s].id);
      fmt_states(r, &e);
      return false;
    }
  return true;
}

static bool compare_all(run *r, const char *where) {
  esnap e;
  take_snapshot(r, &e);
  return compare_tables(r, &e, where) && compare_stats(r, where) &&
         compare_calls(r, where) && compare_holds(r, where) &&
         compare_objects(r, where) && check_wakeups(r, where);
}

/* The model's outcome events become what the driver expects to see: a
 * blocking call's return, or an async callback. */
static void take_outcomes(run *r) {
  for (int i = 0; i < r->m.nout; i++) {
    int s = r->m.out[i].slot, status = r->m.out[i].status;
    if (r->m.t[s].kind == MD_THREAD) {
      r->x[s].want_ret = true;
      r->x[s].want_rc = status;
    } else {
      r->x[s].cbs++;
      r->x[s].cb_status = status;
      r->c->async_cbs++;
    }
  }
  r->m.nout = 0;
}

/* ---- The detector as an oracle
 * ------------------------------------------------ When a queued request closes
 * a cycle in the model's graph, the model does not predict the resolution: the
 * engine's state after the step is judged (no cycle left; victims only from the
 * blocked txn's strongly connected part, and only txns that held something;
 * nobody off that part overtaken in a queue; no grant but whole waiting
 * requests) and then adopted.
 */

typedef struct ehold {
  int mode;
  uint32_t count;
} ehold;

/* The engine's lock objects, adopted by model n after a resolution (which
 * the model does not predict): each key's object, its list order and
 * fast word. */
static bool adopt_objects(run *r, model *n) {
  eobjs e;
  take_objects(r, &e);
  if (e.unknown)
    return fail(r, "oracle: an unknown or repeated lock object");
  n->st.locks = (uint64_t)e.n;
  uint64_t base = n->lseq + 1;
  for (int k = 0; k < r->cfg.nkey; k++) {
    md_key *mk = &n->k[k];
    const eobj *ek = &e.k[k];
    mk->live = ek->live;
    mk->listed = ek->live && ek->pos >= 0;
    mk->slow = mk->listed && ek->fast == ORDO__OBJ_SLOW;
    mk->fast =
        ek->live && ek->fast == ORDO__OBJ_HELD ? slot_of_id(r, ek->owner) : -1;
    if (mk->listed)
      mk->lseq = base + (uint64_t)ek->pos;
    if (ek->live && ek->fast == ORDO__OBJ_HELD && mk->fast < 0)
      return fail(r, "oracle: key %s held on the fast path by an unknown txn",
                  key_name(&r->cfg, k));
  }
  n->lseq = base + MD_KEYS;
  return true;
}

static bool oracle(run *r, int w, const model *pre, const esnap *e) {
  bool scc[MD_TXNS];
  md_scc(pre, w, scc);
  ordo_stats_t st;
  ordo_stats(r->o, &st);
  model n = *pre;
  n.nout = 0;
  /* The victims: the new deadlock records. */
  bool victim[MD_TXNS] = {false};
  uint64_t nv = st.deadlocks - pre->st.deadlocks;
  if (st.deadlocks < pre->st.deadlocks || nv > 8)
    return fail(r, "oracle: %" PRIu64 " new deadlock records", nv);
  if (nv) {
    ordo_deadlock_t rec[32];
    int got = ordo_deadlocks(r->o, rec, 32);
    if (got < (int)nv)
      return fail(r, "oracle: %d deadlock records for %" PRIu64 " victims", got,
                  nv);
    for (int i = got - (int)nv; i < got; i++) {
      int v = slot_of_id(r, rec[i].victim);
      if (v < 0 || victim[v])
        return fail(r, "oracle: victim txn %" PRIu64 " unknown or twice",
                    rec[i].victim);
      if (!scc[v])
        return fail(r,
                    "oracle: victim txn %" PRIu64 " is off the cycle's "
                    "strongly connected part",
                    rec[i].victim);
      if (!pre->t[v].waiting)
        return fail(r, "oracle: victim txn %" PRIu64 " was not waiting",
                    rec[i].victim);
      if (pre->t[v].nhold == 0)
        return fail(r,
                    "oracle: victim txn %" PRIu64 " held no lock (a txn "
                    "that holds nothing is never a victim)",
                    rec[i].victim);
      bool on = false;
      for (size_t j = 0; j < rec[i].nedges && j < ORDO_DL_MAX_EDGES; j++)
        on |= rec[i].edge[j].from == rec[i].victim;
      if (!on)
        return fail(r,
                    "oracle: victim txn %" PRIu64 " is on no edge of its "
                    "record",
                    rec[i].victim);
      victim[v] = true;
    }
  }
  /* Each txn's holds and place in the engine. */
  ehold eh[MD_TXNS][MD_KEYS];
  memset(eh, 0, sizeof eh);
  int inq[MD_TXNS][MD_KEYS];
  memset(inq, 0, sizeof inq);
  for (int k = 0; k < r->cfg.nkey; k++) {
    for (int i = 0; i < e->k[k].nh; i++) {
      int s = slot_of_id(r, e->k[k].h[i].owner);
      if (s < 0 || eh[s][k].count)
        return fail(r, "oracle: key %s: unknown or repeated holder",
                    key_name(&r->cfg, k));
      eh[s][k] = (ehold){e->k[k].h[i].mode, e->k[k].h[i].count};
    }
    for (int i = 0; i < e->k[k].nq; i++) {
      int s = slot_of_id(r, e->k[k].q[i].owner);
      if (s < 0 || inq[s][k]++)
        return fail(r, "oracle: key %s: unknown or repeated waiter",
                    key_name(&r->cfg, k));
    }
  }
  /* No key is held in conflicting modes by two txns. */
  for (int k = 0; k < r->cfg.nkey; k++)
    for (int i = 0; i < e->k[k].nh; i++)
      for (int j = i + 1; j < e->k[k].nh; j++)
        if (e->k[k].h[i].mode == ORDO_MODE_X ||
            e->k[k].h[j].mode == ORDO_MODE_X)
          return fail(r,
                      "oracle: key %s is held by txns %" PRIu64 " and %" PRIu64
                      " in conflicting modes",
                      key_name(&r->cfg, k), e->k[k].h[i].owner,
                      e->k[k].h[j].owner);
  int granted = 0;
  uint64_t released = 0;
  for (int s = 0; s < r->cfg.ntxn; s++) {
    md_txn *t = &n.t[s];
    int queued = 0;
    for (int k = 0; k < r->cfg.nkey; k++)
      queued += inq[s][k];
    if (victim[s]) {
      if (queued)
        return fail(r, "oracle: victim txn %" PRIu64 " is still queued", t->id);
      released += (uint64_t)t->nhold;
      t->nhold = 0;
      t->waiting = false;
      n.st.waiting--;
      n.out[n.nout++] = (md_outcome){s, ORDO_EDEADLK};
    } else if (t->waiting && !queued) {
      md_grant_all(&n, s); /* handed its whole set */
      /* In an order the model does not know: the tokens say it. */
      for (int i = 0; i < t->nhold; i++)
        if (t->hold[i].fresh)
          t->hold[i].seq = 0;
      t->waiting = false;
      t->woken = false;
      n.st.waiting--;
      n.st.wakeups++;
      n.out[n.nout++] = (md_outcome){s, 0};
      granted++;
    } else if (t->waiting) {
      for (int i = 0; i < t->nent; i++)
        queued -= inq[s][t->ent[i].key] ? 1 : 0;
      if (queued)
        return fail(r,
                    "oracle: txn %" PRIu64 " is queued on keys it did not "
                    "ask",
                    t->id);
      for (int i = 0; i < t->nent; i++)
        if (!inq[s][t->ent[i].key])
          return fail(r,
                      "oracle: txn %" PRIu64 " left part of its request's "
                      "queues",
                      t->id);
    } else if (queued) {
      return fail(r, "oracle: txn %" PRIu64 " is queued with no request",
                  t->id);
    }
    /* Holds: exactly the model's (after the grant above, if any). */
    for (int k = 0; k < r->cfg.nkey; k++) {
      const md_hold *h = NULL;
      for (int i = 0; i < t->nhold; i++)
        if (t->hold[i].key == k)
          h = &t->hold[i];
      bool same = h ? eh[s][k].count == h->count && eh[s][k].mode == h->mode
                    : eh[s][k].count == 0;
      if (!same)
        return fail(r,
                    "oracle: txn %" PRIu64 "'s hold of %s is not what the "
                    "resolution explains",
                    t->id, key_name(&r->cfg, k));
    }
  }
  /* The queues: adopted, and nobody off the strongly connected part was
   * overtaken (x ahead of y before, y ahead of x now: x is in it). */
  for (int k = 0; k < r->cfg.nkey; k++) {
    const md_key *pk = &pre->k[k];
    for (int i = 0; i < e->k[k].nq; i++)
      for (int j = i + 1; j < e->k[k].nq; j++) {
        int y = slot_of_id(r, e->k[k].q[i].owner);
        int x = slot_of_id(r, e->k[k].q[j].owner);
        int px = -1, py = -1;
        for (int p = 0; p < pk->nq; p++) {
          if (pk->q[p].slot == x)
            px = p;
          if (pk->q[p].slot == y)
            py = p;
        }
        if (px >= 0 && py >= 0 && px < py && !scc[x])
          return fail(r,
                      "oracle: key %s: txn %" PRIu64 ", off the cycle, "
                      "was overtaken by txn %" PRIu64,
                      key_name(&r->cfg, k), pre->t[x].id, pre->t[y].id);
      }
    n.k[k].nq = e->k[k].nq;
    for (int i = 0; i < e->k[k].nq; i++) {
      int s = slot_of_id(r, e->k[k].q[i].owner);
      int mode = -1;
      for (int j = 0; j < n.t[s].nent; j++)
        if (n.t[s].ent[j].key == k)
          mode = n.t[s].ent[j].mode;
      if (mode != e->k[k].q[i].mode)
        return fail(r,
                    "oracle: key %s: txn %" PRIu64 " queued in the wrong "
                    "mode",
                    key_name(&r->cfg, k), n.t[s].id);
      n.k[k].q[i] = (md_qent){s, mode};
    }
  }
  /* Pokes: whoever parked was poked (a txn that then ended may or may not
   * have parked before its end). */
  int parked = 0;
  for (int s = 0; s < r->cfg.ntxn; s++) {
    bool p = atomic_load(&r->sl[s].phase) == PH_PARKED;
    n.t[s].woken = p;
    parked += p && n.t[s].waiting;
  }
  /* The counters the resolution explains. */
  if (st.released != pre->st.released + released ||
      st.acquired != pre->st.acquired + (uint64_t)granted ||
      st.wakeups != pre->st.wakeups + (uint64_t)granted ||
      st.waiting != n.st.waiting || st.timeouts != pre->st.timeouts ||
      st.canceled != pre->st.canceled || st.reorders < pre->st.reorders ||
      st.pokes < pre->st.pokes + (uint64_t)parked)
    return fail(
        r,
        "oracle: counters do not add up (released %" PRIu64 " acquired %" PRIu64
        " wakeups %" PRIu64 " waiting %" PRIu64 " pokes %" PRIu64 ")",
        st.released - pre->st.released, st.acquired - pre->st.acquired,
        st.wakeups - pre->st.wakeups, st.waiting, st.pokes - pre->st.pokes);
  if (nv == 0 && st.reorders == pre->st.reorders)
    return fail(r, "oracle: a cycle was left alone (no victim, no reorder)");
  n.st.released = st.released;
  n.st.deadlocks = st.deadlocks;
  n.st.reorders = st.reorders;
  n.st.pokes = st.pokes;
  /* The resolution's wake-ups and retired objects: adopted too. */
  n.st.wake_asks = GET(r->tab->wake_asks);
  if (!adopt_objects(r, &n))
    return false;
  if (md_has_cycle(&n)) {
    r->m = n;
    fail(r, "oracle: the engine's graph still has a cycle");
    fmt_states(r, e);
    return false;
  }
  r->c->victims += nv;
  r->c->reorders += st.reorders - pre->st.reorders;
  r->m = n;
  return true;
}

/* ---- Steps
 * ------------------------------------------------------------------- */

/* Is st a call the contract allows in the model's state? A txn whose
 * blocking call is out gets only cancel (and advance); one with an async
 * request pending gets cancel and txn_end. */
static bool step_valid(const run *r, const step *st) {
  if (st->kind == ST_ADVANCE)
    return st->tmo > 0;
  if (st->slot >= r->cfg.ntxn)
    return false;
  for (int i = 0; i < st->n; i++)
    if (st->key[i] >= r->cfg.nkey)
      return false;
  const md_txn *t = &r->m.t[st->slot];
  switch (st->kind) {
  case ST_CANCEL:
    return true;
  case ST_END:
    return !(t->waiting && t->kind == MD_THREAD);
  default:
    return !t->waiting;
  }
}

/* The deadline of a timeout, bumped 1 ms at a time past every pending
 * deadline, so the timer heap never holds two equal ones. */
static int32_t distinct_timeout(const run *r, int32_t tmo) {
  if (tmo <= 0)
    return tmo;
  for (;;) {
    uint64_t d = r->m.now + (uint64_t)tmo * MS;
    bool clash = false;
    for (int s = 0; s < r->cfg.ntxn; s++)
      clash |= r->m.t[s].waiting && r->m.t[s].deadline == d;
    if (!clash)
      return tmo;
    tmo++;
  }
}

static uint64_t deadline_of(const run *r, int32_t tmo) {
  return tmo < 0 ? MD_NO_DEADLINE : r->m.now + (uint64_t)tmo * MS;
}

/* The turns: while workers are parked, the lowest txn id retries (the model
 * with it), then quiescence and a comparison again. */
static bool turns(run *r) {
  for (;;) {
    int s = -1;
    for (int i = 0; i < r->cfg.ntxn; i++)
      if (atomic_load(&r->sl[i].phase) == PH_PARKED &&
          (s < 0 || r->m.t[i].id < r->m.t[s].id))
        s = i;
    if (s < 0)
      break;
    int rc = md_retry(&r->m, s);
    r->m.t[s].woken = false;
    if (rc == 0) {
      r->x[s].want_ret = true;
      r->x[s].want_rc = 0;
    }
    take_outcomes(r);
    r->c->turns++;
    give_turn(&r->sl[s]);
    if (!quiesce(r, "after a retry") || !compare_all(r, "after a retry"))
      return false;
  }
  /* A woken txn whose request ended before it parked returned without a
   * turn. */
  for (int i = 0; i < r->cfg.ntxn; i++)
    if (!r->m.t[i].waiting)
      r->m.t[i].woken = false;
  return compare_all(r, "after the retries");
}

static void to_reqs(const run *r, const step *st, ordo_req_t *out, md_req *mr) {
  for (int i = 0; i < st->n; i++) {
    out[i] =
        (ordo_req_t){r->cfg.kbytes[st->key[i]], (size_t)r->cfg.klen[st->key[i]],
                     (ordo_mode_t)st->mode[i]};
    mr[i] = (md_req){st->key[i], st->mode[i]};
  }
}

/* Slot s's blocking call was granted at once, and the fast path could
 * have taken it: did it? Then its objects are still listed, held by s. */
static bool fast_grant(run *r, int s, const md_req *mr, int n) {
  eobjs e;
  take_objects(r, &e);
  int held = 0;
  for (int i = 0; i < n; i++)
    held += e.k[mr[i].key].fast == ORDO__OBJ_HELD &&
            e.k[mr[i].key].owner == r->m.t[s].id;
  r->x[s].fast = false;
  if (held == 0)
    return true; /* granted the slow way: as the model has it */
  if (held != n || !md_fast_took(&r->m, s)) {
    fail(r, "lock: %d of %d keys held on the fast path", held, n);
    fmt_objects(r, &e);
    return false;
  }
  r->c->fast_grants++;
  return true;
}

/* Runs one step on both sides and compares. false on a mismatch (r->msg
 * says what); *ran is false for a step the state does not allow (a
 * shrunk sequence skips it). A timeout bumped past a pending deadline is
 * written back, so the printed sequence says what the calls were given. */
static bool exec_step(run *r, step *io, bool *ran) {
  *ran = false;
  if (!step_valid(r, io))
    return true;
  *ran = true;
  step st = *io;
  int s = st.slot;
  slot *sl = &r->sl[s];
  model *m = &r->m;
  ordo_req_t req[MD_SET];
  md_req mr[MD_SET];
  to_reqs(r, &st, req, mr);
  int n = md_normalize(mr, st.n);
  bool check_cycle = false;
  model pre;
  switch (st.kind) {
  case ST_LOCK:
  case ST_LOCK_ALL: {
    st.tmo = io->tmo = distinct_timeout(r, st.tmo);
    bool self = false, busy = false, slow = false;
    for (int i = 0; i < n; i++) {
      const md_hold *h = NULL;
      for (int j = 0; j < m->t[s].nhold; j++)
        if (m->t[s].hold[j].key == mr[i].key)
          h = &m->t[s].hold[j];
      r->c->upgrades += h && h->mode < mr[i].mode;
      self |= h != NULL;
      busy |= m->k[mr[i].key].nq > 0;
      slow |= m->k[mr[i].key].slow;
      for (int o = 0; o < r->cfg.ntxn; o++)
        for (int j = 0; o != s && j < m->t[o].nhold; j++)
          busy |= m->t[o].hold[j].key == mr[i].key;
    }
    /* The hot-key spin (src/backend/mem.c, yield_retry) yields only with
     * spin_us on, in a call that may wait, on keys it does not hold. */
    r->x[s].yield_check = true;
    r->x[s].yield_max =
        r->cfg.spin_us > 0 && st.tmo != 0 && !self ? FAST_YIELDS : 0;
    r->x[s].yield_unbusy = !busy;
    r->x[s].yield_unslow = !slow;
    atomic_store(&sl->yields, 0);
    int rc = md_acquire(m, s, mr, n, deadline_of(r, st.tmo), MD_THREAD);
    r->x[s].fast = rc == 0 && m->fastc.valid;
    r->x[s].busy = true;
    if (rc != ORDO_PENDING) {
      r->x[s].want_ret = true;
      r->x[s].want_rc = rc;
    } else {
      check_cycle = md_has_cycle(m);
      pre = *m;
    }
    pthread_mutex_lock(&sl->mu);
    memcpy(sl->req, req, sizeof req);
    sl->n = st.n;
    sl->single = st.kind == ST_LOCK;
    sl->tmo = st.tmo;
    atomic_store(&sl->phase, PH_DISPATCHED);
    pthread_cond_broadcast(&sl->cv);
    pthread_mutex_unlock(&sl->mu);
    break;
  }
  case ST_ASYNC: {
    st.tmo = io->tmo = distinct_timeout(r, st.tmo);
    int want = md_acquire(m, s, mr, n, deadline_of(r, st.tmo), MD_EVENT);
    if (want == ORDO_PENDING) {
      check_cycle = md_has_cycle(m);
      pre = *m;
    }
    long cbs = atomic_load(&sl->cbs);
    int rc = ordo_lock_all_async(sl->t, req, st.n, st.tmo, async_cb, sl);
    if (rc == ORDO_PENDING)
      atomic_fetch_add(&sl->issued, 1);
    else if (atomic_load(&sl->cbs) != cbs)
      return fail(r, "async: a call that returned %s ran its callback",
                  status_name(rc));
    if (rc != want)
      return fail(r, "ordo_lock_all_async returned %s, the model's %s",
                  status_name(rc), status_name(want));
    break;
  }
  case ST_CANCEL: {
    int want = md_cancel(m, s);
    int rc = ordo_cancel(sl->t);
    if (rc != want)
      return fail(r, "ordo_cancel returned %s, the model's %s", status_name(rc),
                  status_name(want));
    break;
  }
  case ST_UNLOCK: {
    int want = md_unlock(m, s, st.key[0]);
    int rc = ordo_unlock(sl->t, req[0].key, req[0].len);
    if (rc != want)
      return fail(r, "ordo_unlock returned %s, the model's %s", status_name(rc),
                  status_name(want));
    break;
  }
  case ST_UNLOCK_ALL: {
    int want = md_unlock_all(m, s);
    int rc = ordo_unlock_all(sl->t);
    if (rc != want)
      return fail(r, "ordo_unlock_all returned %d, the model's %d", rc, want);
    break;
  }
  case ST_END:
    md_end(m, s);
    take_outcomes(r); /* a cancelled async request's callback */
    ordo_txn_end(sl->t);
    if (atomic_load(&sl->cbs) != r->x[s].cbs)
      return fail(r,
                  "ordo_txn_end: %ld callback(s) by its return, the model "
                  "%ld",
                  atomic_load(&sl->cbs), r->x[s].cbs);
    atomic_store(&sl->issued, 0);
    atomic_store(&sl->cbs, 0);
    r->x[s].cbs = 0;
    if (!begin_txn(r, s))
      return false;
    break;
  case ST_ADVANCE: {
    uint64_t before = m->st.timeouts;
    m->now += (uint64_t)st.tmo * MS;
    md_tick(m);
    ordo__clock_advance((uint64_t)st.tmo * MS);
    if (ordo__now_ns() != m->now)
      return fail(r, "the manual clock is not the model's");
    int n_alarms = ordo__table_tick(r->tab);
    if ((uint64_t)n_alarms != m->st.timeouts - before)
      return fail(r,
                  "the tick ran %d alarm(s), the model timed %" PRIu64
                  " request(s) out",
                  n_alarms, m->st.timeouts - before);
    break;
  }
  }
  if (!check_cycle)
    take_outcomes(r);
  if (!quiesce(r, STEP_NAMES[st.kind]))
    return false;
  if (r->x[s].fast && (st.kind == ST_LOCK || st.kind == ST_LOCK_ALL) &&
      !fast_grant(r, s, mr, n))
    return false;
  if (check_cycle) {
    esnap e;
    take_snapshot(r, &e);
    r->c->oracle++;
    if (!oracle(r, s, &pre, &e))
      return false;
    take_outcomes(r);
  }
  if (!compare_all(r, STEP_NAMES[st.kind]))
    return false;
  return turns(r);
}

/* ---- Step generation -------------------------------------------------------
 */

static int32_t gen_timeout(rng *g) {
  int p = rng_int(g, 100);
  if (p < 15)
    return 0;
  if (p < 50)
    return -1;
  return 1 + rng_int(g, 60);
}

static int held_key(rng *g, const md_txn *t, int nkey) {
  if (t->nhold > 0 && rng_int(g, 100) < 85)
    return t->hold[rng_int(g, t->nhold)].key;
  return rng_int(g, nkey);
}

/* A random step that the model's state allows. */
static step gen_step(rng *g, const run *r) {
  static const int weight[ST__N] = {24, 12, 10, 6, 18, 6, 4, 20};
  for (;;) {
    step st;
    memset(&st, 0, sizeof st);
    int p = rng_int(g, 100), kind = 0;
    while (p >= weight[kind])
      p -= weight[kind++];
    st.kind = (uint8_t)kind;
    st.slot = (uint8_t)rng_int(g, r->cfg.ntxn);
    const md_txn *t = &r->m.t[st.slot];
    switch (kind) {
    case ST_LOCK:
      st.n = 1;
      st.key[0] = (uint8_t)(rng_int(g, 100) < 30 ? held_key(g, t, r->cfg.nkey)
                                                 : rng_int(g, r->cfg.nkey));
      st.mode[0] = rng_int(g, 100) < 45 ? ORDO_MODE_S : ORDO_MODE_X;
      st.tmo = gen_timeout(g);
      break;
    case ST_LOCK_ALL:
    case ST_ASYNC:
      st.n = (uint8_t)(1 + rng_int(g, MD_SET));
      for (int i = 0; i < st.n; i++) {
        st.key[i] = (uint8_t)rng_int(g, r->cfg.nkey);
        st.mode[i] = rng_int(g, 100) < 45 ? ORDO_MODE_S : ORDO_MODE_X;
      }
      st.tmo = gen_timeout(g);
      break;
    case ST_UNLOCK:
      st.n = 1;
      st.key[0] = (uint8_t)held_key(g, t, r->cfg.nkey);
      break;
    case ST_ADVANCE:
      st.slot = 0;
      st.tmo = 1 + rng_int(g, 20);
      break;
    default:
      break;
    }
    if (step_valid(r, &st))
      return st;
  }
}

/* A length for a key named nl bytes long, in band b (key_band). */
static int gen_len(rng *g, int b, int nl) {
  int lo = KEY_MAX, hi = 0;
  for (int len = nl; len <= KEY_MAX; len++)
    if (key_band((size_t)len) == b) {
      lo = len < lo ? len : lo;
      hi = len;
    }
  if (lo > hi)
    return nl; /* no such length (a name longer than the band) */
  return lo + rng_int(g, hi - lo + 1);
}

static config gen_config(rng *g) {
  config c;
  memset(&c, 0, sizeof c);
  c.ntxn = 4 + rng_int(g, 3);
  c.nkey = 3 + rng_int(g, 3);
  c.victim = rng_int(g, VICTIMS_N);
  /* nkey of the pool's keys, in the pool's (canonical) order. */
  int left = c.nkey;
  for (int i = 0; i < KEY_POOL_N && left > 0; i++)
    if (rng_int(g, KEY_POOL_N - i) < left) {
      c.key[c.nkey - left] = i;
      left--;
    }
  /* Their lengths: bare names, any band, or (so that a stripe's dead
   * objects are reused by its other keys) one band for all. */
  int p = rng_int(g, 100);
  int one = p < 25 ? rng_int(g, BANDS) : -1;
  for (int k = 0; k < c.nkey; k++) {
    int nl = (int)strlen(KEY_POOL[c.key[k]]);
    int q = rng_int(g, 100);
    c.klen[k] = one >= 0 ? gen_len(g, one, nl)
                : q < 25 ? nl
                         : gen_len(g, rng_int(g, BANDS), nl);
    key_make(&c, k);
  }
  /* The hot-key spin: off, the default, or long enough that the mean
   * hold on the manual clock is always below it. */
  c.spin_us = SPIN_US[rng_int(g, SPIN_CHOICES)];
  /* Lock objects: one stripe (every eviction possible), two, or eight;
   * max_locks that the keys never reach, below the keys (evictions and
   * refusals), or a few per stripe (evictions past a cap of 1 or 2). */
  int sp = rng_int(g, 4);
  c.stripes = sp == 0 ? 1 : sp == 1 ? 2 : 8;
  int lp = rng_int(g, 100);
  c.max_locks = lp < 40   ? BIG_MAX_LOCKS
                : lp < 75 ? (uint64_t)(1 + rng_int(g, c.nkey + 1))
                          : (uint64_t)(4 * c.stripes * (1 + rng_int(g, 2)));
  return c;
}

/* ---- Episodes in a child process -------------------------------------------
 */

/* What a child shares with its parent: the steps it ran (written before
 * each runs), and how it ended. */
typedef struct shared {
  config cfg;
  _Atomic int nsteps;
  int failed, fail_at;
  counters c;
  char msg[16384];
  step steps[EPISODE_STEPS > MAX_STEPS ? EPISODE_STEPS : MAX_STEPS];
  uint8_t ran[EPISODE_STEPS > MAX_STEPS ? EPISODE_STEPS : MAX_STEPS];
} shared;

static shared *SH;

/* Runs steps (given, or generated from g when given is NULL) in a fresh
 * run; records each in SH before it runs. In the child. */
static void episode(const config *cfg, rng *g, const step *given, int n,
                    double bound_s) {
  run r;
  SH->cfg = *cfg;
  atomic_store(&SH->nsteps, 0);
  SH->failed = 0;
  SH->fail_at = -1;
  memset(&SH->c, 0, sizeof SH->c);
  bool ok = run_open(&r, cfg, bound_s, &SH->c) && compare_all(&r, "open");
  for (int i = 0; ok && i < n; i++) {
    step st = given ? given[i] : gen_step(g, &r);
    SH->steps[i] = st;
    atomic_store(&SH->nsteps, i + 1);
    bool ran;
    ok = exec_step(&r, &st, &ran);
    SH->steps[i] = st;
    SH->ran[i] = ran;
    SH->c.steps += ran;
    SH->c.skipped += !ran;
    if (!ok)
      SH->fail_at = i;
  }
  ordo_stats_t st;
  if (r.o) {
    ordo_stats(r.o, &st);
    SH->c.pokes += st.pokes;
    SH->c.wakeups += st.wakeups;
    SH->c.timeouts += st.timeouts;
    SH->c.canceled += st.canceled;
  }
  SH->c.cov = md_cov;
  SH->c.spin_pokes = atomic_load(&spin_pokes);
  SH->c.spin_episodes = cfg->spin_us > 0;
  SH->c.small_episodes = cfg->max_locks < BIG_MAX_LOCKS;
  for (int k = 0; k < cfg->nkey; k++)
    SH->c.band[key_band((size_t)cfg->klen[k])]++;
  if (r.failed && SH->fail_at < 0)
    SH->fail_at = atomic_load(&SH->nsteps) - 1;
  run_close(&r);
  if (r.failed && SH->fail_at < 0)
    SH->fail_at = atomic_load(&SH->nsteps) - 1;
  SH->failed = r.failed;
  snprintf(SH->msg, sizeof SH->msg, "%s", r.msg.p ? r.msg.p : "");
  free(r.msg.p);
}

/* Runs an episode in a child; true when it passed. On failure SH says at
 * which step and why (a crash or a hang too). */
static bool in_child(const config *cfg, uint64_t seed, const step *given, int n,
                     double bound_s, double limit_s) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    SH->failed = 1;
    snprintf(SH->msg, sizeof SH->msg, "fork: %s\n", strerror(errno));
    return false;
  }
  if (pid == 0) {
    rng g = {seed};
    episode(cfg, &g, given, n, bound_s);
    exit(SH->failed ? 1 : 0);
  }
  uint64_t end = tu_now_ns() + (uint64_t)(limit_s * tu_mult() * 1e9);
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid)
      break;
    if (w < 0 && errno != EINTR) {
      SH->failed = 1;
      snprintf(SH->msg, sizeof SH->msg, "waitpid: %s\n", strerror(errno));
      return false;
    }
    if (tu_now_ns() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      SH->failed = 1;
      SH->fail_at = atomic_load(&SH->nsteps) - 1;
      snprintf(SH->msg, sizeof SH->msg,
               "the episode hung (killed after %.0f s) at step %d\n",
               limit_s * tu_mult(), SH->fail_at);
      return false;
    }
    tu_sleep_us(1000);
  }
  if (WIFSIGNALED(status)) {
    SH->failed = 1;
    SH->fail_at = atomic_load(&SH->nsteps) - 1;
    snprintf(SH->msg, sizeof SH->msg,
             "the episode died of signal %d at step "
             "%d\n",
             WTERMSIG(status), SH->fail_at);
    return false;
  }
  if (WEXITSTATUS(status) != 0 && !SH->failed) {
    /* A sanitizer's report at exit (a leak, say), after the steps passed. */
    SH->failed = 1;
    SH->fail_at = atomic_load(&SH->nsteps) - 1;
    snprintf(SH->msg, sizeof SH->msg,
             "the episode exited with status %d (a "
             "sanitizer report?)\n",
             WEXITSTATUS(status));
  }
  return !SH->failed;
}

/* ---- Shrinking
 * --------------------------------------------------------------- */

typedef struct seq {
  step *s;
  int n;
} seq;

/* Does this sequence still fail? (A candidate runs in a child, with a
 * shorter bound on quiescence: a failure it finds is a real one either
 * way, and a slow pass only costs a deletion.) On failure *len is cut to
 * the failing step. */
static bool still_fails(const config *cfg, step *s, int *len) {
  if (in_child(cfg, 0, s, *len, 0.5, 60))
    return false;
  if (SH->fail_at >= 0 && SH->fail_at < *len)
    *len = SH->fail_at + 1;
  return true;
}

/* Delta debugging: delete halves, quarters, ... single steps, keeping every
 * deletion after which the sequence still fails (bounded in replays and
 * time); then drop the steps the state did not allow (they ran as no-ops
 * in the last replay). */
static seq shrink(const config *cfg, const step *steps, int n, int *replays) {
  seq cur = {malloc(sizeof(step) * (size_t)n), n};
  step *cand = malloc(sizeof(step) * (size_t)n);
  memcpy(cur.s, steps, sizeof(step) * (size_t)n);
  uint64_t end = tu_now_ns() + (uint64_t)(300 * tu_mult() * 1e9);
  *replays = 0;
  for (int chunk = cur.n / 2; chunk >= 1;) {
    bool progress = false;
    for (int i = 0; i < cur.n && tu_now_ns() < end && *replays < 5000;) {
      int m = 0;
      for (int j = 0; j < cur.n; j++)
        if (j < i || j >= i + chunk)
          cand[m++] = cur.s[j];
      ++*replays;
      if (m > 0 && still_fails(cfg, cand, &m)) {
        memcpy(cur.s, cand, sizeof(step) * (size_t)m);
        cur.n = m;
        progress = true;
      } else {
        i += chunk;
      }
    }
    if (tu_now_ns() >= end || *replays >= 5000)
      break;
    if (!progress)
      chunk /= 2;
    else if (chunk > cur.n / 2)
      chunk = cur.n / 2 > 0 ? cur.n / 2 : 1;
  }
  free(cand);
  return cur;
}

/* ---- Reporting
 * ---------------------------------------------------------------- */

static void print_failure(const config *cfg, const char *what, const step *s,
                          int n, const char *msg, const char *file) {
  sbuf b = {0};
  fmt_header(&b, cfg);
  for (int i = 0; i < n; i++) {
    fmt_step(&b, cfg, &s[i]);
    sb_printf(&b, "\n");
  }
  fprintf(stderr, "\n%s\n%s", what, msg);
  fprintf(stderr, "--- replay (%d steps; model_test --replay FILE):\n%s", n,
          b.p);
  if (file) {
    FILE *f = fopen(file, "w");
    if (f) {
      fputs(b.p, f);
      fclose(f);
      fprintf(stderr, "--- written to %s\n", file);
    }
  }
  sbuf cb = {0};
  sb_printf(&cb, "/* ");
  fmt_header(&cb, cfg);
  cb.n--; /* the header's newline */
  sb_printf(&cb,
            "; mem:// on the manual clock, starvation_us=%d, "
            "starvation_holds=0 */\nstatic const char *const k[] = {",
            STARVE_US);
  for (int k = 0; k < cfg->nkey; k++)
    sb_printf(&cb, "%s\"%s\"", k ? ", " : "", cfg->kbytes[k]);
  sb_printf(&cb, "};\n");
  for (int i = 0; i < n; i++)
    fmt_c_step(&cb, cfg, &s[i]);
  fprintf(stderr, "--- as C calls ([tN]: on slot N's own thread):\n%s", cb.p);
  free(b.p);
  free(cb.p);
}

/* The failing steps in SH: shrunk, confirmed with the full bound, and
 * printed. */
static void report(const config *cfg, const char *what, const char *file) {
  int n = SH->fail_at + 1;
  if (n <= 0)
    n = atomic_load(&SH->nsteps);
  step *orig = malloc(sizeof(step) * (size_t)(n > 0 ? n : 1));
  memcpy(orig, SH->steps, sizeof(step) * (size_t)n);
  char *msg = strdup(SH->msg);
  fprintf(stderr, "%s\n%s", what, msg);
  fprintf(stderr, "shrinking %d steps...\n", n);
  int replays = 0;
  seq sh = shrink(cfg, orig, n, &replays);
  bool confirmed = !in_child(cfg, 0, sh.s, sh.n, 5, 120);
  if (confirmed) {
    /* Drop the steps that ran as no-ops, if it still fails without them. */
    step *c = malloc(sizeof(step) * (size_t)sh.n);
    int m = 0;
    for (int j = 0; j < sh.n && j < atomic_load(&SH->nsteps); j++)
      if (SH->ran[j])
        c[m++] = sh.s[j];
    if (m < sh.n && !in_child(cfg, 0, c, m, 5, 120)) {
      memcpy(sh.s, c, sizeof(step) * (size_t)m);
      sh.n = m;
    } else {
      confirmed = !in_child(cfg, 0, sh.s, sh.n, 5, 120);
    }
    free(c);
  }
  if (confirmed) {
    char hdr[128];
    snprintf(hdr, sizeof hdr,
             "SHRUNK to %d steps (%d replays); it fails "
             "with:",
             sh.n, replays);
    print_failure(cfg, hdr, sh.s, sh.n, SH->msg, file);
  } else {
    fprintf(stderr, "the shrunk sequence did not fail again; the original:\n");
    print_failure(cfg, "ORIGINAL:", orig, n, msg, file);
  }
  free(sh.s);
  free(orig);
  free(msg);
}

/* ---- main
 * -------------------------------------------------------------------- */

static void usage(void) {
  fprintf(stderr, "usage: model_test [--seed S] [--steps N] [--replay FILE] "
                  "[--json] [--strict-yields[=busy]] [--no-strict-yields]\n");
  exit(2);
}

static void add_counters(counters *a, const counters *b) {
  a->steps += b->steps;
  a->skipped += b->skipped;
  a->oracle += b->oracle;
  a->turns += b->turns;
  a->victims += b->victims;
  a->reorders += b->reorders;
  a->pokes += b->pokes;
  a->wakeups += b->wakeups;
  a->timeouts += b->timeouts;
  a->canceled += b->canceled;
  a->async_cbs += b->async_cbs;
  a->upgrades += b->upgrades;
  a->grants += b->grants;
  a->cov.reserved += b->cov.reserved;
  a->cov.chained += b->cov.chained;
  a->cov.covered += b->cov.covered;
  a->cov.reordered_scan += b->cov.reordered_scan;
  a->spin_episodes += b->spin_episodes;
  a->spin_seen += b->spin_seen;
  a->spin_pokes += b->spin_pokes;
  a->yield_calls += b->yield_calls;
  a->small_episodes += b->small_episodes;
  a->fast_grants += b->fast_grants;
  for (int i = 0; i < BANDS; i++)
    a->band[i] += b->band[i];
  a->cov.evicted += b->cov.evicted;
  a->cov.recreated += b->cov.recreated;
  a->cov.limited += b->cov.limited;
  a->cov.evict_adopted += b->cov.evict_adopted;
  a->cov.wake_skipped += b->cov.wake_skipped;
  a->cov.wake_xheld += b->cov.wake_xheld;
}

static int replay_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "model_test: %s: %s\n", path, strerror(errno));
    return 2;
  }
  char line[512];
  config cfg;
  if (!fgets(line, sizeof line, f) || !parse_header(line, &cfg)) {
    fprintf(stderr,
            "model_test: %s: bad header (want: model txns=N "
            "keys=a,b,... victim=NAME)\n",
            path);
    fclose(f);
    return 2;
  }
  step *steps = malloc(sizeof(step) * MAX_STEPS);
  int n = 0, lineno = 1;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    int rc = n < MAX_STEPS ? parse_step(&cfg, line, &steps[n]) : -1;
    if (rc < 0) {
      fprintf(stderr, "model_test: %s:%d: bad step\n", path, lineno);
      fclose(f);
      free(steps);
      return 2;
    }
    n += rc;
  }
  fclose(f);
  printf("replay %s: %d steps\n", path, n);
  bool ok = in_child(&cfg, 0, steps, n, 5, 600);
  if (ok)
    printf("replay passed (%" PRIu64 " steps ran, %" PRIu64 " skipped)\n",
           SH->c.steps, SH->c.skipped);
  else
    print_failure(&cfg, "REPLAY FAILED:", steps, SH->fail_at + 1, SH->msg,
                  NULL);
  free(steps);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  uint64_t seed = tu_now_ns() ^ ((uint64_t)getpid() << 32);
  long long steps = 100000;
  const char *replay = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
      seed = strtoull(argv[++i], NULL, 0);
    else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
      steps = (long long)tu_scaled(atol(argv[++i]));
    else if (strcmp(argv[i], "--replay") == 0 && i + 1 < argc)
      replay = argv[++i];
    else if (strcmp(argv[i], "--json") == 0)
      json = true;
    else if (strcmp(argv[i], "--strict-yields") == 0)
      STRICT_YIELDS = STRICT_SLOW;
    else if (strcmp(argv[i], "--strict-yields=busy") == 0)
      STRICT_YIELDS = STRICT_BUSY;
    else if (strcmp(argv[i], "--no-strict-yields") == 0)
      STRICT_YIELDS = STRICT_OFF;
    else
      usage();
  }
  for (int i = 1; i < KEY_POOL_N; i++)
    if (ordo_key_cmp(KEY_POOL[i - 1], strlen(KEY_POOL[i - 1]), KEY_POOL[i],
                     strlen(KEY_POOL[i])) >= 0) {
      fprintf(stderr, "model_test: KEY_POOL is not in the canonical order\n");
      return 2;
    }
  SH = mmap(NULL, sizeof *SH, PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (SH == MAP_FAILED) {
    perror("mmap");
    return 2;
  }
  /* Each child sets the clock anew, before its place opens. */
  ordo__clock_set_manual(UINT64_C(1) << 40);
  ordo__mem_before_retry = before_retry;
  if (replay)
    return replay_file(replay);

  printf("seed %" PRIu64 "\n", seed);
  fflush(stdout);
  bool tty = isatty(2);
  counters total;
  memset(&total, 0, sizeof total);
  uint64_t t0 = tu_now_ns();
  int last_pct = -1;
  bool ok = true;
  for (uint64_t ep = 0; (long long)total.steps < steps; ep++) {
    rng g = {seed ^ (ep * 0xD1B54A32D192ED03u)};
    config cfg = gen_config(&g);
    long long left = steps - (long long)total.steps;
    int n = left < EPISODE_STEPS ? (int)left : EPISODE_STEPS;
    uint64_t eseed = rng_next(&g);
    if (!in_child(&cfg, eseed, NULL, n, 5, 120)) {
      char what[160];
      snprintf(what, sizeof what,
               "FAIL: seed %" PRIu64 " episode %" PRIu64 ", step %d:", seed, ep,
               SH->fail_at);
      char file[96];
      snprintf(file, sizeof file, "model-failure-%" PRIu64 "-%" PRIu64 ".txt",
               seed, ep);
      if (tty)
        fprintf(stderr, "\n");
      add_counters(&total, &SH->c);
      report(&cfg, what, file);
      ok = false;
      break;
    }
    add_counters(&total, &SH->c);
    total.episodes++;
    int pct = (int)(100 * (long long)total.steps / steps);
    if (tty && pct != last_pct) {
      last_pct = pct;
      fprintf(stderr, "\r[%-50.*s] %3d%% %" PRIu64 " steps", pct / 2,
              "##################################################", pct,
              total.steps);
    }
  }
  double secs = (double)(tu_now_ns() - t0) / 1e9;
  if (tty)
    fprintf(stderr, "\n");
  int bands = 0;
  for (int i = 0; i < BANDS; i++)
    bands += total.band[i] > 0;
  if (json) {
    printf(
        "{\"seed\": %" PRIu64 ", \"result\": \"%s\", \"steps\": %" PRIu64
        ", \"skipped\": %" PRIu64 ", \"episodes\": %" PRIu64
        ", \"seconds\": %.2f, \"steps_per_s\": %.0f, \"oracle_steps\": %" PRIu64
        ", \"retry_turns\": %" PRIu64 ", \"victims\": %" PRIu64
        ", \"reorders\": %" PRIu64 ", \"pokes\": %" PRIu64
        ", \"handovers\": %" PRIu64 ", \"timeouts\": %" PRIu64
        ", \"canceled\": %" PRIu64 ", \"async_callbacks\": %" PRIu64
        ", \"upgrades\": %" PRIu64 ", \"grants\": %" PRIu64
        ", \"reservations\": %" PRIu64 ", \"chained\": %" PRIu64
        ", \"covered\": %" PRIu64 ", \"reordered_scans\": %" PRIu64,
        seed, ok ? "pass" : "fail", total.steps, total.skipped, total.episodes,
        secs, (double)total.steps / secs, total.oracle, total.turns,
        total.victims, total.reorders, total.pokes, total.wakeups,
        total.timeouts, total.canceled, total.async_cbs, total.upgrades,
        total.grants, total.cov.reserved, total.cov.chained, total.cov.covered,
        total.cov.reordered_scan);
    printf(
        ", \"wake_skipped\": %" PRIu64 ", \"wake_xheld\": %" PRIu64
        ", \"spin_episodes\": %" PRIu64 ", \"spinning_seen\": %" PRIu64
        ", \"pokes_while_spinning\": %" PRIu64 ", \"yielding_calls\": %" PRIu64
        ", \"small_max_locks_episodes\": %" PRIu64 ", \"fast_grants\": %" PRIu64
        ", \"evicted\": %" PRIu64 ", \"recreated\": %" PRIu64
        ", \"evictions_adopting\": %" PRIu64 ", \"refused_max_locks\": %" PRIu64
        ", \"size_bands_hit\": %d, \"size_bands\": %d, \"keys_by_band\": [",
        total.cov.wake_skipped, total.cov.wake_xheld, total.spin_episodes,
        total.spin_seen, total.spin_pokes, total.yield_calls,
        total.small_episodes, total.fast_grants, total.cov.evicted,
        total.cov.recreated, total.cov.evict_adopted, total.cov.limited, bands,
        BANDS);
    for (int i = 0; i < BANDS; i++)
      printf("%s%" PRIu64, i ? ", " : "", total.band[i]);
    printf("]}\n");
  } else {
    printf("%s: %" PRIu64 " steps in %" PRIu64 " episodes, %.1f s (%.0f "
           "steps/s); %" PRIu64 " cycles judged, %" PRIu64 " victims, %" PRIu64
           " reorders, %" PRIu64 " pokes, %" PRIu64 " retry turns\n",
           ok ? "pass" : "FAIL", total.steps, total.episodes, secs,
           (double)total.steps / secs, total.oracle, total.victims,
           total.reorders, total.pokes, total.turns);
    printf("  spin: %" PRIu64 " episodes, %" PRIu64
           " spinning waiters seen, %" PRIu64
           " pokes answered spinning, %" PRIu64
           " calls yielded; objects: %" PRIu64
           " episodes with a small max_locks, %" PRIu64 " evicted, %" PRIu64
           " made anew, %" PRIu64 " requests refused, %" PRIu64
           " fast-path grants; key sizes: %d of %d bands\n",
           total.spin_episodes, total.spin_seen, total.spin_pokes,
           total.yield_calls, total.small_episodes, total.cov.evicted,
           total.cov.recreated, total.cov.limited, total.fast_grants, bands,
           BANDS);
  }
  return ok ? 0 : 1;
}
