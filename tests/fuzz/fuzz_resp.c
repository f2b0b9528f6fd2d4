/*
 * fuzz_resp.c -- libFuzzer target for the RESP parser and writer
 * (src/server/README.md, "The RESP parser"). Seeds: tests/fuzz/corpus/resp;
 * run by scripts/fuzz.sh.
 *
 * Each input is parsed as a pipeline from its start, consuming what every
 * call returns, with small limits so that they are hit often; every result
 * must keep the parser's promises: a length within the input, arguments
 * inside the request, at most max_args of them, and on a short read a need
 * past the input and within the limits. The first request is then parsed
 * again from a prefix whose length comes from the input's first and last
 * bytes: the prefix must give the same answer, or be short with a need no
 * larger than the request. Every request parsed is written back with the
 * writer (as an array of bulk strings, and as an error line) and the array
 * must parse back to the same arguments.
 */
#include "server/resp.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 8
static const ordo__resp_limits LIM = {MAX_ARGS, 64, 128, 512};
/* For reading back what the writer framed: room for every argument. */
static const ordo__resp_limits WIDE = {MAX_ARGS, 512, 1024, 8192};

#define CHECK(x)                                                               \
  do {                                                                         \
    if (!(x)) {                                                                \
      fprintf(stderr, "fuzz_resp: %s:%d: check failed: %s\n", __FILE__,        \
              __LINE__, #x);                                                   \
      abort();                                                                 \
    }                                                                          \
  } while (0)

typedef struct result {
  char *buf; /* the copy parsed (arguments point into it) */
  long rc;
  size_t argc, need;
  char err[128];
  ordo__resp_arg argv[MAX_ARGS];
} result;

/* The promises every return keeps, whatever the input. */
static void check_result(const char *b, size_t n, const ordo__resp_limits *l,
                         const result *r, const char *err) {
  CHECK(r->rc <= (long)n);
  if (r->rc > 0) {
    CHECK(err == NULL);
    CHECK((size_t)r->rc <= l->max_request);
    CHECK(r->argc <= l->max_args);
    for (size_t i = 0; i < r->argc; i++) {
      const ordo__resp_arg *a = &r->argv[i];
      CHECK(a->ptr >= b && a->len <= (size_t)r->rc &&
            a->ptr - b <= r->rc - (long)a->len);
      CHECK(a->len <= l->max_bulk || a->len <= l->max_inline);
    }
  } else if (r->rc == 0) {
    CHECK(r->argc == 0 && err == NULL);
    CHECK(r->need > n);
    CHECK(r->need <= l->max_request || r->need <= l->max_inline + 1);
  } else {
    CHECK(r->rc == ORDO__RESP_EPROTO || r->rc == ORDO__RESP_ELIMIT);
    CHECK(r->argc == 0 && err != NULL && err[0] != '\0');
    if (r->rc == ORDO__RESP_EPROTO)
      CHECK(strncmp(err, "Protocol error: ", 16) == 0);
    CHECK(strchr(err, '\r') == NULL && strchr(err, '\n') == NULL);
  }
}

/* Parses b[0..n) in place. */
static void parse_at(char *b, size_t n, const ordo__resp_limits *l, result *r) {
  const char *err = NULL;
  r->rc = ordo__resp_parse(b, n, l, r->argv, &r->argc, &r->need, &err);
  r->err[0] = '\0';
  if (err)
    snprintf(r->err, sizeof r->err, "%s", err);
  check_result(b, n, l, r, err);
}

/* Parses a fresh copy of data[0..n): the parser may decode in place. */
static void parse_copy(const uint8_t *data, size_t n, result *r) {
  r->buf = malloc(n ? n : 1);
  CHECK(r->buf != NULL);
  if (n)
    memcpy(r->buf, data, n);
  parse_at(r->buf, n, &LIM, r);
}

static int same_args(const result *a, const result *b) {
  if (a->argc != b->argc)
    return 0;
  for (size_t i = 0; i < a->argc; i++)
    if (a->argv[i].len != b->argv[i].len ||
        a->argv[i].ptr - a->buf != b->argv[i].ptr - b->buf ||
        memcmp(a->argv[i].ptr, b->argv[i].ptr, a->argv[i].len) != 0)
      return 0;
  return 1;
}

/* The writer frames the arguments; the parser reads the same ones back. An
 * argument as an error message stays on one line. */
static void roundtrip(const result *r) {
  ordo__out o = {0};
  ordo__out_array(&o, r->argc);
  for (size_t i = 0; i < r->argc; i++)
    ordo__out_bulk(&o, r->argv[i].ptr, r->argv[i].len);
  CHECK(!o.oom);
  result back;
  back.buf = o.buf;
  parse_at(o.buf, o.len, &WIDE, &back);
  CHECK(back.rc == (long)o.len && back.argc == r->argc);
  for (size_t i = 0; i < r->argc; i++)
    CHECK(back.argv[i].len == r->argv[i].len &&
          memcmp(back.argv[i].ptr, r->argv[i].ptr, r->argv[i].len) == 0);
  ordo__out_consume(&o, o.len);

  for (size_t i = 0; i < r->argc; i++) {
    ordo__out_error(&o, "ERR", "%.*s", (int)r->argv[i].len, r->argv[i].ptr);
    CHECK(o.len >= 6 && memcmp(o.buf, "-ERR", 4) == 0);
    CHECK(memcmp(o.buf + o.len - 2, "\r\n", 2) == 0);
    CHECK(memchr(o.buf, '\r', o.len - 2) == NULL);
    CHECK(memchr(o.buf, '\n', o.len - 2) == NULL);
    ordo__out_consume(&o, o.len);
  }
  ordo__out_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The input as a pipeline. */
  result first = {0};
  parse_copy(data, size, &first);
  char *b = malloc(size ? size : 1);
  CHECK(b != NULL);
  if (size)
    memcpy(b, data, size);
  for (size_t off = 0; off < size;) {
    result r;
    r.buf = b + off;
    parse_at(b + off, size - off, &LIM, &r);
    if (off == 0)
      CHECK(r.rc == first.rc && r.need == first.need && same_args(&r, &first));
    if (r.rc <= 0)
      break;
    roundtrip(&r);
    off += (size_t)r.rc;
  }
  free(b);

  /* The first request, from a prefix. */
  size_t k = 0;
  if (size > 0)
    k = ((size_t)data[0] * 131 + data[size - 1]) % (size + 1);
  result part;
  parse_copy(data, k, &part);
  if (part.rc > 0) {
    CHECK(first.rc == part.rc && same_args(&first, &part));
  } else if (part.rc < 0) {
    CHECK(first.rc == part.rc && strcmp(first.err, part.err) == 0);
  } else if (first.rc > 0) {
    /* need is a lower bound on the request's size: a prefix one byte
     * shorter than it is still short. */
    CHECK(part.need <= (size_t)first.rc);
    result shorter;
    parse_copy(data, part.need - 1, &shorter);
    CHECK(shorter.rc == 0);
    free(shorter.buf);
  }
  free(part.buf);
  free(first.buf);
  return 0;
}
