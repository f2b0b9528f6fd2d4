/*
 * resp.c -- ordod's side of the Redis protocol: the request parser
 * (multibulk arrays of bulk strings, and inline commands) and the writer of
 * RESP2/RESP3 replies. The parser does no I/O and allocates nothing; the
 * writer appends to a buffer its caller owns. See README.md, "The RESP
 * parser".
 *
 * Interface: ordo__resp_parse; ordo__out_simple, ordo__out_error,
 * ordo__out_int, ordo__out_bulk, ordo__out_null, ordo__out_array,
 * ordo__out_map, ordo__out_push, ordo__out_verbatim, ordo__out_append,
 * ordo__out_consume,
 * ordo__out_free.
 */
#include "server/resp.h"

#include "ordo_int.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The request parser --------------------------------------------- */

/* The smallest element of a multibulk request, "$0\r\n\r\n": what the
 * lower bounds of *need and the early max_request check count for every
 * element not yet seen. */
#define MIN_ELEM 6u

static const char E_MBULK[] = "Protocol error: invalid multibulk length";
static const char E_BULK[] = "Protocol error: invalid bulk length";
static const char E_CRLF[] = "Protocol error: bulk data not followed by CRLF";
static const char E_QUOTES[] = "Protocol error: unbalanced quotes in request";

/* The messages that carry a value are formatted here: one per thread, valid
 * until that thread's next parse. */
static _Thread_local char resp_msg[96];

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b) {
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static size_t to_size(uint64_t v) {
  return v > SIZE_MAX ? SIZE_MAX : (size_t)v;
}

/* Refuses a request for passing the limit named `name`. */
static long fail_limit(const char **err, const char *what, const char *name,
                       size_t limit, const char *unit) {
  snprintf(resp_msg, sizeof resp_msg, "%s than %s (%zu%s)", what, name, limit,
           unit);
  *err = resp_msg;
  return ORDO__RESP_ELIMIT;
}

static long fail_proto(const char **err, const char *msg) {
  *err = msg;
  return ORDO__RESP_EPROTO;
}

static long fail_type(const char **err, unsigned char c) {
  if (c >= 0x20 && c < 0x7f)
    snprintf(resp_msg, sizeof resp_msg,
             "Protocol error: expected '$', got '%c'", c);
  else
    snprintf(resp_msg, sizeof resp_msg,
             "Protocol error: expected '$', got '\\x%02x'", c);
  *err = resp_msg;
  return ORDO__RESP_EPROTO;
}

/*
 * How a header line bears on the request: its value may not pass `limit`
 * (named `name`), and once the line ends the request needs at least
 * mul * value + add more bytes. A count ('*') may be negative (an empty
 * request); a bulk length ('$') may not.
 */
typedef struct hdr_rule {
  uint64_t limit;
  const char *what, *name, *unit;
  uint64_t mul, add;
  int signed_ok;
  const char *bad; /* the message for a malformed number */
} hdr_rule;

/* The fewest bytes the request can have when the header's CR is (or would
 * be) at index cr and its value so far is v. */
static uint64_t hdr_min_total(const hdr_rule *r, size_t cr, uint64_t v,
                              int minus) {
  uint64_t t = sat_add((uint64_t)cr, 2);
  return minus ? t : sat_add(t, sat_add(sat_mul(r->mul, v), r->add));
}

/*
 * read_header -- reads the header line whose type byte is buf[p]: an
 * optional '-' (counts only), a decimal without leading zeros (as Redis's
 * string2ll wants it: no '+', no "-0", no "007"), then CRLF.
 *
 * Every digit is checked against the limits as soon as it is read: a value
 * that already passes its limit, or a request that already cannot fit in
 * max_request, is refused before its line even ends. Digits only make the
 * value larger, so a refusal is never premature. It also keeps invariant 2
 * of the README: the outcome is decided by the first byte that can decide
 * it, so a prefix that fails fails the same way once completed.
 *
 * Returns 1 with *v, *minus and *end (the index after the LF); 0 when buf
 * ends first (*need set); or a negative code (*err set).
 */
static long read_header(const char *buf, size_t len, size_t p,
                        const hdr_rule *r, uint64_t max_request, uint64_t *v,
                        int *minus, size_t *end, size_t *need,
                        const char **err) {
  uint64_t val = 0;
  int digits = 0, neg = 0;
  for (size_t i = p + 1;; i++) {
    if (i == len) {
      *need = to_size(hdr_min_total(r, i, val, neg));
      return 0;
    }
    unsigned char c = (unsigned char)buf[i];
    if (c >= '0' && c <= '9') {
      if ((digits > 0 && val == 0) || (neg && digits == 0 && c == '0'))
        return fail_proto(err, r->bad);
      if (val > (UINT64_MAX - 9) / 10)
        return fail_proto(err, r->bad);
      val = val * 10 + (uint64_t)(c - '0');
      digits++;
      if (!neg) {
        if (val > r->limit)
          return fail_limit(err, r->what, r->name, to_size(r->limit), r->unit);
        if (hdr_min_total(r, i + 1, val, 0) > max_request)
          return fail_limit(err, "request longer", "max_request",
                            to_size(max_request), " bytes");
      }
    } else if (c == '-' && i == p + 1 && r->signed_ok) {
      neg = 1;
    } else if (c == '\r' && digits > 0) {
      if (i + 1 == len) {
        *need = to_size(hdr_min_total(r, i, val, neg));
        return 0;
      }
      if (buf[i + 1] != '\n')
        return fail_proto(err, r->bad);
      *v = val;
      *minus = neg;
      *end = i + 2;
      return 1;
    } else {
      return fail_proto(err, r->bad);
    }
  }
}

/*
 * parse_multibulk -- "*N\r\n" then N times "$L\r\n<L bytes>\r\n". N <= 0 is
 * an empty request. The bulk data is never looked at, only the CRLF after it.
 */
static long parse_multibulk(char *buf, size_t len, const ordo__resp_limits *lim,
                            ordo__resp_arg *argv, size_t *argc, size_t *need,
                            const char **err) {
  hdr_rule count = {.limit = lim->max_args,
                    .what = "request has more arguments",
                    .name = "max_args",
                    .unit = "",
                    .mul = MIN_ELEM,
                    .add = 0,
                    .signed_ok = 1,
                    .bad = E_MBULK};
  uint64_t n;
  int neg;
  size_t pos;
  long r = read_header(buf, len, 0, &count, lim->max_request, &n, &neg, &pos,
                       need, err);
  if (r <= 0)
    return r;
  if (neg || n == 0) {
    *argc = 0;
    return (long)pos;
  }
  for (uint64_t k = 0; k < n; k++) {
    uint64_t rest = n - k - 1; /* elements after this one */
    if (pos == len) {
      *need = to_size(sat_add(pos, sat_mul(MIN_ELEM, rest + 1)));
      return 0;
    }
    if (buf[pos] != '$')
      return fail_type(err, (unsigned char)buf[pos]);
    hdr_rule bulk = {.limit = lim->max_bulk,
                     .what = "bulk string longer",
                     .name = "max_bulk",
                     .unit = " bytes",
                     .mul = 1,
                     .add = sat_add(2, sat_mul(MIN_ELEM, rest)),
                     .signed_ok = 0,
                     .bad = E_BULK};
    uint64_t blen;
    size_t data;
    r = read_header(buf, len, pos, &bulk, lim->max_request, &blen, &neg, &data,
                    need, err);
    if (r <= 0)
      return r;
    /* read_header held data + blen + 2 to max_request: no overflow. */
    size_t stop = data + (size_t)blen;
    if (len < stop + 2) {
      if (len > stop && buf[stop] != '\r')
        return fail_proto(err, E_CRLF);
      *need = to_size(sat_add(stop + 2, sat_mul(MIN_ELEM, rest)));
      return 0;
    }
    if (buf[stop] != '\r' || buf[stop + 1] != '\n')
      return fail_proto(err, E_CRLF);
    argv[k].ptr = buf + data;
    argv[k].len = (size_t)blen;
    pos = stop + 2;
  }
  *argc = (size_t)n;
  return (long)pos;
}

static int is_blank(unsigned char c) {
  return c == ' ' || c == '\t';
}

static int hex_val(unsigned char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/*
 * inline_arg -- reads the argument that starts at line[*i] (not a blank) by
 * the rules of Redis's sdssplitargs: "..." with the escapes \xHH \n \r \t \b
 * \a (any other \c is c), '...' with \' only, a quote may open inside a word,
 * and a closing quote must be followed by a blank or the end of the line.
 *
 * With write set, the decoded bytes are stored from the argument's first
 * byte on; they are never more than the raw ones and each is written at or
 * before the byte being read, so nothing unread is overwritten. Returns 0
 * with *i past the argument, *out its decoded length and *quoted set if it
 * had a quote; -1 for an unbalanced quote.
 */
static int inline_arg(char *line, size_t e, size_t *i, int write, size_t *out,
                      int *quoted) {
  enum { PLAIN, DQ, SQ } st = PLAIN;
  size_t r = *i, w = *i;
  while (r < e || st != PLAIN) {
    if (r == e)
      return -1;
    unsigned char c = (unsigned char)line[r];
    unsigned char b;
    if (st == PLAIN) {
      if (is_blank(c))
        break;
      if (c == '"' || c == '\'') {
        st = c == '"' ? DQ : SQ;
        *quoted = 1;
        r++;
        continue;
      }
      b = c;
      r++;
    } else if (st == DQ && c == '\\' && r + 3 < e && line[r + 1] == 'x' &&
               hex_val((unsigned char)line[r + 2]) >= 0 &&
               hex_val((unsigned char)line[r + 3]) >= 0) {
      b = (unsigned char)(hex_val((unsigned char)line[r + 2]) * 16 +
                          hex_val((unsigned char)line[r + 3]));
      r += 4;
    } else if (st == DQ && c == '\\' && r + 1 < e) {
      switch (line[r + 1]) {
      case 'n':
        b = '\n';
        break;
      case 'r':
        b = '\r';
        break;
      case 't':
        b = '\t';
        break;
      case 'b':
        b = '\b';
        break;
      case 'a':
        b = '\a';
        break;
      default:
        b = (unsigned char)line[r + 1];
      }
      r += 2;
    } else if (st == SQ && c == '\\' && r + 1 < e && line[r + 1] == '\'') {
      b = '\'';
      r += 2;
    } else if ((st == DQ && c == '"') || (st == SQ && c == '\'')) {
      r++;
      if (r < e && !is_blank((unsigned char)line[r]))
        return -1;
      break;
    } else {
      b = c;
      r++;
    }
    if (write)
      line[w] = (char)b;
    w++;
  }
  *out = w - *i;
  *i = r;
  return 0;
}

/*
 * parse_inline -- a line up to '\n' (a '\r' before it is dropped), split on
 * spaces and tabs with Redis's quoting. The line is checked whole before
 * anything is written, and decoded in place only if it has quotes.
 */
static long parse_inline(char *buf, size_t len, const ordo__resp_limits *lim,
                         ordo__resp_arg *argv, size_t *argc, size_t *need,
                         const char **err) {
  /* One bound for the line, max_inline or max_request less the '\n',
   * whichever is smaller, so that the same limit is named whether the line
   * is refused before or after its end arrives. */
  size_t cap = lim->max_inline;
  int by_request = 0;
  if (lim->max_request == 0 || lim->max_request - 1 < cap) {
    cap = lim->max_request == 0 ? 0 : lim->max_request - 1;
    by_request = 1;
  }
  const char *nl = memchr(buf, '\n', len);
  size_t n = nl ? (size_t)(nl - buf) : len;
  if (n > cap)
    return by_request ? fail_limit(err, "request longer", "max_request",
                                   lim->max_request, " bytes")
                      : fail_limit(err, "inline request longer", "max_inline",
                                   lim->max_inline, " bytes");
  if (!nl) {
    *need = len + 1;
    return 0;
  }
  size_t e = n > 0 && buf[n - 1] == '\r' ? n - 1 : n;

  size_t k = 0, i = 0, alen;
  int quoted = 0;
  for (;;) {
    while (i < e && is_blank((unsigned char)buf[i]))
      i++;
    if (i == e)
      break;
    if (k == lim->max_args)
      return fail_limit(err, "request has more arguments", "max_args",
                        lim->max_args, "");
    argv[k].ptr = buf + i;
    if (inline_arg(buf, e, &i, 0, &alen, &quoted) < 0)
      return fail_proto(err, E_QUOTES);
    argv[k++].len = alen;
  }
  if (quoted) {
    i = 0;
    for (size_t j = 0; j < k; j++) {
      while (is_blank((unsigned char)buf[i]))
        i++;
      ORDO_ASSERT(argv[j].ptr == buf + i);
      int ok = inline_arg(buf, e, &i, 1, &alen, &quoted);
      ORDO_ASSERT(ok == 0 && alen == argv[j].len);
      ORDO_UNUSED(ok);
    }
  }
  *argc = k;
  return (long)(n + 1);
}

long ordo__resp_parse(char *buf, size_t len, const ordo__resp_limits *lim,
                      ordo__resp_arg *argv, size_t *argc, size_t *need,
                      const char **err) {
  /* A return is a long: no request may be longer than LONG_MAX. */
  ordo__resp_limits l = *lim;
  if (l.max_request > (size_t)LONG_MAX)
    l.max_request = (size_t)LONG_MAX;
  *argc = 0;
  *need = 0;
  *err = NULL;
  if (len == 0) {
    *need = 1;
    return 0;
  }
  if (buf[0] == '*')
    return parse_multibulk(buf, len, &l, argv, argc, need, err);
  return parse_inline(buf, len, &l, argv, argc, need, err);
}

/* ---- The reply writer ----------------------------------------------- */

/* A buffer that drains after growing past this is given back. */
#define OUT_KEEP (64u * 1024u)

/* Makes room for n more bytes; 0 (and oom set) if it cannot. */
static int out_room(ordo__out *o, size_t n) {
  if (o->oom)
    return 0;
  if (n <= o->cap - o->len)
    return 1;
  if (n > SIZE_MAX - o->len) {
    o->oom = 1;
    return 0;
  }
  size_t want = o->len + n;
  size_t cap = o->cap ? o->cap : 256;
  while (cap < want)
    cap = cap > SIZE_MAX / 2 ? want : cap * 2;
  char *p = realloc(o->buf, cap);
  if (!p) {
    o->oom = 1;
    return 0;
  }
  o->buf = p;
  o->cap = cap;
  return 1;
}

static void out_raw(ordo__out *o, const void *p, size_t n) {
  if (!out_room(o, n) || n == 0)
    return;
  memcpy(o->buf + o->len, p, n);
  o->len += n;
}

/* Replaces CR and LF in buf[from..len) by spaces: a line reply stays one
 * line whatever its text holds. */
static void out_scrub(ordo__out *o, size_t from) {
  for (size_t i = from; i < o->len; i++)
    if (o->buf[i] == '\r' || o->buf[i] == '\n')
      o->buf[i] = ' ';
}

/* Writes type, the decimal of v (with '-' if neg), CRLF into h (at least
 * 24 bytes); returns the length. By hand, not snprintf: a HOLDERS reply of
 * a key with 1,000 holders writes 4,000 of these, and snprintf was most of
 * its cost. */
static size_t fmt_line(char *h, char type, bool neg, uint64_t v) {
  char d[20];
  size_t nd = 0;
  do {
    d[nd++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  size_t k = 0;
  h[k++] = type;
  if (neg)
    h[k++] = '-';
  while (nd)
    h[k++] = d[--nd];
  h[k++] = '\r';
  h[k++] = '\n';
  return k;
}

/* A type byte, a decimal, CRLF. */
static void out_header(ordo__out *o, char type, size_t n) {
  char h[32];
  out_raw(o, h, fmt_line(h, type, false, (uint64_t)n));
}

void ordo__out_simple(ordo__out *o, const char *s) {
  out_raw(o, "+", 1);
  size_t from = o->len;
  out_raw(o, s, strlen(s));
  out_scrub(o, from);
  out_raw(o, "\r\n", 2);
}

void ordo__out_error(ordo__out *o, const char *code, const char *fmt, ...) {
  if (NEVER(code == NULL || code[0] == '\0'))
    code = "ERR";
  out_raw(o, "-", 1);
  size_t from = o->len;
  out_raw(o, code, strlen(code));
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  /* The message is formatted straight into the buffer (with room for the
   * NUL vsnprintf adds, which the next append overwrites). */
  if (n > 0 && out_room(o, (size_t)n + 2)) {
    o->buf[o->len++] = ' ';
    vsnprintf(o->buf + o->len, (size_t)n + 1, fmt, ap2);
    o->len += (size_t)n;
  }
  va_end(ap2);
  out_scrub(o, from);
  out_raw(o, "\r\n", 2);
}

void ordo__out_int(ordo__out *o, long long v) {
  char h[32];
  /* The magnitude as unsigned, so LLONG_MIN is fine too. */
  uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  out_raw(o, h, fmt_line(h, ':', v < 0, m));
}

void ordo__out_bulk(ordo__out *o, const void *p, size_t n) {
  out_header(o, '$', n);
  out_raw(o, p, n);
  out_raw(o, "\r\n", 2);
}

void ordo__out_null(ordo__out *o, int resp3) {
  if (resp3)
    out_raw(o, "_\r\n", 3);
  else
    out_raw(o, "$-1\r\n", 5);
}

void ordo__out_array(ordo__out *o, size_t n) {
  out_header(o, '*', n);
}

void ordo__out_map(ordo__out *o, size_t n, int resp3) {
  ORDO_ASSERT(n <= SIZE_MAX / 2);
  if (resp3)
    out_header(o, '%', n);
  else
    out_header(o, '*', 2 * n);
}

void ordo__out_push(ordo__out *o, size_t n, int resp3) {
  out_header(o, resp3 ? '>' : '*', n);
}

void ordo__out_verbatim(ordo__out *o, const char *txt, size_t n, int resp3) {
  if (!resp3) {
    ordo__out_bulk(o, txt, n);
    return;
  }
  ORDO_ASSERT(n <= SIZE_MAX - 4);
  out_header(o, '=', n + 4);
  out_raw(o, "txt:", 4);
  out_raw(o, txt, n);
  out_raw(o, "\r\n", 2);
}

void ordo__out_append(ordo__out *o, const ordo__out *from) {
  if (from->oom)
    o->oom = 1;
  out_raw(o, from->buf, from->len);
}

void ordo__out_consume(ordo__out *o, size_t n) {
  if (NEVER(n > o->len))
    n = o->len;
  if (n == 0)
    return;
  o->len -= n;
  if (o->len > 0) {
    memmove(o->buf, o->buf + n, o->len);
  } else if (o->cap > OUT_KEEP) {
    /* One large reply should not pin its buffer for the connection's
     * life. */
    free(o->buf);
    o->buf = NULL;
    o->cap = 0;
  }
}

void ordo__out_free(ordo__out *o) {
  free(o->buf);
  o->buf = NULL;
  o->len = o->cap = 0;
  o->oom = 0;
}
