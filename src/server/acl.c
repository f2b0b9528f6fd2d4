/*
 * acl.c -- ordod's users: the --aclfile reader (a subset of Redis's ACL
 * file syntax), password checks, and the command and key checks the
 * dispatcher makes. See README.md ("Users and ACLs") and docs/protocol.md.
 *
 * A user's command rights are one bit per command unit: a command, or for
 * CLIENT and SESSION one of their subcommands (client|kill), so that a
 * check at dispatch is a table look-up and an AND. Its key rights are a
 * list of Redis glob patterns, matched on bytes. Passwords are kept as
 * SHA-256 digests (OpenSSL's EVP), as Redis keeps them, and compared in
 * constant time. A connection points at its user (conn.acl_user); the
 * users live as long as the server, so the pointer never dangles.
 *
 * Interface: srv_acl_load, srv_acl_free, srv_acl_open, srv_acl_from_file,
 * srv_acl_conn_init, srv_acl_auth, srv_acl_check, srv_acl_glob.
 */
#include "server/server.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- Command units and classes -------------------------------------------
 */

enum {
  CL_LOCK = 1 << 0,
  CL_READ = 1 << 1,
  CL_CONN = 1 << 2, /* always allowed, whatever the rules say */
  CL_ADMIN = 1 << 3,
};

typedef struct acl_unit {
  const char *cmd; /* as the command table names it */
  const char *sub; /* its subcommand, or NULL for the whole command */
  unsigned classes;
} acl_unit;

/*
 * The units. SESSION KILL is in @connection: any user may run it, and its
 * handler lets a user that is not an admin end only its own sessions
 * (srv_conn_is_admin). CLIENT LIST is likewise always allowed, and lists
 * only the user's own connections to a user that is not an admin. The
 * admin commands' handlers check srv_conn_is_admin themselves too, which
 * an ACL user has when it may run every @admin unit (user_settle).
 */
static const acl_unit units[] = {
    {"LOCK", NULL, CL_LOCK},
    {"UNLOCK", NULL, CL_LOCK},
    {"EXTEND", NULL, CL_LOCK},
    {"LOCKS", NULL, CL_LOCK | CL_READ},
    {"HOLDERS", NULL, CL_LOCK | CL_READ},
    {"SESSION", "RESUMABLE", CL_LOCK},
    {"SESSION", "RESUME", CL_LOCK},
    {"SESSION", "ID", CL_LOCK},
    {"SESSION", "GID", CL_LOCK},
    {"SESSION", "KILL", CL_CONN},
    {"INFO", NULL, CL_READ},
    {"GRAPH", NULL, CL_READ},
    {"DEADLOCKS", NULL, CL_READ},
    {"PING", NULL, CL_CONN},
    {"HELLO", NULL, CL_CONN},
    {"AUTH", NULL, CL_CONN},
    {"QUIT", NULL, CL_CONN},
    {"COMMAND", NULL, CL_CONN},
    {"CLIENT", "SETNAME", CL_CONN},
    {"CLIENT", "GETNAME", CL_CONN},
    {"CLIENT", "ID", CL_CONN},
    {"CLIENT", "LIST", CL_CONN},
    {"CLIENT", "KILL", CL_ADMIN},
    {"PEER", NULL, CL_ADMIN},
    {"CONFIG", "GET", CL_READ},
    {"CONFIG", "SET", CL_ADMIN},
    {"LOCKWAITS", NULL, CL_ADMIN},
};
#define NUNITS (sizeof units / sizeof units[0])
_Static_assert(NUNITS <= 64, "a user's rights are one uint64_t");

static const struct {
  const char *name;
  unsigned bit;
} classes[] = {{"lock", CL_LOCK},
               {"read", CL_READ},
               {"connection", CL_CONN},
               {"admin", CL_ADMIN}};

static uint64_t class_mask(unsigned cl) {
  uint64_t m = 0;
  for (size_t i = 0; i < NUNITS; i++)
    if (units[i].classes & cl)
      m |= 1ull << i;
  return m;
}

/* The units of cmd (with sub, one; without, all of its subcommands), as a
 * mask; 0 when no unit has that name. */
static uint64_t units_of(const char *cmd, size_t cl, const char *sub,
                         size_t sl) {
  uint64_t m = 0;
  for (size_t i = 0; i < NUNITS; i++) {
    const acl_unit *u = &units[i];
    if (strlen(u->cmd) != cl || strncasecmp(u->cmd, cmd, cl) != 0)
      continue;
    if (sub &&
        (!u->sub || strlen(u->sub) != sl || strncasecmp(u->sub, sub, sl) != 0))
      continue;
    m |= 1ull << i;
  }
  return m;
}

/* ---- Users ------------------------------------------------------------------
 */

typedef struct acl_pat {
  char *p;
  size_t len;
} acl_pat;

struct srv_user {
  char name[ORDOD_USER_MAX + 1];
  size_t name_len;
  bool on, nopass;
  bool allkeys; /* ~* or allkeys: no pattern to match */
  bool allcmds; /* +@all: every command, those added later too */
  bool admin;   /* may run every @admin unit (srv_conn_is_admin) */
  uint64_t cmds;
  unsigned char (*pass)[32]; /* SHA-256 digests */
  size_t npass;
  acl_pat *pat;
  size_t npat;
};

/* Where a command's keys are, for the key check. */
enum { KEYS_NONE, KEYS_LOCK /* numkeys, then key mode pairs */, KEYS_ALL };

/* What the check needs of one command of the table, worked out from its
 * name the first time it is dispatched and kept: a check then costs a few
 * pointer compares, not a walk of the unit table's names. */
typedef struct acl_cmd {
  const srv_cmd *k;
  uint64_t units; /* all of its units (0: none names it) */
  bool sub;       /* its units are subcommands: argv[1] picks one */
  int keys;       /* KEYS_* */
} acl_cmd;
#define ACL_CMD_CACHE 64

struct srv_acl {
  srv_user **users;
  size_t n;
  srv_user *dflt;
  bool from_file;  /* --aclfile given: user names must be its users */
  uint64_t always; /* the @connection units */
  acl_cmd cmd[ACL_CMD_CACHE]; /* loop thread only */
  size_t ncmd;
};

static void user_free(srv_user *u) {
  if (!u)
    return;
  for (size_t i = 0; i < u->npat; i++)
    free(u->pat[i].p);
  free(u->pat);
  free(u->pass);
  free(u);
}

void srv_acl_free(srv_acl *a) {
  if (!a)
    return;
  for (size_t i = 0; i < a->n; i++)
    user_free(a->users[i]);
  free(a->users);
  free(a);
}

static void sha256(const void *p, size_t n, unsigned char out[32]) {
  unsigned int len = 32;
  /* EVP_Digest fails only for want of memory; a digest of zeros then
   * matches no password (a password's digest is never all zeros). */
  if (EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) != 1)
    memset(out, 0, 32);
}

static int hexval(char ch) {
  return ch >= '0' && ch <= '9'   ? ch - '0'
         : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
         : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                  : -1;
}

static bool add_pass(srv_user *u, const unsigned char d[32]) {
  void *p = realloc(u->pass, (u->npass + 1) * sizeof *u->pass);
  if (!p)
    return false;
  u->pass = p;
  memcpy(u->pass[u->npass++], d, 32);
  u->nopass = false;
  return true;
}

static bool add_pat(srv_user *u, const char *p, size_t len) {
  void *v = realloc(u->pat, (u->npat + 1) * sizeof *u->pat);
  if (!v)
    return false;
  u->pat = v;
  char *c = malloc(len ? len : 1);
  if (!c)
    return false;
  memcpy(c, p, len);
  u->pat[u->npat++] = (acl_pat){c, len};
  return true;
}

static void reset_keys(srv_user *u) {
  for (size_t i = 0; i < u->npat; i++)
    free(u->pat[i].p);
  u->npat = 0;
  u->allkeys = false;
}

/*
 * rule -- applies one rule r[0..n) to u, left to right as Redis does; 0,
 * or -1 with err set. r may hold any bytes but blanks (key patterns are
 * binary).
 */
static int rule(srv_user *u, const char *r, size_t n, char *err,
                size_t errlen) {
#define IS(w) (n == strlen(w) && strncasecmp(r, w, n) == 0)
  if (IS("on")) {
    u->on = true;
  } else if (IS("off")) {
    u->on = false;
  } else if (IS("nopass")) {
    u->nopass = true;
    u->npass = 0;
  } else if (IS("resetpass")) {
    u->nopass = false;
    u->npass = 0;
  } else if (IS("allkeys")) {
    u->allkeys = true;
  } else if (IS("resetkeys")) {
    reset_keys(u);
  } else if (IS("allcommands")) {
    u->allcmds = true;
    u->cmds = ~0ull;
  } else if (IS("nocommands")) {
    u->allcmds = false;
    u->cmds = 0;
  } else if (r[0] == '>') {
    unsigned char d[32];
    sha256(r + 1, n - 1, d);
    if (!add_pass(u, d))
      goto nomem;
  } else if (r[0] == '#') {
    unsigned char d[32];
    bool ok = n == 65;
    for (size_t i = 0; ok && i < 32; i++) {
      int hi = hexval(r[1 + 2 * i]), lo = hexval(r[2 + 2 * i]);
      ok = hi >= 0 && lo >= 0;
      d[i] = (unsigned char)(hi << 4 | lo);
    }
    if (!ok) {
      snprintf(err, errlen,
               "'#' must be followed by a SHA-256 digest in 64 hex digits");
      return -1;
    }
    if (!add_pass(u, d))
      goto nomem;
  } else if (r[0] == '~') {
    if (n == 2 && r[1] == '*')
      u->allkeys = true;
    else if (!add_pat(u, r + 1, n - 1))
      goto nomem;
  } else if (r[0] == '+' || r[0] == '-') {
    bool plus = r[0] == '+';
    uint64_t m = 0;
    if (n > 2 && r[1] == '@') {
      const char *cl = r + 2;
      size_t cn = n - 2;
      if (cn == 3 && strncasecmp(cl, "all", 3) == 0) {
        u->allcmds = plus;
        u->cmds = plus ? ~0ull : 0;
        goto done;
      }
      for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (strlen(classes[i].name) == cn &&
            strncasecmp(classes[i].name, cl, cn) == 0)
          m = class_mask(classes[i].bit);
      if (!m) {
        snprintf(err, errlen,
                 "unknown command class '%.*s' (@lock, @read, @connection, "
                 "@admin, @all)",
                 (int)(n - 1), r + 1);
        return -1;
      }
    } else {
      const char *bar = memchr(r + 1, '|', n - 1);
      size_t cl = bar ? (size_t)(bar - (r + 1)) : n - 1;
      m = bar ? units_of(r + 1, cl, bar + 1, (size_t)(r + n - bar - 1))
              : units_of(r + 1, cl, NULL, 0);
      if (!m) {
        snprintf(err, errlen, "unknown command '%.*s'", (int)(n - 1), r + 1);
        return -1;
      }
    }
    if (plus) {
      u->cmds |= m;
    } else {
      u->cmds &= ~m;
      u->allcmds = false; /* a command taken away: no longer every one */
    }
  } else {
    snprintf(err, errlen, "unknown rule '%.*s'", (int)(n > 64 ? 64 : n), r);
    return -1;
  }
done:
  return 0;
nomem:
  snprintf(err, errlen, "out of memory");
  return -1;
#undef IS
}

/* The admin flag follows from the rights: every @admin unit. */
static void user_settle(srv_user *u) {
  uint64_t adm = class_mask(CL_ADMIN);
  u->admin = u->allcmds || (u->cmds & adm) == adm;
}

static srv_user *user_new(const char *name, size_t len) {
  srv_user *u = calloc(1, sizeof *u);
  if (!u)
    return NULL;
  memcpy(u->name, name, len);
  u->name_len = len;
  return u;
}

static bool acl_add(srv_acl *a, srv_user *u) {
  void *p = realloc(a->users, (a->n + 1) * sizeof *a->users);
  if (!p)
    return false;
  a->users = p;
  a->users[a->n++] = u;
  return true;
}

static srv_user *acl_find(const srv_acl *a, const char *name, size_t len) {
  for (size_t i = 0; i < a->n; i++)
    if (a->users[i]->name_len == len &&
        memcmp(a->users[i]->name, name, len) == 0)
      return a->users[i];
  return NULL;
}

/* One line of the file, line[0..n) without its newline; 0, or -1 with
 * err set. */
static int acl_line(srv_acl *a, char *line, size_t n, char *err,
                    size_t errlen) {
  /* Its words, split on blanks (a word may hold any other byte). */
  size_t i = 0, nw = 0;
  const char *w[3];
  size_t wl[3];
  srv_user *u = NULL;
  while (i < n) {
    while (i < n && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
      i++;
    if (i == n)
      break;
    size_t b = i;
    while (i < n && line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
      i++;
    if (nw == 0 && line[b] == '#')
      return 0; /* a comment */
    if (nw < 2) {
      w[nw] = line + b;
      wl[nw] = i - b;
      nw++;
      if (nw == 1 && !(wl[0] == 4 && memcmp(w[0], "user", 4) == 0)) {
        snprintf(err, errlen,
                 "a line is 'user NAME RULE...' or a '#' comment, not '%.*s'",
                 (int)(wl[0] > 64 ? 64 : wl[0]), w[0]);
        return -1;
      }
      if (nw == 2) {
        if (wl[1] > ORDOD_USER_MAX) {
          snprintf(err, errlen, "a user name is at most %d bytes",
                   ORDOD_USER_MAX);
          return -1;
        }
        if (acl_find(a, w[1], wl[1])) {
          snprintf(err, errlen, "user '%.*s' is defined twice", (int)wl[1],
                   w[1]);
          return -1;
        }
        u = user_new(w[1], wl[1]);
        if (!u || !acl_add(a, u)) {
          user_free(u);
          snprintf(err, errlen, "out of memory");
          return -1;
        }
      }
      continue;
    }
    if (rule(u, line + b, i - b, err, errlen) != 0)
      return -1;
  }
  if (nw == 0)
    return 0; /* a blank line */
  if (nw == 1) {
    snprintf(err, errlen, "'user' wants a name");
    return -1;
  }
  user_settle(u);
  return 0;
}

/* The default user when no file defines it: every right, with the
 * --requirepass password, or nopass without one. */
static srv_user *default_user(const char *requirepass) {
  srv_user *u = user_new("default", 7);
  if (!u)
    return NULL;
  u->on = u->allkeys = u->allcmds = u->admin = true;
  u->cmds = ~0ull;
  if (requirepass[0]) {
    unsigned char d[32];
    sha256(requirepass, strlen(requirepass), d);
    if (!add_pass(u, d)) {
      user_free(u);
      return NULL;
    }
  } else {
    u->nopass = true;
  }
  return u;
}

int srv_acl_load(srv_acl **out, const char *path, const char *requirepass,
                 char *err, size_t errlen) {
  srv_acl *a = calloc(1, sizeof *a);
  if (!a) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  a->always = class_mask(CL_CONN);
  if (path && path[0]) {
    a->from_file = true;
    FILE *f = fopen(path, "r");
    if (!f) {
      snprintf(err, errlen, "--aclfile %s: %s", path, strerror(errno));
      srv_acl_free(a);
      return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lineno = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
      lineno++;
      if (n > 0 && line[n - 1] == '\n')
        n--;
      char e[256];
      if (acl_line(a, line, (size_t)n, e, sizeof e) != 0) {
        snprintf(err, errlen, "--aclfile %s:%d: %s", path, lineno, e);
        free(line);
        fclose(f);
        srv_acl_free(a);
        return -1;
      }
    }
    free(line);
    fclose(f);
  }
  a->dflt = acl_find(a, "default", 7);
  if (!a->dflt) {
    srv_user *u = default_user(requirepass);
    if (!u || !acl_add(a, u)) {
      user_free(u);
      snprintf(err, errlen, "out of memory");
      srv_acl_free(a);
      return -1;
    }
    a->dflt = u;
  } else if (requirepass[0]) {
    snprintf(err, errlen,
             "--aclfile %s defines the default user: leave out "
             "--requirepass, or the file's 'user default' line",
             path);
    srv_acl_free(a);
    return -1;
  }
  *out = a;
  return 0;
}

bool srv_acl_open(const srv_acl *a) {
  return !a || (a->dflt->on && a->dflt->nopass);
}

void srv_acl_conn_init(conn *c) {
  const srv_acl *a = c->s->acl;
  c->acl_user = a ? a->dflt : NULL;
  c->authed = srv_acl_open(a);
  c->admin = !a || a->dflt->admin;
  memcpy(c->user, "default", 7);
  c->user_len = 7;
}

/* Whether pass is one of u's passwords: every digest is compared, each in
 * constant time, so the time tells neither which one matched nor where. */
static bool pass_ok(const srv_user *u, const char *pass, size_t len) {
  if (u->nopass)
    return true;
  unsigned char d[32];
  sha256(pass, len, d);
  bool ok = false;
  for (size_t i = 0; i < u->npass; i++)
    ok |= CRYPTO_memcmp(u->pass[i], d, 32) == 0;
  return ok;
}

int srv_acl_auth(conn *c, const char *user, size_t ulen, const char *pass,
                 size_t plen) {
  const srv_acl *a = c->s->acl;
  if (!a)
    return -1;
  srv_user *u = a->dflt;
  if (user && a->from_file)
    u = acl_find(a, user, ulen);
  if (!u || !u->on || !pass_ok(u, pass, plen))
    return -1;
  c->acl_user = u;
  /* Without --aclfile every name shares the default user's rights to run
   * commands, but only the name "default" (or none) is an admin: the
   * others may end and list only their own sessions and connections. */
  c->admin = u->admin && (a->from_file || !user ||
                          (ulen == 7 && memcmp(user, "default", 7) == 0));
  c->authed = true;
  /* Without --aclfile the one password is the default user's, and the name
   * AUTH gives is kept as it always was: it names who may resume the
   * sessions this connection makes resumable. */
  if (!user) {
    user = "default";
    ulen = 7;
  }
  memcpy(c->user, user, ulen);
  c->user_len = ulen;
  return 0;
}

bool srv_acl_from_file(const srv_acl *a) {
  return a && a->from_file;
}

/* ---- Key patterns -----------------------------------------------------------
 */

/*
 * class_at -- matches byte ch against the class that opens at p[0] == '['
 * of p[0..n), and returns how many bytes of p the class spans. It reads the
 * class as Redis's stringmatchlen does, byte for byte: a leading '^'
 * negates, '\' takes the next byte as it is, 'x-y' is a range (its ends
 * taken as they are, reversed ones swapped), and ']' closes it; a class
 * that no ']' closes runs to the end of the pattern.
 */
static size_t class_at(const unsigned char *p, size_t n, unsigned char ch,
                       bool *hit) {
  size_t i = 1;
  bool neg = i < n && p[i] == '^', in = false;
  if (neg)
    i++;
  for (; i < n; i++) {
    if (p[i] == '\\' && n - i >= 2) {
      i++;
      in |= p[i] == ch;
    } else if (p[i] == ']') {
      *hit = in != neg;
      return i + 1;
    } else if (n - i >= 3 && p[i + 1] == '-') {
      unsigned char lo = p[i], hi = p[i + 2];
      if (lo > hi) {
        unsigned char t = lo;
        lo = hi;
        hi = t;
      }
      in |= ch >= lo && ch <= hi;
      i += 2;
    } else {
      in |= p[i] == ch;
    }
  }
  *hit = in != neg;
  return n;
}

/*
 * srv_acl_glob -- whether key s[0..sn) matches the Redis glob p[0..pn):
 * '*' any bytes, '?' one byte, '[...]' a class, '\' the next byte as it
 * is. Bytes, not characters; it matches what Redis's stringmatchlen
 * matches (test_acl.py drives both with the same random patterns and
 * keys). It backtracks to the last '*' only, so a
 * match costs O(pn * sn) at worst, never the exponential time of a
 * recursive matcher on 'a*a*a*...b'.
 */
bool srv_acl_glob(const char *pat, size_t pn, const char *key, size_t sn) {
  const unsigned char *p = (const unsigned char *)pat,
                      *s = (const unsigned char *)key;
  size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;
  while (si < sn) {
    if (pi < pn) {
      unsigned char c = p[pi];
      if (c == '*') {
        star_p = ++pi;
        star_s = si;
        continue;
      }
      size_t step = 1;
      bool ok;
      if (c == '?') {
        ok = true;
      } else if (c == '[') {
        step = class_at(p + pi, pn - pi, s[si], &ok);
      } else if (c == '\\' && pi + 1 < pn) {
        step = 2;
        ok = p[pi + 1] == s[si];
      } else {
        step = 1;
        ok = c == s[si];
      }
      if (ok) {
        pi += step;
        si++;
        continue;
      }
    }
    if (star_p == SIZE_MAX)
      return false;
    pi = star_p; /* the last '*' takes one byte more */
    si = ++star_s;
  }
  while (pi < pn && p[pi] == '*')
    pi++;
  return pi == pn;
}

static bool key_ok(const srv_user *u, const char *k, size_t n) {
  if (u->allkeys)
    return true;
  for (size_t i = 0; i < u->npat; i++)
    if (srv_acl_glob(u->pat[i].p, u->pat[i].len, k, n))
      return true;
  return false;
}

/* ---- The check at dispatch --------------------------------------------------
 */

static acl_cmd cmd_rights(srv_acl *a, const srv_cmd *k) {
  for (size_t i = 0; i < a->ncmd; i++)
    if (a->cmd[i].k == k)
      return a->cmd[i];
  size_t l = strlen(k->name);
  acl_cmd r = {k, units_of(k->name, l, NULL, 0), false, KEYS_NONE};
  r.sub = r.units && units[__builtin_ctzll(r.units)].sub;
  if (strcmp(k->name, "LOCK") == 0)
    r.keys = KEYS_LOCK;
  else if (strcmp(k->name, "UNLOCK") == 0 || strcmp(k->name, "HOLDERS") == 0)
    r.keys = KEYS_ALL;
  if (a->ncmd < ACL_CMD_CACHE) /* a table larger than that is looked up */
    a->cmd[a->ncmd++] = r;
  return r;
}

/* -NOPERM for a command, named as Redis names it: lower case, a subcommand
 * as cmd|sub. */
static void noperm_cmd(conn *c, const srv_cmd *k, const ordo__resp_arg *sub) {
  char name[80];
  size_t l = 0;
  for (const char *p = k->name; *p && l < 32; p++)
    name[l++] = (char)tolower((unsigned char)*p);
  if (sub) {
    name[l++] = '|';
    for (size_t i = 0; i < sub->len && i < 32; i++)
      name[l++] = (char)tolower((unsigned char)sub->ptr[i]);
  }
  name[l] = 0;
  ordo__out_error(&c->out, "NOPERM",
                  "this user has no permissions to run the '%s' command", name);
}

int srv_acl_check(conn *c, const srv_cmd *k, size_t argc,
                  const ordo__resp_arg *argv) {
  const srv_user *u = c->acl_user;
  if (!u || (u->allcmds && u->allkeys))
    return 0;
  acl_cmd r = cmd_rights(c->s->acl, k);
  if (!u->allcmds) {
    uint64_t always = c->s->acl->always;
    uint64_t m = r.units;
    const ordo__resp_arg *sub = NULL;
    if (r.sub && argc >= 2) {
      sub = &argv[1];
      m = units_of(k->name, strlen(k->name), sub->ptr, sub->len);
    }
    /* A subcommand no unit names is the handler's to refuse: it may run
     * if any of the command's units may. */
    if (!m) {
      m = r.units;
      sub = NULL;
    }
    if (!(m & (u->cmds | always))) {
      noperm_cmd(c, k, sub);
      return -1;
    }
  }
  if (u->allkeys || r.keys == KEYS_NONE)
    return 0;
  /* The keys: LOCK's (numkeys, then key and mode pairs), UNLOCK's and
   * HOLDERS's arguments. All are checked before the command runs, so a
   * LOCK with one key outside the patterns takes none of them. A LOCK
   * whose numkeys is wrong is cmd_lock's to refuse; the pairs it has are
   * checked meanwhile. */
  size_t first = 1, last = argc, step = 1;
  if (r.keys == KEYS_LOCK) {
    long long nk = 0;
    char num[24];
    if (argc >= 2 && argv[1].len > 0 && argv[1].len < sizeof num) {
      memcpy(num, argv[1].ptr, argv[1].len);
      num[argv[1].len] = 0;
      nk = strtoll(num, NULL, 10);
    }
    size_t pairs = argc >= 2 ? (argc - 2) / 2 : 0;
    first = 2;
    step = 2;
    last = 2 + 2 * (nk > 0 && (size_t)nk <= pairs ? (size_t)nk : pairs);
  }
  for (size_t i = first; i < last; i += step)
    if (!key_ok(u, argv[i].ptr, argv[i].len)) {
      ordo__out_error(&c->out, "NOPERM",
                      "this user has no permissions to access one of the "
                      "keys used as arguments");
      return -1;
    }
  return 0;
}
