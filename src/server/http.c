/*
 * http.c -- ordod's metrics port: GET /metrics in Prometheus's text format,
 * and a status page (GET /, /graph.svg, /graph.dot) that shows the
 * sessions, the hottest keys, the wait-for graph and the last deadlocks.
 * See README.md ("The metrics port") and docs/metrics.md.
 *
 * HTTP is libmicrohttpd's; nothing here parses a request. Its daemon runs
 * with an external event loop inside ordod's one libuv loop: MHD's epoll
 * descriptor is watched by a uv_poll_t, MHD_run() runs when it is
 * readable, and MHD_get_timeout() drives a uv_timer_t. So every handler
 * runs on the loop thread and reads the server's and the engine's state as
 * a command does, without a lock of its own; and no client of the port can
 * hold the loop (MHD's sockets never block, and a silent client is dropped
 * after HTTP_IDLE_S).
 *
 * Interface: srv_http_start, srv_http_port, srv_http_close.
 */
#include "server/server.h"

#include "core/table.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HTTP_IDLE_S 10          /* a connection silent this long is closed */
#define HTTP_CONNS 64           /* connections at once */
#define HTTP_MEMORY (32u << 10) /* one connection's buffers: its headers */
#define HTTP_HOT_KEYS 20        /* keys on the status page */
#define HTTP_HOT_NAMES 16       /* holders and waiters named per key */
#define HTTP_SESSIONS 200       /* sessions on the status page */
#define HTTP_DEADLOCKS 10       /* deadlock records on the status page */
/* A graph with more edges than this is not laid out on the loop thread,
 * which serves locks meanwhile: a chain of 200 waits takes circo about
 * 50 ms (390: 100 ms). */
#define HTTP_GRAPH_EDGES 200

struct srv_http {
  srv *s;
  struct MHD_Daemon *d;
  uv_poll_t poll;
  uv_timer_t timer;
  int port;
  GVC_t *gvc;       /* made at the first graph, kept until the close */
  int open_handles; /* freed when both handles' closes have run */
};

/* ---- Output ------------------------------------------------------------ */

/* A response's body, written with stdio into memory. */
typedef struct body {
  FILE *f;
  char *buf;
  size_t len;
} body;

static bool body_open(body *b) {
  b->buf = NULL;
  b->len = 0;
  b->f = open_memstream(&b->buf, &b->len);
  return b->f != NULL;
}

/* Writes p[0..n) for HTML: the five special characters as entities, and a
 * byte that is not printable ASCII (a binary key's, or UTF-8's) as the
 * text \xHH, so that any key shows as what it is, and none can end an
 * element or an attribute. */
static void html_bytes(FILE *f, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    switch (b[i]) {
    case '&':
      fputs("&amp;", f);
      break;
    case '<':
      fputs("&lt;", f);
      break;
    case '>':
      fputs("&gt;", f);
      break;
    case '"':
      fputs("&quot;", f);
      break;
    case '\'':
      fputs("&#39;", f);
      break;
    default:
      if (b[i] >= 0x20 && b[i] < 0x7f)
        fputc(b[i], f);
      else
        fprintf(f, "\\x%02x", b[i]);
    }
  }
}

static void html_str(FILE *f, const char *s) {
  html_bytes(f, s, strlen(s));
}

/* ---- GET /metrics -------------------------------------------------------
 *
 * Prometheus's text exposition format 0.0.4: each metric with its HELP and
 * TYPE lines. The values are INFO's (commands.c, cmd_info), read the same
 * way, so a scrape and an INFO between the same commands agree.
 */

static const char *const victim_names[ORDO_VICTIM__COUNT] = {
    "youngest",         "oldest",          "fewest_locks", "least_work",
    "nearest_deadline", "lowest_priority", "random"};

static void m_head(FILE *f, const char *name, const char *type,
                   const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

typedef struct m_value {
  const char *name, *type, *help;
  uint64_t v;
} m_value;

/* A histogram from the engine's log2 buckets: bucket i counts values in
 * [2^(i-1), 2^i) us (bucket 0: under 1 us), so the cumulative count up to
 * bucket i is the count of values below 2^i us, which is le="2^i us". A
 * value of exactly 2^i us was truncated from [2^i, 2^i + 1) us, above the
 * bound, so the bound is exact. The last bucket also holds every longer
 * value: it is +Inf's alone. The engine keeps no sum: _sum counts each
 * value at its bucket's midpoint (bucket 0's at 0). */
static void m_hist(FILE *f, const char *name, const char *help,
                   const uint64_t h[ORDO_HIST_BUCKETS]) {
  m_head(f, name, "histogram", help);
  uint64_t cum = 0;
  double sum = 0;
  for (unsigned i = 0; i < ORDO_HIST_BUCKETS; i++) {
    cum += h[i];
    if (i > 0)
      sum += (double)h[i] * 1.5 * (double)(1ull << (i - 1)) * 1e-6;
    if (i + 1 < ORDO_HIST_BUCKETS) {
      unsigned long long us = 1ull << i;
      fprintf(f, "%s_bucket{le=\"%llu.%06llu\"} %llu\n", name, us / 1000000u,
              us % 1000000u, (unsigned long long)cum);
    }
  }
  fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
          (unsigned long long)cum, name, sum, name, (unsigned long long)cum);
}

/* The value of "name:N" in INFO-style text, or false. */
static bool info_field(const char *buf, const char *name, uint64_t *v) {
  size_t n = strlen(name);
  for (const char *p = buf; (p = strstr(p, name)) != NULL; p += n) {
    if ((p == buf || p[-1] == '\n') && p[n] == ':') {
      *v = strtoull(p + n + 1, NULL, 10);
      return true;
    }
  }
  return false;
}

/* The probes' counters (probe.c), as INFO's Probes section has them. */
static void m_probes(FILE *f, srv *s) {
  static const struct {
    const char *field, *name, *type, *help;
  } probe_metrics[] = {
      {"peers", "ordo_peers", "gauge", "The other shards --peers names."},
      {"peers_linked", "ordo_peers_linked", "gauge",
       "Peers with a live link now."},
      {"probes_sent", "ordo_probes_sent_total", "counter",
       "Deadlock probes sent to other shards."},
      {"probes_received", "ordo_probes_received_total", "counter",
       "Deadlock probes received from other shards."},
      {"probes_stale", "ordo_probes_stale_total", "counter",
       "Probes received for a wait that had already ended."},
      {"confirms_failed", "ordo_probe_confirms_failed_total", "counter",
       "Cross-shard cycles whose confirmation failed or ran out of time "
       "(no victim aborted)."},
      {"peer_messages_dropped", "ordo_peer_messages_dropped_total", "counter",
       "Messages to peers dropped: no link up, or the write failed."},
  };
  char buf[2048];
  size_t n = srv_probe_info(s, buf, sizeof buf);
  buf[n < sizeof buf ? n : sizeof buf - 1] = 0;
  for (size_t i = 0; i < sizeof probe_metrics / sizeof probe_metrics[0]; i++) {
    uint64_t v;
    if (!info_field(buf, probe_metrics[i].field, &v))
      continue;
    m_head(f, probe_metrics[i].name, probe_metrics[i].type,
           probe_metrics[i].help);
    fprintf(f, "%s %llu\n", probe_metrics[i].name, (unsigned long long)v);
  }
}

/* Keys held now, one per key and holding session. */
static uint64_t held_keys(srv *s) {
  uint64_t n = 0;
  for (size_t i = 0; i < s->smap_cap; i++)
    for (sess *x = s->smap[i]; x; x = x->hnext)
      if (x->txn)
        n += ordo__owner_nholds(ordo__engine_owner(x->txn));
  return n;
}

static void page_metrics(srv *s, FILE *f) {
  ordo_stats_t st;
  ordo_stats(s->o, &st);
  const m_value simple[] = {
      {"ordo_sessions", "gauge", "Sessions open now, attached or detached.",
       s->nsess},
      {"ordo_connections", "gauge", "Client connections open now.",
       (uint64_t)s->nconns},
      {"ordo_connections_total", "counter", "Client connections accepted.",
       s->total_conns},
      {"ordo_connections_rejected_total", "counter",
       "Client connections refused by --maxclients.", s->rejected_conns},
      {"ordo_commands_total", "counter", "Commands run.", s->total_cmds},
      {"ordo_protocol_errors_total", "counter",
       "Connections closed for breaking the protocol.", s->protocol_errors},
      {"ordo_output_cutoffs_total", "counter",
       "Connections closed for passing --max-output.", s->output_cutoffs},
      {"ordo_locks_held", "gauge",
       "Locks held now: one per key and holding session.", held_keys(s)},
      {"ordo_lock_requests_waiting", "gauge", "Lock requests queued now.",
       st.waiting},
      {"ordo_lock_objects", "gauge",
       "The engine's lock objects alive now (held, awaited or cached).",
       st.locks},
      {"ordo_lock_objects_max", "gauge", "The engine's bound, --max-locks.",
       (uint64_t)s->cfg.max_locks},
      {"ordo_locks_acquired_total", "counter",
       "Lock requests granted (a LOCK of several keys counts once).",
       st.acquired},
      {"ordo_locks_released_total", "counter", "Keys released.", st.released},
      {"ordo_lock_waits_total", "counter", "Lock requests that had to queue.",
       st.waited},
      {"ordo_lock_timeouts_total", "counter",
       "Lock requests that ran out of time (WAIT).", st.timeouts},
      {"ordo_lock_wakeups_total", "counter", "Waiters woken by a grant.",
       st.wakeups},
      {"ordo_lock_pokes_total", "counter",
       "Sleeping waiters woken to try again themselves.", st.pokes},
      {"ordo_lock_limits_total", "counter",
       "Lock requests refused by --max-locks.", st.limits},
      {"ordo_lease_expiries_total", "counter", "Session leases that ran out.",
       s->lease_expiries},
      {"ordo_deadlock_reorders_total", "counter",
       "Soft cycles resolved by reordering a queue (no victim).", st.reorders},
      {"ordo_deadlock_sweep_finds_total", "counter",
       "Cycles the engine's background sweep found (should stay 0).",
       st.sweep_finds},
      {"ordo_long_waits_total", "counter",
       "Waits the engine logged for passing its long-wait bound.",
       st.long_waits},
      {"ordo_order_reports_total", "counter",
       "Lock-order inversions of key classes reported (--order).",
       st.order_reports},
      {"ordo_order_refusals_total", "counter",
       "LOCKs refused for a lock-order inversion (--order refuse).",
       s->order_refusals},
  };
  m_head(f, "ordo_info", "gauge", "ordod's version, as a label; always 1.");
  fprintf(f, "ordo_info{version=\"%s\"} 1\n", ORDOD_VERSION);
  for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++) {
    m_head(f, simple[i].name, simple[i].type, simple[i].help);
    fprintf(f, "%s %llu\n", simple[i].name, (unsigned long long)simple[i].v);
  }
  m_head(f, "ordo_lock_wait_max_seconds", "gauge", "The longest wait seen.");
  fprintf(f, "ordo_lock_wait_max_seconds %.6f\n",
          (double)st.max_wait_us * 1e-6);
  m_head(f, "ordo_deadlocks_total", "counter",
         "Deadlocks this server ended: found by the engine (local) or by "
         "the probes across shards (cross_shard, counted at the victim's "
         "shard alone).");
  fprintf(f,
          "ordo_deadlocks_total{kind=\"local\"} %llu\n"
          "ordo_deadlocks_total{kind=\"cross_shard\"} %llu\n",
          (unsigned long long)st.deadlocks,
          (unsigned long long)srv_probe_deadlocks(s));
  m_head(f, "ordo_deadlock_victims_total", "counter",
         "The engine's deadlock victims, by the policy that chose them.");
  for (int i = 0; i < ORDO_VICTIM__COUNT; i++)
    fprintf(f, "ordo_deadlock_victims_total{policy=\"%s\"} %llu\n",
            victim_names[i], (unsigned long long)st.victims[i]);
  m_hist(f, "ordo_lock_wait_seconds",
         "Lock waits, from queueing to the end. _sum is estimated from the "
         "log2 buckets' midpoints: the engine keeps no exact sum.",
         st.wait_hist);
  m_hist(f, "ordo_lock_hold_seconds",
         "Hold times of a sample of releases (1 in 64). _sum is estimated "
         "from the log2 buckets' midpoints: the engine keeps no exact sum.",
         st.hold_hist);
  m_hist(f, "ordo_deadlock_detect_seconds",
         "From a cycle's last edge to its victim's return. _sum is estimated "
         "from the log2 buckets' midpoints: the engine keeps no exact sum.",
         st.detect_hist);
  if (s->probe)
    m_probes(f, s);
}

/* ---- The wait-for graph ---------------------------------------------------
 *
 * GRAPH's DOT (srv_graph_text), with each session that it names given the
 * id sess-<id>, which graphviz keeps as the id of the node's element in the
 * SVG.
 */

static char *graph_dot(srv *s, size_t *len, size_t *nedges) {
  size_t got = 0;
  char *dot = srv_graph_text(s, ORDO_GRAPH_DOT, &got);
  if (!dot)
    return NULL;
  *nedges = 0;
  for (const char *p = dot; (p = memmem(p, got - (size_t)(p - dot), "->", 2));
       p += 2)
    (*nedges)++;
  size_t cut = got;
  while (cut > 0 && (dot[cut - 1] == '\n' || dot[cut - 1] == '}'))
    cut--;
  body b;
  if (!body_open(&b)) {
    free(dot);
    return NULL;
  }
  fwrite(dot, 1, cut, b.f);
  fputc('\n', b.f);
  for (size_t i = 0; i < s->smap_cap; i++)
    for (sess *x = s->smap[i]; x; x = x->hnext) {
      char name[48];
      int nl = snprintf(name, sizeof name, "\"txn %llu\"",
                        (unsigned long long)x->id);
      if (nl > 0 && memmem(dot, got, name, (size_t)nl))
        fprintf(b.f, "  %s [id=\"sess-%llu\"];\n", name,
                (unsigned long long)x->id);
    }
  fputs("}\n", b.f);
  bool ok = fclose(b.f) == 0;
  free(dot);
  if (!ok) {
    free(b.buf);
    return NULL;
  }
  *len = b.len;
  return b.buf;
}

/* The graph laid out by circo and rendered as SVG, in a malloc'd buffer; or
 * NULL, with why set (too large, or graphviz failed). circo draws each
 * cycle as a circle, which is what a deadlock looks like; and graphviz
 * 2.43's dot loses two virtual edges' memory at each layout of a cycle,
 * which a page that reloads every 2 s would pile up. */
static char *graph_svg(srv_http *h, size_t *len, const char **why) {
  size_t dlen = 0, nedges = 0;
  char *dot = graph_dot(h->s, &dlen, &nedges);
  *why = "no memory";
  if (!dot)
    return NULL;
  if (nedges > HTTP_GRAPH_EDGES) {
    free(dot);
    *why = "the graph is too large to lay out here: see /graph.dot";
    return NULL;
  }
  /* The engine writes a key's unprintable bytes in a label as \xHH, which
   * graphviz would show as xHH (it drops a backslash before a letter it does
   * not know): doubled, the backslash shows. No other backslash in the
   * text is followed by an x (a label's line break is \n). */
  body esc;
  if (!body_open(&esc)) {
    free(dot);
    return NULL;
  }
  for (size_t i = 0; i < dlen; i++) {
    if (dot[i] == '\\' && i + 1 < dlen && dot[i + 1] == 'x')
      fputc('\\', esc.f);
    fputc(dot[i], esc.f);
  }
  bool ok = fclose(esc.f) == 0;
  free(dot);
  if (!ok) {
    free(esc.buf);
    return NULL;
  }
  if (!h->gvc)
    h->gvc = gvContext();
  Agraph_t *g = h->gvc ? agmemread(esc.buf) : NULL;
  free(esc.buf);
  *why = "graphviz could not read the graph";
  if (!g)
    return NULL;
  char *out = NULL, *svg = NULL;
  unsigned int olen = 0;
  if (gvLayout(h->gvc, g, "circo") == 0) {
    if (gvRenderData(h->gvc, g, "svg", &out, &olen) == 0 && out) {
      svg = malloc(olen + 1u);
      if (svg) {
        memcpy(svg, out, olen);
        svg[olen] = 0;
        *len = olen;
      }
    }
    if (out)
      gvFreeRenderData(out);
    gvFreeLayout(h->gvc, g);
  }
  agclose(g);
  if (!svg)
    *why = "graphviz could not lay out the graph";
  return svg;
}

/* ---- GET / ---------------------------------------------------------------
 */

/* The hottest keys: most waiters, then most holders. */
typedef struct hot_key {
  uint8_t key[ORDO_DL_KEY_MAX];
  size_t len, klen; /* bytes kept, bytes in the key */
  size_t nh, nq;
  ordo__snap_item h[HTTP_HOT_NAMES], q[HTTP_HOT_NAMES];
} hot_key;

typedef struct hot_set {
  hot_key k[HTTP_HOT_KEYS];
  size_t n;
} hot_set;

static bool hotter(size_t nq, size_t nh, const hot_key *than) {
  return nq != than->nq ? nq > than->nq : nh > than->nh;
}

static void hot_item(void *arg, const uint8_t *key, size_t len,
                     const ordo__snap_item *holders, size_t nholders,
                     const ordo__snap_item *queue, size_t nqueue) {
  hot_set *hs = arg;
  size_t at = hs->n;
  while (at > 0 && hotter(nqueue, nholders, &hs->k[at - 1]))
    at--;
  if (at >= HTTP_HOT_KEYS)
    return;
  if (hs->n < HTTP_HOT_KEYS)
    hs->n++;
  memmove(&hs->k[at + 1], &hs->k[at], (hs->n - 1 - at) * sizeof hs->k[0]);
  hot_key *k = &hs->k[at];
  k->klen = len;
  k->len = len < sizeof k->key ? len : sizeof k->key;
  memcpy(k->key, key, k->len);
  k->nh = nholders;
  k->nq = nqueue;
  memcpy(k->h, holders,
         (nholders < HTTP_HOT_NAMES ? nholders : HTTP_HOT_NAMES) *
             sizeof k->h[0]);
  memcpy(k->q, queue,
         (nqueue < HTTP_HOT_NAMES ? nqueue : HTTP_HOT_NAMES) * sizeof k->q[0]);
}

static void html_owners(FILE *f, const ordo__snap_item *it, size_t n) {
  for (size_t i = 0; i < n && i < HTTP_HOT_NAMES; i++)
    fprintf(f, "%s%llu %s", i ? ", " : "", (unsigned long long)it[i].owner,
            it[i].mode == ORDO_MODE_S ? "S" : "X");
  if (n > HTTP_HOT_NAMES)
    fprintf(f, " and %zu more", n - HTTP_HOT_NAMES);
}

static void page_sessions(srv *s, FILE *f) {
  fprintf(f,
          "<h2>Sessions (%zu)</h2>\n<table>\n<tr><th>id</th><th>user</th>"
          "<th>addr</th><th>name</th><th>holds</th><th>waiting</th></tr>\n",
          s->nsess);
  size_t shown = 0;
  for (size_t i = 0; i < s->smap_cap && shown < HTTP_SESSIONS; i++)
    for (sess *x = s->smap[i]; x && shown < HTTP_SESSIONS; x = x->hnext) {
      if (!x->txn)
        continue;
      shown++;
      conn *c = x->c;
      /* The id sess-<id> is the graph's node's: a row names it as data. */
      fprintf(f, "<tr data-sess=\"%llu\"><td>%llu</td><td>",
              (unsigned long long)x->id, (unsigned long long)x->id);
      if (c && c->user_len)
        html_bytes(f, c->user, c->user_len);
      else if (!c && x->user_len)
        html_bytes(f, x->user, x->user_len);
      fputs("</td><td>", f);
      html_str(f, c ? c->addr : "(detached)");
      fputs("</td><td>", f);
      if (c)
        html_str(f, c->name);
      fprintf(f, "</td><td>%zu</td><td>",
              ordo__owner_nholds(ordo__engine_owner(x->txn)));
      for (size_t k = 0; x->waiting && k < x->nreq && k < HTTP_HOT_NAMES; k++) {
        fputs(k ? ", " : "", f);
        html_bytes(f, x->req[k].key, x->req[k].len);
        fputs(x->req[k].mode == ORDO_MODE_S ? " S" : " X", f);
      }
      fputs("</td></tr>\n", f);
    }
  fputs("</table>\n", f);
  if (shown < s->nsess)
    fprintf(f, "<p>and %zu more</p>\n", s->nsess - shown);
}

static void page_hot_keys(srv *s, FILE *f) {
  hot_set *hs = calloc(1, sizeof *hs);
  if (!hs)
    return;
  ordo__table_snapshot(ordo__engine_table(s->o), hot_item, hs);
  fprintf(f, "<h2>Hottest keys</h2>\n<table>\n<tr><th>key</th><th>holders"
             "</th><th>waiters</th></tr>\n");
  for (size_t i = 0; i < hs->n; i++) {
    hot_key *k = &hs->k[i];
    fputs("<tr><td class=\"key\">", f);
    html_bytes(f, k->key, k->len);
    if (k->len < k->klen)
      fprintf(f, "... (%zu bytes)", k->klen);
    fprintf(f, "</td><td>%zu: ", k->nh);
    html_owners(f, k->h, k->nh);
    fprintf(f, "</td><td>%zu: ", k->nq);
    html_owners(f, k->q, k->nq);
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
  free(hs);
}

static void page_deadlocks(srv *s, FILE *f) {
  fprintf(f,
          "<h2>Deadlocks (%llu ended)</h2>\n<table>\n<tr><th>seq</th>"
          "<th>time (UTC)</th><th>kind</th><th>victim</th><th>cycle</th>"
          "</tr>\n",
          (unsigned long long)s->ndl);
  for (uint64_t i = 0; i < s->ndl && i < HTTP_DEADLOCKS; i++) {
    const srv_dl *r = &s->dl[(s->ndl - 1 - i) % SRV_DL_HISTORY];
    time_t t = (time_t)(r->time_ms / 1000u);
    struct tm tm;
    char when[32] = "";
    if (gmtime_r(&t, &tm))
      strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(f, "<tr><td>%llu</td><td>%s</td><td>%s</td><td>%llu</td><td>",
            (unsigned long long)r->seq, when,
            r->cross_shard ? "cross-shard" : "local",
            (unsigned long long)r->victim);
    html_str(f, r->cycle);
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
}

static void page_status(srv_http *h, FILE *f) {
  srv *s = h->s;
  fprintf(f,
          "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"refresh\" content=\"2\">\n"
          "<title>ordod %d</title>\n<style>body{font-family:sans-serif}"
          "table{border-collapse:collapse}td,th{border:1px solid #ccc;"
          "padding:2px 6px;text-align:left}.key{font-family:monospace}"
          "</style>\n</head><body>\n<h1>ordod on port %d</h1>\n"
          "<p>version %s, fencing epoch %llu, %d connections; "
          "<a href=\"/metrics\">metrics</a>, <a href=\"/graph.svg\">graph"
          ".svg</a>, <a href=\"/graph.dot\">graph.dot</a></p>\n",
          s->cfg.port, s->cfg.port, ORDOD_VERSION, (unsigned long long)s->epoch,
          s->nconns);
  page_sessions(s, f);
  page_hot_keys(s, f);
  fputs("<h2>Wait-for graph</h2>\n", f);
  size_t len = 0;
  const char *why = "";
  char *svg = graph_svg(h, &len, &why);
  if (svg) {
    /* The SVG's own prologue (an XML declaration and a DOCTYPE) cannot
     * stand inside HTML: the document starts at its <svg element. */
    char *start = strstr(svg, "<svg");
    fputs(start ? start : svg, f);
    free(svg);
  } else {
    fputs("<p>", f);
    html_str(f, why);
    fputs("</p>\n", f);
  }
  page_deadlocks(s, f);
  fputs("</body></html>\n", f);
}

/* ---- Requests --------------------------------------------------------------
 */

static enum MHD_Result reply(struct MHD_Connection *mc, unsigned status,
                             const char *type, char *buf, size_t len) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(buf);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  enum MHD_Result ret = MHD_queue_response(mc, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *mc, unsigned status,
                                  const char *text) {
  char *buf = strdup(text);
  return buf ? reply(mc, status, "text/plain; charset=utf-8", buf, strlen(text))
             : MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_len, void **req_cls) {
  srv_http *h = cls;
  (void)version;
  (void)upload;
  (void)req_cls;
  /* A request with a body is answered at its first call: MHD then drops
   * the body (and closes the connection after the reply). */
  *upload_len = 0;
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
      strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply_text(mc, MHD_HTTP_METHOD_NOT_ALLOWED,
                      "405 method not allowed: GET or HEAD\n");
  bool metrics = strcmp(url, "/metrics") == 0;
  bool status = strcmp(url, "/") == 0;
  bool svg = strcmp(url, "/graph.svg") == 0;
  bool dot = strcmp(url, "/graph.dot") == 0;
  if (!metrics && !status && !svg && !dot)
    return reply_text(mc, MHD_HTTP_NOT_FOUND,
                      "404 not found: /, /metrics, /graph.svg, /graph.dot\n");
  if (svg || dot) {
    size_t len = 0, nedges = 0;
    const char *why = "no memory";
    char *buf = svg ? graph_svg(h, &len, &why) : graph_dot(h->s, &len, &nedges);
    if (!buf)
      return reply_text(mc, MHD_HTTP_SERVICE_UNAVAILABLE, why);
    return reply(mc, MHD_HTTP_OK,
                 svg ? "image/svg+xml" : "text/vnd.graphviz; charset=utf-8",
                 buf, len);
  }
  body b;
  if (!body_open(&b))
    return reply_text(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "no memory\n");
  if (metrics)
    page_metrics(h->s, b.f);
  else
    page_status(h, b.f);
  if (fclose(b.f) != 0) {
    free(b.buf);
    return reply_text(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "no memory\n");
  }
  return reply(mc, MHD_HTTP_OK,
               metrics ? "text/plain; version=0.0.4; charset=utf-8"
                       : "text/html; charset=utf-8",
               b.buf, b.len);
}

/* ---- The daemon in the loop ------------------------------------------------
 */

static void http_timer_cb(uv_timer_t *t);

/* Runs what MHD has ready, then sets the timer to its next deadline: 0
 * when it has work left over (a connection whose edge-triggered events
 * were not all consumed), else a silent connection's timeout. */
static void http_run(srv_http *h) {
  MHD_run(h->d);
  MHD_UNSIGNED_LONG_LONG ms = 0;
  if (MHD_get_timeout(h->d, &ms) == MHD_YES)
    uv_timer_start(&h->timer, http_timer_cb, (uint64_t)ms, 0);
  else
    uv_timer_stop(&h->timer);
}

static void http_timer_cb(uv_timer_t *t) {
  http_run(t->data);
}

static void http_poll_cb(uv_poll_t *p, int status, int events) {
  (void)status;
  (void)events;
  http_run(p->data);
}

static void on_mhd_log(void *arg, const char *fmt, va_list ap) {
  srv_http *h = arg;
  char line[512];
  vsnprintf(line, sizeof line, fmt, ap);
  size_t n = strlen(line);
  while (n > 0 && line[n - 1] == '\n')
    line[--n] = 0;
  srv_log(h->s, 1, "metrics port: %s", line);
}

int srv_http_start(srv *s, char *err, size_t errlen) {
  srv_http *h = calloc(1, sizeof *h);
  if (!h) {
    snprintf(err, errlen, "no memory for the metrics port");
    return -1;
  }
  h->s = s;
  struct sockaddr_storage addr;
  const char *bind = s->cfg.metrics_bind;
  bool v6 = strchr(bind, ':') != NULL;
  int rc =
      v6 ? uv_ip6_addr(bind, s->cfg.metrics_port, (struct sockaddr_in6 *)&addr)
         : uv_ip4_addr(strcmp(bind, "localhost") == 0 ? "127.0.0.1" : bind,
                       s->cfg.metrics_port, (struct sockaddr_in *)&addr);
  if (rc != 0) {
    snprintf(err, errlen, "bad --metrics-bind address '%s'", bind);
    free(h);
    return -1;
  }
  h->d = MHD_start_daemon(
      MHD_USE_EPOLL | MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0),
      (uint16_t)s->cfg.metrics_port, NULL, NULL, on_request, h,
      /* The logger first, so that no option's complaint goes to stderr
       * past it. */
      MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h, MHD_OPTION_SOCK_ADDR,
      (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned)HTTP_IDLE_S, MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNS,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MEMORY, MHD_OPTION_END);
  const union MHD_DaemonInfo *epfd =
      h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
  const union MHD_DaemonInfo *port =
      h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
  if (!epfd || !port) {
    snprintf(err, errlen, "cannot serve metrics on %s:%d", bind,
             s->cfg.metrics_port);
    if (h->d)
      MHD_stop_daemon(h->d);
    free(h);
    return -1;
  }
  h->port = port->port;
  s->cfg.metrics_port = h->port; /* CONFIG GET shows the port bound */
  uv_timer_init(s->loop, &h->timer);
  h->timer.data = h;
  uv_poll_init(s->loop, &h->poll, epfd->epoll_fd);
  h->poll.data = h;
  uv_poll_start(&h->poll, UV_READABLE, http_poll_cb);
  s->http = h;
  srv_log(s, 1, "metrics and the status page on http://%s:%d/", bind, h->port);
  return 0;
}

int srv_http_port(const srv *s) {
  return s->http ? s->http->port : -1;
}

static void http_free_cb(uv_handle_t *t) {
  srv_http *h = t->data;
  if (--h->open_handles == 0)
    free(h);
}

void srv_http_close(srv *s) {
  srv_http *h = s->http;
  if (!h)
    return;
  s->http = NULL;
  /* The poll handle leaves libuv's epoll set before MHD closes the
   * descriptor it watches. */
  h->open_handles = 2;
  uv_close((uv_handle_t *)&h->poll, http_free_cb);
  MHD_stop_daemon(h->d);
  if (h->gvc)
    gvFreeContext(h->gvc);
  uv_close((uv_handle_t *)&h->timer, http_free_cb);
}
