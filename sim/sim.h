/*
 * sim.h -- the simulator's types, shared by probesim.c (the engine: the
 * network, the lock managers, the probes, the aborts, the workload),
 * central.c (the polling coordinator) and main.c (options, the run loop,
 * the report). The run loop hands each event to central.c or probesim.c.
 * See sim/README.md.
 */
#ifndef ORDO_SIM_H
#define ORDO_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The protocol's bound on a probe's path, and so on a cycle it can find. */
#define MAXHOPS 16
#define MAXHOLD 2
#define NS_PER_US 1000LL
#define NS_PER_MS 1000000LL

typedef int64_t simtime;

/* The messages, counted by kind: every one of them travels the network. */
/* clang-format off */
#define MSG_KINDS(X)                                                           \
  X(BLOCKED) X(UNBLOCKED) X(PROBE) X(ABORT) X(CONFIRM) X(CONFIRM_REPLY)        \
  X(RELEASE) X(RELEASE_ACK) X(UNPIN) X(POLL) X(POLL_REPLY)
/* clang-format on */
#define MSG_ENUM(n) M_##n,
#define MSG_NAME(n) #n,
enum { MSG_KINDS(MSG_ENUM) M_KINDS };
extern const char *sim_msg_names[];

/* The events that are not messages: the workload's and the timers'. */
enum {
  E_MSG,
  E_START,   /* a cycle or chain of txns begins */
  E_REQUEST, /* a txn's LOCK reaches its key's shard */
  E_DELAY,   /* a wait has lasted --probe-delay */
  E_TIMEOUT, /* a breaker's wait times out */
  E_PINCHECK,
  E_COMMIT, /* a txn that has all it wants releases everything */
  E_POLL    /* the coordinator's next poll */
};

struct hop {
  int32_t shard, txn; /* txn waits at shard ... */
  uint32_t wseq;      /* ... in its wseq-th wait ... */
  int32_t prio;       /* ... with this PRIORITY */
};

struct edge {
  int32_t waiter, holder, shard;
  uint32_t wseq;
};

struct ev {
  simtime t;
  uint64_t seq;
  int kind, msg;
  int from, to;
  int txn, key;
  int aux; /* an abort session's id, a victim's hop, a start's kind */
  int idx; /* CONFIRM and its reply: the shard's place in the session */
  bool ok; /* a CONFIRM's reply: every hop stands (and is pinned) */
  uint32_t wseq;
  int nhops;
  struct hop hops[MAXHOPS];
  int nedges;
  struct edge *edges;
};

struct key {
  int shard, holder;
  int qhead, qtail; /* FIFO of waiting txns, linked by txn.qnext */
};

enum { T_PLANNED, T_ACTIVE, T_DONE, T_TIMEDOUT, T_VICTIM };

struct txn {
  uint64_t gid_hi, gid_lo; /* begin ns, random: younger = larger */
  int prio, cyc, state;
  int nhold, hold[MAXHOLD];
  /* What the shard of hold[i] was told by PEER BLOCKED about this txn. */
  int kb_shard[MAXHOLD];
  uint32_t kb_wseq[MAXHOLD];
  int want, qnext, widx;
  uint32_t wseq;
  bool waiting, delayed, tmo_deferred, in_abort, abort_again, retry;
  int sess;              /* the abort session under way when in_abort */
  simtime retry_after;   /* drawn with the workload, used at the timeout */
  uint32_t aborted_wseq; /* V aborts a (gid, wseq) once: wseq + 1, or 0 */
  int pins;
  simtime pin_since;
};

struct cycle {
  int first, len;
  bool closed, live, breaker; /* live: closed and not broken since */
  simtime close_t;
  int victims;     /* genuine ones: on a live cycle at the abort instant */
  int victims_all; /* phantom ones too */
  int broken_after;
};

struct shard {
  int *wait; /* its waiting txns, for the local detector and the polls */
  int nwait, capwait;
};

/* One victim's abort: its confirmation, then its RELEASEs and their acks. */
struct sess {
  int victim, V, nhops;
  uint32_t wseq;
  struct hop hops[MAXHOPS];
  int shards[MAXHOPS], nshards;
  bool yes[MAXHOPS];
  int pending;
  bool ok, genuine; /* genuine: the victim was on a live cycle */
};

struct opts {
  int central, shards, len, span, cycles, json, central_confirm;
  double rtt_us, jitter, probe_delay_us, poll_ms, rate_per_ms, chains;
  double break_frac, retry_frac, spread_us, work_us, hold_us, pin_bound_ms,
      tail_ms;
  uint64_t seed;
  int bug_no_versions, bug_no_confirm, bug_no_pins, bug_no_reprobe;
};

struct sim {
  struct opts o;
  simtime now;
  uint64_t rng, wrng, seq;
  struct ev **heap;
  size_t nheap, capheap;
  simtime *last; /* per ordered pair of nodes: the last delivery time */
  int nodes;     /* the shards, and the coordinator as node `shards` */
  struct shard *sh;
  struct key *keys;
  int nkeys, capkeys;
  struct txn *tx;
  int ntx, captx;
  struct cycle *cy;
  int ncy;
  struct sess *ss;
  int nss, capss;
  /* The coordinator's poll round. */
  simtime horizon; /* no poll starts after it */
  int poll_pending, round;
  struct edge *redges;
  size_t nredges, capredges;
  int *adj_first, *adj_stamp, *color;
  /* The results. */
  uint64_t msgs[M_KINDS], events;
  uint64_t reprobes, probes_stale, confirms_failed, dup_aborts, local_found,
      phantoms;
  uint64_t polls, polls_skipped, victims_total;
  double *lat;
  size_t nlat, caplat;
};

/* GROW -- makes room for one more element at arr[n]. */
#define GROW(arr, n, cap)                                                      \
  do {                                                                         \
    if ((n) >= (cap)) {                                                        \
      (cap) = (cap) ? 2 * (cap) : 64;                                          \
      (arr) = sim_xrealloc((arr), (size_t)(cap) * sizeof(*(arr)));             \
    }                                                                          \
  } while (0)

/* probesim.c: the engine (see sim/README.md). */
void *sim_xrealloc(void *p, size_t n);
double sim_rnd01(struct sim *s);
double sim_wrnd01(struct sim *s);
struct ev *sim_ev_new(int kind, simtime t);
void sim_push(struct sim *s, struct ev *e);
struct ev *sim_pop(struct sim *s);
void sim_at(struct sim *s, int kind, simtime t, int txn, uint32_t wseq,
            int key);
void sim_send(struct sim *s, int msg, int from, int to, struct ev *e);
struct ev *sim_msg_new(int txn, uint32_t wseq);
struct ev *sim_msg_hops(int txn, uint32_t wseq, const struct hop *h, int n);
int sim_holder_of_wait(struct sim *s, int t);
int sim_pick_victim(struct sim *s, const struct hop *h, int n);
bool sim_on_live_cycle(struct sim *s, int t);
void sim_dispatch(struct sim *s, struct ev *e);

/* central.c: the centralized alternative. The run loop (main.c) hands it
 * the events it owns, so that the engine does not depend on it. */
bool sim_central_owns(const struct ev *e);
void sim_central_dispatch(struct sim *s, struct ev *e);

#endif
