/*
 * fast.pml -- a Promela model of the engine's fast path against the slow
 * paths that share its lock objects: inflation (and adoption), retirement,
 * eviction into the graveyard and a dead object's reuse for another key.
 * See src/core/README.md, "The fast path" and "The models".
 *
 * What it mirrors (one proctype step per atomic access of the C):
 *   fast_acquire   src/core/fast.h: ordo__fast_acquire (fast_find, fast_idle,
 *                  fast_take, fast_match), ordo__fast_give_back (table.c)
 *   release        fast.h: ordo__release_all, fast_release; table.c:
 *                  release_hold, drop_hold (the slow way back)
 *   inflate        table.c: inflate, adopt (every lookup under the mutex)
 *   slow_acquire   table.c: ordo__acquire and ordo__try_one's lock-object
 *                  part: lookup_or_create (lookup, empty_unlink, unbury),
 *                  grant_one; a request that cannot be granted gives up
 *                  (retire, as on ordo__acquire's deadline path) or queues
 *                  and later leaves (abort_locked's dequeue and retire)
 *   inspect        table.c: ordo__held (a lookup that inflates, and leaves
 *                  the lock on the empty list: a listed SLOW lock)
 *   evict          table.c: evict_one (DEAD swapped in; a held lock is
 *                  adopted instead), bury
 *   retire         table.c: retire (IDLE stored when a lock is listed)
 *
 * Abstracted away, and why:
 *   - The hash and the walk. fast_find may return a stale hint, a chain
 *     object reused meanwhile, or a hash collision, so the model lets a fast
 *     acquirer pick ANY lock object, live or dead, for each key: a superset
 *     of what the hash compare before the CAS lets through. Only the key
 *     compare after the CAS (fast_match) stands between it and a wrong key.
 *   - Bucket arrays and maybe_grow (a walk on an outgrown array only misses
 *     keys, which the "any object" pick already covers), the empty list's
 *     order and its cap (any listed lock may be evicted at any time a
 *     thread takes the mutex: a superset of evict_one's oldest-first calls
 *     from retire and lookup_or_create), statistics, sampling, hints.
 *   - Fencing tokens, S mode (the fast path takes X only; grant.pml checks
 *     S against X), wait_mu and the wake-ups (a queued waiter here only
 *     leaves; grant.pml models the grant protocol and the hand-over).
 *   - Memory order: spin explores sequentially consistent interleavings.
 *     The C's acquire CAS / release stores are what make its atomics behave
 *     so for these words (README, "Memory order"); that argument is not
 *     checked here.
 *   - Hold records: a thread's hold on an object is the word HOLD + thread
 *     (a thread takes an object at most once at a time, as a record is on
 *     one list at a time).
 *
 * The bound: 3 threads, 2 keys, 2 lock objects (so one can be reused for
 * the other key), one stripe (both keys in it, so its graveyard serves
 * both), and ANY number of operations: each thread loops for ever over
 * {fast acquire of {A}, {B} or {A,B}; slow acquire of the same; inspect;
 * evict}, so the search covers every reachable state, every interleaving
 * of every sequence of those calls.
 *
 * Properties (checked in every reachable state by the monitor, and by
 * assertions at each grant; spin's invalid-end-state check finds a thread
 * stuck on the mutex):
 *   P1 mutual exclusion: at most one thread believes it holds each key,
 *      and a lock object has at most one owner (fast or listed).
 *   P2 a thread that believes it holds key k owns k's live lock object
 *      (in the chain, with key k) by its fast word, as its listed holder,
 *      or while an adoption of its hold is under way.
 *   P3 (README invariant 9) a lock whose word is IDLE or a hold has no
 *      listed holder and no waiter and is on the empty list; a dead one is
 *      out of the chain, unlisted, unowned and DEAD.
 *   P4 no object is reused (unburied) or buried while a thread owns it:
 *      the key the fast path compares after its CAS is stable.
 *   P5 no thread waits for the mutex for ever (no invalid end state).
 *
 * Deliberate bugs (each must make spin report an error; see
 * tests/spin/run_spin.sh, which checks that every one of them does):
 *   -DBUG_NO_KEY_CHECK      fast_acquire skips fast_match after its CAS
 *   -DBUG_EVICT_HELD        evict_one buries a lock the fast path holds
 *   -DBUG_INFLATE_NO_ADOPT  inflate swaps SLOW over a hold, adopting nothing
 *   -DBUG_RETIRE_WAITERS    retire lists (IDLE) a lock that has waiters
 *   -DBUG_RELEASE_STORE     fast_release checks, then stores IDLE (no CAS)
 *   -DBUG_GIVE_BACK_LOCKED  the slow give-back forgets to unlock the mutex
 *
 * Run (what tests/spin/run_spin.sh does, in a temporary folder):
 *   spin -a fast.pml && cc -DSAFETY -DNOCLAIM -DCOLLAPSE -o pan pan.c && ./pan -m20000000 -w25
 * and expect "errors: 0" and no "invalid end state".
 */

#define NT 3 /* threads */
#define NK 2 /* keys: A = 0, B = 1 */
#define NO 2 /* lock objects */

/* The fast word (table_int.h's ORDO__FAST_*); a hold is HOLD + thread. */
#define IDLE 0
#define SLOW 1
#define DEAD 2
#define ADOPTING 3
#define HOLD 8

/* Thread 2 is the keeper: besides lock_all by the slow path it queues (and
 * leaves), inspects and evicts; threads 0 and 1 take the fast path or the
 * slow one. The mutex holder's identity is nothing to the fast path, so one
 * thread doing the upkeep loses no interleaving of it against the others. */
#define KEEPER 2

#define NOKEY 255
#define NONE 255

byte mu;              /* the stripe's mutex: 0 free, else thread + 1 */
byte word[NO];        /* ordo__lock.fast */
byte okey[NO];        /* the key the object is for (hash, klen, key) */
bool chain[NO];       /* in the stripe's hash chain (else: the graveyard) */
bool listed[NO];      /* on the stripe's empty list */
byte holder[NO];      /* the listed X holder, thread + 1, or 0 */
byte waiters[NO];     /* queue entries (a lock with waiters is not listed) */
byte adopting[NO];    /* ghost: thread + 1 whose hold an adopter took */
byte owned[NO];       /* ghost: thread + 1 holding the object, any path */
byte hb[NT];          /* ghost: the keys a thread believes it holds */
byte myo[NT * NK];    /* ghost: the object it holds each of them by */
byte nheld[NK];       /* ghost: how many threads believe they hold a key */

/*
 * Granularity. The fast path touches only the word (and, once the word is
 * its own, the key), so a step of a thread that holds the mutex can only
 * be told apart from its neighbours by another thread where it accesses a
 * word: each atomic block below holds at most one word access, together
 * with the mutex-only work around it (taking the mutex moves right, letting
 * it go moves left, as in Lipton's reduction). The fast path's own steps
 * are each one atomic access of the C.
 */

inline lock() {
  mu == 0 -> mu = t + 1
}

inline unlock() {
  assert(mu == t + 1);
  mu = 0
}

/* table.c: adopt, under the mutex (the word is ADOPTING or DEAD meanwhile),
 * then the word's store of SLOW. */
inline adopt(o) {
  listed[o] = 0;
  holder[o] = adopting[o];
  adopting[o] = 0;
  word[o] = SLOW
}

/* table.c: inflate's CAS (caller holds the mutex, inside an atomic block).
 * The C's load and CAS loop is one step here: a failed CAS is retried, so
 * only the one that succeeds matters. A hold found is ADOPTING until the
 * caller's next step adopts it (adopt). */
inline inflate_cas(o) {
  v = word[o];
  assert(v == IDLE || v == SLOW || v >= HOLD);
  if
  :: v == IDLE -> word[o] = SLOW
#ifdef BUG_INFLATE_NO_ADOPT
  :: v >= HOLD -> word[o] = SLOW; v = SLOW
#else
  :: v >= HOLD -> word[o] = ADOPTING; adopting[o] = v - HOLD + 1
#endif
  :: else -> skip
  fi
}

/* inflate's second step, if its CAS took a hold: adopt it. */
inline inflate_adopt(o) {
  if
  :: v >= HOLD -> atomic { adopt(o); v = 0 }
  :: else -> v = 0
  fi
}

/* table.c: retire (caller holds the mutex): stores IDLE when it lists. */
inline retire(o) {
  if
#ifdef BUG_RETIRE_WAITERS
  :: listed[o] || holder[o] != 0 -> skip
#else
  :: listed[o] || holder[o] != 0 || waiters[o] != 0 -> skip
#endif
  :: else -> listed[o] = 1; word[o] = IDLE
  fi
}

/* table.c: lookup's walk (caller holds the mutex): k's object, or NO. */
inline find(k, res) {
  if
  :: chain[0] && okey[0] == k -> res = 0
  :: chain[1] && okey[1] == k -> res = 1
  :: else -> res = NO
  fi
}

/* table.c: lookup_or_create's first step (caller holds the mutex, inside
 * an atomic block): the lookup and its inflate CAS, or else a dead object
 * unburied for k. With as many objects as keys, a key with no live object
 * always finds one in the graveyard (which stands for malloc too: a fresh
 * object is one nobody pointed at). Unburying changes only a DEAD word,
 * which the fast path cannot take before or after. */
inline lookup_or_create(k, res) {
  find(k, res);
  if
  :: res < NO -> inflate_cas(res)
  :: else ->
    if
    :: !chain[0] -> res = 0
    :: !chain[1] -> res = 1
    fi;
    /* P4: unbury rewrites the key; nobody may own the object. */
    assert(word[res] == DEAD && owned[res] == 0 && holder[res] == 0);
    word[res] = SLOW;
    okey[res] = k;
    chain[res] = 1;
    listed[res] = 0;
    waiters[res] = 0
  fi
}

/* The thread now believes it holds key k by object o. */
inline believe(k, o) {
  hb[t] = hb[t] | (1 << k);
  myo[t * NK + k] = o;
  nheld[k]++;
  assert(nheld[k] == 1) /* P1 */
}

/* The slow way back of a hold on o (release_hold after fast_release
 * failed): the word is SLOW, or ADOPTING until the adopter lets the mutex
 * go. */
inline release_slow(o) {
  atomic { lock(); inflate_cas(o) };
  inflate_adopt(o);
  atomic {
    assert(holder[o] == t + 1);
    holder[o] = 0;
    owned[o] = 0;
    if
    :: waiters[o] == 0 -> retire(o)
    :: else -> skip /* wake_queue's business: grant.pml */
    fi;
#ifdef BUG_GIVE_BACK_LOCKED
    if
    :: giving -> skip /* forgets the mutex */
    :: else -> unlock()
    fi
#else
    unlock()
#endif
  }
}

/* fast.h: fast_release's CAS (in the caller's atomic block), else
 * slow = 1 for the slow way. */
inline release_cas(o) {
#ifdef BUG_RELEASE_STORE
  /* The check and the store apart: an adopter may come between. */
  if
  :: word[o] == HOLD + t -> slow = 2
  :: else -> slow = 1
  fi
#else
  if
  :: word[o] == HOLD + t -> word[o] = IDLE; owned[o] = 0; slow = 0
  :: else -> slow = 1
  fi
#endif
}

inline release_rest(o) {
#ifdef BUG_RELEASE_STORE
  if
  :: slow == 2 -> atomic { word[o] = IDLE; owned[o] = 0; slow = 0 }
  :: else -> skip
  fi;
#endif
  if
  :: slow -> release_slow(o)
  :: else -> skip
  fi;
  slow = 0
}

/* ordo__release_all: every key held, newest (the larger key) first; the
 * thread stops believing it holds a key as it lets it go. */
inline release_all() {
  if
  :: hb[t] & 2 ->
    atomic {
      o = myo[t * NK + 1];
      myo[t * NK + 1] = 0;
      hb[t] = hb[t] & 1;
      nheld[1]--;
      release_cas(o)
    };
    release_rest(o)
  :: else -> skip
  fi;
  if
  :: hb[t] & 1 ->
    atomic {
      o = myo[t * NK + 0];
      myo[t * NK + 0] = 0;
      hb[t] = hb[t] & 2;
      nheld[0]--;
      release_cas(o)
    };
    release_rest(o)
  :: else -> skip
  fi;
  o = 0
}

/* ordo__fast_give_back: the objects taken, newest first. */
inline give_back() {
  giving = 1;
  if
  :: took & 2 -> atomic { release_cas(fo1) }; release_rest(fo1)
  :: else -> skip
  fi;
  if
  :: took & 1 -> atomic { release_cas(fo0) }; release_rest(fo0)
  :: else -> skip
  fi;
  giving = 0
}

/* fast_find, fast_take and fast_match for key k, into object o: one step.
 * The find may return any object (see the header), so it is a choice made
 * in the CAS's step. The key is compared after the CAS, in the same step
 * here: once the word is ours nobody can evict and reuse the object, so
 * its key cannot change between the two in the C (P4 asserts it where a
 * key is rewritten). fast_idle's look at every word before the first CAS
 * is left out: it only makes the C give up earlier, before taking
 * anything, which the model's runs without it include. */
inline take(k, o) {
  atomic {
    if
    :: o = 0
    :: o = 1
    fi;
    if
    :: word[o] == IDLE ->
      word[o] = HOLD + t;
      /* P1, and invariant 9's side: an IDLE lock has no holder and no
       * waiter (one may queue behind the fast hold once it is adopted). */
      assert(owned[o] == 0 && holder[o] == 0 && waiters[o] == 0);
      owned[o] = t + 1;
      took = took | (1 << k);
#ifndef BUG_NO_KEY_CHECK
      if
      :: okey[o] != k -> why = 1 /* reused for another key: give back */
      :: else -> skip
      fi
#endif
    :: else -> why = 2 /* ORDO__FAST_BUSY */
    fi
  }
}

/* ordo__fast_acquire for the sorted keys of set (1: {A}, 2: {B}, 3: {A,B}):
 * take them in key order; stop at the first that fails. */
inline fast_acquire() {
  if
  :: set & 1 -> take(0, fo0)
  :: else -> skip
  fi;
  if
  :: why == 0 && (set & 2) -> take(1, fo1)
  :: else -> skip
  fi;
  if
  :: why != 0 -> give_back()
  :: else ->
    atomic {
      if
      :: set & 1 -> believe(0, fo0)
      :: else -> skip
      fi;
      if
      :: set & 2 -> believe(1, fo1)
      :: else -> skip
      fi
    }
  fi
}

/* ordo__acquire's lock-object part, X, with the stripe's mutex. */
inline slow_acquire() {
  if
  :: set & 1 ->
    atomic { lock(); lookup_or_create(0, fo0) };
    inflate_adopt(fo0)
  :: else -> skip
  fi;
  if
  :: set & 2 ->
    atomic {
      if
      :: set & 1 -> listed[fo0] = 0 /* empty_unlink */
      :: else -> lock()
      fi;
      lookup_or_create(1, fo1)
    };
    inflate_adopt(fo1)
  :: else -> skip
  fi;
  atomic {
    if
    :: set & 1 -> listed[fo0] = 0
    :: else -> skip
    fi;
    if
    :: set & 2 -> listed[fo1] = 0
    :: else -> skip
    fi;
    if
    :: ((set & 1) == 0 || holder[fo0] == 0) &&
       ((set & 2) == 0 || holder[fo1] == 0) ->
      /* grant_one on each: the lookups adopted any fast hold, so a free
       * holder list is a free key. */
      if
      :: set & 1 ->
        assert(owned[fo0] == 0);
        holder[fo0] = t + 1;
        owned[fo0] = t + 1;
        believe(0, fo0)
      :: else -> skip
      fi;
      if
      :: set & 2 ->
        assert(owned[fo1] == 0);
        holder[fo1] = t + 1;
        owned[fo1] = t + 1;
        believe(1, fo1)
      :: else -> skip
      fi;
      unlock()
    :: else -> why = 2
    fi
  };
  if
  :: why == 0 -> skip
  :: why != 0 ->
    if
    :: t == KEEPER -> /* queue, holding nothing; later leave (a time-out) */
      atomic {
        if
        :: set & 1 -> waiters[fo0]++
        :: else -> skip
        fi;
        if
        :: set & 2 -> waiters[fo1]++
        :: else -> skip
        fi;
        unlock()
      };
      atomic {
        lock();
        if
        :: set & 1 -> waiters[fo0]--
        :: else -> skip
        fi;
        if
        :: set & 2 -> waiters[fo1]--
        :: else -> skip
        fi
      }
    :: /* or give up at once (a deadline) */
      skip
    fi;
    /* Give back what the attempt touched: retire each, one store apiece. */
    if
    :: set & 1 -> atomic { retire(fo0) }
    :: else -> skip
    fi;
    atomic {
      if
      :: set & 2 -> retire(fo1)
      :: else -> skip
      fi;
      unlock()
    }
  fi
}

/* table.c: evict_one, for one listed lock (any: see the header). */
inline evict() {
  atomic {
    lock();
    if
    :: listed[0] -> o = 0
    :: listed[1] -> o = 1
    :: else -> o = NO
    fi;
    if
    :: o < NO ->
      v = word[o];
      word[o] = DEAD;
#ifdef BUG_EVICT_HELD
      v = IDLE;
#endif
      if
      :: v < HOLD ->
        /* bury: off the empty list and the chain; never freed. */
        assert(holder[o] == 0 && waiters[o] == 0); /* P4 */
        listed[o] = 0;
        chain[o] = 0;
        okey[o] = NOKEY; /* (its bytes stay in the C; nobody reads them) */
        o = NO
      :: else -> adopting[o] = v - HOLD + 1 /* DEAD stands for ADOPTING */
      fi
    :: else -> skip
    fi;
    if
    :: o == NO -> o = 0; v = 0; unlock()
    :: else -> skip
    fi
  };
  if
  :: v >= HOLD -> atomic { adopt(o); o = 0; v = 0; unlock() }
  :: else -> skip
  fi
}

proctype thread(byte t) {
  byte set, fo0, fo1, took, why, o, v, k, slow;
  bool giving;
end:
  do
  :: /* a lock_all of {A}, {B} or {A,B}: the fast path or the slow one */
    if
    :: set = 1
    :: set = 2
    :: set = 3
    fi;
    if
    :: t != KEEPER -> fast_acquire()
    :: true; slow_acquire()
    fi;
    /* Hold (or not), then let go of everything. */
    release_all();
    d_step {
      set = 0;
      fo0 = 0;
      fo1 = 0;
      took = 0;
      why = 0
    }
  :: t == KEEPER -> /* ordo__held (or any lookup): inflates, leaves it listed */
    atomic {
      if
      :: k = 0
      :: k = 1
      fi;
      lock();
      find(k, o);
      if
      :: o < NO -> inflate_cas(o)
      :: else -> skip
      fi;
      k = 0
    };
    inflate_adopt(o);
    atomic { o = 0; unlock() }
  :: t == KEEPER -> evict()
  od
}

/* P1-P3 in every reachable state. */
#define OBJ_OK(o) \
  (((word[o] != IDLE && word[o] < HOLD) || \
    (holder[o] == 0 && waiters[o] == 0 && listed[o] && chain[o])) && \
   (chain[o] || (word[o] == DEAD && holder[o] == 0 && waiters[o] == 0 && \
                 !listed[o] && owned[o] == 0)) && \
   (word[o] < HOLD || owned[o] == word[o] - HOLD + 1) && \
   (holder[o] == 0 || owned[o] == holder[o]))

#define HOLD_OK(t, k) \
  ((hb[t] & (1 << k)) == 0 || \
   (okey[myo[t * NK + k]] == k && chain[myo[t * NK + k]] && \
    owned[myo[t * NK + k]] == t + 1 && \
    (word[myo[t * NK + k]] == HOLD + t || holder[myo[t * NK + k]] == t + 1 || \
     adopting[myo[t * NK + k]] == t + 1)))

/* P1: one believer per key. P2: every belief is a real hold. P3: the
 * objects' words agree with their lists. */
#define P1 (nheld[0] <= 1 && nheld[1] <= 1)
#define P2(t) (HOLD_OK(t, 0) && HOLD_OK(t, 1))
#define P3 (OBJ_OK(0) && OBJ_OK(1))

proctype monitor() {
end:
  if
  :: atomic { !P1 -> assert(P1) }
  :: atomic { !P2(0) -> assert(P2(0)) }
  :: atomic { !P2(1) -> assert(P2(1)) }
  :: atomic { !P2(2) -> assert(P2(2)) }
  :: atomic { !P3 -> assert(P3) }
  fi
}

init {
  atomic {
    /* Both objects start in the graveyard: the first lookup_or_create of
     * each key makes its lock object. */
    word[0] = DEAD;
    word[1] = DEAD;
    okey[0] = NOKEY;
    okey[1] = NOKEY;
    run monitor();
    run thread(0);
    run thread(1);
    run thread(2)
  }
}
