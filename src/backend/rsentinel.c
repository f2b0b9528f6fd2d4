/*
 * rsentinel.c -- where a "redis-sentinel://" place's primary is: its URL's
 * sentinels are asked in turn (SENTINEL get-master-addr-by-name), and the
 * node the first that answers names is asked ROLE, which must say master,
 * before redis.c connects to it. A failure redis.c sees (a connection that
 * failed, a -READONLY reply) marks the place stale, and the next connect
 * asks again; each time the answer is another node, the epoch goes up,
 * and a txn that held keys on the node before keeps none of them
 * (redis.c: its next call returns ORDO_ELEASE). See
 * docs/backend-redis.md, "Redis Sentinel", and src/backend/README.md.
 *
 * Exchanges with the sentinels use blocking hiredis contexts, each
 * connect and reply bounded by what is left of the caller's deadline.
 *
 * Interface: ordo__rsn_parse, ordo__rsn_free, ordo__rsn_node,
 * ordo__rsn_stale, ordo__rsn_epoch, ordo__rsn_dump, ordo__rsn_readonly.
 */
#include "ordo_tsa.h"
#include "backend/rsentinel.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RSN_MAX_SENTINELS 16
#define RSN_RETRY_MS 50 /* between two rounds of the sentinels */

struct ordo__rsn {
  ordo__rs_node sentinels[RSN_MAX_SENTINELS]; /* read-only after parse */
  size_t n;                                   /* read-only after parse */
  char name[128];                             /* the master name, ditto */
  char user[128], pass[256];                  /* the primary's, ditto */
  bool have_pass;                             /* ditto */
  /* resolve_mu makes resolutions one at a time; it is taken before mu
   * (lock order: resolve_mu, then mu), and mu guards the answer. */
  ordo__mutex resolve_mu;
  ordo__mutex mu;
  char host[256] ORDO_GUARDED_BY(mu);
  int port ORDO_GUARDED_BY(mu);
  _Atomic bool stale;     /* ask the sentinels before the next connect */
  _Atomic uint64_t epoch; /* changes of primary seen */
};

/* A master name: what Sentinel's configuration accepts, kept plain. */
static bool name_ok(const char *s, size_t n) {
  if (n == 0 || n >= sizeof((ordo__rsn *)0)->name)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!(s[i] == '-' || s[i] == '_' || s[i] == '.' ||
          (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
          (s[i] >= 'A' && s[i] <= 'Z')))
      return false;
  return true;
}

int ordo__rsn_parse(const char *url, ordo__rs_node *node, const char **query,
                    ordo__rsn **out) {
  static const char scheme[] = "redis-sentinel://";
  if (strncmp(url, scheme, sizeof scheme - 1) != 0)
    return ORDO_EURL;
  const char *rest = url + sizeof scheme - 1;
  size_t alen = strcspn(rest, "/?");
  if (rest[alen] != '/')
    return ORDO_EURL; /* no master name */
  const char *nm = rest + alen + 1;
  size_t nlen = strcspn(nm, "?");
  if (!name_ok(nm, nlen))
    return ORDO_EURL;
  ordo__rsn *s = calloc(1, sizeof *s);
  if (!s)
    return ORDO_ENOMEM;
  memcpy(s->name, nm, nlen);
  /* The credentials, if any, come before the first address and are the
   * primary's: the first address is parsed with them, the rest bare. */
  const char *a = rest;
  int rc = 0;
  while (rc == 0 && a < rest + alen) {
    size_t len = strcspn(a, ",/");
    if (len == 0 || s->n == RSN_MAX_SENTINELS) {
      rc = ORDO_EURL;
      break;
    }
    ordo__rs_node *sn = &s->sentinels[s->n++];
    rc = ordo__rs_parse_node(a, len, sn);
    if (rc == 0 && (sn->unix_sock || sn->db_set))
      rc = ORDO_EURL; /* a sentinel is host:port */
    if (rc == 0 && s->n > 1 && (sn->have_pass || sn->user[0]))
      rc = ORDO_EURL; /* credentials only before the first */
    a += len;
    if (*a == ',' && ++a == rest + alen)
      rc = ORDO_EURL; /* a trailing ',' */
  }
  if (rc == 0) {
    ordo__rs_node *first = &s->sentinels[0];
    memcpy(s->user, first->user, sizeof s->user);
    memcpy(s->pass, first->pass, sizeof s->pass);
    s->have_pass = first->have_pass;
    /* The sentinels themselves are asked without credentials. */
    first->user[0] = 0;
    first->pass[0] = 0;
    first->have_pass = false;
    memset(node, 0, sizeof *node);
    memcpy(node->user, s->user, sizeof node->user);
    memcpy(node->pass, s->pass, sizeof node->pass);
    node->have_pass = s->have_pass;
    ordo__mutex_init(&s->resolve_mu);
    ordo__mutex_init(&s->mu);
    atomic_init(&s->stale, true);
    atomic_init(&s->epoch, 0);
    const char *q = nm + nlen;
    *query = *q == '?' ? q + 1 : q;
    *out = s;
    return 0;
  }
  free(s);
  return rc;
}

void ordo__rsn_free(ordo__rsn *s) {
  if (!s)
    return;
  ordo__mutex_destroy(&s->mu);
  ordo__mutex_destroy(&s->resolve_mu);
  free(s);
}

/* What is left of deadline_ns as a timeval, at least 1 ms. */
static struct timeval left(uint64_t deadline_ns) {
  uint64_t now = ordo__now_ns();
  uint64_t ns = deadline_ns > now + 1000000u ? deadline_ns - now : 1000000u;
  return (struct timeval){.tv_sec = (time_t)(ns / 1000000000u),
                          .tv_usec = (suseconds_t)(ns % 1000000000u / 1000)};
}

/* A blocking connection to host:port within what is left of deadline_ns,
 * every reply bounded likewise; NULL (errstr says why) when it failed. */
static redisContext *dial(const char *host, int port, uint64_t deadline_ns,
                          char errstr[200]) {
  struct timeval tv = left(deadline_ns);
  redisContext *c = redisConnectWithTimeout(host, port, tv);
  if (!c || c->err) {
    snprintf(errstr, 200, "%.100s:%d: %.80s", host, port,
             c ? c->errstr : "out of memory");
    redisFree(c);
    return NULL;
  }
  redisSetTimeout(c, tv);
  return c;
}

/* Asks sentinel sn for the primary's address; 0 and *host, *port set. */
static int ask_sentinel(ordo__rsn *s, const ordo__rs_node *sn,
                        uint64_t deadline_ns, char host[256], int *port,
                        char errstr[200]) {
  redisContext *c = dial(sn->host, sn->port, deadline_ns, errstr);
  if (!c)
    return ORDO_EBACKEND;
  redisReply *r =
      redisCommand(c, "SENTINEL get-master-addr-by-name %s", s->name);
  int rc = ORDO_EBACKEND;
  if (!r) {
    snprintf(errstr, 200, "sentinel %.100s:%d: %.80s", sn->host, sn->port,
             c->errstr);
  } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[0]->type == REDIS_REPLY_STRING &&
             r->element[1]->type == REDIS_REPLY_STRING &&
             r->element[0]->len < 256) {
    memcpy(host, r->element[0]->str, r->element[0]->len + 1);
    *port = atoi(r->element[1]->str);
    rc = *port > 0 && *port < 65536 ? 0 : ORDO_EBACKEND;
    if (rc)
      snprintf(errstr, 200, "sentinel %.100s:%d named port %.20s", sn->host,
               sn->port, r->element[1]->str);
  } else {
    snprintf(errstr, 200, "sentinel %.60s:%d knows no master %.40s%s%.60s",
             sn->host, sn->port, s->name,
             r->type == REDIS_REPLY_ERROR ? ": " : "",
             r->type == REDIS_REPLY_ERROR ? r->str : "");
  }
  freeReplyObject(r);
  redisFree(c);
  return rc;
}

/* Asks host:port ROLE (after AUTH, when the URL has a password): 0 when
 * it says master. */
static int check_role(ordo__rsn *s, const char *host, int port,
                      uint64_t deadline_ns, char errstr[200]) {
  redisContext *c = dial(host, port, deadline_ns, errstr);
  if (!c)
    return ORDO_EBACKEND;
  redisReply *r = NULL;
  int rc = ORDO_EBACKEND;
  if (s->have_pass) {
    r = s->user[0] ? redisCommand(c, "AUTH %s %s", s->user, s->pass)
                   : redisCommand(c, "AUTH %s", s->pass);
    if (r && r->type == REDIS_REPLY_ERROR) {
      snprintf(errstr, 200, "%.100s:%d: %.80s", host, port, r->str);
      rc = ORDO_EAUTH;
      goto out;
    }
    freeReplyObject(r);
  }
  r = redisCommand(c, "ROLE");
  if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
      r->element[0]->type == REDIS_REPLY_STRING &&
      strcmp(r->element[0]->str, "master") == 0)
    rc = 0;
  else
    snprintf(errstr, 200, "%.100s:%d: ROLE is not master%s%.60s", host, port,
             r && r->type == REDIS_REPLY_ERROR ? ": " : "",
             r && r->type == REDIS_REPLY_ERROR ? r->str : "");
out:
  freeReplyObject(r);
  redisFree(c);
  return rc;
}

/* One round: each sentinel in turn until one names a node that says it is
 * the master. Caller holds resolve_mu. */
static int resolve_once(ordo__rsn *s, uint64_t deadline_ns, char errstr[200])
    ORDO_REQUIRES(s->resolve_mu) {
  char host[256];
  int port = 0, rc = ORDO_EBACKEND;
  for (size_t i = 0; i < s->n && ordo__now_ns() < deadline_ns; i++) {
    if (ask_sentinel(s, &s->sentinels[i], deadline_ns, host, &port, errstr))
      continue;
    rc = check_role(s, host, port, deadline_ns, errstr);
    if (rc == ORDO_EAUTH)
      return rc;
    if (rc == 0)
      break;
  }
  if (rc)
    return rc;
  ordo__mutex_lock(&s->mu);
  if (strcmp(s->host, host) != 0 || s->port != port) {
    /* The first answer counts as a change too: no txn has a hold yet. */
    memcpy(s->host, host, sizeof s->host);
    s->port = port;
    atomic_fetch_add(&s->epoch, 1);
  }
  ordo__mutex_unlock(&s->mu);
  atomic_store(&s->stale, false);
  return 0;
}

int ordo__rsn_node(ordo__rsn *s, ordo__rs_node *node, uint64_t *epoch,
                   uint64_t deadline_ns, char errstr[200]) {
  int rc = 0;
  if (atomic_load(&s->stale) && ordo__now_ns() < deadline_ns) {
    ordo__mutex_lock(&s->resolve_mu);
    /* Whoever held resolve_mu before may have resolved it meanwhile. */
    while (atomic_load(&s->stale)) {
      rc = resolve_once(s, deadline_ns, errstr);
      if (rc == 0 || rc == ORDO_EAUTH ||
          ordo__now_ns() + RSN_RETRY_MS * 1000000ull >= deadline_ns)
        break;
      /* No sentinel names a working master yet (a failover under way):
       * ask again shortly, within the deadline. */
      struct timespec ts = {0, RSN_RETRY_MS * 1000000L};
      nanosleep(&ts, NULL);
    }
    ordo__mutex_unlock(&s->resolve_mu);
  }
  ordo__mutex_lock(&s->mu);
  if (rc == 0 && s->port == 0) {
    snprintf(errstr, 200, "no sentinel named a master %.128s in time", s->name);
    rc = ORDO_EBACKEND;
  }
  memcpy(node->host, s->host, sizeof node->host);
  node->port = s->port;
  node->unix_sock = false;
  ordo__mutex_unlock(&s->mu);
  *epoch = atomic_load(&s->epoch);
  return rc;
}

void ordo__rsn_stale(ordo__rsn *s) {
  atomic_store(&s->stale, true);
}

uint64_t ordo__rsn_epoch(ordo__rsn *s) {
  return atomic_load(&s->epoch);
}

void ordo__rsn_dump(ordo__rsn *s, FILE *f) {
  ordo__mutex_lock(&s->mu);
  fprintf(f, "primary %s:%d (master %s, %llu change(s) seen%s)\n", s->host,
          s->port, s->name, (unsigned long long)atomic_load(&s->epoch),
          atomic_load(&s->stale) ? ", to be asked again" : "");
  ordo__mutex_unlock(&s->mu);
}

bool ordo__rsn_readonly(const redisReply *r) {
  return r && r->type == REDIS_REPLY_ERROR && r->str &&
         strncmp(r->str, "READONLY", 8) == 0;
}
