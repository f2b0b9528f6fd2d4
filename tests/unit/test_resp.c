/*
 * test_resp.c -- the RESP parser and reply writer (src/server/README.md,
 * "The RESP parser"): complete requests, every prefix of a valid request
 * (short until the whole, *need never past the real size), pipelining,
 * inline commands with quotes and escapes, empty and binary bulk strings,
 * every malformed request of the fuzzer's seed corpus (tests/fuzz/corpus/
 * resp), every limit just under and just over, the writer's output byte
 * for byte in RESP2 and RESP3, and the LOCK command's reply as the server's
 * own command path (srv_dispatch, cmd_lock and srv_lock_reply of
 * commands.c) writes it from a real engine.
 *
 * Every request is parsed from a heap copy of exactly its size, so that an
 * ASan build catches a parser that reads past what it was given.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"
#include "server/resp.h"
#include "server/server.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The string literal s and its size, NULs and all. */
#define S(s) s, sizeof(s) - 1

/* ---- Fixture: one parse of a fresh copy -------------------------------- */

#define MAXA 64
static const ordo__resp_limits LIM = {MAXA, 1024, 256, 4096};
/* What ordod uses. */
static const ordo__resp_limits REAL = {4106, 1 << 20, 64 << 10, 4 << 20};

static char *B; /* the copy parsed last */
static size_t BN;
static ordo__resp_arg AV[4106]; /* room for REAL's max_args */
static size_t AC, NEED;
static const char *ERR;

/* Parses a fresh copy of s[0..n) with the limits lim. */
static long parse_lim(const char *s, size_t n, const ordo__resp_limits *lim) {
  free(B);
  B = malloc(n ? n : 1);
  assert_non_null(B);
  memcpy(B, s, n);
  BN = n;
  AC = 12345;
  NEED = 12345;
  ERR = "unset";
  assert_true(lim->max_args <= sizeof AV / sizeof AV[0]);
  return ordo__resp_parse(B, n, lim, AV, &AC, &NEED, &ERR);
}

static long parse(const char *s, size_t n) {
  return parse_lim(s, n, &LIM);
}

/* The literal s parses whole. */
#define PARSE_ALL(s) assert_int_equal(parse(S(s)), (long)sizeof(s) - 1)

static int teardown(void **state) {
  (void)state;
  free(B);
  B = NULL;
  return 0;
}

/* The last parse returned argument i with these bytes, inside the copy. */
static void expect_arg(size_t i, const char *s, size_t n) {
  assert_true(i < AC);
  assert_true(AV[i].ptr >= B && AV[i].ptr + AV[i].len <= B + BN);
  assert_int_equal(AV[i].len, n);
  assert_memory_equal(AV[i].ptr, s, n);
}

/* The last parse returned exactly these C-string arguments. */
static void expect_args(size_t n, ...) {
  assert_int_equal(AC, n);
  va_list ap;
  va_start(ap, n);
  for (size_t i = 0; i < n; i++) {
    const char *s = va_arg(ap, const char *);
    expect_arg(i, s, strlen(s));
  }
  va_end(ap);
}

static void expect_error(long rc, long code, const char *part) {
  assert_int_equal(rc, code);
  assert_non_null(ERR);
  if (strstr(ERR, part) == NULL)
    fail_msg("error \"%s\" lacks \"%s\"", ERR, part);
}

/* ---- Complete requests ------------------------------------------------ */

static const char LOCK_REQ[] =
    "*8\r\n$4\r\nLOCK\r\n$1\r\n2\r\n$6\r\nacct:2\r\n$1\r\nX\r\n"
    "$6\r\nacct:1\r\n$1\r\nX\r\n$4\r\nWAIT\r\n$4\r\n1000\r\n";

static void test_complete(void **state) {
  (void)state;
  static const char ping[] = "*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n";
  assert_int_equal(parse(S(ping)), sizeof ping - 1);
  expect_args(2, "PING", "hi");
  assert_null(ERR);

  assert_int_equal(parse(S(LOCK_REQ)), sizeof LOCK_REQ - 1);
  expect_args(8, "LOCK", "2", "acct:2", "X", "acct:1", "X", "WAIT", "1000");

  /* Counts of zero or less are empty requests, consumed whole. */
  assert_int_equal(parse(S("*0\r\n")), 4);
  assert_int_equal(AC, 0);
  assert_int_equal(parse(S("*-1\r\n")), 5);
  assert_int_equal(AC, 0);
  assert_int_equal(parse(S("*-42\r\n*1\r\n")), 6);
  assert_int_equal(AC, 0);
}

/* Every prefix of a valid request is short, with a need past the prefix and
 * never past the request; the whole parses, with or without what follows;
 * and a caller that waits for *need bytes between parses lands on the
 * request's exact size. */
static void check_every_prefix(const char *req, size_t n, size_t nargs) {
  for (size_t k = 0; k < n; k++) {
    long rc = parse(req, k);
    if (rc != 0)
      fail_msg("prefix %zu of %zu: %ld (%s)", k, n, rc, ERR ? ERR : "");
    assert_true(NEED > k);
    assert_true(NEED <= n);
  }
  assert_int_equal(parse(req, n), (long)n);
  assert_int_equal(AC, nargs);

  char *more = malloc(n + 5);
  assert_non_null(more);
  memcpy(more, req, n);
  memcpy(more + n, "*1\r\n$", 5);
  assert_int_equal(parse(more, n + 5), (long)n);
  assert_int_equal(AC, nargs);
  free(more);

  size_t have = 1, parses = 0;
  for (;;) {
    parses++;
    long rc = parse(req, have);
    if (rc != 0) {
      assert_int_equal(rc, (long)n);
      break;
    }
    have = NEED;
  }
  assert_true(parses <= n);
}

static void test_split_every_byte(void **state) {
  (void)state;
  check_every_prefix(S("*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n"), 2);
  check_every_prefix(S(LOCK_REQ), 8);
  check_every_prefix(S("*3\r\n$4\r\nECHO\r\n$0\r\n\r\n$3\r\n\0\r\xff\r\n"), 3);
  check_every_prefix(S("*0\r\n"), 0);
  check_every_prefix(S("*-1\r\n"), 0);
  check_every_prefix(
      S("*12\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"
        "$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n$1\r\nh\r\n"
        "$1\r\ni\r\n$1\r\nj\r\n$1\r\nk\r\n$10\r\n0123456789\r\n"),
      12);
  check_every_prefix(S("PING\r\n"), 1);
  check_every_prefix(S("LOCK 1 \"a b\" X WAIT '10'\n"), 6);
  check_every_prefix(S("\r\n"), 0);
}

static void test_pipelined(void **state) {
  (void)state;
  static const char two[] = "*1\r\n$4\r\nPING\r\n"
                            "*3\r\n$6\r\nUNLOCK\r\n$1\r\na\r\n$1\r\nb\r\n"
                            "PING\r\n"
                            "*2\r\n$4\r\nEC";
  size_t n = sizeof two - 1;
  long rc = parse(two, n);
  assert_int_equal(rc, 14);
  expect_args(1, "PING");

  /* The parser always starts at the start: the caller moves past. */
  size_t off = (size_t)rc;
  rc = parse(two + off, n - off);
  assert_int_equal(rc, 30);
  expect_args(3, "UNLOCK", "a", "b");
  off += (size_t)rc;
  rc = parse(two + off, n - off);
  assert_int_equal(rc, 6);
  expect_args(1, "PING");
  off += (size_t)rc;
  rc = parse(two + off, n - off);
  assert_int_equal(rc, 0);
  /* "*2\r\n$4\r\nEC": the rest of ECHO, its CRLF, and one more element. */
  assert_int_equal(NEED, 4 + 4 + 4 + 2 + 6);
}

/* ---- Inline commands --------------------------------------------------- */

static void test_inline(void **state) {
  (void)state;
  assert_int_equal(parse(S("PING\r\n")), 6);
  expect_args(1, "PING");
  assert_int_equal(parse(S("  LOCK\t1  k \t X \n")), 17);
  expect_args(4, "LOCK", "1", "k", "X");

  /* Only '\n' ends a line; a '\r' inside one is a byte like any other. */
  PARSE_ALL("ECHO a\rb\r\n");
  expect_args(2, "ECHO", "a\rb");
  PARSE_ALL("ECHO a\0b\xff\n");
  assert_int_equal(AC, 2);
  expect_arg(1, S("a\0b\xff"));

  /* Empty lines are empty requests. */
  assert_int_equal(parse(S("\n")), 1);
  assert_int_equal(AC, 0);
  assert_int_equal(parse(S("\r\n")), 2);
  assert_int_equal(AC, 0);
  assert_int_equal(parse(S(" \t \r\nPING\r\n")), 5);
  assert_int_equal(AC, 0);

  /* A line without quotes is left as it was. */
  static const char plain[] = "UNLOCK a b\r\n*1\r\n";
  assert_int_equal(parse(S(plain)), 12);
  assert_memory_equal(B, plain, sizeof plain - 1);
}

static void test_inline_quotes(void **state) {
  (void)state;
  PARSE_ALL("SET \"a b\" 'c d'\r\n");
  expect_args(3, "SET", "a b", "c d");

  PARSE_ALL("ECHO \"\\x41\\x6a\\n\\t\\r\\b\\a\\\\\\\"\\q\"\n");
  expect_args(2, "ECHO", "Aj\n\t\r\b\a\\\"q");

  /* \x needs two hex digits, else it is a plain x. */
  PARSE_ALL("ECHO \"\\xZZ\\x4\"\n");
  expect_args(2, "ECHO", "xZZx4");
  PARSE_ALL("ECHO \"\\x00\\xff\"\n");
  assert_int_equal(AC, 2);
  expect_arg(1, S("\0\xff"));

  /* In single quotes only \' is an escape. */
  PARSE_ALL("ECHO 'don\\'t \"x\" \\n'\n");
  expect_args(2, "ECHO", "don't \"x\" \\n");

  /* A quote may open inside a word; "" is an empty argument. */
  PARSE_ALL("ECHO foo\"bar baz\" \"\" x\n");
  expect_args(4, "ECHO", "foobar baz", "", "x");

  /* The decoded arguments overwrite their own quotes, nothing after the
   * line: the next request is intact. */
  static const char two[] = "ECHO \"a\\tb\" 'c'\r\n*1\r\n$4\r\nPING\r\n";
  assert_int_equal(parse(S(two)), 17);
  expect_args(3, "ECHO", "a\tb", "c");
  assert_memory_equal(B + 17, two + 17, sizeof two - 1 - 17);
  assert_memory_equal(B, "ECHO ", 5);

  /* A line cut before its end is not touched. */
  assert_int_equal(parse(S("ECHO \"a\\tb\"")), 0);
  assert_int_equal(NEED, 12);
  assert_memory_equal(B, "ECHO \"a\\tb\"", 11);
}

/* ---- Empty and binary bulk strings ---------------------------------- */

static void test_empty_bulk(void **state) {
  (void)state;
  assert_int_equal(parse(S("*2\r\n$4\r\nECHO\r\n$0\r\n\r\n")), 20);
  assert_int_equal(AC, 2);
  expect_arg(1, "", 0);
  assert_ptr_equal(AV[1].ptr, B + 18);
  assert_int_equal(parse(S("*1\r\n$0\r\n\r\n")), 10);
  expect_arg(0, "", 0);
}

static void test_binary_bulk(void **state) {
  (void)state;
  /* The data may hold CR, LF, NUL and 0xff: only its length counts. */
  static const char req[] = "*3\r\n$6\r\nUNLOCK\r\n$6\r\na\0\r\n\xff\n\r\n"
                            "$4\r\n\r\n\r\n\r\n";
  assert_int_equal(parse(S(req)), (long)sizeof req - 1);
  assert_int_equal(AC, 3);
  expect_arg(0, S("UNLOCK"));
  expect_arg(1, S("a\0\r\n\xff\n"));
  expect_arg(2, S("\r\n\r\n"));
  /* Multibulk requests are never written. */
  assert_memory_equal(B, req, sizeof req - 1);
}

/* ---- Malformed requests --------------------------------------------- */

typedef struct bad_case {
  const char *name; /* its file in tests/fuzz/corpus/resp, if it has one */
  const char *req;
  size_t len;
  long code;
  const char *err; /* a part of the message */
} bad_case;

#define BAD(name, s, code, err)                                                \
  { name, s, sizeof(s) - 1, code, err }
static const bad_case BAD_CASES[] = {
    BAD("bad-type", "*1\r\n+PING\r\n", ORDO__RESP_EPROTO,
        "Protocol error: expected '$', got '+'"),
    BAD("bad-type-int", "*2\r\n$4\r\nECHO\r\n:1\r\n", ORDO__RESP_EPROTO,
        "expected '$', got ':'"),
    BAD("bad-type-binary", "*1\r\n\x01\r\n", ORDO__RESP_EPROTO,
        "expected '$', got '\\x01'"),
    BAD("negative-bulk", "*1\r\n$-1\r\n", ORDO__RESP_EPROTO,
        "Protocol error: invalid bulk length"),
    BAD("sign-junk", "*+1\r\n$4\r\nPING\r\n", ORDO__RESP_EPROTO,
        "Protocol error: invalid multibulk length"),
    BAD("leading-zero", "*1\r\n$04\r\nPING\r\n", ORDO__RESP_EPROTO,
        "invalid bulk length"),
    BAD("missing-crlf", "*1\r\n$4\r\nPINGX\r\n", ORDO__RESP_EPROTO,
        "Protocol error: bulk data not followed by CRLF"),
    BAD("missing-lf-header", "*1\r$4\r\nPING\r\n", ORDO__RESP_EPROTO,
        "invalid multibulk length"),
    BAD("overflow-count", "*-99999999999999999999\r\n", ORDO__RESP_EPROTO,
        "invalid multibulk length"),
    BAD("unbalanced-quote", "ECHO \"abc\r\n", ORDO__RESP_EPROTO,
        "Protocol error: unbalanced quotes in request"),
    BAD("quote-junk", "ECHO \"a\"b\r\n", ORDO__RESP_EPROTO,
        "unbalanced quotes"),
    BAD("huge-bulk", "*1\r\n$4294967296\r\n", ORDO__RESP_ELIMIT, "max_bulk"),
    BAD("huge-count", "*2147483648\r\n", ORDO__RESP_ELIMIT, "max_args"),
    /* Not in the corpus, or only as the fuzzer's mutations. */
    BAD(NULL, "*-\r\n", ORDO__RESP_EPROTO, "invalid multibulk length"),
    BAD(NULL, "*-0\r\n", ORDO__RESP_EPROTO, "invalid multibulk length"),
    BAD(NULL, "*01\r\n", ORDO__RESP_EPROTO, "invalid multibulk length"),
    BAD(NULL, "* 1\r\n", ORDO__RESP_EPROTO, "invalid multibulk length"),
    BAD(NULL, "*1x\r\n", ORDO__RESP_EPROTO, "invalid multibulk length"),
    BAD(NULL, "*1\n", ORDO__RESP_EPROTO, "invalid multibulk length"),
    BAD(NULL, "*\r\n", ORDO__RESP_EPROTO, "invalid multibulk length"),
    BAD(NULL, "*1\r\n$\r\n", ORDO__RESP_EPROTO, "invalid bulk length"),
    BAD(NULL, "*1\r\n$+3\r\nabc\r\n", ORDO__RESP_EPROTO, "invalid bulk length"),
    BAD(NULL, "*1\r\n$3\nabc\r\n", ORDO__RESP_EPROTO, "invalid bulk length"),
    BAD(NULL, "*1\r\n$3 \r\nabc\r\n", ORDO__RESP_EPROTO, "invalid bulk length"),
    BAD(NULL, "*1\r\n$3\r\nabc\n", ORDO__RESP_EPROTO, "not followed by CRLF"),
    BAD(NULL, "*1\r\n$3\r\nabc\rx", ORDO__RESP_EPROTO, "not followed by CRLF"),
    BAD(NULL, "*1\r\n$3\r\nabcd", ORDO__RESP_EPROTO, "not followed by CRLF"),
    BAD(NULL, "*2\r\n$1\r\na\r\n*1\r\n", ORDO__RESP_EPROTO, "got '*'"),
    BAD(NULL, "*1\r\n\r\n", ORDO__RESP_EPROTO, "got '\\x0d'"),
    BAD(NULL, "ECHO 'abc\n", ORDO__RESP_EPROTO, "unbalanced quotes"),
    BAD(NULL, "ECHO 'a'\"b\"\n", ORDO__RESP_EPROTO, "unbalanced quotes"),
    BAD(NULL, "ECHO \"abc\\\"\n", ORDO__RESP_EPROTO, "unbalanced quotes"),
};

static void test_malformed(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof BAD_CASES / sizeof BAD_CASES[0]; i++) {
    const bad_case *c = &BAD_CASES[i];
    long rc = parse(c->req, c->len);
    if (rc != c->code || strstr(ERR ? ERR : "", c->err) == NULL)
      fail_msg("case %zu (%s): %ld \"%s\", want %ld \"%s\"", i,
               c->name ? c->name : "-", rc, ERR ? ERR : "(null)", c->code,
               c->err);
    assert_int_equal(AC, 0);
    assert_memory_equal(B, c->req, c->len);
    /* Each prefix is short or already fails the same way: the outcome is
     * decided by the first byte that can decide it. */
    char want[128];
    strncpy(want, ERR, sizeof want - 1);
    want[sizeof want - 1] = '\0';
    for (size_t k = 0; k < c->len; k++) {
      rc = parse(c->req, k);
      if (rc == 0) {
        assert_true(NEED > k);
        continue;
      }
      assert_int_equal(rc, c->code);
      assert_string_equal(ERR, want);
    }
  }
}

/* ---- Limits ------------------------------------------------------------ */

static void test_limit_args(void **state) {
  (void)state;
  static const ordo__resp_limits l = {4, 16, 32, 128};
  static const char four[] =
      "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n";
  assert_int_equal(parse_lim(S(four), &l), (long)sizeof four - 1);
  assert_int_equal(AC, 4);
  /* Refused from the header alone, CRLF or not. */
  expect_error(parse_lim(S("*5\r\n"), &l), ORDO__RESP_ELIMIT,
               "request has more arguments than max_args (4)");
  expect_error(parse_lim(S("*5"), &l), ORDO__RESP_ELIMIT, "max_args");
  expect_error(parse_lim(S("*40"), &l), ORDO__RESP_ELIMIT, "max_args");

  assert_int_equal(parse_lim(S("a b c d\n"), &l), 8);
  assert_int_equal(AC, 4);
  expect_error(parse_lim(S("a b c d e\n"), &l), ORDO__RESP_ELIMIT, "max_args");

  /* ordod's limits: the corpus's huge count. */
  assert_int_equal(parse_lim(S("*4106\r\n"), &REAL), 0);
  assert_int_equal(NEED, 7 + 4106 * 6);
  expect_error(parse_lim(S("*4107\r\n"), &REAL), ORDO__RESP_ELIMIT,
               "max_args (4106)");
  expect_error(parse_lim(S("*2147483648\r\n"), &REAL), ORDO__RESP_ELIMIT,
               "max_args");
}

static void test_limit_bulk(void **state) {
  (void)state;
  static const ordo__resp_limits l = {4, 16, 32, 128};
  static const char ok[] = "*1\r\n$16\r\n0123456789abcdef\r\n";
  assert_int_equal(parse_lim(S(ok), &l), (long)sizeof ok - 1);
  expect_arg(0, S("0123456789abcdef"));
  expect_error(parse_lim(S("*1\r\n$17\r\n"), &l), ORDO__RESP_ELIMIT,
               "bulk string longer than max_bulk (16 bytes)");
  expect_error(parse_lim(S("*1\r\n$17"), &l), ORDO__RESP_ELIMIT, "max_bulk");
  expect_error(parse_lim(S("*2\r\n$1\r\na\r\n$170"), &l), ORDO__RESP_ELIMIT,
               "max_bulk");

  /* The corpus's huge length, with ordod's limits, refused at its header. */
  expect_error(parse_lim(S("*1\r\n$4294967296\r\n"), &REAL), ORDO__RESP_ELIMIT,
               "max_bulk (1048576 bytes)");
  expect_error(parse_lim(S("*1\r\n$1048577\r\n"), &REAL), ORDO__RESP_ELIMIT,
               "max_bulk");
  assert_int_equal(parse_lim(S("*1\r\n$1048576\r\n"), &REAL), 0);
  assert_int_equal(NEED, 14 + 1048576 + 2);
}

static void test_limit_inline(void **state) {
  (void)state;
  static const ordo__resp_limits l = {4, 16, 32, 128};
  char line[40];
  memset(line, 'x', sizeof line);
  /* 32 bytes before the '\n' (a '\r' counts) are fine, 33 are not. */
  line[32] = '\n';
  assert_int_equal(parse_lim(line, 33, &l), 33);
  expect_arg(0, line, 32);
  line[31] = '\r';
  assert_int_equal(parse_lim(line, 33, &l), 33);
  expect_arg(0, line, 31);
  assert_int_equal(parse_lim(line, 32, &l), 0);
  assert_int_equal(NEED, 33);
  memset(line, 'x', sizeof line);
  line[33] = '\n';
  expect_error(parse_lim(line, 34, &l), ORDO__RESP_ELIMIT,
               "inline request longer than max_inline (32 bytes)");
  /* Without its end yet, as soon as it has passed the limit. */
  expect_error(parse_lim(line, 33, &l), ORDO__RESP_ELIMIT, "max_inline");

  /* When max_request is the tighter bound, it is the one named, before
   * and after the '\n' arrives. */
  static const ordo__resp_limits tight = {4, 16, 32, 16};
  memset(line, 'y', sizeof line);
  line[15] = '\n';
  assert_int_equal(parse_lim(line, 16, &tight), 16);
  line[15] = 'y';
  line[16] = '\n';
  expect_error(parse_lim(line, 17, &tight), ORDO__RESP_ELIMIT, "max_request");
  expect_error(parse_lim(line, 16, &tight), ORDO__RESP_ELIMIT,
               "request longer than max_request (16 bytes)");
}

static void test_limit_request(void **state) {
  (void)state;
  static const ordo__resp_limits l = {4, 200, 32, 128};
  /* 4 + 6 + 116 + 2 = 128 bytes: fits exactly. */
  char req[160];
  memcpy(req, "*1\r\n$116\r\n", 10);
  memset(req + 10, 'k', 116);
  memcpy(req + 126, "\r\n", 2);
  assert_int_equal(parse_lim(req, 128, &l), 128);
  expect_arg(0, req + 10, 116);
  /* One more byte of data: refused from the header, data unsent. */
  expect_error(parse_lim(S("*1\r\n$117\r\n"), &l), ORDO__RESP_ELIMIT,
               "request longer than max_request (128 bytes)");
  expect_error(parse_lim(S("*1\r\n$117"), &l), ORDO__RESP_ELIMIT,
               "max_request");

  /* The elements still to come count for six bytes each ("$0\r\n\r\n"):
   * 4 + 6 + 110 + 2 + 6 = 128 fits, 111 does not. */
  assert_int_equal(parse_lim(S("*2\r\n$110\r\n"), &l), 0);
  assert_int_equal(NEED, 128);
  expect_error(parse_lim(S("*2\r\n$111\r\n"), &l), ORDO__RESP_ELIMIT,
               "max_request");
  /* Likewise a count: 4 + 4 * 6 = 28 bytes at least. */
  static const ordo__resp_limits small = {8, 16, 32, 28};
  assert_int_equal(parse_lim(S("*4\r\n"), &small), 0);
  assert_int_equal(NEED, 28);
  expect_error(parse_lim(S("*5\r\n"), &small), ORDO__RESP_ELIMIT,
               "max_request (28 bytes)");
}

/* ---- The writer ------------------------------------------------------- */

/* o holds exactly s[0..n); then it is emptied. */
static void expect_out(ordo__out *o, const char *s, size_t n) {
  assert_int_equal(o->oom, 0);
  if (o->len != n || memcmp(o->buf, s, n) != 0)
    fail_msg("wrote \"%.*s\", want \"%.*s\"", (int)o->len, o->buf, (int)n, s);
  ordo__out_consume(o, o->len);
  assert_int_equal(o->len, 0);
}

static void test_out_kinds(void **state) {
  (void)state;
  ordo__out o = {0};
  for (int resp3 = 0; resp3 <= 1; resp3++) {
    ordo__out_simple(&o, "OK");
    expect_out(&o, S("+OK\r\n"));
    ordo__out_int(&o, 0);
    expect_out(&o, S(":0\r\n"));
    ordo__out_int(&o, -30000);
    expect_out(&o, S(":-30000\r\n"));
    ordo__out_int(&o, LLONG_MAX);
    expect_out(&o, S(":9223372036854775807\r\n"));
    ordo__out_int(&o, LLONG_MIN);
    expect_out(&o, S(":-9223372036854775808\r\n"));
    ordo__out_bulk(&o, "acct:1", 6);
    expect_out(&o, S("$6\r\nacct:1\r\n"));
    ordo__out_bulk(&o, NULL, 0);
    expect_out(&o, S("$0\r\n\r\n"));
    ordo__out_bulk(&o, "\0\r\n\xff", 4);
    expect_out(&o, S("$4\r\n\0\r\n\xff\r\n"));
    ordo__out_array(&o, 0);
    expect_out(&o, S("*0\r\n"));
    ordo__out_array(&o, 12);
    expect_out(&o, S("*12\r\n"));
  }

  ordo__out_null(&o, 0);
  expect_out(&o, S("$-1\r\n"));
  ordo__out_null(&o, 1);
  expect_out(&o, S("_\r\n"));
  ordo__out_map(&o, 3, 0);
  expect_out(&o, S("*6\r\n"));
  ordo__out_map(&o, 3, 1);
  expect_out(&o, S("%3\r\n"));
  ordo__out_push(&o, 3, 0);
  expect_out(&o, S("*3\r\n"));
  ordo__out_push(&o, 3, 1);
  expect_out(&o, S(">3\r\n"));
  ordo__out_verbatim(&o, "hello", 5, 0);
  expect_out(&o, S("$5\r\nhello\r\n"));
  ordo__out_verbatim(&o, "hello", 5, 1);
  expect_out(&o, S("=9\r\ntxt:hello\r\n"));
  ordo__out_verbatim(&o, "a\r\nb", 4, 1);
  expect_out(&o, S("=8\r\ntxt:a\r\nb\r\n"));
  ordo__out_free(&o);
}

static void test_out_errors(void **state) {
  (void)state;
  ordo__out o = {0};
  ordo__out_error(&o, "ERR", "unknown command '%s'", "FOO");
  expect_out(&o, S("-ERR unknown command 'FOO'\r\n"));
  ordo__out_error(&o, "LIMIT", "max number of clients reached (%d)", 10);
  expect_out(&o, S("-LIMIT max number of clients reached (10)\r\n"));
  /* CR and LF from anywhere become spaces: one line, whatever the text. */
  ordo__out_error(&o, "ERR", "bad key '%s'", "a\r\n-ERR x\r\n");
  expect_out(&o, S("-ERR bad key 'a  -ERR x  '\r\n"));
  ordo__out_error(&o, "DEAD\nLOCK", "%s", "\n");
  expect_out(&o, S("-DEAD LOCK  \r\n"));
  ordo__out_error(&o, "TIMEOUT", "%s", "");
  expect_out(&o, S("-TIMEOUT\r\n"));
  ordo__out_simple(&o, "line\r\nbreak");
  expect_out(&o, S("+line  break\r\n"));
  /* A long message, formatted in place. */
  char big[3000];
  memset(big, 'm', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  ordo__out_error(&o, "ERR", "%s%s", big, "!");
  assert_int_equal(o.len, 5 + 2999 + 1 + 2);
  assert_memory_equal(o.buf + o.len - 4, "m!\r\n", 4);
  ordo__out_free(&o);
}

/* ---- The LOCK command, through the server's own path ---------------
 *
 * commands.c is compiled into this test (tests/CMakeLists.txt), so a
 * request's bytes go through the parser, srv_dispatch and cmd_lock to a
 * real mem:// engine, and the reply's bytes come out of srv_lock_reply as
 * ordod sends them. What commands.c calls in server.c (the loop, the
 * session map, the lease timers) is stood in for here, with a clock that
 * stands still so that a reply's lease time is exact. The expected replies
 * are written out by hand, keys in the canonical order of docs/protocol.md;
 * only the fencing tokens come from the engine (ordo_fence on the session's
 * txn), shifted by the server's epoch as the protocol says, since which
 * number the engine draws for a key is the engine's business.
 */

static uint64_t fake_ms = 5000000; /* the stood-in clock, which stands still */
static _Atomic int nevents;        /* events srv_event_push got */
static _Atomic int last_status;

uint64_t srv_now_ms(void) {
  return fake_ms;
}

/* The lease's deadline, as server.c sets it (the timer is not run here). */
void srv_sess_renew(sess *ss) {
  ss->expires_ms = fake_ms + (uint64_t)ss->lease_ms;
}

void srv_sess_attach(conn *c, sess *ss) {
  ss->c = c;
  c->sess = ss;
  srv_sess_renew(ss);
}

sess *srv_sess_find(srv *s, uint64_t id) {
  (void)s;
  (void)id;
  return NULL;
}

sess *srv_sess_by_token(srv *s, const char *token, size_t len) {
  (void)s;
  (void)token;
  (void)len;
  return NULL;
}

/* Resumable sessions are server.c's (tested by
 * tests/integration/test_ordod.py); no case here reaches them. */
int srv_sess_make_resumable(srv *s, sess *ss) {
  (void)s;
  (void)ss;
  return -1;
}

void srv_sess_drop(srv *s, sess *ss) {
  (void)s;
  (void)ss;
}

/* An engine event (a waiting LOCK's outcome): counted, for the case to
 * answer as server.c's loop would. It may come from the engine's timer
 * thread, hence the atomics. */
void srv_event_push(srv *s, uint64_t sess_id, uint64_t gen, int status) {
  (void)s;
  (void)sess_id;
  (void)gen;
  atomic_store(&last_status, status);
  atomic_fetch_add(&nevents, 1);
}

void srv_log(srv *s, int level, const char *fmt, ...) {
  (void)s;
  (void)level;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

int srv_conf_parse_file(srv_config *cfg, const char *path, char *err,
                        size_t errlen) {
  (void)cfg;
  (void)path;
  snprintf(err, errlen, "no config files in this test");
  return -1;
}

/* The admin commands' server half is server.c's
 * (tests/integration/test_admin.py); no case here reaches a kill, and a
 * wait here is no one's to log. */
void srv_wait_begin(srv *s, sess *ss) {
  (void)s;
  (void)ss;
}

void srv_wait_rearm(srv *s) {
  (void)s;
}

void srv_conn_kill(conn *c) {
  (void)c;
}

void srv_sess_kill(srv *s, sess *ss, const char *by, size_t by_len,
                   const conn *self) {
  (void)s;
  (void)ss;
  (void)by;
  (void)by_len;
  (void)self;
}

int srv_conf_set(srv_config *cfg, const char *name, const char *val, char *err,
                 size_t errlen) {
  (void)cfg;
  (void)val;
  snprintf(err, errlen, "no option '%s' in this test", name);
  return -1;
}

/* Shards' probes are probe.c's (tests/integration/test_probes.py): a
 * server here has no peers. */
void srv_probe_wait_begin(srv *s, sess *ss) {
  (void)s;
  (void)ss;
}

sess *srv_probe_gid_attached(srv *s, const uint8_t *gid, const sess *except) {
  (void)s;
  (void)gid;
  (void)except;
  return NULL;
}

bool srv_conn_gone(conn *c) {
  (void)c;
  return false;
}

void srv_probe_gid_set(srv *s, sess *ss) {
  (void)s;
  (void)ss;
}

bool srv_probe_lock_check(srv *s, conn *c, sess *ss, uint32_t attempt) {
  (void)s;
  (void)c;
  (void)ss;
  (void)attempt;
  return true;
}

void srv_probe_unlocked(srv *s, sess *ss, bool all) {
  (void)s;
  (void)ss;
  (void)all;
}

void srv_probe_cmd(conn *c, size_t argc, ordo__resp_arg *argv) {
  (void)argc;
  (void)argv;
  ordo__out_error(&c->out, "ERR", "no peers in this test");
}

uint64_t srv_probe_deadlocks(srv *s) {
  (void)s;
  return 0;
}

size_t srv_probe_info(srv *s, char *buf, size_t cap) {
  (void)s;
  (void)buf;
  (void)cap;
  return 0;
}

const char *srv_order_name(ordo_order_mode_t m) {
  return m == ORDO_ORDER_WARN     ? "warn"
         : m == ORDO_ORDER_REFUSE ? "refuse"
                                  : "off";
}

/* tls.c is not linked: CONFIG GET's tls-auth-clients reads the name here. */
const char *srv_tls_auth_name(int mode) {
  return mode == SRV_TLS_AUTH_NO    ? "no"
         : mode == SRV_TLS_AUTH_YES ? "yes"
                                    : "optional";
}

/* A server of two sessions, each on its connection, on a fresh engine. */
static srv SRV;
static sess SESS[2];
static conn CONN[2];
#define EPOCH 3u /* tokens are EPOCH << 40 | the engine's */

static int srv_setup(void **state) {
  (void)state;
  memset(&SRV, 0, sizeof SRV);
  memset(SESS, 0, sizeof SESS);
  memset(CONN, 0, sizeof CONN);
  SRV.cfg.lease_ms = 30000;
  SRV.cfg.max_keys = 1024;
  SRV.cfg.max_key_len = 512;
  SRV.cfg.max_session_locks = 1000;
  SRV.cfg.max_locks = 1000;
  SRV.epoch = EPOCH;
  if (ordo_open(&SRV.o, "mem://", NULL) != 0)
    return -1;
  for (int i = 0; i < 2; i++) {
    if (ordo_txn_begin(SRV.o, &SESS[i].txn, NULL) != 0)
      return -1;
    SESS[i].id = (uint64_t)i + 1;
    SESS[i].lease_ms = SRV.cfg.lease_ms;
    CONN[i] = (conn){.s = &SRV, .authed = true, .resp = 2};
    CONN[i].id = (uint64_t)i + 1;
    srv_sess_attach(&CONN[i], &SESS[i]);
  }
  return 0;
}

static int srv_teardown(void **state) {
  for (int i = 0; i < 2; i++) {
    ordo_txn_end(SESS[i].txn);
    free(SESS[i].req);
    free(SESS[i].keybuf);
    ordo__out_free(&CONN[i].out);
  }
  ordo_close(SRV.o);
  return teardown(state);
}

/* Connection i sends the request req (whole, one request). */
static void send_req(int i, const char *req, size_t n) {
  assert_int_equal(parse_lim(req, n, &REAL), (long)n);
  srv_dispatch(&CONN[i], AC, AV);
}
#define SEND(i, s) send_req((i), S(s))

/* The token session i holds key with, as the reply must show it. */
static unsigned long long token(int i, const char *key) {
  uint64_t f = 0;
  assert_int_equal(ordo_fence(SESS[i].txn, key, strlen(key), &f), 0);
  assert_true(f > 0 && f < (1ull << 40));
  return ((unsigned long long)EPOCH << 40) | f;
}

/* Appends printf-style to the expected reply want[0..*len). */
static void want_add(char *want, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void want_add(char *want, size_t *len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(want + *len, 1024 - *len, fmt, ap);
  va_end(ap);
  assert_true(w > 0 && *len + (size_t)w < 1024);
  *len += (size_t)w;
}

/* LOCK's reply (docs/protocol.md): [lease ms, [key, token, ...]], the keys
 * in canonical order (unsigned bytes, a proper prefix first), each once,
 * whatever the request's order and repeats. */
static void test_lock_reply(void **state) {
  (void)state;
  char want[1024];
  size_t n = 0;
  /* The protocol's own example: two keys, asked out of order. */
  SEND(0, LOCK_REQ);
  want_add(want, &n, "*2\r\n:30000\r\n*4\r\n");
  want_add(want, &n, "$6\r\nacct:1\r\n:%llu\r\n", token(0, "acct:1"));
  want_add(want, &n, "$6\r\nacct:2\r\n:%llu\r\n", token(0, "acct:2"));
  expect_out(&CONN[0].out, want, n);
  SEND(0, "UNLOCK\r\n");
  expect_out(&CONN[0].out, S(":2\r\n"));

  /* A proper prefix first, a binary key by its unsigned bytes (0xff after
   * every ASCII byte), repeats merged with the strongest mode; the lease
   * set by the request's own LEASE. */
  SEND(0, "*14\r\n$4\r\nLOCK\r\n$1\r\n5\r\n$6\r\nacct:2\r\n$1\r\nS\r\n"
          "$2\r\n\xff"
          "k\r\n$1\r\nX\r\n$4\r\nacct\r\n$1\r\nS\r\n$6\r\nacct:1\r\n$1\r\nX\r\n"
          "$6\r\nacct:2\r\n$1\r\nX\r\n$5\r\nLEASE\r\n$4\r\n5000\r\n");
  n = 0;
  want_add(want, &n, "*2\r\n:5000\r\n*8\r\n");
  want_add(want, &n, "$4\r\nacct\r\n:%llu\r\n", token(0, "acct"));
  want_add(want, &n, "$6\r\nacct:1\r\n:%llu\r\n", token(0, "acct:1"));
  want_add(want, &n, "$6\r\nacct:2\r\n:%llu\r\n", token(0, "acct:2"));
  want_add(want, &n, "$2\r\n\xffk\r\n:%llu\r\n", token(0, "\xffk"));
  expect_out(&CONN[0].out, want, n);
  ordo_mode_t m = ORDO_MODE_S;
  assert_int_equal(ordo_held(SESS[0].txn, "acct:2", 6, &m), 1);
  assert_int_equal(m, ORDO_MODE_X);
  assert_int_equal(ordo_held(SESS[0].txn, "acct", 4, &m), 1);
  assert_int_equal(m, ORDO_MODE_S);

  /* Another session's try of a held key: an error, one line, holding
   * nothing; a shared key is shared. */
  SEND(1, "LOCK 1 acct:1 X WAIT 0\r\n");
  ordo__out *o = &CONN[1].out;
  assert_true(o->len > 10 && memcmp(o->buf, "-TIMEOUT ", 9) == 0);
  assert_null(memchr(o->buf, '\n', o->len - 1));
  assert_memory_equal(o->buf + o->len - 2, "\r\n", 2);
  ordo__out_consume(o, o->len);
  assert_int_equal(ordo_held(SESS[1].txn, "acct:1", 6, NULL), 0);
  SEND(1, "LOCK 1 acct S WAIT 0\r\n");
  n = 0;
  want_add(want, &n, "*2\r\n:30000\r\n*2\r\n$4\r\nacct\r\n:%llu\r\n",
           token(1, "acct"));
  expect_out(o, want, n);
  assert_int_equal(atomic_load(&nevents), 0);
}

/* A LOCK that waits writes nothing until its event; the reply then is the
 * same, from srv_lock_reply (what server.c's loop calls on a grant), with a
 * token newer than the last holder's. */
static void test_lock_reply_after_wait(void **state) {
  (void)state;
  char want[1024];
  size_t n = 0;
  SEND(0, "LOCK 2 b X a X\r\n");
  unsigned long long old = token(0, "a");
  ordo__out_consume(&CONN[0].out, CONN[0].out.len);
  SEND(1, "LOCK 3 c X b X a X\r\n");
  assert_int_equal(CONN[1].out.len, 0);
  assert_true(SESS[1].waiting);
  assert_int_equal(atomic_load(&nevents), 0);
  SEND(0, "UNLOCK\r\n");
  expect_out(&CONN[0].out, S(":2\r\n"));
  assert_int_equal(atomic_load(&nevents), 1);
  assert_int_equal(atomic_load(&last_status), 0);
  SESS[1].waiting = false;
  srv_lock_reply(&CONN[1], &SESS[1]);
  want_add(want, &n, "*2\r\n:30000\r\n*6\r\n");
  want_add(want, &n, "$1\r\na\r\n:%llu\r\n", token(1, "a"));
  want_add(want, &n, "$1\r\nb\r\n:%llu\r\n", token(1, "b"));
  want_add(want, &n, "$1\r\nc\r\n:%llu\r\n", token(1, "c"));
  expect_out(&CONN[1].out, want, n);
  assert_true(token(1, "a") > old);
}

/* Whatever the writer frames, the parser reads back. */
static void test_out_roundtrip(void **state) {
  (void)state;
  ordo__out o = {0};
  ordo__out_array(&o, 3);
  ordo__out_bulk(&o, "LOCK", 4);
  ordo__out_bulk(&o, "\0\r\n", 3);
  ordo__out_bulk(&o, "", 0);
  assert_int_equal(parse(o.buf, o.len), (long)o.len);
  assert_int_equal(AC, 3);
  expect_arg(0, S("LOCK"));
  expect_arg(1, S("\0\r\n"));
  expect_arg(2, "", 0);
  ordo__out_free(&o);
}

static void test_out_buffer(void **state) {
  (void)state;
  ordo__out o = {0};
  /* Growth past the first allocation, and consume from the front. */
  char *big = malloc(200000);
  assert_non_null(big);
  memset(big, 'b', 200000);
  ordo__out_bulk(&o, big, 200000);
  assert_int_equal(o.len, 9 + 200000 + 2);
  ordo__out_consume(&o, 9);
  assert_memory_equal(o.buf, big, 200000);
  ordo__out_consume(&o, 200000);
  assert_int_equal(o.len, 2);
  assert_memory_equal(o.buf, "\r\n", 2);
  /* Drained after growing large, the buffer is given back. */
  ordo__out_consume(&o, 2);
  assert_int_equal(o.len, 0);
  assert_null(o.buf);
  assert_int_equal(o.cap, 0);
  ordo__out_consume(&o, 0);
  free(big);

  /* Once an append has failed, the later ones are dropped too. */
  ordo__out_simple(&o, "OK");
  o.oom = 1;
  ordo__out_int(&o, 1);
  ordo__out_error(&o, "ERR", "%s", "x");
  assert_int_equal(o.len, 5);
  ordo__out_free(&o);
  assert_null(o.buf);
  assert_int_equal(o.len + o.cap + (size_t)o.oom, 0);
  ordo__out_simple(&o, "OK");
  expect_out(&o, S("+OK\r\n"));
  ordo__out_free(&o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_complete, teardown),
      cmocka_unit_test_teardown(test_split_every_byte, teardown),
      cmocka_unit_test_teardown(test_pipelined, teardown),
      cmocka_unit_test_teardown(test_inline, teardown),
      cmocka_unit_test_teardown(test_inline_quotes, teardown),
      cmocka_unit_test_teardown(test_empty_bulk, teardown),
      cmocka_unit_test_teardown(test_binary_bulk, teardown),
      cmocka_unit_test_teardown(test_malformed, teardown),
      cmocka_unit_test_teardown(test_limit_args, teardown),
      cmocka_unit_test_teardown(test_limit_bulk, teardown),
      cmocka_unit_test_teardown(test_limit_inline, teardown),
      cmocka_unit_test_teardown(test_limit_request, teardown),
      cmocka_unit_test(test_out_kinds),
      cmocka_unit_test(test_out_errors),
      cmocka_unit_test_setup_teardown(test_lock_reply, srv_setup, srv_teardown),
      cmocka_unit_test_setup_teardown(test_lock_reply_after_wait, srv_setup,
                                      srv_teardown),
      cmocka_unit_test_teardown(test_out_roundtrip, teardown),
      cmocka_unit_test(test_out_buffer),
  };
  return tu_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
