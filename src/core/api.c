/*
 * api.c -- the public entry points: ordo_open and the URL, argument checks,
 * the canonical order of requests, and dispatch to the backend's vtable.
 * See src/core/README.md.
 *
 * Interface: ordo_options_init, ordo_open, ordo_close, ordo_caps, ordo_url,
 * ordo_txn_begin, ordo_txn_end, ordo_txn_id, ordo_lock_all, ordo_lock,
 * ordo_lock_all_async, ordo_unlock, ordo_unlock_all, ordo_cancel, ordo_held,
 * ordo_fence, ordo_stats, ordo_dump.
 */
#include "ordo_int.h"

#include <errno.h>
#include <string.h>

void ordo_options_init(ordo_options_t *o) {
  o->stripes = 64;
  o->max_locks = 1000000;
  o->max_key_len = ORDO_KEY_MAX_DEFAULT;
  o->starvation_us = 1000;
  o->hold_sample = 64;
  o->spin_us = 20;
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
  if (o->starvation_us < 0 || o->spin_us < 0 || o->spin_us > 1000000)
    return ORDO_EINVAL;
  return 0;
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
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (*end || errno || v < 0)
      return ORDO_EURL;
#define OPT(name) (nlen == sizeof(name) - 1 && memcmp(q, name, nlen) == 0)
    if (OPT("stripes"))
      o->stripes = (unsigned)v;
    else if (OPT("max_locks"))
      o->max_locks = (size_t)v;
    else if (OPT("max_key_len"))
      o->max_key_len = (size_t)v;
    else if (OPT("starvation_us"))
      o->starvation_us = (long)v;
    else if (OPT("hold_sample"))
      o->hold_sample = (unsigned)v;
    else if (OPT("spin_us"))
      o->spin_us = (long)v;
    else
      return ORDO_EURL;
#undef OPT
    q += len;
    if (*q == '&')
      q++;
  }
  return 0;
}

/* The URL with any password cut out of its user-info part. */
static char *redact(const char *url) {
  char *r = strdup(url);
  if (!r)
    return NULL;
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
  if (!p->url) {
    be->close(p);
    return ORDO_ENOMEM;
  }
  *out = p;
  return 0;
}

void ordo_close(ordo_t *o) {
  if (!o)
    return;
  char *url = o->url;
  o->be->close(o);
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
  (*out)->name[0] = 0;
  if (opts && opts->name) {
    strncpy((*out)->name, opts->name, sizeof((*out)->name) - 1);
    (*out)->name[sizeof((*out)->name) - 1] = 0;
  }
  return 0;
}

void ordo_txn_end(ordo_txn_t *t) {
  if (t)
    t->o->be->txn_end(t);
}

uint64_t ordo_txn_id(const ordo_txn_t *t) {
  return t ? t->id : 0;
}

static int check_key(const ordo_t *o, const void *key, size_t len) {
  if (!key || len == 0 || len > o->opts.max_key_len)
    return ORDO_EINVAL;
  return 0;
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
  for (size_t i = 0; i < n; i++) {
    if ((*err = check_key(t->o, reqs[i].key, reqs[i].len)) != 0)
      return NULL;
    if (reqs[i].mode != ORDO_MODE_S && reqs[i].mode != ORDO_MODE_X) {
      *err = ORDO_EINVAL;
      return NULL;
    }
    if (reqs[i].mode == ORDO_MODE_S && !(t->o->be->caps & ORDO_CAP_SHARED)) {
      *err = ORDO_ENOTSUP;
      return NULL;
    }
  }
  ordo_req_t *r = buf;
  if (n > cap) {
    r = malloc(n * sizeof *r);
    if (!r) {
      *err = ORDO_ENOMEM;
      return NULL;
    }
  }
  memcpy(r, reqs, n * sizeof *r);
  *count = ordo__reqs_normalize(r, n);
  *err = 0;
  return r;
}

int ordo_lock_all(ordo_txn_t *t, const ordo_req_t *reqs, size_t n,
                  long timeout_ms) {
  if (n == 1) {
    /* One key: nothing to sort. */
    if (!t || !reqs)
      return ORDO_EINVAL;
    return ordo_lock(t, reqs[0].key, reqs[0].len, reqs[0].mode, timeout_ms);
  }
  ordo_req_t buf[16];
  size_t m = 0;
  int err;
  ordo_req_t *r = normalize(t, reqs, n, buf, 16, &m, &err);
  if (!r)
    return err;
  if (m == 0)
    return 0;
  int rc = t->o->be->lock_all(t, r, m, ordo__deadline_ns(timeout_ms));
  if (r != buf)
    free(r);
  return rc;
}

int ordo_lock(ordo_txn_t *t, const void *key, size_t len, ordo_mode_t mode,
              long timeout_ms) {
  if (!t)
    return ORDO_EINVAL;
  int rc = check_key(t->o, key, len);
  if (rc)
    return rc;
  if (mode != ORDO_MODE_X && mode != ORDO_MODE_S)
    return ORDO_EINVAL;
  if (mode == ORDO_MODE_S && !(t->o->be->caps & ORDO_CAP_SHARED))
    return ORDO_ENOTSUP;
  ordo_req_t r = {key, len, mode};
  return t->o->be->lock_all(t, &r, 1, ordo__deadline_ns(timeout_ms));
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
  if (m > 0)
    rc = t->o->be->lock_all_async(t, r, m, ordo__deadline_ns(timeout_ms), cb,
                                  arg);
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
  return t->o->be->unlock(t, key, len);
}

int ordo_unlock_all(ordo_txn_t *t) {
  if (!t)
    return ORDO_EINVAL;
  return t->o->be->unlock_all(t);
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

int ordo_stats(ordo_t *o, ordo_stats_t *out) {
  if (!o || !out)
    return ORDO_EINVAL;
  int rc = o->be->stats(o, out);
  out->retries = atomic_load_explicit(&o->retries, memory_order_relaxed);
  return rc;
}

void ordo_dump(ordo_t *o, int fd) {
  if (o && o->be->dump)
    o->be->dump(o, fd);
}
