/*
 * ordo_int.h -- private declarations shared by the library's folders: the
 * backend interface, the common parts of ordo_t and ordo_txn_t, assertions,
 * and the clock. Nothing here is part of the public API; internal non-static
 * names start with ordo__.
 */
#ifndef ORDO_INT_H
#define ORDO_INT_H

#include "ordo.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A spin-wait's pause (x86's PAUSE; nothing elsewhere): mem.c's spins on a
 * busy key and on a wait's outcome, and exec.c's look at a running task. */
#if defined(__x86_64__) || defined(__i386__)
#define ordo__cpu_relax() __builtin_ia32_pause()
#else
#define ordo__cpu_relax() ((void)0)
#endif

/* ---- Assertions --------------------------------------------------------
 * ORDO_ASSERT checks in debug builds only. ALWAYS(x) and NEVER(x) mark
 * defensive branches that should never be taken: in debug builds they abort,
 * in release builds they evaluate to x so the branch still protects us.
 */
void ordo__assert_fail(const char *expr, const char *file, int line);
#ifdef ORDO_DEBUG
#define ORDO_ASSERT(x)                                                         \
  ((x) ? (void)0 : ordo__assert_fail(#x, __FILE__, __LINE__))
#define ALWAYS(x) ((x) ? 1 : (ordo__assert_fail(#x, __FILE__, __LINE__), 0))
#define NEVER(x) ((x) ? (ordo__assert_fail(#x, __FILE__, __LINE__), 1) : 0)
#else
#define ORDO_ASSERT(x) ((void)0)
#define ALWAYS(x) (x)
#define NEVER(x) (x)
#endif

#define ORDO_UNUSED(x) ((void)(x))

/* ---- Clock (src/core/clock.c) ------------------------------------------ */

/* Nanoseconds on CLOCK_MONOTONIC, or on the manual clock. */
uint64_t ordo__now_ns(void);
/* The manual clock (tests/model): set on before any place is opened, then
 * only advanced. While it is on, no engine starts its timer thread (the
 * tester runs ordo__table_tick), and a blocking wait's deadline is kept by
 * that tick, not by the waiting thread. */
bool ordo__clock_manual(void);
void ordo__clock_set_manual(uint64_t start_ns);
void ordo__clock_advance(uint64_t ns);
#define ORDO_NO_DEADLINE UINT64_MAX
/* The longest timeout with a deadline of its own (about 292 years): the
 * monotonic clock is below 2^63 ns (it counts from boot), so now plus this
 * many milliseconds cannot wrap. A longer one waits forever, as it would. */
#define ORDO__TIMEOUT_MAX_MS (INT64_MAX / 1000000)
/* The deadline timeout_ms from now; ORDO_NO_DEADLINE for ORDO_FOREVER (any
 * negative timeout) and past ORDO__TIMEOUT_MAX_MS. Inline: every lock call
 * asks, and most wait forever. */
static inline uint64_t ordo__deadline_ns(long timeout_ms) {
  if (timeout_ms < 0 || (uint64_t)timeout_ms > ORDO__TIMEOUT_MAX_MS)
    return ORDO_NO_DEADLINE;
  return ordo__now_ns() + (uint64_t)timeout_ms * 1000000u;
}

/* A thread-local xorshift generator seeded from the clock and the thread. */
uint64_t ordo__rand64(void);
/* Log2 bucket of a microsecond value, in [0, ORDO_HIST_BUCKETS). */
unsigned ordo__hist_bucket(uint64_t us);

/* ---- Backends ----------------------------------------------------------- */

typedef struct ordo__backend ordo__backend;

/*
 * The parts of an open lock place that every backend shares. A backend
 * allocates a larger struct that begins with this one.
 */
struct ordo_s {
  const ordo__backend *be;  /* read-only after open */
  char *url;                /* the URL less its password, read-only */
  ordo_options_t opts;      /* read-only after open */
  _Atomic uint64_t retries; /* incremented by ordo_retry */
  /* The lock-order checker (src/detect/order.c), NULL when opts.order is
   * ORDO_ORDER_OFF. Read-only after open. */
  struct ordo__order *order;
  /* The engine (src/core) that runs this place in process, NULL for a
   * remote place: set by mem:// at open, read-only after. The lock server
   * reaches a txn's holds through it (core/table.h, "The engine behind a
   * place"), never through a backend. */
  struct ordo__table *engine;
  /* The executors of this place (src/exec), made by the first
   * ordo_exec_create or ordo_exec_declare; NULL until then. Freed by
   * ordo_close, which destroys the executors still alive. */
  struct ordo__xplace *_Atomic exec;
};

/* Likewise for a transaction handle. */
struct ordo_txn_s {
  ordo_t *o;     /* read-only */
  uint64_t id;   /* read-only */
  int priority;  /* read-only after begin */
  char name[32]; /* read-only after begin */
  /* The checker's state of this txn (src/detect/order.c), NULL until its
   * first lock with the checker on. Only the txn's own thread uses it. */
  void *order_state;
  /* The engine's owner behind this txn (mem://), NULL for a remote place;
   * set at begin, read-only after. */
  struct ordo__owner *engine;
};

/*
 * ordo__backend -- the vtable every place implements. The generic layer
 * (src/core/api.c) validates arguments, dedupes and sorts requests into the
 * canonical order and turns timeouts into deadlines before it calls these, so
 * a backend sees only sorted, distinct, valid keys.
 */
struct ordo__backend {
  const char *scheme; /* "mem" */
  unsigned caps;      /* ORDO_CAP_* */
  int (*open)(ordo_t **out, const char *url, const ordo_options_t *opts);
  void (*close)(ordo_t *o);
  int (*txn_begin)(ordo_t *o, ordo_txn_t **out, int priority);
  void (*txn_end)(ordo_txn_t *t);
  int (*lock_all)(ordo_txn_t *t, const ordo_req_t *sorted, size_t n,
                  uint64_t deadline_ns);
  int (*lock_all_async)(ordo_txn_t *t, const ordo_req_t *sorted, size_t n,
                        uint64_t deadline_ns, ordo_done_cb cb, void *arg);
  int (*unlock)(ordo_txn_t *t, const void *key, size_t len);
  int (*unlock_all)(ordo_txn_t *t);
  int (*cancel)(ordo_txn_t *t);
  int (*held)(ordo_txn_t *t, const void *key, size_t len, ordo_mode_t *mode,
              uint64_t *fence);
  int (*stats)(ordo_t *o, ordo_stats_t *out);
  void (*dump)(ordo_t *o, int fd);
  /* Detection; NULL where the backend has none (ORDO_ENOTSUP). */
  int (*graph)(ordo_t *o, int fd, ordo_graph_fmt_t fmt);
  int (*deadlocks)(ordo_t *o, ordo_deadlock_t *out, size_t max);
  void (*on_deadlock)(ordo_t *o, ordo_deadlock_cb cb, void *arg);
  void (*on_alarm)(ordo_t *o, ordo_alarm_cb cb, void *arg);
  void (*txn_add_cost)(ordo_txn_t *t, uint64_t cost);
  unsigned (*txn_aborts)(const ordo_txn_t *t);
  /* Leases (remote places); NULL where there are none: the call does
   * nothing. */
  void (*on_lease_lost)(ordo_t *o, void (*cb)(ordo_txn_t *t, void *arg),
                        void *arg);
};

extern const ordo__backend ordo__backend_mem;
extern const ordo__backend ordo__backend_ordod;
extern const ordo__backend ordo__backend_redis;
/* redis-sentinel:// (backend/redis.c with backend/rsentinel.c). */
extern const ordo__backend ordo__backend_rsentinel;
extern const ordo__backend ordo__backend_redlock;
extern const ordo__backend ordo__backend_rcluster;
extern const ordo__backend ordo__backend_postgres;
extern const ordo__backend ordo__backend_etcd;
/* A sharded ordod:// place (backend/shards.c), and whether url names one:
 * two or more addresses. */
extern const ordo__backend ordo__backend_shards;
bool ordo__shards_multi(const char *url);

/* A hold, as the engine's face (core/table.h, ordo__owner_each_hold) lists
 * it: key, mode, fencing token and hold count. */
typedef void (*ordo__hold_fn)(void *arg, const void *key, size_t len,
                              ordo_mode_t mode, uint64_t fence, unsigned count);

/*
 * The model-based tester's view of a mem:// place (tests/model; nothing
 * else uses these). ordo__mem_before_retry, when set, runs on a poked
 * waiter's thread before it tries its set again, so the tester can order
 * those tries. ordo__mem_wait_state says where a blocking call of tx is:
 * its W_* state (0 spinning or not waiting, 1 done, 2 asleep) with
 * ORDO__MEM_POKED, ORDO__MEM_QUEUED and ORDO__MEM_NAPPING (idle in its
 * wait at this moment: inside the condition wait, or spinning with no
 * event or poke to act on) or'ed in. A poke answered while spinning runs
 * ordo__mem_before_retry too; on the manual clock a spin also ends after a
 * bounded number of rounds.
 */
enum {
  ORDO__MEM_SLEEP = 2,
  ORDO__MEM_POKED = 4,
  ORDO__MEM_QUEUED = 8,
  ORDO__MEM_NAPPING = 16 /* idle in its wait (asleep or spinning) now */
};
extern void (*ordo__mem_before_retry)(ordo_txn_t *t);
int ordo__mem_wait_state(ordo_txn_t *t);

/* ---- Executors (src/exec) ---------------------------------------------
 * ordo__exec_cur is the task this thread runs (an executor's worker, or a
 * foreign pool's thread between note_started and note_done), NULL
 * elsewhere. ordo_txn_begin and ordo_txn_end call the two hooks only when
 * it is set, so a plain txn pays one thread-local load: a txn begun while a
 * task runs belongs to that task (src/exec/README.md). */
extern _Thread_local struct ordo_future_s *ordo__exec_cur;
void ordo__exec_txn_begun(ordo_txn_t *t);
void ordo__exec_txn_ending(ordo_txn_t *t);
/* Destroys the executors still alive and frees the place's executor
 * state: ordo_close, before the backend closes. */
void ordo__exec_place_close(ordo_t *o);
/* Writes the executors' part of the graph dump to f (f NULL: writes
 * nothing); returns whether the place has an executor. */
bool ordo__exec_graph(ordo_t *o, FILE *f, ordo_graph_fmt_t fmt);

/* Sorts reqs into the canonical order and merges duplicates (the strongest
 * mode wins) in place; returns the new count. */
size_t ordo__reqs_normalize(ordo_req_t *reqs, size_t n);

#endif /* ORDO_INT_H */
