/*
 * main.c -- ordo_probesim's options, its run loop and its report (`name
 * value` lines, or one JSON object with --json). See sim/README.md.
 *
 * Interface: main.
 */
#include "sim.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int dbl_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double q) {
  if (n == 0)
    return 0;
  size_t i = (size_t)ceil(q * (double)n);
  return v[i > 0 ? i - 1 : 0];
}

struct report {
  uint64_t cycles, closed, detected, broken_before, broken_after, broken_fault,
      missed;
  uint64_t multi_victim, msgs_total;
  double p50, p99, mean, msgs_per_cycle, longest_ms;
};

static void summarize(struct sim *s, struct report *r) {
  memset(r, 0, sizeof(*r));
  r->cycles = (uint64_t)s->ncy;
  simtime bound = (simtime)(s->o.miss_bound_ms * NS_PER_MS), longest = 0;
  for (int i = 0; i < s->ncy; i++) {
    struct cycle *c = &s->cy[i];
    if (!c->closed) {
      r->broken_before++;
      continue;
    }
    r->closed++;
    if (c->victims > 0)
      r->detected++;
    if (c->victims_all > 1)
      r->multi_victim++;
    if (c->victims == 0 && c->broken_timeout > 0)
      r->broken_after++;
    else if (c->victims == 0 && c->broken_fault > 0)
      r->broken_fault++;
    simtime d = c->longest;
    bool live = c->live && sim_cycle_stands(s, c);
    if (live && s->now - c->close_t > d)
      d = s->now - c->close_t;
    longest = d > longest ? d : longest;
    /* Closed and standing at the end (nobody resolved it), or standing
     * longer than the bound at some point: missed. */
    if (live || c->over_bound || d > bound)
      r->missed++;
  }
  r->longest_ms = (double)longest / NS_PER_MS;
  for (int k = 0; k < M_KINDS; k++)
    r->msgs_total += s->msgs[k];
  qsort(s->lat, s->nlat, sizeof(*s->lat), dbl_cmp);
  double sum = 0;
  for (size_t i = 0; i < s->nlat; i++)
    sum += s->lat[i];
  r->p50 = pct(s->lat, s->nlat, 0.50);
  r->p99 = pct(s->lat, s->nlat, 0.99);
  r->mean = s->nlat ? sum / (double)s->nlat : 0;
  r->msgs_per_cycle =
      r->detected ? (double)r->msgs_total / (double)r->detected : 0;
}

/* One printer for both formats: `name value` lines, or one JSON object. */
struct out {
  bool json, first;
};

static void out_kv(struct out *o, const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (o->json) {
    printf("%s\"%s\": ", o->first ? "{" : ", ", name);
  } else {
    printf("%-22s ", name);
  }
  bool str = fmt[1] == 's';
  if (o->json && str)
    putchar('"');
  vprintf(fmt, ap);
  if (o->json && str)
    putchar('"');
  if (!o->json)
    putchar('\n');
  o->first = false;
  va_end(ap);
}

static void print_report(struct sim *s, const struct report *r) {
  const struct opts *o = &s->o;
  struct out w = {o->json, true};
  char bugs[160] = "";
  snprintf(
      bugs, sizeof(bugs), "%s%s%s%s%s%s%s%s%s",
      o->bug_no_versions ? "no-versions " : "",
      o->bug_no_confirm ? "no-confirm " : "", o->bug_no_pins ? "no-pins " : "",
      o->bug_no_reprobe ? "no-reprobe " : "",
      o->bug_release_first ? "release-first " : "",
      o->bug_one_pin ? "one-pin " : "",
      o->bug_told_on_drop ? "told-on-drop " : "",
      o->bug_no_defer ? "no-defer " : "", o->bug_no_giveup ? "no-giveup " : "");
  if (bugs[0])
    bugs[strlen(bugs) - 1] = '\0';
  out_kv(&w, "algo", "%s",
         !o->central          ? "probes"
         : o->central_confirm ? "central+confirm"
                              : "central");
  out_kv(&w, "bugs", "%s", bugs[0] ? bugs : "none");
  out_kv(&w, "seed", "%" PRIu64, o->seed);
  out_kv(&w, "shards", "%d", o->shards);
  out_kv(&w, "cycle_len", "%d", o->len);
  out_kv(&w, "span", "%d", o->span < o->shards ? o->span : o->shards);
  out_kv(&w, "rtt_us", "%.1f", o->rtt_us);
  out_kv(&w, "probe_delay_us", "%.1f", o->probe_delay_us);
  out_kv(&w, "poll_ms", "%.3f", o->poll_ms);
  out_kv(&w, "overlap", "%g", o->overlap);
  out_kv(&w, "link_break", "%g", o->link_break);
  out_kv(&w, "spike", "%g", o->spike);
  out_kv(&w, "freeze", "%g", o->freeze);
  out_kv(&w, "disconnect", "%g", o->disconnect);
  out_kv(&w, "lease", "%g", o->lease);
  out_kv(&w, "cycles", "%" PRIu64, r->cycles);
  out_kv(&w, "closed", "%" PRIu64, r->closed);
  out_kv(&w, "detected", "%" PRIu64, r->detected);
  out_kv(&w, "local_detected", "%" PRIu64, s->local_found);
  out_kv(&w, "broken_before_close", "%" PRIu64, r->broken_before);
  out_kv(&w, "broken_by_timeout", "%" PRIu64, r->broken_after);
  out_kv(&w, "broken_by_fault", "%" PRIu64, r->broken_fault);
  out_kv(&w, "missed", "%" PRIu64, r->missed);
  out_kv(&w, "longest_standing_ms", "%.3f", r->longest_ms);
  out_kv(&w, "phantom_aborts", "%" PRIu64, s->phantoms);
  out_kv(&w, "victims", "%" PRIu64, s->victims_total);
  out_kv(&w, "multi_victim_cycles", "%" PRIu64, r->multi_victim);
  out_kv(&w, "two_holders", "%" PRIu64, s->two_holders);
  out_kv(&w, "latency_p50_us", "%.1f", r->p50);
  out_kv(&w, "latency_p99_us", "%.1f", r->p99);
  out_kv(&w, "latency_mean_us", "%.1f", r->mean);
  out_kv(&w, "messages", "%" PRIu64, r->msgs_total);
  out_kv(&w, "messages_per_cycle", "%.1f", r->msgs_per_cycle);
  for (int k = 0; k < M_KINDS; k++) {
    char name[32];
    snprintf(name, sizeof(name), "msg_%s", sim_msg_names[k]);
    for (char *p = name; *p; p++)
      *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    out_kv(&w, name, "%" PRIu64, s->msgs[k]);
  }
  out_kv(&w, "probes_stale", "%" PRIu64, s->probes_stale);
  out_kv(&w, "confirms_failed", "%" PRIu64, s->confirms_failed);
  out_kv(&w, "reprobes_after_confirm", "%" PRIu64, s->reprobes);
  out_kv(&w, "reprobes_on_tick", "%" PRIu64, s->tick_probes);
  out_kv(&w, "aborts_dropped_dup", "%" PRIu64, s->dup_aborts);
  out_kv(&w, "aborts_gave_up", "%" PRIu64, s->gave_up);
  out_kv(&w, "aborts_gave_up_orphan", "%" PRIu64, s->gave_up_orphan);
  out_kv(&w, "aborts_wait_ended", "%" PRIu64, s->ended_first);
  out_kv(&w, "blocked_resent", "%" PRIu64, s->blocked_resent);
  out_kv(&w, "blocked_busy", "%" PRIu64, s->busy);
  out_kv(&w, "releases_resent", "%" PRIu64, s->releases_resent);
  out_kv(&w, "sessions_deferred", "%" PRIu64, s->sessions_deferred);
  out_kv(&w, "link_breaks", "%" PRIu64, s->link_breaks);
  out_kv(&w, "messages_lost", "%" PRIu64, s->msgs_lost);
  out_kv(&w, "peer_messages_dropped", "%" PRIu64, s->msgs_dropped);
  out_kv(&w, "delay_spikes", "%" PRIu64, s->spikes);
  out_kv(&w, "freezes", "%" PRIu64, s->freezes);
  out_kv(&w, "disconnects", "%" PRIu64, s->disconnects);
  out_kv(&w, "leases_expired", "%" PRIu64, s->leases);
  out_kv(&w, "polls", "%" PRIu64, s->polls);
  out_kv(&w, "polls_skipped", "%" PRIu64, s->polls_skipped);
  out_kv(&w, "sim_end_ms", "%.3f", (double)s->now / NS_PER_MS);
  if (o->json)
    printf("}\n");
}

/* The options, one table: the long name, the field it sets, its kind and
 * range, and its help line; usage() and parse() both read it. */
enum { K_FLAG, K_INT, K_DBL, K_U64 };
struct optdef {
  const char *name, *arg, *help;
  int kind;
  size_t off;
  double def, lo, hi; /* the default; the range, both ends included */
};
#define F(field) offsetof(struct opts, field)
static const struct optdef optdefs[] = {
    {"central-confirm", NULL, "the coordinator's victim is confirmed first",
     K_FLAG, F(central_confirm), 0, 0, 1},
    {"shards", "N", "shards", K_INT, F(shards), 1000, 1, 1000},
    {"len", "L", "cycle length", K_INT, F(len), 4, 2, MAXHOPS},
    {"span", "S", "shards a cycle's keys spread over, 0 for L", K_INT, F(span),
     0, 0, 1000},
    {"cycles", "C", "cycles to make", K_INT, F(cycles), 2000, 0, 1e7},
    {"rate", "R", "cycles begun per ms", K_DBL, F(rate_per_ms), 1, 1e-9, 1e6},
    {"chains", "X", "chains that end, per cycle", K_DBL, F(chains), 1, 0, 100},
    {"break-frac", "F", "cycles with a breaker", K_DBL, F(break_frac), 0.3, 0,
     1},
    {"retry-frac", "F", "breakers that keep their key, ask again", K_DBL,
     F(retry_frac), 0.5, 0, 1},
    {"rtt-us", "U", "round trip", K_DBL, F(rtt_us), 200, 0, 1e9},
    {"jitter", "J", "one-way delay's jitter, +-J", K_DBL, F(jitter), 0.2, 0,
     0.99},
    {"probe-delay-us", "U", "the wait before a probe", K_DBL, F(probe_delay_us),
     1000, 0, 1e9},
    {"poll-ms", "P", "the coordinator's period", K_DBL, F(poll_ms), 10, 1e-3,
     1e6},
    {"spread-us", "U", "a group's requests' spread", K_DBL, F(spread_us), 50, 0,
     1e9},
    {"work-us", "U", "work after a grant", K_DBL, F(work_us), 100, 0, 1e9},
    {"hold-us", "U", "a chain's end holds about U", K_DBL, F(hold_us), 500, 0,
     1e9},
    {"pin-bound-ms", "M", "a pin or freeze lasts, unless renewed", K_DBL,
     F(pin_bound_ms), 2000, 0, 1e9},
    {"confirm-ms", "M", "an abort's confirmation's bound", K_DBL, F(confirm_ms),
     1000, 0, 1e9},
    {"peer-blocked-max", "N", "BLOCKED entries a shard keeps per peer", K_INT,
     F(peer_blocked_max), 65536, 0, 1e9},
    {"miss-bound-ms", "M", "a cycle standing longer is missed", K_DBL,
     F(miss_bound_ms), 5000, 1, 1e9},
    {"overlap", "F", "cycles that are two sharing a member", K_DBL, F(overlap),
     0, 0, 1},
    {"link-break", "P", "a message's link breaks as it travels", K_DBL,
     F(link_break), 0, 0, 1},
    {"spike", "P", "a message is delayed by a spike", K_DBL, F(spike), 0, 0, 1},
    {"spike-ms", "M", "a spike's delay, M/2 to 3M/2", K_DBL, F(spike_ms), 20, 0,
     1e9},
    {"freeze", "F", "cycles one of whose shards freezes", K_DBL, F(freeze), 0,
     0, 1},
    {"freeze-ms", "M", "a freeze's mean length, 0 to 2M", K_DBL, F(freeze_ms),
     200, 0, 1e9},
    {"disconnect", "F", "cycles one of whose clients goes away", K_DBL,
     F(disconnect), 0, 0, 1},
    {"lease", "F", "cycles with a session at its lease", K_DBL, F(lease), 0, 0,
     1},
    {"seed", "N", "the run", K_U64, F(seed), 1, 0, 0},
    {"json", NULL, "one JSON object instead of lines", K_FLAG, F(json), 0, 0,
     1},
    {"bug-no-confirm", NULL, "V aborts without confirming", K_FLAG,
     F(bug_no_confirm), 0, 0, 1},
    {"bug-no-pins", NULL, "the confirmation pins and freezes nothing", K_FLAG,
     F(bug_no_pins), 0, 0, 1},
    {"bug-no-versions", NULL, "every check ignores wseq", K_FLAG,
     F(bug_no_versions), 0, 0, 1},
    {"bug-no-reprobe", NULL, "the draft's probe trigger alone", K_FLAG,
     F(bug_no_reprobe), 0, 0, 1},
    {"bug-release-first", NULL, "RELEASE before the abort at V (defect 1)",
     K_FLAG, F(bug_release_first), 0, 0, 1},
    {"bug-one-pin", NULL, "one pin deadline per wait (defect 2)", K_FLAG,
     F(bug_one_pin), 0, 0, 1},
    {"bug-told-on-drop", NULL, "a dropped BLOCKED counts told (defect 3)",
     K_FLAG, F(bug_told_on_drop), 0, 0, 1},
    {"bug-no-defer", NULL, "a session ends at once, pinned or not", K_FLAG,
     F(bug_no_defer), 0, 0, 1},
    {"bug-no-giveup", NULL, "an abort goes on when another pins its victim",
     K_FLAG, F(bug_no_giveup), 0, 0, 1},
};
#undef F
#define NOPTS (sizeof(optdefs) / sizeof(optdefs[0]))

static void usage(FILE *f) {
  fprintf(f, "usage: ordo_probesim [options] (see sim/README.md)\n"
             "  --algo probes|central    the detector (default probes)\n");
  for (size_t i = 0; i < NOPTS; i++) {
    char left[40];
    snprintf(left, sizeof(left), "--%s%s%s", optdefs[i].name,
             optdefs[i].arg ? " " : "", optdefs[i].arg ? optdefs[i].arg : "");
    if (optdefs[i].kind == K_FLAG)
      fprintf(f, "  %-24s %s\n", left, optdefs[i].help);
    else
      fprintf(f, "  %-24s %s (default %g)\n", left, optdefs[i].help,
              optdefs[i].def);
  }
}

static void set_value(const struct optdef *d, double v, struct opts *o) {
  char *p = (char *)o + d->off;
  if (d->kind == K_U64)
    *(uint64_t *)p = (uint64_t)v;
  else if (d->kind == K_DBL)
    *(double *)p = v;
  else
    *(int *)p = (int)v;
}

/* set_opt -- one option of the table from its argument: -1 when it is not a
 * number in the option's range. */
static int set_opt(const struct optdef *d, const char *arg, struct opts *o) {
  char *p = (char *)o + d->off, *end = NULL;
  if (d->kind == K_FLAG) {
    *(int *)p = 1;
    return 0;
  }
  if (d->kind == K_U64) {
    *(uint64_t *)p = strtoull(arg, &end, 10);
    return *arg && !*end ? 0 : -1;
  }
  double v = strtod(arg, &end);
  if (!*arg || *end || !(v >= d->lo && v <= d->hi))
    return -1;
  if (d->kind == K_INT) {
    if (v != (double)(int)v)
      return -1;
    *(int *)p = (int)v;
  } else {
    *(double *)p = v;
  }
  return 0;
}

static int parse(int argc, char **argv, struct opts *o) {
  struct option lo[NOPTS + 3];
  for (size_t i = 0; i < NOPTS; i++)
    lo[i] = (struct option){optdefs[i].name, optdefs[i].arg ? 1 : 0, NULL,
                            256 + (int)i};
  lo[NOPTS] = (struct option){"algo", 1, NULL, 'a'};
  lo[NOPTS + 1] = (struct option){"help", 0, NULL, 'h'};
  lo[NOPTS + 2] = (struct option){NULL, 0, NULL, 0};
  memset(o, 0, sizeof(*o));
  for (size_t i = 0; i < NOPTS; i++)
    set_value(&optdefs[i], optdefs[i].def, o);
  int c;
  while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    if (c == 'h') {
      usage(stdout);
      exit(0);
    }
    if (c == 'a') {
      if (strcmp(optarg, "probes") && strcmp(optarg, "central"))
        return -1;
      o->central = !strcmp(optarg, "central");
      continue;
    }
    if (c < 256 || set_opt(&optdefs[c - 256], optarg, o) < 0)
      return -1;
  }
  if (o->span == 0)
    o->span = o->len; /* the default span is the cycle's length */
  if (o->central && (o->link_break > 0 || o->spike > 0 || o->freeze > 0 ||
                     o->disconnect > 0 || o->lease > 0)) {
    fprintf(stderr, "ordo_probesim: the faults are simulated for the probes "
                    "only (a lost poll would stall the coordinator)\n");
    return -1;
  }
  return optind == argc ? 0 : -1;
}

/* schedule -- the workload's start events, Poisson arrivals at --rate: each
 * cycle, then about --chains chains, drawn from their own generator so the
 * schedule is the same for both algorithms. */
static simtime schedule(struct sim *s, int *groups) {
  *groups = 0;
  simtime t = 0;
  double per_ns = s->o.rate_per_ms / NS_PER_MS;
  for (int i = 0; i < s->o.cycles; i++) {
    t += (simtime)(-log(1.0 - sim_wrnd01(s)) / per_ns);
    struct ev *e = sim_ev_new(E_START, t);
    e->aux = 1;
    sim_push(s, e);
    ++*groups;
    double c = s->o.chains;
    while (c > 0) {
      if (c >= 1 || sim_wrnd01(s) < c) {
        e = sim_ev_new(E_START, t + (simtime)(sim_wrnd01(s) / per_ns));
        sim_push(s, e);
        ++*groups;
      }
      c -= 1;
    }
  }
  return t;
}

int main(int argc, char **argv) {
  static struct sim sim;
  struct sim *s = &sim;
  if (parse(argc, argv, &s->o) < 0) {
    usage(stderr);
    return 2;
  }
  s->rng = s->o.seed * 0x2545f4914f6cdd1dULL + 1;
  s->wrng = s->o.seed * 0x9e3779b97f4a7c15ULL + 7;
  s->frng = s->o.seed * 0xd1b54a32d192ed03ULL + 13;
  s->freerec = -1;
  s->nodes = s->o.shards + 1;
  s->sh = calloc((size_t)s->o.shards, sizeof(*s->sh));
  /* A double cycle is two designed cycles. */
  s->cy = calloc((size_t)(2 * s->o.cycles + 1), sizeof(*s->cy));
  if (!s->sh || !s->cy) {
    fprintf(stderr, "probesim: out of memory\n");
    return 2;
  }
  int groups;
  simtime end = schedule(s, &groups);
  /* Every txn, key and per-txn array is allocated now, at its bound: a
   * group has L txns and keys at most, a double cycle L - 1 more. */
  s->captx = s->capkeys =
      groups * s->o.len + (s->o.overlap > 0 ? s->o.cycles * s->o.len : 0) + 1;
  s->tx = sim_xrealloc(NULL, (size_t)s->captx * sizeof(*s->tx));
  s->keys = sim_xrealloc(NULL, (size_t)s->capkeys * sizeof(*s->keys));
  s->adj_first = calloc((size_t)s->captx, sizeof(int));
  s->adj_stamp = calloc((size_t)s->captx, sizeof(int));
  s->color = calloc((size_t)s->captx, sizeof(int));
  s->mark = calloc((size_t)s->captx, sizeof(int));
  if (!s->adj_first || !s->adj_stamp || !s->color || !s->mark) {
    fprintf(stderr, "probesim: out of memory\n");
    return 2;
  }
  /* The tail: long enough for the slowest detector to resolve the last
   * cycles, after which a cycle still live is a missed one. The run stops
   * past the missed-cycle bound: a cycle nobody resolves keeps its probe
   * ticks going for ever. */
  s->horizon = end + 50 * NS_PER_MS + (simtime)(20 * s->o.poll_ms * NS_PER_MS);
  s->stop = end + (simtime)(s->o.miss_bound_ms * NS_PER_MS) + 1000 * NS_PER_MS;
  if (s->stop < s->horizon)
    s->stop = s->horizon;
  if (s->o.central)
    sim_at(s, E_POLL, (simtime)(sim_rnd01(s) * s->o.poll_ms * NS_PER_MS), -1, 0,
           -1);
  bool tty = isatty(STDERR_FILENO);
  while (s->nheap > 0) {
    struct ev *e = sim_pop(s);
    if (e->t > s->stop) {
      free(e->edges);
      free(e);
      continue; /* past the end: what is left is dropped */
    }
    s->now = e->t;
    if (sim_defer_frozen(s, e))
      continue;
    if (sim_central_owns(e))
      sim_central_dispatch(s, e);
    else
      sim_dispatch(s, e);
    free(e->edges);
    free(e);
    if (tty && (++s->events & 0xffff) == 0)
      fprintf(stderr, "\rprobesim: %.1f ms simulated, %d txns",
              (double)s->now / NS_PER_MS, s->ntx);
  }
  if (tty)
    fprintf(stderr, "\r\033[K");
  struct report r;
  summarize(s, &r);
  print_report(s, &r);
  return 0;
}
