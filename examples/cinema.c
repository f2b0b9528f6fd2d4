/*
 * cinema.c -- ordo example: selling cinema seats, all or nothing.
 *
 * 32 buyer threads each want 2-6 ADJACENT seats in one row of a 200-seat
 * show. A buyer locks its whole block with ONE ordo_lock_all of composite
 * keys (show_id, seat_id), inside ordo_retry, and buys it if every seat is
 * still free; taken as one set, two overlapping blocks never each hold half
 * of the other's (the deadlock of taking seats one by one). The check
 * afterwards finds no seat sold twice. README.md: flags, output, exits.
 */
#define EX_PROG "cinema"
#include "common.h" /* flags, threads, error lines: no locking in it */
#include "ordo.h"

#define ROW 20     /* seats per row: a block never spans two rows */
#define MAX_WANT 6 /* a buyer wants 2..6 seats */
#define KEY_CAP 32 /* a (u64, u64) tuple takes 18 bytes */

typedef struct cinema_s {
  ordo_t *o;
  const char *url;
  long seats, buyers, tries, lock_ms;
  uint64_t show, seed;
  long map, json;
  ordo_retry_options_t retry;
  /* sold_to[s] (0 = free, else buyer id + 1) is guarded by seat s's ordo
   * lock alone. sales[s] counts the sales of seat s: a witness, since the
   * map alone would hide a seat sold twice (the second sale overwrites). */
  int *sold_to;
  _Atomic unsigned *sales;
  struct buyer_s *b;
  long sold, twice, reported, disagree, errors, *per_buyer; /* check() */
  double secs;
} cinema_t;

/* One buyer; its fields are its own until it is joined. */
typedef struct buyer_s {
  cinema_t *c;
  ordo_txn_t *txn;
  int id, want, got;          /* seats wanted, seats bought (0 or want) */
  long first;                 /* the block being tried: its first seat */
  long tried, taken, retries; /* blocks tried, found taken, lock retries */
  int err, unlock_err;        /* an error that stopped it, or 0 */
} buyer_t;

/* try_block -- one attempt, run by ordo_retry: lock the whole block, buy it
 * if every seat is free, unlock. Returns 1 bought, 0 taken, or the lock's
 * error (then nothing is held, and ordo_retry tries again if it may). Once
 * the seats are marked the attempt is done, whatever the unlock says. */
static int try_block(ordo_txn_t *t, void *arg) {
  buyer_t *b = arg;
  uint8_t key[MAX_WANT][KEY_CAP];
  ordo_req_t req[MAX_WANT];
  for (int i = 0; i < b->want; i++) { /* a show's seats sort together */
    ordo_tuple_t k;
    ordo_tuple_init(&k, key[i], KEY_CAP);
    ordo_tuple_add_u64(&k, b->c->show);
    ordo_tuple_add_u64(&k, (uint64_t)(b->first + i));
    req[i] = (ordo_req_t)ORDO_REQ_X(key[i], (size_t)ordo_tuple_len(&k));
  }
  int rc = ordo_lock_all(t, req, (size_t)b->want, b->c->lock_ms);
  if (rc < 0)
    return rc;
  int *seat = b->c->sold_to + b->first, all_free = 1;
  for (int i = 0; i < b->want; i++)
    all_free = all_free && seat[i] == 0;
  for (int i = 0; all_free && i < b->want; i++) {
    seat[i] = b->id + 1;
    atomic_fetch_add_explicit(&b->c->sales[b->first + i], 1,
                              memory_order_relaxed);
  }
  if ((rc = ordo_unlock_all(t)) < 0)
    b->unlock_err = rc; /* its seats may still be locked: it stops */
  return all_free;
}

static void *buyer_run(void *arg) {
  buyer_t *b = arg;
  cinema_t *c = b->c;
  /* Each buyer's own stream of choices, from the seed and its id alone. */
  uint64_t r = ex_mix64(c->seed ^ ex_mix64((uint64_t)b->id));
  b->want = 2 + (int)(r % (MAX_WANT - 1));
  while (b->got == 0 && b->tried < c->tries && b->err == 0) {
    b->tried++;
    r = ex_mix64(r);
    long row = (long)(r % (uint64_t)(c->seats / ROW));
    b->first = row * ROW + (long)((r >> 32) % (uint64_t)(ROW - b->want + 1));
    unsigned attempts = 0;
    int rc = ordo_retry(b->txn, &c->retry, try_block, b, &attempts);
    b->retries += attempts > 0 ? attempts - 1 : 0;
    b->got = rc == 1 ? b->want : 0;
    b->taken += rc == 0; /* someone was faster: try another block */
    if (rc < 0 && !ordo_is_retryable(rc))
      b->err = rc; /* the backend is unusable (else busy: another block) */
    b->err = b->unlock_err != 0 ? b->unlock_err : b->err;
  }
  return NULL;
}

/* check -- the invariant: every seat sold at most once (the sales), the
 * map agrees with the sales and with what each buyer reports, and no
 * buyer stopped on an error. */
static int check(cinema_t *c) {
  for (long s = 0; s < c->seats; s++) {
    unsigned n = atomic_load(&c->sales[s]);
    c->twice += n > 1;
    c->disagree += n != (unsigned)(c->sold_to[s] != 0); /* map vs. sales */
    if (c->sold_to[s] != 0)
      c->sold++, c->per_buyer[c->sold_to[s] - 1]++;
  }
  for (long i = 0; i < c->buyers; i++) {
    c->reported += c->b[i].got;
    c->disagree += c->per_buyer[i] != c->b[i].got; /* map vs. buyer */
    c->errors += c->b[i].err != 0;
  }
  return c->twice == 0 && c->disagree == 0 && c->sold == c->reported &&
         c->errors == 0;
}

/* Below the line: flags and memory (exit 2 if bad), the report, free. */
static void setup(int argc, char **argv, cinema_t *c);
static void report(const cinema_t *c, int ok);
static void teardown(cinema_t *c);

int main(int argc, char **argv) {
  cinema_t c;
  setup(argc, argv, &c);
  int rc = ex_open(&c.o, c.url), ok = 0, n = 0;
  for (; rc == 0 && n < c.buyers; n++) {
    c.b[n] = (buyer_t){.c = &c, .id = (int)n};
    rc = ordo_txn_begin(c.o, &c.b[n].txn, NULL); /* a remote one connects */
  }
  if (rc == 0) {
    c.secs = ex_threads(c.buyers, c.b, sizeof *c.b, buyer_run, NULL, NULL,
                        "--buyers");
    report(&c, ok = check(&c));
  } else {
    ex_unusable(c.url, rc);
  }
  for (long i = 0; i < n; i++)
    ordo_txn_end(c.b[i].txn); /* NULL (a begin that failed): nothing */
  ordo_close(c.o);            /* NULL when ordo_open failed: nothing */
  teardown(&c);
  return ok ? 0 : 1;
}

/* ---- plumbing below: flags, report ------------------------------------- */

/* The flags (ex_flags, in common.h): each one's range, in to[]'s order. */
static const char flags[] = "--rows=1..1000 --buyers=1..1000 "
                            "--tries=1..1000000 --show=0.. "
                            "--lock-timeout=0..3600000 --seed=0.. --map --json";

static const char usage[] =
    "usage: " EX_PROG " [--backend URL] [--rows N] [--buyers N] [--tries N]\n"
    "              [--show N] [--lock-timeout MS] [--seed N] [--map] "
    "[--json]\n"
    "Buyers lock blocks of 2-6 adjacent seats with one ordo_lock_all and\n"
    "buy them if all are free; then the run checks that no seat was sold\n"
    "twice and that the seat map agrees with what the buyers report.\n" //
    EX_HELP_BACKEND
    "  --rows N           rows of 20 seats, 1..1000 (default 10: 200 seats)\n"
    "  --buyers N         buyer threads, 1..1000 (default 32)\n"
    "  --tries N          blocks a buyer tries before giving up (default 20)\n"
    "  --show N           the show's id, the first part of every key "
    "(default 1)\n"
    "  --lock-timeout MS  bound on each ordo_lock_all (default 2000)\n"
    "  --seed N           the buyers' wishes (default 1); who wins a seat\n"
    "                     that two want depends on timing\n"
    "  --map              print the seat map, one letter per buyer\n" //
    EX_HELP_END;

static void setup(int argc, char **argv, cinema_t *c) {
  long rows = 10, show = 1, seed = 1;
  *c = (cinema_t){.buyers = 32, .tries = 20, .lock_ms = 2000};
  long *const to[] = {&rows,       &c->buyers, &c->tries, &show,
                      &c->lock_ms, &seed,      &c->map,   &c->json};
  c->url = ex_flags(argc, argv, usage, flags, to);
  c->seats = rows * ROW, c->show = (uint64_t)show, c->seed = (uint64_t)seed;
  c->b = ex_calloc(c->buyers, sizeof *c->b, "--buyers");
  c->per_buyer = ex_calloc(c->buyers, sizeof *c->per_buyer, "--buyers");
  c->sold_to = ex_calloc(c->seats, sizeof *c->sold_to, "--rows");
  c->sales = ex_calloc(c->seats, sizeof *c->sales, "--rows");
  ordo_retry_options_init(&c->retry);
}

static void report(const cinema_t *c, int ok) {
  static const char sym[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                            "abcdefghijklmnopqrstuvwxyz0123456789";
  long served = 0, taken = 0, retries = 0;
  int err = 0;
  for (long i = 0; i < c->buyers; i++) {
    served += c->b[i].got > 0;
    taken += c->b[i].taken;
    retries += c->b[i].retries;
    err = c->b[i].err != 0 ? c->b[i].err : err;
  }
  if (c->json) {
    printf("{\"example\": \"cinema\", \"backend\": \"%s\", \"show\": %llu, "
           "\"seats\": %ld, \"buyers\": %ld, \"seed\": %llu, \"served\": %ld, "
           "\"sold\": %ld, \"reported\": %ld, \"sold_twice\": %ld, "
           "\"disagreements\": %ld, \"taken\": %ld, \"retries\": %ld, "
           "\"errors\": %ld, \"seconds\": %.6f, \"ok\": %s}\n",
           ordo_url(c->o), (unsigned long long)c->show, c->seats, c->buyers,
           (unsigned long long)c->seed, served, c->sold, c->reported, c->twice,
           c->disagree, taken, retries, c->errors, c->secs,
           ok ? "true" : "false");
    return;
  }
  printf(EX_PROG ": %s, show %llu, %ld seats in %ld rows of %d, %ld buyers, "
                 "seed %llu\n",
         ordo_url(c->o), (unsigned long long)c->show, c->seats, c->seats / ROW,
         ROW, c->buyers, (unsigned long long)c->seed);
  printf("buyers     %ld got the 2-6 adjacent seats they wanted, %ld gave "
         "up after %ld tries\n",
         served, c->buyers - served, c->tries);
  printf("contention %ld blocks were taken by the time they were locked; "
         "%ld lock retries\n",
         taken, retries);
  printf("seats      %ld of %ld sold in %.1f ms\n", c->sold, c->seats,
         c->secs * 1e3);
  for (long s = 0; c->map && s < c->seats; s++) {
    if (s % ROW == 0)
      printf("row %-6ld ", s / ROW);
    putchar(c->sold_to[s] ? sym[(c->sold_to[s] - 1) % 62] : '.');
    if (s % ROW == ROW - 1)
      putchar('\n');
  }
  if (c->errors != 0)
    printf("errors     %ld buyers stopped on %s: %s\n", c->errors,
           ordo_err_name(err), ordo_strerror(err));
  printf("invariant: every seat sold at most once, %ld sold %s %ld "
         "reported: %s",
         c->sold, c->sold == c->reported ? "=" : "!=", c->reported,
         ok ? "OK\n" : "FAIL");
  if (!ok)
    printf(" (%ld seats sold twice, %ld disagreements between the map, "
           "the sales and the buyers)\n",
           c->twice, c->disagree);
}

static void teardown(cinema_t *c) {
  free(c->b);
  free(c->per_buyer);
  free(c->sold_to);
  free(c->sales);
}
