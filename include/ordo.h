/*
 * ordo.h -- the one public header of libordo, a deadlock-free multi-resource
 * lock manager.
 *
 * A program opens a lock place with ordo_open() ("mem://" is the in-process
 * engine), begins a transaction handle per unit of work, and takes every key
 * it needs in one call:
 *
 *     ordo_t *o;
 *     ordo_open(&o, "mem://", NULL);
 *     ordo_txn_t *t;
 *     ordo_txn_begin(o, &t, NULL);
 *     ordo_req_t r[2] = {ORDO_REQ_X("acct:1", 6), ORDO_REQ_X("acct:2", 6)};
 *     int rc = ordo_lock_all(t, r, 2, 1000);   // all or nothing, 1 s bound
 *     ...
 *     ordo_unlock_all(t);
 *     ordo_txn_end(t);
 *     ordo_close(o);
 *
 * Every call returns an int: 0 (or a positive count where documented) on
 * success, a negative ORDO_E* code on failure. A call that returns an error
 * never calls its callback. See docs/architecture.md for the semantics.
 */
#ifndef ORDO_H
#define ORDO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define ORDO_EXTERN __attribute__((visibility("default")))
#else
#define ORDO_EXTERN
#endif

/* ---- Errors ------------------------------------------------------------ */

/*
 * The one list of error codes: name, value, retryable, message. It yields the
 * ORDO_E* constants, ordo_strerror(), ordo_err_name() and ordo_is_retryable(),
 * and the server's wire prefixes.
 */
#define ORDO_ERRNO_MAP(XX)                                                     \
  XX(TIMEDOUT, -1, 1, "the keys could not be had before the deadline")         \
  XX(DEADLK, -2, 1, "chosen as a deadlock victim; every lock was released")    \
  XX(CANCELED, -3, 0, "the wait was cancelled")                                \
  XX(LEASE, -4, 1, "the lease was lost; the locks are gone")                   \
  XX(ORDER, -5, 0, "lock order violated")                                      \
  XX(INVAL, -6, 0, "invalid argument")                                         \
  XX(NOMEM, -7, 0, "out of memory")                                            \
  XX(BACKEND, -8, 0, "the backend failed or cannot be reached")                \
  XX(QUORUM, -9, 1, "no quorum of nodes could be reached")                     \
  XX(AUTH, -10, 0, "authentication failed")                                    \
  XX(LIMIT, -11, 0, "a configured limit was reached")                          \
  XX(BUSY, -12, 0, "the handle has a request in flight")                       \
  XX(NOTHELD, -13, 0, "the key is not held by this transaction")               \
  XX(NOTSUP, -14, 0, "not supported by this backend")                          \
  XX(URL, -15, 0, "malformed backend URL")

enum {
#define ORDO__ERR_ENUM(name, val, retry, msg) ORDO_E##name = (val),
  ORDO_ERRNO_MAP(ORDO__ERR_ENUM)
#undef ORDO__ERR_ENUM
      ORDO__ERR_LAST = -16
};

/* Returned (positive) by ordo_lock_all_async() when the callback will come. */
#define ORDO_PENDING 1

ORDO_EXTERN const char *ordo_strerror(int err);
ORDO_EXTERN const char *ordo_err_name(int err); /* "ETIMEDOUT", ... */
ORDO_EXTERN int ordo_is_retryable(int err);

/* ---- Keys ---------------------------------------------------------------- */

/*
 * A key is a binary-safe byte string of 1..max_key_len bytes (512 by default).
 * The canonical order is unsigned lexicographic byte order, a proper prefix
 * first. The encoders below write keys whose byte order equals the natural
 * order of the encoded values.
 */
#define ORDO_KEY_MAX_DEFAULT 512

/* Compares two keys in the canonical order: <0, 0 or >0. */
ORDO_EXTERN int ordo_key_cmp(const void *a, size_t alen, const void *b,
                             size_t blen);

/* Big-endian unsigned 64-bit: 8 bytes. */
ORDO_EXTERN void ordo_key_u64(uint8_t out[8], uint64_t v);
/* Big-endian with the sign bit flipped: 8 bytes. */
ORDO_EXTERN void ordo_key_i64(uint8_t out[8], int64_t v);
ORDO_EXTERN uint64_t ordo_key_u64_decode(const uint8_t in[8]);
ORDO_EXTERN int64_t ordo_key_i64_decode(const uint8_t in[8]);

/*
 * Tuples (composite keys such as (show_id, seat_id)), encoded as
 * FoundationDB's tuple layer does so that tuple order equals byte order:
 * each element starts with a type code; strings escape 0x00 as 0x00 0xFF and
 * end with 0x00; integers are a type code then 8 big-endian bytes (i64 with
 * the sign bit flipped). Elements of different types compare by type code:
 * strings < i64 < u64. A tuple that is a prefix of another sorts first.
 *
 * The builder writes into a caller's buffer; ordo_tuple_len() reports the
 * bytes used, or ORDO_ELIMIT once the buffer has overflowed.
 */
typedef struct ordo_tuple_s {
  uint8_t *buf; /* public, read-only: the encoded bytes */
  size_t len;   /* public, read-only */
  size_t cap;   /* private */
  int overflow; /* private */
} ordo_tuple_t;

ORDO_EXTERN void ordo_tuple_init(ordo_tuple_t *t, void *buf, size_t cap);
ORDO_EXTERN void ordo_tuple_add_u64(ordo_tuple_t *t, uint64_t v);
ORDO_EXTERN void ordo_tuple_add_i64(ordo_tuple_t *t, int64_t v);
ORDO_EXTERN void ordo_tuple_add_str(ordo_tuple_t *t, const void *s, size_t n);
ORDO_EXTERN int ordo_tuple_len(const ordo_tuple_t *t);

/* ---- Lock places, transactions, requests --------------------------------- */

typedef struct ordo_s ordo_t;         /* an open lock place (a backend) */
typedef struct ordo_txn_s ordo_txn_t; /* an owner of locks */

typedef enum ordo_mode_e {
  ORDO_MODE_S = 1, /* shared */
  ORDO_MODE_X = 2  /* exclusive */
} ordo_mode_t;

typedef struct ordo_req_s {
  const void *key;
  size_t len;
  ordo_mode_t mode;
} ordo_req_t;

#define ORDO_REQ_X(k, n)                                                       \
  { (k), (n), ORDO_MODE_X }
#define ORDO_REQ_S(k, n)                                                       \
  { (k), (n), ORDO_MODE_S }

/* Timeouts are in milliseconds: 0 tries once, ORDO_FOREVER waits unbounded. */
#define ORDO_FOREVER (-1L)

/* Capabilities a backend declares (ordo_caps). */
enum {
  ORDO_CAP_SHARED = 1 << 0,            /* S mode as well as X */
  ORDO_CAP_SERVER_WAIT = 1 << 1,       /* waits are queued by the lock owner */
  ORDO_CAP_FENCE = 1 << 2,             /* per-grant fencing tokens */
  ORDO_CAP_FENCE_DURABLE = 1 << 3,     /* tokens never go back, restarts too */
  ORDO_CAP_CANCEL = 1 << 4,            /* a blocked call can be cancelled */
  ORDO_CAP_INCREMENTAL = 1 << 5,       /* ordo_lock of one key at a time */
  ORDO_CAP_ASYNC = 1 << 6,             /* ordo_lock_all_async */
  ORDO_CAP_REENTRANT = 1 << 7,         /* hold counts per txn */
  ORDO_CAP_UPGRADE = 1 << 8,           /* S to X upgrade */
  ORDO_CAP_WAIT_HOLDS_NOTHING = 1 << 9 /* a waiting ordo_lock_all holds none
                                          of its keys meanwhile */
};

/* Deadlock detection modes (DESIGN §5). */
typedef enum ordo_detect_e {
  ORDO_DETECT_IMMEDIATE = 0, /* search when a txn blocks (the default) */
  ORDO_DETECT_DELAYED = 1,   /* search after deadlock_timeout_ms of waiting */
  ORDO_DETECT_OFF = 2        /* timeouts only (and no sweep) */
} ordo_detect_t;

/* Who is aborted when a cycle is found. Priority is compared first (the
 * lowest effective priority loses), then the policy decides. */
typedef enum ordo_victim_e {
  ORDO_VICTIM_YOUNGEST = 0,         /* the latest begun txn (the default) */
  ORDO_VICTIM_OLDEST = 1,           /* the earliest begun txn */
  ORDO_VICTIM_FEWEST_LOCKS = 2,     /* the one holding the fewest keys */
  ORDO_VICTIM_LEAST_WORK = 3,       /* the smallest declared cost */
  ORDO_VICTIM_NEAREST_DEADLINE = 4, /* the one whose deadline is nearest */
  ORDO_VICTIM_LOWEST_PRIORITY = 5,  /* priority alone, then the youngest */
  ORDO_VICTIM_RANDOM = 6,
  ORDO_VICTIM__COUNT = 7
} ordo_victim_t;

/* The lock-order checker (lockdep for keys). */
typedef enum ordo_order_mode_e {
  ORDO_ORDER_OFF = 0,   /* the default */
  ORDO_ORDER_WARN = 1,  /* report (callback, else a log line), then lock */
  ORDO_ORDER_REFUSE = 2 /* report, and the call returns ORDO_EORDER */
} ordo_order_mode_t;

typedef struct ordo_options_s {
  unsigned stripes;          /* lock-table stripes, power of two (64) */
  size_t max_locks;          /* lock objects alive at once (1,000,000) */
  size_t max_key_len;        /* longest key in bytes (512) */
  long starvation_us;        /* wait that reserves a waiter's keys (1000) */
  unsigned starvation_holds; /* ...or this many mean hold times if longer,
                                0 = the fixed bound alone (8) */
  unsigned hold_sample;      /* sample 1 in N hold times, power of two (64) */
  long spin_us;              /* a blocked caller spins this long first (20) */
  ordo_detect_t detect;      /* ORDO_DETECT_IMMEDIATE */
  long deadlock_timeout_ms;  /* the wait before a delayed search (1000) */
  long sweep_ms;             /* background cycle sweep period, 0 = off (1000) */
  ordo_victim_t victim;      /* ORDO_VICTIM_YOUNGEST */
  long log_wait_ms;          /* log waits longer than this, 0 = off (1000) */
  unsigned deadlock_history; /* deadlock records kept (32) */
  unsigned alarm_per_min;    /* deadlocks per minute that raise the alarm,
                                0 = off (60) */
  unsigned alarm_window_s;   /* the alarm's window in seconds (60) */
  ordo_order_mode_t order;   /* ORDO_ORDER_OFF */
  char order_sep;            /* a key's class is its prefix up to this (':') */
} ordo_options_t;

/* Fills the defaults above; callers change fields after it. */
ORDO_EXTERN void ordo_options_init(ordo_options_t *opts);

/*
 * ordo_open -- opens the lock place that url names: "mem://" (the in-process
 * engine; also the meaning of NULL and ""), or "ordod://host:port" and
 * "ordod:///path/to/socket" (an ordod lock server; an optional
 * ":password@" before the host, "?lease_ms=N&timeout_ms=N", and TLS with
 * "?tls=1&tls_ca=FILE..."; src/backend/README.md), or
 * "redis://host:port[/db]" and "redis:///path/to/socket" (one Redis node;
 * "rediss://" for TLS; docs/backend-redis.md), or
 * "redlock://h1:p1,h2:p2,h3:p3" (a quorum of
 * independent Redis nodes; docs/backend-redlock.md). opts may be NULL for
 * defaults. Options in a mem:// URL's query
 * (mem://?stripes=16&starvation_us=500) override opts. Returns ORDO_EURL for an
 * unknown scheme or malformed URL.
 */
ORDO_EXTERN int ordo_open(ordo_t **out, const char *url,
                          const ordo_options_t *opts);
/* Closes; every txn must have ended. ordo_close(NULL) does nothing. */
ORDO_EXTERN void ordo_close(ordo_t *o);
ORDO_EXTERN unsigned ordo_caps(const ordo_t *o);
/* The URL as given, less any password. */
ORDO_EXTERN const char *ordo_url(const ordo_t *o);

typedef struct ordo_txn_options_s {
  int priority;     /* higher wins when a victim is chosen (0) */
  const char *name; /* for dumps and logs, copied (NULL) */
  uint64_t cost;    /* declared work, for ORDO_VICTIM_LEAST_WORK (0) */
} ordo_txn_options_t;

ORDO_EXTERN int ordo_txn_begin(ordo_t *o, ordo_txn_t **out,
                               const ordo_txn_options_t *opts);
/* Releases whatever the txn still holds, cancels its wait, frees it. An
 * asynchronous request's callback has run exactly once by the time it
 * returns (see the asynchronous form below). ordo_txn_end(NULL) does
 * nothing, so a cleanup path may end a txn it never began. */
ORDO_EXTERN void ordo_txn_end(ordo_txn_t *t);
/* A handle's own id: unique within its ordo_t, increasing with begin order. */
ORDO_EXTERN uint64_t ordo_txn_id(const ordo_txn_t *t);

/*
 * Timeouts (timeout_ms, here and in ordo_pool_acquire): a negative one
 * (ORDO_FOREVER) waits until granted, 0 tries once, and a longer one than
 * about 292 years (past INT64_MAX nanoseconds) waits forever too; a place
 * whose server bounds a wait may cap it (postgres://: about 24.8 days).
 *
 * ordo_lock_all -- takes every key of reqs, all or nothing, within timeout_ms.
 * Duplicate keys are merged (the strongest mode wins) and the set is taken in
 * the canonical order. While it waits it holds none of the keys it asks for.
 * A key the txn already holds is taken again (its hold count grows); asking X
 * of a key held S is an upgrade. On any error nothing new is held.
 */
ORDO_EXTERN int ordo_lock_all(ordo_txn_t *t, const ordo_req_t *reqs, size_t n,
                              long timeout_ms);

/*
 * ordo_lock -- one key, the same as ordo_lock_all of one request. Taking
 * keys one at a time while holding others, in any order, can close a cycle
 * of waiting; the detector (opts.detect) then picks one victim, releases
 * every lock it holds, and its call returns ORDO_EDEADLK (retryable: back
 * off and start the unit of work again, as ordo_retry does).
 */
ORDO_EXTERN int ordo_lock(ordo_txn_t *t, const void *key, size_t len,
                          ordo_mode_t mode, long timeout_ms);

/*
 * The asynchronous form. Returns 0 when granted at once (no callback),
 * ORDO_PENDING when queued (cb runs exactly once, with 0 or a negative code,
 * on the thread that made the outcome: a releaser, the engine's timer
 * thread, or a canceller, and never with an engine lock held), or a negative
 * code (no callback). A txn may mix this form with the blocking ones freely.
 * The callback must not block; it may call any function on its txn
 * (ordo_unlock_all, ordo_lock_all_async, ordo_txn_end...). Until it has run,
 * the txn accepts only ordo_cancel and ordo_txn_end, from any thread.
 * ordo_txn_end of a txn whose request is pending cancels it: the callback
 * runs with ORDO_ECANCELED before ordo_txn_end returns, or, if the outcome is
 * being delivered on another thread at that moment, ordo_txn_end waits until
 * that callback has returned. Called from inside the callback, the txn is
 * freed once the callback returns. Either way the callback never runs after
 * ordo_txn_end has returned.
 */
typedef void (*ordo_done_cb)(ordo_txn_t *t, int status, void *arg);
ORDO_EXTERN int ordo_lock_all_async(ordo_txn_t *t, const ordo_req_t *reqs,
                                    size_t n, long timeout_ms, ordo_done_cb cb,
                                    void *arg);

/* Drops one hold of key (hold counts are per txn and key). */
ORDO_EXTERN int ordo_unlock(ordo_txn_t *t, const void *key, size_t len);
/* Drops every hold of the txn, in reverse acquisition order. Returns how many
 * keys it released. */
ORDO_EXTERN int ordo_unlock_all(ordo_txn_t *t);

/*
 * Cancels the txn's pending wait from any thread: the waiting call returns
 * ORDO_ECANCELED holding nothing new. Returns 0 if a wait was cancelled,
 * ORDO_ENOTHELD if there was none.
 */
ORDO_EXTERN int ordo_cancel(ordo_txn_t *t);

/* How many times the txn holds key (0 if not); *mode gets the mode held. A
 * txn may hold one key at most INT32_MAX times: one more lock of it fails
 * with ORDO_ELIMIT, taking nothing. */
ORDO_EXTERN int ordo_held(ordo_txn_t *t, const void *key, size_t len,
                          ordo_mode_t *mode);
/* The fencing token of the grant under which the txn holds key. */
ORDO_EXTERN int ordo_fence(ordo_txn_t *t, const void *key, size_t len,
                           uint64_t *token);

/*
 * ordo_on_lease_lost -- cb(t, arg) is called when a remote place finds that
 * t's lease was lost (its renewal failed, or the server said the lease ran
 * out): the server has released every lock t held, and t's next call
 * returns ORDO_ELEASE. It runs on the place's renewal thread with no lock
 * of the library held; it must not block, end t or close the place (the
 * usual use is to tell t's own thread). NULL unregisters. Places without
 * leases (mem://) never call it. On redis://, a call of t's that finds the
 * lease run out by the client's own count, before the renewal thread has
 * looked, returns ORDO_ELEASE itself, and no callback comes for that loss.
 */
ORDO_EXTERN void
ordo_on_lease_lost(ordo_t *o, void (*cb)(ordo_txn_t *t, void *arg), void *arg);

/* Adds to the txn's work, for ORDO_VICTIM_LEAST_WORK. */
ORDO_EXTERN void ordo_txn_add_cost(ordo_txn_t *t, uint64_t cost);
/* How many times this txn was chosen as a deadlock victim. Each abort adds
 * one to its effective priority (aging), so it cannot lose forever. */
ORDO_EXTERN unsigned ordo_txn_aborts(const ordo_txn_t *t);

/* ---- Deadlocks ------------------------------------------------------------
 * Every deadlock found leaves a record: the cycle's edges (who waits for
 * whom, on which key, in which mode, hard or soft), the policy and the
 * victim, and a monotonic timestamp. The last deadlock_history records are
 * kept; a callback can receive each one as it happens.
 */
#define ORDO_DL_MAX_EDGES 16 /* longer cycles keep their first 16 edges */
#define ORDO_DL_KEY_MAX 64   /* keys in records are cut to 64 bytes */

typedef struct ordo_dl_edge_s {
  uint64_t from, to; /* txn ids: from waits for to */
  uint8_t key[ORDO_DL_KEY_MAX];
  size_t key_len;   /* bytes kept in key */
  ordo_mode_t mode; /* the mode from asks for */
  int soft;         /* 1: to is queued ahead of from; 0: to holds key */
} ordo_dl_edge_t;

typedef struct ordo_deadlock_s {
  uint64_t seq;     /* 1, 2, ... per lock place */
  uint64_t time_ns; /* CLOCK_MONOTONIC when found */
  size_t nedges;    /* the cycle's length (edges kept: up to 16) */
  ordo_dl_edge_t edge[ORDO_DL_MAX_EDGES];
  ordo_victim_t policy;
  uint64_t victim;    /* txn id */
  int found_by_sweep; /* 1 when the background sweep found it */
  /* ORDO_DL_LOCKS: a cycle of lock waits (the fields above). ORDO_DL_POOL: a
   * pool deadlock of an executor; ORDO_DL_MIXED: a cycle through lock waits
   * and future waits. For those two, each edge's key names what is waited
   * for ("future:<task id>", "worker:<pool name>" or a lock's key) and its
   * ids are txn ids or task ids as docs/deadlocks.md, "Pool deadlocks",
   * says; victim is 0 when no txn was aborted (every policy but a mixed
   * cycle's victim). */
  int kind;
} ordo_deadlock_t;
enum { ORDO_DL_LOCKS = 0, ORDO_DL_POOL = 1, ORDO_DL_MIXED = 2 };

/* Copies up to max of the newest records, oldest first; returns how many. */
ORDO_EXTERN int ordo_deadlocks(ordo_t *o, ordo_deadlock_t *out, size_t max);
typedef void (*ordo_deadlock_cb)(const ordo_deadlock_t *d, void *arg);
/* Called for each deadlock, with no engine lock held, on the thread that
 * found it (two can run at once on different threads). */
ORDO_EXTERN void ordo_on_deadlock(ordo_t *o, ordo_deadlock_cb cb, void *arg);
/* The deadlock-rate alarm: per_min deadlocks per minute over the window,
 * and the key classes of the cycles, e.g. "acct,user". */
typedef void (*ordo_alarm_cb)(double per_min, const char *classes, void *arg);
ORDO_EXTERN void ordo_on_alarm(ordo_t *o, ordo_alarm_cb cb, void *arg);

/* Writes the wait-for graph of this moment. */
typedef enum ordo_graph_fmt_e {
  ORDO_GRAPH_DOT = 0,
  ORDO_GRAPH_JSON = 1
} ordo_graph_fmt_t;
ORDO_EXTERN int ordo_graph_dump(ordo_t *o, int fd, ordo_graph_fmt_t fmt);

/* ---- The lock-order checker -----------------------------------------------
 * Off unless opts.order says otherwise. Every acquisition made while the txn
 * holds other keys adds edges from the held keys' classes to the new keys'
 * classes; keys taken together by one lock_all add none among themselves. A
 * class is a key's prefix up to opts.order_sep, or a rank registered for a
 * prefix: ranked classes must be taken in increasing rank. The first
 * acquisition that closes a cycle of any length (or inverts two ranks) is
 * reported once, with the site of every edge, though no deadlock happened.
 * The *_at calls and the ORDO_LOCK* macros pass the caller's file:line.
 */
ORDO_EXTERN int ordo_order_rank(ordo_t *o, const void *prefix, size_t len,
                                int rank);

#define ORDO_ORDER_MAX_EDGES 16
typedef struct ordo_order_edge_s {
  char from[64], to[64]; /* class names (a prefix, or "rank:N <prefix>") */
  const char *file;      /* the acquisition that added the edge */
  int line;
} ordo_order_edge_t;

typedef struct ordo_order_report_s {
  size_t nedges; /* the cycle, in order; the last edge is the new one */
  ordo_order_edge_t edge[ORDO_ORDER_MAX_EDGES];
  int rank_inversion; /* 1 when two ranked classes were taken out of order */
  uint64_t txn;       /* the txn whose acquisition closed it */
} ordo_order_report_t;

typedef void (*ordo_order_cb)(const ordo_order_report_t *r, void *arg);
ORDO_EXTERN void ordo_on_order(ordo_t *o, ordo_order_cb cb, void *arg);

ORDO_EXTERN int ordo_lock_all_at(ordo_txn_t *t, const ordo_req_t *reqs,
                                 size_t n, long timeout_ms, const char *file,
                                 int line);
ORDO_EXTERN int ordo_lock_at(ordo_txn_t *t, const void *key, size_t len,
                             ordo_mode_t mode, long timeout_ms,
                             const char *file, int line);
#define ORDO_LOCK_ALL(t, reqs, n, timeout_ms)                                  \
  ordo_lock_all_at((t), (reqs), (n), (timeout_ms), __FILE__, __LINE__)
#define ORDO_LOCK(t, key, len, mode, timeout_ms)                               \
  ordo_lock_at((t), (key), (len), (mode), (timeout_ms), __FILE__, __LINE__)

/* ---- Avoidance: the Banker's pool -----------------------------------------
 * A counted resource (connection slots, workers) of `units` units. A txn
 * declares its maximum claim before it asks; a request is granted only if
 * the state stays safe (Dijkstra's Banker's algorithm): some order exists in
 * which every declared claim can still be met. Otherwise it waits, bounded
 * by its timeout (0 tries once and returns ORDO_ETIMEDOUT at once).
 */
typedef struct ordo_pool_s ordo_pool_t;

ORDO_EXTERN int ordo_pool_create(ordo_pool_t **out, uint64_t units);
/* Every client must have left. */
ORDO_EXTERN void ordo_pool_destroy(ordo_pool_t *p);
/* Declares t's maximum claim (at most the pool's units): ORDO_EINVAL past
 * it; ORDO_EBUSY if t holds units already. */
ORDO_EXTERN int ordo_pool_declare(ordo_pool_t *p, ordo_txn_t *t,
                                  uint64_t max_claim);
/* Takes n more units: past the declared claim is ORDO_EINVAL. */
ORDO_EXTERN int ordo_pool_acquire(ordo_pool_t *p, ordo_txn_t *t, uint64_t n,
                                  long timeout_ms);
ORDO_EXTERN int ordo_pool_release(ordo_pool_t *p, ordo_txn_t *t, uint64_t n);
/* Releases all of t's units and forgets its claim. */
ORDO_EXTERN int ordo_pool_leave(ordo_pool_t *p, ordo_txn_t *t);
/* Units free now (for tests and stats). */
ORDO_EXTERN uint64_t ordo_pool_available(ordo_pool_t *p);

/* ---- Executors: thread pools whose waits are in the wait-for graph -------
 * An executor is a pool of nworkers threads that belongs to an ordo_t
 * (mem://), so a wait on a task's future and the process's lock waits live
 * in one wait-for graph (docs/deadlocks.md, "Pool deadlocks"):
 *   - a thread that waits on a future waits for the future's task;
 *   - a queued task waits for a worker of its pool (a resource of nworkers);
 *   - a running task that waits on a lock has the usual lock edges, and a
 *     txn begun on a thread while it runs a task belongs to that task.
 * A pool deadlock (every worker blocked, on futures of tasks queued on the
 * same pool or on locks held by such waiters, while the tasks that would
 * unblock them sit in its queue) is found at the block event that forms it,
 * or, when a holder outside the pool lets go and leaves it (no block
 * event), within about 100 ms; so is a mixed cycle (a task that holds lock
 * L waits on future F, and F's task waits for L). Not found: a deadlock
 * across two pools (each one's workers wait on the other's queue), which
 * only the waits' timeouts end. The pool's policy says what happens then. Every
 * detection leaves a record (ordo_deadlocks, ordo_on_deadlock) and shows in
 * ordo_graph_dump. Every wait is bounded and cancellable; errors come from
 * the one list above.
 */
typedef struct ordo_exec_s ordo_exec_t;
typedef struct ordo_future_s ordo_future_t;

typedef enum ordo_exec_policy_e {
  ORDO_EXEC_INLINE = 0,     /* the blocked worker runs the queued task it
                               waits for itself (ForkJoinPool's helping) */
  ORDO_EXEC_COMPENSATE = 1, /* a spare worker starts, up to max_spare
                               (managedBlocker); past it, as INLINE */
  ORDO_EXEC_FAIL = 2,       /* the wait that closed it returns ORDO_EDEADLK
                               (retryable); the chain is recorded */
  ORDO_EXEC_REPORT = 3      /* recorded, ordo_on_deadlock called; the wait
                               goes on (bounded by its timeout) */
} ordo_exec_policy_t;

typedef struct ordo_exec_options_s {
  ordo_exec_policy_t policy; /* ORDO_EXEC_INLINE */
  unsigned max_spare;        /* COMPENSATE: spare workers at most (nworkers) */
  size_t max_queue;          /* queued tasks at most; 0 = no bound (0) */
  int detect;                /* 1: detection on (1); 0: off (the bench) */
  const char *name;          /* for dumps and records, copied ("pool") */
} ordo_exec_options_t;

ORDO_EXTERN void ordo_exec_options_init(ordo_exec_options_t *opts);
/* Starts nworkers (1..1024) threads. opts may be NULL (the defaults). */
ORDO_EXTERN int ordo_exec_create(ordo_exec_t **out, ordo_t *o,
                                 unsigned nworkers,
                                 const ordo_exec_options_t *opts);
/* What a task runs; its return value is the future's value. */
typedef void *(*ordo_task_fn)(void *arg);
/* Queues fn(arg). *fut is the task's future, which the caller releases
 * with ordo_future_release. ORDO_ELIMIT past max_queue; ORDO_ECANCELED
 * once the executor is shut down. */
ORDO_EXTERN int ordo_exec_submit(ordo_exec_t *e, ordo_task_fn fn, void *arg,
                                 ordo_future_t **fut);
/* Waits until the task is done: 0 (its value in *value when value is not
 * NULL); ORDO_ETIMEDOUT (the task goes on; timeout_ms < 0 waits without a
 * bound, 0 only looks); ORDO_ECANCELED (the task was cancelled, or the
 * wait was, by ordo_future_cancel); ORDO_EDEADLK (the FAIL policy: this
 * wait closed a pool deadlock or a mixed cycle). */
ORDO_EXTERN int ordo_future_wait(ordo_future_t *f, long timeout_ms,
                                 void **value);
/* A queued task is taken off its queue and never runs; its waiters return
 * ORDO_ECANCELED. A running task cannot be stopped, but the waits on it in
 * flight can: they return ORDO_ECANCELED, the task runs on to its end, and
 * the call returns ORDO_EBUSY. A done one: 0, nothing changes. */
ORDO_EXTERN int ordo_future_cancel(ordo_future_t *f);
/* 1 when the task is done or cancelled, else 0. */
ORDO_EXTERN int ordo_future_done(const ordo_future_t *f);
/* Drops the caller's reference. Allowed in any state: a task still queued
 * or running goes on, and its memory goes with the last reference. */
ORDO_EXTERN void ordo_future_release(ordo_future_t *f);

typedef enum ordo_exec_shutdown_e {
  ORDO_EXEC_DRAIN = 0, /* no new tasks; the queued ones still run */
  ORDO_EXEC_NOW = 1    /* no new tasks; the queued ones are cancelled */
} ordo_exec_shutdown_t;
/* Stops taking tasks and waits, at most timeout_ms (< 0: no bound), until
 * no task runs or waits in the queue: 0, or ORDO_ETIMEDOUT. */
ORDO_EXTERN int ordo_exec_shutdown(ordo_exec_t *e, ordo_exec_shutdown_t how,
                                   long timeout_ms);
/* Shuts down (ORDO_EXEC_NOW) if not yet, joins the workers, frees e.
 * Futures stay valid until released. */
ORDO_EXTERN void ordo_exec_destroy(ordo_exec_t *e);

/* Foreign pools: a program's own thread pool declares itself and reports
 * its events, and gets the same detection and records at its block events
 * (the policies FAIL and REPORT: ordo cannot run or start its threads; its
 * threads wait in its own code, so a deadlock that a release forms, with no
 * block event, is not found). A task is named
 * by any nonzero id unique within the pool (its pointer, say). */
ORDO_EXTERN int ordo_exec_declare(ordo_exec_t **out, ordo_t *o,
                                  unsigned nworkers,
                                  const ordo_exec_options_t *opts);
ORDO_EXTERN int ordo_exec_note_queued(ordo_exec_t *e, uintptr_t task);
/* On the worker thread, as the task starts and when it is done. */
ORDO_EXTERN int ordo_exec_note_started(ordo_exec_t *e, uintptr_t task);
ORDO_EXTERN int ordo_exec_note_done(ordo_exec_t *e, uintptr_t task);
/* This thread is about to wait for task: ORDO_EDEADLK when the wait would
 * close a pool deadlock and the policy is FAIL (then do not wait), else 0.
 * wait_end when the wait is over, whatever ended it. */
ORDO_EXTERN int ordo_exec_note_wait_begin(ordo_exec_t *e, uintptr_t task);
ORDO_EXTERN int ordo_exec_note_wait_end(ordo_exec_t *e, uintptr_t task);

/* ---- Retry ------------------------------------------------------------- */

typedef struct ordo_retry_options_s {
  long base_us;          /* first backoff ceiling (1000) */
  long cap_us;           /* largest backoff ceiling (100000) */
  unsigned max_attempts; /* 0 = until success or a non-retryable error (10) */
} ordo_retry_options_t;

ORDO_EXTERN void ordo_retry_options_init(ordo_retry_options_t *r);

/*
 * ordo_retry -- runs body(t, arg) until it returns a non-retryable result.
 * After a retryable error it releases everything t holds, then sleeps a
 * uniformly random time in [0, min(cap, base * 2^attempt)) (full jitter) and
 * tries again, at most max_attempts times in all. Returns the body's last
 * result. *attempts (may be NULL) gets the number of attempts made.
 */
typedef int (*ordo_body_cb)(ordo_txn_t *t, void *arg);
ORDO_EXTERN int ordo_retry(ordo_txn_t *t, const ordo_retry_options_t *r,
                           ordo_body_cb body, void *arg, unsigned *attempts);
/* The backoff ceiling before attempt k (k >= 1), in microseconds. */
ORDO_EXTERN long ordo_retry_ceiling_us(const ordo_retry_options_t *r,
                                       unsigned k);

/* ---- Stats --------------------------------------------------------------- */

#define ORDO_HIST_BUCKETS 32 /* bucket i counts values in [2^(i-1), 2^i) us */

typedef struct ordo_stats_s {
  uint64_t acquired;    /* grants of a whole request */
  uint64_t waited;      /* requests that had to queue */
  uint64_t timeouts;    /* requests that ran out of time */
  uint64_t canceled;    /* requests cancelled */
  uint64_t deadlocks;   /* deadlock victims (detection) */
  uint64_t retries;     /* re-attempts made by ordo_retry */
  uint64_t limits;      /* requests refused by max_locks */
  uint64_t released;    /* keys released */
  uint64_t wakeups;     /* waiters woken by a grant */
  uint64_t pokes;       /* sleeping waiters woken to try again themselves */
  uint64_t locks;       /* lock objects alive now */
  uint64_t waiting;     /* requests queued now */
  uint64_t max_wait_us; /* longest wait seen */
  uint64_t victims[ORDO_VICTIM__COUNT]; /* deadlock victims by policy */
  uint64_t reorders;      /* soft cycles resolved by reordering a queue */
  uint64_t sweep_finds;   /* cycles the background sweep found (should be 0) */
  uint64_t long_waits;    /* waits logged for passing log_wait_ms */
  uint64_t order_reports; /* lock-order inversions reported */
  uint64_t detect_hist[ORDO_HIST_BUCKETS]; /* cycle's last edge to the
                                              victim's return, us */
  uint64_t wait_hist[ORDO_HIST_BUCKETS];   /* wait times, us */
  uint64_t hold_hist[ORDO_HIST_BUCKETS];   /* sampled hold times, us */
} ordo_stats_t;

/* Reads the counters without stopping the engine. */
ORDO_EXTERN int ordo_stats(ordo_t *o, ordo_stats_t *out);
/* The value below which a fraction q (0..1) of a histogram lies, in us. */
ORDO_EXTERN uint64_t ordo_hist_quantile(const uint64_t hist[ORDO_HIST_BUCKETS],
                                        double q);

/* Writes a human-readable dump of the lock table (holders, queues) to fd. */
ORDO_EXTERN void ordo_dump(ordo_t *o, int fd);

ORDO_EXTERN const char *ordo_version(void);

#ifdef __cplusplus
}
#endif
#endif /* ORDO_H */
