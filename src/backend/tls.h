/*
 * tls.h -- TLS for the clients of the Redis protocol (ordod://?tls=1,
 * rediss://), done with OpenSSL beside hiredis 0.14, which has none. See
 * src/backend/README.md ("tls.c").
 *
 *   ordo__tls_opts          the URL's tls options, and parsing one of them
 *   ordo__tls_client_new()  an SSL_CTX from them, made once per place
 *   ordo__tls_connect()     TCP, the handshake and its checks within a
 *                           bound; then a descriptor that hiredis speaks
 *                           plaintext on (redisConnectFd), a socketpair end
 *                           whose other end a thread pumps to the SSL
 */
#ifndef ORDO_BACKEND_TLS_H
#define ORDO_BACKEND_TLS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ordo__tls_opts {
  bool on;        /* tls=1, or the scheme says so (rediss://) */
  char ca[512];   /* tls_ca: the CA file; empty: the system's store */
  char cert[512]; /* tls_cert, tls_key: a client certificate and key */
  char key[512];
  char sni[256]; /* tls_sni: the name to send and check, not the host */
} ordo__tls_opts;

/* One query option name[0..nlen) = val[0..vlen): 0 when it was a tls
 * option and is taken, 1 when it is none of them, ORDO_EURL for a bad
 * value (tls wants 0 or 1; a file name is percent-decoded). */
int ordo__tls_opt(ordo__tls_opts *o, const char *name, size_t nlen,
                  const char *val, size_t vlen);
/* After the whole query: ORDO_EURL when tls_* options come without TLS, or
 * a certificate without its key (or the other way round); else 0. */
int ordo__tls_opts_check(const ordo__tls_opts *o);

typedef struct ordo__tls_client ordo__tls_client;
/* Loads o's files into a context: NULL with err naming the file and
 * OpenSSL's reason (the caller answers ORDO_EURL), or for no memory. */
ordo__tls_client *ordo__tls_client_new(const ordo__tls_opts *o, char *err,
                                       size_t errlen);
void ordo__tls_client_free(ordo__tls_client *tc);
/* Connects to host:port and does the TLS handshake, checking the server's
 * certificate against the CA and the host (or tls_sni) by name or
 * address, all within tmo_ms. Returns a blocking descriptor on which
 * plaintext goes both ways (give it to redisConnectFd; closing it ends
 * the TLS session), or -1 with err saying what failed (for a certificate,
 * OpenSSL's verdict on it). */
int ordo__tls_connect(ordo__tls_client *tc, const char *host, int port,
                      long tmo_ms, char *err, size_t errlen);

#endif
