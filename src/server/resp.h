/*
 * resp.h -- the Redis protocol as ordod speaks it: a parser of requests
 * (multibulk arrays of bulk strings, and inline commands) that does no I/O
 * and allocates nothing, and a writer of RESP2/RESP3 replies into a growable
 * buffer. See README.md, "The RESP parser".
 *
 * Interface: ordo__resp_parse; ordo__out_simple, ordo__out_error,
 * ordo__out_int, ordo__out_bulk, ordo__out_null, ordo__out_array,
 * ordo__out_map, ordo__out_push, ordo__out_verbatim, ordo__out_append,
 * ordo__out_consume,
 * ordo__out_free.
 */
#ifndef ORDO_SERVER_RESP_H
#define ORDO_SERVER_RESP_H

#include <stddef.h>

/* ---- The request parser --------------------------------------------- */

/* Negative returns of ordo__resp_parse. */
#define ORDO__RESP_EPROTO (-1) /* malformed: the connection must be closed */
#define ORDO__RESP_ELIMIT (-2) /* a length or count past a limit */

/* What one request may hold. Every limit is checked before the bytes it
 * bounds are waited for, so a peer cannot make the caller buffer more. */
typedef struct ordo__resp_limits {
  size_t max_args;    /* elements in one request (e.g. 4106) */
  size_t max_bulk;    /* bytes in one bulk string (e.g. 1 MiB) */
  size_t max_inline;  /* bytes of an inline command line (64 KiB) */
  size_t max_request; /* bytes of one whole request (4 MiB) */
} ordo__resp_limits;

/* One argument of a request: bytes inside the parsed buffer. */
typedef struct ordo__resp_arg {
  const char *ptr;
  size_t len;
} ordo__resp_arg;

/*
 * ordo__resp_parse -- parses one request from the start of buf[0..len).
 *
 * Returns the bytes it used (> 0) with argv[0..*argc) pointing into
 * buf[0..return) (*argc is 0 for an empty request, which the caller skips);
 * 0 when buf holds only part of a request, with *need a lower bound on the
 * request's total size (> len), so the caller need not parse again before
 * that many bytes have arrived; or ORDO__RESP_EPROTO (malformed) or
 * ORDO__RESP_ELIMIT (a length or count past a limit, refused as soon as the
 * bytes that say so are seen, before the data they announce), with *err a
 * message for the client ("Protocol error: ..." for EPROTO; for ELIMIT it
 * names the limit). *err is a static string or a thread-local buffer valid
 * until the next call on the same thread.
 *
 * argv has room for lim->max_args entries (the caller's array).
 *
 * buf is not const for one reason: the arguments of an inline command with
 * quotes or escapes ("a b", \x41) are decoded in place, each within its own
 * raw bytes, so that argv can point into buf without a copy. Only a positive
 * return writes, and only inside buf[0..return): a 0 or negative return
 * leaves buf as it was, and multibulk requests are never written. A caller
 * must therefore not parse the same complete request twice.
 */
long ordo__resp_parse(char *buf, size_t len, const ordo__resp_limits *lim,
                      ordo__resp_arg *argv, size_t *argc, size_t *need,
                      const char **err);

/* ---- The reply writer ------------------------------------------------ */

/*
 * A growable output buffer, owned by the caller: zero-initialize it, append
 * replies, hand buf[0..len) to the socket, drop what was written with
 * ordo__out_consume, and release it with ordo__out_free. When an append
 * cannot grow the buffer, oom is set and that append and every later one are
 * dropped: the caller must then close the connection, since its reply stream
 * has a hole.
 */
typedef struct ordo__out {
  char *buf;
  size_t len, cap;
  int oom; /* an append failed; the caller closes the connection */
} ordo__out;

/* +s (CR and LF in s are replaced by spaces). */
void ordo__out_simple(ordo__out *o, const char *s);
/* -CODE message, the message formatted by printf's rules; no CR or LF of
 * code or message leaks into the line: each is replaced by a space. */
void ordo__out_error(ordo__out *o, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* :v */
void ordo__out_int(ordo__out *o, long long v);
/* $n, then n bytes of p (any bytes). */
void ordo__out_bulk(ordo__out *o, const void *p, size_t n);
/* A null: $-1 in RESP2, _ in RESP3. */
void ordo__out_null(ordo__out *o, int resp3);
/* *n: an array of n replies, which the caller appends next. */
void ordo__out_array(ordo__out *o, size_t n);
/* A map of n key-value pairs: %n in RESP3, *2n in RESP2. */
void ordo__out_map(ordo__out *o, size_t n, int resp3);
/* An out-of-band push of n elements: >n in RESP3, *n in RESP2. */
void ordo__out_push(ordo__out *o, size_t n, int resp3);
/* Verbatim text: =(n+4) txt:... in RESP3, a bulk string in RESP2. */
void ordo__out_verbatim(ordo__out *o, const char *txt, size_t n, int resp3);
/* Appends what from holds (from is left as it is; its oom carries over). */
void ordo__out_append(ordo__out *o, const ordo__out *from);
/* Drops the first n bytes (n <= len), the ones the socket took. */
void ordo__out_consume(ordo__out *o, size_t n);
/* Frees the buffer and zeroes o, which can then be used again. */
void ordo__out_free(ordo__out *o);

#endif
