/*
 * shards.c -- a sharded ordod:// place: ordod://h1:p1,h2:p2[,...] (two or
 * more addresses, one user, password and query for all). Each shard is a
 * one-address ordod:// place of ordod.c; each key lives on one shard,
 * chosen by rendezvous hashing over the shard names ("host:port" as the URL
 * writes them). A txn has one global id (gid) sent with SESSION GID on
 * every session it opens, lazily, on the first call that touches a shard.
 * lock_all takes the keys' groups in shard order (names sorted bytewise),
 * one LOCK per shard, all or nothing. src/backend/README.md ("shards.c")
 * has the design and the lock order, docs/protocol.md ("## Shards") the
 * placement, docs/distributed.md why lock_all callers cannot deadlock.
 *
 * Interface: ordo__backend_shards, ordo__shards_multi,
 * ordo__shards_txn_gid; the placement functions of shards.h.
 */
#include "ordo_int.h"
#include "ordo_tsa.h"
#include "backend/ordod.h"
#include "backend/remote.h"
#include "backend/shards.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ---- Placement (docs/protocol.md, "## Shards") ---------------------------
 * Rendezvous, or highest-random-weight, hashing (Thaler and Ravishankar, "A
 * name-based mapping scheme for rendezvous", 1996): every key scores every
 * shard and goes to the highest, so adding a shard moves only the keys it
 * now wins, about 1/N, and none between the old shards. The score mixes
 * FNV-1a 64 (Fowler, Noll, Vo) of the key and of the name through the
 * finalizer of Appleby's MurmurHash3, which spreads FNV's weak low bits.
 */

uint64_t ordo__shard_fnv1a64(const void *s, size_t n) {
  const unsigned char *b = s;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t ordo__shard_fmix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

uint64_t ordo__shard_score(const char *name, const void *key, size_t len) {
  return ordo__shard_fmix64(ordo__shard_fnv1a64(key, len) ^
                            ordo__shard_fnv1a64(name, strlen(name)));
}

size_t ordo__shard_place(const char *const *names, size_t n, const void *key,
                         size_t len) {
  size_t best = 0;
  uint64_t bs = ordo__shard_score(names[0], key, len);
  for (size_t i = 1; i < n; i++) {
    uint64_t s = ordo__shard_score(names[i], key, len);
    if (s > bs || (s == bs && strcmp(names[i], names[best]) < 0)) {
      best = i;
      bs = s;
    }
  }
  return best;
}

/* ---- Places and txns ----------------------------------------------------- */

#define SH_NAME_MAX 256 /* a shard's name with its NUL */

typedef void (*sh_lost_cb)(ordo_txn_t *t, void *arg);

typedef struct sh_shard {
  char name[SH_NAME_MAX]; /* "host:port" as the URL writes it */
  uint64_t h;             /* fnv1a64(name) */
  ordo_t *sub;            /* its one-address ordod:// place */
} sh_shard;

typedef struct sh_place {
  struct ordo_s base;
  size_t n;         /* shards, two or more; read-only after open */
  sh_shard *s;      /* in shard order (names sorted bytewise); read-only */
  size_t names_len; /* the lengths of all names plus a comma each */
  _Atomic uint64_t next_id;
  /* The lease-lost callback, read by sh_lost on a shard's renewal thread. */
  ordo__mutex cb_mu;
  sh_lost_cb cb ORDO_GUARDED_BY(cb_mu);
  void *cb_arg ORDO_GUARDED_BY(cb_mu);
} sh_place;

typedef struct sh_txn {
  struct ordo_txn_s base;
  char gid[ORDO__OD_GID_LEN + 1]; /* 32 hex digits; read-only after begin */
  /* The attempt its LOCKs carry (ATTEMPT): one more each time it gives
   * every key back (unlock_all, a victim's or a lost LOCK's give-back), so
   * that a RELEASE of an abort of an earlier attempt, late on its way,
   * takes nothing this attempt took. The txn's own thread only. */
  uint32_t attempt;
  /* Each shard's sub-txn (an ordod.c txn), NULL until the first call that
   * touches the shard. Written by the txn's own thread; atomic because the
   * lease-lost callback may call ordo_held from a renewal thread. */
  _Atomic(ordo_txn_t *) *sub;
} sh_txn;

const char *ordo__shards_txn_gid(const struct ordo_txn_s *t) {
  if (!t || !t->o || t->o->be != &ordo__backend_shards)
    return NULL;
  return ((const sh_txn *)t)->gid;
}

static sh_txn *st(ordo_txn_t *t) {
  return (sh_txn *)t;
}
static sh_place *sp(ordo_t *o) {
  return (sh_place *)o;
}

static const ordo__backend *const OD = &ordo__backend_ordod;

/* The rank of key's shard: the same function as ordo__shard_place, with
 * the names' hashes made once and the names already in shard order (so a
 * tie goes to the lower rank). */
static size_t shard_of(const sh_place *p, const void *key, size_t len) {
  uint64_t kh = ordo__shard_fnv1a64(key, len);
  size_t best = 0;
  uint64_t bs = ordo__shard_fmix64(kh ^ p->s[0].h);
  for (size_t i = 1; i < p->n; i++) {
    uint64_t s = ordo__shard_fmix64(kh ^ p->s[i].h);
    if (s > bs) {
      best = i;
      bs = s;
    }
  }
  return best;
}

bool ordo__shards_multi(const char *url) {
  if (strncmp(url, "ordod://", 8) != 0)
    return false;
  const char *rest = url + 8;
  size_t alen = strcspn(rest, "?");
  const char *hp = rest; /* the addresses begin after the last '@' */
  for (const char *q = rest; q < rest + alen; q++)
    if (*q == '@')
      hp = q + 1;
  if (*hp == '/')
    return false; /* a Unix socket's path, which may hold a comma */
  return memchr(hp, ',', (size_t)(rest + alen - hp)) != NULL;
}

static int name_cmp(const void *a, const void *b) {
  return strcmp(((const sh_shard *)a)->name, ((const sh_shard *)b)->name);
}

static void sh_lost(ordo_txn_t *sub, void *arg);

static void sh_close(ordo_t *o) {
  sh_place *p = sp(o);
  for (size_t i = 0; i < p->n; i++)
    if (p->s[i].sub) {
      char *u = p->s[i].sub->url;
      OD->close(p->s[i].sub);
      free(u);
    }
  free(p->s);
  ordo__mutex_destroy(&p->cb_mu);
  free(p);
}

/* Opens shard s's one-address place: "ordod://" userinfo address query. */
static int open_sub(sh_shard *s, const char *ui, size_t uilen,
                    const char *query, const ordo_options_t *opts) {
  size_t nl = strlen(s->name), ql = strlen(query);
  char *url = malloc(8 + uilen + nl + ql + 1);
  char *shown = malloc(8 + nl + 1); /* without the password */
  if (!url || !shown) {
    free(url);
    free(shown);
    return ORDO_ENOMEM;
  }
  memcpy(url, "ordod://", 8);
  memcpy(url + 8, ui, uilen);
  memcpy(url + 8 + uilen, s->name, nl);
  memcpy(url + 8 + uilen + nl, query, ql + 1);
  snprintf(shown, 8 + nl + 1, "ordod://%s", s->name);
  ordo_t *sub = NULL;
  int rc = OD->open(&sub, url, opts);
  free(url);
  if (rc) {
    free(shown);
    return rc;
  }
  /* What api.c's ordo_open fills in for a place it opens. */
  sub->be = OD;
  sub->opts = *opts;
  sub->url = shown;
  atomic_init(&sub->retries, 0);
  sub->order = NULL;
  s->sub = sub;
  return 0;
}

/*
 * sh_open -- ordod://[user:password@]a1,a2[,...][?query]: each address is a
 * shard (its name as written), opened as ordod://[user:password@]ai[?query]
 * by ordod.c, which checks it. An empty or duplicate address, or a Unix
 * socket, is ORDO_EURL.
 */
static int sh_open(ordo_t **out, const char *url, const ordo_options_t *opts) {
  const char *rest = url + 8;
  size_t alen = strcspn(rest, "?");
  const char *hp = rest;
  for (const char *q = rest; q < rest + alen; q++)
    if (*q == '@')
      hp = q + 1;
  const char *end = rest + alen;
  size_t n = 1;
  for (const char *q = hp; q < end; q++)
    n += *q == ',';
  sh_place *p = calloc(1, sizeof *p);
  if (!p)
    return ORDO_ENOMEM;
  p->s = calloc(n, sizeof *p->s);
  if (!p->s) {
    free(p);
    return ORDO_ENOMEM;
  }
  ordo__mutex_init(&p->cb_mu);
  atomic_init(&p->next_id, 1);
  int rc = 0;
  const char *a = hp;
  for (size_t i = 0; i < n; i++) {
    size_t l = strcspn(a, ",?");
    if (a + l > end)
      l = (size_t)(end - a);
    if (l == 0 || l >= SH_NAME_MAX || a[0] == '/') {
      rc = ORDO_EURL;
      break;
    }
    memcpy(p->s[i].name, a, l);
    p->s[i].name[l] = 0;
    p->s[i].h = ordo__shard_fnv1a64(a, l);
    p->names_len += l + 1;
    a += l + 1;
  }
  p->n = n;
  if (rc == 0) {
    qsort(p->s, n, sizeof *p->s, name_cmp);
    for (size_t i = 1; i < n; i++)
      if (strcmp(p->s[i - 1].name, p->s[i].name) == 0)
        rc = ORDO_EURL; /* one shard named twice */
  }
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = open_sub(&p->s[i], rest, (size_t)(hp - rest), end, opts);
  for (size_t i = 0; rc == 0 && i < n; i++)
    OD->on_lease_lost(p->s[i].sub, sh_lost, p);
  if (rc) {
    sh_close(&p->base);
    return rc;
  }
  *out = &p->base;
  return 0;
}

/* A global txn id: 8 bytes of CLOCK_REALTIME ns at begin, big-endian, then
 * 8 random bytes; 32 lowercase hex digits (docs/protocol.md). */
static void make_gid(char out[ORDO__OD_GID_LEN + 1]) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  uint64_t rnd;
  if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
    rnd = ordo__rand64(); /* no entropy yet (early boot): still unique */
  unsigned char b[16];
  for (int i = 0; i < 8; i++) {
    b[i] = (unsigned char)(ns >> (56 - 8 * i));
    b[8 + i] = (unsigned char)(rnd >> (56 - 8 * i));
  }
  for (int i = 0; i < 16; i++)
    snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static int sh_txn_begin(ordo_t *o, ordo_txn_t **out, int priority) {
  ORDO_UNUSED(priority); /* api.c keeps it in base; sub-txns copy it */
  sh_place *p = sp(o);
  sh_txn *t = calloc(1, sizeof *t);
  if (!t)
    return ORDO_ENOMEM;
  t->sub = calloc(p->n, sizeof *t->sub);
  if (!t->sub) {
    free(t);
    return ORDO_ENOMEM;
  }
  for (size_t i = 0; i < p->n; i++)
    atomic_init(&t->sub[i], NULL);
  make_gid(t->gid);
  t->attempt = 1;
  t->base.id = atomic_fetch_add(&p->next_id, 1);
  *out = &t->base;
  return 0;
}

static void sh_txn_end(ordo_txn_t *tx) {
  sh_txn *t = st(tx);
  sh_place *p = sp(tx->o);
  for (size_t i = 0; i < p->n; i++) {
    ordo_txn_t *s = atomic_load(&t->sub[i]);
    if (s)
      OD->txn_end(s); /* waits out a lease-lost callback of s */
  }
  free(t->sub);
  free(t);
}

/* Shard i's sub-txn, begun (connected, within the call's deadline:
 * ordo__od_shard_bound) now if it has none yet. */
static int sub_open(sh_txn *t, size_t i, uint64_t deadline_ns,
                    ordo_txn_t **out) {
  ordo_txn_t *s = atomic_load(&t->sub[i]);
  if (!s) {
    ordo_t *sub = sp(t->base.o)->s[i].sub;
    int rc = ordo__od_txn_begin(sub, &s, t->gid, t,
                                ordo__od_shard_bound(sub, deadline_ns, NULL));
    if (rc)
      return rc;
    /* What api.c's ordo_txn_begin fills in. */
    s->o = sub;
    s->priority = t->base.priority;
    s->order_state = NULL;
    memcpy(s->name, t->base.name, sizeof s->name);
    atomic_store(&t->sub[i], s);
  }
  *out = s;
  return 0;
}

/* The names of the shards other than skip where t holds keys now,
 * comma-separated, into buf (p->names_len bytes). */
static void held_at(const sh_place *p, sh_txn *t, size_t skip, char *buf) {
  size_t o = 0;
  for (size_t i = 0; i < p->n; i++) {
    ordo_txn_t *s = atomic_load(&t->sub[i]);
    if (i == skip || !s || !ordo__od_txn_holding(s))
      continue;
    if (o)
      buf[o++] = ',';
    size_t l = strlen(p->s[i].name);
    memcpy(buf + o, p->s[i].name, l);
    o += l;
  }
  buf[o] = 0;
}

/*
 * sh_lock_all -- the sorted keys grouped by shard, the groups in shard
 * order, each one LOCK on its shard (all or nothing there) with WAIT what
 * is left of the one deadline, and HELDAT the other shards where the txn
 * holds keys at that moment. A failure gives back the groups this call
 * took (one hold of each of their keys: holds from before the call stay)
 * and returns the error; a deadlock victim (-DEADLOCK on one shard, which
 * released everything there) lets go of everything on the others too, as
 * a victim does on one ordod.
 */
static int sh_lock_all(ordo_txn_t *tx, const ordo_req_t *r, size_t n,
                       uint64_t deadline_ns) {
  sh_txn *t = st(tx);
  sh_place *p = sp(tx->o);
  /* The keys in group order, each key's shard, each shard's first index
   * (and after it, the next free slot of each group while they fill), the
   * HELDAT text. */
  size_t *sh = malloc(n * sizeof *sh);
  size_t *first = calloc(2 * p->n + 1, sizeof *first);
  ordo_req_t *g = malloc(n * sizeof *g);
  char *heldat = malloc(p->names_len + 1);
  int rc = 0;
  if (!sh || !first || !g || !heldat) {
    rc = ORDO_ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    sh[i] = shard_of(p, r[i].key, r[i].len);
    first[sh[i] + 1]++;
  }
  for (size_t i = 0; i < p->n; i++)
    first[i + 1] += first[i];
  /* A stable counting sort: each group keeps the canonical key order. */
  size_t *fill = first + p->n + 1;
  memcpy(fill, first, p->n * sizeof *fill);
  for (size_t i = 0; i < n; i++)
    g[fill[sh[i]]++] = r[i];
  /* Whether the txn held keys anywhere before this call: a LOCK that goes
   * unanswered while it did may have made it a cross-shard victim whose
   * keys elsewhere were released (below). */
  bool held_before = false;
  for (size_t j = 0; j < p->n && !held_before; j++) {
    ordo_txn_t *s = atomic_load(&t->sub[j]);
    held_before = s && ordo__od_txn_holding(s);
  }
  bool sent_heldat = false; /* the LOCK that failed named other shards */
  size_t i;
  for (i = 0; i < p->n; i++) {
    size_t m = first[i + 1] - first[i];
    if (m == 0)
      continue;
    ordo_txn_t *s;
    sent_heldat = false;
    if ((rc = sub_open(t, i, deadline_ns, &s)) != 0)
      break;
    held_at(p, t, i, heldat);
    sent_heldat = heldat[0] != 0;
    if ((rc = ordo__od_lock_heldat(s, g + first[i], m, deadline_ns, heldat,
                                   t->attempt)))
      break;
  }
  /* A LOCK that went unanswered (a shard stopped or cut off) while the
   * txn held keys on other shards: that shard may have made the txn the
   * victim of a cross-shard deadlock and had its keys on the others
   * released (docs/distributed.md), so nothing it holds can be counted
   * on. Every key goes, and the call says ORDO_ELEASE (retryable), as for
   * a lease lost. */
  bool lost = rc == ORDO_EBACKEND && held_before && sent_heldat &&
              ordo__od_txn_unanswered(atomic_load(&t->sub[i]));
  if (rc) {
    /* Undo shards 0..i-1: what this call took there. */
    for (size_t j = 0; j < p->n; j++) {
      ordo_txn_t *s = atomic_load(&t->sub[j]);
      if (!s || j == i)
        continue;
      if (rc == ORDO_EDEADLK || lost)
        OD->unlock_all(s);
      else if (j < i)
        for (size_t k = first[j]; k < first[j + 1]; k++)
          OD->unlock(s, g[k].key, g[k].len);
    }
    if (lost)
      rc = ORDO_ELEASE;
    if (rc == ORDO_EDEADLK || lost)
      t->attempt++; /* every key given back: a new attempt */
  }
out:
  free(sh);
  free(first);
  free(g);
  free(heldat);
  return rc;
}

static int sh_unlock(ordo_txn_t *tx, const void *key, size_t len) {
  sh_txn *t = st(tx);
  ordo_txn_t *s = atomic_load(&t->sub[shard_of(sp(tx->o), key, len)]);
  return s ? OD->unlock(s, key, len) : ORDO_ENOTHELD;
}

/* Every shard's UNLOCK: the keys released in all, or the first error
 * (after every shard was asked). */
static int sh_unlock_all(ordo_txn_t *tx) {
  sh_txn *t = st(tx);
  sh_place *p = sp(tx->o);
  int total = 0, err = 0;
  t->attempt++; /* what it takes next is a new attempt's */
  for (size_t i = 0; i < p->n; i++) {
    ordo_txn_t *s = atomic_load(&t->sub[i]);
    if (!s)
      continue;
    int rc = OD->unlock_all(s);
    if (rc < 0 && err == 0)
      err = rc;
    else if (rc > 0)
      total += rc;
  }
  return err ? err : total;
}

static int sh_held(ordo_txn_t *tx, const void *key, size_t len,
                   ordo_mode_t *mode, uint64_t *fence) {
  sh_txn *t = st(tx);
  ordo_txn_t *s = atomic_load(&t->sub[shard_of(sp(tx->o), key, len)]);
  return s ? OD->held(s, key, len, mode, fence) : 0;
}

static unsigned sh_txn_aborts(const ordo_txn_t *tx) {
  const sh_txn *t = (const sh_txn *)tx;
  const sh_place *p = (const sh_place *)tx->o;
  unsigned sum = 0;
  for (size_t i = 0; i < p->n; i++) {
    ordo_txn_t *s = atomic_load(&t->sub[i]);
    if (s)
      sum += OD->txn_aborts(s);
  }
  return sum;
}

/* A shard's lease-lost callback: the user's, with the sharded txn. It runs
 * on that shard's renewal thread with no lock held; ordo_txn_end of the
 * sharded txn ends the sub-txn, which waits for this to return. */
static void sh_lost(ordo_txn_t *sub, void *arg) {
  sh_place *p = arg;
  sh_txn *t = ordo__od_txn_owner(sub);
  ordo__mutex_lock(&p->cb_mu);
  sh_lost_cb cb = p->cb;
  void *a = p->cb_arg;
  ordo__mutex_unlock(&p->cb_mu);
  if (cb && t)
    cb(&t->base, a);
}

static void sh_on_lease_lost(ordo_t *o, sh_lost_cb cb, void *arg) {
  sh_place *p = sp(o);
  ordo__mutex_lock(&p->cb_mu);
  p->cb = cb;
  p->cb_arg = arg;
  ordo__mutex_unlock(&p->cb_mu);
}

/* The shards' INFO counters added up (max_wait_us: the largest); the
 * first error once every shard was asked, with the others' sums. */
static int sh_stats(ordo_t *o, ordo_stats_t *out) {
  sh_place *p = sp(o);
  memset(out, 0, sizeof *out);
  int err = 0;
  for (size_t i = 0; i < p->n; i++) {
    ordo_stats_t s;
    int rc = OD->stats(p->s[i].sub, &s);
    if (rc) {
      err = err ? err : rc;
      continue;
    }
    uint64_t mw =
        out->max_wait_us > s.max_wait_us ? out->max_wait_us : s.max_wait_us;
    uint64_t *d = (uint64_t *)out;
    const uint64_t *v = (const uint64_t *)&s;
    for (size_t k = 0; k < sizeof s / sizeof *v; k++)
      d[k] += v[k];
    out->max_wait_us = mw;
  }
  return err;
}

static int write_str(int fd, const char *s) {
  return ordo__write_all(fd, s, strlen(s));
}

/*
 * sh_graph -- each shard's GRAPH: DOT, one digraph per shard after a
 * comment naming it (dot(1) reads several graphs from one file); JSON,
 * {"shards":[{"shard":NAME,"graph":G},...]} with G null for a shard that
 * did not answer. The first error after every shard was asked.
 */
static int sh_graph(ordo_t *o, int fd, ordo_graph_fmt_t fmt) {
  sh_place *p = sp(o);
  bool json = fmt == ORDO_GRAPH_JSON;
  int werr = json ? write_str(fd, "{\"shards\":[") : 0, first = 0;
  char line[SH_NAME_MAX + 64];
  for (size_t i = 0; i < p->n && werr == 0; i++) {
    /* Names hold no '"' or '\\' (ordod.c's URL check refuses them). */
    snprintf(line, sizeof line,
             json ? "%s{\"shard\":\"%s\",\"graph\":" : "%s// shard %s\n",
             i && json ? "," : "", p->s[i].name);
    if ((werr = write_str(fd, line)) != 0)
      break;
    int rc = OD->graph(p->s[i].sub, fd, fmt);
    if (rc && first == 0)
      first = rc;
    if (json)
      werr = write_str(fd, rc ? "null}" : "}");
  }
  if (json && werr == 0)
    werr = write_str(fd, "]}\n");
  return werr ? werr : first;
}

/* The place (its shards in shard order), then each shard's own dump. */
static void sh_dump(ordo_t *o, int fd) {
  sh_place *p = sp(o);
  char line[SH_NAME_MAX + 64];
  snprintf(line, sizeof line, "%s: %zu shards, in shard order:\n", o->url,
           p->n);
  write_str(fd, line);
  for (size_t i = 0; i < p->n; i++) {
    snprintf(line, sizeof line, "-- shard %zu: %s\n", i, p->s[i].name);
    write_str(fd, line);
    OD->dump(p->s[i].sub, fd);
  }
}

const ordo__backend ordo__backend_shards = {
    .scheme = "ordod",
    /* ordod's, less WAIT_HOLDS_NOTHING: a lock_all that waits on one shard
     * holds the groups it took on the shards ranked below it. */
    .caps = ORDO_CAP_SHARED | ORDO_CAP_SERVER_WAIT | ORDO_CAP_FENCE |
            ORDO_CAP_FENCE_DURABLE | ORDO_CAP_INCREMENTAL | ORDO_CAP_REENTRANT |
            ORDO_CAP_UPGRADE,
    .open = sh_open,
    .close = sh_close,
    .txn_begin = sh_txn_begin,
    .txn_end = sh_txn_end,
    .lock_all = sh_lock_all,
    .lock_all_async = NULL, /* as ordod.c: ORDO_ENOTSUP */
    .unlock = sh_unlock,
    .unlock_all = sh_unlock_all,
    .cancel = NULL, /* as ordod.c: ORDO_ENOTSUP */
    .held = sh_held,
    .stats = sh_stats,
    .dump = sh_dump,
    .graph = sh_graph,
    .txn_aborts = sh_txn_aborts,
    .on_lease_lost = sh_on_lease_lost,
};
