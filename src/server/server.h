/*
 * server.h -- ordod's private declarations: configuration, connections,
 * sessions, the server, and the command table. See README.md.
 *
 * One libuv loop on one thread owns everything here. The engine's events
 * (a waiting LOCK granted, timed out, or chosen as a deadlock victim) can
 * fire on other threads (the engine's timer thread), so they are queued
 * under ev_mu and handed to the loop through an async handle.
 */
#ifndef ORDO_SERVER_H
#define ORDO_SERVER_H

#include "ordo_int.h"
#include "ordo_tsa.h"
#include "server/resp.h"

#include <pthread.h>
#include <stdbool.h>
#include <sys/queue.h>
#include <uv.h>

#define ORDOD_DEFAULT_PORT 7411
#define ORDOD_VERSION "0.1.0"
/* A resume token: 16 bytes from getrandom(2), 32 hex digits. */
#define ORDOD_TOKEN_BYTES 16
#define ORDOD_TOKEN_HEX (2 * ORDOD_TOKEN_BYTES)
/* A global txn id: 8 bytes of begin time and 8 random (docs/protocol.md). */
#define ORDOD_GID_BYTES 16
#define ORDOD_GID_HEX (2 * ORDOD_GID_BYTES)
/* HELDAT's list: at most this many bytes of shard names. */
#define ORDOD_HELDAT_MAX 4096
/* A shard's name, "host:port" (docs/distributed.md). */
#define ORDOD_SHARD_NAME 256
/*
 * Before AUTH (with --requirepass), a connection may send requests of at
 * most ORDOD_PREAUTH_REQUEST bytes and ORDOD_PREAUTH_ARGS arguments (HELLO 3
 * AUTH user pass SETNAME name is 7), its input buffer is no larger, and at
 * most ORDOD_PREAUTH_OUTPUT reply bytes may wait for it; past any of them it
 * hears -NOAUTH and is closed. So 10,000 strangers cost the server about
 * 10,000 x (4 KiB + a connection and a session) rather than 10,000 x
 * max_request, as Redis has bounded them since CVE-2021-32675.
 */
#define ORDOD_PREAUTH_REQUEST 4096
#define ORDOD_PREAUTH_ARGS 10
#define ORDOD_PREAUTH_OUTPUT 65536
/* The work one connection gets in one turn of the loop: at most this many
 * requests, and no request more once its replies of this turn reach
 * ORDOD_TURN_OUTPUT bytes (a reply's size is about its cost: HOLDERS of a
 * key with 1,000 holders writes 33 KB). A connection with more waits for
 * the next turn, reading nothing meanwhile, so clients take turns and none
 * holds the loop for a whole pipeline. */
#define ORDOD_TURN_REQUESTS 64
#define ORDOD_TURN_OUTPUT (128u << 10)
/* A connection closed after a last reply (QUIT, a protocol error) sends its
 * reply and a FIN, then reads and drops what the peer still sends, for at
 * most this long and this much: a close with unread input would send a RST,
 * and a RST can destroy the reply in the peer's buffer before it reads it
 * (the "lingering close" of HTTP servers). */
#define ORDOD_LINGER_MS 1000
#define ORDOD_LINGER_BYTES 65536
/* A user's name: at most this many bytes (conn.user holds one). */
#define ORDOD_USER_MAX 128

typedef struct srv_config {
  char bind[64];
  int port; /* 0: any free port */
  char unixsocket[256];
  char requirepass[256];
  char aclfile[512]; /* users (acl.c), if any */
  char dir[512];
  int maxclients;
  long lease_ms;
  bool no_restart_delay;
  size_t max_keys;           /* keys in one LOCK */
  size_t max_key_len;        /* bytes in one key */
  size_t max_request;        /* bytes in one request */
  size_t max_output;         /* pending reply bytes of one client */
  size_t max_session_locks;  /* keys held by one session */
  size_t max_locks;          /* the engine's lock objects alive at once */
  ordo_order_mode_t order;   /* the engine's lock-order checker */
  long starvation_us;        /* the engine's starvation bound */
  unsigned starvation_holds; /* ...or this many mean hold times */
  char config[512];          /* the config file read, if any */
  int verbose;               /* 0 warnings, 1 info, 2 debug */
  /* Shards (docs/distributed.md): the other shards, comma-separated;
   * this one's name (default bind:port); how long a wait lasts before it
   * is probed (0: at once). */
  char peers[4096];
  char shard_name[ORDOD_SHARD_NAME];
  long probe_delay_ms;
  /* BLOCKED entries kept per peer; past it a peer hears -BUSY. */
  size_t peer_blocked_max;
  /* Metrics and the status page (http.c): the HTTP port (-1: none, 0: any
   * free port) and its address; the engine's deadlock_timeout_ms (0: the
   * search runs when a txn blocks, as it always did). */
  int metrics_port;
  char metrics_bind[64];
  long deadlock_timeout_ms;
  /* A LOCK that waits longer than this is logged once while it waits and
   * kept in the long-wait log (LOCKWAITS); 0: off. */
  long log_lock_waits_ms;
  /* TLS (tls.c): a second listener, -1 when off (0: any free port), and
   * the files and the client-certificate mode of --tls-auth-clients. */
  int tls_port;
  char tls_cert[512], tls_key[512], tls_ca[512];
  int tls_auth; /* SRV_TLS_AUTH_* */
} srv_config;

enum { SRV_TLS_AUTH_NO = 0, SRV_TLS_AUTH_YES = 1, SRV_TLS_AUTH_OPTIONAL = 2 };
/* A TLS handshake not finished this long after the accept is dropped. */
#define ORDOD_TLS_HANDSHAKE_MS 10000
/* A TLS connection's read buffer for ciphertext: one record and more. */
#define ORDOD_TLS_RBUF 17408

typedef struct srv srv;
typedef struct sess sess;
typedef struct conn conn;
typedef struct srv_probe srv_probe;
typedef struct srv_http srv_http;
typedef struct srv_user srv_user;
typedef struct srv_acl srv_acl;
typedef struct srv_tls srv_tls;

/* A connection: a socket and its buffers. */
struct conn {
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_stream_t stream;
    uv_handle_t handle;
  } h;
  srv *s;
  sess *sess; /* the session it speaks for */
  char *in;   /* bytes read, not yet parsed */
  size_t inlen, incap, need;
  ordo__out out;  /* replies not yet handed to libuv */
  size_t writing; /* bytes handed to libuv, not yet written */
  bool closing, authed;
  bool closing_after_reply; /* QUIT */
  /* Closing after a last reply (conn_linger): the reply and a FIN are
   * sent, and what the peer still sends is read and dropped until it
   * closes, ORDOD_LINGER_BYTES arrive, or ORDOD_LINGER_MS pass. */
  bool lingering;
  bool closed;      /* uv_close called on its handles */
  int open_handles; /* the socket, and the linger timer once started */
  size_t lingered;  /* bytes dropped while lingering */
  uv_timer_t linger;
  uv_shutdown_t shut;
  char user[ORDOD_USER_MAX]; /* the AUTH user ("default" when none) */
  size_t user_len;
  /* Its user's rights (acl.c), shared with every connection of the user;
   * NULL only where no server made it (a unit test): every right. */
  const srv_user *acl_user;
  /* May run the admin commands (CLIENT KILL, SESSION KILL of another
   * user's session, CONFIG SET, LOCKWAITS): its user may run every @admin
   * command (acl.c sets it at accept and at AUTH). Read through
   * srv_conn_is_admin. */
  bool admin;
  int resp; /* 2 or 3 */
  uint64_t id;
  uint64_t created_ms;
  char name[64];
  char addr[64];
  LIST_ENTRY(conn) link; /* the server's list */
  /* On the server's deferred list: it has requests left that this turn's
   * budget did not run; reading is stopped until they have run. */
  bool deferred;
  TAILQ_ENTRY(conn) dlink;
  int peer; /* said PEER HELLO: another shard's link, its index (0: none) */
  /* Accepted on the TLS port: its SSL, and the ciphertext read buffer
   * (alloc_cb's for it; the plaintext goes to in). NULL: a plain one. */
  srv_tls *tls;
  char *tls_rbuf;
};

/* A session: a txn, its lease, its wait. Outlives its connection when it
 * is resumable, until its lease runs out. */
struct sess {
  uint64_t id;
  ordo_txn_t *txn;
  conn *c; /* NULL while detached */
  uv_timer_t lease_timer;
  long lease_ms;
  uint64_t expires_ms;
  bool waiting;    /* inside LOCK */
  uint64_t gen;    /* which LOCK an event answers */
  ordo_req_t *req; /* the waiting LOCK's keys (copies in keybuf) */
  size_t nreq;
  char *keybuf;
  bool resumable;
  char token[ORDOD_TOKEN_HEX + 1]; /* getrandom's bytes in hex */
  uint64_t token_hash;             /* srv_token_hash(token) */
  sess *tnext;                     /* the server's token map */
  char user[128]; /* who made it resumable: only they may resume it */
  size_t user_len;
  bool lease_lost; /* the next command hears -LEASE */
  bool closing;
  /* The lease ran out while the connection had unread bytes: decided after
   * this turn's reads (srv's recheck list), so that a request the busy loop
   * had not read yet still counts. */
  bool recheck;
  TAILQ_ENTRY(sess) rlink;
  sess *hnext; /* the server's id map */
  /* The txn's global id across shards (SESSION GID; docs/protocol.md,
   * "Shards"), set once; and where else it holds keys, as its last LOCK
   * said (HELDAT: shard names, comma-separated, heap; NULL when none). */
  bool have_gid;
  uint8_t gid[ORDOD_GID_BYTES];
  char *heldat;
  /* Probes (probe.c): its part of them (NULL without a gid or --peers);
   * on the waiting list; a cross-shard abort of it under way; when it is
   * probed next and how often; the cycle its -DEADLOCK names (empty: the
   * engine's). */
  struct srv_psess *pr;
  /* The latest ATTEMPT its LOCKs gave (0: none): what a RELEASE may take. */
  uint32_t attempt;
  bool probe_listed, probe_aborting;
  /* A confirmed cycle waits for it here: its requests wait (a release
   * would break the cycle between the confirmation and the abort) until
   * the abort's UNPIN or its bound (probe.c keeps the freezes). */
  bool frozen;
  /* A cross-shard victim whose -DEADLOCK waits until its keys on its other
   * shards are gone (probe.c calls srv_lock_answer then); its requests
   * wait behind it. */
  bool xhold;
  /* What would have ended it (its connection closed, its lease ran out)
   * waits while probe.c holds it (a pin or a freeze of a cycle being
   * aborted): srv_sess_unheld ends it then. */
  bool end_deferred, lease_deferred;
  /* SESSION KILL came while it was held so: done then, by kill_by. */
  bool kill_deferred;
  char kill_by[ORDOD_USER_MAX];
  unsigned probe_every_ms;
  uint64_t probe_due_ms;
  TAILQ_ENTRY(sess) plink;
  char xcycle[1024];
  /* The long-wait log (LOCKWAITS): when the waiting LOCK began; on the
   * server's list of waits not yet past --log-lock-waits (start order);
   * the log entry it made once past it (0: none). */
  uint64_t wait_start_ms;
  bool lw_listed;
  TAILQ_ENTRY(sess) lwlink;
  uint64_t lw_seq;
  /* SESSION KILL ended it: its pending LOCK's entry says "killed". */
  bool killed;
};

/* A deadlock this server ended, one per victim (DEADLOCKS, docs/protocol.md):
 * the newest SRV_DL_HISTORY are kept, in srv.dl by seq. */
#define SRV_DL_HISTORY 64
typedef struct srv_dl {
  uint64_t seq;     /* 1, 2, ... */
  uint64_t time_ms; /* CLOCK_REALTIME, ms */
  bool cross_shard; /* found by the probes (probe.c), not the engine */
  uint64_t victim;  /* its session id */
  bool have_gid;    /* and its txn's global id, when it has one */
  uint8_t gid[ORDOD_GID_BYTES];
  char cycle[1024]; /* as its -DEADLOCK names it */
} srv_dl;

/* A wait that passed --log-lock-waits (LOCKWAITS, docs/protocol.md): the
 * newest SRV_LW_HISTORY are kept, in srv.lw by seq. Its blocker chain is
 * read from the engine when the wait passes the bound. */
#define SRV_LW_HISTORY 128
#define SRV_LW_KEYS 16
typedef struct srv_lw {
  uint64_t seq;       /* 1, 2, ... */
  uint64_t time_ms;   /* when the wait began, CLOCK_REALTIME, ms */
  uint64_t start_ms;  /* the same, on srv_now_ms's clock */
  uint64_t waited_ms; /* how long it waited, once it ended */
  uint64_t sess;
  bool have_gid;
  uint8_t gid[ORDOD_GID_BYTES];
  const char *state; /* "waiting", "granted", "timeout", "deadlock", ... */
  size_t nkeys;      /* keys of the LOCK */
  size_t nshown;     /* the first ones, kept: at most SRV_LW_KEYS */
  uint16_t klen[SRV_LW_KEYS];
  char kbuf[512];
  char chain[2048]; /* lines "session N waits for ..." joined by '\n' */
} srv_lw;

/* An engine event, on its way to the loop. */
typedef struct srv_event {
  uint64_t sess_id, gen;
  int status;
} srv_event;

struct srv {
  srv_config cfg;
  uv_loop_t *loop;
  uv_tcp_t tcp;
  uv_pipe_t unix_sock;
  uv_tcp_t tls_tcp;           /* the --tls-port listener */
  struct ssl_ctx_st *tls_ctx; /* its SSL_CTX, NULL without TLS */
  uv_timer_t tls_timer;       /* drops handshakes past ORDOD_TLS_HANDSHAKE_MS */
  bool have_tcp, have_unix, have_tls;
  uv_signal_t sigterm, sigint;
  uv_async_t wake;
  ordo_t *o;
  uint64_t epoch; /* fencing token epoch: tokens are epoch << 40 | engine's */
  uint64_t started_ms, grant_after_ms;
  bool stopping;

  LIST_HEAD(, conn) conns;
  int nconns;
  TAILQ_HEAD(, conn) deferred; /* connections with requests left over */
  size_t ndeferred;
  uv_idle_t turn;             /* runs them, one budget each, next turn */
  TAILQ_HEAD(, sess) recheck; /* leases to decide after this turn's reads */
  uv_check_t recheck_h;
  uint64_t next_conn_id, next_sess_id;
  uint64_t next_wseq; /* a LOCK's number, unique on the server (sess.gen) */
  sess **smap;        /* open hash of sessions by id */
  size_t smap_cap, nsess;
  sess **tmap; /* chained hash of resumable sessions by token */
  size_t tmap_cap, ntok;
  uint64_t token_key[2]; /* the token hash's secret key, from getrandom */

  /*
   * ev_mu guards evq, nevq and capevq: engine events are pushed from any
   * thread and drained on the loop thread. It is a leaf lock: nothing else
   * is taken while it is held.
   */
  ordo__mutex ev_mu;
  srv_event *evq ORDO_GUARDED_BY(ev_mu) ORDO_PT_GUARDED_BY(ev_mu);
  size_t nevq ORDO_GUARDED_BY(ev_mu), capevq ORDO_GUARDED_BY(ev_mu);

  /* Counters (loop thread only). */
  uint64_t total_conns, total_cmds, rejected_conns, lock_grants, lock_waits,
      lock_timeouts, deadlock_victims, lease_expiries, protocol_errors,
      order_refusals, output_cutoffs;
  /* The lock-order checker's last report, as one line: its callback runs
   * inside ordo_lock_all_async, on the loop thread, so cmd_lock can clear
   * it before the call and read it after (loop thread only). */
  char order_last[512];
  ordo__resp_arg *argv; /* the parser's argument array, cfg.max_keys*2+16 */
  size_t max_args;
  srv_probe *probe;          /* the peers and probes, NULL without --peers */
  srv_http *http;            /* the metrics port, NULL without --metrics-port */
  srv_acl *acl;              /* the users (acl.c), for the server's life */
  srv_dl dl[SRV_DL_HISTORY]; /* the deadlock history (loop thread only) */
  uint64_t ndl;              /* deadlocks recorded: dl[(seq - 1) % H] */
  /* The long-wait log (loop thread only): waiting sessions in start order,
   * not yet past --log-lock-waits; the timer that fires when the first
   * passes it; the entries, lw[(seq - 1) % H]. */
  TAILQ_HEAD(, sess) lwq;
  uv_timer_t lw_timer;
  srv_lw lw[SRV_LW_HISTORY];
  uint64_t nlw;
};

/* The command table (commands.c). */
typedef struct srv_cmd {
  const char *name;
  int arity; /* > 0 exactly, < 0 at least -arity, counting the name */
  unsigned flags;
  void (*fn)(conn *c, size_t argc, ordo__resp_arg *argv);
  const char *help;
} srv_cmd;

enum { CMD_NOAUTH = 1 << 0, CMD_LOCKS = 1 << 1 };

/* Whether c may run the admin commands (the contract with the ACLs: they
 * set c->admin from the user's rights). */
static inline bool srv_conn_is_admin(const conn *c) {
  return c->admin;
}

const srv_cmd *srv_cmd_find(const char *name, size_t len);
size_t srv_cmd_count(void);
const srv_cmd *srv_cmd_at(size_t i);

/* server.c, for commands.c */
void srv_log(srv *s, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t srv_now_ms(void);
sess *srv_sess_find(srv *s, uint64_t id);
/* The resumable session whose token is token[0..len), or NULL: looked up
 * by a keyed hash, compared in constant time. */
sess *srv_sess_by_token(srv *s, const char *token, size_t len);
/* Makes ss resumable: a fresh token from getrandom(2), entered in the token
 * map. 0, or -1 (the kernel gave no random bytes, or no memory). */
int srv_sess_make_resumable(srv *s, sess *ss);
/* Fills buf with n bytes from getrandom(2); 0, or -1. */
int srv_random(void *buf, size_t n);
/* A global txn id in lowercase hex, and back (false: not 32 hex digits). */
void srv_gid_hex(const uint8_t gid[ORDOD_GID_BYTES],
                 char out[ORDOD_GID_HEX + 1]);
bool srv_gid_parse(const char *s, size_t len, uint8_t gid[ORDOD_GID_BYTES]);
void srv_sess_renew(sess *ss);
void srv_sess_attach(conn *c, sess *ss);
void srv_event_push(srv *s, uint64_t sess_id, uint64_t gen, int status)
    ORDO_EXCLUDES(s->ev_mu);
void srv_lock_reply(conn *c, sess *ss);
/* Appends ss's holds, as the engine records them, to out: LOCKS's array of
 * [key, mode, token, holds], or with lost the RESP3 push ["lease-lost", key
 * ...]; returns how many. Loop thread only. */
size_t srv_held_write(ordo__out *out, srv *s, sess *ss, bool lost);
void srv_sess_drop(srv *s, sess *ss);
/* SESSION KILL: ends ss now (its locks released, a waiting LOCK
 * cancelled); an attached connection hears -KILLED naming by and is closed
 * after it, unless it is self (the killer's own), which the caller closes
 * after its reply. */
void srv_sess_kill(srv *s, sess *ss, const char *by, size_t by_len,
                   const conn *self);
/* CLIENT KILL: closes c now (its session ends, or detaches if resumable). */
void srv_conn_kill(conn *c);
/* The long-wait log: ss's LOCK began to wait; its wait ended (state is
 * the outcome's name). */
void srv_wait_begin(srv *s, sess *ss);
void srv_wait_end(srv *s, sess *ss, const char *state);
/* --log-lock-waits changed: the timer follows the new bound. */
void srv_wait_rearm(srv *s);
/* One option by its flag's name (no dashes), as the flags and the config
 * file set it: 0, or -1 with err set (the valid range in it). */
int srv_conf_set(srv_config *cfg, const char *name, const char *val, char *err,
                 size_t errlen);
/* A held cross-shard victim's -DEADLOCK, now that its keys elsewhere are
 * gone (probe.c): written, and its queued requests run. */
void srv_lock_answer(srv *s, sess *ss);
/* probe.c let go of the session's last pin or freeze: an end that waited
 * (end_deferred, lease_deferred) happens now. */
void srv_sess_unheld(srv *s, sess *ss);
/* Ends a freeze (probe.c): the session's queued requests run next turn. */
void srv_sess_thaw(sess *ss);
void srv_dispatch(conn *c, size_t argc, ordo__resp_arg *argv);

/* probe.c: shards' peer links and deadlock probes (docs/distributed.md). */
int srv_probe_init(srv *s, char *err, size_t errlen);
void srv_probe_close(srv *s);
/* The session got its gid (SESSION GID): probes can find it. */
void srv_probe_gid_set(srv *s, sess *ss);
/* A session other than except with this gid and a connection, or NULL: a
 * txn has one session per shard, and probes name txns by gid. */
sess *srv_probe_gid_attached(srv *s, const uint8_t *gid, const sess *except);
/* Whether c's peer has closed its end (an EOF the loop has not read yet):
 * then it is closed now. */
bool srv_conn_gone(conn *c);
/* The session ends: probe.c forgets it. */
void srv_probe_sess_drop(srv *s, sess *ss);
void srv_probe_wait_begin(srv *s, sess *ss);
void srv_probe_wait_end(srv *s, sess *ss);
/* Whether a pin or a freeze holds the session (its end must wait). */
bool srv_probe_holds_sess(srv *s, sess *ss);
/* A cross-shard victim's event came: true when its -DEADLOCK must wait for
 * its keys on other shards (probe.c calls srv_lock_answer then). */
bool srv_probe_victim_hold(srv *s, sess *vs);
/* A LOCK may go on: false (with -DEADLOCK written) once, after a RELEASE
 * let the session's keys here go. */
bool srv_probe_lock_check(srv *s, conn *c, sess *ss, uint32_t attempt);
/* An UNLOCK (all: of every key, so the client knows it holds nothing
 * here). */
void srv_probe_unlocked(srv *s, sess *ss, bool all);
/* A connection closed: a peer's link takes what it told us with it. */
void srv_probe_conn_closed(srv *s, conn *c);
/* A cross-shard victim's -DEADLOCK has been written: its cycle's pins go. */
void srv_probe_victim_told(srv *s, sess *vs);
void srv_probe_cmd(conn *c, size_t argc, ordo__resp_arg *argv);
size_t srv_probe_info(srv *s, char *buf, size_t cap);
/* Cross-shard deadlocks resolved here (this shard the victim's). */
uint64_t srv_probe_deadlocks(srv *s);
/* The wait-for graph as GRAPH writes it (DOT or JSON, each session with a
 * global id named by it too), in a malloc'd buffer of *len bytes; NULL
 * when there is no memory or no temporary file. commands.c. */
char *srv_graph_text(srv *s, ordo_graph_fmt_t fmt, size_t *len);

/* http.c: the metrics port and the status page (docs/metrics.md). */
int srv_http_start(srv *s, char *err, size_t errlen);
/* The port it listens on (after srv_http_start). */
int srv_http_port(const srv *s);
/* Stops it: its handles are closed (the loop frees them on its next run)
 * and the daemon stopped. Loop thread, before the loop's last run. */
void srv_http_close(srv *s);

/* acl.c: users, their passwords, and what they may run and lock
 * (README.md, "Users and ACLs"). srv_acl_load reads --aclfile (path, or
 * NULL or "" for none) and makes the default user from requirepass unless
 * the file defines it; 0, or -1 with err set (nothing loaded). */
int srv_acl_load(srv_acl **out, const char *path, const char *requirepass,
                 char *err, size_t errlen);
void srv_acl_free(srv_acl *a);
/* Whether the default user needs no password: anyone may connect. */
bool srv_acl_open(const srv_acl *a);
/* Whether --aclfile was given (so AUTH's user names are the file's). */
bool srv_acl_from_file(const srv_acl *a);
/* A new connection speaks as the default user. */
void srv_acl_conn_init(conn *c);
/* AUTH [user] pass: 0 and c speaks as that user, or -1 (no such user, off,
 * or a wrong password: one answer for all three). */
int srv_acl_auth(conn *c, const char *user, size_t ulen, const char *pass,
                 size_t plen);
/* Whether c's user may run k with these arguments, keys included; 0, or
 * -1 with -NOPERM written to c. */
int srv_acl_check(conn *c, const srv_cmd *k, size_t argc,
                  const ordo__resp_arg *argv);
bool srv_acl_glob(const char *pat, size_t pn, const char *key, size_t sn);
int srv_conf_parse_file(srv_config *cfg, const char *path, char *err,
                        size_t errlen);
/* tls.c: TLS over memory BIOs, inside the loop (README.md, "TLS"). The
 * SSL_CTX from the config's files, or NULL with err naming the file and
 * OpenSSL's reason. */
struct ssl_ctx_st *srv_tls_ctx_new(const srv_config *cfg, char *err,
                                   size_t errlen);
void srv_tls_ctx_free(struct ssl_ctx_st *ctx);
srv_tls *srv_tls_new(struct ssl_ctx_st *ctx);
void srv_tls_free(srv_tls *t);
/* Hands ciphertext from the socket to OpenSSL; 0, or -1 (no memory). */
int srv_tls_feed(srv_tls *t, const char *p, size_t n);
/* Plaintext into dst, driving the handshake: bytes, 0 (wants more from the
 * peer), or -1 with why (a TLS error, or the peer's close_notify). */
long srv_tls_read(srv_tls *t, char *dst, size_t cap, char *why, size_t whycap);
/* Encrypts p[0..n) into the outgoing ciphertext: bytes taken (0 before the
 * handshake is done), or -1 with why. */
long srv_tls_write(srv_tls *t, const char *p, size_t n, char *why,
                   size_t whycap);
bool srv_tls_ready(const srv_tls *t);
/* Whether bytes fed may hold plaintext not yet read. */
bool srv_tls_has_plain(const srv_tls *t);
/* Ciphertext waiting for the socket, and taking it. */
size_t srv_tls_pending(const srv_tls *t);
size_t srv_tls_take(srv_tls *t, char *dst, size_t cap);
/* Queues a close_notify (when the handshake was done). */
void srv_tls_shutdown(srv_tls *t);
/* --tls-auth-clients: "no", "yes", "optional" and back (-1: none of them). */
const char *srv_tls_auth_name(int mode);
int srv_tls_auth_parse(const char *s);
/* The name of a lock-order checker mode: "off", "warn" or "refuse". */
const char *srv_order_name(ordo_order_mode_t m);

#endif
