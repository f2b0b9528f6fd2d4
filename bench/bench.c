/*
 * bench.c -- ordo_bench, the harness that measures ordo against one peer per
 * row and reports the ratio; see README.md.
 *
 * The rows live in one table, bench_rows[] below. For each selected row the
 * harness runs the row's setup hook, one short unrecorded warm-up of each
 * side, then `runs` recorded runs of each side, alternating ordo and the peer
 * so that drift of the machine (frequency, other load) hits both alike. It
 * reports the medians, the min and max of each side, and
 *
 *   ratio = how many times better ordo is:
 *           ordo / peer for a rate (higher is better),
 *           peer / ordo for a time (lower is better),
 *
 * computed from the two medians. A row meets its target when ratio >= target.
 *
 * Output: machine information and one Markdown table on stdout (and a
 * second one of the extra values, for rows that report some, and a third of
 * instruction counts when --instructions gives some), the rows as JSON
 * (schema.json) in the file that --out names, and one progress line per row
 * on stderr when stderr is a terminal.
 *
 * Instruction counts (--count, README.md "Instruction counts"): for rows with
 * count hooks, ordo_bench --count runs exactly --iters iterations of each
 * side between callgrind's client requests, so that valgrind --tool=callgrind
 * --instr-atstart=no counts only those loops and dumps one count per side.
 * scripts/bench.sh turns the dumps into the file that --instructions reads
 * for the timed run, which adds them to the table and the JSON.
 *
 * Exit status: 0 when every row ran (targets missed or not), 1 when a run
 * failed (an ordo error, a balance that was not conserved, a system error),
 * 2 for a usage error such as an unknown row id.
 *
 * Interface: main(), and for the workloads bench_param_int(), bench_now(),
 * bench_sleep(), bench_rm_tree(), bench_program_path(), bench_error(),
 * bench_extra(), bench_count_start(), bench_count_stop() (declared in bench.h).
 */
#include "bench.h"

#include <ordo.h>

#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* callgrind's client requests (the valgrind package's headers). Without
 * them the markers do nothing and --count refuses to run. */
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define BENCH_HAVE_CALLGRIND 1
#endif
#endif
#ifndef BENCH_HAVE_CALLGRIND
#define BENCH_HAVE_CALLGRIND 0
#endif

/* ---- The rows ------------------------------------------------------------ */

/* The bank (bank.c); both sides report the longest wait for the locks. */
#define BANK_ROW(id_, accounts, workers, target_)                              \
  {                                                                            \
    .id = id_,                                                                 \
    .title = "Bank transfers, " #accounts " accounts, " #workers " workers",   \
    .metric = "transfers/s", .higher_is_better = 1,                            \
    .peer_name = "pthread hand-ordered", .target = target_,                    \
    .params = {{"accounts", accounts, NULL}, {"workers", workers, NULL}},      \
    .run_ordo = bank_run_ordo, .run_peer = bank_run_pthread,                   \
    .extras = {"max_wait_us"},                                                 \
  }

/* A deadlock's victim (p99 us) against a plain hand-off; see victim.c. */
#define VICTIM_ROW(id_, waiters, target_)                                      \
  {                                                                            \
    .id = id_,                                                                 \
    .title = "Deadlock victim's return, " #waiters " others waiting",          \
    .metric = "us p99", .higher_is_better = 0,                                 \
    .peer_name = "hand-off to a blocked waiter", .target = target_,            \
    .params = {{"waiters", waiters, NULL},                                     \
               {"cycle_txns", 2, NULL},                                        \
               {"settle_us", 200, NULL}},                                      \
    .setup = victim_setup, .teardown = victim_teardown,                        \
    .run_ordo = victim_run_deadlock, .run_peer = victim_run_handoff,           \
    .extras = {"p50_us", "engine_p99_us", "samples"},                          \
  }

/* ordod against redis-server over the network: acquire+release pairs of
 * random keys of 100,000; see pairs.c. */
#define PAIRS_ROW(id_, title_, peer_, clients, pipeline, kpl, target_)         \
  {                                                                            \
    .id = id_, .title = title_, .metric = "pairs/s", .higher_is_better = 1,    \
    .peer_name = peer_, .target = target_,                                     \
    .params = {{"clients", clients, NULL},                                     \
               {"pipeline", pipeline, NULL},                                   \
               {"keys", 100000, NULL},                                         \
               {"keys_per_lock", kpl, NULL}},                                  \
    .setup = pairs_setup, .teardown = pairs_teardown,                          \
    .run_ordo = pairs_run_ordod, .run_peer = pairs_run_redis,                  \
    .extras = {"busy_pct", "server_cpu_pct", "client_cpu_pct"},                \
  }
#define PAIRS1_ROW(id_, title_, clients, pipeline, target_)                    \
  PAIRS_ROW(id_, "ordod lock+unlock of 1 key, " title_,                        \
            "redis SET NX + Lua DEL", clients, pipeline, 1, target_)

/* One client's lock_all+unlock_all latency on redlock:// (3 nodes, parallel)
 * against a sequential Redlock or one Redis node; see redlock.c. */
#define REDLOCK_ROW(id_, keys_, peer_, run_peer_, kpl, target_)                \
  {                                                                            \
    .id = id_, .title = "redlock:// on 3 nodes, lock+unlock of " keys_,        \
    .metric = "us p50", .higher_is_better = 0, .peer_name = peer_,             \
    .target = target_,                                                         \
    .params = {{"keys_per_lock", kpl, NULL},                                   \
               {"nodes", 3, NULL},                                             \
               {"keys", 100000, NULL}},                                        \
    .setup = redlock_setup, .teardown = redlock_teardown,                      \
    .run_ordo = redlock_run_parallel, .run_peer = run_peer_,                   \
    .extras = {"p99_us", "ops_per_s", "ping_us"},                              \
  }
#define REDLOCK_SEQ_ROW(id_, keys_, kpl)                                       \
  REDLOCK_ROW(id_, keys_, "Redlock sequential (key by key, node by node)",     \
              redlock_run_sequential, kpl, 1.8)
#define REDLOCK_NODE_ROW(id_, keys_, kpl)                                      \
  REDLOCK_ROW(id_, keys_, "one Redis node, one script", redlock_run_node, kpl, \
              0.87)

/* The bank as a ledger on PostgreSQL rows, ordered locking against naive
 * locking that PostgreSQL's detector breaks; see ledger.c. */
#define LEDGER_ROW(id_, accounts, workers)                                     \
  {                                                                            \
    .id = id_,                                                                 \
    .title =                                                                   \
        "PostgreSQL ledger, " #accounts " accounts, " #workers " workers",     \
    .metric = "transfers/s", .higher_is_better = 1,                            \
    .peer_name = "naive order, PostgreSQL's deadlock detector", .target = NAN, \
    .params = {{"accounts", accounts, NULL}, {"workers", workers, NULL}},      \
    .setup = ledger_setup, .teardown = ledger_teardown,                        \
    .run_ordo = ledger_run_ordered, .run_peer = ledger_run_naive,              \
    .extras = {"retries", "deadlocks"}, .fixed_work = 1,                       \
  }

/*
 * Every row the harness knows, in the order it runs them. To add a row, write
 * its two side functions (and setup/teardown if it needs a server or a
 * helper thread), declare them in bench.h, and add one entry here; see
 * README.md. An id, once published, never changes meaning.
 */
static const bench_row_t bench_rows[] = {
    /* The hot pair (issue 22): at least half of hand-ordered mutexes. */
    BANK_ROW("bank_a2_w2", 2, 2, 0.5),
    BANK_ROW("bank_a2_w8", 2, 8, 0.5),
    BANK_ROW("bank_a64_w2", 64, 2, 0.25),
    BANK_ROW("bank_a64_w8", 64, 8, 0.25),
    {
        .id = "uncontended_1key",
        .title = "Uncontended lock+unlock of 1 key",
        .metric = "ns/op",
        .higher_is_better = 0,
        .peer_name = "pthread_mutex",
        .target = 0.33,
        .params = {{"keys", 1, NULL}, {"live_threads", 2, NULL}},
        .setup = uncontended_setup,
        .teardown = uncontended_teardown,
        .run_ordo = uncontended_run_ordo,
        .run_peer = uncontended_run_pthread,
        .count_ordo = uncontended_count_ordo,
        .count_peer = uncontended_count_pthread,
    },
    {
        .id = "detect_hotkey_t64",
        .title = "Detection on vs off, 64 threads, 1 hot key",
        .metric = "ops/s",
        .higher_is_better = 1,
        .peer_name = "detection off",
        .target = 0.95,
        .params = {{"threads", 64, NULL},
                   {"keys", 1, NULL},
                   {"parked", 1, NULL}},
        .run_ordo = detect_hotkey_run_on,
        .run_peer = detect_hotkey_run_off,
        .extras = {"waits_per_op"},
    },
    {
        .id = "detect_manykeys_t64",
        .title = "Detection on vs off, 64 threads, 4096 keys",
        .metric = "ops/s",
        .higher_is_better = 1,
        .peer_name = "detection off",
        .target = 0.95,
        .params = {{"threads", 64, NULL},
                   {"keys", 4096, NULL},
                   {"per_op", 2, NULL},
                   {"parked", 1, NULL}},
        .run_ordo = detect_manykeys_run_on,
        .run_peer = detect_manykeys_run_off,
        .extras = {"waits_per_op"},
    },
    VICTIM_ROW("detect_victim_w10", 10, NAN),
    VICTIM_ROW("detect_victim_w1000", 1000, NAN),
    VICTIM_ROW("detect_victim_w10000", 10000, 0.33),
    PAIRS1_ROW("ordod_pairs_c1_p1", "1 client, pipeline 1", 1, 1, NAN),
    PAIRS1_ROW("ordod_pairs_c50_p1", "50 clients, pipeline 1", 50, 1, 1.0),
    PAIRS1_ROW("ordod_pairs_c1_p16", "1 client, pipeline 16", 1, 16, NAN),
    PAIRS1_ROW("ordod_pairs_c50_p16", "50 clients, pipeline 16", 50, 16, 1.0),
    PAIRS_ROW("ordod_lock16", "ordod lock+unlock of 16 keys at once, 8 clients",
              "redis Lua all-or-nothing", 8, 1, 16, 2.0),
    REDLOCK_SEQ_ROW("redlock_par_vs_seq_k1", "1 key", 1),
    REDLOCK_SEQ_ROW("redlock_par_vs_seq_k4", "4 keys", 4),
    REDLOCK_SEQ_ROW("redlock_par_vs_seq_k16", "16 keys", 16),
    REDLOCK_NODE_ROW("redlock_vs_node_k1", "1 key", 1),
    REDLOCK_NODE_ROW("redlock_vs_node_k4", "4 keys", 4),
    REDLOCK_NODE_ROW("redlock_vs_node_k16", "16 keys", 16),
    LEDGER_ROW("pg_ledger_a2", 2, 8),
    LEDGER_ROW("pg_ledger_a64", 64, 8),
};

/*
 * Families of rows that live in files of their own (issue-sized pieces of
 * the harness: each file defines its bench_table_t). They are declared weak
 * here, so that a family whose file is not in this build is simply absent;
 * every family present is listed after bench_rows[], in this order.
 */
extern const bench_table_t bench_bdb_table __attribute__((weak));
extern const bench_table_t bench_philo_table __attribute__((weak));
extern const bench_table_t bench_memory_table __attribute__((weak));
extern const bench_table_t bench_pgbench_table __attribute__((weak));
extern const bench_table_t bench_shards_table __attribute__((weak));
extern const bench_table_t bench_exec_table __attribute__((weak));
extern const bench_table_t bench_curves_table __attribute__((weak));
extern const bench_table_t bench_etcd_table __attribute__((weak));
extern const bench_table_t bench_rcluster_table __attribute__((weak));

#define BENCH_MAX_ROWS 128

/* Every row of the build, in the order the harness runs them. */
static const bench_row_t *all_rows[BENCH_MAX_ROWS];
static size_t nrows;

static void bench_gather(void) {
  const bench_table_t *const fam[] = {
      &bench_bdb_table,     &bench_philo_table,  &bench_memory_table,
      &bench_pgbench_table, &bench_shards_table, &bench_exec_table,
      &bench_curves_table,  &bench_etcd_table,   &bench_rcluster_table};
  for (size_t i = 0; i < sizeof bench_rows / sizeof bench_rows[0]; i++)
    all_rows[nrows++] = &bench_rows[i];
  for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
    if (!fam[f])
      continue; /* a weak reference to a family not linked in */
    for (size_t i = 0; i < fam[f]->n && nrows < BENCH_MAX_ROWS; i++)
      all_rows[nrows++] = &fam[f]->rows[i];
  }
}

/* ---- Helpers for the workloads ------------------------------------------- */

long long bench_param_int(const bench_row_t *row, const char *name) {
  for (int i = 0; i < BENCH_MAX_PARAMS && row->params[i].name != NULL; i++)
    if (strcmp(row->params[i].name, name) == 0 && row->params[i].str == NULL)
      return row->params[i].value;
  fprintf(stderr, "ordo_bench: %s: no numeric parameter '%s'\n", row->id, name);
  abort();
}

int bench_program_path(char *buf, size_t n, const char *env, const char *built,
                       const char *name) {
  const char *e = getenv(env);
  if (e != NULL && *e != '\0') {
    snprintf(buf, n, "%s", e);
    return access(buf, X_OK) == 0 ? 0 : -1;
  }
  if (built != NULL) {
    snprintf(buf, n, "%s", built);
    if (access(buf, X_OK) == 0)
      return 0;
  }
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0)
    return -1;
  self[len] = '\0';
  char *slash = strrchr(self, '/');
  if (slash == NULL)
    return -1;
  *slash = '\0'; /* build/bench */
  int w = snprintf(buf, n, "%s/../%s", self, name);
  return w > 0 && (size_t)w < n && access(buf, X_OK) == 0 ? 0 : -1;
}

static int bench_rm_entry(const char *path, const struct stat *sb, int flag,
                          struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

void bench_rm_tree(const char *dir) {
  if (dir[0] != '\0')
    nftw(dir, bench_rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bench_sleep(double seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double whole = floor(seconds);
  ts.tv_sec += (time_t)whole;
  ts.tv_nsec += (long)((seconds - whole) * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

/* Where bench_extra() stores the values of the run in progress. */
static const bench_row_t *bench_extra_row;
static double *bench_extra_slot; /* BENCH_MAX_EXTRAS values */

void bench_extra(const bench_row_t *row, const char *name, double v) {
  for (int i = 0; i < BENCH_MAX_EXTRAS && row->extras[i] != NULL; i++)
    if (strcmp(row->extras[i], name) == 0) {
      if (row == bench_extra_row && bench_extra_slot != NULL)
        bench_extra_slot[i] = v;
      return;
    }
  fprintf(stderr, "ordo_bench: %s: no extra value '%s'\n", row->id, name);
  abort();
}

static int bench_nextras(const bench_row_t *row) {
  int n = 0;
  while (n < BENCH_MAX_EXTRAS && row->extras[n] != NULL)
    n++;
  return n;
}

void bench_error(const bench_row_t *row, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "ordo_bench: %s: ", row->id);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* The label of the count in progress ("ordo_bench ROW SIDE ITERS"), and how
 * many times its hook called the markers (each must be exactly once). */
static char bench_count_label[160];
static int bench_count_starts, bench_count_stops;

void bench_count_start(void) {
  bench_count_starts++;
#if BENCH_HAVE_CALLGRIND
  CALLGRIND_ZERO_STATS;
  CALLGRIND_START_INSTRUMENTATION;
#endif
}

void bench_count_stop(void) {
#if BENCH_HAVE_CALLGRIND
  CALLGRIND_STOP_INSTRUMENTATION;
  CALLGRIND_DUMP_STATS_AT(bench_count_label);
#endif
  bench_count_stops++;
}

/* ---- Configuration --------------------------------------------------------
 */

typedef struct bench_cfg_s {
  int quick;
  int runs;       /* recorded runs per side */
  double seconds; /* length of one run */
  const char *out;
  int progress;    /* stderr is a terminal */
  int count;       /* --count instead of timing: 1 for named rows, 2 for all */
  long long iters; /* --iters: counted iterations per side */
  const char *instructions; /* --instructions FILE, or NULL */
  int runs_given;           /* --runs was given: it applies to every row */
  int selected[BENCH_MAX_ROWS];
} bench_cfg_t;

#define BENCH_RUNS_MAX 1000 /* what --runs accepts */
#define BENCH_RUNS_FULL 7
#define BENCH_RUNS_QUICK 3
#define BENCH_SECONDS_FULL 0.5
#define BENCH_SECONDS_QUICK 0.1
#define BENCH_WARMUP_FRACTION 0.25
#define BENCH_RUNS_FIXED_FULL 5 /* fixed-work rows (bench_row_t.fixed_work) */
#define BENCH_RUNS_FIXED_QUICK 1
#define BENCH_COUNT_ITERS 100000 /* --iters' default */
#define BENCH_COUNT_ITERS_MAX 1000000000LL

static void bench_usage(FILE *f) {
  fprintf(
      f,
      "usage: ordo_bench [--quick] [--rows ID,ID...] [--out FILE]\n"
      "                  [--runs N] [--seconds S] [--instructions FILE]\n"
      "                  [--list] [--help]\n"
      "       valgrind --tool=callgrind --instr-atstart=no \\\n"
      "         ordo_bench --count ID,ID...|all [--iters K]\n"
      "\n"
      "Measures ordo against one peer per row, alternating ordo and peer\n"
      "runs, and prints a Markdown table of the medians and ratios.\n"
      "\n"
      "  --quick        %d runs per side of %.2f s (default %d of %.2f s)\n"
      "  --rows LIST    run only these row ids, comma-separated\n"
      "  --out FILE     also write the rows as JSON (bench/schema.json)\n"
      "  --runs N       recorded runs per side (overrides --quick)\n"
      "  --seconds S    length of one run in seconds (overrides --quick)\n"
      "  --instructions FILE\n"
      "                 add callgrind's counts (lines: ROW ordo|peer ITERS\n"
      "                 INSTRUCTIONS) to the table and the JSON\n"
      "  --count LIST   no timing: run --iters iterations of each side of\n"
      "                 these rows (or all) that have count hooks, each\n"
      "                 between callgrind markers, one dump per side\n"
      "  --iters K      counted iterations per side (default %d)\n"
      "  --list         print the row ids and titles, then exit\n"
      "  --help         print this help, then exit\n"
      "\n"
      "ratio = how many times better ordo is: ordo/peer for a rate,\n"
      "peer/ordo for a time. A row meets its target when ratio >= "
      "target.\n"
      "Exit status: 0 all rows ran, 1 a run failed, 2 usage error.\n"
      "`make bench` runs this through scripts/bench.sh, which maps\n"
      "QUICK=1 to --quick and ROWS=id,id to --rows.\n",
      BENCH_RUNS_QUICK, BENCH_SECONDS_QUICK, BENCH_RUNS_FULL,
      BENCH_SECONDS_FULL, BENCH_COUNT_ITERS);
}

static void bench_list_ids(FILE *f, const char *sep) {
  for (size_t i = 0; i < nrows; i++)
    fprintf(f, "%s%s", i ? sep : "", all_rows[i]->id);
}

/*
 * Marks the rows that a comma-separated list names; exits 2 on a bad id. It
 * allocates nothing: under --count, an allocation whose size follows the
 * command line would move later allocations, and with them the
 * instructions that glibc's memcmp spends on a key.
 */
static void bench_select(bench_cfg_t *cfg, const char *list) {
  static const char sep[] = ", \t";
  int any = 0;
  for (const char *tok = list + strspn(list, sep); *tok != '\0';
       tok += strspn(tok, sep)) {
    size_t len = strcspn(tok, sep), i = 0;
    while (i < nrows && (strncmp(all_rows[i]->id, tok, len) != 0 ||
                         all_rows[i]->id[len] != '\0'))
      i++;
    if (i == nrows) {
      fprintf(stderr,
              "ordo_bench: unknown row id '%.*s'; valid ids: ", (int)len, tok);
      bench_list_ids(stderr, ", ");
      fputc('\n', stderr);
      exit(2);
    }
    cfg->selected[i] = 1;
    any = 1;
    tok += len;
  }
  if (!any) {
    fprintf(stderr, "ordo_bench: --rows names no row; valid ids: ");
    bench_list_ids(stderr, ", ");
    fputc('\n', stderr);
    exit(2);
  }
}

static void bench_parse(bench_cfg_t *cfg, int argc, char **argv) {
  enum {
    OPT_QUICK = 1,
    OPT_ROWS,
    OPT_OUT,
    OPT_RUNS,
    OPT_SECONDS,
    OPT_LIST,
    OPT_COUNT,
    OPT_ITERS,
    OPT_INSTRUCTIONS
  };
  static const struct option opts[] = {
      {"quick", no_argument, NULL, OPT_QUICK},
      {"rows", required_argument, NULL, OPT_ROWS},
      {"out", required_argument, NULL, OPT_OUT},
      {"runs", required_argument, NULL, OPT_RUNS},
      {"seconds", required_argument, NULL, OPT_SECONDS},
      {"list", no_argument, NULL, OPT_LIST},
      {"count", required_argument, NULL, OPT_COUNT},
      {"iters", required_argument, NULL, OPT_ITERS},
      {"instructions", required_argument, NULL, OPT_INSTRUCTIONS},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *rows = NULL, *count = NULL;
  int runs = 0;
  double seconds = 0;
  int c;
  char *end;

  memset(cfg, 0, sizeof *cfg);
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case OPT_QUICK:
      cfg->quick = 1;
      break;
    case OPT_ROWS:
      rows = optarg;
      break;
    case OPT_OUT:
      cfg->out = optarg;
      break;
    case OPT_RUNS:
      errno = 0;
      runs = (int)strtol(optarg, &end, 10);
      if (errno != 0 || *end != '\0' || runs < 1 || runs > BENCH_RUNS_MAX) {
        fprintf(stderr, "ordo_bench: --runs wants 1..1000, not '%s'\n", optarg);
        exit(2);
      }
      break;
    case OPT_SECONDS:
      errno = 0;
      seconds = strtod(optarg, &end);
      if (errno != 0 || *end != '\0' || !(seconds >= 0.001) || seconds > 3600) {
        fprintf(stderr, "ordo_bench: --seconds wants 0.001..3600, not '%s'\n",
                optarg);
        exit(2);
      }
      break;
    case OPT_COUNT:
      count = optarg;
      break;
    case OPT_ITERS:
      errno = 0;
      cfg->iters = strtoll(optarg, &end, 10);
      if (errno != 0 || *end != '\0' || cfg->iters < 1 ||
          cfg->iters > BENCH_COUNT_ITERS_MAX) {
        fprintf(stderr, "ordo_bench: --iters wants 1..%lld, not '%s'\n",
                BENCH_COUNT_ITERS_MAX, optarg);
        exit(2);
      }
      break;
    case OPT_INSTRUCTIONS:
      cfg->instructions = optarg;
      break;
    case OPT_LIST:
      for (size_t i = 0; i < nrows; i++)
        printf("%-20s %s (vs %s)\n", all_rows[i]->id, all_rows[i]->title,
               all_rows[i]->peer_name);
      exit(0);
    case 'h':
      bench_usage(stdout);
      exit(0);
    default:
      bench_usage(stderr);
      exit(2);
    }
  }
  if (optind < argc) {
    fprintf(stderr, "ordo_bench: unexpected argument '%s'\n", argv[optind]);
    bench_usage(stderr);
    exit(2);
  }
  cfg->runs = runs ? runs : cfg->quick ? BENCH_RUNS_QUICK : BENCH_RUNS_FULL;
  cfg->runs_given = runs != 0;
  cfg->seconds = seconds > 0  ? seconds
                 : cfg->quick ? BENCH_SECONDS_QUICK
                              : BENCH_SECONDS_FULL;
  cfg->progress = isatty(STDERR_FILENO);
  if (count != NULL) {
    if (rows != NULL) {
      fprintf(stderr, "ordo_bench: --count names its rows; drop --rows\n");
      exit(2);
    }
    cfg->count = strcmp(count, "all") == 0 ? 2 : 1;
    rows = cfg->count == 2 ? NULL : count;
  }
  if (cfg->iters == 0)
    cfg->iters = BENCH_COUNT_ITERS;
  if (rows != NULL)
    bench_select(cfg, rows);
  else
    for (size_t i = 0; i < nrows; i++)
      cfg->selected[i] = !all_rows[i]->opt_in;
}

/* ---- Running a row ---------------------------------------------------------
 */

typedef struct bench_stat_s {
  double median, min, max;
} bench_stat_t;

typedef struct bench_result_s {
  const bench_row_t *row;
  int runs;
  bench_stat_t ordo, peer;
  /* Medians of the extra values (NAN when no run reported one). */
  double xordo[BENCH_MAX_EXTRAS], xpeer[BENCH_MAX_EXTRAS];
  double ratio; /* NAN when a median is 0 */
  int met;      /* -1: the row has no target */
  /* callgrind's instructions per op of each side, from --instructions;
   * ins_iters is 0 when the row has none. */
  double ins_ordo, ins_peer;
  long long ins_iters;
  double wall_s; /* the whole row: setup, warm-up, runs, teardown */
} bench_result_t;

static int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts v in place and summarizes it. */
static bench_stat_t bench_summarize(double *v, int n) {
  bench_stat_t s;
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  s.min = v[0];
  s.max = v[n - 1];
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return s;
}

/* The median of the values of column j of v (runs rows of BENCH_MAX_EXTRAS)
 * that are not NAN; NAN if there is none. */
static double bench_extra_median(const double *v, int runs, int j) {
  double col[BENCH_RUNS_MAX];
  int n = 0;
  for (int i = 0; i < runs; i++)
    if (!isnan(v[i * BENCH_MAX_EXTRAS + j]))
      col[n++] = v[i * BENCH_MAX_EXTRAS + j];
  return n ? bench_summarize(col, n).median : NAN;
}

/* Runs one side with its extras going to slot (BENCH_MAX_EXTRAS values). */
static int bench_side(const bench_row_t *row, bench_side_cb cb, void *state,
                      double seconds, double *out, double *slot) {
  for (int j = 0; j < BENCH_MAX_EXTRAS; j++)
    slot[j] = NAN;
  bench_extra_row = row;
  bench_extra_slot = slot;
  int rc = cb(row, state, seconds, out);
  bench_extra_row = NULL;
  bench_extra_slot = NULL;
  return rc;
}

static void bench_progress(const bench_cfg_t *cfg, size_t k, size_t nsel,
                           const bench_row_t *row, const char *what) {
  if (!cfg->progress)
    return;
  fprintf(stderr, "\r\033[K[%zu/%zu] %s: %s", k, nsel, row->id, what);
  fflush(stderr);
}

/*
 * bench_row_run -- the schedule of one row: setup, a warm-up run of each
 * side, then cfg->runs runs of each side in the order ordo, peer, ordo,
 * peer, ... Returns 0, or -1 when a run failed (already reported).
 */
static int bench_row_run(const bench_cfg_t *cfg0, const bench_row_t *row,
                         size_t k, size_t nsel, bench_result_t *res) {
  bench_cfg_t c = *cfg0;
  const bench_cfg_t *cfg = &c;
  if (row->fixed_work && !cfg0->runs_given)
    c.runs = cfg0->quick ? BENCH_RUNS_FIXED_QUICK : BENCH_RUNS_FIXED_FULL;
  void *state = NULL;
  double *ordo = calloc((size_t)cfg->runs, sizeof *ordo);
  double *peer = calloc((size_t)cfg->runs, sizeof *peer);
  double *xo = calloc((size_t)cfg->runs * BENCH_MAX_EXTRAS, sizeof *xo);
  double *xp = calloc((size_t)cfg->runs * BENCH_MAX_EXTRAS, sizeof *xp);
  double warm, xwarm[BENCH_MAX_EXTRAS];
  char what[64];
  int rc = -1;

  if (ordo == NULL || peer == NULL || xo == NULL || xp == NULL) {
    bench_error(row, "out of memory");
    goto out;
  }
  bench_progress(cfg, k, nsel, row, "setup");
  if (row->setup != NULL && row->setup(row, &state) != 0)
    goto out;
  bench_progress(cfg, k, nsel, row, "warm-up");
  double ws = cfg->seconds * BENCH_WARMUP_FRACTION;
  if (!row->fixed_work &&
      (bench_side(row, row->run_ordo, state, ws, &warm, xwarm) != 0 ||
       bench_side(row, row->run_peer, state, ws, &warm, xwarm) != 0))
    goto teardown;
  for (int i = 0; i < cfg->runs; i++) {
    snprintf(what, sizeof what, "run %d/%d ordo", i + 1, cfg->runs);
    bench_progress(cfg, k, nsel, row, what);
    if (bench_side(row, row->run_ordo, state, cfg->seconds, &ordo[i],
                   &xo[i * BENCH_MAX_EXTRAS]) != 0)
      goto teardown;
    snprintf(what, sizeof what, "run %d/%d peer", i + 1, cfg->runs);
    bench_progress(cfg, k, nsel, row, what);
    if (bench_side(row, row->run_peer, state, cfg->seconds, &peer[i],
                   &xp[i * BENCH_MAX_EXTRAS]) != 0)
      goto teardown;
  }

  res->row = row;
  res->runs = cfg->runs;
  res->ordo = bench_summarize(ordo, cfg->runs);
  res->peer = bench_summarize(peer, cfg->runs);
  for (int j = 0; j < BENCH_MAX_EXTRAS; j++) {
    res->xordo[j] = bench_extra_median(xo, cfg->runs, j);
    res->xpeer[j] = bench_extra_median(xp, cfg->runs, j);
  }
  double num = row->higher_is_better ? res->ordo.median : res->peer.median;
  double den = row->higher_is_better ? res->peer.median : res->ordo.median;
  res->ratio = den > 0 ? num / den : NAN;
  if (isnan(row->target))
    res->met = -1;
  else
    res->met = !isnan(res->ratio) && res->ratio >= row->target;
  if (cfg->progress) {
    snprintf(what, sizeof what, "ratio %.3g\n", res->ratio);
    bench_progress(cfg, k, nsel, row, what);
  }
  rc = 0;

teardown:
  if (row->teardown != NULL)
    row->teardown(row, state);
out:
  if (rc != 0 && cfg->progress)
    fputc('\n', stderr);
  free(ordo);
  free(peer);
  free(xo);
  free(xp);
  return rc;
}

/* ---- Instruction counts ---------------------------------------------------
 */

/*
 * bench_count_side -- one side of a counted row: the hook must call
 * bench_count_start() and bench_count_stop() exactly once each, which makes
 * callgrind dump one count labelled "ordo_bench ROW SIDE ITERS".
 */
static int bench_count_side(const bench_cfg_t *cfg, const bench_row_t *row,
                            bench_count_cb cb, const char *side, void *state) {
  snprintf(bench_count_label, sizeof bench_count_label, "ordo_bench %s %s %lld",
           row->id, side, cfg->iters);
  bench_count_starts = bench_count_stops = 0;
  if (cb(row, state, (uint64_t)cfg->iters) != 0)
    return -1;
  if (bench_count_starts != 1 || bench_count_stops != 1) {
    bench_error(row,
                "the %s count hook called bench_count_start %d and "
                "bench_count_stop %d times (want 1 each)",
                side, bench_count_starts, bench_count_stops);
    return -1;
  }
  printf("counted %s %s %lld\n", row->id, side, cfg->iters);
  fflush(stdout);
  return 0;
}

/*
 * bench_count_main -- ordo_bench --count: for each selected row with count
 * hooks, its setup, the ordo side's counted run, the peer's, its teardown.
 * Rows without hooks are skipped (with a note when named). Returns the exit
 * status.
 */
static int bench_count_main(const bench_cfg_t *cfg) {
  int any = 0;
  if (!BENCH_HAVE_CALLGRIND) {
    fprintf(stderr, "ordo_bench: --count: built without <valgrind/callgrind.h>"
                    " (install valgrind and rebuild)\n");
    return 2;
  }
#if BENCH_HAVE_CALLGRIND
  if (!RUNNING_ON_VALGRIND)
    fprintf(stderr, "ordo_bench: --count: not under valgrind, so nothing is "
                    "counted; run it as valgrind --tool=callgrind "
                    "--instr-atstart=no ordo_bench --count ...\n");
#endif
  for (size_t i = 0; i < nrows; i++) {
    const bench_row_t *row = all_rows[i];
    void *state = NULL;
    if (!cfg->selected[i])
      continue;
    if (row->count_ordo == NULL || row->count_peer == NULL) {
      if (cfg->count == 1)
        fprintf(stderr, "ordo_bench: %s has no count hooks; not counted\n",
                row->id);
      continue;
    }
    any = 1;
    if (row->setup != NULL && row->setup(row, &state) != 0)
      return 1;
    int rc = bench_count_side(cfg, row, row->count_ordo, "ordo", state);
    if (rc == 0)
      rc = bench_count_side(cfg, row, row->count_peer, "peer", state);
    if (row->teardown != NULL)
      row->teardown(row, state);
    if (rc != 0)
      return 1;
  }
  if (!any)
    fprintf(stderr, "ordo_bench: --count: no selected row has count hooks\n");
  return 0;
}

/* One line of the --instructions file: a side's count over iters. */
typedef struct bench_ins_s {
  char id[128];
  int peer; /* 0: the ordo side, 1: the peer */
  long long iters;
  double count;
} bench_ins_t;

#define BENCH_MAX_INS (2 * BENCH_MAX_ROWS)
static bench_ins_t bench_ins[BENCH_MAX_INS];
static size_t bench_nins;

/*
 * bench_load_instructions -- reads the --instructions file before any row
 * runs, one count per line, "ROW ordo|peer ITERS INSTRUCTIONS" ('#' starts a
 * comment). Returns 0, or -1 for a file that cannot be read or a malformed
 * line (reported).
 */
static int bench_load_instructions(const char *path) {
  FILE *f = fopen(path, "r");
  char line[512], side[16];
  int lineno = 0;

  if (f == NULL) {
    fprintf(stderr, "ordo_bench: %s: %s\n", path, strerror(errno));
    return -1;
  }
  while (fgets(line, sizeof line, f) != NULL) {
    bench_ins_t *e = &bench_ins[bench_nins];
    char *hash = strchr(line, '#');
    int used = 0;
    lineno++;
    if (hash != NULL)
      *hash = '\0';
    if (sscanf(line, " %127s", e->id) != 1)
      continue; /* blank */
    if (bench_nins == BENCH_MAX_INS ||
        sscanf(line, " %127s %15s %lld %lf %n", e->id, side, &e->iters,
               &e->count, &used) != 4 ||
        line[used] != '\0' || e->iters < 1 || !(e->count >= 0) ||
        (strcmp(side, "ordo") != 0 && strcmp(side, "peer") != 0)) {
      fprintf(stderr,
              "ordo_bench: %s:%d: want ROW ordo|peer ITERS INSTRUCTIONS\n",
              path, lineno);
      fclose(f);
      return -1;
    }
    e->peer = strcmp(side, "peer") == 0;
    bench_nins++;
  }
  fclose(f);
  return 0;
}

/* Gives each result whose row has both sides' counts, over the same number
 * of iterations, its instructions per op. Later lines win. */
static void bench_attach_instructions(bench_result_t *res, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const bench_ins_t *side[2] = {NULL, NULL};
    for (size_t k = 0; k < bench_nins; k++)
      if (strcmp(bench_ins[k].id, res[i].row->id) == 0)
        side[bench_ins[k].peer] = &bench_ins[k];
    if (side[0] == NULL || side[1] == NULL || side[0]->iters != side[1]->iters)
      continue;
    res[i].ins_iters = side[0]->iters;
    res[i].ins_ordo = side[0]->count / (double)side[0]->iters;
    res[i].ins_peer = side[1]->count / (double)side[1]->iters;
  }
}

/* ---- Output -----------------------------------------------------------------
 */

/* A value for the table: k/M/G suffixes for large values (rates). */
static const char *bench_fmt(char *buf, size_t n, double v) {
  if (isnan(v))
    snprintf(buf, n, "-");
  else if (v >= 1e9)
    snprintf(buf, n, "%.2fG", v / 1e9);
  else if (v >= 1e6)
    snprintf(buf, n, "%.2fM", v / 1e6);
  else if (v >= 1e4)
    snprintf(buf, n, "%.1fk", v / 1e3);
  else if (v >= 1)
    snprintf(buf, n, "%.1f", v);
  else
    snprintf(buf, n, "%.3g", v);
  return buf;
}

static void bench_params_text(char *buf, size_t n, const bench_row_t *row) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < BENCH_MAX_PARAMS && row->params[i].name != NULL; i++) {
    const bench_param_t *p = &row->params[i];
    int w = p->str != NULL ? snprintf(buf + used, n - used, "%s%s=%s",
                                      i ? " " : "", p->name, p->str)
                           : snprintf(buf + used, n - used, "%s%s=%lld",
                                      i ? " " : "", p->name, p->value);
    if (w < 0 || (size_t)w >= n - used)
      return;
    used += (size_t)w;
  }
}

static void bench_print_header(const bench_cfg_t *cfg) {
  struct utsname u;
  char date[64] = "?";
  time_t now = time(NULL);
  struct tm tm;

  if (gmtime_r(&now, &tm) != NULL)
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (uname(&u) != 0)
    memset(&u, 0, sizeof u);
  printf("## ordo bench\n\n");
  printf("- date: %s\n", date);
  printf("- machine: %s %s %s, nproc %ld\n", u.sysname, u.release, u.machine,
         sysconf(_SC_NPROCESSORS_ONLN));
  printf("- ordo %s; %s mode: runs per side %d, %.2f s each, alternating\n",
         ordo_version(), cfg->quick ? "quick" : "full", cfg->runs,
         cfg->seconds);
  printf("- ratio: how many times better ordo is (ordo/peer for a rate, "
         "peer/ordo for a time), from the medians; met when ratio >= "
         "target\n\n");
}

static void bench_print_table(const bench_result_t *res, size_t n) {
  char a[32], b[32], c[32], d[32], e[32], f[32], params[128], target[32];
  char ratio[32];

  printf("| row | params | metric | ordo | peer | ratio | min–max | target "
         "| met |\n");
  printf("|---|---|---|---:|---:|---:|---|---:|---|\n");
  for (size_t i = 0; i < n; i++) {
    const bench_result_t *r = &res[i];
    bench_params_text(params, sizeof params, r->row);
    if (isnan(r->row->target))
      snprintf(target, sizeof target, "-");
    else
      snprintf(target, sizeof target, ">= %.2f", r->row->target);
    if (isnan(r->ratio))
      snprintf(ratio, sizeof ratio, "-");
    else
      snprintf(ratio, sizeof ratio, "%.3g", r->ratio);
    printf("| %s (vs %s) | %s | %s | %s | %s | %s | ordo %s–%s; peer "
           "%s–%s | %s | %s |\n",
           r->row->title, r->row->peer_name, params, r->row->metric,
           bench_fmt(a, sizeof a, r->ordo.median),
           bench_fmt(b, sizeof b, r->peer.median), ratio,
           bench_fmt(c, sizeof c, r->ordo.min),
           bench_fmt(d, sizeof d, r->ordo.max),
           bench_fmt(e, sizeof e, r->peer.min),
           bench_fmt(f, sizeof f, r->peer.max), target,
           r->met < 0 ? "-"
           : r->met   ? "yes"
                      : "no");
  }
}

/* The extra values, when a row that ran has any: one line per value. */
static void bench_print_extras(const bench_result_t *res, size_t n) {
  char a[32], b[32];
  int any = 0;
  for (size_t i = 0; i < n; i++) {
    const bench_row_t *row = res[i].row;
    for (int j = 0; j < bench_nextras(row); j++) {
      if (!any)
        printf("\nExtra values (medians of the runs):\n\n"
               "| row | value | ordo | peer |\n|---|---|---:|---:|\n");
      any = 1;
      printf("| %s | %s | %s | %s |\n", row->id, row->extras[j],
             bench_fmt(a, sizeof a, res[i].xordo[j]),
             bench_fmt(b, sizeof b, res[i].xpeer[j]));
    }
  }
}

/* The instruction counts, when a row that ran has them. */
static void bench_print_instructions(const bench_result_t *res, size_t n) {
  int any = 0;
  for (size_t i = 0; i < n; i++) {
    const bench_result_t *r = &res[i];
    if (r->ins_iters == 0)
      continue;
    if (!any)
      printf("\nInstructions per op (callgrind, exact counts of a fixed "
             "number of iterations of each side; ratio = peer/ordo):\n\n"
             "| row | iterations | ordo | peer | ratio |\n"
             "|---|---:|---:|---:|---:|\n");
    any = 1;
    printf("| %s | %lld | %.1f | %.1f | %.3g |\n", r->row->id, r->ins_iters,
           r->ins_ordo, r->ins_peer,
           r->ins_ordo > 0 ? r->ins_peer / r->ins_ordo : NAN);
  }
}

static void bench_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s != '\0'; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

/* A JSON number, or null for a value JSON cannot hold. */
static void bench_json_num(FILE *f, double v) {
  if (isfinite(v))
    fprintf(f, "%.10g", v);
  else
    fputs("null", f);
}

static void bench_json_row(FILE *f, const bench_result_t *r) {
  const bench_row_t *row = r->row;
  fputs("  {\n    \"id\": ", f);
  bench_json_str(f, row->id);
  fputs(",\n    \"row\": ", f);
  bench_json_str(f, row->title);
  fputs(",\n    \"params\": {", f);
  for (int i = 0; i < BENCH_MAX_PARAMS && row->params[i].name != NULL; i++) {
    fputs(i ? ", " : "", f);
    bench_json_str(f, row->params[i].name);
    fputs(": ", f);
    if (row->params[i].str != NULL)
      bench_json_str(f, row->params[i].str);
    else
      fprintf(f, "%lld", row->params[i].value);
  }
  fputs("},\n    \"metric\": ", f);
  bench_json_str(f, row->metric);
  fputs(",\n    \"ordo\": ", f);
  bench_json_num(f, r->ordo.median);
  fputs(",\n    \"peer_name\": ", f);
  bench_json_str(f, row->peer_name);
  fputs(",\n    \"peer\": ", f);
  bench_json_num(f, r->peer.median);
  fputs(",\n    \"ratio\": ", f);
  bench_json_num(f, r->ratio);
  fputs(",\n    \"min\": {\"ordo\": ", f);
  bench_json_num(f, r->ordo.min);
  fputs(", \"peer\": ", f);
  bench_json_num(f, r->peer.min);
  fputs("},\n    \"max\": {\"ordo\": ", f);
  bench_json_num(f, r->ordo.max);
  fputs(", \"peer\": ", f);
  bench_json_num(f, r->peer.max);
  fputs("}", f);
  if (bench_nextras(row) > 0) {
    fputs(",\n    \"extra\": {", f);
    for (int j = 0; j < bench_nextras(row); j++) {
      fputs(j ? ", " : "", f);
      bench_json_str(f, row->extras[j]);
      fputs(": {\"ordo\": ", f);
      bench_json_num(f, r->xordo[j]);
      fputs(", \"peer\": ", f);
      bench_json_num(f, r->xpeer[j]);
      fputs("}", f);
    }
    fputs("}", f);
  }
  if (r->ins_iters > 0) {
    fputs(",\n    \"instructions\": {\"ordo\": ", f);
    bench_json_num(f, r->ins_ordo);
    fputs(", \"peer\": ", f);
    bench_json_num(f, r->ins_peer);
    fputs(", \"ratio\": ", f);
    bench_json_num(f, r->ins_ordo > 0 ? r->ins_peer / r->ins_ordo : NAN);
    fprintf(f, ", \"iterations\": %lld}", r->ins_iters);
  }
  fprintf(f, ",\n    \"wall_s\": %.3f", r->wall_s);
  fprintf(f, ",\n    \"runs\": %d,\n    \"target\": ", r->runs);
  bench_json_num(f, row->target);
  fprintf(f, ",\n    \"met\": %s\n  }",
          r->met < 0 ? "null"
          : r->met   ? "true"
                     : "false");
}

/* On stderr: the rows' time in all, and the slowest rows (where the time of
 * `make bench` goes). */
static void bench_print_walls(const bench_result_t *res, size_t n,
                              double total) {
  size_t idx[BENCH_MAX_ROWS];
  for (size_t i = 0; i < n; i++) {
    size_t j = i;
    for (; j > 0 && res[idx[j - 1]].wall_s < res[i].wall_s; j--)
      idx[j] = idx[j - 1];
    idx[j] = i;
  }
  fprintf(stderr, "ordo_bench: %zu rows in %.1f s; slowest:", n, total);
  for (size_t j = 0; j < n && j < 5; j++)
    fprintf(stderr, "%s %s %.1f s", j ? "," : "", res[idx[j]].row->id,
            res[idx[j]].wall_s);
  fputc('\n', stderr);
}

/* Writes the rows to path through a temporary file and a rename. */
static int bench_write_json(const char *path, const bench_result_t *res,
                            size_t n) {
  size_t len = strlen(path) + 5;
  char *tmp = malloc(len);
  if (tmp == NULL)
    return -1;
  snprintf(tmp, len, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (f == NULL) {
    fprintf(stderr, "ordo_bench: %s: %s\n", tmp, strerror(errno));
    free(tmp);
    return -1;
  }
  fputs("[\n", f);
  for (size_t i = 0; i < n; i++) {
    bench_json_row(f, &res[i]);
    fputs(i + 1 < n ? ",\n" : "\n", f);
  }
  fputs("]\n", f);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
    fprintf(stderr, "ordo_bench: cannot write %s: %s\n", path, strerror(errno));
    remove(tmp);
    free(tmp);
    return -1;
  }
  free(tmp);
  return 0;
}

int main(int argc, char **argv) {
  bench_cfg_t cfg;
  static bench_result_t res[BENCH_MAX_ROWS];
  size_t nsel = 0, n = 0;

  bench_gather();
  bench_parse(&cfg, argc, argv);
  if (cfg.count)
    return bench_count_main(&cfg);
  if (cfg.instructions != NULL && bench_load_instructions(cfg.instructions))
    return 2;
  for (size_t i = 0; i < nrows; i++)
    nsel += (size_t)cfg.selected[i];
  bench_print_header(&cfg);
  fflush(stdout);

  double t0 = bench_now();
  for (size_t i = 0; i < nrows; i++) {
    if (!cfg.selected[i])
      continue;
    double r0 = bench_now();
    if (bench_row_run(&cfg, all_rows[i], n + 1, nsel, &res[n]) != 0) {
      fprintf(stderr, "ordo_bench: row %s failed; no results written\n",
              all_rows[i]->id);
      return 1;
    }
    res[n].wall_s = bench_now() - r0;
    n++;
  }
  bench_print_walls(res, n, bench_now() - t0);

  bench_attach_instructions(res, n);
  bench_print_table(res, n);
  bench_print_extras(res, n);
  bench_print_instructions(res, n);
  fflush(stdout);
  if (cfg.out != NULL && bench_write_json(cfg.out, res, n) != 0)
    return 1;
  return 0;
}
