/*
 * remote.h -- what the remote backends (ordod.c, redis.c, redlock.c,
 * postgres.c) share, besides the renewal thread (renewer.h): a txn's own
 * record of its holds (one hold per key, kept sorted in the canonical key
 * order so that a lookup is a binary search), writing it out, and reading
 * the numbers of their URLs.
 *
 *   ordo__hold            one key held: a copy of it, its hold count (the
 *                         txn's reentrant holds), its mode and its token
 *   ordo__hold_find()     binary search of a record for a key
 *   ordo__hold_report()   what ordo_held answers from a record
 *   ordo__hold_room()     grows a record (or any array) for more entries
 *   ordo__hold_copy_new() copies the keys of a request not yet held
 *   ordo__put_key()       a key for a dump: printable bytes as they are,
 *                         others as \xNN
 *   ordo__write_all()     write(2) until done, EINTR retried
 *   ordo__redis_flush()   sends a hiredis context's output buffer with
 *                         send(2) and MSG_NOSIGNAL
 *   ordo__parse_long()    a URL's decimal number, within bounds
 *
 * A backend whose hold needs more (postgres.c: the value locked) makes an
 * ordo__hold the first member of its own and passes its element size as
 * stride. The record itself belongs to the txn and is guarded by the txn's
 * mutex (each backend's comment says so); nothing here takes a lock.
 */
#ifndef ORDO_BACKEND_REMOTE_H
#define ORDO_BACKEND_REMOTE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ordo.h"

typedef struct ordo__hold {
  uint8_t *key; /* malloc'd copy */
  size_t len;
  unsigned count; /* holds of the key by this txn */
  ordo_mode_t mode;
  uint64_t token; /* the latest grant's fencing token */
} ordo__hold;

/* Index of key among the n holds at arr (each stride bytes, starting with
 * an ordo__hold, sorted by key), or -(insertion point) - 1. */
long ordo__hold_find(const void *arr, size_t n, size_t stride, const void *key,
                     size_t len);
/* The hold count of key (0 when not held), with its mode and token. */
int ordo__hold_report(const void *arr, size_t n, size_t stride, const void *key,
                      size_t len, ordo_mode_t *mode, uint64_t *fence);
/* Makes room in *arr (*cap elements of stride bytes, have in use) for more
 * entries, doubling from 8: 0, or ORDO_ENOMEM with *arr unchanged. Done
 * before a request goes out, so that a grant is always recorded. */
int ordo__hold_room(void **arr, size_t *cap, size_t have, size_t more,
                    size_t stride);
/* For each r[i] whose key the record (arr, n, stride) does not hold,
 * copies[i] = a malloc'd copy of the key (the others stay NULL): 0, or
 * ORDO_ENOMEM (the caller frees what was copied). */
int ordo__hold_copy_new(const void *arr, size_t n, size_t stride,
                        const ordo_req_t *r, size_t nr, uint8_t **copies);
void ordo__put_key(FILE *f, const uint8_t *k, size_t n);
/* 0, or ORDO_EINVAL when fd would not take it all. */
int ordo__write_all(int fd, const char *s, size_t n);
struct redisContext;
/*
 * Sends what c's output buffer holds, as hiredis's redisBufferWrite does, but
 * with send(2) and MSG_NOSIGNAL: to a peer that has gone, hiredis 0.14's
 * write(2) raises SIGPIPE, whose default action ends the process, and
 * blocking the signal around each write cost five system calls. *done is
 * set when the buffer is empty; a non-blocking socket that is full leaves
 * the rest for later. Returns 0, or -1 with c->err and c->errstr set.
 */
int ordo__redis_flush(struct redisContext *c, int *done);
/* A whole decimal number s[0..n) (at most 18 digits) within [lo, hi] into
 * *out: 0, or ORDO_EURL. */
int ordo__parse_long(const char *s, size_t n, long lo, long hi, long *out);

#endif
