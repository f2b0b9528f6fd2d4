/*
 * exec.pml -- a Promela model of the executor's action protocol
 * (src/exec/exec.c): a detection that stores the task to help, the actor
 * that lets the executor mutex go to add the record and takes it again to
 * dequeue and run the help inline; future waits, their cancels and
 * time-outs; workers that come free and take tasks from the queue;
 * shutdown (DRAIN and NOW) and destroy; every task's reference count and
 * the moment its memory is freed. See src/exec/README.md, "The model".
 *
 * What it mirrors (exec.c):
 *   worker         worker_main's loop, run_locked / start_locked /
 *                  run_started_locked, finish_quiet_locked, the broadcast
 *                  with mu let go, the executor's reference dropped
 *   PH_WAIT..END   ordo_future_wait: the look without mu and fut_ref,
 *                  wait_register_locked, wait_loop (done, cancelled, an
 *                  action, a search, the deadline, cond_until),
 *                  wait_unregister_locked (and its drop of a help not
 *                  taken), flush_record, the value read, fut_unref
 *   act()          act_locked: flush_record (mu let go: PH_FLUSH), the
 *                  help read after it, run only while still queued, the
 *                  detection's reference dropped after it ran (or at once)
 *   pool_check     pool_check, stuck, help_for: every worker busy with a
 *                  queue, no action pending, the greatest set of stuck
 *                  workers is all of them; the actor (the closer, else a
 *                  stuck worker's wait on a queued task, woken), the
 *                  record, INLINE's help with its reference (fut_ref)
 *   need_search    need_search_locked; on_wait (PH_SRCH) and on_block
 *                  (PH_LBLK), each under wait_mu
 *   main           ordo_exec_submit (and its signal of work_cv),
 *                  ordo_future_cancel (queued: dequeued, cancelled, the
 *                  executor's reference dropped; running: its waits
 *                  marked and woken, it runs on), ordo_future_release,
 *                  ordo_exec_shutdown (cancel_queue_locked for NOW),
 *                  ordo_exec_destroy (NOW, the joins, no worker nor wait
 *                  left)
 *   PH_TXN..REL    a task's txn: ordo__exec_txn_begun, the engine's lock
 *                  of one key L (granted, or queued with the block hook),
 *                  ordo__exec_txn_ending, the release that grants L to its
 *                  waiter
 *
 * The scenarios (SCEN; 0 picks SC_JOIN or SC_LOCK at the start). main
 * submits the tasks in order: A (0), C (1), B (2) and, in SC_NEST, D (3);
 * a task's function may wait on a future that main submits later (it
 * starts its wait once the future exists: a gate of the test's).
 *   SC_JOIN  A waits on B (its wait may time out), C waits on A. With two
 *            workers running A and C and B queued, the pool deadlock is
 *            closed by A's wait (the help is its own target) or by C's
 *            (the help, B, is at the end of C's chain through A: C's
 *            wait holds no reference on it).
 *   SC_LOCK  A locks L, then waits on B; C locks L (its lock wait may time
 *            out). The deadlock is closed by A's wait, or by C's lock wait
 *            (on_block, no closer): then A, asleep, is the actor, woken.
 *   SC_NEST  SC_JOIN, and B waits on D: helping B inline, the actor's
 *            thread meets a second deadlock, and B runs D inline.
 * Then main may cancel any task (NCANCEL times: queued or running), and
 * releases its futures either at once (as soon as no function will still
 * pass one to ordo_future_wait) or after the executor is destroyed; it
 * shuts the pool down, DRAIN or NOW, and destroys it.
 *
 * Abstracted away, and why:
 *   - One pool, detection on, policy INLINE (FAIL with -DFAIL_POLICY).
 *     REPORT leaves a pool deadlock to the waits' time-outs by design, so
 *     property 4 does not hold for it; COMPENSATE's spare is a new worker
 *     (no window: when none can start, act_locked calls help_for again
 *     with mu held), not modelled.
 *   - Mixed cycles: a scenario's waits on futures form no cycle, so
 *     mixed_search finds none and pool_check runs; the model calls it.
 *   - The record's contents, rep_sig, ids and the dump: a record is
 *     rec_set, whose adding (and the on_deadlock callback) lets mu go.
 *   - The recheck of a saturated pool's waits (XRECHECK_MAX_MS): defect 3
 *     needs a lock holder outside the pool, and here every holder of L is
 *     a task. Without it, the model checks the README's argument that the
 *     block events' own searches find every pool deadlock of these
 *     scenarios (property 4); with it, a missed one would hide as a cycle
 *     of rechecks, which a search for end states cannot see.
 *   - Time: a wait with a deadline may wake at it at any moment while it
 *     sleeps, and then returns ORDO_ETIMEDOUT unless its target is over,
 *     it was cancelled or it has an action first; a lock wait with a
 *     deadline may end at any moment while L is not yet handed to it.
 *     WAIT_SPIN's looks are the one look without mu.
 *   - Condition variables: a broadcast wakes every sleeper on that cv, a
 *     signal one worker still asleep on work_cv; no spurious wake-ups (a
 *     deadline's wake-up takes the same path).
 *   - The engine: one key L in X, its holder and its one waiter; a release
 *     hands it to the waiter. wait_mu is held from the enqueue through the
 *     block hook (lblk), and by the searches and the release.
 *   - Memory: a task is a slot with its reference count; a slot freed is
 *     never reused (a touch of it is already the error). A task's atomic
 *     state and refs, read without mu by the fast paths, are single steps.
 *   - mu is a variable (its holder); what the C does under mu between two
 *     points where it lets mu go is one or more atomic steps of its holder.
 *   - Foreign pools and their notes, the graph dump, statistics.
 *
 * Properties:
 *   1 No freed task touched: every read or write of a task's memory (the
 *     help's state in act_locked, a wait's target, a broadcast on its cv,
 *     cancel, release, the value) asserts that the slot is not freed.
 *   2 Each task runs at most once, and a task that is run was not
 *     cancelled (asserted where it starts: from the queue, or as a help).
 *   3 No reference lost: once the executor is destroyed and main has
 *     released its futures, every task is freed, and every task either
 *     ran or was cancelled (never both, never neither).
 *   4 Nothing waits for ever (spin's invalid end states): every worker
 *     ends, and main's shutdown and destroy return. A task left queued
 *     while a worker is free or after a DRAIN, a pool deadlock that INLINE
 *     does not resolve (its help never runs), and a lost wake-up are each
 *     a state where a thread cannot move and has not ended. Waits may have
 *     no deadline, so these runs are searched.
 *   5 A cancel of a running task ends the waits on it: a task whose
 *     running self was cancelled returns only once each wait on it that
 *     the cancel marked (from another thread) has returned, as a test
 *     would hold the task at a gate until the waiter is joined; a waiter
 *     that slept on would leave that state with no move (4). A wait whose
 *     thread is acting (running a help inline) returns after the help: it
 *     is not held to it.
 *
 * The bounds: 2 workers (NW), 3 tasks, one cancel (NCANCEL), SC_JOIN or
 * SC_LOCK: 538,099 states, make test (spin_exec_quick), with the
 * deliberate bugs. make verify: -DSCEN=3 -DNW=3 -DNCANCEL=2
 * -DALL_DEADLINES (SC_NEST with three workers, so that a pool deadlock
 * holds all three; two cancels; every future wait with a deadline):
 * 49,008,161 states, 2.4 GB. Other knobs: -DFAIL_POLICY (the
 * FAIL policy: the actor's wait returns ORDO_EDEADLK), -DALL_DEADLINES.
 *
 * Deliberate bugs (each must make spin report an error; see
 * tests/spin/run_spin.sh, which checks that every one of them does):
 *   -DBUG_HELP_NO_REF  issue 31 defect 1: the help is stored without a
 *       reference (and none is dropped). SC_JOIN: C's search makes C the
 *       actor, its help B at the end of its chain through A; C lets mu go
 *       for the record; A's wait times out, A returns, its worker comes
 *       free and runs B from the queue; main releases B, which is freed;
 *       C takes mu again and reads the help's state: freed[h]
 *   -DBUG_HELP_NO_RECHECK  act_locked runs the help without looking that
 *       it is still queued: the same run, and C runs B a second time
 *   -DBUG_UNREGISTER_KEEPS_HELP  wait_unregister_locked keeps the
 *       reference of an INLINE action the wait ended before taking: C is
 *       the actor, but its target A is done (A's wait timed out) before C
 *       acts; B's reference stays and B is never freed
 *   -DBUG_NOW_LEAKS_REF  shutdown NOW (cancel_queue_locked) drops no
 *       executor's reference: a task it cancels is never freed
 *   -DBUG_NOW_NO_WAKE  shutdown NOW does not wake the waits on the tasks it
 *       cancels: SC_LOCK, A waits on B while C runs; NOW cancels B, and A
 *       sleeps for ever (invalid end state)
 *   -DBUG_CANCEL_RUNNING_NO_WAKE  ordo_future_cancel of a running task
 *       marks the waits on it but wakes none: C sleeps on in its wait on A,
 *       which returns only once C's wait has (invalid end state)
 *   -DBUG_UNREF_BEFORE_WAKE  run_started_locked drops the executor's
 *       reference before its broadcast with mu let go: C, not asleep, sees
 *       A done and drops its wait's reference, main released A early: the
 *       broadcast touches A freed
 *   -DBUG_CANCEL_FREES  ordo_future_cancel of a queued task that nobody
 *       waits on frees it at once, while the submitter's reference is out:
 *       C's ordo_future_wait on A touches it freed
 *   -DBUG_SUBMIT_UNLOCKED_IDLE  ordo_exec_submit looks at nidle before it
 *       takes mu, to skip the signal when no worker sleeps. SC_LOCK: main
 *       sees both workers busy; C's lock wait times out, C returns, its
 *       worker finds the queue empty and sleeps; B is queued with no
 *       signal; A waits on B in a pool with a free worker (no deadlock to
 *       find), and main's join waits for ever (invalid end state)
 *
 * Run (what tests/spin/run_spin.sh does, in a temporary folder):
 *   spin -a exec.pml && cc -DSAFETY -DNOCLAIM -DCOLLAPSE -o pan pan.c && ./pan -m1000000
 * and expect "errors: 0". A trail replays with spin -t (and the same -D
 * options); its MSC: lines say which task starts where, each detection
 * (actor, help), each cancel, each task done and each task freed.
 */

/* ---- Bounds --------------------------------------------------------------- */

#define SC_JOIN 1  /* A waits on B, C waits on A: futures alone */
#define SC_LOCK 2  /* A holds L and waits on B, C blocks on L */
#define SC_NEST 3  /* SC_JOIN, and B waits on D: INLINE inside INLINE */

#ifndef SCEN
#define SCEN 0 /* 0: SC_JOIN or SC_LOCK, chosen at the start */
#endif
#ifndef NW
#define NW 2 /* workers */
#endif
#ifndef NCANCEL
#define NCANCEL 1 /* ordo_future_cancel calls main may make */
#endif

#define NTMAX 4 /* task slots */
#define NO 15   /* no task */

/* A task's state (X_*), and NEW for a slot not yet submitted. */
#define QUEUED 0
#define RUNNING 1
#define DONE 2
#define CANCELED 3
#define NEW 4

/* What a detection asks of its actor (XA_*). */
#define A_NONE 0
#define A_INLINE 1
#define A_FAIL 2

/* What a wait returns. */
#define R_OK 0
#define R_CANCELED 1
#define R_TIMEDOUT 2
#define R_DEADLK 3

/* Where a task's thread is in the task's function (the body, below). */
#define PH_NONE 0   /* not running */
#define PH_TXN 1    /* ordo_txn_begin (ordo__exec_txn_begun, under mu) */
#define PH_LOCK 2   /* ordo_lock of L: the engine's acquire */
#define PH_LBLK 3   /* queued behind L's holder: the block hook, on_block */
#define PH_LSLEEP 4 /* the lock wait sleeps: granted, or times out */
#define PH_WAIT 5   /* ordo_future_wait: its look without mu, its fut_ref */
#define PH_REG 6    /* ... takes mu, wait_register_locked */
#define PH_LOOP 7   /* wait_loop's next turn (mu held) */
#define PH_FLUSH 8  /* act_locked: flush_record let mu go (the record, the callback) */
#define PH_ACT 9    /* act_locked with mu held, no record to add */
#define PH_HELP 10  /* act_locked runs the help inline (it is the child) */
#define PH_SRCH 11  /* wait_loop let mu go: ordo__table_ext_search, on_wait */
#define PH_SRCH2 12 /* ... and takes mu again */
#define PH_SLEEP 13 /* cond_until on the target's cv */
#define PH_END 14   /* wait_loop returned: wait_unregister_locked, flush_record */
#define PH_END2 15  /* ... flush_record let mu go */
#define PH_END3 16  /* ... the value read, mu let go, fut_unref (mu held) */
#define PH_TXEND 17 /* ordo_txn_end: ordo__exec_txn_ending (under mu) */
#define PH_REL 18   /* ... the engine lets L go (the waiter is granted) */
#define PH_FIN 19   /* the function returned: finish_quiet_locked */
#define PH_BCAST 20 /* ... mu let go: the broadcast of the task's cv */
#define PH_RELOCK 21 /* ... mu taken again */
#define PH_FIN2 22  /* ... the executor's reference dropped (mu held) */

#define BIT(m, t) ((((m) >> (t)) & 1) == 1)

/* ---- The state ------------------------------------------------------------ */

byte mu; /* xplace.mu: 0, or the worker w + 1 that holds it across steps
          * (main's sections under mu are each one atomic step) */

/* The scenario: what each task's function does. */
byte ntask;
byte dep[NTMAX] = NO; /* the task it waits on (ordo_future_wait), or NO */
byte wtr[NTMAX] = NO; /* the task whose function waits on it, or NO */
byte lkm;             /* the tasks that lock L around their wait, a bit each */
byte dlm;             /* the tasks whose future wait has a deadline */
byte ldlm;            /* the tasks whose lock wait has a deadline */

/* Tasks (struct ordo_future_s), under mu but refs (atomic). */
byte st[NTMAX] = NEW;
byte refs[NTMAX];
bool freed[NTMAX];     /* its memory is freed: touching it is the bug */
byte par[NTMAX] = NO;  /* the task on whose stack it runs inline */
byte chi[NTMAX] = NO;  /* the task running inline on its stack */
byte tw[NTMAX] = NO;   /* the worker running its chain (its top's thread) */
byte nwt[NTMAX];       /* nwaiters */
bool ext[NTMAX];       /* its txn is its (own[], the owner's ext_task) */
byte ph[NTMAX];        /* where its function is */

/* Waits (struct xwait): a task's function makes at most one, so a wait is
 * named by its waiting task (its self); its target is dep[self]. */
bool wreg[NTMAX];       /* registered (in e->waits; self->wait) */
byte wact[NTMAX];       /* action */
byte whelp[NTMAX] = NO; /* help, with its reference */
bool wrec[NTMAX];       /* rec_set */
bool wcan[NTMAX];       /* cancelled (ordo_future_cancel of its running target) */
bool wsl[NTMAX];        /* asleep on its target's cv */
bool srch[NTMAX];       /* wait_loop's searched */
bool expd[NTMAX];       /* its deadline passed */
byte wrc[NTMAX];        /* what it returns */
byte held[NTMAX] = NO;  /* act_locked's held while the help runs */
byte nwaits;            /* waits registered (xplace.nwaits; e->waits) */

/* The pool (struct ordo_exec_s). */
byte q[NTMAX] = NO; /* the queue, FIFO */
byte nq;
byte nbusy;
byte nalive = NW;
byte nidle;
bool shut;
byte wtop[NW] = NO; /* the top task each worker runs */
bool wslw[NW];      /* asleep on work_cv */
byte nexit;         /* workers whose thread has ended (pthread_join) */
bool msl;           /* main asleep on idle_cv */

/* The lock L in the engine: its holder's and its waiter's txns (a txn is
 * named by the task that began it), and wait_mu held across the enqueue
 * and the block hook (lblk). */
byte lhold = NO;
byte lwait = NO;
bool lblk;

/* Ghosts. */
bool ran[NTMAX];    /* it was started */
bool cxl[NTMAX];    /* it was cancelled */
bool called[NTMAX]; /* its function is past its ordo_future_wait call's own
                     * reference (or will never make it) */
bool gate[NTMAX];   /* its wait was cancelled while its target ran, from
                     * another thread: the target's function ends only once
                     * that wait has (GATED) */

bool mark[NW]; /* pool_check's marks (a search's epoch), reset after it */

/* The test's gate: task t's function returns only once each wait on it
 * that a cancel marked has returned, unless that wait's thread is acting
 * (act_locked runs a help inline, and the wait returns after it). */
#define GATED1(w, t) (gate[w] && dep[w] == t && wreg[w] && \
                      ph[w] != PH_FLUSH && ph[w] != PH_ACT && ph[w] != PH_HELP)
#define GATED(t) (GATED1(0, t) || GATED1(1, t) || GATED1(2, t) || GATED1(3, t))

/* Temporaries of one atomic step (not part of the state). */
hidden byte k, i, r, pin, x, d, actor, h, a, pend, changed, all, p, u;

/* ---- Futures' lives ------------------------------------------------------- */

/* Every read or write of a task's memory. */
inline touch(t) {
  assert(!freed[t]) /* no freed task touched */
}

inline fut_ref(t) {
  touch(t);
  refs[t]++
}

inline fut_unref(t) {
  touch(t);
  assert(refs[t] > 0);
  refs[t]--;
  if
  :: refs[t] == 0 -> freed[t] = 1; printf("MSC: task %d freed\n", t)
  :: else -> skip
  fi
}

/* The worker's innermost task: its chain from the top, child by child. */
inline innermost(w, res) {
  res = wtop[w];
  do
  :: res != NO && chi[res] != NO -> res = chi[res]
  :: else -> break
  od
}

/* pthread_cond_broadcast of task t's cv: its waiters wake. */
inline bcast(t) {
  touch(t);
  k = 0;
  do
  :: k < ntask ->
    if
    :: wreg[k] && dep[k] == t -> wsl[k] = 0
    :: else -> skip
    fi;
    k++
  :: else -> break
  od;
  k = 0
}

inline dequeue(t) {
  touch(t);
  k = 0;
  do
  :: k < nq && q[k] != t -> k++
  :: else -> break
  od;
  assert(k < nq); /* TAILQ_REMOVE of a task that is not queued */
  do
  :: k + 1 < nq -> q[k] = q[k + 1]; k++
  :: else -> break
  od;
  nq--;
  q[nq] = NO;
  k = 0
}

/* The first step of task t's function, once it runs. */
#define FIRST(t) (BIT(lkm, t) -> PH_TXN : (dep[t] != NO -> PH_WAIT : PH_FIN))

/* start_locked(t, parent) on worker me, and run_started_locked's unlock. */
inline start(t, pt) {
  touch(t);
  assert(!cxl[t]); /* a task that is run was not cancelled */
  assert(!ran[t]); /* each task runs at most once */
  ran[t] = 1;
  printf("MSC: task %d starts on worker %d (parent %d)\n", t, me, pt);
  st[t] = RUNNING;
  par[t] = pt;
  chi[t] = NO;
  tw[t] = me;
  if
  :: pt != NO -> chi[pt] = t
  :: else -> wtop[me] = t; nbusy++
  fi;
  ph[t] = FIRST(t)
}

/* ---- Detection: pool deadlocks ------------------------------------------- */

/* stuck(): can worker w's chain make no progress while every marked worker
 * cannot? Its innermost task waits on a queued task, or on a task running
 * on a marked worker, or its chain's txn waits on L whose holder is a txn
 * of a task running on a marked worker. */
inline stuck(w, res) {
  innermost(w, pin);
  res = 0;
  if
  :: wreg[pin] ->
    x = dep[pin];
    touch(x);
    if
    :: wact[pin] != A_NONE -> skip /* about to act on an earlier detection */
    :: wact[pin] == A_NONE && st[x] == QUEUED -> res = 1
    :: wact[pin] == A_NONE && st[x] == RUNNING -> res = mark[tw[x]]
    :: else -> skip
    fi
  :: !wreg[pin] && lwait != NO && ext[lwait] && tw[lwait] == w ->
    /* chain_lock_wait: its txn waits; ordo__owner_blockers_locked: L's
     * holder, which must be the txn of a task on a marked worker */
    res = (lhold != NO && ext[lhold] && st[lhold] == RUNNING && mark[tw[lhold]])
  :: else -> skip
  fi;
  pin = 0;
  x = 0
}

/* help_for(actor): the queued task at the end of the actor's chain of
 * waits, else the first queued task a worker's innermost task waits on. */
inline help_for(w, res) {
  x = dep[w];
  touch(x);
  i = 0;
  do
  :: i <= nbusy && st[x] == RUNNING ->
    innermost(tw[x], pin);
    if
    :: !wreg[pin] -> break
    :: else -> x = dep[pin]; touch(x); i++
    fi
  :: else -> break
  od;
  if
  :: st[x] == QUEUED -> res = x
  :: else ->
    res = NO;
    i = 0;
    do
    :: i < NW ->
      if
      :: wtop[i] != NO ->
        innermost(i, pin);
        if
        :: wreg[pin] && st[dep[pin]] == QUEUED -> res = dep[pin]; break
        :: else -> skip
        fi
      :: else -> skip
      fi;
      i++
    :: else -> break
    od
  fi;
  i = 0;
  pin = 0;
  x = 0
}

/*
 * pool_check(closer), under mu (and wait_mu): every worker busy and the
 * queue not empty; no action pending; the greatest set of stuck workers
 * (marks removed until nothing changes) is all of them; the actor is the
 * closer when it is one of their waits, else the first of their waits on
 * a queued task; the help is help_for(actor). The actor gets the record
 * and the action; one that sleeps is woken.
 */
inline pool_check(closer) {
  if
  :: nbusy < nalive || nq == 0 -> skip
  :: else ->
    pend = 0;
    i = 0;
    do
    :: i < NW ->
      if
      :: wtop[i] != NO ->
        innermost(i, pin);
        if
        :: wreg[pin] && wact[pin] != A_NONE -> pend = 1
        :: else -> skip
        fi
      :: else -> skip
      fi;
      i++
    :: else -> break
    od;
    if
    :: pend -> skip /* that formation is being dealt with */
    :: else ->
      i = 0;
      do
      :: i < NW -> mark[i] = (wtop[i] != NO); i++
      :: else -> break
      od;
      changed = 1;
      do
      :: changed ->
        changed = 0;
        u = 0;
        do
        :: u < NW ->
          if
          :: mark[u] ->
            stuck(u, r);
            if
            :: !r -> mark[u] = 0; changed = 1
            :: else -> skip
            fi
          :: else -> skip
          fi;
          u++
        :: else -> break
        od
      :: else -> break
      od;
      all = 1;
      actor = NO;
      u = 0;
      do
      :: u < NW ->
        if
        :: wtop[u] != NO && !mark[u] -> all = 0
        :: wtop[u] != NO && mark[u] ->
          innermost(u, pin);
          if
          :: wreg[pin] && pin == closer -> actor = closer
          :: wreg[pin] && pin != closer && actor == NO && st[dep[pin]] == QUEUED ->
            actor = pin
          :: else -> skip
          fi
        :: else -> skip
        fi;
        u++
      :: else -> break
      od;
      if
      :: all && actor != NO ->
        help_for(actor, h);
        if
        :: h != NO ->
          printf("MSC: pool deadlock: actor %d, help %d\n", actor, h);
          wrec[actor] = 1;
#ifdef FAIL_POLICY
          wact[actor] = A_FAIL;
#else
          wact[actor] = A_INLINE;
          whelp[actor] = h;
#ifndef BUG_HELP_NO_REF
          fut_ref(h);
#endif
#endif
          if
          :: actor != closer -> bcast(dep[actor])
          :: else -> skip
          fi
        :: else -> skip /* no queued task holds it up */
        fi
      :: else -> skip
      fi;
      i = 0;
      do
      :: i < NW -> mark[i] = 0; i++
      :: else -> break
      od
    fi
  fi;
  pend = 0;
  changed = 0;
  all = 0;
  actor = 0;
  h = 0;
  i = 0;
  u = 0;
  r = 0;
  pin = 0
}

/* need_search_locked(w): the pool is saturated with a queue, or the
 * chain of w's thread holds a txn or is waited on. */
inline need_search(w, res) {
  res = (nbusy >= nalive && nq > 0);
  pin = wtop[tw[w]];
  do
  :: pin != NO && !res -> res = (ext[pin] || nwt[pin] > 0); pin = chi[pin]
  :: else -> break
  od;
  pin = 0
}

/* ---- The future wait (wait_loop, act_locked) ------------------------------ */

/* The rest of wait_loop's turn once it neither returns, acts nor searches:
 * the deadline, or the sleep on the target's cv (mu let go). */
inline sleep_or_timeout() {
  if
  :: expd[cur] -> wrc[cur] = R_TIMEDOUT; ph[cur] = PH_END
  :: else -> wsl[cur] = 1; mu = 0; ph[cur] = PH_SLEEP
  fi
}

/* One turn of wait_loop, mu held: the target done or cancelled, this wait
 * cancelled, an action to take, a search to make, or the sleep. */
inline loop_top() {
  d = dep[cur];
  touch(d);
  if
  :: st[d] == DONE -> wrc[cur] = R_OK; ph[cur] = PH_END
  :: st[d] == CANCELED || (st[d] != DONE && wcan[cur]) ->
    wrc[cur] = R_CANCELED; ph[cur] = PH_END
  :: st[d] != DONE && st[d] != CANCELED && !wcan[cur] ->
    if
    :: wact[cur] != A_NONE ->
      /* act_locked: flush_record lets mu go when there is a record */
      if
      :: wrec[cur] -> wrec[cur] = 0; mu = 0; ph[cur] = PH_FLUSH
      :: else -> ph[cur] = PH_ACT
      fi
    :: wact[cur] == A_NONE && !srch[cur] ->
      srch[cur] = 1;
      need_search(cur, r);
      if
      :: r -> mu = 0; ph[cur] = PH_SRCH
      :: else -> sleep_or_timeout()
      fi;
      r = 0
    :: wact[cur] == A_NONE && srch[cur] -> sleep_or_timeout()
    fi
  fi;
  d = 0
}

/* act_locked after flush_record, mu held: run the help if it is still
 * queued, else drop it; then wait on (a new block event). */
inline act() {
  a = wact[cur];
  h = whelp[cur];
#ifndef BUG_HELP_NO_REF
  held[cur] = h;
#endif
  whelp[cur] = NO;
  if
  :: a == A_FAIL -> wrc[cur] = R_DEADLK; ph[cur] = PH_END
  :: a == A_INLINE ->
    if
    :: h != NO ->
      touch(h); /* fstate(help) */
#ifdef BUG_HELP_NO_RECHECK
      r = 1
#else
      r = (st[h] == QUEUED)
#endif
    :: else -> r = 0
    fi;
    if
    :: r ->
      printf("MSC: task %d runs the help %d inline\n", cur, h);
      assert(!cxl[h]); /* a task that is run was not cancelled */
      assert(!ran[h]); /* each task runs at most once */
      dequeue(h);
      start(h, cur);
      wact[cur] = A_NONE;
      mu = 0;
      ph[cur] = PH_HELP;
      cur = h
    :: else ->
      if
      :: held[cur] != NO -> fut_unref(held[cur]); held[cur] = NO
      :: else -> skip
      fi;
      wact[cur] = A_NONE;
      srch[cur] = 0;
      ph[cur] = PH_LOOP
    fi
  fi;
  a = 0;
  h = 0;
  r = 0
}

/* The end of ordo_future_wait once wait_unregister_locked and
 * flush_record are done (mu held): the value read, mu let go, the wait's
 * reference dropped. */
inline wait_done() {
  d = dep[cur];
  if
  :: wrc[cur] == R_OK -> touch(d) /* *value = f->value */
  :: else -> skip
  fi;
  mu = 0;
  fut_unref(d);
  wrc[cur] = 0;
  ph[cur] = (BIT(lkm, cur) -> PH_TXEND : PH_FIN);
  d = 0
}

/* finish_quiet_locked's caller, after the broadcast (mu held): the
 * executor's reference dropped; back to the parent's act_locked (which
 * drops the detection's reference and waits on), or to the worker's
 * loop, mu held. */
inline finished() {
#ifdef BUG_UNREF_BEFORE_WAKE
  if
  :: !dropped -> fut_unref(cur)
  :: else -> dropped = 0 /* dropped before the broadcast */
  fi;
#else
  fut_unref(cur);
#endif
  p = par[cur];
  par[cur] = NO;
  ph[cur] = PH_NONE;
  if
  :: p != NO ->
    if
    :: held[p] != NO -> fut_unref(held[p]); held[p] = NO
    :: else -> skip
    fi;
    wact[p] = A_NONE;
    srch[p] = 0;
    ph[p] = PH_LOOP;
    cur = p
  :: else -> cur = NO
  fi;
  p = 0
}

/* ---- Workers (worker_main) and what their tasks' functions do ------------- */

proctype worker(byte me) {
  byte cur = NO; /* the innermost task this worker runs */
  bool asleep;
#ifdef BUG_UNREF_BEFORE_WAKE
  bool dropped;
#endif

  do
  /* worker_main's loop, mu held or taken: a task from the queue, or the
   * exit once shut, or the sleep on work_cv. */
  :: cur == NO && !asleep ->
    atomic {
      (mu == 0 || mu == me + 1) -> mu = me + 1;
      if
      :: nq > 0 ->
        cur = q[0];
        dequeue(cur);
        start(cur, NO);
        mu = 0
      :: nq == 0 && shut ->
        nalive--;
        msl = 0;
        mu = 0;
        nexit++;
        break
      :: nq == 0 && !shut -> nidle++; wslw[me] = 1; asleep = 1; mu = 0
      fi
    }
  :: asleep -> atomic { !wslw[me] && mu == 0 -> mu = me + 1; nidle--; asleep = 0 }

  /* ordo_txn_begin inside the task: ordo__exec_txn_begun. */
  :: cur != NO && ph[cur] == PH_TXN ->
    atomic { mu == 0 -> touch(cur); ext[cur] = 1; ph[cur] = PH_LOCK }
  /* ordo_lock(L): granted at once, or queued with wait_mu held for the
   * block hook. */
  :: cur != NO && ph[cur] == PH_LOCK ->
    atomic {
      !lblk ->
      if
      :: lhold == NO && lwait == NO ->
        lhold = cur;
        ph[cur] = (dep[cur] != NO -> PH_WAIT : PH_TXEND)
      :: else -> lwait = cur; lblk = 1; ph[cur] = PH_LBLK
      fi
    }
  :: cur != NO && ph[cur] == PH_LSLEEP ->
    if
    :: atomic { lhold == cur -> ph[cur] = (dep[cur] != NO -> PH_WAIT : PH_TXEND) }
    :: atomic {
        BIT(ldlm, cur) && lwait == cur && !lblk ->
        /* its deadline: ordo__abort_wait, ORDO_ETIMEDOUT; the task goes
         * on without L (to its txn's end) */
        printf("MSC: task %d's lock wait times out\n", cur);
        lwait = NO;
        called[cur] = 1;
        ph[cur] = PH_TXEND
      }
    fi

  /* ordo_future_wait(dep): the state read without mu, then fut_ref (the
   * future exists once main has submitted it: a gate of the test's). */
  :: cur != NO && ph[cur] == PH_WAIT ->
    atomic {
      st[dep[cur]] != NEW ->
      d = dep[cur];
      touch(d);
      if
      :: st[d] == DONE || st[d] == CANCELED ->
        ph[cur] = (BIT(lkm, cur) -> PH_TXEND : PH_FIN)
      :: else -> fut_ref(d); ph[cur] = PH_REG
      fi;
      called[cur] = 1;
      d = 0
    }
  :: cur != NO && ph[cur] == PH_REG ->
    atomic {
      mu == 0 -> mu = me + 1;
      /* wait_register_locked */
      d = dep[cur];
      touch(d);
      wreg[cur] = 1;
      nwt[d]++;
      nwaits++;
      d = 0;
      ph[cur] = PH_LOOP
    }
  :: cur != NO && ph[cur] == PH_LOOP -> atomic { assert(mu == me + 1); loop_top() }
  :: cur != NO && ph[cur] == PH_FLUSH -> atomic { mu == 0 -> mu = me + 1; ph[cur] = PH_ACT }
  :: cur != NO && ph[cur] == PH_ACT -> atomic { assert(mu == me + 1); act() }
  /* The searches, each under wait_mu (lblk is the lock waiter's):
   * on_block from PH_LBLK, with no future wait in flight (no mu), or mu
   * and pool_check with no closer; on_wait from PH_SRCH, mu and pool_check
   * with this wait as the closer. Neither finds a cycle through futures
   * here (mixed_search). */
  :: cur != NO && ((ph[cur] == PH_LBLK && (nwaits == 0 || mu == 0)) ||
                   (ph[cur] == PH_SRCH && mu == 0 && !lblk)) ->
    atomic {
      if
      :: ph[cur] == PH_LBLK ->
        d = (nwaits > 0 && ext[cur]);
        r = NO;
        lblk = 0;
        ph[cur] = PH_LSLEEP
      :: else ->
        touch(dep[cur]);
        d = (st[dep[cur]] != DONE && wact[cur] == A_NONE);
        r = cur;
        ph[cur] = PH_SRCH2
      fi;
      if
      :: d -> pool_check(r)
      :: else -> skip
      fi;
      d = 0;
      r = 0
    }
  :: cur != NO && ph[cur] == PH_SRCH2 -> atomic { mu == 0 -> mu = me + 1; ph[cur] = PH_LOOP }
  :: cur != NO && ph[cur] == PH_SLEEP ->
    if
    :: atomic { !wsl[cur] && mu == 0 -> mu = me + 1; ph[cur] = PH_LOOP }
    :: atomic {
        BIT(dlm, cur) && !expd[cur] && mu == 0 ->
        /* cond_until's deadline */
        wsl[cur] = 0;
        expd[cur] = 1;
        mu = me + 1;
        ph[cur] = PH_LOOP
      }
    fi
  :: cur != NO && ph[cur] == PH_END ->
    atomic {
      assert(mu == me + 1);
      /* wait_unregister_locked */
      d = dep[cur];
      if
      :: whelp[cur] != NO ->
#if !defined(BUG_UNREGISTER_KEEPS_HELP) && !defined(BUG_HELP_NO_REF)
        fut_unref(whelp[cur]); /* an INLINE action the wait ended before taking */
#endif
        whelp[cur] = NO
      :: else -> skip
      fi;
      touch(d);
      nwt[d]--;
      if
      :: shut -> msl = 0
      :: else -> skip
      fi;
      gate[cur] = 0;
      wreg[cur] = 0;
      nwaits--;
      wact[cur] = A_NONE;
      wcan[cur] = 0;
      wsl[cur] = 0;
      srch[cur] = 0;
      expd[cur] = 0;
      d = 0;
      /* flush_record */
      if
      :: wrec[cur] -> wrec[cur] = 0; mu = 0; ph[cur] = PH_END2
      :: else -> ph[cur] = PH_END3
      fi
    }
  :: cur != NO && ph[cur] == PH_END2 -> atomic { mu == 0 -> mu = me + 1; ph[cur] = PH_END3 }
  :: cur != NO && ph[cur] == PH_END3 -> atomic { assert(mu == me + 1); wait_done() }

  /* ordo_txn_end: the task forgets its txn (under mu), then the engine
   * lets L go, granting it to its waiter. */
  :: cur != NO && ph[cur] == PH_TXEND ->
    atomic { mu == 0 -> ext[cur] = 0; ph[cur] = PH_REL }
  :: cur != NO && ph[cur] == PH_REL ->
    atomic {
      !lblk ->
      if
      :: lhold == cur && lwait != NO -> lhold = lwait; lwait = NO
      :: lhold == cur && lwait == NO -> lhold = NO
      :: else -> skip
      fi;
      ph[cur] = PH_FIN
    }

  /* The function returned: run_started_locked's end (finish_quiet_locked,
   * the broadcast with mu let go, the executor's reference). A task whose
   * running self was cancelled with waits in flight returns only once
   * those waits have (the test's gate: the waiter stops waiting). */
  :: cur != NO && ph[cur] == PH_FIN ->
    atomic {
      mu == 0 && !GATED(cur) -> mu = me + 1;
      touch(cur);
      ext[cur] = 0;
      if
      :: par[cur] != NO -> chi[par[cur]] = NO
      :: else -> wtop[me] = NO; nbusy--
      fi;
      tw[cur] = NO;
      st[cur] = DONE;
      printf("MSC: task %d done\n", cur);
      if
      :: shut -> msl = 0
      :: else -> skip
      fi;
      if
      :: nwt[cur] > 0 ->
#ifdef BUG_UNREF_BEFORE_WAKE
        fut_unref(cur);
        dropped = 1;
#endif
        mu = 0;
        ph[cur] = PH_BCAST
      :: else -> ph[cur] = PH_FIN2
      fi
    }
  :: cur != NO && ph[cur] == PH_BCAST -> atomic { bcast(cur); ph[cur] = PH_RELOCK }
  :: cur != NO && ph[cur] == PH_RELOCK -> atomic { mu == 0 -> mu = me + 1; ph[cur] = PH_FIN2 }
  :: cur != NO && ph[cur] == PH_FIN2 -> atomic { assert(mu == me + 1); finished() }
  od
}

/* ---- The user: submits, cancels, releases, shuts down, destroys ----------- */

#define OVER(t) (t >= ntask || st[t] == DONE || st[t] == CANCELED)

/* ordo_exec_shutdown(how, ORDO_FOREVER) */
inline shutdown(now) {
  atomic {
    mu == 0 ->
    shut = 1;
    if
    :: now ->
      /* cancel_queue_locked */
      do
      :: nq > 0 ->
        t = q[0];
        dequeue(t);
        st[t] = CANCELED;
        cxl[t] = 1;
        printf("MSC: task %d cancelled by shutdown\n", t);
#ifndef BUG_NOW_NO_WAKE
        bcast(t);
#endif
#ifndef BUG_NOW_LEAKS_REF
        fut_unref(t);
#endif
        skip
      :: else -> break
      od;
      t = 0
    :: else -> skip
    fi;
    k = 0;
    do
    :: k < NW -> wslw[k] = 0; k++ /* broadcast work_cv */
    :: else -> break
    od;
    k = 0;
    sw = (nbusy > 0 || nq > 0);
    msl = sw
  };
  do
  :: !sw -> break
  :: atomic { sw && !msl && mu == 0 -> sw = (nbusy > 0 || nq > 0); msl = sw }
  od
}

proctype main() {
  byte t, c, n, seen;
  bool early, join, sw;

  /* ordo_exec_submit of each task, in order */
  do
  :: t < ntask ->
#ifdef BUG_SUBMIT_UNLOCKED_IDLE
    seen = nidle; /* looked at without mu, before the task is queued */
#endif
    atomic {
      mu == 0 ->
      st[t] = QUEUED;
      refs[t] = 2; /* the submitter's and the executor's */
      q[nq] = t;
      nq++;
      if
#ifdef BUG_SUBMIT_UNLOCKED_IDLE
      :: seen > 0 ->
#else
      :: nidle > 0 ->
#endif
        /* pthread_cond_signal: one worker still asleep on work_cv */
        k = 0;
        do
        :: k < NW && !wslw[k] -> k++
        :: k < NW && wslw[k] -> wslw[k] = 0; break
        :: else -> break
        od;
        k = 0
      :: else -> skip
      fi;
      seen = 0;
      t++
    }
  :: else -> break
  od;
  t = 0;

  /* ordo_future_cancel of some task, NCANCEL times at most */
  do
  :: n < NCANCEL ->
    if
    :: c = 0
    :: c = 1
    :: c = 2
    :: ntask > 3 -> c = 3
    fi;
    atomic {
      mu == 0 ->
      touch(c);
      if
      :: st[c] == RUNNING ->
        /* every wait on it ends with ORDO_ECANCELED; it runs on */
        printf("MSC: cancel of running task %d\n", c);
        k = 0;
        do
        :: k < ntask ->
          if
          :: wreg[k] && dep[k] == c ->
            wcan[k] = 1;
            gate[k] = (tw[k] != tw[c]) /* not when its own thread runs c */
          :: else -> skip
          fi;
          k++
        :: else -> break
        od;
        k = 0;
#ifndef BUG_CANCEL_RUNNING_NO_WAKE
        if
        :: nwt[c] > 0 -> bcast(c)
        :: else -> skip
        fi
#endif
      :: st[c] == QUEUED ->
        printf("MSC: cancel of queued task %d\n", c);
        dequeue(c);
        st[c] = CANCELED;
        cxl[c] = 1;
        bcast(c);
        if
        :: shut -> msl = 0
        :: else -> skip
        fi;
#ifdef BUG_CANCEL_FREES
        /* nobody waits on it: its memory goes at once */
        if
        :: nwt[c] == 0 -> refs[c] = 0; freed[c] = 1
        :: else -> fut_unref(c)
        fi
#else
        fut_unref(c) /* the executor's */
#endif
      :: else -> skip
      fi
    };
    n++
  :: n < NCANCEL -> break
  :: else -> break
  od;
  c = 0;
  n = 0;

  /* ordo_future_release of each, now (while the tasks may run) or after
   * the executor is destroyed. A future is released only once no task
   * function will still pass it to ordo_future_wait (the user's part). */
  if
  :: early = 1
  :: early = 0
  fi;
  if
  :: early ->
    do
    :: t < ntask ->
      atomic {
        wtr[t] == NO || called[wtr[t]] || cxl[wtr[t]] ->
        fut_unref(t);
        t++
      }
    :: else -> break
    od;
    t = 0
  :: else -> skip
  fi;

  /* Maybe the user's join: every task is over before the shutdown (the
   * user waits on each future), so that a task left queued while a worker
   * could run it is a state with no move even though a shutdown would
   * wake the workers. */
  if
  :: join = 1
  :: join = 0
  fi;
  if
  :: join -> OVER(0) && OVER(1) && OVER(2) && OVER(3)
  :: else -> skip
  fi;

  /* ordo_exec_shutdown, DRAIN or NOW */
  if
  :: shutdown(1)
  :: shutdown(0)
  fi;

  /* ordo_exec_destroy: shutdown NOW, the joins, then no worker alive and
   * no wait on its tasks left */
  shutdown(1);
  nexit == NW;
  do
  :: atomic { mu == 0 && (nalive > 0 || nwaits > 0) -> msl = 1 }; msl == 0
  :: atomic { mu == 0 && nalive == 0 && nwaits == 0 } -> break
  od;

  if
  :: !early ->
    do
    :: t < ntask -> fut_unref(t); t++
    :: else -> break
    od;
    t = 0
  :: else -> skip
  fi;

  /* The end: every task ran or was cancelled (never both, never
   * neither: none left queued), every reference is gone. */
  t = 0;
  do
  :: t < ntask ->
    assert(ran[t] != cxl[t]);
    assert(freed[t]); /* no reference left */
    t++
  :: else -> break
  od;
  assert(nq == 0 && nbusy == 0 && nwaits == 0 && lhold == NO && lwait == NO)
}

init {
  atomic {
    if
    :: SCEN == SC_JOIN || SCEN == 0 ->
      /* A (0) waits on B (2), its wait with a deadline; C (1) waits on A */
      ntask = 3;
      dep[0] = 2;
      dep[1] = 0;
      wtr[2] = 0;
      wtr[0] = 1;
      dlm = 1
    :: SCEN == SC_LOCK || SCEN == 0 ->
      /* A (0) locks L, then waits on B (2); C (1) locks L, with a deadline */
      ntask = 3;
      dep[0] = 2;
      wtr[2] = 0;
      lkm = 3;
      ldlm = 2
    :: SCEN == SC_NEST ->
      /* A (0) waits on B (2), B on D (3), C (1) on A; A's wait has a
       * deadline */
      ntask = 4;
      dep[0] = 2;
      dep[1] = 0;
      dep[2] = 3;
      wtr[2] = 0;
      wtr[0] = 1;
      wtr[3] = 2;
      dlm = 1
    fi;
#ifdef ALL_DEADLINES
    dlm = 15;
    ldlm = lkm;
#endif
    i = 0;
    do
    :: i < NW -> run worker(i); i++
    :: else -> break
    od;
    i = 0;
    run main()
  }
}
