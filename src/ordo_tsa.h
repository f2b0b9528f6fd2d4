/*
 * ordo_tsa.h -- lock maps the compiler checks (STYLE.md, point 13): ORDO_
 * macros over Clang's thread-safety analysis, and ordo__mutex, a pthread
 * mutex that the analysis knows as a capability.
 *
 * Under Clang each macro is one of its thread-safety attributes (Clang's
 * ThreadSafetyAnalysis documentation), and CMakeLists.txt builds with
 * -Wthread-safety, so a broken lock rule fails the clang build (ORDO_WERROR
 * makes it an error). Under any other compiler the macros are empty: a gcc
 * build is the same as without them.
 *
 * What the analysis checks in C, and what it cannot:
 *
 *  - Functions. ORDO_REQUIRES(mu): the caller holds mu. ORDO_ACQUIRE(mu) /
 *    ORDO_RELEASE(mu): returns with mu taken / let go. ORDO_TRY_ACQUIRE(v,
 *    mu): mu is taken when it returns v. ORDO_EXCLUDES(mu): the caller must
 *    not hold mu (the function takes it). Checked at every call and in the
 *    function's own body: a lock left held on some path, let go twice or
 *    not held, or a REQUIRES function called without its lock, is a
 *    -Wthread-safety warning. The argument may name the parameters
 *    (ORDO_REQUIRES(t->mu)); a pointer to a mutex is named by its target
 *    (ORDO_REQUIRES(*mu)).
 *
 *  - Struct members. ORDO_GUARDED_BY(mu), ORDO_PT_GUARDED_BY(mu) and
 *    ORDO_ACQUIRED_BEFORE/AFTER(mu) on a member name a sibling member, and
 *    no C compiler here checks that yet: Clang before 19 rejects the name
 *    (C has no member scope: "use of undeclared identifier 'mu'"), and Clang
 *    19 to 21 accept it but do not tie it to the object, so foo.x stays
 *    "requires holding mutex 'mu'" with foo.mu held
 *    (llvm/llvm-project#161854). So in C these four are empty unless
 *    ORDO_TSA_MEMBERS is defined, for a compiler that gets them right.
 *    Until then they are the struct's lock map in one fixed, greppable
 *    form, and the analysis checks it through the functions that touch the
 *    fields: each helper that reads or writes a guarded field says
 *    ORDO_REQUIRES of its lock. Declare the mutex above the fields it
 *    guards, as the attributes will need.
 *
 *  - Calls through a function pointer are not checked: a hook that runs
 *    with a lock its caller took says so with ordo__mutex_assert_held.
 *
 *  - ORDO_NO_THREAD_SAFETY_ANALYSIS turns the analysis off for one function:
 *    the smallest one that holds what it cannot follow (a lock tried in a
 *    loop, locks taken in an order the data decides), with a comment that
 *    says why. Never a whole file.
 *
 * Mutexes: lock an ordo__mutex with ordo__mutex_lock and the others below,
 * never its pthread_mutex_t directly, so that the analysis sees every
 * acquisition. A plain pthread_mutex_t is invisible to it (the files still
 * to be converted use one). Condition variables stay pthread_cond_t; wait
 * on one with ordo__cond_wait or ordo__cond_timedwait, which require the
 * mutex; signal it with pthread_cond_signal or _broadcast.
 */
#ifndef ORDO_TSA_H
#define ORDO_TSA_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__clang__)
#define ORDO_TSA_(x) __attribute__((x))
#else
#define ORDO_TSA_(x)
#endif

/* On a struct type: its objects are capabilities ("mutex" in messages). */
#define ORDO_CAPABILITY(x) ORDO_TSA_(capability(x))
/* On functions. */
#define ORDO_REQUIRES(...) ORDO_TSA_(requires_capability(__VA_ARGS__))
#define ORDO_ACQUIRE(...) ORDO_TSA_(acquire_capability(__VA_ARGS__))
#define ORDO_RELEASE(...) ORDO_TSA_(release_capability(__VA_ARGS__))
#define ORDO_TRY_ACQUIRE(...) ORDO_TSA_(try_acquire_capability(__VA_ARGS__))
#define ORDO_EXCLUDES(...) ORDO_TSA_(locks_excluded(__VA_ARGS__))
#define ORDO_ASSERT_CAPABILITY(x) ORDO_TSA_(assert_capability(x))
#define ORDO_RETURN_CAPABILITY(x) ORDO_TSA_(lock_returned(x))
#define ORDO_NO_THREAD_SAFETY_ANALYSIS ORDO_TSA_(no_thread_safety_analysis)

/* On struct members (see above: empty in C unless ORDO_TSA_MEMBERS). */
#if defined(__cplusplus) || defined(ORDO_TSA_MEMBERS)
#define ORDO_GUARDED_BY(x) ORDO_TSA_(guarded_by(x))
#define ORDO_PT_GUARDED_BY(x) ORDO_TSA_(pt_guarded_by(x))
#define ORDO_ACQUIRED_BEFORE(...) ORDO_TSA_(acquired_before(__VA_ARGS__))
#define ORDO_ACQUIRED_AFTER(...) ORDO_TSA_(acquired_after(__VA_ARGS__))
#else
#define ORDO_GUARDED_BY(x)
#define ORDO_PT_GUARDED_BY(x)
#define ORDO_ACQUIRED_BEFORE(...)
#define ORDO_ACQUIRED_AFTER(...)
#endif

/* ---- ordo__mutex ---------------------------------------------------------
 * A pthread mutex (default type: not recursive, no error checking) that
 * the analysis tracks. The wrappers are the analysis's primitives, so their
 * own bodies are not analysed: it cannot see pthread take the lock.
 */
typedef struct ORDO_CAPABILITY("mutex") ordo__mutex {
  pthread_mutex_t m;
} ordo__mutex;

/* 0, or pthread_mutex_init's error. */
static inline int ordo__mutex_init(ordo__mutex *mu) {
  return pthread_mutex_init(&mu->m, NULL);
}

static inline void ordo__mutex_destroy(ordo__mutex *mu) ORDO_EXCLUDES(*mu) {
  pthread_mutex_destroy(&mu->m);
}

static inline void ordo__mutex_lock(ordo__mutex *mu)
    ORDO_ACQUIRE(*mu) ORDO_NO_THREAD_SAFETY_ANALYSIS {
  pthread_mutex_lock(&mu->m);
}

static inline void ordo__mutex_unlock(ordo__mutex *mu)
    ORDO_RELEASE(*mu) ORDO_NO_THREAD_SAFETY_ANALYSIS {
  pthread_mutex_unlock(&mu->m);
}

/* Takes mu if it is free: true when taken. Never waits. */
static inline bool ordo__mutex_trylock(ordo__mutex *mu)
    ORDO_TRY_ACQUIRE(true, *mu) ORDO_NO_THREAD_SAFETY_ANALYSIS {
  return pthread_mutex_trylock(&mu->m) == 0;
}

/* Takes mu, waiting no later than abs (CLOCK_REALTIME, as
 * pthread_mutex_timedlock has it): true when taken. POSIX.1-2001, so
 * only where the includer asked for it (_GNU_SOURCE here). */
#if defined(_POSIX_C_SOURCE) && _POSIX_C_SOURCE >= 200112L
static inline bool ordo__mutex_timedlock(ordo__mutex *mu,
                                         const struct timespec *abs)
    ORDO_TRY_ACQUIRE(true, *mu) ORDO_NO_THREAD_SAFETY_ANALYSIS {
  return pthread_mutex_timedlock(&mu->m, abs) == 0;
}
#endif

/*
 * ordo__mutex_assert_held -- tells the analysis that mu is held here, where
 * the caller that took it is out of its sight (a hook called through a
 * function pointer). Debug builds check that some thread holds it; a
 * default mutex cannot say which one.
 */
static inline void ordo__mutex_assert_held(ordo__mutex *mu)
    ORDO_ASSERT_CAPABILITY(*mu) ORDO_NO_THREAD_SAFETY_ANALYSIS {
#ifdef ORDO_DEBUG
  if (pthread_mutex_trylock(&mu->m) == 0) {
    fputs("ordo: a mutex the caller must hold is free\n", stderr);
    abort();
  }
#else
  (void)mu;
#endif
}

/* Condition variables: the wait lets go of mu and takes it back, so the
 * caller holds it before and after. */
static inline int ordo__cond_wait(pthread_cond_t *cv, ordo__mutex *mu)
    ORDO_REQUIRES(*mu) {
  return pthread_cond_wait(cv, &mu->m);
}

/* 0, ETIMEDOUT past abs (on cv's clock), or another pthread error. */
static inline int ordo__cond_timedwait(pthread_cond_t *cv, ordo__mutex *mu,
                                       const struct timespec *abs)
    ORDO_REQUIRES(*mu) {
  return pthread_cond_timedwait(cv, &mu->m, abs);
}

#endif /* ORDO_TSA_H */
