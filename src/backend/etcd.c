/*
 * etcd.c -- the "etcd://" backend: locks as keys of an etcd v3 cluster,
 * through its JSON gateway (etcd 3.4: /v3/kv/txn, /v3/lease/..., /v3/watch)
 * with libcurl and json-c. docs/backend-etcd.md has the URL, the design and
 * the trade-offs; src/backend/README.md the table of backends; this comment
 * is the summary.
 *
 * Interface: ordo__backend_etcd.
 *
 * Keys. A key K lives under base(K) = P "/" len(K) as 8 hex digits, then K:
 * the length makes the bases prefix-free, so the range [base, base+1) holds
 * only K's entries. base "x" is K's exclusive holder, base "s" OWNER one
 * shared holder, base "r" a starving waiter's reservation; the value of
 * each is the owner id of its txn (a random nonce of the place, then the txn
 * id), and each is attached to its txn's lease.
 *
 * lock_all is one Txn: for every key not yet held in that mode, compare
 * that nobody else holds it (create_revision == 0 of base "x"; for X also
 * of the shared range, less the txn's own shared entry) and that nobody
 * else reserved it; then put the txn's entries with its lease; else range
 * each key's base (who blocks). All or nothing on the server, one round
 * trip. The token of the grant is the Txn's header revision, the
 * create_revision of every entry it put: strictly increasing, durable and
 * linearizable.
 *
 * Waiting holds nothing: a refused request watches the ranges of the keys
 * that blocked it from the revision after the one it read, and tries again
 * on a DELETE event, until its deadline. After starve_ms of waiting it
 * puts a reservation on every key of its request, all at once and only if
 * none is there, which every other lock Txn must find absent: at most one
 * reservation stands per key, the reserver's sets are disjoint, and the
 * oldest starving waiter is next once the holders go.
 *
 * A txn's lease is granted at its first lock (TTL lease_ms rounded up to
 * whole seconds, as etcd counts) and kept alive by the renewal thread
 * (renewer.c) with /v3/lease/keepalive every third of the TTL; a waiting
 * call renews it itself. A keepalive that answers TTL 0, a Txn that says
 * the lease is gone, or no renewal within the lease clears the record: the
 * next call returns ORDO_ELEASE once, and ordo_on_lease_lost hears of it.
 *
 * Endpoints: each exchange goes to the endpoint that last answered; a
 * connection error or a timeout (timeout_ms) moves to the next, each tried
 * once per exchange. A Txn whose answer was lost may have been applied: a
 * retry that finds the txn's own entries there (its owner id, its lease)
 * takes them as the grant.
 *
 * Lock order: a txn's mu, then the place's rn.mu (renewer.h); nothing else
 * nests.
 */
#include "backend/remote.h"
#include "backend/renewer.h"
#include "ordo_int.h"
#include "ordo_tsa.h"

#include <curl/curl.h>
#include <json-c/json.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ET_MS 1000000u
#define ET_DEFAULT_TIMEOUT_MS 2000L
#define ET_DEFAULT_LEASE_MS 10000L
#define ET_DEFAULT_STARVE_MS 1000L
#define ET_MAX_EP 16

/* ---- The URL ------------------------------------------------------------- */

typedef struct et_url {
  char *ep[ET_MAX_EP]; /* "http://host:port", malloc'd */
  size_t nep;
  long timeout_ms, lease_ms, starve_ms;
  char prefix[128];
} et_url;

static void url_free(et_url *u) {
  for (size_t i = 0; i < u->nep; i++)
    free(u->ep[i]);
  u->nep = 0;
}

/* etcd://h1:p1[,h2:p2...][?lease_ms=N&timeout_ms=N&starve_ms=N&prefix=P] */
static int parse_url(const char *url, et_url *u) {
  memset(u, 0, sizeof *u);
  u->timeout_ms = ET_DEFAULT_TIMEOUT_MS;
  u->lease_ms = ET_DEFAULT_LEASE_MS;
  u->starve_ms = ET_DEFAULT_STARVE_MS;
  snprintf(u->prefix, sizeof u->prefix, "ordo");
  if (strncmp(url, "etcd://", 7) != 0)
    return ORDO_EURL;
  const char *s = url + 7, *q = strchr(s, '?');
  size_t hl = q ? (size_t)(q - s) : strlen(s);
  while (hl > 0) {
    const char *c = memchr(s, ',', hl);
    size_t n = c ? (size_t)(c - s) : hl;
    const char *colon = memchr(s, ':', n);
    if (n == 0 || !colon || colon == s || colon == s + n - 1 ||
        u->nep == ET_MAX_EP || memchr(s, '/', n) || memchr(s, '@', n)) {
      url_free(u);
      return ORDO_EURL;
    }
    long port;
    if (ordo__parse_long(colon + 1, (size_t)(s + n - colon - 1), 1, 65535,
                         &port) != 0) {
      url_free(u);
      return ORDO_EURL;
    }
    char buf[300];
    if (n > 256 || snprintf(buf, sizeof buf, "http://%.*s", (int)n, s) < 0 ||
        (u->ep[u->nep] = strdup(buf)) == NULL) {
      url_free(u);
      return n > 256 ? ORDO_EURL : ORDO_ENOMEM;
    }
    u->nep++;
    s += n;
    hl -= n;
    if (c) {
      s++;
      if (--hl == 0) { /* a trailing comma */
        url_free(u);
        return ORDO_EURL;
      }
    }
  }
  if (u->nep == 0)
    return ORDO_EURL;
  for (const char *r = q ? q + 1 : NULL; r && *r;) {
    size_t len = strcspn(r, "&");
    const char *eq = memchr(r, '=', len);
    size_t nl = eq ? (size_t)(eq - r) : len;
    const char *v = eq ? eq + 1 : "";
    size_t vl = eq ? len - nl - 1 : 0;
    int rc = ORDO_EURL;
    if (nl == 10 && memcmp(r, "timeout_ms", 10) == 0)
      rc = ordo__parse_long(v, vl, 1, 3600000L, &u->timeout_ms);
    else if (nl == 8 && memcmp(r, "lease_ms", 8) == 0)
      rc = ordo__parse_long(v, vl, 1, 86400000L, &u->lease_ms);
    else if (nl == 9 && memcmp(r, "starve_ms", 9) == 0)
      rc = ordo__parse_long(v, vl, 0, 86400000L, &u->starve_ms);
    else if (nl == 6 && memcmp(r, "prefix", 6) == 0 && vl > 0 &&
             vl < sizeof u->prefix) {
      memcpy(u->prefix, v, vl);
      u->prefix[vl] = 0;
      rc = 0;
    }
    if (rc) {
      url_free(u);
      return rc;
    }
    r += len;
    if (*r == '&')
      r++;
  }
  return 0;
}

/* ---- Places and txns ----------------------------------------------------- */

typedef struct et_hold {
  ordo__hold k;  /* key, hold count, mode, latest token (remote.h) */
  uint64_t xrev; /* create_revision of the txn's X entry, 0: none */
  bool s;        /* the txn's shared entry exists */
} et_hold;

typedef struct et_place {
  struct ordo_s base;
  et_url u; /* read-only after open */
  long ttl_s;
  uint64_t nonce;
  _Atomic size_t cur; /* the endpoint that last answered */
  _Atomic uint64_t next_id;
  _Atomic uint64_t acquired, timeouts, released, keys, lost, failovers;
  _Atomic uint64_t waiting; /* calls inside a watch now */
  /* The renewal thread, the txn list and the last failure's text, all
   * under rn.mu (renewer.h). Lock order: a txn's mu, then rn.mu. */
  ordo__renewer rn;
} et_place;

typedef struct et_txn {
  struct ordo_txn_s base;
  /* Links under the place's rn.mu; rn.holding, rn.due_ns and
   * rn.lease_end_ns written under mu. */
  ordo__rn_txn rn;
  /* mu guards everything below but the atomics. The txn's own thread holds
   * it through each call (a wait included); the renewal thread and
   * ordo_dump only try it. */
  ordo__mutex mu;
  CURL *c ORDO_GUARDED_BY(mu);
  int64_t lease ORDO_GUARDED_BY(mu); /* 0: none granted */
  uint64_t ttl_ns ORDO_GUARDED_BY(mu);
  char owner[48] ORDO_GUARDED_BY(mu);
  et_hold *h ORDO_GUARDED_BY(mu); /* sorted in the canonical key order */
  size_t nh ORDO_GUARDED_BY(mu), caph ORDO_GUARDED_BY(mu);
  _Atomic bool lease_lost; /* the next call returns ORDO_ELEASE */
} et_txn;

static et_txn *et(ordo_txn_t *t) {
  return (et_txn *)t;
}
static et_place *ep(ordo_t *o) {
  return (et_place *)o;
}

/* Takes t's mu for a call: ORDO_ELEASE once after a lost lease, else 0. */
static int enter(et_txn *t) ORDO_ACQUIRE(t->mu) {
  ordo__mutex_lock(&t->mu);
  return atomic_exchange(&t->lease_lost, false) ? ORDO_ELEASE : 0;
}

/* ---- Bytes: base64 and key layout ---------------------------------------- */

/* A malloc'd NUL-terminated base64 of b[0..n), or NULL. */
static char *b64(const void *b, size_t n) {
  char *o = malloc(4 * ((n + 2) / 3) + 1);
  if (o)
    EVP_EncodeBlock((unsigned char *)o, b, (int)n);
  return o;
}

/* Decodes s into a malloc'd buffer (*n bytes), or NULL. */
static uint8_t *unb64(const char *s, size_t *n) {
  size_t l = strlen(s);
  uint8_t *o = malloc(l / 4 * 3 + 3);
  if (!o)
    return NULL;
  int r = l ? EVP_DecodeBlock(o, (const unsigned char *)s, (int)l) : 0;
  if (r < 0) {
    free(o);
    return NULL;
  }
  size_t pad = (l > 0 && s[l - 1] == '=') + (l > 1 && s[l - 2] == '=');
  *n = (size_t)r - pad;
  return o;
}

/* The etcd key base(K) + tail[0..tn) into a malloc'd buffer (*n bytes). */
static uint8_t *ekey(const et_place *p, const void *k, size_t kl,
                     const char *tail, size_t tn, size_t *n) {
  size_t pl = strlen(p->u.prefix);
  uint8_t *o = malloc(pl + 10 + kl + tn + 1);
  if (!o)
    return NULL;
  memcpy(o, p->u.prefix, pl);
  snprintf((char *)o + pl, 11, "/%08zx", kl);
  memcpy(o + pl + 9, k, kl);
  memcpy(o + pl + 9 + kl, tail, tn);
  *n = pl + 9 + kl + tn;
  return o;
}

/* Adds name: base64 of b[0..n) to obj. */
static void add_b64(json_object *obj, const char *name, const void *b,
                    size_t n) {
  char *s = b64(b, n);
  json_object_object_add(obj, name, json_object_new_string(s ? s : ""));
  free(s);
}

/* The end of the range of every key that begins with b[0..n): the prefix
 * with its last byte below 0xff raised by one. */
static void add_prefix_end(json_object *obj, const char *name, uint8_t *b,
                           size_t n) {
  while (n > 0 && b[n - 1] == 0xff)
    n--;
  if (n == 0) {
    add_b64(obj, name, "\0", 1);
    return;
  }
  b[n - 1]++;
  add_b64(obj, name, b, n);
  b[n - 1]--;
}

static int64_t jint(json_object *o, const char *a, const char *b) {
  json_object *x = o;
  if (a && !json_object_object_get_ex(x, a, &x))
    return 0;
  if (b && !json_object_object_get_ex(x, b, &x))
    return 0;
  return json_object_get_int64(x);
}

static const char *jstr(json_object *o, const char *name) {
  json_object *x;
  if (!o || !json_object_object_get_ex(o, name, &x))
    return NULL;
  return json_object_get_string(x);
}

/* ---- Exchanges ----------------------------------------------------------- */

typedef struct et_buf {
  char *d;
  size_t n, cap;
  /* A watch: stop once a DELETE event came (or the watch ended). */
  bool watch, woke;
  size_t scanned;
} et_buf;

/* Scans the complete lines of a watch stream for a DELETE event, or a
 * watch the server ended. */
static void watch_scan(et_buf *b) {
  for (;;) {
    char *nl = memchr(b->d + b->scanned, '\n', b->n - b->scanned);
    if (!nl)
      return;
    *nl = 0;
    json_object *m = json_tokener_parse(b->d + b->scanned);
    *nl = '\n';
    b->scanned = (size_t)(nl - b->d) + 1;
    json_object *r = NULL, *ev = NULL;
    if (!m)
      continue;
    if (!json_object_object_get_ex(m, "result", &r)) {
      b->woke = true; /* an error: look again with a Txn */
    } else {
      json_object *x;
      if ((json_object_object_get_ex(r, "canceled", &x) &&
           json_object_get_boolean(x)) ||
          jint(r, "compact_revision", NULL) != 0)
        b->woke = true;
      if (json_object_object_get_ex(r, "events", &ev))
        for (size_t i = 0; i < json_object_array_length(ev); i++) {
          const char *ty = jstr(json_object_array_get_idx(ev, i), "type");
          if (ty && strcmp(ty, "DELETE") == 0)
            b->woke = true;
        }
    }
    json_object_put(m);
    if (b->woke)
      return;
  }
}

static size_t on_data(char *d, size_t sz, size_t nm, void *arg) {
  et_buf *b = arg;
  size_t n = sz * nm;
  if (b->n + n + 1 > b->cap) {
    size_t cap = (b->n + n + 1) * 2;
    char *nd = realloc(b->d, cap);
    if (!nd)
      return 0;
    b->d = nd;
    b->cap = cap;
  }
  memcpy(b->d + b->n, d, n);
  b->n += n;
  b->d[b->n] = 0;
  if (b->watch) {
    watch_scan(b);
    if (b->woke)
      return 0; /* ends the transfer: a retry follows */
  }
  return n;
}

/* Notes what failed, for the dump. */
static void note(et_place *p, const char *what, const char *detail)
    ORDO_EXCLUDES(p->rn.mu) {
  ordo__rn_note(&p->rn, what, detail ? detail : "");
}

/*
 * post -- sends body to path on the endpoint that last answered, moving on
 * to the next on a connection error, a timeout or an etcd error that says
 * the member cannot serve (no leader, request timed out), each endpoint
 * tried once within timeout_ms (ms for a watch). 0 with *out the answer
 * (for a watch, NULL: *woke says whether a DELETE came), ORDO_EBACKEND
 * (noted) when no endpoint answered, or ORDO_ELEASE when etcd says the
 * lease is not found.
 */
static int post(et_place *p, et_txn *t, const char *path, const char *body,
                long ms, bool watch, bool *woke, json_object **out)
    ORDO_REQUIRES(t->mu) {
  if (out)
    *out = NULL;
  if (!t->c && (t->c = curl_easy_init()) == NULL)
    return ORDO_ENOMEM;
  CURL *c = t->c;
  size_t start = atomic_load(&p->cur);
  char err[CURL_ERROR_SIZE];
  /* No "Expect: 100-continue": curl sends it before a body over 1 kB (a
   * Txn of a few keys), which costs a round trip. */
  struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: "
                                                  "application/json");
  struct curl_slist *h2 = hd ? curl_slist_append(hd, "Expect:") : NULL;
  if (h2)
    hd = h2;
  int rc = ORDO_EBACKEND;
  /* A watch's bound is for all its tries together: one member that fails
   * slowly leaves the next only what is left. */
  uint64_t t0 = ordo__now_ns();
  for (size_t k = 0; k < p->u.nep; k++) {
    size_t i = (start + k) % p->u.nep;
    long left = ms - (long)((ordo__now_ns() - t0) / ET_MS);
    if (watch && left <= 0) {
      *woke = false;
      rc = 0;
      break;
    }
    char url[320];
    snprintf(url, sizeof url, "%s%s", p->u.ep[i], path);
    et_buf b = {.watch = watch};
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, watch ? left : p->u.timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, p->u.timeout_ms);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
    err[0] = 0;
    CURLcode cc = curl_easy_perform(c);
    if (watch && (b.woke || cc == CURLE_OPERATION_TIMEDOUT)) {
      /* Woken (the transfer cut by on_data) or the wait's time is up. */
      *woke = b.woke;
      free(b.d);
      if (i != start)
        atomic_store(&p->cur, i);
      rc = 0;
      break;
    }
    if (cc != CURLE_OK) {
      note(p, url, err[0] ? err : curl_easy_strerror(cc));
      free(b.d);
      atomic_fetch_add(&p->failovers, 1);
      continue; /* the next endpoint */
    }
    json_object *j = b.d ? json_tokener_parse(b.d) : NULL;
    const char *msg = j ? jstr(j, "error") : "no JSON answer";
    if (watch && !msg) {
      /* A watch stream that ended: look again with a Txn. */
      *woke = true;
      json_object_put(j);
      free(b.d);
      rc = 0;
      break;
    }
    if (msg && strstr(msg, "lease not found")) {
      json_object_put(j);
      free(b.d);
      rc = ORDO_ELEASE;
      break;
    }
    if (msg) {
      note(p, url, msg);
      json_object_put(j);
      free(b.d);
      atomic_fetch_add(&p->failovers, 1);
      continue; /* a member without a leader, or refused: try another */
    }
    free(b.d);
    if (i != start)
      atomic_store(&p->cur, i);
    if (out)
      *out = j;
    else
      json_object_put(j);
    rc = 0;
    break;
  }
  curl_slist_free_all(hd);
  return rc;
}

/* post with a JSON object as the body (consumed). */
static int post_j(et_place *p, et_txn *t, const char *path, json_object *req,
                  json_object **out) ORDO_REQUIRES(t->mu) {
  const char *s = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
  int rc = s ? post(p, t, path, s, 0, false, NULL, out) : ORDO_ENOMEM;
  json_object_put(req);
  return rc;
}

/* ---- The hold record ----------------------------------------------------- */

static void holds_clear(et_place *p, et_txn *t) ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < t->nh; i++)
    free(t->h[i].k.key);
  atomic_fetch_sub(&p->keys, t->nh);
  t->nh = 0;
  atomic_store(&t->rn.holding, false);
}

/* The lease is gone: so are the holds. */
static void lose(et_place *p, et_txn *t) ORDO_REQUIRES(t->mu) {
  t->lease = 0;
  if (t->nh > 0) {
    holds_clear(p, t);
    atomic_fetch_add(&p->lost, 1);
    atomic_store(&t->lease_lost, true);
  }
}

/* ---- Leases -------------------------------------------------------------- */

static int grant(et_place *p, et_txn *t) ORDO_REQUIRES(t->mu) {
  uint64_t sent = ordo__now_ns();
  json_object *req = json_object_new_object(), *r;
  json_object_object_add(req, "TTL", json_object_new_int64(p->ttl_s));
  int rc = post_j(p, t, "/v3/lease/grant", req, &r);
  if (rc)
    return rc == ORDO_ELEASE ? ORDO_EBACKEND : rc;
  t->lease = jint(r, "ID", NULL);
  int64_t ttl = jint(r, "TTL", NULL);
  json_object_put(r);
  if (t->lease == 0 || ttl <= 0) {
    t->lease = 0;
    return ORDO_EBACKEND;
  }
  t->ttl_ns = (uint64_t)ttl * 1000 * ET_MS;
  atomic_store(&t->rn.lease_end_ns, sent + t->ttl_ns);
  atomic_store(&t->rn.due_ns, sent + t->ttl_ns / 3);
  return 0;
}

/* One keepalive: true when it says the lease is gone. Sets the next due
 * time and the lease's end by the client's count. */
static bool keepalive(et_place *p, et_txn *t) ORDO_REQUIRES(t->mu) {
  if (t->lease == 0)
    return false;
  uint64_t sent = ordo__now_ns();
  char body[64];
  snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", (long long)t->lease);
  json_object *r = NULL;
  int rc = post(p, t, "/v3/lease/keepalive", body, 0, false, NULL, &r);
  if (rc == 0) {
    int64_t ttl = jint(r, "result", "TTL");
    json_object_put(r);
    if (ttl <= 0) {
      note(p, "keepalive", "the lease has expired (TTL 0)");
      lose(p, t);
      return true;
    }
    atomic_store(&t->rn.lease_end_ns, sent + t->ttl_ns);
    atomic_store(&t->rn.due_ns, sent + t->ttl_ns / 3);
    return false;
  }
  if (rc == ORDO_ELEASE || ordo__now_ns() >= atomic_load(&t->rn.lease_end_ns)) {
    lose(p, t);
    return true;
  }
  atomic_store(&t->rn.due_ns, ordo__now_ns() + t->ttl_ns / 12);
  return false;
}

static bool et_renew(void *place, ordo_txn_t *tx) {
  et_txn *t = et(tx);
  ordo__mutex_assert_held(&t->mu); /* renewer.c's pass took it */
  if (t->nh == 0)
    return false;
  return keepalive(place, t);
}

static uint64_t et_busy(void *place, ordo__rn_txn *t) {
  ORDO_UNUSED(place);
  ORDO_UNUSED(t);
  return 50 * ET_MS; /* a waiting call renews its lease itself */
}

static const ordo__rn_ops et_rn_ops = {.renew = et_renew, .busy = et_busy};

/* Revokes the txn's lease (its entries go with it). */
static int revoke(et_place *p, et_txn *t) ORDO_REQUIRES(t->mu) {
  if (t->lease == 0)
    return 0;
  json_object *req = json_object_new_object();
  json_object_object_add(req, "ID", json_object_new_int64(t->lease));
  int rc = post_j(p, t, "/v3/lease/revoke", req, NULL);
  t->lease = 0;
  return rc;
}

/* ---- Open, close, begin, end --------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int et_open(ordo_t **out, const char *url, const ordo_options_t *opts) {
  ORDO_UNUSED(opts);
  pthread_once(&curl_once, curl_init);
  et_place *p = calloc(1, sizeof *p);
  if (!p)
    return ORDO_ENOMEM;
  int rc = parse_url(url, &p->u);
  if (rc) {
    free(p);
    return rc;
  }
  p->ttl_s = (p->u.lease_ms + 999) / 1000;
  if (RAND_bytes((unsigned char *)&p->nonce, sizeof p->nonce) != 1)
    p->nonce = ordo__now_ns();
  atomic_init(&p->next_id, 1);
  rc = ordo__rn_start(&p->rn, &et_rn_ops, p);
  if (rc) {
    url_free(&p->u);
    free(p);
    return rc;
  }
  *out = &p->base;
  return 0;
}

static void et_close(ordo_t *o) {
  et_place *p = ep(o);
  ordo__rn_stop(&p->rn);
  url_free(&p->u);
  free(p);
}

static int et_txn_begin(ordo_t *o, ordo_txn_t **out, int priority) {
  ORDO_UNUSED(priority);
  et_place *p = ep(o);
  et_txn *t = calloc(1, sizeof *t);
  if (!t)
    return ORDO_ENOMEM;
  ordo__mutex_init(&t->mu);
  ordo__mutex_lock(&t->mu);
  t->base.id = atomic_fetch_add(&p->next_id, 1);
  snprintf(t->owner, sizeof t->owner, "%016llx-%llu",
           (unsigned long long)p->nonce, (unsigned long long)t->base.id);
  t->c = curl_easy_init();
  ordo__mutex_unlock(&t->mu);
  if (!t->c) {
    ordo__mutex_destroy(&t->mu);
    free(t);
    return ORDO_ENOMEM;
  }
  atomic_init(&t->lease_lost, false);
  ordo__rn_link(&p->rn, &t->rn, &t->base, &t->mu);
  *out = &t->base;
  return 0;
}

static void et_txn_end(ordo_txn_t *tx) {
  et_txn *t = et(tx);
  et_place *p = ep(tx->o);
  ordo__rn_unlink(&p->rn, &t->rn);
  ordo__mutex_lock(&t->mu); /* waits out a renewal in progress */
  /* The lease would run out by itself; revoked, the keys are free now. */
  revoke(p, t);
  holds_clear(p, t);
  curl_easy_cleanup(t->c);
  free(t->h);
  ordo__mutex_unlock(&t->mu);
  ordo__mutex_destroy(&t->mu);
  free(t);
}

/* ---- lock_all ------------------------------------------------------------ */

/* One key of a request as the Txn sees it. */
typedef struct et_want {
  const ordo_req_t *r;
  long at;  /* the record's index of the key, or -(insertion) - 1 */
  bool x;   /* an X entry to put (else a shared one) */
  bool put; /* the server must grant something (not held in that mode) */
} et_want;

static json_object *cmp_create(const void *k, size_t kl, int64_t rev,
                               uint8_t *end, size_t endl) {
  json_object *c = json_object_new_object();
  add_b64(c, "key", k, kl);
  if (end)
    add_b64(c, "range_end", end, endl);
  json_object_object_add(c, "target", json_object_new_string("CREATE"));
  json_object_object_add(c, "result", json_object_new_string("EQUAL"));
  json_object_object_add(c, "create_revision", json_object_new_int64(rev));
  return c;
}

static json_object *op_put(const void *k, size_t kl, const char *val,
                           int64_t lease) {
  json_object *o = json_object_new_object(), *r = json_object_new_object();
  add_b64(r, "key", k, kl);
  add_b64(r, "value", val, strlen(val));
  json_object_object_add(r, "lease", json_object_new_int64(lease));
  json_object_object_add(o, "request_put", r);
  return o;
}

static json_object *op_range(uint8_t *k, size_t kl, bool prefix) {
  json_object *o = json_object_new_object(), *r = json_object_new_object();
  add_b64(r, "key", k, kl);
  if (prefix)
    add_prefix_end(r, "range_end", k, kl);
  json_object_object_add(o, "request_range", r);
  return o;
}

static json_object *op_del(const void *k, size_t kl) {
  json_object *o = json_object_new_object(), *r = json_object_new_object();
  add_b64(r, "key", k, kl);
  json_object_object_add(o, "request_delete_range", r);
  return o;
}

/* The txn's shared-entry tail: "s" and its owner id. */
static void s_tail(const et_txn *t, char *out, size_t cap)
    ORDO_REQUIRES(t->mu) {
  snprintf(out, cap, "s%s", t->owner);
}

/*
 * The compares of key w for the lock Txn, and its put: nobody else holds
 * base "x"; for X nobody else has a shared entry (the two ranges around
 * the txn's own); no reservation but the txn's own (resv, its
 * create_revision, 0: none).
 */
static int add_key(et_place *p, et_txn *t, const et_want *w, int64_t resv,
                   json_object *cmp, json_object *ok) ORDO_REQUIRES(t->mu) {
  const ordo_req_t *r = w->r;
  char st[64];
  s_tail(t, st, sizeof st);
  size_t n1, n2, n3, n4;
  uint8_t *kx = ekey(p, r->key, r->len, "x", 1, &n1);
  uint8_t *ks = ekey(p, r->key, r->len, "s", 1, &n2);
  uint8_t *kso = ekey(p, r->key, r->len, st, strlen(st), &n3);
  uint8_t *kr = ekey(p, r->key, r->len, "r", 1, &n4);
  int rc = ORDO_ENOMEM;
  if (!kx || !ks || !kso || !kr)
    goto out;
  json_object_array_add(cmp, cmp_create(kx, n1, 0, NULL, 0));
  json_object_array_add(cmp, cmp_create(kr, n4, resv, NULL, 0));
  bool own_s = w->at >= 0 && t->h[w->at].s;
  if (w->x && !own_s) {
    /* No shared entry in [base "s", base "t"). */
    uint8_t *end = malloc(n2);
    if (!end)
      goto out;
    memcpy(end, ks, n2);
    end[n2 - 1]++;
    json_object_array_add(cmp, cmp_create(ks, n2, 0, end, n2));
    free(end);
    json_object_array_add(ok, op_put(kx, n1, t->owner, t->lease));
  } else if (w->x) {
    /* An upgrade: [base "s", base "s" OWNER) and [base "s" OWNER "\0",
     * base "t") hold no shared entry but the txn's own. */
    json_object_array_add(cmp, cmp_create(ks, n2, 0, kso, n3));
    uint8_t *after = malloc(n3 + 1), *end = malloc(n2);
    if (!after || !end) {
      free(after);
      free(end);
      goto out;
    }
    memcpy(after, kso, n3);
    after[n3] = 0;
    memcpy(end, ks, n2);
    end[n2 - 1]++;
    json_object_array_add(cmp, cmp_create(after, n3 + 1, 0, end, n2));
    free(after);
    free(end);
    json_object_array_add(ok, op_put(kx, n1, t->owner, t->lease));
  } else {
    json_object_array_add(ok, op_put(kso, n3, t->owner, t->lease));
  }
  if (resv)
    json_object_array_add(ok, op_del(kr, n4));
  rc = 0;
out:
  free(kx);
  free(ks);
  free(kso);
  free(kr);
  return rc;
}

/* What a failed Txn's ranges say about key i: whether the txn's own entry
 * for it is there already (a Txn applied whose answer was lost), with its
 * create_revision. */
static bool own_entry(const et_txn *t, json_object *rr, bool x, int64_t *rev)
    ORDO_REQUIRES(t->mu) {
  json_object *kvs;
  if (!json_object_object_get_ex(rr, "kvs", &kvs))
    return false;
  for (size_t i = 0; i < json_object_array_length(kvs); i++) {
    json_object *kv = json_object_array_get_idx(kvs, i);
    size_t kl = 0, vl = 0;
    const char *ks = jstr(kv, "key"), *vs = jstr(kv, "value");
    uint8_t *k = ks ? unb64(ks, &kl) : NULL, *v = vs ? unb64(vs, &vl) : NULL;
    bool mine = k && v && vl == strlen(t->owner) &&
                memcmp(v, t->owner, vl) == 0 &&
                jint(kv, "lease", NULL) == t->lease;
    /* The entry's kind: its tail after the base is "x", "s"... or "r". */
    char kind = 0;
    if (mine && kl > 0) {
      size_t sl = strlen(t->owner) + 1;
      if (k[kl - 1] == 'x')
        kind = 'x';
      else if (kl >= sl && k[kl - sl] == 's' &&
               memcmp(k + kl - sl + 1, t->owner, sl - 1) == 0)
        kind = 's';
    }
    free(k);
    free(v);
    if (mine && kind == (x ? 'x' : 's')) {
      *rev = jint(kv, "create_revision", NULL);
      return true;
    }
  }
  return false;
}

/* Records the grant of w[0..n) with token tok. */
static void record(et_place *p, et_txn *t, et_want *w, size_t n, uint64_t tok,
                   uint8_t **copies) ORDO_REQUIRES(t->mu) {
  for (size_t i = 0; i < n; i++) {
    const ordo_req_t *r = w[i].r;
    long at = ordo__hold_find(t->h, t->nh, sizeof *t->h, r->key, r->len);
    et_hold *h;
    if (at >= 0) {
      h = &t->h[at];
      h->k.count++;
      if (r->mode > h->k.mode)
        h->k.mode = r->mode;
    } else {
      size_t ins = (size_t)(-at - 1);
      memmove(&t->h[ins + 1], &t->h[ins], (t->nh - ins) * sizeof *t->h);
      h = &t->h[ins];
      *h = (et_hold){{copies[i], r->len, 1, r->mode, 0}, 0, false};
      copies[i] = NULL;
      t->nh++;
      atomic_fetch_add(&p->keys, 1);
    }
    if (w[i].put) {
      h->k.token = tok;
      if (w[i].x)
        h->xrev = tok;
      else
        h->s = true;
    }
  }
}

/*
 * reserve -- the starvation bound: puts base "r" of every key of the
 * request with the txn's lease, all at once and only if none is there.
 * resv[i] gets each one's create_revision (the Txn's revision); a refusal
 * (another waiter reserved first) leaves them 0 and is no error.
 */
static int reserve(et_place *p, et_txn *t, et_want *w, size_t n, int64_t *resv)
    ORDO_REQUIRES(t->mu) {
  json_object *req = json_object_new_object(), *cmp = json_object_new_array(),
              *ok = json_object_new_array();
  for (size_t i = 0; i < n; i++) {
    if (!w[i].put)
      continue;
    size_t kl;
    uint8_t *kr = ekey(p, w[i].r->key, w[i].r->len, "r", 1, &kl);
    if (!kr) {
      json_object_put(cmp);
      json_object_put(ok);
      json_object_put(req);
      return ORDO_ENOMEM;
    }
    json_object_array_add(cmp, cmp_create(kr, kl, 0, NULL, 0));
    json_object_array_add(ok, op_put(kr, kl, t->owner, t->lease));
    free(kr);
  }
  json_object_object_add(req, "compare", cmp);
  json_object_object_add(req, "success", ok);
  json_object *r;
  int rc = post_j(p, t, "/v3/kv/txn", req, &r);
  if (rc)
    return rc;
  json_object *x;
  if (json_object_object_get_ex(r, "succeeded", &x) &&
      json_object_get_boolean(x)) {
    int64_t rev = jint(r, "header", "revision");
    for (size_t i = 0; i < n; i++)
      resv[i] = w[i].put ? rev : 0;
  }
  json_object_put(r);
  return 0;
}

/* Deletes the txn's reservations (those resv[i] says it made). */
static void unreserve(et_place *p, et_txn *t, et_want *w, size_t n,
                      int64_t *resv) ORDO_REQUIRES(t->mu) {
  json_object *req = json_object_new_object(), *cmp = json_object_new_array(),
              *ok = json_object_new_array();
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    size_t kl;
    uint8_t *kr =
        resv[i] ? ekey(p, w[i].r->key, w[i].r->len, "r", 1, &kl) : NULL;
    if (!kr)
      continue;
    json_object_array_add(cmp, cmp_create(kr, kl, resv[i], NULL, 0));
    json_object_array_add(ok, op_del(kr, kl));
    free(kr);
    resv[i] = 0;
    m++;
  }
  json_object_object_add(req, "compare", cmp);
  json_object_object_add(req, "success", ok);
  if (m > 0)
    post_j(p, t, "/v3/kv/txn", req, NULL);
  else
    json_object_put(req);
}

/*
 * watch -- waits until one of the ranges of the keys in blocked[0..n) sees
 * a DELETE after revision rev, or until until_ns: *woke says which.
 */
static int watch(et_place *p, et_txn *t, et_want *w, size_t n,
                 const bool *blocked, int64_t rev, uint64_t until_ns,
                 bool *woke) ORDO_REQUIRES(t->mu) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return ORDO_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    if (!blocked[i])
      continue;
    size_t kl;
    uint8_t *k = ekey(p, w[i].r->key, w[i].r->len, "", 0, &kl);
    if (!k) {
      fclose(f);
      free(buf);
      return ORDO_ENOMEM;
    }
    json_object *o = json_object_new_object(), *c = json_object_new_object();
    add_b64(c, "key", k, kl);
    add_prefix_end(c, "range_end", k, kl);
    json_object_object_add(c, "start_revision", json_object_new_int64(rev + 1));
    json_object_object_add(o, "create_request", c);
    fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), f);
    json_object_put(o);
    free(k);
  }
  fclose(f);
  uint64_t now = ordo__now_ns();
  long ms = until_ns > now ? (long)((until_ns - now) / ET_MS) + 1 : 1;
  *woke = false;
  int rc = post(p, t, "/v3/watch", buf, ms, true, woke, NULL);
  free(buf);
  return rc;
}

static int et_lock_all(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                       uint64_t deadline_ns) {
  et_txn *t = et(tx);
  et_place *p = ep(tx->o);
  et_want *w = calloc(n, sizeof *w);
  uint8_t **copies = calloc(n, sizeof *copies);
  int64_t *resv = calloc(n, sizeof *resv);
  bool *blocked = calloc(n, sizeof *blocked);
  int rc = enter(t);
  if (!rc && (!w || !copies || !resv || !blocked))
    rc = ORDO_ENOMEM;
  if (rc)
    goto out;
  if ((rc = ordo__hold_room((void **)&t->h, &t->caph, t->nh, n,
                            sizeof *t->h)) != 0 ||
      (rc = ordo__hold_copy_new(t->h, t->nh, sizeof *t->h, r, n, copies)) != 0)
    goto out;
  size_t nput = 0;
  for (size_t i = 0; i < n; i++) {
    long at = ordo__hold_find(t->h, t->nh, sizeof *t->h, r[i].key, r[i].len);
    bool x = r[i].mode == ORDO_MODE_X;
    bool have = at >= 0 && (t->h[at].xrev || (!x && t->h[at].s));
    w[i] = (et_want){&r[i], at, x, !have};
    nput += !have;
  }
  uint64_t start = ordo__now_ns();
  uint64_t starve_at = start + (uint64_t)p->u.starve_ms * ET_MS;
  bool reserved = false;
  uint64_t tok = 0;
  while (nput > 0) {
    /* A lease kept from an earlier hold is renewed before it is used
     * again, so that a grant never rides a lease about to run out. */
    if (t->lease && ordo__now_ns() >= atomic_load(&t->rn.due_ns) &&
        keepalive(p, t) && atomic_exchange(&t->lease_lost, false)) {
      rc = ORDO_ELEASE; /* lost while this call waited */
      goto out;
    }
    if (t->lease == 0 && (rc = grant(p, t)) != 0)
      goto out;
    json_object *req = json_object_new_object(), *cmp = json_object_new_array(),
                *ok = json_object_new_array(), *no = json_object_new_array();
    for (size_t i = 0; !rc && i < n; i++) {
      if (!w[i].put)
        continue;
      rc = add_key(p, t, &w[i], resv[i], cmp, ok);
      size_t kl;
      uint8_t *k = ekey(p, r[i].key, r[i].len, "", 0, &kl);
      if (!k)
        rc = ORDO_ENOMEM;
      else
        json_object_array_add(no, op_range(k, kl, true));
      free(k);
    }
    json_object_object_add(req, "compare", cmp);
    json_object_object_add(req, "success", ok);
    json_object_object_add(req, "failure", no);
    if (rc) {
      json_object_put(req);
      goto out;
    }
    json_object *res;
    rc = post_j(p, t, "/v3/kv/txn", req, &res);
    if (rc == ORDO_ELEASE) {
      /* The lease ran out: what the txn held went with it. */
      bool held = t->nh > 0;
      lose(p, t);
      atomic_store(&t->lease_lost, false);
      if (held)
        goto out;
      rc = 0;
      continue; /* nothing was held: a new lease, and again */
    }
    if (rc)
      goto out;
    json_object *x, *resps;
    int64_t rev = jint(res, "header", "revision");
    if (json_object_object_get_ex(res, "succeeded", &x) &&
        json_object_get_boolean(x)) {
      json_object_put(res);
      tok = (uint64_t)rev;
      break;
    }
    /* Refused: who blocks, or the txn's own entries of a Txn applied whose
     * answer was lost. */
    bool all_own = true;
    int64_t own_rev = 0;
    json_object_object_get_ex(res, "responses", &resps);
    for (size_t i = 0, j = 0; i < n; i++) {
      if (!w[i].put)
        continue;
      json_object *rr = NULL;
      if (resps && j < json_object_array_length(resps))
        json_object_object_get_ex(json_object_array_get_idx(resps, j),
                                  "response_range", &rr);
      j++;
      int64_t er = 0;
      bool own = rr && own_entry(t, rr, w[i].x, &er);
      all_own = all_own && own;
      if (own)
        own_rev = er;
      blocked[i] = true; /* each key of the set is watched */
    }
    json_object_put(res);
    if (all_own && own_rev > 0) {
      tok = (uint64_t)own_rev;
      break;
    }
    uint64_t now = ordo__now_ns();
    if (deadline_ns != ORDO_NO_DEADLINE && now >= deadline_ns) {
      atomic_fetch_add(&p->timeouts, 1);
      rc = ORDO_ETIMEDOUT;
      goto out;
    }
    if (!reserved && now >= starve_at) {
      reserved = true;
      if ((rc = reserve(p, t, w, n, resv)) != 0)
        goto out;
      continue; /* with the reservation, at once */
    }
    uint64_t until = deadline_ns;
    if (!reserved && starve_at < until)
      until = starve_at;
    uint64_t due = atomic_load(&t->rn.due_ns);
    if (t->lease && due < until)
      until = due;
    bool woke;
    atomic_fetch_add(&p->waiting, 1);
    rc = watch(p, t, w, n, blocked, rev, until, &woke);
    atomic_fetch_sub(&p->waiting, 1);
    if (rc)
      goto out;
  }
  record(p, t, w, n, tok, copies);
  atomic_fetch_add(&p->acquired, 1);
  for (size_t i = 0; i < n; i++)
    resv[i] = 0; /* the grant's Txn deleted them */
  if (!atomic_load(&t->rn.holding) && t->nh > 0) {
    atomic_store(&t->rn.holding, true);
    ordo__rn_kick(&p->rn, atomic_load(&t->rn.due_ns));
  }
out:
  if (rc && resv && w)
    unreserve(p, t, w, n, resv);
  ordo__mutex_unlock(&t->mu);
  for (size_t i = 0; copies && i < n; i++)
    free(copies[i]);
  free(copies);
  free(w);
  free(resv);
  free(blocked);
  return rc;
}

/* ---- unlock, held -------------------------------------------------------- */

/*
 * Deletes the entries of holds [lo, hi) in one Txn (unlock_all: all of
 * them, keeping the lease for the next lock, since a revoke and a new
 * grant would cost two exchanges more). The compares of the X entries hold
 * together: while the lease lives every entry is the txn's; once it has
 * run out none is there.
 */
static int delete_holds(et_place *p, et_txn *t, size_t lo, size_t hi)
    ORDO_REQUIRES(t->mu) {
  char st[64];
  s_tail(t, st, sizeof st);
  json_object *req = json_object_new_object(), *cmp = json_object_new_array(),
              *ok = json_object_new_array();
  int rc = 0;
  for (size_t i = lo; !rc && i < hi; i++) {
    et_hold *h = &t->h[i];
    size_t n1, n2;
    uint8_t *kx = ekey(p, h->k.key, h->k.len, "x", 1, &n1);
    uint8_t *ks = ekey(p, h->k.key, h->k.len, st, strlen(st), &n2);
    if (!kx || !ks) {
      rc = ORDO_ENOMEM;
    } else {
      if (h->xrev) {
        json_object_array_add(cmp,
                              cmp_create(kx, n1, (int64_t)h->xrev, NULL, 0));
        json_object_array_add(ok, op_del(kx, n1));
      }
      if (h->s)
        json_object_array_add(ok, op_del(ks, n2));
    }
    free(kx);
    free(ks);
  }
  json_object_object_add(req, "compare", cmp);
  json_object_object_add(req, "success", ok);
  if (rc) {
    json_object_put(req);
    return rc;
  }
  return post_j(p, t, "/v3/kv/txn", req, NULL);
}

/* Deletes hold i's entries (the X one only if it is still this txn's). */
static int let_go(et_place *p, et_txn *t, size_t i) ORDO_REQUIRES(t->mu) {
  et_hold *h = &t->h[i];
  int rc = delete_holds(p, t, i, i + 1);
  /* A delete no member answered may not have been applied: the hold
   * stays in the record (the entry may still be there), for another
   * unlock, unlock_all or txn_end (whose revoke, or lease's end, frees
   * it). */
  if (rc)
    return rc;
  free(h->k.key);
  memmove(&t->h[i], &t->h[i + 1], (t->nh - i - 1) * sizeof *t->h);
  t->nh--;
  atomic_fetch_sub(&p->keys, 1);
  atomic_store(&t->rn.holding, t->nh > 0);
  return rc;
}

static int et_unlock(ordo_txn_t *tx, const void *key, size_t len) {
  et_txn *t = et(tx);
  et_place *p = ep(tx->o);
  int rc = enter(t);
  if (rc)
    goto out;
  long at = ordo__hold_find(t->h, t->nh, sizeof *t->h, key, len);
  if (at < 0) {
    rc = ORDO_ENOTHELD;
    goto out;
  }
  if (t->h[at].k.count > 1) {
    t->h[at].k.count--;
    goto out;
  }
  rc = let_go(p, t, (size_t)at);
  if (rc == 0)
    atomic_fetch_add(&p->released, 1);
out:
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static int et_unlock_all(ordo_txn_t *tx) {
  et_txn *t = et(tx);
  et_place *p = ep(tx->o);
  int rc = enter(t);
  if (rc)
    goto out;
  size_t n = t->nh;
  if (n == 0)
    goto out;
  rc = delete_holds(p, t, 0, t->nh);
  /* Deletes that may not have been applied: the lease is dropped rather
   * than kept for the next lock (whose keepalive would keep the entries
   * alive); unrenewed, it ends within its TTL, and its entries with it. */
  if (rc)
    t->lease = 0;
  holds_clear(p, t);
  if (rc == 0) {
    rc = (int)n;
    atomic_fetch_add(&p->released, n);
  }
out:
  ordo__mutex_unlock(&t->mu);
  return rc;
}

static int et_held(ordo_txn_t *tx, const void *key, size_t len,
                   ordo_mode_t *mode, uint64_t *fence) {
  et_txn *t = et(tx);
  ordo__mutex_lock(&t->mu);
  int count =
      ordo__hold_report(t->h, t->nh, sizeof *t->h, key, len, mode, fence);
  ordo__mutex_unlock(&t->mu);
  return count;
}

static int et_stats(ordo_t *o, ordo_stats_t *out) {
  et_place *p = ep(o);
  memset(out, 0, sizeof *out);
  out->acquired = atomic_load(&p->acquired);
  out->timeouts = atomic_load(&p->timeouts);
  out->released = atomic_load(&p->released);
  out->locks = atomic_load(&p->keys);
  out->waiting = atomic_load(&p->waiting);
  return 0;
}

static void et_dump(ordo_t *o, int fd) {
  et_place *p = ep(o);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return;
  fprintf(f, "%s: etcd, %zu endpoint(s), now %s; lease TTL %ld s\n", o->url,
          p->u.nep, p->u.ep[atomic_load(&p->cur)], p->ttl_s);
  ordo__mutex_lock(&p->rn.mu);
  if (p->rn.err[0])
    fprintf(f, "last error: %s\n", p->rn.err);
  ordo__rn_txn *l;
  LIST_FOREACH(l, &p->rn.txns, link) {
    et_txn *t = et(l->txn);
    fprintf(f, "txn %llu:", (unsigned long long)t->base.id);
    if (!ordo__mutex_trylock(&t->mu)) {
      fputs(" busy (inside a call, perhaps a waiting lock)\n", f);
      continue;
    }
    fprintf(f, " lease %lld, holds %zu key(s)%s\n", (long long)t->lease, t->nh,
            atomic_load(&t->lease_lost) ? ", LOCKS LOST" : "");
    for (size_t i = 0; i < t->nh; i++) {
      fputs("  ", f);
      ordo__put_key(f, t->h[i].k.key, t->h[i].k.len);
      fprintf(f, " %s holds=%u token=%llu\n",
              t->h[i].k.mode == ORDO_MODE_S ? "S" : "X", t->h[i].k.count,
              (unsigned long long)t->h[i].k.token);
    }
    ordo__mutex_unlock(&t->mu);
  }
  ordo__mutex_unlock(&p->rn.mu);
  fprintf(f,
          "counters: acquired %llu, timeouts %llu, released %llu, leases "
          "lost while holding %llu, endpoint failures %llu\n",
          (unsigned long long)atomic_load(&p->acquired),
          (unsigned long long)atomic_load(&p->timeouts),
          (unsigned long long)atomic_load(&p->released),
          (unsigned long long)atomic_load(&p->lost),
          (unsigned long long)atomic_load(&p->failovers));
  fclose(f);
  ordo__write_all(fd, buf, len);
  free(buf);
}

static void et_on_lease_lost(ordo_t *o, void (*cb)(ordo_txn_t *, void *),
                             void *arg) {
  ordo__rn_on_lost(&ep(o)->rn, cb, arg);
}

const ordo__backend ordo__backend_etcd = {
    .scheme = "etcd",
    .caps = ORDO_CAP_SHARED | ORDO_CAP_FENCE | ORDO_CAP_FENCE_DURABLE |
            ORDO_CAP_INCREMENTAL | ORDO_CAP_REENTRANT | ORDO_CAP_UPGRADE |
            ORDO_CAP_WAIT_HOLDS_NOTHING,
    .open = et_open,
    .close = et_close,
    .txn_begin = et_txn_begin,
    .txn_end = et_txn_end,
    .lock_all = et_lock_all,
    .lock_all_async = NULL,
    .unlock = et_unlock,
    .unlock_all = et_unlock_all,
    .cancel = NULL,
    .held = et_held,
    .stats = et_stats,
    .dump = et_dump,
    .on_lease_lost = et_on_lease_lost,
};
