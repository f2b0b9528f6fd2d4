/*
 * api_detect.c -- the public calls of detection and recovery: deadlock
 * records and their callback, the deadlock-rate alarm, the wait-for graph
 * dump (with a place's executors in it, src/exec/README.md), and a txn's
 * declared work and abort count. Each passes to the
 * backend's vtable; a backend without detection answers ORDO_ENOTSUP. See
 * README.md.
 *
 * Interface: ordo_deadlocks, ordo_on_deadlock, ordo_on_alarm,
 * ordo_graph_dump, ordo_txn_add_cost, ordo_txn_aborts.
 */
#include "ordo_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int ordo_deadlocks(ordo_t *o, ordo_deadlock_t *out, size_t max) {
  if (!o || (!out && max))
    return ORDO_EINVAL;
  if (!o->be->deadlocks)
    return ORDO_ENOTSUP;
  return o->be->deadlocks(o, out, max);
}

void ordo_on_deadlock(ordo_t *o, ordo_deadlock_cb cb, void *arg) {
  if (o && o->be->on_deadlock)
    o->be->on_deadlock(o, cb, arg);
}

void ordo_on_alarm(ordo_t *o, ordo_alarm_cb cb, void *arg) {
  if (o && o->be->on_alarm)
    o->be->on_alarm(o, cb, arg);
}

/*
 * graph_with_executors -- the engine's graph with the executors' part
 * (src/exec/README.md, "The dump") inside it: the engine's output goes to
 * a temporary file, and its closing "}" (DOT) or "}" of the top object
 * (JSON) is written after the executors' lines. A place without executors
 * never comes here, so its dump is the engine's, byte for byte.
 */
static int graph_with_executors(ordo_t *o, int fd, ordo_graph_fmt_t fmt) {
  FILE *tmp = tmpfile();
  if (!tmp)
    return ORDO_ENOMEM;
  int rc = o->be->graph(o, fileno(tmp), fmt);
  long n = rc ? -1 : (fseek(tmp, 0, SEEK_END), ftell(tmp));
  char *buf = n > 2 ? malloc((size_t)n) : NULL;
  if (!rc &&
      (!buf || (rewind(tmp), fread(buf, 1, (size_t)n, tmp)) != (size_t)n))
    rc = n > 2 && !buf ? ORDO_ENOMEM : ORDO_EINVAL;
  fclose(tmp);
  int dfd = rc ? -1 : dup(fd);
  FILE *f = dfd >= 0 ? fdopen(dfd, "w") : NULL;
  if (!rc && !f) {
    if (dfd >= 0)
      close(dfd);
    rc = ORDO_EINVAL;
  }
  if (!rc) {
    /* Both formats end with "}\n": the executors go before it. */
    fwrite(buf, 1, (size_t)n - 2, f);
    ordo__exec_graph(o, f, fmt);
    fputs("}\n", f);
    fclose(f);
  }
  free(buf);
  return rc;
}

int ordo_graph_dump(ordo_t *o, int fd, ordo_graph_fmt_t fmt) {
  if (!o || fd < 0 || (fmt != ORDO_GRAPH_DOT && fmt != ORDO_GRAPH_JSON))
    return ORDO_EINVAL;
  if (!o->be->graph)
    return ORDO_ENOTSUP;
  if (!ordo__exec_graph(o, NULL, fmt))
    return o->be->graph(o, fd, fmt);
  return graph_with_executors(o, fd, fmt);
}

void ordo_txn_add_cost(ordo_txn_t *t, uint64_t cost) {
  if (t && t->o->be->txn_add_cost)
    t->o->be->txn_add_cost(t, cost);
}

unsigned ordo_txn_aborts(const ordo_txn_t *t) {
  if (!t || !t->o->be->txn_aborts)
    return 0;
  return t->o->be->txn_aborts(t);
}
