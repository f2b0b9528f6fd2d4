/*
 * api.c -- the public entry points: ordo_open and the URL, argument checks,
 * the canonical order of requests, and dispatch to the backend's vtable.
 * See src/core/README.md.
 *
 * Interface: ordo_options_init, ordo_open, ordo_close, ordo_caps, ordo_url,
 * ordo_txn_begin, ordo_txn_end, ordo_txn_id, ordo_lock_all, ordo_lock,
 * ordo_lock_all_async, ordo_unlock, ordo_unlock_all, ordo_cancel, ordo_held,
 * ordo_fence, ordo_on_lease_lost, ordo_stats, ordo_dump; ordo_lock_all_at,
 * ordo_lock_at, ordo_order_rank, ordo_on_order (the hooks of the lock-order
 * checker, src/detect/README.md).
 */
#include "ordo_int.h"
#include "detect/order.h"

#include <errno.h>
#include <string.h>

/*
 * Remote places under ThreadSanitizer. A remote place's exclusion is kept
 * by another process (ordod, Redis, PostgreSQL): its grant to one thread
 * comes after another thread's release, but no memory of this process
 * carries that order, so TSan would see the two threads' critical sections
 * as unordered. This is not a suppression: the annotations state that real
 * order, per place (every release before every later grant, which is what
 * the server's one lock table gives), and only for places without the
 * in-process engine, whose own mutexes TSan does see. A place's real
 * exclusion is checked by the bank's owner words and the fault harness.
 */
#if defined(__SANITIZE_THREAD__)
#define ORDO__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ORDO__TSAN 1
#endif
#endif
#ifdef ORDO__TSAN
#include <sanitizer/tsan_interface.h>
static void remote_released(ordo_t *o) {
  if (!o->engine)
    __tsan_release(o);
}
static void remote_granted(ordo_t *o) {
  if (!o->engine)
    __tsan_acquire(o);
}
#else
#define remote_released(o) ((void)(o))
#define remote_granted(o) ((void)(o))
#endif

void ordo_options_init(ordo_options_t *o) {
  o->stripes = 64;
  o->max_locks = 1000000;
  o->max_key_len = ORDO_KEY_MAX_DEFAULT;
  o->starvation_us = 1000;
  o->starvation_holds = 8;
  o->hold_sample = 64;
  o->spin_us = 20;
  o->detect = ORDO_DETECT_IMMEDIATE;
  o->deadlock_timeout_ms = 1000;
  o->sweep_ms = 1000;
  o->victim = ORDO_VICTIM_YOUNGEST;
  o->log_wait_ms = 1000;
  o->deadlock_history = 32;
  o->alarm_per_min = 60;
  o->alarm_window_s = 60;
  o->order = ORDO_ORDER_OFF;
  o->order_sep = ':';
}

static bool pow2(unsigned long v) {
  return v && (v & (v - 1)) == 0;
}

static int check_options(const ordo_options_t *o) {
  if (!pow2(o->stripes) || o->stripes > 65536)
    return ORDO_EINVAL;
  if (!pow2(o->hold_sample))
    return ORDO_EINVAL;
  if (o->max_locks == 0 || o->max_key_len == 0 || o->max_key_len > (1u << 20))
    return ORDO_EINVAL;
  if (o->starvation_us < 0 || o->spin_us < 0 || o->spin_us > 1000000 ||
      o->starvation_holds > 1000000)
    return ORDO_EINVAL;
  if ((unsigned)o->detect > ORDO_DETECT_OFF ||
      (unsigned)o->victim >= ORDO_VICTIM__COUNT ||
      (unsigned)o->order > ORDO_ORDER_REFUSE)
    return ORDO_EINVAL;
  if (o->deadlock_timeout_ms < 0 || o->sweep_ms < 0 || o->log_wait_ms < 0 ||
      o->deadlock_history == 0 || o->deadlock_history > 100000 ||
      o->alarm_window_s == 0 || o->alarm_window_s > 86400)
    return ORDO_EINVAL;
  return 0;
}

static const char *const detect_names[] = {"immediate", "delayed", "off", NULL};
static const char *const victim_names[] = {
    "youngest",         "oldest",          "fewest_locks", "least_work",
    "nearest_deadline", "lowest_priority", "random",       NULL};
static const char *const order_names[] = {"off", "warn", "refuse", NULL};

/* The index of val in names, or -1. */
static int name_value(const char *const *names, const char *val) {
  for (int i = 0; names && names[i]; i++)
    if (strcmp(names[i], val) == 0)
      return i;
  return -1;
}

/* Parses "name=value&..." of a mem:// URL into opts. */
static int parse_query(const char *q, ordo_options_t *o) {
  while (*q) {
    const char *amp = strchr(q, '&');
    size_t len = amp ? (size_t)(amp - q) : strlen(q);
    const char *eq = memchr(q, '=', len);
    if (!eq)
      return ORDO_EURL;
    size_t nlen = (size_t)(eq - q);
    char val[32];
    size_t vlen = len - nlen - 1;
    if (vlen == 0 || vlen >= sizeof val)
      return ORDO_EURL;
    memcpy(val, eq + 1, vlen);
    val[vlen] = 0;
#define OPT(name) (nlen == sizeof(name) - 1 && memcmp(q, name, nlen) == 0)
    /* Options whose values are names. */
    int named = name_value(OPT("detect")   ? detect_names
                           : OPT("victim") ? victim_names
                           : OPT("order")  ? order_names
                                           : NULL,
                           val);
    if (OPT("detect") || OPT("victim") || OPT("order")) {
      if (named < 0)
        return ORDO_EURL;
      if (OPT("detect"))
        o->detect = (ordo_detect_t)named;
      else if (OPT("victim"))
        o->victim = (ordo_victim_t)named;
      else
        o->order = (ordo_order_mode_t)named;
      goto next;
    }
    if (OPT("order_sep")) {
      if (vlen != 1)
        return ORDO_EURL;
      o->order_sep = val[0];
      goto next;
    }
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (*end || errno || v < 0)
      return ORDO_EURL;
    if (OPT("stripes"))
      o->stripes = (unsigned)v;
    else if (OPT("max_locks"))
      o->max_locks = (size_t)v;
    else if (OPT("max_key_len"))
      o->max_key_len = (size_t)v;
    else if (OPT("starvation_us"))
      o->starvation_us = (long)v;
    else if (OPT("starvation_holds"))
      o->starvation_holds = (unsigned)v;
    else if (OPT("hold_sample"))
      o->hold_sample = (unsigned)v;
    else if (OPT("spin_us"))
      o->spin_us = (long)v;
    else if (OPT("deadlock_timeout_ms"))
      o->deadlock_timeout_ms = (long)v;
    else if (OPT("sweep_ms"))
      o->sweep_ms = (long)v;
    else if (OPT("log_wait_ms"))
      o->log_wait_ms = (long)v;
    else if (OPT("deadlock_history"))
      o->deadlock_history = (unsigned)v;
    else if (OPT("alarm_per_min"))
      o->alarm_per_min = (unsigned)v;
    else if (OPT("alarm_window_s"))
      o->alarm_window_s = (unsigned)v;
    else
      return ORDO_EURL;
#undef OPT
  next:
    q += len;
    if (*q == '&')
      q++;
  }
  return 0;
}

/* Cuts the value of each "password=" out of s, in place: a libpq conninfo
 * string (postgres:host=... password=...) or a URI's query. */
static void redact_password_params(char *s) {
  for (char *p = s; (p = strstr(p, "password=")) != NULL;) {
    if (p != s && p[-1] != ' ' && p[-1] != '?' && p[-1] != '&') {
      p += 9;
      continue;
    }
    char *v = p + 9, *e = v;
    if (*e == '\'') {
      for (e++; *e && *e != '\''; e++)
        if (*e == '\\' && e[1])
          e++;
      if (*e)
        e++;
    } else {
      e += strcspn(e, " &");
    }
    memmove(v, e, strlen(e) + 1);
    p = v;
  }
}

/* The URL with any password cut out of its user-info part. */
static char *redact(const char *url) {
  char *r = strdup(url);
  if (!r)
    return NULL;
  redact_password_params(r);
  char *p = strstr(r, "://");
  if (!p)
    return r;
  p += 3;
  char *at = strchr(p, '@');
  char *slash = strchr(p, '/');
  if (!at || (slash && slash < at))
    return r;
  char *colon = memchr(p, ':', (size_t)(at - p));
  if (colon)
    memmove(colon, at, strlen(at) + 1);
  return r;
}

int ordo_open(ordo_t **out, const char *url, const ordo_options_t *opts) {
  if (!out)
    return ORDO_EINVAL;
  *out = NULL;
  if (!url || !*url)
    url = "mem://";
  ordo_options_t o;
  if (opts)
    o = *opts;
  else
    ordo_options_init(&o);
  const ordo__backend *be = NULL;
  if (strncmp(url, "mem://", 6) == 0) {
    be = &ordo__backend_mem;
    const char *rest = url + 6;
    if (*rest == '?') {
      int rc = parse_query(rest + 1, &o);
      if (rc)
        return rc;
    } else if (*rest) {
      return ORDO_EURL;
    }
  } else if (strncmp(url, "ordod://", 8) == 0) {
    /* Two or more addresses make a sharded place (backend/shards.c). */
    be = ordo__shards_multi(url) ? &ordo__backend_shards : &ordo__backend_ordod;
  } else if (strncmp(url, "redis://", 8) == 0 ||
             strncmp(url, "rediss://", 9) == 0) {
    be = &ordo__backend_redis; /* likewise */
  } else if (strncmp(url, "redis-sentinel://", 17) == 0) {
    be = &ordo__backend_rsentinel; /* likewise */
  } else if (strncmp(url, "redlock://", 10) == 0) {
    be = &ordo__backend_redlock; /* likewise */
  } else if (strncmp(url, "redis-cluster://", 16) == 0) {
    be = &ordo__backend_rcluster; /* likewise */
  } else if (strncmp(url, "postgres:", 9) == 0 ||
             strncmp(url, "postgresql://", 13) == 0) {
    be = &ordo__backend_postgres; /* a URI or a conninfo string */
  } else if (strncmp(url, "etcd://", 7) == 0) {
    be = &ordo__backend_etcd; /* an etcd v3 cluster (backend/etcd.c) */
  } else {
    return ORDO_EURL;
  }
  int rc = check_options(&o);
  if (rc)
    return rc;
  ordo_t *p = NULL;
  rc = be->open(&p, url, &o);
  if (rc)
    return rc;
  p->be = be;
  p->opts = o;
  p->url = redact(url);
  atomic_init(&p->retries, 0);
  p->order = NULL;
  atomic_init(&p->exec, NULL);
  if (!p->url) {
    be->close(p);
    return ORDO_ENOMEM;
  }
  if (o.order != ORDO_ORDER_OFF) {
    rc = ordo__order_create(&p->order, &o);
    if (rc) {
      char *u = p->url;
      be->close(p);
      free(u);
      return rc;
    }
  }
  *out = p;
  return 0;
}

void ordo_close(ordo_t *o) {
  if (!o)
    return;
  char *url = o->url;
  struct ordo__order *ck = o->order;
  ordo__exec_place_close(o);
  o->be->close(o);
  ordo__order_destroy(ck);
  free(url);
}

unsigned ordo_caps(const ordo_t *o) {
  return o ? o->be->caps : 0;
}
const char *ordo_url(const ordo_t *o) {
  return o ? o->url : NULL;
}

int ordo_txn_begin(ordo_t *o, ordo_txn_t **out,
                   const ordo_txn_options_t *opts) {
  if (!o || !out)
    return ORDO_EINVAL;
  int prio = opts ? opts->priority : 0;
  int rc = o->be->txn_begin(o, out, prio);
  if (rc)
    return rc;
  (*out)->o = o;
  (*out)->priority = prio;
  (*out)->order_state = NULL;
  (*out)->name[0] = 0;
  if (opts && opts->name) {
    strncpy((*out)->name, opts->name, sizeof((*out)->name) - 1);
    (*out)->name[sizeof((*out)->name) - 1] = 0;
  }
  if (opts && opts->cost)
    ordo_txn_add_cost(*out, opts->cost);
  /* Begun while this thread runs a task: the txn is the task's. */
  if (ordo__exec_cur)
    ordo__exec_txn_begun(*out);
  return 0;
}

void ordo_txn_end(ordo_txn_t *t) {
  if (!t)
    return;
  struct ordo__order *ck = t->o->order;
  /* The checker's state goes after the txn: ending it cancels a pending
   * async request, whose callback (ordo__order_async_done) still uses it. */
  void *order_state = t->order_state;
  /* A txn a task began is forgotten by its task whatever thread ends it:
   * ordo.h allows ending one with an async request pending from anywhere
   * (issue 31, defect 2). */
  if (ordo__exec_cur || atomic_load_explicit(&t->o->exec, memory_order_relaxed))
    ordo__exec_txn_ending(t);
  remote_released(t->o);
  t->o->be->txn_end(t);
  if (ck)
    ordo__order_txn_end(ck, order_state);
}

uint64_t ordo_txn_id(const ordo_txn_t *t) {
  return t ? t->id : 0;
}

static int check_key(const ordo_t *o, const void *key, size_t len) {
  if (!key || len == 0 || len > o->opts.max_key_len)
    return ORDO_EINVAL;
  return 0;
}

/* A request's key and mode, for t's place. */
static inline int check_req(const ordo_txn_t *t, const ordo_req_t *r) {
  int err = check_key(t->o, r->key, r->len);
  if (!err && r->mode != ORDO_MODE_S && r->mode != ORDO_MODE_X)
    err = ORDO_EINVAL;
  if (!err && r->mode == ORDO_MODE_S && !(t->o->be->caps & ORDO_CAP_SHARED))
    err = ORDO_ENOTSUP;
  return err;
}

/*
 * normalize -- validates reqs and copies them, in the canonical order and
 * without duplicates, into buf (of cap entries) or a heap array. Returns
 * the array to use (*count its length) or NULL with *err set.
 */
static ordo_req_t *normalize(ordo_txn_t *t, const ordo_req_t *reqs, size_t n,
                             ordo_req_t *buf, size_t cap, size_t *count,
                             int *err) {
  if (!t || (!reqs && n)) {
    *err = ORDO_EINVAL;
    return NULL;
  }
  ordo_req_t *r = buf;
  if (n > cap) {
    /* A count whose array would not fit in memory fails like malloc. */
    r = n <= SIZE_MAX / sizeof *r ? malloc(n * sizeof *r) : NULL;
    if (!r) {
      *err = ORDO_ENOMEM;
      return NULL;
    }
  }
  /* Checked and copied in one pass (requests are a few keys: a loop beats a
   * call to memcpy). */
  for (size_t i = 0; i < n; i++) {
    *err = check_req(t, &reqs[i]);
    if (*err) {
      if (r != buf)
        free(r);
      return NULL;
    }
    r[i] = reqs[i];
  }
  *count = ordo__reqs_normalize(r, n);
  *err = 0;
  return r;
}

/*
 * lock_sorted -- takes sorted[0..n) for t, made at file:line. With the
 * lock-order checker on, it is asked first (and may refuse, taking
 * nothing) and told of the grant after; off, this costs one branch.
 */
static inline __attribute__((always_inline)) int
lock_sorted(ordo_txn_t *t, const ordo_req_t *sorted, size_t n, long timeout_ms,
            const char *file, int line) {
  uint64_t deadline = ordo__deadline_ns(timeout_ms);
  struct ordo__order *ck = t->o->order;
  if (ck == NULL) {
    int rc = t->o->be->lock_all(t, sorted, n, deadline);
    if (rc == 0)
      remote_granted(t->o);
    return rc;
  }
  int rc = ordo__order_before(ck, t, sorted, n, file, line);
  if (rc)
    return rc;
  rc = t->o->be->lock_all(t, sorted, n, deadline);
  if (rc == 0) {
    remote_granted(t->o);
    ordo__order_granted(ck, t, sorted, n);
  }
  return rc;
}

int ordo_lock_all_at(ordo_txn_t *t, const ordo_req_t *reqs, size_t n,
                     long timeout_ms, const char *file, int line) {
  if (n == 1) {
    /* One key: nothing to sort. */
    if (!t || !reqs)
      return ORDO_EINVAL;
    return ordo_lock_at(t, reqs[0].key, reqs[0].len, reqs[0].mode, timeout_ms,
                        file, line);
  }
  if (n == 2) {
    /* A pair (a transfer's two accounts): checked, then ordered by
     * ordo__reqs_normalize's one comparison, without normalize's copy loop
     * into a 16-entry buffer. */
    if (!t || !reqs)
      return ORDO_EINVAL;
    int err = check_req(t, &reqs[0]);
    if (!err)
      err = check_req(t, &reqs[1]);
    if (err)
      return err;
    ordo_req_t p[2] = {reqs[0], reqs[1]};
    return lock_sorted(t, p, ordo__reqs_normalize(p, 2), timeout_ms, file,
                       line);
  }
  ordo_req_t buf[16];
  size_t m = 0;
  int err;
  ordo_req_t *r = normalize(t, reqs, n, buf, 16, &m, &err);
  if (!r)
    return err;
  if (m == 0)
    return 0;
  int rc = lock_sorted(t, r, m, timeout_ms, file, line);
  if (r != buf)
    free(r);
  return rc;
}

int ordo_lock_all(ordo_txn_t *t, const ordo_req_t *reqs, size_t n,
                  long timeout_ms) {
  return ordo_lock_all_at(t, reqs, n, timeout_ms, NULL, 0);
}

/* ordo_lock_at's body, inlined into ordo_lock too: the uncontended lock's
 * path is short enough that a call and its frame show. */
static inline __attribute__((always_inline)) int
lock_one(ordo_txn_t *t, const void *key, size_t len, ordo_mode_t mode,
         long timeout_ms, const char *file, int line) {
  if (!t)
    return ORDO_EINVAL;
  ordo_req_t r = {key, len, mode};
  int rc = check_req(t, &r);
  if (rc)
    return rc;
  return lock_sorted(t, &r, 1, timeout_ms, file, line);
}

int ordo_lock_at(ordo_txn_t *t, const void *key, size_t len, ordo_mode_t mode,
                 long timeout_ms, const char *file, int line) {
  return lock_one(t, key, len, mode, timeout_ms, file, line);
}

int ordo_lock(ordo_txn_t *t, const void *key, size_t len, ordo_mode_t mode,
              long timeout_ms) {
  return lock_one(t, key, len, mode, timeout_ms, NULL, 0);
}

int ordo_lock_all_async(ordo_txn_t *t, const ordo_req_t *reqs, size_t n,
                        long timeout_ms, ordo_done_cb cb, void *arg) {
  if (!cb)
    return ORDO_EINVAL;
  if (t && !t->o->be->lock_all_async)
    return ORDO_ENOTSUP;
  ordo_req_t buf[16];
  size_t m = 0;
  int err;
  ordo_req_t *r = normalize(t, reqs, n, buf, 16, &m, &err);
  if (!r)
    return err;
  int rc = 0;
  struct ordo__order *ck = m > 0 ? t->o->order : NULL;
  if (ck == NULL) {
    if (m > 0)
      rc = t->o->be->lock_all_async(t, r, m, ordo__deadline_ns(timeout_ms), cb,
                                    arg);
  } else if ((rc = ordo__order_before(ck, t, r, m, NULL, 0)) == 0) {
    /* The checker's callback records a later grant, then calls cb. */
    ordo__order_async_arm(t, cb, arg);
    rc = t->o->be->lock_all_async(t, r, m, ordo__deadline_ns(timeout_ms),
                                  ordo__order_async_done, NULL);
    if (rc != ORDO_PENDING)
      ordo__order_async_now(t, rc); /* no callback will come */
  }
  if (r != buf)
    free(r);
  return rc;
}

int ordo_unlock(ordo_txn_t *t, const void *key, size_t len) {
  if (!t)
    return ORDO_EINVAL;
  int rc = check_key(t->o, key, len);
  if (rc)
    return rc;
  remote_released(t->o);
  rc = t->o->be->unlock(t, key, len);
  if (rc == 0 && t->o->order)
    ordo__order_released(t->o->order, t, key, len);
  return rc;
}

int ordo_unlock_all(ordo_txn_t *t) {
  if (!t)
    return ORDO_EINVAL;
  remote_released(t->o);
  int rc = t->o->be->unlock_all(t);
  if (t->o->order)
    ordo__order_released_all(t->o->order, t);
  return rc;
}

int ordo_cancel(ordo_txn_t *t) {
  if (!t)
    return ORDO_EINVAL;
  if (!t->o->be->cancel)
    return ORDO_ENOTSUP;
  return t->o->be->cancel(t);
}

int ordo_held(ordo_txn_t *t, const void *key, size_t len, ordo_mode_t *mode) {
  if (!t)
    return ORDO_EINVAL;
  int rc = check_key(t->o, key, len);
  if (rc)
    return rc;
  return t->o->be->held(t, key, len, mode, NULL);
}

int ordo_fence(ordo_txn_t *t, const void *key, size_t len, uint64_t *token) {
  if (!t || !token)
    return ORDO_EINVAL;
  int rc = check_key(t->o, key, len);
  if (rc)
    return rc;
  if (!(t->o->be->caps & ORDO_CAP_FENCE))
    return ORDO_ENOTSUP;
  rc = t->o->be->held(t, key, len, NULL, token);
  return rc > 0 ? 0 : (rc < 0 ? rc : ORDO_ENOTHELD);
}

void ordo_on_lease_lost(ordo_t *o, void (*cb)(ordo_txn_t *t, void *arg),
                        void *arg) {
  if (o && o->be->on_lease_lost)
    o->be->on_lease_lost(o, cb, arg);
}

int ordo_order_rank(ordo_t *o, const void *prefix, size_t len, int rank) {
  if (!o || !prefix || len == 0 || len > o->opts.max_key_len)
    return ORDO_EINVAL;
  /* Off, ranks are accepted and ignored, so code need not change with it. */
  if (!o->order)
    return 0;
  return ordo__order_rank(o->order, prefix, len, rank);
}

void ordo_on_order(ordo_t *o, ordo_order_cb cb, void *arg) {
  if (o && o->order)
    ordo__order_set_cb(o->order, cb, arg);
}

int ordo_stats(ordo_t *o, ordo_stats_t *out) {
  if (!o || !out)
    return ORDO_EINVAL;
  int rc = o->be->stats(o, out);
  out->retries = atomic_load_explicit(&o->retries, memory_order_relaxed);
  out->order_reports = o->order ? ordo__order_reports(o->order) : 0;
  return rc;
}

void ordo_dump(ordo_t *o, int fd) {
  if (o && o->be->dump)
    o->be->dump(o, fd);
}
