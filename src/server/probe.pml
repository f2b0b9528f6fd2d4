/*
 * probe.pml -- a Promela model of the probe protocol between ordod shards:
 * cross-shard deadlock detection by edge chasing (Chandy, Misra and Haas,
 * AND model) with a confirmation round, as docs/distributed.md, "The
 * servers' side", specifies it (the messages, steps 1-7, "Why it finds
 * every cycle that lasts", "Why it aborts nothing that is not a cycle").
 * It models the protocol as it is to be, not src/server/probe.c as it was
 * (issue 30 lists that file's defects; each is a deliberate bug below).
 * See src/server/README.md, "The model".
 *
 * What it models, step by step of the spec:
 *   engines       each shard's lock table: a key's holders (X, or S by
 *                 several) and its queue, granted in order; a wait at shard
 *                 s has a wseq, and waits for every conflicting holder and
 *                 every txn queued ahead of it (every one: no cap)
 *   sessions      a txn's session on each shard: open, its end deferred
 *                 (a disconnect or a lease's end waits while the session
 *                 has a pin or a freeze), the -DEADLOCK mark a RELEASE
 *                 leaves on it
 *   1. BLOCKED    a wait tells each shard of its HELDAT where it waits;
 *                 told state per (wait, shard), reset when the link breaks;
 *                 -BUSY past --peer-blocked-max entries per peer (said
 *                 again when that peer has room); UNBLOCKED at the wait's
 *                 end to the shards told, matched on (gid, wseq, sender);
 *                 a peer's entries dropped at its new link's HELLO
 *   2. PROBE      a waiter follows its edges through the waits of its
 *                 shard and, by the entries, to the shards where the txns
 *                 it waits for are blocked (stale if that wait is over); an
 *                 edge back to it closes a cycle
 *   3. victim     lowest PRIORITY, then youngest gid; ABORT to its shard V
 *   4. CONFIRM    V starts abort (V, id) unless the victim's wait is over
 *                 or being aborted; it pins its own hops, then asks each
 *                 other shard of the cycle once; a shard pins each hop's
 *                 wait, checks its edge and freezes the txn it waits for,
 *                 all under (V, id): :1, or :0 and nothing stays. Pins and
 *                 freezes are per abort; they lapse after PR_PIN_MS unless
 *                 renewed (PIN)
 *   5. effect     every :1 within the bound (V's clock, not only its
 *                 timer), unless another abort in progress pins the
 *                 victim's wait; the engine's abort at V, which fails if
 *                 the wait is over
 *   6. RELEASE    to each shard of the victim's HELDAT, again on each new
 *                 link until answered, done once per (V, id); it lets go
 *                 of the victim's keys there, ends a wait of it there, and
 *                 marks its session (its next LOCK hears -DEADLOCK)
 *   7. answer     -DEADLOCK once every RELEASE is answered, then UNPIN
 * Clients follow a plan of LOCKs and UNLOCKs (HELDAT what they believe
 * they hold elsewhere), give everything back after -DEADLOCK, a time-out
 * or ORDO_ELEASE, and may try again under the same gid (ordo_retry).
 *
 * Faults (each scenario allows some families; FAULTS of them in a run):
 *   - a link breaks one way (F_BREAK), or both ways between two shards
 *     (F_PART): what it carries is lost, and the sender learns at once:
 *     its unanswered questions fail (a CONFIRM: the abort gives up; a
 *     BLOCKED: not told; a RELEASE: sent again on the new link), and the
 *     link is dialled again at some later moment (HELLO first);
 *   - a link breaks after the peer got what it carried (F_LATE): the peer
 *     reads those questions after all, maybe after the new link's, and
 *     their answers are lost. It ignores the BLOCKED and UNBLOCKED of a
 *     link that is no longer the sender's (the spec's "entries go with
 *     their link" read per link: a late BLOCKED would leave an entry that
 *     nothing removes, and dropping "all of a peer's entries" when an old
 *     link's close is read late would drop the new link's);
 *   - a shard stops and resumes (F_STOP): it does nothing meanwhile, and
 *     its timers fire late: an abort that needs a stopped shard or a link
 *     that is down is slow, and then its bounds may pass (late): its
 *     confirmation gives up, its pins lapse (unrenewed), its victim's
 *     client, whose LOCK has a deadline, may give up on V (its bound runs
 *     out: it drops the session there, gives the rest back, ORDO_ELEASE);
 *   - a client's sessions end (F_CRASH): it died, or its lease ran out;
 *   - a wait's deadline passes at its shard (F_TIMEOUT), unless pinned.
 * Messages on different links arrive in any order; each link is FIFO, as
 * TCP is.
 *
 * Abstracted away, and why:
 *   - A probe's messages. A probe walks its whole path in one step, over
 *     the state of that moment; a hop into a stopped shard or over a link
 *     that is down is lost. What a real probe may see that this one cannot
 *     (edges that stood at different moments) reaches V as an ABORT for a
 *     cycle that does not stand, and the ABORTs of the model are delayed,
 *     reordered and lost at will: the confirmation must refuse them all.
 *   - Periodic probing. A waiter probes at once after each change at its
 *     shard (an edge, an entry, a pin gone, a shard resumed); the spec's
 *     "a BLOCKED that arrives makes R's waiters probe at once" is the case
 *     the liveness argument rests on, and the timer's other probes only
 *     repeat these. A victim whose abort gave way to another's pin probes
 *     again when that pin goes; one that gave up for want of a link or a
 *     shard, when it is back.
 *   - Time. Bounds are events: an abort is slow once a shard or link it
 *     needs was down while it ran, and only a slow abort can be late (its
 *     confirmation bound, 1 s, and then its pins' bound, 2 s, passed).
 *     --probe-delay is 0 (the BLOCKED goes with the wait; its own delay in
 *     the link covers a longer one). PIN renewals are not messages: a pin
 *     lasts while its abort runs and is not late.
 *   - Answers that change nothing where they arrive: +OK to BLOCKED (told
 *     is set when it is sent, and cleared by -BUSY or a break), +OK to
 *     UNBLOCKED unless its sender heard -BUSY from there, +OK to PROBE,
 *     ABORT, PIN, UNPIN, HELLO.
 *   - The engine's own detector (every cycle here crosses shards), lock
 *     objects, hold counts, upgrades, statistics, INFO.
 *   - Ids: an abort is a slot, used again once nothing names it (no pin,
 *     no freeze, no message): as good as a fresh (V, id). An ABORT for
 *     which no slot is free, or whose links have no room, is as lost.
 *
 * The bounds. Shards, txns and their plans come from a scenario (SCEN):
 *   SC_PAIR     the sketch of docs/distributed.md: A holds x on s1 and
 *               waits for y on s0, B holds y and waits for x; B, the
 *               victim, has a deadline and may retry (TRIES)
 *   SC_READERS  two readers hold y, one for ever; V holds x and waits for
 *               y in X (two edges), the other reader waits for x
 *   SC_STAR0/1  two cycles sharing a centre C: C waits for k, held in S by
 *               P and Q, which wait for keys C holds; STAR0: C is the
 *               oldest, may time out, and is in neither victim's place;
 *               STAR1: C is the first cycle's victim
 *   SC_CAP      --peer-blocked-max 1: two waits of one shard owe a peer a
 *               BLOCKED each; one ends, the other lasts for ever
 *   SC_SEQ      a txn waits on s1, then on s2, both with wseq 1, holding a
 *               key on s0; the second wait lasts
 *   SC_THIRD    the pair, and the victim also holds z on s2, outside the
 *               cycle, and retries taking z first
 *   SC_TRIPLE   3 txns on 3 shards in one cycle (TRIPLE_DL: who has a
 *               deadline)
 * The default bound covers: -DSCEN=1 -DSCEN=2 -DSCEN=3 -DSCEN=4 -DSCEN=5 -DSCEN=6 -DSCEN=7
 * make test runs SCEN=0, every scenario but SC_TRIPLE, each with one
 * fault of its families (480,000 states, 6 s), and each deliberate bug at
 * its scenario; make verify runs SCEN=8, SC_TRIPLE with one fault of any
 * family (9.8 million states, 3.5 GB, 2.5 minutes).
 * Other knobs: FAULTS (faults per run), TRIES, LQ (a link's buffer),
 * FMASK (the fault families allowed, within the scenario's), FALL (every
 * family in any scenario: -DSCEN=3 -DFALL and -DSCEN=4 -DFALL are about 10
 * million states each, 2 minutes, errors: 0 today).
 *
 * Properties:
 *   (a) Never two holders of a key. The engines never grant X beside a
 *       holder (assert at each grant). A client's beliefs are true before
 *       each step it takes and at the end: every key it believes it holds,
 *       its session holds (so nobody else holds it in X); a RELEASE never
 *       takes a key from a client at work that believes it holds it; and a
 *       LOCK whose txn lost a key of its attempt to a RELEASE is never
 *       answered as a grant (the victim's LOCK is never granted after its
 *       keys went elsewhere).
 *   (b) No phantom: when an abort takes effect (step 5), every edge of its
 *       cycle stands (assert at that step).
 *   (c) No missed cycle, encoded for a safety search: at quiescence
 *       (timeout: no process can move; faults are bounded, and a run may
 *       renounce the rest at any moment), no cycle stands in the wait-for
 *       graph, no abort runs, nothing is pinned, frozen or ending, every
 *       wait left is known (its BLOCKED in place) at each shard of its
 *       HELDAT unless that shard holds --peer-blocked-max entries of the
 *       waiter's shard, no entry names a wait that is over, and every
 *       client is done, gone, holds for ever, or waits (then, there being
 *       no cycle, for a txn that holds for ever). In the scenarios without
 *       such a holder, every wait has ended.
 *   (d) One victim per cycle: no two aborts that take effect name the same
 *       waits (assert at step 5).
 *
 * Deliberate bugs (each must make spin report an error at the scenario it
 * names; tests/spin/run_spin.sh checks that each does, and checks the
 * model without the bug at those defines too):
 *   -DBUG_RELEASE_BEFORE_ABORT (with -DSCEN=1)  issue 30 defect 1: RELEASE
 *       before the abort at V, which then finds the wait granted
 *   -DBUG_ONE_PIN (with -DSCEN=3)  defect 2: a pin is one deadline per wait,
 *       and any UNPIN lifts it
 *   -DBUG_TOLD_WHEN_DROPPED (with -DSCEN=1)  defect 3: told is set although
 *       the BLOCKED was dropped (its link down) or its link broke
 *   -DBUG_EDGE_CAP (with -DSCEN=2)  defect 4: a probe follows only the first
 *       blocker of a wait
 *   -DBUG_CONFIRM_SKIPS_SHARD (with -DSCEN=1)  defect 5: one shard of the
 *       cycle is never asked to confirm
 *   -DBUG_BLOCKED_DROPPED (with -DSCEN=5)  defect 6's wrong fix: a BLOCKED
 *       past the cap is dropped and answered +OK, not -BUSY
 *   -DBUG_UNBLOCKED_ANY_SENDER (with -DSCEN=6)  defect 7: UNBLOCKED matches
 *       (gid, wseq) alone and erases another shard's entry
 *   -DBUG_NO_DEFER_END (with -DSCEN=1)  a disconnect ends a session at once,
 *       pinned or frozen
 *   -DBUG_NO_PIN_CHECK (with -DSCEN=4)  step 5 ignores another abort's pin
 *       on its victim's wait
 *   -DBUG_ANSWER_BEFORE_RELEASED (with -DSCEN=7)  the victim hears -DEADLOCK
 *       right after the abort at V, before the RELEASEs are answered
 *   -DBUG_RELEASE_TWICE (with -DSCEN=1 -DTRIES=2)  RELEASE is not
 *       deduplicated per (V, id): a late copy takes a key the victim took
 *       again after its -DEADLOCK
 *   -DBUG_BOUND_BY_TIMER (with -DSCEN=1)  step 5 trusts the confirmation's
 *       timer, not the clock: a V that was stopped acts on :1s whose pins
 *       lapsed meanwhile
 *
 * What the model found in the spec (docs/distributed.md as of 84909a3):
 *   RETRY_AFTER_GIVEUP. A client whose bound ran out before V's answer
 *   (a stopped or slow shard) gives everything back and returns
 *   ORDO_ELEASE, which ordo_retry retries under the same gid. A RELEASE of
 *   the abort of its earlier attempt can still be on its way to a shard of
 *   its HELDAT (slow, resent on a new link, or not yet sent by a stopped
 *   V), and it lets go of every key the gid holds there: the keys the
 *   retry took since, which its client believes it holds. The -DEADLOCK
 *   mark comes with that RELEASE, too late. -DRETRY_AFTER_GIVEUP lets the
 *   model's clients retry after a give-up, and spin then reports it (with
 *   -DSCEN=1: "a client at work lost a key it believes it holds"); by
 *   default a client that gave up does not retry. src/server/README.md,
 *   "The model", has the trail.
 *
 * Run (what tests/spin/run_spin.sh does, in a temporary folder):
 *   spin -a probe.pml && cc -DSAFETY -DNOCLAIM -DCOLLAPSE -o pan pan.c && ./pan -m1000000
 * and expect "errors: 0". A trail replays with spin -t -DSCEN=... probe.pml;
 * the model's printf lines tell the story (q<kind>/a<kind>: the M_ and R_
 * numbers below; FAULT: lines; "abort N takes effect").
 */

/* ---- Bounds --------------------------------------------------------------- */

#define SC_PAIR 1
#define SC_READERS 2
#define SC_STAR0 3
#define SC_STAR1 4
#define SC_CAP 5
#define SC_SEQ 6
#define SC_THIRD 7
#define SC_TRIPLE 8

#ifndef SCEN
#define SCEN 0 /* 0: every scenario of the small bound, chosen at the start */
#endif
#ifndef FAULTS
#define FAULTS 1 /* faults of the scenario's families, at most */
#endif
#ifndef TRIPLE_DL
#define TRIPLE_DL 4 /* SC_TRIPLE: the txns whose LOCKs have a deadline, a bit each */
#endif
#ifndef TRIES
#define TRIES 1 /* how often a txn the scenario lets retry may retry */
#endif

#define NS 3    /* shards */
#define NT 3    /* txns; index order is age order: 0 is the oldest gid */
#define NK 4    /* keys */
#define NTS 9   /* sessions (t, s): TS(t, s) */
#define NL 6    /* directed links S->R: LK(S, R) */
#define MAXH 3  /* hops of a path: a cycle of NT txns */
#define MAXAB 4 /* aborts started in one run */
#define QL 3    /* a key's queue */
#define NOPS 4  /* steps of a txn's plan */
#ifndef LQ
#define LQ 10   /* a link's buffer, each way */
#endif

#define TS(t, s) ((t) * NS + (s))
#define LK(a, b) ((a) * (NS - 1) + (b) - ((b) > (a) -> 1 : 0))
#define BIT(i) (1 << (i))
#define HAS(m, i) ((((m) >> (i)) & 1) == 1)
#define SETB(m, i, v) m = ((v) -> ((m) | BIT(i)) : ((m) & ~BIT(i)))
/* The sessions at shard r, a bit each. */
#define SHM(r) (BIT(r) | BIT(NS + (r)) | BIT(2 * NS + (r)))

/* A hop (txn t waits at shard s with wseq w) in one byte; the txn it waits
 * for is the next hop's t (the last hop's next is the first's). */
#define HOP(t, s, w) ((t) | ((s) << 2) | ((w) << 4) | 64)
#define HT(h) ((h) & 3)
#define HS(h) (((h) >> 2) & 3)
#define HW(h) (((h) >> 4) & 3)

/* A step of a plan: LOCK key k (in X or S), or UNLOCK key k. */
#define OPL(k, x) ((k) | ((x) << 3))
#define OPU(k) ((k) | 16)
#define OPK(o) ((o) & 7)
#define OPX(o) (((o) >> 3) & 1)
#define OPUNL(o) (((o) >> 4) & 1)

/* Peer messages (questions, on S's link to R) and their answers. */
#define M_HELLO 1
#define M_BLOCKED 2   /* x t, y wseq */
#define M_UNBLOCKED 3 /* x t, y wseq */
#define M_PROBE 4     /* x expect, y ewseq, h path */
#define M_ABORT 5     /* x victim, y vwseq, h cycle */
#define M_CONFIRM 6   /* x abort */
#define M_UNPIN 7     /* x abort */
#define M_RELEASE 8   /* x abort, y gid */
#define R_BUSY 2      /* -BUSY to BLOCKED x wseq y (its +OK changes nothing here) */
#define R_OKU 3       /* +OK to UNBLOCKED */
#define R_YES 4       /* :1 to CONFIRM x */
#define R_NO 5        /* :0 to CONFIRM x */
#define R_REL 6       /* :n to RELEASE x */


/* Clients. */
#define C_RUN 1  /* its next step of the plan */
#define C_WAIT 2 /* its LOCK waits at shard cws */
#define C_FIN 3  /* plan done: gives everything back */
#define C_FAIL 4 /* -DEADLOCK, time-out or ELEASE: gives back, may retry */
#define C_DONE 5
#define C_HOLD 6 /* holds what it has for ever */
#define C_GONE 7 /* its client died, or its lease ran out */

#define A_GRANT 1
#define A_DEADLOCK 2
#define A_TIMEOUT 3

/* Aborts. */
#define AB_FREE 0
#define AB_CONF 1 /* confirming */
#define AB_REL 2  /* taken effect at V; RELEASEs out */
#define AB_REL0 3 /* BUG_RELEASE_BEFORE_ABORT: RELEASEs out first */
#define AB_DONE 4
#define INPROG(a) (ab_st[a] == AB_CONF || ab_st[a] == AB_REL || ab_st[a] == AB_REL0)

/* Fault families. */
#define F_BREAK 1   /* a link breaks, one way */
#define F_PART 2    /* both links between two shards break */
#define F_STOP 4    /* a shard stops, and resumes later */
#define F_CRASH 8   /* a client's sessions end: it died, or its lease ran out */
#define F_TIMEOUT 16 /* a wait's deadline passes at its shard */
#define F_LATE 32   /* a link breaks one way, after the peer got what it carried */

/* ---- State ---------------------------------------------------------------- */

/* The scenario: constant once init has set it up. */
/* With one scenario (SCEN > 0), init sets these before anything else can
 * happen, the same way on every path: pan need not store them. */
#if SCEN > 0
#define CONST hidden
#else
#define CONST
#endif
CONST byte nsh, ntx;         /* shards and txns in use */
CONST byte home[NK];         /* each key's shard */
CONST byte keyat[NS];        /* the keys of each shard, a bit each */
CONST byte plan[NT * NOPS];  /* each txn's plan */
CONST byte nops[NT], npre[NT]; /* its length; its steps done before the start */
CONST byte eternal[NT];      /* holds its keys for ever once its plan is done */
CONST byte dl[NT];           /* its LOCKs have a deadline */
CONST byte prio[NT];         /* PRIORITY: the lowest is the victim */
CONST byte cap;              /* --peer-blocked-max */
CONST byte fmask;            /* the fault families this scenario allows */
byte nfault;           /* faults left */

/* Each shard's engine: a key's holders (a bit per txn; hx: in X) and queue
 * (txn + 1, arrival order). */
byte hold[NK];
byte hxm;              /* held in X, a bit per key */
byte q[NK * QL];
byte ql[NK];

/* Sessions (t, s): its wait (key + 1, 0 for none), mode and wseq, the HELDAT
 * its LOCK gave; open, its end deferred, its -DEADLOCK mark; the shards of
 * the HELDAT told (a BLOCKED sent on a link that has not broken since) and
 * those that answered -BUSY. */
byte wkey[NTS];
short wxm;             /* the wait is for X, a bit per session */
byte wseq[NTS];
byte heldat[NTS];
short sopm, endm, markm; /* open, ending, marked: a bit per session */
byte told[NTS];
byte busy[NTS];
short waitmask;        /* the sessions that wait */
short gw;              /* waits whose abort gave way to another's pin */
short reprobe;         /* the waits that have a probe due */

/* The blocked-at entries: ENT(R, TS(t, S)) = wseq (0: none) at R,
 * from S. */
int entm[NS];          /* 2 bits per session */
#define ENT(r, ts) ((entm[r] >> (2 * (ts))) & 3)
#define SETENT(r, ts, v) entm[r] = (entm[r] & ~(3 << (2 * (ts)))) | ((v) << (2 * (ts)))

/* Shards up (not stopped); links up, and broken with the sender not yet
 * aware. Each link has its questions (lq) and their answers (la). */
byte upm;              /* shards up, a bit each */
byte lupm, lbrm;        /* links up, broken: a bit each */
chan lq[NL] = [LQ] of { byte, byte, byte, byte }; /* MSG(k, x, y), then a path */
chan la[NL] = [LQ] of { byte };                   /* MSG(k, x, y) */
/* The questions of a link that broke after they reached the peer: it reads
 * them after all, before or after those of the new link; their answers
 * are lost. */
chan lqo[NL] = [LQ] of { byte, byte, byte, byte };

/* Aborts, by slot (a slot is an (origin, id)): state, origin V, victim and
 * its wseq, the cycle, the shards asked to confirm and those that said :1,
 * the RELEASEs wanted and answered; slow (a shard stopped or a link was down
 * while it ran), late (its bounds may have passed), took effect. Its pins
 * (waits) and freezes (sessions), a bit per session, wherever they are. */

byte ab_st[MAXAB], ab_o[MAXAB], ab_vic[MAXAB], ab_vw[MAXAB], ab_n[MAXAB];
byte ab_h[MAXAB * MAXH];
byte ab_ask[MAXAB], ab_yes[MAXAB], ab_rw[MAXAB], ab_rd[MAXAB];
byte abslow, ablate, abfx; /* a bit per slot */
byte ab_ref[MAXAB];    /* messages in flight that name it */
short pinw[MAXAB], frz[MAXAB];
byte reldone[NS];      /* the RELEASEs each shard has done, a bit per slot */

/* Clients: state, next step, the shard its LOCK waits at, the keys it
 * believes it holds, the answer come, tries left; a RELEASE took a key of
 * its current attempt (ghost). */
byte cst[NT], cop[NT], cws[NT], bel[NT], ans[NT], tries[NT];
byte relg;             /* a bit per txn */

#define ALLPIN (pinw[0] | pinw[1] | pinw[2] | pinw[3])
#define ALLFRZ (frz[0] | frz[1] | frz[2] | frz[3])
#define WAITS(t, s) (wkey[TS(t, s)] != 0)
/* An abort is slow when a shard it needs (V, those asked, those to
 * release) is stopped, or V's link to one of them is down: its bounds may
 * pass then (late), and its pins may lapse. Once slow, always. */
#define ABSH(a) (BIT(ab_o[a]) | ab_ask[a] | ab_rw[a])
#define LV(a, r) (ab_o[a] != (r) && HAS(ab_ask[a] | ab_rw[a], r) && !HAS(lupm, LK(ab_o[a], r)))
#define SLOWFOR(a) ((HAS(ABSH(a), 0) && !HAS(upm, 0)) || (HAS(ABSH(a), 1) && !HAS(upm, 1)) || \
  (HAS(ABSH(a), 2) && !HAS(upm, 2)) || LV(a, 0) || LV(a, 1) || LV(a, 2))

/* Something changed at shard s (an edge, an entry, a pin): its waiters
 * probe again. */
#define EVENT(s) reprobe = reprobe | (waitmask & SHM(s))

/* Scratch of the atomic steps: written before it is read, in one step. */
hidden byte m_orph; /* the question came on a link that broke */
hidden byte m_hd, m_k, m_x, m_y, m_h0, m_h1, m_h2;
/* A message's kind and its two small arguments, in one byte. */
#define MSG(k, x, y) ((k) | ((x) << 4) | ((y) << 6))
#define UNMSG m_k = m_hd & 15; m_x = (m_hd >> 4) & 3; m_y = (m_hd >> 6) & 3
hidden byte bk_k, bk_i, bk_b;
hidden byte qr_i;
hidden byte we_ts, we_r;
hidden byte rg_t, rg_s;
hidden byte aw_k;
hidden byte ra_k;
hidden byte hs_t, hs_s, hs_w, hs_nx;
hidden byte hs_ok;
#define PWN 6
hidden byte pw_e[PWN], pw_x[PWN], pw_n[PWN], pw_h[PWN * MAXH], pw_top;
hidden byte pr_cur, pr_x, pr_n, pr_init, pr_bl, pr_b, pr_i, pr_s, pr_path[MAXH];
hidden byte pr_on;
hidden byte cy_i, cy_vh, cy_loc, cy_h1, cy_h2;
hidden byte gc_a, rp_n, rp_ts, sb_r;
hidden short up_m;
hidden byte sa_v, sa_vw, sa_n, sa_h[MAXH], sa_a, sa_i, sa_r;
hidden byte sa_ok, sa_fail;
hidden byte ca_i, ca_h, ca_t, ca_nx;
hidden byte ca_ok;
hidden byte gu_r;
hidden byte te_v, te_b, te_i, te_r;
hidden byte te_pin, te_ok;
hidden byte fi_t, fi_r;
hidden byte ov_b, ov_i, ov_j;
hidden byte ov_same, ov_f;
hidden byte rl_t, rl_took, rl_k;
hidden byte un_a;
hidden byte es_t;
hidden byte sw_i, sw_n;

/* ---- The engine ------------------------------------------------------------ */

/* blockers(t, s): bk_b = the txns that t's wait at s waits for: holders of
 * its key in a conflicting mode, and every txn queued ahead of it. */
inline blockers(bt, bs) {
  bk_k = wkey[TS(bt, bs)] - 1;
  if
  :: HAS(wxm, TS(bt, bs)) || HAS(hxm, bk_k) -> bk_b = hold[bk_k] & ~BIT(bt)
  :: else -> bk_b = 0
  fi;
  bk_i = 0;
  do
  :: bk_i < ql[bk_k] && q[bk_k * QL + bk_i] != bt + 1 ->
    bk_b = bk_b | BIT(q[bk_k * QL + bk_i] - 1);
    bk_i++
  :: else -> break
  od
}

/* hop_stands(t, s, w, nx): hs_ok = t waits at s with wseq w, for nx. */
inline hop_stands(ht, hsh, hw, hnx) {
  hs_ok = 0;
  if
  :: WAITS(ht, hsh) && wseq[TS(ht, hsh)] == hw ->
    blockers(ht, hsh);
    hs_ok = HAS(bk_b, hnx)
  :: else -> skip
  fi
}

/* Takes txn t out of key k's queue. */
inline qremove(qk, qt) {
  qr_i = 0;
  do
  :: qr_i < ql[qk] && q[qk * QL + qr_i] != qt + 1 -> qr_i++
  :: else -> break
  od;
  assert(qr_i < ql[qk]);
  do
  :: qr_i + 1 < ql[qk] -> q[qk * QL + qr_i] = q[qk * QL + qr_i + 1]; qr_i++
  :: else -> break
  od;
  ql[qk]--;
  q[qk * QL + ql[qk]] = 0;
  qr_i = 0
}

/* A send that the model's buffers must have room for. */
/* Messages that name an abort slot (CONFIRM, UNPIN, RELEASE and their
 * answers) are counted in ab_ref, so that a slot is used again only when
 * nothing names it any more. */
#define QREF(k) ((k) == M_CONFIRM || (k) == M_UNPIN || (k) == M_RELEASE)
#define AREF(k) ((k) == R_YES || (k) == R_NO || (k) == R_REL)
#define QSEND(l, k, x, y, a, b, c) assert(nfull(lq[l])); lq[l]!MSG(k, x, y), a, b, c; \
  if :: QREF(k) -> ab_ref[x]++ :: else -> skip fi; \
  printf("  q%d x%d y%d on link %d\n", k, x, y, l)
#define ASEND(l, k, x, y) if :: !m_orph -> assert(nfull(la[l])); la[l]!MSG(k, x, y); \
  if :: AREF(k) -> ab_ref[x]++ :: else -> skip fi; \
  printf("  a%d x%d y%d on link %d\n", k, x, y, l) :: else -> skip fi

/*
 * wait_end(t, s): t's wait at s is over (granted, aborted, timed out, its
 * session ended). Step 1's end: UNBLOCKED to every shard told, whether its
 * +OK came or not, over a link that is up (a link that broke takes the
 * peer's entries with it). The wait's pins go
 * with it: a pin is on a wait.
 */
inline wait_end(wt, ws) {
  we_ts = TS(wt, ws);
  we_r = 0;
  do
  :: we_r < NS ->
    if
    :: we_r != ws && HAS(told[we_ts], we_r) && HAS(lupm, LK(ws, we_r)) ->
      QSEND(LK(ws, we_r), M_UNBLOCKED, wt, wseq[we_ts], 0, 0, 0)
    :: else -> skip
    fi;
    we_r++
  :: else -> break
  od;
  told[we_ts] = 0;
  busy[we_ts] = 0;
  wkey[we_ts] = 0;
  SETB(wxm, we_ts, 0);
  heldat[we_ts] = 0;
  waitmask = waitmask & ~BIT(we_ts);
  gw = gw & ~BIT(we_ts);
  reprobe = reprobe & ~BIT(we_ts);
  pinw[0] = pinw[0] & ~BIT(we_ts);
  pinw[1] = pinw[1] & ~BIT(we_ts);
  pinw[2] = pinw[2] & ~BIT(we_ts);
  pinw[3] = pinw[3] & ~BIT(we_ts);
  EVENT(ws);
  we_ts = 0;
  we_r = 0
}

/*
 * send_blocked(t, s): step 1, BLOCKED of t's wait at s to each shard of its
 * HELDAT not told yet, that has not answered -BUSY since its last room, over
 * a link that is up (a link that is down: it is told on the new link). The
 * model sends it at the wait's start (--probe-delay 0; the message's own
 * delay covers a longer one), on each new link, and when a shard that said
 * -BUSY has room again.
 */
inline send_blocked(bt, bs) {
  sb_r = 0;
  do
  :: sb_r < nsh ->
    if
    :: WAITS(bt, bs) && sb_r != bs && HAS(heldat[TS(bt, bs)], sb_r) &&
       !HAS(told[TS(bt, bs)], sb_r) && !HAS(busy[TS(bt, bs)], sb_r) ->
      if
      :: HAS(lupm, LK(bs, sb_r)) -> QSEND(LK(bs, sb_r), M_BLOCKED, bt, wseq[TS(bt, bs)], 0, 0, 0);
        told[TS(bt, bs)] = told[TS(bt, bs)] | BIT(sb_r)
#ifdef BUG_TOLD_WHEN_DROPPED
      :: else -> told[TS(bt, bs)] = told[TS(bt, bs)] | BIT(sb_r) /* dropped, but told */
#else
      :: else -> skip
#endif
      fi
    :: else -> skip
    fi;
    sb_r++
  :: else -> break
  od;
  sb_r = 0
}

/* Can the client hear the answer of its wait at s? (It waits for it there,
 * on the session's connection, which it has not dropped.) */
#define LISTENS(t, s) (cst[t] == C_WAIT && cws[t] == (s) && HAS(sopm, TS(t, s)) && !HAS(endm, TS(t, s)))

/* regrant(k): grants key k's queue from its head while the head fits. */
inline regrant(rk) {
  do
  :: ql[rk] > 0 ->
    rg_t = q[rk * QL] - 1;
    rg_s = home[rk];
    if
    :: (HAS(wxm, TS(rg_t, rg_s)) && hold[rk] == 0) ||
       (!HAS(wxm, TS(rg_t, rg_s)) && !(HAS(hxm, rk) && hold[rk] != 0)) ->
      printf("s%d grants k%d to t%d\n", rg_s, rk, rg_t);
      /* (a) never X beside a holder, never S beside an X holder */
      assert(hold[rk] == 0 || (!HAS(wxm, TS(rg_t, rg_s)) && !HAS(hxm, rk)));
      hold[rk] = hold[rk] | BIT(rg_t);
      SETB(hxm, rk, HAS(wxm, TS(rg_t, rg_s)));
      qremove(rk, rg_t);
      if
      :: LISTENS(rg_t, rg_s) ->
        /* (a) The victim's LOCK is never granted once a key of its
         * attempt went elsewhere. */
        assert(!HAS(relg, rg_t));
        ans[rg_t] = A_GRANT
      :: else -> skip
      fi;
      wait_end(rg_t, rg_s)
    :: else -> break
    fi
  :: else -> break
  od;
  rg_t = 0;
  rg_s = 0
}

/* abort_wait(t, s): the engine ends t's wait at s (no answer here). */
inline abort_wait(at, as) {
  aw_k = wkey[TS(at, as)] - 1;
  qremove(aw_k, at);
  wait_end(at, as);
  regrant(aw_k);
  aw_k = 0
}

/* release_at(t, s): t lets go of every key it holds at s. */
inline release_at(rt, rs) {
  ra_k = 0;
  do
  :: ra_k < NK ->
    if
    :: home[ra_k] == rs && HAS(hold[ra_k], rt) ->
      hold[ra_k] = hold[ra_k] & ~BIT(rt);
      if
      :: hold[ra_k] == 0 -> SETB(hxm, ra_k, 0)
      :: else -> skip
      fi;
      regrant(ra_k);
      EVENT(rs)
    :: else -> skip
    fi;
    ra_k++
  :: else -> break
  od;
  ra_k = 0
}

/* ---- Aborts ---------------------------------------------------------------- */

/* confirm_at(r, a): step 4 at shard r for abort a: pin each hop's wait,
 * check its edge, freeze the one it waits for. ca_ok; on failure nothing of
 * a stays at r. */
inline confirm_at(cr, cab) {
  ca_ok = 1;
  ca_i = 0;
  do
  :: ca_i < ab_n[cab] && ca_ok ->
    ca_h = ab_h[cab * MAXH + ca_i];
    if
    :: HS(ca_h) == cr ->
      ca_t = HT(ca_h);
      ca_nx = HT(ab_h[cab * MAXH + (ca_i + 1) % ab_n[cab]]);
      if
      :: WAITS(ca_t, cr) && wseq[TS(ca_t, cr)] == HW(ca_h) ->
        pinw[cab] = pinw[cab] | BIT(TS(ca_t, cr));
        blockers(ca_t, cr);
        if
        :: HAS(bk_b, ca_nx) -> frz[cab] = frz[cab] | BIT(TS(ca_nx, cr))
        :: else -> ca_ok = 0
        fi
      :: else -> ca_ok = 0
      fi
    :: else -> skip
    fi;
    ca_i++
  :: else -> break
  od;
  if
  :: !ca_ok ->
    pinw[cab] = pinw[cab] & ~SHM(cr);
    frz[cab] = frz[cab] & ~SHM(cr)
  :: else -> skip
  fi;
  ca_i = 0;
  ca_h = 0;
  ca_t = 0;
  ca_nx = 0
}

inline drop_pins(ur, ua) {
#ifdef BUG_ONE_PIN
  /* A pin is one deadline per wait: lifting a's lifts every abort's. */
  up_m = pinw[ua] & SHM(ur);
  pinw[0] = pinw[0] & ~up_m;
  pinw[1] = pinw[1] & ~up_m;
  pinw[2] = pinw[2] & ~up_m;
  pinw[3] = pinw[3] & ~up_m;
  up_m = 0;
#endif
  pinw[ua] = pinw[ua] & ~SHM(ur);
  frz[ua] = frz[ua] & ~SHM(ur)
}

/* unpin_at(r, a): a's pins and freezes at r go. A victim whose abort gave
 * way to one of those pins probes again: its cycle is found again. */
inline unpin_at(ur, ua) {
  if
  :: (pinw[ua] & gw & SHM(ur)) != 0 ->
    gw = gw & ~(pinw[ua] & SHM(ur));
    EVENT(ur)
  :: else -> skip
  fi;
  drop_pins(ur, ua)
}


/* give_up(a, V): UNPIN to every shard asked, a's own pins at V go. V's
 * waiters probe again (the cycle, if it stands, is found again), unless gev
 * is 0: after giving way to another abort's pin (the victim probes when
 * that pin goes: gw), or for want of a link or a shard (they probe when it
 * is back: a HELLO, a resume). */
#define give_up(ga, gv) give_up_ev(ga, gv, 1)
inline give_up_ev(ga, gv, gev) {
  printf("s%d: abort %d ends\n", gv, ga);
  gu_r = 0;
  do
  :: gu_r < NS ->
    if
    :: HAS(ab_ask[ga], gu_r) && HAS(lupm, LK(gv, gu_r)) ->
      QSEND(LK(gv, gu_r), M_UNPIN, ga, 0, 0, 0, 0)
    :: else -> skip
    fi;
    gu_r++
  :: else -> break
  od;
  unpin_at(gv, ga);
  if
  :: gev -> EVENT(gv)
  :: else -> skip
  fi;
  ab_st[ga] = AB_DONE;
  gu_r = 0
}

/* Step 7's answer: -DEADLOCK to the victim, if it still listens. */
inline answer_victim(fa, fv) {
  fi_t = ab_vic[fa];
  if
  :: LISTENS(fi_t, fv) && wseq[TS(fi_t, fv)] == ab_vw[fa] && !WAITS(fi_t, fv) ->
    ans[fi_t] = A_DEADLOCK
  :: else -> skip
  fi;
  fi_t = 0
}

/* Step 7: every RELEASE answered: the answer, then UNPIN. */
inline finish(fa, fv) {
#ifndef BUG_ANSWER_BEFORE_RELEASED
  answer_victim(fa, fv);
#endif
  give_up(fa, fv)
}

/* RELEASE for abort a to every shard of its victim's HELDAT with a link. */
inline send_releases(sra, srv) {
  te_r = 0;
  do
  :: te_r < NS ->
    if
    :: HAS(ab_rw[sra], te_r) && HAS(lupm, LK(srv, te_r)) ->
      QSEND(LK(srv, te_r), M_RELEASE, sra, ab_vic[sra], 0, 0, 0)
    :: else -> skip
    fi;
    te_r++
  :: else -> break
  od;
  te_r = 0
}

/* (d) One victim per cycle: no other abort that took effect named the same
 * waits. */
inline one_victim(oa) {
  ov_b = 0;
  do
  :: ov_b < MAXAB ->
    if
    :: ov_b != oa && HAS(abfx, ov_b) && ab_n[ov_b] == ab_n[oa] ->
      ov_same = 1;
      ov_i = 0;
      do
      :: ov_i < ab_n[oa] ->
        ov_f = 0;
        ov_j = 0;
        do
        :: ov_j < ab_n[ov_b] ->
          if
          :: ab_h[ov_b * MAXH + ov_j] == ab_h[oa * MAXH + ov_i] -> ov_f = 1
          :: else -> skip
          fi;
          ov_j++
        :: else -> break
        od;
        if
        :: !ov_f -> ov_same = 0
        :: else -> skip
        fi;
        ov_i++
      :: else -> break
      od;
      assert(!ov_same)
    :: else -> skip
    fi;
    ov_b++
  :: else -> break
  od;
  ov_b = 0; ov_i = 0; ov_j = 0; ov_same = 0; ov_f = 0
}

/*
 * take_effect(a, V): every shard said :1 (step 5). Within the bound (the
 * clock says so, not only a timer), unless another abort in progress pins
 * the victim's wait, and if the engine can still end that wait: the abort
 * takes effect, then RELEASE (step 6).
 */
inline take_effect(ta, tv) {
  te_v = ab_vic[ta];
  te_pin = 0;
  te_b = 0;
  do
  :: te_b < MAXAB ->
    if
    :: te_b != ta && INPROG(te_b) && HAS(pinw[te_b], TS(te_v, tv)) -> te_pin = 1
    :: else -> skip
    fi;
    te_b++
  :: else -> break
  od;
#ifdef BUG_NO_PIN_CHECK
  te_pin = 0;
#endif
#ifdef BUG_BOUND_BY_TIMER
  if
  :: false -> skip
#else
  if
  :: HAS(ablate, ta) -> give_up_ev(ta, tv, !SLOWFOR(ta))
#endif
  :: else ->
    if
    :: te_pin -> gw = gw | BIT(TS(te_v, tv)); give_up_ev(ta, tv, 0)
    :: !te_pin && !(WAITS(te_v, tv) && wseq[TS(te_v, tv)] == ab_vw[ta]) ->
      give_up(ta, tv) /* the engine's abort fails: the wait is over */
    :: else ->
      /* (b) No phantom: every edge of the cycle stands now. */
      te_i = 0;
      do
      :: te_i < ab_n[ta] ->
        hop_stands(HT(ab_h[ta * MAXH + te_i]), HS(ab_h[ta * MAXH + te_i]),
                   HW(ab_h[ta * MAXH + te_i]),
                   HT(ab_h[ta * MAXH + (te_i + 1) % ab_n[ta]]));
        assert(hs_ok);
        te_i++
      :: else -> break
      od;
      printf("s%d: abort %d takes effect, victim t%d\n", tv, ta, te_v);
      one_victim(ta);
      SETB(abfx, ta, 1);
      ab_rw[ta] = heldat[TS(te_v, tv)];
      ab_rd[ta] = 0;
      SETB(abslow, ta, HAS(abslow, ta) || SLOWFOR(ta));
#ifdef BUG_RELEASE_BEFORE_ABORT
      ab_st[ta] = AB_REL0;
      send_releases(ta, tv);
      if
      :: ab_rw[ta] == 0 -> finish0(ta, tv)
      :: else -> skip
      fi
#else
      abort_wait(te_v, tv);
      release_at(te_v, tv);
      ab_st[ta] = AB_REL;
#ifdef BUG_ANSWER_BEFORE_RELEASED
      answer_victim(ta, tv);
#endif
      send_releases(ta, tv);
      if
      :: ab_rw[ta] == 0 -> finish(ta, tv)
      :: else -> skip
      fi
#endif
    fi
  fi;
  te_v = 0; te_b = 0; te_i = 0; te_pin = 0
}

#ifdef BUG_RELEASE_BEFORE_ABORT
/* The old order: every RELEASE answered, then the abort at V, which finds
 * nothing to abort if the wait was granted meanwhile. */
inline finish0(fa, fv) {
  if
  :: WAITS(ab_vic[fa], fv) && wseq[TS(ab_vic[fa], fv)] == ab_vw[fa] ->
    abort_wait(ab_vic[fa], fv);
    release_at(ab_vic[fa], fv);
    answer_victim(fa, fv)
  :: else -> skip
  fi;
  give_up(fa, fv)
}
#endif

/* Is any shard stopped, or any link down, now? An abort that runs then is
 * slow: its bounds may pass. */


/*
 * gc_aborts: a slot whose abort is over and that nothing names any more (no
 * pin, no freeze, no message) is free again, its fields cleared: an (origin,
 * id) that can never be seen again is as good as a new one.
 */
inline gc_aborts() {
  gc_a = 0;
  do
  :: gc_a < MAXAB ->
    if
    :: ab_st[gc_a] == AB_DONE && pinw[gc_a] == 0 && frz[gc_a] == 0 && ab_ref[gc_a] == 0 ->
      ab_st[gc_a] = AB_FREE;
      ab_o[gc_a] = 0; ab_vic[gc_a] = 0; ab_vw[gc_a] = 0; ab_n[gc_a] = 0;
      ab_h[gc_a * MAXH] = 0; ab_h[gc_a * MAXH + 1] = 0; ab_h[gc_a * MAXH + 2] = 0;
      ab_ask[gc_a] = 0; ab_yes[gc_a] = 0; ab_rw[gc_a] = 0; ab_rd[gc_a] = 0;
      SETB(abslow, gc_a, 0); SETB(ablate, gc_a, 0); SETB(abfx, gc_a, 0);
      reldone[0] = reldone[0] & ~BIT(gc_a);
      reldone[1] = reldone[1] & ~BIT(gc_a);
      reldone[2] = reldone[2] & ~BIT(gc_a)
    :: else -> skip
    fi;
    gc_a++
  :: else -> break
  od;
  gc_a = 0
}

/*
 * start_abort(V): step 4 begins at the victim's shard for the cycle in
 * sa_h[0..sa_n), victim sa_v with wseq sa_vw: unless the victim does not
 * wait there with that wseq or is being aborted already. V pins its own
 * hops, then asks every other shard of the cycle, each once.
 */
inline start_abort(sv) {
  sa_ok = WAITS(sa_v, sv) && wseq[TS(sa_v, sv)] == sa_vw;
  sa_i = 0;
  do
  :: sa_i < MAXAB ->
    if
    :: INPROG(sa_i) && ab_o[sa_i] == sv && ab_vic[sa_i] == sa_v -> sa_ok = 0
    :: else -> skip
    fi;
    sa_i++
  :: else -> break
  od;
  if
  :: sa_ok ->
    gc_aborts();
    sa_a = 0;
    do
    :: sa_a < MAXAB && ab_st[sa_a] != AB_FREE -> sa_a++
    :: else -> break
    od;
    /* Room on V's links to the shards it will ask, for this abort's
     * CONFIRM, RELEASE and UNPIN. */
    sa_i = 0;
    do
    :: sa_i < sa_n ->
      if
      :: HS(sa_h[sa_i]) != sv && len(lq[LK(sv, HS(sa_h[sa_i]))]) > LQ - 4 -> sa_a = MAXAB
      :: else -> skip
      fi;
      sa_i++
    :: else -> break
    od;
    if
    :: sa_a == MAXAB ->
      /* Every slot is taken, or a link is full: the model's bounds. The
       * ABORT is as lost, and V's waiters probe again. */
      sa_ok = 0;
      EVENT(sv)
    :: else -> skip
    fi
  :: else -> skip
  fi;
  if
  :: sa_ok ->
    printf("s%d: abort %d of t%d begins\n", sv, sa_a, sa_v);
    ab_st[sa_a] = AB_CONF;
    ab_o[sa_a] = sv;
    ab_vic[sa_a] = sa_v;
    ab_vw[sa_a] = sa_vw;
    ab_n[sa_a] = sa_n;
    sa_i = 0;
    do
    :: sa_i < sa_n -> ab_h[sa_a * MAXH + sa_i] = sa_h[sa_i]; sa_i++
    :: else -> break
    od;
    confirm_at(sv, sa_a);
    if
    :: !ca_ok -> ab_st[sa_a] = AB_DONE
    :: else ->
      sa_i = 0;
      do
      :: sa_i < sa_n ->
        if
        :: HS(sa_h[sa_i]) != sv -> ab_ask[sa_a] = ab_ask[sa_a] | BIT(HS(sa_h[sa_i]))
        :: else -> skip
        fi;
        sa_i++
      :: else -> break
      od;
#ifdef BUG_CONFIRM_SKIPS_SHARD
      /* The shard at the highest index is never asked (bool asked[64]). */
      if
      :: HAS(ab_ask[sa_a], 2) -> ab_ask[sa_a] = ab_ask[sa_a] & ~BIT(2)
      :: !HAS(ab_ask[sa_a], 2) && HAS(ab_ask[sa_a], 1) -> ab_ask[sa_a] = ab_ask[sa_a] & ~BIT(1)
      :: else -> ab_ask[sa_a] = ab_ask[sa_a] & ~BIT(0)
      fi;
#endif
      SETB(abslow, sa_a, SLOWFOR(sa_a));
      sa_fail = 0;
      sa_r = 0;
      do
      :: sa_r < NS ->
        if
        :: HAS(ab_ask[sa_a], sa_r) && HAS(lupm, LK(sv, sa_r)) ->
          QSEND(LK(sv, sa_r), M_CONFIRM, sa_a, 0, 0, 0, 0)
        :: HAS(ab_ask[sa_a], sa_r) && !HAS(lupm, LK(sv, sa_r)) -> sa_fail = 1
        :: else -> skip
        fi;
        sa_r++
      :: else -> break
      od;
      if
      :: sa_fail -> give_up_ev(sa_a, sv, 0) /* probed again once the link is back */
      :: !sa_fail && ab_ask[sa_a] == 0 -> take_effect(sa_a, sv)
      :: else -> skip
      fi
    fi
  :: else -> skip
  fi;
  sa_i = 0; sa_r = 0; sa_a = 0; sa_ok = 0; sa_fail = 0
}

/*
 * closed(r, n): the probe at r closed the cycle pr_path[0..n): step 3 picks
 * the victim (lowest PRIORITY, then youngest gid) and sends ABORT to its
 * shard, or starts the abort here. A cycle inside one shard is its own
 * detector's (not modelled).
 */
inline closed(cr, cn) {
  cy_loc = 1;
  cy_vh = pr_path[0];
  cy_i = 0;
  do
  :: cy_i < cn ->
    if
    :: HS(pr_path[cy_i]) != cr -> cy_loc = 0
    :: else -> skip
    fi;
    if
    :: prio[HT(pr_path[cy_i])] < prio[HT(cy_vh)] ||
       (prio[HT(pr_path[cy_i])] == prio[HT(cy_vh)] && HT(pr_path[cy_i]) > HT(cy_vh)) ->
      cy_vh = pr_path[cy_i]
    :: else -> skip
    fi;
    cy_i++
  :: else -> break
  od;
  if
  :: cy_loc -> skip
  :: !cy_loc && HS(cy_vh) == cr ->
    sa_v = HT(cy_vh);
    sa_vw = HW(cy_vh);
    sa_n = cn;
    cy_i = 0;
    do
    :: cy_i < MAXH -> sa_h[cy_i] = (cy_i < cn -> pr_path[cy_i] : 0); cy_i++
    :: else -> break
    od;
    start_abort(cr)
  :: !cy_loc && HS(cy_vh) != cr && HAS(lupm, LK(cr, HS(cy_vh))) ->
    cy_h1 = (cn > 1 -> pr_path[1] : 0);
    cy_h2 = (cn > 2 -> pr_path[2] : 0);
    if
    :: lq[LK(cr, HS(cy_vh))]??[eval(MSG(M_ABORT, HT(cy_vh), HW(cy_vh))), eval(pr_path[0]),
         eval(cy_h1), eval(cy_h2)] ->
      skip /* the same ABORT waits on that link already: V would see both alike */
    :: else ->
      QSEND(LK(cr, HS(cy_vh)), M_ABORT, HT(cy_vh), HW(cy_vh), pr_path[0], cy_h1, cy_h2)
    fi;
    cy_h1 = 0;
    cy_h2 = 0
  :: else -> skip /* the link is down: lost */
  fi;
  cy_i = 0; cy_vh = 0; cy_loc = 0
}

/*
 * probe_from(s, t): step 2, from t's wait at s. The probe follows every edge
 * of t at s: to a txn that waits at s too, and to each shard where a txn
 * waited for is blocked (an entry), where it goes on if that txn still waits
 * there with the entry's wseq (else probes_stale), and so on; an edge back
 * to t closes a cycle. A txn on the path already is a cycle without t: left
 * to its own members.
 *
 * The model walks the whole path in one step, over the state of that
 * moment: a probe's messages are not modelled. A hop into a shard that is
 * stopped, or over a link that is down, is lost. What a real probe sees
 * that this one cannot (edges that stood at different moments) reaches the
 * victim's shard as an ABORT for a cycle that no longer stands, which the
 * ABORT messages of the model cover: they are delayed and reordered at
 * will, and the confirmation is what must refuse them.
 */
inline probe_from(ps, pt) {
  pw_top = 1;
  pw_e[0] = pt;
  pw_x[0] = ps;
  pw_n[0] = 0;
  pr_init = pt;
  do
  :: pw_top > 0 ->
    pw_top--;
    pr_cur = pw_e[pw_top];
    pr_x = pw_x[pw_top];
    pr_n = pw_n[pw_top];
    pr_i = 0;
    do
    :: pr_i < pr_n -> pr_path[pr_i] = pw_h[pw_top * MAXH + pr_i]; pr_i++
    :: else -> break
    od;
    pr_path[pr_n] = HOP(pr_cur, pr_x, wseq[TS(pr_cur, pr_x)]);
    blockers(pr_cur, pr_x);
    pr_bl = bk_b;
#ifdef BUG_EDGE_CAP
    /* Only the first blocker is followed. */
    if
    :: pr_bl & 1 -> pr_bl = 1
    :: (pr_bl & 3) == 2 -> pr_bl = 2
    :: else -> pr_bl = pr_bl & 4
    fi;
#endif
    pr_b = 0;
    do
    :: pr_b < NT ->
      if
      :: HAS(pr_bl, pr_b) && pr_b == pr_init -> closed(pr_x, pr_n + 1)
      :: HAS(pr_bl, pr_b) && pr_b != pr_init && pr_n + 2 <= MAXH ->
        pr_on = 0;
        pr_i = 0;
        do
        :: pr_i <= pr_n ->
          if
          :: HT(pr_path[pr_i]) == pr_b -> pr_on = 1
          :: else -> skip
          fi;
          pr_i++
        :: else -> break
        od;
        pr_s = 0;
        do
        :: !pr_on && pr_s < nsh ->
          if
          :: (pr_s == pr_x && WAITS(pr_b, pr_x)) ||
             (pr_s != pr_x && ENT(pr_x, TS(pr_b, pr_s)) != 0 && HAS(lupm, LK(pr_x, pr_s)) &&
              HAS(upm, pr_s) && WAITS(pr_b, pr_s) && wseq[TS(pr_b, pr_s)] == ENT(pr_x, TS(pr_b, pr_s))) ->
            assert(pw_top < PWN);
            pw_e[pw_top] = pr_b;
            pw_x[pw_top] = pr_s;
            pw_n[pw_top] = pr_n + 1;
            pr_i = 0;
            do
            :: pr_i <= pr_n -> pw_h[pw_top * MAXH + pr_i] = pr_path[pr_i]; pr_i++
            :: else -> break
            od;
            pw_top++
          :: else -> skip
          fi;
          pr_s++
        :: else -> break
        od
      :: else -> skip
      fi;
      pr_b++
    :: else -> break
    od
  :: else -> break
  od;
  pw_top = 0; pr_cur = 0; pr_x = 0; pr_n = 0; pr_init = 0; pr_bl = 0; pr_b = 0;
  pr_i = 0; pr_s = 0; pr_on = 0
}

/*
 * run_probes: the waits that something concerned probe at once, at the end
 * of the step that changed it (a BLOCKED that arrives makes R's waiters
 * probe at once; the periodic probes of the protocol are, in the model,
 * those that follow each change at the waiter's shard). A waiter at a shard
 * that is stopped probes when it resumes.
 */
#define UPMASK ((HAS(upm, 0) -> SHM(0) : 0) | (HAS(upm, 1) -> SHM(1) : 0) | (HAS(upm, 2) -> SHM(2) : 0))
inline run_probes() {
  rp_n = 0;
  do
  :: rp_n < 4 && (reprobe & UPMASK) != 0 ->
    rp_ts = 0;
    do
    :: rp_ts < NTS ->
      if
      :: HAS(reprobe, rp_ts) && HAS(upm, rp_ts % NS) ->
        reprobe = reprobe & ~BIT(rp_ts);
        probe_from(rp_ts % NS, rp_ts / NS)
      :: else -> skip
      fi;
      rp_ts++
    :: else -> break
    od;
    rp_n++
  :: else -> break
  od;
  rp_n = 0;
  rp_ts = 0
}

/* ---- A shard's loop --------------------------------------------------------- */


/* The confirmation bound passed (V's timer). */
#define CONF_LATE(a, s) (ab_st[a] == AB_CONF && ab_o[a] == (s) && HAS(ablate, a))
/* A pin's bound passed at s: its abort is over (UNPIN lost or on its way),
 * or slow (no renewal came in time). */
#define LAPSE(a, s) ((ab_st[a] == AB_DONE || HAS(ablate, a)) && ((pinw[a] | frz[a]) & SHM(s)) != 0)
/* A session whose end waited may end now. */
#ifdef BUG_NO_DEFER_END
#define END_DUE(t, s) (HAS(endm, TS(t, s)))
#else
#define END_DUE(t, s) (HAS(endm, TS(t, s)) && !HAS(ALLPIN | ALLFRZ, TS(t, s)))
#endif

#define W_Q 1    /* + peer: a question on the peer's link to s */
#define W_A 4    /* + peer: an answer on s's link to the peer */
#define W_LB 7   /* + peer: s learns its link to the peer broke */
#define W_RD 10  /* + peer: s dials the peer again */
#define W_PR 16  /* the waits of s with a probe left over (a fault's step) */
#define W_CL 19  /* + a: a's confirmation bound passed */
#define W_LP 23  /* + a: a's pins at s lapse */
#define W_EN 27  /* + t: t's session at s ends */
#define W_O 31   /* + peer: a question of a broken link from the peer, read late */

/* handle_question(s, p): a question on p's link to s, in m_*. */
inline handle_question(hs, hp) {
  printf("s%d gets q%d x%d y%d from s%d\n", hs, m_k, m_x, m_y, hp);
  if
  :: m_orph && (m_k == M_HELLO || m_k == M_BLOCKED || m_k == M_UNBLOCKED) ->
    skip /* of a link that is no longer p's: what it told is forgotten already */
  :: !m_orph && m_k == M_HELLO ->
    /* A new link: what p's earlier links told is forgotten. */
    sw_i = 0;
    do
    :: sw_i < NT -> SETENT(hs, TS(sw_i, hp), 0); sw_i++
    :: else -> break
    od;
    EVENT(hs)
  :: !m_orph && m_k == M_BLOCKED ->
    if
    :: ENT(hs, TS(m_x, hp)) != 0 ->
      SETENT(hs, TS(m_x, hp), m_y)
    :: else ->
      sw_n = 0;
      sw_i = 0;
      do
      :: sw_i < NT -> sw_n = sw_n + (ENT(hs, TS(sw_i, hp)) != 0 -> 1 : 0); sw_i++
      :: else -> break
      od;
      if
      :: sw_n < cap -> SETENT(hs, TS(m_x, hp), m_y)
#ifdef BUG_BLOCKED_DROPPED
      :: else -> skip /* dropped, and +OK */
#else
      :: else -> ASEND(LK(hp, hs), R_BUSY, m_x, m_y)
#endif
      fi
    fi;
    EVENT(hs)
  :: !m_orph && m_k == M_UNBLOCKED ->
#ifdef BUG_UNBLOCKED_ANY_SENDER
    /* Matched on (gid, wseq) alone: an entry of another shard goes too. */
    sw_i = 0;
    do
    :: sw_i < NS ->
      if
      :: ENT(hs, TS(m_x, sw_i)) == m_y -> SETENT(hs, TS(m_x, sw_i), 0)
      :: else -> skip
      fi;
      sw_i++
    :: else -> break
    od;
#else
    if
    :: ENT(hs, TS(m_x, hp)) == m_y -> SETENT(hs, TS(m_x, hp), 0)
    :: else -> skip
    fi;
#endif
    /* Its +OK matters only to a shard that heard -BUSY from here. */
    sw_n = 0;
    sw_i = 0;
    do
    :: sw_i < NT -> sw_n = sw_n | busy[TS(sw_i, hp)]; sw_i++
    :: else -> break
    od;
    sw_i = len(la[LK(hp, hs)]);
    if
    :: HAS(sw_n, hs) || sw_i > 0 -> ASEND(LK(hp, hs), R_OKU, m_x, m_y)
    :: else -> skip
    fi;
    EVENT(hs)
  :: m_k == M_ABORT ->
    sa_v = m_x;
    sa_vw = m_y;
    sa_h[0] = m_h0;
    sa_h[1] = m_h1;
    sa_h[2] = m_h2;
    sa_n = (m_h0 != 0 -> 1 : 0) + (m_h1 != 0 -> 1 : 0) + (m_h2 != 0 -> 1 : 0);
    start_abort(hs);
    sa_v = 0; sa_vw = 0; sa_n = 0; sa_h[0] = 0; sa_h[1] = 0; sa_h[2] = 0
  :: m_k == M_CONFIRM ->
    confirm_at(hs, m_x);
    if
    :: ca_ok -> ASEND(LK(hp, hs), R_YES, m_x, 0)
    :: else -> ASEND(LK(hp, hs), R_NO, m_x, 0)
    fi;
    ca_ok = 0
  :: m_k == M_UNPIN -> unpin_at(hs, m_x)
  :: m_k == M_RELEASE ->
#ifndef BUG_RELEASE_TWICE
    if
    :: !HAS(reldone[hs], m_x) ->
#endif
      reldone[hs] = reldone[hs] | BIT(m_x);
      rl_t = m_y;
      rl_took = 0; /* the keys taken, a bit each */
      rl_k = 0;
      do
      :: rl_k < NK ->
        if
        :: home[rl_k] == hs && HAS(hold[rl_k], rl_t) -> rl_took = rl_took | BIT(rl_k)
        :: else -> skip
        fi;
        rl_k++
      :: else -> break
      od;
      /* (a) A client at work never loses a key it believes it holds. */
      assert(!(cst[rl_t] == C_RUN && (rl_took & bel[rl_t]) != 0));
      if
      :: rl_took != 0 -> SETB(relg, rl_t, 1)
      :: else -> skip
      fi;
      if
      :: WAITS(rl_t, hs) ->
        /* A wait a misbehaving client made here ends too. */
        if
        :: LISTENS(rl_t, hs) -> ans[rl_t] = A_DEADLOCK
        :: else -> skip
        fi;
        abort_wait(rl_t, hs)
      :: else -> skip
      fi;
      release_at(rl_t, hs);
      if
      :: HAS(sopm, TS(rl_t, hs)) -> SETB(markm, TS(rl_t, hs), 1)
      :: else -> skip
      fi;
      rl_t = 0; rl_took = 0; rl_k = 0;
#ifndef BUG_RELEASE_TWICE
    :: else -> skip
    fi;
#endif
    ASEND(LK(hp, hs), R_REL, m_x, 0)
  fi
}

/* handle_answer(s, p): an answer on s's link to p, in m_k, m_x, m_y. */
inline handle_answer(hs, hp) {
  printf("s%d gets a%d x%d y%d from s%d\n", hs, m_k, m_x, m_y, hp);
  if
  :: m_k == R_BUSY ->
    if
    :: WAITS(m_x, hs) && wseq[TS(m_x, hs)] == m_y && HAS(told[TS(m_x, hs)], hp) ->
      told[TS(m_x, hs)] = told[TS(m_x, hs)] & ~BIT(hp);
      busy[TS(m_x, hs)] = busy[TS(m_x, hs)] | BIT(hp)
    :: else -> skip
    fi
  :: m_k == R_OKU ->
    /* p has room again: the waits it answered -BUSY say it again (the
     * protocol's next probe tick). */
    sw_n = 0;
    do
    :: sw_n < NT ->
      if
      :: HAS(busy[TS(sw_n, hs)], hp) ->
        busy[TS(sw_n, hs)] = busy[TS(sw_n, hs)] & ~BIT(hp);
        send_blocked(sw_n, hs)
      :: else -> skip
      fi;
      sw_n++
    :: else -> break
    od
  :: m_k == R_YES ->
    if
    :: ab_st[m_x] == AB_CONF ->
      ab_yes[m_x] = ab_yes[m_x] | BIT(hp);
      if
      :: ab_yes[m_x] == ab_ask[m_x] -> take_effect(m_x, hs)
      :: else -> skip
      fi
    :: else -> skip
    fi
  :: m_k == R_NO ->
    if
    :: ab_st[m_x] == AB_CONF -> give_up(m_x, hs)
    :: else -> skip
    fi
  :: m_k == R_REL ->
    if
    :: ab_st[m_x] == AB_REL || ab_st[m_x] == AB_REL0 ->
      ab_rd[m_x] = ab_rd[m_x] | BIT(hp);
      if
      :: ab_rd[m_x] == ab_rw[m_x] ->
#ifdef BUG_RELEASE_BEFORE_ABORT
        finish0(m_x, hs)
#else
        finish(m_x, hs)
#endif
      :: else -> skip
      fi
    :: else -> skip
    fi
  fi
}

/* s learns that its link to p broke: every question unanswered on it fails. */
inline learn_break(ls, lp) {
  sw_i = 0;
  do
  :: sw_i < NT ->
#ifndef BUG_TOLD_WHEN_DROPPED
    told[TS(sw_i, ls)] = told[TS(sw_i, ls)] & ~BIT(lp);
#endif
    busy[TS(sw_i, ls)] = busy[TS(sw_i, ls)] & ~BIT(lp);
    sw_i++
  :: else -> break
  od;
  sw_i = 0;
  do
  :: sw_i < MAXAB ->
    if
    :: ab_st[sw_i] == AB_CONF && ab_o[sw_i] == ls && HAS(ab_ask[sw_i], lp) &&
       !HAS(ab_yes[sw_i], lp) -> give_up(sw_i, ls)
    :: else -> skip
    fi;
    sw_i++
  :: else -> break
  od;
  SETB(lbrm, LK(ls, lp), 0)
}

/* s dials p again: HELLO, then every RELEASE not yet answered. */
inline redial(ls, lp) {
  SETB(lupm, LK(ls, lp), 1);
  QSEND(LK(ls, lp), M_HELLO, 0, 0, 0, 0, 0);
  sw_n = 0;
  do
  :: sw_n < NT -> send_blocked(sw_n, ls); sw_n++
  :: else -> break
  od;
  sw_i = 0;
  do
  :: sw_i < MAXAB ->
    if
    :: (ab_st[sw_i] == AB_REL || ab_st[sw_i] == AB_REL0) && ab_o[sw_i] == ls &&
       HAS(ab_rw[sw_i], lp) && !HAS(ab_rd[sw_i], lp) ->
      QSEND(LK(ls, lp), M_RELEASE, sw_i, ab_vic[sw_i], 0, 0, 0)
    :: else -> skip
    fi;
    sw_i++
  :: else -> break
  od
}


/* t's session at s ends, its end no longer held back. */
inline end_session(et, es) {
  if
  :: WAITS(et, es) -> abort_wait(et, es)
  :: else -> skip
  fi;
  release_at(et, es);
  SETB(sopm, TS(et, es), 0);
  SETB(endm, TS(et, es), 0);
  SETB(markm, TS(et, es), 0);
  EVENT(es)
}

#define QG(s, p) :: HAS(upm, s) && (p) != (s) && (p) < nsh && nempty(lq[LK(p, s)]) -> w = W_Q + (p)
#define AG(s, p) :: HAS(upm, s) && (p) != (s) && (p) < nsh && nempty(la[LK(s, p)]) -> w = W_A + (p)
#define OG(s, p) :: HAS(upm, s) && (p) != (s) && (p) < nsh && nempty(lqo[LK(p, s)]) -> w = W_O + (p)
#define SG(c) :: HAS(upm, s) && (c) ->

#define CLEAR m_k = 0; m_x = 0; m_y = 0; m_h0 = 0; m_h1 = 0; m_h2 = 0; \
  sw_i = 0; sw_n = 0; w = 0; i = 0

proctype shard(byte s) {
  byte w, i;
end:
  do
  :: atomic {
      if
      QG(s, 0)
      QG(s, 1)
      QG(s, 2)
      AG(s, 0)
      AG(s, 1)
      AG(s, 2)
      OG(s, 0)
      OG(s, 1)
      OG(s, 2)
      SG(s != 0 && HAS(lbrm, LK(s, 0))) w = W_LB + 0
      SG(s != 1 && HAS(lbrm, LK(s, 1))) w = W_LB + 1
      SG(s != 2 && HAS(lbrm, LK(s, 2))) w = W_LB + 2
      SG(s != 0 && 0 < nsh && !HAS(lupm, LK(s, 0)) && !HAS(lbrm, LK(s, 0))) w = W_RD + 0
      SG(s != 1 && 1 < nsh && !HAS(lupm, LK(s, 1)) && !HAS(lbrm, LK(s, 1))) w = W_RD + 1
      SG(s != 2 && 2 < nsh && !HAS(lupm, LK(s, 2)) && !HAS(lbrm, LK(s, 2))) w = W_RD + 2
      SG((reprobe & SHM(s)) != 0) w = W_PR
      SG(CONF_LATE(0, s)) w = W_CL + 0
      SG(CONF_LATE(1, s)) w = W_CL + 1
      SG(CONF_LATE(2, s)) w = W_CL + 2
      SG(CONF_LATE(3, s)) w = W_CL + 3
      SG(LAPSE(0, s)) w = W_LP + 0
      SG(LAPSE(1, s)) w = W_LP + 1
      SG(LAPSE(2, s)) w = W_LP + 2
      SG(LAPSE(3, s)) w = W_LP + 3
      SG(END_DUE(0, s)) w = W_EN + 0
      SG(END_DUE(1, s)) w = W_EN + 1
      SG(END_DUE(2, s)) w = W_EN + 2
      fi;
      if
      :: (w >= W_Q && w < W_A) || w >= W_O ->
        d_step {
          if
          :: w >= W_O ->
            i = w - W_O;
            lqo[LK(i, s)]?m_hd, m_h0, m_h1, m_h2;
            m_orph = 1
          :: else ->
            i = w - W_Q;
            lq[LK(i, s)]?m_hd, m_h0, m_h1, m_h2
          fi;
          UNMSG;
          if :: QREF(m_k) -> ab_ref[m_x]-- :: else -> skip fi;
          handle_question(s, i);
          m_orph = 0;
          CLEAR
        }
      :: w >= W_A && w < W_LB ->
        d_step {
          i = w - W_A;
          la[LK(s, i)]?m_hd;
          UNMSG;
          if :: AREF(m_k) -> ab_ref[m_x]-- :: else -> skip fi;
          handle_answer(s, i);
          CLEAR
        }
      :: w >= W_LB && w < W_RD -> d_step { learn_break(s, w - W_LB); CLEAR }
      :: w >= W_RD && w < W_PR -> d_step { redial(s, w - W_RD); CLEAR }
      :: w >= W_PR && w < W_CL -> d_step { CLEAR }
      :: w >= W_CL && w < W_LP ->
        /* V's timer: probed again when the fault that made it late is
         * over (a resume, a new link), or now if it is over already. */
        d_step { i = w - W_CL; give_up_ev(i, s, !SLOWFOR(i)); CLEAR }
      :: w >= W_LP && w < W_EN -> d_step { unpin_at(s, w - W_LP); CLEAR }
      :: w >= W_EN && w < W_O -> d_step { end_session(w - W_EN, s); CLEAR }

      fi;
      /* What changed makes the waiters concerned probe; what is over is
       * collected. */
      d_step { run_probes(); gc_aborts() }
    }
  od
}

/* ---- Clients ------------------------------------------------------------------ */

/* The client may send t a request at s: s is not stopped, t's session there
 * is not frozen (its requests wait), and not still ending. */
#define CAN_ASK(t, s) (HAS(upm, s) && !HAS(ALLFRZ, TS(t, s)) && !HAS(endm, TS(t, s)))
#define STEP(t) plan[(t) * NOPS + cop[t]]
#define STEPSH(t) home[OPK(STEP(t))]
/* Its give-up: t's LOCK has a deadline, and its shard cannot answer in time
 * (stopped, or an abort of it is slow). The client drops the session. */
#define LATEW(a, t) (INPROG(a) && HAS(ablate, a) && \
  ((ab_vic[a] == (t) && ab_o[a] == cws[t]) || HAS(pinw[a], TS(t, cws[t]))))
#define LATE_ANY(t) (LATEW(0, t) || LATEW(1, t) || LATEW(2, t) || LATEW(3, t))
#define GIVEUP_OK(t) (cst[t] == C_WAIT && dl[t] && \
  (!HAS(upm, cws[t]) || LATE_ANY(t)))

/* The client checks what it believes before each step: (a). */
inline check_beliefs(ct) {
  sw_i = 0;
  do
  :: sw_i < NK ->
    assert(!HAS(bel[ct], sw_i) || HAS(hold[sw_i], ct));
    sw_i++
  :: else -> break
  od;
  sw_i = 0
}

/* What follows a client's step at once: a plan done ends in C_HOLD or
 * C_FIN; a client that gave everything back is done, or tries again. */
inline settle(ct) {
  if
  :: cst[ct] == C_RUN && cop[ct] == nops[ct] ->
    check_beliefs(ct);
    cst[ct] = (eternal[ct] -> C_HOLD : C_FIN)
  :: else -> skip
  fi;
  if
  :: (cst[ct] == C_FIN || cst[ct] == C_FAIL) && bel[ct] == 0 ->
    SETB(relg, ct, 0);
    cop[ct] = 0;
    if
    :: cst[ct] == C_FAIL && tries[ct] > 0 -> tries[ct]--; cst[ct] = C_RUN
    :: else -> cst[ct] = C_DONE
    fi
  :: else -> skip
  fi
}

proctype client(byte t) {
  byte w, k, s;
end:
  do
  :: atomic {
      if
      :: cst[t] == C_RUN && cop[t] < nops[t] && CAN_ASK(t, STEPSH(t)) -> w = 1
      :: cst[t] == C_WAIT && ans[t] != 0 -> w = 3
      :: GIVEUP_OK(t) -> w = 4
      :: (cst[t] == C_FIN || cst[t] == C_FAIL) && (bel[t] & keyat[0]) != 0 && CAN_ASK(t, 0) -> w = 5
      :: (cst[t] == C_FIN || cst[t] == C_FAIL) && (bel[t] & keyat[1]) != 0 && CAN_ASK(t, 1) -> w = 6
      :: (cst[t] == C_FIN || cst[t] == C_FAIL) && (bel[t] & keyat[2]) != 0 && CAN_ASK(t, 2) -> w = 7
      fi;
      d_step {
        printf("t%d step %d (op %d)\n", t, w, cop[t]);
        if
        :: w == 1 ->
          check_beliefs(t);
          k = OPK(STEP(t));
          s = home[k];
          if
          :: OPUNL(STEP(t)) ->
            if
            :: HAS(hold[k], t) ->
              hold[k] = hold[k] & ~BIT(t);
              if
              :: hold[k] == 0 -> SETB(hxm, k, 0)
              :: else -> skip
              fi;
              regrant(k);
              EVENT(s)
            :: else -> skip
            fi;
            bel[t] = bel[t] & ~BIT(k);
            cop[t]++
          :: else ->
            SETB(sopm, TS(t, s), 1);
            if
            :: HAS(markm, TS(t, s)) ->
              /* Its keys here went for a cross-shard abort. */
              SETB(markm, TS(t, s), 0);
              cst[t] = C_FAIL
            :: !HAS(markm, TS(t, s)) && ql[k] == 0 &&
               ((OPX(STEP(t)) && hold[k] == 0) || (!OPX(STEP(t)) && !(HAS(hxm, k) && hold[k] != 0))) ->
              assert(hold[k] == 0 || (!OPX(STEP(t)) && !HAS(hxm, k))); /* (a) */
              hold[k] = hold[k] | BIT(t);
              SETB(hxm, k, OPX(STEP(t)));
              bel[t] = bel[t] | BIT(k);
              cop[t]++
            :: else ->
              /* It waits: a new wseq, HELDAT what it believes it holds elsewhere. */
              q[k * QL + ql[k]] = t + 1;
              ql[k]++;
              wkey[TS(t, s)] = k + 1;
              SETB(wxm, TS(t, s), OPX(STEP(t)));
              wseq[TS(t, s)]++;
              assert(wseq[TS(t, s)] < 4);
              heldat[TS(t, s)] = 0;
              sw_i = 0;
              do
              :: sw_i < NK ->
                if
                :: HAS(bel[t], sw_i) && home[sw_i] != s ->
                  heldat[TS(t, s)] = heldat[TS(t, s)] | BIT(home[sw_i])
                :: else -> skip
                fi;
                sw_i++
              :: else -> break
              od;
              told[TS(t, s)] = 0;
              busy[TS(t, s)] = 0;
              waitmask = waitmask | BIT(TS(t, s));
              send_blocked(t, s);
              EVENT(s);
              cws[t] = s;
              cst[t] = C_WAIT
            fi
          fi
        :: w == 3 ->
          if
          :: ans[t] == A_GRANT ->
            bel[t] = bel[t] | BIT(OPK(STEP(t)));
            cop[t]++;
            cst[t] = C_RUN
          :: else -> cst[t] = C_FAIL
          fi;
          ans[t] = 0;
          cws[t] = 0
        :: w == 4 ->
          /* Its bound ran out: the session at that shard is dropped (its
           * keys there with it), the rest given back, ORDO_ELEASE. */
          SETB(endm, TS(t, cws[t]), 1);
          ans[t] = 0; /* an answer that came too late is not read */
          bel[t] = bel[t] & ~keyat[cws[t]];
          cws[t] = 0;
          cst[t] = C_FAIL;
#ifndef RETRY_AFTER_GIVEUP
          /* ordo_retry would try again with the same gid: see the header,
           * "What the model found". */
          tries[t] = 0;
#endif
          skip
        :: w >= 5 && w <= 7 ->
          s = w - 5;
          release_at(t, s);
          bel[t] = bel[t] & ~keyat[s]
        fi;
        settle(t);
        w = 0;
        k = 0;
        s = 0
      };
      d_step { run_probes(); gc_aborts() }
    }
  od
}

/* ---- Faults ------------------------------------------------------------------- */

/* The link a->b breaks: the answers on it are lost, and its questions too,
 * or (late) the peer reads them after all. */
inline break_link(ba, bb, late) {
  printf("FAULT: link s%d->s%d breaks (late %d)\n", ba, bb, late);
  SETB(lupm, LK(ba, bb), 0);
  SETB(lbrm, LK(ba, bb), 1);
  do
  :: nempty(lq[LK(ba, bb)]) -> lq[LK(ba, bb)]?m_hd, m_h0, m_h1, m_h2;
    if
    :: late -> assert(nfull(lqo[LK(ba, bb)])); lqo[LK(ba, bb)]!m_hd, m_h0, m_h1, m_h2
    :: else ->
      UNMSG;
      if :: QREF(m_k) -> ab_ref[m_x]-- :: else -> skip fi
    fi
  :: empty(lq[LK(ba, bb)]) -> break
  od;
  do
  :: nempty(la[LK(ba, bb)]) -> la[LK(ba, bb)]?m_hd;
    UNMSG;
    if :: AREF(m_k) -> ab_ref[m_x]-- :: else -> skip fi
  :: empty(la[LK(ba, bb)]) -> break
  od;
  m_hd = 0; m_k = 0; m_x = 0; m_y = 0; m_h0 = 0; m_h1 = 0; m_h2 = 0
}

/* Every abort running now is slow. */
inline all_slow() {
  sw_i = 0;
  do
  :: sw_i < MAXAB -> SETB(abslow, sw_i, ((INPROG(sw_i) && SLOWFOR(sw_i)) -> 1 : HAS(abslow, sw_i))); sw_i++
  :: else -> break
  od;
  sw_i = 0
}

/* The sender learns of the break at once (a stopped sender, when it
 * resumes): every question unanswered on that link fails. */
inline break_learn(ba, bb, late) {
  break_link(ba, bb, late);
  if
  :: HAS(upm, ba) -> learn_break(ba, bb)
  :: else -> skip
  fi
}
/* The fault process picks a fault (F_*) and its shards or txn, then does
 * it in one step: each kind's code once. */
#define BRK(a, b) :: nfault > 0 && (fmask & F_BREAK) && (a) < nsh && (b) < nsh && \
  HAS(lupm, LK(a, b)) -> fk = F_BREAK; fa = a; fb = b
#define BRKL(a, b) :: nfault > 0 && (fmask & F_LATE) && (a) < nsh && (b) < nsh && \
  HAS(lupm, LK(a, b)) -> fk = F_LATE; fa = a; fb = b
#define PART(a, b) :: nfault > 0 && (fmask & F_PART) && (a) < nsh && (b) < nsh && \
  HAS(lupm, LK(a, b)) && HAS(lupm, LK(b, a)) -> fk = F_PART; fa = a; fb = b
#define STOP(a) :: nfault > 0 && (fmask & F_STOP) && (a) < nsh && HAS(upm, a) -> \
  fk = F_STOP; fa = a
#define RESUME(a) :: (a) < nsh && !HAS(upm, a) -> fk = FX_RESUME; fa = a
#define CRASH(t) :: nfault > 0 && (fmask & F_CRASH) && (t) < ntx && \
  cst[t] != C_DONE && cst[t] != C_GONE -> fk = F_CRASH; fa = t
#define TMO(t, s) :: nfault > 0 && (fmask & F_TIMEOUT) && dl[t] && HAS(upm, s) && \
  WAITS(t, s) && !HAS(ALLPIN, TS(t, s)) -> fk = F_TIMEOUT; fa = t; fb = s
#define LATE(a) :: INPROG(a) && HAS(abslow, a) && !HAS(ablate, a) -> fk = FX_LATE; fa = a
#define FX_RESUME 64
#define FX_LATE 128
#define FX_NOMORE 129

/* A client dies (or its lease runs out): each of its sessions ends, when
 * nothing holds the end back. */
inline crash(ct) {
  printf("FAULT: client t%d dies\n", ct);
  sw_i = 0;
  do
  :: sw_i < NS ->
    if
    :: HAS(sopm, TS(ct, sw_i)) -> SETB(endm, TS(ct, sw_i), 1)
    :: else -> skip
    fi;
    sw_i++
  :: else -> break
  od;
  sw_i = 0;
  cst[ct] = C_GONE;
  ans[ct] = 0
}

proctype faults() {
  byte fk, fa, fb;
end:
  do
  :: atomic {
    if
  BRK(0, 1)
  BRK(1, 0)
  BRK(0, 2)
  BRK(2, 0)
  BRK(1, 2)
  BRK(2, 1)
  BRKL(0, 1)
  BRKL(1, 0)
  BRKL(0, 2)
  BRKL(2, 0)
  BRKL(1, 2)
  BRKL(2, 1)
  PART(0, 1)
  PART(0, 2)
  PART(1, 2)
  STOP(0)
  STOP(1)
  STOP(2)
  RESUME(0)
  RESUME(1)
  RESUME(2)
  CRASH(0)
  CRASH(1)
  CRASH(2)
  TMO(0, 0)
  TMO(0, 1)
  TMO(0, 2)
  TMO(1, 0)
  TMO(1, 1)
  TMO(1, 2)
  TMO(2, 0)
  TMO(2, 1)
  TMO(2, 2)
  LATE(0)
  LATE(1)
  LATE(2)
  LATE(3)
  :: nfault > 0 -> fk = FX_NOMORE /* no more faults */
    fi;
    d_step {
      if
      :: fk == F_BREAK || fk == F_LATE || fk == F_PART ->
        break_learn(fa, fb, fk == F_LATE);
        if
        :: fk == F_PART -> break_learn(fb, fa, 0)
        :: else -> skip
        fi;
        all_slow();
        gc_aborts();
        nfault--
      :: fk == F_STOP ->
        SETB(upm, fa, 0);
        printf("FAULT: s%d stops\n", fa);
        all_slow();
        nfault--
      :: fk == FX_RESUME ->
        SETB(upm, fa, 1);
        EVENT(fa);
        printf("s%d resumes\n", fa)
      :: fk == F_CRASH -> crash(fa); nfault--
      :: fk == F_TIMEOUT ->
        if
        :: LISTENS(fa, fb) -> ans[fa] = A_TIMEOUT
        :: else -> skip
        fi;
        printf("FAULT: t%d times out at s%d\n", fa, fb);
        abort_wait(fa, fb);
        nfault--
      :: fk == FX_LATE -> SETB(ablate, fa, 1); printf("abort %d is late\n", fa)
      :: fk == FX_NOMORE -> nfault = 0
      fi;
      fk = 0;
      fa = 0;
      fb = 0
    }
    }
  od
}

/* ---- Scenarios ------------------------------------------------------------------ */


/* plan step i of txn t. */
#define PL(t, i, o) plan[(t) * NOPS + (i)] = o

inline scenario(sc) {
  cap = NT;
  if
  :: sc == SC_PAIR ->
    /* A (0) holds x on s1 and waits for y on s0; B (1) holds y on s0 and
     * waits for x on s1: the cycle of the sketch. B is the victim. */
    nsh = 2; ntx = 2;
    home[0] = 0; home[1] = 1;
    PL(0, 0, OPL(1, 1)); PL(0, 1, OPL(0, 1)); nops[0] = 2; npre[0] = 1;
    PL(1, 0, OPL(0, 1)); PL(1, 1, OPL(1, 1)); nops[1] = 2; npre[1] = 1;
    dl[0] = 1; dl[1] = 1; tries[1] = TRIES;
    fmask = F_BREAK | F_PART | F_LATE | F_STOP | F_CRASH | F_TIMEOUT
  :: sc == SC_READERS ->
    /* Two readers hold y on s0: R (0), which never lets go, and B (1),
     * which waits for x on s1; V (2) holds x and waits for y in X: V's wait
     * has two edges, and the cycle is the second. */
    nsh = 2; ntx = 3;
    home[0] = 0; home[1] = 1;
    PL(0, 0, OPL(0, 0)); nops[0] = 1; npre[0] = 1; eternal[0] = 1;
    PL(1, 0, OPL(0, 0)); PL(1, 1, OPL(1, 1)); nops[1] = 2; npre[1] = 1;
    PL(2, 0, OPL(1, 1)); PL(2, 1, OPL(0, 1)); nops[2] = 2; npre[2] = 1;
    fmask = 0
  :: sc == SC_STAR0 || sc == SC_STAR1 ->
    /* The centre C waits for k on s0, which two readers P and Q hold; P
     * waits for a, Q for b, both on s1, both held by C: two cycles that
     * share C. STAR0: C is the oldest (0), the victims are P (1) and Q
     * (2), and C's wait may time out. STAR1: C is 1, between P (0) and Q
     * (2): C is the first cycle's victim, Q the second's. */
    nsh = 2; ntx = 3;
    home[0] = 0; home[1] = 1; home[2] = 1;
    if
    :: sc == SC_STAR0 -> sw_i = 0; sw_n = 1
    :: else -> sw_i = 1; sw_n = 0
    fi;
    /* C = sw_i, P = sw_n, Q = 2 */
    PL(sw_i, 0, OPL(1, 1)); PL(sw_i, 1, OPL(2, 1)); PL(sw_i, 2, OPL(0, 1));
    nops[sw_i] = 3; npre[sw_i] = 2; dl[sw_i] = (sc == SC_STAR0);
    PL(sw_n, 0, OPL(0, 0)); PL(sw_n, 1, OPL(1, 1)); nops[sw_n] = 2; npre[sw_n] = 1;
    PL(2, 0, OPL(0, 0)); PL(2, 1, OPL(2, 1)); nops[2] = 2; npre[2] = 1;
    sw_i = 0; sw_n = 0;
    fmask = (sc == SC_STAR0 -> F_TIMEOUT : 0)
  :: sc == SC_CAP ->
    /* --peer-blocked-max 1. H (0) holds k0 and k1 on s0, lets go of k0 and
     * keeps k1; W1 (1) and W2 (2) hold a key each on s1 and wait on s0 for
     * k0 and k1: s0 owes s1 two entries, with room for one until W1's wait
     * ends. W2 waits for ever: its entry must be in place at the end. */
    nsh = 2; ntx = 3; cap = 1;
    home[0] = 0; home[1] = 0; home[2] = 1; home[3] = 1;
    PL(0, 0, OPL(0, 1)); PL(0, 1, OPL(1, 1)); PL(0, 2, OPU(0)); nops[0] = 3; npre[0] = 2;
    eternal[0] = 1;
    PL(1, 0, OPL(2, 1)); PL(1, 1, OPL(0, 1)); nops[1] = 2; npre[1] = 1;
    PL(2, 0, OPL(3, 1)); PL(2, 1, OPL(1, 1)); nops[2] = 2; npre[2] = 1;
    fmask = 0
  :: sc == SC_SEQ ->
    /* T (0) holds r on s0, waits for a on s1, then for b on s2: both waits
     * have wseq 1, each on its shard. H (1) holds a and b, lets go of a and
     * keeps b: T's second wait lasts, its entry at s0 must stay. */
    nsh = 3; ntx = 2;
    home[0] = 0; home[1] = 1; home[2] = 2;
    PL(0, 0, OPL(0, 1)); PL(0, 1, OPL(1, 1)); PL(0, 2, OPL(2, 1)); nops[0] = 3; npre[0] = 1;
    PL(1, 0, OPL(1, 1)); PL(1, 1, OPL(2, 1)); PL(1, 2, OPU(1)); nops[1] = 3; npre[1] = 2;
    eternal[1] = 1;
    fmask = 0
  :: sc == SC_THIRD ->
    /* The pair, and the victim B also holds z on s2, outside the cycle; B
     * takes z first when it retries. */
    nsh = 3; ntx = 2;
    home[0] = 0; home[1] = 1; home[2] = 2;
    PL(0, 0, OPL(1, 1)); PL(0, 1, OPL(0, 1)); nops[0] = 2; npre[0] = 1;
    PL(1, 0, OPL(2, 1)); PL(1, 1, OPL(0, 1)); PL(1, 2, OPL(1, 1)); nops[1] = 3; npre[1] = 2;
    dl[1] = 1; tries[1] = TRIES;
    fmask = F_BREAK | F_PART | F_LATE | F_STOP | F_CRASH | F_TIMEOUT
  :: sc == SC_TRIPLE ->
    /* Three txns on three shards: T0 holds k1 on s1 and waits for k0 on s0,
     * T1 holds k2 on s2 and waits for k1, T2 holds k0 and waits for k2. */
    nsh = 3; ntx = 3;
    home[0] = 0; home[1] = 1; home[2] = 2;
    PL(0, 0, OPL(1, 1)); PL(0, 1, OPL(0, 1)); nops[0] = 2; npre[0] = 1;
    PL(1, 0, OPL(2, 1)); PL(1, 1, OPL(1, 1)); nops[1] = 2; npre[1] = 1;
    PL(2, 0, OPL(0, 1)); PL(2, 1, OPL(2, 1)); nops[2] = 2; npre[2] = 1;
    dl[0] = HAS(TRIPLE_DL, 0); dl[1] = HAS(TRIPLE_DL, 1); dl[2] = HAS(TRIPLE_DL, 2);
    tries[2] = TRIES;
    fmask = F_BREAK | F_PART | F_LATE | F_STOP | F_CRASH | F_TIMEOUT
  fi;
#ifdef FALL
  fmask = F_BREAK | F_PART | F_LATE | F_STOP | F_CRASH | F_TIMEOUT;
#endif
#ifdef FMASK
  fmask = fmask & FMASK;
#endif
  nfault = (fmask != 0 -> FAULTS : 0)
}

/* ---- The start, and the end ----------------------------------------------------- */

hidden byte reach[NT];

init {
  byte sc, t, i, k, s, u;
  atomic {
#if SCEN == 0
    if
    :: sc = SC_PAIR
    :: sc = SC_READERS
    :: sc = SC_STAR0
    :: sc = SC_STAR1
    :: sc = SC_CAP
    :: sc = SC_SEQ
    :: sc = SC_THIRD
    fi;
#else
    sc = SCEN;
#endif
    d_step {
      scenario(sc);
      /* The plans' first steps are done: their keys held, their sessions
       * open, what each client believes. */
      t = 0;
      do
      :: t < ntx ->
        cst[t] = C_RUN;
        i = 0;
        do
        :: i < npre[t] ->
          k = OPK(plan[t * NOPS + i]);
          hold[k] = hold[k] | BIT(t);
          SETB(hxm, k, OPX(plan[t * NOPS + i]));
          SETB(sopm, TS(t, home[k]), 1);
          bel[t] = bel[t] | BIT(k);
          i++
        :: else -> break
        od;
        cop[t] = npre[t];
        settle(t);
        t++
      :: else -> break
      od;
      k = 0;
      do
      :: k < NK -> keyat[home[k]] = keyat[home[k]] | BIT(k); k++
      :: else -> break
      od;
      /* Every shard is up, every link of the shards in use too; the
       * others' links stay down for good (nobody dials them). */
      SETB(upm, 0, 1); SETB(upm, 1, 1); SETB(upm, 2, 1);
      SETB(lupm, LK(0, 1), 1); SETB(lupm, LK(1, 0), 1);
      SETB(lupm, LK(0, 2), (nsh > 2)); SETB(lupm, LK(2, 0), (nsh > 2));
      SETB(lupm, LK(1, 2), (nsh > 2)); SETB(lupm, LK(2, 1), (nsh > 2));
      t = 0; i = 0; k = 0; s = 0; u = 0
    };
    s = 0;
    do
    :: s < nsh -> run shard(s); s++
    :: else -> break
    od;
    t = 0;
    do
    :: t < ntx -> run client(t); t++
    :: else -> break
    od;
    run faults();
    s = 0;
    t = 0
  };

  /* (c) At quiescence (nothing can move: the faults are spent), no cycle
   * stands, no abort runs, nothing is pinned or frozen, every wait left is
   * known where its txn holds keys (unless that shard is full of the
   * waiter's shard's entries), no entry is stale, and each client's
   * beliefs are true. */
  timeout ->
  d_step {
    i = 0;
    do
    :: i < MAXAB -> assert(!INPROG(i) && pinw[i] == 0 && frz[i] == 0); i++
    :: else -> break
    od;
    t = 0;
    do
    :: t < ntx ->
      assert(cst[t] == C_DONE || cst[t] == C_HOLD || cst[t] == C_GONE || cst[t] == C_WAIT);
      if
      :: cst[t] != C_GONE ->
        k = 0;
        do
        :: k < NK -> assert(!HAS(bel[t], k) || HAS(hold[k], t)); k++
        :: else -> break
        od
      :: else -> skip
      fi;
      reach[t] = 0;
      s = 0;
      do
      :: s < nsh ->
        assert(!HAS(endm, TS(t, s)));
        if
        :: WAITS(t, s) ->
          blockers(t, s);
          reach[t] = reach[t] | bk_b;
          u = 0;
          do
          :: u < nsh ->
            if
            :: u != s && HAS(heldat[TS(t, s)], u) ->
              /* in place, or no room for it */
              sw_n = 0;
              i = 0;
              do
              :: i < NT -> sw_n = sw_n + (ENT(u, TS(i, s)) != 0 -> 1 : 0); i++
              :: else -> break
              od;
              assert(ENT(u, TS(t, s)) == wseq[TS(t, s)] || sw_n >= cap)
            :: else -> skip
            fi;
            u++
          :: else -> break
          od
        :: else -> skip
        fi;
        /* no stale entry: an entry at any shard names a wait that stands */
        u = 0;
        do
        :: u < nsh ->
          assert(ENT(u, TS(t, s)) == 0 || ENT(u, TS(t, s)) == wseq[TS(t, s)] && WAITS(t, s));
          u++
        :: else -> break
        od;
        s++
      :: else -> break
      od;
      t++
    :: else -> break
    od;
    /* no cycle: the transitive closure of the wait-for edges */
    i = 0;
    do
    :: i < NT ->
      t = 0;
      do
      :: t < ntx ->
        u = 0;
        do
        :: u < ntx ->
          if
          :: HAS(reach[t], u) -> reach[t] = reach[t] | reach[u]
          :: else -> skip
          fi;
          u++
        :: else -> break
        od;
        t++
      :: else -> break
      od;
      i++
    :: else -> break
    od;
    t = 0;
    do
    :: t < ntx -> assert(!HAS(reach[t], t)); t++
    :: else -> break
    od
  }
}
