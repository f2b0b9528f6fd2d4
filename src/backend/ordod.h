/*
 * ordod.h -- what ordod.c gives the sharded place (shards.c) beyond its
 * vtable: a txn whose every session carries a global txn id (SESSION GID,
 * sent after HELLO/AUTH on the first connect and again on each reconnect)
 * and names the sharded txn it is a part of, and a LOCK that says where
 * else that txn holds keys (HELDAT). A plain ordod:// place uses none of
 * them, and its sessions send neither. docs/protocol.md, "## Shards".
 */
#ifndef ORDO_BACKEND_ORDOD_H
#define ORDO_BACKEND_ORDOD_H

#include "ordo_int.h"

#include <stdbool.h>

/* A global txn id on the wire: 32 lowercase hex digits. */
#define ORDO__OD_GID_LEN 32

/*
 * ordo__od_txn_begin -- begins a txn of the ordod:// place o, as
 * ordo_txn_begin does (it connects), whose sessions send SESSION GID gid
 * (NULL or "": none) and whose owner is owner (ordo__od_txn_owner), its
 * connect bounded by connect_ms (0 or more than the URL's timeout_ms:
 * timeout_ms). The caller fills the base fields api.c would (o, priority,
 * name).
 */
int ordo__od_txn_begin(ordo_t *o, ordo_txn_t **out, const char *gid,
                       void *owner, long connect_ms);
/* The owner given to ordo__od_txn_begin (NULL for a plain txn). */
void *ordo__od_txn_owner(const ordo_txn_t *t);
/* Whether t's record holds any key now (read without its lock). */
bool ordo__od_txn_holding(const ordo_txn_t *t);
/* Whether t's last LOCK was sent and went unanswered (the connection
 * failed or the reply's bound passed): the server may have acted on it. */
bool ordo__od_txn_unanswered(const ordo_txn_t *t);
/*
 * ordo__od_shard_bound -- the bound in ms of one round trip to the shard o
 * (connect, or a LOCK's reply) in a call whose deadline is deadline_ns:
 * *wait_ms (when wait_ms is not NULL) gets the LOCK's WAIT, what is left
 * of the deadline less a twentieth (at most 1 s) for the reply, and the
 * bound is what is left, or WAIT plus min(100 ms, timeout_ms) when that is
 * later (so the bound passes the deadline by at most 100 ms, and only for
 * deadlines under 2 s). With ORDO_NO_DEADLINE: the URL's timeout_ms, and
 * *wait_ms -1. docs/distributed.md, "A shard that is down".
 */
long ordo__od_shard_bound(ordo_t *o, uint64_t deadline_ns, long *wait_ms);
/*
 * ordo__od_lock_heldat -- the vtable's lock_all for a shard of a sharded
 * place: `HELDAT heldat` appended to the LOCK when heldat is not NULL or ""
 * (a comma-separated list of shard names), `ATTEMPT attempt` (the sharded
 * txn's attempt: one more each time it gave every key back, so a RELEASE
 * of an earlier attempt's cross-shard abort takes nothing of a later one:
 * docs/distributed.md, step 6), and the reconnect and the reply bounded by
 * the deadline (ordo__od_shard_bound).
 */
int ordo__od_lock_heldat(ordo_txn_t *t, const ordo_req_t *sorted, size_t n,
                         uint64_t deadline_ns, const char *heldat,
                         uint32_t attempt);

#endif
