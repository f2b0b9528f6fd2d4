/*
 * redis_script.c -- what the Redis backends share: the Lua scripts that take,
 * release and renew a set of keys on one node in one round trip, their
 * SHA-1 names, the names beside a lock key (fencing counter, release
 * channel), a node's address, and non-blocking hiredis connections driven by
 * poll(2) with CLOCK_MONOTONIC deadlines. The packaged hiredis (0.14) drops
 * a blocking connection whose read timeout fires, so nothing here blocks in
 * hiredis: every wait is a poll(2) bounded by the caller's deadline. See
 * docs/backend-redis.md for the key
 * layout and the scripts' logic.
 *
 * Interface: ordo__rs_script_text, ordo__rs_script_sha, ordo__rs_sha1_hex,
 * ordo__rs_fence_key, ordo__rs_key_reserved, ordo__rs_channel_prefix,
 * ordo__rs_has_tag, ordo__rs_slot, ordo__rs_parse_node, ordo__rs_tls_open,
 * ordo__rs_conn_init, ordo__rs_connect, ordo__rs_close, ordo__rs_open,
 * ordo__rs_append, ordo__rs_append_loose, ordo__rs_append_script,
 * ordo__rs_append_eval, ordo__rs_run,
 * ordo__rs_take, ordo__rs_done, ordo__rs_eval, ordo__rs_next,
 * ordo__rs_new_owner, ordo__rs_err_code.
 */
#include "backend/redis_script.h"
#include "backend/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- The scripts ------------------------------------------------------------
 * A lock key is a hash: one field per owner (a txn's 128-bit random value in
 * hex), whose value is the mode ('S' or 'X') followed by the server time in
 * milliseconds at which that owner's lease runs out. An owner whose time
 * has passed holds nothing; the scripts skip such fields and the next grant
 * deletes them. The key itself expires (PEXPIRE) when the last owner's lease
 * does, so a key nobody renews disappears on its own. The time is the
 * server's (TIME), one clock for every client; scripts are replicated by
 * their effects (the default since Redis 5; asked for explicitly before).
 *
 * ACQUIRE reads every lock key before it writes anything, so a request it
 * refuses (or a lock key holding other data, a WRONGTYPE error) changes
 * nothing. A granted request then takes its fencing tokens (INCR, each
 * through redis.pcall) before it writes any lock key: a fencing counter
 * that is not a count fails the request with the lock keys untouched, and
 * only the counters of the keys before it have moved on (a gap in a key's
 * tokens, which still increase). ACQUIRE of one key calls TIME, HGETALL,
 * INCR, HSET and PEXPIRE; RELEASE of one calls TIME, HGETALL, HDEL and,
 * when the key is left free, PUBLISH (docs/backend-redis.md has what a
 * lock+unlock costs a server).
 */

static const char acquire_lua[] =
    "-- ordo ACQUIRE: all of KEYS or none (docs/backend-redis.md)\n"
    "pcall(redis.replicate_commands)\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local me, lease, modes = ARGV[1], tonumber(ARGV[2]), ARGV[3]\n"
    "local n = #KEYS / 2\n"
    "local seen, busy, wait = {}, {0, 0}, 0\n"
    "for i = 1, n do\n"
    "  local want = string.sub(modes, i, i)\n"
    "  local h = redis.call('HGETALL', KEYS[2 * i - 1])\n"
    "  seen[i] = h\n"
    "  local blocked = false\n"
    "  for j = 1, #h, 2 do\n"
    "    if h[j] ~= me then\n"
    "      local v = h[j + 1]\n"
    "      local left = (tonumber(string.sub(v, 2)) or 0) - now\n"
    "      if left > 0 and (want == 'X' or string.sub(v, 1, 1) == 'X') then\n"
    "        blocked = true\n"
    "        if left > wait then wait = left end\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  if blocked then busy[#busy + 1] = i end\n"
    "end\n"
    "if #busy > 2 then\n"
    "  busy[2] = wait\n"
    "  return busy\n"
    "end\n"
    "local out = {1, lease}\n"
    "for i = 1, n do\n"
    "  local f = redis.pcall('INCR', KEYS[2 * i])\n"
    "  if type(f) ~= 'number' then\n"
    "    return redis.error_reply('WRONGTYPE fencing counter ' .. KEYS[2 * i]"
    " .. ' is not a count')\n"
    "  end\n"
    "  out[#out + 1] = f\n"
    "end\n"
    "for i = 1, n do\n"
    "  local k, h, mode = KEYS[2 * i - 1], seen[i], string.sub(modes, i, i)\n"
    "  local top = now + lease\n"
    "  for j = 1, #h, 2 do\n"
    "    local v = h[j + 1]\n"
    "    local e = tonumber(string.sub(v, 2)) or 0\n"
    "    if h[j] == me then\n"
    "      if e > now and string.sub(v, 1, 1) == 'X' then mode = 'X' end\n"
    "    elseif e <= now then\n"
    "      redis.call('HDEL', k, h[j])\n"
    "    elseif e > top then\n"
    "      top = e\n"
    "    end\n"
    "  end\n"
    "  redis.call('HSET', k, me, string.format('%s%d', mode, now + lease))\n"
    "  redis.call('PEXPIRE', k, top - now)\n"
    "end\n"
    "return out\n";

static const char release_lua[] =
    "-- ordo RELEASE: the owner's holds, where they are still its own\n"
    "pcall(redis.replicate_commands)\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local me, n = ARGV[1], 0\n"
    "for i = 1, #KEYS do\n"
    "  local k = KEYS[i]\n"
    "  local h, mine, live = redis.call('HGETALL', k), nil, 0\n"
    "  for j = 1, #h, 2 do\n"
    "    if h[j] == me then\n"
    "      mine = h[j + 1]\n"
    "    elseif (tonumber(string.sub(h[j + 1], 2)) or 0) > now then\n"
    "      live = live + 1\n"
    "    end\n"
    "  end\n"
    "  if mine then\n"
    "    redis.call('HDEL', k, me)\n"
    "    if (tonumber(string.sub(mine, 2)) or 0) > now then\n"
    "      n = n + 1\n"
    "      if live <= 1 and ARGV[2] ~= '' then\n"
    "        redis.call('PUBLISH', ARGV[2] .. k, 'r')\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return n\n";

static const char extend_lua[] =
    "-- ordo EXTEND: renews the owner's lease where it still holds;\n"
    "-- ARGV[3], when given, sets each key's mode too (a failed upgrade's\n"
    "-- undo, back to S)\n"
    "pcall(redis.replicate_commands)\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local me, lease, modes = ARGV[1], tonumber(ARGV[2]), ARGV[3]\n"
    "local out = {lease}\n"
    "for i = 1, #KEYS do\n"
    "  local k = KEYS[i]\n"
    "  local v = redis.call('HGET', k, me)\n"
    "  if v and (tonumber(string.sub(v, 2)) or 0) > now then\n"
    "    local m = string.sub(v, 1, 1)\n"
    "    if modes then m = string.sub(modes, i, i) end\n"
    "    redis.call('HSET', k, me, string.format('%s%d', m, now + lease))\n"
    "    if redis.call('PTTL', k) < lease then\n"
    "      redis.call('PEXPIRE', k, lease)\n"
    "    end\n"
    "  else\n"
    "    out[#out + 1] = i\n"
    "  end\n"
    "end\n"
    "return out\n";

static const char fencemax_lua[] =
    "-- ordo FENCEMAX: raises each fence counter to at least its token\n"
    "for i = 1, #KEYS do\n"
    "  local v = redis.pcall('GET', KEYS[i])\n"
    "  local t = tonumber(ARGV[i])\n"
    "  if t and type(v) ~= 'table' then\n"
    "    local c = 0\n"
    "    if v then c = tonumber(v) end\n"
    "    if c and c < t then redis.call('SET', KEYS[i], ARGV[i]) end\n"
    "  end\n"
    "end\n"
    "return 1\n";

static const char *const script_text[ORDO__RS_NSCRIPTS] = {
    acquire_lua, release_lua, extend_lua, fencemax_lua};
static char script_sha[ORDO__RS_NSCRIPTS][41];
static pthread_once_t sha_once = PTHREAD_ONCE_INIT;

const char *ordo__rs_script_text(int which) {
  return script_text[which];
}

static void sha_init(void) {
  for (int i = 0; i < ORDO__RS_NSCRIPTS; i++)
    ordo__rs_sha1_hex(script_text[i], strlen(script_text[i]), script_sha[i]);
}

const char *ordo__rs_script_sha(int which) {
  pthread_once(&sha_once, sha_init);
  return script_sha[which];
}

/* ---- SHA-1 (FIPS 180-4, section 6.1) ----------------------------------------
 * Only to name the scripts as Redis does (EVALSHA); nothing here relies on
 * SHA-1 being hard to collide.
 */

static uint32_t rol(uint32_t x, unsigned n) {
  return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const uint8_t *b) {
  uint32_t w[80];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
           (uint32_t)b[4 * i + 2] << 8 | (uint32_t)b[4 * i + 3];
  for (int i = 16; i < 80; i++)
    w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; i++) {
    uint32_t f, k;
    if (i < 20) {
      f = (bb & c) | (~bb & d);
      k = 0x5A827999u;
    } else if (i < 40) {
      f = bb ^ c ^ d;
      k = 0x6ED9EBA1u;
    } else if (i < 60) {
      f = (bb & c) | (bb & d) | (c & d);
      k = 0x8F1BBCDCu;
    } else {
      f = bb ^ c ^ d;
      k = 0xCA62C1D6u;
    }
    uint32_t tmp = rol(a, 5) + f + e + k + w[i];
    e = d;
    d = c;
    c = rol(bb, 30);
    bb = a;
    a = tmp;
  }
  h[0] += a;
  h[1] += bb;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

void ordo__rs_sha1_hex(const void *s, size_t n, char out[41]) {
  uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u,
                   0xC3D2E1F0u};
  const uint8_t *p = s;
  size_t left = n;
  for (; left >= 64; left -= 64, p += 64)
    sha1_block(h, p);
  /* The tail, the 0x80 byte, zeros, and the length in bits (big-endian)
   * fill one or two last blocks. */
  uint8_t tail[128] = {0};
  memcpy(tail, p, left);
  tail[left] = 0x80;
  size_t blocks = left + 9 > 64 ? 2 : 1;
  uint64_t bits = (uint64_t)n * 8;
  for (int i = 0; i < 8; i++)
    tail[blocks * 64 - 1 - (size_t)i] = (uint8_t)(bits >> (8 * i));
  for (size_t i = 0; i < blocks; i++)
    sha1_block(h, tail + 64 * i);
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 20; i++) {
    uint8_t byte = (uint8_t)(h[i / 4] >> (24 - 8 * (i % 4)));
    out[2 * i] = hex[byte >> 4];
    out[2 * i + 1] = hex[byte & 15];
  }
  out[40] = 0;
}

/* ---- Names --------------------------------------------------------------- */

static const char fence_suffix[] = ":ordo:fence";
#define FENCE_SUFFIX_LEN (sizeof fence_suffix - 1)

bool ordo__rs_has_tag(const void *s, size_t n) {
  const char *k = s;
  const char *open = memchr(k, '{', n);
  if (!open)
    return false;
  size_t rest = n - (size_t)(open - k) - 1;
  const char *close = memchr(open + 1, '}', rest);
  return close && close > open + 1;
}

/* CRC16 with the polynomial 0x1021, initial value 0, no reflection (the
 * XMODEM variant), which is what Redis Cluster hashes keys with. */
static unsigned crc16(const uint8_t *s, size_t n) {
  unsigned crc = 0;
  for (size_t i = 0; i < n; i++) {
    crc ^= (unsigned)s[i] << 8;
    for (int b = 0; b < 8; b++)
      crc =
          (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

unsigned ordo__rs_slot(const void *key, size_t len) {
  const uint8_t *k = key;
  if (ordo__rs_has_tag(key, len)) {
    const uint8_t *open = memchr(k, '{', len);
    const uint8_t *close = memchr(open + 1, '}', len - (size_t)(open - k) - 1);
    return crc16(open + 1, (size_t)(close - open - 1)) & 16383;
  }
  return crc16(k, len) & 16383;
}

size_t ordo__rs_fence_key(const void *key, size_t len, char *out) {
  size_t o = 0;
  bool wrap = !ordo__rs_has_tag(key, len) && !memchr(key, '}', len);
  if (wrap)
    out[o++] = '{';
  memcpy(out + o, key, len);
  o += len;
  if (wrap)
    out[o++] = '}';
  memcpy(out + o, fence_suffix, FENCE_SUFFIX_LEN);
  return o + FENCE_SUFFIX_LEN;
}

bool ordo__rs_key_reserved(const void *key, size_t len) {
  return len >= FENCE_SUFFIX_LEN &&
         memcmp((const char *)key + len - FENCE_SUFFIX_LEN, fence_suffix,
                FENCE_SUFFIX_LEN) == 0;
}

size_t ordo__rs_channel_prefix(int db, char *out) {
  int n = snprintf(out, 32, "ordo:rel:%d:", db);
  return n > 0 ? (size_t)n : 0;
}

/* ---- Nodes --------------------------------------------------------------- */

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Percent-decodes s[0..n) into out (cap bytes with the NUL); a NUL byte,
 * even escaped, is refused. */
static int pct_decode(const char *s, size_t n, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= n)
        return ORDO_EURL;
      int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
      if (hi < 0 || lo < 0 || (hi | lo) == 0)
        return ORDO_EURL;
      c = (char)(hi * 16 + lo);
      i += 2;
    }
    if (c == 0 || o + 1 >= cap)
      return ORDO_EURL;
    out[o++] = c;
  }
  out[o] = 0;
  return 0;
}

/* A host name or IPv4 address: letters, digits, '.', '-', '_'; in brackets
 * (v6) also ':' and '%' (a zone). */
static bool host_ok(const char *s, size_t n, bool v6) {
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
              (v6 && (c == ':' || c == '%'));
    if (!ok)
      return false;
  }
  return true;
}

int ordo__rs_tls_open(const ordo__tls_opts *o, ordo__rs_node *nodes, size_t n,
                      long tmo_ms, ordo__tls_client **out) {
  *out = NULL;
  if (ordo__tls_opts_check(o) != 0)
    return ORDO_EURL;
  if (!o->on)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (nodes[i].unix_sock)
      return ORDO_EURL; /* TLS is for TCP; a Unix socket is local already */
  char err[512];
  *out = ordo__tls_client_new(o, err, sizeof err);
  if (!*out)
    return ORDO_EURL;
  for (size_t i = 0; i < n; i++) {
    nodes[i].tls = *out;
    nodes[i].tls_timeout_ms = tmo_ms;
  }
  return 0;
}

/* Opens c over TLS (tls.c) to node: a non-blocking context on the
 * plaintext end, already connected; NULL with errstr set when the connect
 * or the handshake failed. */
static redisContext *connect_tls(const ordo__rs_node *node, char *errstr,
                                 size_t cap) {
  char err[180];
  int fd = ordo__tls_connect(node->tls, node->host, node->port,
                             node->tls_timeout_ms, err, sizeof err);
  if (fd < 0) {
    snprintf(errstr, cap, "connect: %s", err);
    return NULL;
  }
  int fl = fcntl(fd, F_GETFL);
  redisContext *c = NULL;
  if (fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0)
    c = redisConnectFd(fd);
  if (!c) {
    close(fd);
    snprintf(errstr, cap, "connect: out of memory");
    return NULL;
  }
  c->flags &= ~REDIS_BLOCK; /* as redisConnectNonBlock's are */
  return c;
}

int ordo__rs_parse_node(const char *s, size_t n, ordo__rs_node *u) {
  memset(u, 0, sizeof *u);
  u->port = 6379;
  /* The user info ends at the last '@' (a password holds one only
   * percent-encoded). */
  const char *at = NULL;
  for (const char *p = s; p < s + n; p++)
    if (*p == '@')
      at = p;
  const char *hp = s;
  if (at) {
    const char *colon = memchr(s, ':', (size_t)(at - s));
    if (!colon)
      return ORDO_EURL; /* a user without a password means nothing here */
    if (pct_decode(s, (size_t)(colon - s), u->user, sizeof u->user) ||
        pct_decode(colon + 1, (size_t)(at - colon - 1), u->pass,
                   sizeof u->pass))
      return ORDO_EURL;
    u->have_pass = true;
    hp = at + 1;
  }
  size_t hlen = (size_t)(s + n - hp);
  if (hlen > 0 && hp[0] == '/') {
    u->unix_sock = true;
    if (hlen < 2 || pct_decode(hp, hlen, u->path, sizeof u->path))
      return ORDO_EURL;
    return 0;
  }
  /* host[:port][/db] */
  const char *slash = memchr(hp, '/', hlen);
  size_t alen = slash ? (size_t)(slash - hp) : hlen;
  if (slash) {
    long db;
    if (ordo__parse_long(slash + 1, hlen - alen - 1, 0, 1L << 20, &db))
      return ORDO_EURL;
    u->db = (int)db;
    u->db_set = true;
  }
  const char *host = hp, *port = NULL;
  size_t nh;
  bool v6 = false;
  if (alen > 0 && hp[0] == '[') {
    const char *rb = memchr(hp, ']', alen);
    if (!rb)
      return ORDO_EURL;
    host = hp + 1;
    nh = (size_t)(rb - host);
    v6 = true;
    if (rb + 1 < hp + alen) {
      if (rb[1] != ':')
        return ORDO_EURL;
      port = rb + 2;
    }
  } else {
    const char *colon = memchr(hp, ':', alen);
    nh = colon ? (size_t)(colon - hp) : alen;
    port = colon ? colon + 1 : NULL;
  }
  if (!host_ok(host, nh, v6) || nh >= sizeof u->host)
    return ORDO_EURL;
  memcpy(u->host, host, nh);
  u->host[nh] = 0;
  if (port) {
    long v;
    if (ordo__parse_long(port, (size_t)(hp + alen - port), 1, 65535, &v))
      return ORDO_EURL;
    u->port = (int)v;
  }
  return 0;
}

/* ---- Connections --------------------------------------------------------- */

void ordo__rs_conn_init(ordo__rs_conn *k) {
  memset(k, 0, sizeof *k);
}

static void drop_replies(ordo__rs_conn *k) {
  for (unsigned i = 0; i < k->got; i++)
    if (k->rep[i])
      freeReplyObject(k->rep[i]);
  k->got = k->want = k->skip = 0;
}

void ordo__rs_close(ordo__rs_conn *k) {
  drop_replies(k);
  free(k->rep);
  k->rep = NULL;
  k->caprep = 0;
  if (k->c)
    redisFree(k->c);
  k->c = NULL;
  k->connecting = false;
  k->flushed = true;
  k->hs_auth = k->hs_select = false;
  k->keep_first = false;
  if (k->first)
    freeReplyObject(k->first);
  k->first = NULL;
}

/* Closes k after a failure, keeping the first code and text. */
static void fail(ordo__rs_conn *k, int code, const char *what,
                 const char *detail) {
  if (!k->err) {
    k->err = code;
    snprintf(k->errstr, sizeof k->errstr, "%s: %s", what,
             detail && *detail ? detail : "connection lost");
  }
  ordo__rs_close(k);
}

bool ordo__rs_open(const ordo__rs_conn *k) {
  return k->c != NULL;
}

static int append_raw(ordo__rs_conn *k, int argc, const char **av,
                      const size_t *al) {
  if (redisAppendCommandArgv(k->c, argc, av, al) != REDIS_OK) {
    if (k->c->err == REDIS_ERR_OOM) {
      /* Whether part of it went into the buffer is unknown: the stream
       * cannot be trusted any more. */
      fail(k, ORDO_ENOMEM, "append", "out of memory");
      return ORDO_ENOMEM;
    }
    fail(k, ORDO_EBACKEND, "append", k->c->errstr);
    return ORDO_EBACKEND;
  }
  k->flushed = false;
  return 0;
}

static int handshake_append(ordo__rs_conn *k, const ordo__rs_node *node,
                            bool select);

int ordo__rs_connect(ordo__rs_conn *k, const ordo__rs_node *node, bool select) {
  ordo__rs_close(k);
  k->err = 0;
  k->errstr[0] = 0;
  if (node->tls) {
    redisContext *c = connect_tls(node, k->errstr, sizeof k->errstr);
    if (!c) {
      k->err = ORDO_EBACKEND;
      return ORDO_EBACKEND;
    }
    k->c = c;
    k->connecting = false;
    k->flushed = true;
    return handshake_append(k, node, select);
  }
  redisContext *c = node->unix_sock
                        ? redisConnectUnixNonBlock(node->path)
                        : redisConnectNonBlock(node->host, node->port);
  if (!c) {
    snprintf(k->errstr, sizeof k->errstr, "connect: out of memory");
    k->err = ORDO_ENOMEM;
    return ORDO_ENOMEM;
  }
  if (c->err) {
    snprintf(k->errstr, sizeof k->errstr, "connect: %s", c->errstr);
    k->err = ORDO_EBACKEND;
    redisFree(c);
    return ORDO_EBACKEND;
  }
  k->c = c;
  k->connecting = true;
  k->flushed = true;
  /* A wait without a deadline reads with no bound: TCP keepalive ends it if
   * the server's host vanishes without a word. */
  if (!node->unix_sock)
    redisEnableKeepAlive(c);
  return handshake_append(k, node, select);
}

/* Appends AUTH (when node has a password) and SELECT (when select and
 * node->db != 0) to k, just connected. */
static int handshake_append(ordo__rs_conn *k, const ordo__rs_node *node,
                            bool select) {
  if (node->have_pass) {
    const char *av[3];
    size_t al[3];
    int n = 0;
    av[n++] = "AUTH";
    if (node->user[0])
      av[n++] = node->user;
    av[n++] = node->pass;
    for (int i = 0; i < n; i++)
      al[i] = strlen(av[i]);
    int rc = append_raw(k, n, av, al);
    if (rc)
      return rc;
    k->hs_auth = true;
  }
  if (select && node->db != 0) {
    char db[16];
    const char *av[2] = {"SELECT", db};
    size_t al[2] = {6, (size_t)snprintf(db, sizeof db, "%d", node->db)};
    int rc = append_raw(k, 2, av, al);
    if (rc)
      return rc;
    k->hs_select = true;
  }
  return 0;
}

int ordo__rs_append(ordo__rs_conn *k, int argc, const char **av,
                    const size_t *al) {
  if (!k->c)
    return k->err ? k->err : ORDO_EBACKEND;
  if (k->want + 1 > k->caprep) {
    unsigned cap = k->caprep ? 2 * k->caprep : 4;
    redisReply **r = realloc(k->rep, cap * sizeof *r);
    if (!r)
      return ORDO_ENOMEM;
    k->rep = r;
    k->caprep = cap;
  }
  int rc = append_raw(k, argc, av, al);
  if (rc)
    return rc;
  k->rep[k->want++] = NULL;
  return 0;
}

int ordo__rs_append_loose(ordo__rs_conn *k, int argc, const char **av,
                          const size_t *al) {
  if (!k->c)
    return k->err ? k->err : ORDO_EBACKEND;
  return append_raw(k, argc, av, al);
}

int ordo__rs_append_script(ordo__rs_conn *k, int which, int nkeys, int argc,
                           const char **av, const size_t *al) {
  const char **v = malloc(((size_t)argc + 3) * sizeof *v);
  size_t *l = malloc(((size_t)argc + 3) * sizeof *l);
  if (!v || !l) {
    free(v);
    free(l);
    return ORDO_ENOMEM;
  }
  char nk[16];
  v[0] = "EVALSHA";
  l[0] = 7;
  v[1] = ordo__rs_script_sha(which);
  l[1] = 40;
  v[2] = nk;
  l[2] = (size_t)snprintf(nk, sizeof nk, "%d", nkeys);
  memcpy(v + 3, av, (size_t)argc * sizeof *v);
  memcpy(l + 3, al, (size_t)argc * sizeof *l);
  int rc = ordo__rs_append(k, argc + 3, v, l);
  free(v);
  free(l);
  return rc;
}

int ordo__rs_append_eval(ordo__rs_conn *k, int which, int nkeys, int argc,
                         const char **av, const size_t *al) {
  const char **v = malloc(((size_t)argc + 3) * sizeof *v);
  size_t *l = malloc(((size_t)argc + 3) * sizeof *l);
  int rc = ORDO_ENOMEM;
  if (v && l) {
    char nk[16];
    v[0] = "EVAL";
    l[0] = 4;
    v[1] = ordo__rs_script_text(which);
    l[1] = strlen(v[1]);
    v[2] = nk;
    l[2] = (size_t)snprintf(nk, sizeof nk, "%d", nkeys);
    memcpy(v + 3, av, (size_t)argc * sizeof *v);
    memcpy(l + 3, al, (size_t)argc * sizeof *l);
    rc = ordo__rs_append(k, argc + 3, v, l);
  }
  free(v);
  free(l);
  return rc;
}

/*
 * pull -- takes the replies hiredis has parsed: the handshake's are
 * checked, abandoned ones thrown away, the exchange's stored; the first
 * one nobody waits for goes to *loose (when loose is not NULL; later ones
 * stay in hiredis's reader). Returns false when k failed.
 */
static bool pull(ordo__rs_conn *k, redisReply **loose) {
  while (k->c) {
    if (loose && *loose)
      return true;
    void *vr = NULL;
    if (redisGetReply(k->c, &vr) != REDIS_OK) {
      fail(k, ORDO_EBACKEND, "read", k->c->errstr);
      return false;
    }
    redisReply *r = vr;
    if (!r)
      return true;
    if (k->hs_auth || k->hs_select) {
      bool auth = k->hs_auth;
      if (auth)
        k->hs_auth = false;
      else
        k->hs_select = false;
      if (r->type == REDIS_REPLY_ERROR) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s", r->str);
        freeReplyObject(r);
        fail(k, auth ? ORDO_EAUTH : ORDO_EBACKEND, auth ? "AUTH" : "SELECT",
             msg);
        return false;
      }
      freeReplyObject(r);
    } else if (k->skip > 0) {
      k->skip--;
      if (k->keep_first && !k->first)
        k->first = r; /* its exchange was abandoned; kept all the same */
      else
        freeReplyObject(r);
      k->keep_first = false;
    } else if (k->got < k->want) {
      k->rep[k->got++] = r;
      k->keep_first = false;
    } else if (loose) {
      *loose = r;
    } else {
      freeReplyObject(r); /* asked by no one */
    }
  }
  return false;
}

/* What k waits for in poll(2) now; 0 when it waits for nothing. */
static short events_of(const ordo__rs_conn *k, bool reading) {
  if (!k->c)
    return 0;
  if (k->connecting)
    return POLLOUT;
  short ev = 0;
  if (!k->flushed)
    ev |= POLLOUT;
  if (reading || k->hs_auth || k->hs_select || k->got < k->want)
    ev |= POLLIN;
  return ev;
}

/* Writes what k has to send, as far as the socket takes it; false when k
 * failed. */
static bool flush(ordo__rs_conn *k) {
  if (k->flushed)
    return true;
  int done = 0;
  if (ordo__redis_flush(k->c, &done) != 0) {
    fail(k, ORDO_EBACKEND, "write", k->c->errstr);
    return false;
  }
  k->flushed = done != 0;
  return true;
}

/* Acts on poll's revents for k: completes a connect, writes, reads. */
static void service(ordo__rs_conn *k, short rev, redisReply **loose) {
  if (!k->c || rev == 0)
    return;
  if (k->connecting) {
    int e = 0;
    socklen_t len = sizeof e;
    if (getsockopt(k->c->fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
      e = errno;
    if (e != 0) {
      fail(k, ORDO_EBACKEND, "connect", strerror(e));
      return;
    }
    k->connecting = false;
    rev |= POLLOUT;
  }
  if ((rev & (POLLOUT | POLLERR | POLLHUP)) && !flush(k))
    return;
  if (rev & (POLLIN | POLLERR | POLLHUP)) {
    if (redisBufferRead(k->c) != REDIS_OK) {
      fail(k, ORDO_EBACKEND, "read", k->c->errstr);
      return;
    }
    pull(k, loose);
  }
}

/* Milliseconds from now to deadline for poll(2), rounded up; -1: none. */
static int poll_ms(uint64_t deadline_ns) {
  if (deadline_ns == ORDO_NO_DEADLINE)
    return -1;
  uint64_t now = ordo__now_ns();
  if (deadline_ns <= now)
    return 0;
  uint64_t ms = (deadline_ns - now + 999999u) / 1000000u;
  return ms > INT_MAX ? INT_MAX : (int)ms;
}

int ordo__rs_run(ordo__rs_conn *const *ks, size_t n, uint64_t deadline_ns,
                 bool (*enough)(void *arg), void *arg) {
  struct pollfd one, *fds = n <= 1 ? &one : malloc(n * sizeof *fds);
  size_t *idx = n <= 1 ? NULL : malloc(n * sizeof *idx);
  if (!fds || (n > 1 && !idx)) {
    if (fds != &one)
      free(fds);
    free(idx);
    return ORDO_ENOMEM;
  }
  int rc = 0;
  for (;;) {
    /* Replies hiredis parsed already (a pipelined exchange) come first. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
      ordo__rs_conn *k = ks[i];
      if (!k)
        continue;
      /* A socket nearly always takes a request at once: write it now
       * rather than after a poll(2) that says so. */
      if (k->c && !k->connecting && pull(k, NULL))
        flush(k);
      short ev = events_of(k, false);
      if (ev) {
        fds[m].fd = k->c->fd;
        fds[m].events = ev;
        fds[m].revents = 0;
        if (idx)
          idx[m] = i;
        m++;
      }
    }
    if (m == 0 || (enough && enough(arg)))
      break;
    int ms = poll_ms(deadline_ns);
    if (ms == 0) {
      rc = ORDO_ETIMEDOUT;
      break;
    }
    int pr = poll(fds, (nfds_t)m, ms);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr < 0) {
      for (size_t j = 0; j < m; j++)
        fail(ks[idx ? idx[j] : 0], ORDO_EBACKEND, "poll", strerror(errno));
      break;
    }
    for (size_t j = 0; j < m; j++)
      service(ks[idx ? idx[j] : 0], fds[j].revents, NULL);
  }
  if (fds != &one)
    free(fds);
  free(idx);
  return rc;
}

redisReply *ordo__rs_take(ordo__rs_conn *k, unsigned i) {
  if (i >= k->got)
    return NULL;
  redisReply *r = k->rep[i];
  k->rep[i] = NULL;
  return r;
}

void ordo__rs_done(ordo__rs_conn *k) {
  for (unsigned i = 0; i < k->got; i++)
    if (k->rep[i]) {
      freeReplyObject(k->rep[i]);
      k->rep[i] = NULL;
    }
  k->skip += k->want - k->got;
  k->want = k->got = 0;
}

static bool is_noscript(const redisReply *r) {
  return r && r->type == REDIS_REPLY_ERROR &&
         strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/*
 * collect -- after a run, moves each connection's one reply to out[i], or
 * closes a connection that did not answer (whether its script ran cannot be
 * known). Marks in again[i] the ones that said NOSCRIPT.
 */
static void collect(ordo__rs_conn *const *ks, size_t n, const bool *sent,
                    redisReply **out, bool *again, long waited_ms) {
  for (size_t i = 0; i < n; i++) {
    ordo__rs_conn *k = ks[i];
    again[i] = false;
    if (!k || !sent[i])
      continue;
    if (k->c && k->got == 1) {
      redisReply *r = ordo__rs_take(k, 0);
      ordo__rs_done(k);
      if (is_noscript(r)) {
        freeReplyObject(r);
        again[i] = true;
      } else {
        out[i] = r;
      }
    } else if (k->c) {
      char msg[64];
      snprintf(msg, sizeof msg, "no %s within %ld ms",
               k->connecting ? "connection" : "reply", waited_ms);
      fail(k, ORDO_ETIMEDOUT, k->connecting ? "connect" : "script", msg);
    }
  }
}

int ordo__rs_eval(ordo__rs_conn *const *ks, size_t n, int which, int nkeys,
                  int argc, const char **av, const size_t *al,
                  uint64_t deadline_ns, redisReply **out) {
  bool *sent = calloc(n ? n : 1, 2 * sizeof *sent);
  const char **v = malloc(((size_t)argc + 3) * sizeof *v);
  size_t *l = malloc(((size_t)argc + 3) * sizeof *l);
  if (!sent || !v || !l) {
    free(sent);
    free(v);
    free(l);
    return ORDO_ENOMEM;
  }
  bool *again = sent + n;
  uint64_t t0 = ordo__now_ns();
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    out[i] = NULL;
    if (!ks[i] || !ks[i]->c)
      continue;
    int arc = ordo__rs_append_script(ks[i], which, nkeys, argc, av, al);
    if (arc == ORDO_ENOMEM && ks[i]->c)
      rc = ORDO_ENOMEM; /* not sent; the connection is as it was */
    sent[i] = arc == 0;
  }
  if (rc == 0)
    rc = ordo__rs_run(ks, n, deadline_ns, NULL, NULL);
  if (rc == ORDO_ENOMEM) {
    for (size_t i = 0; i < n; i++)
      if (sent[i])
        ordo__rs_done(ks[i]);
    goto out;
  }
  long waited = (long)((ordo__now_ns() - t0) / 1000000u);
  collect(ks, n, sent, out, again, waited);
  /* NOSCRIPT: the node has not got the script (a restart, SCRIPT FLUSH, a
   * failover): EVAL loads it as it runs it. */
  bool any = false;
  v[0] = "EVAL";
  l[0] = 4;
  v[1] = ordo__rs_script_text(which);
  l[1] = strlen(v[1]);
  char nk[16];
  v[2] = nk;
  l[2] = (size_t)snprintf(nk, sizeof nk, "%d", nkeys);
  memcpy(v + 3, av, (size_t)argc * sizeof *v);
  memcpy(l + 3, al, (size_t)argc * sizeof *l);
  for (size_t i = 0; i < n; i++) {
    sent[i] = again[i] && ordo__rs_append(ks[i], argc + 3, v, l) == 0;
    any |= sent[i];
  }
  rc = 0;
  if (any) {
    rc = ordo__rs_run(ks, n, deadline_ns, NULL, NULL);
    rc = rc == ORDO_ENOMEM ? rc : 0;
    waited = (long)((ordo__now_ns() - t0) / 1000000u);
    collect(ks, n, sent, out, again, waited);
  }
out:
  free(sent);
  free(v);
  free(l);
  return rc;
}

int ordo__rs_next(ordo__rs_conn *k, uint64_t deadline_ns, redisReply **out) {
  *out = NULL;
  for (;;) {
    if (!k->c)
      return k->err ? k->err : ORDO_EBACKEND;
    if (!k->connecting && !pull(k, out))
      return k->err ? k->err : ORDO_EBACKEND;
    if (*out)
      return 0;
    struct pollfd fd = {k->c->fd, events_of(k, true), 0};
    int pr = poll(&fd, 1, poll_ms(deadline_ns));
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr < 0) {
      fail(k, ORDO_EBACKEND, "poll", strerror(errno));
      continue;
    }
    if (pr == 0)
      return ORDO_ETIMEDOUT;
    service(k, fd.revents, out);
    if (*out)
      return 0;
  }
}

/* ---- Error replies ------------------------------------------------------- */

static const struct {
  const char *code;
  int err;
} err_map[] = {
    {"NOAUTH", ORDO_EAUTH},     {"WRONGPASS", ORDO_EAUTH},
    {"CROSSSLOT", ORDO_EINVAL}, {"WRONGTYPE", ORDO_EINVAL},
    {"OOM", ORDO_ELIMIT},
};

int ordo__rs_err_code(const redisReply *r) {
  if (!r || r->type != REDIS_REPLY_ERROR)
    return ORDO_EBACKEND;
  size_t n = strcspn(r->str, " ");
  for (size_t i = 0; i < sizeof err_map / sizeof err_map[0]; i++)
    if (strlen(err_map[i].code) == n && memcmp(r->str, err_map[i].code, n) == 0)
      return err_map[i].err;
  /* Before Redis 7 an error inside a script came wrapped in "ERR Error
   * running script ...: WRONGTYPE ...". */
  if (strstr(r->str, "WRONGTYPE"))
    return ORDO_EINVAL;
  return ORDO_EBACKEND;
}

/* 128 random bits in hex, from getrandom(2) only: an owner value guards
 * release and extend, and an adversary who could predict it (the
 * clock-seeded ordo__rand64 can be solved from its outputs) could release
 * another client's locks. */
int ordo__rs_new_owner(char out[33]) {
  uint8_t b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return ORDO_EBACKEND;
    got += (size_t)n;
  }
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = hex[b[i] >> 4];
    out[2 * i + 1] = hex[b[i] & 15];
  }
  out[32] = 0;
  return 0;
}
