/*
 * cinema.c -- ordo example: selling cinema seats, all or nothing.
 *
 * A show has 200 seats, 10 rows of 20. 32 buyers, a thread each, want a
 * block of 2 to 6 ADJACENT seats in one row. A buyer picks a block at
 * random, locks all of its seats with ONE ordo_lock_all (exclusive), looks
 * in the seat map whether they are all still free, marks them sold to
 * itself if so, and unlocks. A block someone else got first is given up
 * and another tried, at most --tries times. Because the block is locked as
 * a whole, two buyers whose blocks overlap never each hold half of the
 * other's block while waiting for the rest (the deadlock of taking seats
 * one by one), and nobody ever buys half a block.
 *
 * It shows: composite keys (show_id, seat_id) from ordo's tuple encoder,
 * ordo_lock_all of a set of any size, ordo_retry around one unit of work,
 * and checking afterwards that no seat was sold twice.
 *
 * Run:  build/examples/cinema                   (in-process, mem://)
 *       build/examples/cinema --backend redis://127.0.0.1:6379 --map
 *       build/examples/cinema --help            (every flag)
 * Exit: 0 the check passed, 1 it failed or the backend could not be used,
 *       2 bad usage (an unknown flag, a bad value, a malformed URL).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ordo.h"

#define PROG "cinema"
#define ROW 20     /* seats per row: a block never spans two rows */
#define MAX_WANT 6 /* a buyer wants 2..6 seats */
#define KEY_CAP 32 /* a (u64, u64) tuple takes 18 bytes */
#define URL_FORMS                                                              \
  "mem://, ordod://HOST:PORT, redis://HOST:PORT[/DB], "                        \
  "redlock://HOST:PORT,HOST:PORT,HOST:PORT, postgres://USER:PASS@HOST:PORT/DB" \
  " (each with an optional ?query)"

static const char usage[] =
    "usage: " PROG " [--backend URL] [--rows N] [--buyers N] [--tries N]\n"
    "              [--show N] [--lock-timeout MS] [--seed N] [--map] "
    "[--json]\n"
    "Buyers lock blocks of 2-6 adjacent seats with one ordo_lock_all and\n"
    "buy them if all are free; then the run checks that no seat was sold\n"
    "twice and that the seat map agrees with what the buyers report.\n"
    "  --backend URL      where the locks live (default mem://): mem://,\n"
    "                     ordod://HOST:PORT, redis://HOST:PORT[/DB],\n"
    "                     redlock://HOST:PORT,HOST:PORT,HOST:PORT,\n"
    "                     postgres://USER:PASS@HOST:PORT/DB (each with an\n"
    "                     optional ?query; a password is never shown)\n"
    "  --rows N           rows of 20 seats, 1..1000 (default 10: 200 seats)\n"
    "  --buyers N         buyer threads, 1..1000 (default 32)\n"
    "  --tries N          blocks a buyer tries before giving up (default 20)\n"
    "  --show N           the show's id, the first part of every key "
    "(default 1)\n"
    "  --lock-timeout MS  bound on each ordo_lock_all (default 2000)\n"
    "  --seed N           the buyers' wishes (default 1); who wins a seat\n"
    "                     that two want depends on timing\n"
    "  --map              print the seat map, one letter per buyer\n"
    "  --json             print one JSON object instead of the summary\n"
    "Exit status: 0 the check passed, 1 it failed or the backend could not\n"
    "be used, 2 bad usage.\n";

typedef struct cinema_s {
  ordo_t *o;
  uint64_t show, seed;
  long seats, tries, lock_ms;
  ordo_retry_options_t retry;
  /* sold_to[s] (0 = free, else buyer id + 1) is guarded by seat s's ordo
   * lock and nothing else. sales[s] counts how often seat s was marked
   * sold: an independent witness, since the map alone would hide a seat
   * sold twice (the second sale overwrites the first). */
  int *sold_to;
  _Atomic unsigned *sales;
  pthread_barrier_t start; /* all buyers start at once */
} cinema_t;

/* One buyer; every field past thread is its own until it is joined. */
typedef struct buyer_s {
  cinema_t *c;
  ordo_txn_t *txn;
  int id;
  pthread_t thread;
  int want, got;              /* seats wanted, seats bought (0 or want) */
  long tried, taken, retries; /* blocks tried, found taken, lock retries */
  int err;                    /* an error that stopped it, or 0 */
} buyer_t;

/* One attempt at one block, handed to ordo_retry. */
typedef struct block_s {
  buyer_t *b;
  long first; /* its first seat */
  int unlock_err;
} block_t;

/* SplitMix64's finalizer: every output bit depends on every input bit. */
static uint64_t mix64(uint64_t z) {
  z += UINT64_C(0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * seat_key -- the key of seat (show, seat): a tuple, so that byte order is
 * (show, seat) order. All seats of a show sort together, in seat order,
 * whatever other shows the same backend holds.
 */
static size_t seat_key(uint8_t buf[KEY_CAP], uint64_t show, uint64_t seat) {
  ordo_tuple_t t;
  ordo_tuple_init(&t, buf, KEY_CAP);
  ordo_tuple_add_u64(&t, show);
  ordo_tuple_add_u64(&t, seat);
  return (size_t)ordo_tuple_len(&t);
}

/*
 * try_block -- one attempt, run by ordo_retry: lock the whole block, buy it
 * if every seat is free, unlock. Returns 1 bought, 0 taken, or the lock's
 * error (nothing is then held; ordo_retry backs off and tries again when
 * the error is retryable). Once the seats are marked the attempt counts as
 * done whatever the unlock says: returning its error would make ordo_retry
 * run this again, and the buyer would find its own seats taken.
 */
static int try_block(ordo_txn_t *t, void *arg) {
  block_t *k = arg;
  cinema_t *c = k->b->c;
  uint8_t key[MAX_WANT][KEY_CAP];
  ordo_req_t req[MAX_WANT];
  for (int i = 0; i < k->b->want; i++) {
    size_t len = seat_key(key[i], c->show, (uint64_t)(k->first + i));
    req[i] = (ordo_req_t)ORDO_REQ_X(key[i], len);
  }
  int rc = ordo_lock_all(t, req, (size_t)k->b->want, c->lock_ms);
  if (rc < 0)
    return rc;
  int all_free = 1;
  for (int i = 0; i < k->b->want; i++)
    all_free = all_free && c->sold_to[k->first + i] == 0;
  for (int i = 0; all_free && i < k->b->want; i++) {
    c->sold_to[k->first + i] = k->b->id + 1;
    atomic_fetch_add_explicit(&c->sales[k->first + i], 1, memory_order_relaxed);
  }
  rc = ordo_unlock_all(t);
  if (rc < 0)
    k->unlock_err = rc;
  return all_free;
}

static void *buyer_run(void *arg) {
  buyer_t *b = arg;
  cinema_t *c = b->c;
  /* Each buyer's own stream of choices, from the seed and its id alone. */
  uint64_t r = mix64(c->seed ^ mix64((uint64_t)b->id));
  b->want = 2 + (int)(r % (MAX_WANT - 1));
  pthread_barrier_wait(&c->start);
  while (b->got == 0 && b->tried < c->tries) {
    b->tried++;
    r = mix64(r);
    long row = (long)(r % (uint64_t)(c->seats / ROW));
    long col = (long)((r >> 32) % (uint64_t)(ROW - b->want + 1));
    block_t k = {.b = b, .first = row * ROW + col};
    unsigned attempts = 0;
    int rc = ordo_retry(b->txn, &c->retry, try_block, &k, &attempts);
    b->retries += attempts > 0 ? attempts - 1 : 0;
    if (rc == 1)
      b->got = b->want;
    else if (rc == 0)
      b->taken++; /* someone was faster: try another block */
    else if (!ordo_is_retryable(rc))
      b->err = rc; /* the backend is unusable */
    /* else still busy after every retry: try another block too */
    if (k.unlock_err != 0)
      b->err = k.unlock_err; /* its seats may still be locked */
    if (b->err != 0)
      break;
  }
  return NULL;
}

/* ---- The command line: plumbing, nothing about ordo ---------------------- */

/* opt -- the value of flag name at argv[*i], as "--name V" or "--name=V";
 * NULL when argv[*i] is not that flag. Exits 2 when the value is missing. */
static const char *opt(int argc, char **argv, int *i, const char *name) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0)
    return NULL;
  if (argv[*i][n] == '=')
    return argv[*i] + n + 1;
  if (argv[*i][n] != '\0')
    return NULL;
  if (*i + 1 < argc)
    return argv[++*i];
  fprintf(stderr, PROG ": %s needs a value (see " PROG " --help)\n", name);
  exit(2);
}

/* num -- v as a whole number in lo..hi, or exit 2 saying what is wanted. */
static long num(const char *name, const char *v, long lo, long hi) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (end == v || *end != '\0' || errno != 0 || n < lo || n > hi) {
    fprintf(stderr,
            PROG ": bad value '%s' for %s: a whole number in %ld..%ld\n", v,
            name, lo, hi);
    exit(2);
  }
  return n;
}

/* shown -- url with any password starred out, for error lines. */
static const char *shown(const char *url, char *buf, size_t cap) {
  const char *s = strstr(url, "://"), *at = strrchr(url, '@');
  const char *colon =
      s && at > s ? memchr(s + 3, ':', (size_t)(at - s - 3)) : NULL;
  if (colon == NULL)
    return url;
  snprintf(buf, cap, "%.*s***%s", (int)(colon + 1 - url), url, at);
  return buf;
}

int main(int argc, char **argv) {
  const char *url = "mem://", *v;
  long rows = 10, buyers = 32;
  int json = 0, map = 0;
  cinema_t c = {.show = 1, .seed = 1, .tries = 20, .lock_ms = 2000};
  for (int i = 1; i < argc; i++) {
    if ((v = opt(argc, argv, &i, "--backend")))
      url = v;
    else if ((v = opt(argc, argv, &i, "--rows")))
      rows = num("--rows", v, 1, 1000);
    else if ((v = opt(argc, argv, &i, "--buyers")))
      buyers = num("--buyers", v, 1, 1000);
    else if ((v = opt(argc, argv, &i, "--tries")))
      c.tries = num("--tries", v, 1, 1000000);
    else if ((v = opt(argc, argv, &i, "--show")))
      c.show = (uint64_t)num("--show", v, 0, LONG_MAX);
    else if ((v = opt(argc, argv, &i, "--lock-timeout")))
      c.lock_ms = num("--lock-timeout", v, 0, 3600000);
    else if ((v = opt(argc, argv, &i, "--seed")))
      c.seed = (uint64_t)num("--seed", v, 0, LONG_MAX);
    else if (strcmp(argv[i], "--map") == 0)
      map = 1;
    else if (strcmp(argv[i], "--json") == 0)
      json = 1;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage, stdout);
      return 0;
    } else {
      fprintf(stderr,
              PROG ": unknown option '%s': the options are --backend, "
                   "--rows, --buyers, --tries, --show, --lock-timeout, "
                   "--seed, --map, --json (see " PROG " --help)\n",
              argv[i]);
      return 2;
    }
  }
  c.seats = rows * ROW;
  ordo_retry_options_init(&c.retry);

  /* A URL ordo cannot parse is a usage error; a backend that does not
   * answer is not, and on the remote ones it shows only at the first
   * ordo_txn_begin, since ordo_open connects to nothing. */
  char buf[512];
  int rc = ordo_open(&c.o, url, NULL);
  if (rc == ORDO_EURL || rc == ORDO_EINVAL) {
    fprintf(stderr, PROG ": bad backend URL '%s': accepted forms are %s\n",
            shown(url, buf, sizeof buf), URL_FORMS);
    return 2;
  }
  int opened = rc == 0;
  buyer_t *b = calloc((size_t)buyers, sizeof *b);
  long *per_buyer = calloc((size_t)buyers, sizeof *per_buyer);
  c.sold_to = calloc((size_t)c.seats, sizeof *c.sold_to);
  c.sales = calloc((size_t)c.seats, sizeof *c.sales);
  int oom = !b || !per_buyer || !c.sold_to || !c.sales;
  long begun = 0;
  for (; rc == 0 && !oom && begun < buyers; begun++) {
    b[begun] = (buyer_t){.c = &c, .id = (int)begun};
    rc = ordo_txn_begin(c.o, &b[begun].txn, NULL);
  }
  if (oom || rc < 0) {
    if (oom)
      fputs(PROG ": out of memory; try fewer --rows or --buyers\n", stderr);
    else
      fprintf(stderr,
              PROG ": cannot use backend '%s': %s (%s); check that its server "
                   "is running and that the URL's host, port, database and "
                   "password are right\n",
              shown(url, buf, sizeof buf), ordo_strerror(rc),
              ordo_err_name(rc));
    for (long i = 0; i < begun; i++)
      if (b[i].txn != NULL)
        ordo_txn_end(b[i].txn);
    if (opened)
      ordo_close(c.o);
    free(b);
    free(per_buyer);
    free(c.sold_to);
    free(c.sales);
    return 1;
  }

  pthread_barrier_init(&c.start, NULL, (unsigned)buyers + 1);
  for (long i = 0; i < buyers; i++)
    if (pthread_create(&b[i].thread, NULL, buyer_run, &b[i]) != 0) {
      fprintf(stderr,
              PROG ": cannot start buyer thread %ld; try fewer "
                   "--buyers\n",
              i);
      return 1;
    }
  pthread_barrier_wait(&c.start);
  double t0 = now_s();
  for (long i = 0; i < buyers; i++)
    pthread_join(b[i].thread, NULL);
  double secs = now_s() - t0;

  /* The check. The seat map gives what was sold and to whom; sales gives
   * how often each seat was sold; the buyers say what they bought. */
  long sold = 0, twice = 0, reported = 0, served = 0, taken = 0, retries = 0;
  long disagree = 0, errors = 0;
  int last_err = 0;
  for (long s = 0; s < c.seats; s++) {
    unsigned n = atomic_load(&c.sales[s]);
    twice += n > 1;
    disagree += n != (unsigned)(c.sold_to[s] != 0); /* map vs. sales */
    if (c.sold_to[s] != 0) {
      sold++;
      per_buyer[c.sold_to[s] - 1]++;
    }
  }
  for (long i = 0; i < buyers; i++) {
    reported += b[i].got;
    served += b[i].got > 0;
    taken += b[i].taken;
    retries += b[i].retries;
    disagree += per_buyer[i] != b[i].got;
    if (b[i].err != 0) {
      errors++;
      last_err = b[i].err;
    }
    ordo_txn_end(b[i].txn);
  }
  int ok = twice == 0 && disagree == 0 && sold == reported && errors == 0;

  if (json) {
    printf("{\"example\": \"cinema\", \"backend\": \"%s\", \"show\": %llu, "
           "\"seats\": %ld, \"buyers\": %ld, \"seed\": %llu, \"served\": %ld, "
           "\"sold\": %ld, \"reported\": %ld, \"sold_twice\": %ld, "
           "\"disagreements\": %ld, \"taken\": %ld, \"retries\": %ld, "
           "\"errors\": %ld, \"seconds\": %.6f, \"ok\": %s}\n",
           ordo_url(c.o), (unsigned long long)c.show, c.seats, buyers,
           (unsigned long long)c.seed, served, sold, reported, twice, disagree,
           taken, retries, errors, secs, ok ? "true" : "false");
  } else {
    printf(PROG ": %s, show %llu, %ld seats in %ld rows of %d, %ld buyers, "
                "seed %llu\n",
           ordo_url(c.o), (unsigned long long)c.show, c.seats, rows, ROW,
           buyers, (unsigned long long)c.seed);
    printf("buyers     %ld got the 2-6 adjacent seats they wanted, %ld gave "
           "up after %ld tries\n",
           served, buyers - served, c.tries);
    printf("contention %ld blocks were taken by the time they were locked; "
           "%ld lock retries\n",
           taken, retries);
    printf("seats      %ld of %ld sold in %.1f ms\n", sold, c.seats,
           secs * 1e3);
    for (long s = 0; map && s < c.seats; s++) {
      static const char sym[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "abcdefghijklmnopqrstuvwxyz0123456789";
      if (s % ROW == 0)
        printf("row %-6ld ", s / ROW);
      putchar(c.sold_to[s] ? sym[(c.sold_to[s] - 1) % 62] : '.');
      if (s % ROW == ROW - 1)
        putchar('\n');
    }
    if (errors != 0)
      printf("errors     %ld buyers stopped on %s: %s\n", errors,
             ordo_err_name(last_err), ordo_strerror(last_err));
    printf("invariant: every seat sold at most once, %ld sold %s %ld "
           "reported: %s",
           sold, sold == reported ? "=" : "!=", reported, ok ? "OK\n" : "FAIL");
    if (!ok)
      printf(" (%ld seats sold twice, %ld disagreements between the map, "
             "the sales and the buyers)\n",
             twice, disagree);
  }
  ordo_close(c.o);
  pthread_barrier_destroy(&c.start);
  free(per_buyer);
  free(b);
  free(c.sold_to);
  free(c.sales);
  return ok ? 0 : 1;
}
