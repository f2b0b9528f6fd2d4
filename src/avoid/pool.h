/*
 * pool.h -- what src/avoid/pool.c exports beyond ordo.h: hooks for tests and
 * the watchdog's dump. See src/avoid/README.md. Nothing here is public; the
 * names are hidden in the shared library and reachable from the static one.
 */
#ifndef ORDO_AVOID_POOL_H
#define ORDO_AVOID_POOL_H

#include "ordo.h"

#include <stddef.h>

/*
 * ordo__pool_is_safe -- checks the pool's state under its mutex with the
 * textbook O(k^2) form of the Banker's check (not the sorted form the grant
 * path uses, so each checks the other), and the accounting: every client
 * holds at most its claim, every claim is at most the units, and held plus
 * available equals the units. Returns 1 if all of it holds, else 0.
 */
int ordo__pool_is_safe(ordo_pool_t *p);

/* Acquires queued now (a waiter leaves the count when it is granted, under
 * the mutex, before its thread wakes). */
size_t ordo__pool_waiting(ordo_pool_t *p);

/* The pool's counters so far: acquires granted (at once or after a wait),
 * acquires that queued, and acquires that timed out (try-once included). */
void ordo__pool_counters(ordo_pool_t *p, uint64_t *grants, uint64_t *waits,
                         uint64_t *timeouts);

/* Writes the pool's state (units, available, each client, the queue) to fd.
 * Used by watchdogs: if the mutex cannot be had within about a second it
 * says so and writes nothing else, rather than hang. */
void ordo__pool_dump(ordo_pool_t *p, int fd);

#endif /* ORDO_AVOID_POOL_H */
