/*
 * key.c -- the canonical key order and the typed encoders. See README.md
 * (invariant 1: one comparator everywhere).
 *
 * Interface: ordo_key_cmp, ordo_key_u64, ordo_key_i64, ordo_key_u64_decode,
 * ordo_key_i64_decode, ordo_tuple_init, ordo_tuple_add_u64,
 * ordo_tuple_add_i64, ordo_tuple_add_str, ordo_tuple_len,
 * ordo__reqs_normalize.
 */
#include "ordo_int.h"

#include <string.h>

int ordo_key_cmp(const void *a, size_t alen, const void *b, size_t blen) {
  /* Unsigned lexicographic byte order, a proper prefix first: memcmp
   * compares bytes as unsigned char, so it is exactly that on the common
   * prefix. */
  size_t n = alen < blen ? alen : blen;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (n >= 8) {
    /* The first 8 bytes as one big-endian number decide most pairs (keys
     * made by ordo_key_u64, say) without a call to memcmp. */
    uint64_t x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    if (x != y)
      return __builtin_bswap64(x) < __builtin_bswap64(y) ? -1 : 1;
  }
#endif
  int c = n ? memcmp(a, b, n) : 0;
  if (c)
    return c;
  return (alen > blen) - (alen < blen);
}

void ordo_key_u64(uint8_t out[8], uint64_t v) {
  for (int i = 7; i >= 0; i--) {
    out[i] = (uint8_t)(v & 0xff);
    v >>= 8;
  }
}

uint64_t ordo_key_u64_decode(const uint8_t in[8]) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v = (v << 8) | in[i];
  return v;
}

void ordo_key_i64(uint8_t out[8], int64_t v) {
  /* Flipping the sign bit maps INT64_MIN..INT64_MAX onto 0..UINT64_MAX in
   * order, and big-endian bytes keep that order. */
  ordo_key_u64(out, (uint64_t)v ^ (UINT64_C(1) << 63));
}

int64_t ordo_key_i64_decode(const uint8_t in[8]) {
  return (int64_t)(ordo_key_u64_decode(in) ^ (UINT64_C(1) << 63));
}

/* Tuple type codes: integers sort before strings, as their codes do. */
enum { TUPLE_INT = 0x15, TUPLE_STR = 0x02 };

void ordo_tuple_init(ordo_tuple_t *t, void *buf, size_t cap) {
  t->buf = buf;
  t->len = 0;
  t->cap = cap;
  t->overflow = 0;
}

static void tuple_put(ordo_tuple_t *t, uint8_t c) {
  if (t->len < t->cap)
    t->buf[t->len++] = c;
  else
    t->overflow = 1;
}

void ordo_tuple_add_u64(ordo_tuple_t *t, uint64_t v) {
  /* Unsigned integers have a code of their own, one above the signed
   * one: within one type the order is the natural one, and at a position
   * where tuples mix the two types, every i64 sorts before every u64. */
  uint8_t b[8];
  ordo_key_u64(b, v);
  tuple_put(t, TUPLE_INT + 1);
  for (int i = 0; i < 8; i++)
    tuple_put(t, b[i]);
}

void ordo_tuple_add_i64(ordo_tuple_t *t, int64_t v) {
  uint8_t b[8];
  ordo_key_i64(b, v);
  tuple_put(t, TUPLE_INT);
  for (int i = 0; i < 8; i++)
    tuple_put(t, b[i]);
}

void ordo_tuple_add_str(ordo_tuple_t *t, const void *s, size_t n) {
  /* 0x00 inside the string becomes 0x00 0xFF and the string ends with
   * 0x00, so a shorter string (which ends sooner with 0x00) sorts before
   * any longer one it prefixes, and the terminator sorts below every
   * escaped byte. */
  const uint8_t *p = s;
  tuple_put(t, TUPLE_STR);
  for (size_t i = 0; i < n; i++) {
    tuple_put(t, p[i]);
    if (p[i] == 0)
      tuple_put(t, 0xff);
  }
  tuple_put(t, 0x00);
}

int ordo_tuple_len(const ordo_tuple_t *t) {
  if (t->overflow || t->len > (size_t)INT32_MAX)
    return ORDO_ELIMIT;
  return (int)t->len;
}

static int req_cmp(const ordo_req_t *a, const ordo_req_t *b) {
  return ordo_key_cmp(a->key, a->len, b->key, b->len);
}

size_t ordo__reqs_normalize(ordo_req_t *r, size_t n) {
  if (n == 2) {
    /* The commonest set (a transfer's two accounts): one comparison. */
    int c = req_cmp(&r[0], &r[1]);
    if (c == 0) {
      if (r[1].mode > r[0].mode)
        r[0].mode = r[1].mode;
      return 1;
    }
    if (c > 0) {
      ordo_req_t tmp = r[0];
      r[0] = r[1];
      r[1] = tmp;
    }
    return 2;
  }
  /* Requests are short (a few keys): insertion sort beats qsort there; for
   * long ones fall back to a heap sort that needs no memory and is
   * O(n log n). */
  if (n <= 32) {
    for (size_t i = 1; i < n; i++) {
      ordo_req_t x = r[i];
      size_t j = i;
      while (j > 0 && req_cmp(&r[j - 1], &x) > 0) {
        r[j] = r[j - 1];
        j--;
      }
      r[j] = x;
    }
  } else {
    /* Heap sort: build a max-heap, then pop. */
    for (size_t start = n / 2; start-- > 0;) {
      size_t root = start;
      for (;;) {
        size_t c = 2 * root + 1;
        if (c >= n)
          break;
        if (c + 1 < n && req_cmp(&r[c], &r[c + 1]) < 0)
          c++;
        if (req_cmp(&r[root], &r[c]) >= 0)
          break;
        ordo_req_t tmp = r[root];
        r[root] = r[c];
        r[c] = tmp;
        root = c;
      }
    }
    for (size_t end = n; end-- > 1;) {
      ordo_req_t tmp = r[0];
      r[0] = r[end];
      r[end] = tmp;
      size_t root = 0;
      for (;;) {
        size_t c = 2 * root + 1;
        if (c >= end)
          break;
        if (c + 1 < end && req_cmp(&r[c], &r[c + 1]) < 0)
          c++;
        if (req_cmp(&r[root], &r[c]) >= 0)
          break;
        tmp = r[root];
        r[root] = r[c];
        r[c] = tmp;
        root = c;
      }
    }
  }
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (m > 0 && req_cmp(&r[m - 1], &r[i]) == 0) {
      if (r[i].mode > r[m - 1].mode)
        r[m - 1].mode = r[i].mode;
    } else {
      r[m++] = r[i];
    }
  }
  return m;
}
