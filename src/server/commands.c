/*
 * commands.c -- ordod's commands: one table (name, arity, flags, handler,
 * one-line help), the dispatcher, and the handlers. See README.md and
 * docs/protocol.md, which documents each command.
 *
 * Interface: srv_dispatch, srv_cmd_find, srv_cmd_count, srv_cmd_at,
 * srv_lock_reply, srv_held_write, srv_graph_text.
 */
#include "server/server.h"

#include "core/table.h"

#include <ctype.h>
#include <fnmatch.h>
#include <limits.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define FENCE_SHIFT 40

/*
 * The heap bytes in use, for INFO's used_memory: what the sanitizer's
 * allocator counts in a sanitizer build (where mallinfo2 is intercepted and
 * says nothing, and RSS counts shadow memory and AddressSanitizer's
 * quarantine), glibc's count of bytes in allocated chunks otherwise. Either
 * way it is the bytes malloc has handed out and not had back, so a leak
 * shows in it whatever the allocator keeps for itself.
 */
#if defined(ORDO_SANITIZED)
#if defined(__has_include)
#if __has_include(<sanitizer/allocator_interface.h>)
#include <sanitizer/allocator_interface.h>
#define HAVE_SANITIZER_ALLOCATOR_H 1
#endif
#endif
#ifndef HAVE_SANITIZER_ALLOCATOR_H
size_t __sanitizer_get_current_allocated_bytes(void);
#endif
#define MEM_ALLOCATOR "sanitizer"
static size_t heap_used(void) {
  return __sanitizer_get_current_allocated_bytes();
}
#elif defined(__GLIBC__) &&                                                    \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>
#define MEM_ALLOCATOR "glibc"
static size_t heap_used(void) {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd; /* chunks in the arenas, and mmap'd ones */
}
#else
#define MEM_ALLOCATOR "unknown"
static size_t heap_used(void) {
  return 0;
}
#endif

static bool arg_is(const ordo__resp_arg *a, const char *s) {
  size_t n = strlen(s);
  return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

/* A decimal integer argument in [lo, hi]. */
static bool arg_num(const ordo__resp_arg *a, long long lo, long long hi,
                    long long *out) {
  if (a->len == 0 || a->len > 20)
    return false;
  char buf[24];
  memcpy(buf, a->ptr, a->len);
  buf[a->len] = 0;
  char *end;
  long long v = strtoll(buf, &end, 10);
  if (*end || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

/* The admin commands' gate: false, with -NOPERM written, for a connection
 * that is not an admin (what is "cmd|sub" is named as Redis 7 names it). */
static bool need_admin(conn *c, const char *what) {
  if (srv_conn_is_admin(c))
    return true;
  ordo__out_error(&c->out, "NOPERM",
                  "this user has no permissions to run the '%s' command", what);
  return false;
}

/* ---- Held keys of a session ------------------------------------------------
 *
 * The server keeps no record of its own of what a session holds: the
 * engine's holds are the record (ordo__owner_each_hold, ordo__owner_nholds:
 * core/table.h), so a held lock costs the server nothing beyond the engine's
 * lock object and hold, and the two can never disagree.
 */

/* A reply about a session's holds. Its items are written to a buffer of
 * their own first, since the engine tells the count only with them (a
 * deadlock sweep on the timer thread may release a waiting session's holds
 * between two calls). */
typedef struct held_reply {
  ordo__out items;
  size_t n;
  uint64_t epoch; /* the server's epoch, shifted into place for tokens */
  bool keys_only; /* the lease-lost push names keys alone */
} held_reply;

static void held_item(void *arg, const void *key, size_t len, ordo_mode_t mode,
                      uint64_t fence, unsigned count) {
  held_reply *r = arg;
  r->n++;
  if (r->keys_only) {
    ordo__out_bulk(&r->items, key, len);
    return;
  }
  ordo__out_array(&r->items, 4);
  ordo__out_bulk(&r->items, key, len);
  ordo__out_bulk(&r->items, mode == ORDO_MODE_S ? "S" : "X", 1);
  ordo__out_int(&r->items, (long long)(r->epoch | fence));
  ordo__out_int(&r->items, (long long)count);
}

size_t srv_held_write(ordo__out *out, srv *s, sess *ss, bool lost) {
  held_reply r = {{0}, 0, s->epoch << FENCE_SHIFT, lost};
  ordo__owner_each_hold(ordo__engine_owner(ss->txn), held_item, &r);
  if (lost) {
    ordo__out_push(out, 1 + r.n, 3);
    ordo__out_bulk(out, "lease-lost", 10);
  } else {
    ordo__out_array(out, r.n);
  }
  ordo__out_append(out, &r.items);
  ordo__out_free(&r.items);
  return r.n;
}

/* ---- LOCK -----------------------------------------------------------------
 */

/* What a LOCK's callback needs: the session is named by id, never by
 * pointer, since the callback may come from the engine's timer thread. */
typedef struct lock_tag {
  srv *s;
  uint64_t sess_id, gen;
} lock_tag;

static void lock_done(ordo_txn_t *t, int status, void *arg) {
  (void)t;
  lock_tag *tag = arg;
  srv_event_push(tag->s, tag->sess_id, tag->gen, status);
  free(tag);
}

static uint64_t token_of(srv *s, ordo_txn_t *t, const void *k, size_t n) {
  uint64_t f = 0;
  if (ordo_fence(t, k, n, &f) != 0)
    return 0;
  return (s->epoch << FENCE_SHIFT) | f;
}

/* The reply to a granted LOCK: the lease's validity and each key's token, in
 * canonical order. */
void srv_lock_reply(conn *c, sess *ss) {
  srv *s = c->s;
  /* Canonical order: ordo's own sort. */
  size_t n = ss->nreq;
  ordo_req_t *r = ss->req;
  for (size_t i = 1; i < n; i++) {
    ordo_req_t x = r[i];
    size_t j = i;
    while (j > 0 &&
           ordo_key_cmp(r[j - 1].key, r[j - 1].len, x.key, x.len) > 0) {
      r[j] = r[j - 1];
      j--;
    }
    r[j] = x;
  }
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (m == 0 ||
        ordo_key_cmp(r[m - 1].key, r[m - 1].len, r[i].key, r[i].len) != 0)
      r[m++] = r[i];
  uint64_t now = srv_now_ms();
  ordo__out_array(&c->out, 2);
  ordo__out_int(&c->out,
                ss->expires_ms > now ? (long long)(ss->expires_ms - now) : 0);
  ordo__out_array(&c->out, 2 * m);
  for (size_t i = 0; i < m; i++) {
    ordo__out_bulk(&c->out, r[i].key, r[i].len);
    ordo__out_int(&c->out, (long long)token_of(s, ss->txn, r[i].key, r[i].len));
  }
}

/* A global txn id in hex, and back (server.h). */
void srv_gid_hex(const uint8_t gid[ORDOD_GID_BYTES],
                 char out[ORDOD_GID_HEX + 1]) {
  static const char hx[] = "0123456789abcdef";
  for (int i = 0; i < ORDOD_GID_BYTES; i++) {
    out[2 * i] = hx[gid[i] >> 4];
    out[2 * i + 1] = hx[gid[i] & 15];
  }
  out[ORDOD_GID_HEX] = 0;
}

bool srv_gid_parse(const char *s, size_t len, uint8_t gid[ORDOD_GID_BYTES]) {
  if (len != ORDOD_GID_HEX)
    return false;
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    int v = ch >= '0' && ch <= '9'   ? ch - '0'
            : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
            : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                     : -1;
    if (v < 0)
      return false;
    if (i % 2 == 0)
      gid[i / 2] = (uint8_t)(v << 4);
    else
      gid[i / 2] |= (uint8_t)v;
  }
  return true;
}

static void cmd_lock(conn *c, size_t argc, ordo__resp_arg *argv) {
  srv *s = c->s;
  sess *ss = c->sess;
  long long nk;
  if (!arg_num(&argv[1], 1, (long long)s->cfg.max_keys, &nk)) {
    if (arg_num(&argv[1], 1, LLONG_MAX, &nk))
      ordo__out_error(&c->out, "LIMIT",
                      "%lld keys in one LOCK; the limit is %zu", nk,
                      s->cfg.max_keys);
    else
      ordo__out_error(&c->out, "ERR",
                      "LOCK numkeys key mode [key mode ...] [WAIT ms] "
                      "[LEASE ms] [PRIORITY n]: numkeys must be 1..%zu",
                      s->cfg.max_keys);
    return;
  }
  if (argc < 2 + 2 * (size_t)nk) {
    ordo__out_error(&c->out, "ERR",
                    "LOCK names %lld keys but gives %zu "
                    "key/mode arguments",
                    nk, argc - 2);
    return;
  }
  long long wait = -1, lease = -1, prio = 0, attempt = 0;
  bool have_prio = false;
  const ordo__resp_arg *heldat = NULL;
  for (size_t i = 2 + 2 * (size_t)nk; i < argc; i += 2) {
    if (i + 1 >= argc) {
      ordo__out_error(&c->out, "ERR", "LOCK option '%.*s' needs a value",
                      (int)argv[i].len, argv[i].ptr);
      return;
    }
    if (arg_is(&argv[i], "WAIT") &&
        arg_num(&argv[i + 1], 0, 86400000LL * 365, &wait))
      continue;
    if (arg_is(&argv[i], "LEASE") &&
        arg_num(&argv[i + 1], 10, 86400000LL, &lease))
      continue;
    if (arg_is(&argv[i], "PRIORITY") &&
        arg_num(&argv[i + 1], -1000000, 1000000, &prio)) {
      have_prio = true;
      continue;
    }
    if (arg_is(&argv[i], "ATTEMPT") &&
        arg_num(&argv[i + 1], 1, 4294967295LL, &attempt))
      continue;
    if (arg_is(&argv[i], "HELDAT") && argv[i + 1].len > 0 &&
        argv[i + 1].len <= ORDOD_HELDAT_MAX &&
        !memchr(argv[i + 1].ptr, 0, argv[i + 1].len)) {
      heldat = &argv[i + 1];
      continue;
    }
    ordo__out_error(&c->out, "ERR",
                    "bad LOCK option '%.*s %.*s': WAIT ms (0 tries once), "
                    "LEASE ms (10..86400000), PRIORITY n, HELDAT "
                    "shard[,shard...] (1..%d bytes), ATTEMPT n (1..2^32-1)",
                    (int)argv[i].len, argv[i].ptr, (int)argv[i + 1].len,
                    argv[i + 1].ptr, ORDOD_HELDAT_MAX);
    return;
  }
  /* A cross-shard abort let this txn's keys here go while its client may
   * still count them: it hears so before it takes more (probe.c), unless
   * the LOCK is of a later attempt (its client gave everything back). */
  if (!srv_probe_lock_check(s, c, ss, (uint32_t)attempt))
    return;
  if ((uint32_t)attempt > ss->attempt)
    ss->attempt = (uint32_t)attempt;
  /* Each LOCK says anew where else the txn holds keys (none without it). */
  char *where = heldat ? strndup(heldat->ptr, heldat->len) : NULL;
  if (heldat && !where) {
    ordo__out_error(&c->out, "ERR", "out of memory");
    return;
  }
  free(ss->heldat);
  ss->heldat = where;
  size_t total = 0;
  for (long long i = 0; i < nk; i++) {
    const ordo__resp_arg *k = &argv[2 + 2 * i], *m = &argv[3 + 2 * i];
    if (k->len == 0 || k->len > s->cfg.max_key_len) {
      ordo__out_error(&c->out, k->len ? "LIMIT" : "ERR",
                      "key %lld is %zu bytes; keys are 1..%zu bytes", i + 1,
                      k->len, s->cfg.max_key_len);
      return;
    }
    if (!arg_is(m, "X") && !arg_is(m, "S")) {
      ordo__out_error(&c->out, "ERR", "mode of key %lld must be X or S", i + 1);
      return;
    }
    total += k->len;
  }
  if (ordo__owner_nholds(ordo__engine_owner(ss->txn)) + (size_t)nk >
      s->cfg.max_session_locks) {
    ordo__out_error(&c->out, "LIMIT",
                    "this session would hold more than %zu keys; UNLOCK some",
                    s->cfg.max_session_locks);
    return;
  }
  uint64_t now = srv_now_ms();
  if (now < s->grant_after_ms) {
    ordo__out_error(&c->out, "TIMEOUT",
                    "restarting after an unclean stop: no lock is granted for "
                    "another %llu ms (holders from before may still act)",
                    (unsigned long long)(s->grant_after_ms - now));
    return;
  }
  if (lease > 0) {
    ss->lease_ms = (long)lease;
    srv_sess_renew(ss);
  }
  if (have_prio && prio != ss->txn->priority) {
    /* A session that holds nothing takes the new priority as if its txn
     * had begun with it, and keeps its txn and id (one identity: the id
     * SESSION ID gives is the one GRAPH and -DEADLOCK name, before and
     * after); one that holds keys keeps its priority (ORDO_EBUSY). */
    (void)ordo__txn_set_priority(ss->txn, (int)prio);
  }
  /* Copies of the keys: the reply, which may come later, needs them. */
  free(ss->req);
  free(ss->keybuf);
  ss->req = malloc((size_t)nk * sizeof *ss->req);
  ss->keybuf = malloc(total ? total : 1);
  lock_tag *tag = malloc(sizeof *tag);
  if (!ss->req || !ss->keybuf || !tag) {
    free(tag);
    ordo__out_error(&c->out, "ERR", "out of memory");
    return;
  }
  size_t off = 0;
  for (long long i = 0; i < nk; i++) {
    const ordo__resp_arg *k = &argv[2 + 2 * i];
    memcpy(ss->keybuf + off, k->ptr, k->len);
    ss->req[i] =
        (ordo_req_t){ss->keybuf + off, k->len,
                     arg_is(&argv[3 + 2 * i], "S") ? ORDO_MODE_S : ORDO_MODE_X};
    off += k->len;
  }
  ss->nreq = (size_t)nk;
  ss->gen = ++s->next_wseq; /* unique on the server: probes name waits so */
  *tag = (lock_tag){s, ss->id, ss->gen};
  ss->waiting = true;   /* before the call: its event may come at once */
  s->order_last[0] = 0; /* the checker's report, if it makes one now */
  int rc = ordo_lock_all_async(ss->txn, ss->req, ss->nreq, (long)wait,
                               lock_done, tag);
  if (rc == ORDO_PENDING) {
    s->lock_waits++;
    srv_probe_wait_begin(s, ss);
    srv_wait_begin(s, ss);
    return; /* the reply comes with the event */
  }
  free(tag);
  ss->waiting = false;
  if (rc == 0) {
    s->lock_grants++;
    srv_lock_reply(c, ss);
  } else if (rc == ORDO_ETIMEDOUT) {
    s->lock_timeouts++;
    ordo__out_error(&c->out, "TIMEOUT",
                    "the keys are held; WAIT 0 tried once. Nothing is held "
                    "for this LOCK");
  } else if (rc == ORDO_ELIMIT) {
    ordo__out_error(&c->out, "LIMIT",
                    "the lock table is full (--max-locks %zu lock objects); "
                    "nothing is held for this LOCK",
                    s->cfg.max_locks);
  } else if (rc == ORDO_EORDER) {
    /* The checker reports an inversion once; a repeat is refused alike. */
    s->order_refusals++;
    ordo__out_error(&c->out, "ORDER",
                    "lock order inversion of key classes%s%s (--order "
                    "refuse); nothing is held for this LOCK",
                    s->order_last[0] ? ": " : "", s->order_last);
  } else if (NEVER(rc == ORDO_EBUSY)) {
    /* The engine refuses a second request of a txn whose first still
     * waits, but none reaches it: a session's requests wait behind its
     * waiting LOCK (conn_process), as Redis's blocked clients do. */
    ordo__out_error(&c->out, "BUSY", "this session is already waiting");
  } else {
    ordo__out_error(&c->out, "ERR", "%s", ordo_strerror(rc));
  }
}

static void cmd_unlock(conn *c, size_t argc, ordo__resp_arg *argv) {
  sess *ss = c->sess;
  if (argc == 1) {
    int n = ordo_unlock_all(ss->txn);
    srv_probe_unlocked(c->s, ss, true);
    ordo__out_int(&c->out, n < 0 ? 0 : n);
    return;
  }
  srv_probe_unlocked(c->s, ss, false);
  long long n = 0;
  for (size_t i = 1; i < argc; i++) {
    if (argv[i].len == 0 || argv[i].len > c->s->cfg.max_key_len)
      continue;
    if (ordo_unlock(ss->txn, argv[i].ptr, argv[i].len) == 0)
      n++;
  }
  ordo__out_int(&c->out, n);
}

static void cmd_extend(conn *c, size_t argc, ordo__resp_arg *argv) {
  sess *ss = c->sess;
  long long ms;
  if (argc == 2) {
    if (!arg_num(&argv[1], 10, 86400000LL, &ms)) {
      ordo__out_error(&c->out, "ERR", "EXTEND [ms]: ms must be 10..86400000");
      return;
    }
    ss->lease_ms = (long)ms;
  }
  srv_sess_renew(ss);
  ordo__out_int(&c->out, ss->lease_ms);
}

static void cmd_locks(conn *c, size_t argc, ordo__resp_arg *argv) {
  (void)argc;
  (void)argv;
  srv_held_write(&c->out, c->s, c->sess, false);
}

/* HOLDERS key: the key's holders and waiters, from the engine's own lock
 * object (ordo__table_key_each), so it costs the key's holders and waiters,
 * not the number of sessions. A session's id is its txn's, which is the
 * engine owner's id. */
typedef struct holders_reply {
  ordo__out holders, waiters;
  size_t nh, nw;
  uint64_t epoch; /* shifted into place for tokens */
} holders_reply;

static void holders_item(void *arg, uint64_t owner, int mode, uint64_t fence,
                         uint32_t count, bool waiting) {
  holders_reply *r = arg;
  (void)count;
  const char *m = mode == ORDO_MODE_S ? "S" : "X";
  if (waiting) {
    r->nw++;
    ordo__out_array(&r->waiters, 2);
    ordo__out_int(&r->waiters, (long long)owner);
    ordo__out_bulk(&r->waiters, m, 1);
    return;
  }
  r->nh++;
  ordo__out_array(&r->holders, 3);
  ordo__out_int(&r->holders, (long long)owner);
  ordo__out_bulk(&r->holders, m, 1);
  ordo__out_int(&r->holders, (long long)(r->epoch | fence));
}

static void cmd_holders(conn *c, size_t argc, ordo__resp_arg *argv) {
  (void)argc;
  srv *s = c->s;
  /* Both lists go to buffers of their own first: the counts are known only
   * once the items are written, and one pass under the key's stripe mutex
   * sees one state of the key. */
  holders_reply r = {{0}, {0}, 0, 0, s->epoch << FENCE_SHIFT};
  if (argv[1].len > 0 && argv[1].len <= s->cfg.max_key_len)
    ordo__table_key_each(ordo__engine_table(s->o), argv[1].ptr, argv[1].len,
                         holders_item, &r);
  ordo__out_array(&c->out, 2);
  ordo__out_array(&c->out, r.nh);
  ordo__out_append(&c->out, &r.holders);
  ordo__out_array(&c->out, r.nw);
  ordo__out_append(&c->out, &r.waiters);
  ordo__out_free(&r.holders);
  ordo__out_free(&r.waiters);
}

char *srv_graph_text(srv *s, ordo_graph_fmt_t fmt, size_t *len) {
  FILE *f = tmpfile();
  if (!f)
    return NULL;
  ordo_graph_dump(s->o, fileno(f), fmt);
  fseek(f, 0, SEEK_END); /* the dump wrote through a dup of the descriptor */
  long flen = ftell(f);
  rewind(f);
  char *buf = malloc(flen > 0 ? (size_t)flen : 1);
  size_t got = buf ? fread(buf, 1, (size_t)(flen > 0 ? flen : 0), f) : 0;
  fclose(f);
  if (!buf)
    return NULL;
  /* The txns of a sharded place are named by their global ids too: a DOT
   * node label, or a JSON member "gids", for each session with one that
   * the graph names (docs/distributed.md). */
  char *eb = NULL;
  size_t el = 0;
  FILE *ef = open_memstream(&eb, &el);
  size_t cut = got;
  while (cut > 0 && (buf[cut - 1] == '\n' || buf[cut - 1] == '}'))
    cut--; /* before the final brace (and a JSON's, the object's) */
  bool first = true;
  for (size_t i = 0; ef && i < s->smap_cap; i++)
    for (sess *x = s->smap[i]; x; x = x->hnext) {
      char name[48], hex[ORDOD_GID_HEX + 1];
      int nl = snprintf(name, sizeof name,
                        fmt == ORDO_GRAPH_DOT ? "\"txn %llu\"" : "%llu",
                        (unsigned long long)x->id);
      if (!x->have_gid || nl <= 0 || !memmem(buf, got, name, (size_t)nl))
        continue;
      srv_gid_hex(x->gid, hex);
      if (fmt == ORDO_GRAPH_DOT)
        fprintf(ef, "  \"txn %llu\" [label=\"txn %llu\\ngid %s\"];\n",
                (unsigned long long)x->id, (unsigned long long)x->id, hex);
      else
        fprintf(ef, "%s\"%llu\": \"%s\"", first ? ", \"gids\": {" : ", ",
                (unsigned long long)x->id, hex);
      first = false;
    }
  if (ef && !first && fmt == ORDO_GRAPH_JSON)
    fputc('}', ef);
  if (ef && !first)
    fwrite(buf + cut, 1, got - cut, ef);
  if (ef)
    fclose(ef);
  *len = got;
  if (!first && eb) {
    char *all = malloc(cut + el);
    if (all) {
      memcpy(all, buf, cut);
      memcpy(all + cut, eb, el);
      free(buf);
      buf = all;
      *len = cut + el;
    }
  }
  free(eb);
  return buf;
}

static void cmd_graph(conn *c, size_t argc, ordo__resp_arg *argv) {
  ordo_graph_fmt_t fmt = ORDO_GRAPH_DOT;
  if (argc == 2) {
    if (arg_is(&argv[1], "JSON"))
      fmt = ORDO_GRAPH_JSON;
    else if (!arg_is(&argv[1], "DOT")) {
      ordo__out_error(&c->out, "ERR", "GRAPH [DOT|JSON]");
      return;
    }
  }
  size_t len = 0;
  char *buf = srv_graph_text(c->s, fmt, &len);
  if (!buf) {
    ordo__out_error(&c->out, "ERR", "cannot make a temporary file");
    return;
  }
  ordo__out_bulk(&c->out, buf, len);
  free(buf);
}

/*
 * session_kill -- SESSION KILL id: ends the session (attached or detached),
 * :1, or :0 when there is none. Its locks are released and a waiting LOCK
 * of it cancelled; its connection hears -KILLED and is closed (server.c,
 * srv_sess_kill). A user may kill its own sessions; another user's needs
 * an admin. Killing the caller's own session closes the caller after :1.
 */
static void session_kill(conn *c, const ordo__resp_arg *a) {
  long long id;
  if (!arg_num(a, 1, LLONG_MAX, &id)) {
    ordo__out_error(&c->out, "ERR",
                    "SESSION KILL id: id is a session id (SESSION ID, CLIENT "
                    "LIST), 1 or more");
    return;
  }
  sess *ss = srv_sess_find(c->s, (uint64_t)id);
  if (!ss || ss->closing) {
    ordo__out_int(&c->out, 0);
    return;
  }
  /* Whose it is: its connection's user, or the user who made it
   * resumable while it is detached. */
  const char *owner = ss->c ? ss->c->user : ss->user;
  size_t owner_len = ss->c ? ss->c->user_len : ss->user_len;
  bool mine =
      owner_len == c->user_len && memcmp(owner, c->user, owner_len) == 0;
  if (!mine && !need_admin(c, "session|kill"))
    return;
  bool self = ss == c->sess;
  srv_sess_kill(c->s, ss, c->user, c->user_len, c);
  ordo__out_int(&c->out, 1);
  if (self)
    c->closing_after_reply = true;
}

static void cmd_session(conn *c, size_t argc, ordo__resp_arg *argv) {
  srv *s = c->s;
  sess *ss = c->sess;
  if (arg_is(&argv[1], "ID") && argc == 2) {
    ordo__out_int(&c->out, (long long)ss->id);
  } else if (arg_is(&argv[1], "GID") && argc == 2) {
    if (!ss->have_gid) {
      ordo__out_null(&c->out, c->resp == 3);
      return;
    }
    char hex[ORDOD_GID_HEX + 1];
    srv_gid_hex(ss->gid, hex);
    ordo__out_bulk(&c->out, hex, ORDOD_GID_HEX);
  } else if (arg_is(&argv[1], "GID") && argc == 3) {
    uint8_t gid[ORDOD_GID_BYTES];
    if (!srv_gid_parse(argv[2].ptr, argv[2].len, gid)) {
      ordo__out_error(&c->out, "ERR",
                      "SESSION GID wants %d hex digits (8 bytes of begin "
                      "time, 8 random)",
                      ORDOD_GID_HEX);
      return;
    }
    if (ss->have_gid && memcmp(ss->gid, gid, sizeof gid) != 0) {
      ordo__out_error(&c->out, "ERR",
                      "this session's global id is set already; a session "
                      "is one txn");
      return;
    }
    /* A txn has one session on a shard, and the probes name txns by gid:
     * a second connection may not borrow it (it would make a chain look
     * like a cycle). One whose client has just closed it is gone. */
    sess *other = srv_probe_gid_attached(s, gid, ss);
    if (other && !srv_conn_gone(other->c)) {
      ordo__out_error(&c->out, "ERR",
                      "global id in use by session %llu on another connection; "
                      "a txn has one session per shard",
                      (unsigned long long)other->id);
      return;
    }
    memcpy(ss->gid, gid, sizeof gid);
    ss->have_gid = true;
    srv_probe_gid_set(s, ss);
    ordo__out_simple(&c->out, "OK");
  } else if (arg_is(&argv[1], "RESUMABLE") && argc == 2) {
    if (!ss->resumable) {
      if (srv_sess_make_resumable(s, ss) != 0) {
        ordo__out_error(&c->out, "ERR",
                        "no token could be made (getrandom failed, or no "
                        "memory); the session is not resumable");
        return;
      }
      /* Only the user who made it resumable may take it back. */
      memcpy(ss->user, c->user, c->user_len);
      ss->user_len = c->user_len;
    }
    ordo__out_bulk(&c->out, ss->token, ORDOD_TOKEN_HEX);
  } else if (arg_is(&argv[1], "RESUME") && argc == 3) {
    if (argv[2].len != ORDOD_TOKEN_HEX) {
      ordo__out_error(&c->out, "ERR", "no resumable session has that token");
      return;
    }
    sess *old = srv_sess_by_token(s, argv[2].ptr, argv[2].len);
    /* A token is good only for the user who made the session resumable
     * (the default user when AUTH named none; without AUTH every
     * connection is the default user): another user is told what a wrong
     * token would be. */
    if (old && (old->user_len != c->user_len ||
                memcmp(old->user, c->user, c->user_len) != 0))
      old = NULL;
    if (!old || old->c) {
      ordo__out_error(&c->out, "ERR", "%s",
                      old ? "that session is attached to another connection"
                          : "no resumable session has that token (its lease "
                            "may have run out)");
      return;
    }
    if (ordo__owner_nholds(ordo__engine_owner(ss->txn)) > 0 || ss->waiting) {
      ordo__out_error(&c->out, "ERR",
                      "this connection's own session holds "
                      "keys: UNLOCK them first");
      return;
    }
    /* This connection's fresh session gives way to the old one. */
    ss->c = NULL;
    ss->resumable = false;
    ordo_unlock_all(ss->txn);
    sess *fresh = ss;
    srv_sess_attach(c, old);
    srv_sess_drop(s, fresh);
    ordo__out_int(&c->out, (long long)old->id);
  } else if (arg_is(&argv[1], "KILL") && argc == 3) {
    session_kill(c, &argv[2]);
  } else if (arg_is(&argv[1], "KILL")) {
    ordo__out_error(&c->out, "ERR",
                    "SESSION KILL id: one session id (SESSION ID, CLIENT "
                    "LIST's session)");
  } else {
    ordo__out_error(&c->out, "ERR",
                    "SESSION RESUMABLE | SESSION RESUME token | SESSION ID");
  }
}

/* ---- INFO -------------------------------------------------------------------
 */

static void cmd_info(conn *c, size_t argc, ordo__resp_arg *argv) {
  srv *s = c->s;
  ordo_stats_t st;
  ordo_stats(s->o, &st);
  uint64_t now = srv_now_ms();
  char buf[4096];
  size_t n = 0;
  bool all = argc == 1;
#define SEC(name) (all || arg_is(&argv[1], name))
#define P(...)                                                                 \
  n += (size_t)snprintf(buf + n, n < sizeof buf ? sizeof buf - n : 0,          \
                        __VA_ARGS__)
  if (SEC("server")) {
    P("# Server\r\nordod_version:%s\r\nprocess_id:%ld\r\ntcp_port:%d\r\n"
      "uptime_in_seconds:%llu\r\nfencing_epoch:%llu\r\nlease_ms:%ld\r\n"
      "restart_delay_remaining_ms:%llu\r\n\r\n",
      ORDOD_VERSION, (long)getpid(), s->cfg.port,
      (unsigned long long)((now - s->started_ms) / 1000),
      (unsigned long long)s->epoch, s->cfg.lease_ms,
      (unsigned long long)(s->grant_after_ms > now ? s->grant_after_ms - now
                                                   : 0));
  }
  if (SEC("clients")) {
    P("# Clients\r\nconnected_clients:%d\r\nsessions:%zu\r\nmaxclients:%d\r\n"
      "total_connections_received:%llu\r\nrejected_connections:%llu\r\n"
      "total_commands_processed:%llu\r\nprotocol_errors:%llu\r\n"
      "output_cutoffs:%llu\r\n\r\n",
      s->nconns, s->nsess, s->cfg.maxclients,
      (unsigned long long)s->total_conns, (unsigned long long)s->rejected_conns,
      (unsigned long long)s->total_cmds, (unsigned long long)s->protocol_errors,
      (unsigned long long)s->output_cutoffs);
  }
  if (SEC("locks")) {
    P("# Locks\r\nlock_objects:%llu\r\nlock_waiting:%llu\r\n"
      "lock_acquired:%llu\r\nlock_released:%llu\r\nlock_waited:%llu\r\n"
      "lock_timeouts:%llu\r\nlock_wakeups:%llu\r\nlock_pokes:%llu\r\n"
      "lease_expiries:%llu\r\nlock_limits:%llu\r\nmax_locks:%zu\r\n\r\n",
      (unsigned long long)st.locks, (unsigned long long)st.waiting,
      (unsigned long long)st.acquired, (unsigned long long)st.released,
      (unsigned long long)st.waited, (unsigned long long)st.timeouts,
      (unsigned long long)st.wakeups, (unsigned long long)st.pokes,
      (unsigned long long)s->lease_expiries, (unsigned long long)st.limits,
      s->cfg.max_locks);
  }
  if (SEC("deadlocks")) {
    P("# Deadlocks\r\ndeadlocks:%llu\r\nreorders:%llu\r\nsweep_finds:%llu\r\n"
      "long_waits:%llu\r\n\r\n",
      /* The cycles this server resolved: inside it, and across shards
       * (counted at the victim's shard alone, so shards' sums count each
       * once). */
      (unsigned long long)(st.deadlocks + srv_probe_deadlocks(s)),
      (unsigned long long)st.reorders, (unsigned long long)st.sweep_finds,
      (unsigned long long)st.long_waits);
  }
  if (SEC("probes") && n < sizeof buf)
    n += srv_probe_info(s, buf + n, sizeof buf - n);
  if (SEC("latency")) {
    P("# "
      "Latency\r\nwait_p50_us:%llu\r\nwait_p99_us:%llu\r\nmax_wait_us:%llu\r\n"
      "hold_p50_us:%llu\r\nhold_p99_us:%llu\r\n\r\n",
      (unsigned long long)ordo_hist_quantile(st.wait_hist, 0.5),
      (unsigned long long)ordo_hist_quantile(st.wait_hist, 0.99),
      (unsigned long long)st.max_wait_us,
      (unsigned long long)ordo_hist_quantile(st.hold_hist, 0.5),
      (unsigned long long)ordo_hist_quantile(st.hold_hist, 0.99));
  }
  if (SEC("order")) {
    P("# Order\r\norder_mode:%s\r\norder_reports:%llu\r\n"
      "order_refusals:%llu\r\n\r\n",
      srv_order_name(s->cfg.order), (unsigned long long)st.order_reports,
      (unsigned long long)s->order_refusals);
  }
  if (SEC("memory")) {
    P("# Memory\r\nused_memory:%zu\r\nmem_allocator:%s\r\n\r\n", heap_used(),
      MEM_ALLOCATOR);
  }
#undef P
#undef SEC
  if (n >= sizeof buf)
    n = sizeof buf - 1;
  ordo__out_verbatim(&c->out, buf, n, c->resp == 3);
}

/* ---- Connection commands ----------------------------------------------------
 */

static void cmd_ping(conn *c, size_t argc, ordo__resp_arg *argv) {
  if (argc == 2)
    ordo__out_bulk(&c->out, argv[1].ptr, argv[1].len);
  else
    ordo__out_simple(&c->out, "PONG");
}

static bool do_auth(conn *c, const ordo__resp_arg *user,
                    const ordo__resp_arg *pass) {
  bool acl = srv_acl_from_file(c->s->acl);
  if (!acl && !c->s->cfg.requirepass[0]) {
    ordo__out_error(&c->out, "ERR",
                    "AUTH called without any password "
                    "configured (ordod --requirepass)");
    return false;
  }
  if (user && user->len > sizeof c->user) {
    ordo__out_error(&c->out, "ERR", "AUTH user names are at most %zu bytes",
                    sizeof c->user);
    return false;
  }
  /* The user names who may resume the sessions this connection makes
   * resumable. Without --aclfile the password is the server's one whatever
   * the name; with it, the name is one of the file's users. */
  if (srv_acl_auth(c, user ? user->ptr : NULL, user ? user->len : 0, pass->ptr,
                   pass->len) != 0) {
    /* Redis's words with users; the old ones with --requirepass alone. */
    ordo__out_error(&c->out, "WRONGPASS", "%s",
                    acl ? "invalid username-password pair or user is "
                          "disabled."
                        : "invalid username-password pair");
    return false;
  }
  return true;
}

static void cmd_auth(conn *c, size_t argc, ordo__resp_arg *argv) {
  if (argc > 3) {
    ordo__out_error(&c->out, "ERR", "AUTH [user] password");
    return;
  }
  if (do_auth(c, argc == 3 ? &argv[1] : NULL, &argv[argc - 1]))
    ordo__out_simple(&c->out, "OK");
}

static void cmd_hello(conn *c, size_t argc, ordo__resp_arg *argv) {
  size_t i = 1;
  int proto = c->resp;
  if (argc > 1) {
    long long v;
    if (!arg_num(&argv[1], 2, 3, &v)) {
      ordo__out_error(&c->out, "NOPROTO", "unsupported protocol version");
      return;
    }
    proto = (int)v;
    i = 2;
  }
  for (; i < argc; i++) {
    if (arg_is(&argv[i], "AUTH") && i + 2 < argc) {
      if (!do_auth(c, &argv[i + 1], &argv[i + 2]))
        return;
      i += 2;
    } else if (arg_is(&argv[i], "SETNAME") && i + 1 < argc) {
      snprintf(c->name, sizeof c->name, "%.*s", (int)argv[i + 1].len,
               argv[i + 1].ptr);
      i += 1;
    } else {
      ordo__out_error(&c->out, "ERR",
                      "HELLO [2|3] [AUTH user pass] "
                      "[SETNAME name]");
      return;
    }
  }
  if (!c->authed) {
    ordo__out_error(&c->out, "NOAUTH", "HELLO must be called with AUTH");
    return;
  }
  c->resp = proto;
  ordo__out_map(&c->out, 7, c->resp == 3);
  ordo__out_bulk(&c->out, "server", 6);
  ordo__out_bulk(&c->out, "ordod", 5);
  ordo__out_bulk(&c->out, "version", 7);
  ordo__out_bulk(&c->out, ORDOD_VERSION, strlen(ORDOD_VERSION));
  ordo__out_bulk(&c->out, "proto", 5);
  ordo__out_int(&c->out, c->resp);
  ordo__out_bulk(&c->out, "id", 2);
  ordo__out_int(&c->out, (long long)c->id);
  ordo__out_bulk(&c->out, "mode", 4);
  ordo__out_bulk(&c->out, "standalone", 10);
  ordo__out_bulk(&c->out, "role", 4);
  ordo__out_bulk(&c->out, "master", 6);
  ordo__out_bulk(&c->out, "modules", 7);
  ordo__out_array(&c->out, 0);
}

/*
 * client_kill -- CLIENT KILL ip:port (the old form: +OK, or an error when
 * no client has that address), or CLIENT KILL filter value ... (the new
 * form: the number of clients killed), with the filters ID id, USER name,
 * ADDR ip:port and SKIPME yes|no, all of which must match, as Redis's. As
 * Redis's, SKIPME is yes unless given: the caller is not killed by its own
 * filter unless it says SKIPME no, and then it is closed after the reply.
 */
static void client_kill(conn *c, size_t argc, ordo__resp_arg *argv) {
  if (!need_admin(c, "client|kill"))
    return;
  const ordo__resp_arg *addr = NULL, *user = NULL;
  long long id = 0;
  bool have_id = false, skipme = true, old = argc == 3;
  if (old) {
    addr = &argv[2];
  } else {
    for (size_t i = 2; i < argc; i += 2) {
      if (i + 1 >= argc) {
        ordo__out_error(&c->out, "ERR",
                        "CLIENT KILL filter '%.*s' needs a value",
                        (int)argv[i].len, argv[i].ptr);
        return;
      }
      const ordo__resp_arg *v = &argv[i + 1];
      if (arg_is(&argv[i], "ID") && arg_num(v, 1, LLONG_MAX, &id)) {
        have_id = true;
      } else if (arg_is(&argv[i], "USER")) {
        user = v;
      } else if (arg_is(&argv[i], "ADDR")) {
        addr = v;
      } else if (arg_is(&argv[i], "SKIPME") &&
                 (arg_is(v, "yes") || arg_is(v, "no"))) {
        skipme = arg_is(v, "yes");
      } else {
        ordo__out_error(&c->out, "ERR",
                        "bad CLIENT KILL filter '%.*s %.*s': ID id (a client "
                        "id, 1 or more), USER name, ADDR ip:port, SKIPME "
                        "yes|no",
                        (int)argv[i].len, argv[i].ptr, (int)v->len, v->ptr);
        return;
      }
    }
  }
  long long killed = 0;
  bool self = false;
  conn *x;
  LIST_FOREACH(x, &c->s->conns, link) {
    if (x->closing)
      continue;
    if (have_id && x->id != (uint64_t)id)
      continue;
    if (user && (x->user_len != user->len ||
                 memcmp(x->user, user->ptr, user->len) != 0))
      continue;
    if (addr && (strlen(x->addr) != addr->len ||
                 memcmp(x->addr, addr->ptr, addr->len) != 0))
      continue;
    if (x == c) {
      if (skipme && !old)
        continue;
      self = true; /* closed once its reply is written */
    } else {
      srv_conn_kill(x); /* it stays on the list until its handle closes */
    }
    killed++;
  }
  if (old && killed == 0)
    ordo__out_error(&c->out, "ERR", "No such client");
  else if (old)
    ordo__out_simple(&c->out, "OK");
  else
    ordo__out_int(&c->out, killed);
  if (self)
    c->closing_after_reply = true;
}

static void cmd_client(conn *c, size_t argc, ordo__resp_arg *argv) {
  if (arg_is(&argv[1], "SETNAME") && argc == 3) {
    snprintf(c->name, sizeof c->name, "%.*s", (int)argv[2].len, argv[2].ptr);
    ordo__out_simple(&c->out, "OK");
  } else if (arg_is(&argv[1], "GETNAME") && argc == 2) {
    if (c->name[0])
      ordo__out_bulk(&c->out, c->name, strlen(c->name));
    else
      ordo__out_null(&c->out, c->resp == 3);
  } else if (arg_is(&argv[1], "ID") && argc == 2) {
    ordo__out_int(&c->out, (long long)c->id);
  } else if (arg_is(&argv[1], "LIST") && argc == 2) {
    ordo__out buf = {0};
    uint64_t now = srv_now_ms();
    conn *x;
    LIST_FOREACH(x, &c->s->conns, link) {
      /* A user that is not an admin sees its own connections alone. */
      if (!srv_conn_is_admin(c) && (x->user_len != c->user_len ||
                                    memcmp(x->user, c->user, c->user_len) != 0))
        continue;
      char line[512]; /* id, addr, name and user fit: 64 + 64 + 128 */
      int n = snprintf(
          line, sizeof line,
          "id=%llu addr=%s name=%s age=%llu session=%llu "
          "holds=%zu waiting=%d resp=%d user=%.*s\n",
          (unsigned long long)x->id, x->addr, x->name,
          (unsigned long long)((now - x->created_ms) / 1000),
          (unsigned long long)(x->sess ? x->sess->id : 0),
          x->sess ? ordo__owner_nholds(ordo__engine_owner(x->sess->txn)) : 0,
          x->sess && x->sess->waiting, x->resp, (int)x->user_len, x->user);
      if (n >= (int)sizeof line)
        n = (int)sizeof line - 1;
      if (n > 0) {
        size_t want = buf.len + (size_t)n;
        if (want > buf.cap) {
          char *p = realloc(buf.buf, want * 2);
          if (!p)
            break;
          buf.buf = p;
          buf.cap = want * 2;
        }
        memcpy(buf.buf + buf.len, line, (size_t)n);
        buf.len += (size_t)n;
      }
    }
    ordo__out_verbatim(&c->out, buf.buf ? buf.buf : "", buf.len, c->resp == 3);
    free(buf.buf);
  } else if (arg_is(&argv[1], "KILL") && argc >= 3) {
    client_kill(c, argc, argv);
  } else {
    ordo__out_error(&c->out, "ERR",
                    "CLIENT SETNAME name | GETNAME | ID | LIST | KILL "
                    "[ID id] [USER name] [ADDR ip:port] [SKIPME yes|no]");
  }
}

static void cmd_command(conn *c, size_t argc, ordo__resp_arg *argv) {
  size_t n = srv_cmd_count();
  if (argc >= 2 && arg_is(&argv[1], "COUNT")) {
    ordo__out_int(&c->out, (long long)n);
    return;
  }
  if (argc >= 2 && arg_is(&argv[1], "DOCS")) {
    /* name -> {summary}: enough for redis-cli's hints. */
    ordo__out_map(&c->out, n, c->resp == 3);
    for (size_t i = 0; i < n; i++) {
      const srv_cmd *k = srv_cmd_at(i);
      char lname[32];
      size_t l = strlen(k->name);
      for (size_t j = 0; j < l && j < sizeof lname - 1; j++)
        lname[j] = (char)tolower((unsigned char)k->name[j]);
      ordo__out_bulk(&c->out, lname, l);
      ordo__out_map(&c->out, 1, c->resp == 3);
      ordo__out_bulk(&c->out, "summary", 7);
      ordo__out_bulk(&c->out, k->help, strlen(k->help));
    }
    return;
  }
  /* COMMAND [INFO]: name, arity, flags, first/last key, step. */
  ordo__out_array(&c->out, n);
  for (size_t i = 0; i < n; i++) {
    const srv_cmd *k = srv_cmd_at(i);
    char lname[32];
    size_t l = strlen(k->name);
    for (size_t j = 0; j < l && j < sizeof lname - 1; j++)
      lname[j] = (char)tolower((unsigned char)k->name[j]);
    ordo__out_array(&c->out, 6);
    ordo__out_bulk(&c->out, lname, l);
    ordo__out_int(&c->out, k->arity);
    ordo__out_array(&c->out, 0);
    ordo__out_int(&c->out, 0);
    ordo__out_int(&c->out, 0);
    ordo__out_int(&c->out, 0);
  }
}

static void cmd_quit(conn *c, size_t argc, ordo__resp_arg *argv) {
  (void)argc;
  (void)argv;
  ordo__out_simple(&c->out, "OK");
  c->closing_after_reply = true;
}

/*
 * cmd_deadlocks -- DEADLOCKS [count]: the newest count (default 10, at most
 * the 64 kept) deadlocks this server ended, newest first, each a flat
 * array of field and value as SLOWLOG's entries are: seq, time_ms, kind
 * ("local" or "cross-shard"), victim (session id), victim_gid (32 hex
 * digits, or "" for a txn without one), cycle (as its -DEADLOCK named it).
 */
static void cmd_deadlocks(conn *c, size_t argc, ordo__resp_arg *argv) {
  srv *s = c->s;
  long long want = 10;
  if (argc > 2 || (argc == 2 && !arg_num(&argv[1], 0, LLONG_MAX, &want))) {
    ordo__out_error(&c->out, "ERR",
                    "DEADLOCKS [count]: count is a whole number, 0 or more");
    return;
  }
  uint64_t kept = s->ndl < SRV_DL_HISTORY ? s->ndl : SRV_DL_HISTORY;
  uint64_t n = (uint64_t)want < kept ? (uint64_t)want : kept;
  ordo__out_array(&c->out, n);
  for (uint64_t i = 0; i < n; i++) {
    const srv_dl *r = &s->dl[(s->ndl - 1 - i) % SRV_DL_HISTORY];
    char hex[ORDOD_GID_HEX + 1] = "";
    if (r->have_gid)
      srv_gid_hex(r->gid, hex);
    ordo__out_array(&c->out, 12);
    ordo__out_bulk(&c->out, "seq", 3);
    ordo__out_int(&c->out, (long long)r->seq);
    ordo__out_bulk(&c->out, "time_ms", 7);
    ordo__out_int(&c->out, (long long)r->time_ms);
    ordo__out_bulk(&c->out, "kind", 4);
    const char *kind = r->cross_shard ? "cross-shard" : "local";
    ordo__out_bulk(&c->out, kind, strlen(kind));
    ordo__out_bulk(&c->out, "victim", 6);
    ordo__out_int(&c->out, (long long)r->victim);
    ordo__out_bulk(&c->out, "victim_gid", 10);
    ordo__out_bulk(&c->out, hex, strlen(hex));
    ordo__out_bulk(&c->out, "cycle", 5);
    ordo__out_bulk(&c->out, r->cycle, strlen(r->cycle));
  }
}

/* ---- CONFIG -----------------------------------------------------------------
 *
 * CONFIG GET shows the options the flags set (names without the dashes, as
 * the config file writes them; --requirepass is never shown). CONFIG SET
 * changes those that can change while the server runs: it parses the value
 * with the flags' own parser (srv_conf_set) on a copy of the configuration,
 * so the ranges are the flags', and takes the copy only when every pair
 * was good. The others are fixed at start, each for the reason its entry
 * gives.
 */

enum {
  CONF_INT,
  CONF_LONG,
  CONF_SIZE,
  CONF_UNSIGNED,
  CONF_STR,
  CONF_BOOL,
  CONF_ORDER,
  CONF_TLS_AUTH
};

typedef struct conf_param {
  const char *name;
  int kind;
  size_t off;      /* in srv_config */
  const char *why; /* NULL: CONFIG SET may change it; else why not */
} conf_param;

#define CF(f) offsetof(srv_config, f)
static const conf_param conf_params[] = {
    {"port", CONF_INT, CF(port), "the socket is bound at start"},
    {"bind", CONF_STR, CF(bind), "the socket is bound at start"},
    {"unixsocket", CONF_STR, CF(unixsocket), "the socket is bound at start"},
    {"dir", CONF_STR, CF(dir),
     "the fencing epoch's state file is opened there at start"},
    {"maxclients", CONF_INT, CF(maxclients),
     "it is kept below the file-descriptor limit at start"},
    {"lease-ms", CONF_LONG, CF(lease_ms), NULL},
    {"no-restart-delay", CONF_BOOL, CF(no_restart_delay),
     "it matters only at start"},
    {"max-keys", CONF_SIZE, CF(max_keys), NULL},
    {"max-request", CONF_SIZE, CF(max_request), NULL},
    {"max-output", CONF_SIZE, CF(max_output), NULL},
    {"max-session-locks", CONF_SIZE, CF(max_session_locks), NULL},
    {"max-locks", CONF_SIZE, CF(max_locks),
     "the engine takes it when it opens (its max_locks)"},
    {"order", CONF_ORDER, CF(order),
     "the engine's lock-order checker is opened in its mode at start"},
    {"starvation-us", CONF_LONG, CF(starvation_us),
     "the engine's threads read it without a lock, so it is set once, when "
     "the engine opens"},
    {"starvation-holds", CONF_UNSIGNED, CF(starvation_holds),
     "the engine's threads read it without a lock, so it is set once, when "
     "the engine opens"},
    {"verbose", CONF_INT, CF(verbose), NULL},
    {"log-lock-waits", CONF_LONG, CF(log_lock_waits_ms), NULL},
    {"peers", CONF_STR, CF(peers), "the links to the peers are made at start"},
    {"shard-name", CONF_STR, CF(shard_name),
     "the peers know the shard by it from start"},
    {"probe-delay", CONF_LONG, CF(probe_delay_ms), NULL},
    {"peer-blocked-max", CONF_SIZE, CF(peer_blocked_max),
     "the peers' tables are sized by it from start"},
    {"deadlock-timeout", CONF_LONG, CF(deadlock_timeout_ms),
     "the engine takes it when it opens (its deadlock_timeout_ms)"},
    /* metrics-port shows the port bound (with --metrics-port 0, the one
     * chosen); -1 when there is no HTTP. */
    {"metrics-port", CONF_INT, CF(metrics_port),
     "the HTTP socket is bound at start"},
    {"metrics-bind", CONF_STR, CF(metrics_bind),
     "the HTTP socket is bound at start"},
    /* tls-port shows the port bound (with --tls-port 0, the one chosen);
     * -1 when TLS is off. */
    {"tls-port", CONF_INT, CF(tls_port), "the socket is bound at start"},
    {"tls-cert-file", CONF_STR, CF(tls_cert),
     "the TLS context is made from the files at start"},
    {"tls-key-file", CONF_STR, CF(tls_key),
     "the TLS context is made from the files at start"},
    {"tls-ca-cert-file", CONF_STR, CF(tls_ca),
     "the TLS context is made from the files at start"},
    {"tls-auth-clients", CONF_TLS_AUTH, CF(tls_auth),
     "the TLS context is made from the files at start"},
};
#undef CF
#define NCONF (sizeof conf_params / sizeof conf_params[0])

static const conf_param *conf_find(const char *name) {
  for (size_t i = 0; i < NCONF; i++)
    if (strcmp(conf_params[i].name, name) == 0)
      return &conf_params[i];
  return NULL;
}

static int conf_value(const srv_config *cfg, const conf_param *p, char *buf,
                      size_t cap) {
  const char *f = (const char *)cfg + p->off;
  switch (p->kind) {
  case CONF_INT:
    return snprintf(buf, cap, "%d", *(const int *)(const void *)f);
  case CONF_LONG:
    return snprintf(buf, cap, "%ld", *(const long *)(const void *)f);
  case CONF_SIZE:
    return snprintf(buf, cap, "%zu", *(const size_t *)(const void *)f);
  case CONF_UNSIGNED:
    return snprintf(buf, cap, "%u", *(const unsigned *)(const void *)f);
  case CONF_BOOL:
    return snprintf(buf, cap, "%s",
                    *(const bool *)(const void *)f ? "yes" : "no");
  case CONF_ORDER:
    return snprintf(
        buf, cap, "%s",
        srv_order_name(*(const ordo_order_mode_t *)(const void *)f));
  case CONF_TLS_AUTH:
    return snprintf(buf, cap, "%s",
                    srv_tls_auth_name(*(const int *)(const void *)f));
  default:
    return snprintf(buf, cap, "%s", f);
  }
}

/* An argument as a C string, lowercased when lower (option names are
 * case-insensitive, as Redis's); false when it does not fit. */
static bool arg_cstr(const ordo__resp_arg *a, char *buf, size_t cap,
                     bool lower) {
  if (a->len >= cap || memchr(a->ptr, 0, a->len))
    return false;
  for (size_t i = 0; i < a->len; i++)
    buf[i] = lower ? (char)tolower((unsigned char)a->ptr[i]) : a->ptr[i];
  buf[a->len] = 0;
  return true;
}

static void config_get(conn *c, size_t argc, ordo__resp_arg *argv) {
  bool hit[NCONF] = {false};
  size_t n = 0;
  for (size_t i = 2; i < argc; i++) {
    char pat[128];
    if (!arg_cstr(&argv[i], pat, sizeof pat, true))
      continue; /* a pattern that long matches no name */
    for (size_t k = 0; k < NCONF; k++)
      if (!hit[k] && fnmatch(pat, conf_params[k].name, 0) == 0) {
        hit[k] = true;
        n++;
      }
  }
  ordo__out_map(&c->out, n, c->resp == 3);
  for (size_t k = 0; k < NCONF; k++) {
    if (!hit[k])
      continue;
    char v[sizeof c->s->cfg.peers];
    int l = conf_value(&c->s->cfg, &conf_params[k], v, sizeof v);
    ordo__out_bulk(&c->out, conf_params[k].name, strlen(conf_params[k].name));
    ordo__out_bulk(&c->out, v, l > 0 ? (size_t)l : 0);
  }
}

static void config_set(conn *c, size_t argc, ordo__resp_arg *argv) {
  srv *s = c->s;
  if (!need_admin(c, "config|set"))
    return;
  if (argc % 2 != 0) {
    ordo__out_error(&c->out, "ERR",
                    "CONFIG SET name value [name value ...]: a value for "
                    "each name");
    return;
  }
  srv_config next = s->cfg;
  for (size_t i = 2; i < argc; i += 2) {
    char name[64], val[256], err[256];
    const conf_param *p =
        arg_cstr(&argv[i], name, sizeof name, true) ? conf_find(name) : NULL;
    if (!p) {
      ordo__out_error(&c->out, "ERR",
                      "Unknown option or number of arguments for CONFIG SET "
                      "- '%.*s' (CONFIG GET * lists them)",
                      (int)(argv[i].len > 64 ? 64 : argv[i].len), argv[i].ptr);
      return;
    }
    if (p->why) {
      ordo__out_error(&c->out, "ERR",
                      "CONFIG SET failed (possibly related to argument '%s') "
                      "- can't set immutable config: %s; restart ordod with "
                      "--%s",
                      p->name, p->why, p->name);
      return;
    }
    if (!arg_cstr(&argv[i + 1], val, sizeof val, false) ||
        srv_conf_set(&next, name, val, err, sizeof err) != 0) {
      if (argv[i + 1].len >= sizeof val)
        snprintf(err, sizeof err, "the value is longer than %zu bytes",
                 sizeof val - 1);
      ordo__out_error(&c->out, "ERR",
                      "CONFIG SET failed (possibly related to argument '%s') "
                      "- %s",
                      p->name, err);
      return;
    }
  }
  /* A LOCK of more keys needs more arguments: the parser's array grows
   * (it never shrinks, so a request already parsed stays inside it). */
  size_t max_args = next.max_keys * 2 + 16;
  if (max_args > s->max_args) {
    ordo__resp_arg *a = calloc(max_args, sizeof *a);
    if (!a) {
      ordo__out_error(&c->out, "ERR", "out of memory; nothing was changed");
      return;
    }
    /* argv points into the old array: this command reads it no more. */
    memcpy(a, s->argv, s->max_args * sizeof *a);
    free(s->argv);
    s->argv = a;
    s->max_args = max_args;
  }
  bool rearm = next.log_lock_waits_ms != s->cfg.log_lock_waits_ms;
  s->cfg = next;
  if (rearm)
    srv_wait_rearm(s);
  ordo__out_simple(&c->out, "OK");
}

static void cmd_config(conn *c, size_t argc, ordo__resp_arg *argv) {
  if (arg_is(&argv[1], "GET") && argc >= 3) {
    config_get(c, argc, argv);
  } else if (arg_is(&argv[1], "SET") && argc >= 4) {
    config_set(c, argc, argv);
  } else {
    ordo__out_error(&c->out, "ERR",
                    "CONFIG GET pattern [pattern ...] | CONFIG SET name value "
                    "[name value ...]");
  }
}

/* ---- LOCKWAITS --------------------------------------------------------------
 */

/*
 * cmd_lockwaits -- LOCKWAITS [count]: the newest count (default 16, at most
 * the 128 kept) waits that passed --log-lock-waits, newest first, each a
 * flat array of field and value as DEADLOCKS's: seq, time_ms (when the
 * wait began), session, gid (32 hex digits, or ""), keys (the LOCK's, the
 * first 16), waited_ms (so far, while it still waits), state ("waiting",
 * "granted", "timeout", "deadlock", "killed", "ended" or "error") and
 * chain (one line for each session of the blocker chain, read when the
 * wait passed the bound).
 */
static void cmd_lockwaits(conn *c, size_t argc, ordo__resp_arg *argv) {
  srv *s = c->s;
  if (!need_admin(c, "lockwaits"))
    return;
  long long want = 16;
  if (argc > 2 || (argc == 2 && !arg_num(&argv[1], 0, LLONG_MAX, &want))) {
    ordo__out_error(&c->out, "ERR",
                    "LOCKWAITS [count]: count is a whole number, 0 or more");
    return;
  }
  uint64_t kept = s->nlw < SRV_LW_HISTORY ? s->nlw : SRV_LW_HISTORY;
  uint64_t n = (uint64_t)want < kept ? (uint64_t)want : kept;
  uint64_t now = srv_now_ms();
  ordo__out_array(&c->out, n);
  for (uint64_t i = 0; i < n; i++) {
    const srv_lw *r = &s->lw[(s->nlw - 1 - i) % SRV_LW_HISTORY];
    char hex[ORDOD_GID_HEX + 1] = "";
    if (r->have_gid)
      srv_gid_hex(r->gid, hex);
    bool waiting = strcmp(r->state, "waiting") == 0;
    ordo__out_array(&c->out, 16);
    ordo__out_bulk(&c->out, "seq", 3);
    ordo__out_int(&c->out, (long long)r->seq);
    ordo__out_bulk(&c->out, "time_ms", 7);
    ordo__out_int(&c->out, (long long)r->time_ms);
    ordo__out_bulk(&c->out, "session", 7);
    ordo__out_int(&c->out, (long long)r->sess);
    ordo__out_bulk(&c->out, "gid", 3);
    ordo__out_bulk(&c->out, hex, strlen(hex));
    ordo__out_bulk(&c->out, "keys", 4);
    size_t shown = r->nshown, off = 0;
    ordo__out_array(&c->out, shown);
    off = 0;
    for (size_t k = 0; k < shown; k++) {
      ordo__out_bulk(&c->out, r->kbuf + off, r->klen[k]);
      off += r->klen[k];
    }
    ordo__out_bulk(&c->out, "waited_ms", 9);
    ordo__out_int(&c->out,
                  (long long)(waiting ? now - r->start_ms : r->waited_ms));
    ordo__out_bulk(&c->out, "state", 5);
    ordo__out_bulk(&c->out, r->state, strlen(r->state));
    ordo__out_bulk(&c->out, "chain", 5);
    size_t lines = r->chain[0] ? 1 : 0;
    for (const char *p = r->chain; (p = strchr(p, '\n')) != NULL; p++)
      lines++;
    ordo__out_array(&c->out, lines);
    for (const char *p = r->chain; lines > 0; lines--) {
      const char *e = strchr(p, '\n');
      size_t l = e ? (size_t)(e - p) : strlen(p);
      ordo__out_bulk(&c->out, p, l);
      p += l + (e ? 1 : 0);
    }
  }
}

/* ---- The table ------------------------------------------------------------
 */

static const srv_cmd cmds[] = {
    {"LOCK", -4, CMD_LOCKS, cmd_lock,
     "LOCK numkeys key mode [key mode ...] [WAIT ms] [LEASE ms] [PRIORITY n]: "
     "take the keys, all or nothing"},
    {"UNLOCK", -1, CMD_LOCKS, cmd_unlock,
     "UNLOCK [key ...]: release the keys, or every lock of the session"},
    {"EXTEND", -1, CMD_LOCKS, cmd_extend,
     "EXTEND [ms]: renew the session's lease"},
    {"LOCKS", 1, 0, cmd_locks, "LOCKS: this session's locks"},
    {"HOLDERS", 2, 0, cmd_holders, "HOLDERS key: a key's holders and waiters"},
    {"GRAPH", -1, 0, cmd_graph, "GRAPH [DOT|JSON]: the wait-for graph"},
    {"DEADLOCKS", -1, 0, cmd_deadlocks,
     "DEADLOCKS [count]: the newest deadlocks this server ended"},
    {"SESSION", -2, 0, cmd_session,
     "SESSION RESUMABLE | RESUME token | ID | GID [hex] | KILL id: resumable "
     "sessions, the txn's global id, ending a session"},
    {"PEER", -2, 0, srv_probe_cmd,
     "PEER HELLO name | BLOCKED | UNBLOCKED | PROBE | ABORT | CONFIRM | "
     "CONFIRMED | UNPIN | RELEASE | RELEASED: between shards "
     "(docs/distributed.md)"},
    {"LOCKWAITS", -1, 0, cmd_lockwaits,
     "LOCKWAITS [count]: the newest waits that passed --log-lock-waits, with "
     "their blocker chains (admin)"},
    {"CONFIG", -3, 0, cmd_config,
     "CONFIG GET pattern [pattern ...] | CONFIG SET name value [name value "
     "...]: the options, and those that change at run time (SET: admin)"},
    {"INFO", -1, 0, cmd_info,
     "INFO [section]: server, clients, locks, "
     "deadlocks, latency, order, memory"},
    {"PING", -1, CMD_NOAUTH, cmd_ping, "PING [message]"},
    {"HELLO", -1, CMD_NOAUTH, cmd_hello,
     "HELLO [2|3] [AUTH user pass] [SETNAME name]"},
    {"AUTH", -2, CMD_NOAUTH, cmd_auth, "AUTH [user] password"},
    {"CLIENT", -2, 0, cmd_client,
     "CLIENT SETNAME name | GETNAME | ID | LIST | KILL filter value ..."},
    {"COMMAND", -1, 0, cmd_command, "COMMAND [COUNT|DOCS|INFO]"},
    {"QUIT", 1, CMD_NOAUTH, cmd_quit, "QUIT: close the connection"},
};

size_t srv_cmd_count(void) {
  return sizeof cmds / sizeof cmds[0];
}
const srv_cmd *srv_cmd_at(size_t i) {
  return &cmds[i];
}

const srv_cmd *srv_cmd_find(const char *name, size_t len) {
  for (size_t i = 0; i < srv_cmd_count(); i++)
    if (strlen(cmds[i].name) == len &&
        strncasecmp(cmds[i].name, name, len) == 0)
      return &cmds[i];
  return NULL;
}

void srv_dispatch(conn *c, size_t argc, ordo__resp_arg *argv) {
  const srv_cmd *k = srv_cmd_find(argv[0].ptr, argv[0].len);
  if (!k) {
    ordo__out_error(&c->out, "ERR",
                    "unknown command '%.*s' (COMMAND DOCS "
                    "lists them)",
                    (int)(argv[0].len > 64 ? 64 : argv[0].len), argv[0].ptr);
    return;
  }
  if ((k->arity > 0 && argc != (size_t)k->arity) ||
      (k->arity < 0 && argc < (size_t)-k->arity)) {
    ordo__out_error(&c->out, "ERR",
                    "wrong number of arguments for '%s' command: %s", k->name,
                    k->help);
    return;
  }
  if (!c->authed && !(k->flags & CMD_NOAUTH)) {
    ordo__out_error(&c->out, "NOAUTH",
                    "Authentication required: AUTH "
                    "password");
    return;
  }
  if (srv_acl_check(c, k, argc, argv) != 0)
    return; /* -NOPERM: the user may not run it, or not on these keys */
  sess *ss = c->sess;
  if (ss->lease_lost && (k->flags & CMD_LOCKS)) {
    /* Said once: the caller learns its locks are gone. */
    ss->lease_lost = false;
    srv_sess_renew(ss);
    ordo__out_error(&c->out, "LEASE",
                    "this session's lease ran out and its locks were "
                    "released; take them again");
    return;
  }
  srv_sess_renew(ss); /* every command renews the lease */
  k->fn(c, argc, argv);
  /* ...from its end, too: a command that ran longer than the lease (LOCKS
   * of 20,000 keys on a loaded machine) must not cost its session the locks
   * it just listed. (The command may have moved the connection to another
   * session, or closed it.) */
  if (c->sess && !c->closing)
    srv_sess_renew(c->sess);
}
