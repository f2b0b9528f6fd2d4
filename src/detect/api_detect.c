/*
 * api_detect.c -- the public calls of detection and recovery: deadlock
 * records and their callback, the deadlock-rate alarm, the wait-for graph
 * dump, and a txn's declared work and abort count. Each passes to the
 * backend's vtable; a backend without detection answers ORDO_ENOTSUP. See
 * README.md.
 *
 * Interface: ordo_deadlocks, ordo_on_deadlock, ordo_on_alarm,
 * ordo_graph_dump, ordo_txn_add_cost, ordo_txn_aborts.
 */
#include "ordo_int.h"

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

int ordo_graph_dump(ordo_t *o, int fd, ordo_graph_fmt_t fmt) {
  if (!o || fd < 0 || (fmt != ORDO_GRAPH_DOT && fmt != ORDO_GRAPH_JSON))
    return ORDO_EINVAL;
  if (!o->be->graph)
    return ORDO_ENOTSUP;
  return o->be->graph(o, fd, fmt);
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
