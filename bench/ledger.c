/*
 * ledger.c -- the bank check as a ledger on real PostgreSQL rows, transfers
 * that lock their two rows in one ordered statement against transfers that
 * lock them one at a time and let PostgreSQL find the deadlocks; see
 * README.md (rows pg_ledger_*).
 *
 * What is measured is the build's own `ordo bank --backend postgres://...`
 * (src/cli/ledger.c), run as a child process per run:
 *
 *   ordered  `ordo bank --backend URL --accounts A --workers W --transfers N
 *            --json`: each transfer locks both rows with one SELECT ...
 *            WHERE id = ANY($1) ORDER BY id FOR UPDATE, so no deadlock can
 *            form (the ledger fails the run if PostgreSQL counts one)
 *   naive    the same with --naive: from, then to, one statement each; the
 *            crossing transfers deadlock, PostgreSQL's detector (after its
 *            deadlock_timeout, 10ms here) rolls a victim back, and the
 *            ledger retries it
 *
 * The first row's setup starts one throw-away cluster with the test fixture
 * (tests/integration/pg_fixture.sh in its wrapper mode: fsync off,
 * deadlock_timeout 10ms, role ordo), creates one database per side
 * (ledger_ordered, ledger_naive) so that the two sides' tables and
 * pg_stat_database counters never mix, and calibrates: one run of each side
 * with LEDGER_CALIBRATE_FIRST transfers each way, then (when that took less
 * than LEDGER_CALIBRATE_S) one with LEDGER_CALIBRATE, gives that side's
 * rate. The cluster outlives its row: the next PostgreSQL row takes it
 * over with its databases (ledger_kept), and the last is stopped at exit
 * as a teardown would stop it. A run of
 * `seconds` then makes N = rate x seconds / 2 transfers each way (2N in
 * all), N clamped to [LEDGER_N_MIN (LEDGER_N_MIN_QUICK for quick runs),
 * LEDGER_N_MAX], so a slow side's short
 * runs still make enough transfers to mean something. The ledger resets its
 * own schema at the start of each run.
 *
 * The fixture's wrapper runs `bash -c 'echo "$PG_URL" > FILE; read'` with
 * its stdin on a pipe whose write end only this process holds: the setup
 * reads the cluster's URL from FILE, and the teardown closes the pipe, so
 * the read ends, the wrapper stops the cluster and exits, all by itself (and
 * just as well when the harness dies). A signal would not do: timeout(1),
 * which the wrapper runs the command under, moves itself into a process
 * group of its own, so a SIGTERM to the wrapper's group stops the cluster
 * but leaves timeout and its command behind. The wrapper is in a process
 * group of its own all the same, so that the teardown's last resort
 * (SIGTERM, then SIGKILL, each bounded) reaches the fixture's shell and its
 * helpers.
 *
 * Each child (the fixture, psql, ordo) gets stdin from /dev/null (the
 * fixture: the pipe), its stdout and stderr captured (the fixture's in a
 * log), and a bound: a run that outlives LEDGER_RUN_S is killed and fails.
 * The run's JSON is one flat object; its fields "transfers", "seconds",
 * "retries", "deadlocks" and "ok" are read with a small scanner of our own.
 * The result is transfers / seconds (the ledger's own time of its transfer
 * phase, without connecting or resetting); "ok" must be true and
 * "transfers" 2N, or the run fails. Extras: retries (rolled-back attempts
 * retried) and deadlocks (pg_stat_database's count, after minus before),
 * per run.
 *
 * Interface:
 *   ledger_setup(), ledger_teardown()   the cluster, its databases, the
 *                                       calibration
 *   ledger_run_ordered()                one ordered run
 *   ledger_run_naive()                  one naive run
 * and, for pgbench.c's rows, which run pgbench on the same cluster:
 *   ledger_exec(), ledger_status_text() a bounded child process, captured
 *   ledger_side_url(), _rate(),         a side's database, its calibrated
 *   ledger_side_transfers()             rate, the transfers of a run
 *   ledger_side_bank()                  one `ordo bank` of a side
 * and, for shards.c's cycle rows, which only need PostgreSQL itself:
 *   ledger_cluster_setup()              the cluster, without calibrating
 *   ledger_cluster_url()                its database ordo (superuser ordo)
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define LEDGER_FIXTURE_TIMEOUT "3600" /* PG_FIXTURE_TIMEOUT for the wrapper */
#define LEDGER_START_S 60.0           /* bound on the cluster's start */
#define LEDGER_STOP_S 60.0    /* bound on its stop once the pipe is closed */
#define LEDGER_SIGNAL_S 10.0  /* then SIGTERM, this long before SIGKILL */
#define LEDGER_PSQL_S 30.0    /* bound on one psql */
#define LEDGER_RUN_S 120.0    /* bound on one `ordo bank` */
#define LEDGER_CALIBRATE 200L /* transfers each way of the calibration */
/* A side first calibrates on this many each way, and only when that took
 * less than LEDGER_CALIBRATE_S on LEDGER_CALIBRATE: the naive side of two
 * accounts makes about 34 transfers/s, so 400 would take 12 s. */
#define LEDGER_CALIBRATE_FIRST 20L
#define LEDGER_CALIBRATE_S 0.5
#define LEDGER_N_MIN 50L /* transfers each way of a run, at least */
/* ...and in quick mode's runs (0.1 s): the naive side of two accounts makes
 * about 34 transfers/s, so 50 each way made its row 9 s of the minute. */
#define LEDGER_N_MIN_QUICK 20L
#define LEDGER_N_MAX 20000L /* and at most */
#define LEDGER_URL_MAX 512
#define LEDGER_OUT_MAX 65536 /* captured stdout of one child */
#define LEDGER_ERR_MAX 4096  /* captured stderr of one child */

typedef enum ledger_side_e {
  LEDGER_ORDERED = 0,
  LEDGER_NAIVE = 1,
} ledger_side;

static const char *const ledger_side_name[2] = {"ordered", "naive"};
static const char *const ledger_side_db[2] = {"ledger_ordered", "ledger_naive"};

typedef struct ledger_state_s {
  pid_t fixture; /* the wrapper, leader of its process group; 0 once gone */
  int hold;      /* write end of the wrapper's stdin; -1 once closed */
  char dir[PATH_MAX];               /* temporary folder: url, fixture.log */
  char cli[PATH_MAX];               /* the ordo binary */
  char url[LEDGER_URL_MAX];         /* the cluster's database ordo */
  char side_url[2][LEDGER_URL_MAX]; /* one database per side */
  double rate[2];                   /* calibration, transfers/s */
} ledger_state_t;

/* ---- Paths ---------------------------------------------------------------
 */

/* The ordo binary: $ORDO_BENCH_ORDO_CLI, the build's (from CMake), or the
 * ordo beside the folder of this program. 0, or -1. */
static int ledger_cli_path(char *buf, size_t n) {
#ifdef ORDO_BENCH_ORDO_CLI
  const char *built = ORDO_BENCH_ORDO_CLI;
#else
  const char *built = NULL;
#endif
  return bench_program_path(buf, n, "ORDO_BENCH_ORDO_CLI", built, "ordo");
}

/* tests/integration/pg_fixture.sh of the source tree: $ORDO_BENCH_SOURCE_DIR
 * or the one CMake passes. 0, or -1. */
static int ledger_fixture_path(char *buf, size_t n) {
  const char *root = getenv("ORDO_BENCH_SOURCE_DIR");
#ifdef ORDO_BENCH_SOURCE_DIR
  if (root == NULL || *root == '\0')
    root = ORDO_BENCH_SOURCE_DIR;
#endif
  if (root == NULL || *root == '\0')
    return -1;
  int w = snprintf(buf, n, "%s/tests/integration/pg_fixture.sh", root);
  return w > 0 && (size_t)w < n && access(buf, R_OK) == 0 ? 0 : -1;
}

/* url with its database (the path after host[:port]) replaced by db. 0, or
 * -1 if url has no path or the result does not fit. */
static int ledger_url_with_db(const char *url, const char *db, char *buf,
                              size_t n) {
  const char *scheme = strstr(url, "://");
  if (scheme == NULL)
    return -1;
  const char *path = strchr(scheme + 3, '/');
  if (path == NULL)
    return -1;
  const char *query = path + strcspn(path, "?#");
  int w = snprintf(buf, n, "%.*s/%s%s", (int)(path - url), url, db, query);
  return w > 0 && (size_t)w < n ? 0 : -1;
}

/* ---- Children -------------------------------------------------------------
 */

/* Appends what fits of src[0..len) to buf (cap bytes, *used so far), always
 * leaving it terminated. */
static void ledger_append(char *buf, size_t cap, size_t *used, const char *src,
                          size_t len) {
  size_t room = cap - 1 - *used;
  if (len > room)
    len = room;
  memcpy(buf + *used, src, len);
  *used += len;
  buf[*used] = '\0';
}

/* Waits at most `seconds` for pid to end: 1 with *status set, or 0. */
static int ledger_wait(pid_t pid, double seconds, int *status) {
  double deadline = bench_now() + seconds;
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD))
      return 1;
    if (bench_now() >= deadline)
      return 0;
    bench_sleep(0.01);
  }
}

/*
 * ledger_exec -- runs argv (argv[0] looked up in PATH) with stdin from
 * /dev/null, its stdout into out and its stderr into err (each truncated to
 * its size), bounded by timeout seconds, and stores its wait status in
 * *status. Returns 0 when it ended by itself; -1 after reporting with
 * bench_error() (a system error, or it took too long and was killed).
 */
int ledger_exec(const bench_row_t *row, char *const argv[], double timeout,
                char *out, size_t outcap, char *err, size_t errcap,
                int *status) {
  int op[2] = {-1, -1}, ep[2] = {-1, -1};
  int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  size_t on = 0, en = 0;
  out[0] = '\0';
  err[0] = '\0';
  if (in < 0 || pipe2(op, O_CLOEXEC) != 0 || pipe2(ep, O_CLOEXEC) != 0) {
    bench_error(row, "%s: pipe or /dev/null: %s", argv[0], strerror(errno));
    goto fail;
  }
  fflush(NULL);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    bench_error(row, "fork: %s", strerror(errno));
    goto fail;
  }
  if (pid == 0) {
    /* The child: async-signal-safe calls only. A harness that dies takes
     * its run with it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(126);
    if (dup2(in, STDIN_FILENO) < 0 || dup2(op[1], STDOUT_FILENO) < 0 ||
        dup2(ep[1], STDERR_FILENO) < 0)
      _exit(126);
    execvp(argv[0], argv);
    static const char msg[] = "exec failed: not found or not executable\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
  }
  close(in);
  close(op[1]);
  close(ep[1]);
  in = op[1] = ep[1] = -1;

  double deadline = bench_now() + timeout;
  struct pollfd pf[2] = {{op[0], POLLIN, 0}, {ep[0], POLLIN, 0}};
  char chunk[4096];
  while (pf[0].fd >= 0 || pf[1].fd >= 0) {
    double left = deadline - bench_now();
    if (left <= 0)
      break;
    int r = poll(pf, 2, (int)ceil(left * 1000));
    if (r < 0 && errno != EINTR) {
      bench_error(row, "poll: %s", strerror(errno));
      break;
    }
    for (int i = 0; r > 0 && i < 2; i++) {
      if (pf[i].fd < 0 || pf[i].revents == 0)
        continue;
      ssize_t got = read(pf[i].fd, chunk, sizeof chunk);
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0) {
        close(pf[i].fd);
        pf[i].fd = -1; /* poll ignores it from now on */
      } else if (i == 0) {
        ledger_append(out, outcap, &on, chunk, (size_t)got);
      } else {
        ledger_append(err, errcap, &en, chunk, (size_t)got);
      }
    }
  }
  int open_fds = (pf[0].fd >= 0) + (pf[1].fd >= 0);
  for (int i = 0; i < 2; i++)
    if (pf[i].fd >= 0)
      close(pf[i].fd);
  op[0] = ep[0] = -1;
  double left = deadline - bench_now();
  if (open_fds == 0 && ledger_wait(pid, left > 0 ? left : 0, status))
    return 0;
  kill(pid, SIGKILL);
  waitpid(pid, status, 0);
  bench_error(row, "%s did not finish within %.0f s; killed", argv[0], timeout);
  if (err[0] != '\0')
    fprintf(stderr, "--- its stderr ---\n%s---\n", err);
  return -1;

fail:
  for (int i = 0; i < 2; i++) {
    if (op[i] >= 0)
      close(op[i]);
    if (ep[i] >= 0)
      close(ep[i]);
  }
  if (in >= 0)
    close(in);
  return -1;
}

/* "status N" or "signal N" for a wait status. */
const char *ledger_status_text(int status, char *buf, size_t n) {
  if (WIFEXITED(status))
    snprintf(buf, n, "status %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(buf, n, "signal %d", WTERMSIG(status));
  else
    snprintf(buf, n, "wait status %#x", (unsigned)status);
  return buf;
}

/* ---- The run's JSON ------------------------------------------------------
 */

static const char *ledger_json_ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    p++;
  return p;
}

/* p at a '"': the character after the closing one, or NULL. The contents go
 * to buf (cap >= 1 bytes, truncated, an escape's backslash dropped). */
static const char *ledger_json_str(const char *p, char *buf, size_t cap) {
  size_t n = 0;
  if (*p++ != '"')
    return NULL;
  for (; *p != '"'; p++) {
    if (*p == '\0')
      return NULL;
    if (*p == '\\' && *++p == '\0')
      return NULL;
    if (n + 1 < cap)
      buf[n++] = *p;
  }
  buf[n] = '\0';
  return p + 1;
}

/* p at a value: the character after it, or NULL. Nested arrays and objects
 * are skipped whole (the ledger prints none, but a later field may). */
static const char *ledger_json_skip(const char *p) {
  char scratch[1];
  int depth = 0;
  do {
    p = ledger_json_ws(p);
    if (*p == '"') {
      p = ledger_json_str(p, scratch, sizeof scratch);
      if (p == NULL)
        return NULL;
      continue;
    }
    if (*p == '\0')
      return NULL;
    if (*p == '[' || *p == '{')
      depth++;
    else if (*p == ']' || *p == '}')
      depth--;
    else if (depth == 0 && *p != ',') {
      /* A number, true, false or null: up to the next delimiter. */
      p += strcspn(p, ",}] \t\r\n");
      continue;
    }
    p++;
  } while (depth > 0);
  return p;
}

/*
 * ledger_json_parse -- reads the fields of r from the flat JSON object in
 * text (top-level keys only, so text in a string value cannot pass for a
 * field). 0 when all five are there with the right types, else -1 with the
 * first missing or malformed one named in *bad.
 */
static int ledger_json_parse(const char *text, ledger_report_t *r,
                             const char **bad) {
  static const char *const nums[] = {"transfers", "seconds", "retries",
                                     "deadlocks"};
  double *slot[] = {&r->transfers, &r->seconds, &r->retries, &r->deadlocks};
  int seen = 0; /* bit i: nums[i]; bit 4: ok */
  char key[64];
  const char *p = ledger_json_ws(text);

  memset(r, 0, sizeof *r);
  *bad = "{";
  if (*p++ != '{')
    return -1;
  for (p = ledger_json_ws(p); *p != '}'; p = ledger_json_ws(p)) {
    *bad = "a key";
    if ((p = ledger_json_str(p, key, sizeof key)) == NULL)
      return -1;
    p = ledger_json_ws(p);
    if (*p++ != ':')
      return -1;
    p = ledger_json_ws(p);
    const char *value = p;
    if ((p = ledger_json_skip(p)) == NULL)
      return -1;
    for (int i = 0; i < 4; i++)
      if (strcmp(key, nums[i]) == 0) {
        char *end;
        *bad = nums[i];
        *slot[i] = strtod(value, &end);
        if (end != p || !isfinite(*slot[i]))
          return -1;
        seen |= 1 << i;
      }
    if (strcmp(key, "ok") == 0) {
      *bad = "ok";
      if (strncmp(value, "true", 4) == 0 && value + 4 == p)
        r->ok = 1;
      else if (!(strncmp(value, "false", 5) == 0 && value + 5 == p))
        return -1;
      seen |= 1 << 4;
    }
    if (strcmp(key, "verdict") == 0 && *value == '"')
      ledger_json_str(value, r->verdict, sizeof r->verdict);
    p = ledger_json_ws(p);
    if (*p == ',')
      p++;
    else if (*p != '}') {
      *bad = "a ',' or '}'";
      return -1;
    }
  }
  for (int i = 0; i < 5; i++)
    if (!(seen & 1 << i)) {
      *bad = i < 4 ? nums[i] : "ok";
      return -1;
    }
  return 0;
}

/* ---- One run of `ordo bank` -----------------------------------------------
 */

/*
 * ledger_bank -- runs one side with n transfers each way and fills *rep.
 * Returns 0 when the run passed (exit status 0, "ok": true, 2n transfers in
 * a positive time); -1 after reporting.
 */
static int ledger_bank(const bench_row_t *row, const ledger_state_t *st,
                       ledger_side side, long n, ledger_report_t *rep) {
  char accounts[24], workers[24], transfers[24], why[48];
  char err[LEDGER_ERR_MAX];
  char *out = malloc(LEDGER_OUT_MAX); /* too big for the stack's comfort */
  const char *bad = NULL;
  int status = 0, rc = -1;

  if (out == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  snprintf(accounts, sizeof accounts, "%lld", bench_param_int(row, "accounts"));
  snprintf(workers, sizeof workers, "%lld", bench_param_int(row, "workers"));
  snprintf(transfers, sizeof transfers, "%ld", n);
  char *argv[] = {(char *)st->cli,
                  "bank",
                  "--backend",
                  (char *)st->side_url[side],
                  "--accounts",
                  accounts,
                  "--workers",
                  workers,
                  "--transfers",
                  transfers,
                  "--json",
                  side == LEDGER_NAIVE ? "--naive" : NULL,
                  NULL};
  if (ledger_exec(row, argv, LEDGER_RUN_S, out, LEDGER_OUT_MAX, err, sizeof err,
                  &status) != 0)
    goto out;
  int parsed = ledger_json_parse(out, rep, &bad);
  if (parsed == 0 && !rep->ok) {
    bench_error(row, "%s: the ledger's check failed: %s",
                ledger_side_name[side], rep->verdict);
  } else if (parsed != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (parsed != 0)
      bench_error(row, "%s: ordo bank ended with %s and no usable JSON (at %s)",
                  ledger_side_name[side],
                  ledger_status_text(status, why, sizeof why), bad);
    else
      bench_error(row, "%s: ordo bank ended with %s", ledger_side_name[side],
                  ledger_status_text(status, why, sizeof why));
    if (out[0] != '\0')
      fprintf(stderr, "--- its stdout ---\n%s---\n", out);
  } else if (rep->transfers != 2.0 * (double)n || !(rep->seconds > 0)) {
    bench_error(row, "%s: the ledger made %.0f transfers in %g s, not %ld",
                ledger_side_name[side], rep->transfers, rep->seconds, 2 * n);
  } else {
    rc = 0;
  }
  if (rc != 0 && err[0] != '\0')
    fprintf(stderr, "--- its stderr ---\n%s---\n", err);
out:
  free(out);
  return rc;
}

/* ---- Shared with pgbench.c ----------------------------------------------
 */

const char *ledger_side_url(const void *state, int naive) {
  const ledger_state_t *st = state;
  return st->side_url[naive ? LEDGER_NAIVE : LEDGER_ORDERED];
}

double ledger_side_rate(const void *state, int naive) {
  const ledger_state_t *st = state;
  return st->rate[naive ? LEDGER_NAIVE : LEDGER_ORDERED];
}

long ledger_side_transfers(const void *state, int naive, double seconds) {
  double want = ledger_side_rate(state, naive) * seconds / 2;
  long min = seconds < 0.5 ? LEDGER_N_MIN_QUICK : LEDGER_N_MIN;
  return want < (double)min    ? min
         : want > LEDGER_N_MAX ? LEDGER_N_MAX
                               : (long)llround(want);
}

int ledger_side_bank(const bench_row_t *row, const void *state, int naive,
                     long n, ledger_report_t *rep) {
  return ledger_bank(row, state, naive ? LEDGER_NAIVE : LEDGER_ORDERED, n, rep);
}

/* ---- The rows' runs -------------------------------------------------------
 */

static int ledger_run(const bench_row_t *row, ledger_state_t *st,
                      ledger_side side, double seconds, double *out) {
  ledger_report_t rep;
  long n = ledger_side_transfers(st, side == LEDGER_NAIVE, seconds);
  if (ledger_bank(row, st, side, n, &rep) != 0)
    return -1;
  *out = rep.transfers / rep.seconds;
  bench_extra(row, "retries", rep.retries);
  bench_extra(row, "deadlocks", rep.deadlocks);
  return 0;
}

int ledger_run_ordered(const bench_row_t *row, void *state, double seconds,
                       double *out) {
  return ledger_run(row, state, LEDGER_ORDERED, seconds, out);
}

int ledger_run_naive(const bench_row_t *row, void *state, double seconds,
                     double *out) {
  return ledger_run(row, state, LEDGER_NAIVE, seconds, out);
}

/* ---- The cluster ----------------------------------------------------------
 */

/* Prints the fixture's log on stderr (its last part). */
static void ledger_show_log(const ledger_state_t *st) {
  char path[PATH_MAX + 16], buf[4096];
  snprintf(path, sizeof path, "%s/fixture.log", st->dir);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return;
  if (fseek(f, 0, SEEK_END) == 0) {
    long end = ftell(f);
    fseek(f, end > (long)sizeof buf - 1 ? end - (long)sizeof buf + 1 : 0,
          SEEK_SET);
  }
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  if (n > 0)
    fprintf(stderr, "--- pg_fixture.sh log (%s) ---\n%s%s---\n", path, buf,
            buf[n - 1] == '\n' ? "" : "\n");
}

/* The environment of the wrapper: ours, with PG_FIXTURE_TIMEOUT set (and
 * PG_FIXTURE_MAX_S left to follow from it). NULL when out of memory. */
static char **ledger_fixture_env(void) {
  size_t n = 0, k = 0;
  while (environ[n] != NULL)
    n++;
  char **env = calloc(n + 2, sizeof *env);
  if (env == NULL)
    return NULL;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "PG_FIXTURE_TIMEOUT=", 19) != 0 &&
        strncmp(environ[i], "PG_FIXTURE_MAX_S=", 17) != 0)
      env[k++] = environ[i];
  env[k++] = "PG_FIXTURE_TIMEOUT=" LEDGER_FIXTURE_TIMEOUT;
  env[k] = NULL;
  return env;
}

/* Starts the wrapper (st->dir exists): 0, or -1 after reporting. */
static int ledger_fixture_spawn(const bench_row_t *row, ledger_state_t *st,
                                const char *script) {
  char log[PATH_MAX + 16], urlfile[PATH_MAX + 16];
  int hold[2] = {-1, -1};
  snprintf(log, sizeof log, "%s/fixture.log", st->dir);
  snprintf(urlfile, sizeof urlfile, "%s/url", st->dir);
  int out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  char **env = ledger_fixture_env();
  int rc = -1;
  if (out < 0 || env == NULL || pipe2(hold, O_CLOEXEC) != 0) {
    bench_error(row, "cannot open %s, a pipe or memory: %s", log,
                strerror(errno));
    goto out;
  }
  /* $1 is the file for the URL; written whole, then renamed, so that the
   * setup never reads half a line. The read then waits for the pipe to
   * close. */
  char *argv[] = {"bash",
                  (char *)script,
                  "bash",
                  "-c",
                  "echo \"$PG_URL\" > \"$1.tmp\" && mv \"$1.tmp\" \"$1\" && "
                  "{ read -r _ || true; }",
                  "ledger-bench",
                  urlfile,
                  NULL};
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    bench_error(row, "fork: %s", strerror(errno));
    goto out;
  }
  if (pid == 0) {
    /* The child: async-signal-safe calls only. */
    setpgid(0, 0);
    if (dup2(hold[0], STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
        dup2(out, STDERR_FILENO) < 0)
      _exit(126);
    execvpe(argv[0], argv, env);
    static const char msg[] = "exec of bash failed\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
  }
  setpgid(pid, pid); /* also here, so that the group exists either way */
  st->fixture = pid;
  st->hold = hold[1];
  hold[1] = -1;
  rc = 0;
out:
  if (out >= 0)
    close(out);
  for (int i = 0; i < 2; i++)
    if (hold[i] >= 0)
      close(hold[i]);
  free(env);
  return rc;
}

/* Waits (bounded) for the wrapper to write the URL: 0, or -1 after
 * reporting. */
static int ledger_fixture_url(const bench_row_t *row, ledger_state_t *st) {
  char path[PATH_MAX + 16], why[48];
  double deadline = bench_now() + LEDGER_START_S;
  int status = 0;
  snprintf(path, sizeof path, "%s/url", st->dir);
  while (bench_now() < deadline) {
    FILE *f = fopen(path, "r");
    if (f != NULL) {
      char *ok = fgets(st->url, sizeof st->url, f);
      fclose(f);
      size_t len = ok != NULL ? strcspn(st->url, "\n") : 0;
      if (ok == NULL || st->url[len] != '\n' || len == 0) {
        bench_error(row, "pg_fixture.sh wrote no URL to %s", path);
        ledger_show_log(st);
        return -1;
      }
      st->url[len] = '\0';
      return 0;
    }
    if (waitpid(st->fixture, &status, WNOHANG) == st->fixture) {
      st->fixture = 0;
      bench_error(row,
                  "pg_fixture.sh ended with %s before the cluster "
                  "was up; is PostgreSQL installed "
                  "(scripts/bootstrap.sh)?",
                  ledger_status_text(status, why, sizeof why));
      ledger_show_log(st);
      return -1;
    }
    bench_sleep(0.05);
  }
  bench_error(row, "the cluster was not up within %.0f s", LEDGER_START_S);
  ledger_show_log(st);
  return -1;
}

int ledger_psql(const bench_row_t *row, const char *url, const char *sql,
                char *out, size_t outcap) {
  char err[LEDGER_ERR_MAX], why[48];
  int status = 0;
  char *argv[] = {"psql", (char *)url,       "-X", "-q",        "-A", "-t",
                  "-v",   "ON_ERROR_STOP=1", "-c", (char *)sql, NULL};
  if (ledger_exec(row, argv, LEDGER_PSQL_S, out, outcap, err, sizeof err,
                  &status) != 0)
    return -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return 0;
  bench_error(
      row, "psql '%.60s%s' ended with %s%s", sql, strlen(sql) > 60 ? "..." : "",
      ledger_status_text(status, why, sizeof why),
      WIFEXITED(status) && WEXITSTATUS(status) == 127 ? "; is psql installed?"
                                                      : "");
  if (err[0] != '\0')
    fprintf(stderr, "--- its stderr ---\n%s---\n", err);
  return -1;
}

/* CREATE DATABASE db on the cluster, with psql: 0, or -1 after reporting. */
static int ledger_createdb(const bench_row_t *row, const ledger_state_t *st,
                           const char *db) {
  char sql[128], out[1024];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
  return ledger_psql(row, st->url, sql, out, sizeof out);
}

/*
 * A cluster outlives its row: the next PostgreSQL row (ledger.c's or
 * pgbench.c's) takes it over, databases and all, and calibrates anew, since
 * starting and stopping a cluster takes seconds. The last one kept is
 * stopped at exit, as the teardown would (a harness that dies closes the
 * pipe, which stops it too).
 */
static ledger_state_t *ledger_kept;
static const bench_row_t *ledger_kept_row;

static void ledger_stop(const bench_row_t *row, ledger_state_t *st);

static void ledger_stop_kept(void) {
  if (ledger_kept != NULL)
    ledger_stop(ledger_kept_row, ledger_kept);
  ledger_kept = NULL;
}

static int ledger_calibrate(const bench_row_t *row, ledger_state_t *st);

/* The cluster (the one kept, or a new one with its databases), calibrated
 * when `calibrate`: 0, or -1 after reporting. */
static int ledger_open(const bench_row_t *row, void **state, bool calibrate) {
  char script[PATH_MAX];
  const char *tmp = getenv("TMPDIR");
  if (ledger_kept != NULL) {
    ledger_state_t *kept = ledger_kept;
    ledger_kept = NULL;
    if (calibrate && ledger_calibrate(row, kept) != 0) {
      ledger_stop(row, kept);
      return -1;
    }
    *state = kept;
    return 0;
  }
  ledger_state_t *st = calloc(1, sizeof *st);
  if (st == NULL) {
    bench_error(row, "out of memory");
    return -1;
  }
  st->hold = -1;
  if (ledger_cli_path(st->cli, sizeof st->cli) != 0) {
    bench_error(row, "ordo not found (looked at $ORDO_BENCH_ORDO_CLI, the "
                     "build's ordo, and ../ordo next to ordo_bench); build "
                     "the 'ordo_cli' target");
    goto fail;
  }
  if (ledger_fixture_path(script, sizeof script) != 0) {
    bench_error(row, "tests/integration/pg_fixture.sh not found under "
                     "$ORDO_BENCH_SOURCE_DIR or the source tree CMake named");
    goto fail;
  }
  snprintf(st->dir, sizeof st->dir, "%s/ordo_bench.XXXXXX",
           tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
  if (mkdtemp(st->dir) == NULL) {
    bench_error(row, "mkdtemp %s: %s", st->dir, strerror(errno));
    st->dir[0] = '\0';
    goto fail;
  }
  if (ledger_fixture_spawn(row, st, script) != 0 ||
      ledger_fixture_url(row, st) != 0)
    goto fail;
  for (int side = 0; side < 2; side++) {
    if (ledger_url_with_db(st->url, ledger_side_db[side], st->side_url[side],
                           sizeof st->side_url[side]) != 0) {
      bench_error(row, "cannot make a URL for database %s of '%s'",
                  ledger_side_db[side], st->url);
      goto fail;
    }
    if (ledger_createdb(row, st, ledger_side_db[side]) != 0)
      goto fail;
  }
  if (calibrate && ledger_calibrate(row, st) != 0)
    goto fail;
  *state = st;
  return 0;
fail:
  ledger_stop(row, st);
  return -1;
}

int ledger_setup(const bench_row_t *row, void **state) {
  return ledger_open(row, state, true);
}

int ledger_cluster_setup(const bench_row_t *row, void **state) {
  return ledger_open(row, state, false);
}

const char *ledger_cluster_url(const void *state) {
  return ((const ledger_state_t *)state)->url;
}

/* The calibration: a run of each side at LEDGER_CALIBRATE_FIRST each way,
 * then at LEDGER_CALIBRATE if that was quick. 0, or -1. */
static int ledger_calibrate(const bench_row_t *row, ledger_state_t *st) {
  for (int side = 0; side < 2; side++) {
    ledger_report_t rep;
    if (ledger_bank(row, st, (ledger_side)side, LEDGER_CALIBRATE_FIRST, &rep) !=
        0)
      return -1;
    if (rep.seconds < LEDGER_CALIBRATE_S &&
        ledger_bank(row, st, (ledger_side)side, LEDGER_CALIBRATE, &rep) != 0)
      return -1;
    st->rate[side] = rep.transfers / rep.seconds;
  }
  return 0;
}

void ledger_teardown(const bench_row_t *row, void *state) {
  ledger_state_t *st = state;
  if (st == NULL)
    return;
  if (st->fixture > 0 && st->hold >= 0 && ledger_kept == NULL) {
    static bool registered;
    if (!registered && atexit(ledger_stop_kept) == 0)
      registered = true;
    if (registered) {
      ledger_kept = st;
      ledger_kept_row = row;
      return;
    }
  }
  ledger_stop(row, st);
}

/* Stops st's cluster (bounded) and frees st. */
static void ledger_stop(const bench_row_t *row, ledger_state_t *st) {
  char why[48];
  int status = 0;
  if (st->hold >= 0) {
    close(st->hold); /* the wrapper's read ends: it stops the cluster */
    st->hold = -1;
  }
  if (st->fixture > 0) {
    int gone = ledger_wait(st->fixture, LEDGER_STOP_S, &status);
    if (!gone) {
      bench_error(row, "pg_fixture.sh did not stop within %.0f s; SIGTERM",
                  LEDGER_STOP_S);
      kill(-st->fixture, SIGTERM); /* its EXIT trap stops the cluster */
      gone = ledger_wait(st->fixture, LEDGER_SIGNAL_S, &status);
    }
    if (!gone) {
      bench_error(row,
                  "pg_fixture.sh did not stop within %.0f s of SIGTERM; "
                  "SIGKILL",
                  LEDGER_SIGNAL_S);
      kill(-st->fixture, SIGKILL);
      waitpid(st->fixture, &status, 0);
      ledger_show_log(st);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      bench_error(row, "warning: pg_fixture.sh ended with %s",
                  ledger_status_text(status, why, sizeof why));
      ledger_show_log(st);
    }
    st->fixture = 0;
  }
  bench_rm_tree(st->dir);
  free(st);
}
