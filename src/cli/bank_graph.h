/*
 * bank_graph.h -- `ordo bank --graph FILE`: the cycle of a run's first
 * deadlock, from the engine's deadlock record, written as Graphviz DOT
 * (README.md, "The deadlock graph"). The command opens the file before the
 * first run and closes it after the last; a driver over ordo arms
 * bank_graph_cb with ordo_on_deadlock for each run; the report reads what
 * was drawn. It knows nothing of the bank but the words of its lines.
 *
 * Interface (defined in bank_graph.c):
 *   bank_graph_t      the file, and the record drawn into it
 *   bank_graph_open   creates FILE (a bad path fails before any work)
 *   bank_graph_cb     the ordo_on_deadlock callback that draws the first
 *   bank_graph_close  writes an empty digraph when none was drawn, closes
 */
#ifndef ORDO_CLI_BANK_GRAPH_H
#define ORDO_CLI_BANK_GRAPH_H

#include <stdatomic.h>
#include <stdio.h>

#include "ordo.h"

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

/* Opens FILE for --graph; prints the one error line when it cannot. */
int bank_graph_open(bank_graph_t *g, const char *path);

/* The ordo_on_deadlock callback of --graph, arg a bank_graph_t whose o is
 * the place being run; see bank_graph_t. */
void bank_graph_cb(const ordo_deadlock_t *d, void *arg);

/*
 * bank_graph_close -- after the last run (and its ordo_close): when no
 * deadlock was recorded, writes an empty digraph that says so, so that FILE
 * is valid DOT either way; then closes it. Returns CLI_EXIT_FAIL after one
 * error line when the file could not be written.
 */
int bank_graph_close(bank_graph_t *g);

#endif /* ORDO_CLI_BANK_GRAPH_H */
