/*
 * tls.c -- TLS for the Redis-protocol clients (ordod.c, redis.c,
 * redis_script.c), with OpenSSL, since the packaged hiredis (0.14) has no
 * TLS. The caller connects through ordo__tls_connect, which does TCP and the
 * handshake within the call's bound, and gets one end of a socketpair to
 * give hiredis (redisConnectFd); a thread per connection pumps bytes
 * between the other end and the SSL. hiredis thus speaks plaintext on a
 * local socket, and every deadline, poll(2) and socket timeout of the
 * callers works on it unchanged. EOF on either side ends both. See
 * src/backend/README.md ("tls.c").
 *
 * Interface: ordo__tls_opt, ordo__tls_opts_check, ordo__tls_client_new,
 * ordo__tls_client_free, ordo__tls_connect.
 */
#include "ordo_int.h"
#include "ordo_tsa.h"
#include "backend/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TLS_MS 1000000u /* nanoseconds in a millisecond */
/* How long ordo__tls_client_free waits for the place's pumps to end. They
 * end as soon as hiredis's ends are closed, which the place has done by
 * then; one still running past this (a txn never ended) is left to free
 * the client itself. */
#define TLS_CLOSE_WAIT_MS 2000

/* ---- URL options ---------------------------------------------------------
 */

static int copy_val(char *dst, size_t cap, const char *val, size_t vlen) {
  if (vlen == 0 || vlen >= cap || memchr(val, 0, vlen))
    return ORDO_EURL;
  memcpy(dst, val, vlen);
  dst[vlen] = 0;
  return 0;
}

int ordo__tls_opt(ordo__tls_opts *o, const char *name, size_t nlen,
                  const char *val, size_t vlen) {
#define IS(s) (nlen == sizeof(s) - 1 && memcmp(name, s, nlen) == 0)
  if (IS("tls")) {
    if (vlen != 1 || (val[0] != '0' && val[0] != '1'))
      return ORDO_EURL;
    o->on = val[0] == '1';
    return 0;
  }
  if (IS("tls_ca"))
    return copy_val(o->ca, sizeof o->ca, val, vlen);
  if (IS("tls_cert"))
    return copy_val(o->cert, sizeof o->cert, val, vlen);
  if (IS("tls_key"))
    return copy_val(o->key, sizeof o->key, val, vlen);
  if (IS("tls_sni"))
    return copy_val(o->sni, sizeof o->sni, val, vlen);
#undef IS
  return 1;
}

int ordo__tls_opts_check(const ordo__tls_opts *o) {
  bool any = o->ca[0] || o->cert[0] || o->key[0] || o->sni[0];
  if (any && !o->on)
    return ORDO_EURL;
  if (!o->cert[0] != !o->key[0])
    return ORDO_EURL;
  return 0;
}

/* ---- The context -----------------------------------------------------------
 */

/*
 * A place's TLS context and the count of its pump threads. A pump ends on
 * its own, but OpenSSL's state must outlive it: at exit, OPENSSL_cleanup
 * (an atexit handler) frees what a pump still running would use. So
 * ordo__tls_client_free, which ordo_close calls after the place's
 * connections are closed, waits for the pumps (cv, under mu); one that
 * outlives the bound frees the client itself, being the last (orphan).
 */
struct ordo__tls_client {
  SSL_CTX *ctx;
  char sni[256];
  ordo__mutex mu;
  pthread_cond_t cv;
  int pumps ORDO_GUARDED_BY(mu);
  bool orphan ORDO_GUARDED_BY(mu);
};

static void client_destroy(ordo__tls_client *tc) {
  SSL_CTX_free(tc->ctx);
  pthread_cond_destroy(&tc->cv);
  ordo__mutex_destroy(&tc->mu);
  free(tc);
}

/* OpenSSL's reason for the last failure, as one line; the queue is
 * cleared, so a later failure does not show an old reason. */
static void ssl_reason(char *buf, size_t cap) {
  unsigned long e = ERR_peek_last_error();
  if (e == 0)
    snprintf(buf, cap, "%s", errno ? strerror(errno) : "unknown error");
  else
    ERR_error_string_n(e, buf, cap);
  ERR_clear_error();
}

ordo__tls_client *ordo__tls_client_new(const ordo__tls_opts *o, char *err,
                                       size_t errlen) {
  char why[256];
  ordo__tls_client *tc = calloc(1, sizeof *tc);
  if (!tc) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  snprintf(tc->sni, sizeof tc->sni, "%s", o->sni);
  ordo__mutex_init(&tc->mu);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&tc->cv, &ca);
  pthread_condattr_destroy(&ca);
  tc->ctx = SSL_CTX_new(TLS_client_method());
  if (!tc->ctx) {
    ssl_reason(why, sizeof why);
    snprintf(err, errlen, "cannot make a TLS context: %s", why);
    goto fail;
  }
  SSL_CTX_set_min_proto_version(tc->ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(tc->ctx, SSL_VERIFY_PEER, NULL);
  int ok = o->ca[0] ? SSL_CTX_load_verify_locations(tc->ctx, o->ca, NULL)
                    : SSL_CTX_set_default_verify_paths(tc->ctx);
  if (ok != 1) {
    ssl_reason(why, sizeof why);
    snprintf(err, errlen, "tls_ca %s: %s", o->ca[0] ? o->ca : "(system)", why);
    goto fail;
  }
  if (o->cert[0]) {
    if (SSL_CTX_use_certificate_chain_file(tc->ctx, o->cert) != 1) {
      ssl_reason(why, sizeof why);
      snprintf(err, errlen, "tls_cert %s: %s", o->cert, why);
      goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(tc->ctx, o->key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(tc->ctx) != 1) {
      ssl_reason(why, sizeof why);
      snprintf(err, errlen, "tls_key %s: %s", o->key, why);
      goto fail;
    }
  }
  return tc;
fail:
  ordo__tls_client_free(tc);
  return NULL;
}

void ordo__tls_client_free(ordo__tls_client *tc) {
  if (!tc)
    return;
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += TLS_CLOSE_WAIT_MS / 1000;
  ordo__mutex_lock(&tc->mu);
  while (tc->pumps > 0 && ordo__cond_timedwait(&tc->cv, &tc->mu, &until) == 0)
    ;
  bool left = tc->pumps > 0;
  tc->orphan = left;
  ordo__mutex_unlock(&tc->mu);
  if (!left)
    client_destroy(tc);
}

/* ---- Connecting ------------------------------------------------------------
 */

/* Milliseconds from now to until for poll(2), at least 0. */
static int ms_left(uint64_t until) {
  uint64_t now = ordo__now_ns();
  if (now >= until)
    return 0;
  uint64_t ms = (until - now + TLS_MS - 1) / TLS_MS;
  return ms > 1000000 ? 1000000 : (int)ms;
}

/* Waits until fd is ready for events or until passes: 1, 0 (time), -1. */
static int wait_fd(int fd, short events, uint64_t until) {
  for (;;) {
    struct pollfd pf = {fd, events, 0};
    int r = poll(&pf, 1, ms_left(until));
    if (r < 0 && errno == EINTR)
      continue;
    return r < 0 ? -1 : r;
  }
}

/* A non-blocking TCP socket connected to host:port by until, or -1. */
static int tcp_connect(const char *host, int port, uint64_t until, char *err,
                       size_t errlen) {
  char ports[16];
  snprintf(ports, sizeof ports, "%d", port);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int g = getaddrinfo(host, ports, &hints, &res);
  if (g != 0) {
    snprintf(err, errlen, "%s: %s", host, gai_strerror(g));
    return -1;
  }
  int fd = -1;
  snprintf(err, errlen, "cannot connect to %s:%d", host, port);
  for (struct addrinfo *a = res; a; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                a->ai_protocol);
    if (fd < 0)
      continue;
    int r = connect(fd, a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      int soerr = 0;
      socklen_t sl = sizeof soerr;
      int w = wait_fd(fd, POLLOUT, until);
      if (w <= 0)
        errno = w == 0 ? ETIMEDOUT : errno;
      else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0)
        errno = soerr;
      r = w > 0 && soerr == 0 ? 0 : -1;
    }
    if (r == 0)
      break;
    snprintf(err, errlen, "cannot connect to %s:%d: %s", host, port,
             strerror(errno));
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0) {
    /* As hiredis does for its own TCP connections: no Nagle delay, and
     * keepalive to find a server whose host vanished. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  }
  return fd;
}

/*
 * OpenSSL writes to its socket with write(2), which raises SIGPIPE when the
 * peer has gone, and the callers promise that a dead server is an error,
 * never a SIGPIPE, whatever the program does with that signal (they send
 * with MSG_NOSIGNAL themselves). So SIGPIPE is blocked in the thread while
 * OpenSSL writes: the pump blocks it for its whole life (a SIGPIPE raised
 * by a write is the writing thread's, and dies with it, never delivered),
 * and the handshake in the caller's thread blocks it and, if its writes
 * raised one that was not pending before, takes it (sigtimedwait) before
 * the mask is put back, as libpq does (pq_block_sigpipe, pq_reset_sigpipe).
 */
typedef struct sigpipe_state {
  sigset_t old;
  bool was_pending;
} sigpipe_state;

static void sigpipe_block(sigpipe_state *st) {
  sigset_t pipe, pending;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &st->old);
  st->was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
}

static void sigpipe_restore(const sigpipe_state *st) {
  sigset_t pipe, pending;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  if (!st->was_pending && sigpending(&pending) == 0 &&
      sigismember(&pending, SIGPIPE)) {
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe, NULL, &zero) < 0 && errno == EINTR)
      ;
  }
  pthread_sigmask(SIG_SETMASK, &st->old, NULL);
}

/* Runs SSL_connect to its end within until; 0, or -1 with err. */
static int handshake(SSL *ssl, int fd, const char *name, uint64_t until,
                     char *err, size_t errlen) {
  for (;;) {
    int r = SSL_connect(ssl);
    if (r == 1)
      return 0;
    int e = SSL_get_error(ssl, r);
    short ev = e == SSL_ERROR_WANT_READ    ? POLLIN
               : e == SSL_ERROR_WANT_WRITE ? POLLOUT
                                           : 0;
    if (ev == 0) {
      long v = SSL_get_verify_result(ssl);
      char why[256];
      if (v != X509_V_OK) {
        snprintf(err, errlen, "TLS: the certificate of %s: %s", name,
                 X509_verify_cert_error_string(v));
        ERR_clear_error();
      } else {
        ssl_reason(why, sizeof why);
        snprintf(err, errlen, "TLS handshake with %s: %s", name,
                 e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && !errno
                     ? "the server closed the connection"
                     : why);
      }
      return -1;
    }
    int w = wait_fd(fd, ev, until);
    if (w <= 0) {
      snprintf(err, errlen, "TLS handshake with %s: %s", name,
               w == 0 ? "timed out" : strerror(errno));
      return -1;
    }
  }
}

/* One connection's pump: the SSL over the TCP socket, and the local end
 * of the socketpair whose other end hiredis has. */
typedef struct tls_pump {
  ordo__tls_client *tc;
  SSL *ssl;
  int tcp, local;
} tls_pump;

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/*
 * pump_main -- moves bytes until either side ends: what hiredis writes
 * goes into SSL_write, what SSL_read gives goes to hiredis. The TCP socket
 * is non-blocking and polled; the local end blocks on write, which only
 * waits for hiredis to read its replies. A byte from hiredis waits in out
 * until SSL_write takes it (retried with the same buffer, as OpenSSL
 * wants). The thread is detached and frees everything at the end.
 */
static void *pump_main(void *arg) {
  tls_pump *p = arg;
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, NULL); /* see sigpipe_block */
  char in[16384], out[16384];
  size_t outlen = 0;
  bool want_write = false;
  for (;;) {
    /* Read what the SSL has, until it wants more from the socket. */
    bool end = false;
    for (;;) {
      int r = SSL_read(p->ssl, in, sizeof in);
      if (r > 0) {
        if (write_all(p->local, in, (size_t)r) != 0) {
          end = true;
          break;
        }
        continue;
      }
      int e = SSL_get_error(p->ssl, r);
      if (e == SSL_ERROR_WANT_WRITE)
        want_write = true;
      else if (e != SSL_ERROR_WANT_READ)
        end = true;
      break;
    }
    if (end)
      break;
    if (outlen > 0) {
      int r = SSL_write(p->ssl, out, (int)outlen);
      if (r > 0) {
        outlen = 0;
        want_write = false;
      } else {
        int e = SSL_get_error(p->ssl, r);
        if (e == SSL_ERROR_WANT_WRITE)
          want_write = true;
        else if (e != SSL_ERROR_WANT_READ)
          break;
      }
    }
    struct pollfd fds[2] = {
        {p->tcp, (short)(POLLIN | (want_write ? POLLOUT : 0)), 0},
        {p->local, (short)(outlen == 0 ? POLLIN : 0), 0}};
    int pr = poll(fds, 2, -1);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr < 0)
      break;
    if (fds[0].revents & POLLOUT)
      want_write = false;
    if (outlen == 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = recv(p->local, out, sizeof out, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break; /* hiredis closed its end: the session ends */
      outlen = (size_t)n;
    }
  }
  SSL_shutdown(p->ssl); /* a close_notify if the socket takes it */
  ERR_clear_error();
  SSL_free(p->ssl);
  /* This thread's own OpenSSL state (its error queue, 904 bytes) is freed
   * now, while OpenSSL surely lives: left to the thread's exit, it raced
   * the process's exit once ordo_close had seen the count fall (the
   * thread is detached), and OPENSSL_cleanup could run first: a leak that
   * LeakSanitizer reported after `ordo bank` over TLS. */
  OPENSSL_thread_stop();
  close(p->tcp);
  close(p->local); /* hiredis reads EOF */
  ordo__tls_client *tc = p->tc;
  free(p);
  ordo__mutex_lock(&tc->mu);
  bool last = --tc->pumps == 0 && tc->orphan;
  pthread_cond_broadcast(&tc->cv);
  ordo__mutex_unlock(&tc->mu);
  if (last)
    client_destroy(tc);
  return NULL;
}

int ordo__tls_connect(ordo__tls_client *tc, const char *host, int port,
                      long tmo_ms, char *err, size_t errlen) {
  uint64_t until = ordo__now_ns() + (uint64_t)tmo_ms * TLS_MS;
  const char *name = tc->sni[0] ? tc->sni : host;
  int fd = tcp_connect(host, port, until, err, errlen);
  if (fd < 0)
    return -1;
  SSL *ssl = SSL_new(tc->ctx);
  if (!ssl || SSL_set_fd(ssl, fd) != 1) {
    snprintf(err, errlen, "TLS: out of memory");
    goto fail;
  }
  /* The server's certificate must name what we connect to: an address as
   * an IP subjectAltName, a host name as a DNS one (sent as SNI too). */
  unsigned char ip[16];
  bool is_ip =
      inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
  X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
  if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, name) != 1
            : SSL_set1_host(ssl, name) != 1 ||
                  SSL_set_tlsext_host_name(ssl, name) != 1) {
    snprintf(err, errlen, "TLS: cannot check the name %s", name);
    goto fail;
  }
  sigpipe_state sp;
  sigpipe_block(&sp);
  int hs = handshake(ssl, fd, name, until, err, errlen);
  sigpipe_restore(&sp);
  if (hs != 0)
    goto fail;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    snprintf(err, errlen, "socketpair: %s", strerror(errno));
    goto fail;
  }
  tls_pump *p = malloc(sizeof *p);
  pthread_t th;
  pthread_attr_t at;
  bool started = false;
  if (p && pthread_attr_init(&at) == 0) {
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    p->tc = tc;
    p->ssl = ssl;
    p->tcp = fd;
    p->local = sv[1];
    ordo__mutex_lock(&tc->mu);
    tc->pumps++;
    ordo__mutex_unlock(&tc->mu);
    started = pthread_create(&th, &at, pump_main, p) == 0;
    if (!started) {
      ordo__mutex_lock(&tc->mu);
      tc->pumps--;
      ordo__mutex_unlock(&tc->mu);
    }
    pthread_attr_destroy(&at);
  }
  if (!started) {
    free(p);
    close(sv[0]);
    close(sv[1]);
    snprintf(err, errlen, "TLS: cannot start the connection's thread");
    goto fail;
  }
  return sv[0];
fail:
  SSL_free(ssl);
  close(fd);
  return -1;
}
