/*
 * sim.h -- the simulator's types, shared by probesim.c (the engine: the
 * network and its faults, the lock managers, the probes, the aborts, the
 * workload), central.c (the polling coordinator) and main.c (options, the
 * run loop, the report). The run loop hands each event to central.c or
 * probesim.c. See sim/README.md.
 */
#ifndef ORDO_SIM_H
#define ORDO_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The protocol's bound on a probe's path, and so on a cycle it can find. */
#define MAXHOPS 16
/* Keys a txn holds at once: a double cycle's shared member holds two and
 * is granted a third. */
#define MAXHOLD 3
/* Shards a txn has a session on: those of its keys and of its wait (a
 * double cycle's shared member: two keys and a wait, on three shards). */
#define MAXSLOT 3
/* Holders of one key in shared mode, and clients that believe they hold it. */
#define MAXSHARE 4
#define NS_PER_US 1000LL
#define NS_PER_MS 1000000LL

typedef int64_t simtime;

/* The messages, counted by kind: every one of them travels the network. The
 * answers the model needs (BLOCKED's, CONFIRM's, RELEASE's) are messages of
 * their own; the +OK that answers the others changes nothing and is not
 * simulated. HELLO opens a link after a break. */
/* clang-format off */
#define MSG_KINDS(X)                                                           \
  X(BLOCKED) X(BLOCKED_REPLY) X(UNBLOCKED) X(PROBE) X(ABORT) X(CONFIRM)        \
  X(CONFIRM_REPLY) X(RELEASE) X(RELEASE_ACK) X(PIN) X(UNPIN) X(HELLO)          \
  X(POLL) X(POLL_REPLY)
/* clang-format on */
#define MSG_ENUM(n) M_##n,
#define MSG_NAME(n) #n,
enum { MSG_KINDS(MSG_ENUM) M_KINDS };
extern const char *sim_msg_names[];

/* The events that are not messages: the workload's, the timers', the
 * clients' and the faults'. */
enum {
  E_MSG,
  E_START,    /* a cycle or chain of txns begins */
  E_REQUEST,  /* a txn's LOCK reaches its key's shard */
  E_TICK,     /* a wait's probe tick: --probe-delay, then 2, 4, ... 500 ms */
  E_TIMEOUT,  /* a breaker's wait times out */
  E_RECCHECK, /* a pin or freeze that held something back may have expired */
  E_COMMIT,   /* a txn that has all it wants releases everything */
  E_CLIENTOP, /* a client's release, or its session's end, at one shard */
  E_CONFIRMBOUND, /* an abort's PR_CONFIRM_MS bound at V */
  E_RENEW,        /* V renews its abort's pins while RELEASEs are out */
  E_LINKBREAK,    /* a link loses what is in flight on it */
  E_LINKFAIL,     /* the link's owner sees the break */
  E_LINKUP,       /* the owner's re-dial succeeds */
  E_FREEZE,       /* a shard stops */
  E_DISCONNECT,   /* a txn's client goes away */
  E_LEASE,        /* a txn's session on one shard reaches its lease */
  E_POLL          /* the coordinator's next poll */
};

/* What a client asks of one shard (E_CLIENTOP). */
enum { OP_RELEASE, OP_END };

struct hop {
  int32_t shard, txn; /* txn waits at shard ... */
  uint32_t wseq;      /* ... in its wseq-th wait ... */
  int32_t prio;       /* ... with this PRIORITY, for the next hop's txn */
};

struct edge {
  int32_t waiter, holder, shard;
  uint32_t wseq;
};

struct ev {
  simtime t;
  uint64_t seq;
  int kind, msg;
  int home;     /* the shard that handles it, -1 for none (a client's) */
  int from, to; /* a message's nodes */
  int lf, lt;   /* the link it rides: lf's link to lt */
  uint32_t gen; /* that link's generation when it was sent */
  int txn, key;
  int aux; /* an abort session's id, a victim's hop, a start's kind, an op */
  int idx; /* CONFIRM and RELEASE and their answers: the shard's place */
  bool ok; /* an answer: yes (CONFIRM :1, BLOCKED +OK) */
  uint32_t wseq;
  simtime dur;
  int nhops;
  struct hop hops[MAXHOPS];
  int nedges;
  struct edge *edges;
};

enum { MODE_X, MODE_S };

struct key {
  int shard, mode;
  int nholders, holders[MAXSHARE];
  int qhead, qtail;        /* FIFO of waiting txns, linked by txn.qnext */
  int nbel, bel[MAXSHARE]; /* clients that believe they hold it */
};

enum { T_PLANNED, T_ACTIVE, T_DONE, T_TIMEDOUT, T_VICTIM, T_GONE };

/* What BLOCKED told a shard R about this txn's wait at S, as S sees it. */
enum { TOLD_NOT, TOLD_PENDING, TOLD_YES };

/* A txn's session on one shard, and what each side keeps about it there. */
struct slot {
  int shard;
  bool ended;        /* its end (a disconnect, a lease) has happened */
  bool end_deferred; /* an end waits for a pin or a freeze to go */
  bool rel_deferred; /* the client's release waits for a freeze to go */
  int req_deferred;  /* a LOCK (its key) waits for a freeze to go, or -1 */
  simtime recheck;   /* an E_RECCHECK is due then, 0: none */
  /* At this shard: PEER BLOCKED's entry, from the shard where the txn waits
   * (-1: none), valid while that link keeps its generation. */
  int kb_from;
  uint32_t kb_wseq, kb_gen;
  /* At the shard where the txn waits: whether this slot's shard has its
   * BLOCKED (TOLD_*), for which wait, on which generation of the link. */
  int told;
  uint32_t told_wseq, told_gen;
};

struct txn {
  uint64_t gid_hi, gid_lo; /* begin ns, random: younger = larger */
  int prio, state;
  int ncyc, cyc[2]; /* the designed cycles it is on */
  int nhold, hold[MAXHOLD];
  int nbel, bel[MAXHOLD]; /* what its client believes it holds */
  bool bel_bad[MAXHOLD];  /* ... and a two-holders incident counted */
  int nslot;
  struct slot slot[MAXSLOT];
  int want, wmode, qnext, widx;
  uint32_t wseq;
  bool waiting; /* the server's view: a wait stands at want's shard */
  bool blocked; /* the client's: its LOCK is not answered yet */
  bool delayed, tmo_deferred, in_abort, abort_again, retry, aborted;
  bool local_skipped;    /* a local cycle skipped it while pinned */
  int sess;              /* the abort session under way when in_abort */
  simtime retry_after;   /* drawn with the workload, used at the timeout */
  simtime tick;          /* its wait's next probe interval */
  uint32_t aborted_wseq; /* V aborts a (gid, wseq) once: wseq + 1, or 0 */
  int recs;              /* its pins and freezes: a list in sim.recs */
};

/* A pin (on a wait) or a freeze (on a session), of one abort (its session
 * id; -1 under --bug-one-pin, where a wait has one deadline and no owner). */
enum { R_PIN, R_FREEZE };
struct rec {
  int sess, txn, shard, kind, next;
  simtime until;
};

/* A designed cycle: mem[i] waits for mem[i + 1], the last for mem[0]. */
struct cycle {
  int n, mem[MAXHOPS];
  bool closed, live; /* live: closed and standing since */
  simtime close_t, longest;
  bool over_bound; /* it stood longer than --miss-bound-ms once */
  int victims;     /* genuine ones: the cycle stood at the abort instant */
  int victims_all; /* phantom ones too */
  int broken_timeout, broken_fault;
};

struct shard {
  int *wait; /* its waiting txns, for the local detector and the polls */
  int nwait, capwait;
  int *act; /* the aborts it is the victim's shard of, under way */
  int nact, capact;
  simtime frozen_until;
};

/* A link: a node's connection to another, its questions one way and their
 * answers the other, each way in order (last[0] is the last delivery of a
 * question, last[1] of an answer). Between shards a break loses both ways
 * and bumps the generation. Links live in a map keyed by the pair, at
 * addresses that never move. */
struct link {
  uint32_t gen, nblocked; /* nblocked: the peer's BLOCKED entries from it */
  bool down;
  simtime last_up, backoff, last[2];
};

/* One victim's abort: its confirmation, then the abort at V, its RELEASEs
 * and their answers, then the victim's answer and the UNPINs. */
enum { P_CONFIRM, P_RELEASE, P_RELEASE_FIRST, P_DONE };
struct sess {
  int victim, V, nhops, phase;
  uint32_t wseq;
  simtime start;
  struct hop hops[MAXHOPS];
  int shards[MAXHOPS], nshards;
  bool asked[MAXHOPS], yes[MAXHOPS], answered[MAXHOPS];
  int pending;
  bool genuine; /* the victim was on a live cycle at the abort instant */
  int nrel, rel[MAXSLOT]; /* the victim's other shards, for RELEASE */
  bool rel_ans[MAXSLOT], rel_applied[MAXSLOT];
  int nres; /* designed cycles it broke, for the latency */
  simtime res_close[2];
};

struct opts {
  int central, shards, len, span, cycles, json, central_confirm;
  double rtt_us, jitter, probe_delay_us, poll_ms, rate_per_ms, chains;
  double break_frac, retry_frac, spread_us, work_us, hold_us, pin_bound_ms,
      confirm_ms;
  double overlap, link_break, spike, spike_ms, freeze, freeze_ms, disconnect,
      lease, miss_bound_ms;
  int peer_blocked_max;
  uint64_t seed;
  int bug_no_versions, bug_no_confirm, bug_no_pins, bug_no_reprobe;
  int bug_release_first, bug_one_pin, bug_told_on_drop, bug_no_defer,
      bug_no_giveup;
};

struct sim {
  struct opts o;
  simtime now, stop;
  uint64_t rng, wrng, frng, seq;
  struct ev **heap;
  size_t nheap, capheap;
  int nodes; /* the shards, and the coordinator as node `shards` */
  struct shard *sh;
  /* The links that carried a message: an open-addressing map from the
   * pair (1 + from * nodes + to) to an index into blocks of links. */
  uint64_t *lkey;
  int32_t *lidx;
  size_t lcap, nlinks;
  struct link **lblock;
  struct key *keys;
  int nkeys, capkeys;
  struct txn *tx;
  int ntx, captx;
  int *mark, stamp; /* the truth's walk: a txn seen in this walk */
  struct cycle *cy;
  int ncy;
  struct sess *ss;
  int nss, capss;
  struct rec *recs;
  int nrecs, caprecs, freerec;
  int cause; /* what the event being handled is: a timeout, a fault, ... */
  /* The coordinator's poll round. */
  simtime horizon; /* no poll starts after it */
  int poll_pending, round;
  struct edge *redges;
  size_t nredges, capredges;
  int *adj_first, *adj_stamp, *color;
  /* The results. */
  uint64_t msgs[M_KINDS], events;
  uint64_t reprobes, probes_stale, confirms_failed, dup_aborts, local_found,
      phantoms, two_holders, gave_up, gave_up_orphan, ended_first, tick_probes;
  uint64_t polls, polls_skipped, victims_total;
  uint64_t link_breaks, msgs_lost, msgs_dropped, spikes, freezes, disconnects,
      leases, sessions_deferred, blocked_resent, releases_resent, busy;
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
bool sim_send(struct sim *s, int msg, int from, int to, struct ev *e);
struct ev *sim_msg_new(int txn, uint32_t wseq);
struct ev *sim_msg_hops(int txn, uint32_t wseq, const struct hop *h, int n);
int sim_waits_for(struct sim *s, int t, int *out, int max);
int sim_pick_victim(struct sim *s, const struct hop *h, int n);
bool sim_on_live_cycle(struct sim *s, int t);
bool sim_cycle_stands(struct sim *s, const struct cycle *c);
bool sim_defer_frozen(struct sim *s, struct ev *e);
void sim_dispatch(struct sim *s, struct ev *e);

/* central.c: the centralized alternative. The run loop (main.c) hands it
 * the events it owns, so that the engine does not depend on it. */
bool sim_central_owns(const struct ev *e);
void sim_central_dispatch(struct sim *s, struct ev *e);

#endif
