/*
 * remote.c -- what the remote backends share: a txn's record of its holds,
 * dump helpers, URL numbers, and sending hiredis's buffer (remote.h).
 */
#include "remote.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../ordo_int.h"

static const ordo__hold *at(const void *arr, size_t i, size_t stride) {
  return (const ordo__hold *)((const char *)arr + i * stride);
}

long ordo__hold_find(const void *arr, size_t n, size_t stride, const void *key,
                     size_t len) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const ordo__hold *h = at(arr, mid, stride);
    int c = ordo_key_cmp(h->key, h->len, key, len);
    if (c == 0)
      return (long)mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -(long)lo - 1;
}

int ordo__hold_report(const void *arr, size_t n, size_t stride, const void *key,
                      size_t len, ordo_mode_t *mode, uint64_t *fence) {
  long i = ordo__hold_find(arr, n, stride, key, len);
  if (i < 0)
    return 0;
  const ordo__hold *h = at(arr, (size_t)i, stride);
  if (mode)
    *mode = h->mode;
  if (fence)
    *fence = h->token;
  return (int)h->count;
}

int ordo__hold_room(void **arr, size_t *cap, size_t have, size_t more,
                    size_t stride) {
  if (have + more <= *cap)
    return 0;
  size_t c = *cap ? *cap : 8;
  while (c < have + more)
    c *= 2;
  void *a = realloc(*arr, c * stride);
  if (!a)
    return ORDO_ENOMEM;
  *arr = a;
  *cap = c;
  return 0;
}

int ordo__hold_copy_new(const void *arr, size_t n, size_t stride,
                        const ordo_req_t *r, size_t nr, uint8_t **copies) {
  for (size_t i = 0; i < nr; i++) {
    if (ordo__hold_find(arr, n, stride, r[i].key, r[i].len) >= 0)
      continue;
    if (!(copies[i] = malloc(r[i].len)))
      return ORDO_ENOMEM;
    memcpy(copies[i], r[i].key, r[i].len);
  }
  return 0;
}

void ordo__put_key(FILE *f, const uint8_t *k, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (k[i] >= 0x21 && k[i] < 0x7f && k[i] != '\\')
      fputc(k[i], f);
    else
      fprintf(f, "\\x%02x", k[i]);
  }
}

int ordo__write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return ORDO_EINVAL;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

int ordo__redis_flush(struct redisContext *c, int *done) {
  *done = 0;
  if (c->err)
    return -1;
  size_t len = sdslen(c->obuf);
  while (len > 0) {
    ssize_t w = send(c->fd, c->obuf, len, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
        !(c->flags & REDIS_BLOCK))
      break; /* full: the rest when poll(2) says it may go */
    if (w < 0) {
      /* A blocking socket's EAGAIN is its send timeout, as for hiredis. */
      c->err = REDIS_ERR_IO;
      snprintf(c->errstr, sizeof c->errstr, "%s", strerror(errno));
      return -1;
    }
    sdsrange(c->obuf, (int)w, -1);
    len = sdslen(c->obuf);
  }
  *done = len == 0;
  return 0;
}

int ordo__parse_long(const char *s, size_t n, long lo, long hi, long *out) {
  if (n == 0 || n > 18)
    return ORDO_EURL;
  long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return ORDO_EURL;
    v = v * 10 + (s[i] - '0');
  }
  if (v < lo || v > hi)
    return ORDO_EURL;
  *out = v;
  return 0;
}
