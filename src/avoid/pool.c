/*
 * pool.c -- the Banker's pool: a counted resource of `units` units that
 * grants a request only if the state stays safe, so its clients can never
 * deadlock on it. See src/avoid/README.md for the design, the numbered
 * invariants, the request lifecycle and the lock order.
 *
 * The algorithm is Dijkstra's Banker's algorithm: E. W. Dijkstra, "Een
 * algorithme ter voorkoming van de dodelijke omarming" (EWD108, 1964), and
 * "The mathematics behind the Banker's Algorithm" (EWD623, 1977). Every
 * client declares its maximum claim; it may hold up to that claim, and it is
 * assumed to give back everything it holds in finite time once it holds its
 * whole claim. A state is *safe* if there is an order of the clients in which
 * each one's remaining need (claim - held) can be met from the free units
 * plus what the clients before it in the order give back when they finish.
 * A safe state cannot deadlock: the clients can always finish in that order.
 * So a request is granted only if the state after the grant is still safe;
 * otherwise the caller waits (or fails at once, or at its deadline).
 *
 * The safety check, for one resource type. The textbook check (EWD623)
 * repeatedly looks for any client whose need fits in the free units, lets it
 * finish and takes its units back: O(k^2) for k clients. With one resource
 * type it is enough to try the clients in increasing order of need: letting a
 * client finish never lowers the free units, so if any unfinished client can
 * finish, the one with the smallest need can, and finishing it first leaves
 * at least as much for everyone else. So the check sorts the (need, held)
 * pairs by need and walks them once: O(k log k), in arrays preallocated at
 * declare time, so a grant never allocates (README invariant 5). The
 * textbook check is kept too, as ordo__pool_is_safe, so tests (and debug
 * builds, after every grant) check each against the other.
 *
 * Interface: ordo_pool_create, ordo_pool_destroy, ordo_pool_declare,
 * ordo_pool_acquire, ordo_pool_release, ordo_pool_leave, ordo_pool_available,
 * and for tests ordo__pool_is_safe, ordo__pool_waiting, ordo__pool_counters,
 * ordo__pool_dump.
 */
#include "avoid/pool.h"
#include "ordo_int.h"
#include "ordo_tsa.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sys/queue.h>
#include <stdio.h>
#include <time.h>

/* The first size of the client arrays; they double when full. */
#define INITIAL_CLIENTS 8

/* Where a client's acquire stands (README: the request lifecycle). */
typedef enum pool_state_e {
  CLIENT_IDLE = 0,    /* no acquire in progress */
  CLIENT_WAITING = 1, /* queued; its thread sleeps on cv */
  CLIENT_GRANTED = 2  /* granted by grant_waiters; its thread not yet back */
} pool_state;

/* One client: a txn that has declared a claim. Allocated at declare and
 * freed at leave, so pointers to it stay valid while it is in the pool. */
typedef struct pool_client {
  /* The client's identity, read-only after declare: txn ids are unique only
   * within one ordo_t, so the place is part of the identity. */
  const ordo_t *o;
  uint64_t id;

  /* The pool's mu guards every field below (not named in attributes: it
   * is another struct's); the functions that touch them require it. */
  uint64_t claim;                 /* the declared maximum */
  uint64_t held;                  /* units held now, <= claim */
  uint64_t want;                  /* units the queued acquire asks */
  pool_state state;               /* see pool_state */
  size_t slot;                    /* index in the pool's cl[] */
  TAILQ_ENTRY(pool_client) wlink; /* the FIFO queue, while WAITING */
  unsigned char done;             /* scratch of textbook_safe */
  pthread_cond_t cv;              /* its acquire sleeps here, on mu */
} pool_client;

/* One client as the sorted safety check sees it. */
typedef struct pool_need {
  uint64_t need; /* claim - held */
  uint64_t held;
} pool_need;

struct ordo_pool_s {
  uint64_t units;           /* read-only after create */
  pthread_condattr_t cattr; /* CLOCK_MONOTONIC; read-only after create */

  /*
   * mu guards every field below it, and the mutable fields of every client
   * in cl[]. It is a leaf: while it is held, no other lock of the library
   * is taken and no user code runs. Every helper that touches these
   * requires it (ordo_tsa.h).
   */
  ordo__mutex mu;
  uint64_t avail ORDO_GUARDED_BY(mu); /* units free now */
  /* The clients, in no order; ncl of cap. */
  pool_client **cl ORDO_GUARDED_BY(mu) ORDO_PT_GUARDED_BY(mu);
  /* cl[] and scratch[] both have cap slots. */
  size_t ncl ORDO_GUARDED_BY(mu), cap ORDO_GUARDED_BY(mu);
  /* The sorted check's workspace. */
  pool_need *scratch ORDO_GUARDED_BY(mu) ORDO_PT_GUARDED_BY(mu);
  /* Waiting clients, oldest first. */
  TAILQ_HEAD(, pool_client) waiters ORDO_GUARDED_BY(mu);
  size_t nwaiting ORDO_GUARDED_BY(mu); /* clients on the queue */
  uint64_t grants ORDO_GUARDED_BY(mu); /* acquires granted, at once or later */
  uint64_t waits ORDO_GUARDED_BY(mu);  /* acquires that queued */
  uint64_t timeouts ORDO_GUARDED_BY(mu); /* acquires that gave up */
};

/* ---- The safety check --------------------------------------------------- */

static void need_swap(pool_need *a, pool_need *b) {
  pool_need t = *a;
  *a = *b;
  *b = t;
}

/* sift_down -- restores the max-heap property below index i of a[0..n). */
static void sift_down(pool_need *a, size_t i, size_t n) {
  for (;;) {
    size_t l = 2 * i + 1, big = i;
    if (l < n && a[l].need > a[big].need)
      big = l;
    if (l + 1 < n && a[l + 1].need > a[big].need)
      big = l + 1;
    if (big == i)
      return;
    need_swap(&a[i], &a[big]);
    i = big;
  }
}

/* sort_by_need -- heapsort, ascending by need. In place and O(k log k) in
 * the worst case; qsort is avoided because it may allocate. */
static void sort_by_need(pool_need *a, size_t n) {
  if (n < 2)
    return;
  for (size_t i = n / 2; i-- > 0;)
    sift_down(a, i, n);
  for (size_t end = n - 1; end > 0; end--) {
    need_swap(&a[0], &a[end]);
    sift_down(a, 0, end);
  }
}

/*
 * safe_after -- would the state be safe if c were granted n more units?
 * Caller must hold mu and have checked n <= avail and n <= claim - held.
 * Fills scratch[] (preallocated at declare), sorts it by need and lets the
 * clients finish in that order (see the comment at the top of the file).
 * Changes nothing but scratch[].
 *
 * Clients that hold nothing are left out: they can always finish last,
 * when everything has come back and the free units are all `units`, which
 * is at least any claim. So only holders can stand in anyone's way.
 */
static bool safe_after(ordo_pool_t *p, const pool_client *c, uint64_t n)
    ORDO_REQUIRES(p->mu) {
  ORDO_ASSERT(n <= p->avail && n <= c->claim - c->held);
  size_t k = 0;
  for (size_t i = 0; i < p->ncl; i++) {
    const pool_client *x = p->cl[i];
    uint64_t held = x->held + (x == c ? n : 0);
    if (held == 0)
      continue;
    p->scratch[k].need = x->claim - held;
    p->scratch[k].held = held;
    k++;
  }
  sort_by_need(p->scratch, k);
  uint64_t work = p->avail - n;
  for (size_t i = 0; i < k; i++) {
    if (p->scratch[i].need > work)
      return false;
    work += p->scratch[i].held;
  }
  return true;
}

/*
 * textbook_safe -- the same question for the state as it is, asked the way
 * EWD623 asks it: while some unfinished client's need fits in the work
 * vector, finish it. O(k^2), and independent of the sorted check, which is
 * why tests and debug builds use it. Also checks the accounting. Caller must
 * hold mu.
 */
static bool textbook_safe(ordo_pool_t *p) ORDO_REQUIRES(p->mu) {
  uint64_t sum = 0;
  for (size_t i = 0; i < p->ncl; i++) {
    pool_client *x = p->cl[i];
    if (x->held > x->claim || x->claim > p->units || x->slot != i)
      return false;
    sum += x->held;
    x->done = 0;
  }
  if (sum + p->avail != p->units)
    return false;
  uint64_t work = p->avail;
  size_t left = p->ncl;
  bool progress = true;
  while (left > 0 && progress) {
    progress = false;
    for (size_t i = 0; i < p->ncl; i++) {
      pool_client *x = p->cl[i];
      if (!x->done && x->claim - x->held <= work) {
        x->done = 1;
        work += x->held;
        left--;
        progress = true;
      }
    }
  }
  return left == 0;
}

/* ---- Clients and the queue ---------------------------------------------- */

/* find -- t's client record, or NULL. Caller must hold mu. A linear scan:
 * every acquire costs O(k log k) for the check anyway. */
static pool_client *find(ordo_pool_t *p, const ordo_txn_t *t)
    ORDO_REQUIRES(p->mu) {
  uint64_t id = ordo_txn_id(t);
  for (size_t i = 0; i < p->ncl; i++)
    if (p->cl[i]->id == id && p->cl[i]->o == t->o)
      return p->cl[i];
  return NULL;
}

static void enqueue(ordo_pool_t *p, pool_client *c, uint64_t n)
    ORDO_REQUIRES(p->mu) {
  c->want = n;
  c->state = CLIENT_WAITING;
  TAILQ_INSERT_TAIL(&p->waiters, c, wlink);
  p->nwaiting++;
}

static void dequeue(ordo_pool_t *p, pool_client *c) ORDO_REQUIRES(p->mu) {
  ORDO_ASSERT(c->state == CLIENT_WAITING);
  TAILQ_REMOVE(&p->waiters, c, wlink);
  c->want = 0;
  p->nwaiting--;
}

/* grant -- gives c n units. Caller must hold mu and have found the grant
 * safe; debug builds check the result with the independent textbook check. */
static void grant(ordo_pool_t *p, pool_client *c, uint64_t n)
    ORDO_REQUIRES(p->mu) {
  c->held += n;
  p->avail -= n;
  p->grants++;
  ORDO_ASSERT(textbook_safe(p));
}

/*
 * grant_waiters -- walks the queue oldest first and grants every waiter
 * whose request is safe now, on its behalf, then wakes that waiter alone:
 * no thundering herd, and the units are never left with a thread that has
 * yet to wake up and take them. A waiter whose request is not safe is
 * passed over, not allowed to block the ones behind it. Caller must hold
 * mu; called after every change that could make a waiter grantable (see
 * README: why no waiter is stranded).
 *
 * The signal is sent with mu held on purpose: once mu is let go, the woken
 * thread may return, leave the pool and free its record, cv included.
 */
static void grant_waiters(ordo_pool_t *p) ORDO_REQUIRES(p->mu) {
  pool_client *c = TAILQ_FIRST(&p->waiters);
  while (c && p->avail > 0) {
    pool_client *next = TAILQ_NEXT(c, wlink);
    if (c->want <= p->avail && safe_after(p, c, c->want)) {
      uint64_t n = c->want;
      dequeue(p, c);
      grant(p, c, n);
      c->state = CLIENT_GRANTED;
      pthread_cond_signal(&c->cv);
    }
    c = next;
  }
}

/* grow -- makes room for one more client in cl[] and scratch[]. Caller must
 * hold mu. Nothing changes if it fails. */
static int grow(ordo_pool_t *p) ORDO_REQUIRES(p->mu) {
  if (p->ncl < p->cap)
    return 0;
  size_t cap = p->cap ? p->cap * 2 : INITIAL_CLIENTS;
  pool_client **cl = realloc(p->cl, cap * sizeof *cl);
  if (!cl)
    return ORDO_ENOMEM;
  p->cl = cl;
  pool_need *s = realloc(p->scratch, cap * sizeof *s);
  if (!s)
    return ORDO_ENOMEM; /* cl[] is larger than needed; cap is unchanged */
  p->scratch = s;
  p->cap = cap;
  return 0;
}

/* ---- The interface ------------------------------------------------------ */

int ordo_pool_create(ordo_pool_t **out, uint64_t units) {
  if (!out || units == 0)
    return ORDO_EINVAL;
  *out = NULL;
  ordo_pool_t *p = calloc(1, sizeof *p);
  if (!p)
    return ORDO_ENOMEM;
  p->units = units;
  p->avail = units;
  TAILQ_INIT(&p->waiters);
  if (pthread_condattr_init(&p->cattr) != 0) {
    free(p);
    return ORDO_ENOMEM;
  }
  if (pthread_condattr_setclock(&p->cattr, CLOCK_MONOTONIC) != 0 ||
      ordo__mutex_init(&p->mu) != 0) {
    pthread_condattr_destroy(&p->cattr);
    free(p);
    return ORDO_ENOMEM;
  }
  *out = p;
  return 0;
}

void ordo_pool_destroy(ordo_pool_t *p) {
  if (!p)
    return;
  /* A client still present is the caller's bug (README invariant 7); a
   * release build frees its record anyway rather than leak it. */
  ORDO_ASSERT(p->ncl == 0);
  ORDO_ASSERT(p->nwaiting == 0);
  for (size_t i = 0; i < p->ncl; i++) {
    pthread_cond_destroy(&p->cl[i]->cv);
    free(p->cl[i]);
  }
  free(p->cl);
  free(p->scratch);
  ordo__mutex_destroy(&p->mu);
  pthread_condattr_destroy(&p->cattr);
  free(p);
}

int ordo_pool_declare(ordo_pool_t *p, ordo_txn_t *t, uint64_t max_claim) {
  if (!p || !t || max_claim == 0 || max_claim > p->units)
    return ORDO_EINVAL;
  ordo__mutex_lock(&p->mu);
  pool_client *c = find(p, t);
  if (c) {
    if (c->state != CLIENT_IDLE || c->held > 0) {
      ordo__mutex_unlock(&p->mu);
      return ORDO_EBUSY;
    }
    /* A client that holds nothing is never in anyone's way (see
     * safe_after), so a new claim keeps the state safe and makes no waiter
     * grantable: no pass over the queue. */
    c->claim = max_claim;
    ordo__mutex_unlock(&p->mu);
    return 0;
  }
  int rc = grow(p);
  if (rc == 0) {
    c = calloc(1, sizeof *c);
    if (!c)
      rc = ORDO_ENOMEM;
    else if (pthread_cond_init(&c->cv, &p->cattr) != 0) {
      free(c);
      rc = ORDO_ENOMEM;
    }
  }
  if (rc == 0) {
    /* Likewise a new client, which holds nothing. */
    c->o = t->o;
    c->id = ordo_txn_id(t);
    c->claim = max_claim;
    c->state = CLIENT_IDLE;
    c->slot = p->ncl;
    p->cl[p->ncl++] = c;
  }
  ordo__mutex_unlock(&p->mu);
  return rc;
}

int ordo_pool_acquire(ordo_pool_t *p, ordo_txn_t *t, uint64_t n,
                      long timeout_ms) {
  if (!p || !t)
    return ORDO_EINVAL;
  uint64_t deadline = ordo__deadline_ns(timeout_ms);
  ordo__mutex_lock(&p->mu);
  pool_client *c = find(p, t);
  int rc = 0;
  if (!c || n > c->claim - c->held)
    rc = ORDO_EINVAL;
  else if (c->state != CLIENT_IDLE)
    rc = ORDO_EBUSY; /* the same txn is already waiting on another thread */
  if (rc != 0 || n == 0) {
    ordo__mutex_unlock(&p->mu);
    return rc;
  }
  if (n <= p->avail && safe_after(p, c, n)) {
    grant(p, c, n);
    ordo__mutex_unlock(&p->mu);
    return 0;
  }
  if (timeout_ms == 0) {
    p->timeouts++;
    ordo__mutex_unlock(&p->mu);
    return ORDO_ETIMEDOUT;
  }

  /* Unsafe now: wait until grant_waiters grants it or the deadline passes.
   * The check above and the enqueue happen under one holding of mu, so a
   * release either came before the check or will find this waiter. */
  enqueue(p, c, n);
  p->waits++;
  while (c->state == CLIENT_WAITING) {
    if (deadline == ORDO_NO_DEADLINE) {
      ordo__cond_wait(&c->cv, &p->mu);
      continue;
    }
    struct timespec ts = {(time_t)(deadline / 1000000000u),
                          (long)(deadline % 1000000000u)};
    int w = ordo__cond_timedwait(&c->cv, &p->mu, &ts);
    if (w == ETIMEDOUT && c->state == CLIENT_WAITING) {
      /* Giving up changes no holding, so under the pass-over rule it makes
       * no one grantable; the queue is tried again all the same so that
       * "every change to the queue re-runs the check" holds without a
       * proof that depends on the policy. */
      dequeue(p, c);
      c->state = CLIENT_IDLE;
      p->timeouts++;
      grant_waiters(p);
      ordo__mutex_unlock(&p->mu);
      return ORDO_ETIMEDOUT;
    }
  }
  /* Granted by grant_waiters on our behalf: the units are already ours. */
  ORDO_ASSERT(c->state == CLIENT_GRANTED);
  c->state = CLIENT_IDLE;
  ordo__mutex_unlock(&p->mu);
  return 0;
}

int ordo_pool_release(ordo_pool_t *p, ordo_txn_t *t, uint64_t n) {
  if (!p || !t)
    return ORDO_EINVAL;
  ordo__mutex_lock(&p->mu);
  pool_client *c = find(p, t);
  if (!c || n > c->held) {
    ordo__mutex_unlock(&p->mu);
    return ORDO_EINVAL;
  }
  if (n > 0) {
    /* A release keeps the state safe (invariant 3) and may make waiters
     * safe. A queued acquire of the same txn stays within its claim, since
     * held only went down. */
    c->held -= n;
    p->avail += n;
    grant_waiters(p);
  }
  ordo__mutex_unlock(&p->mu);
  return 0;
}

int ordo_pool_leave(ordo_pool_t *p, ordo_txn_t *t) {
  if (!p || !t)
    return ORDO_EINVAL;
  ordo__mutex_lock(&p->mu);
  pool_client *c = find(p, t);
  if (!c) {
    ordo__mutex_unlock(&p->mu);
    return ORDO_EINVAL;
  }
  if (c->state != CLIENT_IDLE) {
    /* Its acquire is waiting, or granted and not yet back: freeing the
     * record now would pull it from under that thread. */
    ordo__mutex_unlock(&p->mu);
    return ORDO_EBUSY;
  }
  p->avail += c->held;
  size_t last = --p->ncl;
  if (c->slot != last) {
    p->cl[c->slot] = p->cl[last];
    p->cl[c->slot]->slot = c->slot;
  }
  p->cl[last] = NULL;
  pthread_cond_destroy(&c->cv);
  free(c);
  grant_waiters(p);
  ordo__mutex_unlock(&p->mu);
  return 0;
}

uint64_t ordo_pool_available(ordo_pool_t *p) {
  if (!p)
    return 0;
  ordo__mutex_lock(&p->mu);
  uint64_t v = p->avail;
  ordo__mutex_unlock(&p->mu);
  return v;
}

/* ---- For tests and watchdogs -------------------------------------------- */

int ordo__pool_is_safe(ordo_pool_t *p) {
  ordo__mutex_lock(&p->mu);
  bool ok = textbook_safe(p);
  ordo__mutex_unlock(&p->mu);
  return ok ? 1 : 0;
}

size_t ordo__pool_waiting(ordo_pool_t *p) {
  ordo__mutex_lock(&p->mu);
  size_t n = p->nwaiting;
  ordo__mutex_unlock(&p->mu);
  return n;
}

void ordo__pool_counters(ordo_pool_t *p, uint64_t *grants, uint64_t *waits,
                         uint64_t *timeouts) {
  ordo__mutex_lock(&p->mu);
  *grants = p->grants;
  *waits = p->waits;
  *timeouts = p->timeouts;
  ordo__mutex_unlock(&p->mu);
}

static const char *state_name(pool_state s) {
  switch (s) {
  case CLIENT_IDLE:
    return "idle";
  case CLIENT_WAITING:
    return "waiting";
  case CLIENT_GRANTED:
    return "granted";
  }
  return "?";
}

/*
 * lock_patiently -- tries mu for about a second; true when taken. A
 * function of its own so that the analysis can follow the dump: it does
 * not track a lock tried in a loop and remembered in a flag ("mutex is not
 * held on every path through here"), but it takes ORDO_TRY_ACQUIRE's word
 * for what a call returns.
 */
static bool lock_patiently(ordo_pool_t *p) ORDO_TRY_ACQUIRE(true, p->mu) {
  for (int i = 0; i < 1000; i++) {
    if (ordo__mutex_trylock(&p->mu))
      return true;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  return false;
}

void ordo__pool_dump(ordo_pool_t *p, int fd) {
  /* A watchdog calls this when something is stuck, perhaps with mu held
   * forever: try for about a second, then say so instead of hanging. */
  if (!lock_patiently(p)) {
    dprintf(fd, "pool %p: its mutex has been held for over a second\n",
            (void *)p);
    return;
  }
  dprintf(fd,
          "pool %p: units %" PRIu64 ", available %" PRIu64 ", clients %zu, "
          "waiting %zu, grants %" PRIu64 ", waits %" PRIu64
          ", timeouts %" PRIu64 ", safe %s\n",
          (void *)p, p->units, p->avail, p->ncl, p->nwaiting, p->grants,
          p->waits, p->timeouts, textbook_safe(p) ? "yes" : "NO");
  for (size_t i = 0; i < p->ncl; i++) {
    const pool_client *c = p->cl[i];
    dprintf(fd,
            "  txn %" PRIu64 ": claim %" PRIu64 ", held %" PRIu64
            ", need %" PRIu64 ", %s",
            c->id, c->claim, c->held, c->claim - c->held, state_name(c->state));
    if (c->state == CLIENT_WAITING)
      dprintf(fd, " for %" PRIu64, c->want);
    dprintf(fd, "\n");
  }
  dprintf(fd, "  queue (oldest first):");
  for (const pool_client *c = TAILQ_FIRST(&p->waiters); c;
       c = TAILQ_NEXT(c, wlink))
    dprintf(fd, " txn %" PRIu64 " wants %" PRIu64 ";", c->id, c->want);
  dprintf(fd, "\n");
  ordo__mutex_unlock(&p->mu);
}
