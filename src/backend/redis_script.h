/*
 * redis_script.h -- what the Redis backends share (redis:// now, redlock://
 * on top of it): the four Lua scripts and their SHA-1 names, the names of
 * the keys and channels beside a lock key, a node's address as a URL gives
 * it, and non-blocking hiredis connections driven by poll(2), any number at
 * once, with every wait bounded by a CLOCK_MONOTONIC deadline. See
 * docs/backend-redis.md.
 *
 * Nothing here locks a mutex: a connection is used by one thread at a time,
 * whichever the caller's own locking says.
 */
#ifndef ORDO_REDIS_SCRIPT_H
#define ORDO_REDIS_SCRIPT_H

#include "ordo_int.h"
#include "backend/tls.h"

#include <hiredis/hiredis.h>

/* ---- Scripts ----------------------------------------------------------------
 *
 * ACQUIRE  KEYS = lock key 1, its fence counter, lock key 2, its counter, ...
 *          ARGV = owner, lease ms, modes (one byte 'S' or 'X' per key)
 *   Takes every key or none. Reply {1, lease_ms, token_1, ..., token_n}
 *   when granted; {0, wait_ms, i, j, ...} when not: the 1-based indexes of
 *   the keys held against the request, and the time until every such
 *   holder's lease would have run out (if none renews).
 * RELEASE  KEYS = lock keys; ARGV = owner, channel prefix
 *   Removes the owner from each key where it is still the owner, publishes
 *   on the key's release channel when that may let a waiter in (unless the
 *   prefix is empty: rcluster.c polls, and on a Cluster a PUBLISH goes to
 *   every node). Reply: how
 *   many keys were still this owner's (its lease had not run out).
 * EXTEND   KEYS = lock keys; ARGV = owner, lease ms [, modes]
 *   Renews the owner's lease on each key that is still its own; with
 *   modes (one 'S' or 'X' per key) sets each key's mode too (redlock.c
 *   takes a failed upgrade back to S with it). Reply {lease_ms, i, j, ...}:
 *   the 1-based indexes of the keys that were not.
 * FENCEMAX KEYS = fence counters; ARGV = one token per counter
 *   Raises each counter that holds a count below its token to the token
 *   (a max: never lowers one, never touches a counter that holds something
 *   else). redlock.c writes a grant's token back to every node with it, so
 *   that no later majority's counters are all below it. Reply: 1.
 */
enum {
  ORDO__RS_ACQUIRE = 0,
  ORDO__RS_RELEASE = 1,
  ORDO__RS_EXTEND = 2,
  ORDO__RS_FENCEMAX = 3,
  ORDO__RS_NSCRIPTS = 4
};

/* The Lua text of script which. */
const char *ordo__rs_script_text(int which);
/* Its SHA-1 as 40 lower-case hex digits (the name EVALSHA takes). */
const char *ordo__rs_script_sha(int which);
/* SHA-1 (FIPS 180-4) of s[0..n) as 40 hex digits and a NUL. */
void ordo__rs_sha1_hex(const void *s, size_t n, char out[41]);

/* ---- Names beside a lock key ------------------------------------------------
 * The fencing counter of key k: k + ":ordo:fence" when k has a hash tag
 * (a '{' with a '}' after it and at least one byte between), so the tag is
 * kept; otherwise "{" + k + "}:ordo:fence" when k has no '}' (the tag is
 * then all of k, which is what a tagless key hashes on); otherwise
 * k + ":ordo:fence" (such a key cannot share a Cluster slot with its
 * counter). The buffer needs len + ORDO__RS_FENCE_EXTRA bytes.
 */
#define ORDO__RS_FENCE_EXTRA 16
size_t ordo__rs_fence_key(const void *key, size_t len, char *out);
/* Keys ending in ":ordo:fence" are names of counters and cannot be locked. */
bool ordo__rs_key_reserved(const void *key, size_t len);
/* The prefix of every release channel of database db: "ordo:rel:<db>:"; a
 * key's channel is the prefix followed by the key. Needs 32 bytes. */
size_t ordo__rs_channel_prefix(int db, char *out);
/* True when s[0..n) holds a hash tag (see above). */
bool ordo__rs_has_tag(const void *s, size_t n);
/* The Redis Cluster hash slot of key (CRC16/XMODEM of the key, or of its
 * hash tag, modulo 16384). */
unsigned ordo__rs_slot(const void *key, size_t len);

/* ---- Nodes --------------------------------------------------------------- */

typedef struct ordo__rs_node {
  bool unix_sock;
  char host[256]; /* TCP: a name or an address, brackets stripped */
  int port;       /* 6379 unless given */
  char path[108]; /* Unix socket: sizeof(sun_path) */
  char user[128]; /* ACL user name (Redis 6+), "" for the default user */
  char pass[256];
  bool have_pass;
  int db;      /* 0..(1 << 20) */
  bool db_set; /* the address named its database ("/db") */
  /* TLS (rediss://, redlock://?tls=1): the place's context (not owned),
   * NULL for plain TCP, and the bound of the connect and handshake. */
  ordo__tls_client *tls;
  long tls_timeout_ms;
} ordo__rs_node;

/*
 * ordo__rs_parse_node -- fills node from s[0..n): "[[user]:password@]host
 * [:port][/db]" (an IPv6 address in brackets) or "[[user]:password@]/path"
 * (a Unix socket; its database comes from elsewhere, a URL's ?db=N). The
 * user, password and path are percent-decoded. Returns 0 or ORDO_EURL.
 */
int ordo__rs_parse_node(const char *s, size_t n, ordo__rs_node *node);
/*
 * ordo__rs_tls_open -- with o->on, checks o (ORDO_EURL for tls options
 * without TLS, a Unix-socket node, or a file that does not load) and makes
 * *out, the context every one of nodes[0..n) connects with, each within
 * tmo_ms; without, checks that no tls option was given. Returns 0,
 * ORDO_EURL or ORDO_ENOMEM. The caller frees *out (ordo__tls_client_free)
 * after its last connection.
 */
int ordo__rs_tls_open(const ordo__tls_opts *o, ordo__rs_node *nodes, size_t n,
                      long tmo_ms, ordo__tls_client **out);
/* An owner's value: 128 random bits in hex from getrandom(2), never from a
 * predictable generator (whoever knows an owner value can release its
 * locks). Returns 0, or ORDO_EBACKEND when the kernel gives none. */
int ordo__rs_new_owner(char out[33]);

/* ---- Connections ------------------------------------------------------------
 * A connection is a non-blocking hiredis context with the bookkeeping of
 * its exchange: commands are appended (ordo__rs_append), then
 * ordo__rs_run flushes and reads any number of connections at once with
 * poll(2) until each has the replies it waits for, has failed, or the
 * deadline passed. A failure closes the connection and keeps its ORDO_E*
 * code and text; a deadline leaves it open with its replies still owed,
 * which the caller either abandons (they are read and thrown away before
 * the next exchange's) or ends with ordo__rs_close.
 *
 * The handshake (AUTH, SELECT) is appended by ordo__rs_connect and checked
 * by the first exchange: a refused AUTH is ORDO_EAUTH, a refused SELECT
 * ORDO_EBACKEND. A write to a peer that has gone is an error, never a
 * SIGPIPE (ordo__redis_flush sends with MSG_NOSIGNAL).
 */
typedef struct ordo__rs_conn {
  redisContext *c;   /* NULL when closed */
  bool connecting;   /* the connect(2) has not completed */
  bool flushed;      /* nothing is left to write */
  bool hs_auth;      /* the AUTH reply is still to be checked */
  bool hs_select;    /* the SELECT reply is still to be checked */
  unsigned skip;     /* replies of abandoned commands, to throw away */
  unsigned want;     /* replies the current exchange waits for */
  unsigned got;      /* ...of which arrived, in rep[0..got) */
  redisReply **rep;  /* want slots */
  unsigned caprep;   /* rep's room */
  bool keep_first;   /* keep the first reply even if its command is
                        abandoned: in first (redlock.c's INFO server) */
  redisReply *first; /* that reply, for the caller to take and free */
  int err;           /* 0, or the ORDO_E* code that closed it */
  char errstr[200];  /* what err was about */
} ordo__rs_conn;

void ordo__rs_conn_init(ordo__rs_conn *k);
/*
 * ordo__rs_connect -- starts connecting k (closed) to node without waiting,
 * and appends AUTH (when the node has a password) and SELECT (when select
 * and node->db != 0). Name resolution, when host is a name, happens here
 * and is bounded by the resolver, not by any deadline; over TLS the
 * connect and the handshake are done here, within node->tls_timeout_ms,
 * and hiredis gets the plaintext end of tls.c's pump. Returns 0, or
 * ORDO_EBACKEND / ORDO_ENOMEM with k closed (k->errstr says why).
 */
int ordo__rs_connect(ordo__rs_conn *k, const ordo__rs_node *node, bool select);
/* Closes k (if open) and forgets its replies; err and errstr are kept. */
void ordo__rs_close(ordo__rs_conn *k);
/* True when k is open (connected or connecting) and has not failed. */
bool ordo__rs_open(const ordo__rs_conn *k);
/*
 * ordo__rs_append -- appends one command whose reply the next exchange
 * waits for. Returns 0, or ORDO_EBACKEND (k is closed) / ORDO_ENOMEM.
 */
int ordo__rs_append(ordo__rs_conn *k, int argc, const char **av,
                    const size_t *al);
/*
 * ordo__rs_append_loose -- appends one command whose replies no exchange
 * waits for: they are read by ordo__rs_next as they come (SUBSCRIBE and
 * UNSUBSCRIBE, whose replies Pub/Sub messages may precede or follow).
 */
int ordo__rs_append_loose(ordo__rs_conn *k, int argc, const char **av,
                          const size_t *al);
/*
 * ordo__rs_append_script -- appends EVALSHA <sha> nkeys av[0..argc) of
 * script which. ordo__rs_eval sends the text again on NOSCRIPT.
 */
int ordo__rs_append_script(ordo__rs_conn *k, int which, int nkeys, int argc,
                           const char **av, const size_t *al);
/*
 * ordo__rs_append_eval -- appends EVAL <text> nkeys av[0..argc) of script
 * which: it runs the script and loads it again (after a NOSCRIPT, or where
 * the cache may have been flushed).
 */
int ordo__rs_append_eval(ordo__rs_conn *k, int which, int nkeys, int argc,
                         const char **av, const size_t *al);
/*
 * ordo__rs_run -- drives ks[0..n) (NULL entries and closed connections are
 * passed over) until every one has its replies or has failed, until
 * enough(arg) returns true (checked after each reply; NULL: never), or
 * until deadline_ns. Returns 0, or ORDO_ETIMEDOUT when the deadline came
 * first (connections still owed replies are left as they are).
 */
int ordo__rs_run(ordo__rs_conn *const *ks, size_t n, uint64_t deadline_ns,
                 bool (*enough)(void *arg), void *arg);
/* Reply i of the exchange (i < got), handed over to the caller to free. */
redisReply *ordo__rs_take(ordo__rs_conn *k, unsigned i);
/*
 * ordo__rs_done -- ends the exchange: replies not taken are freed, and the
 * replies still owed are read and thrown away before the next exchange's.
 */
void ordo__rs_done(ordo__rs_conn *k);
/*
 * ordo__rs_eval -- runs script which on ks[0..n) at once: EVALSHA, and on
 * a NOSCRIPT reply EVAL with the text (which loads it again), bounded by
 * deadline_ns. out[i] gets connection i's reply (the caller frees it), or
 * NULL when it failed (ks[i]->err says how: it is closed then) or did not
 * answer in time (it is closed too, since whether the script ran cannot be
 * known, and its err is ORDO_ETIMEDOUT). Returns 0 or ORDO_ENOMEM.
 */
int ordo__rs_eval(ordo__rs_conn *const *ks, size_t n, int which, int nkeys,
                  int argc, const char **av, const size_t *al,
                  uint64_t deadline_ns, redisReply **out);

/*
 * ordo__rs_next -- the next reply on k, whatever it answers (a Pub/Sub
 * connection's messages come unasked): flushes what is appended and waits
 * for one reply until deadline_ns. Returns 0 with *out (the caller frees
 * it), ORDO_ETIMEDOUT (none yet; k stays open), or the code that closed k.
 * Replies owed to an exchange are not touched: use it on a connection that
 * has none.
 */
int ordo__rs_next(ordo__rs_conn *k, uint64_t deadline_ns, redisReply **out);

/*
 * ordo__rs_err_code -- what an error reply means to ordo: NOAUTH and
 * WRONGPASS are ORDO_EAUTH; CROSSSLOT and WRONGTYPE (a key's name holds
 * other data) are ORDO_EINVAL; OOM (maxmemory) is ORDO_ELIMIT; anything
 * else (MOVED, READONLY, LOADING, BUSY, ERR...) is ORDO_EBACKEND.
 */
int ordo__rs_err_code(const redisReply *r);

#endif /* ORDO_REDIS_SCRIPT_H */
