/*
 * shards.h -- the placement function of a sharded ordod:// place
 * (docs/protocol.md, "## Shards"): rendezvous hashing over shard names.
 * Published for the unit test (tests/unit/test_shards.c); shards.c is the
 * place itself.
 */
#ifndef ORDO_BACKEND_SHARDS_H
#define ORDO_BACKEND_SHARDS_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a 64 of s[0..n). */
uint64_t ordo__shard_fnv1a64(const void *s, size_t n);
/* The murmur3 64-bit finalizer. */
uint64_t ordo__shard_fmix64(uint64_t x);
/* score(shard, key) = fmix64(fnv1a64(key) ^ fnv1a64(name)). */
uint64_t ordo__shard_score(const char *name, const void *key, size_t len);
/*
 * ordo__shard_place -- the index in names[0..n) (n >= 1, in any order) of
 * the shard of key: the highest score, a tie to the bytewise smaller name.
 */
size_t ordo__shard_place(const char *const *names, size_t n, const void *key,
                         size_t len);

struct ordo_txn_s;
/*
 * ordo__shards_txn_gid -- the global id of a txn of a sharded ordod://
 * place (32 hex digits, as SESSION GID and the servers' logs give it), or
 * NULL for a txn of any other place. For the fault harness's histories.
 */
const char *ordo__shards_txn_gid(const struct ordo_txn_s *t);

#endif
