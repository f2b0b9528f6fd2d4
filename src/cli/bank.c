/*
 * bank.c -- `ordo bank`, the bank check of DESIGN.md §10, and `ordo graph`,
 * the wait-for graph of a live deadlock. In the bank, workers move money
 * between accounts at once and the run checks that the total balance is
 * unchanged, that every transfer happened exactly once and that no two
 * workers were ever inside the same account at once. A transfer takes its
 * two accounts with one ordo_lock_all (the ordered mode, which cannot
 * deadlock: the engine must count none) or, with --naive, one key at a time
 * in request order, which deadlocks, so that detection (or, with --detect
 * off, the lock timeout) has to break the cycles and the victims retry. See
 * README.md for the design, the invariants (numbered there and cited here as
 * "invariant N") and the lock order.
 *
 * Interface:
 *   cli_bank_main    runs `ordo bank [options]`, returns the exit status
 *   cli_bank_usage   prints the help of `ordo bank`, every flag
 *   cli_graph_main   runs `ordo graph [options]`, returns the exit status
 *   cli_graph_usage  prints the help of `ordo graph`, every flag
 * and, for ledger.c (declared in bank.h): bank_mode_names,
 * bank_locks_names, bank_mix64, bank_plan, bank_now_ns, bank_latency,
 * bank_verdict_add, bank_json_str, bank_url_redact, bank_gate_*,
 * bank_watchdog_start, bank_watchdog_stop. A PostgreSQL --backend (unless
 * --locks advisory) is handed to ledger_main once the flags are settled.
 *
 * Inside, running and reporting are apart: bank_run() fills a bank_result_t
 * and prints nothing but errors; bank_print_human(), bank_print_json() and
 * bank_print_compare() turn results into text. `ordo graph` lives here too,
 * at the end, because it shares the flag table machinery and the backend
 * opening with the bank (README.md, below the table of files).
 */
#include "cli/bank.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ordo.h"

/* ---- Flag tables ----------------------------------------------------------
 */

/*
 * A command's flags are one table: parsing, the help text and the list of
 * accepted options in error lines all come from it, so a flag cannot be
 * parsed yet undocumented. Each row writes one field of the command's option
 * struct, at off. Numbers are checked against [min, max] and names against
 * names[] (README.md, invariant 2).
 */
typedef enum cli_flag_kind_e {
  FLAG_STR,  /* const char * at off */
  FLAG_NUM,  /* long at off, within [min, max] */
  FLAG_BOOL, /* int at off, set to 1 */
  FLAG_ENUM, /* int at off, set to the index of the value in names[] */
  FLAG_HELP
} cli_flag_kind_t;

typedef struct cli_flag_s {
  const char *name;  /* "--workers" */
  const char *alias; /* "-h" or NULL */
  const char *arg;   /* "N" or NULL when the flag takes no value */
  cli_flag_kind_t kind;
  size_t off;
  long min, max;
  const char *const *names; /* FLAG_ENUM: the accepted values, NULL-ended */
  const char *help;
} cli_flag_t;

/* One command's table, and the name its error lines start with. */
typedef struct cli_flags_s {
  const char *cmd; /* "bank": lines read "ordo bank: ..." */
  const cli_flag_t *flag;
  size_t n;
} cli_flags_t;

/* The index of s in the NULL-ended names, or -1. */
static int name_index(const char *const *names, const char *s) {
  for (int i = 0; names[i] != NULL; i++)
    if (strcmp(names[i], s) == 0)
      return i;
  return -1;
}

/* Writes "a, b, c" from the NULL-ended names. */
static void name_list(FILE *f, const char *const *names) {
  for (size_t i = 0; names[i] != NULL; i++)
    fprintf(f, "%s%s", i ? ", " : "", names[i]);
}

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

/* The "Options:" part of a help text: one entry per row of the table. */
static void flags_usage(FILE *f, const cli_flags_t *fs) {
  for (size_t i = 0; i < fs->n; i++) {
    const cli_flag_t *fl = &fs->flag[i];
    char left[48];
    snprintf(left, sizeof(left), "%s%s%s%s%s", fl->alias ? fl->alias : "",
             fl->alias ? ", " : "", fl->name, fl->arg ? " " : "",
             fl->arg ? fl->arg : "");
    /* A long left column gets a line of its own. */
    if (strlen(left) > 19)
      fprintf(f, "  %s\n%22s", left, "");
    else
      fprintf(f, "  %-19s ", left);
    help_wrap(f, fl->help, 22, 79);
  }
}

/* Writes "--backend URL, --accounts N, ..." for usage error lines. */
static void flags_list(FILE *f, const cli_flags_t *fs) {
  for (size_t i = 0; i < fs->n; i++)
    fprintf(f, "%s%s%s%s", i ? ", " : "", fs->flag[i].name,
            fs->flag[i].arg ? " " : "", fs->flag[i].arg ? fs->flag[i].arg : "");
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
 * flags_parse -- fills the option struct o from argv (argv[0] is the
 * command's name) by the table fs. Accepts "--flag value" and
 * "--flag=value". On a mistake it prints one line on stderr that names the
 * culprit and what is accepted, and returns PARSE_ERR (invariants 1, 2).
 */
static int flags_parse(const cli_flags_t *fs, int argc, char **argv, void *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
    size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
    const cli_flag_t *fl = NULL;
    for (size_t k = 0; k < fs->n && fl == NULL; k++) {
      const cli_flag_t *c = &fs->flag[k];
      if ((strlen(c->name) == nlen && strncmp(c->name, a, nlen) == 0) ||
          (c->alias && !eq && strcmp(c->alias, a) == 0))
        fl = c;
    }
    if (fl == NULL) {
      if (a[0] == '-')
        fprintf(stderr, "ordo %s: unknown option '%.*s': accepted options are ",
                fs->cmd, (int)nlen, a);
      else
        fprintf(stderr,
                "ordo %s: unexpected argument '%s': ordo %s takes only "
                "options: ",
                fs->cmd, a, fs->cmd);
      flags_list(stderr, fs);
      fprintf(stderr, " (see 'ordo %s --help')\n", fs->cmd);
      return PARSE_ERR;
    }
    if (fl->kind == FLAG_HELP || fl->kind == FLAG_BOOL) {
      if (eq) {
        fprintf(stderr,
                "ordo %s: option '%s' takes no value, got '%s': write "
                "just %s\n",
                fs->cmd, fl->name, eq + 1, fl->name);
        return PARSE_ERR;
      }
      if (fl->kind == FLAG_HELP)
        return PARSE_HELP;
      *(int *)((char *)o + fl->off) = 1;
      continue;
    }
    const char *val = eq ? eq + 1 : NULL;
    if (val == NULL) {
      if (i + 1 >= argc) {
        fprintf(stderr, "ordo %s: option '%s' needs a value: write %s %s\n",
                fs->cmd, fl->name, fl->name, fl->arg);
        return PARSE_ERR;
      }
      val = argv[++i];
    }
    if (fl->kind == FLAG_STR) {
      *(const char **)((char *)o + fl->off) = val;
    } else if (fl->kind == FLAG_ENUM) {
      int k = name_index(fl->names, val);
      if (k < 0) {
        fprintf(stderr, "ordo %s: bad value '%s' for %s: accepted values are ",
                fs->cmd, val, fl->name);
        name_list(stderr, fl->names);
        fputc('\n', stderr);
        return PARSE_ERR;
      }
      *(int *)((char *)o + fl->off) = k;
    } else if (parse_num(val, fl->min, fl->max,
                         (long *)((char *)o + fl->off)) != 0) {
      fprintf(stderr,
              "ordo %s: bad value '%s' for %s: expected a whole number in "
              "%ld..%ld\n",
              fs->cmd, val, fl->name, fl->min, fl->max);
      return PARSE_ERR;
    }
  }
  return PARSE_OK;
}

/* ---- Options of ordo bank -------------------------------------------------
 */

/* bank_mode_t and bank_locks_t are in bank.h, shared with ledger.c. */
const char *const bank_mode_names[] = {"ordered", "naive"};
const char *const bank_locks_names[] = {"rows", "advisory", NULL};
_Static_assert(BANK_LOCKS_ROWS == 0 && BANK_LOCKS_ADVISORY == 1,
               "bank_locks_names is indexed by bank_locks_t");

/* --detect's values, indexed by ordo_detect_t: a name's index is its mode. */
static const char *const detect_names[] = {"immediate", "delayed", "off", NULL};
_Static_assert(ORDO_DETECT_IMMEDIATE == 0 && ORDO_DETECT_DELAYED == 1 &&
                   ORDO_DETECT_OFF == 2,
               "detect_names is indexed by ordo_detect_t");

/* The victim policies by ordo_victim_t, spelled as in a mem:// URL. */
static const char *const victim_names[ORDO_VICTIM__COUNT] = {
    "youngest",         "oldest",          "fewest_locks", "least_work",
    "nearest_deadline", "lowest_priority", "random"};

#define BANK_DEFAULT_TIMEOUT_MS 5000L
/*
 * The wait before a delayed search. Every naive deadlock stands that long,
 * and while it stands the queues behind it fill with crossing transfers that
 * deadlock in turn, so the engine's 1,000 ms would stretch a default run to
 * many minutes (2 cores: 2,000 transfers with 5 ms take about 2 s).
 */
#define BANK_DEFAULT_DEADLOCK_TIMEOUT_MS 5L
/* The lock timeout of --compare's detect-off run, unless --lock-timeout. */
#define BANK_COMPARE_OFF_TIMEOUT_MS 50L

/* bank_opts_t is in bank.h. */

static void bank_opts_init(bank_opts_t *o) {
  o->url = "mem://";
  o->accounts = 2;
  o->transfers = 1000;
  o->workers = 8;
  o->lock_timeout_ms = -1;
  o->deadlock_timeout_ms = -1;
  o->attempts = -1;
  o->watchdog_s = 0;
  o->naive = 0;
  o->detect = ORDO_DETECT_IMMEDIATE;
  o->compare = 0;
  o->json = 0;
  o->locks = -1;
  o->graph = NULL;
  o->mode = BANK_MODE_ORDERED;
}

#define BANK_MAX_ACCOUNTS 1000000L
#define BANK_MAX_TRANSFERS 10000000L
#define BANK_MAX_WORKERS 1024L
#define BANK_MAX_TIMEOUT_MS 3600000L
#define BANK_MAX_WATCHDOG_S 86400L
#define BANK_MAX_ATTEMPTS 1000000L
/* ordo_retry's default, for the ordered mode; the naive mode retries until
 * a transfer is done, since deadlocks are what it is for. */
#define BANK_DEFAULT_ATTEMPTS 10L

static const cli_flag_t bank_flag_rows[] = {
    {"--backend", NULL, "URL", FLAG_STR, offsetof(bank_opts_t, url), 0, 0, NULL,
     "where the locks live (default mem://); accepted forms: " CLI_URL_FORMS
     "; options in the URL's query (mem://?detect=off&victim=oldest) win "
     "over the flags below, and the report shows a detect= of the URL; a "
     "PostgreSQL URL runs the ledger on real rows (see below)"},
    {"--locks", NULL, "KIND", FLAG_ENUM, offsetof(bank_opts_t, locks), 0, 0,
     bank_locks_names,
     "only with a PostgreSQL URL: rows (the default: the ledger, each "
     "transfer one transaction that locks its two rows of "
     "ordo_bank.accounts with SELECT ... FOR UPDATE, PostgreSQL detecting "
     "the deadlocks; the run resets schema ordo_bank) or advisory (the bank "
     "over ordo_open(URL), the postgres:// backend's advisory locks)"},
    {"--accounts", NULL, "N", FLAG_NUM, offsetof(bank_opts_t, accounts), 2,
     BANK_MAX_ACCOUNTS, NULL,
     "accounts in the ledger, 2..1000000 (default 2); with 2, transfers go "
     "both ways between them, with more, between random distinct pairs"},
    {"--transfers", NULL, "N", FLAG_NUM, offsetof(bank_opts_t, transfers), 1,
     BANK_MAX_TRANSFERS, NULL,
     "transfers each way, 1..10000000 (default 1000): the run makes 2 x N"},
    {"--workers", NULL, "N", FLAG_NUM, offsetof(bank_opts_t, workers), 1,
     BANK_MAX_WORKERS, NULL, "worker threads, 1..1024 (default 8)"},
    {"--lock-timeout", NULL, "MS", FLAG_NUM,
     offsetof(bank_opts_t, lock_timeout_ms), 0, BANK_MAX_TIMEOUT_MS, NULL,
     "bound on each lock call in milliseconds, 0..3600000 (default 5000, "
     "and 50 in the detect-off run of --compare; 0 tries once)"},
    {"--attempts", NULL, "N", FLAG_NUM, offsetof(bank_opts_t, attempts), 0,
     BANK_MAX_ATTEMPTS, NULL,
     "attempts per transfer, 0..1000000, 0 meaning until it succeeds "
     "(default 10, and 0 with --naive, where a victim may lose several "
     "times in a row); between attempts ordo_retry releases everything and "
     "backs off"},
    {"--naive", NULL, NULL, FLAG_BOOL, offsetof(bank_opts_t, naive), 0, 0, NULL,
     "take the two accounts one at a time with ordo_lock, from then to, "
     "yielding the processor in between, instead of both in one "
     "ordo_lock_all: crossing transfers deadlock, detection (or the lock "
     "timeout) breaks the cycles and the victims retry; the run may then "
     "count deadlocks and still pass"},
    {"--detect", NULL, "MODE", FLAG_ENUM, offsetof(bank_opts_t, detect), 0, 0,
     detect_names,
     "deadlock detection: immediate (the default: search when a txn blocks "
     "while holding keys), delayed (search after --deadlock-timeout of "
     "waiting), or off (no search and no background sweep: only lock "
     "timeouts end a deadlock)"},
    {"--deadlock-timeout", NULL, "MS", FLAG_NUM,
     offsetof(bank_opts_t, deadlock_timeout_ms), 0, BANK_MAX_TIMEOUT_MS, NULL,
     "with --detect delayed, how long a txn waits before its search runs, "
     "0..3600000 ms (default 5 here, where every naive deadlock lasts that "
     "long; the engine's own default is 1000)"},
    {"--compare", NULL, NULL, FLAG_BOOL, offsetof(bank_opts_t, compare), 0, 0,
     NULL,
     "run three configurations in turn with the other flags: ordered; naive "
     "with detection (immediate); naive with detection off, ended by lock "
     "timeouts (--lock-timeout, or 50 ms); print one table (or, with "
     "--json, {\"compare\": [three results]}); exit 0 only if all three "
     "pass; cannot be combined with --naive or --detect. The third run "
     "pays a whole lock timeout per deadlock, and naive deadlocks feed "
     "each other: on 2 cores it takes about a minute with the defaults, "
     "and 3 to 10 s with --transfers 100"},
    {"--graph", NULL, "FILE", FLAG_STR, offsetof(bank_opts_t, graph), 0, 0,
     NULL,
     "write the cycle of the run's first deadlock, from the engine's "
     "deadlock record, to FILE as a Graphviz DOT digraph (edges labelled "
     "with key and mode, dashed when the waiter is only queued behind the "
     "other, the victim in red), followed by the live wait-for graph of "
     "that moment as DOT comments; an empty digraph when no deadlock "
     "happened. Render with: dot -Tpng FILE -o cycle.png"},
    {"--watchdog", NULL, "SEC", FLAG_NUM, offsetof(bank_opts_t, watchdog_s), 0,
     BANK_MAX_WATCHDOG_S, NULL,
     "when a run has not finished SEC seconds after its transfers start, "
     "print the lock table (holders and queues) on stderr and exit with "
     "status 3; 0..86400 (default 0: no watchdog); with --compare each of "
     "the three runs has its own SEC"},
    {"--json", NULL, NULL, FLAG_BOOL, offsetof(bank_opts_t, json), 0, 0, NULL,
     "print one JSON object on stdout instead of the summary"},
    {"--help", "-h", NULL, FLAG_HELP, 0, 0, 0, NULL,
     "print this help and exit"},
};

static const cli_flags_t bank_flags = {
    "bank", bank_flag_rows, sizeof(bank_flag_rows) / sizeof(bank_flag_rows[0])};

void cli_bank_usage(FILE *f) {
  fputs("usage: ordo bank [--backend URL] [--locks rows|advisory]\n"
        "                 [--accounts N] [--transfers N]\n"
        "                 [--workers N] [--lock-timeout MS] [--attempts N]\n"
        "                 [--naive] [--detect immediate|delayed|off]\n"
        "                 [--deadlock-timeout MS] [--compare] [--graph FILE]\n"
        "                 [--watchdog SEC] [--json]\n"
        "\n"
        "The bank check: workers move random amounts between accounts at\n"
        "once, each transfer locking both accounts (X mode) inside\n"
        "ordo_retry, which backs off and retries time-outs and deadlock\n"
        "victims. By default a transfer takes both keys with one\n"
        "ordo_lock_all, which cannot deadlock; with --naive it takes them one\n"
        "at a time, which does. The run passes when the total balance is\n"
        "unchanged, every transfer completed exactly once, no two workers\n"
        "were inside one account at once and, in the ordered mode only, the\n"
        "engine counted no deadlock. A progress bar is drawn on stderr when\n"
        "it is a terminal.\n"
        "\n"
        "Options:\n",
        f);
  flags_usage(f, &bank_flags);
  fputs("\n"
        "Output: mode and detection, transfers done, seconds, transfers/s,\n"
        "p50/p99 latency per transfer (retries and backoff included),\n"
        "retries, timeouts, deadlocks (the engine's count), victims (lock\n"
        "calls that returned EDEADLK), the total before and after, and a\n"
        "verdict line. --json prints the same as one object.\n"
        "Exit status: 0 the check passed, 1 it failed (or the backend could\n"
        "not be used), 2 bad usage, 3 the watchdog fired: the run had not\n"
        "finished within --watchdog SEC seconds; stderr then holds one\n"
        "'ordo bank: watchdog: ...' line and the lock table, stdout nothing.\n"
        "\n",
        f);
  ledger_usage(f);
  fputs("\n"
        "Examples:\n"
        "  ordo bank --naive                  deadlocks, detected and retried\n"
        "  ordo bank --naive --detect off --lock-timeout 20\n"
        "                                     the same, ended by time-outs\n"
        "  ordo bank --compare                the three side by side\n"
        "  ordo bank --naive --graph cycle.dot && dot -Tpng cycle.dot -o "
        "c.png\n"
        "  ordo bank --backend postgres://me:pw@localhost/test --naive\n"
        "                                     PostgreSQL's own deadlocks\n",
        f);
}

/*
 * bank_parse -- fills o from argv and settles what depends on more than one
 * flag. Returns PARSE_OK, PARSE_HELP or PARSE_ERR (after its one line).
 */
static int bank_parse(int argc, char **argv, bank_opts_t *o) {
  int rc = flags_parse(&bank_flags, argc, argv, o);
  if (rc != PARSE_OK)
    return rc;
  /* --compare chooses each run's mode and detection itself. Detect is
   * "given" when it is not the default; --detect immediate is harmless. */
  if (o->compare && (o->naive || o->detect != ORDO_DETECT_IMMEDIATE)) {
    fprintf(stderr,
            "ordo bank: %s cannot be combined with --compare, which runs "
            "its own three modes (ordered; naive, detect immediate; naive, "
            "detect off): drop %s\n",
            o->naive ? "--naive" : "--detect",
            o->naive ? "--naive" : "--detect");
    return PARSE_ERR;
  }
  o->mode = o->naive ? BANK_MODE_NAIVE : BANK_MODE_ORDERED;
  /* --locks chooses between two ways of using PostgreSQL; any other place
   * has only one, so the flag there is a mistake worth naming. */
  char shown[512];
  int pg = ledger_is_url(o->url);
  if (!pg && o->locks >= 0) {
    bank_url_redact(o->url, shown, sizeof(shown));
    fprintf(stderr,
            "ordo bank: --locks applies only to PostgreSQL backends "
            "(postgres://, postgresql://, postgres:CONNINFO), not '%s': "
            "drop --locks\n",
            shown);
    return PARSE_ERR;
  }
  if (pg && o->locks != BANK_LOCKS_ADVISORY) {
    /* The ledger's deadlocks are PostgreSQL's to find (after its own
     * deadlock_timeout), so the flags that tune or draw ordo's detector,
     * and --compare's detect-off run, mean nothing there. */
    const char *bad = o->compare                           ? "--compare"
                      : o->graph != NULL                   ? "--graph"
                      : o->detect != ORDO_DETECT_IMMEDIATE ? "--detect"
                      : o->deadlock_timeout_ms >= 0 ? "--deadlock-timeout"
                                                    : NULL;
    if (bad != NULL) {
      fprintf(stderr,
              "ordo bank: %s cannot be used with the PostgreSQL ledger "
              "(--locks rows, the default for postgres URLs), where "
              "PostgreSQL detects deadlocks itself after its "
              "deadlock_timeout: drop %s, or add --locks advisory\n",
              bad, bad);
      return PARSE_ERR;
    }
  }
  return PARSE_OK;
}

/*
 * bank_url_redact -- copies url into out with any password replaced by "***",
 * for error lines printed before ordo_url() can do it (the open failed). The
 * password is what lies between the ':' after the user and the '@' that ends
 * the authority, as in redis://user:secret@host.
 */
void bank_url_redact(const char *url, char *out, size_t cap) {
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

uint64_t bank_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * bank_mix64 -- the SplitMix64 finalizer (Steele, Lea and Flood, "Fast
 * splittable pseudorandom number generators", OOPSLA 2014): a bijection whose
 * output bits each depend on every input bit, so consecutive indices give
 * unrelated draws without any shared generator state between workers.
 */
uint64_t bank_mix64(uint64_t z) {
  z += UINT64_C(0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/*
 * bank_plan -- what transfer idx does, a pure function of idx (invariant 8).
 * With two accounts even indices go 0 -> 1 and odd ones 1 -> 0: exactly N
 * each way, and since workers claim consecutive indices both directions are
 * in flight at once whenever there are two workers or more. The ledger
 * (ledger.c) runs the same plan, and checks its journal against it.
 */
void bank_plan(size_t naccounts, uint64_t idx, size_t *from, size_t *to,
               int64_t *amount) {
  uint64_t r = bank_mix64(BANK_SEED ^ idx);
  if (naccounts == 2) {
    *from = (size_t)(idx & 1);
    *to = 1 - *from;
  } else {
    *from = (size_t)(r % naccounts);
    r = bank_mix64(r);
    *to = (size_t)(r % (naccounts - 1));
    if (*to >= *from)
      (*to)++; /* distinct from from, uniform over the others */
  }
  r = bank_mix64(r);
  *amount = 1 + (int64_t)(r % BANK_MAX_AMOUNT);
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

void bank_latency(bank_result_t *r, uint64_t *lat_ns, uint64_t n) {
  qsort(lat_ns, n, sizeof(*lat_ns), cmp_u64);
  r->p50_us = percentile_us(lat_ns, n, 50);
  r->p99_us = percentile_us(lat_ns, n, 99);
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

/* bank_watchdog_t is in bank.h: the ledger (ledger.c) arms it too. */

/* The bank's watchdog dump: ordo's lock table, holders and queues. */
static void bank_dump_ordo(void *arg) {
  ordo_dump(arg, STDERR_FILENO);
}

static void *bank_watchdog_thread(void *arg) {
  bank_watchdog_t *wd = arg;
  ordo__mutex_lock(&wd->mu);
  while (!wd->cancel &&
         ordo__cond_timedwait(&wd->cv, &wd->mu, &wd->deadline) != ETIMEDOUT)
    ;
  int fire = !wd->cancel;
  ordo__mutex_unlock(&wd->mu);
  if (!fire)
    return NULL;
  /* From here on the main thread is blocked in a pthread_join (of a worker,
   * or of this thread in bank_watchdog_stop) that can only end with the
   * process: it has not stopped the bar or closed the place, and never
   * will. So the bar is ours to stop and what dump reads stays valid. No
   * lock is held. */
  cli_progress_stop(wd->bar);
  fprintf(stderr,
          "ordo bank: watchdog: the run did not finish within %ld s; %s "
          "follows:\n",
          wd->seconds, wd->what);
  fflush(stderr);
  wd->dump(wd->arg);
  fflush(stderr);
  _exit(CLI_EXIT_WATCHDOG);
}

/* bank_watchdog_start's setup: 0, or an error number (nothing to stop). */
static int watchdog_setup(bank_watchdog_t *wd, long seconds,
                          cli_progress_t *bar, const char *what,
                          bank_dump_cb dump, void *arg) {
  memset(wd, 0, sizeof(*wd));
  wd->dump = dump;
  wd->arg = arg;
  wd->what = what;
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
  rc = ordo__mutex_init(&wd->mu);
  if (rc != 0) {
    pthread_cond_destroy(&wd->cv);
    return rc;
  }
  clock_gettime(CLOCK_MONOTONIC, &wd->deadline);
  wd->deadline.tv_sec += (time_t)seconds;
  rc = pthread_create(&wd->thread, NULL, bank_watchdog_thread, wd);
  if (rc != 0) {
    ordo__mutex_destroy(&wd->mu);
    pthread_cond_destroy(&wd->cv);
  } else {
    wd->active = 1;
  }
  return rc;
}

int bank_watchdog_start(bank_watchdog_t *wd, long seconds, cli_progress_t *bar,
                        const char *what, bank_dump_cb dump, void *arg) {
  int rc = watchdog_setup(wd, seconds, bar, what, dump, arg);
  if (rc != 0)
    fprintf(stderr,
            "ordo bank: cannot start the watchdog thread: %s; try without "
            "--watchdog\n",
            strerror(rc));
  return rc;
}

void bank_gate_init(bank_gate_t *g) {
  ordo__mutex_init(&g->mu);
  pthread_cond_init(&g->cv, NULL);
  g->go = g->abort = 0;
}

void bank_gate_destroy(bank_gate_t *g) {
  ordo__mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
}

void bank_gate_open(bank_gate_t *g, int go) {
  ordo__mutex_lock(&g->mu);
  if (go)
    g->go = 1;
  else
    g->abort = 1;
  pthread_cond_broadcast(&g->cv);
  ordo__mutex_unlock(&g->mu);
}

int bank_gate_wait(bank_gate_t *g) {
  ordo__mutex_lock(&g->mu);
  while (!g->go && !g->abort)
    ordo__cond_wait(&g->cv, &g->mu);
  int aborted = g->abort;
  ordo__mutex_unlock(&g->mu);
  return aborted;
}

void bank_watchdog_stop(bank_watchdog_t *wd) {
  if (!wd->active)
    return;
  ordo__mutex_lock(&wd->mu);
  wd->cancel = 1;
  pthread_cond_signal(&wd->cv);
  ordo__mutex_unlock(&wd->mu);
  pthread_join(wd->thread, NULL);
  ordo__mutex_destroy(&wd->mu);
  pthread_cond_destroy(&wd->cv);
  wd->active = 0;
}

/* ---- The first deadlock's cycle (--graph FILE) ----------------------------
 */

/*
 * The state of --graph FILE (README.md, "The deadlock graph"). The file is
 * opened before the first run, so a bad path fails before any work. The
 * callback of ordo_on_deadlock runs on the engine thread that found the
 * deadlock, with no engine lock held; the first one to swap claimed from 0
 * to 1 writes the file and copies the record, and every later one returns at
 * once. The main thread reads rec, write_err and f only after ordo_close,
 * which joins the engine's timer thread, and after joining the workers (on
 * whose threads the other callbacks run): both joins order the writes
 * before the reads.
 */
typedef struct bank_graph_s {
  const char *path;
  FILE *f;
  ordo_t *o;           /* the place being run; set before it is armed */
  _Atomic int claimed; /* 1 once a callback has taken the file */
  ordo_deadlock_t rec; /* the record drawn; written by that callback */
  int write_err;       /* errno of a failed write, by that callback */
} bank_graph_t;

/* Writes key bytes inside a DOT string: '"' and '\' and bytes that are not
 * printable ASCII as \xNN, which Graphviz shows as is. */
static void dot_key(FILE *f, const uint8_t *k, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '"' && k[i] != '\\')
      fputc(k[i], f);
    else
      fprintf(f, "\\\\x%02x", k[i]);
  }
}

/*
 * graph_write_cycle -- writes the record's cycle as one DOT digraph: a node
 * per txn, an edge "A -> B" per edge of the cycle (A waits for B), labelled
 * with the key and the mode A asks for, solid when B holds the key (hard),
 * dashed when B is only queued ahead of A (soft), and the victim in red.
 */
static void graph_write_cycle(FILE *f, const ordo_deadlock_t *d) {
  size_t kept = d->nedges < ORDO_DL_MAX_EDGES ? d->nedges : ORDO_DL_MAX_EDGES;
  const char *policy =
      (unsigned)d->policy < ORDO_VICTIM__COUNT ? victim_names[d->policy] : "?";
  fprintf(f,
          "/*\n"
          " * ordo bank --graph: the cycle of deadlock %" PRIu64
          ", the first of the run, drawn from\n"
          " * the engine's deadlock record (ordo_on_deadlock). \"A -> B\": "
          "txn A waits for\n"
          " * txn B on the key of the label, in the mode A asks for; solid: "
          "B holds the\n"
          " * key; dashed: B is queued ahead of A. The victim (red) was "
          "aborted with\n"
          " * EDEADLK, its keys released, and its transfer retried.\n"
          " */\n",
          d->seq);
  fprintf(f,
          "digraph deadlock {\n"
          "  rankdir=LR;\n"
          "  node [shape=box, fontname=\"Helvetica\"];\n"
          "  edge [fontname=\"Helvetica\"];\n"
          "  labelloc=t;\n"
          "  label=\"deadlock %" PRIu64 ": a cycle of %zu edges%s, found by %s;"
          " victim txn %" PRIu64 " (policy %s)\";\n",
          d->seq, d->nedges, kept < d->nedges ? " (the first 16 drawn)" : "",
          d->found_by_sweep ? "the background sweep" : "the deadlock check",
          d->victim, policy);
  fprintf(f,
          "  \"txn %" PRIu64 "\" [color=red, fontcolor=red, penwidth=2, "
          "label=\"txn %" PRIu64 "\\nvictim\"];\n",
          d->victim, d->victim);
  for (size_t i = 0; i < kept; i++) {
    const ordo_dl_edge_t *e = &d->edge[i];
    fprintf(f, "  \"txn %" PRIu64 "\" -> \"txn %" PRIu64 "\" [label=\"",
            e->from, e->to);
    dot_key(f, e->key, e->key_len);
    fprintf(f, " %s%s\"%s];\n", e->mode == ORDO_MODE_S ? "S" : "X",
            e->soft ? " (queued)" : "", e->soft ? ", style=dashed" : "");
  }
  fputs("}\n", f);
}

/*
 * graph_write_live -- appends the wait-for graph of this moment
 * (ordo_graph_dump, DOT) as "// " comment lines: Graphviz ignores them, so
 * the file still draws the one cycle above. The victim is already gone, so
 * this graph may no longer hold the cycle; it shows who else was waiting.
 */
static void graph_write_live(FILE *f, ordo_t *o) {
  fputs("\n// The live wait-for graph (ordo_graph_dump) as this file was "
        "written, after\n// the victim was aborted, so it may no longer "
        "show the cycle:\n",
        f);
  FILE *tmp = tmpfile();
  int rc = tmp ? ordo_graph_dump(o, fileno(tmp), ORDO_GRAPH_DOT) : 0;
  if (tmp == NULL || rc < 0) {
    fprintf(f, "// (not available: %s)\n",
            tmp ? ordo_strerror(rc) : strerror(errno));
    if (tmp)
      fclose(tmp);
    return;
  }
  /* The dump wrote through its own descriptor; tmp's offset is shared and
   * its buffer empty, so rewinding reads it from the start. */
  rewind(tmp);
  char line[512];
  int bol = 1;
  while (fgets(line, sizeof(line), tmp) != NULL) {
    if (bol)
      fputs("// ", f);
    fputs(line, f);
    bol = strchr(line, '\n') != NULL;
  }
  if (!bol)
    fputc('\n', f);
  fclose(tmp);
}

/* The ordo_on_deadlock callback of --graph; see bank_graph_t. */
static void bank_graph_cb(const ordo_deadlock_t *d, void *arg) {
  bank_graph_t *g = arg;
  if (atomic_exchange(&g->claimed, 1) != 0)
    return;
  g->rec = *d;
  graph_write_cycle(g->f, d);
  graph_write_live(g->f, g->o);
  if (fflush(g->f) != 0 || ferror(g->f))
    g->write_err = errno ? errno : EIO;
}

/* Opens FILE for --graph; prints the one error line when it cannot. */
static int bank_graph_open(bank_graph_t *g, const char *path) {
  memset(g, 0, sizeof(*g));
  atomic_init(&g->claimed, 0);
  g->path = path;
  g->f = fopen(path, "w");
  if (g->f == NULL) {
    fprintf(stderr,
            "ordo bank: cannot create the --graph file '%s': %s; give a "
            "writable path\n",
            path, strerror(errno));
    return CLI_EXIT_FAIL;
  }
  return CLI_EXIT_OK;
}

/*
 * bank_graph_close -- after the last run (and its ordo_close): when no
 * deadlock was recorded, writes an empty digraph that says so, so that FILE
 * is valid DOT either way; then closes it. Returns CLI_EXIT_FAIL after one
 * error line when the file could not be written.
 */
static int bank_graph_close(bank_graph_t *g) {
  if (atomic_load(&g->claimed) == 0) {
    fputs("/*\n * ordo bank --graph: no deadlock was recorded in this run "
          "(the ordered mode\n * cannot deadlock; with --detect off, time-outs "
          "end deadlocks and leave\n * no record), so there is no cycle to "
          "draw.\n */\n"
          "digraph deadlock {\n  label=\"no deadlock in this run\";\n}\n",
          g->f);
  }
  int err = g->write_err;
  if (fflush(g->f) != 0 && err == 0)
    err = errno;
  if (fclose(g->f) != 0 && err == 0)
    err = errno;
  g->f = NULL;
  if (err != 0) {
    fprintf(stderr, "ordo bank: cannot write the --graph file '%s': %s\n",
            g->path, strerror(err));
    return CLI_EXIT_FAIL;
  }
  return CLI_EXIT_OK;
}

static void bank_free(bank_t *b) {
  free(b->keys);
  free(b->balance);
  free(b->owner);
  free(b->applied);
  free(b->lat_ns);
  free(b->w);
}

void bank_verdict_add(bank_result_t *r, const char *fmt, ...) {
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
    bank_verdict_add(r, "balance changed from %" PRId64 " to %" PRId64,
                     r->total_before, r->total_after);
  if (r->completed != r->expected)
    bank_verdict_add(r, "%" PRIu64 "/%" PRIu64 " transfers completed",
                     r->completed, r->expected);
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
  /* The naive mode deadlocks on purpose: there the count is a measure, and
   * the checks above show that the victims' retries lost nothing. */
  if (o->mode == BANK_MODE_ORDERED && r->deadlocks != 0)
    bank_verdict_add(r, "%" PRIu64 " deadlocks in ordered mode", r->deadlocks);
  r->ok = r->verdict[0] == '\0';
  if (r->ok)
    snprintf(r->verdict, sizeof(r->verdict),
             "balance conserved, %" PRIu64 "/%" PRIu64 " transfers, %" PRIu64
             " deadlocks",
             r->completed, r->expected, r->deadlocks);
}

/*
 * open_place -- ordo_open of url with opts, telling a bad URL (usage, exit
 * 2) from a backend that fails (exit 1). Prints the one error line itself,
 * starting "ordo CMD: ".
 */
static int open_place(const char *cmd, const char *url,
                      const ordo_options_t *opts, ordo_t **out) {
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
 * bank_open -- opens the backend with the detection the flags ask for: an
 * ordo_options_t from ordo_options_init, with detect set from --detect and
 * deadlock_timeout_ms from --deadlock-timeout. "off" also turns the background
 * sweep off (the engine sweeps whatever opts.detect says), so that only lock
 * timeouts end a deadlock. Options in the URL's query are applied by ordo_open
 * over these, so they win.
 */
static int bank_open(const bank_opts_t *o, ordo_t **out) {
  ordo_options_t oo;
  ordo_options_init(&oo);
  oo.detect = (ordo_detect_t)o->detect;
  if (oo.detect == ORDO_DETECT_OFF)
    oo.sweep_ms = 0;
  /* -1 until given: the ledger must tell a given --deadlock-timeout from
   * the default, which it refuses (bank_parse). */
  oo.deadlock_timeout_ms = o->deadlock_timeout_ms >= 0
                               ? o->deadlock_timeout_ms
                               : BANK_DEFAULT_DEADLOCK_TIMEOUT_MS;
  return open_place("bank", o->url, &oo, out);
}

/*
 * bank_run -- runs the check with an open backend and fills r; label names
 * the progress bar. Returns CLI_EXIT_OK when it ran to the end (r says
 * whether the check passed), or CLI_EXIT_FAIL after printing why it could
 * not run.
 */
static int bank_run(const bank_opts_t *o, ordo_t *ordo, const char *label,
                    bank_result_t *r) {
  bank_t b;
  memset(&b, 0, sizeof(b));
  memset(r, 0, sizeof(*r));
  b.opts = o;
  b.o = ordo;
  b.body = o->mode == BANK_MODE_NAIVE ? bank_body_naive : bank_body_ordered;
  ordo_retry_options_init(&b.retry);
  b.retry.max_attempts = (unsigned)o->attempts;
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

  bank_gate_init(&b.gate);
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
    cli_progress_start(&bar, label, b.ntransfers, bank_progress_read, &b);

  /* Open the gate only once every worker exists, so the clock measures all
   * of them working (invariant 6). The watchdog is armed just before, so its
   * SEC seconds count from the start of the transfers too (a few
   * microseconds early, never late). */
  if (status == CLI_EXIT_OK &&
      bank_watchdog_start(&wd, o->watchdog_s, &bar, "lock table",
                          bank_dump_ordo, ordo) != 0)
    status = CLI_EXIT_FAIL;
  double t0 = cli_now();
  bank_gate_open(&b.gate, status == CLI_EXIT_OK);
  for (size_t i = 0; i < started; i++)
    pthread_join(b.w[i].thread, NULL);
  double t1 = cli_now();
  /* The run is over: cancel the watchdog before touching the bar (it stops
   * the bar itself when it fires, and then this join never returns). */
  bank_watchdog_stop(&wd);
  cli_progress_stop(&bar);
  bank_gate_destroy(&b.gate);

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
      r->victims += b.w[i].victims;
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
    bank_latency(r, b.lat_ns, claimed);
    bank_judge(o, r);
  }
  bank_free(&b);
  return status;
}

/*
 * bank_once -- one whole run of the configuration o: open the place, arm
 * --graph's callback (g may be NULL), run, disarm, close. Fills r and
 * returns bank_run's status, or bank_open's when the place did not open.
 */
static int bank_once(const bank_opts_t *o, bank_graph_t *g, const char *label,
                     bank_result_t *r) {
  memset(r, 0, sizeof(*r));
  ordo_t *ordo;
  int status = bank_open(o, &ordo);
  if (status != CLI_EXIT_OK)
    return status;
  if (g != NULL) {
    g->o = ordo;
    ordo_on_deadlock(ordo, bank_graph_cb, g);
  }
  status = bank_run(o, ordo, label, r);
  if (g != NULL)
    ordo_on_deadlock(ordo, NULL, NULL);
  /* ordo_close joins the engine's timer thread, and the workers are joined:
   * no callback of this place can run after this (bank_graph_t). */
  ordo_close(ordo);
  return status;
}

/* ---- Reports --------------------------------------------------------------
 */

void bank_json_str(FILE *f, const char *s) {
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

/* The members of one result's JSON object, without the braces. */
static void bank_json_fields(FILE *f, const bank_opts_t *o,
                             const bank_result_t *r) {
  double rate = r->seconds > 0 ? (double)r->completed / r->seconds : 0.0;
  fputs("\"backend\": ", f);
  bank_json_str(f, r->backend ? r->backend : "");
  if (o->locks >= 0)
    fprintf(f, ", \"locks\": \"%s\"", bank_locks_names[o->locks]);
  fprintf(f,
          ", \"mode\": \"%s\", \"detect\": \"%s\", \"accounts\": %ld, "
          "\"workers\": %ld, \"lock_timeout_ms\": %ld, \"attempts\": %ld, "
          "\"transfers\": %" PRIu64 ", \"transfers_expected\": %" PRIu64
          ", \"failed\": %" PRIu64
          ", \"seconds\": %.6f, \"transfers_per_s\": %.1f, \"p50_us\": %.1f, "
          "\"p99_us\": %.1f, \"retries\": %" PRIu64 ", \"timeouts\": %" PRIu64
          ", \"deadlocks\": %" PRIu64 ", \"victims\": %" PRIu64
          ", \"violations\": %" PRIu64 ", \"total_before\": %" PRId64
          ", \"total_after\": %" PRId64 ", \"ok\": %s, \"verdict\": ",
          bank_mode_names[o->mode], detect_names[o->detect], o->accounts,
          o->workers, o->lock_timeout_ms, o->attempts, r->completed,
          r->expected, r->failed, r->seconds, rate, r->p50_us, r->p99_us,
          r->retries, r->timeouts, r->deadlocks, r->victims, r->violations,
          r->total_before, r->total_after, r->ok ? "true" : "false");
  bank_json_str(f, r->verdict);
}

/* "graph": null, or what --graph FILE holds. */
static void bank_json_graph(FILE *f, const bank_graph_t *g) {
  fputs("\"graph\": ", f);
  if (g == NULL) {
    fputs("null", f);
    return;
  }
  fputs("{\"file\": ", f);
  bank_json_str(f, g->path);
  if (atomic_load(&g->claimed))
    fprintf(f,
            ", \"deadlock\": %" PRIu64 ", \"edges\": %zu, \"victim\": %" PRIu64
            "}",
            g->rec.seq, g->rec.nedges, g->rec.victim);
  else
    fputs(", \"deadlock\": null}", f);
}

static void bank_print_json(const bank_opts_t *o, const bank_result_t *r,
                            const bank_graph_t *g) {
  fputc('{', stdout);
  bank_json_fields(stdout, o, r);
  fputs(", ", stdout);
  bank_json_graph(stdout, g);
  fputs("}\n", stdout);
}

/* The line that says what --graph FILE holds; nothing without --graph. */
static void bank_print_graph(const bank_graph_t *g) {
  if (g == NULL)
    return;
  if (atomic_load(&g->claimed))
    printf("graph         %s: the cycle of deadlock %" PRIu64 " (%zu edges, "
           "victim txn %" PRIu64 "), as DOT\n",
           g->path, g->rec.seq, g->rec.nedges, g->rec.victim);
  else
    printf("graph         %s: no deadlock was recorded, so an empty graph\n",
           g->path);
}

static void bank_print_human(const bank_opts_t *o, const bank_result_t *r,
                             const bank_graph_t *g) {
  double rate = r->seconds > 0 ? (double)r->completed / r->seconds : 0.0;
  char att[32];
  if (o->attempts == 0)
    snprintf(att, sizeof(att), "until done");
  else
    snprintf(att, sizeof(att), "at most %ld", o->attempts);
  printf("ordo bank: %s%s%s, %s mode, detect %s, %ld accounts, %ld workers, "
         "lock timeout %ld ms, attempts %s\n",
         r->backend ? r->backend : "", o->locks >= 0 ? ", locks " : "",
         o->locks >= 0 ? bank_locks_names[o->locks] : "",
         bank_mode_names[o->mode], detect_names[o->detect], o->accounts,
         o->workers, o->lock_timeout_ms, att);
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
  printf("victims       %" PRIu64 " (lock calls that returned EDEADLK)\n",
         r->victims);
  printf("violations    %" PRIu64 "\n", r->violations);
  printf("balance       before %" PRId64 ", after %" PRId64 "\n",
         r->total_before, r->total_after);
  bank_print_graph(g);
  printf("verdict: %s \u2014 %s\n", r->ok ? "OK" : "FAIL", r->verdict);
}

/* The three configurations of --compare, in the order they run. */
#define BANK_NCOMPARE 3

static const char *const bank_compare_labels[BANK_NCOMPARE] = {
    "bank ordered", "bank naive", "bank naive/off"};

/*
 * bank_print_compare -- the table of --compare: one row per run, then the
 * lock timeouts used, what --graph wrote, the reason of each run that
 * failed, and the verdict line.
 */
static void bank_print_compare(const bank_opts_t *cfg, const bank_result_t *r,
                               const bank_graph_t *g) {
  printf("ordo bank --compare: %s, %ld accounts, %ld workers, 2 x %ld "
         "transfers\n",
         r[0].backend ? r[0].backend : "", cfg[0].accounts, cfg[0].workers,
         cfg[0].transfers);
  printf("%-7s  %-9s  %11s  %8s  %10s  %10s  %7s  %8s  %9s  %s\n", "mode",
         "detect", "transfers/s", "seconds", "p50 us", "p99 us", "retries",
         "timeouts", "deadlocks", "ok");
  size_t failed = 0;
  for (size_t i = 0; i < BANK_NCOMPARE; i++) {
    const bank_result_t *x = &r[i];
    double rate = x->seconds > 0 ? (double)x->completed / x->seconds : 0.0;
    printf("%-7s  %-9s  %11.0f  %8.3f  %10.1f  %10.1f  %7" PRIu64 "  %8" PRIu64
           "  %9" PRIu64 "  %s\n",
           bank_mode_names[cfg[i].mode], detect_names[cfg[i].detect], rate,
           x->seconds, x->p50_us, x->p99_us, x->retries, x->timeouts,
           x->deadlocks, x->ok ? "yes" : "NO");
    failed += !x->ok;
  }
  printf("lock timeout: %ld ms, and %ld ms in the detect-off run; latency "
         "includes retries and backoff\n",
         cfg[0].lock_timeout_ms, cfg[BANK_NCOMPARE - 1].lock_timeout_ms);
  bank_print_graph(g);
  for (size_t i = 0; i < BANK_NCOMPARE; i++)
    if (!r[i].ok)
      printf("%s, detect %s: FAIL \u2014 %s\n", bank_mode_names[cfg[i].mode],
             detect_names[cfg[i].detect], r[i].verdict);
  if (failed == 0)
    printf("verdict: OK \u2014 all %d runs passed\n", BANK_NCOMPARE);
  else
    printf("verdict: FAIL \u2014 %zu of %d runs failed\n", failed,
           BANK_NCOMPARE);
}

static void bank_print_compare_json(const bank_opts_t *cfg,
                                    const bank_result_t *r,
                                    const bank_graph_t *g) {
  int ok = 1;
  fputs("{\"compare\": [", stdout);
  for (size_t i = 0; i < BANK_NCOMPARE; i++) {
    fputs(i ? ", {" : "{", stdout);
    bank_json_fields(stdout, &cfg[i], &r[i]);
    fputc('}', stdout);
    ok = ok && r[i].ok;
  }
  printf("], \"ok\": %s, ", ok ? "true" : "false");
  bank_json_graph(stdout, g);
  fputs("}\n", stdout);
}

/*
 * url_detect -- the detection a "detect=NAME" option in url's query asks for,
 * or -1 when there is none. ordo_open applies the query over the options the
 * flags built, so this is what the run really uses and what the report must
 * say; a bad NAME is left for ordo_open to refuse.
 */
static int url_detect(const char *url) {
  const char *q = strchr(url, '?');
  int found = -1;
  while (q != NULL) {
    q++;
    size_t len = strcspn(q, "&");
    if (len > 7 && strncmp(q, "detect=", 7) == 0) {
      for (int i = 0; detect_names[i] != NULL; i++)
        if (strlen(detect_names[i]) == len - 7 &&
            strncmp(q + 7, detect_names[i], len - 7) == 0)
          found = i;
    }
    q = q[len] == '&' ? q + len : NULL;
  }
  return found;
}

/* Settles the attempts per transfer of a configuration whose mode is set. */
static void bank_attempts(bank_opts_t *c) {
  if (c->attempts < 0)
    c->attempts = c->mode == BANK_MODE_NAIVE ? 0 : BANK_DEFAULT_ATTEMPTS;
}

/*
 * bank_configs -- the runs the options ask for, each a full copy of o with
 * its mode, detection, lock timeout and attempts settled: one, or the three
 * of --compare. A detect= in the URL's query wins over the flags (and over
 * --compare's choices), as it does inside ordo_open. Returns how many.
 */
static size_t bank_configs(const bank_opts_t *o,
                           bank_opts_t cfg[BANK_NCOMPARE]) {
  long given = o->lock_timeout_ms;
  int forced = url_detect(o->url);
  for (size_t i = 0; i < BANK_NCOMPARE; i++) {
    cfg[i] = *o;
    cfg[i].lock_timeout_ms = given >= 0 ? given : BANK_DEFAULT_TIMEOUT_MS;
  }
  if (!o->compare) {
    if (forced >= 0)
      cfg[0].detect = forced;
    bank_attempts(&cfg[0]);
    return 1;
  }
  cfg[0].mode = BANK_MODE_ORDERED;
  cfg[0].detect = ORDO_DETECT_IMMEDIATE;
  cfg[1].mode = BANK_MODE_NAIVE;
  cfg[1].detect = ORDO_DETECT_IMMEDIATE;
  cfg[2].mode = BANK_MODE_NAIVE;
  cfg[2].detect = ORDO_DETECT_OFF;
  cfg[2].lock_timeout_ms = given >= 0 ? given : BANK_COMPARE_OFF_TIMEOUT_MS;
  for (size_t i = 0; i < BANK_NCOMPARE; i++) {
    if (forced >= 0)
      cfg[i].detect = forced;
    bank_attempts(&cfg[i]);
  }
  return BANK_NCOMPARE;
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

  bank_opts_t cfg[BANK_NCOMPARE];
  size_t n = bank_configs(&o, cfg);
  /* A PostgreSQL URL runs the ledger on its rows unless --locks advisory
   * asks for ordo's own locks over the postgres:// backend (bank_parse has
   * refused the flags the ledger cannot honour, --compare among them). */
  if (ledger_is_url(o.url) && o.locks != BANK_LOCKS_ADVISORY)
    return ledger_main(&cfg[0]);
  bank_graph_t graph;
  bank_graph_t *g = NULL;
  if (o.graph != NULL) {
    if (bank_graph_open(&graph, o.graph) != CLI_EXIT_OK)
      return CLI_EXIT_FAIL;
    g = &graph;
  }
  bank_result_t r[BANK_NCOMPARE];
  memset(r, 0, sizeof(r));
  int status = CLI_EXIT_OK;
  for (size_t i = 0; i < n && status == CLI_EXIT_OK; i++)
    status =
        bank_once(&cfg[i], g, n == 1 ? "bank" : bank_compare_labels[i], &r[i]);
  if (g != NULL) {
    int gs = bank_graph_close(g);
    if (status == CLI_EXIT_OK)
      status = gs;
  }
  if (status == CLI_EXIT_OK) {
    if (n == 1 && o.json)
      bank_print_json(&cfg[0], &r[0], g);
    else if (n == 1)
      bank_print_human(&cfg[0], &r[0], g);
    else if (o.json)
      bank_print_compare_json(cfg, r, g);
    else
      bank_print_compare(cfg, r, g);
    if (fflush(stdout) != 0) {
      fprintf(stderr, "ordo bank: cannot write the report: %s\n",
              strerror(errno));
      status = CLI_EXIT_FAIL;
    }
  }
  int ok = 1;
  for (size_t i = 0; i < n; i++) {
    ok = ok && r[i].ok;
    free(r[i].backend);
  }
  if (status != CLI_EXIT_OK)
    return status;
  return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* ---- ordo graph -----------------------------------------------------------
 */

/*
 * `ordo graph` prints the wait-for graph of a lock place (ordo_graph_dump).
 * A graph needs a live place with waiters, and a mem:// place lives inside
 * one process, so for now the command has something to show only with
 * --naive-demo, which makes one: three txns in a ring, each holding one key
 * and asking for the next, on a place of their own with detection off (and
 * no sweep), so that the ring stands until the demo cancels the waits.
 */
typedef struct graph_opts_s {
  const char *url; /* default "mem://" */
  int format;      /* an ordo_graph_fmt_t: index in graph_format_names */
  int naive_demo;
} graph_opts_t;

static const char *const graph_format_names[] = {"dot", "json", NULL};
_Static_assert(ORDO_GRAPH_DOT == 0 && ORDO_GRAPH_JSON == 1,
               "graph_format_names is indexed by ordo_graph_fmt_t");

static const cli_flag_t graph_flag_rows[] = {
    {"--backend", NULL, "URL", FLAG_STR, offsetof(graph_opts_t, url), 0, 0,
     NULL,
     "the lock place (default mem://); accepted forms: " CLI_URL_FORMS
     "; --naive-demo opens a place of its own from it, with detection off"},
    {"--format", NULL, "FORMAT", FLAG_ENUM, offsetof(graph_opts_t, format), 0,
     0, graph_format_names,
     "dot (the default: a Graphviz digraph, e.g. for dot -Tpng) or json "
     "(one object: {\"edges\": [{\"from\", \"to\", \"key\", \"mode\", "
     "\"soft\"}], \"waiting\": [txn ids]})"},
    {"--naive-demo", NULL, NULL, FLAG_BOOL, offsetof(graph_opts_t, naive_demo),
     0, 0, NULL,
     "make a deadlock to look at: three txns each hold one key (demo:0, "
     "demo:1, demo:2) and ask for the next, with detection off; once all "
     "three are blocked, print the live wait-for graph, then cancel the "
     "three waits and exit"},
    {"--help", "-h", NULL, FLAG_HELP, 0, 0, 0, NULL,
     "print this help and exit"},
};

static const cli_flags_t graph_flags = {"graph", graph_flag_rows,
                                        sizeof(graph_flag_rows) /
                                            sizeof(graph_flag_rows[0])};

void cli_graph_usage(FILE *f) {
  fputs("usage: ordo graph [--backend URL] [--format dot|json] "
        "[--naive-demo]\n"
        "\n"
        "Prints the wait-for graph of a lock place (ordo_graph_dump) on\n"
        "stdout: an edge \"txn A -> txn B\" for each txn A that waits for a\n"
        "key txn B holds (solid) or for which B is queued ahead of A\n"
        "(dashed, \"(queued)\"), labelled with the key and the mode A asks\n"
        "for. A cycle in it is a deadlock. A graph needs a live place with\n"
        "waiters, and a mem:// place lives inside one process, so for now\n"
        "only --naive-demo, which builds one, has something to show.\n"
        "\n"
        "Options:\n",
        f);
  flags_usage(f, &graph_flags);
  fputs("\n"
        "Exit status: 0 the graph was printed, 1 it could not be (the ring\n"
        "did not form within 5 s, or the backend failed), 2 bad usage, or\n"
        "no --naive-demo.\n"
        "\n"
        "Example:\n"
        "  ordo graph --naive-demo | dot -Tpng -o deadlock.png\n",
        f);
}

#define DEMO_N 3
#define DEMO_FORM_MS 5000 /* bound on the ring forming */
#define DEMO_LOCK_MS                                                           \
  10000 /* bound on each blocked wait, should a cancel miss */

/*
 * One txn of the ring. The main thread begins it and takes key[i] with it,
 * then hands it to its own thread (pthread_create orders the two), which
 * asks for key[i + 1 mod 3] and blocks; rc is written by that thread and
 * read by the main thread after the join.
 */
typedef struct demo_txn_s {
  ordo_txn_t *txn;
  const char *want;
  pthread_t thread;
  int started;
  int rc;
} demo_txn_t;

static void *demo_waiter(void *arg) {
  demo_txn_t *d = arg;
  d->rc =
      ordo_lock(d->txn, d->want, strlen(d->want), ORDO_MODE_X, DEMO_LOCK_MS);
  return NULL;
}

static void demo_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/*
 * graph_demo -- builds the ring on o (opened with detection off), waits
 * until ordo_stats counts the three requests queued (polling every ms, at
 * most DEMO_FORM_MS), prints the graph in format fmt on stdout, then
 * cancels the three waits, joins the threads and ends the txns. Returns the
 * exit status, having printed the one error line when it fails.
 */
static int graph_demo(ordo_t *o, ordo_graph_fmt_t fmt) {
  static const char *const key[DEMO_N] = {"demo:0", "demo:1", "demo:2"};
  demo_txn_t d[DEMO_N];
  memset(d, 0, sizeof(d));
  int status = CLI_EXIT_OK;
  size_t begun = 0;
  for (; begun < DEMO_N && status == CLI_EXIT_OK; begun++) {
    char name[16];
    snprintf(name, sizeof(name), "demo-%zu", begun);
    ordo_txn_options_t to = {.priority = 0, .name = name};
    int rc = ordo_txn_begin(o, &d[begun].txn, &to);
    if (rc == 0)
      rc = ordo_lock(d[begun].txn, key[begun], strlen(key[begun]), ORDO_MODE_X,
                     0);
    if (rc < 0) {
      fprintf(stderr, "ordo graph: cannot set up the demo's txn %zu: %s (%s)\n",
              begun, ordo_strerror(rc), ordo_err_name(rc));
      status = CLI_EXIT_FAIL;
      if (d[begun].txn == NULL)
        break;
    }
  }
  for (size_t i = 0; i < DEMO_N && status == CLI_EXIT_OK; i++) {
    d[i].want = key[(i + 1) % DEMO_N];
    int rc = pthread_create(&d[i].thread, NULL, demo_waiter, &d[i]);
    if (rc != 0) {
      fprintf(stderr, "ordo graph: cannot start the demo's thread %zu: %s\n", i,
              strerror(rc));
      status = CLI_EXIT_FAIL;
      break;
    }
    d[i].started = 1;
  }

  /* Wait for the ring: every thread queued behind the next one's key. */
  uint64_t waiting = 0;
  double give_up = cli_now() + DEMO_FORM_MS / 1000.0;
  while (status == CLI_EXIT_OK) {
    ordo_stats_t s;
    if (ordo_stats(o, &s) < 0) {
      fputs("ordo graph: cannot read the engine's counters (ordo_stats) to "
            "see the ring form\n",
            stderr);
      status = CLI_EXIT_FAIL;
      break;
    }
    waiting = s.waiting;
    if (waiting >= DEMO_N)
      break;
    if (cli_now() >= give_up) {
      fprintf(stderr,
              "ordo graph: the demo's ring did not form within %d ms (%" PRIu64
              " of %d waits queued); is detection turned on in the backend "
              "URL's query?\n",
              DEMO_FORM_MS, waiting, DEMO_N);
      status = CLI_EXIT_FAIL;
      break;
    }
    demo_sleep_ms(1);
  }
  if (status == CLI_EXIT_OK) {
    fflush(stdout);
    int rc = ordo_graph_dump(o, STDOUT_FILENO, fmt);
    if (rc < 0) {
      fprintf(stderr, "ordo graph: cannot dump the wait-for graph: %s (%s)\n",
              ordo_strerror(rc), ordo_err_name(rc));
      status = CLI_EXIT_FAIL;
    }
  }

  /* Undo: cancel each wait (it returns ORDO_ECANCELED holding nothing new),
   * join, release, end. A wait that was not queued yet is bounded by
   * DEMO_LOCK_MS, or got its key once another was cancelled. */
  for (size_t i = 0; i < DEMO_N; i++)
    if (d[i].started)
      ordo_cancel(d[i].txn);
  for (size_t i = 0; i < DEMO_N; i++)
    if (d[i].started)
      pthread_join(d[i].thread, NULL);
  for (size_t i = 0; i < begun; i++)
    if (d[i].txn != NULL)
      ordo_txn_end(d[i].txn);
  return status;
}

int cli_graph_main(int argc, char **argv) {
  graph_opts_t o = {.url = "mem://", .format = ORDO_GRAPH_DOT, .naive_demo = 0};
  switch (flags_parse(&graph_flags, argc, argv, &o)) {
  case PARSE_HELP:
    cli_graph_usage(stdout);
    return CLI_EXIT_OK;
  case PARSE_ERR:
    return CLI_EXIT_USAGE;
  default:
    break;
  }
  if (!o.naive_demo) {
    fputs("ordo graph: nothing to show: a wait-for graph needs a live lock "
          "place with waiters, and a mem:// place lives only inside its own "
          "process; add --naive-demo to build a deadlocked one (see 'ordo "
          "graph --help')\n",
          stderr);
    return CLI_EXIT_USAGE;
  }
  /* The demo's ring must stand: no search, no sweep, no long-wait log. */
  ordo_options_t oo;
  ordo_options_init(&oo);
  oo.detect = ORDO_DETECT_OFF;
  oo.sweep_ms = 0;
  oo.log_wait_ms = 0;
  ordo_t *ordo;
  int status = open_place("graph", o.url, &oo, &ordo);
  if (status != CLI_EXIT_OK)
    return status;
  status = graph_demo(ordo, (ordo_graph_fmt_t)o.format);
  ordo_close(ordo);
  return status;
}
