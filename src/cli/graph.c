/*
 * graph.c -- `ordo graph`, the wait-for graph of a lock place
 * (ordo_graph_dump). For now it has something to show only with
 * --naive-demo, which builds a deadlocked ring of three txns on a place of
 * its own. See README.md, "ordo graph".
 *
 * Interface:
 *   cli_graph_main   runs `ordo graph [options]`, returns the exit status
 *   cli_graph_usage  prints the help of `ordo graph`, every flag
 */
#include "cli/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "cli/bank_ordo.h"
#include "cli/flags.h"
#include "ordo.h"

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
  cli_flags_usage(f, &graph_flags);
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
  switch (cli_flags_parse(&graph_flags, argc, argv, &o)) {
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
  int status = cli_open_place("graph", o.url, &oo, &ordo);
  if (status != CLI_EXIT_OK)
    return status;
  status = graph_demo(ordo, (ordo_graph_fmt_t)o.format);
  ordo_close(ordo);
  return status;
}
