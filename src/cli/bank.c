/*
 * bank.c -- `ordo bank`, the bank check of DESIGN.md §10: workers move money
 * between accounts at once, each transfer locking both accounts with one
 * ordo_lock_all, and the run checks that the total balance is unchanged, that
 * every transfer happened exactly once, that no two workers were ever inside
 * the same account at once, and that the engine saw no deadlock. See
 * README.md for the design, the invariants (numbered there and cited here as
 * "invariant N") and the lock order.
 *
 * Interface:
 *   cli_bank_main   runs `ordo bank [options]`, returns the exit status
 *   cli_bank_usage  prints the help of `ordo bank`, every flag
 *
 * Inside, running and reporting are apart: bank_run() fills a bank_result_t
 * and prints nothing but errors; bank_print_human() and bank_print_json()
 * turn a result into text. A later --compare runs twice and prints both.
 */
#include "cli/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ordo.h"

/* ---- Options --------------------------------------------------------------
 */

/*
 * How a transfer takes its two locks. Only the ordered mode (one lock_all of
 * both keys, which the engine takes in the canonical order) exists today;
 * --naive and --detect will add theirs here and in bank_body().
 */
typedef enum bank_mode_e { BANK_MODE_ORDERED = 0 } bank_mode_t;

static const char *const bank_mode_names[] = {"ordered"};

typedef struct bank_opts_s {
  const char *url;      /* backend URL as given (default "mem://") */
  long accounts;        /* 2.. */
  long transfers;       /* each way: the run makes 2 * transfers */
  long workers;         /* 1..1024 */
  long lock_timeout_ms; /* bound on each lock_all attempt */
  long watchdog_s;      /* dump the lock table and exit 3 after this; 0 off */
  int json;             /* print one JSON object instead of the summary */
  bank_mode_t mode;
} bank_opts_t;

static void bank_opts_init(bank_opts_t *o) {
  o->url = "mem://";
  o->accounts = 2;
  o->transfers = 1000;
  o->workers = 8;
  o->lock_timeout_ms = 5000;
  o->watchdog_s = 0;
  o->json = 0;
  o->mode = BANK_MODE_ORDERED;
}

/*
 * The flag table: parsing, the help text and the list of accepted options in
 * error lines all come from it, so a flag cannot be parsed yet undocumented.
 * Numbers are checked against [min, max] (README.md, invariant 2).
 */
typedef enum bank_flag_kind_e {
  FLAG_STR,  /* const char * at off */
  FLAG_NUM,  /* long at off, within [min, max] */
  FLAG_BOOL, /* int at off, set to 1 */
  FLAG_HELP
} bank_flag_kind_t;

typedef struct bank_flag_s {
  const char *name;  /* "--workers" */
  const char *alias; /* "-h" or NULL */
  const char *arg;   /* "N" or NULL when the flag takes no value */
  bank_flag_kind_t kind;
  size_t off;
  long min, max;
  const char *help;
} bank_flag_t;

#define BANK_MAX_ACCOUNTS 1000000L
#define BANK_MAX_TRANSFERS 10000000L
#define BANK_MAX_WORKERS 1024L
#define BANK_MAX_TIMEOUT_MS 3600000L
#define BANK_MAX_WATCHDOG_S 86400L

static const bank_flag_t bank_flags[] = {
    {"--backend", NULL, "URL", FLAG_STR, offsetof(bank_opts_t, url), 0, 0,
     "where the locks live (default mem://); accepted forms: " CLI_URL_FORMS},
    {"--accounts", NULL, "N", FLAG_NUM, offsetof(bank_opts_t, accounts), 2,
     BANK_MAX_ACCOUNTS,
     "accounts in the ledger, 2..1000000 (default 2); with 2, transfers go "
     "both ways between them, with more, between random distinct pairs"},
    {"--transfers", NULL, "N", FLAG_NUM, offsetof(bank_opts_t, transfers), 1,
     BANK_MAX_TRANSFERS,
     "transfers each way, 1..10000000 (default 1000): the run makes 2 x N"},
    {"--workers", NULL, "N", FLAG_NUM, offsetof(bank_opts_t, workers), 1,
     BANK_MAX_WORKERS, "worker threads, 1..1024 (default 8)"},
    {"--lock-timeout", NULL, "MS", FLAG_NUM,
     offsetof(bank_opts_t, lock_timeout_ms), 0, BANK_MAX_TIMEOUT_MS,
     "bound on each lock attempt in milliseconds, 0..3600000 (default 5000; "
     "0 tries once); attempts are retried with backoff, 10 at most"},
    {"--watchdog", NULL, "SEC", FLAG_NUM, offsetof(bank_opts_t, watchdog_s), 0,
     BANK_MAX_WATCHDOG_S,
     "when the run has not finished SEC seconds after the transfers start, "
     "print the lock table (holders and queues) on stderr and exit with "
     "status 3; 0..86400 (default 0: no watchdog)"},
    {"--json", NULL, NULL, FLAG_BOOL, offsetof(bank_opts_t, json), 0, 0,
     "print one JSON object on stdout instead of the summary"},
    {"--help", "-h", NULL, FLAG_HELP, 0, 0, 0, "print this help and exit"},
};

#define BANK_NFLAGS (sizeof(bank_flags) / sizeof(bank_flags[0]))

/*
 * help_wrap -- prints text from column indent, breaking at spaces so that no
 * line passes column width, continuation lines indented to the same column.
 */
static void help_wrap(FILE *f, const char *text, int indent, int width) {
  int col = indent;
  const char *p = text;
  while (*p) {
    size_t wl = strcspn(p, " ");
    if (col > indent && col + 1 + (int)wl > width) {
      fprintf(f, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', f);
      col++;
    }
    fwrite(p, 1, wl, f);
    col += (int)wl;
    p += wl;
    while (*p == ' ')
      p++;
  }
  fputc('\n', f);
}

void cli_bank_usage(FILE *f) {
  fputs("usage: ordo bank [--backend URL] [--accounts N] [--transfers N]\n"
        "                 [--workers N] [--lock-timeout MS] [--watchdog SEC]\n"
        "                 [--json]\n"
        "\n"
        "The bank check: workers move random amounts between accounts at\n"
        "once, each transfer locking both accounts with one ordo_lock_all\n"
        "(X mode) inside ordo_retry. The run passes when the total balance\n"
        "is unchanged, every transfer completed exactly once, no two workers\n"
        "were inside one account at once, and the engine counted no\n"
        "deadlock. A progress bar is drawn on stderr when it is a terminal.\n"
        "\n"
        "Options:\n",
        f);
  for (size_t i = 0; i < BANK_NFLAGS; i++) {
    const bank_flag_t *fl = &bank_flags[i];
    char left[40];
    snprintf(left, sizeof(left), "%s%s%s%s%s", fl->alias ? fl->alias : "",
             fl->alias ? ", " : "", fl->name, fl->arg ? " " : "",
             fl->arg ? fl->arg : "");
    fprintf(f, "  %-19s ", left);
    help_wrap(f, fl->help, 22, 79);
  }
  fputs("\n"
        "Output: transfers done, seconds, transfers/s, p50/p99 latency per\n"
        "transfer (retries and backoff included), retries, timeouts,\n"
        "deadlocks (the engine's count), the total before and after, and a\n"
        "verdict line. --json prints the same as one object.\n"
        "Exit status: 0 the check passed, 1 it failed (or the backend could\n"
        "not be used), 2 bad usage, 3 the watchdog fired: the run had not\n"
        "finished within --watchdog SEC seconds; stderr then holds one\n"
        "'ordo bank: watchdog: ...' line and the lock table, stdout nothing.\n",
        f);
}

/* Writes "--backend URL, --accounts N, ..." for usage error lines. */
static void bank_flag_list(FILE *f) {
  for (size_t i = 0; i < BANK_NFLAGS; i++)
    fprintf(f, "%s%s%s%s", i ? ", " : "", bank_flags[i].name,
            bank_flags[i].arg ? " " : "",
            bank_flags[i].arg ? bank_flags[i].arg : "");
}

/* Parses a whole decimal number within [min, max]: no sign, no spaces. */
static int parse_num(const char *s, long min, long max, long *out) {
  if (*s < '0' || *s > '9')
    return -1;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max)
    return -1;
  *out = v;
  return 0;
}

enum { PARSE_OK, PARSE_HELP, PARSE_ERR };

/*
 * bank_parse -- fills o from argv (argv[0] is "bank"). Accepts "--flag value"
 * and "--flag=value". On a mistake it prints one line on stderr that names the
 * culprit and what is accepted, and returns PARSE_ERR (invariants 1, 2).
 */
static int bank_parse(int argc, char **argv, bank_opts_t *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
    size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
    const bank_flag_t *fl = NULL;
    for (size_t k = 0; k < BANK_NFLAGS && fl == NULL; k++) {
      const bank_flag_t *c = &bank_flags[k];
      if ((strlen(c->name) == nlen && strncmp(c->name, a, nlen) == 0) ||
          (c->alias && !eq && strcmp(c->alias, a) == 0))
        fl = c;
    }
    if (fl == NULL) {
      if (a[0] == '-')
        fprintf(stderr,
                "ordo bank: unknown option '%.*s': accepted options "
                "are ",
                (int)nlen, a);
      else
        fprintf(stderr,
                "ordo bank: unexpected argument '%s': ordo bank takes only "
                "options: ",
                a);
      bank_flag_list(stderr);
      fputs(" (see 'ordo bank --help')\n", stderr);
      return PARSE_ERR;
    }
    if (fl->kind == FLAG_HELP) {
      if (eq) {
        fprintf(stderr, "ordo bank: option '%s' takes no value, got '%s'\n",
                fl->name, eq + 1);
        return PARSE_ERR;
      }
      return PARSE_HELP;
    }
    if (fl->kind == FLAG_BOOL) {
      if (eq) {
        fprintf(stderr,
                "ordo bank: option '%s' takes no value, got '%s': write "
                "just %s\n",
                fl->name, eq + 1, fl->name);
        return PARSE_ERR;
      }
      *(int *)((char *)o + fl->off) = 1;
      continue;
    }
    const char *val = eq ? eq + 1 : NULL;
    if (val == NULL) {
      if (i + 1 >= argc) {
        fprintf(stderr, "ordo bank: option '%s' needs a value: write %s %s\n",
                fl->name, fl->name, fl->arg);
        return PARSE_ERR;
      }
      val = argv[++i];
    }
    if (fl->kind == FLAG_STR) {
      *(const char **)((char *)o + fl->off) = val;
    } else if (parse_num(val, fl->min, fl->max,
                         (long *)((char *)o + fl->off)) != 0) {
      fprintf(stderr,
              "ordo bank: bad value '%s' for %s: expected a whole number in "
              "%ld..%ld\n",
              val, fl->name, fl->min, fl->max);
      return PARSE_ERR;
    }
  }
  return PARSE_OK;
}

/*
 * url_redact -- copies url into out with any password replaced by "***", for
 * error lines printed before ordo_url() can do it (the open failed). The
 * password is what lies between the ':' after the user and the '@' that ends
 * the authority, as in redis://user:secret@host.
 */
static void url_redact(const char *url, char *out, size_t cap) {
  snprintf(out, cap, "%s", url);
  const char *auth = strstr(url, "://");
  if (auth == NULL)
    return;
  auth += 3;
  size_t alen = strcspn(auth, "/?#");
  const char *at = NULL;
  for (const char *p = auth; p < auth + alen; p++)
    if (*p == '@')
      at = p; /* the last '@' ends the userinfo */
  if (at == NULL)
    return;
  const char *colon = memchr(auth, ':', (size_t)(at - auth));
  if (colon == NULL)
    return;
  snprintf(out, cap, "%.*s***%s", (int)(colon + 1 - url), url, at);
}

/* ---- The run --------------------------------------------------------------
 */

#define BANK_KEY_CAP 16
#define BANK_OPENING_BALANCE 1000
#define BANK_MAX_AMOUNT 100
/* Fixed so that a run's pairs and amounts can be reproduced (invariant 8). */
#define BANK_SEED UINT64_C(0x6f72646f62616e6b)

/*
 * One worker. Each starts a cache line of its own, so no two workers ever
 * write to one line. done is the only field another thread reads while the
 * run goes (the progress thread, relaxed loads, 10 times a second at most);
 * the counters below it are written by the worker only and read by the main
 * thread after the join.
 */
typedef struct bank_worker_s {
  alignas(64) _Atomic uint64_t done; /* transfers finished */
  struct bank_s *bank;
  ordo_txn_t *txn;
  uint32_t id; /* 1..workers: the value written into owner words */
  pthread_t thread;
  uint64_t retries;    /* sum of attempts - 1 */
  uint64_t timeouts;   /* lock_all attempts that returned ORDO_ETIMEDOUT */
  uint64_t failed;     /* transfers that ordo_retry gave up on */
  uint64_t violations; /* owner-word CAS failures */
  int last_err;        /* the error of the last failed transfer */
} bank_worker_t;

typedef struct bank_s {
  const bank_opts_t *opts;
  ordo_t *o;
  ordo_retry_options_t retry;
  size_t naccounts;
  uint64_t ntransfers; /* 2 * opts->transfers */
  char (*keys)[BANK_KEY_CAP];
  size_t keylen;
  /*
   * balance[i] is guarded by the ordo lock on keys[i] and by nothing else;
   * owner[i] (atomic, relaxed) is the witness of that exclusion (invariant 3).
   */
  int64_t *balance;
  _Atomic uint32_t *owner;
  uint8_t *applied; /* per transfer: written by the worker that claimed it */
  uint64_t *lat_ns; /* per transfer: written by the worker that claimed it */
  _Atomic uint64_t next; /* the next transfer index to claim */
  _Atomic int hard_err;  /* first non-retryable error; stops the claims */
  bank_worker_t *w;
  int fault_leak; /* test hooks, see bank_fault() */
  int fault_hang;
  /* gate_mu guards go and abort; gate_cv announces either. */
  pthread_mutex_t gate_mu;
  pthread_cond_t gate_cv;
  int go, abort;
} bank_t;

/* What a run measured; filled by bank_run, printed by bank_print_*. */
typedef struct bank_result_s {
  char *backend; /* ordo_url(), without password; malloc'd */
  uint64_t expected, completed, twice, failed;
  uint64_t forward; /* with 2 accounts: transfers from 0 to 1 */
  double seconds;
  double p50_us, p99_us;
  uint64_t retries, timeouts, deadlocks, violations;
  int64_t total_before, total_after;
  int hard_err; /* a non-retryable error stopped the run, or 0 */
  int last_err; /* the error of some failed transfer, or 0 */
  int ok;
  char verdict[512];
} bank_result_t;

/* One transfer, handed to the retry body. */
typedef struct bank_xfer_s {
  bank_t *bank;
  bank_worker_t *w;
  uint64_t idx;
  size_t from, to;
  int64_t amount;
  int unlock_err; /* ordo_unlock_all failed after the money moved */
} bank_xfer_t;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * mix64 -- the SplitMix64 finalizer (Steele, Lea and Flood, "Fast splittable
 * pseudorandom number generators", OOPSLA 2014): a bijection whose output
 * bits each depend on every input bit, so consecutive indices give unrelated
 * draws without any shared generator state between workers.
 */
static uint64_t mix64(uint64_t z) {
  z += UINT64_C(0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/*
 * bank_plan -- what transfer idx does, a pure function of idx (invariant 8).
 * With two accounts even indices go 0 -> 1 and odd ones 1 -> 0: exactly N
 * each way, and since workers claim consecutive indices both directions are
 * in flight at once whenever there are two workers or more.
 */
static void bank_plan(const bank_t *b, bank_xfer_t *x) {
  uint64_t r = mix64(BANK_SEED ^ x->idx);
  if (b->naccounts == 2) {
    x->from = (size_t)(x->idx & 1);
    x->to = 1 - x->from;
  } else {
    x->from = (size_t)(r % b->naccounts);
    r = mix64(r);
    x->to = (size_t)(r % (b->naccounts - 1));
    if (x->to >= x->from)
      x->to++; /* distinct from from, uniform over the others */
  }
  r = mix64(r);
  x->amount = 1 + (int64_t)(r % BANK_MAX_AMOUNT);
}

/*
 * bank_critical -- the transfer proper; caller holds the ordo X locks of both
 * accounts. The owner words are claimed with relaxed CAS on purpose: a CAS
 * still fails when another worker is inside (one atomic location has one
 * modification order), yet relaxed order adds no happens-before, so the
 * balance accesses are ordered by the ordo locks alone and a sanitizer
 * (TSan) checks the library's synchronisation rather than ours.
 */
static void bank_critical(bank_t *b, bank_xfer_t *x) {
  uint32_t id = x->w->id, e0 = 0, e1 = 0;
  int got_from = atomic_compare_exchange_strong_explicit(
      &b->owner[x->from], &e0, id, memory_order_relaxed, memory_order_relaxed);
  int got_to = atomic_compare_exchange_strong_explicit(
      &b->owner[x->to], &e1, id, memory_order_relaxed, memory_order_relaxed);
  if (got_from && got_to) {
    b->balance[x->from] -= x->amount;
    b->balance[x->to] += x->amount;
    if (b->fault_leak && x->idx == 0)
      b->balance[x->to] += 1; /* the test hook's deliberate bug */
    b->applied[x->idx]++;
  } else {
    /* Someone else is inside: touch nothing, so the race stays detected
     * rather than turned into torn balances (invariant 3). */
    x->w->violations++;
  }
  uint32_t mine = id;
  if (got_to && !atomic_compare_exchange_strong_explicit(
                    &b->owner[x->to], &mine, 0, memory_order_relaxed,
                    memory_order_relaxed))
    x->w->violations++;
  mine = id;
  if (got_from && !atomic_compare_exchange_strong_explicit(
                      &b->owner[x->from], &mine, 0, memory_order_relaxed,
                      memory_order_relaxed))
    x->w->violations++;
}

/*
 * bank_hang -- the "hang" test hook (bank_fault): the worker that took the
 * locks of transfer 0 never comes back, so it holds both keys for good and
 * the run cannot end; only --watchdog (or a kill) stops the process. pause()
 * returns only after a signal handler ran, and the command installs none.
 */
_Noreturn static void bank_hang(void) {
  for (;;)
    pause();
}

/*
 * bank_body -- one attempt, run by ordo_retry: lock both accounts (as given,
 * from then to; lock_all sorts them), transfer, unlock. A lock error is
 * returned as is so that ordo_retry backs off and retries the retryable ones;
 * when lock_all fails nothing is held and nothing was moved (invariant 4).
 */
static int bank_body(ordo_txn_t *t, void *arg) {
  bank_xfer_t *x = arg;
  bank_t *b = x->bank;
  ordo_req_t r[2] = {ORDO_REQ_X(b->keys[x->from], b->keylen),
                     ORDO_REQ_X(b->keys[x->to], b->keylen)};
  int rc = ordo_lock_all(t, r, 2, b->opts->lock_timeout_ms);
  if (rc < 0) {
    if (rc == ORDO_ETIMEDOUT)
      x->w->timeouts++;
    return rc;
  }
  if (b->fault_hang && x->idx == 0)
    bank_hang(); /* the test hook: keep both keys held forever */
  bank_critical(b, x);
  rc = ordo_unlock_all(t);
  /* The money has moved, so this attempt must count as done: returning the
   * error could make ordo_retry run the body again (ORDO_ELEASE is
   * retryable) and move it twice. The worker stops the run instead, since
   * keys left held would stall the others. */
  if (rc < 0)
    x->unlock_err = rc;
  return 0;
}

static void *bank_worker(void *arg) {
  bank_worker_t *w = arg;
  bank_t *b = w->bank;

  pthread_mutex_lock(&b->gate_mu);
  while (!b->go && !b->abort)
    pthread_cond_wait(&b->gate_cv, &b->gate_mu);
  int aborted = b->abort;
  pthread_mutex_unlock(&b->gate_mu);
  if (aborted)
    return NULL;

  for (;;) {
    if (atomic_load_explicit(&b->hard_err, memory_order_relaxed) != 0)
      break;
    /* Claims hand out each index once (invariant 5): 0, 1, 2, ... */
    uint64_t i = atomic_fetch_add_explicit(&b->next, 1, memory_order_relaxed);
    if (i >= b->ntransfers)
      break;
    bank_xfer_t x = {.bank = b, .w = w, .idx = i};
    bank_plan(b, &x);
    unsigned attempts = 0;
    uint64_t t0 = now_ns();
    int rc = ordo_retry(w->txn, &b->retry, bank_body, &x, &attempts);
    b->lat_ns[i] = now_ns() - t0;
    if (attempts > 1)
      w->retries += attempts - 1;
    if (rc < 0) {
      w->failed++;
      w->last_err = rc;
    }
    int hard = rc < 0 && !ordo_is_retryable(rc) ? rc : x.unlock_err;
    if (hard != 0) {
      int none = 0;
      atomic_compare_exchange_strong(&b->hard_err, &none, hard);
    }
    /* Single writer: a relaxed load and store, no read-modify-write. */
    atomic_store_explicit(
        &w->done, atomic_load_explicit(&w->done, memory_order_relaxed) + 1,
        memory_order_relaxed);
  }
  return NULL;
}

/* The progress bar's read callback: transfers finished by all workers. */
static uint64_t bank_progress_read(void *arg) {
  const bank_t *b = arg;
  uint64_t sum = 0;
  for (long i = 0; i < b->opts->workers; i++)
    sum += atomic_load_explicit(&b->w[i].done, memory_order_relaxed);
  return sum;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/*
 * Nearest-rank percentile of sorted v[0..n), in microseconds: the smallest
 * sample with at least pct percent of the samples at or below it.
 */
static double percentile_us(const uint64_t *v, uint64_t n, unsigned pct) {
  if (n == 0)
    return 0.0;
  uint64_t rank = (pct * n + 99) / 100; /* ceil(pct * n / 100) */
  if (rank < 1)
    rank = 1;
  return (double)v[rank - 1] / 1000.0;
}

/*
 * bank_fault -- a test hook read from ORDO_BANK_FAULT, so that the suite can
 * prove the check fails when it should: "leak" credits one extra unit in
 * transfer 0 (the total changes), "owner" marks account 0 as taken before the
 * run (every transfer touching it sees a violation), "hang" makes the worker
 * of transfer 0 block forever while holding its two keys (the run never ends;
 * for testing --watchdog). Unset, it changes nothing.
 */
static void bank_fault(bank_t *b) {
  const char *f = getenv("ORDO_BANK_FAULT");
  if (f == NULL || *f == '\0')
    return;
  if (strcmp(f, "leak") == 0)
    b->fault_leak = 1;
  else if (strcmp(f, "owner") == 0)
    atomic_store_explicit(&b->owner[0], UINT32_MAX, memory_order_relaxed);
  else if (strcmp(f, "hang") == 0)
    b->fault_hang = 1;
  else
    fprintf(stderr,
            "ordo bank: ignoring ORDO_BANK_FAULT='%s': accepted "
            "values are leak, owner, hang\n",
            f);
}

/* ---- The watchdog ---------------------------------------------------------
 */

/*
 * The watchdog of --watchdog SEC (README.md, "The watchdog"): one thread that
 * sleeps in a timed wait on cv until deadline (CLOCK_MONOTONIC), or until the
 * main thread sets cancel after the last worker has exited. It never polls:
 * it wakes once, either cancelled or at the deadline. At the deadline it
 * stops the progress bar, prints one line and the lock table on stderr and
 * ends the process with _exit(CLI_EXIT_WATCHDOG).
 */
typedef struct bank_watchdog_s {
  ordo_t *o;
  cli_progress_t *bar; /* started before the watchdog; stopped when it fires */
  long seconds;
  struct timespec deadline; /* CLOCK_MONOTONIC */
  int active;               /* a thread was started and must be joined */
  pthread_t thread;
  /* mu guards cancel; cv announces it. A leaf: see README.md, lock order. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int cancel;
} bank_watchdog_t;

static void *bank_watchdog_thread(void *arg) {
  bank_watchdog_t *wd = arg;
  pthread_mutex_lock(&wd->mu);
  while (!wd->cancel &&
         pthread_cond_timedwait(&wd->cv, &wd->mu, &wd->deadline) != ETIMEDOUT)
    ;
  int fire = !wd->cancel;
  pthread_mutex_unlock(&wd->mu);
  if (!fire)
    return NULL;
  /* From here on the main thread is blocked in a pthread_join (of a worker,
   * or of this thread in bank_watchdog_stop) that can only end with the
   * process: it has not stopped the bar or closed o, and never will. So the
   * bar is ours to stop and o stays valid for the dump. No lock is held. */
  cli_progress_stop(wd->bar);
  fprintf(stderr,
          "ordo bank: watchdog: the run did not finish within %ld s; lock "
          "table follows:\n",
          wd->seconds);
  fflush(stderr);
  ordo_dump(wd->o, STDERR_FILENO);
  fflush(stderr);
  _exit(CLI_EXIT_WATCHDOG);
}

/*
 * bank_watchdog_start -- arms the watchdog for seconds from now, or does
 * nothing when seconds is 0. Returns 0, or an error number when the
 * condition variable (on CLOCK_MONOTONIC), its mutex or the thread could not
 * be set up (then nothing is left to stop).
 */
static int bank_watchdog_start(bank_watchdog_t *wd, ordo_t *o,
                               cli_progress_t *bar, long seconds) {
  memset(wd, 0, sizeof(*wd));
  wd->o = o;
  wd->bar = bar;
  wd->seconds = seconds;
  if (seconds == 0)
    return 0;
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc != 0)
    return rc;
  /* The deadline is on CLOCK_MONOTONIC, so setting the wall clock can
   * neither fire the watchdog early nor hold it off. */
  rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (rc == 0)
    rc = pthread_cond_init(&wd->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (rc != 0)
    return rc;
  rc = pthread_mutex_init(&wd->mu, NULL);
  if (rc != 0) {
    pthread_cond_destroy(&wd->cv);
    return rc;
  }
  clock_gettime(CLOCK_MONOTONIC, &wd->deadline);
  wd->deadline.tv_sec += (time_t)seconds;
  rc = pthread_create(&wd->thread, NULL, bank_watchdog_thread, wd);
  if (rc != 0) {
    pthread_mutex_destroy(&wd->mu);
    pthread_cond_destroy(&wd->cv);
    return rc;
  }
  wd->active = 1;
  return 0;
}

/*
 * bank_watchdog_stop -- cancels the watchdog and joins it; safe when it was
 * never armed. If it has already fired, the join never returns: the
 * watchdog ends the process.
 */
static void bank_watchdog_stop(bank_watchdog_t *wd) {
  if (!wd->active)
    return;
  pthread_mutex_lock(&wd->mu);
  wd->cancel = 1;
  pthread_cond_signal(&wd->cv);
  pthread_mutex_unlock(&wd->mu);
  pthread_join(wd->thread, NULL);
  pthread_mutex_destroy(&wd->mu);
  pthread_cond_destroy(&wd->cv);
  wd->active = 0;
}

static void bank_free(bank_t *b) {
  free(b->keys);
  free(b->balance);
  free(b->owner);
  free(b->applied);
  free(b->lat_ns);
  free(b->w);
}

/* Appends "; reason" (or "reason" first) to the verdict. */
static void verdict_add(bank_result_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void verdict_add(bank_result_t *r, const char *fmt, ...) {
  size_t len = strlen(r->verdict);
  if (len + 3 >= sizeof(r->verdict))
    return;
  if (len > 0) {
    memcpy(r->verdict + len, "; ", 3);
    len += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->verdict + len, sizeof(r->verdict) - len, fmt, ap);
  va_end(ap);
}

/*
 * bank_judge -- sets r->ok and r->verdict from what was measured (invariant
 * 9). Only a check that holds leaves ok set; each failed one adds its reason.
 */
static void bank_judge(const bank_opts_t *o, bank_result_t *r) {
  r->verdict[0] = '\0';
  if (r->total_after != r->total_before)
    verdict_add(r, "balance changed from %" PRId64 " to %" PRId64,
                r->total_before, r->total_after);
  if (r->completed != r->expected)
    verdict_add(r, "%" PRIu64 "/%" PRIu64 " transfers completed", r->completed,
                r->expected);
  if (r->twice != 0)
    verdict_add(r, "%" PRIu64 " transfers applied more than once", r->twice);
  if (r->failed != 0)
    verdict_add(r, "%" PRIu64 " transfers failed (last error %s: %s)",
                r->failed, ordo_err_name(r->last_err),
                ordo_strerror(r->last_err));
  if (r->hard_err != 0)
    verdict_add(r, "stopped early on %s (%s)", ordo_err_name(r->hard_err),
                ordo_strerror(r->hard_err));
  if (r->violations != 0)
    verdict_add(r, "%" PRIu64 " mutual-exclusion violations", r->violations);
  if (o->mode == BANK_MODE_ORDERED && r->deadlocks != 0)
    verdict_add(r, "%" PRIu64 " deadlocks in ordered mode", r->deadlocks);
  r->ok = r->verdict[0] == '\0';
  if (r->ok)
    snprintf(r->verdict, sizeof(r->verdict),
             "balance conserved, %" PRIu64 "/%" PRIu64 " transfers, %" PRIu64
             " deadlocks",
             r->completed, r->expected, r->deadlocks);
}

/*
 * bank_open -- opens the backend, telling a bad URL (usage, exit 2) from a
 * backend that fails (exit 1). Prints the one error line itself.
 */
static int bank_open(const bank_opts_t *o, ordo_t **out) {
  int rc = ordo_open(out, o->url, NULL);
  if (rc == 0)
    return CLI_EXIT_OK;
  char shown[512];
  url_redact(o->url, shown, sizeof(shown));
  if (rc == ORDO_EURL) {
    fprintf(stderr,
            "ordo bank: unknown or malformed backend URL '%s': accepted "
            "forms are %s\n",
            shown, CLI_URL_FORMS);
    return CLI_EXIT_USAGE;
  }
  if (rc == ORDO_EINVAL) {
    fprintf(stderr,
            "ordo bank: bad option in backend URL '%s' (%s): accepted forms "
            "are %s\n",
            shown, ordo_strerror(rc), CLI_URL_FORMS);
    return CLI_EXIT_USAGE;
  }
  fprintf(stderr,
          "ordo bank: cannot open backend '%s': %s (%s); check that it is "
          "running and reachable\n",
          shown, ordo_strerror(rc), ordo_err_name(rc));
  return CLI_EXIT_FAIL;
}

/*
 * bank_run -- runs the check with an open backend and fills r. Returns
 * CLI_EXIT_OK when it ran to the end (r says whether the check passed), or
 * CLI_EXIT_FAIL after printing why it could not run.
 */
static int bank_run(const bank_opts_t *o, ordo_t *ordo, bank_result_t *r) {
  bank_t b;
  memset(&b, 0, sizeof(b));
  memset(r, 0, sizeof(*r));
  b.opts = o;
  b.o = ordo;
  ordo_retry_options_init(&b.retry);
  b.naccounts = (size_t)o->accounts;
  b.ntransfers = 2 * (uint64_t)o->transfers;
  atomic_init(&b.next, 0);
  atomic_init(&b.hard_err, 0);

  size_t nw = (size_t)o->workers;
  b.keys = calloc(b.naccounts, sizeof(*b.keys));
  b.balance = calloc(b.naccounts, sizeof(*b.balance));
  b.owner = calloc(b.naccounts, sizeof(*b.owner));
  b.applied = calloc(b.ntransfers, sizeof(*b.applied));
  b.lat_ns = calloc(b.ntransfers, sizeof(*b.lat_ns));
  size_t wbytes = nw * sizeof(bank_worker_t); /* a multiple of 64 */
  b.w = aligned_alloc(alignof(bank_worker_t), wbytes);
  if (!b.keys || !b.balance || !b.owner || !b.applied || !b.lat_ns || !b.w) {
    fprintf(stderr,
            "ordo bank: out of memory for %zu accounts and %" PRIu64
            " transfers; try smaller --accounts or --transfers\n",
            b.naccounts, b.ntransfers);
    bank_free(&b);
    return CLI_EXIT_FAIL;
  }
  memset(b.w, 0, wbytes);

  /* Fixed-width decimal keys, so byte order is account order in dumps. */
  for (size_t i = 0; i < b.naccounts; i++) {
    b.keylen = (size_t)snprintf(b.keys[i], BANK_KEY_CAP, "acct:%08zu", i);
    b.balance[i] = BANK_OPENING_BALANCE;
    atomic_init(&b.owner[i], 0);
    r->total_before += b.balance[i];
  }
  bank_fault(&b);

  int status = CLI_EXIT_OK;
  size_t begun = 0;
  for (; begun < nw; begun++) {
    char name[32];
    snprintf(name, sizeof(name), "bank-w%zu", begun + 1);
    ordo_txn_options_t to = {.priority = 0, .name = name};
    bank_worker_t *w = &b.w[begun];
    atomic_init(&w->done, 0);
    w->bank = &b;
    w->id = (uint32_t)(begun + 1);
    int rc = ordo_txn_begin(ordo, &w->txn, &to);
    if (rc < 0) {
      fprintf(stderr,
              "ordo bank: cannot begin transaction %zu: %s (%s); try fewer "
              "--workers\n",
              begun + 1, ordo_strerror(rc), ordo_err_name(rc));
      status = CLI_EXIT_FAIL;
      break;
    }
  }

  ordo_stats_t s0, s1;
  memset(&s0, 0, sizeof(s0));
  memset(&s1, 0, sizeof(s1));
  if (status == CLI_EXIT_OK && ordo_stats(ordo, &s0) < 0) {
    fputs("ordo bank: cannot read the engine's counters (ordo_stats); the "
          "deadlock count would be unknown, so the check cannot run\n",
          stderr);
    status = CLI_EXIT_FAIL;
  }

  pthread_mutex_init(&b.gate_mu, NULL);
  pthread_cond_init(&b.gate_cv, NULL);
  size_t started = 0;
  if (status == CLI_EXIT_OK) {
    for (; started < nw; started++) {
      int rc = pthread_create(&b.w[started].thread, NULL, bank_worker,
                              &b.w[started]);
      if (rc != 0) {
        fprintf(stderr,
                "ordo bank: cannot start worker thread %zu: %s; try fewer "
                "--workers\n",
                started + 1, strerror(rc));
        status = CLI_EXIT_FAIL;
        break;
      }
    }
  }

  /* Zeroed, both are safe to stop when they never started. The bar starts
   * before the watchdog, which stops it when it fires. */
  cli_progress_t bar;
  bank_watchdog_t wd;
  memset(&bar, 0, sizeof(bar));
  memset(&wd, 0, sizeof(wd));
  if (status == CLI_EXIT_OK)
    cli_progress_start(&bar, "bank", b.ntransfers, bank_progress_read, &b);

  /* Open the gate only once every worker exists, so the clock measures all
   * of them working (invariant 6). The watchdog is armed just before, so its
   * SEC seconds count from the start of the transfers too (a few
   * microseconds early, never late). */
  if (status == CLI_EXIT_OK) {
    int rc = bank_watchdog_start(&wd, ordo, &bar, o->watchdog_s);
    if (rc != 0) {
      fprintf(stderr,
              "ordo bank: cannot start the watchdog thread: %s; try without "
              "--watchdog\n",
              strerror(rc));
      status = CLI_EXIT_FAIL;
    }
  }
  double t0 = cli_now();
  pthread_mutex_lock(&b.gate_mu);
  if (status == CLI_EXIT_OK)
    b.go = 1;
  else
    b.abort = 1;
  pthread_cond_broadcast(&b.gate_cv);
  pthread_mutex_unlock(&b.gate_mu);
  for (size_t i = 0; i < started; i++)
    pthread_join(b.w[i].thread, NULL);
  double t1 = cli_now();
  /* The run is over: cancel the watchdog before touching the bar (it stops
   * the bar itself when it fires, and then this join never returns). */
  bank_watchdog_stop(&wd);
  cli_progress_stop(&bar);
  pthread_mutex_destroy(&b.gate_mu);
  pthread_cond_destroy(&b.gate_cv);

  if (status == CLI_EXIT_OK && ordo_stats(ordo, &s1) < 0) {
    fputs("ordo bank: cannot read the engine's counters (ordo_stats) after "
          "the run\n",
          stderr);
    status = CLI_EXIT_FAIL;
  }
  for (size_t i = 0; i < begun; i++)
    ordo_txn_end(b.w[i].txn);

  if (status == CLI_EXIT_OK) {
    const char *url = ordo_url(ordo);
    r->backend = strdup(url ? url : "");
    r->expected = b.ntransfers;
    r->seconds = t1 - t0;
    for (uint64_t i = 0; i < b.ntransfers; i++) {
      if (b.applied[i] == 1)
        r->completed++;
      else if (b.applied[i] > 1)
        r->twice++;
      if (b.applied[i] >= 1 && b.naccounts == 2 && (i & 1) == 0)
        r->forward++;
    }
    for (size_t i = 0; i < nw; i++) {
      r->retries += b.w[i].retries;
      r->timeouts += b.w[i].timeouts;
      r->failed += b.w[i].failed;
      r->violations += b.w[i].violations;
      if (b.w[i].last_err != 0)
        r->last_err = b.w[i].last_err;
    }
    r->hard_err = atomic_load(&b.hard_err);
    r->deadlocks =
        s1.deadlocks >= s0.deadlocks ? s1.deadlocks - s0.deadlocks : 0;
    for (size_t i = 0; i < b.naccounts; i++)
      r->total_after += b.balance[i];
    /* Claims are consecutive and every claimed transfer is timed, so the
     * measured ones are exactly indices 0..claimed-1. */
    uint64_t claimed = atomic_load(&b.next);
    if (claimed > b.ntransfers)
      claimed = b.ntransfers;
    qsort(b.lat_ns, claimed, sizeof(*b.lat_ns), cmp_u64);
    r->p50_us = percentile_us(b.lat_ns, claimed, 50);
    r->p99_us = percentile_us(b.lat_ns, claimed, 99);
    bank_judge(o, r);
  }
  bank_free(&b);
  return status;
}

/* ---- Reports --------------------------------------------------------------
 */

/* Writes s as a JSON string literal. */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

static void bank_print_json(const bank_opts_t *o, const bank_result_t *r) {
  double rate = r->seconds > 0 ? (double)r->completed / r->seconds : 0.0;
  printf("{\"backend\": ");
  json_str(stdout, r->backend ? r->backend : "");
  printf(", \"mode\": \"%s\", \"accounts\": %ld, \"workers\": %ld, "
         "\"lock_timeout_ms\": %ld, \"transfers\": %" PRIu64
         ", \"transfers_expected\": %" PRIu64 ", \"failed\": %" PRIu64
         ", \"seconds\": %.6f, \"transfers_per_s\": %.1f, \"p50_us\": %.1f, "
         "\"p99_us\": %.1f, \"retries\": %" PRIu64 ", \"timeouts\": %" PRIu64
         ", \"deadlocks\": %" PRIu64 ", \"violations\": %" PRIu64
         ", \"total_before\": %" PRId64 ", \"total_after\": %" PRId64
         ", \"ok\": %s, \"verdict\": ",
         bank_mode_names[o->mode], o->accounts, o->workers, o->lock_timeout_ms,
         r->completed, r->expected, r->failed, r->seconds, rate, r->p50_us,
         r->p99_us, r->retries, r->timeouts, r->deadlocks, r->violations,
         r->total_before, r->total_after, r->ok ? "true" : "false");
  json_str(stdout, r->verdict);
  printf("}\n");
}

static void bank_print_human(const bank_opts_t *o, const bank_result_t *r) {
  double rate = r->seconds > 0 ? (double)r->completed / r->seconds : 0.0;
  printf("ordo bank: %s, %s mode, %ld accounts, %ld workers, lock timeout "
         "%ld ms\n",
         r->backend ? r->backend : "", bank_mode_names[o->mode], o->accounts,
         o->workers, o->lock_timeout_ms);
  if (o->accounts == 2)
    printf("transfers     %" PRIu64 "/%" PRIu64 " (%" PRIu64
           " from 0 to 1, %" PRIu64 " from 1 to 0)\n",
           r->completed, r->expected, r->forward, r->completed - r->forward);
  else
    printf("transfers     %" PRIu64 "/%" PRIu64
           " (between random distinct pairs)\n",
           r->completed, r->expected);
  printf("seconds       %.3f\n", r->seconds);
  printf("transfers/s   %.0f\n", rate);
  printf("latency       p50 %.1f us, p99 %.1f us per transfer (retries and "
         "backoff included)\n",
         r->p50_us, r->p99_us);
  printf("retries       %" PRIu64 "\n", r->retries);
  printf("timeouts      %" PRIu64 "\n", r->timeouts);
  printf("deadlocks     %" PRIu64 " (the engine's count)\n", r->deadlocks);
  printf("violations    %" PRIu64 "\n", r->violations);
  printf("balance       before %" PRId64 ", after %" PRId64 "\n",
         r->total_before, r->total_after);
  printf("verdict: %s \u2014 %s\n", r->ok ? "OK" : "FAIL", r->verdict);
}

int cli_bank_main(int argc, char **argv) {
  bank_opts_t o;
  bank_opts_init(&o);
  switch (bank_parse(argc, argv, &o)) {
  case PARSE_HELP:
    cli_bank_usage(stdout);
    return CLI_EXIT_OK;
  case PARSE_ERR:
    return CLI_EXIT_USAGE;
  default:
    break;
  }

  ordo_t *ordo;
  int status = bank_open(&o, &ordo);
  if (status != CLI_EXIT_OK)
    return status;
  bank_result_t r;
  status = bank_run(&o, ordo, &r);
  ordo_close(ordo);
  if (status != CLI_EXIT_OK)
    return status;
  if (o.json)
    bank_print_json(&o, &r);
  else
    bank_print_human(&o, &r);
  free(r.backend);
  if (fflush(stdout) != 0) {
    fprintf(stderr, "ordo bank: cannot write the report: %s\n",
            strerror(errno));
    return CLI_EXIT_FAIL;
  }
  return r.ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
