/*
 * bank_ordo.c -- the driver of `ordo bank` over the ordo API, for any
 * backend URL (mem://, ordod://, redis://, redlock://, and postgres:// with
 * --locks advisory). Workers move money between accounts held in memory;
 * a transfer takes its two accounts with one ordo_lock_all (the ordered
 * mode, which cannot deadlock: the engine must count none) or, with
 * --naive, one key at a time in request order, which deadlocks, so that
 * detection (or, with --detect off, the lock timeout) has to break the
 * cycles and the victims retry. Owner words witness the exclusion, a
 * per-transfer count that every transfer happened exactly once, and
 * ordo_stats the deadlocks. See README.md, "ordo bank", for the design, the
 * invariants (cited here as "invariant N") and the lock order.
 *
 * Interface (bank_ordo.h):
 *   bank_driver_ordo  the driver (bank_driver_t): open, run, verify, close
 *   cli_open_place    ordo_open with the command's error lines (also for
 *                     `ordo graph`)
 */
#include "cli/bank_ordo.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/bank_graph.h"

/*
 * The wait before a delayed search. Every naive deadlock stands that long,
 * and while it stands the queues behind it fill with crossing transfers that
 * deadlock in turn, so the engine's 1,000 ms would stretch a default run to
 * many minutes (2 cores: 2,000 transfers with 5 ms take about 2 s).
 */
#define BANK_DEFAULT_DEADLOCK_TIMEOUT_MS 5L

#define BANK_KEY_CAP 16

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
  uint32_t id;         /* 1..workers: the value written into owner words */
  uint64_t retries;    /* sum of attempts - 1 */
  uint64_t timeouts;   /* lock calls that returned ORDO_ETIMEDOUT */
  uint64_t victims;    /* lock calls that returned ORDO_EDEADLK */
  uint64_t failed;     /* transfers that ordo_retry gave up on */
  uint64_t violations; /* owner-word CAS failures */
  int last_err;        /* the error of the last failed transfer */
} bank_worker_t;

typedef struct bank_s {
  const bank_opts_t *opts;
  ordo_t *o;
  ordo_body_cb body; /* bank_body_ordered or bank_body_naive */
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
  bank_gate_t gate;
} bank_t;

/* One transfer, handed to the retry body. */
typedef struct bank_xfer_s {
  bank_t *bank;
  bank_worker_t *w;
  uint64_t idx;
  size_t from, to;
  int64_t amount;
  int unlock_err; /* ordo_unlock_all failed after the money moved */
} bank_xfer_t;

/* The place of one configuration: its ordo place, and the run's state. */
struct bank_place_s {
  const bank_opts_t *opts;
  ordo_t *o;
  bank_graph_t *g; /* --graph's file, armed on o; or NULL */
  bank_t b;
};

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

/* Counts a failed lock call by its kind: time-out or deadlock victim. */
static void bank_count_err(bank_worker_t *w, int rc) {
  if (rc == ORDO_ETIMEDOUT)
    w->timeouts++;
  else if (rc == ORDO_EDEADLK)
    w->victims++;
}

/*
 * bank_apply -- the rest of an attempt once both keys are held in X mode:
 * transfer, unlock. The money has moved once bank_critical returns, so the
 * attempt counts as done whatever the unlock says: returning its error could
 * make ordo_retry run the body again (ORDO_ELEASE is retryable) and move the
 * money twice (invariant 4). The worker stops the run instead, since keys
 * left held would stall the others.
 */
static int bank_apply(ordo_txn_t *t, bank_xfer_t *x) {
  bank_t *b = x->bank;
  if (b->fault_hang && x->idx == 0)
    bank_hang(); /* the test hook: keep both keys held forever */
  bank_critical(b, x);
  int rc = ordo_unlock_all(t);
  if (rc < 0)
    x->unlock_err = rc;
  return 0;
}

/*
 * bank_body_ordered -- one attempt, run by ordo_retry: lock both accounts in
 * one ordo_lock_all (as given, from then to; lock_all sorts them), transfer,
 * unlock. A lock error is returned as is so that ordo_retry backs off and
 * retries the retryable ones; when lock_all fails nothing is held and
 * nothing was moved (invariant 4).
 */
static int bank_body_ordered(ordo_txn_t *t, void *arg) {
  bank_xfer_t *x = arg;
  bank_t *b = x->bank;
  ordo_req_t r[2] = {ORDO_REQ_X(b->keys[x->from], b->keylen),
                     ORDO_REQ_X(b->keys[x->to], b->keylen)};
  int rc = ordo_lock_all(t, r, 2, b->opts->lock_timeout_ms);
  if (rc < 0) {
    bank_count_err(x->w, rc);
    return rc;
  }
  return bank_apply(t, x);
}

/*
 * bank_body_naive -- one attempt of --naive: ordo_lock of from, then, holding
 * it, ordo_lock of to, each bounded by --lock-timeout. Two transfers that
 * cross (0 -> 1 and 1 -> 0) can each hold their first key and wait for the
 * other's: a deadlock, on purpose. Detection ends it by failing one of the
 * waits with ORDO_EDEADLK (the engine has released all the victim's keys),
 * or, with --detect off, the lock timeout does with ORDO_ETIMEDOUT; both are
 * retryable, so ordo_retry releases everything, backs off and tries again.
 * Between the two calls the worker yields the processor, standing for the
 * work a real program does there: on a machine with few cores the window is
 * otherwise so short that crossing transfers seldom overlap (2 cores: 0 to
 * 3 deadlocks in 2,000 transfers), and the mode exists to show deadlocks.
 * When the second lock fails the body releases the first itself, so that a
 * non-retryable error (which ordo_retry returns without releasing) leaves
 * nothing held either: a failed attempt holds nothing and has moved nothing
 * (invariant 4).
 */
static int bank_body_naive(ordo_txn_t *t, void *arg) {
  bank_xfer_t *x = arg;
  bank_t *b = x->bank;
  long tmo = b->opts->lock_timeout_ms;
  int rc = ordo_lock(t, b->keys[x->from], b->keylen, ORDO_MODE_X, tmo);
  if (rc == 0) {
    /* Let another worker run while this one holds from: see above. */
    sched_yield();
    rc = ordo_lock(t, b->keys[x->to], b->keylen, ORDO_MODE_X, tmo);
    if (rc < 0)
      ordo_unlock_all(t);
  }
  if (rc < 0) {
    bank_count_err(x->w, rc);
    return rc;
  }
  return bank_apply(t, x);
}

static void *bank_worker(void *arg) {
  bank_worker_t *w = arg;
  bank_t *b = w->bank;

  if (bank_gate_wait(&b->gate))
    return NULL;

  for (;;) {
    if (atomic_load_explicit(&b->hard_err, memory_order_relaxed) != 0)
      break;
    /* Claims hand out each index once (invariant 5): 0, 1, 2, ... */
    uint64_t i = atomic_fetch_add_explicit(&b->next, 1, memory_order_relaxed);
    if (i >= b->ntransfers)
      break;
    bank_xfer_t x = {.bank = b, .w = w, .idx = i};
    bank_plan(b->naccounts, i, &x.from, &x.to, &x.amount);
    unsigned attempts = 0;
    uint64_t t0 = bank_now_ns();
    int rc = ordo_retry(w->txn, &b->retry, b->body, &x, &attempts);
    b->lat_ns[i] = bank_now_ns() - t0;
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

static void bank_dump_ordo(void *arg) {
  ordo_dump(arg, STDERR_FILENO);
}

static void bank_free(bank_t *b) {
  free(b->keys);
  free(b->balance);
  free(b->owner);
  free(b->applied);
  free(b->lat_ns);
  free(b->w);
}

/*
 * cli_open_place -- ordo_open of url with opts, telling a bad URL (usage, exit
 * 2) from a backend that fails (exit 1). Prints the one error line itself,
 * starting "ordo CMD: ".
 */
int cli_open_place(const char *cmd, const char *url, const ordo_options_t *opts,
                   ordo_t **out) {
  int rc = ordo_open(out, url, opts);
  if (rc == 0)
    return CLI_EXIT_OK;
  char shown[512];
  bank_url_redact(url, shown, sizeof(shown));
  if (rc == ORDO_EURL) {
    fprintf(stderr,
            "ordo %s: unknown or malformed backend URL '%s': accepted "
            "forms are %s\n",
            cmd, shown, CLI_URL_FORMS);
    return CLI_EXIT_USAGE;
  }
  if (rc == ORDO_EINVAL) {
    fprintf(stderr,
            "ordo %s: bad option in backend URL '%s' (%s): accepted forms "
            "are %s\n",
            cmd, shown, ordo_strerror(rc), CLI_URL_FORMS);
    return CLI_EXIT_USAGE;
  }
  fprintf(stderr,
          "ordo %s: cannot open backend '%s': %s (%s); check that it is "
          "running and reachable\n",
          cmd, shown, ordo_strerror(rc), ordo_err_name(rc));
  return CLI_EXIT_FAIL;
}

/*
 * ordo_open -- the driver's open: the place of configuration o, opened with
 * the detection the flags ask for: an ordo_options_t from
 * ordo_options_init, with detect set from --detect and deadlock_timeout_ms
 * from --deadlock-timeout. "off" also turns the background sweep off (the
 * engine sweeps whatever opts.detect says), so that only lock timeouts end
 * a deadlock. Options in the URL's query are applied by ordo_open over
 * these, so they win. Then arms --graph's callback when g is given.
 */
static int bank_ordo_open(const bank_opts_t *o, bank_graph_t *g,
                          bank_place_t **out) {
  bank_place_t *p = calloc(1, sizeof(*p));
  if (p == NULL) {
    fputs("ordo bank: out of memory\n", stderr);
    return CLI_EXIT_FAIL;
  }
  ordo_options_t oo;
  ordo_options_init(&oo);
  oo.detect = (ordo_detect_t)o->detect;
  if (oo.detect == ORDO_DETECT_OFF)
    oo.sweep_ms = 0;
  /* -1 until given: the ledger must tell a given --deadlock-timeout from
   * the default, which it refuses (its check). */
  oo.deadlock_timeout_ms = o->deadlock_timeout_ms >= 0
                               ? o->deadlock_timeout_ms
                               : BANK_DEFAULT_DEADLOCK_TIMEOUT_MS;
  int status = cli_open_place("bank", o->url, &oo, &p->o);
  if (status != CLI_EXIT_OK) {
    free(p);
    return status;
  }
  p->opts = o;
  if (g != NULL) {
    p->g = g;
    g->o = p->o;
    ordo_on_deadlock(p->o, bank_graph_cb, g);
  }
  *out = p;
  return CLI_EXIT_OK;
}

/*
 * bank_ordo_run -- runs the check on the open place and fills r's
 * measures; label names the progress bar. Returns CLI_EXIT_OK when it ran
 * to the end (bank_ordo_verify then says whether the check passed), or
 * CLI_EXIT_FAIL after printing why it could not run.
 */
static int bank_ordo_run(bank_place_t *p, const char *label, bank_result_t *r) {
  const bank_opts_t *o = p->opts;
  ordo_t *ordo = p->o;
  bank_t *b = &p->b;
  memset(r, 0, sizeof(*r));
  b->opts = o;
  b->o = ordo;
  b->body = o->mode == BANK_MODE_NAIVE ? bank_body_naive : bank_body_ordered;
  ordo_retry_options_init(&b->retry);
  b->retry.max_attempts = (unsigned)o->attempts;
  b->naccounts = (size_t)o->accounts;
  b->ntransfers = 2 * (uint64_t)o->transfers;
  atomic_init(&b->next, 0);
  atomic_init(&b->hard_err, 0);

  size_t nw = (size_t)o->workers;
  b->keys = calloc(b->naccounts, sizeof(*b->keys));
  b->balance = calloc(b->naccounts, sizeof(*b->balance));
  b->owner = calloc(b->naccounts, sizeof(*b->owner));
  b->applied = calloc(b->ntransfers, sizeof(*b->applied));
  b->lat_ns = calloc(b->ntransfers, sizeof(*b->lat_ns));
  size_t wbytes = nw * sizeof(bank_worker_t); /* a multiple of 64 */
  b->w = aligned_alloc(alignof(bank_worker_t), wbytes);
  if (!b->keys || !b->balance || !b->owner || !b->applied || !b->lat_ns ||
      !b->w) {
    fprintf(stderr,
            "ordo bank: out of memory for %zu accounts and %" PRIu64
            " transfers; try smaller --accounts or --transfers\n",
            b->naccounts, b->ntransfers);
    return CLI_EXIT_FAIL; /* bank_ordo_close frees what was allocated */
  }
  memset(b->w, 0, wbytes);

  /* Fixed-width decimal keys, so byte order is account order in dumps. */
  for (size_t i = 0; i < b->naccounts; i++) {
    b->keylen = (size_t)snprintf(b->keys[i], BANK_KEY_CAP, "acct:%08zu", i);
    b->balance[i] = BANK_OPENING_BALANCE;
    atomic_init(&b->owner[i], 0);
    r->total_before += b->balance[i];
  }
  bank_fault(b);

  int status = CLI_EXIT_OK;
  size_t begun = 0;
  for (; begun < nw; begun++) {
    char name[32];
    snprintf(name, sizeof(name), "bank-w%zu", begun + 1);
    ordo_txn_options_t to = {.priority = 0, .name = name};
    bank_worker_t *w = &b->w[begun];
    atomic_init(&w->done, 0);
    w->bank = b;
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

  bank_crew_t crew = {.work = bank_worker,
                      .first = b->w,
                      .stride = sizeof(bank_worker_t),
                      .done_off = offsetof(bank_worker_t, done),
                      .n = nw,
                      .gate = &b->gate,
                      .label = label,
                      .total = b->ntransfers,
                      .watchdog_s = o->watchdog_s,
                      .what = "lock table",
                      .dump = bank_dump_ordo,
                      .dump_arg = ordo};
  double seconds = 0;
  status = bank_crew_run(&crew, status, &seconds);

  if (status == CLI_EXIT_OK && ordo_stats(ordo, &s1) < 0) {
    fputs("ordo bank: cannot read the engine's counters (ordo_stats) after "
          "the run\n",
          stderr);
    status = CLI_EXIT_FAIL;
  }
  for (size_t i = 0; i < begun; i++)
    ordo_txn_end(b->w[i].txn);

  if (status == CLI_EXIT_OK) {
    const char *url = ordo_url(ordo);
    r->backend = strdup(url ? url : "");
    r->expected = b->ntransfers;
    r->seconds = seconds;
    for (size_t i = 0; i < nw; i++) {
      r->retries += b->w[i].retries;
      r->timeouts += b->w[i].timeouts;
      r->victims += b->w[i].victims;
      r->failed += b->w[i].failed;
      r->violations += b->w[i].violations;
      if (b->w[i].last_err != 0)
        r->last_err = b->w[i].last_err;
    }
    r->hard_err = atomic_load(&b->hard_err);
    r->deadlocks =
        s1.deadlocks >= s0.deadlocks ? s1.deadlocks - s0.deadlocks : 0;
    /* Claims are consecutive and every claimed transfer is timed, so the
     * measured ones are exactly indices 0..claimed-1. */
    uint64_t claimed = atomic_load(&b->next);
    if (claimed > b->ntransfers)
      claimed = b->ntransfers;
    bank_latency(r, b->lat_ns, claimed);
  }
  return status;
}

/*
 * bank_ordo_verify -- counts what the run left in memory (each transfer
 * applied once, the balances) and judges r (invariant 9): only a check
 * that holds leaves ok set; each failed one adds its reason.
 */
static int bank_ordo_verify(bank_place_t *p, bank_result_t *r) {
  const bank_opts_t *o = p->opts;
  const bank_t *b = &p->b;
  for (uint64_t i = 0; i < b->ntransfers; i++) {
    if (b->applied[i] == 1)
      r->completed++;
    else if (b->applied[i] > 1)
      r->twice++;
    if (b->applied[i] >= 1 && b->naccounts == 2 && (i & 1) == 0)
      r->forward++;
  }
  for (size_t i = 0; i < b->naccounts; i++)
    r->total_after += b->balance[i];

  r->verdict[0] = '\0';
  bank_check_total(r);
  bank_check_count(r);
  if (r->twice != 0)
    bank_verdict_add(r, "%" PRIu64 " transfers applied more than once",
                     r->twice);
  if (r->failed != 0)
    bank_verdict_add(r, "%" PRIu64 " transfers failed (last error %s: %s)",
                     r->failed, ordo_err_name(r->last_err),
                     ordo_strerror(r->last_err));
  if (r->hard_err != 0)
    bank_verdict_add(r, "stopped early on %s (%s)", ordo_err_name(r->hard_err),
                     ordo_strerror(r->hard_err));
  if (r->violations != 0)
    bank_verdict_add(r, "%" PRIu64 " mutual-exclusion violations",
                     r->violations);
  bank_check_ordered(o, r);
  if (bank_judged(r))
    snprintf(r->verdict, sizeof(r->verdict),
             "balance conserved, %" PRIu64 "/%" PRIu64 " transfers, %" PRIu64
             " deadlocks",
             r->completed, r->expected, r->deadlocks);

  /* How the report names this run (bank_report.c). */
  if (o->locks >= 0) {
    r->locks = bank_locks_names[o->locks];
    snprintf(r->place, sizeof(r->place), ", locks %s", r->locks);
  }
  r->detect = bank_detect_names[o->detect];
  bank_count_add(r, "retries", "retries", r->retries, "%s", "");
  bank_count_add(r, "timeouts", "timeouts", r->timeouts, "%s", "");
  bank_count_add(r, "deadlocks", "deadlocks", r->deadlocks,
                 " (the engine's count)");
  bank_count_add(r, "victims", "victims", r->victims,
                 " (lock calls that returned EDEADLK)");
  bank_count_add(r, "violations", "violations", r->violations, "%s", "");
  return CLI_EXIT_OK;
}

/* Disarms --graph, closes the place: ordo_close joins the engine's timer
 * thread, and the workers are joined, so no callback of this place can run
 * after this (bank_graph_t). */
static void bank_ordo_close(bank_place_t *p) {
  if (p->g != NULL)
    ordo_on_deadlock(p->o, NULL, NULL);
  ordo_close(p->o);
  bank_free(&p->b);
  free(p);
}

/* Every URL that is not claimed before: ordo_open tells a bad one. */
static int bank_ordo_claims(const bank_opts_t *o) {
  (void)o;
  return 1;
}

const bank_driver_t bank_driver_ordo = {
    .name = "ordo",
    .claims = bank_ordo_claims,
    .check = NULL,
    .usage = NULL,
    .graphs = 1,
    .open = bank_ordo_open,
    .run = bank_ordo_run,
    .verify = bank_ordo_verify,
    .close = bank_ordo_close,
};
