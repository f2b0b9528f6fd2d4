/*
 * bank_graph.c -- `ordo bank --graph FILE`: the deadlock record's cycle as
 * one DOT digraph, and the live wait-for graph of that moment as DOT
 * comments. See bank_graph.h and README.md, "The deadlock graph".
 *
 * Interface: bank_graph_open, bank_graph_cb, bank_graph_close (bank_graph.h).
 */
#include "cli/bank_graph.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "cli/cli.h"

/* The victim policies by ordo_victim_t, spelled as in a mem:// URL. */
static const char *const victim_names[ORDO_VICTIM__COUNT] = {
    "youngest",         "oldest",          "fewest_locks", "least_work",
    "nearest_deadline", "lowest_priority", "random"};

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

void bank_graph_cb(const ordo_deadlock_t *d, void *arg) {
  bank_graph_t *g = arg;
  if (atomic_exchange(&g->claimed, 1) != 0)
    return;
  g->rec = *d;
  graph_write_cycle(g->f, d);
  graph_write_live(g->f, g->o);
  if (fflush(g->f) != 0 || ferror(g->f))
    g->write_err = errno ? errno : EIO;
}

int bank_graph_open(bank_graph_t *g, const char *path) {
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

int bank_graph_close(bank_graph_t *g) {
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
