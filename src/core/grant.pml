/*
 * grant.pml -- a Promela model of the engine's grant protocol and of the
 * blocking layer's side of it: whole-set grants, queueing holding nothing,
 * wake_queue / wake_one on release, pokes against hand-overs, the waiter's
 * handshake (wstate, poked, the txn's mutex and condition variable,
 * ordo__retry), time-outs and cancels, and the starving waiters'
 * reservations. See src/core/README.md, "The grant protocol" and "The
 * models".
 *
 * What it mirrors:
 *   lock_all       src/backend/mem.c: mem_lock_all (the fast path, key by
 *                  key, X only; ordo__try_one for one key), mem_lock_wait
 *   acquire        src/core/table.c: ordo__acquire (the attempt without
 *                  wait_mu, its trylock, the attempt with it, the queueing)
 *   grantable      table.c: grantable, holders_block (HOLDERS_BLOCK, which
 *                  the walk asks too), reserved_against, chained
 *   release_key    table.c: release_hold, drop_hold (and the fast path's
 *                  give-back, ordo__fast_give_back, which releases the same
 *                  way)
 *   wake_queue     table.c: ordo__wake_queue (its walk passes over the
 *                  waiters that the key's holders block, and while the
 *                  key is held in X asks only the holder's own request),
 *                  wake_one, grant_waiter
 *   retry          table.c: ordo__retry (and its pass-on of the wake-up)
 *   abort_wait     table.c: ordo__abort_wait, ordo__abort_locked
 *   wait           mem.c: wait_spin, the sleep loop of mem_lock_wait
 *   mem_wake_*     mem.c: mem_wake (a poke; an outcome)
 *   fire_all       table.c: fire_all (events after the locks are let go)
 *
 * Abstracted away, and why:
 *   - Lock objects, the fast word and eviction (fast.pml's): a key here is
 *     its holders and its queue. A fast-path hold counts as a holder at
 *     once, as it is for every slow path (their lookup adopts it), and the
 *     fast path takes only keys with no holder and no waiter (a lock with
 *     waiters is never IDLE: fast.pml's P3).
 *   - The stripe mutexes. A stripe is only ever held across another
 *     stripe's mutex (in increasing order) or a trylock of wait_mu, which
 *     cannot wait, and what it guards (holders, queues) is read and written
 *     only under it: so a stripe section is one atomic step here. wait_mu
 *     and the txns' mutexes are real locks, held across the steps of the
 *     handshake.
 *   - Time. Starving is an event (proctype clock) that can befall the
 *     oldest waiting request that has not starved, at any moment, or
 *     never: so the starving waiters are always the oldest ones (a waiter
 *     starves when it has waited the bound, and older ones have waited
 *     longer). The bound does not move (README step 6 argues that a moving
 *     bound loses nothing). A deadline is a nondeterministic time-out: an
 *     acquire may find it passed, a timed wait may time out at any moment.
 *     A spin ends at any moment.
 *   - The detector (lock_all callers hold nothing while they wait, so it
 *     has nothing to do), the timer thread and its heap (blocking callers
 *     enforce their own deadlines), hold counts, upgrades, statistics,
 *     asynchronous callers (every waiter here is pokeable: it has a thread).
 *   - The walk's looks. ordo__wake_queue looks at the key's holders under
 *     its stripe alone (X held, or which waiters they block), lets the
 *     stripe go, and then calls wake_one, which takes the waiter's
 *     stripes; here a look and the wake_one it leads to are one step. That
 *     hides no interleaving that matters: the walker holds wait_mu, so no
 *     waiter comes or goes and no holder of the key lets go (a release of
 *     a key with waiters takes wait_mu); a request that runs meanwhile can
 *     only add holders (barging), which block more. So a waiter passed
 *     over is still blocked at the wake_one, the X holder is still the
 *     holder, and a waiter that a new holder blocks gets WNO from its
 *     wake_one, as if the look had come after that grant. The walk under
 *     X asks the holder's own request only if it is queued on the key;
 *     lock_all callers never hold while they wait, so here (but under
 *     BUG_PARTIAL_GRANT) there is none and the walk asks nobody.
 *   - Memory order: spin explores sequentially consistent interleavings;
 *     mem.c's handshake is written for that (its wstate and poked accesses
 *     are sequentially consistent atomics).
 *
 * The bound: 3 threads, 2 keys; each thread makes ROUNDS (default 1)
 * lock_all calls, each of a nondeterministic set ({A}, {B}, {A,B}), mode
 * (S or X, the whole request) and, for the threads MAY_TIME_OUT names,
 * deadline (none, or one that may pass at any moment), releases everything
 * it was granted before its next call, and after its calls the threads
 * MAY_CANCEL names may cancel their neighbour's wait (ordo_cancel). Every
 * interleaving of that is searched. `make verify` runs this bound; make
 * test runs -DNT=2 (2 threads, 2 keys), and -DNT=2 -DALL_ABORTS. At 3
 * threads, -DALL_ABORTS outgrows a 6 GB search (not run); -DROUNDS=2 makes
 * a larger bound (two calls per thread).
 *
 * Properties:
 *   P1 no double grant: never two X holders of a key, never X with S
 *      (assert in grant_one).
 *   P2 whole-set grants: a lock_all returns 0 holding its whole set, and
 *      anything else holding none of it; a waiting request holds nothing.
 *   P3 one outcome: a request's outcome is decided once, its event fires
 *      once, only while its caller still waits (no event after the call
 *      returned, none for a request its own retry granted), and the call
 *      returns that outcome (README invariant 6; src/backend/README.md
 *      invariants 1 and 2).
 *   P4 no lost wake-up and no deadlock: every thread ends (spin's
 *      invalid-end-state check). A waiter asleep for ever while its keys
 *      are free, or lock_all callers all blocked, is a state where some
 *      thread cannot move and has not ended. Only waits without a deadline
 *      can block for ever, so these are the runs that show it.
 *   P5 the starvation bound: while the oldest waiting request W has
 *      starved, no other request is granted a key of W in a conflicting
 *      mode (assert at every grant). So every later request, and every
 *      younger waiter, is granted W's keys only after W is granted.
 *   P6 the walk passes over only waiters that wake_one would answer WNO
 *      (assert in passed_over): those the key's holders block, which under
 *      X is every waiter but the holder's own. So passing over them loses
 *      no wake-up that asking every waiter, the rule before, made.
 *
 * Deliberate bugs (each must make spin report an error; see
 * tests/spin/run_spin.sh, which checks that every one of them does):
 *   -DBUG_NO_WAKE          release_hold does not run wake_queue
 *   -DBUG_POKE_NO_RETRY    a waiter takes its poke and sleeps on, no retry
 *   -DBUG_WOKEN_STUCK      ordo__retry does not clear woken (no 2nd poke)
 *   -DBUG_POKE_NO_SIGNAL   a poke does not signal a sleeping waiter
 *   -DBUG_WAIT_UNLOCKED    the sleeper looks for DONE under mu, lets mu go,
 *                          then waits (pthread_cond_wait's atomicity lost)
 *   -DBUG_UNLOCKED_ENQUEUE acquire lets its stripes go between its check
 *                          and its enqueue
 *   -DBUG_PARTIAL_GRANT    acquire grants the free keys of a set and queues
 *                          for the rest (hold and wait)
 *   -DBUG_SX               holders_block lets X in beside S holders
 *   -DBUG_PASS_STARVING    a new request ignores the reservations
 *   -DBUG_SKIP_STALE       (pan -A) the walk's first look passes over the
 *                          waiters that the released hold blocked, as a look
 *                          made before drop_hold would: P6 reports it first;
 *                          with pan -A, P4: a waiter sleeps for ever with its
 *                          keys free (under X the look finds the releaser,
 *                          who waits for nothing, and asks nobody)
 *
 * Run (what tests/spin/run_spin.sh does, in a temporary folder):
 *   spin -a grant.pml && cc -DSAFETY -DNOCLAIM -DCOLLAPSE -o pan pan.c && ./pan -m1000000
 * and expect "errors: 0" and no "invalid end state".
 */

#ifndef ROUNDS
#define ROUNDS 1
#endif

#ifndef NT
#define NT 3 /* threads (owners): 2 or 3 (-DNT=2 for the quick bound) */
#endif

/* Who may have a deadline, and who may cancel its neighbour's wait
 * ((t + 1) % NT). By default thread 0 may time out and thread 2 may cancel
 * it, so both kinds of abort_locked meet a waiter that may also be poked,
 * granted or handed over; -DALL_ABORTS lets every thread do both. */
#ifdef ALL_ABORTS
#define MAY_TIME_OUT(t) true
#define MAY_CANCEL(t) true
#else
#define MAY_TIME_OUT(t) (t == 0)
#define MAY_CANCEL(t) (t == NT - 1)
#endif
#define NK 2 /* keys: A = 0, B = 1 */

/* Statuses (ordo.h's, as small numbers). */
#define OK 0
#define PENDING 1
#define ETIMEDOUT 2
#define ECANCELED 3
#define ENOTHELD 4

/* Owner states (ORDO__IDLE, ORDO__WAITING). */
#define IDLE 0
#define WAITING 1

/* mem.c's wstate. */
#define W_SPIN 0
#define W_DONE 1
#define W_SLEEP 2

/* wake_one's answers. */
#define WNO 0
#define WGRANTED 1
#define WPOKED 2
#define WSTOP 3
#define WSTART 4 /* wake_queue's first look */

/* The engine, under wait_mu and the stripes. */
byte wait_mu;          /* 0 free, else thread + 1 */
byte xh[NK];           /* the X holder, thread + 1, or 0 */
byte sh[NK];           /* the S holders, a bit per thread */
byte q[NK * NT];       /* each key's queue of owners, arrival order */
byte ql[NK];
byte wl[NT];           /* waiting owners in enqueue order (tab->whead) */
byte wn;
byte nstarv;           /* the starving ones: wl[0 .. nstarv) */
bool starving[NT];
byte ostate[NT];       /* IDLE, WAITING */
bool woken[NT];        /* poked, and not yet retried */
byte estatus[NT];      /* the outcome the engine decided (w->status) */
byte set[NT];          /* the request: its keys, a bit each */
bool xm[NT];           /* ... and its mode: X (else S) */

/* mem.c, per txn. */
byte wstate[NT];
bool poked[NT];
byte mstatus[NT];      /* t->status, written by the event */
bool incv[NT];         /* waiting on the txn's condition variable */
/*
 * The txn's mutex mu has no variable: every critical section under it, the
 * waiter's and the events', is one atomic step here (see wait() and
 * mem_wake), so two of them never overlap, as mu ensures in the C. What
 * that leaves out is only what mu rules out.
 */

/* Ghosts. */
bool inwait[NT];       /* its thread is in mem_lock_wait's wait */
bool pending[NT];      /* an outcome decided, its event not yet done */

/* Takes wait_mu: the first statement of the atomic step that follows it
 * in the C (taking a lock moves right, as in Lipton's reduction). */
inline lock_wait() {
  wait_mu == 0 -> wait_mu = t + 1
}

inline unlock_wait() {
  assert(wait_mu == t + 1);
  wait_mu = 0
}

/* Is key k free of holders and waiters (what the fast path and try_one
 * take)? */
#define FREE(k) (xh[k] == 0 && sh[k] == 0 && ql[k] == 0)

/* holders_block: does a holder of key k keep owner w from it (another
 * owner's X, or for an X request another owner's S)? The grant rule and
 * wake_queue's walk both ask it, as in the C. */
#ifdef BUG_SX
#define HOLDERS_BLOCK(k, w) (xh[k] != 0 && xh[k] != (w) + 1)
#else
#define HOLDERS_BLOCK(k, w) \
  ((xh[k] != 0 && xh[k] != (w) + 1) || (xm[w] && (sh[k] & ~(1 << (w))) != 0))
#endif

/* What the walk passes over: the waiters k's holders block. */
#ifdef BUG_SKIP_STALE
/* ... and, in its first look, those that the releasing hold (stale: the
 * releaser + 1, 0 if none) blocked before release_key dropped it. */
#define WALK_BLOCKS(k, w) \
  (HOLDERS_BLOCK(k, w) || (stale != 0 && stale != (w) + 1 && \
                           (xm[stale - 1] || xm[w])))
#else
#define WALK_BLOCKS(k, w) HOLDERS_BLOCK(k, w)
#endif

/* The position of owner w in key k's queue (ql[k] if absent). */
inline qpos(k, w, res) {
  res = 0;
  do
  :: res < ql[k] && q[k * NT + res] != w -> res++
  :: else -> break
  od
}

/*
 * reserved_against without chains, for chained(): is key f reserved
 * against owner o (whose entry is at gpos) by a starving waiter ahead of
 * it that asks f in a conflicting mode? Sets gch.
 */
inline reserved_nochain(f, o) {
  qpos(f, o, gpos);
  gj = 0;
  do
  :: gj < gpos ->
    ge2 = q[f * NT + gj];
    if
    :: !starving[ge2] -> break /* arrival order: none behind has waited longer */
    :: starving[ge2] && ge2 != o && (xm[o] || xm[ge2]) -> gch = 1; break
    :: else -> gj++
    fi
  :: else -> break
  od;
  gj = 0;
  ge2 = 0;
  gpos = 0
}

/* chained(o): is waiter o held back by an older starving waiter's
 * reservation on one of its keys? Sets gch. */
inline chained(o) {
  gch = 0;
  gf = 0;
  do
  :: gf < NK && !gch ->
    if
    :: (set[o] >> gf) & 1 && ql[gf] > 0 -> reserved_nochain(gf, o)
    :: else -> skip
    fi;
    gf++
  :: else -> break
  od;
  gf = 0
}

/*
 * grantable(w, queued, hw): may w's whole set be granted now? Sets gok;
 * gunsure when the answer needed wait_mu (hw says whether it is held).
 * queued: w is in the queues (its entries are its "self"), else it is a
 * new request, behind every waiter. Caller is inside an atomic block.
 */
inline grantable(w, queued, hw) {
  gok = 1;
  gunsure = 0;
  gk = 0;
  do
  :: gk < NK && gok ->
    if
    :: (set[w] >> gk) & 1 ->
      if
      :: HOLDERS_BLOCK(gk, w) -> gok = 0
      :: else -> skip
      fi;
      /* reserved_against, with chains (lock_all callers hold nothing
       * before the call, so holds_covering never applies) */
      if
      :: gok && ql[gk] > 0 ->
        if
        :: queued -> qpos(gk, w, gself)
        :: else -> gself = ql[gk]
        fi;
#ifdef BUG_PASS_STARVING
        if
        :: !queued -> gself = 0
        :: else -> skip
        fi;
#endif
        gi = 0;
        do
        :: gi < gself ->
          ge = q[gk * NT + gi];
          if
          :: !starving[ge] -> break
          :: starving[ge] && (ge == w || (!xm[w] && !xm[ge])) -> gi++
          :: else ->
            if
            :: !hw -> gunsure = 1; gok = 0; break /* chained? needs wait_mu */
            :: else -> skip
            fi;
            chained(ge);
            if
            :: !gch -> gok = 0; break
            :: else -> gi++
            fi
          fi
        :: else -> break
        od
      :: else -> skip
      fi
    :: else -> skip
    fi;
    gk++
  :: else -> break
  od;
  gk = 0;
  gi = 0;
  ge = 0;
  gself = 0;
  gch = 0
}

/* grant_one of key k to w, with P1 and P5. Caller is atomic. */
inline grant_one(k, w) {
  /* P5: the oldest waiter, if it starves, reserves its keys. */
  if
  :: nstarv > 0 && wl[0] != w && ((set[wl[0]] >> k) & 1) ->
    assert(!(xm[w] || xm[wl[0]]))
  :: else -> skip
  fi;
  if
#ifdef BUG_PARTIAL_GRANT
  :: xh[k] == w + 1 || (sh[k] & (1 << w)) -> skip /* took it before it queued */
#endif
  :: else ->
    if
    :: xm[w] -> assert(xh[k] == 0 && sh[k] == 0); xh[k] = w + 1 /* P1 */
    :: else -> assert(xh[k] == 0); sh[k] = sh[k] | (1 << w)   /* P1 */
    fi
  fi
}

inline grant_all(w) {
  if
  :: set[w] & 1 -> grant_one(0, w)
  :: else -> skip
  fi;
  if
  :: set[w] & 2 -> grant_one(1, w)
  :: else -> skip
  fi
}

inline drop_hold(k, w) {
  if
  :: xm[w] -> assert(xh[k] == w + 1); xh[k] = 0
  :: else -> assert(sh[k] & (1 << w)); sh[k] = sh[k] & ~(1 << w)
  fi
}

inline enqueue(w) {
  if
  :: set[w] & 1 -> q[0 * NT + ql[0]] = w; ql[0]++
  :: else -> skip
  fi;
  if
  :: set[w] & 2 -> q[1 * NT + ql[1]] = w; ql[1]++
  :: else -> skip
  fi;
  wl[wn] = w;
  wn++;
  ostate[w] = WAITING;
  woken[w] = 0
}

inline dequeue_key(k, w) {
  qpos(k, w, gi);
  assert(gi < ql[k]);
  do
  :: gi + 1 < ql[k] -> q[k * NT + gi] = q[k * NT + gi + 1]; gi++
  :: else -> break
  od;
  ql[k]--;
  q[k * NT + ql[k]] = 0;
  gi = 0
}

/* dequeue_all and waiting_remove (and time's mark). */
inline dequeue_all(w) {
  if
  :: set[w] & 1 -> dequeue_key(0, w)
  :: else -> skip
  fi;
  if
  :: set[w] & 2 -> dequeue_key(1, w)
  :: else -> skip
  fi;
  gi = 0;
  do
  :: gi < wn && wl[gi] != w -> gi++
  :: else -> break
  od;
  assert(gi < wn);
  do
  :: gi + 1 < wn -> wl[gi] = wl[gi + 1]; gi++
  :: else -> break
  od;
  wn--;
  wl[wn] = 0;
  gi = 0;
  if
  :: starving[w] -> starving[w] = 0; nstarv--
  :: else -> skip
  fi
}

/* grant_waiter: w leaves its queues with its whole set. */
inline grant_waiter(w) {
  assert(ostate[w] == WAITING && !pending[w]);
  grant_all(w);
  dequeue_all(w);
  woken[w] = 0
}

/* mem_wake(PENDING), after its store of poked (made in the caller's atomic
 * step, under wait_mu): a sleeping waiter is signalled. */
inline mem_wake_poke(e) {
  atomic {
    assert(inwait[e]); /* P3: wait_mu keeps the txn */
    sig = (wstate[e] == W_SLEEP)
  };
  if
#ifndef BUG_POKE_NO_SIGNAL
  :: sig ->
    /* lock mu; signal; unlock mu: one step */
    incv[e] = 0
#endif
  :: else -> skip
  fi;
  sig = 0
}

/* wake_one(e)'s stripe section (the caller is atomic and holds wait_mu):
 * res is WGRANTED (handed over, e is on the fire list), WPOKED (sig: a
 * poke to deliver, unless one is out already) or WNO. */
inline wake_one(e) {
  grantable(e, 1, 1);
  if
  :: gok && starving[e] ->
    /* hand-over: a starving waiter is granted, never poked */
    grant_waiter(e);
    ostate[e] = IDLE;
    estatus[e] = OK;
    pending[e] = 1;
    fire = fire | (1 << e);
    res = WGRANTED
  :: gok && !starving[e] ->
    res = WPOKED;
    if
    :: !woken[e] -> woken[e] = 1; poked[e] = 1; sig = 1
    :: else -> skip
    fi
  :: else -> res = WNO
  fi;
  gok = 0
}

/* P6 for e, a waiter the walk passes over: wake_one would answer WNO. */
inline passed_over(e) {
  grantable(e, 1, 1);
  assert(!gok);
  gok = 0
}

/*
 * ordo__wake_queue(k): in arrival order, wake_one on each waiter that k's
 * holders do not block, until an X is granted or poked. While k is held in
 * X, that is only the holder's own request, if it waits queued on k (the
 * model's lock_all callers never hold while they wait, so there is none
 * but under BUG_PARTIAL_GRANT). Caller holds wait_mu. Only the waiter
 * woken can leave the queue meanwhile (pokes do not change it), so the
 * walk goes by position i. Each step is the C's look under k's stripe (the
 * first one decides X or not; the others pass over from i) together with
 * the wake_one it leads to: see "The walk's looks" in the header.
 */
inline wake_queue(k) {
  i = 0;
  res = WSTART;
  do
  :: atomic {
      if
      :: res == WSTART && xh[k] != 0 ->
        /* l->xheld: X is never shared, so every waiter but the holder's
         * own is blocked (P6), and the walk ends with this step. */
        do
        :: i < ql[k] ->
          if
          :: q[k * NT + i] != xh[k] - 1 -> e = q[k * NT + i]; passed_over(e)
          :: else -> skip
          fi;
          i++
        :: else -> break
        od;
        e = xh[k] - 1;
        qpos(k, e, i);
        if
        :: ostate[e] == WAITING && i < ql[k] -> wake_one(e)
        :: else -> res = WSTOP
        fi;
        i = NT
      :: else ->
        do
        :: i < ql[k] && WALK_BLOCKS(k, q[k * NT + i]) ->
          e = q[k * NT + i];
          passed_over(e);
          i++
        :: else -> break
        od;
        if
        :: i < ql[k] -> e = q[k * NT + i]; wake_one(e)
        :: else -> res = WSTOP
        fi
      fi;
#ifdef BUG_SKIP_STALE
      stale = 0
#endif
    };
    if
    :: sig -> mem_wake_poke(e)
    :: else -> skip
    fi;
    if
    :: res == WSTOP || i == NT -> break
    :: res != WNO && xm[e] -> break /* X taken or promised */
    :: res == WGRANTED && !xm[e] -> skip /* it left: the next is at i */
    :: else -> i++
    fi
  od;
  i = 0;
  e = 0;
  res = 0
}

/* mem_wake(status) for each owner on the fire list, any order, with no
 * engine lock held. */
inline fire_all() {
  do
  :: fire == 0 -> break
  :: else ->
    atomic {
      if
      :: fire & 1 -> u = 0
      :: fire & 2 -> u = 1
      :: fire & 4 -> u = 2
      fi;
      fire = fire & ~(1 << u);
      assert(inwait[u] && pending[u]); /* P3 */
      mstatus[u] = estatus[u];
      if
      :: wstate[u] == W_SPIN -> wstate[u] = W_DONE; pending[u] = 0; cas = 1
      :: else -> cas = 0
      fi
    };
    if
    :: !cas ->
      /* lock mu; DONE; signal; unlock mu: one step */
      atomic { wstate[u] = W_DONE; incv[u] = 0; pending[u] = 0 }
    :: else -> skip
    fi;
    cas = 0;
    u = 0
  od
}

/* release_hold for key k of thread t (wait_mu kept in hw for the run). */
inline release_key(k) {
  atomic {
    if
    :: ql[k] > 0 && !hw && wait_mu == 0 -> wait_mu = t + 1; hw = 1
    :: ql[k] > 0 && !hw && wait_mu != 0 -> again = 1 /* let the stripe go */
    :: else -> skip
    fi;
    if
    :: !again -> wake = (ql[k] > 0); drop_hold(k, t)
    :: else -> skip
    fi
  };
  if
  :: again ->
    atomic { lock_wait(); hw = 1; again = 0; wake = (ql[k] > 0); drop_hold(k, t) }
  :: else -> skip
  fi;
#ifdef BUG_NO_WAKE
  wake = 0;
#endif
  if
  :: wake ->
    wake = 0;
#ifdef BUG_SKIP_STALE
    stale = t + 1;
#endif
    wake_queue(k)
  :: else -> skip
  fi
}

/* ordo__release_all: newest first (the larger key), then wait_mu and the
 * events. */
inline release_all() {
  if
  :: set[t] & 2 -> release_key(1)
  :: else -> skip
  fi;
  if
  :: set[t] & 1 -> release_key(0)
  :: else -> skip
  fi;
  if
  :: hw -> atomic { unlock_wait(); hw = 0 }
  :: else -> skip
  fi;
  fire_all()
}

/* ordo__abort_wait(w, st), from w's own thread (a time-out) or another
 * (a cancel). */
inline abort_wait(w, st) {
  atomic {
    lock_wait();
    if
    :: ostate[w] != WAITING -> unlock_wait(); did = 0
    :: else ->
      assert(!pending[w]); /* P3 */
      dequeue_all(w);
      estatus[w] = st;
      pending[w] = 1;
      did = 1
    fi
  };
  if
  :: did ->
    /* Leaving may lift w's reservations: wake its keys' queues. */
    if
    :: (set[w] & 1) && ql[0] > 0 -> wake_queue(0)
    :: else -> skip
    fi;
    if
    :: (set[w] & 2) && ql[1] > 0 -> wake_queue(1)
    :: else -> skip
    fi;
    atomic { ostate[w] = IDLE; fire = fire | (1 << w); unlock_wait(); did = 0 };
    fire_all()
  :: else -> skip
  fi
}

/* ordo__retry: the poked waiter t tries its set itself. rc: OK (granted,
 * no event will come), PENDING (lost the race), ENOTHELD (ended meanwhile:
 * its event is on its way). */
inline retry() {
  atomic {
    lock_wait();
    if
    :: ostate[t] != WAITING -> unlock_wait(); rc = ENOTHELD
    :: else ->
#ifndef BUG_WOKEN_STUCK
      woken[t] = 0;
#endif
      grantable(t, 1, 1);
      if
      :: gok ->
        grant_waiter(t);
        ostate[t] = IDLE;
        estatus[t] = OK;
        unlock_wait();
        rc = OK
      :: else -> rc = PENDING
      fi;
      gok = 0
    fi
  };
  if
  :: rc == PENDING ->
    /* A waiter behind us that the poke held back may go: pass it on, on
     * each of our keys (our entries keep their queues non-empty). */
    if
    :: set[t] & 1 -> wake_queue(0)
    :: else -> skip
    fi;
    if
    :: set[t] & 2 -> wake_queue(1)
    :: else -> skip
    fi;
    atomic { unlock_wait() };
    fire_all()
  :: else -> skip
  fi
}

/* ordo__acquire for t's request: 0, or queued (PENDING), or a deadline
 * that passed (ETIMEDOUT). */
inline acquire() {
  /* The attempt without wait_mu, under the request's stripes (and
   * mem_lock_wait's wstate = SPIN, poked = false, which nobody reads
   * before the request is queued). */
  atomic {
    wstate[t] = W_SPIN;
    poked[t] = 0;
    grantable(t, 0, 0);
    if
    :: gok -> grant_all(t); rc = OK
    :: else ->
      if
      :: gunsure -> again = 1
      :: !gunsure && dl -> rc = ETIMEDOUT /* the deadline passed */
      :: !gunsure && wait_mu == 0 ->
        /* trylock wait_mu, and queue at once */
        wait_mu = t + 1;
#ifdef BUG_UNLOCKED_ENQUEUE
        again = 2
#else
        enqueue(t);
        inwait[t] = 1;
        unlock_wait();
        rc = PENDING
#endif
      :: !gunsure && wait_mu != 0 -> again = 1
      fi
    fi;
    gok = 0;
    gunsure = 0
  };
#ifdef BUG_UNLOCKED_ENQUEUE
  if
  :: again == 2 ->
    /* The stripes were let go: a release may run here, unseen. */
    atomic { enqueue(t); inwait[t] = 1; unlock_wait(); rc = PENDING; again = 0 }
  :: else -> skip
  fi;
#endif
  if
  :: again ->
    atomic {
      lock_wait();
      again = 0;
      grantable(t, 0, 1);
      if
      :: gok -> grant_all(t); unlock_wait(); rc = OK
      :: !gok && dl -> unlock_wait(); rc = ETIMEDOUT
      :: !gok ->
#ifdef BUG_PARTIAL_GRANT
        /* Takes what is free now (no conflicting holder; while nobody
         * starves, so no reservation applies), and waits for the rest
         * holding it. */
        if
        :: nstarv == 0 && (set[t] & 1) && xh[0] == 0 && (!xm[t] || sh[0] == 0) ->
          grant_one(0, t)
        :: else -> skip
        fi;
        if
        :: nstarv == 0 && (set[t] & 2) && xh[1] == 0 && (!xm[t] || sh[1] == 0) ->
          grant_one(1, t)
        :: else -> skip
        fi;
#endif
        enqueue(t);
        inwait[t] = 1;
        unlock_wait();
        rc = PENDING
      fi;
      gok = 0
    }
  :: else -> skip
  fi
}

/*
 * The waiting of mem_lock_wait once ordo__acquire said PENDING: the spin
 * (answering pokes), then the sleep on the txn's condition variable.
 *
 * Granularity. While the waiter holds its mutex mu with wstate SLEEP,
 * nobody else writes wstate (an outcome takes mu to write DONE), so the
 * only access in its critical section that another thread can tell apart
 * is the exchange of poked: one step per wake-up holds it all (taking mu,
 * the check for DONE, the exchange, and pthread_cond_wait's letting go of
 * mu, or the unlock before a retry). The spin's loads of wstate and poked
 * are one step for the same reason as pan's reduction: a retry that the
 * poke causes after an outcome has come finds the wait over (ENOTHELD),
 * as the C's does.
 */
/* pthread_cond_wait's (or timedwait's) start: mu let go and the wait begun
 * in one step, the end of the waiter's critical section. */
inline start_wait() {
#ifdef BUG_WAIT_UNLOCKED
  gap = 1 /* the wait begins in a step of its own, after mu is let go */
#else
  incv[t] = 1
#endif
}

inline wait() {
  if
  :: true -> /* a spare CPU: spin a while (wait_spin) */
    do
    :: atomic {
        if
        :: wstate[t] == W_DONE -> rc = mstatus[t]; done = 1
        :: else -> p = poked[t]; poked[t] = 0
        fi
      };
      if
      :: done -> goto waited
      :: p ->
        p = 0;
#ifdef BUG_POKE_NO_RETRY
        skip
#else
        retry();
        if
        :: rc == OK -> goto waited /* granted by our own try */
        :: else -> rc = PENDING
        fi
#endif
      :: else -> skip
      fi;
      if
      :: true -> skip /* spin on */
      :: true -> break /* the spin is over */
      fi
    od
  :: true -> skip /* no CPU to spare */
  fi;
  /* Sleep: SPIN -> SLEEP under mu, or the event came meanwhile; then the
   * loop's first look at poked. */
  atomic {
    if
    :: wstate[t] == W_SPIN ->
      wstate[t] = W_SLEEP;
      p = poked[t];
      poked[t] = 0;
      if
      :: p -> skip /* mu is let go below, before the retry */
      :: else -> start_wait() /* wait (untimed or timed) */
      fi
    :: else -> rc = mstatus[t]; done = 1
    fi
  };
  do
  :: done -> goto waited
  :: p ->
    p = 0;
#ifdef BUG_POKE_NO_RETRY
    atomic { incv[t] = 1 }
#else
    retry();
    if
    :: rc == OK -> goto waited /* granted by our own try */
    :: else -> rc = PENDING
    fi;
    /* Take mu again and look again (DONE? a poke?), then wait. */
    atomic {
        if
      :: wstate[t] == W_DONE -> rc = mstatus[t]; done = 1
      :: else ->
        p = poked[t];
        poked[t] = 0;
        if
        :: p -> skip
        :: else -> start_wait()
        fi
      fi
    }
#endif
#ifdef BUG_WAIT_UNLOCKED
  :: gap -> atomic { gap = 0; incv[t] = 1 }
#endif
  :: !done && !p && !gap ->
    /* Waiting on cv (mu let go): a signal ends it; a timed wait may
     * also end at its deadline (or spuriously, which the loop treats the
     * same way). Then mu is taken again, and the loop looks again. */
    if
    :: atomic {
        incv[t] == 0 ->
        if
        :: wstate[t] == W_DONE -> rc = mstatus[t]; done = 1
        :: else ->
          p = poked[t];
          poked[t] = 0;
          if
          :: p -> skip
          :: else -> start_wait()
          fi
        fi
      }
    :: dl && !expired ->
      atomic {
            incv[t] = 0;
        if
        :: wstate[t] == W_DONE -> rc = mstatus[t]; done = 1
        :: else -> to = 1 /* ETIMEDOUT, and not DONE: let go of mu */
        fi
      };
      if
      :: to ->
        /* Our deadline: end the wait ourselves. If a grant or a cancel
         * won the race, its event is on its way and we wait for it. */
        to = 0;
        abort_wait(t, ETIMEDOUT);
        expired = 1;
        atomic {
                if
          :: wstate[t] == W_DONE -> rc = mstatus[t]; done = 1
          :: else ->
            p = poked[t];
            poked[t] = 0;
            if
            :: p -> skip
            :: else -> start_wait()
            fi
          fi
        }
      :: else -> skip
      fi
    fi
  od;
waited:
  done = 0;
  expired = 0
}

/* mem_lock_all. */
inline lock_all() {
  rc = PENDING;
  /* The fast path (X): each key with one CAS, in key order, while it has
   * no holder and no waiter; a key that is not gives back what was taken
   * (the slow way when it has waiters by now). ordo__try_one for one key
   * in S. */
  atomic {
    /* The request (its keys, its mode, a deadline or none), made in the
     * step of its first look at the keys: nobody sees it before. */
    if
    :: set[t] = 1
    :: set[t] = 2
    :: set[t] = 3
    fi;
    if
    :: xm[t] = 0
    :: xm[t] = 1
    fi;
    if
    :: dl = 0
    :: MAY_TIME_OUT(t) -> dl = 1
    fi;
    if
    :: xm[t] && set[t] == 2 && FREE(1) -> grant_one(1, t); rc = OK
    :: xm[t] && set[t] != 2 && FREE(0) ->
      grant_one(0, t);
      if
      :: set[t] == 1 -> rc = OK
      :: else -> part = 1
      fi
    :: !xm[t] && set[t] == 1 && FREE(0) -> grant_one(0, t); rc = OK
    :: !xm[t] && set[t] == 2 && FREE(1) -> grant_one(1, t); rc = OK
    :: else -> skip
    fi
  };
  if
  :: part ->
      atomic {
        if
        :: FREE(1) -> grant_one(1, t); rc = OK
        :: else -> skip
        fi;
        part = 0
      };
      if
      :: rc != OK ->
        release_key(0);
        if
        :: hw -> atomic { unlock_wait(); hw = 0 }
        :: else -> skip
        fi;
        fire_all()
      :: else -> skip
      fi
  :: else -> skip
  fi;
  if
  :: rc != OK ->
    acquire();
    if
    :: rc == PENDING -> wait()
    :: else -> skip
    fi
  :: else -> skip
  fi;
  /* P2, P3: what the call returns is what happened. */
  atomic {
    assert(!pending[t]);
    assert(ostate[t] == IDLE);
    if
    :: inwait[t] -> assert(rc == estatus[t])
    :: else -> skip
    fi;
    inwait[t] = 0;
    estatus[t] = 0;
    mstatus[t] = 0;
    wstate[t] = 0;
    poked[t] = 0;
    if
    :: rc == OK ->
      assert(((set[t] & 1) == 0 || xh[0] == t + 1 || (sh[0] & (1 << t))) &&
             ((set[t] & 2) == 0 || xh[1] == t + 1 || (sh[1] & (1 << t))))
    :: else ->
      assert(rc == ETIMEDOUT || rc == ECANCELED);
      assert(xh[0] != t + 1 && xh[1] != t + 1 && (sh[0] & (1 << t)) == 0 &&
             (sh[1] & (1 << t)) == 0)
    fi
  }
}

proctype thread(byte t) {
  byte r, rc, i, e, res, fire, u, victim;
  bool hw, again, wake, sig, cas, did, p, done, expired, to, dl, part, gap;
  byte gk, gi, gj, gf, ge, ge2, gpos, gself;
  bool gok, gunsure, gch;
#ifdef BUG_SKIP_STALE
  byte stale;
#endif

  do
  :: r < ROUNDS ->
    lock_all();
    if
    :: rc == OK -> release_all()
    :: else -> skip
    fi;
    atomic { set[t] = 0; xm[t] = 0; dl = 0; rc = 0; r++ }
  :: else -> break
  od;
  /* ordo_cancel of another thread's wait, or nothing. */
  if
  :: MAY_CANCEL(t) ->
    atomic { victim = (t + 1) % NT; r = 0 };
    abort_wait(victim, ECANCELED)
  :: true -> skip
  fi
}

/* Time: the oldest waiter that has not starved may starve, at any moment. */
proctype clock() {
end:
  do
  :: atomic { nstarv < wn -> starving[wl[nstarv]] = 1; nstarv++ }
  od
}

init {
  atomic {
    run clock();
    run thread(0);
    run thread(1);
#if NT > 2
    run thread(2)
#endif
  }
}
