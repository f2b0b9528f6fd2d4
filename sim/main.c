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
  uint64_t cycles, closed, detected, broken_before, broken_after, missed;
  uint64_t multi_victim, msgs_total;
  double p50, p99, mean, msgs_per_cycle;
};

static void summarize(struct sim *s, struct report *r) {
  memset(r, 0, sizeof(*r));
  r->cycles = (uint64_t)s->ncy;
  for (int i = 0; i < s->ncy; i++) {
    struct cycle *c = &s->cy[i];
    if (!c->closed) {
      r->broken_before++;
      continue;
    }
    r->closed++;
    if (c->victims > 0)
      r->detected++;
    if (c->victims > 1)
      r->multi_victim++;
    if (c->victims == 0 && c->broken_after > 0)
      r->broken_after++;
    if (sim_on_live_cycle(s, c->first))
      r->missed++; /* it closed and lasts to the end: nobody resolved it */
  }
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
  char bugs[80] = "";
  snprintf(
      bugs, sizeof(bugs), "%s%s%s%s", o->bug_no_versions ? "no-versions " : "",
      o->bug_no_confirm ? "no-confirm " : "", o->bug_no_pins ? "no-pins " : "",
      o->bug_no_reprobe ? "no-reprobe " : "");
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
  out_kv(&w, "cycles", "%" PRIu64, r->cycles);
  out_kv(&w, "closed", "%" PRIu64, r->closed);
  out_kv(&w, "detected", "%" PRIu64, r->detected);
  out_kv(&w, "local_detected", "%" PRIu64, s->local_found);
  out_kv(&w, "broken_before_close", "%" PRIu64, r->broken_before);
  out_kv(&w, "broken_by_timeout", "%" PRIu64, r->broken_after);
  out_kv(&w, "missed", "%" PRIu64, r->missed);
  out_kv(&w, "phantom_aborts", "%" PRIu64, s->phantoms);
  out_kv(&w, "victims", "%" PRIu64, s->victims_total);
  out_kv(&w, "multi_victim_cycles", "%" PRIu64, r->multi_victim);
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
  out_kv(&w, "aborts_dropped_dup", "%" PRIu64, s->dup_aborts);
  out_kv(&w, "polls", "%" PRIu64, s->polls);
  out_kv(&w, "polls_skipped", "%" PRIu64, s->polls_skipped);
  out_kv(&w, "sim_end_ms", "%.3f", (double)s->now / NS_PER_MS);
  if (o->json)
    printf("}\n");
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: ordo_probesim [options]\n"
          "  --algo probes|central   the detector (default probes)\n"
          "  --central-confirm       the coordinator's victim is confirmed "
          "first\n"
          "  --shards N              shards, 1..1000 (default 1000)\n"
          "  --len L                 cycle length, 2..16 (default 4)\n"
          "  --span S                shards a cycle's keys spread over "
          "(default L)\n"
          "  --cycles C              cycles to make (default 2000)\n"
          "  --rate R                cycles begun per ms (default 1)\n"
          "  --chains X              chains that end, per cycle (default 1)\n"
          "  --break-frac F          cycles with a breaker's timeout "
          "(default 0.3)\n"
          "  --retry-frac F          breakers that keep their key and ask "
          "again (0.5)\n"
          "  --rtt-us U              round trip (default 200)\n"
          "  --jitter J              one-way delay's jitter, +-J (default "
          "0.2)\n"
          "  --probe-delay-us U      (default 1000)\n"
          "  --poll-ms P             the coordinator's period (default 10)\n"
          "  --spread-us U           a group's requests spread (default 50)\n"
          "  --work-us U             work after a grant (default 100)\n"
          "  --hold-us U             a chain's end holds ~U (default 500)\n"
          "  --pin-bound-ms M        (default 2000)\n"
          "  --seed N                (default 1)\n"
          "  --json                  one JSON object instead of lines\n"
          "  --bug-no-confirm, --bug-no-pins, --bug-no-versions,\n"
          "  --bug-no-reprobe        disable one step (see sim/README.md)\n");
}

static int parse(int argc, char **argv, struct opts *o) {
  enum {
    O_ALGO = 256,
    O_CC,
    O_SHARDS,
    O_LEN,
    O_SPAN,
    O_CYCLES,
    O_RATE,
    O_CHAINS,
    O_BREAK,
    O_RETRY,
    O_RTT,
    O_JITTER,
    O_DELAY,
    O_POLL,
    O_SPREAD,
    O_WORK,
    O_HOLD,
    O_PINB,
    O_SEED,
    O_JSON,
    O_BNC,
    O_BNP,
    O_BNV,
    O_BNR,
    O_HELP
  };
  static const struct option lo[] = {{"algo", 1, 0, O_ALGO},
                                     {"central-confirm", 0, 0, O_CC},
                                     {"shards", 1, 0, O_SHARDS},
                                     {"len", 1, 0, O_LEN},
                                     {"span", 1, 0, O_SPAN},
                                     {"cycles", 1, 0, O_CYCLES},
                                     {"rate", 1, 0, O_RATE},
                                     {"chains", 1, 0, O_CHAINS},
                                     {"break-frac", 1, 0, O_BREAK},
                                     {"retry-frac", 1, 0, O_RETRY},
                                     {"rtt-us", 1, 0, O_RTT},
                                     {"jitter", 1, 0, O_JITTER},
                                     {"probe-delay-us", 1, 0, O_DELAY},
                                     {"poll-ms", 1, 0, O_POLL},
                                     {"spread-us", 1, 0, O_SPREAD},
                                     {"work-us", 1, 0, O_WORK},
                                     {"hold-us", 1, 0, O_HOLD},
                                     {"pin-bound-ms", 1, 0, O_PINB},
                                     {"seed", 1, 0, O_SEED},
                                     {"json", 0, 0, O_JSON},
                                     {"bug-no-confirm", 0, 0, O_BNC},
                                     {"bug-no-pins", 0, 0, O_BNP},
                                     {"bug-no-versions", 0, 0, O_BNV},
                                     {"bug-no-reprobe", 0, 0, O_BNR},
                                     {"help", 0, 0, O_HELP},
                                     {0, 0, 0, 0}};
  *o = (struct opts){.shards = 1000,
                     .len = 4,
                     .span = -1,
                     .cycles = 2000,
                     .rtt_us = 200,
                     .jitter = 0.2,
                     .probe_delay_us = 1000,
                     .poll_ms = 10,
                     .rate_per_ms = 1,
                     .chains = 1,
                     .break_frac = 0.3,
                     .retry_frac = 0.5,
                     .spread_us = 50,
                     .work_us = 100,
                     .hold_us = 500,
                     .pin_bound_ms = 2000,
                     .seed = 1};
  int c;
  while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    switch (c) {
    case O_ALGO:
      if (strcmp(optarg, "probes") && strcmp(optarg, "central"))
        return -1;
      o->central = !strcmp(optarg, "central");
      break;
    case O_CC:
      o->central_confirm = 1;
      break;
    case O_SHARDS:
      o->shards = atoi(optarg);
      break;
    case O_LEN:
      o->len = atoi(optarg);
      break;
    case O_SPAN:
      o->span = atoi(optarg);
      break;
    case O_CYCLES:
      o->cycles = atoi(optarg);
      break;
    case O_RATE:
      o->rate_per_ms = atof(optarg);
      break;
    case O_CHAINS:
      o->chains = atof(optarg);
      break;
    case O_BREAK:
      o->break_frac = atof(optarg);
      break;
    case O_RETRY:
      o->retry_frac = atof(optarg);
      break;
    case O_RTT:
      o->rtt_us = atof(optarg);
      break;
    case O_JITTER:
      o->jitter = atof(optarg);
      break;
    case O_DELAY:
      o->probe_delay_us = atof(optarg);
      break;
    case O_POLL:
      o->poll_ms = atof(optarg);
      break;
    case O_SPREAD:
      o->spread_us = atof(optarg);
      break;
    case O_WORK:
      o->work_us = atof(optarg);
      break;
    case O_HOLD:
      o->hold_us = atof(optarg);
      break;
    case O_PINB:
      o->pin_bound_ms = atof(optarg);
      break;
    case O_SEED:
      o->seed = strtoull(optarg, NULL, 10);
      break;
    case O_JSON:
      o->json = 1;
      break;
    case O_BNC:
      o->bug_no_confirm = 1;
      break;
    case O_BNP:
      o->bug_no_pins = 1;
      break;
    case O_BNV:
      o->bug_no_versions = 1;
      break;
    case O_BNR:
      o->bug_no_reprobe = 1;
      break;
    case O_HELP:
      usage(stdout);
      exit(0);
    default:
      return -1;
    }
  }
  if (o->span < 0)
    o->span = o->len;
  if (optind != argc || o->shards < 1 || o->shards > 1000 || o->len < 2 ||
      o->len > MAXHOPS || o->span < 1 || o->cycles < 0 || o->rate_per_ms <= 0 ||
      o->chains < 0 || o->break_frac < 0 || o->break_frac > 1 ||
      o->retry_frac < 0 || o->retry_frac > 1 || o->rtt_us < 0 ||
      o->jitter < 0 || o->jitter >= 1 || o->probe_delay_us < 0 ||
      o->poll_ms <= 0 || o->spread_us < 0 || o->work_us < 0 || o->hold_us < 0 ||
      o->pin_bound_ms < 0)
    return -1;
  return 0;
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
  s->nodes = s->o.shards + 1;
  s->last = sim_xrealloc(NULL, (size_t)s->nodes * (size_t)s->nodes *
                                   sizeof(*s->last));
  memset(s->last, 0, (size_t)s->nodes * (size_t)s->nodes * sizeof(*s->last));
  s->sh = sim_xrealloc(NULL, (size_t)s->o.shards * sizeof(*s->sh));
  memset(s->sh, 0, (size_t)s->o.shards * sizeof(*s->sh));
  s->cy = sim_xrealloc(NULL, (size_t)(s->o.cycles + 1) * sizeof(*s->cy));
  int groups;
  simtime end = schedule(s, &groups);
  /* Every txn, key and per-txn array is allocated now, at its bound. */
  s->captx = s->capkeys = groups * s->o.len + 1;
  s->tx = sim_xrealloc(NULL, (size_t)s->captx * sizeof(*s->tx));
  s->keys = sim_xrealloc(NULL, (size_t)s->capkeys * sizeof(*s->keys));
  s->adj_first = calloc((size_t)s->captx, sizeof(int));
  s->adj_stamp = calloc((size_t)s->captx, sizeof(int));
  s->color = calloc((size_t)s->captx, sizeof(int));
  if (!s->adj_first || !s->adj_stamp || !s->color) {
    fprintf(stderr, "probesim: out of memory\n");
    return 2;
  }
  /* The tail: long enough for the slowest detector to resolve the last
   * cycles, after which a cycle still live is a missed one. */
  s->horizon = end + 50 * NS_PER_MS + (simtime)(20 * s->o.poll_ms * NS_PER_MS);
  if (s->o.central)
    sim_at(s, E_POLL, (simtime)(sim_rnd01(s) * s->o.poll_ms * NS_PER_MS), -1, 0,
           -1);
  bool tty = isatty(STDERR_FILENO);
  while (s->nheap > 0) {
    struct ev *e = sim_pop(s);
    s->now = e->t;
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
