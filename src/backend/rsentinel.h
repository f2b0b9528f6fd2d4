/*
 * rsentinel.h -- the primary of a "redis-sentinel://" place: the sentinels
 * of its URL, the master name, and the address of the primary they last
 * named (verified with ROLE), which redis.c connects to instead of a fixed
 * node. redis.c runs the place exactly as a redis:// one otherwise. See
 * docs/backend-redis.md, "Redis Sentinel".
 *
 * Thread safety: every function may be called from any thread; the
 * current address is kept under a mutex, a resolution runs under another
 * (one at a time per place, each bounded by its caller's deadline).
 */
#ifndef ORDO_RSENTINEL_H
#define ORDO_RSENTINEL_H

#include "backend/redis_script.h"

#include <stdio.h>

typedef struct ordo__rsn ordo__rsn;

/*
 * ordo__rsn_parse -- parses url, "redis-sentinel://[[user]:password@]
 * host:port[,host:port...]/master-name[?query]": the credentials and db go
 * to *node (the primary's, as a redis:// URL's), *query points at the text
 * after '?' (or at "" when none) for redis.c's options. Then asks the
 * sentinels for the primary within timeout_ms (ordo__rsn_node). Returns 0,
 * ORDO_EURL, ORDO_ENOMEM or ORDO_EBACKEND (no sentinel named a primary
 * that says it is one). The caller frees *out with ordo__rsn_free.
 */
int ordo__rsn_parse(const char *url, ordo__rs_node *node, const char **query,
                    ordo__rsn **out);
void ordo__rsn_free(ordo__rsn *s);
/*
 * ordo__rsn_node -- copies the primary's address into *node (its host and
 * port; the rest of *node is left as the caller set it) and sets *epoch
 * to the count of changes of primary seen so far. When the place is
 * stale (ordo__rsn_stale, or never resolved) it first asks the sentinels
 * again, in turn, until one names a node whose ROLE says master, or until
 * deadline_ns (then ORDO_EBACKEND, and errstr[0..200) says why).
 */
int ordo__rsn_node(ordo__rsn *s, ordo__rs_node *node, uint64_t *epoch,
                   uint64_t deadline_ns, char errstr[200]);
/* Marks the place stale: the next ordo__rsn_node asks the sentinels. */
void ordo__rsn_stale(ordo__rsn *s);
/* The count of changes of primary seen so far. */
uint64_t ordo__rsn_epoch(ordo__rsn *s);
/* One line for ordo_dump: the primary, the changes seen, stale or not. */
void ordo__rsn_dump(ordo__rsn *s, FILE *f);
/* True when r is a -READONLY error (a node that is now a replica). */
bool ordo__rsn_readonly(const redisReply *r);

#endif
